"""The package's parts and the one way their imports run, read from the source itself.

Parts, highest first: the top (``shmaug/__init__``, the command line, the demo), the Keras
facade (``shmaug.keras``) beside the sources (``shmaug.sources``), the engine
(``shmaug.engine``), the ops (``shmaug.ops`` and ``shmaug.presets``), and the base every part
may use (``shmaug.errors``, ``shmaug.seeding``). A module imports only from its own part or a
lower one, at module level or inside a function alike. Among the parts, only the facade
imports Keras or TensorFlow; the engine imports no framework and no source's optional library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shmaug"
RANK = {"top": 5, "keras": 4, "sources": 4, "engine": 3, "ops": 2, "base": 1}
FRAMEWORKS = {"keras", "tensorflow", "jax", "torch", "tf_keras"}
# What a source or an op may bring in for itself, and the engine never does.
OPTIONAL = FRAMEWORKS | {"albumentations", "tensorflow_datasets", "array_record", "datasets",
                         "pyarrow", "webdataset", "fsspec", "s3fs", "gcsfs", "grain", "pandas"}


def part_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("keras", "sources", "engine", "ops"):
        return parts[1]
    if module in ("shmaug.errors", "shmaug.seeding"):
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


def imports(module: str, path: Path) -> set[str]:
    """Every module ``module`` imports: absolute, relative (resolved), lazily inside a function,
    or through ``importlib.import_module`` with a literal name."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            # `from . import x` imports the module x when there is one
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if f"{base}.{alias.name}" in MODULES)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            found.add(node.args[0].value)
    return found


MODULES = modules()
GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def test_the_file_list_shows_the_four_parts():
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
            f"-> engine -> ops -> base")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if part_of(m) != "top"))
def test_only_the_keras_facade_imports_a_framework(module):
    roots = {target.split(".")[0] for target in GRAPH[module]}
    if part_of(module) == "keras":
        return
    assert not roots & FRAMEWORKS, f"{module} imports {sorted(roots & FRAMEWORKS)}"
    if part_of(module) in ("engine", "base"):
        assert not roots & OPTIONAL, f"{module} imports {sorted(roots & OPTIONAL)}"


def test_the_checker_sees_lazy_and_relative_imports():
    """The rules above must be able to fail: the checker finds a function-level import, a
    relative one two levels up, and a literal ``importlib.import_module``."""
    assert "shmaug.engine.loader" in GRAPH["shmaug.cli"]  # inside a function
    assert "shmaug.errors" in GRAPH["shmaug.engine._store"]  # `from ..errors import`
    assert "keras" in GRAPH["shmaug.keras.sequence"]
    assert "shmaug.engine._platform" in GRAPH["shmaug.engine._store"]  # `from . import`
