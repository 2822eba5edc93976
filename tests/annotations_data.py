"""Tiny detection sets written with each format's own tools (``json``, ``xml.etree``) over
generated PNG / JPEG images (PIL): nothing is downloaded.

Each image is black with one filled white rectangle per box, so a test can check that a box
still frames its rectangle after the images are resized and augmented.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from PIL import Image

# (file name, width, height, [(x, y, w, h, category id, iscrowd)]): pixel edges, COCO's bbox
IMAGES = [
    ("a.png", 60, 40, [(10, 5, 20, 10, 5, 0)]),
    ("b.jpg", 50, 50, [(0, 0, 10, 20, 1, 0), (30, 30, 20, 20, 90, 0), (5, 25, 10, 10, 5, 1)]),
    ("c.png", 40, 60, []),
]
CATEGORIES = [{"id": 90, "name": "zebra"}, {"id": 1, "name": "person"}, {"id": 5, "name": "cat"}]


def draw(path: Path, width: int, height: int, boxes: list[tuple[float, ...]]) -> None:
    pixels = np.zeros((height, width, 3), np.uint8)
    for x, y, w, h, *_ in boxes:
        pixels[int(y):int(y + h), int(x):int(x + w)] = 255
    Image.fromarray(pixels).save(path, quality=95)


def write_coco(root: Path, images: list = IMAGES, categories: list = CATEGORIES,
               draw_images: bool = True) -> tuple[Path, Path]:
    """``root/annotations/instances.json`` over ``root/images``: the paths of both."""
    folder, json_path = root / "images", root / "annotations" / "instances.json"
    folder.mkdir(parents=True, exist_ok=True)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    entries, annotations = [], []
    for iid, (name, width, height, boxes) in enumerate(images, start=10):
        entries.append({"id": iid, "file_name": name, "width": width, "height": height})
        for x, y, w, h, cid, crowd in boxes:
            annotations.append({"id": len(annotations) + 1, "image_id": iid, "category_id": cid,
                                "bbox": [x, y, w, h], "iscrowd": crowd, "area": w * h})
        if draw_images:
            draw(folder / name, width, height, [b for b in boxes if not b[5]])
    json_path.write_text(json.dumps({"images": entries, "annotations": annotations,
                                     "categories": categories}))
    return json_path, folder


def add_polygons(json_path: Path) -> dict:
    """Give each annotation of a COCO file its box's outline as its polygon mask; the data."""
    data = json.loads(json_path.read_text())
    for ann in data["annotations"]:
        x, y, w, h = ann["bbox"]
        ann["segmentation"] = [[x, y, x + w, y, x + w, y + h, x, y + h]]
    json_path.write_text(json.dumps(data))
    return data


# (id, width, height, [(class name, xmin, ymin, xmax, ymax, difficult)]): VOC's 1-based corners
VOC = [
    ("2007_000001", 60, 40, [("dog", 11, 6, 30, 15, 0)]),
    ("2007_000002", 50, 50, [("cat", 1, 1, 10, 20, 0), ("dog", 31, 31, 50, 50, 1)]),
]


def write_voc(root: Path, entries: list = VOC) -> tuple[Path, Path]:
    """``root/Annotations/*.xml`` over ``root/JPEGImages``, and ImageSets/Main/train.txt."""
    annotations, images = root / "Annotations", root / "JPEGImages"
    for folder in (annotations, images, root / "ImageSets" / "Main"):
        folder.mkdir(parents=True, exist_ok=True)
    for stem, width, height, objects in entries:
        node = ET.Element("annotation")
        ET.SubElement(node, "filename").text = f"{stem}.png"
        size = ET.SubElement(node, "size")
        for key, value in (("width", width), ("height", height), ("depth", 3)):
            ET.SubElement(size, key).text = str(value)
        for name, x0, y0, x1, y1, difficult in objects:
            obj = ET.SubElement(node, "object")
            ET.SubElement(obj, "name").text = name
            ET.SubElement(obj, "difficult").text = str(difficult)
            box = ET.SubElement(obj, "bndbox")
            for key, value in zip(("xmin", "ymin", "xmax", "ymax"), (x0, y0, x1, y1)):
                ET.SubElement(box, key).text = str(value)
        ET.ElementTree(node).write(annotations / f"{stem}.xml")
        draw(images / f"{stem}.png", width, height,
             [(x0 - 1, y0 - 1, x1 - x0 + 1, y1 - y0 + 1) for _, x0, y0, x1, y1, _ in objects])
    (root / "ImageSets" / "Main" / "train.txt").write_text(
        "\n".join(stem for stem, *_ in reversed(entries)) + "\n")
    return annotations, images


def framed(image: np.ndarray, box: np.ndarray, slack: float = 1.5) -> bool:
    """Whether the white pixels of ``image`` lie within the xyxy ``box`` (within ``slack``
    pixels, for the resize's blur) and reach its edges."""
    ys, xs = np.nonzero(image[..., 0] > 127)
    if not len(xs):
        return False
    x0, y0, x1, y1 = box
    return bool(abs(xs.min() - x0) <= slack and abs(ys.min() - y0) <= slack
                and abs(xs.max() + 1 - x1) <= slack and abs(ys.max() + 1 - y1) <= slack)


class StripeMasks:
    """A target source of the user's own (a length and ``load``): sample i's mask is a
    stripe of id ``1 + i % 3`` over its image's first ``4 + i`` columns (images of 16x16)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def load(self, index: int) -> np.ndarray:
        mask = np.zeros((16, 16, 1), np.uint8)
        mask[:, :4 + index] = 1 + index % 3
        return mask


class NoisyMasks(StripeMasks):
    """A target source whose ``load`` draws from the global ``np.random`` (legacy code)."""

    def load(self, index: int) -> np.ndarray:
        mask = super().load(index)
        mask[0, 0, 0] = np.random.randint(0, 250)
        return mask


class Unpicklable(StripeMasks):
    """A target source holding a lambda: it cannot travel to a spawned worker."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.pick = lambda i: i
