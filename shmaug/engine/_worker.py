"""What runs inside a worker process, and the slice loop the main process reuses inline.

A worker attaches to the dataset once, caps OpenCV/BLAS threads at one, then loops: receive a
``Task`` (or an empty message, the stop sentinel), fill the task's rows, send
``("done", ticket)`` or ``("failed", ticket, ErrorRecord)``. It takes every message waiting in
its pipe at once and runs them in order, so a source over a network learns which tasks come
next and fetches their samples with the current one's (``SliceRunner.ahead``, the load's
``prefetch(indices, ahead)``). Both directions travel as packed bytes, not pickles (see
``Task.to_bytes`` and ``encode_result``): the main process handles several messages per batch
and shares the cores with the workers. A failing sample never kills the worker.

The first task of a pool is the probe (``probe_task``): sample 0 made as the workers make every
sample, answered with a ``Probe`` that says what one sample looks like. User code therefore never
runs in the main process (unless ``workers=0``), and a probe that hangs or crashes is caught by
the same timeout and death handling as any task. The output ring is sized from the probe, so
it reaches the workers afterwards, as a control message (``ring_message``). A watchdog thread ends the worker when its parent dies, even inside a
stuck op; between tasks the worker waits with a bound (``Waiter``, shared with the parent).
"""

from __future__ import annotations

import inspect
import math
import multiprocessing
import os
import pickle
import select
import signal
import struct
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from itertools import takewhile
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Collection, Protocol

import numpy as np

from . import _platform
from ._inputs import sample_output
from ..errors import ArgumentTypeError, ErrorRecord, OutputMismatchError
from ._schedule import OrderCache, Shard, Task, seed_epoch
from ..seeding import GlobalsWatch, SampleSeeder
from ._ring import RingHandles, TargetLayout, Targets
from ._store import ArrayHandle, attach

_TASK_WAIT_S = 1.0  # an idle worker's bounded wait for its next task, before waiting again
_PARENT_CHECK_S = 1.0  # watchdog: how often to re-check that the parent is still there

# Per-worker slots in the shared status array (float64; tickets stay exact below 2**53).
STATUS_FIELDS = 6
BUSY_S, CURRENT_INDEX, TASKS_DONE, READY, TICKET, STARTED = range(STATUS_FIELDS)
IDLE = -1.0  # the TICKET of a worker between tasks

Augment = Callable[[np.ndarray, np.random.Generator], Any]
Load = Callable[[int], Any]


