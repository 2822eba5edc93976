"""COCO-format detection annotations (``instances_*.json``) over their image folder.

The JSON is read once, with the standard library: ``images`` (``id``, ``file_name``,
``width``, ``height``), ``categories`` (``id``, ``name``) and ``annotations`` (``image_id``,
``category_id``, ``bbox`` as ``[x, y, width, height]`` pixel edges, ``iscrowd``). No
pycocotools: boxes need none, and its wheels lag new Pythons.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _boxes as B
from . import coco_masks as M
from ..files import ImageFiles
from ..remote import protocol_of
from ..remote.bucket import remote_for
from ..images.settings import DEFAULT_IMAGE_SIZE
from ...errors import ArgumentError, warn


def from_coco(
    annotations: str | os.PathLike[str], images: str | os.PathLike[str], *,
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE,
    bounding_box_format: str = "xyxy", max_boxes: int | None = None,
    class_names: Sequence[str] | None = None, keep_empty: bool = True,
    keep_crowd: bool = False, check_sizes: bool = True, color_mode: str | None = "rgb",
    interpolation: str = "bilinear", reduced_decode: bool = True,
    crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
    masks: str | None = None, storage_options: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
) -> tuple[ImageFiles, dict[str, Any]]:
    """A COCO detection set as ``(files, y)`` for ``shmaug.Loader`` / ``shmaug.Sequence``,
    so a user with a COCO folder writes no loader of their own.

    ``files`` reads the images the JSON lists, in its order, decoded and resized to
    ``image_size`` in the workers; ``y`` is ``{"boxes": float32 (N, max_boxes, 4),
    "labels": int64 (N, max_boxes)}``, padded with -1, the boxes scaled to ``image_size``
    and written in ``bounding_box_format``. Class index ``i`` is ``files.class_names[i]``:
    the file's categories sorted by id (COCO's 80 of ids 1 to 90 become 0 to 79).

    Args:
        annotations: the JSON file (``annotations/instances_train2017.json``).
        images: the folder its ``images[].file_name`` are in (``train2017/``).
        image_size: ``(height, width)`` the images are stretched to, the boxes with them;
            None keeps each image's size and the boxes in its pixels (then crop to one size
            in ``augment``).
        bounding_box_format: Keras' name of the format the boxes are written in ("xyxy",
            "xywh", "rel_xyxy", ...; ``rel_`` ones are fractions of the image).
        max_boxes: the padded count; None: the largest count of any image (at least 1). An
            image with more boxes is refused, naming it: boxes are never dropped silently.
        class_names: the category names to keep, in index order (categories that share a
            name share its index); None: every category of the file, in id order (each its
            own index, a shared name too). A box of a category not named is refused.
        keep_empty: keep the images without a box (after the filters), as negatives; False
            drops them, as detection training often does.
        keep_crowd: keep ``iscrowd`` annotations (one box around a crowd) as ordinary
            boxes; False (default) drops them, as Keras' layout has no "ignore" flag.
        check_sizes: read each file's header (True, default: a header costs little next to
            a decode) to check it has the JSON's ``width`` and ``height`` (a wrong one
            scales its boxes wrongly); an image without them is always read so. In a
            bucket they are not read.
        color_mode: as ``ImageFiles.from_paths``.
        interpolation: as ``ImageFiles.from_paths``.
        reduced_decode: as ``ImageFiles.from_paths``.
        crop_to_aspect_ratio: refused when True: the boxes are scaled by the plain stretch.
        pad_to_aspect_ratio: refused when True, likewise.
        masks: None (default): boxes alone. "instances": also ``y["masks"]``, uint8
            (max_boxes, H, W), the mask of box row k at k (empty under padding); "semantic":
            also ``y["segmentation_masks"]``, (H, W, 1) class index + 1 per pixel (0:
            background). Drawn from the annotations' polygons or RLEs by the workers, at
            ``image_size``, and moved with the image by the pipeline.
        storage_options: for a bucket (``annotations`` and ``images`` may be URLs,
            ``"s3://bucket/annotations/instances_train2017.json"``), as
            ``ImageFiles.from_paths``'; the images' sizes must then be in the JSON.
        cache_dir: for a bucket's images, as ``ImageFiles.from_paths``'.
        cache_limit: for a bucket's images, as ``ImageFiles.from_paths``'.

    Returns:
        ``(files, y)``: an ``ImageFiles`` and the boxes and labels (and masks), one row per
        file.

    Raises:
        ArgumentError: the JSON does not parse or lacks ``images`` / ``categories``; it names
            missing image files, an image id it does not list, a category id it does not
            define, a malformed ``bbox``, or (with ``masks``) an annotation without a mask;
            or a setting the boxes cannot follow.

    Example:
        >>> files, y = from_coco("annotations/instances_val2017.json", "val2017",
        ...                      image_size=(512, 512), bounding_box_format="rel_xyxy")
        >>> train = shmaug.Sequence(files, y, batch_size=16, augment=Compose(
        ...     [Maybe(Op("hflip"))], bounding_box_format="rel_xyxy"))
    """
    fmt = B.check_settings(bounding_box_format, max_boxes, crop_to_aspect_ratio,
                           pad_to_aspect_ratio)
    kind = M.check_kind(masks)
    source = os.fspath(annotations)
    data = _read(source, storage_options)
    ids, names = _categories(source, data["categories"], class_names)
    table, image_ids = _images(source, data["images"], os.fspath(images))
    listed = list(data.get("annotations") or ())
    _tell_keypoints(source, listed)
    _boxes(source, listed, table, image_ids, ids, keep_crowd)
    files, y, table = B.assemble(
        source, table, names, image_size=image_size, bounding_box_format=fmt,
        max_boxes=max_boxes, keep_empty=keep_empty, check_sizes=check_sizes,
        file_options=dict(color_mode=color_mode, interpolation=interpolation,
                          reduced_decode=reduced_decode, storage_options=storage_options,
                          cache_dir=cache_dir, cache_limit=cache_limit))
    if kind is None:
        return files, y
    assert table.annotation is not None  # (``_boxes`` set it)
    order, owner, row = B.box_rows(table)  # each mask at its box's row
    drawn = M.CocoMasks.build(source, listed, table.annotation[order], owner, row,
                              table.labels[order] + 1, table.sizes, files.image_size, kind,
                              y["boxes"].shape[1], len(names))
    return files, {**y, "masks" if kind == "instances" else "segmentation_masks": drawn}


def _tell_keypoints(source: str, listed: list[Any]) -> None:
    """A person_keypoints file reads as a detection file: say that its keypoints are not."""
    if any(isinstance(a, dict) and a.get("num_keypoints") for a in listed):
        warn(f"{source} holds keypoints (a person_keypoints file), which from_coco does not "
             f"read: its boxes and labels come back, its keypoints do not. For a pose model "
             f"read them with pycocotools, a (people * K, 3) row per image, their v=0 joints "
             f"set to -1, and pass y={{'keypoints': ...}} with keypoint_format='xy' "
             f"(docs/detection.md).")


def _read(source: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON, from disk or (a URL) through the remote layer, with its retries."""
    remote = remote_for(source, storage_options)
    try:
        if remote is not None:
            data = json.loads(remote.fetch(source))
        else:
            with open(source, encoding="utf-8") as f:
                data = json.load(f)
    except OSError as exc:
        raise ArgumentError(f"{source}: cannot read the COCO file ({exc}). Fix: pass the "
                            f"path of an instances_*.json.") from None
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"{source} is not JSON ({exc}). Fix: pass a COCO instances "
                            f"file, or repair this one.") from None
    lacking = [k for k in ("images", "categories")
               if not isinstance(data, dict) or not isinstance(data.get(k), list)]
    if lacking:
        raise ArgumentError(
            f"{source} is not a COCO detection file: it has no {' or '.join(lacking)} list. "
            f"Fix: pass an instances_*.json (a captions file holds no categories).")
    return dict(data)


