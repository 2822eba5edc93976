"""The engine: batches of augmented samples made by a persistent worker pool over shared memory.

Public: ``Loader`` (``shmaug.engine.loader``). Everything else here is internal, and its
underscore says so. Where each piece sits in the flow of one batch
([Architecture](../architecture.md)):

- ``_store``: named shared-memory blocks and memory-mapped files, attached by handle;
  ``_leftovers`` sweeps segments a killed run left behind.
- ``_schedule``: pure planning: epoch orders, batches, task slices, shards.
- ``_ring``: the output slots workers write batches into; ``_pinned`` page-locks them for the
  GPU (``pin_memory``).
- ``_pool``, ``_launch``, ``_retiring``: the worker processes, their start, death and resizing;
  ``_worker`` is what runs inside each, ``_runner`` the slice loop it runs (and ``workers=0``
  inline), ``_wire`` the messages between them, ``_status`` each worker's shared figures.
- ``_prefetch``, ``_copier``, ``_recycle``: keep batches in flight and copy them out.
- ``_autoworkers``, ``_autotune``: ``workers="auto"``.
- ``_checks`` (the settings), ``_inputs`` (the data), ``_describe`` (reprs), ``_platform``
  (platform quirks).

The engine imports ``shmaug.ops``, ``shmaug.seeding`` and ``shmaug.errors``, never Keras,
TensorFlow, a source's optional library, or the facade (``tests/unit/test_layers.py``).
"""

from .loader import Loader

__all__ = ["Loader"]
