"""Keras epoch k is fed exactly shmaug epoch k, on whichever Keras backend runs the suite.

CI runs this module under TensorFlow, JAX and torch (``KERAS_BACKEND``). A recording model
(tests/_fit.py) keeps what ``train_step`` was really fed, so a batch Keras drew and threw away
(a signature probe, the symbolic build's batch, tf.data pulling ahead) cannot pass for one it
trained on. On JAX and torch, before the facade read which loop asks, 2-4 of 9 epochs fed a
sample twice and skipped another under fit's defaults.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import warnings

import pytest

keras = pytest.importorskip("keras")

import shmaug
from tests import _fit

pytestmark = [
    pytest.mark.keras, pytest.mark.timeout(180),
    # fit(shuffle=True) over shuffle=False data is allowed; it only costs prefetching.
    pytest.mark.filterwarnings("ignore:Keras asks this shmaug.Sequence for batches in random "
                               "order:shmaug.ShmaugWarning"),
]
BACKEND = keras.backend.backend()


@pytest.fixture
def run():
    """A Sequence over tests/_fit's data, its plan, and the recording model's log."""
    made = []

    def start(*, shuffle=True, augment=_fit.mark, seed=5, cls=shmaug.Sequence, **kwargs):
        x, y = _fit.data()
        seq = cls(x, y, batch_size=_fit.BATCH, augment=augment, workers=2,
                              seed=seed, shuffle=shuffle, **kwargs)
        plan = _fit.Plan(x, seed=seed, shuffle=shuffle)
        made.extend([seq, plan])
        log = _fit.Log()
        return seq, plan, log, _fit.model(log)

    yield start
    for thing in made:
        thing.close()


@contextlib.contextmanager
def told(pattern):
    """One ShmaugWarning matching ``pattern``, and no other (pytest.warns would show Keras' and
    torch's own DeprecationWarnings again, as errors)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", shmaug.ShmaugWarning)
        yield
    assert [re.search(pattern, str(w.message)) is not None for w in caught
            if issubclass(w.category, shmaug.ShmaugWarning)] == [True]


def fit(model, seq, log, *, sync=False, callbacks=(), **kwargs):
    extra = [shmaug.EpochSync(seq)] if sync else []
    return model.fit(seq, verbose=0, callbacks=[_fit.EpochTag(log), *extra, *callbacks],
                     **kwargs)


@pytest.mark.parametrize("sync", [False, True], ids=["plain", "EpochSync"])
@pytest.mark.parametrize("keras_shuffle", [True, False], ids=["fit-shuffle", "fit-in-order"])
@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffled", "unshuffled"])
def test_each_keras_epoch_is_one_whole_shmaug_epoch(run, shuffle, keras_shuffle, sync):
    """Two fits on one Sequence, the first building the model (JAX and torch draw a batch
    for that, TensorFlow probes two for the signature): each Keras epoch is fed one whole
    shmaug epoch; epoch k of the first fit is shmaug epoch k; the second fit goes on with the
    next epochs, or (EpochSync) follows Keras' epoch number again."""
    seq, plan, log, model = run(shuffle=shuffle)
    seen = []
    for again in (False, True):
        log.train.clear()
        with told(r"EpochSync moves this Sequence back from its epoch 2 to epoch 0.*"
                  r"initial_epoch=2") if again and sync else contextlib.nullcontext():
            fit(model, seq, log, sync=sync, epochs=2, shuffle=keras_shuffle)
        seen.append([plan.which_epoch(log.train[k]) for k in sorted(log.train)])
    assert seen == ([[0, 1], [0, 1]] if sync else [[0, 1], [2, 3]])
    if shuffle:  # the pass takes the stream in order, whatever the indices Keras asks
        assert log.train[1] == plan.stream(3 if not sync else 1, 0, len(seq))


class OwnEpochHook(shmaug.Sequence):
    def on_epoch_begin(self):  # no super(): Keras' PyDataset asks for none
        self.began = getattr(self, "began", 0) + 1


def test_a_subclass_with_its_own_on_epoch_begin_still_starts_at_epoch_0(run):
    seq, plan, log, model = run(cls=OwnEpochHook)
    fit(model, seq, log, epochs=2)
    assert [plan.which_epoch(log.train[k]) for k in range(2)] == [0, 1]


def test_spawned_workers_feed_fit_the_same_batches(run):
    seq, plan, log, model = run(start_method="spawn")
    fit(model, seq, log, epochs=2)
    assert [b for k in range(2) for b in log.train[k]] == plan.stream(0, 0, 2 * len(seq))


@pytest.mark.parametrize("sync", [False, True], ids=["plain", "EpochSync"])
@pytest.mark.filterwarnings("ignore:Your input ran out of data:UserWarning")  # Keras' own
def test_short_keras_epochs_carry_one_pass_on(run, sync):
    """steps_per_epoch=4 of 6 batches: Keras keeps its pass across epochs (4, then the 2
    left, with its "ran out of data" warning, then a fresh pass), and so does the stream:
    the Keras epochs of one pass together are one whole shmaug epoch."""
    seq, plan, log, model = run()
    fit(model, seq, log, sync=sync, epochs=4, steps_per_epoch=4)
    assert [len(log.train[k]) for k in range(4)] == [4, 2, 4, 2]
    assert plan.which_epoch(log.train[0] + log.train[1]) == 0
    assert plan.which_epoch(log.train[2] + log.train[3]) == 1
    assert log.train[0] + log.train[1] == plan.stream(0, 0, 6)


def test_validation_data_sees_its_whole_epoch_in_order_each_time(run):
    """Each validation run is one pass of the validation Sequence: its next whole epoch, in
    order (the same samples each time; an augmentation, if any, of that epoch)."""
    seq, plan, log, model = run()
    x, y = _fit.data(10)
    with shmaug.Sequence(x, y, batch_size=4, augment=_fit.mark, workers=2, seed=1) as val:
        val_plan = _fit.Plan(x, seed=1, shuffle=False)
        fit(model, seq, log, epochs=2, validation_data=val)
        expected = [[r for b in range(3) for r in val_plan.batch(e, b)] for e in range(2)]
        val_plan.close()
    assert [plan.which_epoch(log.train[k]) for k in range(2)] == [0, 1]
    assert log.evaluated == expected


class Cut(keras.callbacks.Callback):
    """Ends fit during epoch ``epoch`` after batch ``batch``: ``stop_training``, an exception,
    or a real Ctrl-C (SIGINT to this process, which lands wherever the main thread is)."""

    def __init__(self, how, epoch=1, batch=2):
        super().__init__()
        self.how, self.epoch, self.batch = how, epoch, batch
        self.now = -1

    def on_epoch_begin(self, epoch, logs=None):
        self.now = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.now, batch) != (self.epoch, self.batch):
            return
        if self.how == "stop_training":
            self.model.stop_training = True
        elif self.how == "ctrl-c":
            threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGINT)).start()
            threading.Event().wait(5.0)  # the KeyboardInterrupt arrives meanwhile
        else:
            raise RuntimeError("cut")


