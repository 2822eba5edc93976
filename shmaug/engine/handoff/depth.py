"""How many batches the output ring holds: ``max_queue_size`` as given, or by default enough
for every worker to have a batch of its own ahead of the consumer, within a memory bound.

A worker with no batch to make idles, and a batch needs a free ring slot before anyone can
make it. With 15 workers and a fixed 8 slots, a third of a 16-core host sat idle while the GPU
waited for half its time (issue 58). So the default follows the workers, as torch's
``DataLoader`` keeps ``prefetch_factor`` (2) batches per worker in flight: ``PER_WORKER``
slots per worker there may be (with ``workers="auto"``, the most the autotuner may run: the
usable cores, where the pool starts), plus ``SPARE`` for the batches the consumer holds, and
never fewer than ``FLOOR`` (the fixed default before). Slots cost shared memory, so the
default takes at most ``MEMORY_CAP`` bytes, and at most half of what /dev/shm has free once
the data still to be copied there is; the batches that bound allows, if fewer. A
``max_queue_size`` the user gives is kept as given (only checked to fit, by the ring).

``stats()["queue"]`` reports the depth and which bound chose it; ``slot_waits`` counts the
batches asked for while the ring had room for fewer batches ahead than there are workers
(see ``Prefetcher``), and ``queue_limited`` says when those, not the workers, held the
consumer up: ``workers="auto"`` then adds no workers.
"""

from __future__ import annotations

from dataclasses import dataclass

PER_WORKER = 2  # batches per worker, as torch's prefetch_factor
SPARE = 2  # for the batches the consumer holds (lent) or reads
FLOOR = 8  # the fewest slots the default takes (the fixed default before issue 58)
MEMORY_CAP = 2 * 2**30  # bytes the default ring may take at most

# what chose the depth: a size given, the default, or the default cut to its memory bound:
# MEMORY_CAP (MEMORY), or half of what /dev/shm has free (SHM)
GIVEN, WORKERS, MEMORY, SHM = "max_queue_size", "workers", "memory", "shm"


@dataclass(frozen=True, slots=True)
class Depth:
    """The ring's slot count and what chose it (``GIVEN``, ``WORKERS``, ``MEMORY`` or
    ``SHM``)."""

    slots: int
    why: str
    bound: int | None = None  # bytes the default could take (None: as given)
    workers: int = 0  # the most workers the default was made for
    wanted: int = 0  # the default's slots for them, before the memory bound
    fitted: bool = True  # the bound holds ``slots`` batches (else: one, past the bound)

    def describe(self) -> str:
        """What chose the depth, in words (``stats()["queue"]["why"]``, and errors)."""
        if self.why == GIVEN:
            return f"max_queue_size={self.slots} as given"
        rule = (f"the default for {self.workers} workers ({PER_WORKER} per worker + {SPARE}, "
                f"at least {FLOOR})")
        if self.why == WORKERS:
            return f"{self.slots} slots: {rule}"
        holds = f"holds {self.slots}" if self.fitted else (
            "holds no whole batch: 1, the one a batch needs (the ring checks it fits in the "
            "shared memory free)")
        return (f"{self.slots} slots: {rule} would be {self.wanted}, but its memory bound "
                f"({self.bound:,} bytes: the lesser of {MEMORY_CAP // 2**30} GiB and half of "
                f"the shared memory free besides the data still to be copied) {holds}")


def more_room(why: str, enlarged: str) -> str:
    """The fix for a default ring its memory bound (``why``: ``SHM`` or ``MEMORY``) cut below
    its workers; ``enlarged``: how to enlarge /dev/shm here."""
    if why == SHM:
        return (f"more shared memory ({enlarged}), a smaller `batch_size`, or x as a .npy "
                f"path (memory-mapped, not copied there)")
    return (f"a `max_queue_size` of the batches you want ahead (the default stops at "
            f"{MEMORY_CAP // 2**30} GiB of them; /dev/shm has room for more), or a smaller "
            f"`batch_size`")


def for_workers(workers: int) -> int:
    """The default depth for ``workers`` workers, before the memory bound."""
    return max(FLOOR, PER_WORKER * workers + SPARE)


def memory_bound(free: int | None, besides: int = 0) -> int:
    """The bytes a default ring may take: ``MEMORY_CAP``, and at most half of the ``free``
    bytes of /dev/shm (None: not measurable here) left once ``besides`` bytes (the data still
    to be copied there) are."""
    if free is None:
        return MEMORY_CAP
    return min(MEMORY_CAP, max(0, free - besides) // 2)


def choose(asked: int | None, workers: int, batch_bytes: int, free: int | None,
           besides: int = 0) -> Depth:
    """The depth for ``asked`` (``max_queue_size``; None: the default) with ``workers``
    workers (the most there may be), batches of ``batch_bytes`` in the ring, ``free`` bytes
    free in /dev/shm and ``besides`` still to be copied there. The default is at least one
    slot: a ring that cannot hold one is refused by the ring's own check, with its fix."""
    if asked is not None:
        return Depth(asked, GIVEN)
    wanted = for_workers(workers)
    bound = memory_bound(free, besides)
    fits = bound // batch_bytes if batch_bytes > 0 else wanted
    if fits >= wanted:
        return Depth(wanted, WORKERS, bound, workers, wanted)
    why = MEMORY if bound == MEMORY_CAP else SHM
    return Depth(max(1, fits), why, bound, workers, wanted, fitted=fits > 0)


def short(room: int, workers: int) -> bool:
    """Whether a ring with ``room`` slots for batches ahead of the one asked for leaves a
    worker without a batch of its own (``slot_waits`` counts these asks)."""
    return 0 < workers and room < workers


def queue_limited(slot_waits: int, misses: int) -> bool:
    """Whether the queue, not the workers, held the consumer up: at least half of the batches
    it waited for (``misses``) were asked for while the ring was short (``slot_waits``
    counted among them)."""
    return misses > 0 and 2 * slot_waits >= misses
