"""keras-hub's own task models fed by shmaug under ``fit``, on whichever Keras backend runs the
suite (CI runs it on TensorFlow, JAX and torch): ``RetinaNetObjectDetector`` from a COCO folder
and ``DeepLabV3ImageSegmenter`` from a segmentation folder, both written here as a user's are.

Their ``fit`` takes a Grain or tf.data dataset but no ``PyDataset``, so the Sequence goes in
as ``seq.to_grain()``. Two epochs prove the second one gets its batches: a dataset Keras runs
dry warns "Your input ran out of data" (the suite turns warnings into errors; each test also
says so itself). The models are tiny, built from config (no download): 64x64 images, 2 steps.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import pytest

keras = pytest.importorskip("keras")
keras_hub = pytest.importorskip("keras_hub")
grain = pytest.importorskip("grain")

import shmaug  # noqa: E402

# (a RetinaNet traces for a minute or more on 2 loaded cores: the bound only tells a hang)
pytestmark = [pytest.mark.keras, pytest.mark.timeout(480), pytest.mark.slow]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIDE, BATCH, N = 64, 8, 16  # two steps an epoch


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# torch 2.13's ``Tensor.__array__(self, dtype=None)`` takes no ``copy``, which numpy 2 warns
# about when keras-hub's torch path calls ``np.array(tensor, copy=False)``: torch's and numpy's
# quarrel, not shmaug's (a plain ``np.array(torch.zeros(2), copy=False)`` warns the same).
_TORCH_ARRAY = "__array__ implementation doesn't accept a copy keyword"


def no_warnings(warned):
    """Keras' "ran out of data" (a dataset it ran dry), or any other (its note that it cannot
    shuffle a Grain dataset, which ``fit(shuffle=False)`` answers)."""
    messages = [str(w.message) for w in warned if not (
        str(w.message).startswith(_TORCH_ARRAY) and _torch_array_takes_no_copy())]
    assert not [m for m in messages if "ran out of data" in m], messages
    assert not messages, messages


def _torch_array_takes_no_copy() -> bool:
    import inspect
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and "copy" not in inspect.signature(torch.Tensor.__array__).parameters


def test_to_grain_serves_one_epoch_per_length_as_fit_would():
    """Index ``len + i`` is batch i of the next epoch, as Grain's ``repeat`` (keras-hub's
    ``fit`` applies it) asks for it: each epoch shuffled anew, as under ``fit``."""
    x = np.arange(24 * 4 * 4 * 3, dtype=np.uint8).reshape(24, 4, 4, 3)
    with shmaug.Sequence(x, np.arange(24), batch_size=8, workers=1, seed=3) as seq:
        dataset = seq.to_grain()
        assert isinstance(dataset, grain.MapDataset) and len(dataset) == 3
        served = [yb.tolist() for _, yb in dataset.repeat(2)]
        assert served == [seq.batch(i, epoch=e)[1].tolist() for e in (0, 1) for i in range(3)]
        assert served[:3] != served[3:]  # shuffled anew
        assert sorted(sum(served[:3], [])) == list(range(24))  # each sample once an epoch
        later = seq.to_grain(epoch=5)
        np.testing.assert_array_equal(later[1][0], seq.batch(1, epoch=5)[0])
    with shmaug.Sequence(x, np.arange(24), batch_size=8, workers=0, shuffle=False) as seq:
        assert [yb.tolist() for _, yb in seq.to_grain()] == [
            list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]


def test_the_examples_retinanet_trains_from_a_coco_folder(tmp_path):
    det = example("detection")
    images, boxes, labels, _ = det.make_data(N)
    x, y = shmaug.sources.from_coco(*det.write_coco(str(tmp_path), images, boxes, labels),
                                    image_size=(SIDE, SIDE), max_boxes=det.MAX_BOXES,
                                    bounding_box_format="xyxy")
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        history = det.train_hub(x, y, epochs=2, batch_size=BATCH, workers=1)
    no_warnings(warned)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()


def test_a_deeplab_segmenter_trains_from_a_segmentation_folder_through_grain(tmp_path):
    seg = example("segmentation")
    images, masks = seg.make_data(N)
    x, y = shmaug.sources.from_segmentation(*seg.write_folder(str(tmp_path), images, masks),
                                            image_size=(SIDE, SIDE))
    with shmaug.Sequence(x, y, batch_size=BATCH, augment=seg.augmentation(), workers=1,
                         seed=0) as train:
        encoder = keras_hub.models.ResNetBackbone(
            input_conv_filters=[64], input_conv_kernel_sizes=[3],
            stackwise_num_filters=[64, 16, 16], stackwise_num_blocks=[1, 1, 1],
            stackwise_num_strides=[1, 2, 2], block_type="basic_block",
            image_shape=(SIDE, SIDE, 3))
        backbone = keras_hub.models.DeepLabV3Backbone(
            image_encoder=encoder, spatial_pyramid_pooling_key="P4", low_level_feature_key="P2",
            upsampling_size=4, dilation_rates=[2, 4], projection_filters=8,
            image_shape=(SIDE, SIDE, 3))
        keras.utils.set_random_seed(0)
        model = keras_hub.models.DeepLabV3ImageSegmenter(backbone=backbone,
                                                         num_classes=seg.CLASSES)
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        dataset = train.to_grain()
        assert dataset[0][1].shape == (BATCH, SIDE, SIDE, 1)  # the masks: y itself
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            history = model.fit(dataset, epochs=2, shuffle=False, verbose=0)
        no_warnings(warned)
        assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
