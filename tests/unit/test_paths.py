"""The path table: flat storage of many paths, and what a worker is sent for it."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from shmaug.sources.images.paths import PathTable
from shmaug.errors import ArgumentError
from shmaug.sources.files import ImageFiles
from shmaug.memory.store import SharedStore

PATHS = ["a/0.jpg", "b/ünï cödé.png", "c/" + "x" * 300 + ".jpg", "d/1.JPG"]


def test_a_table_reads_back_every_path_and_class():
    table = PathTable.build(PATHS, np.array([0, 1, 1, 2]))
    assert len(table) == 4 and list(table) == PATHS and table.tolist() == PATHS
    assert table[1] == PATHS[1] and table[-1] == PATHS[-1] and table[1:3] == PATHS[1:3]
    assert [table.class_of(i) for i in range(4)] == [0, 1, 1, 2]
    assert table.classes.tolist() == [0, 1, 1, 2] and not table.classes.flags.writeable
    assert table == PATHS and table == tuple(PATHS) and table != PATHS[:3]
    with pytest.raises(IndexError):
        table[4]
    assert PathTable.build(PATHS).classes is None
    with pytest.raises(LookupError):
        PathTable.build(PATHS).class_of(0)
    copy = pickle.loads(pickle.dumps(table))
    assert copy == table and copy.classes.tolist() == [0, 1, 1, 2]


def test_undecodable_names_round_trip_and_nul_is_refused():
    odd = os.fsdecode(b"dir/\xff\xfe.jpg")  # not UTF-8: a surrogate escape, as os.listdir gives
    assert PathTable.build([odd, "b.jpg"])[0] == odd
    with pytest.raises(ArgumentError, match=r"NUL"):
        PathTable.build(["a\0b.jpg"])


def fake_files(n: int) -> ImageFiles:
    """n labelled paths (never read: on_error='skip' checks no file, color_mode reads none)."""
    paths = [f"/data/class_{i % 7}/image_{i:08d}.jpg" for i in range(n)]
    return ImageFiles.from_paths(paths, [i % 7 for i in range(n)], on_error="skip",
                                 image_size=(8, 8))


def test_what_a_worker_is_sent_does_not_grow_with_the_number_of_paths():
    with SharedStore() as store:
        sizes = {}
        for n in (10, 100_000):
            files = fake_files(n)
            # Unshared, the table travels as one compact block, not a tuple of strings.
            assert len(pickle.dumps(files.load)) < 60 * n + 10_000
            shared = files.load.sharing(store)
            sizes[n] = len(pickle.dumps(shared))
            worker = pickle.loads(pickle.dumps(shared))  # as a worker attaches it
            assert worker.table.shared and worker.table[n - 1] == files.paths[n - 1]
            assert worker.table.class_of(n - 1) == (n - 1) % 7
            del worker
        assert sizes[100_000] - sizes[10] < 16  # a few digits of a length, nothing more
        assert sizes[100_000] < 1_000


def test_labels_and_classes_are_not_pickled_beside_the_table():
    files = fake_files(50_000)
    table_bytes = len(pickle.dumps(files.paths))
    assert len(pickle.dumps(files)) < table_bytes + 2_000  # labels rebuilt from the table
    again = pickle.loads(pickle.dumps(files))
    np.testing.assert_array_equal(again.labels, files.labels)
    assert again.paths == files.paths and repr(again) == repr(files)
