"""``from_pil``: run an existing ``fn(PIL.Image) -> PIL.Image`` unchanged as a shmaug op.

Owns the adapter for legacy augmentation code that draws its randomness from the global
``random`` / ``np.random``. The wrapper says so (``uses_global_rng = True``), and the loader
then seeds both globals from (seed, epoch, sample index) before each sample, so the legacy
function becomes reproducible and never repeats across workers, without edits. Seeding itself
belongs to ``shmaug.seeding``; this module only converts arrays to PIL and back.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from ..errors import ArgumentTypeError, OutputMismatchError
from ._params import check_image
from .core import config_type, resolve_ref

_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def _to_pil(image: np.ndarray) -> Image.Image:
    u8 = image
    if image.dtype != np.uint8:
        u8 = np.clip(np.rint(image.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)
    channels = 1 if u8.ndim == 2 else u8.shape[2]
    if channels not in _MODES:
        raise ArgumentTypeError(
            f"`image` for a from_pil op expects 1, 3 or 4 channels (PIL modes L, RGB, RGBA); "
            f"received shape {image.shape}. Use a native shmaug op for other layouts."
        )
    return Image.fromarray(u8[:, :, 0] if u8.ndim == 3 and channels == 1 else u8)


def _from_pil(result: Any, like: np.ndarray, name: str) -> np.ndarray:
    if isinstance(result, tuple) and result:
        result = result[0]
    if not isinstance(result, Image.Image):
        raise OutputMismatchError(
            f"from_pil op `{name}` expects its function to return a PIL.Image (or a tuple whose "
            f"first item is one); received {type(result).__name__}. Return the image."
        )
    channels = 1 if like.ndim == 2 else like.shape[2]
    if result.mode != _MODES[channels]:
        result = result.convert(_MODES[channels])
    out = np.asarray(result)
    if like.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    if like.dtype != np.uint8:
        return (out.astype(np.float32) / 255.0).astype(like.dtype)
    return out if out.flags.writeable else out.copy()


@dataclass(frozen=True, slots=True)
class FromPil:
    """A legacy PIL function as an op ``(image, rng) -> image``; build it with :func:`from_pil`."""

    fn: Callable[..., Any]
    seed_globals: bool = False
    uses_global_rng = True

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        check_image(image)
        if self.seed_globals:
            seed = int(rng.integers(0, 2**32))
            random.seed(seed)
            np.random.seed(seed)
        return _from_pil(self.fn(_to_pil(image)), image, getattr(self.fn, "__qualname__", "fn"))

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict naming the function by ``module:qualname``."""
        ref = f"{self.fn.__module__}:{self.fn.__qualname__}"
        return {"type": "from_pil", "fn": ref, "seed_globals": self.seed_globals}


def from_pil(fn: Callable[..., Any], *, seed_globals: bool = False) -> FromPil:
    """Wrap ``fn(PIL.Image) -> PIL.Image`` (or ``-> (PIL.Image, ...)``) as a shmaug op.

    The array is handed to ``fn`` as an 8-bit PIL image ("L", "RGB" or "RGBA"; float images
    are quantized) and the result comes back in the input's dtype and layout. ``fn`` may use
    the global ``random`` / ``np.random``: inside a loader those are seeded per sample.

    Args:
        fn: the legacy function. Define it at module level so it pickles for spawned
            workers (the loader's ``check_picklable`` names it otherwise).
        seed_globals: also seed ``random`` and ``np.random`` from the op's ``rng`` on each
            call, for reproducible use outside a loader (costs ~10 us per call).

    Returns:
        A picklable op with ``uses_global_rng = True``.

    Raises:
        ArgumentTypeError: ``fn`` is not callable.

    Example:
        >>> def old_aug(img):  # doctest: +SKIP
        ...     return img.rotate(random.choice([-5, 0, 5]))
        >>> op = from_pil(old_aug)  # doctest: +SKIP
    """
    if not callable(fn):
        raise ArgumentTypeError(
            f"`fn` of from_pil expects a callable fn(PIL.Image) -> PIL.Image; received "
            f"{fn!r} ({type(fn).__name__})."
        )
    return FromPil(fn, seed_globals=seed_globals)


@config_type("from_pil")
def _from_pil_config(cfg: dict[str, Any]) -> FromPil:
    return from_pil(resolve_ref(cfg["fn"]), seed_globals=bool(cfg.get("seed_globals", False)))
