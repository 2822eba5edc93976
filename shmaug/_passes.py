"""Which planned batch answers each ask of a ``keras.utils.PyDataset``: Keras' passes over the
indices, bound to shmaug's stream of epochs.

Pure bookkeeping: no Keras, no I/O, no threads. The facade (``sequence.py``) tells who asks
(``caller``: the loop asking) and when Keras starts drawing batches to build the model;
``Passes`` says which batch ``(epoch, batch)`` answers, and whether the ask moved the stream.

The stream is shmaug's batches, epoch after epoch: (0, 0), (0, 1), ... (0, B-1), (1, 0), ...
A *pass* is one run of one loop over the indices. Keras makes a fresh generator for every pass
(``PyDatasetAdapter._get_iterator``), asks each index once per pass, in random order under
``fit(shuffle=True)``, and keeps one pass across several of its epochs when
``steps_per_epoch`` is below ``len``. The rules:

1. A pass takes the stream in order: its k-th new index gets the stream's next batch
   (``shuffle=True``), or index i gets batch i of the stream's epoch (``shuffle=False``). The
   stream's epoch ends after B batches. An index asked again by the same loop starts a new
   pass (a loop going round again).
2. An ask from no loop (Keras' signature probes on TensorFlow, a look by hand, a callback)
   moves nothing: it gets the batch the unfinished pass in progress bound to that index, else
   the one the stream will give next (so the pass that follows takes the same batch, and the
   facade serves it from its cache; the probes of each ``fit`` are the next pass's).
3. The pass Keras runs to build an unbuilt model (JAX and torch take one batch, TensorFlow
   under a distribution strategy as many as tf.data pulls ahead, up to a whole epoch; then
   ``EpochIterator.reset()`` drops it) gives its batches back: the next pass starts where it
   started.
4. A pass dropped unfinished otherwise (a fit cut by Ctrl-C, an error, ``stop_training``, or
   ending mid-pass under ``steps_per_epoch``) ends the stream's epoch: the next pass is one
   whole epoch, never the old epoch's leftovers.
5. A loop that was superseded (by a newer one, or by ``seek``) and asks again moves nothing
   (tf.data may still pull from an iterator Keras has dropped).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

Key = tuple[int, int]  # (epoch, planned batch): what the engine makes
_SUPERSEDED_KEPT = 4  # dropped loops remembered (rule 5); older ones cannot be running still


@dataclass
class _Pass:
    """One run of one loop over the indices."""

    caller: Any  # the loop asking (held, so its identity cannot be reused); None: restored
    building: bool  # Keras runs it to build the model (rule 3)
    start: Key  # the stream position when the pass began
    bindings: dict[int, Key] = field(default_factory=dict)  # index -> batch, this pass


class Passes:
    """The stream position and the pass in progress, over ``batches`` batches per epoch."""

    def __init__(self, batches: int, shuffle: bool) -> None:
        self.batches = batches
        self.shuffle = shuffle
        self.epoch = 0  # invariant: the epoch of the stream's next batch
        self.cursor = 0  # invariant: how many batches of that epoch are taken already
        self.current: _Pass | None = None  # the pass in progress
        self._superseded: deque[Any] = deque(maxlen=_SUPERSEDED_KEPT)  # dropped loops
        self._looks: dict[int, Key] = {}  # index -> batch the stream will give next (rule 2)
        self._building = False  # the next pass to begin is Keras' build pass (rule 3)

    def building(self, flag: bool) -> None:
        """Keras begins (True) or does not begin (False) an epoch to build the model: the next
        pass to begin is its build pass, or not."""
        self._building = flag

    def begins(self, caller: Any) -> bool:
        """Whether an ask of ``caller`` begins a new pass."""
        p = self.current
        if caller is None or any(c is caller for c in self._superseded):
            return False
        return p is None or (p.caller is not None and p.caller is not caller)

    def ask(self, index: int, caller: Any) -> tuple[Key, bool]:
        """The batch answering ``index``, and whether a pass took it (False: a look)."""
        if caller is None or any(c is caller for c in self._superseded):
            return self._look(index), False
        p = self.current
        if p is not None and p.caller is None:  # restored from a state: the first loop resumes it
            p.caller = caller
        elif p is None or p.caller is not caller or index in p.bindings:
            self._begin(caller)
        p = self.current
        assert p is not None
        key = p.bindings[index] = (self.epoch, self.cursor if self.shuffle else index)
        if self._looks:
            self._looks = {i: k for i, k in self._looks.items() if k != key}
        self.cursor += 1
        if self.cursor == self.batches:
            self.epoch, self.cursor = self.epoch + 1, 0
        return key, True

    def seek(self, epoch: int, batch: int) -> None:
        """The next pass starts at batch ``batch`` of ``epoch``; the one in progress is over."""
        self._drop_current()
        self.epoch, self.cursor = epoch, batch
        self._looks.clear()

    def restore(self, epoch: int, cursor: int, bindings: dict[int, Key]) -> None:
        """Stand where a saved state stood: its pass (if any) is resumed by the next loop."""
        self.seek(epoch, cursor)
        if bindings:
            self.current = _Pass(None, False, (epoch, cursor), dict(bindings))

    @property
    def restored(self) -> dict[int, Key]:
        """The bindings of a restored pass no loop has resumed yet (else empty)."""
        p = self.current
        return dict(p.bindings) if p is not None and p.caller is None else {}

    @property
    def taken(self) -> int:
        """Batches the pass in progress has taken."""
        return len(self.current.bindings) if self.current is not None else 0

    @property
    def bindings(self) -> dict[int, Key]:
        return dict(self.current.bindings) if self.current is not None else {}

    def release(self) -> None:
        """Forget the loops (they keep Keras' generators and adapters alive)."""
        if self.current is not None:
            self.current.caller = None
        self._superseded.clear()

    # -- inside ---------------------------------------------------------------------------------

    def _begin(self, caller: Any) -> None:
        old = self.current
        if old is not None and old.building and old.bindings:  # rule 3
            self.epoch, self.cursor = old.start
            self._looks.clear()
        elif old is not None and 0 < len(old.bindings) < self.batches and self.cursor:  # rule 4
            self.epoch, self.cursor = self.epoch + 1, 0  # the rest of this epoch: never served
            self._looks.clear()
        self._drop_current(keep=caller)
        self.current = _Pass(caller, self._building, (self.epoch, self.cursor))
        self._building = False

    def _drop_current(self, keep: Any = None) -> None:
        """End the pass in progress; its loop, unless it is ``keep``, is superseded."""
        old = self.current
        if old is not None and old.caller is not None and old.caller is not keep:
            self._superseded.append(old.caller)
        self.current = None

    def _look(self, index: int) -> Key:
        p = self.current
        if p is not None and index in p.bindings and len(p.bindings) < self.batches:
            return p.bindings[index]  # a whole pass is over: a look is about the next one
        if not self.shuffle:
            return (self.epoch, index)
        key = self._looks.get(index)
        if key is None:
            ahead = self.cursor + len(self._looks)  # looks take the next batches in turn
            key = self._looks[index] = (self.epoch + ahead // self.batches, ahead % self.batches)
        return key
