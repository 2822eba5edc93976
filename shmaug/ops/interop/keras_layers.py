"""A Keras user's augmentation layers as a shmaug pipeline: ``from_keras``.

Owns the translation from Keras 3 preprocessing layers (a ``keras.Sequential`` or a list of
layers) to ``Compose([Op(...), ...])``: which op each layer becomes and how its ``get_config()``
arguments carry over. The ops themselves (``builtin/``, ``policies/``) own what the arguments
mean.

It never imports Keras: a layer is read by its class (Keras' own, ``type(layer).__module__``
under ``keras``) and its config, so ``import shmaug`` and a worker that unpickles the result
load no Keras. What is decided here, once, for every layer:

- ``value_range``: Keras' layers assume the data in their ``value_range`` ((0, 255) unless
  given); the pipeline says the same range (``Compose(value_range=...)``), or refuses layers
  that disagree. Layers without one (flips, warps) leave the range to the loader.
- ``fill_mode`` -> ``border``: "constant", "nearest" ("replicate"), "wrap" carry over exactly;
  Keras' "reflect" (``d c b a | a b c d``) becomes shmaug's "reflect" (``d c b | a b c d``), one
  pixel apart at the edge. ``fill_value`` (a pixel value) becomes ``fill`` (a fraction of the
  range). ``interpolation`` "bilinear" is "linear", "bicubic" "cubic".
- ``seed`` is dropped: shmaug draws each sample from (seed, epoch, sample index).
- Layers that are no augmentation (``Rescaling``, ``Normalization``) are refused with the advice
  to keep them in the model, where Keras runs them at inference too; ``Resizing`` becomes
  ``resize``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import ArgumentError, ArgumentTypeError, got
from ..compose import Compose, Maybe, OneOf
from ..core import Op, available

Config = Mapping[str, Any]
_BORDERS = {"constant": "constant", "nearest": "replicate", "wrap": "wrap", "reflect": "reflect"}
_INTERPOLATIONS = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic",
                   "area": "area"}
_KERAS_RANGE = (0.0, 255.0)  # Keras' default `value_range`, in which `fill_value` is a pixel


def _pair(value: Any) -> Any:
    """A Keras factor as shmaug takes it: a pair as a tuple, a number as it is."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _interpolation(cfg: Config, layer: str) -> str:
    name = str(cfg.get("interpolation", "bilinear"))
    if name not in _INTERPOLATIONS:
        raise ArgumentError(
            f"`interpolation` of the Keras layer {layer} expects one of "
            f"{sorted(_INTERPOLATIONS)} to translate; received {name!r}. Fix: build the layer "
            f"with interpolation='bilinear', or write the op by hand.")
    return _INTERPOLATIONS[name]


def _warp(cfg: Config, layer: str) -> dict[str, Any]:
    """``fill_mode`` / ``fill_value`` / ``interpolation`` as shmaug's warp arguments."""
    mode = str(cfg.get("fill_mode", "constant"))
    if mode not in _BORDERS:
        raise ArgumentError(
            f"`fill_mode` of the Keras layer {layer} expects one of {sorted(_BORDERS)}; "
            f"received {mode!r}. Fix: pick one of those.")
    return {"border": _BORDERS[mode], "fill": _fill(cfg),
            "interpolation": _interpolation(cfg, layer)}


def _fill(cfg: Config) -> float:
    """``fill_value`` (a pixel value) as shmaug's ``fill`` (a fraction of the value range)."""
    lo, hi = _range_of(cfg) or _KERAS_RANGE
    return (float(cfg.get("fill_value") or 0.0) - lo) / (hi - lo)


def _range_of(cfg: Config) -> tuple[float, float] | None:
    value = cfg.get("value_range")
    return None if value is None else (float(value[0]), float(value[1]))


def _flip(cfg: Config, layer: str) -> list[Any]:
    mode = str(cfg.get("mode", "horizontal_and_vertical"))
    flips = {"horizontal": ["hflip"], "vertical": ["vflip"],
             "horizontal_and_vertical": ["hflip", "vflip"]}
    if mode not in flips:
        raise ArgumentError(
            f"`mode` of the Keras layer {layer} expects one of {sorted(flips)}; received "
            f"{mode!r}. Fix: pick one of those.")
    return [Maybe(Op(name)) for name in flips[mode]]


