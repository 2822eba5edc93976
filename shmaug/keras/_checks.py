"""Checks of what only the Keras facade takes: Keras' ``use_multiprocessing``, and the
bindings a ``Sequence.state_dict()`` saved. The rest is checked where the engine checks it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, got


def use_multiprocessing(value: Any) -> bool | None:
    """Keras' PyDataset argument, accepted so a PyDataset's arguments work unchanged."""
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(
            f"`use_multiprocessing` must be True, False or None; received {got(value)}. Fix: "
            f"leave it out: shmaug always runs its `workers` in processes."
        )
    return None if value is None else bool(value)



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
