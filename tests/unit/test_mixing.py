"""MixUp and CutMix on their own (``shmaug.ops.mixing``): the draws, the pixels of a pair and
the soft targets, against what each sample's pixels say; and the arguments refused with
their fix before anything starts."""

from __future__ import annotations

import numpy as np
import pytest

from shmaug.errors import ArgumentError, ArgumentTypeError
from shmaug.ops import CutMix, Mix, MixUp
from shmaug.ops.mixing import CUTMIX, MIXUP, NONE

H, W = 12, 10


def constant_pairs(dtype: type, values: list[float]) -> np.ndarray:
    """Rows each filled with one value, so a mixed row tells how much of which it holds."""
    rows = np.empty((len(values), H, W, 3), dtype)
    for row, value in zip(rows, values):
        row[...] = value
    return rows


def test_same_batch_same_draws_other_batch_other_draws() -> None:
    mix = Mix(num_classes=4)
    a = mix.draws(7, 3, 0, 64, 32, (H, W))
    b = mix.draws(7, 3, 0, 64, 32, (H, W))
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("kind", "lam", "box"))
    for other in (mix.draws(8, 3, 0, 64, 32, (H, W)), mix.draws(7, 4, 0, 64, 32, (H, W)),
                  mix.draws(7, 3, 1, 64, 32, (H, W)), mix.draws(7, 3, 0, 96, 32, (H, W))):
        assert not np.array_equal(a.lam, other.lam)


def test_the_draws_follow_the_recipe() -> None:
    """p and switch_p as the share of pairs mixed and cut; MixUp's weight Beta(a, a); CutMix's
    kept share is what its box leaves."""
    mix = Mix(mixup_alpha=0.4, cutmix_alpha=1.0, p=0.8, switch_p=0.25, num_classes=2)
    drawn = [mix.draws(0, e, 0, 0, 2000, (224, 224)) for e in range(5)]
    kind = np.concatenate([d.kind for d in drawn])
    assert abs(np.mean(kind != NONE) - 0.8) < 0.02
    assert abs(np.mean(kind[kind != NONE] == CUTMIX) - 0.25) < 0.02
    lam = np.concatenate([d.lam[d.kind == MIXUP] for d in drawn])
    reference = np.random.default_rng(0).beta(0.4, 0.4, 200_000)
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):  # the quantiles of Beta(0.4, 0.4)
        assert abs(np.quantile(lam, q) - np.quantile(reference, q)) < 0.03
    for d in drawn:
        cut = d.kind == CUTMIX
        top, bottom, left, right = d.box[cut].T
        assert np.all((0 <= top) & (top <= bottom) & (bottom <= 224))
        assert np.all((0 <= left) & (left <= right) & (right <= 224))
        np.testing.assert_allclose(d.lam[cut], 1 - (bottom - top) * (right - left) / 224**2)
        assert np.all(d.lam[d.kind == NONE] == 1.0)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float16, np.float32])
def test_a_pair_and_its_labels_agree(dtype: type) -> None:
    """Each row's mean pixel is its soft label's mix of the two samples' values: MixUp
    blends (rounded in integer dtypes), CutMix swaps one box, the same in both rows."""
    full = 200 if dtype in (np.uint8, np.uint16) else 0.8
    mix = Mix(mixup_alpha=1.0, cutmix_alpha=1.0, num_classes=8)
    values = [float(np.asarray(full * k / 7, dtype)) for k in range(8)]  # as stored
    for batch in range(6):
        rows = constant_pairs(dtype, values)
        drawn = mix.draws(1, 0, 0, batch * 8, 8, (H, W))
        mix.mix_rows(rows, 0, 8, drawn)
        soft = mix.soft_labels(np.arange(8), drawn)
        np.testing.assert_allclose(soft.sum(axis=1), 1, rtol=1e-6)
        expected = soft @ np.array(values, np.float64)
        tolerance = 0.5 if dtype in (np.uint8, np.uint16) else 2e-3 * full
        np.testing.assert_allclose(rows.astype(np.float64).mean(axis=(1, 2, 3)), expected,
                                   atol=tolerance)
        for k in np.flatnonzero(drawn.kind == CUTMIX):  # each row keeps its own outside
            top, bottom, left, right = drawn.box[k]
            inside = np.zeros((H, W), bool)
            inside[top:bottom, left:right] = True
            a, b = rows[2 * k, ..., 0], rows[2 * k + 1, ..., 0]
            assert np.all(a[inside] == np.asarray(values[2 * k + 1], dtype))
            assert np.all(a[~inside] == np.asarray(values[2 * k], dtype))
            assert np.all(b[inside] == np.asarray(values[2 * k], dtype))


