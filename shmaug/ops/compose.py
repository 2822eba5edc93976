"""Composition: ``Compose``, ``OneOf``, ``Maybe`` and ``SomeOf``.

Owns the four pipeline containers. Each is a frozen dataclass, a callable ``(image, rng)``,
pickles by value and round-trips through ``to_config`` / ``from_config``. Members may be
:class:`~shmaug.ops.core.Op` objects, registered functions (or ``functools.partial`` of them,
turned into ``Op``), op names, other containers, ``from_pil`` wrappers, or any module-level
callable ``fn(image, rng)``.

``uses_global_rng`` is True when a member says it draws from the global ``random`` /
``np.random``, False when every member says it does not, None when a member does not say (the
loader then watches for draws and seeds those globals from the first one on).

``value_range`` (Keras' name) is the (low, high) the pixels lie in; a container binds it into
every member that takes one and has none, so it is said once for the whole pipeline. A loader
binds its own ``value_range`` the same way (``with_value_range``).

A ``Compose`` also moves what lies on its image: given a loader's ``y`` with masks, boxes or
keypoints (Keras' names, ``segmentation_masks`` and ``bounding_boxes``, or albumentations'),
its geometric ops move them as they move the pixels (``targets/``), read in the
``bounding_box_format`` and ``keypoint_format`` it is given.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..deferred import Undecoded, takes_undecoded
from ..errors import ArgumentError, ArgumentTypeError, OutputMismatchError
from ..seeding import global_rng_use
from .params import ValueRange, bounds, convert, number, value_range as checked_range
from .core import (WARPED, Op, as_op, read_only, config_type, from_config, members, to_config,
                   with_value_range)
from .targets import formats
from .targets.moves import made_by, noting
from .targets.boxes import check_carried
from .targets import box_moves
from .targets.sample import MASK_NAMES, NAMES, TargetOptions, move, unnested


def _ranged(container: Any, members: tuple[Any, ...]) -> tuple[Any, ...]:
    """Validate the container's ``value_range`` and bind it into ``members``."""
    vr = checked_range(container.value_range)
    object.__setattr__(container, "value_range", vr)
    return tuple(with_value_range(m, vr) for m in members)


def _with_range(container: Any, value_range: ValueRange) -> Any:
    """``container`` with ``value_range`` when it has none yet (its own range wins)."""
    if container.value_range is not None:
        return container
    return dataclasses.replace(container, value_range=value_range)


def _range_config(container: Any) -> dict[str, Any]:
    return {} if container.value_range is None else {"value_range": list(container.value_range)}


def _range_of(cfg: dict[str, Any]) -> Any:
    vr = cfg.get("value_range")
    return None if vr is None else tuple(vr)


def _members(ops: Any, who: str) -> tuple[Callable[..., Any], ...]:
    if isinstance(ops, (str, bytes)) or not isinstance(ops, Iterable):
        raise ArgumentTypeError(
            f"`ops` of {who} expects a list of ops; received {ops!r} ({type(ops).__name__}). "
            f"Wrap a single op in a list: {who}([op])."
        )
    members = tuple(as_op(op) for op in ops)
    if not members:
        raise ArgumentError(f"`ops` of {who} expects at least one op; received an empty list.")
    return members


def _flip_indices(pipe: Compose) -> tuple[int, ...] | None:
    """``pipe``'s keypoint_flip_indices, checked; else those of a Compose inside it (a pose
    pipeline wrapped to add a step: only the outer Compose moves the targets, and its rows
    would have gone unswapped). Two that differ are refused."""
    own = formats.check_flip_indices(pipe.keypoint_flip_indices)
    inner = {tuple(m.keypoint_flip_indices) for m in members(pipe)
             if isinstance(m, Compose) and m is not pipe and m.keypoint_flip_indices is not None}
    if own is None and len(inner) <= 1:
        return next(iter(inner), None)
    if inner - {own}:
        raise ArgumentError(
            f"`keypoint_flip_indices` is {own} here but {sorted(inner - {own})} in a Compose "
            f"inside: a sample's keypoints swap rows one way. Fix: give the same indices, or "
            f"only to the outer Compose.")
    return own


def _global(ops: Iterable[Any]) -> bool | None:
    return global_rng_use(*ops)


