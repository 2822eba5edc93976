"""µs per sample of the geometric ops with their targets: a 512x512x3 uint8 photo with a mask
and 10 boxes, against albumentations, torchvision v2 and Keras' layers in tf.data;
``python -m bench.ops --targets``.

Owns the rows: each geometric op that albumentations, torchvision and Keras all have (flip,
rotation, shear, zoom, perspective, resized crop), the elastic and sine warps (fields: their
boxes follow each moved outline), and a Keras guide's block (flip, rotation, zoom) as one
pipeline. Each row times, on one core:

- shmaug, the image alone (``op(image, rng)``), and the image with its targets
  (``Compose([op], bounding_box_format="xyxy").augment_targets``: the mask warped, the 10
  boxes moved, clipped and filtered), as a worker makes them: a task of 24 samples, its boxes
  moved together once its images are made (``targets.box_moves``); their ratio is what the
  targets cost;
- shmaug's mask moved alone through the moves the image made (``Move.mask``, the same
  draws): (image + mask) / image is the floor of that ratio, what the targets would cost
  were the boxes and every step around them free. A one-channel mask is a third of a
  three-channel image's pixels, so where the op's cost is its pixels (a flip, a resize) the
  floor alone comes near the 1.3x target;
- shmaug's sample with the mask only, and with the boxes only: each target's cost where it
  runs, right after its image's warp (the mask's and the boxes' own steps cost 2-3x there
  what they cost in a loop of their own: the warp has evicted what they use);
- albumentations, the same transform in an ``A.Compose`` with ``bbox_params`` (pascal_voc,
  labels) and the mask;
- torchvision v2, the transform on a ``tv_tensors.Image``, ``BoundingBoxes`` (XYXY) and
  ``Mask``, per sample as a ``DataLoader`` worker runs it (``torch.set_num_threads(1)``);
- Keras, the layer with ``bounding_box_format="xyxy"`` mapped over batches of 32 dicts
  (``images``, ``bounding_boxes``, ``segmentation_masks``) in tf.data, as its guides run it.

Every contender cycles through ``calls`` distinct photos and masks (crops and tints of one
photo, ``workloads.photos``; copies of one mask), as a worker's task holds distinct samples:
one photo used again stays in the core's L2 cache, which made the image alone look up to 1.7x
faster than it is in a task (a flip: its pixels are its cost) and the targets' ratio higher.

Timing as ``bench/ops/run.py``'s: per round each contender runs once, in a rotating order;
round 0 is warm-up; the table quotes the median of the rounds (min and max in the JSON).
A contender that is not installed, or has no such transform, is "—".
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.common.harness import summarize, time_calls
from bench.common.report import NOT_JUDGED, QUICK, cpu_model, fmt_times, fmt_us
from bench.common.workloads import photo, photos
from bench.ops import keras_tfdata
from shmaug.ops import Compose, Maybe, Op
from shmaug.ops.targets import box_moves
from shmaug.ops.targets.moves import noting
from shmaug.ops.targets.sample import SETTLED

SIDE, BOXES = 512, 10
TARGET_RATIO = 1.3  # a mask and 10 boxes at most this many times the image alone (affine)
_SHEAR_DEG = math.degrees(math.atan(0.3))


@dataclass(frozen=True)
class Row:
    """A row: shmaug's ops, and each contender's builder (None: it has no such transform)."""

    name: str
    shmaug: list[Any]
    affine: bool  # judged against TARGET_RATIO
    albu: Callable[[Any], Any] | None
    torchvision: Callable[[Any], Any] | None
    keras: Callable[[Any], Any] | None


def rows() -> list[Row]:
    import cv2

    warp = dict(interpolation=cv2.INTER_LINEAR, border_mode=cv2.BORDER_CONSTANT, fill=0,
                fill_mask=0)
    return [
        Row("hflip", [Op("hflip")], True, lambda A: A.HorizontalFlip(p=1.0),
            lambda T: T.RandomHorizontalFlip(p=1.0),
            lambda L: L.RandomFlip("horizontal", bounding_box_format="xyxy")),
        Row("rotate", [Op("rotate", degrees=(-15, 15))], True,
            lambda A: A.Rotate(limit=(-15, 15), **warp, p=1.0),
            lambda T: T.RandomRotation(15),
            lambda L: L.RandomRotation(15 / 360, fill_mode="constant",
                                       bounding_box_format="xyxy")),
        Row("shear", [Op("shear", x=0.3)], True,
            lambda A: A.Affine(shear={"x": (-_SHEAR_DEG, _SHEAR_DEG), "y": (0, 0)}, **warp,
                               p=1.0),
            lambda T: T.RandomAffine(0, shear=(-_SHEAR_DEG, _SHEAR_DEG)),
            lambda L: L.RandomShear(0.3, 0.0, fill_mode="constant", bounding_box_format="xyxy")),
        Row("zoom", [Op("zoom", height_factor=(-0.2, 0.2), border="constant")], True,
            lambda A: A.Affine(scale=(0.8, 1.2), **warp, p=1.0),
            lambda T: T.RandomAffine(0, scale=(0.8, 1.2)),
            lambda L: L.RandomZoom((-0.2, 0.2), fill_mode="constant",
                                   bounding_box_format="xyxy")),
        Row("perspective", [Op("perspective", scale=(0.02, 0.08))], True,
            lambda A: A.Perspective(scale=(0.02, 0.08), keep_size=True, **warp, p=1.0),
            lambda T: T.RandomPerspective(0.1, p=1.0),
            lambda L: L.RandomPerspective(factor=1.0, scale=0.08, bounding_box_format="xyxy")),
        Row("resized_crop", [Op("resized_crop", scale=(0.3, 1.0))], True,
            lambda A: A.RandomResizedCrop((SIDE, SIDE), scale=(0.3, 1.0), p=1.0),
            lambda T: T.RandomResizedCrop(SIDE, scale=(0.3, 1.0), antialias=False), None),
        Row("elastic", [Op("elastic", alpha=3.0, sigma=8.0, border="constant")], False,
            lambda A: A.ElasticTransform(alpha=40.0, sigma=8.0, **warp, p=1.0),
            lambda T: T.ElasticTransform(alpha=40.0, sigma=8.0), None),
        Row("sine_warp", [Op("sine_warp", border="constant")], False, None, None, None),
        Row("Keras guide's block", [Maybe(Op("hflip")), Op("rotate", degrees=(-36, 36),
                                                           border="constant"),
                                    Op("zoom", height_factor=(-0.1, 0.1), border="constant")],
            True, lambda A: A.Compose([A.HorizontalFlip(), A.Rotate(limit=36, **warp, p=1.0),
                                       A.Affine(scale=(0.9, 1.1), **warp, p=1.0)]),
            lambda T: T.Compose([T.RandomHorizontalFlip(), T.RandomRotation(36),
                                 T.RandomAffine(0, scale=(0.9, 1.1))]),
            lambda L: __import__("keras").Sequential([
                L.RandomFlip("horizontal", bounding_box_format="xyxy"),
                L.RandomRotation(0.1, fill_mode="constant", bounding_box_format="xyxy"),
                L.RandomZoom(0.1, fill_mode="constant", bounding_box_format="xyxy")])),
    ]


def sample(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A photo, its mask (a class id per pixel) and 10 boxes (xyxy pixels) with labels."""
    rng = np.random.default_rng(seed)
    image = photo(SIDE)[0]
    corners = np.sort(rng.uniform(20, SIDE - 20, (BOXES, 2, 2)), axis=1)
    boxes = np.c_[corners[:, 0, 0], corners[:, 0, 1], corners[:, 1, 0] + 8,
                  corners[:, 1, 1] + 8].astype(np.float32)
    mask = np.zeros((SIDE, SIDE), np.uint8)
    for i, (x0, y0, x1, y1) in enumerate(boxes.astype(int)):
        mask[y0:y1, x0:x1] = 1 + i % 5
    return image, mask, boxes, np.arange(BOXES) % 5


