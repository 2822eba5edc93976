"""Checks of the run's settings, before anything starts: sizes, counts, the seed, the start
method, shards and a saved state to resume from. Each message names the argument, what was
expected, what was received (value and type) and how to fix it. The data itself (images,
targets, value ranges) is checked in ``inputs``."""

from __future__ import annotations

import inspect
import numbers
import random
from typing import Any, Final

import numpy as np

from ...errors import ArgumentError, ArgumentTypeError, from_shmaug, got, warn
from ...ops.core import WRAPPERS, members
from ...ops.mixing import Mix
from ... import platform
from ..plan.blocks import BLOCKS
from ..workers.shipping import globals_read
from ..plan.schedule import BatchPlan, Shard
from ..remote import RemoteWorkers
from . import ranks


def fixed_setting(owner: str, name: str, value: Any) -> AttributeError:
    """What setting ``owner.name`` after it is made raises: its workers and its order were
    made from the value it was given, and a new one would be ignored without a word."""
    kind = "Sequence" if owner == "seq" else "Loader"
    carry = "`shmaug.EpochSync(new)` under fit(initial_epoch=...), or `new.epoch = " \
            "old.epoch`," if kind == "Sequence" else "`new.epoch = old.epoch`"
    return AttributeError(
        f"`{owner}.{name}` is fixed when the {kind} is made (its workers and its order were "
        f"made from it), so setting it to {got(value)} would change nothing. Fix: make a new "
        f"{kind} with the new {name} and close the old one; {carry} carries the epoch on "
        f"(docs/loader.md, \"Changing settings between epochs\").")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def boolean(name: str, value: Any) -> bool:
    """A real boolean (numpy's too): ``shuffle='no'`` is truthy, and must not shuffle."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(
            f"`{name}` must be True or False; received {got(value)}. Fix: pass "
            f"`{name}=True` or `{name}=False`."
        )
    return bool(value)


def mix(value: Any) -> Any:
    """``mix``: None, or a ``shmaug.ops.Mix`` (what ``MixUp`` and ``CutMix`` make)."""
    if value is not None and not isinstance(value, Mix):
        keras = type(value).__name__ in ("MixUp", "CutMix")
        raise ArgumentTypeError(
            f"`mix` expects shmaug.ops.MixUp(...), CutMix(...) or Mix(...), or None; received "
            f"{got(value)}. Fix: " + (
                f"pass mix=shmaug.ops.{type(value).__name__}(...) with the layer's arguments "
                f"(Keras' layer runs on whole batches in the model's graph; shmaug's mixes "
                f"them in its workers)." if keras else
                "pass e.g. mix=shmaug.ops.MixUp(0.2, num_classes=10)."))
    return value


def shuffle(value: Any) -> bool | str | None:
    """``shuffle``: True, False, None (a ``Loader``'s False; a ``Sequence`` follows what
    Keras asks for: see ``Sequence``) or "blocks" (shards a few at a time: ``plan.blocks``)."""
    if value is None or value == BLOCKS and isinstance(value, str):
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(
            f"`shuffle` must be True, False, None or \"blocks\"; received {got(value)}. Fix: "
            f"pass `shuffle=True` (the exact shuffle), `shuffle=False`, or "
            f"`shuffle=\"blocks\"` (record shards read a few at a time)."
        )
    return boolean("shuffle", value)


def shuffle_window(value: Any, shuffle: Any) -> int | None:
    """``shuffle_window``: a positive number of shards, only with ``shuffle="blocks"`` (None
    there: ``plan.blocks.DEFAULT_WINDOW``)."""
    if value is None:
        return None
    positive_int("shuffle_window", value)  # (its type first: the fix below keeps it)
    if shuffle != BLOCKS:
        raise ArgumentError(
            f"`shuffle_window`={value!r} sets how many shards `shuffle=\"blocks\"` mixes, but "
            f"`shuffle` is {got(shuffle)}. Fix: pass shuffle=\"blocks\", or leave "
            f"`shuffle_window` out."
        )
    return positive_int("shuffle_window", value)


def positive_int(name: str, value: Any) -> int:
    if not _is_int(value) or value <= 0:
        raise ArgumentError(
            f"`{name}` must be a positive integer; received {got(value)}. "
            f"Fix: pass e.g. `{name}=32`."
        )
    return int(value)


def non_negative_int(name: str, value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise ArgumentError(
            f"`{name}` must be an integer >= 0; received {got(value)}. Fix: pass e.g. "
            f"`{name}=0`."
        )
    return int(value)


def default_workers() -> int:
    """One worker per core this process may run on (under torchrun, per core of its share:
    ``platform.cores_per_rank``)."""
    return platform.cores_per_rank()


_WORKERS_PER_CORE = 8  # beyond this many processes per core, more only adds memory and contention


# workers="auto": the pool sizes itself between epochs (autoscale._autotune)
AUTO_WORKERS: Final = "auto"


def workers(value: Any) -> int | str | RemoteWorkers:
    """A worker count, ``AUTO_WORKERS`` (returned as it is: the loader resolves it), or remote
    workers (``shmaug.ray.Workers``)."""
    if isinstance(value, RemoteWorkers):
        return value
    if value is None:
        return default_workers()
    if isinstance(value, str) and value == AUTO_WORKERS:
        return AUTO_WORKERS
    if not _is_int(value) or value < 0:
        raise ArgumentError(
            f"`workers` must be None (one per core), \"auto\" (as few as keep the consumer "
            f"fed, up to one per core), 0 (run in this process) or a positive integer; "
            f"received {got(value)}. Fix: pass e.g. `workers=2` or `workers=\"auto\"`."
        )
    cores = default_workers()
    if value > _WORKERS_PER_CORE * cores:
        # Refused before anything starts: a typo here must not fork a million processes.
        raise ArgumentError(
            f"`workers`={value} would start {value} processes on {cores} core(s); more than "
            f"{_WORKERS_PER_CORE} per core ({_WORKERS_PER_CORE * cores} here) only adds memory "
            f"and contention. Fix: pass `workers=None` (one per core) or a number up to "
            f"{_WORKERS_PER_CORE * cores}."
        )
    return int(value)


def draw_seed() -> int:
    """A seed for ``seed=None``, fixed for the run (``loader.seed``): drawn from Python's
    ``random``, as Keras' layers draw theirs, so that ``keras.utils.set_random_seed`` (or
    ``random.seed``) repeats a run, and a run seeding nothing differs from the last (``random``
    is seeded from the OS, and again in each forked child)."""
    return random.getrandbits(63)


def seed(value: Any) -> int:
    if value is None:
        return draw_seed()
    if not _is_int(value) or value < 0:
        raise ArgumentError(
            f"`seed` must be None or an integer >= 0; received {got(value)}. "
            f"Fix: pass e.g. `seed=0`."
        )
    return int(value)


def batch_index(value: Any, batches: int, example: str = "seq[0]") -> int:
    """A batch index as a Python sequence takes one (an int, numpy's too; negative counts
    from the end), as a position in ``range(batches)``: one rule for ``seq[i]`` and
    ``loader.batch(i)``."""
    if not _is_int(value):
        raise ArgumentTypeError(
            f"A batch index must be an integer; received {got(value)}. Fix: index with an "
            f"int, e.g. `{example}` (convert with `int(...)` first)."
        )
    if not -batches <= value < batches:
        raise IndexError(f"batch index {value!r} out of range for {batches} batches")
    return int(value) % batches



def start_method(value: Any) -> str | None:
    methods = platform.start_methods()
    if value is not None and value not in methods:
        raise ArgumentError(
            f"`start_method` must be None (the platform default) or one of {methods} (the "
            f"methods this platform has); received {got(value)}. Fix: leave it out."
        )
    return value  # type: ignore[no-any-return]


def queue_size(value: Any) -> int | None:
    """``max_queue_size``: None (the default depth, ``handoff.depth``) or a positive int."""
    if value is None:
        return None
    if not _is_int(value) or value <= 0:
        raise ArgumentError(
            f"`max_queue_size` must be None (the default: enough batches for every worker, "
            f"within a memory bound) or a positive integer; received {got(value)}. Fix: "
            f"leave it out, or pass e.g. `max_queue_size=32`."
        )
    return int(value)


MAX_QUEUE_SIZE = 4096  # ring slots; each also costs bookkeeping made before any process starts


def queue_fits(slots: int, batch_rows: int = 0, sample_bytes: int | None = None) -> None:
    """``max_queue_size`` batches prepared ahead (a positive int, checked already), refused
    with the memory it would take when absurd, before the ring's bookkeeping or any process
    exists."""
    if slots > MAX_QUEUE_SIZE:
        per = "" if not batch_rows or sample_bytes is None else (
            f", at least {slots * batch_rows * sample_bytes:,} bytes of shared memory for "
            f"samples the size of the input ({batch_rows} x {sample_bytes:,} bytes per batch)")
        raise ArgumentError(
            f"`max_queue_size`={slots} asks for {slots} batches prepared ahead{per}; shmaug "
            f"takes at most {MAX_QUEUE_SIZE}, and a few more than the workers can fill at once "
            f"gain nothing. Fix: leave `max_queue_size` out (the default follows the workers, "
            f"within a memory bound)."
        )


def timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0:
        raise ArgumentError(
            f"`timeout` must be None (wait forever) or a number of seconds > 0; received "
            f"{got(value)}. Fix: pass e.g. `timeout=30`."
        )
    return float(value)


def callable_or_none(name: str, value: Any) -> Any:
    if isinstance(value, type):  # callable, but calling it builds an object, not an image
        shown = f"{value.__module__}.{value.__qualname__}"
        example = 'Op("rotate", degrees=(-10, 10))' if value.__name__ == "Op" else \
            f"{value.__qualname__}(...)"
        raise ArgumentTypeError(
            f"`{name}` must be a callable `fn(image, rng) -> image` or None; received the "
            f"class {shown} itself, not an instance of it. Fix: pass an instance, e.g. "
            f"`{name}={example}`."
        )
    wrapper = WRAPPERS.get(type(value).__module__.partition(".")[0])
    if wrapper is not None and name == "augment":  # called with keywords or tensors
        raise ArgumentTypeError(
            f"`{name}` must be a callable `fn(image, rng) -> image` or None; received "
            f"{got(value)}, which is called otherwise. Fix: pass `{name}={wrapper}(...)` "
            f"around it: it runs as a shmaug pipeline in the workers.")
    if value is not None and not callable(value) and hasattr(value, "augment_targets"):
        raise ArgumentTypeError(
            f"`{name}` must be a callable `fn(image, rng) -> image`; received {got(value)}, "
            f"which moves targets (`augment_targets`) but is not called where there are none "
            f"(predict, y=None). Fix: add def __call__(self, image, rng): return "
            f"self.augment_targets(image, {{}}, rng)[0]")
    if value is not None and not callable(value):
        several = isinstance(value, (list, tuple)) and name == "augment"
        raise ArgumentTypeError(
            f"`{name}` must be a callable `fn(image, rng) -> image` or None; received "
            f"{got(value)}. Fix: pass a function or a shmaug pipeline such as "
            f"`shmaug.Compose([...])`" + (
                ", which runs its ops in turn on one image; several views of each image "
                "(SimCLR, DINO) come from one function returning them stacked, "
                "`np.stack([view(image, rng) for view in views])` (docs/ops.md, \"Several "
                "views of each sample\")." if several else "."))
    why = None if value is None or name != "augment" else _not_image_and_rng(value)
    first = _first_parameter(value) if why is None and name == "augment" else None
    if first in ("rng", "random_state", "generator"):
        raise ArgumentTypeError(
            f"`{name}` is called fn(image, rng), but {got(value)} takes the generator first "
            f"(`{first}`), so it would get the image as its generator. Fix: swap its "
            f"parameters, def {getattr(value, '__name__', 'fn')}(image, {first}).")
    if why is not None and getattr(value, "__module__", None) == "shmaug.presets":
        raise ArgumentTypeError(
            f"`{name}` received the preset {value.__name__} itself, which makes a pipeline "
            f"when called. Fix: call it, `{name}=shmaug.presets.{value.__name__}()`.")
    unbound = _unbound_options(value) if why is not None else []
    if unbound:
        them = "them" if len(unbound) > 1 else "it"
        raise ArgumentTypeError(
            f"`{name}` is called fn(image, rng), and {got(value)} also needs "
            f"{', '.join(f'`{o}`' for o in unbound)}, which nothing passes. Fix: bind {them}, "
            f"`{name}=functools.partial({getattr(value, '__name__', 'your_op')}, "
            f"{unbound[0]}=...)`"
            f" (it pickles), or give {them} a default.")
    if why is not None:
        raise ArgumentTypeError(
            f"`{name}` must be a callable `fn(image, rng) -> image`; received {got(value)}, "
            f"which {why}. Fix: wrap code written as fn(image): shmaug.from_array(fn) for "
            f"numpy or OpenCV code, shmaug.from_pil(fn) for PIL code (each seeds random and "
            f"np.random from rng), with its options set by "
            f"shmaug.from_array(functools.partial(fn, option=...)); if its second parameter "
            f"is the generator, name it `rng`.")
    return value


_GENERATORS = (np.random.Generator, np.random.RandomState, random.Random)


def shared_generators(*augments: Any) -> None:
    """Warn of a user's function that draws from a generator made at import (a module's
    ``RNG = np.random.default_rng(1234)``): every worker holds a copy in the same state, so
    workers drew the same numbers (36 of 64 samples distinct with 2 workers) and the batches
    changed with the worker count, where ``augment``'s ``rng`` is seeded per sample."""
    for augment in augments:
        if augment is None:
            continue
        for fn in members(augment):
            fn = getattr(fn, "fn", fn)
            fn = getattr(fn, "__func__", getattr(fn, "func", fn))  # methods, partials
            code = getattr(fn, "__code__", None)
            if code is None or from_shmaug(getattr(fn, "__module__", None)):
                continue
            scope = getattr(fn, "__globals__", {})
            for name in sorted(globals_read(code)):
                if isinstance(scope.get(name), _GENERATORS):
                    warn(f"`augment` ({getattr(fn, '__qualname__', fn)}) reads `{name}`, a "
                         f"{type(scope[name]).__name__} made when its module was imported: "
                         f"each worker holds a copy of it in the same state, so where it draws "
                         f"from it, workers draw the same numbers, and the batches change "
                         f"with the worker count. Fix: draw from the `rng` shmaug hands the "
                         f"function (fn(image, rng)), which is seeded per sample.")
                    return


