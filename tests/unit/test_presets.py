"""The presets: structure, output shape and dtype, determinism, pickling, config, bad arguments."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, OneOf, Op
from shmaug.sources.glyphs import render_glyphs

P = shmaug.presets
# (name, builder, what it does to the size: None keeps it, else the (height, width) it gives)
CASES: list[tuple[str, Callable[[], Compose], tuple[int, int] | None]] = [
    ("imagenet_train", lambda: P.imagenet_train(), (224, 224)),
    ("imagenet_train_small", lambda: P.imagenet_train(size=(40, 32)), (40, 32)),
    ("light", lambda: P.light(), None),
    ("light_sized", lambda: P.light(48), (48, 48)),
    ("glyph_distort", lambda: P.glyph_distort(), None),
    ("text_line", lambda: P.text_line(), None),
]
IDS = [c[0] for c in CASES]
SHAPES = [(64, 64), (48, 80, 1), (96, 72, 3), (300, 400, 3)]


def _image(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray:
    """A textured image (noise over a gradient), so that every op visibly changes it."""
    rng = np.random.default_rng(seed)
    h, w = shape[:2]
    base = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.3, w))
    pixels = np.clip(base.reshape(shape[:2] + (1,) * (len(shape) - 2))
                     + 0.1 * rng.random(shape), 0, 1)
    return (pixels * 255).astype(np.uint8) if dtype == np.uint8 else pixels.astype(dtype)


def _out_shape(shape: tuple[int, ...], size: tuple[int, int] | None) -> tuple[int, ...]:
    return shape if size is None else size + shape[2:]


@pytest.mark.parametrize("name, build, size", CASES, ids=IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float16], ids=lambda d: d.__name__)
def test_documented_shape_dtype_and_range(name, build, size, shape, dtype) -> None:
    aug = build()
    x = _image(shape, dtype)
    out = aug(x, np.random.default_rng(0))
    assert out.shape == _out_shape(shape, size) and out.dtype == dtype
    if dtype != np.uint8:
        assert 0.0 <= float(out.min()) and float(out.max()) <= 1.0
    assert not np.shares_memory(out, x) or size is None  # a new array where the size changes


@pytest.mark.parametrize("name, build, size", CASES, ids=IDS)
def test_deterministic_per_seed_and_different_across_seeds(name, build, size) -> None:
    aug, x = build(), _image((96, 72, 3), np.uint8)
    again = [aug(x, np.random.default_rng(seed)) for seed in range(6)]
    for seed, out in enumerate(again):
        np.testing.assert_array_equal(aug(x, np.random.default_rng(seed)), out)
    distinct = {out.tobytes() for out in again}
    assert len(distinct) == len(again), f"{name}: some seeds gave the same output"
    assert aug.uses_global_rng is False  # the workers need not seed the global RNGs


@pytest.mark.parametrize("name, build, size", CASES, ids=IDS)
def test_pickles_and_round_trips_through_its_config(name, build, size) -> None:
    aug, x = build(), _image((64, 80, 3), np.float32)
    for copy in (pickle.loads(pickle.dumps(aug)),
                 shmaug.from_config(json.loads(json.dumps(aug.to_config())))):
        assert copy == aug
        np.testing.assert_array_equal(copy(x, np.random.default_rng(5)),
                                      aug(x, np.random.default_rng(5)))
    shmaug.ops.check_picklable(aug)


def _names(aug: Compose) -> list[str]:
    return [op.name if isinstance(op, Op) else f"Maybe({op.op.name})" for op in aug.ops]


def test_imagenet_train_is_the_documented_recipe() -> None:
    aug = P.imagenet_train()
    assert _names(aug) == ["random_resized_crop", "Maybe(hflip)", "brightness_contrast",
                           "saturation"]
    crop, flip, jitter, saturation = aug.ops
    assert dict(crop.params) == {"height": 224, "width": 224, "scale": (0.08, 1.0),
                                 "ratio": (0.75, 4 / 3)}
    assert aug.takes_undecoded  # a source with image_size=None hands it JPEGs undecoded
    assert isinstance(flip, Maybe) and flip.p == 0.5
    assert dict(jitter.params) == {"brightness": (0.6, 1.4), "contrast": (0.6, 1.4)}
    lo, hi = dict(saturation.params)["factor"]  # Keras' f: saturation times f / (1 - f)
    assert (lo / (1 - lo), hi / (1 - hi)) == pytest.approx((0.6, 1.4))
    hue = P.imagenet_train(hue=0.1).ops[-1]
    assert hue.name == "hue" and dict(hue.params) == {"factor": 0.2}  # half-turns, Keras'
    assert _names(P.imagenet_train(None, saturation=0)) == [
        "resized_crop", "Maybe(hflip)", "brightness_contrast"]


def test_light_is_milder_and_keeps_the_size_unless_asked() -> None:
    aug = P.light()
    assert _names(aug) == ["resized_crop", "Maybe(hflip)", "brightness_contrast"]
    assert dict(aug.ops[0].params)["scale"] == (0.8, 1.0)
    assert dict(aug.ops[2].params) == {"brightness": (0.9, 1.1), "contrast": (0.9, 1.1)}
    assert _names(P.light(64))[1] == "resize"


def test_switches_leave_their_op_out_and_keras_names_are_taken() -> None:
    plain = P.imagenet_train(None, horizontal_flip=False, brightness=0, contrast=0,
                             saturation=0)
    assert _names(plain) == ["resized_crop"]
    only = P.light(brightness=0.2, contrast=0)
    assert dict(only.ops[-1].params) == {"brightness": (0.8, 1.2), "contrast": 1.0}
    assert P.imagenet_train(interpolation="bilinear") == P.imagenet_train()
    assert dict(P.light(interpolation="bicubic").ops[0].params)["interpolation"] == "cubic"
    assert dict(P.imagenet_train(interpolation="cubic").ops[0].params)["interpolation"] == \
        "bicubic"


def test_a_sized_preset_sizes_a_loader_batch_and_is_the_same_for_a_seed() -> None:
    x = np.stack([_image((60, 50, 3), np.uint8, seed) for seed in range(8)])
    outs = []
    for _ in range(2):
        with shmaug.Loader(x, None, batch_size=4, augment=P.imagenet_train(32), workers=0,
                           seed=1) as loader:
            outs.append(np.concatenate([np.asarray(b[0] if isinstance(b, tuple) else b)
                                        for b in loader]))
    assert outs[0].shape == (8, 32, 32, 3) and outs[0].dtype == np.uint8
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("backend", ["cv", "pil"])
def test_glyph_distort_structure_and_output(backend: str) -> None:
    aug = P.glyph_distort(backend=backend)
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


def test_glyph_distort_keeps_its_config() -> None:
    # Stored configs of runs made with it must rebuild the same pipeline.
    assert P.glyph_distort(fill=1) == P.glyph_distort(fill=1.0)
    ops = P.glyph_distort().to_config()["ops"][0]["ops"]
    assert ops[1] == {"type": "Op", "name": "rotate",
                      "params": {"degrees": [-15.0, 15.0], "fill": 0.0}}


def _lines(n: int, height: int = 32, width: int = 256) -> np.ndarray:
    """Rendered lines of 3 to 16 random characters, black on white, 4 pixels from the left
    and the top edges (as a line detector crops them)."""
    from PIL import Image, ImageDraw, ImageFont

    font, rng = ImageFont.load_default(size=20), np.random.default_rng(0)
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789")
    lines = []
    for _ in range(n):
        img = Image.new("L", (width, height), 255)
        text = "".join(rng.choice(letters, int(rng.integers(3, 17))))
        ImageDraw.Draw(img).text((4, 4), text, fill=0, font=font)
        lines.append(np.asarray(img))
    return np.stack(lines)


def _ink_kept(op: Any, lines: np.ndarray) -> np.ndarray:
    """Each line's ink after ``op``, as a fraction of its ink before."""
    ink = lambda a: (255 - a.astype(np.int64)).sum(axis=(-2, -1))  # noqa: E731
    out = np.stack([op(line, np.random.default_rng(i)) for i, line in enumerate(lines)])
    return ink(out) / ink(lines)


