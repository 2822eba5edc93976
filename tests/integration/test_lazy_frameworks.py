"""A worker that unpickles an augment from a module importing TensorFlow (JAX, torch) does
not load it until the augment uses it: start-up as cheap as fork's, whatever the user's module
imports (engine.workers.lazy_imports; the timings are ``python -m bench.start_methods``)."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import shmaug
from tests.integration import _framework_ops

pytestmark = pytest.mark.skipif(_framework_ops.FRAMEWORK is None,
                                reason="needs TensorFlow, JAX or torch installed")
FRESH = [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


def epoch(augment: object, start_method: str, workers: int = 2) -> set[int]:
    x = np.zeros((8, 4, 4), np.uint8)
    with shmaug.Loader(x, batch_size=4, augment=augment, workers=workers,
                       start_method=start_method) as loader:
        return {int(v) for xb, _ in loader for v in np.unique(xb)}


@pytest.mark.parametrize("start_method", FRESH)
def test_a_fresh_worker_does_not_load_what_the_module_imports(start_method: str) -> None:
    assert epoch(_framework_ops.report, start_method) == {0}


def test_an_augment_that_uses_it_loads_it() -> None:
    """One worker, spawned (forkserver's take the same path): loading a framework costs
    seconds even here."""
    assert epoch(_framework_ops.use_then_report, "spawn", workers=1) == {2}


def test_a_forked_worker_has_what_the_parent_loaded() -> None:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork here")
    assert epoch(_framework_ops.report, "fork") == {1}


SCRIPT = textwrap.dedent("""
    import sys, types
    import {framework}  # a training script imports it first
    import numpy as np
    import shmaug


    def report(image, rng):  # defined in __main__: each worker re-imports this script
        return np.full_like(image, type(sys.modules["{framework}"]) is types.ModuleType)


    if __name__ == "__main__":
        for method in sys.argv[1:]:
            with shmaug.Loader(np.zeros((8, 4, 4), np.uint8), batch_size=4, augment=report,
                               workers=2, start_method=method) as loader:
                print(method, sorted({{int(v) for xb, _ in loader for v in np.unique(xb)}}))
""")


def test_a_script_that_imports_it_and_defines_the_augment(tmp_path: Path) -> None:
    """The augment in ``__main__``: a fresh worker re-imports the script, whose imports are
    lazy there too (the lazy finder is in place before the script runs)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(framework=_framework_ops.FRAMEWORK))
    done = subprocess.run([sys.executable, str(script), *FRESH], capture_output=True,
                          text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:-1] == [f"{m} [0]" for m in FRESH]


@pytest.mark.keras
@pytest.mark.parametrize("start_method", FRESH)
def test_a_fresh_worker_defines_a_sequence_subclass_without_loading_keras(
        start_method: str) -> None:
    """A subclass of ``shmaug.Sequence`` in the user's module, imported by each worker that
    unpickles its hooks or an augment beside it: defining it there must not load Keras and its
    backend, seconds per worker (issue 51; ``python -m bench.start_methods --subclass``). Its
    hooks run all the same, and a second Sequence's fresh workers fare the same."""
    pytest.importorskip("keras")
    from tests.integration import _subclass_ops as user

    x = np.zeros((8, 4, 4), np.uint8)
    for _ in range(2):
        with user.Reporting(list(range(8)), batch_size=4, workers=2,
                            start_method=start_method) as seq:
            assert {int(v) for i in range(len(seq)) for v in np.unique(seq[i])} == {0}
        with shmaug.Sequence(x, batch_size=4, augment=user.report, workers=2,
                             start_method=start_method) as seq:
            assert {int(v) for i in range(len(seq)) for v in np.unique(seq[i])} == {0}


USES_KERAS_AT_IMPORT = textwrap.dedent('''
    """A user's module that uses Keras at import time, as one that defines a model, a layer
    or a dataset class at its top does: importing it runs Keras and its backend."""
    import sys
    import types

    import keras
    import numpy as np


    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return 0

        def __getitem__(self, index):
            raise IndexError(index)


    class Report:
        """1 where Keras or its backend had loaded in the process that ran it, else 0."""

        def __call__(self, image, rng):
            loaded = any(type(sys.modules.get(name)) is types.ModuleType
                         for name in ("keras", "tensorflow", "jax", "torch"))
            return np.full_like(image, loaded)
''')

SPEED_UP = textwrap.dedent("""
    import sys

    import numpy as np

    import shmaug
    import user_module

    if __name__ == "__main__":
        for method in sys.argv[1:]:
            with shmaug.Sequence(np.zeros((8, 4, 4), np.uint8), batch_size=4, workers=2,
                                 augment=user_module.Report(), start_method=method) as seq:
                print(method, sorted({int(v) for i in range(len(seq)) for v in np.unique(seq[i])}))
""")


@pytest.mark.keras
def test_an_augment_from_a_module_that_uses_keras_at_import(tmp_path: Path) -> None:
    """Keras' speed-up test as a user ports it (issue 60): the augment object's class lives in
    a module that defines a ``keras.utils.PyDataset`` subclass. A fresh worker gets the class
    by value (engine.workers.shipping) and never imports that module, so Keras and its backend
    stay unloaded there (each would cost seconds per worker)."""
    pytest.importorskip("keras")
    (tmp_path / "user_module.py").write_text(USES_KERAS_AT_IMPORT)
    script = tmp_path / "train.py"
    script.write_text(SPEED_UP)
    done = subprocess.run([sys.executable, str(script), *FRESH], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:-1] == [f"{m} [0]" for m in FRESH]
