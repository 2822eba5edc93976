"""The front door: a sorted __all__, every name importable, and importing does nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest

import shmaug
from tests._helpers import needs_keras


def test_all_is_sorted_and_complete():
    assert shmaug.__all__ == sorted(set(shmaug.__all__)), "sorted, each name once"
    # What the door binds for users is __all__ and the public parts, nothing else. (A
    # submodule another test imported, shmaug.cli say, is bound by Python's import system.)
    bound = {name for name, obj in vars(shmaug).items() if not name.startswith("_")
             and not (isinstance(obj, types.ModuleType) and obj.__name__ == f"shmaug.{name}")}
    assert bound - set(shmaug.__all__) <= PUBLIC_MODULES, bound - set(shmaug.__all__)
    # Every error and warning class of shmaug.errors is exported.
    kinds = (shmaug.ShmaugError, shmaug.ShmaugWarning)
    errors = {name for name, obj in vars(shmaug.errors).items()
              if isinstance(obj, type) and issubclass(obj, kinds) and not name.startswith("_")}
    assert errors <= set(shmaug.__all__), errors - set(shmaug.__all__)


FACADE = {"EpochSync", "Sequence", "StallMonitor"}  # loaded on first access; they import Keras


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs_keras) if name in FACADE
                                  else name for name in shmaug.__all__])
def test_every_exported_name_is_shmaugs_own_and_named_so(name):
    """A class or function of shmaug under its own name, the version string or the presets
    module; an error is a ShmaugError (a warning a UserWarning), as errors.py draws them."""
    obj = getattr(shmaug, name)
    if name == "__version__":
        assert isinstance(obj, str) and obj.count(".") >= 1, obj
    elif isinstance(obj, types.ModuleType):
        assert obj.__name__ == f"shmaug.{name}", obj
    else:
        assert isinstance(obj, (type, types.FunctionType)), f"{name}: {type(obj).__name__}"
        assert obj.__module__.startswith("shmaug."), f"{name} from {obj.__module__}"
        assert obj.__qualname__ == name, f"{name} is {obj.__qualname__}"
    if isinstance(obj, type) and issubclass(obj, Warning):
        assert issubclass(obj, UserWarning), name
    elif isinstance(obj, type) and issubclass(obj, BaseException):
        assert issubclass(obj, shmaug.ShmaugError), name
        builtin = [b for b in obj.__mro__ if b.__module__ == "builtins"
                   and b not in (Exception, BaseException, object)]
        assert builtin or obj is shmaug.ShmaugError, f"{name} subclasses no builtin error"


def test_importing_shmaug_imports_no_keras_and_starts_nothing():
    code = (
        "import sys, threading, multiprocessing as mp, shmaug\n"
        "heavy = [m for m in ('keras', 'tensorflow', 'torch', 'jax') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert not mp.active_children()\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "import cv2; assert cv2.getNumThreads() != 1 or __import__('os').cpu_count() == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_star_import_help_and_getmembers_work_without_keras():
    """Without Keras, `from shmaug import *`, help(shmaug) and inspect.getmembers fetched the
    facade's names from __all__ and met their ImportError; they are public only with Keras."""
    code = (
        "import sys; sys.modules['keras'] = None  # Keras not installed\n"
        "import inspect, pydoc, shmaug\n"
        "from shmaug import *\n"
        "pydoc.render_doc(shmaug)\n"
        "inspect.getmembers(shmaug)\n"
        "assert 'Sequence' not in shmaug.__all__ and 'Loader' in shmaug.__all__\n"
        "import shmaug.keras  # (its own names alike: an integrator's walk of the modules)\n"
        "from shmaug.keras import *\n"
        "inspect.getmembers(shmaug.keras), pydoc.render_doc(shmaug.keras)\n"
        "assert shmaug.keras.__all__ == [] and 'Sequence' not in dir(shmaug.keras)\n"
        "for name in ('shmaug.Sequence', 'from shmaug.keras import Sequence'):\n"
        "    try:\n"
        "        exec(name if name.startswith('from') else f'x = {name}')\n"
        "    except ImportError as exc:\n"
        "        assert 'shmaug[tf]' in str(exc), (name, exc)\n"
        "    else:\n"
        "        raise AssertionError(name)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_keras_backend_not_installed_is_named_with_the_extra_and_the_variable():
    """Keras with JAX asked for and no JAX (`shmaug[jax]` installed without
    KERAS_BACKEND=jax: Keras asks for TensorFlow) reached the user as 40 frames of Keras'
    import, ending in "No module named 'tensorflow'"."""
    pytest.importorskip("keras")
    code = (
        "import sys; sys.modules['jax'] = None  # JAX not installed\n"
        "import shmaug\n"
        "try:\n"
        "    shmaug.Sequence\n"
        "except ModuleNotFoundError as exc:\n"
        "    assert \"'jax' (the backend Keras was asked for\" in str(exc), exc\n"
        "    assert 'shmaug[jax]' in str(exc) and 'KERAS_BACKEND=jax' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('imported')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "KERAS_BACKEND": "jax"})


@pytest.mark.parametrize("stand_in", ["None", "types.ModuleType('keras')"])
def test_a_keras_that_is_missing_or_no_package_does_not_list_the_facade(stand_in):
    """A stand-in module without a spec made find_spec raise and the import fail."""
    subprocess.run([sys.executable, "-c", f"import sys, types; sys.modules['keras'] = "
                    f"{stand_in}; import shmaug; assert 'Sequence' not in shmaug.__all__"],
                   check=True)


def test_the_facades_pure_internals_import_without_keras():
    """``shmaug.keras._passes`` (the pass rules, tested on every Python) needs no Keras: the
    package loads Keras only for its public names (Python 3.10/3.13 CI has no Keras)."""
    code = (
        "import sys; sys.modules['keras'] = None  # any `import keras` now fails\n"
        "from shmaug.keras._passes import Passes\n"
        "import shmaug.keras\n"
        "try:\n"
        "    shmaug.keras.Sequence\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('Sequence without Keras')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version_is_the_package_metadata_version():
    from importlib.metadata import version

    assert shmaug.__version__ == version("shmaug")


@needs_keras
def test_sequence_takes_the_loaders_arguments_with_the_same_defaults():
    import inspect

    import pytest

    pytest.importorskip("keras")
    loader = inspect.signature(shmaug.Loader).parameters
    sequence = inspect.signature(shmaug.Sequence).parameters
    # `load` is a hook method on Sequence; Sequence lends or copies as Keras' hold allows.
    shared = [name for name in loader if name not in ("load", "copy")]
    for name in shared:
        assert name in sequence, name
        assert sequence[name].kind == loader[name].kind, name
        if name != "pin_memory":  # a Sequence's None: where Keras trains on a GPU (torch, JAX)
            assert sequence[name].default == loader[name].default, name
    assert sequence["pin_memory"].default is None


# The public subpackages and modules (no underscore) beside the names of __all__; `cli` is the
# `shmaug` command, not an API, and `shmaug.keras` is loaded when asked for (it imports Keras).
PUBLIC_MODULES = {"engine", "errors", "keras", "ops", "seeding", "sources"}


def test_dir_lists_exactly_the_public_api():
    """Tab completion shows the lazy facade names (where Keras is installed: without it they
    cannot be fetched) and no helper the door imported for itself."""
    import importlib.util

    assert dir(shmaug) == sorted(set(shmaug.__all__) | PUBLIC_MODULES)
    keras_here = importlib.util.find_spec("keras") is not None
    assert ({"Sequence", "StallMonitor", "EpochSync"} <= set(dir(shmaug))) == keras_here
    leaked = {"Any", "annotations", "logging", "importlib"} & set(vars(shmaug))
    assert not leaked, f"helpers in shmaug's namespace: {sorted(leaked)}"


def test_every_public_module_in_dir_is_reachable_as_an_attribute():
    code = ("import sys, shmaug\n"
            "for name in ('engine', 'errors', 'ops', 'seeding', 'sources'):\n"
            "    assert getattr(shmaug, name).__name__ == 'shmaug.' + name, name\n"
            "assert 'keras' not in sys.modules  # listing it loads nothing\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dir_of_the_facade_lists_its_public_names_and_modules_only():
    """Where Keras is installed; without it, nothing it could not fetch (the test above)."""
    listed = ['EpochSync', 'Sequence', 'StallMonitor', 'callbacks', 'sequence'] \
        if shmaug.platform.keras_installed() else []
    code = f"import shmaug.keras as k\nassert dir(k) == {listed!r}, dir(k)\n"
    subprocess.run([sys.executable, "-c", code], check=True)


@needs_keras
def test_shmaug_keras_is_the_facade_package():
    assert shmaug.keras.Sequence is shmaug.Sequence


def test_with_gives_a_subclass_its_own_type_and_a_numpy_seed_is_taken():
    """``with MyLoader(...) as loader``: typed as Loader, so a checker refused the subclass's
    own attributes; ``seed=np.int64(3)`` ran but was refused by mypy and pyright."""
    import typing

    hint = typing.get_type_hints(shmaug.Loader.__enter__)["return"]
    assert isinstance(hint, typing.TypeVar) and hint.__bound__ is not None
    assert typing.get_type_hints(shmaug.Loader.__enter__)["self"] is hint
    assert "integer" in str(typing.get_type_hints(shmaug.Loader.__init__)["seed"])
    with shmaug.Loader(np.zeros((8, 4, 4), np.uint8), batch_size=4, workers=0, shuffle=True,
                       seed=np.int64(3)) as loader:
        assert loader.seed == 3 and type(loader.seed) is int


def test_ray_workers_without_ray_name_the_extra_when_made():
    """shmaug.ray.Workers without Ray was made without a word, and the first batch raised a
    bare "No module named 'ray'" (every other optional feature names its extra)."""
    code = (
        "import sys; sys.modules['ray'] = None  # Ray not installed\n"
        "import shmaug.ray\n"
        "try:\n"
        "    shmaug.ray.Workers(nodes=2)\n"
        "except ModuleNotFoundError as exc:\n"
        "    assert 'shmaug[ray]' in str(exc) and 'workers=N' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('made')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
