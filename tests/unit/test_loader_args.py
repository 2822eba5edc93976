"""Bad arguments fail fast, before any process starts, with a message that helps."""

from __future__ import annotations

import functools
import re

from typing import Any

import numpy as np
import psutil
import pytest

import shmaug
from shmaug.engine.workers.launch import default_start_method
from tests import _ops

X = np.zeros((10, 4, 4), np.uint8)


def closure_op():
    scale = 2

    def op(image, rng):
        return image * scale

    return op


class _MovesTargetsOnly:
    """A microscopist's crop that picks its window by the labels: no __call__."""

    target_names = ("segmentation_masks",)

    def augment_targets(self, image: np.ndarray, targets: dict, rng: np.random.Generator):
        return image, targets


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(x=np.zeros((0, 4, 4), np.uint8)), ValueError, "`x` is empty"),
        (dict(x=[[1, 2]]), TypeError, r"`x` as a list must hold images.*np.stack"),
        (dict(x=(X[0], X[1][:2])), TypeError, r"`x` as a tuple must hold images.*image_key"),
        (dict(x={1, 2}), TypeError, r"`x` must be a numpy array.*set"),
        (dict(x=np.zeros((10, 4), np.uint8)), ValueError, r"shape \(N, H, W\)"),
        (dict(x=np.array([["a"] * 4] * 10)[:, :, None, None].repeat(2, 2)), TypeError, "numeric dtype"),
        (dict(x=np.empty((10, 4, 4), object)), TypeError, "numeric dtype"),
        (dict(y=np.arange(9)), ValueError, r"`y` must have one entry per sample.*\(10\).*9 entries"),
        (dict(y={"a": np.arange(3)}), ValueError, r"`y\['a'\]`"),
        (dict(batch_size=0), ValueError, r"`batch_size` must be a positive integer.*0 \(type int\)"),
        (dict(batch_size=-3), ValueError, "`batch_size`"),
        (dict(batch_size=2.5), ValueError, r"2.5 \(type float\)"),
        (dict(workers=-1), ValueError, "`workers`"),
        (dict(workers="max"), ValueError, r"`workers` must be None.*\"auto\".*'max' \(type str\)"),
        (dict(seed="x"), ValueError, "`seed`"),
        (dict(start_method="thread"), ValueError, "`start_method`"),
        (dict(max_queue_size=0), ValueError, "`max_queue_size`"),
        (dict(timeout=0), ValueError, "`timeout`"),
        (dict(augment="rotate"), TypeError, "`augment` must be a callable"),
        (dict(augment=_MovesTargetsOnly()), TypeError,
         r"moves targets \(`augment_targets`\) but is not called.*def __call__\(self, image, "
         r"rng\): return self.augment_targets\(image, \{\}, rng\)\[0\]"),
        (dict(augment=lambda image, rng: image), TypeError, r"lambda.*module level"),
        (dict(augment=closure_op()), TypeError, "module level"),
        (dict(batch_size=20, drop_remainder=True), ValueError, "no batch"),
        (dict(augment=shmaug.ops.Op), TypeError,
         r"received the class shmaug.ops.core.Op itself.*`augment=Op\(\"rotate\""),
        (dict(augment=shmaug.ops.FromPil), TypeError, r"class .*FromPil itself.*FromPil\(\.\.\.\)"),
        (dict(shuffle="no"), TypeError,
         r"`shuffle` must be True, False, None or \"blocks\"; received 'no'"),
        (dict(shuffle=1), TypeError, "`shuffle` must be True, False, None or"),
        (dict(drop_remainder="yes"), TypeError, "`drop_remainder` must be True or False"),
        (dict(copy=None), TypeError, "`copy` must be True or False"),
        (dict(pin_memory="yes"), TypeError, "`pin_memory` must be True or False"),
        (dict(x=np.zeros((10, 0, 16), np.uint8)), ValueError, r"no pixels: shape \(10, 0, 16\)"),
        (dict(x=np.zeros((10, 4, 0), np.uint8), augment=None), ValueError, "no pixels"),
        (dict(output_shape=(4.5, 4)), ValueError, r"`output_shape` must be a tuple of positive"),
        (dict(output_shape="4,4"), ValueError, r"`output_shape`.*'4,4' \(type str\)"),
        (dict(samples_per_epoch="10"), ValueError, r"`samples_per_epoch` must be a positive"),
        (dict(shuffle_window=8.0), ValueError, r"`shuffle_window` must be a positive integer"),
    ],
)
def test_bad_arguments_raise_before_any_process(kwargs, error, pattern):
    """(16.5 in a shape was cut to 16; '4,4' failed in int() naming nothing; a count of the
    wrong type was told first of what it asked beside, the type's fix only after.)"""
    children = psutil.Process().children()
    kwargs = {"x": X, "batch_size": 4, "augment": _ops.identity, "workers": 2, **kwargs}
    x = kwargs.pop("x")
    with pytest.raises(error, match=pattern) as info:
        shmaug.Loader(x, **kwargs)
    assert isinstance(info.value, shmaug.ShmaugError)
    assert psutil.Process().children() == children


GLYPHS = shmaug.presets.glyph_distort()


@pytest.mark.parametrize("dtype, fix", [
    (bool, r"np.asarray\(x, np.uint8\) \* 255"),
    (np.int64, r"np.asarray\(x, np.uint8\) for values in 0..255.*value_range"),
    (np.int32, r"np.asarray\(x, np.uint8\)"), (np.int16, r"np.asarray\(x, np.uint8\)"),
    (np.int8, r"np.asarray\(x, np.uint8\)"), (np.uint32, r"np.asarray\(x, np.uint16\)"),
])
@pytest.mark.parametrize("entry", ["Loader", "Sequence"])
def test_dtypes_shmaugs_ops_do_not_take_are_refused_before_any_process(dtype, fix, entry):
    if entry == "Sequence":
        pytest.importorskip("keras")
    children = psutil.Process().children()
    with pytest.raises(shmaug.ArgumentTypeError,
                       match=rf"`x` has dtype {np.dtype(dtype)}.*uint8, uint16, float16, "
                             rf"float32, float64.*Fix: .*{fix}"):
        getattr(shmaug, entry)(X.astype(dtype), batch_size=4, augment=GLYPHS, workers=2)
    assert psutil.Process().children() == children
    # A plain function of the user's takes whatever it takes.
    with shmaug.Loader(X.astype(dtype), batch_size=4, augment=_ops.identity, workers=0) as ok:
        assert ok.batch(0)[0].dtype == dtype


