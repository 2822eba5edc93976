"""Hugging Face ``datasets``: where each row's encoded image lies in the dataset's Arrow files.

A ``datasets.Dataset`` keeps its rows in Arrow IPC stream files (``ds.cache_files``) that it
memory-maps; an ``Image`` column is a struct of ``bytes`` (the encoded file) and ``path``. In an
uncompressed Arrow file a binary column's values are one contiguous data buffer, so row j's
image is a plain byte range of the file: the buffer's position in the file plus the column's
value offsets. ``rows`` reads each file's layout once in the main process (pyarrow maps it, no
pixel is copied) and returns those byte ranges, which ``table.RecordTable`` keeps in shared
memory; workers then read a row with one positioned read (the ``registry.RAW`` format: the
bytes are the image), without pyarrow or ``datasets``. A
dataset held in memory (``Dataset.from_dict``, no cache files) has its image bytes copied once
into a block that the loader shares. The dataset's own row order (after ``shuffle``,
``select``, ``train_test_split``: an indices mapping) is applied. This module knows Arrow;
``records.py`` the source.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError, got

IN_MEMORY = "<dataset in memory>"


def _columns(table: Any, column: str, base: int, where: str
             ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per chunk of ``table[column]`` (an Image struct), the start and length of each row's
    bytes, as positions from the address ``base``."""
    import pyarrow as pa

    starts, lengths = [], []
    for chunk in table.column(column).chunks:
        values = chunk.field("bytes") if pa.types.is_struct(chunk.type) else chunk
        if values.null_count:
            first = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise ArgumentError(
                f"`image_column`={column!r} of {where}: row {first} (of its chunk) holds no "
                f"image bytes, only a path. Fix: embed the images "
                f"(`ds = ds.cast_column({column!r}, datasets.Image())` then "
                f"`ds.save_to_disk(...)` embeds local files), or read the paths with "
                f"shmaug.ImageFiles.from_paths."
            )
        kind = np.int64 if pa.types.is_large_binary(values.type) else np.int32
        _, offsets_buf, data_buf = values.buffers()
        offsets = np.frombuffer(offsets_buf, kind)[values.offset:values.offset + len(values) + 1]
        starts.append(data_buf.address - base + offsets[:-1].astype(np.int64))
        lengths.append(np.diff(offsets).astype(np.int64))
    return starts, lengths


def rows(dataset: Any, column: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray,
                                             np.ndarray, np.ndarray, np.ndarray | None]:
    """``(shards, shard of each row, row number in its shard, offsets, lengths, blob)`` of
    the dataset's image column, in the dataset's row order; ``blob`` holds the bytes of a
    dataset in memory (offsets then index it), else None.

    Raises:
        ArgumentError: a row without image bytes; cache files that do not hold the
            dataset's rows.
    """
    import pyarrow as pa

    total = dataset.data.num_rows
    files: list[str] = []
    shard_of, starts, lengths, blob = [], [], [], None
    for cached in dataset.cache_files:
        whole = pa.memory_map(cached["filename"]).read_buffer()
        table = pa.ipc.open_stream(whole).read_all()
        if column not in table.schema.names:
            continue  # an indices file (shuffle, select): applied below from `_indices`
        number = len(files)
        files.append(cached["filename"])
        s, n = _columns(table, column, whole.address, repr(files[-1]))
        starts += s
        lengths += n
        shard_of.append(np.full(table.num_rows, number, np.int64))
    if sum(len(s) for s in shard_of) != total:
        files = []  # the dataset was changed in memory since: read it from memory
        shard_of, starts, lengths = [], [], []
    if not files:
        values = dataset.data.column(column)
        s, n = _columns(dataset.data, column, 0, "the dataset")
        # Copy each chunk's bytes into one block; offsets become positions in it.
        parts, moved, base = [], [], 0
        for chunk, chunk_starts, chunk_lengths in zip(values.chunks, s, n):
            field = chunk.field("bytes") if pa.types.is_struct(chunk.type) else chunk
            data_buf = field.buffers()[2]
            first = int(chunk_starts[0] - data_buf.address) if len(chunk_starts) else 0
            end = int(chunk_starts[-1] + chunk_lengths[-1] - data_buf.address) if len(
                chunk_starts) else 0
            parts.append(np.frombuffer(data_buf, np.uint8)[first:end])
            moved.append(chunk_starts - data_buf.address - first + base)
            base += end - first
        starts, lengths = moved, n
        blob = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        shard_of = [np.zeros(total, np.int64)]
        files = [IN_MEMORY]
    shard = np.concatenate(shard_of) if shard_of else np.zeros(0, np.int64)
    offsets = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    sizes = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    firsts = np.searchsorted(shard, np.arange(len(files)))
    numbers = np.arange(len(shard)) - firsts[shard]
    indices = getattr(dataset, "_indices", None)  # a shuffle / select / split: the row order
    if indices is not None:
        order = indices.column(0).to_numpy()
        shard, numbers, offsets, sizes = shard[order], numbers[order], offsets[order], sizes[order]
    return tuple(files), shard, numbers, offsets, sizes, blob


def check(dataset: Any, image_column: str, label_column: str | None) -> None:
    """Refuse what ``from_huggingface`` cannot read: not a Dataset, a missing column, an
    image column that holds no encoded images.

    Raises:
        ArgumentTypeError, ArgumentError: naming the column, what it is and the fix.
    """
    import datasets

    if isinstance(dataset, datasets.DatasetDict):
        splits = list(dataset)
        raise ArgumentTypeError(
            f"`dataset` must be a datasets.Dataset (one split); received a DatasetDict of the "
            f"splits {splits}. Fix: index the DatasetDict: pick a split, e.g. "
            f"`dataset[{(splits or ['train'])[0]!r}]`."
        )
    if not isinstance(dataset, datasets.Dataset):
        raise ArgumentTypeError(
            f"`dataset` must be a datasets.Dataset; received {got(dataset)}. Fix: pass one "
            f"split of the dataset, e.g. `datasets.load_dataset(name, split='train')` (not "
            f"streamed: from_huggingface reads the dataset's files)."
        )
    features = dataset.features
    for arg, name in (("image_column", image_column), ("label_column", label_column)):
        if name is not None and name not in features:
            raise ArgumentError(
                f"`{arg}`={name!r} is not a column of the dataset; its columns are "
                f"{list(features)}. Fix: pass `{arg}=` one of them"
                + (", or `label_column=None`." if arg == "label_column" else ".")
            )
    image_feature = features[image_column]
    binary = isinstance(image_feature, datasets.Value) and image_feature.dtype in (
        "binary", "large_binary")
    if not isinstance(image_feature, datasets.Image) and not binary:
        raise ArgumentError(
            f"`image_column`={image_column!r} is not an image column: its feature is "
            f"{image_feature!r}. Fix: pass the column whose feature is datasets.Image() "
            f"(encoded image bytes)."
        )
