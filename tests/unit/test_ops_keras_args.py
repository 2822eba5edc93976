"""Arguments of the built-in ops: refused when the op is built; Keras' factor meaning.

A bad value must fail in ``Op(...)`` (so in the main process, when the pipeline is built),
naming the argument, and never first in a worker that happens to take that branch. Every
parameter of every built-in op has a check (``test_every_parameter_is_checked_at_build``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shmaug import ops
from shmaug.ops import core
from shmaug.errors import ArgumentError, ArgumentTypeError
from shmaug.ops.params import keras_factor

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("hue", {"factor": 1.5}, "factor"),
    ("saturation", {"factor": (0.6, 0.2)}, "factor"),
    ("color_jitter", {"brightness_factor": 2.0}, "brightness_factor"),
    ("color_jitter", {"contrast_factor": "high"}, "contrast_factor"),
    ("color_jitter", {"order": "torch"}, "order"),
    ("grayscale", {"factor": -0.1}, "factor"),
    ("color_degeneration", {"value_range": (255, 0)}, "value_range"),
    ("invert", {"factor": 3}, "factor"),
    ("solarize", {"threshold_factor": 1.2}, "threshold_factor"),
    ("posterize", {"factor": 9}, "factor"),
    ("posterize", {"factor": (2.5, 4)}, "factor"),
    ("equalize", {"bins": 1}, "bins"),
    ("clahe", {"tile_grid_size": (0, 8)}, "tile_grid_size"),
    ("clahe", {"clip_limit": -1.0}, "clip_limit"),
    ("zoom", {"height_factor": (-1.5, 0.0)}, "height_factor"),
    ("zoom", {"border": "mirror"}, "border"),
    ("zoom_out", {"side_range": (0.5, 2.0)}, "side_range"),
    ("translation", {"width_factor": 1.5}, "width_factor"),
    ("translation", {"interpolation": "bilinear"}, "interpolation"),
    ("erasing", {"scale": (0.2, 1.5)}, "scale"),
    ("erasing", {"fill_value": 2.0}, "fill_value"),
    ("jpeg", {"quality": (0, 90)}, "quality"),
    ("rand_augment", {"num_ops": -1}, "num_ops"),
    ("aug_mix", {"severity": 11}, "severity"),
    ("auto_augment", {"policy": "cifar10"}, "policy"),
    ("rotate", {"degrees": "ten"}, "degrees"),
    ("perspective", {"scale": 1.5}, "scale"),
    ("elastic", {"backend": "pil"}, "backend"),
    ("cutout", {"holes": 1.5}, "holes"),
    ("resize", {"interpolation": "lanczos"}, "interpolation"),
    ("crop", {"height": 0}, "height"),
    ("gamma", {"gamma": 0}, "gamma"),
]


@pytest.mark.parametrize(("name", "params", "arg"), BAD,
                         ids=[f"{n}-{a}" for n, _, a in BAD])
def test_a_bad_argument_is_refused_when_the_op_is_built(name: str, params: dict[str, Any],
                                                         arg: str) -> None:
    with pytest.raises((ArgumentError, ArgumentTypeError), match=f"`{arg}`"):
        ops.Op(name, **params)


def test_a_bad_argument_in_a_branch_sample_0_skips_fails_at_build() -> None:
    with pytest.raises(ArgumentError, match="`factor`"):
        ops.OneOf([ops.Op("hflip"), ops.Op("hue", factor=2.0)])


@pytest.mark.parametrize(("value", "lo", "expected"), [
    (0.2, -1.0, (-0.2, 0.2)),  # RandomZoom, RandomTranslation, RandomBrightness
    (0.3, 0.0, (0.0, 0.3)),  # RandomHue, RandomInvert, RandomErasing
    ((0.1, 0.4), 0.0, (0.1, 0.4)),
    (0.0, -1.0, (0.0, 0.0)),
])
def test_a_lone_factor_means_what_keras_makes_of_it(value: Any, lo: float,
                                                    expected: tuple[float, float]) -> None:
    assert keras_factor(value, "factor", lo, 1.0) == pytest.approx(expected)


def test_good_defaults_build_and_run_on_every_new_op() -> None:
    image = np.zeros((16, 16, 3), np.uint8)
    for name in ("hue", "saturation", "color_jitter", "grayscale", "color_degeneration",
                 "invert", "solarize", "posterize", "equalize", "auto_contrast", "clahe",
                 "channel_shuffle", "zoom", "zoom_out", "center_crop", "translation",
                 "erasing", "jpeg"):
        assert ops.Op(name)(image, np.random.default_rng(0)).dtype == np.uint8


def test_every_parameter_is_checked_at_build() -> None:
    unchecked = {name: sorted(set(spec.params) - set(spec.checks))
                 for name, spec in core._REGISTRY.items() if spec.module.startswith("shmaug.")}
    assert not {name: params for name, params in unchecked.items() if params}


@pytest.mark.parametrize("name, params, says", [
    ("zoom", {"height_factor": (0.8, 1.2)}, r"negative zooms in.*zoom_range=\(0.8, 1.2\) is "
                                            r"height_factor=\(-0.2, 0.2\)"),
    ("zoom", {"height_factor": 1.5}, r"negative zooms in"),
    ("rotate", {"fill": 128}, r"fraction of the value range, not a pixel value.*fill=0.5"),
    # torchvision's saturation gain was told "e.g. (0.9, 1.0)", a strong saturation
    ("color_jitter", {"saturation_factor": (0.9, 1.1)}, r"0.5 keeps the saturation.*about "
                                                        r"\(0.47, 0.52\)"),
    ("saturation", {"factor": 1.1}, r"RandomSaturation factor f")])
def test_a_refused_value_is_told_what_the_parameter_means(name, params, says) -> None:
    """ImageDataGenerator's zoom_range=(0.8, 1.2) was told to pass (0.8, 1.0), a 1.8x zoom
    out, and cval=128 to pass fill=1.0 (white), without saying what either means."""
    with pytest.raises(ArgumentError, match=says):
        ops.Op(name, **params)
