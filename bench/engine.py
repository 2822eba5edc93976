"""Issue 2's engine benchmark: shmaug side by side with a plain copy and Keras PyDataset.

Run ``python -m bench.engine [--quick] [--out results/engine]``. Four sections, each in its
own child process (so one that hangs or crashes is reported and the rest still run), and
inside a section every contender runs in the same process, interleaved round by round:

1. identity: GB/s handed to the consumer with an identity ``augment`` on 224x224x3 uint8,
   ``shmaug.Loader(workers=2)`` vs a single-process copy (the memory-bandwidth ceiling) vs
   ``keras.utils.PyDataset(workers=2, use_multiprocessing=True)``.
2. scaling: images/s of a CPU-bound pipeline (``presets.glyph_distort`` on 64x64 glyphs) with
   ``workers`` = 0, 1, 2.
3. seeding: cost of ``SampleSeeder.streams()`` per sample (a 64-sample task at a time, as
   workers do) as a share of a cheap op's time.
4. startup: time to the first batch and worker USS when the main script has imported
   TensorFlow, shmaug vs Keras PyDataset, under spawn and fork (a script in a temp folder).

See ``bench/README.md`` for how to read the table.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench import _harness as H

NAME = "engine"
GB = 1e9
_TASK = 64  # samples per seeding call: one worker task
_SETTLE_S = 0.2  # idle time between contender runs, so leftover background work does not leak


def identity(image: np.ndarray, rng: Any) -> np.ndarray:
    """The identity augment of section 1 (module level so it pickles under spawn)."""
    return image


identity.uses_global_rng = False  # type: ignore[attr-defined]  # it draws no random numbers


# -- contenders that produce batches ------------------------------------------------------------
#
# A contender's ``run(k)`` produces one full epoch and returns arrival times: the start, then
# one time per batch. Throughput is measured between the first and the last batch (steady
# state); the first-batch latency is reported on the side.


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

    ``run`` returns one list of arrival times per process; ``_overlap_rate`` counts what they
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
        H.guarded(self.end_epoch, 15)
        H.wait_gone(H.pool_children(), 5)  # the pool it closed, if its workers linger


def _interleave(contenders: dict[str, Callable[[], Any]], rounds: int, timeout_s: float,
                desc: str) -> tuple[dict[str, list[list[float]]], dict[str, str], dict[str, Any]]:
    """Build each contender, then run one epoch of each per round, rotating the order.

    Round 0 is warm-up and not returned. A contender that fails or times out is closed and
    skipped from then on; its status says why.
    """
    built: dict[str, Any] = {}
    status: dict[str, str] = {}
    for name, make in contenders.items():
        out = H.guarded(make, timeout_s)
        if out.ok:
            built[name] = out.value
            status[name] = "ok"
        else:
            status[name] = f"{out.status}: {out.error}" if out.error else out.status
    runs: dict[str, list[list[float]]] = {name: [] for name in contenders}
    names = list(built)
    bar = H.progress(len(names) * (rounds + 1), desc)
    try:
        for r in range(rounds + 1):
            order = names[r % len(names):] + names[: r % len(names)] if names else []
            for name in order:
                if status[name] != "ok":
                    bar.update()
                    continue
                time.sleep(_SETTLE_S)
                out = H.guarded(lambda: built[name].run(r), timeout_s)
                if out.ok:
                    if r > 0:
                        runs[name].append(out.value)
                else:
                    status[name] = f"{out.status} in round {r}: {out.error}"
                    H.guarded(built[name].close, 15)
                bar.update()
    finally:
        bar.close()
    notes = {name: c.note() for name, c in built.items() if hasattr(c, "note")}
    for name, c in built.items():
        H.guarded(c.close, 15)
    return runs, status, notes


def _steady_rate(times: list[float], units_per_batch: list[float]) -> float:
    """Units per second between the first and the last batch (start-up excluded)."""
    if len(times) < 3:  # one batch only: fall back to the whole run
        return sum(units_per_batch) / (times[-1] - times[0])
    return sum(units_per_batch[1:]) / (times[-1] - times[1])


def _overlap_rate(per_process: list[list[float]], images_per_batch: int) -> float:
    """Images/s of several processes together, counted only while all of them were in their
    steady state (after every first batch, before any last one)."""
    lo = max(t[1] for t in per_process)
    hi = min(t[-1] for t in per_process)
    if hi <= lo:  # no common window (a tiny quick run): fall back to the sum of rates
        return sum(images_per_batch * (len(t) - 2) / (t[-1] - t[1]) for t in per_process)
    done = sum(sum(1 for x in t[2:] if lo < x <= hi) for t in per_process)
    return done * images_per_batch / (hi - lo)


def _first_batch_ms(runs: list[list[float]]) -> H.Stats:
    return H.summarize([(t[1] - t[0]) * 1e3 for t in runs])


# -- section 1: identity throughput ----------------------------------------------------------------


def section_identity(quick: bool) -> list[H.Row]:
    n, bs = (256, 64) if quick else (2048, 64)
    rounds, timeout = (1, 60.0) if quick else (9, 90.0)
    x = np.random.default_rng(0).integers(0, 256, (n, 224, 224, 3), dtype=np.uint8)
    batch_bytes = [float(x[lo:lo + bs].nbytes) for lo in range(0, n, bs)]
    contenders: dict[str, Callable[[], Any]] = {
        "copy ceiling: np.copyto": lambda: CopyTo(x, bs),
        "copy ceiling: x[idx] gather": lambda: CopyGather(x, bs),
        # Built before Keras is imported: its workers fork from a process without TensorFlow.
        "shmaug Loader(workers=2)": lambda: ShmaugRun(x, bs, identity, 2),
        # copy=False lends the shared slot instead of copying it out (for consumers that copy
        # anyway, e.g. to a device); the workers' copy is then the only one.
        "shmaug Loader(workers=2, copy=False)": lambda: ShmaugRun(x, bs, identity, 2, copy=False),
        "keras PyDataset(workers=2, mp)": lambda: KerasRun(x, bs, identity, 2),
    }
    runs, status, notes = _interleave(contenders, rounds, timeout, "identity")
    rates = {k: [_steady_rate(t, batch_bytes) / GB for t in v] for k, v in runs.items()}
    sec = "1 identity 224x224x3 u8, batch 64"
    ceil_names = ["copy ceiling: np.copyto", "copy ceiling: x[idx] gather"]
    rows = []
    for name in contenders:
        ok = status[name] == "ok" and rates[name]
        stats = H.summarize(rates[name]) if ok else None
        ratio_txt, target, extra = "", "", {}
        if ok and name not in ceil_names[:1]:
            parts = []
            for ceil, short in zip(ceil_names, ("copyto", "gather")):
                if status[ceil] == "ok" and rates[ceil] and ceil != name:
                    pr = H.paired_ratio(rates[name], rates[ceil])
                    extra[f"ratio_vs_{short}"] = pr.to_dict()
                    parts.append(f"{pr.median:.2f}x {short}")
            ratio_txt = ", ".join(parts)
        if ok and name.startswith("shmaug"):
            best = [extra[k]["median"] for k in ("ratio_vs_copyto", "ratio_vs_gather") if k in extra]
            if best:
                worst = min(best)  # judged against the faster ceiling
                target = f">= 0.50x copy: {'met' if worst >= 0.5 else 'MISSED'} ({worst:.2f}x)"
        note = ""
        if runs[name]:
            fb = _first_batch_ms(runs[name])
            note = f"first batch {H.fmt_num(fb.median)} ms"
            extra["first_batch_ms"] = fb.to_dict()
        if name in notes:
            note += "; " + notes[name]
        rows.append(H.Row(sec, name, "delivered", "GB/s", stats, status[name], ratio_txt,
                          target, note, extra))
    return rows


# -- section 2: CPU-bound scaling --------------------------------------------------------------------


CEILING = "plain loop in 2 processes at once (this machine's 2-core ceiling)"


def section_scaling(quick: bool) -> list[H.Row]:
    import shmaug
    from shmaug.glyphs import render_glyphs

    import cv2

    n, bs = (512, 64) if quick else (4096, 64)
    rounds, timeout = (1, 60.0) if quick else (15, 90.0)  # short rounds, many: this host drifts 1.5x in seconds
    x, _, _ = render_glyphs(n, 64, seed=0)
    aug = shmaug.presets.glyph_distort()
    per_batch = [float(min(bs, n - lo)) for lo in range(0, n, bs)]
    # One OpenCV thread here too, before OpenCV has run: the plain loops are then one core's
    # worth, as a worker is, and forking stays safe (see the NOTE below).
    cv2.setNumThreads(1)
    # NOTE: forked workers are built first, before OpenCV has run in this process, and with
    # the output declared so the Loader's own shape probe does not run OpenCV here either.
    # A worker forked after OpenCV's thread pool has been used can hang for good in
    # `cv2.setNumThreads(1)` (shmaug/_worker.py `_limit_threads`, OpenCV issue #5150); this
    # section measures scaling, and section 4 shows that hazard as a user meets it.
    contenders: dict[str, Callable[[], Any]] = {
        "shmaug workers=1": lambda: ShmaugRun(x, bs, aug, 1, declare_output=True),
        "shmaug workers=2": lambda: ShmaugRun(x, bs, aug, 2, declare_output=True),
        "shmaug workers=0": lambda: ShmaugRun(x, bs, aug, 0),
        "plain loop, no loader": lambda: PlainLoop(x, bs, aug),
        "plain loop + SampleSeeder.streams": lambda: PlainLoop(x, bs, aug, seeded=True),
        CEILING: lambda: ParallelPlainLoops(x, bs, aug, 2),
    }
    runs, status, notes = _interleave(contenders, rounds, timeout, "scaling")
    rates = {k: [_overlap_rate(v_, bs) if k == CEILING else _steady_rate(v_, per_batch)
                 for v_ in v] for k, v in runs.items()}
    sec = "2 scaling glyph_distort 64x64 u8, batch 64"
    rows = []
    for name in contenders:
        ok = status[name] == "ok" and bool(rates[name])
        stats = H.summarize(rates[name]) if ok else None
        ratio_txt, target, extra = "", "", {}
        if ok and name != "shmaug workers=1" and status["shmaug workers=1"] == "ok" and rates["shmaug workers=1"]:
            pr = H.paired_ratio(rates[name], rates["shmaug workers=1"])
            extra["ratio_vs_workers1"] = pr.to_dict()
            ratio_txt = f"{pr.median:.2f}x workers=1 ({H.fmt_num(pr.lo)} – {H.fmt_num(pr.hi)})"
            if name == "shmaug workers=2":
                target = f">= 1.8x workers=1: {'met' if pr.median >= 1.8 else 'MISSED'}"
        for base, key, label in (("plain loop, no loader", "ratio_vs_plain", "one plain loop"),
                                 (CEILING, "ratio_vs_ceiling", "the 2-core ceiling")):
            if ok and name in (CEILING, "shmaug workers=2") and name != base and rates[base]:
                pr = H.paired_ratio(rates[name], rates[base])
                extra[key] = pr.to_dict()
                ratio_txt += f"; {pr.median:.2f}x {label}"
        note = notes.get(name, "")
        rows.append(H.Row(sec, name, "throughput", "images/s", stats, status[name], ratio_txt,
                          target, note, extra))
    return rows


# -- section 3: seeding cost ---------------------------------------------------------------------------


def section_seeding(quick: bool) -> list[H.Row]:
    import cv2

    import shmaug
    from shmaug.glyphs import render_glyphs
    from shmaug.ops import Op
    from shmaug.seeding import GlobalsWatch, SampleSeeder

    cv2.setNumThreads(1)  # as in a worker
    number, rounds = (2000, 1) if quick else (20000, 7)
    x, _, _ = render_glyphs(256, 64, seed=0)
    g = np.random.default_rng(0)
    off, on = SampleSeeder(0, seed_globals=False), SampleSeeder(0, seed_globals=True)
    numpy_only = SampleSeeder(0, seed_globals=False)
    numpy_only.seed_numpy = True  # what a watched op that draws only from np.random pays
    rotate, glyph = Op("rotate", degrees=(-15.0, 15.0)), shmaug.presets.glyph_distort()

    def warp(i: int) -> Any:
        m = cv2.getRotationMatrix2D((32.0, 32.0), float(g.uniform(-15, 15)), 1.0)
        return cv2.warpAffine(x[i & 255], m, (64, 64), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0)

    task = np.arange(_TASK)

    def streams(seeder: Any, watch: Any = None) -> Callable[[int], Any]:
        def one_task(i: int) -> None:
            for _ in seeder.streams(1, task + i):
                if watch is not None:
                    watch.moved()  # what a worker adds per sample for an undeclared op
        return one_task

    fns: dict[str, Callable[[int], Any]] = {
        "SampleSeeder.streams, seed_globals=False": streams(off),
        "SampleSeeder.streams + GlobalsWatch (undeclared op, globals unused)":
            streams(off, GlobalsWatch()),
        "SampleSeeder.streams, numpy's global seeded (op draws only from np.random)":
            streams(numpy_only),
        "SampleSeeder.streams, seed_globals=True": streams(on),
        "naive default_rng([seed, epoch, index])": lambda i: np.random.default_rng([0, 1, i]),
        "op: cv2.warpAffine rotate": warp,
        "op: shmaug Op('rotate')": lambda i: rotate(x[i & 255], g),
        "op: presets.glyph_distort()": lambda i: glyph(x[i & 255], g),
    }
    # A seeder call covers a whole task; its time is divided back to per sample below.
    per_call = {k: (_TASK if k.startswith("SampleSeeder") else 1) for k in fns}
    op_number = {k: (number // 4 if "glyph" in k else number) // per_call[k] for k in fns}
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    bar = H.progress(len(names) * (rounds + 1), "seeding")
    for r in range(rounds + 1):  # round 0 warms caches and is dropped
        for name in names[r % len(names):] + names[: r % len(names)]:
            t = H.time_calls(fns[name], op_number[name]) * 1e6 / per_call[name]
            if r > 0:
                times[name].append(t)
            bar.update()
    bar.close()
    sec = "3 seeding, per sample on 64x64 u8"
    rows = [H.Row(sec, k, "per sample", "us", H.summarize(v)) for k, v in times.items()]
    for op in ("op: cv2.warpAffine rotate", "op: shmaug Op('rotate')", "op: presets.glyph_distort()"):
        for seeder in names[:5]:
            share = H.paired_ratio(times[seeder], times[op]).scaled(100.0)
            target = ""
            if seeder.startswith("SampleSeeder"):
                target = f"< 10%: {'met' if share.median < 10 else 'MISSED'}"
            rows.append(H.Row(sec, f"{seeder} / {op[4:]}", "share of op time", "%", share,
                              target=target))
    return rows


# -- section 4: start-up with TensorFlow imported in the main script -----------------------------------

STARTUP_SCRIPT = textwrap.dedent('''
    """Main script of a user who imported TensorFlow first (written by bench/engine.py)."""
    import tensorflow  # noqa: F401  -- the point of this probe
    import json, multiprocessing, sys, time

    import keras
    import numpy as np
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    import shmaug
    from bench import _harness as H
    from shmaug.glyphs import render_glyphs

    N, BS, SEED = 1024, 64, 0


    class GlyphDataset(keras.utils.PyDataset):
        """What a Keras user writes: gather and augment each sample in __getitem__."""

        def __init__(self, x, y, batch_size, augment, **kwargs):
            super().__init__(**kwargs)
            self.x, self.y, self.bs, self.augment = x, y, batch_size, augment

        def __len__(self):
            return -(-len(self.x) // self.bs)

        def __getitem__(self, i):
            lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
            out = np.empty((hi - lo, *self.x.shape[1:]), self.x.dtype)
            for j in range(lo, hi):
                out[j - lo] = self.augment(self.x[j], np.random.default_rng([SEED, 0, j]))
            return out, self.y[lo:hi]


    def probe_shmaug(method, x, y, declared=False):
        # declared: output shape given, so the Loader runs no OpenCV here before forking
        out = dict(output_shape=x.shape[1:], output_dtype=x.dtype) if declared else {}
        t0 = time.perf_counter()
        loader = shmaug.Loader(x, y, batch_size=BS, augment=shmaug.presets.glyph_distort(),
                               workers=2, seed=SEED, start_method=method, **out)
        try:
            result = {}
            for i, _ in enumerate(loader):
                if i == 0:
                    result["first_batch_s"] = time.perf_counter() - t0
                    result["mem_first"] = H.worker_memory(loader.pids)
                if i == len(loader) // 2:
                    result["mem_mid"] = H.worker_memory(loader.pids)
            return result
        finally:
            loader.close()


    def probe_keras(method, x, y):
        before = set(H.pool_children())
        t0 = time.perf_counter()
        ds = GlyphDataset(x, y, BS, shmaug.presets.glyph_distort(), workers=2,
                          use_multiprocessing=True)
        adapter = PyDatasetAdapter(ds, shuffle=False)
        adapter.on_epoch_begin()
        pids = []
        try:
            out = {}
            for i, _ in enumerate(adapter.get_numpy_iterator()):
                if i == 0:
                    out["first_batch_s"] = time.perf_counter() - t0
                    pids = [p for p in H.pool_children() if p not in before]
                    out["mem_first"] = H.worker_memory(pids)
                if i == len(ds) // 2:  # by the last batch its workers are already leaving
                    out["mem_mid"] = H.worker_memory(pids)
            return out
        finally:
            adapter.on_epoch_end()
            H.wait_gone(pids, 10)


    if __name__ == "__main__":
        method, order, timeout = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3])
        multiprocessing.set_start_method(method, force=True)  # Keras' pool follows this
        x, y, _ = render_glyphs(N, 64, seed=SEED)
        probes = {"shmaug": probe_shmaug, "keras": probe_keras,
                  "shmaug_declared": lambda m, x, y: probe_shmaug(m, x, y, declared=True)}
        result = {}
        for name in order:
            out = H.guarded(lambda: probes[name](method, x, y), timeout)
            result[name] = {"status": out.status, "error": out.error, **(out.value or {})}
        H.report_json(result)
''')


def section_startup(quick: bool) -> list[H.Row]:
    repeats = 1 if quick else 3
    methods = ("spawn", "fork")
    # A fork probe that hangs (see section_scaling's NOTE) costs its whole timeout: keep it
    # short; spawn needs long enough for Keras' workers to import TensorFlow.
    contender_timeout = {"spawn": 45.0 if quick else 60.0, "fork": 15.0 if quick else 30.0}
    hard_timeout = 150.0
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="shmaug-bench-") as tmp:
        script = Path(tmp) / "tf_user_script.py"
        script.write_text(STARTUP_SCRIPT)
        jobs = []
        for r in range(repeats):
            for method in methods:
                order = "shmaug,keras" if r % 2 == 0 else "keras,shmaug"
                if method == "fork":  # first, while OpenCV has not yet run in that process
                    order = "shmaug_declared," + order
                jobs.append((method, [sys.executable, str(script), method, order,
                                      str(contender_timeout[method])]))
        bar = H.progress(len(jobs), "startup")

        def one(job: tuple[str, list[str]]) -> tuple[str, H.Outcome]:
            out = H.run_json(job[1], hard_timeout)
            bar.update()
            return job[0], out

        # Quick mode is a smoke run: both start methods at once to stay well under a minute.
        with ThreadPoolExecutor(max_workers=2 if quick else 1) as ex:
            outcomes = list(ex.map(one, jobs))
        bar.close()
    for method, out in outcomes:
        for who in ("shmaug", "keras", "shmaug_declared"):
            if who == "shmaug_declared" and method != "fork":
                continue
            key = (method, who)
            if not out.ok:
                errors.setdefault(key, []).append(f"{out.status}: {out.error}")
                continue
            res = out.value.get(who, {})
            if res.get("status") != "ok":
                errors.setdefault(key, []).append(f"{res.get('status')}: {res.get('error')}")
                continue
            results.setdefault(key, []).append(res)
    sec = "4 startup, TF imported in __main__, 2 workers, glyph_distort"
    rows = []
    labels = (("shmaug", "shmaug Loader"), ("keras", "keras PyDataset(mp)"),
              ("shmaug_declared", "shmaug Loader, output declared"))
    for method in methods:
        for who, label in labels:
            if who == "shmaug_declared" and method != "fork":
                continue
            key = (method, who)
            name = f"{label}, {method}"
            runs = results.get(key, [])
            errs = errors.get(key, [])
            if not runs:
                status = f"{len(errs)}/{repeats} runs failed, {errs[-1] if errs else 'no result'}"
            elif errs:
                status = f"ok {len(runs)}/{repeats} runs; {len(errs)} failed: {errs[-1]}"
            else:
                status = "ok"
            first = H.summarize([x["first_batch_s"] for x in runs]) if runs else None
            target = ""
            if who.startswith("shmaug") and first is not None and method == "spawn":
                target = f"<= 1.5 s: {'met' if first.median <= 1.5 else 'MISSED'}"
            rows.append(H.Row(sec, name, "time to first batch", "s", first, status,
                              target=target, extra={"runs": runs}))
            for when, metric in (("mem_first", "USS/worker after 1st batch"),
                                 ("mem_mid", "USS/worker mid-epoch")):
                uss = [max(w["uss"] for w in x[when]) for x in runs if x.get(when)]
                pss = [max(w["pss"] for w in x[when]) for x in runs if x.get(when)]
                nworkers = [len(x[when]) for x in runs if x.get(when)]
                st = H.summarize(uss) if uss else None
                tgt = ""
                if who.startswith("shmaug") and st is not None:
                    tgt = f"< 80 MB: {'met' if st.median < 80 * 1e6 / 2**20 else 'MISSED'}"
                note = (f"max over {max(nworkers)} workers; PSS {H.fmt_num(float(np.median(pss)))} MiB"
                        if uss else "")
                rows.append(H.Row(sec, name, metric, "MiB", st, status,
                                  target=tgt, note=note))
    return rows


# -- the driver ------------------------------------------------------------------------------------------

SECTIONS: dict[str, Callable[[bool], list[H.Row]]] = {
    "identity": section_identity,
    "scaling": section_scaling,
    "seeding": section_seeding,
    "startup": section_startup,
}
_SECTION_TIMEOUT_S = {"identity": 240.0, "scaling": 180.0, "seeding": 120.0, "startup": 420.0}
_QUICK_TIMEOUT_S = 100.0


def _run_section_child(name: str, quick: bool) -> None:
    rows = SECTIONS[name](quick)
    H.report_json([r.to_dict() for r in rows])


def _run_sections(quick: bool) -> list[H.Row]:
    argv = [sys.executable, "-m", "bench.engine", "--section"]

    def one(name: str) -> list[H.Row]:
        t0 = time.perf_counter()
        out = H.run_json(argv + [name] + (["--quick"] if quick else []),
                         _QUICK_TIMEOUT_S if quick else _SECTION_TIMEOUT_S[name])
        print(f"[bench.engine] section {name}: {out.status} in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr, flush=True)
        if out.ok:
            return H.rows_from_json(out.value)
        return [H.Row(name, "(whole section)", "", "", None, f"{out.status}: {out.error}")]

    if quick:  # a smoke run: sections at once (timings meaningless, speed matters)
        with ThreadPoolExecutor(max_workers=len(SECTIONS)) as ex:
            parts = list(ex.map(one, SECTIONS))
    else:  # measurements: one section at a time, nothing else competing for the 2 cores
        parts = [one(name) for name in SECTIONS]
    return [row for part in parts for row in part]


def main(argv: list[str] | None = None) -> int:
    parser = H.base_parser(__doc__.splitlines()[0], "results/engine")
    parser.add_argument("--section", choices=sorted(SECTIONS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.section:
        _run_section_child(args.section, args.quick)
        return 0
    t0 = time.perf_counter()
    rows = _run_sections(args.quick)
    meta = {"quick": args.quick, "environment": H.environment(),
            "wall_s": round(time.perf_counter() - t0, 1)}
    text = H.write_results(args.out, NAME, rows, meta)
    print(text)
    print(f"wrote {Path(args.out) / (NAME + '.json')} and {NAME}.md "
          f"in {meta['wall_s']} s", file=sys.stderr)
    # A contender that fails is a result (it is in the table); a section that crashed is a bug.
    return 1 if any(r.contender == "(whole section)" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
