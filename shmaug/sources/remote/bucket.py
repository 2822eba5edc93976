"""Image files in a bucket as a reader's table: a task's objects fetched together.

``RemoteTable`` is a ``PathTable`` of URLs (``images/paths.py``) whose bytes come through
``remote.Remote``. It has ``prefetch(indices, ahead)``, which ``Reader.prefetch`` hands the
engine: a worker calls it with a task's samples, and those of the tasks queued behind it, before
making them one by one (the slice loop, ``engine/workers/runner.py``), so a worker has the
objects of the tasks behind it in flight while it decodes (``ahead.Fetched``), then ``fetch``
hands each out once.
``remote_for`` decides whether a source's paths are URLs at all; ``listed`` lists a bucket
folder, or reuses the listing a ``listing_cache`` folder kept. ``files.py`` owns the source.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ..cache.disk_cache import DiskCache
from ..images.settings import Text
from . import Fetched, Listing, Remote, protocol_of
from . import _kept
from ._secrets import shown_url
from ...errors import ArgumentError, RemoteError

if TYPE_CHECKING:
    from ..images.paths import PathTable
    from ...memory.store import SharedStore


class RemoteTable:
    """A ``PathTable`` of URLs as a reader's table: bytes come from the bucket, a task's at
    together (``prefetch``). Everything but ``fetch`` is the path table's.

    ``idents``: each object's identity (``"size|etag"``) when the source was built, as a
    second table of strings (shared as the paths are: 20-40 bytes a file). The disk cache
    names an object's copy by it, so an object changed in the bucket since is read again, not
    taken from the cache; without it (paths given, never checked) a cached copy is used as
    it is."""

    __slots__ = ("paths", "remote", "idents", "_fetched")

    def __init__(self, paths: PathTable, remote: Remote, idents: PathTable | None = None
                 ) -> None:
        self.paths = paths  # a PathTable, in this process or shared
        self.remote = remote
        self.idents = idents  # a PathTable of "size|etag" per object, or None: not known
        self._fetched = Fetched()  # this task's objects and those of the tasks behind it

    def _ident(self, index: int) -> str:
        return "" if self.idents is None else self.idents[index]

    NOUN = "file"
    SOURCE = "ImageFiles"

    def prefetch(self, indices: Iterable[int], ahead: Iterable[int] = ()) -> None:
        """Have the objects of ``indices`` (a task's) here, and those of ``ahead`` (the tasks
        behind it) here or on their way (``Fetched.request``); ``fetch`` then hands them out
        (each once). Never raises: a failure is raised by ``fetch`` for its own sample."""
        self._fetched.request(indices, ahead, self._read)

    def _read(self, wanted: list[int]) -> None:
        """Fetch the objects of ``wanted`` together (the disk cache's from there) into
        ``_fetched``."""
        cache = self.remote.cache
        if cache is not None:  # those the disk cache holds, from there
            kept = [(i, DiskCache.whole(p) if p is not None else None) for i, p in
                    ((i, cache.local(self.paths[i], self._ident(i))) for i in wanted)]
            self._fetched.put([i for i, data in kept if data is not None],
                              [data for _, data in kept if data is not None])
            wanted = [i for i, data in kept if data is None]
        try:
            got_ = self.remote.fetch_all([self.paths[i] for i in wanted])
        except RemoteError as exc:
            got_ = [exc] * len(wanted)
        self._fetched.put(wanted, got_)
        if cache is not None:  # each object read whole: kept, in the background
            for i, data in zip(wanted, got_):
                if isinstance(data, bytes):
                    cache.keep(self.paths[i], data, self._ident(i))

    def fetch(self, index: int) -> np.ndarray:
        from ..images.decode import unreadable

        data = self._fetched.take(index)
        try:
            if data is None:
                cache, url = self.remote.cache, self.paths[index]
                path = cache.local(url, self._ident(index)) if cache is not None else None
                data = DiskCache.whole(path) if path is not None else None
                data = data if data is not None else self.remote.fetch(url)
            elif isinstance(data, BaseException):
                raise data.with_traceback(None)  # one failure may stand for many samples
        except FileNotFoundError:
            raise unreadable(self.what(index), "no such object") from None
        return np.frombuffer(data, np.uint8)

    def share(self, store: SharedStore) -> RemoteTable:
        return RemoteTable(self.paths.share(store), self.remote,
                           None if self.idents is None else self.idents.share(store))

    def what(self, index: int) -> str:
        return f"image file {shown_url(self.paths[index])!r}"

    def class_of(self, index: int) -> int:
        return int(self.paths.class_of(index))

    @property
    def classes(self) -> np.ndarray | None:
        return self.paths.classes

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> str:
        """What ``stats()["unreadable"]`` calls object ``index``: its URL, secrets masked."""
        return shown_url(self.paths[index])

    def __getstate__(self) -> tuple[PathTable, Remote, PathTable | None]:
        return self.paths, self.remote, self.idents

    def __setstate__(self, state: tuple[PathTable, Remote, PathTable | None]) -> None:
        self.paths, self.remote, self.idents = state
        self._fetched = Fetched()


def remote_for(first: str, storage_options: Any, cache_dir: Any = None,
               cache_limit: Any = None) -> Remote | None:
    """The ``Remote`` that reads a source whose first path is ``first``, or None (local), with
    the disk cache ``cache_dir`` and ``cache_limit`` ask for (``cache.disk_cache.DiskCache``).

    Raises:
        ArgumentError: ``storage_options`` or ``cache_dir`` given for local paths; a
            ``cache_dir`` that cannot be written (``DiskCache.made``).
    """
    protocol = protocol_of(first)
    if protocol is None:
        for name, value in (("storage_options", storage_options), ("cache_dir", cache_dir)):
            if value:
                raise ArgumentError(
                    f"`{name}` applies to URLs (s3://, gs://, https://...); the paths are "
                    f"local, e.g. {first!r}. Fix: drop {name}, or pass URLs."
                )
        return None
    remote = Remote(protocol, storage_options)
    remote.cache = DiskCache.made(cache_dir, cache_limit, _endpoint(storage_options))
    return remote


def _endpoint(options: Any) -> str:
    """The endpoint named in ``storage_options`` at any depth ("" where none: the backend's
    default): the same URL on another server is another object in the disk cache."""
    if isinstance(options, dict):
        for key, value in options.items():
            found = str(value) if key == "endpoint_url" else _endpoint(value)
            if found:
                return found
    return ""


log = logging.getLogger(__name__)


def listed(remote: Remote | None, root: str, cache: str | os.PathLike[str] | None
           ) -> Listing | None:
    """The listing of bucket folder ``root`` (None for a local folder): reused from ``cache``
    when a file there holds it, else listed (one paginated listing) and kept there
    (``_kept``: the objects' URLs and identities, never an option; another bucket or server
    never matches). So a folder is listed once per ``listing_cache``, and a source built
    offline (``SHMAUG_OFFLINE``) or with the bucket down lists it from there.

    Raises:
        ArgumentError: ``cache`` given for a local folder.
    """
    if remote is None:
        if cache is not None:
            raise ArgumentError(
                f"`listing_cache` applies to a bucket folder (s3://, gs://, ...); {root!r} is "
                f"local. Fix: drop listing_cache (a local folder lists fast)."
            )
        return None
    if cache is None:
        return remote.listing(root)
    file = _kept.record_of(cache, "listing", root.rstrip("/"), remote)
    kept = _kept.read_record(file)
    if kept is not None:
        age = time.time() - os.path.getmtime(file)
        log.info("reused the listing of %s (%d objects, %.0f s old) from %s; delete that file "
                 "to list the bucket again", root, len(kept), age, file)
        return Listing(root, list(kept), kept)
    found = remote.listing(root)
    _kept.write_record(file, ((url, found.idents.get(url, ""))
                              for folder, names in found.dirs.items()
                              for url in (f"{folder}/{name}" for name in names)))
    return found


def shown_options(remote: Remote | None) -> Text | None:
    """``storage_options`` as a source's ``repr`` shows them: secret values masked (None for
    local paths or no options)."""
    return Text(remote.options_text) if remote is not None and remote.has_options else None


def check_same_protocol(paths: Sequence[str], protocol: str) -> None:
    other = next((p for p in paths if protocol_of(p) != protocol), None)
    if other is not None:
        raise ArgumentError(
            f"`paths` must all be {protocol}:// URLs once the first is; found {other!r}. Fix: "
            f"make one source per storage (local files, or one protocol)."
        )
