"""A user's function run in place of a pipeline it may call: a ``shmaug.Sequence`` subclass's
``augment`` override, which keeps the plan of the ``augment`` argument.

Why: a subclass that overrides ``augment`` and calls ``super().augment(image, rng)`` runs the
argument's pipeline, so the pipeline's plan still holds: the targets it moves with each image,
its decode-time crop (the override receives the photo undecoded, as the pipeline would), its
value range. ``Declared`` is that override as the engine sees it: its ``plan()`` is the
pipeline's, its ``check_targets`` the pipeline's check, and it runs the override.

Targets: the override sees only the image, so ``Declared.augment_targets`` hands the sample's
targets to the pipeline through a context variable, and ``run`` (what the default
``Sequence.augment`` calls) moves them with the image. An override that never reaches the
pipeline while targets wait is refused on its first sample, naming the fix, rather than
handing the targets back unmoved. An override that reads the pixels of an undecoded photo
itself gets them decoded whole (``Undecoded.__array__``), counted in ``stats()`` as a whole
decode (``shmaug.whole_decodes``).
"""

from __future__ import annotations

import contextvars
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import ArgumentError
from .core import STILL
from .plan import Plan, plan_of
from .targets import box_moves

PipelineFn = Callable[[Any, np.random.Generator], Any]


@dataclass(slots=True)
class _Carried:
    """The targets of the sample being made, waiting for the pipeline to move them."""

    targets: dict[str, np.ndarray]
    later: box_moves.Noted | None  # where a worker's task takes their boxes, if it does
    moved: dict[str, np.ndarray] | None = None


_CARRIED: contextvars.ContextVar[_Carried | None] = contextvars.ContextVar(
    "shmaug_carried_targets", default=None)


def run(pipeline: PipelineFn | None, image: Any, rng: np.random.Generator) -> Any:
    """``pipeline`` on ``image`` (``image`` itself where there is none), moving the targets an
    enclosing ``Declared.augment_targets`` carries, with the same draw."""
    carried = _CARRIED.get()
    if carried is not None and carried.moved is None and hasattr(pipeline, "augment_targets"):
        with box_moves.deferring(carried.later):
            out, carried.moved = pipeline.augment_targets(image, carried.targets, rng)  # type: ignore[union-attr]
        return out
    return image if pipeline is None else pipeline(image, rng)


def refuse_blind(hook: PipelineFn, name: str, found: list[str]) -> None:
    """Refuse a mask, boxes or keypoints (``found``: their names in ``y``) beside an override
    ``hook`` (``name``) with no ``augment`` argument: a function of the user's, which may move
    pixels that no pipeline of its moves the targets with, unless it says it moves none
    (``targets = "still"`` on it, as ``register`` and ``from_array`` take it)."""
    if found and getattr(hook, "targets", None) != STILL:
        raise ArgumentError(
            f"`y` holds {', '.join(repr(f) for f in found)}, which lies on the image, and "
            f"{name} overrides `augment` with no `augment` argument: if it moves pixels, "
            f"nothing moves those targets with them, and they come back no longer on their "
            f"image. Fix: pass the steps that move pixels as augment=shmaug.Compose([...], "
            f"bounding_box_format=...) and call `super().augment(image, rng)` in the "
            f"override, which moves the targets with them; an override that moves no pixel "
            f"(colour, noise) says so with `@shmaug.ops.still` above its def.")


class Declared:
    """``fn`` (an ``augment`` override) run instead of ``pipeline``, with ``pipeline``'s plan.

    ``name`` names the override in errors (``MySeq.augment``).
    """

    __slots__ = ("fn", "pipeline", "name")

    def __init__(self, fn: PipelineFn, pipeline: PipelineFn | None, name: str) -> None:
        self.fn = fn  # invariant: what runs on each sample
        self.pipeline = pipeline  # invariant: what ``super().augment`` runs (range bound)
        self.name = name

    def __call__(self, image: Any, rng: np.random.Generator) -> Any:
        return self.fn(image, rng)

    @property
    def __name__(self) -> str:  # what errors name: the override, not this wrapper
        return self.name

    def plan(self) -> Plan:
        """The pipeline's plan, about this override: it receives what the pipeline would."""
        return dataclasses.replace(plan_of(self.pipeline), pipeline=self)

    @property
    def boxes_together(self) -> bool:
        """The pipeline's: the override sees no target of its sample (a pipeline it calls
        itself moves its own boxes at once, ``box_moves.claimed``)."""
        return getattr(self.pipeline, "boxes_together", False) is True

    def check_targets(self, targets: dict[str, np.ndarray],
                      image_shape: tuple[int, ...] | None) -> None:
        check = getattr(self.pipeline, "check_targets", None)
        if check is not None:
            check(targets, image_shape)

    def augment_targets(self, image: Any, targets: dict[str, np.ndarray],
                        rng: np.random.Generator) -> tuple[Any, dict[str, np.ndarray]]:
        """The override on ``image``; the pipeline it calls moves ``targets`` with it."""
        with box_moves.claimed() as later:  # (for the pipeline's call, not the override's)
            carried = _Carried(targets, later)
            token = _CARRIED.set(carried)
            try:
                out = self.fn(image, rng)
            finally:
                _CARRIED.reset(token)
        if carried.moved is None:
            raise ArgumentError(
                f"{self.name} overrides `augment` and did not call `super().augment(image, "
                f"rng)`, but the `augment` argument moves the targets {sorted(targets)} with "
                f"each image: they would come back unmoved, no longer on their pixels. Fix: "
                f"call `super().augment(image, rng)` in the override (once per sample), or "
                f"put the override's work into the pipeline.")
        return out, carried.moved

    def __repr__(self) -> str:
        return f"{self.name} (over {self.pipeline!r})"
