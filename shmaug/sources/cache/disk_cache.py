"""The disk cache of a bucket source (``cache_dir=``, ``cache_limit=``): whole shards, and
whole image files, kept on local disk, shared by every worker and process of the host, and
reused across runs.

``DiskCache`` is built (and its folder checked writable) in the main process, travels to each
worker inside the source's ``remote.Remote`` (pickled once, as ``storage_options`` do), and
works in each process on its own:

- **Reads.** ``local(url)`` is the cached copy of an object when it is complete and of the
  size and etag the source was built with (``know``); the tables (``formats.table.RecordTable``,
  ``remote.bucket.RemoteTable``) read a record from it, and any other by ranged request, so epoch 1
  never waits for a download.
- **Downloads.** ``want(url)`` queues a shard for a background thread (``DOWNLOADS`` per
  process, each shard streamed in ``CHUNK`` requests); ``keep(url, data)`` writes a whole
  object a task has just read (an image file), so it is not fetched twice.
- **Writes are atomic.** An object is written to ``<name>.part`` while its ``<name>.lock`` is
  held (``_file_lock.FileLock``), checked against the expected size and the etag (the object's
  identity is read again before the download), then renamed (``os.replace``) to
  ``<name>.data`` under the folder's lock (``Space.complete``), so a listing counts it once.
  A download killed midway leaves only a ``.part``, which no read looks at; the next process
  to take that lock (or to scan the cache for room) removes it. A second process that finds
  the lock held leaves the shard to the first: a shard is downloaded once per host.
- **A process's exit waits for its downloads.** The threads are daemons, so a worker stopped
  by its loader's ``close`` (or a program's end) would abandon what is on its way, and a
  shard the run read whole could be missing from the cache when the next run, maybe without
  the bucket, wants it. So a process that queued a download or a write waits, as it exits,
  for those still queued or running, at most ``EXIT_WAIT_S`` (inside the 2 s a stopping worker
  is given before it is terminated), and logs it; what is left then is dropped (a ``.part``
  at worst, which no read looks at) and downloaded by a later run.
- **Names.** ``<hash of endpoint and URL>-<hash of size and etag>.data``: no URL, option or
  secret is written to the folder, and an object rewritten in the bucket has another name (the
  stale copy is removed when the new one is downloaded).
- **The bound.** Room is made by ``_space.Space`` (its eviction policy: ``lru``, or
  farthest next use once a loader hands the order to ``plan.CachePlan``). An object larger
  than the bound, no room, or the disk refusing a write (ENOSPC, EDQUOT, EFBIG) is logged
  once per process as a warning naming ``cache_dir`` and the bound, and the object is read
  by range.

What it leaves to others: which records a task reads (the tables), requests and their retries
(``remote.Remote``), room and eviction (``_space``).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import multiprocessing.util
import os
import queue
import tempfile
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable

from ._space import DATA, LOCK, PART, Space, remove, sibling, size_of
from ._file_lock import NOFOLLOW, FileLock
from ... import platform
from ...errors import ArgumentError, ArgumentTypeError, RemoteError, got

if TYPE_CHECKING:
    from ..remote import Remote

log = logging.getLogger(__name__)

DOWNLOADS = 4  # shards downloaded at once per process (each streamed by CHUNK requests)
CHUNK = 8 << 20  # bytes per request while a shard is downloaded
TOUCH_S = 30.0  # a cached object's use refreshes its modification time (LRU) at most this often
AGAIN_S = 5.0  # an object whose download did not happen is not tried again sooner, per process
QUEUED = 1024  # downloads and writes waiting per process at most; more are dropped (a later
# read asks again): an image file's write holds its bytes until it runs. Four rounds of a
# worker's look-ahead (``remote.ahead.AHEAD`` files each): at 256, one round of files filled it and
# the next round's writes were dropped, to be fetched again the next epoch. And at most this
# many bytes held by the queued writes (large images: 1,024 of them could be gigabytes).
QUEUED_BYTES = 256 << 20
# The longest a process's exit waits for its downloads and writes still queued or running: a
# stopping worker has 2 s (``engine.workers.pool``) before it is terminated, and a program's
# end should not hang on a large shard.
EXIT_WAIT_S = 1.5
# The disk refused a write: full, a quota, a file-size limit (EDQUOT is not on every system).
_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG)


class DiskCache:
    """A folder of whole objects shared by the host's processes, bounded by ``limit`` bytes
    (None: by the disk). See the module docstring.

    Example:
        >>> cache = DiskCache.made("~/.cache/shmaug", "50GB", "http://minio:9000")
        >>> cache.limit
        50000000000
    """

    __slots__ = ("folder", "limit", "scope", "idents", "space", "_pid", "_jobs", "_lock",
                 "_idle", "_pending", "_held", "_later", "_warned", "_ending", "changed",
                 "__weakref__")

    def __init__(self, folder: str, limit: int | None, scope: str = "",
                 idents: dict[str, str] | None = None) -> None:
        self.folder = folder  # invariant: an absolute folder this process could write
        self.limit = limit  # invariant: bytes >= 0, or None (the disk bounds it)
        self.scope = scope  # the endpoint: the same URL on another server is another object
        self.idents = dict(idents or {})  # url -> "size|etag" the source was built with
        self._fresh()

    def _fresh(self) -> None:
        """This process's own state (a fork starts with none of its parent's)."""
        self._pid = os.getpid()
        self._jobs: queue.Queue[Callable[[], None]] | None = None  # the downloads' queue
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified as each job ends
        self._pending: set[str] = set()  # queued or running here
        self._ending = False  # the process exits: a job not started by now is dropped
        self._held = 0  # bytes the queued writes hold (``QUEUED_BYTES``)
        self._later: dict[str, float] = {}  # url -> when it may be tried again
        self._warned = False  # the cache-full warning is logged once per process
        self.changed: dict[str, str] = {}  # url -> why: rewritten since the source was built
        self.space = Space(self.folder, self.limit)  # room and eviction, as this process sees

    @classmethod
    def made(cls, cache_dir: Any, cache_limit: Any, scope: str = "") -> DiskCache | None:
        """The cache a source's ``cache_dir`` and ``cache_limit`` ask for (None: none), its
        folder created and checked writable here, in the main process.

        Raises:
            ArgumentError: the folder cannot be created or written; a negative bound.
            ArgumentTypeError: ``cache_dir`` not a path, ``cache_limit`` not a size.
        """
        if cache_dir is None:
            if cache_limit is not None:
                raise ArgumentError(
                    f"`cache_limit` bounds the disk cache, which `cache_dir` turns on; "
                    f"received cache_limit={cache_limit!r} without cache_dir. Fix: pass "
                    f"cache_dir='~/.cache/shmaug' (a local folder), or drop cache_limit."
                )
            return None
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise ArgumentTypeError(
                f"`cache_dir` must be a local folder (a str or path); received "
                f"{got(cache_dir)}. Fix: e.g. cache_dir='~/.cache/shmaug', or None."
            )
        folder = os.path.abspath(os.path.expanduser(os.fspath(cache_dir)))
        limit = size_of("cache_limit", cache_limit)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)  # (a bucket's objects: yours)
            _own(folder, cache_dir)
            fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
            os.close(fd)
            os.remove(probe)
        except OSError as exc:
            raise ArgumentError(
                f"`cache_dir` must be a folder this process can create and write; received "
                f"{os.fspath(cache_dir)!r}, which refused it ({type(exc).__name__}: "
                f"{exc.strerror or exc}). Fix: pass a writable local folder (e.g. "
                f"cache_dir='~/.cache/shmaug'), give this user write permission on it, or "
                f"cache_dir=None to read by range."
            ) from None
        return cls(folder, limit, scope)

    def __repr__(self) -> str:
        return f"DiskCache({self.folder!r}, cache_limit={self.limit!r})"

    def __getstate__(self) -> tuple[str, int | None, str, dict[str, str]]:
        return self.folder, self.limit, self.scope, self.idents

    def __setstate__(self, state: tuple[str, int | None, str, dict[str, str]]) -> None:
        self.folder, self.limit, self.scope, self.idents = state
        self._fresh()

    def know(self, idents: dict[str, str]) -> None:
        """The identities (``"size|etag"``) of the objects, as the source was built."""
        self.idents.update(idents)

    @property
    def bound(self) -> str:
        return "no cache_limit" if self.limit is None else f"cache_limit={self.limit:,} bytes"

    # -- reads --------------------------------------------------------------------------------

    def path_of(self, url: str, ident: str = "") -> str:
        where = hashlib.sha1(f"{self.scope}|{url}".encode()).hexdigest()[:32]
        what = hashlib.sha1(ident.encode()).hexdigest()[:16]
        return os.path.join(self.folder, f"{where}-{what}{DATA}")

    def local(self, url: str, ident: str | None = None) -> str | None:
        """The complete cached copy of ``url`` (its size and etag as known: ``ident``, else
        as ``know`` said), or None."""
        ident = self.idents.get(url, "") if ident is None else ident
        path = self.path_of(url, ident)
        try:
            st = os.stat(path)
        except OSError:
            return None
        if ident and st.st_size != int(ident.split("|", 1)[0]):
            return None  # not what was downloaded (cut short or changed on disk): again
        if not platform.ours(path):  # (planted by another user where they may write)
            return None
        if time.time() - st.st_mtime > TOUCH_S:
            try:
                os.utime(path)  # used now: the last to be evicted
            except OSError:
                pass
        return path

    def refuse_changed(self, url: str) -> None:
        """Raise ``RemoteError`` where this process found ``url`` rewritten in the bucket since
        the source was built (its download checks): a regenerated shard's records read at the
        old offsets were other records, paired with the old labels, without a word."""
        why = self.changed.get(url)
        if why is not None:
            raise RemoteError(why)

    @staticmethod
    def whole(path: str) -> bytes | None:
        """A cached file's bytes, or None where it is gone (evicted since ``local``)."""
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    @staticmethod
    def read(path: str, ranges: list[tuple[int, int]]) -> list[bytes] | None:
        """The bytes of each ``(offset, size)`` of a cached file, or None where it is gone
        (evicted between ``local`` and here: the caller reads by range)."""
        try:
            with open(path, "rb", buffering=0) as f:
                out = []
                for offset, size in ranges:
                    f.seek(offset)
                    out.append(f.read(size))
                return out
        except OSError:
            return None

    # -- downloads ----------------------------------------------------------------------------

    def want(self, url: str, remote: Remote) -> None:
        """Download ``url`` whole in the background, unless it is cached or on its way (or
        ``SHMAUG_OFFLINE`` keeps the process off the network)."""
        if not remote.offline:
            self._submit(url, lambda: self.download(url, remote))

    def keep(self, url: str, data: bytes, ident: str | None = None, *,
             background: bool = True) -> None:
        """Write ``data``, all of object ``url`` as just read, named by its identity
        ``ident`` (else as ``know`` said): in the background, or now (``background=False``:
        what a source's construction read whole, which a later build without the bucket
        needs, and which the background queue's bound on bytes could drop). Data of another
        size than the identity says (the object changed since) is not kept."""
        ident = self.idents.get(url, "") if ident is None else ident
        if ident and int(ident.split("|", 1)[0]) != len(data):
            return
        if not background:
            self._store(url, len(data), lambda f: f.write(data), ident=ident)
            return
        self._submit(url, lambda: self._store(url, len(data), lambda f: f.write(data),
                                              ident=ident), held=len(data))

    def _submit(self, url: str, job: Callable[[], object], held: int = 0) -> None:
        """Queue ``job`` for ``url`` (which holds ``held`` bytes until it runs), unless one for
        it is queued, too many are, or it failed lately."""
        if self._pid != os.getpid():
            self._fresh()
        with self._lock:
            if (url in self._pending or len(self._pending) >= QUEUED
                    or held and self._held + held > QUEUED_BYTES
                    or self._later.get(url, 0.0) > time.monotonic()):
                return
            if self._jobs is None:  # (set once its threads run: a start that fails leaves
                # the next keep() to try again, not jobs queued that no thread takes)
                jobs: queue.Queue[Callable[[], None]] = queue.Queue()
                try:
                    for k in range(DOWNLOADS):  # daemons: the process's exit waits (settle)
                        platform.start_thread(self._drain, f"shmaug-cache-{k}", jobs)
                except RuntimeError as exc:  # (a cache's copy is no reason to fail a read)
                    log.debug("not cached now: %s", exc)
                    return
                self._jobs = jobs
                _settled_at_exit(self)
            self._pending.add(url)
            self._held += held

        def run() -> None:
            try:
                if self._ending:
                    return  # the exit's wait is over: left to a later run
                if not job():
                    with self._lock:
                        now = time.monotonic()
                        if len(self._later) >= QUEUED:  # only those still waiting are kept
                            self._later = {u: t for u, t in self._later.items() if t > now}
                        self._later[url] = now + AGAIN_S
            finally:
                with self._lock:
                    self._pending.discard(url)
                    self._held -= held
                    self._idle.notify_all()

        self._jobs.put(run)

    def settle(self, deadline: float) -> int:
        """Wait until this process's queued and running jobs are done, or ``deadline``
        (``time.monotonic``) passes; those not started by then are dropped. How many are
        left."""
        if self._pid != os.getpid():
            return 0  # a fork's copy: its parent's jobs are not its own
        with self._idle:
            while self._pending and time.monotonic() < deadline:
                self._idle.wait(deadline - time.monotonic())
            self._ending = True
            return len(self._pending)

    @staticmethod
    def _drain(jobs: queue.Queue[Callable[[], None]]) -> None:
        while True:
            job = jobs.get()
            try:
                job()
            except Exception:  # never the thread's end: the object is read by range
                log.exception("disk cache job failed")

    def download(self, url: str, remote: Remote) -> bool:
        """Download shard ``url`` whole into the cache, unless another process does or did.
        True when this call wrote it."""
        ident = self.idents.get(url, "")
        if not ident:
            return False  # unknown identity: never cached unchecked
        size = int(ident.split("|", 1)[0])
        if self.local(url) is not None:
            return False

        def unchanged() -> bool:  # the object is the one indexed (asked once the lock is ours)
            try:
                now = remote.identities([url])[0]
            except Exception as exc:
                now = exc
            if isinstance(now, str) and now != ident:  # its records' offsets no longer hold
                self.changed[url] = (
                    f"{remote.scrub(url)} changed in the bucket since the source was built "
                    f"(size|etag {ident}, now {now}): its records lie elsewhere now, and read "
                    f"at the offsets indexed they would pair images with other labels. Fix: "
                    f"build the source again to read the shard as it is now.")
            elif now != ident:
                log.warning("%s not cached: its identity could not be read (%s); read by "
                            "range meanwhile", remote.scrub(url), remote.scrub(str(now)))
            return now == ident

        def stream(f: Any) -> None:
            for start in range(0, size, CHUNK):
                f.write(remote.read_range(url, start, min(size, start + CHUNK)))

        return self._store(url, size, stream, remote, unchanged)

    def _store(self, url: str, size: int, write: Callable[[Any], object],
               remote: Remote | None = None, check: Callable[[], bool] | None = None,
               ident: str | None = None) -> bool:
        """Write ``size`` bytes (``write(file)``) as ``url``'s entry (named by ``ident``, else
        as ``know`` said): its lock held, ``check()`` passed, room made, into ``.part``,
        checked, renamed. False when another process holds it, it is cached already, the check
        fails, or it does not fit (warned)."""
        ident = self.idents.get(url, "") if ident is None else ident
        final = self.path_of(url, ident)
        shown = remote.scrub(url) if remote is not None else url
        lock = FileLock(sibling(final, LOCK))
        if not lock.acquire(0):
            return False  # another process downloads it: a shard is downloaded once
        part = sibling(final, PART)
        try:
            if self.local(url, ident) is not None or check is not None and not check():
                return False
            remove(part)  # a killed download's leftover: its lock is ours now
            full = self.space.reserve(final, size)
            if full is not None:
                self._full(full)
                return False
            with open(os.open(part, os.O_RDWR | NOFOLLOW), "r+b") as f:
                write(f)
                written = f.tell()
            if written != size:
                raise OSError(errno.EIO, f"{written} bytes written of {size}")
            self.space.complete(final)  # whole or not at all
            log.debug("cached %s (%d bytes) as %s", shown, size, final)
            return True
        except OSError as exc:
            remove(part)
            if exc.errno in _FULL:
                self._full(f"the disk refused a write ({exc.strerror or exc})")
            else:
                log.warning("%s not cached in %s: %s", shown, self.folder, exc)
            return False
        except Exception as exc:  # the bucket failed: read by range, as before
            remove(part)
            log.warning("%s not cached in %s: %s", shown, self.folder,
                        remote.scrub(str(exc)) if remote is not None else exc)
            return False
        finally:
            lock.release()

    def _full(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("The disk cache in cache_dir=%r is full (%s; %s): what does not fit "
                        "is read by range from the bucket. Fix: raise cache_limit, free disk "
                        "space there, or choose another cache_dir.", self.folder, why,
                        self.bound)


# The caches that queued a job in this process (``_settled_at_exit``), and the process that
# registered the wait for them.
_QUEUED: weakref.WeakSet[DiskCache] = weakref.WeakSet()
_REGISTERED_IN = -1


def _own(folder: str, given: Any) -> None:
    """A cache folder another user owns is refused (root's own, a volume's, is not): its
    owner could swap cached objects for others of the same size (read back as the bucket's).
    Links planted under an entry's name are refused where each is opened (``NOFOLLOW``)."""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:  # (Windows; root owns all anyway)
        return
    owner = os.stat(folder).st_uid
    if owner not in (os.geteuid(), 0):
        raise ArgumentError(
            f"`cache_dir` {os.fspath(given)!r} belongs to another user (uid {owner}), who "
            f"could swap the cached objects for others (read back as the bucket's). Fix: a "
            f"folder of your own, e.g. cache_dir='~/.cache/shmaug' (made mode 700), or "
            f"cache_dir=None to read by range.")


def _settled_at_exit(cache: DiskCache) -> None:
    """Have this process's exit wait for ``cache``'s jobs (``_settle_all``). A
    ``multiprocessing`` finalizer: a worker runs it as its target returns (its loader's
    ``close``), the main process at its interpreter's exit."""
    global _REGISTERED_IN
    _QUEUED.add(cache)
    if _REGISTERED_IN != os.getpid():
        _REGISTERED_IN = os.getpid()
        multiprocessing.util.Finalize(None, _settle_all, exitpriority=100)


def _settle_all() -> None:
    """The wait at exit for every cache's downloads and writes, together bounded by
    ``EXIT_WAIT_S``, and what it did, logged."""
    caches = [c for c in list(_QUEUED) if c._pid == os.getpid()]
    with_jobs = [c for c in caches if c._pending]
    if not with_jobs:
        return
    began = time.monotonic()
    jobs = sum(len(c._pending) for c in with_jobs)
    left = sum(c.settle(began + EXIT_WAIT_S) for c in with_jobs)
    folders = ", ".join(sorted({repr(c.folder) for c in with_jobs}))
    if left:
        log.warning("%d of %d object(s) on their way into cache_dir=%s not written within "
                    "%.1f s of this process's exit: left to a later run, which reads them by "
                    "range and downloads them again (a run without the bucket lacks them)",
                    left, jobs, folders, EXIT_WAIT_S)
    else:
        log.info("waited %.2f s at this process's exit for %d object(s) on their way into "
                 "cache_dir=%s", time.monotonic() - began, jobs, folders)