class TargetAugment(Protocol):
    """An `augment` that moves targets with its image (``from_albumentations`` is one): the
    loader hands it the entries of ``y`` filed under ``target_names``."""

    target_names: Collection[str]

    def augment_targets(self, image: np.ndarray, targets: Targets,
                        rng: np.random.Generator) -> tuple[np.ndarray, Targets]:
        """One sample and its targets' rows, augmented with one draw; each target keeps one
        shape for every sample."""


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once when it starts (never per task)."""

    x: ArrayHandle | None  # the dataset; None when `load` produces samples itself
    ring: RingHandles | None  # None until the probe has sized it (then: ``ring_message``)
    payload: bytes  # pickle of (augment, load): the user's code, checked before start
    seed: int
    n: int
    shuffle: bool
    seed_globals: bool | None  # None: unknown, watch for draws (see SliceRunner)
    shard: Shard = Shard()  # the part of each epoch this loader makes
    # the dataset's targets augmented with each image (e.g. masks), by name
    target_inputs: dict[str, ArrayHandle] = field(default_factory=dict)
    # cumulative sampling weights (then `n` is samples per epoch); None: every sample once
    weights: ArrayHandle | None = None
    # forkserver: the parent's environment as the worker starts (a worker forked from the
    # server would otherwise see the server's, from when it started); None: inherited
    environ: dict[str, str] | None = None


@dataclass(frozen=True)
class Probe:
    """What sample 0 looks like: the loaded input and the augmented output. Small and
    picklable; made where user code runs (a worker, or this process with ``workers=0``)."""

    shape: tuple[int, ...]  # of the augmented sample
    dtype: str
    input_dtype: str  # of the sample as loaded (``x[0]`` or ``load(0)``), before `augment`
    input_range: tuple[float, float] | None  # its finite min and max; None if none is finite
    input_nonfinite: bool  # it holds NaN or infinity
    targets: TargetLayout = field(default_factory=dict)  # the augmented targets' shapes


PROBE_SLOT = (1 << 64) - 1  # a task for this slot is the probe: sample 0 of epoch 0, no ring


def probe_task(ticket: int) -> Task:
    return Task(ticket, 0, PROBE_SLOT, 0, 0, 1, 0)


_RING = b"R"  # tag of the control message that hands a worker the output ring


def ring_message(handles: RingHandles) -> bytes:
    """The control message that gives a running worker the output ring (never a task's size)."""
    message = _RING + pickle.dumps(handles, protocol=pickle.HIGHEST_PROTOCOL)
    return message if len(message) != Task.WIRE_SIZE else message + b"\0"  # pickle ignores it


_TICKET = struct.Struct("<q")


def encode_result(result: tuple[Any, ...]) -> bytes:
    """``("done", ticket)`` as 8 bytes; a failure or a probe adds its pickled record."""
    ticket = _TICKET.pack(result[1])
    if result[0] == "done":
        return ticket
    return ticket + pickle.dumps(result[2], protocol=pickle.HIGHEST_PROTOCOL)


def decode_result(data: bytes) -> tuple[Any, ...]:
    (ticket,) = _TICKET.unpack_from(data)
    if len(data) == _TICKET.size:
        return ("done", ticket)
    payload = pickle.loads(data[_TICKET.size:])
    return ("probed" if isinstance(payload, Probe) else "failed", ticket, payload)


class Waiter:
    """Waits, with a timeout, on pipes and process sentinels (the parent: every worker's; a
    worker: its task pipe).

    ``multiprocessing.connection.wait`` (and ``Connection.poll``) build a fresh selector on
    every call, which cost the main process more than the rest of a batch's bookkeeping; on
    POSIX one ``select.poll`` is kept instead, rebuilt by the owner when its set changes.
    """

    def __init__(self, objects: list[Any]) -> None:
        self._objects = objects
        self._poller: Any = None
        if _platform.HAS_POLL:  # POSIX; Windows waits through multiprocessing
            self._poller = select.poll()
            self._by_fd = {}
            for obj in objects:
                fd = obj if isinstance(obj, int) else obj.fileno()
                self._poller.register(fd, select.POLLIN)  # HUP and ERR are always reported
                self._by_fd[fd] = obj

    def wait(self, timeout_s: float) -> list[Any]:
        if self._poller is None:
            return list(wait(self._objects, timeout_s))
        events = self._poller.poll(math.ceil(max(timeout_s, 0.0) * 1000))
        return [self._by_fd[fd] for fd, _ in events]


def op_name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name or type(fn).__name__)


