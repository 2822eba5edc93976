"""A short Model.fit on record sources, through shmaug.Sequence on the active Keras backend.

Two classes of 8x8 images, dark and bright, in WebDataset shards (written with tarfile, so this
runs on every backend) and in TFRecords (where TensorFlow is installed to write them): a tiny
CNN must learn them from records decoded in 2 workers.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug  # noqa: E402
from tests import _ops  # noqa: E402
from tests import records_data as D  # noqa: E402

pytestmark = [pytest.mark.keras, pytest.mark.timeout(240)]
N = 32


def pixels(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    base = 40 if i % 2 == 0 else 200
    return np.clip(base + rng.integers(-30, 30, (8, 8, 3)), 0, 255).astype(np.uint8)


def encoded(i: int) -> bytes:
    return cv2.imencode(".png", pixels(i))[1].tobytes()


def tars(folder) -> shmaug.ImageRecords:
    members = []
    for i in range(N):
        members += [(f"{i:04d}.png", encoded(i)), (f"{i:04d}.cls", str(i % 2).encode())]
    path = D.write_tar(folder / "train-0.tar", members)
    return shmaug.ImageRecords.from_webdataset(path, image_ext="png", image_size=(8, 8))


def tfrecords(folder) -> shmaug.ImageRecords:
    tf = pytest.importorskip("tensorflow")
    path = str(folder / "train.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(N):
            writer.write(D.example(i, i % 2, data=encoded(i)))
    return shmaug.ImageRecords.from_tfrecord(path, image_size=(8, 8))


@pytest.mark.parametrize("make", [tars, tfrecords])
def test_fit_learns_from_records(make, tmp_path):
    records = make(tmp_path)
    assert records.class_names == ("0", "1")
    with shmaug.Sequence(records, batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                         shuffle=True, value_range=(0, 255)) as seq:
        keras.utils.set_random_seed(0)
        # Centred inputs and a modest step: on uncentred 0..1 pixels, Adam(0.05) moved all 192
        # weights one way each step and the accuracy swung between 0.5 and 1 from seed to seed.
        model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Rescaling(2.0, offset=-1.0),
                                  keras.layers.Flatten(), keras.layers.Dense(2, "softmax")])
        model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy",
                      metrics=["accuracy"])
        history = model.fit(seq, epochs=5, verbose=0)
    accuracy = history.history["accuracy"]
    assert np.isfinite(history.history["loss"]).all()
    assert accuracy[-1] >= 0.9, accuracy
