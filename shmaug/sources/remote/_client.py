"""The client of object storage (s3://, gs://, https://...): fsspec's filesystem for a
protocol, one per process, and every request made through it (a read's GETs through obstore
where it can send them: ``_transport``), retried by the error rules.

A request to a bucket costs 10-100 ms before its first byte, so one read after another caps a
worker at a few dozen images/s. ``Remote`` hides that latency and keeps credentials out of
sight; it knows nothing of images:

- a URL is read by fsspec's filesystem for its protocol, imported only then (a missing package
  is a one-line error naming the extra). ``Remote`` holds the protocol and the user's
  ``storage_options`` and builds one filesystem per process (a forked worker never uses its
  parent's event loop or connections). It pickles once into a worker's spec, never into a
  task; its ``repr`` and every message it builds mask secret values (``_secrets``).
- ``fetch_all(urls)``: every object at once on a bounded thread pool (``MAX_IN_FLIGHT``
  requests per process), each with ``fetch``'s retries.
- ``fetch(url)`` / ``read_ranges(url, ranges)`` / ``read_many``: one object, or byte ranges of
  one object (or of several, all in flight together) with neighbouring ranges coalesced into
  one request (``_round_trip``; record shards: ``formats.table.RecordTable.prefetch``); what ranged
  requests read is kept, bounded (``_spans.Spans``), and serves later ranges inside it.
- every call (``_retried``) follows the error rules of ``_failures``: transient failures
  (timeouts, 5xx, throttling, a dropped connection) are retried ``RETRIES`` times with
  exponential backoff, then ``RemoteError`` names the object and the last failure; a missing
  object, a refused credential or a refused connection ends it at once. They hold for every
  call the main process makes too: listing, globbing, sizes and etags, and
  (``formats.shards.Shards.opened``, through ``failure``) the index scan. While
  ``SHMAUG_OFFLINE`` is set (``offline``) none is made: each fails at once, naming what it
  wanted (``_failures.offline``).
- ``listing`` / ``glob`` / ``check_exist`` / ``identities``: list a bucket folder once (one
  paginated listing, not one per class) in Keras' folder order (``_urls.Listing``), or a glob
  pattern's matches; check that objects exist, or read their size and etag (what an index
  cache keys on), concurrently.

What it leaves to others: which samples a worker fetches ahead (``ahead``), image files over
a bucket (``bucket.RemoteTable``), and the environment's settings (``_settings``).
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import logging
import math
import os
import random
import sys
import threading
import time
from typing import Any, Callable, Sequence, TypeVar

from . import _failures as rules
from ._settings import settings
from ..cache.disk_cache import DiskCache
from ._round_trip import RoundTrip, coalesce
from ._secrets import MASK, masked, scrubbed_urls, secrets_of
from ._spans import Spans
from ._transport import ObstoreGets, RangeIgnored, Unfit, obstore_gets
from ._urls import Listing, is_url
from ...errors import ArgumentError, ArgumentTypeError, RemoteError, got

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_IN_FLIGHT = 16  # requests in flight per process: enough to hide 50 ms at ~300 objects/s
RETRIES = 3  # transient failures retried per request, then RemoteError
BACKOFF_S = 0.2  # first retry's wait; doubled each time (with jitter)
WAIT_S = 300.0  # the longest a task waits for its objects
# The retries' jitter: never the global ``random``, which a user's op may draw from, seeded per
# sample (``seeding``), while a retry runs on another thread of the worker (``ahead``).
_JITTER = random.Random()
# Which package each protocol needs, and the extra that installs it.
_BACKENDS = {"s3": ("s3fs", "remote"), "s3a": ("s3fs", "remote"), "gs": ("gcsfs", "gcs"),
             "gcs": ("gcsfs", "gcs"), "http": ("aiohttp", "remote"),
             "https": ("aiohttp", "remote")}


class Remote:
    """One protocol's filesystem with the user's options: built lazily, once per process."""

    __slots__ = ("protocol", "cache", "_options", "_secrets", "_fs", "_pool", "_pid", "_lock",
                 "_trip", "_one_get", "_spans", "_gets")

    def __init__(self, protocol: str, storage_options: dict[str, Any] | None,
                 cache: DiskCache | None = None) -> None:
        if storage_options is not None and not isinstance(storage_options, dict):
            raise ArgumentTypeError(
                f"`storage_options` must be a dict of fsspec options; received "
                f"{got(masked(storage_options))}. Fix: e.g. `storage_options="
                f"{{'client_kwargs': {{'endpoint_url': 'http://...'}}}}`, or None."
            )
        self.protocol = protocol
        self.cache = cache  # the disk cache of whole objects (``cache.disk_cache``), or None
        self._options = dict(storage_options or {})
        self._secrets = secrets_of(self._options)
        self._fs: Any = None
        self._pool: cf.ThreadPoolExecutor | None = None
        self._pid = -1
        self._lock = threading.Lock()
        self._trip = RoundTrip()
        self._one_get: dict[str, int] = {}
        self._spans = Spans()
        self._gets: ObstoreGets | None = None
        _import_fsspec(protocol)  # fail here, in the main process, with the extra to install

    def __repr__(self) -> str:
        return f"Remote({self.protocol!r}, storage_options={masked(self._options)!r})"

    def __getstate__(self) -> tuple[str, dict[str, Any], DiskCache | None]:
        # Sent once, in a worker's spec (its load), never per task; the worker then gives the
        # options to the backend as fsspec expects (``fsspec.filesystem(protocol, **options)``).
        return self.protocol, self._options, self.cache

    def __setstate__(self, state: tuple[str, dict[str, Any], DiskCache | None]) -> None:
        self.protocol, self._options, self.cache = state
        self._secrets = secrets_of(self._options)
        self._fs = self._pool = None
        self._pid = -1
        self._lock = threading.Lock()
        self._trip = RoundTrip()
        self._one_get = {}
        self._spans = Spans()
        self._gets = None

    @property
    def offline(self) -> bool:
        """Whether ``SHMAUG_OFFLINE`` keeps this process off the network (``_settings``):
        every call fails at once (``_failures.offline``); the caches serve what they hold."""
        return settings().offline

    def offline_failure(self, url: str, doing: str = "read") -> RemoteError:
        """The error of a call to ``url`` that ``offline`` forbids."""
        return rules.offline(self, url, doing)

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
        return scrubbed_urls(text)

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
                        rules.refusals_not_retried(self._fs)
                    self._one_get = _one_get(self._fs, self.protocol, self._options)
                    self._gets = obstore_gets(self.protocol, self._options)
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
        return self._retried(url, lambda fs: self._get(fs, url))

    def read_range(self, url: str, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of object ``url``, one request (retried), not kept in the
        spans: a disk cache's download (``cache.disk_cache``)."""
        # Not learnt from: a download's large requests would teach ``RoundTrip`` a cost that
        # is the transfer's, not a request's.
        return self._retried(url, lambda fs: self._get(fs, url, start, stop), learn=False)

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
        whole source fits the span cache (else 0: a whole read would be dropped unused)."""
        return self._trip.span() if total <= settings().span_cache else 0

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
        pieces = iter(self.map_all(requests, lambda item: self._retried(
            item[0], lambda fs: self._get(fs, *item))))
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
        limit = max(WAIT_S, settings().request_timeout_s * (RETRIES + 2)) * waves
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

    @property
    def transport(self) -> str:
        """Who sends this process's GETs: ``"obstore"`` or ``"fsspec"`` (``_transport``)."""
        self.fs()
        return "fsspec" if self._gets is None else "obstore"

    def _get(self, fs: Any, url: str, start: int | None = None, stop: int | None = None
             ) -> bytes:
        """One GET of object ``url`` (its bytes ``start:stop`` where given), through obstore
        where it can send it (``_transport``), else through ``fs``."""
        if self._gets is not None and self._gets.fits(url):
            try:
                return self._gets.get(url, start, stop)
            except Unfit:
                pass  # a key or a server obstore cannot read as fsspec does: fsspec reads it
        if start is None:
            return bytes(fs.cat_file(url, **self._one_get, **_limit(fs)))
        # start= / end= by name: s3fs' third positional parameter is version_id.
        out = bytes(fs.cat_file(url, start=start, end=stop, **_limit(fs)))
        if stop is not None and len(out) > stop - start:  # shorter: the object ends first
            raise RangeIgnored(url)
        return out

    def _retried(self, url: str, call: Callable[[Any], T], doing: str = "read",
                 learn: bool = True) -> T:
        """``call(fs)``, retried while its failures are transient (``_failures.final`` says which
        are not). A call's bytes teach ``RoundTrip`` what a request costs (where ``learn``).
        None is made while ``offline``."""
        if self.offline:
            raise self.offline_failure(url, doing)
        last: BaseException | None = None
        for attempt in range(RETRIES + 1):
            if attempt:
                wait = BACKOFF_S * 2 ** (attempt - 1) * (0.5 + _JITTER.random())
                log.debug("retrying %s in %.2f s after: %s", self.scrub(url), wait,
                          self.scrub(rules.describe(last)))
                time.sleep(wait)
            try:
                fs = self.fs()  # built before the clock starts: a request's cost, not a client's
                began = time.perf_counter()
                out = call(fs)
                if learn and isinstance(out, bytes):
                    self._trip.observe(time.perf_counter() - began, len(out))
                return out
            except Exception as exc:
                final = rules.final(self, url, exc, doing)
                if final is not None:
                    raise final from None
                last = exc  # transient until proven otherwise: retried, bounded
        raise self.failure(url, last, doing, RETRIES + 1)

    def failure(self, url: str, exc: BaseException | None, doing: str = "read",
                attempts: int = 1) -> BaseException:
        """The error the rules make of ``exc``, raised while ``doing`` ``url``
        (``_failures.failure``). For a call that is not retried (the index scan's stream)."""
        return rules.failure(self, url, exc, doing, attempts)

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
            found = self._retried(
                root, lambda fs: dict(fs.find(root, detail=True, **_limit(fs))), "list")
        except FileNotFoundError:
            found = {}
        if not found:
            bucket = root.split("://", 1)[-1].split("/", 1)[0]
            if self.protocol in ("s3", "s3a", "gs", "gcs") and not self._bucket_exists(bucket):
                raise ArgumentError(
                    f"`directory` {root!r} is in the bucket {bucket!r}, which does not exist "
                    f"on this endpoint. Fix: check the bucket's name (and `storage_options`'s "
                    f"endpoint and credentials)."
                )
            raise ArgumentError(
                f"`directory` must be an existing folder; {root!r} holds no object. Fix: pass "
                f"the folder (prefix) that holds one sub-folder of images per class."
            )
        urls = [self.url(p) for p in found]
        return Listing(root, urls, {u: _ident(info) for u, info in zip(urls, found.values())
                                    if info.get("size") is not None})  # (http may not say)

    def _bucket_exists(self, bucket: str) -> bool:
        """Whether ``bucket`` is there (True where the backend cannot say)."""
        try:
            return bool(self._retried(bucket, lambda fs: fs.exists(bucket), "list"))
        except Exception:  # (an existing bucket's listing was empty: not this message's case)
            return True

    def glob(self, pattern: str) -> list[str]:
        """The URLs of the objects matching ``pattern``, as the bucket lists them.

        Raises:
            FileNotFoundError: no such bucket (the backend's reason in the message).
            RemoteError: as ``fetch`` (retried, or refused at once).
        """
        return [self.url(p) for p in self._retried(
            pattern, lambda fs: list(fs.glob(pattern, **_limit(fs))), "list")]

    def identities(self, urls: Sequence[str]) -> list[str | BaseException]:
        """Per object, ``"size|etag"`` (its modification time where the backend gives no
        etag): what an index cache keys on; or the exception (``FileNotFoundError``: none,
        ``IsADirectoryError``: a folder)."""
        def ident(fs: Any, url: str) -> bytes:
            # obstore only where it serves this process already: importing it here first
            # would send every worker forked later through fsspec (``_transport``).
            if self._gets is not None and "obstore" in sys.modules and self._gets.fits(url):
                try:
                    return self._gets.identity(url).encode()
                except Unfit:
                    pass  # a folder, a missing object, no etag: fsspec answers
            info = fs.info(url, **_limit(fs))
            if info.get("type", "file") != "file":
                return b""  # a folder (a prefix), not an object
            return _ident(info).encode()

        outcomes = self.map_all(list(urls), lambda u: self._retried(u, lambda fs: ident(fs, u)))
        return [o if isinstance(o, BaseException) else o.decode() if o else
                IsADirectoryError(f"{u!r} is a folder, not an object")
                for u, o in zip(urls, outcomes)]

    def check_exist(self, urls: Sequence[str]) -> dict[str, str]:
        """Each object's identity (as ``identities``); raises ``ArgumentError`` naming the
        missing objects (checked concurrently)."""
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
        return {u: str(o) for u, o in zip(urls, outcomes)}


