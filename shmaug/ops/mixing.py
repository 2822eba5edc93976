"""MixUp and CutMix: batch ops that mix pairs of samples, and their labels into soft targets.

Where they run, and why. In the workers, on neighbouring rows of a batch: rows 2k and 2k + 1
form pair k, each row becomes a mix of both (symmetric, as timm's ``pair`` mode). A shuffled
epoch makes neighbours a random pairing, as Keras' in-batch permutation is. The engine cuts a
batch into tasks at even rows only, so both rows of a pair are made by one worker, which mixes
them just after writing them:

- the pixel work runs on every core, on images still in cache, and never in the main process,
  whose time per batch is the ceiling on a many-core machine;
- a pair's draws come from one random stream per batch, keyed by (seed, epoch, shard, batch),
  so a batch is the same for any worker count, task cut or start method;
- the main process mixes the labels from the same draws (``Mix.soft_labels``): a few hundred
  bytes per batch.

Only passes that train are mixed. Batches read in the dataset's order (``evaluate``,
``predict``, validation, ``in_order=True``) come out unmixed, their labels as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import cv2
import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, got
from ..seeding import epoch_key
from .core import config_type, read_only

NONE, MIXUP, CUTMIX = 0, 1, 2  # how a pair is mixed
_TAG = 0x6D6978  # "mix": keeps a batch's mixing stream apart from its shuffle's
_CV_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32),
              np.dtype(np.float64))  # what cv2.addWeighted blends in place


@dataclass(frozen=True, slots=True)
class PairDraws:
    """What each pair of a batch drew: how it is mixed (``NONE``, ``MIXUP``, ``CUTMIX``), the
    weight of each row's own sample (for CutMix, the share of its pixels it keeps) and
    CutMix's box ``(top, bottom, left, right)``, the same in both images of the pair."""

    kind: np.ndarray  # (pairs,) int8
    lam: np.ndarray  # (pairs,) float64
    box: np.ndarray  # (pairs, 4) int64


