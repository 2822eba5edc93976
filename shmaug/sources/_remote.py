"""Samples in object storage (s3://, gs://, https://...): read through fsspec, fast and quietly.

A request to a bucket costs 10-100 ms before its first byte, so one read after another caps a
worker at a few dozen images/s. This module hides that latency and keeps credentials out of
sight; it knows nothing of images:

- ``is_url`` / ``Remote``: a URL is read by fsspec's filesystem for its protocol, imported only
  then (a missing package is a one-line error naming the extra). ``Remote`` holds the protocol
  and the user's ``storage_options`` and builds one filesystem per process (a forked worker
  never uses its parent's event loop or connections). It pickles once into a worker's spec,
  never into a task; its ``repr`` and every message it builds mask secret values.
- ``Remote.fetch_all(urls)``: every object at once on a bounded thread pool (``MAX_IN_FLIGHT``
  requests per process), each with ``fetch``'s retries.
- ``Remote.fetch(url)`` / ``read_ranges(url, ranges)`` / ``read_many``: one object, or byte
  ranges of one object (or of several, all in flight together) with neighbouring ranges
  coalesced into one request (record shards: ``_index.RecordTable.prefetch``); what ranged
  requests read is kept, bounded (``Spans``), and serves later ranges inside it. Transient
  failures (timeouts, 5xx, throttling, a dropped connection) are retried ``RETRIES`` times with
  exponential backoff, then ``RemoteError`` names the object and the last failure; a missing
  object is ``FileNotFoundError`` at once (the caller names it: an unreadable image), a refused
  credential or a refused connection ``RemoteError`` at once, naming the fix. These rules
  (``Remote.failure``) hold for every call the main process makes too: listing, globbing,
  sizes and etags, and (``_shards.Shards.opened``) the index scan.
- ``Fetched``: a worker's fetched samples, for its task and the tasks queued behind it (one
  round of requests for several tasks), each handed out once.
- ``_bucket.RemoteTable`` uses this layer for image files (``files.py``).
- ``listing`` / ``glob`` / ``check_exist`` / ``identities``: list a bucket folder once (one
  paginated listing, not one per class) in Keras' folder order, or a glob pattern's matches;
  check that objects exist, or read their size and etag (what an index cache keys on),
  concurrently.
"""

from __future__ import annotations

import bisect
import concurrent.futures as cf
import copy
import errno
import itertools
import logging
import math
import os
import posixpath
import random
import re
import threading
import time
from collections import Counter, OrderedDict
from typing import Any, Callable, Iterable, Sequence, TypeVar

from ..errors import ArgumentError, ArgumentTypeError, RemoteError, got

log = logging.getLogger("shmaug.sources.remote")
T = TypeVar("T")

MAX_IN_FLIGHT = 16  # requests in flight per process: enough to hide 50 ms at ~300 objects/s
RETRIES = 3  # transient failures retried per request, then RemoteError
BACKOFF_S = 0.2  # first retry's wait; doubled each time (with jitter)
# The longest one request may take, whatever the backend's own timeouts say (a server that
# accepts connections and never answers): nothing hangs. The environment variable reaches
# every worker, forked or spawned.
REQUEST_TIMEOUT_S = float(os.environ.get("SHMAUG_REQUEST_TIMEOUT_S", "60"))
WAIT_S = 300.0  # the longest a task waits for its objects
# Byte ranges of one object closer than the gap are read in one request. Reading a gap costs
# gap / bandwidth, another request its round trip, so the gap grows with the round trip this
# process measures (``RoundTrip``), between these bounds.
GAP = 64 * 1024  # before any measurement, and the least: a fast or local store
MAX_GAP = 4 * 1024 * 1024  # the most: one request never pulls megabytes it does not need
BANDWIDTH = 100e6  # bytes/s assumed of one request's stream (a bucket gives 50-200 MB/s)
# Nor does coalescing chain ranges into one long serial stream where several requests in
# flight would read them faster: a request spans at most 9 round trips' worth of bytes (90% of
# its time transferring), between these bounds. Arrow sizes its reads by the same rule.
MIN_SPAN, MAX_SPAN = 1 << 20, 64 << 20
# Samples of the tasks queued behind a worker's task whose bytes are fetched with the task's
# (``Fetched``): fewer round trips, and records of one shard coalesced across tasks. At most
# this many samples, and about AHEAD_BYTES of them per worker once their size is known.
AHEAD, AHEAD_BYTES = 256, 32 << 20


