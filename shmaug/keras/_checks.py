"""Checks of what only the Keras facade takes: Keras' ``use_multiprocessing``, a dict ``x``'s
``image_key``, ``pin_memory``'s default, the bindings a ``Sequence.state_dict()`` saved, and
what changes once a Sequence is made (its settings, refused; what its worker hooks read of its
attributes, told once: the workers hold a copy of it taken as they started, so a curriculum's
``self.level = epoch`` reaches none of them until a restart after an idle stop, and
``workers=0`` reads it at once). The rest is checked where the engine checks it."""

from __future__ import annotations

import dis
import hashlib
import inspect
import logging
import multiprocessing
import pickle
import sys
import types
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.config import checks as check
from ..engine.config import inputs
from ..engine.config import tree
from ..engine.handoff import pinned
from ..errors import (ArgumentError, ArgumentTypeError, NotInitializedError, from_shmaug, got,
                      warn)

if TYPE_CHECKING:
    from ._runtime import Runtime
    from .sequence import Sequence

log = logging.getLogger(__name__)


FIXED = frozenset({"batch_size", "seed", "shuffle", "mix", "image_key", "augment",
                   "sampling_weights", "workers", "max_queue_size", "use_multiprocessing"})
"""What a Sequence's workers and order are made from, under the names it shows (and the
``augment`` hook, and ``sampling_weights``, which a schedule reaches for): set once it is
made, a new value would be ignored without a word (``keep_setting``)."""

_GIVEN = {"batch_size": ("batches", "batch_size"), "seed": ("batches", "seed"),
          "shuffle": ("batches", "shuffle"), "sampling_weights": ("batches", "sampling_weights"),
          "workers": ("workers", "workers"), "max_queue_size": ("workers", "max_queue_size"),
          "augment": ("output", "augment"), "mix": ("output", "mix")}  # in a Sequence's Settings
_DEFAULTED = frozenset({"seed", "workers", "max_queue_size", "image_key"})  # None: resolved


def subclassed(cls: type, facade: frozenset[str]) -> None:
    """A user's subclass of the Sequence owns every name but the ``facade``'s own, which
    redefined would break it without a word (its own modules call them). A ``__getitem__``
    that makes batches itself (a ``PyDataset`` ported as it was) is told: Keras reads every
    batch through it, so the workers and ``augment`` would never run."""
    if from_shmaug(cls.__module__):
        return
    taken = sorted(name for name in facade if name in vars(cls))
    if taken:
        raise TypeError(
            f"{cls.__qualname__} defines {', '.join(f'`{n}`' for n in taken)}, which "
            f"shmaug.Sequence uses itself (its Keras facade calls it). Fix: give yours "
            f"another name.")
    if multiprocessing.parent_process() is not None:  # (not again in each spawned worker)
        return
    counting = [name for name in ("on_epoch_begin", "on_epoch_end")
                if "epoch" in _stored_on_self(vars(cls).get(name))]
    if counting:
        warn(f"{cls.__qualname__}.{counting[0]} sets self.epoch, which is shmaug.Sequence's "
             f"own count of its passes (setting it seeks: the next pass serves that epoch), "
             f"and Keras calls on_epoch_end once more than its epochs: `self.epoch += 1` "
             f"skips every other epoch's order and draws. Fix: drop that line (the Sequence "
             f"counts its epochs; read self.epoch), or name your counter otherwise.")
    own = vars(cls).get("__getitem__")
    if own is None:
        return
    if not _reaches(cls, own, _FACADE_WAYS, set()):
        warn(f"{cls.__qualname__}.__getitem__ makes its batches without shmaug.Sequence's "
             f"(it never calls super().__getitem__): Keras reads every batch through it, so "
             f"shmaug's workers and `augment` never run. Fix: leave __getitem__ out "
             f"(shmaug.Sequence makes the batches from x, y and augment), or return "
             f"super().__getitem__(index) from it.")
    elif not _reaches(cls, own, _PASS_WAYS, set()):
        warn(f"{cls.__qualname__}.__getitem__ reads its batches by `batch` or `loader` "
             f"(it never calls super().__getitem__), which serve a batch of the epoch the "
             f"Sequence is at without moving its passes: under fit every epoch would be the "
             f"same shuffle and the same draws. Fix: take the batch as "
             f"super().__getitem__(index) and change it from there.")


def _stored_on_self(fn: Any) -> set[str]:
    """The attributes ``fn``'s own code sets on its first argument (``self.name = ...``,
    ``self.name += 1``; not ``self.tracker.name = ...``): a store whose object was loaded
    just before it, or, for ``+=``, loaded and copied before the attribute was read."""
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    if code is None or not code.co_argcount:
        return set()
    me, ops = code.co_varnames[0], list(dis.get_instructions(code))

    def loads_me(i: dis.Instruction) -> bool:
        # (3.13 fuses two loads, the last on top; a self that a closure holds is a cell's)
        names = i.argval if isinstance(i.argval, tuple) else (i.argval,)
        return i.opname.startswith(("LOAD_FAST", "LOAD_DEREF")) and names[-1] == me

    augmented = {c.argval for a, b, c in zip(ops, ops[1:], ops[2:])
                 if loads_me(a) and b.opname in ("COPY", "DUP_TOP") and c.opname == "LOAD_ATTR"}
    return {i.argval for k, i in enumerate(ops) if k and i.opname == "STORE_ATTR" and (
        loads_me(ops[k - 1]) or ops[k - 1].opname in ("SWAP", "ROT_TWO")
        and i.argval in augmented)}


