"""Who sends a read's GETs: obstore (Rust's object_store) where it can, else fsspec.

A GET through s3fs costs 2.4 ms of client CPU for a 10 kB image and 5.2 ms for a 2 MB span;
obstore, signing and reading in Rust, 0.3 and 1.3-2.0 (``python -m bench.remote.cost``). On a
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

Faithful to the options, whatever else is around: obstore also reads ``AWS_*`` environment
variables that botocore ignores where the options give credentials (a session token, a
virtual-hosted style that names another bucket, unsigned requests, a request payer), so where
any such variable is set, s3fs reads; the region is the options' or botocore's own (its
environment and config files). A store obstore cannot build from the options (a malformed
endpoint), or a server it cannot read as fsspec does (no ``Content-Length``, a redirect to
the bucket's region) hands that bucket or web origin to fsspec for the process. A server that
ignores ranges is an error (``RangeIgnored``), whichever client saw it.

Fork: obstore's runtime, once it has served a request, hangs a forked child's requests and can
crash the parent. A process forked from one that had imported obstore (shmaug's reads, or the
user's own use) takes fsspec (``os.register_at_fork``); and obstore counts as a threaded
runtime for the default start method (``engine.workers.launch``): forkserver, whose workers start
fresh and take obstore.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
import threading
import urllib.parse
from datetime import timedelta
from typing import Any, Callable, TypeVar

from ._settings import settings
from ...errors import RemoteError

log = logging.getLogger(__name__)
T = TypeVar("T")

# s3fs' options with their obstore names; and those that only tune fsspec's own listings,
# caches and transfers of large files, which a GET does not use.
_S3_CREDENTIALS = {"key": "aws_access_key_id", "secret": "aws_secret_access_key",
                   "token": "aws_session_token"}
_FSSPEC_ONLY = {"skip_instance_cache", "use_listings_cache", "listings_expiry_time",
                "max_paths", "default_block_size", "default_fill_cache", "default_cache_type",
                "max_concurrency", "asynchronous", "loop", "version_aware"}
# botocore's client settings a GET through obstore honours: its connect timeout; its retries
# give way to shmaug's, its read timeout to shmaug's bound on a request, its pool to obstore's.
_S3_CONFIG = {"retries", "connect_timeout", "read_timeout", "max_pool_connections"}
_PLAIN_URL = re.compile(r"^[A-Za-z0-9._~/!$&'()*+,;=:@-]*$")  # nothing obstore would re-encode
# The AWS_* variables obstore's S3 store may read that leave it as botocore is: those the
# options override (credentials, region), or that only botocore reads.
_AWS_HARMLESS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                 "AWS_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE",
                 "AWS_CA_BUNDLE", "AWS_EC2_METADATA_DISABLED", "AWS_STS_REGIONAL_ENDPOINTS"}
# obstore's answers that fsspec reads otherwise: that bucket or origin is then fsspec's.
_FSSPEC_READS = ("Content-Length Header missing", "status code: 301", "PermanentRedirect")

_forked_after_import = False  # this process is a fork of one that had imported obstore


def _after_fork_in_child() -> None:
    global _forked_after_import
    _forked_after_import = _forked_after_import or "obstore" in sys.modules


os.register_at_fork(after_in_child=_after_fork_in_child)


class Unfit(Exception):
    """Why obstore cannot take these options, or this request (fsspec reads them)."""


class RangeIgnored(RemoteError):
    """A server that answered a range request with the whole object (fsspec's HTTP file
    system returned it as the range: wrong bytes), or that obstore saw refuse ranges."""

    def __init__(self, url: str) -> None:
        super().__init__(
            f"Could not read a byte range of {url!r}: the server ignores range requests and "
            f"sends the whole object. Fix: serve the files from a server that honours "
            f"`Range` (nginx, S3 and its kin do), or copy them to local disk.")


class ObstoreGets:
    """GETs of whole objects and byte ranges through obstore, one store per bucket (or web
    origin), built on first use in this process."""

    def __init__(self, protocol: str, config: dict[str, Any]) -> None:
        self.protocol = protocol
        self._config = config
        self._stores: dict[str, Any] = {}
        self._fsspecs: set[str] = set()  # buckets or origins handed to fsspec (``Unfit``)
        self._lock = threading.Lock()

    def fits(self, url: str) -> bool:
        """Whether this client sends ``url``'s GETs as fsspec would: obstore takes a key as a
        path, and would refuse or rewrite an empty, ``.`` or ``..`` segment (``a//b``, a
        leading or trailing ``/``) or a control character; it reads an http URL's path only,
        and would encode its ``%`` again."""
        root, _, key = url.partition("://")[2].partition("/")
        if root in self._fsspecs or "@" in root:  # (credentials in an http URL: fsspec's)
            return False
        if "?" in key or "#" in key or not key.isprintable():
            return False
        if any(part in ("", ".", "..") for part in key.split("/")):
            return False
        return self.protocol in ("s3", "s3a") or bool(_PLAIN_URL.match(key))

    def get(self, url: str, start: int | None = None, stop: int | None = None) -> bytes:
        """The object's bytes (``start:stop`` of them where given), one request."""
        import obstore

        def get(store: Any, path: str) -> bytes:
            if start is None:
                return bytes(obstore.get(store, path).bytes())
            return bytes(obstore.get_range(store, path, start=start, end=stop))

        return self._sent(url, get)

    def identity(self, url: str) -> str:
        """The S3 object's ``"size|etag"`` as fsspec's ``info`` gives it (``_client._ident``),
        one HEAD: a worker that reads through obstore then never builds botocore's client,
        which costs a second of CPU on first use (a disk cache's first downloads waited for
        it while the records were read by range). ``Unfit`` where fsspec must answer: any
        failure (no such object or a folder, which fsspec tells apart; a refusal or a
        throttle, whose reason a HEAD's empty body leaves to fsspec's message), or no etag."""
        import obstore

        if self.protocol not in ("s3", "s3a"):
            raise Unfit("an http server's identity is fsspec's")
        try:
            meta = self._sent(url, obstore.head)
        except OSError as exc:  # FileNotFoundError, and every failure ``_sent`` translates
            raise Unfit(f"obstore's HEAD of {url!r} failed ({exc}): fsspec answers") from None
        if not meta.get("e_tag"):
            raise Unfit(f"{url!r} has no etag: fsspec's identity is its modification time")
        return f"{int(meta['size'])}|{meta['e_tag']}"

    def _sent(self, url: str, call: Callable[[Any, str], T]) -> T:
        """``call(store, path)`` for ``url``, its failures as fsspec's would be."""
        scheme, _, rest = url.partition("://")
        root, _, path = rest.partition("/")
        try:
            return call(self._store(root if self.protocol in ("s3", "s3a") else
                                    f"{scheme}://{root}"), path)
        except OSError:  # FileNotFoundError: obstore's own
            raise
        except ValueError as exc:  # a path obstore cannot parse: ``fits`` lets none through
            raise Unfit(f"obstore cannot name {url!r}: {exc}") from None
        except Exception as exc:
            if "Range request not supported" in str(exc):
                raise RangeIgnored(url) from None
            if any(sign in str(exc) for sign in _FSSPEC_READS):
                self._fsspecs.add(root)
                raise Unfit(f"fsspec reads {root!r}: {_first_line(exc)}") from None
            raise _as_fsspec_would(exc) from None
        except BaseException as exc:  # a panic in Rust (pyo3's PanicException): a bad config
            if type(exc).__name__ != "PanicException":
                raise
            self._fsspecs.add(root)
            raise Unfit(f"obstore could not build a store for {root!r}") from None

    def _store(self, root: str) -> Any:
        """The store of bucket (or web origin) ``root``."""
        store = self._stores.get(root)
        if store is None:
            with self._lock:
                store = self._stores.get(root) or self._built(root)
                self._stores[root] = store
        return store

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
    if _forked_after_import:
        log.debug("forked from a process that had imported obstore: fsspec reads here")
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
            if "endpoint_url" in client:  # botocore refuses the pair: let it say so
                raise Unfit("endpoint_url both in the options and in client_kwargs")
            client["endpoint_url"] = value
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
    read_by_obstore = sorted(k for k in os.environ
                             if k.startswith("AWS_") and k not in _AWS_HARMLESS)
    if read_by_obstore:
        raise Unfit(f"the environment sets {read_by_obstore}, which obstore would read")
    s3.update(virtual_hosted_style_request=False,
              skip_signature=bool(s3.get("skip_signature")),
              region=region or _botocore_region() or "us-east-1")
    out_client: dict[str, Any] = {}
    if endpoint:
        s3["endpoint"] = _endpoint(endpoint)
        out_client["allow_http"] = s3["endpoint"].startswith("http://")
    if config.get("connect_timeout") is not None:  # read_timeout: the request's bound holds
        out_client["connect_timeout"] = timedelta(seconds=float(config["connect_timeout"]))
    return {"s3": s3, "client": out_client}


