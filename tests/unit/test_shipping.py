"""Which of the user's modules ship their code by value to fresh workers (those whose import
would load a framework), and that such a payload rebuilds the same code without the module
(engine.workers.shipping; the worker side is tests/integration/test_lazy_frameworks.py)."""

from __future__ import annotations

import pickle
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from shmaug.engine.workers import shipping

# `json` stands for a framework here: the rule is the same for every name of LAZY, and json
# costs nothing to import.
FRAMEWORK = frozenset({"json"})

MODULES = {
    "binds_bare": "import json\n",  # a worker imports it lazily: light
    "binds_submodule": "from json import decoder\n",  # runs the package: heavy
    "binds_a_function": "from json import dumps\n",
    "subclasses": "import json\n\nclass Mine(json.JSONDecoder):\n    pass\n",
    "an_object": "import json\n\nCODER = json.JSONEncoder()\n",
    "through_another": "import binds_submodule  # noqa: F401\n",  # imports a heavy module
    "cycle_a": "import cycle_b  # noqa: F401\n",
    "cycle_b": "import cycle_a  # noqa: F401\n",
}
AUGMENT = textwrap.dedent("""

    class Shift:
        def __init__(self, by):
            self.by = by

        def __call__(self, image, rng):
            return image + self.by
""")


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The modules above, as files of the user's, imported; ``json`` their framework."""
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(source + AUGMENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(shipping, "LAZY", FRAMEWORK)
    for name in MODULES:
        __import__(name)
    yield
    for name in MODULES:
        sys.modules.pop(name, None)


@pytest.mark.usefixtures("user_modules")
@pytest.mark.parametrize("name, heavy", [
    ("binds_bare", False), ("binds_submodule", True), ("binds_a_function", True),
    ("subclasses", True), ("an_object", True), ("through_another", True), ("cycle_a", False),
])
def test_a_module_is_heavy_when_importing_it_would_load_the_framework(name: str,
                                                                      heavy: bool) -> None:
    augment = sys.modules[name].Shift(3)  # type: ignore[attr-defined]
    plain, by_value = shipping.pickled(augment)
    assert plain == pickle.dumps(augment, protocol=pickle.HIGHEST_PROTOCOL)
    assert (by_value is not None) is heavy
    if by_value is not None:
        del sys.modules[name]  # the copy by value rebuilds without its module
        rebuilt = pickle.loads(by_value)
        assert name not in sys.modules
        assert type(rebuilt).__name__ == "Shift" and rebuilt.by == 3
        assert rebuilt(np.ones(2, np.uint8), None).tolist() == [4, 4]
        # A worker's traceback through it names the file and its line: cloudpickle writes
        # "<dynamic-code>" (rebuilt here, its class is this process's own: read the bytes)
        assert b"<dynamic-code>" not in by_value
        assert type(augment).__call__.__code__.co_filename.encode() in by_value


def test_installed_packages_and_shmaug_are_never_shipped_by_value() -> None:
    assert shipping._users("numpy") is None and shipping._users("json") is None
    assert shipping._users("shmaug.ops.core") is None
    assert shipping._users("__main__") is None


def test_a_fresh_import_of_the_script_finds_what_it_binds_outside_its_guard(tmp_path) -> None:
    """What a spawn or forkserver worker finds in ``__mp_main__``: a name the guard binds
    again is the guard's object in the running script, so it goes by value too."""
    from shmaug.engine.workers import launch

    script = tmp_path / "train.py"
    script.write_text(
        "import numpy as np\nfrom os import path as p\naug = None\n"
        "try:\n    import cv2\nexcept ImportError:\n    cv2 = None\n"
        "def top(image, rng):\n    return image\nclass Ops:\n    pass\n"
        "if __name__ == '__main__':\n    def aug(image, rng):\n        return image + 5\n"
        "    def guarded(image, rng):\n        return image\n    x = 1\n")
    assert launch.defined_when_imported(str(script)) == {"np", "p", "cv2", "top", "Ops"}
    assert launch.defined_when_imported(str(tmp_path / "missing.py")) is None


@pytest.mark.parametrize("bottom, heavy", [("", False), ("from json import decoder\n", True)])
def test_modules_importing_one_another_are_each_read_once(tmp_path, monkeypatch, bottom,
                                                          heavy) -> None:
    """A package whose modules each import the ones before: every path through them was
    walked (49 s for 18 modules before the workers started, on every Sequence)."""
    names = [f"layered_{i}" for i in range(16)]
    for i, name in enumerate(names):
        (tmp_path / f"{name}.py").write_text(
            (bottom if i == 0 else "") + "".join(f"import {n}\n" for n in names[:i]))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(shipping, "LAZY", FRAMEWORK)
    entered: list[str] = []
    real = shipping._loads_framework
    monkeypatch.setattr(shipping, "_loads_framework",
                        lambda names, name, seen: entered.append(name) or real(names, name, seen))
    try:
        __import__(names[-1])
        assert shipping._is_heavy(names[-1]) is heavy
        assert max(entered.count(n) for n in names) == 1
    finally:
        for name in names:
            sys.modules.pop(name, None)
