"""Reading Keras' frames off the stack (``shmaug.keras._stack``) keeps nothing of theirs."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

_TRAINER = textwrap.dedent('''
    import weakref

    from shmaug.keras import _stack


    class Iterator:
        pass


    def fit(initial_epoch=0):
        iterator = Iterator()  # this epoch's (Keras' loop binds each epoch's to one name)
        gone = weakref.ref(iterator)
        assert _stack.fit_argument("initial_epoch") == 0
        iterator = Iterator()  # the next epoch's
        return gone() is None, iterator
''')


def test_reading_fits_arguments_leaves_no_snapshot_of_its_locals(tmp_path: Path) -> None:
    """Before Python 3.13 a read of a frame's ``f_locals`` leaves a snapshot of every local
    on it until the next read: on Keras' ``fit`` frame it held the previous epoch's tf.data
    iterator, whose release at the next epoch's read (a wait on tf.data's threads, the GIL
    held) began that epoch 0.85-1.04 s late in 4 of 16 epochs (an observability reviewer's
    tiny fit; a plain PyDataset: 0.3-0.4 s in 3)."""
    path = tmp_path / "keras" / "src" / "trainer.py"  # (a frame of Keras' own trainer)
    path.parent.mkdir(parents=True)
    path.write_text(_TRAINER)
    spec = importlib.util.spec_from_file_location("a_keras_trainer", path)
    assert spec is not None and spec.loader is not None
    trainer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trainer)
    released, _ = trainer.fit()
    assert released, "the frame's snapshot kept the previous epoch's iterator"
