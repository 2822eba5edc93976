"""µs per image of the Keras-mirroring ops and two whole pipelines, against albumentations and
Keras' own layers in tf.data; ``python -m bench.ops --keras``.

Owns the rows: each op that mirrors a Keras 3 layer or a torchvision policy, on 224x224x3
uint8 photos (``bench.common.workloads.photos``), and two pipelines:

- timm's ImageNet training augmentation: random resized crop, flip, RandAugment (torchvision's
  2 operations at magnitude 9), then MixUp or CutMix (timm's switch, half each) over pairs;
- a Keras guide's block (``RandomFlip("horizontal"), RandomRotation(0.1), RandomZoom(0.1),
  RandomContrast(0.2)``), the shmaug side made by ``shmaug.from_keras`` from the very layers
  the Keras side runs.

MixUp and CutMix have rows of their own: shmaug's ``Mix.mix_rows`` over batches of 32 (what a
worker runs after writing its rows) against Keras' ``MixUp`` / ``CutMix`` layers in tf.data.
Rows with a mix time shmaug batch by batch, writing each augmented image into its row of a
batch as a worker writes into its slot.

Contenders, each on one core: shmaug's op (``value_range`` bound as a loader binds it), the
albumentations twin (``albumentations_twins.KERAS_OP_TWINS``; none where albumentations has no
such transform) and the Keras layer in tf.data (``keras_tfdata.py``). Timing as
``bench/ops/run.py``'s: per round each contender runs once, in a rotating order; round 0 is
warm-up; the table quotes the median of the rounds (min and max in the JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.common.harness import Stats, summarize, time_calls
from bench.common.report import NOT_JUDGED, QUICK, cpu_model, fmt_times, fmt_us
from bench.common.workloads import photos
from bench.ops import albumentations_twins as albu
from bench.ops import keras_tfdata
from shmaug.ops import Compose, CutMix, Maybe, Mix, MixUp, Op, from_keras

Kernel = Callable[[np.ndarray, np.random.Generator], np.ndarray]
VR = (0.0, 255.0)


@dataclass(frozen=True)
class Case:
    """A row: shmaug's pipeline, the Keras layer's builder ``keras(layers)`` (None: Keras has
    no such layer) and the albumentations twin's builder ``albu(A)`` (None: no twin)."""

    name: str
    shmaug: Any
    keras: Callable[[Any], Any] | None
    albu: Callable[[Any], Any] | None = None
    note: str = ""
    mix: Mix | None = None  # shmaug's batch op after ``shmaug`` (None: per image only)


def _op_case(name: str, keras: Callable[[Any], Any] | None, **params: Any) -> Case:
    twin = albu.KERAS_OP_TWINS.get(name)
    return Case(name, Op(name, **params), keras,
                None if twin is None else (lambda A: twin.build(A, 224, 224)),
                "" if twin is None else twin.note)


def op_cases() -> list[Case]:
    return [
        _op_case("hue", lambda L: L.RandomHue(0.1), factor=0.1),
        _op_case("saturation", lambda L: L.RandomSaturation((0.3, 0.7)), factor=(0.3, 0.7)),
        _op_case("color_jitter", lambda L: L.RandomColorJitter(
            value_range=VR, brightness_factor=0.2, contrast_factor=0.2,
            saturation_factor=(0.4, 0.6), hue_factor=0.05)),
        _op_case("grayscale", lambda L: L.RandomGrayscale(1.0), factor=1.0),
        _op_case("color_degeneration", lambda L: L.RandomColorDegeneration(0.5)),
        _op_case("invert", lambda L: L.RandomInvert(1.0), factor=1.0),
        _op_case("solarize", lambda L: L.Solarization(threshold_factor=(0.5, 0.5)),
                 threshold_factor=0.5),
        _op_case("posterize", lambda L: L.RandomPosterization(4), factor=4),
        _op_case("equalize", lambda L: L.Equalization()),
        _op_case("auto_contrast", lambda L: L.AutoContrast()),
        _op_case("clahe", lambda L: L.ContrastLimitedAdaptiveHistogramEqualization()),
        _op_case("channel_shuffle", None),
        _op_case("zoom", lambda L: L.RandomZoom(0.2)),
        _op_case("zoom_out", None),
        _op_case("center_crop", lambda L: L.CenterCrop(196, 196), height=196, width=196),
        _op_case("translation", lambda L: L.RandomTranslation(0.1, 0.1)),
        _op_case("erasing", lambda L: L.RandomErasing()),
        _op_case("jpeg", None),
        _op_case("rand_augment", lambda L: L.RandAugment(value_range=VR)),
        _op_case("trivial_augment_wide", None),
        _op_case("auto_augment", None),
        _op_case("aug_mix", lambda L: L.AugMix(value_range=VR)),
        Case("mixup (batch op)", None, lambda L: _mixing(L.MixUp()), mix=MixUp(0.2, num_classes=10),
             note="per image of a batch of 32; Keras' layer on float32 (it casts uint8)"),
        Case("cutmix (batch op)", None, lambda L: _mixing(L.CutMix()),
             mix=CutMix(1.0, num_classes=10), note="as mixup"),
    ]