def _categories(source: str, categories: list[Any], class_names: Sequence[str] | None
                ) -> tuple[dict[int, tuple[int, str]], list[str]]:
    """Category id -> (class index (-1: left out of ``class_names``), name), and the class
    names."""
    defined: dict[int, str] = {}
    for c in categories:
        try:
            cid, name = int(c["id"]), str(c["name"])
        except (KeyError, TypeError, ValueError):
            raise ArgumentError(f"{source}: a category without an int `id` and a `name`: "
                                f"{c!r}. Fix: give each category both.") from None
        if cid in defined:
            raise ArgumentError(f"{source} defines category id {cid} twice ({defined[cid]!r}"
                                f", {name!r}). Fix: give each category its own id.")
        defined[cid] = name
    if class_names is None:  # indexed by id: two categories may share a name
        names = [defined[cid] for cid in sorted(defined)]
        shared = {n: [cid for cid in sorted(defined) if defined[cid] == n]
                  for n, count in Counter(names).items() if count > 1}
        if shared:
            said = ", ".join(f"{n!r}: ids {ids}" for n, ids in shared.items())
            warn(f"{source}: categories share names ({said}); each id keeps its own index, "
                 f"in id order, so class_names repeats them. Fix: "
                 f"class_names=[...] with each name once merges the categories of a name into "
                 f"one index.")
        return {cid: (i, defined[cid]) for i, cid in enumerate(sorted(defined))}, names
    names = [str(n) for n in class_names]  # by name: categories that share one share it
    twice = [name for name, count in Counter(names).items() if count > 1]
    if twice:
        raise ArgumentError(
            f"`class_names` names {twice[0]!r} twice, so its boxes could take either index. "
            f"Fix: name each class once (the categories of a name share its index), or "
            f"class_names=None for one index per category id.")
    index = {name: i for i, name in enumerate(names)}
    return {cid: (index.get(name, -1), name) for cid, name in defined.items()}, names


