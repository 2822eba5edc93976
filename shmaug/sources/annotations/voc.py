"""Pascal VOC detection annotations: a folder of XML files (``Annotations/``), one per image,
over the image folder (``JPEGImages/``), read with the standard library's ``xml.etree``.

Each file gives the image's ``filename``, its ``size`` and its ``object`` elements (``name``,
``difficult``, ``bndbox`` with ``xmin``, ``ymin``, ``xmax``, ``ymax``). VOC's box corners are
1-based pixel indices, both ends inside the box; they become pixel edges as detectron2 reads
them: ``(xmin - 1, ymin - 1, xmax, ymax)``.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import _boxes as B
from ..files import ImageFiles
from ..remote.bucket import remote_for
from ..images.settings import DEFAULT_IMAGE_SIZE
from ...errors import ArgumentError

_CORNERS = ("xmin", "ymin", "xmax", "ymax")


def from_voc(
    annotations: str | os.PathLike[str], images: str | os.PathLike[str], *,
    ids: str | os.PathLike[str] | Sequence[str] | None = None,
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE,
    bounding_box_format: str = "xyxy", max_boxes: int | None = None,
    class_names: Sequence[str] | None = None, keep_empty: bool = True,
    keep_difficult: bool = False, check_sizes: bool = True, color_mode: str | None = "rgb",
    interpolation: str = "bilinear", reduced_decode: bool = True,
    crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
) -> tuple[ImageFiles, dict[str, np.ndarray]]:
    """A Pascal VOC detection set as ``(files, y)`` for ``shmaug.Loader`` /
    ``shmaug.Sequence``, so a user with a VOC folder writes no XML parser of their own.

    ``y`` is ``{"boxes": float32 (N, max_boxes, 4), "labels": int64 (N, max_boxes)}``,
    padded with -1, the boxes scaled to ``image_size`` and written in
    ``bounding_box_format``; class index ``i`` is ``files.class_names[i]``.

    Args:
        annotations: the folder of XML files (``VOC2012/Annotations``).
        images: the folder their ``filename`` are in (``VOC2012/JPEGImages``).
        ids: which images, in order: a split file of one id per line
            (``ImageSets/Main/train.txt``) or a list of ids (file stems); None: every
            ``.xml`` of the folder, sorted by name.
        image_size: ``(height, width)`` the images are stretched to, the boxes with them;
            None keeps each image's size and the boxes in its pixels.
        bounding_box_format: Keras' name of the format the boxes are written in.
        max_boxes: the padded count; None: the largest count of any image (at least 1). An
            image with more boxes is refused, naming it.
        class_names: the class names in index order; None: the sorted names the files use,
            every XML file of the folder even with ``ids`` (so train and val, built apart,
            share one index; VOC's 20 classes come out in their usual order). An object of a
            class not named is refused, naming its file.
        keep_empty: keep the images without a box (after the filters); False drops them.
        keep_difficult: keep the objects marked ``difficult``; False (default) drops them,
            as VOC's evaluation ignores them and the reference detectors train without them.
        check_sizes: read each file's header (True, default: a header costs little next to
            a decode) to check it has the XML's ``size`` (an image without one is always
            read so).
        color_mode: as ``ImageFiles.from_paths``.
        interpolation: as ``ImageFiles.from_paths``.
        reduced_decode: as ``ImageFiles.from_paths``.
        crop_to_aspect_ratio: refused when True: the boxes are scaled by the plain stretch.
        pad_to_aspect_ratio: refused when True, likewise.

    Returns:
        ``(files, y)``: an ``ImageFiles`` and the boxes and labels, one row per file.

    Raises:
        ArgumentError: an XML file that does not parse or lacks a box corner; an id without
            its XML file; a class not in ``class_names``; a missing image file; or a setting
            the boxes cannot follow.

    Example:
        >>> files, y = from_voc("VOC2012/Annotations", "VOC2012/JPEGImages",
        ...                     ids="VOC2012/ImageSets/Main/train.txt", image_size=(512, 512))
    """
    fmt = B.check_settings(bounding_box_format, max_boxes, crop_to_aspect_ratio,
                           pad_to_aspect_ratio)
    folder, source = Path(annotations), os.fspath(annotations)
    parsed = [_parse(path, Path(images), keep_difficult) for path in _files(folder, ids)]
    if class_names is None:  # every file's, not only the split's: train and val built
        names = _folder_names(folder) if ids is not None else sorted(  # apart share indices
            {name for *_, objects in parsed for name, _ in objects})
    else:
        names = [str(n) for n in class_names]
    index = {name: i for i, name in enumerate(names)}
    owner, boxes, labels = [], [], []
    for i, (_, _, where, objects) in enumerate(parsed):
        unknown = [name for name, _ in objects if name not in index]
        if unknown:
            raise ArgumentError(
                f"{where} has an object of class {unknown[0]!r}, which is not in "
                f"`class_names` ({names[:8]}{'...' if len(names) > 8 else ''}). Fix: add it "
                f"to class_names, or pass class_names=None for every class the files use.")
        for name, box in objects:
            if box is not None:
                owner.append(i)
                boxes.append(box)
                labels.append(index[name])
    table = B.BoxTable([p for p, _, _, _ in parsed],
                    np.array([s for _, s, _, _ in parsed], np.int64).reshape(-1, 2),
                    np.array(owner, np.int64), np.array(boxes, np.float64).reshape(-1, 4),
                    np.array(labels, np.int64), lambda i: parsed[i][2])
    files, y, _ = B.assemble(source, table, names, image_size=image_size,
                             bounding_box_format=fmt, max_boxes=max_boxes,
                             keep_empty=keep_empty, check_sizes=check_sizes,
                             file_options=dict(color_mode=color_mode,
                                               interpolation=interpolation,
                                               reduced_decode=reduced_decode))
    return files, y


def _files(folder: Path, ids: str | os.PathLike[str] | Sequence[str] | None) -> list[Path]:
    """The XML files to read, in order."""
    if not folder.is_dir():
        raise ArgumentError(f"`annotations` {os.fspath(folder)!r} is not a folder. Fix: pass "
                            f"the folder of VOC's XML files (VOC2012/Annotations).")
    if ids is None:
        found = sorted(folder.glob("*.xml"))
        if not found:
            raise ArgumentError(f"{folder} holds no .xml file. Fix: pass the folder of VOC's "
                                f"XML files (VOC2012/Annotations).")
        return found
    stems = read_ids(ids, "ImageSets/Main/<split>.txt")
    paths = [folder / f"{stem}.xml" for stem in stems]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ArgumentError(f"{len(missing)} id(s) of `ids` have no XML file in {folder}, e.g. "
                            f"{missing[0].name}. Fix: pass the split that goes with this "
                            f"folder, or the ids it holds.")
    return paths


def read_ids(ids: str | os.PathLike[str] | Sequence[str], example: str,
             storage_options: dict[str, Any] | None = None) -> list[str]:
    """A split's ids (file stems), in order: a split file of one id per line (VOC's
    ``ImageSets``; a line's first word, as ``<id> <flag>`` files hold; a URL is read through
    the remote layer), or a list of them. ``example``: the split file an error suggests."""
    if not isinstance(ids, (str, os.PathLike)):
        return [str(s) for s in ids]
    source = os.fspath(ids)
    try:
        remote = remote_for(source, storage_options)
        text = remote.fetch(source).decode() if remote is not None else \
            Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArgumentError(f"`ids` {source!r}: cannot read the split file ({exc}). Fix: "
                            f"pass {example}, or a list of ids.") from None
    return [line.split()[0] for line in text.split("\n") if line.strip()]


def _folder_names(folder: Path) -> list[str]:
    """The sorted class names of every object of every XML file in ``folder`` (one that
    does not parse has none here: the split's own files are refused as they are read)."""
    names: set[str] = set()
    for path in folder.glob("*.xml"):
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError):
            continue
        names.update((n.text or "").strip() for n in root.iterfind("object/name"))
    return sorted(names - {""})


