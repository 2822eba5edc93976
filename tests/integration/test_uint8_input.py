"""uint8 to the accelerator (issue 38 §3): a Sequence that hands Keras uint8 batches (a
quarter of float32's bytes through the hand-off) and a model that starts with ``Rescaling``
train as the same model fed float32 in [0, 1]; and float16 written by the workers."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug

pytestmark = [pytest.mark.keras, pytest.mark.timeout(240)]

N, SIDE, CLASSES = 48, 8, 3


def images() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (N, SIDE, SIDE, 3), dtype=np.uint8),
            (np.arange(N) % CLASSES).astype(np.int32))


def model(rescale: bool) -> keras.Model:
    keras.utils.set_random_seed(0)
    layers = [keras.Input((SIDE, SIDE, 3))]
    if rescale:
        layers.append(keras.layers.Rescaling(1 / 255))  # on the accelerator, in the model
    layers += [keras.layers.Flatten(), keras.layers.Dense(CLASSES, activation="softmax")]
    m = keras.Sequential(layers)
    m.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    return m


def trained(x: np.ndarray, y: np.ndarray, rescale: bool) -> list[np.ndarray]:
    m = model(rescale)
    with shmaug.Sequence(x, y, batch_size=8, augment=shmaug.Compose(["hflip", "vflip"]),
                         workers=2, seed=4) as seq:
        first, _ = seq.batch(0)
        assert first.dtype == x.dtype  # what crosses the hand-off
        m.fit(seq, epochs=2, verbose=0)
    return m.get_weights()


def test_uint8_and_rescaling_train_as_float32_does():
    x, y = images()
    fed_uint8 = trained(x, y, rescale=True)
    fed_float = trained(x.astype(np.float32) / 255, y, rescale=False)
    for a, b in zip(fed_uint8, fed_float):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_workers_write_float16_when_asked():
    x, y = images()
    with shmaug.Sequence(x, y, batch_size=8, augment=shmaug.Compose(["hflip"]), workers=2,
                         seed=4, output_dtype="float16") as half, \
            shmaug.Sequence(x, y, batch_size=8, augment=shmaug.Compose(["hflip"]), workers=0,
                            seed=4) as full:
        xb, _ = half.batch(1)
        assert xb.dtype == np.float16
        np.testing.assert_array_equal(xb, full.batch(1)[0].astype(np.float16))


def test_a_float16_batch_refuses_values_it_would_hold_as_inf():
    """16-bit pixels above 65504 (float16's largest) became inf in the batch with only
    numpy's overflow warning; they are refused, naming the fix. Values that fit still pass."""
    x = np.full((8, 16, 16, 1), 4000, np.uint16)
    x[3, 0, 0] = 65535
    augment = shmaug.Compose(["hflip"])
    with pytest.raises(shmaug.ArgumentError, match=r"holds larger values \(1 sample\(s\), the "
                                                   r"first: sample 3, up to 65535\).*x / x\.max"):
        shmaug.Loader(x, None, batch_size=8, workers=0, output_dtype=">f2")
    # (told before start: it was refused at its sample, mid-epoch; and '>f2' wrote inf); with
    # an augment, which may scale them, as each sample comes
    with shmaug.Loader(x, None, batch_size=8, augment=augment, workers=0,
                       output_dtype="float16") as loader:
        with pytest.raises(shmaug.OutputMismatchError, match=r"(?s)Sample index 3 .*65535"):
            loader.batch(0)
    inverted = shmaug.Compose([shmaug.ops.Op("invert", factor=(1.0, 1.0))])  # always:
    # 4000 -> 61535, 0 -> 65535
    x[3, 0, 0] = 4000
    x[5] = 0
    with shmaug.Loader(x, None, batch_size=8, augment=inverted, workers=0, seed=0,
                       output_dtype="float16") as loader:
        with pytest.raises(shmaug.OutputMismatchError, match=r"(?s)Sample index 5 .*65535.*"
                                                              r"inf.*output_dtype='float32'"):
            loader.batch(0)
    x[5] = 4000
    stars = np.full((2, 8, 8), 70.0, np.float32)
    stars[1, 0, 0], stars[1, 0, 1] = np.nan, 1e6  # a masked pixel hid the star from min/max
    with shmaug.Loader(stars, None, batch_size=2, workers=0, output_dtype="float16") as loader:
        with pytest.raises(shmaug.OutputMismatchError, match=r"Sample index 1 .*70\.\.1e\+06"):
            loader.batch(0)
    with shmaug.Loader(x[:3], None, batch_size=3, augment=augment, workers=0,
                       output_dtype="float16") as loader:
        assert loader.batch(0)[0].max() == 4000
    x[3, 0, 0] = 65519  # rounds to 65504, float16's largest: no inf
    with shmaug.Loader(x, None, batch_size=8, augment=augment, workers=0,
                       output_dtype="float16") as loader:
        assert loader.batch(0)[0].max() == 65504


def test_workers_write_bfloat16_and_the_model_trains_on_it():
    """``output_dtype="bfloat16"`` (ml_dtypes'): the workers write it, the batches a loop
    keeps (lent from their slot past the first two) keep the dtype, and ``fit`` takes them
    on each backend, training as on float32 within bfloat16's rounding."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x, y = images()
    floats = x.astype(np.float32) / 255
    augment = shmaug.Compose(["hflip"])
    with shmaug.Sequence(floats, y, batch_size=8, augment=augment, workers=2, seed=4,
                         output_dtype="bfloat16") as half, \
            shmaug.Sequence(floats, y, batch_size=8, augment=augment, workers=0,
                            seed=4) as full:
        kept = [xb for xb, _ in half]
        assert all(xb.dtype == np.dtype(ml_dtypes.bfloat16) for xb in kept)
        for i, xb in enumerate(kept):
            np.testing.assert_array_equal(xb, full.batch(i, in_order=True)[0].astype(xb.dtype))
        assert "output_dtype='bfloat16'" in repr(half)
    weights = []
    for dtype in ("bfloat16", None):
        m = model(rescale=False)
        with shmaug.Sequence(floats, y, batch_size=8, augment=augment, workers=2, seed=4,
                             output_dtype=dtype) as seq:
            m.fit(seq, epochs=2, verbose=0)
        weights.append(m.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, atol=0.02)


def test_bfloat16_images_are_told_to_go_in_as_float32():
    """(were told `x.astype(np.uint8)`, which makes [0, 1] data all zeros)"""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with pytest.raises(shmaug.ArgumentTypeError, match=r"received dtype bfloat16\. Fix: convert "
                                                       r"them once, `x\.astype\(np\.float32\)`"):
        shmaug.Loader(np.zeros((2, 4, 4), ml_dtypes.bfloat16), batch_size=2, workers=0)


def test_output_dtype_takes_a_frameworks_dtype_by_its_name():
    """(``tf.float16`` was refused as "not a numeric dtype")"""
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("ml_dtypes")
    for given, made in ((tf.float16, "float16"), (tf.bfloat16, "bfloat16")):
        with shmaug.Loader(np.zeros((2, 4, 4), np.uint8), batch_size=2, workers=0,
                           output_dtype=given) as loader:
            assert loader.batch(0)[0].dtype.name == made
    with pytest.raises(shmaug.ArgumentTypeError, match=r"received tf\.string"):
        shmaug.Loader(np.zeros((2, 4, 4), np.uint8), batch_size=2, output_dtype=tf.string)
