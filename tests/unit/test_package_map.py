"""The package as a maintainer finds it: each folder's ``__init__`` maps its modules, folders
stay small, and no class or function grows past what a reader holds at once.

A package's docstring names each of its modules and sub-packages in a bullet of its own
(``- ``name``: what it does``, several names to a bullet where they share a job), and names
nothing that is not there, so the map cannot fall behind the files again (it had: the
engine's missed 8 modules). A folder holds a dozen modules at most: past that, it is two
stages. A class stays under 400 lines and a function's body under 80.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "shmaug"
PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))
MAX_MODULES = 12
MAX_CLASS_LINES = 400
MAX_BODY_LINES = 80
BULLET = re.compile(r"^- ((?:``\w+``(?:, | and )?)+):", re.M)


def mapped(docstring: str) -> list[str]:
    """The names the bullets of a package's docstring map, in order."""
    return [name for head in BULLET.findall(docstring) for name in re.findall(r"``(\w+)``", head)]


def contents(folder: Path) -> set[str]:
    modules = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    return modules | {p.parent.name for p in folder.glob("*/__init__.py")}


def label(folder: Path) -> str:
    return str(folder.relative_to(PACKAGE.parent))


@pytest.mark.parametrize("folder", PACKAGES, ids=label)
def test_the_init_maps_every_module_and_nothing_else(folder):
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{label(folder)}/__init__.py says nothing of what the stage does"
    names = mapped(doc)
    assert len(names) == len(set(names)), f"named twice: {names}"
    there = contents(folder)
    assert set(names) == there, (f"{label(folder)}: not in the map {sorted(there - set(names))}"
                                 f", mapped but not there {sorted(set(names) - there)}")


def test_the_architecture_page_names_every_module():
    """docs/architecture.md's tree had fallen behind the files (five modules missing)."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    unnamed = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py"))
               if p.name != "__init__.py" and not re.search(rf"\b{re.escape(p.name)}\b", page)]
    assert not unnamed, f"modules docs/architecture.md does not name: {unnamed}"


@pytest.mark.parametrize("folder", PACKAGES, ids=label)
def test_a_folder_holds_a_dozen_modules_at_most(folder):
    modules = [p.name for p in folder.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES, (label(folder), sorted(modules))


def sizes(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(kind, name, lines) of every class (whole) and function (its body, docstring aside)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found.append(("class", node.name, node.end_lineno - node.lineno + 1))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            found.append(("function", node.name, body[-1].end_lineno - body[0].lineno + 1))
    return found


@pytest.mark.parametrize("module", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_class_or_function_outgrows_a_reader(module):
    too_long = [(kind, name, lines)
                for kind, name, lines in sizes(ast.parse(module.read_text(encoding="utf-8")))
                if lines > (MAX_CLASS_LINES if kind == "class" else MAX_BODY_LINES)]
    assert not too_long, too_long


def test_the_checks_can_fail():
    assert mapped("- ``a``: x\n- ``b``, ``_c``: y\nnot - ``d``: z\n- ``e`` and ``f``: w") == \
        ["a", "b", "_c", "e", "f"]
    tree = ast.parse("class A:\n" + "    x = 1\n" * 400 + "def f():\n    'doc'\n" +
                     "    y = 2\n" * 81)
    assert ("class", "A", 401) in sizes(tree) and ("function", "f", 81) in sizes(tree)
