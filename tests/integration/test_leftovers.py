"""Segments left by a main process killed together with its resource tracker are swept.

The cause this guards against: a SIGKILL to the whole process group (a scheduler's cancel, a
container's restart) kills the resource tracker too, so nobody unlinks; /dev/shm keeps the
segments until reboot. The next process that creates a ``SharedStore`` removes them, but never
a segment whose owner still holds its lock, nor one too young to be locked yet.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

import pytest

from shmaug.memory import _leftovers
from shmaug.memory.store import SEGMENT_PREFIX
from tests._helpers import shmaug_segments

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="Linux /dev/shm only")]

OWNER = """
import numpy as np, shmaug, time
loader = shmaug.Loader(np.zeros((32, 64, 64), np.uint8), batch_size=4, workers=1, seed=0,
                       augment=shmaug.Compose(["hflip"]), max_queue_size=2)
next(iter(loader))
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture
def sweep(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """A sweep now, although this process swept already (each sweeps once)."""
    def again() -> list[str]:
        monkeypatch.setattr(_leftovers, "_next_sweep", 0.0)
        return _leftovers.sweep(SEGMENT_PREFIX)
    return again


def _age(names: set[str], seconds: float) -> None:
    for name in names:
        then = time.time() - seconds
        os.utime(f"/dev/shm/{name}", (then, then))


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_segments_of_a_process_group_killed_whole_are_swept(sweep, monkeypatch):
    with subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                          start_new_session=True) as owner:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        left = shmaug_segments(owner.pid)
        assert len(left) == 4  # the dataset, the ring, its slot generations, the workers' status
        _age(left, 60)
        assert sweep() == []  # its owner lives: they stay, however old
        # Young again, so that no other process's sweep (a test beside this one starting a
        # Loader) takes them once their owner is dead; this one's sweep takes young ones.
        _age(left, 0)
        os.killpg(owner.pid, signal.SIGKILL)  # the owner, its worker and its resource tracker
    time.sleep(1)
    assert shmaug_segments(owner.pid) == left  # nobody unlinked them: the leak
    monkeypatch.setattr(_leftovers, "STALE_AFTER_S", -1.0)
    assert sweep() == sorted(left)
    assert shmaug_segments(owner.pid) == set()


def test_a_locked_or_young_segment_of_a_pid_not_seen_here_stays(sweep):
    # A pid this process cannot see: as for an owner in another PID namespace.
    name = f"{SEGMENT_PREFIX}{_dead_pid()}_0badf00d"
    with open(f"/dev/shm/{name}", "wb") as segment:
        segment.write(b"\0" * 64)
    try:
        lock = _leftovers.hold(name)  # its owner, alive
        assert lock is not None
        _age({name}, 60)
        assert sweep() == []
        os.close(lock)  # its owner dies; but the segment was just written to
        _age({name}, 0)
        assert sweep() == []
        _age({name}, 60)
        assert sweep() == [name]
    finally:
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")


def _segment(pid: int, tag: str) -> str:
    name = f"{SEGMENT_PREFIX}{pid}_{tag}"
    with open(f"/dev/shm/{name}", "wb") as segment:
        segment.write(b"\0" * 64)
    return name


def test_a_segment_of_our_own_pid_is_swept_unless_we_hold_it(sweep):
    """A container's main process is PID 1 at every restart: its predecessor's segments bore
    its own PID, so they were taken for its own and never swept (Docker's 64 MiB filled up
    restart by restart). The locks tell: ours are held, the predecessor's are not."""
    left, ours = _segment(os.getpid(), "0ddba11"), _segment(os.getpid(), "5eed")
    lock = _leftovers.hold(ours)
    try:
        _age({left, ours}, 60)
        assert sweep() == [left]
        assert os.path.exists(f"/dev/shm/{ours}")
    finally:
        os.close(lock)
        os.unlink(f"/dev/shm/{ours}")