def _mebibytes(name: str, default: float) -> int:
    """The environment variable ``name`` as a size in MiB (the default where unset or bad)."""
    text = os.environ.get(name, "")
    try:
        value = float(text) if text else default
        if not 0 <= value < 1 << 40:
            raise ValueError
    except ValueError:
        log.warning("%s=%r is not a size in MiB (a number >= 0); using %g.", name, text,
                    default)
        value = default
    return int(value * (1 << 20))


# Bytes of its ranged reads a process keeps (``Spans``), least recently used out first: a
# request that read through a gap also read the records in it, and a later task's records may
# lie in a span already read; those are served without a request. Per process (worker); the
# environment variable reaches every worker, forked or spawned (0: none kept).
SPAN_CACHE = _mebibytes("SHMAUG_SPAN_CACHE_MB", 32)
MASK = "***"
# Which package each protocol needs, and the extra that installs it.
_BACKENDS = {"s3": ("s3fs", "remote"), "s3a": ("s3fs", "remote"), "gs": ("gcsfs", "gcs"),
             "gcs": ("gcsfs", "gcs"), "http": ("aiohttp", "remote"),
             "https": ("aiohttp", "remote")}
_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_SECRET = re.compile(r"secret|password|passwd|token|credential|session|key|auth|signature",
                     re.IGNORECASE)
_PUBLIC = {"endpoint_url", "region_name", "anon", "use_ssl", "requester_pays", "project"}


def protocol_of(path: str) -> str | None:
    """``"s3"`` for ``"s3://b/k"``; None for a local path (``file://`` counts as local)."""
    match = _URL.match(path) if isinstance(path, str) else None
    if match is None or match.group(1).lower() == "file":
        return None
    return match.group(1).lower()


def is_url(path: Any) -> bool:
    return protocol_of(path) is not None


def masked(options: Any) -> Any:
    """``options`` with every secret-looking value replaced by ``***`` (nested dicts too)."""
    if isinstance(options, dict):
        return {k: (masked(v) if isinstance(v, (dict, list, tuple)) or k in _PUBLIC
                    or not _SECRET.search(str(k)) else MASK) for k, v in options.items()}
    if isinstance(options, (list, tuple)):
        return type(options)(masked(v) for v in options)
    return options


def secrets_of(options: Any) -> list[str]:
    """The secret values in ``options``, longest first (what ``scrub`` removes from text)."""
    found: list[str] = []
    if isinstance(options, dict):
        for k, v in options.items():
            if isinstance(v, (dict, list, tuple)):
                found += secrets_of(v)
            elif k not in _PUBLIC and _SECRET.search(str(k)) and isinstance(v, str) and v:
                found.append(v)
    elif isinstance(options, (list, tuple)):
        for v in options:
            found += secrets_of(v)
    return sorted(set(found), key=len, reverse=True)


