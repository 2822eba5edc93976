"""The fault matrix: every fault we promise to survive, under every start method.

Each cell runs one fault and checks its documented outcome (an error naming the sample, a
recovery with the very epoch a fault-free run gives, or a clean exit), that it came within a
bound, and that afterwards no `shmaug_` segment, no worker process and no extra file
descriptor is left (the autouse guard in conftest checks segments and children; the
``descriptors`` fixture checks fds). Faults of the main process itself run in a child
process, so a hang cannot stall the test runner.

``SHMAUG_FAULT_TABLE=faults.md python -m pytest tests/integration/test_fault_matrix.py``
also writes the matrix as a Markdown table (outcome and seconds per cell).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psutil
import pytest

import shmaug
from tests import _ops
from tests._helpers import (
    TIME_SCALE, assert_same_batches, faulthandler_off, running, shmaug_segments)

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
METHODS = ["fork", "spawn", "forkserver"]
N, BATCH, AT = 48, 4, 21  # 12 batches; the faulty sample is in batch 5 of the natural order
_RESULTS: list[tuple[str, str, str, float]] = []  # (fault, method, outcome, seconds)


def marked() -> np.ndarray:
    x = np.random.default_rng(0).integers(0, 200, (N, 8, 8), dtype=np.uint8)
    x[AT, 0, 0] = _ops.MARKER
    return x


def loader(method: str, augment: Any = _ops.slow_noisy, **kwargs: Any) -> shmaug.Loader:
    args = dict(batch_size=BATCH, augment=augment, workers=2, seed=3, start_method=method)
    return shmaug.Loader(marked(), np.arange(N), **{**args, **kwargs})


def fault_free() -> list[tuple[np.ndarray, np.ndarray]]:
    with shmaug.Loader(marked(), np.arange(N), batch_size=BATCH, augment=_ops.slow_noisy,
                       workers=0, seed=3) as reference:
        return list(reference)


# -- faults inside the loader's own process -----------------------------------------------


def op_raises(method: str) -> str:
    with loader(method, _ops.fail_on_marker) as L:
        with pytest.raises(ValueError) as info:
            list(L)
        assert isinstance(info.value, shmaug.WorkerError) and info.value.sample_index == AT
        assert f"sample index {AT}" in str(info.value) and "Traceback" in str(info.value)
        assert L.batch(0)[0].shape == (BATCH, 8, 8)  # the pool stays usable
    return "ValueError that is a WorkerError, sample index and traceback; pool usable"


def op_hangs(method: str) -> str:
    with loader(method, _ops.hang_on_marker, timeout=1.0) as L:
        began = time.monotonic()
        with pytest.raises(shmaug.WorkerTimeout, match=f"sample index {AT}"):
            list(L)
        assert time.monotonic() - began < 20 * TIME_SCALE
        assert L.batch(0)[0].shape == (BATCH, 8, 8)  # the stuck worker was replaced
    return "WorkerTimeout naming the sample after `timeout`; stuck worker replaced"


def load_raises(method: str) -> str:
    with shmaug.Loader(list(range(N)), batch_size=BATCH, load=_ops.load_failing_at,
                       workers=2, start_method=method) as L:
        with pytest.raises(KeyError, match=rf"(?s)no sample {AT}.*load_failing_at.*index {AT}"):
            list(L)
        assert L.batch(0)[0].shape == (BATCH, 4, 4)
    return "the load's own exception (a WorkerError), naming `load` and the sample"


def _killed_mid_epoch(method: str, sig: int) -> None:
    expected = fault_free()
    with faulthandler_off():  # the workers it forks print no dump for the SIGSEGV sent them
        L = loader(method)
    with L:
        got = [L.batch(b) for b in range(3)]
        victim = L.pids[0]
        os.kill(victim, sig)
        got += [L.batch(b) for b in range(3, len(L))]
        assert L.stats()["respawns"] >= 1 and victim not in L.pids
    assert_same_batches(got, expected)


def worker_sigkill(method: str) -> str:
    _killed_mid_epoch(method, signal.SIGKILL)
    return "worker replaced, its samples redone: epoch bit-identical"


def worker_sigsegv(method: str) -> str:
    _killed_mid_epoch(method, signal.SIGSEGV)
    return "worker replaced, its samples redone: epoch bit-identical"


def op_segfaults(method: str) -> str:
    with loader(method, _ops.segfault_on_marker) as L:
        with pytest.raises(shmaug.WorkerDied, match=rf"signal 11.*sample index {AT}"):
            list(L)
        assert L.batch(0)[0].shape == (BATCH, 8, 8)
    return "WorkerDied (signal 11, sample index) after 3 workers died on it; pool usable"


def worker_memory_limit(method: str) -> str:
    with loader(method, _ops.exceeds_memory_limit_on_marker) as L:
        with pytest.raises(MemoryError) as info:
            list(L)
        assert isinstance(info.value, shmaug.WorkerError) and info.value.sample_index == AT
        assert L.batch(0)[0].shape == (BATCH, 8, 8)
    return "MemoryError that is a WorkerError naming the sample; pool usable"


def garbage_collected(method: str) -> str:
    L = loader(method)
    pids = L.pids
    next(iter(L))
    del L
    gc.collect()
    deadline = time.monotonic() + 10 * TIME_SCALE  # (a liveness bound: four test processes)
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(pids)
    return "workers stopped, memory freed by the finalizer"


def shm_too_small(method: str) -> str:
    huge = np.broadcast_to(np.zeros((1, 64, 64), np.uint8), (2**24, 64, 64))  # 64 GiB, virtual
    children = psutil.Process().children()
    with pytest.raises(shmaug.SharedMemoryError, match=r"needs [\d,]+ bytes.*the dataset "
                       r"[\d,]+ bytes.*free.*Fix: pass `x` as a path to a \.npy.*shm-size"):
        shmaug.Loader(huge, batch_size=BATCH, augment=_ops.identity, workers=2,
                      start_method=method)
    assert psutil.Process().children() == children  # refused before any process started
    return "SharedMemoryError with bytes asked and free and the fix, before any process"


def not_picklable(method: str) -> str:
    children = psutil.Process().children()
    with pytest.raises(shmaug.NotPicklableError, match="module level"):
        shmaug.Loader(marked(), batch_size=BATCH, augment=lambda image, rng: image,
                      workers=2, start_method=method)
    assert psutil.Process().children() == children
    return "NotPicklableError naming the op and the fix, before any process"


# -- faults of the main process: in a child, so a hang cannot stall the runner ------------


def _child(module: str, method: str, *extra: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, "-m", module, method, *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT})
    info = _line(proc, within_s=120)  # TensorFlow's import is slow on a busy machine
    assert len(info["pids"]) == 2
    time.sleep(0.3)  # into the middle of an epoch
    return proc, info


def _line(proc: subprocess.Popen[str], within_s: float) -> dict[str, Any]:
    """The child's next JSON line, or the child killed and its stderr shown: never a hang."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(within_s)
    if not got or not got[0]:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"no word from the child within {within_s} s: {err[-3000:]}")
    return json.loads(got[0])  # type: ignore[no-any-return]


