"""What targets look like: Keras' box formats and names, keypoint formats, padding, and the
checks a loader runs on them before anything starts.

Boxes follow Keras' layout: ``bounding_boxes = {"boxes": (N, max_boxes, 4), "labels": (N,
max_boxes)}``, padded with rows of -1, in any of the ``bounding_box_format`` values that
``keras.utils.bounding_boxes.convert_format`` knows (``BOX_FORMATS``: ``rel_`` ones are
fractions of the image's width and height). Coordinates are pixel edges: a box over pixel
(0, 0) alone is ``[0, 0, 1, 1]`` in ``xyxy``. Keypoints are (N, K, >= 2) rows in a
``keypoint_format`` (``KEYPOINT_FORMATS``), extra columns (a visibility) riding along; a row
of -1 is padding, or a keypoint no longer on its image. Masks are (N, H, W) or (N, H, W, C),
one per image and of its size (``segmentation_masks`` in Keras' layout is (N, H, W, 1)).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ArgumentError, got

BOX_FORMATS = ("xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw", "rel_xyxy", "rel_yxyx",
               "rel_xywh", "rel_center_xywh")
"""Keras' ``bounding_box_format`` values (``keras.utils.bounding_boxes.convert_format``)."""
KEYPOINT_FORMATS = ("xy", "yx", "rel_xy", "rel_yx")
BOX_LABELS = "box_labels"  # how a loader names the labels beside Keras' boxes
PAD = -1  # what a padding row holds, every column (Keras' MaxNumBoundingBoxes pads so)
_SLACK = 1e-3  # of a side: rounding past the image's edge that still counts as inside


ALBUMENTATIONS_FORMATS = {"pascal_voc": "xyxy", "coco": "xywh", "albumentations": "rel_xyxy",
                          "yolo": "rel_center_xywh"}
"""albumentations' ``BboxParams(format=...)`` names, by Keras' name of the same format."""
# Other libraries' names of Keras' formats, told in the fix of a name Keras does not use.
_OTHER_NAMES = {**ALBUMENTATIONS_FORMATS, "cxcywh": "center_xywh", "xyxy": "xyxy",
                "xywh": "xywh"}


def in_pixels(value: Any) -> bool:
    """Whether ``value`` is a float array reaching past 1: coordinates in pixels, not one-hot
    rows, class ids or fractions (what lies on an image, told from what does not)."""
    return isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size > 0 \
        and float(np.nanmax(value)) > 1


def check_format(value: Any, name: str, formats: tuple[str, ...]) -> str | None:
    """``value`` as a format name among ``formats``, or None."""
    if value is None:
        return None
    if value not in formats:
        same = _OTHER_NAMES.get(str(value).lower()) if isinstance(value, str) else None
        fix = (f"pass {name}={same!r}, Keras' name of that format" if same in formats else
               f"pass the format your {'boxes' if 'box' in name else 'keypoints'} are in")
        raise ArgumentError(
            f"`{name}` expects one of {list(formats)} (Keras' names); received {value!r}. "
            f"Fix: {fix}.")
    return str(value)