def test_text_line_keeps_every_word_of_a_line_and_fills_white() -> None:
    # A distortion that carries words out of the line leaves a label that reads them.
    lines = _lines(120)
    text, glyph = P.text_line().ops[0].ops, P.glyph_distort(fill=1.0).ops[0].ops
    for op in text:  # scale_translate shrinks the ink to as little as 0.8 ** 2 of its area
        least = 0.8 ** 2 * 0.97 if op.name == "scale_translate" else 0.97  # type: ignore[attr-defined]
        assert _ink_kept(op, lines).min() >= least, op
        blank = np.full((32, 256), 255, np.uint8)  # no black corners or edges on white paper
        assert min(int(op(blank, np.random.default_rng(i)).min()) for i in range(20)) == 255
    # the same check fails for a glyph's ranges: its rotation cuts words off a line
    assert (_ink_kept(glyph[1], lines) < 0.85).mean() > 0.2
    whole = np.stack([P.text_line()(line, np.random.default_rng(i)) for i, line in enumerate(lines)])
    assert whole.shape == lines.shape and whole.dtype == np.uint8


@pytest.mark.parametrize("build", [P.glyph_distort, P.text_line])
def test_the_sine_warp_fills_rather_than_wraps_ink_to_the_far_edge(build) -> None:
    # A line cropped tight, its ascenders in the top rows: a wrapped warp draws them under the
    # descenders.
    line = np.full((32, 256), 255, np.uint8)
    line[:3, 20:230] = 0
    warp = build(fill=1.0).ops[0].ops[0]
    assert warp.name == "sine_warp"
    for i in range(30):
        assert warp(line, np.random.default_rng(i))[-6:].min() == 255


