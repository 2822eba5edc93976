"""The disk cache planned from the known order: which shard to evict, which to fetch next.

The engine knows the order of this epoch and the next (a function of (seed, epoch)); a
source's reads see only the tasks queued in a worker's pipe. ``CachePlan`` is the source's
side of the hook through which a worker's ``SliceRunner`` hands it the order (``plan``): per
shard, its first and last position in this epoch and its first in the next. From them:

- **eviction** farthest next use first (``_space.farthest``, Belady's rule) instead of
  least recently used: a shard still to be read this epoch is kept over one read already,
  and of those read, the one the next epoch wants first is kept longest; objects of other
  sources sharing the folder go first;
- **fetches in the order of use**: the shards in use or next (``AHEAD_SHARDS``, by first use,
  those of the next epoch once this one's run out) are queued for download
  (``DiskCache.want``) before their records are asked for, as many as the bound holds, so
  under ``shuffle="blocks"`` the next window downloads while this one is read, and the next
  epoch's first shards during the end of this one.

Per process (a worker's, or the main process's with ``workers=0``); never pickled. What is
delivered does not change: only which bytes come from the disk and which from the bucket.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from ._space import farthest

if TYPE_CHECKING:
    from ..remote import Remote
    from .disk_cache import DiskCache

log = logging.getLogger(__name__)

AHEAD_SHARDS = 8  # shards in use or next queued for download per process (DOWNLOADS at once)
_NEVER = float("inf")


class CachePlan:
    """Eviction and fetches of ``cache`` for the ``shards`` of one table, from its layout
    (records ``bounds[r]:bounds[r + 1]`` lie in shard ``shard_of_run[r]``)."""

    def __init__(self, shards: tuple[str, ...], bounds: np.ndarray, shard_of_run: np.ndarray,
                 cache: DiskCache, remote: Remote) -> None:
        self._shards = shards
        self._bounds = bounds
        self._shard_of_run = shard_of_run
        self._cache = cache
        self._remote = remote
        # invariant: the cache entry of each shard, as the cache names it
        self._of_path = {cache.path_of(url, cache.idents.get(url, "")): s
                         for s, url in enumerate(shards)}
        self._key: int | None = None  # the epoch key the tables below were made for
        self._n = 0  # positions in that epoch
        self._first = self._last = self._following = np.zeros(0, np.int64)
        self._by_first = np.zeros(0, np.int64)  # shards used this epoch, by first use
        self._then = np.zeros(0, np.int64)  # shards used the next epoch, by first use
        self._position = 0  # the start of the task this process runs
        self._failed = False  # a failure of the plan is logged once per process

    def __call__(self, key: int, order: np.ndarray, position: int,
                 following: np.ndarray) -> None:
        """A task of epoch ``key`` (whose order is ``order``) begins at ``position``;
        ``following`` is the next epoch's order."""
        try:
            if key != self._key:
                self._first, self._last = self._uses(order)
                self._following = self._uses(following)[0]
                self._by_first = _by_first_use(self._first, len(order))
                self._then = _by_first_use(self._following, len(following))
                self._key, self._n = key, len(order)
            self._position = position
            # A fork may have rebuilt the cache's per-process state: set the policy each time.
            self._cache.space.evict = farthest(self.next_use)
            self._fetch_ahead()
        except Exception:  # a plan only saves requests: never a sample's failure
            if not self._failed:
                self._failed = True
                log.exception("the disk cache's plan failed; it reads as it would without")

    def _uses(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per shard, its first and last position in ``order`` (len(order) and -1: unused)."""
        n = len(order)
        shard = self._shard_of_run[np.searchsorted(self._bounds, order, side="right") - 1]
        first = np.full(len(self._shards), n, np.int64)
        last = np.full(len(self._shards), -1, np.int64)
        at = np.arange(n)
        np.minimum.at(first, shard, at)
        np.maximum.at(last, shard, at)
        return first, last

    def next_use(self, path: str) -> float:
        """Positions from now until the cache entry ``path`` is read again (0: in use; inf:
        not one of this table's shards, or not read this epoch nor the next)."""
        s = self._of_path.get(path)
        if s is None or self._key is None:
            return _NEVER
        p = self._position
        if self._last[s] >= p:
            return float(max(int(self._first[s]) - p, 0))
        following = int(self._following[s])
        return _NEVER if following >= self._n else float(self._n - p + following)

    def _fetch_ahead(self) -> None:
        """Queue the download of the shards in use or next, in the order of their first use
        (those cached or on their way are skipped by the cache), as many as the bound holds:
        one fetched further ahead would evict one needed sooner."""
        live = self._by_first[self._last[self._by_first] >= self._position]
        if len(live) < AHEAD_SHARDS:  # the end of the epoch: the next one's first shards
            live = np.concatenate([live, self._then[~np.isin(self._then, live)]])
        live = live[:AHEAD_SHARDS]
        room = self._cache.limit
        for s in live.tolist():
            url = self._shards[s]
            if room is not None:
                room -= int(self._cache.idents.get(url, "0|").split("|", 1)[0] or 0)
                if room < 0:
                    break
            if self._cache.local(url) is None:
                self._cache.want(url, self._remote)


def _by_first_use(first: np.ndarray, n: int) -> np.ndarray:
    """The shards an epoch of ``n`` positions reads (``first`` < n), by first use."""
    ranked = np.argsort(first, kind="stable")
    return ranked[first[ranked] < n]
