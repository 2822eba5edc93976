"""Boxes that carry their format, as torchvision's ``BoundingBoxes`` does: what a reader that
knows its boxes' format (``from_coco``, ``from_voc``, ...) hands on with them, so that a
pipeline needs none of its own (it takes theirs) or is checked against it before anything
starts.

``Boxes`` is a plain ``ndarray`` in every other way (Keras, TensorFlow and numpy take it as
one). Only the array the reader made claims a format: what numpy makes from it (a ufunc's
result, ``boxes / 512``; an index, ``boxes[..., [1, 0, 3, 2]]``; ``np.concatenate``) is a
plain ``ndarray``, since numpy cannot know whether the format still holds, and one whose
values change in place, by any means (``boxes /= 512``, ``boxes[..., 2:] -= boxes[..., :2]``,
``np.clip(boxes, 0, 9, out=boxes)``, a view's write), claims none from then on: the format is
claimed for the values the reader wrote (a checksum of them). ``copy()`` and a pickle keep it.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from .formats import BOX_FORMATS, check_format
from ...errors import ArgumentError


class Boxes(np.ndarray):
    """Keras-layout boxes (N, max_boxes, 4), padded with -1, that know their
    ``bounding_box_format``.

    Example:
        >>> b = Boxes(np.zeros((2, 1, 4), np.float32), "xyxy")
        >>> b.bounding_box_format, type(b / 2).__name__
        ('xyxy', 'ndarray')
    """

    _format: str | None
    _written: int  # the checksum of the values the format was claimed for (``_checksum``)

    def __new__(cls, boxes: Any, bounding_box_format: str) -> Boxes:
        fmt = check_format(bounding_box_format, "bounding_box_format", BOX_FORMATS)
        obj = np.asarray(boxes).view(cls)
        obj._claim(fmt)
        return obj

    def _claim(self, fmt: str | None) -> None:
        self._format, self._written = fmt, _checksum(self) if fmt is not None else 0

    @property
    def bounding_box_format(self) -> str | None:
        """The reader's format while the values are the ones it wrote; None once they changed
        in place (an in-place conversion to ``xywh`` kept claiming ``xyxy``, and a pipeline
        taking the boxes' own format moved every box wrongly)."""
        if self._format is not None and _checksum(self) != self._written:
            self._format = None
        return self._format

    @bounding_box_format.setter
    def bounding_box_format(self, fmt: str | None) -> None:
        """Claim ``fmt`` for the values as they are now (after an edit that kept it)."""
        self._claim(check_format(fmt, "bounding_box_format", BOX_FORMATS))

    def __array_finalize__(self, obj: Any) -> None:
        self._format, self._written = None, 0  # (a view or result numpy made: no claim)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(_plain(v) for v in inputs)
        if "out" in kwargs:  # (in place, ``boxes /= 512``: the values may be another format)
            for out in kwargs["out"]:
                if isinstance(out, Boxes):
                    out._claim(None)
            kwargs["out"] = tuple(_plain(v) for v in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*_plain(args), **_plain(kwargs))

    def __getitem__(self, key: Any) -> Any:
        return np.asarray(self)[key]

    def copy(self, order: Any = "C") -> Any:
        """A copy claiming the format this one claims; a plain ``ndarray`` where it claims none."""
        fmt = self.bounding_box_format
        plain = np.asarray(self).copy(order)
        return plain if fmt is None else Boxes(plain, fmt)

    def __reduce__(self) -> Any:
        rebuild, args, state = tuple(super().__reduce__())
        return rebuild, args, (state, self.bounding_box_format)

    def __setstate__(self, state: Any) -> None:
        inner, fmt = state
        super().__setstate__(inner)
        self._claim(fmt)

    def __repr__(self) -> str:
        text = repr(np.asarray(self))  # "array(...)"
        return f"Boxes({text[6:-1]}, bounding_box_format={self.bounding_box_format!r})"


def _checksum(boxes: np.ndarray) -> int:
    """A checksum of the values, their shape and dtype: a few ms for a million boxes."""
    values = np.ascontiguousarray(np.asarray(boxes))
    return zlib.crc32(values.data,
                      zlib.crc32(repr((values.shape, values.dtype.str)).encode()))


def _plain(value: Any) -> Any:
    """``value`` with every ``Boxes`` in it (nested in lists, tuples, dicts) a plain array."""
    if isinstance(value, Boxes):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def format_of(boxes: Any) -> str | None:
    """The format ``boxes`` carry (a ``Boxes``), or None (a plain array claims none)."""
    return getattr(boxes, "bounding_box_format", None) if isinstance(boxes, Boxes) else None




def check_carried(name: str, boxes: Any, fmt: str | None, fix: str | None = None) -> None:
    """Refuse boxes whose own format is not the pipeline's ``fmt``: read in another format,
    every box would be moved wrongly (flipped ``xyxy`` boxes read as ``rel_xyxy`` became
    padding) without a sign. ``fix``: how to give the pipeline the boxes' format (default:
    a ``Compose``'s argument)."""
    own = format_of(boxes)
    if own is None or fmt is None or own == fmt:
        return
    fix = fix or (f"build the pipeline with bounding_box_format={own!r}, or leave it out "
                  f"(None) to take the boxes' own")
    raise ArgumentError(
        f"`y[{name!r}]` holds boxes in bounding_box_format={own!r} (as their reader wrote "
        f"them), but the pipeline reads boxes as bounding_box_format={fmt!r}: every box would "
        f"be moved wrongly. Fix: {fix}, or have the reader write {fmt!r} (e.g. "
        f"from_coco(..., bounding_box_format={fmt!r})).")
