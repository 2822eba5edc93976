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

pytestmark = [pytest.mark.keras, pytest.mark.timeout(240), pytest.mark.slow]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIDE, BATCH, N = 64, 8, 16  # two steps an epoch


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fit_twice(model, dataset):
    """Two epochs with every warning recorded: none may come (Keras' "ran out of data", or its
    note that it cannot shuffle a Grain dataset, which ``shuffle=False`` answers)."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        history = model.fit(dataset, epochs=2, shuffle=False, verbose=0)
    messages = [str(w.message) for w in warned]
    assert not [m for m in messages if "ran out of data" in m], messages
    assert not messages, messages
    assert len(history.history["loss"]) == 2
    assert all(np.isfinite(history.history["loss"]))
    return history


def test_a_retinanet_trains_from_a_coco_folder_through_grain(tmp_path):
    det = example("detection")
    images, boxes, labels, _ = det.make_data(N)
    x, y = shmaug.sources.from_coco(*det.write_coco(str(tmp_path), images, boxes, labels),
                                    image_size=(SIDE, SIDE), max_boxes=det.MAX_BOXES,
                                    bounding_box_format="xyxy")
    with shmaug.Sequence(x, y, batch_size=BATCH, augment=det.augmentation("xyxy"), workers=1,
                         seed=0) as train:
        dataset = train.to_grain()
        assert isinstance(dataset, grain.MapDataset) and len(dataset) == N // BATCH
        xb, yb = dataset[0]  # keras-hub's layout: {"boxes", "labels"}, padded with -1
        assert xb.shape == (BATCH, SIDE, SIDE, 3)
        assert yb["boxes"].shape == (BATCH, det.MAX_BOXES, 4)
        assert set(np.unique(yb["labels"])) <= {-1, 0, 1, 2}
        # Index len + i is batch i of the next epoch: fit's epochs, each its own
        for i in range(len(dataset)):
            nxt = dataset[len(dataset) + i]
            np.testing.assert_array_equal(nxt[0], train.batch(i, epoch=1)[0])
            np.testing.assert_array_equal(dataset[i][0], train.batch(i, epoch=0)[0])
        keras.utils.set_random_seed(0)
        fit_twice(det.retinanet("xyxy"), dataset)


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
        fit_twice(model, dataset)