@pytest.mark.parametrize("x, fix", [
    (np.zeros((6, 784), np.uint8), r"x\.reshape\(-1, 28, 28\)"),  # MNIST, flattened
    (np.zeros((6, 3, 16, 16, 3), np.uint8), r"\(N, T, H, W, C\).*x\.transpose\(0, 2, 3, 1, 4\)"),
    ({"image": X, "meta": np.zeros((len(X), 2))}, r"shmaug\.Sequence\(x, y, image_key=")])
def test_an_x_of_another_layout_is_told_the_fix_for_its_layout(x, fix):
    """Video was told `x.reshape(N, H, W)`, and a dict of inputs `np.asarray(x)`."""
    with pytest.raises((shmaug.ArgumentError, shmaug.ArgumentTypeError), match=fix):
        shmaug.Loader(x, batch_size=4, workers=0)
    if isinstance(x, np.ndarray) and x.ndim == 5:  # the fix, taken: the frames move together
        n, t, h, w, c = x.shape
        folded = x.transpose(0, 2, 3, 1, 4).reshape(n, h, w, t * c)
        with shmaug.Loader(folded, batch_size=4, augment=GLYPHS, workers=0) as ok:
            assert ok.output_shape == (h, w, t * c)


def _generator_first(rng: np.random.Generator, image: np.ndarray) -> np.ndarray:
    return image


def _needs_options(image: np.ndarray, rng: np.random.Generator, strength: float, *,
                   kernel: int) -> np.ndarray:
    return image


def _positional_options(image: np.ndarray, rng: np.random.Generator, strength: float,
                        /) -> np.ndarray:
    return image


@pytest.mark.parametrize("augment, fix", [
    (_positional_options, r"which cannot be called so"),  # (no keyword binds it: no partial)
    (shmaug.presets.light, r"preset light itself.*augment=shmaug\.presets\.light\(\)"),
    (_generator_first, r"takes the generator first \(`rng`\).*def _generator_first\(image, "
                       r"rng\)"),
    (_needs_options, r"also needs `strength`, `kernel`, which nothing passes\. Fix: bind them, "
                     r"`augment=functools\.partial\(_needs_options, strength=\.\.\.\)`")])
def test_a_beginners_augment_is_told_its_own_fix(augment, fix):
    """They were told to wrap fn(image) code (an uncalled preset), or that the augment
    returned a Generator (its parameters swapped), at sample 0; an op short of its options
    to wrap it in `from_array(functools.partial(...))`, which was then refused (a migrator's
    reviewer): the partial alone is the fix."""
    with pytest.raises(shmaug.ArgumentTypeError, match=fix):
        shmaug.Loader(X, batch_size=4, augment=augment, workers=0)
    if augment is _needs_options:  # the fix, taken
        bound = functools.partial(_needs_options, strength=0.5, kernel=3)
        with shmaug.Loader(X, batch_size=4, augment=bound, workers=0) as ok:
            assert (ok.batch(0)[0] == X[:4]).all()


class _MapStyle:
    """A torch map-style dataset: (image, label) by index."""

    def __len__(self) -> int:
        return len(X)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return X[index], index % 2


class _MapStyleWithLoad(_MapStyle):
    def load(self, index: int) -> np.ndarray:
        return np.asarray(self[index][0])


def test_a_map_style_dataset_is_told_the_load_that_makes_it_a_source():
    """It was told `np.asarray(x)`, which fails on (image, label) pairs, or never returns."""
    with pytest.raises(shmaug.ArgumentTypeError, match=r"map-style Dataset.*def load\(self, "
                                                       r"index\): return np.asarray\(self"):
        shmaug.Loader(_MapStyle(), batch_size=4, workers=0)
    with shmaug.Loader(_MapStyleWithLoad(), batch_size=4, augment=_ops.identity,
                       workers=0) as ok:
        np.testing.assert_array_equal(ok.batch(0)[0], X[:4])


class _IterOnly:
    """A torch IterableDataset's shape: it iterates, and is read by no index."""

    def __iter__(self):
        for i in range(len(X)):
            yield X[i], i % 2


def test_streams_and_pairs_are_told_what_collects_them():
    """Fifth review: an object that only iterates (an IterableDataset), a Hugging Face
    dataset and a list of (image, label) pairs were told `np.asarray(x)`, which then failed
    ("shape ()", or numpy's "inhomogeneous shape")."""
    with pytest.raises(shmaug.ArgumentTypeError, match=r"one at a time.*images, labels = "
                                                       r"map\(np\.stack, zip\(\*samples\)\)"):
        shmaug.Loader(_IterOnly(), batch_size=4, workers=0)
    pairs = list(_IterOnly())
    with pytest.raises(shmaug.ArgumentTypeError, match=r"\(image, label\) pairs.*images, "
                                                       r"labels = map\(np\.stack, zip\(\*x\)\)"):
        shmaug.Loader(pairs, batch_size=4, workers=0)
    images, labels = map(np.stack, zip(*pairs))  # (the fix, as told)
    with shmaug.Loader(images, labels, batch_size=4, workers=0) as ok:
        np.testing.assert_array_equal(ok.batch(0)[0], X[:4])
    class IterableDataset:  # torch's layout: Dataset's __getitem__, which raises
        def __getitem__(self, index):
            raise NotImplementedError

    class Stream(IterableDataset):
        def __len__(self):
            return len(X)

        def __iter__(self):
            return iter(_IterOnly())

    with pytest.raises(shmaug.ArgumentTypeError, match=r"one at a time.*np\.stack\(list\("
                                                       r"samples\)\)` for images"):
        shmaug.Loader(Stream(), batch_size=4, workers=0)
    own = type("Faces", (_MapStyle,), {"__module__": "datasets"})  # a project's datasets.py
    with pytest.raises(shmaug.ArgumentTypeError, match=r"map-style Dataset"):
        shmaug.Loader(own(), batch_size=4, workers=0)
    frames = [(X[i], X[i + 1]) for i in range(4)]  # frame pairs: no labels to split off
    with shmaug.Loader(frames, batch_size=2, workers=0) as ok:
        assert ok.batch(0)[0].shape[0] == 2
    datasets = pytest.importorskip("datasets")
    table = datasets.Dataset.from_dict({"image": [x.tolist() for x in X[:4]], "label": [0] * 4})
    with pytest.raises(shmaug.ArgumentTypeError, match=r"a Hugging Face dataset.*"
                                                       r"from_huggingface.*with_format"):
        shmaug.Loader(table, batch_size=2, workers=0)
    np.testing.assert_array_equal(np.stack(table.with_format("numpy")["image"]), X[:4])


