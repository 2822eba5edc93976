"""The error rules of every remote call: which failures end a call at once and what error each
becomes (``final``), the error that ends a call retried in vain (``failure``), and the tests
they rest on (``refused``, ``from_backend``).

A missing object (or bucket) is ``FileNotFoundError``; a refused credential or a refused
connection is ``RemoteError`` naming the fix, at once, as is any call while ``SHMAUG_OFFLINE``
keeps the process off the network (``offline``); anything else is transient and
``_client.Remote._retried`` tries it again, bounded. Every message goes through
``Remote.scrub``: no secret of the options shows. ``refusals_not_retried`` makes s3fs' own
client (botocore) follow the same rule for a refused connection.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from ._settings import OFFLINE_ENV, settings
from ...errors import RemoteError

if TYPE_CHECKING:
    from ._client import Remote


def failure(remote: Remote, url: str, exc: BaseException | None, doing: str = "read",
            attempts: int = 1) -> BaseException:
    """The error the rules make of ``exc``, raised while ``doing`` (``"read"``, ``"list"``,
    ``"index"``) ``url``: what ``final`` says, else the transient failure that ended
    ``attempts`` tries. For a call that is not retried (the index scan's stream)."""
    ended = None if exc is None else final(remote, url, exc, doing)
    if ended is not None:
        return ended
    what = f"read {url!r} to index it" if doing == "index" else f"{doing} {url!r}"
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return RemoteError(
        f"Could not {what}{tries}; the last failure: {remote.scrub(describe(exc))}. Fix: "
        f"check that the endpoint is reachable (storage_options={remote.options_text}) and "
        f"retry."
    )


def final(remote: Remote, url: str, exc: BaseException, doing: str) -> BaseException | None:
    """The error that ends a call at its first failure, or None (transient: retried).

    A missing object (or bucket) is ``FileNotFoundError``; a refused credential and a
    refused connection (nothing listens at the endpoint: another try cannot help, and
    botocore's own retries made it 41.5 s) are ``RemoteError`` naming the fix."""
    what = f"read {url!r} to index it" if doing == "index" else f"{doing} {url!r}"
    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
        if doing == "list":  # the backend's reason alone: no such bucket
            return FileNotFoundError(remote.scrub(describe(exc)))
        return FileNotFoundError(f"no such object {url!r}")
    if isinstance(exc, PermissionError):
        may = "may list the bucket" if doing == "list" else "the bucket accepts"
        unlisted = "; a list of the objects' URLs needs no listing" if doing == "list" else ""
        return RemoteError(
            f"Could not {what}: access was refused ({remote.scrub(describe(exc))}). Fix: "
            f"pass credentials that {may} in storage_options (now {remote.options_text}) or "
            f"where the backend looks for them (environment, config files), or "
            f"`storage_options={{'anon': True}}` for a public bucket{unlisted}."
        )
    if refused(exc):
        return RemoteError(
            f"Could not connect to {what}: the connection was refused "
            f"({remote.scrub(describe(exc))}); nothing listens there, so it is not retried. "
            f"Fix: check that the endpoint is reachable: its address in storage_options "
            f"(now {remote.options_text}), and that the server is running."
        )
    return None


def offline(remote: Remote, url: str, doing: str = "read") -> RemoteError:
    """The error of a call made while ``SHMAUG_OFFLINE`` forbids the network: what it wanted
    (``url``, which no cache holds), and which cache would have held it."""
    what = f"read {url!r} to index it" if doing == "index" else f"{doing} {url!r}"
    cache = remote.cache
    where = ("the disk cache (cache_dir=None) is off" if cache is None else
             f"the disk cache (cache_dir={cache.folder!r}) does not hold it")
    return RemoteError(
        f"Could not {what}: {OFFLINE_ENV}=1 keeps shmaug off the network, and {where}. Fix: "
        f"unset {OFFLINE_ENV} to reach the bucket, or first run with the bucket reachable so "
        f"that the caches keep what this needs: cache_dir= the objects read, index_cache= a "
        f"record source's shards and index, listing_cache= a folder's listing."
    )


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


def refusals_not_retried(fs: Any) -> None:
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


def describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown"
    text = str(exc).strip() or ("no answer within SHMAUG_REQUEST_TIMEOUT_S="
                                f"{settings().request_timeout_s:g} s"
                                if type(exc).__name__ == "FSTimeoutError" else "no message")
    return f"{type(exc).__name__}: {text}"[:300]