@read_only
@dataclass(frozen=True, slots=True)
class Compose:
    """Apply every op in order, and move the targets on the image with it.

    Args:
        ops: the ops, in order.
        value_range: the (low, high) the pixels lie in (Keras' name); None: by dtype.
        bounding_box_format: the format of the boxes in a loader's ``y``, as Keras' layers
            take it (``"xyxy"``, ``"rel_xywh"``, ... : ``targets.formats.BOX_FORMATS``);
            None takes the format the boxes carry (a reader's ``Boxes``), and one other
            than theirs is refused before anything starts.
        keypoint_format: ``"xy"``, ``"yx"``, ``"rel_xy"`` or ``"rel_yx"``.
        min_visibility: a box keeps less than this fraction of its moved area inside the
            image: it is dropped (albumentations' name). One number in [0, 1], not a range.
        min_area: a box keeps fewer pixels than this inside the image: it is dropped.
        mask_fill: a mask's value where a warp with a constant border brings nothing in (an
            ignore label, say); the image's own border otherwise.
        keypoint_flip_indices: for keypoints whose row says what they are (a pose's joints):
            ``flip[k]`` is the row keypoint k takes when the image is mirrored (a flip, or any
            move that turns it over), e.g. (0, 2, 1) for a nose and two eyes; pairs swap,
            so it is its own inverse. None: rows stay as they are (mmpose's
            ``flip_indices``).

    Example:
        >>> from shmaug.ops import Compose, Op
        >>> pipe = Compose([Op("rotate", degrees=(-10, 10)), Op("gaussian_blur")])
        >>> out = pipe(np.zeros((16, 16), np.uint8), np.random.default_rng(0))
    """

    ops: Sequence[Any]  # normalized to a tuple of callables in __post_init__
    value_range: ValueRange | None = None
    bounding_box_format: str | None = None
    keypoint_format: str | None = None
    min_visibility: float = 0.0
    min_area: float = 0.0
    mask_fill: float = 0.0
    keypoint_flip_indices: Sequence[int] | None = None
    _targets: TargetOptions = field(init=False, repr=False, compare=False)  # the six above

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", _ranged(self, _members(self.ops, "Compose")))
        object.__setattr__(self, "bounding_box_format", formats.check_format(
            self.bounding_box_format, "bounding_box_format", formats.BOX_FORMATS))
        object.__setattr__(self, "keypoint_format", formats.check_format(
            self.keypoint_format, "keypoint_format", formats.KEYPOINT_FORMATS))
        object.__setattr__(self, "min_visibility",
                           number(self.min_visibility, "min_visibility", 0.0, 1.0))
        object.__setattr__(self, "min_area", number(self.min_area, "min_area", 0.0))
        object.__setattr__(self, "mask_fill", number(self.mask_fill, "mask_fill"))
        object.__setattr__(self, "keypoint_flip_indices", _flip_indices(self))
        object.__setattr__(self, "_targets", TargetOptions(
            *(getattr(self, name) for name in _TARGET_OPTIONS)))

    def with_value_range(self, value_range: ValueRange) -> Compose:
        """This pipeline with ``value_range``, where it has none of its own; its own (given
        to it, or its Keras layers') is kept: to change it, build it with another."""
        result: Compose = _with_range(self, value_range)
        return result

    def with_bounding_box_format(self, bounding_box_format: str) -> Compose:
        """The same pipeline reading boxes in ``bounding_box_format`` (the format a
        source's boxes carry), where it names none itself; its own is kept (and checked
        against the boxes' by ``check_targets``)."""
        if self.bounding_box_format is not None:
            return self
        return dataclasses.replace(self, bounding_box_format=bounding_box_format)

    @property
    def uses_global_rng(self) -> bool | None:
        return _global(self.ops)

    @property
    def boxes_together(self) -> bool:
        """Whether a worker may move the boxes of a task's samples together, once its images
        are made (``targets.box_moves.deferring``): shmaug's ``augment_targets`` reads none of
        them (a subclass's own may)."""
        return type(self).augment_targets is Compose.augment_targets

    @property
    def takes_undecoded(self) -> bool:
        """Whether the first op crops at decode time: a source keeping photos at their own
        size then hands it JPEGs undecoded (``shmaug.deferred``)."""
        return bool(self.ops) and takes_undecoded(self.ops[0])

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        ops: Sequence[Any] = self.ops
        if isinstance(image, Undecoded):  # only the first op may decode part of it
            if self.takes_undecoded:
                image, ops = made_by(ops[0], image, rng), ops[1:]
            else:
                image = image.decode()
        # float16 once in and once out: each op would otherwise convert to float32 (OpenCV
        # has no float16 kernels) and back, which made pipelines 2-3x slower on float16.
        half = image.dtype == np.float16
        if half:
            image = convert(image, np.float32)
        for op in ops:
            image = made_by(op, image, rng)
        return convert(np.asarray(image), np.float16) if half else image

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict; ``shmaug.from_config`` rebuilds an equal pipeline."""
        options = {name: getattr(self, name) for name in _TARGET_OPTIONS
                   if getattr(self, name) != getattr(_NO_OPTIONS, name)}
        return {"type": "Compose", "ops": [to_config(op) for op in self.ops],
                **_range_config(self), **options}

    def __repr__(self) -> str:
        # The target options only where set: most pipelines move no target.
        options = "".join(f", {name}={getattr(self, name)!r}" for name in _TARGET_OPTIONS
                          if getattr(self, name) != getattr(_NO_OPTIONS, name))
        return f"Compose(ops={self.ops!r}, value_range={self.value_range!r}{options})"

    # -- targets: what lies on the image ----------------------------------------------------

    @property
    def target_names(self) -> frozenset[str]:
        """The names under which a loader's ``y`` holds targets this pipeline moves with its
        image, where it moves pixels at all; none where it moves none (they stay as they
        are, gathered beside the batch)."""
        warps = any(getattr(m, "targets", None) == WARPED for m in members(self))
        return NAMES if warps else frozenset()

    def check_targets(self, targets: dict[str, np.ndarray],
                      image_shape: tuple[int, ...] | None) -> None:
        """Refuse, before any worker starts, targets this pipeline would read wrong: boxes or
        keypoints in no format or another one, outside their image, masks of another size,
        labels that are not one per box, two sets of boxes (one would stay where it was)."""
        both = [name for name in ("boxes", "bboxes") if name in targets]
        if len(both) > 1:
            raise ArgumentError(
                f"`y` holds both {both[0]!r} and {both[1]!r}: a pipeline moves one set of boxes "
                f"per image, and the other would come back unmoved. Fix: keep one of them "
                f"({both[0]!r}, Keras' name, or {both[1]!r}, albumentations').")
        for name, rows in targets.items():
            if name in MASK_NAMES:
                formats.check_mask(name, rows, image_shape, stacked=name == "masks",
                                   fill=self.mask_fill)
            elif name == "keypoints":
                formats.check_keypoints(name, rows, self.keypoint_format, image_shape)
                formats.check_flip_rows(name, rows, self._targets.keypoint_flip_indices)
            elif name in ("boxes", "bboxes"):
                check_carried(name, rows, self.bounding_box_format)
                labels = targets.get("box_labels")
                # the boxes' own shape first: the labels' is read against it
                formats.check_boxes(name, rows, self.bounding_box_format, image_shape, labels)
                if labels is not None:
                    formats.check_box_labels("labels", labels, rows)

    def augment_targets(self, image: np.ndarray, targets: dict[str, np.ndarray],
                        rng: np.random.Generator) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One sample and its targets (a loader's rows of ``y`` under ``target_names``, or
        Keras' ``{"bounding_boxes": {"boxes": b, "labels": l}}``), moved together with one
        draw; the image is the one ``pipe(image, rng)`` makes.

        Example:
            >>> out, moved = pipe.augment_targets(image, {"mask": mask}, rng)  # doctest: +SKIP
        """
        shape = tuple(image.shape)  # an undecoded photo's too: its header's
        targets, nest = unnested(targets, shape)
        # (a decode-time crop notes its window's move; a worker's task may take the boxes)
        with box_moves.claimed() as later, noting() as moves:
            out = self(image, rng)
        ends = moves[-1].size if moves else shape[:2]
        if tuple(out.shape[:2]) != tuple(ends[:2]):
            raise OutputMismatchError(
                f"The pipeline made a {out.shape[1]}x{out.shape[0]} image (width x height), "
                f"but its targets were moved to {ends[1]}x{ends[0]}: an op changed the image's "
                f"size without moving them (an op registered with targets='still' that pads, "
                f"crops or resizes), and masks or boxes would no longer lie on their pixels. "
                f"Fix: make its size change through shmaug's own ops inside it (e.g. "
                f"shmaug.ops.resize, shmaug.ops.crop) and register it with "
                f"targets='warped', or keep its image's size. An op that puts moved copies "
                f"of its image together (a mosaic) has targets no move can follow: register "
                f"it with targets='blended', which is refused beside them.")
        return out, nest(move(targets, moves, shape, self._targets, later))


