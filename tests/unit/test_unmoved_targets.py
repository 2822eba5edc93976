"""A mask, boxes or keypoints in ``y`` are moved with their image or refused before anything
starts, never passed through while the pixels move: a pipeline that moves pixels moves them
(its ops say so: ``targets="warped"``), one that moves none keeps them, and a member that
cannot say what it does to them (a function of the user's that declares nothing, AugMix) is
refused by name, as is every misread target (no format, another format, outside the image,
another size, labels that are not one per box)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, OneOf, Op, register
from tests import _ops

x = np.zeros((8, 16, 16), np.uint8)
BOXES = np.full((8, 2, 4), -1.0, np.float32)
BOXES[:, 0] = [2, 3, 9, 12]
LABELS = np.where(BOXES[:, :, 0] >= 0, 1, -1)
KERAS_Y = {"bounding_boxes": {"boxes": BOXES, "labels": LABELS},
           "segmentation_masks": np.zeros((8, 16, 16, 1), np.uint8)}


@register("test_recolour", targets="still")
def recolour(image, rng):
    return image


def pad_to_32(image):  # declared still below, yet it changes the size
    return np.pad(image, ((0, 32 - image.shape[0]), (0, 32 - image.shape[1])))


@pytest.mark.parametrize("y", [{"segmentation_masks": KERAS_Y["segmentation_masks"]},
                               {"bounding_boxes": KERAS_Y["bounding_boxes"]}],
                         ids=["masks", "boxes"])
def test_an_op_declared_still_that_changes_the_size_is_refused(y) -> None:
    """32x32 images came with their 16x16 masks (boxes on the old canvas), without a word:
    alone, and beside an op that moves the targets."""
    pad = shmaug.from_array(pad_to_32, targets="still")
    alone = Compose([pad], bounding_box_format="xyxy")
    with pytest.raises(shmaug.OutputMismatchError, match=r"made sample 0 32x32 pixels.*from "
                                                         r"16x16.*targets='still'.*Fix"):
        shmaug.Loader(x, y, batch_size=8, augment=alone, workers=0)
    beside = Compose([Op("hflip"), pad], bounding_box_format="xyxy")
    with pytest.raises(shmaug.OutputMismatchError, match=r"made a 32x32 image.*moved to "
                                                         r"16x16.*targets='still'.*Fix"):
        with shmaug.Loader(x, y, batch_size=8, augment=beside, workers=0) as loader:
            loader.batch(0)


def test_a_pipeline_that_moves_pixels_moves_keras_targets_instead_of_refusing_them() -> None:
    augment = Compose([Op("gamma"), OneOf([Op("hflip"), Maybe(Op("rotate"))])],
                      bounding_box_format="xyxy")
    with shmaug.Loader(x, KERAS_Y, batch_size=8, augment=augment, workers=0) as loader:
        _, y = loader.batch(0)
    assert set(y) == {"bounding_boxes", "segmentation_masks"}
    assert y["bounding_boxes"]["boxes"].shape == (8, 2, 4)


def test_a_pipeline_that_moves_no_pixel_keeps_its_mask() -> None:
    mask = np.arange(8 * 16 * 16, dtype=np.uint16).reshape(8, 16, 16)
    with shmaug.Loader(x, {"mask": mask}, batch_size=4, workers=0,
                       augment=Compose([Op("gamma"), Op("gaussian_noise"),
                                        Op("test_recolour")])) as loader:
        np.testing.assert_array_equal(loader.batch(0)[1]["mask"], mask[:4])


@pytest.mark.parametrize("member, why", [
    (_ops.identity, "does not say what it does"),
    (Op("aug_mix"), "blends copies of the image moved differently"),
])
def test_a_member_that_cannot_keep_targets_is_refused_by_name(member, why) -> None:
    augment = Compose([Op("hflip"), member], bounding_box_format="xyxy")
    with pytest.raises(shmaug.ArgumentError, match=rf"'boxes'.*{why}.*targets='still'"):
        shmaug.Loader(x, KERAS_Y, augment=augment, workers=0)


def test_a_warp_outside_a_compose_is_refused_with_the_fix() -> None:
    with pytest.raises(shmaug.ArgumentError, match=r"inside a Compose"):
        shmaug.Loader(x, {"mask": np.zeros((8, 16, 16), np.uint8)}, augment=Op("hflip"),
                      workers=0)
    with pytest.raises(shmaug.ArgumentError,  # (it named bounding_box_format for keypoints)
                       match=r"inside a Compose.*Compose\(\[\.\.\.\], keypoint_format=\.\.\.\)"):
        shmaug.Loader(x, {"keypoints": np.zeros((8, 3, 2), np.float32) + 5},
                      augment=Maybe(Op("hflip")), workers=0)


@pytest.mark.parametrize("fixed", [(16, 16), None])
def test_targets_outside_a_sources_fixed_size_are_refused(tmp_path, fixed) -> None:
    """Keypoints or boxes in the photos' pixels beside files stretched to image_size came
    back as -1 rows (outside), or in the wrong place: refused as beside an array of that
    size. At each photo's own size (image_size=None) they cannot be told before reading."""
    from PIL import Image

    for i in range(8):
        Image.fromarray(np.zeros((40, 30), np.uint8)).save(tmp_path / f"{i}.png")
    files = shmaug.ImageFiles.from_paths([tmp_path / f"{i}.png" for i in range(8)],
                                         image_size=fixed, color_mode="grayscale")
    points = np.tile(np.array([[25.0, 30.0]], np.float32), (8, 1, 1))  # a 30x40 photo's
    augment = Compose([Op("hflip")], keypoint_format="xy")
    if fixed is None:
        with shmaug.Loader(files, {"keypoints": points}, augment=augment, workers=0,
                           output_shape=(40, 30, 1)) as loader:
            assert loader.batch(0)[1]["keypoints"][0, 0].tolist() == [5.0, 30.0]
        return
    with pytest.raises(shmaug.ArgumentError,
                       match=r"`y\['keypoints'\]` holds a keypoint \[25.0, 30.0\] \(xy\) "
                             r"outside its 16x16 image"):
        shmaug.Loader(files, {"keypoints": points}, augment=augment, workers=0)


