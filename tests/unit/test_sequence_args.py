"""The Keras facade takes what a Keras user types: PyDataset's arguments, integer indices.

No process starts here (workers=0, or no batch asked for).
"""

from __future__ import annotations

import functools
import gc
import os
import warnings
import weakref

import numpy as np
import pytest

pytest.importorskip("keras")
pytestmark = pytest.mark.keras
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import shmaug  # noqa: E402

X = np.zeros((10, 4, 4), np.uint8)


@pytest.mark.parametrize("index", ["0", 1.5, None, (0,), True])
def test_a_non_integer_index_is_a_type_error_that_says_so(index):
    with shmaug.Sequence(X, batch_size=4, workers=0) as seq:
        with pytest.raises(shmaug.ArgumentTypeError, match=r"batch index must be an integer") \
                as info:
            seq[index]
    assert isinstance(info.value, TypeError)
    assert repr(index) in str(info.value)


def test_integer_indices_numpy_ones_and_negative_ones_work():
    with shmaug.Sequence(X, batch_size=4, workers=0) as seq:
        np.testing.assert_array_equal(seq[np.int64(1)], seq[1])
        np.testing.assert_array_equal(seq[-1], seq[2])
        assert len(seq[np.uint8(2)]) == 2  # the last, short batch
        with pytest.raises(IndexError, match=r"batch index 3 out of range for 3 batches"):
            seq[3]


def test_keras_pydataset_arguments_mean_shmaugs_workers_and_queue():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # True changes nothing, so nothing is said
        seq = shmaug.Sequence(X, batch_size=4, workers=0, use_multiprocessing=True,
                              max_queue_size=3)
    with seq:
        assert seq.loader.workers == 0 and seq.loader.max_queue_size == 3
        assert seq.stats()["workers"] == 0


def test_use_multiprocessing_false_says_shmaug_uses_processes():
    with pytest.warns(shmaug.ShmaugWarning, match=r"always runs its `workers` in processes") \
            as warned:
        seq = shmaug.Sequence(X, batch_size=4, workers=0, use_multiprocessing=False)
    seq.close()
    assert len(warned) == 1 and warned[0].filename == __file__
    assert "workers=0" in str(warned[0].message)
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`use_multiprocessing` must be True"):
        shmaug.Sequence(X, batch_size=4, use_multiprocessing="yes")


def test_keras_adds_no_threads_or_processes_of_its_own():
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    with shmaug.Sequence(X, batch_size=4, workers=3, use_multiprocessing=True,
                         max_queue_size=5) as seq:
        assert seq.workers == 1 and seq.use_multiprocessing is False  # what Keras reads
        adapter = PyDatasetAdapter(seq, shuffle=True)
        assert adapter.enqueuer is None  # Keras calls __getitem__ itself, in order asked
        assert seq._runtime.running is None  # and nothing has started yet


@pytest.mark.parametrize("name, value", [("shuffle", "no"), ("shuffle", 0),
                                         ("drop_remainder", "False")])
def test_booleans_that_are_not_booleans_are_refused(name, value):
    with pytest.raises(shmaug.ArgumentTypeError, match=rf"`{name}` must be True[^;]*; "
                       rf"received {value!r}"):
        shmaug.Sequence(X, batch_size=4, workers=0, **{name: value})
    with shmaug.Sequence(X, batch_size=4, workers=0, **{name: np.bool_(True)}) as seq:
        assert getattr(seq, name, seq._order.plan.drop_remainder) is True


def test_repr_shows_shmaugs_workers_and_starts_nothing():
    seq = shmaug.Sequence(X, np.arange(10), batch_size=4, workers=3, seed=1, shuffle=True,
                          start_method="spawn", sample_weight=np.ones(10))
    text = repr(seq)
    assert text.startswith("shmaug.Sequence(x=<uint8 array (10, 4, 4)>, y=<int64 array (10,)>, "
                           "batch_size=4, augment=None, workers=3 (shmaug's processes; Keras "
                           "reads seq.workers == 1), start_method='spawn', seed=1,"), text
    assert "sample_weight=<float64 array (10,)>" in text and text.endswith("(3 batches, not started)")
    assert seq._runtime.running is None and seq.workers == 1  # what Keras reads: see the docstring
    seq.close()
    assert repr(seq).endswith("(3 batches, closed)")


def test_passes_in_natural_order_never_say_the_order_is_random():
    """Each pass over an unshuffled Sequence starts again at batch 0: not out of order."""
    x = np.zeros((16, 8, 8), np.uint8)
    with shmaug.Sequence(x, np.arange(16), batch_size=4, workers=1, shuffle=False,
                         augment=shmaug.Compose(["hflip"])) as seq:
        def one_pass():
            for i in range(len(seq)):
                yield seq[i]

        with warnings.catch_warnings():
            warnings.simplefilter("error", shmaug.ShmaugWarning)
            for _ in range(6):
                assert len(list(one_pass())) == 4


