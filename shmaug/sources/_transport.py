"""Who sends a read's GETs: obstore (Rust's object_store) where it can, else fsspec.

A GET through s3fs costs 2.4 ms of client CPU for a 10 kB image and 6.8 ms for a 2 MB span;
obstore, signing and reading in Rust, 0.3 and 1.8 (``python -m bench.remote.cost``). On a
worker that decodes beside its requests, that CPU is decoding lost (issue 39 §4). So a read's
GETs, whole objects and byte ranges, go through obstore where:

- it is installed (the ``remote`` extra has it) and ``SHMAUG_TRANSPORT`` is not ``fsspec``;
- the URL is ``s3://`` and ``storage_options`` say all obstore needs, in fsspec's words:
  credentials (``key`` and ``secret``, ``token``) or ``anon``, and where the bucket answers
  (``endpoint_url`` or ``region_name``); options that only tune fsspec's listings and caches
  are allowed. Credentials found elsewhere (the environment, config files, an instance's role),
  a bucket's region left to discover, and every option s3fs alone understands stay with s3fs,
  whose answer is then the same as before;
- or the URL is ``http(s)://`` with plain characters and no options.

Everything else (listings, sizes and etags, ``gs://``) stays with fsspec (``_client.Remote``).
obstore's failures become the exceptions fsspec's would (``FileNotFoundError``,
``PermissionError``, ``ConnectionRefusedError``, else a transient ``ConnectionError``), so
``_failures`` judges both alike. Its own retries are off: ``Remote._retried`` retries, bounded.

Fork: obstore's runtime, once it has served a request, does not survive a fork (a forked
child's request hangs). A process forked from one that used it takes fsspec; a spawned or
forkserver worker starts fresh and takes obstore.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
from datetime import timedelta
from typing import Any

from ._remote_settings import settings

log = logging.getLogger(__name__)

# s3fs' options with their obstore names; and those that only tune fsspec's own listings,
# caches and transfers of large files, which a GET does not use.
_S3_CREDENTIALS = {"key": "aws_access_key_id", "secret": "aws_secret_access_key",
                   "token": "aws_session_token"}
_FSSPEC_ONLY = {"skip_instance_cache", "use_listings_cache", "listings_expiry_time",
                "max_paths", "default_block_size", "default_fill_cache", "default_cache_type",
                "max_concurrency", "asynchronous", "loop", "version_aware", "cache_regions"}
# botocore's client settings a GET through obstore honours: its connect timeout; its retries
# give way to shmaug's, its read timeout to shmaug's bound on a request, its pool to obstore's.
_S3_CONFIG = {"retries", "connect_timeout", "read_timeout", "max_pool_connections"}
_PLAIN_URL = re.compile(r"^[A-Za-z0-9._~/!$&'()*+,;=:@-]*$")  # nothing obstore would re-encode

_used_by: int | None = None  # the process whose obstore runtime has served a request


def used_here() -> bool:
    """Whether obstore has served a request in this process (a fork of it then reads through
    fsspec)."""
    return _used_by == os.getpid()


class Unfit(Exception):
    """Why obstore cannot take these options (fsspec reads them)."""


class ObstoreGets:
    """GETs of whole objects and byte ranges through obstore, one store per bucket (or web
    origin), built on first use in this process."""

    def __init__(self, protocol: str, config: dict[str, Any]) -> None:
        self.protocol = protocol
        self._config = config
        self._stores: dict[str, Any] = {}
        self._lock = threading.Lock()

    def fits(self, url: str) -> bool:
        """Whether this client sends ``url``'s GETs as fsspec would: obstore takes a key as a
        path, and would refuse or rewrite an empty, ``.`` or ``..`` segment (``a//b``, a
        leading or trailing ``/``) or a control character; it reads an http URL's path only,
        and would encode its ``%`` again."""
        root, _, key = url.partition("://")[2].partition("/")
        if "?" in key or "#" in key or not key.isprintable():
            return False
        if any(part in ("", ".", "..") for part in key.split("/")):
            return False
        return self.protocol in ("s3", "s3a") or bool(_PLAIN_URL.match(key))

    def get(self, url: str, start: int | None = None, stop: int | None = None) -> bytes:
        """The object's bytes (``start:stop`` of them where given), one request."""
        import obstore

        global _used_by
        _used_by = os.getpid()
        store, path = self._located(url)
        try:
            if start is None:
                return bytes(obstore.get(store, path).bytes())
            return bytes(obstore.get_range(store, path, start=start, end=stop))
        except OSError:  # FileNotFoundError: obstore's own
            raise
        except ValueError as exc:  # a path obstore cannot parse: ``fits`` lets none through
            raise Unfit(f"obstore cannot name {url!r}: {exc}") from None
        except Exception as exc:
            raise _as_fsspec_would(exc) from None

    def _located(self, url: str) -> tuple[Any, str]:
        """The store of ``url``'s bucket (or web origin), and the object's path in it."""
        scheme, _, rest = url.partition("://")
        root, _, path = rest.partition("/")
        if self.protocol not in ("s3", "s3a"):
            root = f"{scheme}://{root}"
        store = self._stores.get(root)
        if store is None:
            with self._lock:
                store = self._stores.get(root) or self._built(root)
                self._stores[root] = store
        return store, path

    def _built(self, root: str) -> Any:
        from obstore.store import HTTPStore, S3Store

        timeout = timedelta(seconds=settings().request_timeout_s)
        # obstore's ClientConfig and RetryConfig (typed dicts of its stubs)
        client: Any = {"timeout": timeout, "connect_timeout": timeout,
                       **self._config.get("client", {})}
        retry: Any = {"max_retries": 0, "retry_timeout": timeout}
        if self.protocol in ("s3", "s3a"):
            return S3Store(root, client_options=client, retry_config=retry,
                           **self._config["s3"])
        client["allow_http"] = True
        return HTTPStore.from_url(root, client_options=client, retry_config=retry)


