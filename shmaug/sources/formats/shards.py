"""Finding a source's shards, its optional libraries, and reusing index scans across runs.

``find`` turns a glob pattern, WebDataset's braces (``train-{000..127}.tar``) or a list into
existing shards, local paths or URLs (``s3://``, ``gs://``, ``https://``: their ``Remote``,
sizes and etags found together, ``remote/_client.py``); ``opened`` gives a shard as a file
object for its one indexing scan (a URL is streamed); ``need`` says which extra to install when
a constructor's library is missing; ``cached`` reuses the scan of a shard that has not changed
since it was scanned (local: same path, size, modification time and inode; a URL: same URL, size
and etag or modification time), kept as one small ``.npz`` per shard in ``index_cache`` (opt-in:
nothing is written unless a folder is given; it holds offsets, lengths and labels, never an
option or a secret). This module reads no record; ``records.py`` builds the source.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import itertools
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterator

import numpy as np

from ..images import settings as O
from .. import remote as R
from ..remote.bucket import remote_for, check_same_protocol
from ... import platform
from ...errors import ArgumentError, ArgumentTypeError, RemoteError, ShmaugError, got, warn

log = logging.getLogger(__name__)
Scan = Callable[[str], tuple[list[int], list[int], list[Any]]]


_BRACES = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")


@dataclass(frozen=True)
class Shards:
    """A source's shards: local paths, or URLs with the ``Remote`` that reads them and each
    one's identity (size and etag or modification time: what the index cache keys on)."""

    paths: list[str]
    remote: R.Remote | None = None
    idents: dict[str, str] = field(default_factory=dict)

    def ident(self, path: str) -> str:
        if self.remote is not None:
            return f"{path}|{self.idents[path]}"
        st = os.stat(path)
        return f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"

    @contextlib.contextmanager
    def opened(self, path: str) -> Iterator[tuple[BinaryIO, int]]:
        """``(file object, size)`` of one shard, for its indexing scan: a URL is streamed
        (large blocks read ahead, so a scan that seeks over images still reads sequentially).

        Raises:
            RemoteError: the bucket failed while the shard was read (named, secrets masked).
        """
        kept = self._cached(path)
        if self.remote is None or kept is not None:  # a local shard, or a cached one
            with open(kept or path, "rb") as f:
                yield f, os.fstat(f.fileno()).st_size
            return
        if self.remote.offline:
            raise self.remote.offline_failure(path, "index")
        size = int(self.idents[path].split("|", 1)[0])
        try:
            with self.remote.fs().open(path, "rb", block_size=_SCAN_BLOCK,
                                       cache_type="readahead") as f:
                yield f, size
        except Exception as exc:
            # The format's own errors pass; the stream's follow the fetch rules
            # (``Remote.failure``), without the backend's traceback. botocore's are not OSError.
            if isinstance(exc, ShmaugError) or not (
                    isinstance(exc, (OSError, RuntimeError, ValueError)) or R.from_backend(exc)):
                raise
            raise self.remote.failure(path, exc, "index") from None


    def _cached(self, path: str) -> str | None:
        """The disk cache's complete copy of shard ``path`` (None: local, or not cached)."""
        cache = self.remote.cache if self.remote is not None else None
        return cache.local(path) if cache is not None else None

    def head(self, path: str, size: int) -> bytes:
        """The first ``size`` bytes of a shard (one small request for a URL, unless the disk
        cache holds it)."""
        kept = self._cached(path)
        if self.remote is None or kept is not None:
            with open(kept or path, "rb") as f:
                return f.read(size)
        return self.remote.read_ranges(path, [(0, size)])[0]

    def whole(self, path: str) -> bytes:
        """A shard's bytes (a GZIP TFRecord, read whole once): from the disk cache where it
        holds them, else from the bucket and then kept there (a later build, offline too,
        reads them from the disk)."""
        kept = self._cached(path)
        if self.remote is None or kept is not None:
            with open(kept or path, "rb") as f:
                return f.read()
        data = self.remote.fetch(path)
        if self.remote.cache is not None:  # now: a later build may lack the bucket
            self.remote.cache.keep(path, data, background=False)
        return data


_SCAN_BLOCK = 8 << 20  # bytes per request while a remote shard is scanned


def braces(pattern: str) -> list[str]:
    """WebDataset's brace expansion: ``a-{000..002}.tar`` -> ``a-000.tar``, ``a-001.tar``,
    ``a-002.tar`` (zero padding kept); ``{x,y}`` alternatives; several braces multiply."""
    parts: list[list[str]] = []
    last = 0
    for match in _BRACES.finditer(pattern):
        parts.append([pattern[last:match.start()]])
        inner = match.group(1)
        numbers = _RANGE.match(inner)
        if numbers:
            lo, hi = numbers.groups()
            width = len(lo) if lo.lstrip("-").startswith("0") else 0
            step = 1 if int(hi) >= int(lo) else -1
            parts.append([str(k).zfill(width) for k in range(int(lo), int(hi) + step, step)])
        elif "," in inner:
            parts.append(inner.split(","))
        else:
            parts.append([match.group(0)])
        last = match.end()
    parts.append([pattern[last:]])
    return ["".join(p) for p in itertools.product(*parts)]


