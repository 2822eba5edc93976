"""Secrets kept out of sight: which ``storage_options`` values are secret, masked for a repr
(``masked``) and listed for removal from any text (``secrets_of``, which ``_client.Remote.scrub``
uses on every message and log line it builds); a URL's own (a password before its host, the
values of its query: a presigned URL's signature) masked wherever it is shown (``shown_url``).

Judged by key name (``secret``, ``token``, ``key``, ...), bar the options known to be public
(``endpoint_url``, ``anon``, ...), at every depth of nested dicts and lists.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import MASK, scrubbed_urls, shown_url

__all__ = ["MASK", "masked", "scrubbed_urls", "secrets_of", "shown_url"]

# Values shorter than this are not looked for in text: a local server's "test" or "k" is no
# secret, and masked wherever it occurs it garbled the errors that name the bucket and its
# URL ("The specified buc***et does not exist"). A cloud's keys are 20 to 40 characters.
SHORTEST = 8
_SECRET = re.compile(r"secret|password|passwd|token|credential|session|key|auth|signature",
                     re.IGNORECASE)
_PUBLIC = {"endpoint_url", "region_name", "anon", "use_ssl", "requester_pays", "project"}


def masked(options: Any) -> Any:
    """``options`` with every secret-looking value replaced by ``***`` (nested dicts too)."""
    if isinstance(options, dict):
        return {k: (masked(v) if isinstance(v, (dict, list, tuple)) or k in _PUBLIC
                    or not _SECRET.search(str(k)) else MASK) for k, v in options.items()}
    if isinstance(options, (list, tuple)):
        return type(options)(masked(v) for v in options)
    return options


def secrets_of(options: Any) -> list[str]:
    """The secret values in ``options`` of ``SHORTEST`` characters or more, longest first
    (what ``scrub`` removes from text)."""
    found: list[str] = []
    if isinstance(options, dict):
        for k, v in options.items():
            if isinstance(v, (dict, list, tuple)):
                found += secrets_of(v)
            elif k not in _PUBLIC and _SECRET.search(str(k)) and isinstance(v, str) and \
                    len(v) >= SHORTEST:
                found.append(v)
    elif isinstance(options, (list, tuple)):
        for v in options:
            found += secrets_of(v)
    return sorted(set(found), key=len, reverse=True)

