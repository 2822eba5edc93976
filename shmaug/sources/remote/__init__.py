"""Samples in object storage (s3://, gs://, https://...): the remote layer, and its door.

The rest of ``sources/`` imports what it uses from here (``Remote``, ``Fetched``, ``Listing``,
``is_url``, ``protocol_of``, ``from_backend``, ``few``, ``shown_url``, and the records of
``_kept``), so
the layer's parts can change without them.
It re-exports classes and functions, never a tunable constant: a constant is patched (by a
test or a benchmark) where it is defined, and a copy here would not reach its readers.

- ``_client``: ``Remote``, one protocol's filesystem per process and every request made
  through it: concurrent, coalesced ranged reads, listings, sizes and etags, retried;
- ``_transport``: who sends a read's GETs, obstore where the options say all it needs, else
  fsspec;
- ``_failures``: the error rules of every call (what is retried, what ends it at once, the
  error each becomes);
- ``_urls``: which paths are URLs, of which protocol, and a bucket folder's listing walked as
  a local folder (``Listing``);
- ``_secrets``: secret ``storage_options`` values masked in a repr and scrubbed from text, and
  a URL's own secrets (a password, a presigned query) masked where it is shown;
- ``_spans``: the bytes ranged requests read, kept and served again (the span cache);
- ``_round_trip``: what one more request costs, and so which ranges share one;
- ``_settings``: ``SHMAUG_REQUEST_TIMEOUT_S``, ``SHMAUG_SPAN_CACHE_MB``, ``SHMAUG_TRANSPORT``
  and ``SHMAUG_OFFLINE``, read there only;
- ``_kept``: what a bucket held (a folder's listing, a source's shards and their identities),
  kept in a local folder for a run without it;
- ``ahead``: ``Fetched``, the samples of the tasks queued behind a worker's task, fetched with
  it or in the background while it decodes (``AHEAD``, ``AHEAD_BYTES``);
- ``bucket``: image files in a bucket as a reader's table: a task's objects fetched together.
"""

from __future__ import annotations

from .ahead import Fetched
from ._client import Remote
from ._failures import from_backend
from ._kept import record_of, without_bucket, write_record
from ._secrets import shown_url
from ._urls import Listing, few, is_url, protocol_of

__all__ = ["Fetched", "Listing", "Remote", "few", "from_backend", "is_url", "protocol_of",
           "record_of", "shown_url", "without_bucket", "write_record"]