def _timers(row: Row, calls: int) -> dict[str, Callable[[int], float]]:
    _, mask, boxes, labels = sample()
    images, masks = photos(calls, SIDE), [mask.copy() for _ in range(calls)]
    pipe = Compose(row.shmaug, bounding_box_format="xyxy", value_range=(0.0, 255.0))
    targets = [{"segmentation_masks": m[:, :, None], "boxes": boxes, "box_labels": labels}
               for m in masks]
    fns: dict[str, Callable[[int], float]] = {
        "image": _alone(pipe, images, calls),
        "shmaug": _task(pipe, images, targets, calls),
        "mask": _mask_alone(pipe, images, [t["segmentation_masks"] for t in targets], calls)}
    for part, names in (("with_mask", ("segmentation_masks",)),
                        ("with_boxes", ("boxes", "box_labels"))):
        fns[part] = _task(pipe, images, [{name: t[name] for name in names} for t in targets],
                          calls)
    if row.albu is not None and importlib.util.find_spec("albumentations") is not None:
        import albumentations as A

        compose = A.Compose([row.albu(A)], bbox_params=A.BboxParams(
            format="pascal_voc", label_fields=["labels"]), seed=0)
        fns["albumentations"] = lambda r: 1e6 * time_calls(
            lambda i: compose(image=images[i], mask=masks[i], bboxes=boxes, labels=labels),
            calls)
    if row.torchvision is not None and importlib.util.find_spec("torchvision") is not None:
        fns["torchvision"] = _torchvision(row, images, masks, boxes, labels, calls)
    if row.keras is not None and keras_tfdata.available():
        fns["keras"] = _keras(row, images, masks, boxes, labels, calls)
    return fns


