"""Every example, the demo and the bench scripts run (tiny sizes), so none of them rots."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._helpers import TIME_SCALE, needs_keras, needs_tensorflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args: str, cwd: Path = ROOT, timeout: float = 300) -> str:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.parametrize("example, method", [
    pytest.param("kanji_cnn.py", None, marks=needs_keras),
    ("custom_augmentation.py", "spawn"),
    pytest.param("subclass_sequence.py", None, marks=needs_keras),
    pytest.param("imagenet_recipe.py", "spawn", marks=needs_keras),
    ("legacy_pil_function.py", "spawn"),
    pytest.param("multi_worker.py", None, marks=[needs_keras, needs_tensorflow]),  # 2 hosts over loopback
    pytest.param("segmentation.py", "spawn", marks=needs_keras),
    pytest.param("detection.py", None, marks=needs_keras),
])
def test_example_runs(example, method):
    extra = ["--start-method", method] if method else []
    if example == "multi_worker.py":  # ends its hosts itself, well before run()'s timeout
        extra = ["--timeout", "200"]
    out = run(str(ROOT / "examples" / example), "--quick", *extra)
    assert out.strip()


def test_albumentations_example_runs():
    pytest.importorskip("albumentations")
    out = run(str(ROOT / "examples" / "albumentations_pipeline.py"), "--quick",
              "--start-method", "spawn")
    assert "bit-identical = True" in out


def test_op_grid_writes_a_png(tmp_path):
    run(str(ROOT / "examples" / "op_grid.py"), "--out", str(tmp_path / "grid.png"))
    assert (tmp_path / "grid.png").stat().st_size > 10_000


@needs_keras
def test_demo_quick(tmp_path):
    out = run("-m", "shmaug.cli", "demo", "--quick", "--out", str(tmp_path))
    import keras

    assert f"(KERAS_BACKEND={keras.backend.backend()})" in out.splitlines()[0]  # says which ran
    assert "images/s fed" in out and "waiting for data" in out and "val. accuracy" in out
    assert "epoch 1/1  Keras PyDataset" in out and "epoch 1/1  shmaug.Sequence" in out
    assert (tmp_path / "augmented_samples.png").is_file() and (tmp_path / "feeding.png").is_file()


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


@needs_keras
def test_bench_gpu_quick(tmp_path):
    """The GPU-machine bench runs whole on the CPU: every feeder fits, every worker count
    delivers each sample once per epoch, and the report and plot are written."""
    out = run("-m", "bench.gpu", "all", "--quick", "--out", str(tmp_path))
    fit = json.loads((tmp_path / "gpu_fit.json").read_text())
    assert [c["workload"] for c in fit["cases"]] == ["W1"]  # quick: W2 would run the same code
    for case in fit["cases"]:
        assert case["compute_rates"] and all(r > 0 for r in case["compute_rates"])
        assert {f["contender"]: f["status"] for f in case["feeders"]} == {
            "shmaug_sequence": "ok", "keras_fork": "ok", "keras_threads": "ok"}
    scaling = json.loads((tmp_path / "gpu_scaling.json").read_text())
    for info in scaling["workloads"].values():
        assert [(r["contender"], r["workers"], r["status"]) for r in info["runs"]] == [
            ("shmaug_loader", 1, "ok"), ("shmaug_loader", 2, "ok"),
            ("keras_fork", 1, "ok"), ("keras_fork", 2, "ok")]
    handover = json.loads((tmp_path / "gpu_handover.json").read_text())
    assert [(r["variant"], r["workers"], r["status"]) for r in handover["runs"]] == [
        (v, k, "ok") for v in ("uint8", "bfloat16", "float32", "float32, copy=False",
                               "float32, Sequence as fit reads it") for k in (1, 2)]
    alone = json.loads((tmp_path / "gpu_alone.json").read_text())
    assert [r["processes"] for r in alone["runs"]] == [1, 2]
    assert all(rate > 0 for r in alone["runs"] for rate in r["rates"])
    # pinned: torch's and / or JAX's rows, whichever this venv has (none: the report says
    # so); no CUDA here, so the pinned ring's rows say so and the others run
    pinned = {r["variant"]: r["status"] for r in
              json.loads((tmp_path / "gpu_pinned.json").read_text())["runs"]}
    assert pinned or "neither torch nor JAX is installed" in out
    assert all(status == ("ring not pinned (no CUDA)" if v.endswith("ring pinned") else "ok")
               for v, status in pinned.items()), pinned
    shmaug_feeder = next(f for f in fit["cases"][0]["feeders"]
                         if f["contender"] == "shmaug_sequence")
    assert shmaug_feeder["no_model_rates"] and "no model: images/s" in out
    # imagenet: shmaug's decode-time crop feeds fit; timm's rows run where torch and timm do
    imagenet = {f["contender"]: f["status"] for f in
                json.loads((tmp_path / "gpu_imagenet.json").read_text())["feeders"]}
    assert imagenet["shmaug"] == "ok" and set(imagenet) == {"shmaug", "timm"}, imagenet
    assert all(s == "ok" or "No module named" in s for s in imagenet.values()), imagenet
    assert (tmp_path / "gpu.md").read_text() in out
    assert out.count("**QUICK run**") == 6 and "GPU waits" in out
    assert (tmp_path / "gpu_scaling.png").stat().st_size > 10_000


def _run_as_main(module, argv, capsys, monkeypatch, code=None):
    """``python -m module *argv`` in this process, as the interpreter runs it (runpy, as
    ``__main__``, with its argv): its stdout, after the SystemExit it must end with (``code``,
    or any failure when None). Saves the second or more a new interpreter costs."""
    import runpy

    monkeypatch.setattr(sys, "argv", [module, *argv])
    monkeypatch.chdir(ROOT)
    # As a fresh `python -m` finds them, not yet run: the module, and what a package's
    # __main__.py runs as the main module in turn (its run.py).
    for name in (module, f"{module}.__main__", f"{module}.run"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(SystemExit) as ended:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    said = capsys.readouterr()
    if code is None:
        assert ended.value.code not in (0, None), said.err[-2000:]
        message = ended.value.code if isinstance(ended.value.code, str) else said.err
        assert "cannot write results to" in message, message[-2000:]
    else:
        assert ended.value.code in (code, None if code == 0 else code), said.err[-2000:]
    return said.out


@pytest.mark.parametrize("script", [
    ["-m", "bench.gpu", "all", "--quick", "--out", "{out}"],
    ["-m", "bench.ops", "--quick", "--out", "{out}/ops.json"],
    ["-m", "bench.ops", "--w1", "--quick", "--out", "{out}/w1.json"],
    ["-m", "bench.ops", "--keras", "--quick", "--out", "{out}/keras.json"],
    ["-m", "bench.ops", "--targets", "--quick", "--out", "{out}/targets.json"],
    ["-m", "bench.engine", "--quick", "--out", "{out}"],
    ["-m", "bench.files", "--quick", "--out", "{out}"],
    ["-m", "bench.files.imagenet", "--quick", "--out", "{out}"],
    ["-m", "bench.files.coco", "--quick", "--out", "{out}"],
    ["-m", "bench.recycle", "--quick", "--out", "{out}"],
    ["-m", "bench.wait_trace", "--quick", "--out", "{out}/trace.json"],
    ["-m", "bench.remote", "--quick", "--out", "{out}"],
    ["-m", "bench.records.locality", "--quick", "--out", "{out}"],
    ["-m", "bench.records.locality_cache", "--quick", "--out", "{out}"],
    ["-m", "bench", "--quick", "--out", "{out}"],
])
def test_a_bench_script_makes_its_output_folder_before_it_measures(script, tmp_path, capsys,
                                                                   monkeypatch):
    """A folder it cannot make (here: under a file) fails at once, with nothing measured.
    Each command runs in this process, as ``python -m`` runs it (``_run_as_main``); every one
    also runs as a process of its own in its smoke test above."""
    (tmp_path / "a_file").write_text("")
    out = str(tmp_path / "a_file" / "results")
    args = [a.format(out=out) for a in script]
    assert args[0] == "-m"
    began = time.monotonic()
    said = _run_as_main(args[1], args[2:], capsys, monkeypatch)
    assert not said.strip(), said[-2000:]  # no table: nothing was measured
    assert time.monotonic() - began < 30 * TIME_SCALE


@pytest.mark.parametrize("module", ["bench", "bench.engine", "bench.ops", "bench.files",
                                    "bench.files.imagenet", "bench.files.coco",
                                    "bench.files.memory",
                                    "bench.records", "bench.records.index",
                                    "bench.records.locality", "bench.records.locality_cache",
                                    "bench.remote", "bench.remote.cache_space",
                                    "bench.gpu", "bench.recycle",
                                    "bench.wait_trace", "bench.soak", "bench.autoworkers"])
def test_bench_help_names_the_command_and_no_issue_number(module, capsys, monkeypatch):
    """Run as ``python -m`` runs it (runpy, ``__main__``, its argv), in this process: a new
    interpreter per command cost a second or more each; every command here also runs as a
    process of its own in its smoke test above."""
    out = _run_as_main(module, ["--help"], capsys, monkeypatch, code=0)
    assert not re.search(r"\b[Ii]ssue \d", out), out
    # A benchmark's __main__.py runs its run.py: neither file may stand for the command.
    assert "__main__.py" not in out and "run.py" not in out, out
