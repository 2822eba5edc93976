"""How a Loader or a Sequence describes itself in ``repr()``: the settings as given, and what
they resolved to. Reads arguments; checks nothing (that is ``checks``' and ``inputs``')."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..workers.launch import default_start_method

if TYPE_CHECKING:
    from .options import Options


def brief(value: Any) -> str:
    """An argument as a repr shows it: arrays by dtype and shape (a memory map by its file),
    containers of them likewise, anything else by its repr, cut short."""
    if isinstance(value, np.ndarray):
        name = getattr(value, "filename", None)
        where = f" mapped from {os.path.basename(str(name))}" if name else ""
        return f"<{value.dtype} array {tuple(value.shape)}{where}>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (np.ndarray, dict)) for v in value):
        if len(value) > 4:  # (a list of 50,000 images made a repr of a megabyte)
            return f"<{type(value).__name__} of {len(value)}, the first {brief(value[0])}>"
        inner = ", ".join(brief(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' * (len(value) == 1)})"
    text = repr(value)
    if isinstance(value, (list, tuple)) and len(text) > 100:
        return f"<{type(value).__name__} of {len(value)}>"
    return text if len(text) <= 100 else text[:97] + "..."


def pipeline(augment: Any) -> str:
    """``augment`` as a repr shows it: a pipeline of shmaug's whole (it is a setting, and a
    log of the run names every op), anything else as ``brief`` shows it."""
    return repr(augment) if callable(getattr(augment, "to_config", None)) else brief(augment)


def call_repr(name: str, settings: list[tuple[str, Any]]) -> str:
    """``name(key=value, ...)``: values already strings are shown as they are."""
    shown = ", ".join(f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in settings)
    return f"{name}({shown})"


def resolved_start_method(value: str | None, running: Any = None) -> str:
    """The start method a pool given ``value`` uses: the ``running`` pool's, where one is
    (its default followed its payload: fork for a notebook's code); else the one given, else
    ``workers.launch.default_start_method``'s for a payload that needs no ``__main__``.
    Asking does not fix the default context."""
    used = getattr(running, "start_method", None)
    return used if isinstance(used, str) else value or default_start_method()


def loader_repr(o: Options, *, workers: int, gathering: bool, pin_memory: bool, load: Any,
                output: tuple[tuple[int, ...], Any], closed: bool,
                slots: int | None = None, pool: Any = None) -> str:
    """A ``Loader``'s repr: its options as given, with the worker count it runs, whether it only
    gathers (nothing to augment), the ``load`` its workers call, the output learned from
    sample 0, the ring's ``slots`` (what the default ``max_queue_size`` resolved to) and the
    start method its ``pool`` used."""
    order, asked = o.order, o.settings.workers
    shown_workers: Any = workers
    if workers and gathering:
        shown_workers = f"{workers} (none started: nothing to augment)"
    elif asked.remote is not None:
        shown_workers = f"{asked.remote!r} ({workers} processes there)"
    settings: list[tuple[str, Any]] = [
        ("x", o.data.shown), ("y", o.data.shown_y or brief(o.data.y)),
        ("batch_size", order.plan.batch_size), ("augment", pipeline(o.pipeline.augment)),
        ("workers", shown_workers),
        ("start_method", "(the makers')" if asked.remote is not None else
         repr(resolved_start_method(asked.start_method, pool))
         if workers else "None (workers=0: this process)"),
        ("seed", f"{order.seed} (drawn: seed=None)" if order.seed_drawn else order.seed),
        ("shuffle", order.shuffle), ("drop_remainder", order.plan.drop_remainder),
        ("max_queue_size", asked.max_queue_size if asked.max_queue_size is not None or
         slots is None else f"{slots} (default)")]
    optional = [("timeout", asked.timeout, None), ("copy", asked.copy, True),
                ("pin_memory", pin_memory, False),
                ("value_range", o.settings.output.value_range, None),
                ("num_shards", order.num_shards, 1), ("shard_index", order.shard_index, 0),
                ("sampling_weights", order.weights, None),
                ("samples_per_epoch", order.samples, order.n), ("mix", o.pipeline.mix, None),
                ("load", load, None)]
    settings += [(k, brief(v)) for k, v, default in optional
                 if v is not default and (default is None or v != default)]
    shape, dtype = output
    settings += [("output_shape", shape), ("output_dtype", str(dtype))]
    return call_repr("shmaug.Loader", settings) + (" (closed)" if closed else "")
