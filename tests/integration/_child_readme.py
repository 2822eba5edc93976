"""Run by test_readme in a subprocess: execute the Python snippets of README.md and of the
docs site's pages (docs/**/*.md), as written.

Usage: python -m tests.integration._child_readme WORKDIR REPORT_JSON DOC:LINE [DOC:LINE ...]

Each snippet (a fenced ```python block, named by its file, relative to the repository, and the
line its code starts on: ``docs/loader.md:4``) runs as a module of its own
(``readme_l<line>`` for the README, ``docs_loader_l<line>`` for a page), so that the
functions and classes it defines pickle for the workers as they would in a user's script. Its
code sits at its file's line numbers, so a traceback points into the page. What a snippet uses without defining it (``x``,
``model``, ``aug``, ...) comes from a tiny prelude module (``PRELUDE`` below: only the names
it needs, tiny sizes, so a snippet that trains takes seconds). Each result is written to
REPORT_JSON: ``ok``, ``skipped`` (a snippet that needs TensorFlow, Keras, albumentations or
h5py where they are not installed) or ``failed`` with the traceback.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
import re
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("keras", "tensorflow", "albumentations", "h5py")  # a snippet needing one skips
# without it

# name -> (names it needs first, source). Sizes are tiny: 64 glyph-sized training images, 8
# photo-sized ones (224 crops need 240 pixels), a model of a few hundred weights.
PRELUDE: dict[str, tuple[tuple[str, ...], str]] = {
    "np": ((), "import numpy as np"),
    "cv2": ((), "import cv2"),
    "random": ((), "import random"),
    "json": ((), "import json"),
    "shmaug": ((), "import shmaug"),
    "keras": ((), "import keras"),
    "tf": ((), "import tensorflow as tf"),
    "A": ((), "import albumentations as A"),
    "rng": (("np",), "rng = np.random.default_rng(0)"),
    "image": (("np",), "image = np.random.default_rng(1).integers(0, 256, (32, 32, 1), np.uint8)"),
    "x_train": (("np",), ("x_train = np.random.default_rng(2).integers(0, 256, (64, 32, 32, 1), "
                          "np.uint8)")),
    "y_train": (("np",), "y_train = np.arange(64) % 3"),
    "x_val": (("np",), ("x_val = np.random.default_rng(3).integers(0, 256, (32, 32, 32, 1), "
                        "np.uint8)")),
    "y_val": (("np",), "y_val = np.arange(32) % 3"),
    "x": (("np",), "x = np.random.default_rng(4).integers(0, 256, (8, 240, 240, 3), np.uint8)"),
    "y": (("np",), "y = np.arange(8) % 3"),
    "n": (("x",), "n = len(x)"),
    "masks": (("x", "np"), "masks = (x[..., 0] > 127).astype(np.uint8)"),
    "x_float_0_255": (("x", "np"), "x_float_0_255 = x[..., :1].astype(np.float32)"),
    "fn": (("np",), ("def fn(image, rng):\n    return image[:, ::-1] if rng.random() < 0.5 "
                     "else image")),
    "aug": (("shmaug",), "aug = shmaug.presets.glyph_distort()"),
    "per_replica": ((), "per_replica = 4"),
    "epochs": ((), "epochs = 2"),
    "make_model": (("keras",), '''\
def make_model(loss="sparse_categorical_crossentropy"):
    model = keras.Sequential([keras.Input((None, None, 1)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", loss)
    return model'''),
    "model": (("make_model",), "model = make_model(LOSS)"),
    "train": (("shmaug", "x_train", "y_train"), '''\
train = shmaug.Sequence(x_train, y_train, batch_size=16,
                        augment=shmaug.presets.glyph_distort(), workers=2, seed=0, shuffle=True)'''),
    "loader": (("shmaug", "x_train", "y_train"), '''\
loader = shmaug.Loader(x_train, y_train, batch_size=16, workers=0, seed=0, shuffle=True)'''),
    "train_step": (("tf",), '''\
def train_step(images, labels):
    return tf.reduce_mean(tf.cast(images, tf.float32)) + tf.cast(tf.reduce_sum(labels), tf.float32)'''),
}


def snippets(readme: str) -> dict[int, str]:
    """The ```python blocks of a Markdown file, by the line their code starts on."""
    out = {}
    for m in re.finditer(r"^```python\n(.*?)^```", readme, re.DOTALL | re.MULTILINE):
        out[readme.count("\n", 0, m.start()) + 2] = m.group(1)
    return out


def free_names(code: str) -> set[str]:
    """Names the snippet reads but never binds (nor are builtins)."""
    tree = ast.parse(code)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound - set(dir(builtins))


def prelude(code: str) -> str:
    """The prelude for one snippet: the pieces its free names need, in dependency order."""
    wanted, order = free_names(code), []

    def add(name: str) -> None:
        if name in PRELUDE and name not in order:
            for dep in PRELUDE[name][0]:
                add(dep)
            order.append(name)

    for name in sorted(wanted):
        add(name)
    loss = "categorical_crossentropy" if "to_categorical" in code else \
        "sparse_categorical_crossentropy"  # what the snippet's targets call for
    return f"LOSS = {loss!r}\n" + "\n".join(PRELUDE[name][1] for name in order) + "\n"


def module_name(doc: str, line: int) -> str:
    """``readme_l12`` for README.md, ``docs_api_ops_l3`` for docs/api/ops.md: a module name."""
    stem = "readme" if doc == "README.md" else re.sub(r"\W", "_", doc.removesuffix(".md"))
    return f"{stem}_l{line}"


def run(doc: str, line: int, code: str, workdir: Path) -> dict[str, str]:
    name = module_name(doc, line)
    (workdir / f"{name}_prelude.py").write_text(prelude(code))
    # The snippet's code at its lines in its file; the prelude's names imported on line 1.
    (workdir / f"{name}.py").write_text(f"from {name}_prelude import *  # noqa\n" +
                                        "\n" * (line - 2) + code)
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in OPTIONAL:
            return {"status": "skipped", "detail": f"needs {exc.name}: {exc}"}
        return {"status": "failed", "detail": traceback.format_exc()}
    except BaseException:  # noqa: BLE001 - every failure is reported, with its traceback
        return {"status": "failed", "detail": traceback.format_exc()}
    return {"status": "ok", "detail": ""}


def main() -> None:
    workdir, report = Path(sys.argv[1]), Path(sys.argv[2])
    specs = sys.argv[3:]
    texts = {doc: (ROOT / doc).read_text() for doc in {s.rsplit(":", 1)[0] for s in specs}}
    blocks = {doc: snippets(text) for doc, text in texts.items()}
    os.chdir(workdir)  # snippets write files (loader.json, backup/, flowers_224/) here
    sys.path.insert(0, str(workdir))
    results = {}
    for spec in specs:
        doc, line = spec.rsplit(":", 1)
        results[spec] = run(doc, int(line), blocks[doc][int(line)], workdir)
        report.write_text(json.dumps(results))  # as it goes: a hang still reports the rest
        print(f"{spec}: {results[spec]['status']}", flush=True)


if __name__ == "__main__":
    main()
