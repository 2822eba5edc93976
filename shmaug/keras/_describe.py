"""How a ``Sequence`` describes itself in ``repr()``: its settings as given, with what they
resolve to, the hooks a subclass overrides and where its workers stand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.config.describe import brief, call_repr, resolved_start_method
from ..engine.loader import pool_of

if TYPE_CHECKING:
    from ..engine.config.options import Order, Settings
    from ._runtime import Runtime
    from .sequence import Sequence


def sequence_repr(seq: Sequence, base: type, given: Settings, order: Order,
                  runtime: Runtime) -> str:
    """``seq``'s repr from its settings as ``given``, its ``order`` and its ``runtime``;
    ``base``: ``shmaug.Sequence`` itself (a subclass is named by its own name)."""
    side = runtime.side
    name = "shmaug.Sequence" if type(seq) is base else type(seq).__qualname__
    hooks = [h for h in ("load", "augment", "targets", "model_inputs") if seq.overrides(h)]
    count = given.workers.workers
    settings: list[tuple[str, Any]] = [
        ("x", brief(seq.x)), ("y", brief(side.get("y"))),
        ("batch_size", seq.batch_size),
        ("augment", f"{name}.augment" if "augment" in hooks
         else brief(given.output.augment)),
        ("workers", f"{count} (shmaug's processes; Keras reads seq.workers == 1)"
         if count else "0 (this process)"),
        ("start_method", repr(resolved_start_method(
            given.workers.start_method,
            None if runtime.running is None else pool_of(runtime.running)))
         if count else "None"),
        ("seed", f"{seq.seed} (drawn: seed=None)" if order.seed_drawn else seq.seed),
        ("shuffle", "None (follows Keras per pass: fit shuffles, evaluate and predict read "
         "in order)" if seq.shuffle is None else seq.shuffle),
        ("drop_remainder", order.plan.drop_remainder),
        ("max_queue_size", given.workers.max_queue_size
         if given.workers.max_queue_size is not None else "None (follows the workers)")]
    optional = [("sample_weight", side.get("sample_weight")),
                ("image_key", seq.image_key), ("timeout", given.workers.timeout),
                ("output_shape", given.output.output_shape),
                ("output_dtype", given.output.output_dtype),
                ("value_range", given.output.bounds), ("sampling_weights", order.weights),
                ("samples_per_epoch", given.batches.samples_per_epoch),
                ("mix", seq.mix)]
    settings += [(k, brief(v)) for k, v in optional if v is not None]
    if seq.num_shards > 1:
        settings += [("num_shards", seq.num_shards), ("shard_index", seq.shard_index)]
    extra = f"; hooks overridden: {', '.join(hooks)}" if hooks else ""
    return call_repr(name, settings) + \
        f" ({len(order.plan)} batches, {runtime.life.value}{extra})"
