"""An albumentations pipeline in real workers: one output per (seed, epoch, sample index)."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import shmaug

A = pytest.importorskip("albumentations")
pytestmark = pytest.mark.timeout(120)

METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]


def _op() -> shmaug.ops.FromAlbumentations:
    return shmaug.from_albumentations(A.Compose([
        A.Affine(rotate=(-15, 15), scale=(0.9, 1.1), p=1.0),
        A.OneOf([A.GaussianBlur(p=1.0), A.GaussNoise(p=1.0)], p=0.8),
        A.CoarseDropout(num_holes_range=(1, 2), p=0.5),
    ]))


def _epochs(images: np.ndarray, **kwargs: object) -> list[np.ndarray]:
    y = np.arange(len(images))
    with shmaug.Loader(images, y, batch_size=6, augment=_op(), seed=11, shuffle=True,
                       **kwargs) as loader:
        out = []
        for _ in range(2):
            xs, ys = zip(*loader)
            order = np.argsort(np.concatenate(ys))  # by sample index, whatever the shuffle
            out.append(np.concatenate(xs)[order])
    return out


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return np.random.default_rng(0).random((14, 20, 20)).astype(np.float16)  # W1's dtype


@pytest.fixture(scope="module")
def inline(images: np.ndarray) -> list[np.ndarray]:
    return _epochs(images, workers=0)


@pytest.mark.parametrize("method", METHODS)
def test_two_workers_match_inline_bit_for_bit(images, inline, method):
    got = _epochs(images, workers=2, start_method=method)
    for epoch in range(2):
        np.testing.assert_array_equal(got[epoch], inline[epoch])


def test_epochs_differ_and_a_seed_repeats(images, inline):
    assert inline[0].dtype == np.float16 and inline[0].shape == images.shape
    assert not np.array_equal(inline[0], inline[1])  # same sample, next epoch: new draw
    assert not np.array_equal(inline[0][0], inline[0][1])
    np.testing.assert_array_equal(_epochs(images, workers=0)[1], inline[1])