# What a __getitem__ that goes through shmaug's passes names: super() or the base's own
# __getitem__ (``shmaug.Sequence.__getitem__(self, i)``); its batches alone, those or the
# facade's batch and loader (which serve the epoch the Sequence is at).
_PASS_WAYS = frozenset({"super", "__getitem__"})
_FACADE_WAYS = _PASS_WAYS | {"batch", "loader"}


def _reaches(cls: type, fn: Any, ways: frozenset[str], seen: set[str]) -> bool:
    """Whether ``fn`` (a subclass's method, unwrapped from its decorators) may make its
    batches one of the ``ways``: it names one, or calls a method of the subclass's own that
    does. Unreadable code is given the benefit of the doubt."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return True
    codes, names = [code], set()
    while codes:  # with the comprehensions and lambdas inside it
        one = codes.pop()
        if ways & set(one.co_names) or "__class__" in one.co_freevars:
            return True
        names |= set(one.co_names)
        codes += [c for c in one.co_consts if isinstance(c, types.CodeType)]
    for cell in getattr(fn, "__closure__", None) or ():  # a decorator's wrapped function
        try:
            inner = cell.cell_contents
        except ValueError:  # (an empty cell)
            continue
        if callable(inner) and f"<{id(inner)}>" not in seen:
            seen.add(f"<{id(inner)}>")
            if _reaches(cls, inner, ways, seen):
                return True
    for name in names - seen:
        seen.add(name)
        method = next((vars(klass)[name] for klass in cls.__mro__
                       if name in vars(klass) and not from_shmaug(klass.__module__)),
                      None)
        if callable(method) and _reaches(cls, method, ways, seen):
            return True
    return False


def keep_setting(name: str, held: Any, settings: Any, value: Any, seq: Any) -> None:
    """Let ``seq.name = value`` change nothing where ``value`` is the value it holds or the
    argument as it was given (``keras.utils.Sequence`` code sets ``self.seed = seed``, None
    where one was drawn, and ``self.use_multiprocessing``, which changes nothing here);
    refuse anything else once the Sequence is made (in a subclass's ``__init__``, told to
    pass it to ``super().__init__``)."""
    place = _GIVEN.get(name)
    given = getattr(getattr(settings, place[0]), place[1]) if place else None
    if name == "workers":
        held = given  # (what Keras reads, 1, is not what the Sequence runs)
    if name == "use_multiprocessing" or _same(held, value) or _same(given, value) or (
            value is None and name in _DEFAULTED):
        return
    if name == "augment" and not callable(value):
        raise AttributeError(
            f"`seq.augment` is shmaug's argument and hook (what each sample goes through), "
            f"so setting it to {got(value)} would change nothing. Fix: name your flag "
            f"otherwise (e.g. `self.augmenting`), or pass `augment=None` for no augmentation.")
    if initialising(seq):  # (a ported PyDataset's `self.shuffle = shuffle`)
        raise AttributeError(
            f"Setting self.{name} to {got(value)} while {type(seq).__qualname__}.__init__ "
            f"runs, after super().__init__(...) made the Sequence with {name}={got(held)}, "
            f"would change nothing: its workers and its order were made from that. Fix: pass "
            f"{name}= to super().__init__(...) and drop this line.")
    raise check.fixed_setting("seq", name, value)


def own_length(cls: str, own: int, plan: Any, shards: int, shard: int) -> ArgumentError:
    """A subclass's ``__len__`` that counts more batches than the Sequence makes."""
    why = "".join((f" (its shard: shard_index={shard} of num_shards={shards})"
                   if shards > 1 else "",
                   ", the last, partial one dropped (drop_remainder=True)"
                   if plan.drop_remainder and plan.n % plan.batch_size else ""))
    return ArgumentError(
        f"{cls}.__len__ returns {own}, but this Sequence makes {len(plan)} batches of "
        f"{plan.batch_size} from {plan.n} samples{why}: Keras would ask for batches that are "
        f"not there (an epoch would read the data more than once). Fix: leave __len__ out "
        f"(shmaug.Sequence counts its batches; fit(steps_per_epoch=...) for fewer).")


def read_in_order(reader: str) -> None:
    """Warn that ``reader`` reads a Sequence made with ``shuffle=None`` that changes its
    samples (a training set's) in order, as evaluate does."""
    warn(f"{reader} reads this Sequence in order, as evaluate does: with shuffle=None (which "
         f"follows Keras' fit per pass) its batches come unshuffled, and unmixed under a "
         f"`mix`. Fix: pass shuffle=True to the Sequence for training; for validation or "
         f"evaluation, shuffle=False, which silences this.")


DATA = frozenset({"x", "y", "sample_weight"})
"""The data a Sequence is made over: its workers read what was given then, so an array set in
its place afterwards would be served never (``keep_data``)."""


