"""What the engine asks of a sample source: the one contract between the engine and
``shmaug.sources`` (or a user's own source), spelled out as protocols and asked in this module
only.

A source is an ``x`` with a length and a ``load`` method (``Source``): a worker calls
``x.load(i)`` for sample i, so ``x.load`` is what the engine sends its workers (for
``ImageFiles`` and ``ImageRecords``, a ``Reader``). Each further capability is optional, and the
engine asks for it here, by protocol, never by probing attributes where it uses one:

- of the source: ``labels`` (``Labelled``: the class labels ``y`` defaults to) and
  ``shard_bounds()`` (``Sharded``: the shards ``shuffle="blocks"`` permutes);
- of its ``load``: ``sharing(store)`` (``Sharing``: its tables copied once into the loader's
  shared memory), ``marking(handle, marks)`` (``Marking``: the samples it stands in for,
  marked in shared memory with their stand-in, whose targets they take, then named and
  warned about), ``prefetch`` (``Prefetching``: a
  hook before a task's samples are made, given those of the tasks queued behind it as
  ``ahead=``), ``plan`` (``Planning``: a hook with the order of this epoch and the next) and
  ``handing_undecoded()`` (``HandingUndecoded``: samples handed over undecoded,
  ``shmaug.deferred.Undecoded``, to an `augment` whose plan ``takes_undecoded`` and decodes
  only the window it crops);
- of an image source: how it frames its photos (``Framing``: ``image_size``, ``on_error``,
  ``crop_to_aspect_ratio``, ``pad_to_aspect_ratio``, ``output_shape``);
- of a target source: what it makes (``MakesTargets``: ``target_name``, ``output_shape``) and
  ``check_beside(x)`` (``CheckingBeside``: its files' sizes against the images');
- of a target source's ``load``: ``drawing()`` (``Drawing``: masks handed over undrawn,
  ``ops.targets.sample.Undrawn``, to an `augment` whose plan ``takes_undrawn``, which draws
  them where its moves take them).

The sources hold their classes to these protocols under ``mypy --strict``; the engine imports
no source.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from ..memory.store import ArrayHandle, SharedStore

Hook = Callable[..., None]
PlanHook = Callable[[int, np.ndarray, int, np.ndarray], None]


@runtime_checkable
class Source(Protocol):
    """Random access: a length, and sample ``index`` made in a worker."""

    def __len__(self) -> int: ...

    def load(self, index: int) -> Any: ...


@runtime_checkable
class Labelled(Protocol):
    """A source that knows its samples' class labels (None where it has none)."""

    @property
    def labels(self) -> np.ndarray | None: ...


@runtime_checkable
class Sharded(Protocol):
    """A source stored in shards: where each shard's samples begin, then the length."""

    def shard_bounds(self) -> np.ndarray: ...


@runtime_checkable
class Sharing(Protocol):
    """A ``load`` whose tables the loader's shared memory should hold, once, for every worker."""

    def sharing(self, store: SharedStore) -> Any: ...


@runtime_checkable
class Marked(Protocol):
    """A ``load`` that marks the samples it stands in for, and says how to name them."""

    def __call__(self, index: int) -> Any: ...

    def name(self, index: int) -> str: ...

    def read_name(self, index: int) -> str: ...

    def replaced_warning(self, index: int) -> str: ...


@runtime_checkable
class Marking(Protocol):
    """A ``load`` that can stand in for unreadable samples, marking them in ``marks`` (per
    sample, its stand-in's index + 1, 0 for none: ``MARKS``, in the block ``handle`` names)."""

    def marking(self, handle: ArrayHandle, marks: np.ndarray) -> Marked: ...


@runtime_checkable
class Prefetching(Protocol):
    """A ``load`` that fetches a task's samples together before they are made (None: it has
    nothing to fetch)."""

    @property
    def prefetch(self) -> Hook | None: ...


@runtime_checkable
class Planning(Protocol):
    """A ``load`` that wants the order of this epoch and the next, with each task (a disk
    cache planning its fetches and evictions); None: it has no use for it."""

    @property
    def plan(self) -> PlanHook | None: ...


@runtime_checkable
class HandingUndecoded(Protocol):
    """A ``load`` that can hand its samples over undecoded (``shmaug.deferred.Undecoded``)."""

    def handing_undecoded(self) -> Any: ...


@runtime_checkable
class Drawing(Protocol):
    """A target's ``load`` that can hand its masks over undrawn (``Undrawn``)."""

    def drawing(self) -> Any: ...


@runtime_checkable
class Framing(Protocol):
    """An image source that frames its photos itself (``ImageFiles``, ``ImageRecords``): to
    ``image_size`` (None: each at its own size), cropped or padded to that aspect ratio or
    stretched, an unreadable one stood in for (``on_error="skip"``) or raised."""

    image_size: tuple[int, int] | None
    on_error: str
    crop_to_aspect_ratio: bool
    pad_to_aspect_ratio: bool

    @property
    def output_shape(self) -> tuple[int | None, ...]: ...


@runtime_checkable
class MakesTargets(Protocol):
    """A target source that says what it makes, in Keras' names (``target_name``: "masks",
    "segmentation_masks") and at what shape (None where each keeps its image's size)."""

    @property
    def target_name(self) -> str: ...

    @property
    def output_shape(self) -> tuple[int | None, ...]: ...


