"""A Hugging Face detection dataset (an image column and an ``objects`` column of ``bbox`` and
``category``, as the Hub's detection sets and its object-detection guide have them) read into
``(records, y)``: an ``ImageRecords`` over the images and their boxes in Keras' layout.

The objects column is read once, in the main process, column-wise with pyarrow (no Python
object per box), in either of the layouts ``datasets`` stores it in: a struct of lists
(``Sequence({"bbox": ..., "category": ...})``) or a list of structs (``List({...})``). Each
image's size, which scales its boxes, comes from the dataset's ``width`` and ``height``
columns, or else from its header (PIL reads no pixel for it). The images are read by
``ImageRecords.from_huggingface``'s byte ranges in the dataset's Arrow files.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _boxes as B
from ..formats import arrow
from ..formats.shards import need
from ..images.settings import DEFAULT_IMAGE_SIZE, image_size_of
from ..records import ImageRecords
from ...errors import ArgumentError
from ...ops.targets.formats import BOX_FORMATS, check_format, to_xyxy

SIZE_COLUMNS = ("height", "width")  # the columns an image's size is taken from, if present


def from_huggingface_detection(
    dataset: Any, image_column: str = "image", objects_column: str = "objects", *,
    bbox_key: str = "bbox", category_key: str = "category", bbox_format: str = "xywh",
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE,
    bounding_box_format: str = "xyxy", max_boxes: int | None = None,
    class_names: Sequence[str] | None = None, keep_empty: bool = True,
    check_sizes: bool = False, color_mode: str | None = "rgb",
    interpolation: str = "bilinear", reduced_decode: bool = True,
    crop_to_aspect_ratio: bool = False, pad_to_aspect_ratio: bool = False,
) -> tuple[ImageRecords, dict[str, np.ndarray]]:
    """A Hugging Face detection dataset as ``(records, y)`` for ``shmaug.Loader`` /
    ``shmaug.Sequence``, so a set from the Hub trains a Keras detector without a loop of
    one's own over its rows.

    ``records`` reads the dataset's images in its row order (after ``shuffle``,
    ``select``, ``train_test_split``), decoded and resized to ``image_size`` in the workers;
    ``y`` is ``{"boxes": float32 (N, max_boxes, 4), "labels": int64 (N, max_boxes)}``,
    padded with -1, the boxes scaled to ``image_size`` and written in
    ``bounding_box_format``. Class index ``i`` is category ``i``, named
    ``records.class_names[i]``.

    Args:
        dataset: a ``datasets.Dataset`` (one split).
        image_column: its ``Image`` column.
        objects_column: the column of each image's objects.
        bbox_key: the objects' box field.
        category_key: the objects' class field (ints from 0; a ``ClassLabel`` names them).
        bbox_format: the format the dataset's boxes are in, as Keras names it: "xywh"
            (default: COCO's ``[x, y, width, height]`` in pixels, as the Hub's sets mostly
            are), "xyxy", "rel_xyxy" (fractions of the image), ...
        image_size: ``(height, width)`` the images are stretched to, the boxes with them;
            None keeps each image's size and its boxes in its pixels.
        bounding_box_format: Keras' name of the format the boxes are written in (in ``y``).
        max_boxes: the padded count; None: the largest count of any image (at least 1). An
            image with more boxes is refused, naming it: boxes are never dropped silently.
        class_names: the class names in index order; a category past them is refused. None:
            the ``ClassLabel``'s names, else the categories as text ("0", "1", ...).
        keep_empty: keep the images without a box; False drops them.
        check_sizes: where the dataset has ``width`` and ``height`` columns, read each
            image's header too, and refuse a row whose columns are not its image's size.
        color_mode: as ``ImageRecords``' settings.
        interpolation: as ``ImageRecords``' settings.
        reduced_decode: as ``ImageRecords``' settings.
        crop_to_aspect_ratio: refused when True: the boxes are scaled by the plain stretch.
        pad_to_aspect_ratio: refused when True, likewise.

    Returns:
        ``(records, y)``: an ``ImageRecords`` and the boxes and labels, one row per image.

    Raises:
        ArgumentTypeError: not a Dataset (a DatasetDict: pick a split).
        ArgumentError: a column or field that is missing; a box that is not 4 numbers,
            inverted, or (``rel_`` formats) not fractions; a category ``class_names`` does not
            name; an image over ``max_boxes``; a setting the boxes cannot follow.

    Example:
        >>> ds = datasets.load_dataset("cppe-5", split="train")
        >>> records, y = from_huggingface_detection(ds, image_size=(512, 512))
        >>> train = shmaug.Sequence(records, y, batch_size=16, augment=Compose(
        ...     [Maybe(Op("hflip"))], bounding_box_format="xyxy"))
    """
    need("datasets", "huggingface")
    fmt = B.check_settings(bounding_box_format, max_boxes, crop_to_aspect_ratio,
                           pad_to_aspect_ratio)
    given = check_format(bbox_format, "bbox_format", BOX_FORMATS)
    if given is None:
        raise ArgumentError(f"`bbox_format` is None. Fix: pass the format the dataset's "
                            f"boxes are in, one of {list(BOX_FORMATS)} (COCO's: 'xywh').")
    arrow.check(dataset, image_column, None)
    if objects_column not in dataset.features:
        raise ArgumentError(
            f"`objects_column`={objects_column!r} is not a column of the dataset; its columns "
            f"are {list(dataset.features)}. Fix: pass `objects_column=` the column of each "
            f"image's boxes and classes.")
    size = image_size_of(image_size)
    source = f"the dataset's {objects_column!r} column"
    counts, boxes, ids = _objects(dataset, objects_column, bbox_key, category_key, source)
    owner = np.repeat(np.arange(len(counts)), counts)
    table = B.BoxTable([""] * len(counts), _sizes(dataset, image_column, check_sizes), owner,
                       boxes, ids, lambda i: f"row {i} of the dataset")
    fix = f"pass `bbox_format=` the format the boxes are in (now {given!r})."
    if given.startswith("rel_"):
        B.refuse_not_fractions(source, boxes, owner, table.where, fix)
        boxes = to_xyxy(boxes, given, 1.0, 1.0) * np.tile(table.sizes[owner][:, ::-1], 2)
    else:
        boxes = to_xyxy(boxes, given, 1.0, 1.0)
    table.boxes = boxes
    B.refuse_inverted(source, table, fix)
    names = [str(n) for n in class_names] if class_names is not None else _class_names(
        dataset.features[objects_column], category_key, ids)
    table.labels = B.class_indices(source, table, ids, 0, names)
    rows, _, y = B.layout(source, table, image_size=size, bounding_box_format=fmt,
                          max_boxes=max_boxes, keep_empty=keep_empty)
    if len(rows) < len(dataset):
        dataset = dataset.select(rows, keep_in_memory=True)  # (no indices file written)
    records = ImageRecords.from_huggingface(
        dataset, image_column, None, class_names=names, image_size=size,
        color_mode=color_mode, interpolation=interpolation, reduced_decode=reduced_decode)
    return records, y


def _objects(dataset: Any, column: str, bbox_key: str, category_key: str, source: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(boxes per row, boxes (B, 4) float64 as stored, category ids (B,))`` in the
    dataset's row order, read column-wise from either layout ``datasets`` stores."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = ((bbox_key, "bbox_key"), (category_key, "category_key"))
    objects = dataset.with_format("arrow", columns=[column])[:].column(column).combine_chunks()
    if pa.types.is_struct(objects.type):  # a struct of lists: one list per field
        fields = [_field(objects, key, arg, source) for key, arg in keys]
        counts = [pc.list_value_length(f).fill_null(0).to_numpy() for f in fields]
        first = np.flatnonzero(counts[0] != counts[1])[:1]
        if len(first):
            raise ArgumentError(
                f"{source}: row {int(first[0])} has {int(counts[0][first[0]])} {bbox_key!r} "
                f"and {int(counts[1][first[0]])} {category_key!r}: one of each per object. "
                f"Fix: repair the row, or leave it out (`dataset.select`).")
        per_box, category = (f.flatten() for f in fields)
        count = counts[0]
    elif pa.types.is_list(objects.type) or pa.types.is_large_list(objects.type):
        count = pc.list_value_length(objects).fill_null(0).to_numpy()
        flat = objects.flatten()  # one struct per object
        per_box, category = (_field(flat, key, arg, source) for key, arg in keys)
    else:
        raise ArgumentError(
            f"{source} holds {objects.type}, not objects (a struct of lists, or a list of "
            f"structs, with {bbox_key!r} and {category_key!r}). Fix: pass `objects_column=` "
            f"the column of each image's objects.")
    sides = pc.list_value_length(per_box).to_numpy(zero_copy_only=False)
    if (sides != 4).any():
        k = int(np.flatnonzero(sides != 4)[0])
        row = int(np.searchsorted(np.cumsum(count), k, side="right"))
        raise ArgumentError(
            f"{source}: the {bbox_key!r} of an object of row {row} holds {sides[k]} numbers, "
            f"not 4. Fix: repair the row, or pass `bbox_key=` the field of the boxes.")
    boxes = per_box.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
    ids = category.to_numpy(zero_copy_only=False)
    if ids.dtype.kind not in "iu":
        raise ArgumentError(
            f"{source}: {category_key!r} holds {category.type}, not class ids (ints). Fix: "
            f"pass `category_key=` the field of the class ids, or cast it to "
            f"datasets.ClassLabel.")
    return count.astype(np.int64), boxes.reshape(-1, 4), ids.astype(np.int64)


def _field(array: Any, key: str, arg: str, source: str) -> Any:
    """Field ``key`` (argument ``arg``) of a struct array, its offset applied."""
    import pyarrow.compute as pc

    names = [array.type.field(i).name for i in range(array.type.num_fields)]
    if key not in names:
        raise ArgumentError(
            f"`{arg}`={key!r} is not a field of {source}; its objects' fields are {names}. "
            f"Fix: pass `{arg}=` one of them (`bbox_key=` the boxes, `category_key=` the "
            f"class ids).")
    return pc.struct_field(array, key)


def _sizes(dataset: Any, image_column: str, check: bool) -> np.ndarray:
    """Each row's (height, width): its ``height`` and ``width`` columns, else (or, with
    ``check``, also) its image's header."""
    import pyarrow as pa
    from PIL import Image

    have = all(c in dataset.features for c in SIZE_COLUMNS)
    if have:
        table = dataset.with_format("arrow", columns=list(SIZE_COLUMNS))[:]
        sizes = np.stack([table.column(c).to_numpy(zero_copy_only=False)
                          for c in SIZE_COLUMNS], 1).astype(np.int64)
        if not check:
            return sizes
    images = dataset.with_format("arrow", columns=[image_column])[:].column(image_column)
    read = []
    for i in range(len(images)):
        value = images[i]
        data = value["bytes"] if isinstance(value, pa.StructScalar) else value
        try:
            with Image.open(pa.BufferReader(data.as_buffer())) as image:
                width, height = image.size
        except (OSError, AttributeError, TypeError, ValueError) as exc:
            raise ArgumentError(
                f"Row {i} of the dataset: its {image_column!r} is not an image PIL can read "
                f"({exc}). Fix: repair the row, or leave it out (`dataset.select`).") from None
        if have and tuple(sizes[i]) != (height, width):
            raise ArgumentError(
                f"Row {i} of the dataset gives its image a size of {sizes[i][1]}x{sizes[i][0]} "
                f"(width x height; columns 'width' and 'height'), but the image is "
                f"{width}x{height}: its boxes would be scaled wrongly. Fix: correct the "
                f"columns (or the image).")
        read.append((height, width))
    return np.array(read, np.int64).reshape(-1, 2)


def _class_names(feature: Any, key: str, ids: np.ndarray) -> list[str]:
    """The ``ClassLabel``'s names of the objects' ``key`` field, whichever way ``datasets``
    nests it (a dict of lists, a list of dicts); else the ids as text."""
    import datasets

    while not isinstance(feature, (dict, datasets.ClassLabel, datasets.Value)):
        feature = getattr(feature, "feature", None)  # List, Sequence, LargeList
        if feature is None:
            break
    if isinstance(feature, dict):
        return _class_names(feature.get(key), key, ids)
    if isinstance(feature, datasets.ClassLabel):
        return list(feature.names)
    return [str(i) for i in range(int(ids.max(initial=-1)) + 1)]