@read_only
@dataclass(frozen=True, slots=True)
class OneOf:
    """Apply exactly one op, picked per call (uniformly, or by ``weights``).

    Example:
        >>> pick = OneOf(["rotate", "shear"], weights=[3, 1])
    """

    ops: Sequence[Any]  # normalized to a tuple of callables in __post_init__
    weights: Sequence[float] | None = None  # a tuple once checked
    value_range: ValueRange | None = None
    _cum: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ops = _ranged(self, _members(self.ops, "OneOf"))
        object.__setattr__(self, "ops", ops)
        if self.weights is None:
            cum = tuple((i + 1) / len(ops) for i in range(len(ops)))
        else:
            w = tuple(float(x) for x in self.weights)
            if len(w) != len(ops) or not all(0 <= x < math.inf for x in w) or sum(w) <= 0:
                raise ArgumentError(
                    f"`weights` of OneOf expects {len(ops)} finite non-negative numbers with a "
                    f"positive sum (one per op); received {self.weights!r}. Give one weight per "
                    f"op.")
            object.__setattr__(self, "weights", w)
            total = sum(w)
            cum = tuple(float(c) / total for c in np.cumsum(w))
        object.__setattr__(self, "_cum", cum)

    def with_value_range(self, value_range: ValueRange) -> OneOf:
        result: OneOf = _with_range(self, value_range)
        return result

    @property
    def uses_global_rng(self) -> bool | None:
        return _global(self.ops)

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        i = min(bisect.bisect_right(self._cum, rng.random()), len(self.ops) - 1)
        result: np.ndarray = made_by(self.ops[i], image, rng)
        return result

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict; ``shmaug.from_config`` rebuilds an equal pipeline."""
        weights = None if self.weights is None else list(self.weights)
        return {"type": "OneOf", "ops": [to_config(op) for op in self.ops], "weights": weights,
                **_range_config(self)}


@read_only
@dataclass(frozen=True, slots=True)
class Maybe:
    """Apply ``op`` with probability ``p``, else return the image unchanged.

    Example:
        >>> flip = Maybe("hflip", p=0.5)
    """

    op: Callable[..., Any] | str  # an op's name too: made an op in __post_init__
    p: float = 0.5
    value_range: ValueRange | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", _ranged(self, (as_op(self.op),))[0])
        object.__setattr__(self, "p", number(self.p, "p", 0.0, 1.0))

    def with_value_range(self, value_range: ValueRange) -> Maybe:
        result: Maybe = _with_range(self, value_range)
        return result

    @property
    def uses_global_rng(self) -> bool | None:
        return _global((self.op,))

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if rng.random() < self.p:
            result: np.ndarray = made_by(cast(Callable[..., Any], self.op), image, rng)
            return result
        return image

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict; ``shmaug.from_config`` rebuilds an equal pipeline."""
        return {"type": "Maybe", "op": to_config(self.op), "p": self.p, **_range_config(self)}


