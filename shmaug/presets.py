"""Ready-made pipelines for the users shmaug is built for.

Owns named pipelines built from registered ops; each returns a picklable ``Compose`` with a
``to_config``. The ops themselves live in ``shmaug.ops``.
"""

from __future__ import annotations

from .ops import Compose, OneOf, Op
from .ops._params import choice


def glyph_distort(*, backend: str = "cv", fill: float = 0.0) -> Compose:
    """One geometric distortion, then one filter: the classic handwritten-glyph pipeline.

    One of {sine warp, rotate, shear, scale + translate}, then one of {Gaussian blur,
    sharpen, smooth}, tuned for 64x64 grayscale characters (white ink on black; pass
    ``fill=1.0`` for black ink on white).

    Args:
        backend: "cv" (fast, default) or "pil" (PIL's exact look; the sine warp then runs the
            classic per-column ``np.roll``).
        fill: background the geometric ops fill in, as a fraction of full scale.

    Returns:
        A ``Compose`` of two ``OneOf`` steps.

    Example:
        >>> import numpy as np
        >>> aug = glyph_distort()
        >>> out = aug(np.zeros((64, 64), np.uint8), np.random.default_rng(0))
    """
    # Only a non-default backend is bound, so the stored config stays short.
    b = {"backend": "pil"} if choice(backend, "backend", ("cv", "pil")) == "pil" else {}
    return Compose(
        [
            OneOf(
                [
                    Op("sine_warp", amplitude=(1.5, 3.5), period=(24.0, 64.0), **b),
                    Op("rotate", degrees=(-15.0, 15.0), fill=fill, **b),
                    Op("shear", x=(-0.3, 0.3), fill=fill, **b),
                    Op("scale_translate", scale=(0.7, 1.0), translate=(-0.1, 0.1), fill=fill, **b),
                ]
            ),
            OneOf(
                [
                    Op("gaussian_blur", sigma=(0.5, 1.0), **b),
                    Op("sharpen", amount=1.0, **b),
                    Op("smooth", amount=1.0, **b),
                ]
            ),
        ]
    )