_FRAMES = np.random.default_rng(0).integers(0, 255, (8, 64, 64, 3), dtype=np.uint8)


def _tile(i):
    return _FRAMES[int(i), :32, :32]


def test_targets_beside_a_load_are_read_against_what_it_makes_not_x() -> None:
    """``x`` is only what a ``load`` indexes (indices, bigger frames): its shape was taken for
    the images', so masks were refused and keypoints crashed with a bare ValueError."""
    augment = Compose([Op("hflip")], keypoint_format="xy")
    for x in (np.arange(8), _FRAMES):
        for y in ({"segmentation_masks": np.zeros((8, 32, 32), np.uint8)},
                  {"keypoints": np.tile(np.array([[30.0, 20.0]], np.float32), (8, 1, 1))}):
            with shmaug.Loader(x, y, batch_size=4, augment=augment, load=_tile,
                               workers=0) as loader:
                assert loader.batch(0)[0].shape == (4, 32, 32, 3)


@pytest.mark.parametrize("y, fmt, match", [
    (KERAS_Y, None, r"no `bounding_box_format`.*bounding_box_format='xyxy'"),
    (KERAS_Y, "center_xywh", r"`y\['bounding_boxes'\]\['boxes'\]` holds a box .* outside its "
                             r"16x16 image"),
    ({"bounding_boxes": {"boxes": BOXES[:, :, [2, 1, 0, 3]], "labels": LABELS}}, "xyxy",
     r"end lies before its start.*another format"),
    ({"bounding_boxes": {"boxes": np.where(BOXES >= 0, BOXES / 16, -1), "labels": LABELS}},
     "xyxy",
     r"all within \[0, 1\].*rel_xyxy"),
    ({"bounding_boxes": {"boxes": BOXES, "labels": LABELS[:, :1]}}, "xyxy",
     r"`y\['bounding_boxes'\]\['labels'\]` must hold one label per box"),
    ({"segmentation_masks": np.zeros((8, 12, 16, 1), np.uint8)}, "xyxy",
     r"`y\['segmentation_masks'\]` has masks of \(12, 16\) pixels, but its images are "
     r"\(16, 16\)"),
    ({"mask": np.zeros((8, 1, 16, 16), np.float32)}, "xyxy",  # a depth map from torch
     r"has masks of \(1, 16\) pixels.*channels first \(N, C, H, W\).*np\.moveaxis"),
    ({"segmentation_masks": np.zeros((8, 32, 32, 3), np.float32)}, "xyxy",  # 2x: a pair
     r"has masks of \(32, 32\) pixels.*super-resolution pair\) is no mask"),
    ({"keypoints": np.zeros((8, 3, 2), np.float32)}, "xyxy", r"no `keypoint_format`"),
    ({"bboxes": np.zeros((8, 2), np.float32)}, "xyxy", r"\(samples, max_boxes, 4\)"),
    ({"bounding_boxes": {"boxes": BOXES[:, 0], "labels": LABELS[:, 0]}}, "xyxy",
     r"`y\['bounding_boxes'\]\['boxes'\]` must hold \(samples, max_boxes, 4\).*received "
     r"shape \(8, 4\)"),  # one box per image unpadded: the boxes are named, not the labels
    ({"bounding_boxes": {"boxes": BOXES, "labels": np.where(LABELS >= 0, "cat", "")}}, "xyxy",
     r"`y\['bounding_boxes'\]\['labels'\]` must hold numeric labels.*dtype <U3.*map the "
     r"class names to ids"),
])
def test_targets_read_wrong_are_refused_before_anything_starts(y, fmt, match) -> None:
    augment = Compose([Op("hflip")], bounding_box_format=fmt)
    with pytest.raises(shmaug.ArgumentError, match=match):
        shmaug.Loader(x, y, augment=augment, workers=0)


