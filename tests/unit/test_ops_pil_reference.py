"""Ops whose reference is not a Keras layer, against that reference (no Keras needed).

``jpeg`` against PIL's encoder at the same quality (both libjpeg, 4:2:0 chroma) and
``zoom_out`` against torchvision's RandomZoomOut written out in numpy (the canvas, then
shmaug's resize back to the input's size).
"""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from shmaug import ops
from tests.unit.test_ops import make_photo


@pytest.mark.parametrize("quality", [30, 90])
@pytest.mark.parametrize("gray", [False, True])
def test_jpeg_equals_pil_at_the_same_quality(quality: int, gray: bool) -> None:
    image = make_photo()[:, :, 0] if gray else make_photo()
    ours = ops.jpeg(image, np.random.default_rng(0), quality=quality)
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "JPEG", quality=quality)
    np.testing.assert_array_equal(ours, np.asarray(Image.open(buf)))


@pytest.mark.parametrize("r", [1.5, 2.0])
def test_zoom_out_is_torchvisions_canvas_scaled_back(r: float) -> None:
    image = make_photo()
    h, w = image.shape[:2]
    ours = ops.zoom_out(image, np.random.default_rng(4), side_range=(r, r), fill=0.5)
    # torchvision's RandomZoomOut: the canvas is int(r * size), the image at a random offset
    draws = np.random.default_rng(4)
    left, top = int((int(w * r) - w) * draws.random()), int((int(h * r) - h) * draws.random())
    canvas = np.full((int(h * r), int(w * r), 3), 127.5, np.float32)
    canvas[top : top + h, left : left + w] = image
    theirs = cv2.resize(canvas, (w, h), interpolation=cv2.INTER_LINEAR)
    diff = np.abs(ours - theirs)
    # a warp's 5-bit bilinear weights against resize's 11-bit ones, and 127.5 rounded
    assert diff.max() <= 3.0 and diff.mean() <= 0.6, (diff.max(), diff.mean())
