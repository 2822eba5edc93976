"""The policies: torchvision's operation lists and magnitude tables, and determinism.

The expected magnitudes are torchvision v2's formulas (``transforms/v2/_auto_augment.py``)
worked out by hand, e.g. RandAugment's Rotate is ``linspace(0, 30, 31)[9] = 9.0`` degrees
and its Posterize ``8 - round(9 / (30 / 4)) = 7`` bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from shmaug import ops
from shmaug.errors import ArgumentError
from shmaug.ops.kernels import colour as k
from shmaug.ops.policies import _space
from tests._helpers import needs_keras
from tests.unit.test_ops import make_photo

TORCHVISION_RAND = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
                    "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize",
                    "AutoContrast", "Equalize"]
SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
          "Contrast", "Sharpness"}


def test_operation_lists_and_signs_are_torchvisions() -> None:
    assert list(_space.RAND) == TORCHVISION_RAND
    assert list(_space.WIDE) == TORCHVISION_RAND
    assert list(_space.AUTO) == TORCHVISION_RAND[1:] + ["Invert"]
    partial = ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Posterize",
               "Solarize", "AutoContrast", "Equalize"]
    assert list(_space.AUGMIX) == partial
    assert list(_space.AUGMIX_ALL) == partial + ["Brightness", "Color", "Contrast", "Sharpness"]
    for space in (_space.RAND, _space.WIDE, _space.AUTO, _space.AUGMIX_ALL):
        assert {n for n, (_, signed) in space.items() if signed} == SIGNED & set(space)


@pytest.mark.parametrize(("space", "name", "bins", "index", "expected"), [
    (_space.RAND, "ShearX", 31, 9, 0.09),
    (_space.RAND, "Rotate", 31, 9, 9.0),
    (_space.RAND, "Brightness", 31, 9, 0.27),
    (_space.RAND, "TranslateX", 31, 9, 150 / 331 * 224 * 9 / 30),
    (_space.RAND, "Posterize", 31, 9, 7),
    (_space.RAND, "Posterize", 31, 30, 4),
    (_space.RAND, "Solarize", 31, 9, 0.7),
    (_space.RAND, "Equalize", 31, 9, None),
    (_space.WIDE, "ShearX", 31, 30, 0.99),
    (_space.WIDE, "TranslateY", 31, 15, 16.0),
    (_space.WIDE, "Rotate", 31, 10, 45.0),
    (_space.WIDE, "Posterize", 31, 15, 5),
    (_space.WIDE, "Posterize", 31, 30, 2),
    (_space.AUTO, "Posterize", 10, 8, 4),
    (_space.AUTO, "Posterize", 10, 5, 6),
    (_space.AUTO, "Rotate", 10, 9, 30.0),
    (_space.AUTO, "Solarize", 10, 5, 1 - 5 / 9),
    (_space.AUGMIX, "Posterize", 10, 1, 4),
    (_space.AUGMIX, "Posterize", 10, 2, 3),
    (_space.AUGMIX, "TranslateX", 10, 2, 224 / 3 * 2 / 9),
])
def test_magnitudes_map_like_torchvisions(space: _space.AugmentationSpace, name: str, bins: int,
                                          index: int, expected: float | None) -> None:
    got = _space.magnitude(space, name, bins, 224, 224, index)
    assert got == pytest.approx(expected)


def test_the_imagenet_policy_uses_only_autoaugment_operations() -> None:
    from shmaug.ops.policies.augment import IMAGENET_POLICY

    assert len(IMAGENET_POLICY) == 25
    assert {name for sub in IMAGENET_POLICY for name, _, _ in sub} <= set(_space.AUTO)


@pytest.mark.parametrize(("name", "m", "op", "params"), [
    ("Rotate", -9.0, "rotate", {"degrees": -9.0, "interpolation": "nearest"}),
    ("Brightness", 0.27, "brightness_contrast", {"brightness": 1.27, "contrast": 1.0}),
    ("Contrast", -0.5, "brightness_contrast", {"brightness": 1.0, "contrast": 0.5}),
    ("Posterize", 4.0, "posterize", {"factor": 4}),
    ("Solarize", 0.7, "solarize", {"addition_factor": (0, 0), "threshold_factor": (0.7, 0.7)}),
    ("Invert", 0.0, "invert", {"factor": (1, 1)}),
])
def test_an_operation_is_the_matching_op(name: str, m: float, op: str,
                                         params: dict[str, object]) -> None:
    image = make_photo()
    setting = _space.Setting("nearest", 0.0, None)
    ours = _space.apply(image, np.random.default_rng(0), name, m, setting)
    np.testing.assert_array_equal(ours, ops.Op(op, **params)(image, np.random.default_rng(0)))


@pytest.mark.parametrize("gray", [False, True])
def test_equalize_is_pils_as_torchvision_uses_it(gray: bool) -> None:
    from PIL import Image, ImageOps

    image = make_photo()[:, :, 1] if gray else make_photo()
    ours = _space.apply(image, np.random.default_rng(0), "Equalize", 0.0,
                        _space.Setting("nearest", 0.0, None))
    np.testing.assert_array_equal(ours, np.asarray(ImageOps.equalize(Image.fromarray(image))))


def test_shear_x_is_torchvisions_about_the_top_left_corner() -> None:
    # torchvision's ShearX: x' = x - m (y + 0.5) in pixel centres (its SHx about center=[0, 0],
    # the image's corner); a vertical line leans left going down for m > 0
    image = np.zeros((20, 20), np.uint8)
    image[:, 10] = 255
    out = _space.apply(image, np.random.default_rng(0), "ShearX", 0.25,
                       _space.Setting("nearest", 0.0, None))
    for y in (0, 7, 19):
        assert np.flatnonzero(out[y]).tolist() == [round(10 - 0.25 * (y + 0.5))]


def test_color_and_sharpness_at_zero_change_nothing() -> None:
    image = make_photo()
    setting = _space.Setting("nearest", 0.0, None)
    for name in ("Color", "Sharpness"):
        out = _space.apply(image, np.random.default_rng(0), name, 0.0, setting)
        np.testing.assert_array_equal(out, image)


@pytest.mark.parametrize("m", [0.27, 0.9, -0.9])
def test_sharpness_is_pils_outermost_pixels_included(m: float) -> None:
    """A policy auditor: the step's 1-pixel border differed from PIL's ImageEnhance (and
    torchvision's) by up to 51 levels at m=0.9: OpenCV's filter replicated the edge, where
    PIL's leaves the outermost pixels as they were."""
    from PIL import Image, ImageEnhance

    image = make_photo()
    out = _space.apply(image, np.random.default_rng(0), "Sharpness", m,
                       _space.Setting("nearest", 0.0, None))
    pil = np.asarray(ImageEnhance.Sharpness(Image.fromarray(image)).enhance(1.0 + m))
    assert np.abs(out.astype(int) - pil).max() <= 1
    for edge in (np.s_[0], np.s_[-1], np.s_[:, 0], np.s_[:, -1]):
        np.testing.assert_array_equal(out[edge], image[edge])


@pytest.mark.parametrize(("name", "params"), [
    ("rand_augment", {}), ("rand_augment", {"factor": 0.5}), ("trivial_augment_wide", {}),
    ("auto_augment", {}), ("aug_mix", {}), ("aug_mix", {"all_ops": False, "chain_depth": 2}),
])
def test_a_policy_is_a_function_of_the_rng_alone(name: str, params: dict[str, object]) -> None:
    image = make_photo()
    op = ops.Op(name, **params)
    outs = [op(image, np.random.default_rng(s)).tobytes() for s in range(12)]
    assert outs == [op(image, np.random.default_rng(s)).tobytes() for s in range(12)]
    assert len(set(outs)) > 6


def test_rand_augment_refuses_a_magnitude_past_its_bins() -> None:
    with pytest.raises(ArgumentError, match="`magnitude`"):
        ops.rand_augment(make_photo(), np.random.default_rng(0), magnitude=31)


@needs_keras
def test_the_keras_flavour_uses_keras_layers_in_keras_order() -> None:
    from keras.src.layers.preprocessing.image_preprocessing.rand_augment import RandAugment

    assert _space.KERAS_RAND_AUGMENT == tuple(RandAugment._AUGMENT_LAYERS)


def test_aug_mix_keeps_a_beta_share_of_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    # every chain turned black: what is left is the image times the Beta weight, drawn
    # first (torchvision draws it as a 2-way Dirichlet, and so does the op)
    monkeypatch.setattr(_space, "apply", lambda image, *args: np.zeros_like(image))
    image = make_photo().astype(np.float32) / 255.0
    for seed in range(5):
        keep = np.random.default_rng(seed).dirichlet([0.5, 0.5])[0]
        out = ops.aug_mix(image, np.random.default_rng(seed), alpha=0.5)
        np.testing.assert_allclose(out, image * keep, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "m"), [("Color", 0.9), ("Color", -0.9), ("Color", 0.3),
                                         ("AutoContrast", 0.0)])
def test_colour_steps_on_uint8_land_within_a_level_of_the_float_arithmetic(name: str,
                                                                           m: float) -> None:
    """uint8 images take the 8-bit kernels (a fraction of the float round trip's time); the
    same image as float32 in 0..255 takes the float arithmetic: at most a gray level apart."""
    image = make_photo() // 2 + 40  # levels 40..167: auto-contrast has something to stretch
    image[:8] = (250, 3, 128)  # a saturated patch, where the colour blend clips
    ours = _space.apply(image, np.random.default_rng(0), name, m,
                        _space.Setting("nearest", 0.0, None))
    eight_bit = k.degenerate_bytes(image, -m) if name == "Color" else \
        k.auto_contrast_bytes(image)
    np.testing.assert_array_equal(ours, eight_bit)  # the 8-bit kernel, not a float round trip
    floats = _space.apply(image.astype(np.float32), np.random.default_rng(0), name, m,
                          _space.Setting("nearest", 0.0, (0.0, 255.0)))
    assert ours.dtype == np.uint8
    difference = np.abs(ours.astype(np.float64) - floats)
    assert difference.max() <= 1.0, difference.max()
    assert difference.mean() < 0.5