class SliceRunner:
    """Fills a task's rows: sample index -> load -> augment -> write into the ring slot.

    With ``target_inputs`` (the dataset's targets that `augment` transforms along with each
    image, e.g. segmentation masks), `augment` is called as
    ``augment.augment_targets(image, {name: target_inputs[name][index]}, rng)`` (see
    ``TargetAugment``) and returns ``(image, {name: target})``; each target goes to its own
    block of the ring, ``target_out[name]``.

    Used by every worker and, for ``workers=0``, by the main process itself: one code path,
    identical batches.
    """

    def __init__(
        self,
        x: Any,
        out: np.ndarray | None,
        augment: Augment | None,
        load: Load | None,
        *,
        seed: int,
        n: int,
        shuffle: bool,
        seed_globals: bool | None,
        generation: Any,
        worker_id: int = -1,
        status: Any = None,
        shard: Shard = Shard(),
        target_inputs: Targets | None = None,
        cdf: np.ndarray | None = None,
    ) -> None:
        self.x = x  # read-only view of the dataset (or None with `load`)
        self.out = out  # (slots, batch_size, *sample_shape), shared; None until the probe is done
        self.augment = augment
        self.load = load
        self.target_inputs = target_inputs or {}  # read-only, all samples
        self.target_out: Targets = {}  # their ring blocks, as `out`
        self.orders = OrderCache(seed, n, shuffle, shard=shard, cdf=cdf)
        # seed_globals None: unknown; watch the globals and seed them once a sample draws.
        watch = GlobalsWatch() if seed_globals is None else None
        self.watch = watch if watch is not None and watch.usable else None
        unwatchable = seed_globals is None and self.watch is None  # then seed them always
        self.seeder = SampleSeeder(seed, seed_globals=seed_globals is True or unwatchable)
        self.generation = generation  # the ring's shared per-slot generation counters
        self.worker_id = worker_id
        self.status = status  # shared float64 array or None
        self._base = max(worker_id, 0) * STATUS_FIELDS
        self._op = op_name(augment) if augment is not None else "load"
        self._load_name = op_name(load) if load is not None else "x[index]"  # for error records
        self._stage = self._op  # the step a failing sample was in
        self._index = -1  # the sample being made (for error records)
        self._loaded: Any = None  # the last sample as loaded, before `augment` (for the probe)
        self._prefetch, self._prefetch_ahead = _prefetch_hook(load)
        self.ahead: list[Task] = []  # the tasks received after the one running, in order

    def run(self, task: Task) -> tuple[Any, ...]:
        began = time.perf_counter()
        if self.status is not None:  # which task, since when: for timeouts and crash blame
            self.status[self._base + STARTED] = time.monotonic()
            self.status[self._base + TICKET] = task.ticket
        self._index = -1
        if self.watch is not None:
            # What ran between tasks (workers=0: the user's code) is not ours, nor is a
            # Gaussian the generators hold back.
            self.watch.forget_cached()
        try:
            result = self._probe(task) if task.slot == PROBE_SLOT else self._fill(task)
        except Exception as exc:  # a failing sample never kills the worker
            record = ErrorRecord.capture(
                exc, traceback.format_exc(), worker_id=self.worker_id,
                sample_index=self._index, epoch=seed_epoch(task.epoch), op=self._stage,
            )
            result = ("failed", task.ticket, record)
        if self.status is not None:
            self.status[self._base + TICKET] = IDLE
            self.status[self._base + BUSY_S] += time.perf_counter() - began
            self.status[self._base + TASKS_DONE] += 1
        return result

    def _streams(self, epoch: int, indices: np.ndarray) -> Any:
        # Per-sample streams also seed the globals, which a `load` may use too.
        seeded = self.augment is not None or self.seeder.seed_globals or self.watch is not None
        return self.seeder.streams(epoch, indices) if seeded else None

    def _fill(self, task: Task) -> tuple[Any, ...]:
        """Make the task's samples and write them into its rows of the ring slot."""
        indices = self.orders(task.epoch)[task.start : task.stop]
        keys = self.orders.keys(task.epoch, task.start, task.stop)
        epoch = seed_epoch(task.epoch)  # (the task's key may also say: in the dataset's order)
        streams = self._streams(epoch, keys)
        assert self.out is not None, "a task arrived before the ring (the probe comes first)"
        rows = self.out[task.slot]
        if self._prefetch is not None and len(indices) and (
                self.generation[task.slot] == task.generation):
            # A source over a network fetches the task's samples together (and those of the
            # tasks behind it), never raising per sample; a timeout blames the first.
            self._stage, self._index = self._load_name, int(indices[0])
            if self.status is not None:
                self.status[self._base + CURRENT_INDEX] = self._index
            if self._prefetch_ahead:
                self._prefetch(indices, ahead=self._ahead_indices())
            else:
                self._prefetch(indices)
        for p, index, key in zip(range(task.start, task.stop), indices.tolist(), keys.tolist()):
            if self.generation[task.slot] != task.generation:
                break  # the batch was cancelled: skip the rest
            self._index = index
            if self.status is not None:
                self.status[self._base + CURRENT_INDEX] = index
            rng = next(streams) if streams is not None else None  # before `load`: it may draw
            image, made = self._watched_sample(epoch, index, rng, key)
            self._stage = "writing the output"
            self._write(rows[p - task.row0], image, index)
            for name, target in made.items():
                self._write(self.target_out[name][task.slot, p - task.row0], target, index, name)
        return ("done", task.ticket)

    @property
    def wants_ahead(self) -> bool:
        """Whether the load fetches the samples of the tasks queued behind (``ahead``)."""
        return self._prefetch_ahead

    def _ahead_indices(self) -> np.ndarray:
        """The samples of the tasks queued behind this one (not cancelled), in order."""
        parts = [self.orders(t.epoch)[t.start:t.stop] for t in self.ahead
                 if t.slot != PROBE_SLOT and self.generation[t.slot] == t.generation]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def _probe(self, task: Task) -> tuple[Any, ...]:
        """Sample 0 of epoch 0, made exactly as in an epoch, described instead of written."""
        self._index = 0
        if self.status is not None:
            self.status[self._base + CURRENT_INDEX] = 0
        streams = self._streams(0, np.zeros(1, np.int64))
        image, made = self._watched_sample(0, 0, next(streams) if streams is not None else None,
                                           0)
        out = sample_output(image)
        targets = {}
        for name, target in made.items():
            target = sample_output(target, f"target {name!r}")
            targets[name] = (tuple(target.shape), target.dtype.str)
        loaded = np.asarray(self._loaded)
        numeric = loaded.dtype.kind in "biuf" and loaded.size > 0
        finite = loaded[np.isfinite(loaded)] if numeric and loaded.dtype.kind == "f" else loaded
        span = (float(finite.min()), float(finite.max())) if numeric and finite.size else None
        probe = Probe(tuple(out.shape), out.dtype.str, loaded.dtype.str, span,
                      bool(numeric and finite.size < loaded.size), targets)
        return ("probed", task.ticket, probe)

    def _watched_sample(self, epoch: int, index: int, rng: np.random.Generator | None,
                        key: int) -> tuple[Any, Targets]:
        """``_sample``; when it drew from the unseeded globals (while they are watched), seed
        them from now on and make it again, as every sample will be made (also when the
        unseeded attempt raised)."""
        try:
            sample = self._sample(index, rng)
        except Exception:
            if not self._drew_from_globals():
                raise
            return self._sample(index, self.seeder.restream(epoch, key))
        if self._drew_from_globals():
            sample = self._sample(index, self.seeder.restream(epoch, key))
        return sample

    def _drew_from_globals(self) -> bool:
        """Whether the last sample drew from a global generator not yet seeded; it is seeded
        per sample from now on (the watch ends once both are)."""
        if self.watch is None:
            return False
        python, numpy = self.watch.moved()
        seeder = self.seeder
        python, numpy = python and not seeder.seed_python, numpy and not seeder.seed_numpy
        if not (python or numpy):
            return False
        seeder.seed_python |= python
        seeder.seed_numpy |= numpy
        if seeder.seed_python and seeder.seed_numpy:
            self.watch = None
        return True

    def _sample(self, index: int, rng: np.random.Generator | None) -> tuple[Any, Targets]:
        """Sample ``index``, loaded and augmented, and its augmented targets (``_stage`` names
        the step, for errors)."""
        self._stage = self._load_name
        image = self._loaded = self.x[index] if self.load is None else self.load(index)
        if self.augment is None or rng is None:
            return image, {}
        self._stage = self._op
        if not self.target_inputs:
            return self._array(self.augment(image, rng), index), {}
        given = {name: array[index] for name, array in self.target_inputs.items()}
        op: TargetAugment = self.augment  # type: ignore[assignment]  # the loader checked it
        image, made = op.augment_targets(image, given, rng)
        image = self._array(image, index)
        if not isinstance(made, dict) or made.keys() != given.keys():
            raise OutputMismatchError(
                f"{self._op}.augment_targets returned targets "
                f"{sorted(made) if isinstance(made, dict) else type(made).__name__} for sample "
                f"index {index}; expected a dict of {sorted(given)}. Fix: return (image, "
                f"{{name: target}}) with every target it was given.")
        return image, made

    def _array(self, out: Any, index: int) -> np.ndarray:
        """What `augment` returned, if it is a numpy array: a list, a PIL image or a tensor is
        refused, not converted (a list of uint8 pixels would become an int64 batch)."""
        if isinstance(out, np.ndarray):
            return out
        raise ArgumentTypeError(
            f"`augment` ({self._op}) must return the image as a numpy array; on sample index "
            f"{index} it returned {type(out).__module__.replace('builtins', '')}"
            f"{'.' if type(out).__module__ != 'builtins' else ''}{type(out).__qualname__}. "
            f"shmaug does not convert it, as its dtype would be a guess (a list of uint8 "
            f"pixels becomes int64). Fix: return an array in the image's dtype, e.g. "
            f"`np.asarray(result, dtype=image.dtype)`."
        )

    @staticmethod
    def _write(row: np.ndarray, image: Any, index: int, target: str | None = None) -> None:
        image = np.asarray(image)
        if image.shape == row.shape and image.dtype == row.dtype:
            row[...] = image  # the common case, a little cheaper than copyto's checks
            return
        of, shape_arg, dtype_arg = "", ", or pass `output_shape=`", ", or pass `output_dtype=`"
        if target is not None:  # a target's shape and dtype are learned from sample 0 only
            of, shape_arg, dtype_arg = f" (target {target!r})", "", ""
        if image.shape != row.shape:
            raise OutputMismatchError(
                f"Sample index {index} produced{of} shape {image.shape} but the batch expects "
                f"{row.shape} (learned from the first sample or `output_shape`). Fix: make "
                f"`augment` return one shape for every sample (resize, crop or pad){shape_arg}."
            )
        try:
            np.copyto(row, image, casting="same_kind")
        except TypeError as exc:
            raise OutputMismatchError(
                f"Sample index {index} produced{of} dtype {image.dtype} which cannot be stored "
                f"in the batch dtype {row.dtype}. Fix: return {row.dtype} from `augment`"
                f"{dtype_arg}."
            ) from exc