def _images(source: str, images: list[Any], folder: str) -> tuple[B.BoxTable, np.ndarray]:
    """The images the file lists, in its order, without their boxes yet; their ids."""
    paths, ids, sizes = [], [], []
    for entry in images:
        try:
            iid, name = int(entry["id"]), str(entry["file_name"])
            width, height = entry.get("width") or 0, entry.get("height") or 0
            sizes.append((int(height), int(width)))
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ArgumentError(f"{source}: an image without an int `id` and a `file_name`: "
                                f"{str(entry)[:200]}. Fix: give each image both.") from None
        paths.append(f"{folder.rstrip('/')}/{name}" if protocol_of(folder) else
                     os.path.join(folder, name))
        ids.append(iid)
    if len(set(ids)) < len(ids):
        twice = next(i for i, n in Counter(ids).items() if n > 1)
        raise ArgumentError(f"{source} lists image id {twice} twice. Fix: one entry per "
                            f"image.")
    label = os.path.basename(source)
    table = B.BoxTable(paths, np.array(sizes, np.int64).reshape(-1, 2), np.zeros(0, np.int64),
                    np.zeros((0, 4)), np.zeros(0, np.int64),
                    lambda i: f"{label}, image id {ids[i]}")
    return table, np.array(ids, np.int64)


def _boxes(source: str, annotations: list[Any], table: B.BoxTable, image_ids: np.ndarray,
           ids: dict[int, tuple[int, str]], keep_crowd: bool) -> None:
    """Every annotation's box onto ``table``, in whole arrays (COCO's train set has 860,000);
    a bad one is found again, one by one, to be named."""
    try:
        flat = np.array([(a["image_id"], a["category_id"], *a["bbox"], a.get("iscrowd") or 0)
                         for a in annotations], np.float64).reshape(-1, 7)
    except (AttributeError, KeyError, TypeError, ValueError):
        for k, ann in enumerate(annotations):
            _refuse_bad(source, k, ann)
        raise ArgumentError(f"{source}: an annotation does not read as COCO's (image_id, "
                            f"category_id, bbox, iscrowd). Fix: repair it.") from None
    owner = _lookup(flat[:, 0], image_ids)
    categories = np.array(sorted(ids), np.int64)
    category = _lookup(flat[:, 1], categories)
    labels = np.array([ids[int(c)][0] for c in categories] + [-1], np.int64)[category]
    bad = (owner < 0) | (labels < 0) | ~np.isfinite(flat[:, 2:6]).all(1) | \
        (flat[:, 4:6] < 0).any(1)
    for k in np.nonzero(bad)[0][:1]:
        _refuse_bad(source, int(k), annotations[k], set(image_ids.tolist()), ids)
        raise ArgumentError(f"{source}: annotation {k} ({str(annotations[k])[:200]}) has an "
                            f"image_id or category_id that is not a whole number. Fix: "
                            f"repair it.")
    keep = (flat[:, 6] == 0) | keep_crowd
    x, y, w, h = flat[keep, 2:6].T
    table.owner, table.labels, table.annotation = owner[keep], labels[keep], np.flatnonzero(keep)
    table.boxes = np.stack([x, y, x + w, y + h], 1)


def _lookup(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The row of each value in ``keys`` (-1: not there)."""
    order = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys[order], values).clip(0, max(len(keys) - 1, 0))
    found = order[at] if len(keys) else np.zeros(len(values), np.int64)
    there = (keys[found] == values) if len(keys) else np.zeros(len(values), bool)
    return np.where(there, found, -1).astype(np.int64)


def _refuse_bad(source: str, k: int, ann: Any, image_ids: set[int] | None = None,
                ids: dict[int, tuple[int, str]] | None = None) -> None:
    """Raise the error annotation ``k`` earns, if any (the checks of ``_boxes``, one by
    one, to name it)."""
    try:
        iid, cid = int(ann["image_id"]), int(ann["category_id"])
        bbox = [float(v) for v in ann["bbox"]]
        float(ann.get("iscrowd") or 0)
    except (AttributeError, KeyError, TypeError, ValueError):
        raise ArgumentError(
            f"{source}: annotation {k} has no int `image_id`, int `category_id` and numeric "
            f"`bbox`: {str(ann)[:200]}. Fix: repair or remove it.") from None
    where = f"{source}: annotation {ann.get('id', k)}"
    if len(bbox) != 4:
        raise ArgumentError(f"{where} has bbox {bbox}, not [x, y, width, height]. Fix: repair "
                            f"or remove it.")
    if image_ids is not None and iid not in image_ids:
        raise ArgumentError(f"{where} is of image id {iid}, which `images` does not list. "
                            f"Fix: add the image, or remove the annotation.")
    if ids is not None and cid not in ids:
        raise ArgumentError(
            f"{where} has category id {cid}, which `categories` does not define (ids "
            f"{sorted(ids)[:12]}). Fix: add the category, or remove the annotation.")
    if ids is not None and ids[cid][0] < 0:
        raise ArgumentError(
            f"{where} has category id {cid} ({ids[cid][1]!r}), which is not among "
            f"`class_names`. Fix: add {ids[cid][1]!r} to class_names, or pass "
            f"class_names=None for every category.")
    if not all(map(math.isfinite, bbox)) or bbox[2] < 0 or bbox[3] < 0:
        raise ArgumentError(f"{where} has bbox {bbox}, not [x, y, width, height] with a "
                            f"size of zero or more. Fix: repair or remove it.")
