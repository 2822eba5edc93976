"""Segments whose owner died with its resource tracker: marked while alive, swept afterwards.

The resource tracker unlinks the segments of a main process killed by SIGKILL, but when the
tracker dies with it (a SIGKILL to the whole process group: a job scheduler's cancel, a
container's or a machine's restart) nobody does, and /dev/shm keeps them until reboot.

So the owner holds a shared ``flock`` on each segment it creates (``hold``) for as long as it
lives; the kernel drops the lock however the owner dies, and the lock is seen across PID
namespaces (containers sharing /dev/shm through ``--ipc=host``). Each process that creates
a ``SharedStore`` first ``sweep``-s once: a segment named ours that is older than
``STALE_AFTER_S`` and that nobody holds locked is a leftover, and is unlinked. The creator's
PID in its name tells nothing here: in another PID namespace it is any process's (PIDs 1 and
2 live in every one; a job in a container is PID 2, the host's kthreadd), and a recycled PID
lives again; the lock alone tells.
Linux only: elsewhere POSIX segments have no path to lock (macOS), or vanish with their last
handle (Windows).
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import threading
import time

from .. import platform

log = logging.getLogger(__name__)

STALE_AFTER_S = 10.0  # younger segments may be between their creation and their lock
# invariant: when this process may sweep again (inf: it swept, and leftovers stay left; a
# sweep that met some too young to tell sets it to when they can be)
_next_sweep = 0.0
_sweep_lock = threading.Lock()

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def _directory() -> str | None:
    """Where segments have paths that can be locked, or None."""
    shm_dir = platform.SHM_DIR
    return shm_dir if fcntl is not None and shm_dir and os.path.isdir(shm_dir) else None


def hold(name: str) -> int | None:
    """Mark segment ``name`` as owned by this live process: a descriptor holding a shared
    lock on it, to close after the segment is unlinked; None where locks do not apply."""
    directory = _directory()
    if directory is None:
        return None
    fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def sweep(prefix: str, *, short: bool = False) -> list[str]:
    """Unlink the leftovers of dead owners, segments named ``<prefix><pid>_<hex>`` (once per
    process, and again by a later call once those too young to tell have aged: a grid of jobs
    killed and started again at once left theirs to the restarted jobs); returns their names.
    ``short``: /dev/shm cannot hold what is asked, so sweep again, and wait (at most
    ``STALE_AFTER_S``) for leftovers too young yet to tell from a segment being made."""
    global _next_sweep
    directory = _directory()
    with _sweep_lock:
        if directory is None or (time.monotonic() < _next_sweep and not short):
            return []
        _next_sweep = math.inf
    removed, young = _swept_once(directory, prefix)
    if short and young:
        time.sleep(min(max(young), STALE_AFTER_S))
        removed, young = removed + _swept_once(directory, prefix)[0], []
    if young:
        with _sweep_lock:
            _next_sweep = time.monotonic() + min(young)
    if removed:
        log.warning("removed %d shared-memory segments left in %s by shmaug processes killed "
                    "together with their resource tracker: %s", len(removed), directory,
                    ", ".join(removed))
    return removed


# Opening a segment to lock it: never blocks (a FIFO named so would wait for a writer, and
# every job hung at its first loader), never follows a link.
_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW


def _named(directory: str, prefix: str) -> list[str]:
    """The entries of ``directory`` named as segments ``<prefix><pid>_<hex>``, sorted."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)_[0-9a-f]+\Z")
    return [name for name in sorted(os.listdir(directory)) if pattern.match(name)]


def _swept_once(directory: str, prefix: str) -> tuple[list[str], list[float]]:
    """The leftovers unlinked, and the seconds until each one too young yet may be told one."""
    removed, young = [], []
    for name in _named(directory, prefix):
        wait = _remove_if_left(directory, name)
        if wait == 0.0:
            removed.append(name)
        elif wait is not None:
            young.append(wait)
    return removed, young


def _remove_if_left(directory: str, name: str) -> float | None:
    """0.0 where segment ``name`` was a leftover, now unlinked; the seconds until it may be
    told one where it looks left but was written within ``STALE_AFTER_S``; None where it is
    not."""
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, _OPEN)
    except OSError:  # gone meanwhile, another user's, or a link
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # not a segment, whatever its name
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its owner lives (in another PID namespace, or it is us)
            return None
        age = time.time() - os.fstat(fd).st_mtime
        if age < STALE_AFTER_S:  # (between its creation and its owner's lock, maybe)
            return STALE_AFTER_S - age + 0.1
        os.unlink(path)
        return 0.0
    except OSError:
        return None
    finally:
        os.close(fd)


def census(prefix: str, own: frozenset[str] = frozenset()) -> dict[str, dict[int, int]]:
    """The bytes of /dev/shm that segments named ours hold, but for ``own`` (this process's),
    by state ("live": locked by their owner; "left": a dead owner's, which a sweep removes;
    "unknown": another user's, which only that user's or root's processes can open) and by
    their owner's uid: what an out-of-room message and ``shmaug doctor`` tell."""
    directory = _directory()
    found: dict[str, dict[int, int]] = {"live": {}, "left": {}, "unknown": {}}
    if directory is None:
        return found
    for name in _named(directory, prefix):
        if name in own:
            continue
        try:
            info = os.lstat(os.path.join(directory, name))
        except OSError:  # gone meanwhile
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        state = _state(os.path.join(directory, name))
        if state == "left" and time.time() - info.st_mtime < STALE_AFTER_S:
            state = "live"  # (being made, maybe: not locked by its owner yet)
        by_uid = found[state]
        by_uid[info.st_uid] = by_uid.get(info.st_uid, 0) + info.st_blocks * 512
    return found


def _state(path: str) -> str:
    """"live", "left" or "unknown" (``census``) for the segment at ``path``."""
    try:
        fd = os.open(path, _OPEN)
    except OSError:
        return "unknown"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # its owner holds it (or a sweep does, this instant)
        return "live"
    finally:
        os.close(fd)  # (drops the lock taken, if any)
    return "left"