def _jitter(**factors: Any) -> Callable[[Config, str], list[Any]]:
    """A Keras colour layer as ``color_jitter``: ``factors`` maps each jitter step to the
    layer's config key (None: the step is left out). RandomColorJitter stores its factors as
    given, so a lone number is read here as its sub-layers read it in Keras 3.15: a contrast
    c as (0, c) (contrast in (1, 1 + c)), a saturation s as (-s, s)."""
    def build(cfg: Config, layer: str) -> list[Any]:
        steps = {f"{step}_factor": None if key is None else _pair(cfg.get(key))
                 for step, key in factors.items()}
        contrast, saturation = steps.get("contrast_factor"), steps.get("saturation_factor")
        if isinstance(contrast, (int, float)):
            steps["contrast_factor"] = (0.0, abs(contrast))
        if isinstance(saturation, (int, float)):
            steps["saturation_factor"] = (-abs(saturation), abs(saturation))
        return [Op("color_jitter", **steps)]
    return build


def _same(op: str, **keys: str) -> Callable[[Config, str], list[Any]]:
    """A layer whose op takes its arguments under ``keys`` (op name -> Keras name)."""
    def build(cfg: Config, layer: str) -> list[Any]:
        return [Op(op, **{ours: _pair(cfg[theirs]) for ours, theirs in keys.items()})]
    return build


def _posterization(cfg: Config, layer: str) -> list[Any]:
    # Keras 3.15 draws the bits in [lo, hi), so a lone n (stored as (1, n)) keeps 1..n-1.
    lo, hi = (int(v) for v in _pair(cfg["factor"]))
    return [Op("posterize", factor=lo if lo == hi else (max(lo, 1), max(min(hi - 1, 8), 1)))]


def _solarization(cfg: Config, layer: str) -> list[Any]:
    # Keras 3.15 draws each in (lo, 255 hi) on the 0..255 scale: the low end unscaled.
    add, threshold = _pair(cfg["addition_factor"]), _pair(cfg["threshold_factor"])
    return [Op("solarize", addition_factor=(add[0] / 255.0, add[1]),
               threshold_factor=(threshold[0] / 255.0, threshold[1]))]


def _rotation(cfg: Config, layer: str) -> list[Any]:
    lo, hi = _pair(cfg["factor"]) if isinstance(cfg["factor"], (list, tuple)) else \
        (-abs(cfg["factor"]), abs(cfg["factor"]))
    return [Op("rotate", degrees=(360.0 * lo, 360.0 * hi), **_warp(cfg, layer))]


def _zoom(cfg: Config, layer: str) -> list[Any]:
    return [Op("zoom", height_factor=_pair(cfg["height_factor"]),
               width_factor=_pair(cfg.get("width_factor")), **_warp(cfg, layer))]


def _translation(cfg: Config, layer: str) -> list[Any]:
    return [Op("translation", height_factor=_pair(cfg["height_factor"]),
               width_factor=_pair(cfg["width_factor"]), **_warp(cfg, layer))]


def _shear(cfg: Config, layer: str) -> list[Any]:
    # Keras draws a size in each factor and one random sign for both, and samples the input
    # at (x + sx y, sy x + y): shear's anchor="top_left" map with both factors negated, which
    # that sign makes the same draw. Factors symmetric about 0 are shmaug's uniform draws;
    # others are a OneOf of the two signs.
    (xl, xh), (yl, yh) = ((float(v) for v in cfg[f"{a}_factor"]) for a in ("x", "y"))
    warp = {**_warp(cfg, layer), "anchor": "top_left"}

    def shear(x: tuple[float, float], y: tuple[float, float]) -> Op:
        return Op("shear", x=x if x[1] != x[0] else x[0], y=y if y[1] != y[0] else y[0], **warp)

    if xl == -xh and yl == -yh:
        return [shear((xl, xh), (yl, yh))]
    return [OneOf([shear((xl, xh), (yl, yh)), shear((-xh, -xl), (-yh, -yl))])]