def find(name: str, given: Any, what: str, storage_options: Any, cache_dir: Any = None,
         cache_limit: Any = None, index_cache: str | None = None) -> Shards:
    """The shards ``given`` names (see the module docstring), each checked to exist; URLs
    with the disk cache ``cache_dir`` and ``cache_limit`` ask for, told each shard's identity.
    With ``index_cache``, the URLs and identities found are kept there (``remote.write_record``)
    for a build without the bucket: offline (``SHMAUG_OFFLINE``), or when the bucket cannot be
    reached (``remote.without_bucket``: then every shard must be in the disk cache).

    Raises:
        ArgumentError: none matches, one does not exist, local and URLs mixed,
            ``storage_options`` or ``cache_dir`` for local paths, a ``cache_dir`` that
            cannot be written.
        RemoteError: the bucket cannot be reached (or ``SHMAUG_OFFLINE``), and no record of
            the shards is kept, or the disk cache lacks some (named).
    """
    listed = _listed(name, given, what)
    remote = remote_for(listed[0] if listed else "", storage_options, cache_dir, cache_limit)
    if remote is None:
        return Shards(_existing(name, given, what, listed, glob.glob, os.path.isfile))
    check_same_protocol(listed, remote.protocol)
    record = (None if index_cache is None else
              R.record_of(index_cache, "shards", "\n".join(listed), remote))
    if remote.offline:
        known = R.without_bucket(remote, record, name, None)
    else:
        try:
            known = _in_bucket(name, given, what, listed, remote)
        except RemoteError as exc:
            known = R.without_bucket(remote, record, name, exc)
        else:
            if record is not None:
                R.write_record(record, known.items())
    if remote.cache is not None:
        remote.cache.know(known)
        _check_bound(remote.cache, known)
    return Shards(list(known), remote, known)


def _in_bucket(name: str, given: Any, what: str, listed: list[str], remote: R.Remote
               ) -> dict[str, str]:
    """The shards that ``listed`` (patterns, or URLs) name in the bucket, and their identities.

    Raises:
        ArgumentError: none matches, or one does not exist.
        RemoteError: the bucket failed (retried, or refused at once).
    """
    def matches(pattern: str) -> list[str]:
        try:
            return remote.glob(pattern)
        except FileNotFoundError as exc:  # no such bucket
            raise ArgumentError(
                f"`{name}` must name existing {what}; received {got(given)}, where the "
                f"bucket's listing found nothing ({exc}). Fix: check the bucket's name and "
                f"the endpoint (storage_options={remote.options_text})."
            ) from None

    paths = _existing(name, given, what, listed, matches, lambda p: True)
    idents = remote.identities(paths)
    _check_found(name, given, what, paths,
                 [p for p, i in zip(paths, idents)
                  if isinstance(i, (FileNotFoundError, IsADirectoryError))],
                 [p for p, i in zip(paths, idents) if isinstance(i, IsADirectoryError)])
    for i in idents:
        if isinstance(i, BaseException):
            raise i
    return dict(zip(paths, idents))  # type: ignore[arg-type]


def _check_bound(cache: Any, idents: dict[str, str]) -> None:
    """Warn where the disk cache's bound cannot hold the shards (read by range instead)."""
    sizes = [int(i.split("|", 1)[0]) for i in idents.values()]
    if cache.limit is None or sum(sizes) <= cache.limit:
        return
    what = ("no shard fits: every record is read by range" if min(sizes) > cache.limit else
            "the shards that do not fit are read by range, and a loader evicts the one it "
            "will read again last (under an exact shuffle nearly every shard is read again "
            "in each epoch, so most are downloaded again; shuffle=\"blocks\" needs "
            "`shuffle_window` shards at a time)")
    warn(f"The disk cache in cache_dir={cache.folder!r} holds {cache.limit:,} bytes "
         f"(cache_limit), less than the {sum(sizes):,} bytes of the {len(sizes)} shards: "
         f"{what}. Fix: raise cache_limit to at least {sum(sizes):,}, free disk space, or read "
         f"with shuffle=\"blocks\" and a bound of `shuffle_window` shards.")


