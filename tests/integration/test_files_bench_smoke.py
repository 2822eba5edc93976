"""The image-folder benchmarks run (tiny sizes, in seconds), so neither rots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.smoke, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=100, check=False)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_bench_files_quick(tmp_path):
    """The shmaug contenders on the smallest folder (the peers import TensorFlow, Grain and
    torch, each a few seconds: the full quick run is in the README's commands)."""
    out = run("bench.files", "--quick", "--folders", "256", "--contenders", "shmaug,shmaug_full",
              "--out", str(tmp_path / "out"))
    assert "shmaug ImageFiles (reduced decode)" in out and "Reduced-size decode" in out
    result = json.loads((tmp_path / "out" / "files.json").read_text())
    assert [r["status"] for r in result["rows"]] == ["ok", "ok"]
    assert (tmp_path / "out" / "files.md").is_file()


def test_bench_files_memory_quick(tmp_path):
    """Both cases: an image folder, and a COCO JSON read by from_coco with instance masks."""
    out = run("bench.files.memory", "--quick", "--out", str(tmp_path / "out"))
    assert "ImageFiles, 2,000 files" in out and "worker USS" in out and "MISSED" not in out
    assert "from_coco, 2,000 images, 14,000 boxes with polygon masks" in out
    result = json.loads((tmp_path / "out" / "files_memory.json").read_text())
    cases = {(r["kind"], r["method"]): r for r in result["meta"]["results"]}
    assert {r["status"] for r in cases.values()} == {"ok"}, {
        case: r.get("error") for case, r in cases.items() if r["status"] != "ok"}
    for method in ("fork", "spawn"):
        assert len(cases["coco", method]["worker_uss_mib"]) == 2
        assert "uint8[64, 7, 64, 64]" in str(cases["coco", method]["batch"])  # the masks


def test_the_peers_pil_sample_gives_the_benchmarks_output(tmp_path):
    from PIL import Image

    from bench.files.data import photo
    from bench.files.peers import SIZE, pil_sample

    path = tmp_path / "a.jpg"
    Image.fromarray(photo(300, 400, np.random.default_rng(0))).save(path)
    out = pil_sample(str(path), np.random.default_rng(1))
    assert out.shape == (SIZE, SIZE, 3) and out.dtype == np.uint8


def test_bench_crop_path_quick(tmp_path):
    """The reduced crop's bench on real photos (scikit-image's, scikit-learn's): the two
    shmaug paths and the decode ceiling (tf.data and DALI are in the full run)."""
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    out = run("bench.files.crop_path", "--quick", "--files", "12", "--contenders",
              "shmaug,shmaug_exact,decode_ceiling", "--out", str(tmp_path / "out"))
    assert "shmaug ÷ decode_ceiling" in out and "CPU:" in out
    result = json.loads((tmp_path / "out" / "crop_path.json").read_text())
    assert [r["status"] for r in result["results"]] == ["ok", "ok", "ok"]
    assert (tmp_path / "out" / "crop_path.md").is_file()


def test_bench_crop_quality_runs(tmp_path):
    """The reduced crop's quality bench on 3 real photos: every interpolation, the decoders
    here, and (with libjpeg-turbo) the time of a decode at each eighth."""
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    from shmaug.sources.images import turbo

    out = run("bench.files.crop_quality", "--files", "3", "--crops", "1", "--out",
              str(tmp_path / "out"))
    result = json.loads((tmp_path / "out" / "crop_quality.json").read_text())
    assert {name.split()[0] for name in result["rows"]} == {"bilinear", "bicubic", "area",
                                                          "lanczos3"}
    assert all(row["psnr_median"] > 30 for row in result["rows"].values()), result["rows"]
    assert ("| 7/8 |" in out) == turbo.available()


def test_bench_jpeg_libraries_runs(tmp_path):
    """The JPEG libraries' bench on 3 real photos: shmaug's path, OpenCV's and the whole
    decode run; the libraries not installed here are reported as such."""
    pytest.importorskip("skimage")
    pytest.importorskip("sklearn")
    run("bench.files.jpeg_libraries", "--files", "3", "--rounds", "1", "--out",
        str(tmp_path / "out"))
    text = (tmp_path / "out" / "jpeg_libraries.md").read_text()
    assert "| opencv |" in text and "full decode" in text, text
