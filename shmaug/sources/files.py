"""Image files as a sample source: workers decode, convert and resize, then augment.

``ImageFiles`` is small and picklable: settings plus a ``PathTable`` (``images/paths.py``: every
path and class index in one flat block, never a Python object per file), never pixels. Handed to
``shmaug.Loader`` or ``shmaug.Sequence`` as ``x``, its reader (``load``) goes to each worker;
the loader first moves the path table into its shared memory (``Reader.sharing``), so what a
worker receives and holds does not grow with the number of files. ``load(index)`` runs there:
read the file's bytes, decode (OpenCV, PIL for formats OpenCV cannot read; large JPEGs at a
reduced size, see ``images/decode.py``), convert to ``color_mode``, resize to ``image_size``
(``images/reader.py``). This module owns the source object and its settings; listing, labels and
the split follow Keras in ``images/folders.py``; the engine owns processes and memory.

An unreadable file (missing, empty, corrupt, wrong channel count) raises ``ImageReadError``
naming the file and the reason. With ``on_error="skip"`` it is replaced by the next readable
sample of the same class in index order (wrapping), so the label still matches and the
substitute depends on the files alone, never on which worker ran. Under a ``Loader`` the
reader marks each sample it stood in for with its stand-in, in shared memory
(``Reader.marking``); the loader hands out the stand-in's targets (a `y` of the user's may be
a value or weights of the file's own), counts the marks of the batches it delivers
(``stats()["skipped"]``, ``["unreadable"]``) and warns once, so the figures do not depend on
which process decoded what, or how often.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence, overload

import numpy as np

from .images import folders as F
from .images import settings as O
from .remote import bucket as B
from .images.settings import DEFAULT_IMAGE_SIZE
from .images.paths import PathTable
from .images.reader import Reader
from ..errors import ArgumentError, ArgumentTypeError, ImageReadError, got

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .remote import Remote

EXTENSIONS = F.EXTENSIONS
__all__ = ["ImageFiles", "ImageReadError"]  # ImageReadError: also importable from here


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ImageFiles(O.ImageSource):
    """Image files with optional labels, decoded in shmaug's workers.

    Build one with ``from_directory`` (Keras' ``image_dataset_from_directory`` arguments),
    ``from_paths`` or ``from_dataframe``, then pass it as ``x``; ``files.labels`` is the
    matching ``y`` (a loader takes it when ``y`` is not given).

    Attributes:
        paths: one path per sample, in sample order (a read-only sequence of ``str``).
        labels: per sample, encoded as ``label_mode`` says: "int" the class index (int64),
            "categorical" one-hot float32 ``(n, classes)``, "binary" float32 ``(n, 1)``;
            None without labels. The constructor takes class indices (or that encoding).
        class_names: class names; class indices index into it.
        image_size: ``(height, width)`` every image is resized to; None keeps each photo at
            its own size, for a pipeline that crops it to one (``random_resized_crop``,
            which then decodes only the window it crops:
            [the ImageNet recipe](../recipe-imagenet.md)).
        color_mode: "grayscale", "rgb" or "rgba" (output channels 1, 3, 4); None keeps the
            files' own channel count, which must then be the same for every file.
        interpolation: resize filter, Keras' names ("bilinear", "nearest", "bicubic",
            "area", "lanczos3", "lanczos5"), OpenCV's kernels (bicubic and Lanczos differ
            from ``tf.image.resize``'s: [Image files](../files.md), "Matching a serving
            path").
        on_error: "raise" (default) or "skip" (replace an unreadable file, see the module).
        channels: channels of every decoded image (from ``color_mode`` or the first file).
        label_mode: "int" (default), "categorical", "binary" or None (no labels), as Keras.
        reduced_decode: True (default): a JPEG larger than ``image_size`` is decoded at the
            smallest of 1/8, 1/4 and 1/2 of its size that keeps it at least ``image_size``
            (by libjpeg-turbo 3, ``pip install shmaug[jpeg]``, or OpenCV) before the
            resize, and a decode-time crop's window likewise (see
            ``shmaug.sources.images.decode.REDUCED_TOLERANCE`` and ``REDUCED_CROP_QUALITY``
            for how close it is to a full decode); False decodes every pixel: the exact
            mode, torchvision's pixels for a crop. Other formats are not affected.
        crop_to_aspect_ratio: True: resize without distorting the aspect ratio by first
            taking the largest centred window of ``image_size``'s aspect ratio, as Keras'
            argument of that name does; False (default) stretches to ``image_size``.
        pad_to_aspect_ratio: True: resize to fit inside ``image_size`` without distortion and
            pad with black around it, as Keras' argument of that name does. Only one of the
            two may be True.
        dtype: "uint8" (default): a 16-bit PNG or TIFF is scaled to 8 bits, as Keras'
            decoders do; "uint16": 16-bit files keep their values and 8-bit ones are scaled
            by 257 (255 becomes 65535), so every sample is on one scale (microscopy, medical
            and satellite data). A decode-time crop then decodes the whole file.
        load: ``load(index) -> uint8 array (H, W, C)``, standing in for unreadable files
            with ``on_error="skip"`` (a loader counts them: ``stats()["skipped"]``).

    Example:
        >>> files = shmaug.ImageFiles.from_directory("flowers/", image_size=(224, 224))
        >>> train = shmaug.Sequence(files, files.labels, batch_size=32, augment=fn, shuffle=True)
        >>> files.class_indices
        {'daisy': 0, 'rose': 1}
    """

    paths: Sequence[str]
    labels: Any = None
    class_names: tuple[str, ...] = ()
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE
    color_mode: str | None = "rgb"
    interpolation: str = "bilinear"
    on_error: str = "raise"
    channels: int = 0
    label_mode: str | None = "int"
    reduced_decode: bool = True
    crop_to_aspect_ratio: bool = False
    pad_to_aspect_ratio: bool = False
    dtype: str = "uint8"
    storage_options: Any = field(default=None, repr=False)
    cache_dir: Any = field(default=None, repr=False)
    cache_limit: Any = field(default=None, repr=False)
    load: Reader = field(init=False, repr=False, compare=False)
    _origin: str = field(init=False, repr=False, compare=False, default="")
    _remote: Remote | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        given = self.paths  # a table (from_directory, pickling) or the user's paths
        if not isinstance(given, PathTable):
            if isinstance(given, (str, bytes, os.PathLike)):
                raise ArgumentTypeError(
                    f"`paths` must be a list of image paths; received the single path "
                    f"{got(given)}. Fix: pass `[path]`."
                )
            F.refuse_encoded(given, "`paths`")
            given = [p if isinstance(p, str) else os.fsdecode(  # (bytes paths too:
                bytes(p) if isinstance(p, bytearray) else p) for p in given]  # os.fsencode's)
            F.check_extensions(given)
        if not len(given):
            raise ArgumentError(
                "`paths` is empty: there is no image to read. Fix: pass at least one image "
                "file (extensions: " + ", ".join(EXTENSIONS) + ")."
            )
        self._settle()
        names = tuple(str(c) for c in self.class_names)
        labels, classes = O.encoded_labels(self.labels, self.label_mode, len(given), names)
        if not isinstance(given, PathTable):
            table = PathTable.build(given, classes)
        else:
            table = given
            existing = given.classes
            if classes is not None and (existing is None
                                        or not np.array_equal(existing, classes)):
                table = PathTable.build(given.tolist(), classes)
        remote = B.remote_for(table[0], self.storage_options, self.cache_dir,
                              self.cache_limit)  # None: local files
        if remote is not None and not isinstance(given, PathTable):
            B.check_same_protocol(given, remote.protocol)
        object.__setattr__(self, "_remote", remote)
        for name, value in (("paths", table), ("labels", labels), ("class_names", names)):
            object.__setattr__(self, name, value)
        self._new_reader(table if remote is None else B.RemoteTable(table, remote))

    def _know(self, idents: dict[str, str]) -> None:
        """The objects' identities (``"size|etag"``) as the bucket listed them: with a disk
        cache, an object changed in the bucket since is read again rather than its copy."""
        if idents and self._remote is not None and self._remote.cache is not None:
            self._use_idents(PathTable.build([idents.get(u, "") for u in self.paths]))

    def _use_idents(self, idents: PathTable) -> None:
        table, remote = self.paths, self._remote
        assert isinstance(table, PathTable) and remote is not None  # (__post_init__'s)
        self._new_reader(B.RemoteTable(table, remote, idents))

    def __reduce__(self) -> Any:
        """As every source, rebuilt from its table and settings; with the objects' identities
        where a disk cache checks them."""
        rebuilt = O.ImageSource.__reduce__(self)  # (a slotted dataclass: no bare super())
        idents = getattr(self.load.table, "idents", None)
        return rebuilt if idents is None else (_with_idents, (*rebuilt, idents))

    # -- constructors -------------------------------------------------------------------------

    @overload
    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str], *, labels: Any = ...,
                       label_mode: str | None = ..., class_names: Sequence[str] | None = ...,
                       image_size: tuple[int, int] | None = ..., color_mode: str | None = ...,
                       interpolation: str = ..., on_error: str = ..., follow_links: bool = ...,
                       validation_split: float | None = ..., subset: Literal["both"],
                       seed: int | None = ..., reduced_decode: bool = ...,
                       crop_to_aspect_ratio: bool = ..., pad_to_aspect_ratio: bool = ...,
                       dtype: str = ..., extensions: Sequence[str] | None = ...,
                       storage_options: dict[str, Any] | None = ...,
                       listing_cache: str | os.PathLike[str] | None = ...,
                       cache_dir: str | os.PathLike[str] | None = ...,
                       cache_limit: int | str | None = ...
                       ) -> tuple[ImageFiles, ImageFiles]: ...

    @overload
    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str], *, labels: Any = ...,
                       label_mode: str | None = ..., class_names: Sequence[str] | None = ...,
                       image_size: tuple[int, int] | None = ..., color_mode: str | None = ...,
                       interpolation: str = ..., on_error: str = ..., follow_links: bool = ...,
                       validation_split: float | None = ...,
                       subset: Literal["training", "validation"] | None = ...,
                       seed: int | None = ..., reduced_decode: bool = ...,
                       crop_to_aspect_ratio: bool = ..., pad_to_aspect_ratio: bool = ...,
                       dtype: str = ..., extensions: Sequence[str] | None = ...,
                       storage_options: dict[str, Any] | None = ...,
                       listing_cache: str | os.PathLike[str] | None = ...,
                       cache_dir: str | os.PathLike[str] | None = ...,
                       cache_limit: int | str | None = ...) -> ImageFiles: ...

    @classmethod
    def from_directory(
        cls, directory: str | os.PathLike[str], *, labels: Any = "inferred",
        label_mode: str | None = "int", class_names: Sequence[str] | None = None,
        image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE, color_mode: str | None = "rgb",
        interpolation: str = "bilinear", on_error: str = "raise", follow_links: bool = False,
        validation_split: float | None = None, subset: str | None = None,
        seed: int | None = None, reduced_decode: bool = True,
        crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
        dtype: str = "uint8", extensions: Sequence[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        listing_cache: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
        **keras_only: Any,
    ) -> ImageFiles | tuple[ImageFiles, ImageFiles]:
        """Images in ``directory``, as Keras' ``image_dataset_from_directory`` finds them.

        With ``labels="inferred"`` (default) class names are the sub-folder names, sorted (or
        ``class_names`` to pick and order them); files are searched recursively, folders sorted
        by path and files by name, as Keras does. A folder without sub-folders gives unlabelled
        images, with a warning (Keras finds none there). ``labels=None`` (or
        ``label_mode=None``): every image under the folder, no labels; a list of ints: their
        labels, in that order. Files with other extensions are ignored, as Keras does: it
        reads .bmp, .gif, .jpeg, .jpg and .png. ``extensions`` replaces that list, to read
        others shmaug decodes (.tif, .tiff, .webp), which Keras' lists and splits lack: e.g.
        ``(".jpg", ".png", ".webp")``; decodable files it leaves out are named in a warning.

        ``validation_split`` with ``subset`` ("training", "validation" or "both", which
        returns ``(training, validation)``) and ``seed`` picks the same files for each subset
        as Keras does for the same folder and seed; ``label_mode`` encodes labels as Keras'.
        ``crop_to_aspect_ratio`` / ``pad_to_aspect_ratio`` resize without distortion, with
        Keras' meaning (see the class's attributes). Keras' ``batch_size`` and ``shuffle`` are
        the loader's here (``shmaug.Sequence(files, batch_size=32, shuffle=True)``): passed
        to this method they are refused with that fix.

        ``directory`` may be a URL (``"s3://bucket/train/"``, ``"gs://..."``), read through
        fsspec with ``storage_options`` (endpoint, credentials; secrets never shown): the
        bucket is listed once, here, and class folders work as on disk
        ([Object storage](../remote.md)).
        ``listing_cache``: a folder where that listing is kept and reused by the next
        construction (a bucket of a million objects lists in minutes); it is reused as is
        until its file is deleted, so objects added later are not seen.
        ``cache_dir``: a local folder where each image read from the bucket is kept, shared
        by the host's processes and reused across runs, bounded by ``cache_limit`` (bytes,
        or "50GB"; None: the disk).

        Raises:
            ArgumentError: the folder does not exist or holds no image file; an argument
                Keras would refuse.
            ArgumentTypeError: an argument this method does not take (``batch_size`` and
                ``shuffle``: the message says where each goes).

        Example:
            >>> train, val = ImageFiles.from_directory("data/train", image_size=(64, 64),
            ...                                        validation_split=0.2, subset="both", seed=1)
        """
        verbose = bool(keras_only.pop("verbose", True))  # (Keras' line: logged, at INFO)
        F.check_data_format(keras_only.pop("data_format", None))
        if keras_only:
            F.refuse_extra_args(keras_only, [*_DIRECTORY_DEFAULTS])
        root = os.fspath(directory)
        remote = B.remote_for(root, storage_options)
        listing = B.listed(remote, root, listing_cache)
        if listing is None and not os.path.isdir(root):
            raise ArgumentError(
                f"`directory` must be an existing folder; received {root!r}. Fix: pass the "
                f"folder that holds one sub-folder of images per class."
            )
        F.check_labels_args(labels if label_mode is not None else None, label_mode, class_names)
        F.check_split_args(validation_split, subset, seed)
        if label_mode is None:
            labels = None  # as Keras: no labels, every image under the folder
        chosen_extensions = F.extensions_of(extensions)
        paths, classes, names = F.list_directory(root, labels, class_names, follow_links,
                                                 listing, chosen_extensions)
        if verbose and labels is None:  # (Keras' lines)
            log.info("Found %d files.", len(paths))
        elif verbose:
            log.info("Found %d files belonging to %d classes.", len(paths), len(names))
        shown = labels if isinstance(labels, str) or labels is None else O.Text(
            f"<{len(paths)} labels>")
        passed = dict(labels=shown, label_mode=label_mode, class_names=class_names,
                      image_size=image_size, color_mode=color_mode, interpolation=interpolation,
                      on_error=on_error, follow_links=follow_links,
                      validation_split=validation_split, subset=subset, seed=seed,
                      reduced_decode=reduced_decode, crop_to_aspect_ratio=crop_to_aspect_ratio,
                      pad_to_aspect_ratio=pad_to_aspect_ratio, dtype=O.pixel_dtype(dtype),
                      extensions=None if extensions is None else chosen_extensions,
                      storage_options=B.shown_options(remote),
                      listing_cache=None if listing_cache is None else os.fspath(listing_cache),
                      cache_dir=None if cache_dir is None else os.fspath(cache_dir),
                      cache_limit=cache_limit)
        call = f"from_directory({root!r}{O.passed(passed, _DIRECTORY_DEFAULTS)})"

        def make(part: np.ndarray | None, suffix: str = "") -> ImageFiles:
            chosen = paths if part is None else [paths[i] for i in part.tolist()]
            sub = None if classes is None else (classes if part is None else classes[part])
            files = cls(PathTable.build(chosen, sub), sub, tuple(names),
                        O.image_size_of(image_size),
                        color_mode, interpolation, on_error, label_mode=label_mode,
                        reduced_decode=reduced_decode, crop_to_aspect_ratio=crop_to_aspect_ratio,
                        pad_to_aspect_ratio=pad_to_aspect_ratio, dtype=dtype,
                        storage_options=storage_options, cache_dir=cache_dir,
                        cache_limit=cache_limit)
            object.__setattr__(files, "_origin", call + suffix)
            files._know(listing.idents if listing is not None else {})
            return files

        if validation_split is None:
            return make(None)
        training, validation = F.split(len(paths), validation_split, int(seed))  # type: ignore[arg-type]
        if subset == "both":
            return make(training, "[0]"), make(validation, "[1]")
        return make(training if subset == "training" else validation)

    @classmethod
    def from_paths(
        cls, paths: Iterable[str | os.PathLike[str]], labels: Any = None, *,
        class_names: Sequence[str] | None = None,
        image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE, color_mode: str | None = "rgb",
        interpolation: str = "bilinear", on_error: str = "raise", label_mode: str | None = "int",
        reduced_decode: bool = True, crop_to_aspect_ratio: bool = False,
        pad_to_aspect_ratio: bool = False, dtype: str = "uint8",
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
    ) -> ImageFiles:
        """A list of image paths, with labels as ints or as class-name strings.

        String labels map to indices of their sorted unique names (or of ``class_names``).
        With ``on_error="raise"`` missing files are reported here, before any process starts.
        Paths may be URLs of one protocol (``s3://``, ``gs://``, ``https://``), read through
        fsspec with ``storage_options``; existence is then checked concurrently;
        ``cache_dir`` and ``cache_limit`` as ``from_directory``'s.

        Raises:
            ArgumentError: no paths, an unknown extension, missing files, bad labels.

        Example:
            >>> files = ImageFiles.from_paths(["a.jpg", "b.png"], ["cat", "dog"],
            ...                               image_size=(64, 64))
        """
        if isinstance(paths, (str, bytes, os.PathLike)):  # would be read as one path per letter
            raise ArgumentTypeError(
                f"`paths` must be a list of image paths; received the single path "
                f"{got(paths)}. Fix: pass `[path]`, or use ImageFiles.from_directory for a "
                f"folder."
            )
        strings = [os.fspath(p) for p in paths]
        index, names = F.encode_names(labels, len(strings), class_names)
        files = cls(strings, index, names, image_size, color_mode, interpolation, on_error,
                    label_mode=label_mode, reduced_decode=reduced_decode,
                    crop_to_aspect_ratio=crop_to_aspect_ratio,
                    pad_to_aspect_ratio=pad_to_aspect_ratio, dtype=dtype,
                    storage_options=storage_options, cache_dir=cache_dir,
                    cache_limit=cache_limit)
        if on_error == "raise" and files._remote is not None:
            files._know(files._remote.check_exist(strings))
        elif on_error == "raise":
            F.check_exist(files.paths)
        passed = dict(class_names=class_names, image_size=image_size, color_mode=color_mode,
                      interpolation=interpolation, on_error=on_error, label_mode=label_mode,
                      reduced_decode=reduced_decode, crop_to_aspect_ratio=crop_to_aspect_ratio,
                      pad_to_aspect_ratio=pad_to_aspect_ratio, dtype=files.dtype,
                      storage_options=B.shown_options(files._remote),
                      cache_dir=None if cache_dir is None else os.fspath(cache_dir),
                      cache_limit=cache_limit)
        label_text = "" if labels is None else f", <{len(strings)} labels>"
        object.__setattr__(files, "_origin", f"from_paths(<{len(strings)} paths>{label_text}"
                                            f"{O.passed(passed, _PATHS_DEFAULTS)})")
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
        unknown = {k: v for k, v in kwargs.items() if k not in _FRAME_KWARGS}
        if unknown:
            F.refuse_extra_args(unknown, [*_FRAME_KWARGS, "x_col", "y_col", "classes"],
                                "from_dataframe", _FRAME_INSTEAD)
        columns = list(getattr(dataframe, "columns", []))
        if isinstance(y_col, (list, tuple)):
            raise ArgumentTypeError(
                f"`y_col`={y_col!r} names several columns (ImageDataGenerator's class_mode="
                f"'raw' or 'multi_output'), but a source's labels are one class per file. Fix: "
                f"`y_col=None` and give the loader the columns as `y`: "
                f"shmaug.Sequence(files, df[{list(y_col)!r}].to_numpy(), ...), or a dict of "
                f"one array per output.")
        for name, col in (("x_col", x_col), ("y_col", y_col)):
            if col is not None and col not in columns:
                raise ArgumentError(
                    f"`{name}`={col!r} is not a column of `dataframe`; its columns are "
                    f"{columns}. Fix: pass `{name}=` one of them."
                )
        paths = _filled(dataframe, x_col, "path", x_col)
        F.refuse_encoded(paths, f"`x_col`={x_col!r}")
        paths = [str(p) for p in paths]
        if directory is not None:
            paths = [os.path.join(os.fspath(directory), p) for p in paths]
        labels, names = (None, classes) if y_col is None else \
            _frame_labels(dataframe, x_col, y_col, classes)
        files = cls.from_paths(paths, labels, class_names=names, **kwargs)
        where = "" if directory is None else f", {os.fspath(directory)!r}"
        passed = dict(x_col=x_col, y_col=y_col, classes=classes, **kwargs)
        if "storage_options" in passed:
            passed["storage_options"] = B.shown_options(files._remote)
        object.__setattr__(files, "_origin", f"from_dataframe(<DataFrame of {len(paths)} rows>"
                                            f"{where}{O.passed(passed, _FRAME_DEFAULTS)})")
        return files

    def __repr__(self) -> str:  # the paths can number millions: the call and a summary
        made = self._origin or f"ImageFiles(<{len(self.paths)} paths>{self._settings_text()})"
        return O.summary("ImageFiles", made, f"{len(self.paths):,} files", self.labels is not None,
                         self.class_names, self.output_shape)

    def _settings_text(self) -> str:
        given = {k: getattr(self, k)
                 for k in ("class_names", "storage_options", *O.SETTINGS_DEFAULTS)}
        given["storage_options"] = B.shown_options(self._remote)
        return O.passed(given, _PATHS_DEFAULTS)

    # -- the source protocol --------------------------------------------------------------------

    # The table a pickled copy is rebuilt from (the reader's may wrap it for a bucket), and
    # the settings it needs besides the shared ones.
    _EXTRA_SETTINGS = ("storage_options", "cache_dir", "cache_limit")

    def _source_table(self) -> Sequence[str]:
        return self.paths


def _filled(dataframe: Any, col: str, what: str, x_col: str) -> list[Any]:
    """The values of column ``col`` (``what`` each row holds), refused where one is missing,
    naming the first row (a NaN path became the file 'nan', told it had no extension)."""
    column = dataframe[col]
    isna = getattr(column, "isna", None)  # (pandas' NA has no truth value: its own test)
    gaps = isna().tolist() if callable(isna) else [v is None or v != v for v in column]
    missing = [row for row, gap in enumerate(gaps) if gap]
    if missing:
        name = "x_col" if col == x_col else "y_col"
        beside = "" if col == x_col else f" ({dataframe[x_col].iloc[missing[0]]!r})"
        raise ArgumentError(
            f"`{name}`={col!r} has no {what} in {len(missing)} row(s), e.g. index "
            f"{dataframe.index[missing[0]]!r}{beside}. Fix: leave them out, "
            f"df.dropna(subset=[{col!r}])" + (", or give them a class." if what == "label"
                                             else "."))
    return list(column.tolist())


def _frame_labels(dataframe: Any, x_col: str, y_col: str, classes: Sequence[str] | None
                  ) -> tuple[list[Any], Sequence[str] | None]:
    """The labels in ``y_col`` and the class names, checked: no missing label, one class per
    row, every class in ``classes``; a pandas Categorical's categories, sorted, are the class
    names (all of them: a fold or a holdout without one class numbers the others as the
    training set does)."""
    column = dataframe[y_col]
    labels = _filled(dataframe, y_col, "label", x_col)
    several = next((v for v in labels if isinstance(v, (list, tuple, set, np.ndarray))), None)
    if several is not None:
        raise ArgumentTypeError(
            f"`y_col`={y_col!r} holds several classes per row, e.g. {got(several)} "
            f"(ImageDataGenerator's multi-label class_mode='categorical'), but a source's "
            f"labels are one class per file. Fix: `y_col=None` and give the loader the "
            f"multi-hot rows as `y`: y = sklearn.preprocessing.MultiLabelBinarizer()"
            f".fit_transform(df[{y_col!r}]), with a sigmoid output and binary cross-entropy.")
    if labels and np.asarray(labels).dtype.kind == "f":
        raise ArgumentTypeError(
            f"`y_col`={y_col!r} holds floats, e.g. {got(labels[0])}; a source's labels "
            f"are classes (ints or names). Fix: for regression targets (ImageDataGenerator's"
            f" class_mode='raw') pass `y_col=None` and give the loader the column as `y`, "
            f"e.g. shmaug.Sequence(files, df[{y_col!r}].to_numpy(), ...).")
    names = bool(labels) and all(isinstance(v, str) for v in labels)
    if classes is None and names and str(getattr(column, "dtype", "")) == "category":
        classes = sorted(str(c) for c in column.cat.categories)  # sorted, as names always are
        F.tell_label_names(classes)  # (the data's own names, not the user's to keep)
    elif classes is not None and names:
        left_out = sorted(set(labels) - {str(c) for c in classes})
        if left_out:
            raise ArgumentError(
                f"`classes`={list(classes)!r} leaves out classes that rows of `y_col`="
                f"{y_col!r} hold: {left_out}. Keras' flow_from_dataframe dropped those rows "
                f"without a word. Fix: add them to `classes`, or leave the rows out first: "
                f"df[df[{y_col!r}].isin({list(classes)!r})].")
    return labels, classes


# from_dataframe's Keras arguments that have another place here: what to do instead
_FRAME_INSTEAD = {
    "validation_split": "split the DataFrame first, e.g. val = df.sample(frac={value}, "
                        "random_state=0) and train = df.drop(val.index) (sklearn's "
                        "train_test_split(df, stratify=df[y_col]) keeps each class's share), "
                        "one from_dataframe each, with the same `classes=` for both",
    "subset": "split the DataFrame first and make one source of each part (see "
              "`validation_split`), with the same `classes=` for both",
    "weight_col": "give the loader the column as `sample_weight`: "
                  "shmaug.Sequence(files, sample_weight=df[{value!r}].to_numpy(), ...)",
    "drop_duplicates": "drop them from the DataFrame first, df.drop_duplicates(subset=[x_col])",
    "validate_filenames": "leave it out: a file that is missing or does not decode is named "
                          "when it is read (`on_error='skip'` stands another in its place)",
}


def _with_idents(rebuild: Any, args: tuple[Any, ...], idents: PathTable) -> ImageFiles:
    files: ImageFiles = rebuild(*args)
    files._use_idents(idents)
    return files


# -- arguments --------------------------------------------------------------------------------

# Each constructor's defaults, for its repr and its messages, read from its signature.
_DIRECTORY_DEFAULTS = O.defaults_of(ImageFiles.from_directory)
_PATHS_DEFAULTS = O.defaults_of(ImageFiles.from_paths)
_FRAME_DEFAULTS = O.defaults_of(ImageFiles.from_paths, ImageFiles.from_dataframe)
# What from_dataframe passes on to from_paths (it sets the labels and class names itself).
_FRAME_KWARGS = [k for k in _PATHS_DEFAULTS if k not in ("labels", "class_names")]
