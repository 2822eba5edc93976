"""A mask, boxes or keypoints in ``y`` with a shmaug pipeline that moves pixels is refused
before anything starts (shmaug's own ops move no targets: they would come back misaligned,
silently); a pipeline that moves no pixel keeps them, and every built-in op is classed."""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from shmaug.engine.config.inputs import MOVING_OPS
from shmaug.ops import Compose, Maybe, OneOf, Op, available

# The built-in ops that leave every pixel where it was (colour, noise, blur, erasing).
STILL = frozenset({
    "auto_contrast", "brightness_contrast", "channel_shuffle", "clahe", "color_degeneration",
    "color_jitter", "cutout", "equalize", "erasing", "gamma", "gaussian_blur",
    "gaussian_noise", "grayscale", "hue", "invert", "jpeg", "posterize", "saturation",
    "sharpen", "smooth", "solarize"})

x = np.zeros((8, 16, 16), np.uint8)


def test_every_built_in_op_is_classed_as_moving_pixels_or_not() -> None:
    builtin = {name for name in available() if not name.startswith("test_")}
    assert builtin == MOVING_OPS | STILL, builtin ^ (MOVING_OPS | STILL)
    assert not MOVING_OPS & STILL


@pytest.mark.parametrize("y", [
    {"mask": np.zeros((8, 16, 16), np.uint8)},
    [np.arange(8), {"bboxes": np.full((8, 2, 4), -1.0)}],
])
def test_a_spatial_target_with_a_moving_pipeline_is_refused(y) -> None:
    augment = Compose([Op("gamma"), OneOf([Op("hflip"), Maybe(Op("rotate"))])])
    with pytest.raises(shmaug.ArgumentError, match=r"hflip, rotate.*from_albumentations"):
        shmaug.Loader(x, y, augment=augment, workers=0)


def test_a_pipeline_that_moves_no_pixel_keeps_its_mask() -> None:
    mask = np.arange(8 * 16 * 16, dtype=np.uint16).reshape(8, 16, 16)
    with shmaug.Loader(x, {"mask": mask}, batch_size=4, workers=0,
                       augment=Compose([Op("gamma"), Op("gaussian_noise")])) as loader:
        np.testing.assert_array_equal(loader.batch(0)[1]["mask"], mask[:4])


def test_an_albumentations_pipeline_inside_a_container_with_a_mask_is_refused() -> None:
    """Only a whole `augment` gets the targets: one inside a Compose would get the image
    alone, and flip it away from its mask."""
    A = pytest.importorskip("albumentations")
    inner = shmaug.from_albumentations(A.Compose([A.HorizontalFlip(p=1.0)]))
    with pytest.raises(shmaug.ArgumentError, match=r"inside a Compose.*as `augment` itself"):
        shmaug.Loader(x, {"mask": np.zeros((8, 16, 16), np.uint8)},
                      augment=Compose([Op("gamma"), inner]), workers=0)
