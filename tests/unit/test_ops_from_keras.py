"""``from_keras``: the Keras guides' augmentation blocks become shmaug pipelines that
round-trip, pickle and, with the draws pinned, equal the Keras layers' pixels; layers it does
not translate are refused by name with the fix."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import shmaug
from shmaug.errors import ArgumentError, ArgumentTypeError
from shmaug.ops import Compose, Maybe, Op, from_config, from_keras
from shmaug.ops.interop.keras_layers import REFUSED, TRANSLATED
from tests._helpers import needs_keras
from tests.unit.test_ops_keras_reference import close, keras_apply, photo

KERAS_255 = (0.0, 255.0)


def guide_block() -> Any:
    """The Keras guides' block (e.g. keras.io/guides/preprocessing_layers)."""
    from keras import Sequential, layers

    return Sequential([layers.RandomFlip("horizontal"), layers.RandomRotation(0.1),
                       layers.RandomZoom(0.1), layers.RandomContrast(0.2)])


def from_scratch_block() -> list[Any]:
    """keras.io/examples/vision/image_classification_from_scratch: a list of layers."""
    from keras import layers

    return [layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)]


ROTATE_36 = Op("rotate", degrees=(-36.0, 36.0), border="reflect", fill=0.0,
               interpolation="linear")


@needs_keras
def test_the_guide_block_is_the_hand_written_pipeline() -> None:
    expected = Compose([
        Maybe("hflip"), ROTATE_36,
        Op("zoom", height_factor=0.1, width_factor=None, border="reflect", fill=0.0,
           interpolation="linear"),
        Op("color_jitter", brightness_factor=None, contrast_factor=(0, 0.2),
           saturation_factor=None, hue_factor=None),
    ], value_range=KERAS_255)  # RandomContrast's: the data Keras assumes
    assert from_keras(guide_block()) == expected


@needs_keras
def test_the_from_scratch_list_has_no_value_range() -> None:
    assert from_keras(from_scratch_block()) == Compose([Maybe("hflip"), ROTATE_36])


@needs_keras
@pytest.mark.parametrize("block", [guide_block, from_scratch_block])
def test_the_pipeline_round_trips_and_pickles(block: Any) -> None:
    aug = from_keras(block())
    assert from_config(aug.to_config()) == aug
    again = pickle.loads(pickle.dumps(aug))
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), np.uint8)
    np.testing.assert_array_equal(again(image, np.random.default_rng(5)),
                                  aug(image, np.random.default_rng(5)))


@needs_keras
@pytest.mark.parametrize("seed", [0, 2])  # the first draw of seed 0 keeps, of 2 flips
@pytest.mark.parametrize("fill_mode", ["constant", "nearest"])
def test_pinned_draws_equal_the_keras_layers(seed: int, fill_mode: str) -> None:
    """The guide block with each range pinned to one value (flip pinned to our first draw):
    Keras' "reflect" is not translated exactly (docs/ops.md), so the borders tested are the
    ones that are."""
    import keras
    from keras import layers

    block = [layers.RandomFlip("horizontal"),
             layers.RandomRotation((0.05, 0.05), fill_mode=fill_mode),
             layers.RandomZoom((0.2, 0.2), fill_mode=fill_mode),
             layers.RandomContrast((-0.3, 0.3), value_range=KERAS_255)]
    image = photo(32, 28)
    flip = np.random.default_rng(seed).random() < 0.5  # Maybe's draw
    theirs = keras_apply(block[0], image, flips=np.full((1, 1, 1, 1), flip),
                         input_shape=(1, *image.shape))
    for layer in block[1:]:  # their ranges are one value: no draw to pin
        theirs = np.asarray(keras.ops.convert_to_numpy(layer(theirs[None], training=True)))[0]
    ours = from_keras(block)(image, np.random.default_rng(seed))
    close(ours, theirs, max_abs=1.0, mean_abs=0.05)  # test_zoom's: OpenCV's bilinear weights


