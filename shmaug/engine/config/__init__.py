"""What a loader was asked, checked once before anything starts, and how it describes itself.

- ``options``: a loader's arguments in three frozen groups, and ``Options``, them resolved
  against the data (what ``Loader`` and ``Sequence`` build from);
- ``checks``: checks of the settings (sizes, counts, the seed, the start method, a resume
  state), each message naming the argument, the value and the fix;
- ``inputs``: checks of the data (images, targets, sample 0's output);
- ``ranks``: the other processes of a distributed run: a loader reading the whole dataset
  in each, ranks whose shards of an epoch do not split it (seeds, shard indices);
- ``ranges``: the value range the images lie in: given, taken, checked against the data;
- ``tree``: ``y`` as a tree: targets found by name, read at a path, gathered per batch;
- ``describe``: ``repr()`` of a Loader and a Sequence: the settings as given and as resolved.
"""