class Forgot(shmaug.Sequence):
    def __init__(self, x, y):  # no super().__init__(...)
        self.images, self.labels = x, y


def test_a_subclass_that_skips_super_init_is_told_to_call_it():
    seq = Forgot(X, np.zeros(10))
    for use in (len, lambda s: s[0], repr, lambda s: s.num_batches):  # (num_batches: fit's
        # first read, a property: its error was a bare AttributeError naming it)
        with pytest.raises(shmaug.NotInitializedError, match=r"Forgot.__init__ did not call "
                           r"super\(\).__init__\(...\).*Fix: call super\(\).__init__\(x, y"):
            use(seq)
    assert isinstance(shmaug.NotInitializedError("x"), AttributeError)
    assert not hasattr(seq, "_lock") and not hasattr(seq, "anything_else")
    with pytest.raises(AttributeError, match="anything_else") as info:
        seq.anything_else
    assert not isinstance(info.value, shmaug.ShmaugError)


def test_what_init_sets_is_what_a_skipped_init_is_told_about_and_a_copy_drops_one_of():
    import copy

    import keras

    from shmaug.keras import sequence
    from shmaug.keras._runtime import Life

    base = set(vars(keras.utils.PyDataset(workers=1, use_multiprocessing=False)))
    with shmaug.Sequence(X, np.arange(10), batch_size=4, workers=0) as seq:
        assert set(vars(seq)) - base == sequence._SET_UP
        state = seq.__getstate__()
        assert set(state) == set(vars(seq)) - {"_runtime"} and state["x"] is None
        clone = copy.copy(seq)
        assert clone._runtime.life is Life.CLOSED and clone._runtime.data is None
        assert seq._runtime.life is Life.NOT_STARTED and len(clone) == len(seq) == 3
        seq[0]
        assert seq._runtime.life is Life.STARTED and seq._runtime.running is seq.loader
    assert seq._runtime.life is Life.CLOSED and repr(clone).endswith("(3 batches, closed)")


def test_a_subclass_that_redefines_a_facade_name_is_refused_where_it_is_defined():
    """The facade's own names (its Keras glue calls them) are not a subclass's to redefine:
    one redefined would break fit, resume or sharding without a word."""
    with pytest.raises(TypeError, match=r"Mine defines `reshard`.*another name"):
        class Mine(shmaug.Sequence):  # noqa: F841
            def reshard(self, num_shards, shard_index):
                return None

    class Fine(shmaug.Sequence):  # its own names and the hooks are its to define
        def augment(self, image, rng):
            return image

        def resharded(self):
            return None


def test_a_getitem_that_makes_batches_itself_is_told_it_bypasses_the_workers():
    """A PyDataset ported as it was: fit trained on batches augment never touched."""
    with pytest.warns(shmaug.ShmaugWarning, match=r"Ported.__getitem__ makes its batches.*"
                                                  r"never run.*super\(\).__getitem__\(index\)"):
        class Ported(shmaug.Sequence):  # noqa: F841
            def __getitem__(self, index):
                return self.x[index * 4:(index + 1) * 4]

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Wrapping(shmaug.Sequence):  # noqa: F841  # it goes through shmaug's
            def __getitem__(self, index):
                return super().__getitem__(index)

        class Named(shmaug.Sequence):  # noqa: F841  # the base named, through a helper
            def __getitem__(self, index):
                return self._fetched(index)

            def _fetched(self, index):
                return shmaug.Sequence.__getitem__(self, index)

        class Decorated(shmaug.Sequence):  # noqa: F841
            @functools.lru_cache(maxsize=None)  # noqa: B019
            def __getitem__(self, index):
                return super().__getitem__(index)

        def timed(fn):  # a decorator without functools.wraps
            def run(*args):
                return fn(*args)
            return run

        class Undecorated(shmaug.Sequence):  # noqa: F841
            @timed
            def __getitem__(self, index):
                return tuple(self._part(index, k) for k in range(1))  # (a generator's code)

            def _part(self, index, k):
                return super().__getitem__(index)