def _layers() -> dict[str, Any]:
    """One instance of every layer from_keras translates, with non-default arguments."""
    from keras import layers as L

    return {
        "AugMix": L.AugMix(num_chains=2, chain_depth=(1, 3), factor=0.5),
        "AutoContrast": L.AutoContrast(),
        "CenterCrop": L.CenterCrop(20, 18),
        "ContrastLimitedAdaptiveHistogramEqualization":
            L.ContrastLimitedAdaptiveHistogramEqualization(clip_limit=2.0, tile_grid_size=(4, 4)),
        "Equalization": L.Equalization(),
        "RandAugment": L.RandAugment(num_ops=3, factor=0.3),
        "RandomBrightness": L.RandomBrightness(0.3),
        "RandomColorDegeneration": L.RandomColorDegeneration(0.4),
        "RandomColorJitter": L.RandomColorJitter(brightness_factor=0.1, hue_factor=0.2),
        "RandomContrast": L.RandomContrast(0.3),
        "RandomCrop": L.RandomCrop(20, 18),
        "RandomElasticTransform": L.RandomElasticTransform(factor=(0.6, 1.0), scale=0.3),
        "RandomGaussianBlur": L.RandomGaussianBlur(factor=0.8, kernel_size=5, sigma=(0.5, 0.9)),
        "RandomPerspective": L.RandomPerspective(factor=1.0, scale=0.4),
        "RandomSharpness": L.RandomSharpness(0.3),
        "RandomErasing": L.RandomErasing(scale=(0.1, 0.2)),
        "RandomFlip": L.RandomFlip(),
        "RandomGrayscale": L.RandomGrayscale(0.3),
        "RandomHue": L.RandomHue(0.2),
        "RandomInvert": L.RandomInvert(0.4),
        "RandomPosterization": L.RandomPosterization(3),
        "RandomRotation": L.RandomRotation(0.2, fill_mode="wrap", interpolation="nearest"),
        "RandomSaturation": L.RandomSaturation(0.3),
        "RandomShear": L.RandomShear(0.2, 0.1),
        "RandomTranslation": L.RandomTranslation(0.1, 0.2, fill_mode="constant", fill_value=51.0),
        "RandomZoom": L.RandomZoom((-0.2, 0.1), 0.3),
        "Resizing": L.Resizing(24, 20, interpolation="bicubic"),
        "Solarization": L.Solarization(0.2, 0.5),
    }


@needs_keras
def test_every_translated_layer_runs_round_trips_and_is_tested() -> None:
    made = _layers()
    assert sorted(made) == sorted(TRANSLATED), "a translated layer without a test"
    image = np.random.default_rng(0).integers(0, 256, (32, 30, 3), np.uint8)
    for name, layer in made.items():
        aug = from_keras([layer])
        assert from_config(aug.to_config()) == aug, name
        out = aug(image, np.random.default_rng(1))
        assert out.dtype == np.uint8 and out.ndim == 3, name
    moved = from_keras([made["RandomTranslation"]]).to_config()["ops"][0]
    assert moved["params"]["fill"] == pytest.approx(0.2)  # fill_value 51 of 255


@needs_keras
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_layer_is_named_with_why_and_the_fix(name: str) -> None:
    import keras

    args = {"Rescaling": (1 / 255,), "MaxNumBoundingBoxes": (4,)}.get(name, ())
    layer = getattr(keras.layers, name)(*args)
    with pytest.raises(ArgumentError, match=rf"{name} .*Fix: "):
        from_keras(keras.Sequential([layers_flip(), layer]))


def layers_flip() -> Any:
    from keras import layers

    return layers.RandomFlip("horizontal")


@needs_keras
def test_an_unknown_layer_or_a_subclass_is_named_with_the_nearest_op() -> None:
    from keras import layers

    with pytest.raises(ArgumentError, match=r"Dense \('dense'\).*not a Keras image "
                                            r"augmentation layer.*Fix: replace it"):
        from_keras([layers_flip(), layers.Dense(3, name="dense")])

    class RandomHue(layers.RandomHue):  # a user's change of a Keras layer
        pass

    with pytest.raises(ArgumentError, match=r"subclass.*nearest by name is Op\('hue'\)"):
        from_keras([RandomHue(0.2)])


@needs_keras
def test_layers_assuming_different_ranges_are_refused() -> None:
    from keras import layers

    with pytest.raises(ArgumentError, match=r"`value_range`.*\(0\.0, 1\.0\)"):
        from_keras([layers.RandomContrast(0.2), layers.RandomHue(0.1, value_range=(0, 1))])


@needs_keras
def test_channels_first_and_untranslatable_arguments_are_refused() -> None:
    from keras import layers

    with pytest.raises(ArgumentError, match="data_format"):
        from_keras([layers.RandomFlip(data_format="channels_first")])
    with pytest.raises(ArgumentError, match=r"`antialias`.*Fix: Op\('resize'"):  # was dropped
        from_keras([layers.Resizing(8, 8, antialias=True)])