def _mixing(layer: Any) -> Callable[..., Any]:
    """Keras' MixUp / CutMix as its docs run it in tf.data: on a batch's images and one-hot
    labels together."""
    tf = keras_tfdata._tf()

    def call(x: Any, training: bool = True) -> Any:
        labels = tf.one_hot(tf.zeros(tf.shape(x)[0], tf.int32), 10)
        return layer({"images": tf.cast(x, tf.float32), "labels": labels},
                     training=training)["images"]

    return call


def guide_block(L: Any) -> Any:
    """The Keras guides' augmentation block, as the guides write it."""
    import keras

    return keras.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1),
                             L.RandomZoom(0.1), L.RandomContrast(0.2)])


def pipeline_cases(layers: Any) -> list[Case]:
    """The two pipelines; ``layers`` is ``keras.layers``, or None without Keras."""
    timm = Case(
        "pipeline: timm ImageNet train",
        Compose([Op("resized_crop", scale=(0.08, 1.0)), Maybe(Op("hflip")),
                 Op("rand_augment", num_ops=2, magnitude=9)]),
        lambda L: _then(_sequential([L.RandomFlip("horizontal"), L.RandAugment(value_range=VR)]),
                        _mixing(L.CutMix())),
        lambda A: A.Compose([A.RandomResizedCrop((224, 224), scale=(0.08, 1.0)),
                             A.HorizontalFlip()]),
        "albumentations has no RandAugment or MixUp / CutMix, Keras no random resized crop: "
        "each runs the rest",
        mix=Mix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=10))
    shmaug_block = None if layers is None else from_keras(guide_block(layers))
    guide = Case(
        "pipeline: Keras guide block", shmaug_block, guide_block,
        lambda A: A.Compose([A.HorizontalFlip(),  # Affine's own p is 0.5: Keras' is 1
                             A.Affine(rotate=(-36, 36), border_mode=4, p=1.0),
                             A.Affine(scale=(1 / 1.1, 1 / 0.9), border_mode=4, p=1.0),
                             A.RandomBrightnessContrast(brightness_limit=0,
                                                        contrast_limit=(0, 0.2), p=1.0)]),
        "shmaug's side is shmaug.from_keras(block) of the Keras side's block")
    return [timm, guide] if shmaug_block is not None else [timm]


def _sequential(items: list[Any]) -> Any:
    import keras

    return keras.Sequential(items)


def _then(first: Any, second: Callable[..., Any]) -> Callable[..., Any]:
    return lambda x, training=True: second(first(x, training=training), training=training)


