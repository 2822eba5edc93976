"""The output ring: K preallocated batch slots in shared memory that workers write into.

The ring's memory is owned by the ``SharedStore`` it was allocated from: one block of shape
``(K, batch_size, *sample_shape)``, plus one such block per target that `augment` transforms
with its image, e.g. a segmentation mask (see ``RingHandles``). It is made in two steps: the
slot bookkeeping and the shared generations exist before the workers start (they attach to the
generations by handle), the blocks only once a worker has shown what one sample looks like
(``allocate``). Slot bookkeeping lives in the main process: a slot is ``free``, or ``busy``
holding one batch (being filled, ready, or cancelled and waiting for its last in-flight task).
Workers write only the rows of the task they were given, and only while the slot's shared
``generation`` still equals the task's: cancelling a batch bumps it, so work already queued in
a worker for that batch is skipped in microseconds."""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .depth import GIVEN, Depth, choose as choose_depth
from .pinned import pin
from ...memory import store as shm
from ...memory.store import RING, ArrayHandle, SharedStore, check_need


@dataclass(frozen=True)
class RingHandles:
    """What a worker attaches to: the images' block and one block per augmented target."""

    images: ArrayHandle
    targets: dict[str, ArrayHandle] = field(default_factory=dict)


TargetLayout = dict[str, tuple[tuple[int, ...], Any]]  # target name -> (sample shape, dtype)
Targets = dict[str, np.ndarray]  # augmented targets (a sample's or a batch's rows), by name


POISON_ENV = "SHMAUG_POISON_RELEASED_SLOTS"


class _Token:
    """One lease of a slot: it ends when the last ``_Held`` of it is gone."""


class _Held:
    """One block's rows of a leased slot, as numpy sees them: an array made from it has it as
    its ``base``, so every view of that array keeps the lease alive."""

    def __init__(self, rows: np.ndarray, token: _Token) -> None:
        self.__array_interface__ = rows.__array_interface__
        self._rows, self._token = rows, token


def _leased(rows: np.ndarray, token: _Token) -> np.ndarray:
    """``rows`` as an array whose base holds ``token``, of their dtype (the array interface
    of an ``ml_dtypes`` dtype such as bfloat16 says only ``|V2``)."""
    out = np.asarray(_Held(rows, token))
    return out if out.dtype == rows.dtype else out.view(rows.dtype)


