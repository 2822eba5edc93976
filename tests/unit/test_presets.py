"""The glyph_distort preset: structure, picklability, config, output."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import shmaug
from shmaug.sources.glyphs import render_glyphs
from shmaug.ops import Compose, OneOf, Op


@pytest.mark.parametrize("backend", ["cv", "pil"])
def test_glyph_distort_structure_and_output(backend: str) -> None:
    aug = shmaug.presets.glyph_distort(backend=backend)
    assert isinstance(aug, Compose) and len(aug.ops) == 2
    geometric, filters = aug.ops
    assert isinstance(geometric, OneOf) and isinstance(filters, OneOf)
    assert [op.name for op in geometric.ops] == ["sine_warp", "rotate", "shear", "scale_translate"]  # type: ignore[attr-defined]
    assert [op.name for op in filters.ops] == ["gaussian_blur", "sharpen", "smooth"]  # type: ignore[attr-defined]
    assert all(isinstance(op, Op) for op in (*geometric.ops, *filters.ops))
    x, _, _ = render_glyphs(8, 64, seed=0)
    rng = np.random.default_rng(0)
    outs = [aug(img, rng) for img in x]
    assert all(o.shape == (64, 64) and o.dtype == np.uint8 for o in outs)
    assert sum(not np.array_equal(o, i) for o, i in zip(outs, x)) >= 7


def test_glyph_distort_pickles_and_round_trips() -> None:
    aug = shmaug.presets.glyph_distort()
    assert pickle.loads(pickle.dumps(aug)) == aug
    assert shmaug.from_config(json.loads(json.dumps(aug.to_config()))) == aug
    assert aug.uses_global_rng is False


def test_glyph_distort_rejects_unknown_backend() -> None:
    with pytest.raises(shmaug.ArgumentError, match="`backend`"):
        shmaug.presets.glyph_distort(backend="skimage")
