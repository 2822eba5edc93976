"""bench.records and bench.records.index run (tiny sizes, in seconds), so neither rots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.smoke, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=220, check=False)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_bench_records_quick(tmp_path):
    """Every format is written and read by shmaug exactly once; a peer whose library is not
    installed (torch, in the main environment) is a skipped row naming it, not a failure."""
    pytest.importorskip("tensorflow")  # writes the shards, and is a contender
    out = run("bench.records", "--quick", "--shards", "3", "--out", str(tmp_path / "out"))
    assert "Same-round ratios" in out and "Not run (not in --contenders): Grain" in out
    result = json.loads((tmp_path / "out" / "records.json").read_text())
    status = {r["contender"]: (r["status"], r["note"]) for r in result["rows"]}
    missing = result["meta"]["data"]["missing"]  # formats whose writer's library is missing
    for fmt in ("tfrecord", "array_record", "huggingface", "webdataset"):
        mine = f"shmaug ImageRecords.from_{fmt}"
        shown = next(c for c in status if c.startswith(mine))
        assert status[shown][0] == ("skipped" if fmt in missing else "ok"), status[shown]
    assert status["shmaug ImageFiles (same images as files)"][0] == "ok"
    for contender, (state, note) in status.items():
        assert state == "ok" or (state == "skipped" and "No module named" in note), contender
    assert result["meta"]["environment"]["cpu"]


def test_bench_records_index_quick(tmp_path):
    out = run("bench.records.index", "--quick", "--out", str(tmp_path / "out"))
    assert "index build, labels read" in out and "worker USS, ImageRecords" in out
    result = json.loads((tmp_path / "out" / "records_index.json").read_text())
    assert all(r["status"] == "ok" for r in result["rows"]) and len(result["rows"]) == 5