@read_only
@dataclass(frozen=True, slots=True)
class SomeOf:
    """Apply ``n`` distinct ops (``n`` fixed or an inclusive ``(low, high)`` range).

    The chosen ops run in the order they are listed, unless ``random_order`` is true.

    Example:
        >>> some = SomeOf(["gaussian_blur", "gamma", "gaussian_noise"], n=(1, 2))
    """

    ops: Sequence[Any]  # normalized to a tuple of callables in __post_init__
    n: int | Sequence[int] = 1  # or (low, high): a tuple once checked
    random_order: bool = False
    value_range: ValueRange | None = None

    def __post_init__(self) -> None:
        ops = _ranged(self, _members(self.ops, "SomeOf"))
        object.__setattr__(self, "ops", ops)
        lo, hi = bounds(self.n, "n", 0, len(ops))
        if lo != int(lo) or hi != int(hi):
            raise ArgumentError(
                f"`n` of SomeOf expects whole numbers in [0, {len(ops)}]; received {self.n!r}."
            )
        object.__setattr__(self, "n", int(lo) if lo == hi else (int(lo), int(hi)))

    def with_value_range(self, value_range: ValueRange) -> SomeOf:
        result: SomeOf = _with_range(self, value_range)
        return result

    @property
    def uses_global_rng(self) -> bool | None:
        return _global(self.ops)

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = self.n if isinstance(self.n, int) else int(rng.integers(self.n[0], self.n[1] + 1))
        picked = rng.permutation(len(self.ops))[:k]
        for i in picked if self.random_order else np.sort(picked):
            image = made_by(self.ops[int(i)], image, rng)
        return image

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict; ``shmaug.from_config`` rebuilds an equal pipeline."""
        n = self.n if isinstance(self.n, int) else list(self.n)
        ops = [to_config(op) for op in self.ops]
        return {"type": "SomeOf", "ops": ops, "n": n, "random_order": self.random_order,
                **_range_config(self)}


_TARGET_OPTIONS = ("bounding_box_format", "keypoint_format", "min_visibility", "min_area",
                   "mask_fill", "keypoint_flip_indices")  # TargetOptions' fields, in order
_NO_OPTIONS = TargetOptions()  # the defaults, which a config leaves out


def _members_of(cfg: dict[str, Any]) -> tuple[Any, ...]:
    """The members a pipeline's config lists under ``ops``, each built from its config."""
    ops = cfg["ops"]
    if not isinstance(ops, (list, tuple)):
        raise ArgumentError(
            f"`config['ops']` of type {cfg['type']!r} must be a list of its members' configs; "
            f"received {ops!r}. Fix: a list, e.g. [{{'type': 'Op', 'name': 'hflip'}}].")
    return tuple(from_config(c) for c in ops)


