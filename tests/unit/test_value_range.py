"""value_range: float images in 0..255 are never clipped to [0, 1]; uint16 keeps its scale."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, OneOf, Op, get


def _glyphs_0_255(n: int = 8, size: int = 32) -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.random((n, size, size)) * 255).astype(np.float32)


def _epoch(loader: shmaug.Loader) -> np.ndarray:
    return np.concatenate([np.asarray(b[0] if isinstance(b, tuple) else b) for b in loader])


def test_float_0_255_without_value_range_is_refused_with_the_fix() -> None:
    x = _glyphs_0_255()
    with pytest.raises(shmaug.ArgumentError) as err:
        shmaug.Loader(x, None, batch_size=4, augment=shmaug.presets.glyph_distort(), workers=0)
    message = str(err.value)
    assert "`value_range`" in message and "value_range=(0, 255)" in message
    assert "255" in message and "float32" in message


def test_data_in_0_1_with_an_overshoot_is_told_to_clip_not_0_255() -> None:
    """Fourth review: float photos in 0..1.02 (a resize's ringing) were told value_range=
    (0, 255), in which their white is nearly black to the ops (fills, solarize, brightness)."""
    x = (np.random.default_rng(0).random((4, 8, 8, 3)) * 1.02).astype(np.float32)
    x[0, 0, 0] = 1.02
    with pytest.raises(shmaug.ArgumentError) as err:
        shmaug.Loader(x, batch_size=2, augment=Compose([Op("rotate")]), workers=0)
    message = str(err.value)
    assert "value_range=(0, 1.02)" in message and "np.clip(x, 0, 1)" in message
    assert "(0, 255)" not in message
    with pytest.raises(shmaug.ArgumentError, match=r"value_range=\(0, 1\.02\)"):
        Op("rotate")(x[0], np.random.default_rng(0))  # (an op called alone says the same)
    x[1:] *= 250  # (second review: the first sample a dark one, all of x 0..255: no clip)
    with pytest.raises(shmaug.ArgumentError) as err:
        shmaug.Loader(x, batch_size=2, augment=Compose([Op("rotate")]), workers=0)
    assert "value_range=(0, 255)" in str(err.value) and "np.clip" not in str(err.value)


def test_float_0_255_with_value_range_keeps_its_scale() -> None:
    x = _glyphs_0_255()
    with shmaug.Loader(x, None, batch_size=4, augment=shmaug.presets.glyph_distort(),
                       workers=0, value_range=(0, 255), shuffle=False) as loader:
        out = _epoch(loader)
    assert out.dtype == np.float32 and out.shape == x.shape
    assert out.max() > 200 and out.min() >= 0 and out.max() <= 255
    assert np.mean(out == 1.0) < 0.01  # nothing piled up at the old clip value


def test_value_range_is_bound_into_the_pipeline_and_agrees_across_workers() -> None:
    x = _glyphs_0_255(12)
    outs = []
    for workers in (0, 2):
        with shmaug.Loader(x, None, batch_size=4, augment=shmaug.presets.glyph_distort(),
                           workers=workers, value_range=(0, 255), seed=3) as loader:
            outs.append(_epoch(loader))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_a_pipeline_that_says_its_range_needs_none_on_the_loader() -> None:
    x = _glyphs_0_255()
    aug = Compose([get("rotate").bind(degrees=(-20, 20))], value_range=(0, 255))
    with shmaug.Loader(x, None, batch_size=4, augment=aug, workers=0) as loader:
        assert loader.value_range == (0.0, 255.0)
        assert _epoch(loader).max() > 200


def test_loader_and_pipeline_ranges_that_disagree_are_refused() -> None:
    aug = Compose([get("hflip")], value_range=(0, 1))
    with pytest.raises(shmaug.ArgumentError, match="disagrees"):
        shmaug.Loader(_glyphs_0_255(), None, batch_size=4, augment=aug, workers=0,
                      value_range=(0, 255))


@pytest.mark.parametrize("bad", [(255, 0), (0, float("nan")), "0..255", (1,)])
def test_malformed_value_range_names_the_argument(bad: object) -> None:
    with pytest.raises((shmaug.ArgumentError, shmaug.ArgumentTypeError), match="value_range"):
        shmaug.Loader(_glyphs_0_255(), None, batch_size=4, workers=0, value_range=bad)  # type: ignore[arg-type]


def test_nan_images_are_refused() -> None:
    x = np.zeros((8, 16, 16), np.float32)
    x[5, 3, 3] = np.nan
    with pytest.raises(shmaug.ArgumentError, match="NaN") as err:
        shmaug.Loader(x, None, batch_size=4, augment=shmaug.presets.glyph_distort(), workers=0)
    assert "index 5" in str(err.value)


def test_the_fix_for_infinity_keeps_the_data_in_its_range() -> None:
    """A log of silence is -inf in a dB spectrogram: numpy's nan_to_num, which the fix named,
    put -3.4e38 there, and the range check then offered value_range=(-3.40282e+38, ...)."""
    x = np.random.default_rng(0).uniform(-80, 10, (8, 16, 16)).astype(np.float32)
    x[5, 3, 3] = -np.inf
    pipe = shmaug.ops.Compose([shmaug.ops.Op("gaussian_noise", sigma=0.01)])
    with pytest.raises(shmaug.ArgumentError, match=r"np.nan_to_num\(x, nan=-80, neginf=-80, "
                                                   r"posinf=10\)") as err:
        shmaug.Loader(x, None, augment=pipe, value_range=(-80, 10), workers=0)
    assert "index 5" in str(err.value)
    fixed = np.nan_to_num(x, nan=-80, neginf=-80, posinf=10)  # the fix, as it reads
    shmaug.Loader(fixed, None, augment=pipe, value_range=(-80, 10), workers=0).close()


def test_a_plain_user_function_gets_0_255_floats_unchecked() -> None:
    def halve(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return image * 0.5

    x = _glyphs_0_255()
    with shmaug.Loader(x, None, batch_size=4, augment=halve, workers=0, shuffle=False) as loader:
        np.testing.assert_allclose(_epoch(loader), x * 0.5)


def _window_hu(image: np.ndarray, rng: np.random.Generator, low: float = -160.0,
               high: float = 240.0) -> np.ndarray:
    return np.clip((image - low) / (high - low), 0, 1).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
def test_a_first_step_of_the_users_takes_the_data_as_it_is(dtype: type) -> None:
    # A windowing of Hounsfield units to [0, 1] first: the data was refused (float: "pass
    # value_range=(-1024, ...)", which then bound HU to the rotate after it; int16: its dtype).
    x = (np.random.default_rng(0).random((8, 32, 32)) * 4095 - 1024).astype(dtype)
    turn = Op("rotate", degrees=(90, 90))
    with shmaug.Loader(x, None, batch_size=4, augment=Compose([_window_hu, turn]),
                       workers=0, shuffle=False) as loader:
        out = _epoch(loader)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(out, [turn(_window_hu(image, rng), rng) for image in x])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_standalone_op_refuses_nan_with_the_cleaning_fix(bad: float) -> None:
    # It suggested value_range=(nan, nan), or (0, inf).
    image = np.zeros((8, 8), np.float32)
    image[2, 3] = bad
    with pytest.raises(shmaug.ArgumentError, match="NaN or infinity.*np.nan_to_num"):
        get("rotate")(image, np.random.default_rng(0))
    with pytest.raises(shmaug.ArgumentError, match=r"spans 1e\+308\.\.1e\+308"):  # finite
        get("rotate")(np.full((8, 8), 1e308), np.random.default_rng(0))


def test_a_standalone_op_refuses_float_outside_unit_range_and_accepts_a_range() -> None:
    image = _glyphs_0_255(1)[0]
    rng = np.random.default_rng(0)
    with pytest.raises(shmaug.ArgumentError, match="value_range=\\(0, 255\\)") as usual:
        get("brightness_contrast")(image, rng)
    assert "own span" not in str(usual.value)
    out = get("brightness_contrast").bind(value_range=(0, 255), brightness=1.1, contrast=1.0)(image, rng)
    assert out.max() > 200 and out.max() <= 255


def test_a_span_suggested_as_the_range_says_it_is_one_images_and_how_per_image_data_goes() -> None:
    """A microscopist copied the range of one image, normalised by its percentiles, into
    Compose: a brighter image was clipped to it without a word."""
    image = np.linspace(-0.0218, 1.0331, 64, dtype=np.float32).reshape(8, 8)
    with pytest.raises(shmaug.ArgumentError, match=r"value_range=\(-0.0218, 1.0331\).*this "
                       r"image's own span.*clipped.*pipeline's last step, after the ops"):
        get("gaussian_noise")(image, np.random.default_rng(0))


@pytest.mark.parametrize("name", ["rotate", "gaussian_blur", "sharpen", "brightness_contrast",
                                  "gamma", "gaussian_noise", "cutout", "elastic", "sine_warp"])
def test_uint16_keeps_dtype_and_full_scale(name: str) -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(20_000, 65_535, (48, 48), dtype=np.uint16)
    out = get(name)(image, np.random.default_rng(1))
    assert out.dtype == np.uint16 and out.shape == image.shape
    assert out.max() > 20_000  # not squeezed into 0..255


def test_uint16_flows_through_the_loader() -> None:
    x = np.random.default_rng(0).integers(0, 65_535, (8, 32, 32), dtype=np.uint16)
    with shmaug.Loader(x, None, batch_size=4, augment=shmaug.presets.glyph_distort(),
                       workers=0) as loader:
        assert loader.value_range == (0.0, 65535.0)
        out = _epoch(loader)
    assert out.dtype == np.uint16 and out.max() > 1000


def test_value_range_round_trips_through_config() -> None:
    aug = Compose([OneOf([get("rotate"), get("shear")])], value_range=(0, 255))
    back = shmaug.from_config(json.loads(json.dumps(aug.to_config())))
    assert back == aug
    assert back.value_range == (0.0, 255.0)


@pytest.mark.parametrize("name", [n for n in shmaug.ops.available()  # (shmaug's own: other
                                  if get(n).fn.__module__.startswith("shmaug.")])  # tests add)
def test_integer_pixels_in_a_narrow_range_stay_in_it(name: str) -> None:
    # A 0/1 mask stored as uint8, or 12-bit data in uint16: float bounds must not reach an
    # integer array (numpy refuses that cast), and every op keeps the dtype and the range.
    rng = np.random.default_rng(0)
    for image, vr in ((rng.integers(0, 2, (32, 32), dtype=np.uint8), (0, 1)),
                      (rng.integers(0, 4096, (32, 32, 3), dtype=np.uint16), (0, 4095))):
        out = get(name).with_value_range(vr)(image, np.random.default_rng(1))
        assert out.dtype == image.dtype
        assert vr[0] <= out.min() and out.max() <= vr[1]


def test_integer_data_outside_a_narrow_value_range_is_refused_at_any_index() -> None:
    # uint8 masks declared 0/1 whose first sample is empty: the others (0/255) were clipped
    # to 1 without a word, only sample 0 being checked for integer data.
    masks = np.zeros((4, 16, 16), np.uint8)
    masks[1:, 4:8, 4:8] = 255
    with pytest.raises(shmaug.ArgumentError, match="sample index 1|index 1"):
        shmaug.Loader(masks, None, batch_size=4, augment=Compose(["rotate"]), workers=0,
                      value_range=(0, 1))
    masks[masks == 255] = 1
    with shmaug.Loader(masks, None, batch_size=4, augment=Compose(["rotate"]), workers=0,
                       value_range=(0, 1)) as loader:
        assert set(np.unique(_epoch(loader))) <= {0, 1}


@pytest.mark.parametrize("low, high, guess", [(-999, 2992, "(-999, 2992)"),
                                              (-0.9, 0.95, "(-1, 1)"),
                                              (0, 3000, "(0, 3000)")])
def test_the_range_suggested_holds_the_data_seen(low, high, guess) -> None:
    """CT data in Hounsfield units or floats in [-1, 1] were told to pass (0, high) or
    (0, 255), which the loader then refused again."""
    x = np.linspace(low, high, 8 * 16 * 16, dtype=np.float32).reshape(8, 16, 16)
    with pytest.raises(shmaug.ArgumentError, match=rf"value_range={re.escape(guess)}"):
        shmaug.Loader(x, None, batch_size=4, augment=get("rotate"), workers=0)
    with pytest.raises(shmaug.ArgumentError, match=rf"value_range={re.escape(guess)}, to the op"):
        get("rotate")(x.reshape(-1, 16), np.random.default_rng(0))  # called by hand


def test_a_range_out_of_the_pipelines_own_says_so_and_names_the_pipeline() -> None:
    """The pipeline's own range was called "the default for uint16 images", and the fix
    offered (the loader's value_range) was then refused as disagreeing with the pipeline."""
    x = np.full((4, 16, 16), 4000, np.uint16)
    aug = Compose([get("gamma")], value_range=(0, 255))
    with pytest.raises(shmaug.ArgumentError) as err:
        shmaug.Loader(x, None, batch_size=4, augment=aug, workers=0)
    message = str(err.value)
    assert "`augment`'s own" in message and "default" not in message
    assert "Compose([...], value_range=(0, 4000))" in message
    fixed = Compose([get("gamma")], value_range=(0, 4000))
    with shmaug.Loader(x, None, batch_size=4, augment=fixed, workers=0) as loader:
        assert loader.value_range == (0.0, 4000.0)


def test_masks_under_a_lone_op_are_told_to_wrap_it_in_a_compose_without_a_box_format() -> None:
    x = np.zeros((4, 16, 16), np.uint8)
    masks = {"segmentation_masks": np.zeros((4, 16, 16), np.uint8)}
    with pytest.raises(shmaug.ArgumentError) as err:
        shmaug.Loader(x, masks, batch_size=4, augment=get("hflip"), workers=0)
    assert "Compose([...])" in str(err.value) and "bounding_box_format" not in str(err.value)
    boxes = {"boxes": np.zeros((4, 1, 4), np.float32), "classes": np.zeros((4, 1), np.int64)}
    with pytest.raises(shmaug.ArgumentError, match=r"bounding_box_format=\.\.\."):
        shmaug.Loader(x, boxes, batch_size=4, augment=get("hflip"), workers=0)


def test_a_declared_range_is_checked_with_nothing_to_augment() -> None:
    """As the docs say: a declared range gets the data checked, an augment or not (without
    one, dB spectrograms passed a value_range=(0, 1), and NaN passed)."""
    x = np.random.default_rng(0).uniform(-80, 10, (8, 16, 16)).astype(np.float32)
    with pytest.raises(shmaug.ArgumentError, match=r"`value_range` is \(0, 1\) but sample"):
        shmaug.Loader(x, None, value_range=(0, 1), workers=0)
    x[5, 3, 3] = np.nan
    with pytest.raises(shmaug.ArgumentError, match=r"NaN or infinity \(sample index 5\)"):
        shmaug.Loader(x, None, value_range=(-80, 10), workers=0)
    with shmaug.Loader(x, None, batch_size=4, workers=0) as loader:  # none declared: as is
        assert np.isnan(loader.batch(1)[0]).any()


def test_a_memory_map_with_nothing_to_augment_has_its_sample_0_checked(tmp_path) -> None:
    """As a worker checks sample 0 of a map it augments: with no augment no worker makes
    one, and a map of dB values passed value_range=(0, 1), NaN included."""
    x = np.random.default_rng(0).uniform(-80, 10, (8, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    with pytest.raises(shmaug.ArgumentError, match=r"`value_range` is \(0, 1\) but sample "
                                                   r"index 0"):
        shmaug.Loader(mapped, None, value_range=(0, 1), workers=0)
    shmaug.Loader(mapped, None, value_range=(-80, 10), workers=0).close()


@pytest.mark.parametrize("augment", [None, "rotate"])
def test_a_memory_maps_range_error_suggests_no_range_from_its_first_sample(tmp_path, augment):
    """The error called sample 0's range "all of x" and suggested it: taken, it clipped the
    samples after it (z-scored spectrograms: 31,225 of 524,288 values in one batch)."""
    x = np.random.default_rng(0).normal(0, 1, (8, 16, 16)).astype(np.float32)
    x[5] *= 4  # a wider sample after the first
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(shmaug.ArgumentError) as err:
        shmaug.Loader(str(tmp_path / "x.npy"), None, batch_size=4, workers=0,
                      augment=None if augment is None else get(augment),
                      value_range=None if augment else (0, 1))
    said = str(err.value)
    assert "only the first sample is read here" in said and "all of x" not in said, said
    assert re.search(r"value_range=\(.*\) if all the data lies there", said), said
