"""The engine: batches of augmented samples made by a persistent worker pool over shared memory.

Public: ``Loader`` (``shmaug.engine.loader``). The rest is internal to shmaug: the facade and
the sources use the engine through the names its modules give without an underscore. Read in
the order one batch travels ([Architecture](../architecture.md)):

- ``loader``: ``Loader``, the front door: what was asked (``config``), what is started for it
  (``running``), which batch comes next; ``start`` and ``lend``, the facade's door;
- ``config``: the options, checked once before anything starts, and how a loader describes
  itself;
- ``source``: what the engine asks of a sample source (a length and ``load(i)``, and each
  optional capability), as protocols the sources are held to;
- ``plan``: pure planning: epoch orders, batches, task slices, shards, where a pass stands;
- ``running``: what a loader starts and stops: the store, the ring, the workers, the prefetch;
- ``workers``: the worker processes: their start, their slice loop, their messages, their
  deaths and resizing;
- ``handoff``: the output ring and the batches in flight, copied out or lent to the consumer;
- ``autoscale``: ``workers="auto"``, the pool sized between epochs;
- ``remote``: workers elsewhere (``shmaug.ray``): what the engine asks of them, and the pool
  that stands for them in the trainer.

The engine imports ``shmaug.ops``, ``shmaug.memory`` and the base every part may use
(``errors``, ``seeding``, ``platform``, ``deferred``, ``resample``, ``whole_decodes``), never
Keras, TensorFlow, a source's optional library, or the facade (``tests/unit/test_layers.py``).
"""

from .loader import Loader

__all__ = ["Loader"]
