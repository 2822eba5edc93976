"""Worker start-up when the user's augment lives in a module that imports a framework.

``python -m bench.start_methods [--framework tensorflow|jax|torch|none] [--quick]``
``python -m bench.start_methods --subclass [--quick]`` (Keras' backend from ``KERAS_BACKEND``)
``python -m bench.start_methods --pydataset [--quick]`` (the same)

A user's ``user_ops.py`` imports TensorFlow (or JAX, torch) at its top and defines a
sleep-bound augment (``SLEEP_S`` per sample); the main script imports the framework first, as a
training script does, then runs one ``shmaug.Sequence`` epoch with 2 workers under each start
method, and with ``workers=0``. Each probe is a fresh process (the forkserver starts once per
process: its first loader pays for it, so a second ``Sequence`` is timed too), contenders
interleaved round by round.

Per start method: construction to the first batch, the whole epoch (2 s of sleep in all: with
2 workers it should take about 1 s), each worker's unique memory (USS) after the epoch, and a
later ``Sequence``'s construction to first batch in the same process, and the next batch
after the idle stop (which 120 s without an ask makes) started the workers again.
Targets (issue 38): the default's first batch within 1.0 s of fork's; each worker <= 80 MB
USS; ``workers=2`` under the default faster than ``workers=0``.

``--subclass``: the user's module imports Keras instead and defines ``class
Sleepy(shmaug.Sequence)`` whose ``augment`` hook sleeps, as Keras' own speed-up test does
(``py_dataset_adapter_test.test_speedup``); the probe times that subclass. Targets (issue 51):
the default's first batch within 1.0 s of construction; ``workers=2`` faster than ``workers=0``
(the speed-up case).

``--pydataset``: Keras' speed-up test as a user ports it: the user's module uses Keras at
import time (it defines Keras' ``ExamplePyDataset``, a ``keras.utils.PyDataset`` subclass, at
its top), and the augment is a callable object of a class defined beside it that sleeps. A
fresh worker gets that class by value (``engine.workers.shipping``) instead of importing the
module, which would run Keras and its backend. Targets (issue 60): as ``--subclass``'s.
"""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from bench.common.harness import (
    REPO_ROOT, base_parser, child_env, described, progress, run_json, summarize
)
from bench.common.report import Row, environment, write_results

SAMPLES, BATCH, SLEEP_S = 40, 4, 0.05  # 2 s of sleep in all, in 10 batches
METHODS = ("default", "fork", "forkserver", "spawn", "in-process")
QUICK_METHODS = ("default", "in-process")  # a smoke run: every code path, not every method
FRAMEWORK_USE = {"tensorflow": "tensorflow", "jax": "jax.numpy", "torch": "torch", "none": "json",
                 "keras": "keras"}

USER_OPS = textwrap.dedent('''
    """A user's augment module: it imports a framework for other reasons than its ops."""
    import time

    import {framework}  # noqa: F401  -- the point of this probe


    def augment(image, rng):
        time.sleep({sleep})
        return image
''')

PYDATASET = textwrap.dedent('''

    import numpy as np


    class ExamplePyDataset(keras.utils.PyDataset):
        """Keras' own (py_dataset_adapter_test): defining it runs Keras at import time."""

        def __init__(self, x, y, batch_size, delay=0, **kwargs):
            super().__init__(**kwargs)
            self.x, self.y, self.batch_size, self.delay = x, y, batch_size, delay

        def __len__(self):
            return -(-len(self.x) // self.batch_size)

        def __getitem__(self, idx):
            time.sleep(self.delay)
            at = slice(idx * self.batch_size, (idx + 1) * self.batch_size)
            return self.x[at], self.y[at]


    class Sleep:
        """The augment: a callable object whose class the module defines."""

        def __call__(self, image, rng):
            time.sleep({sleep})
            return image
''')

SUBCLASS = textwrap.dedent('''

    import shmaug


    class Sleepy(shmaug.Sequence):
        """A subclass whose hook runs in the workers (Keras' ExamplePyDataset, delay and all)."""

        def augment(self, image, rng):
            time.sleep({sleep})
            return image
''')

