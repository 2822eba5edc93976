"""An albumentations pipeline in real workers: one output per (seed, epoch, sample index)."""

from __future__ import annotations

import multiprocessing
import os
import tempfile

import numpy as np
import pytest

import shmaug
from tests._helpers import needs_keras

A = pytest.importorskip("albumentations")
pytestmark = pytest.mark.timeout(120)

METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]


def _op() -> shmaug.ops.FromAlbumentations:
    return shmaug.from_albumentations(A.Compose([
        A.Affine(rotate=(-15, 15), scale=(0.9, 1.1), p=1.0),
        A.OneOf([A.GaussianBlur(p=1.0), A.GaussNoise(p=1.0)], p=0.8),
        A.CoarseDropout(num_holes_range=(1, 2), p=0.5),
    ]))


def _epochs(images: np.ndarray, **kwargs: object) -> list[np.ndarray]:
    y = np.arange(len(images))
    with shmaug.Loader(images, y, batch_size=6, augment=_op(), seed=11, shuffle=True,
                       **kwargs) as loader:
        out = []
        for _ in range(2):
            xs, ys = zip(*loader)
            order = np.argsort(np.concatenate(ys))  # by sample index, whatever the shuffle
            out.append(np.concatenate(xs)[order])
    return out


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return np.random.default_rng(0).random((14, 20, 20)).astype(np.float16)  # W1's dtype


@pytest.fixture(scope="module")
def inline(images: np.ndarray) -> list[np.ndarray]:
    return _epochs(images, workers=0)


@pytest.mark.parametrize("method", METHODS)
def test_two_workers_match_inline_bit_for_bit(images, inline, method):
    got = _epochs(images, workers=2, start_method=method)
    for epoch in range(2):
        np.testing.assert_array_equal(got[epoch], inline[epoch])


def test_epochs_differ_and_a_seed_repeats(images, inline):
    assert inline[0].dtype == np.float16 and inline[0].shape == images.shape
    assert not np.array_equal(inline[0], inline[1])  # same sample, next epoch: new draw
    assert not np.array_equal(inline[0][0], inline[0][1])
    np.testing.assert_array_equal(_epochs(images, workers=0)[1], inline[1])


@pytest.mark.parametrize("kind", ["albumentations", "keras layer", "keras sequential"])
def test_a_pipeline_of_another_library_given_as_augment_names_its_wrapper(kind):
    """Called fn(image, rng), each failed on sample 0 with its own library's error."""
    if kind == "albumentations":
        augment, wrapper = A.Compose([A.HorizontalFlip()]), "shmaug.from_albumentations"
    else:
        keras = pytest.importorskip("keras")
        flip = keras.layers.RandomFlip("horizontal")
        augment = flip if kind == "keras layer" else keras.Sequential([flip])
        wrapper = "shmaug.from_keras"
    x = np.zeros((8, 16, 16, 3), np.uint8)
    with pytest.raises(shmaug.ArgumentTypeError, match=rf"(?s)`augment` must be a callable.*"
                                                       rf"Fix: pass `augment={wrapper}\(...\)`"):
        shmaug.Loader(x, np.arange(8), batch_size=4, augment=augment, workers=0)


def test_float_images_in_0_255_are_refused_rather_than_flattened_to_1():
    # albumentations clips float images to 1.0: 0..255 floats came back flattened, silently.
    x = (np.random.default_rng(0).random((8, 16, 16)) * 255).astype(np.float32)
    brighter = shmaug.from_albumentations(A.Compose([A.RandomBrightnessContrast(p=1.0)]))
    # One message, whether value_range is left out or given as (0, 255), with the fixes that
    # work (a value_range cannot help), before any process starts.
    one = (r"albumentations takes float32 images only in \[0, 1\].*{}.*Fix: rescale the "
           r"images into \[0, 1\] \(e.g. x / 255.*x.astype\(np.uint8\)")
    with pytest.raises(shmaug.ArgumentError, match=one.format("sample index 0 spans 0")):
        shmaug.Loader(x, batch_size=4, augment=brighter, workers=1)
    with pytest.raises(shmaug.ArgumentError, match=one.format(r"`value_range`=\(0.0, 255.0\)")):
        shmaug.Loader(x, batch_size=4, augment=brighter, workers=1, value_range=(0, 255))
    path = f"{tempfile.mkdtemp()}/x.npy"  # memory-mapped: sample 0 is what is checked
    np.save(path, x)
    with pytest.raises(shmaug.ArgumentError, match=one.format("sample index 0 spans 0")):
        shmaug.Loader(path, batch_size=4, augment=brighter, workers=1)
    for fixed, top in ((x / 255, 1.0), (x.astype(np.uint8), 255)):  # both fixes work
        with shmaug.Loader(fixed, batch_size=4, augment=brighter, workers=1) as loader:
            out = next(iter(loader))[0]
            assert out.dtype == fixed.dtype and top / 4 < out.max() <= top


# -- targets: masks, boxes, keypoints and their labels, augmented with their image ----------


