"""Every Python snippet of README.md and of the docs site (docs/**/*.md) runs as written, on
tiny data, so neither the README nor the documentation can rot.

The snippets run in child processes (``_child_readme.py``: each as a module of its own, the
names it uses without defining them from a tiny prelude), the pages shared out over
``CHILDREN`` processes that run side by side, except a snippet that must start TensorFlow
itself ("first, before other TF ops"), which gets a process of its own.
A snippet that needs TensorFlow, Keras, albumentations or h5py skips where they are not
installed.
One that cannot run here is marked in its page itself, right before its block, with
``<!-- readme-test: skip (why) -->``: the several-hosts JAX snippet of docs/scaling.md, which
examples/multi_host_jax.py runs over loopback (test_keras_distribution), and the bucket snippet
of docs/remote.md, whose calls tests/integration/test_remote.py makes against a local server.
A test is named by its snippet's file and line: ``test_..._runs_as_written[docs/ops.md:36]``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests._helpers import shmaug_segments
from tests.integration import _child_readme

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md",
        *sorted(page.relative_to(ROOT).as_posix() for page in (ROOT / "docs").rglob("*.md"))]
TEXTS = {doc: (ROOT / doc).read_text() for doc in DOCS}
# "docs/loader.md:4" -> the code of the ```python block whose code starts on that line
BLOCKS = {f"{doc}:{line}": code for doc, text in TEXTS.items()
          for line, code in _child_readme.snippets(text).items()}
FRESH = "first, before other TF ops"  # the snippet says it must start TensorFlow itself
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>[^)]*)\)\s*-->\s*\n```python\n")
EXCLUDED = {f"{doc}:{text.count(chr(10), 0, m.end()) + 1}": m["why"].strip()
            for doc, text in TEXTS.items() for m in _SKIP.finditer(text)}
_LEFTOVER_GRACE_S = 5.0
CHILDREN = 3  # processes for the pages' snippets: each waits on its own workers much of the time


def _flowers(where: Path) -> None:
    """The README's `flowers/` folder: a sub-folder per class, a few small PNGs in each."""
    rng = np.random.default_rng(0)
    for name in ("daisy", "rose"):
        (where / "flowers" / name).mkdir(parents=True)
        for i in range(3):
            pixels = rng.integers(0, 256, (40, 48, 3), np.uint8)
            Image.fromarray(pixels).save(where / "flowers" / name / f"{i}.png")


def _run(specs: list[str], workdir: Path, name: str) -> dict[str, dict[str, str]]:
    report = workdir / f"report_{name}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._child_readme", str(workdir), str(report),
         *specs], cwd=ROOT, env=env, stdout=subprocess.PIPE,
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
    results = json.loads(report.read_text()) if report.exists() else {}
    for spec in specs:
        results.setdefault(spec, {"status": "failed", "detail": f"the child process ended "
                                   f"(code {proc.returncode}) before it:\n{output[-4000:]}"})
        if shmaug_segments(proc.pid):
            results[spec]["leftover"] = sorted(shmaug_segments(proc.pid))
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    workdir = tmp_path_factory.mktemp("readme")
    runnable = [spec for spec in BLOCKS if spec not in EXCLUDED]
    together = [spec for spec in runnable if FRESH not in BLOCKS[spec]]
    pages = sorted({spec.rsplit(":", 1)[0] for spec in together})
    groups = [[spec for spec in together if pages.index(spec.rsplit(":", 1)[0]) % CHILDREN == k]
              for k in range(CHILDREN)]  # a page's snippets stay together, in order
    groups += [[spec] for spec in runnable if spec not in together]
    for k in range(len(groups)):  # a folder each: the snippets write files where they run
        _flowers(workdir / str(k))
    with ThreadPoolExecutor(len(groups)) as pool:
        done = pool.map(lambda k: _run(groups[k], workdir / str(k), str(k)), range(len(groups)))
        return {spec: result for results in done for spec, result in results.items()}


@pytest.mark.parametrize("spec", list(BLOCKS))
def test_readme_snippet_runs_as_written(spec: str, results: dict[str, dict[str, str]]) -> None:
    if spec in EXCLUDED:
        pytest.skip(f"marked in its page: {EXCLUDED[spec]}")
    result = results[spec]
    if result["status"] == "skipped":
        pytest.skip(result["detail"])
    assert result["status"] == "ok", f"{spec}:\n{result['detail']}"
    assert "leftover" not in result, f"segments left behind: {result['leftover']}"


def test_every_python_block_is_found_and_every_exclusion_says_why() -> None:
    for doc, text in TEXTS.items():
        found = [spec for spec in BLOCKS if spec.rsplit(":", 1)[0] == doc]
        assert len(found) == text.count("```python\n"), doc
    assert sum(text.count("```python\n") for text in TEXTS.values()) >= 15
    assert TEXTS["README.md"].count("```python\n") >= 3  # Keras, the Loader, image folders
    assert all(EXCLUDED.values()), "a `readme-test: skip` needs its reason in the parentheses"
    assert set(EXCLUDED) <= set(BLOCKS)


def test_the_docs_pages_are_found_and_named_as_modules() -> None:
    assert {"docs/keras.md", "docs/loader.md", "docs/ops.md"} <= set(DOCS)
    assert _child_readme.module_name("README.md", 12) == "readme_l12"
    assert _child_readme.module_name("docs/api/ops.md", 3) == "docs_api_ops_l3"


def test_the_prelude_gives_a_snippet_only_what_it_uses() -> None:
    code = "with shmaug.Loader(x, y, augment=fn) as loader:\n    json.dumps(1)\n"
    assert _child_readme.free_names(code) == {"shmaug", "x", "y", "fn", "json"}
    prelude = _child_readme.prelude(code)
    assert "x = " in prelude and "def fn" in prelude and "keras" not in prelude
    assert prelude.index("import numpy") < prelude.index("x = ")
