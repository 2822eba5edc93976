"""Keras' own PyDataset tests, ported to ``shmaug.Sequence``.

Sources (Keras 3, under ``keras/src/``): ``trainers/data_adapters/py_dataset_adapter_test.py``,
``trainers/epoch_iterator_test.py``, the PyDataset cases of ``trainers/trainer_test.py`` and
``layers/preprocessing/normalization_test.py``'s adapt-on-PyDataset. Each test keeps the
Keras name it comes from. Where shmaug intentionally differs, the test checks what shmaug does
instead, and where Keras tests something shmaug does not have (an endless PyDataset, a timing)
a comment in its place says what and why. Sizes are tiny: Keras' 2-D feature rows become 2x2
"images", which is what a Sequence takes, and the models are a Flatten and a Dense.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug  # noqa: E402
from tests import _ops  # noqa: E402
from tests._helpers import assert_same_batches  # noqa: E402

from keras.src.trainers import epoch_iterator  # noqa: E402
from keras.src.trainers.data_adapters import py_dataset_adapter  # noqa: E402

pytestmark = [pytest.mark.keras, pytest.mark.timeout(180), pytest.mark.slow]

N, BATCH = 64, 16
BACKEND = keras.backend.backend()


def native(adapter: py_dataset_adapter.PyDatasetAdapter) -> object:
    """The adapter's iterator for the backend running the suite (Keras' tests take each)."""
    return {"tensorflow": adapter.get_tf_dataset, "jax": adapter.get_jax_iterator,
            "torch": adapter.get_torch_dataloader}[BACKEND]()


def is_native(t: object) -> bool:
    """A tensor of the backend (JAX's iterator yields numpy arrays on the CPU)."""
    return bool(keras.ops.is_tensor(t)) or (BACKEND == "jax" and isinstance(t, np.ndarray))


def rows(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    """Keras' test data: x random, y[i] = (i, i); x as (n, 2, 2) images."""
    x = np.random.default_rng(1337).random((n, 2, 2)).astype("float32")
    y = np.array([[i, i] for i in range(n)], dtype="float32")
    return x, y


def sequence(x: np.ndarray, y: object = None, **kwargs: object) -> shmaug.Sequence:
    return shmaug.Sequence(x, y, **{"batch_size": BATCH, "workers": 1, "seed": 0, **kwargs})


def numpy_epoch(seq: shmaug.Sequence) -> list[tuple[np.ndarray, ...]]:
    """One epoch through Keras' adapter, in order (shuffle=False), as numpy arrays."""
    adapter = py_dataset_adapter.PyDatasetAdapter(seq, shuffle=False)
    assert adapter.enqueuer is None  # Keras adds no threads or processes of its own
    adapter.on_epoch_begin()
    batches = [tuple(np.asarray(t) for t in batch) for batch in adapter.get_numpy_iterator()]
    adapter.on_epoch_end()
    return batches


def tiny_model(outputs: int) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2, 2)), keras.layers.Flatten(),
                              keras.layers.Dense(outputs)])
    model.compile(optimizer="adagrad", loss="mse", metrics=["mse"])
    return model


# -- py_dataset_adapter_test.py ------------------------------------------------------------


@pytest.mark.parametrize("keras_shuffle", [False, True])
@pytest.mark.parametrize("iterator", ["native", "numpy"])
def test_basic_flow(keras_shuffle: bool, iterator: str) -> None:
    keras.utils.set_random_seed(1337)
    x, y = rows()
    with sequence(x, y) as seq:
        adapter = py_dataset_adapter.PyDatasetAdapter(seq, shuffle=keras_shuffle)
        it = native(adapter) if iterator == "native" else adapter.get_numpy_iterator()
        order = []
        adapter.on_epoch_begin()
        for batch in it:
            assert len(batch) == 2
            bx, by = batch
            for t in (bx, by):
                assert is_native(t) if iterator == "native" else isinstance(t, np.ndarray)
            assert bx.dtype == by.dtype and "float32" in str(bx.dtype)
            assert tuple(bx.shape) == (BATCH, 2, 2) and tuple(by.shape) == (BATCH, 2)
            order += [float(v) for v in np.asarray(by)[:, 0]]
        adapter.on_epoch_end()
    assert sorted(order) == list(range(N))
    if keras_shuffle:
        assert order != list(range(N))  # Keras asked for the batches in random order
    else:
        assert order == list(range(N))


