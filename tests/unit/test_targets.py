"""Masks, boxes and keypoints move with their image through every op that moves pixels.

The contract, per op that moves pixels (``targets="warped"``, the policies' geometric steps
included): an image whose only content is a white rectangle, moved with its mask, its box and
its corners as keypoints, gives a mask that is the moved image's white (nearest against
linear sampling: they differ on the edge alone), a box that is the white's box, and corners
on it. Every built-in op says what it does to targets; colour ops leave them as they are.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
import pytest

from shmaug.errors import ArgumentError
from shmaug.ops import Compose, Op, aside, available, register
from shmaug.deferred import Undecoded
from shmaug.resample import resize_box
from shmaug.ops.builtin.geometric import crop, hflip, resize, rotate
from shmaug.ops.builtin.windows import random_resized_crop
from shmaug.ops.core import BLENDED, STILL, TARGET_KINDS, WARPED, get
from shmaug.ops.targets import formats
from shmaug.ops.targets.moves import (OUTLINE_STEP, FieldMove, MatrixMove,
                                      boxes as moved_boxes, noting)
from shmaug.ops.targets.sample import TargetOptions, move

H, W = 60, 80
BOX = (20.0, 15.0, 44.0, 33.0)  # x0, y0, x1, y1: pixel edges
WARPED_OPS = {
    "sine_warp": {}, "rotate": {"degrees": (25, 25)}, "shear": {"x": 0.3}, "scale_translate": {},
    "translate": {}, "perspective": {}, "elastic": {"alpha": 3.0, "sigma": 5.0},
    "hflip": {}, "vflip": {}, "rot90": {}, "resize": {"height": 45, "width": 100},
    "crop": {"height": 50, "width": 70}, "resized_crop": {},
    "random_resized_crop": {"height": 60, "width": 80, "scale": (0.3, 1.0)},
    "center_resized_crop": {"height": 60, "width": 80}, "zoom": {"height_factor": 0.3},
    "zoom_out": {"side_range": (1.2, 1.5)}, "center_crop": {"height": 50, "width": 70},
    "translation": {}, "rand_augment": {"num_ops": 3}, "trivial_augment_wide": {},
    "auto_augment": {}, "rand_augment_keras": {}}
POLICIES = {"rand_augment", "trivial_augment_wide", "auto_augment", "rand_augment_keras"}
_GEOMETRIC_STEPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "random_shear",
                    "random_translation", "random_rotation"}


@pytest.fixture
def policy_warps_only(monkeypatch):
    """The policies' colour steps made no-ops, so the white rectangle stays white: what is
    tested of a policy is that its geometric steps move the targets."""
    from shmaug.ops.policies import _space

    for name in ("apply", "keras_rand_augment"):
        real = getattr(_space, name)

        def step(image, rng, op, *args, _real=real):
            return _real(image, rng, op, *args) if op in _GEOMETRIC_STEPS else image

        monkeypatch.setattr(_space, name, step)


def scene() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    image = np.zeros((H, W), np.uint8)
    x0, y0, x1, y1 = (int(v) for v in BOX)
    image[y0:y1, x0:x1] = 255
    mask = (image > 0).astype(np.uint8)
    boxes = np.array([BOX, [-1, -1, -1, -1]], np.float32)
    corners = np.array([[x0 + 0.5, y0 + 0.5], [x1 - 0.5, y1 - 0.5], [-1, -1]], np.float32)
    return image, {"mask": mask, "boxes": boxes, "box_labels": np.array([3, -1]),
                   "keypoints": corners}


def test_every_builtin_op_says_what_it_does_to_targets() -> None:
    builtin = [n for n in available() if get(n).fn.__module__.startswith("shmaug.")]
    kinds = {n: get(n).targets for n in builtin}
    assert set(kinds.values()) <= set(TARGET_KINDS), kinds
    assert {n for n, k in kinds.items() if k == WARPED} == set(WARPED_OPS) - {"rand_augment_keras"}
    assert {n for n, k in kinds.items() if k == BLENDED} == {"aug_mix"}


@register("test_retried_crop", uses_global_rng=False, targets="warped")
def _retried_crop(image: np.ndarray, rng: np.random.Generator, tries: int = 4,
                  copies: bool = False) -> np.ndarray:
    """A crop drawn again until it keeps enough of the bright (a crop avoiding nodata, a
    bbox-safe crop; each try on a copy where ``copies``), resized back, else the image given
    up on as it came (SSD's sampler), then a flip of the copy kept after a colour step."""
    for _ in range(tries):
        window = resize(crop(image.copy() if copies else image, rng, 32, 32), rng, height=64,
                        width=64)
        if window.mean() > 140:
            return hflip(window.copy() if rng.random() < 0.5 else window, rng)
    return image


@register("test_helper_moved", uses_global_rng=False, targets="warped")
def _helper_moved(image: np.ndarray, rng: np.random.Generator, aside_: bool = False
                  ) -> np.ndarray:
    """A rotation, and the same rotation of a map of where the image was (to paint the
    corners it left empty): a helper's move, not the image's, of the same size where
    ``aside_`` (then said so), else one channel of it."""
    angle = float(rng.uniform(-30, 30))
    out = rotate(image, rng, degrees=angle, interpolation="nearest").copy()
    shape = image.shape if aside_ else image.shape[:2]
    with aside() if aside_ else contextlib.nullcontext():
        valid = rotate(np.full(shape, 255, np.uint8), rng, degrees=angle,
                       interpolation="nearest")
    out[valid.reshape(*valid.shape[:2], -1)[:, :, 0] == 0] = 60
    return out


@register("test_best_of_two", uses_global_rng=False, targets="warped")
def _best_of_two(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    first, second = crop(image, rng, 32, 32), crop(image, rng, 32, 32)
    return first if first.mean() >= second.mean() else second


@register("test_written_back", uses_global_rng=False, targets="warped")
def _written_back(image: np.ndarray, rng: np.random.Generator, copy: bool = True
                  ) -> np.ndarray:
    """Moves written back into a working copy (a worker's image is read-only), or into the
    image given."""
    work = image.copy() if copy else image
    work[...] = rotate(work, rng, degrees=(90, 90), interpolation="nearest")
    work[:4, :, 1] = 0  # painted in place between the moves (channel 0, the mask's, kept)
    work[...] = hflip(work, rng)
    return work


@pytest.mark.parametrize("op", [Op("test_retried_crop"), Op("test_retried_crop", copies=True),
                                Op("test_helper_moved"), Op("test_helper_moved", aside_=True),
                                Op("test_best_of_two"), Op("test_written_back"),
                                Compose([Op("vflip"), Op("test_written_back", copy=False),
                                         Op("hflip")])])
def test_targets_follow_only_the_moves_an_op_kept(op: Op) -> None:
    # Every try's move was taken for the image's: a try given up (its image returned as it
    # came), a try on a copy, a helper array moved beside the image (a validity map), the
    # first of two kept; a move written back into the image was dropped.
    image = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    image[:28, :28] = 230  # (a crop keeps enough where it holds most of this)
    pipe = Compose([op])
    for seed in range(20):  # (12 try more than once, 3 give up)
        out, moved = pipe.augment_targets(image, {"mask": image[:, :, :1].copy()},
                                          np.random.default_rng(seed))
        kept = out[:, :, 0] != 60 if getattr(op, "name", "") == "test_helper_moved" else \
            slice(None)
        np.testing.assert_array_equal(moved["mask"][:, :, 0][kept], out[:, :, 0][kept])


class _Photo(Undecoded):
    """A photo not decoded yet, as ImageFiles(image_size=None) hands one over."""

    __slots__ = ("pixels",)

    def __init__(self, pixels: np.ndarray) -> None:
        self.pixels = pixels

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.pixels.shape)

    def decode(self) -> np.ndarray:
        return self.pixels.copy()

    def resized_window(self, window: Any, size: tuple[int, int], how: Any) -> np.ndarray:
        return resize_box(self.pixels, window, size, how)


@register("test_crop_or_whole", uses_global_rng=False, targets="warped", takes_undecoded=True,
          sized_by=("height", "width"))
def _crop_or_whole(image: Any, rng: np.random.Generator, height: int = 32, width: int = 32
                   ) -> np.ndarray:
    """Crops of a photo at decode time until one keeps the bright, else the whole photo."""
    for _ in range(3):
        out = random_resized_crop(image, rng, height, width, scale=(0.05, 0.1),
                                  interpolation="nearest")
        if out[..., 2].mean() > 200:
            return out
    return resize(image.decode(), rng, height=height, width=width, interpolation="nearest")


def test_targets_follow_a_photo_given_up_on_at_decode_time() -> None:
    # Its decode, resized, was taken for a helper's: the last crop tried moved the targets.
    pixels = np.zeros((96, 128, 3), np.uint8)
    pixels[..., 0] = np.random.default_rng(0).integers(0, 256, pixels.shape[:2])
    pixels[40:50, 60:70, 2] = 255
    pipe = Compose([Op("test_crop_or_whole")])
    for seed in range(10):
        out, moved = pipe.augment_targets(_Photo(pixels), {"mask": pixels[..., :1].copy()},
                                          np.random.default_rng(seed))
        np.testing.assert_array_equal(moved["mask"][..., 0], out[..., 0])


@pytest.mark.parametrize("name", sorted(WARPED_OPS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_targets_move_with_their_image(name: str, seed: int, request) -> None:
    if name in POLICIES:
        request.getfixturevalue("policy_warps_only")
    op = Op("rand_augment", factor=(0.5, 0.9)) if name == "rand_augment_keras" else \
        Op(name, **WARPED_OPS[name])
    _moves_with_its_image(op, seed, name)


@pytest.mark.parametrize("aspect", ["crop_to_aspect_ratio", "pad_to_aspect_ratio"])
@pytest.mark.parametrize("position", ["center", "top_left", "random"])
@pytest.mark.parametrize("size", [(45, 100), (100, 45)])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_resize_keeping_the_aspect_moves_its_targets(aspect, position, size, seed) -> None:
    op = Op("resize", height=size[0], width=size[1], position=position, **{aspect: True})
    _moves_with_its_image(op, seed, f"resize {aspect} {position}")


@pytest.mark.parametrize("border", ["constant", "replicate"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_padded_crop_moves_its_targets(border, seed) -> None:
    # (the rectangle lies 15 pixels or more from every edge: a replicated border adds none)
    op = Op("crop", height=H, width=W, padding=12, border=border)
    _moves_with_its_image(op, seed, f"crop padding=12 border={border}")


@pytest.mark.parametrize("border", ["reflect", "replicate", "wrap"])
def test_a_padded_crops_mask_takes_the_images_border(border) -> None:
    """An object on the edge reflected into the padding was background in the mask."""
    image = np.zeros((16, 16), np.uint8)
    image[:5, :6] = 255  # (on the corner)
    pipe = Compose([Op("crop", height=16, width=16, padding=4, border=border)])
    for seed in range(20):
        out, moved = pipe.augment_targets(image, {"segmentation_masks": image // 255},
                                          np.random.default_rng(seed))
        np.testing.assert_array_equal(moved["segmentation_masks"], out // 255)


def _moves_with_its_image(op: Op, seed: int, name: str) -> None:
    image, targets = scene()
    pipe = Compose([op], bounding_box_format="xyxy", keypoint_format="xy")
    out, moved = pipe.augment_targets(image, targets, np.random.default_rng(seed))
    again = pipe(image, np.random.default_rng(seed))
    np.testing.assert_array_equal(out, again)  # the same draws, targets or not
    white = out > 127
    mask = moved["mask"].astype(bool)
    assert mask.shape == white.shape
    # nearest and linear sampling part on the rectangle's edge only
    assert (mask ^ white).sum() <= 0.5 * (mask.sum() + white.sum()) ** 0.5 * 6 + 8, name
    rows = moved["boxes"]
    assert (rows[1] == -1).all() and moved["box_labels"][1] == -1  # padding stays padding
    if not white.any():
        assert (rows[0] == -1).all() and moved["box_labels"][0] == -1
        return
    ys, xs = np.nonzero(_object(white, rows[0]))  # (a reflecting border copies it around)
    assert moved["box_labels"][0] == 3
    np.testing.assert_allclose(rows[0], [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1],
                               atol=2.5, err_msg=name)
    for x, y in moved["keypoints"][:2]:
        if x >= 0:  # a corner still on the image lies on the moved white
            near = white[max(0, int(y) - 2):int(y) + 3, max(0, int(x) - 2):int(x) + 3]
            assert near.any(), (name, x, y)
    assert (moved["keypoints"][2] == -1).all()


def _object(white: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The part of ``white`` that overlaps ``box`` most: the object, not its reflections."""
    import cv2

    count, parts = cv2.connectedComponents(white.astype(np.uint8))
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    inside = np.bincount(parts[max(y0, 0):y1, max(x0, 0):x1].ravel(), minlength=count)
    inside[0] = 0
    return parts == int(np.argmax(inside))


def test_colour_noise_blur_and_erasing_leave_targets_as_they_are() -> None:
    image, targets = scene()
    still = [Op(n) for n in available() if get(n).targets == STILL]
    assert len(still) >= 20
    pipe = Compose(still, bounding_box_format="xyxy", keypoint_format="xy")
    _, moved = pipe.augment_targets(np.dstack([image] * 3), targets, np.random.default_rng(0))
    for name, rows in targets.items():
        np.testing.assert_array_equal(moved[name], rows)


@pytest.mark.parametrize("fmt", formats.BOX_FORMATS)
def test_every_box_format_round_trips_through_pixels(fmt: str) -> None:
    rng = np.random.default_rng(0)
    xyxy = np.sort(rng.uniform(0, 1, (5, 2, 2)), axis=1).transpose(0, 2, 1).reshape(5, 4)
    xyxy = xyxy[:, [0, 2, 1, 3]] * [W, H, W, H]
    written = formats.from_xyxy(xyxy, fmt, H, W)
    np.testing.assert_allclose(formats.to_xyxy(written, fmt, H, W), xyxy, atol=1e-9)
    if fmt.startswith("rel_"):
        assert written.max() <= 1.0


@pytest.mark.parametrize("given, keras", [("pascal_voc", "xyxy"), ("XYXY", "xyxy"),
                                          ("coco", "xywh"), ("yolo", "rel_center_xywh"),
                                          ("CXCYWH", "center_xywh")])
def test_another_librarys_name_of_a_format_is_told_keras_name(given, keras) -> None:
    with pytest.raises(ArgumentError, match=rf"received {given!r}\. Fix: pass "
                                            rf"bounding_box_format={keras!r}, Keras' name"):
        Compose([Op("hflip")], bounding_box_format=given)


def test_keras_formats_mean_what_keras_says() -> None:
    box = np.array([[10.0, 20.0, 30.0, 60.0]])  # x0, y0, x1, y1
    expect = {"xyxy": [10, 20, 30, 60], "yxyx": [20, 10, 60, 30], "xywh": [10, 20, 20, 40],
              "center_xywh": [20, 40, 20, 40], "center_yxhw": [40, 20, 40, 20],
              "rel_xyxy": [0.125, 1 / 3, 0.375, 1.0], "rel_yxyx": [1 / 3, 0.125, 1.0, 0.375],
              "rel_xywh": [0.125, 1 / 3, 0.25, 2 / 3], "rel_center_xywh": [0.25, 2 / 3, 0.25, 2 / 3]}
    for fmt, values in expect.items():
        np.testing.assert_allclose(formats.from_xyxy(box, fmt, 60, 80)[0], values, err_msg=fmt)


def test_a_box_pushed_out_is_dropped_with_its_label_and_visibility_thresholds_apply() -> None:
    image, targets = scene()
    out_right = Compose([Op("translate", x=0.9, y=0.0)], bounding_box_format="xyxy",
                        keypoint_format="xy")
    _, moved = out_right.augment_targets(image, targets, np.random.default_rng(0))
    assert (moved["boxes"][0] == -1).all() and moved["box_labels"][0] == -1
    half = Op("translate", x=(44 - 0.5 * 24 - 20) / W + (W - 44) / W, y=0.0)  # half outside
    for visibility, kept in ((0.4, True), (0.6, False)):
        pipe = Compose([half], bounding_box_format="xyxy", keypoint_format="xy",
                       min_visibility=visibility)
        _, moved = pipe.augment_targets(image, targets, np.random.default_rng(0))
        assert bool(moved["box_labels"][0] == 3) is kept, visibility
    pipe = Compose([half], bounding_box_format="xyxy", keypoint_format="xy",
                   min_area=12 * 18 + 1)
    _, moved = pipe.augment_targets(image, targets, np.random.default_rng(0))
    assert moved["box_labels"][0] == -1  # 12 x 18 pixels left, fewer than asked


@pytest.mark.parametrize("op", [Op("hflip"), Op("rotate", degrees=(10, 10)),
                                Op("shear", x=(0.2, 0.2)), Op("gamma")],
                         ids=["hflip", "rotate", "shear", "gamma"])
def test_a_box_given_with_no_area_is_dropped_by_every_op(op) -> None:
    """A line box (no width) was dropped by a flip, but a rotation made a 2.8 x 15.8 pixel
    box of it, its label kept: an object that is not there."""
    image = np.zeros((32, 32, 3), np.uint8)
    boxes = np.array([[4, 4, 4, 20], [10, 10, 10, 10], [10, 10, 20, 20]], np.float32)
    pipe = Compose([op], bounding_box_format="xyxy")
    _, moved = pipe.augment_targets(image, {"boxes": boxes, "box_labels": np.array([1, 2, 3])},
                                    np.random.default_rng(0))
    assert moved["box_labels"].tolist() == [-1, -1, 3]
    assert (moved["boxes"][:2] == -1).all()


def test_a_keypoint_that_leaves_the_image_is_marked_gone_and_keeps_its_index() -> None:
    image, targets = scene()
    points = np.array([[1.0, 1.0, 2.0], [70.0, 50.0, 1.0]], np.float32)  # x, y, visibility
    pipe = Compose([Op("translate", x=-0.1, y=0.0)], keypoint_format="xy")
    _, moved = pipe.augment_targets(image, {"keypoints": points}, np.random.default_rng(0))
    assert (moved["keypoints"][0] == -1).all()
    np.testing.assert_allclose(moved["keypoints"][1], [62.0, 50.0, 1.0])


def test_a_keypoint_on_the_images_far_edge_stays_through_a_flip_and_back() -> None:
    image, _ = scene()
    points = np.array([[0.0, 10.0], [W, H], [W / 2, H]], np.float32)  # on the edges
    pipe = Compose([Op("hflip"), Op("crop", height=1.0, width=1.0), Op("hflip")],
                   keypoint_format="xy")
    _, moved = pipe.augment_targets(image, {"keypoints": points}, np.random.default_rng(0))
    np.testing.assert_allclose(moved["keypoints"], points)


def test_visibility_is_the_share_left_after_every_move_together() -> None:
    image, targets = scene()  # the box spans x 20..44, 24 pixels
    boxes = targets["boxes"][:1]
    first = Op("translate", x=45 / W, y=0.0)  # 15 of 24 pixels left: 62.5%
    second = Op("translate", x=6 / W, y=0.0)  # 9 of those 15: 60%, 37.5% of the box
    for visibility, kept in ((0.3, True), (0.5, False)):
        pipe = Compose([first, second], bounding_box_format="xyxy",
                       min_visibility=visibility)
        _, moved = pipe.augment_targets(image, {"boxes": boxes}, np.random.default_rng(0))
        assert bool((moved["boxes"][0] >= 0).all()) is kept, (visibility, moved["boxes"])


@pytest.mark.parametrize("a, e", [(1.5, 0.5), (-1.0, 1.0), (1.0, -2.0), (-0.7, -1.3)])
def test_an_axis_aligned_move_takes_each_box_where_its_corners_go(a: float, e: float) -> None:
    m = MatrixMove(np.array([[a, 0.0, 7.25], [0.0, e, -3.5], [0.0, 0.0, 1.0]]), (H, W))
    box = np.array([BOX, (0.0, 0.0, 1.0, 2.0)])
    corners = m.points(box[:, [0, 1, 2, 1, 2, 3, 0, 3]].reshape(-1, 2)).reshape(-1, 4, 2)
    np.testing.assert_allclose(moved_boxes(m, box), np.c_[corners.min(1), corners.max(1)])


@pytest.mark.parametrize("border", ["constant", "reflect", "replicate", "wrap"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.int64])
def test_an_axis_aligned_moves_mask_takes_the_nearest_pixel_as_opencvs_warp(
        border: str, dtype: type) -> None:
    """Zooms and translations gather their masks' rows and columns: the pixel nearest where
    each output pixel comes from, the border's rule outside. OpenCV's warp maps in 1/1024
    of a pixel, so the two may part on a line that comes from within that of a tie."""
    import cv2

    from shmaug.ops.params import BORDERS

    rng = np.random.default_rng(len(border) + np.dtype(dtype).itemsize)
    for _ in range(12):
        (h, w), (ho, wo) = rng.integers(1, 90, 2), rng.integers(1, 90, 2)
        a, e = rng.uniform(0.3, 3.0, 2) * rng.choice([-1.0, 1.0], 2)
        c, f = rng.uniform(-40, 40, 2)
        mask = rng.integers(0, 250, (h, w)).astype(dtype)
        move = MatrixMove(np.array([[a, 0, c], [0, e, f], [0, 0, 1.0]]), (int(ho), int(wo)),
                          BORDERS[border])
        got = move.mask(mask, 251.0)
        expect = np.empty_like(got)
        for i in range(ho):  # the reference, pixel by pixel
            for j in range(wo):
                y, x = (math.floor((v - t) / s + 0.5) for v, t, s in ((i, f, e), (j, c, a)))
                y, x = (cv2.borderInterpolate(v, n, BORDERS[border]) for v, n in ((y, h), (x, w)))
                expect[i, j] = 251 if min(x, y) < 0 else mask[y, x]
        np.testing.assert_array_equal(got, expect)
        warped = cv2.warpAffine(mask.astype(np.float32), move.matrix[:2], (int(wo), int(ho)),
                                flags=cv2.INTER_NEAREST, borderMode=BORDERS[border],
                                borderValue=251.0)
        tie = [np.abs((np.arange(n) - t) / s % 1 - 0.5) < 1e-3 for n, t, s in
               ((ho, f, e), (wo, c, a))]
        parted = (warped != got) & ~(tie[0][:, None] | tie[1][None, :])
        assert not parted.any(), (border, h, w, ho, wo, a, e, c, f)


@pytest.mark.parametrize("name", ["scale_translate", "zoom", "translate", "rotate", "shear",
                                  "perspective"])
@pytest.mark.parametrize("border", ["constant", "reflect", "replicate", "wrap"])
def test_a_nearest_warps_mask_is_its_image_pixel_for_pixel(name: str, border: str) -> None:
    """An image warped nearest and its mask (an image-to-image target) take the same pixels,
    ties at half a pixel included: scale_translate's mask was gathered, and whole rows
    parted from the image's where OpenCV's fixed point rounds a tie the other way. (One
    channel of the mask's dtype: OpenCV rounds ties by channel count and dtype, segmentation.md
    says so.)"""
    values = np.arange(48 * 40, dtype=np.float32).reshape(48, 40, 1) / (48 * 40)
    pipe = Compose([Op(name, interpolation="nearest", border=border)])
    for seed in range(30):
        out, moved = pipe.augment_targets(values, {"segmentation_masks": values.copy()},
                                          np.random.default_rng(seed))
        np.testing.assert_array_equal(moved["segmentation_masks"], out)


@pytest.mark.parametrize("aspect", [{}, {"crop_to_aspect_ratio": True},
                                    {"pad_to_aspect_ratio": True},
                                    {"pad_to_aspect_ratio": True, "position": "random"}])
@pytest.mark.parametrize("size", [(224, 224), (96, 40), (13, 7), (146, 85)])
def test_a_resizes_mask_is_its_images_nearest_resize(size, aspect) -> None:
    """The same pixels, ties included: both are OpenCV's exact nearest resize (padded too:
    a tie took the next row where the resize was placed on its canvas)."""
    labels = np.random.default_rng(0).integers(0, 200, (150, 173), np.uint8)
    pipe = Compose([Op("resize", height=size[0], width=size[1], interpolation="nearest",
                       **aspect)])
    for seed in range(3):
        out, moved = pipe.augment_targets(labels, {"mask": labels}, np.random.default_rng(seed))
        np.testing.assert_array_equal(moved["mask"], out)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.bool_])
def test_a_resized_crops_mask_is_its_windows_nearest_resize_mirrored(dtype: type) -> None:
    """A window of whole pixels resized (a resized crop), mirrored or not: OpenCV's exact
    nearest resize of the window, ties included, flipped after, in any dtype and channels."""
    import cv2

    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    for _ in range(40):
        h, w = rng.integers(1, 120, 2)
        y0, x0 = rng.integers(0, [h, w])
        y1, x1 = rng.integers([y0 + 1, x0 + 1], [h + 1, w + 1])
        ho, wo = (int(v) for v in rng.integers(1, 150, 2))
        labels = rng.integers(0, 2 if dtype is np.bool_ else 250, (h, w, 2), np.uint8)
        mirror = rng.choice([-1.0, 1.0], 2)
        a, e = mirror * (wo / (x1 - x0), ho / (y1 - y0))
        c, f = ((wo if a < 0 else 0) - 0.5 - a * (x0 - 0.5),
                (ho if e < 0 else 0) - 0.5 - e * (y0 - 0.5))
        move = MatrixMove(np.array([[a, 0, c], [0, e, f], [0, 0, 1.0]]), (ho, wo))
        expect = cv2.resize(labels[y0:y1, x0:x1], (wo, ho), interpolation=cv2.INTER_NEAREST_EXACT)
        expect = expect[::1 if e > 0 else -1, ::1 if a > 0 else -1]
        for channels in (slice(0, 1), slice(0, 2)):
            got = move.mask(labels[:, :, channels].astype(dtype), 0.0)
            np.testing.assert_array_equal(got, expect[:, :, channels].astype(dtype))


def test_a_fill_outside_the_masks_dtype_is_saturated_as_opencv_does() -> None:
    image, targets = scene()
    for fill, dtype, expect in ((-1, np.uint8, 0), (1.5, np.int16, 2), (300, np.uint8, 255)):
        pipe = Compose([Op("zoom", height_factor=(0.5, 0.5), border="constant")],
                       mask_fill=fill)
        moved = pipe.augment_targets(image, {"mask": targets["mask"].astype(dtype)},
                                     np.random.default_rng(0))[1]["mask"]
        assert moved[0, 0] == expect and moved.dtype == dtype, (fill, dtype, moved[0, 0])


def test_relative_boxes_stay_relative_to_the_image_they_end_on() -> None:
    image, targets = scene()
    rel = formats.from_xyxy(np.array([BOX]), "rel_xyxy", H, W)
    pipe = Compose([Op("resize", height=30, width=160)], bounding_box_format="rel_xyxy")
    _, moved = pipe.augment_targets(image, {"boxes": rel.astype(np.float32)},
                                    np.random.default_rng(0))
    np.testing.assert_allclose(moved["boxes"][0], rel[0], atol=1e-6)


def test_masks_of_any_dtype_and_stacked_masks_move_as_uint8_ones_do() -> None:
    image, targets = scene()
    pipe = Compose([Op("rotate", degrees=(20, 20), border="constant")], mask_fill=7)
    base = pipe.augment_targets(image, {"mask": targets["mask"]}, np.random.default_rng(0))[1]
    for dtype in (np.int32, np.int64, np.float64, np.bool_, np.uint16):
        got = pipe.augment_targets(image, {"mask": targets["mask"].astype(dtype)},
                                   np.random.default_rng(0))[1]["mask"]
        assert got.dtype == dtype
        expect = base["mask"].astype(dtype) if dtype != np.bool_ else base["mask"] > 0
        if dtype == np.bool_:
            expect = np.where(base["mask"] == 7, True, expect)  # fill 7 is True
        np.testing.assert_array_equal(got, expect, err_msg=str(dtype))
    assert (base["mask"] == 7).any()  # the corners the rotation brought in
    stacked = np.stack([targets["mask"], 1 - targets["mask"]])
    got = pipe.augment_targets(image, {"masks": stacked}, np.random.default_rng(0))[1]["masks"]
    np.testing.assert_array_equal(got[0], base["mask"])  # (no boxes: masks of their own)


def test_a_fields_boxes_are_within_its_change_over_a_pixel_of_a_twenty_times_denser_outline():
    rng = np.random.default_rng(0)
    field = rng.standard_normal((2, H, W)).astype(np.float32)
    import cv2

    dx, dy = (cv2.GaussianBlur(f, (0, 0), 4) for f in field)
    k = 3.0 / max(np.abs(dx).max(), np.abs(dy).max())
    m = FieldMove(dx * k, dy * k)
    box = np.array([BOX])
    got = moved_boxes(m, box)[0]
    x0, y0, x1, y1 = BOX
    n = int(20 * max(x1 - x0, y1 - y0) / OUTLINE_STEP)
    xs, ys = np.linspace(x0, x1, n), np.linspace(y0, y1, n)
    dense = np.concatenate([np.c_[xs, np.full(n, y0)], np.c_[xs, np.full(n, y1)],
                            np.c_[np.full(n, x0), ys], np.c_[np.full(n, x1), ys]])
    moved = m.points(dense)
    exact = [*moved.min(0), *moved.max(0)]
    np.testing.assert_allclose(got, exact, atol=0.05)
    # and the points are where the field sends them back from: out + d(out) = in
    back = moved[:5] - 0.5
    i, j = np.clip(np.rint(back[:, 1]).astype(int), 0, H - 1), \
        np.clip(np.rint(back[:, 0]).astype(int), 0, W - 1)
    np.testing.assert_allclose(back + np.c_[m.dx[i, j], m.dy[i, j]], dense[:5] - 0.5, atol=0.3)


def test_moves_are_noted_only_while_noting() -> None:
    image, _ = scene()
    rng = np.random.default_rng(0)
    with noting() as outer:
        flipped = Op("hflip")(image, rng)
        with noting() as inner:
            Op("rotate")(flipped, rng)
        Op("vflip")(flipped, rng)
    assert len(outer) == 2 and len(inner) == 1
    Op("hflip")(image, rng)  # outside: noted nowhere, nothing kept
    assert len(outer) == 2


def test_move_keeps_every_other_target_as_it_is() -> None:
    image, targets = scene()
    other = np.arange(4)
    got = move({**targets, "class": other}, [], image.shape, TargetOptions("xyxy", "xy"))
    assert got["class"] is other
    np.testing.assert_array_equal(got["boxes"], targets["boxes"])


def test_pad_boxes_pads_per_dataset_as_keras_does() -> None:
    boxes, labels = formats.pad_boxes([np.ones((2, 4)), np.zeros((0, 4)), np.ones((1, 4))],
                                      [[1, 2], [], [3]])
    assert boxes.shape == (3, 2, 4) and (boxes[1] == -1).all() and (boxes[2, 1] == -1).all()
    assert labels.tolist() == [[1, 2], [-1, -1], [3, -1]]
    with pytest.raises(Exception, match="max_boxes"):
        formats.pad_boxes([np.ones((3, 4))], max_boxes=2)
    assert math.isclose(float(boxes[0, 0, 0]), 1.0)


def test_pad_boxes_keeps_extra_columns_and_refuses_rows_it_cannot_read() -> None:
    """albumentations-style rows (4 coordinates and a class id) were cut into 4-column
    boxes of mixed-up numbers where their count allowed it, and otherwise met a bare
    numpy reshape error."""
    rows = [np.array([[1, 1, 5, 5, 0], [2, 2, 9, 9, 1], [3, 3, 7, 7, 2], [0, 0, 4, 4, 3]]),
            np.zeros((0, 5))]
    boxes, _ = formats.pad_boxes(rows)
    assert boxes.shape == (2, 4, 5) and (boxes[1] == -1).all()
    np.testing.assert_array_equal(boxes[0], rows[0])
    assert formats.pad_boxes([[1, 2, 3, 4], []])[0].shape == (2, 1, 4)  # one flat box
    assert formats.pad_boxes([np.ones((1, 3, 4)), []])[0].shape == (2, 3, 4)  # a TF batch
    with pytest.raises(ArgumentError, match=r"`boxes` of sample 1 has rows of 4 columns, "
                                            r"the samples before it of 5.*Fix"):
        formats.pad_boxes([rows[0], np.ones((1, 4))])
    with pytest.raises(ArgumentError, match=r"`boxes` of sample 0 must be rows of 4 "
                                            r"coordinates.*shape \(2, 3\).*Fix"):
        formats.pad_boxes([np.ones((2, 3))])


@pytest.mark.parametrize("name", ["rotate", "random_resized_crop", "sine_warp"])
def test_stacked_masks_with_empty_rows_move_as_each_mask_alone(name: str) -> None:
    """A stack's empty masks (padding rows) are not warped: what comes out is what warping
    each alone gives, empty rows included."""
    image, targets = scene()
    stack = np.stack([targets["mask"], np.zeros_like(targets["mask"]), 1 - targets["mask"],
                      np.zeros_like(targets["mask"])])
    pipe = Compose([Op(name, **WARPED_OPS[name])])
    got = pipe.augment_targets(image, {"masks": stack}, np.random.default_rng(3))[1]["masks"]
    alone = [pipe.augment_targets(image, {"mask": m}, np.random.default_rng(3))[1]["mask"]
             for m in stack]
    np.testing.assert_array_equal(got, np.stack(alone))
    assert got.shape[1:] == out_shape(pipe, image) and not got[1].any() and got[2].any()


def out_shape(pipe, image) -> tuple:
    return pipe(image, np.random.default_rng(3)).shape[:2]


def test_a_dropped_box_takes_its_instance_mask_with_it() -> None:
    """With one mask per box row, a box the moves drop (labels -1) leaves an empty mask, as
    torchvision's SanitizeBoundingBoxes drops both; a kept box keeps its moved mask."""
    image, targets = scene()
    stack = np.stack([targets["mask"], np.zeros_like(targets["mask"])])
    pipe = Compose([Op("translation", height_factor=(0.6, 0.6), width_factor=(0.6, 0.6),
                       border="constant")], bounding_box_format="xyxy", min_visibility=0.9)
    given = {"boxes": targets["boxes"], "box_labels": targets["box_labels"], "masks": stack}
    moved = pipe.augment_targets(image, given, np.random.default_rng(0))[1]
    assert (moved["box_labels"] == -1).all() and not moved["masks"].any()
    keep = Compose([Op("hflip")], bounding_box_format="xyxy")
    moved = keep.augment_targets(image, given, np.random.default_rng(0))[1]
    assert moved["box_labels"][0] == 3 and moved["masks"][0].any()
    np.testing.assert_array_equal(moved["masks"][0], targets["mask"][:, ::-1])


@pytest.mark.parametrize("ops, mirrored", [
    ([Op("hflip")], True), ([Op("vflip")], True), ([Op("hflip"), Op("vflip")], False),
    ([Op("rotate", degrees=(180, 180))], False), ([Op("shear", x=0.3), Op("hflip")], True)])
def test_keypoint_flip_indices_swap_left_and_right_where_the_image_is_mirrored(ops, mirrored):
    """A nose and two eyes: after a flip the person's left eye is where the right one went.
    Without the indices row 1 kept the left eye's own point, now on the person's right."""
    image = np.zeros((H, W), np.uint8)
    face = np.array([[40, 20], [30, 30], [50, 30], [-1, -1]], np.float32)  # and a padding row
    plain = Compose(ops, keypoint_format="xy")
    posed = Compose(ops, keypoint_format="xy", keypoint_flip_indices=(0, 2, 1, 3))
    _, moved = plain.augment_targets(image, {"keypoints": face}, np.random.default_rng(0))
    _, swapped = posed.augment_targets(image, {"keypoints": face}, np.random.default_rng(0))
    order = [0, 2, 1, 3] if mirrored else [0, 1, 2, 3]
    np.testing.assert_array_equal(swapped["keypoints"], moved["keypoints"][order])
    assert (swapped["keypoints"][3] == -1).all()
    from shmaug.ops import from_config, to_config
    assert from_config(to_config(posed)) == posed


def test_keypoint_flip_indices_are_checked_against_themselves_and_the_keypoints() -> None:
    import shmaug

    for bad in [(1, 2, 0), (0, 0, 1), "ab", (0, 1.5)]:
        with pytest.raises(ArgumentError, match=r"`keypoint_flip_indices` must say.*Fix"):
            Compose([Op("hflip")], keypoint_flip_indices=bad)
    pose = Compose([Op("hflip")], keypoint_format="xy", keypoint_flip_indices=(0, 2, 1))
    with pytest.raises(ArgumentError, match=r"holds 4 keypoint rows per sample, but "
                                            r"`keypoint_flip_indices` names 3"):
        shmaug.Loader(np.zeros((8, H, W), np.uint8),
                      {"keypoints": np.zeros((8, 4, 2), np.float32)}, augment=pose, workers=0)


def test_a_pose_pipeline_wrapped_in_another_keeps_its_flip_indices() -> None:
    """A ready pose Compose wrapped to add a blur: only the outer Compose moves the targets,
    and its rows went unswapped on every flipped sample."""
    face = np.array([[40, 20], [30, 30], [50, 30]], np.float32)
    pose = Compose([Op("hflip")], keypoint_format="xy", keypoint_flip_indices=(0, 2, 1))
    wrapped = Compose([pose, Op("gaussian_blur")], keypoint_format="xy")
    assert wrapped.keypoint_flip_indices == (0, 2, 1)
    image = np.zeros((H, W), np.uint8)
    _, alone = pose.augment_targets(image, {"keypoints": face}, np.random.default_rng(0))
    _, outer = wrapped.augment_targets(image, {"keypoints": face}, np.random.default_rng(0))
    np.testing.assert_array_equal(outer["keypoints"], alone["keypoints"])
    with pytest.raises(ArgumentError, match=r"\(0, 1, 2\) here but \[\(0, 2, 1\)\] in a Compose "
                                            r"inside.*Fix"):
        Compose([pose], keypoint_format="xy", keypoint_flip_indices=(0, 1, 2))


def test_keypoints_a_loader_would_hand_over_unmoved_or_misread_are_refused() -> None:
    """A pose user's y: the keypoints themselves (a regression head's), flattened, or under
    another name came back unmoved beside flipped images; fractions under keypoint_format='xy'
    moved as pixels; several people per image were told to "pad to one count"."""
    import shmaug

    x = np.zeros((4, 64, 64, 3), np.uint8)
    kp = np.tile(np.array([[10.0, 20.0, 2.0], [50.0, 40.0, 2.0]], np.float32), (4, 1, 1))
    aug = Compose([Op("hflip")], keypoint_format="xy", keypoint_flip_indices=(1, 0))
    for y in (kp, kp.reshape(4, -1), {"kp": kp}):
        with pytest.raises(ArgumentError, match=r"keypoint_format='xy', but `y` holds no array "
                                                r"under 'keypoints'.*y=\{'keypoints': points\}"):
            shmaug.Loader(x, y, batch_size=2, augment=aug, workers=0)
    with pytest.raises(ArgumentError, match=r"all within \[0, 1\].*keypoint_format='rel_xy'"):
        shmaug.Loader(x, {"keypoints": kp / 64}, batch_size=2, augment=aug, workers=0)
    people = np.full((4, 2, 2, 3), -1.0, np.float32)
    with pytest.raises(ArgumentError, match=r"several instances.*reshape\(4, 2 \* 2, 3\)"):
        shmaug.Loader(x, {"keypoints": people}, batch_size=2, augment=aug, workers=0)
    with shmaug.Loader(x, {"keypoints": kp}, batch_size=2, augment=aug, workers=0) as ok:
        assert ok.batch(0)[1]["keypoints"][0].tolist() == [[14, 40, 2], [54, 20, 2]]  # swapped
    shmaug.Loader(x, None, batch_size=2, augment=aug, workers=0).close()  # predict: no y


def test_boxes_a_loader_or_one_sample_would_hand_over_unmoved_are_refused_or_moved() -> None:
    """An ops auditor's boxes: under bounding_box_format, boxes as `y` itself or under another
    name came back unmoved beside flipped images (keypoints were refused), and
    augment_targets on one sample left Keras' bounding_boxes dict where it was."""
    import shmaug

    x = np.zeros((4, 64, 64, 3), np.uint8)
    boxes = np.tile(np.array([[[8.0, 10.0, 40.0, 30.0]]], np.float32), (4, 1, 1))
    labels = np.ones((4, 1), np.int64)
    aug = Compose([Op("hflip")], bounding_box_format="xyxy")
    for y in (boxes, {"bbox": boxes}, {"box": boxes, "label": labels}):
        with pytest.raises(ArgumentError, match=r"bounding_box_format='xyxy', but `y` holds no "
                                                r"array under 'boxes'.*'bounding_boxes': \{"):
            shmaug.Loader(x, y, batch_size=2, augment=aug, workers=0)
    for ids in ({"ids": np.arange(4)}, np.eye(4, dtype=np.float32), np.zeros((4, 5))):
        with shmaug.Loader(x, ids, batch_size=2, augment=aug, workers=0) as ok:
            ok.batch(0)  # class ids, one-hot rows: a detection pipeline shared with another set
    keras_layout = {"bounding_boxes": {"boxes": boxes[0], "labels": labels[0]}}
    _, moved = aug.augment_targets(x[0], keras_layout, np.random.default_rng(0))
    assert moved["bounding_boxes"]["boxes"].tolist() == [[24, 10, 56, 30]]
    assert moved["bounding_boxes"]["labels"].tolist() == [1]
    assert keras_layout["bounding_boxes"]["boxes"].tolist() == [[8, 10, 40, 30]]  # not in place
    with pytest.raises(ArgumentError, match=r"targets \['bbox'\] lie under no name"):
        aug.augment_targets(x[0], {"bbox": boxes[0]}, np.random.default_rng(0))
    _, kept = aug.augment_targets(x[0], {"boxes": boxes[0], "label": 3,
                                         "category_id": np.array([[3]])},
                                  np.random.default_rng(0))  # (what lies on no image: kept)
    assert kept["label"] == 3 and kept["boxes"].tolist() == [[24, 10, 56, 30]]
    assert kept["category_id"].tolist() == [[3]]


def test_one_mask_per_box_takes_nothing_a_border_brings_in() -> None:
    """Instance masks under translation's and zoom's default reflect border took mirrored
    copies of their instance outside its box (19 of 43 instances), and a panoptic pipeline's
    mask_fill=255 put 255 into binary instance masks; a semantic map keeps both, and so do
    masks under that name without boxes (several per image of their own)."""
    image = np.zeros((32, 32), np.uint8)
    square = np.zeros((32, 32), np.uint8)
    square[:8, :8] = 1
    targets = {"boxes": np.array([[0, 0, 8, 8]], np.float32), "masks": square[None],
               "segmentation_masks": square.copy()}
    for border, fill in (("reflect", 0.0), ("constant", 255.0)):
        shift = Compose([Op("translate", x=0.3125, y=0.3125, border=border)],
                        bounding_box_format="xyxy", mask_fill=fill)
        _, moved = shift.augment_targets(image, targets, np.random.default_rng(0))
        np.testing.assert_array_equal(moved["boxes"][0], [10, 10, 18, 18])
        instance = moved["masks"][0]
        assert set(np.unique(instance)) == {0, 1}
        assert instance.sum() == 64 and instance[10:18, 10:18].all()  # its box, and no more
        semantic = moved["segmentation_masks"]
        untied = shift.augment_targets(image, {"masks": square[None]},
                                       np.random.default_rng(0))[1]["masks"][0]
        if border == "reflect":  # the map reflects with its image, as before
            assert semantic[:10, :10].any() and untied[:10, :10].any()
        else:
            assert (semantic[:10, :] == 255).all() and (untied[:10, :] == 255).all()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_rot90_turns_the_image_its_mask_boxes_and_points_as_np_rot90_and_albumentations(k):
    """Fourth review: pathology's and satellite tiles' dihedral turns had no op (a OneOf of
    four rotate warps resampled each). Exact, with every target, as albumentations'
    RandomRotate90 turns them."""
    image, targets = scene()
    pipe = Compose([Op("rot90", k=k)], bounding_box_format="xyxy", keypoint_format="xy")
    out, moved = pipe.augment_targets(image, targets, np.random.default_rng(0))
    np.testing.assert_array_equal(out, np.rot90(image, k))
    np.testing.assert_array_equal(moved["mask"], np.rot90(targets["mask"], k))
    rows, cols = np.nonzero(out)  # the bright box, turned: the moved box bounds it exactly
    np.testing.assert_allclose(moved["boxes"][0], [cols.min(), rows.min(), cols.max() + 1,
                                                   rows.max() + 1])
    assert moved["box_labels"][0] == 3
    corners = moved["keypoints"][:2]  # still on the box's corner pixels' centres
    assert all(out[int(y), int(x)] == 255 for x, y in corners)
    A = pytest.importorskip("albumentations")
    turn = A.Compose([A.RandomRotate90(p=1.0)], bbox_params=A.BboxParams(
        format="pascal_voc", label_fields=["labels"]), seed=0)
    for _ in range(60):  # (their turn is drawn: the one that gives our image)
        theirs = turn(image=image, mask=targets["mask"], bboxes=targets["boxes"][:1],
                      labels=[3])
        if np.array_equal(theirs["image"], out):
            break
    else:
        pytest.fail(f"albumentations' RandomRotate90 never turned the image {k} times as ours")
    np.testing.assert_array_equal(theirs["mask"], moved["mask"])
    np.testing.assert_allclose(np.asarray(theirs["bboxes"])[0], moved["boxes"][0])


def test_rot90_draws_each_turn_alike_and_takes_a_range_of_them():
    rng = np.random.default_rng(0)
    image = np.arange(12, dtype=np.uint8).reshape(3, 4)
    turns = [next(k for k in range(4) if np.array_equal(out, np.rot90(image, k)))
             for out in (Op("rot90")(image, rng) for _ in range(4000))]
    assert all(abs(np.bincount(turns, minlength=4)[k] - 1000) < 120 for k in range(4))
    assert {Op("rot90", k=(1, 2))(image, rng).shape for _ in range(50)} == {(4, 3), (3, 4)}
    for bad in (1.5, True):  # (True was told "e.g. k=(0.5, 1.5)", refused in turn)
        with pytest.raises(ArgumentError, match=r"`k` expects whole quarter turns.*k=\(0, 3\)"):
            Op("rot90", k=bad)
    np.testing.assert_array_equal(Op("rot90", k=-1)(image, rng), np.rot90(image, -1))
    np.testing.assert_array_equal(Op("rot90", k=np.int64(5))(image, rng), np.rot90(image, 1))
