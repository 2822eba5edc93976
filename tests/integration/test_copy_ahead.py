"""Batches copied out of shared memory (or gathered) ahead of a consumer that is busy elsewhere:
made on the copier thread, bit-identical to those made on demand, and no thread left behind."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import shmaug
from shmaug.engine.handoff import copier as _copier
from shmaug.engine.handoff.ring import OutputRing
from tests import _ops
from tests._helpers import TIME_SCALE

pytestmark = pytest.mark.timeout(120)

STEP_S = 0.02  # the consumer's own work per batch (a training step)


def images(n: int = 48) -> np.ndarray:
    return np.random.default_rng(3).integers(0, 250, size=(n, 12, 12), dtype=np.uint8)


def slow_pass(loader: shmaug.Loader, step_s: float = STEP_S) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for xb, yb in loader:
        out.append((xb, yb))
        time.sleep(step_s)
    return out


@pytest.fixture(autouse=True)
def small_batches_too(monkeypatch):
    """These tests' batches are a few KB: have them copied ahead like big ones."""
    monkeypatch.setattr(_copier, "MIN_BYTES", 0)


def copier_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "shmaug-copier"]


@pytest.fixture
def reads_by_thread(monkeypatch):
    """The name of the thread behind each copy out of the ring."""
    names: list[str] = []
    read = OutputRing.read

    def recorded(self, slot, rows, into=None):
        names.append(threading.current_thread().name)
        return read(self, slot, rows, into)

    monkeypatch.setattr(OutputRing, "read", recorded)
    return names


@pytest.mark.parametrize("augment", [_ops.noisy, None], ids=["ring", "gather"])
def test_a_busy_consumer_gets_the_batches_it_gets_on_demand(augment):
    """Copies made ahead (workers=2), also across an epoch's end and a jump (random access),
    give the very batches of workers=0, where every copy is made when asked for."""
    kwargs = {"batch_size": 8, "augment": augment, "seed": 7, "shuffle": True}
    x, y = images(), np.arange(48)
    with shmaug.Loader(x, y, workers=0, **kwargs) as inline:
        expected = [list(inline) for _ in range(2)]
        jump = [inline.batch(b, epoch=2) for b in (1, 4, 5)]
    with shmaug.Loader(x, y, workers=2, start_method="fork", **kwargs) as loader:
        got = [slow_pass(loader) for _ in range(2)]
        jumped = []
        for b in (1, 4, 5):  # batch 2's copy, made ahead, is dropped
            jumped.append(loader.batch(b, epoch=2))
            time.sleep(STEP_S)
        assert loader._run.copier is not None and loader._run.copier.thread is not None
    for e in range(2):
        assert len(got[e]) == len(expected[e])
        for (xb, yb), (xe, ye) in zip(got[e], expected[e]):
            assert xb.dtype == xe.dtype
            np.testing.assert_array_equal(xb, xe)
            np.testing.assert_array_equal(yb, ye)
    for (xb, yb), (xe, ye) in zip(jumped, jump):
        np.testing.assert_array_equal(xb, xe)
        np.testing.assert_array_equal(yb, ye)


@pytest.mark.parametrize("step_s", [0.0, STEP_S], ids=["on-demand", "ahead"])
@pytest.mark.parametrize("augment", [_ops.noisy, None], ids=["ring", "gather"])
def test_batches_are_made_again_in_dropped_ones_and_kept_ones_never_change(augment, step_s):
    """A consumer that drops most batches gets the later ones in their memory (no fresh pages
    to fault in, nothing to unmap); the batches and views of them it keeps stay as handed."""
    kwargs = {"batch_size": 8, "augment": augment, "seed": 5, "shuffle": True}
    x, y = images(), np.arange(48)
    with shmaug.Loader(x, y, workers=0, **kwargs) as inline:
        expected = [xb for _ in range(3) for xb, _ in inline]
    kept: dict[int, np.ndarray] = {}
    with shmaug.Loader(x, y, workers=2, start_method="fork", **kwargs) as loader:
        for e in range(3):
            for b, (xb, _) in enumerate(loader):
                i = e * 6 + b
                np.testing.assert_array_equal(xb, expected[i])
                if i % 4 == 0:
                    kept[i] = xb
                elif i % 4 == 1:
                    kept[i] = xb[2:]  # a view keeps its batch too
                del xb
                time.sleep(step_s)
        assert loader._run.recycler.reused >= 6
    for i, xb in kept.items():
        np.testing.assert_array_equal(xb, expected[i] if i % 4 == 0 else expected[i][2:])


def test_a_batch_finished_ahead_is_copied_before_it_is_asked_for(reads_by_thread):
    with shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                       start_method="fork") as loader:
        batches = slow_pass(loader) + slow_pass(loader)
        for xb, _ in batches:
            assert xb.flags.writeable and xb.flags.owndata  # private copies, as before
    # The first batches are not finished ahead of the consumer; the rest are. One more copy
    # may have been made ahead: the next epoch's first batch, never asked for.
    assert len(batches) <= len(reads_by_thread) <= len(batches) + 1
    assert reads_by_thread.count("shmaug-copier") >= len(batches) - 3, reads_by_thread


def test_a_gathered_batch_is_made_before_it_is_asked_for():
    with shmaug.Loader(images(), batch_size=8, workers=2, seed=1) as loader:
        loader.batch(0)
        time.sleep(STEP_S)
        loader.batch(1)  # the consumer was away: the next gather is asked for ahead
        ahead = loader._run.gather._ahead
        assert ahead is not None and ahead[0] == (0, 2)
        assert ahead[1].done.wait(5)  # made while the consumer is away
        np.testing.assert_array_equal(loader.batch(2)[0], images()[16:24])


