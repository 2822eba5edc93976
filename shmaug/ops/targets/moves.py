"""The moves a geometric op makes, noted as it warps an image, so that what lies on the image
(masks, boxes, keypoints) moves the same way: the same map, drawn once.

A geometric op warps its image and notes the move (``note``); ``noting()`` collects the notes
of one call of a pipeline, in order, and the targets are then moved through each
(``sample.move``). Nothing is noted outside ``noting()``: an op called on an image alone pays
for one context-variable read. Two kinds of move:

- ``MatrixMove``: a 3x3 matrix from input to output pixel centres (affine or perspective: the
  flips, crops, resizes, rotations, shears, zooms, translations). A box's outline stays
  straight, so its four corners give the box of the moved outline exactly.
- ``FieldMove``: a displacement field, each output pixel sampling the input at
  ``(x + dx, y + dy)`` (``sine_warp``, ``elastic``). A point moves to where the field sends
  it back from, found by fixed-point iteration; a box's outline is sampled every pixel along
  each edge (``OUTLINE_STEP``), so its moved box is within the field's change over one pixel
  of the exact one (tests/unit/test_targets.py measures it against a sampling 20x as dense).

Points are continuous coordinates in pixels, x to the right and y down, with pixel (i, j)
covering ``[j, j + 1) x [i, i + 1)``: the edges of boxes, as Keras and albumentations give
them. Masks are moved with nearest-neighbour sampling, with the op's own border (what a
reflect or wrap border brings in is labelled as the pixels are) and ``fill`` where the border
is constant.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Callable, Iterator

import cv2
import numpy as np

from ..kernels.cv import grid

Sample = Callable[[np.ndarray, float], np.ndarray]  # (a plane, its border value) -> moved

OUTLINE_STEP = 1.0  # pixels between the samples of a box's outline through a FieldMove
_FIXED_POINT_STEPS = 12  # iterations that find where a field sends a point (converges for
# fields that move less than a pixel per pixel: shmaug's smooth elastic and sine warps)

_NOTES: contextvars.ContextVar[list[Move] | None] = contextvars.ContextVar(
    "shmaug_moves", default=None)


class Move:
    """One drawn geometric change of an image (see the module docstring)."""

    size: tuple[int, int]  # the output's (width, height)
    border: int  # OpenCV's border code the image was warped with
    corners_suffice: bool  # straight lines stay straight: a box's corners give its outline

    def points(self, xy: np.ndarray) -> np.ndarray:
        """(N, 2) points (x, y) of the input, where the move takes them."""
        raise NotImplementedError

    def mask(self, mask: np.ndarray, fill: float) -> np.ndarray:
        """``mask`` (H, W[, C]) moved, nearest-neighbour; ``fill`` where nothing comes in."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class MatrixMove(Move):
    """A move by ``matrix``, the 3x3 map from input to output pixel centres (OpenCV's)."""

    matrix: np.ndarray
    size: tuple[int, int]
    border: int = cv2.BORDER_CONSTANT
    corners_suffice = True

    def points(self, xy: np.ndarray) -> np.ndarray:
        centres = np.c_[xy - 0.5, np.ones(len(xy))] @ self.matrix.T
        return np.asarray(centres[:, :2] / centres[:, 2:] + 0.5)

    def mask(self, mask: np.ndarray, fill: float) -> np.ndarray:
        m = self.matrix
        if m[2, 0] == 0 and m[2, 1] == 0 and m[2, 2] == 1:
            return _nearest(mask, fill, lambda part, value: cv2.warpAffine(
                part, m[:2], self.size, flags=cv2.INTER_NEAREST, borderMode=self.border,
                borderValue=value))
        return _nearest(mask, fill, lambda part, value: cv2.warpPerspective(
            part, m, self.size, flags=cv2.INTER_NEAREST, borderMode=self.border,
            borderValue=value))


@dataclass(frozen=True, slots=True)
class FieldMove(Move):
    """A move by a displacement field: output pixel (x, y) samples the input at
    ``(x + dx[y, x], y + dy[y, x])`` (pixel centres), at the input's size."""

    dx: np.ndarray  # float32 (H, W)
    dy: np.ndarray
    border: int = cv2.BORDER_CONSTANT
    corners_suffice = False

    @property
    def size(self) -> tuple[int, int]:  # type: ignore[override]
        return int(self.dx.shape[1]), int(self.dx.shape[0])

    def points(self, xy: np.ndarray) -> np.ndarray:
        # Solve out + d(out) = in: iterate out <- in - d(out), d read bilinearly at out.
        target = np.asarray(xy, np.float64) - 0.5
        out = target.copy()
        for _ in range(_FIXED_POINT_STEPS):
            out = target - _bilinear(self.dx, self.dy, out)
        return out + 0.5

    def mask(self, mask: np.ndarray, fill: float) -> np.ndarray:
        xs, ys = grid(*self.dx.shape)
        map_x, map_y = xs + self.dx, ys + self.dy
        return _nearest(mask, fill, lambda part, value: cv2.remap(
            part, map_x, map_y, cv2.INTER_NEAREST, borderMode=self.border, borderValue=value))