def test_only_the_pairs_of_the_rows_given_are_mixed_and_a_lone_last_row_stays() -> None:
    mix = MixUp(1.0, num_classes=5)
    drawn = mix.draws(0, 0, 0, 0, 5, (H, W))
    rows = constant_pairs(np.float32, [0.0, 0.2, 0.4, 0.6, 0.8])
    before = rows.copy()
    mix.mix_rows(rows, 2, 5, drawn)  # the second task of a batch cut after row 2
    np.testing.assert_array_equal(rows[:2], before[:2])
    np.testing.assert_array_equal(rows[4], before[4])
    assert not np.array_equal(rows[2:4], before[2:4])
    soft = mix.soft_labels(np.arange(5), drawn)
    np.testing.assert_array_equal(soft[4], np.eye(5, dtype=np.float32)[4])


def test_label_smoothing_and_one_hot_labels() -> None:
    mix = CutMix(1.0, p=0.0, label_smoothing=0.1).for_labels(np.eye(4)[[0, 1, 2, 3]])
    assert mix.num_classes == 4
    drawn = mix.draws(0, 0, 0, 0, 4, (H, W))
    soft = mix.soft_labels(np.eye(4, dtype=np.float32), drawn)
    np.testing.assert_allclose(soft, np.eye(4) * 0.9 + 0.025, rtol=1e-6)
    np.testing.assert_array_equal(mix.one_hot(np.eye(4)), np.eye(4))


def test_repr_shows_what_differs_from_the_defaults() -> None:
    assert repr(Mix(label_smoothing=0.1)) == "Mix(label_smoothing=0.1)"
    assert Mix(num_classes=3) == Mix(num_classes=3)


def test_repr_names_the_single_op_form_it_is() -> None:
    """Issue 60: ``repr(CutMix(1.0))`` read ``Mix(mixup_alpha=0.0)``, so an error about a
    CutMix quoted a MixUp. Each repr rebuilds an equal mix."""
    assert repr(CutMix(1.0)) == "CutMix(factor=1.0)"
    assert repr(MixUp(0.2)) == "MixUp(alpha=0.2)"
    assert repr(CutMix(0.5, p=0.5, num_classes=10)) == "CutMix(factor=0.5, p=0.5, num_classes=10)"
    assert repr(MixUp(label_smoothing=0.1)) == "MixUp(alpha=0.2, label_smoothing=0.1)"
    assert repr(Mix(mixup_alpha=0.0, switch_p=0.3)) == "Mix(mixup_alpha=0.0, switch_p=0.3)"
    for mix in (CutMix(1.0), MixUp(0.4, p=0.5), Mix(mixup_alpha=0.0, switch_p=0.3), Mix()):
        assert eval(repr(mix), {"Mix": Mix, "MixUp": MixUp, "CutMix": CutMix}) == mix