@read_only
@dataclass(frozen=True, slots=True)
class Mix:
    """MixUp and CutMix on pairs of samples, with their labels mixed into soft targets.

    Pass it as ``mix=`` to ``shmaug.Loader`` or ``shmaug.Sequence``; ``MixUp`` and ``CutMix``
    make the single-op forms, named as Keras' layers. The defaults are timm's ImageNet recipe
    (``--mixup 0.8 --cutmix 1.0``): each pair is mixed with probability ``p``, by CutMix with
    probability ``switch_p`` when both are on, else by MixUp.

    Args:
        mixup_alpha: MixUp's weight is drawn from Beta(alpha, alpha); 0 turns MixUp off.
        cutmix_alpha: CutMix's share is drawn from Beta(alpha, alpha), its box from it as
            timm's ``rand_bbox`` makes it (side ``sqrt(1 - share)`` of the image's, rounded
            down to an even number of pixels, centred uniformly, clipped; the labels take
            the share of pixels each image keeps); 0 turns CutMix off.
        p: the probability that a pair is mixed at all.
        switch_p: with both on, the probability that a mixed pair takes CutMix.
        label_smoothing: ``eps``: each one-hot label becomes ``(1 - eps) * y + eps / classes``
            before mixing, as ``keras.losses.CategoricalCrossentropy(label_smoothing=eps)``
            and timm do.
        num_classes: the classes, where ``y`` holds class ids; None: ``y`` must hold one row
            of class probabilities (one-hot) per sample, as Keras' ``MixUp`` layer takes.

    Labels come out as float32 rows of ``num_classes`` soft targets: train with
    ``keras.losses.CategoricalCrossentropy`` (not the sparse one).
    """

    mixup_alpha: float = 0.8
    cutmix_alpha: float = 1.0
    p: float = 1.0
    switch_p: float = 0.5
    label_smoothing: float = 0.0
    num_classes: int | None = None

    def __post_init__(self) -> None:
        for name in ("mixup_alpha", "cutmix_alpha"):
            _set(self, name, _number(getattr(self, name), name, 0.0, math.inf, "0.8"))
        if self.mixup_alpha == 0 and self.cutmix_alpha == 0:
            raise ArgumentError(
                "`mixup_alpha` and `cutmix_alpha` are both 0, so nothing would be mixed. Fix: "
                "give one of them a positive value (timm's recipe: mixup_alpha=0.8, "
                "cutmix_alpha=1.0); to mix nothing while the labels stay soft rows (mixing "
                "switched off for the last epochs, as the loss still takes), p=0, e.g. "
                "MixUp(0.2, num_classes=10, p=0); or mix=None, whose labels are as given.")
        _set(self, "p", _number(self.p, "p", 0.0, 1.0, "1.0"))
        _set(self, "switch_p", _number(self.switch_p, "switch_p", 0.0, 1.0, "0.5"))
        _set(self, "label_smoothing",
             _number(self.label_smoothing, "label_smoothing", 0.0, 1.0, "0.1", open_top=True))
        if self.num_classes is not None:
            if isinstance(self.num_classes, bool) or not isinstance(
                    self.num_classes, (int, np.integer)) or self.num_classes < 2:
                raise ArgumentError(
                    f"`num_classes` expects a whole number >= 2, or None for one-hot labels; "
                    f"received {got(self.num_classes)}. Fix: pass the number of classes, "
                    f"e.g. num_classes=10.")
            _set(self, "num_classes", int(self.num_classes))

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict of every setting (a default that changes in another version
        leaves a saved mix as it was); ``shmaug.from_config`` rebuilds an equal mix."""
        return {"type": "Mix", **{f.name: getattr(self, f.name) for f in fields(self)}}

    def __repr__(self) -> str:
        """As it would be written: ``MixUp(alpha=...)`` or ``CutMix(factor=...)`` for the
        single-op forms (an error about a CutMix must not quote a MixUp), else ``Mix(...)``
        with what differs from the defaults."""
        defaults = {f.name: f.default for f in fields(self)}
        changed = {f.name: getattr(self, f.name) for f in fields(self)
                   if getattr(self, f.name) != f.default}
        single = self.switch_p == defaults["switch_p"] and 0.0 in (self.mixup_alpha,
                                                                  self.cutmix_alpha)
        if not single:
            return f"Mix({', '.join(f'{k}={v!r}' for k, v in changed.items())})"
        name, arg, value = ("MixUp", "alpha", self.mixup_alpha) if self.cutmix_alpha == 0 \
            else ("CutMix", "factor", self.cutmix_alpha)
        rest = "".join(f", {k}={v!r}" for k, v in changed.items()
                       if k not in ("mixup_alpha", "cutmix_alpha"))
        return f"{name}({arg}={value!r}{rest})"

    # -- in the main process, before anything starts ----------------------------------------

    def for_labels(self, labels: Any, spatial: Any = ()) -> Mix:
        """This mix checked against the dataset's labels, ``num_classes`` filled in: what the
        ``Loader`` keeps. ``spatial``: the names of the masks, boxes or keypoints in ``y``,
        which a mix refuses: MixUp blends two images, whose masks hold class ids that do not
        blend and whose boxes would all need room in one padded row; CutMix pastes a window
        whose mask and boxes would have to be pasted and cut too, which shmaug's mix (made in
        the ring, after the targets were written) does not do."""
        if spatial:
            raise ArgumentError(
                f"`mix` ({self!r}) mixes images and class labels, but `y` also holds "
                f"{', '.join(repr(s) for s in spatial)}, which lies on the image and cannot "
                f"be mixed so (MixUp's blend has no mask or box of its own; CutMix would have "
                f"to cut and paste them too). Fix: pass mix=None, or leave those targets out "
                f"of `y`.")
        labels = self.label_array(labels)
        if labels.dtype.kind == "b" and self.num_classes is not None:
            labels = labels.astype(np.int64)  # bools given classes: ids 0 and 1
        if _binary(labels):  # one sigmoid unit's targets in [0, 1]: blended as they are
            if self.label_smoothing or self.num_classes not in (None, 1):
                raise ArgumentError(
                    f"`y` holds one column of floats in [0, 1], targets of one sigmoid unit, "
                    f"which the mix blends as they are; it takes no "
                    f"{'label_smoothing' if self.label_smoothing else 'num_classes'} for them "
                    f"({self!r}). Fix: leave it out (smooth in the loss: keras.losses."
                    f"BinaryCrossentropy(label_smoothing=0.1)), or pass class ids as integers.")
            binary = replace(self)
            _set(binary, "num_classes", 1)  # one column, blended as it is (never given so)
            return binary
        if labels.ndim == 2 and labels.shape[1] > 1:  # rows of class probabilities
            outside = labels.dtype.kind == "f" and labels.size and not (
                0.0 <= float(np.nanmin(labels)) and float(np.nanmax(labels)) <= 1.0)
            if outside:  # (a regression's targets: smoothed and blended as if classes)
                raise ArgumentError(
                    f"`mix` ({self!r}) mixes class labels, but `y` holds rows of "
                    f"{labels.shape[1]} floats from {float(np.nanmin(labels)):g} to "
                    f"{float(np.nanmax(labels)):g}, which are no class probabilities "
                    f"(one-hot or multi-hot rows lie in [0, 1]): a teacher's logits, or "
                    f"regression targets? Fix: logits as probabilities first (a softmax "
                    f"over each row: `scipy.special.softmax(y, axis=1)`), which mix as soft "
                    f"labels; for regression targets mix=None (blending them is a loss of "
                    f"its own, not the mix's).")
            if self.num_classes not in (None, labels.shape[1]):
                raise ArgumentError(
                    f"`num_classes` is {self.num_classes}, but `y` holds one-hot rows of "
                    f"{labels.shape[1]} classes. Fix: pass num_classes={labels.shape[1]} or "
                    f"leave it out.")
            return replace(self, num_classes=int(labels.shape[1]))
        if labels.ndim > 2 or not np.issubdtype(labels.dtype, np.integer):
            whole = labels.dtype.kind == "f" and bool(np.all(np.mod(labels, 1) == 0))
            raise ArgumentError(
                f"`mix` needs `y` as class ids (integers, shape (N,)), one-hot rows (N, "
                f"classes) or one sigmoid unit's targets (one column of floats in [0, 1]); "
                f"received an array of shape {labels.shape} and dtype {labels.dtype}. Fix: "
                + ("these are maps of each image's pixels (masks?), which a mix cannot "
                   "blend as labels: pass mix=None for them." if labels.ndim > 2 else
                   "convert the labels, e.g. `y.astype(int)`." if whole or labels.dtype.kind
                   != "f" else "these are no class ids (floats with fractions: regression "
                   "targets?): pass mix=None for them."))
        low, high = (int(labels.min()), int(labels.max())) if labels.size else (0, 0)
        if self.num_classes is None:
            unit = (" For one sigmoid unit's 0/1 targets, pass them as floats instead, "
                    "y.astype('float32'), which the mix blends as they are."
                    if high <= 1 and low >= 0 and labels.shape[1:] in ((), (1,)) else "")
            raise ArgumentError(
                f"`mix` makes soft targets of one row per class, and `y` holds class ids, "
                f"so it needs the number of classes. Fix: give the mix num_classes, e.g. "
                f"shmaug.ops.MixUp(0.2, num_classes={max(high + 1, 2)}) (the largest id in y is "
                f"{high}), or pass y as one-hot rows.{unit}")
        if low < 0 or high >= self.num_classes:
            fix = (f"drop or relabel the samples of id {low} (a padding or 'ignore' label "
                   f"has no row to mix into)" if low < 0 else f"pass num_classes={high + 1}")
            raise ArgumentError(
                f"`y` holds class ids from {low} to {high}, outside 0..{self.num_classes - 1} "
                f"for num_classes={self.num_classes}. Fix: {fix}, or map the labels to "
                f"0..num_classes - 1.")
        return self

    def label_array(self, labels: Any) -> np.ndarray:
        """The one array of ``y`` that holds the labels: ``y`` itself, or the only array in
        a dict / list / tuple (a one-output model's ``{"output": y}``)."""
        leaves: list[Any] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, (list, tuple)):
                for value in node:
                    walk(value)
            elif node is not None:
                leaves.append(node)

        walk(labels)
        if len(leaves) != 1 or not isinstance(leaves[0], np.ndarray):
            shown = "no labels (y=None)" if labels is None else (
                f"{len(leaves)} arrays" if len(leaves) > 1 else got(labels))
            raise ArgumentError(
                f"`mix` ({self!r}) mixes each pair's labels as it mixes their images, so it "
                f"needs `y` to be one array of labels; received {shown}. Fix: pass y as class "
                f"ids (with num_classes=...) or as one-hot rows.")
        array: np.ndarray = leaves[0]
        return array

    # -- where both sides meet: the draws ------------------------------------------------------

    def draws(self, seed: int, epoch: int, shard: int, batch_start: int, rows: int,
              shape: tuple[int, ...]) -> PairDraws:
        """What the pairs of a batch drew: a function of (seed, epoch, shard, the batch's
        first position) and of ``rows`` (a full batch's, so a short last batch draws as a
        full one would) and the image ``shape``, computed alike in the workers and the main
        process."""
        pairs = (rows + 1) // 2
        rng = np.random.Generator(np.random.PCG64(
            [_TAG, epoch_key(seed, epoch), shard, batch_start]))
        mixed = rng.random(pairs) < self.p
        cut = rng.random(pairs) < (self.switch_p if self.mixup_alpha > 0 else 1.0)
        if self.cutmix_alpha == 0:
            cut[:] = False
        kind = np.where(mixed, np.where(cut, CUTMIX, MIXUP), NONE).astype(np.int8)
        lam = np.ones(pairs)
        if self.mixup_alpha > 0:
            lam = np.where(kind == MIXUP, rng.beta(self.mixup_alpha, self.mixup_alpha, pairs),
                           lam)
        box = np.zeros((pairs, 4), np.int64)
        if self.cutmix_alpha > 0:
            share = rng.beta(self.cutmix_alpha, self.cutmix_alpha, pairs)
            centre = rng.random((pairs, 2))
            h, w = shape[0], shape[1]
            cut_h = (h * np.sqrt(1.0 - share)).astype(np.int64)  # as timm's rand_bbox
            cut_w = (w * np.sqrt(1.0 - share)).astype(np.int64)
            cy, cx = (centre[:, 0] * h).astype(np.int64), (centre[:, 1] * w).astype(np.int64)
            box = np.stack([np.clip(cy - cut_h // 2, 0, h), np.clip(cy + cut_h // 2, 0, h),
                            np.clip(cx - cut_w // 2, 0, w), np.clip(cx + cut_w // 2, 0, w)],
                           axis=1)
            kept = 1.0 - (box[:, 1] - box[:, 0]) * (box[:, 3] - box[:, 2]) / float(h * w)
            lam = np.where(kind == CUTMIX, kept, lam)
            box[kind != CUTMIX] = 0
        return PairDraws(kind, lam, box)

    # -- in a worker: the pixels ---------------------------------------------------------------

    @staticmethod
    def mix_rows(rows: np.ndarray, first: int, stop: int, drawn: PairDraws) -> None:
        """Mix, in place, the pairs among ``rows[first:stop]`` of a batch (``first`` even;
        a last row without a partner stays as it is)."""
        for k in range(first // 2, stop // 2):
            kind = drawn.kind[k]
            if kind == NONE:
                continue
            a, b = rows[2 * k], rows[2 * k + 1]
            if kind == MIXUP:
                _blend(a, b, float(drawn.lam[k]))
            else:
                top, bottom, left, right = drawn.box[k].tolist()
                patch = a[top:bottom, left:right].copy()
                a[top:bottom, left:right] = b[top:bottom, left:right]
                b[top:bottom, left:right] = patch

    # -- in the main process: the labels -------------------------------------------------------

    def one_hot(self, labels: np.ndarray) -> np.ndarray:
        """A batch's labels (class ids, or rows of class probabilities) as float32 rows of
        ``num_classes``: what a batch read in order holds, so ``evaluate`` takes the same
        loss as training."""
        assert self.num_classes is not None, "for_labels fills it in"
        if labels.ndim == 2 and labels.shape[1] == self.num_classes or (
                self.num_classes == 1 and labels.dtype.kind in "fb"):  # (binary: as they are)
            return labels.astype(np.float32)
        y = np.zeros((len(labels), self.num_classes), np.float32)
        y[np.arange(len(labels)), labels.reshape(len(labels)).astype(np.int64)] = 1.0
        return y

    def soft_labels(self, labels: np.ndarray, drawn: PairDraws) -> np.ndarray:
        """A batch's labels as float32 soft targets: one-hot, smoothed, and each mixed
        pair's rows mixed by its weight."""
        assert self.num_classes is not None, "for_labels fills it in"
        y = self.one_hot(labels)
        if self.label_smoothing:
            y = y * np.float32(1.0 - self.label_smoothing) + np.float32(
                self.label_smoothing / self.num_classes)
        return self.blended(y, drawn)

    @staticmethod
    def blended(rows: np.ndarray, drawn: PairDraws) -> np.ndarray:
        """A batch's float ``rows`` (soft labels, another input, sample weights) with each
        mixed pair's rows mixed by its weight, as its images were (a CutMix pair by the share
        of pixels each kept)."""
        out = np.array(rows, dtype=rows.dtype if rows.dtype.kind == "f" else np.float32)
        paired = len(out) // 2 * 2
        lam = drawn.lam[: paired // 2].astype(out.dtype).reshape(-1, *[1] * (out.ndim - 1))
        a, b = out[0:paired:2].copy(), out[1:paired:2]  # (b is written last)
        out[0:paired:2] = lam * a + (1 - lam) * b
        out[1:paired:2] = lam * b + (1 - lam) * a
        return out


def _binary(labels: np.ndarray) -> bool:
    """Whether ``labels`` are one sigmoid unit's targets: one column of floats in [0, 1] (or
    of bools)."""
    return (labels.dtype.kind in "fb" and (labels.ndim == 1 or labels.shape[1:] == (1,))
            and bool(((labels >= 0) & (labels <= 1)).all()))


@config_type("Mix")
def _from_config(cfg: dict[str, Any]) -> Mix:
    return Mix(**{f.name: cfg[f.name] for f in fields(Mix) if f.name in cfg})


def MixUp(alpha: float = 0.2, *, p: float = 1.0, label_smoothing: float = 0.0,  # noqa: N802
          num_classes: int | None = None) -> Mix:
    """MixUp alone, as Keras' ``MixUp(alpha=0.2)`` layer: each pair of samples becomes two
    blends ``lam * a + (1 - lam) * b`` (and the other way round), lam ~ Beta(alpha, alpha),
    their labels blended alike. See ``Mix`` for the arguments."""
    return Mix(mixup_alpha=alpha, cutmix_alpha=0.0, p=p, label_smoothing=label_smoothing,
               num_classes=num_classes)


def CutMix(factor: float = 1.0, *, p: float = 1.0, label_smoothing: float = 0.0,  # noqa: N802
           num_classes: int | None = None) -> Mix:
    """CutMix alone, named as Keras' ``CutMix(factor=1.0)`` layer: each pair of samples swaps
    one box (its share drawn from Beta(factor, factor)), placed as timm places it (clipped at
    the edges: at factor 1 an image takes 30% of its partner on average; Keras keeps its box
    inside, 45%), and each label is weighted by the share of pixels its image kept. See
    ``Mix`` for the arguments."""
    return Mix(mixup_alpha=0.0, cutmix_alpha=factor, p=p, label_smoothing=label_smoothing,
               num_classes=num_classes)


def _blend(a: np.ndarray, b: np.ndarray, lam: float) -> None:
    """``a, b = lam * a + (1 - lam) * b, lam * b + (1 - lam) * a``, in place, rounded and
    saturated to the dtype (OpenCV's ``addWeighted``, over rows of H x (W * C) values)."""
    if a.dtype in _CV_DTYPES and a.flags.c_contiguous and b.flags.c_contiguous:
        a2, b2 = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
        mixed = cv2.addWeighted(a2, lam, b2, 1.0 - lam, 0.0)
        cv2.addWeighted(b2, lam, a2, 1.0 - lam, 0.0, dst=b2)
        a2[...] = mixed
        return
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    mixed_a, mixed_b = lam * fa + (1 - lam) * fb, lam * fb + (1 - lam) * fa
    if np.issubdtype(a.dtype, np.integer):
        info = np.iinfo(a.dtype)
        mixed_a = np.clip(np.rint(mixed_a), info.min, info.max)
        mixed_b = np.clip(np.rint(mixed_b), info.min, info.max)
    a[...], b[...] = mixed_a, mixed_b


def _set(mix: Mix, name: str, value: Any) -> None:
    object.__setattr__(mix, name, value)


def _number(value: Any, name: str, low: float, high: float, example: str,
            open_top: bool = False) -> float:
    """``value`` as a float in [low, high] (or [low, high)), refused with the fix."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(
            f"`{name}` expects a number; received {got(value)}. Fix: pass e.g. "
            f"{name}={example}.")
    number = float(value)
    inside = low <= number < high if open_top else low <= number <= high
    if not inside or math.isnan(number):
        top = f"{high})" if open_top else f"{high}]"
        raise ArgumentError(
            f"`{name}` expects a number in [{low}, {top}; received {value!r}. Fix: pass e.g. "
            f"{name}={example}.")
    return number