def _limit_threads() -> None:
    """One thread per worker: N workers on N cores must not oversubscribe."""
    try:
        import cv2

        if cv2.getNumThreads() != 1:  # forked workers inherit 1 (see _launch._cv2_single_threaded)
            cv2.setNumThreads(1)
    except ImportError:  # pragma: no cover - opencv is a dependency
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass


# glibc's malloc.h: mallopt's parameters, and the values its own dynamic thresholds grow to on
# 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX, and twice that for trimming).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20
_TRIM_THRESHOLD = 2 * _MMAP_THRESHOLD
_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
               "MALLOC_MMAP_MAX_")


def _tune_malloc() -> None:
    """glibc's allocator as its defaults settle, whatever the parent set.

    Why: tf.data's ``from_generator`` (run by every ``Model.fit`` on the TensorFlow backend)
    sets ``M_TRIM_THRESHOLD`` to 128 KB, which also pins the mmap threshold at 128 KB. A worker
    forked after that got every array over 128 KB as an mmap of its own, new pages for each
    sample: W2's workers made about 1,420 images/s instead of 1,780 (the W2 rate in a fork
    after tf.data, worker malloc as inherited vs tuned here, two interleaved runs each). Plain
    processes gain a little too: glibc grows its thresholds to these values only after the
    first large free. Left alone when the environment sets glibc's malloc parameters.
    """
    if any(name in os.environ for name in _MALLOC_ENV) or "malloc" in os.environ.get(
            "GLIBC_TUNABLES", ""):
        return  # the user set glibc's malloc up: theirs to keep
    mallopt = _platform.glibc_mallopt()
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def _watch_parent() -> None:
    """End this worker when the parent is gone, even if an op is stuck (daemon thread)."""
    parent = multiprocessing.parent_process()
    ppid = os.getppid()
    while True:
        if parent is not None:
            parent.join(_PARENT_CHECK_S)
            if not parent.is_alive():
                os._exit(0)
        else:
            time.sleep(_PARENT_CHECK_S)
        if os.getppid() != ppid:
            os._exit(0)


