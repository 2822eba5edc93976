"""Every bench script runs (tiny sizes), so none of them rots; the GPU bench, the longest, has
a module of its own (test_bench_gpu_smoke.py) to run beside this one."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from tests._helpers import needs_keras
from tests.integration._smoke import run

pytestmark = [pytest.mark.slow, pytest.mark.smoke, pytest.mark.timeout(400)]


def test_bench_ops_quick(tmp_path):
    out = run("-m", "bench.ops", "--quick", "--out", str(tmp_path / "new" / "ops.json"))
    assert "sine_warp" in out and "albumentations" in out
    assert (tmp_path / "new" / "ops.md").is_file()  # the folder was made
    # A quick run says it measures nothing, and judges and compares nothing.
    assert out.startswith("**QUICK run**") and "not judged" in out and "This run took" in out
    assert not re.search(r"\b(met|MISSED)\b|slower than|faster than", out), out[-2000:]
    if importlib.util.find_spec("albumentations") is not None:  # the plot needs its column
        assert (tmp_path / "new" / "ops.png").stat().st_size > 10_000


def test_bench_ops_w1_quick(tmp_path):
    out = run("-m", "bench.ops", "--w1", "--quick", "--out", str(tmp_path / "w1.json"))
    assert "glyph_distort" in out and "float16 edge" in out


def test_bench_ops_keras_quick(tmp_path):
    out = run("-m", "bench.ops", "--keras", "--quick", "--out", str(tmp_path / "keras.json"))
    assert "| hue |" in out and "pipeline: Keras guide block" in out or \
        importlib.util.find_spec("keras") is None
    assert out.startswith("**QUICK run**") and "not judged" in out


def test_bench_ops_targets_quick(tmp_path):
    out = run("-m", "bench.ops", "--targets", "--quick", "--out", str(tmp_path / "t.json"))
    assert "| hflip |" in out and "targets / image alone" in out
    assert out.startswith("**QUICK run**") and "not judged" in out
    assert (tmp_path / "t.md").is_file()


def test_bench_engine_quick(tmp_path):
    out = run("-m", "bench.engine", "--quick", "--out", str(tmp_path / "new"))
    assert "identity" in out and (tmp_path / "new" / "engine.json").is_file()
    assert "**QUICK run**" in out and "not judged" in out and "MISSED" not in out
    assert "main-process CPU per image" in out and "feed rate it implies" in out


def test_bench_files_imagenet_quick(tmp_path):
    """Every contender runs or says why not: a library this venv lacks (torch, timm, DALI,
    TensorFlow) is "not installed", never a failed run; shmaug and the decode ceiling run."""
    out = run("-m", "bench.files.imagenet", "--quick", "--out", str(tmp_path))
    result = json.loads((tmp_path / "imagenet.json").read_text())
    status = {r["contender"]: r["status"] for r in result["rows"]}
    assert status["shmaug"] == status["shmaug_no_ra"] == status["decode_ceiling"] == "ok", status
    assert set(status.values()) <= {"ok", "not installed", "n/a"}, status
    if importlib.util.find_spec("tensorflow") is not None:
        assert status["tfdata"] == "ok", status
    assert "**QUICK run**" in out and "not judged" in out and "MISSED" not in out
    assert "shmaug_no_ra ÷ decode_ceiling" in out and (tmp_path / "imagenet.md").is_file()


def test_bench_files_coco_quick(tmp_path):
    """shmaug reads the COCO folder it writes, with boxes and masks; torchvision's and
    albumentations' rows run where torch is installed and say "not installed" where not."""
    out = run("-m", "bench.files.coco", "--quick", "--out", str(tmp_path))
    result = json.loads((tmp_path / "coco.json").read_text())
    status = {r["contender"]: r["status"] for r in result["rows"]}
    assert status["shmaug"] == "ok" and set(status.values()) <= {"ok", "not installed"}, status
    assert result["meta"]["masks"]
    assert all(not r.get("problems") for r in result["meta"]["results"]), result["meta"]
    assert "**QUICK run**" in out and "MISSED" not in out and "shmaug ÷ torchvision" in out
    assert (tmp_path / "coco.md").is_file()


def test_bench_wait_trace_quick(tmp_path):
    out = run("-m", "bench.wait_trace", "--quick", "--out", str(tmp_path / "new" / "trace.json"))
    assert "ready batch, median ms" in out and (tmp_path / "new" / "trace.json").is_file()
    assert out.startswith("**QUICK run**")


def test_bench_recycle_quick(tmp_path):
    out = run("-m", "bench.recycle", "--quick", "--out", str(tmp_path))
    # quick: one kind of process, the one that ran tf.data first where TensorFlow is installed
    process = "after tf.data" if importlib.util.find_spec("tensorflow") else "plain"
    assert f"| W1 | {process} |" in out and out.startswith("**QUICK run**")
    assert json.loads((tmp_path / "recycle.json").read_text())


def test_bench_ragged_quick(tmp_path):
    out = run("-m", "bench.ragged", "--quick", "--out", str(tmp_path))
    assert out.startswith("**QUICK run**") and "| fork | list |" in out
    runs = json.loads((tmp_path / "ragged.json").read_text())
    assert {r["way"] for r in runs} == {"list", "load", "files"} and all(
        r["batches"] == 3 for r in runs)  # (12 photos in batches of 4, every way)