def _ended(proc: subprocess.Popen[str], within_s: float) -> str:
    """The child's stderr once it has exited, or it killed and the test failed."""
    try:
        return proc.communicate(timeout=within_s)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"still running {within_s} s after the signal: "
                             f"{proc.communicate()[1][-3000:]}") from None


def _nothing_left(proc: subprocess.Popen[str], info: dict[str, Any],
                  within_s: float = 10 * TIME_SCALE) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = running(info["pids"])
        left = shmaug_segments(proc.pid)
        if not alive and not left:
            return
        time.sleep(0.05)
    raise AssertionError(f"left behind: processes {alive}, segments {sorted(left)}")


def _signalled(module: str, method: str, sig: int, *extra: str) -> str:
    proc, info = _child(module, method, *extra)
    return _signal_ends(proc, info, sig)


def _signal_ends(proc: subprocess.Popen[str], info: dict[str, Any], sig: int) -> str:
    """Send ``sig`` and check the documented end: KeyboardInterrupt for SIGINT, death by the
    signal otherwise; then that nothing of the child's is left."""
    began = time.monotonic()
    proc.send_signal(sig)
    err = _ended(proc, within_s=60)
    took = time.monotonic() - began
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err and proc.returncode != 0, err[-3000:]
        assert took < 15 * TIME_SCALE, f"Ctrl-C took {took:.1f} s"
    else:
        assert proc.returncode == -sig
        assert "leaked" not in err, err[-3000:]  # the tracker that unlinks says nothing
    _nothing_left(proc, info)
    return f"exits in {took:.1f} s" + (" with KeyboardInterrupt" if sig == signal.SIGINT else "")


