"""Checks of the data a loader is given, before anything starts: the images (an array, a
``.npy`` file, a list to stack), the targets (found in ``y`` by ``tree``), and what
``augment`` made of sample 0. Each message names the argument, what was expected, what was
received and how to fix it; the settings are checked in ``checks``, the value range the
images lie in in ``ranges``."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...deferred import looks_encoded
from ...errors import (ArgumentError, ArgumentTypeError, OutputMismatchError, got, missing,
                       warn)
from ...memory.ragged import RaggedImages
from ...ops.params import (SUPPORTED_DTYPES, channels_first, frames_first)
from ...ops.core import BLENDED, WARPED
from ...ops.plan import Plan
from ...ops.targets.boxes import format_of
from ...ops.targets.formats import in_pixels, pad_boxes
from ...ops.targets.sample import MASK_NAMES
from .. import source
from .tree import (BOX_LABEL_KEYS, Filed, Path, filed_under, is_target_source, leaves, shown,
                   side_named)


def is_source(x: Any) -> bool:
    """Whether ``x`` is a sample source: an object with a ``load(index)`` method of its own
    (``shmaug.ImageFiles``, ``ImageRecords``, or the user's), which the workers call for
    sample i, or a callable of its own (the readers of ``ImageFiles`` and ``ImageRecords`` are
    instance attributes). A tf.data dataset is refused (it has a ``load`` too, a static one
    that reads a saved dataset from a path), as is a static or class ``load`` elsewhere, or a
    method bound to another object."""
    if any(c.__module__.startswith("tensorflow.python.data") for c in type(x).__mro__):
        raise ArgumentTypeError(
            f"`x` is a tf.data dataset ({type(x).__name__}), which shmaug cannot use: its "
            f"workers read sample i by position, and a dataset is a stream. Fix: pass the "
            f"arrays it was made from (`from_tensor_slices((x, y))`: x and y themselves), or "
            f"its images stacked, `x = np.stack([im for im, _ in ds.as_numpy_iterator()])` "
            f"(`ds.unbatch()` first where it is batched, `ds.take(n)` where it repeats; `y` "
            f"likewise); or pass the files it "
            f"reads: a folder of class sub-folders as "
            f"`shmaug.ImageFiles.from_directory(directory)`, TFRecord shards as "
            f"`shmaug.ImageRecords.from_tfrecord('train-*.tfrecord')`, a TFDS dataset as "
            f"`shmaug.ImageRecords.from_tfds(name, split='train')`.")
    load = getattr(x, "load", None)
    if not callable(load):
        return False
    static = inspect.getattr_static(x, "load", None)
    if isinstance(static, (staticmethod, classmethod)) or (
            inspect.ismethod(load) and load.__self__ is not x):
        raise ArgumentTypeError(
            f"`x` ({got(x)}) has a `load` attribute that is no method of it ({got(load)}), so "
            f"shmaug cannot take it as a sample source (an object whose `load(index)` method "
            f"gives sample index). Fix: pass the images as an array, give the class a "
            f"`load(self, index)` method, or pass `load=fn` (with `x` anything sized).")
    return True


_AXES_FIX = {
    2: "flattened images become images again, e.g. `x.reshape(-1, 28, 28)` for (N, 784); "
       "one image is `x[None]`",
    5: "frames or slices per sample (N, T, H, W, C) go in as channels, which geometric ops "
       "move together (but hue, saturation and grayscale change the first three channels "
       "alone and channel_shuffle mixes frames: a colour change per frame goes in your own "
       "op): `x.transpose(0, 2, 3, 1, 4).reshape(N, H, W, T * C)`, unfolded after (a "
       "memory map larger than RAM: write it so once, a chunk of samples at a time, into "
       "`np.lib.format.open_memmap(path, mode='w+', ...)`, and pass the path; "
       "docs/ops.md#clips-frame-pairs-and-volumes)",
    0: "add or remove axes, e.g. `x[..., None]` or `x.reshape(N, H, W)`",
}  # by x.ndim (0: any other)


def image_array(x: Any, y: Any = None) -> np.ndarray | RaggedImages:
    """``x`` as the images workers read: an array (N, H, W[, C]) of numbers.

    A path to a .npy file becomes a read-only memory map (nothing is read yet); a list or tuple
    of equally shaped images is stacked once, one of images of several sizes becomes a source
    of them (``memory.ragged``), which the loader holds in shared memory. Every public entry
    point checks ``x`` here, so the same bad value gets the same message everywhere.
    """
    if isinstance(x, (str, os.PathLike)):
        path = os.fspath(x)
        if not path.endswith(".npy") or not os.path.isfile(path):
            raise ArgumentError(
                f"`x` as a path must name an existing .npy file; received {path!r}. Fix: "
                f"save the images with `np.save(path, x)`, or pass the array itself."
            )
        try:
            x = np.load(path, mmap_mode="r")
        except (ValueError, OSError, EOFError) as exc:  # EOFError: a zero-byte file
            raise ArgumentError(
                f"`x` names {path!r}, which is not a readable .npy file "
                f"({exc or type(exc).__name__}). Fix: write "
                f"it again with `np.save(path, images)`."
            ) from None
    elif isinstance(x, (list, tuple)):
        x = _stacked(x, f"a {type(x).__name__}", _rows(y))
        if isinstance(x, RaggedImages):
            return x
    elif hasattr(x, "columns") and hasattr(x, "iloc") and not all(  # (pandas' own dtypes
            getattr(d, "kind", "O") in "biuf" for d in getattr(x, "dtypes", ())):  # have a kind)
        # paths, bytes or arrays: which column? (of numbers: pixels, flattened, read below)
        raise ArgumentTypeError(
            f"`x` is a DataFrame (columns {list(x.columns)[:8]}), not images. Fix: pass its "
            f"column of images: of arrays, `list(df[col])`; of encoded bytes, "
            f"`shmaug.ImageRecords.from_bytes(df[col].tolist(), ...)`; of file paths, "
            f"`shmaug.ImageFiles.from_dataframe(df, x_col=col, ...)`.")
    elif callable(getattr(x, "to_numpy", None)) and not isinstance(x, np.ndarray):
        x = x.to_numpy()  # a pandas Series (of paths, or of images)
    if not isinstance(x, np.ndarray):
        raise ArgumentTypeError(
            f"`x` must be a numpy array of images (N, H, W) or (N, H, W, C); received "
            f"{got(x)}: {_not_an_array(x)}.")
    if x.ndim == 1 and x.dtype.kind in "OUS":  # images of several sizes, or paths
        return _stacked(list(x), f"an array of dtype {x.dtype}")
    if x.ndim not in (3, 4):
        raise ArgumentError(
            f"`x` must have shape (N, H, W) or (N, H, W, C); received shape {x.shape}. "
            f"Fix: {_AXES_FIX.get(x.ndim, _AXES_FIX[0])}."
        )
    if x.dtype.kind not in "biuf":
        raise ArgumentTypeError(
            f"`x` must have a numeric dtype (uint8, float16, float32, ...); received dtype "
            f"{x.dtype}. Fix: " + ("convert them once, `x.astype(np.float32)` (a bfloat16 "
                                   "batch is `output_dtype='bfloat16'`)." if x.dtype.name ==
                                   "bfloat16" else "decode the images to numbers first, e.g. "
                                   "`x.astype(np.uint8)`.")
        )
    if len(x) == 0:
        raise ArgumentError(_EMPTY)
    if 0 in x.shape[1:]:
        raise ArgumentError(
            f"`x` holds images with no pixels: shape {x.shape}, a height, width or channel "
            f"count of 0. Fix: check how the images were cropped or stacked; each needs at "
            f"least one row, one column and one channel."
        )
    return x


# What shmaug's own ops take (``ops._params.check_image``), and how to get there from the rest.
_CONVERSIONS = {  # (np.asarray: x may be a list of lists, which has no astype)
    "b": "np.asarray(x, np.uint8) * 255 (a 0/255 image)",
    "i": "np.asarray(x, np.uint8) for values in 0..255, np.asarray(x, np.uint16) for values "
         "in 0..65535, or np.asarray(x, np.float32) with value_range=(low, high) for others",
}


def pipeline_input(plan: Plan, x: Any) -> None:
    """Images that shmaug's own ops (a pipeline, ``from_pil``, ``from_albumentations``:
    whatever takes a ``value_range``) cannot read right are refused here, before any process
    starts, rather than in a worker at the first sample: a dtype they do not take, and the
    channels-first layout (N, C, H, W), which they would read as height C and C=W channels.
    A plain function gets the data as it is (its layout and dtype are its own business), as
    does a pipeline whose first step is one (``Plan.takes_raw``: a cast, a windowing)."""
    if not plan.ranged or plan.takes_raw or not isinstance(x, np.ndarray):
        return
    native = x.dtype.newbyteorder("=")
    if x.dtype not in SUPPORTED_DTYPES and native in SUPPORTED_DTYPES:  # e.g. '>f4'
        endian = "big" if x.dtype.byteorder == ">" else "little"
        raise ArgumentTypeError(
            f"`x` has dtype {x.dtype}: {native} in {endian}-endian byte order, not this "
            f"machine's, which shmaug's ops (OpenCV's and numpy's kernels) do not read. Fix: "
            f"convert the images once, before the loader: x.astype(np.{native}) (a .npy file "
            f"larger than RAM: write it again in native order, chunk by chunk).")
    if x.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        fix = _CONVERSIONS.get(x.dtype.kind, _CONVERSIONS["i"])
        raise ArgumentTypeError(
            f"`x` has dtype {x.dtype}, which shmaug's ops do not take (they take {names}). "
            f"Fix: convert the images once, before the loader: {fix}."
        )
    if x.ndim == 4 and channels_first(x.shape[1:]):
        n, c, h, w = x.shape
        raise ArgumentError(
            f"`x` has shape {x.shape}, the channels-first layout (N, C, H, W) of {c}-channel "
            f"{h}x{w} images (or clips of {c} grey frames, volumes of {c} slices), but "
            f"shmaug's ops take channels-last images (N, H, W, C), as Keras does by default: "
            f"they would read {c} rows of {h} pixels with {w} channels. Fix: move the channel "
            f"axis last once, x = np.moveaxis(x, 1, -1) (shape ({n}, {h}, {w}, {c}); frames "
            f"become channels, which geometric ops move alike), and keep the model "
            f"channels-last (Keras' default data_format)."
        )
    if x.ndim == 4 and frames_first(x.shape[1:]):
        n, t, h, w = x.shape
        warn(f"`x` has shape {x.shape}: read as {n} images of {t} rows, {h} columns and {w} "
             f"channels. If they are clips or volumes of {t} grey frames of {h}x{w}, frames "
             f"first, shmaug's ops would blend neighbouring frames. Fix: x = np.moveaxis(x, 1, "
             f"-1) (frames become channels, which geometric ops move alike); if they are "
             f"images of {w} bands, leave x as it is (warnings.filterwarnings('ignore', "
             f"'`x` has shape') silences this).")


def stored_as(images: np.ndarray | None, dtype: np.dtype | None) -> None:
    """Images no op makes, refused before any process starts where ``output_dtype`` would
    take a scale that numpy does not guess (float to uint8): a worker refused the first one."""
    if images is None or dtype is None or np.can_cast(images.dtype, dtype, "same_kind"):
        return
    fix = ("(x * 255).round().astype(np.uint8) for floats in [0, 1]"
           if dtype == np.uint8 and images.dtype.kind == "f" else f"x.astype(np.{dtype})")
    raise ArgumentTypeError(
        f"`output_dtype` is {dtype} but `x` holds {images.dtype} and no op makes the samples: "
        f"numpy stores {images.dtype} as {dtype} only by guessing a scale, which shmaug does "
        f"not do. Fix: convert x once, before the loader ({fix}), or leave `output_dtype` out "
        f"(batches of {images.dtype}).")


def float16_room(images: np.ndarray | None, dtype: np.dtype | None) -> None:
    """Integer images no op makes (16-bit and wider), with a value float16 holds only as
    inf, refused before any process starts where ``output_dtype`` is float16 (a worker
    refused the first such sample, an hour into an epoch; an ``augment`` may scale them, and
    its samples are checked as they come). In memory only: a memory map is read as it goes."""
    if images is None or dtype != np.float16 or images.dtype.kind not in "iu" or \
            np.iinfo(images.dtype).max <= 65519 or isinstance(images, np.memmap) or \
            not images.size:
        return
    axes = tuple(range(1, images.ndim))  # (per sample, without a copy of the array)
    over = np.flatnonzero((images.max(axis=axes) > 65519) | (images.min(axis=axes) < -65519))
    if len(over):  # (65519 rounds down to 65504, float16's largest; 65520 up to inf)
        raise ArgumentError(
            f"`output_dtype` is float16, whose largest value is 65504, and `x` ({images.dtype}) "
            f"holds larger values ({len(over)} sample(s), the first: sample {int(over[0])}, "
            f"up to {int(np.abs(images[over[0]].astype(np.int64)).max())}), which would become "
            f"inf. Fix: scale x to [0, 1] first (x / x.max(): float16 then keeps about 11 "
            f"bits of each level), or pass output_dtype='float32'.")


_EMPTY = "`x` is empty (0 samples). Fix: pass a dataset with at least one sample."


def _rows(y: Any) -> int | None:
    """How many samples ``y`` labels (a list of labels, a Series, one array, or the first of
    several outputs), or None."""
    if isinstance(y, dict) or (isinstance(y, (list, tuple)) and y and all(
            isinstance(v, np.ndarray) and v.ndim for v in y)):
        first = next(leaves(y), (None, None))[1]
        return len(first) if isinstance(first, np.ndarray) and first.ndim else None
    try:
        return len(y)
    except TypeError:
        return None


_ON_DISK = ("h5py", "zarr", "tables", "netCDF4")  # arrays whose rows are read from a file


def _not_an_array(x: Any) -> str:
    """What ``x``, neither an array nor a list of images, is, and the fix: a Hugging Face
    dataset, a stream, a map-style dataset, a dict of inputs, an array on disk."""
    kinds = {c.__name__ for c in type(x).__mro__}
    streams = "IterableDataset" in kinds or "IterableDatasetDict" in kinds  # (torch's,
    # Hugging Face's: torch's has a __getitem__ of Dataset's, which raises)
    if type(x).__module__.partition(".")[0] == "datasets" and hasattr(x, "features") and \
            not streams:
        return ("a Hugging Face dataset. Fix: its image column through "
                "`shmaug.ImageRecords.from_huggingface(dataset, ...)` (an `Image` feature: "
                "decoded in the workers), or its arrays, "
                "`np.stack(dataset.with_format('numpy')[column])`, with `y` likewise")
    if streams or hasattr(x, "__getitem__") and hasattr(x, "on_epoch_end") or \
            hasattr(x, "__next__") or isinstance(x, Iterator) or \
            hasattr(x, "__iter__") and not hasattr(x, "__getitem__"):
        return ("it yields batches or samples one at a time (a stream, an IterableDataset), "
                "which cannot be read by index. Fix: pass the arrays it reads from, or "
                "collect a finite one once: `np.stack(list(samples))` for images, `images, "
                "labels = map(np.stack, zip(*samples))` for (image, label) pairs "
                "(`itertools.islice(samples, n)` first for an endless one), then "
                "shmaug.Loader(images, labels, ...); samples made from their index go in "
                "`load=fn` over `range(n)` (docs/loader.md#samples-made-on-the-fly)")
    if isinstance(x, dict):
        return ("a dict of a model's inputs is what shmaug.Sequence takes, its `image_key` "
                "naming the images to augment (a Loader takes the images alone). Fix: "
                "`shmaug.Sequence(x, y, image_key=...)`")
    if hasattr(x, "__len__") and hasattr(x, "__getitem__") and \
            not hasattr(x, "__array__") and not hasattr(x, "shape"):
        return ("a dataset read by index (a torch map-style Dataset) is a sample source once "
                "it has a `load(self, index)` method that returns sample index's image "
                "alone, as a numpy array (its label goes in `y`). Fix: add one, e.g. "
                "`def load(self, index): return np.asarray(self[index][0])`, and pass the "
                "dataset as `x`")
    if type(x).__module__.partition(".")[0] in _ON_DISK:
        return ("an array kept on disk (an h5py Dataset, a zarr array) cannot be shared with "
                "the workers as it is. Fix: `np.asarray(x)` where it fits in memory (it is "
                "read whole, then copied into shared memory); else write it once as a .npy, "
                "a chunk at a time into np.lib.format.open_memmap(path, mode='w+', ...), and "
                "pass the path, or read it through a source with `load(self, index)` "
                "(docs/loader.md#files-databases-and-handles)")
    return "Fix: convert it with `np.asarray(x)` (or `np.stack` a list of images)"


def _stacked(items: list[Any] | tuple[Any, ...], kind: str, y_rows: int | None = None
             ) -> np.ndarray | RaggedImages:
    """A list of images of one shape, stacked; of several sizes (one dtype and channel
    count), a source of them; anything else is refused with the fix.
    ``kind``: what ``x`` is, as the message names it; ``y_rows``: the rows of the ``y`` given
    beside it (arrays of as many rows are Keras' several inputs, not an (x, y) pair)."""
    if not items:
        raise ArgumentError(_EMPTY)
    if all(isinstance(item, (bytes, bytearray, memoryview)) for item in items) and \
            looks_encoded(bytes(items[0][:64])):
        raise ArgumentTypeError(
            f"`x` as {kind} holds {len(items)} encoded images (the first: "
            f"{bytes(items[0][:12])!r}...): a source of them has the workers decode them, "
            f"from one copy in shared memory. Fix: `shmaug.ImageRecords.from_bytes(list(x), y, "
            f"image_size=(224, 224))` (image_size=None keeps each at its own size).")
    if all(isinstance(item, (str, bytes, os.PathLike)) for item in items):
        raise ArgumentTypeError(
            f"`x` as {kind} holds {len(items)} path(s) ({got(items[0])}, ...), not images. "
            f"Fix: read them as a source, `shmaug.ImageFiles.from_paths(list(x), y, "
            f"image_size=(224, 224))`.")
    absent = next((i for i, item in enumerate(items) if missing(item)), None)
    if absent is not None:
        raise ArgumentError(
            f"`x` as {kind} has no image at index {absent} ({items[absent]!r}). Fix: leave "
            f"that sample out (with its label), e.g. df.dropna(subset=['image']).")
    if all(isinstance(item, tuple) and len(item) == 2 and np.ndim(item[0]) >= 2 and (
            isinstance(item[1], (str, bytes)) or np.ndim(item[1]) <= 1) for item in items[:64]):
        # (a label beside each image: a frame pair's second frame is an image, as its first)
        raise ArgumentTypeError(
            f"`x` as {kind} holds (image, label) pairs (the first: a "
            f"{type(items[0][0]).__name__} of shape {np.shape(items[0][0])} and "
            f"{type(items[0][1]).__name__} {str(items[0][1])[:40]}), as a "
            f"generator or a torch Dataset yields them: shmaug takes the images as `x` and "
            f"the labels as `y`. Fix: `images, labels = map(np.stack, zip(*x))`, then "
            f"shmaug.Loader(images, labels, ...).")
    arrays = [np.asarray(item) for item in items]
    shapes = sorted({a.shape for a in arrays}, key=len)
    # A 3-D item is an image (H, W, C) only with a plausible channel count; (N, H, W) arrays
    # in a tuple are Keras' several-inputs convention, which must not become N-channel images.
    image_like = len(shapes[0]) == 2 or len(shapes[0]) == 3 and (
        shapes[0][-1] in (1, 2, 3, 4) or kind == "a list" and y_rows == len(arrays)
        and shapes[0][-1] < shapes[0][0])  # (a label each, bands fewer than rows: images)
    if len(shapes) == 1 and image_like and arrays[0].dtype.kind in "biuf":
        return np.stack(arrays)
    shown = ", ".join(str(s) for s in shapes[:3]) + (", ..." if len(shapes) > 3 else "")
    if y_rows is not None and 1 < len(arrays) != y_rows and all(  # (N images: N labels)
            a.ndim >= 2 and len(a) == y_rows for a in arrays):
        raise ArgumentTypeError(
            f"`x` as {kind} holds {len(arrays)} arrays of {len(arrays[0])} rows each ({shown}) "
            f"and `y` is given: Keras' several inputs of one model. shmaug augments one of "
            f"them, the images, and hands the others over row for row. Fix: pass a dict, "
            f"`shmaug.Sequence(x={{'image': images, 'meta': meta}}, y=y, image_key='image')`, "
            f"with the model's inputs named so.")
    if len(arrays) == 2 and y_rows is None and arrays[0].ndim in (3, 4) and \
            1 <= arrays[1].ndim <= 2 and \
            len(arrays[0]) == len(arrays[1]) and arrays[1].shape != arrays[0].shape[:2]:
        raise ArgumentTypeError(
            f"`x` is a pair of {len(arrays[0])} images {arrays[0].shape} and {len(arrays[1])} "
            f"labels {arrays[1].shape}: Keras' (x, y) tuple. Fix: pass them as two arguments, "
            f"x then y: `shmaug.Sequence(x, y, ...)` or `shmaug.Loader(x, y, ...)`.")
    if len(shapes) == 1 and len(shapes[0]) == 4 and arrays[0].dtype.kind in "biuf":
        raise ArgumentError(
            f"`x` as {kind} holds {len(items)} arrays of shape {shapes[0]}, clips or volumes "
            f"(T, H, W, C) rather than images. Fix: stack them, x = np.stack(x), and then: "
            f"{_AXES_FIX[5]}.")
    if len(shapes) == 1 and len(shapes[0]) == 3 and arrays[0].dtype.kind in "biuf":
        raise ArgumentTypeError(
            f"`x` as {kind} holds {len(items)} arrays of shape {shapes[0]}: images of "
            f"{shapes[0][-1]} channels, or {len(items)} inputs of {shapes[0][0]} samples each "
            f"(Keras' several inputs). Fix: for images, `np.stack(x)`"
            + (" (channels first: np.moveaxis(np.stack(x), 1, -1))"
               if shapes[0][0] <= 4 < shapes[0][-1] else "")
            + "; for several inputs, a dict {name: array} and `image_key=` (shmaug.Sequence).")
    return _of_several_sizes(arrays, kind, shown, isinstance(items, tuple))


def _of_several_sizes(arrays: list[np.ndarray], kind: str, shown: str, as_tuple: bool
                      ) -> RaggedImages:
    """Images of several sizes, of one dtype and channel count, as a source of them (held
    once in shared memory); anything else of several shapes is refused with the fix. A tuple
    is Keras' several inputs, not images (``as_tuple``)."""
    empty = next((i for i, a in enumerate(arrays) if 2 <= a.ndim <= 3 and not a.size), None)
    if empty is not None:
        raise ArgumentError(
            f"`x` as {kind} holds an empty image at index {empty}, of shape "
            f"{arrays[empty].shape}. Fix: leave it out (with its label).")
    images = all(a.ndim == 2 and min(a.shape) > 0 or a.ndim == 3 and min(a.shape[:2]) > 0
                 and 1 <= a.shape[2] <= 4 for a in arrays)
    layouts = sorted({a.shape[2:] for a in arrays})
    dtypes = sorted({str(a.dtype) for a in arrays})
    if images and not as_tuple and len(layouts) == 1 and \
            dtypes == [str(arrays[0].dtype)] and arrays[0].dtype.kind in "biuf":
        return RaggedImages(arrays)  # held once in shared memory, each at its own size
    if images and len(layouts) > 1:
        counts = "; ".join(_channel_count(s, sum(a.shape[2:] == s for a in arrays))
                           for s in layouts)
        raise ArgumentError(
            f"`x` as {kind} holds images of several channel counts: {counts}. A batch is one "
            f"array, so every image needs the same. Fix: convert them as you read them, e.g. "
            f"`np.asarray(PIL.Image.open(path).convert('RGB'))` (or 'L' for grey), or read "
            f"the files as a source that converts: `shmaug.ImageFiles.from_paths(paths, "
            f"color_mode='rgb', image_size=None)`.")
    if images and len(dtypes) > 1:
        raise ArgumentError(
            f"`x` as {kind} holds images of several dtypes ({', '.join(dtypes)}). Fix: "
            f"convert them to one as you read them, in one range too: a float image in "
            f"[0, 1] beside uint8 ones as `(image * 255).round().astype(np.uint8)`, or every "
            f"image as float32 in [0, 1] (`image.astype(np.float32) / 255` for a uint8 one), "
            f"then value_range= that range.")
    raise ArgumentTypeError(
        f"`x` as {kind} must hold images (H, W) or (H, W, C) (C up to 4) of a numeric dtype; "
        f"received {len(arrays)} items of shape(s) {shown} and dtype {arrays[0].dtype}. Fix: "
        f"pass images of one size as `np.stack(images)`, or of several sizes as a list, with "
        f"an `augment` that ends in one size; for a model with several inputs pass a dict "
        f"{{name: array}} and `image_key=` (shmaug.Sequence)."
    )


def length(x: Any) -> int:
    """How many samples a ``load`` source has: ``len(x)``, at least 1."""
    try:
        n = len(x)
    except TypeError:
        raise ArgumentTypeError(
            f"With `load`, `x` must be a sized collection (its length is the number of "
            f"samples); received {got(x)}. Fix: pass e.g. a list of file paths."
        ) from None
    if n == 0:
        raise ArgumentError(_EMPTY)
    return int(n)


def targets(y: Any, n: int, name: str = "y") -> Any:
    """None, one array, or a dict / list / tuple (nested) of arrays, each of length n. Boxes
    of Keras' layout given per sample (a list of (m_i, 4) arrays under ``boxes``, beside
    their ``labels``) are padded with -1 to the dataset's largest count (``pad_boxes``). A
    target source (``is_target_source``: masks in files) stays as it is, its rows made by the
    workers."""
    if y is None:
        return None
    if is_target_source(y):
        if len(y) != n:
            raise ArgumentError(
                f"`{name}` ({got(y)}) must have one entry per sample of `x` ({n}); it has "
                f"{len(y)}. Fix: build it over the same samples, in the same order.")
        return y
    if isinstance(y, dict):
        ragged = _per_sample(y.get("boxes"), n)
        if ragged is not None:
            key = next((k for k in BOX_LABEL_KEYS if k in y), "labels")
            boxes, labels = pad_boxes(ragged, _per_sample(y.get(key), n) or y.get(key))
            y = {**y, "boxes": boxes, **({} if labels is None else {key: labels})}
        return {k: _ragged_maps(v, n, f"{name}[{k!r}]") or targets(v, n, f"{name}[{k!r}]")
                if k in _PLANE_NAMES else targets(v, n, f"{name}[{k!r}]") for k, v in y.items()}
    if isinstance(y, (list, tuple)) and y and all(
            isinstance(v, (np.ndarray, dict)) or is_target_source(v) for v in y):
        _refuse_rows_as_outputs(y, n, name)
        # Keras' convention: a list / tuple of arrays is one target per model output.
        return type(y)(targets(v, n, f"{name}[{i}]") for i, v in enumerate(y))
    return _target(name, y, n)


def weights(tree: Any, name: str = "sample_weight") -> None:
    """Sample weights (an array, or a dict / list of them per output) that are finite and
    >= 0: one NaN or inf made every weight of the model NaN at its first step, and a
    negative one trained that sample the other way, without a word (Keras takes them)."""
    for where, leaf in leaves(tree):
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "USc":  # (objects: _target)
            raise ArgumentTypeError(
                f"`{name}{''.join(f'[{k!r}]' for k in where)}` holds {leaf.dtype} values, "
                f"but a sample's weight is a real number: fit would stop at its first step. "
                f"Fix: pass numbers, e.g. np.asarray(weights, dtype=np.float32).")
        if not isinstance(leaf, np.ndarray) or leaf.dtype.kind not in "biuf" or not leaf.size:
            continue
        bad = ~np.isfinite(leaf) | (leaf < 0) if leaf.dtype.kind == "f" else leaf < 0
        if bad.any():
            at = int(np.flatnonzero(bad.reshape(len(leaf), -1).any(axis=1))[0])
            said = name + "".join(f"[{k!r}]" for k in where)
            value = leaf[at].tolist()
            raise ArgumentError(
                f"`{said}` must be finite and >= 0; received {value} at sample {at}. Fix: "
                f"clean the weights first, e.g. "
                f"np.nan_to_num({said}, nan=0.0, posinf=0.0).clip(0) (a weight of 0 leaves "
                f"that sample out of the loss).")


def _refuse_rows_as_outputs(y: list[Any] | tuple[Any, ...], n: int, name: str) -> None:
    """A list of ``n`` arrays, none of ``n`` entries, is per-sample rows
    (``[to_categorical(l, k) for l in labels]``, each image's boxes, a line's characters),
    which Keras' convention would read as ``n`` model outputs."""
    if len(y) == n > 1 and all(isinstance(v, np.ndarray) and (not v.ndim or len(v) != n)
                               for v in y):
        raise ArgumentError(_ragged(name, y, f"a {type(y).__name__} of {n} arrays, one per "
                                             f"sample, where a list of arrays is one target "
                                             f"per model output (Keras' convention)"))


_PLANE_NAMES = tuple(m for m in MASK_NAMES if m != "masks")  # one plane a sample ("masks":
# (K, H, W), one per instance)


def _ragged_maps(value: Any, n: int, name: str) -> RaggedImages | None:
    """Masks of several sizes, one per sample (each its image's size), as a source of them
    held in shared memory as the images of a list are; None for anything else."""
    entries = _per_sample(value, n)
    if not entries or not all(isinstance(e, np.ndarray) and e.dtype.kind in "biuf" and (
            e.ndim == 2 or e.ndim == 3 and e.shape[2] == 1) and e.size for e in entries):
        return None
    if len({e.shape for e in entries}) == 1 or len({(e.ndim, e.dtype) for e in entries}) > 1:
        return None  # one shape: stacked as any target; layouts mixed: refused as before
    return RaggedImages(entries, name)


def _per_sample(value: Any, n: int) -> list[Any] | None:
    """``value`` as one entry per sample where it is ragged: a list or tuple, an object array
    of per-sample arrays, or a ``tf.RaggedTensor`` (KerasCV's boxes), of ``n`` entries."""
    if type(value).__name__ == "RaggedTensor" and hasattr(value, "to_list"):
        value = value.to_list()
    if isinstance(value, np.ndarray) and value.dtype.kind == "O" and value.ndim == 1:
        value = list(value)
    return list(value) if isinstance(value, (list, tuple)) and len(value) == n else None


def _target(name: str, value: Any, n: int) -> np.ndarray:
    if isinstance(value, (str, bytes, os.PathLike)):  # (x takes a .npy path; these do not)
        raise ArgumentTypeError(
            f"`{name}` is a path ({value!r}): only `x` is read from a path. Fix: "
            f"{name}=np.load(path, mmap_mode='r') for a .npy file (mapped, not copied: the "
            f"workers read it as they read x), or read the file into an array first.")
    # An ndarray as given: a np.memmap stays one, so workers map it rather than copy it.
    try:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
    except ValueError:  # ragged nested lists: numpy's "inhomogeneous shape"
        raise ArgumentError(_ragged(name, value, f"a {type(value).__name__} whose entries "
                                                 f"do not stack")) from None
    except TypeError as exc:  # a dtype numpy has not (torch's bfloat16)
        raise ArgumentTypeError(
            f"`{name}` could not be read as a numpy array ({exc}). Fix: convert it to a dtype "
            f"numpy has first, e.g. `{name}.float()` for a torch tensor of bfloat16.") from None
    if array.ndim == 0 or len(array) != n:
        told = (f"{len(array)} entries" if array.ndim else "a scalar" if np.isscalar(value)
                else got(value))  # (a type numpy cannot read: a tf.RaggedTensor)
        raise ArgumentError(
            f"`{name}` must have one entry per sample of `x` ({n}); received {told}. "
            f"Fix: pass `{name}` with {n} entries, one per sample"
            + (", as an array or a list of per-sample arrays." if array.ndim == 0
               and not np.isscalar(value) else ".")
        )
    if array.dtype.kind == "O" and len(array) and all(isinstance(v, str) for v in array.flat):
        array = array.astype(str)  # names in a pandas column (its object or str dtype)
    if array.dtype.kind == "O":
        raise ArgumentTypeError(_ragged(name, array, "an array of dtype object"))
    return array


def _ragged(name: str, value: Any, why: str) -> str:
    """What to do with per-sample entries that are not one numeric array: single values (a
    pandas column of names) converted; each image's boxes put where they move and shmaug pads
    them; same-shaped rows stacked; rows of several counts padded (keypoints with -1, masks
    with 0), or sequences padded with their lengths beside them (OCR's labels, for CTC)."""
    entries = _per_sample(value, len(value)) if hasattr(value, "__len__") else None
    said = f"`{name}` must be one numeric (or string) array with an entry per sample; " \
           f"received {why}"
    if not entries:
        return f"{said}. Fix: pass one array of one entry per sample."
    if all(isinstance(e, (str, bytes)) or np.ndim(e) == 0 for e in entries):
        gaps = any(e is None or type(e).__name__ in ("NAType", "NaTType") or
                   isinstance(e, float) and e != e for e in entries)  # (pandas' NA: no bool)
        to = ("np.asarray(sample_weight, dtype=np.float32)" if name.startswith("sample_weight")
              else f"np.asarray({name}, dtype=str) for names (or an int or float dtype)")
        return (f"{said}, of single values{' and missing ones' if gaps else ''}. Fix: "
                f"{'fill or drop the missing ones, then ' if gaps else ''}convert them, "
                f"{to}.")
    shapes = [np.shape(e) for e in entries]
    filled = [s for s in shapes if s != (0,)]  # (an image with none: [])
    listed = name if isinstance(value, (list, tuple)) else f"list({name})"
    if filled and all(len(s) == 2 and s[1] == 4 for s in filled):
        return (f"{said}, of per-sample (m, 4) rows. Fix: if they are each image's boxes, pass "
                f"them under y={{'bounding_boxes': {{'boxes': ..., 'labels': ...}}}} with "
                f"`bounding_box_format=`, which moves them with their image and pads each "
                f"batch's (a plain array is not moved; docs/detection.md)"
                + (f"; other rows: `np.stack({listed})`." if len(set(shapes)) == 1 else "."))
    if len(set(shapes)) == 1:
        return f"{said}, of entries of shape {shapes[0]}. Fix: `np.stack({listed})`."
    said += f", of entries of shapes {', '.join(str(s) for s in dict.fromkeys(shapes[:50]))}"
    if filled and _planes(filled, name):
        return (f"{said}: maps of images of several sizes. Fix: give them as the images go, "
                f"read by index in the workers: an object with a length and a `load(self, "
                f"index)` returning sample index's map, under the map's name in `y` (e.g. "
                f"y={{'segmentation_masks': source}}), with an `augment` that ends in one size "
                f"(docs/segmentation.md#from-a-folder-of-images-and-masks).")
    if filled and all(len(s) >= 2 and s[1:] == filled[0][1:] for s in filled):
        rest = ", ".join(str(k) for k in filled[0][1:])
        masks = "mask" in name  # (padded with empty masks of their dtype; others with -1)
        rows = "np.asarray(e)" if masks else "np.asarray(e, np.float32)"
        pad = "0" if masks else "-1"
        return (f"{said}. Fix: pad each to the largest count with {pad}, e.g. rows = [{rows}"
                f".reshape(-1, {rest}) for e in {name}]; m = max(map(len, rows)); np.stack(["
                f"np.concatenate([e, np.full((m - len(e), {rest}), {pad}, e.dtype)]) for e "
                f"in rows])" + ("" if masks else "; several people's keypoints then go in as "
                                "rows of one, reshaped to (N, m * K, 3)")
                + " (docs/detection.md).")
    floats = ", dtype='float32'" if any(np.asarray(e).dtype.kind == "f" for e in entries) \
        else ""
    if name.startswith("x"):  # (token ids into the model: 0 is Keras' padding, mask_zero)
        return (f"{said}. Fix: pad them to one length, e.g. `keras.utils.pad_sequences("
                f"{name}, padding='post'{floats})` (0, which an Embedding with "
                f"mask_zero=True leaves out: keep 0 for no token).")
    return (f"{said}. Fix: pad them to one length, e.g. `keras.utils.pad_sequences({name}, "
            f"padding='post', value=-1{floats})`, and pass each one's length beside them "
            f"where the loss needs it (a CTC loss: docs/ops.md#text-lines-ocr-handwriting).")


def _planes(shapes: list[tuple[int, ...]], name: str) -> bool:
    """Whether per-sample entries of several ``shapes`` are maps lying on images of several
    sizes (a mask each), rather than rows of several counts to pad (boxes, keypoints, a
    mask per instance of one image size): several widths, or masks by their name."""
    if not all(len(s) >= 2 for s in shapes):
        return False
    first, masks = shapes[0], "mask" in name
    return len({s[1:] for s in shapes}) > 1 or len(first) == 2 and masks or \
        len(first) == 3 and first[2] <= 4 and masks


def augmented_targets(y: Any, plan: Plan, image_shape: tuple[int, ...] | None = None,
                      labels_at: Path = (), x: Any = None) -> dict[str, Filed]:
    """The targets of ``y`` that the pipeline moves with their image, by name: the first
    filed, in any dict of ``y`` (depth first, in order), under each name the plan ``moves``
    (an albumentations pipeline's ``mask``, ``bboxes``, ...). Refuses missing targets the
    plan requires, and what its ``check_targets`` refuses (``labels_at``: where in ``y`` the
    user's ``y`` lies, as ``Data.labels_at``), against each image's size: ``image_shape``,
    or for a list of images of several sizes (``x``), each group of one size in turn."""
    found: dict[str, Filed] = {}
    for filed in filed_under(y, plan.moves):
        found.setdefault(filed.name, filed)  # a later one (a sample weight named so) stays
    arrays = {k: f.value for k, f in found.items()
              if isinstance(f.value, np.ndarray)}  # (sources: later)
    if arrays:
        try:
            for shape, rows in _by_size(x, image_shape):
                plan.check_targets(arrays if rows is None else {
                    k: v[rows] for k, v in arrays.items()}, shape)
        except (ArgumentError, ArgumentTypeError) as error:
            placed = _placed(str(error), found, labels_at)
            if placed == str(error):
                raise
            raise type(error)(placed) from None
    # (a y of class ids, one-hot rows or masks alone: a pipeline shared with another set)
    ours = [v for at, v in leaves(y) if at[:len(labels_at)] == labels_at] if not found else []
    for option, what, fix in _DECLARED:
        declared = getattr(plan.pipeline, option, None)
        if declared is not None and plan.moves and any(_points(option, v) for v in ours):
            raise ArgumentError(
                f"`augment` has {option}={declared!r}, but `y` holds no array under "
                f"{what}, which move with their image: a `y` of them under "
                f"another name (or none) is handed over where it was, while the images "
                f"move. Fix: {fix} (beside other targets in the same dict); or leave "
                f"{option} out where y holds none.")
    moved_at = {f.path for f in found.values()}
    _tell_unmoved_points([(at, v) for at, v in leaves(y) if at[:len(labels_at)] == labels_at
                          and at not in moved_at], plan, labels_at, image_shape)
    missing = [name for name in plan.required if name not in found]
    if missing:
        raise ArgumentError(
            f"`augment` ({type(plan.pipeline).__name__}) needs the targets {missing} with "
            f"each image, but `y` holds no array under those names. Fix: pass y as a dict "
            f"with them, e.g. y={{{', '.join(repr(m) + ': ...' for m in missing)}}}, one row "
            f"per sample (pad boxes and keypoints with rows of -1 to a fixed count).")
    return found


# A pipeline's point formats, the names that carry such points in `y`, and how to give them.
_DECLARED = (("bounding_box_format", "'boxes' (Keras' 'bounding_boxes' dict) or 'bboxes'",
              "y={'bounding_boxes': {'boxes': boxes, 'labels': labels}}, (N, M, 4) and "
              "(N, M) padded with rows of -1"),
             ("keypoint_format", "'keypoints'",
              "y={'keypoints': points}, (N, K, 2 or 3) padded with rows of -1"))


def _by_size(x: Any, image_shape: tuple[int, ...] | None
             ) -> list[tuple[tuple[int, ...] | None, np.ndarray | None]]:
    """``(shape, rows)``: the samples of each image size, for checks against it; one group
    of every sample (``rows`` None) at ``image_shape`` but for a list of several sizes
    (boxes read in another format, outside their image or as fractions were let through)."""
    if not isinstance(x, RaggedImages):
        return [(image_shape, None)]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, size in enumerate(x.sizes):
        groups.setdefault(tuple(size), []).append(i)
    return [(size, np.array(rows)) for size, rows in groups.items()]


def _on_image(option: str, value: Any, image_shape: tuple[int, ...] | None) -> bool:
    """Whether ``value`` looks like rows of boxes (M, 4) or keypoints (K, 2 or 3) in pixels
    per sample: floats past 1, every one -1 (padding) or within the image's larger side (a
    time series, an embedding, logits or a camera matrix has negatives or exceeds it)."""
    shape = tuple(getattr(value, "shape", ()))
    widths = (4,) if option == "bounding_box_format" else (2, 3)
    if len(shape) != 3 or shape[-1] not in widths or not in_pixels(value):
        return False
    coords = value[..., :2] if shape[-1] == 3 else value  # (a visibility column beside)
    side = max(image_shape[:2]) if image_shape is not None and len(image_shape) >= 2 \
        else np.inf
    return bool(np.all((coords == -1) | ((coords >= 0) & (coords <= side))))


def _tell_unmoved_points(others: list[tuple[Path, Any]], plan: Plan, labels_at: Path,
                         image_shape: tuple[int, ...] | None = None) -> None:
    """Warn of what looks like boxes (N, M, 4) or keypoints (N, K, 2 or 3) in pixels under a
    name nothing moves, where the pipeline moves pixels and declares no format for them: they
    stay where they were while the images move (a format declared refuses them already)."""
    if not any(kind == WARPED for _, kind in plan.kinds):  # (shmaug's own geometric ops)
        return
    for option, what, fix in _DECLARED:
        if getattr(plan.pipeline, option, None) is not None:
            continue
        for at, value in others:
            if _on_image(option, value, image_shape):
                looks = "boxes" if option == "bounding_box_format" else "keypoints"
                warn(f"`{shown(at[len(labels_at):])}` {tuple(value.shape)} looks like "
                     f"{looks} in pixels, but nothing moves it while `augment` moves the "
                     f"images: it would stay where it was. Fix: {option}=... on the Compose, "
                     f"and {fix}; if it is no {looks} on the image, ignore this warning.")
                return


def _points(option: str, value: Any) -> bool:
    """Whether ``value``, an array of ``y``, may hold what ``option`` reads: boxes (M, 4+) per
    sample, or keypoints (K, 2 or 3) per sample, or one box, or keypoints flattened, in
    pixels (floats past 1: not one-hot rows)."""
    shape: tuple[int, ...] = tuple(getattr(value, "shape", ()))
    boxes = option == "bounding_box_format"
    if len(shape) >= 3:
        return shape[-1] >= 4 if boxes else shape[-1] in (2, 3)
    return len(shape) == 2 and (shape[-1] == 4 or not boxes) and in_pixels(value)


def _placed(text: str, found: dict[str, Filed], labels_at: Path) -> str:
    """``text`` with each target of the user's ``y`` (at ``labels_at``) named where it lies
    there (``y['bounding_boxes']['boxes']``): the checks name it by its name inside,
    ``y['boxes']``, which is not there."""
    for name, filed in found.items():
        if filed.path[:len(labels_at)] != labels_at:
            continue  # (a Sequence's other inputs: as the checks say)
        where = "y" + "".join(f"[{key!r}]" for key in filed.path[len(labels_at):])
        for said in {name, filed.path[-1]}:
            text = text.replace(f"y[{said!r}]", where)
    return text


def box_format(y: Any) -> str | None:
    """The format the boxes of ``y`` carry (a reader's ``Boxes``: ``bounding_box_format``),
    or None where they say none."""
    for filed in filed_under(y, ("boxes", "bboxes")):
        fmt = format_of(filed.value)
        if fmt is not None:
            return fmt
    return None


SPATIAL_TARGETS = ("mask", "masks", "segmentation_masks", "boxes", "bboxes", "keypoints")
"""What lies on the image, by Keras' and albumentations' names: what a pipeline that moves
pixels must move too, or the image and its target part ways."""


def spatial_targets(labels: Any) -> list[str]:
    """The names under which ``labels`` (``y``) holds masks, boxes or keypoints."""
    return [filed.name for filed in filed_under(labels, SPATIAL_TARGETS)]


def unnamed_masks(y: Any, plan: Plan, image: tuple[int, ...] | None,
                  labels_at: Path = ()) -> None:
    """Refuse an array of ``y`` that lies on the images (a mask, a depth map, per-pixel weights,
    a flow field: each row a plane of their height and width, channels last or first; warn of
    one at a multiple or fraction of their size, a super-resolution target or a coarse heatmap,
    which a per-sample matrix may look like) under no name the pipeline moves, where it
    holds an op known to move pixels (shmaug's geometric ops): Keras' ``fit(images, masks)``
    way, which would train on maps left where the images were. ``labels_at``: where the
    user's ``y`` lies in ``y`` (a Sequence's: beside it, the other ``inputs`` of a dict ``x``
    and the ``sample_weight``, which no worker moves)."""
    if image is None or not any(kind in (WARPED, BLENDED) for _, kind in plan.kinds):
        return  # (a function that declares nothing may well move no pixel: a noise)
    moved: dict[str, Path] = {}  # the first filed under each name is the one moved
    for filed in filed_under(y, plan.moves):
        moved.setdefault(filed.name, filed.path)
    for at, value in leaves(y):
        how = None if at in moved.values() else _on_the_images(value, (image[0], image[1]))
        if how is None:
            continue
        lies = (f"holds an array of shape {value.shape}: {how} per sample, lying on the "
                f"{image[1]}x{image[0]} images, which `augment` moves (it holds a geometric op)")
        where = shown(at[len(labels_at):])
        if how == CHANNELS_FIRST and at[:len(labels_at)] == labels_at:
            raise ArgumentError(
                f"`{where}` {lies}, but shmaug moves a map with its image only channels last, "
                f"and nothing moves it under that name. Fix: pass it channels last, "
                f"np.moveaxis({where}, 1, -1), under a name the pipeline moves "
                f"(y={{'mask': ...}}), or augment without geometric ops.")
        if how not in (PLANE, CHANNELS_FIRST):  # (a per-sample matrix may be square too)
            named = where if at[:len(labels_at)] == labels_at else side_named(at)
            warn(f"`{named}` {lies}: if "
                 f"it is a map of them (a super-resolution target, a heatmap), nothing moves "
                 f"it, and shmaug moves a map only at the image's own size. Fix: give it at "
                 f"the images' size (a super-resolution pair: the high-resolution images as x "
                 f"and a copy as y={{'mask': ...}}, moved pixel for pixel with "
                 f"interpolation='nearest'; the low resolution made in the model, a Resizing "
                 f"layer first), or augment without geometric ops; if it is no map, ignore "
                 f"this warning.")
            continue
        if at[:len(labels_at)] == labels_at:
            raise ArgumentError(
                f"`{where}` {lies}, but nothing moves it under that name: a "
                f"model would learn from masks left where the images were. Fix: name it so it "
                f"moves with its image (nearest-neighbour), y={{'segmentation_masks': masks}} "
                f"(Keras' name; a Sequence hands it to a one-output model as the masks), or "
                f"augment without geometric ops. A map of values along the image's axes "
                f"(optical flow, disparity, normals) moves so too but keeps its values, which "
                f"flips, rotations and scalings change: see docs/segmentation.md, 'Flow, "
                f"disparity and normals'.")
        if at[0] == "sample_weight":
            raise ArgumentError(
                f"`sample_weight` {lies}, but no worker moves weights: each pixel's loss would "
                f"be weighed by the weight of another pixel. Fix: weigh per pixel in the loss, "
                f"from the moved masks (e.g. a loss that takes class weights), or pass "
                f"per-sample weights, shape (N,), or augment without geometric ops.")
        turned = "" if how == PLANE else ", channels last: np.moveaxis(depth, 1, -1)"
        raise ArgumentError(
            f"`x[{at[-1]!r}]` {lies}, but only `x[image_key]` is augmented: the model would "
            f"see this input where the images were. Fix: stack it onto the images as channels "
            f"(e.g. np.concatenate([images, depth], axis=-1){turned}) so that it moves with "
            f"them (hue, saturation and grayscale then change the first three channels "
            f"alone, the other colour, noise and blur ops every channel, contrast each past "
            f"the third about its own mean: keep them out of `augment` for a depth or mask "
            f"input, and colour a second photo in an augment of your own, which may split "
            f"the channels and return both stacked), or augment without geometric ops.")


PLANE, CHANNELS_FIRST = "a plane of their height and width", "a plane channels first (C, H, W)"
_SCALES = (2, 4, 8)  # a super-resolution target's, a coarse heatmap's (CenterNet: 1/4)


def _on_the_images(value: Any, hw: tuple[int, int]) -> str | None:
    """How an array lies on images of ``hw`` (height, width), one row per sample: ``PLANE``,
    ``CHANNELS_FIRST``, a plane at a multiple or fraction of their size, or None."""
    if not isinstance(value, np.ndarray) or value.ndim not in (3, 4):
        return None
    for axes, layout in ((slice(1, 3), PLANE), (slice(2, 4), CHANNELS_FIRST)):
        if value.ndim < axes.stop:
            continue
        h, w = value.shape[axes]
        if (h, w) == hw:
            return layout
        for k in _SCALES:
            if min(h, w) >= 8 and ((h, w) == (hw[0] * k, hw[1] * k) or (h, w) in (
                    (hw[0] // k, hw[1] // k), (-(-hw[0] // k), -(-hw[1] // k)))):
                return (f"a plane at {k}x their size" if h > hw[0] else
                        f"a plane at 1/{k} of their size")
    return None


def unmoved_sized(labels: Any, plan: Plan, given: tuple[int, ...] | None,
                  made: tuple[int, ...]) -> None:
    """Refuse sample 0's output (``made``) of another height and width than its input
    (``given``) where masks, boxes or keypoints pass unmoved, every op having said it moves no
    pixel (``targets='still'``): a pad or a crop said so too, and 32x32 images came with their
    16x16 masks, their boxes on the old canvas."""
    found = spatial_targets(labels)
    if not found or given is None or plan.pipeline is None or plan.moves_pixels \
            or tuple(made[:2]) == tuple(given[:2]):
        return
    raise OutputMismatchError(
        f"`augment` made sample 0 {made[1]}x{made[0]} pixels (width x height) from "
        f"{given[1]}x{given[0]}, but every op of it says it moves no pixel "
        f"(targets='still'), so {', '.join(repr(f) for f in found)} in `y` would pass "
        f"unmoved, no longer on their pixels. Fix: pad, crop or resize with shmaug's own ops "
        f"(e.g. Op('resize', height=..., width=...)), which move them too, or keep the size.")


def sized_output(x: Any, plan: Plan, shape: tuple[int, ...] | None) -> None:
    """Refuse a source that keeps photos at their own size (``image_size=None``) without a
    pipeline that ends in one size: a batch is one array, so sample 0's size would be
    demanded of every other photo, and the first of another size would fail mid-epoch."""
    if not source.keeps_own_size(x) or shape is not None:
        return
    augment = plan.pipeline
    if augment is None or plan.fixes_size is False:
        given = "`augment` is None" if augment is None else f"`augment`={got(augment)}"
        ragged = isinstance(x, RaggedImages)
        what = (f"`x` is a list of images of several sizes ({_sizes(x.sizes)})" if ragged
                else "`x` keeps each photo at its own size (image_size=None)")
        other = ("Or resize them to one size yourself and pass `np.stack(images)`." if ragged
                 else "Or give the source an `image_size`.")
        raise ArgumentError(
            f"{what}, and {given}, which "
            f"gives no one size to batch them at. Fix: make `augment` end in one size "
            f"whatever the photo's, with a resize or resized crop in pixels: for photos "
            f"`Compose([Op('random_resized_crop', height=224, width=224), ...])` (decoded "
            f"only where it crops) or `Op('center_resized_crop', height=224, width=224)` for "
            f"validation, else e.g. `Op('resize', height=32, width=256)`. Where every photo "
            f"holds a plain crop's window (`Op('crop', ...)` fails on a smaller one), or a "
            f"function of yours makes one size, pass `output_shape=`. {other}"
        )


def _channel_count(layout: tuple[int, ...], images: int) -> str:
    """``images`` images of ``layout`` (an image's shape past H, W), in words."""
    c = layout[0] if layout else 0
    return (f"{c} channels" if c > 1 else "one channel" + (" (H, W, 1)" if c else " (H, W)")) \
        + f": {images} image{'s' if images > 1 else ''}"


def _sizes(sizes: list[tuple[int, ...]]) -> str:
    """A few of ``sizes`` (height, width) as ``HxW`` (height x width)."""
    seen = list(dict.fromkeys(sizes))
    return ", ".join(f"{h}x{w}" for h, w in seen[:3]) + (", ..." if len(seen) > 3 else "") \
        + " (height x width)"


def spatial_sources(y: Any, x: Any) -> None:
    """Refuse, before anything starts, what would part a mask, boxes or keypoints of ``y``
    from their image: a source ``x`` that stands in another image for an unreadable one
    (``on_error="skip"``), or that crops or pads to an aspect ratio (which the targets do not
    follow); a target source filed under a mask name of another layout, or (where both are
    known) making masks of another size than the images, or (``check_beside``) reading
    files of another size than their images'."""
    found = list(filed_under(y, SPATIAL_TARGETS))
    if not found:
        return
    said = ", ".join(repr(filed.name) for filed in found)
    if source.stands_in_unreadable(x):
        raise ArgumentError(
            f"`x` ({got(x)}) has on_error='skip', which stands the next readable image in for "
            f"an unreadable one, but `y` holds {said}, which lie on the image that was meant: "
            f"the stand-in would carry another image's targets. Fix: on_error='raise' (and "
            f"replace or remove the unreadable files).")
    option = source.reframing(x)
    if option is not None:
        raise ArgumentError(
            f"`x` ({got(x)}) has {option}=True, which the targets {said} in `y` do not "
            f"follow (from_coco's and the record readers' are scaled by the plain stretch to "
            f"image_size; arrays of yours are taken in the pixels of the image handed out). "
            f"Fix: pass image_size=None and start `augment` with Op('resize', height=..., "
            f"width=..., {option}=True) (or a crop to a size: Op('center_resized_crop', "
            f"...)), which moves them, in the files' pixels, with the pixels; or leave "
            f"{option}=False.")
    images = source.image_shape(x)
    for name, _, target in found:
        if not is_target_source(target):
            continue
        kind = source.target_kind(target)
        if kind in MASK_NAMES and (name not in MASK_NAMES or
                                   (kind == "masks") != (name == "masks")):
            layout = "several masks per image" if kind == "masks" else "one mask per image"
            raise ArgumentError(
                f"`y[{name!r}]` ({got(target)}) makes {kind!r}, {layout}, which {name!r} "
                f"does not hold. Fix: file it as y={{{kind!r}: ...}}.")
        source.check_beside(target, x)  # (masks in files: stored sizes against the images')
        size = source.target_shape(target)
        if images is None or size is None:
            continue
        size, images = tuple(size[1:3] if kind == "masks" else size[:2]), tuple(images[:2])
        if size != images and (None not in size or None not in images):
            def shown(hw: tuple[Any, ...]) -> str:
                return "each its own size" if None in hw else f"{hw} pixels"

            raise ArgumentError(
                f"`y[{name!r}]` ({got(target)}) makes masks of {shown(size)}, but its images "
                f"are {shown(images)}: a mask lies on its image, pixel for pixel. Fix: give "
                f"both the same image_size.")


def unfiled_sources(made: dict[str, Any], plan: Plan) -> None:
    """Refuse a target source of masks (it says so: ``target_name``) that a pipeline moving
    pixels would pass on unmoved, being filed under no name the pipeline moves (a bare
    ``y=masks``, or ``{"seg": masks}``)."""
    if not plan.moves_pixels:
        return
    for place, target in made.items():
        kind = source.target_kind(target)
        if kind in SPATIAL_TARGETS:
            raise ArgumentError(
                f"`{place}` ({got(target)}) holds masks, but not under a name the pipeline "
                f"moves, and `augment` moves pixels: the masks would stay where they were, no "
                f"longer on their images. Fix: pass y={{{kind!r}: masks}} (Keras' name; a "
                f"Sequence hands a one-output model the masks themselves).")


def blended_beside(y: Any, labels_at: Path, mix: Any) -> tuple[Path, ...]:
    """Where the arrays of ``y`` beside the labels lie (a Sequence's other inputs of a dict
    ``x``, its sample weights), which ``mix`` blends pair by pair as it blends the images and
    labels: left alone, a row held one sample's while its image and label were mostly
    another's. Refuses those that cannot be blended (ids, strings)."""
    beside = [(path, value) for path, value in leaves(y)
              if path[:len(labels_at)] != labels_at]
    for path, value in beside:
        weights = path[0] == "sample_weight"  # (whole numbers blend as floats)
        if not (isinstance(value, np.ndarray) and value.dtype.kind in ("fiub" if weights
                                                                       else "f")):
            named = side_named(path)
            what = (f"an array of {value.dtype}" if isinstance(value, np.ndarray)
                    else got(value))
            raise ArgumentError(
                f"`mix` ({mix!r}) blends each pair of samples, images and labels, and so the "
                f"arrays beside them with the same weights; `{named}` is {what}, which does "
                f"not blend. Fix: pass it as floats (one-hot rows for categories), or "
                f"mix=None.")
    return tuple(path for path, _ in beside)


def sample_output(image: Any, maker: str = "`augment`", target: str | None = None
                  ) -> np.ndarray:
    """What ``maker`` (`augment`, or `load` where none augments) made of sample 0: an image
    array, or a numeric ``target`` (a scalar allowed)."""
    array = np.asarray(image)
    kinds = "biuf" if target is None else "biufUS"  # string labels may follow their boxes
    if array.dtype.kind not in kinds or (array.ndim == 0 and target is None):
        what = "an image array" if target is None else f"a numeric array for {target}"
        fix = ("decode them in it (e.g. `np.asarray(PIL.Image.open(io.BytesIO(blob))"
               ".convert('RGB'))`), or read the blobs as `shmaug.ImageRecords.from_bytes(blobs, "
               "labels)`, which decodes them in the workers" if maker == "`load`" and
               isinstance(image, (bytes, bytearray, memoryview)) else
               "return a numeric numpy array")
        raise ArgumentTypeError(
            f"{maker} must return {what}; on sample index 0 it returned "
            f"{got(image)}. Fix: {fix}."
        )
    return array


