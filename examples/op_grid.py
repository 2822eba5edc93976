"""Write a PNG with one row per built-in op and several random draws per row.

Each row shows the input, then ``--draws`` outputs of the op (each from its own seed), on a
rendered glyph (64x64 gray, from ``shmaug.sources.glyphs``) and on an RGB photo shipped by a local
package (matplotlib's sample image; a drawn scene when it is missing). The last row is the
``glyph_distort`` preset.

Run:
    python examples/op_grid.py --out grid.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shmaug  # noqa: E402
from shmaug.sources.glyphs import render_glyphs  # noqa: E402
from shmaug.ops import Op  # noqa: E402

TILE = 96
LABEL_W = 150
# Parameters a bit stronger than the defaults, so every effect is visible at this size.
SHOW = {
    "sine_warp": {"amplitude": (3.0, 5.0)},
    "rotate": {"degrees": (-25, 25)},
    "shear": {"x": (-0.4, 0.4), "y": (-0.2, 0.2)},
    "perspective": {"scale": (0.06, 0.12)},
    "elastic": {"alpha": (3.0, 6.0)},
    "gaussian_blur": {"sigma": (1.0, 2.0)},
    "sharpen": {"amount": (1.0, 2.0)},
    "gaussian_noise": {"sigma": (0.05, 0.1)},
    "resize": {"height": 32, "width": 32},
    "crop": {"height": 0.6, "width": 0.6},
}


def photo() -> np.ndarray:
    """matplotlib's Grace Hopper sample (shipped locally), else a drawn RGB scene."""
    try:
        import matplotlib

        path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
        img = cv2.imread(str(path))
        if img is not None:
            return cv2.resize(cv2.cvtColor(img, cv2.COLOR_BGR2RGB)[:460], (TILE, TILE),
                              interpolation=cv2.INTER_AREA)
    except ImportError:
        pass
    yy, xx = np.mgrid[:TILE, :TILE]
    img = np.stack([xx * 255 // TILE, yy * 255 // TILE, np.full_like(xx, 90)],
                   axis=2).astype(np.uint8)
    cv2.circle(img, (TILE // 2, TILE // 2), TILE // 4, (250, 220, 40), -1)
    cv2.rectangle(img, (10, 60), (40, 85), (30, 30, 200), -1)
    return img


def tile(img: np.ndarray) -> np.ndarray:
    """Any output as an RGB TILE x TILE tile (smaller outputs centred on gray)."""
    gray = img.ndim == 2 or img.shape[2] == 1
    rgb = np.repeat(img.reshape(img.shape[0], img.shape[1], -1)[:, :, :1], 3, axis=2) \
        if gray else img
    if max(rgb.shape[:2]) > TILE or rgb.shape[0] == rgb.shape[1] == 64:
        k = TILE / max(rgb.shape[:2])
        rgb = cv2.resize(rgb, (round(rgb.shape[1] * k), round(rgb.shape[0] * k)),
                         interpolation=cv2.INTER_NEAREST)
    out = np.full((TILE, TILE, 3), 128, np.uint8)
    top, left = (TILE - rgb.shape[0]) // 2, (TILE - rgb.shape[1]) // 2
    out[top : top + rgb.shape[0], left : left + rgb.shape[1]] = rgb
    return out


def build(draws: int) -> Image.Image:
    glyph = render_glyphs(1, 64, classes="R", seed=4)[0][0]
    rgb = photo()
    rows = [(name, Op(name, **SHOW.get(name, {}))) for name in shmaug.available()]
    rows.append(("glyph_distort", shmaug.presets.glyph_distort()))
    cols = 2 * (draws + 1)
    sheet = Image.new("RGB", (LABEL_W + cols * (TILE + 4), len(rows) * (TILE + 4)), (255, 255, 255))
    pen = ImageDraw.Draw(sheet)
    for r, (name, op) in enumerate(rows):
        y = r * (TILE + 4)
        pen.text((6, y + TILE // 2 - 6), name, fill=(0, 0, 0))
        tiles = [glyph] + [op(glyph, np.random.default_rng(s)) for s in range(draws)]
        tiles += [rgb] + [op(rgb, np.random.default_rng(100 + s)) for s in range(draws)]
        for c, img in enumerate(tiles):
            sheet.paste(Image.fromarray(tile(img)), (LABEL_W + c * (TILE + 4), y))
    return sheet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One row per op, several random draws per row.")
    parser.add_argument("--out", type=Path, default=Path("grid.png"), help="PNG to write")
    parser.add_argument("--draws", type=int, default=4, help="random draws per image per row")
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)  # (as `shmaug demo --out` does)
    build(args.draws).save(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