def test_a_getitem_that_reads_by_batch_is_told_its_epochs_would_not_move():
    """``self.batch(index)`` (or the loader's) in a __getitem__ that post-processes serves
    the epoch the Sequence is at: fit trained on epoch 0's shuffle and draws every epoch."""
    for name, body in (("ByBatch", "self.batch(index)"),
                       ("ByLoader", "self.loader.batch(index)")):
        with pytest.warns(shmaug.ShmaugWarning, match=rf"{name}.__getitem__ reads its "
                                                      rf"batches by `batch` or `loader`.*same "
                                                      rf"shuffle.*super\(\).__getitem__"):
            exec(f"class {name}(shmaug.Sequence):\n"
                 f"    def __getitem__(self, index):\n"
                 f"        xb, yb = {body}\n"
                 f"        return xb / 255, yb\n", {"shmaug": shmaug})
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Both(shmaug.Sequence):  # noqa: F841  # super() for the pass, batch for a peek
            def __getitem__(self, index):
                xb, yb = super().__getitem__(index)
                return xb, yb, self.batch(0)[1]


def test_ragged_token_inputs_are_told_to_pad_with_0_not_minus_1():
    """Token ids beside the images padded with -1, as told, reached an Embedding as the
    last real token's row; Keras pads with 0 (mask_zero=True)."""
    tokens = [[1, 2, 3][:1 + i % 3] for i in range(10)]
    with pytest.raises(shmaug.ArgumentError, match=r"`x\['tokens'\]`.*pad_sequences\("
                                                   r"x\['tokens'\], padding='post'\)` \(0, "
                                                   r"which an Embedding with mask_zero"):
        shmaug.Sequence({"image": X, "tokens": tokens}, workers=0, image_key="image")


def test_an_epoch_hook_counting_self_epoch_is_told_it_skips_epochs():
    """Keras 2's ``self.epoch += 1`` in on_epoch_end seeks the Sequence's own count (and
    Keras calls on_epoch_end once more than its epochs): epochs 1, 3, 5 were served."""
    with pytest.warns(shmaug.ShmaugWarning, match=r"Counting.on_epoch_end sets self.epoch.*"
                                                  r"skips every other epoch"):
        class Counting(shmaug.Sequence):  # noqa: F841
            def on_epoch_end(self):
                super().on_epoch_end()
                self.epoch += 1
    with pytest.warns(shmaug.ShmaugWarning, match=r"Sorting.on_epoch_end sets self.epoch"):
        class Sorting(shmaug.Sequence):  # noqa: F841  # (self a closure's cell: diff review)
            def on_epoch_end(self):
                self.order = sorted(range(3), key=lambda i: self.weights[i])
                self.epoch += 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Reading(shmaug.Sequence):  # noqa: F841
            def on_epoch_end(self):
                super().on_epoch_end()
                self.last = self.epoch
                self.tracker.epoch = self.epoch  # (a helper's own: from the diff review)


@pytest.mark.parametrize("name, value, given", [
    ("augment", staticmethod(lambda image, rng: image[::-1]), None),
    ("batch_size", 16, 32), ("shuffle", True, None), ("sampling_weights", np.ones(10), None)])
def test_a_setting_set_before_super_init_is_refused_not_dropped(name, value, given):
    """Keras 2's order (``self.augment = fn`` first, then ``super().__init__(x, y)``) made
    the Sequence with the default and dropped the subclass's value without a word."""
    value = value.__func__ if isinstance(value, staticmethod) else value

    class Early(shmaug.Sequence):
        def __init__(self, x, **kwargs):
            setattr(self, name, value)
            super().__init__(x, **kwargs)

    with pytest.raises(AttributeError, match=rf"Early.__init__ set self.{name} to .* before "
                                             rf"calling super\(\).__init__.*{name}="
                                             rf"{given}.*Fix: pass {name}= to super"):
        Early(X, workers=0)
    with Early(X, workers=0, **{name: value}) as seq:  # the same passed on: kept
        assert getattr(seq, name) is value or name == "batch_size" and seq.batch_size == 16


def test_a_refused_target_is_named_where_it_lies_in_the_users_y():
    """The facade keeps ``y`` beside its other inputs: the error names the user's own
    ``y['bounding_boxes']['boxes']``, not the place inside."""
    from shmaug.ops import Compose, Op

    boxes = np.tile(np.array([[[1, 1, 9, 3]]], np.float32), (10, 1, 1))  # outside 4x4
    y = {"bounding_boxes": {"boxes": boxes, "labels": np.zeros((10, 1), np.int32)}}
    with pytest.raises(shmaug.ArgumentError,
                       match=r"^`y\['bounding_boxes'\]\['boxes'\]` holds a box"):
        shmaug.Sequence(X, y, batch_size=4, workers=0,
                        augment=Compose([Op("hflip")], bounding_box_format="xyxy"))