class Remote:
    """One protocol's filesystem with the user's options: built lazily, once per process."""

    __slots__ = ("protocol", "_options", "_secrets", "_fs", "_pool", "_pid", "_lock", "_trip",
                 "_one_get", "_spans")

    def __init__(self, protocol: str, storage_options: dict[str, Any] | None) -> None:
        if storage_options is not None and not isinstance(storage_options, dict):
            raise ArgumentTypeError(
                f"`storage_options` must be a dict of fsspec options; received "
                f"{got(masked(storage_options))}. Fix: e.g. `storage_options="
                f"{{'client_kwargs': {{'endpoint_url': 'http://...'}}}}`, or None."
            )
        self.protocol = protocol
        self._options = dict(storage_options or {})
        self._secrets = secrets_of(self._options)
        self._fs: Any = None
        self._pool: cf.ThreadPoolExecutor | None = None
        self._pid = -1
        self._lock = threading.Lock()
        self._trip = RoundTrip()
        self._one_get: dict[str, int] = {}
        self._spans = Spans()
        _import_fsspec(protocol)  # fail here, in the main process, with the extra to install

    def __repr__(self) -> str:
        return f"Remote({self.protocol!r}, storage_options={masked(self._options)!r})"

    def __getstate__(self) -> tuple[str, dict[str, Any]]:
        # Sent once, in a worker's spec (its load), never per task; the worker then gives the
        # options to the backend as fsspec expects (``fsspec.filesystem(protocol, **options)``).
        return self.protocol, self._options

    def __setstate__(self, state: tuple[str, dict[str, Any]]) -> None:
        self.protocol, self._options = state
        self._secrets = secrets_of(self._options)
        self._fs = self._pool = None
        self._pid = -1
        self._lock = threading.Lock()
        self._trip = RoundTrip()
        self._one_get = {}
        self._spans = Spans()

    @property
    def has_options(self) -> bool:
        return bool(self._options)

    @property
    def options_text(self) -> str:
        """The options as a repr shows them: secrets masked."""
        return repr(masked(self._options))

    def scrub(self, text: str) -> str:
        """``text`` with every secret value of the options replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def fs(self) -> Any:
        """This process's filesystem (a fork gets its own: the parent's loop is not its)."""
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    fsspec = _import_fsspec(self.protocol)
                    # A copy: backends edit what they are given (botocore's retries dict).
                    self._fs = fsspec.filesystem(self.protocol, skip_instance_cache=True,
                                                 **copy.deepcopy(self._options))
                    if self.protocol in ("s3", "s3a"):
                        _refusals_not_retried(self._fs)
                    self._one_get = _one_get(self._fs, self.protocol, self._options)
                    self._spans = Spans()  # a fork's copy of its parent's is not its own
                    self._pool = None
                    self._pid = os.getpid()
        return self._fs

    def _executor(self) -> cf.ThreadPoolExecutor:
        self.fs()
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="shmaug-fetch")
        return self._pool

    # -- requests ---------------------------------------------------------------------------

    def fetch(self, url: str) -> bytes:
        """The bytes of object ``url``, retried when the failure is transient.

        Raises:
            FileNotFoundError: no such object (at once).
            RemoteError: a refused credential or connection (at once), or transient
                failures ``RETRIES`` times over, naming the object and the last one.
        """
        return self._retried(url, lambda fs: bytes(
            fs.cat_file(url, **self._one_get, **_limit(fs))))

    def read_ranges(self, url: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, size)`` of object ``url``, in order. Ranges closer than
        the measured round trip's worth of bytes are read in one request (``coalesce``,
        ``RoundTrip.gap``); requests run concurrently."""
        out = self.read_many([(url, ranges)])[0]
        if isinstance(out, BaseException):
            raise out
        return out

    def reads_whole(self, total: int) -> int:
        """The largest object a source of ``total`` bytes in the bucket should read whole on
        first use, then serve from the spans kept (``Spans``): one request's span, where the
        whole source fits ``SPAN_CACHE`` (else 0: a whole read would be dropped unused)."""
        return self._trip.span() if total <= SPAN_CACHE else 0

    def read_many(self, wanted: Sequence[tuple[str, Sequence[tuple[int, int]]]]
                  ) -> list[list[bytes] | BaseException]:
        """``read_ranges`` of several objects at once: what earlier requests read is served
        from ``Spans``, the rest of every object's coalesced requests in flight together
        (``MAX_IN_FLIGHT`` at a time). Per object, its pieces in the order asked, or the
        exception its first failed request raised (others still read)."""
        self.fs()  # a fork starts with its own (empty) spans
        gap, span = self._trip.gap(), self._trip.span()
        parts = [[self._spans.find(url, offset, size) for offset, size in ranges]
                 for url, ranges in wanted]
        todo = [[i for i, part in enumerate(found) if part is None] for found in parts]
        groups = [coalesce([ranges[i] for i in rest], gap, span)
                  for (_, ranges), rest in zip(wanted, todo)]
        requests = [(url, start, stop) for (url, _), found in zip(wanted, groups)
                    for start, stop, _ in found]
        # start= / end= by name: s3fs' third positional parameter is version_id.
        pieces = iter(self.map_all(requests, lambda item: self._retried(item[0], lambda fs: (
            bytes(fs.cat_file(item[0], start=item[1], end=item[2], **_limit(fs)))))))
        out: list[list[bytes] | BaseException] = []
        for (url, ranges), found, rest, got_ in zip(wanted, groups, todo, parts):
            failed: BaseException | None = None
            for start, _, members in found:
                piece = next(pieces)
                if isinstance(piece, BaseException):
                    failed = failed or piece
                    continue
                self._spans.keep(url, start, piece)
                for m in members:
                    offset, size = ranges[rest[m]]
                    got_[rest[m]] = piece[offset - start: offset - start + size]
            out.append(failed if failed is not None else [p or b"" for p in got_])
        return out

    def fetch_all(self, urls: Sequence[str]) -> list[bytes | BaseException]:
        """Each object's bytes, or the exception ``fetch`` raised for it; all in flight
        together, ``MAX_IN_FLIGHT`` at a time."""
        return self.map_all(urls, self.fetch)

    def map_all(self, items: Sequence[Any], fn: Callable[[Any], Any]) -> list[Any]:
        if len(items) <= 1:
            return [_outcome(fn, item) for item in items]
        futures = [self._executor().submit(_outcome, fn, item) for item in items]
        # One bound per 4 waves of requests: a round for several tasks queues more of them.
        waves = math.ceil(len(items) / (4 * MAX_IN_FLIGHT))
        limit = max(WAIT_S, REQUEST_TIMEOUT_S * (RETRIES + 2)) * waves
        done, late = cf.wait(futures, timeout=limit)
        if late:
            for f in late:
                f.cancel()
            raise RemoteError(
                f"{len(late)} of {len(items)} requests to {self.protocol}:// did not finish "
                f"within {limit:.0f} s. Fix: check the network and the endpoint in "
                f"storage_options={self.options_text}."
            )
        return [f.result() for f in futures]

    def _retried(self, url: str, call: Callable[[Any], T], doing: str = "read") -> T:
        """``call(fs)``, retried while its failures are transient (``failure`` says which are
        not). A call's bytes teach ``RoundTrip`` what a request costs."""
        last: BaseException | None = None
        for attempt in range(RETRIES + 1):
            if attempt:
                wait = BACKOFF_S * 2 ** (attempt - 1) * (0.5 + random.random())
                log.debug("retrying %s in %.2f s after: %s", url, wait,
                          self.scrub(_describe(last)))
                time.sleep(wait)
            try:
                fs = self.fs()  # built before the clock starts: a request's cost, not a client's
                began = time.perf_counter()
                out = call(fs)
                if isinstance(out, bytes):
                    self._trip.observe(time.perf_counter() - began, len(out))
                return out
            except Exception as exc:
                final = self._final(url, exc, doing)
                if final is not None:
                    raise final from None
                last = exc  # transient until proven otherwise: retried, bounded
        raise self.failure(url, last, doing, RETRIES + 1)

    def failure(self, url: str, exc: BaseException | None, doing: str = "read",
                attempts: int = 1) -> BaseException:
        """The error the rules make of ``exc``, raised while ``doing`` (``"read"``, ``"list"``,
        ``"index"``) ``url``: what ``_final`` says, else the transient failure that ended
        ``attempts`` tries. For a call that is not retried (the index scan's stream)."""
        final = None if exc is None else self._final(url, exc, doing)
        if final is not None:
            return final
        what = f"read {url!r} to index it" if doing == "index" else f"{doing} {url!r}"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return RemoteError(
            f"Could not {what}{tries}; the last failure: {self.scrub(_describe(exc))}. Fix: "
            f"check that the endpoint is reachable (storage_options={self.options_text}) and "
            f"retry."
        )

    def _final(self, url: str, exc: BaseException, doing: str) -> BaseException | None:
        """The error that ends a call at its first failure, or None (transient: retried).

        A missing object (or bucket) is ``FileNotFoundError``; a refused credential and a
        refused connection (nothing listens at the endpoint: another try cannot help, and
        botocore's own retries made it 41.5 s) are ``RemoteError`` naming the fix."""
        what = f"read {url!r} to index it" if doing == "index" else f"{doing} {url!r}"
        if isinstance(exc, RemoteError):
            return exc
        if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
            if doing == "list":  # the backend's reason alone: no such bucket
                return FileNotFoundError(self.scrub(_describe(exc)))
            return FileNotFoundError(f"no such object {url!r}")
        if isinstance(exc, PermissionError):
            may = "may list the bucket" if doing == "list" else "the bucket accepts"
            unlisted = "; a list of the objects' URLs needs no listing" if doing == "list" else ""
            return RemoteError(
                f"Could not {what}: access was refused ({self.scrub(_describe(exc))}). Fix: "
                f"pass credentials that {may} in storage_options (now {self.options_text}) or "
                f"where the backend looks for them (environment, config files), or "
                f"`storage_options={{'anon': True}}` for a public bucket{unlisted}."
            )
        if refused(exc):
            return RemoteError(
                f"Could not connect to {what}: the connection was refused "
                f"({self.scrub(_describe(exc))}); nothing listens there, so it is not retried. "
                f"Fix: check that the endpoint is reachable: its address in storage_options "
                f"(now {self.options_text}), and that the server is running."
            )
        return None

    # -- listing ----------------------------------------------------------------------------

    def url(self, path: str) -> str:
        """A path as fsspec lists it (``bucket/key``) as a URL (``s3://bucket/key``)."""
        return path if is_url(path) else f"{self.protocol}://{path}"

    def listing(self, root: str) -> Listing:
        """Every object under ``root``, listed once (s3: one paginated listing).

        Raises:
            ArgumentError: nothing is there.
            RemoteError: as ``fetch`` (retried, or refused at once).
        """
        try:
            found = self._retried(root, lambda fs: list(fs.find(root, detail=False)), "list")
        except FileNotFoundError:
            found = []
        if not found:
            raise ArgumentError(
                f"`directory` must be an existing folder; {root!r} holds no object. Fix: pass "
                f"the folder (prefix) that holds one sub-folder of images per class."
            )
        return Listing(root, [self.url(p) for p in found])

    def glob(self, pattern: str) -> list[str]:
        """The URLs of the objects matching ``pattern``, as the bucket lists them.

        Raises:
            FileNotFoundError: no such bucket (the backend's reason in the message).
            RemoteError: as ``fetch`` (retried, or refused at once).
        """
        return [self.url(p) for p in self._retried(
            pattern, lambda fs: list(fs.glob(pattern)), "list")]

    def identities(self, urls: Sequence[str]) -> list[str | BaseException]:
        """Per object, ``"size|etag"`` (its modification time where the backend gives no
        etag): what an index cache keys on; or the exception (``FileNotFoundError``: none,
        ``IsADirectoryError``: a folder)."""
        def ident(fs: Any, url: str) -> bytes:
            info = fs.info(url)
            if info.get("type", "file") != "file":
                return b""  # a folder (a prefix), not an object
            tag = next((str(info[k]) for k in ("ETag", "etag", "md5Hash", "LastModified",
                                               "mtime", "updated") if info.get(k)), "")
            return f"{int(info['size'])}|{tag}".encode()

        outcomes = self.map_all(list(urls), lambda u: self._retried(u, lambda fs: ident(fs, u)))
        return [o if isinstance(o, BaseException) else o.decode() if o else
                IsADirectoryError(f"{u!r} is a folder, not an object")
                for u, o in zip(urls, outcomes)]

    def check_exist(self, urls: Sequence[str]) -> None:
        """Raises ``ArgumentError`` naming the missing objects (checked concurrently)."""
        # ``info``, not ``isfile``: isfile answers False for a refused credential too.
        outcomes = self.identities(urls)
        missing = [u for u, o in zip(urls, outcomes)
                   if isinstance(o, (FileNotFoundError, IsADirectoryError))]
        if missing:
            raise ArgumentError(
                f"{len(missing)} object(s) do not exist, e.g. {missing[0]!r}. Fix: correct the "
                f"URLs, or pass on_error='skip' to replace them and count them."
            )
        for o in outcomes:
            if isinstance(o, BaseException):
                raise o


