"""COCO's masks (``segmentation``: polygons, or run-length encoded), drawn by the workers.

``from_coco(..., masks=...)`` hands ``CocoMasks.build`` the annotations it kept, one per box
row. Each image's masks go into one flat table (``SegmentTable``, a block of offsets and a
block of bytes in the loader's shared memory, as an image source's paths), so the workers'
memory does not grow with the dataset; a worker draws sample i's masks from its bytes, at
the size its image is resized to:

- ``masks="instances"``: (max_boxes, height, width) uint8, mask k under box row k (a padding
  row's is empty): albumentations' and torchvision's ``masks``;
- ``masks="semantic"``: (height, width, 1) class ids, class index + 1 (0: background; a
  later annotation paints over an earlier one): Keras' ``segmentation_masks``.

A polygon is filled at the output size directly (its points scaled, no resize) by
pycocotools' own rule (``rleFrPoly``), so at the image's size a mask equals pycocotools'
``annToMask`` pixel for pixel; an RLE is decoded at its own size, which must be its image's,
then resized by nearest neighbour. No pycocotools at run time: the rule and the RLE string are
a few lines of arithmetic.

For a pipeline that moves masks, the load hands an image's polygons over undrawn
(``drawing()``, ``ops.targets.sample.Undrawn``): the pipeline moves their points and they are
filled once, by the same rule, where its moves take them (a decode-time crop's small window
rather than the whole photo). An image with an RLE among its masks is drawn as it lies.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import cv2
import numpy as np

from ...errors import ArgumentError, got
from ...memory.store import SharedStore
from ...memory.table import FlatTable
from ...ops.targets.sample import Undrawn, Where

MASK_KINDS = ("instances", "semantic")
_POLYGON, _COUNTS, _STRING = 0, 1, 2  # what a record's bytes hold
_PAIR = struct.Struct("<qq")
_RECORD = struct.Struct("<iiii")  # box row, class index + 1, kind, payload bytes
_UP = 5  # pycocotools walks a polygon's outline at 5x


class SegmentTable(FlatTable):
    """Per image, its size as stored and the bytes of its masks' records: block 0 holds
    ``starts`` int64[n + 1] into block 1 (image i's records are ``bytes[starts[i]:starts[i +
    1]]``), then ``sizes`` int64[n, 2] (height, width)."""

    __slots__ = ()
    ROW = "image"

    def _classes_at(self) -> int:
        return 0  # (it has no classes)

    def _blocks_are(self) -> tuple[str, ...]:
        return (f"the mask offsets of {self._n:,} images", "the COCO masks' polygons and RLEs")

    @classmethod
    def build(cls, blobs: Sequence[bytes], sizes: np.ndarray) -> SegmentTable:
        starts = np.zeros(len(blobs) + 1, np.int64)
        np.cumsum([len(b) for b in blobs], out=starts[1:])
        data = np.frombuffer(b"".join(blobs) or b"\0", np.uint8)
        head = np.concatenate([starts, np.asarray(sizes, np.int64).reshape(-1)])
        return cls((head, data), len(blobs), False)

    def blob(self, index: int) -> memoryview:
        """Image ``index``'s records."""
        i = self._position(index)
        start, stop = _PAIR.unpack_from(self._bufs[0], 8 * i)
        return memoryview(self._bufs[1])[start:stop]

    def size_of(self, index: int) -> tuple[int, int]:
        """Image ``index``'s (height, width), as stored."""
        i = self._position(index)
        height, width = _PAIR.unpack_from(self._bufs[0], 8 * (self._n + 1 + 2 * i))
        return int(height), int(width)