def cached(scan: Scan, index_cache: str | None, what: str, shards: Shards | None = None
           ) -> Scan:
    """``scan``, reusing its result for an unchanged shard from ``index_cache`` (None: no
    cache). ``what`` names the scan's settings (format and keys): another one never matches."""
    if index_cache is None:
        return scan
    folder = os.fspath(index_cache)
    ident_of = (shards or Shards([])).ident

    def run(path: str) -> tuple[list[int], list[int], list[Any]]:
        ident = f"{ident_of(path)}|{what}"
        file = os.path.join(folder, hashlib.sha1(ident.encode()).hexdigest() + ".npz")
        try:
            if platform.ours(file):  # (else forged offsets and labels, or none yet)
                with np.load(file, allow_pickle=False) as saved:
                    return (saved["offsets"].tolist(), saved["lengths"].tolist(),
                            saved["labels"].tolist())
        except (OSError, KeyError, ValueError):
            pass  # not scanned yet (or unreadable): scan it
        found = scan(path)
        try:
            os.makedirs(folder, exist_ok=True)
            fd, partial = tempfile.mkstemp(suffix=".npz", dir=folder)
            with os.fdopen(fd, "wb") as f:
                np.savez(f, offsets=np.array(found[0], np.int64),
                         lengths=np.array(found[1], np.int64), labels=np.array(found[2]))
            os.replace(partial, file)  # whole or not at all
        except OSError as exc:
            log.debug("index cache %s not written: %s", folder, exc)
        return found

    return run


def local_only(name: str, given: Any, what: str, why: str, fix: str) -> None:
    """Refuse URLs where a format can only be read from local files, saying why and how.

    Raises:
        ArgumentError: ``given`` (a path, pattern or list) names a URL.
    """
    listed = ([given] if isinstance(given, (str, os.PathLike)) else
              list(given) if isinstance(given, (list, tuple)) else [])
    url = next((p for p in listed if R.is_url(p)), None)
    if url is not None:
        raise ArgumentError(
            f"`{name}` must name {what} on local disk; received the URL {url!r}: {why}. Fix: "
            f"copy them to local disk (e.g. `fsspec.filesystem('s3').get(URL, folder, "
            f"recursive=True)`) and pass the local paths, or {fix}."
        )


def need(module: str, extra: str) -> None:
    """A one-line error naming the extra when ``module`` is not installed."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(
            f'This ImageRecords constructor needs the `{module}` package. Fix: pip install '
            f'"shmaug[{extra}]".', name=module)


def check_keywords(settings: dict[str, Any], more: set[str] = set()) -> None:
    unknown = sorted(set(settings) - set(O.SETTINGS_DEFAULTS) - more)
    if unknown:
        raise ArgumentTypeError(
            f"ImageRecords got unexpected keyword argument(s) {unknown}. Fix: use the "
            f"settings {sorted(O.SETTINGS_DEFAULTS)}, or the constructor's own arguments."
        )


def expand(name: str, given: Any, what: str) -> list[str]:
    """Local shards: a glob pattern's sorted matches (braces expanded first), or a list of
    paths (each must exist)."""
    return _existing(name, given, what, _listed(name, given, what), glob.glob, os.path.isfile)


def _listed(name: str, given: Any, what: str) -> list[str]:
    """A pattern's brace expansions (one pattern or path each), or the list given."""
    if isinstance(given, (str, os.PathLike)):
        pattern = os.fspath(given)
        return [pattern] if os.path.exists(pattern) else braces(pattern)
    try:
        return [os.fspath(p) for p in given]
    except TypeError:
        raise ArgumentTypeError(
            f"`{name}` must be a list of {what} or a glob pattern; received {got(given)}. "
            f"Fix: e.g. `{name}='data/train-*'`."
        ) from None


def _existing(name: str, given: Any, what: str, listed: list[str],
              matches: Callable[[str], list[str]], exists: Callable[[str], bool]) -> list[str]:
    pattern = isinstance(given, (str, os.PathLike))  # a list's paths are taken as written
    paths = [p for one in listed
             for p in (sorted(matches(one)) if pattern and glob.has_magic(one) else [one])]
    missing = [p for p in paths if not exists(p)]
    _check_found(name, given, what, paths, missing, [p for p in missing if os.path.isdir(p)])
    return paths


def _check_found(name: str, given: Any, what: str, paths: list[str], missing: list[str],
                 folders: list[str]) -> None:
    """Raises ``ArgumentError`` when nothing matched or some paths are not files: the missing
    ones named (a few, then how many more), and a folder as a folder, with the pattern of the
    files in it."""
    if paths and not missing:
        return
    absent = [p for p in missing if p not in folders]
    if not paths:
        seen = "of which none matched"
    elif folders and paths == folders and isinstance(given, (str, os.PathLike)):
        seen = "which is a folder" if len(folders) == 1 else f"which are folders: {R.few(folders)}"
    else:
        seen = "of which " + "; ".join(
            ([f"{len(absent)} do not exist: {R.few(absent)}"] if absent else [])
            + ([f"{len(folders)} {'is a folder' if len(folders) == 1 else 'are folders'}: "
                f"{R.few(folders)}"] if folders else []))
    fix = (f"name the files in a folder with a pattern, e.g. `{name}="
           f"{folders[0].rstrip('/') + '/*'!r}`" if folders else
           "check the paths or the glob pattern")
    raise ArgumentError(
        f"`{name}` must name existing {what}; received {got(given)}, {seen}. Fix: {fix}."
    )