class OutputRing:
    """K batch slots; ``acquire()`` a free one, ``release()`` it once its rows are read.

    ``slots`` is the most it may hold (its generations are made for that many before the
    workers start); ``choose`` settles the depth within it once a batch's size is known
    (``depth``), before ``allocate``."""

    def __init__(self, store: SharedStore, slots: int, batch_size: int) -> None:
        self._store = store
        self.slots = slots
        self.depth = Depth(slots, GIVEN)  # invariant: what chose ``slots``
        self.batch_size = batch_size
        self.handles: RingHandles | None = None  # invariant: the blocks mapped, once allocated
        self.view: np.ndarray = np.empty(0)  # (slots, batch_size, *sample_shape) once allocated
        self.targets: Targets = {}  # the same per augmented target
        self.pinned = False  # invariant: the blocks are registered with the CUDA driver
        self._free: list[int] = list(range(slots))[::-1]  # invariant: no slot twice, none busy
        # A debug switch, as PYTHONMALLOC=debug poisons freed memory: a released slot is filled
        # with 0xFF bytes (NaN in a float), so a batch still read after its slot went back to
        # the workers shows it, instead of silently holding another batch's rows.
        self._poison = os.environ.get(POISON_ENV, "") == "1"
        # invariant: bumped whenever a slot is handed out or cancelled; workers attach to it by
        # handle. It lives in the store, not in a RawArray: the stdlib heap behind those keeps
        # its small arenas, and their descriptors, for the rest of the process.
        self.generation_handle, self.generation = store.empty(
            (slots,), np.int64, what="the ring's slot generations")

    def _shape(self, sample_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (self.slots, self.batch_size, *sample_shape)

    @property
    def _what(self) -> str:
        return f"the output ring ({self.slots} batches)"

    def batch_bytes(self, sample_shape: tuple[int, ...], dtype: Any,
                    targets: TargetLayout | None = None) -> int:
        """The shared memory one slot takes: a batch of samples of this shape and dtype, and
        of each augmented target's."""
        layouts = [(sample_shape, dtype), *(targets or {}).values()]
        return sum(self.batch_size * int(np.prod(shape, dtype=np.int64)) *
                   np.dtype(kind).itemsize for shape, kind in layouts)

    def choose(self, asked: int | None, workers: int, sample_shape: tuple[int, ...],
               dtype: Any, targets: TargetLayout | None = None, *,
               besides: dict[str, int] | None = None) -> Depth:
        """Settle the depth (``depth.choose``: ``asked`` as given, else the default for
        ``workers`` within the memory bound, ``besides`` still to be copied to shared memory),
        at most the slots made at start; before ``allocate``."""
        assert self.handles is None, "the depth is chosen before the blocks are made"
        chosen = choose_depth(asked, workers, self.batch_bytes(sample_shape, dtype, targets),
                              shm.free_shm_bytes(), sum((besides or {}).values()))
        assert chosen.slots <= len(self.generation), "made for as many slots at most"
        self.depth, self.slots = chosen, chosen.slots
        self._free = list(range(self.slots))[::-1]
        return chosen

    def check_fits(self, sample_shape: tuple[int, ...], dtype: Any,
                   targets: TargetLayout | None = None, *, besides: dict[str, int] | None = None
                   ) -> None:
        """Raise ``SharedMemoryError`` now if the ring's blocks, together with ``besides``
        (other bytes still to be written to shared memory, by what they are), would not fit."""
        per = self.batch_bytes(sample_shape, dtype, targets)
        check_need({**(besides or {}), RING: self.slots * per}, batch_bytes=per,
                   slots=self.slots, depth=self.depth.describe(), own=self._store.names)

    def allocate(self, sample_shape: tuple[int, ...], dtype: Any,
                 targets: TargetLayout | None = None) -> RingHandles:
        """Create the shared blocks for ``slots`` batches of samples of this shape and dtype,
        and of each augmented target's samples."""
        handle, self.view = self._store.empty(self._shape(sample_shape), dtype, what=self._what,
                                              lent=True)
        handles = {}
        for name, (shape, target_dtype) in (targets or {}).items():
            handles[name], self.targets[name] = self._store.empty(
                self._shape(shape), target_dtype, what=f"{self._what}, target {name!r}",
                lent=True)
        self.handles = RingHandles(handle, handles)
        return self.handles

    def pin(self) -> None:
        """Page-lock the allocated blocks (``pinned``) until the store closes; where they
        stay pageable, a warning said why and ``pinned`` stays False."""
        pinned = pin([self.view, *self.targets.values()])
        if pinned is not None:
            self._store.before_close(pinned.release)
            self.pinned = True

    def acquire(self) -> tuple[int, int] | None:
        """A free slot, now busy, and its new generation; None when every slot is busy."""
        if not self._free:
            return None
        slot = self._free.pop()
        self.generation[slot] += 1
        return slot, int(self.generation[slot])

    def cancel(self, slot: int) -> None:
        """Make the work queued for this slot stale (workers skip it); it stays busy."""
        self.generation[slot] += 1

    def cancel_all(self) -> None:
        """Make every slot's queued work stale, as the loader closes: a worker drops it at its
        next sample and reads its stop, instead of making the next epoch's batches first."""
        self.generation += 1

    def detach(self) -> None:
        """Before the store unmaps the blocks: drop the views of them (a read would fault);
        the generations, still read by ``acquire``/``cancel`` bookkeeping, become private."""
        self.view = np.empty(0)
        self.targets = {}
        self.generation = self.generation.copy()

    def release(self, slot: int) -> None:
        if slot in self._free or not 0 <= slot < self.slots:
            raise RuntimeError(f"slot {slot} released twice or out of range")
        if self._poison and self.view.size:
            for block in (self.view, *self.targets.values()):
                block[slot].reshape(-1).view(np.uint8)[:] = 0xFF
        self._free.append(slot)

    def read(self, slot: int, rows: int,
             into: np.ndarray | None = None) -> tuple[np.ndarray, Targets]:
        """Private copies of the first ``rows`` rows of a slot, images (into ``into`` when
        given) and augmented targets (the slot can then be reused)."""
        images = self.view[slot, :rows]
        if into is None:
            into = images.copy()
        else:
            np.copyto(into, images)
        return into, {k: v[slot, :rows].copy() for k, v in self.targets.items()}

    def lease(self, slot: int, rows: int, ended: Callable[[int], None]
              ) -> tuple[np.ndarray, Targets]:
        """Writable arrays over the same rows that keep the slot theirs while any of them, or
        any view or tensor made from them, lives: ``ended(slot)`` is called (from whichever
        thread drops the last one) once none does. No copy, and no lag to guess: a framework
        that holds a batch holds a reference to it."""
        token = _Token()
        weakref.finalize(token, ended, slot)
        return (_leased(self.view[slot, :rows], token),
                {k: _leased(v[slot, :rows], token) for k, v in self.targets.items()})

    def lend(self, slot: int, rows: int) -> tuple[np.ndarray, Targets]:
        """Read-only views of the same rows, valid until the slot is released."""
        views = self.view[slot, :rows].view(), {k: v[slot, :rows].view()
                                                for k, v in self.targets.items()}
        for view in (views[0], *views[1].values()):
            view.flags.writeable = False
        return views
