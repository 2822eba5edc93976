"""Images of several sizes held once in shared memory: ``x`` given as a list of arrays of
different shapes (photos as PIL or OpenCV read them, scans, uneven tiles).

One array cannot hold them, so the loader takes the list as a sample source: ``load(i)`` is
image i, and the pipeline ends in one size (a resize, a resized crop), as for files kept at
their own size. ``sharing(store)`` copies every image once into one block of the loader's
``SharedStore``, an index of (offset, height, width, channels) per image ahead of the pixels;
the reader pickles as the block's handle, so a worker attaches by name instead of receiving
the list (a ``load=images.__getitem__`` sends every worker a copy of it).
"""

from __future__ import annotations

import struct
import weakref
from typing import Any

import numpy as np

from ..errors import ArgumentError, ClosedError
from .store import ArrayHandle, SharedStore, attach

_ROW = struct.Struct("<4q")  # per image: offset of its pixels in the block, height, width, C
_ALIGN = 64  # each image's pixels start on a cache line
_INSTEAD = ("or keep the {} in files, read by index in the workers (nothing copied): {}")
_FILES = {"images": "`shmaug.ImageFiles.from_paths(paths, image_size=None)`",
          "masks": "`shmaug.sources.from_segmentation(images, masks, image_size=None)`"}


class RaggedImages:
    """Images (H, W) or (H, W, C) of one dtype and channel count, of several sizes, as a
    sample source. Frames nothing itself (``image_size`` None: each keeps its size)."""

    image_size = None
    on_error = "raise"
    crop_to_aspect_ratio = False
    pad_to_aspect_ratio = False

    def __init__(self, images: list[np.ndarray], what: str = "x") -> None:
        """``what``: where the list was given, as messages name it (``x``, a mask's place
        in ``y``)."""
        first = images[0]
        self.dtype = first.dtype
        self.channels: int | None = first.shape[2] if first.ndim == 3 else None
        self.sizes = [a.shape[:2] for a in images]  # (kept after release, for messages)
        self.load = _Reader(images, len(images), self.dtype, what, None)

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.load(index)

    @property
    def output_shape(self) -> tuple[int | None, ...]:
        return (None, None) if self.channels is None else (None, None, self.channels)

    def check_beside(self, images: Any) -> None:
        """Refuse, before a loader starts, a mask of another size than its image, where these
        are masks (``y={'segmentation_masks': [...]}``) beside the images of a list, or of an
        array (all of one size, which masks of several sizes cannot all be)."""
        if isinstance(images, RaggedImages):
            sizes = images.sizes
        elif isinstance(images, np.ndarray) and images.ndim >= 3:
            sizes = [tuple(images.shape[1:3])] * len(images)
        else:
            return
        for i, (mask, image) in enumerate(zip(self.sizes, sizes)):
            if mask != image:
                raise ArgumentError(
                    f"The mask of sample {i} is {mask[0]}x{mask[1]} pixels (height x width) "
                    f"and its image {image[0]}x{image[1]}: a mask lies on its image's pixels. "
                    f"Fix: give each sample's mask its image's size (resize it with "
                    f"nearest-neighbour interpolation, or pad it as its image was).")

    def released(self) -> RaggedImages:
        """These images' sizes and layout, without the user's arrays: a closed loader's,
        whose options keep this source and its ``load`` (the one reader, let go of them)."""
        self.load.release()
        return self

    def __repr__(self) -> str:
        return (f"RaggedImages({len(self)} images of several sizes, {self.dtype}, "
                f"{'one channel' if self.channels is None else f'{self.channels} channels'})")


class _Reader:
    """``load``: image ``index``, from the user's list, or (shared) from the block."""

    __slots__ = ("_images", "_n", "_dtype", "_what", "_handle", "_block", "__weakref__")

    def __init__(self, images: list[np.ndarray], n: int, dtype: np.dtype, what: str,
                 handle: ArrayHandle | None) -> None:
        self._images = images  # invariant: empty once shared (the block holds them)
        self._n = n  # images in the list or the block
        self._dtype = dtype
        self._what = what  # where the list was given (``x``, a place in ``y``)
        self._handle = handle
        self._block: Any = None  # in a process that read the block: its mapping

    @property
    def __name__(self) -> str:  # how a worker error names the stage that failed
        return f"{self._what}[index]"

    def __call__(self, index: int) -> np.ndarray:
        if self._handle is None:
            if self._n and not self._images:
                raise ClosedError(
                    f"The list {self._what} was let go with its closed loader (a closed loader "
                    f"holds none of your arrays). Fix: index your own list.")
            view = self._images[index].view()
            view.flags.writeable = False  # ops get read-only images, as from an array `x`
            return view
        block: np.ndarray | None = self._block
        if block is None:  # (two threads' first reads: each maps it, both kept to the end)
            block, close = attach(self._handle, lent=True)
            # The mapping goes with this reader, or with the last view of it held then.
            weakref.finalize(self, close)
            self._block = block
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError(f"image index {index} out of range for {self._n} images")
        offset, h, w, c = _ROW.unpack_from(block.data, i * _ROW.size)
        shape = (h, w) if c == 0 else (h, w, c)
        # A view, as an array `x` gives its rows: a slide of 36 MB copied for each 256-pixel
        # crop cost 28x the crop (the pipeline copies what it keeps).
        pixels = block[offset:offset + h * w * max(c, 1) * self._dtype.itemsize]
        image: np.ndarray = pixels.view(self._dtype).reshape(shape)
        image.flags.writeable = False
        return image

    def release(self) -> None:
        """Hold the user's images no more (this reader then reads nothing)."""
        self._images = []

    def sharing(self, store: SharedStore) -> _Reader:
        """A reader of the same images, copied once into ``store``, which workers attach."""
        if self._handle is not None:
            return self
        rows, offset = [], _aligned(len(self._images) * _ROW.size)
        for image in self._images:
            rows.append((offset, *image.shape[:2], image.shape[2] if image.ndim == 3 else 0))
            offset = _aligned(offset + image.nbytes)
        kind = "images" if self._what == "x" else "masks"
        handle, block = store.empty((offset,), np.uint8, what=f"the list {self._what}",
                                    instead=_INSTEAD.format(kind, _FILES[kind]))
        for i, (row, image) in enumerate(zip(rows, self._images)):
            _ROW.pack_into(block.data, i * _ROW.size, *row)
            block[row[0]:row[0] + image.nbytes] = np.ascontiguousarray(image).reshape(-1).view(
                np.uint8)
        block.flags.writeable = False
        return _Reader([], self._n, self._dtype, self._what, handle)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self._images, self._n, self._dtype, self._what, self._handle)  # (shared: no
        # pixels)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._images, self._n, self._dtype, self._what, self._handle = state
        self._block = None


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
