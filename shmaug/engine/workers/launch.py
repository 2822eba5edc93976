"""Starting one worker process without the known hazards of fork and spawn.

Each hazard is a context manager around ``Process.start()``; ``start_worker`` applies them
all. Kept apart from the pool, which only decides *when* a worker starts.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import multiprocessing
import os
import signal
import sys
import threading
from contextlib import contextmanager
from multiprocessing import forkserver as mp_forkserver
from multiprocessing import spawn as mp_spawn
from typing import Any, Callable, Collection, Iterator, Sequence

from . import lazy_imports
from ...errors import ArgumentError, warn
from ... import platform


# What a forkserver imports once, so that a worker forked from it starts warm (else each
# imports numpy, OpenCV and shmaug again: seconds; cloudpickle rebuilds code shipped by value).
_PRELOAD = ("shmaug.engine.workers.worker", "shmaug.ops", "cloudpickle")
# Runtimes that start threads of their own: fork after they ran can deadlock the child (a lock
# a thread held is never released there), and JAX warns on every fork once it has started.
# array_record too: its reader (0.8.6) segfaults in a forked child that opens a file after the
# parent opened one, unless the parent had also written one (from_array_record opens them).
# obstore too: its runtime, once used, hangs a forked child's requests and can crash the parent
# (its forked children read buckets through fsspec instead: ``sources._transport``).
_THREADED = ("jax", "tensorflow", "torch", "array_record", "obstore")


def default_start_method(payload: bytes = b"") -> str:
    """``start_method=None``: a method other than fork set with
    ``multiprocessing.set_start_method``; else Python's default where it is not fork (Windows
    and macOS spawn, Linux from 3.14 forkserver); else fork while no threaded runtime (or
    array_record) is imported (the fastest start, and ops defined in a notebook work),
    forkserver once one is (what Python 3.14 made the default). A fork that multiprocessing
    reports may be no one's choice: the first use of its default context fixes it (tqdm's
    lock does, at its first bar), so ``start_method="fork"`` is how to insist on it. A payload
    that a fresh process could only load by running code that is running now keeps fork: a
    ``__main__`` it cannot import (a notebook, ``python -c``), a script's lines outside
    ``if __name__ == "__main__":``, a module still being imported.

    ``payload``: the pickled ops (module names show in it).
    """
    methods = multiprocessing.get_all_start_methods()
    chosen = platform.DEFAULT_START_METHOD or multiprocessing.get_start_method(allow_none=True)
    if chosen and chosen != methods[0] and chosen in methods:  # (not joblib's "loky", set
        return chosen  # in its workers: multiprocessing has no such context)
    if methods[0] != "fork" or "forkserver" not in methods:
        return methods[0]
    if not any(name in sys.modules for name in _THREADED):
        return "fork"
    if _reruns_when_imported(payload):
        _tell_forked_threads()
        return "fork"
    return "forkserver"


_FORK_TOLD = False  # once per process: every pool of the script would say the same


def _tell_forked_threads() -> None:
    """Say, once, that an unguarded script's workers fork while a threaded runtime is loaded:
    an augment calling JAX (or TensorFlow, torch) in them hung on sample 0, with nothing but
    a stall warning, where the guarded script ran at once."""
    global _FORK_TOLD
    loaded = [name for name in _THREADED if name in sys.modules]
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if _FORK_TOLD or not loaded or not (isinstance(path, str) and os.path.isfile(path)) or \
            not _reruns_when_imported(b"__main__"):  # (a script's top, not a notebook's)
        return
    _FORK_TOLD = True
    warn(f"Your script does its work at its top, outside `if __name__ == \"__main__\":`, "
         f"while {loaded[0]} is loaded: a fresh worker would run the script again, so shmaug "
         f"forks its workers, and a forked worker that calls {loaded[0]} (whose threads do not "
         f"survive a fork) may hang. Fix: put the script's work under "
         f"`if __name__ == \"__main__\":` (the workers then start by forkserver).")


def _reruns_when_imported(payload: bytes) -> bool:
    """Whether a fresh worker, importing the modules ``payload`` names, would run code that is
    running now (so an unguarded script would train again in each worker): on this thread, or
    on the main thread, where a script's top runs while another thread starts workers (a batch
    asked from tf.data's threads, a restart after an idle stop)."""
    stacks: list[Any] = [sys._getframe(2)]
    if threading.current_thread() is not threading.main_thread():
        stacks.append(sys._current_frames().get(threading.main_thread().ident or 0))
    return any(_runs_a_module_it_names(frame, payload) for frame in stacks)