def _endpoint(endpoint: Any) -> str:
    """``endpoint_url`` as obstore takes it (``Unfit`` where it is not an http(s) URL with a
    host: obstore would panic; botocore names the fault)."""
    try:
        parts = urllib.parse.urlsplit(str(endpoint).strip())
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except ValueError:
        raise Unfit(f"endpoint_url {endpoint!r} is not a URL") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise Unfit(f"endpoint_url {endpoint!r} is not an http(s) URL with a host")
    return urllib.parse.urlunsplit(parts._replace(scheme=parts.scheme.lower()))


def _botocore_region() -> str | None:
    """The region botocore signs for where the options name none: its environment and config
    files' (s3fs' own choice)."""
    try:
        import botocore.session

        region = botocore.session.Session().get_config_variable("region")
        return str(region) if region else None
    except Exception:  # no botocore, or a config file it cannot read: s3fs would fail too
        return None


def _as_fsspec_would(exc: Exception) -> Exception:
    """obstore's failure as the exception fsspec's backends raise for it: what ``_failures``
    judges. The message is obstore's first paragraph (its debug dump follows)."""
    from obstore import exceptions as obs

    text, first = str(exc), _first_line(exc)
    if isinstance(exc, (obs.PermissionDeniedError, obs.UnauthenticatedError)):
        return PermissionError(first)
    if "ConnectionRefused" in text or "Connection refused" in text:
        return ConnectionRefusedError(first)
    if re.search(r"status code: 40[13]\b", text):
        return PermissionError(first)
    return ConnectionError(first)  # transient: retried


def _first_line(exc: BaseException) -> str:
    """obstore's message without its debug dump, on one line."""
    return " ".join(str(exc).split("\n\nDebug source", 1)[0].split())
