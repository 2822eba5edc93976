"""The colour ops' 8-bit paths (``cv_colour``'s ``*_bytes`` kernels, taken by uint8 images in
0..255) against their float kernels, which mirror Keras' arithmetic: the same draws, and each
op within its stated distance in gray levels. Hue and saturation go through OpenCV's 8-bit
HSV (hue in 256 steps of a turn), so they differ by a few levels; the others by rounding."""

from __future__ import annotations

import numpy as np
import pytest

from shmaug.ops import Op

VR = (0.0, 255.0)
JITTER = dict(brightness_factor=0.3, contrast_factor=0.4, saturation_factor=(0.2, 0.8),
              hue_factor=0.2)

# op, its arguments, the largest difference anywhere, the largest mean difference of an image
BOUNDS = [
    ("hue", dict(factor=(0.0, 1.0)), 12, 1.0),
    ("saturation", dict(factor=(0.0, 1.0)), 16, 1.0),
    ("grayscale", dict(factor=1.0), 1, 0.01),
    ("color_degeneration", dict(factor=(0.0, 1.0)), 1, 0.3),
    ("equalize", {}, 0, 0.0),  # the same tables: each level is its own bin
    ("auto_contrast", {}, 1, 0.01),
    ("color_jitter", JITTER, 16, 1.6),
    ("color_jitter", dict(JITTER, order="random"), 18, 2.0),
]


def scenes(count: int = 6, side: int = 64) -> list[np.ndarray]:
    """Smooth colour scenes with sharp edges and a few saturated patches."""
    import cv2

    rng = np.random.default_rng(11)
    out = []
    for _ in range(count):
        small = rng.integers(0, 256, (5, 5, 3)).astype(np.float32)
        image = cv2.resize(small, (side, side), interpolation=cv2.INTER_CUBIC)
        image[rng.integers(0, side - 8):, : rng.integers(8, side)] = rng.integers(0, 256, 3)
        out.append(np.clip(np.rint(image), 0, 255).astype(np.uint8))
    return out


@pytest.mark.parametrize("name, params, most, mean", BOUNDS)
def test_the_bytes_path_lands_near_the_float_kernel(name, params, most, mean) -> None:
    op = Op(name, value_range=VR, **params)
    for seed, image in enumerate(scenes() * 2):
        ours = op(image, np.random.default_rng(seed))
        assert ours.dtype == np.uint8 and ours.shape == image.shape
        floats = op(image.astype(np.float32), np.random.default_rng(seed))
        diff = np.abs(ours.astype(np.float64) - np.rint(floats))
        assert diff.max() <= most, (seed, diff.max())
        assert diff.mean() <= mean, (seed, diff.mean())


@pytest.mark.parametrize("name, params, most", [
    ("saturation", dict(factor=(0.75, 0.8)), 16),  # gains 3-4: still in 8-bit HSV
    ("saturation", dict(factor=(0.97, 0.99)), 16),
    ("color_jitter", dict(brightness_factor=(-0.5, -0.5), contrast_factor=(0.9, 0.9),
                          saturation_factor=(0.9, 0.9), hue_factor=(0.4, 0.4)), 18),
])
def test_a_large_saturation_gain_on_real_photos_stays_within_the_bound(name, params, most):
    """Gains of 9-99 (factors 0.9-0.99): 8-bit HSV's rounding of a pale pixel, multiplied by
    the gain, was 32-42 levels from the float kernels; such gains take the float ones, and
    gains up to 4 stay within the bound in 8 bits."""
    from skimage import data

    op = Op(name, value_range=VR, **params)
    for seed, photo in enumerate([data.coffee(), data.astronaut(), data.chelsea()]):
        ours = op(photo, np.random.default_rng(seed)).astype(np.float64)
        floats = op(photo.astype(np.float32), np.random.default_rng(seed))
        assert np.abs(ours - np.rint(floats)).max() <= most


@pytest.mark.parametrize("name, params", [(n, p) for n, p, _, _ in BOUNDS[:6]])
def test_alpha_and_gray_images_take_the_bytes_path_as_the_float_one(name, params) -> None:
    """A fourth channel is kept by the colour ops (changed as the others by the rest); a
    gray image is left to the ops that need colour."""
    image = scenes(1)[0]
    rgba = np.dstack([image, np.arange(64, dtype=np.uint8)[None, :].repeat(64, 0)])
    op = Op(name, value_range=VR, **params)
    for sample in (rgba, image[:, :, :1], image[:, :, 0]):
        ours = op(sample, np.random.default_rng(3))
        floats = op(sample.astype(np.float32), np.random.default_rng(3))
        assert ours.shape == sample.shape
        np.testing.assert_allclose(ours, np.rint(floats), atol=16)
    if name in ("hue", "saturation", "grayscale", "color_degeneration"):
        np.testing.assert_array_equal(op(rgba, np.random.default_rng(3))[:, :, 3], rgba[:, :, 3])
        np.testing.assert_array_equal(op(image[:, :, 0], np.random.default_rng(3)),
                                      image[:, :, 0])


def test_equalize_with_other_bins_keeps_the_float_kernel() -> None:
    image = scenes(1)[0]
    ours = Op("equalize", bins=64, value_range=VR)(image, np.random.default_rng(0))
    floats = Op("equalize", bins=64, value_range=VR)(image.astype(np.float32),
                                                     np.random.default_rng(0))
    np.testing.assert_array_equal(ours, np.rint(floats))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32, np.float64])
def test_channel_shuffle_permutes_the_planes_exactly(dtype: type) -> None:
    image = np.random.default_rng(0).integers(0, 255, (9, 7, 5)).astype(dtype)
    out = Op("channel_shuffle")(image, np.random.default_rng(2))
    order = np.random.default_rng(2).permutation(5)
    assert out.dtype == image.dtype
    np.testing.assert_array_equal(out, image[:, :, order])
