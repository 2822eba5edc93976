"""A ``Sequence``'s place in its stream of batches, saved and restored (``state_dict``).

Besides the ``Loader``'s fields (seed, epoch, batch, shard, fingerprint) a Sequence's state
holds the pass's bindings of Keras indices to batches (``_passes``), which carry an epoch across
several short Keras epochs, and the batches a loop by hand (``seq[i]``) has looked at. Read and
written under the Sequence's lock; no Keras, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.config import checks as check
from . import _checks as facade_checks

if TYPE_CHECKING:
    from ..engine.config.options import Order
    from ._runtime import Runtime
    from .sequence import Sequence

STATE_FORMAT = "shmaug.Sequence"
VERSION = 1  # of the state's format; bumped when its meaning changes


def state_of(seq: Sequence, order: Order, runtime: Runtime) -> dict[str, Any]:
    """Where ``seq``'s stream of batches stands (its ``order``, its ``runtime``'s passes), as
    a small JSON-ready dict."""
    with runtime.lock:
        passes = runtime.passes
        bindings = passes.bindings
        epoch, batch = passes.position
        return {
            "format": STATE_FORMAT, "version": VERSION, "seed": seq.seed,
            "epoch": epoch, "batch": batch, "shard_index": seq.shard_index,
            "fingerprint": order.fingerprint(),
            "bindings": [[i, e, b] for i, (e, b, _) in sorted(bindings.items())],
            "in_order": passes.in_order,
            "asked": sorted(bindings), "in_epoch": bool(bindings),
            "looks": [[i, e, b] for i, (e, b, _) in sorted(passes.hand_looks.items())],
        }


def restore(seq: Sequence, state: dict[str, Any], batches: int, order: Order,
            runtime: Runtime) -> None:
    """Make ``seq`` (of ``batches`` per epoch, its ``order``) continue from ``state`` (checked
    against its fingerprint and seed): its ``runtime``'s passes."""
    expected = {**order.fingerprint(), "seed": seq.seed}
    epoch, cursor = check.resume_state(state, STATE_FORMAT, VERSION, expected, batches)
    bindings = facade_checks.bindings(state.get("bindings"), state.get("asked"), batches)
    looks = facade_checks.bindings(state.get("looks"), (), batches)  # (older states: none)
    in_order = state.get("in_order") is True or not order.shuffle
    rt = runtime
    with rt.lock:
        rt.passes.restore(epoch, cursor, {i: (e, b, in_order) for i, e, b in bindings},
                          in_order, {i: (e, b, False) for i, e, b in looks})
        rt.previous = -1
