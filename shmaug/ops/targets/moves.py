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

A move's ``size`` is its output's (height, width), as every size in shmaug (OpenCV, which
takes (width, height), is handed it so where it is called). Points are continuous coordinates
in pixels, x to the right and y down, with pixel (i, j) covering ``[j, j + 1) x [i, i + 1)``:
the edges of boxes, as Keras and albumentations give them. Masks are moved with
nearest-neighbour sampling, with the op's own border (what a reflect or wrap border brings in
is labelled as the pixels are) and ``fill`` where the border is constant.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, cast

import cv2
import numpy as np

from ...errors import from_shmaug
from ..kernels.cv import grid

Sample = Callable[[np.ndarray, float], np.ndarray]  # (a plane, its border value) -> moved

OUTLINE_STEP = 1.0  # pixels between the samples of a box's outline through a FieldMove
_FIXED_POINT_STEPS = 12  # iterations that find where a field sends a point (converges for
# fields that move less than a pixel per pixel: shmaug's smooth elastic and sine warps)

_NOTES: contextvars.ContextVar[Notes | None] = contextvars.ContextVar(
    "shmaug_moves", default=None)


class Move:
    """One drawn geometric change of an image (see the module docstring)."""

    size: tuple[int, int]  # the output's (height, width)
    border: int  # OpenCV's border code the image was warped with

    @property
    def mirrors(self) -> bool:
        """Whether this move mirrors the image (a flip), which turns a pose's left side into
        its right: a field (elastic, sine) never does."""
        return False

    def points(self, xy: np.ndarray) -> np.ndarray:
        """(N, 2) points (x, y) of the input, where the move takes them."""
        raise NotImplementedError

    def mask(self, mask: np.ndarray, fill: float) -> np.ndarray:
        """``mask`` (H, W[, C]) moved, nearest-neighbour; ``fill`` where nothing comes in."""
        raise NotImplementedError

    def bringing_nothing_in(self) -> Move:
        """This move with a constant border: what the image's reflect or wrap border brought
        in is nothing for a mask of one instance (a mirrored copy outside its box)."""
        if self.border == cv2.BORDER_CONSTANT:
            return self
        moved: Move = dataclasses.replace(cast(Any, self), border=cv2.BORDER_CONSTANT)
        return moved