def test_a_leftover_named_by_a_pid_that_lives_here_is_swept(sweep):
    """A job in a container (its PID namespace, /dev/shm shared) is PID 2 or 3; killed with
    its tracker, its segments bore a PID that lives on the host (kthreadd), so they were taken
    for a live owner's and never swept. The lock alone tells."""
    left = _segment(1, "dec0de")  # PID 1 lives in every namespace
    try:
        _age({left}, 60)
        assert sweep() == [left]
    finally:
        if os.path.exists(f"/dev/shm/{left}"):
            os.unlink(f"/dev/shm/{left}")


def test_where_shared_memory_is_short_young_leftovers_are_waited_for(monkeypatch):
    """A job restarted at once after a kill found its predecessor's segments too young to
    tell from one being made, and swept once only: never. Short of room, it sweeps again,
    waiting (at most STALE_AFTER_S) for them to be told leftovers."""
    from shmaug.memory import store

    monkeypatch.setattr(_leftovers, "STALE_AFTER_S", 0.5)
    name = _segment(_dead_pid(), "c0ffee")
    try:
        started = time.monotonic()
        assert store.free_shm_bytes() is not None and os.path.exists(f"/dev/shm/{name}")
        store.free_shm_bytes(needed=2**62)  # more than any /dev/shm holds
        assert not os.path.exists(f"/dev/shm/{name}")
        assert time.monotonic() - started < 5
    finally:
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")


def test_a_fifo_named_as_a_segment_is_passed_over_without_a_hang(sweep):
    """One user's `mkfifo /dev/shm/shmaug_4242_deadbeef` hung every shmaug job on the machine
    at its first Loader: the sweep opened it for reading, which waits for a writer."""
    name = f"{SEGMENT_PREFIX}4242_deadbeef"
    os.mkfifo(f"/dev/shm/{name}")
    try:
        done: list[list[str]] = []
        thread = threading.Thread(target=lambda: done.append(sweep()), daemon=True)
        thread.start()
        thread.join(10)
        assert done and name not in done[0]
        assert _leftovers.census(SEGMENT_PREFIX) is not None  # (lists it without a hang too)
    finally:
        os.unlink(f"/dev/shm/{name}")


def test_young_leftovers_are_swept_by_a_later_store_once_they_can_be_told(sweep, monkeypatch):
    """A grid killed and started again at once: each restarted job swept once, found its
    predecessors' segments too young to tell, and left them for its whole run."""
    monkeypatch.setattr(_leftovers, "STALE_AFTER_S", 0.3)
    name = _segment(_dead_pid(), "6a11e")
    try:
        assert sweep() == []  # too young: told later
        assert _leftovers.sweep(SEGMENT_PREFIX) == []  # (not yet)
        time.sleep(0.5)
        assert _leftovers.sweep(SEGMENT_PREFIX) == [name]  # the next store made sweeps again
        assert _leftovers.sweep(SEGMENT_PREFIX) == []
    finally:
        if os.path.exists(f"/dev/shm/{name}"):
            os.unlink(f"/dev/shm/{name}")


def test_room_others_hold_is_told_by_whose_it_is_not_by_the_pid_in_names(sweep, monkeypatch):
    """In a PID namespace another container's job bore this process's PID, and the message
    said "this process's other loaders hold" its bytes; a killed job's segments were not
    told apart from running ones."""
    from shmaug.errors import SharedMemoryError
    from shmaug.memory import store

    running, left = _segment(os.getpid(), "1a57"), _segment(_dead_pid(), "de4d")
    lock = _leftovers.hold(running)
    monkeypatch.setattr(store, "free_shm_bytes", lambda needed=0: 10)
    try:
        _age({running, left}, 60)
        found = _leftovers.census(SEGMENT_PREFIX)
        assert sum(found["live"].values()) >= 64 and sum(found["left"].values()) >= 64
        with pytest.raises(SharedMemoryError) as short:
            store.check_need({store.DATASET: 100})
        told = str(short.value)
        assert "this process's other loaders" not in told
        assert "other running shmaug jobs hold" in told and "killed shmaug jobs hold" in told
        assert "killed shmaug jobs hold" in store.shm_report()  # (shmaug doctor)
    finally:
        os.close(lock)
        for name in (running, left):
            if os.path.exists(f"/dev/shm/{name}"):
                os.unlink(f"/dev/shm/{name}")
