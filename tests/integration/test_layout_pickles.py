"""Objects of every part reach fresh workers by their module path after the move into folders:
a source (``shmaug.sources.files.ImageFiles``), a pipeline of registered ops
(``shmaug.ops.*``) and a user's op (``tests._ops``), under the start methods that import them
anew (spawn, forkserver), give the batches a run in this process gives."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest
from PIL import Image

import shmaug
from tests import _ops
from tests._helpers import assert_same_batches

METHODS = [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(6):
        path = tmp_path / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (10, 12), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return shmaug.ImageFiles.from_paths(paths, labels=list(range(6)), image_size=(8, 8),
                                        color_mode="grayscale")


def test_each_part_pickles_under_its_new_module_path(files):
    pipeline = shmaug.Compose([shmaug.get("rotate").bind(degrees=(-20, 20)), _ops.noisy])
    for obj, module in ((files, b"shmaug.sources.files"), (pipeline, b"shmaug.ops")):
        data = pickle.dumps(obj)
        assert module in data and b"shmaug.files" not in data


@pytest.mark.parametrize("method", METHODS)
def test_a_source_and_a_pipeline_reach_fresh_workers(files, method):
    pipeline = shmaug.Compose([shmaug.get("rotate").bind(degrees=(-20, 20)), _ops.noisy])
    runs = []
    for workers, start_method in ((0, None), (2, method)):
        with shmaug.Loader(files, batch_size=4, augment=pipeline, workers=workers,
                           start_method=start_method, seed=3, shuffle=True) as loader:
            runs.append([loader.batch(i) for i in range(len(loader))])
    assert_same_batches(runs[1], runs[0])
