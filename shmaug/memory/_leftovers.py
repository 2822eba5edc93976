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
import os
import re
import threading
import time

from .. import platform

log = logging.getLogger(__name__)

STALE_AFTER_S = 10.0  # younger segments may be between their creation and their lock
_swept = False  # invariant: this process has swept (once is enough: leftovers stay left)
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
    process); returns their names. ``short``: /dev/shm cannot hold what is asked, so sweep
    again, and wait (at most ``STALE_AFTER_S``) for leftovers too young yet to tell from a
    segment being made: a job restarted at once after a kill (a container's restart) found
    its predecessor's there, and never swept them."""
    global _swept
    directory = _directory()
    with _sweep_lock:
        if directory is None or (_swept and not short):
            return []
        _swept = True
    removed, young = _swept_once(directory, prefix)
    if short and young:
        time.sleep(min(max(young), STALE_AFTER_S))
        removed += _swept_once(directory, prefix)[0]
    if removed:
        log.warning("removed %d shared-memory segments left in %s by shmaug processes killed "
                    "together with their resource tracker: %s", len(removed), directory,
                    ", ".join(removed))
    return removed


def _swept_once(directory: str, prefix: str) -> tuple[list[str], list[float]]:
    """The leftovers unlinked, and the seconds until each one too young yet may be told one."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)_[0-9a-f]+\Z")
    removed, young = [], []
    for name in sorted(os.listdir(directory)):
        wait = _remove_if_left(directory, name, pattern)
        if wait == 0.0:
            removed.append(name)
        elif wait is not None:
            young.append(wait)
    return removed, young


def _remove_if_left(directory: str, name: str, pattern: re.Pattern[str]) -> float | None:
    """0.0 where ``name`` was a leftover, now unlinked; the seconds until it may be told one
    where it looks left but was written within ``STALE_AFTER_S``; None where it is not."""
    if pattern.match(name) is None:
        return None
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # gone meanwhile, or another user's
        return None
    try:
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
