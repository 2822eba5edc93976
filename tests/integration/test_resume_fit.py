"""Keras fit killed mid-epoch (SIGKILL) and restarted with BackupAndRestore: with
shmaug.EpochSync the restarted run is fed what the uninterrupted run was fed, and the killed
run leaves no shared memory or worker behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("keras")  # before the helpers below, which import it
from tests._helpers import running, shmaug_segments
from tests.integration._fed import read as fed

pytestmark = [pytest.mark.keras, pytest.mark.timeout(300), pytest.mark.slow]

BATCHES = 6  # per epoch, in _child_resume
_GONE_S = 30.0  # the workers' watchdog and the resource tracker act within seconds


def fit(tmp_path, record, save_freq, *kill):
    cmd = [sys.executable, "-m", "tests.integration._child_resume", str(tmp_path / "backup"),
           str(record), str(save_freq), *map(str, kill)]
    return subprocess.run(cmd, cwd=os.getcwd(), capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole")
    done = fit(tmp, tmp / "fed.jsonl", "epoch")
    assert done.returncode == 0, done.stderr[-3000:]
    return fed(tmp / "fed.jsonl")[0]


def wait_gone(pids, creator):
    deadline = time.monotonic() + _GONE_S
    while time.monotonic() < deadline:
        alive = running(pids)
        if not alive and not shmaug_segments(creator):
            return
        time.sleep(0.2)
    raise AssertionError(f"left behind: processes {alive}, segments "
                         f"{sorted(shmaug_segments(creator))}")


@pytest.mark.parametrize("save_freq", [2, "epoch"])
def test_fit_killed_mid_epoch_resumes_with_the_same_data(tmp_path, uninterrupted, save_freq):
    first = tmp_path / "first.jsonl"
    killed = fit(tmp_path, first, save_freq, 1, 3)  # SIGKILL after batch 3 of epoch 1
    assert killed.returncode == -9, killed.stderr[-3000:]
    with open(str(first) + ".pids") as f:
        pids = json.load(f)
    wait_gone(pids[1:], creator=pids[0])
    before, _ = fed(first)
    assert before[0] == uninterrupted[0]

    second = tmp_path / "second.jsonl"
    again = fit(tmp_path, second, save_freq)
    assert again.returncode == 0, again.stderr[-3000:]
    after, order = fed(second)
    # Keras restores the epoch (not the batch) and restarts it from its first step.
    assert order == [1, 2]
    for epoch in order:
        assert len(after[epoch]) == BATCHES * 8
        assert after[epoch] == uninterrupted[epoch], f"epoch {epoch} fed other data"
