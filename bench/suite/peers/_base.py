"""What every suite contender shares: its inputs, its worker pids and the defaults of the protocol.

Owns ``Base`` only. A family module (``bench/suite/peers/<family>.py``) subclasses it and adds
``epoch()``; the measurement itself (timing, exactly-once checks, memory) is the child's,
in ``bench/suite/child.py``. Nothing here imports TensorFlow, Keras or torch.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from bench.common.harness import pool_children


class Base:
    """A contender over ``x`` (images) and ``y`` (per-sample targets), batch size ``bs``.

    ``augment`` is the workload's ``fn(image, rng)`` (None: deliver ``x`` as stored);
    ``out_dtype`` the delivered sample's dtype; ``workers`` / ``method`` the process count and
    start method asked of contenders that have workers.
    """

    # Keras' enqueuer serves batches queued in an abandoned epoch at the start of the next
    # one (stale, repeated samples): its warm-up must be a whole epoch.
    full_warmup = False

    def __init__(self, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
                 workers: int, method: str | None) -> None:
        self.x, self.y, self.bs, self.augment, self.out_dtype = x, y, bs, augment, out_dtype
        self.workers, self.method = workers, method
        self.nb = -(-len(x) // bs)  # batches per epoch, the last one partial
        self._before = set(pool_children())  # children that are not this contender's

    def epoch(self) -> Iterator[Any]:
        """One epoch of ``(xb, yb)`` numpy batches, in order."""
        raise NotImplementedError

    def pids(self) -> list[int]:
        """This contender's worker processes (children started since it was built)."""
        return [p for p in pool_children() if p not in self._before]

    def keras_data(self) -> Any:
        """What ``Model.fit`` is given (None when this contender has no Keras form)."""
        return None

    def close(self) -> None:
        pass