def _ident(info: dict[str, Any]) -> str:
    """An object's identity from its listing entry: ``"size|etag"`` (its modification time
    where the backend gives no etag)."""
    tag = next((str(info[k]) for k in ("ETag", "etag", "md5Hash", "LastModified", "mtime",
                                       "updated") if info.get(k)), "")
    return f"{int(info['size'])}|{tag}"


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
    known = fsspec.available_protocols()
    if protocol not in known:  # refused here, not retried as if a server were down
        usual = [p for p in ("s3", "gs", "az", "abfs", "https", "http", "hf", "file")
                 if p in known]
        raise ArgumentError(
            f"No filesystem reads {protocol}:// URLs: fsspec knows {len(known)} schemes, "
            f"{', '.join(p + '://' for p in usual)} among them, and not {protocol!r}. Fix: "
            f"check the URL's scheme (s3:// for S3 and its compatible servers).")
    return fsspec


def _one_get(fs: Any, protocol: str, options: dict[str, Any]) -> dict[str, int]:
    """One GET for a whole object: s3fs otherwise sends a HEAD first, for the size, to split
    large objects into parallel ranges, which doubles what a small image costs the client and
    the server (``python -m bench.remote.cost``). S3 only, where s3fs takes the option (2024.x
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
    gives up after ``timeout`` seconds with ``FSTimeoutError`` (then retried, bounded). Every
    request takes it, the listings and the sizes too: an endpoint that takes connections and
    never answers held the main process for minutes."""
    timeout = settings().request_timeout_s
    return {"timeout": timeout} if getattr(fs, "async_impl", False) else {}


def _outcome(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except Exception as exc:
        return exc