def initialising(seq: Any) -> bool:
    """Whether an ``__init__`` of ``seq`` (a subclass's, whatever it names its first
    parameter) is running, read off the stack."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__init__" and code.co_argcount and \
                frame.f_locals.get(code.co_varnames[0]) is seq:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def keep_data(name: str, held: Any, given: int | None, seq: Any, value: Any) -> None:
    """Let ``seq.name = value`` pass where ``value`` is what the Sequence holds (or serves),
    or, while a subclass's ``__init__`` runs, the argument as given (``self.x, self.y = x, y``
    after ``super().__init__``, Keras' ``PyDataset`` idiom, with a list or a dict): known by
    its ``id`` alone, so that nothing of it is kept (a list of arrays stayed alive until
    close), and trusted only there, where the caller's frame still holds it (an id freed may
    be another object's later). Refuse other data, which would be ignored: the same images
    and labels would be served, without a word."""
    if value is held or (id(value) == given and initialising(seq)):
        return
    raise AttributeError(
        f"`seq.{name}` is the data the Sequence was made over: its workers serve what was "
        f"given then, so setting it to {got(value)} would change nothing. Fix: for new data, "
        f"make a new Sequence and close the old one (`with`, or `close()`; docs/keras.md, "
        f"\"New data each round\"); to change values, write into the numpy array given, in "
        f"place (`{name}[rows] = ...`; a list given was copied; docs/loader.md, \"Changing "
        f"settings between epochs\"); to "
        f"keep an array of your own on a subclass, name it otherwise (`self.my_{name}`).")


def _same(held: Any, value: Any) -> bool:
    """One value: the same object, or equal (numbers and booleans by value, whatever their
    type: numpy's or Python's)."""
    if held is value:
        return True
    kinds = ((bool, np.bool_), (int, float, np.number))
    try:
        return bool(held == value) and (type(held) is type(value) or any(
            isinstance(held, kind) and isinstance(value, kind) for kind in kinds))
    except (TypeError, ValueError):  # (arrays: only the same one is the same)
        return False


def use_multiprocessing(value: Any) -> None:
    """Keras' PyDataset argument, accepted so a PyDataset's arguments work unchanged; False,
    which cannot make shmaug's workers threads, is ignored with a warning."""
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(
            f"`use_multiprocessing` must be True, False or None; received {got(value)}. Fix: "
            f"leave it out: shmaug always runs its `workers` in processes."
        )
    if value is not None and not value:
        warn("shmaug.Sequence always runs its `workers` in processes (they share the data "
             "through shared memory, so a process costs no copy), so "
             "use_multiprocessing=False cannot make them threads and is ignored. Fix: leave "
             "it out; pass workers=0 to run everything in this process instead.")


def seek(epoch: Any, batch: Any, batches: int) -> tuple[int, int]:
    """``Sequence.seek``'s arguments: an epoch, and a batch of the ``batches`` of one."""
    epoch = check.non_negative_int("epoch", epoch)
    batch = check.non_negative_int("batch", batch)
    if batch >= batches:
        raise ArgumentError(
            f"`batch` must be below the {batches} batches of an epoch; received {batch}. "
            f"Fix: pass seek(epoch + batch // {batches}, batch % {batches})."
        )
    return epoch, batch


def not_set_up(cls: str, name: str) -> NotInitializedError:
    """A subclass ``cls`` whose ``__init__`` never called ``Sequence.__init__``, found when
    its attribute ``name`` (one that sets) was missing."""
    return NotInitializedError(
        f"{cls}.__init__ did not call super().__init__(...), so this shmaug.Sequence was "
        f"never set up (it has no `{name}`). Fix: call super().__init__(x, y, "
        f"batch_size=..., ...) in {cls}.__init__, before the Sequence is used.")


# Keras' ImageDataGenerator iterators' attributes, and where a Sequence's data keeps them
_ITERATORS_HAD = {
    "class_indices": "the source's, `seq.x.class_indices` (the ImageFiles you passed)",
    "classes": "the labels in the data's order, `seq.x.labels` (an ImageFiles') or your `y`",
    "labels": "the labels in the data's order, `seq.x.labels` (an ImageFiles') or your `y`",
    "filenames": "the source's paths, `seq.x.paths`, in the order predict returns rows",
    "filepaths": "the source's paths, `seq.x.paths`, in the order predict returns rows",
    "samples": "`len(seq.x)`",
    "n": "`len(seq.x)`",
    "reset": "no call: each pass (a fit epoch, a `for` loop) begins at its first batch; "
             "`seq.seek(0)` goes back to the first epoch's draws",
}


def missing(cls: str, name: str) -> AttributeError:
    """No attribute ``name``; an ImageDataGenerator iterator's is told where it went."""
    said = f"{cls!r} object has no attribute {name!r}"
    if name in ("y", "sample_weight"):
        said += (f": a Sequence serves the {name} it was given in its batches (`seq.batch(i)`), "
                 f"and keeps no attribute of it. Fix: read the array you passed, or keep it "
                 f"on a subclass yourself (`self.{name} = {name}` in its __init__)")
    elif name in _ITERATORS_HAD:
        said += f" (Keras' ImageDataGenerator iterators had it): here it is {_ITERATORS_HAD[name]}"
    return AttributeError(said)


def pin_memory(value: bool | None) -> bool:
    """``pin_memory`` as given (checked already), or for None: whether Keras trains on an
    NVIDIA GPU through a backend that copies the very batch it is handed to the device (torch,
    JAX). TensorFlow's ``from_generator`` copies each batch into a tensor of its own first, so
    pinning the ring gains it nothing. Asked when the workers start (JAX's backends are set up
    by then: asking earlier would set them up before ``jax.distributed.initialize``)."""
    if value is not None:
        return value
    import keras

    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        on_gpu = bool(torch.cuda.is_available() and torch.version.cuda)  # not ROCm's
    elif backend == "jax":
        import jax

        on_gpu = jax.default_backend() == "gpu"
    else:
        return False
    return on_gpu and pinned.usable()  # the NVIDIA driver (ROCm's GPUs report "gpu" too)


def bindings(pairs: Any, asked: Any, batches: int) -> list[tuple[int, int, int]]:
    """A Sequence state's ``[[index, epoch, batch], ...]`` and ``asked`` indices, checked."""
    try:
        out = [(int(i), int(e), int(b)) for i, e, b in pairs or ()]
        ok = all(0 <= i < batches and e >= 0 and 0 <= b < batches for i, e, b in out)
        ok = ok and all(0 <= int(i) < batches for i in asked or ())
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ArgumentError(
            f"`state` holds bindings={got(pairs)}, asked={got(asked)}; expected "
            f"[[index, epoch, batch], ...] and indices in 0..{batches - 1}. Fix: pass the "
            f"dict `state_dict()` returned, unchanged."
        )
    return out