def test_an_array_kept_on_disk_is_told_the_memory_map_and_the_source_beside_asarray(tmp_path):
    """An HDF5 user was told `np.asarray(x)` alone: 50,000 images read into RAM, then copied
    into shared memory."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "faces.h5", "w") as f:
        f["images"] = X
    with h5py.File(tmp_path / "faces.h5", "r") as f:
        with pytest.raises(shmaug.ArgumentTypeError, match=r"kept on disk.*np.asarray\(x\)` "
                           r"where it fits in memory.*open_memmap.*load\(self, index\)"):
            shmaug.Loader(f["images"], batch_size=4, workers=0)


class _Bfloat16Tensor:
    """What numpy makes of a torch bfloat16 tensor: a TypeError."""

    def __len__(self) -> int:
        return len(X)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        raise TypeError("Got unsupported ScalarType BFloat16")


def test_labels_numpy_cannot_read_name_y_and_the_fix():
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`y` could not be read as a numpy "
                                                       r"array \(Got unsupported.*y\.float\(\)"):
        shmaug.Loader(X, _Bfloat16Tensor(), batch_size=4, workers=0)


class _LoadsPairs(_MapStyle):
    def load(self, index: int) -> tuple[np.ndarray, int]:
        return self[index]


@pytest.mark.parametrize("augment", [None, GLYPHS])
def test_a_load_that_returns_image_and_label_is_told_to_return_the_image(augment):
    """The pair reached shmaug's ops, or the batch: numpy's "inhomogeneous shape"."""
    with pytest.raises(shmaug.ArgumentTypeError,
                       match=r"_LoadsPairs.load` returned a tuple of 2 for sample index 0.*"
                             r"labels as `y`"):
        shmaug.Loader(_LoadsPairs(), batch_size=4, augment=augment, workers=0)


def _fused(pair: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    return np.concatenate([pair[0][..., None], pair[1][..., None]], axis=-1)


class _Stereo(_MapStyle):
    def load(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return X[index], X[index][:, ::-1]


def test_a_function_of_the_users_takes_what_its_own_load_returns():
    with shmaug.Loader(_Stereo(), batch_size=4, augment=_fused, workers=0) as ok:
        assert ok.batch(0)[0].shape == (4, 4, 4, 2)


@pytest.mark.parametrize("shape", [(6, 3, 32, 32), (6, 1, 28, 28), (6, 4, 16, 20),
                                   (6, 2, 32, 32)])
def test_channels_first_images_are_refused_with_the_fix_for_shmaugs_ops(shape):
    x = np.zeros(shape, np.uint8)
    n, c, h, w = shape
    with pytest.raises(shmaug.ArgumentError,
                       match=rf"channels-first layout \(N, C, H, W\).*np.moveaxis\(x, 1, -1\) "
                             rf"\(shape \({n}, {h}, {w}, {c}\);"):
        shmaug.Loader(x, batch_size=4, augment=GLYPHS, workers=2)
    with shmaug.Loader(np.moveaxis(x, 1, -1), batch_size=4, augment=GLYPHS, workers=0) as ok:
        assert ok.output_shape == (h, w, c)
    # Multispectral patches (8x8 of 13 bands, 9x9 of 100, Pavia's 32x64 of 103) stay
    # allowed, as channels-last images with 3 or 4 rows do, and so does any layout a plain
    # function of the user's (a PyTorch-style CHW op) or no augmentation reads.
    for kept in ((6, 3, 32, 3), (6, 8, 8, 13), (6, 9, 9, 100), (6, 64, 64, 64),
                 (6, 32, 64, 103), (6, 32, 64, 64), (6, 20, 64, 48)):  # (folded clips too)
        with shmaug.Loader(np.zeros(kept, np.uint8), batch_size=4, augment=GLYPHS,
                           workers=0):
            pass
    with shmaug.Loader(x, batch_size=4, augment=_ops.identity, workers=0) as plain:
        assert plain.output_shape == shape[1:]


@pytest.mark.parametrize("shape", [(6, 8, 64, 64), (6, 21, 64, 64)])
def test_grey_clips_frames_first_are_told_and_bands_as_many_as_columns_pass(shape):
    """(N, 8, 64, 64): grey clips of 8 frames, taken as 8x64 images of 64 channels whose
    rotation blended neighbouring frames, without a word. Told, not refused: 21x64 patches
    of 64 bands are real too (the first diff review: refused, they had no way past)."""
    x = np.zeros(shape, np.uint8)
    with pytest.warns(shmaug.ShmaugWarning, match=rf"`x` has shape .*{shape[1]} grey frames.*"
                                                   r"np.moveaxis\(x, 1, -1\).*images of 64 bands"):
        shmaug.Loader(x, batch_size=4, augment=GLYPHS, workers=0).close()


class ChannelsFirstStore:
    """Samples made channels-first by ``load`` (a CHW store): refused at sample 0 as an array
    of them is before any process starts (they were rotated as 3 rows of 32 channels)."""

    def __len__(self):
        return 8

    def load(self, index):
        return np.zeros((3, 32, 32), np.uint8)


@pytest.mark.parametrize("workers", [0, 1])
def test_channels_first_samples_made_by_load_are_refused_at_sample_0(workers):
    with pytest.raises(shmaug.ArgumentError,
                       match=r"`image` has shape \(3, 32, 32\), the channels-first layout "
                             r"\(C, H, W\).*np.moveaxis\(image, 0, -1\)"):
        with shmaug.Loader(ChannelsFirstStore(), batch_size=4, augment=GLYPHS,
                           workers=workers) as loader:
            loader.batch(0)


MASKS = np.zeros((len(X), *X.shape[1:3]), np.uint8)


@pytest.mark.parametrize("y,where", [(MASKS, "`y`"), (MASKS[..., None], "`y`"),
                                     ({"depth": MASKS}, r"`y\['depth'\]`"),
                                     ((np.zeros(len(X)), MASKS), r"`y\[1\]`")])
def test_a_plane_per_sample_under_no_moved_name_is_refused_where_pixels_move(y, where):
    """Keras' ``fit(images, masks)``: the masks stayed where the images were rotated from."""
    with pytest.raises(shmaug.ArgumentError, match=rf"{where} holds an array of shape .*"
                                                    r"segmentation_masks"):
        shmaug.Loader(X, y, batch_size=4, augment=shmaug.ops.Op("rotate", degrees=10))
    # named so it moves; or nothing moves
    shmaug.Loader(X, {"segmentation_masks": MASKS}, batch_size=4, workers=0, augment=(
        shmaug.ops.Compose([shmaug.ops.Op("rotate", degrees=10)]))).close()
    shmaug.Loader(X, y, batch_size=4, workers=0,
                  augment=shmaug.ops.Op("brightness_contrast")).close()
    # a function that declares nothing may move no pixel (a noise, for a denoising model)
    shmaug.Loader(X, y, batch_size=4, workers=0, augment=_ops.noisy).close()