BAD: list[tuple[Callable[..., Compose], dict[str, Any], type[Exception], str]] = [
    (P.imagenet_train, {"size": 0}, shmaug.ArgumentError, r"`size` of `imagenet_train` expects pixels >= 1; received 0"),
    (P.imagenet_train, {"size": (224, -1)}, shmaug.ArgumentError, r"`size`.*>= 1"),
    (P.imagenet_train, {"size": 224.0}, shmaug.ArgumentTypeError, r"`size`.*\(height, width\).*224\.0 \(float\)"),
    (P.imagenet_train, {"size": (224,)}, shmaug.ArgumentTypeError, r"`size`"),
    (P.light, {"size": True}, shmaug.ArgumentTypeError, r"`size` of `light`.*True \(bool\)"),
    (P.imagenet_train, {"scale": (0, 1)}, shmaug.ArgumentError, r"`scale`.*0 < low <= high <= 1"),
    (P.imagenet_train, {"scale": (0.9, 0.2)}, shmaug.ArgumentError, r"`scale`.*\(0\.9, 0\.2\)"),
    (P.light, {"scale": (0.5, 1.5)}, shmaug.ArgumentError, r"`scale` of `light`"),
    (P.imagenet_train, {"scale": 0.5}, shmaug.ArgumentTypeError, r"`scale`.*\(low, high\).*0\.5 \(float\)"),
    (P.imagenet_train, {"ratio": (0, 1)}, shmaug.ArgumentError, r"`ratio`.*0 < low <= high;"),
    (P.light, {"ratio": "wide"}, shmaug.ArgumentTypeError, r"`ratio`.*'wide' \(str\)"),
    (P.imagenet_train, {"horizontal_flip": "yes"}, shmaug.ArgumentTypeError, r"`horizontal_flip`.*True or False"),
    (P.imagenet_train, {"brightness": -0.1}, shmaug.ArgumentError, r"`brightness`.*\[0, 1\]; received -0\.1"),
    (P.light, {"brightness": 1.5}, shmaug.ArgumentError, r"`brightness` of `light`"),
    (P.imagenet_train, {"contrast": (0.6, 1.4)}, shmaug.ArgumentTypeError, r"`contrast`.*\(tuple\)"),
    (P.imagenet_train, {"contrast": float("nan")}, shmaug.ArgumentTypeError, r"`contrast`.*nan"),
    (P.imagenet_train, {"interpolation": "area"}, shmaug.ArgumentError, r"`interpolation`.*'area' \(str\)"),
    (P.imagenet_train, {"saturation": 1.5}, shmaug.ArgumentError, r"`saturation`.*\[0, 1\]; received 1\.5"),
    (P.imagenet_train, {"hue": 0.6}, shmaug.ArgumentError, r"`hue`.*\[0, 0\.5\]; received 0\.6"),
    (P.light, {"interpolation": ["linear"]}, shmaug.ArgumentError, r"`interpolation`.*\(list\)"),
    (P.glyph_distort, {"fill": 2}, shmaug.ArgumentError, r"`fill` of `glyph_distort`.*\[0, 1\]; received 2"),
    (P.glyph_distort, {"fill": "white"}, shmaug.ArgumentTypeError, r"`fill`.*'white' \(str\)"),
    (P.glyph_distort, {"backend": "skimage"}, shmaug.ArgumentError, r"`backend`"),
    (P.text_line, {"fill": -0.5}, shmaug.ArgumentError, r"`fill` of `text_line`.*\[0, 1\]; received -0\.5"),
]


@pytest.mark.parametrize("build, kwargs, error, match", BAD,
                         ids=[f"{b.__name__}-{k}" for b, k, _, _ in BAD])
def test_bad_arguments_are_refused_at_construction(build, kwargs, error, match) -> None:
    with pytest.raises(error, match=match) as info:
        build(**kwargs)
    message = str(info.value)
    if build is not P.glyph_distort or "fill" in kwargs:  # (backend: `choice`'s message)
        assert "received" in message and "Fix: " in message


def test_size_is_positional_and_the_rest_keyword_only() -> None:
    assert P.imagenet_train(128) == P.imagenet_train(size=(128, 128))
    with pytest.raises(TypeError):
        P.light(64, (0.5, 1.0))  # type: ignore[misc]