@dataclass(frozen=True, slots=True)
class CocoMaskLoad:
    """What a worker calls for sample i's masks: drawn from its bytes in ``table``."""

    table: SegmentTable
    image_size: tuple[int, int] | None
    kind: str  # "instances" or "semantic"
    rows: int  # max_boxes
    dtype: str  # of a semantic mask: uint8, or uint16 past 254 classes
    undrawn: bool = False  # polygons handed over undrawn (``drawing()``)

    @property
    def __name__(self) -> str:  # how a worker error names the stage that failed
        return "from_coco's masks"

    def sharing(self, store: SharedStore) -> CocoMaskLoad:
        """The same, its table in ``store``: a worker attaches to it by name."""
        return dataclasses.replace(self, table=self.table.share(store))

    def drawing(self) -> CocoMaskLoad:
        """The same, handing an image's polygons over undrawn, to be filled where the
        pipeline's moves take them (``engine.source.Drawing``)."""
        return dataclasses.replace(self, undrawn=True)

    def __call__(self, index: int) -> np.ndarray | Undrawn:
        if self.undrawn and self._polygons_only(index):
            size = self.image_size or self.table.size_of(index)
            shape = (self.rows, *size) if self.kind == "instances" else (*size, 1)
            return Undrawn(shape, np.dtype(np.uint8 if self.kind == "instances" else
                                           self.dtype), functools.partial(self.draw, index))
        return self.draw(index)

    def _polygons_only(self, index: int) -> bool:
        return all(kind == _POLYGON for _, _, kind, _ in _parsed(self.table.blob(index)))

    def draw(self, index: int, where: Where | None = None, size: tuple[int, int] | None = None
             ) -> np.ndarray:
        """Image ``index``'s masks at ``image_size`` (or its own), or with their points then
        moved by ``where`` onto a canvas of ``size`` (height, width): only polygons move so."""
        h, w = self.table.size_of(index)
        at_size = self.image_size or (h, w)
        height, width = size or at_size
        scale = (at_size[1] / w, at_size[0] / h)
        records = list(_parsed(self.table.blob(index)))
        polygons = [np.frombuffer(payload, np.float64).reshape(-1, 2)
                    for _, _, kind, payload in records if kind == _POLYGON]
        filled: Iterator[tuple[int, int, np.ndarray] | None] = iter(())
        if polygons:  # every polygon's points scaled and moved at once
            points = np.concatenate(polygons) * scale
            counts = np.array([len(p) for p in polygons])
            filled = iter(_filled(points if where is None else where(points), counts,
                                  height, width))
        if self.kind == "instances":
            out = np.zeros((self.rows, height, width), np.uint8)
        else:
            out = np.zeros((height, width, 1), self.dtype)
            canvas = np.zeros((height, width), np.uint8)
        for row, value, kind, payload in records:
            if self.kind == "semantic":
                canvas[:] = 0
            plane = out[row] if self.kind == "instances" else canvas
            if kind == _POLYGON:
                part = next(filled)
                if part is not None:
                    top, left, block = part
                    plane[top:top + block.shape[0], left:left + block.shape[1]] |= block
            else:
                assert where is None, "an RLE is drawn as it lies"
                plane |= _rle(payload, kind, height, width)
            if self.kind == "semantic":
                out[canvas > 0] = value  # a later annotation paints over an earlier one
        return out