def _object_array(parts: list) -> np.ndarray:
    out = np.empty(len(parts), object)
    out[:] = parts
    return out


@pytest.mark.parametrize("kind", ["list", "object array", "tf.RaggedTensor"])
def test_ragged_boxes_are_padded_per_dataset(kind) -> None:
    """An object array of per-image arrays, or KerasCV's RaggedTensor, were refused as "an
    object array" (the fix told, np.asarray, cannot pad them) and as "a scalar"."""
    boxes = [np.array([[1, 1, 5, 5]] * (i % 3), np.float32).reshape(-1, 4) for i in range(8)]
    labels = [np.arange(i % 3) for i in range(8)]
    if kind == "object array":
        boxes, labels = _object_array(boxes), _object_array(labels)
    elif kind == "tf.RaggedTensor":
        tf = pytest.importorskip("tensorflow")
        boxes = tf.ragged.constant([b.tolist() for b in boxes], ragged_rank=1, inner_shape=(4,))
        labels = tf.ragged.constant([v.tolist() for v in labels])
    augment = Compose([Op("vflip")], bounding_box_format="xyxy")
    named = "classes" if kind == "tf.RaggedTensor" else "labels"  # (KerasCV's name)
    with shmaug.Loader(x, {"bounding_boxes": {"boxes": boxes, named: labels}},
                       batch_size=8, augment=augment, workers=0) as loader:
        y = loader.batch(0)[1]["bounding_boxes"]
    assert y["boxes"].shape == (8, 2, 4) and y[named].tolist()[2] == [0, 1]
    np.testing.assert_array_equal(y["boxes"][2, 1], [1, 11, 5, 15])
    assert (y["boxes"][0] == -1).all()


def test_a_mix_refuses_targets_on_the_image_and_says_why() -> None:
    y = {"labels": np.arange(8) % 2, "segmentation_masks": KERAS_Y["segmentation_masks"]}
    with pytest.raises(shmaug.ArgumentError, match=r"cannot be mixed so \(MixUp's blend"):
        shmaug.Loader(x, y, augment=Compose([Op("gamma")]), workers=0,
                      mix=shmaug.ops.MixUp(0.2, num_classes=2))


def test_an_albumentations_pipeline_inside_a_container_with_a_mask_is_refused() -> None:
    """Only a whole `augment` gets the targets: one inside a Compose would get the image
    alone, and flip it away from its mask."""
    A = pytest.importorskip("albumentations")
    inner = shmaug.from_albumentations(A.Compose([A.HorizontalFlip(p=1.0)]))
    with pytest.raises(shmaug.ArgumentError, match=r"inside a Compose.*as `augment` itself"):
        shmaug.Loader(x, {"mask": np.zeros((8, 16, 16), np.uint8)},
                      augment=Compose([Op("gamma"), inner]), workers=0)


def test_a_mask_fill_its_masks_cannot_hold_is_refused() -> None:
    augment = Compose([Op("rotate")], mask_fill=-1)
    with pytest.raises(shmaug.ArgumentError, match=r"`mask_fill` is -1.0.*uint8.*255"):
        shmaug.Loader(x, {"mask": np.zeros((8, 16, 16), np.uint8)}, augment=augment,
                      workers=0)
    mask = np.zeros((8, 16, 16), np.int16)  # a dtype that holds -1: accepted
    with shmaug.Loader(x, {"mask": mask}, augment=augment, batch_size=8, workers=0) as loader:
        assert (loader.batch(0)[1]["mask"] == -1).any()  # the corners the rotation brings in


def legacy_brighten(image):  # a legacy function: the image alone, no rng
    return image


def test_a_legacy_function_that_moves_no_pixel_says_so_and_keeps_the_targets() -> None:
    still = Compose([Op("hflip"), shmaug.from_array(legacy_brighten, targets="still"),
                     shmaug.from_pil(legacy_brighten, targets="still")])
    mask = np.zeros((8, 16, 16), np.uint8)
    mask[:, :, :4] = 1
    with shmaug.Loader(x, {"mask": mask}, augment=still, batch_size=8, workers=0) as loader:
        assert (loader.batch(0)[1]["mask"][:, :, -4:] == 1).all()  # flipped with the image
    with pytest.raises(shmaug.ArgumentError, match=r"`targets` of from_array.*'warped'"):
        shmaug.from_array(legacy_brighten, targets="warped")
    assert shmaug.from_config(still.to_config(), safe_mode=False) == still


def test_every_sample_without_boxes_is_fine() -> None:
    empty = [np.zeros((0, 4), np.float32)] * 8
    augment = Compose([Op("rotate")], bounding_box_format="xyxy")
    with shmaug.Loader(x, {"bounding_boxes": {"boxes": empty, "labels": [[]] * 8}},
                       augment=augment, batch_size=8, workers=0) as loader:
        y = loader.batch(0)[1]["bounding_boxes"]
    assert y["boxes"].shape == (8, 0, 4) and y["labels"].shape == (8, 0)


def test_a_moved_target_is_put_back_at_its_own_place_in_y_only() -> None:
    """The rows the workers make of a target are put back where it lies in ``y`` (its path),
    not wherever the same array object lies: the box labels also given as plain labels stay
    unmoved there, while the boxes' own (``box_labels`` inside) drop with a box pushed out."""
    boxes = np.full((8, 2, 4), -1.0, np.float32)
    boxes[:, 0] = [0, 0, 4, 4]  # in the corner a centre crop cuts away
    boxes[:, 1] = [6, 6, 10, 10]
    labels = np.tile(np.array([3, 4]), (8, 1))
    y = {"bounding_boxes": {"boxes": boxes, "labels": labels}, "labels": labels}
    augment = Compose([Op("center_crop", height=8, width=8)], bounding_box_format="xyxy")
    with shmaug.Loader(x, y, batch_size=8, augment=augment, workers=0) as loader:
        _, out = loader.batch(0)
    assert out["bounding_boxes"]["labels"].tolist() == [[-1, 4]] * 8
    assert out["labels"].tolist() == [[3, 4]] * 8  # the same array, filed elsewhere: as given


class CentreCrop:
    """ops.md's protocol: an object that moves its own targets (``target_names`` and
    ``augment_targets``). It was refused as a function that says nothing of its targets."""

    target_names = frozenset({"mask"})

    def __call__(self, image, rng):
        return image[4:12, 4:12].copy()

    def augment_targets(self, image, targets, rng):
        return self(image, rng), {"mask": targets["mask"][4:12, 4:12].copy()}


def test_an_object_that_moves_its_own_targets_moves_them():
    mask = np.arange(8 * 16 * 16, dtype=np.int32).reshape(8, 16, 16)
    with shmaug.Loader(x, {"mask": mask}, batch_size=8, augment=CentreCrop(),
                       workers=0) as loader:
        xb, yb = loader.batch(0)
    assert xb.shape == (8, 8, 8)
    np.testing.assert_array_equal(yb["mask"], mask[:, 4:12, 4:12])


class DropsTheFirstBox:
    """Moves boxes itself and names their labels as y files them (keras-hub's layout)."""

    target_names = frozenset({"boxes", "labels"})

    def __call__(self, image, rng):
        return image

    def augment_targets(self, image, targets, rng):
        boxes, labels = targets["boxes"].copy(), targets["labels"].copy()
        boxes[0], labels[0] = -1, -1
        return image, {"boxes": boxes, "labels": labels}


@pytest.mark.parametrize("nested", [False, True])
def test_an_object_that_moves_boxes_gets_the_labels_it_names(nested):
    """It got the boxes alone, so a box it dropped kept its class label."""
    boxes = np.tile(np.array([[1.0, 1.0, 5.0, 5.0], [6.0, 6.0, 9.0, 9.0]], np.float32), (8, 1, 1))
    labels = np.tile(np.array([3, 4]), (8, 1))
    y = {"boxes": boxes, "labels": labels}
    with shmaug.Loader(x, {"bounding_boxes": y} if nested else y, batch_size=8, workers=0,
                       augment=DropsTheFirstBox()) as loader:
        yb = loader.batch(0)[1]
    yb = yb["bounding_boxes"] if nested else yb
    assert yb["labels"].tolist() == [[-1, 4]] * 8 and (yb["boxes"][:, 0] == -1).all()


