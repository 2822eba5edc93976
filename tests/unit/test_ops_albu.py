"""``from_albumentations``: seeding from the op's rng, dtypes, targets, config and pickling.

Never starts a process except the one that simulates albumentations being absent.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

import shmaug
from shmaug.ops import FromAlbumentations

A = pytest.importorskip("albumentations")


def pipeline() -> object:
    return A.Compose([
        A.Rotate(limit=20, p=1.0),
        A.HorizontalFlip(p=0.5),
        A.OneOf([A.GaussianBlur(p=1.0), A.RandomBrightnessContrast(p=1.0)], p=1.0),
        A.CoarseDropout(num_holes_range=(1, 2), p=1.0),  # writes holes: a read-only input must survive
    ])


@pytest.fixture
def image() -> np.ndarray:
    img = np.random.default_rng(3).integers(0, 256, (24, 20, 3), dtype=np.uint8)
    img.flags.writeable = False  # as a worker hands it over
    return img


def test_output_is_a_function_of_image_and_rng(image):
    op = shmaug.from_albumentations(pipeline())
    a = op(image, np.random.default_rng(5))
    b = op(image, np.random.default_rng(5))
    c = op(image, np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == image.shape and a.dtype == image.dtype


def test_result_does_not_depend_on_what_ran_before(image):
    op = shmaug.from_albumentations(pipeline())
    first = op(image, np.random.default_rng(9))
    for s in range(5):  # other samples in between, and the globals moved
        op(image, np.random.default_rng(s))
    np.random.seed(123)
    np.testing.assert_array_equal(op(image, np.random.default_rng(9)), first)


def test_the_callers_pipeline_keeps_its_own_random_state(image):
    mine = A.Compose([A.Rotate(limit=20, p=1.0)], seed=1)
    expected = A.Compose([A.Rotate(limit=20, p=1.0)], seed=1)(image=image.copy())["image"]
    shmaug.from_albumentations(mine)(image, np.random.default_rng(0))
    np.testing.assert_array_equal(mine(image=image.copy())["image"], expected)


@pytest.mark.parametrize("shape", [(16, 16), (16, 16, 1), (16, 16, 3)])
def test_float16_goes_through_exactly_and_keeps_layout(shape):
    img = np.random.default_rng(0).random(shape).astype(np.float16)
    flip = shmaug.from_albumentations(A.Compose([A.HorizontalFlip(p=1.0)]))
    out = flip(img, np.random.default_rng(0))
    assert out.dtype == np.float16 and out.shape == img.shape
    np.testing.assert_array_equal(out, img[:, ::-1])  # no precision lost on the way


@pytest.mark.parametrize("last", ["Normalize", "ToFloat"])
def test_an_image_the_pipeline_makes_in_another_dtype_stays_in_it(image, last):
    """``A.Normalize()`` (most pipelines' last step) and ``A.ToFloat`` make float32 of uint8:
    cast back, they came out as 0, 1, 254 and 255. A mask keeps its dtype."""
    pipe = A.Compose([A.HorizontalFlip(p=1.0), getattr(A, last)()], seed=0)
    expect = pipe(image=image)["image"]
    op = shmaug.from_albumentations(pipe)
    out = op(image, np.random.default_rng(0))
    assert out.dtype == np.float32 and out.min() < 0.5 and 0.5 < out.max() < 3
    assert out.shape == expect.shape
    mask = (image[:, :, 0] > 128).astype(np.uint8)
    made = op.apply(np.random.default_rng(0), image=image, mask=mask)
    assert made["image"].dtype == np.float32 and made["mask"].dtype == np.uint8


def test_apply_runs_masks_boxes_and_keypoints_seeded_like_call(image):
    pipe = A.Compose(
        [A.Rotate(limit=20, p=1.0), A.HorizontalFlip(p=0.5), A.RandomCrop(16, 16)],
        bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"]),
        keypoint_params=A.KeypointParams(format="xy"),
    )
    op = shmaug.from_albumentations(pipe)
    assert op.required_targets == ("bboxes", "keypoints", "labels")
    assert {"mask", "bboxes", "keypoints", "labels"} <= op.target_names
    mask = np.zeros(image.shape[:2], np.uint8)
    mask[4:12, 5:9] = 1
    kwargs = dict(image=image, mask=mask, bboxes=np.array([[2, 3, 15, 18]]), labels=[7],
                  keypoints=np.array([[6.0, 7.0]]))
    a = op.apply(np.random.default_rng(4), **kwargs)
    b = op.apply(np.random.default_rng(4), **kwargs)
    for key in ("image", "mask", "bboxes", "keypoints"):
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))
    assert a["image"].shape == (16, 16, 3) and a["mask"].shape == (16, 16)
    with pytest.raises(shmaug.ArgumentError, match="bboxes.*keypoints.*in `y`.*op.apply"):
        op(image, np.random.default_rng(0))  # the image alone cannot go through it


def test_augment_targets_keeps_boxes_padded_and_labels_with_their_boxes(image):
    pipe = A.Compose([A.HorizontalFlip(p=1.0), A.Crop(0, 0, 12, 20)],
                     bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"]))
    op = shmaug.from_albumentations(pipe)
    boxes = np.array([[15, 2, 19, 6], [-1] * 4, [2, 12, 6, 16], [-1] * 4], np.float32)
    labels = np.array([3, -1, 4, -1])
    out, made = op.augment_targets(image, {"bboxes": boxes, "labels": labels},
                                   np.random.default_rng(0))
    # Flipped (x -> 20 - x): the first box lands inside the crop, the third outside it.
    np.testing.assert_allclose(made["bboxes"], [[1, 2, 5, 6]] + [[-1] * 4] * 3, atol=1e-4)
    np.testing.assert_array_equal(made["labels"], [3, -1, -1, -1])
    assert made["bboxes"].dtype == np.float32 and made["labels"].dtype == labels.dtype
    assert out.shape[:2] == (20, 12)


@pytest.mark.parametrize("remove_invisible", [True, False])
def test_keypoints_keep_their_rows_through_the_pipeline(image, remove_invisible):
    """Row k of a pose is joint k: one given as -1, or dropped leaving the image, stays a row
    of -1 where it was, and the later joints keep their rows (they had moved up into it)."""
    pipe = A.Compose([A.Affine(translate_px={"x": 4, "y": 0}, p=1.0)],
                     keypoint_params=A.KeypointParams(format="xy", label_fields=["joints"],
                                                      remove_invisible=remove_invisible))
    op = shmaug.from_albumentations(pipe)
    points = np.array([[2, 3], [-1, -1], [8, 9], [18, 4], [5, 14]], np.float32)
    joints = np.array([0, -1, 2, 3, 4])
    _, made = op.augment_targets(image, {"keypoints": points, "joints": joints},
                                 np.random.default_rng(0))
    right = [[6, 3], [-1, -1], [12, 9], [-1, -1] if remove_invisible else [22, 4], [9, 14]]
    np.testing.assert_allclose(made["keypoints"], right, atol=1e-4)
    np.testing.assert_array_equal(made["joints"], [0, -1, 2, -1 if remove_invisible else 3, 4])
    assert made["keypoints"].dtype == np.float32


def test_a_sample_with_no_keypoint_left_comes_back_all_padding(image):
    """An image of no one (every row -1), or one whose keypoints a crop drops: the rows'
    index column met numpy's reshape of nothing (a ValueError in the worker)."""
    pipe = A.Compose([A.HorizontalFlip(p=1.0), A.Crop(0, 0, 4, 4)],
                     keypoint_params=A.KeypointParams(format="xy"))
    op = shmaug.from_albumentations(pipe)
    for points in (np.full((3, 2), -1, np.float32), np.array([[2, 20], [3, 18]], np.float32),
                   np.zeros((0, 2), np.float32)):  # (and no row at all)
        _, made = op.augment_targets(image, {"keypoints": points}, np.random.default_rng(0))
        np.testing.assert_array_equal(made["keypoints"], np.full_like(points, -1))
    boxes = shmaug.from_albumentations(A.Compose(
        [A.HorizontalFlip(p=1.0)], bbox_params=A.BboxParams(format="pascal_voc", label_fields=[])))
    _, made = boxes.augment_targets(image, {"bboxes": np.zeros((0, 4), np.float32)},
                                    np.random.default_rng(0))
    assert made["bboxes"].shape == (0, 4)


def test_more_boxes_than_the_padding_holds_is_refused_with_the_fix():
    from shmaug.ops.interop.albumentations import _padded

    with pytest.raises(shmaug.OutputMismatchError, match=r"pad `y\['bboxes'\]` with rows of -1"):
        _padded(np.zeros((3, 4)), np.zeros((2, 4), np.float32), "bboxes")


def test_pickles_and_round_trips_its_config(image):
    op = shmaug.from_albumentations(pipeline())
    expected = op(image, np.random.default_rng(2))
    again = shmaug.from_config(json.loads(json.dumps(op.to_config())))
    assert isinstance(again, FromAlbumentations)
    assert again.to_config() == op.to_config()
    np.testing.assert_array_equal(again(image, np.random.default_rng(2)), expected)
    unpickled = pickle.loads(shmaug.ops.check_picklable(shmaug.Compose([op])))
    np.testing.assert_array_equal(unpickled(image, np.random.default_rng(2)), expected)


def test_equal_after_a_config_round_trip_as_the_readme_asserts():
    op = shmaug.from_albumentations(pipeline())
    assert shmaug.from_config(json.loads(json.dumps(op.to_config()))) == op
    pipe = shmaug.Compose([op, shmaug.ops.Op("rotate")])
    assert shmaug.from_config(pipe.to_config()) == pipe  # the README's own assert
    assert len({op, shmaug.from_config(op.to_config())}) == 1
    ranged = op.with_value_range((0, 1))  # the range a loader binds travels too
    assert shmaug.from_config(ranged.to_config()) == ranged != op
    other = shmaug.from_albumentations(A.Compose([A.Rotate(limit=10, p=1.0)]))
    assert other != op
    lam = shmaug.from_albumentations(A.Compose([A.Lambda(image=_invert)]))
    assert lam == lam and lam != shmaug.from_albumentations(A.Compose([A.Lambda(image=_invert)]))


def test_an_affine_rebuilt_by_albumentations_equals_the_live_one():
    # albumentations writes a rebuilt Affine's translate_px [0, 0] as [0.0, 0.0]: compared as
    # JSON text, the saved pipeline equalled neither the live one nor its cache key
    op = shmaug.from_albumentations(A.Compose([A.Affine(rotate=(-12, 12)),
                                               A.GaussianBlur(p=0.5)]))
    again = shmaug.from_config(json.loads(json.dumps(op.to_config())))
    assert again == op and hash(again) == hash(op) and len({op, again}) == 1


def test_a_pipeline_without_a_config_says_so():
    op = shmaug.from_albumentations(A.Compose([A.Lambda(image=_invert)]))
    with pytest.raises(shmaug.ArgumentError, match="albumentations.to_dict failed"):
        op.to_config()
    assert pickle.loads(pickle.dumps(op))  # pickling still works: workers get it


def _invert(img, **_):
    return 255 - img


def test_refuses_what_is_not_an_albumentations_transform():
    with pytest.raises(shmaug.ArgumentTypeError, match="`pipeline` expects an albumentations"):
        shmaug.from_albumentations(lambda image: image)


def test_absent_albumentations_gives_the_install_command():
    code = (
        "import sys; sys.modules['albumentations'] = None\n"
        "import shmaug\n"
        "try:\n"
        "    shmaug.from_albumentations(object())\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert 'pip install "shmaug[albumentations]"' in out, out


def test_float_0_255_called_by_hand_is_refused_with_the_fix() -> None:
    # Inside a loader the value range is bound and checked at start; called by hand, as
    # shmaug's own ops do, float data must lie in [0, 1] (albumentations would clip it there).
    A = pytest.importorskip("albumentations")
    aug = shmaug.from_albumentations(A.Compose([A.HorizontalFlip(p=1.0)]))
    image = np.full((8, 8, 3), 200.0, np.float32)
    with pytest.raises(shmaug.ArgumentError, match=r"(?s)spans 200\.\.200.*Fix: rescale the "
                       r"images into \[0, 1\].*x.astype\(np.uint8\)"):
        aug(image, np.random.default_rng(0))
    with pytest.raises(shmaug.ArgumentError, match=r"`value_range`=\(0.0, 255.0\) says"):
        aug.with_value_range((0, 255))(image, np.random.default_rng(0))
    assert aug(image / 255, np.random.default_rng(0)).max() <= 1.0


def test_a_transform_of_theirs_inside_a_compose_is_refused_with_the_wrapper(image):
    """A Kaggle user's A.GaussianBlur beside shmaug's ops started the workers and failed in
    one with albumentations' KeyError ("pass data to augmentations as named arguments")."""
    from shmaug.ops import Compose, Maybe, OneOf

    for theirs in (A.GaussianBlur(p=1), A.OneOf([A.GaussianBlur(), A.MotionBlur()])):
        with pytest.raises(shmaug.ArgumentTypeError, match=r"of albumentations, which is called "
                           r"otherwise.*shmaug.from_albumentations\(A.Compose\(\[\.\.\.\]\)\)"):
            Compose([Maybe("hflip"), theirs])
        with pytest.raises(shmaug.ArgumentTypeError, match="from_albumentations"):
            OneOf(["hflip", theirs])
    blur = shmaug.from_albumentations(A.Compose([A.GaussianBlur(p=1)]))
    out = Compose([Maybe("hflip"), blur])(image, np.random.default_rng(0))
    assert out.shape == image.shape


def test_a_pipeline_ending_in_to_tensor_is_told_to_leave_it_out(image):
    pytest.importorskip("torch")
    from albumentations.pytorch import ToTensorV2

    made = shmaug.from_albumentations(A.Compose([A.HorizontalFlip(), ToTensorV2()]))
    with pytest.raises(shmaug.OutputMismatchError, match=r"received Tensor\. Fix: leave "
                                                         r"ToTensorV2 out of the pipeline"):
        made(image, np.random.default_rng(0))
