"""Weighted sampling's arguments, checked and resolved: ``sampling_weights`` into one weight
per sample, ``samples_per_epoch`` into the size of an epoch's draw.

The draw itself is planning (``schedule.weighted_draw``); this module only says what was
asked, before anything starts, with the same kind of messages as ``config.checks``. The labels of
``"balanced"`` and of a class dict are the loader's targets ``y`` (a source's ``labels`` when
``y`` is left out), as integers or one-hot rows.
"""

from __future__ import annotations

import numbers
import zlib
from typing import Any

import numpy as np

from ..config.tree import holds_text
from ...errors import ArgumentError, ArgumentTypeError, got

BALANCED = "balanced"  # every class equally likely, as scikit-learn's class_weight="balanced"


def weights(value: Any, y: Any, n: int) -> np.ndarray | None:
    """One non-negative float64 weight per sample, some positive, or None (no sampling)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value != BALANCED:
            raise ArgumentError(
                f"`sampling_weights` must be an array of one weight per sample, a dict "
                f"{{class: weight}} or \"balanced\"; received {got(value)}. Fix: pass "
                f"`sampling_weights=\"balanced\"` for equally likely classes."
            )
        found = labels(y, n, f'"{BALANCED}"')
        balanced: np.ndarray = 1.0 / np.bincount(found)[found]
        return balanced
    if isinstance(value, dict):
        return _per_class(value, labels(y, n, "a dict"))
    try:
        w = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        w = np.empty(0)
    if w.ndim != 1 or len(w) != n:
        shown = f"shape {w.shape}" if w.size else got(value)
        raise ArgumentError(
            f"`sampling_weights` must hold one weight per sample of `x` ({n}); received "
            f"{shown}. Fix: pass an array with len(sampling_weights) == len(x), a dict "
            f"{{class: weight}} or \"balanced\"."
        )
    return _checked(w, "sampling_weights")


def _per_class(value: dict[Any, Any], found: np.ndarray) -> np.ndarray:
    present = np.unique(found).tolist()
    missing = [c for c in present if c not in value]
    if missing:
        named = any(isinstance(c, str) for c in value)  # class names, where labels are numbers
        raise ArgumentError(
            f"`sampling_weights` has no weight for the class(es) {missing[:10]} found in the "
            f"labels (classes given: {sorted(value, key=repr)[:10]}). Fix: give every class "
            f"a weight, 0 to leave a class out" + (
                ", keyed by the labels' numbers (a source's names map to them: "
                "{files.class_indices[name]: weight for name, weight in by_name.items()})."
                if named else ".")
        )
    table = np.zeros(max(present) + 1)
    for c in present:
        table[c] = _checked(np.array([value[c]], dtype=np.float64),
                            f"sampling_weights[{c!r}]", whole=False)[0]
    return _checked(table[found], "sampling_weights")


def _checked(w: np.ndarray, name: str, whole: bool = True) -> np.ndarray:
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        at = f" at sample {i}" if whole else ""
        raise ArgumentError(
            f"`{name}` must be finite and >= 0; received {float(w[i])!r}{at}. Fix: pass "
            f"non-negative weights (0 never draws a sample)."
        )
    if whole and not w.sum() > 0:
        raise ArgumentError(
            f"`{name}` are all zero, so no sample can be drawn. Fix: give at least one "
            f"sample a positive weight."
        )
    return w


def labels(y: Any, n: int, kind: str) -> np.ndarray:
    """Each sample's class, from integer labels or one-hot rows, for class weights."""
    fix = ("Fix: pass the labels as `y` (integers or one-hot rows), or per-sample weights, "
           "e.g. `sampling_weights=w` with w[i] the weight of sample i.")
    if y is None:
        raise ArgumentError(
            f"`sampling_weights` given as {kind} weighs classes, but there are no labels "
            f"(`y` is None and `x` has no `labels`). {fix}"
        )
    while isinstance(y, (dict, list, tuple)) and len(y) == 1:  # one output's {"out": y}
        y = next(iter(y.values())) if isinstance(y, dict) else y[0]
    if not isinstance(y, np.ndarray):
        heads = (" Several outputs: weigh by one head's classes, e.g. with "
                 "`w = 1 / np.bincount(labels)[labels]` for labels = `y[...]` the class ids of "
                 "that head, `sampling_weights=w`." if isinstance(y, (dict, list, tuple))
                 else "")
        shown = (f"a {type(y).__name__} of {list(y) if isinstance(y, dict) else len(y)}"
                 if isinstance(y, (dict, list, tuple)) else got(y))
        raise ArgumentTypeError(
            f"`sampling_weights` given as {kind} needs one array of labels, but `y` is "
            f"{shown}. {fix}{heads}"
        )
    if y.ndim == 2 and y.shape[1] > 1:
        _one_class_per_row(y, kind, fix)
        hot: np.ndarray = np.argmax(y, axis=1)
        return hot
    flat = y.reshape(n) if y.size == n else y
    if flat.ndim == 1 and flat.dtype.kind == "i" and flat.size and flat.min() < 0:
        i = int(np.argmax(flat < 0))
        raise ArgumentError(
            f"`sampling_weights` given as {kind} weighs classes, but {int((flat < 0).sum())} "
            f"of the labels are negative ({int(flat[i])} at sample {i}: no class, an "
            f"unlabelled sample). Fix: pass per-sample weights, 0 for those samples, e.g. "
            f"`sampling_weights=w` with w[i] the weight of sample i, or leave them out.")
    if flat.ndim != 1 or flat.dtype.kind not in "iub":
        text = holds_text(flat)
        raise ArgumentError(
            f"`sampling_weights` given as {kind} needs class labels: integers >= 0 or "
            f"one-hot rows; `y` has shape {y.shape} and dtype {y.dtype}. " + (
                "Fix: encode the labels as integers first, e.g. `codes, class_names = "
                "pd.factorize(labels)` (a pandas Categorical: `labels.cat.codes`), and pass "
                "the codes as `y`." if text else fix)
        )
    return flat.astype(np.int64)