def _first_parameter(fn: Any) -> str | None:
    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return parameters[0].lower() if len(parameters) >= 2 else None


# Names a second parameter meant for the generator has (``rng``, ``random_state``, ...),
# in part or whole: ``fn(image, rnd=None)`` falls back on a generator of its own without one.
_RNG_NAMES = ("rng", "random", "generator", "gen", "seed", "state", "key", "rand", "rnd")
_RNG_WHOLE = ("r", "rs", "g", "rg", "_")


def _not_image_and_rng(fn: Any) -> str | None:
    """Why ``fn(image, rng)`` would not run ``fn`` as an op, or None: it does not bind, or
    its second parameter is an option with a default (``preprocess_input(x,
    data_format=None)``, ``fn(img, mode="tf")``) that would be handed the generator."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a readable signature
        return None
    try:
        signature.bind(None, None)
    except TypeError:
        return f"cannot be called so (it takes {signature})"
    positional = [p for p in signature.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 or positional[1].default is inspect.Parameter.empty:
        return None
    second = positional[1]
    if _names_a_generator(second.name):
        return None
    return (f"takes {signature}: its second parameter, `{second.name}`, is an option with a "
            f"default, and would be handed the random generator")


def _unbound_options(fn: Any) -> list[str]:
    """The parameters without a default that ``fn(image, rng)`` leaves out, where ``fn``
    takes the generator second (``fn(image, rng, strength)``): an op short of its options,
    not code of another form to wrap."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 or not _names_a_generator(positional[1].name):
        return []
    unbound = [p for p in parameters if p not in positional[:2] and p.default is p.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind is p.POSITIONAL_ONLY for p in unbound):  # (no keyword binds those)
        return []
    return [p.name for p in unbound]