def test_an_override_with_no_augment_argument_and_a_mask_is_refused_unless_it_moves_none():
    """An override that calls no pipeline is a function of the user's that declares nothing:
    beside a mask it is refused, as such a function passed as `augment` is (it came back
    unmoved under a flipped image); ``@still`` says it moves no pixel (``augment.targets =
    "still"``, which a type checker refuses, says the same)."""
    from shmaug.ops import still

    mask = np.zeros((10, 4, 4, 1), np.uint8)
    mask[:, :, :1] = 1

    class Flipped(shmaug.Sequence):
        def augment(self, image, rng):
            return image[:, ::-1].copy()

    class Inverted(shmaug.Sequence):
        @still
        def augment(self, image, rng):
            return 255 - image

    with pytest.raises(shmaug.ArgumentError,
                       match=r"'segmentation_masks'.*Flipped.augment overrides `augment` with "
                             r"no `augment` argument.*`@shmaug.ops.still` above its def"):
        Flipped(X, {"segmentation_masks": mask}, batch_size=4, workers=0)
    with Inverted(X, {"segmentation_masks": mask}, batch_size=4, workers=0,
                  shuffle=False) as seq:
        xb, yb = seq.batch(0)
    np.testing.assert_array_equal(xb, 255 - X[:4])
    np.testing.assert_array_equal(yb, mask[:4])


PHOTOS = np.zeros((8, 16, 16, 3), np.uint8)
PLANES = np.ones((8, 16, 16), np.float32)


@pytest.mark.parametrize("given,where", [
    ({"sample_weight": PLANES}, r"`sample_weight` .* no worker moves weights.*per-sample"),
    # by the output's name: the masks under it move, the weights do not
    ({"sample_weight": {"segmentation_masks": PLANES}}, r"`sample_weight` .* no worker"),
    ({"x": {"image": PHOTOS, "depth": PLANES[..., None]}, "image_key": "image"},
     r"`x\['depth'\]` .* only `x\[image_key\]` is augmented.*np.concatenate")])
def test_a_plane_per_sample_beside_the_images_is_refused_where_pixels_move(given, where):
    """Per-pixel weights and a depth input beside the images stayed put while the images (and
    their masks) rotated."""
    given = {"x": PHOTOS, **given}
    masks = {"segmentation_masks": np.zeros((8, 16, 16, 1), np.uint8)}
    with pytest.raises(shmaug.ArgumentError, match=where):
        shmaug.Sequence(y=masks, batch_size=4, workers=0, **given,
                        augment=shmaug.ops.Compose([shmaug.ops.Op("rotate", degrees=10)]))
    # per-sample weights, or ops that move no pixel
    shmaug.Sequence(PHOTOS, y=masks, batch_size=4, workers=0, sample_weight=np.ones(8),
                    augment=shmaug.ops.Compose([shmaug.ops.Op("rotate", degrees=10)])).close()
    shmaug.Sequence(y=masks, batch_size=4, workers=0, **given,
                    augment=shmaug.ops.Op("brightness_contrast")).close()


@pytest.mark.parametrize("name, value", [("mix", shmaug.ops.MixUp(0.2)), ("batch_size", 2),
                                         ("augment", print),
                                         ("sampling_weights", np.ones(10)), ("shuffle", False),
                                         ("workers", 4)])
def test_a_setting_set_after_the_sequence_is_made_is_refused_with_the_fix(name, value):
    """Accepted before, read back by repr, and ignored by every batch: a schedule that
    switched MixUp off, or resized, trained on as before without a word."""
    y = np.arange(10) % 2
    with shmaug.Sequence(X, y, batch_size=4, workers=0, shuffle=True) as seq:
        with pytest.raises(AttributeError, match=rf"`seq\.{name}` is fixed when the Sequence "
                                                 rf"is made.*Fix: make a new Sequence"):
            setattr(seq, name, value)
        seq.batch_size, seq.shuffle, seq.note = 4, True, "a subclass's own"  # as they are: kept
        assert len(seq[0][0]) == 4 and "batch_size=4" in repr(seq)