def split_inputs(x: Any, image_key: str | None,
                 loads: bool) -> tuple[str | None, Any, dict[str, Any]]:
    """``x`` or a dict of inputs -> (image key, the images, the other inputs); ``loads``: a
    ``load`` hook makes the images (from what ``x[image_key]`` holds: paths, ids)."""
    if not isinstance(x, dict):
        if image_key is not None and isinstance(x, Mapping):  # (np.load's NpzFile)
            raise ArgumentTypeError(
                f"`image_key`={image_key!r} names the images among the inputs of a dict `x`; "
                f"`x` is a {type(x).__name__}. Fix: pass x=dict(x).")
        if image_key is not None:  # (it would be ignored)
            raise ArgumentError(
                f"`image_key`={image_key!r} names the images among a dict `x`'s inputs, but `x` "
                f"is {type(x).__name__}, the images alone. Fix: leave `image_key` out, or pass "
                f"x={{{image_key!r}: images, ...}} with the model's other inputs.")
        return None, x, {}
    if image_key is None:
        candidates = [k for k, v in x.items() if _images_like(v)]
        if len(candidates) != 1:
            raise ArgumentError(
                f"`x` is a dict, so shmaug needs to know which entry holds the images to "
                f"augment; candidates (image sources, 3-D or 4-D arrays): {candidates}. Fix: "
                f"pass `image_key=` naming that entry."
            )
        image_key = candidates[0]
    if image_key not in x:
        raise ArgumentError(
            f"`image_key`={image_key!r} is not a key of `x` (keys: {list(x)}). Fix: pass one "
            f"of those."
        )
    entry = x[image_key]
    images = [k for k, v in x.items() if isinstance(v, np.ndarray) and v.ndim in (3, 4)]
    if isinstance(entry, np.ndarray) and entry.dtype.kind in "biuf" and entry.ndim < 3 and \
            images and not loads:
        raise ArgumentError(
            f"`image_key`={image_key!r} names an entry of shape {entry.shape}, "
            f"not images (N, H, W[, C]); entries that are: {images}. Fix: "
            f"image_key={images[0]!r}.")
    return image_key, x[image_key], {k: v for k, v in x.items() if k != image_key}


def _images_like(value: Any) -> bool:
    """Whether an entry of a dict ``x`` may be the images: a source (``shmaug.ImageFiles``), a
    list of images (of several sizes: numpy's ``ndim`` raised on it) or a 3-D or 4-D array."""
    if inputs.is_source(value):
        return True
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return value[0].ndim in (2, 3)
    try:
        return np.ndim(value) in (3, 4)
    except ValueError:  # (ragged sequences of another kind: token lists)
        return False


def side_targets(side: dict[str, Any], hooked: bool) -> None:
    """Check the targets and weights Keras will get as they are (``hooked``: a ``targets``
    hook makes them otherwise: what it makes meets the outputs)."""
    if not hooked:
        text_targets(side["y"])
        weights_follow_targets(side["y"], side["sample_weight"])


def set_early(seq: Any) -> dict[str, Any]:
    """The settings (``FIXED``) a subclass's ``__init__`` set before calling the Sequence's
    (Keras 2's order: ``self.batch_size = batch_size`` first), held against what was made
    (``made_otherwise``)."""
    return {name: value for name, value in vars(seq).items() if name in FIXED}


def made_otherwise(seq: Any, early: dict[str, Any], settings: Any) -> None:
    """Refuse a setting set before ``super().__init__`` that the Sequence was not made with:
    it was dropped without a word (``self.augment = fn`` first, then ``super().__init__(x,
    y)``: no augmentation; ``self.batch_size = 16``: batches of 32)."""
    for name, value in early.items():
        place = _GIVEN.get(name)
        given = getattr(getattr(settings, place[0]), place[1]) if place else None
        after = vars(seq).get(name, given)  # (as __init__ set it, or left it: the given)
        held = given if after is value else after
        if name == "use_multiprocessing" or _same(held, value) or _same(given, value):
            continue
        raise AttributeError(
            f"{type(seq).__qualname__}.__init__ set self.{name} to {got(value)} before "
            f"calling super().__init__(...), which made the Sequence with {name}="
            f"{got(held)}: its workers and order were made from that, so yours would be "
            f"dropped without a word. Fix: pass {name}= to super().__init__(...) and drop "
            f"that line.")


def _text_example(value: np.ndarray) -> str:
    """An array of text's dtype and first entry, as a message shows them."""
    first = value.flat[0]
    return f"{value.dtype}, e.g. " + (repr(str(first)) if isinstance(first, str)
                                      else repr(bytes(first)))


def text_inputs(inputs: dict[str, Any] | None, caller: str) -> None:
    """Refuse, as Keras' adapter begins a pass, an input beside the images that holds text
    (captions): it stopped ``caller`` at its first batch with Keras' bare "Invalid dtype:
    str544". A loop of one's own, or ``to_tf_dataset()``, takes text: not refused there."""
    for key, value in (inputs or {}).items():
        if tree.holds_text(value):
            raise ArgumentError(
                f"`x[{key!r}]` holds text ({_text_example(value)}), but Keras reads a "
                f"PyDataset's batches as numbers: {caller} would stop at its first batch "
                f"with Keras' \"Invalid dtype\". Fix: turn the text into numbers once (token "
                f"ids padded to one length, e.g. a keras.layers.TextVectorization adapted "
                f"on it, then called on it), or batch by batch in a `model_inputs` hook; on "
                f"the TensorFlow backend, {caller}(seq.to_tf_dataset()) carries it as "
                f"tf.string, for a model that takes text.")