def _names_a_generator(name: str) -> bool:
    name = name.lower()
    return any(word in name for word in _RNG_NAMES) or name in _RNG_WHOLE


def nonempty_epoch(plan: BatchPlan, num_shards: int = 1) -> None:
    if len(plan) == 0:
        of = f" per shard of {num_shards}" if num_shards > 1 else ""
        raise ArgumentError(
            f"`batch_size`={plan.batch_size} is larger than the dataset ({plan.n} samples{of}) "
            f"and `drop_remainder`=True, so an epoch has no batch. Fix: lower `batch_size` "
            f"or set `drop_remainder=False`."
        )


def shape(name: str, value: Any) -> tuple[int, ...]:
    """A shape of positive whole sizes (16.5 is refused, not cut to 16)."""
    try:
        out = () if isinstance(value, (str, bytes)) else tuple(value)
    except TypeError:
        out = ()
    if not out or not all(_is_int(s) and s > 0 for s in out):
        raise ArgumentError(
            f"`{name}` must be a tuple of positive whole sizes such as (64, 64) or (64, 64, 1); "
            f"received {got(value)}. Fix: pass the shape of one sample, e.g. `{name}=(64, 64)`, "
            f"or leave it out to learn it from sample 0."
        )
    return tuple(int(s) for s in out)


