"""The engine benchmark's contenders and the rule that times them side by side.

A contender is built once, then ``run(k)`` produces one full epoch and returns arrival times:
the start, then one time per batch. Throughput is measured between the first and the last
batch (steady state); the first-batch latency is reported on the side. ``interleave`` runs
every contender one epoch per round in a rotating order, so a noisy neighbour moves all of
them alike; the sections (``identity.py``, ``scaling.py``) turn the arrival
times into rates with ``steady_rate`` / ``overlap_rate``.

Owns the contenders: the copy ceilings (``CopyGather``, ``CopyTo``), the plain loops in one or
several processes, ``shmaug.Loader`` (``ShmaugRun``) and Keras' ``PyDataset(workers, mp)``
(``KerasRun``). Keras is imported only when a Keras contender is built.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable

import numpy as np

from bench.common.harness import Stats, guarded, pool_children, progress, summarize, wait_gone

_SETTLE_S = 0.2  # idle time between contender runs, so leftover background work does not leak


def identity(image: np.ndarray, rng: Any) -> np.ndarray:
    """The identity augment of section 1 (module level so it pickles under spawn)."""
    return image


# (no `uses_global_rng`: a function of a user's, watched as any is: what they pay)


# -- contenders ----------------------------------------------------------------------------------


class CopyGather:
    """The ceiling, part 1: ``x[idx]`` fancy-index gather of each batch in this process."""

    def __init__(self, x: np.ndarray, batch_size: int) -> None:
        self.x, self.bs = x, batch_size

    def run(self, k: int) -> list[float]:
        n = len(self.x)
        times = [time.perf_counter()]
        for lo in range(0, n, self.bs):
            xb = self.x[np.arange(lo, min(lo + self.bs, n))]
            times.append(time.perf_counter())
        del xb
        return times

    def close(self) -> None:
        pass


class CopyTo:
    """The ceiling, part 2: ``np.copyto`` of each batch into one preallocated buffer."""

    def __init__(self, x: np.ndarray, batch_size: int) -> None:
        self.x, self.bs = x, batch_size
        self.out = np.empty((batch_size, *x.shape[1:]), x.dtype)
        self.out.fill(0)  # fault the pages in now, not inside the timed loop

    def run(self, k: int) -> list[float]:
        n = len(self.x)
        times = [time.perf_counter()]
        for lo in range(0, n, self.bs):
            hi = min(lo + self.bs, n)
            np.copyto(self.out[: hi - lo], self.x[lo:hi])
            times.append(time.perf_counter())
        return times

    def close(self) -> None:
        pass


class PlainLoop:
    """The augment applied sample by sample in this process: no loader, no seeding."""

    def __init__(self, x: np.ndarray, batch_size: int, augment: Callable[..., Any],
                 seeded: bool = False) -> None:
        from shmaug.seeding import SampleSeeder

        self.x, self.bs, self.augment = x, batch_size, augment
        self.rng = np.random.default_rng(0)
        # seeded: a per-sample stream from SampleSeeder, as the workers do (isolates its cost)
        self.seeder = SampleSeeder(0, seed_globals=False) if seeded else None
        self.shape = augment(x[0], self.rng).shape

    def run(self, k: int) -> list[float]:
        n = len(self.x)
        times = [time.perf_counter()]
        for lo in range(0, n, self.bs):
            hi = min(lo + self.bs, n)
            out = np.empty((hi - lo, *self.shape), self.x.dtype)
            rngs = (self.seeder.streams(k, np.arange(lo, hi)) if self.seeder is not None
                    else itertools.repeat(self.rng))
            for j, rng in zip(range(lo, hi), rngs):
                out[j - lo] = self.augment(self.x[j], rng)
            times.append(time.perf_counter())
        return times

    def close(self) -> None:
        pass


class ParallelPlainLoops:
    """The machine's own ceiling: ``PlainLoop`` in ``processes`` forked processes at once.

    ``run`` returns one list of arrival times per process; ``overlap_rate`` counts what they
    deliver together while all run: what this many cores give with no loader at all (on a
    shared VM, often less than N x one).
    """

    def __init__(self, x: np.ndarray, batch_size: int, augment: Callable[..., Any],
                 processes: int = 2) -> None:
        import multiprocessing

        self.loop = PlainLoop(x, batch_size, augment)
        self.processes = processes
        self.ctx = multiprocessing.get_context("fork")

    def _child(self, k: int, conn: Any) -> None:
        conn.send(self.loop.run(k))
        conn.close()

    def run(self, k: int) -> list[list[float]]:
        pipes = [self.ctx.Pipe(duplex=False) for _ in range(self.processes)]
        children = [self.ctx.Process(target=self._child, args=(k, w), daemon=True)
                    for _, w in pipes]
        for c in children:
            c.start()
        for _, w in pipes:
            w.close()  # a child that dies then ends our recv() with EOFError
        try:
            return [r.recv() for r, _ in pipes]
        finally:
            for c in children:
                c.join(5)
                if c.is_alive():
                    c.kill()

    def close(self) -> None:
        pass


class ShmaugRun:
    """``shmaug.Loader``; each run is a fresh epoch number, so nothing prefetched carries over."""

    def __init__(self, x: np.ndarray, batch_size: int, augment: Any, workers: int,
                 start_method: str = "fork", declare_output: bool = False,
                 copy: bool = True) -> None:
        import shmaug

        # declare_output: pass output_shape/dtype so the Loader does not run `augment` on
        # sample 0 in this process before forking (see the OpenCV note in section_scaling).
        out = dict(output_shape=x.shape[1:], output_dtype=x.dtype) if declare_output else {}
        self.loader = shmaug.Loader(x, batch_size=batch_size, augment=augment, workers=workers,
                                    seed=0, start_method=start_method, copy=copy, **out)
        self.last_stats: dict[str, Any] = {}

    def run(self, k: int) -> list[float]:
        loader = self.loader
        epoch = 2 * k + 1  # never the epoch after the previous run: its prefetch is dropped
        loader.reset_stats()
        times = [time.perf_counter()]
        for b in range(len(loader)):
            loader.batch(b, epoch=epoch)
            times.append(time.perf_counter())
        self.last_stats = loader.stats()  # now, before idle time dilutes the busy fractions
        return times

    def note(self) -> str:
        s = self.last_stats
        busy = ", ".join(f"{b:.0%}" for b in s["worker_busy"])
        return f"last run: hit rate {s['hit_rate']:.0%}" + (f", worker busy {busy}" if busy else "")

    def close(self) -> None:
        self.loader.close()


_DATASET_CLASSES: dict[str, type] = {}


def _keras_dataset_class() -> type:
    """``IdentityDataset``: a PyDataset that gathers and applies ``augment`` per sample.

    Built on first use so that sections without Keras never import it; registered under its
    module-level name so it pickles by reference.
    """
    if "IdentityDataset" in _DATASET_CLASSES:
        return _DATASET_CLASSES["IdentityDataset"]
    import keras

    class IdentityDataset(keras.utils.PyDataset):  # type: ignore[misc]
        def __init__(self, x: np.ndarray, batch_size: int, augment: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.x, self.bs, self.augment = x, batch_size, augment

        def __len__(self) -> int:
            return -(-len(self.x) // self.bs)

        def __getitem__(self, i: int) -> Any:
            lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
            out = np.empty((hi - lo, *self.x.shape[1:]), self.x.dtype)
            for j in range(lo, hi):
                out[j - lo] = self.augment(self.x[j], None)
            return (out,)

    IdentityDataset.__module__ = __name__
    IdentityDataset.__qualname__ = "IdentityDataset"
    globals()["IdentityDataset"] = IdentityDataset
    _DATASET_CLASSES["IdentityDataset"] = IdentityDataset
    return IdentityDataset


class KerasRun:
    """``PyDataset(workers=2, use_multiprocessing=True)`` driven the way ``fit`` drives it."""

    def __init__(self, x: np.ndarray, batch_size: int, augment: Any, workers: int) -> None:
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

        cls = _keras_dataset_class()
        self.ds = cls(x, batch_size, augment, workers=workers, use_multiprocessing=True)
        self.adapter = PyDatasetAdapter(self.ds, shuffle=False)
        self.in_epoch = False

    def run(self, k: int) -> list[float]:
        times = [time.perf_counter()]
        self.adapter.on_epoch_begin()
        self.in_epoch = True
        for _ in self.adapter.get_numpy_iterator():
            times.append(time.perf_counter())
        self.end_epoch()
        return times

    def end_epoch(self) -> None:
        if self.in_epoch:
            self.in_epoch = False
            self.adapter.on_epoch_end()

    def close(self) -> None:
        guarded(self.end_epoch, 15)
        wait_gone(pool_children(), 5)  # the pool it closed, if its workers linger


# -- timing them side by side -------------------------------------------------------------------


def interleave(contenders: dict[str, Callable[[], Any]], rounds: int, timeout_s: float,
               desc: str) -> tuple[dict[str, list[list[float]]], dict[str, str], dict[str, Any]]:
    """Build each contender, then run one epoch of each per round, rotating the order.

    Round 0 is warm-up and not returned. A contender that fails or times out is closed and
    skipped from then on; its status says why.
    """
    built: dict[str, Any] = {}
    status: dict[str, str] = {}
    for name, make in contenders.items():
        out = guarded(make, timeout_s)
        if out.ok:
            built[name] = out.value
            status[name] = "ok"
        else:
            status[name] = f"{out.status}: {out.error}" if out.error else out.status
    runs: dict[str, list[list[float]]] = {name: [] for name in contenders}
    names = list(built)
    bar = progress(len(names) * (rounds + 1), desc)
    try:
        for r in range(rounds + 1):
            order = names[r % len(names):] + names[: r % len(names)] if names else []
            for name in order:
                if status[name] != "ok":
                    bar.update()
                    continue
                time.sleep(_SETTLE_S)
                out = guarded(lambda: built[name].run(r), timeout_s)
                if out.ok:
                    if r > 0:
                        runs[name].append(out.value)
                else:
                    status[name] = f"{out.status} in round {r}: {out.error}"
                    guarded(built[name].close, 15)
                bar.update()
    finally:
        bar.close()
    notes = {name: c.note() for name, c in built.items() if hasattr(c, "note")}
    for name, c in built.items():
        guarded(c.close, 15)
    return runs, status, notes


def steady_rate(times: list[float], units_per_batch: list[float]) -> float:
    """Units per second between the first and the last batch (start-up excluded)."""
    if len(times) < 3:  # one batch only: fall back to the whole run
        return sum(units_per_batch) / (times[-1] - times[0])
    return sum(units_per_batch[1:]) / (times[-1] - times[1])


def overlap_rate(per_process: list[list[float]], images_per_batch: int) -> float:
    """Images/s of several processes together, counted only while all of them were in their
    steady state (after every first batch, before any last one)."""
    lo = max(t[1] for t in per_process)
    hi = min(t[-1] for t in per_process)
    if hi <= lo:  # no common window (a tiny quick run): fall back to the sum of rates
        return sum(images_per_batch * (len(t) - 2) / (t[-1] - t[1]) for t in per_process)
    done = sum(sum(1 for x in t[2:] if lo < x <= hi) for t in per_process)
    return done * images_per_batch / (hi - lo)


def first_batch_ms(runs: list[list[float]]) -> Stats:
    return summarize([(t[1] - t[0]) * 1e3 for t in runs])
