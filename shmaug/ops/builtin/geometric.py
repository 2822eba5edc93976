"""Built-in geometric ops: sample parameters from ``rng``, then call a pure kernel.

Owns the registered ops that move pixels: ``sine_warp``, ``rotate``, ``shear``,
``scale_translate``, ``translate``, ``hflip``, ``vflip``, ``rot90``, ``perspective``, ``elastic``,
``resize``, ``crop`` and ``resized_crop``. The kernels are in ``kernels/cv.py`` (default) and
``kernels/pil.py`` (``backend="pil"``).

Shared parameters: ``border`` is one of "constant", "reflect", "replicate", "wrap" (PIL:
"constant" only); ``fill`` is the constant border value as a fraction of the value range (0
black, 1 white); ``interpolation`` is "nearest", "linear" or "cubic"; ``value_range`` is the
(low, high) the pixels lie in (default: by dtype, see ``params``). Every op keeps the image's
shape, dtype, layout and value range except ``resize`` and ``crop``, whose purpose is a new
size.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

from ..kernels import cv, pil
from ..params import (
    BORDERS,
    Range,
    ValueRange,
    border_code,
    bounds,
    check_image,
    choice,
    cv_only,
    draw,
    draw_int,
    fill_value,
    interp_code,
    is_pil,
    levels,
    restore,
    to_work,
)
from . import checks as chk
from .warp import affine, cut, moved, pixels, scaled, warp
from ..targets.moves import FieldMove, MatrixMove, columns_shifted
from ...resample import aspect_window, fitted
from ..core import WARPED, register
from ...errors import ArgumentError


@register("sine_warp", checks={"amplitude": chk.ranged(0.0), "period": chk.ranged(1e-6),
                               "phase": chk.ranged(), **chk.WARP, **chk.BACKEND}, targets=WARPED)
def sine_warp(
    image: np.ndarray, rng: np.random.Generator, amplitude: Range = (1.0, 3.0),
    period: Range = (16.0, 48.0), phase: Range = (0.0, 2 * math.pi), border: str = "wrap",
    fill: float = 0.0, interpolation: str = "linear", backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Shift each column up or down by ``amplitude * sin(2 pi x / period + phase)`` pixels.

    One ``cv2.remap`` for the whole image. ``amplitude`` and ``period`` are in pixels; the
    default ``border="wrap"`` matches the classic per-column ``np.roll``. ``backend="pil"`` runs
    that classic loop (whole-pixel shifts, wrap border only).

    Example:
        >>> out = sine_warp(np.zeros((64, 64), np.uint8), np.random.default_rng(0), amplitude=2)
    """
    a = draw(rng, amplitude, "amplitude", 0.0)
    t = draw(rng, period, "period", 1e-6)
    p = draw(rng, phase, "phase")
    work = to_work(image)
    scale = levels(image, value_range)
    shifts = a * np.sin((2 * math.pi / t) * np.arange(work.shape[1]) + p)
    if is_pil(backend):
        if border != "wrap":
            raise ArgumentError(
                f"`border` of `sine_warp` with backend='pil' expects 'wrap' (the classic "
                f"np.roll); received {border!r}. Use backend='cv' for other borders."
            )
        out = restore(pil.roll_columns(work, shifts), image, scale)
        return moved(image, out, lambda: columns_shifted(np.rint(shifts), work.shape[0],
                                                  border_code("wrap")))
    if interpolation == "nearest":
        shifts = np.rint(shifts)
    out = cv.shift_columns(
        work, shifts, interp=interp_code(interpolation), border=border_code(border),
        fill=fill_value(fill, scale),
    )
    return moved(image, restore(out, image, scale), lambda: columns_shifted(
        shifts, work.shape[0], border_code(border)))


