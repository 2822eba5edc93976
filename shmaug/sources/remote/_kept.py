"""What a bucket held, kept in a local folder for a run that cannot, or must not, reach it.

A record is a small text file: one object a line, its URL and its identity (``"size|etag"``)
tab-separated (never an option), in the order the bucket gave them. Its name hashes what was
asked (a folder, or a source's shard patterns) with the options as a repr shows them (secrets
masked), so another bucket, endpoint or pattern never matches. ``bucket.listed`` keeps a
folder's listing in ``listing_cache``; ``formats.shards.find`` keeps a source's shards and
their identities in ``index_cache``, next to their index. A record is written whole or not
at all (a temporary file, renamed).

``without_bucket`` is the rule of a build without the bucket (``SHMAUG_OFFLINE``, or the
bucket down): the shards as a record kept them, each held by the disk cache, or an error
that names what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from typing import TYPE_CHECKING, Iterable

from ._settings import OFFLINE_ENV
from ._urls import few
from ... import platform
from ...errors import RemoteError, warn

if TYPE_CHECKING:
    from ._client import Remote

log = logging.getLogger(__name__)


def record_of(folder: str | os.PathLike[str], kind: str, asked: str, remote: Remote) -> str:
    """The file in ``folder`` that keeps what ``asked`` found (``kind``: ``"listing"``,
    ``"shards"``) through ``remote``."""
    ident = f"{asked}|{remote.options_text}"
    return os.path.join(os.fspath(folder),
                        f"{kind}-{hashlib.sha1(ident.encode()).hexdigest()}.txt")


def read_record(file: str) -> dict[str, str] | None:
    """The objects a record holds (URL -> identity, "" where none was known), or None where
    there is no record (or it cannot be read)."""
    if not platform.ours(file):  # (none yet, or planted by another user)
        return None
    try:
        with open(file, encoding="utf-8") as f:
            lines = [line.rsplit("\t", 1) for line in f.read().splitlines()]  # (a key may
            # hold a tab; an identity never does)
    except OSError:
        return None
    return {line[0]: line[1] if len(line) == 2 else "" for line in lines}


def write_record(file: str, objects: Iterable[tuple[str, str]]) -> None:
    """Keep ``objects`` (URL, identity) in ``file``; a folder that refuses it is logged, not
    raised: the record only spares a later run the bucket."""
    folder = os.path.dirname(file)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, partial = tempfile.mkstemp(suffix=".txt", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(f"{url}\t{ident}\n" for url, ident in objects)
        os.replace(partial, file)  # whole or not at all
    except OSError as exc:
        log.warning("%s not written: %s", file, exc)


def without_bucket(remote: Remote, record: str | None, name: str, down: RemoteError | None
                   ) -> dict[str, str]:
    """The shards (URL -> identity) ``record`` kept of a source's ``name`` argument, for a
    build that does not reach the bucket: ``remote.offline``, or the bucket ``down`` (that
    error). Each must be in the disk cache, which then serves every read.

    Raises:
        RemoteError: ``down`` itself where no record or no disk cache is kept (nothing to
            fall back on); offline, no record (``index_cache`` not given, or no build kept
            one there); shards the disk cache does not hold (named).
    """
    why = (f"{OFFLINE_ENV}=1 keeps shmaug off the network" if down is None else
           f"the bucket cannot be reached ({down})")
    kept = None if record is None else read_record(record)
    if down is not None and (kept is None or remote.cache is None):
        raise down  # nothing to fall back on: the bucket's own error
    if kept is None:
        where = ("index_cache=None keeps no record of them" if record is None else
                 f"index_cache={os.path.dirname(record)!r} holds no record of them")
        raise RemoteError(
            f"`{name}`: the shards cannot be listed: {why}, and {where}. Fix: build the "
            f"source once with the bucket reachable and index_cache= a folder (it keeps the "
            f"shards' names, identities and index there) and cache_dir= (the shards read); "
            f"or unset {OFFLINE_ENV}."
        )
    cache = remote.cache
    missing = [url for url, ident in kept.items()
               if cache is None or cache.local(url, ident) is None]
    if missing:
        held = "cache_dir=None" if cache is None else f"cache_dir={cache.folder!r}"
        raise RemoteError(
            f"`{name}`: {len(missing)} of the {len(kept)} shard(s) are not in the disk cache "
            f"({held}): {few(missing)}; {why}. Fix: read them once with the bucket reachable and "
            f"cache_dir= (a run keeps every shard it reads there), or unset {OFFLINE_ENV}."
        )
    age = time.time() - os.path.getmtime(record) if record is not None else 0.0
    said = (f"{name}: built without the bucket ({why}) from the {len(kept)} shard(s) that "
            f"{record} kept ({age:.0f} s old) and the disk cache in "
            f"{cache.folder if cache is not None else None}")
    if down is None:  # (asked for: SHMAUG_OFFLINE)
        log.info("%s", said)
    else:  # the data may be stale: said where a user sees it, not only in a log
        warn(f"{said}; set {OFFLINE_ENV}=1 to skip the bucket")
    return kept
