"""workers="auto" with real processes: resizes between (and inside) epochs change no batch, a
removed worker finishes its tasks and is never mistaken for a dead one, and the count the
rule chooses from real figures is the count that runs."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time

import numpy as np
import psutil
import pytest

import shmaug
from shmaug.engine.autoscale import _autotune
from shmaug import platform as _platform
from tests import _ops
from tests._helpers import assert_same_batches, needs_keras

pytestmark = pytest.mark.timeout(120)

METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]
SETTINGS = {"batch_size": 4, "seed": 7, "shuffle": True}


@pytest.fixture
def two_cores(monkeypatch):
    """"auto" starts with the usable cores: two, as on CI, whatever this machine has."""
    monkeypatch.setattr(_platform, "cpu_count", lambda: 2)


@pytest.fixture(scope="module")
def reference():
    images = np.random.default_rng(1234).integers(0, 256, size=(40, 12, 12), dtype=np.uint8)
    with shmaug.Loader(images, np.arange(40), augment=_ops.noisy, workers=0,
                       **SETTINGS) as loader:
        return images, [list(loader) for _ in range(3)]


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("method", METHODS)
def test_resizes_inside_and_between_epochs_change_no_batch(reference, two_cores, method):
    images, expected = reference
    with shmaug.Loader(images, np.arange(40), augment=_ops.slow_noisy, workers="auto",
                       start_method=method, **SETTINGS) as loader:
        assert loader.auto_workers and loader.workers == 2 and len(loader.pids) == 2
        it = iter(loader)
        epoch0 = [next(it) for _ in range(3)]
        removed = loader.pids[-1]
        loader._run.resize(1)  # mid-epoch: the removed worker still holds prefetched tasks
        assert loader.workers == 1 and loader.stats()["workers"] == 1
        assert loader.pids == [p for p in loader.pids if p != removed]
        epoch0 += list(it)
        epoch1 = list(loader)
        assert gone(removed)  # it finished its tasks and exited by itself, and was reaped
        loader._run.resize(2)  # between epochs
        it = iter(loader)
        epoch2 = [next(it) for _ in range(2)]
        loader._run.resize(1)  # down and straight up again: the slot waits for its worker
        loader._run.resize(2)
        epoch2 += list(it)
        stats = loader.stats()
    assert stats["respawns"] == 0 and stats["workers"] == 2 and len(stats["worker_busy"]) == 2
    for got, want in zip([epoch0, epoch1, epoch2], expected):
        assert_same_batches(got, want)


def test_a_removed_worker_that_dies_has_its_tasks_redone_not_its_place_refilled(
        reference, two_cores, caplog):
    images, expected = reference
    with shmaug.Loader(images, np.arange(40), augment=_ops.slow_noisy, workers="auto",
                       start_method="fork", **SETTINGS) as loader:
        it = iter(loader)
        epoch0 = [next(it)]
        removed = loader.pids[-1]
        loader._run.resize(1)
        os.kill(removed, signal.SIGKILL)  # while it holds prefetched tasks of 40 ms each
        with caplog.at_level(logging.WARNING, logger="shmaug"):
            epoch0 += list(it)
        epoch1 = list(loader)
        stats = loader.stats()
    assert "retiring, exited with code -9" in caplog.text
    assert stats["respawns"] == 0 and stats["workers"] == 1
    assert_same_batches(epoch0, expected[0])
    assert_same_batches(epoch1, expected[1])


def test_a_slow_consumer_of_a_light_op_is_fed_by_fewer_workers(reference, two_cores,
                                                                monkeypatch, caplog):
    # The real figures, the rule's own decision, the resize it asks for. The rule's
    # thresholds are unit-tested (test_autotune); here they are loosened so that a loaded
    # machine cannot push the consumer's wait over them.
    monkeypatch.setattr(_autotune, "TARGET_WAIT", 0.25)
    monkeypatch.setattr(_autotune, "MIN_SECONDS", 0.2)
    images, expected = reference
    got = []
    with caplog.at_level(logging.INFO, logger="shmaug.engine.autoscale.autoworkers"), \
            shmaug.Loader(images, np.arange(40), augment=_ops.noisy, workers="auto",
                          start_method="fork", **SETTINGS) as loader:
        for _ in range(3):
            epoch = []
            for batch in loader:
                epoch.append(batch)
                time.sleep(0.03)  # the consumer: 30 ms per batch, 10 batches an epoch
            got.append(epoch)
        stats = loader.stats()
    assert stats["workers"] == 1 and stats["workers_decision"].startswith("2 -> 1"), stats
    assert "after epoch 1: 2 -> 1" in caplog.text
    for epoch, want in zip(got, expected):
        assert_same_batches(epoch, want)


@needs_keras
def test_the_sequence_and_the_stall_monitor_tell_the_count_chosen(reference, two_cores,
                                                                   caplog):
    images, _ = reference
    with shmaug.Sequence(images, np.arange(40), augment=_ops.noisy, workers="auto",
                         start_method="fork", **SETTINGS) as seq:
        seq[0]
        seq.loader._run.resize(1)
        assert seq.stats()["workers"] == 1 and seq.loader.workers == 1
        logs: dict = {}
        with caplog.at_level(logging.INFO, logger="shmaug"):
            shmaug.StallMonitor(seq, threshold=1.0).on_epoch_end(0, logs)
    assert "workers: 1," in caplog.text and logs["workers"] == 1