PROBE = textwrap.dedent('''
    import {framework}  # noqa: F401  -- a training script imports it first
    import sys, time

    import numpy as np

    import shmaug
    import user_ops
    from bench.common.harness import report_json, worker_memory
    from shmaug.keras import _idle

    method = sys.argv[1]
    Sequence = shmaug.Sequence  # imports Keras (and its backend) before anything is timed
    workers = 0 if method == "in-process" else 2
    x, y = np.zeros(({samples}, 32, 32, 3), np.uint8), np.zeros({samples}, np.float32)


    def sequence():
        make, hook = {make}
        return make(x, y, batch_size={batch}, augment=hook, workers=workers, shuffle=False,
                    start_method=None if method in ("default", "in-process") else method)


    t0 = time.perf_counter()
    with sequence() as seq:
        first = None
        for i in range(len(seq)):
            seq[i]
            if first is None:
                first = time.perf_counter() - t0
        total = time.perf_counter() - t0
        memory = worker_memory(seq.loader.pids) if workers else []
        resolved = seq.loader._run.pool._ctx.get_start_method() if workers else "none"
        _idle.stop_if_idle(seq, time.monotonic(), after_s=0.0)  # as 120 s without an ask do
        t0 = time.perf_counter()
        seq[1]  # (not the held first batch: the workers start again for this one)
        restart = time.perf_counter() - t0
    t0 = time.perf_counter()
    with sequence() as seq:
        seq[0]
        later = time.perf_counter() - t0
    report_json({{"first_batch_s": first, "epoch_s": total, "start_method": resolved,
                 "later_first_batch_s": later, "restart_first_batch_s": restart,
                 "uss_mib": [m["uss"] for m in memory]}})
''')


# Per case: what the user's module adds, and what the probe's Sequence is made of and with.
CASES = {"plain": ("", "(Sequence, user_ops.augment)"),
         "subclass": (SUBCLASS, "(user_ops.Sleepy, None)"),
         "pydataset": (PYDATASET, "(Sequence, user_ops.Sleep())")}


def measure(framework: str, repeats: int, case: str = "plain",
            methods: tuple[str, ...] = METHODS) -> dict[str, list[dict[str, Any]]]:
    """``repeats`` rounds, each running every start method of ``methods`` once in a fresh
    process, the order rotated from round to round."""
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    with tempfile.TemporaryDirectory(prefix="shmaug-bench-") as tmp:
        extra, make = CASES[case]
        Path(tmp, "user_ops.py").write_text((USER_OPS + extra).format(
            framework=FRAMEWORK_USE[framework], sleep=SLEEP_S))
        script = Path(tmp, "probe.py")
        script.write_text(PROBE.format(framework=FRAMEWORK_USE[framework], samples=SAMPLES,
                                       batch=BATCH, make=make))
        bar = progress(repeats * len(methods), "start methods")
        for r in range(repeats):
            for method in methods[r % len(methods):] + methods[:r % len(methods)]:
                env = child_env(PYTHONPATH=f"{tmp}{os.pathsep}{REPO_ROOT}")
                out = run_json([sys.executable, str(script), method], 180.0, env=env)
                results[method].append(out.value if out.ok else {"error": out.error})
                bar.update()
        bar.close()
    return results


