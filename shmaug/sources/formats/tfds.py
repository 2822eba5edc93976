"""TensorFlow Datasets: which prepared shards and records a name and a split mean.

``from_tfds`` reads a prepared dataset's shards itself; this module asks TFDS only what its
metadata says: where the dataset lies (``prepared``), which features hold the image and the
label and the class names (``features``), and which records of which shard a split such as
"train[:90%]" takes (``instructions``, TFDS' own arithmetic, so the records are the ones TFDS
reads). It reads no record; ``records.py`` indexes the shards.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .shards import Scan
from ...errors import ArgumentError


def prepared(name: str, data_dir: str | os.PathLike[str] | None) -> tuple[str, Any]:
    """``(folder, DatasetInfo)`` of the prepared dataset ``name`` under ``data_dir``.

    Raises:
        ArgumentError: no prepared version of ``name`` there.
    """
    import tensorflow_datasets as tfds

    root = os.fspath(data_dir) if data_dir is not None else os.path.expanduser(
        os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets"))
    base, _, version = name.partition(":")
    folder = os.path.join(root, *base.split("/"))
    versions = []
    if os.path.isdir(folder):
        versions = sorted((v for v in os.listdir(folder)
                           if os.path.isfile(os.path.join(folder, v, "dataset_info.json"))),
                          key=lambda v: tuple(int(p) if p.isdigit() else -1 for p in v.split(".")))
    chosen = [v for v in versions if not version or v == version or
              _matches(v, version)]
    if not chosen:
        there = sorted(os.listdir(root)) if os.path.isdir(root) else []
        seen = f"versions {versions}" if versions else f"datasets {there[:20]}"
        raise ArgumentError(
            f"`name`={name!r} is not prepared under `data_dir`={root!r} ({seen} there). Fix: "
            f"prepare it first (tfds.builder({base!r}, data_dir=...).download_and_prepare()), "
            f"or pass the `data_dir` it was prepared in."
        )
    path = os.path.join(folder, chosen[-1])
    return path, tfds.builder_from_directory(path).info


def _matches(version: str, pattern: str) -> bool:
    return all(p in ("*", v) for p, v in zip(pattern.split("."), version.split(".")))


def features(info: Any, image_key: str | None, label_key: str | None
             ) -> tuple[str, str | None, tuple[str, ...] | None]:
    """``(image feature, label feature or None, class names or None)`` from the metadata."""
    import tensorflow_datasets as tfds

    top = dict(info.features.items())
    images = [k for k, f in top.items() if isinstance(f, tfds.features.Image)]
    labels = [k for k, f in top.items() if isinstance(f, tfds.features.ClassLabel)]
    image = image_key if image_key is not None else (images[0] if len(images) == 1 else None)
    if image not in images:
        raise ArgumentError(
            f"`image_key`={image!r} is not an Image feature of {info.name!r}; its features "
            f"are {list(top)}, of which Image: {images}. Fix: pass `image_key=` one of those."
        )
    label = label_key if label_key is not None else (labels[0] if len(labels) == 1 else None)
    if label is not None and label not in top:
        raise ArgumentError(
            f"`label_key`={label!r} is not a feature of {info.name!r}; its features are "
            f"{list(top)}. Fix: pass `label_key=` one of them."
        )
    feature = top.get(label) if label is not None else None
    names = tuple(feature.names) if isinstance(feature, tfds.features.ClassLabel) else None
    assert image is not None  # checked above: it is one of `images`
    return image, label, names


def instructions(info: Any, split: str, folder: str) -> list[tuple[str, int, int]]:
    """``(shard path, records to skip, records to take)`` per shard read by ``split``, in
    TFDS' order, as TFDS computes them.

    Raises:
        ArgumentError: a split that is not prepared, or a slice TFDS refuses.
    """
    try:
        found = info.splits[split].file_instructions
    except (KeyError, ValueError, AssertionError) as exc:
        raise ArgumentError(
            f"`split`={split!r} cannot be read from {folder!r}: {str(exc).rstrip('.')}. Fix: "
            f"pass one of the "
            f"prepared splits {sorted(info.splits)}, with TFDS' slices (e.g. 'train[:90%]')."
        ) from None
    out = []
    for f in found:
        take = int(f.take) if int(f.take) >= 0 else int(f.examples_in_shard) - int(f.skip)
        if take:
            out.append((os.fspath(f.filename), int(f.skip), take))
    return out


def sliced(instructions: list[tuple[str, int, int]], scan: Callable[[str], Any]) -> Scan:
    """``scan`` (a format's, of one local file) keeping of each shard only the records the
    split takes (``instructions``' skip and take)."""
    skips = {path: (skip, take) for path, skip, take in instructions}

    def scan_slice(path: str) -> tuple[list[int], list[int], list[Any]]:
        skip, take = skips[path]
        found = scan(path)
        return found[0][skip:skip + take], found[1][skip:skip + take], found[2][skip:skip + take]

    return scan_slice