def _scenes(n: int = 12, size: int = 32) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Images of up to 3 filled rectangles, each at the intensity of its label; their boxes
    and centre keypoints padded with rows of -1 to 3; the rectangles' mask (label values)."""
    rng = np.random.default_rng(1)
    x = np.zeros((n, size, size, 3), np.uint8)
    boxes = np.full((n, 3, 4), -1, np.float32)
    labels = np.full((n, 3), -1, np.int64)
    points = np.full((n, 3, 2), -1, np.float32)
    for i in range(n):
        for j in range(int(rng.integers(1, 4))):
            x0, y0 = (int(v) for v in rng.integers(0, size - 8, 2))
            x1, y1 = x0 + int(rng.integers(4, 8)), y0 + int(rng.integers(4, 8))
            label = 2 * i + j % 2 + 1  # overlapping rectangles: the later one is on top
            x[i, y0:y1, x0:x1] = label
            boxes[i, j], labels[i, j], points[i, j] = (x0, y0, x1, y1), label, (x0, y0)
    return x, {"mask": x[..., 0].copy(), "bboxes": boxes, "labels": labels,
               "keypoints": points, "index": np.arange(n)}


def _geometric(**params: object) -> shmaug.ops.FromAlbumentations:
    """Flips, quarter turns and crops only: no interpolation, so the mask must equal the
    image's first channel pixel for pixel when both got the same draws."""
    return shmaug.from_albumentations(A.Compose(
        [A.HorizontalFlip(p=0.5), A.RandomRotate90(p=1.0), A.RandomCrop(24, 24)], **params))


@pytest.mark.parametrize("method", METHODS)
def test_masks_follow_their_images_and_match_inline_bit_for_bit(method):
    x, y = _scenes()
    y = {"mask": y["mask"], "index": y["index"]}

    def run(**kwargs: object) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
        with shmaug.Loader(x, y, batch_size=5, augment=_geometric(), seed=3, shuffle=True,
                           **kwargs) as loader:
            return [batch for _ in range(2) for batch in loader]

    got, inline = run(workers=2, start_method=method), run(workers=0)
    for (xb, yb), (xi, yi) in zip(got, inline, strict=True):
        np.testing.assert_array_equal(xb, xi)
        np.testing.assert_array_equal(yb["mask"], yi["mask"])
        assert xb.shape[1:] == (24, 24, 3) and yb["mask"].shape[1:] == (24, 24)
        np.testing.assert_array_equal(yb["mask"], xb[..., 0])  # the same draws for both
        np.testing.assert_array_equal(yb["index"], yi["index"])  # passed through, gathered
    first = np.concatenate([yb["mask"] for _, yb in got[:3]])
    again = np.concatenate([yb["mask"] for _, yb in got[3:]])
    assert not np.array_equal(first, again)  # a new draw each epoch


def test_boxes_keypoints_and_labels_follow_their_rectangles():
    x, y = _scenes()
    op = _geometric(bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"]),
                    keypoint_params=A.KeypointParams(format="xy"))
    with shmaug.Loader(x, y, batch_size=4, augment=op, seed=5, workers=2) as loader:
        batches = list(loader)
    seen = 0
    for xb, yb in batches:
        assert yb["bboxes"].shape[1:] == (3, 4) and yb["labels"].shape[1:] == (3,)
        assert yb["bboxes"].dtype == np.float32 and yb["labels"].dtype == np.int64
        for image, boxes, labels in zip(xb, yb["bboxes"], yb["labels"]):
            real = labels != -1
            np.testing.assert_array_equal(real, ~np.all(boxes == -1, axis=1))
            assert not real[real.sum():].any()  # padding only after the real rows
            for (x0, y0, x1, y1), label in zip(np.rint(boxes[real]).astype(int), labels[real]):
                inside = image[y0:y1, x0:x1, 0]
                assert inside.size and np.isin(inside, labels[real]).all()  # its rectangle
                seen += int((inside == label).any())
    assert seen > 10
    with shmaug.Loader(x, y, batch_size=4, augment=op, seed=5, workers=0) as loader:
        for (_, yb), (_, yi) in zip(batches, loader, strict=True):
            for key in ("bboxes", "labels", "keypoints"):
                np.testing.assert_array_equal(yb[key], yi[key])