@pytest.mark.parametrize("name", ["x", "y", "sample_weight"])
def test_new_data_set_on_a_sequence_is_refused_with_the_fix(name):
    """A reviewer (an active-learning loop) reused one Sequence, round after round, with
    `seq.x, seq.y = x_new, y_new`: accepted, read back, and the workers served the old images
    and labels with the old length."""
    y, weights = np.arange(10) % 2, np.ones(10)
    new = {"x": np.ones_like(X), "y": 1 - y, "sample_weight": weights * 2}[name]
    with shmaug.Sequence(X, y, batch_size=4, workers=0, sample_weight=weights) as seq:
        with pytest.raises(AttributeError, match=rf"(?s)`seq\.{name}` is the data the Sequence "
                                                 rf"was made over.*Fix: for new data, make a "
                                                 rf"new Sequence and close the old one"):
            setattr(seq, name, new)
        seq.x, seq.y, seq.sample_weight = seq.x, y, weights  # what it holds: kept
        assert (seq[0][1] == y[:4]).all()

    class Ported(shmaug.Sequence):  # keeps what it was given, as PyDataset code does
        def __init__(self, x, y, sample_weight=None):
            super().__init__(x, y, batch_size=4, workers=0, sample_weight=sample_weight)
            self.x, self.y, self.sample_weight = x, y, sample_weight

    class Paths(shmaug.Sequence):  # Keras' CIFAR10PyDataset, ported: paths and a list of labels
        def __init__(self, x_set, y_set):
            super().__init__(x_set, y_set, batch_size=4, workers=0)
            self.x, self.y = x_set, y_set

        def load(self, index):
            return np.full((4, 4), len(self.x[index]), np.uint8)

    Ported(X, y).close()
    Ported(list(X), list(y), sample_weight=list(weights)).close()  # (copied: kept as given)
    Ported({"image": X, "meta": np.ones((10, 2))}, {"out": y}).close()
    class Scaled(shmaug.Sequence):  # new data set in __init__: stored, read back, ignored
        def __init__(this, x, y):
            super().__init__(x, y, batch_size=4, workers=0)
            this.x = x  # (a list given, set again: its own, whatever its first parameter's name)
            this.y = np.eye(2)[y]

    with pytest.raises(AttributeError, match=r"`seq\.y` is the data"):
        Scaled(list(X), y)

    class Images(list):  # (a list a weak reference can follow)
        pass

    images = Images(X)
    gone = weakref.ref(images)
    with shmaug.Sequence(images, y, batch_size=4, workers=0) as kept:
        del images
        gc.collect()
        assert gone() is None and kept[0][0].shape == (4, 4, 4)  # its copy, not the list
    with Paths([f"{i}.png" for i in range(10)], list(y)) as paths:
        assert paths[0][0].shape == (4, 4, 4)
        with pytest.raises(AttributeError, match=r"`seq\.y` is the data"):
            paths.y = list(1 - y)


def test_a_subclass_may_set_its_settings_again_as_given_but_not_change_them():
    """From the diff reviews: `self.seed = seed` (None, where the Sequence drew one), an
    np.int64 batch size or `self.use_multiprocessing = True` in a ported __init__ were
    refused, and then (allowed in any __init__) a changed batch size was stored, read back
    and ignored, and a seed of None broke the resume check."""
    class Ported(shmaug.Sequence):  # keras.utils.Sequence code sets them itself
        def __init__(self, x, batch_size, seed=None, augment=None, double=False):
            super().__init__(x, batch_size=batch_size, workers=0, seed=seed, augment=augment)
            self.x, self.seed, self.augment, self.timeout = x, seed, augment, 5.0
            self.batch_size, self.use_multiprocessing = np.int64(batch_size), True
            if double:
                self.batch_size = batch_size * 2

    with Ported(X, 4) as seq:
        assert len(seq) == 3 and seq.batch_size == 4 and type(seq.batch_size) is int
        assert seq.seed is not None and seq.use_multiprocessing is False
        assert callable(seq.augment) and seq.timeout == 5.0
        with pytest.raises(AttributeError, match="`seq.seed` is fixed"):
            seq.seed = seq.seed + 1
    with pytest.raises(AttributeError, match=r"Setting self\.batch_size to 8 .* while "
                                             r".*Ported\.__init__ runs, after super\(\)\.__init__"
                                             r"\(\.\.\.\) made the Sequence with batch_size=4 "
                                             r".*Fix: pass batch_size= to super"):
        Ported(X, 4, double=True)  # (a ported Sequence's `self.shuffle = shuffle` was told to
        # make a new Sequence, from inside the one it was making)


def test_an_own_len_may_count_fewer_batches_than_made_not_more():
    """A ported PyDataset's __len__, from a stale batch size (16 where 32 was passed), counted
    19 batches of 10: a Keras epoch trained 1.9 passes without a word, and predict failed
    inside TensorFlow with an IndexError naming no __len__."""
    class Counted(shmaug.Sequence):
        def __init__(self, x, counted, **kwargs):
            super().__init__(x, np.arange(len(x)), **kwargs)
            self.counted = counted

        def __len__(self):
            return int(np.ceil(len(self.x) / self.counted))

    with Counted(X, 2, batch_size=4, workers=0) as seq:  # 5 counted, 3 made
        for read in (lambda: seq.num_batches, lambda: seq[0], lambda: seq.batch(0)):
            with pytest.raises(shmaug.ArgumentError, match=r"Counted\.__len__ returns 5, but "
                               r"this Sequence makes 3 batches of 4 from 10 samples.*Fix: leave "
                               r"__len__ out"):
                read()
    with Counted(X, 5, batch_size=4, workers=0) as seq:  # 2 counted (a floor): served
        assert seq.num_batches == 2 and len(seq[1][0]) == 4
        with pytest.raises(IndexError):
            seq[2]
    with Counted(X, 2, batch_size=4, workers=0, num_shards=2, shard_index=1) as seq:
        with pytest.raises(shmaug.ArgumentError, match=r"returns 5, but this Sequence makes 2 "
                           r"batches of 4 from 5 samples \(its shard: shard_index=1 of "
                           r"num_shards=2\)"):
            seq[0]
    with Counted(X, 4, batch_size=4, workers=0, drop_remainder=True) as seq:  # says why
        with pytest.raises(shmaug.ArgumentError, match=r"returns 3, but this Sequence makes 2 "
                           r"batches of 4 from 10 samples, the last, partial one dropped "
                           r"\(drop_remainder=True\)"):
            seq.num_batches


