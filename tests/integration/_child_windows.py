"""Run by test_windows_path in a subprocess: a loader on shmaug's Windows code paths.

With SHMAUG_EMULATE_WINDOWS=1 the engine takes its Windows branches on Linux; the calls only
POSIX has are then made to fail loudly in shmaug's modules (here, and in every spawned worker,
which imports this module to unpickle `op`), so a branch that forgets the switch shows.
Without the variable it gives the reference batches (the platform default start method).

Usage: python -m tests.integration._child_windows epoch|kill|timeout|close
Prints one JSON line for the test.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import multiprocessing.process
import os
import select
import signal
import sys
import threading
import time
from typing import Any

import numpy as np
import psutil

import shmaug
from shmaug.engine.workers import launch as _launch, worker as _worker
from shmaug import platform as _platform
from shmaug.memory import store
from tests import _ops

EMULATED = os.environ.get("SHMAUG_EMULATE_WINDOWS") == "1"
MARKED = 13  # the sample `op` hangs on in the timeout and close scenarios


class _Without:
    """A module as shmaug's code sees it on Windows: without some of its functions."""

    def __init__(self, module: Any, *missing: str) -> None:
        self._module, self._missing = module, missing

    def __getattr__(self, name: str) -> Any:
        if name in self._missing:
            raise AssertionError(f"{self._module.__name__}.{name} called on the Windows path")
        return getattr(self._module, name)


def _posix_only(self: Any) -> None:
    raise AssertionError("Process.kill() called on the Windows path: use terminate()")


if EMULATED:  # only shmaug's view: the standard library keeps using them itself
    _worker.select = _Without(select, "poll")
    _worker.signal = _Without(signal, "pthread_sigmask")
    _launch.signal = _Without(signal, "pthread_sigmask")
    store.os = _Without(os, "statvfs")
    _platform.os = _Without(os, "sched_getaffinity")


def op(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``noisy``, made in a worker that took the same path; hangs on the marked sample."""
    assert _platform.WINDOWS == EMULATED, "the switch did not reach the worker"
    if image.flat[0] == _ops.MARKER:
        time.sleep(60)
    return _ops.noisy(image, rng)


def data(marked: bool = False) -> np.ndarray:
    x = np.random.default_rng(0).integers(0, 200, (24, 6, 6), dtype=np.uint8)
    if marked:
        x[MARKED, 0, 0] = _ops.MARKER
    return x


def digest(batches: list[np.ndarray]) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(b).tobytes() for b in batches)).hexdigest()


def stop_and_wait(pid: int) -> None:
    """What TerminateProcess does to a worker, then wait until it is dead (not reaped)."""
    os.kill(pid, signal.SIGTERM)
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)


def epochs(kill: bool) -> dict[str, Any]:
    out: list[np.ndarray] = []
    with shmaug.Loader(data(), batch_size=4, augment=op, workers=2, seed=0, shuffle=True,
                       max_queue_size=2) as loader:
        for e in range(2):
            for k, (xb, _) in enumerate(loader):
                out.append(xb)
                if kill and e == 0 and k == 0:
                    stop_and_wait(loader.pids[0])
        return {"digest": digest(out), "respawns": loader.stats()["respawns"],
                "method": loader._run.pool._ctx.get_start_method()}


def timeout() -> dict[str, Any]:
    with shmaug.Loader(data(marked=True), batch_size=4, augment=op, workers=1,
                       timeout=1.0) as loader:
        try:
            list(loader)
        except shmaug.WorkerTimeout as exc:
            return {"timeout_index": exc.sample_index}
    return {"timeout_index": None}


def close() -> dict[str, Any]:
    """close() while the only worker is stuck in an op and a consumer thread waits on it."""
    loader = shmaug.Loader(data(marked=True), batch_size=4, augment=op, workers=1,
                           max_queue_size=1)
    caught: list[str] = []

    def consume() -> None:
        try:
            loader.batch(MARKED // 4)
        except shmaug.ClosedError as exc:
            caught.append(type(exc).__name__)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    time.sleep(1.0)  # the worker is inside the marked sample by now
    began = time.monotonic()
    loader.close()
    thread.join(10)
    return {"caught": caught, "close_s": time.monotonic() - began}


def main() -> None:
    scenario = sys.argv[1]
    if EMULATED:
        multiprocessing.process.BaseProcess.kill = _posix_only  # type: ignore[method-assign]
        try:
            shmaug.Loader(data(), workers=1, start_method="fork")
            raise AssertionError("start_method='fork' was accepted on the Windows path")
        except shmaug.ArgumentError as exc:
            assert "['spawn']" in str(exc), exc
    result = {"epoch": lambda: epochs(kill=False), "kill": lambda: epochs(kill=True),
              "timeout": timeout, "close": close}[scenario]()
    # Checked before exit: at exit the resource tracker would unlink leftovers and hide them.
    result["children"] = len(multiprocessing.active_children())
    mine = f"{store.SEGMENT_PREFIX}{os.getpid()}_"
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []  # none on macOS
    result["segments"] = sorted(n for n in names if n.startswith(mine))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    from tests.integration._child_windows import main as imported_main  # ops pickle by module

    imported_main()