def _resizing(cfg: Config, layer: str) -> list[Any]:
    # Keras pads the image to the aspect ratio and then resizes; shmaug resizes and then pads
    # (tf.image.resize_with_pad): the same place, the edge pixels resampled without the fill.
    if cfg.get("antialias"):
        raise ArgumentError(
            f"`antialias` of the Keras layer {layer} has no exact shmaug twin; received True. "
            f"Fix: Op('resize', ..., interpolation='area') (OpenCV's averaging shrink) or "
            f"backend='pil' (PIL's antialiased filters, 8-bit), or keep the layer in the "
            f"model.")
    keep: dict[str, Any] = {flag: True for flag in ("crop_to_aspect_ratio", "pad_to_aspect_ratio")
                            if cfg.get(flag)}
    if cfg.get("pad_to_aspect_ratio"):
        keep["fill"] = _fill(cfg)
    return [Op("resize", height=int(cfg["height"]), width=int(cfg["width"]),
               interpolation=_interpolation(cfg, layer), **keep)]


def _aug_mix(cfg: Config, layer: str) -> list[Any]:
    # Keras' `factor` (a fraction of each operation's largest magnitude) as torchvision's
    # `severity` (bins of 10 below which each magnitude is drawn): factor (0, 0.3) is 3.
    high = _pair(cfg["factor"])
    high = high[1] if isinstance(high, tuple) else high
    depth = cfg["chain_depth"]
    if isinstance(depth, (list, tuple)):
        if tuple(depth) != (1, 3):
            raise ArgumentError(
                f"`chain_depth` of the Keras layer {layer} translates as a number or (1, 3) "
                f"(torchvision's -1); received {depth!r}. Fix: pass a number.")
        depth = -1
    return [Op("aug_mix", severity=min(10, max(1, round(10 * float(high)))),
               mixture_width=int(cfg["num_chains"]), chain_depth=int(depth),
               alpha=float(cfg["alpha"]), all_ops=bool(cfg["all_ops"]),
               interpolation=_interpolation(cfg, layer))]


def _unit_range(value: Any) -> tuple[float, float]:
    """A factor whose bounds are (0, 1), as Keras reads it: a lone f is (0, f)."""
    value = _pair(value)
    return (float(value[0]), float(value[1])) if isinstance(value, tuple) else (0.0, float(value))


def _sometimes(cfg: Config, ops: list[Any]) -> list[Any]:
    """``ops`` as often as Keras applies its layer: a probability p drawn in ``factor``, then
    u < p, per image, which is applying them with probability p's mean."""
    low, high = _unit_range(cfg["factor"])
    return [Maybe(op, p=(low + high) / 2) for op in ops]


def _gaussian_blur(cfg: Config, layer: str) -> list[Any]:
    # Keras: sigma drawn in `sigma` (a lone s is (0, s)), an (x, y) pair per batch where
    # shmaug draws one per image, and a `kernel_size` kernel; shmaug replicates the edge
    # where Keras pads with zeros.
    sides = _pair(cfg.get("kernel_size", 3))
    size = sides[0] if isinstance(sides, tuple) else sides
    if isinstance(sides, tuple) and sides[0] != sides[1]:
        raise ArgumentError(
            f"`kernel_size` of the Keras layer {layer} is {sides}: shmaug's gaussian_blur "
            f"has square kernels. Fix: kernel_size={max(sides)}, or Op('gaussian_blur', "
            f"kernel_size=...) by hand.")
    low, high = _unit_range(cfg["sigma"])
    return _sometimes(cfg, [Op("gaussian_blur", sigma=(max(low, 1e-6), max(high, 1e-6)),
                               kernel_size=int(size))])


def _sharpness(cfg: Config, layer: str) -> list[Any]:
    # Keras: f drawn in `factor` ((0, f) for a lone f), out = 2f img + (1 - 2f) smoothed,
    # PIL's SMOOTH kernel: shmaug's smooth at amount 1 - 2f.
    low, high = _unit_range(cfg["factor"])
    return [Op("smooth", amount=(1.0 - 2.0 * high, 1.0 - 2.0 * low))]


def _perspective(cfg: Config, layer: str) -> list[Any]:
    warp = _warp({**cfg, "fill_mode": "constant"}, layer)
    return _sometimes(cfg, [Op("perspective", scale=float(cfg["scale"]), corners="keras",
                               **warp)])


def _elastic(cfg: Config, layer: str) -> list[Any]:
    return _sometimes(cfg, [Op("elastic", scale=_unit_range(cfg["scale"]),
                               **_warp(cfg, layer))])


