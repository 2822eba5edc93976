"""Every example and the demo run (tiny sizes), so none of them rots. (Each smoke module
runs on a test process of its own: split by what it runs, they run side by side.)"""

from __future__ import annotations

import pytest

from tests._helpers import needs_keras, needs_tensorflow
from tests.integration._smoke import ROOT, run

pytestmark = [pytest.mark.slow, pytest.mark.smoke, pytest.mark.timeout(400)]


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
