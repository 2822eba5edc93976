"""The random draws of the Keras-mirroring ops follow the Keras layers' distributions.

For each op, a quantity that reads the draw back from the output (the hue shift of a flat
colour, the slope of a ramp after a zoom, ...) is measured on N samples of ours (rng seeds
0..N-1) and N of the Keras layer (one batch, so one draw per image), and the two samples are
compared with a two-sample Kolmogorov-Smirnov test at alpha = 0.001 (``ks_same``, written
here so the test needs no SciPy). Coin flips (probabilities) are compared as proportions.
The parameters here are pairs; a lone factor, which Keras 3.15 reads its own way per layer,
is compared through ``from_keras`` in test_ops_from_keras.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
import pytest

from shmaug import ops
from tests._helpers import needs_keras

N = 400
_KS_C = 1.95  # c(alpha) of the two-sample KS test at alpha = 0.001


def ks_same(a: np.ndarray, b: np.ndarray) -> tuple[bool, float]:
    """Whether two samples pass a two-sample KS test at alpha = 0.001, and the statistic."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    grid = np.concatenate([a, b])
    d = float(np.max(np.abs(np.searchsorted(a, grid, "right") / len(a)
                            - np.searchsorted(b, grid, "right") / len(b))))
    return d <= _KS_C * math.sqrt((len(a) + len(b)) / (len(a) * len(b))), d


