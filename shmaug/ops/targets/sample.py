"""One sample's targets moved through the moves its image made: masks warped, boxes moved,
clipped and dropped when too little of them is left, keypoints moved or marked gone.

What happens to each (as albumentations does it, in Keras' padded layout):

- a mask is warped by the same map, nearest-neighbour, with the op's border (``mask_fill``
  where the border is constant: 0 by default, or an ignore label);
- a box becomes the box of its moved outline, clipped to the image; it is dropped (its row,
  its label and its extra columns become -1, in place, as Keras pads) when nothing of it is
  left, when less than ``min_visibility`` of its moved area is inside the image (the shares
  left by each move, multiplied: two crops keeping 60% each keep 36%), or when what is left
  covers less than ``min_area`` pixels of the final image. Padding stays padding;
- a keypoint moves; one that leaves the image becomes a row of -1 (marked invisible: its index
  keeps its meaning, which dropping it would not), and stays so;
- ``masks`` with one mask per box row (as many as the boxes: ``from_coco(masks="instances")``)
  lose the mask of a box that is dropped, as torchvision's ``SanitizeBoundingBoxes`` does,
  and take 0 where a matrix warp brings in what was not there, whatever its border and
  ``mask_fill`` (a reflected copy of an instance is no part of it, as its box says; a
  field's few pixels at the edge keep the image's border, which continues what it cut).

The boxes are moved by ``box_moves``: at once, or with the other samples of a worker's task.

Masks a source has not drawn yet (``Undrawn``: COCO's polygons) are drawn where the moves take
them: their points moved through the leading moves by a matrix with a constant border, then
filled once at the size those end at, by the source's own rule (a polygon moved by a matrix is
a polygon). A decode-time crop of a large photo then draws its masks in the small window, not
whole and then cut (issue 57: the targets' cost stays near the image's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import cv2
import numpy as np

from . import box_moves, formats
from .formats import BOX_LABELS as BOX_LABELS
from ...errors import ArgumentError, OutputMismatchError
from .moves import MatrixMove, Move

MASK_NAMES = ("mask", "segmentation_masks", "masks")  # "masks": several per image (K, H, W)
BOX_NAMES = ("boxes", "bboxes")  # Keras' (in its bounding_boxes dict), albumentations'
KEYPOINT_NAMES = ("keypoints",)
NAMES = frozenset((*MASK_NAMES, *BOX_NAMES, BOX_LABELS, *KEYPOINT_NAMES))
"""Every target name a shmaug pipeline moves."""
SETTLED = frozenset((*BOX_NAMES, BOX_LABELS, "masks"))
"""The targets a task's boxes, moved together, complete (``box_moves.settle``)."""
KERAS_BOXES = "bounding_boxes"  # Keras' dict of one sample's "boxes" and "labels"


Where = Callable[[np.ndarray], np.ndarray]  # (N, 2) points (x, y) -> where a move takes them


def _lies_on(value: Any, image_shape: tuple[int, ...]) -> bool:
    """Whether ``value`` lies on an image of ``image_shape``: a map of its size, (M, 4) boxes
    or (K, 2 or 3) points in pixels."""
    shape = tuple(getattr(value, "shape", ()))
    return len(shape) >= 2 and (shape[:2] == tuple(image_shape[:2]) or len(shape) == 2
                                and shape[1] in (2, 3, 4) and formats.in_pixels(value))


def _as_given(moved: dict[str, Any]) -> dict[str, Any]:
    return moved