def _rand_augment(cfg: Config, layer: str) -> list[Any]:
    return [Op("rand_augment", num_ops=int(cfg["num_ops"]), factor=_pair(cfg["factor"]),
               interpolation=_interpolation(cfg, layer))]


TRANSLATED: dict[str, Callable[[Config, str], list[Any]]] = {
    "AugMix": _aug_mix,
    "AutoContrast": _same("auto_contrast"),
    "CenterCrop": _same("center_crop", height="height", width="width"),
    "ContrastLimitedAdaptiveHistogramEqualization": _same(
        "clahe", clip_limit="clip_limit", tile_grid_size="tile_grid_size"),
    "Equalization": _same("equalize", bins="bins"),
    "RandAugment": _rand_augment,
    "RandomBrightness": _jitter(brightness="factor", contrast=None, saturation=None, hue=None),
    "RandomColorDegeneration": _same("color_degeneration", factor="factor"),
    "RandomColorJitter": _jitter(brightness="brightness_factor", contrast="contrast_factor",
                                 saturation="saturation_factor", hue="hue_factor"),
    "RandomElasticTransform": _elastic,
    "RandomGaussianBlur": _gaussian_blur,
    "RandomPerspective": _perspective,
    "RandomSharpness": _sharpness,
    "RandomContrast": _jitter(brightness=None, contrast="factor", saturation=None, hue=None),
    "RandomCrop": _same("crop", height="height", width="width"),
    "RandomErasing": _same("erasing", factor="factor", scale="scale", fill_value="fill_value"),
    "RandomFlip": _flip,
    "RandomGrayscale": _same("grayscale", factor="factor"),
    "RandomHue": _same("hue", factor="factor"),
    "RandomInvert": _same("invert", factor="factor"),
    "RandomPosterization": _posterization,
    "RandomRotation": _rotation,
    "RandomSaturation": _same("saturation", factor="factor"),
    "RandomShear": _shear,
    "RandomTranslation": _translation,
    "RandomZoom": _zoom,
    "Resizing": _resizing,
    "Solarization": _solarization,
}
"""Each Keras layer that translates, by class name -> its builder (config, name) -> ops."""

_IN_MODEL = ("it is part of the model, not an augmentation (Keras runs it at inference too). "
             "Fix: keep it in the model, and declare the data's range to shmaug with "
             "value_range=(low, high) if it is not the dtype's")
_BATCH = ("it mixes two samples and their labels: a batch op, not a per-image one. Fix: leave "
          "it out of the list and pass mix=shmaug.ops.MixUp(alpha) or shmaug.ops.CutMix(factor) "
          "(with num_classes=... for class-id labels) to the Loader or Sequence, whose workers "
          "mix each batch's pairs")
REFUSED: dict[str, str] = {
    "CutMix": _BATCH,
    "MaxNumBoundingBoxes": "it pads boxes to a count, which is the data's layout, not an "
                           "augmentation. Fix: pad them once with shmaug.ops.pad_boxes(boxes, "
                           "labels, max_boxes=...) (a loader pads ragged boxes by itself)",
    "MixUp": _BATCH,
    "Normalization": _IN_MODEL,
    "Rescaling": _IN_MODEL,
}
"""Keras layers with no translation, by class name -> why, and the fix."""