@pytest.mark.parametrize("make, name", [
    (lambda: Mix(mixup_alpha=-1), "mixup_alpha"),
    (lambda: Mix(mixup_alpha=0, cutmix_alpha=0), "cutmix_alpha"),
    (lambda: Mix(p=1.5), "`p`"),
    (lambda: Mix(switch_p=float("nan")), "switch_p"),
    (lambda: MixUp(label_smoothing=1.0), "label_smoothing"),
    (lambda: CutMix(num_classes=1), "num_classes"),
    (lambda: CutMix(num_classes=2.5), "num_classes"),
])
def test_bad_arguments_are_refused_by_name_with_the_fix(make, name) -> None:
    with pytest.raises(ArgumentError, match=name) as err:
        make()
    assert "Fix" in str(err.value)


def test_a_string_is_no_number() -> None:
    with pytest.raises(ArgumentTypeError, match=r"`alpha`|`mixup_alpha`.*Fix"):
        MixUp("0.2")  # type: ignore[arg-type]


@pytest.mark.parametrize("mix, labels, moved, match", [
    (Mix(), None, (), r"y=None"),
    (Mix(), {"a": np.zeros(4, int), "b": np.zeros(4, int)}, (), r"one array of labels.*2 arr"),
    (Mix(), np.zeros(4, int), (), r"num_classes=2\b"),
    (Mix(num_classes=3), np.array([0, 1, 5]), (), r"from 0 to 5.*Fix: pass num_classes=6"),
    (Mix(), np.arange(4, dtype=np.float32), (), r"one sigmoid unit.*dtype float32"),  # ids
    (Mix(num_classes=4), np.eye(3), (), r"num_classes` is 4.*one-hot rows of 3"),
    (Mix(), np.zeros(4, int), ("mask",), r"mask"),
])
def test_labels_a_mix_cannot_take_are_refused(mix, labels, moved, match) -> None:
    with pytest.raises(ArgumentError, match=match):
        mix.for_labels(labels, moved)


def test_the_one_array_of_a_one_output_y_is_the_labels() -> None:
    y = np.arange(4) % 3
    for labels in ({"output": y}, [y], ({"out": [y]},)):
        assert Mix().label_array(labels) is y
    assert Mix(num_classes=3).for_labels({"output": y}, ()).num_classes == 3


def test_regression_targets_are_refused_with_mix_none_not_cast_to_classes() -> None:
    """A regression user's ages, (N, 2) with a count, were taken as class-probability rows
    and rewritten by label_smoothing (36.52 -> 32.92, even with p=0); one column was told
    `y.astype(int)`, which makes a hundred classes of them."""
    import shmaug

    x = np.zeros((8, 8, 8), np.uint8)
    ages = np.random.default_rng(0).normal(40, 10, (8, 2)).astype(np.float32)
    for y, mix in ((ages, MixUp(0.2, p=0.0, label_smoothing=0.1)), (ages[:, 0], MixUp(0.2))):
        with pytest.raises(shmaug.ArgumentError, match=r"regression targets\?.*mix=None") as told:
            shmaug.Loader(x, y, batch_size=4, mix=mix, workers=0)
        assert "astype(int)" not in str(told.value)
        assert ("softmax" in str(told.value)) is (y.ndim == 2)  # (rows: a teacher's logits?)
    with pytest.raises(shmaug.ArgumentError, match=r"y.astype\(int\)"):  # ids kept as floats
        shmaug.Loader(x, np.arange(8, dtype=np.float32) % 3, batch_size=4, mix=MixUp(0.2),
                      workers=0)
    masks = np.zeros((8, 8, 8, 1), np.uint8)  # a mask as y: not a cast away from labels
    with pytest.raises(shmaug.ArgumentError, match=r"maps of each image's pixels.*mix=None"):
        shmaug.Loader(x, masks, batch_size=4, mix=MixUp(0.2), workers=0)
    soft = np.eye(4, dtype=np.float32)[np.arange(8) % 4] * 0.9 + 0.025
    with shmaug.Loader(x, soft, batch_size=4, mix=MixUp(0.2), workers=0) as ok:
        assert ok.batch(0)[1].shape == (4, 4)  # (rows of probabilities: mixed)
