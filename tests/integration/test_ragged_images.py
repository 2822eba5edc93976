"""``x`` as a list of images of several sizes: held once in shared memory, each read at its own
size, the pipeline ending in one (it was refused, with a fix, ``load=images.__getitem__``,
that pickled the whole list into every worker)."""

from __future__ import annotations

import gc
import pickle
import weakref

import numpy as np
import pytest

import shmaug
from shmaug.memory.ragged import RaggedImages
from shmaug.memory.store import SharedStore
from shmaug.ops import Compose, Op
from shmaug.seeding import rng_for
from tests._helpers import needs_keras

AUG = Compose([Op("random_resized_crop", height=16, width=16), Op("hflip")])


def _images(n: int = 14, channels: int | None = 3, dtype: str = "uint8", seed: int = 0
            ) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        h, w = int(rng.integers(1, 60)), int(rng.integers(1, 60))  # (1 pixel wide too)
        shape = (h, w) if channels is None else (h, w, channels)
        out.append((rng.random(shape) * (255 if dtype != "float32" else 1)).astype(dtype))
    return out


@pytest.mark.parametrize("channels,dtype", [(3, "uint8"), (None, "uint16"), (1, "float32"),
                                            (4, "uint8")])
def test_each_sample_is_its_own_image_augmented_at_its_own_size(channels, dtype):
    images = _images(channels=channels, dtype=dtype)
    with shmaug.Loader(images, np.arange(14), batch_size=5, augment=AUG, workers=2, seed=3,
                       shuffle=True) as loader:
        for b, (xb, yb) in enumerate(loader):
            for row, index in zip(xb, yb):  # what the pipeline makes of that very image
                np.testing.assert_array_equal(row, AUG(images[index], rng_for(3, 0, index)))
            assert xb.dtype == dtype and xb.shape[1:3] == (16, 16)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_the_same_batches_for_any_worker_count_or_start_method(method):
    images = _images()
    kwargs = dict(batch_size=4, augment=AUG, seed=1, shuffle=True)
    with shmaug.Loader(images, np.arange(14), workers=0, **kwargs) as loader:
        expected = [[xb.copy() for xb, _ in loader] for _ in range(2)]
    with shmaug.Loader(images, np.arange(14), workers=2, start_method=method, **kwargs) as loader:
        for epoch in expected:
            for want, (xb, _) in zip(epoch, loader, strict=True):
                np.testing.assert_array_equal(xb, want)


def test_the_workers_get_the_blocks_name_not_the_images():
    images = _images(40)  # 1 pixel up to 59x59x3
    source = RaggedImages(images)
    with SharedStore() as store:
        shared = source.load.sharing(store)
        sent = pickle.dumps(shared)
        assert len(sent) < 1000 < sum(a.nbytes for a in images)  # a handle, no pixels
        read = pickle.loads(sent)  # as a worker attaches
        for i in (0, 17, -1):
            np.testing.assert_array_equal(read(i), images[i])
            assert not read(i).flags.writeable  # as from an array `x`
        with pytest.raises(IndexError, match="image index 40 out of range for 40 images"):
            read(40)
        kept = read(17)  # a view of the mapping, not a copy (a 36 MB slide copied for each
        assert not kept.flags.owndata  # crop of it cost 28x the crop: fourth review)
        del read
        gc.collect()  # (the mapping outlives its reader while a view of it is held)
        np.testing.assert_array_equal(kept, images[17])
        del kept
        gc.collect()


def test_a_closed_loader_holds_none_of_the_images():
    images = _images()
    first = weakref.ref(images[0])
    loader = shmaug.Loader(images, batch_size=4, augment=AUG, workers=1, seed=0)
    assert "load=" not in repr(loader)  # (the list's own reader is not a `load` given)
    loader.batch(0)
    loader.close()
    del images
    gc.collect()
    assert first() is None


@needs_keras
def test_a_closed_sequences_list_says_it_was_let_go():
    seq = shmaug.Sequence(_images(), batch_size=4, augment=AUG, workers=0)
    seq.close()
    with pytest.raises(shmaug.ClosedError, match=r"The list x was let go with its closed "
                                                 r"loader"):  # (a bare IndexError)
        seq.x[0]


def test_the_shared_memory_error_names_what_needs_less_of_it(monkeypatch):
    from shmaug.memory import store as _store

    monkeypatch.setattr(_store, "free_shm_bytes", lambda needed=0: 2**16)
    with SharedStore() as store, pytest.raises(
            shmaug.SharedMemoryError, match=r"for the list x: .*keep the images in files, "
                                            r"read by index.*ImageFiles\.from_paths"):
        RaggedImages([np.zeros((300, 300), np.uint8), np.zeros((2, 2), np.uint8)]).load.sharing(
            store)  # (was told to lower batch_size, or to pass a .npy path)
    masks = RaggedImages([np.zeros((300, 300), np.uint8)] * 2, "y['segmentation_masks']")
    with SharedStore() as store, pytest.raises(
            shmaug.SharedMemoryError, match=r"keep the masks in files.*from_segmentation"):
        masks.load.sharing(store)
    encoded = [cv2_png(np.zeros((300, 300, 3), np.uint8) + i) for i in range(2)]
    with SharedStore() as store, pytest.raises(
            shmaug.SharedMemoryError, match=r"keep the images in files or uncompressed record "
                                            r"shards"):
        shmaug.ImageRecords.from_bytes([e + b"\0" * 40_000 for e in encoded]).load.sharing(store)


