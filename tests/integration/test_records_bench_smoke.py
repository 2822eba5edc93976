"""bench.records and bench.records_index run (tiny sizes, in seconds), so neither rots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=220, check=False)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_bench_records_quick(tmp_path):
    pytest.importorskip("tensorflow")  # writes the shards, and is a contender
    out = run("bench.records", "--quick", "--shards", "3", "--out", str(tmp_path / "out"))
    assert "shmaug ImageRecords.from_tfrecord" in out and "Same-round ratios" in out
    result = json.loads((tmp_path / "out" / "records.json").read_text())
    assert [r["status"] for r in result["rows"]] == ["ok", "ok", "ok"]  # exactly once, each
    assert result["meta"]["environment"]["cpu"]


def test_bench_records_index_quick(tmp_path):
    out = run("bench.records_index", "--quick", "--out", str(tmp_path / "out"))
    assert "index build, labels read" in out and "worker USS, ImageRecords" in out
    result = json.loads((tmp_path / "out" / "records_index.json").read_text())
    assert all(r["status"] == "ok" for r in result["rows"]) and len(result["rows"]) == 5