def main_sigint(method: str) -> str:
    return _signalled("tests.integration._child_loader", method, signal.SIGINT, "--no-close")


def main_sigint_with(method: str) -> str:
    return _signalled("tests.integration._child_loader", method, signal.SIGINT)


def main_sigterm(method: str) -> str:
    return _signalled("tests.integration._child_loader", method, signal.SIGTERM) + (
        "; shmaug's resource tracker unlinks (quietly), workers see their parent gone")


def main_sigkill(method: str) -> str:
    return _signalled("tests.integration._child_loader", method, signal.SIGKILL) + (
        "; shmaug's resource tracker unlinks (quietly), workers see their parent gone")


# Tries per fit cell under fork and spawn (a hang once showed up in 4 of 20 tries); once
# more than the minimum under forkserver, whose server re-imports TensorFlow in every child.
FIT_TRIES = {"fork": 4, "spawn": 4, "forkserver": 2}
PAUSES_S = (0.1, 0.7, 0.4)  # how far into training each in-process Ctrl-C lands


def fit_sigint(method: str) -> str:
    """Ctrl-C during ``model.fit(shmaug.Sequence(...))``, as a notebook user gives it: the
    first ones end ``fit`` with KeyboardInterrupt and the process trains again; the last one
    ends the process. Every one within seconds, with nothing left."""
    pytest.importorskip("tensorflow")
    rounds = FIT_TRIES[method]
    proc, info = _child("tests.integration._child_fit", method, "--rounds", str(rounds))
    slowest = 0.0
    for pause in PAUSES_S[:rounds - 1]:
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        after = _line(proc, within_s=30)
        slowest = max(slowest, time.monotonic() - began)
        assert after == {"interrupted": True, "alive": [], "segments": []}, after
        assert slowest < 10 * TIME_SCALE, f"Ctrl-C took {slowest:.1f} s to end fit"
        info = _line(proc, within_s=60)  # training again, with new workers
        time.sleep(pause)
    ended = _signal_ends(proc, info, signal.SIGINT)
    return (f"fit ends with KeyboardInterrupt and nothing left, {rounds - 1}x in one process "
            f"(slowest {slowest:.1f} s); the next Ctrl-C ends the process: {ended}")


def fit_sigint_while_an_op_hangs(method: str) -> str:
    """Ctrl-C while ``fit`` waits on a batch whose op hangs, with no ``timeout=``: on
    TensorFlow the main thread waits in C on tf.data's thread, which waited on shmaug for
    good; that wait now ends a second after the press, and with it the process."""
    pytest.importorskip("tensorflow")
    proc, info = _child("tests.integration._child_fit", method, "--hang")
    time.sleep(1.0)  # fit is now waiting on batch 10, and will for good
    return "the op hangs, no timeout: " + _signal_ends(proc, info, signal.SIGINT)