def test_the_labels_a_sequence_keeps_no_attribute_of_are_told_where_to_read():
    """`seq.y` was a bare AttributeError (a ported callback reading `self.y` for its
    metrics), while setting it was refused as "the data the Sequence was made over". (Served
    as an attribute, it held every label where a shard or a dropped remainder serves fewer,
    and was missing in the workers' copies.) A property of a subclass's own that fails before
    super().__init__ keeps its own error: only ours name the skipped super().__init__."""
    with shmaug.Sequence(X, np.arange(10), batch_size=4, workers=0) as seq:
        for name in ("y", "sample_weight"):
            with pytest.raises(AttributeError, match=rf"serves the {name} it was given in its "
                               rf"batches.*Fix: read the array you passed"):
                getattr(seq, name)

    class Early(shmaug.Sequence):
        def __init__(self, x):
            self.steps  # a property read before super().__init__, with a typo in it
            super().__init__(x, batch_size=4, workers=0)

        @property
        def steps(self):
            return len(self.file)

    with pytest.raises(AttributeError, match="has no attribute 'steps'") as info:
        Early(X)
    assert not isinstance(info.value, shmaug.NotInitializedError)


def test_a_loop_by_hand_over_a_training_set_in_order_is_told_once():
    """A Keras 2 train_on_batch loop (seq[i], then on_epoch_end()) with shuffle left out read
    every epoch in the same order, augmenting, without a word (to_tf_dataset() warned)."""
    def batches(seq):  # a generator of the user's (tf.data's from_generator)
        for i in range(len(seq)):
            yield seq[i]

    for loop in (lambda seq: seq[0], list, lambda seq: next(iter(seq)), batches, list):
        with shmaug.Sequence(X, np.arange(10), batch_size=4, workers=0, seed=0,
                             augment=shmaug.Compose(["hflip"])) as seq:
            with pytest.warns(shmaug.ShmaugWarning, match=r"A loop by hand \(seq\[i\], then "
                              r"on_epoch_end\(\)\) reads this Sequence in order.*Fix: pass "
                              r"shuffle=True"):
                list(loop(seq))
                seq.on_epoch_end()
            with warnings.catch_warnings():
                warnings.simplefilter("error", shmaug.ShmaugWarning)  # (told once)
                list(loop(seq))
                seq.on_epoch_end()
    with shmaug.Sequence(X, np.arange(10), batch_size=4, workers=0, seed=0,
                         augment=shmaug.Compose(["hflip"])) as seq:
        with warnings.catch_warnings():
            warnings.simplefilter("error", shmaug.ShmaugWarning)
            seq.batch(0)
            seq.on_epoch_end()  # no loop by hand read (a callback's call under fit): quiet
    for quiet in (dict(shuffle=False), dict(shuffle=True), {}):  # ({}: nothing to augment)
        augment = None if not quiet else shmaug.Compose(["hflip"])
        with shmaug.Sequence(X, np.arange(10), batch_size=4, workers=0, augment=augment,
                             **quiet) as seq:
            with warnings.catch_warnings():
                warnings.simplefilter("error", shmaug.ShmaugWarning)
                seq[0]
                seq.on_epoch_end()


def test_what_a_ported_init_keeps_of_its_own_is_kept_and_a_flag_named_augment_is_told():
    """From the third diff review: `self.sampling_weights = w` was accepted and not stored
    (a later read failed), `self.workers = workers` with None refused, np.bool_ shuffles
    refused, and a bool `self.augment` flag told the setting was fixed."""
    y = np.arange(10) % 2

    class Ported(shmaug.Sequence):
        def __init__(self, x, y, weights=None, workers=None, shuffle=np.bool_(True)):
            super().__init__(x, y, batch_size=4, sampling_weights=weights, shuffle=shuffle,
                             workers=workers)
            self.sampling_weights, self.workers, self.shuffle = weights, workers, shuffle

    with Ported(X, y, weights="balanced") as seq:
        assert seq.sampling_weights == "balanced" and seq.workers == 1  # (Keras' 1)

    class Flagged(shmaug.Sequence):
        def __init__(self, x, y, augment=True):
            super().__init__(x, y, batch_size=4, workers=0)
            self.augment = augment

    with pytest.raises(AttributeError, match=r"`seq.augment` is shmaug's argument and hook.*"
                                             r"name your flag otherwise"):
        Flagged(X, y)