PHOTOS = np.zeros((8, 32, 32, 3), np.uint8)


@pytest.mark.parametrize("y,says", [
    (np.zeros((8, 1, 32, 32), np.float32), r"channels first .*np\.moveaxis\(y, 1, -1\)"),
    ({"depth": np.zeros((8, 2, 32, 32), np.float32)},
     r"`y\['depth'\]` .*channels first .*np\.moveaxis\(y\['depth'\], 1, -1\)")])
def test_a_map_channels_first_is_refused_where_pixels_move(y, says):
    """A depth map stored (N, 1, H, W) as PyTorch keeps it was passed on unmoved while its
    images were flipped, without a word."""
    with pytest.raises(shmaug.ArgumentError, match=says):
        shmaug.Loader(PHOTOS, y, batch_size=4, augment=shmaug.ops.Op("hflip"))
    shmaug.Loader(PHOTOS, y, batch_size=4, workers=0,
                  augment=shmaug.ops.Op("brightness_contrast")).close()


@pytest.mark.parametrize("y,says", [
    (np.zeros((8, 64, 64, 3), np.uint8), r"`y` .*at 2x their size.*super-resolution pair"),
    ({"heatmap": np.zeros((8, 8, 8, 5), np.float32)}, r"`y\['heatmap'\]` .*at 1/4 of their"),
    (np.zeros((8, 16, 16)), r"`y` .*at 1/2 of their size.*if it is no map, ignore")])
def test_an_array_at_another_scale_of_the_images_is_told_where_pixels_move(y, says):
    """A super-resolution target at 2x, a heatmap at 1/4: passed on unmoved while their images
    were flipped, without a word. Told, not refused: a per-sample matrix (16x16 beside 32x32
    images) may have such a shape and no place on the image."""
    with pytest.warns(shmaug.ShmaugWarning, match=says):
        shmaug.Loader(PHOTOS, y, batch_size=4, workers=0,
                      augment=shmaug.ops.Compose([shmaug.ops.Op("hflip")])).close()
    shmaug.Loader(PHOTOS, y, batch_size=4, workers=0,  # (warnings are errors here)
                  augment=shmaug.ops.Op("brightness_contrast")).close()
    for small in (np.zeros((8, 3, 3)), np.zeros((8, 4, 4)), np.zeros((8, 10, 10))):
        shmaug.Loader(PHOTOS, small, batch_size=4, workers=0, augment=(
            shmaug.ops.Compose([shmaug.ops.Op("hflip")]))).close()

def test_shared_memory_shortage_says_how_much_and_how_to_fix():
    with pytest.raises(shmaug.SharedMemoryError, match=r"needs [\d,]+ bytes.*the output ring "
                       r"[\d,]+ bytes.*[\d,]+ bytes \([\d,.]+ MiB\) free.*--shm-size"):
        shmaug.Loader(X, batch_size=4096, augment=_ops.identity, workers=1,
                      output_shape=(4096, 4096, 3), output_dtype="float32", max_queue_size=4096)


@pytest.fixture
def small_shm(monkeypatch):
    """/dev/shm with ``small_shm.free`` bytes free; ``small_shm.blocks``: what the dataset's
    shared block held when the whole need was checked (a view dies with its block)."""
    from shmaug.engine.handoff import ring
    from shmaug.memory import store

    if store.free_shm_bytes() is None:
        pytest.skip("no /dev/shm to measure here")

    class Shm:
        free = 0
        views: list = []
        blocks: list = []

    monkeypatch.setattr(store, "free_shm_bytes", lambda needed=0: Shm.free)
    put, check_need = store.SharedStore.put, ring.check_need

    def spied_put(self, array, **kwargs):
        handle, view = put(self, array, **kwargs)
        Shm.views.append(view)
        return handle, view

    def spied_check(*args, **kwargs):
        Shm.blocks[:] = [view.copy() for view in Shm.views]
        return check_need(*args, **kwargs)

    monkeypatch.setattr(store.SharedStore, "put", spied_put)
    monkeypatch.setattr(ring, "check_need", spied_check)
    return Shm