@dataclass(frozen=True, eq=False)
class CocoMasks:
    """COCO masks as a target the workers draw (see the module); built by ``from_coco``."""

    load: CocoMaskLoad

    @classmethod
    def build(cls, source: str, annotations: list[Any], kept: np.ndarray, owner: np.ndarray,
              row_of: np.ndarray, values: np.ndarray, sizes: np.ndarray,
              image_size: tuple[int, int] | None, kind: str, rows: int,
              classes: int) -> CocoMasks:
        """``kept[b]``: the annotation of box b, of image ``owner[b]`` at its row
        ``row_of[b]`` (``_boxes.box_rows``), its class index + 1 ``values[b]``; ``sizes``: the
        images'; ``classes``: how many there are (a semantic mask's dtype: the same for every
        split)."""
        blobs: list[list[bytes]] = [[] for _ in range(len(sizes))]
        for k, image, row, value in zip(kept.tolist(), owner.tolist(), row_of.tolist(),
                                        values.tolist()):
            size = (int(sizes[image][0]), int(sizes[image][1]))
            for record_kind, payload in _records(source, annotations[k], k, size):
                blobs[image].append(_RECORD.pack(row, value, record_kind, len(payload)) +
                                    payload)
        table = SegmentTable.build([b"".join(parts) for parts in blobs], sizes)
        return cls(CocoMaskLoad(table, image_size, kind, rows,
                                "uint8" if classes < 255 else "uint16"))

    def __len__(self) -> int:
        return len(self.load.table)

    @property
    def target_name(self) -> str:
        """What it makes, in Keras' and albumentations' names (a loader checks it)."""
        return "masks" if self.load.kind == "instances" else "segmentation_masks"

    @property
    def output_shape(self) -> tuple[int | None, ...]:
        """Each sample's masks: (max_boxes, H, W), or (H, W, 1); None where each image keeps
        its size."""
        height, width = self.load.image_size or (None, None)
        if self.load.kind == "instances":
            return self.load.rows, height, width
        return height, width, 1

    def __repr__(self) -> str:
        return (f"CocoMasks(<{len(self):,} images' {self.load.kind} masks>, "
                f"image_size={self.load.image_size})")


def check_kind(masks: Any) -> str | None:
    if masks is not None and masks not in MASK_KINDS:
        raise ArgumentError(
            f"`masks` must be None, 'instances' or 'semantic'; received {got(masks)}. Fix: "
            f"'instances' for a mask per box (max_boxes, H, W), 'semantic' for one map of "
            f"class ids (H, W, 1), None for boxes alone.")
    return masks  # type: ignore[no-any-return]


def _records(source: str, annotation: Any, k: int, image: tuple[int, int]
             ) -> list[tuple[int, bytes]]:
    """An annotation's ``segmentation`` as records: one per polygon, or its RLE (which must
    be of its ``image``'s (height, width), and its counts add up to them)."""
    seg = annotation.get("segmentation") if isinstance(annotation, dict) else None
    if isinstance(seg, list) and seg and all(isinstance(p, list) for p in seg):
        out = []
        for polygon in seg:
            try:
                # (float64: float32 moved points across pycocotools' rounding at 5x)
                points = np.asarray(polygon, np.float64)
            except (TypeError, ValueError):  # a string or a list inside
                points = np.zeros(0, np.float64)
            if points.ndim != 1 or len(points) < 6 or len(points) % 2 or \
                    not np.isfinite(points).all():
                raise ArgumentError(
                    f"{_where(source, annotation, k)} has a polygon of {len(polygon)} "
                    f"values, not numbers in x, y pairs of 3 points or more: "
                    f"{str(polygon)[:120]}. Fix: repair or remove it.")
            out.append((_POLYGON, points.tobytes()))
        return out
    if isinstance(seg, dict) and "counts" in seg and "size" in seg:
        h, w = _rle_size(source, annotation, k, seg["size"], image)
        counts = seg["counts"]
        if isinstance(counts, list):
            data, kind = np.asarray(counts, np.int64).astype(np.int32).tobytes(), _COUNTS
            total = int(np.sum(counts))
        else:
            data = counts.encode() if isinstance(counts, str) else bytes(counts)
            kind, total = _STRING, sum(_string_counts(data))
        if total != h * w:
            raise ArgumentError(
                f"{_where(source, annotation, k)} has an RLE whose counts add up to {total} "
                f"pixels, but its size {[h, w]} holds {h * w}: it is cut short or belongs to "
                f"another image. Fix: re-encode the mask at its image's size "
                f"(pycocotools.mask.encode), or remove the annotation.")
        size = struct.pack("<ii", h, w)
        return [(kind, size + data + b"\0" * (-len(data) % 4))]
    raise ArgumentError(
        f"{_where(source, annotation, k)} has no mask (`segmentation` is {str(seg)[:80]!r}; "
        f"COCO's are a list of polygons or an RLE dict with `counts` and `size`). Fix: pass "
        f"masks=None for boxes alone, or give the annotation its mask.")


