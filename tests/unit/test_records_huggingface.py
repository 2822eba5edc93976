"""ImageRecords.from_huggingface on datasets built by the `datasets` library itself.

No process is started. The reference is the dataset's own decode (PIL, through ``ds[i]``): PNG
bit for bit. The row order after ``shuffle`` / ``train_test_split`` must be the dataset's.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from tests import records_data as D

datasets = pytest.importorskip("datasets")
N = 9


def build() -> "datasets.Dataset":
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["ant", "bee", "cat"])})
    return datasets.Dataset.from_dict(
        {"image": [{"bytes": D.png(i), "path": None} for i in range(N)],
         "label": [i % 3 for i in range(N)]}, features=features)


@pytest.fixture(scope="module")
def on_disk(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "ds"
    build().save_to_disk(str(folder), num_shards=2)
    return datasets.load_from_disk(str(folder))


def check_against_the_dataset(records, ds) -> None:
    assert len(records) == len(ds)
    for i in range(len(ds)):
        theirs = np.asarray(ds[i]["image"].convert("RGB"))
        np.testing.assert_array_equal(records.read(i), theirs)
        assert records.labels[i] == ds[i]["label"]


def test_arrow_files_in_memory_and_shuffled_rows_match_the_dataset(on_disk):
    assert len(on_disk.cache_files) == 2
    records = shmaug.ImageRecords.from_huggingface(on_disk, image_size=D.SHAPE[:2])
    assert records.class_names == ("ant", "bee", "cat")
    assert records.table.shards == tuple(f["filename"] for f in on_disk.cache_files)
    check_against_the_dataset(records, on_disk)
    check_against_the_dataset(shmaug.ImageRecords.from_huggingface(build(),
                                                                   image_size=D.SHAPE[:2]),
                              build())
    shuffled = on_disk.shuffle(seed=3)
    check_against_the_dataset(shmaug.ImageRecords.from_huggingface(shuffled,
                                                                   image_size=D.SHAPE[:2]),
                              shuffled)
    split = on_disk.train_test_split(test_size=3, seed=0)["test"]
    check_against_the_dataset(shmaug.ImageRecords.from_huggingface(split,
                                                                   image_size=D.SHAPE[:2]),
                              split)


def test_wrong_columns_and_a_dataset_dict(on_disk):
    with pytest.raises(shmaug.ArgumentError, match=r"`label_column`='labels' is not a column.*"
                                                   r"\['image', 'label'\]"):
        shmaug.ImageRecords.from_huggingface(on_disk, label_column="labels")
    with pytest.raises(shmaug.ArgumentError, match=r"`image_column`='label' is not an image "
                                                   r"column.*ClassLabel"):
        shmaug.ImageRecords.from_huggingface(on_disk, image_column="label")
    with pytest.raises(shmaug.ArgumentTypeError, match=r"DatasetDict: pick a split.*'train'"):
        shmaug.ImageRecords.from_huggingface(datasets.DatasetDict(train=on_disk))
    bare = shmaug.ImageRecords.from_huggingface(on_disk, label_column=None, image_size=(2, 2))
    assert bare.labels is None and "from_huggingface(<Dataset of 9 rows>" in repr(bare)


def test_an_image_column_of_paths_only_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(D.png(0))
    ds = datasets.Dataset.from_dict({"image": [{"bytes": None, "path": str(path)}]},
                                    features=datasets.Features({"image": datasets.Image()}))
    with pytest.raises(shmaug.ArgumentError, match=r"`image_column`='image'.*row 0.*no image "
                                                   r"bytes, only a path.*ImageFiles.from_paths"):
        shmaug.ImageRecords.from_huggingface(ds, label_column=None)
