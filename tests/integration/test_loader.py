"""The Loader end to end: real processes, real shared memory, every start method."""

from __future__ import annotations

import gc

import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
import warnings
import weakref

import numpy as np
import pytest

import shmaug
from tests import _ops
from tests._helpers import assert_same_batches

pytestmark = pytest.mark.timeout(120)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

METHODS = [m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


def epochs(images, epochs=2, **kwargs):
    kwargs = {"batch_size": 8, "augment": _ops.noisy, "seed": 7, "shuffle": True, **kwargs}
    y = np.arange(len(images))
    with shmaug.Loader(images, y, **kwargs) as loader:
        return [[(xb, yb) for xb, yb in loader] for _ in range(epochs)]


def stack(epoch):
    return np.concatenate([xb for xb, _ in epoch]), np.concatenate([yb for _, yb in epoch])


@pytest.fixture(scope="module")
def reference():
    rng = np.random.default_rng(1234)
    images = rng.integers(0, 256, size=(40, 12, 12), dtype=np.uint8)
    return images, epochs(images, workers=0)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_same_epochs_for_any_worker_count(reference, workers):
    images, expected = reference
    got = epochs(images, workers=workers, start_method="fork")
    for e in range(2):
        np.testing.assert_array_equal(stack(got[e])[0], stack(expected[e])[0])
        np.testing.assert_array_equal(stack(got[e])[1], stack(expected[e])[1])


@pytest.mark.parametrize("method", METHODS)
def test_same_epochs_for_any_start_method(reference, method):
    images, expected = reference
    got = epochs(images, workers=2, start_method=method)
    for e in range(2):
        np.testing.assert_array_equal(stack(got[e])[0], stack(expected[e])[0])


@pytest.mark.parametrize("method", METHODS)
def test_generators_spawned_from_rng_are_part_of_the_stream(reference, method):
    """``rng.spawn(2)``, one generator per view: children of the process's own seed
    sequence (the OS's entropy), another in every run and every worker."""
    images, _ = reference
    expected = stack(epochs(images, 1, workers=0, augment=_ops.spawned_views)[0])[0]
    got = stack(epochs(images, 1, workers=2, start_method=method,
                       augment=_ops.spawned_views)[0])[0]
    np.testing.assert_array_equal(got, expected)
    assert len(np.unique(expected[:, 0, 0])) == len(images)  # each sample its own children


def test_epochs_differ_and_samples_get_distinct_streams(reference):
    _, expected = reference
    x0, y0 = stack(expected[0])
    x1, y1 = stack(expected[1])
    assert not np.array_equal(y0, y1), "shuffle order must change between epochs"
    # Same sample, next epoch: different augmentation.
    assert not np.array_equal(x0[np.argsort(y0)], x1[np.argsort(y1)])


def test_identical_images_get_different_augmentations():
    images = np.full((16, 6, 6), 100, np.uint8)
    with shmaug.Loader(images, batch_size=8, augment=_ops.noisy, workers=2, seed=0) as loader:
        xb = np.concatenate([b for b, _ in loader])
    flat = {row.tobytes() for row in xb}
    assert len(flat) == len(images), "two samples shared a random stream"


@pytest.mark.parametrize("drop_remainder", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_exactly_once(drop_remainder, shuffle):
    n, bs = 37, 8
    x = np.zeros((n, 4, 4), np.uint8)
    with shmaug.Loader(x, np.arange(n), batch_size=bs, augment=_ops.identity, workers=2,
                       seed=3, shuffle=shuffle, drop_remainder=drop_remainder) as loader:
        assert len(loader) == (n // bs if drop_remainder else -(-n // bs))
        for _ in range(2):
            seen = np.concatenate([yb for _, yb in loader])
            if drop_remainder:
                assert len(seen) == (n // bs) * bs
                assert len(set(seen.tolist())) == len(seen)
            else:
                assert sorted(seen.tolist()) == list(range(n))
            if not shuffle:
                assert seen.tolist() == sorted(seen.tolist())
        assert loader.epoch == 2


def test_random_access_and_resume_give_the_same_batches(images):
    with shmaug.Loader(images, np.arange(40), batch_size=8, augment=_ops.noisy, workers=2,
                       seed=1, shuffle=True) as loader:
        in_order = [loader.batch(b, epoch=3) for b in range(len(loader))]
        shuffled = {b: loader.batch(b, epoch=3) for b in (4, 0, 3, 3, 1, 2)}
        loader.epoch = 3
        resumed = list(loader)
    for b, (xb, yb) in shuffled.items():
        np.testing.assert_array_equal(xb, in_order[b][0])
        np.testing.assert_array_equal(yb, in_order[b][1])
    for (xa, _), (xb, _) in zip(in_order, resumed):
        np.testing.assert_array_equal(xa, xb)


def test_no_augment_gathers_in_process_and_keeps_dtype(images):
    with shmaug.Loader(images, np.arange(40), batch_size=16, workers=2) as loader:
        assert loader.pids == []
        xb, yb = next(iter(loader))
    np.testing.assert_array_equal(xb, images[:16])
    assert xb.dtype == np.uint8


@pytest.mark.parametrize("workers", [0, 2])
def test_no_augment_still_writes_the_declared_dtype_and_checks_the_declared_shape(images,
                                                                                  workers):
    """A validation loader beside a training one, both asked for float32: with no augment
    the samples are written as declared, not gathered as x's uint8; a declared shape that
    is not the samples' is refused as with an augment."""
    with shmaug.Loader(images, np.arange(40), batch_size=16, workers=workers,
                       output_dtype="float32") as loader:
        assert loader.output_dtype == np.float32
        xb, yb = loader.batch(1)
    assert xb.dtype == np.float32
    np.testing.assert_array_equal(xb, images[16:32].astype(np.float32))
    np.testing.assert_array_equal(yb, np.arange(16, 32))
    with pytest.raises(shmaug.OutputMismatchError, match=r"output_shape.*\(8, 8\)"):
        shmaug.Loader(images, batch_size=16, workers=workers, output_shape=(8, 8))
    with shmaug.Loader(images, batch_size=16, workers=workers, output_shape=(12, 12),
                       output_dtype="uint8") as loader:  # x's own: gathered
        assert loader.pids == [] and loader.batch(0)[0].dtype == np.uint8


def _ragged_load(index: int) -> np.ndarray:
    return np.zeros((8, 8) if index != 5 else (9, 8), np.uint8)


def _widening_load(index: int) -> np.ndarray:
    return np.zeros((8, 8), np.uint8 if index != 5 else np.uint16)


def test_a_load_making_another_shape_or_dtype_is_named_where_no_augment_runs():
    """An HDF5 user's `load` returned another shape, and was told to fix `augment`, which
    there was none of."""
    x = np.zeros((8, 8, 8), np.uint8)
    for load, what in ((_ragged_load, "shape"), (_widening_load, "dtype")):
        with pytest.raises(shmaug.OutputMismatchError, match=rf"Sample index 5 produced {what}"
                                                             rf".*from `load` for every sample"
                                                             rf"|make `load` return one shape"):
            with shmaug.Loader(x, batch_size=8, workers=0, load=load) as loader:
                loader.batch(0)


def _grey_beside_rgb(index: int) -> np.ndarray:
    return np.zeros((8, 8, 3) if index != 2 else (8, 8), np.uint8)


def _two_views_one_narrower(image, rng):
    return np.stack([image, image]) if image[0, 0, 0] == 0 else np.stack([image[:, :6]] * 2)


def test_a_sample_of_another_channel_count_is_told_to_convert_its_channels():
    # (was told to resize, crop or pad: the size was the same)
    with pytest.raises(shmaug.OutputMismatchError, match=r"Sample index 2 produced shape "
                                                         r"\(8, 8\).*give every image 3 "
                                                         r"channels.*convert\('RGB'\)\)`\), and "
                                                         r"keep the channel count in `augment`"):
        with shmaug.Loader(np.arange(4), batch_size=4, workers=0, load=_grey_beside_rgb,
                           augment=_ops.identity) as loader:
            loader.batch(0)
    x = np.zeros((4, 8, 8, 3), np.uint8)
    x[1] = 1
    with pytest.raises(shmaug.OutputMismatchError, match=r"produced shape \(2, 8, 6, 3\) but "
                                                         r"the batch expects \(2, 8, 8, 3\).*"
                                                         r"Fix: make `augment` return one shape"):
        with shmaug.Loader(x, batch_size=4, workers=0, augment=_two_views_one_narrower) as ld:
            ld.batch(0)  # (stacked views whose first two axes agree: not told "8 channels")


def test_a_quarter_turn_of_non_square_images_is_told_its_sides_swapped():
    # (was told to resize, crop or pad: the images were one size, the turn swapped its sides)
    x = np.zeros((16, 6, 8, 3), np.uint8)
    turns = shmaug.ops.Compose([shmaug.ops.Op("rot90", k=(0, 3))])
    with pytest.raises(shmaug.OutputMismatchError, match=r"produced shape \((8, 6|6, 8), 3\) "
                                                         r".*height and width are the batch's "
                                                         r"swapped.*rot90', k=2"):
        with shmaug.Loader(x, batch_size=16, workers=0, augment=turns, seed=1) as loader:
            loader.batch(0)


class _PilImages:
    """A torchvision-style source: `load` returns a PIL image (or, below, the encoded file)."""

    def __len__(self) -> int:
        return 4

    def load(self, index: int):
        from PIL import Image

        return Image.fromarray(np.full((6, 8, 3), 10 * index, np.uint8))


class _EncodedImages(_PilImages):
    def load(self, index: int):
        import io

        out = io.BytesIO()
        super().load(index).save(out, "PNG")
        return out.getvalue()


def test_a_load_returning_pil_images_or_bytes_is_taken_or_told_load():
    """A PIL image from `load` went through without `augment` but reached one as a PIL
    image (a user's function failed on it); encoded bytes were blamed on `augment`."""
    flip = shmaug.ops.Op("hflip")
    for augment in (None, flip):
        with shmaug.Loader(_PilImages(), batch_size=4, workers=0, augment=augment) as loader:
            np.testing.assert_array_equal(loader.batch(0)[0][:, 0, 0, 0], [0, 10, 20, 30])
    with pytest.raises(shmaug.ArgumentTypeError, match=r"^`load` must return an image array;"
                                                       r".*\(type bytes\).*from_bytes"):
        shmaug.Loader(_EncodedImages(), batch_size=4, workers=0)


def test_output_shape_and_dtype_are_learned_or_declared(images):
    with shmaug.Loader(images, batch_size=8, augment=_ops.noisy, workers=0) as loader:
        assert loader.output_shape == (12, 12) and loader.output_dtype == np.float32
    with shmaug.Loader(images, batch_size=8, augment=_ops.identity, workers=0,
                       output_shape=(12, 12), output_dtype="float32") as loader:
        xb, _ = loader.batch(0)
        assert xb.dtype == np.float32
        np.testing.assert_array_equal(xb, images[:8].astype(np.float32))


@pytest.mark.parametrize("workers", [0, 2])
def test_negative_batch_indices_count_from_the_end_as_for_a_sequence(images, workers):
    with shmaug.Loader(images, np.arange(40), batch_size=16, augment=_ops.identity,
                       workers=workers, seed=1, shuffle=True) as loader:
        last = loader.batch(2, epoch=1)
        xb, yb = loader.batch(-1, epoch=1)
        np.testing.assert_array_equal(xb, last[0])
        np.testing.assert_array_equal(yb, last[1])
        assert len(yb) == 8  # the short last batch
        np.testing.assert_array_equal(loader.indices(-3, epoch=1), loader.indices(0, epoch=1))
        with pytest.raises(IndexError, match="batch index 3 out of range for 3 batches"):
            loader.batch(3)
        with pytest.raises(IndexError, match="batch index -4 out of range"):
            loader.indices(-4)
        with pytest.raises(shmaug.ArgumentTypeError, match=r"integer.*`loader.batch\(0\)`"):
            loader.batch(1.0)


def test_targets_may_be_dicts_or_tuples(images):
    y = {"label": np.arange(40), "box": np.ones((40, 4))}
    with shmaug.Loader(images, y, batch_size=8, augment=_ops.identity, workers=0) as loader:
        _, yb = loader.batch(1)
    assert set(yb) == {"label", "box"} and yb["label"].tolist() == list(range(8, 16))
    with shmaug.Loader(images, (np.arange(40), np.arange(40) * 2), batch_size=8) as loader:
        _, (a, b) = loader.batch(0)
    assert (b == 2 * a).all()


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("op, raises", [(_ops.edits_in_place, ValueError),
                                        (_ops.blurs_in_place, Exception)])  # cv2.error
def test_ops_cannot_edit_the_shared_dataset_and_the_error_says_to_copy(images, workers, op,
                                                                       raises):
    before = images.copy()
    with pytest.raises(raises, match=r"(?s)read-?only.*read-only view of the data in shared "
                       r"memory.*Fix: copy first, `image = image.copy\(\)`.*sample index 0"):
        shmaug.Loader(images, batch_size=8, augment=op, workers=workers)  # the probe sees it
    np.testing.assert_array_equal(images, before)  # nor the caller's array


def test_stats_report_throughput_and_worker_busy(images):
    with shmaug.Loader(images, batch_size=8, augment=_ops.slow_noisy, workers=2, seed=0) as loader:
        for _ in loader:
            pass
        stats = loader.stats()
    assert stats["images_per_s"] > 0
    assert 0 <= stats["wait_fraction"] <= 1
    assert len(stats["worker_busy"]) == 2 and all(0 < b <= 1 for b in stats["worker_busy"])
    assert stats["batches"] == 5
    after = loader.stats()  # the shared memory is gone; the last figures are not
    assert after["batches"] == 5 and all(0 < b <= 1 for b in after["worker_busy"])


def test_stats_cover_the_passes_not_the_time_after_them(images):
    """Read a while after a loop ended, the figures are those of its pass (they shrank with
    every second waited); a second pass after a gap counts both passes, not the gap."""
    with shmaug.Loader(images, batch_size=8, augment=_ops.slow_noisy, workers=2, seed=0) as loader:
        began = time.perf_counter()
        list(loader)
        passed = time.perf_counter() - began
        first = loader.stats()
        time.sleep(0.5)
        figures = ("images_per_s", "wait_fraction", "worker_busy", "batches")
        assert {k: loader.stats()[k] for k in figures} == {k: first[k] for k in figures}
        time.sleep(1.0)
        began = time.perf_counter()
        list(loader)
        passed += time.perf_counter() - began
        both = loader.stats()
    assert both["images"] == 80
    assert 80 / both["images_per_s"] <= passed  # the 1.5 s between the passes left out
    assert all(0 < b <= 1 for b in both["worker_busy"])


def test_a_consumer_bound_pool_shares_its_tasks_among_all_workers(images):
    # A slow consumer leaves one task at a time to hand out: every one used to go to worker 0,
    # and stats() showed the others 0% busy.
    with shmaug.Loader(images[:12], batch_size=1, augment=_ops.slow_noisy, workers=2, seed=0,
                       max_queue_size=1, shuffle=False) as loader:
        for _ in loader:
            time.sleep(0.05)
        busy = loader.stats()["worker_busy"]
    assert len(busy) == 2 and all(b > 0 for b in busy), busy


def test_fork_after_the_parent_used_opencv_threads_does_not_hang():
    import cv2

    big = np.random.default_rng(0).random((1024, 1024)).astype(np.float32)
    for _ in range(10):  # wake OpenCV's thread pool in this process
        cv2.GaussianBlur(big, (7, 7), 2.0)
    threads = cv2.getNumThreads()
    x = np.zeros((16, 32, 32), np.float32)
    with shmaug.Loader(x, batch_size=4, augment=shmaug.presets.glyph_distort(), workers=2,
                       start_method="fork", timeout=20) as loader:
        assert len(list(loader)) == 4
    assert cv2.getNumThreads() == threads  # the parent's setting is restored


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_library_loaded_after_the_worker_started_runs_one_thread(method, monkeypatch):
    # threadpool_limits reaches only the libraries loaded when it runs: scipy's own OpenBLAS,
    # loaded by an op's module (`import scipy.ndimage`), ran a thread per core under spawn
    # and forkserver, beside the other workers. The parent's own setting is not the workers'.
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    x = np.zeros((4, 2, 8), np.uint8)
    with shmaug.Loader(x, batch_size=4, augment=_ops.thread_counts_read, workers=1,
                       start_method=method, timeout=60) as loader:
        xb, _ = next(iter(loader))
    assert (xb[:, 0, :6] == 1).all(), xb[:, 0]
    assert os.environ["OMP_NUM_THREADS"] == "4"


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_an_ops_warning_follows_the_callers_filters_under_every_start_method(method, capfd):
    """Third review: a test suite's `filterwarnings = error` (and a script's "ignore") held
    in forked workers only: under spawn and forkserver the op's warning was printed from the
    worker and the pass went on, so a strict suite passed or failed by the start method."""
    x = np.zeros((4, 2, 8), np.uint8)
    kwargs = dict(batch_size=4, augment=_ops.warns, workers=1, start_method=method, timeout=60)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match=r"(?s)an op's own warning.*shmaug worker"), \
                shmaug.Loader(x, **kwargs) as loader:  # (its probe, or its first batch)
            next(iter(loader))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with shmaug.Loader(x, **kwargs) as loader:
            next(iter(loader))
    assert "an op's own warning" not in capfd.readouterr().err
    with warnings.catch_warnings():  # (second review: one its module raises on import, as
        warnings.simplefilter("ignore", FutureWarning)  # a worker unpickles the op)
        from tests import _warns_at_import

        with shmaug.Loader(x, **{**kwargs, "augment": _warns_at_import.identity}) as loader:
            next(iter(loader))
    assert "a module of ops, imported" not in capfd.readouterr().err


def test_copy_false_lends_read_only_views_until_the_next_batch(images):
    kwargs = dict(batch_size=8, augment=_ops.noisy, workers=2, seed=2, shuffle=True)
    with shmaug.Loader(images, np.arange(40), **kwargs) as loader:
        expected = [xb for xb, _ in loader]
    with shmaug.Loader(images, np.arange(40), copy=False, **kwargs) as loader:
        for b, (xb, _) in enumerate(loader):
            assert not xb.flags.writeable and not xb.flags.owndata
            np.testing.assert_array_equal(xb, expected[b])  # valid until the next batch
        for _ in range(3):  # epochs keep flowing: the lent slot is always given back
            assert len(list(loader)) == 5


_KEPT_PAST_CLOSE = """
import os, sys
import numpy as np, shmaug
from tests import _ops
x = (np.arange(40 * 8 * 8) % 251).astype(np.uint8).reshape(40, 8, 8)
with shmaug.Loader(x, np.arange(40), batch_size=8, augment=_ops.identity, workers=2,
                   seed=2, copy=False, start_method=sys.argv[1]) as loader:
    kept = [(xb, xb.copy(), yb) for xb, yb in [next(iter(loader))]]
for lent, copy, yb in kept:
    assert not lent.flags.writeable
    np.testing.assert_array_equal(lent, copy)  # read after close: the mapping outlives it
    np.testing.assert_array_equal(lent, x[yb])
left = [n for n in os.listdir("/dev/shm") if n.startswith(f"shmaug_{os.getpid()}_")]
print(int(lent.sum()), left)
"""


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="reads /dev/shm (Linux)")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_batch_lent_with_copy_false_stays_readable_after_close(method):
    """A lent batch kept past the ``with`` block used to segfault Python on its first read
    (the segment was unmapped under a live view, issue 38 §2); in a child process, so a
    crash is a failed test, not a dead runner. The names are unlinked all the same."""
    done = subprocess.run([sys.executable, "-c", _KEPT_PAST_CLOSE, method],
                          capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    total, left = done.stdout.split(" ", 1)
    assert int(total) > 0 and left.strip() == "[]"


@pytest.mark.parametrize("augment", [None, _ops.identity])
def test_a_load_that_uses_global_randomness_is_seeded_per_sample(augment):
    def run(workers):
        with shmaug.Loader(_ops.NoisySource(24), batch_size=6, augment=augment,
                           workers=workers, seed=3, shuffle=True) as loader:
            return np.concatenate([xb for xb, _ in loader])

    reference = run(0)
    assert len({float(v) for v in reference[:, 0, 0] % 1}) == 24  # no two samples alike
    for workers in (1, 2):
        np.testing.assert_array_equal(run(workers), reference)


def test_a_pass_cut_short_still_moves_to_the_next_epoch(images):
    """`for ...: if step == steps_per_epoch: break` must not replay the same augmentations,
    and inside a pass the loader's defaults still refer to that pass's epoch."""
    with shmaug.Loader(images, np.arange(40), batch_size=8, augment=_ops.noisy, workers=1,
                       seed=0, shuffle=True) as loader:
        for first, yb in loader:
            assert loader.epoch == 0
            np.testing.assert_array_equal(loader.indices(0), yb)
            np.testing.assert_array_equal(loader.batch(0)[0], first)
            break
        assert loader.epoch == 1
        for second, _ in loader:
            break
        np.testing.assert_array_equal(second, loader.batch(0, epoch=1)[0])
        assert not np.array_equal(first, second)
        kept = iter(loader)
        next(kept)  # a pass left suspended still counts: the next one moves on
        assert loader.epoch == 2
        for third, _ in loader:
            assert loader.epoch == 3
            break
        np.testing.assert_array_equal(third, loader.batch(0, epoch=3)[0])
        assert loader.epoch == 4


def test_a_pass_nested_in_another_leaves_the_outer_ones_place(images):
    """A whole pass inside a loop over the same loader (an evaluation mid-epoch): the outer
    loop's epoch and state read the inner pass's end (epoch 2, batch 0) after it, and a
    checkpoint saved there resumed at the wrong epoch."""
    with shmaug.Loader(images, np.arange(40), batch_size=8, augment=_ops.noisy, workers=1,
                       seed=0, shuffle=True) as loader:
        for b, _ in enumerate(loader):
            if b == 1:
                assert len(list(loader)) == 5  # epoch 1, whole
            if b == 3:
                assert loader.epoch == 0
                state = loader.state_dict()
                assert (state["epoch"], state["batch"]) == (0, 4)
        assert loader.epoch == 2


def test_an_old_pass_of_the_same_epoch_dropped_mid_pass_leaves_the_new_ones_place(images):
    """A shape probe's iterator kept, the loader set back to epoch 0, then the probe dropped
    inside the new pass of epoch 0: its end ended the new pass too (passes were known by
    their epoch), so the loop read epoch 1 and a state saved there resumed at epoch 1,
    skipping the rest of epoch 0."""
    with shmaug.Loader(images, np.arange(40), batch_size=8, augment=_ops.noisy, workers=0,
                       seed=0, shuffle=True) as loader:
        probe = iter(loader)
        next(probe)
        loader.epoch = 0
        for b, _ in enumerate(loader):
            if b == 1:
                del probe
                gc.collect()
            if b == 3:
                assert loader.epoch == 0
                state = loader.state_dict()
                assert (state["epoch"], state["batch"]) == (0, 4)
        assert loader.epoch == 1


def _outcomes(images, augment, workers, start_method=None):
    """Every batch of two epochs, or the sample index its error names."""
    out = []
    with shmaug.Loader(images, batch_size=8, augment=augment, workers=workers, seed=5,
                       shuffle=True, start_method=start_method, output_shape=images.shape[1:],
                       output_dtype=np.float32) as loader:
        for epoch in range(2):
            for b in range(len(loader)):
                try:
                    out.append(loader.batch(b, epoch=epoch)[0])
                except ValueError as exc:
                    out.append(exc.sample_index)
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert type(x) is type(y)
        np.testing.assert_array_equal(x, y)


@pytest.fixture
def primed_globals():
    """The program's own global generators, left mid-way: each holds a Gaussian back, and
    Python's next `random()` is below 0.3 (so `fails_on_a_global_draw` fails unseeded)."""
    seed = next(s for s in range(100) if _primed(s) < 0.3)
    _primed(seed)
    np.random.seed(seed)
    np.random.normal()
    yield
    random.seed()
    np.random.seed(None)


def _primed(seed):
    random.seed(seed)
    random.gauss(0.0, 1.0)
    state = random.getstate()
    value = random.random()
    random.setstate(state)
    return value


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("op", [_ops.sometimes_global, _ops.sometimes_np_normal,
                                _ops.sometimes_py_gauss, _ops.fails_on_a_global_draw])
def test_watched_globals_give_the_batches_of_always_seeded_ones(images, primed_globals,
                                                                workers, op):
    """An augment that does not say whether it uses the globals is watched: the first draw
    switches seeding on and that sample is made again (also when it raised), so every batch,
    and every error, is the one an augment declared `uses_global_rng = True` gets. Neither a
    Gaussian the generators held back (inherited through fork, or the program's own with
    workers=0) nor an error raised by an unseeded draw slips through."""
    _assert_same(_outcomes(images, op, workers, "fork" if workers else None),
                 _outcomes(images, _ops.SaysGlobal(op), 1))


def test_a_users_word_that_an_op_draws_no_global_is_watched_all_the_same(images,
                                                                        primed_globals):
    """A migrator's reviewer registered a ported op `uses_global_rng=False` (as ops.md showed)
    before porting its body, `np.random.uniform` left in it: trusted, it went unseeded, two
    forked workers drew alike (58 of 128 samples twice) and the batches changed with the
    worker count. Only shmaug's own ops are taken at their word."""
    op = _ops.SaysPure(_ops.sometimes_np_normal)
    assert op.uses_global_rng is False
    _assert_same(_outcomes(images, op, 2, "fork"), _outcomes(images, _ops.SaysGlobal(op), 1))
    _assert_same(_outcomes(images, op, 0), _outcomes(images, _ops.SaysGlobal(op), 1))


def test_only_the_global_generator_an_op_draws_from_is_seeded(images):
    """numpy-only legacy code pays for seeding numpy's generator (~3 us), not Python's (~7 us)."""
    with shmaug.Loader(images, batch_size=8, augment=_ops.numpy_global_only, workers=1,
                       seed=0) as loader:
        out = np.concatenate([xb for xb, _ in loader])
    assert len(set(out[:, 0].tolist())) == len(out)  # numpy's: seeded per sample
    assert len(set(out[:, 1].tolist())) == 1  # Python's: never touched, never seeded


def test_a_short_lookahead_still_gives_every_worker_work(images):
    """With fewer batches ahead than workers, prefetched batches are cut so none idles: every
    batch is cut in 3 pieces, one per worker. (Which worker takes which piece is the OS's
    business: on 2 cores one of 3 workers may sit out a while, and the least-queued one gets
    its share; an earlier form of this test counted per worker and failed 1 run in 8.)"""
    from shmaug.engine.workers.status import STATUS_FIELDS, TASKS_DONE

    with shmaug.Loader(images, batch_size=8, augment=_ops.noisy, workers=3, seed=0,
                       max_queue_size=2) as loader:
        list(loader)
        status = loader._run.pool.status
        done = [status[w * STATUS_FIELDS + TASKS_DONE] for w in range(3)]
    assert sum(done) >= 3 * len(loader), done  # (+1: the probe, made by one of them)
    assert min(done) >= 1, done


_SHM_DESCRIPTORS = """
import gc, os
import numpy as np, shmaug
def shm_fds():
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor
            pass
    return sorted(link for link in links if link.startswith("/dev/shm/"))
for method in ("fork", "spawn"):
    with shmaug.Loader(np.zeros((16, 8, 8), np.uint8), batch_size=4, workers=2, seed=0,
                       augment=shmaug.Compose(["hflip"]), start_method=method) as loader:
        list(loader)
gc.collect()
print(shm_fds())
"""


@pytest.mark.parametrize("facade", [False, True])
def test_a_closed_loader_or_sequence_holds_none_of_the_users_arrays(facade):
    """TensorFlow keeps a Sequence reachable after fit: each fold of a k-fold loop kept its
    arrays (x, the labels, the targets) for the life of the process, closed or not."""
    if facade:
        pytest.importorskip("keras")
    x, y = np.zeros((40, 12, 12), np.uint8), np.arange(40)
    masks = np.zeros((40, 12, 12), np.uint8)
    gone = [weakref.ref(a) for a in (x, y, masks)]
    targets = {"label": y, "segmentation_masks": masks}
    augment = shmaug.ops.Compose([shmaug.ops.Op("hflip")])
    kept = (shmaug.Sequence(x, targets, batch_size=8, augment=augment, workers=1)
            if facade else shmaug.Loader(x, targets, batch_size=8, augment=augment, workers=1))
    with kept:
        _ = kept[0] if facade else kept.batch(0)
    del x, y, masks, targets, _
    gc.collect()
    assert [ref() is None for ref in gone] == [True, True, True]
    assert len(kept) == 5 and kept.stats()["batches" if not facade else "requests"] >= 1
    with pytest.raises(shmaug.ClosedError):
        _ = kept[0] if facade else kept.batch(0)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc (Linux)")
@pytest.mark.parametrize("closing", ["close", "collected"])
def test_closing_drops_the_work_queued_for_the_next_epoch(tmp_path, monkeypatch, closing):
    """A slow op's workers went on making the next epoch's batches until close's 2 s of grace
    ran out, then were terminated; at Ctrl-C or exit without close() alike."""
    notes = tmp_path / "notes"
    monkeypatch.setenv("SHMAUG_TEST_NOTES", str(notes))
    loader = shmaug.Loader(np.zeros((64, 4, 4), np.uint8), None, batch_size=16,
                           augment=_ops.slow_and_noted, workers=2)
    for _ in loader:
        pass
    asked = time.monotonic()
    if closing == "close":
        loader.close()
    else:
        del loader
        gc.collect()
    after = [t for t in map(float, notes.read_text().split()) if t > asked]
    # each worker's sample in hand, and on a loaded host one begun before the word came (CI:
    # 3); going on until the grace ran out made about 40 each
    assert len(after) <= 4, after


def test_no_shared_memory_descriptor_outlives_a_closed_loader():
    """Not even one of the stdlib heap's arenas (``multiprocessing.RawArray`` keeps its small
    arenas open for the rest of the process): a fresh interpreter, after its loaders close,
    holds no descriptor to anything in /dev/shm."""
    done = subprocess.run([sys.executable, "-c", _SHM_DESCRIPTORS], capture_output=True,
                          text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                    reason="no forkserver here")
def test_forkserver_workers_see_the_environment_of_now_not_of_the_servers_start(monkeypatch):
    """The forkserver starts once per process; its children would see its environment as
    it was then. Workers get the parent's as they start, as under fork and spawn."""
    x = np.zeros((4, 2, 2), np.uint8)
    args = dict(batch_size=4, augment=_ops.plus_environ, workers=1, start_method="forkserver")
    with shmaug.Loader(x, **args) as loader:  # the server runs from here on
        assert loader.batch(0)[0].max() == 0
    monkeypatch.setenv("SHMAUG_TEST_ADD", "7")
    with shmaug.Loader(x, **args) as loader:
        assert loader.batch(0)[0].min() == 7


def test_forkserver_workers_import_from_a_folder_added_to_sys_path_since_the_server_started(
        monkeypatch, tmp_path):
    """An op in a module the parent imports from a folder it put on sys.path after the
    forkserver started (a notebook's sys.path.append, a runner importing from a temp dir)."""
    x = np.zeros((4, 2, 2), np.uint8)
    with shmaug.Loader(x, batch_size=4, augment=_ops.identity, workers=1,
                       start_method="forkserver") as loader:  # the server runs from here on
        loader.batch(0)
    (tmp_path / "late_ops.py").write_text(
        "def plus_three(image, rng):\n    return image + 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import late_ops

    with shmaug.Loader(x, batch_size=4, augment=late_ops.plus_three, workers=1,
                       start_method="forkserver") as loader:
        assert loader.batch(0)[0].min() == 3


SCRIPT = """
import sys, types
sys.modules.setdefault("jax", types.ModuleType("jax"))  # as if a threaded runtime were up
import numpy as np, shmaug

def plus_one(image, rng):
    return image + 1

def run():
    x = np.zeros((4, 2, 2), np.uint8)
    with shmaug.Loader(x, batch_size=4, augment=plus_one, workers=1) as loader:
        assert loader.batch(0)[0].min() == 1
        print("METHOD", loader._run.pool._ctx.get_start_method())

def run_in_a_thread():  # as tf.data's threads ask a Sequence, or restart it after an idle stop
    import threading
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
"""


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods() or
                    multiprocessing.get_all_start_methods()[0] != "fork",
                    reason="the default chooses between fork and forkserver only where fork is "
                           "the platform's default")
@pytest.mark.parametrize("guarded", [True, False])
@pytest.mark.parametrize("call", ["run", "run_in_a_thread"])
def test_a_script_that_trains_outside_its_main_guard_keeps_fork(tmp_path, guarded, call):
    """With a threaded runtime up the default is forkserver, whose workers import the script
    that defines the ops: one that trains outside ``if __name__ == "__main__":`` would train
    again in each worker, so it keeps fork (and a guarded one gets forkserver), also where
    another thread starts the workers (after an idle stop, a Sequence's workers started
    again from tf.data's thread re-ran the script's fit in each)."""
    body = f'if __name__ == "__main__":\n    {call}()\n' if guarded else f"{call}()\n"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT + body)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout.split() == ["METHOD", "forkserver" if guarded else "fork"], proc.stdout


GUARDED = """
import sys
import numpy as np, shmaug
from shmaug.ops import Compose, Op

def plus_one(image):  # above the guard: a fresh worker imports it by name
    return image + 1

if __name__ == "__main__":
    K = 2
    def helper(image):  # under the guard: a fresh worker's import of the script skips it
        return plus_one(image) + K
    class Add:
        def __call__(self, image, rng):
            return helper(image)
    @shmaug.ops.register("test_guarded_times")  # registered by name under the guard too
    def times(image, rng, factor=1):
        return image * factor
    augment = Compose([Op("hflip"), Add(), Op("test_guarded_times", factor=2)])
    x = np.zeros((4, 2, 2), np.uint8)
    with shmaug.Loader(x, batch_size=4, augment=augment, workers=1, seed=0,
                       start_method=sys.argv[1]) as loader:
        assert loader.batch(0)[0].min() == 6
        print("METHOD", loader._run.pool._ctx.get_start_method())
"""


@pytest.mark.parametrize("method", [m for m in ("spawn", "forkserver")
                                    if m in multiprocessing.get_all_start_methods()])
def test_a_pipeline_defined_under_the_main_guard_reaches_fresh_workers(tmp_path, method):
    """A fresh worker imports the script without running its guarded block, so what is
    defined there would not unpickle (the worker died at start, and the error blamed a
    missing guard): it is shipped by value, with what its code calls; an op registered there
    and used by name (``Op("...")``) goes with its function."""
    script = tmp_path / "train.py"
    script.write_text(GUARDED)
    proc = subprocess.run([sys.executable, str(script), method], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"METHOD {method}" in proc.stdout, proc.stdout


HEAVY_MAIN = """
import sys, types, warnings
sys.modules.setdefault("jax", types.ModuleType("jax"))  # as if a threaded runtime were up
import numpy as np, shmaug
{binding}

def plus_one(image, rng):
    return image + 1

if __name__ == "__main__":
    warnings.simplefilter("always")
    x = np.zeros((4, 2, 2), np.uint8)
    for _ in range(2):  # a second pool says nothing more
        with shmaug.Loader(x, batch_size=4, augment=plus_one, workers=1,
                           start_method=sys.argv[1]) as loader:
            assert loader.batch(0)[0].min() == 1
"""


@pytest.mark.parametrize("binding,method,told", [
    ('jnp = types.ModuleType("jax.numpy")', "spawn", True),  # as `import jax.numpy as jnp`
    ('jnp = types.ModuleType("jax.numpy")', "fork", False),  # forked workers import nothing
    ("import jax", "spawn", False)])  # a bare framework package loads lazily in a worker
def test_a_script_that_uses_a_framework_at_its_top_is_told_its_workers_load_it(
        tmp_path, binding, method, told):
    """A fresh worker imports the script that defines the augment: one that binds a
    framework's module or class at its top (``from keras import layers``, a custom layer)
    makes every worker load the framework, seconds and hundreds of MB each. Said once."""
    script = tmp_path / "train.py"
    script.write_text(HEAVY_MAIN.format(binding=binding))
    proc = subprocess.run([sys.executable, str(script), method], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("binds `jnp` to something of a framework") == int(told), \
        proc.stderr[-3000:]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_tells_its_load_which_tasks_are_queued_behind_the_one_it_runs(tmp_path,
                                                                             method):
    """What a source over a network fetches ahead with a task: the samples of the tasks
    already in the worker's pipe, in the order they will run; batches do not change."""
    calls = tmp_path / "calls.txt"
    kwargs = dict(batch_size=4, shuffle=True, seed=3, load=_ops.RecordingLoad(str(calls)))
    x, y = list(range(40)), np.arange(40)
    with shmaug.Loader(x, y, workers=1, start_method=method, **kwargs) as loader:
        got = [(xb.copy(), yb.copy()) for xb, yb in loader]
    with shmaug.Loader(x, y, workers=0, **kwargs) as loader:
        want = [(xb.copy(), yb.copy()) for xb, yb in loader]
    assert all(np.array_equal(a, b) for pair in zip(got, want) for a, b in zip(*pair))
    seen = [line.split("|") for line in calls.read_text().splitlines()]
    tasks = [json.loads(task) for task, _ in seen][:10]  # the worker's ten tasks of epoch 0
    assert [i for task in tasks for i in task] == np.concatenate([yb for _, yb in got]).tolist()
    aheads = [json.loads(ahead) for _, ahead in seen][:10]
    assert sum(map(bool, aheads)) >= 3  # 8 batches in flight: several wait in the pipe
    for k, ahead in enumerate(aheads):  # each names the next tasks' samples, in order
        later = tasks[k + 1:k + 1 + len(ahead) // 4]
        if k + len(ahead) // 4 < len(tasks):  # (not yet the next epoch's)
            assert ahead == [i for task in later for i in task]


def to_unit_float(image: np.ndarray) -> np.ndarray:
    return image.astype(np.float32) / 255  # as A.ToFloat, or skimage's img_as_float


@pytest.mark.parametrize("workers", [0, 1])
def test_an_op_after_one_that_makes_uint8_float_takes_its_range_as_by_hand(workers):
    """The loader bound uint8's (0, 255) into every op: gamma after a uint8 -> float [0, 1]
    step took 0..255 for it, and made values up to 5.3 where by hand it keeps [0, 1]."""
    x = np.random.default_rng(0).integers(0, 256, (8, 16, 16, 3), np.uint8)
    aug = shmaug.ops.Compose([shmaug.from_array(to_unit_float, targets="still"),
                              shmaug.ops.Op("gamma", gamma=0.7)])
    by_hand = np.stack([aug(image, np.random.default_rng(0)) for image in x])
    with shmaug.Loader(x, np.arange(8), batch_size=8, augment=aug, workers=workers,
                       seed=0) as loader:
        xb, _ = loader.batch(0)
    assert xb.max() <= 1.0
    np.testing.assert_allclose(xb, by_hand, rtol=1e-6)


def test_two_threads_iterating_one_loader_take_turns():
    """Each thread's pass is a whole epoch, as two iterators in one thread get: one thread
    got an internal "concurrent poll() invocation" RuntimeError."""
    import threading

    x = np.arange(48 * 4, dtype=np.uint8).reshape(48, 2, 2)
    with shmaug.Loader(x, np.arange(48), batch_size=4, augment=_ops.noisy, workers=2, seed=5,
                       shuffle=True) as loader:
        passes: list = []
        errors: list = []

        def consume():
            try:
                passes.append(list(loader))
            except Exception as exc:  # (what the test reports)
                errors.append(exc)

        threads = [threading.Thread(target=consume) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and len(passes) == 2
        expected = [list(loader.batch(i, epoch=e) for i in range(12)) for e in (0, 1)]
    got = sorted(passes, key=lambda p: p[0][0].tobytes() == expected[1][0][0].tobytes())
    for epoch, batches in zip(expected, got):
        assert_same_batches(batches, epoch)


def test_a_random_access_batch_is_a_copy_also_under_copy_false():
    """copy=False: batch() said it returns copies, and lent a view of a slot, which the pass
    went on to fill with other batches; a pass still lends its own."""
    x = np.arange(64 * 4 * 4, dtype=np.uint32).reshape(64, 4, 4).astype(np.float32)
    with shmaug.Loader(x, batch_size=4, augment=_ops.identity, workers=2, seed=0,
                       copy=False) as loader:
        look, _ = loader.batch(0)
        assert look.flags.writeable  # a copy of its own, not the ring's read-only view
        for i, (xb, _) in enumerate(loader):
            assert not xb.flags.writeable and not xb.flags.owndata  # the pass's: lent
            if i == 6:
                break
        np.testing.assert_array_equal(look, x[:4])  # unchanged by the pass's batches


def test_rows_written_into_x_after_the_loader_was_made_are_told_once():
    """A pseudo-labelling buffer edited in place between epochs: the workers read the copy
    made at the start, `y` was read live, and 50 of 100 rows went out with another image's
    label, without a word."""
    x = np.zeros((100, 8, 8), np.uint8)
    y = np.zeros(100, np.int64)
    with shmaug.Loader(x, y, batch_size=25, augment=_ops.identity, workers=0, seed=0,
                       shuffle=True) as loader:
        list(loader)  # (an epoch of x as given: nothing said)
        x[50:], y[50:] = 7, 1
        with pytest.warns(shmaug.ShmaugWarning, match=r"Rows of `x` were written after the "
                                                      r"loader was made.*make a new loader"):
            list(loader)
        list(loader)  # once


@pytest.mark.parametrize("layout", ["C", "Fortran", "transposed"])
def test_a_single_pixel_written_into_x_is_told(layout):
    """The check compared the heads of 8 rows drawn per epoch: 12 rows of 3,000 rewritten
    (an active-learning round) were missed in most epochs. Every row is compared whole, in
    any memory layout (64 rows drawn, where rows were not one run of memory, missed most)."""
    x = {"C": np.zeros((3000, 8, 8), np.uint8),
         "Fortran": np.asfortranarray(np.zeros((3000, 8, 8), np.uint8)),
         "transposed": np.zeros((8, 3000, 8), np.uint8).transpose(1, 0, 2)}[layout]
    with shmaug.Loader(x, np.zeros(3000), batch_size=500, augment=_ops.identity, workers=0,
                       seed=0) as loader:
        list(loader)
        x[2999, 7, 7] = 1
        with pytest.warns(shmaug.ShmaugWarning, match=r"Rows of `x` were written after"):
            list(loader)


_LONG_TMPDIR = """
import multiprocessing.connection
import numpy as np, shmaug
if multiprocessing.connection.arbitrary_address("AF_UNIX").startswith("\\0"):
    print("ABSTRACT")  # (Python 3.12 and later on Linux: no path, no limit)
x = np.zeros((64, 4, 4, 3), np.uint8)
try:
    with shmaug.Loader(x, batch_size=4, augment=shmaug.get("hflip"), workers=1,
                       start_method="forkserver") as loader:
        loader.batch(0)
        print("STARTED")
except shmaug.ArgumentError as exc:
    print("REFUSED", exc)
"""


def test_a_temporary_folder_too_long_for_the_forkserver_socket_is_named(tmp_path):
    """A TMPDIR of 120 characters (an HPC job's): the forkserver's socket path passed Unix's
    108 bytes and `fit` died with a bare "AF_UNIX path too long"."""
    long = tmp_path / ("t" * (120 - len(str(tmp_path))))
    long.mkdir()
    proc = subprocess.run([sys.executable, "-c", _LONG_TMPDIR], cwd=ROOT, text=True,
                          capture_output=True, timeout=100,
                          env={**os.environ, "TMPDIR": str(long), "PYTHONPATH": ROOT})
    if "ABSTRACT" in proc.stdout:
        assert "STARTED" in proc.stdout, proc.stdout + proc.stderr
        return
    assert "REFUSED" in proc.stdout, proc.stdout + proc.stderr
    assert "TMPDIR" in proc.stdout and "start_method='spawn'" in proc.stdout
