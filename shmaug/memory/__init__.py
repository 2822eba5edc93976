"""Shared memory that outlives no one: named blocks, their picklable handles, and attaching.

The engine puts the dataset, the ring and its tables here, and the sources their path and
record tables; workers attach by handle, never copy. Used by both through ``store``'s names.

- ``store``: ``SharedStore`` (create, attach, close, unlink; memory maps), ``ArrayHandle``,
  the /dev/shm capacity check;
- ``_tracker``: shmaug's own resource tracker: a killed owner's blocks unlinked, quietly;
- ``_leftovers``: segments whose owner died with its tracker, swept at the next start;
- ``table``: ``FlatTable``, millions of rows in flat blocks handed to workers by name (the
  base of the sources' path and record tables);
- ``ragged``: ``RaggedImages``, a list of images of several sizes in one block, read as a
  sample source.

It imports ``shmaug.platform`` and ``shmaug.errors`` only.
"""
