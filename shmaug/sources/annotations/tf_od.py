"""TFRecords in the TF Object Detection API's layout read into ``(records, y)``: an
``ImageRecords`` over the images and their boxes in Keras' layout, so a user whose detection
set is already in OD API shards keeps them as they are.

The layout (``object_detection/dataset_tools``' writers): per ``tf.train.Example``,
``image/encoded``, ``image/height``, ``image/width``, ``image/object/bbox/xmin``, ``xmax``,
``ymin``, ``ymax`` (float lists, fractions 0..1 of the image), ``image/object/class/label``
(int64 label-map ids, from 1: 0 is the background) and, optional, ``image/object/class/text``,
``image/object/difficult``, ``image/object/is_crowd``. The boxes are read by the records' own
index scan (``formats/tfrecord.py``, with ``Objects`` where a label key would be), once, in
the main process, with shmaug's own Example parser: no TensorFlow. The workers read and
decode the images as ``ImageRecords.from_tfrecord``'s do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _boxes as B
from .. import records as R
from ..formats import example as E
from ..formats import tfrecord as T
from ..images.settings import DEFAULT_IMAGE_SIZE, image_size_of
from ...errors import ArgumentError

HEIGHT, WIDTH = "image/height", "image/width"
CORNERS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
           "image/object/bbox/ymax")  # in the order of an xyxy box
LABEL = "image/object/class/label"
TEXT = "image/object/class/text"
DIFFICULT = "image/object/difficult"
CROWD = "image/object/is_crowd"
_FIX = ("write each record with the TF Object Detection API's features (its dataset_tools' "
        "create_*_tf_record scripts do; an image without objects has empty lists), or, for "
        "records without boxes, read them with ImageRecords.from_tfrecord.")
_EMPTY = (0, memoryview(b""))  # an absent list

@dataclass(frozen=True)
class Objects:
    """One record's objects as the index scan reads them (a ``tfrecord.FeatureRead``):
    ``(height, width, corners, ids, texts, difficult, crowd)``: ``corners`` float32 (k, 4)
    fractions (xmin, ymin, xmax, ymax), ``ids`` int64 (k,), ``texts`` the k class texts or
    (), ``difficult`` and ``crowd`` bool (k,) (False where the record has no such list)."""

    def __call__(self, found: T.Features, where: str) -> tuple[Any, ...]:
        height, width = (self._size(found, where, key) for key in (HEIGHT, WIDTH))
        corners = [E.float_values(*self._list(found, where, key, E.FLOATS))
                   for key in CORNERS]
        ids = E.int64_values(*self._list(found, where, LABEL, E.INT64S))
        texts = tuple(bytes(v).decode("utf-8", "replace")
                      for v in E.bytes_values(*found.get(TEXT, _EMPTY)))
        flags = [np.array(E.int64_values(*found.get(key, _EMPTY)), bool)
                 for key in (DIFFICULT, CROWD)]
        k = len(ids)
        for key, count in [*zip(CORNERS, map(len, corners)), (TEXT, len(texts) or k),
                           (DIFFICULT, len(flags[0]) or k), (CROWD, len(flags[1]) or k)]:
            if count != k:
                raise ArgumentError(
                    f"{where}: {key!r} holds {count} value(s) but {LABEL!r} {k}: one per "
                    f"object in each. Fix: {_FIX}")
        flags = [f if len(f) else np.zeros(k, bool) for f in flags]
        return height, width, np.stack(corners, 1), np.array(ids, np.int64), texts, *flags

    @staticmethod
    def _list(found: T.Features, where: str, key: str, kind: int) -> tuple[int, memoryview]:
        if key not in found:
            raise T.missing(repr(key), where, found, _FIX)
        got, message = found[key]
        if got not in (kind, 0) and len(message):  # (an empty list is any list's)
            raise ArgumentError(f"{where}: {key!r} holds a {E.KINDS[got]}, not a "
                                f"{E.KINDS[kind]}. Fix: {_FIX}")
        return kind, message

    @classmethod
    def _size(cls, found: T.Features, where: str, key: str) -> int:
        values = E.int64_values(*cls._list(found, where, key, E.INT64S))
        if len(values) != 1 or values[0] < 1:
            raise ArgumentError(f"{where}: {key!r} holds {values}, not one positive int (the "
                                f"image's size in pixels, which scales its boxes). Fix: "
                                f"{_FIX}")
        return values[0]


def from_tf_object_detection(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
    image_key: str = "image/encoded",
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE,
    bounding_box_format: str = "xyxy", max_boxes: int | None = None,
    class_names: Sequence[str] | None = None, keep_empty: bool = True,
    keep_difficult: bool = False, keep_crowd: bool = False,
    compression_type: str | None = None, storage_options: dict[str, Any] | None = None,
    color_mode: str | None = "rgb", interpolation: str = "bilinear",
    reduced_decode: bool = True, crop_to_aspect_ratio: bool = False,
    pad_to_aspect_ratio: bool = False,
) -> tuple[R.ImageRecords, dict[str, np.ndarray]]:
    """TF Object Detection API TFRecords as ``(records, y)`` for ``shmaug.Loader`` /
    ``shmaug.Sequence``, so shards written for the OD API train a Keras detector as they are.

    ``records`` reads the images in the shards' order (decoded and resized to ``image_size``
    in the workers, as ``ImageRecords.from_tfrecord``'s); ``y`` is ``{"boxes": float32 (N,
    max_boxes, 4), "labels": int64 (N, max_boxes)}``, padded with -1, the boxes scaled to
    ``image_size`` and written in ``bounding_box_format``. Class index ``i`` is the label
    map's id ``i + 1`` (the OD API counts from 1, 0 being the background), named
    ``records.class_names[i]``.

    Args:
        files: the shards: a list of paths, or a glob pattern (matches sorted); URLs are
            read as ``from_tfrecord`` reads them, with ``storage_options``.
        image_key: the feature holding the encoded image.
        image_size: ``(height, width)`` the images are stretched to, the boxes with them;
            None keeps each image's size and its boxes in its pixels.
        bounding_box_format: Keras' name of the format the boxes are written in.
        max_boxes: the padded count; None: the largest count of any image (at least 1). An
            image with more boxes is refused, naming it: boxes are never dropped silently.
        class_names: the names of ids 1, 2, ... in order; an id past them is refused. None:
            from ``image/object/class/text`` where the records have it, else the ids as
            text ("1", "2", ...).
        keep_empty: keep the images without a box (after the filters); False drops them.
        keep_difficult: keep the objects ``image/object/difficult`` marks; False (default)
            drops them, as ``from_voc`` does.
        keep_crowd: keep the objects ``image/object/is_crowd`` marks (one box around a
            crowd) as ordinary boxes; False (default) drops them, as ``from_coco`` does.
        compression_type: as ``ImageRecords.from_tfrecord``'s.
        storage_options: as ``ImageRecords.from_tfrecord``'s.
        color_mode: as ``ImageRecords``' settings.
        interpolation: as ``ImageRecords``' settings.
        reduced_decode: as ``ImageRecords``' settings.
        crop_to_aspect_ratio: refused when True: the boxes are scaled by the plain stretch.
        pad_to_aspect_ratio: refused when True, likewise.

    Returns:
        ``(records, y)``: an ``ImageRecords`` and the boxes and labels, one row per record.

    Raises:
        ArgumentError: no shard matches; a record without one of the layout's features (the
            shard, the record and the key named), with lists of unequal lengths, with boxes
            outside 0..1 (pixels) or inverted, or with an id ``class_names`` does not name;
            an image over ``max_boxes``; a setting the boxes cannot follow.
        ImageReadError: a record cut short or whose CRC does not match.

    Example:
        >>> records, y = from_tf_object_detection("pets/train-*.tfrecord",
        ...                                       image_size=(512, 512))
        >>> train = shmaug.Sequence(records, y, batch_size=16, augment=Compose(
        ...     [Maybe(Op("hflip"))], bounding_box_format="xyxy"))
    """
    fmt = B.check_settings(bounding_box_format, max_boxes, crop_to_aspect_ratio,
                           pad_to_aspect_ratio)
    size = image_size_of(image_size)
    found, scan, memory = R.tfrecord_scan(files, image_key, Objects(), compression_type,
                                          storage_options=storage_options)
    index = R.RecordIndex.scanned(found, scan, memory)
    source = f"{len(found.paths)} TFRecord file(s) {found.paths[:2]}"
    table, names = _table(source, index, class_names, keep_difficult, keep_crowd)
    rows, _, y = B.layout(source, table, image_size=size, bounding_box_format=fmt,
                          max_boxes=max_boxes, keep_empty=keep_empty)
    settings = dict(image_size=size, color_mode=color_mode, interpolation=interpolation,
                    reduced_decode=reduced_decode)
    records = R.records_of(
        index.take(rows), from_tf_object_detection, files,
        dict(image_key=image_key, bounding_box_format=fmt, max_boxes=max_boxes,
             class_names=class_names, keep_empty=keep_empty, keep_difficult=keep_difficult,
             keep_crowd=keep_crowd, compression_type=compression_type, **settings),
        settings, kind=T.TFRECORD.name, key=image_key, class_names=names)
    return records, y


def _table(source: str, index: R.RecordIndex, class_names: Sequence[str] | None,
           keep_difficult: bool, keep_crowd: bool) -> tuple[B.BoxTable, list[str]]:
    """Every record's objects as one ``BoxTable`` (pixel edges), less the difficult and
    crowd ones left out; the class names."""
    values = index.values
    counts = np.array([len(v[3]) for v in values], np.int64)
    owner = np.repeat(np.arange(len(values)), counts)
    corners = np.concatenate([v[2] for v in values]).astype(np.float64).reshape(-1, 4)
    ids = np.concatenate([v[3] for v in values]).astype(np.int64)
    difficult, crowd = (np.concatenate([v[k] for v in values]).astype(bool) for k in (5, 6))
    sizes = np.array([v[:2] for v in values], np.int64).reshape(-1, 2)
    table = B.BoxTable([""] * len(values), sizes, owner, corners, ids, index.what)
    B.refuse_not_fractions(source, corners, owner, index.what, "write the OD API's boxes "
                           "as fractions (pixels divided by the image's width and height).")
    table.boxes = corners * np.tile(sizes[owner][:, ::-1], 2)  # fractions -> pixel edges
    B.refuse_inverted(source, table, "write xmin <= xmax and ymin <= ymax.")
    texts = [t for v in values for t in (v[4] or (None,) * len(v[3]))]
    names = _names(source, table, texts, class_names)
    labels = B.class_indices(source, table, ids, 1, names)
    keep = (keep_difficult | ~difficult) & (keep_crowd | ~crowd)
    table.owner, table.boxes, table.labels = owner[keep], table.boxes[keep], labels[keep]
    return table, names


def _names(source: str, table: B.BoxTable, texts: list[str | None],
           class_names: Sequence[str] | None) -> list[str]:
    """The names of ids 1, 2, ...: ``class_names``, else each id's text (one per id; per
    box, None where its record has none), else the id itself."""
    if class_names is not None:
        return [str(n) for n in class_names]
    ids = table.labels
    named: dict[int, str] = {}
    for k, text in enumerate(texts):
        if text is None:
            continue
        known = named.setdefault(int(ids[k]), text)
        if known != text:
            raise ArgumentError(
                f"{source}: class id {int(ids[k])} is {known!r} in one record and {text!r} in "
                f"{table.where(int(table.owner[k]))} ({TEXT!r}). Fix: pass class_names (the "
                f"label map's names, in id order), or rewrite the records with one name per "
                f"id.")
    top = int(ids.max(initial=0))
    return [named.get(i, str(i)) for i in range(1, top + 1)]
