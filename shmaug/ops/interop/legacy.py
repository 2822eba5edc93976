"""Legacy augmentation code, unchanged, as shmaug ops: ``from_pil`` and ``from_array``.

Owns the two adapters for functions written against the global ``random`` / ``np.random``:
``fn(PIL.Image) -> PIL.Image`` (``from_pil``) and ``fn(numpy array) -> numpy array``
(``from_array``). On every call the adapter seeds both global generators from the op's
``rng`` before it calls ``fn``, so the result is a function of ``(image, rng)`` like every other
op's: in a loader (where ``rng`` comes from (seed, epoch, sample index)), in a preview, with
``workers=0`` or in a user's own test. The price is ~9 us a call, paid only by these ops. They
therefore say ``uses_global_rng = False``: the loader need not seed the globals for them.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from PIL import Image

from ...errors import ArgumentError, ArgumentTypeError, OutputMismatchError
from ..kernels import pil
from ..params import Levels, ValueRange, check_image, levels, value_range as checked_range
from ..core import STILL, config_type, resolve_ref
from ...seeding import torch_generator

_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def seed_globals_from(rng: np.random.Generator) -> None:
    """Seed Python's ``random``, numpy's legacy ``np.random`` and torch's generator (where
    torch is loaded: torchvision's v1 transforms draw from it) from one draw of ``rng``.

    numpy's legacy generator takes two 32-bit words (8 us; one word, 1.4 us, gave two
    samples of 200,000 the same draws three times). torch's takes 32 bits, whatever it is
    given (its Mersenne Twister's seed).
    """
    value = int(rng.integers(0, 2**63))
    random.seed(value)
    np.random.seed((value & 0xFFFFFFFF, value >> 32))
    torch = torch_generator()
    if torch is not None:
        torch.manual_seed(value >> 31)  # (32 bits of its own: not numpy's)


# What code written for the other wrapper's input raises: numpy / PIL attribute and type errors,
# and OpenCV's "src is not a numpy array" (cv2.error) for a PIL image.
_WRONG_INPUT = (TypeError, AttributeError, cv2.error)


def _call(fn: Callable[..., Any], arg: Any, rng: np.random.Generator, hint: str) -> Any:
    """``fn(arg)`` with the globals seeded from ``rng``; an error that says ``fn`` got the
    wrong kind of image gets ``hint`` appended."""
    seed_globals_from(rng)
    try:
        return fn(arg)
    except _WRONG_INPUT as exc:  # the usual sign of the other wrapper's input
        raise _hinted(exc, hint) from exc


def _hinted(exc: Exception, hint: str) -> Exception:
    text = f"{str(exc).rstrip()} [{hint}]"
    try:
        return type(exc)(text)
    except Exception:  # an exception class that takes other arguments
        return ArgumentTypeError(f"{type(exc).__name__}: {text}")


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


def _to_pil(image: np.ndarray, scale: Levels) -> Image.Image:
    u8 = pil.to_u8(image, scale)
    channels = 1 if u8.ndim == 2 else u8.shape[2]
    if channels not in _MODES:
        raise ArgumentTypeError(
            f"`image` for a from_pil op expects 1, 3 or 4 channels (PIL modes L, RGB, RGBA); "
            f"received shape {image.shape}. Use a native shmaug op for other layouts."
        )
    return Image.fromarray(u8[:, :, 0] if u8.ndim == 3 and channels == 1 else u8)


def _from_pil(result: Any, like: np.ndarray, name: str, scale: Levels) -> np.ndarray:
    if isinstance(result, tuple) and result:
        result = result[0]
    if not isinstance(result, Image.Image):
        hint = (" It returned an array: wrap it with shmaug.from_array(fn) instead."
                if isinstance(result, np.ndarray) else "")
        raise OutputMismatchError(
            f"from_pil op `{name}` expects its function to return a PIL.Image (or a tuple whose "
            f"first item is one); received {type(result).__name__}. Return the image.{hint}"
        )
    channels = 1 if like.ndim == 2 else like.shape[2]
    if result.mode != _MODES[channels]:
        result = result.convert(_MODES[channels])
    out = np.asarray(result)
    if like.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    return pil.from_u8(out, like.dtype, scale)


_PIL_HINT = ("shmaug.from_pil hands `fn` a PIL.Image; if `fn` works on numpy arrays, wrap it "
             "with shmaug.from_array(fn) instead")
_ARRAY_HINT = ("shmaug.from_array hands `fn` a numpy array (H, W, C); if `fn` works on PIL "
               "images, wrap it with shmaug.from_pil(fn) instead; on torch tensors, convert "
               "inside it: torch.from_numpy(image).permute(2, 0, 1) in, and "
               ".permute(1, 2, 0).numpy() out")


@dataclass(frozen=True, slots=True)
class FromPil:
    """A legacy PIL function as an op ``(image, rng) -> image``; build it with :func:`from_pil`."""

    fn: Callable[..., Any]
    value_range: ValueRange | None = None  # what 8-bit level 0 and 255 stand for (not uint8)
    targets: str | None = None  # "still": fn moves no pixel, so masks and boxes stay put
    uses_global_rng = False  # it seeds the globals itself, from `rng`, on every call

    def __post_init__(self) -> None:
        object.__setattr__(self, "value_range", checked_range(self.value_range))

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        check_image(image)
        scale = levels(image, self.value_range)
        result = _call(self.fn, _to_pil(image, scale), rng, _PIL_HINT)
        return _from_pil(result, image, _name(self.fn), scale)

    def with_value_range(self, value_range: ValueRange) -> FromPil:
        return self if self.value_range is not None else \
            FromPil(self.fn, value_range, self.targets)

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict naming the function by ``module:qualname``."""
        cfg = _config("from_pil", self.fn, self.targets)
        return cfg if self.value_range is None else {**cfg, "value_range": list(self.value_range)}


@dataclass(frozen=True, slots=True)
class FromArray:
    """A legacy array function as an op ``(image, rng) -> image``; see :func:`from_array`."""

    fn: Callable[..., Any]
    targets: str | None = None  # "still": fn moves no pixel, so masks and boxes stay put
    uses_global_rng = False  # it seeds the globals itself, from `rng`, on every call

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # A copy: legacy code edits in place, and a worker's input is a read-only view.
        result = _call(self.fn, np.array(image, copy=True), rng, _ARRAY_HINT)
        if not isinstance(result, np.ndarray) or result.dtype.kind not in "biuf" or \
                result.ndim == 0:  # (a list is not converted: uint8 pixels would be int64)
            hint = (" It returned a PIL.Image: wrap it with shmaug.from_pil(fn) instead."
                    if isinstance(result, Image.Image) else
                    " Fix: return np.asarray(result, dtype=image.dtype)."
                    if isinstance(result, (list, tuple)) else "")
            raise OutputMismatchError(
                f"from_array op `{_name(self.fn)}` expects its function to return a numeric "
                f"numpy array (an image); received {type(result).__name__}. Return the "
                f"image.{hint}"
            )
        return result

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict naming the function by ``module:qualname``."""
        return _config("from_array", self.fn, self.targets)


def _config(kind: str, fn: Callable[..., Any], targets: str | None) -> dict[str, Any]:
    cfg = {"type": kind, "fn": f"{fn.__module__}:{fn.__qualname__}"}
    return cfg if targets is None else {**cfg, "targets": targets}


def _required_positionals(fn: Any) -> int:
    """How many positional arguments ``fn`` cannot go without (0 where it does not say)."""
    try:
        # (not through __wrapped__: a wrapper may supply an argument of its own)
        parameters = inspect.signature(fn, follow_wrapped=False).parameters.values()
    except (TypeError, ValueError):  # a builtin that keeps its signature to itself
        return 0
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in parameters)


def _checked(fn: Any, targets: Any, who: str, shape: str) -> None:
    if not callable(fn):
        raise ArgumentTypeError(
            f"`fn` of {who} expects a callable {shape}; received {fn!r} ({type(fn).__name__}). "
            f"Pass the function itself, defined at module level."
        )
    wanted = _required_positionals(fn)
    if wanted > 1:
        raise ArgumentError(
            f"`fn` of {who} expects a callable {shape}, called with the image alone; received "
            f"{getattr(fn, '__qualname__', fn)!r}, which wants {wanted} arguments. Fix: a "
            f"function of (image, rng) is an op already: pass it as `augment=` (or in a "
            f"Compose) unwrapped; {who} is for legacy code that draws from the global "
            f"`random` / `np.random`.")
    if targets not in (None, STILL):
        raise ArgumentError(
            f"`targets` of {who} expects \"still\" (the function moves no pixel) or None; "
            f"received {targets!r}. Fix: a function that moves pixels cannot tell shmaug how, "
            f"so masks and boxes could not follow it: build that step from shmaug's geometric "
            f"ops, or use an albumentations pipeline (shmaug.from_albumentations).")


def from_pil(fn: Callable[..., Any], *, value_range: ValueRange | None = None,
             targets: str | None = None) -> FromPil:
    """Wrap ``fn(PIL.Image) -> PIL.Image`` (or ``-> (PIL.Image, ...)``) as a shmaug op.

    The array is handed to ``fn`` as an 8-bit PIL image ("L", "RGB" or "RGBA"; other dtypes
    are quantized over ``value_range``) and the result comes back in the input's dtype and
    layout. ``fn`` may draw from the global ``random`` / ``np.random``: the op seeds both from
    its ``rng`` before each call (~9 us), so its output is a function of ``(image, rng)`` and
    never repeats across workers. Calling it re-seeds those globals in the calling process.

    Args:
        fn: the legacy function. Define it at module level so it pickles for spawned
            workers (the loader's ``check_picklable`` names it otherwise).
        value_range: the (low, high) of images that are not uint8 (default: by dtype); a
            loader fills it in from its own.
        targets: ``"still"`` when ``fn`` moves no pixel (colour, noise, blur), so masks,
            boxes and keypoints pass it unchanged; None (default) refuses them.

    Returns:
        A picklable op.

    Raises:
        ArgumentTypeError: ``fn`` is not callable.
        ArgumentError: ``targets`` is not ``"still"`` or None.

    Example:
        >>> def old_aug(img):  # doctest: +SKIP
        ...     return img.rotate(random.choice([-5, 0, 5]))
        >>> op = from_pil(old_aug)  # doctest: +SKIP
    """
    _checked(fn, targets, "from_pil", "fn(PIL.Image) -> PIL.Image")
    return FromPil(fn, value_range, targets)


def from_array(fn: Callable[..., Any], *, targets: str | None = None) -> FromArray:
    """Wrap ``fn(numpy array) -> numpy array`` (plain NumPy or OpenCV code) as a shmaug op.

    The array twin of :func:`from_pil`: ``fn`` gets a writable copy of the image (legacy code
    often edits in place) and may draw from the global ``random`` / ``np.random``, which the op
    seeds from its ``rng`` before each call. Its result is returned as it is (dtype included).

    Args:
        fn: the legacy function, defined at module level.
        targets: ``"still"`` when ``fn`` moves no pixel, as for :func:`from_pil`.

    Returns:
        A picklable op.

    Raises:
        ArgumentTypeError: ``fn`` is not callable.
        ArgumentError: ``targets`` is not ``"still"`` or None.

    Example:
        >>> def old_noise(img):  # doctest: +SKIP
        ...     return img + np.random.normal(0, 5, img.shape)
        >>> op = from_array(old_noise)  # doctest: +SKIP
    """
    _checked(fn, targets, "from_array", "fn(numpy array) -> numpy array")
    return FromArray(fn, targets)


@config_type("from_pil")
def _from_pil_config(cfg: dict[str, Any]) -> FromPil:
    vr = cfg.get("value_range")  # an old "seed_globals" key is now always true: ignored
    return from_pil(resolve_ref(cfg["fn"]), value_range=None if vr is None else tuple(vr),
                    targets=cfg.get("targets"))


@config_type("from_array")
def _from_array_config(cfg: dict[str, Any]) -> FromArray:
    return from_array(resolve_ref(cfg["fn"]), targets=cfg.get("targets"))
