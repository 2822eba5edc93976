"""Masks where users keep them: COCO's polygons and RLEs (``from_coco(masks=...)``) and a
folder of mask files beside the images (``from_segmentation``, ``MaskFiles``), read as the
workers read them (``load(i)`` here), and the refusals at construction, each naming the file."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from PIL import Image

from shmaug.errors import ArgumentError, ImageReadError
from shmaug.sources import MaskFiles, from_coco, from_segmentation
from tests.annotations_data import add_polygons, write_coco

# A 7x9 mask and pycocotools' own compressed RLE of it (mask.encode, pycocotools 2.0.10).
RLE_MASK = np.zeros((7, 9), np.uint8)
RLE_MASK[1:5, 2:7] = 1
RLE_MASK[6, :] = 1
RLE_MASK[0, 8] = 1
RLE_STRING = "6160K30M030M030M030M030M51OO"

# (file name, width, height, [(x, y, w, h, category id, iscrowd)])
IMAGES = [("a.png", 40, 30, [(4, 6, 20, 10, 1, 0), (26, 2, 8, 8, 2, 0)]),
          ("b.png", 9, 7, [(0, 0, 9, 7, 2, 0)]),
          ("c.png", 40, 30, [(2, 2, 6, 6, 1, 1)])]  # a crowd's: dropped, and its mask
CATEGORIES = [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]


def coco_with_masks(tmp_path, rle=RLE_STRING):
    """IMAGES as COCO, the masks a rectangle polygon of each box but for b.png's, an RLE."""
    json_path, folder = write_coco(tmp_path, IMAGES, CATEGORIES)
    data = add_polygons(json_path)
    data["annotations"][2]["segmentation"] = {"size": [7, 9], "counts": rle}
    json_path.write_text(json.dumps(data))
    return json_path, folder


def test_instance_masks_lie_under_their_box_rows_and_padding_rows_are_empty(tmp_path):
    files, y = from_coco(*coco_with_masks(tmp_path), image_size=None, masks="instances")
    assert set(y) == {"boxes", "labels", "masks"} and len(y["masks"]) == 3
    first = y["masks"].load(0)
    assert first.shape == (2, 30, 40) and first.dtype == np.uint8
    for row, (x, y0, w, h, *_) in enumerate(IMAGES[0][3]):
        expected = np.zeros((30, 40), np.uint8)
        expected[y0:y0 + h, x:x + w] = 1  # pixel edges: exactly the box's pixels
        np.testing.assert_array_equal(first[row], expected)
    np.testing.assert_array_equal(y["masks"].load(1)[0], RLE_MASK)  # pycocotools' RLE
    assert not y["masks"].load(1)[1].any()  # under a padding row
    assert not y["masks"].load(2).any() and (y["labels"][2] == -1).all()  # the crowd's


def test_masks_follow_the_images_to_image_size(tmp_path):
    files, y = from_coco(*coco_with_masks(tmp_path), image_size=(15, 20), masks="instances")
    mask = y["masks"].load(0)
    assert mask.shape == (2, 15, 20)
    box = y["boxes"][0, 0]  # [2, 3, 12, 8] after the halving
    np.testing.assert_array_equal(np.argwhere(mask[0]).min(0), [box[1], box[0]])
    np.testing.assert_array_equal(np.argwhere(mask[0]).max(0) + 1, [box[3], box[2]])
    rle = y["masks"].load(1)[0]  # 7x9 stretched to 15x20, nearest
    assert rle.shape == (15, 20) and 0.2 < rle.mean() < 0.6


def test_semantic_masks_paint_class_index_plus_one(tmp_path):
    files, y = from_coco(*coco_with_masks(tmp_path), image_size=None, masks="semantic")
    mask = y["segmentation_masks"].load(0)
    assert mask.shape == (30, 40, 1) and "masks" not in y
    assert mask[10, 10, 0] == 1 and mask[5, 30, 0] == 2 and mask[0, 0, 0] == 0
    np.testing.assert_array_equal(y["segmentation_masks"].load(1)[..., 0], RLE_MASK * 2)


