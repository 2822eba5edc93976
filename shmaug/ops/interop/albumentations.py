"""An existing albumentations pipeline as a shmaug op: ``from_albumentations``.

Owns the bridge to albumentations (an optional extra: ``pip install "shmaug[albumentations]"``),
imported only when a bridge is built or unpickled, never by ``import shmaug``.

Reproducibility uses albumentations' own public seeding: before every call the op hands the
pipeline the sample's ``rng`` through ``set_random_state(random_generator, py_random)``, which
every ``Compose`` / transform propagates to its children. ``random_generator`` is shmaug's
per-sample generator itself (no new generator per call); ``py_random`` is one ``random.Random``
per op, re-seeded from one draw of ``rng`` (~7 us; ``set_random_seed`` would build a fresh numpy
generator per transform, ~100 us for a five-transform pipeline). Output is then a function of
``(image, rng)``, hence of (seed, epoch, sample index) in a loader, whatever the worker count
or start method. The op does not declare ``uses_global_rng``: a transform that still draws from
the global ``np.random`` is caught by the workers' watch and seeded (see ``seeding.py``).

Targets (masks, bounding boxes, keypoints, label fields) are seeded the same way: in a loader,
the entries of ``y`` filed under albumentations' names (``target_names``) reach the workers with
their image (``augment_targets``); by hand, :meth:`FromAlbumentations.apply`. Boxes and
keypoints vary in number, a batch does not: they travel as fixed-size arrays padded with rows
of -1 (the dense layout of Keras' bounding-box utilities), and come back padded the same way:
boxes first, keypoints each in its own row (a pose's row k is joint k), -1 where dropped.
"""

from __future__ import annotations

import copy
import json
import os
import random
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError, OutputMismatchError
from ..params import check_image, convert, outside
from ..targets.boxes import check_carried, format_of
from ..targets.formats import ALBUMENTATIONS_FORMATS
from ..core import config_type

INSTALL = 'pip install "shmaug[albumentations]"'


def import_albumentations() -> ModuleType:
    """albumentations, imported without its update check, or an error that says how to install.

    albumentations asks PyPI for its latest version on import (a network call in every spawned
    worker, up to 2 s each); its own switch ``NO_ALBUMENTATIONS_UPDATE`` turns that off, for
    this process and the workers it starts.
    """
    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
    try:
        import albumentations
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"shmaug.from_albumentations needs the optional package `albumentations`, which "
            f"could not be imported ({exc}). Fix: `{INSTALL}` (or `pip install "
            f"albumentations`).",
            name="albumentations",
        ) from exc
    module: ModuleType = albumentations
    return module


def _edge_in(image: np.ndarray) -> np.ndarray:
    """What albumentations can take: float16 (which OpenCV's warps refuse) becomes float32,
    exactly; a read-only view (a worker's input) becomes a copy, since some transforms write
    into their input."""
    if image.dtype == np.float16:
        return convert(image, np.float32)
    if image.dtype == np.bool_:  # a boolean mask: OpenCV's warps take uint8
        return image.astype(np.uint8)
    return image if image.flags.writeable else image.copy()


def _edge_out(out: Any, like: np.ndarray, who: str, image: bool = True) -> np.ndarray:
    """What albumentations returned for ``like``: an image in the dtype the pipeline made
    (``A.Normalize`` and ``A.ToFloat`` make float32 of uint8: cast back, they were garbage),
    but for float16 taken in as float32 (``_edge_in``); a mask in its own dtype."""
    if not isinstance(out, np.ndarray):
        tensor = type(out).__module__.partition(".")[0] == "torch"
        raise OutputMismatchError(
            f"albumentations pipeline {who} expects an image array under 'image' in its "
            f"result; received {type(out).__name__}. " + (
                "Fix: leave ToTensorV2 out of the pipeline: the loader hands out numpy "
                "batches, channels last, which a torch loop turns into tensors itself "
                "(torch.from_numpy(xb).permute(0, 3, 1, 2)), or which Keras reads as they are."
                if tensor else "Return the image from the pipeline."))
    if like.dtype == np.bool_:
        return out.astype(np.bool_)
    ours = like.dtype == np.float16 and out.dtype == np.float32
    if out.dtype == like.dtype or image and not ours:
        return out
    return convert(out, like.dtype)