def _batched(case: Case, images: np.ndarray, calls: int) -> Callable[[int], float]:
    """``time(round) -> µs per image`` of shmaug's side of a row with a mix: batches of
    ``keras_tfdata.BATCH`` images, each written into its row as a worker writes into its
    slot, then the pairs mixed."""
    assert case.mix is not None
    mix, aug = case.mix, None if case.shmaug is None else case.shmaug.with_value_range(VR)
    rows = min(keras_tfdata.BATCH, calls)
    out = np.empty((rows, *images.shape[1:]), images.dtype)

    def batch(i: int, rng: np.random.Generator) -> None:
        for k in range(rows):
            image = images[(i * rows + k) % len(images)]
            out[k] = image if aug is None else aug(image, rng)
        mix.mix_rows(out, 0, rows, mix.draws(0, i, 0, 0, rows, images.shape[1:3]))

    return lambda r: 1e6 / rows * time_calls(
        lambda i, rng=np.random.default_rng(r): batch(i, rng), max(1, calls // rows))


def _timers(case: Case, images: np.ndarray, layers: Any, calls: int
            ) -> dict[str, Callable[[int], float]]:
    """``time(round) -> µs per image`` of each contender of ``case``, by column key."""
    fns: dict[str, Callable[[int], float]] = {}
    if case.mix is not None:
        fns["shmaug"] = _batched(case, images, calls)
    elif case.shmaug is not None:
        aug = case.shmaug.with_value_range(VR)
        fns["shmaug"] = lambda r: 1e6 * time_calls(
            lambda i, rng=np.random.default_rng(r): aug(images[i % len(images)], rng), calls)
    if case.albu is not None and albu.available():
        import albumentations as A

        twin = albu.seeded(case.albu(A))
        fns["albumentations"] = lambda r: 1e6 * time_calls(
            lambda i: twin(images[i % len(images)], None), calls)  # type: ignore[arg-type]
    if case.keras is not None and layers is not None:
        batch = min(keras_tfdata.BATCH, calls)  # a quick run's batches are small
        run = keras_tfdata.runner(case.keras(layers), images, batch)
        batches = max(1, calls // batch)
        fns["keras"] = lambda r: run(batches)
    return fns


def _interleaved(fns: dict[str, Callable[[int], float]], rounds: int) -> dict[str, Stats]:
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds + 1):
        for name in names[r % len(names):] + names[: r % len(names)]:
            us = fns[name](r)
            if r > 0:
                times[name].append(us)
    return {name: summarize(v) for name, v in times.items()}


def run(quick: bool) -> dict[str, Any]:
    import cv2

    cv2.setNumThreads(1)
    images = photos(2 if quick else 64)
    layers = keras_tfdata.layers() if keras_tfdata.available() else None
    calls, rounds = (2, 1) if quick else (64, 7)
    rows = []
    for case in [*(op_cases()[:1] if quick else op_cases()), *pipeline_cases(layers)]:
        stats = _interleaved(_timers(case, images, layers, calls), rounds)
        rows.append({"row": case.name, "note": case.note,
                     **{f"{key}_us": s.median for key, s in stats.items()},
                     "spread_us": {key: s.to_dict() for key, s in stats.items()}})
    return {"quick": quick, "image": "224x224x3 uint8", "threads": 1, "cpu": cpu_model(),
            "keras": layers is not None, "albumentations": albu.available(),
            "timing": f"median of {rounds} interleaved rounds after 1 warm-up round",
            "rows": rows}


def report(result: dict[str, Any]) -> str:
    lines = [*([QUICK + ".", ""] if result["quick"] else []),
             f"`{result.get('command', 'python -m bench.ops --keras')}`", "",
             f"{result['image']}, one core each of {result.get('cpu', '?')}, µs per image: "
             f"{result['timing']}. Keras: the "
             f"layer in tf.data, batches of {keras_tfdata.BATCH} (a quick run's: 2), AUTOTUNE.",
             "",
             "| row | shmaug µs | albumentations µs | Keras tf.data µs | albumentations / "
             "shmaug | Keras / shmaug |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in result["rows"]:
        s, a, k = r.get("shmaug_us"), r.get("albumentations_us"), r.get("keras_us")
        lines.append(f"| {r['row']} | {fmt_us(s)} | {fmt_us(a)} | {fmt_us(k)} | {fmt_times(a, s)} | "
                     f"{fmt_times(k, s)} |")
    lines += ["", "Twins and notes:"]
    lines += [f"- {r['row']}: {r['note']}" for r in result["rows"] if r["note"]]
    if result["quick"]:
        lines += ["", f"- comparisons: {NOT_JUDGED}"]
    else:
        behind = [r["row"] for r in result["rows"] if "shmaug_us" in r and any(
            r.get(f"{k}_us", np.inf) < r["shmaug_us"] for k in ("albumentations", "keras"))]
        lines += ["", "- rows where a contender is faster than shmaug: "
                  + (", ".join(behind) if behind else "none")]
    return "\n".join(lines)