def cv2_png(image: np.ndarray) -> bytes:
    import cv2

    return cv2.imencode(".png", image)[1].tobytes()


def test_what_cannot_be_batched_is_refused_with_the_fix():
    images = _images()
    with pytest.raises(shmaug.ArgumentError, match=r"list of images of several sizes \(\d+x\d+"
                                                   r".*`augment` is None.*np\.stack\(images\)"):
        shmaug.Loader(images, batch_size=4, workers=0)
    grey = images[:3] + _images(2, channels=None)
    with pytest.raises(shmaug.ArgumentError, match=r"several channel counts: one channel "
                                                   r"\(H, W\): 2 images; 3 channels: 3 images"
                                                   r".*convert\('RGB'\)"):
        shmaug.Loader(grey, batch_size=4, augment=AUG, workers=0)
    mixed = images[:3] + _images(2, dtype="float32")
    with pytest.raises(shmaug.ArgumentError, match=r"several dtypes \(float32, uint8\).*\(image \* 255\)"):
        shmaug.Loader(mixed, batch_size=4, augment=AUG, workers=0)
    pair = [np.zeros((10, 12, 3), np.uint8), np.zeros((10, 7), np.uint8)]  # (was read as
    with pytest.raises(shmaug.ArgumentError, match=r"several channel counts"):  # (x, y))
        shmaug.Loader(pair, np.arange(2), batch_size=2, augment=AUG, workers=0)
    for missing in (None, np.float32("nan")):
        with pytest.raises(shmaug.ArgumentError, match=r"has no image at index 1 \("):
            shmaug.Loader([images[0], missing, images[1]], batch_size=2, augment=AUG,
                          workers=0)
    with pytest.raises(shmaug.ArgumentError, match=r"an empty image at index 1, of shape "
                                                   r"\(0, 12, 3\)"):
        shmaug.Loader([images[0], np.zeros((0, 12, 3), np.uint8)], batch_size=2, augment=AUG,
                      workers=0)


@needs_keras
def test_a_model_fits_on_a_list_of_images_of_several_sizes():
    from tests import _ops

    images = _images(16)
    seq = shmaug.Sequence(images, np.arange(16) % 4, batch_size=8, augment=AUG, seed=0,
                          shuffle=True, workers=2)
    try:
        assert seq.x[3].shape == images[3].shape  # each at its own size
        history = _ops.tiny_model((16, 16, 3), 4).fit(seq, epochs=2, verbose=0)
    finally:
        seq.close()
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()


def _scenes(n: int = 10) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Images of several sizes whose first channel is 10x their mask's class."""
    rng = np.random.default_rng(0)
    images, masks = [], []
    for i in range(n):
        h, w = int(rng.integers(10, 50)), int(rng.integers(10, 50))
        mask = ((rng.random((h, w)) > 0.5) * (i % 5 + 1)).astype(np.uint8)
        images.append(np.repeat(mask[:, :, None], 3, axis=2) * 10)
        masks.append(mask)
    return images, masks


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_masks_of_several_sizes_move_with_their_images(method):
    # (were refused, told to write a source with `load(self, index)` of their own)
    images, masks = _scenes()
    nearest = Compose([Op("random_resized_crop", height=16, width=16, interpolation="nearest"),
                       Op("hflip"), Op("rotate", degrees=20, interpolation="nearest")])
    with shmaug.Loader(images, {"segmentation_masks": masks}, batch_size=5, augment=nearest,
                       workers=2, seed=2, shuffle=True, start_method=method) as loader:
        for xb, yb in loader:
            np.testing.assert_array_equal(xb[..., 0] // 10, yb["segmentation_masks"])
    wrong = masks[:3] + [np.zeros((5, 5), np.uint8)] + masks[4:]
    with pytest.raises(shmaug.ArgumentError, match=r"The mask of sample 3 is 5x5 pixels \(height "
                                                   r"x width\) and its image \d+x\d+"):
        shmaug.Loader(images, {"segmentation_masks": wrong}, batch_size=5, augment=nearest,
                      workers=0)


def test_boxes_beside_images_of_several_sizes_are_checked_against_each_image():
    # (the checks needed one image size: boxes in another format became padding, one outside
    # its image was clipped, fractions under a pixel format were taken, without a word)
    images = [np.zeros((60, 80, 3), np.uint8), np.zeros((100, 50, 3), np.uint8)]
    pipe = Compose([Op("resize", height=32, width=32)], bounding_box_format="xyxy")

    def loader(boxes: list[list[float]]) -> shmaug.Loader:
        y = {"bounding_boxes": {"boxes": np.array(boxes, np.float32)[:, None, :],
                                "labels": np.zeros((2, 1), np.int64)}}
        return shmaug.Loader(images, y, batch_size=2, augment=pipe, workers=0)

    with loader([[5, 5, 40, 30], [10, 10, 40, 90]]) as fine:
        assert fine.batch(0)[1]["bounding_boxes"]["boxes"].shape == (2, 1, 4)
    with pytest.raises(shmaug.ArgumentError, match=r"end lies before its start"):
        loader([[5, 5, 40, 30], [30, 40, 10, 20]])  # (xywh read as xyxy)
    with pytest.raises(shmaug.ArgumentError, match=r"outside its 100x50 image"):
        loader([[5, 5, 40, 30], [10, 10, 75, 90]])  # (inside the 60x80 one, not its own)
    with pytest.raises(shmaug.ArgumentError, match=r"all within \[0, 1\]"):
        loader([[0.1, 0.1, 0.5, 0.5], [0.2, 0.2, 0.6, 0.9]])
