"""The rule behind workers="auto", on staged epoch figures (no process, no clock)."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from shmaug.engine.autoscale import _autotune as A
from shmaug.engine.autoscale._autotune import EpochFigures, Tuning, decide

JUDGED = Tuning(seen=1)  # past the start-up epoch


def figures(workers, wait=0.005, demand=0.5, hit_rate=1.0, batches=100, seconds=10.0):
    return EpochFigures(workers=workers, batches=batches, seconds=seconds,
                        wait_s=wait * seconds, busy_s=demand * seconds,
                        hits=round(hit_rate * batches))


def settle(fig, cores, epochs, start=None):
    """Run the rule for ``epochs`` epochs; ``fig(n)`` gives the figures an epoch with n
    workers would show. Returns the counts, the first epoch's included."""
    n, state, counts = start or cores, Tuning(), []
    for _ in range(epochs):
        counts.append(n)
        d = decide(fig(n), cores, state)
        n, state = d.workers, d.state
    return counts


def test_the_first_epoch_holds_the_start_up_and_is_not_judged():
    d = decide(figures(8, demand=0.1), cores=8)
    assert d.workers == 8 and "first epoch" in d.reason
    assert d.state.seen == 1 and d.state.judged == 0


def test_an_epoch_too_short_to_tell_is_not_judged():
    for short in (figures(8, demand=0.1, batches=A.MIN_BATCHES - 1),
                  figures(8, demand=0.1, seconds=A.MIN_SECONDS / 2)):
        d = decide(short, 8, JUDGED)
        assert d.workers == 8 and "too short" in d.reason and d.state.judged == 0


def test_a_slow_consumer_with_a_light_op_is_fed_by_fewer_workers_halving_at_most():
    # 0.3 workers' worth of work, the consumer never waits: 8 -> 4 -> 2 -> 1.
    counts = settle(lambda n: figures(n, wait=0.003, demand=0.3), cores=8, epochs=6)
    assert counts == [8, 8, 4, 2, 1, 1]


def test_a_shrink_leaves_headroom_for_the_work():
    d = decide(figures(4, demand=1.4), 4, JUDGED)  # 1.4 / 0.75 -> 2 workers, 70% busy
    assert d.workers == 2 and d.reason.startswith("4 -> 2") and "70%" in d.reason
    d = decide(figures(2, demand=0.9), 2, JUDGED)  # one would be 90% busy: keep two
    assert d.workers == 2 and "1 would be busy 90%" in d.reason


def test_a_fast_consumer_on_all_cores_keeps_them_all():
    # The consumer waits 40%, batches not ready, workers saturated: nothing more to give.
    d = decide(figures(2, wait=0.4, demand=1.95, hit_rate=0.1), 2, JUDGED)
    assert d.workers == 2 and "usable cores" in d.reason


def test_a_wait_that_is_the_hand_over_does_not_grow_the_pool_nor_stop_a_shrink():
    # Ready batches, idle workers: the wait is the copy on the consumer's thread.
    d = decide(figures(2, wait=0.05, demand=1.2, hit_rate=1.0), 4, JUDGED)
    assert d.workers == 2 and d.reason.endswith("the wait is the hand-over of ready "
                                                "batches, not the workers")
    d = decide(figures(2, wait=0.05, demand=0.6, hit_rate=1.0), 4, JUDGED)
    assert d.workers == 1 and d.reason.startswith("2 -> 1: waited 5.0%")


def test_starved_workers_grow_by_what_the_wait_says_is_missing():
    d = decide(figures(1, wait=0.3, demand=1.0, hit_rate=0.2), 8, JUDGED)
    assert d.workers == 2  # ceil(1 * 0.98 / 0.7)
    d = decide(figures(2, wait=0.6, demand=2.0, hit_rate=0.0), 8, JUDGED)
    assert d.workers == 5  # ceil(2 * 0.98 / 0.4)
    d = decide(figures(2, wait=0.6, demand=2.0, hit_rate=0.0), 4, JUDGED)
    assert d.workers == 4  # never above the usable cores
    d = decide(figures(3, wait=0.021, demand=2.9, hit_rate=0.5), 8, JUDGED)
    assert d.workers == 4  # at least one more