@needs_keras
@pytest.mark.parametrize("aspect", ["crop_to_aspect_ratio", "pad_to_aspect_ratio"])
def test_resizing_to_the_aspect_ratio_takes_kerass_place(aspect: str) -> None:
    """Keras pads before resizing and shmaug after, as ``tf.image.resize_with_pad`` and the
    sources' ``pad_to_aspect_ratio``: the image in the same place to a row, a few levels apart
    on a smooth image."""
    from keras import layers

    yy, xx = np.mgrid[0:40, 0:96]
    image = np.stack([xx * 255 // 95, yy * 255 // 39, np.full_like(xx, 90)], -1).astype(np.uint8)
    layer = layers.Resizing(24, 32, fill_value=255.0, **{aspect: True})
    expected = np.asarray(layer(image[None].astype(np.float32)))[0]
    got = from_keras([layer])(image, np.random.default_rng(0)).astype(np.float32)
    assert got.shape == expected.shape == (24, 32, 3)
    filled, keras_filled = (got == 255).all(axis=(1, 2)), (expected == 255).all(axis=(1, 2))
    assert (filled ^ keras_filled).sum() <= 2  # a row apart at most, each side
    both = ~(filled | keras_filled)
    assert np.abs(got - expected)[both].mean() < 4.0, np.abs(got - expected)[both].mean()
    assert filled.any() == (aspect == "pad_to_aspect_ratio")  # fill_value: white


def test_something_else_than_layers_is_a_type_error() -> None:
    with pytest.raises(ArgumentTypeError, match=r"`layers` of from_keras.*'hflip' \(type str"):
        from_keras("hflip")
    assert shmaug.from_keras is from_keras


@needs_keras
def test_the_four_probabilistic_and_filter_layers_translate_with_keras_meanings() -> None:
    """Keras' RandomGaussianBlur, RandomPerspective and RandomElasticTransform apply with a
    probability drawn in ``factor`` (so its mean); RandomSharpness blends 2f of the image with
    1 - 2f of PIL's SMOOTH; the blur's kernel is ``kernel_size`` wide; the perspective keeps
    the top-left corner; the elastic field's size follows the image (0.1 f max(H, W))."""
    from keras import layers as L

    blur = from_keras(L.RandomGaussianBlur(factor=(0.2, 0.6), kernel_size=5, sigma=0.8)).ops[0]
    assert blur.p == pytest.approx(0.4)
    assert dict(blur.op.params)["kernel_size"] == 5
    assert dict(blur.op.params)["sigma"] == pytest.approx((1e-6, 0.8))
    sharp = from_keras(L.RandomSharpness((0.25, 0.75))).ops[0]
    assert dict(sharp.params)["amount"] == pytest.approx((-0.5, 0.5))
    image = np.zeros((40, 40), np.float32)
    image[10:30, 10:30] = 1.0
    out = Op("smooth", amount=-0.5, value_range=(0.0, 1.0))(image, np.random.default_rng(0))
    k = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13
    blurred = sum(k[i, j] * np.roll(np.roll(image, 1 - i, 0), 1 - j, 1)
                  for i in range(3) for j in range(3))
    keras_s = 2 * 0.75  # f = 0.75: 2f of the image, 1 - 2f of the smoothed one
    expect = np.clip(keras_s * image + (1 - keras_s) * blurred, 0, 1)
    np.testing.assert_allclose(out[2:-2, 2:-2], expect[2:-2, 2:-2], atol=1e-5)
    persp = from_keras(L.RandomPerspective(factor=1.0, scale=0.8)).ops[0]
    assert persp.p == pytest.approx(0.5) and dict(persp.op.params)["corners"] == "keras"
    corner = np.zeros((32, 32), np.uint8)
    corner[:4, :4] = 255  # the top-left corner stays where Keras keeps it
    for seed in range(5):
        moved = persp.op(corner, np.random.default_rng(seed))
        assert moved[:2, :2].min() > 200
    elastic = from_keras(L.RandomElasticTransform(factor=1.0, scale=(0.5, 0.5))).ops[0]
    field = elastic.op(np.tile(np.arange(64, dtype=np.float32), (64, 1)) / 64,
                       np.random.default_rng(0))
    assert 0 < np.abs(field - np.arange(64) / 64).max() * 64 <= 0.1 * 0.5 * 64 + 1e-3


def _summary(batch: np.ndarray) -> np.ndarray:
    """Per image: its mean colour's channel spread (saturation), its mean, its spread and
    where its brightness sits (row, column), rounded so that float noise cannot split the
    atoms (a fully greyed image) of two draws."""
    flat = batch.reshape(len(batch), -1, batch.shape[-1])
    means = flat.mean(1)
    weight = batch.sum(-1).reshape(len(batch), -1)
    rows, cols = (i.ravel() for i in np.indices(batch.shape[1:3]))
    centre = [(weight * i).sum(1) / np.maximum(weight.sum(1), 1e-9) for i in (rows, cols)]
    return np.round(np.column_stack([means.max(1) - means.min(1), means.mean(1),
                                     flat.std((1, 2)), *centre]), 2)


@needs_keras
@pytest.mark.parametrize("build", [
    lambda L: L.RandomColorDegeneration(0.4),
    lambda L: L.RandomSaturation(0.3),
    lambda L: L.RandomContrast(0.3),
    lambda L: L.RandomPosterization(3),
    lambda L: L.Solarization(0.2, 0.5),
    lambda L: L.RandomColorJitter(value_range=(0, 255), contrast_factor=0.3,
                                  saturation_factor=0.5),
    lambda L: L.RandomShear(0.2, 0.1),
    lambda L: L.RandomShear((0.1, 0.3), 0.0),
], ids=["degeneration", "saturation", "contrast", "posterization", "solarization",
        "jitter", "shear", "shear_one_sided"])
def test_a_translated_layer_draws_what_keras_draws_from_a_lone_factor(build) -> None:
    """Keras 3.15 reads a lone factor its own way (a saturation f is (-f, f), greying the
    images drawn below 0; a posterization n keeps 1..n-1 bits; a contrast c is (1, 1 + c); a
    shear slants about the top-left corner) and from_keras draws the same per image: each
    summary compared with a two-sample KS test."""
    import keras
    from tests.unit.test_ops_keras_distributions import N, keras_batch, ks_same

    keras.utils.set_random_seed(1337)  # Keras' draw too: unseeded, the KS test at alpha =
    layer = build(keras.layers)  # 0.001 failed once in a while on the same distributions
    image = np.zeros((8, 8, 3), np.float32)
    image[:, :4] = (200.0, 80.0, 40.0)
    image[:, 4:] = (30.0, 140.0, 220.0)
    image[2, 5] = (255.0, 255.0, 255.0)  # a mark a shear moves
    aug = from_keras(layer).with_value_range((0.0, 255.0))
    ours = np.stack([aug(image, np.random.default_rng(s)) for s in range(N)])
    theirs = keras_batch(layer, image)
    for k, (a, b) in enumerate(zip(_summary(ours).T, _summary(theirs).T)):
        same, d = ks_same(a, b)
        assert same, (type(layer).__name__, k, d, np.percentile(a, [5, 50, 95]),
                      np.percentile(b, [5, 50, 95]))


@needs_keras
@pytest.mark.parametrize("factors", [(0.2, 0.0), (0.0, 0.25), (0.2, 0.1), (-0.3, 0.2)])
def test_a_top_left_shear_is_keras_map_pixel_for_pixel(factors) -> None:
    """Keras samples the input at (x + sx y, sy x + y); shear(anchor="top_left") with the
    factors negated is that map (both axes at once included, where it also scales)."""
    import cv2
    import keras

    from shmaug.ops.builtin.geometric import shear

    image = cv2.GaussianBlur(np.random.default_rng(0).random((40, 50, 3)).astype(np.float32)
                             * 255, (0, 0), 2)
    layer = keras.layers.RandomShear(0.3, 0.3, fill_mode="constant")
    theirs = np.asarray(layer.transform_images(
        image[None], {"shear_factor": np.array([factors], np.float32),
                      "input_shape": (1, *image.shape)}, training=True))[0]
    ours = shear(image, np.random.default_rng(0), x=-factors[0], y=-factors[1],
                 anchor="top_left", value_range=(0.0, 255.0))
    np.testing.assert_allclose(ours[2:-2, 2:-2], theirs[2:-2, 2:-2], atol=0.5)


@needs_keras
def test_a_blur_of_two_kernel_sides_is_refused_with_the_fix() -> None:
    import keras

    with pytest.raises(ArgumentError, match=r"`kernel_size`.*\(3, 5\).*kernel_size=5"):
        from_keras(keras.layers.RandomGaussianBlur(kernel_size=(3, 5)))