def text_targets(y: Any) -> None:
    """Labels as text (a DataFrame's class names) passed every check and stopped ``fit`` at
    its first step with Keras' "Invalid dtype: str288": refused when the Sequence is made,
    naming the encoding. (A ``targets`` hook may turn them into numbers: not called then.)"""
    for at, value in tree.leaves(y):
        if tree.holds_text(value):
            raise ArgumentError(
                f"`{tree.shown(at)}` holds text ({_text_example(value)}), but "
                f"Keras' losses and metrics take numbers: fit would stop at its first step. "
                f"Fix: encode the labels once, e.g. `codes, class_names = pd.factorize(labels)` "
                f"(a pandas Categorical: `labels.cat.codes`; or sklearn's LabelEncoder), and "
                f"pass the codes (integers, for a sparse loss) or one-hot rows; or override "
                f"`targets` to turn them into numbers batch by batch.")


def weights_follow_targets(y: Any, sample_weight: Any) -> None:
    """Weights for outputs ``y`` has not: Keras looks each output's weights up by the name
    or position it has in ``y``, so these weigh nothing, and the output a misspelled key
    meant stopped ``fit`` with a bare ``KeyError``. (Fewer is Keras' to judge: an output
    whose loss is None needs none, ``weights_for_losses``.) Weights without targets, or
    shaped per output beside one output, Keras takes from a ``PyDataset`` not at all: told
    here, as the Sequence is made, not at ``fit``'s first step."""
    if sample_weight is None:
        return
    if y is None:
        raise ArgumentError(
            "`sample_weight` was given without `y`: Keras takes a batch's weights only beside "
            "its targets, (x, y, sample_weight), and a PyDataset's batch cannot be (x, None, "
            "w), so they would weigh nothing. Fix: pass y (the loss's targets; for a loss of "
            "your own that reads only x, y=x or np.zeros(len(x))), or hand the weights to the "
            "model as an input of its own (extra inputs beside the images: x as a dict).")
    per_output = isinstance(sample_weight, (dict, list, tuple))
    if per_output and not isinstance(y, (dict, list, tuple)):
        raise ArgumentError(
            f"`sample_weight` is a {type(sample_weight).__name__} of weights per output, but "
            f"`y` is one array (one output): Keras would stop at fit's first step. Fix: one "
            f"array (N,) of weights.")
    if isinstance(y, dict) and isinstance(sample_weight, dict):
        unknown = [k for k in sample_weight if k not in y]
        if unknown:
            raise ArgumentError(
                f"`sample_weight` has weights under {unknown}, which no output of `y` has "
                f"(y: {list(y)}; sample_weight: {list(sample_weight)}): Keras looks each "
                f"output's weights up by its name in y, so these would weigh nothing. Fix: "
                f"the keys of y, or one array (N,) that weighs every output.")
    elif isinstance(y, (list, tuple)) and isinstance(sample_weight, (list, tuple)) and \
            len(sample_weight) > len(y):
        raise ArgumentError(
            f"`sample_weight` has {len(sample_weight)} arrays for `y`'s {len(y)} outputs: "
            f"Keras takes them by position, so those past y's would weigh nothing. Fix: one per "
            f"output, in y's order, or one array (N,) that weighs every output.")


def one_output_for_class_weight(y: Any, class_weight: Any) -> None:
    """``fit(class_weight=...)`` beside a Sequence's several outputs stopped ``fit`` with
    Keras' bare ``IndexError`` (on arrays Keras says it takes one output)."""
    if isinstance(y, (dict, list, tuple)) and len(y) > 1 and class_weight is not None:
        raise ArgumentError(
            f"fit(class_weight=...) weighs the classes of one output, but this Sequence's `y` "
            f"has {len(y)} outputs ({list(y) if isinstance(y, dict) else 'by position'}): "
            f"Keras "
            f"would stop at the first step. Fix: per-output weights as the Sequence's "
            f"`sample_weight` (a dict by output name, e.g. the class weight of each sample's "
            f"class: weights[labels]), and no class_weight.")


def weights_for_losses(y: Any, sample_weight: Any, model: Any) -> None:
    """What ``fit`` of ``model`` needs of a Sequence's per-output weights, checked as it
    begins (the losses are known only then): a ``sample_weight`` dict without an output
    that has a loss stopped ``fit`` with Keras' bare ``KeyError`` (on arrays Keras says what
    is missing)."""
    loss = getattr(model, "loss", None)
    if not (isinstance(y, dict) and isinstance(sample_weight, dict)) or loss is None:
        return
    if isinstance(loss, (list, tuple)):  # by position: the model's outputs' names
        names = list(getattr(model, "output_names", None) or ())
        if len(names) != len(loss):
            return  # (which output a None is for is not known here)
        loss = dict(zip(names, loss))
    missing_ = [k for k in y if k not in sample_weight and (
        loss.get(k) is not None if isinstance(loss, dict) else True)]
    if missing_:
        raise ArgumentError(
            f"`sample_weight` has no weights for the outputs {missing_}, whose losses fit "
            f"computes (y: {list(y)}; sample_weight: {list(sample_weight)}): Keras would stop "
            f"at the first step with a KeyError. Fix: weights for every output with a loss "
            f"(np.ones(N) for one to leave unweighted), or one array (N,) for all.")