@register("rotate", targets=WARPED, checks={"degrees": chk.ranged(), **chk.WARP, **chk.BACKEND})
def rotate(
    image: np.ndarray, rng: np.random.Generator, degrees: Range = (-15.0, 15.0),
    border: str = "constant", fill: float = 0.0, interpolation: str = "linear",
    backend: str = "cv", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Rotate about the centre by ``degrees`` (positive: counter-clockwise).

    Example:
        >>> out = rotate(np.zeros((64, 64), np.uint8), np.random.default_rng(0), degrees=(-5, 5))
    """
    angle = draw(rng, degrees, "degrees")
    h, w = image.shape[:2]
    m = affine(*cv2.getRotationMatrix2D(((w - 1) / 2, (h - 1) / 2), angle, 1.0).ravel())
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend=backend, op="rotate", value_range=value_range)


@register("shear", checks={"x": chk.ranged(), "y": chk.ranged(),
                           "anchor": chk.one_of("centre", "top_left"), **chk.WARP,
                           **chk.BACKEND}, targets=WARPED)
def shear(
    image: np.ndarray, rng: np.random.Generator, x: Range = (-0.3, 0.3), y: Range = 0.0,
    border: str = "constant", fill: float = 0.0, interpolation: str = "linear",
    backend: str = "cv", value_range: ValueRange | None = None, anchor: str = "centre",
) -> np.ndarray:
    """Shear about the centre: ``x' = x + sx * (y - cy)``, ``y' = y + sy * (x - cx)``.

    ``x`` and ``y`` are shear factors (the tangent of the shear angle): a positive ``x``
    moves the rows below the centre right, and a positive ``y`` the columns right of it down.
    That is the other way from the angles of torchvision's and albumentations' ``shear`` (their
    θ is ``x=-tan θ`` here) and from the inverse map ``Image.transform(AFFINE)`` takes (PIL's
    ``(1, f, ...)`` is ``x=-f``). ``anchor="top_left"`` is Keras' RandomShear map instead: the
    output pixel (x, y) shows the input's (x - sx y, y - sy x), about the top-left pixel (the
    same slant for one factor; with both, Keras' scale of 1 / (1 - sx sy) too).

    Example:
        >>> out = shear(np.zeros((64, 64), np.uint8), np.random.default_rng(0), x=0.2)
    """
    sx, sy = draw(rng, x, "x"), draw(rng, y, "y")
    h, w = image.shape[:2]
    if anchor == "centre":
        cx, cy = (w - 1) / 2, (h - 1) / 2
        m = affine(1.0, sx, -sx * cy, sy, 1.0, -sy * cx)
    elif abs(1.0 - sx * sy) < 1e-6:
        raise ArgumentError(
            f"`x` and `y` of shear drew {sx} and {sy}, whose product is 1: anchor='top_left' "
            f"(Keras' map) would fold the image onto a line. Fix: factors whose product "
            f"stays below 1 (Keras' RandomShear takes each in [-1, 1]).")
    else:
        m = np.linalg.inv(affine(1.0, -sx, 0.0, -sy, 1.0, 0.0))
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend=backend, op="shear", value_range=value_range)


@register("scale_translate", checks={"scale": chk.ranged(1e-3, means=chk.GAIN_MEANS),
                                     "translate": chk.SHIFT,
                                     **chk.WARP, **chk.BACKEND}, targets=WARPED)
def scale_translate(
    image: np.ndarray, rng: np.random.Generator, scale: Range = (0.75, 1.0),
    translate: Range = (-0.1, 0.1), border: str = "constant", fill: float = 0.0,
    interpolation: str = "linear", backend: str = "cv", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Scale by ``scale`` and move by ``translate`` (fraction of width / height, drawn per axis).

    The geometry is "resize to round(scale * size), paste at a whole-pixel offset onto a
    ``fill`` background", which is what ``backend="pil"`` does literally.

    Example:
        >>> out = scale_translate(np.zeros((64, 64), np.uint8), np.random.default_rng(0))
    """
    s = draw(rng, scale, "scale", 1e-3)
    tx, ty = draw(rng, translate, "translate", -1, 1), draw(rng, translate, "translate", -1, 1)
    h, w = image.shape[:2]
    nw, nh = max(1, round(s * w)), max(1, round(s * h))
    left, top = round((w - nw) / 2 + tx * w), round((h - nh) / 2 + ty * h)
    kx, ky = nw / w, nh / h
    m = affine(kx, 0.0, 0.5 * kx - 0.5 + left, 0.0, ky, 0.5 * ky - 0.5 + top)
    if is_pil(backend):
        pil.require_constant(border, "scale_translate")
        choice(interpolation, "interpolation", ("nearest", "linear", "cubic"))
        pixels = levels(image, value_range)  # `scale` is this op's zoom factor
        out = pil.paste_scaled(
            to_work(image), nw, nh, left, top, resample=interpolation,
            fill=bounds(fill, "fill", 0, 1)[0], scale=pixels,
        )
        return moved(image, restore(out, image, pixels), MatrixMove(m, (h, w)))
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend="cv", op="scale_translate", value_range=value_range)


