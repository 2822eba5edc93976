"""Workers elsewhere: what the engine asks of a fleet of remote batch makers (``shmaug.ray``
gives one), and both of its sides of the exchange.

A batch is a pure function of (seed, epoch key, batch index), so a remote maker that holds the
same ``Options`` makes it bit for bit. The trainer's ``Prefetcher`` plans as for a local pool
(one task per whole batch) and ``RemotePool`` stands where the ``WorkerPool`` would: it asks the
fleet for batch indices, writes the arriving images into the ring slot of their ticket, and
reports ``Done``. A ticket cancelled or answered once is forgotten, so an answer that arrives
twice (a maker lost after it answered, the batch re-issued) is written once, and a cancelled
batch never reaches a reused slot. The maker's side is a local ``Loader`` of the ``shipped``
options, and ``loader.serve`` (one batch, with the batches it will be asked for next as its
prefetch). Nothing here imports Ray: the engine never does.
"""

from __future__ import annotations

import pickle
import traceback
from abc import ABC, abstractmethod
from dataclasses import replace
from types import FunctionType
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ArgumentError, ErrorRecord, NotPicklableError
from .plan.schedule import BatchPlan, Task, seed_epoch
from .workers.wire import Done, Failed, Result

if TYPE_CHECKING:
    from .config.options import Options
    from .handoff.ring import OutputRing

Answer = tuple[int, Any]  # (ticket, the batch's images, or the exception that made none)


class Fleet(Protocol):
    """Started remote makers, as the trainer's ``RemotePool`` drives them."""

    @property
    def workers(self) -> int:
        """Worker processes running in all the makers together."""

    @property
    def replaced(self) -> int:
        """Makers started in place of lost ones (``stats()["respawns"]``)."""

    def probe(self) -> tuple[tuple[int, ...], str, tuple[float, float] | None]:
        """One sample's output shape and dtype, and the images' value range."""

    def submit(self, ticket: int, key: int, index: int) -> None:
        """Make batch ``index`` of epoch key ``key``, answered under ``ticket``."""

    def cancel(self, tickets: set[int]) -> None:
        """Forget these tickets; their answers, if any arrive, are dropped."""

    def poll(self, timeout_s: float) -> list[Answer]:
        """The answers that arrived within ``timeout_s``."""

    def close(self) -> None:
        """Stop every maker; nothing of theirs is left running. Idempotent."""


class RemoteWorkers(ABC):
    """What ``workers=`` takes besides a count: makers that run elsewhere (``shmaug.ray``)."""

    @property
    @abstractmethod
    def count(self) -> int:
        """Worker processes they run in all (what ``loader.workers`` reports)."""

    @abstractmethod
    def start(self, options: Options, batches: int) -> Fleet:
        """Start makers of ``options`` (shipped once), for epochs of ``batches`` batches."""


def shipped(options: Options) -> Options:
    """``options`` as a remote maker gets them: the same data, order and pipeline, without the
    targets (the trainer gathers them from its own ``y``) but where a mix reads their labels,
    to run on the maker's own pool.

    Raises:
        ArgumentError: for targets the workers move with their images (masks, boxes): remote
            workers return images only.
    """
    for name, code in (("augment", options.pipeline.augment), ("load", options.data.load)):
        scripted = _in_main(code)
        if scripted:
            raise NotPicklableError(
                f"`{name}` holds {', '.join(scripted)}, defined in the script you run "
                f"(`__main__`): a Ray node imports each op by name, and the script is not a "
                f"module it can import. Fix: move it into a module of its own (a .py file "
                f"beside the script, imported by it) that every node imports: on their path, "
                f"or shipped with ray.init(runtime_env={{'py_modules': [that_module]}}).")
    if options.pipeline.worker_targets:
        names = sorted(options.pipeline.worker_targets)
        raise ArgumentError(
            f"remote `workers` return augmented images only, but `y` holds targets the workers "
            f"transform with them: {names}. Fix: use local workers (`workers=None`) for "
            f"detection or segmentation data.")
    y = None
    if options.pipeline.mix is not None:  # its workers mix by the labels: those alone go
        y = options.data.labels  # (a Sequence's other inputs and weights stay here, and are
        for key in reversed(options.data.labels_at):  # blended here: pipeline.blended_at)
            y = {key: y}
    return replace(options, data=replace(options.data, y=y),
                   pipeline=replace(options.pipeline, blended_at=()))


def _in_main(code: Any) -> list[str]:
    """The functions and classes of ``__main__`` that pickling ``code`` names (what a Ray
    node, whose ``__main__`` is not the script, cannot import)."""
    found: list[str] = []

    class Finder(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:  # (asked of every function and class)
            if isinstance(obj, (type, FunctionType)) and obj.__module__ == "__main__":
                found.append(f"`{obj.__qualname__}`")
            return NotImplemented

    try:  # into no file, arrays' buffers left out: only the names are wanted
        Finder(_Discard(), protocol=5, buffer_callback=lambda buffer: None).dump(code)
    except Exception:  # what does not pickle at all is said where the workers start
        pass
    return found


class _Discard:
    """A file that keeps nothing written to it."""

    @staticmethod
    def write(data: bytes) -> int:
        return len(data)


class RemotePool:
    """The ``WorkerPool`` of a loader whose workers are remote: a ticket per whole batch."""

    status = None

    def __init__(self, fleet: Fleet, plan: BatchPlan) -> None:
        self._fleet = fleet
        self._index = {plan.bounds(i)[0]: i for i in range(len(plan))}  # batch start -> index
        self._tasks: dict[int, Task] = {}  # invariant: submitted, neither answered nor cancelled
        self._ring: OutputRing | None = None

    @property
    def workers(self) -> int:
        return self._fleet.workers

    @property
    def respawns(self) -> int:
        """Makers replaced (a worker a maker's own pool replaced is its node's to count)."""
        return self._fleet.replaced

    @property
    def pids(self) -> list[int]:
        return []  # none on this host

    def busy_s(self) -> list[float]:
        return []

    def probe(self) -> tuple[tuple[int, ...], str, tuple[float, float] | None]:
        return self._fleet.probe()

    def attach_ring(self, ring: OutputRing) -> None:
        self._ring = ring

    def submit(self, task: Task) -> None:
        self._tasks[task.ticket] = task
        self._fleet.submit(task.ticket, task.epoch, self._index[task.start])

    def cancel_pending(self, tickets: set[int]) -> list[int]:
        """Every ticket asked about: a batch made remotely is not written once cancelled."""
        gone = [t for t in tickets if self._tasks.pop(t, None) is not None]
        self._fleet.cancel(set(gone))
        return gone

    def poll(self, timeout_s: float) -> list[Result]:
        assert self._ring is not None
        results: list[Result] = []
        for ticket, answer in self._fleet.poll(timeout_s):
            task = self._tasks.pop(ticket, None)
            if task is None:  # cancelled, or answered already
                continue
            if isinstance(answer, BaseException):
                record = getattr(answer, "record", None)  # a sample's failure, as raised there
                if not isinstance(record, ErrorRecord):  # the node's own (its loader's)
                    record = ErrorRecord.capture(
                        answer, "".join(traceback.format_exception(answer)), worker_id=-1,
                        sample_index=task.start, epoch=seed_epoch(task.epoch),
                        op="a remote worker")
                results.append(Failed(ticket, record))
                continue
            self._ring.view[task.slot, :task.stop - task.start] = answer
            results.append(Done(ticket))
        return results

    def close(self) -> None:
        self._tasks.clear()
        self._fleet.close()
