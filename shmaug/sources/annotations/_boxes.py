"""What the COCO and VOC readers share: each image's boxes as pixel edges of the file, made
into Keras' layout once, in the main process.

A reader hands ``assemble`` one ``Annotated`` per image (its path, the size its annotation
gives, its boxes as ``(x0, y0, x1, y1)`` pixel edges of the file as stored, its class
indices). ``assemble`` keeps or drops the empty images, checks the files exist, clips each
box to its image, drops the boxes left without area, scales them to ``image_size`` (the
stretch ``ImageFiles`` applies: x by new width / old width, y by new height / old height),
writes them in the ``bounding_box_format`` asked (``shmaug.ops.targets.formats``, the
conversions the ops use) and pads them with -1 (``pad_boxes``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from PIL import Image

from ..files import ImageFiles
from ..images.settings import image_size_of
from ...errors import ArgumentError, got
from ...ops.targets.formats import BOX_FORMATS, check_format, from_xyxy, pad_boxes


@dataclass
class Annotated:
    """One image as its annotation describes it."""

    path: str
    size: tuple[int, int] | None  # (height, width) the annotation gives; None: read the file
    boxes: np.ndarray  # (m, 4) float64 pixel edges (x0, y0, x1, y1) of the file as stored
    labels: np.ndarray  # (m,) int64 class indices
    where: str  # what an error names: "instances.json, image id 7" or "Annotations/7.xml"


def check_settings(bounding_box_format: Any, max_boxes: Any, crop_to_aspect_ratio: bool,
                   pad_to_aspect_ratio: bool) -> str:
    """Refuse what the readers do not move boxes for; the format, checked."""
    fmt = check_format(bounding_box_format, "bounding_box_format", BOX_FORMATS)
    if fmt is None:
        raise ArgumentError(
            f"`bounding_box_format` is None; the boxes are written in a format. Fix: pass one "
            f"of {list(BOX_FORMATS)}, the one your model and pipeline read (Compose(..., "
            f"bounding_box_format=...)).")
    for name, value in (("crop_to_aspect_ratio", crop_to_aspect_ratio),
                        ("pad_to_aspect_ratio", pad_to_aspect_ratio)):
        if value:
            raise ArgumentError(
                f"`{name}={value!r}` changes the images' geometry in a way the annotation "
                f"readers do not move boxes for (they scale boxes by the plain stretch to "
                f"`image_size`). Fix: leave {name}=False, or pass image_size=None and start "
                f"`augment` with a crop to a size (Op('center_resized_crop', ...) or "
                f"Op('random_resized_crop', ...)), which moves the boxes with the pixels.")
    if max_boxes is not None and (isinstance(max_boxes, bool) or not isinstance(max_boxes, int)
                                  or max_boxes < 1):
        raise ArgumentError(
            f"`max_boxes` must be a positive int or None; received {got(max_boxes)}. Fix: "
            f"e.g. max_boxes=100, or None for the dataset's largest count.")
    return fmt


def assemble(source: str, images: list[Annotated], class_names: Sequence[str], *,
             image_size: Any, bounding_box_format: str, max_boxes: int | None,
             keep_empty: bool, check_sizes: bool,
             file_options: dict[str, Any]) -> tuple[ImageFiles, dict[str, np.ndarray]]:
    """``(files, {"boxes", "labels"})`` for the annotated images, as the module says;
    ``source`` (the annotation file or folder) is named in every error."""
    size = image_size_of(image_size)
    kept = images if keep_empty else [a for a in images if len(a.boxes)]
    if not kept:
        raise ArgumentError(
            f"{source}: no image to read ({len(images)} annotated, none with a box kept"
            f"{'' if keep_empty else ', and keep_empty=False drops the others'}). Fix: check "
            f"the images' folder and the filters (keep_empty, keep_crowd, keep_difficult).")
    _check_exist(source, kept)
    for a in kept:
        _settle_size(a, check_sizes)
        a.boxes, a.labels = _clipped(a)
    _check_count(source, kept, max_boxes)
    rows = []
    for a in kept:
        height, width = a.size or (0, 0)
        boxes = a.boxes
        if size is not None:
            boxes = boxes * ([size[1] / width, size[0] / height] * 2)
            height, width = size
        rows.append(from_xyxy(boxes, bounding_box_format, height, width))
    count = max_boxes or max(1, max(len(r) for r in rows))
    boxes, labels = pad_boxes(rows, [a.labels for a in kept], max_boxes=count)
    assert labels is not None
    files = ImageFiles.from_paths([a.path for a in kept], class_names=list(class_names),
                                  image_size=size, **file_options)
    return files, {"boxes": boxes, "labels": labels}


def _check_exist(source: str, images: list[Annotated]) -> None:
    missing = [a for a in images if not os.path.isfile(a.path)]
    if missing:
        first = missing[0]
        raise ArgumentError(
            f"{source} names {len(missing)} image file(s) of {len(images)} that do not exist, "
            f"e.g. {first.path!r} ({first.where}). Fix: pass `images` the folder that holds "
            f"the files it names, or remove those images from the annotations.")


def _settle_size(a: Annotated, check: bool) -> None:
    """The image's (height, width): the annotation's, or (where it gives none, or ``check``)
    read from the file's header (PIL reads no pixels for it)."""
    if a.size is not None and not check:
        return
    try:
        with Image.open(a.path) as image:
            width, height = image.size
    except OSError as exc:
        raise ArgumentError(f"{a.path} ({a.where}) is not an image PIL can read: {exc}. Fix: "
                            f"replace the file, or remove it from the annotations.") from None
    if a.size is not None and a.size != (height, width):
        raise ArgumentError(
            f"{a.where} gives the image {a.path!r} a size of {a.size[1]}x{a.size[0]} (width x "
            f"height), but the file is {width}x{height}: its boxes would be scaled wrongly. "
            f"Fix: correct the annotation's width and height (or the file).")
    a.size = (height, width)


def _clipped(a: Annotated) -> tuple[np.ndarray, np.ndarray]:
    """Boxes clipped to the image, less those left without area (COCO holds a few boxes of
    zero width, and a few past the image's edge by a rounding)."""
    height, width = a.size or (0, 0)
    boxes = np.clip(a.boxes.reshape(-1, 4), 0, [width, height, width, height])
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    return boxes[keep], a.labels[keep]


def _check_count(source: str, images: list[Annotated], max_boxes: int | None) -> None:
    if max_boxes is None:
        return
    over = [a for a in images if len(a.boxes) > max_boxes]
    if over:
        worst = max(over, key=lambda a: len(a.boxes))
        raise ArgumentError(
            f"{source}: {len(over)} image(s) hold more than `max_boxes`={max_boxes} boxes, "
            f"e.g. {len(worst.boxes)} in {worst.where}. Fix: raise max_boxes, or pass None "
            f"for the dataset's largest count ({len(worst.boxes)}); boxes are never dropped "
            f"silently.")
