"""The package's parts and the one way their imports run, read from the source itself.

Parts, highest first: the top (``shmaug/__init__``, the command line, the demo), the Keras
facade (``shmaug.keras``) beside the sources (``shmaug.sources``) and the Ray workers
(``shmaug.ray``), the engine
(``shmaug.engine``), the ops (``shmaug.ops`` and ``shmaug.presets``), shared memory
(``shmaug.memory``, which the engine and the sources both use) and the base every part may use
(``shmaug.errors``, ``shmaug.seeding``, ``shmaug.platform``, ``shmaug.deferred``,
``shmaug.resample``, ``shmaug.whole_decodes``). A module imports only from its
own part or a lower one, at module level or inside a function alike. Among the parts, only the
facade imports Keras or TensorFlow; the engine imports no framework and no source's optional
library.

Inside the parts: a module never imports an underscore module (or an underscore name) of
another package, so what crosses a package's border has a name of its own; and the imports
that run (all but those under ``TYPE_CHECKING``) make no circle. Nor does a module read
another object's private attribute (a friend module's ``seq._runtime``, ``colour._mapped``):
what it needs is a named member of the owner (another library's, where we must, is listed
with its reason).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shmaug"
RANK = {"top": 6, "keras": 5, "sources": 5, "ray": 5, "engine": 4, "ops": 3, "memory": 2,
        "base": 1}
FRAMEWORKS = {"keras", "tensorflow", "jax", "torch", "tf_keras"}
# What a source or an op may bring in for itself, and the engine never does.
OPTIONAL = FRAMEWORKS | {"albumentations", "tensorflow_datasets", "array_record", "datasets",
                         "pyarrow", "webdataset", "fsspec", "s3fs", "gcsfs", "grain", "pandas",
                         "obstore", "ray"}


def part_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("keras", "sources", "ray", "engine", "ops", "memory"):
        return parts[1]
    if module in ("shmaug.errors", "shmaug.seeding", "shmaug.platform", "shmaug.deferred",
                  "shmaug.resample", "shmaug.whole_decodes"):
        return "base"
    if module == "shmaug.presets":
        return "ops"
    return "top"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        dotted = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(dotted[:-1] if dotted[-1] == "__init__" else dotted)
        found[name] = path
    return found


def package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: imports that never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def imports(module: str, path: Path, *, running: bool = False) -> dict[str, set[str]]:
    """Every module ``module`` imports (absolute, relative (resolved), lazily inside a function,
    or through ``importlib.import_module`` with a literal name), with the names it takes from
    each; ``running``: only the imports that run (not those under ``TYPE_CHECKING``)."""
    package = package_of(module) if module in MODULES else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree) if running else set()
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name, set())
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = found.setdefault(base, set())
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:  # `from . import x`: the module x
                    found.setdefault(f"{base}.{alias.name}", set())
                else:
                    names.add(alias.name)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            found.setdefault(node.args[0].value, set())
    return found


MODULES = modules()
GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def test_the_file_list_shows_the_parts():
    assert {part_of(m) for m in MODULES} == set(RANK)
    top = sorted(m for m in MODULES if part_of(m) == "top")
    # A handful of modules where a user looks, no more: the rest lives in a part.
    assert len(top) <= 6, top


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_one_way(module):
    here = part_of(module)
    for target in GRAPH[module]:
        if not target.startswith("shmaug.") or target == "shmaug":
            continue
        there = part_of(target)
        assert there == here or RANK[there] < RANK[here], (
            f"{module} ({here}) imports {target} ({there}): imports run top -> keras | sources "
            f"-> engine -> ops -> memory -> base")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if part_of(m) != "top"))
def test_only_the_keras_facade_imports_a_framework(module):
    roots = {target.split(".")[0] for target in GRAPH[module]}
    if part_of(module) == "keras":
        return
    assert not roots & FRAMEWORKS, f"{module} imports {sorted(roots & FRAMEWORKS)}"
    if part_of(module) in ("engine", "memory", "base"):
        assert not roots & OPTIONAL, f"{module} imports {sorted(roots & OPTIONAL)}"


# What the engine may take from the ops: the plan it reads (issue 57), and values and
# helpers; never a container or an op class, which would put pipeline policy in the engine.
ENGINE_FROM_OPS = {"shmaug.ops.plan", "shmaug.ops.declared", "shmaug.ops.core",
                   "shmaug.ops.params", "shmaug.ops.mixing", "shmaug.ops.targets.formats",
                   "shmaug.ops.targets.sample", "shmaug.ops.targets.boxes",
                   "shmaug.ops.targets.box_moves"}
OPS_CLASSES = {"Compose", "OneOf", "Maybe", "SomeOf", "Op", "FromAlbumentations", "FromPil",
               "FromArray"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if part_of(m) == "engine"))
def test_the_engine_reads_a_plan_and_imports_no_pipeline_class(module):
    for target, names in GRAPH[module].items():
        if target == "shmaug.ops" or target.startswith("shmaug.ops."):
            assert target in ENGINE_FROM_OPS, f"{module} imports {target}"
            assert not names & OPS_CLASSES, f"{module} imports {sorted(names & OPS_CLASSES)}"


def private_reaches(module: str, graph: dict[str, dict[str, set[str]]]) -> list[str]:
    """What ``module`` takes from another package that is private to that package: a module
    whose path below the two packages' common parent has an underscore part, or an underscore
    name of a module there."""
    found = []
    home = package_of(module).split(".")
    for target, names in graph[module].items():
        if not target.startswith("shmaug") or target not in MODULES:
            continue
        if package_of(target) == package_of(module) or module.startswith(target + "."):
            continue  # one's own package (a package's door re-exports its own modules' names)
        parts = target.split(".")
        common = 0
        while common < min(len(home), len(parts)) and home[common] == parts[common]:
            common += 1
        below = parts[common:]
        if any(part.startswith("_") for part in below):
            found.append(target)
        found += [f"{target}.{name}" for name in sorted(names)
                  if name.startswith("_") and not name.startswith("__")]
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reaches_into_another_packages_private_modules(module):
    reaches = private_reaches(module, GRAPH)
    assert not reaches, (
        f"{module} imports {reaches}, private to another package: give what crosses the "
        f"border a name without an underscore (or move the code to where it is used)")


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def running_graph() -> dict[str, set[str]]:
    """Module -> the shmaug modules its running imports load (a package's own parents, which
    Python loads first anyway, left out)."""
    graph = {}
    for name, path in MODULES.items():
        targets = imports(name, path, running=True)
        graph[name] = {t for t in targets if t in MODULES and t != name
                       and not name.startswith(t + ".")}
    return graph


def test_no_circle_among_running_imports():
    assert circles(running_graph()) == []


def test_the_checkers_can_fail():
    """The rules above must be able to fail: the checker finds a function-level import, a
    relative one two levels up, a literal ``importlib.import_module``, a private reach and a
    circle."""
    assert "shmaug.engine.loader" in GRAPH["shmaug.cli"]  # inside a function
    assert "shmaug.errors" in GRAPH["shmaug.memory.store"]  # `from ..errors import`
    assert "keras" in GRAPH["shmaug.keras.sequence"]
    assert "shmaug.platform" in GRAPH["shmaug.memory.store"]  # `from .. import platform`
    reach = {"shmaug.engine.loader": {"shmaug.engine.workers._retiring": set(),
                                      "shmaug.ops.params": {"_pair"}}}
    assert private_reaches("shmaug.engine.loader", reach) == [
        "shmaug.engine.workers._retiring", "shmaug.ops.params._pair"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Private attributes of other libraries that shmaug must read, as the code spells the read
# (receiver included, so that an allowance covers no state of ours), each with why.
FOREIGN_PRIVATE = {
    "sys._getframe": "the caller's frame: a warning's stacklevel, Keras' asking loop",
    "sys._current_frames": "the main thread's frames: whether a script's top runs there",
    "os._exit": "leave a forked worker (or a hung process) without running atexit handlers",
    "parts._replace": "a namedtuple's copy-with-changes (urllib's SplitResult)",
    "np.random.mtrand._rand": "numpy's legacy global generator, which seeding reseeds",
    "legacy._bit_generator": "that generator's bit generator, to see whether a user swapped it",
    "mp_forkserver._forkserver": "multiprocessing's one fork server, to read its preload list",
    "multiprocessing.process._children": "multiprocessing's list of this process's children, "
    "from which a fork drops its parent's workers (its exit terminated and joined them)",
    "process._popen": "a worker's Popen, whose pipe ends a fork closes (they kept the "
    "forkserver workers of a killed parent running)",
    "multiprocessing.current_process()._config": "multiprocessing's settings, whose temporary "
    "folder a fork leaves to its parent (its forkserver's socket went with it)",
    "shm._mmap": "SharedMemory's mapping, closed by hand when a view outlives the block",
    "shm._buf": "SharedMemory's buffer, dropped with its mapping",
    "shm._name": "SharedMemory's block name as the resource tracker spells it",
    "shm._fd": "SharedMemory's descriptor, to reserve the block's room (posix_fallocate)",
    "dist.distributed_c10d._get_default_store": "torch.distributed's key-value store (no "
    "public door to it), where each rank leaves its shard's seed for the others to compare",
}


def _own_private_names(tree: ast.AST) -> set[str]:
    """The private names a module's own classes define: methods, class attributes (and
    annotated fields), ``__slots__`` entries, and attributes set on ``self``/``cls``."""
    names: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def foreign_private_reads(source: str) -> list[str]:
    """Where a module reads a private attribute (one leading underscore, not a dunder) of an
    object that is not ``self``, ``cls`` or ``super()``, and that none of the module's own
    classes defines: another module's or another class's private state. What it cannot see:
    a name one of the module's classes defines is let through on any object (the AST does
    not know the receiver's class), and ``getattr(x, "_name")`` is not an attribute read."""
    tree = ast.parse(source)
    own = _own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own:
            continue
        if ast.unparse(node) in FOREIGN_PRIVATE:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id == "super"):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reads_another_objects_private_state(module):
    reads = foreign_private_reads(MODULES[module].read_text())
    assert not reads, (
        f"{module} reads private state it does not own: {reads}; give what the friend needs "
        f"a named method or property on its owner (or, for another library's, a reason in "
        f"FOREIGN_PRIVATE)")


def test_every_foreign_allowance_is_still_needed():
    """The allowances stay few: each one is a read the package still makes."""
    text = "\n".join(p.read_text() for p in MODULES.values())
    assert not [read for read in FOREIGN_PRIVATE if read not in text]


def test_the_private_state_rule_can_fail():
    """The rule sees a friend's read and a module's private function, and lets through a
    class's own state, ``super()``, dunders and what the module's own class defines."""
    source = (
        "import colour\n"
        "class Box:\n"
        "    __slots__ = ('_kept',)\n"
        "    def __init__(self, seq):\n"
        "        self._seq = seq\n"
        "    def _own(self, other):\n"
        "        return other._seq, other._kept, self._seq._runtime, super()._x, cls.__d__\n"
        "def f(seq):\n"
        "    return seq._runtime.lock, colour._mapped, Box._own, seq.__class__\n")
    assert sorted(foreign_private_reads(source)) == [
        "line 7: self._seq._runtime", "line 9: colour._mapped", "line 9: seq._runtime"]
