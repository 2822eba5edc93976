"""Where every random number comes from: one function of (seed, epoch, sample index).

A sample's stream depends only on where the sample sits in the run, never on which worker ran
it or when, so batches are bit-identical for any worker count, start method or respawn
history. Distinct samples, epochs and seeds get distinct streams (no "every worker emits the
same batch"). A seed counts whole, whatever its size (``seed_word``).

Speed matters here (it runs once per sample): instead of building a fresh ``Generator``
(~20-30 us), each process keeps one ``PCG64`` and re-keys it from a splitmix64 hash computed
for a whole task at once. The re-key writes the 256-bit PCG state straight into the bit
generator (under 1 us; numpy's dict setter takes ~3.5 us), a layout checked through that
setter when the seeder is built, with the setter as the fallback.

Python's ``random`` and the legacy ``np.random`` globals cost ~10 us more to seed (CPython's
Mersenne Twister set-up alone is ~7 us, numpy's ~3 us), so they are seeded only where used:
both always for a callable that declares ``uses_global_rng = True``, never for one that
declares False (every shmaug op), and for any other callable each one only once a
``GlobalsWatch`` has seen a sample draw from it; that sample is then made again seeded. The
watch compares where the two generators stand before and after a sample (well under 1 us).

torch's default CPU generator (torchvision's transforms draw from it) is seeded per sample
for any callable that does not declare False, wherever torch is loaded (~1 us: no watch
needed); a sample during which torch loaded is made again, seeded (``torch_generator``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import random
import sys
from typing import Any, Iterator

import numpy as np

from .errors import from_shmaug

__all__ = ["rng_for", "SampleSeeder"]  # (what completion offers)

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_STREAM = np.uint64(0xD1B54A32D192ED03)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 arrays (wrapping arithmetic): a cheap bijection."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


@functools.lru_cache(maxsize=16)
def seed_word(seed: int) -> int:
    """The 64-bit word every stream of ``seed`` (an int >= 0, any size) derives from.

    Below 2**63 it is the seed itself, so those seeds keep the streams they always had. A
    larger seed is hashed whole through ``np.random.SeedSequence`` into a word with the top
    bit set: 2**64 and 2**128 get streams of their own (not those of 0, as truncation gave),
    and no large seed lands on a small one. Cached: it runs once per task, not per sample.
    """
    if seed < 1 << 63:
        return seed
    word = int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])
    return word | 1 << 63


def sample_keys(seed: int, epoch: int, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 64-bit words per sample that identify (seed, epoch, index): the basis of every stream.

    Vectorized over a task's indices, so the per-sample cost is a few numpy lanes.
    """
    base = _mix64(_mix64(np.array([seed_word(seed)], np.uint64)) ^ np.uint64(epoch & _MASK64))
    hi = _mix64(base ^ np.asarray(indices, dtype=np.uint64))
    return hi, _mix64(hi ^ _STREAM)


def epoch_key(seed: int, epoch: int) -> int:
    """A 63-bit seed for things decided once per epoch (the shuffle order)."""
    h = _mix64(_mix64(np.array([seed_word(seed)], np.uint64)) ^ np.uint64(epoch & _MASK64)
               ^ np.uint64(0x5851F42D4C957F2D))
    return int(h[0]) >> 1


def global_rng_use(*callables: object) -> bool | None:
    """Whether ``callables`` (None entries ignored) draw from ``random`` / ``np.random``:
    True if one says it does, False if all say they do not, None when it is unknown.

    A callable says so with a ``uses_global_rng`` attribute (shmaug's ops all say False).
    """
    unknown = False
    for fn in callables:
        if fn is None:
            continue
        says = trusted_rng_use(getattr(fn, "uses_global_rng", None), fn)
        if says is None:
            unknown = True
        elif says:
            return True
    return None if unknown else False


def trusted_rng_use(says: object, fn: object) -> bool | None:
    """What ``fn``'s ``uses_global_rng`` is taken to say: True as said; False only from
    shmaug's own code, whose ops draw from ``rng`` alone. A user's False is watched like an
    unsaid one (~0.8 us a sample): a function ported with the flag but not yet its body
    (``np.random.uniform`` still in it) would otherwise go unseeded, every worker drawing the
    same "random" numbers and the batches changing with the worker count."""
    if says is None:
        return None
    return True if says else (False if from_shmaug(getattr(fn, "__module__", None)) else None)


def torch_generator() -> Any | None:
    """torch's default CPU generator where torch has loaded in this process, else None (never
    loads it: a worker binds torch lazily, ``lazy_imports``, and a process that has not run
    torch has no draw of it to seed)."""
    if "torch._C" not in sys.modules:
        return None
    return getattr(sys.modules.get("torch"), "default_generator", None)


@contextlib.contextmanager
def globals_kept() -> Iterator[None]:
    """The caller's own global streams (``random``, ``np.random``, torch's where loaded) as
    they were before, whatever the per-sample seeding within did to them: for ops run in the
    caller's process (``workers=0``, Ray's batches). Saving them costs microseconds."""
    torch = torch_generator()
    saved = random.getstate(), np.random.get_state(), torch and torch.get_state()
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        if torch is not None:
            torch.set_state(saved[2])


def rng_for(seed: int, epoch: int, index: int) -> np.random.Generator:
    """A fresh ``Generator`` for one sample. Same arguments, same stream as in the workers.

    ``index`` is the sample's index in ``x``, or, where a loader draws by
    ``sampling_weights``, its place in that epoch's draw (a sample drawn twice gets two).

    Example:
        >>> a = rng_for(0, 1, 7).random(); b = rng_for(0, 1, 7).random()
        >>> a == b
        True
    """
    return next(SampleSeeder(seed, seed_globals=False).streams(epoch, np.array([index])))


def pcg_keys(his: np.ndarray, los: np.ndarray) -> np.ndarray:
    """Each sample's PCG64 key, (k, 4) uint64 in numpy's in-memory order of the bit
    generator: state = hi:lo, then inc = lo:hi | 1 (odd: a distinct stream per sample), each
    128-bit word low half first."""
    return np.ascontiguousarray(np.stack([los, his, his | np.uint64(1), los], axis=1))


def _state_views(bitgen: np.random.PCG64) -> tuple[np.ndarray, np.ndarray] | None:
    """Writable views of ``bitgen``'s key (4 uint64, as ``pcg_keys`` lays them out) and of its
    cached half-word (``has_uint32``, ``uinteger``), so a re-key is two small array writes;
    or None where that is unsafe.

    Trusted only when both lie inside the bit generator object and a state set through
    numpy's own setter reads back through the views exactly (numpy's native ``__uint128_t``
    layout on gcc/clang builds); nothing is written through them before that.
    """
    try:
        top = bitgen.ctypes.state_address  # pcg64_state {pcg_state*, has_uint32, uinteger}
        words = ctypes.c_void_p.from_address(top).value  # pcg_state {state, inc}
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - exotic builds
        return None
    start, end = id(bitgen), id(bitgen) + type(bitgen).__basicsize__
    pointer = ctypes.sizeof(ctypes.c_void_p)
    if not words or not (start <= top and top + pointer + 8 <= end
                         and start <= words and words + 32 <= end):
        return None  # not laid out where expected: numpy's setter it is
    key = np.ctypeslib.as_array((ctypes.c_uint64 * 4).from_address(words))
    cached = np.ctypeslib.as_array((ctypes.c_uint32 * 2).from_address(top + pointer))
    hi, lo = np.array([0x0123456789ABCDEF], np.uint64), np.array([0xFEDCBA9876543210], np.uint64)
    bitgen.state = {"bit_generator": "PCG64", "has_uint32": 1, "uinteger": 0xC0FFEE,
                    "state": {"state": (int(hi[0]) << 64) | int(lo[0]),
                              "inc": (int(lo[0]) << 64) | int(hi[0]) | 1}}
    if not (np.array_equal(key, pcg_keys(hi, lo)[0]) and cached.tolist() == [1, 0xC0FFEE]):
        return None  # pragma: no cover - a layout this module does not know
    return key, cached


class _SampleSeedSequence(np.random.bit_generator.ISpawnableSeedSequence):
    """The seed sequence a sample's generator reports: ``rng.spawn(n)`` draws its children
    from it, keyed by the sample (its ``key``) and by how many it spawned before, so they are
    part of the stream. numpy's own would be the process's, from the OS's entropy: another
    in every run and every worker."""

    def __init__(self) -> None:
        self.key: tuple[int, int] = (0, 0)  # the sample's (hi, lo); set per sample
        self.spawned = 0  # children this sample has spawned

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        state: np.ndarray = np.random.SeedSequence(self.key).generate_state(n_words, dtype)
        return state

    def spawn(self, n_children: int) -> list[np.random.SeedSequence]:  # type: ignore[override]
        first, self.spawned = self.spawned, self.spawned + n_children
        return [np.random.SeedSequence(self.key, spawn_key=(k,))
                for k in range(first, first + n_children)]


class SampleSeeder:
    """Re-keys one per-process generator for each sample (cheap), and optionally the globals.

    ``streams(epoch, indices)`` yields the *same* ``Generator`` object once per index,
    re-keyed each time; a caller must be done with one sample's stream before the next.
    """

    def __init__(self, seed: int, *, seed_globals: bool, seed_torch: bool = False) -> None:
        self.seed = seed  # invariant: fixed for the life of the run
        # Which globals each sample seeds: both when the op says it uses them; otherwise
        # each from the first time a sample is seen drawing from it (see GlobalsWatch).
        self.seed_python = self.seed_numpy = seed_globals
        self.seed_torch = seed_torch  # where torch has loaded (module docstring)
        self._sequence = _SampleSeedSequence()
        self._bitgen = np.random.PCG64(self._sequence)  # type: ignore[arg-type]
        self._generator = np.random.Generator(self._bitgen)
        self._views = _state_views(self._bitgen)  # they point into self._bitgen

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy must get views of its own bit generator, not copies of these views.
        return _rebuild_seeder, (self.seed, self.seed_python, self.seed_numpy, self.seed_torch)

    @property
    def seed_globals(self) -> bool:
        """Whether any global generator is seeded per sample."""
        return self.seed_python or self.seed_numpy or self.seed_torch

    def _set_state(self, hi: int, lo: int) -> None:
        """The portable re-key through numpy's setter; same state as ``pcg_keys`` describes."""
        self._bitgen.state = {
            "bit_generator": "PCG64",
            "state": {"state": (hi << 64) | lo, "inc": ((lo << 64) | hi) | 1},
            "has_uint32": 0,
            "uinteger": 0,
        }

    def streams(self, epoch: int, indices: np.ndarray) -> Iterator[np.random.Generator]:
        his, los = sample_keys(self.seed, epoch, indices)
        keys = pcg_keys(his, los)
        for key, hi, lo in zip(keys, his.tolist(), los.tolist()):
            if self._views is not None:
                self._views[0][:] = key
                self._views[1][0] = 0  # no cached half-word from the previous sample
            else:
                self._set_state(hi, lo)
            self._sequence.key, self._sequence.spawned = (hi, lo), 0
            # Legacy user code draws from the globals; same per-sample guarantee.
            if self.seed_python:
                random.seed(hi)
            if self.seed_numpy:
                # both words: one (2**32 seeds) gave ~190 pairs of samples an ImageNet epoch
                # the same draws (6 us more a sample, where the globals are drawn from)
                np.random.seed((lo & 0xFFFFFFFF, lo >> 32))
            if self.seed_torch and (torch := torch_generator()) is not None:
                torch.manual_seed(hi >> 32)  # (its Mersenne Twister takes 32 bits: not
                # numpy's, whose draws would then be torch's)
            yield self._generator

    def restream(self, epoch: int, index: int) -> np.random.Generator:
        """Key the generator (and the globals it seeds) for one sample again."""
        return next(self.streams(epoch, np.array([index])))


def _rebuild_seeder(seed: int, python: bool, numpy: bool, torch: bool) -> SampleSeeder:
    seeder = SampleSeeder(seed, seed_globals=False, seed_torch=torch)
    seeder.seed_python, seeder.seed_numpy = python, numpy
    return seeder


def _layout_checked(owner: object, address: int, what: str) -> bool:
    """Whether the 625 uint32 at ``address`` are the Mersenne Twister of ``owner`` (624 state
    words and the position), as its own ``getstate``/``get_state`` reports them. The caller
    has checked that the 2,500 bytes lie inside the object."""
    words = np.ctypeslib.as_array((ctypes.c_uint32 * 625).from_address(address)).copy()
    if what == "random":  # CPython's RandomObject: {PyObject_HEAD; int index; uint32 state[624]}
        state = owner.getstate()[1]  # type: ignore[attr-defined]
        return bool(words[0] == state[-1] and np.array_equal(words[1:], state[:-1]))
    _, key, pos, *_ = owner.get_state()  # type: ignore[attr-defined]  # numpy's {key[624]; pos}
    return bool(np.array_equal(words[:624], key) and words[624] == pos)


def _inside(obj: object, address: int, nbytes: int) -> bool:
    return id(obj) <= address and address + nbytes <= id(obj) + type(obj).__basicsize__


_MT_BYTES = 625 * 4  # 624 state words and the position


class GlobalsWatch:
    """Tells whether code drew from Python's ``random`` or the legacy ``np.random`` globals.

    ``moved()`` compares where each Mersenne Twister stands (its position and first word,
    which a draw of a whole state's worth also rewrites) with the last look: ~0.3 us. It reads
    interpreter memory directly, so it is used only on CPython, when the module functions are
    bound to the generators it holds, the state lies inside those objects and reads back
    exactly what ``getstate()`` reports; ``usable`` is False otherwise, and callers then seed
    the globals for every sample instead. It holds the objects it reads, so the memory stays
    theirs. It cannot see code that draws and then restores the state, only reads it, or swaps
    a generator within one task: such code must declare ``uses_global_rng = True``.
    """

    def __init__(self) -> None:
        self.usable = False
        inst, legacy = getattr(random, "_inst", None), np.random.mtrand._rand
        bitgen = getattr(legacy, "_bit_generator", None)
        if (sys.implementation.name != "cpython" or inst is None
                or getattr(random.random, "__self__", None) is not inst
                or type(bitgen) is not np.random.MT19937):
            return
        python = id(inst) + object.__basicsize__
        numpy = bitgen.ctypes.state_address
        if not (_inside(inst, python, _MT_BYTES) and _inside(bitgen, numpy, _MT_BYTES)):
            return  # pragma: no cover - a layout this module does not know
        if not (_layout_checked(inst, python, "random")
                and _layout_checked(legacy, numpy, "numpy")):
            return  # pragma: no cover
        self.usable = True
        self._watched: tuple[Any, Any, Any] = (inst, legacy, bitgen)  # held: addresses stay valid
        self._python = ctypes.c_uint64.from_address(python)  # index and first word
        self._numpy = ctypes.c_uint32.from_address(numpy)  # first word
        self._position = ctypes.c_uint32.from_address(numpy + 624 * 4)
        self._last = self._look()

    def _look(self) -> tuple[int, int, int]:
        return self._python.value, self._numpy.value, self._position.value

    def _replaced(self) -> bool:
        """Whether the program swapped a global generator for another object since."""
        inst, legacy, bitgen = self._watched
        return (getattr(random.random, "__self__", None) is not inst
                or np.random.mtrand._rand is not legacy
                or legacy._bit_generator is not bitgen)

    def forget_cached(self) -> None:
        """Call before each task. Drops the Gaussian each generator may hold back for its next
        normal draw (inherited through fork, or left by the program): using it would not move
        the state. A program that swapped a global generator for another object makes the
        watch unusable from then on (every later look counts as a draw from both)."""
        if not self.usable:
            return
        if self._replaced():
            self.usable = False
            return
        self._watched[0].gauss_next = None
        state: Any = self._watched[1].get_state()
        if state[3]:  # has_gauss
            self._watched[1].set_state(state[:3] + (0, 0.0))
        self._last = self._look()

    def moved(self) -> tuple[bool, bool]:
        """Whether Python's and numpy's global generator moved since the last look (both
        True when unknown)."""
        if not self.usable:
            return True, True
        python, numpy, position = now = self._look()
        last = self._last
        self._last = now
        return python != last[0], numpy != last[1] or position != last[2]