def unnested(targets: dict[str, Any], image_shape: tuple[int, ...]
             ) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]:
    """One sample's ``targets`` by the names a pipeline moves, Keras' ``{"bounding_boxes":
    {"boxes": b, "labels": l}}`` taken as ``boxes`` and ``box_labels``, and the function that
    puts the moved ones back in the layout given. What lies on the image under another name
    (a map of its size, (M, 4) boxes, (K, 2 or 3) points) is refused: it would stay where it
    was; other entries (a box's class column) come back as they are."""
    if KERAS_BOXES not in targets and NAMES.issuperset(targets):  # (a worker's, every sample)
        return targets, _as_given
    flat = dict(targets)
    nested = flat.pop(KERAS_BOXES, None)
    if nested is not None:
        if not isinstance(nested, dict) or "boxes" not in nested or \
                not set(nested) <= {"boxes", "labels"}:
            raise ArgumentError(
                f"targets[{KERAS_BOXES!r}] expects Keras' dict of 'boxes' and 'labels'; "
                f"received {type(nested).__name__}"
                f"{' of ' + repr(sorted(nested)) if isinstance(nested, dict) else ''}.")
        flat["boxes"] = nested["boxes"]
        if "labels" in nested:
            flat[BOX_LABELS] = nested["labels"]
    stray = [k for k, v in flat.items() if k not in NAMES and _lies_on(v, image_shape)]
    if stray:
        raise ArgumentError(
            f"targets {stray} lie under no name a pipeline moves, so they would stay where "
            f"they were while the image moves. Fix: pass masks as 'mask' or "
            f"'segmentation_masks', boxes as 'boxes' (or {{{KERAS_BOXES!r}: {{'boxes': ..., "
            f"'labels': ...}}}}) with their labels as {BOX_LABELS!r}, keypoints as "
            f"'keypoints'; or leave them out.")
    if nested is None:
        return flat, _as_given

    def nest(moved: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in moved.items() if k not in ("boxes", BOX_LABELS)}
        out[KERAS_BOXES] = {"boxes": moved["boxes"],
                            **({"labels": moved[BOX_LABELS]} if "labels" in nested else {})}
        return out
    return flat, nest


class Undrawn:
    """A sample's masks not drawn yet: ``draw(where, size)`` draws them with each point moved
    by ``where`` on a canvas of ``size`` (height, width), or as they lie (both None). What a
    source's load hands a pipeline that moves masks (``engine.source.Drawing``); ``shape``
    and ``dtype`` are those of the masks drawn as they lie."""

    __slots__ = ("shape", "dtype", "_draw")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype,
                 draw: Callable[[Where | None, tuple[int, int] | None], np.ndarray]) -> None:
        self.shape, self.dtype, self._draw = shape, dtype, draw

    def drawn(self, where: Where | None = None, size: tuple[int, int] | None = None
              ) -> np.ndarray:
        """The masks, moved by ``where`` onto ``size`` (height, width); as they lie: None."""
        return self._draw(where, size)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        out = self.drawn()
        return out if dtype is None else out.astype(np.dtype(dtype))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """How a pipeline reads and keeps its targets (Keras' and albumentations' names)."""

    bounding_box_format: str | None = None
    keypoint_format: str | None = None
    min_visibility: float = 0.0  # of a box's moved area that must stay inside, else dropped
    min_area: float = 0.0  # pixels a box must keep inside, else dropped
    mask_fill: float = 0.0  # a mask's value where a constant border brings nothing in
    # row k of a sample's keypoints becomes row flip[k] where the moves mirror the image (a
    # pose's left wrist is its right after a flip); None: the rows stay
    keypoint_flip_indices: tuple[int, ...] | None = None


def move(targets: dict[str, np.ndarray], moves: list[Move], shape: tuple[int, ...],
         options: TargetOptions, later: box_moves.Noted | None = None
         ) -> dict[str, np.ndarray]:
    """The targets of one sample (``shape``: its image's, before the moves) after ``moves``;
    with ``later`` (a task's, ``box_moves.deferring``) its boxes, their labels and one mask
    per box are completed by ``box_moves.settle(later)``."""
    out = dict(targets)
    box_names = [n for n in BOX_NAMES if n in targets]
    for name in MASK_NAMES:
        if name in targets:
            stacked = name == "masks"
            _check_size(name, targets[name], shape, stacked)
            tied = stacked and len(box_names) == 1 and (  # one mask per box row (COCO's
                isinstance(targets[name], Undrawn)  # instances, drawn by the workers)
                or len(targets[name]) == len(targets[box_names[0]]))
            out[name] = _masks(targets[name], moves, options.mask_fill, stacked, tied)
    if len(box_names) > 1:  # (a loader refuses them before it starts: check_targets)
        raise ArgumentError(f"Targets {box_names} are two sets of boxes; a pipeline moves one.")
    box_name = box_names[0] if box_names else None
    if box_name is not None:
        fmt = options.bounding_box_format
        formats.check_boxes(box_name, targets[box_name][None], fmt, None)  # refuses no fmt
        assert fmt is not None
        rows, labels = targets[box_name], targets.get(BOX_LABELS)
        if labels is not None and len(labels) != len(rows):
            raise OutputMismatchError(
                f"This sample has {len(rows)} rows of {box_name!r} but {len(labels)} "
                f"{BOX_LABELS!r}: a label per box row is what keeps each label with its box. "
                f"Fix: pad both to one count per sample (shmaug.ops.pad_boxes).")
        if labels is not None:  # (numbers that hold -1)
            formats.check_box_labels(BOX_LABELS, labels[None], rows[None])
        pending = box_moves.Pending(out, box_name, rows, labels, moves, shape,
                                    "masks" in out and out["masks"] is targets["masks"])
        box_moves.defer(pending, fmt, options, later)
    if "keypoints" in targets:
        fmt = options.keypoint_format
        formats.check_keypoints("keypoints", targets["keypoints"][None], fmt, None)
        assert fmt is not None
        out["keypoints"] = _keypoints(targets["keypoints"], fmt, moves, shape)
        flip = options.keypoint_flip_indices
        if flip is not None and sum(m.mirrors for m in moves) % 2:
            out["keypoints"] = out["keypoints"][list(flip)]
    return out