def test_a_ring_too_large_is_refused_with_a_smaller_queue_before_the_data_is_copied(small_shm):
    x = np.arange(1, 10 * 16 + 1, dtype=np.uint8).reshape(10, 4, 4)  # 160 bytes, no zero
    small_shm.free = 200_000  # the 64x64 float32 ring: 8 batches of 65,536 bytes
    with pytest.raises(shmaug.SharedMemoryError) as info:  # 8 as given: kept, so refused
        shmaug.Loader(x, batch_size=4, augment=_ops.upscaled_float, workers=0,
                      max_queue_size=8)
    text = str(info.value)
    assert "the output ring 524,288 bytes" in text and "max_queue_size=3 fits" in text, text
    assert ".npy" not in text  # the data fits: moving it to a file would not help
    assert (small_shm.blocks[0][0] == x[0]).all()  # sample 0, for the probe
    assert not small_shm.blocks[0][1:].any()  # and nothing else was copied
    with shmaug.Loader(x, batch_size=4, augment=_ops.upscaled_float, workers=0,
                       max_queue_size=3) as loader:  # the fix it names works
        np.testing.assert_array_equal(loader.batch(2)[0], [_ops.upscaled_float(s, None)
                                                           for s in x[8:]])


def test_data_too_large_is_refused_with_a_memory_map_before_any_process(small_shm):
    x = np.ones((100, 16, 16), np.uint8)  # 25,600 bytes
    small_shm.free = 20_000
    children = psutil.Process().children()
    with pytest.raises(shmaug.SharedMemoryError,
                       match=r"the dataset 25,600 bytes.*Fix: pass `x` as a path to a \.npy") \
            as info:
        shmaug.Loader(x, batch_size=4, augment=_ops.identity, workers=2)
    assert "max_queue_size" not in str(info.value) and not small_shm.views
    assert psutil.Process().children() == children


def test_data_and_ring_that_fit_only_apart_get_both_fixes(small_shm):
    x = np.ones((100, 16, 16), np.uint8)  # 25,600 bytes; a batch of 4 is 1,024
    small_shm.free = 30_000  # each fits, not both: the ring of 8 batches is 8,192
    with pytest.raises(shmaug.SharedMemoryError,
                       match=r"max_queue_size=4 fits\) or `batch_size`, or pass `x` as a path"):
        shmaug.Loader(x, batch_size=4, augment=_ops.identity, workers=0, max_queue_size=8)
    assert not small_shm.blocks[0][1:].any()


def test_the_default_queue_takes_what_its_memory_bound_holds_and_says_so(small_shm):
    x = np.arange(1, 10 * 16 + 1, dtype=np.uint8).reshape(10, 4, 4)  # 160 bytes
    small_shm.free = 200_000  # half of it, less the data: one batch of 65,536 bytes
    with shmaug.Loader(x, batch_size=4, augment=_ops.upscaled_float, workers=0) as loader:
        np.testing.assert_array_equal(loader.batch(2)[0], [_ops.upscaled_float(s, None)
                                                           for s in x[8:]])
        queue = loader.stats()["queue"]
    bound = (200_000 - 144) // 2  # the rows past sample 0 are still to be copied
    assert queue["slots"] == 1 and queue["bound_bytes"] == bound, queue
    assert f"its memory bound ({bound:,} bytes" in queue["why"], queue
    assert "would be 8" in queue["why"] and loader.max_queue_size is None, queue


def test_the_default_queue_leaves_room_for_the_data_still_to_be_copied(small_shm):
    x = np.ones((1000, 16, 16), np.uint8)  # 256,000 bytes; a batch of 4 is 1,024
    small_shm.free = 260_000
    with shmaug.Loader(x, batch_size=4, augment=_ops.identity, workers=0) as loader:
        queue = loader.stats()["queue"]
    assert queue["bound_bytes"] == (260_000 - 255_744) // 2 and queue["slots"] == 2, queue


def test_a_default_queue_with_no_room_for_one_batch_is_refused_naming_its_bound(small_shm):
    x = np.ones((10, 4, 4), np.uint8)
    small_shm.free = 60_000  # not one batch of 65,536 bytes
    with pytest.raises(shmaug.SharedMemoryError,
                       match=r"lower `batch_size` \(the queue holds one batch of 65,536 bytes "
                             r"already, 1 slots: the default for 0 workers.*its memory bound "
                             r"\(29,928 bytes"):
        shmaug.Loader(x, batch_size=4, augment=_ops.upscaled_float, workers=0)


def test_a_queue_size_given_is_kept_whatever_the_workers(small_shm):
    small_shm.free = 10**9
    with shmaug.Loader(X, batch_size=4, augment=_ops.identity, workers=0,
                       max_queue_size=3) as loader:
        queue = loader.stats()["queue"]
        assert loader.max_queue_size == 3 and "max_queue_size=3" in repr(loader)
    assert queue["slots"] == 3 and queue["why"] == "max_queue_size=3 as given", queue
    assert queue["bound_bytes"] is None


def _objects(*entries: Any) -> np.ndarray:
    out = np.empty(len(entries), object)
    out[:] = entries
    return out


