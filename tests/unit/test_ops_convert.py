"""float16 <-> float32 at the pipeline edge: OpenCV's fast path must equal numpy's astype."""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from shmaug.ops._params import convert

ALL_HALF = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
FINITE_HALF = ALL_HALF[np.isfinite(ALL_HALF)]


def test_half_to_single_is_exact_for_every_float16():
    got = convert(FINITE_HALF.reshape(1, -1), np.float32)
    expected = FINITE_HALF.astype(np.float32).reshape(1, -1)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))  # -0.0 too


def test_single_to_half_rounds_as_numpy_does_ties_and_subnormals_included():
    singles = FINITE_HALF.astype(np.float32)
    ties = (singles[:-1] + singles[1:]) / 2  # halfway between neighbours: round to even
    noise = np.random.default_rng(0).random(1 << 16, dtype=np.float32)
    values = np.concatenate([singles, ties[np.isfinite(ties)], noise]).reshape(1, -1)
    got = convert(values, np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16), values.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("shape", [(8, 8), (8, 8, 1), (8, 8, 3), (8, 8, 7)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_keeps_shape_and_values_for_any_layout(shape, order):
    half = np.asarray(np.random.default_rng(1).random(shape), np.float16, order=order)
    single = convert(half, np.float32)
    assert single.shape == shape and single.dtype == np.float32
    np.testing.assert_array_equal(single, half.astype(np.float32))
    assert convert(single, np.float16).shape == shape


def test_glyph_pipeline_on_float16_equals_running_it_on_float32_and_rounding():
    img = np.random.default_rng(2).random((64, 64, 1)).astype(np.float16)
    pipe = shmaug.presets.glyph_distort().with_value_range((0.0, 1.0))
    out = pipe(img, np.random.default_rng(3))
    wide = pipe(img.astype(np.float32), np.random.default_rng(3))
    assert out.dtype == np.float16 and out.shape == img.shape
    np.testing.assert_array_equal(out, wide.astype(np.float16))
