"""URLs of object storage: which paths are URLs and of which protocol, and a bucket folder's
listing walked as a local folder is.

Pure text: it imports no fsspec and sends no request (``_client.Remote.listing`` lists the
bucket; ``images.folders`` walks the ``Listing`` it returns).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Iterable

_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def protocol_of(path: str) -> str | None:
    """``"s3"`` for ``"s3://b/k"``; None for a local path (``file://`` counts as local)."""
    match = _URL.match(path) if isinstance(path, str) else None
    if match is None or match.group(1).lower() == "file":
        return None
    return match.group(1).lower()


def is_url(path: Any) -> bool:
    return protocol_of(path) is not None


class Listing:
    """A bucket folder listed once, walked as ``images.folders`` walks a local one."""

    def __init__(self, root: str, urls: Iterable[str],
                 idents: dict[str, str] | None = None) -> None:
        self.root = root.rstrip("/")
        self.idents = idents or {}  # URL -> "size|etag" as listed (what a disk cache checks)
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


def few(paths: list[str], shown: int = 3) -> str:
    """``'a', 'b', 'c', … (2 more)``: the first few paths, and how many were left out (what
    a message names of a long list)."""
    more = f", … ({len(paths) - shown} more)" if len(paths) > shown else ""
    return ", ".join(repr(p) for p in paths[:shown]) + more
