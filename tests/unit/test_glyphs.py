"""The synthetic glyph renderer: shapes, determinism, labels, errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

from shmaug import errors
from shmaug.sources.glyphs import find_cjk_font, render_glyphs


def test_shapes_dtypes_and_names() -> None:
    x, y, names = render_glyphs(50, 32, classes=10, seed=1)
    assert x.shape == (50, 32, 32) and x.dtype == np.uint8
    assert y.shape == (50,) and y.dtype == np.int64
    assert len(names) == 10 and len(set(names)) == 10
    assert y.min() >= 0 and y.max() < 10


def test_white_ink_on_black_and_every_sample_has_ink() -> None:
    x, _, _ = render_glyphs(200, 64, seed=0)
    assert x.reshape(200, -1).max(axis=1).min() >= 200  # every sample has bright ink
    corners = np.concatenate([x[:, 0, 0], x[:, -1, -1], x[:, 0, -1], x[:, -1, 0]])
    assert np.median(corners) == 0  # background is black


def test_same_seed_same_data_other_seed_other_data() -> None:
    a = render_glyphs(64, 32, seed=5)
    b = render_glyphs(64, 32, seed=5)
    c = render_glyphs(64, 32, seed=6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_labels_are_balanced_and_match_the_drawn_class() -> None:
    x, y, names = render_glyphs(1000, 32, classes=7, seed=2)
    counts = np.bincount(y, minlength=7)
    assert counts.max() - counts.min() <= 1
    # Same class, same size variant -> same stamp: images of a class look alike (high overlap).
    mean = [x[y == k].astype(np.float32).mean(axis=0) for k in range(7)]
    assert all(not np.allclose(mean[i], mean[j]) for i in range(7) for j in range(i + 1, 7))


def test_classes_as_characters() -> None:
    x, y, names = render_glyphs(20, 24, classes="AB", seed=0)
    assert names == ["A", "B"] and set(y.tolist()) == {0, 1}


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        ({"n": -1}, errors.ArgumentError),
        ({"n": 4, "size": 4}, errors.ArgumentError),
        ({"n": 4, "classes": 0}, errors.ArgumentError),
        ({"n": 4, "classes": 10_000}, errors.ArgumentError),
        ({"n": 4, "classes": "AA"}, errors.ArgumentError),
        ({"n": 4, "classes": 2.5}, errors.ArgumentTypeError),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], err: type[Exception]) -> None:
    with pytest.raises(err):
        render_glyphs(**kwargs)  # type: ignore[arg-type]


def test_find_cjk_font_is_none_or_a_file() -> None:
    path = find_cjk_font()
    assert path is None or os.path.isfile(path)