def mixed_loss(seq: Any, model: Any) -> None:
    """A training Sequence with a ``mix`` under ``fit`` of a model compiled with a sparse
    categorical loss, which takes class ids: the mix's soft targets stopped ``fit`` at its
    first step with Keras' "Argument output must have rank (ndim) target.ndim - 1". Refused
    before it, naming the loss to use. A loss per output, one of the user's, or a ``targets``
    hook or ``__getitem__`` of a subclass (which may make class ids again) passes."""
    mix = seq.mix
    if mix is None or seq.overrides("targets") or seq.overrides("__getitem__"):
        return
    loss = getattr(model, "loss", None)
    name = loss if isinstance(loss, str) else getattr(loss, "name", None) or getattr(
        loss, "__name__", None)
    keras_own = isinstance(loss, str) or type(loss).__module__.startswith("keras") or \
        getattr(loss, "__module__", "").startswith("keras")  # (a function of Keras')
    if not keras_own or name not in ("sparse_categorical_crossentropy",
                                     "SparseCategoricalCrossentropy") and \
            type(loss).__name__ != "SparseCategoricalCrossentropy":  # (renamed: name="scce")
        return  # (Keras' own only: a loss of the user's, a subclass too, may take soft ones)
    raise ArgumentError(
        f"The model is compiled with loss {name!r}, which takes class ids, but the training "
        f"Sequence's mix={mix!r} hands out soft targets, one row of class probabilities per "
        f"sample (Keras: \"Argument output must have rank (ndim) target.ndim - 1\"). Fix: "
        f"model.compile(loss=keras.losses.CategoricalCrossentropy()) (with from_logits=True "
        f"where the sparse one had it); the labels you give stay class ids.")


def validation_labels(mix: Any, validation: Any) -> None:
    """A training Sequence with ``mix`` under ``fit`` with ``validation``: the mix's soft
    targets take ``CategoricalCrossentropy``, which refuses class ids, so validation data of
    class ids would stop ``fit`` when validation starts, with Keras' "must have the same rank".
    Refused before the first step instead, naming the fixes. A Sequence with a mix of its own
    hands out one-hot labels; what this cannot read passes."""
    if isinstance(validation, (tuple, list)) and len(validation) >= 2:
        y = validation[1]
    elif getattr(validation, "mix", False) is None \
            and hasattr(validation, "targets_as_given") and not validation.overrides("targets"):
        y = validation.targets_as_given()  # a shmaug.Sequence without a mix (or a targets
        # hook, which may one-hot them)
    else:
        return
    if not isinstance(y, np.ndarray) or y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        return
    classes = mix.num_classes or "num_classes"
    raise ArgumentError(
        f"`validation_data` yields class ids (labels of shape ({len(y)},)), but the training "
        f"Sequence's mix={mix!r} trains on one-hot soft targets, whose loss "
        f"(CategoricalCrossentropy) would refuse class ids when validation starts (Keras: "
        f"\"Arguments `target` and `output` must have the same rank\"). Fix: one-hot the "
        f"validation labels: label_mode=\"categorical\" on both subsets of a folder (the mix "
        f"then needs no num_classes), keras.utils.to_categorical(y_val, {classes}) for arrays, "
        f"or give the validation Sequence the same mix= (it never mixes validation passes, "
        f"and hands their labels out one-hot).")


def validation_classes(x: Any, validation_x: Any) -> None:
    """The sources a training Sequence and its validation Sequence read their labels from,
    whose classes have other numbers (a fold or a holdout without one class numbers the
    others from 0, as Keras' loaders do): its labels would be scored as other classes; or
    whose one-hot rows are of another width (a holdout without the last class, or of class
    ids without names: Keras' bare shape error, or a silent loss on a narrower row).
    Refused naming both maps; None (labels of their own) passes."""
    train = getattr(x, "class_names", None) or ()
    val = getattr(validation_x, "class_names", None) or ()
    moved = [name for i, name in enumerate(val) if name not in train or train.index(name) != i]
    if train and moved:
        lacks, extra = sorted(set(train) - set(val)), sorted(set(val) - set(train))
        why = "; ".join([*([f"it has no {lacks}"] if lacks else []),
                         *([f"the training data has no {extra}"] if extra else [])])
        raise ArgumentError(
            f"`validation_data` numbers its classes otherwise than the training data: "
            f"{dict(zip(val, range(len(val))))} against {dict(zip(train, range(len(train))))}"
            f"{f' ({why})' if why else ''}, so its labels would be scored as other classes. "
            f"Fix: give both sources every class name, in one order: "
            f"`classes={[*train, *extra]!r}` to from_dataframe, `class_names=` to from_paths, "
            f"ImageRecords' constructors (from_bytes, from_huggingface, ...) and "
            f"from_directory (whose class_names name its folders: an empty folder for each "
            f"class it lacks).")
    held = [getattr(s, "labels", None) for s in (x, validation_x)]
    widths: list[tuple[int, ...]] = [() if h is None else np.shape(h) for h in held]
    if all(len(w) == 2 for w in widths) and widths[0][1] != widths[1][1]:
        raise ArgumentError(
            f"`validation_data`'s one-hot labels are {widths[1][1]} wide against the "
            f"training data's {widths[0][1]} (its classes {list(val) or 'ids'} against "
            f"{list(train) or 'ids'}): a holdout without a class, or class ids numbered by "
            f"the largest in each part. Fix: give both sources every class, in one order: "
            f"`classes=` to from_dataframe (for class ids, `classes=list(range(k))`), "
            f"`class_names=` to from_paths and from_directory.")