@pytest.mark.parametrize("sync", [False, True], ids=["plain", "EpochSync"])
@pytest.mark.parametrize("how", ["stop_training", "exception", "ctrl-c", "steps_per_epoch"])
def test_a_fit_cut_short_then_fit_again(run, how, sync):
    """The cut fit trained on part of shmaug epoch 1; the next fit's epochs are whole ones:
    the next ones of the stream (2, 3), or with EpochSync Keras' own numbers (0, 1)."""
    seq, plan, log, model = run()
    error = {"exception": RuntimeError, "ctrl-c": KeyboardInterrupt}.get(how)
    if how == "steps_per_epoch":  # Keras epochs 0 and 1 are one pass, epoch 2 half the next
        fit(model, seq, log, sync=sync, epochs=3, steps_per_epoch=3)
        log.train = {0: log.train[0] + log.train[1], 1: log.train[2]}
    elif error is None:
        fit(model, seq, log, sync=sync, epochs=3, callbacks=[Cut(how)])
    else:
        with pytest.raises(error):
            fit(model, seq, log, sync=sync, epochs=3, callbacks=[Cut(how)])
    assert plan.which_epoch(log.train[0]) == 0
    assert len(log.train[1]) == 3
    log.train.clear()
    # replaying epochs 0 and 1 is told after a fit that ended (stopped, or short epochs);
    # after one cut by an error or Ctrl-C, this is that fit run again: it redoes them
    with told(r"EpochSync moves this Sequence back .* to epoch 0") if sync and error is None \
            else contextlib.nullcontext():
        fit(model, seq, log, sync=sync, epochs=2)
    assert [plan.which_epoch(log.train[k]) for k in range(2)] == ([0, 1] if sync else [2, 3])
    if not sync:  # and what is saved is the next epoch, not the cut one (it was replayed)
        assert seq.epoch == 4 and seq.state_dict()["epoch"] == 4, seq.state_dict()


