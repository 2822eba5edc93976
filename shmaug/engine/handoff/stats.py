"""The figures ``Loader.stats()`` reports, counted where batches are handed out.

Owns the consumer-side counters (images, batches, waits, prefetch hits, stand-ins for
unreadable samples) and the baseline of each worker's busy time. The busy time itself is
written by the workers into the pool's status block (``workers.status``); this only reads it.
"""

from __future__ import annotations

import time
from typing import Any

from ... import whole_decodes
from ..workers.status import StatusBlock
from .depth import Depth, queue_limited


class PassClock:
    """Seconds spent in passes: open from a pass's first ask to its end (``pause``), so the
    time between passes (a validation pass, the program after ``fit``) is left out."""

    __slots__ = ("span_s", "opened")

    def __init__(self) -> None:
        self.span_s = 0.0  # seconds of the passes paused since the start
        self.opened = 0.0  # perf_counter when the pass in progress opened (0: none)

    def open(self, at: float | None = None) -> bool:
        """Open at ``at`` (default: now) unless open already; whether this call opened it."""
        if self.opened:
            return False
        self.opened = time.perf_counter() if at is None else at
        return True

    def pause(self) -> float:
        """Close the pass in progress; when it had opened (0: none was open)."""
        opened, self.opened = self.opened, 0.0  # (read once: another thread may pause too)
        if opened:
            self.span_s += time.perf_counter() - opened
        return opened

    def seconds(self, opened: float | None = None) -> float:
        """Seconds of the passes so far (``opened``: the pass in progress's, read already)."""
        opened = self.opened if opened is None else opened
        return self.span_s + (time.perf_counter() - opened if opened else 0.0)


class Figures:
    """Counters since start or the last ``reset``; unreadable names since start (not reset)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool  # read for its status block, worker count and respawns
        # invariant: unreadable samples delivered so far, with their names (read at delivery:
        # a source's table may live in the store, unmapped at close)
        self.unreadable: dict[int, str] = {}
        # photos decoded whole since start (``shmaug.whole_decodes``): with workers=0, this
        # process's counts past this baseline; the reasons logged already
        self._whole_base = whole_decodes.counts()
        self._told: set[str] = set()
        self.reset()

    def reset(self) -> None:
        # short: batches asked for while the ring was short of a slot per worker (see
        # handoff.depth), short_misses: those among them the consumer waited for
        self.counters: dict[str, float] = dict(wait_s=0.0, images=0, batches=0, hits=0,
                                               skipped=0, short=0, short_misses=0)
        self.clock = PassClock()  # the time the figures divide: the passes'
        # Each worker's busy seconds at the opening of the pass in progress, and in the passes
        # paused since: a baseline, not a reset, since workers add to their busy seconds
        # without a lock, so a zero written here could be lost under a worker's
        # read-modify-write.
        self._busy_base = self._busy_now()
        self._busy_spent = [0.0] * len(self._busy_base)

    def _busy_now(self) -> list[float]:
        status = getattr(self._pool, "status", None)
        slots = getattr(self._pool, "capacity", getattr(self._pool, "workers", 0))
        return [0.0] * slots if status is None else StatusBlock(status).busy_s()[:slots]

    def asked(self, began: float) -> None:
        """A batch was asked for at ``began``: the throughput window opens at the first (after
        a pause, again)."""
        if self.clock.open(began):
            self._busy_base = self._busy_now()

    def pause(self) -> None:
        """The consumer finished a pass: the time until its next ask (a validation pass, the
        rest of the program after ``fit``) is not the pass's, and is left out."""
        opened = self.clock.pause()
        if opened:
            self._busy_spent = self._busy_within(opened)

    def _busy_within(self, opened: float) -> list[float]:
        """Each worker's busy seconds within the passes since the reset (``opened``: when
        the one in progress opened, 0 for none)."""
        if not opened:
            return self._busy_spent
        return [spent + now - base for spent, now, base in
                zip(self._busy_spent, self._busy_now(), self._busy_base)]


    def delivered(self, images: int, waited_s: float, hit: bool, short: bool = False) -> None:
        """A batch was handed out after ``waited_s``; ``short``: the ring was short of a
        slot per worker when it was asked for."""
        c = self.counters
        c["wait_s"] += waited_s
        c["images"] += images
        c["batches"] += 1
        c["hits"] += hit
        c["short"] += short
        c["short_misses"] += short and not hit

    def queue(self, chosen: Depth | None) -> dict[str, Any] | None:
        """``stats()["queue"]``: the ring's depth (``chosen``; None: no ring, nothing to
        augment) and whether it, not the workers, held the consumer up."""
        if chosen is None:
            return None
        c = self.counters
        return {"slots": chosen.slots, "why": chosen.describe(), "by": chosen.why,
                "bound_bytes": chosen.bound, "slot_waits": int(c["short"]),
                "limited": queue_limited(int(c["short_misses"]),
                                         int(c["batches"] - c["hits"]))}

    def stood_in(self, names: dict[int, str]) -> bool:
        """Count stand-ins delivered for unreadable samples; True for the first ever."""
        first = not self.unreadable
        self.counters["skipped"] += len(names)
        self.unreadable.update(names)
        return first

    def whole_decodes(self) -> dict[str, int]:
        """Photos decoded whole instead of their window since start, by reason."""
        status = getattr(self._pool, "status", None)
        counts = (tuple(n - b for n, b in zip(whole_decodes.counts(), self._whole_base))
                  if status is None else StatusBlock(status).whole_decodes())
        return whole_decodes.summary(counts)

    def untold_whole_decodes(self) -> list[str]:
        """The reasons for a whole decode seen since the last call, and never before."""
        new = [reason for reason in self.whole_decodes() if reason not in self._told]
        self._told.update(new)
        return new

    def report(self, workers: int, ready: int, decision: str | None,
               chosen: Depth | None = None) -> dict[str, Any]:
        c = self.counters
        opened = self.clock.opened
        elapsed = self.clock.seconds(opened)
        busy: list[float] = []
        if getattr(self._pool, "status", None) is not None:  # (within the passes, as elapsed)
            spent = self._busy_within(opened)
            busy = [min(1.0, spent[w] / max(elapsed, 1e-9)) for w in range(workers)]
        return {
            "images_per_s": c["images"] / elapsed if elapsed > 0 else 0.0,
            "wait_fraction": c["wait_s"] / elapsed if elapsed > 0 else 0.0,
            "hit_rate": c["hits"] / c["batches"] if c["batches"] else 0.0,
            "queue_depth": ready,
            "queue": self.queue(chosen),
            "workers": workers,
            "workers_decision": decision,
            "worker_busy": busy,
            "respawns": getattr(self._pool, "respawns", 0),
            "batches": c["batches"],
            "images": int(c["images"]),
            "skipped": int(c["skipped"]),
            "unreadable": sorted(self.unreadable.values()),
            "whole_decodes": self.whole_decodes(),
        }