def _nearest(name: str) -> str:
    """The shmaug op whose name is nearest a layer's class name (RandomHue -> hue), said as
    the start of a sentence, or "" when none is near."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name.removeprefix("Random")).lower()
    match = difflib.get_close_matches(snake, available(), n=1, cutoff=0.5)
    return f"the nearest by name is Op({match[0]!r}); " if match else ""


def _layers(layers: Any) -> list[Any]:
    """The layers of a ``Sequential`` (or any model with ``.layers``), of a list, or one
    layer alone, nested ``Sequential`` blocks flattened."""
    if isinstance(layers, (list, tuple)):
        items = list(layers)
    elif hasattr(layers, "layers") and hasattr(layers, "get_config"):
        items = list(layers.layers)
    elif hasattr(layers, "get_config") and type(layers).__module__.split(".")[0] == "keras":
        items = [layers]
    else:
        raise ArgumentTypeError(
            f"`layers` of from_keras expects a keras.Sequential, a list of Keras "
            f"preprocessing layers or one of them; received {got(layers)}. Fix: pass e.g. "
            f"keras.Sequential([keras.layers.RandomFlip('horizontal')]).")
    flat: list[Any] = []
    for item in items:
        nested = type(item).__name__ == "Sequential" and hasattr(item, "layers")
        flat.extend(_layers(item) if nested else [item])
    return flat


def _translate(layer: Any) -> tuple[list[Any], tuple[float, float] | None, str | None]:
    """One layer as shmaug ops, with the value range its config assumes (None: it has none)
    and the format it reads boxes in (None: it was given none)."""
    kind = type(layer)
    name = f"{kind.__name__} ({getattr(layer, 'name', '?')!r})"
    keras_own = kind.__module__.split(".")[0] == "keras"
    if kind.__name__ in REFUSED and keras_own:
        raise ArgumentError(
            f"`layers` of from_keras holds the Keras layer {name}, which shmaug does not "
            f"translate: {REFUSED[kind.__name__]}.")
    if kind.__name__ not in TRANSLATED or not keras_own or not hasattr(layer, "get_config"):
        what = "a subclass of a Keras layer, whose changes would be lost" if \
            kind.__name__ in TRANSLATED else "not a Keras image augmentation layer"
        raise ArgumentError(
            f"`layers` of from_keras holds {name} from {kind.__module__}: {what}. Fix: "
            f"replace it with a shmaug op ({_nearest(kind.__name__)}every op: "
            f"shmaug.available()), or apply it after shmaug in the model.")
    cfg = layer.get_config()
    if cfg.get("data_format", "channels_last") != "channels_last":
        raise ArgumentError(
            f"`data_format` of the Keras layer {name} expects 'channels_last' (shmaug's "
            f"images are (H, W, C)); received {cfg['data_format']!r}. Fix: build the layer "
            f"with data_format='channels_last'.")
    return TRANSLATED[kind.__name__](cfg, name), _range_of(cfg), cfg.get("bounding_box_format")


def from_keras(layers: Any) -> Compose:
    """A ``keras.Sequential`` (or list, or one layer) of Keras 3 augmentation layers as a
    shmaug pipeline.

    Each layer becomes the op that mirrors it, with its ``get_config()`` arguments; the
    pipeline runs per sample in shmaug's workers, pickles, and round-trips through
    ``to_config``. Keras is not imported: the layers are read as they are. The layers'
    ``bounding_box_format`` is the pipeline's: boxes and segmentation masks in a loader's
    ``y`` (Keras' ``bounding_boxes`` and ``segmentation_masks``) move as the layers move them,
    except that padding rows of -1 stay padding (Keras 3.15 moves them too, into boxes of no
    meaning).

    Args:
        layers: a ``keras.Sequential``, a list of Keras preprocessing layers (nested
            ``Sequential`` blocks included), or one layer.

    Returns:
        ``Compose([...])`` of the layers' ops in order, with the ``value_range`` the layers
        assume (Keras' default (0, 255)) when any layer has one, and their
        ``bounding_box_format``.

    Raises:
        ArgumentError: a layer has no translation (named, with why and the nearest op), or
            the layers assume different value ranges or box formats.
        ArgumentTypeError: ``layers`` is neither a ``Sequential`` nor a list.

    Example:
        >>> aug = from_keras(keras.Sequential([keras.layers.RandomFlip("horizontal"),
        ...                                    keras.layers.RandomRotation(0.1)]))  # doctest: +SKIP
    """
    ops: list[Any] = []
    ranges: dict[tuple[float, float], str] = {}
    box_formats: dict[str, str] = {}
    for layer in _layers(layers):
        made, value_range, box_format = _translate(layer)
        ops.extend(made)
        if value_range is not None:
            ranges.setdefault(value_range, type(layer).__name__)
        if box_format is not None:
            box_formats.setdefault(box_format, type(layer).__name__)
    for name, found in (("value_range", ranges), ("bounding_box_format", box_formats)):
        if len(found) > 1:
            raise ArgumentError(
                f"`{name}` of the Keras layers in from_keras expects one for the whole "
                f"block; received {_listed(found)}. Fix: give every layer the same.")
    return Compose(ops, value_range=next(iter(ranges), None),
                   bounding_box_format=next(iter(box_formats), None))


def _listed(found: Mapping[Any, str]) -> str:
    return ", ".join(f"{r!r} ({who})" for r, who in found.items())

