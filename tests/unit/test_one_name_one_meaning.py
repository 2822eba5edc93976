"""No two modules of the package define one name (a class, a type alias or a public constant)
differently.

``Augment`` once meant a registered op's signature in ``ops/core.py`` and the user's
``augment`` in the engine, and ``Key`` the facade's batch key and the engine's: a reader who
met one took the other for it; ``INTERPOLATIONS`` was three lists of names in three modules.
A module that needs another's type or constant imports it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shmaug"


def definitions() -> dict[str, list[tuple[str, str]]]:
    """Name -> (module, what it is bound to) for each class, CamelCase alias and public
    CONSTANT at module level (a TypeVar is local to its module)."""
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                found[node.name].append((module, "class"))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                value = ast.unparse(node.value)
                public = name.isupper() and not name.startswith("_")
                if name[:1].isupper() and not name.isupper() or public and not (
                        value.startswith("TypeVar(") or value.endswith(f".{name}")):
                    found[name].append((module, value))  # (a constant taken from another: one)
    return found


def test_each_name_has_one_meaning() -> None:
    found = definitions()
    assert "EpochBatch" in found and "AugmentFn" in found  # the check sees the package
    twice = {name: where for name, where in found.items() if len(where) > 1}
    assert not twice, f"names defined in more than one module: {twice}"
