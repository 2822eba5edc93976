"""A passing test run prints no crash dump: the tests that crash workers on purpose keep the
faulthandler a forked worker inherits from pytest from printing "Fatal Python error"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
CRASHING = [  # every test that segfaults a forked worker
    "tests/integration/test_faults.py::test_a_crash_on_the_first_sample_is_worker_died_not_a_dead_main_process[fork]",
    "tests/integration/test_fault_matrix.py::test_fault[worker SIGSEGV-fork]",
    "tests/integration/test_fault_matrix.py::test_fault[op segfaults-fork]",
]


def test_the_tests_that_crash_workers_print_no_crash_dump():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *CRASHING], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "3 passed" in out, out[-3000:]
    assert "Fatal Python error" not in out and "Extension modules:" not in out, out[-3000:]
