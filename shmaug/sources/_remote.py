"""Samples in object storage (s3://, gs://, https://...), read through fsspec: the door the rest
of ``sources/`` goes through to the remote layer.

The layer is one module per job; this one only names what the sources use, so they import from
one place and the layer's parts can change without them:

- ``_urls``: which paths are URLs, of which protocol (``protocol_of``, ``is_url``), and a
  bucket folder's listing walked as a local folder (``Listing``);
- ``_secrets``: secret ``storage_options`` values masked in a repr and scrubbed from text;
- ``_client``: ``Remote``, one protocol's filesystem per process and every request made through
  it: concurrent, coalesced ranged reads, listings, sizes and etags, retried;
- ``_transport``: who sends a read's GETs, obstore where the options say all it needs, else
  fsspec (``ObstoreGets``, ``obstore_gets``);
- ``_failures``: the error rules of every call (what is retried, what ends it at once, the
  error each becomes; ``from_backend``, ``refused``);
- ``_ahead``: the samples of the tasks queued behind a worker's task, fetched with it or in
  the background while it decodes (``Fetched``; ``AHEAD``, ``AHEAD_BYTES``);
- ``_spans``: the bytes ranged requests read, kept and served again (the span cache);
- ``_round_trip``: what one more request costs, and so which ranges share one (``coalesce``);
- ``_remote_settings``: ``SHMAUG_REQUEST_TIMEOUT_S``, ``SHMAUG_SPAN_CACHE_MB`` and
  ``SHMAUG_TRANSPORT``, read there only.

It re-exports classes and functions, never a tunable constant: a constant is patched (by a test
or a benchmark) where it is defined, and a copy here would not reach its readers.
"""

from __future__ import annotations

from ._ahead import Fetched
from ._client import Remote
from ._failures import from_backend
from ._urls import Listing, is_url, protocol_of

__all__ = ["Fetched", "Listing", "Remote", "from_backend", "is_url", "protocol_of"]

