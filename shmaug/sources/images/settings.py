"""What every image source shares: its settings, checked once, and its read-side protocol.

``ImageFiles`` and ``ImageRecords`` take the same options with the same defaults and refuse
the same values with the same messages; this module owns those checks, the label encoding
they share, how a source's ``repr`` shows the call that made it, and ``ImageSource``: the
methods both offer over their reader (length, classes, output shape, ``read``). It reads no
image itself.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from . import folders as F
from .decode import COLOR_MODES
from .reader import Decoder, Reader
from ...errors import ArgumentError, ArgumentTypeError, got

KERAS_INTERPOLATIONS = ("area", "bicubic", "bilinear", "lanczos3", "lanczos5", "nearest")
DEFAULT_IMAGE_SIZE = (256, 256)  # Keras' default for image_dataset_from_directory


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeSettings:
    """How a source turns a sample's bytes into its image: the settings ``ImageFiles`` and
    ``ImageRecords`` share, with Keras' defaults. Keyword-only, so no two can swap places;
    checked and normalized once, here (``image_size`` to two ints, the flags to bools).

    Raises:
        ArgumentError, ArgumentTypeError: naming the argument, the value and the fix.

    Example:
        >>> DecodeSettings(image_size=[64, 48], color_mode=None).image_size
        (64, 48)
    """

    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE
    color_mode: str | None = "rgb"
    interpolation: str = "bilinear"
    on_error: str = "raise"
    label_mode: str | None = "int"
    reduced_decode: bool = True
    crop_to_aspect_ratio: bool = False
    pad_to_aspect_ratio: bool = False
    dtype: str = "uint8"

    def __post_init__(self) -> None:  # checked in this order: the first wrong one is named
        size = image_size_of(self.image_size)
        check_choice("color_mode", self.color_mode, (*sorted(COLOR_MODES), None),
                     "e.g. `color_mode='rgb'` (None keeps the files' channels)")
        check_choice("interpolation", self.interpolation, KERAS_INTERPOLATIONS,
                     "e.g. `interpolation='bilinear'`")
        check_choice("on_error", self.on_error, ("raise", "skip"),
                     "`on_error='skip'` replaces unreadable images and counts them in stats()")
        check_choice("label_mode", self.label_mode, F.LABEL_MODES,
                     "'int', 'categorical', 'binary' or None (no labels)")
        if not isinstance(self.reduced_decode, (bool, np.bool_)):
            raise ArgumentTypeError(
                f"`reduced_decode` must be True or False; received "
                f"{got(self.reduced_decode)}. Fix: `reduced_decode=False` decodes every pixel."
            )
        F.check_aspect_args(self.crop_to_aspect_ratio, self.pad_to_aspect_ratio)
        object.__setattr__(self, "dtype", pixel_dtype(self.dtype))
        if size is None and (self.crop_to_aspect_ratio or self.pad_to_aspect_ratio):
            which = "crop_to_aspect_ratio" if self.crop_to_aspect_ratio else "pad_to_aspect_ratio"
            raise ArgumentError(
                f"`{which}=True` needs an `image_size` to take its aspect from; received "
                f"image_size=None (photos at their own sizes). Fix: pass `image_size=(h, w)`, "
                f"or leave `{which}` False and crop in the pipeline "
                f"(`Op('random_resized_crop', height=h, width=w)`)."
            )
        for name, value in (("image_size", size), ("reduced_decode", bool(self.reduced_decode)),
                            ("crop_to_aspect_ratio", bool(self.crop_to_aspect_ratio)),
                            ("pad_to_aspect_ratio", bool(self.pad_to_aspect_ratio))):
            object.__setattr__(self, name, value)

    @property
    def aspect(self) -> str | None:
        """``"crop"``, ``"pad"`` or None: Keras' two aspect-ratio flags as one value."""
        return "crop" if self.crop_to_aspect_ratio else "pad" if self.pad_to_aspect_ratio else None

    def channels(self, given: int = 0) -> int:
        """The output channels: ``color_mode``'s, or ``given`` (0: learn from sample 0)."""
        return COLOR_MODES[self.color_mode] if self.color_mode else int(given)


