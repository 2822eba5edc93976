"""The GPU-machine bench (``python -m bench.gpu all --quick``) runs whole on the CPU."""

from __future__ import annotations

import json

import pytest

from tests._helpers import needs_keras
from tests.integration._smoke import run

pytestmark = [pytest.mark.slow, pytest.mark.smoke, pytest.mark.timeout(400)]


@needs_keras
@pytest.mark.backends
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