def _runs_a_module_it_names(frame: Any, payload: bytes) -> bool:
    """Whether the stack ending at ``frame`` runs the top of a module that ``payload`` names
    (``__main__`` outside its guard, or a module still being imported)."""
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__", "")
            if name == "__main__":
                if b"__main__" in payload and not _guarded(frame.f_code.co_filename,
                                                           frame.f_lineno):
                    return True
            elif name and name.encode() in payload:
                return True  # a module whose import is still running
        frame = frame.f_back
    return False


@functools.lru_cache(maxsize=8)
def _script(path: str) -> ast.Module | None:
    """The parsed script at ``path``; None when it is no readable Python file (a notebook,
    ``python -c``)."""
    try:
        with open(path, encoding="utf-8") as file:
            return ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _is_main_guard(node: ast.stmt) -> bool:
    test = ast.unparse(node.test) if isinstance(node, ast.If) else ""
    return "__main__" in test and "__name__" in test


def _main_guards(path: str) -> tuple[tuple[int, int], ...]:
    """The line spans of ``if __name__ == "__main__":`` blocks at the top of the script at
    ``path``; () when it is no readable Python file."""
    tree = _script(path)
    return () if tree is None else tuple(
        (node.lineno, node.end_lineno or node.lineno) for node in tree.body
        if _is_main_guard(node))


@functools.lru_cache(maxsize=8)
def defined_when_imported(path: str) -> frozenset[str] | None:
    """The names the script at ``path`` binds at its top outside its ``__main__`` guards, and
    not again inside one: what a fresh worker, importing it as ``__mp_main__``, finds there
    as the running script has them. None when it is no readable Python file."""
    tree = _script(path)
    if tree is None:
        return None
    return frozenset(_bound(tree.body) - _guard_binds(tree))


_MUTATORS = frozenset(("update", "setdefault", "append", "extend", "insert", "pop", "clear",
                       "add", "remove", "discard", "popitem", "sort", "reverse",
                       "fill"))  # a dict's, list's, set's or array's own change


def set_again_in_guard(path: str, run_there: Collection[str] = (),
                       now: dict[str, int] | None = None) -> frozenset[str]:
    """The names the script at ``path`` binds at its top and sets again, or changes in place
    (``CFG["k"] = v``, ``CFG.update(...)``, ``Opts.blur = v``, ``cfg_module.X = v``), where
    a fresh worker's import does not: inside its ``__main__`` guard (an option read from the
    command line), or in a function or method of the script only this process runs
    (``main()`` with a ``global`` statement): not one called or decorating at the script's
    top, nor one of ``run_there`` (the workers' own: a lazy cache of theirs). ``now``: the
    line each running frame of the script is at (``"<module>"``: its top; else a function's
    name): what comes after has not happened yet. Empty when it is no readable Python
    file."""
    tree = _script(path)
    if tree is None:
        return frozenset()
    now, kinds = now or {}, _kinds(tree.body)
    guards = [node for node in tree.body if isinstance(node, ast.If) and _is_main_guard(node)]
    at_import = _run_at_import([node for node in tree.body if node not in guards])
    here: set[str] = set()
    for guard in guards:
        happened = _happened(guard, now.get("<module>"))
        here |= _bound([s for s in guard.body if happened(s.lineno)]) | _changed(
            guard, kinds, set(), happened)
    functions = list(_functions(tree.body))
    run_here = _reached(guards, tree.body, functions) - at_import - set(run_there)
    for owner, fn in functions:
        if owner not in run_here:
            continue
        declared = {name for node in ast.walk(fn) if isinstance(node, ast.Global)
                    for name in node.names}
        happened = _happened(fn, now.get(fn.name))
        here |= _changed(fn, kinds, _locals(fn) - declared, happened) | {
            node.id for node in ast.walk(fn) if isinstance(node, ast.Name) and
            isinstance(node.ctx, ast.Store) and node.id in declared and happened(node.lineno)}
    return frozenset(_bound(tree.body) & here)


