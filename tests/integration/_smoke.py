"""How the smoke tests run a script: ``python -m ...`` (or a file) in a process of its own, from
the repository, whose stdout they read (tests/integration/test_*_smoke.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args: str, cwd: Path = ROOT, timeout: float = 300) -> str:
    """The script's stdout; it must exit 0 (else its output's tails are the failure)."""
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout
