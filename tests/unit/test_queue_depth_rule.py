"""The default queue depth (``engine.handoff.depth``), on staged sizes (no memory, no process)."""

from __future__ import annotations

from shmaug.engine.handoff import depth

IMAGENET_UINT8 = 128 * 224 * 224 * 3  # bytes of a batch of 128 224x224 RGB uint8 images


def test_the_default_holds_two_batches_per_worker_and_two_more_at_least_eight():
    assert [depth.for_workers(w) for w in (0, 1, 3, 4, 15, 16)] == [8, 8, 8, 10, 32, 34]
    chosen = depth.choose(None, 15, IMAGENET_UINT8, free=64 * 2**30)
    assert (chosen.slots, chosen.why) == (32, depth.WORKERS)  # the 16-core GPU host's 15
    assert not depth.short(32 - 1 - 32 // 2, 15)  # the consumer holding half: 15 ahead


def test_the_memory_bound_is_2_gib_and_half_the_free_shared_memory_past_the_data():
    assert depth.memory_bound(None) == depth.memory_bound(64 * 2**30) == 2 * 2**30
    assert depth.memory_bound(1_000_000, besides=400_000) == 300_000
    assert depth.memory_bound(1_000, besides=4_000) == 0
    float32 = depth.choose(None, 15, 4 * IMAGENET_UINT8, free=64 * 2**30)
    assert (float32.slots, float32.why) == (2 * 2**30 // (4 * IMAGENET_UINT8), depth.MEMORY)
    assert float32.slots == 27 and "would be 32" in float32.describe()
    past = depth.choose(None, 15, 4 * IMAGENET_UINT8, free=100)
    assert past.slots == 1 and "holds no whole batch: 1" in past.describe()  # never none
    assert past.why == depth.SHM  # /dev/shm, not the 2 GiB cap: its fixes differ
    assert "max_queue_size" in depth.more_room(depth.MEMORY, "") and \
        "shared memory" in depth.more_room(depth.SHM, "")
    assert "holds 27" in float32.describe()  # (it said "holds 1" of a bound holding none)


def test_a_size_given_is_kept_whatever_the_workers_and_the_memory():
    for workers, free in ((64, 64 * 2**30), (1, 10)):
        chosen = depth.choose(3, workers, IMAGENET_UINT8, free=free)
        assert (chosen.slots, chosen.why, chosen.bound) == (3, depth.GIVEN, None)


def test_the_queue_limits_when_half_the_waits_found_it_short():
    assert depth.short(7, 8) and not depth.short(8, 8) and not depth.short(0, 0)
    assert depth.queue_limited(5, 10) and not depth.queue_limited(4, 10)
    assert not depth.queue_limited(0, 0)
