"""The worker process: its set-up, its main loop, and the bounded wait both sides use.

A worker sets its process up (Ctrl-C left to the parent, the parent's environment under
forkserver, a watchdog that ends it when the parent dies even inside a stuck op, one OpenCV and
BLAS thread, OpenCV's log lines off, glibc's malloc as its defaults settle), maps the shared
blocks it reads and writes (``_Mapped``: read-only where it only reads, unmapped at exit),
unpickles the user's code once (by value where ``shipping`` sent it so), and then serves its
task pipe until the stop sentinel (``_serve``).

It takes every message waiting in its pipe at once and runs them in order, so a source over a
network learns which tasks come next and fetches their samples with the current one's
(``SliceRunner.ahead``, the load's ``prefetch(indices, ahead)``). What a message is and how a
result travels is ``wire``'s; what a task makes is ``runner.SliceRunner``'s; the worker's
figures go to its row of the status block (``status``). Between tasks the worker waits with a
bound (``Waiter``, shared with the parent).

The first task of a pool is the probe (``wire.probe_task``): sample 0 made as the workers make
every sample. The output ring is sized from its answer, so it reaches the workers afterwards,
as a control message (``wire.ring_message``), or in the ``WorkerSpec`` of a worker started
later.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, cast

import numpy as np

from . import lazy_imports
from ... import platform
from ...ops.mixing import Mix
from ..handoff.ring import RingHandles
from .runner import SliceRunner
from ..plan.schedule import Shard, Shuffle, Task
from .status import StatusBlock
from ...memory.store import ArrayHandle, attach
from .wire import Message, Stop, decode_message, encode_result

_TASK_WAIT_S = 1.0  # an idle worker's bounded wait for its next task, before waiting again
_PARENT_CHECK_S = 1.0  # watchdog: how often to re-check that the parent is still there


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once when it starts (never per task)."""

    x: ArrayHandle | None  # the dataset; None when `load` produces samples itself
    ring: RingHandles | None  # None until the probe has sized it (then: ``ring_message``)
    payload: bytes  # pickle of (augment, load): the user's code, checked before start
    seed: int
    n: int
    shuffle: Shuffle  # True, False, or the layout of shuffle="blocks"
    seed_globals: bool | None  # None: unknown, watch for draws (see SliceRunner)
    shard: Shard = Shard()  # the part of each epoch this loader makes
    # the dataset's targets augmented with each image (e.g. masks), by name
    # (an ArrayHandle each, or the ``load`` of a target source: masks decoded from files)
    target_inputs: dict[str, Any] = field(default_factory=dict)
    # cumulative sampling weights (then `n` is samples per epoch); None: every sample once
    weights: ArrayHandle | None = None
    # forkserver: the parent's environment as the worker starts (a worker forked from the
    # server would otherwise see the server's, from when it started); None: inherited
    environ: dict[str, str] | None = None
    mix: Mix | None = None  # MixUp / CutMix over the pairs of each batch (``ops.mixing``)
    # the ``load`` of each target source whose rows are made and passed on unmoved, by place
    target_made: dict[str, Any] = field(default_factory=dict)
    # ``payload`` with the code of the user's heavy modules by value, for workers that start
    # fresh (``shipping``); None: there is none, and ``payload`` serves them all
    payload_by_value: bytes | None = None
    cast: bool = False  # `output_dtype` declared: samples of another dtype are cast to it
    # the kernel may end the worker with its parent: it was started by a thread that lives as
    # long as the process it started from (``platform.die_with_parent``)
    die_with_parent: bool = False
    # spawn, forkserver: the parent's warning filters (``warning_filters``); None: inherited
    # (fork)
    warning_filters: tuple[tuple[str, str, str, str, str, int], ...] | None = None


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
        if platform.HAS_POLL:  # POSIX; Windows waits through multiprocessing
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



# Read by BLAS and OpenMP libraries as they load: one loaded after the worker starts (scipy's
# own OpenBLAS, as ``import scipy.ndimage`` in an op's module loads it; scikit-learn's OpenMP)
# is out of ``threadpool_limits``' reach, and would start a thread per core
_THREAD_COUNTS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "BLIS_NUM_THREADS")


def _limit_threads() -> None:
    """One thread per worker: N workers on N cores must not oversubscribe. Called again once a
    lazily imported package has run (torch keeps a pool of its own, as its DataLoader's
    workers set it)."""
    torch = sys.modules.get("torch") if "torch._C" in sys.modules else None
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    try:
        import cv2

        if cv2.getNumThreads() != 1:  # forked workers inherit 1 (see launch._cv2_single_threaded)
            cv2.setNumThreads(1)
    except ImportError:  # pragma: no cover - opencv is a dependency
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass


def _quiet_opencv() -> None:
    """OpenCV's own log lines off in a worker: for a corrupt PNG it prints ``[ERROR:0@0.350]
    global grfmt_png.cpp ... IHDR chunk shall be first`` on stderr, ahead of shmaug's error,
    which names the file and the fix (a failed decode reaches the caller as that error, never
    only as a log line). A level the user set with ``OPENCV_LOG_LEVEL`` is kept."""
    if "OPENCV_LOG_LEVEL" in os.environ:
        return
    try:
        import cv2

        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    except (ImportError, AttributeError):  # pragma: no cover - an OpenCV without its logging
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
    mallopt = platform.glibc_mallopt()
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
    worker writes its own row), ``generation_handle`` the ring's slot generations."""
    _set_up_process(spec)
    mapped = _Mapped()
    try:
        runner = _start_runner(spec, worker_id, mapped, status_handle, generation_handle)
        if spec.warning_filters is not None:  # again, with the categories of the user's
            _take_warning_filters(spec.warning_filters)  # modules, imported by now
        _serve(runner, tasks, results, mapped)
    finally:
        mapped.close()  # the runner and its views are gone by now


def _set_up_process(spec: WorkerSpec) -> None:
    """What a worker sets for its whole life, before it maps or unpickles anything."""
    _leave_signals_to_the_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if platform.HAS_SIGMASK:  # the parent blocked it around our start
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if spec.environ is not None:  # before anything below reads it
        os.environ.clear()
        os.environ.update(spec.environ)
    if spec.warning_filters is not None:  # (before the user's modules import: theirs too)
        _take_warning_filters(spec.warning_filters)
    if spec.die_with_parent:  # (else the watchdog alone, which needs the GIL)
        platform.die_with_parent()
    threading.Thread(target=_watch_parent, name="shmaug-watchdog", daemon=True).start()
    lazy_imports.install(ran=_limit_threads)  # before the user's code is unpickled
    os.environ.update(dict.fromkeys(_THREAD_COUNTS, "1"))
    _limit_threads()
    _quiet_opencv()
    _tune_malloc()


Filter = tuple[str, str, str, str, str, int]  # a warning filter, its category by name


def warning_filters() -> tuple[Filter, ...]:
    """This process's warning filters, for a worker that does not inherit them (spawn,
    forkserver): a test suite's ``filterwarnings = error`` or a script's
    ``simplefilter("ignore", RuntimeWarning)`` held in forked workers only, so an op's
    warning was raised, or printed, by the start method. Each category goes by its module's
    and its own name: unpickled, it imported its module in every worker (scipy.special,
    urllib3 and requests after ``import keras``: 21 MiB more each)."""
    return tuple((action, _pattern(message), category.__module__, category.__qualname__,
                  _pattern(module), lineno)
                 for action, message, category, module, lineno in cast(Any, warnings.filters))


def _pattern(regex: Any) -> str:
    """A filter's message or module regex as the text ``filterwarnings`` takes ("": any)."""
    return str(getattr(regex, "pattern", regex) or "")


def _take_warning_filters(filters: tuple[Filter, ...]) -> None:
    """The parent's filters (``warning_filters``) in its order, in place of this process's
    own: those whose category's module this worker has imported (the builtins', numpy's and
    shmaug's as it starts, and again once the user's code is unpickled, its modules' and
    theirs; a module an op imports only as it runs comes too late)."""
    warnings.resetwarnings()
    for action, message, module_name, qualname, module, lineno in filters:
        category: Any = sys.modules.get(module_name)
        for part in qualname.split(".") if category is not None else ():
            category = getattr(category, part, None)
        if isinstance(category, type) and issubclass(category, Warning):
            with contextlib.suppress(Exception):  # (an action or regex this Python refuses)
                warnings.filterwarnings(cast(Any, action), message, category, module,
                                        lineno, append=True)


