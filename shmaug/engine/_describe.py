"""How a Loader or a Sequence describes itself in ``repr()``: the settings as given, and what
they resolved to. Reads arguments; checks nothing (that is ``_checks``' and ``_inputs``')."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._launch import default_start_method


def brief(value: Any) -> str:
    """An argument as a repr shows it: arrays by dtype and shape (a memory map by its file),
    containers of them likewise, anything else by its repr, cut short."""
    if isinstance(value, np.ndarray):
        name = getattr(value, "filename", None)
        where = f" mapped from {os.path.basename(str(name))}" if name else ""
        return f"<{value.dtype} array {tuple(value.shape)}{where}>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (np.ndarray, dict)) for v in value):
        inner = ", ".join(brief(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' * (len(value) == 1)})"
    text = repr(value)
    if isinstance(value, (list, tuple)) and len(text) > 100:
        return f"<{type(value).__name__} of {len(value)}>"
    return text if len(text) <= 100 else text[:97] + "..."


def call_repr(name: str, settings: list[tuple[str, Any]]) -> str:
    """``name(key=value, ...)``: values already strings are shown as they are."""
    shown = ", ".join(f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in settings)
    return f"{name}({shown})"


def resolved_start_method(value: str | None) -> str:
    """The start method a pool given ``value`` uses (as ``WorkerPool`` picks its context):
    the one given, else ``_launch.default_start_method``'s (for a payload that needs no
    ``__main__``). Asking does not fix the default context."""
    return value or default_start_method()
