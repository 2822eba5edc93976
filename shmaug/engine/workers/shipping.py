"""The user's code, pickled for the workers: by reference, and by value where importing its
module would load a framework.

A worker started by spawn or forkserver unpickles the user's augment, which imports the module
that defined it. ``lazy_imports`` makes that module's ``import keras`` free, but not a module
that *uses* a framework at import time: ``class Batches(keras.utils.PyDataset)`` at its top,
``from keras import layers``, a model built there. Importing such a module runs Keras and its
backend, seconds and hundreds of MB in every worker, for an augment that never touches them.

For such a module (a *heavy* one) the payload carries its functions and classes by value
(cloudpickle's ``register_pickle_by_value``, as Ray and Dask ship a user's code), so a worker
need not import it at all. Only the user's own modules are shipped so (never an installed
package), and only where they are heavy: elsewhere a module is imported in the worker as
before, with its module-level state and registrations. ``__main__`` stays by reference: a
spawned worker re-imports it when the payload names it (an op registered there is found by
name), but for what the script defines under its ``if __name__ == "__main__":`` guard, which
that import does not run: that goes by value. Forked workers keep the plain payload: they
share the parent's modules.
"""

from __future__ import annotations

import dis
import functools
import io
import logging
import os
import pickle
import sys
import sysconfig
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np

from . import launch
from ...errors import NotPicklableError, warn
from ...memory.store import mapped_file_handle, remapped
from ...ops.core import is_handle
from .lazy_imports import LAZY

log = logging.getLogger(__name__)

_REGISTERING = threading.Lock()  # cloudpickle's by-value registry is one per process
_SHMAUG = Path(__file__).resolve().parents[2]  # the shmaug package's folder
_INSTALLED = {"site-packages", "dist-packages"}  # a folder of installed packages, wherever


class _Referrals(pickle.Pickler):
    """A pickler that notes the module of every class and function it pickles."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.modules: set[str] = set()
        self.mains: set[str] = set()  # the qualified names of ``__main__``'s
        self.redefined = False  # one of ``__main__``'s is no longer what its name binds

    def persistent_id(self, obj: Any) -> None:
        if isinstance(obj, (type, types.FunctionType)):
            name = getattr(obj, "__module__", None)
            if isinstance(name, str):
                self.modules.add(name)
                if name == "__main__":
                    self.mains.add(getattr(obj, "__qualname__", ""))
                    self.redefined = self.redefined or _redefined(obj)
        return None  # pickled as usual

    def reducer_override(self, obj: Any) -> Any:
        return _remapped(obj)


def _remapped(obj: Any) -> Any:
    """A read-only memory map of a file as its file's name, to map again read-only
    (``store.remapped``); anything else as pickle does it, a copy: a writable map (``r+``,
    ``w+``: a worker's writes must stay its own, as on its copy), a copy-on-write or strided
    one (``mapped_file_handle``), or one whose file is gone (a temporary file unlinked)."""
    if not isinstance(obj, np.memmap) or obj.mode != "r":
        return NotImplemented
    handle = mapped_file_handle(obj)
    return NotImplemented if handle is None or not os.path.isfile(handle.name) else \
        (remapped, (handle,))


def pickled(obj: Any, start_method: str | None = None) -> tuple[bytes, bytes | None]:
    """``obj`` pickled by reference; and, where it refers to a heavy module of the user's
    (module docstring), pickled again with that module's functions and classes by value
    (None where it refers to none, or where that copy does not pickle: then a fresh worker
    imports the module, as it always did). Where the workers will start fresh
    (``start_method``, or the default for this payload), a function of the script that reads
    a global its ``__main__`` block sets again is warned of (``_tell_set_again``)."""
    buffer = io.BytesIO()
    plain = _Referrals(buffer)
    try:
        plain.dump(obj)
        payload = buffer.getvalue()  # (one copy: a payload may hold megabytes of arrays)
        method = start_method or launch.default_start_method(payload)
        try:
            _tell_set_again(plain.mains, method)
        except Exception as exc:  # noqa: BLE001 - a check of the user's script, never a
            log.debug("the globals check failed: %r", exc)  # reason the loader fails
    except pickle.PicklingError:
        if not plain.redefined:
            raise
        # A notebook's cell run again binds its name to a new function: the one given (a
        # Sequence's, started again after an idle stop) goes by value, as it was.
        log.debug("shipping %s by value: defined again in __main__ since", sorted(plain.mains))
        by_value = _by_value(obj, set())
        return by_value, by_value
    heavy = {name for name in plain.modules if _is_heavy(name)}
    guarded = _guarded_in_main(plain.mains)
    if not heavy and not guarded:
        return payload, None
    try:
        return payload, _by_value(obj, heavy)
    except Exception as exc:  # noqa: BLE001 - any failure keeps the plain payload
        if guarded and method != "fork":  # (which a fresh worker could not unpickle)
            named = ", ".join(f"`{q}`" for q in sorted(guarded))
            where, move = (
                (f"of your script is defined under its `if __name__ == \"__main__\":` guard, "
                 f"which {method} workers do not run", "define it at the script's top, "
                 "above the guard") if _run_as_script() else
                (f"is defined where {method} workers cannot import it (a notebook, `python "
                 f"-c`, a script read from stdin or run with -m)", "define it in an "
                 "importable .py module and import it from there"))
            raise NotPicklableError(
                f"{named} {where}, and shipping it by value failed with "
                f"{type(exc).__name__}: {exc}. Fix: {move}; an open file, database or "
                f"connection it reads cannot go to another process: open it inside on first "
                f"use (docs/loader.md#files-databases-and-handles).") from None
        log.debug("shipping %s by value failed (%s: %s); fresh workers will import them",
                  sorted(heavy | guarded), type(exc).__name__, exc)
        return payload, None


def _guarded_in_main(qualnames: set[str]) -> set[str]:
    """Those of ``__main__``'s functions and classes named that a fresh worker, importing the
    script, would not find: defined under its ``if __name__ == "__main__":`` guard; all of a
    notebook's or ``python -c``'s, which a fresh worker does not import (they keep fork by
    default, ``launch.default_start_method``, but spawn is macOS' and Windows' only way)."""
    defined = _main_defines()
    if defined is None:
        return set(qualnames)
    return {q for q in qualnames if q.partition(".")[0] not in defined}


def _tell_set_again(qualnames: set[str], method: str) -> None:
    """Warn of those of the script's functions named (and their helpers in it; a class's
    ``augment``, ``load`` and ``__call__``) that read a global the script sets again or
    changes where a fresh worker's import does not (``launch.set_again_in_guard``: its
    ``if __name__ == "__main__":`` guard, a ``main()``), where ``method`` starts workers
    fresh: they read the import's value (a shift of 0 where forked workers and ``workers=0``
    shifted by 5). What goes by value carries its globals: not told."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if method == "fork" or main is None or not isinstance(path, str):
        return
    shipped = {q.partition(".")[0] for q in qualnames} - {
        q.partition(".")[0] for q in _guarded_in_main(qualnames)}
    reached: set[int] = set()  # the script's functions the workers run (helpers followed)
    for name in shipped:
        _reads(getattr(main, name, None), frozenset(), reached)
    now: dict[str, int] = {}  # where the script's running frames stand
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_globals is vars(main):
            now.setdefault(frame.f_code.co_name, frame.f_lineno)
        frame = frame.f_back
    again = launch.set_again_in_guard(
        path, {name for name, value in vars(main).items() if id(value) in reached}, now)
    for name in sorted(shipped):
        read = sorted(n for n in _reads(getattr(main, name, None), again, set())
                      if not isinstance(getattr(main, n, None), logging.Logger))  # (its
        # settings change no pixel)
        if read:
            given = (f"functools.partial({name}, {read[0].lower()}={read[0]})" if not
                     isinstance(getattr(main, name), type) else f"an attribute of {name}")
            fix = f"hand the value over ({given}), or set it at the script's top"
            if is_handle(getattr(main, read[0], None)):  # opened there, not handed over
                fix = (f"`{read[0]}` is a {type(getattr(main, read[0])).__name__}, which "
                       f"cannot go to another process: open it inside `{name}` on first use "
                       f"(docs/loader.md#files-databases-and-handles)")
            warn(f"`{name}` reads {', '.join(f'`{n}`' for n in read)}, which your script sets "
                 f"again (or changes) after its import, under `if __name__ == \"__main__\":` "
                 f"or in a function only this process runs (`main()`): each {method} worker "
                 f"imports the script without running those, so it reads the import's value, "
                 f"not this process's, and augments otherwise than forked workers and "
                 f"workers=0 do. Fix: {fix}.")
            return


def _reads(obj: Any, names: frozenset[str], seen: set[int]) -> set[str]:
    """Which of ``names`` ``obj`` (a function or class of ``__main__``) reads, its helpers in
    ``__main__`` followed (a class: through the hooks workers run)."""
    if id(obj) in seen:
        return set()
    seen.add(id(obj))
    if isinstance(obj, type):  # the hooks workers run, and the script's methods they name
        # (self._warm()), its bases' too; not those that run where it is made (__init__)
        found: set[str] = set()
        todo, done = ["augment", "load", "__call__"], set()
        while todo:
            name = todo.pop()
            method = getattr(getattr(obj, name, None), "__func__", getattr(obj, name, None))
            if name in done or not isinstance(method, types.FunctionType) or \
                    method.__module__ != "__main__":
                continue
            done.add(name)
            found |= _reads(method, names, seen)
            todo += _attributes_read(method.__code__)
        return found
    if not isinstance(obj, types.FunctionType):
        return set()
    found = set()
    scope = obj.__globals__
    for name in globals_read(obj.__code__):
        if name in names:
            found.add(name)
        elif isinstance(scope.get(name), types.FunctionType) and \
                scope[name].__module__ == "__main__":
            found |= _reads(scope[name], names, seen)  # a helper of the script's
    return found


def _attributes_read(code: types.CodeType) -> list[str]:
    """The attribute names ``code`` and the functions nested in it read (``self._warm``)."""
    names = [i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(i.argval, str)]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _attributes_read(const)
    return names


def globals_read(code: types.CodeType) -> set[str]:
    """The global names ``code`` and the functions nested in it load (not the attributes
    it reads, not dunders)."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(i.argval, str)
             and not i.argval.startswith("__")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= globals_read(const)
    return names


def _redefined(obj: Any) -> bool:
    """Whether ``__main__`` now binds ``obj``'s name to something else (its cell run again,
    or ``aug = shmaug.from_array(aug)``): by reference, a worker would get that, or
    nothing."""
    bound: Any = sys.modules.get("__main__")
    for part in str(getattr(obj, "__qualname__", "")).split("."):
        bound = getattr(bound, part, None)
    return bound is not None and bound is not obj


def _run_as_script() -> bool:
    """Whether ``__main__`` is a script file run as one (``python script``), which a fresh
    worker imports again: not a notebook, ``python -c``, stdin or ``python -m``."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    return isinstance(path, str) and os.path.isfile(path) and not spec_name.endswith("__main__")


def _main_defines() -> frozenset[str] | None:
    """What a fresh worker's import of the script finds (``launch.defined_when_imported``);
    nothing where it does not import it: ``python -m pkg`` runs the package's ``__main__``
    module, which multiprocessing never imports in a child; None for a notebook or
    ``python -c``."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str):
        return None
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    return frozenset() if spec_name.endswith("__main__") else \
        launch.defined_when_imported(path)


def _by_value(obj: Any, heavy: set[str]) -> bytes:
    """``obj`` pickled with the functions and classes of the modules ``heavy`` by value, and
    of any heavy module their code refers to in turn; and those of ``__main__`` defined under
    its guard (``_guarded_in_main``)."""
    import cloudpickle

    class ByValue(cloudpickle.Pickler):  # type: ignore[misc]
        """cloudpickle, which keeps ``__main__``'s code by reference, as plain pickle does."""

        def __init__(self, file: io.BytesIO) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.modules: set[str] = set()
            self.mains: set[str] = set()
            self.redefined = False

        persistent_id = _Referrals.persistent_id

        def reducer_override(self, obj: Any) -> Any:
            if (mapped := _remapped(obj)) is not NotImplemented:
                return mapped
            if isinstance(obj, types.CodeType):  # with its file, which cloudpickle drops:
                rebuild, args = self.dispatch_table[types.CodeType](obj)  # a worker's
                return rebuild, tuple(obj.co_filename if a == "<dynamic-code>" else a  # traceback
                                      for a in args)  # shows the line
            if isinstance(obj, (type, types.FunctionType)) and \
                    getattr(obj, "__module__", None) == "__main__" and \
                    not _guarded_in_main({getattr(obj, "__qualname__", "")}) and \
                    not _redefined(obj):
                return NotImplemented  # by reference (what its code calls is seen here too)
            return super().reducer_override(obj)

    while True:
        with _REGISTERING:
            registered = cloudpickle.list_registry_pickle_by_value()  # the user's own too
            added = [sys.modules[name] for name in heavy if name not in registered]
            for module in added:
                cloudpickle.register_pickle_by_value(module)
            try:
                buffer = io.BytesIO()
                pickler = ByValue(buffer)
                pickler.dump(obj)
            finally:
                for module in added:
                    cloudpickle.unregister_pickle_by_value(module)
        more = {name for name in pickler.modules - heavy if _is_heavy(name)}
        if not more:
            log.debug("shipping the code of %s by value to fresh workers", sorted(heavy))
            return buffer.getvalue()
        heavy |= more


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[Path, ...]:
    """Where the standard library and installed packages live (and shmaug)."""
    paths = sysconfig.get_paths()
    roots = {Path(paths[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
             if key in paths}
    return (*roots, _SHMAUG)


def _users(name: str) -> types.ModuleType | None:
    """The module ``name`` if it is the user's own: a file outside the standard library,
    installed packages and shmaug; not ``__main__`` (see the module docstring)."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if module is None or name == "__main__" or not isinstance(path, str):
        return None
    resolved = Path(path).resolve()
    if _INSTALLED & set(resolved.parts) or any(resolved.is_relative_to(root)
                                                 for root in _installed_roots()):
        return None
    return module


def _is_heavy(name: str, seen: set[str] | None = None) -> bool:
    """Whether importing the user's module ``name`` in a worker would load a framework
    (``lazy_imports.LAZY``): a name of its binds something of one other than the bare
    package (a submodule, a class, a function, an object), or something of another heavy
    module of the user's; or a class of its derives directly from one. Only what it binds is
    read: a module that calls a framework at its top without binding the result is not seen
    (its workers load the framework, slower, never wrong). ``seen``: the modules this walk
    has entered, each once (a user's modules importing one another walked every path: 49 s
    for 18 of them)."""
    seen = set() if seen is None else seen
    module = _users(name)
    if module is None or name in seen:
        return False  # (entered already: this walk reads each module once)
    seen.add(name)
    return _loads_framework(vars(module), name, seen) is not None


def _loads_framework(names: dict[str, Any], name: str, seen: set[str]) -> str | None:
    """The one of ``names`` (module ``name``'s) that binds a framework's object or a heavy
    module's (``_is_heavy``, walking on with ``seen``), or None."""
    for key, value in list(names.items()):
        for home in _homes(value, name):
            if not isinstance(home, str):  # an odd object's ``__module__``: tells nothing
                continue
            if home.partition(".")[0] in LAZY or (home != name and _is_heavy(home, seen)):
                return key
    return None


_HEAVY_MAIN_TOLD = False  # once per process: every pool of a script would say the same


def tell_heavy_main(method: str, needs_main: bool) -> None:
    """Say, once, that ``method``'s fresh workers import a script (``needs_main``) that binds
    a framework's object at its top, outside its guard: each loads the framework with it."""
    global _HEAVY_MAIN_TOLD
    defined = _main_defines() if needs_main and method != "fork" else None
    if _HEAVY_MAIN_TOLD or not defined:
        return
    top = {k: v for k, v in vars(sys.modules["__main__"]).items() if k in defined}  # (what
    bound = _loads_framework(top, "__main__", {"__main__"})  # a guard binds: unrun)
    if bound is None:
        return
    _HEAVY_MAIN_TOLD = True
    warn(f"Your script binds `{bound}` to something of a framework (Keras, TensorFlow, JAX or "
         f"torch) at its top, and the augment is defined in it: each {method} worker imports the "
         f"script to find it, and loads the framework with it (seconds and hundreds of MB "
         f"per worker, again at each restart). Fix: define the augment (and what it calls) in "
         f"a module of its own and import it in the script: the workers then load that module "
         f"alone (by value, without the framework, if it uses one at its top).")


def _homes(value: Any, here: str) -> list[Any]:
    """The modules ``value`` comes from, as ``_is_heavy`` reads them: a module's own name
    (none for a framework's bare package, which a worker imports lazily); a class's module,
    and for a class defined ``here``, its direct bases'; a function's module; an object's
    class's."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
        return [] if name in LAZY else [name]
    if isinstance(value, type):
        if value.__module__ != here:
            return [value.__module__]
        # its bases only: a base's own bases load nothing more (shmaug.Sequence's Keras base
        # is Keras-free in a worker: ``keras.sequence._pydataset``)
        return [base.__module__ for base in value.__bases__]
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return [getattr(value, "__module__", None)]
    return [type(value).__module__]