def _leave_signals_to_the_parent() -> None:
    """A worker has the main process's Python handlers (inherited by a fork, or set again by
    the script's import): a Slurm job's save-and-exit on SIGTERM (or USR1), sent to the whole
    group, ran in every worker too and wrote the state the worker had at its fork over the
    main process's checkpoint. A signal of the group that the main process handles is let
    pass here, as Ctrl-C is (the main process ends us): by a handler that does nothing, not
    SIG_IGN, which a program an op runs would inherit. Other handlers (an op's SIGALRM)
    stay."""
    with contextlib.suppress(ValueError):  # a fork's is the parent's event loop's pipe: a
        signal.set_wakeup_fd(-1)  # signal handled here woke the parent's asyncio once more
    for sig in platform.GROUP_SIGNALS:
        try:
            if callable(signal.getsignal(sig)):
                signal.signal(sig, _left_to_the_parent)
        except (OSError, ValueError):  # one Python cannot set here
            pass


def _left_to_the_parent(signum: int, frame: Any) -> None:
    """A signal of the group the main process handles (``_leave_signals_to_the_parent``)."""


class _Mapped:
    """The shared blocks this worker mapped, and how to unmap each at exit (never unlink: the
    parent owns them)."""

    def __init__(self) -> None:
        self._closers: list[Callable[[], None]] = []  # invariant: one per block mapped

    def __call__(self, handle: ArrayHandle, *, read_only: bool = False) -> np.ndarray:
        array, close = attach(handle)
        if read_only:  # an op that edits its input in place must not corrupt the dataset
            array.flags.writeable = False
        self._closers.append(close)
        return array

    def close(self) -> None:
        for close in self._closers:
            close()
        self._closers = []


def _start_runner(spec: WorkerSpec, worker_id: int, mapped: _Mapped,
                  status_handle: ArrayHandle, generation_handle: ArrayHandle) -> SliceRunner:
    """The worker's ``SliceRunner`` over the blocks of ``spec``, mapped; its status row says
    it is ready once they are mapped and the user's code unpickled."""
    status = StatusBlock(mapped(status_handle)).row(worker_id)
    generation = mapped(generation_handle)
    x = mapped(spec.x, read_only=True) if spec.x is not None else None
    targets = {name: mapped(handle, read_only=True) if isinstance(handle, ArrayHandle)
               else handle for name, handle in spec.target_inputs.items()}
    cdf = mapped(spec.weights, read_only=True) if spec.weights is not None else None
    augment, load = pickle.loads(spec.payload)
    runner = SliceRunner(
        x, None, augment, load, seed=spec.seed, n=spec.n, shuffle=spec.shuffle,
        seed_globals=spec.seed_globals, generation=generation, worker_id=worker_id,
        status=status, shard=spec.shard, target_inputs=targets, cdf=cdf, mix=spec.mix,
        target_made=spec.target_made, cast=spec.cast,
    )
    if spec.ring is not None:  # a replacement for a worker that died after the probe
        _attach_ring(runner, spec.ring, mapped)
    status.ready = 1.0  # start-up is over
    return runner


def _serve(runner: SliceRunner, tasks: Connection, results: Connection,
           mapped: _Mapped) -> None:
    """Run what the task pipe brings, in the order sent, until the stop sentinel or the end
    of the pipe (the watchdog thread ends us if the parent vanishes meanwhile)."""
    waiter = Waiter([tasks])
    backlog: deque[Message] = deque()  # received, not yet run: in the order sent
    while True:
        try:
            if not backlog:
                if not waiter.wait(_TASK_WAIT_S):
                    continue
                # Read at once: on Windows the wait itself may have taken an empty message
                # (the stop sentinel), which only this read gives back.
                backlog.append(decode_message(tasks.recv_bytes()))
            while waiter.wait(0):  # everything waiting: the tasks queued behind this one
                backlog.append(decode_message(tasks.recv_bytes()))
        except EOFError:  # the parent closed our pipe: stop once what it sent is done
            if not backlog:
                break
        message = backlog.popleft()
        if isinstance(message, Stop):
            break
        if isinstance(message, RingHandles):  # the ring, sized by the probe
            _attach_ring(runner, message, mapped)
            continue
        if runner.wants_ahead:
            runner.ahead = _tasks_ahead(backlog)
        results.send_bytes(encode_result(runner.run(message)))


def _tasks_ahead(backlog: deque[Message]) -> list[Task]:
    """The tasks at the front of ``backlog``, up to its first control message."""
    ahead = []
    for message in backlog:
        if not isinstance(message, Task):
            break
        ahead.append(message)
    return ahead


def _attach_ring(runner: SliceRunner, handles: RingHandles, mapped: _Mapped) -> None:
    """Map the ring's blocks into this worker for ``runner``."""
    runner.out = mapped(handles.images)
    for name, handle in handles.targets.items():
        runner.target_out[name] = mapped(handle)
