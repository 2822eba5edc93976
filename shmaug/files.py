"""Image files as a sample source: workers decode, convert and resize, then augment.

``ImageFiles`` is small and picklable (paths and settings, never pixels). Handed to
``shmaug.Loader`` or ``shmaug.Sequence`` as ``x``, it is pickled once per worker and its
``load(index)`` runs there: read the file's bytes, decode (OpenCV, falling back to PIL for
formats OpenCV cannot read), convert to ``color_mode``, resize to ``image_size``. This module
owns path discovery, label and class-name mapping, and what happens to an unreadable file;
the engine owns processes, order and memory.

An unreadable file (missing, empty, corrupt, wrong channel count) raises ``ImageReadError``
naming the file and the reason. With ``on_error="skip"`` it is replaced by the next readable
sample of the same label in index order (wrapping), so the label still matches and the
substitute depends on the files alone, never on which worker ran. Under a ``Loader`` the
reader marks each sample it stood in for in a shared byte array (``_Reader.marking``); the
loader counts the marks of the batches it delivers (``stats()["skipped"]``, ``["unreadable"]``)
and warns once, so the figures do not depend on which process decoded what, or how often.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ._decode import COLOR_MODES, decode, resize
from .errors import ArgumentError, ArgumentTypeError, ImageReadError, warn
from .store import ArrayHandle, attach_block

log = logging.getLogger(__name__)

# Keras' image_dataset_from_directory list, plus what OpenCV / PIL also decode.
EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
INTERPOLATIONS = ("area", "bicubic", "bilinear", "lanczos3", "lanczos5", "nearest")
DEFAULT_IMAGE_SIZE = (256, 256)  # Keras' default for image_dataset_from_directory


def _got(value: Any) -> str:
    text = repr(value)
    return f"{text[:57] + '...' if len(text) > 60 else text} (type {type(value).__name__})"


class _Reader:
    """``ImageFiles.load``: decodes sample ``index``, standing in for it when it is unreadable.

    A reader made by ``marking`` also sets ``marks[index]`` for each sample it stood in for:
    a shared byte per sample, owned by the loader, which counts the marks of what it
    delivers. Pickled for a worker, it carries the marks' handle and attaches there.
    """

    __slots__ = ("files", "_handle", "_marks", "_block")
    __name__ = "ImageFiles.load"  # how a worker error names the stage that failed
    uses_global_rng = False  # decoding draws no random numbers: no need to seed the globals

    def __init__(self, files: ImageFiles, handle: ArrayHandle | None = None,
                 marks: Any = None) -> None:
        self.files = files
        self._handle = handle  # the marks' shared block, or None: stand-ins are not recorded
        self._marks = marks  # invariant: writable, one byte per sample, or None
        self._block: Any = None  # in a worker: the attached block behind ``_marks``

    def marking(self, handle: ArrayHandle, marks: np.ndarray) -> _Reader:
        """A reader of the same files that records its stand-ins in ``marks`` (whose shared
        block ``handle`` names, for the workers)."""
        return _Reader(self.files, handle, marks)

    def __call__(self, index: int) -> np.ndarray:
        files = self.files
        try:
            return files.read(index)
        except ImageReadError as exc:
            if files.on_error == "raise":
                raise
            first = exc
        n = len(files.paths)
        labels = files.labels
        for step in range(1, n):
            substitute = (index + step) % n
            if labels is not None and labels[substitute] != labels[index]:
                continue  # the stand-in must carry the label the batch gives this sample
            try:
                image = files.read(substitute)
            except ImageReadError:
                continue
            if self._marks is not None:
                self._marks[index] = 1
            # The user hears of it from the loader, once (``replaced_warning``).
            log.debug("%s Using %s instead (on_error='skip')", first, files.paths[substitute])
            return image
        kind = "of its class " if labels is not None else ""
        raise ImageReadError(
            f"No other file {kind}in this source can be read, so none can stand in for "
            f"{files.paths[index]!r} ({first}). Fix: check the paths and the files."
        )

    def name(self, index: int) -> str:
        """What ``stats()["unreadable"]`` calls sample ``index``: its path."""
        return self.files.paths[index]

    def replaced_warning(self, index: int) -> str:
        """The loader's one warning, for the first stand-in it delivers (read again here for
        the reason: a worker's exception does not travel with a successful batch)."""
        try:
            self.files.read(index)
            reason = f"Could not read image file {self.files.paths[index]!r} (it reads now)"
        except ImageReadError as exc:
            reason = str(exc).split(" Fix:")[0].rstrip(".")
        return (
            f"{reason}. With on_error='skip' it is replaced by the next readable file of its "
            f"class, in this epoch and every other. This warning is not repeated for this "
            f"loader: stats()['unreadable'] lists every unreadable file met and "
            f"stats()['skipped'] counts the stand-ins delivered. Fix: replace or remove the "
            f"file(s)."
        )

    def __getstate__(self) -> tuple[ImageFiles, ArrayHandle | None]:
        return self.files, self._handle

    def __setstate__(self, state: tuple[ImageFiles, ArrayHandle | None]) -> None:
        self.files, self._handle = state
        self._marks = self._block = None
        if self._handle is not None:  # in a worker: the loader's marks, by name
            self._block = attach_block(self._handle)
            self._marks = self._block.buf  # bytes, no numpy view: closing never meets one


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ImageFiles:
    """Image files with optional labels, decoded in shmaug's workers.

    Build one with ``from_directory``, ``from_paths`` or ``from_dataframe`` (Keras' argument
    names), then pass it as ``x``; ``files.labels`` is the matching ``y``.

    Attributes:
        paths: one path per sample, in sample order.
        labels: int64 class index per sample (read-only), or None.
        class_names: sorted class names; ``labels`` index into it.
        image_size: ``(height, width)`` every image is resized to.
        color_mode: "grayscale", "rgb" or "rgba" (output channels 1, 3, 4); None keeps the
            files' own channel count, which must then be the same for every file.
        interpolation: resize filter, Keras' names ("bilinear", "nearest", "bicubic",
            "area", "lanczos3", "lanczos5").
        on_error: "raise" (default) or "skip" (replace an unreadable file, see the module).
        channels: channels of every decoded image (from ``color_mode`` or the first file).
        load: ``load(index) -> uint8 array (H, W, C)``, standing in for unreadable files
            with ``on_error="skip"`` (a loader counts them: ``stats()["skipped"]``).

    Example:
        >>> files = shmaug.ImageFiles.from_directory("flowers/", image_size=(224, 224))
        >>> train = shmaug.Sequence(files, files.labels, batch_size=32, augment=fn, shuffle=True)
        >>> files.class_indices
        {'daisy': 0, 'rose': 1}
    """

    paths: tuple[str, ...]
    labels: np.ndarray | None = None
    class_names: tuple[str, ...] = ()
    image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE
    color_mode: str | None = "rgb"
    interpolation: str = "bilinear"
    on_error: str = "raise"
    channels: int = 0
    load: _Reader = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.paths:
            raise ArgumentError(
                "`paths` is empty: there is no image to read. Fix: pass at least one image "
                "file (extensions: " + ", ".join(EXTENSIONS) + ")."
            )
        object.__setattr__(self, "paths", tuple(os.fspath(p) for p in self.paths))
        _check_extensions(self.paths)
        object.__setattr__(self, "image_size", _image_size(self.image_size))
        if self.color_mode not in COLOR_MODES and self.color_mode is not None:
            raise ArgumentError(
                f"`color_mode` must be one of {sorted(COLOR_MODES)} or None (keep the files' "
                f"channels); received {_got(self.color_mode)}. Fix: e.g. `color_mode='rgb'`."
            )
        if self.interpolation not in INTERPOLATIONS:
            raise ArgumentError(
                f"`interpolation` must be one of {list(INTERPOLATIONS)}; received "
                f"{_got(self.interpolation)}. Fix: e.g. `interpolation='bilinear'`."
            )
        if self.on_error not in ("raise", "skip"):
            raise ArgumentError(
                f"`on_error` must be 'raise' or 'skip'; received {_got(self.on_error)}. Fix: "
                f"`on_error='skip'` replaces unreadable files and counts them in stats()."
            )
        if self.labels is not None:
            labels = np.array(self.labels, dtype=np.int64, copy=True)
            if labels.shape != (len(self.paths),):
                raise ArgumentError(
                    f"`labels` must hold one int per path ({len(self.paths)}); received shape "
                    f"{labels.shape}. Fix: pass len(labels) == len(paths)."
                )
            labels.flags.writeable = False
            object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "class_names", tuple(str(c) for c in self.class_names))
        object.__setattr__(self, "load", _Reader(self))
        if self.color_mode is not None:
            object.__setattr__(self, "channels", COLOR_MODES[self.color_mode])
        elif self.channels == 0:  # learn it from the first readable file
            object.__setattr__(self, "channels", self.load(0).shape[-1])

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def from_directory(
        cls, directory: str | os.PathLike[str], *, class_names: Sequence[str] | None = None,
        image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE, color_mode: str | None = "rgb",
        interpolation: str = "bilinear", on_error: str = "raise", follow_links: bool = False,
    ) -> ImageFiles:
        """Images in ``directory``, one sub-folder per class (``image_dataset_from_directory``).

        Class names are the sub-folder names, sorted (or ``class_names`` to pick and order
        them); files are sorted within each class and searched recursively. A folder without
        sub-folders gives unlabelled images (``labels=None``). Files with other extensions
        are ignored, as Keras does.

        Raises:
            ArgumentError: the folder does not exist, or holds no image file.

        Example:
            >>> files = ImageFiles.from_directory("data/train", image_size=(64, 64))
        """
        root = os.fspath(directory)
        if not os.path.isdir(root):
            raise ArgumentError(
                f"`directory` must be an existing folder; received {root!r}. Fix: pass the "
                f"folder that holds one sub-folder of images per class."
            )
        subdirs = sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=True))
        if class_names is not None:
            missing = sorted(set(class_names) - set(subdirs))
            if missing:
                raise ArgumentError(
                    f"`class_names` must name sub-folders of {root!r}; these are not there: "
                    f"{missing} (found {subdirs}). Fix: correct the names or the folder."
                )
            subdirs = [str(c) for c in class_names]
        paths: list[str] = []
        labels: list[int] = []
        for label, name in enumerate(subdirs):
            found = _walk(os.path.join(root, name), follow_links)
            paths += found
            labels += [label] * len(found)
        if not subdirs:
            paths = _walk(root, follow_links)
        elif _walk(root, follow_links, recursive=False):
            warn(f"{root!r}: the images directly in this folder are ignored; only those in "
                 f"its class sub-folders {subdirs} are read (as Keras' "
                 f"image_dataset_from_directory does). Fix: move them into a class folder, "
                 f"or pass `class_names=` to choose the sub-folders.")
        if not paths:
            raise ArgumentError(
                f"`directory` {root!r} holds no image file (looked for "
                f"{', '.join(EXTENSIONS)}{' in ' + str(subdirs) if subdirs else ''}). Fix: "
                f"point at the folder with one sub-folder of images per class."
            )
        return cls(tuple(paths), np.array(labels, np.int64) if subdirs else None,
                   tuple(subdirs), image_size, color_mode, interpolation, on_error)

    @classmethod
    def from_paths(
        cls, paths: Iterable[str | os.PathLike[str]], labels: Any = None, *,
        class_names: Sequence[str] | None = None,
        image_size: tuple[int, int] = DEFAULT_IMAGE_SIZE, color_mode: str | None = "rgb",
        interpolation: str = "bilinear", on_error: str = "raise",
    ) -> ImageFiles:
        """A list of image paths, with labels as ints or as class-name strings.

        String labels map to indices of their sorted unique names (or of ``class_names``).
        With ``on_error="raise"`` missing files are reported here, before any process starts.

        Raises:
            ArgumentError: no paths, an unknown extension, missing files, bad labels.

        Example:
            >>> files = ImageFiles.from_paths(["a.jpg", "b.png"], ["cat", "dog"], image_size=(64, 64))
        """
        if isinstance(paths, (str, bytes, os.PathLike)):  # would be read as one path per letter
            raise ArgumentTypeError(
                f"`paths` must be a list of image paths; received the single path "
                f"{_got(paths)}. Fix: pass `[path]`, or use ImageFiles.from_directory for a "
                f"folder."
            )
        strings = tuple(os.fspath(p) for p in paths)
        index, names = _encode_labels(labels, len(strings), class_names)
        files = cls(strings, index, names, image_size, color_mode, interpolation, on_error)
        if on_error == "raise":
            _check_exist(files.paths)
        return files

    @classmethod
    def from_dataframe(
        cls, dataframe: Any, directory: str | os.PathLike[str] | None = None, *,
        x_col: str = "filename", y_col: str | None = "class",
        classes: Sequence[str] | None = None, **kwargs: Any,
    ) -> ImageFiles:
        """Rows of a pandas DataFrame: paths in ``x_col``, labels in ``y_col`` (or None).

        Keras' ``flow_from_dataframe`` argument names; paths are relative to ``directory``
        when it is given. Other keyword arguments are ``from_paths``'s.

        Example:
            >>> files = ImageFiles.from_dataframe(df, "images/", x_col="file", y_col="label")
        """
        columns = list(getattr(dataframe, "columns", []))
        for name, col in (("x_col", x_col), ("y_col", y_col)):
            if col is not None and col not in columns:
                raise ArgumentError(
                    f"`{name}`={col!r} is not a column of `dataframe`; its columns are "
                    f"{columns}. Fix: pass `{name}=` one of them."
                )
        paths = [str(p) for p in dataframe[x_col].tolist()]
        if directory is not None:
            paths = [os.path.join(os.fspath(directory), p) for p in paths]
        labels = None if y_col is None else dataframe[y_col].tolist()
        return cls.from_paths(paths, labels, class_names=classes, **kwargs)

    def __repr__(self) -> str:  # the paths can number millions: show the shape of the source
        first = self.paths[0] if self.paths else ""
        return (f"ImageFiles({len(self.paths)} files, first {first!r}, classes="
                f"{list(self.class_names)}, image_size={self.image_size}, color_mode="
                f"{self.color_mode!r}, interpolation={self.interpolation!r}, "
                f"on_error={self.on_error!r})")

    # -- the source protocol --------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def class_indices(self) -> dict[str, int]:
        """Class name -> label index, as Keras' ``DirectoryIterator.class_indices``."""
        return {name: i for i, name in enumerate(self.class_names)}

    @property
    def output_shape(self) -> tuple[int, int, int]:
        """Shape of every decoded image: ``(height, width, channels)``."""
        return (*self.image_size, self.channels)

    def read(self, index: int) -> np.ndarray:
        """Decode, convert and resize file ``index``; no substitution (see ``load``).

        Raises:
            ImageReadError: the file is missing, unreadable, corrupt or has other channels.
        """
        path = self.paths[index]
        image = decode(path, self.color_mode)
        if self.channels and image.shape[-1] != self.channels:
            raise ImageReadError(
                f"Cannot use image file {path!r}: it has {image.shape[-1]} channel(s) but "
                f"this source has {self.channels} (color_mode=None keeps the first file's "
                f"channels). Fix: pass color_mode='grayscale', 'rgb' or 'rgba' to convert."
            )
        return resize(image, self.image_size, self.interpolation)

    def __reduce__(self) -> Any:
        # Rebuild through __init__ (no re-validation cost worth avoiding: paths are strings).
        return (_rebuild, (self.paths, self.labels, self.class_names, self.image_size,
                           self.color_mode, self.interpolation, self.on_error, self.channels))