def fit_sigterm(method: str) -> str:
    pytest.importorskip("tensorflow")
    for _ in range(FIT_TRIES[method] // 2):
        ended = _signalled("tests.integration._child_fit", method, signal.SIGTERM)
    return (f"killed by SIGTERM, {ended}, {FIT_TRIES[method] // 2}x; shmaug's resource "
            f"tracker unlinks (quietly), workers see their parent gone")


FAULTS: dict[str, Callable[[str], str]] = {
    "op raises": op_raises,
    "op hangs (timeout=1)": op_hangs,
    "load raises": load_raises,
    "worker SIGKILL": worker_sigkill,
    "worker SIGSEGV": worker_sigsegv,
    "op segfaults": op_segfaults,
    "worker exceeds a memory limit": worker_memory_limit,
    "main SIGINT (no close)": main_sigint,
    "main SIGINT (with)": main_sigint_with,
    "main SIGINT during Model.fit": fit_sigint,
    "main SIGINT during Model.fit, an op hung": fit_sigint_while_an_op_hangs,
    "main SIGTERM during Model.fit": fit_sigterm,
    "main SIGTERM": main_sigterm,
    "main SIGKILL": main_sigkill,
    "loader garbage-collected": garbage_collected,
    "/dev/shm too small": shm_too_small,
    "op does not pickle": not_picklable,
}


@pytest.fixture
def descriptors(request: pytest.FixtureRequest) -> Iterator[None]:
    """No file descriptor of ours outlives the cell (measured after a fault-free warm-up that
    starts the resource tracker and, for forkserver, the server)."""
    method = request.node.callspec.params["method"]
    with loader(method, _ops.identity) as warm:
        next(iter(warm))
    before = open_fds()
    yield
    deadline = time.monotonic() + 5
    while len(open_fds()) > len(before) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    after = open_fds()
    leaked = {fd: what for fd, what in after.items() if before.get(fd) != what}
    assert len(after) <= len(before), f"file descriptors leaked: {leaked}"


def open_fds() -> dict[int, str]:
    """This process's descriptors and what each points at (a pipe, socket or file)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return found


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault(fault: str, method: str, descriptors: None) -> None:
    began = time.monotonic()
    outcome = FAULTS[fault](method)
    _RESULTS.append((fault, method, outcome, time.monotonic() - began))


def teardown_module() -> None:
    path = os.environ.get("SHMAUG_FAULT_TABLE")
    if not path or not _RESULTS:
        return
    cells: dict[str, dict[str, tuple[str, float]]] = {}
    for fault, method, outcome, seconds in _RESULTS:
        cells.setdefault(fault, {})[method] = (outcome, seconds)
    lines = ["| fault | outcome | " + " | ".join(METHODS) + " |",
             "|---|---|" + "---|" * len(METHODS)]
    for fault, by_method in cells.items():
        outcome = next(iter(by_method.values()))[0]
        times = [f"ok {by_method[m][1]:.1f} s" if m in by_method else "-" for m in METHODS]
        lines.append(f"| {fault} | {outcome} | " + " | ".join(times) + " |")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_stuck_holding_the_gil_ends_with_a_killed_main_process(method: str) -> None:
    """Its watchdog thread cannot run while C code holds the GIL: it outlived the main
    process, and its segments with it, until the op returned (here: hours). The kernel ends
    it now (``PR_SET_PDEATHSIG``). A fork server's worker keeps the watchdog only: the server
    lives as long as any worker it forked."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the kernel's parent-death signal is Linux's")
    proc, info = _child("tests.integration._child_loader", method, "--gil")
    try:
        time.sleep(1.0)  # both workers inside the regex
        _signal_ends(proc, info, signal.SIGKILL)
    finally:
        for pid in running(info["pids"]):
            os.kill(pid, signal.SIGKILL)


def test_close_returns_once_a_waiting_consumer_has_left() -> None:
    """At interpreter exit the finalizer's close is the last chance for Keras' tf.data thread
    to leave ``__getitem__`` before Python ends it mid-py_function (which hangs TensorFlow's
    teardown): close must not return while a consumer still waits inside the loader."""
    events: list[str] = []
    with loader("fork", _ops.hang_on_marker, workers=1) as L:

        def consume() -> None:
            try:
                list(L)
            except shmaug.ClosedError:
                events.append("consumer left")

        thread = threading.Thread(target=consume)
        thread.start()
        while L.stats()["batches"] < AT // BATCH:  # the next batch holds the hanging sample
            time.sleep(0.01)
        time.sleep(0.3)  # now waiting on it, in the pool's poll
        assert L._run.prefetch is not None
        L._run.prefetch.close()  # what the finalizer runs first
        events.append("close returned")
        thread.join(10)
    assert events == ["consumer left", "close returned"]
