"""The op contract, checked for every registered built-in op.

Each built-in op has a row in ``CONTRACT``; ``test_every_builtin_op_has_a_contract_row`` fails
when a new op is registered without one. Properties (hypothesis, over dtype x layout x size):
shape, dtype and value range are kept (or changed as the op documents), the same rng state
gives the same output, the input is not modified, the global RNGs are neither used nor
touched, and the zero magnitude is the identity where one is defined. PIL and OpenCV backends
agree within the tolerance stated in each row; the vectorized sine warp equals the classic
per-column ``np.roll``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmaug import ops
from shmaug.errors import ArgumentError
from shmaug.ops import core

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Case:
    params: dict[str, Any] = field(default_factory=dict)  # bound for the property tests
    identity: dict[str, Any] | None = None  # params that make the op a no-op
    shape: Callable[[Shape], Shape] = lambda s: s  # expected output shape for an input shape
    random: bool = True  # different rng states give different outputs
    pil: dict[str, Any] | None = None  # fixed params for the PIL-vs-OpenCV comparison
    # tolerance of the backend comparison on uint8: mean |cv - pil| in gray levels, and the
    # largest fraction of pixels allowed to differ by more than 2 gray levels. Geometric ops
    # differ only along the edge of the warped image, where PIL and OpenCV treat partly
    # covered pixels differently (up to ~8% of a 48x48 image); filters differ on the border.
    tol_mean: float = 1.0
    tol_frac: float = 0.02


CONTRACT: dict[str, Case] = {
    "sine_warp": Case(
        identity={"amplitude": 0},
        pil={"amplitude": 2.5, "period": 30.0, "interpolation": "nearest"},
        tol_mean=0.0,
        tol_frac=0.0,
    ),
    "rotate": Case(identity={"degrees": 0}, pil={"degrees": 13.0}, tol_mean=3.0, tol_frac=0.08),
    "shear": Case(identity={"x": 0, "y": 0}, pil={"x": 0.25, "y": -0.1}, tol_mean=3.0, tol_frac=0.08),
    "scale_translate": Case(
        identity={"scale": 1.0, "translate": 0.0},
        pil={"scale": 0.8, "translate": 0.05},
        tol_mean=2.0,
        tol_frac=0.15,  # PIL antialiases when it shrinks, a bilinear warp does not
    ),
    "translate": Case(identity={"x": 0, "y": 0}, pil={"x": 0.1, "y": -0.07}, tol_mean=3.0, tol_frac=0.08),
    "perspective": Case(identity={"scale": 0}, pil={"scale": 0.06}, tol_mean=3.0, tol_frac=0.08),
    "elastic": Case(identity={"alpha": 0}),
    "hflip": Case(random=False, pil={}, tol_mean=0.0, tol_frac=0.0),
    "vflip": Case(random=False, pil={}, tol_mean=0.0, tol_frac=0.0),
    "rot90": Case(params={"k": 2}, identity={"k": 0}, random=False),  # (a half turn keeps the
    # shape; the quarter turns and targets in test_rot90_*)
    "gaussian_blur": Case(identity={"sigma": 0}, pil={"sigma": 1.2}, tol_mean=1.0, tol_frac=0.05),
    "sharpen": Case(identity={"amount": 0}, pil={"amount": 1.0}, tol_mean=0.5, tol_frac=0.05),
    "smooth": Case(identity={"amount": 0}, pil={"amount": 1.0}, tol_mean=0.5, tol_frac=0.05),
    "brightness_contrast": Case(
        identity={"brightness": 1, "contrast": 1},
        pil={"brightness": 1.15, "contrast": 0.8},
        tol_mean=1.0,
        tol_frac=0.0,
    ),
    "gamma": Case(identity={"gamma": 1}, pil={"gamma": 0.7}, tol_mean=0.0, tol_frac=0.0),
    "gaussian_noise": Case(identity={"sigma": 0}),
    "cutout": Case(identity={"holes": 0}, params={"size": (0.2, 0.4)}),
    "resize": Case(
        params={"height": 24, "width": 20},
        shape=lambda s: (24, 20, *s[2:]),
        random=False,
        pil={"height": 16, "width": 16, "interpolation": "area"},  # integer factors: area == BOX
        tol_mean=0.5,
        tol_frac=0.0,
    ),
    "crop": Case(
        params={"height": 0.5, "width": 0.75},
        identity={"height": 1.0, "width": 1.0},
        shape=lambda s: (round(0.5 * s[0]), round(0.75 * s[1]), *s[2:]),
    ),
    "resized_crop": Case(identity={"scale": 1.0, "ratio": 1.0}),
    # the recipes' crops (windows.py); against torchvision in test_windows.py
    "random_resized_crop": Case(params={"height": 12, "width": 16},
                                shape=lambda s: (12, 16, *s[2:])),
    "center_resized_crop": Case(params={"height": 12, "width": 16}, random=False,
                                shape=lambda s: (12, 16, *s[2:])),
    # Keras' image layers (colour.py, framing.py, corrupt.py); pixels against Keras in
    # test_ops_keras_reference.py
    "hue": Case(identity={"factor": 0}),
    "saturation": Case(identity={"factor": (0.5, 0.5)}),  # a lone 0.5 is (0, 0.5) to Keras
    "color_jitter": Case(identity={"brightness_factor": None, "contrast_factor": None,
                                   "saturation_factor": None, "hue_factor": None}),
    "grayscale": Case(identity={"factor": 0}),
    "color_degeneration": Case(identity={"factor": 0}),
    "invert": Case(identity={"factor": 0}),
    "solarize": Case(),
    "posterize": Case(identity={"factor": (8, 8)}, params={"factor": (2, 6)}),
    "equalize": Case(random=False),
    "auto_contrast": Case(random=False),
    "clahe": Case(random=False),
    "channel_shuffle": Case(),
    "zoom": Case(identity={"height_factor": 0}),
    "zoom_out": Case(identity={"side_range": 1.0}),
    "center_crop": Case(
        params={"height": 0.5, "width": 0.75},
        identity={"height": 1.0, "width": 1.0},
        random=False,
        shape=lambda s: (round(0.5 * s[0]), round(0.75 * s[1]), *s[2:]),
    ),
    "translation": Case(identity={"height_factor": 0, "width_factor": 0}),
    "erasing": Case(identity={"factor": 0}, params={"factor": (1, 1), "scale": (0.1, 0.3)}),
    "jpeg": Case(),
    # policies (policies/augment.py over policies/_space.py); magnitudes against torchvision's tables in
    # test_ops_policies.py
    "rand_augment": Case(identity={"num_ops": 0}),
    "trivial_augment_wide": Case(),
    "auto_augment": Case(),
    "aug_mix": Case(),
}
NAMES = sorted(CONTRACT)


def _builtin_names() -> set[str]:
    return {n for n, spec in core._REGISTRY.items() if spec.module.startswith("shmaug.")}


def test_every_builtin_op_has_a_contract_row() -> None:
    missing = _builtin_names() - set(CONTRACT)
    stale = set(CONTRACT) - _builtin_names()
    assert not missing, f"add a CONTRACT row for {sorted(missing)}"
    assert not stale, f"CONTRACT names ops that are not registered: {sorted(stale)}"


def make_image(shape: Shape, dtype: Any, seed: int) -> np.ndarray:
    """A smooth random image with edges (noise blurred by block averaging, plus a bar)."""
    rng = np.random.default_rng(seed)
    small = rng.random((max(2, shape[0] // 4), max(2, shape[1] // 4), *shape[2:]))
    img = np.kron(small, np.ones((4, 4) + (1,) * (len(shape) - 2)))[: shape[0], : shape[1]]
    img = np.pad(img, [(0, shape[0] - img.shape[0]), (0, shape[1] - img.shape[1])] + [(0, 0)] * (len(shape) - 2), mode="edge")
    img[shape[0] // 3 : shape[0] // 2] = 1.0
    if np.dtype(dtype) == np.uint8:
        return np.rint(img * 255).astype(np.uint8)
    return img.astype(dtype)


images = st.builds(
    make_image,
    shape=st.tuples(st.integers(8, 40), st.integers(8, 40), st.sampled_from([(), (1,), (3,)])).map(
        lambda t: (t[0], t[1], *t[2])
    ),
    dtype=st.sampled_from([np.uint8, np.float16, np.float32]),
    seed=st.integers(0, 2**16),
)
FAST = settings(max_examples=12, deadline=None, derandomize=True)


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(image=images, seed=st.integers(0, 2**32 - 1))
def test_contract_shape_dtype_range_determinism(name: str, image: np.ndarray, seed: int) -> None:
    case = CONTRACT[name]
    op = ops.Op(name, **case.params)
    before = image.copy()
    state = (random.getstate(), np.random.get_state()[1].copy())
    out = op(image, np.random.default_rng(seed))
    assert isinstance(out, np.ndarray)
    assert out.shape == case.shape(image.shape), (out.shape, image.shape)
    assert out.dtype == image.dtype
    if image.dtype != np.uint8:
        assert np.isfinite(out).all() and out.min() >= 0.0 and out.max() <= 1.0
    np.testing.assert_array_equal(image, before, err_msg="the op modified its input")
    assert random.getstate() == state[0] and np.array_equal(np.random.get_state()[1], state[1])
    again = op(image, np.random.default_rng(seed))
    np.testing.assert_array_equal(out, again, err_msg="same rng state, different output")


@pytest.mark.parametrize("name", [n for n in NAMES if CONTRACT[n].identity is not None])
@FAST
@given(image=images, seed=st.integers(0, 2**32 - 1))
def test_zero_magnitude_is_identity(name: str, image: np.ndarray, seed: int) -> None:
    identity = CONTRACT[name].identity
    assert identity is not None
    out = ops.get(name)(image, np.random.default_rng(seed), **identity)
    assert out.dtype == image.dtype and out.shape == image.shape
    np.testing.assert_array_equal(out, image)


@pytest.mark.parametrize("name", [n for n in NAMES if CONTRACT[n].random])
def test_rng_is_used(name: str) -> None:
    image = make_image((32, 32, 3), np.uint8, 0)
    op = ops.Op(name, **CONTRACT[name].params)
    outs = [op(image, np.random.default_rng(s)).tobytes() for s in range(6)]
    assert len(set(outs)) > 1, f"{name} gives the same output for every rng state"


@pytest.mark.parametrize("name", ["hflip", "vflip"])
def test_flip_twice_is_identity(name: str) -> None:
    image = make_image((9, 14, 3), np.float16, 1)
    rng = np.random.default_rng(0)
    once = ops.get(name)(image, rng)
    assert not np.array_equal(once, image)
    np.testing.assert_array_equal(ops.get(name)(once, rng), image)


@pytest.mark.parametrize("name", [n for n in NAMES if CONTRACT[n].pil is not None])
@pytest.mark.parametrize("layout", ["glyph", "rgb"])
def test_pil_and_opencv_backends_agree(name: str, layout: str) -> None:
    case = CONTRACT[name]
    assert case.pil is not None
    if layout == "glyph":
        from shmaug.sources.glyphs import render_glyphs

        image = render_glyphs(1, 64, seed=3)[0][0]
    else:
        image = make_photo()
    cv_out = ops.get(name)(image, np.random.default_rng(5), **case.pil)
    pil_out = ops.get(name)(image, np.random.default_rng(5), backend="pil", **case.pil)
    assert cv_out.shape == pil_out.shape and cv_out.dtype == pil_out.dtype
    diff = np.abs(cv_out.astype(np.int32) - pil_out.astype(np.int32))
    assert diff.mean() <= case.tol_mean, f"mean |cv - pil| = {diff.mean():.3f}"
    assert (diff > 2).mean() <= case.tol_frac, f"{(diff > 2).mean():.3%} of pixels differ by > 2"


def make_photo() -> np.ndarray:
    """A smooth 48x48 RGB scene: colour gradients from upsampled noise plus a bright disc."""
    import cv2

    small = np.random.default_rng(7).random((6, 6, 3)).astype(np.float32)
    img = cv2.resize(small, (48, 48), interpolation=cv2.INTER_CUBIC)
    yy, xx = np.mgrid[:48, :48]
    img[(yy - 30) ** 2 + (xx - 18) ** 2 < 64] = 1.0
    return np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)


def roll_reference(image: np.ndarray, amplitude: float, period: float, phase: float) -> np.ndarray:
    """The classic sine warp, one ``np.roll`` per column."""
    out = image.copy()
    for x in range(image.shape[1]):
        shift = int(np.rint(amplitude * math.sin(2 * math.pi * x / period + phase)))
        out[:, x] = np.roll(image[:, x], shift, axis=0)
    return out


@FAST
@given(
    image=images,
    amplitude=st.floats(0.0, 8.0),
    period=st.floats(2.0, 80.0),
    phase=st.floats(0.0, 2 * math.pi),
)
def test_sine_warp_equals_per_column_roll(
    image: np.ndarray, amplitude: float, period: float, phase: float
) -> None:
    expected = roll_reference(image, amplitude, period, phase)
    params = {"amplitude": amplitude, "period": period, "phase": phase}
    rng = np.random.default_rng(0)
    fast = ops.sine_warp(image, rng, interpolation="nearest", **params)
    np.testing.assert_array_equal(fast, expected)
    np.testing.assert_array_equal(ops.sine_warp(image, rng, backend="pil", **params), expected)


def test_sine_warp_linear_is_close_to_reference() -> None:
    image = make_image((64, 64), np.uint8, 2)
    linear = ops.sine_warp(image, np.random.default_rng(0), amplitude=3.0, period=40.0, phase=0.5)
    expected = roll_reference(image, 3.0, 40.0, 0.5)
    assert np.abs(linear.astype(int) - expected.astype(int)).mean() < 8.0


def test_four_channels_and_float64_are_supported() -> None:
    rng = np.random.default_rng(0)
    for image in (make_image((16, 16, 4), np.uint8, 0), make_image((16, 16), np.float64, 0)):
        for name in NAMES:
            out = ops.Op(name, **CONTRACT[name].params)(image, rng)
            assert out.dtype == image.dtype and out.ndim == image.ndim



@pytest.mark.parametrize("bands", [4, 13])
def test_contrast_turns_each_band_past_the_colour_about_its_own_mean(bands: int) -> None:
    # One gray for all pulled a bright near-infrared band toward dark RGB's level (4 bands:
    # their luma; 5 or more: the mean of all), and 13 dark visible bands to the others'.
    image = np.full((16, 16, bands), 30, np.uint16)
    image[:, :, 3:] = 5000 + np.arange(16, dtype=np.uint16)[:, None, None] * 10
    op = ops.Op("brightness_contrast", brightness=(1.0, 1.0), contrast=(0.5, 0.5))
    out = op(image, np.random.default_rng(0))
    np.testing.assert_array_equal(out[:, :, :3], op(image[:, :, :3], np.random.default_rng(0)))
    for k in range(3, bands):
        np.testing.assert_array_equal(out[:, :, k], op(image[:, :, k], np.random.default_rng(0)))
    assert abs(float(out[:, :, 3].mean()) - float(image[:, :, 3].mean())) < 1


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_contrast_turns_each_of_two_channels_about_its_own_mean(dtype: Any) -> None:
    # A microscopist's DAPI + membrane: DAPI's pivot was the mean of both, so its output
    # moved with the other stain's level (3163, 2349, 1654 for a membrane of 0, 2000, 4000).
    stain = make_image((16, 16), dtype, 0)
    op = ops.Op("brightness_contrast", brightness=(1.0, 1.0), contrast=(2.0, 2.0))
    alone = op(stain, np.random.default_rng(0))
    for level in (0.0, 0.5, 1.0):
        other = np.full_like(stain, level * (255 if dtype == np.uint8 else
                                             65535 if dtype == np.uint16 else 1))
        out = op(np.stack([stain, other], -1), np.random.default_rng(0))
        np.testing.assert_array_equal(out[:, :, 0], alone)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64])
def test_views_in_any_memory_layout(name: str, dtype: Any) -> None:
    # A pipeline hands an op whatever the op before returned: a transposed or Fortran-order
    # view must work like a contiguous copy (gamma's in-place cv2.pow once refused one).
    image = make_image((24, 20, 3), dtype, 3)
    op = ops.Op(name, **CONTRACT[name].params)
    expected = op(np.ascontiguousarray(image.transpose(1, 0, 2)), np.random.default_rng(1))
    for view in (image.transpose(1, 0, 2), np.asfortranarray(image.transpose(1, 0, 2))):
        np.testing.assert_array_equal(op(view, np.random.default_rng(1)), expected)


RESAMPLING = ["rotate", "shear", "scale_translate", "translate", "perspective", "elastic",
              "sine_warp"]


@pytest.mark.parametrize("name", RESAMPLING)
def test_cubic_on_more_than_four_channels_is_each_channel_alone(name: str) -> None:
    # OpenCV's cubic warps take at most 4 channels; a 6-channel image raised cv2.error.
    image = make_image((24, 20, 6), np.uint8, 4)
    op = ops.Op(name, interpolation="cubic", **CONTRACT[name].params)
    out = op(image, np.random.default_rng(2))
    for c in range(6):
        alone = op(np.ascontiguousarray(image[:, :, c]), np.random.default_rng(2))
        np.testing.assert_array_equal(out[:, :, c], alone)


@pytest.mark.parametrize("name, params", [
    ("resize", {"height": 100, "width": 90}),
    ("center_resized_crop", {"height": 50, "width": 45}),
    ("random_resized_crop", {"height": 37, "width": 41})])
def test_area_resizes_of_more_than_four_channels_are_each_channel_alone(name, params) -> None:
    # OpenCV's area resize takes at most 4 channels at a ratio that is not whole: a
    # 13-band image raised cv2.error (-215 ``cn <= 4``).
    image = make_image((120, 110, 13), np.uint16, 4)
    op = ops.Op(name, interpolation="area", **params)
    out = op(image, np.random.default_rng(2))
    for c in (0, 5, 12):
        alone = op(np.ascontiguousarray(image[:, :, c:c + 1]), np.random.default_rng(2))
        np.testing.assert_array_equal(out[:, :, c:c + 1], alone)


@pytest.mark.parametrize("name", RESAMPLING)
@pytest.mark.parametrize("shape", [(1, 9), (9, 1), (1, 1)])
def test_a_one_pixel_axis_with_cubic_and_reflect_returns(name: str, shape: Shape) -> None:
    # OpenCV loops forever on a reflected border along a 1-pixel axis with cubic warps.
    out = ops.Op(name, interpolation="cubic", border="reflect")(
        np.full(shape, 7, np.uint8), np.random.default_rng(0))
    assert out.shape == shape


def test_a_resize_keeping_the_aspect_places_the_image_where_asked() -> None:
    """A text line (wide) fitted to a 32x128 canvas: centred, or left-aligned on white for
    OCR; the window of a crop taken where ``position`` says; a random place drawn per seed."""
    import cv2

    from shmaug.sources.images.decode import resize as decoded_resize

    line = make_image((20, 200, 3), np.uint8, 3)
    rng = np.random.default_rng(0)
    centred = ops.resize(line, rng, 32, 128, interpolation="linear", pad_to_aspect_ratio=True)
    np.testing.assert_array_equal(  # the geometry the sources' pad_to_aspect_ratio has
        centred, decoded_resize(line, (32, 128), "linear", aspect="pad"))
    left = ops.resize(line, rng, 32, 128, interpolation="linear", pad_to_aspect_ratio=True,
                      position="top_left", fill=1.0)
    fitted = cv2.resize(line, (128, 12), interpolation=cv2.INTER_LINEAR)  # 200:20 in 128 wide
    np.testing.assert_array_equal(left[:12], fitted)
    assert (left[12:] == 255).all()
    np.testing.assert_array_equal(centred[9:21], fitted)  # top: floor((32 - 12.8) / 2)
    assert (centred[:9] == 0).all() and (centred[21:] == 0).all()
    window = ops.resize(line, rng, 32, 32, interpolation="linear", crop_to_aspect_ratio=True,
                        position="top_left")
    np.testing.assert_array_equal(
        window, cv2.resize(line[:, :20], (32, 32), interpolation=cv2.INTER_LINEAR))
    np.testing.assert_array_equal(  # centred: Keras' smart_resize window, as the sources
        ops.resize(line, rng, 32, 32, interpolation="linear", crop_to_aspect_ratio=True),
        decoded_resize(line, (32, 32), "linear", aspect="crop"))
    placed = [ops.resize(line, np.random.default_rng(seed), 32, 128, pad_to_aspect_ratio=True,
                         position="random") for seed in range(6)]
    assert len({p.tobytes() for p in placed}) > 1
    np.testing.assert_array_equal(placed[3], ops.resize(
        line, np.random.default_rng(3), 32, 128, pad_to_aspect_ratio=True, position="random"))


def test_a_resize_keeping_the_aspect_is_refused_with_both_or_a_position_alone() -> None:
    image, rng = make_image((20, 40, 3), np.uint8, 3), np.random.default_rng(0)
    with pytest.raises(ArgumentError, match=r"cannot both be True.*Fix: keep one"):
        ops.resize(image, rng, 8, 8, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True)
    with pytest.raises(ArgumentError, match=r"`position`.*'top_left' with neither.*Fix"):
        ops.resize(image, rng, 8, 8, position="top_left")
    with pytest.raises(ArgumentError, match=r"`fill` of `resize`.*fill=1.0 without "
                                            r"pad_to_aspect_ratio=True"):
        ops.resize(image, rng, 8, 8, fill=1.0)
    assert ops.resize(image, rng, 8, 8, fill=(0.0, 0.0)).shape == (8, 8, 3)  # a zero range
    with pytest.raises(ArgumentError, match=r"`position`"):
        ops.Op("resize", position="left")
    with pytest.raises(ArgumentError, match=r"`pad_to_aspect_ratio` expects True or False"):
        ops.Op("resize", pad_to_aspect_ratio="yes")


@pytest.mark.parametrize("name", ["resize", "crop"])
def test_sizes_take_fractions_and_numpy_integers(name: str) -> None:
    image = make_image((32, 48, 3), np.uint8, 5)
    rng = np.random.default_rng(0)
    assert ops.get(name)(image, rng, height=0.5, width=0.25).shape == (16, 12, 3)
    assert ops.get(name)(image, rng, height=np.int64(16), width=np.float32(0.25)).shape == (16, 12, 3)


@pytest.mark.parametrize("name", ["rotate", "hflip", "vflip", "perspective", "elastic",
                                  "sine_warp", "resized_crop", "gaussian_blur", "sharpen",
                                  "gamma", "equalize", "auto_contrast"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_a_hyperspectral_cube_past_opencvs_128_channels_is_moved_band_by_band_alike(name, dtype):
    """200 bands (Indian Pines, Salinas): every warp, flip, crop and filter raised OpenCV's
    "invalid count (200, must be in [1, 128])"."""
    cube = np.random.default_rng(0).random((24, 28, 200))
    cube = (cube * 255).astype(np.uint8) if dtype == np.uint8 else cube.astype(np.float32)
    op = ops.Op(name)
    out = op(cube, np.random.default_rng(5))
    assert out.shape[2] == 200 and out.dtype == dtype
    # one draw moves all alike (bands compared 5 or more at a time: OpenCV's kernels for 1 to
    # 4 channels round otherwise than its kernel for more; float filters, to a unit in the last
    # place, as with any other channel count)
    for bands in (slice(0, 5), slice(124, 133), slice(195, 200)):
        alone = op(np.ascontiguousarray(cube[:, :, bands]), np.random.default_rng(5))
        np.testing.assert_allclose(out[:, :, bands], alone, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["random_resized_crop", "center_resized_crop"])
def test_an_antialiased_crop_resamples_each_band_alone_whatever_a_fourth_holds(name):
    """RGB + NIR as uint8: PIL took the 4th band for alpha and premultiplied the colour by it,
    so a dark NIR band (water) moved the RGB values by up to 113 levels."""
    op = ops.Op(name, height=32, width=32)
    for channels, groups in ((4, (slice(0, 3), slice(3, 4))),
                             (7, (slice(0, 3), slice(3, 4), slice(3, 6), slice(6, 7)))):
        img = np.random.default_rng(0).integers(100, 200, (64, 64, channels), dtype=np.uint8)
        img[..., 3] = 2
        out = op(img, np.random.default_rng(1))
        for bands in groups:
            alone = op(np.ascontiguousarray(img[:, :, bands]), np.random.default_rng(1))
            np.testing.assert_array_equal(out[:, :, bands],
                                          alone.reshape(out[:, :, bands].shape))


def test_a_blur_far_wider_than_the_image_flattens_it_rather_than_blackening_it():
    """sigma=3e5 on uint8: a kernel of 1.8 million taps summed the image to all zeros."""
    img = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    out = ops.Op("gaussian_blur", sigma=3e5)(img, np.random.default_rng(0))
    unit = ops.Op("gaussian_blur", sigma=3e5)(img / np.float32(255), np.random.default_rng(0))
    assert np.abs(out.astype(int) - np.rint(unit * 255)).max() <= 1  # as floats, not black
    assert out.std(axis=(0, 1)).max() < 1  # (as flat as the image is wide)


def test_shifts_in_pixels_and_signed_limits_for_gains_are_refused_with_their_meaning() -> None:
    # Op("translate", x=20) made every image black without a word (pixels for a fraction),
    # and albumentations' limits about 0 were told a clamped range: brightness=(0.0, 0.2)
    # blackens, scale=(0.001, 0.1) shrinks to a tenth.
    for name, kwargs, means in (("translate", {"x": 20}, r"fraction of the image's width.*20 / "),
                                ("scale_translate", {"translate": (-30, 30)}, r"not pixels"),
                                ("brightness_contrast", {"brightness": (-0.2, 0.2)},
                                 r"factor about 1.*\(0\.8, 1\.2\)"),
                                ("scale_translate", {"scale": (-0.1, 0.1)}, r"factor about 1")):
        with pytest.raises(ArgumentError, match=means):
            ops.Op(name, **kwargs)
    image = make_image((16, 16, 3), np.uint8, 0)
    moved = ops.Op("translate", x=(-1.0, 1.0), y=0.5)(image, np.random.default_rng(0))
    assert moved.shape == image.shape


@pytest.mark.parametrize("border, mode", [("constant", "constant"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("wrap", "wrap")])
@pytest.mark.parametrize("dtype, shape", [(np.uint8, (32, 32, 3)), (np.float16, (28, 28, 1)),
                                          (np.float32, (28, 28)), (np.uint16, (12, 10, 6))])
def test_a_padded_crop_is_torchvisions_random_crop(border, mode, dtype, shape) -> None:
    """CIFAR's RandomCrop(32, padding=4, padding_mode=...): a window of the padded image,
    every whole-pixel offset alike (a `translate` rounded its continuous shift: its end
    offsets came half as often, and a linear one blurred)."""
    image = (np.random.default_rng(3).random(shape) * (255 if dtype in (np.uint8, np.uint16) else 1)
             ).astype(dtype)  # (noise: one offset matches each window)
    p = 4
    padded = np.pad(image, ((p, p), (p, p)) + ((0, 0),) * (image.ndim - 2), mode=mode)
    op = ops.Op("crop", height=shape[0], width=shape[1], padding=p, border=border)
    seen = np.zeros((2 * p + 1, 2 * p + 1), int)
    for seed in range(400):
        out = op(image, np.random.default_rng(seed))
        assert out.shape == image.shape and out.dtype == image.dtype
        at = [(y, x) for y in range(2 * p + 1) for x in range(2 * p + 1)
              if np.array_equal(padded[y:y + shape[0], x:x + shape[1]], out)]
        assert at
        seen[at[0]] += 1
    assert (seen.sum(axis=1) > 25).all() and (seen.sum(axis=0) > 25).all()  # (44 each)
    half = ops.Op("crop", height=0.5, width=0.5, padding=2)(image, np.random.default_rng(0))
    assert half.shape[:2] == (shape[0] // 2, shape[1] // 2)  # (of the image's own sides)


def test_a_crop_given_whole_pixels_as_a_float_is_told_the_int() -> None:
    # 0.25 * 1024 = 256.0 was refused as "pixels >= 1 or a fraction": it is >= 1.
    with pytest.raises(ArgumentError, match=r"pixels \(an int >= 1\) or a fraction in \(0, 1\] "
                                            r"\(a float\); received 256.0. Fix: height=256 "):
        ops.Op("crop", height=256.0, width=256)(make_image((300, 300), np.uint8, 0),
                                                np.random.default_rng(0))
