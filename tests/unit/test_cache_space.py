"""The disk cache's eviction seam (``shmaug.sources.cache._space``): every policy is given the
folder's view, and ``farthest`` ranks the entries once per margin, not per write, under a
bound that stays hard. Real folders, real files; no server, no process."""

from __future__ import annotations

import os
import random

import shmaug.sources.cache._space as CS
from shmaug.sources.cache._space import MARGIN, Entry, Folder, Space, farthest, lru


def entry(folder, k: int, size: int, used: float = 1000.0) -> str:
    path = os.path.join(folder, f"{k:032x}-{'0' * 16}.data")
    with open(path, "wb") as f:
        f.write(b"x" * size)
    os.utime(path, (used, used))
    return path


def written(space: Space, folder, k: int, size: int) -> None:
    """Reserve room for entry ``k`` and complete it, as a download does."""
    final = os.path.join(folder, f"{k:032x}-{'0' * 16}.data")
    assert space.reserve(final, size) is None
    space.complete(final)


def on_disk(folder) -> int:
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)
               if n.endswith((".data", ".part")))


class Untouchable(dict):
    """Entries a policy must not walk one by one."""

    def values(self):
        raise AssertionError("the policy walked every entry")
    __iter__ = values


def test_a_policy_is_given_the_folders_view_and_lru_reads_its_kept_order(tmp_path,
                                                                        monkeypatch):
    """Space ran ``lru`` from its kept order, and gave any other policy a list of every entry
    (``is lru``): a policy wrapping lru (to log its choice) sorted them all for each write."""
    monkeypatch.setattr(CS, "LIST_EACH_BELOW", 0)  # a large folder: its view kept a while,
    monkeypatch.setattr(CS, "RESCAN_SHARE", 10**9)  # however long the test waits under load
    rng = random.Random(0)
    for k in range(40):
        entry(tmp_path, k, 10, 1000.0 + rng.random() * 1000)
    given: list[Folder] = []

    def logged(folder: Folder, need: int) -> list[Entry]:
        given.append(folder)
        return lru(folder, need)

    space = Space(str(tmp_path), 400, evict=logged)
    seen = space._listed()
    expected = {e.path for e in lru(list(seen.entries.values()), 25)}  # 3 entries: 30 bytes
    seen.entries = Untouchable(seen.entries)
    written(space, tmp_path, 100, 25)
    assert given == [seen] and seen.limit == 400
    assert {p for p in expected if not os.path.exists(p)} == expected
    assert len(os.listdir(tmp_path)) == 40 - 3 + 1 + 1  # and the cache's own lock file
    assert seen.used == 400 - 30 + 25


def test_farthest_ranks_once_per_margin_and_the_bound_holds(tmp_path):
    """``farthest`` sorted every entry for each write at the bound: with 200,000 image files,
    a second a write. It frees a margin below the bound (whole entries, farthest first), so
    the writes after it fit without a sort, and the bound is never passed."""
    count, size, limit = 160, 10, 1600
    rng = random.Random(1)
    ahead = {}  # path -> how far ahead its next use is: distinct, so the ranking is exact

    def next_use(path: str) -> float:
        calls[0] += 1
        return ahead[path]

    for k in range(count):
        ahead[entry(tmp_path, k, size)] = rng.random()
    calls = [0]
    space = Space(str(tmp_path), limit, evict=farthest(next_use))
    seen = space._listed()
    writes = 120
    for j in range(writes):
        final = os.path.join(tmp_path, f"{10**6 + j:032x}-{'0' * 16}.data")
        ahead[final] = rng.random()
        before = set(seen.entries)
        written(space, tmp_path, 10**6 + j, size)
        gone = {p for p in before if p not in seen.entries}
        kept = before - gone
        if gone:  # Belady's rule: every entry evicted is used later than every one kept
            assert min(ahead[p] for p in gone) > max(ahead[p] for p in kept)
            assert sum(size for _ in gone) <= size + limit // MARGIN
        assert seen.used <= limit and on_disk(tmp_path) <= limit
    sorts = calls[0] / count
    assert sorts <= writes / (limit // MARGIN // size) + 1, f"{sorts:.0f} sorts of every entry"


def test_the_margin_takes_only_whole_entries_that_fit_in_it(tmp_path):
    """A cache of two large shards: a write that needs one gone evicts one, never both
    (the margin is a 32nd of the bound, not a shard)."""
    near, far = entry(tmp_path, 1, 50), entry(tmp_path, 2, 50)
    space = Space(str(tmp_path), 100, evict=farthest({near: 1.0, far: 9.0}.__getitem__))
    written(space, tmp_path, 3, 50)
    assert os.path.exists(near) and not os.path.exists(far)


def test_policies_rank_a_plain_list_of_entries_too():
    entries = [Entry("a", 10, 3.0), Entry("b", 10, 1.0), Entry("c", 10, 2.0)]
    assert [e.path for e in lru(entries, 15)] == ["b", "c"]
    assert [e.path for e in farthest({"a": 1.0, "b": 5.0, "c": 3.0}.get)(entries, 15)] == [
        "b", "c"]
    assert lru(entries, 0) == [] and farthest(dict.fromkeys("abc", 1.0).get)(entries, 0) == []