# Not ported: test_basic_flow_infinite, test_epoch_callbacks_infinite and the py_dataset_infinite
# case of trainer_test. A shmaug.Sequence always has len(x) / batch_size batches (num_batches is
# never None): each epoch is planned as one permutation of the samples, and a sample's random
# stream and a saved state are keyed by (epoch, sample), so there is no endless variant to feed.


@pytest.mark.parametrize("use_multiprocessing", [True, False])
def test_basic_flow_multiprocessing_and_multithreading(use_multiprocessing: bool) -> None:
    """Keras' workers=2 flow with processes and with threads: shmaug runs 2 worker processes
    either way (use_multiprocessing=False is said, once, to change nothing), tells Keras
    workers=1 so that its adapter starts no enqueuer, and gives an in-process run's batches."""
    x, y = rows()
    with sequence(x, y, workers=0) as seq:
        expected = numpy_epoch(seq)
    said = (contextlib.nullcontext() if use_multiprocessing else
            pytest.warns(shmaug.ShmaugWarning, match="always runs its `workers` in processes"))
    with said:
        seq = sequence(x, y, workers=2, use_multiprocessing=use_multiprocessing)
    with seq:
        assert seq.workers == 1 and seq.use_multiprocessing is False  # what Keras reads
        got = numpy_epoch(seq)
        assert seq.loader.workers == 2
    assert_same_batches(got, expected)
    assert [float(v) for _, by in got for v in by[:, 0]] == list(range(N))


def test_basic_flow_single_tf_jax_torch() -> None:
    """Keras feeds x and y as tensors of the backend. shmaug copies x into shared memory from
    a numpy array: a tensor is refused before anything starts, naming `x` and the fix
    (np.asarray); after the fix the batches are the numpy array's. y may stay a tensor."""
    x, y = rows()
    refused = r"(?s)`x` must be a numpy array.*Fix: convert it with `np\.asarray\(x\)`"
    with pytest.raises(shmaug.ArgumentTypeError, match=refused):
        sequence(keras.ops.convert_to_tensor(x), y)
    with sequence(np.asarray(keras.ops.convert_to_tensor(x)),
                  keras.ops.convert_to_tensor(y)) as seq:
        got = numpy_epoch(seq)
    with sequence(x, y) as seq:
        assert_same_batches(got, numpy_epoch(seq))


def test_class_weight() -> None:
    x = np.random.default_rng(0).integers(1, 100, (4, 2, 2)).astype("float32")
    y = np.array([0, 1, 2, 1])
    class_w = {0: 2, 1: 1, 2: 3}
    with sequence(x, y, batch_size=2) as seq:
        adapter = py_dataset_adapter.PyDatasetAdapter(seq, shuffle=False, class_weight=class_w)
        batches = [[keras.ops.convert_to_numpy(t) for t in batch] for batch in native(adapter)]
    assert len(batches) == 2
    for index, batch in enumerate(batches):
        assert len(batch) == 3  # (x, y, class weight)
        for sub in range(2):
            np.testing.assert_array_equal(batch[0][sub], x[index * 2 + sub])
            assert batch[1][sub] == y[index * 2 + sub]
            assert batch[2][sub] == class_w[int(batch[1][sub])]


# Not ported: test_speedup. It asserts that Keras' workers beat none on the clock; timings live
# only in bench/ (house rule 10), where shmaug's speed-up against Keras' workers is measured,
# never in tests, which share 2 cores with another runner: `python -m bench.start_methods
# --pydataset` runs it as a user ports it (the augment's module defines Keras' PyDataset).
# What made it slow, a worker running Keras to import that module, is tested without a clock:
# test_lazy_frameworks.test_an_augment_from_a_module_that_uses_keras_at_import.


