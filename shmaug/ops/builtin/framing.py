"""Built-in framing ops, Keras' and torchvision's: ``zoom``, ``zoom_out``, ``center_crop`` and
``translation``.

Owns the ops that change what part of the scene fills the frame, by the argument names of
the Keras 3 layer each mirrors (``RandomZoom``, ``CenterCrop``, ``RandomTranslation``;
torchvision's ``RandomZoomOut``). ``*_factor`` parameters carry Keras' meaning whole, a lone
number f being the range ``(-f, f)``; the border and its fill follow shmaug's geometric ops
(``border``, ``fill`` as a fraction of the value range, ``interpolation`` "linear" for Keras'
"bilinear"). The warp itself is ``warp.warp`` over ``kernels/cv.py``. Keras' random crop
is ``crop`` in ``geometric.py``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..params import Range, ValueRange, check_image, draw, keras_factor
from . import checks as chk
from ..core import WARPED, register
from .warp import affine, cut, warp

_ZOOM = partial(keras_factor, lo=-1.0 + 1e-6, hi=1.0,  # Keras: in (-1, 1]; 1 + z > 0
                means="A factor z shows 1 + z times the image's side, as Keras' RandomZoom: "
                      "negative zooms in, positive out (ImageDataGenerator's zoom_range="
                      "(0.8, 1.2) is height_factor=(-0.2, 0.2)).")
@register("zoom", checks={"height_factor": _ZOOM, "width_factor": chk.optional(_ZOOM),
                          **chk.WARP}, targets=WARPED)
def zoom(
    image: np.ndarray, rng: np.random.Generator, height_factor: Range = 0.2,
    width_factor: Range | None = None, border: str = "reflect", fill: float = 0.0,
    interpolation: str = "linear", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Zoom about the centre (Keras' RandomZoom): a factor z drawn in ``height_factor``
    shows ``1 + z`` times the height (negative: zoom in, positive: zoom out);
    ``width_factor`` None keeps the aspect.

    Example:
        >>> out = zoom(np.zeros((32, 32), np.uint8), np.random.default_rng(0), (-0.3, 0.0))
    """
    zy = 1.0 + draw(rng, _ZOOM(height_factor, "height_factor"), "height_factor")
    zx = zy if width_factor is None else 1.0 + draw(
        rng, _ZOOM(width_factor, "width_factor"), "width_factor")
    h, w = check_image(image).shape[:2]
    # Keras maps output to input: x_in = z x_out + c (1 - z), c the centre; this is its inverse.
    cx, cy = (w - 1) / 2, (h - 1) / 2
    m = affine(1 / zx, 0.0, cx * (1 - 1 / zx), 0.0, 1 / zy, cy * (1 - 1 / zy))
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend="cv", op="zoom", value_range=value_range)


@register("zoom_out", checks={"side_range": chk.ranged(1.0),
                             **{n: v for n, v in chk.WARP.items() if n != "border"}},
          targets=WARPED)
def zoom_out(
    image: np.ndarray, rng: np.random.Generator, side_range: Range = (1.0, 4.0),
    fill: float = 0.0, interpolation: str = "linear", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Place the image on a ``fill`` canvas r times its size (r drawn in ``side_range``) at a
    random position, and scale that canvas back to the input's size (torchvision's
    RandomZoomOut, which keeps the canvas' size instead).

    Example:
        >>> out = zoom_out(np.zeros((32, 32), np.uint8), np.random.default_rng(0))
    """
    r = draw(rng, side_range, "side_range", 1.0)
    h, w = check_image(image).shape[:2]
    left = int((int(w * r) - w) * rng.random())
    top = int((int(h * r) - h) * rng.random())
    # pixel (x, y) of the input sits at (x + left, y + top) on the canvas, which shrinks by r
    m = affine(1 / r, 0.0, (0.5 + left) / r - 0.5, 0.0, 1 / r, (0.5 + top) / r - 0.5)
    return warp(image, m, border="constant", fill=fill, interpolation=interpolation,
                backend="cv", op="zoom_out", value_range=value_range)


@register("center_crop", targets=WARPED, checks={"height": chk.size, "width": chk.size})
def center_crop(
    image: np.ndarray, rng: np.random.Generator, height: float = 0.875, width: float = 0.875,
) -> np.ndarray:
    """Cut the central ``height`` x ``width`` window (Keras' CenterCrop, for a window no
    larger than the image): this op changes the shape. An int is pixels, a float in (0, 1]
    a fraction of the input's size.

    Example:
        >>> center_crop(np.zeros((64, 64), np.uint8), np.random.default_rng(0), 56, 48).shape
        (56, 48)
    """
    return cut(image, height, width, "center_crop", lambda rows, cols: (rows // 2, cols // 2))


@register("translation", checks={"height_factor": keras_factor, "width_factor": keras_factor,
                                 **chk.WARP}, targets=WARPED)
def translation(
    image: np.ndarray, rng: np.random.Generator, height_factor: Range = 0.1,
    width_factor: Range = 0.1, border: str = "reflect", fill: float = 0.0,
    interpolation: str = "linear", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Move by a fraction of the size drawn in each factor (Keras' RandomTranslation:
    ``height_factor=0.2`` moves up or down by up to 20%; positive is down / right).

    Example:
        >>> out = translation(np.zeros((32, 32), np.uint8), np.random.default_rng(0))
    """
    dy = draw(rng, keras_factor(height_factor, "height_factor"), "height_factor")
    dx = draw(rng, keras_factor(width_factor, "width_factor"), "width_factor")
    h, w = check_image(image).shape[:2]
    m = affine(1.0, 0.0, dx * w, 0.0, 1.0, dy * h)
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend="cv", op="translation", value_range=value_range)
