"""Every logger of the package is named after its module, as docs/architecture.md says, so a
user configures ``shmaug`` (their parent) or one module's logger by the module's name.

The one exception, ``shmaug.cli``: run as ``python -m shmaug.cli``, that module's
``__name__`` is ``__main__``, outside the ``shmaug`` parent, so it names its logger itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shmaug"
# Loggers the package configures but does not own (a framework's noise in `shmaug demo`).
OTHERS = {"tensorflow", "jax._src.xla_bridge"}


def logger_names() -> list[tuple[str, str]]:
    """(module, the argument of each getLogger call, as source text) across the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "getLogger" and node.args:
                found.append((module, ast.unparse(node.args[0])))
    return found


def test_loggers_follow_their_modules() -> None:
    names = logger_names()
    assert ("shmaug.engine.workers.pool", "__name__") in names  # the check sees the package's calls
    wrong = [(module, arg) for module, arg in names
             if arg != "__name__" and arg.strip("'\"") not in OTHERS
             and (module, arg) != ("shmaug.cli", "'shmaug.cli'")]
    assert not wrong, f"loggers not named after their module: {wrong}"
