"""A synthetic glyph data set: rendered characters, white ink on black, made in seconds.

Owns ``render_glyphs`` and ``find_cjk_font``, used by the demo, the benchmarks, the examples
and the tests. Nothing is downloaded: a CJK font is used when the system has one (Noto CJK,
Source Han, WenQuanYi, Droid Sans Fallback, ...), otherwise Pillow's built-in scalable font
with Latin letters and digits.

Speed: each class is rendered once with PIL, cropped to its ink and resized to a few size
variants (the longer side 60-90% of the canvas); every sample is then a numpy paste of one of
those crops at a random offset, so 20,000 glyphs take well under a second.
"""

from __future__ import annotations

import functools
import os
import string
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..errors import ArgumentError, ArgumentTypeError

# 100 frequent Chinese characters (each is one class when a CJK font is found).
CJK_CLASSES = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对"
    "可里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同"
    "三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种"
)
LATIN_CLASSES = string.digits + string.ascii_uppercase + string.ascii_lowercase
_SIZE_VARIANTS = (0.6, 0.7, 0.8, 0.9)  # longer glyph side as a fraction of the canvas
_FONT_DIRS = (
    "/usr/share/fonts",
    "/usr/local/share/fonts",
    "~/.fonts",
    "~/.local/share/fonts",
    "/Library/Fonts",
    "/System/Library/Fonts",
    "C:/Windows/Fonts",
)
_CJK_NAMES = (
    "notosanscjk", "notoserifcjk", "notosanssc", "notosanstc", "notosansjp", "notosanskr",
    "sourcehansans", "sourcehanserif", "wqy-zenhei", "wqy-microhei", "wqy_zenhei",
    "droidsansfallback", "msyh", "simhei", "simsun", "pingfang", "hiragino",
)


@functools.lru_cache(maxsize=1)
def find_cjk_font() -> str | None:
    """Path of a CJK-capable font installed on this machine, or None.

    Example:
        >>> path = find_cjk_font()  # e.g. ".../NotoSansCJK-Regular.ttc" or None
    """
    for root in _FONT_DIRS:
        base = Path(os.path.expanduser(root))
        if not base.is_dir():
            continue
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                flat = name.lower().replace(" ", "")
                if flat.endswith((".ttf", ".ttc", ".otf")) and any(k in flat for k in _CJK_NAMES):
                    return str(Path(dirpath) / name)
    return None


def _font(size: int, cjk: str | None) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    if cjk is not None:
        return ImageFont.truetype(cjk, size)
    return ImageFont.load_default(size=size)


@functools.lru_cache(maxsize=8)
def _stamps(chars: str, size: int, cjk: str | None) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per class, per size variant: the glyph cropped to its ink (uint8, white on black)."""
    out = []
    font = _font(size, cjk)
    for ch in chars:
        canvas = Image.new("L", (3 * size, 3 * size), 0)
        ImageDraw.Draw(canvas).text((size, size), ch, fill=255, font=font)
        ink = np.asarray(canvas)
        rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
        if rows.size == 0:  # the font has no such glyph
            raise ArgumentError(
                f"`classes` expects characters the font can draw; {ch!r} renders empty "
                f"with {cjk or 'the built-in font'}. Pick other characters."
            )
        glyph = Image.fromarray(ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1])
        variants = []
        for frac in _SIZE_VARIANTS:
            # Scale so the longer side is frac * size: "l" and "W" fill the canvas alike.
            k = frac * size / max(glyph.size)
            new = (max(1, round(glyph.size[0] * k)), max(1, round(glyph.size[1] * k)))
            variants.append(np.asarray(glyph.resize(new, Image.Resampling.LANCZOS)).copy())
        out.append(tuple(variants))
    return tuple(out)


def _class_chars(classes: int | str | None, cjk: str | None) -> str:
    pool = CJK_CLASSES if cjk is not None else LATIN_CLASSES
    if classes is None:
        return pool
    if isinstance(classes, str):
        if not classes or len(set(classes)) != len(classes):
            raise ArgumentError(
                f"`classes` expects distinct characters, one per class; received {classes!r}."
            )
        return classes
    if isinstance(classes, bool) or not isinstance(classes, int):
        raise ArgumentTypeError(
            f"`classes` expects an int, a str of characters or None; received "
            f"{classes!r} ({type(classes).__name__})."
        )
    if not 1 <= classes <= len(pool):
        raise ArgumentError(
            f"`classes` expects 1..{len(pool)} with this font; received {classes}. Pass fewer "
            f"classes, or a str of the characters to draw."
        )
    return pool[:classes]


def render_glyphs(
    n: int, size: int = 64, *, classes: int | str | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Render ``n`` glyph images of ``size`` x ``size`` pixels, white ink (255) on black (0).

    Each sample picks a size variant and a random position (the whole glyph stays inside);
    labels are balanced (each class appears ``n // classes`` or one more times) and shuffled.
    The output is a pure function of the arguments and the font found on the machine.

    Args:
        n: number of samples.
        size: canvas side in pixels (>= 8).
        classes: None for the font's default set (100 CJK characters, or 62 Latin letters and
            digits without a CJK font), an int for the first that many, or a str whose
            characters are the classes.
        seed: seed for sizes, positions and label order.

    Returns:
        ``(x, y, names)``: x uint8 (n, size, size), y int64 (n,), names[k] the k-th class.

    Raises:
        ArgumentError: ``n`` < 0, ``size`` < 8, or ``classes`` out of range.

    Example:
        >>> x, y, names = render_glyphs(100, 32, classes=10)
        >>> x.shape, x.dtype, len(names)
        ((100, 32, 32), dtype('uint8'), 10)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ArgumentError(f"`n` expects an int >= 0; received {n!r}.")
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ArgumentError(f"`size` expects an int >= 8; received {size!r}.")
    cjk = find_cjk_font()
    chars = _class_chars(classes, cjk)
    stamps = _stamps(chars, size, cjk)
    rng = np.random.default_rng(seed)
    k = len(chars)
    y = rng.permutation(np.arange(n) % k).astype(np.int64)
    variant = rng.integers(0, len(_SIZE_VARIANTS), n)
    u = rng.random((n, 2))
    x = np.zeros((n, size, size), np.uint8)
    for i in range(n):
        stamp = stamps[y[i]][variant[i]]
        h, w = stamp.shape
        top, left = int(u[i, 0] * (size - h + 1)), int(u[i, 1] * (size - w + 1))
        x[i, top : top + h, left : left + w] = stamp
    return x, y, list(chars)