def pixel_dtype(value: Any) -> str:
    """``dtype`` as its name: "uint8" (Keras' decoders: 16-bit files scaled to 8 bits) or
    "uint16" (16-bit files kept, 8-bit ones scaled to 16 bits, as ``tf.io.decode_png(dtype=
    tf.uint16)``: every sample on one scale)."""
    try:
        name = str(np.dtype(value).name)
    except TypeError:
        name = ""
    if name not in DTYPES:
        raise ArgumentError(
            f"`dtype` must be 'uint8' or 'uint16'; received {got(value)}. Fix: "
            f"`dtype='uint16'` keeps 16-bit files' values (8-bit files scaled by 257); float "
            f"or many-band data goes in as an array (np.load(path, mmap_mode='r')).")
    return name


DTYPES = ("uint8", "uint16")

# The shared settings' names and defaults, from the one place they are written.
SETTINGS_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(DecodeSettings)}


def defaults_of(*constructors: Callable[..., Any]) -> dict[str, Any]:
    """The defaults of ``constructors``' arguments, read from their signatures (never written
    twice): their own arguments', in signature order, then the shared settings'."""
    own = {name: p.default for c in constructors
           for name, p in inspect.signature(c).parameters.items()
           if p.default is not p.empty and name not in SETTINGS_DEFAULTS}
    return {**own, **SETTINGS_DEFAULTS}


def encoded_labels(labels: Any, label_mode: str | None, n: int,
                   names: tuple[str, ...]) -> tuple[Any, np.ndarray | None]:
    """``(labels as label_mode encodes them, int64 class index per sample)``, or
    ``(None, None)`` for an unlabelled source."""
    if labels is None or label_mode is None:
        return None, None
    classes = F.classes_of(labels, label_mode, n)
    count = len(names) or (int(classes.max()) + 1 if len(classes) else 0)
    return F.encode(classes, label_mode, count), classes


def passed(given: dict[str, Any], defaults: dict[str, Any]) -> str:
    """``, name=value`` for each argument that differs from its default, in ``given``'s order."""
    out = []
    for name, value in given.items():
        default = defaults.get(name, object())
        if isinstance(value, (list, tuple)) and isinstance(default, tuple):
            value = tuple(value)
        plain = value is None or isinstance(value, (str, bool, int, float, tuple))
        if plain and type(value) is type(default) and value == default:
            continue
        if plain or isinstance(value, list) and len(value) <= 8:
            out.append(f", {name}={value!r}")
        else:
            out.append(f", {name}=<{type(value).__name__}>")
    return "".join(out)


def summary(kind: str, made: str, count: str, labelled: bool, class_names: Sequence[str],
            shape: tuple[int | None, ...]) -> str:
    """A source's ``repr``: the call that made it, its size, classes and image shape."""
    names = ", ".join(repr(n) for n in class_names[:8]) + (
        f", ... ({len(class_names) - 8} more)" if len(class_names) > 8 else "")
    classes = f"{len(class_names)} classes [{names}]" if labelled else "no labels"
    return f"<{kind} {made}: {count}, {classes}, images {shape}>"


