"""PIL kernels: the same pure kernels as ``cv.py``, for users who want PIL's exact look.

Owns the ``backend="pil"`` pixel work. Like ``cv.py`` it draws nothing and validates nothing.
PIL has no multi-channel float or 16-bit mode, so any image that is not uint8 is quantized to
8 bits over its value range (``Levels``) around the PIL call and scaled back (a loss of
precision the OpenCV backend does not have). Grayscale runs
as mode "L", three channels as "RGB", any other channel count one "L" band at a time.

Geometric kernels accept the same OpenCV-convention 3x3 matrix as ``cv.py`` and convert it to
PIL's inverse mapping (PIL puts pixel centres at +0.5), so both backends agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

from ...resample import pil_filter
from ...errors import ArgumentError
from ..params import Levels

RESAMPLE = {name: getattr(Image.Resampling, pil_filter(name))
            for name in ("nearest", "linear", "cubic", "area")}
_HALF = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]])
_MINUS_HALF = np.array([[1, 0, -0.5], [0, 1, -0.5], [0, 0, 1]])


def to_u8(img: np.ndarray, scale: Levels) -> np.ndarray:
    """``img`` as 8-bit levels of its range (uint8 data passes through)."""
    if img.dtype == np.uint8:
        return img
    unit: np.ndarray = ((img.astype(np.float32) - np.float32(scale.lo))
                        * np.float32(255.0 / scale.span))
    out: np.ndarray = np.clip(np.rint(unit), 0, 255).astype(np.uint8)
    return out


def from_u8(out: np.ndarray, like: np.dtype, scale: Levels) -> np.ndarray:
    """Undo :func:`to_u8`: 8-bit levels back to ``like``'s dtype and range."""
    if like == np.uint8:
        return out if out.flags.writeable else out.copy()
    back = out.astype(np.float32) * np.float32(scale.span / 255.0) + np.float32(scale.lo)
    return (np.rint(back) if like.kind in "ui" else back).astype(like)


def apply(img: np.ndarray, fn: Callable[[Image.Image], Image.Image], scale: Levels) -> np.ndarray:
    """Run ``fn`` on ``img`` as PIL image(s) and return an array of ``img``'s dtype."""
    u8 = to_u8(img, scale)
    if u8.ndim == 2 or u8.shape[2] == 3:
        out = np.asarray(fn(Image.fromarray(u8)))
    else:
        bands = [np.asarray(fn(Image.fromarray(np.ascontiguousarray(u8[:, :, c]))))
                 for c in range(u8.shape[2])]
        out = np.stack(bands, axis=2)
    return from_u8(out, img.dtype, scale)


def fill_color(img: np.ndarray, fill: float) -> int | tuple[int, ...]:
    """PIL ``fillcolor`` for ``fill`` (a fraction of full scale)."""
    v = int(round(fill * 255))
    return (v, v, v) if img.ndim == 3 and img.shape[2] == 3 else v


def pil_coefficients(matrix: np.ndarray) -> tuple[Image.Transform, tuple[float, ...]]:
    """PIL transform method and data for an OpenCV-convention forward 3x3 matrix."""
    inv = _HALF @ np.linalg.inv(matrix) @ _MINUS_HALF
    inv = inv / inv[2, 2]
    if abs(inv[2, 0]) < 1e-12 and abs(inv[2, 1]) < 1e-12:
        return Image.Transform.AFFINE, tuple(float(v) for v in inv[:2].ravel())
    return Image.Transform.PERSPECTIVE, tuple(float(v) for v in inv.ravel()[:8])


def warp(img: np.ndarray, matrix: np.ndarray, size: tuple[int, int], *, resample: str,
         fill: float, scale: Levels) -> np.ndarray:
    """``Image.transform`` by a forward 3x3 matrix to ``size``, the output's (height, width)
    (PIL takes (width, height)); constant border only."""
    method, data = pil_coefficients(matrix)
    color = fill_color(img, fill)
    return apply(
        img,
        lambda im: im.transform((size[1], size[0]), method, data, resample=RESAMPLE[resample],
                                fillcolor=color),
        scale,
    )


def roll_columns(img: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """The classic sine warp: ``np.roll`` each column by its whole-pixel shift (a Python loop).

    This is what PIL users write (PIL has no per-pixel remap); the OpenCV backend does the same
    in one ``cv2.remap``.
    """
    out = np.array(img, copy=True)
    for x, s in enumerate(np.rint(shifts).astype(np.int64)):
        out[:, x] = np.roll(img[:, x], int(s), axis=0)
    return out


def paste_scaled(img: np.ndarray, new_w: int, new_h: int, left: int, top: int, *,
                 resample: str, fill: float, scale: Levels) -> np.ndarray:
    """Resize to (new_w, new_h), then paste at (left, top) on a ``fill`` background."""
    h, w = img.shape[:2]
    color = fill_color(img, fill)

    def run(im: Image.Image) -> Image.Image:
        canvas = Image.new(im.mode, (w, h), color)
        canvas.paste(im.resize((new_w, new_h), RESAMPLE[resample]), (left, top))
        return canvas

    return apply(img, run, scale)


def gaussian_blur(img: np.ndarray, sigma: float, scale: Levels) -> np.ndarray:
    """``ImageFilter.GaussianBlur(radius=sigma)`` (PIL's radius is the standard deviation)."""
    return apply(img, lambda im: im.filter(ImageFilter.GaussianBlur(radius=sigma)), scale)


def filter3x3(img: np.ndarray, kernel: np.ndarray, scale: Levels) -> np.ndarray:
    """``ImageFilter.Kernel`` with a 3x3 kernel that sums to 1."""
    k = ImageFilter.Kernel((3, 3), [float(v) for v in kernel.ravel()], scale=1.0)
    return apply(img, lambda im: im.filter(k), scale)


def brightness_contrast(img: np.ndarray, brightness: float, contrast: float,
                        scale: Levels) -> np.ndarray:
    """``ImageEnhance.Brightness`` then ``ImageEnhance.Contrast`` with those factors."""
    return apply(
        img,
        lambda im: ImageEnhance.Contrast(ImageEnhance.Brightness(im).enhance(brightness)).enhance(
            contrast
        ),
        scale,
    )


def gamma(img: np.ndarray, g: float, scale: Levels) -> np.ndarray:
    """``Image.point`` with a gamma lookup table."""
    table = [int(v) for v in np.rint(255.0 * (np.arange(256) / 255.0) ** g)]
    return apply(img, lambda im: im.point(table * len(im.getbands())), scale)


def resize(img: np.ndarray, height: int, width: int, resample: str, scale: Levels) -> np.ndarray:
    """``Image.resize`` (PIL antialiases when shrinking with linear / cubic)."""
    return apply(img, lambda im: im.resize((width, height), RESAMPLE[resample]), scale)


def flip(img: np.ndarray, horizontal: bool) -> np.ndarray:
    """``Image.transpose`` FLIP_LEFT_RIGHT / FLIP_TOP_BOTTOM, on uint8 (a mirror is exact)."""
    method = Image.Transpose.FLIP_LEFT_RIGHT if horizontal else Image.Transpose.FLIP_TOP_BOTTOM
    return apply(img, lambda im: im.transpose(method), Levels(0.0, 255.0))


def require_constant(border: str, op: str) -> None:
    """PIL fills outside the image with a colour only; other borders need OpenCV."""
    if border != "constant":
        raise ArgumentError(
            f"`border` of `{op}` with backend='pil' expects 'constant' (PIL fills with a "
            f"colour only); received {border!r}. Use backend='cv' for {border!r} borders."
        )
