"""From the workers to the consumer: the output ring, the batches in flight, and how each is
handed over (copied out, or lent while the consumer holds it).

- ``ring``: ``OutputRing``, K preallocated batch slots in shared memory, with generations;
- ``depth``: how many slots K is by default (enough for every worker), within a memory bound;
- ``pinned``: ``pin_memory``: the ring page-locked with the CUDA driver (ctypes, no
  framework);
- ``prefetch``: ``Prefetcher``, which batch is in flight in which slot, and whose answers are
  whose;
- ``copier``: batch copies made ahead of the consumer, on one background thread;
- ``recycle``: batches made again in the memory of batches nobody holds any more;
- ``gather``: batches gathered straight from the data, for a loader with nothing to augment;
- ``stats``: the figures ``Loader.stats()`` reports;
- ``presses``: Ctrl-C noted wherever it lands, so a wait for a batch off the main thread (on
  tf.data's thread, under TensorFlow's ``fit``) ends too.
"""
