"""The remote layer's settings from the environment, read in this one place.

``settings()`` is the only reader of ``SHMAUG_REQUEST_TIMEOUT_S``, ``SHMAUG_SPAN_CACHE_MB``,
``SHMAUG_TRANSPORT`` and ``SHMAUG_OFFLINE``; nothing reads them at import. The values are
parsed, and a bad one warned about, once per process and value (``functools.cache`` over the
variables' text): each call looks the text up, so a worker, forked, spawned or under a
forkserver (which hands it the parent's environment as it starts), and a test's
``monkeypatch.setenv`` take the value the environment holds then.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

TIMEOUT_ENV = "SHMAUG_REQUEST_TIMEOUT_S"
SPAN_CACHE_ENV = "SHMAUG_SPAN_CACHE_MB"
TRANSPORT_ENV = "SHMAUG_TRANSPORT"
TRANSPORTS = ("auto", "fsspec")
OFFLINE_ENV = "SHMAUG_OFFLINE"
_YES, _NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """What the environment asked of the remote layer, parsed."""

    # The longest one request may take, whatever the backend's own timeouts say (a server that
    # accepts connections and never answers): nothing hangs.
    request_timeout_s: float = 60.0
    # Bytes of its ranged reads a process keeps (``_spans.Spans``), least recently used out
    # first: a request that read through a gap also read the records in it, and a later task's
    # records may lie in a span already read; those are served without a request. Per process
    # (worker); 0: none kept.
    span_cache: int = 32 << 20
    # Who sends a read's GETs (``_transport``): "auto", obstore where it is installed and the
    # options say all it needs, else fsspec; "fsspec", always fsspec (as before obstore).
    transport: str = "auto"
    # Never reach the bucket (as ``HF_HUB_OFFLINE``): a source is built from what the index,
    # listing and disk caches kept, and what they lack is named, at once, not retried.
    offline: bool = False


def settings() -> RemoteSettings:
    """The settings the environment holds now (parsed once per value)."""
    return _parsed(os.environ.get(TIMEOUT_ENV, ""), os.environ.get(SPAN_CACHE_ENV, ""),
                   os.environ.get(TRANSPORT_ENV, ""), os.environ.get(OFFLINE_ENV, ""))


@functools.cache
def _parsed(timeout_text: str, span_text: str, transport_text: str,
            offline_text: str) -> RemoteSettings:
    default = RemoteSettings()
    return RemoteSettings(request_timeout_s=_seconds(TIMEOUT_ENV, timeout_text,
                                                     default.request_timeout_s),
                          span_cache=_mebibytes(SPAN_CACHE_ENV, span_text,
                                                default.span_cache / (1 << 20)),
                          transport=_choice(TRANSPORT_ENV, transport_text, TRANSPORTS),
                          offline=_flag(OFFLINE_ENV, offline_text))


def _flag(name: str, text: str) -> bool:
    """``text`` (the variable ``name``) as on or off (off where unset or bad)."""
    value = text.strip().lower()
    if value not in _YES + _NO:
        log.warning("%s=%r is neither on (%s) nor off (%s); using off.", name, text,
                    ", ".join(_YES), ", ".join(v for v in _NO if v))
    return value in _YES


def _choice(name: str, text: str, choices: tuple[str, ...]) -> str:
    """``text`` (the variable ``name``) if one of ``choices`` (case aside), else the first."""
    value = text.strip().lower()
    if value and value not in choices:
        log.warning("%s=%r is not one of %s; using %r.", name, text, ", ".join(choices),
                    choices[0])
    return value if value in choices else choices[0]


def _seconds(name: str, text: str, default: float) -> float:
    """``text`` (the variable ``name``) as seconds (the default where unset or bad)."""
    try:
        return float(text) if text else default
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %g.", name, text, default)
        return default


def _mebibytes(name: str, text: str, default: float) -> int:
    """``text`` (the variable ``name``) as a size in MiB, in bytes (the default where unset or
    bad)."""
    try:
        value = float(text) if text else default
        if not 0 <= value < 1 << 40:
            raise ValueError
    except ValueError:
        log.warning("%s=%r is not a size in MiB (a number >= 0); using %g.", name, text,
                    default)
        value = default
    return int(value * (1 << 20))