class _RaggedClips(shmaug.Sequence):
    """Each clip read by index in the workers, by a subclass of the user's."""

    def load(self, index):
        return self.x[index]


def _first_200_columns(image, rng):
    return image[:, :200]


def test_images_of_many_widths_are_taken_as_they_are_by_a_sequence():
    """Spectrograms of many widths: the refusal's fix named `load=`, which only a Loader takes
    (a Sequence raised TypeError on it); then a subclass of one's own. A list of them is now
    held in shared memory, each at its own width."""
    clips = [np.zeros((16, t, 1), np.float32) + t for t in (411, 209, 303)]
    with shmaug.Sequence(clips, np.arange(3), batch_size=3, augment=_first_200_columns,
                         workers=0) as seq, \
            _RaggedClips(clips, np.arange(3), batch_size=3, augment=_first_200_columns,
                         workers=0, output_shape=(16, 200, 1)) as own:
        np.testing.assert_array_equal(seq[0][0], own[0][0])
        assert seq[0][0].shape == (3, 16, 200, 1) and seq[0][0][:, 0, 0, 0].tolist() == [
            411, 209, 303]


def test_per_output_weights_under_a_name_y_has_not_are_refused_naming_it():
    """Keras looks each output's weights up by its key in y (or its position): weights under
    a misspelled key weighed nothing, and the output it meant stopped fit with a KeyError."""
    y = {"cls": np.zeros(10), "reg": np.zeros(10)}
    w = np.ones(10)
    with pytest.raises(shmaug.ArgumentError, match=r"weights under \['regr'\], which no output "
                                                   r"of `y` has .*sample_weight: \['cls', "
                                                   r"'regr'\]"):
        shmaug.Sequence(X, y, sample_weight={"cls": w, "regr": w}, workers=0)
    with pytest.raises(shmaug.ArgumentError, match=r"3 arrays for `y`'s 2 outputs"):
        shmaug.Sequence(X, [y["cls"], y["reg"]], sample_weight=[w, w, w], workers=0)
    for fine in ({"cls": w, "reg": w}, w, {"cls": w}):  # fewer: an output without a loss
        shmaug.Sequence(X, y, sample_weight=fine, workers=0).close()
    for fine in ([1.0] * 10, [w]):  # a list of numbers is one array
        shmaug.Sequence(X, [y["cls"], y["reg"]], sample_weight=fine, workers=0).close()

    class Hooked(shmaug.Sequence):  # the outputs are the hook's: not read here
        def targets(self, y_batch):
            return {"cls": y_batch, "reg": y_batch}

    Hooked(X, np.zeros(10), sample_weight={"cls": w, "regr": w}, workers=0).close()


def test_weights_keras_cannot_take_from_a_sequence_are_refused_as_it_is_made(tmp_path):
    """Second review: weights without y were dropped without a word (a PyDataset's batch
    cannot be (x, None, w)); text weights and per-output weights beside one output stopped
    fit with Keras' "Invalid dtype: str32" and "unsupported type dict"; y given as a .npy
    path (as x may be) was "a scalar"."""
    w = np.ones(10)
    with pytest.raises(shmaug.ArgumentError, match=r"`sample_weight` was given without `y`.*"
                                                   r"Fix: pass y"):
        shmaug.Sequence(X, None, sample_weight=w, workers=0)
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`sample_weight` holds <U1 values.*"
                                                       r"dtype=np\.float32"):
        shmaug.Sequence(X, np.arange(10), sample_weight=np.array(["a"] * 10), workers=0)
    for per_output in ({"out": w}, [w, w]):
        with pytest.raises(shmaug.ArgumentError, match=r"weights per output, but `y` is one "
                                                       r"array.*one array \(N,\)"):
            shmaug.Sequence(X, np.arange(10), sample_weight=per_output, workers=0)
    np.save(tmp_path / "y.npy", np.arange(10))
    for name in ("y", "sample_weight"):
        with pytest.raises(shmaug.ArgumentTypeError, match=rf"`{name}` is a path .*only `x`.*"
                                                           rf"np\.load\(path, mmap_mode='r'\)"):
            shmaug.Sequence(X, **{"y": np.arange(10), name: str(tmp_path / "y.npy")},
                            workers=0)


