"""The sources' flat tables (``PathTable``, ``RecordTable``) share one base
(``shmaug.memory.table.FlatTable``): the same class indices, range checks, hand-off to shared
memory and pickling, so the two cannot drift apart again (``RecordTable.class_of`` once wrapped
an index out of range round, where ``PathTable`` refused it)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from shmaug.memory.store import SharedStore
from shmaug.memory.table import FlatTable
from shmaug.sources.formats.table import RecordTable
from shmaug.sources.images.paths import PathTable

CLASSES = np.array([3, 1, 4, 1])


def paths(classes: np.ndarray | None = CLASSES) -> PathTable:
    return PathTable.build([f"d/{i}.jpg" for i in range(4)], classes)


def records(classes: np.ndarray | None = CLASSES) -> RecordTable:
    return RecordTable.build(("a.tar", "b.tar"), np.array([0, 0, 1, 1]),
                             np.array([512, 2048, 512, 4096]), np.array([900, 700, 10, 20]),
                             classes, "raw")


@pytest.mark.parametrize("make", [paths, records], ids=["PathTable", "RecordTable"])
def test_both_tables_read_classes_and_refuse_an_index_out_of_range(make):
    table = make()
    assert isinstance(table, FlatTable) and len(table) == 4
    assert [table.class_of(i) for i in range(4)] == CLASSES.tolist()
    assert table.class_of(-1) == CLASSES[-1]  # from the end, as a sequence counts
    assert table.classes.tolist() == CLASSES.tolist() and not table.classes.flags.writeable
    for index in (4, -5, 10**6):
        with pytest.raises(IndexError, match=f"{index} out of range for 4 {table.ROW}s"):
            table.class_of(index)
    with pytest.raises(IndexError):
        table[4]
    bare = make(None)
    assert bare.classes is None
    with pytest.raises(LookupError, match=f"this {table.ROW} table holds no class indices"):
        bare.class_of(0)


@pytest.mark.parametrize("make", [paths, records], ids=["PathTable", "RecordTable"])
def test_both_tables_travel_by_name_once_shared_and_whole_before(make):
    table = make()
    whole = pickle.loads(pickle.dumps(table))
    assert type(whole) is type(table) and not whole.shared
    assert [whole[i] for i in range(4)] == [table[i] for i in range(4)]
    with SharedStore() as store:
        shared = table.share(store)
        assert shared.shared and shared.share(store) is shared  # shared once
        sent = pickle.dumps(shared)
        attached = pickle.loads(sent)  # as a worker maps it
        assert attached.shared and attached.classes.tolist() == CLASSES.tolist()
        assert [attached[i] for i in range(4)] == [table[i] for i in range(4)]
        del attached, shared