@config_type("Compose")
def _compose(cfg: dict[str, Any]) -> Compose:
    return Compose(_members_of(cfg), value_range=_range_of(cfg),
                   **{name: cfg[name] for name in _TARGET_OPTIONS if name in cfg})


@config_type("OneOf")
def _one_of(cfg: dict[str, Any]) -> OneOf:
    return OneOf(_members_of(cfg), weights=cfg.get("weights"),
                 value_range=_range_of(cfg))


@config_type("Maybe")
def _maybe(cfg: dict[str, Any]) -> Maybe:
    return Maybe(from_config(cfg["op"]), p=cfg.get("p", 0.5), value_range=_range_of(cfg))


@config_type("SomeOf")
def _some_of(cfg: dict[str, Any]) -> SomeOf:
    n = cfg.get("n", 1)
    return SomeOf(
        _members_of(cfg),
        n=tuple(n) if isinstance(n, list) else n,
        random_order=bool(cfg.get("random_order", False)),
        value_range=_range_of(cfg),
    )


def fixes_size(augment: Any) -> bool | None:
    """Whether ``augment`` gives every image one size whatever size it gets: True where it is,
    or holds at its top level, an op that says so (``Op.fixes_size``), or a ``Compose``
    that does, or a ``OneOf`` whose every choice does, or a ``Maybe`` with ``p=1`` of one
    that does; False where it is made of ops alone and none does; None where it cannot say (a
    function of the user's)."""
    if isinstance(augment, Op):
        return augment.fixes_size
    if isinstance(augment, Compose):
        said = [fixes_size(m) for m in augment.ops]
        return True if True in said else None if None in said else False
    if isinstance(augment, OneOf):
        said = [fixes_size(m) for m in augment.ops]
        return True if all(said) else None if None in said else False
    if isinstance(augment, Maybe):
        return fixes_size(augment.op) if augment.p >= 1 else False
    if isinstance(augment, SomeOf):
        return False
    return None

