"""Loaders in a small /dev/shm (Docker's default is 64 MiB), a real tmpfs of that size in a
mount namespace of its own: each loader fits and runs, or is refused before it starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _in_small_shm(count: int, rows: int = 256) -> subprocess.CompletedProcess[str]:
    script = (f"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {sys.executable} -m "
              f"tests.integration._child_small_shm {count} {rows}")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, text=True,
                          capture_output=True, timeout=200,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _run_in_shm(options: str, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` (no double quotes) run by this Python in a mount namespace of its own, whose
    /dev/shm is a tmpfs mounted with ``options``."""
    script = f"mount -t tmpfs -o {options} tmpfs /dev/shm && exec {sys.executable} -c \"{code}\""
    return subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _namespaces() -> bool:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs "
                            "/dev/shm"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _namespaces(), reason="needs a mount namespace (unshare -m, as root)")
def test_loaders_that_together_outgrow_a_64_mib_dev_shm_are_refused_not_killed():
    """Blocks were created sparse: a second loader counted the first's unwritten ring as
    free, sized its own into it, and a worker (or the main process) writing past the tmpfs
    died of SIGBUS, blamed on the op. Reserved at creation, the loader that does not fit is
    refused before it starts, naming the room the others hold, and the rest run."""
    done = _in_small_shm(3)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["built"] == 2, report
    assert "this process's other loaders hold" in report["refused"]
    assert "close those it no longer uses" in report["refused"]


@pytest.mark.skipif(not _namespaces(), reason="needs a mount namespace (unshare -m, as root)")
def test_a_dataset_of_most_of_a_64_mib_dev_shm_is_counted_once():
    """The dataset's block is made whole with sample 0 copied: reserved whole at once, its
    rest was then counted again against the room left, and a 39 MiB dataset was refused."""
    done = _in_small_shm(1, rows=800)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"built": 1, "refused": ""}


@pytest.mark.skipif(not _namespaces(), reason="needs a mount namespace (unshare -m, as root)")
def test_a_read_only_dev_shm_is_told_to_be_mounted_writable_not_freed():
    code = ("import numpy as np, shmaug\n"
            "from tests import _ops\n"
            "try:\n"
            "    shmaug.Loader(np.zeros((8, 8, 8), np.uint8), None, batch_size=4,\n"
            "                  augment=_ops.identity, workers=0)\n"
            "except shmaug.SharedMemoryError as exc:\n"
            "    print(exc)\n")
    done = _run_in_shm("size=4m,ro", code)
    assert "Read-only file system" in done.stdout, done.stdout + done.stderr
    assert "mount a writable tmpfs there" in done.stdout
    assert "lower `max_queue_size`" not in done.stdout


@pytest.mark.skipif(not _namespaces(), reason="needs a mount namespace (unshare -m, as root)")
def test_a_dev_shm_filled_by_another_program_names_what_this_processs_loaders_hold():
    """An SRE's /dev/shm filled by a file while a loader ran: the next loader's small block
    was refused with "0 bytes free" alone, not that this process's first loader held room
    there it could close."""
    code = ("import os, numpy as np, shmaug\n"
            "from tests import _ops\n"
            "first = shmaug.Loader(np.zeros((64, 64, 64, 3), np.uint8), None, batch_size=8,\n"
            "                      augment=_ops.identity, workers=0)\n"
            "try:\n"
            "    with open('/dev/shm/filler', 'wb', buffering=0) as f:\n"
            "        while True:\n"
            "            f.write(bytes(4096))\n"
            "except OSError:\n"
            "    pass\n"
            "try:\n"
            "    shmaug.Loader(np.zeros((8, 8, 8), np.uint8), None, batch_size=4,\n"
            "                  augment=_ops.identity, workers=0)\n"
            "except shmaug.SharedMemoryError as exc:\n"
            "    print(exc)\n"
            "first.close()\n")
    done = _run_in_shm("size=2m", code)
    assert "Not enough shared memory" in done.stdout or "Could not create" in done.stdout, \
        done.stdout + done.stderr
    assert "close the loaders of this process it no longer uses (its other loaders hold" in \
        done.stdout or "this process's other loaders hold" in done.stdout, done.stdout