def dtype(name: str, value: Any) -> np.dtype:
    """A numeric dtype; ``"bfloat16"`` too, as ``ml_dtypes`` (which Keras, JAX and TensorFlow
    bring) defines it for numpy; TensorFlow's and torch's dtypes by their names
    (``tf.float16``, ``torch.bfloat16``)."""
    given = value
    if type(value).__module__.partition(".")[0] in ("tensorflow", "torch"):  # by its name
        value = str(getattr(value, "name", value)).rpartition(".")[2]  # ("torch.float16")
    if isinstance(value, str) and value == "bfloat16":
        return bfloat16(name)
    try:
        dt: np.dtype[Any] = np.dtype(value)
    except TypeError:
        dt = np.dtype(object)
    if dt.name == "bfloat16":
        return dt
    if dt.byteorder not in "=|":  # ('>f2': the batch in this machine's order, which a
        dt = dt.newbyteorder("=")  # model reads; and float16's overflow check sees it)
    if dt.kind not in "biuf":
        raise ArgumentTypeError(
            f"`{name}` must be a numeric dtype such as 'uint8' or 'float32'; received "
            f"{got(given)}. Fix: pass e.g. `{name}='float32'`, or leave it out to learn it "
            f"from sample 0."
        )
    return dt



def bfloat16(name: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise ArgumentError(
            f"`{name}`='bfloat16' needs ml_dtypes, numpy's bfloat16 (Keras, JAX and TensorFlow "
            f"install it). Fix: pip install ml-dtypes, or pass `{name}='float16'`.") from None
    dt: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
    return dt


def shard(num_shards: Any, shard_index: Any, n: int) -> tuple[int, int]:
    """``(num_shards, shard_index)`` checked against a dataset of ``n`` samples; (1, 0) when
    both are None. A ``num_shards`` above 1 needs its ``shard_index``: every host silently
    taking shard 0 would train on a fraction of the data, K times over."""
    if num_shards is None:
        if shard_index is not None:
            raise ArgumentError(
                f"`shard_index`={shard_index!r} was given without `num_shards`. Fix: pass "
                f"both, e.g. num_shards=<number of hosts>, shard_index=<this host's rank>."
            )
        ranks.unsharded()
        return 1, 0
    if not _is_int(num_shards) or num_shards <= 0:
        raise ArgumentError(
            f"`num_shards` must be a positive integer (the number of hosts or processes "
            f"sharing each epoch); received {got(num_shards)}. Fix: pass e.g. "
            f"num_shards=2, or leave it out for one process."
        )
    if shard_index is None and num_shards == 1:
        return 1, 0
    if not _is_int(shard_index) or not 0 <= shard_index < num_shards:
        raise ArgumentError(
            f"`shard_index` must be an integer in 0..{num_shards - 1} (this host's rank) with "
            f"`num_shards`={num_shards}; received {got(shard_index)}. Fix: pass e.g. "
            f"shard_index=jax.process_index() or torch.distributed.get_rank()."
        )
    if num_shards > n:
        raise ArgumentError(
            f"`num_shards`={num_shards} is more than the {n} samples of the dataset, so a "
            f"shard would be empty. Fix: use at most {n} shards, or a larger dataset."
        )
    return int(num_shards), int(shard_index)


def shard_seed(num_shards: int, shuffle: bool, seed: int | None) -> None:
    """Shards of a shuffled epoch split one global order, which only a seed every host shares
    makes: a seed each host drew itself would overlap some samples and drop others, silently."""
    if num_shards > 1 and shuffle and seed is None:
        raise ArgumentError(
            f"`num_shards`={num_shards} with `shuffle`=True needs a `seed`: every host must "
            f"shuffle into the same order to take disjoint parts of it, and seed=None draws a "
            f"different one per host. Fix: pass the same seed on every host, e.g. seed=0."
        )


def sharded_plan(n: int, batch_size: int, drop_remainder: bool, num_shards: Any,
                 shard_index: Any, shuffle: bool, seed: int | None) -> tuple[int, int, BatchPlan]:
    """``(num_shards, shard_index, plan)``: the checked shard of ``n`` samples and the batches
    of its epochs (``seed``: as given, None when drawn)."""
    count, index = shard(num_shards, shard_index, n)
    shard_seed(count, shuffle, seed)
    ranks.agree(count, index, seed, n, batch_size, shuffle)
    plan = BatchPlan(Shard(count, index).size(n), batch_size, drop_remainder)
    nonempty_epoch(plan, count)
    return count, index, plan


def fingerprint(n: int, plan: BatchPlan, shuffle: bool | str, num_shards: int,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the batches of a run depend on, besides the seed: a saved state must match it.
    ``extra`` holds ``sampling`` (``plan.sampling.fingerprint``) only under weighted sampling,
    and ``blocks`` (``plan.blocks.Blocks.fingerprint``) only under ``shuffle="blocks"``."""
    return {"samples": n, "batch_size": plan.batch_size, "shuffle": shuffle,
            "drop_remainder": plan.drop_remainder, "num_shards": num_shards, **(extra or {})}


_FIXES = {  # how to make a state fit, per fingerprint field
    "samples": "use the same dataset (same number of samples)",
    "batch_size": "pass the same `batch_size`",
    "shuffle": "pass the same `shuffle`",
    "drop_remainder": "pass the same `drop_remainder`",
    "num_shards": "use the same number of hosts (`num_shards`)",
    "seed": "pass the saved seed, e.g. `seed=state['seed']`",
    "sampling": "pass the same `sampling_weights` and `samples_per_epoch`",
    "blocks": "pass the same `shuffle_window`, over the same shards",
}


def _held_as(kind: str) -> str:
    """How the docs call a ``kind``'s object: ``loader``, ``seq``."""
    return "seq" if kind.endswith("Sequence") else "loader"


def resume_state(state: Any, kind: str, version: int, expected: dict[str, Any],
                 batches: int) -> tuple[int, int]:
    """The ``(epoch, batch)`` of a ``state_dict()`` saved by a ``kind`` ("shmaug.Loader") of
    format ``version`` whose ``fingerprint`` (and seed) equal ``expected``; anything else is
    refused naming the first field that differs and how to fix it."""
    if not isinstance(state, dict):
        raise ArgumentTypeError(
            f"`state` must be the dict that `{kind}.state_dict()` returned (or its JSON "
            f"round trip); received {got(state)}. Fix: save `{_held_as(kind)}.state_dict()` "
            f"(e.g. with json.dump) and pass that dict back."
        )
    if state.get("format") != kind or state.get("version") != version:
        raise ArgumentError(
            f"`state` has format={state.get('format')!r}, version={state.get('version')!r}; "
            f"this {kind} reads format={kind!r}, version={version}. Fix: load a state saved "
            f"by `{kind}.state_dict()` of this shmaug version, or start afresh."
        )
    saved = {**dict(state.get("fingerprint") or {}), "seed": state.get("seed")}
    # A state of a weighted run must not resume an unweighted one (nor the reverse).
    # ... nor a state of shuffle="blocks" one of other windows or shards.
    for field, value in {"sampling": None, **expected,
                         "blocks": expected.get("blocks")}.items():
        if saved.get(field) != value:
            staged = "" if field not in ("samples", "batch_size") else (
                f" A new stage of a schedule (another batch size, more data) carries only the "
                f"epoch on: `{_held_as(kind)}.epoch = state['epoch']`.")
            raise ArgumentError(
                f"`state` was saved with {field}={saved.get(field)!r} but this {kind} has "
                f"{field}={value!r}, so its batches would not continue that run. Fix: "
                f"{_FIXES.get(field, 'create it as the saved run was')}.{staged}"
            )
    epoch: Any = state.get("epoch")
    batch: Any = state.get("batch")
    if not (_is_int(epoch) and _is_int(batch) and epoch >= 0 and 0 <= batch < batches):
        raise ArgumentError(
            f"`state` holds epoch={epoch!r}, batch={batch!r}; expected integers, epoch >= 0 "
            f"and batch in 0..{batches - 1}. Fix: pass the dict `state_dict()` returned, "
            f"unchanged."
        )
    return int(epoch), int(batch)

