"""Module-level augment functions for tests (importable by spawned workers)."""

from __future__ import annotations

import os
import random
import re
import signal
import time
import warnings

import numpy as np

MARKER = 251  # a first pixel with this value makes `fail_on_marker` raise


def noisy(image, rng):
    """Uses the passed rng *and* both global RNGs, so every stream must be seeded."""
    out = image.astype(np.float32) / 255.0
    out += rng.normal(0, 0.1, size=out.shape).astype(np.float32)
    out += np.float32(np.random.uniform(-0.05, 0.05))
    out += np.float32(random.uniform(-0.05, 0.05))
    return out


def spawned_views(image, rng):
    """Two child generators per sample (a view each), as contrastive-learning code spawns
    them: ``rng.spawn`` must be part of the stream."""
    a, b = rng.spawn(2)
    return np.full(image.shape, a.random() + 2 * b.random() + 4 * rng.spawn(1)[0].random(),
                   np.float32)


def identity(image, rng):
    return image


def gil_hog_on_marker(image, rng):
    """Stuck for hours in C code that holds the GIL (a regex backtracking) on a sample whose
    first pixel is ``MARKER``: no Python thread of the process runs meanwhile."""
    if image.flat[0] == MARKER:
        re.match(r"(a+)+$", "a" * 60 + "b")
    return image


def slow_noisy(image, rng):
    time.sleep(0.01)
    return noisy(image, rng)


def slow_and_noted(image, rng):
    """Takes 50 ms, then appends when it ended to the file SHMAUG_TEST_NOTES names."""
    time.sleep(0.05)
    with open(os.environ["SHMAUG_TEST_NOTES"], "a") as notes:
        notes.write(f"{time.monotonic()}\n")
    return image


def fail_on_marker(image, rng):
    if image.flat[0] == MARKER:
        raise ValueError("bad pixel in this sample")
    return image


def hang_on_marker(image, rng):
    if image.flat[0] == MARKER:
        time.sleep(60)
    return image


def plus_environ(image, rng):
    """The image plus the worker's SHMAUG_TEST_ADD (0 when unset)."""
    return image + np.uint8(os.environ.get("SHMAUG_TEST_ADD", "0"))


def warns(image, rng):
    """Warns, as a numpy op dividing by zero would, and gives the image back."""
    warnings.warn("an op's own warning", UserWarning)
    return image


def thread_counts_read(image, rng):
    """The image's first row: what a BLAS or OpenMP library loading now would read as its
    thread count (0 where unset), per variable of ``worker._THREAD_COUNTS``."""
    from shmaug.engine.workers.worker import _THREAD_COUNTS

    out = image.copy()
    out[0, :len(_THREAD_COUNTS)] = [int(os.environ.get(v, "0")) for v in _THREAD_COUNTS]
    return out


def pause_on_marker(image, rng):
    """Takes 3 s on the marked sample: far longer than the others, yet it ends."""
    if image.flat[0] == MARKER:
        time.sleep(3)
    return image


def die_on_marker(image, rng):
    if image.flat[0] == MARKER:
        os.kill(os.getpid(), signal.SIGKILL)
    return image


def die_leaving_a_helper_on_marker(image, rng):
    """Dies while a forked helper holds copies of all its descriptors for 6 s (the worker's
    end of its process sentinel included)."""
    if image.flat[0] == MARKER:
        if os.fork() == 0:
            time.sleep(6)
            os._exit(0)
        os._exit(3)
    return image


def hang_always(image, rng):
    time.sleep(3600)
    return image


def hang_always_on_marker(image, rng):
    if image.flat[0] == MARKER:
        time.sleep(3600)
    return image


def crash():
    """SIGSEGV this process, as a bad OpenCV call or C extension would. Without a dump: a
    worker forked by pytest inherits its faulthandler, and this crash is the test's intent."""
    import faulthandler

    faulthandler.disable()
    os.kill(os.getpid(), signal.SIGSEGV)


def segfault_always(image, rng):
    """A crash in native code, as a bad OpenCV call or C extension would give."""
    crash()
    return image


def only_in_workers(image, rng):
    """Refuses to run in the main process: user code belongs in the workers."""
    import multiprocessing

    if multiprocessing.parent_process() is None:
        raise AssertionError("user code ran in the main process")
    return image


def segfault_on_marker(image, rng):
    if image.flat[0] == MARKER:
        crash()
    return image


def exceeds_memory_limit_on_marker(image, rng):
    """Caps this process's address space just above its size, then asks for 2 GiB more."""
    if image.flat[0] == MARKER:
        import resource

        import psutil

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (psutil.Process().memory_info().vms + 2**26, hard))
        try:
            np.ones(2**31, np.uint8)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return image


def load_failing_at(index, at=21):
    if index == at:
        raise KeyError(f"no sample {index}")
    return np.full((4, 4), index % 256, np.uint8)


def wrong_shape_on_marker(image, rng):
    if image.flat[0] == MARKER:
        return image[:-1]
    return image


def upscaled_float(image, rng):
    """A 64x64 float32 output from any input: a ring far larger than the data."""
    return np.resize(image.astype(np.float32), (64, 64))


def mean_only(image, rng):
    """Reads every pixel, returns a tiny output: for the zero-copy memory test."""
    return np.array([image.mean()], dtype=np.float32)


def edits_in_place(image, rng):
    image += 1
    return image


def blurs_in_place(image, rng):
    """Legacy OpenCV code that writes its result into its input."""
    import cv2

    cv2.GaussianBlur(image, (3, 3), 1.0, dst=image)
    return image


def calls_a_helper_that_fails(image, rng):
    """The user's frames in a worker's traceback: this one and the helper's (on the marker)."""
    return _failing_helper(image)