def test_dict_inputs() -> None:
    """Keras returns {'x', 'y'} as one dict of inputs; here 'x' is the image entry and 'y'
    another input, with no targets."""
    x, _ = rows(40)
    inputs = {"x": x, "y": np.random.default_rng(0).random((40, 2)).astype("float32")}
    with sequence(inputs, batch_size=4, image_key="x") as seq:
        adapter = py_dataset_adapter.PyDatasetAdapter(seq, shuffle=False)
        for batch in adapter.get_numpy_iterator():
            assert len(batch) == 2
            assert isinstance(batch["x"], np.ndarray) and isinstance(batch["y"], np.ndarray)
            assert batch["x"].dtype == batch["y"].dtype
            assert batch["x"].shape == (4, 2, 2) and batch["y"].shape == (4, 2)
        for batch in native(adapter):
            assert is_native(batch["x"]) and is_native(batch["y"])
            assert tuple(batch["x"].shape) == (4, 2, 2) and tuple(batch["y"].shape) == (4, 2)


def test_with_different_shapes() -> None:
    """Ported for what applies: the last batch may be smaller (16, 16, 2). Keras' other half,
    a feature size that changes from batch to batch, is refused on purpose: every sample of
    a Sequence has one shape (OutputMismatchError names the sample)."""
    x, y = rows(34)
    with sequence(x, y) as seq:
        adapter = py_dataset_adapter.PyDatasetAdapter(seq, shuffle=False)
        shapes = [(tuple(bx.shape), tuple(by.shape)) for bx, by in native(adapter)]
    assert shapes == [((16, 2, 2), (16, 2)), ((16, 2, 2), (16, 2)), ((2, 2, 2), (2, 2))]


@pytest.mark.parametrize("workers", [0, 2])
def test_exception_reported(workers: int) -> None:
    x = np.repeat(np.arange(32, dtype="float32"), 4).reshape(32, 2, 2)
    y = np.zeros((32, 2), "float32")
    with sequence(x, y, batch_size=8, augment=_ops.raise_from_batch_two, workers=workers) as seq:
        it = iter(native(py_dataset_adapter.PyDatasetAdapter(seq, shuffle=False)))
        next(it)
        next(it)
        # tf.data wraps the exception in its own InvalidArgumentError, as it does Keras' own
        with pytest.raises(Exception, match="Expected exception"):
            next(it)


def test_iterate_finite() -> None:
    with sequence(np.ones((6, 2, 2), "float32"), np.zeros((6, 2), "float32"),
                  batch_size=2) as seq:
        assert len([batch for batch in seq]) == 3


# -- epoch_iterator_test.py ----------------------------------------------------------------


