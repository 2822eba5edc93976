"""A COCO detection folder: shmaug's ``from_coco`` against torchvision's ``CocoDetection`` and
albumentations, images with their boxes and instance masks through one random affine.

    python -m bench.files.coco [--quick] [--out bench/results/files/coco] [--rounds 3]
        [--repeats 2] [--contenders shmaug,torchvision,albumentations] [--workers 2]
        [--batch-size 16] [--data DIR] [--files 480] [--no-masks] [--timeout 900]

Writes a COCO folder from a seed (nothing downloaded; ``--data DIR`` keeps and reuses it,
otherwise a temporary folder removed at the end): ``--files`` 512x512 photo-like JPEGs
(``bench.files.data.photo``, quality 90), each with 4 to 10 objects (7 on average) drawn as
filled polygons in 5 categories, and ``instances.json`` with each object's polygon in its
``segmentation``, its tight ``bbox`` and ``area`` (written with ``json``; no crowd entries:
torchvision's wrapper keeps them as objects where ``from_coco`` drops them, so the work would
differ). Every contender then delivers, once per epoch, each image decoded, its boxes and its
per-object masks decoded from the polygons, moved by the same random affine (a horizontal flip
with p=0.5, a rotation of -15..15 degrees, a scale of 0.8..1.2 and a shift of up to 10% of
each side; bilinear pixels, nearest masks, black outside), at 512x512, boxes clipped and those
left without area dropped, in batches with boxes, labels and masks padded to the set's most
objects per image, with ``--workers`` processes (fork):

- ``shmaug``: ``files, y = shmaug.sources.from_coco(json, folder, image_size=(512, 512),
  bounding_box_format="xyxy", masks="instances")`` into ``shmaug.Loader(files, y, augment=
  Compose([Maybe(Op("hflip")), Op("rotate"), Op("scale_translate")], bounding_box_format=
  "xyxy"))``: shmaug has no one-matrix random affine, so it warps twice where the others warp
  once.
- ``torchvision``: ``wrap_dataset_for_transforms_v2(CocoDetection(folder, json, transforms=
  v2.Compose([ToImage(), RandomHorizontalFlip(), RandomAffine(15, (0.1, 0.1), (0.8, 1.2),
  interpolation=BILINEAR), SanitizeBoundingBoxes()])), target_keys=("boxes", "labels",
  "masks"))`` (PIL decode, pycocotools masks, CHW tensors) in a ``DataLoader`` whose collate
  pads and stacks.
- ``albumentations``: OpenCV decode, pycocotools' ``COCO.annToMask`` per object, ``A.Compose(
  [HorizontalFlip(), Affine(...)], bbox_params=A.BboxParams(format="pascal_voc",
  label_fields=["labels", "index"]))`` (the kept ``index`` picks the masks of the kept boxes),
  in the same ``DataLoader``.

Two more rows measure what moving the targets costs on the decode-time crop (issue 57):
``shmaug_crop`` reads the same folder with ``from_coco(..., image_size=None)`` (each photo
handed over undecoded) through ``Compose([random_resized_crop(224), Maybe(hflip)])``, boxes
and masks moved with the window, and ``shmaug_crop_image`` runs the same without them (the
image alone); their same-round ratio is the cost of the targets (target: at most 1.3x).
``shmaug_crop_whole`` is ``shmaug_crop`` with ``SHMAUG_JPEG=whole``: every photo decoded
whole, then cut, masks moved the same way.

``--no-masks`` runs every contender on images and boxes alone. Each contender runs in its own
child process (``bench.files.child``, under a hard timeout), round by round, the order rotated
every round: a warm-up, then ``--repeats`` timed epochs, each checked to deliver every image
exactly once. The table quotes the median over rounds; the ratios are taken within a round.
A contender whose library is missing is reported "not installed". Writes ``coco.json`` and
``coco.md`` to ``--out``. A full run takes about 3 minutes on 2 cores.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from bench.common.harness import (
    described, base_parser, missing_module, prepare_out, rotated_rounds, summarize,
)
from bench.common.report import (
    Row, environment, fmt_num, markdown_table, verdict, write_results,
)
from bench.files.child import run_child
from bench.files.imagenet import judged, per_round, status_of
from bench.files.run import (
    contender_list, data_root, figure, meta_of, run_args, same_round,
)
from bench.suite.peers._base import Base
from bench.suite.peers.shmaug_engine import ShmaugLoader
from bench.suite.peers.torch_loader import Torch

SIZE = 512
OBJECTS = (4, 10)  # objects per image, drawn uniformly: 7 on average
CATEGORIES = 5
FILES, FILES_QUICK = 480, 16
QUALITY = 90
FLIP_P = 0.5
DEGREES = 15.0
SCALE = (0.8, 1.2)
TRANSLATE = 0.1  # of each side, either way
CROP = 224  # the decode-time crop's output side (shmaug_crop, shmaug_crop_image)

LABELS = {
    "shmaug": "shmaug from_coco + Loader, hflip + rotate + scale_translate",
    "torchvision": "torchvision CocoDetection + transforms.v2 RandomAffine + DataLoader",
    "albumentations": "albumentations Affine over cv2 + pycocotools + DataLoader",
    "shmaug_crop": "shmaug from_coco(image_size=None), random_resized_crop + hflip, targets",
    "shmaug_crop_image": "the same crop of the same photos, the image alone",
    "shmaug_crop_whole": "the same crop and targets, each photo decoded whole first",
}
# The libraries a peer imports, in the order it does: where one is missing, the driver records
# the child's "not installed" without starting it.
NEEDS = {"torchvision": ("torch", "torchvision", "pycocotools"),
         "albumentations": ("torch", "albumentations", "pycocotools")}
RATIOS = [("shmaug", "torchvision"), ("shmaug", "albumentations"),
          ("albumentations", "torchvision"), ("shmaug_crop_image", "shmaug_crop"),
          ("shmaug_crop", "shmaug_crop_whole")]
TARGETS_COST = 1.3  # shmaug_crop_image ÷ shmaug_crop at most (issue 57)


# -- the folder ------------------------------------------------------------------------------


def polygon(rng: np.random.Generator) -> np.ndarray:
    """A star-shaped simple polygon (6-12 corners round a centre), (K, 2) pixel coordinates
    inside the image."""
    centre = rng.uniform(0.1 * SIZE, 0.9 * SIZE, 2)
    radius = rng.uniform(0.04, 0.2) * SIZE
    corners = int(rng.integers(6, 13))
    angles = np.sort(rng.uniform(0, 2 * np.pi, corners))
    reach = radius * rng.uniform(0.5, 1.0, corners)
    points = centre + np.stack([np.cos(angles), np.sin(angles)], 1) * reach[:, None]
    return np.clip(np.round(points, 1), 0, SIZE)


def make_coco(root: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """``n`` JPEGs in ``root/images`` and their ``root/instances.json`` (see the module
    docstring); returns what was made, for the report."""
    import cv2
    from tqdm import tqdm

    from bench.files.data import photo

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, annotations, total = [], [], 0
    for i in tqdm(range(n), desc="making a COCO folder", unit="file", file=sys.stderr,
                  disable=not sys.stderr.isatty(), leave=False):
        pixels = photo(SIZE, SIZE, rng)
        for _ in range(int(rng.integers(OBJECTS[0], OBJECTS[1] + 1))):
            points = polygon(rng)
            colour = [int(v) for v in rng.integers(0, 256, 3)]
            cv2.fillPoly(pixels, [np.round(points).astype(np.int32)], colour)
            (x0, y0), (x1, y1) = points.min(0), points.max(0)
            annotations.append({
                "id": len(annotations) + 1, "image_id": i + 1,
                "category_id": int(rng.integers(1, CATEGORIES + 1)),
                "segmentation": [points.ravel().tolist()],
                "area": float(cv2.contourArea(points.astype(np.float32))),
                "bbox": [float(x0), float(y0), float(x1 - x0), float(y1 - y0)], "iscrowd": 0})
        name = f"{i:06d}.jpg"
        ok, data = cv2.imencode(".jpg", pixels[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, QUALITY])
        assert ok, f"could not encode {name}"
        data.tofile(root / "images" / name)
        total += data.size
        images.append({"id": i + 1, "file_name": name, "width": SIZE, "height": SIZE})
    categories = [{"id": c, "name": f"shape_{c}"} for c in range(1, CATEGORIES + 1)]
    (root / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": categories}))
    per_image = np.bincount([a["image_id"] for a in annotations], minlength=n + 1)[1:]
    return {"files": n, "size": SIZE, "objects": len(annotations),
            "mean_objects": float(per_image.mean()), "max_objects": int(per_image.max()),
            "mean_kb": total / n / 1e3, "quality": QUALITY}


def prepare(root: Path, n: int) -> tuple[Path, dict[str, Any]]:
    """The COCO folder of ``n`` images under ``root``, made unless a complete one is there."""
    where = root / f"coco_{SIZE}_{n}"
    stamp = where / "made.json"
    if stamp.is_file():
        return where, json.loads(stamp.read_text())
    shutil.rmtree(where, ignore_errors=True)
    made = make_coco(where, n)
    stamp.write_text(json.dumps(made))  # last: a folder cut short is made again
    return where, made


# -- the contenders (built in the child process, ``bench.files.child``) ----------------------


def checked(contender: Any, images: Any, boxes: Any, masks: Any, ids: np.ndarray) -> np.ndarray:
    """A delivered batch's shapes are the work asked (masks over the image, one per box row,
    where ``contender.masks``; no boxes where the image comes alone), whatever the library's
    layout (HWC or CHW); its ids, for the exactly-once check."""
    n, rows, size = len(ids), contender.max_boxes, getattr(contender, "size", SIZE)
    assert len(images) == n and images.ndim == 4 and images.shape[1:].count(size) == 2, \
        images.shape
    if boxes is None:
        assert getattr(contender, "alone", False) and masks is None
        return ids
    assert boxes.shape == (n, rows, 4), boxes.shape
    if contender.masks:
        assert masks is not None and masks.shape == (n, rows, size, size), \
            getattr(masks, "shape", None)
    return ids


def shmaug_augment() -> Any:
    from shmaug.ops import Compose, Maybe, Op

    return Compose([Maybe(Op("hflip"), p=FLIP_P), Op("rotate", degrees=(-DEGREES, DEGREES)),
                    Op("scale_translate", scale=SCALE, translate=(-TRANSLATE, TRANSLATE))],
                   bounding_box_format="xyxy")


def shmaug_crop() -> Any:
    """The decode-time crop of ``shmaug_crop`` and ``shmaug_crop_image``."""
    from shmaug.ops import Compose, Maybe, Op

    return Compose([Op("random_resized_crop", height=CROP, width=CROP),
                    Maybe(Op("hflip"), p=FLIP_P)], bounding_box_format="xyxy")


class ShmaugCoco(ShmaugLoader):
    """``from_coco`` into ``shmaug.Loader``; ``y["ids"]`` rides along (the exactly-once
    check). Read and closed as the suite's ``ShmaugLoader``; only its source differs.
    ``crop``: photos handed over undecoded (``image_size=None``) to the decode-time crop;
    ``alone``: the images without their boxes and masks."""

    def __init__(self, *a: Any, annotations: str, masks: bool, max_boxes: int,
                 crop: bool = False, alone: bool = False) -> None:
        Base.__init__(self, *a)
        import shmaug

        self.max_boxes, self.masks, self.alone = max_boxes, masks, alone
        self.size = CROP if crop else SIZE
        files, y = shmaug.sources.from_coco(annotations, os.path.dirname(self.x[0]),
                                            image_size=None if crop else (SIZE, SIZE),
                                            bounding_box_format="xyxy", max_boxes=max_boxes,
                                            masks="instances" if masks else None)
        if len(files) != len(self.x):
            raise RuntimeError(f"{len(files)} images read, the child has {len(self.x)}")
        self.loader = shmaug.Loader(files, {"ids": self.y} if alone else {**y, "ids": self.y},
                                    batch_size=self.bs,
                                    augment=self.augment, workers=self.workers, shuffle=True,
                                    seed=0, start_method=self.method)

    def epoch(self) -> Iterator[Any]:
        for xb, yb in self.loader:
            yield None, checked(self, xb, yb.get("boxes"), yb.get("masks"), yb["ids"])


def padded(items: list[Any], max_boxes: int) -> tuple[Any, ...]:
    """A torch ``DataLoader``'s collate (it runs in the workers): images stacked, boxes,
    labels and masks padded to ``max_boxes`` (boxes and labels with -1, masks with 0), as
    shmaug's are; each item is ``(image, boxes, labels, masks or None, index)``."""
    import torch

    n, first = len(items), torch.as_tensor(items[0][0])
    images = torch.empty((n, *first.shape), dtype=first.dtype)
    boxes = torch.full((n, max_boxes, 4), -1.0)
    labels = torch.full((n, max_boxes), -1, dtype=torch.int64)
    with_masks = items[0][3] is not None
    masks = torch.zeros((n, max_boxes, SIZE, SIZE), dtype=torch.uint8) if with_masks else None
    for k, (image, box, label, mask, _) in enumerate(items):
        images[k] = torch.as_tensor(image)
        kept = len(box)
        boxes[k, :kept] = torch.as_tensor(box, dtype=torch.float32).reshape(-1, 4)
        labels[k, :kept] = torch.as_tensor(label, dtype=torch.int64)
        if masks is not None:
            masks[k, :kept] = torch.as_tensor(mask)
    return images, boxes, labels, masks, torch.tensor([item[4] for item in items])