class Listing:
    """A bucket folder listed once, walked as ``_folders`` walks a local one."""

    def __init__(self, root: str, urls: Iterable[str]) -> None:
        self.root = root.rstrip("/")
        self.dirs: dict[str, list[str]] = {}  # folder URL -> names of the objects in it
        for url in urls:
            folder, name = url.rsplit("/", 1)
            self.dirs.setdefault(folder, []).append(name)

    def walk(self, root: str, recursive: bool = True) -> list[tuple[str, list[str]]]:
        """``(folder, file names)`` under ``root`` as ``os.walk`` gives them."""
        root = root.rstrip("/")
        return [(d, names) for d, names in self.dirs.items()
                if d == root or recursive and d.startswith(root + "/")]

    def subdirs(self, root: str) -> list[str]:
        """The names of ``root``'s sub-folders (folders that hold an object somewhere)."""
        prefix = root.rstrip("/") + "/"
        return sorted({d[len(prefix):].split("/", 1)[0] for d in self.dirs
                       if d.startswith(prefix)})

    @staticmethod
    def join(root: str, name: str) -> str:
        return posixpath.join(root, name)


class Fetched:
    """A worker's fetched bytes (or the exception a fetch raised), handed out as asked.

    Asked for a task's samples, it says which to fetch: none when an earlier task fetched them
    all; otherwise the task's missing ones and those of the tasks queued behind it (up to
    ``AHEAD`` samples, ``AHEAD_BYTES`` at the mean size seen so far; before any is seen, as
    many as the task's), in one round of requests. A sample is kept until each of its uses in
    that round took it (weighted sampling draws one twice). What is no longer wanted (a
    cancelled task's) is dropped at the next round. Failures live one task: a queued task's
    sample whose fetch failed, or a failure left by an earlier task, is fetched again (a
    missing object stays missing)."""

    __slots__ = ("_ready", "_uses", "_task", "_pid", "_bytes", "_count")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._ready: dict[int, bytes | BaseException] = {}
        self._uses: dict[int, int] = {}  # takes left per sample, as counted at its round
        self._task: set[int] = set()  # the samples of the task that asked last
        self._pid = os.getpid()  # a fork starts empty: its parent's leftovers are not its own
        self._bytes = self._count = 0  # of the samples fetched: their mean size bounds ahead

    def missing(self, indices: Iterable[int], ahead: Iterable[int] = ()) -> list[int]:
        if self._pid != os.getpid():
            self._reset()
        for i in [i for i, o in self._ready.items() if _transient(o)]:
            del self._ready[i]  # an earlier task's failure: this task tries again
        task = [int(i) for i in indices]
        self._task = set(task)
        if all(i in self._ready for i in task):
            return []
        room = len(task) if not self._count else min(AHEAD, AHEAD_BYTES * self._count // max(
            1, self._bytes))
        wanted = task + [int(i) for i in itertools.islice(ahead, room)]
        self._uses = Counter(wanted)
        self._ready = {i: self._ready[i] for i in self._uses if i in self._ready}
        return [i for i in self._uses if i not in self._ready]

    def put(self, indices: Sequence[int], outcomes: Sequence[bytes | BaseException]) -> None:
        for i, outcome in zip(indices, outcomes):
            if isinstance(outcome, BaseException):
                if i in self._task or not _transient(outcome):
                    self._ready[i] = outcome
            else:
                self._ready[i] = outcome
                self._bytes += len(outcome)
                self._count += 1

    def take(self, index: int) -> bytes | BaseException | None:
        """The sample's bytes or exception; None: not fetched (read it alone)."""
        i = int(index)
        data = self._ready.get(i)
        if data is not None:
            left = self._uses.get(i, 1) - 1
            if left > 0:
                self._uses[i] = left
            else:
                del self._ready[i]
                self._uses.pop(i, None)
        return data


