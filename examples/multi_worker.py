"""Several hosts: MultiWorkerMirroredStrategy, each host augmenting only its shard of every epoch.

One command launches the whole cluster on this machine: HOSTS training processes, each with
its own `TF_CONFIG` on 127.0.0.1 ports, 1 shmaug worker and a small CNN, talking over
loopback (ring all-reduce on CPU). On real hosts, start the same script once per host with
`--task INDEX` and your own `TF_CONFIG`.

Keras' `Model.fit` does not run under MultiWorkerMirroredStrategy in Keras 3
(keras-team/keras#20585: "Attempt to convert a value (PerReplica...) to a Tensor"), so this
is a custom training loop over
`strategy.distribute_datasets_from_function(lambda ctx: seq.to_tf_dataset(input_context=ctx))`:
each host's Sequence becomes shard `ctx.input_pipeline_id` of `ctx.num_input_pipelines` of
one global order (same seed everywhere), and augments only that.

Run:
    python examples/multi_worker.py            # 2 hosts, a few epochs
    python examples/multi_worker.py --quick    # seconds (smoke test)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEED = 0
SIDE = 32
PER_REPLICA_BATCH = 16
CLASSES = 32


def make_data(quick: bool) -> tuple[Any, Any]:
    """The same synthetic glyphs on every host (a real run would read its files)."""
    from shmaug.sources.glyphs import render_glyphs

    per_class = 2 if quick else 16
    x, y, _ = render_glyphs(per_class * CLASSES, SIDE, classes=CLASSES, seed=0)
    return x[..., None], y


def augment() -> Any:
    import shmaug

    return shmaug.presets.glyph_distort()


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def launch(args: argparse.Namespace) -> None:
    """Start one process per host with its TF_CONFIG; wait for all; leave none behind."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(args.hosts)]
    procs = []
    try:
        for index in range(args.hosts):
            config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            env = {**os.environ, "TF_CONFIG": json.dumps(config)}
            cmd = [sys.executable, os.path.abspath(__file__), "--task", str(index)]
            for flag, value in (("--epochs", args.epochs), ("--record", args.record)):
                cmd += [flag, str(value)] if value else []
            cmd += ["--quick"] if args.quick else []
            procs.append(subprocess.Popen(cmd, env=env))
        deadline = time.monotonic() + args.timeout
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        failed = [i for i, p in enumerate(procs) if p.returncode != 0]
        if failed:
            sys.exit(f"hosts {failed} failed (exit codes {[procs[i].returncode for i in failed]})")
        print(f"all {args.hosts} hosts finished")
    finally:
        for p in procs:  # a host that hangs or outlives a failed peer is ended, then reaped
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def host(args: argparse.Namespace) -> None:
    """One host of the cluster: its TF_CONFIG says which."""
    import tensorflow as tf

    # The strategy first, before any other TensorFlow op; RING collectives work on CPU.
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING))
    import keras
    import numpy as np

    import shmaug

    x, y = make_data(args.quick)
    global_batch = PER_REPLICA_BATCH * strategy.num_replicas_in_sync
    # No shard arguments: the InputContext below decides (pipeline id / number of pipelines).
    seq_type = recording(args.record) if args.record else shmaug.Sequence
    seq = seq_type(x, y, batch_size=PER_REPLICA_BATCH, augment=augment(), workers=1,
                   seed=SEED, shuffle=True, drop_remainder=True)
    with seq:
        dist = strategy.distribute_datasets_from_function(
            lambda ctx: seq.to_tf_dataset(input_context=ctx))
        with strategy.scope():
            keras.utils.set_random_seed(0)
            model = keras.Sequential([
                keras.Input((SIDE, SIDE, 1)),
                keras.layers.Rescaling(1 / 255),
                keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
                keras.layers.GlobalMaxPooling2D(),
                keras.layers.Dense(CLASSES, activation="softmax"),
            ])
            optimizer = keras.optimizers.Adam(1e-2)
            optimizer.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)

        @tf.function
        def step(batch: Any) -> Any:
            def replica_step(xb: Any, yb: Any) -> Any:
                with tf.GradientTape() as tape:
                    loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                                      global_batch_size=global_batch)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

        epochs = args.epochs or (1 if args.quick else 3)
        for epoch in range(epochs):
            seq.epoch_tag = epoch  # (read by the --record Sequence only)
            losses = [float(step(batch)) for batch in dist]
            print(f"host {args.task} ({seq.num_shards} shards, shard {seq.shard_index}): "
                  f"epoch {epoch}, {len(losses)} steps, loss {np.mean(losses):.3f}, "
                  f"{seq.stats()['images']} images augmented here", flush=True)


def recording(record: str) -> Any:
    """A Sequence that also writes what this host feeds to ``record.<shard>``, for the test:
    one line per batch, [epoch, sample indices, a hash of each augmented sample]."""
    import shmaug

    class Recording(shmaug.Sequence):  # type: ignore[misc]
        epoch_tag = 0

        def __getitem__(self, index: int) -> Any:
            batch = super().__getitem__(index)
            (epoch, planned, in_order), took = self._runtime.passes.last  # shmaug's records
            if took:  # a pass took it, not a look
                rows = self.loader.indices(planned, epoch=epoch, in_order=in_order)
                line = [self.epoch_tag, rows.tolist(),
                        [hashlib.sha1(r.tobytes()).hexdigest()[:16] for r in batch[0]]]
                with open(f"{record}.{self.shard_index}", "a") as f:
                    f.write(json.dumps(line) + "\n")
            return batch

    return Recording


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--task", type=int, default=None, help="run as this host (TF_CONFIG set)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    parser.add_argument("--record", default=None, help="write what each host fed to RECORD.<k>")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.task is None:
        launch(args)
    else:
        host(args)


if __name__ == "__main__":  # required: spawned workers re-import this file
    main()
