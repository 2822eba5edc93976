"""``shuffle="blocks"``: an epoch order that reads a few storage shards at a time.

The exact shuffle (``schedule.permutation``) visits records anywhere in the dataset, so a
source in a bucket pays about one ranged request per record, every epoch. This order keeps
the records of a batch within ``shuffle_window`` shards: each epoch permutes the shards, cuts
that order into windows of ``shuffle_window`` shards, and shuffles the records inside each
window (as MosaicML Streaming's py1e or FFCV's quasi-random order). A reader then needs only a
window's shards at a time (a disk cache of ``shuffle_window`` shards per host), and a shard is
read in a few large requests.

The order is planning, as the exact one: a function of (seed, epoch) and the source's layout
alone (``Blocks``), computed the same in every worker and on every host, so exactly-once
epochs, determinism for any worker count, resume and sharding hold unchanged. This module also
resolves the layout (``blocks``): which sources have one, and what is refused
(``shuffle_window`` itself is checked in ``config.checks``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ArgumentError, got
from .. import source

BLOCKS = "blocks"  # the value of `shuffle` that asks for this order
DEFAULT_WINDOW = 8  # shards per window: why this default, see docs/determinism.md


@dataclass(frozen=True, eq=False)
class Blocks:
    """The layout the order permutes: records ``bounds[s]:bounds[s + 1]`` lie in storage
    shard ``s`` (a run of consecutive records in one shard), ``window`` shards shuffled
    together. Truthy, as ``shuffle=True``: the engine plans shuffled epochs."""

    bounds: np.ndarray  # int64, strictly increasing from 0 to n: one entry per shard, plus n
    window: int  # shards whose records are shuffled together (>= 1)

    @property
    def shards(self) -> int:
        return len(self.bounds) - 1

    def fingerprint(self) -> dict[str, Any]:
        """What a saved state must match: the window and the layout (as a checksum)."""
        return {"window": self.window, "shards": self.shards,
                "layout_crc32": zlib.crc32(np.ascontiguousarray(self.bounds).tobytes())}

    def __repr__(self) -> str:
        return f"Blocks(window={self.window}, shards={self.shards})"


def permutation(rng: np.random.Generator, order: np.ndarray, blocks: Blocks) -> None:
    """Fill ``order`` (length n) with one epoch of the blocks order, drawn from ``rng``: the
    shards permuted, then the records of each window of ``blocks.window`` shards shuffled.

    O(n), in place, in the dtype of ``order`` (int32 while n fits): each worker keeps a few
    epochs' orders, as for the exact shuffle.
    """
    sizes = np.diff(blocks.bounds)
    shards = rng.permutation(blocks.shards)
    # Record positions: the shards' ranges laid end to end in the permuted shard order.
    starts = blocks.bounds[:-1][shards]
    lengths = sizes[shards]
    ends = np.cumsum(lengths)
    order[:] = np.arange(len(order), dtype=order.dtype)
    order += np.repeat(starts - (ends - lengths), lengths).astype(order.dtype)
    for lo in range(0, blocks.shards, blocks.window):
        hi = min(lo + blocks.window, blocks.shards)
        first = int(ends[lo] - lengths[lo])
        rng.shuffle(order[first:int(ends[hi - 1])])  # a view: shuffled in place


def layout(x: Any, n: int) -> np.ndarray | None:
    """The shard bounds ``x`` reports (``x.shard_bounds()``, e.g. ``ImageRecords``'), checked;
    None for data with no shards (arrays, image files)."""
    report = source.shard_bounds(x)
    if report is None:
        return None
    bounds = np.asarray(report, dtype=np.int64)
    if bounds.ndim != 1 or len(bounds) < 2 or bounds[0] != 0 or bounds[-1] != n or \
            (np.diff(bounds) <= 0).any():
        raise ArgumentError(
            f"`x.shard_bounds()` must return increasing record bounds from 0 to {n} (one per "
            f"shard, then {n}); received {got(bounds)}. Fix: return e.g. np.array([0, 100, "
            f"200, ..., {n}]) for shards of 100 records."
        )
    return bounds


def blocks(shuffle: Any, window: int | None, x: Any, n: int, weighted: bool) -> Blocks | None:
    """The layout ``shuffle="blocks"`` permutes, for data ``x`` of ``n`` records; None for any
    other ``shuffle``. Refused where the data has no shards (a plain array, image files, a
    ``.npy``: read a sample at a time anyway, a map's rows asked of the disk a task at a
    time) and under weighted sampling (a draw with replacement has no window to keep)."""
    if shuffle != BLOCKS:
        return None
    if weighted:
        raise ArgumentError(
            "`shuffle`=\"blocks\" reads the shards a few at a time, each sample once, but "
            "`sampling_weights` draws samples with replacement from the whole dataset. Fix: "
            "pass one of them (shuffle=True with sampling_weights)."
        )
    bounds = layout(x, n)
    if bounds is None:
        raise ArgumentError(
            f"`shuffle`=\"blocks\" permutes the shards of a source stored in shards, but `x` "
            f"({type(x).__name__}) has none (no `shard_bounds()`). Fix: pass shuffle=True "
            f"(the exact shuffle: arrays and image files are read a sample at a time anyway, "
            f"and a memory-mapped .npy's rows one request each), or read "
            f"record shards with shmaug.ImageRecords (from_tfrecord, from_webdataset, ...)."
        )
    return Blocks(bounds, DEFAULT_WINDOW if window is None else window)