def _one_class_per_row(y: np.ndarray, kind: str, fix: str) -> None:
    """Refuse rows that name no one class: a padded label sequence (OCR's character ids, -1
    past the end) or multi-hot rows, whose largest column is no class. One-hot and
    label-smoothed rows (non-negative, summing to 1) pass."""
    if y.dtype.kind not in "iubf":
        return  # (refused below as no labels)
    sums = y.sum(axis=1, dtype=np.float64)
    bad = np.flatnonzero((y < 0).any(axis=1) | ~(np.abs(sums - 1.0) <= 1e-3))  # (NaN: bad)
    if len(bad):
        row = y[bad[0]]
        zero = int((sums[bad] == 0).sum())
        whys = ([f"{zero} all-zero (no class: an unlabelled sample, to give weight 0 with "
                 f"per-sample weights)"] if zero else []) + (
            [f"{len(bad) - zero} that name no one class (multi-hot labels, a padded "
             f"sequence)"] if len(bad) > zero else [])
        raise ArgumentError(
            f"`sampling_weights` given as {kind} weighs classes, read from `y` as one-hot "
            f"rows, but {len(bad)} of its rows are not one (row {int(bad[0])}: "
            f"{row[:8].tolist()}{' ...' if len(row) > 8 else ''}, which sums to "
            f"{float(sums[bad[0]]):g}): {' and '.join(whys)}. {fix}")


def samples_per_epoch(value: Any, n: int, weighted: bool) -> int:
    """The size of an epoch's global draw: ``n`` by default."""
    if value is None:
        return n
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ArgumentError(
            f"`samples_per_epoch` must be a positive integer; received {got(value)}. Fix: "
            f"pass e.g. `samples_per_epoch={n}` (the dataset's length, the default)."
        )
    if not weighted:
        raise ArgumentError(
            f"`samples_per_epoch`={value!r} draws samples with replacement, which only "
            f"`sampling_weights` asks for. Fix: pass `sampling_weights` too (np.ones(len(x)) "
            f"draws uniformly), or leave `samples_per_epoch` out."
        )
    return int(value)


def fingerprint(w: np.ndarray | None, samples: int) -> dict[str, Any]:
    """What a saved state must match besides the rest: the weights (as a checksum) and the
    draw's size; nothing without weights, so states saved before sampling existed still load."""
    if w is None:
        return {}
    return {"sampling": {"samples_per_epoch": samples,
                         "weights_crc32": zlib.crc32(np.ascontiguousarray(w).tobytes())}}