def _happened(scope: ast.AST, line: int | None) -> Callable[[int], bool]:
    """Whether a line of ``scope`` (a guard, a function) may have run by the time its frame
    is at ``line`` (None: it is not running, any may have): one before it, or one in a loop
    around it (a loader per stage, the settings changed after each)."""
    if line is None:
        return lambda _: True
    loops = [(node.lineno, node.end_lineno or node.lineno) for node in ast.walk(scope)
             if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and
             node.lineno <= line <= (node.end_lineno or node.lineno)]
    return lambda at: at < line or any(a <= at <= b for a, b in loops)


def _reached(guards: list[ast.If], body: list[ast.stmt],
             functions: Sequence[tuple[str, ast.AST]]) -> set[str]:
    """The script's functions and classes its ``__main__`` guards name or a decorator
    registers (a click or typer command, which the guard's ``cli()`` runs), and those these
    name in turn: what may run in this process (a function defined and never named, no)."""
    bodies: dict[str, list[ast.AST]] = {}
    for owner, fn in functions:
        bodies.setdefault(owner, []).append(fn)
    reached: set[str] = set()
    todo = [node.id for guard in guards for node in ast.walk(guard)
            if isinstance(node, ast.Name) and node.id in bodies] + [
        node.name for node in body if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and
        node.decorator_list and node.name in bodies]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += [node.id for fn in bodies[name] for node in ast.walk(fn)
                     if isinstance(node, ast.Name) and node.id in bodies]
    return reached


def _kinds(body: list[ast.stmt]) -> dict[str, str]:
    """What each top-level name of the script is: "import", "class", "def" or "value"."""
    kinds = dict.fromkeys(_bound(body), "value")
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kinds.update(((a.asname or a.name).partition(".")[0], "import") for a in node.names)
        elif isinstance(node, ast.ClassDef):
            kinds[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kinds[node.name] = "def"
    return kinds


def _run_at_import(body: list[ast.stmt]) -> set[str]:
    """The names of functions and classes ``body`` calls or decorates with as it runs (not
    inside the functions and classes it defines)."""
    names: set[str] = set()
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo += node.decorator_list  # (run at import; the body is not)
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)  # (a decorator, or a function handed to one that runs it)
        todo += ast.iter_child_nodes(node)
    return names


def _functions(body: list[ast.stmt]) -> Iterator[tuple[str, ast.FunctionDef |
                                                       ast.AsyncFunctionDef]]:
    """The script's top-level functions and its classes' methods, each with the top-level
    name it runs under (its own, or its class's)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from ((node.name, m) for m in node.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names ``fn`` binds of its own: its parameters and its nested functions' and
    lambdas', and what it assigns."""
    names = {node.id for node in ast.walk(fn) if isinstance(node, ast.Name) and
             isinstance(node.ctx, ast.Store)}
    for args in (node for node in ast.walk(fn) if isinstance(node, ast.arguments)):
        names.update(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                     *filter(None, (args.vararg, args.kwarg))))
    return names


def _changed(tree: ast.AST, kinds: dict[str, str], local: set[str],
             happened: Callable[[int], bool]) -> set[str]:
    """The top-level names whose object ``tree`` changes in place where ``happened``: an
    attribute set (``Opts.blur = v``, ``cfg_module.X = v``, ``setattr(Opts, ...)``), an item
    set on a value (``CFG["k"] = v``), a value's own change (``CFG.update(...)``; not a
    module's function, ``np.append``), and the same deeper in a value or a class
    (``CFG["aug"]["shift"] = v``, ``CFG.aug.update(...)``). ``local``: the function's own."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not happened(getattr(node, "lineno", 0)):
            continue
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        changed: list[tuple[ast.expr, str]] = [
            (t, "attribute" if isinstance(t, ast.Attribute) else "item") for t in targets
            if isinstance(t, (ast.Subscript, ast.Attribute))]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _MUTATORS:
            changed.append((node.func.value, "item"))  # (a value's own change)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "setattr" and node.args:
            changed.append((node.args[0], "attribute"))
        for target, how in changed:
            root, depth = _root(target)
            if root is not None and root not in local and kinds.get(root) in (
                    _DEEP if depth else _CHANGED_BY[how]):
                names.add(root)
    return names


# What a change at the name itself changes, by the kind of the name's object (a module's
# functions named like a dict's changes, np.append, change nothing); deeper in, a value's or
# a class's.
_CHANGED_BY = {"attribute": ("import", "class", "value"), "item": ("value",)}
_DEEP = ("value", "class")


def _root(node: ast.AST) -> tuple[str | None, int]:
    """The name a chain of items and attributes (``CFG["aug"].shift``) starts from, and how
    many steps lie between it and the one changed (0: ``CFG[...]`` itself)."""
    depth = 0
    while isinstance(node, (ast.Subscript, ast.Attribute)) and \
            isinstance(node.value, (ast.Subscript, ast.Attribute)):
        node, depth = node.value, depth + 1
    if isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), depth  # (a Name: 0 steps)


def _guard_binds(tree: ast.Module) -> set[str]:
    """The names the script's ``if __name__ == "__main__":`` blocks bind."""
    return set().union(*(_bound(node.body) for node in tree.body
                         if isinstance(node, ast.If) and _is_main_guard(node)))