def test_uncompressed_rle_counts_read_as_the_string_does(tmp_path):
    flat = RLE_MASK.T.reshape(-1)  # column-major runs, starting with zeros
    edges = np.flatnonzero(np.diff(np.r_[0, flat, 1 - flat[-1]]) != 0)
    counts = np.diff(np.r_[0, edges]).tolist()
    assert sum(counts) == flat.size
    json_path, folder = coco_with_masks(tmp_path)
    data = json.loads(json_path.read_text())
    data["annotations"][2]["segmentation"]["counts"] = counts
    json_path.write_text(json.dumps(data))
    files, y = from_coco(json_path, folder, image_size=None, masks="instances")
    np.testing.assert_array_equal(y["masks"].load(1)[0], RLE_MASK)


def test_an_annotation_without_a_mask_is_named(tmp_path):
    json_path, folder = coco_with_masks(tmp_path)
    data = json.loads(json_path.read_text())
    del data["annotations"][1]["segmentation"]
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 2 has no mask.*masks=None"):
        from_coco(json_path, folder, masks="instances")
    files, y = from_coco(json_path, folder)  # boxes alone need none
    with pytest.raises(ArgumentError, match="`masks` must be None, 'instances' or 'semantic'"):
        from_coco(json_path, folder, masks="polygons")


def test_a_bad_polygon_is_named(tmp_path):
    json_path, folder = coco_with_masks(tmp_path)
    data = json.loads(json_path.read_text())
    data["annotations"][0]["segmentation"] = [[1, 2, 3, 4, 5]]
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 1 has a polygon of 5 values"):
        from_coco(json_path, folder, masks="instances")
    data["annotations"][0]["segmentation"] = [[1, 2, 3, "4", 5, None]]
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 1 has a polygon of 6 values, not "
                                            r"numbers"):
        from_coco(json_path, folder, masks="instances")


# -- a segmentation folder ---------------------------------------------------------------------


def write_pairs(root, names, size=(12, 16), mask_size=None, suffix="", palette=False):
    """``root/images/<name>.jpg`` and ``root/masks/<name><suffix>.png`` (a class id per
    pixel: 1 + i % 3 over a block, 0 elsewhere)."""
    for i, name in enumerate(names):
        for part in ("images", "masks"):
            (root / part / name).parent.mkdir(parents=True, exist_ok=True)
        pixels = np.zeros((*size, 3), np.uint8)
        pixels[2:8, 3:10] = 255
        Image.fromarray(pixels).save(root / "images" / f"{name}.jpg", quality=95)
        ids = np.zeros(mask_size or size, np.uint8)
        ids[2:8, 3:10] = 1 + i % 3
        image = Image.fromarray(ids, "P" if palette else "L")
        if palette:
            image.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0, 128, 128, 0] + [0] * 756)
        image.save(root / "masks" / f"{name}{suffix}.png")
    return root / "images", root / "masks"


def test_a_segmentation_folder_pairs_by_stem_in_sub_folders(tmp_path):
    images, masks = write_pairs(tmp_path, ["b/2", "a/1", "a/0"], palette=True)
    files, y = from_segmentation(images, masks, image_size=(6, 8))
    assert [p.split("images/")[1] for p in files.paths] == ["a/0.jpg", "a/1.jpg", "b/2.jpg"]
    masks_of = y["segmentation_masks"]
    assert isinstance(masks_of, MaskFiles) and len(masks_of) == 3
    assert [m.split("masks/")[1] for m in masks_of.paths] == ["a/0.png", "a/1.png", "b/2.png"]
    first = masks_of.load(2)  # b/2: id 1; a palette PNG gives its indices, not colours
    assert first.shape == (6, 8, 1) and set(np.unique(first)) == {0, 1}
    assert set(np.unique(masks_of.load(0))) == {0, 3}  # resized by nearest: no blend


def test_a_mask_suffix_pairs_carvana_style_names(tmp_path):
    images, masks = write_pairs(tmp_path, ["0001", "0002"], suffix="_mask")
    files, y = from_segmentation(images, masks, mask_suffix="_mask", image_size=None)
    assert y["segmentation_masks"].load(1).shape == (12, 16, 1)


def test_unpaired_files_are_refused_by_name_or_dropped(tmp_path):
    images, masks = write_pairs(tmp_path, ["0", "1", "2"])
    (masks / "1.png").unlink()
    with pytest.raises(ArgumentError, match=r"1 image\(s\) have no mask.*1\.jpg.*"
                                            r"unpaired='drop'"):
        from_segmentation(images, masks)
    (images / "2.jpg").rename(tmp_path / "away.jpg")
    with pytest.raises(ArgumentError, match=r"1 image\(s\) have no mask"):
        from_segmentation(images, masks)
    (images / "1.jpg").unlink()
    with pytest.raises(ArgumentError, match=r"1 mask\(s\) have no image.*2\.png"):
        from_segmentation(images, masks)
    files, y = from_segmentation(images, masks, unpaired="drop")
    assert len(files) == 1 and files.paths[0].endswith("0.jpg")
    with pytest.raises(ArgumentError, match="`unpaired` must be one of"):
        from_segmentation(images, masks, unpaired="skip")


