from __future__ import annotations

import copy
import random
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shmaug
from shmaug.engine.plan.schedule import permutation
from shmaug.seeding import SampleSeeder, epoch_key, rng_for, sample_keys, seed_word
from tests import _ops


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


def test_legacy_numpy_draws_of_two_samples_differ_where_their_low_words_meet():
    """numpy's legacy generator was seeded with the key's low 32 bits: samples 9981 and
    85204 of seed 0's epoch 0 share them, and drew alike (~190 such pairs an ImageNet
    epoch); both words of the key seed it now."""
    _, los = sample_keys(0, 0, np.array([9981, 85204]))
    assert los[0] & 0xFFFFFFFF == los[1] & 0xFFFFFFFF  # (the pair this test is about)
    seeder = SampleSeeder(0, seed_globals=True)
    draws = [(one(seeder, 0, i), np.random.random(4))[1] for i in (9981, 85204)]
    assert not np.array_equal(*draws)


def test_epoch_keys_differ():
    assert len({epoch_key(0, e) for e in range(1000)}) == 1000
    assert epoch_key(0, 1) != epoch_key(1, 1)


def reference_stream(seed, epoch, index):
    """The stream's definition, built through numpy's public state setter only."""
    hi, lo = sample_key(seed, epoch, index)
    bitgen = np.random.PCG64()
    bitgen.state = {"bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
                    "state": {"state": (hi << 64) | lo, "inc": ((lo << 64) | hi) | 1}}
    return np.random.Generator(bitgen)


def draws(g):
    # One 32-bit draw leaves half a 64-bit word cached in the bit generator: it must not leak
    # into the next sample's stream.
    return [int(g.integers(0, 10, dtype=np.uint32)), float(g.random()), float(g.normal()),
            int(g.integers(0, 2**40))]


@given(u32, u32)
@settings(max_examples=50, deadline=None)
def test_direct_rekey_gives_exactly_the_reference_streams(seed, epoch):
    indices = np.array([5, 0, 2**31, 7, 5])
    seeder = SampleSeeder(seed, seed_globals=False)
    if sys.platform.startswith("linux"):  # gcc builds: numpy's layout this module knows
        assert seeder._views is not None, "the direct re-key should be usable on this build"
    got = [draws(g) for g in seeder.streams(epoch, indices)]
    assert got == [draws(reference_stream(seed, epoch, int(i))) for i in indices]


def test_portable_rekey_gives_the_same_streams():
    direct, portable = SampleSeeder(3, seed_globals=False), SampleSeeder(3, seed_globals=False)
    portable._views = None  # as on a numpy build whose layout the probe does not recognise
    indices = np.arange(50)
    assert ([draws(g) for g in direct.streams(1, indices)]
            == [draws(g) for g in portable.streams(1, indices)])


def test_globals_watch_sees_every_kind_of_draw():
    from shmaug.seeding import GlobalsWatch

    watch = GlobalsWatch()
    assert watch.usable, "CPython and numpy's layouts should be recognised here"
    assert not any(watch.moved())
    draws = [
        lambda: random.random(),
        lambda: np.random.random(),
        lambda: np.random.normal(),
        lambda: np.random.random(624),  # a whole state's worth: the position comes back
        lambda: [random.getrandbits(32) for _ in range(624)],
        lambda: random.seed(3),
        lambda: np.random.seed(3),
    ]
    for draw in draws:
        draw()
        assert any(watch.moved())
        assert not any(watch.moved())
    np.random.default_rng(0).random()  # a private generator is not a global one
    assert not any(watch.moved())


def test_global_rng_use_combines_what_callables_say():
    from shmaug.seeding import global_rng_use

    class Says:
        def __init__(self, value):
            self.uses_global_rng = value

    assert global_rng_use(Says(False), None) is None  # a user's False: watched all the same
    assert global_rng_use(shmaug.ops.Op("rotate"), None) is False  # shmaug's: at its word
    assert global_rng_use(Says(False), print) is None  # print does not say
    assert global_rng_use(Says(None), Says(False)) is None
    assert global_rng_use(print, Says(True)) is True


def test_a_copied_seeder_rekeys_its_own_generator():
    seeder = SampleSeeder(4, seed_globals=False)
    clone = copy.deepcopy(seeder)
    indices = np.arange(5)
    assert ([draws(g) for g in clone.streams(0, indices)]
            == [draws(reference_stream(4, 0, int(i))) for i in indices])


