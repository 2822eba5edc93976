"""bench.records runs (tiny sizes, in seconds), so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
pytest.importorskip("tensorflow")  # writes the shards, and is a contender

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def test_bench_records_quick(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.records", "--quick", "--shards", "3",
                           "--out", str(tmp_path / "out")], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=220, check=False)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "shmaug ImageRecords.from_tfrecord" in proc.stdout and "Same-round ratios" in proc.stdout
    result = json.loads((tmp_path / "out" / "records.json").read_text())
    assert [r["status"] for r in result["rows"]] == ["ok", "ok", "ok"]  # exactly once, each
    assert result["meta"]["environment"]["cpu"]