class ImageSource:
    """The source protocol both image sources share, over their ``load`` (a ``Reader``):
    what a loader and a user ask of a source besides its settings."""

    __slots__ = ()
    load: Reader
    labels: Any
    class_names: tuple[str, ...]
    image_size: tuple[int, int] | None
    color_mode: str | None
    interpolation: str
    on_error: str
    channels: int
    reduced_decode: bool
    crop_to_aspect_ratio: bool
    pad_to_aspect_ratio: bool
    dtype: str

    def _settings(self) -> DecodeSettings:
        """The decode settings this source holds, as the one type that checks them."""
        return DecodeSettings(**{name: getattr(self, name) for name in SETTINGS_DEFAULTS})

    def _settle(self) -> None:
        """Check the settings the constructor set, by keyword, and keep them normalized,
        with the output channels: the one check of every source's settings."""
        settings = self._settings()
        for name in SETTINGS_DEFAULTS:
            object.__setattr__(self, name, getattr(settings, name))
        object.__setattr__(self, "channels", settings.channels(self.channels))

    def _new_reader(self, table: Any) -> None:
        """Set ``load`` over ``table``; with ``color_mode=None`` and no ``channels`` yet,
        learn them from sample 0 first."""
        aspect = self._settings().aspect
        for _ in range(2):
            decoder = Decoder(self.image_size, self.color_mode, self.interpolation,
                              self.channels, self.reduced_decode, aspect, dtype=self.dtype)
            if self.image_size is not None and self.reduced_decode and aspect is None:
                decoder = decoder.with_jpeg_mode()  # (decided here, once, for every worker)
            object.__setattr__(self, "load", Reader(table, decoder, self.on_error,
                                                     self.labels is not None))
            if self.channels:
                return
            object.__setattr__(self, "channels", self.load.read(0).shape[-1])

    def __len__(self) -> int:
        return len(self.load.table)

    @property
    def classes(self) -> np.ndarray | None:
        """int64 class index per sample (Keras' ``DirectoryIterator.classes``), or None."""
        classes: np.ndarray | None = self.load.table.classes
        return classes if self.labels is not None else None

    @property
    def class_indices(self) -> dict[str, int]:
        """Class name -> label index, as Keras' ``DirectoryIterator.class_indices``."""
        return {name: i for i, name in enumerate(self.class_names)}

    @property
    def output_shape(self) -> tuple[int | None, int | None, int]:
        """Shape of every decoded image: ``(height, width, channels)``; height and width
        None with ``image_size=None`` (each photo at its own size)."""
        size = self.image_size or (None, None)
        return (size[0], size[1], self.channels)

    def read(self, index: int) -> np.ndarray:
        """Decode, convert and resize sample ``index``; no substitution (see ``load``).

        Raises:
            ImageReadError: the sample is missing, unreadable, corrupt or has other channels.
        """
        return self.load.read(index)

    _EXTRA_SETTINGS: tuple[str, ...] = ()  # a source's own settings, besides the shared ones

    def _source_table(self) -> Any:
        """The table the source was built over (what a pickled copy is rebuilt from)."""
        return self.load.table

    def __reduce__(self) -> Any:
        # The table pickles as its block(s); labels are rebuilt from its class indices.
        settings = {name: getattr(self, name)
                    for name in (*SETTINGS_DEFAULTS, "channels", *self._EXTRA_SETTINGS)}
        return (_rebuild, (type(self), self._source_table(), self.labels is not None,
                           self.class_names, settings, getattr(self, "_origin")))


def _rebuild(cls: Any, table: Any, labelled: bool, class_names: tuple[str, ...],
             settings: dict[str, Any], origin: str) -> Any:
    source = cls(table, table.classes if labelled else None, class_names, **settings)
    object.__setattr__(source, "_origin", origin)
    return source


class Text(str):
    """An argument shown as written (``<3 labels>``), not quoted."""

    def __repr__(self) -> str:
        return str(self)


def check_choice(name: str, value: Any, choices: Sequence[Any], fix: str) -> None:
    if not any(value is c or isinstance(value, str) and value == c for c in choices):
        raise ArgumentError(
            f"`{name}` must be one of {list(choices)}; received {got(value)}. Fix: {fix}."
        )


def image_size_of(value: Any) -> tuple[int, int] | None:
    """``image_size`` as two ints, or None: each photo keeps its own size, for a pipeline
    that crops it to one (``random_resized_crop``, decoded only where it crops)."""
    if value is None:
        return None
    try:  # (a string would be read digit by digit: "64" as (6, 4))
        size = () if isinstance(value, (str, bytes)) else tuple(int(s) for s in value)
    except (TypeError, ValueError):
        size = ()
    if len(size) != 2 or min(size) <= 0:
        raise ArgumentError(
            f"`image_size` must be (height, width) with two positive ints, or None; received "
            f"{got(value)}. Fix: e.g. `image_size=(224, 224)`, or None to keep each photo's "
            f"own size for a pipeline that crops it (`Op('random_resized_crop', ...)`)."
        )
    return size[0], size[1]


if TYPE_CHECKING:  # mypy holds both image sources to what the engine asks of a source
    from ...engine import source as engine

    _AS_THE_ENGINE_SEES_IT: tuple[type[engine.Source], type[engine.Labelled]] = (
        ImageSource, ImageSource)
