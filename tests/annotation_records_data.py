"""Tiny detection sets inside record shards, written with each format's own tools: TF Object
Detection API TFRecords by ``tf.io.TFRecordWriter`` and ``tf.train.Example`` (the feature
layout of the OD API's ``dataset_tools``), Hugging Face datasets by ``Dataset.from_dict``
with ``Image`` and ``ClassLabel`` features, saved with ``save_to_disk``. Nothing is
downloaded.

Each image is black with one filled white rectangle per box (as ``annotations_data``'), so
a test can check that a box still frames its rectangle after the resize and augmentation.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

# (width, height, [(x, y, w, h, label-map id (from 1), difficult, crowd)]): pixel edges
OBJECTS = [
    (60, 40, [(10, 5, 20, 10, 2, 0, 0)]),
    (50, 50, [(0, 0, 10, 20, 1, 0, 0), (30, 30, 20, 20, 3, 0, 0), (5, 25, 10, 10, 2, 1, 0),
              (20, 4, 8, 8, 1, 0, 1)]),
    (40, 60, []),
    (30, 20, [(2, 2, 6, 6, 3, 0, 0)]),
]
NAMES = ["person", "cat", "zebra"]  # label-map ids 1, 2, 3


def pixels(width: int, height: int, boxes: list[tuple[Any, ...]]) -> np.ndarray:
    """Black ``width`` x ``height`` RGB, a white rectangle under each box."""
    image = np.zeros((height, width, 3), np.uint8)
    for x, y, w, h, *_ in boxes:
        image[int(y):int(y + h), int(x):int(x + w)] = 255
    return image


def png(width: int, height: int, boxes: list[tuple[Any, ...]]) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels(width, height, boxes)).save(out, format="PNG")
    return out.getvalue()


def od_example(width: int, height: int, boxes: list[tuple[Any, ...]], *, text: bool = True,
               drop: tuple[str, ...] = (), flags: bool = True,
               change: dict[str, Any] | None = None) -> bytes:
    """One Example in the OD API's layout; ``drop`` leaves features out, ``change`` replaces
    some (key -> tf.train.Feature)."""
    import tensorflow as tf

    def floats(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    def texts(values):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

    feature = {
        "image/encoded": texts([png(width, height, boxes)]),
        "image/format": texts([b"png"]),
        "image/height": ints([height]), "image/width": ints([width]),
        "image/object/bbox/xmin": floats([x / width for x, *_ in boxes]),
        "image/object/bbox/xmax": floats([(x + w) / width for x, _, w, *_ in boxes]),
        "image/object/bbox/ymin": floats([y / height for _, y, *_ in boxes]),
        "image/object/bbox/ymax": floats([(y + h) / height for _, y, _, h, *_ in boxes]),
        "image/object/class/label": ints([b[4] for b in boxes]),
    }
    if text:
        feature["image/object/class/text"] = texts([NAMES[b[4] - 1].encode() for b in boxes])
    if flags:
        feature["image/object/difficult"] = ints([b[5] for b in boxes])
        feature["image/object/is_crowd"] = ints([b[6] for b in boxes])
    for key in drop:
        del feature[key]
    feature.update(change or {})
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_od(folder: Path, images: list = OBJECTS, shards: int = 2, gzip_last: bool = False,
             **options: Any) -> list[str]:
    """``images`` dealt in order into ``shards`` TFRecord files (the first ones fuller)."""
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(images) // shards)
    paths = []
    for s in range(shards):
        gz = gzip_last and s == shards - 1
        path = str(folder / f"train-{s:05d}-of-{shards:05d}.tfrecord")
        with tf.io.TFRecordWriter(path, options="GZIP" if gz else None) as writer:
            for width, height, boxes in images[s * per:(s + 1) * per]:
                writer.write(od_example(width, height, boxes, **options))
        paths.append(path)
    return paths


def hf_dataset(images: list = OBJECTS, layout: str = "struct", fmt: str = "xywh",
               sizes: bool = True) -> Any:
    """A ``datasets.Dataset`` in memory: ``image``, ``objects`` (``bbox`` in ``fmt``:
    "xywh" pixels or "rel_xyxy"; ``category`` a ClassLabel of ids from 0) and, with
    ``sizes``, ``width`` and ``height``. ``layout``: "struct" (a ``Sequence`` of a dict, a
    struct of lists) or "list" (a ``List`` of dicts, a list of structs)."""
    import datasets

    def bbox(width, height, x, y, w, h):
        return [x, y, w, h] if fmt == "xywh" else [x / width, y / height, (x + w) / width,
                                                    (y + h) / height]

    box = datasets.Sequence(datasets.Value("float32"), length=4)
    label = datasets.ClassLabel(names=NAMES)
    rows = [[(bbox(width, height, *b[:4]), b[4] - 1) for b in boxes]
            for width, height, boxes in images]
    if layout == "struct":
        objects: Any = datasets.Sequence({"bbox": box, "category": label})
        values = [{"bbox": [b for b, _ in r], "category": [c for _, c in r]} for r in rows]
    else:
        objects = datasets.List({"bbox": box, "category": label})
        values = [[{"bbox": b, "category": c} for b, c in r] for r in rows]
    features = {"image": datasets.Image(), "objects": objects}
    data: dict[str, list[Any]] = {
        "image": [{"bytes": png(w, h, boxes), "path": None} for w, h, boxes in images],
        "objects": values}
    if sizes:
        features.update(width=datasets.Value("int32"), height=datasets.Value("int32"))
        data.update(width=[w for w, _, _ in images], height=[h for _, h, _ in images])
    return datasets.Dataset.from_dict(data, features=datasets.Features(features))


def hf_on_disk(folder: Path, dataset: Any, shards: int = 2) -> Any:
    """``dataset`` saved with ``save_to_disk`` and loaded back (memory-mapped Arrow files)."""
    import datasets

    dataset.save_to_disk(str(folder), num_shards=shards)
    return datasets.load_from_disk(str(folder))