def padding(rows: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
    """Which rows (..., columns) are padding: every value -1, or (given the labels beside
    them) a label of -1, as Keras reads them (its layers move a padding row's coordinates
    into numbers of no meaning, and keep its label -1)."""
    found: np.ndarray = (rows == PAD).all(-1)
    if labels is not None:
        found |= np.asarray(labels).reshape(found.shape) == PAD
    return found


def _scale(fmt: str, height: Any, width: Any) -> np.ndarray:
    """What a format's four numbers are multiplied by to be pixels (1 for absolute ones);
    (4,), or (N, 4) for a height and a width per box."""
    if not fmt.startswith("rel_"):
        return np.ones(4)
    yx = "yx" in fmt.removeprefix("rel_").removeprefix("center_")[:2]
    return np.stack([height, width, height, width] if yx else [width, height, width, height],
                    -1)


def to_xyxy(rows: np.ndarray, fmt: str, height: Any, width: Any) -> np.ndarray:
    """(N, 4) boxes in ``fmt`` as float64 pixel edges (x0, y0, x1, y1); ``height`` and
    ``width`` (the image's, for ``rel_`` formats) are numbers, or (N,) arrays, one per box."""
    b: np.ndarray = np.array(rows[:, :4], np.float64)
    if fmt.startswith("rel_"):
        b *= _scale(fmt, height, width)
    base = fmt.removeprefix("rel_")
    if base == "xyxy":
        return b
    if base == "yxyx":
        return b[:, [1, 0, 3, 2]]
    if base == "xywh":
        return np.asarray(np.c_[b[:, :2], b[:, :2] + b[:, 2:]])
    if base == "center_xywh":
        return np.asarray(np.c_[b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2])
    yx, hw = b[:, [1, 0]], b[:, [3, 2]]  # center_yxhw
    return np.asarray(np.c_[yx - hw / 2, yx + hw / 2])


def from_xyxy(xyxy: np.ndarray, fmt: str, height: Any, width: Any) -> np.ndarray:
    """``to_xyxy``'s inverse: (N, 4) pixel boxes written in ``fmt`` (float64)."""
    b = np.asarray(xyxy, np.float64)
    base = fmt.removeprefix("rel_")
    if base == "yxyx":
        b = b[:, [1, 0, 3, 2]]
    elif base != "xyxy":
        size = b[:, 2:] - b[:, :2]
        start = b[:, :2] + size / 2 if base.startswith("center_") else b[:, :2]
        b = np.concatenate([start, size], 1)
        b = b[:, [1, 0, 3, 2]] if base == "center_yxhw" else b
    out: np.ndarray = b / _scale(fmt, height, width) if fmt.startswith("rel_") else b
    return out


def to_xy(rows: np.ndarray, fmt: str, height: float, width: float) -> np.ndarray:
    """(N, >= 2) keypoints in ``fmt`` as float64 pixel (x, y)."""
    p = np.asarray(rows, np.float64)[:, :2]
    p = p[:, ::-1] if fmt.endswith("yx") else p
    return p * [width, height] if fmt.startswith("rel_") else p.copy()


def from_xy(xy: np.ndarray, fmt: str, height: float, width: float) -> np.ndarray:
    """``to_xy``'s inverse."""
    p = np.asarray(xy, np.float64) / ([width, height] if fmt.startswith("rel_") else 1.0)
    return p[:, ::-1] if fmt.endswith("yx") else p


# -- checks, before anything starts ----------------------------------------------------------


def check_boxes(name: str, boxes: np.ndarray, fmt: str | None,
                image_shape: tuple[int, ...] | None, labels: np.ndarray | None = None) -> None:
    """Boxes of every sample (N, max_boxes, >= 4), checked against ``fmt`` and the images'
    (height, width) where known: refused where they lie outside the image, or read in ``fmt``
    have their ends before their starts, or look relative under an absolute format."""
    where = f"`y[{name!r}]`"
    if fmt is None:
        raise ArgumentError(
            f"{where} holds boxes, but the pipeline has no `bounding_box_format`, so shmaug "
            f"cannot tell their corners apart. Fix: pass it as Keras' layers take it, e.g. "
            f"Compose([...], bounding_box_format='xyxy') (one of {list(BOX_FORMATS)}).")
    if boxes.ndim != 3 or boxes.shape[2] < 4:
        raise ArgumentError(
            f"{where} must hold (samples, max_boxes, 4) boxes, padded with rows of -1; "
            f"received shape {boxes.shape}. Fix: pad each sample's boxes to one count "
            f"(shmaug.ops.pad_boxes does), as Keras' MaxNumBoundingBoxes does.")
    _check_signed(name, "boxes", boxes)
    if image_shape is None:
        return
    rows = boxes.reshape(-1, boxes.shape[2])
    pad = padding(rows[:, :4], None if labels is None or labels.shape[:2] != boxes.shape[:2]
                  else labels[:, :, 0] if labels.ndim == 3 else labels)
    real = rows[~pad]
    if not len(real):
        return
    height, width = image_shape[:2]
    xyxy = to_xyxy(real, fmt, height, width)
    if not np.isfinite(xyxy).all():
        raise ArgumentError(f"{where} holds boxes that are NaN or infinite. Fix: drop them "
                            f"(pad their rows with -1).")
    if (xyxy[:, 2] < xyxy[:, 0]).any() or (xyxy[:, 3] < xyxy[:, 1]).any():
        bad = real[np.argmax((xyxy[:, 2] < xyxy[:, 0]) | (xyxy[:, 3] < xyxy[:, 1]))][:4]
        raise ArgumentError(
            f"{where} holds a box {bad.tolist()} whose end lies before its start when read "
            f"as bounding_box_format={fmt!r}: the boxes are in another format. Fix: pass the "
            f"format they are in (one of {list(BOX_FORMATS)}).")
    slack = _SLACK * max(height, width)
    outside = (xyxy[:, :2] < -slack).any(1) | (xyxy[:, 2] > width + slack) | \
        (xyxy[:, 3] > height + slack)
    if outside.any():
        bad = real[np.argmax(outside)][:4]
        raise ArgumentError(
            f"{where} holds a box {bad.tolist()} ({fmt}) outside its {height}x{width} image. "
            f"Fix: clip the boxes to their images, or pass the format they are in (relative "
            f"coordinates are the rel_ formats).")
    if not fmt.startswith("rel_") and min(height, width) > 2 and xyxy.max() <= 1.0:
        raise ArgumentError(
            f"{where} holds boxes all within [0, 1], which is a fraction of the image, while "
            f"bounding_box_format={fmt!r} reads them as pixels of a {height}x{width} image. "
            f"Fix: pass bounding_box_format='rel_{fmt}' (or boxes in pixels).")


def check_box_labels(name: str, labels: np.ndarray, boxes: np.ndarray) -> None:
    """Labels beside boxes: one per box row (N, max_boxes)."""
    if labels.shape[:2] != boxes.shape[:2] or labels.ndim not in (2, 3):
        raise ArgumentError(
            f"`y[{name!r}]` must hold one label per box, shape {boxes.shape[:2]} like the "
            f"boxes beside it; received {labels.shape}. Fix: pad the labels with -1 to the "
            f"boxes' count, row for row.")
    if labels.dtype.kind not in "biuf":
        raise ArgumentError(
            f"`y[{name!r}]` must hold numeric labels (a dropped box's label becomes -1, as "
            f"Keras pads); received dtype {labels.dtype}. Fix: map the class names to ids, "
            f"e.g. np.searchsorted(sorted_names, names).")
    _check_signed(name, "labels", labels)


def _check_signed(name: str, what: str, rows: np.ndarray) -> None:
    """Rows that cannot hold -1 (unsigned, or not numbers) could not mark what the moves drop."""
    if rows.dtype.kind not in "if":
        raise ArgumentError(
            f"`y[{name!r}]` holds {what} of dtype {rows.dtype}, which cannot hold -1: the "
            f"moves mark a dropped box's {'label' if what == 'labels' else 'row'} with -1 "
            f"(Keras' padding). Fix: pass them as "
            f"{'int32' if what == 'labels' else 'float32'}, e.g. "
            f"y[{name!r}].astype({'int32' if what == 'labels' else 'float32'!r}).")


def check_keypoints(name: str, points: np.ndarray, fmt: str | None,
                    image_shape: tuple[int, ...] | None) -> None:
    """Keypoints of every sample (N, K, >= 2), in ``fmt``, within the image where known."""
    where = f"`y[{name!r}]`"
    if fmt is None:
        raise ArgumentError(
            f"{where} holds keypoints, but the pipeline has no `keypoint_format`. Fix: pass "
            f"Compose([...], keypoint_format='xy') (one of {list(KEYPOINT_FORMATS)}).")
    if points.ndim != 3 or points.shape[2] < 2:
        raise ArgumentError(
            f"{where} must hold (samples, keypoints, >= 2) keypoints, padded with rows of -1; "
            f"received shape {points.shape}. Fix: "
            + (f"several instances per sample (people) go in as rows of one: "
               f"points.reshape({points.shape[0]}, {points.shape[1]} * {points.shape[2]}, "
               f"{points.shape[3]}), absent ones padded with -1, and keypoint_flip_indices "
               f"repeated per instance, [p * K + i for p in range(P) for i in flip]."
               if points.ndim == 4 else "pad each sample's keypoints to one count."))
    _check_signed(name, "keypoints", points)
    if image_shape is None:
        return
    rows = points.reshape(-1, points.shape[2])
    real = rows[~padding(rows[:, :2])]
    if not len(real):
        return
    height, width = image_shape[:2]
    xy = to_xy(real, fmt, height, width)
    if not fmt.startswith("rel_") and len(real) > 1 and min(height, width) > 2 and \
            0.0 < xy.max() <= 1.0:  # (all at 0: COCO's unlabelled joints, not fractions)
        raise ArgumentError(
            f"{where} holds keypoints all within [0, 1], which is a fraction of the image, "
            f"while keypoint_format={fmt!r} reads them as pixels of a {height}x{width} image "
            f"(all in its top-left pixel). Fix: pass keypoint_format='rel_{fmt}' (or "
            f"keypoints in pixels).")
    if (xy < 0).any() or (xy[:, 0] > width).any() or (xy[:, 1] > height).any():
        bad = real[np.argmax((xy < 0).any(1) | (xy[:, 0] > width) | (xy[:, 1] > height))]
        raise ArgumentError(
            f"{where} holds a keypoint {bad[:2].tolist()} ({fmt}) outside its {height}x{width} "
            f"image. Fix: pad keypoints that are not on the image with -1 rows, or pass the "
            f"format they are in.")


def check_flip_indices(value: Any) -> tuple[int, ...] | None:
    """``keypoint_flip_indices`` as a tuple: a permutation of 0..K-1 that is its own inverse
    (the pairs a mirror swaps, the rest in place)."""
    if value is None:
        return None
    try:
        flip = tuple(int(k) for k in value)
        ok = all(float(k) == int(k) for k in value) and sorted(flip) == list(range(len(flip)))
        ok = ok and all(flip[flip[k]] == k for k in range(len(flip)))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ArgumentError(
            f"`keypoint_flip_indices` must say, for each keypoint row k, the row it takes when "
            f"the image is mirrored: a permutation of 0..K-1 that swaps pairs (its own "
            f"inverse); received {got(value)}. Fix: e.g. keypoint_flip_indices=(0, 2, 1) for "
            f"a nose, a left eye and a right eye.")
    return flip


def check_flip_rows(name: str, rows: np.ndarray, flip: tuple[int, ...] | None) -> None:
    """Keypoints of as many rows per sample as ``keypoint_flip_indices`` names."""
    if flip is not None and rows.ndim >= 2 and rows.shape[1] != len(flip):
        raise ArgumentError(
            f"`y[{name!r}]` holds {rows.shape[1]} keypoint rows per sample, but "
            f"`keypoint_flip_indices` names {len(flip)}. Fix: one entry per keypoint row, "
            f"padding rows included.")


def check_mask(name: str, mask: np.ndarray, image_shape: tuple[int, ...] | None,
               stacked: bool, fill: float = 0.0) -> None:
    """A mask per image, of its height and width (``stacked``: several per image, (N, K, H,
    W), as albumentations' ``masks``), whose dtype holds ``fill`` (the ``mask_fill``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        held = np.array(fill).astype(mask.dtype)
    if held != fill:
        raise ArgumentError(
            f"`mask_fill` is {fill!r}, which masks of dtype {mask.dtype} (`y[{name!r}]`) "
            f"cannot hold: the areas a warp brings in would read as {held!r}. Fix: a "
            f"mask_fill in the dtype's range (an ignore label such as 255 for uint8), or "
            f"masks of a wider dtype.")
    if image_shape is None:
        return
    hw = mask.shape[2:4] if stacked else mask.shape[1:3]
    if tuple(hw) != tuple(image_shape[:2]):
        shape = "(N, K, H, W)" if stacked else "(N, H, W) or (N, H, W, C)"
        scaled = len(image_shape) >= 2 and all(
            m > i and m % i == 0 for m, i in zip(hw, image_shape[:2]))
        other = (" A target at a multiple of the image's size (a super-resolution pair) is "
                 "no mask: shmaug moves targets pixel for pixel only, so make the pair from "
                 "one image in your own `augment` (a Sequence subclass's `targets` hook, or "
                 "cv2.resize of the augmented high-resolution image) instead." if scaled
                 else "")
        if not stacked and mask.ndim == 4 and tuple(mask.shape[2:4]) == tuple(image_shape[:2]):
            other = (f" They are channels first (N, C, H, W) = {mask.shape}: pass "
                     f"np.moveaxis(masks, 1, -1).")
        raise ArgumentError(
            f"`y[{name!r}]` has masks of {tuple(hw)} pixels, but its images are "
            f"{tuple(image_shape[:2])}: a mask lies on its image, pixel for pixel. Fix: pass "
            f"masks as {shape} of the images' height and width (resize class-id masks with "
            f"interpolation='nearest').{other}")


def pad_boxes(boxes: Any, labels: Any = None, max_boxes: int | None = None
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """Boxes of varying count per sample (a list of (m_i, 4) arrays) as one Keras-layout array
    (N, max_boxes, 4) padded with rows of -1, and their labels (a list of (m_i,) arrays) as
    (N, max_boxes) padded with -1. Rows of more than 4 columns (albumentations' ``bboxes``
    with their label columns) keep them: (N, max_boxes, 4 + k), the extra columns riding
    along as the boxes move.

    The rule is per dataset: ``max_boxes`` defaults to the largest count of any sample, so
    every batch has one shape (one compiled step under ``jit``, one ring slot in shared
    memory), as Keras' ``MaxNumBoundingBoxes`` pads.

    Args:
        boxes: one array of boxes per sample, in any ``bounding_box_format``.
        labels: one array of labels per sample, or None.
        max_boxes: the padded count; None: the largest count in ``boxes``.

    Returns:
        ``(boxes, labels)``: float32 boxes and int64 labels (None where none were given).

    Raises:
        ArgumentError: a sample has more boxes than ``max_boxes``, labels of another count,
            rows of fewer than 4 columns, or of another count of columns than the others'.

    Example:
        >>> b, l = pad_boxes([np.zeros((2, 4)), np.zeros((0, 4))], [np.array([1, 2]), []])
        >>> b.shape, l.tolist()
        ((2, 2, 4), [[1, 2], [-1, -1]])
    """
    rows = [_box_rows(i, b) for i, b in enumerate(boxes)]
    width = next((r.shape[1] for r in rows if len(r)), 4)  # the first sample's with boxes
    for i, r in enumerate(rows):
        if len(r) and r.shape[1] != width:
            raise ArgumentError(
                f"`boxes` of sample {i} has rows of {r.shape[1]} columns, the samples before "
                f"it of {width}: one layout per dataset. Fix: give every sample's rows the "
                f"same columns (4 coordinates, then the same extra ones).")
    count = max((len(r) for r in rows), default=0) if max_boxes is None else int(max_boxes)
    out = np.full((len(rows), count, width), PAD, np.float32)
    names = None if labels is None else np.full((len(rows), count), PAD, np.int64)
    for i, r in enumerate(rows):
        if len(r) > count:
            raise ArgumentError(
                f"`boxes` of sample {i} holds {len(r)} boxes, more than `max_boxes`={count}. "
                f"Fix: raise max_boxes, or leave it None (the largest count).")
        out[i, :len(r)] = r
        if names is not None and labels is not None:
            own = np.asarray(labels[i], np.int64).reshape(-1)
            if len(own) != len(r):
                raise ArgumentError(
                    f"`labels` of sample {i} holds {len(own)} labels for {len(r)} boxes. Fix: "
                    f"one label per box.")
            names[i, :len(r)] = own
    return out, names


def _box_rows(i: int, boxes: Any) -> np.ndarray:
    """Sample ``i``'s boxes as rows: (..., m, 4 + k) as given (a leading axis of 1, a TF
    pipeline's batch, dropped), or a flat run of 4 coordinates each (one box as
    ``[x0, y0, x1, y1]``)."""
    rows = np.asarray(boxes, np.float32)
    if rows.ndim >= 2 and rows.shape[-1] >= 4 and rows.size == rows.shape[-1] * \
            rows.shape[-2]:
        return rows.reshape(-1, rows.shape[-1])
    if rows.size == 0:
        return rows.reshape(0, 4)
    if rows.ndim <= 1 and rows.size % 4 == 0:
        return rows.reshape(-1, 4)
    raise ArgumentError(
        f"`boxes` of sample {i} must be rows of 4 coordinates (extra columns ride along); "
        f"received shape {rows.shape}. Fix: pass one (boxes, 4) array per sample, e.g. "
        f"np.reshape(boxes, (-1, 4)) for a flat run of coordinates.")