@dataclass(frozen=True, slots=True)
class MatrixMove(Move):
    """A move by ``matrix``, the 3x3 map from input to output pixel centres (OpenCV's)."""

    matrix: np.ndarray
    size: tuple[int, int]  # (height, width)
    border: int = cv2.BORDER_CONSTANT
    # The image was sampled nearest by OpenCV's warp through this matrix: the mask takes the
    # same warp, pixel for pixel with it in the image's dtype (a gather's or a resize's ties
    # at half a pixel may round the other way, a row or a column off the image's).
    warped_nearest: bool = False

    @property
    def mirrors(self) -> bool:
        """Whether its matrix turns the plane over (a flip)."""
        return bool(np.linalg.det(self.matrix) < 0)

    def points(self, xy: np.ndarray) -> np.ndarray:
        e = np.array(self.edges()).reshape(3, 3)
        out: np.ndarray = xy @ e[:2, :2].T + e[:2, 2]
        if e[2, 0] or e[2, 1] or e[2, 2] != 1:  # a perspective
            out /= (xy @ e[2, :2] + e[2, 2])[:, None]
        return out

    def edges(self) -> list[float]:
        """The 9 numbers of ``matrix`` taken from pixel centres to pixel edges (the
        coordinates of points and boxes): x' = (e0 x + e1 y + e2) / (e6 x + e7 y + e8), and y'
        with e3, e4, e5. The half-pixel shifts are folded in, so that no move, the identity
        included, adds and takes off 0.5 (which is not exact in floats)."""
        (a, b, c), (d, e, f), (g, h, i) = self.matrix.tolist()
        k = i - 0.5 * (g + h)
        return [a + 0.5 * g, b + 0.5 * h, c - 0.5 * (a + b) + 0.5 * k,
                d + 0.5 * g, e + 0.5 * h, f - 0.5 * (d + e) + 0.5 * k, g, h, k]

    def samples_within(self, height: int, width: int) -> bool:
        """Whether every output pixel's centre comes from inside an input of ``height`` x
        ``width``: then nothing the border brings in reaches the output, and what an earlier
        move cut off stays out."""
        (a, b, c), (d, e, f), (g, h, i) = np.linalg.inv(
            np.array(self.edges()).reshape(3, 3)).tolist()
        out_h, out_w = self.size
        for x, y in ((0.5, 0.5), (out_w - 0.5, 0.5), (0.5, out_h - 0.5),
                     (out_w - 0.5, out_h - 0.5)):  # (a convex map: its corners bound it)
            w = g * x + h * y + i
            if w <= 0 or not (-1e-9 <= (a * x + b * y + c) / w <= width + 1e-9 and
                              -1e-9 <= (d * x + e * y + f) / w <= height + 1e-9):
                return False
        return True

    def mask(self, mask: np.ndarray, fill: float) -> np.ndarray:
        if mask.ndim == 3 and mask.shape[2] == 1:
            return self.mask(mask[:, :, 0], fill)[:, :, None]
        m, (h, w) = self.matrix, self.size
        if m[2, 0] or m[2, 1] or m[2, 2] != 1:  # a perspective
            return _nearest(mask, fill, lambda part, value: cv2.warpPerspective(
                part, m, (w, h), flags=cv2.INTER_NEAREST, borderMode=self.border,
                borderValue=value))
        if not m[0, 1] and not m[1, 0] and not self.warped_nearest:  # indexed, or gathered
            indexed = self._indexed(mask)
            if indexed is not None:
                return indexed
            rows = _sources(h, float(m[1, 1]), float(m[1, 2]), mask.shape[0], self.border)
            cols = _sources(w, float(m[0, 0]), float(m[0, 2]), mask.shape[1], self.border)
            if rows is not None and cols is not None:
                return _nearest(mask, fill, lambda part, value: _gathered(
                    part, value, rows, cols))
        return _nearest(mask, fill, lambda part, value: cv2.warpAffine(
            part, m[:2], (w, h), flags=cv2.INTER_NEAREST, borderMode=self.border,
            borderValue=value))

    def _indexed(self, mask: np.ndarray) -> np.ndarray | None:
        """The mask moved by an axis-aligned move (``mask``) by indexing, where it maps a
        window of whole pixels inside the input onto the output (flips, crops, resizes,
        resized crops): the window, resized nearest-neighbour as the image's nearest resize
        samples it (``resample.for_resize``) and mirrored, gathered at once (1.5x as fast as
        OpenCV's resize of it); None for any other move."""
        m, (h, w) = self.matrix, self.size
        # the output's edges back in the input: u_in = (u_out - 0.5 - c) / a + 0.5
        a, c, e, f = float(m[0, 0]), float(m[0, 2]), float(m[1, 1]), float(m[1, 2])
        edges = (*sorted(((-0.5 - c) / a + 0.5, (w - 0.5 - c) / a + 0.5)),
                 *sorted(((-0.5 - f) / e + 0.5, (h - 0.5 - f) / e + 0.5)))
        x0, x1, y0, y1 = whole = [round(v) for v in edges]
        if max(abs(v - r) for v, r in zip(edges, whole)) > 1e-6 or min(x0, y0) < 0 or \
                x1 > mask.shape[1] or y1 > mask.shape[0]:
            return None
        if (y1 - y0, x1 - x0) != (h, w):  # resized (and mirrored) in one gather
            rows = y0 + _resized(y1 - y0, h)[::1 if e > 0 else -1]
            cols = x0 + _resized(x1 - x0, w)[::1 if a > 0 else -1]
            return _nearest(mask, 0.0, lambda plane, value: _gathered(plane, value, rows, cols))
        part = mask[y0:y1, x0:x1]
        if a > 0 and e > 0:
            return np.ascontiguousarray(part)
        if part.dtype in _SAMPLED and part.ndim == 2:  # OpenCV mirrors several times faster
            # than numpy copies a reversed view
            return cv2.flip(part, -1 if a < 0 and e < 0 else 0 if e < 0 else 1)
        return np.ascontiguousarray(part[::-1 if e < 0 else 1, ::-1 if a < 0 else 1])


