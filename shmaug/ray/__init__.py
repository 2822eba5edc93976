"""shmaug's workers on other machines, through Ray (``pip install "shmaug[ray]"``).

A batch is a pure function of (seed, epoch, index), so any node can make any batch, bit for bit.
``Workers`` is what ``Loader(workers=...)`` and ``Sequence(workers=...)`` take to have actors
on Ray nodes make the batches with shmaug's own pool there; the trainer keeps the plan and its
ring. Ray places, moves and restarts; shmaug plans and checks (see [Ray](../ray.md)). Nothing
in the engine imports this package: it is imported only when asked for.

- ``workers``: ``Workers``, the fleet asked for (nodes, cores per node, where);
- ``fleet``: ``RayFleet``, the started makers: dispatch, answers, lost makers' batches re-issued;
- ``maker``: ``Maker``, the actor: a local ``Loader`` of the shipped options on its node;
- ``data``: ``AugmentBatches``, a shmaug pipeline inside Ray Data's ``map_batches``, with the same
  per-sample streams as a ``Loader``.
"""

from .data import AugmentBatches
from .workers import Workers

__all__ = ["AugmentBatches", "Workers"]