@pytest.mark.parametrize("y, fix", [
    # a line's characters (OCR): "pad its entries, or pass a dict" (a dict failed alike)
    ([[1], [2, 3], [4], [5]], r"`y`.*shapes \(1,\), \(2,\)\. Fix: pad them.*pad_sequences\(y,"),
    ({"labels": [[1], [2, 3], [4], [5]]}, r"`y\['labels'\]`.*pad_sequences\(y\['labels'\],"),
    ([np.array([1]), np.array([2, 3]), np.array([4]), np.array([5])], r"pad_sequences"),
    # "convert it with np.asarray(y, dtype=...)", which raised numpy's "inhomogeneous shape"
    (_objects(np.array([1]), np.array([2, 3]), np.array([4]), np.array([5])), r"pad_sequences"),
    (_objects(*np.eye(4)), r"dtype object, of entries of shape \(4,\)\. Fix: `np.stack\(list\(y\)\)`"),
    (_objects(*(np.zeros((m, 4)) for m in (1, 2, 0, 3))), r"\(m, 4\) rows.*'bounding_boxes'"),
    # a microscopist's label images of several sizes were told to pad_sequences them (beside
    # a list of images of several sizes, they are taken: test_ragged_images.py)
    ({"segmentation_masks": [np.zeros((8 + i, 8 + i), np.uint16) for i in range(4)]},
     r"The mask of sample 1 is 9x9 pixels \(height x width\) and its image 8x8"),
    ({"segmentation_masks": [np.zeros((8 + i, 20), np.uint16) for i in range(4)]},
     r"The mask of sample 0 is 8x20 pixels"),
    ({"masks": [np.zeros((8 + i, 8 + i), np.uint8) for i in range(4)]},  # (K, H, W) each:
     r"maps of images of several sizes"),  # a worker raised a bare IndexError
    ({"masks": [np.zeros((k, 8, 8), np.uint8) for k in (1, 2, 0, 3)]},  # a mask per instance
     r"pad each to the largest count with 0"),
    ([np.zeros((m, 51), np.float32) for m in (1, 2, 0, 3)],  # COCO's 17 keypoints, flat
     r"pad each to the largest count with -1"),
], ids=["lists", "dict", "arrays", "objects", "objects-stacking", "boxes", "label-images",
        "label-images-one-width", "planes-as-instance-masks", "instance-masks",
        "flat-keypoints"])
def test_ragged_targets_name_the_argument_and_a_fix_that_works(y: Any, fix: str) -> None:
    x = np.zeros((4, 8, 8), np.uint8)
    with pytest.raises((shmaug.ArgumentError, shmaug.ArgumentTypeError), match=fix):
        shmaug.Loader(x, y, batch_size=2, workers=0)


def test_a_list_of_images_of_five_channels_is_stacked_where_a_label_each_says_so():
    """A microscopist's list of same-sized 5-channel images was refused "(C up to 4): resize
    them to one size", which they were."""
    images = [np.full((8, 8, 5), i, np.uint16) for i in range(4)]
    with shmaug.Loader(images, np.arange(4), batch_size=4, workers=0) as loader:
        np.testing.assert_array_equal(loader.batch(0)[0], np.stack(images))
    with pytest.raises(shmaug.ArgumentTypeError, match=r"4 arrays of shape \(8, 8, 5\): images "
                                                       r"of 5 channels.*`np.stack\(x\)`"):
        shmaug.Loader(images, batch_size=4, workers=0)


def test_a_drawn_seed_is_logged_to_repeat_the_run_from_its_log(caplog):
    with caplog.at_level("INFO", logger="shmaug.engine.config.options"):
        with shmaug.Loader(X, batch_size=4) as loader:
            pass
        with shmaug.Loader(X, batch_size=4, seed=3):
            pass
    said = [r.getMessage() for r in caplog.records if r.name == "shmaug.engine.config.options"]
    assert said == [f"seed=None drew seed={loader.seed}: pass seed={loader.seed} to repeat "
                    f"this run's order and augmentations"]


def test_repr_shows_the_settings_given_and_what_they_resolved_to():
    from shmaug import platform as _platform

    with shmaug.Loader(X, np.arange(10), batch_size=4, augment=_ops.identity, workers=0,
                       seed=7, shuffle=True, timeout=5, value_range=(0, 255)) as loader:
        text = repr(loader)
    assert text.startswith("shmaug.Loader(x=<uint8 array (10, 4, 4)>, y=<int64 array (10,)>, "
                           "batch_size=4, augment=<function identity"), text
    for part in ("workers=0", "seed=7,", "shuffle=True", "drop_remainder=False",
                 "max_queue_size=8 (default)", "timeout=5.0", "value_range=(0, 255)",
                 "output_shape=(4, 4)", "output_dtype=uint8"):
        assert part in text, (part, text)
    assert "copy=" not in text and "num_shards" not in text  # defaults left unsaid
    assert not text.endswith(" (closed)") and repr(loader).endswith(" (closed)")
    assert repr(loader).startswith(text[:70]), repr(loader)  # y: as given, not emptied
    with shmaug.Loader(X, batch_size=4) as loader:  # workers=None, seed=None: as resolved
        text = repr(loader)
    assert f"workers={_platform.cpu_count()} (none started: nothing to augment)" in text
    assert f"seed={loader.seed} (drawn: seed=None)" in text
    assert f"start_method='{default_start_method()}'" in text
    with shmaug.Loader([np.zeros((4, 4), np.uint8)] * 2000, batch_size=4) as loader:
        text = repr(loader)  # (a list of 50,000 images made a repr of a megabyte)
    assert text.startswith("shmaug.Loader(x=<list of 2000, the first <uint8 array (4, 4)>>, "), \
        text[:200]
    aug = shmaug.Compose([shmaug.OneOf(["rotate", "shear", "sine_warp"]),
                          shmaug.ops.Op("gaussian_blur", sigma=(0.5, 1.0))])
    with shmaug.Loader(X, batch_size=4, augment=aug, workers=0) as loader:
        assert f"augment={aug!r}, workers=0" in repr(loader)  # whole (it was cut at 100)


class StaticLoad:
    """Has a `load`, as tf.data.Dataset does (``Dataset.load(path)``), but no load(index)."""

    def __len__(self):
        return 10

    @staticmethod
    def load(path):
        return np.zeros((4, 4), np.uint8)