class Indexed:
    """A map-style dataset: ``dataset[i]`` (an image and a target dict) as ``padded`` takes
    it, with the index."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        image, target = self.dataset[i]
        return image, target["boxes"], target["labels"], target.get("masks"), i


def torchvision_dataset(folder: str, annotations: str, masks: bool) -> Any:
    """torchvision's own COCO reading, as its v2 detection guide writes it."""
    from torchvision import datasets
    from torchvision.transforms import InterpolationMode, v2

    transforms = v2.Compose([
        v2.ToImage(), v2.RandomHorizontalFlip(p=FLIP_P),
        v2.RandomAffine(DEGREES, translate=(TRANSLATE, TRANSLATE), scale=SCALE,
                        interpolation=InterpolationMode.BILINEAR),
        v2.SanitizeBoundingBoxes()])
    coco = datasets.CocoDetection(folder, annotations, transforms=transforms)
    keys = ("boxes", "labels", "masks") if masks else ("boxes", "labels")
    return datasets.wrap_dataset_for_transforms_v2(coco, target_keys=keys)


class AlbumentationsCoco:
    """OpenCV decode, pycocotools' masks and an albumentations pipeline: what its users write
    for COCO. A dropped box's mask is dropped by the ``index`` label field it keeps."""

    def __init__(self, folder: str, annotations: str, masks: bool) -> None:
        import albumentations as A
        import cv2
        from pycocotools.coco import COCO

        self.folder, self.masks = folder, masks
        self.coco = COCO(annotations)
        self.ids = sorted(self.coco.imgs)
        self.transform = A.Compose(
            [A.HorizontalFlip(p=FLIP_P),
             A.Affine(rotate=(-DEGREES, DEGREES), scale=SCALE,
                      translate_percent=(-TRANSLATE, TRANSLATE), interpolation=cv2.INTER_LINEAR,
                      mask_interpolation=cv2.INTER_NEAREST, border_mode=cv2.BORDER_CONSTANT,
                      fill=0, fill_mask=0, p=1.0)],
            bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels", "index"]))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> tuple[Any, dict[str, Any]]:
        import cv2

        info = self.coco.imgs[self.ids[i]]
        image = cv2.cvtColor(cv2.imread(os.path.join(self.folder, info["file_name"])),
                             cv2.COLOR_BGR2RGB)
        anns = self.coco.loadAnns(self.coco.getAnnIds(imgIds=info["id"]))
        boxes = [[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in anns)]
        extra = {"masks": [self.coco.annToMask(a) for a in anns]} if self.masks else {}
        out = self.transform(image=image, bboxes=np.array(boxes, np.float32).reshape(-1, 4),
                             labels=[a["category_id"] for a in anns],
                             index=list(range(len(anns))), **extra)
        target = {"boxes": out["bboxes"], "labels": out["labels"]}
        if self.masks:
            kept = [int(k) for k in out["index"]]
            target["masks"] = np.stack([out["masks"][k] for k in kept]) if kept else \
                np.zeros((0, SIZE, SIZE), np.uint8)
        return out["image"], target


def _albumentations_worker(worker: int) -> None:
    """Each worker: one OpenCV thread (as shmaug's workers), and its own draws (a forked
    Compose would repeat its parent's stream in every worker)."""
    import cv2
    import torch

    cv2.setNumThreads(1)
    info = torch.utils.data.get_worker_info()
    info.dataset.dataset.transform.set_random_seed(torch.initial_seed() % 2**32)


class TorchCoco(Torch):
    """A COCO dataset in ``DataLoader(num_workers=workers, shuffle=True)``, fork, persistent
    workers, collated by ``padded``. Closed as the suite's ``Torch``."""

    def __init__(self, *a: Any, annotations: str, masks: bool, max_boxes: int,
                 name: str) -> None:
        Base.__init__(self, *a)
        from torch.utils.data import DataLoader

        folder = os.path.dirname(self.x[0])
        if name == "torchvision":
            dataset, init = torchvision_dataset(folder, annotations, masks), None
        else:
            dataset, init = AlbumentationsCoco(folder, annotations, masks), _albumentations_worker
        if len(dataset) != len(self.x):
            raise RuntimeError(f"{len(dataset)} images read, the child has {len(self.x)}")
        self.max_boxes, self.masks = max_boxes, masks
        self.loader = DataLoader(Indexed(dataset), batch_size=self.bs, shuffle=True,
                                 num_workers=self.workers, persistent_workers=True,
                                 collate_fn=functools.partial(padded, max_boxes=max_boxes),
                                 worker_init_fn=init, multiprocessing_context=self.method)

    def epoch(self) -> Iterator[Any]:
        for images, boxes, _, masks, ids in self.loader:
            yield None, checked(self, images, boxes, masks, ids.numpy())


def build(name: str, paths: np.ndarray, ids: np.ndarray, bs: int, workers: int,
          annotations: str = "", masks: bool = True, max_boxes: int = OBJECTS[1]) -> Base:
    """Contender ``name`` over ``paths`` (the images, listed in file-name order: the JSON's);
    ImportError when its library is missing."""
    common = (paths, ids, bs)
    options = dict(annotations=annotations, masks=masks, max_boxes=max_boxes)
    if name == "shmaug":
        return ShmaugCoco(*common, shmaug_augment(), np.uint8, workers, "fork", **options)
    if name in ("shmaug_crop", "shmaug_crop_image", "shmaug_crop_whole"):
        if name == "shmaug_crop_whole":  # (read when the loader starts; this is its process)
            os.environ["SHMAUG_JPEG"] = "whole"
        return ShmaugCoco(*common, shmaug_crop(), np.uint8, workers, "fork", **options,
                          crop=True, alone=name == "shmaug_crop_image")
    if name in ("torchvision", "albumentations"):
        return TorchCoco(*common, None, np.uint8, workers, "fork", name=name, **options)
    raise KeyError(f"no contender {name!r}; known: {sorted(LABELS)}")


# -- the driver ------------------------------------------------------------------------------


def parser() -> Any:
    p = base_parser(described(__doc__), "bench/results/files/coco")
    p.add_argument("--no-masks", action="store_true",
                   help="images and boxes only, for every contender")
    p = run_args(p, tuple(LABELS), files=(FILES, FILES_QUICK))
    p.set_defaults(batch_size=16)  # a batch's masks: 16 x 10 x 512 x 512 bytes, 42 MB
    return p


def run_one(args: Any, folder: Path, made: dict[str, Any], contender: str) -> dict[str, Any]:
    """One contender's child process, or why it did not start."""
    missing = missing_module(NEEDS.get(contender, ()))
    if missing:  # what its child would report
        return {"status": "skipped", "error": missing, "contender": contender}
    extra = {"annotations": str(folder / "instances.json"), "masks": not args.no_masks,
             "max_boxes": made["max_objects"]}
    res = run_child(args, folder / "images", contender, peers="bench.files.coco", extra=extra)
    print(f"{contender:15} {res.get('status')}: {fmt_num(figure(res))} images/s "
          f"{res.get('error', '')}"[:200], file=sys.stderr)
    return {**res, "contender": contender}


def at_most(ratios: list[float], goal: float, quick: bool) -> str:
    """The verdict on a cost ratio that must stay at most ``goal``."""
    got = summarize(ratios).median if ratios else math.nan
    return f"<= {goal:g}x: {verdict(None if math.isnan(got) else got <= goal, quick)}"


def report(args: Any, argv: list[str], results: list[dict[str, Any]], made: dict[str, Any],
           contenders: list[str], env: dict[str, Any]) -> str:
    """``coco.json`` and ``coco.md``; ``env``: the machine as it was at the start."""
    masks = not args.no_masks
    work = "boxes + instance masks" if masks else "boxes only (--no-masks)"
    section = (f"COCO {made['files']} x {SIZE}x{SIZE} JPEGs, {made['mean_objects']:.1f} "
               f"objects each, {work}, {args.workers} workers")
    rows, round_rows, ratio_rows = [], [], []
    for c in contenders:
        rates = per_round(results, c)
        good = [v for v in rates if not math.isnan(v)]
        status, note = status_of(results, c)
        rows.append(Row(section, c, "throughput", "images/s", summarize(good) if good else None,
                        status=status, note=note or LABELS[c]))
        round_rows.append([c, *[fmt_num(v) for v in rates]])
    for top, bottom in RATIOS:
        if top in contenders and bottom in contenders:
            ratios = same_round(per_round(results, top), per_round(results, bottom))
            ratio_rows.append([f"{top} ÷ {bottom}",
                               fmt_num(summarize(ratios).median) if ratios else "n/a",
                               fmt_num(min(ratios)) if ratios else "n/a",
                               fmt_num(max(ratios)) if ratios else "n/a", len(ratios),
                               at_most(ratios, TARGETS_COST, args.quick)
                               if top == "shmaug_crop_image" else
                               judged(ratios, None, args.quick)])
            row = next(r for r in rows if r.contender == top)
            if ratios and not row.ratio:
                row.ratio = f"{fmt_num(summarize(ratios).median)}x {bottom}"
    rounds = max(r["round"] for r in results)
    end = environment()["load_avg_1m"]
    quick = " (quick run: nothing measured)" if args.quick else ""
    extra = "\n\n".join([
        f"Command: `python -m bench.files.coco {' '.join(argv)}`{quick}. CPU: {env['cpu']}, "
        f"load average {env['load_avg_1m']} at the start, {end} at the end (its own processes "
        f"count in that one). The folder: "
        f"{made['files']} JPEGs of {SIZE}x{SIZE} at quality {made['quality']}, {made['mean_kb']:.0f} kB on average, "
        f"{made['objects']} polygon objects ({made['mean_objects']:.1f} per image, at most "
        f"{made['max_objects']}, the padded count). Work per image: decode, boxes "
        f"{'and a mask per object ' if masks else ''}from the JSON, a flip (p={FLIP_P:g}), "
        f"a rotation of ±{DEGREES:g}°, a scale of {SCALE[0]:g}-{SCALE[1]:g} and a shift of "
        f"up to {TRANSLATE:.0%} of each side at {SIZE}x{SIZE}, boxes clipped and dropped "
        f"when empty, batch {8 if args.quick else args.batch_size} padded and stacked. "
        "shmaug warps twice (rotate, then scale_translate) where the others warp once."
        + (f" The crop rows instead: a random resized crop to {CROP}x{CROP} (scale "
           "0.08-1, ratio 3/4-4/3: torchvision's) of each photo at its own size, then the "
           "flip, boxes and masks moved with them (none for shmaug_crop_image)."
           if any(c.startswith("shmaug_crop") for c in contenders) else ""),
        "### Same-round ratios\n\n"
        + markdown_table(["ratio", "median", "min", "max", "rounds", "target"], ratio_rows),
        f"### images/s in each of {rounds} rounds\n\n"
        + markdown_table(["contender", *[f"round {k}" for k in range(1, rounds + 1)]],
                         round_rows),
    ])
    meta = meta_of(args, argv, results, masks=masks, folder=made, load_avg_1m_end=end,
                   environment=env)
    return write_results(args.out, "coco", rows, meta, extra)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    contenders = contender_list(args.contenders, LABELS)
    prepare_out(args.out)  # before measuring anything
    began, env = time.perf_counter(), environment()
    with data_root(args.data, "shmaug_bench_coco_") as root:
        folder, made = prepare(root, args.files or (FILES_QUICK if args.quick else FILES))
        print(f"folder {folder}: {made['files']} images, {made['objects']} objects "
              f"({time.perf_counter() - began:.0f} s)", file=sys.stderr)
        results = rotated_rounds(1 if args.quick else args.rounds, contenders,
                                 functools.partial(run_one, args, folder, made), "bench coco")
        for res in results:
            res["round"] += 1  # per_round counts from 1
        print(report(args, argv, results, made, contenders, env))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    raise SystemExit(main())
