"""A worker's lazy imports (engine.workers.lazy_imports), in a fresh interpreter each: the finder
must not leak into the test runner, and only a fresh process shows when a module runs.

The package is a real one written to ``tmp_path``, shaped like torch: its ``__init__`` imports
one of its submodules, which is the case ``LazyLoader`` alone runs twice.
"""

from __future__ import annotations

import os
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
           "from shmaug.engine.workers import lazy_imports\n" \
           "lazy_imports.install(frozenset({'heavypkg', 'absentpkg'}))\n" + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(REPO)])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_import_runs_nothing_until_a_use(heavy: Path) -> None:
    out = run(heavy, """
        import heavypkg
        print(builtins.RUNS)
        print(heavypkg.VALUE, builtins.RUNS)
    """)
    assert out.splitlines() == ["[]", "42 ['heavypkg', 'heavypkg.sub']"]


def test_a_second_import_and_a_look_at_its_names_load_nothing(heavy: Path) -> None:
    """``import heavypkg`` again (another module of the user's does), ``find_spec`` and
    ``inspect`` read its ``__spec__`` / ``__file__``: none of them is a use."""
    out = run(heavy, """
        import importlib.util, inspect
        import heavypkg
        import heavypkg as again
        spec = importlib.util.find_spec("heavypkg")
        inspect.getmodule(inspect.currentframe())
        print(builtins.RUNS, again is heavypkg, spec.name, heavypkg.__name__)
        from heavypkg import VALUE
        print(builtins.RUNS, VALUE)
    """)
    assert out.splitlines() == ["[] True heavypkg heavypkg",
                                "['heavypkg', 'heavypkg.sub'] 42"]


def test_threads_that_use_it_at_once_load_it_once(heavy: Path) -> None:
    """Python 3.11's LazyLoader alone lets a second thread see a half-run module."""
    (heavy / "heavypkg" / "sub.py").write_text(
        "import builtins, time\nbuiltins.RUNS = getattr(builtins, 'RUNS', []) + [__name__]\n"
        "time.sleep(0.3)\nVALUE = 41\n")
    out = run(heavy, """
        import threading
        import heavypkg
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(heavypkg.VALUE))
                   for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(seen, builtins.RUNS)
    """)
    assert out == "[42, 42, 42, 42] ['heavypkg', 'heavypkg.sub']"


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
