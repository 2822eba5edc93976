"""Finding a source's shards, its optional libraries, and reusing index scans across runs.

``expand`` turns a glob pattern or a list into existing shard paths; ``need`` says which extra
to install when a constructor's library is missing; ``cached`` reuses the scan of a shard that
has not changed since it was scanned (same path, size, modification time and inode), kept as
one small ``.npz`` per shard in ``index_cache`` (opt-in: nothing is written unless a folder is
given). This module reads no record; ``records.py`` builds the source.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import tempfile
from typing import Any, Callable

import numpy as np

from . import _options as O
from ..errors import ArgumentError, ArgumentTypeError, got

log = logging.getLogger("shmaug.sources.records")
Scan = Callable[[str], tuple[list[int], list[int], list[Any]]]


def cached(scan: Scan, index_cache: str | None, what: str) -> Scan:
    """``scan``, reusing its result for an unchanged shard from ``index_cache`` (None: no
    cache). ``what`` names the scan's settings (format and keys): another one never matches."""
    if index_cache is None:
        return scan
    folder = os.fspath(index_cache)

    def run(path: str) -> tuple[list[int], list[int], list[Any]]:
        st = os.stat(path)
        ident = f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{what}"
        file = os.path.join(folder, hashlib.sha1(ident.encode()).hexdigest() + ".npz")
        try:
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
    """A glob pattern's sorted matches, or a list of paths (each must exist)."""
    if isinstance(given, (str, os.PathLike)):
        pattern = os.fspath(given)
        paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
    else:
        try:
            paths = [os.fspath(p) for p in given]
        except TypeError:
            raise ArgumentTypeError(
                f"`{name}` must be a list of {what} or a glob pattern; received {got(given)}. "
                f"Fix: e.g. `{name}='data/train-*'`."
            ) from None
    missing = [p for p in paths if not os.path.isfile(p)]
    if not paths or missing:
        seen = f"{len(missing)} do not exist: {missing[:3]}" if missing else "none matched"
        raise ArgumentError(
            f"`{name}` must name existing {what}; received {got(given)}, of which {seen}. "
            f"Fix: check the paths or the glob pattern."
        )
    return paths