@runtime_checkable
class CheckingBeside(Protocol):
    """A target source that checks what it reads against the images beside it (mask files'
    stored sizes against the photos')."""

    def check_beside(self, images: Any) -> None: ...


def keeps_own_size(x: Any) -> bool:
    """Whether source ``x`` hands each photo over at its own size (``image_size=None``)."""
    return isinstance(x, Framing) and x.image_size is None


def stands_in_unreadable(x: Any) -> bool:
    """Whether source ``x`` stands the next readable image in for an unreadable one."""
    return isinstance(x, Framing) and x.on_error == "skip"


def reframing(x: Any) -> str | None:
    """The option by which source ``x`` crops or pads its photos to an aspect ratio, if
    any (``crop_to_aspect_ratio``, ``pad_to_aspect_ratio``)."""
    if not isinstance(x, Framing):
        return None
    return next((o for o in ("crop_to_aspect_ratio", "pad_to_aspect_ratio")
                 if getattr(x, o)), None)


def image_shape(x: Any) -> tuple[int | None, ...] | None:
    """The shape of every image of ``x`` (an array's, a framing source's), or None."""
    if isinstance(x, np.ndarray):
        return tuple(x.shape[1:])
    return tuple(x.output_shape) if isinstance(x, Framing) else None


def fixed_image_shape(x: Any, load: Any) -> tuple[int, ...] | None:
    """The one shape of every image that ``x`` and ``load`` make (an array's read as it is,
    a framing source's at a fixed ``image_size``), or None where each keeps its own or a
    ``load`` of the user's makes them (``x`` is then only what it indexes)."""
    if load is None and isinstance(x, np.ndarray):
        return tuple(x.shape[1:])
    if not isinstance(x, Framing) or load != getattr(x, "load", None):
        return None
    shape = tuple(x.output_shape)
    return None if any(n is None for n in shape) else tuple(int(n) for n in shape if n is not None)


def target_kind(target: Any) -> str | None:
    """What target source ``target`` makes, in Keras' names, or None where it does not say."""
    return target.target_name if isinstance(target, MakesTargets) else None


def target_shape(target: Any) -> tuple[int | None, ...] | None:
    """The shape of each row target source ``target`` makes, or None where it does not say."""
    return tuple(target.output_shape) if isinstance(target, MakesTargets) else None


def check_beside(target: Any, images: Any) -> None:
    """``target.check_beside(images)`` where it checks its rows against the images."""
    if isinstance(target, CheckingBeside):
        target.check_beside(images)


def labels(x: Any) -> np.ndarray | None:
    """The class labels of source ``x``, or None."""
    return x.labels if isinstance(x, Labelled) else None


def shard_bounds(x: Any) -> Any:
    """The shard bounds ``x`` reports where it is stored in shards (``x.shard_bounds()``),
    else None."""
    return x.shard_bounds() if isinstance(x, Sharded) else None


def shared(load: Any, store: SharedStore) -> Any:
    """``load`` with its tables in ``store`` (``load`` itself where it has none)."""
    return load.sharing(store) if isinstance(load, Sharing) else load


MARKS = np.dtype(np.uint32)  # a stand-in's index + 1 (a source's samples number fewer)


def marked(load: Any, store: SharedStore, n: int) -> tuple[Any, np.ndarray | None]:
    """``load`` made to mark the samples it stands in for, in a shared ``MARKS`` per sample of
    the ``n`` (the marks, or None where it stands in for none)."""
    if not isinstance(load, Marking):
        return load, None
    handle, marks = store.empty((n,), MARKS, what="the skip marks")
    return load.marking(handle, marks), marks


def undecoded(load: Any, takes_undecoded: bool) -> Any:
    """``load`` handing samples over undecoded where the pipeline takes them so (its plan
    says its first op crops at decode time); ``load`` itself otherwise."""
    return load.handing_undecoded() if isinstance(load, HandingUndecoded) and takes_undecoded \
        else load


def drawing(load: Any, takes_undrawn: bool) -> Any:
    """A target's ``load`` handing its masks over undrawn where the pipeline draws them (its
    plan ``takes_undrawn``); ``load`` itself otherwise."""
    return load.drawing() if isinstance(load, Drawing) and takes_undrawn else load


def sample_name(load: Any, index: int) -> str:
    """What ``load``'s source calls sample ``index`` (a path; a shard and record), for an
    error on it; "" where it names none (an array, a ``load`` of the user's)."""
    if index < 0 or not isinstance(load, Marked):
        return ""
    try:
        return str(load.read_name(index))
    except Exception:  # (an error is being told: naming it must not hide it)
        return ""


def stands_in(load: Any) -> bool:
    """Whether ``load`` can stand in for unreadable samples: a source's reader, not a
    ``load`` of the user's."""
    return isinstance(load, Marking)


def prefetch_hook(load: Any) -> tuple[Hook | None, bool]:
    """``load.prefetch`` (None: it has none), and whether it takes ``ahead=``, the samples of
    the tasks queued behind (``Reader.prefetch`` does; a hook of one argument gets a task's)."""
    hook = load.prefetch if isinstance(load, Prefetching) else None
    if hook is None:
        return None, False
    try:
        params = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return hook, False
    return hook, any(p.name == "ahead" or p.kind is p.VAR_KEYWORD for p in params)


def plan_hook(load: Any) -> PlanHook | None:
    """``load.plan`` where it wants the known order, else None."""
    return load.plan if isinstance(load, Planning) else None
