"""Batches handed to Keras' torch backend as torch tensors over the same memory (``for_keras``).

Keras' torch backend converts each numpy array of a batch with ``np.array(x)`` before
``torch.as_tensor``: a copy of every batch in the main process (9.7 ms for 64 float32 images
of 224x224x3 here), the one process no worker count adds to (issue 38). A tensor made by
``torch.from_numpy`` shares the array's memory and keeps the array alive, and with it a slot
lent from the ring (``_ring.lease``: the slot goes back once nothing holds it); Keras takes such
a tensor as it is. JAX's trainer reads numpy arrays where they lie and TensorFlow's
``from_generator`` copies whatever it is given, so their batches stay numpy.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

# The numpy dtypes torch.from_numpy shares; others (uint16, uint32, bfloat16...) are left to
# Keras' own conversion, which casts them.
_SHARED = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                     "float32", "float64", "complex64", "complex128"))


def for_keras(batch: Any) -> Any:
    """``batch`` (arrays in tuples, lists and dicts) as the backend takes it without a copy."""
    if keras.backend.backend() != "torch":
        return batch
    import torch

    def shared(part: Any) -> Any:
        if isinstance(part, np.ndarray):
            if part.dtype.name not in _SHARED or not part.flags.writeable:
                return part  # (torch warns on a read-only array and would not copy it)
            try:
                return torch.from_numpy(part)
            except (TypeError, ValueError, RuntimeError):  # negative strides, byte order
                return part
        if isinstance(part, tuple) and hasattr(part, "_fields"):  # a namedtuple
            return type(part)(*(shared(p) for p in part))
        if isinstance(part, (tuple, list)):
            return type(part)(shared(p) for p in part)
        if isinstance(part, dict):
            return {k: shared(v) for k, v in part.items()}
        return part

    # A bare array is Keras' ``(x,)``, and Keras recognises only numpy as bare.
    return shared((batch,) if isinstance(batch, np.ndarray) else batch)