@register("translate", checks={"x": chk.SHIFT, "y": chk.SHIFT, **chk.WARP, **chk.BACKEND},
          targets=WARPED)
def translate(
    image: np.ndarray, rng: np.random.Generator, x: Range = (-0.1, 0.1), y: Range = (-0.1, 0.1),
    border: str = "constant", fill: float = 0.0, interpolation: str = "linear",
    backend: str = "cv", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Move by ``x`` * width and ``y`` * height pixels (fractions; positive: right / down).

    Example:
        >>> out = translate(np.zeros((64, 64), np.uint8), np.random.default_rng(0), x=0.1, y=0)
    """
    h, w = image.shape[:2]
    m = affine(1.0, 0.0, draw(rng, x, "x", -1, 1) * w, 0.0, 1.0, draw(rng, y, "y", -1, 1) * h)
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend=backend, op="translate", value_range=value_range)


@register("perspective", checks={"scale": chk.ranged(0.0, 1.0),
                                 "corners": chk.one_of("any", "keras"), **chk.WARP,
                                 **chk.BACKEND}, targets=WARPED)
def perspective(
    image: np.ndarray, rng: np.random.Generator, scale: Range = (0.02, 0.08),
    border: str = "constant", fill: float = 0.0, interpolation: str = "linear",
    backend: str = "cv", value_range: ValueRange | None = None, corners: str = "any",
) -> np.ndarray:
    """Move each corner by up to ``scale`` * size (uniform per coordinate) and warp to fit.

    ``corners="keras"`` moves them as Keras' RandomPerspective does: each corner's
    coordinates scaled by 1 + U(-scale/2, scale/2) from the top-left corner, which stays.

    Example:
        >>> out = perspective(np.zeros((64, 64), np.uint8), np.random.default_rng(0))
    """
    d = draw(rng, scale, "scale", 0.0, 1.0)
    h, w = image.shape[:2]
    src = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], np.float32)
    if corners == "keras":
        dst = src * (1.0 + rng.uniform(-d / 2, d / 2, (4, 2))).astype(np.float32)
    else:
        dst = src + (rng.uniform(-d, d, (4, 2)) * [w, h]).astype(np.float32)
    m = cv2.getPerspectiveTransform(src, dst)
    return warp(image, m, border=border, fill=fill, interpolation=interpolation,
                backend=backend, op="perspective", value_range=value_range)


@register("elastic", checks={"alpha": chk.ranged(0.0), "sigma": chk.ranged(1e-3),
                             "scale": chk.optional(chk.ranged(0.0, 1.0)), **chk.WARP,
                             **chk.CV_ONLY}, targets=WARPED)
def elastic(
    image: np.ndarray, rng: np.random.Generator, alpha: Range = (1.0, 3.0),
    sigma: Range = (3.0, 6.0), border: str = "reflect", fill: float = 0.0,
    interpolation: str = "linear", backend: str = "cv", value_range: ValueRange | None = None,
    scale: Range | None = None,
) -> np.ndarray:
    """Elastic distortion: a smooth random displacement field, largest move ``alpha`` pixels.

    Uniform noise per pixel is Gaussian-blurred by ``sigma`` pixels, scaled so its largest
    displacement is ``alpha``, and applied with one ``cv2.remap``. OpenCV only.

    ``scale`` (Keras' RandomElasticTransform, in place of ``alpha`` and ``sigma``): f drawn
    in it makes ``alpha = 0.1 f max(H, W)`` and ``sigma = 0.05 f min(H, W)``, and the blurred
    noise is multiplied by ``alpha`` as Keras does, not scaled to it.

    Example:
        >>> out = elastic(np.zeros((64, 64), np.uint8), np.random.default_rng(0))
    """
    cv_only(backend, "elastic")
    h, w = image.shape[:2]
    if scale is not None:
        f = draw(rng, scale, "scale", 0.0, 1.0)
        a, s = 0.1 * f * max(h, w), max(0.05 * f * min(h, w), 1e-3)
    else:
        a = draw(rng, alpha, "alpha", 0.0)
        s = draw(rng, sigma, "sigma", 1e-3)
    work = to_work(image)
    levels_ = levels(image, value_range)
    if a == 0.0:
        return image
    field = rng.random((2, h, w), dtype=np.float32) * 2.0 - 1.0
    dx, dy = (cv.gaussian_blur(f, s) for f in field)
    k = np.float32(a if scale is not None else
                   a / max(float(np.abs(dx).max()), float(np.abs(dy).max()), 1e-12))
    dx, dy = dx * k, dy * k
    out = cv.displace(
        work, dx, dy, interp=interp_code(interpolation), border=border_code(border),
        fill=fill_value(fill, levels_),
    )
    return moved(image, restore(out, image, levels_), FieldMove(dx, dy, border_code(border)))


@register("hflip", targets=WARPED, checks=chk.BACKEND)
def hflip(image: np.ndarray, rng: np.random.Generator, backend: str = "cv") -> np.ndarray:
    """Mirror left-right (always; wrap in ``Maybe`` for a random flip).

    Example:
        >>> out = hflip(np.eye(4, dtype=np.uint8), np.random.default_rng(0))
    """
    return _flip(image, backend, horizontal=True)


@register("vflip", targets=WARPED, checks=chk.BACKEND)
def vflip(image: np.ndarray, rng: np.random.Generator, backend: str = "cv") -> np.ndarray:
    """Mirror top-bottom (always; wrap in ``Maybe`` for a random flip).

    Example:
        >>> out = vflip(np.eye(4, dtype=np.uint8), np.random.default_rng(0))
    """
    return _flip(image, backend, horizontal=False)


def _quarter_turns(value: Any, name: str) -> None:
    """Whole quarter turns, an int or a (low, high) pair of them, negative ones clockwise (as
    ``np.rot90``'s ``k``: -1 was refused with "e.g. k=0.0", True told a pair of halves)."""
    whole = not isinstance(value, (bool, np.bool_))  # (True counts no turns)
    a, b = bounds(value, name) if whole else (0.5, 0.5)
    if not whole or a != int(a) or b != int(b):
        raise ArgumentError(
            f"`{name}` expects whole quarter turns, an int or a (low, high) pair of them "
            f"(negative: clockwise, as np.rot90's k); received {value!r}. Pass e.g. "
            f"{name}=(0, 3) for any of the four turns, or {name}=-1 for one clockwise.")


@register("rot90", targets=WARPED, checks={"k": _quarter_turns})
def rot90(image: np.ndarray, rng: np.random.Generator, k: Range = (0, 3)) -> np.ndarray:
    """Turn by quarter turns, counter-clockwise as ``np.rot90`` (negative: clockwise): ``k``
    of them, or a number drawn in the ``(low, high)`` pair, both included (the default,
    (0, 3), any of the four: albumentations' RandomRotate90, the dihedral turns of pathology
    and satellite tiles).
    Exact: no pixel is resampled. An odd turn swaps a non-square image's height and width,
    so give it square images (a square crop first) where samples are batched.

    Example:
        >>> rot90(np.arange(4, dtype=np.uint8).reshape(2, 2), np.random.default_rng(0), 1)
        array([[1, 3],
               [0, 2]], dtype=uint8)
    """
    h, w = check_image(image).shape[:2]
    turns = draw_int(rng, k, "k", lo=-(2**31)) % 4
    if turns == 0:
        return image
    # where the pixel at (x, y) goes (pixel centres), and the turned image's (height, width)
    x_row, y_row, size = {1: ((0.0, 1.0, 0.0), (-1.0, 0.0, w - 1), (w, h)),
                          2: ((-1.0, 0.0, w - 1), (0.0, -1.0, h - 1), (h, w)),
                          3: ((0.0, -1.0, h - 1), (1.0, 0.0, 0.0), (w, h))}[turns]
    return moved(image, np.ascontiguousarray(np.rot90(image, turns)),
                 lambda: MatrixMove(affine(*x_row, *y_row), size))


def _flip(image: np.ndarray, backend: str, *, horizontal: bool) -> np.ndarray:
    check_image(image)
    h, w = image.shape[:2]

    def move() -> MatrixMove:
        return MatrixMove(affine(-1.0, 0.0, w - 1, 0.0, 1.0, 0.0) if horizontal else
                          affine(1.0, 0.0, 0.0, 0.0, -1.0, h - 1), (h, w))

    with_pil = is_pil(backend)
    if with_pil and image.dtype == np.uint8:
        return moved(image, restore(pil.flip(to_work(image), horizontal), image,
                                    levels(image, None)), move)
    if image.dtype == np.float16 or with_pil:
        # A mirror is exact: no float16 kernel in OpenCV, and no 8-bit rounding through PIL.
        return moved(image, (image[:, ::-1] if horizontal else image[::-1]).copy(), move)
    return moved(image, cv.flip(image, horizontal), move)


POSITIONS = ("center", "top_left", "random")


@register("resize", checks={"height": chk.size, "width": chk.size,
                           "interpolation": chk.RESIZE_INTERPOLATION, **chk.BACKEND,
                           **chk.VALUE_RANGE, "crop_to_aspect_ratio": chk.flag,
                           "pad_to_aspect_ratio": chk.flag, "fill": chk.WARP["fill"],
                           "position": chk.one_of(*POSITIONS)},
          targets=WARPED, sized_by=("height", "width"))
def resize(
    image: np.ndarray, rng: np.random.Generator, height: int | float = 64, width: int | float = 64,
    interpolation: str = "area", backend: str = "cv", value_range: ValueRange | None = None,
    crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False, fill: float = 0.0,
    position: str = "center",
) -> np.ndarray:
    """Resize to ``height`` x ``width``: this op changes the shape on purpose.

    An int is pixels, a float in (0, 1] a fraction of the input's size. Without distortion,
    as Keras' Resizing: ``crop_to_aspect_ratio`` cuts the largest window of the output's
    aspect ratio first; ``pad_to_aspect_ratio`` fits the whole image inside and fills the rest
    with ``fill`` (a fraction of the value range: 1 is white, as text lines want).
    ``position`` places that window, or the image on its canvas: "center" (Keras'),
    "top_left" (a line of text left-aligned) or "random" (drawn per sample).
    ``interpolation="area"``, the default, averages the pixels a shrink folds together (no
    aliasing) and repeats pixels where it enlarges, much as TensorFlow's "area" does (a pixel
    on a tie between two may be repeated from the other: 72 to 80, not 72 to 144): enlarge
    with "linear" (Keras' Resizing's and ``tf.image.resize``'s default, which it equals) or
    "cubic" for a smooth result.

    Example:
        >>> resize(np.zeros((32, 48, 3), np.uint8), np.random.default_rng(0), 16, 24).shape
        (16, 24, 3)
    """
    work = to_work(image)
    scale = levels(image, value_range)
    h, w = image.shape[:2]
    hh, ww = pixels(height, "height", h), pixels(width, "width", w)
    if is_pil(backend):
        choice(interpolation, "interpolation", tuple(pil.RESAMPLE))
    else:
        code = interp_code(interpolation, ("nearest", "linear", "cubic", "area"))

    def resized(pixels: np.ndarray, rows: int, cols: int) -> np.ndarray:
        if is_pil(backend):
            return pil.resize(pixels, rows, cols, interpolation, scale)
        return cv.resize(pixels, rows, cols, code)

    aspect = _aspect(crop_to_aspect_ratio, pad_to_aspect_ratio, position, fill)
    if aspect == "crop":
        top, left, rows, cols = aspect_window(h, w, (hh, ww))
        top, left = _placed(rng, position, (top, left), h - rows, w - cols)
        out = resized(work[top:top + rows, left:left + cols], hh, ww)
        matrix = scaled(left, top, ww / cols, hh / rows)
    elif aspect == "pad":
        top, left, rows, cols = fitted(h, w, (hh, ww))
        top, left = _placed(rng, position, (top, left), hh - rows, ww - cols)
        out = np.full((hh, ww, *work.shape[2:]), fill_value(fill, scale)[0], work.dtype)
        out[top:top + rows, left:left + cols] = resized(work, rows, cols)
        matrix = scaled(-left * w / cols, -top * h / rows, cols / w, rows / h)
    else:
        out, matrix = resized(work, hh, ww), scaled(0.0, 0.0, ww / w, hh / h)
    return moved(image, restore(out, image, scale), lambda: MatrixMove(matrix, (hh, ww)))


def _aspect(crop: bool, pad: bool, position: str, fill: float) -> str | None:
    """Which of Keras' two resizes without distortion ``resize`` runs, if any."""
    if crop and pad:
        raise ArgumentError(
            "`crop_to_aspect_ratio` and `pad_to_aspect_ratio` of `resize` cannot both be True "
            "(as in Keras' Resizing): one crops the image to the output's aspect ratio, the "
            "other pads it. Fix: keep one of them.")
    if position != "center" and not (crop or pad):
        raise ArgumentError(
            f"`position` of `resize` places a window or a padded image; received "
            f"{position!r} with neither. Fix: pass crop_to_aspect_ratio=True or "
            f"pad_to_aspect_ratio=True, or leave `position` out.")
    if np.any(np.asarray(fill, float) != 0.0) and not pad:
        raise ArgumentError(
            f"`fill` of `resize` fills the canvas around a padded image; received fill={fill!r} "
            f"without pad_to_aspect_ratio=True. Fix: pass pad_to_aspect_ratio=True, or leave "
            f"`fill` out.")
    return "crop" if crop else "pad" if pad else None


def _placed(rng: np.random.Generator, position: str, centred: tuple[int, int], rows: int,
            cols: int) -> tuple[int, int]:
    """(top, left) at ``position`` with ``rows`` and ``cols`` to spare (Keras' centring:
    ``centred``)."""
    if position == "center":
        return centred
    if position == "top_left":
        return 0, 0
    return int(rng.integers(0, rows + 1)), int(rng.integers(0, cols + 1))


@register("crop", targets=WARPED, checks={
    "height": chk.size, "width": chk.size, "padding": chk.whole(0),
    "border": chk.one_of(*BORDERS)})
def crop(
    image: np.ndarray, rng: np.random.Generator, height: float = 0.875, width: float = 0.875,
    padding: int = 0, border: str = "constant",
) -> np.ndarray:
    """Cut a ``height`` x ``width`` window at a random position: this op changes the shape.

    An int is pixels, a float in (0, 1] a fraction of the input's size. ``padding`` pixels
    are added on each side first, filled as ``border`` says ("constant": 0 in the image's
    own units, torchvision's fill=0; "reflect", "replicate", "wrap"; masks alike), as
    torchvision's ``RandomCrop(size, padding=, padding_mode=)``:
    ``Op("crop", height=32, width=32, padding=4, border="reflect")`` is the CIFAR recipe,
    every whole-pixel shift in -4..4 alike.

    Example:
        >>> crop(np.zeros((64, 64), np.uint8), np.random.default_rng(0), 56, 56).shape
        (56, 56)
    """
    if not padding:  # (a border without padding fills nothing, as torchvision's)
        return cut(image, height, width, "crop", lambda rows, cols: (
            int(rng.integers(0, rows + 1)), int(rng.integers(0, cols + 1))))
    h, w = check_image(image).shape[:2]  # (fractions of the image's own sides)
    rows, cols = pixels(height, "height", h), pixels(width, "width", w)
    p, code = int(padding), border_code(border)
    if rows > h + 2 * p or cols > w + 2 * p:
        raise ArgumentError(
            f"`height`/`width` of `crop` expect at most the image's height {h} and width {w} "
            f"with `padding`={p} on each side ({h + 2 * p} x {w + 2 * p}); received height "
            f"{rows} and width {cols}. Crop smaller, pad more, or resize first.")
    padded = moved(image, cv.pad(image, p, code), lambda: MatrixMove(  # (masks alike: exact)
        scaled(-p, -p, 1.0, 1.0), (h + 2 * p, w + 2 * p), code, warped_nearest=True))
    return cut(padded, rows, cols, "crop", lambda r, c: (
        int(rng.integers(0, r + 1)), int(rng.integers(0, c + 1))))


@register("resized_crop", checks={"scale": chk.ranged(1e-3, 1.0), "ratio": chk.ranged(1e-3),
                                  "interpolation": chk.INTERPOLATION, **chk.VALUE_RANGE},
          targets=WARPED)
def resized_crop(
    image: np.ndarray, rng: np.random.Generator, scale: Range = (0.6, 1.0),
    ratio: Range = (0.75, 4 / 3), interpolation: str = "linear",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Crop a random window (``scale``: area fraction; ``ratio``: aspect relative to the
    image's) and resize it back to the input size. Keeps the shape; (1, 1) is the identity.

    Example:
        >>> resized_crop(np.zeros((64, 64), np.uint8), np.random.default_rng(0)).shape
        (64, 64)
    """
    work = to_work(image)
    h, w = work.shape[:2]
    area = draw(rng, scale, "scale", 1e-3, 1.0)
    r = math.exp(draw(rng, tuple(math.log(v) for v in bounds(ratio, "ratio", 1e-3)), "ratio"))
    cw = min(w, max(1, round(w * math.sqrt(area * r))))
    ch = min(h, max(1, round(h * math.sqrt(area / r))))
    y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    if (ch, cw) == (h, w):
        return image
    window = work[y0 : y0 + ch, x0 : x0 + cw]
    code = interp_code(interpolation)
    out = restore(cv.resize(window, h, w, code), image, levels(image, value_range))
    return moved(image, out, lambda: MatrixMove(scaled(x0, y0, w / cw, h / ch), (h, w)))