def columns_shifted(shifts: np.ndarray, height: int, border: int) -> FieldMove:
    """The move of ``sine_warp``: column x shifted down by ``shifts[x]`` pixels."""
    dy = np.broadcast_to(-np.asarray(shifts, np.float32)[None, :], (height, len(shifts)))
    return FieldMove(np.zeros((height, len(shifts)), np.float32), np.ascontiguousarray(dy),
                     border)


def boxes(move: Move, xyxy: np.ndarray) -> np.ndarray:
    """(N, 4) boxes (x0, y0, x1, y1) of the input: the boxes of their outlines moved (not yet
    clipped to the output)."""
    if not len(xyxy):
        return xyxy.copy()
    if move.corners_suffice:
        x0, y0, x1, y1 = xyxy.T
        corners = np.stack([np.c_[x0, y0], np.c_[x1, y0], np.c_[x1, y1], np.c_[x0, y1]], 1)
        moved = move.points(corners.reshape(-1, 2)).reshape(-1, 4, 2)
        return np.asarray(np.c_[moved.min(1), moved.max(1)])
    out = np.empty_like(xyxy)
    for i, (x0, y0, x1, y1) in enumerate(xyxy):
        moved = move.points(_outline(x0, y0, x1, y1))
        out[i] = (*moved.min(0), *moved.max(0))
    return out


def _outline(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    """Points along a box's four edges, ``OUTLINE_STEP`` apart, corners included."""
    xs = np.linspace(x0, x1, max(2, int(np.ceil((x1 - x0) / OUTLINE_STEP)) + 1))
    ys = np.linspace(y0, y1, max(2, int(np.ceil((y1 - y0) / OUTLINE_STEP)) + 1))
    return np.concatenate([np.c_[xs, np.full_like(xs, y0)], np.c_[xs, np.full_like(xs, y1)],
                           np.c_[np.full_like(ys, x0), ys], np.c_[np.full_like(ys, x1), ys]])


def _bilinear(dx: np.ndarray, dy: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The field (dx, dy) at continuous pixel centres ``at`` (N, 2), edges replicated."""
    h, w = dx.shape
    x = np.clip(at[:, 0], 0, w - 1)
    y = np.clip(at[:, 1], 0, h - 1)
    x0, y0 = np.minimum(x.astype(np.int64), w - 2 if w > 1 else 0), \
        np.minimum(y.astype(np.int64), h - 2 if h > 1 else 0)
    x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
    fx, fy = x - x0, y - y0
    out = np.empty_like(at)
    for k, field in enumerate((dx, dy)):
        top = field[y0, x0] * (1 - fx) + field[y0, x1] * fx
        bottom = field[y1, x0] * (1 - fx) + field[y1, x1] * fx
        out[:, k] = top * (1 - fy) + bottom * fy
    return out


_SAMPLED = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16),
            np.dtype(np.float32))  # what OpenCV's nearest sampling takes as it is


def _nearest(mask: np.ndarray, fill: float, sample: Sample) -> np.ndarray:
    """``sample(part, border value)`` over ``mask`` of any dtype and channel count: a dtype
    OpenCV does not sample is moved as the 16-bit words of its values (nearest sampling copies
    whole pixels, so words put back together are the values), one channel at a time."""
    flat = mask[:, :, 0] if mask.ndim == 3 and mask.shape[2] == 1 else mask
    if flat.ndim == 3:  # several channels: one at a time, so a border value fits each
        return np.dstack([_nearest(flat[:, :, c], fill, sample) for c in range(flat.shape[2])])
    if flat.dtype in _SAMPLED:
        out = sample(np.ascontiguousarray(flat), float(fill))
    else:
        wide = flat.astype(np.uint8) if flat.dtype == np.bool_ else flat
        words = np.ascontiguousarray(wide).view(np.uint16 if wide.itemsize > 1 else np.uint8)
        value = np.array([fill], wide.dtype).view(words.dtype)
        parts = words.reshape(*wide.shape, -1)
        moved = [sample(np.ascontiguousarray(parts[:, :, k]), float(value[k]))
                 for k in range(parts.shape[2])]
        out = np.stack(moved, -1).reshape(moved[0].shape[0], -1).view(wide.dtype)
        out = out.astype(np.bool_) if flat.dtype == np.bool_ else out
    return out[:, :, None] if mask.ndim == 3 else out


def note(move: Move) -> None:
    """Note ``move``, made on the image of the pipeline call in progress (if any notes it)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.append(move)


@contextlib.contextmanager
def noting() -> Iterator[list[Move]]:
    """Collect the moves the ops make within, in order (nested: the outer collects none)."""
    notes: list[Move] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
