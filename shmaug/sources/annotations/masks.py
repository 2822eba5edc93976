"""Segmentation masks kept in image files, as a target source: the workers decode them, so no
mask is decoded or held in the main process.

``MaskFiles`` is ``y``'s counterpart of ``ImageFiles``: a length and a ``load`` (a ``Reader``
over a path table, shared with the workers as an image source's is). A loader takes it as a
target (``{"segmentation_masks": masks}``): each worker decodes sample i's mask beside its
image, and the pipeline moves it with the image. ``MaskDecoder`` keeps class ids as they are:
a palette PNG gives its indices (PIL), never the colours OpenCV would expand them to; a 1-bit
grey PNG (a mask saved from a bool array) 0 and 1, as PIL reads it, not OpenCV's 0 and 255 (2-
and 4-bit ones are scaled to 0-255 by both, and stay so); a 16-bit PNG stays 16-bit; the
resize to ``image_size`` is
nearest-neighbour (a class id is never blended); a colour file is refused unless its channels
agree.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Sequence

import cv2
import numpy as np

from ..files import ImageFiles
from ..images.decode import (imdecode, limited, pixel_limit, raise_if_refused, refuse_bombs,
                             stored_sizes)
from ..remote import protocol_of
from ...errors import ArgumentError, ImageReadError
from ..images.reader import Reader
from ..images.settings import DEFAULT_IMAGE_SIZE, image_size_of

_PNG = b"\x89PNG\r\n\x1a\n"
_GREY, _PALETTE = 0, 3  # a PNG's colour type byte (offset 25) for grey and palette images


@dataclass(frozen=True, slots=True)
class MaskDecoder:
    """Encoded mask bytes to a (height, width, 1) array of class ids, resized to
    ``image_size`` by nearest neighbour (None: kept at its size)."""

    image_size: tuple[int, int] | None
    # the most pixels a mask may have, read where the source is made (``decode.pixel_limit``)
    max_pixels: int | None = field(default_factory=pixel_limit)

    def __call__(self, data: np.ndarray, what: str) -> np.ndarray:
        with limited(self.max_pixels):
            mask = decode_mask(data, what)
        size = self.image_size
        if size is not None and mask.shape != size:
            mask = cv2.resize(mask, (size[1], size[0]), interpolation=cv2.INTER_NEAREST_EXACT)
        return mask[..., None]


def decode_mask(data: np.ndarray, what: str) -> np.ndarray:
    """One mask file's bytes as (height, width) class ids (uint8, or uint16 for 16-bit)."""
    data = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data
    def refused(reason: str) -> ImageReadError:  # (masks take no on_error)
        return ImageReadError(f"Cannot read {what} as a mask: {reason}. Fix: replace the "
                              f"file, or remove its pair.")

    refuse_bombs(data, what, refused)  # (a 900 KB mask of 30000x30000 took 3.6 GB)
    png = data[:8].tobytes() == _PNG and len(data) > 25
    palette = png and data[25] == _PALETTE
    try:
        mask = None if palette else imdecode(data, cv2.IMREAD_UNCHANGED)
    except cv2.error as exc:
        raise_if_refused(exc, refused, what)
        mask = None
    if mask is not None and png and data[25] == _GREY and data[24] == 1:
        mask = mask // 255  # OpenCV scales 1 to 255; PIL, as a bool image, reads 0 and 1
    if mask is None:  # a palette PNG (its indices are the ids), or what OpenCV cannot read
        mask = _decode_pil(data.tobytes(), what)
    if mask.ndim == 3:  # a grey mask saved as colour: its channels agree
        if mask.shape[2] == 4:
            mask = mask[..., :3]
        if not (mask == mask[..., :1]).all():
            raise ImageReadError(
                f"Cannot use {what} as a mask: it is a colour image, and a mask holds one "
                f"class id per pixel. Fix: convert its colours to ids (a grey or palette PNG, "
                f"whose indices are the ids).")
        mask = mask[..., 0]
    if mask.dtype not in (np.uint8, np.uint16):
        mask = mask.astype(np.uint16 if mask.max(initial=0) > 255 else np.uint8)
    return np.ascontiguousarray(mask)


def _decode_pil(raw: bytes, what: str) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as image:
            if image.mode == "1":
                return np.asarray(image, np.uint8)
            if image.mode.startswith("I;16"):
                return np.asarray(image).astype(np.uint16)
            return np.asarray(image)  # "P": the palette indices; "L": the values
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageReadError(f"Cannot read {what} as a mask: it is not an image ({exc}). "
                             f"Fix: replace the file, or remove its pair.") from None


class MaskReader(Reader):
    """An image source's reader over mask files: named as theirs in a worker's error."""

    __slots__ = ()

    @property
    def __name__(self) -> str:
        return "MaskFiles.load"


