"""Several hosts on JAX: Keras' own `fit` under `keras.distribution.DataParallel`, each process
augmenting only its shard of every epoch.

One command runs the whole cluster on this machine: PROCESSES training processes joined by
`jax.distributed.initialize` over 127.0.0.1 (JAX's CPU collectives, gloo), each with 1 shmaug
worker and a small CNN. Each process's `shmaug.Sequence` takes its shard from the Keras
distribution (process index of the process count; same seed everywhere, so one global order)
and turns the distribution's `auto_shard_dataset` off (Keras shards only tf.data datasets).
Keras assembles each global batch from the processes' parts, process 0's rows first.

Then it checks itself: every process ends with the same weights; the shards of each epoch
together hold every sample exactly once; and the weights equal (to 1e-5) those of one process
fed the same global batches (batch size PROCESSES x per-process batch, no distribution).

On real hosts, start the same script once per host with `--process-id I --coordinator
HOST:PORT` (and bind the coordinator where the others can reach it).

Needs JAX: pip install "shmaug[jax]" (Keras runs on it here, whatever KERAS_BACKEND says).

Run:
    python examples/multi_host_jax.py            # 2 processes, a few epochs
    python examples/multi_host_jax.py --quick    # seconds (smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

SEED = 0
SIDE = 32
PER_PROCESS_BATCH = 16
CLASSES = 16
TOLERANCE = 1e-5  # one process fed the same global batches: only summation order differs


def make_data(quick: bool) -> tuple[Any, Any]:
    """The same synthetic glyphs in every process (a real run would read its own files)."""
    from shmaug.sources.glyphs import render_glyphs

    per_class = 4 if quick else 16
    x, y, _ = render_glyphs(per_class * CLASSES, SIDE, classes=CLASSES, seed=0)
    return x[..., None], y


def make_model() -> Any:
    import keras

    keras.utils.set_random_seed(SEED)  # the same initial weights in every process
    model = keras.Sequential([
        keras.Input((SIDE, SIDE, 1)), keras.layers.Rescaling(1 / 255),
        keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(CLASSES)])
    model.compile(keras.optimizers.SGD(0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def train(args: argparse.Namespace, batch_size: int) -> tuple[Any, list[list[int]], Any]:
    """Fit for ``args.epochs``: the weights, each epoch's samples this process served, the
    shard it served."""
    import numpy as np

    import shmaug

    x, y = make_data(args.quick)
    with shmaug.Sequence(x, y, batch_size=batch_size, augment=shmaug.presets.glyph_distort(),
                         workers=1, seed=SEED, shuffle=True) as seq:
        model = make_model()
        model.fit(seq, epochs=args.epochs, verbose=0)
        served = [np.concatenate([seq.loader.indices(b, epoch=e) for b in range(len(seq))])
                  .tolist() for e in range(args.epochs)]
        shard = (seq.num_shards, seq.shard_index)
    # Replicated over the processes: each holds a whole copy on its own device.
    weights = [np.asarray(v.value.addressable_data(0)) for v in model.weights]
    return weights, served, shard


def process(args: argparse.Namespace) -> None:
    """One training process of the cluster."""
    import jax

    jax.distributed.initialize(coordinator_address=args.coordinator,
                               num_processes=args.processes, process_id=args.process_id,
                               coordinator_bind_address=args.coordinator)
    import keras
    import numpy as np

    keras.distribution.set_distribution(keras.distribution.DataParallel())
    weights, served, shard = train(args, PER_PROCESS_BATCH)
    out = Path(args.out)
    np.savez(out / f"weights{args.process_id}.npz", *weights)
    (out / f"served{args.process_id}.json").write_text(json.dumps(served))
    print(f"process {args.process_id}: shard {shard[1]} of {shard[0]}, {args.epochs} epochs, "
          f"{sum(map(len, served))} samples augmented here", flush=True)
    jax.distributed.shutdown()


def reference(args: argparse.Namespace) -> None:
    """One process, no distribution, fed the same global batches."""
    import numpy as np

    weights, _, _ = train(args, PER_PROCESS_BATCH * args.processes)
    np.savez(Path(args.out) / "reference.npz", *weights)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_all(args: argparse.Namespace, commands: list[list[str]], deadline: float) -> None:
    procs = [subprocess.Popen(c) for c in commands]
    try:
        for p in procs:
            code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
            if code:
                raise SystemExit(f"a process failed (exit code {code})")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def launch(args: argparse.Namespace) -> int:
    import tempfile

    import numpy as np

    deadline = time.monotonic() + args.timeout
    with tempfile.TemporaryDirectory() as out:
        base = [sys.executable, os.path.abspath(__file__), "--processes", str(args.processes),
                "--epochs", str(args.epochs), "--out", out] + (["--quick"] if args.quick else [])
        coordinator = f"127.0.0.1:{free_port()}"
        run_all(args, [[*base, "--process-id", str(i), "--coordinator", coordinator]
                       for i in range(args.processes)], deadline)
        run_all(args, [[*base, "--reference"]], deadline)
        load = [np.load(Path(out) / f"weights{i}.npz") for i in range(args.processes)]
        ref = np.load(Path(out) / "reference.npz")
        served = [json.loads((Path(out) / f"served{i}.json").read_text())
                  for i in range(args.processes)]
        n = len(make_data(args.quick)[1])
        for epoch in range(args.epochs):
            together = sorted(i for shard in served for i in shard[epoch])
            assert together == list(range(n)), f"epoch {epoch}: not every sample exactly once"
        for i, w in enumerate(load[1:], start=1):
            for a, b in zip(load[0].values(), w.values()):
                np.testing.assert_array_equal(a, b, err_msg=f"process {i}'s weights differ")
        gap = max(float(np.max(np.abs(a - b))) for a, b in zip(load[0].values(), ref.values()))
        assert gap <= TOLERANCE, f"weights differ from one process fed the same batches: {gap}"
    print(f"ok: {args.processes} processes ended with the same weights; each epoch's shards "
          f"held every sample once; one process fed the same global batches is within "
          f"{gap:.1e} of them")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=None, help="default 3 (2 with --quick)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    parser.add_argument("--process-id", type=int, default=None, help="run as this process")
    parser.add_argument("--coordinator", default=None, help="HOST:PORT of process 0")
    parser.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.epochs = args.epochs or (2 if args.quick else 3)
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        print("This example runs Keras on JAX, which is not installed here. Fix: pip install "
              "'shmaug[jax]'.", file=sys.stderr)
        return 2
    if args.reference:
        reference(args)
    elif args.process_id is not None:
        process(args)
    else:
        return launch(args)
    return 0


if __name__ == "__main__":  # required: spawned workers re-import this file
    sys.exit(main())