@needs_keras
def test_soak_quick(tmp_path):
    """20 epochs with 4 workers SIGKILLed and one fit: nothing grows, nothing is left."""
    out = run("-m", "bench.soak", "--quick", "--out", str(tmp_path / "soak.txt"))
    assert "PASS: nothing grew" in out and "4 workers SIGKILLed, 4 respawned" in out
    assert (tmp_path / "soak.txt").read_text() == out


@needs_keras
def test_bench_start_methods_quick(tmp_path):
    """The default start method and workers=0 once each, with a Sequence subclass in a user
    module that imports Keras (the path every other probe of the script takes too)."""
    out = run("-m", "bench.start_methods", "--quick", "--subclass", "--out", str(tmp_path))
    assert out.count("construction to first batch") == 2 * 2 and "failed" not in out
    assert "| default (" in out and list(tmp_path.glob("start_methods_subclass_*.json"))


@needs_keras
@pytest.mark.backends
def test_bench_handoff_quick(tmp_path):
    """The main process's work per stage, this venv's backend only (tens of seconds)."""
    import keras

    out = run("-m", "bench.handoff", "--quick", "--backends", keras.backend.backend(),
              "--out", str(tmp_path))
    handoffs = 3 if keras.backend.backend() == "torch" else 2  # torch: lent as numpy too
    assert out.count("CPU ms per batch") == handoffs * 3 and "share of one core" in out
    assert (tmp_path / "handoff.json").is_file() and "error" not in out


def test_bench_autoworkers_quick(tmp_path):
    out = run("-m", "bench.autoworkers", "--quick", "--out", str(tmp_path))
    assert "auto's count per epoch" in out and "auto ÷ the best fixed setting" in out
    assert "auto settled on" in out
    payload = json.loads((tmp_path / "autoworkers.json").read_text())
    assert {(r["case"], r["setting"]) for r in payload["runs"]} >= {
        ("fast", "1"), ("fast", "auto"), ("slow", "1"), ("slow", "auto")}
    assert all(row["workers"] >= 1 for r in payload["runs"] for row in r["epochs"])
    assert (tmp_path / "autoworkers.md").read_text() in out


def test_bench_remote_quick(tmp_path):
    """Files and tar shards through nginx (where installed) or a real S3 server behind the
    delaying proxy, with and without the disk cache; requests and bytes counted."""
    for module in ("s3fs", "moto", "boto3"):
        pytest.importorskip(module)
    out = run("-m", "bench.remote", "--quick", "--out", str(tmp_path))
    assert out.startswith("**QUICK run**") and " 20 ms: shmaug tar, no disk cache |" in out
    rows = json.loads((tmp_path / "remote.json").read_text())["rows"]
    assert rows["local disk: files"]["images_per_s"] > 0
    cached = next(r for n, r in rows.items() if n.endswith("shmaug tar, disk cache: epoch 1"))
    assert cached["images_per_s"] > 0 and cached["requests"] > 0 and cached["mb"] > 0


def test_bench_records_locality_quick(tmp_path):
    """The table of docs/determinism.md: blocks download each shard once an epoch, and a
    window of every shard is as mixed as the exact shuffle."""
    out = run("-m", "bench.records.locality", "--quick", "--out", str(tmp_path))
    rows = {r["order"]: r for r in json.loads((tmp_path / "locality.json").read_text())["rows"]}
    assert rows["blocks, window 8"]["downloads_per_epoch"] == 32
    assert rows["exact"]["downloads_per_epoch"] > 32 * 10
    assert rows["blocks, window 8"]["neighbours"] < rows["blocks, window 32"]["neighbours"]
    assert "| blocks, window 8 |" in out and (tmp_path / "locality.md").is_file()


def test_bench_records_locality_cache_quick(tmp_path):
    pytest.importorskip("moto.server", reason="needs moto[server]")
    out = run("-m", "bench.records.locality_cache", "--quick", "--out", str(tmp_path))
    assert out.count("| blocks") == 6 and out.count("| True |") == 3
    assert (tmp_path / "locality_cache.md").is_file()


def test_bench_remote_cost_runs():
    """CPU per GET, each client against the real S3 server: a row per client, figures > 0."""
    for module in ("s3fs", "moto", "boto3", "urllib3"):
        pytest.importorskip(module)
    out = run("-m", "bench.remote.cost", "--requests", "5")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line
            and "**" not in line][1:]
    assert [r.split(" | ")[0] for r in rows][:6] == [
        "| s3fs cat_file (a HEAD, then the GET)", "| s3fs cat_file, max_concurrency=1 (shmaug's)",
        "| boto3 get_object", "| urllib3 GET of a presigned URL", "| obstore S3Store get",
        "| obstore S3Store get_range"]
    measured = [r for r in rows if "not installed" not in r]  # obstore and nginx are optional
    assert measured and all(float(r.strip("| ").split(" | ")[3]) > 0 for r in measured)


def test_bench_remote_cache_space_runs():
    """A full disk cache's write, the kept order against ranking every entry: both timed."""
    out = run("-m", "bench.remote.cache_space", "--entries", "300", "--writes", "5")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 4 and all(float(r.split(" | ")[-1].strip(" |")) >= 0 for r in rows[1:])
