"""ImageRecords.from_tfds on a dataset TFDS itself prepared offline from a local builder.

No process is started. The reference is TFDS' own ``as_dataset(split, shuffle_files=False)``
for the same split and slice: same records in the same order, PNG pixels bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from tests import records_data as D

tfds = pytest.importorskip("tensorflow_datasets")
pytest.importorskip("tensorflow")


class ShmaugTiny(tfds.core.GeneratorBasedBuilder):
    """14 images of distinct pixels, labelled ant / bee / cat."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "image": tfds.features.Image(shape=D.SHAPE),
            "label": tfds.features.ClassLabel(names=["ant", "bee", "cat"])}))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, 10), "test": self._generate_examples(10, 14)}

    def _generate_examples(self, start, stop):
        for i in range(start, stop):
            yield i, {"image": D.image(i), "label": i % 3}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tfds")
    ShmaugTiny(data_dir=str(folder)).download_and_prepare()
    return str(folder)


@pytest.mark.parametrize("split", ["train", "train[:50%]", "train[3:7]+test", "test[-25%:]"])
def test_splits_and_slices_are_tfds_own(data_dir, split):
    records = shmaug.ImageRecords.from_tfds("shmaug_tiny", split=split, data_dir=data_dir,
                                            image_size=D.SHAPE[:2])
    theirs = list(tfds.as_numpy(ShmaugTiny(data_dir=data_dir).as_dataset(
        split=split, shuffle_files=False)))
    assert len(records) == len(theirs) > 0
    assert records.class_names == ("ant", "bee", "cat")
    for i, example in enumerate(theirs):
        np.testing.assert_array_equal(records.read(i), example["image"])
        assert records.labels[i] == example["label"]


def test_not_prepared_name_and_split(data_dir, tmp_path):
    with pytest.raises(shmaug.ArgumentError, match=r"`name`='mnist' is not prepared under "
                                                   r"`data_dir`=.*shmaug_tiny.*download_and_prepare"):
        shmaug.ImageRecords.from_tfds("mnist", data_dir=data_dir)
    with pytest.raises(shmaug.ArgumentError, match=r"`split`='validation' cannot be read.*"
                                                   r"\['test', 'train'\]"):
        shmaug.ImageRecords.from_tfds("shmaug_tiny", split="validation", data_dir=data_dir)
    with pytest.raises(shmaug.ArgumentError, match=r"`image_key`='label' is not an Image"):
        shmaug.ImageRecords.from_tfds("shmaug_tiny", data_dir=data_dir, image_key="label")
