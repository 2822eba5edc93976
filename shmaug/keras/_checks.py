"""Checks of what only the Keras facade takes: Keras' ``use_multiprocessing``, a dict ``x``'s
``image_key``, ``pin_memory``'s default, and the bindings a ``Sequence.state_dict()`` saved.
The rest is checked where the engine checks it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine import _pinned
from ..errors import ArgumentError, ArgumentTypeError, got


def use_multiprocessing(value: Any) -> bool | None:
    """Keras' PyDataset argument, accepted so a PyDataset's arguments work unchanged."""
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(
            f"`use_multiprocessing` must be True, False or None; received {got(value)}. Fix: "
            f"leave it out: shmaug always runs its `workers` in processes."
        )
    return None if value is None else bool(value)


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
    return on_gpu and _pinned.usable()  # the NVIDIA driver (ROCm's GPUs report "gpu" too)


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


def split_inputs(x: Any, image_key: str | None) -> tuple[str | None, Any, dict[str, Any]]:
    """``x`` or a dict of inputs -> (image key, the images, the other inputs)."""
    if not isinstance(x, dict):
        return None, x, {}
    if image_key is None:
        candidates = [k for k, v in x.items() if np.ndim(v) in (3, 4)]
        if len(candidates) != 1:
            raise ArgumentError(
                f"`x` is a dict, so shmaug needs to know which entry holds the images to "
                f"augment; candidates (3-D or 4-D arrays): {candidates}. Fix: pass "
                f"`image_key=` naming that entry."
            )
        image_key = candidates[0]
    if image_key not in x:
        raise ArgumentError(
            f"`image_key`={image_key!r} is not a key of `x` (keys: {list(x)}). Fix: pass one "
            f"of those."
        )
    return image_key, x[image_key], {k: v for k, v in x.items() if k != image_key}