@pytest.mark.parametrize("before", ["evaluate", "predict", "loop"])
def test_an_in_order_read_broken_off_then_a_whole_fit_saves_the_next_epoch(run, before):
    """After a first fit (epoch 0), evaluate(steps=1), predict(steps=2) or a loop left at its
    first batch takes epoch 1 in the dataset's order; a fit then trains on 2-4, and the state
    saved is epoch 5."""
    seq, plan, log, model = run()
    fit(model, seq, log, epochs=1)  # (built: evaluate and predict need a built model)
    if before == "evaluate":
        model.evaluate(seq, steps=1, verbose=0)
    elif before == "predict":
        model.predict(seq, steps=2, verbose=0)
    else:
        for _ in seq:
            break
    log.train.clear()
    fit(model, seq, log, epochs=3)
    assert [plan.which_epoch(log.train[k]) for k in range(3)] == [2, 3, 4]
    assert seq.epoch == 5 and seq.state_dict()["epoch"] == 5, seq.state_dict()


def test_an_op_that_failed_once_then_fit_again_sees_whole_epochs(run, tmp_path, monkeypatch):
    """A worker error ends a fit mid-epoch (no shuffling: sample 7 is in batch 1, asked
    second); the next fit on the same Sequence, the op fixed, trains on whole epochs."""
    monkeypatch.setenv("SHMAUG_TEST_FAILED_ONCE", str(tmp_path / "failed"))
    seq, plan, log, model = run(augment=_fit.fails_at_sample_7_once, shuffle=False)
    with pytest.raises(shmaug.WorkerError, match="sample 7 is broken"):
        fit(model, seq, log, epochs=2, shuffle=False)
    # On TensorFlow the signature probe of batch 1 meets the error: no pass took a batch, so
    # the stream has not moved. Elsewhere the pass took batches 0 and 1: epoch 0 is over.
    first = 0 if BACKEND == "tensorflow" else 1
    assert len(log.train.get(0, [])) == first
    log.train.clear()
    fit(model, seq, log, epochs=2)
    assert [plan.which_epoch(log.train[k]) for k in range(2)] == [first, first + 1]


@pytest.mark.parametrize("sync", [False, True], ids=["plain", "EpochSync"])
def test_backup_and_restore_resumes_with_keras_epoch_numbers(run, tmp_path, sync):
    """A fit that dies in epoch 1 and is restarted with BackupAndRestore (a new Sequence and
    model, as in a new process): Keras restarts epoch 1. With EpochSync that epoch is fed
    shmaug epoch 1 again, as the uninterrupted run; without it each epoch is still whole
    (the new Sequence starts its stream at 0)."""
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    seq, plan, log, model = run()
    with pytest.raises(RuntimeError):
        fit(model, seq, log, sync=sync, epochs=3, callbacks=[backup, Cut("exception")])
    seq.close()
    seq, plan, log, model = run()
    restore = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    if sync:
        fit(model, seq, log, sync=sync, epochs=3, callbacks=[restore])
    else:  # told, as it restarts at Keras' epoch 1 with the Sequence's epoch 0
        with told(r"begins at Keras' epoch 1 .* own epoch 0.*shmaug\.EpochSync\(seq\)"):
            fit(model, seq, log, sync=sync, epochs=3, callbacks=[restore])
    assert sorted(log.train) == [1, 2]
    assert [plan.which_epoch(log.train[k]) for k in (1, 2)] == ([1, 2] if sync else [0, 1])


class Peek(keras.callbacks.Callback):
    """Looks at the training Sequence from inside fit with a loop of its own, as a callback
    that shows samples might (``next(iter(seq))``)."""

    def __init__(self, seq):
        super().__init__()
        self.seq = seq

    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            next(iter(self.seq))


def test_another_loop_over_the_sequence_inside_fit_leaves_keras_epochs_whole(run):
    """That loop is a pass of its own (it takes an epoch of its own); Keras' pass goes on."""
    seq, plan, log, model = run()
    fit(model, seq, log, epochs=2, callbacks=[Peek(seq)])
    fed = [plan.which_epoch(log.train[k]) for k in range(2)]
    assert fed[0] == 0 and fed[1] > fed[0]


@pytest.mark.filterwarnings("ignore:Your input ran out of data:UserWarning")  # Keras' own
def test_the_training_sequence_as_its_own_validation_data(run):
    """Keras' training pass spans its short epochs while evaluate runs passes of its own over
    the same Sequence in between: each stays whole."""
    seq, plan, log, model = run()
    fit(model, seq, log, epochs=2, steps_per_epoch=4, validation_data=seq)
    assert plan.which_epoch(log.train[0] + log.train[1]) == 0
    for rows in log.evaluated:
        assert sorted(i for i, _ in rows) == list(range(_fit.N))