def obstore_gets(protocol: str, options: dict[str, Any]) -> ObstoreGets | None:
    """This process's obstore client for ``protocol`` and ``options``, or None where fsspec
    must read them (the reason is logged at debug level)."""
    if settings().transport == "fsspec":
        return None
    if _used_by not in (None, os.getpid()):
        log.debug("obstore served the parent of this forked process: fsspec reads here")
        return None
    if importlib.util.find_spec("obstore") is None:
        return None
    try:
        if protocol in ("s3", "s3a"):
            return ObstoreGets(protocol, _s3_config(options))
        if protocol in ("http", "https"):
            if options:
                raise Unfit(f"options for fsspec's HTTP file system: {sorted(options)}")
            return ObstoreGets(protocol, {})
        raise Unfit(f"{protocol}:// is read by fsspec only")
    except Unfit as why:
        log.debug("%s:// reads go through fsspec: %s", protocol, why)
        return None


def _s3_config(options: dict[str, Any]) -> dict[str, Any]:
    """s3fs' ``storage_options`` in obstore's words, or ``Unfit`` naming what it lacks."""
    s3: dict[str, Any] = {}
    client = dict(options.get("client_kwargs") or {})
    config = dict(options.get("config_kwargs") or {})
    for name, value in options.items():
        if name in _S3_CREDENTIALS:
            if value:
                s3[_S3_CREDENTIALS[name]] = value
        elif name == "anon":
            s3["skip_signature"] = bool(value)
        elif name == "endpoint_url":
            client.setdefault("endpoint_url", value)
        elif name not in _FSSPEC_ONLY and name not in ("client_kwargs", "config_kwargs"):
            raise Unfit(f"option {name!r} is s3fs'")
    endpoint, region = client.pop("endpoint_url", None), client.pop("region_name", None)
    if client:
        raise Unfit(f"client_kwargs {sorted(client)} are botocore's")
    if set(config) - _S3_CONFIG:
        raise Unfit(f"config_kwargs {sorted(set(config) - _S3_CONFIG)} are botocore's")
    if not s3.get("skip_signature") and not ("aws_access_key_id" in s3
                                             and "aws_secret_access_key" in s3):
        raise Unfit("no key and secret (or anon) in the options: botocore finds them")
    if not endpoint and not region:
        raise Unfit("neither endpoint_url nor region_name: botocore finds the bucket's region")
    if endpoint:
        s3["endpoint"] = endpoint
    s3["region"] = region or "us-east-1"
    out_client: dict[str, Any] = {}
    if config.get("connect_timeout") is not None:  # read_timeout: the request's bound holds
        out_client["connect_timeout"] = timedelta(seconds=float(config["connect_timeout"]))
    if endpoint and str(endpoint).startswith("http://"):
        out_client["allow_http"] = True
    return {"s3": s3, "client": out_client}


def _as_fsspec_would(exc: Exception) -> Exception:
    """obstore's failure as the exception fsspec's backends raise for it: what ``_failures``
    judges. The message is obstore's first paragraph (its debug dump follows)."""
    from obstore import exceptions as obs

    text = str(exc)
    first = " ".join(text.split("\n\nDebug source", 1)[0].split())  # one line
    if isinstance(exc, (obs.PermissionDeniedError, obs.UnauthenticatedError)):
        return PermissionError(first)
    if "ConnectionRefused" in text or "Connection refused" in text:
        return ConnectionRefusedError(first)
    if re.search(r"status code: 40[13]\b", text):
        return PermissionError(first)
    return ConnectionError(first)  # transient: retried