def _bound(body: list[ast.stmt]) -> set[str]:
    """The module-level names the statements ``body`` bind, outside ``__main__`` guards."""
    names: set[str] = set()
    for node in body:
        if _is_main_guard(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for part in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(node, part, []):
                    names |= _bound(inner.body if isinstance(inner, ast.ExceptHandler)
                                    else [inner])
        else:  # assignments and the like: every name they store
            names.update(n.id for n in ast.walk(node)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _guarded(path: str, line: int | None) -> bool:
    """Whether ``line`` of the script at ``path`` runs inside its ``__main__`` guard."""
    return line is not None and any(a <= line <= b for a, b in _main_guards(path))


def start_worker(process: Any, start_method: str, *, needs_main: bool) -> None:
    """``process.start()`` under every guard below that applies to ``start_method``.

    ``needs_main``: the payload refers to ``__main__`` (a spawned worker must re-import it).
    """
    forking = start_method == "fork"
    fresh = start_method in ("spawn", "forkserver")
    if start_method == "forkserver":
        _preload_in_forkserver()
    with _prepared(fresh, skip_main=fresh and not needs_main), _cv2_single_threaded(forking), \
            _gc_frozen(forking), _sigint_blocked(), _unforked_pipes_closed(forking):
        try:
            process.start()
        except OSError as exc:
            if start_method == "forkserver" and "No usable temporary directory" in str(exc):
                raise ArgumentError(
                    f"The forkserver that starts the workers needs a writable temporary "
                    f"folder for its socket, and found none (TMPDIR="
                    f"{os.environ.get('TMPDIR')!r}, /tmp, /var/tmp and the working folder "
                    f"are missing or read-only). Fix: point TMPDIR at a folder you can "
                    f"write to, or start_method='spawn'.") from exc
            if start_method != "forkserver" or "AF_UNIX path too long" not in str(exc):
                raise
            raise ArgumentError(
                f"The forkserver that starts the workers could not listen: its socket's path "
                f"under the temporary folder is longer than Unix allows (108 bytes; "
                f"TMPDIR={os.environ.get('TMPDIR')!r}). Fix: a shorter TMPDIR (e.g. "
                f"TMPDIR=/tmp), or start_method='spawn'.") from exc
        except AssertionError as exc:  # multiprocessing's own words, no more
            if "daemonic" not in str(exc):
                raise
            raise ArgumentError(
                "shmaug's workers cannot start here: this process is a daemonic worker (of a "
                "multiprocessing.Pool), which Python forbids children. Fix: workers=0 in "
                "it, or run the loader in a concurrent.futures.ProcessPoolExecutor or "
                "joblib's loky workers, which may start them.") from exc


def _forkserver_anew_in_child() -> None:
    """A fork of this process (gunicorn's preload_app) inherits multiprocessing's client of
    the parent's forkserver, which it cannot use (no child of its own: the first Sequence made
    there failed in ``os.waitpid``, ChildProcessError): it starts one of its own, with the same
    preloads, and lets go of the parent's."""
    # (its temporary folder too, where a server's socket goes: the parent's is removed when
    # the parent exits, and this fork's server with it)
    multiprocessing.current_process()._config.pop("tempdir", None)  # type: ignore[attr-defined]
    server = mp_forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is None:
        return
    alive = getattr(server, "_forkserver_alive_fd", None)
    preload = getattr(server, "_preload_modules", None)
    server.__dict__.update(vars(mp_forkserver.ForkServer()))
    if preload is not None:
        server.__dict__["_preload_modules"] = preload
    if alive is not None:  # (the parent's server ends when its last holder closes this)
        with contextlib.suppress(OSError):
            os.close(alive)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forkserver_anew_in_child)


def _preload_in_forkserver() -> None:
    """Add shmaug's worker modules to what the forkserver imports when it starts (Python
    starts one per process, on first use; the user's own preloads stay)."""
    modules = getattr(mp_forkserver._forkserver, "_preload_modules", None)
    if isinstance(modules, list) and not set(_PRELOAD) <= set(modules):
        mp_forkserver.set_forkserver_preload([*modules, *(m for m in _PRELOAD if m not in modules)])


class _LazyImportsFirst:
    """Unpickles as a call to ``lazy_imports.install``: put in the preparation data a fresh
    worker reads first (before it re-imports ``__main__`` and unpickles the user's code), it
    makes the worker's imports of TensorFlow, JAX, torch and Keras lazy from the start."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return lazy_imports.install, ()


@contextmanager
def _prepared(fresh: bool, skip_main: bool) -> Iterator[None]:
    """Start spawn and forkserver (``fresh``) workers with lazy framework imports, and
    without re-running the user's ``__main__`` where the payload does not need it.

    Spawn re-imports the main script in every worker (forkserver's workers too) so that
    objects defined there unpickle: a script that imported TensorFlow would make each worker
    import it (seconds, and ~300 MB each). Where the payload refers to ``__main__`` that import
    must happen, and runs after the lazy imports are in place; where it does not, it is
    skipped.
    """
    if not fresh:
        yield
        return
    original = mp_spawn.get_preparation_data

    def prepared(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        path = data.get("init_main_from_path")
        if skip_main or (isinstance(path, str) and not os.path.isfile(path)):
            # (a script read from stdin is no file to import: its code goes by value)
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        data["shmaug_lazy_imports"] = _LazyImportsFirst()  # unpickled before prepare() runs
        return data

    mp_spawn.get_preparation_data = prepared
    try:
        yield
    finally:
        mp_spawn.get_preparation_data = original


@contextmanager
def _cv2_single_threaded(forking: bool) -> Iterator[None]:
    """Fork workers with OpenCV already set to one thread.

    After the parent has used OpenCV's thread pool, ``cv2.setNumThreads`` in a forked child
    deadlocks (the pool's threads do not exist there). Setting it in the parent around the
    fork lets the child inherit one thread and never touch the pool; the parent's own
    setting is restored right after.
    """
    cv2 = sys.modules.get("cv2")
    if not forking or cv2 is None:
        yield
        return
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(threads)


@contextmanager
def _gc_frozen(forking: bool) -> Iterator[None]:
    """Fork with every existing object moved out of the collector's sight (``gc.freeze``).

    A forked worker's collections would otherwise walk all the parent's objects (with
    TensorFlow imported, millions), costing CPU and copying the pages they sit on. The
    parent gets its objects back right after the fork. A program that froze objects itself
    manages that on its own: ``unfreeze`` would undo its freeze, so nothing is done then.
    """
    if not forking or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def _unforked_pipes_closed(forking: bool) -> Iterator[None]:
    """Close the two pipes CPython's fork made ready for a child when ``os.fork()`` fails
    (EAGAIN under `ulimit -u`): ``popen_fork.Popen._launch`` closes them only once forked
    (3.10-3.13), and each failed start left four descriptors, on which a retrying job crept
    to its `ulimit -n`."""
    try:
        yield
    except OSError as exc:
        tb = exc.__traceback__ if forking else None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.endswith("popen_fork.py"):
                for name in ("parent_r", "child_w", "child_r", "parent_w"):
                    fd = tb.tb_frame.f_locals.get(name)
                    if isinstance(fd, int):
                        with contextlib.suppress(OSError):
                            os.close(fd)
            tb = tb.tb_next
        raise


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Hold Ctrl-C while a worker starts: delivered mid-fork, CPython's after-fork hooks would
    swallow it. It is delivered in the parent right after; the worker ignores it. The mask
    holds this thread only: a press that another thread takes (TensorFlow's) reached the
    main thread's handler mid-start, between a forkserver and its client, which killed the
    server (every later loader: ConnectionRefusedError); so the main thread's handler waits
    too, and runs once the worker has started."""
    with platform.sigint_deferred():
        if not platform.HAS_SIGMASK:  # Windows
            yield
            return
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