def _rle_size(source: str, annotation: Any, k: int, size: Any, image: tuple[int, int]
              ) -> tuple[int, int]:
    """An RLE's ``size`` ([height, width]), which must be its image's: one given as [width,
    height] would stretch the mask across the image silently."""
    try:
        h, w = (int(v) for v in size)
    except (TypeError, ValueError):
        h = w = -1
    if (h, w) != image:
        swapped = " (its width and height swapped)" if (w, h) == image else ""
        raise ArgumentError(
            f"{_where(source, annotation, k)} has an RLE of size {size!r}, but its image is "
            f"{image[0]}x{image[1]} (height x width){swapped}: COCO's RLE `size` is [height, "
            f"width] of its image. Fix: encode the mask at its image's size, as "
            f"pycocotools.mask.encode(np.asfortranarray(mask)) does, or remove it.")
    return h, w


def _filled(points: np.ndarray, counts: np.ndarray, height: int, width: int
            ) -> list[tuple[int, int, np.ndarray] | None]:
    """The pixels of a ``height`` x ``width`` canvas inside each polygon (``counts[k]`` of the
    ``points`` in turn, pixel-edge coordinates), by pycocotools' rule (``rleFrPoly`` in its
    maskApi.c), so a mask equals its ``annToMask``: the outline is walked at 5x, points
    rounded as it rounds them, and each column of pixels toggles where the outline crosses it.
    (A 5x5 square at 2.3..7.3 is 25 pixels.) Each polygon's pixels come back as (top, left,
    uint8 block) over the box of its crossings (None: none on the canvas). Every polygon is
    walked and toggled in one set of array operations: per polygon, they cost more in calls
    than in pixels."""
    u, v, of = _outlines(points, counts)
    # where a walk enters a new column (not across two polygons' walks)
    step = np.flatnonzero((u[1:] != u[:-1]) & (of[1:] == of[:-1])) + 1
    xd = (np.where(u[step] < u[step - 1], u[step], u[step] - 1) + 0.5) / _UP - 0.5
    yd = (np.minimum(v[step], v[step - 1]) + 0.5) / _UP - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= width - 1)  # a pixel column's centre
    col = xd[keep].astype(np.int64)
    row = np.ceil(np.clip(yd[keep], 0, height)).astype(np.int64)
    which = of[step][keep]
    n = len(counts)
    found = np.bincount(which, minlength=n) > 0
    big = np.iinfo(np.int64).max
    top, left = np.full(n, big), np.full(n, big)
    bottom, right = np.full(n, -1), np.full(n, -1)
    np.minimum.at(top, which, row)
    np.minimum.at(left, which, col)
    np.maximum.at(bottom, which, row)
    np.maximum.at(right, which, col)
    # Each polygon's box of crossings, laid out one after another column by column: every
    # column toggles at its crossings (an even count, the outline being closed; pycocotools'
    # RLE is column-major, the same toggles), so one running count's parity fills them all.
    rows_of, cols_of = np.where(found, bottom - top + 1, 0), np.where(found, right - left + 1, 0)
    starts = np.concatenate([[0], np.cumsum(rows_of * cols_of)])
    at = starts[which] + (col - left[which]) * rows_of[which] + row - top[which]
    inside = (np.cumsum(np.bincount(at, minlength=int(starts[-1]))) & 1).astype(np.uint8)
    out: list[tuple[int, int, np.ndarray] | None] = []
    for k in range(n):
        if not found[k] or rows_of[k] < 2:
            out.append(None)
            continue
        block = inside[starts[k]:starts[k + 1]].reshape(cols_of[k], rows_of[k]).T
        out.append((int(top[k]), int(left[k]), block[:-1]))
    return out


