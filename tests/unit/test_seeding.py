from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmaug.seeding import SampleSeeder, epoch_key, rng_for, sample_keys


def sample_key(seed, epoch, index):
    hi, lo = sample_keys(seed, epoch, np.array([index]))
    return int(hi[0]), int(lo[0])


def one(seeder, epoch, index):
    return next(seeder.streams(epoch, np.array([index])))

u32 = st.integers(0, 2**32 - 1)


@given(u32, u32, u32)
@settings(max_examples=200, deadline=None)
def test_stream_is_a_pure_function_of_seed_epoch_index(seed, epoch, index):
    a = rng_for(seed, epoch, index).integers(0, 2**63, 4)
    b = one(SampleSeeder(seed, seed_globals=False), epoch, index).integers(0, 2**63, 4)
    assert (a == b).all()


@given(u32, u32, u32, u32)
@settings(max_examples=200, deadline=None)
def test_distinct_samples_get_distinct_keys(seed, epoch, i, j):
    if i != j:
        assert sample_key(seed, epoch, i) != sample_key(seed, epoch, j)
        assert sample_key(seed, i, epoch) != sample_key(seed, j, epoch)


def test_no_two_samples_of_a_run_share_a_stream():
    seeder = SampleSeeder(0, seed_globals=False)
    firsts = {rng.integers(0, 2**63) for e in range(3)
              for rng in seeder.streams(e, np.arange(5000))}
    assert len(firsts) == 15000


def test_reused_generator_matches_a_fresh_one_after_other_samples():
    seeder = SampleSeeder(9, seed_globals=False)
    one(seeder, 0, 1).random(100)  # consume some of another stream first
    assert one(seeder, 2, 3).random() == rng_for(9, 2, 3).random()


def test_globals_are_seeded_per_sample_only_when_asked():
    seeder = SampleSeeder(1, seed_globals=True)
    one(seeder, 0, 5)
    a = (random.random(), np.random.random())
    one(seeder, 0, 6)
    b = (random.random(), np.random.random())
    one(seeder, 0, 5)
    assert (random.random(), np.random.random()) == a != b
    random.seed(123)
    one(SampleSeeder(1, seed_globals=False), 0, 5)
    random.seed(123)
    expected = random.random()
    random.seed(123)
    one(SampleSeeder(1, seed_globals=False), 0, 5)
    assert random.random() == expected


def test_epoch_keys_differ():
    assert len({epoch_key(0, e) for e in range(1000)}) == 1000
    assert epoch_key(0, 1) != epoch_key(1, 1)
