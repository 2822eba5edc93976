"""The started makers, as the trainer drives them: which maker gets which batch, the answers
as they arrive, and a lost maker's batches made elsewhere.

Batches go out in stripes (``stripe`` consecutive batches to one maker, the next stripe to the
next maker), so each maker prefetches its own stripe on its node. A maker holds at most
``depth`` batches at a time; the rest wait here, and go to whichever maker has room when the
one the stripe names has none, so a slow node never holds up batches another could make.

A maker that dies (its actor killed, its node removed) fails every batch it held: those go back
to the front of the queue, once each, and a replacement is started (it takes batches once it is
ready, wherever Ray finds room). A batch is answered under its ticket once; ``RemotePool``
writes it once. When nothing answers for ``lost_after_s`` while batches are owed (the cluster is
gone, or has no room for any maker), ``poll`` raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from ..engine.handoff import depth
from ..engine.handoff.prefetch import EpochBatch
from ..engine.remote import Answer
from ..errors import WorkerDied, WorkerTimeout
from .maker import Maker

if TYPE_CHECKING:
    from ..engine.config.options import Options
    from .workers import Workers

log = logging.getLogger(__name__)

_CLOSE_S = 5.0  # how long close() lets makers close their loaders before killing them
# What a lost actor or node looks like from here (an actor's task failed, or its result's node
# went away); any other RayError is the cluster's.
_LOST = (RayActorError,) + tuple(getattr(ray.exceptions, name) for name in (
    "ObjectLostError", "OwnerDiedError", "NodeDiedError") if hasattr(ray.exceptions, name))


class RayFleet:
    """Makers of ``options`` on Ray nodes, as ``workers`` asked (see the module docstring)."""

    def __init__(self, workers: Workers, options: Options, batches: int) -> None:
        self._asked = workers
        self._batches = batches  # per epoch
        # a maker's own ring: as given, or the default for the workers it runs
        self._slots = int(options.settings.workers.max_queue_size or depth.for_workers(
            workers.cpus_per_node))
        self._depth = max(2, self._slots)  # batches a maker holds at a time
        self._stripe = max(1, self._slots // workers.nodes)
        self._options = ray.put(options)  # once: every maker reads it from the object store
        self._live: dict[int, Any] = {}  # invariant: ready makers, by id
        self._starting: dict[Any, tuple[int, Any]] = {}  # ready() ref -> (id, actor)
        self._held: dict[int, int] = {}  # invariant: batches each live maker holds
        self._refs: dict[Any, tuple[int, int]] = {}  # make() ref -> (ticket, maker id)
        self._owed: dict[int, EpochBatch] = {}  # invariant: tickets asked, not yet answered
        self._queue: deque[int] = deque()  # owed tickets no maker holds
        self._made = 0  # makers started (their ids)
        self._replaced = 0
        self._shape: tuple[tuple[int, ...], str, tuple[float, float] | None] | None = None
        self._heard = time.monotonic()  # when a maker last answered (or work began)
        self._closed = False
        self._cluster_gone = False
        # The actor class, exported to the cluster once: a replacement's start then asks
        # nothing of a cluster that may be gone (an export waits on it).
        self._maker: Any = ray.remote(Maker).options(
            num_cpus=workers.cpus_per_node, resources=workers.resources, max_restarts=0,
            scheduling_strategy="SPREAD", runtime_env=workers.runtime_env)
        for _ in range(workers.nodes):
            self._add()

    @property
    def workers(self) -> int:
        return len(self._live) * self._asked.cpus_per_node

    @property
    def replaced(self) -> int:
        return self._replaced

    def _add(self) -> None:
        """Start one maker; it takes batches once ``ready`` answers."""
        actor = self._maker.remote(self._options, self._asked.cpus_per_node,
                                   self._asked.start_method)
        self._starting[actor.ready.remote()] = (self._made, actor)
        self._made += 1

    def probe(self) -> tuple[tuple[int, ...], str, tuple[float, float] | None]:
        """Sample 0's output, from the first maker ready (bounded by ``start_timeout_s``)."""
        deadline = time.monotonic() + self._asked.start_timeout_s
        while self._shape is None:
            left = deadline - time.monotonic()
            if left <= 0 or not self._starting and not self._live:
                raise WorkerTimeout(
                    f"no shmaug maker became ready on the Ray cluster within start_timeout_s="
                    f"{self._asked.start_timeout_s} s ({self._asked!r}). Fix: check that the "
                    f"cluster has nodes with {self._asked.cpus_per_node} free CPU(s) "
                    f"(`ray status`), that they can import shmaug and your ops, or raise "
                    f"start_timeout_s.", worker_id=-1, sample_index=0)
            self._await_starting(min(left, 1.0))
        return self._shape

    def _await_starting(self, timeout_s: float) -> None:
        """Makers that became ready within ``timeout_s`` join the live ones."""
        if not self._starting:
            return
        ready, _ = ray.wait(list(self._starting), num_returns=1, timeout=timeout_s)
        for ref in ready:
            mid, actor = self._starting.pop(ref)
            try:
                shape, dtype, value_range, pid = ray.get(ref)
            except RayTaskError as e:  # the loader itself failed: the user's to fix
                raise (e.cause if isinstance(e.cause, BaseException) else e) from None
            except _LOST as e:
                if getattr(e, "actor_init_failed", False):  # its loader failed: no retry
                    raise WorkerDied(f"a shmaug maker could not start its loader on its Ray node:"
                                     f" {e}", worker_id=-1, exitcode=None) from None
                log.warning("shmaug maker %d was lost while starting; starting another", mid)
                self._replace()
                continue
            self._shape = tuple(shape), dtype, value_range
            self._live[mid], self._held[mid] = actor, 0
            log.debug("shmaug maker %d ready (pid %d)", mid, pid)

    def submit(self, ticket: int, key: int, index: int) -> None:
        if not self._owed and not self._refs:
            self._heard = time.monotonic()  # work begins now: time from here
        self._owed[ticket] = (key, index)
        self._queue.append(ticket)

    def cancel(self, tickets: set[int]) -> None:
        for ticket in tickets:
            self._owed.pop(ticket, None)
        self._queue = deque(t for t in self._queue if t in self._owed)

    def poll(self, timeout_s: float) -> list[Answer]:
        self._check_open()
        self._await_starting(0.0)
        self._dispatch()
        answers: list[Answer] = []
        try:
            if self._refs:
                ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=timeout_s)
                if ready:
                    more, _ = ray.wait([r for r in self._refs if r not in ready],
                                       num_returns=len(self._refs) - len(ready), timeout=0)
                    answers = self._answers(ready + more)
            else:
                self._await_starting(timeout_s)
        except RayError as e:
            if isinstance(e, _LOST):
                raise
            raise self._gone(f"Ray failed: {type(e).__name__}: {e}") from e
        if answers:
            self._heard = time.monotonic()
        elif self._owed and time.monotonic() - self._heard > self._asked.lost_after_s:
            raise self._gone(f"no maker answered for lost_after_s={self._asked.lost_after_s} s "
                             f"while {len(self._owed)} batch(es) were owed")
        return answers

    def _answers(self, refs: list[Any]) -> list[Answer]:
        answers: list[Answer] = []
        for ref in refs:
            if ref not in self._refs:  # its maker was lost meanwhile: re-issued already
                continue
            ticket, mid = self._refs.pop(ref)
            if mid in self._held:
                self._held[mid] -= 1
            try:
                value = ray.get(ref)
            except RayTaskError as e:  # the batch itself failed (a user op raised)
                value = e.cause if isinstance(e.cause, BaseException) else e
            except _LOST:
                self._lose(mid, ticket)
                continue
            if self._owed.pop(ticket, None) is not None:
                answers.append((ticket, value))
        return answers

    def _lose(self, mid: int, ticket: int) -> None:
        """Maker ``mid`` is gone: its batches go back to the front of the queue, and another
        maker is started in its place."""
        held = sorted([ticket] + [t for t, m in self._refs.values() if m == mid])
        self._refs = {r: tm for r, tm in self._refs.items() if tm[1] != mid}
        redo = [t for t in held if t in self._owed]
        self._queue.extendleft(reversed(redo))
        if self._live.pop(mid, None) is not None:
            self._held.pop(mid, None)
            log.warning("shmaug maker %d was lost (actor or node gone); %d batch(es) it held "
                        "are made elsewhere", mid, len(redo))
            self._replace()

    def _replace(self) -> None:
        if self._replaced >= self._asked.max_replacements:
            if not self._live and not self._starting:
                raise WorkerDied(
                    f"every shmaug maker on the Ray cluster was lost, and "
                    f"max_replacements={self._asked.max_replacements} were started already. "
                    f"Fix: check the cluster (`ray status`) and the makers' logs; raise "
                    f"max_replacements for a cluster that loses nodes often.",
                    worker_id=-1, exitcode=None)
            return
        self._replaced += 1
        self._add()

    def _dispatch(self) -> None:
        """Hand queued batches to makers with room: the stripe's maker first."""
        live = sorted(self._live)
        while self._queue and live:
            ticket = self._queue[0]
            key, index = self._owed[ticket]
            place = (index // self._stripe) % len(live)
            mid = live[place]
            if self._held[mid] >= self._depth:
                mid = min(live, key=self._held.__getitem__)
                if self._held[mid] >= self._depth:
                    return
                place = live.index(mid)
            self._queue.popleft()
            ahead = self._ahead(key, index, place, len(live))
            self._refs[self._live[mid].make.remote(key, index, ahead)] = (ticket, mid)
            self._held[mid] += 1

    def _ahead(self, key: int, index: int, place: int, makers: int) -> list[EpochBatch]:
        """The batches after ``index`` that the stripes give maker ``place`` of ``makers``:
        what it prefetches."""
        out: list[EpochBatch] = []
        for _ in range(self._slots * makers * self._stripe + 1):
            if len(out) >= self._slots - 1:
                break
            index += 1
            if index >= self._batches:
                key, index = key + 1, 0
            if (index // self._stripe) % makers == place:
                out.append((key, index))
        return out

    def _gone(self, why: str) -> WorkerTimeout:
        self._cluster_gone = True  # close() then asks nothing of it
        return WorkerTimeout(
            f"the Ray cluster stopped making batches: {why} ({self._asked!r}). Fix: check "
            f"that the cluster is up (`ray status`) and has room for a maker; raise "
            f"lost_after_s for batches that take longer.", worker_id=-1, sample_index=-1)

    def _check_open(self) -> None:
        if self._closed:
            raise WorkerDied("this loader's Ray makers were closed. Fix: create a new loader.",
                             worker_id=-1, exitcode=None)

    def pids(self) -> list[int]:
        """Every live maker's process and its workers' (for tests and tools)."""
        refs = [a.pids.remote() for a in self._live.values()]
        return [p for pids in ray.get(refs, timeout=30) for p in pids]

    def close(self) -> None:
        """Close every maker's loader, then kill the actors, within ``_CLOSE_S`` each (a
        cluster that is gone takes their processes with it; a call to it could wait for
        minutes). Idempotent."""
        if self._closed:
            return
        self._closed = True
        actors = list(self._live.values()) + [a for _, a in self._starting.values()]
        self._live, self._starting, self._refs, self._owed = {}, {}, {}, {}
        self._queue.clear()
        if not self._cluster_gone and actors and ray.is_initialized():
            stopper = threading.Thread(target=_stop, args=(actors,), daemon=True,
                                       name="shmaug-ray-close")
            stopper.start()
            stopper.join(2 * _CLOSE_S)


def _stop(actors: list[Any]) -> None:
    """Let the makers close their loaders (bounded), then kill them."""
    try:
        closing = [a.close.remote() for a in actors]
        ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_S)
    except RayError:  # a cluster already gone: nothing to close
        pass
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already, or the cluster is
            pass
