"""What one more request costs this process (``RoundTrip``, learnt from its requests), and so
which byte ranges of an object share one request (``coalesce``).

``_client.Remote`` times its requests and asks both here before each round of ranged reads;
which bytes are fetched changes with the measurement, what is delivered does not.
"""

from __future__ import annotations

import threading
from typing import Sequence

# Byte ranges of one object closer than the gap are read in one request. Reading a gap costs
# gap / bandwidth, another request its round trip, so the gap grows with the round trip this
# process measures (``RoundTrip``), between these bounds.
GAP = 64 * 1024  # before any measurement, and the least: a fast or local store
MAX_GAP = 4 * 1024 * 1024  # the most: one request never pulls megabytes it does not need
BANDWIDTH = 100e6  # bytes/s assumed of one request's stream (a bucket gives 50-200 MB/s)
# Nor does coalescing chain ranges into one long serial stream where several requests in
# flight would read them faster: a request spans at most 9 round trips' worth of bytes (90% of
# its time transferring), between these bounds. Arrow sizes its reads by the same rule.
MIN_SPAN, MAX_SPAN = 1 << 20, 64 << 20


class RoundTrip:
    """What one more request costs this process, learnt from its requests: the seconds beyond
    the transfer itself (time to first byte, the client's and the server's work per request),
    a moving average. Reading ``g`` bytes through costs ``g / BANDWIDTH``, so a gap is cheaper
    read than split while ``g < overhead * BANDWIDTH``. Which bytes are fetched changes; what
    is delivered does not."""

    def __init__(self) -> None:
        self.overhead_s: float | None = None
        self._lock = threading.Lock()

    def observe(self, seconds: float, size: int) -> None:
        sample = max(0.0, seconds - size / BANDWIDTH)
        with self._lock:
            last = self.overhead_s
            self.overhead_s = sample if last is None else 0.8 * last + 0.2 * sample

    def gap(self) -> int:
        if self.overhead_s is None:
            return GAP
        return int(min(MAX_GAP, max(GAP, self.overhead_s * BANDWIDTH)))

    def span(self) -> int:
        """The most one coalesced request spans: 9 gaps (90% of its time transferring)."""
        return min(MAX_SPAN, max(MIN_SPAN, 9 * self.gap()))


def coalesce(ranges: Sequence[tuple[int, int]], gap: int = GAP, span: int | None = None
             ) -> list[tuple[int, int, list[int]]]:
    """``(start, stop, [positions in ranges])`` per request: ranges sorted by offset and merged
    when at most ``gap`` bytes apart (reading the gap costs less than another round trip) and
    the request then spans at most ``span`` bytes (None: any)."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    out: list[tuple[int, int, list[int]]] = []
    for i in order:
        offset, size = int(ranges[i][0]), int(ranges[i][1])
        if out and offset - out[-1][1] <= gap and (
                span is None or max(out[-1][1], offset + size) - out[-1][0] <= span):
            start, stop, members = out[-1]
            out[-1] = (start, max(stop, offset + size), members + [i])
        else:
            out.append((offset, offset + size, [i]))
    return out