def _alone(pipe: Compose, images: np.ndarray, calls: int) -> Callable[[int], float]:
    """µs per sample of ``calls`` images made alone, as ``_task`` makes them with targets."""
    def timed(r: int) -> float:
        rng = np.random.default_rng(r)
        return 1e6 * time_calls(lambda i: pipe(images[i], rng), calls)
    return timed


def _task(pipe: Compose, images: np.ndarray, targets: list[dict[str, np.ndarray]], calls: int
          ) -> Callable[[int], float]:
    """µs per sample of ``calls`` samples with their targets, made as a worker makes a task:
    each image and its masks in turn, then the task's boxes moved together
    (``box_moves.deferring`` and ``settle``, what ``engine.workers.runner`` does)."""
    def timed(r: int) -> float:
        rng = np.random.default_rng(r)
        t0 = time.perf_counter()
        boxes: box_moves.Noted = []
        with box_moves.deferring(boxes):
            for i in range(calls):
                moved = pipe.augment_targets(images[i], targets[i], rng)[1]
                for name in moved.keys() - SETTLED:  # written, as the runner does
                    del moved[name]
        box_moves.settle(boxes)
        return 1e6 * (time.perf_counter() - t0) / calls
    return timed


def _mask_alone(pipe: Compose, images: np.ndarray, masks: list[np.ndarray], calls: int
                ) -> Callable[[int], float]:
    """µs per sample of the masks' moves alone, through the moves ``pipe`` made on their images
    with the same draws as the other timers' (noted first, outside the timed loop)."""
    def timed(r: int) -> float:
        rng = np.random.default_rng(r)
        made = []
        for i in range(calls):
            with noting() as moves:
                pipe(images[i], rng)
            made.append(moves)
        t0 = time.perf_counter()
        for mask, moves in zip(masks, made):
            moved = mask
            for m in moves:
                moved = m.mask(moved, 0.0)
        return 1e6 * (time.perf_counter() - t0) / calls
    return timed


def _torchvision(row: Row, images: np.ndarray, masks: list[np.ndarray], boxes: np.ndarray,
                 labels: np.ndarray, calls: int) -> Callable[[int], float]:
    import torch
    from torchvision import tv_tensors
    from torchvision.transforms import v2 as T

    torch.set_num_threads(1)
    transform = row.torchvision(T)  # type: ignore[misc]
    tboxes = tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format="XYXY",
                                      canvas_size=(SIDE, SIDE))
    tlabels = torch.from_numpy(labels)
    samples = [{"image": tv_tensors.Image(torch.from_numpy(image).permute(2, 0, 1).contiguous()),
                "mask": tv_tensors.Mask(torch.from_numpy(mask)), "boxes": tboxes,
                "labels": tlabels} for image, mask in zip(images, masks)]
    return lambda r: 1e6 * time_calls(lambda i: transform(samples[i]), calls)