@pytest.mark.filterwarnings("ignore:Your input ran out of data:UserWarning")  # Keras' own
def test_epochsync_starts_a_resumed_short_epoch_fit_at_a_whole_epoch(run):
    """initial_epoch=1 with steps_per_epoch=4 of 6: the uninterrupted run was in the middle
    of shmaug epoch 0 there, but the resumed fit's pass is fresh: it gets epoch 1, whole,
    rather than epoch 0's last 2 batches and epoch 1's first 2 in one Keras epoch."""
    seq, plan, log, model = run()
    fit(model, seq, log, sync=True, epochs=3, steps_per_epoch=4, initial_epoch=1)
    assert [len(log.train[k]) for k in (1, 2)] == [4, 2]
    assert plan.which_epoch(log.train[1] + log.train[2]) == 1


def test_a_sequence_restored_mid_epoch_is_told_that_fit_restarts_epochs(run):
    """A state saved within an epoch (from a callback, beside the model's checkpoint), then
    fit(initial_epoch=1) on a Sequence restored from it: Keras' epoch 1 took that pass's rest
    and the next pass's first batches, and each later epoch shmaug's next, without a word.
    Told; EpochSync restarts epoch 1 whole (quiet, warnings being errors here)."""
    class Saves(keras.callbacks.Callback):
        state = None

        def on_train_batch_end(self, batch, logs=None):
            if batch == 2 and seq.epoch == 1 and self.state is None:
                self.state = seq.state_dict()

    seq, plan, log, model = run()
    saves = Saves()
    fit(model, seq, log, epochs=2, callbacks=[saves])
    assert saves.state["epoch"] == 1 and 0 < saves.state["batch"] < len(seq)
    for sync in (False, True):
        seq, plan, log, model = run()
        seq.load_state_dict(saves.state)
        with told(rf"restored in the middle of its epoch 1 .*after {saves.state['batch']} "
                  r"of its batches.*EpochSync") if not sync else contextlib.nullcontext():
            fit(model, seq, log, sync=sync, epochs=3, initial_epoch=1)
        fed = [plan.which_epoch(log.train[k]) for k in (2,)]
        assert fed == ([2] if sync else [3])


def test_a_backed_up_run_cut_during_validation_resumes_without_a_word(run, tmp_path):
    """Diff review: cut while epoch 1 validated (its training pass over, the Sequence past
    it), the resumed fit redoes epoch 1 from the backup of epoch 0: EpochSync moving back
    one epoch there is the recipe, and was told, with a fix that skipped epoch 1."""
    class CutInValidation(keras.callbacks.Callback):
        def on_test_begin(self, logs=None):
            if seq.epoch >= 2:
                raise RuntimeError("cut")

    seq, plan, log, model = run()
    x, y = _fit.data()
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=0) as val:
        with pytest.raises(RuntimeError, match="cut"):
            fit(model, seq, log, sync=True, epochs=3, validation_data=val,
                callbacks=[backup, CutInValidation()])
        assert seq.epoch == 2
        log.train.clear()
        fit(model, seq, log, sync=True, epochs=3, validation_data=val, callbacks=[backup])
        assert [plan.which_epoch(log.train[k]) for k in (1, 2)] == [1, 2]  # (quiet: errors)
    seq, plan, log, model = run()  # a run that ended, then another from 0 (second review:
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "again"))  # the first mend
    fit(model, seq, log, sync=True, epochs=2, callbacks=[backup])  # said nothing where a
    with told(r"EpochSync moves this Sequence back from its epoch 2 to epoch 0"):  # backup
        fit(model, seq, log, sync=True, epochs=2, callbacks=[backup])  # was among them)


def test_initial_epoch_without_epochsync_is_told_unless_the_sequence_is_there(run):
    """fit(initial_epoch=2) in a fresh process fed the Sequence's epoch 0 (its order and draws
    again) without a word. Told once; a Sequence sought there, or that got there by fitting,
    is not (warnings are errors here)."""
    seq, plan, log, model = run()
    with told(r"Keras' epoch 2 .* own epoch 0.*seq\.seek\(2\)"):
        fit(model, seq, log, epochs=3, initial_epoch=2)
    assert plan.which_epoch(log.train[2]) == 0
    seq, plan, log, model = run()
    seq.seek(2)
    fit(model, seq, log, epochs=3, initial_epoch=2)
    fit(model, seq, log, epochs=5, initial_epoch=3)  # (its passes went on to epoch 3)
    assert [plan.which_epoch(log.train[k]) for k in (2, 3, 4)] == [2, 3, 4]
    fit(model, seq, log, epochs=3, initial_epoch=1)  # ahead (a warm-up fit): nothing repeats
    seq, plan, log, model = run()  # Keras epochs shorter than a pass count otherwise
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Your input ran out of data", UserWarning)
        fit(model, seq, log, epochs=6, initial_epoch=4, steps_per_epoch=3)
