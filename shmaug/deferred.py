"""A sample not decoded yet.

Why: the reference ImageNet recipes draw their crop on the photo's full resolution, and most
of a JPEG lies outside a crop. A source with no fixed ``image_size`` hands an `augment` that
says ``takes_undecoded`` (a ``Compose`` whose first op is a decode-time crop) an ``Undecoded``:
the file's bytes and its size, read from the header. The op draws its window on that size,
then asks for the window alone (``resized_window``), which libjpeg-turbo decodes without the
rest (``sources/images/turbo.py``), resampled as ``resample.resize_box`` resamples a window
of decoded pixels. Any other `augment` gets pixels, as before.

Owns the contract: sources make ``Undecoded`` photos, ops take them, the engine passes them on
and never decodes one itself (``decoded``: the counted fallback).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from . import whole_decodes
from .resample import Resample, Window


class Undecoded(ABC):
    """An image its source has not decoded: its full size is known, its pixels are not.

    ``shape`` is (height, width, channels) of the whole decoded image; ``decode()`` gives
    those pixels; ``resized_window(window, size, how)`` gives ``window`` resampled to
    ``size`` as ``resize_box`` would from the whole image, decoding as little as it can.
    """

    __slots__ = ()
    dtype = np.dtype(np.uint8)

    @property
    @abstractmethod
    def shape(self) -> tuple[int, int, int]: ...

    @abstractmethod
    def decode(self) -> np.ndarray: ...

    @abstractmethod
    def resized_window(self, window: Window, size: tuple[int, int],
                       how: Resample) -> np.ndarray: ...

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # A function of the user's reading it as pixels (an augment override): whole
        whole_decodes.count("override")
        return np.asarray(self.decode(), dtype)

    def __getitem__(self, key: Any) -> Any:
        return np.asarray(self)[key]

    @property
    def ndim(self) -> int:
        return len(self.shape)


def takes_undecoded(augment: Any) -> bool:
    """Whether ``augment`` takes an ``Undecoded`` as its image (it says so: ``takes_undecoded``)."""
    return bool(getattr(augment, "takes_undecoded", False))


def decoded(image: Any, reason: str | None) -> Any:
    """``image``'s pixels: an ``Undecoded`` decoded in full (counted for ``reason``, a key of
    ``whole_decodes.REASONS``; None: no fallback, such as the probe's one look at sample 0),
    anything else as it is."""
    if not isinstance(image, Undecoded):
        return image
    if reason is not None:
        whole_decodes.count(reason)
    return image.decode()


_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"BM", b"II*\x00", b"MM\x00*", b"RIFF")


def looks_encoded(head: bytes) -> bool:
    """Whether bytes beginning with ``head`` are an encoded image (JPEG, PNG, GIF, BMP, TIFF,
    WebP), or at least no path (which holds no NUL byte): where paths or pixels are wanted,
    the fix differs (``ImageRecords.from_bytes``)."""
    return head.startswith(_IMAGE_MAGIC) or b"\x00" in head