def test_an_image_key_that_names_no_images_names_the_entries_that_are():
    x = {"image": X, "meta": np.zeros((10, 2), np.float32)}
    with pytest.raises(shmaug.ArgumentError, match=r"image_key`='meta' names an entry of "
                                                   r"shape \(10, 2\), not images.*'image'"):
        shmaug.Sequence(x, image_key="meta", workers=0)

    class Loads(shmaug.Sequence):  # ids its load hook makes images from
        def load(self, index):
            return X[index]

    Loads({"ids": np.arange(10), "depth": X}, image_key="ids", workers=0).close()


def test_image_data_generators_iterator_attributes_are_told_where_they_went() -> None:
    """``seq.class_indices``, ``seq.filenames`` (a submission's rows), ``seq.reset()``: a bare
    AttributeError for users of flow_from_dataframe's iterators."""
    with shmaug.Sequence(X, np.arange(10), batch_size=4, workers=0) as seq:
        for name, where in (("class_indices", r"seq\.x\.class_indices"),
                            ("filenames", r"seq\.x\.paths.*predict"), ("samples", r"len\(seq\.x\)"),
                            ("reset", r"seq\.seek\(0\)")):
            with pytest.raises(AttributeError, match=rf"no attribute '{name}' \(Keras' "
                                                     rf"ImageDataGenerator.*{where}"):
                getattr(seq, name)
        assert not hasattr(seq, "class_indices")
        with pytest.raises(AttributeError, match=r"no attribute 'nonesuch'$"):
            seq.nonesuch  # noqa: B018


@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_sample_weights_must_be_finite_and_not_negative(bad) -> None:
    """One NaN weight made every weight of the model NaN at its first step; a negative one
    trained its sample the other way; sampling_weights refused both already."""
    weights = np.ones(10)
    weights[5] = bad
    with pytest.raises(shmaug.ArgumentError, match=r"`sample_weight` must be finite and >= 0"
                                                   r".* at sample 5.*nan_to_num"):
        shmaug.Sequence(X, np.arange(10), sample_weight=weights, batch_size=4, workers=0)
    with pytest.raises(shmaug.ArgumentError, match=r"`sample_weight\['out'\]`"):
        shmaug.Sequence(X, {"out": np.arange(10)}, sample_weight={"out": weights},
                        batch_size=4, workers=0)


def test_text_labels_are_refused_with_the_encoding():
    """A DataFrame's class names (an object or Categorical Series, a list of str) passed
    every check and stopped fit at its first step with Keras' "Invalid dtype: str288"."""
    pd = pytest.importorskip("pandas")
    names = ["cat", "dog"] * 5
    for y in (pd.Series(names).astype("category"), names, {"species": np.array(names)}):
        with pytest.raises(shmaug.ArgumentError, match=r"holds text \(<U3, e\.g\. 'cat'\).*"
                                                       r"pd\.factorize\(labels\)"):
            shmaug.Sequence(X, y, batch_size=2)

    class Encoded(shmaug.Sequence):  # a hook that turns them into numbers: its own business
        def targets(self, y_batch):
            return (y_batch == "dog").astype(np.int64)

    with Encoded(X, names, batch_size=2) as seq:
        assert seq[0][1].tolist() == [0, 1]
    with pytest.raises(shmaug.ArgumentError, match=r"dtype <U3\. Fix: encode the labels"):
        shmaug.Loader(X, np.array(names), batch_size=2, sampling_weights="balanced")


@pytest.mark.parametrize("kwargs, error, says", [
    (dict(threshold="0.1"), TypeError, r"`threshold`.*'0.1' \(type str\)"),
    (dict(threshold=None), TypeError, r"`threshold`.*None"),
    (dict(threshold=5), ValueError, r"between 0 and 1; received 5"),
    (dict(sequence=np.zeros(3)), TypeError, r"watches a shmaug.Sequence.*ndarray"),
])
def test_stall_monitor_checks_its_arguments_when_made(kwargs, error, says):
    """A threshold of the wrong type failed at the first epoch's end, a bare TypeError."""
    with pytest.raises(error, match=says):
        shmaug.StallMonitor(**kwargs)


def test_an_image_key_beside_images_alone_is_refused_not_ignored():
    with pytest.raises(shmaug.ArgumentError, match=r"`image_key`='img'.*leave `image_key` out"):
        shmaug.Sequence(np.zeros((4, 4, 4), np.uint8), batch_size=2, workers=0, image_key="img")


def test_a_closed_sequence_entered_again_is_refused_at_once():
    seq = shmaug.Sequence(np.zeros((4, 4, 4), np.uint8), batch_size=2, workers=0)
    seq.close()
    with pytest.raises(shmaug.ClosedError, match="is closed"):
        with seq:
            pass
