"""The Keras-mirroring ops against the Keras 3 layers they mirror, pixel for pixel.

Each test pins the layer's random draw (its ``transform_images`` given a fixed
transformation) and the op's (a fixed parameter), and compares the two on a float32 RGB
image in 0..255 (``value_range=(0, 255)`` on both sides). Tolerances are in gray levels of
255 and are stated per op: where the arithmetic is the same they are float rounding; where
it differs, the reason is given. The draws themselves are compared in
test_ops_keras_distributions.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shmaug import ops
from tests._helpers import needs_keras

pytestmark = needs_keras
VR = (0.0, 255.0)


def photo(h: int = 24, w: int = 20, seed: int = 7) -> np.ndarray:
    """A smooth RGB scene in 0..255 float32: colour gradients plus a bright square."""
    import cv2

    small = np.random.default_rng(seed).random((4, 4, 3)).astype(np.float32)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
    img[h // 3 : h // 2, w // 4 : w // 2] = 1.0
    return np.clip(img * 255.0, 0.0, 255.0)


def _tensor(value: Any) -> Any:
    from keras import ops as kops

    if isinstance(value, tuple):  # a shape
        return value
    array = np.asarray(value)
    return kops.convert_to_tensor(array.astype(np.float32) if array.dtype.kind == "f" else array)


def keras_apply(layer: Any, image: np.ndarray, raw: Any = None, **transformation: Any
                ) -> np.ndarray:
    """``layer`` on one image with its random draw pinned to ``transformation`` (a dict of
    named draws), or to ``raw`` for a layer whose draw is one tensor."""
    from keras import ops as kops

    batch = kops.convert_to_tensor(image[None])
    pinned = _tensor(raw) if raw is not None else {k: _tensor(v) for k, v in
                                                   transformation.items()}
    out = layer.transform_images(batch, pinned, training=True)
    return np.asarray(kops.convert_to_numpy(out))[0]


def close(ours: np.ndarray, theirs: np.ndarray, *, max_abs: float, mean_abs: float = 0.0
          ) -> None:
    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    assert ours.shape == theirs.shape
    assert diff.max() <= max_abs, f"max |ours - keras| = {diff.max():.4f} > {max_abs}"
    assert diff.mean() <= (mean_abs or max_abs), f"mean |ours - keras| = {diff.mean():.4f}"


def _sign_up(seed: int) -> bool:
    """Whether the hue op's sign draw (its first ``rng.random()``) is positive for ``seed``."""
    return bool(np.random.default_rng(seed).random() <= 0.5)


@pytest.mark.parametrize("seed", [0, 2])
def test_hue(seed: int) -> None:
    import keras

    image = photo()
    ours = ops.hue(image, np.random.default_rng(seed), factor=(0.3, 0.3), value_range=VR)
    turns = 0.15 if _sign_up(seed) else -0.15
    theirs = keras_apply(keras.layers.RandomHue(0.3, value_range=VR), image, factor=[turns])
    close(ours, theirs, max_abs=0.05)  # the same HSV formulas, in float32


@pytest.mark.parametrize("f", [0.2, 0.7])
def test_saturation(f: float) -> None:
    import keras

    image = photo() / 255.0  # Keras clips the saturation to value_range: give it (0, 1)
    ours = ops.saturation(image, np.random.default_rng(0), factor=(f, f))
    layer = keras.layers.RandomSaturation(0.5, value_range=(0, 1))
    theirs = keras_apply(layer, image, factor=[f / (1 - f + 1e-7)])
    close(ours, theirs, max_abs=1e-4)


def test_color_degeneration() -> None:
    import keras

    image = photo()
    ours = ops.color_degeneration(image, np.random.default_rng(0), (0.6, 0.6), value_range=VR)
    layer = keras.layers.RandomColorDegeneration(0.5, value_range=VR)
    theirs = keras_apply(layer, image, factor=np.full((1, 1, 1, 1), 0.6))
    close(ours, theirs, max_abs=0.05)  # luma weights 0.299 (PIL's) against Keras' 0.2989


def test_grayscale() -> None:
    import keras

    image = photo()
    ours = ops.grayscale(image, np.random.default_rng(0), factor=1.0, value_range=VR)
    theirs = keras_apply(keras.layers.RandomGrayscale(1.0), image, raw=[1.0])
    close(ours, theirs, max_abs=0.05)


def test_invert() -> None:
    import keras

    image = photo()
    ours = ops.invert(image, np.random.default_rng(0), factor=(1, 1), value_range=VR)
    layer = keras.layers.RandomInvert(value_range=VR)
    theirs = keras_apply(layer, image, apply_inversion=np.array([True]))
    close(ours, theirs, max_abs=1e-3)


def test_solarize() -> None:
    import keras

    image = np.rint(photo())
    ours = ops.solarize(image, np.random.default_rng(0), addition_factor=(0.1, 0.1),
                        threshold_factor=(0.6, 0.6), value_range=VR)
    layer = keras.layers.Solarization(value_range=VR)
    theirs = keras_apply(layer, image, additions=np.full((1, 1, 1, 1), 25.5),
                         thresholds=np.full((1, 1, 1, 1), 153.0))
    close(ours, theirs, max_abs=1e-3)


