"""Smoke run of the benchmark suite: ``python -m bench --quick`` end to end (tiny sizes).

Checks the outputs exist and that every contender has a number or an explicit failure/skip
reason. The numbers of a quick run are not measurements and are not checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_quick_writes_every_result(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=240, start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("suite.json", "suite.md", "throughput.png", "scaling.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    payload = json.loads((tmp_path / "suite.json").read_text())
    results = payload["results"]
    kinds = {r["spec"]["contender"] for r in results}
    assert {"keras_single", "keras_fork", "pool", "tfdata_map", "torch", "grain", "shmaug_loader",
            "shmaug_spawn", "shmaug_sequence", "copy"} <= kinds
    for r in results:
        if r.get("status") == "ok":
            assert r.get("rates"), r["spec"]
        else:  # failed, timed out or skipped: the reason is recorded
            assert r.get("status") and (r.get("error") or r["status"] != "ok"), r["spec"]
    assert any(r["spec"].get("fit") for r in results)
    assert payload["targets"]
    report = (tmp_path / "suite.md").read_text()
    assert "| contender |" in report
    assert "**QUICK run**" in report and "not judged" in report and "MISSED" not in report
