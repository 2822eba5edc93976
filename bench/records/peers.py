"""The contenders of ``bench.records``: the same JPEGs read from each record format, or as files.

Record i of every format is file i of the folder (its label is i, for the exactly-once check);
every contender delivers 224x224x3 uint8 with ``bench.files.peers``' flip + rotation + blur.
Each format is read by shmaug and by that format's own reader, as its guide writes it:

- ``shmaug_<format>``: ``shmaug.Loader`` over ``ImageRecords.from_<format>`` (workers read and
  decode records, fork; spawn for ArrayRecord, see ``build``), 2 workers.
- ``shmaug_files``: the same loader over ``ImageFiles`` (``bench.files``' ``shmaug``): the
  same images as files, the "within 10% of ImageFiles" reference.
- ``tf_tfrecord``: tf.data: ``from_tensor_slices(shards).interleave(TFRecordDataset,
  num_parallel_calls=AUTOTUNE)``, ``map(parse_single_example + decode_jpeg + the ops,
  num_parallel_calls=AUTOTUNE)``, ``batch``, ``prefetch(AUTOTUNE)``.
- ``grain_array_record``: Grain's ``ArrayRecordDataSource`` in the suite's Grain pipeline
  (``MapDataset.random_map`` + ``batch`` + ``mp_prefetch``, spawn): each worker parses the
  Example with ``tf.train.Example`` and runs ``pil_sample`` (PIL decode + ops).
- ``hf_tf_dataset``: ``Dataset.with_transform(PIL ops).to_tf_dataset(num_workers=2)``
  (``datasets`` decodes the ``Image`` column with PIL; its own worker processes).
- ``hf_torch``: a PyTorch ``DataLoader(num_workers=2)`` over ``Dataset.with_transform(PIL ops)``.
- ``wds_torch``: ``webdataset.WebDataset(shards).decode("pil").to_tuple("jpg", "cls")
  .map_tuple(PIL ops).batched`` in a PyTorch ``DataLoader(batch_size=None, num_workers=2)``:
  each worker streams its own shards.

``build`` raises ImportError when a contender's library (or its format's data) is missing,
reported as skipped. Nothing imports TensorFlow, Grain, torch or ``datasets`` until its
contender is built.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Iterator

import numpy as np

from bench.files import peers as files_peers
from bench.suite.peers._base import Base
from bench.suite.peers.shmaug_engine import ShmaugLoader

LABELS = {
    "shmaug_files": "shmaug ImageFiles (same images as files)",
    "shmaug_tfrecord": "shmaug ImageRecords.from_tfrecord",
    "tf_tfrecord": "tf.data TFRecordDataset (interleave, parse, decode_jpeg, AUTOTUNE)",
    "shmaug_array_record": "shmaug ImageRecords.from_array_record (spawn)",
    "grain_array_record": "Grain ArrayRecordDataSource + MapDataset + PIL (mp_prefetch, spawn)",
    "shmaug_huggingface": "shmaug ImageRecords.from_huggingface",
    "hf_tf_dataset": "datasets Dataset.to_tf_dataset(num_workers=2) + PIL",
    "hf_torch": "PyTorch DataLoader over the datasets Dataset + PIL (fork)",
    "shmaug_webdataset": "shmaug ImageRecords.from_webdataset",
    "wds_torch": "webdataset.WebDataset in a PyTorch DataLoader + PIL (fork)",
}
# The optional library a peer needs beyond its format's own (its child would only report it
# missing: a driver can say so without starting one).
NEEDS = {"hf_torch": ("torch",), "wds_torch": ("torch",), "grain_array_record": ("grain",)}
# Each format: shmaug's contender, then the format's own readers.
FORMATS = {
    "tfrecord": ("TFRecord", "shmaug_tfrecord", ("tf_tfrecord",)),
    "array_record": ("ArrayRecord", "shmaug_array_record", ("grain_array_record",)),
    "huggingface": ("Hugging Face datasets (Arrow)", "shmaug_huggingface",
                    ("hf_tf_dataset", "hf_torch")),
    "webdataset": ("WebDataset tars", "shmaug_webdataset", ("wds_torch",)),
}
FORMAT_OF = {c: f for f, (_, ours, peers) in FORMATS.items() for c in (ours, *peers)}


def shmaug_source(fmt: str, data: Any) -> Any:
    """``ImageRecords.from_<fmt>`` over the written ``data`` (files, or the dataset's folder)."""
    import shmaug

    size = (files_peers.SIZE, files_peers.SIZE)
    if fmt == "huggingface":
        import datasets

        return shmaug.ImageRecords.from_huggingface(datasets.load_from_disk(data), image_size=size)
    make = getattr(shmaug.ImageRecords, f"from_{fmt}")
    return make(data, image_size=size)


class ShmaugRecords(ShmaugLoader):
    """The engine's loader over one format's ``ImageRecords`` (built before the workers fork)."""

    def __init__(self, source: Callable[[], Any], *a: Any) -> None:
        self.make_source = source
        super().__init__(*a)

    def source(self) -> Any:
        return self.make_source()


def _tf_record(raw: Any) -> Any:
    import tensorflow as tf

    parsed = tf.io.parse_single_example(raw, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    return files_peers.tf_augment(parsed["image/encoded"], parsed["image/class/label"])


class TfRecords(Base):
    """tf.data's own TFRecord pipeline: C++ reading, parsing, decode and ops."""

    def __init__(self, shards: list[str], *a: Any) -> None:
        super().__init__(*a)
        import tensorflow as tf

        auto = tf.data.AUTOTUNE
        ds = tf.data.Dataset.from_tensor_slices(shards).interleave(
            tf.data.TFRecordDataset, cycle_length=len(shards), num_parallel_calls=auto)
        self.ds = ds.map(_tf_record, num_parallel_calls=auto).batch(self.bs).prefetch(auto)

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()


def example_sample(record: bytes, rng: np.random.Generator) -> np.ndarray:
    """One serialized ``tf.train.Example`` (an ArrayRecord's record) as a Grain user makes it:
    parsed by TensorFlow's proto, then ``pil_sample`` on its JPEG."""
    import tensorflow as tf

    example = tf.train.Example.FromString(record)
    jpeg = example.features.feature["image/encoded"].bytes_list.value[0]
    return files_peers.pil_sample(io.BytesIO(jpeg), rng)


def hf_transform(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``Dataset.with_transform``'s function: the decoded PIL images through the PIL ops."""
    rng = np.random.default_rng()
    return {"pixels": [files_peers.pil_ops(image, rng) for image in batch["image"]],
            "label": batch["label"]}


def _hf_dataset(folder: str) -> Any:
    import datasets

    return datasets.load_from_disk(folder).with_transform(hf_transform)


class HfTf(Base):
    """``datasets``' own Keras route: ``to_tf_dataset`` with its worker processes."""

    def __init__(self, folder: str, *a: Any) -> None:
        super().__init__(*a)
        self.ds = _hf_dataset(folder).to_tf_dataset(
            batch_size=self.bs, columns="pixels", label_cols="label", num_workers=self.workers)

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()


def _stack(items: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([s["pixels"] for s in items]), np.array([s["label"] for s in items])


def _stack_pairs(items: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([x for x, _ in items]), np.array([y for _, y in items])


def wds_dataset(shards: list[str], bs: int) -> Any:
    """WebDataset's pipeline as its guide writes it: decode, tuples, ops, batches per worker."""
    import webdataset as wds

    ds = wds.WebDataset(shards, shardshuffle=False, empty_check=False)
    return ds.decode("pil").to_tuple("jpg", "cls").map_tuple(_wds_ops, int).batched(
        bs, collation_fn=_stack_pairs, partial=True)


def _wds_ops(image: Any) -> np.ndarray:
    return files_peers.pil_ops(image, np.random.default_rng())


class TorchOver(Base):
    """A PyTorch ``DataLoader`` (fork, persistent workers) over a format's own dataset."""

    def __init__(self, dataset: Any, batched: bool, *a: Any) -> None:
        super().__init__(*a)
        import torch  # noqa: F401  -- ImportError is reported as "skipped"
        from torch.utils.data import DataLoader

        by = {"batch_size": None} if batched else {"batch_size": self.bs, "collate_fn": _stack}
        self.loader = DataLoader(dataset, num_workers=self.workers, persistent_workers=True,
                                 multiprocessing_context=self.method, **by)

    def epoch(self) -> Iterator[Any]:
        yield from self.loader

    def close(self) -> None:
        it = getattr(self.loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()


def build(name: str, paths: np.ndarray, ids: np.ndarray, bs: int, workers: int,
          data: dict[str, Any] | None = None) -> Base:
    """Contender ``name`` over ``data`` (``bench.records.write``'s made.json); ImportError when
    its library, or its format's data, is missing."""
    if name == "shmaug_files":
        return files_peers.build("shmaug", paths, ids, bs, workers)
    fmt = FORMAT_OF.get(name)
    if fmt is None:
        raise KeyError(f"no contender {name!r}; known: {sorted(LABELS)}")
    if fmt not in (data or {}):
        raise ImportError(f"no {fmt} data: {(data or {}).get('missing', {}).get(fmt)}")
    where = data[fmt]  # type: ignore[index]
    common = (paths, ids, bs)
    if name.startswith("shmaug_"):
        # ARRAY RECORD AND FORK: array_record 0.8.6's reader crashes (SIGSEGV) in a process
        # forked after its parent opened one, once that process has a second thread (every
        # shmaug worker has its watchdog), unless TensorFlow was imported first. Spawn.
        method = "spawn" if fmt == "array_record" else "fork"
        return ShmaugRecords(lambda: shmaug_source(fmt, where), *common,
                             files_peers.shmaug_augment(), np.uint8, workers, method)
    if name == "tf_tfrecord":
        return TfRecords(where, *common, None, np.uint8, workers, None)
    if name == "grain_array_record":
        import grain

        from bench.suite.peers.grain_loader import Grain

        source = grain.sources.ArrayRecordDataSource(where)
        return Grain(source, ids, bs, example_sample, np.uint8, workers, "spawn")
    if name == "hf_tf_dataset":
        return HfTf(where, *common, None, np.uint8, workers, None)
    dataset = _hf_dataset(where) if name == "hf_torch" else wds_dataset(where, bs)
    return TorchOver(dataset, name == "wds_torch", *common, None, np.uint8, workers, "fork")
