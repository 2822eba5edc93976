"""The Windows code paths, run on this machine: SHMAUG_EMULATE_WINDOWS=1 (see shmaug/platform.py).

Each scenario runs in a child process (`_child_windows.py`), where the engine takes every
Windows branch (spawn only, no select.poll, no pthread_sigmask, no /dev/shm check, terminate()
for a stuck worker) and the POSIX-only calls fail loudly if a branch forgets the switch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._helpers import shmaug_segments

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(sys.platform == "win32", reason="Windows runs it for real")]

ROOT = Path(__file__).resolve().parents[2]


def child(scenario: str, *, emulate: bool = True) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SHMAUG_EMULATE_WINDOWS", None)
    if emulate:
        env["SHMAUG_EMULATE_WINDOWS"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "tests.integration._child_windows", scenario],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    out, err = proc.communicate(timeout=100)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    assert result["children"] == 0, result  # every worker ended before the child exited
    assert result["segments"] == [], result  # ... and every block was unlinked by close()
    assert not shmaug_segments(proc.pid)  # nothing appeared after
    return result


def test_a_loader_runs_end_to_end_with_spawn_and_gives_the_linux_batches():
    windows = child("epoch")
    assert windows["method"] == "spawn"  # the default there; fork is refused (in the child)
    assert windows["digest"] == child("epoch", emulate=False)["digest"]


def test_a_terminated_worker_is_replaced_and_its_work_redone():
    result = child("kill")
    assert result["respawns"] >= 1
    assert result["digest"] == child("epoch")["digest"]


def test_a_stuck_worker_times_out_and_is_terminated_not_killed():
    assert child("timeout")["timeout_index"] == 13


def test_close_ends_a_stuck_worker_and_a_waiting_consumer():
    result = child("close")
    assert result["caught"] == ["ClosedError"]
