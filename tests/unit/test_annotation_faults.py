"""Detection and segmentation faults that gave wrong results silently (issue 60): each is
refused with its fix, or now gives the right answer."""

from __future__ import annotations

import pytest

from shmaug.errors import ArgumentError, ArgumentTypeError
from shmaug.ops import Compose, Maybe, Op


def test_min_visibility_range_is_refused_not_cut() -> None:
    with pytest.raises(ArgumentTypeError, match=r"one number, not a range.*min_visibility=0.2"):
        Compose([Op("hflip")], min_visibility=(0.2, 0.9))
    with pytest.raises(ArgumentTypeError, match="not a range"):
        Maybe(Op("hflip"), p=(0.2, 0.9))


@pytest.mark.parametrize("value, fix", [(1.5, "min_visibility=1.0"),
                                        (-0.2, "min_visibility=0.0")])
def test_min_visibility_out_of_range_suggests_a_valid_value(value: float, fix: str) -> None:
    with pytest.raises(ArgumentError, match=f"e.g. {fix}\\."):
        Compose([Op("hflip")], min_visibility=value)
    Compose([Op("hflip")], min_visibility=float(fix.split("=")[1]))  # the fix works


def test_range_error_suggests_a_range_inside_the_limits() -> None:
    from shmaug.ops.params import bounds
    with pytest.raises(ArgumentError, match=r"e.g. x=\(0.5, 1.0\)"):
        bounds((0.5, 1.5), "x", 0.0, 1.0)