@dataclass(frozen=True, eq=False)
class MaskFiles:
    """Mask files (class ids per pixel), one per sample: a target the workers decode.

    Pass it in ``y`` as Keras names masks, ``{"segmentation_masks": masks}``; a batch then
    holds ``(batch, height, width, 1)`` masks (uint8, or uint16 from 16-bit files), moved
    with their images by the pipeline. ``shmaug.sources.from_segmentation`` pairs a folder
    of them with their images.

    Attributes:
        paths: one mask file per sample, in sample order (local, or URLs of a bucket).
        image_size: ``(height, width)`` each mask is resized to, by nearest neighbour (give
            its images' ``image_size``); None keeps each at its size.
        storage_options: for URLs, as ``ImageFiles.from_paths``'.
        cache_dir: for URLs, as ``ImageFiles.from_paths``'.
        cache_limit: for URLs, as ``ImageFiles.from_paths``'.
        check_sizes: a loader reads the headers of each mask and its image (local files)
            and refuses a mask of another size than its image, naming both: stretched to
            one size, it would no longer lie on its pixels. False: you resize both on
            purpose.

    Example:
        >>> masks = MaskFiles(["m/0.png", "m/1.png"], image_size=(128, 128))
        >>> loader = shmaug.Loader(files, {"segmentation_masks": masks}, batch_size=2)
    """

    paths: Sequence[str]
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE
    storage_options: Any = field(default=None, repr=False)
    cache_dir: Any = field(default=None, repr=False)
    cache_limit: Any = field(default=None, repr=False)
    check_sizes: bool = field(default=True, repr=False)
    load: Reader = field(init=False, repr=False)
    target_name = "segmentation_masks"  # what it makes, in Keras' names (a loader checks it)

    def __post_init__(self) -> None:
        size = image_size_of(self.image_size)
        # The path table, existence check and bucket reads are the image files'.
        files = ImageFiles.from_paths(
            self.paths, image_size=size, color_mode="grayscale", interpolation="nearest",
            label_mode=None, reduced_decode=False, storage_options=self.storage_options,
            cache_dir=self.cache_dir, cache_limit=self.cache_limit)
        object.__setattr__(self, "paths", files.paths)
        object.__setattr__(self, "image_size", size)
        # (a reader calls only ``decoder(bytes, what)`` of a decoder, never its undecoded form)
        reader = MaskReader(files.load.table, MaskDecoder(size),  # type: ignore[arg-type]
                            "raise", False)
        object.__setattr__(self, "load", reader)

    def __len__(self) -> int:
        return len(self.paths)

    def check_beside(self, images: Any) -> None:
        """Refuse, before a loader starts, a mask of another stored size than its image in
        ``images`` (an image source with local ``paths``, sample for sample): headers only.
        A bucket's are not checked (a request per file)."""
        paths = getattr(images, "paths", None)
        if not self.check_sizes or paths is None or len(paths) != len(self.paths) or \
                not len(paths) or protocol_of(paths[0]) or protocol_of(self.paths[0]):
            return
        check_pair_sizes(list(zip(paths, self.paths)), "MaskFiles(..., check_sizes=False)")

    @property
    def output_shape(self) -> tuple[int | None, int | None, int]:
        """Shape of every decoded mask: ``(height, width, 1)``."""
        height, width = self.image_size or (None, None)
        return height, width, 1

    def __repr__(self) -> str:
        first = self.paths[0] if len(self.paths) else None
        return (f"MaskFiles(<{len(self):,} masks, first {first!r}>, "
                f"image_size={self.image_size})")


def check_pair_sizes(pairs: list[tuple[str, str]],
                     opt_out: str = "from_segmentation(..., check_sizes=False)") -> None:
    """Refuse a mask of another size than its image, naming both (``pairs``: (image, mask)
    paths; headers only, read on a few threads: on a network file system a header costs a
    round trip); ``opt_out``: the call that skips the check."""
    found = stored_sizes([path for pair in pairs for path in pair])  # image, mask, image, ...
    for (image, mask), of_image, of_mask in zip(pairs, found, found):
        if isinstance(of_image, OSError) or isinstance(of_mask, OSError):
            path, error = (image, of_image) if isinstance(of_image, OSError) else (mask, of_mask)
            raise ArgumentError(f"Cannot read the header of {path!r}: {error}. Fix: replace "
                                f"the file, or remove the pair.")
        if of_image != of_mask:
            (ih, iw), (mh, mw) = of_image, of_mask
            raise ArgumentError(
                f"The mask {mask!r} is {mw}x{mh} (width x height) but its image {image!r} is "
                f"{iw}x{ih}: stretched to one size, the mask would no longer lie on its "
                f"pixels. Fix: give the mask its image's size (or pair it with the right "
                f"image), or pass {opt_out} if you resize both on purpose.")