def _parse(path: Path, images: Path, keep_difficult: bool
           ) -> tuple[str, tuple[int, int], str, list[tuple[str, list[float] | None]]]:
    """One XML file: the image's path, its (height, width) (0 where the file gives none),
    the XML's path, and its objects as (class name, pixel-edge box, or None for a difficult
    object left out); every object is named, so ``class_names`` checks them all."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise ArgumentError(f"{path} does not parse as XML ({exc}). Fix: repair the file, or "
                            f"leave its id out (`ids`).") from None
    filename = (root.findtext("filename") or "").strip() or f"{path.stem}.jpg"
    size = root.find("size")
    width, height = (_number(path, size, key) if size is not None else 0
                     for key in ("width", "height"))
    objects: list[tuple[str, list[float] | None]] = []
    for obj in root.findall("object"):
        name = (obj.findtext("name") or "").strip()
        box = obj.find("bndbox")
        if not name or box is None:
            raise ArgumentError(f"{path} has an object without a `name` and a `bndbox`. Fix: "
                                f"repair the file.")
        x0, y0, x1, y1 = (_number(path, box, key, required=True) for key in _CORNERS)
        if x1 < x0 or y1 < y0:
            raise ArgumentError(
                f"{path} has a {name!r} box whose corners are inverted (xmin {x0:g}, ymin "
                f"{y0:g}, xmax {x1:g}, ymax {y1:g}). Fix: repair the file (xmin <= xmax, "
                f"ymin <= ymax).")
        difficult = _number(path, obj, "difficult") > 0
        keep = keep_difficult or not difficult
        objects.append((name, [x0 - 1, y0 - 1, x1, y1] if keep else None))
    return os.fspath(images / filename), (int(height), int(width)), os.fspath(path), objects


def _number(path: Path, element: ET.Element, key: str, required: bool = False) -> float:
    text = (element.findtext(key) or "").strip()
    if not text and not required:
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise ArgumentError(f"{path}: <{key}> holds {text!r}, not a number. Fix: repair the "
                            f"file.") from None