def test_a_short_last_batch_still_has_the_next_epochs_first_gathered_ahead(monkeypatch):
    """Whether a gather made ahead pays depends on the batch made ahead, not on the one just
    handed out: the epoch's short last batch left every epoch's first batch to be gathered
    on demand (5 ms of each 70 ms W3 epoch)."""
    monkeypatch.setattr(_copier, "MIN_BYTES", 8 * 12 * 12)  # a full batch; the last has 4 rows
    with shmaug.Loader(images(44), batch_size=8, workers=2, seed=1) as loader:
        slow_pass(loader)
        ahead = loader._run.gather._ahead
        assert ahead is not None and ahead[0] == (1, 0)
        first = next(iter(loader))[0]
        np.testing.assert_array_equal(first, images(44)[loader.indices(0, epoch=1)])


def test_gathers_made_ahead_from_a_memory_mapped_file_are_the_same(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, images())
    kwargs = {"batch_size": 8, "seed": 3, "shuffle": True}
    with shmaug.Loader(str(path), workers=0, **kwargs) as inline:
        expected = list(inline)
    with shmaug.Loader(str(path), workers=2, **kwargs) as loader:
        got = slow_pass(loader)
    assert len(got) == len(expected) == 6
    for (xb, _), (xe, _) in zip(got, expected):
        assert type(xb) is np.ndarray and xb.dtype == xe.dtype
        np.testing.assert_array_equal(xb, xe)


def test_a_consumer_that_comes_straight_back_copies_itself(reads_by_thread):
    """No thread hand-off where it cannot pay: the copy is the consumer's next step anyway."""
    with shmaug.Loader(images(), batch_size=8, augment=_ops.slow_noisy, workers=2, seed=1,
                       start_method="fork") as loader:
        for _ in range(2):
            list(loader)
    assert reads_by_thread.count("MainThread") >= len(reads_by_thread) - 2, reads_by_thread


def test_an_error_in_a_batch_behind_copies_made_ahead_surfaces_for_that_batch():
    x = images(40)
    x[21, 0, 0] = _ops.MARKER  # in batch 5
    with shmaug.Loader(x, np.arange(40), batch_size=4, augment=_ops.fail_on_marker, workers=2,
                       seed=1, start_method="fork") as loader:
        it = iter(loader)
        for b in range(5):
            _, yb = next(it)
            np.testing.assert_array_equal(yb, np.arange(4 * b, 4 * b + 4))
            time.sleep(STEP_S)  # batches ahead, the failing one among them, finish meanwhile
        with pytest.raises(ValueError, match="sample index 21"):
            next(it)
        np.testing.assert_array_equal(loader.batch(6)[1], np.arange(24, 28))  # it goes on


def hold_copier_reads(monkeypatch, hold) -> threading.Event:
    """Every copy out of the ring made on the copier thread calls ``hold()`` first; the event
    returned is set once the copier got there."""
    inside = threading.Event()
    read = OutputRing.read

    def held(self, slot, rows, into=None):
        if threading.current_thread().name == "shmaug-copier":
            inside.set()
            hold()
        return read(self, slot, rows, into)

    monkeypatch.setattr(OutputRing, "read", held)
    return inside


def test_close_with_the_copier_busy_leaves_no_thread(monkeypatch):
    inside = hold_copier_reads(monkeypatch, lambda: time.sleep(0.3))
    loader = shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                           start_method="fork")
    try:
        for _ in loader:
            time.sleep(0.1)
            if inside.is_set():
                break
        assert inside.is_set(), "the copier never copied"
        assert copier_threads()
    finally:
        began = time.monotonic()
        loader.close()
    assert time.monotonic() - began < 3 * TIME_SCALE
    assert not copier_threads()


def test_a_consumer_taking_a_copy_when_the_loader_closes_gets_closed_error(monkeypatch):
    """Close drops the ring's memory first; a copy that reads it later must not turn into an
    IndexError for a consumer in another thread (Keras' tf.data thread)."""
    go_on = threading.Event()
    inside = hold_copier_reads(monkeypatch, lambda: go_on.wait(10))
    errors: list[BaseException] = []
    loader = shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                           start_method="fork")

    def consume() -> None:
        try:
            for _ in loader:
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    thread = threading.Thread(target=consume)
    thread.start()
    try:
        assert inside.wait(10), "the copier never copied"
        time.sleep(0.1)  # the consumer is back and waits for that copy
        threading.Timer(0.2, go_on.set).start()  # the copy goes on while close() runs
        loader.close()
    finally:
        go_on.set()
        thread.join(10)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], shmaug.ClosedError), errors


def test_a_loader_never_closed_stops_its_copier_when_collected():
    """The copier thread holds no reference to the loader: collecting it runs the finalizer."""
    loader = shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                           start_method="fork")
    slow_pass(loader)
    assert loader._run.copier is not None
    thread = loader._run.copier.thread
    assert thread is not None and thread.is_alive()
    del loader
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_small_batches_are_copied_when_asked_for(monkeypatch, reads_by_thread):
    monkeypatch.setattr(_copier, "MIN_BYTES", 8 * 12 * 12 * 4 + 1)  # just above one batch
    with shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                       start_method="fork") as loader:
        slow_pass(loader)
        assert loader._run.copier is not None and loader._run.copier.thread is None
    assert set(reads_by_thread) == {"MainThread"}


def test_leases_and_workers_0_use_no_copier():
    with shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                       copy=False, start_method="fork") as loader:
        slow_pass(loader)
        assert loader._run.copier is not None and loader._run.copier.thread is None
    with shmaug.Loader(images(), batch_size=8, augment=_ops.noisy, workers=0) as loader:
        slow_pass(loader)
        assert loader._run.copier is None
