"""on_error="skip" counts: the same for any worker count, start method and crash history.

20 image files in two classes, two of them unreadable (a truncated PNG, the first sample, so
the probe decodes it too; and a text file named .png), read for two epochs. ``skipped`` counts
the stand-ins in delivered batches, ``unreadable`` names the files, and one ShmaugWarning says
so, whoever decoded what.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import psutil
import pytest
from PIL import Image

import shmaug

pytestmark = pytest.mark.timeout(120)

EPOCHS = 2


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> shmaug.ImageFiles:
    root = tmp_path_factory.mktemp("skip")
    rng = np.random.default_rng(0)
    for label in ("a", "b"):
        (root / label).mkdir()
        for i in range(10):
            pixels = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / label / f"{i:02d}.png")
    whole = (root / "a" / "00.png").read_bytes()
    (root / "a" / "00.png").write_bytes(whole[: len(whole) // 2])  # truncated
    (root / "b" / "05.png").write_text("this is not an image")
    return shmaug.ImageFiles.from_directory(root, image_size=(6, 6), on_error="skip")


def unreadable_paths(files: shmaug.ImageFiles) -> list[str]:
    return sorted(str(Path(files.paths[0]).parent.parent / p) for p in ("a/00.png", "b/05.png"))


def kill(pid: int) -> None:
    """SIGKILL a worker (TerminateProcess on Windows) and wait until it is dead, not reaped
    (that is the pool's job), so the rest of the run cannot outpace its death. A forkserver's
    worker is the server's child: the server reaps it, so it may be gone at once."""
    process = psutil.Process(pid)
    process.kill()
    if sys.platform == "win32":  # no zombies there, and waiting reaps nothing
        process.wait(30)
        return
    try:
        while process.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
    except psutil.NoSuchProcess:
        pass


def run(files, workers, start_method=None, kill_after=None):
    """Two epochs; per epoch the stats, and the batches. ``kill_after``: SIGKILL a worker
    after that many batches of the first epoch."""
    per_epoch, batches = [], []
    with pytest.warns(shmaug.ShmaugWarning, match=r"on_error='skip'") as warned, \
            shmaug.Loader(files, batch_size=4, workers=workers, start_method=start_method,
                          seed=5, shuffle=True,
                          # With a kill, no batch made ahead: the dead worker must get work
                          # after it (else a fast run ends before the pool looks for deaths).
                          max_queue_size=1 if kill_after else 8) as loader:
        for _ in range(EPOCHS):
            for k, (xb, yb) in enumerate(loader):
                batches.append((xb, yb))
                if kill_after is not None and k + 1 == kill_after:
                    kill(loader.pids[0])
                    kill_after = None
            stats = loader.stats()
            per_epoch.append((stats["skipped"], stats["unreadable"]))
        respawns = loader.stats()["respawns"]
    return per_epoch, batches, [str(w.message) for w in warned if w.category is shmaug.ShmaugWarning], respawns


CASES = [(0, None)] + [(w, m) for w, m in ((1, "fork"), (2, "fork"), (2, "spawn"))
                      if m in multiprocessing.get_all_start_methods()]


@pytest.mark.parametrize("workers, start_method", CASES)
def test_skipped_and_unreadable_do_not_depend_on_the_workers(files, workers, start_method):
    expected = unreadable_paths(files)
    per_epoch, batches, messages, _ = run(files, workers, start_method)
    # One stand-in per unreadable file per epoch delivered; the probe and prefetching of the
    # next epoch do not count.
    assert per_epoch == [(2, expected), (4, expected)]
    assert len(messages) == 1, messages  # once per loader, not per file, epoch or worker
    assert any(repr(path) in messages[0] for path in expected), messages[0]
    assert "stats()['unreadable']" in messages[0]
    reference = run(files, 0)[1]
    for (x, y), (x0, y0) in zip(batches, reference, strict=True):
        np.testing.assert_array_equal(x, x0)
        np.testing.assert_array_equal(y, y0)


def test_a_killed_worker_does_not_change_the_counts(files):
    per_epoch, _, messages, respawns = run(files, 2, kill_after=1)  # the platform's default
    assert respawns >= 1
    assert per_epoch == [(2, unreadable_paths(files)), (4, unreadable_paths(files))]
    assert len(messages) == 1


def test_reset_stats_restarts_skipped_but_keeps_the_paths(files):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", shmaug.ShmaugWarning)
        with shmaug.Loader(files, batch_size=4, workers=1, seed=0) as loader:
            list(loader)
            loader.reset_stats()
            assert loader.stats()["skipped"] == 0
            assert loader.stats()["unreadable"] == unreadable_paths(files)
            loader.batch(0)  # a/00.png is sample 0: in batch 0 when not shuffled
            assert loader.stats()["skipped"] == 1
        assert loader.stats()["unreadable"] == unreadable_paths(files)  # closed: still there


def test_nothing_unreadable_says_nothing(tmp_path):
    for i in range(3):
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / f"{i}.png")
    files = shmaug.ImageFiles.from_directory(tmp_path, image_size=(4, 4), on_error="skip",
                                             labels=None)
    with shmaug.Loader(files, batch_size=2, workers=1) as loader:  # warnings are errors here
        list(loader)
        assert loader.stats()["skipped"] == 0 and loader.stats()["unreadable"] == []


def test_a_class_with_no_readable_file_says_so_without_offering_skip_again(tmp_path):
    """on_error='skip' is set: the fix is the files, not the option the first error offers."""
    for label, count in (("a", 3), ("c", 1)):
        (tmp_path / label).mkdir()
        for i in range(count):
            Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / label / f"{i}.png")
    (tmp_path / "c" / "0.png").write_text("not an image")
    (tmp_path / "c" / "1.jpg").write_bytes(b"")
    files = shmaug.ImageFiles.from_directory(tmp_path, image_size=(4, 4), on_error="skip")
    with pytest.raises(shmaug.ImageReadError) as error, \
            shmaug.Loader(files, batch_size=5, workers=0) as loader:
        list(loader)
    message = str(error.value)
    assert "none can stand in" in message and "add a readable one to its class" in message
    assert "on_error" not in message, message
