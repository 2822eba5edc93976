"""What the detection readers share: each image's boxes as pixel edges of the file, made
into Keras' layout once, in the main process.

A reader hands ``assemble`` a ``BoxTable``: the images (path, the size its annotation gives)
and, flat, every box as ``(x0, y0, x1, y1)`` pixel edges of the file as stored, with its
image and class index. ``assemble`` keeps or drops the empty images, checks the files exist,
clips each box to its image, drops the boxes left without area, scales them to
``image_size`` (the stretch ``ImageFiles`` applies: x by new width / old width, y by new
height / old height), writes them in the ``bounding_box_format`` asked
(``shmaug.ops.targets.formats``, the conversions the ops use) and pads them with -1, all in
whole arrays: a COCO file's million boxes take no Python loop here. The readers of record
shards (``tf_od``, ``hf_objects``) hand ``layout`` the same table, their images being records
(sizes from the records, no path): it does all but the files, and says which images it kept.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..files import ImageFiles
from ..images.decode import stored_sizes
from ..remote import protocol_of
from ..images.settings import image_size_of
from ...errors import ArgumentError, got
from ...ops.targets.boxes import Boxes
from ...ops.targets.formats import BOX_FORMATS, PAD, check_format, from_xyxy

log = logging.getLogger(__name__)
_SLACK = 0.01  # how far past 0..1 a fraction may be by a rounding (and then be clipped)


@dataclass
class BoxTable:
    """Every image and box as the annotations give them, flat: one row per image, one per
    box (``owner``: the row of its image), so a dataset of a million boxes is a few arrays,
    not a Python object per box."""

    paths: list[str]
    sizes: np.ndarray  # (N, 2) int64 (height, width) the annotation gives; 0: read the file
    owner: np.ndarray  # (B,) int64 the image of each box
    boxes: np.ndarray  # (B, 4) float64 pixel edges (x0, y0, x1, y1) of the file as stored
    labels: np.ndarray  # (B,) int64 class indices
    where: Callable[[int], str]  # what an error names for image i: "instances.json, image 7"
    # (B,) int64 the annotation each box came from (its COCO masks'), or None
    annotation: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> BoxTable:
        """The images ``rows`` (sorted), with their boxes."""
        new = np.full(len(self.paths), -1, np.int64)
        new[rows] = np.arange(len(rows))
        kept = new[self.owner] >= 0
        return BoxTable([self.paths[i] for i in rows], self.sizes[rows], new[self.owner[kept]],
                        self.boxes[kept], self.labels[kept],
                        lambda i: self.where(int(rows[i])),
                        None if self.annotation is None else self.annotation[kept])


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
                f"`image_size`). Fix: pass image_size=None and start `augment` with "
                f"Op('resize', height=..., width=..., {name}=True), which moves the boxes "
                f"with the pixels (so does a crop to a size: Op('center_resized_crop', ...)); "
                f"or leave {name}=False.")
    if max_boxes is not None and (isinstance(max_boxes, bool) or not isinstance(max_boxes, int)
                                  or max_boxes < 1):
        raise ArgumentError(
            f"`max_boxes` must be a positive int or None; received {got(max_boxes)}. Fix: "
            f"e.g. max_boxes=100, or None for the dataset's largest count.")
    return fmt


def assemble(source: str, table: BoxTable, class_names: Sequence[str], *,
             image_size: Any, bounding_box_format: str, max_boxes: int | None,
             keep_empty: bool, check_sizes: bool,
             file_options: dict[str, Any]
             ) -> tuple[ImageFiles, dict[str, np.ndarray], BoxTable]:
    """``(files, {"boxes", "labels"}, table)`` for the annotated images, as the module says
    (``table``: the images and boxes kept, for what a reader reads besides the boxes: COCO's
    masks); ``source`` (the annotation file or folder) is named in every error."""
    size = image_size_of(image_size)
    count = len(table.paths)
    if not keep_empty:  # (the files of images without a box need not exist)
        table = table.take(np.unique(table.owner))
    if protocol_of(table.paths[0] if table.paths else "") is None:
        _check_exist(source, table)  # (a bucket's: ImageFiles checks them, concurrently)
        _settle_sizes(table, check_sizes)
    else:
        _sizes_given(source, table)
    _, table, y = layout(source, table, image_size=size,
                         bounding_box_format=bounding_box_format, max_boxes=max_boxes,
                         keep_empty=keep_empty, annotated=count)
    files = ImageFiles.from_paths(table.paths, class_names=list(class_names),
                                  image_size=size, **file_options)
    return files, y, table


def layout(source: str, table: BoxTable, *, image_size: tuple[int, int] | None,
           bounding_box_format: str, max_boxes: int | None, keep_empty: bool,
           annotated: int | None = None
           ) -> tuple[np.ndarray, BoxTable, dict[str, np.ndarray]]:
    """``(rows of table kept, their table, {"boxes", "labels"})``: the boxes clipped to
    their image (whose size ``table.sizes`` must hold), the images left without a box
    dropped unless ``keep_empty``, the boxes scaled to ``image_size``, written in
    ``bounding_box_format`` and padded. ``annotated``: how many images the annotations
    held, for the error when none is left (default: the table's)."""
    count = len(table.paths) if annotated is None else annotated
    _clip(source, table)
    rows = np.arange(len(table.paths))
    if not keep_empty:  # (nor do those whose boxes were all clipped away)
        rows = np.unique(table.owner)
        table = table.take(rows)
    if not table.paths:
        raise ArgumentError(
            f"{source}: no image to read ({count} annotated, none with a box kept, and "
            f"keep_empty=False drops the others). Fix: check the filters (keep_empty, "
            f"keep_crowd, keep_difficult, class_names).")
    sides = table.sizes[table.owner][:, ::-1].astype(np.float64)  # (width, height) per box
    boxes = table.boxes
    if image_size is not None:  # the stretch to image_size: x and y each by its own factor
        boxes = boxes * np.tile([image_size[1], image_size[0]] / sides, 2)
        sides = np.broadcast_to(np.array([image_size[1], image_size[0]], np.float64),
                                sides.shape)
    if bounding_box_format.startswith("rel_"):  # fractions of the image they end on
        boxes = boxes / np.tile(sides, 2)
    boxes = from_xyxy(boxes, bounding_box_format, 1.0, 1.0)
    padded, labels = _padded(source, table, boxes, max_boxes)
    return rows, table, {"boxes": Boxes(padded, bounding_box_format), "labels": labels}


def refuse_inverted(source: str, table: BoxTable, fix: str) -> None:
    """Refuse a box whose far edge is before its near one (a misread format), naming its
    image; ``fix`` says how to read or write it right. (A box of no area is kept, then
    dropped by the clip, as COCO's few are.)"""
    x0, y0, x1, y1 = table.boxes.T
    _refuse_rows(source, np.flatnonzero((x1 < x0) | (y1 < y0)), table.boxes,
                 lambda k: table.where(int(table.owner[k])),
                 "are inverted, e.g. (x0, y0, x1, y1) =", fix)


def refuse_not_fractions(source: str, boxes: np.ndarray, owner: np.ndarray,
                         where: Callable[[int], str], fix: str) -> None:
    """Refuse boxes read as fractions of their image that are pixels (past 0..1 by more than
    a rounding), naming the first one's image (``where(owner[k])``); ``fix`` says how."""
    outside = np.flatnonzero(((boxes < -_SLACK) | (boxes > 1 + _SLACK)).any(1))
    _refuse_rows(source, outside, boxes, lambda k: where(int(owner[k])),
                 "are not fractions of their image (0..1), e.g.", fix)


def _refuse_rows(source: str, bad: np.ndarray, boxes: np.ndarray,
                 where: Callable[[int], str], what: str, fix: str) -> None:
    """Raise for the boxes at rows ``bad`` (if any): how many, what is wrong with them, the
    first one and its image (``where(row)``), and ``fix``."""
    if len(bad):
        k = int(bad[0])
        raise ArgumentError(
            f"{source}: {len(bad)} box(es) {what} "
            f"{tuple(round(float(v), 4) for v in boxes[k])} in {where(k)}. Fix: {fix}")


def class_indices(source: str, table: BoxTable, ids: np.ndarray, first: int,
                  class_names: Sequence[str]) -> np.ndarray:
    """Each box's class index, its class id less ``first`` (the id of class 0); an id with
    no name in ``class_names`` is refused, naming its image."""
    labels = np.asarray(ids, np.int64) - first
    bad = np.flatnonzero((labels < 0) | (labels >= len(class_names)))
    if len(bad):
        k = int(bad[0])
        raise ArgumentError(
            f"{source}: class id {int(ids[k])} (in {table.where(int(table.owner[k]))}) has "
            f"no name: the {len(class_names)} `class_names` name ids {first} to "
            f"{first + len(class_names) - 1}. Fix: pass class_names with a name for every "
            f"id (in id order), or None to name them from the data.")
    return labels


def _check_exist(source: str, table: BoxTable) -> None:
    missing = [i for i, path in enumerate(table.paths) if not os.path.isfile(path)]
    if missing:
        first = missing[0]
        raise ArgumentError(
            f"{source} names {len(missing)} image file(s) of {len(table.paths)} that do not "
            f"exist, e.g. {table.paths[first]!r} ({table.where(first)}). Fix: pass `images` "
            f"the folder that holds the files it names, or remove those images from the "
            f"annotations.")


def _sizes_given(source: str, table: BoxTable) -> None:
    """Images in a bucket: their sizes must be the annotations' (a header would be a request
    per image, here, before training)."""
    unknown = np.flatnonzero(~(table.sizes > 0).all(1))
    if len(unknown):
        i = int(unknown[0])
        raise ArgumentError(
            f"{source} gives {len(unknown)} image(s) in a bucket no width and height, e.g. "
            f"{table.paths[i]!r} ({table.where(i)}); the boxes are scaled by them, and "
            f"reading each header would be a request per image. Fix: give every image its "
            f"width and height in the annotations (COCO's own files do).")


def _settle_sizes(table: BoxTable, check: bool) -> None:
    """Each image's (height, width): the annotation's, or (where it gives none, or
    ``check``) read from the file's header (no pixels: ``stored_sizes``)."""
    unknown = np.nonzero(~(table.sizes > 0).all(1))[0]
    rows = np.arange(len(table.paths)) if check else unknown
    read = np.zeros((len(rows), 2), np.int64)
    for k, found in enumerate(stored_sizes([table.paths[i] for i in rows.tolist()])):
        if isinstance(found, OSError):
            i = int(rows[k])
            raise ArgumentError(f"{table.paths[i]} ({table.where(i)}) is not an image PIL can "
                                f"read: {found}. Fix: replace the file, or remove it from the "
                                f"annotations.")
        read[k] = found
    given = table.sizes[rows]
    wrong = np.flatnonzero((given > 0).all(1) & (given != read).any(1))
    if len(wrong):
        k, i = int(wrong[0]), int(rows[wrong[0]])
        raise ArgumentError(
            f"{table.where(i)} gives the image {table.paths[i]!r} a size of {given[k, 1]}x"
            f"{given[k, 0]} (width x height), but the file is {read[k, 1]}x{read[k, 0]}: its "
            f"boxes would be scaled wrongly ({len(wrong)} image(s) so). Fix: correct the "
            f"annotation's width and height (or the file); check_sizes=False skips this "
            f"check (one header read per image).")
    table.sizes[rows] = read


def _clip(source: str, table: BoxTable) -> None:
    """Boxes clipped to their image, less those left without area (COCO holds a few boxes of
    zero width, and a few past the image's edge by a rounding). Boxes of some area that lie
    wholly outside their image are dropped too, and said once, with how many: they point at
    a wrong size or format in the annotations."""
    height, width = table.sizes[table.owner].T
    boxes = np.clip(table.boxes, 0, np.stack([width, height, width, height], 1))
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    had = (table.boxes[:, 2] > table.boxes[:, 0]) & (table.boxes[:, 3] > table.boxes[:, 1])
    outside = np.flatnonzero(had & ~keep)
    if len(outside):
        k = int(outside[0])
        log.warning(
            "%s: dropped %d box(es) of %d that lie wholly outside their image, e.g. %s "
            "(x0, y0, x1, y1) in %s, of %dx%d pixels (width x height). Check the "
            "annotations' image sizes and box coordinates.", source, len(outside),
            len(boxes), tuple(round(float(v), 2) for v in table.boxes[k]),
            table.where(int(table.owner[k])), int(width[k]), int(height[k]))
    table.boxes, table.owner, table.labels = boxes[keep], table.owner[keep], table.labels[keep]
    if table.annotation is not None:
        table.annotation = table.annotation[keep]


def box_rows(table: BoxTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each box goes in the padded layout: ``(order, image, row)``, the boxes sorted
    by image (each image's in the annotations' order), and for each so sorted its image and
    its row among that image's."""
    counts = np.bincount(table.owner, minlength=len(table.paths))
    order = np.argsort(table.owner, kind="stable")
    owner = table.owner[order]
    return order, owner, np.arange(len(owner)) - (np.cumsum(counts) - counts)[owner]


def _padded(source: str, table: BoxTable, boxes: np.ndarray, max_boxes: int | None
            ) -> tuple[np.ndarray, np.ndarray]:
    """Boxes (float32 (N, max_boxes, 4)) and labels (int64 (N, max_boxes)) padded with -1,
    each image's in the annotations' order; an image over ``max_boxes`` refused."""
    counts = np.bincount(table.owner, minlength=len(table.paths))
    most = int(counts.max(initial=0))
    if max_boxes is not None and most > max_boxes:
        worst = int(np.argmax(counts))
        raise ArgumentError(
            f"{source}: {int((counts > max_boxes).sum())} image(s) hold more than "
            f"`max_boxes`={max_boxes} boxes, e.g. {most} in {table.where(worst)}. Fix: raise "
            f"max_boxes, or pass None for the dataset's largest count ({most}); boxes are "
            f"never dropped silently.")
    order, owner, rank = box_rows(table)
    padded = np.full((len(table.paths), max_boxes or max(1, most), 4), PAD, np.float32)
    labels = np.full(padded.shape[:2], PAD, np.int64)
    padded[owner, rank] = boxes[order]
    labels[owner, rank] = table.labels[order]
    return padded, labels