def test_a_consumer_held_up_by_the_queue_gets_no_more_workers():
    """Waits at asks where the ring had fewer slots ahead than workers: more workers would
    find no slot either (issue 58), so the count is kept and the queue named."""
    starved = figures(4, wait=0.3, demand=2.0, hit_rate=0.2)  # 80 of 100 batches waited for
    queue_bound = dataclasses.replace(starved, short_misses=40)  # half of them short
    d = decide(queue_bound, 8, JUDGED)
    assert d.workers == 4 and "the queue is the limit" in d.reason, d.reason
    d = decide(dataclasses.replace(starved, short_misses=39), 8, JUDGED)  # fewer: workers'
    assert d.workers > 4, d.reason


def test_a_count_that_starved_is_retried_later_and_later():
    # One worker is enough only some of the time: it starves, the pool grows back to 2,
    # and 1 is tried again after RETRY_EPOCHS judged epochs, then after twice that.
    def fig(n):
        return figures(n, demand=0.7) if n == 2 else figures(1, 0.2, 1.0, 0.3)

    counts = settle(fig, cores=2, epochs=20)
    ones = [i for i, n in enumerate(counts) if n == 1]
    assert ones == [2, 2 + 1 + A.RETRY_EPOCHS, 2 + 2 + 3 * A.RETRY_EPOCHS]
    state = Tuning(seen=5, judged=4, too_few=1, retry_at=8)
    d = decide(fig(2), 2, state)
    assert d.workers == 2 and "1 starved the consumer lately (tried again in 3 epochs)" in d.reason


def test_the_pipeline_model_settles_on_the_fewest_workers_that_feed_it():
    """A pipeline whose batch costs `cost` worker-seconds and a consumer stepping `step`
    seconds per batch: n workers keep up when n / cost >= 1 / step. From the usable cores
    the rule settles, without swinging, on a count that keeps up with 25% to spare."""

    def pipeline(cost, step, batches=200):
        def fig(n):
            if n * step >= cost:  # workers keep ahead: the consumer sets the pace
                seconds = batches * step
                return EpochFigures(n, batches, seconds, 0.002 * seconds, batches * cost,
                                    batches)
            seconds = batches * cost / n  # workers set the pace; the consumer waits
            return EpochFigures(n, batches, seconds, seconds - batches * step, n * seconds,
                                batches // 10)
        return fig

    for cost, step, cores in [(0.01, 0.1, 16), (0.3, 0.1, 16), (0.14, 0.1, 2),
                              (0.5, 0.1, 4), (0.05, 0.1, 1)]:
        counts = settle(pipeline(cost, step), cores, epochs=30)
        settled = counts[-10:]
        assert len(set(settled)) == 1, (cost, step, counts)
        n = settled[0]
        assert n <= cores
        if math.ceil(cost / step) <= cores:  # it can be fed: by the fewest, with headroom
            assert n == min(cores, max(math.ceil(cost / step / A.HEADROOM - 1e-9), 1)), counts
        else:  # it cannot: every core
            assert n == cores


@settings(max_examples=300, deadline=None)
@given(workers=st.integers(1, 64), cores=st.integers(1, 64),
       wait=st.floats(0, 1), demand=st.floats(0, 64), hit_rate=st.floats(0, 1),
       batches=st.integers(0, 10_000), seconds=st.floats(0, 1e4),
       too_few=st.integers(0, 64), retry_at=st.integers(0, 100), judged=st.integers(0, 100))
def test_the_count_stays_within_one_and_the_cores(workers, cores, wait, demand, hit_rate,
                                                  batches, seconds, too_few, retry_at, judged):
    workers = min(workers, cores)
    fig = EpochFigures(workers, batches, seconds, wait * seconds, min(demand, workers) * seconds,
                       round(hit_rate * batches))
    state = Tuning(seen=judged + 1, judged=judged, too_few=too_few, retry_at=retry_at)
    d = decide(fig, cores, state)
    assert 1 <= d.workers <= cores
    assert d.state.seen == state.seen + 1
    starved = fig.wait > A.TARGET_WAIT and (fig.hit_rate < A.MIN_HIT_RATE
                                           or fig.demand >= A.SATURATED * workers)
    if d.workers > workers:  # only workers that kept the consumer waiting grow the pool
        assert starved
    if d.workers < workers:  # only ones that did not shrink it, to half at least
        assert not starved and d.workers >= -(-workers // 2)
    if batches < A.MIN_BATCHES or seconds < A.MIN_SECONDS:
        assert d.workers == workers
