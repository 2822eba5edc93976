"""A worker's lazy imports (engine._lazy_imports), in a fresh interpreter each: the finder
must not leak into the test runner, and only a fresh process shows when a module runs.

The package is a real one written to ``tmp_path``, shaped like torch: its ``__init__`` imports
one of its submodules, which is the case ``LazyLoader`` alone runs twice.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def heavy(tmp_path: Path) -> Path:
    """``heavypkg``: each module appends its name to ``RUNS`` (kept in ``builtins``) when it
    runs, so a test reads how many times each ran."""
    package = tmp_path / "heavypkg"
    package.mkdir()
    record = "import builtins\nbuiltins.RUNS = getattr(builtins, 'RUNS', []) + [__name__]\n"
    (package / "__init__.py").write_text(record + "from . import sub\nVALUE = sub.VALUE + 1\n")
    (package / "sub.py").write_text(record + "VALUE = 41\n")
    return tmp_path


def run(path: Path, body: str) -> str:
    code = "import builtins, sys\nbuiltins.RUNS = []\n" \
           "from shmaug.engine import _lazy_imports\n" \
           "_lazy_imports.install(frozenset({'heavypkg', 'absentpkg'}))\n" + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": f"{path}:{REPO}", "PATH": ""})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_import_runs_nothing_until_a_use(heavy: Path) -> None:
    out = run(heavy, """
        import heavypkg
        print(builtins.RUNS)
        print(heavypkg.VALUE, builtins.RUNS)
    """)
    assert out.splitlines() == ["[]", "42 ['heavypkg', 'heavypkg.sub']"]


def test_a_submodule_its_package_imports_runs_once(heavy: Path) -> None:
    """``import heavypkg.sub`` loads the package, whose ``__init__`` imports ``sub``: that one
    module object is what the import binds, not a second run of ``sub``."""
    out = run(heavy, """
        import heavypkg.sub
        print(builtins.RUNS, heavypkg.sub is sys.modules["heavypkg.sub"], heavypkg.sub.VALUE)
        print(heavypkg.sub.__spec__.name, heavypkg.sub.__spec__.origin.endswith("sub.py"))
    """)
    assert out.splitlines() == ["['heavypkg', 'heavypkg.sub'] True 41", "heavypkg.sub True"]


def test_other_modules_and_missing_ones_import_as_usual(heavy: Path) -> None:
    out = run(heavy, """
        import json
        print(type(json).__name__, json.dumps([1]))
        try:
            import absentpkg
        except ModuleNotFoundError as exc:
            print("missing", exc.name)
    """)
    assert out.splitlines() == ["module [1]", "missing absentpkg"]