def labels_for_the_loss(call: tuple[str, Any] | None, labelled: bool) -> None:
    """``fit`` or ``evaluate`` on a Sequence that gives no labels, with a model whose compiled
    loss takes them (Keras' own steps, no ``compute_loss`` of the user's): Keras failed with
    "None values not supported" (TensorFlow) or "'NoneType' object has no attribute
    'shape'" (JAX, torch), naming neither the labels nor the Sequence."""
    if call is None or labelled:
        return
    name, model = call
    step = getattr(type(model), "train_step" if name == "fit" else "test_step", None)
    if name == "predict" or getattr(model, "loss", None) is None or not all(
            getattr(f, "__module__", "").startswith("keras.")  # (a fit of the user's: None)
            for f in (step, getattr(type(model), "compute_loss", None))):
        return
    loss = model.loss if isinstance(model.loss, str) else type(model.loss).__name__
    raise ArgumentError(
        f"{name}() computes the model's loss ({loss}) on labels, but this "
        f"shmaug.Sequence gives none: it was made without `y` (an unlabelled source, or "
        f"from_paths / from_dataframe without labels). Fix: pass the labels (`y=`, or "
        f"`labels=` / `y_col=` to the source), or predict() for outputs alone.")


_TOLD_UNSYNCED: weakref.WeakSet[Any] = weakref.WeakSet()  # (once per Sequence)


def resumed_unsynced(seq: Any, initial_epoch: Any, epoch: Any, steps: Any,
                     callbacks: Any) -> bool:
    """``fit(initial_epoch=E)`` (given, or set by ``BackupAndRestore``) begins Keras' epoch E,
    but a Sequence counts its own passes: resumed in a fresh process it fed epoch 0's order and
    draws again, without a word. Warned as that fit's first ``epoch`` begins, where no
    ``EpochSync`` of ``seq`` follows Keras' numbers and the Sequence is behind (not sought
    there, nor trained that far: a Sequence ahead, after a warm-up fit, repeats nothing).
    With ``steps`` per Keras epoch fewer than a pass, the numbers differ by design: not told.
    Whether it told."""
    if not isinstance(initial_epoch, int) or initial_epoch <= 0 or epoch != initial_epoch \
            or seq.epoch >= initial_epoch or (isinstance(steps, int) and steps < len(seq)):
        return False
    if seq in _TOLD_UNSYNCED or _synced(seq, callbacks):
        return False
    _TOLD_UNSYNCED.add(seq)
    warn(f"fit() begins at Keras' epoch {initial_epoch} (`initial_epoch`, or "
         f"BackupAndRestore), but this Sequence feeds its own epoch {seq.epoch}, counting "
         f"its passes: a resumed run would train on an earlier epoch's order and "
         f"augmentations again. Fix: callbacks=[shmaug.EpochSync(seq)] (follows Keras' epoch "
         f"numbers), or seq.seek({initial_epoch}) before fit.")
    return True


def restored_mid_pass(seq: Any, restored: dict[int, Any], steps: Any, callbacks: Any) -> None:
    """A Sequence restored in the middle of a pass (``load_state_dict`` of a state saved
    within an epoch) goes on with that pass; a Keras epoch of ``len(seq)`` steps would take
    its rest and the next epoch's first batches, two shuffled orders, and every later Keras
    epoch shmaug's next, without a word. Warned as ``fit`` begins, unless an ``EpochSync``
    of ``seq`` restarts Keras' epoch, or ``steps`` per Keras epoch fewer than a pass carry
    the pass on (what the restored bindings are for)."""
    if not restored or (isinstance(steps, int) and steps < len(seq)) or _synced(seq, callbacks):
        return
    state = seq.state_dict()
    epoch, batch = state["epoch"], state["batch"]
    warn(f"fit() begins a whole Keras epoch ({len(seq)} batches), but this Sequence was "
         f"restored in the middle of its epoch {epoch} (load_state_dict of a state saved "
         f"after {batch} of its batches): Keras does not resume within an epoch, so this one "
         f"would take that epoch's last {len(seq) - batch} batches and the next one's first "
         f"{batch}, and each later Keras epoch shmaug's next. Fix: fit(..., "
         f"initial_epoch={epoch}, callbacks=[shmaug.EpochSync(seq)]) (restarts epoch {epoch} "
         f"from its first batch, as BackupAndRestore does), or save the state at an epoch's "
         f"end.")


def _synced(seq: Any, callbacks: Any) -> bool:
    """Whether an ``EpochSync`` of ``seq`` is among ``fit``'s ``callbacks``."""
    given = getattr(callbacks, "callbacks", callbacks)
    return any(getattr(c, "follows_keras_epochs", False) and
               getattr(c, "sequence", None) is seq for c in given or ())


WORKER_HOOKS = ("load", "augment")
_BY_IDENTITY_BYTES = 1 << 20  # an array larger than this is fingerprinted by identity, shape
# and dtype: hashing it at every epoch would cost more than the check is worth
_LEAVES = 1000  # a container of more plain values is not fingerprinted (its cost would grow)
_NUMBERS = (int, float, complex, str, bytes, bool, type(None))
_LOADS = ("LOAD_FAST", "LOAD_DEREF")  # (and their variants: _CHECK, _BORROW, LOAD_FAST_LOAD_FAST)


def _read_by_hooks(seq: Sequence, facade: frozenset[str]) -> frozenset[str]:
    """The instance attributes (other than the ``facade``'s own) that ``seq``'s overridden
    worker hooks read as ``self.<name>`` (hooks that are no plain function: none)."""
    names: set[str] = set()
    for hook in WORKER_HOOKS:
        if seq.overrides(hook):
            code = getattr(inspect.unwrap(getattr(type(seq), hook)), "__code__", None)
            if code is not None and code.co_argcount:
                names |= _self_attributes(code, code.co_varnames[0])
    return frozenset(names & vars(seq).keys() - facade)