@pytest.mark.parametrize("bits", [2, 5])
def test_posterize(bits: int) -> None:
    import keras

    image = photo()
    ours = ops.posterize(image, np.random.default_rng(0), factor=bits, value_range=VR)
    layer = keras.layers.RandomPosterization(4, value_range=VR)
    theirs = keras_apply(layer, image, shift_factor=np.array([8 - bits], np.uint8))
    close(ours, theirs, max_abs=1e-3)


@pytest.mark.filterwarnings("ignore:Tensor.T is deprecated:UserWarning")  # Keras on torch
def test_equalize() -> None:
    import keras

    image = np.rint(photo())
    ours = ops.equalize(image, np.random.default_rng(0), value_range=VR)
    theirs = keras_apply(keras.layers.Equalization(value_range=VR), image)
    close(ours, theirs, max_abs=1e-3)


def test_auto_contrast() -> None:
    import keras

    image = photo() * 0.5 + 40.0
    ours = ops.auto_contrast(image, np.random.default_rng(0), value_range=VR)
    theirs = keras_apply(keras.layers.AutoContrast(value_range=VR), image)
    close(ours, theirs, max_abs=0.01)


@pytest.mark.parametrize("size", [(64, 64), (30, 27)])  # whole tiles, and padded to them
def test_clahe(size: tuple[int, int]) -> None:
    import keras

    if keras.backend.backend() == "torch" and size != (64, 64):
        pytest.skip("Keras' torch backend pads 'symmetric' as 'replicate' "
                    "(keras/src/backend/torch/numpy.py): its CLAHE of partial tiles differs")
    image = np.rint(photo(*size))
    ours = ops.clahe(image, np.random.default_rng(0), clip_limit=2.0, tile_grid_size=(4, 4),
                     value_range=VR)
    layer = keras.layers.ContrastLimitedAdaptiveHistogramEqualization(
        value_range=VR, clip_limit=2.0, tile_grid_size=(4, 4))
    theirs = keras_apply(layer, image)
    close(ours, theirs, max_abs=0.01)


@pytest.mark.parametrize("z", [-0.3, 0.25])
def test_zoom(z: float) -> None:
    import keras

    image = photo()
    ours = ops.zoom(image, np.random.default_rng(0), height_factor=(z, z), border="constant",
                    value_range=VR)
    layer = keras.layers.RandomZoom(0.5, fill_mode="constant")
    theirs = keras_apply(layer, image, height_zoom=[[1 + z]], width_zoom=[[1 + z]],
                         input_shape=(1, *image.shape))
    close(ours, theirs, max_abs=1.0, mean_abs=0.05)  # OpenCV's 5-bit bilinear weights


def test_translation() -> None:
    import keras

    image = photo()
    h, w = image.shape[:2]
    ours = ops.translation(image, np.random.default_rng(0), height_factor=(-0.15, -0.15),
                           width_factor=(0.3, 0.3), border="constant", value_range=VR)
    layer = keras.layers.RandomTranslation(0.5, 0.5, fill_mode="constant")
    theirs = keras_apply(layer, image, translations=[[0.3 * w, -0.15 * h]],
                         input_shape=(1, *image.shape))
    close(ours, theirs, max_abs=1.0, mean_abs=0.05)


@pytest.mark.parametrize("size", [(10, 9), (11, 20)])
def test_center_crop(size: tuple[int, int]) -> None:
    import keras

    image = photo()
    ours = ops.center_crop(image, np.random.default_rng(0), *size)
    theirs = keras_apply(keras.layers.CenterCrop(*size), image, input_shape=(1, *image.shape))
    close(ours, theirs, max_abs=0.0)


def test_color_jitter_is_keras_four_layers_in_order() -> None:
    import keras

    image = photo()
    ours = ops.color_jitter(image, np.random.default_rng(3), brightness_factor=(0.1, 0.1),
                            contrast_factor=(-0.3, 0.3), saturation_factor=(0.3, 0.3),
                            hue_factor=(0.2, 0.2), value_range=VR)
    steps = [
        (keras.layers.RandomBrightness(0.5, value_range=VR), {"rgb_delta": [[[[25.5]]]]}),
        (keras.layers.RandomContrast(0.5, value_range=VR),
         {"contrast_factor": np.full((1, 1, 1, 1), 1.3)}),
        (keras.layers.RandomSaturation(0.5, value_range=VR), {"factor": [0.3 / 0.7]}),
        (keras.layers.RandomHue(0.5, value_range=VR),
         {"factor": [0.1 if _sign_up(3) else -0.1]}),
    ]
    theirs = image
    for layer, pinned in steps:
        theirs = np.clip(keras_apply(layer, theirs, **pinned), *VR)
    close(ours, theirs, max_abs=0.1)
