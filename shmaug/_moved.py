"""The import paths of the flat layout (``shmaug.loader``, ``shmaug.sequence``, ...) that
moved into the parts' folders: each still works, for one release, with a DeprecationWarning
that names the new path.

Each old path is a small placeholder module in ``sys.modules`` that imports its new home on
first use, so ``import shmaug`` still loads no Keras, and objects pickled under an old path
(``shmaug.files.ImageFiles``) still load. Placeholders rather than an import hook: an import
would bind ``shmaug.pack`` to the module, hiding the function of that name.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Any

MOVED = {
    "callbacks": "shmaug.keras.callbacks",
    "files": "shmaug.sources.files",
    "glyphs": "shmaug.sources.glyphs",
    "loader": "shmaug.engine.loader",
    "pack": "shmaug.sources.pack",
    "pool": "shmaug.engine._pool",
    "prefetch": "shmaug.engine._prefetch",
    "ring": "shmaug.engine._ring",
    "schedule": "shmaug.engine._schedule",
    "sequence": "shmaug.keras.sequence",
    "store": "shmaug.engine._store",
}


class _Moved(types.ModuleType):
    """Stands at an old path; forwards every attribute to the module's new home."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(old, f"Moved to {new}.")
        self.__dict__["_new"] = new

    def _target(self) -> types.ModuleType:
        new = self.__dict__["_new"]
        warnings.warn(f"`{self.__name__}` moved to `{new}`; import it from there (or use the "
                      f"names in `shmaug` itself). The old path goes in the next release.",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(new)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):  # import machinery, pickle, help()
            raise AttributeError(name)
        return getattr(self._target(), name)

    def __setattr__(self, name: str, value: Any) -> None:  # e.g. a test's monkeypatch
        setattr(self._target(), name, value)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__dict__["_new"]))


def install(package: str) -> None:
    """Put a placeholder at each old path not yet imported (idempotent)."""
    for old, new in MOVED.items():
        sys.modules.setdefault(f"{package}.{old}", _Moved(f"{package}.{old}", new))


def old_path(package: str, name: str) -> types.ModuleType | None:
    """The placeholder for ``package.name``, when that is a moved module's old path."""
    return sys.modules.get(f"{package}.{name}") if name in MOVED else None