def _transient(outcome: Any) -> bool:
    """A failure worth another try (not a missing object)."""
    return isinstance(outcome, BaseException) and not isinstance(outcome, FileNotFoundError)


class Spans:
    """The bytes this process's ranged requests read, by object, up to ``SPAN_CACHE`` bytes,
    the least recently used span dropped first. Spans of one object that overlap are merged,
    so they stay disjoint and a range is looked up in one step."""

    def __init__(self) -> None:
        self._data: OrderedDict[tuple[str, int], bytes] = OrderedDict()  # (url, start) -> bytes
        self._starts: dict[str, list[int]] = {}  # url -> the starts of its spans, sorted
        self._size = 0
        self._lock = threading.Lock()

    def find(self, url: str, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset`` of ``url`` if the span kept there holds them."""
        with self._lock:
            starts = self._starts.get(url, [])
            at = bisect.bisect_right(starts, offset)
            if not at:
                return None
            start = starts[at - 1]
            data = self._data[(url, start)]
            if offset + size > start + len(data):
                return None
            self._data.move_to_end((url, start))
            return data[offset - start: offset - start + size]

    def keep(self, url: str, start: int, data: bytes) -> None:
        """Keep ``data``, read at ``start`` of ``url``, merged with the spans it overlaps
        (spans that only touch stay apart: a record never straddles two requests' bytes)."""
        stop = start + len(data)
        if len(data) > SPAN_CACHE or not data:
            return
        with self._lock:
            starts = self._starts.setdefault(url, [])
            last = first = bisect.bisect_left(starts, stop)  # spans that start before its end
            while first and starts[first - 1] + len(self._data[(url, starts[first - 1])]) \
                    > start:  # ...and end after its start (disjoint: contiguous)
                first -= 1
            overlapped = [(s0, self._data.pop((url, s0))) for s0 in starts[first:last]]
            for _, old in overlapped:
                self._size -= len(old)
            low = min([start] + [s0 for s0, _ in overlapped])
            high = max([stop] + [s0 + len(old) for s0, old in overlapped])
            if overlapped and high - low <= SPAN_CACHE:  # one copy, only where they overlap
                merged = bytearray(high - low)
                for s0, piece in overlapped + [(start, data)]:
                    merged[s0 - low: s0 - low + len(piece)] = piece
                start, data = low, bytes(merged)
            starts[first:last] = [start]  # (merged too large: the new piece replaces them)
            self._data[(url, start)] = data
            self._size += len(data)
            while self._size > SPAN_CACHE:
                (gone_url, gone), dropped = self._data.popitem(last=False)
                self._size -= len(dropped)
                kept = self._starts[gone_url]
                del kept[bisect.bisect_left(kept, gone)]
                if not kept:
                    del self._starts[gone_url]


class RoundTrip:
    """What one more request costs this process, learnt from its requests: the seconds beyond
    the transfer itself (time to first byte, the client's and the server's work per request),
    a moving average. Reading ``g`` bytes through costs ``g / BANDWIDTH``, so a gap is cheaper
    read than split while ``g < overhead * BANDWIDTH``. Which bytes are fetched changes; what
    is delivered does not."""

    def __init__(self) -> None:
        self.overhead_s: float | None = None
        self._lock = threading.Lock()

    def observe(self, seconds: float, size: int) -> None:
        sample = max(0.0, seconds - size / BANDWIDTH)
        with self._lock:
            last = self.overhead_s
            self.overhead_s = sample if last is None else 0.8 * last + 0.2 * sample

    def gap(self) -> int:
        if self.overhead_s is None:
            return GAP
        return int(min(MAX_GAP, max(GAP, self.overhead_s * BANDWIDTH)))

    def span(self) -> int:
        """The most one coalesced request spans: 9 gaps (90% of its time transferring)."""
        return min(MAX_SPAN, max(MIN_SPAN, 9 * self.gap()))


def coalesce(ranges: Sequence[tuple[int, int]], gap: int = GAP, span: int | None = None
             ) -> list[tuple[int, int, list[int]]]:
    """``(start, stop, [positions in ranges])`` per request: ranges sorted by offset and merged
    when at most ``gap`` bytes apart (reading the gap costs less than another round trip) and
    the request then spans at most ``span`` bytes (None: any)."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    out: list[tuple[int, int, list[int]]] = []
    for i in order:
        offset, size = int(ranges[i][0]), int(ranges[i][1])
        if out and offset - out[-1][1] <= gap and (
                span is None or max(out[-1][1], offset + size) - out[-1][0] <= span):
            start, stop, members = out[-1]
            out[-1] = (start, max(stop, offset + size), members + [i])
        else:
            out.append((offset, offset + size, [i]))
    return out


def _import_fsspec(protocol: str) -> Any:
    package, extra = _BACKENDS.get(protocol, ("fsspec", "remote"))
    try:
        import fsspec

        if package != "fsspec":
            __import__(package)
    except ImportError:
        raise ArgumentError(
            f"Reading {protocol}:// URLs needs fsspec and {package}, which are not installed. "
            f"Fix: pip install \"shmaug[{extra}]\"."
        ) from None
    return fsspec


def _one_get(fs: Any, protocol: str, options: dict[str, Any]) -> dict[str, int]:
    """One GET for a whole object: s3fs otherwise sends a HEAD first, for the size, to split
    large objects into parallel ranges, which doubles what a small image costs the client and
    the server (``python -m bench.remote_cost``). S3 only, where s3fs takes the option (2024.x
    on), and not where the user set ``max_concurrency`` in ``storage_options`` (large
    objects, their choice). Decided once per process, when its filesystem is built."""
    if protocol not in ("s3", "s3a") or "max_concurrency" in options:
        return {}
    import inspect

    cat = getattr(fs, "_cat_file", None)
    try:
        takes = cat is not None and "max_concurrency" in inspect.signature(cat).parameters
    except (TypeError, ValueError):
        takes = False
    return {"max_concurrency": 1} if takes else {}


def _limit(fs: Any) -> dict[str, float]:
    """fsspec's own bound on a call of an async filesystem (s3fs, gcsfs, http): its ``sync``
    gives up after ``timeout`` seconds with ``FSTimeoutError`` (then retried, bounded)."""
    timeout = float(os.environ.get("SHMAUG_REQUEST_TIMEOUT_S", REQUEST_TIMEOUT_S))
    return {"timeout": timeout} if getattr(fs, "async_impl", False) else {}


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, a refused connection: the socket's
    ``ConnectionRefusedError`` under aiohttp's ``ClientConnectorError`` (``os_error``) under
    botocore's ``EndpointConnectionError`` (``kwargs["error"]``), or chained."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError) or (
                isinstance(e, OSError) and e.errno == errno.ECONNREFUSED):
            return True
        kwargs = getattr(e, "kwargs", None)
        todo += [e.__cause__, e.__context__, getattr(e, "os_error", None),
                 kwargs.get("error") if isinstance(kwargs, dict) else None]
    return False


# The packages whose exceptions are the backend's (``from_backend``).
_BACKEND_PACKAGES = {"botocore", "aiobotocore", "aiohttp", "fsspec", "s3fs", "gcsfs", "google"}


def from_backend(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the storage backend's exceptions (botocore's are not
    ``OSError``), as opposed to one of the caller's own code."""
    return any(c.__module__.partition(".")[0] in _BACKEND_PACKAGES for c in type(exc).__mro__)


def _refusals_not_retried(fs: Any) -> None:
    """Make s3fs's client give up on a refused connection at its first attempt: botocore
    counts it as transient and retries it (5 attempts, up to 15 s of backoff; 41.5 s inside
    shmaug's 4 attempts, issue 36). Its other retries are kept. The hook is a handler of
    botocore's ``needs-retry`` event on the session s3fs would build itself (from the same
    ``fs.kwargs``); a session given in ``storage_options`` is the user's and is left alone."""
    if getattr(fs, "session", None) is not None or not isinstance(getattr(fs, "kwargs", None),
                                                                   dict):
        return
    try:
        from aiobotocore.session import AioSession
    except ImportError:
        return
    session = AioSession(**fs.kwargs)
    session.register("needs-retry.s3", _raise_refused)
    fs.session = session


def _raise_refused(caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore's ``needs-retry`` handler: a refused connection ends the request (raised as
    caught), before botocore's retry handler can schedule another attempt."""
    if caught_exception is not None and refused(caught_exception):
        raise caught_exception


def _outcome(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except Exception as exc:
        return exc


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown"
    text = str(exc).strip() or "no message"
    return f"{type(exc).__name__}: {text}"[:300]