@dataclass(frozen=True, slots=True)
class FieldMove(Move):
    """A move by a displacement field: output pixel (x, y) samples the input at
    ``(x + dx[y, x], y + dy[y, x])`` (pixel centres), at the input's size."""

    dx: np.ndarray  # float32 (H, W)
    dy: np.ndarray
    border: int = cv2.BORDER_CONSTANT

    @property
    def size(self) -> tuple[int, int]:  # type: ignore[override]
        return int(self.dx.shape[0]), int(self.dx.shape[1])

    def points(self, xy: np.ndarray) -> np.ndarray:
        # Solve out + d(out) = in: iterate out <- in - d(out), d read bilinearly at out, until
        # a step moves no point by a thousandth of a pixel (one step where d depends only on
        # the column, as sine_warp's does).
        target = np.asarray(xy, np.float64) - 0.5
        out = target.copy()
        for _ in range(_FIXED_POINT_STEPS):
            step = target - _bilinear(self.dx, self.dy, out)
            done = len(out) == 0 or float(np.abs(step - out).max()) < 1e-3
            out = step
            if done:
                break
        return out + 0.5

    def bringing_nothing_in(self) -> Move:
        """As it is: a field moves pixels a few at the edge, where the image's border
        continues what the edge cut (a constant one cut holes in an instance there)."""
        return self

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
        return np.empty((0, 4))
    if isinstance(move, MatrixMove):
        edges = move.edges()
        return through_matrices(np.array(edges), xyxy, edges[6:] != IDENTITY_EDGES[6:])
    outlines = [_outline(*box) for box in xyxy]  # every box's outline moved in one go
    moved = move.points(np.concatenate(outlines))
    starts = np.cumsum([0] + [len(o) for o in outlines[:-1]])
    return np.concatenate([np.minimum.reduceat(moved, starts),
                           np.maximum.reduceat(moved, starts)], 1)


def through_matrices(edges: np.ndarray, xyxy: np.ndarray, perspective: bool) -> np.ndarray:
    """(N, 4) boxes, each moved by its own matrix (``edges``: (N, 9) rows of
    ``MatrixMove.edges``, or one (9,) for all; ``perspective``: whether any divides): the box
    of its four corners moved, exactly. Elementwise arithmetic only (no matrix product, whose
    kernels may fuse multiply-adds by size), so a box moves to the same bits alone or among a
    task's."""
    e = edges.reshape(-1, 3, 3)[:, :3 if perspective else 2]  # (N or 1, 2 or 3, 3)
    corners = xyxy.take(_CORNERS, 1)  # (N, 2, 4): the corners' x, then their y
    moved = e[:, :, :1] * corners[:, None, 0] + e[:, :, 1:2] * corners[:, None, 1]
    moved += e[:, :, 2:]  # (N, 2 or 3, 4): x, y (and w) of each corner
    if perspective:
        moved = moved[:, :2] / moved[:, 2:]
    out = np.empty((len(xyxy), 4))
    c0, c1, c2, c3 = (moved[:, :, k] for k in range(4))  # (a reduction over 4 corners costs
    np.minimum(np.minimum(c0, c1), np.minimum(c2, c3), out=out[:, :2])  # numpy 6x more)
    np.maximum(np.maximum(c0, c1), np.maximum(c2, c3), out=out[:, 2:])
    return out


IDENTITY_EDGES = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]  # ``MatrixMove.edges`` of no move
_CORNERS = np.array([[0, 2, 0, 2], [1, 1, 3, 3]])  # a box's corners (x, then y) from its x0, y0,
# x1, y1