def test_an_object_moving_its_own_targets_is_refused_for_others_and_inside_a_compose():
    y = {"mask": np.zeros((8, 16, 16), np.uint8), "keypoints": np.zeros((8, 1, 2))}
    with pytest.raises(shmaug.ArgumentError, match=r"\['keypoints'\].*target_names \['mask'\]"):
        shmaug.Loader(x, y, batch_size=8, augment=CentreCrop(), workers=0)
    with pytest.raises(shmaug.ArgumentError, match=r"moves targets itself.*inside a Compose"):
        shmaug.Loader(x, {"mask": y["mask"]}, batch_size=8, workers=0,
                      augment=Compose([Op("hflip"), CentreCrop()]))


class StillWithTargets(CentreCrop):
    """Written for both protocols and declared still: inside a Compose it moves nothing."""

    targets = "still"

    def __call__(self, image, rng):
        return image


def test_a_still_member_with_augment_targets_passes_inside_a_compose():
    mask = np.zeros((8, 16, 16), np.uint8)
    mask[:, :, :4] = 1
    with shmaug.Loader(x, {"mask": mask}, batch_size=8, workers=0, augment=Compose(
            [Op("hflip"), StillWithTargets()])) as loader:
        assert (loader.batch(0)[1]["mask"][:, :, -4:] == 1).all()  # flipped with its image


def test_boxes_or_keypoints_under_a_name_of_ones_own_without_a_format_are_warned_of():
    """A multi-task y with its plate corners and boxes under names of its own, the pipeline
    given no format: the images were flipped and the targets handed back where they were,
    without a word (a mask under a name of its own is refused)."""
    corners = np.tile(np.float32([[3, 4], [12, 4]]), (8, 1, 1))  # (N, K, 2) in pixels
    with pytest.warns(shmaug.ShmaugWarning, match=r"`y\['plate_corners'\]` \(8, 2, 2\) looks "
                                                  r"like keypoints in pixels.*keypoint_format"):
        shmaug.Loader(x, {"class": np.arange(8), "plate_corners": corners},
                      augment=Compose([Op("hflip")]), workers=0).close()
    with warnings.catch_warnings():  # colour alone moves nothing: nothing to say
        warnings.simplefilter("error")
        shmaug.Loader(x, {"plate_corners": corners}, augment=Compose([Op("gamma")]),
                      workers=0).close()
        shmaug.Loader(x, {"probs": np.full((8, 3, 4), 0.5, np.float32)},  # fractions
                      augment=Compose([Op("hflip")]), workers=0).close()
        rng = np.random.default_rng(0)
        for other in (rng.normal(0, 300, (8, 3, 4)),  # camera matrices, trajectories,
                      rng.normal(0, 5, (8, 20, 3)), np.full((8, 24, 4), 40.0)):  # a series
            shmaug.Loader(x, {"other": other.astype(np.float32)},
                          augment=Compose([Op("hflip")]), workers=0).close()


def test_an_images_own_classes_beside_boxes_and_their_labels_stay_its_own():
    """A multi-task y of {"classes": one per image, "boxes", "labels"}: "classes" (KerasCV's
    name for box labels) was taken for the boxes' labels, and the error named y['labels']."""
    classes = np.arange(8)
    y = {"classes": classes, "boxes": BOXES, "labels": LABELS}
    with shmaug.Loader(x, y, batch_size=4, workers=0, augment=Compose(
            [Op("hflip")], bounding_box_format="xyxy")) as loader:
        yb = loader.batch(0)[1]
    assert yb["classes"].tolist() == [0, 1, 2, 3] and yb["labels"].shape == (4, 2)
    np.testing.assert_array_equal(yb["boxes"][:, 0], [[16 - 9, 3, 16 - 2, 12]] * 4)
    kerascv = {"classes": LABELS, "boxes": BOXES, "labels": classes}  # the other way round
    with shmaug.Loader(x, kerascv, batch_size=4, workers=0, augment=Compose(
            [Op("hflip")], bounding_box_format="xyxy")) as loader:
        yb = loader.batch(0)[1]
    assert yb["labels"].tolist() == [0, 1, 2, 3] and yb["classes"].shape == (4, 2)