def test_a_mask_of_another_size_than_its_image_is_refused(tmp_path):
    images, masks = write_pairs(tmp_path, ["0"], mask_size=(12, 15))
    with pytest.raises(ArgumentError, match=r"mask .*0\.png' is 15x12.*image .*0\.jpg' is "
                                            r"16x12.*check_sizes=False"):
        from_segmentation(images, masks)
    assert len(from_segmentation(images, masks, check_sizes=False)[0]) == 1


def test_two_files_of_one_stem_and_missing_folders_are_refused(tmp_path):
    images, masks = write_pairs(tmp_path, ["0"])
    Image.fromarray(np.zeros((12, 16), np.uint8)).save(masks / "0.bmp")
    with pytest.raises(ArgumentError, match=r"0\.bmp.*0\.png.*one stem|0\.png.*0\.bmp.*one "
                                            r"stem"):
        from_segmentation(images, masks)
    with pytest.raises(ArgumentError, match="`masks` must be an existing folder"):
        from_segmentation(images, tmp_path / "nowhere")


def test_mask_files_keep_16_bit_ids_and_refuse_colour(tmp_path):
    deep = np.zeros((5, 6), np.uint16)
    deep[1:3, 2:5] = 1000
    Image.fromarray(deep).save(tmp_path / "deep.png")
    colour = np.zeros((5, 6, 3), np.uint8)
    colour[1, 1] = (255, 0, 0)
    Image.fromarray(colour).save(tmp_path / "colour.png")
    masks = MaskFiles([tmp_path / "deep.png", tmp_path / "colour.png"], image_size=None)
    got = masks.load(0)
    assert got.dtype == np.uint16 and got.shape == (5, 6, 1) and got.max() == 1000
    with pytest.raises(ImageReadError, match="colour.png.*colour image.*class id"):
        masks.load(1)
    with pytest.raises(ArgumentError, match="missing.png"):
        MaskFiles([tmp_path / "missing.png"])


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_a_grey_png_of_under_8_bits_reads_as_pil_reads_it(tmp_path, bits):
    """A binary mask saved from a bool array is a 1-bit PNG, which OpenCV scales to 0 and
    255: a 2-class model's loss got label 255. PIL reads 0 and 1; 2- and 4-bit PNGs both
    libraries scale to 0-255."""
    ids = (np.arange(24).reshape(4, 6) % (1 << bits)).astype(np.uint8)
    if bits == 1:
        Image.fromarray(ids.astype(bool)).save(tmp_path / "m.png")  # mode "1"
    else:  # PIL keeps a grey value's top bits
        Image.fromarray(ids * np.uint8(255 // ((1 << bits) - 1))).save(tmp_path / "m.png",
                                                                         bits=bits)
    if (tmp_path / "m.png").read_bytes()[24] != bits:  # the PNG's own bit depth
        pytest.skip(f"this Pillow writes a grey PNG of {bits} bits at 8")  # (older ones)
    with Image.open(tmp_path / "m.png") as image:
        pils = np.asarray(image, np.uint8)
    got = MaskFiles([tmp_path / "m.png"], image_size=None).load(0)[..., 0]
    np.testing.assert_array_equal(got, pils)
    np.testing.assert_array_equal(got, ids if bits == 1 else ids * (255 // ((1 << bits) - 1)))


def test_masks_of_another_size_than_their_images_are_refused_before_and_while_running(
        tmp_path):
    import shmaug
    from shmaug.errors import OutputMismatchError
    from shmaug.ops import Compose, Op

    for i, side in enumerate((8, 9)):
        Image.fromarray(np.zeros((side, side), np.uint8)).save(tmp_path / f"{i}.png")
    paths = [tmp_path / "0.png", tmp_path / "1.png"]
    sized = MaskFiles(paths, image_size=(16, 16))
    images = shmaug.ImageFiles.from_paths(paths, image_size=(8, 8))
    for x in (np.zeros((2, 8, 8, 3), np.uint8), images):  # known sizes: at construction
        with pytest.raises(ArgumentError, match=r"masks of \(16, 16\) pixels, but its images "
                                                r"are \(8, 8\).*same image_size"):
            shmaug.Loader(x, {"segmentation_masks": sized}, batch_size=2, workers=0)
    # each at its size, unchecked (check_sizes=False): found on the sample
    own = MaskFiles(paths, image_size=None, check_sizes=False)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "image.png")
    x = shmaug.ImageFiles.from_paths([tmp_path / "image.png"] * 2, image_size=None)
    crop = Compose([Op("hflip"), Op("center_resized_crop", height=8, width=8)])
    with shmaug.Loader(x, {"segmentation_masks": own}, batch_size=1, workers=0,
                       augment=crop) as loader:
        loader.batch(0)
        with pytest.raises(OutputMismatchError, match=r"'segmentation_masks' of this sample "
                                                      r"is 9x9 .* image is 8x8"):
            loader.batch(1)


def test_what_a_worker_receives_of_coco_masks_does_not_grow_with_the_images():
    """The polygons, offsets and sizes are blocks of the loader's shared memory: a worker's
    pickle holds their names (a spawned worker once got the sizes array by value)."""
    import pickle

    from shmaug.memory.store import SharedStore
    from shmaug.sources.annotations.coco_masks import CocoMasks

    sent = []
    for n in (10, 5000):
        anns = [{"segmentation": [[0, 0, 5, 0, 5, 5]]}] * n  # 3 pixels at 32x32 (pycocotools)
        masks = CocoMasks.build("x", anns, np.arange(n), np.arange(n), np.zeros(n, np.int64),
                                np.ones(n, np.int64), np.full((n, 2), 64), (32, 32),
                                "instances", 1, 1)
        store = SharedStore()
        try:
            shared = masks.load.sharing(store)
            sent.append(len(pickle.dumps(shared)))
            worker = pickle.loads(pickle.dumps(shared))
            assert worker(n - 1).sum() == 3 and worker.table.size_of(n - 1) == (64, 64)
            del worker, shared
        finally:
            store.close()
    assert max(sent) < 1000 and abs(sent[1] - sent[0]) < 16  # (the count itself grows)


def test_what_would_part_masks_from_their_images_is_refused_at_construction(tmp_path):
    import shmaug
    from shmaug.ops import Compose, Op
    from tests.annotations_data import StripeMasks

    images, masks_dir = write_pairs(tmp_path, ["0", "1"], size=(16, 16))
    files, y = from_segmentation(images, masks_dir, image_size=(16, 16))
    masks = y["segmentation_masks"]
    flip = Compose([Op("hflip")])
    for given in (masks, {"seg": masks}):  # filed under no name the pipeline moves
        with pytest.raises(ArgumentError, match=r"not under a name the pipeline moves.*"
                                                r"y=\{'segmentation_masks': masks\}"):
            shmaug.Loader(files, given, batch_size=2, augment=flip, workers=0)
    with shmaug.Loader(files, masks, batch_size=2, workers=0) as loader:  # nothing moves
        assert loader.batch(0)[1].shape == (2, 16, 16, 1)
    with pytest.raises(ArgumentError, match=r"makes 'segmentation_masks', one mask per "
                                            r"image, which 'masks' does not hold"):
        shmaug.Loader(files, {"masks": masks}, batch_size=2, workers=0)
    for name in ("keypoints", "boxes"):  # masks filed as points or boxes
        with pytest.raises(ArgumentError, match=rf"makes 'segmentation_masks'.*which "
                                                rf"'{name}' does not hold"):
            shmaug.Loader(files, {name: masks}, batch_size=2, augment=flip, workers=0)
    skipping = shmaug.ImageFiles.from_paths(files.paths, image_size=(16, 16), on_error="skip")
    with pytest.raises(ArgumentError, match="on_error='skip'.*another image's targets"):
        shmaug.Loader(skipping, y, batch_size=2, workers=0)
    cropping = shmaug.ImageFiles.from_paths(files.paths, image_size=(16, 16),
                                            crop_to_aspect_ratio=True)
    with pytest.raises(ArgumentError, match=r"crop_to_aspect_ratio=True, which the targets.*"
                                            r"Op\(.resize., .*crop_to_aspect_ratio=True\)"):
        shmaug.Loader(cropping, y, batch_size=2, workers=0)
    own = {"segmentation_masks": MaskFiles(masks.paths, image_size=None)}
    with pytest.raises(ArgumentError, match=r"masks of each its own size, but its images are "
                                            r"\(16, 16\) pixels"):
        shmaug.Loader(files, own, batch_size=2, workers=0)
    labels = np.arange(2)  # Keras' one target per output: a tuple may hold a source
    with shmaug.Loader(np.zeros((2, 16, 16, 3), np.uint8), (labels, StripeMasks(2)),
                       batch_size=2, workers=0) as loader:
        ya, yb = loader.batch(0)[1]
        assert ya.shape == (2,) and yb.shape == (2, 16, 16, 1)


def test_a_target_source_returning_no_array_is_named(tmp_path):
    import shmaug
    from shmaug.errors import ArgumentTypeError

    class Listy:
        def __len__(self):
            return 2

        def load(self, index):
            return [[0] * 16] * 16

    with pytest.raises(ArgumentTypeError, match=r"Listy.load.*returned list.*sample index 0"
                                                r".*numeric array"):  # (on the probe)
        shmaug.Loader(np.zeros((2, 16, 16, 3), np.uint8), {"segmentation_masks": Listy()},
                      batch_size=2, workers=0)


def test_cityscapes_suffixes_pair_ids_and_leave_the_other_files_alone(tmp_path):
    for city in ("aachen", "bonn"):
        for part in ("leftImg8bit", "gtFine"):
            (tmp_path / part / city).mkdir(parents=True)
        stem = f"{city}_000000_000019"
        Image.fromarray(np.zeros((6, 8, 3), np.uint8)).save(
            tmp_path / "leftImg8bit" / city / f"{stem}_leftImg8bit.png")
        ids = np.full((6, 8), 7 if city == "bonn" else 26, np.uint8)
        Image.fromarray(ids).save(tmp_path / "gtFine" / city / f"{stem}_gtFine_labelIds.png")
        Image.fromarray(np.zeros((6, 8, 3), np.uint8)).save(
            tmp_path / "gtFine" / city / f"{stem}_gtFine_color.png")
        (tmp_path / "gtFine" / city / f"{stem}_gtFine_polygons.json").write_text("{}")
    files, y = from_segmentation(tmp_path / "leftImg8bit", tmp_path / "gtFine",
                                 image_size=None, image_suffix="_leftImg8bit",
                                 mask_suffix="_gtFine_labelIds")
    masks = y["segmentation_masks"]
    assert len(files) == 2 and all(p.endswith("_labelIds.png") for p in masks.paths)
    assert masks.load(0)[0, 0, 0] == 26 and masks.load(1)[0, 0, 0] == 7


def test_a_segmentation_folder_splits_as_keras_splits_a_folder(tmp_path):
    """validation_split, subset and seed draw Keras' subsets, with each mask beside its
    image, and the two subsets never overlap."""
    from shmaug import ImageFiles

    images, masks = write_pairs(tmp_path, [f"{i:02d}" for i in range(10)])
    (train, train_y), (val, val_y) = from_segmentation(images, masks, validation_split=0.3,
                                                       subset="both", seed=7)
    assert len(train) == 7 and len(val) == 3 and not set(train.paths) & set(val.paths)
    for files, y in ((train, train_y), (val, val_y)):
        stems = [p.rsplit("/", 1)[1][:2] for p in files.paths]
        assert stems == [m.rsplit("/", 1)[1][:2] for m in y["segmentation_masks"].paths]
    keras_like = ImageFiles.from_directory(images, labels=None, validation_split=0.3,
                                           subset="validation", seed=7)
    assert list(val.paths) == list(keras_like.paths)  # the same draw as Keras'
    only, _ = from_segmentation(images, masks, validation_split=0.3, subset="training",
                                seed=7)
    assert list(only.paths) == list(train.paths)
    with pytest.raises(ArgumentError, match="`seed` must be an int"):
        from_segmentation(images, masks, validation_split=0.3, subset="both")


def _star(cx, cy, r, k=9):
    angles = np.linspace(0, 2 * np.pi, k, endpoint=False)
    reach = r * (0.6 + 0.4 * (np.arange(k) % 2))
    return np.round(np.stack([cx + np.cos(angles) * reach, cy + np.sin(angles) * reach], 1)
                    .ravel(), 2).tolist()


@pytest.mark.parametrize("kind", ["instances", "semantic"])
def test_undrawn_polygons_land_where_the_drawn_masks_are_moved(tmp_path, kind):
    """A pipeline that moves masks gets an image's polygons undrawn: moved as points and filled
    once in the moves' frame. That equals the mask drawn whole and moved, within the outline
    (the same rule at another scale), and exactly where nothing moves."""
    from shmaug.ops import Compose, Maybe, Op
    from shmaug.ops.targets.moves import noting
    from shmaug.ops.targets.sample import Undrawn, _masks

    images = [("s.png", 120, 90, [(20, 10, 60, 50, 1, 0), (60, 40, 50, 45, 2, 0)])]
    json_path, folder = write_coco(tmp_path, images, CATEGORIES)
    data = json.loads(json_path.read_text())
    data["annotations"][0]["segmentation"] = [_star(50, 35, 25)]
    data["annotations"][1]["segmentation"] = [_star(85, 62, 22), [60, 40, 70, 40, 65, 50]]
    json_path.write_text(json.dumps(data))
    _, y = from_coco(json_path, folder, image_size=None, masks=kind)
    name = "masks" if kind == "instances" else "segmentation_masks"
    load = y[name].load
    undrawn = load.drawing()(0)
    drawn = load(0)
    assert isinstance(undrawn, Undrawn) and undrawn.shape == drawn.shape
    np.testing.assert_array_equal(np.asarray(undrawn), drawn)  # as it lies: the same
    image = np.zeros((90, 120, 3), np.uint8)
    crop = Op("random_resized_crop", height=64, width=80, scale=(0.3, 1.0))
    pipelines = [([Op("resize", height=180, width=240)], 0.9), ([Op("hflip")], 0.95),
                 ([Op("rotate", degrees=(-20, 20))], 0.9), ([crop], 0.9),
                 # the masks drawn whole lose to two nearest-neighbour resamples on the way
                 ([crop, Maybe(Op("hflip")), Op("rotate", degrees=(-20, 20))], 0.8)]
    stacked = kind == "instances"
    for ops, least in pipelines:
        for seed in range(3):
            with noting() as moves:
                Compose(ops)(image, np.random.default_rng(seed))
            got = _masks(undrawn, list(moves), 0.0, stacked)
            want = _masks(drawn, list(moves), 0.0, stacked)
            assert got.shape == want.shape
            for value in (range(2) if stacked else np.unique(want)[1:]):
                a, b = (got[value], want[value]) if stacked else (got == value, want == value)
                a, b = a.astype(bool), b.astype(bool)
                if (a | b).sum() < 40:  # an object left mostly outside the window
                    continue
                assert (a & b).sum() / (a | b).sum() > least, (ops, seed, value)
                offset = np.argwhere(a).mean(0) - np.argwhere(b).mean(0)
                assert np.abs(offset).max() < 1.0, (ops, seed, value, offset)


@pytest.mark.parametrize("kind", ["instances", "semantic"])
def test_undrawn_polygons_stay_cut_where_a_move_cut_them(tmp_path, kind):
    """A polygon moved off the image by one move and back by the next is drawn where the
    first move's output ends: what it cut off stays out, as in the image."""
    from shmaug.ops import Compose, Op
    from shmaug.ops.targets.moves import noting
    from shmaug.ops.targets.sample import _masks

    images = [("s.png", 100, 100, [(60, 20, 35, 60, 1, 0)])]
    json_path, folder = write_coco(tmp_path, images, CATEGORIES)
    add_polygons(json_path)
    _, y = from_coco(json_path, folder, image_size=None, masks=kind)
    load = y["masks" if kind == "instances" else "segmentation_masks"].load
    undrawn, drawn = load.drawing()(0), load(0)
    there_and_back = [Op("translate", x=0.3, y=0.0), Op("translate", x=-0.3, y=0.0)]
    cut_then_turned = [Op("crop", height=60, width=70), Op("rotate", degrees=(20, 30))]
    image = np.zeros((100, 100, 3), np.uint8)
    for ops in (there_and_back, cut_then_turned):
        with noting() as moves:
            Compose(ops)(image, np.random.default_rng(0))
        assert all(m.border == cv2.BORDER_CONSTANT for m in moves)
        got = _masks(undrawn, list(moves), 0.0, kind == "instances")
        want = _masks(drawn, list(moves), 0.0, kind == "instances")
        if ops is there_and_back:
            np.testing.assert_array_equal(got, want)
            assert (want != 0).sum() == 10 * 60  # the 10 columns that stayed on the image
        else:
            a, b = got != 0, want != 0
            assert (a & b).sum() / (a | b).sum() > 0.95, (a.sum(), b.sum())
