"""The worker processes: started safely, fed task slices, watched, replaced and stopped.

Seen from the parent:

- ``pool``: ``WorkerPool``, N persistent processes: feed, collect, replace the dead, resize,
  stop (NOTE [shutdown order], NOTE [resizing]);
- ``inline``: ``InlinePool``, the same slice loop in the main process (``workers=0``);
- ``launch``: starting one worker without the known hazards of fork and spawn;
- ``_retiring``: workers a resize removed, while they finish the tasks they hold;
- ``reports``: the error a failed, dead or overdue task becomes, and the stall warning;
- ``probe``: sample 0, made by a worker before the ring exists, sizes it;
- ``shipping``: the user's code pickled for them, by value from a module that would load a
  framework in each fresh worker.

Shared by both sides:

- ``wire``: the messages on a worker's two pipes, one frozen type per result;
- ``status``: each worker's row of figures in a shared block.

Inside a worker:

- ``worker``: its set-up, the blocks it maps, its main loop; the bounded wait both sides use;
- ``runner``: ``SliceRunner``, the slice loop: a task's samples loaded, augmented, written
  into the ring;
- ``lazy_imports``: the heavy frameworks imported lazily, when an op first uses them (the
  facade asks it whether Keras loaded: a worker's ``Sequence`` stands on a Keras-free base until
  then).
"""
