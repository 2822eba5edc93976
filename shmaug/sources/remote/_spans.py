"""The span cache: the bytes this process's ranged requests read, kept (``Spans``) so that a
later range inside them is served without a request.

Bounded by ``SHMAUG_SPAN_CACHE_MB`` (``_settings``), per process; ``_client.Remote``
keeps one per process (a fork starts with its own, empty) and decides what to read; this
module only keeps and finds bytes.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict

from ._settings import settings


class Spans:
    """The bytes this process's ranged requests read, by object, up to the span cache's bytes,
    the least recently used span dropped first. Spans of one object that overlap are merged,
    so they stay disjoint and a range is looked up in one step."""

    def __init__(self) -> None:
        self._data: OrderedDict[tuple[str, int], bytes] = OrderedDict()  # (url, start) -> bytes
        self._starts: dict[str, list[int]] = {}  # url -> the starts of its spans, sorted
        self._size = 0
        self._lock = threading.Lock()

    def find(self, url: str, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``offset`` of ``url`` if the span kept there holds them."""
        with self._lock:
            starts = self._starts.get(url, [])
            at = bisect.bisect_right(starts, offset)
            if not at:
                return None
            start = starts[at - 1]
            data = self._data[(url, start)]
            if offset + size > start + len(data):
                return None
            self._data.move_to_end((url, start))
            return data[offset - start: offset - start + size]

    def keep(self, url: str, start: int, data: bytes) -> None:
        """Keep ``data``, read at ``start`` of ``url``, merged with the spans it overlaps
        (spans that only touch stay apart: a record never straddles two requests' bytes)."""
        stop = start + len(data)
        bound = settings().span_cache
        if len(data) > bound or not data:
            return
        with self._lock:
            starts = self._starts.setdefault(url, [])
            last = first = bisect.bisect_left(starts, stop)  # spans that start before its end
            while first and starts[first - 1] + len(self._data[(url, starts[first - 1])]) \
                    > start:  # ...and end after its start (disjoint: contiguous)
                first -= 1
            overlapped = [(s0, self._data.pop((url, s0))) for s0 in starts[first:last]]
            for _, old in overlapped:
                self._size -= len(old)
            low = min([start] + [s0 for s0, _ in overlapped])
            high = max([stop] + [s0 + len(old) for s0, old in overlapped])
            if overlapped and high - low <= bound:  # one copy, only where they overlap
                merged = bytearray(high - low)
                for s0, piece in overlapped + [(start, data)]:
                    merged[s0 - low: s0 - low + len(piece)] = piece
                start, data = low, bytes(merged)
            starts[first:last] = [start]  # (merged too large: the new piece replaces them)
            self._data[(url, start)] = data
            self._size += len(data)
            while self._size > bound:
                (gone_url, gone), dropped = self._data.popitem(last=False)
                self._size -= len(dropped)
                kept = self._starts[gone_url]
                del kept[bisect.bisect_left(kept, gone)]
                if not kept:
                    del self._starts[gone_url]

