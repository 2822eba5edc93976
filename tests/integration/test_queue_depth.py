"""The default queue gives every worker a batch of its own (issue 58): with 8 workers bound by
sleeping (a slow decode) and a consumer that sleeps too (a slow GPU step), no batch is asked
for while the ring has fewer slots ahead than workers, every worker makes its share, and
``stats()["queue"]`` says so; a ``max_queue_size`` given too small for the workers (8, the
fixed default before) is kept, and ``stats()`` then says the queue, not the workers, held the consumer up. The same holds
for a ``Loader`` in a plain loop and a ``Sequence`` under ``fit``, ``evaluate`` and
``predict`` (which hold lent batches, so fewer slots are free ahead).

Counts, not timings: which worker made each sample, and the asks the ring was short at.
"""

from __future__ import annotations

import collections
import time

import numpy as np
import pytest

import shmaug
from shmaug import platform
from shmaug.engine.handoff import depth
from tests import _ops
from tests._helpers import needs_keras

WORKERS, BATCH = 8, 4
X = np.zeros((192, 4, 4, 1), np.float32)  # 48 batches of 4
Y = np.zeros(len(X), np.float32)


def _made_by(loader: shmaug.Loader) -> collections.Counter:
    """Samples each worker made in one pass, a consumer step (1 ms of sleep) per batch."""
    made: collections.Counter = collections.Counter()
    for xb, _ in loader:
        made.update(xb[:, 0, 0, 0].astype(np.int64).tolist())
        time.sleep(0.001)
    return made


def test_the_default_queue_gives_every_worker_a_batch_of_its_own() -> None:
    with shmaug.Loader(X, Y, batch_size=BATCH, augment=_ops.sleepy_pid, workers=WORKERS,
                       start_method="fork", seed=1, shuffle=True) as loader:
        pids = set(loader.pids)
        made = _made_by(loader)
        queue = loader.stats()["queue"]
    assert queue["slots"] == depth.for_workers(WORKERS) == 18, queue
    assert queue["why"].startswith("18 slots: the default for 8 workers"), queue
    assert queue["slot_waits"] == 0 and not queue["limited"], queue
    assert set(made) == pids and sum(made.values()) == len(X), made
    fair = len(X) / WORKERS
    assert min(made.values()) >= fair / 4, made  # each worker made its share, roughly


def test_a_queue_too_small_for_the_workers_is_kept_and_named_the_limit() -> None:
    with shmaug.Loader(X, Y, batch_size=BATCH, augment=_ops.sleepy_pid, workers=WORKERS,
                       start_method="fork", seed=1, shuffle=True,
                       max_queue_size=8) as loader:
        made = _made_by(loader)
        stats = loader.stats()
    queue = stats["queue"]
    assert queue["slots"] == 8 and queue["why"] == "max_queue_size=8 as given", queue
    # 7 slots ahead of the batch asked for, for 8 workers: short at every ask
    assert queue["slot_waits"] == stats["batches"] == len(X) // BATCH, queue
    assert queue["limited"] and stats["hit_rate"] < 1, stats  # the first batch waited, at least
    assert sum(made.values()) == len(X)


@needs_keras
@pytest.mark.parametrize("max_queue_size", [None, 8])
def test_a_sequence_under_fit_evaluate_and_predict(max_queue_size: int | None) -> None:
    import keras

    from shmaug.keras.callbacks import _remedy

    class SlowStep(keras.callbacks.Callback):
        """A GPU step that takes a while, as the consumer's sleep."""

        def _sleep(self, batch, logs=None):
            time.sleep(0.001)

        on_train_batch_end = on_test_batch_end = on_predict_batch_end = _sleep

    model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with shmaug.Sequence(X, Y, batch_size=BATCH, augment=_ops.sleepy_pid, workers=WORKERS,
                         start_method="fork", seed=1, max_queue_size=max_queue_size) as seq:
        for run in (lambda: model.fit(seq, epochs=1, verbose=0, callbacks=[SlowStep()]),
                    lambda: model.evaluate(seq, verbose=0, callbacks=[SlowStep()]),
                    lambda: model.predict(seq, verbose=0, callbacks=[SlowStep()])):
            seq.reset_stats()
            run()
            stats = seq.stats()
            queue = stats["queue"]
            assert stats["batches"] >= len(seq), stats
            if max_queue_size is None:
                assert queue["slots"] == 18 and queue["slot_waits"] == 0, queue
                assert not queue["limited"], queue
                assert len(stats["worker_busy"]) == WORKERS and min(stats["worker_busy"]) > 0
            else:
                # (each batch the loader handed over: the facade's `batches` are what Keras
                # was served, its probes' batches served again included)
                handed = seq.loader.stats()["batches"]
                assert queue["slots"] == 8 and queue["slot_waits"] == handed, queue
            # StallMonitor's remedy for an input-bound epoch: the queue when it was the limit
            assert ("The queue was the limit" in _remedy(stats)) == queue["limited"], stats


@needs_keras
def test_stall_monitor_names_the_queue_when_it_was_the_limit() -> None:
    from shmaug.keras.callbacks import _remedy

    queue = {"slots": 8, "why": "max_queue_size=8 as given", "slot_waits": 48, "limited": True}
    said = _remedy({"queue": queue})
    assert "The queue was the limit" in said and "max_queue_size=8 as given" in said
    assert "more `workers`" in _remedy({"queue": {**queue, "limited": False}})
    bound = _remedy({"queue": {**queue, "by": depth.SHM}})  # /dev/shm, not a setting
    short = _remedy({"queue": queue, "batches": 2,  # (the README's start on 500 images)
                     "worker_busy": [0.6, 0.4, 0.0, 0.0]})
    assert "An epoch of 2 batches is too short" in short and ".npy" not in short
    stalled = _remedy({"queue": {**queue, "limited": False}, "batches": 5,
                       "worker_busy": [1.0, 0.99]})  # (a slow augment, steps_per_epoch=5)
    assert "too short" not in stalled and "cheaper augmentation" in stalled
    assert "more shared memory (Docker: `--shm-size" in bound and "a larger" not in bound
    capped = _remedy({"queue": {**queue, "by": depth.MEMORY}})  # 2 GiB, with room for more
    assert "Try: a `max_queue_size` of the batches" in capped and "Docker" not in capped
    assert "more `workers`" in _remedy({"queue": None})  # nothing to augment: no ring
    idle = _remedy({"queue": None, "worker_busy": [0.05, 0.17]})  # a short epoch's wait
    assert "idle most of the epoch" in idle and "Try: more `workers`" not in idle
    # what asks no change is logged, not warned (under filterwarnings("error") it ended fit)
    from shmaug.keras.callbacks import _not_the_pipeline

    assert _not_the_pipeline({"queue": None, "worker_busy": [0.05, 0.17]}) == idle
    assert _not_the_pipeline({"queue": queue, "batches": 2, "worker_busy": [0.6, 0.4]})
    assert not _not_the_pipeline({"queue": queue, "worker_busy": [0.05, 0.17]})  # the queue
    assert not _not_the_pipeline({"queue": None, "batches": 5, "worker_busy": [1.0, 0.99]})
    # as many workers as cores, or more (the README's workers=4 on 2 cores), busy sharing them
    cores = platform.cpu_count()
    shared = _remedy({"queue": None, "worker_busy": [0.35, 0.64] * cores})
    assert f"have this machine's {cores} cores" in shared and "more `workers`" not in shared
    assert "more `workers`" in _remedy({"queue": None, "worker_busy": [0.9] * (cores - 1)})