def _check_size(name: str, mask: np.ndarray, shape: tuple[int, ...], stacked: bool) -> None:
    """A sample's mask of another size than its image (masks made per sample, from files,
    are known only here) would be warped off its pixels: refused."""
    size = mask.shape[1:3] if stacked else mask.shape[:2]
    if tuple(size) != tuple(shape[:2]):
        raise OutputMismatchError(
            f"The target {name!r} of this sample is {size[1]}x{size[0]} pixels (width x "
            f"height) but its image is {shape[1]}x{shape[0]}: moved together, the mask would "
            f"no longer lie on its pixels. Fix: give each mask its image's size (or both one "
            f"image_size).")


def _masks(mask: np.ndarray | Undrawn, moves: list[Move], fill: float, stacked: bool,
           tied: bool = False) -> np.ndarray:
    if tied:  # one mask per box: what a reflect or wrap border brings in is no part of its
        # instance (a mirrored copy outside its box), nor is an ignore label (mask_fill)
        moves = [m.bringing_nothing_in() for m in moves]
        fill = 0.0
    if isinstance(mask, Undrawn):
        mask, moves = _drawn(mask, moves, fill)
    if stacked:  # an empty mask (a padding row) stays empty
        if not len(mask) or not moves:
            return mask
        height, width = moves[-1].size
        empty = np.zeros((height, width, *mask.shape[3:]), mask.dtype)
        return np.stack([empty if not fill and not m.any() else _masks(m, moves, fill, False)
                         for m in mask])
    for m in moves:
        mask = m.mask(mask, fill)
    return mask


def _drawn(mask: Undrawn, moves: list[Move], fill: float) -> tuple[np.ndarray, list[Move]]:
    """``mask`` drawn through the leading moves its points follow exactly (a matrix, with a
    constant border and nothing but 0 brought in: a drawn outline has nothing outside it;
    after the first, one that samples only inside the last one's output, which would
    otherwise bring back what it cut off), and the moves left to make."""
    taken = 0
    for m in moves if not fill else ():
        if not isinstance(m, MatrixMove) or m.border != cv2.BORDER_CONSTANT or \
                (taken and not m.samples_within(*moves[taken - 1].size)):
            break
        taken += 1
    if not taken:
        return mask.drawn(), moves
    through = moves[:taken]

    def where(xy: np.ndarray) -> np.ndarray:
        for m in through:
            xy = m.points(xy)
        return xy

    height, width = through[-1].size
    return mask.drawn(where, (height, width)), moves[taken:]


def _keypoints(rows: np.ndarray, fmt: str, moves: list[Move],
               shape: tuple[int, ...]) -> np.ndarray:
    real = ~formats.padding(rows[:, :2])
    height, width = shape[:2]
    xy = formats.to_xy(rows[real], fmt, height, width)
    alive = np.ones(len(xy), bool)
    for m in moves:
        xy = m.points(xy)
        height, width = m.size
        alive &= (xy[:, 0] >= 0) & (xy[:, 0] <= width) & (xy[:, 1] >= 0) & (xy[:, 1] <= height)
    out = np.full_like(rows, formats.PAD)
    kept = np.zeros(len(rows), bool)
    kept[np.flatnonzero(real)[alive]] = True
    written = formats.from_xy(xy[alive], fmt, height, width)
    out[kept, :2] = written.astype(rows.dtype) if rows.dtype.kind == "f" else np.rint(written)
    out[kept, 2:] = rows[kept, 2:]
    return out