def worker_main(
    spec: WorkerSpec, worker_id: int, tasks: Connection, results: Connection,
    status_handle: ArrayHandle, generation_handle: ArrayHandle,
) -> None:
    """Entry point of a worker process: ``status_handle`` is the pool's status block (this
    worker writes its own fields), ``generation_handle`` the ring's slot generations."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if _platform.HAS_SIGMASK:  # the parent blocked it around our start
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if spec.environ is not None:  # before anything below reads it
        os.environ.clear()
        os.environ.update(spec.environ)
    threading.Thread(target=_watch_parent, name="shmaug-watchdog", daemon=True).start()
    _limit_threads()
    _tune_malloc()
    status, close_status = attach(status_handle)
    generation, close_generation = attach(generation_handle)
    closers = [close_status, close_generation]
    x = None
    if spec.x is not None:
        x, close_x = attach(spec.x)
        x.flags.writeable = False  # an op that edits its input in place must not corrupt the dataset
        closers.append(close_x)
    targets = {}
    for name, handle in spec.target_inputs.items():
        targets[name], close_target = attach(handle)
        targets[name].flags.writeable = False
        closers.append(close_target)
    cdf = None
    if spec.weights is not None:
        cdf, close_cdf = attach(spec.weights)
        cdf.flags.writeable = False
        closers.append(close_cdf)
    augment, load = pickle.loads(spec.payload)
    runner = SliceRunner(
        x, None, augment, load, seed=spec.seed, n=spec.n, shuffle=spec.shuffle,
        seed_globals=spec.seed_globals, generation=generation, worker_id=worker_id,
        status=status, shard=spec.shard, target_inputs=targets, cdf=cdf,
    )
    if spec.ring is not None:  # a replacement for a worker that died after the probe
        closers.extend(_attach_ring(runner, spec.ring))
    status[worker_id * STATUS_FIELDS + READY] = 1.0  # attached and unpickled: start-up is over
    try:
        waiter = Waiter([tasks])
        backlog: deque[bytes] = deque()  # received, not yet run: in the order sent
        while True:  # the watchdog thread ends us if the parent vanishes meanwhile
            try:
                if not backlog:
                    if not waiter.wait(_TASK_WAIT_S):
                        continue
                    # Read at once: on Windows the wait itself may have taken an empty message
                    # (the stop sentinel), which only this read gives back.
                    backlog.append(tasks.recv_bytes())
                while waiter.wait(0):  # everything waiting: the tasks queued behind this one
                    backlog.append(tasks.recv_bytes())
            except EOFError:  # the parent closed our pipe: stop once what it sent is done
                if not backlog:
                    break
            message = backlog.popleft()
            if not message:  # the stop sentinel
                break
            if not _is_task(message):  # the ring, sized by the probe (ring_message)
                closers.extend(_attach_ring(runner, pickle.loads(message[len(_RING):])))
                continue
            if runner.wants_ahead:
                runner.ahead = [Task.from_bytes(m) for m in takewhile(_is_task, backlog)]
            results.send_bytes(encode_result(runner.run(Task.from_bytes(message))))
    finally:
        del runner, x, targets, status, generation
        for close in closers:
            close()


def _is_task(message: bytes) -> bool:
    return len(message) == Task.WIRE_SIZE  # else the ring or the stop sentinel


def _prefetch_hook(load: Any) -> tuple[Callable[..., None] | None, bool]:
    """``load.prefetch`` (None: it has none), and whether it takes ``ahead=``, the samples of
    the tasks queued behind (``Reader.prefetch`` does; a hook of one argument gets a task's)."""
    hook = getattr(load, "prefetch", None)
    if hook is None:
        return None, False
    try:
        params = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return hook, False
    return hook, any(p.name == "ahead" or p.kind is p.VAR_KEYWORD for p in params)


def _attach_ring(runner: SliceRunner, handles: RingHandles) -> list[Callable[[], None]]:
    """Map the ring's blocks into this worker for ``runner``; the closers to call at exit."""
    runner.out, close_out = attach(handles.images)
    closers = [close_out]
    for name, handle in handles.targets.items():
        runner.target_out[name], close_target = attach(handle)
        closers.append(close_target)
    return closers
