"""The value range the images lie in: given, taken from the dtype or the pipeline's ops, and
checked against sample 0 (and a memory map's first rows) before anything starts."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ArgumentError
from ...ops.params import (dtype_range, outside, range_guess)
from ...ops.params import value_range as checked_range
from ...ops.plan import Plan

_CHECK_BYTES = 1 << 24  # chunk size of the whole-array value check: bounded scratch memory


def value_range(value: Any) -> tuple[float, float] | None:
    """None, or a checked ``(low, high)`` with low < high (Keras' ``value_range``)."""
    return checked_range(value)


def resolve_range(given: tuple[float, float] | None, plan: Plan,
                  dtype: Any) -> tuple[float, float] | None:
    """The loader's value range: the one given, else the pipeline's own, else the dtype's
    (None while the dtype is unknown, for a ``load`` source before its first sample)."""
    own = plan.value_range
    if given is not None and own is not None and own != given:
        raise ArgumentError(
            f"`value_range`={given} disagrees with the pipeline's own value_range={own}. Fix: "
            f"say the range your data is in once, to the loader or to the pipeline."
        )
    return given or own or (None if dtype is None else dtype_range(dtype))


def range_origin(given: tuple[float, float] | None, plan: Plan) -> str:
    """Where ``resolve_range``'s range comes from, for the errors that name it: "given" (to
    the loader), "pipeline" (``augment``'s own) or "dtype" (the default for the data's)."""
    if given is not None:
        return "given"
    return "pipeline" if plan.value_range is not None else "dtype"


def _fixed_float(plan: Plan | None, dtype: Any) -> Any:
    """The member of the pipeline that takes float images only in a fixed range whatever the
    `value_range` (an albumentations pipeline: ``float_range``), for float ``dtype``; else
    None."""
    return None if plan is None or np.dtype(dtype).kind != "f" else plan.fixed_float


def check_values(x: np.ndarray, vr: tuple[float, float], origin: str,
                 plan: Plan | None = None, *, part: bool = False) -> None:
    """Every value of ``x`` is finite and inside ``vr``, else the error that names the fix.
    One pass over the data at start-up, in chunks (bounded scratch memory); none for integers
    whose dtype cannot leave ``vr`` (uint8 in (0, 255)), one for a narrower range (a 0/1 mask
    in uint8), since ops would clip what lies outside without a word. A member of the
    ``plan``'s pipeline that takes floats only in a fixed range (albumentations) has that
    range checked instead, with its own message: another ``value_range`` could not help.
    ``part``: ``x`` is the first of the data alone (a memory map's), whose range no fix
    may suggest as the data's."""
    fixed = _fixed_float(plan, x.dtype)
    if fixed is not None:
        if origin == "given" and vr != fixed.float_range:
            raise fixed.float_range_error(x.dtype, f"`value_range`={vr} says these are not")
        vr = fixed.float_range
    if x.dtype.kind in "ui":
        limits = np.iinfo(x.dtype)
        if vr[0] <= limits.min and limits.max <= vr[1]:
            return
    elif x.dtype.kind != "f":
        return
    per = max(1, _CHECK_BYTES // max(1, x[0].nbytes))
    for start in range(0, len(x), per):
        chunk = x[start:start + per]
        finite = np.isfinite(chunk) if x.dtype.kind == "f" else None
        if finite is not None and not finite.all():
            bad = start + int(np.argmin(finite.reshape(len(chunk), -1).all(axis=1)))
            raise _nonfinite("`x`", bad, vr)
        if outside(float(chunk.min()), float(chunk.max()), vr):
            rows = chunk.reshape(len(chunk), -1)
            lows, highs = rows.min(axis=1), rows.max(axis=1)
            bad = start + next(i for i, (lo, hi) in enumerate(zip(lows, highs))
                               if outside(float(lo), float(hi), vr))
            low, high = float(x[bad].min()), float(x[bad].max())
            if fixed is not None:
                raise fixed.float_range_error(
                    x.dtype, f"sample index {bad} spans {low:g}..{high:g}")
            whole = None if part else (min(low, float(x.min())), max(high, float(x.max())))
            raise _out_of_range(vr, origin, x.dtype, low, high, bad, whole)  # (for the fix)


def check_probe_values(input_range: tuple[float, float] | None, nonfinite: bool,
                       vr: tuple[float, float], origin: str, dtype: Any,
                       plan: Plan | None = None) -> None:
    """Sample 0, as a worker loaded it, is finite and inside ``vr`` (memory-mapped or loaded
    data is not read whole: its first sample is what is checked)."""
    if nonfinite:
        raise _nonfinite("sample", 0, vr)
    fixed = _fixed_float(plan, dtype)
    if fixed is not None and input_range is not None and outside(*input_range,
                                                                 fixed.float_range):
        raise fixed.float_range_error(
            dtype, f"sample index 0 spans {input_range[0]:g}..{input_range[1]:g}")
    if input_range is not None and outside(*input_range, vr):
        raise _out_of_range(vr, origin, dtype, *input_range, 0)


def _nonfinite(what: str, index: int, vr: tuple[float, float]) -> ArgumentError:
    """Values within ``vr``, the range the ops take, are the fix (numpy's own default puts
    the float's extremes in, a log of silence's -inf at -3.4e38)."""
    low, high = vr
    return ArgumentError(
        f"{what} holds NaN or infinity (sample index {index}), outside the value range "
        f"declared or taken by the ops (an op would spread them through the image). Fix: "
        f"clean the data first, within the value range ({low:g}, {high:g}), e.g. "
        f"x = np.nan_to_num(x, nan={low:g}, neginf={low:g}, posinf={high:g})."
    )


def _out_of_range(vr: tuple[float, float], origin: str, dtype: Any, low: float, high: float,
                  index: int, whole: tuple[float, float] | None = None) -> ArgumentError:
    """``whole``: the range of all the data, where it was read; where it was not (a memory
    map, samples a ``load`` makes), sample ``index``'s is no fix to suggest: the others may
    span more, which the ops would clip without a word."""
    said = {"given": "", "pipeline": " (`augment`'s own: its Compose's or Keras layers')",
            "dtype": f" (the default for {np.dtype(dtype)} images)"}[origin]
    spans = whole or (low, high)
    guess = str(range_guess(*spans))
    if whole is None:  # (a guess that holds the first sample may clip the others)
        guess, seen = f"{guess} if all the data lies there", (
            " (only the first sample is read here: check the range of all the data, e.g. a "
            "memory map's min and max in chunks)")
    else:
        seen = f" (all of x: {whole[0]:g}..{whole[1]:g})"
    where = (f"to the pipeline, e.g. Compose([...], value_range={guess}) or the Keras "
             f"layers' value_range=" if origin == "pipeline" else f"e.g. value_range={guess}")
    return ArgumentError(
        f"`value_range` is ({vr[0]:g}, {vr[1]:g}){said} but sample index {index} spans "
        f"{low:g}..{high:g}{seen}, so the ops would clip it to a range it is not in. Fix: "
        f"pass the range the data is in, {where}, or clip or rescale the data into "
        f"({vr[0]:g}, {vr[1]:g})" + (f", e.g. np.clip(x, {vr[0]:g}, {vr[1]:g}) for an "
                                     f"overshoot." if 0 <= spans[0] and spans[1] <= 2.0
                                     else ".")
    )