class Custom:
    """A custom source as documented: a length and a load(index) method."""

    def __len__(self):
        return 10

    def load(self, index):
        return np.full((4, 4), index, np.uint8)


class Reads:
    """A source whose `load` is a callable object of its own, as ImageFiles' and
    ImageRecords' readers are (an instance attribute, not a method)."""

    def __init__(self):
        self.load = functools.partial(np.full, (4, 4), dtype=np.uint8)

    def __len__(self):
        return 10


def test_an_object_whose_load_is_no_method_of_it_is_refused_at_construction():
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`load` attribute that is no method"):
        shmaug.Loader(StaticLoad(), workers=0)
    with shmaug.Loader(Custom(), batch_size=5, workers=0) as loader:  # still a source
        assert loader.batch(1)[0][:, 0, 0].tolist() == [5, 6, 7, 8, 9]
    with shmaug.Loader(Reads(), batch_size=5, workers=0) as loader:  # its own callable
        assert loader.batch(1)[0][:, 0, 0].tolist() == [5, 6, 7, 8, 9]


def test_a_tf_data_dataset_is_refused_naming_what_to_pass():
    tf = pytest.importorskip("tensorflow")
    ds = tf.data.Dataset.from_tensor_slices((np.zeros((10, 4, 4, 1), np.uint8), np.arange(10)))
    makers = [lambda: shmaug.Loader(ds, workers=0)]
    if pytest.importorskip("keras"):
        makers.append(lambda: shmaug.Sequence(ds, workers=0))
    for make in makers:
        with pytest.raises(shmaug.ArgumentTypeError, match=r"tf.data dataset") as info:
            make()
        assert "as_numpy_iterator" in str(info.value)
        # the stacking, run as written on the commonest dataset (its `ds.unbatch()` failed
        # there: "Cannot unbatch an input with scalar components", a migrator's reviewer)
        stacking = re.search(r"`x = (np\.stack\(.*?\))`", str(info.value))[1]
        assert eval(stacking, {"np": np, "ds": ds}).shape == (10, 4, 4, 1)
        # constructors that exist (tests/unit/test_fixes_name_real_calls.py runs them)
        assert "`shmaug.ImageFiles.from_directory(directory)`" in str(info.value)
        assert "`shmaug.ImageRecords.from_tfrecord(" in str(info.value)


def test_the_options_are_the_one_definition_of_the_loaders_keyword_arguments():
    """Every keyword argument of Loader but the data (x, y, load) is a field of one options
    group, by the same name and default, and every field a group takes is one of them: the
    flat arguments are passed to the groups by name (see the next test)."""
    import dataclasses
    import inspect

    from shmaug.engine.config.options import BatchOptions, OutputOptions, Settings, WorkerOptions

    groups = [f.type for f in dataclasses.fields(Settings)]
    assert groups == ["BatchOptions", "WorkerOptions", "OutputOptions"]
    fields = {f.name: f.default for kind in (BatchOptions, WorkerOptions, OutputOptions)
              for f in dataclasses.fields(kind) if f.init}
    assert len(fields) == sum(len([f for f in dataclasses.fields(k) if f.init])
                              for k in (BatchOptions, WorkerOptions, OutputOptions))
    arguments = {name: p.default for name, p in inspect.signature(shmaug.Loader).parameters.items()
                 if name not in ("x", "y", "load")}
    assert arguments == fields