def _outlines(points: np.ndarray, counts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each closed polygon's outline as pycocotools walks it, one after another, and the
    polygon of each point: its points at 5x rounded (C's ``(int)(5 * x + .5)``), then every
    integer step along each edge's longer axis, the other axis rounded likewise (each edge
    walked from its lower end along that axis)."""
    start = np.cumsum(counts) - counts
    xy = np.trunc(_UP * points.astype(np.float64) + 0.5).astype(np.int64)
    following = np.arange(1, len(xy) + 1)
    following[start + counts - 1] = start  # each polygon's last point closes it
    xs, ys, xe, ye = xy[:, 0], xy[:, 1], xy[following, 0], xy[following, 1]
    dx, dy = np.abs(xe - xs), np.abs(ye - ys)
    along_x = dx >= dy
    flip = (along_x & (xs > xe)) | (~along_x & (ys > ye))
    xs, xe = np.where(flip, xe, xs), np.where(flip, xs, xe)
    ys, ye = np.where(flip, ye, ys), np.where(flip, ys, ye)
    span = np.where(along_x, dx, dy)
    slope = np.where(along_x, (ye - ys) / np.maximum(dx, 1), (xe - xs) / np.maximum(dy, 1))
    edge = np.repeat(np.arange(len(span)), span + 1)
    d = np.arange(len(edge)) - np.repeat(np.cumsum(span + 1) - (span + 1), span + 1)
    t = np.where(flip[edge], span[edge] - d, d)
    ax = along_x[edge]
    other = np.trunc(np.where(ax, ys[edge], xs[edge]) + slope[edge] * t + 0.5).astype(np.int64)
    of = np.repeat(np.arange(len(counts)), counts)[edge]
    return np.where(ax, t + xs[edge], other), np.where(ax, other, t + ys[edge]), of


def _parsed(blob: memoryview) -> Iterator[tuple[int, int, int, memoryview]]:
    """An image's records: (box row, class index + 1, kind, payload) each."""
    at = 0
    while at < len(blob):
        row, value, kind, nbytes = _RECORD.unpack_from(blob, at)
        yield row, value, kind, blob[at + _RECORD.size:at + _RECORD.size + nbytes]
        at += _RECORD.size + nbytes


def _where(source: str, annotation: Any, k: int) -> str:
    """How an error names annotation ``k`` (by its id where it has one)."""
    name = annotation.get("id", k) if isinstance(annotation, dict) else k
    return f"{source}: annotation {name}"


def _rle(payload: memoryview, kind: int, height: int, width: int) -> np.ndarray:
    """An RLE record decoded at its size, resized (nearest) to ``(height, width)``."""
    h, w = struct.unpack_from("<ii", payload, 0)
    body = payload[8:]
    if kind == _COUNTS:
        counts = np.frombuffer(body, np.int32).astype(np.int64)
    else:
        counts = np.asarray(_string_counts(bytes(body).rstrip(b"\0")), np.int64)
    values = np.arange(len(counts), dtype=np.int64) % 2  # runs alternate 0, 1, 0, ...
    flat = np.repeat(values.astype(np.uint8), counts)[:h * w]
    flat = np.pad(flat, (0, h * w - len(flat)))
    mask: np.ndarray = flat.reshape(w, h).T  # column-major, as COCO stores it
    if (h, w) != (height, width):
        mask = cv2.resize(np.ascontiguousarray(mask), (width, height),
                          interpolation=cv2.INTER_NEAREST_EXACT)
    return mask


def _string_counts(text: bytes) -> list[int]:
    """COCO's compressed RLE counts: 5 bits per character (offset 48), a continuation bit,
    and each count past the second stored as its difference from the one two before."""
    counts: list[int] = []
    at = 0
    while at < len(text):
        value, shift, more = 0, 0, True
        while more:
            c = text[at] - 48
            value |= (c & 0x1F) << shift
            more = bool(c & 0x20)
            at += 1
            shift += 5
            if not more and c & 0x10:
                value |= -1 << shift
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts
