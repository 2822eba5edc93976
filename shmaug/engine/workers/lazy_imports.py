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
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

_NAMES = frozenset({"__spec__", "__name__", "__loader__", "__file__", "__package__"})
_LOADING = threading.RLock()  # held while a lazy package runs (see _Loading)
_MISSING = object()
_RAN: Callable[[], None] | None = None  # called after a lazy package has run (``install``)

# Top-level packages that start threads or take seconds to import, and that an augment module
# commonly imports for other reasons (a model, a dataset) than its ops.
LAZY = frozenset({"tensorflow", "keras", "jax", "torch", "tf_keras", "flax"})


class _LazyModule(ModuleType):
    """A package imported, not yet run: its first use runs it (``_load``).

    Unlike ``LazyLoader``'s own module, its names are answered without running it: a second
    ``import tensorflow``, elsewhere in the user's module or in one it imports, reads
    ``__spec__`` (as do ``find_spec`` and ``inspect``), which would run it for nothing. (Not
    ``__path__``: a submodule import must run the package first.) And threads that use it at
    once wait for one run (``_Loading``): Python 3.11's ``LazyLoader`` lets them read a half-run
    module (CPython gh-114763), and a user's op may use threads.
    """

    def __getattribute__(self, attr: str) -> Any:
        if attr in _NAMES:
            names = object.__getattribute__(self, "__dict__")
            if attr in names:
                return names[attr]
        with _LOADING:
            if object.__getattribute__(self, "__class__") is _LazyModule:
                _load(self)
        return getattr(self, attr)

    def __delattr__(self, attr: str) -> None:
        getattr(self, attr)  # a use: run it first, as LazyLoader's does
        delattr(self, attr)


class _Loading(ModuleType):
    """A package being run: the thread running it reads it as it stands; others wait."""

    def __getattribute__(self, attr: str) -> Any:
        with _LOADING:  # re-entrant: the running thread passes, others wait for the run
            return ModuleType.__getattribute__(self, attr)


def _load(module: ModuleType) -> None:
    """Run the package ``module`` stands for, in place (``LazyLoader``'s own steps)."""
    spec = object.__getattribute__(module, "__spec__")
    names_then = spec.loader_state["__dict__"]
    names_now = object.__getattribute__(module, "__dict__")
    changed = {k: v for k, v in names_now.items() if names_then.get(k, _MISSING) is not v}
    object.__setattr__(module, "__class__", _Loading)
    try:
        spec.loader.exec_module(module)  # the real loader (LazyLoader put it back on the spec)
        if sys.modules.get(spec.name) is not module:
            raise ValueError(f"module object for {spec.name!r} substituted in sys.modules "
                             "during a lazy load")
        names_now.update(changed)
    finally:
        object.__setattr__(module, "__class__", ModuleType)
    if _RAN is not None:
        _RAN()


class _Loader(importlib.util.LazyLoader):
    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        module.__class__ = _LazyModule


class _LazyFinder(importlib.abc.MetaPathFinder):
    """Finds the packages ``names`` where the finders after it would, behind a lazy loader."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if target is None and sys.modules.get(fullname) is not None and \
                fullname.partition(".")[0] in self.names:
            return _already_loaded(sys.modules[fullname])
        if fullname not in self.names:
            return None
        spec = self._find_after_me(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # not installed (the import fails as usual), or a loader Lazy can't wrap
        spec.loader = _Loader(spec.loader)
        return spec

    def _find_after_me(self, fullname: str, path: Sequence[str] | None
                       ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is not self and find is not None:
                spec: importlib.machinery.ModuleSpec | None = find(fullname, path)
                if spec is not None:
                    return spec
        return None


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


def pending(name: str) -> bool:
    """Whether the package ``name`` was imported lazily here and has not run yet (always False
    in a process that never called ``install``, the main process among them)."""
    return type(sys.modules.get(name)) is _LazyModule


def install(names: frozenset[str] = LAZY, ran: Callable[[], None] | None = None) -> None:
    """From now on, this process imports the top-level packages ``names`` lazily (a second
    call changes nothing); ``ran`` is called after each of them has run (a worker's thread
    limits then reach a package that loaded after they were set)."""
    global _RAN
    _RAN = ran
    if not any(isinstance(finder, _LazyFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LazyFinder(names))