def _group_calls(function) -> dict[str, dict[str, str | None]]:
    """The keywords ``function`` passes to each options group, each with the name of the
    argument it passes (None: an expression)."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    calls: dict[str, dict[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("BatchOptions", "WorkerOptions", "OutputOptions"):
            assert not node.args, f"{node.func.id} is given arguments by position"
            calls[node.func.id] = {k.arg: k.value.id if isinstance(k.value, ast.Name) else None
                                   for k in node.keywords if k.arg is not None}
    return calls


@pytest.mark.parametrize("maker", ["Loader", "Sequence"])
def test_loader_and_sequence_pass_each_argument_to_the_field_of_its_name(maker):
    """``Loader.__init__`` and ``Sequence.__init__`` each build the three groups, passing
    every argument by keyword to the field of the same name (a reader and mypy follow each
    one); a Sequence takes no ``copy``, and its ``pin_memory=None`` is decided at start."""
    import dataclasses
    import inspect

    from shmaug.engine.config.options import BatchOptions, OutputOptions, WorkerOptions

    if maker == "Sequence":
        pytest.importorskip("keras")
    cls = getattr(shmaug, maker)
    calls = _group_calls(cls.__init__)
    parameters = inspect.signature(cls).parameters
    for kind in (BatchOptions, WorkerOptions, OutputOptions):
        names = {f.name for f in dataclasses.fields(kind) if f.init}
        if maker == "Sequence" and kind is WorkerOptions:
            names.discard("copy")
        passed = calls[kind.__name__]
        assert set(passed) == names, (kind.__name__, set(passed) ^ names)
        for field_name, argument in passed.items():
            if maker == "Sequence" and field_name == "pin_memory":
                assert argument is None  # None decided at start: False until then
                continue
            assert argument == field_name, (kind.__name__, field_name, argument)
            assert field_name in parameters, field_name


def test_each_argument_is_checked_once_also_behind_a_sequence(monkeypatch):
    """A Sequence checks the Loader's arguments when it is made and hands the options to the
    loaders it starts: none is checked again (nor the data)."""
    pytest.importorskip("keras")
    from shmaug.engine.config import checks as _checks, inputs as _inputs, ranges as _ranges
    from shmaug.engine.plan import sampling as _sampling
    from shmaug.keras import _idle

    seen: list[str] = []

    def counting(module, name, label):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            seen.append(label(*args))
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    for name in ("positive_int", "boolean"):  # (check.shuffle asks boolean)
        counting(_checks, name, lambda name, *_: name)
    for name in ("workers", "seed", "start_method", "timeout", "sharded_plan", "queue_fits",
                 "queue_size"):
        counting(_checks, name, lambda *_, name=name: name)
    counting(_checks, "callable_or_none", lambda name, *_: name)
    for name in ("image_array", "augmented_targets"):
        counting(_inputs, name, lambda *_, name=name: name)
    for name in ("value_range", "resolve_range"):
        counting(_ranges, name, lambda *_, name=name: name)
    counting(_sampling, "weights", lambda *_: "sampling_weights")

    with shmaug.Sequence(X, np.arange(10), batch_size=4, augment=_ops.identity, workers=0,
                         seed=1, shuffle=True, timeout=5, max_queue_size=4) as seq:
        made = list(seen)
        seq[0]
        seq.loader.close()
        _idle.stop_if_idle(seq, float("inf"), 0.0)  # stopped; the next ask starts another one
        seq[1]
    assert seen == made, "the loaders a Sequence started checked again"
    assert sorted(made) == sorted(set(made)), made  # each once
    assert {"batch_size", "queue_size", "shuffle", "drop_remainder", "workers", "seed",
            "start_method", "timeout", "copy", "augment", "value_range", "sharded_plan",
            "queue_fits", "image_array", "sampling_weights"} <= set(made)


@pytest.mark.parametrize("name, value", [("augment", GLYPHS), ("batch_size", 2), ("seed", 3),
                                         ("mix", None), ("max_queue_size", 8)])
def test_a_setting_set_after_the_loader_is_made_is_refused_with_the_fix(name, value):
    """Accepted before, read back, and ignored by every batch (a progressive-resizing
    schedule trained on at the first size)."""
    with shmaug.Loader(X, batch_size=4, workers=0, seed=1) as loader:
        with pytest.raises(AttributeError, match=rf"`loader\.{name}` is fixed when the Loader "
                                                 rf"is made.*`new\.epoch = old\.epoch`"):
            setattr(loader, name, value)
        assert loader.batch_size == 4 and loader.seed == 1


def test_a_list_of_clips_is_told_to_stack_their_frames_as_channels() -> None:
    """64 clips of one shape were told to "resize them to one size and pass np.stack"."""
    clips = [np.zeros((8, 16, 16, 3), np.uint8)] * 4
    with pytest.raises(shmaug.ArgumentError, match=r"4 arrays of shape \(8, 16, 16, 3\), clips.*"
                                                   r"np.stack\(x\).*transpose\(0, 2, 3, 1, 4\)"
                                                   r".*open_memmap"):
        shmaug.Loader(clips, batch_size=2, workers=0)


def test_names_in_a_pandas_column_are_strings_and_a_closed_loader_is_no_context() -> None:
    """A column of class names (object dtype; pandas 3's str; a category) was refused as an
    object array, where the same names in a list were taken; `with` on a closed loader
    passed, to fail at its first batch."""
    pd = pytest.importorskip("pandas")
    names = ["cat", "dog", "cat", "bird"]
    for y in (pd.Series(names), pd.Series(names, dtype="category"), np.array(names, object)):
        with shmaug.Loader(np.zeros((4, 4, 4), np.uint8), y, batch_size=2, workers=0) as ok:
            assert ok.batch(1)[1].tolist() == ["cat", "bird"]
    with pytest.raises(shmaug.ArgumentTypeError, match=r"missing ones.*dtype=str"):
        shmaug.Loader(np.zeros((4, 4, 4), np.uint8), np.array(["a", None, "b", "c"], object))
    loader = shmaug.Loader(np.zeros((4, 4, 4), np.uint8), batch_size=2, workers=0)
    loader.close()
    with pytest.raises(shmaug.ClosedError):
        with loader:
            pass


def test_a_default_queue_cut_below_the_workers_by_its_memory_bound_is_warned_of(small_shm):
    """Docker's 64 MiB /dev/shm cut the default ring to one slot for two workers without a
    word (stats() alone said it): they waited for free slots, the fit 25% slower."""
    x = np.arange(1, 10 * 16 + 1, dtype=np.uint8).reshape(10, 4, 4)
    small_shm.free = 200_000  # one batch of 65,536 bytes within the bound
    with pytest.warns(shmaug.ShmaugWarning, match=r"holds 1 batch\(es\), too few for 2 "
                                                  r"workers.*Kubernetes: an emptyDir"), \
            shmaug.Loader(x, batch_size=4, augment=_ops.upscaled_float, workers=2) as loader:
        loader.batch(0)


def test_seed_none_follows_pythons_random_as_keras_layers_do():
    """`keras.utils.set_random_seed(42)` made Keras' random layers and tf.data's shuffle
    repeat a run, while seed=None drew from the OS: the same cross-validation gave other
    out-of-fold predictions each run. seed=None draws from Python's `random` now, which
    Keras seeds (and which is seeded from the OS where nothing seeds it)."""
    import random

    random.seed(42)
    with shmaug.Loader(X, batch_size=4) as first, shmaug.Loader(X, batch_size=4) as second:
        seeds = first.seed, second.seed
    assert seeds[0] != seeds[1]  # two loaders of one run: two streams
    random.seed(42)
    with shmaug.Loader(X, batch_size=4) as again:
        assert again.seed == seeds[0]
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(42)
    with shmaug.Sequence(X, batch_size=4) as seq:
        assert seq.seed == seeds[0]


def test_numpy_counts_and_lists_go_where_the_annotations_say_they_may():
    """The annotations say what the checks take (mypy --strict on a user's script): numpy's
    integers where a count goes, a list where a shape or a pair goes."""
    with shmaug.Loader(X, batch_size=np.int64(4), workers=np.int64(0), shuffle=np.bool_(True),
                       output_shape=[4, 4], value_range=[0, 255],
                       max_queue_size=np.int64(4)) as loader:
        assert (loader.batch_size, loader.output_shape, loader.value_range) == \
            (4, (4, 4), (0.0, 255.0))
        with pytest.raises(AttributeError, match=r"`loader.workers` is fixed when the Loader"):
            loader.workers = 2
