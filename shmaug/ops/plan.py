"""What a pipeline does, asked once: the one answer the engine reads (issue 57).

Why: the engine must know, before any worker starts, which entries of ``y`` a pipeline moves
with each image, whether it gives every photo one size, whether it takes a photo undecoded
(a decode-time crop), whether it takes a value range, and what it cannot do to targets. It
used to learn this by probing attributes and walking pipeline trees of its own; a probe that
missed dropped a feature without a word. ``plan_of(augment)`` answers all of it here, where
the ops, the containers and the interop wrappers live; the engine imports no container class
and asks nothing else. Anything may declare its own plan with a ``plan()`` method
(``ops.declared.Declared``, a ``Sequence`` subclass's override, does: its pipeline's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..deferred import takes_undecoded
from ..errors import ArgumentError, from_shmaug, got
from .compose import Compose, Maybe, OneOf, SomeOf, fixes_size
from .core import BLENDED, STILL, WARPED, Op, members
from .interop.albumentations import FromAlbumentations
from .targets.sample import MASK_NAMES


_CONTAINERS = (Compose, OneOf, Maybe, SomeOf)


@dataclass(frozen=True, slots=True)
class Plan:
    """What ``pipeline`` does, by concern (``plan_of`` computes it)."""

    pipeline: Any  # what the answers are about (None: no augmentation)
    moves: frozenset[str]  # the names in ``y`` it moves with their image
    required: tuple[str, ...]  # the targets it must be given (albumentations' bbox_params)
    takes_undecoded: bool  # its first op crops at decode time (``shmaug.deferred``)
    takes_undrawn: bool  # it draws masks where it moves them (``targets.sample.Undrawn``)
    fixes_size: bool | None  # every output one size; None: it cannot say (a user function)
    ranged: bool  # it takes a value range (shmaug's ops): the data is checked against it
    # its first step is a function of the user's that takes no value range (a windowing or a
    # cast): the data reaches it as it is, and the ops after it get what it makes
    takes_raw: bool
    value_range: tuple[float, float] | None  # the range bound into it, if any
    fixed_float: Any  # a member taking floats only in a fixed range (albumentations), or None
    kinds: tuple[tuple[Any, str | None], ...]  # each leaf member, and its target kind

    @property
    def moves_pixels(self) -> bool:
        """Whether any member may move pixels (what lies on the image must follow them)."""
        return any(kind != STILL for _, kind in self.kinds)

    def reading_boxes(self, fmt: str | None) -> Plan:
        """This plan for boxes that carry their format ``fmt`` (a reader's ``Boxes``): a
        pipeline that takes one and names none reads them so, needing none; one that names
        another is refused by ``check_targets``."""
        take = getattr(self.pipeline, "with_bounding_box_format", None)
        return self if fmt is None or not callable(take) else plan_of(take(fmt))

    def check_targets(self, targets: dict[str, np.ndarray],
                      image_shape: tuple[int, ...] | None) -> None:
        """Refuse targets the pipeline would read wrong (their format, sizes, labels)."""
        check = getattr(self.pipeline, "check_targets", None)
        if check is not None:
            check(targets, image_shape)

    def refuse_unmoved(self, found: list[str]) -> None:
        """Refuse a mask, boxes or keypoints (``found``: their names in ``y``) the pipeline
        would not keep on its image: a member that moves pixels and cannot say how (a
        function of the user's that declares nothing, AugMix's blend of copies moved
        differently), a warp outside a ``Compose`` (which reads the boxes' format), or an
        albumentations pipeline inside one (which gets the image alone). A misaligned mask
        trains a model on wrong answers without a sign."""
        pipeline = self.pipeline
        if pipeline is None or not found or isinstance(pipeline, FromAlbumentations):
            return  # (albumentations checks its own targets: ``check_targets``)
        said = ", ".join(repr(f) for f in found)
        own = getattr(pipeline, "target_names", None)
        if not isinstance(pipeline, Compose) and own is not None and \
                callable(getattr(pipeline, "augment_targets", None)):
            missing = [f for f in found if f not in own]
            if missing:  # (ops.md's protocol: an object that moves its targets itself)
                raise ArgumentError(
                    f"`y` holds {missing}, which `augment` ({got(pipeline)}) does not name in "
                    f"its target_names {sorted(own)}: they would not move with its image. "
                    f"Fix: add them to its target_names and return them from its "
                    f"augment_targets.")
            return
        inner = [m for m, kind in self.kinds if kind != STILL and not isinstance(
            m, FromAlbumentations) and callable(getattr(m, "augment_targets", None))]
        if inner:
            raise ArgumentError(
                f"`y` holds {said}, and `augment` holds {got(inner[0])}, which moves targets "
                f"itself (augment_targets), inside a {type(pipeline).__name__}, which calls it "
                f"on the image alone: they would stay where they were. Fix: pass it as "
                f"`augment` itself (with the other steps inside it).")
        if any(isinstance(m, FromAlbumentations) for m, _ in self.kinds):
            raise ArgumentError(
                f"`y` holds {said}, and `augment` holds an albumentations pipeline inside a "
                f"{type(pipeline).__name__}, which passes it the image alone: the targets "
                f"would not move with it. Fix: pass the albumentations pipeline as `augment` "
                f"itself, with the other steps inside its A.Compose.")
        if not self.moves_pixels:
            return
        for member, kind in self.kinds:
            if kind not in (STILL, WARPED):
                name = member.name if isinstance(member, Op) else got(member)
                why = ("blends copies of the image moved differently, which no target can "
                       "follow" if kind == BLENDED
                       else "does not say what it does to what lies on the image")
                raise ArgumentError(
                    f"`y` holds {said}, which lies on the image, and `augment` holds {name}, "
                    f"which {why}: they could come back where they were, no longer on their "
                    f"image. Fix: an op that moves no pixel says so, @shmaug.register(name, "
                    f"targets='still') (from_pil or from_array(fn, targets='still')); one "
                    f"that moves pixels through shmaug's geometric ops says targets='warped' "
                    f"(@shmaug.register(name, targets='warped')), or the "
                    f"pipeline is albumentations' (shmaug.from_albumentations), or an object "
                    f"that moves them itself (target_names and augment_targets); or leave "
                    f"{name} out.")
        if not isinstance(pipeline, Compose):
            masks = all(f in MASK_NAMES for f in found)
            formats = ", ".join(f"{kind}_format=..." for kind, names in (
                ("bounding_box", ("boxes", "bboxes")), ("keypoint", ("keypoints",)))
                if any(f in names for f in found))
            reads, fmt = (("carries them", "") if masks else
                          ("reads their format", f", {formats}"))
            raise ArgumentError(
                f"`y` holds {said}, which `augment` ({got(pipeline)}) moves with its image "
                f"only inside a Compose, which {reads}. Fix: pass augment="
                f"shmaug.Compose([...]{fmt}) around it.")


def plan_of(augment: Any) -> Plan:
    """The plan of ``augment`` (a pipeline, an op, a function of the user's, or None); one
    with a ``plan()`` of its own declares it."""
    declared = getattr(type(augment), "plan", None)
    if callable(declared) and not isinstance(augment, type):
        plan: Plan = augment.plan()
        return plan
    if augment is None:
        return Plan(None, frozenset(), (), False, False, False, False, False, None, None, ())
    own = getattr(augment, "value_range", None)
    leaves = tuple((m, getattr(m, "targets", None)) for m in members(augment)
                   if not isinstance(m, _CONTAINERS))
    return Plan(
        pipeline=augment,
        moves=frozenset(getattr(augment, "target_names", None) or ()),
        required=tuple(getattr(augment, "required_targets", None) or ()),
        takes_undecoded=takes_undecoded(augment),
        takes_undrawn=isinstance(augment, Compose),  # (its targets move by ``sample.move``)
        fixes_size=fixes_size(augment),
        ranged=hasattr(augment, "with_value_range"),
        takes_raw=_takes_raw(augment),
        value_range=None if own is None else (float(own[0]), float(own[1])),
        fixed_float=next((m for m in members(augment) if hasattr(m, "float_range_error")),
                         None),
        kinds=leaves,
    )


def _takes_raw(augment: Any) -> bool:
    """Whether the first step of ``augment`` (down nested Composes) is a function of the
    user's that takes no value range: an op registered outside shmaug without a
    ``value_range`` parameter, or a plain callable. It may change the data's range or dtype
    (Hounsfield units windowed to [0, 1], int16 cast to float32), so the data is not checked
    against the range of the ops after it."""
    first = augment
    while isinstance(first, Compose):
        first = first.ops[0]
    if isinstance(first, Op):
        fn, ranged = first.fn, first.takes_value_range
    else:  # (shmaug's own wrappers and containers are shmaug's: none takes the data raw)
        fn, ranged = first, hasattr(first, "with_value_range")
    return callable(fn) and not ranged and not from_shmaug(getattr(fn, "__module__", None))