class Tracked(shmaug.Sequence):
    """Keras' TestPyDataset.tracker: on_epoch_begin / on_epoch_end in order."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.tracker: list[int] = []

    def on_epoch_begin(self) -> None:
        super().on_epoch_begin()
        self.tracker.append(1)

    def on_epoch_end(self) -> None:
        super().on_epoch_end()
        self.tracker.append(2)


def test_epoch_callbacks() -> None:
    x, _ = rows()
    with Tracked(x, batch_size=BATCH, workers=1) as ds:
        it = epoch_iterator.EpochIterator(x=ds, steps_per_epoch=10)
        with warnings.catch_warnings():
            # Keras warns that 4 batches cannot fill steps_per_epoch=10, as in its own test.
            warnings.filterwarnings("ignore", "Your input ran out of data", UserWarning)
            for _ in range(5):
                for _ in it:
                    pass
        assert ds.tracker == [1, 2] * 5


# -- trainer_test.py -----------------------------------------------------------------------


@pytest.mark.parametrize("class_weight", [None, {0: 1.0, 1: 2.0, 2: 0.5}])
def test_fit_with_data_adapter(class_weight: dict[int, float] | None) -> None:
    """The py_dataset and py_dataset_cw cases: fit(Sequence, epochs=3), with class weights."""
    x, _ = rows(100)
    y = np.zeros((100, 3), "float32")
    if class_weight is not None:
        y = np.eye(3, dtype="float32")[np.arange(100) % 3]
    with sequence(x, y, batch_size=5) as seq:
        history = tiny_model(3).fit(seq, epochs=3, class_weight=class_weight, verbose=0)
    assert len(history.history["loss"]) == 3 and all(map(math.isfinite, history.history["loss"]))


class StepObserver(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.begin_count = self.end_count = self.epoch_begin_count = self.epoch_end_count = 0

    def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
        self.epoch_begin_count += 1

    def on_epoch_end(self, epoch: int, logs: object = None) -> None:
        self.epoch_end_count += 1

    def on_batch_begin(self, batch: int, logs: object = None) -> None:
        self.begin_count += 1

    def on_batch_end(self, batch: int, logs: object = None) -> None:
        self.end_count += 1


@pytest.mark.parametrize("steps_per_epoch_test", ["match_one_epoch", "match_multi_epoch",
                                                  "not_match_too_low",
                                                  "not_match_but_high_enough"])
def test_steps_per_epoch(steps_per_epoch_test: str) -> None:
    """Keras' expected step counts, with the data from a Sequence instead of arrays."""
    batch_size, epochs, num_batches = 8, 4, 10
    steps_per_epoch = {"match_one_epoch": num_batches,
                       "match_multi_epoch": num_batches // (epochs // 2),
                       "not_match_too_low": num_batches - 1,
                       "not_match_but_high_enough": num_batches + 1}[steps_per_epoch_test]
    x = np.ones((num_batches * batch_size, 2, 2), "float32")
    y = np.ones((num_batches * batch_size, 1), "float32")
    observer = StepObserver()
    with sequence(x, y, batch_size=batch_size, shuffle=True) as seq, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Your input ran out of data", UserWarning)
        tiny_model(1).fit(seq, epochs=epochs, steps_per_epoch=steps_per_epoch,
                          callbacks=[observer], verbose=0)
    if steps_per_epoch_test != "not_match_too_low":
        expected = epochs * min(steps_per_epoch, num_batches)
    else:
        cycles = [(num_batches // steps_per_epoch) * steps_per_epoch,
                  num_batches % steps_per_epoch] * epochs
        expected = sum(cycles[:epochs])
    assert observer.begin_count == expected
    assert observer.end_count == observer.begin_count
    assert observer.epoch_begin_count == epochs == observer.epoch_end_count


def test_fit_with_data_adapter_multiprocessing() -> None:
    """The py_dataset_multithreading / _multiprocessing cases (Keras' workers=2): fit on a
    Sequence whose 2 shmaug worker processes make the batches trains as the in-process one
    does, to the same losses (py_dataset_infinite: see the note after test_basic_flow)."""
    x, _ = rows(100)
    y = np.eye(3, dtype="float32")[np.arange(100) % 3]
    losses = {}
    for workers in (0, 2):
        with sequence(x, y, batch_size=5, workers=workers, use_multiprocessing=True) as seq:
            losses[workers] = tiny_model(3).fit(seq, epochs=3, verbose=0).history["loss"]
    assert len(losses[2]) == 3 and all(map(math.isfinite, losses[2]))
    np.testing.assert_allclose(losses[2], losses[0], rtol=1e-6)


def test_evaluate_and_predict_flow() -> None:
    """trainer_test's evaluate / predict on a PyDataset: every sample, in order."""
    x, y = rows(40)
    model = tiny_model(2)
    with sequence(x, y, batch_size=8) as seq:
        loss = model.evaluate(seq, verbose=0)
        predicted = model.predict(seq, verbose=0)
    assert math.isfinite(loss[0])
    np.testing.assert_allclose(predicted, model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


# -- layers/preprocessing/normalization_test.py --------------------------------------------


@pytest.mark.parametrize("pydataset_type", ["x", "x_and_y", "x_y_and_weights"])
def test_adapt_pydataset_compat(pydataset_type: str) -> None:
    pytest.importorskip("tensorflow")  # Keras' adapt() reads a PyDataset through tf.data
    n = 64
    x = np.random.default_rng(0).random((n, 4, 4, 3)).astype("float32")
    y = np.random.default_rng(1).integers(0, 10, (n, 1))
    weights = np.random.default_rng(2).integers(0, 10, (n, 1)).astype("float32")
    args = {"x": (x,), "x_and_y": (x, y), "x_y_and_weights": (x, y)}[pydataset_type]
    extra = {"sample_weight": weights} if pydataset_type == "x_y_and_weights" else {}
    normalizer = keras.layers.Normalization()
    with sequence(*args, batch_size=8, augment=_ops.identity, **extra) as seq:
        normalizer.adapt(seq)
    assert normalizer.built
    assert normalizer.mean is not None and normalizer.variance is not None
    assert normalizer.mean.shape[-1] == 3 and normalizer.variance.shape[-1] == 3
    np.testing.assert_allclose(np.asarray(normalizer.mean).ravel(),
                               x.reshape(-1, 3).mean(axis=0), rtol=1e-4)
