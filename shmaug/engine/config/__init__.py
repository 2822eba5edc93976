"""What a loader was asked, checked once before anything starts, and how it describes itself.

- ``options``: a loader's arguments in three frozen groups, and ``Options``, them resolved
  against the data (what ``Loader`` and ``Sequence`` build from);
- ``checks``: checks of the settings (sizes, counts, the seed, the start method, a resume
  state), each message naming the argument, the value and the fix;
- ``inputs``: checks of the data (images, targets, value ranges, sample 0's output);
- ``describe``: ``repr()`` of a Loader and a Sequence: the settings as given and as resolved.
"""
