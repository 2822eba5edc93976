"""What the main process spends handing each batch to Keras, by stage, on every backend.

``python -m bench.handoff [--backends tensorflow,jax,torch] [--python jax=PATH ...] [--quick]``

The main process is the one part no worker count can add to: on a 16-core host its own work
per batch is the ceiling of every pipeline (issue 38). This study splits that work on any host,
so the 2-core machine tracks what only a large one shows. Per backend (a child process with
``KERAS_BACKEND`` set), per case (W1 float16 glyphs; W2 photos as uint8 and as float32, 2
workers), one ``shmaug.Sequence`` is read three ways, an epoch each after a warm-up epoch,
and the main process's CPU time (``time.process_time``: all its threads, not the workers) and
wall time are taken around each:

- ``numpy``: Keras' ``PyDatasetAdapter.get_numpy_iterator()``, no conversion: shmaug's own
  hand-off (dispatching tasks, collecting answers, copying or lending the slot, gathering y),
  and the wait for batches (the consumer's wait share, from ``seq.stats()``);
- ``tensor``: the backend's iterator (``get_tf_dataset`` / ``get_jax_iterator`` /
  ``get_torch_dataloader``): minus ``numpy``, the conversion to the framework's tensor;
- ``fit``: ``Model.fit`` for one epoch of a minimal model (a 2x2 crop into one Dense unit,
  Keras' compiled step): minus ``tensor``, Keras' own per-step work.

Each case runs with the batches Keras asks for lent from their slot (today's ``Sequence``)
and copied out (as before 19effa7's successor; the copy forced in the child), and on torch
lent but handed to Keras as numpy (as before ``shmaug.keras._batches``: Keras' torch backend
then copies each array), interleaved.
Target (issue 38 §1): W2 float32 under ``fit``, the main process's own work (CPU, not waiting)
is at most 15% of one core at the 2-core rate.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.common.harness import (base_parser, child_env, described, missing_module, progress,
                                  run_json, summarize)
from bench.common.report import Row, environment, write_results

BACKENDS = ("tensorflow", "jax", "torch")
MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}  # (what each needs)
CASES = ("W1 float16", "W2 uint8", "W2 float32")
# The last, torch only: lent, but handed to Keras as numpy (as before shmaug.keras._batches),
# which Keras' torch backend copies (np.array) before making its tensor.
HANDOFFS = ("lend", "copy", "lend as numpy")
SIZES = {"W1": (8192, 256), "W2": (1024, 64)}  # 32 and 16 batches: 8x and 4x the ring
RING = 4  # max_queue_size: small, so an epoch is mostly made while it is read, not ahead
QUICK_SIZES = {"W1": (256, 64), "W2": (32, 16)}
TARGET_SHARE = 0.15


# -- the child: one backend ----------------------------------------------------------------


def _force_copy(on: bool) -> None:
    """The ``copy`` hand-off: every batch Keras asks for copied out, as before lending."""
    from shmaug.engine.handoff import prefetch as _prefetch

    original = getattr(_prefetch.Prefetcher, "_original_produce", None)
    if original is None:
        original = _prefetch.Prefetcher.produce
        _prefetch.Prefetcher._original_produce = original  # type: ignore[attr-defined]

    def produce(self: Any, key: Any, rows: int, *, handoff: Any) -> Any:
        if handoff is _prefetch.Handoff.LEND:
            handoff = _prefetch.Handoff.COPY
        return original(self, key, rows, handoff=handoff)

    _prefetch.Prefetcher.produce = produce if on else original  # type: ignore[method-assign]


def _numpy_to_keras(on: bool) -> None:
    """The ``lend as numpy`` hand-off: Keras gets numpy arrays, not the backend's tensors."""
    from shmaug.keras import sequence

    original = getattr(sequence, "_original_for_keras", None)
    if original is None:
        original = sequence.for_keras
        sequence._original_for_keras = original  # type: ignore[attr-defined]
    sequence.for_keras = (lambda batch: batch) if on else original  # type: ignore[assignment]


def handoffs(backend: str) -> tuple[str, ...]:
    return HANDOFFS if backend == "torch" else HANDOFFS[:2]


def _sequence(case: str, quick: bool) -> Any:
    import numpy as np

    import shmaug
    from bench.common.workloads import ToFloat32, augment_for, build_data

    workload, dtype = case.split()
    n, bs = (QUICK_SIZES if quick else SIZES)[workload]
    x, _ = build_data(workload, n)
    augment = augment_for(workload, "shmaug")
    if dtype == "uint8":
        augment = augment.fn  # the same ops, without the float32 conversion
    assert dtype != "float32" or isinstance(augment, ToFloat32)
    y = np.zeros((n, 1), np.float32)
    return shmaug.Sequence(x, y, batch_size=bs, augment=augment, workers=2, seed=0,
                           max_queue_size=RING)