def same_rate(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two 0/1 samples have the same rate, within 4 standard errors."""
    p = (a.mean() + b.mean()) / 2
    return abs(a.mean() - b.mean()) <= 4 * math.sqrt(max(p * (1 - p), 1e-9) * 2 / len(a))


def ours(op: str, image: np.ndarray, **params: Any) -> np.ndarray:
    bound = ops.Op(op, **params)
    return np.stack([bound(image, np.random.default_rng(s)) for s in range(N)])


def keras_batch(layer: Any, image: np.ndarray) -> np.ndarray:
    from keras import ops as kops

    out = layer(np.repeat(image[None], N, axis=0), training=True)
    return np.asarray(kops.convert_to_numpy(out), np.float32)


def check(measure: Callable[[np.ndarray], np.ndarray], mine: np.ndarray, theirs: np.ndarray
          ) -> None:
    a, b = measure(mine), measure(theirs)
    same, d = ks_same(a, b)
    assert same, f"KS statistic {d:.3f}: ours {np.percentile(a, [5, 50, 95])}, keras " \
                 f"{np.percentile(b, [5, 50, 95])}"


def flat(rgb: tuple[float, float, float], size: int = 4) -> np.ndarray:
    return np.tile(np.array(rgb, np.float32), (size, size, 1))


def hue_of(batch: np.ndarray) -> np.ndarray:
    return np.array([cv2.cvtColor(np.ascontiguousarray(x[:1, :1]), cv2.COLOR_RGB2HSV)[0, 0]
                     for x in batch / 255.0])


@needs_keras
def test_hue_shift() -> None:
    import keras

    image = flat((200.0, 80.0, 40.0))
    base = hue_of(image[None])[0, 0]

    def shift(batch: np.ndarray) -> np.ndarray:
        return (hue_of(batch)[:, 0] - base + 180.0) % 360.0 - 180.0

    check(shift, ours("hue", image, factor=(0.1, 0.4), value_range=(0, 255)),
          keras_batch(keras.layers.RandomHue((0.1, 0.4), value_range=(0, 255), seed=1), image))


@needs_keras
def test_saturation_gain() -> None:
    import keras

    image = flat((0.8, 0.7, 0.6))

    def sat(batch: np.ndarray) -> np.ndarray:
        return hue_of(batch * 255.0)[:, 1]

    check(sat, ours("saturation", image, factor=(0.2, 0.7)),
          keras_batch(keras.layers.RandomSaturation((0.2, 0.7), value_range=(0, 1), seed=1),
                      image))


@needs_keras
def test_color_degeneration_amount() -> None:
    import keras

    image = flat((200.0, 80.0, 40.0))

    def amount(batch: np.ndarray) -> np.ndarray:
        gray = 0.299 * 200 + 0.587 * 80 + 0.114 * 40
        return (200.0 - batch[:, 0, 0, 0]) / (200.0 - gray)

    layer = keras.layers.RandomColorDegeneration((0.1, 0.9), value_range=(0, 255), seed=1)
    check(amount, ours("color_degeneration", image, factor=(0.1, 0.9), value_range=(0, 255)),
          keras_batch(layer, image))


@needs_keras
def test_brightness_delta() -> None:
    import keras

    image = flat((120.0, 120.0, 120.0))
    mine = ours("color_jitter", image, brightness_factor=0.3, contrast_factor=None,
                saturation_factor=None, hue_factor=None, value_range=(0, 255))
    layer = keras.layers.RandomBrightness(0.3, value_range=(0, 255), seed=1)
    check(lambda b: b[:, 0, 0, 0], mine, keras_batch(layer, image))


@needs_keras
def test_contrast_factor() -> None:
    import keras

    image = np.zeros((2, 2, 3), np.float32)
    image[0] = 100.0
    image[1] = 140.0  # mean 120 in every channel
    mine = ours("color_jitter", image, brightness_factor=None, contrast_factor=(0.2, 0.4),
                saturation_factor=None, hue_factor=None, value_range=(0, 255))
    layer = keras.layers.RandomContrast((0.2, 0.4), value_range=(0, 255), seed=1)
    check(lambda b: (b[:, 1, 0, 0] - 120.0) / 20.0, mine, keras_batch(layer, image))


def ramp(size: int = 33) -> np.ndarray:
    """Channel 0 is the column index, channel 1 the row index (float32, range 0..size)."""
    ys, xs = np.indices((size, size), dtype=np.float32)
    return np.dstack([xs, ys, np.zeros_like(xs)])


@needs_keras
def test_zoom_factor() -> None:
    import keras

    image = ramp()

    def slope(batch: np.ndarray) -> np.ndarray:  # the zoom: input columns per output column
        return (batch[:, 16, 18, 0] - batch[:, 16, 14, 0]) / 4.0

    vr = (0.0, 40.0)
    check(slope, ours("zoom", image, height_factor=(-0.4, 0.3), border="constant",
                      value_range=vr),
          keras_batch(keras.layers.RandomZoom((-0.4, 0.3), fill_mode="constant", seed=1),
                      image))


@needs_keras
def test_translation_factor() -> None:
    import keras

    image = ramp()
    vr = (0.0, 40.0)
    mine = ours("translation", image, height_factor=0.2, width_factor=(-0.1, 0.3),
                border="replicate", value_range=vr)
    theirs = keras_batch(keras.layers.RandomTranslation(0.2, (-0.1, 0.3), fill_mode="nearest",
                                                        seed=1), image)
    check(lambda b: 16.0 - b[:, 16, 16, 0], mine, theirs)  # columns moved right
    check(lambda b: 16.0 - b[:, 16, 16, 1], mine, theirs)  # rows moved down


@needs_keras
def test_solarize_threshold_and_addition() -> None:
    import keras

    image = np.tile(np.arange(256, dtype=np.float32)[None, :, None], (1, 1, 3))
    mine = ours("solarize", image, addition_factor=(0.0, 0.3), threshold_factor=(0.0, 0.8),
                value_range=(0, 255))
    layer = keras.layers.Solarization(addition_factor=(0.0, 0.3), threshold_factor=(0.0, 0.8),
                                      value_range=(0, 255), seed=1)
    theirs = keras_batch(layer, image)
    check(lambda b: b[:, 0, 0, 0], mine, theirs)  # black + the addition (or its inverse)
    check(lambda b: np.argmax(np.diff(b[:, 0, :, 0], axis=1) < 0, axis=1), mine, theirs)


@needs_keras
def test_posterize_bits() -> None:
    import keras

    image = np.tile(np.arange(256, dtype=np.float32)[None, :, None], (1, 1, 3))
    mine = ours("posterize", image, factor=(2, 5), value_range=(0, 255))
    # Keras draws the bits with randint(low, high): its high end is left out
    theirs = keras_batch(keras.layers.RandomPosterization((2, 6), value_range=(0, 255),
                                                          seed=1), image)
    check(lambda b: np.array([len(np.unique(x[0, :, 0])) for x in b]), mine, theirs)


@needs_keras
@pytest.mark.parametrize(("op", "layer", "params"), [
    ("invert", "RandomInvert", {"factor": 1.0}),
    ("grayscale", "RandomGrayscale", {"factor": 0.3}),
    ("erasing", "RandomErasing", {"factor": (0.2, 0.6)}),
])
def test_how_often_it_applies(op: str, layer: str, params: dict[str, Any]) -> None:
    import keras

    image = flat((200.0, 80.0, 40.0), 16)
    vr = {"value_range": (0, 255)}
    keras_vr = {} if op == "grayscale" else vr  # RandomGrayscale takes no value_range
    theirs = keras_batch(getattr(keras.layers, layer)(**params, **keras_vr, seed=1), image)
    mine = ours(op, image, **params, **vr)
    changed = [np.abs(b - image).reshape(N, -1).max(axis=1) > 1.0 for b in (mine, theirs)]
    assert same_rate(*changed), (changed[0].mean(), changed[1].mean())


def test_erasing_area_is_uniform_in_scale_as_torchvision_draws_it() -> None:
    # torchvision's RandomErasing: area fraction uniform in `scale`, aspect log-uniform in
    # `ratio` (a box that does not fit is drawn again; none here can fail to fit)
    image = np.full((64, 64), 255, np.uint8)
    erased = ours("erasing", image, factor=(1, 1), scale=(0.05, 0.3), ratio=(0.5, 2.0))
    area = (erased == 0).reshape(N, -1).mean(axis=1)
    reference = np.random.default_rng(0).uniform(0.05, 0.3, 4 * N)
    same, d = ks_same(area, reference)
    assert same, d


def test_erasing_ratio_is_height_over_width_as_torchvision_draws_it() -> None:
    """A policy auditor: `ratio=(2, 3)` made boxes 2-3x wider than tall, where torchvision's
    (its h = sqrt(area * ratio)) are 2-3x taller than wide."""
    image = np.full((64, 64), 255, np.uint8)
    for x in ours("erasing", image, factor=(1, 1), scale=(0.05, 0.2), ratio=(2.0, 3.0))[:50]:
        rows, cols = np.nonzero(x == 0)
        if len(rows):
            tall = (np.ptp(rows) + 1) / (np.ptp(cols) + 1)
            assert 1.6 <= tall <= 3.6, tall


def test_channel_shuffle_draws_every_permutation_alike() -> None:
    image = np.zeros((2, 2, 3), np.uint8)
    image[..., 1], image[..., 2] = 1, 2
    perms = [tuple(x[0, 0]) for x in ours("channel_shuffle", image)]
    counts = np.array([perms.count(p) for p in set(perms)])
    assert len(counts) == 6 and ((counts - N / 6) ** 2 / (N / 6)).sum() < 20.5  # chi2(5), 0.001


def test_random_order_draws_orders_of_the_four_steps() -> None:
    # brightness then contrast differs from contrast then brightness on a non-flat image
    image = ramp(8)
    out = ours("color_jitter", image, brightness_factor=(0.2, 0.2),
               contrast_factor=(-0.5, 0.5), saturation_factor=None, hue_factor=None,
               order="random", value_range=(0, 40))
    assert len({x.tobytes() for x in out}) == 2
