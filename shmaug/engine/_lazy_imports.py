"""A worker imports the heavy frameworks lazily: a module imports them, only a use loads them.

A worker started by forkserver or spawn unpickles the user's code, which imports the module it
was defined in, and with it whatever that module imports at its top: TensorFlow, JAX, torch or
Keras take seconds and 300 MB or more each, in every worker, for ops that mostly never touch
them. Inside a worker those imports bind a module that loads itself on its first attribute
access (``importlib.util.LazyLoader``): ``import tensorflow as tf`` costs nothing, ``tf.image``
loads TensorFlow then, in this single-threaded process, as a plain import would have. Nothing
changes for code that uses them; only the moment they load moves.

The main process never installs this: there an import means what it says.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Sequence

# Top-level packages that start threads or take seconds to import, and that an augment module
# commonly imports for other reasons (a model, a dataset) than its ops.
LAZY = frozenset({"tensorflow", "keras", "jax", "torch", "tf_keras", "flax"})


class _LazyFinder(importlib.abc.MetaPathFinder):
    """Finds the packages ``names`` where the path finder would, behind a ``LazyLoader``."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if target is None and fullname in sys.modules and fullname.partition(".")[0] in self.names:
            return _already_loaded(sys.modules[fullname])
        if fullname not in self.names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # not installed (the import fails as usual), or a loader Lazy can't wrap
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


class _Loaded(importlib.abc.Loader):
    """Hands the import system a module that already ran (see ``_already_loaded``)."""

    def __init__(self, module: ModuleType) -> None:
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set ours on it: give its own back


def _already_loaded(module: ModuleType) -> importlib.machinery.ModuleSpec:
    """The spec for a submodule that its lazy package's loading has just imported.

    ``import torch._dynamo`` with ``torch`` not yet loaded: the import system checks that
    ``torch._dynamo`` is not imported, then reads ``torch.__path__``, which loads ``torch``,
    whose ``__init__`` imports ``torch._dynamo``; unaided it would then run that submodule a
    second time, in a new module object. This spec hands over the one that ran instead.
    """
    return importlib.machinery.ModuleSpec(module.__name__, _Loaded(module),
                                          origin=getattr(module, "__file__", None))


def install(names: frozenset[str] = LAZY) -> None:
    """From now on, this process imports the top-level packages ``names`` lazily (a second
    call changes nothing)."""
    if not any(isinstance(finder, _LazyFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LazyFinder(names))