def _rebuild(*args: Any) -> ImageFiles:
    return ImageFiles(*args)


# -- validation helpers -------------------------------------------------------------------------


def _image_size(value: Any) -> tuple[int, int]:
    try:
        size = tuple(int(s) for s in value)
    except (TypeError, ValueError):
        size = ()
    if len(size) != 2 or min(size) <= 0:
        raise ArgumentError(
            f"`image_size` must be (height, width) with two positive ints; received "
            f"{_got(value)}. Fix: e.g. `image_size=(224, 224)`."
        )
    return size[0], size[1]


def _check_extensions(paths: Sequence[str]) -> None:
    bad = [p for p in paths if os.path.splitext(p)[1].lower() not in EXTENSIONS]
    if bad:
        raise ArgumentError(
            f"{len(bad)} path(s) have an extension shmaug does not decode, e.g. {bad[0]!r}; "
            f"expected one of {', '.join(EXTENSIONS)}. Fix: convert or drop those files."
        )


def _check_exist(paths: Sequence[str]) -> None:
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ArgumentError(
            f"{len(missing)} image file(s) do not exist, e.g. {missing[0]!r}. Fix: correct the "
            f"paths (or `directory=`), or pass on_error='skip' to replace them and count them."
        )


def _walk(root: str, follow_links: bool, recursive: bool = True) -> list[str]:
    """Image files under ``root``, sorted; other files are ignored (as Keras does)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow_links):
        dirnames.sort()
        out += [os.path.join(dirpath, f) for f in sorted(filenames)
                if os.path.splitext(f)[1].lower() in EXTENSIONS]
        if not recursive:
            break
    return out


def _encode_labels(
    labels: Any, n: int, class_names: Sequence[str] | None
) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """Labels as int64 indices plus class names: strings map through their sorted names."""
    if labels is None:
        return None, tuple(class_names or ())
    values = list(labels)
    if len(values) != n:
        raise ArgumentError(
            f"`labels` must have one entry per path ({n}); received {len(values)}. "
            f"Fix: pass len(labels) == len(paths)."
        )
    if all(isinstance(v, str) for v in values):
        names = tuple(class_names) if class_names is not None else tuple(sorted(set(values)))
        lookup = {name: i for i, name in enumerate(names)}
        unknown = sorted(set(values) - set(lookup))
        if unknown:
            raise ArgumentError(
                f"`labels` holds names that are not in `class_names` {list(names)}: "
                f"{unknown}. Fix: add them to `class_names` or correct the labels."
            )
        return np.array([lookup[v] for v in values], np.int64), names
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"`labels` must be all ints (class indices) or all strings (class names); "
            f"received dtype {array.dtype}, e.g. {_got(values[0])}. Fix: convert them."
        )
    if class_names is not None and len(array) and not 0 <= array.min() <= array.max() < len(class_names):
        raise ArgumentError(
            f"int `labels` must index `class_names` (0..{len(class_names) - 1}); received "
            f"{array.min()}..{array.max()}. Fix: correct the labels or the names."
        )
    return array.astype(np.int64), tuple(class_names or ())
