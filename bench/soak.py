"""The soak: many epochs with workers SIGKILLed and ``fit`` called now and then; nothing may grow.

Run ``python -m bench.soak [--quick] [--out bench/results/soak/soak.txt]``. One ``shmaug.Sequence``
(2 workers, a small dataset, a shmaug pipeline) serves every epoch: most epochs are read the
way Keras reads them (one generator asking for every index), every ``--fit-every``
epochs ``model.fit(seq, epochs=1)`` reads one instead (the first at epoch 0, so TensorFlow's
one-off set-up is done before the baseline), and every ``--kill-every`` epochs a worker is
SIGKILLed half-way through an epoch (the pool replaces it and redoes its work).

Every ``--every`` epochs it prints RSS and USS of the main process and of each worker, the
main process's open file descriptors, and the bytes and number of the shmaug segments in
/dev/shm. The first row is the baseline; the run fails (exit status 1) if a later row exceeds
it beyond ``TOLERANCE``: memory of the main process (RSS, USS), or the USS of all workers
together (a replaced worker starts small and grows back; only the total counts), by more than
``max(5 %, 8 MiB)``. Workers' RSS is printed but not held to it: a worker forked later maps more
of a parent that has grown meanwhile (JAX compiles during the first ``fit``), which RSS counts
and which costs nothing;
descriptors, segments or their bytes by anything at all. It also fails if a kill was not
answered by exactly one respawn, or if anything of ours is left after ``close()``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from bench.common.harness import described

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

MIB = 2**20
MEMORY_SLACK = (0.05, 8 * MIB)  # relative, absolute: memory may move by the larger of the two
SHM_DIR = "/dev/shm"
TOLERANCE = ("memory (main RSS and USS, all workers' USS) <= baseline + max(5 %, 8 MiB); "
             "descriptors, shmaug segments and their bytes <= baseline")


@dataclass(frozen=True)
class Row:
    """One measurement, taken at the end of ``epoch``."""

    epoch: int
    main_rss: int
    main_uss: int
    worker_rss: tuple[int, ...]
    worker_uss: tuple[int, ...]
    fds: int
    shm_bytes: int
    segments: int
    respawns: int

    @property
    def workers_rss(self) -> int:
        return sum(self.worker_rss)

    @property
    def workers_uss(self) -> int:
        return sum(self.worker_uss)


def measure(epoch: int, seq: Any) -> Row:
    main = psutil.Process()
    info = main.memory_full_info()
    workers = [psutil.Process(pid).memory_full_info() for pid in seq.loader.pids]
    shm = [os.path.join(SHM_DIR, n) for n in os.listdir(SHM_DIR)
           if n.startswith(f"shmaug_{os.getpid()}_")] if os.path.isdir(SHM_DIR) else []
    return Row(epoch, info.rss, info.uss, tuple(w.rss for w in workers),
               tuple(w.uss for w in workers), main.num_fds(),
               sum(os.stat(p).st_blocks * 512 for p in shm), len(shm),
               seq.stats()["respawns"])


def header() -> str:
    return (f"{'epoch':>5} | {'main RSS/USS MiB':>16} | {'each worker RSS/USS MiB':>28} | "
            f"{'workers RSS/USS':>15} | {'fds':>3} | {'/dev/shm MiB (segs)':>19} | respawns")


def line(r: Row) -> str:
    each = ", ".join(f"{a / MIB:.0f}/{b / MIB:.0f}" for a, b in zip(r.worker_rss, r.worker_uss))
    return (f"{r.epoch:>5} | {r.main_rss / MIB:>7.1f}/{r.main_uss / MIB:<8.1f} | {each:>28} | "
            f"{r.workers_rss / MIB:>6.1f}/{r.workers_uss / MIB:<8.1f} | {r.fds:>3} | "
            f"{r.shm_bytes / MIB:>12.2f} ({r.segments}) | {r.respawns}")


def growth(base: Row, r: Row) -> list[str]:
    """What grew beyond the tolerance from ``base`` to ``r``, in words (empty: nothing)."""
    out = []
    for name, a, b in (("main RSS", base.main_rss, r.main_rss),
                       ("main USS", base.main_uss, r.main_uss),
                       ("workers' USS", base.workers_uss, r.workers_uss)):
        allowed = max(a * MEMORY_SLACK[0], MEMORY_SLACK[1])
        if b - a > allowed:
            out.append(f"{name} grew {(b - a) / MIB:.1f} MiB (allowed {allowed / MIB:.1f})")
    for name in ("fds", "shm_bytes", "segments"):
        a, b = getattr(base, name), getattr(r, name)
        if b > a:
            out.append(f"{name} grew from {a} to {b}")
    return out


# -- the run ---------------------------------------------------------------------------------


def make_sequence(samples: int, workers: int) -> Any:
    import shmaug

    x = np.random.default_rng(0).integers(0, 256, (samples, 32, 32, 1), dtype=np.uint8)
    y = np.arange(samples) % 10
    return shmaug.Sequence(x, y, batch_size=32, augment=shmaug.presets.glyph_distort(),
                           workers=workers, seed=0, shuffle=True)


def make_model() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 32, 1)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def read_epoch(seq: Any, kill_at: int | None, victim: int) -> None:
    """One epoch the way Keras reads a PyDataset (one generator over the indices, which makes
    it one pass); SIGKILL a worker before batch ``kill_at``."""
    def one_pass() -> Any:
        for i in range(len(seq)):
            if i == kill_at:
                os.kill(seq.loader.pids[victim % len(seq.loader.pids)], signal.SIGKILL)
            yield seq[i]

    for _ in one_pass():
        pass


@dataclass(frozen=True)
class Plan:
    epochs: int
    every: int  # measure every this many epochs (the first measurement is the baseline)
    kill_every: int
    fit_every: int
    samples: int
    workers: int


def soak(plan: Plan, out: Any) -> int:
    """Run ``plan``, print the table to ``out``; the exit status (0: nothing grew)."""
    from tqdm import tqdm

    seq, model = make_sequence(plan.samples, plan.workers), make_model()
    kills, fits, rows, problems = 0, 0, [], []
    print(f"soak: {plan}\ntolerance: {TOLERANCE}\n\n{header()}", file=out, flush=True)
    began = time.monotonic()
    with seq, tqdm(total=plan.epochs, desc="soak", file=sys.stderr, dynamic_ncols=True) as bar:
        for epoch in range(plan.epochs):
            if epoch % plan.fit_every == 0:
                model.fit(seq, epochs=1, verbose=0)
                fits += 1
            elif epoch % plan.kill_every == plan.kill_every // 2:
                read_epoch(seq, kill_at=len(seq) // 2, victim=kills)
                kills += 1
            else:
                read_epoch(seq, kill_at=None, victim=0)
            bar.update()
            if (epoch + 1) % plan.every == 0:
                rows.append(measure(epoch + 1, seq))
                print(line(rows[-1]), file=out, flush=True)
                problems += [f"epoch {epoch + 1}: {g}" for g in growth(rows[0], rows[-1])]
        respawns = seq.stats()["respawns"]
        pids = seq.loader.pids
    if respawns != kills:
        problems.append(f"{kills} workers killed but {respawns} respawned")
    psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=10)
    left = [p for p in pids if psutil.pid_exists(p)]
    segments = [n for n in os.listdir(SHM_DIR) if n.startswith(f"shmaug_{os.getpid()}_")] \
        if os.path.isdir(SHM_DIR) else []
    if left or segments:
        problems.append(f"after close: workers {left}, segments {segments}")
    print(f"\n{plan.epochs} epochs ({fits} by fit) in {time.monotonic() - began:.0f} s; "
          f"{kills} workers SIGKILLed, {respawns} respawned; after close: "
          f"{len(left)} workers, {len(segments)} segments", file=out)
    print("\n".join(["FAIL:", *problems]) if problems else
          f"PASS: nothing grew after epoch {rows[0].epoch} beyond the tolerance", file=out,
          flush=True)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=described(__doc__))
    parser.add_argument("--quick", action="store_true",
                        help="20 epochs, a kill every 5, one fit, rows every 10: a smoke run (CI)")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--every", type=int, default=10, help="measure every N epochs")
    parser.add_argument("--kill-every", type=int, default=10)
    parser.add_argument("--fit-every", type=int, default=50)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.quick:
        # Rows every 10 epochs: the baseline after the first kill and respawn (a CI run saw
        # the main process's USS settle 15 MiB up between epochs 5 and 10, then stay flat)
        plan = Plan(20, 10, 5, 20, 128, 2)
    else:
        plan = Plan(args.epochs, args.every, args.kill_every, args.fit_every, args.samples,
                    args.workers)
    for field in fields(plan):
        if getattr(plan, field.name) <= 0:
            parser.error(f"--{field.name.replace('_', '-')} must be positive")

    class Tee:
        def __init__(self, *streams: Any) -> None:
            self.streams = streams

        def write(self, text: str) -> None:
            for s in self.streams:
                s.write(text)

        def flush(self) -> None:
            for s in self.streams:
                s.flush()

    if args.out is None:
        return soak(plan, sys.stdout)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        return soak(plan, Tee(sys.stdout, f))


if __name__ == "__main__":
    sys.exit(main())