def _keras(row: Row, images: np.ndarray, masks: list[np.ndarray], boxes: np.ndarray,
           labels: np.ndarray, calls: int) -> Callable[[int], float]:
    layer = row.keras(keras_tfdata.layers())  # type: ignore[misc]
    n = keras_tfdata.BATCH
    batch = min(n, calls)
    each = np.arange(n) % len(images)
    data = {"images": images[each].astype(np.float32),
            "bounding_boxes": {"boxes": np.repeat(boxes[None], n, 0),
                               "labels": np.repeat(labels[None].astype(np.int32), n, 0)},
            "segmentation_masks": np.stack(masks)[each, :, :, None].astype(np.float32)}
    timed = keras_tfdata.runner(layer, data, batch)
    batches = max(1, calls // batch)
    return lambda r: timed(batches)


def run(quick: bool) -> dict[str, Any]:
    import cv2

    cv2.setNumThreads(1)
    calls, rounds = (2, 1) if quick else (24, 7)
    found = []
    for row in rows()[:2] if quick else rows():
        fns = _timers(row, calls)
        names = list(fns)
        times: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds + 1):
            for name in names[r % len(names):] + names[: r % len(names)]:
                us = fns[name](r)
                if r > 0:
                    times[name].append(us)
        stats = {name: summarize(v) for name, v in times.items()}
        found.append({"row": row.name, "affine": row.affine,
                      **{f"{k}_us": s.median for k, s in stats.items()},
                      "spread_us": {k: s.to_dict() for k, s in stats.items()}})
    return {"quick": quick, "sample": f"{SIDE}x{SIDE}x3 uint8, a mask, {BOXES} boxes",
            "threads": 1, "cpu": cpu_model(),
            "timing": f"median of {rounds} interleaved rounds after 1 warm-up round",
            "rows": found}


def report(result: dict[str, Any]) -> str:
    lines = [*([QUICK + ".", ""] if result["quick"] else []),
             f"`{result.get('command', 'python -m bench.ops --targets')}`", "",
             f"{result['sample']}, one core each of {result.get('cpu', '?')}, µs per sample: "
             f"{result['timing']}. Keras: the layers in tf.data over batches of "
             f"{keras_tfdata.BATCH} dicts (a quick run's: 2), AUTOTUNE.", "",
             "| row | shmaug image alone µs | shmaug with targets µs | targets / image alone "
             "| mask moved alone µs | floor: (image + mask) / image "
             "| with the mask only / image | with the boxes only / image "
             "| albumentations µs | torchvision µs | Keras tf.data µs | albumentations / "
             "shmaug | torchvision / shmaug | Keras / shmaug |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: | ---: | ---: |"]
    for r in result["rows"]:
        s, i, m = r.get("shmaug_us"), r.get("image_us"), r.get("mask_us")
        a, t, k = r.get("albumentations_us"), r.get("torchvision_us"), r.get("keras_us")
        floor = None if i is None or m is None else i + m
        cells = [fmt_us(i), fmt_us(s), fmt_times(s, i, 2), fmt_us(m), fmt_times(floor, i, 2),
                 fmt_times(r.get("with_mask_us"), i, 2), fmt_times(r.get("with_boxes_us"), i, 2),
                 fmt_us(a), fmt_us(t), fmt_us(k), *(fmt_times(other, s, 2) for other in (a, t, k))]
        lines.append(f"| {r['row']} | {' | '.join(cells)} |")
    if result["quick"]:
        lines += ["", f"- comparisons and targets: {NOT_JUDGED}"]
        return "\n".join(lines)
    behind = [r["row"] for r in result["rows"] if any(
        r.get(f"{k}_us", np.inf) < r["shmaug_us"]
        for k in ("albumentations", "torchvision", "keras"))]
    costly = [f"{r['row']} ({r['shmaug_us'] / r['image_us']:.2f}x)" for r in result["rows"]
              if r["affine"] and r["shmaug_us"] > TARGET_RATIO * r["image_us"]]
    floored = [f"{r['row']} ({(r['image_us'] + r['mask_us']) / r['image_us']:.2f}x)"
               for r in result["rows"] if r["affine"] and r.get("mask_us") is not None
               and r["image_us"] + r["mask_us"] > (TARGET_RATIO - 0.05) * r["image_us"]]
    lines += ["", "- rows where a contender is faster than shmaug: "
              + (", ".join(behind) if behind else "none"),
              f"- affine rows where the targets cost more than {TARGET_RATIO}x the image "
              f"alone: " + (", ".join(costly) if costly else "none"),
              f"- affine rows whose mask alone leaves the boxes less than 0.05x of the image "
              f"below {TARGET_RATIO}x (the floor, were every other step free): "
              + (", ".join(floored) if floored else "none")]
    return "\n".join(lines)