@dataclass(frozen=True, eq=False)
class FromAlbumentations:
    """An albumentations pipeline as an op ``(image, rng) -> image``; build it with
    :func:`from_albumentations`.

    Two are equal when their configs are (albumentations' ``to_dict`` and the value range),
    so ``from_config(op.to_config()) == op``; a pipeline that albumentations cannot write
    (``A.Lambda``) is equal only to itself.
    """

    pipeline: Any  # a private deep copy: the op owns its random state
    value_range: tuple[float, float] | None = None  # the data's, as the loader declares it
    # Scratch for albumentations' Python-side draws, fully re-seeded on every call (so no
    # state survives from one sample to the next); rebuilt, not pickled.
    _py_random: random.Random = field(default_factory=random.Random, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.pipeline, self.value_range))

    def _key(self) -> Any:
        """What equality compares: the config as JSON reads it back, in nested tuples, or the
        op itself when albumentations cannot write the pipeline. Numbers compare by value
        (and hash alike): albumentations writes a rebuilt ``Affine``'s ``[0, 0]`` as
        ``[0.0, 0.0]``."""
        try:
            return _hashable(json.loads(json.dumps(self.to_config(), default=repr)))
        except ArgumentError:
            return id(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FromAlbumentations):
            return NotImplemented
        return other is self or self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def _label_fields(self) -> dict[str, str]:
        """Each label field of the pipeline's bbox / keypoint params -> "bboxes" / "keypoints"."""
        processors = getattr(self.pipeline, "processors", None) or {}
        return {label: kind for kind, processor in processors.items()
                for label in processor.params.label_fields or ()}

    @property
    def required_targets(self) -> tuple[str, ...]:
        """The targets the pipeline cannot run without ("bboxes", "keypoints" and their label
        fields), if any."""
        processors = getattr(self.pipeline, "processors", None) or {}
        return (*sorted(processors), *self._label_fields)

    @property
    def target_names(self) -> frozenset[str]:
        """The names under which a loader's ``y`` entries are augmented with their image
        (``bboxes`` and ``keypoints`` too without params, to refuse them in ``check_targets``)."""
        extra = getattr(self.pipeline, "additional_targets", None) or {}
        return frozenset({"mask", "masks", "bboxes", "keypoints", *self._label_fields, *extra})

    def check_targets(self, targets: dict[str, np.ndarray],
                      image_shape: tuple[int, ...] | None) -> None:
        """Refuse, before any worker starts, targets this pipeline would get wrong: boxes or
        keypoints without their params (albumentations would read them as another format),
        extra box / keypoint targets (their padding is not known), masks of another size."""
        processors = getattr(self.pipeline, "processors", None) or {}
        extra = getattr(self.pipeline, "additional_targets", None) or {}
        for name, rows in targets.items():
            kind = extra.get(name, name)
            fix = "rename the key if it is not what albumentations calls so"
            if kind in ("bboxes", "keypoints") and name != kind:
                raise ArgumentError(
                    f"`y[{name!r}]` is an extra {kind} target of the pipeline; a loader passes "
                    f"only `{kind}` itself (padded with rows of -1) through albumentations. "
                    f"Fix: put them in one `{kind}` array, or {fix}.")
            if kind in ("bboxes", "keypoints") and kind not in processors:
                params = "bbox_params" if kind == "bboxes" else "keypoint_params"
                raise ArgumentError(
                    f"`y[{name!r}]` holds {kind}, but the albumentations pipeline has no "
                    f"{params}, so they would not follow their images. Fix: pass "
                    f"A.Compose([...], {params}=...) or {fix}.")
            if kind == "bboxes":  # (boxes a reader wrote say their format: Boxes)
                theirs = str(getattr(processors["bboxes"].params, "format", ""))
                wanted = {v: k for k, v in ALBUMENTATIONS_FORMATS.items()}
                own = format_of(rows) or ""
                check_carried(name, rows, ALBUMENTATIONS_FORMATS.get(theirs, theirs) or None,
                              f"pass A.BboxParams(format={wanted[own]!r})" if own in wanted
                              else None)
            least = 2 if kind == "keypoints" else 4
            if kind in ("bboxes", "keypoints") and (rows.ndim != 3 or rows.shape[2] < least):
                raise ArgumentError(
                    f"`y[{name!r}]` must hold (samples, rows, >= {least}) {kind}, padded with "
                    f"rows of -1; received shape {rows.shape}. Fix: pad each sample's {kind} "
                    f"to one count, or {fix}.")
            wide = kind == "masks"
            if kind in ("mask", "masks") and image_shape is not None and \
                    rows.shape[1 + wide:3 + wide] != image_shape[:2]:
                raise ArgumentError(
                    f"`y[{name!r}]` has rows of shape {rows.shape[1:]}, but a {kind} needs its "
                    f"image's height and width {image_shape[:2]}. Fix: {fix}, or resize it "
                    f"to the images.")

    def with_value_range(self, value_range: tuple[float, float]) -> FromAlbumentations:
        """This op told the range the loader's data is in: checked against albumentations'
        own convention (uint8 0..255, floats 0..1) on the first image it sees."""
        return FromAlbumentations(self.pipeline, (float(value_range[0]), float(value_range[1])))

    # Float images must lie in this range whatever `value_range` says: albumentations' float
    # ops clip there. A loader checks the data against it up front
    # (``shmaug.engine.config.inputs``).
    float_range = (0.0, 1.0)

    @staticmethod
    def float_range_error(dtype: Any, seen: str) -> ArgumentError:
        """The one message for float data albumentations cannot take (``seen``: what the data
        or the arguments say), with the fixes that work."""
        return ArgumentError(
            f"albumentations takes {np.dtype(dtype)} images only in [0, 1] (its float ops clip "
            f"them there, so anything brighter would come back flattened), and {seen}; no "
            f"`value_range` carries other float data through it. Fix: rescale the images into "
            f"[0, 1] (e.g. x / 255, with no value_range), or convert them to uint8 (e.g. "
            f"x.astype(np.uint8) for data in 0..255), which albumentations takes in 0..255."
        )

    def _check_range(self, image: np.ndarray) -> None:
        if image.dtype.kind != "f":
            return
        if self.value_range not in (None, self.float_range):
            raise self.float_range_error(
                image.dtype, f"`value_range`={self.value_range} says these are not")
        if self.value_range is None:  # called by hand: a pass over the image (a loader binds
            low, high = float(np.min(image)), float(np.max(image))  # its range, checked at start)
            if outside(low, high, self.float_range):
                raise self.float_range_error(image.dtype, f"this image spans {low:g}..{high:g}")

    def _seeded(self, rng: np.random.Generator) -> Any:
        self._py_random.seed(int(rng.integers(0, 2**63)))
        self.pipeline.set_random_state(rng, self._py_random)
        return self.pipeline

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.required_targets:
            raise ArgumentError(
                f"this albumentations pipeline requires the targets "
                f"{list(self.required_targets)} (its bbox_params / keypoint_params) with each "
                f"image. Fix: give them to the loader in `y`, e.g. y={{'bboxes': boxes, "
                f"...}} (arrays padded with rows of -1), or call op.apply(rng, image=..., "
                f"bboxes=..., ...) on samples yourself."
            )
        check_image(image)
        self._check_range(image)
        out = self._seeded(rng)(image=_edge_in(image))["image"]
        return _edge_out(out, image, type(self.pipeline).__name__)

    def augment_targets(self, image: np.ndarray, targets: dict[str, np.ndarray],
                        rng: np.random.Generator) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One sample and its targets (a loader's rows of ``y`` under ``target_names``),
        augmented together; boxes, keypoints and their labels stay padded to their length.

        What a loader's workers call when ``y`` holds such targets (see ``SliceRunner``).
        """
        check_image(image)
        self._check_range(image)
        owner = {**self._label_fields, "bboxes": "bboxes", "keypoints": "keypoints"}
        real = {kind: _real_rows(targets[kind]) for kind in ("bboxes", "keypoints")
                if kind in targets}
        data = {}
        for name, rows in targets.items():  # boxes, keypoints and their labels: real rows only
            kind = owner.get(name)
            data[name] = rows[real[kind]] if kind in real else rows
        if "keypoints" in real:  # a keypoint's row is what it is (a pose's left wrist): each
            # carries its row in a last column, which albumentations keeps through every step
            kept = np.asarray(data["keypoints"])
            columns = kept.shape[-1]  # (as given: the row's coordinates and any extra)
            data["keypoints"] = np.c_[kept.reshape(len(kept), columns),
                                      np.flatnonzero(real["keypoints"])]
        result = self.apply(rng, image=image, **data)
        at: dict[str, np.ndarray] = {}
        if "keypoints" in real:  # (none may be left: an image of no one, or all cropped off)
            moved = np.asarray(result["keypoints"], np.float64).reshape(
                len(result["keypoints"]), columns + 1)
            result["keypoints"], at["keypoints"] = moved[:, :-1], moved[:, -1].astype(np.int64)
        made = {}
        for name, rows in targets.items():
            made[name] = (_padded(result[name], rows, name, at.get(owner[name]))
                          if name in owner else result[name])
        return result["image"], made

    def apply(self, rng: np.random.Generator, **data: Any) -> dict[str, Any]:
        """Run the pipeline on ``image`` and its targets (``mask``, ``bboxes``, ``keypoints``,
        label fields, as albumentations takes them), seeded from ``rng`` as ``__call__`` is.

        Returns:
            albumentations' result dict; ``mask`` comes back in the dtype given, ``image`` in
            the pipeline's (``A.Normalize`` makes float32 of uint8).

        Example:
            >>> out = op.apply(rng, image=img, mask=mask)  # doctest: +SKIP
            >>> out["image"], out["mask"]  # doctest: +SKIP
        """
        extra = getattr(self.pipeline, "additional_targets", None) or {}
        given = {k: v for k, v in data.items() if isinstance(v, np.ndarray) and (
            extra.get(k, k) in ("image", "mask", "masks"))}
        result: dict[str, Any] = dict(self._seeded(rng)(
            **{k: _edge_in(v) if k in given else v for k, v in data.items()}))
        for key, like in given.items():
            result[key] = _edge_out(result[key], like, type(self.pipeline).__name__,
                                    extra.get(key, key) == "image")
        return result

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict holding albumentations' own ``to_dict`` of the pipeline."""
        albumentations = import_albumentations()
        try:
            pipeline = albumentations.to_dict(self.pipeline)
        except Exception as exc:  # e.g. A.Lambda, which albumentations cannot serialize
            raise ArgumentError(
                f"cannot write a config for this albumentations pipeline: "
                f"albumentations.to_dict failed with {type(exc).__name__}: {exc}. Fix: use "
                f"serializable transforms, or pickle the op instead of writing its config."
            ) from exc
        cfg = {"type": "albumentations", "pipeline": pipeline}
        return cfg if self.value_range is None else {**cfg, "value_range": list(self.value_range)}


def _hashable(value: Any) -> Any:
    """JSON data as nested tuples: a dict as its sorted items, a list as a tuple."""
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _real_rows(rows: np.ndarray) -> np.ndarray:
    """Which rows of a padded box / keypoint array are real: not all -1."""
    rows = np.asarray(rows)
    if not len(rows):  # (an image of no object: no row at all)
        return np.zeros(0, bool)
    real: np.ndarray = ~np.all(rows.reshape(len(rows), -1) == -1, axis=1)
    return real


def _padded(out: Any, like: np.ndarray, name: str, rows: np.ndarray | None = None
            ) -> np.ndarray:
    """albumentations' boxes / keypoints / labels for one sample, padded to ``like``'s length
    with -1 (or empty strings) in ``like``'s dtype: at ``rows`` (keypoints: the rows they came
    from), else first."""
    out = np.asarray(out)
    if rows is None and len(out) > len(like):
        raise OutputMismatchError(
            f"the albumentations pipeline returned {len(out)} rows of {name!r} but the "
            f"loader's array holds {len(like)} per sample. Fix: pad `y[{name!r}]` with rows "
            f"of -1 to the most the pipeline can return.")
    padded = np.full(like.shape, "" if like.dtype.kind in "US" else -1, like.dtype)
    if len(out):
        padded[np.arange(len(out)) if rows is None else rows] = out.reshape(
            (len(out), *like.shape[1:]))
    return padded


def _rebuild(pipeline: Any, value_range: tuple[float, float] | None = None) -> FromAlbumentations:
    import_albumentations()  # the update check stays off in a fresh (spawned) worker
    return FromAlbumentations(pipeline, value_range)


def from_albumentations(pipeline: Any) -> FromAlbumentations:
    """Run an existing ``albumentations.Compose`` (or single transform) as a shmaug op.

    The op is ``op(image, rng) -> image``: picklable (for spawned workers) and seeded per call
    from ``rng`` through albumentations' own ``set_random_state``, so in a loader its output
    depends only on (seed, epoch, sample index), for any ``workers`` or ``start_method``.
    float16 images are handed to albumentations as float32 (exactly) and come back as float16;
    floats are expected in [0, 1], as albumentations expects them. In a loader, entries of
    ``y`` named as albumentations names its targets (``mask``, ``bboxes``, ...) are augmented
    with their image (boxes and keypoints padded with rows of -1); by hand,
    ``op.apply(rng, image=..., mask=..., ...)``.

    Args:
        pipeline: an ``albumentations.Compose`` (any ``BaseCompose``) or a single transform.
            The op keeps a deep copy, so the caller's object keeps its own random state.

    Returns:
        A :class:`FromAlbumentations` op.

    Raises:
        ModuleNotFoundError: albumentations is not installed (the message says how).
        ArgumentTypeError: ``pipeline`` is not an albumentations transform.

    Example:
        >>> import albumentations as A  # doctest: +SKIP
        >>> op = shmaug.from_albumentations(A.Compose([A.Rotate(limit=10), A.GaussNoise()]))
        >>> loader = shmaug.Loader(x, y, augment=op, workers=2, seed=0)  # doctest: +SKIP
    """
    albumentations = import_albumentations()
    kinds = (albumentations.BaseCompose, albumentations.BasicTransform)
    if not isinstance(pipeline, kinds):
        raise ArgumentTypeError(
            f"`pipeline` expects an albumentations.Compose (or another albumentations "
            f"transform); received {pipeline!r} ({type(pipeline).__name__}). Fix: pass "
            f"A.Compose([...]); for a plain function use shmaug.from_array(fn)."
        )
    return FromAlbumentations(copy.deepcopy(pipeline))


@config_type("albumentations")
def _from_albumentations_config(cfg: dict[str, Any]) -> FromAlbumentations:
    op = from_albumentations(import_albumentations().from_dict(cfg["pipeline"]))
    vr = cfg.get("value_range")
    return op if vr is None else op.with_value_range(tuple(vr))