def _failing_helper(image):
    if image.flat[0] == MARKER:
        raise ZeroDivisionError("the user's helper failed")
    return image


def sometimes_global(image, rng):
    """Draws from both global RNGs on about one sample in five (as `rng` decides), so a worker
    that watches for draws sees plain samples first."""
    out = image.astype(np.float32)
    if rng.random() < 0.2:
        out += np.float32(random.random()) + np.float32(np.random.random())
    return out


def sometimes_np_normal(image, rng):
    """numpy's global normal now and then: its held-back second Gaussian must not slip
    through unseeded."""
    out = image.astype(np.float32)
    if rng.random() < 0.3:
        out += np.float32(np.random.normal())
    return out


def sometimes_py_gauss(image, rng):
    """The same with Python's `random.gauss`."""
    out = image.astype(np.float32)
    if rng.random() < 0.3:
        out += np.float32(random.gauss(0.0, 1.0))
    return out


def numpy_global_only(image, rng):
    """Draws from numpy's global generator only, and reports where Python's stands (reading
    its state does not move it)."""
    return np.array([np.random.random(), hash(random.getstate()) % 1000], np.float64)


def fails_on_a_global_draw(image, rng):
    """Raises on about one sample in three, as the global `random` decides."""
    if random.random() < 0.3:
        raise ValueError("unlucky draw")
    return image.astype(np.float32)


class SaysGlobal:
    """Wraps an op and declares it a user of the globals: seeded for every sample."""

    uses_global_rng = True

    def __init__(self, fn=sometimes_global):
        self.fn = fn

    def __call__(self, image, rng):
        return self.fn(image, rng)


class SaysPure(SaysGlobal):
    """Wraps an op and declares, wrongly where it draws from them, that it never uses the
    globals: a function ported with the flag before its body."""

    uses_global_rng = False


def gc_frozen_objects(image, rng):
    """Every pixel says whether this process's collector has frozen (ignored) objects."""
    import gc

    return np.full_like(image, min(gc.get_freeze_count(), 1))


def tiny_model(input_shape, classes, seed=0):
    """A small CNN, built the same way every time (for weight comparisons)."""
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input(input_shape),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(classes, activation="softmax"),
    ])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


class NoisySource:
    """A sample source whose `load` draws from the global np.random (as legacy loaders do)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def load(self, index):
        return np.full((4, 4), index, np.float32) + np.float32(np.random.random())


class RecordingLoad:
    """A ``load`` with the engine's ``prefetch(indices, ahead)`` hook that appends, per call,
    one line to ``path`` (any process): the task's samples, then those queued behind it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def prefetch(self, indices, ahead=()):
        with open(self.path, "a") as f:
            f.write(f"{list(map(int, indices))}|{list(map(int, ahead))}\n")

    def __call__(self, index):
        time.sleep(0.005)  # the parent fills the worker's pipe meanwhile
        return np.full((4, 4), index % 256, np.uint8)


# -- fed to Keras by the fit tests (tests/_fit.py re-exports them) ------------------------


def mark(image, rng):
    """The sample's id untouched, one draw of its random stream in channel 1."""
    out = image.copy()
    out[..., 1] = rng.random()
    return out


def same(image, rng):
    """No change: work for the workers whose output equals ``x`` (predictions compare)."""
    return image


def fails_at_sample_7_once(image, rng):
    """Raises the first time any worker augments sample 7 (a marker file, named by the
    environment variable SHMAUG_TEST_FAILED_ONCE, says it did)."""
    if image[0, 0, 0] == 7:
        try:
            os.close(os.open(os.environ["SHMAUG_TEST_FAILED_ONCE"], os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return mark(image, rng)
        raise ValueError("sample 7 is broken")
    return mark(image, rng)


def fails_while_flagged(image, rng):
    """Raises while the file named by SHMAUG_TEST_FAILING exists (a transient failure: a
    bucket away); else ``mark``."""
    if os.path.exists(os.environ["SHMAUG_TEST_FAILING"]):
        raise OSError("failing while flagged")
    return mark(image, rng)


def fails_slowly_at_1_and_at_once_at_2(image, rng):
    """Raises on a sample whose first pixel is 1 (after 0.5 s) or 2 (at once)."""
    if image.flat[0] == 1:
        time.sleep(0.5)
    if image.flat[0] in (1, 2):
        raise ValueError(f"sample marked {image.flat[0]}")
    return image


def raise_from_batch_two(image, rng):
    """Keras' ExceptionPyDataset: batches 0 and 1 are fine, batch 2 raises."""
    if image.flat[0] >= 2 * 8:  # the test fills x[i] with i
        raise ValueError("Expected exception")
    return image


def sleepy_pid(image, rng):
    """A worker bound by sleeping (5 ms per sample), as a slow decode would be, that writes
    its own process id into the sample: who made each one can be counted. Sleeping, many
    workers run on 2 cores without competing for them."""
    time.sleep(0.005)
    return np.full(image.shape, os.getpid(), np.float32)


class FlipsByLabel:
    """Flips the images whose class is not 0, reading a per-sample label it declares
    (``target_names``): augmentation by class."""

    target_names = ("label",)

    def __call__(self, image, rng):
        return self.augment_targets(image, {}, rng)[0]

    def augment_targets(self, image, targets, rng):
        if "label" in targets and int(targets["label"]) != 0:
            image = image[:, ::-1]
        return image, targets


def alarm_handler_kept(image, rng):
    """The image, all ones where this worker has a Python SIGALRM handler (an op's own
    timeout), else zeros."""
    import signal

    return np.full_like(image, int(callable(signal.getsignal(signal.SIGALRM))))