def _outline(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    """Points along a box's four edges, ``OUTLINE_STEP`` apart, corners included."""
    xs = np.linspace(x0, x1, max(2, int(np.ceil((x1 - x0) / OUTLINE_STEP)) + 1))
    ys = np.linspace(y0, y1, max(2, int(np.ceil((y1 - y0) / OUTLINE_STEP)) + 1))
    out = np.empty((2 * len(xs) + 2 * len(ys), 2))
    k = len(xs)
    out[:k, 0], out[:k, 1] = xs, y0
    out[k:2 * k, 0], out[k:2 * k, 1] = xs, y1
    out[2 * k:2 * k + len(ys), 0], out[2 * k:2 * k + len(ys), 1] = x0, ys
    out[2 * k + len(ys):, 0], out[2 * k + len(ys):, 1] = x1, ys
    return out


_MAP_WIDTH = 1024  # points per row of the maps ``_bilinear`` hands OpenCV


def _bilinear(dx: np.ndarray, dy: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The field (dx, dy) at continuous pixel centres ``at`` (N, 2), edges replicated: one
    ``cv2.remap`` per component, the points laid out as a small map (OpenCV's bilinear
    weights are in 1/32 of a pixel, well within ``boxes``' stated error)."""
    n = len(at)
    rows = -(-n // _MAP_WIDTH) or 1
    maps = np.zeros((2, rows * _MAP_WIDTH), np.float32)
    maps[:, :n] = at.T
    mx, my = (m.reshape(rows, _MAP_WIDTH) for m in maps)
    out = np.empty_like(at)
    for k, plane in enumerate((dx, dy)):
        out[:, k] = cv2.remap(plane, mx, my, cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REPLICATE).ravel()[:n]
    return out


_SAMPLED = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16),
            np.dtype(np.float32))  # what OpenCV's nearest sampling takes as it is


def _sources(size: int, scale: float, shift: float, given: int, border: int
             ) -> np.ndarray | None:
    """The input's pixel nearest where each of ``size`` output pixels comes from along one
    axis (``out = scale * in + shift``, pixel centres), the border's rule applied outside
    ``given`` pixels; -1 where a constant border brings nothing in. None: another border."""
    lo, hi = scale * -0.5 + shift + 0.5, scale * (given - 0.5) + shift + 0.5  # its edges
    if border == cv2.BORDER_CONSTANT and scale > 0 and 0 <= round(lo) < round(hi) <= size \
            and max(abs(lo - round(lo)), abs(hi - round(hi))) < 1e-6:
        # the whole input resized onto whole output pixels (a resize padded to the aspect):
        # taken as the image's nearest resize takes them, ties included
        placed = np.full(size, -1, np.intp)
        placed[round(lo):round(hi)] = _resized(given, round(hi) - round(lo))
        return placed
    source: np.ndarray = np.floor((np.arange(size) - shift) / scale + 0.5).astype(np.intp)
    if border == cv2.BORDER_CONSTANT:
        source[(source < 0) | (source >= given)] = -1
    elif border == cv2.BORDER_REPLICATE:
        np.clip(source, 0, given - 1, out=source)
    elif border == cv2.BORDER_WRAP:
        source %= given
    elif border == cv2.BORDER_REFLECT_101:  # gfedcb|abcdefgh|gfedcba
        period = max(2 * given - 2, 1)
        source %= period
        source = np.where(source < given, source, period - source)
    else:
        return None
    return source


@functools.lru_cache(maxsize=4096)
def _resized(given: int, size: int) -> np.ndarray:
    """The input pixel each of ``size`` output pixels takes in OpenCV's nearest resize of
    ``given`` pixels (INTER_NEAREST_EXACT, the image's: ``resample.for_resize``), read off
    OpenCV itself, whose rule has changed between its versions (read-only; a window's sizes
    repeat, so it is kept)."""
    out: np.ndarray = cv2.resize(np.arange(given, dtype=np.int32)[None], (size, 1),
                                 interpolation=cv2.INTER_NEAREST_EXACT)[0].astype(np.intp)
    out.flags.writeable = False
    return out


def _gathered(plane: np.ndarray, value: float, rows: np.ndarray, cols: np.ndarray
              ) -> np.ndarray:
    """``plane[rows][:, cols]`` (``_sources``; -1 takes ``value``): whole rows copied, then
    the columns taken as rows of its transpose. A move that scales or shifts along the axes
    (a zoom, a translation) samples its mask so 2-3x faster than OpenCV's nearest warp,
    whose every pixel is a scalar step. ``value`` is saturated to the dtype, as OpenCV's."""
    across = cv2.transpose(plane.take(rows, 0)).take(cols, 0)  # (output columns, rows)
    if rows.min() >= 0 and cols.min() >= 0:  # a window inside: no value to write
        return cv2.transpose(across)
    if plane.dtype.kind in "iu":
        info = np.iinfo(plane.dtype)
        value = min(max(float(np.rint(value)), info.min), info.max)
    across[cols < 0] = value
    out = cv2.transpose(across)
    out[rows < 0] = value
    return out


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


def note(move: Move | Callable[[], Move], source: object = None, made: object = None) -> None:
    """Note ``move``, made of ``source`` into ``made`` (the op's image and its result), on the
    image of the pipeline call in progress (if any notes it); a move that costs something to
    build (a field) is passed as its builder, called only then."""
    notes = _NOTES.get()
    if notes is not None:
        notes.add(move if isinstance(move, Move) else move(), source, made)


class Notes(list[Move]):
    """The moves of one pipeline call, in order.

    A user's op that moves pixels through shmaug's ops (``targets="warped"``) is called
    ``framed``: it may try a move and throw it away, keep the better of two, move a helper
    array beside its image or write a move back into it, so while it runs each move is
    placed on a branch of the moves before it (``_place``, as it is made: what it took holds
    the pixels it held then), and when it returns only the branch its returned image went
    through is kept (``_chosen``). shmaug's own ops never try twice: outside a frame a move
    is only appended."""

    __slots__ = ("_frames",)

    def __init__(self) -> None:
        super().__init__()
        self._frames: list[_Frame] = []  # the user's ops running now, innermost last

    def add(self, move: Move, source: object, made: object) -> None:
        self.append(move)
        if self._frames:
            _place(self._frames[-1], ((move,), source, made))

    def framed(self, call: Callable[[], Any], image: object) -> Any:
        """``call()``, a user's op on ``image``, keeping the moves its result went through
        (for a frame around it, one step from ``image`` to that result)."""
        frame = _Frame(image, len(self))
        self._frames.append(frame)
        try:
            out = call()
        finally:
            self._frames.pop()
        moves = [move for entry in _chosen(frame, out) for move in entry[0]]
        del self[frame.mark:]
        self.extend(moves)
        if self._frames and moves:
            _place(self._frames[-1], (tuple(moves), image, out))
        return out


_Noted = tuple[tuple[Move, ...], Any, Any]  # moves, the image they took, the image they made


class _Frame:
    """A user's op running: the image it was given, where its moves start in the notes, and
    the branches they grew."""

    __slots__ = ("image", "mark", "branches", "prints")

    def __init__(self, image: object, mark: int) -> None:
        self.image, self.mark = image, mark
        self.branches: list[list[_Noted]] = []
        self.prints: dict[int, int] = {}  # a writable image a move took: its pixels' checksum

    def changed(self, took: object) -> bool:
        """Whether ``took``, which a move took before, was written since (a colour step
        painted into a working copy): then a move of it goes on, it is no try again."""
        if not (isinstance(took, np.ndarray) and took.flags.writeable):
            return False  # (what no one can write cannot change: a worker's image)
        before = self.prints.get(id(took))
        now = zlib.crc32(np.ascontiguousarray(took).reshape(-1).view(np.uint8).data)
        self.prints[id(took)] = now
        return before is not None and before != now


def _place(frame: _Frame, entry: _Noted) -> None:
    """Grow ``frame``'s branches by ``entry``, as it is made: one made of what a move made
    goes on from it (the same object, or the object a move took now holding that move's
    pixels: written back into it), one made of the frame's image or of what a move took
    starts a branch there (a try again), one made of something else goes on from the latest
    branch (a colour step came between) unless its shape is not that branch's image's (a
    helper array: a validity map). Where no object matches, equal pixels do (a copy:
    ``image.copy()`` for each try)."""
    branches, image, took = frame.branches, frame.image, entry[1]
    changed = frame.changed(took)
    for same in _SAME:
        at = _find(branches, lambda e: same(e[2], took))
        if at is None and same is _is and (took is image or _find(
                branches, lambda e: e[1] is took)):  # written back into what it took?
            at = _find(branches, lambda e: _equal(e[2], took))
            if at is None and changed and branches:  # and painted after: goes on
                at = branches[-1]
        if at is not None:
            branches.append([*at, entry])
            return
        if same(image, took) or (same is _is and not isinstance(image, np.ndarray) and
                                 getattr(took, "shape", None) == getattr(image, "shape", 0)):
            branches.append([entry])  # (a photo not decoded yet: its decode is its copy)
            return
        at = _find(branches, lambda e: same(e[1], took))
        if at is not None:
            branches.append([*at[:-1], entry])
            return
    last = branches[-1][-1][2] if branches else image
    if getattr(took, "shape", None) == getattr(last, "shape", None):
        branches.append([*(branches[-1] if branches else []), entry])


def _chosen(frame: _Frame, out: object) -> list[_Noted]:
    """The branch ``out`` went through: to the move that made it (or whose pixels it holds);
    none for the frame's image itself or a copy of it (every try given up); for an image no
    move made (a colour step last), the latest branch."""
    branches, image = frame.branches, frame.image
    if out is image:
        return _find(branches, lambda e: _equal(e[2], out)) or []
    for same in _SAME:
        at = _find(branches, lambda e: same(e[2], out))
        if at is not None:
            return at
    return [] if _equal(image, out) else branches[-1] if branches else []


def _is(a: object, b: object) -> bool:
    return a is b


def _equal(a: object, b: object) -> bool:
    """Equal pixels: a copy of the image (a row first: most images that differ, differ
    there, and are told apart without a pass over all of them)."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape \
        and a.dtype == b.dtype and bool(np.array_equal(a[:1], b[:1])) and \
        bool(np.array_equal(a, b))


_SAME = (_is, _equal)  # the same object first, then equal pixels (a copy)


def _find(branches: list[list[_Noted]], found: Callable[[_Noted], bool]
          ) -> list[_Noted] | None:
    """The latest branch's moves up to the latest move ``found`` holds for, or None."""
    for branch in reversed(branches):
        for k in range(len(branch) - 1, -1, -1):
            if found(branch[k]):
                return branch[:k + 1]
    return None


def made_by(member: Callable[..., Any], image: Any, rng: Any) -> Any:
    """``member(image, rng)``, a pipeline member's call; where moves are noted and it is the
    user's own (an op that moves pixels through shmaug's ops), framed (``Notes.framed``)."""
    notes = _NOTES.get()
    if notes is None or from_shmaug(getattr(getattr(member, "fn", member), "__module__", None)):
        return member(image, rng)
    return notes.framed(lambda: member(image, rng), image)


@contextlib.contextmanager
def aside() -> Iterator[None]:
    """Moves made within are not the image's (a helper array moved beside it, a validity
    map): what lies on the image does not follow them."""
    token = _NOTES.set(None)
    try:
        yield
    finally:
        _NOTES.reset(token)


@contextlib.contextmanager
def noting() -> Iterator[list[Move]]:
    """Collect the moves the ops make within, in order (nested: the outer collects none)."""
    notes = Notes()
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
