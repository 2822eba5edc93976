"""No batch is overwritten while Keras holds it: every slot released back to the workers is
poisoned (``SHMAUG_POISON_RELEASED_SLOTS=1``: 0xFF bytes, NaN in float32), and what each step
saw must be the batch shmaug made for it, in ``fit`` (with validation), ``evaluate``,
``predict`` and a hand loop that keeps every batch, on whichever backend Keras runs.

A batch read after its slot went back would hold NaN (the Tap fails to read a sample id) or
another batch's rows (the plan check fails); the last test shows the poison does reach a
batch kept past its lease (``Loader(copy=False)``), so the others can fail.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from shmaug.engine.handoff.ring import POISON_ENV
from tests._helpers import needs_keras

pytestmark = needs_keras


@pytest.fixture(autouse=True)
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POISON_ENV, "1")


def test_fit_evaluate_predict_see_the_batches_made_for_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What Keras asks for past a pass's first batches is lent, not copied (counted here):
    the test is about those."""
    import shmaug
    from shmaug.engine.handoff.ring import OutputRing
    from tests import _fit

    lent = []
    lease = OutputRing.lease
    monkeypatch.setattr(OutputRing, "lease", lambda ring, *a: lent.append(a[0]) or lease(ring, *a))

    class PredictTag(_fit.EpochTag):
        def on_predict_begin(self, logs=None):
            self.log.evaluated.append([])  # the Tap writes predict's rows there too

    x, y = _fit.data(48)  # 12 batches of 4 through 2 slots ahead: every slot reused often
    log = _fit.Log()
    plan = _fit.Plan(x, seed=3, shuffle=True)
    in_order = _fit.Plan(x, seed=3, shuffle=False)
    seq_args = dict(batch_size=_fit.BATCH, augment=_fit.mark, workers=2, seed=3,
                    max_queue_size=2)
    try:
        with shmaug.Sequence(x, y, **seq_args) as seq, \
                shmaug.Sequence(x, y, **seq_args) as val:
            m = _fit.model(log)
            m.fit(seq, epochs=2, validation_data=val, callbacks=[_fit.EpochTag(log)],
                  verbose=0)
            assert [plan.which_epoch(log.train[e]) for e in (0, 1)] == [0, 1]
            expected = [r for b in range(len(val)) for r in in_order.batch(0, b)]
            assert log.evaluated[0] == expected  # validation reads in order, untouched
            m.evaluate(seq, callbacks=[_fit.EpochTag(log)], verbose=0)
            assert any(log.evaluated[-1] == [r for b in range(len(seq))
                                             for r in in_order.batch(e, b)] for e in range(4))
            assert m.predict(seq, callbacks=[PredictTag(log)], verbose=0).shape == (len(x), 1)
            assert any(log.evaluated[-1] == [r for b in range(len(seq))
                                             for r in in_order.batch(e, b)] for e in range(4))
        assert len(lent) >= len(x) // _fit.BATCH  # of 6 passes of 12 (the rest copied)
    finally:
        plan.close()
        in_order.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("max_queue_size", [1, 2])
def test_a_hand_loop_keeps_every_batch_intact(max_queue_size: int) -> None:
    """Lent (a loop's batches) or copied (asked by hand, or past half the ring): all of them
    kept, none overwritten, and no hang, even with one slot (which is never lent)."""
    import shmaug
    from tests import _fit

    x, y = _fit.data(48)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.same, workers=2, seed=0,
                         max_queue_size=max_queue_size, shuffle=False) as seq:
        kept = list(seq)
        kept += [seq[i] for i in range(len(seq))]  # twice over: the ring went round many times
    rows = np.concatenate([xb for xb, _ in kept])
    np.testing.assert_array_equal(rows, np.concatenate([x, x]))


KEPT_PAST_CLOSE = textwrap.dedent("""
    import gc
    import numpy as np
    import shmaug
    from tests import _fit

    x, y = _fit.data(48)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.same, workers=2,
                         max_queue_size=4, shuffle=False) as seq:
        kept = list(seq)  # lent, past the first two
    gc.collect()
    junk = [np.ones(10**6) for _ in range(20)]  # would reuse the pages, were they unmapped
    assert np.array_equal(np.concatenate([xb for xb, _ in kept]), x)
    kept[-1][0][:] = 7  # still writable, still mapped
    print("intact")
""")


def test_lent_batches_outlive_the_sequence() -> None:
    """Kept past ``close()``: the mapping lives while they do (a child process: a bug here is
    a segfault, which must not take the test runner with it)."""
    done = subprocess.run([sys.executable, "-c", KEPT_PAST_CLOSE], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and done.stdout.strip() == "intact", done.stderr[-2000:]


def test_the_poison_reaches_a_batch_kept_past_its_lease() -> None:
    """The control: ``copy=False`` lends a slot until the next batch; one kept longer reads
    the poison or a later batch's rows, which is what the tests above would see had a batch
    been lent too long."""
    import shmaug
    from tests import _fit

    x, _ = _fit.data(16)
    with shmaug.Loader(x, batch_size=_fit.BATCH, augment=_fit.same, workers=2,
                       max_queue_size=2, copy=False) as loader:
        it = iter(loader)
        first, _ = next(it)
        made = first.copy()
        next(it)
        next(it)  # by now the workers may have refilled the poisoned slot with batch 2
    assert not np.isnan(made).any() and not np.array_equal(first, made, equal_nan=True)