def _self_attributes(code: types.CodeType, me: str) -> set[str]:
    """The attributes ``code`` (and the functions it defines) reads off its local ``me``:
    an attribute load right after ``me`` is pushed (last, by a superinstruction that pushes
    two locals, as Python 3.13's ``LOAD_FAST_LOAD_FAST`` does)."""
    found: set[str] = set()
    previous = None
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and previous is not None and \
                previous.opname.startswith(_LOADS) and me in (
                    previous.argval, *(previous.argval[-1:] if isinstance(previous.argval, tuple)
                                       else ())):
            found.add(str(ins.argval))
        previous = ins
    for const in code.co_consts:  # nested functions and comprehensions
        if isinstance(const, types.CodeType):
            found |= _self_attributes(const, me)
    return found


def _fingerprints(seq: Sequence, names: frozenset[str]) -> dict[str, bytes]:
    """A digest of each of ``names``' values on ``seq`` that is a plain value (a number, a
    string, an array, or a small container of them; numpy's scalars as Python's); other
    objects (a Keras layer, a pipeline) pickle differently unchanged, and are left out."""
    out: dict[str, bytes] = {}
    state = vars(seq)
    for name in names:
        value = state.get(name)
        if isinstance(value, np.ndarray) and value.nbytes > _BY_IDENTITY_BYTES:
            out[name] = f"{id(value)}:{value.shape}:{value.dtype.str}".encode()
            continue
        canon = _canonical(value, [_LEAVES, _BY_IDENTITY_BYTES])
        if canon is not _NOT_PLAIN:
            out[name] = hashlib.blake2b(pickle.dumps(canon, pickle.HIGHEST_PROTOCOL),
                                        digest_size=16).digest()
    return out


_NOT_PLAIN = object()


def _canonical(value: Any, budget: list[int]) -> Any:
    """``value`` as plain Python values (numpy's scalars as Python's, an array's bytes, a
    dict's items and a set's members in one order), or ``_NOT_PLAIN`` for anything else or
    past ``budget`` (values, bytes)."""
    budget[0] -= 1
    if isinstance(value, (str, bytes, np.ndarray)):
        budget[1] -= len(value) if not isinstance(value, np.ndarray) else value.nbytes
    if budget[0] < 0 or budget[1] < 0:
        return _NOT_PLAIN
    if isinstance(value, (np.number, np.bool_)):
        return value.item()
    if isinstance(value, _NUMBERS):
        return value
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, value.tobytes()) if value.dtype.kind in "biufc" \
            else _NOT_PLAIN
    if isinstance(value, dict):
        items = [(_canonical(k, budget), _canonical(v, budget)) for k, v in value.items()]
        plain = all(_NOT_PLAIN not in pair for pair in items)
        return ("dict", tuple(sorted(items, key=repr))) if plain else _NOT_PLAIN
    if isinstance(value, (tuple, list, set, frozenset)):
        parts = [_canonical(v, budget) for v in value]
        if any(part is _NOT_PLAIN for part in parts):
            return _NOT_PLAIN
        return ("set", tuple(sorted(parts, key=repr))) if isinstance(value, (set, frozenset)) \
            else tuple(parts)
    return _NOT_PLAIN


def hooks_started(seq: Sequence, rt: Runtime, facade: frozenset[str]) -> None:
    """Workers start: note what the hooks read (the first time), or tell a change since
    (a restart after an idle stop hands the new values to the new workers). A check that
    fails (a hook of an unforeseen kind) is dropped: it must never stop a start."""
    if rt.hook_prints is not None:
        hooks_unchanged(seq, rt)
        return
    try:
        rt.hook_prints = _fingerprints(seq, _read_by_hooks(seq, facade))
    except Exception:  # noqa: BLE001
        log.debug("the check of what a Sequence's hooks read is off", exc_info=True)
        rt.hook_prints = {}


def hooks_unchanged(seq: Sequence, rt: Runtime) -> None:
    """Tell the attributes the worker hooks read that changed since the workers started,
    where worker processes hold the copy: once for each new value (a progressive resize's
    second stage went untold)."""
    loader = rt.running
    if not rt.hook_prints or loader is None or not loader.pids:
        return  # (workers=0 reads the instance itself)
    try:
        now = _fingerprints(seq, frozenset(rt.hook_prints))
    except Exception:  # noqa: BLE001 (the check must never stop a pass)
        log.debug("the check of what a Sequence's hooks read is off", exc_info=True)
        rt.hook_prints = {}
        return
    changed = sorted(name for name, digest in rt.hook_prints.items() if now.get(name) != digest)
    new = {(name, now.get(name)) for name in changed} - rt.told_hooks
    if not new:
        return
    rt.told_hooks |= new
    names = ", ".join(f"`self.{name}`" for name in changed)
    hooks = " and ".join(f"{type(seq).__qualname__}.{hook}" for hook in WORKER_HOOKS
                         if seq.overrides(hook))
    warn(f"{names}, read by {hooks}, changed after the Sequence's workers started: they keep "
         f"the copy of it taken then, while a restart after an idle stop takes the new value "
         f"and workers=0 reads it at once, so its batches depend on when that happens. Fix: "
         f"draw what must vary from `rng` (per seed, epoch and sample), or make a new "
         f"Sequence per stage (docs/loader.md, \"Changing settings between epochs\").")
