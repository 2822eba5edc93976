"""A lock held by one process of the host at a time, through a file (``FileLock``): what makes
the disk cache (``disk_cache``) shared, so two workers, two loaders or two programs on a host
download a shard once.

POSIX: ``fcntl.flock`` on the lock file (released by the kernel when its holder dies, so a
killed download never leaves a lock behind). Windows: ``msvcrt.locking`` on the file's first
byte (also released when the process ends). Both are imported only where they exist, so this
module imports on every platform. A lock file is empty and is never removed: removing it while
another process waits on it would let two hold "the" lock. This module locks; it reads nothing.
"""

from __future__ import annotations

import os
import time
from typing import Any

try:  # POSIX
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt

LOCK_POLL_S = 0.05  # how often a bounded wait tries the lock again


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link planted under a lock's or a part's name is
# refused, not followed (where another user could write the folder: a file made elsewhere)


class FileLock:
    """An exclusive lock on ``path`` (created when missing) for one process of the host.

    ``acquire(wait_s)``: True once held; False when another process held it for ``wait_s``
    seconds (0: one try, never waits). Released by ``release`` or ``with``, or by the system
    when the process dies.

    Example:
        >>> lock = FileLock("/tmp/cache/ab12.lock")
        >>> if lock.acquire(0):
        ...     try: ...
        ...     finally: lock.release()
    """

    __slots__ = ("path", "_fd")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None  # invariant: an open descriptor iff the lock is held

    def acquire(self, wait_s: float = 0.0) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600)
        deadline = time.monotonic() + wait_s
        while True:
            if _try_lock(fd):
                self._fd = fd
                return True
            if time.monotonic() >= deadline:
                os.close(fd)
                return False
            time.sleep(LOCK_POLL_S)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            _unlock(fd)
            os.close(fd)

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:  # held by another process (EWOULDBLOCK / EACCES)
        return False
    return True


def _unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
