"""What Keras gets for a batch: its parts assembled as Keras takes them (``assemble``), and
on Keras' torch backend as torch tensors over the same memory (``for_keras``).

``assemble`` puts the images with the other inputs, runs the ``model_inputs`` and ``targets``
hooks in this process and turns lists into tuples (Keras takes a tuple of targets on every
backend). A ``y`` in Keras' target layout of one entry is handed to Keras as its entry
(``for_outputs``): Keras' ``fit`` matches a dict ``y`` to the model's outputs by name, so
``{"segmentation_masks": m}`` would reach a one-output model as a key, not a mask.

Keras' torch backend converts each numpy array of a batch with ``np.array(x)`` before
``torch.as_tensor``: a copy of every batch in the main process (9.7 ms for 64 float32 images
of 224x224x3 here), the one process no worker count adds to (issue 38). A tensor made by
``torch.from_numpy`` shares the array's memory and keeps the array alive, and with it a slot
lent from the ring (``engine.handoff.ring.lease``: the slot goes back once nothing holds it);
Keras takes such a tensor as it is. JAX's trainer reads numpy arrays where they lie and
TensorFlow's ``from_generator`` copies whatever it is given, so their batches stay numpy.
"""

from __future__ import annotations

import time
import traceback
from typing import TYPE_CHECKING, Any, Callable

import keras
import numpy as np

from ..errors import ErrorRecord, rebuild
from ._passes import Key

if TYPE_CHECKING:
    from ._runtime import Runtime
    from .sequence import Sequence

# The numpy dtypes torch.from_numpy shares (and ml_dtypes' bfloat16, as its bits); others
# (uint16, uint32...) are left to Keras' own conversion, which casts them.
_SHARED = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                     "float32", "float64", "complex64", "complex128"))


def _each_array(batch: Any, leaf: Callable[[np.ndarray], Any]) -> Any:
    """``batch`` (arrays in tuples, lists, namedtuples and dicts) with ``leaf`` of each array
    in its place; anything else as it is."""
    if isinstance(batch, np.ndarray):
        return leaf(batch)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(_each_array(p, leaf) for p in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(_each_array(p, leaf) for p in batch)
    if isinstance(batch, dict):
        return {k: _each_array(v, leaf) for k, v in batch.items()}
    return batch


def for_keras(batch: Any) -> Any:
    """``batch`` (arrays in tuples, lists and dicts) as the backend takes it without a copy."""
    if keras.backend.backend() != "torch":
        return batch
    import torch

    def shared(part: np.ndarray) -> Any:
        bfloat16 = part.dtype.name == "bfloat16"  # (ml_dtypes': torch takes it as bits)
        if not (part.dtype.name in _SHARED or bfloat16) or not part.flags.writeable:
            return part  # (torch warns on a read-only array and would not copy it)
        try:
            if bfloat16:  # Keras' own conversion took 20 ms a 64x224x224x3 batch
                return torch.from_numpy(part.view(np.uint16)).view(torch.bfloat16)
            return torch.from_numpy(part)
        except (TypeError, ValueError, RuntimeError):  # negative strides, byte order
            return part

    # A bare array is Keras' ``(x,)``, and Keras recognises only numpy as bare.
    return _each_array((batch,) if isinstance(batch, np.ndarray) else batch, shared)


def fresh(batch: Any) -> Any:
    """``batch`` with arrays of its own: a batch kept for a second ask is handed out as a
    copy each time, since the consumer may edit what it gets in place (a torch
    ``train_step``'s ``x.div_(255)``) and the replay must not see it."""
    return _each_array(batch, np.copy)


def assemble(seq: Sequence, rt: Runtime, xb: np.ndarray, side: dict[str, Any],
             key: Key) -> Any:
    """What Keras gets for batch ``key`` of ``seq``: the images ``xb`` (in a dict with the
    other inputs, if any) through the ``model_inputs`` hook, then the targets through the
    ``targets`` hook and the sample weights, from ``side`` (``rt``: ``seq``'s runtime)."""
    rt.used = time.monotonic()  # (the batch may have taken long to come)
    inputs: Any = xb
    if side["inputs"] is not None:
        inputs = {seq.image_key: xb, **side["inputs"]}
    if seq.overrides("model_inputs"):
        inputs = _hook(seq, rt, "model_inputs", inputs, key)
    if side["y"] is None:
        return inputs
    y = _hook(seq, rt, "targets", side["y"], key)
    y = for_outputs(y)
    if side["sample_weight"] is not None:
        return inputs, _as_tuples(y), _as_tuples(side["sample_weight"])
    return inputs, _as_tuples(y)


def _hook(seq: Sequence, rt: Runtime, name: str, part: Any, key: Key) -> Any:
    """``seq``'s hook ``name`` on a batch's ``part``; an exception in it comes with the
    batch's first sample."""
    try:
        hook = getattr(seq, name)
        if not callable(hook):  # an attribute of the instance's own (its labels): not a hook
            hook = getattr(type(seq), name).__get__(seq)
        return hook(part)
    except Exception as exc:
        epoch, planned, ordered = key
        loader = rt.running  # (seq.loader would take the lock held here)
        assert loader is not None
        first = int(loader.indices(planned, epoch=epoch, in_order=ordered)[0])
        record = ErrorRecord.capture(
            exc, traceback.format_exc(), worker_id=-1, sample_index=first, epoch=epoch,
            op=f"{type(seq).__qualname__}.{name}")
        raise rebuild(record) from None


def for_outputs(y: Any) -> Any:
    """``y`` as the model's outputs take it: Keras' layout of one entry unwrapped, so that
    ``{"segmentation_masks": m}`` is the target of a one-output model, and
    ``{"bounding_boxes": {"boxes": b, "labels": l}}`` the ``{"boxes", "labels"}`` a
    detector's two outputs (or keras-hub's detectors) take by name. Other ``y`` as given."""
    if isinstance(y, dict) and len(y) == 1:
        (key, value), = y.items()
        if key == "segmentation_masks" or (
                key == "bounding_boxes" and isinstance(value, dict) and "boxes" in value):
            return value
    return y


def _as_tuples(structure: Any) -> Any:
    """Lists become tuples (inside dicts too): Keras takes a tuple of targets on every backend,
    while the TensorFlow backend's output signature refuses a list."""
    if isinstance(structure, (list, tuple)):
        return tuple(_as_tuples(v) for v in structure)
    if isinstance(structure, dict):
        return {k: _as_tuples(v) for k, v in structure.items()}
    return structure