def rows(framework: str, results: dict[str, list[dict[str, Any]]], subclass: str = "",
         case: str = "plain") -> list[Row]:
    """First batch, epoch and worker USS per start method, judged against issue 38's targets
    (issue 51's and 60's for the Keras cases; ``subclass``: the Keras backend they ran on)."""
    imports = "imports nothing" if framework == "none" else f"imports {framework}"
    sec = f"start-up, augment in a module that {imports}, 2 workers"
    if case == "subclass":
        sec = f"start-up, a Sequence subclass in a module that imports Keras ({subclass}), " \
              "2 workers"
    elif case == "pydataset":
        sec = f"start-up, an augment object from a module that defines a PyDataset subclass " \
              f"({subclass}), 2 workers"
    ok = {m: [r for r in runs if "error" not in r] for m, runs in results.items()}
    median = {m: summarize([r["first_batch_s"] for r in runs]).median if runs else None
              for m, runs in ok.items()}
    epoch = {m: summarize([r["epoch_s"] for r in runs]).median if runs else None
             for m, runs in ok.items()}
    out: list[Row] = []
    for method, runs in ok.items():
        failed = [r["error"] for r in results[method] if "error" in r]
        status = "ok" if not failed else f"{len(failed)} failed: {failed[-1]}"
        resolved = sorted({r["start_method"] for r in runs})
        name = f"{method} ({', '.join(resolved)})" if method == "default" else method
        first = summarize([r["first_batch_s"] for r in runs]) if runs else None
        target = ""
        if method == "default" and case != "plain" and median["default"] is not None:
            met = median["default"] <= 1.0
            target = f"within 1.0 s of construction: {'met' if met else 'MISSED'}"
        elif method == "default" and median["default"] is not None and \
                median.get("fork") is not None:
            gap = median["default"] - median["fork"]
            target = f"within 1.0 s of fork's ({gap:+.2f} s): {'met' if gap <= 1.0 else 'MISSED'}"
        out.append(Row(sec, name, "construction to first batch", "s", first, status,
                       target=target))
        target = ""
        if method == "default" and epoch["default"] is not None and \
                epoch.get("in-process") is not None:
            met = epoch["default"] < epoch["in-process"]
            target = f"< workers=0's {epoch['in-process']:.2f} s: {'met' if met else 'MISSED'}"
        out.append(Row(sec, name, f"epoch of {SAMPLES * SLEEP_S:.0f} s of sleep", "s",
                       summarize([r["epoch_s"] for r in runs]) if runs else None, status,
                       target=target))
        out.append(Row(sec, name, "a later Sequence: construction to first batch", "s",
                       summarize([r["later_first_batch_s"] for r in runs]) if runs else None,
                       status))
        out.append(Row(sec, name, "after an idle stop: the next batch", "s",
                       summarize([r["restart_first_batch_s"] for r in runs]) if runs else None,
                       status))
        uss = [max(r["uss_mib"]) for r in runs if r["uss_mib"]]
        if uss:
            st = summarize(uss)
            out.append(Row(sec, name, "USS per worker (the larger of 2)", "MiB", st, status,
                           target=f"<= 80 MB: {'met' if st.median <= 80e6 / 2**20 else 'MISSED'}"))
    return out


def main() -> None:
    parser = base_parser(described(__doc__), "bench/results/start_methods")
    parser.add_argument("--framework", choices=sorted(FRAMEWORK_USE), default="tensorflow")
    parser.add_argument("--subclass", action="store_true",
                        help="the module imports Keras and subclasses shmaug.Sequence "
                             "(the backend: KERAS_BACKEND)")
    parser.add_argument("--pydataset", action="store_true",
                        help="the module defines a keras.utils.PyDataset subclass at its top "
                             "and an augment class beside it (the backend: KERAS_BACKEND)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    case = "pydataset" if args.pydataset else "subclass" if args.subclass else "plain"
    framework = "keras" if case != "plain" else args.framework
    backend = os.environ.get("KERAS_BACKEND", "tensorflow") if case != "plain" else ""
    t0 = time.perf_counter()
    results = measure(framework, 1 if args.quick else args.repeats, case,
                      QUICK_METHODS if args.quick else METHODS)
    command = f"KERAS_BACKEND={backend} python -m bench.start_methods --{case}" \
        if case != "plain" else f"python -m bench.start_methods --framework {framework}"
    meta = {"quick": args.quick, "framework": framework, "backend": backend,
            "environment": environment(), "wall_s": time.perf_counter() - t0,
            "command": command}
    name = f"start_methods_{case}_{backend}" if case != "plain" else f"start_methods_{framework}"
    text = write_results(args.out, name, rows(framework, results, backend, case), meta)
    print(text)


if __name__ == "__main__":
    main()
