"""Every file a docstring or comment of the package cites exists in the project.

A docstring that sends a reader to ``worker.py`` after the code moved to ``runner.py``, or to
a design note outside the project, is worse than none: a user's clone holds only the project.
A cited ``name.py`` / ``name.md`` resolves from the citing module's folder or one above it in
the package (``kernels/cv.py`` from ``ops/builtin/``), the project's root or, for the
documentation site's links (``../faults.md``), from ``docs/api/``.
Files of other projects cited on purpose are listed in ``EXTERNAL`` with their owner.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shmaug"
CITED = re.compile(r"(?<![\w./-])((?:\.\./|[\w-]+/)*[\w-]+\.(?:py|md))\b")
# Files of other projects that a comment names on purpose.
EXTERNAL = {
    "trainer.py",  # Keras' trainers (keras/src/backend/*/trainer.py), read by keras/_stack.py
}


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring in a module's source."""
    found = [(tok.start[0], tok.string)
             for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.append((body[0].lineno, body[0].value.value))
    return found


def resolves(cited: str, module: Path) -> bool:
    if cited in EXTERNAL:
        return True
    folders = [module.parent, *module.parent.parents]
    bases = [*folders[:folders.index(PACKAGE) + 1], ROOT, ROOT / "docs" / "api"]
    return any((base / cited).resolve().is_file() for base in bases)


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_cited_files_exist(module: Path) -> None:
    missing = [f"{module.relative_to(ROOT)}:{line}: {cited}"
               for line, text in comments_and_docstrings(module.read_text(encoding="utf-8"))
               for cited in CITED.findall(text) if not resolves(cited, module)]
    assert not missing, "cited files that do not exist:\n" + "\n".join(missing)


def test_the_check_sees_a_missing_file() -> None:
    source = '"""See ``builtin.py`` and docs/architecture.md."""\n# and ../faults.md\n'
    cited = [c for _, text in comments_and_docstrings(source) for c in CITED.findall(text)]
    assert sorted(cited) == ["../faults.md", "builtin.py", "docs/architecture.md"]
    assert [c for c in cited if not resolves(c, PACKAGE / "ops" / "core.py")] == ["builtin.py"]
