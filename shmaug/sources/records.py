"""Images stored as encoded bytes inside record files, as a sample source: TFRecord, TFDS,
ArrayRecord, WebDataset, Hugging Face datasets.

``ImageRecords`` drops in wherever ``ImageFiles`` does, with the same settings, skip rule,
labels and ``repr`` (``images/settings.py``) and the same worker-side reader
(``images/reader.py``); only where sample i's bytes come from differs. Each constructor indexes
its shards once, in the main process, by reading their headers (and the labels, which live in
the records): every record's shard, byte offset and length go into a ``RecordTable``
(``formats/table.py``), which a loader copies once into its shared memory. A worker then reads
record i with one positioned read, so the engine's exact shuffle, exactly-once epochs,
determinism for any worker count, resume and sharding hold unchanged, with no shuffle buffer.

Formats (each one module holding its scan and its read, ``formats/registry.py``):
``from_tfrecord`` (``formats/tfrecord.py``, ``formats/example.py``: no TensorFlow needed),
``from_tfds`` (``formats/tfds.py``: TFDS' metadata and split arithmetic, then its TFRecord or
ArrayRecord shards as above), ``from_array_record`` (``formats/array_record.py``: its own index,
through ``array_record``'s reader in each worker), ``from_webdataset`` (``formats/tar.py``) and
``from_huggingface`` (``formats/arrow.py``: byte ranges in the dataset's Arrow files;
``datasets`` and pyarrow are needed to build the source, not in the workers). An unreadable
image (a CRC that does not match, no image feature, bytes that are no image) raises
``ImageReadError`` naming the shard, the record and its byte offset; ``on_error="skip"``
replaces it by the next readable record of its class and a loader counts it, exactly as for
files. A shard that cannot be indexed (cut short, a header CRC that does not match, a record
without its label) is reported when the source is built. The scan (``RecordIndex``,
``tfrecord_scan``) and the source built from it (``records_of``) are shared with the
detection reader of TFRecord shards (``annotations/tf_od.py``), which reads each record's
boxes in the same one pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .images import folders as F
from .images import settings as O
from .formats import tar as _tar
from .formats import array_record as A
from .formats import tfrecord as T
from .formats.registry import RAW
from .formats.table import RecordTable
from .formats.shards import Scan as _Scan
from .formats.shards import Shards as _Shards
from .formats.shards import check_keywords as _check_keywords
from .formats.shards import expand as _expand
from .formats.shards import find as _find
from .formats.shards import local_only as _local_only
from .formats.shards import need as _need
from .remote.bucket import shown_options
from ..deferred import looks_encoded
from ..errors import ArgumentError, ArgumentTypeError, got, missing, warn

__all__ = ["ImageRecords"]


@dataclass(frozen=True, init=False, eq=False, repr=False)
class ImageRecords(O.ImageSource):
    """Images inside record shards, decoded in shmaug's workers.

    Build one with the constructor for the format, then pass it as ``x``: ``from_tfrecord``
    (TFRecord files of ``tf.train.Example``), ``from_tfds`` (a dataset TensorFlow Datasets
    prepared), ``from_array_record`` (ArrayRecord files), ``from_webdataset`` (WebDataset
    tars), ``from_huggingface`` (a Hugging Face ``datasets.Dataset``) or ``from_bytes``
    (encoded images in memory). ``records.labels``
    is the matching ``y`` (a loader takes it when ``y`` is not given).
    Settings are ``ImageFiles``' (``image_size``, ``color_mode``, ``interpolation``,
    ``on_error``, ``label_mode``, ``reduced_decode``, ``dtype``), with the same defaults and
    the same meaning; read-only once built (a frozen dataclass, as ``ImageFiles``).

    Attributes:
        table: where each record lies (shard, byte offset, length) and its class index.
        labels: per record, encoded as ``label_mode`` says (as ``ImageFiles.labels``), or None.
        class_names: class names; class indices index into it.
        load: ``load(index) -> uint8 array (H, W, C)``, run by the workers.

    Example:
        >>> records = shmaug.ImageRecords.from_tfrecord("train-*.tfrecord", image_size=(224, 224))
        >>> train = shmaug.Sequence(records, batch_size=32, augment=fn, shuffle=True)
    """

    # Its fields; the settings, labels and ``load`` are ``ImageSource``'s, set in __init__.
    table: RecordTable
    label_mode: str | None
    _origin: str  # the call that built it, for repr

    def __init__(self, table: RecordTable, labels: Any = None, class_names: Sequence[str] = (),
                 **settings: Any) -> None:
        if not isinstance(table, RecordTable):
            raise ArgumentTypeError(
                f"`table` must be a RecordTable; received {got(table)}. Fix: build "
                f"ImageRecords with from_tfrecord(...) or from_webdataset(...)."
            )
        _check_keywords(settings, {"channels"})
        for name, value in {**O.SETTINGS_DEFAULTS, "channels": 0, **settings}.items():
            object.__setattr__(self, name, value)
        self._settle()
        names = tuple(str(c) for c in class_names)
        encoded, classes = O.encoded_labels(labels, self.label_mode, len(table), names)
        known = table.classes
        if known is None or classes is None:
            if (known is None) != (classes is None):
                table = table.with_classes(classes)
        elif not np.array_equal(known, classes):
            table = table.with_classes(classes)
        for name, value in (("table", table), ("labels", encoded), ("class_names", names),
                            ("_origin", "")):
            object.__setattr__(self, name, value)
        self._new_reader(table)

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def from_tfrecord(
        cls, files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        image_key: str = "image/encoded", label_key: str | None = "image/class/label", *,
        class_names: Sequence[str] | None = None, compression_type: str | None = None,
        index_cache: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
        **settings: Any,
    ) -> ImageRecords:
        """TFRecord files of ``tf.train.Example``, read without TensorFlow.

        ``files`` is a list of paths or a glob pattern (matches sorted); paths may be URLs
        (``"s3://bucket/train-*"``, ``gs://``, ``https://``) read through fsspec with
        ``storage_options`` ([Object storage](../remote.md)): each shard is streamed once to
        index it, then workers read records with ranged requests, a task's together. Each
        record's image is the bytes feature ``image_key`` (JPEG, PNG, ... as ``ImageFiles``
        decodes); its label the feature ``label_key``: one int64 (a class index) or one bytes
        value (a class name; names sorted, or ``class_names`` to order them);
        ``label_key=None`` for no labels.
        ``compression_type``: None (default) tells plain from GZIP files by their bytes;
        "" or "GZIP" says which. GZIP files cannot be read at an offset: they are
        decompressed once, here, and held in memory (shared with the workers, not copied per
        worker); write large datasets uncompressed. ``index_cache``: a folder where each
        plain shard's index is kept and reused while the shard is unchanged (None: scan every
        time), with a record of the shards in a bucket (URLs, sizes, etags). ``cache_dir``: a
        local folder where shards in a bucket are downloaded whole, in the background, shared
        by the host's processes and reused across runs, bounded by ``cache_limit`` (bytes, or
        "50GB"; None: the disk). With both, the source is built and read without the bucket:
        when it is down, or offline (``SHMAUG_OFFLINE=1``) ([Object storage](../remote.md)).
        Other keyword arguments are the settings ``ImageFiles`` takes (``image_size``,
        ``color_mode``, ``on_error``, ...).

        Raises:
            ArgumentError: no file matches; a record without ``image_key`` or ``label_key``.
            RemoteError: the bucket cannot be reached (or ``SHMAUG_OFFLINE=1``), and the
                caches lack the record of the shards or some shards (named).
            ImageReadError: a record cut short or whose CRC does not match (file, record and
                byte offset named).

        Example:
            >>> records = ImageRecords.from_tfrecord("data/train-*", image_size=(224, 224))
            >>> records.class_names[:2], len(records)
            (('0', '1'), 1281167)
        """
        wanted = _wanted(label_key, settings)
        found, scan, memory = tfrecord_scan(files, image_key, wanted, compression_type,
                                            index_cache, storage_options, cache_dir,
                                            cache_limit)
        call = _call(cls.from_tfrecord, _shown(files, found.paths, "files"), dict(
            image_key=image_key, label_key=label_key, class_names=class_names,
            compression_type=compression_type, index_cache=index_cache,
            storage_options=shown_options(found.remote), cache_dir=_folder(cache_dir),
            cache_limit=cache_limit, **settings))
        return cls._indexed(found, scan, T.TFRECORD.name, call, settings, key=image_key,
                            label_key=wanted, class_names=class_names, memory=memory)

    @classmethod
    def from_array_record(
        cls, files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        image_key: str = "image/encoded", label_key: str | None = "image/class/label", *,
        class_names: Sequence[str] | None = None, **settings: Any,
    ) -> ImageRecords:
        """ArrayRecord files whose records are ``tf.train.Example``s (as TFDS and Grain
        write them); keys and labels as ``from_tfrecord``. ArrayRecord has its own index:
        each worker opens its own reader per shard and reads record i directly. Needs
        ``pip install "shmaug[arrayrecord]"``.

        Raises:
            ArgumentError: no file matches, one is not an ArrayRecord file, a record without
                ``image_key`` or ``label_key``.

        Example:
            >>> records = ImageRecords.from_array_record("data/train.array_record-*",
            ...                                          image_key="image", label_key="label")
        """
        _local_only("files", files, "ArrayRecord shards", "array_record's reader opens local "
                    "files only (no file object, no URL)", "write TFRecord shards, which "
                    "from_tfrecord reads from a bucket")
        _need("array_record", "arrayrecord")
        paths = _expand("files", files, "ArrayRecord files")
        wanted = _wanted(label_key, settings)
        call = _call(cls.from_array_record, _shown(files, paths, "files"), dict(
            image_key=image_key, label_key=label_key, class_names=class_names, **settings))
        return cls._indexed(_Shards(paths), lambda path: A.scan(path, image_key, wanted),
                            A.ARRAY_RECORD.name, call, settings, key=image_key, label_key=wanted,
                            class_names=class_names)

    @classmethod
    def from_tfds(
        cls, name: str, split: str = "train", data_dir: str | os.PathLike[str] | None = None, *,
        image_key: str | None = None, label_key: str | None = None, **settings: Any,
    ) -> ImageRecords:
        """A dataset TensorFlow Datasets has prepared, read straight from its shards.

        ``name`` as TFDS names it ("mnist", "mnist:3.0.1", "my_set/config"), found under
        ``data_dir`` (default: TFDS' own, ``~/tensorflow_datasets`` or ``$TFDS_DATA_DIR``);
        ``split`` with TFDS' slices ("train[:90%]", "train+test"): the records TFDS' own
        ``load(..., shuffle_files=False)`` gives, in the same order. The image and the label
        are the dataset's ``Image`` and ``ClassLabel`` features (``image_key`` / ``label_key``
        pick one where there are several), class names the ClassLabel's. TFRecord and
        ArrayRecord builds are both read. Needs ``pip install "shmaug[tfds]"`` (to read the
        metadata; the workers read the shards by hand).

        Raises:
            ArgumentError: the dataset or the split is not prepared under ``data_dir``; no
                image feature.

        Example:
            >>> records = ImageRecords.from_tfds("beans", split="train[:80%]",
            ...                                  image_size=(224, 224))
        """
        if data_dir is not None:
            _local_only("data_dir", data_dir, "a TFDS data folder", "shmaug's workers read "
                        "TFDS' shards as local files", "use tfds.load(..., data_dir=URL) "
                        "or copy the prepared dataset, then from_tfrecord(URLs of its "
                        ".tfrecord shards) with its label key")
        _need("tensorflow_datasets", "tfds")
        from .formats import tfds as _tfds

        folder, info = _tfds.prepared(name, data_dir)
        image, label, names = _tfds.features(info, image_key, label_key)
        instructions = _tfds.instructions(info, split, folder)
        array = "array" in str(info.file_format).lower()
        if array:
            _need("array_record", "arrayrecord")
        wanted = _wanted(label, settings)
        scan = _tfds.sliced(instructions, lambda path: (A.scan if array else T.scan_file)(
            path, image, wanted))
        call = _call(cls.from_tfds, name, dict(split=split, data_dir=data_dir,
                                               image_key=image_key, label_key=label_key,
                                               **settings))
        return cls._indexed(_Shards([p for p, _, _ in instructions]), scan,
                            (A.ARRAY_RECORD if array else T.TFRECORD).name, call, settings,
                            key=image, label_key=wanted, class_names=names,
                            skips=[skip for _, skip, _ in instructions])

    @classmethod
    def from_webdataset(
        cls, tar_files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        image_ext: str | Sequence[str] = "jpg", label_ext: str | None = "cls", *,
        class_names: Sequence[str] | None = None,
        index_cache: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
        **settings: Any,
    ) -> ImageRecords:
        """WebDataset tar shards: members ``key.jpg`` and ``key.cls`` make one sample.

        ``tar_files`` is a list of paths, a glob pattern (matches sorted) or WebDataset's
        braces (``"shards/train-{000..127}.tar"``); paths may be URLs read through fsspec
        with ``storage_options``, as ``from_tfrecord``'s. Shards must be uncompressed tars.
        ``image_ext``: the image member's extension, or several (a list, or "jpg;png" as
        WebDataset writes it), the first present is used. ``label_ext``: the
        label member, text holding a class index (WebDataset's ``.cls``) or a class name
        (names sorted, or ``class_names``); None for no labels. ``index_cache``,
        ``cache_dir`` and ``cache_limit``: as ``from_tfrecord``'s. Other keyword arguments are
        ``ImageFiles``' settings.

        Raises:
            ArgumentError: no shard matches, one is not an uncompressed tar, a sample has no
                image or no label member (shard, sample and key named).

        Example:
            >>> records = ImageRecords.from_webdataset("shards/train-{000..009}.tar",
            ...                                        image_size=(224, 224))
        """
        found = _find("tar_files", tar_files, "tar shards", storage_options, cache_dir,
                      cache_limit, _folder(index_cache))
        exts = tuple(e.lower().lstrip(".") for e in (
            image_ext.split(";") if isinstance(image_ext, str) else image_ext))
        wanted = _wanted(label_ext, settings)
        if wanted is not None:
            wanted = wanted.lower().lstrip(".")
        call = _call(cls.from_webdataset, _shown(tar_files, found.paths, "shards"), dict(
            image_ext=image_ext, label_ext=label_ext, class_names=class_names,
            index_cache=index_cache, storage_options=shown_options(found.remote),
            cache_dir=_folder(cache_dir), cache_limit=cache_limit, **settings))
        scan = _tar.indexer(found, exts, wanted, _folder(index_cache))
        return cls._indexed(found, scan, RAW.name, call, settings, label_key=wanted,
                            class_names=class_names)

    @classmethod
    def from_huggingface(
        cls, dataset: Any, image_column: str = "image", label_column: str | None = "label", *,
        class_names: Sequence[str] | None = None, **settings: Any,
    ) -> ImageRecords:
        """A Hugging Face ``datasets.Dataset`` with an ``Image`` column (encoded bytes).

        The workers read each row's image bytes straight from the dataset's Arrow files
        (``load_dataset``, ``load_from_disk``: nothing copied per worker; a dataset built in
        memory has its image bytes copied once into shared memory). The dataset's row order
        (after ``shuffle``, ``select``, ``train_test_split``) is kept. Labels come from
        ``label_column``: with a ``ClassLabel`` feature its names are the class names;
        otherwise ints (class indices) or strings (class names); None for no labels. Other
        keyword arguments are ``ImageFiles``' settings. Needs ``pip install
        "shmaug[huggingface]"``.

        Raises:
            ArgumentTypeError: not a Dataset (a DatasetDict: pick a split).
            ArgumentError: a column that is missing or not an image; a row whose image has no
                bytes.

        Example:
            >>> ds = datasets.load_from_disk("beans")["train"]
            >>> records = ImageRecords.from_huggingface(ds, image_size=(224, 224))
        """
        _need("datasets", "huggingface")
        import datasets

        from .formats import arrow

        _check_keywords(settings)
        arrow.check(dataset, image_column, label_column)
        shards, shard_of, numbers, offsets, lengths, blob = arrow.rows(dataset, image_column)
        labels, names = None, class_names
        if _wanted(label_column, settings) is not None:
            labels = dataset[label_column]
            feature = dataset.features[label_column]
            if isinstance(feature, datasets.ClassLabel) and class_names is None:
                names = feature.names
        classes, names = F.encode_names(labels, len(offsets), names)
        if classes is not None and not names:
            names = tuple(str(c) for c in range(int(classes.max()) + 1))
        table = RecordTable.build(shards, shard_of, offsets, lengths, classes, RAW.name, "",
                                  blob, (0,) if blob is not None else None, numbers)
        return cls(table, classes, names, **settings)._made(_call(
            cls.from_huggingface, O.Text(f"<Dataset of {len(offsets)} rows>"), dict(
                image_column=image_column, label_column=label_column, class_names=class_names,
                **settings)))

    @classmethod
    def from_bytes(
        cls, images: Sequence[bytes], labels: Any = None, *,
        class_names: Sequence[str] | None = None, **settings: Any,
    ) -> ImageRecords:
        """Encoded images held in memory (JPEG, PNG, WebP, ... bytes: a Parquet or database
        column, a fetched batch), copied once into one block the workers share, each decoded
        there as a file is (a decode-time crop included). ``labels``: per image a class index
        or a class name (names sorted, or ``class_names`` to order them), or None. Other
        keyword arguments are ``ImageFiles``' settings.

        Raises:
            ArgumentError: no images, or an empty one.
            ArgumentTypeError: an entry that is not bytes (a path, a decoded array).

        Example:
            >>> records = ImageRecords.from_bytes(df["jpeg"].tolist(), df["label"].tolist(),
            ...                                   image_size=(224, 224))
        """
        _check_keywords(settings)
        chunks = _encoded(images)
        lengths = np.array([memoryview(c).nbytes for c in chunks], np.int64)  # (bytes, not
        # items: a memoryview of int32s)
        offsets = np.cumsum(lengths) - lengths
        blob = np.frombuffer(b"".join(chunks), np.uint8)  # the one copy, shared at start
        classes, names = F.encode_names(labels, len(chunks), class_names)
        if classes is not None and not names:
            names = tuple(str(c) for c in range(int(classes.max()) + 1))
        table = RecordTable.build((BYTES_GIVEN,), np.zeros(len(chunks), np.int64), offsets,
                                  lengths, classes, RAW.name, "", blob, (0,))
        return cls(table, classes, names, **settings)._made(_call(
            cls.from_bytes, O.Text(f"<{len(chunks)} encoded images>"),
            dict(class_names=class_names, **settings)))

    @classmethod
    def _indexed(cls, where: _Shards, scan: _Scan, kind: str, call: str,
                 settings: dict[str, Any], *, key: str = "", label_key: str | None = None,
                 class_names: Sequence[str] | None = None, memory: T.Memory | None = None,
                 skips: list[int] | None = None) -> ImageRecords:
        """Scan every shard (a progress bar on long scans), build the table of format
        ``kind`` (``key``: its image feature), the source made by ``call``.

        ``label_key``: None for no labels; ``memory()``: after the scan, what it kept in
        memory (``formats.tfrecord.indexer``'s); ``skips``: per shard, the records its scan left
        out in front (a TFDS slice)."""
        _check_keywords(settings)  # before the scan, which may be long
        index = RecordIndex.scanned(where, scan, memory, skips)
        return cls._of_index(index, kind, call, settings, key=key, class_names=class_names,
                             labels=index.values if label_key is not None else None)

    @classmethod
    def _of_index(cls, index: RecordIndex, kind: str, call: str, settings: dict[str, Any], *,
                  key: str = "", labels: list[Any] | None = None,
                  class_names: Sequence[str] | None = None) -> ImageRecords:
        """The source of the records ``index`` holds, labelled by ``labels`` (one per
        record, or None), made by ``call``."""
        classes, names = F.encode_names(labels, len(index.offsets), class_names)
        if classes is not None and not names:  # int labels: classes 0..max, named by number
            names = tuple(str(c) for c in range(int(classes.max()) + 1))
        table = RecordTable.build(tuple(index.where.paths), index.shard, index.offsets,
                                  index.lengths, classes, kind, key, index.blob, index.bases,
                                  index.numbers, index.where.remote)
        return cls(table, classes, names, **settings)._made(call)

    def _made(self, call: str) -> ImageRecords:
        """This source, its ``repr`` showing ``call`` (the constructor that made it)."""
        object.__setattr__(self, "_origin", call)
        return self

    def shard_bounds(self) -> np.ndarray:
        """Record ``i`` lies in shard ``s`` for ``bounds[s] <= i < bounds[s + 1]``: what
        ``shuffle="blocks"`` permutes (a shard whose records are not consecutive counts once
        per run of them)."""
        return self.table.bounds()

    def __repr__(self) -> str:  # the records can number millions: the call and a summary
        made = self._origin or f"ImageRecords({self.table!r})"
        count = f"{len(self.table):,} records in {len(self.table.shards):,} shard(s)"
        return O.summary("ImageRecords", made, count, self.labels is not None,
                         self.class_names, self.output_shape)



# -- the index scan, shared with the detection readers (``annotations/tf_od.py``) -------------

@dataclass(frozen=True)
class RecordIndex:
    """What the index scan of a source's shards found, one entry per record in order: its
    shard, its number there, byte offset and length, and what the scan read of it (a label,
    or a detection record's boxes: ``values``). Compact arrays, not a Python object per
    record, but ``values``."""

    where: _Shards
    shard: np.ndarray  # int64 shard number (into where.paths)
    numbers: np.ndarray  # int64 record number in its shard (what messages name)
    offsets: np.ndarray  # int64
    lengths: np.ndarray  # int64
    values: list[Any]  # what the scan read of each record ([] when it read nothing)
    blob: Any  # ``T.Memory``'s: decompressed GZIP shards, or None
    bases: tuple[int, ...] | None  # per shard its start in ``blob``, or -1

    @classmethod
    def scanned(cls, where: _Shards, scan: _Scan, memory: T.Memory | None = None,
                skips: list[int] | None = None) -> RecordIndex:
        """Scan every shard (a progress bar on long scans). ``memory()``: after the scan,
        what it kept in memory (``formats.tfrecord.indexer``'s); ``skips``: per shard, the
        records its scan left out in front (a TFDS slice).

        Raises:
            ArgumentError: the shards hold no record.
        """
        from tqdm import tqdm

        paths = where.paths
        counts: list[int] = []
        offsets: list[np.ndarray] = []  # per shard: millions of records stay compact arrays
        lengths: list[np.ndarray] = []
        values: list[Any] = []
        with tqdm(paths, unit="shard", desc="index records", disable=len(paths) < 16 or None,
                  leave=False) as bar:
            for path in bar:
                found, sizes, read = scan(path)
                counts.append(len(found))
                offsets.append(np.array(found, np.int64))
                lengths.append(np.array(sizes, np.int64))
                values += read
        if not sum(counts):
            raise ArgumentError(
                f"The {len(paths)} shard(s) {paths[:3]} hold no record. Fix: pass the shards "
                f"that hold the data."
            )
        blob, bases = memory() if memory is not None else (None, None)
        shard = np.repeat(np.arange(len(paths), dtype=np.int64), counts)
        firsts = np.searchsorted(shard, np.arange(len(paths)))
        numbers = np.arange(len(shard)) - firsts[shard]
        if skips is not None:  # record numbers in the shard, past the records skipped
            numbers = numbers + np.array(skips, np.int64)[shard]
        return cls(where, shard, numbers, np.concatenate(offsets), np.concatenate(lengths),
                   values, blob, bases)

    def what(self, i: int) -> str:
        """How an error names record ``i``: its number and shard."""
        return f"record {int(self.numbers[i])} of {self.where.paths[int(self.shard[i])]!r}"

    def take(self, rows: np.ndarray) -> RecordIndex:
        """The records ``rows`` (sorted), each still named by its number in its shard."""
        values = [self.values[i] for i in rows] if self.values else []
        return RecordIndex(self.where, self.shard[rows], self.numbers[rows],
                           self.offsets[rows], self.lengths[rows], values, self.blob,
                           self.bases)


def tfrecord_scan(files: Any, image_key: str, read: str | T.FeatureRead | None,
                  compression_type: str | None, index_cache: Any = None,
                  storage_options: dict[str, Any] | None = None, cache_dir: Any = None,
                  cache_limit: int | str | None = None
                  ) -> tuple[_Shards, _Scan, T.Memory]:
    """``from_tfrecord``'s shards found (argument ``files``), its settings checked, and its
    scan, reading ``read`` of each record (a label key, or a detection reader's
    ``FeatureRead``): ``(shards, scan, memory)`` for ``RecordIndex.scanned``."""
    found = _find("files", files, "TFRecord files", storage_options, cache_dir, cache_limit,
                  _folder(index_cache))
    if T.SLOW_CRC:
        warn(f"Reading TFRecords checks each record's CRC-32C in pure Python, about 1,000 "
             f"times slower than in C (milliseconds per image): {T.SLOW_CRC_FIX}")
    O.check_choice("compression_type", compression_type, (None, "", "GZIP"),
                   "None tells plain from GZIP files by their bytes")
    scan, memory = T.indexer(found, image_key, read, compression_type, _folder(index_cache))
    return found, scan, memory


def records_of(index: RecordIndex, constructor: Callable[..., Any], files: Any,
               passed: dict[str, Any], settings: dict[str, Any], *, kind: str, key: str = "",
               class_names: Sequence[str] = ()) -> ImageRecords:
    """An ``ImageRecords`` without labels over the records ``index`` holds (a detection
    reader's, once it kept the images it keeps), its ``repr`` the call
    ``constructor(files, **passed)``."""
    call = _call(constructor, _shown(files, index.where.paths, "files"), passed)
    return ImageRecords._of_index(index, kind, call, settings, key=key, class_names=class_names)


# -- how a constructor reads its arguments ----------------------------------------------------

def _wanted(label_key: str | None, settings: dict[str, Any]) -> str | None:
    """The label key to scan for: none where ``label_mode=None`` asks for no labels."""
    return label_key if settings.get("label_mode", "int") is not None else None


def _folder(index_cache: str | os.PathLike[str] | None) -> str | None:
    return None if index_cache is None else os.fspath(index_cache)


BYTES_GIVEN = "<images in memory>"  # the one shard of ``from_bytes``, as messages name it


_PATH_ENDS = tuple(e.encode() for e in F.EXTENSIONS)  # a path's, as os.fsencode writes it


def _encoded(images: Any) -> list[Any]:
    """``images`` as a list of encoded images, each checked to be bytes (or what holds them:
    a memoryview, ``cv2.imencode``'s uint8 array) and not empty."""
    if callable(getattr(images, "to_pylist", None)):  # a pyarrow column of binary values
        images = images.to_pylist()
    if isinstance(images, (bytes, bytearray, str)) or not hasattr(images, "__len__"):
        raise ArgumentTypeError(
            f"`images` must be a list of encoded images, one bytes object each; received "
            f"{got(images)}. Fix: pass e.g. df['jpeg'].tolist(), or [image_bytes] for one.")
    if isinstance(images, np.ndarray) and images.dtype.kind == "S":
        raise ArgumentTypeError(
            f"`images` is a numpy array of fixed-width bytes ({images.dtype}), which drops "
            f"each image's trailing NUL bytes (a BMP's, a TIFF's end): they would not decode. "
            f"Fix: pass the bytes objects themselves, a list (or an array of dtype object).")
    chunks = list(images)
    if not chunks:
        raise ArgumentError("`images` is empty. Fix: pass at least one encoded image.")
    for i, chunk in enumerate(chunks):
        if missing(chunk):  # (a null in a column)
            raise ArgumentError(
                f"`images[{i}]` is missing ({chunk!r}): no image to decode. Fix: leave those "
                f"rows out, with their labels, e.g. df.dropna(subset=['image']).")
        if isinstance(chunk, dict) and isinstance(chunk.get("bytes"), (bytes, bytearray)):
            chunk = chunks[i] = chunk["bytes"]  # a Hugging Face Image, as Parquet holds it
        elif isinstance(chunk, dict) and chunk.get("path"):
            raise ArgumentTypeError(
                f"`images[{i}]` holds no bytes, only the path {chunk['path']!r} (a Hugging Face "
                f"Image stored by path). Fix: read the files by path, "
                f"shmaug.ImageFiles.from_paths([row['path'] for row in column], ...).")
        if isinstance(chunk, np.ndarray) and chunk.dtype == np.uint8 and (
                chunk.ndim == 1 or chunk.ndim == 2 and 1 in chunk.shape):  # cv2.imencode's
            chunk = chunks[i] = np.ascontiguousarray(chunk).reshape(-1)  # (n, 1)
        if isinstance(chunk, memoryview) and not chunk.c_contiguous:
            chunk = chunks[i] = chunk.tobytes()
        if not (isinstance(chunk, (bytes, bytearray, memoryview)) or isinstance(
                chunk, np.ndarray) and chunk.dtype == np.uint8 and chunk.ndim == 1):
            fix = ("for paths, ImageFiles.from_paths(paths, ...)" if isinstance(
                chunk, (str, os.PathLike)) else "for decoded images, pass the arrays as `x`"
                if isinstance(chunk, np.ndarray) else "encode it, e.g. "
                "cv2.imencode('.png', image)[1].tobytes()")
            raise ArgumentTypeError(
                f"`images[{i}]` must be an encoded image (bytes); received {got(chunk)}. "
                f"Fix: {fix}.")
        if isinstance(chunk, (bytes, bytearray)) and len(chunk) < 4096 and \
                not looks_encoded(bytes(chunk[:64])) and \
                bytes(chunk).lower().endswith(_PATH_ENDS):  # (os.fsencode(path))
            raise ArgumentTypeError(
                f"`images[{i}]` is a path ({bytes(chunk)!r}), not an encoded image. Fix: "
                f"read the files by path, shmaug.ImageFiles.from_paths(paths, ...).")
        if not memoryview(chunk).nbytes:  # type: ignore[arg-type]
            raise ArgumentError(
                f"`images[{i}]` is empty (0 bytes): no image to decode. Fix: leave it out, "
                f"with its label.")
    return chunks


def _shown(given: Any, paths: Sequence[str], noun: str) -> Any:
    """How ``repr`` shows the shards given: a pattern as written, a list by its length."""
    return given if isinstance(given, str) else O.Text(f"<{len(paths)} {noun}>")


def _call(constructor: Callable[..., Any], first: Any, passed: dict[str, Any]) -> str:
    """``constructor(first, name=value, ...)`` for ``repr``: each argument in ``passed`` that
    differs from its default, the defaults read from the constructor's own signature."""
    return f"{constructor.__name__}({first!r}{O.passed(passed, O.defaults_of(constructor))})"


if TYPE_CHECKING:  # mypy holds the record source to what ``shuffle="blocks"`` asks of it
    from ..engine import source as engine

    _AS_THE_ENGINE_SEES_IT: type[engine.Sharded] = ImageRecords
