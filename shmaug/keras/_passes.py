"""Which planned batch answers each ask of a ``keras.utils.PyDataset``: Keras' passes over the
indices, each bound to one epoch of shmaug's.

Pure bookkeeping: no Keras, no I/O, no threads. The facade (``sequence.py``) tells who asks
(``caller``: the loop asking) and when Keras starts drawing batches to build the model;
``Passes`` says which batch ``(epoch, batch)`` answers, and whether a pass took it.

A *pass* is one run of one loop over the indices. Keras makes a fresh generator for every pass
(``PyDatasetAdapter._get_iterator``), asks each index once per pass, in random order under
``fit(shuffle=True)``, and keeps one pass across several of its epochs when
``steps_per_epoch`` is below ``len``. The rules:

1. A pass claims the next epoch of shmaug's and takes its batches in order: its k-th new index
   gets batch k of the epoch's shuffled order, or, for a pass that reads the epoch in the
   dataset's order (``evaluate``, ``predict``, ``shuffle=False``: the facade decides per pass,
   as Keras does), index i gets batch i of that order. Each loop has
   its own pass, so a second loop (``validation_data`` that is the training Sequence itself,
   ``next(iter(seq))`` in a callback, tf.data still pulling from an iterator Keras dropped)
   takes an epoch of its own and never moves another loop's pass. A loop that has taken a
   whole epoch, or asks an index again, goes on with a new pass.
2. An ask from no loop (Keras' signature probes on TensorFlow, a look by hand, a callback)
   moves nothing: it gets the batch the latest unfinished pass (``Passes._latest``) bound to
   that index, else the one that pass (or, with none, the next pass) will give next, so the
   pass that follows takes the same batch and the facade serves it from its cache. A pass
   that has just taken its epoch's last batch still answers looks until its loop is over
   (``loop_over``: a ``for`` over the Sequence ends, ``on_epoch_end``) or another pass asks:
   Keras trains on the batches it fetched ahead, and a loop's body runs after its last ask.
3. The pass Keras runs to build an unbuilt model (JAX and torch draw one batch, TensorFlow
   under a distribution strategy as many as tf.data pulls ahead, up to a whole epoch; then
   ``EpochIterator.reset()`` drops it) borrows the next epoch instead of claiming it: the first
   real pass gets that epoch, from its first batch.
4. An epoch whose pass was dropped unfinished (a fit cut by Ctrl-C, an error,
   ``stop_training``, or ending mid-pass under ``steps_per_epoch``) is over: the next pass
   claims the next one, whole.
5. A hand loop (``seq[i]`` for each batch, then ``seq.on_epoch_end()``: Keras' Sequence
   contract, as custom training loops use it) asks from no loop, so its asks are looks (rule
   2) and take the next epoch's batches, or go on with a restored pass or one whose loop is
   over (broken off); ``on_epoch_end`` then ends that epoch, so the next loop by hand gets
   the epoch after (never back: a pass may have claimed a later one since). Keras calls
   ``on_epoch_end`` after its own passes too, but by then a pass has taken the looks' epoch
   (it begins by claiming it), so nothing more moves. (Keras' own pass left unfinished, a
   fit cut short by ``steps_per_epoch``, is no loop known to be over: loops by hand after
   it replay it.)
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

Key = tuple[int, int, bool]  # (epoch, planned batch, read in the dataset's order): what the
# engine makes
_LOOPS_KEPT = 8  # loops remembered; an older one that asks again takes a new epoch


@dataclass
class _Pass:
    """One run of one loop over the indices, in one epoch."""

    caller: Any  # the loop asking (held, so its identity cannot be reused); None: restored
    building: bool  # Keras runs it to build the model (rule 3)
    epoch: int  # the epoch it takes batches of
    next: int  # the batch its next new index gets (shuffled); in the dataset's order, a count
    in_order: bool  # it reads its epoch in the dataset's order (index i gets batch i)
    bindings: dict[int, Key] = field(default_factory=dict)  # index -> batch, this pass
    asked: int = 0  # the number of its last ask (``Passes._asks``)
    over: bool = False  # its loop is over (a ``for`` loop ended or broken off)


class Passes:
    """The passes in progress and the epoch the next one claims, ``batches`` per epoch."""

    def __init__(self, batches: int) -> None:
        self.batches = batches
        self.epoch = 0  # invariant: the epoch the next pass claims
        self.cursor = 0  # invariant: the batch the next pass starts at (0 unless seek)
        self._live: OrderedDict[int, _Pass] = OrderedDict()  # id(caller) -> its pass, by age
        self._asks = 0  # asks taken by passes so far
        self._sought = 0  # ``_asks`` at the last seek: passes asking only before it are over
        self._restored: _Pass | None = None  # from a state: the next loop resumes it
        self._looks: dict[int, Key] = {}  # index -> batch a pass will give it (rule 2)
        self._building = False  # the next pass to begin is Keras' build pass (rule 3)
        self._hand: Key | None = None  # the last batch a look drew from no pass (rule 5)
        self._finished: _Pass | None = None  # the pass that took the last batch asked, and
        # its epoch's last, while its loop may still be on it (rule 2)
        self.taken = 0  # invariant: batches taken by the pass that took the last one
        self.last: tuple[Key, bool] | None = None  # the last answer (for recorders in tests)

    def building(self, flag: bool) -> None:
        """Keras begins (True) or does not begin (False) an epoch to build the model: the next
        pass to begin is its build pass, or not."""
        self._building = flag

    def begins(self, caller: Any, index: int) -> bool:
        """Whether ``caller``'s ask of ``index`` begins a pass: it is a loop with no pass yet,
        or one going round again (its pass took a whole epoch, or asked ``index`` already)."""
        if caller is None:
            return False
        p = self._pass_of(caller)
        return p is None or self._renews(p, index)

    def ask(self, index: int, caller: Any, in_order: bool) -> tuple[Key, bool]:
        """The batch answering ``index``, and whether a pass took it (False: a look, or
        Keras' build pass, which only borrows its epoch). ``in_order``: whether a pass that
        begins now (or, with none in progress, the one a look stands for) reads its epoch in
        the dataset's order; a pass in progress keeps its own order."""
        if caller is None:
            self.last = self._look(index, in_order), False
            return self.last
        p = self._pass_of(caller)
        if p is None or self._renews(p, index):
            p = self._begin(caller, in_order)
        key = p.bindings[index] = (p.epoch, index if p.in_order else p.next, p.in_order)
        p.next += 1
        p.asked, self._asks = self._asks, self._asks + 1
        self.taken = len(p.bindings)
        self._finished = p if self._done(p) and not p.building else None
        self.last = key, not p.building
        if self._looks:
            self._looks = {i: k for i, k in self._looks.items() if k != key}
        return self.last

    def seek(self, epoch: int, batch: int) -> None:
        """The next pass claims ``epoch`` from batch ``batch`` on; passes in progress go on
        with their own epochs (a loop Keras has dropped never asks again)."""
        self.epoch, self.cursor = epoch, batch
        self._sought = self._asks
        self._restored = self._finished = None
        self._looks.clear()
        self._hand = None

    def epoch_ended(self) -> None:
        """``on_epoch_end()``: a hand loop's epoch (looks drawn from no pass) is over, and the
        next pass or look takes the epoch after it; without such looks, nothing moves (rule 5)."""
        self._finished = None
        if self._hand is not None:  # (never back: a pass may have claimed an epoch since)
            self.seek(max(self._hand[0] + 1, self.epoch), 0)

    def loop_over(self, caller: Any = None) -> None:
        """``caller``'s loop is over (None: Keras' epoch, ``on_epoch_end``): a pass of it that
        took its epoch's last batch answers no more looks (rule 2), and one it left unfinished
        (``break``, ``next(iter(seq))``) is gone on with by the looks of loops by hand after
        it as a restored one is (rule 5): their ``on_epoch_end`` ends its epoch."""
        finished = self._finished
        if finished is not None and caller in (None, finished.caller):
            self._finished = None
        p = self._pass_of(caller) if caller is not None else None
        if p is not None:
            p.over = True

    @property
    def current_epoch(self) -> int:
        """The epoch of the pass a loop is on (one that has taken its last batch included),
        else of the next pass: what ``Sequence.epoch`` reads."""
        finished = self._finished  # (read once: tf.data's threads may clear it)
        return finished.epoch if finished is not None else self.position[0]

    @property
    def position(self) -> tuple[int, int]:
        """Where the latest unfinished pass stands (its next batch), else where the next pass
        starts: what ``state_dict`` saves and ``Sequence.epoch`` reads."""
        p = self._latest()
        if p is None:
            return self.epoch, self.cursor
        return p.epoch, len(p.bindings) if p.in_order else p.next

    @property
    def bindings(self) -> dict[int, Key]:
        """The latest unfinished pass's bindings (empty when there is none)."""
        p = self._latest()
        return dict(p.bindings) if p is not None else {}

    @property
    def in_order(self) -> bool:
        """Whether the latest unfinished pass reads its epoch in the dataset's order."""
        p = self._latest()
        return p is not None and p.in_order

    @property
    def hand_looks(self) -> dict[int, Key]:
        """The looks a loop by hand has drawn from the epoch no pass has claimed (rule 5),
        shuffled: the next such look, or the next pass, goes on after them."""
        if self._hand is None or self._latest() is not None:
            return {}
        return dict(self._looks)

    def restore(self, epoch: int, cursor: int, bindings: dict[int, Key],
                in_order: bool = False, looks: dict[int, Key] | None = None) -> None:
        """Stand where a saved state stood: its pass (if it had one) is resumed by the next
        loop that is not Keras' build. A shuffled one goes on whatever indices that loop
        asks; a loop resuming one in order should ask only the indices it has not asked
        (``to_tf_dataset`` and ``for b in seq`` do; a fresh Keras iterator cannot know them).
        ``looks``: a loop by hand's (``hand_looks``), which it goes on after."""
        self.release()
        self.seek(epoch, cursor)
        if bindings:
            self._restored = _Pass(None, False, epoch, cursor, in_order, dict(bindings))
            self.epoch, self.cursor = epoch + 1, 0
        elif looks:
            self._looks, self._hand = dict(looks), max(looks.values())

    @property
    def restored(self) -> dict[int, Key]:
        """The bindings of a restored pass no loop has resumed yet (else empty)."""
        return dict(self._restored.bindings) if self._restored is not None else {}

    def release(self) -> None:
        """Forget the loops (they keep Keras' generators and adapters alive). Rebinds rather
        than clears: another thread may be reading them (``Sequence.close`` takes no lock)."""
        self._live = OrderedDict()

    # -- inside ---------------------------------------------------------------------------------

    def _pass_of(self, caller: Any) -> _Pass | None:
        p = self._live.get(id(caller))
        return p if p is not None and p.caller is caller else None

    def _renews(self, p: _Pass, index: int) -> bool:
        """Whether an ask of ``index`` by ``p``'s loop begins a new pass (rule 1)."""
        return self._done(p) or index in p.bindings

    def _done(self, p: _Pass) -> bool:
        return (len(p.bindings) if p.in_order else p.next) >= self.batches

    def _latest(self) -> _Pass | None:
        """The newest unfinished pass, not a build, that has asked since the last seek and
        that no whole pass has followed but one that may come between its batches: a
        validation pass (in order) between a training pass's (shuffled). A shuffled pass
        followed by a whole shuffled one, or an in-order pass (``evaluate(steps=k)``, a loop
        broken off, a fit cut short) followed by any whole one, was dropped (rule 4). Else
        the restored one."""
        followed: set[bool] = set()  # the orders of the whole passes after (True: in order)
        for p in reversed(self._live.values()):
            if p.building:
                continue
            if self._done(p):
                followed.add(p.in_order)
            else:
                dropped = bool(followed) if p.in_order else (False in followed)
                if not dropped and p.asked >= self._sought:
                    return p
        return self._restored

    def _begin(self, caller: Any, in_order: bool) -> _Pass:
        """A new pass for ``caller``: the restored one, or the next epoch, claimed (rule 1) or,
        for Keras' build, borrowed (rule 3)."""
        building, self._building = self._building, False
        if self._restored is not None and not building:
            p, self._restored = self._restored, None
            p.caller, self._hand = caller, None  # (a look before it was no hand loop's)
            if not p.in_order:  # the loop that asked them is gone: a new one (Keras', or a
                p.bindings = {}  # loop by hand) may ask any index; each new one goes on
        else:
            p = _Pass(caller, building, self.epoch, 0 if in_order else self.cursor, in_order)
            if not building:
                self.epoch, self.cursor = self.epoch + 1, 0
                self._looks.clear()
                self._hand = None
        self._live.pop(id(caller), None)
        self._live[id(caller)] = p
        while len(self._live) > _LOOPS_KEPT:
            self._live.popitem(last=False)
        return p

    def _look(self, index: int, in_order: bool) -> Key:
        finished = self._finished
        if finished is not None:  # (it bound every index)
            return finished.bindings[index]
        p = self._latest()
        if p is not None and index in p.bindings:
            return p.bindings[index]
        epoch, start = (p.epoch, p.next) if p is not None else (self.epoch, self.cursor)
        if p is not None:
            in_order = p.in_order
        if in_order:
            key = (epoch, index, True)
        else:
            key = self._looks.get(index)  # type: ignore[assignment]
            if key is None:
                ahead = start + len(self._looks)  # looks take the next batches in turn
                key = self._looks[index] = (epoch + ahead // self.batches,
                                            ahead % self.batches, False)
        if p is None or p is self._restored or p.over:  # drawn from the epoch no loop is
            # on: a hand loop's (rule 5), or one going on with a restored pass or one whose
            # loop is over (broken off), which it ends too
            self._hand = key if self._hand is None else max(self._hand, key)
        return key


def reads_in_order(*, shuffle: bool | str | None, shuffles: bool, weighted: bool, mixed: bool,
                   adapter: Any, inferring: bool) -> bool:
    """Whether a pass beginning now (or the pass a look stands for) reads its epoch in the
    dataset's order, asked by Keras' ``adapter`` (None: a loop by hand, or a look) of a
    Sequence given ``shuffle`` (``shuffles``: its order shuffles at all; ``weighted``: it
    draws by weight; ``mixed``: it has a mix); ``inferring``: ``evaluate`` or ``predict``
    runs the adapter.

    Keras decides the order per pass, never once per dataset: ``fit``'s training passes
    follow ``fit(shuffle=...)`` (its adapter's ``shuffle``), while ``evaluate``,
    ``predict`` and ``fit``'s validation are never shuffled (their adapters were seen
    beginning an epoch under ``evaluate``/``predict``: ``on_epoch_begin``). A look decides
    nothing: it only names the batch the next pass would serve."""
    if not shuffles and not mixed:
        return True
    if weighted and not (inferring and mixed):
        return False  # a weighted draw has no dataset order: every pass is the draw (but
        # with a mix, an inference pass reads it unmixed: the loader's in-order key)
    if adapter is None:
        return shuffle is None  # loops by hand: in order unless shuffle=True
    if inferring:
        return True
    return shuffle is None and not getattr(adapter, "shuffle", False)