def test_a_pipeline_with_box_params_but_no_boxes_in_y_is_refused_before_any_process():
    x, y = _scenes()
    op = _geometric(bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"]))
    with pytest.raises(shmaug.ArgumentError, match=r"needs the targets \['bboxes', 'labels'\]"):
        shmaug.Loader(x, {"mask": y["mask"]}, batch_size=4, augment=op, workers=2)


@needs_keras
def test_a_segmentation_model_fits_on_augmented_image_mask_pairs():
    import keras

    x, y = _scenes(16)
    masks = (y["mask"] > 0).astype(np.float32)  # foreground: where a rectangle is
    seq = shmaug.Sequence(x, {"mask": masks}, batch_size=8, augment=_geometric(), seed=0,
                          shuffle=True, workers=2)
    xb, yb = seq[0]
    np.testing.assert_array_equal(yb["mask"], xb[..., 0] > 0)  # one draw for image and mask
    inputs = keras.Input((24, 24, 3))
    outputs = keras.layers.Conv2D(1, 3, padding="same", activation="sigmoid")(
        keras.layers.Rescaling(1 / 255)(inputs))
    model = keras.Model(inputs, {"mask": keras.layers.Reshape((24, 24), name="mask")(outputs)})
    model.compile("adam", {"mask": "binary_crossentropy"})
    try:
        history = model.fit(seq, epochs=2, verbose=0)
    finally:
        seq.close()
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()


def test_only_the_first_array_under_a_name_is_augmented():
    # A Keras sample weight keyed by the output it weighs ("mask") must travel unchanged.
    x, y = _scenes()
    weights = np.linspace(0.5, 1.5, len(x)).astype(np.float32)
    targets = {"mask": y["mask"], "weights": {"mask": weights}, "index": y["index"]}
    with shmaug.Loader(x, targets, batch_size=5, augment=_geometric(), seed=1, workers=1) as loader:
        for xb, yb in loader:
            np.testing.assert_array_equal(yb["mask"], xb[..., 0])
            np.testing.assert_array_equal(yb["weights"]["mask"], weights[yb["index"]])


def test_targets_the_pipeline_would_get_wrong_are_refused_before_any_process():
    x, y = _scenes()
    cases = [  # (y, op, what the message says)
        ({"bboxes": y["bboxes"]}, _geometric(), "has no bbox_params"),
        ({"mask": (y["index"] % 2).astype(np.float32)}, _geometric(), "needs its image's height"),
        ({"keypoints": y["keypoints"][:, :, :1]}, _geometric(
            keypoint_params=A.KeypointParams(format="xy")), r"\(samples, rows, >= 2\)"),
        ({"bboxes": y["bboxes"], "labels": y["labels"], "boxes2": y["bboxes"]}, _geometric(
            bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"]),
            additional_targets={"boxes2": "bboxes"}), "extra bboxes target"),
    ]
    for targets, op, message in cases:
        with pytest.raises(shmaug.ArgumentError, match=message):
            shmaug.Loader(x, targets, batch_size=4, augment=op, workers=2)


def test_string_labels_bool_masks_and_mapped_targets(tmp_path):
    x, y = _scenes()
    np.save(tmp_path / "mask.npy", y["mask"] > 0)
    mask = np.load(tmp_path / "mask.npy", mmap_mode="r")  # bool, and memory-mapped
    names = np.where(y["labels"] == -1, "", np.char.add("class", y["labels"].astype(str)))
    op = _geometric(bbox_params=A.BboxParams(format="pascal_voc", label_fields=["names"]))
    targets = {"mask": mask, "bboxes": y["bboxes"], "names": names}
    with shmaug.Loader(x, targets, batch_size=6, augment=op, seed=2, workers=1) as loader:
        ours = [f"/dev/shm/{s}" for s in os.listdir("/dev/shm")
                if s.startswith(f"shmaug_{os.getpid()}_")]
        sizes = [os.path.getsize(path) for path in ours]
        for xb, yb in loader:
            np.testing.assert_array_equal(yb["mask"], xb[..., 0] > 0)
            assert yb["mask"].dtype == np.bool_ and yb["names"].dtype == names.dtype
            real = yb["names"] != ""
            np.testing.assert_array_equal(real, ~np.all(yb["bboxes"] == -1, axis=2))
    # The mask was not copied into shared memory: workers map its file.
    assert sizes and mask.nbytes not in sizes


@needs_keras
def test_a_sequence_moves_the_targets_in_y_and_through_an_override_that_calls_super():
    x, y = _scenes()
    other = np.zeros_like(y["mask"])
    seq = shmaug.Sequence({"image": x, "mask": other}, {"mask": y["mask"]}, batch_size=4,
                          augment=_geometric(), seed=0, workers=0, image_key="image")
    try:
        (inputs, targets) = seq[0]
        np.testing.assert_array_equal(targets["mask"], inputs["image"][..., 0])  # y's, moved
        assert inputs["mask"].shape == (4, 32, 32)  # the extra input travels unchanged
    finally:
        seq.close()

    class Darker(shmaug.Sequence):  # the argument's plan holds: the mask moves
        def augment(self, image, rng):
            return super().augment(image, rng) // 2

    seq = Darker(x, {"mask": y["mask"]}, batch_size=4, augment=_geometric(), seed=0, workers=0)
    try:
        images, targets = seq[0]
        # the mask moved as the image did, before the override halved the image
        np.testing.assert_array_equal(targets["mask"] // 2, images[..., 0])
    finally:
        seq.close()

    class OnItsOwn(shmaug.Sequence):  # never reaches the pipeline: the mask would stay put
        def augment(self, image, rng):
            return image[::-1]

    seq = OnItsOwn(x, {"mask": y["mask"]}, batch_size=4, augment=_geometric(), workers=0)
    try:
        with pytest.raises(shmaug.ShmaugError, match=r"OnItsOwn.augment.*super\(\)\.augment"):
            seq[0]
    finally:
        seq.close()