def _model(shape: tuple[int, ...]) -> Any:
    """A real compiled step whose compute is next to nothing (a 2x2 crop into one Dense unit):
    on the CPU the model's own math would run in the main process and swamp the hand-off."""
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape)
    h = keras.layers.Cropping2D(((shape[0] - 2) // 2, (shape[1] - 2) // 2))(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Flatten()(h)))
    model.compile("sgd", "mse")
    return model


def _native(adapter: Any, backend: str) -> Any:
    if backend == "tensorflow":
        return adapter.get_tf_dataset()
    if backend == "jax":
        return adapter.get_jax_iterator()
    return adapter.get_torch_dataloader()


def _timed(run: Any) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - c0, time.perf_counter() - t0


def _stages(seq: Any, backend: str) -> dict[str, float]:
    """CPU and wall seconds of one epoch read each way, and the wait share of the numpy one."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    def epoch(native: bool) -> None:
        adapter = PyDatasetAdapter(seq, shuffle=False)
        adapter.on_epoch_begin()
        for _ in (_native(adapter, backend) if native else adapter.get_numpy_iterator()):
            pass
        adapter.on_epoch_end()

    out: dict[str, float] = {}
    epoch(False)  # warm-up: workers start, the first batches are cut
    seq.reset_stats()
    out["numpy_cpu"], out["numpy_wall"] = _timed(lambda: epoch(False))
    out["wait_share"] = float(seq.stats()["wait_fraction"])
    epoch(True)  # the backend's iterator warms up (tf.data traces its generator)
    out["tensor_cpu"], out["tensor_wall"] = _timed(lambda: epoch(True))
    model = _model(tuple(seq[0][0].shape[1:]))
    model.fit(seq, epochs=1, verbose=0)  # compiles the step
    out["fit_cpu"], out["fit_wall"] = _timed(lambda: model.fit(seq, epochs=1, verbose=0))
    return out


def child(backend: str, quick: bool, rounds: int) -> None:
    from bench.common.harness import report_json

    results: list[dict[str, Any]] = []
    cases = CASES[-1:] if quick else CASES  # a smoke run: one case, both hand-offs
    sequences = {case: _sequence(case, quick) for case in cases}
    try:
        for r in range(rounds):
            kinds = handoffs(backend)
            for handoff in (kinds if r % 2 == 0 else kinds[::-1]):
                _force_copy(handoff == "copy")
                _numpy_to_keras(handoff == "lend as numpy")
                for case, seq in sequences.items():
                    xb = seq[0][0]
                    results.append({"case": case, "handoff": handoff, "round": r,
                                    "batches": len(seq), "images": len(seq) * seq.batch_size,
                                    "mb_per_batch": xb.nbytes / 1e6, **_stages(seq, backend)})
    finally:
        for seq in sequences.values():
            seq.close()
    report_json(results)


# -- the parent: backends side by side -------------------------------------------------------


def rows(backend: str, runs: list[dict[str, Any]], cpu: str) -> list[Row]:
    out: list[Row] = []
    for case in CASES:
        sec = f"{backend}, {case}, 2 workers ({cpu})"
        for handoff in handoffs(backend):
            mine = [r for r in runs if r["case"] == case and r["handoff"] == handoff]
            if not mine:
                continue
            mb = mine[0]["mb_per_batch"]
            stages = {
                "shmaug's hand-off (numpy iterator)": [r["numpy_cpu"] for r in mine],
                "conversion to the backend's tensor": [r["tensor_cpu"] - r["numpy_cpu"]
                                                       for r in mine],
                "Keras' per-step work (fit)": [r["fit_cpu"] - r["tensor_cpu"] for r in mine],
            }
            for stage, cpu_s in stages.items():
                per_batch = summarize([1e3 * c / r["batches"] for c, r in zip(cpu_s, mine)])
                out.append(Row(sec, handoff, f"{stage}: CPU ms per batch", "ms", per_batch,
                               note=f"{per_batch.median / mb:.3f} ms per MB ({mb:.1f} MB/batch)"))
            wait = summarize([r["wait_share"] for r in mine])
            out.append(Row(sec, handoff, "numpy iterator: share of its time waiting", "",
                           wait))
            share = summarize([r["fit_cpu"] / r["fit_wall"] for r in mine])
            target = ""
            if case == "W2 float32":
                met = share.median <= TARGET_SHARE
                target = f"<= {TARGET_SHARE:.0%} of a core: {'met' if met else 'MISSED'}"
            out.append(Row(sec, handoff, "fit: main-process CPU / wall (share of one core)", "",
                           share, target=target))
            rate = summarize([r["images"] / r["fit_wall"] for r in mine])
            out.append(Row(sec, handoff, "fit: images/s", "images/s", rate))
    return out


def main() -> None:
    parser = base_parser(described(__doc__), "bench/results/handoff")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated Keras backends to measure (default: %(default)s)")
    parser.add_argument("--python", action="append", default=[], metavar="BACKEND=PATH",
                        help="the interpreter for a backend (a venv that has it; the figures "
                             "in docs/performance.md took one for jax and one for torch)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds (default: %(default)s; 1 with --quick)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.quick, 1 if args.quick else args.rounds)
        return
    pythons = dict(p.split("=", 1) for p in args.python)
    t0 = time.perf_counter()
    backends = [b for b in args.backends.split(",") if b]
    all_rows: list[Row] = []
    cpu = environment().get("cpu", "?")
    bar = progress(len(backends), "backends")
    for backend in backends:
        absent = None if backend in pythons else missing_module([MODULES.get(backend, backend)])
        if absent is not None:  # (told as skipped, as the other benchmarks tell it)
            bar.update()
            all_rows.append(Row(backend, "-", "run", "", status="skipped",
                                note=f"{absent}; pass --python {backend}=PATH of a venv with it"))
            continue
        argv = [pythons.get(backend, sys.executable), "-m", "bench.handoff", "--child", backend,
                "--rounds", str(args.rounds)] + (["--quick"] if args.quick else [])
        out = run_json(argv, 1800.0, env=child_env(KERAS_BACKEND=backend))
        bar.update()
        if out.ok:
            all_rows += rows(backend, out.value, cpu)
        else:
            all_rows.append(Row(f"{backend}", "-", "run", "", status=out.status,
                                note=(out.error or "")[:200]))
    bar.close()
    meta = {"quick": args.quick, "environment": environment(), "wall_s": time.perf_counter() - t0,
            "command": "python -m bench.handoff " + " ".join(sys.argv[1:])}
    print(write_results(args.out, "handoff", all_rows, meta))


if __name__ == "__main__":
    main()
