"""The disk cache planned from the known order (``shmaug.sources.cache.plan``): the next use of
each shard, eviction farthest next use first, and downloads queued in the order of use. A
stand-in cache records what is asked of it; no process, no server, no thread."""

from __future__ import annotations

import numpy as np

from shmaug.sources.cache._space import Entry, farthest
from shmaug.sources.cache.plan import CachePlan

SHARDS = ("s3://b/0.tar", "s3://b/1.tar", "s3://b/2.tar", "s3://b/3.tar")
BOUNDS = np.array([0, 5, 10, 15, 20], np.int64)  # four shards of five records


class Cache:
    """What CachePlan uses of a DiskCache."""

    def __init__(self, cached=(), limit=None):
        self.limit = limit
        self.idents = {url: "5|etag" for url in SHARDS}
        self.cached = set(cached)
        self.wanted: list[str] = []
        self.space = type("Space", (), {"evict": None})()

    def path_of(self, url, ident=""):
        return f"/cache/{url[-5]}.data"

    def local(self, url):
        return self.path_of(url) if url in self.cached else None

    def want(self, url, remote):
        self.wanted.append(url)


def by_shards(*shards: int) -> np.ndarray:
    """An epoch reading whole shards in this order (shuffle="blocks" with a window of 1)."""
    return np.concatenate([np.arange(BOUNDS[s], BOUNDS[s + 1]) for s in shards]).astype(np.int32)


def test_the_next_use_of_a_shard_is_read_from_this_epochs_order_and_the_next():
    cache = Cache(cached=[SHARDS[0]])
    plan = CachePlan(SHARDS, BOUNDS, np.arange(4), cache, remote=None)
    plan(0, by_shards(2, 0, 3, 1), 5, by_shards(1, 3, 0, 2))  # shard 2 read, 0 in use
    uses = {s: plan.next_use(f"/cache/{s}.data") for s in range(4)}
    assert uses == {0: 0.0, 3: 5.0, 1: 10.0, 2: 20 - 5 + 15}
    assert plan.next_use("/cache/another-source.data") == float("inf")
    # Downloads in the order of use: shard 0 is cached, so 3 then 1, then 2 (read already
    # this epoch, last of the next).
    assert cache.wanted == [SHARDS[3], SHARDS[1], SHARDS[2]]
    # The cache evicts farthest next use first: another source's object, then shard 2.
    entries = [Entry(f"/cache/{s}.data", 10, 1.0) for s in range(4)]
    entries.append(Entry("/cache/another-source.data", 10, 9.0))
    assert [e.path for e in cache.space.evict(entries, 15)] == [
        "/cache/another-source.data", "/cache/2.data"]


def test_no_more_is_fetched_ahead_than_the_bound_holds():
    cache = Cache(limit=12)  # two shards of 5 bytes
    CachePlan(SHARDS, BOUNDS, np.arange(4), cache, remote=None)(
        0, by_shards(2, 0, 3, 1), 0, by_shards(1, 3, 0, 2))
    assert cache.wanted == [SHARDS[2], SHARDS[0]]


def test_the_end_of_an_epoch_fetches_the_first_shards_of_the_next():
    cache = Cache()
    CachePlan(SHARDS, BOUNDS, np.arange(4), cache, remote=None)(
        0, by_shards(2, 0, 3, 1), 15, by_shards(1, 3, 0, 2))  # the last shard in use
    assert cache.wanted == [SHARDS[1], SHARDS[3], SHARDS[0], SHARDS[2]]


def test_farthest_ranks_by_next_use_then_least_recently_used():
    entries = [Entry("a", 10, 3.0), Entry("b", 10, 1.0), Entry("c", 10, 2.0)]
    soon = {"a": 5.0, "b": 1.0, "c": 5.0}
    assert [e.path for e in farthest(soon.get)(entries, 15)] == ["c", "a"]
    assert farthest(soon.get)(entries, 0) == []
