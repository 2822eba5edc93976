"""Pure planning: which samples make each batch of each epoch, and how a batch is cut into
tasks. No I/O, no process: a function of (seed, epoch) and the settings.

- ``schedule``: epoch orders (shuffled, or drawn by weight), batches, task slices, shards;
- ``blocks``: ``shuffle="blocks"``, an order that reads a few storage shards at a time;
- ``sampling``: ``sampling_weights`` and ``samples_per_epoch``, checked and resolved;
- ``cursor``: where a loader's iteration stands (what ``state_dict`` saves).
"""