def test_globals_watch_forgets_held_back_gaussians_and_notices_a_swapped_generator():
    from shmaug.seeding import GlobalsWatch

    watch = GlobalsWatch()
    np.random.normal()  # draws two, returns one, holds the other back
    random.gauss(0.0, 1.0)  # the same in Python's generator
    watch.forget_cached()
    np.random.normal()  # would have used the held-back one without moving the state
    assert any(watch.moved())
    random.gauss(0.0, 1.0)
    assert any(watch.moved())
    previous = np.random.get_bit_generator()
    np.random.set_bit_generator(np.random.PCG64(0))
    try:
        watch.forget_cached()  # the next task finds another generator: assume every draw
        assert not watch.usable and any(watch.moved())
    finally:
        np.random.set_bit_generator(previous)


def test_globals_watch_tells_which_generator_moved():
    from shmaug.seeding import GlobalsWatch

    watch = GlobalsWatch()
    random.random()
    assert watch.moved() == (True, False)
    np.random.random()
    assert watch.moved() == (False, True)
    assert watch.moved() == (False, False)


# -- seeds of any size -------------------------------------------------------------------------


def test_seeds_below_2_63_keep_the_streams_they_always_had():
    # Values from before large seeds were hashed whole: results users reproduce stay as they were.
    assert rng_for(12345, 2, 7).integers(0, 2**63) == 2574983362355867598
    assert rng_for(2**63 - 1, 0, 0).integers(0, 2**63) == 2877579287576839836
    assert epoch_key(7, 3) == 5134750006221468568


@given(st.integers(0, 2**63 - 1))
def test_seed_word_is_the_seed_below_2_63(seed):
    assert seed_word(seed) == seed


@pytest.mark.parametrize("big", [2**64, 2**128, 2**63, 2**64 + 1, 3 * 2**64])
def test_large_seeds_count_whole_and_never_alias_a_small_one(big):
    """Truncating to 64 bits gave 2**64 and 2**128 exactly the batches of seed 0."""
    low = big & (2**63 - 1)  # what truncation would keep
    assert seed_word(big) >= 2**63  # the top bit: no large seed lands on a seed below 2**63
    assert rng_for(big, 0, 3).random() != rng_for(low, 0, 3).random()
    assert not np.array_equal(permutation(big, 1, 50, True), permutation(low, 1, 50, True))
    assert seed_word(big) == seed_word(int(str(big)))  # a pure function of the integer


def test_large_seeds_differ_from_each_other():
    words = {seed_word(2**64 + k) for k in range(200)} | {seed_word(2**k) for k in range(63, 300)}
    assert len(words) == 200 + (300 - 63) - 1  # 2**64 is in both sets


@pytest.mark.parametrize("seed", [-1, -(2**70)])
def test_negative_seeds_are_refused_with_the_fix(seed):
    from shmaug.engine.config import checks as check

    with pytest.raises(shmaug.ArgumentError, match=r"`seed` must be None or an integer >= 0"):
        check.seed(seed)


def test_a_large_seed_reaches_the_loaders_batches():
    x = np.arange(8 * 4 * 4).reshape(8, 4, 4).astype(np.uint8)

    def first_batch(seed):
        with shmaug.Loader(x, batch_size=8, augment=_ops.noisy, workers=0, seed=seed,
                           shuffle=True) as loader:
            return loader.batch(0)[0]

    assert not np.array_equal(first_batch(2**64), first_batch(0))
    assert not np.array_equal(first_batch(2**128), first_batch(0))
    np.testing.assert_array_equal(first_batch(2**128), first_batch(2**128))


SHARED_RNG = np.random.default_rng(1234)


def _draws_from_a_shared_generator(image, rng):
    return image + SHARED_RNG.integers(0, 2, image.shape).astype(image.dtype)


def test_an_augment_drawing_from_a_generator_made_at_import_is_told():
    """A module's Generator is copied into every worker in one state: 2 workers drew the same
    noise for 28 of 64 samples, and the batches changed with the worker count, silently."""

    x = np.zeros((16, 8, 8, 3), np.uint8)
    for augment in (_draws_from_a_shared_generator,
                    shmaug.Compose([shmaug.ops.Op("hflip"), _draws_from_a_shared_generator])):
        with pytest.warns(shmaug.ShmaugWarning, match=r"reads `SHARED_RNG`, a Generator "
                                                      r"made when its module was imported.*"
                                                      r"Fix: draw from the `rng`"):
            shmaug.Loader(x, batch_size=4, augment=augment, workers=0).close()
    shmaug.Loader(x, batch_size=4, workers=0, augment=shmaug.presets.glyph_distort()).close()
