"""Every Python snippet of README.md runs as written, on tiny data, so the README cannot rot.

The snippets run in a child process (``_child_readme.py``: each as a module of its own, the
names it uses without defining them from a tiny prelude), all in one, except a snippet that
must start TensorFlow itself ("first, before other TF ops"), which gets a process of its own.
A snippet that needs TensorFlow, Keras or albumentations skips where they are not installed.
One that cannot run here is marked in the README itself, right before its block, with
``<!-- readme-test: skip (why) -->``: only the several-hosts JAX snippet, which
examples/multi_host_jax.py runs over loopback (test_keras_distribution).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import shmaug_segments
from tests.integration import _child_readme

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = _child_readme.snippets(README)
FRESH = "first, before other TF ops"  # the snippet says it must start TensorFlow itself
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>[^)]*)\)\s*-->\s*\n```python\n")
EXCLUDED = {README.count("\n", 0, m.end()) + 1: m["why"].strip() for m in _SKIP.finditer(README)}
_LEFTOVER_GRACE_S = 5.0


def _flowers(where: Path) -> None:
    """The README's `flowers/` folder: a sub-folder per class, a few small PNGs in each."""
    rng = np.random.default_rng(0)
    for name in ("daisy", "rose"):
        (where / "flowers" / name).mkdir(parents=True)
        for i in range(3):
            pixels = rng.integers(0, 256, (40, 48, 3), np.uint8)
            Image.fromarray(pixels).save(where / "flowers" / name / f"{i}.png")


def _run(lines: list[int], workdir: Path) -> dict[int, dict[str, str]]:
    report = workdir / f"report_{lines[0]}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._child_readme", str(workdir), str(report),
         *map(str, lines)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    # Nothing a snippet started may outlive it: its loaders end with the interpreter.
    deadline = time.monotonic() + _LEFTOVER_GRACE_S
    while shmaug_segments(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    results = {int(k): v for k, v in json.loads(report.read_text()).items()} \
        if report.exists() else {}
    for line in lines:
        results.setdefault(line, {"status": "failed", "detail": f"the child process ended "
                                   f"(code {proc.returncode}) before it:\n{output[-4000:]}"})
        if shmaug_segments(proc.pid):
            results[line]["leftover"] = sorted(shmaug_segments(proc.pid))
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, str]]:
    workdir = tmp_path_factory.mktemp("readme")
    _flowers(workdir)
    runnable = [line for line in BLOCKS if line not in EXCLUDED]
    together = [line for line in runnable if FRESH not in BLOCKS[line]]
    out = _run(together, workdir)
    for line in runnable:
        if line not in together:
            out.update(_run([line], workdir))
    return out


@pytest.mark.parametrize("line", sorted(BLOCKS))
def test_readme_snippet_runs_as_written(line: int, results: dict[int, dict[str, str]]) -> None:
    if line in EXCLUDED:
        pytest.skip(f"marked in the README: {EXCLUDED[line]}")
    result = results[line]
    if result["status"] == "skipped":
        pytest.skip(result["detail"])
    assert result["status"] == "ok", f"README.md line {line}:\n{result['detail']}"
    assert "leftover" not in result, f"segments left behind: {result['leftover']}"


def test_every_python_block_is_found_and_every_exclusion_says_why() -> None:
    assert len(BLOCKS) == README.count("```python\n") >= 15
    assert all(EXCLUDED.values()), "a `readme-test: skip` needs its reason in the parentheses"
    assert set(EXCLUDED) <= set(BLOCKS)


def test_the_prelude_gives_a_snippet_only_what_it_uses() -> None:
    code = "with shmaug.Loader(x, y, augment=fn) as loader:\n    json.dumps(1)\n"
    assert _child_readme.free_names(code) == {"shmaug", "x", "y", "fn", "json"}
    prelude = _child_readme.prelude(code)
    assert "x = " in prelude and "def fn" in prelude and "keras" not in prelude
    assert prelude.index("import numpy") < prelude.index("x = ")
