"""A script as spawned workers see it. A spawn or forkserver worker imports the
script again without running its ``if __name__ == "__main__":`` block, so an augment reading a
global that block sets again read the import's value there (a shift of 0 where forked workers
shifted by 5), without a word. Where the workers start fresh it is said, naming the global
(``shipping._tell_set_again``). A script read from stdin, no file to import, goes by
value. An unguarded script keeps fork, which is told where a threaded runtime is loaded."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = next((name for name in ("torch", "tensorflow") if importlib.util.find_spec(name)),
               None)  # a threaded runtime the scripts load, where one is installed
SCRIPT = '''
import hashlib, sys
import numpy as np
import shmaug

STRENGTH = 0
_TABLE = None


def _amount():
    global _TABLE  # a lazy cache of the worker's own: not told
    if _TABLE is None:
        _TABLE = 1
    return STRENGTH * _TABLE


def shift(image, rng):
    return np.roll(image, _amount() + int(rng.integers(0, 2)), axis=0)


if __name__ == "__main__":
    STRENGTH = 5  # an option read from the command line
    x = np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3)
    method = sys.argv[1]
    if method == "default-threaded":  # a threaded runtime: the default would be forkserver
        try:
            import torch
        except ImportError:
            import tensorflow
    kw = (dict(workers=0) if method == "none" else dict(workers=2) if method.startswith(
        "default") else dict(workers=2, start_method=method))
    with shmaug.Loader(x, batch_size=4, augment=shift, seed=0, **kw) as loader:
        print("DIGEST", hashlib.md5(b"".join(xb.tobytes() for xb, _ in loader)).hexdigest())
'''


def run(script: Path, method: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-W", "always", str(script), *[method][:bool(method)]],
                          cwd=script.parent, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_global_the_main_block_sets_again_is_told_where_workers_start_fresh(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    fresh = ["spawn", *(["default-threaded"] if RUNTIME else [])]  # (then forkserver)
    done = {m: run(script, m) for m in ("none", "fork", *fresh)}
    digest = {m: d.stdout.split("DIGEST ")[1].split()[0] for m, d in done.items()}
    assert digest["fork"] == digest["none"] and "sets again" not in done["fork"].stderr
    for method in fresh:
        assert digest[method] != digest["none"]  # the first value, as said:
        told = done[method].stderr
        assert "`shift` reads `STRENGTH`, which your script sets again" in told, told
        assert "functools.partial(shift, strength=STRENGTH)" in told and "_TABLE" not in told


STDIN = '''
import numpy as np, shmaug
def flip(image, rng):
    return image[:, ::-1]
x = np.arange(8 * 4 * 4, dtype=np.uint8).reshape(8, 4, 4)
with shmaug.Loader(x, batch_size=4, augment=flip, workers=2, start_method="spawn") as loader:
    assert all((xb == x[i * 4:i * 4 + 4, :, ::-1]).all() for i, (xb, _) in enumerate(loader))
print("OK")
'''


CHANGED = '''
import hashlib, sys
import numpy as np
import shmaug
import settings  # a config module of the user's

DEGREES = 0
CFG = {"shift": 0}
SET_AT_IMPORT = {"shift": 0}


class Opts:
    blur = 0


def configure():
    SET_AT_IMPORT["shift"] = 1  # run at the import too: a fresh worker has it


configure()


HELPED = 0
SET_BY_METHOD = 0
NESTED = {"aug": {"shift": 0}}
STAGE = {"shift": 0}


class Trainer:
    def setup(self):
        global SET_BY_METHOD
        SET_BY_METHOD = 1


def shift(image, rng):
    return np.roll(image, DEGREES + CFG["shift"] + Opts.blur + settings.STEP + HELPED
                   + SET_BY_METHOD + NESTED["aug"]["shift"] + STAGE["shift"]
                   + SET_AT_IMPORT["shift"] + int(rng.integers(0, 2)), axis=0)


def configure_from_args():
    global HELPED
    HELPED = 1  # a helper of main()


def main():
    global DEGREES
    DEGREES = 1  # set in main(), which no worker runs
    configure_from_args()
    Trainer().setup()
    NESTED["aug"]["shift"] = 1  # deeper in
    x = np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3)
    kw = dict(workers=0) if sys.argv[1] == "none" else dict(workers=2, start_method="spawn")
    for stage in range(2):  # a loader per stage, each stronger (loader.md)
        with shmaug.Loader(x, batch_size=4, augment=shift, seed=0, **kw) as loader:
            print("DIGEST", hashlib.md5(b"".join(xb.tobytes() for xb, _ in loader)).hexdigest())
        STAGE["shift"] += 1  # (after the first loader, before the second)


if __name__ == "__main__":
    CFG.update(shift=2)  # changed in place, not bound again
    Opts.blur = 3
    settings.STEP = 4
    main()
'''


def test_globals_set_in_main_or_changed_in_place_are_told_where_workers_start_fresh(tmp_path):
    """A global set in ``main()`` (``global``), a dict updated, a class attribute or a config
    module's attribute set under the guard: a spawned worker reads the import's values, so
    it augmented otherwise than ``workers=0``, and was told nothing. A change the import
    makes too (a function called at the script's top) is no difference: not named."""
    script = tmp_path / "train.py"
    script.write_text(CHANGED)
    (tmp_path / "settings.py").write_text("STEP = 0\n")
    done = {m: run(script, m) for m in ("none", "spawn")}
    digest = {m: d.stdout.split("DIGEST ")[1].split()[0] for m, d in done.items()}
    assert digest["spawn"] != digest["none"]
    told = done["spawn"].stderr
    assert "`shift` reads `CFG`, `DEGREES`, `HELPED`, `NESTED`, `Opts`, `SET_BY_METHOD`, " \
           "`STAGE`, `settings`, which your script sets again" in told, told
    assert "SET_AT_IMPORT" not in told and "sets again" not in done["none"].stderr


UNCHANGED = '''
import hashlib, logging, sys
from dataclasses import dataclass
import cv2
import numpy as np
import shmaug

ARGS = None


@dataclass
class Config:
    epochs: int = 1

log = logging.getLogger("train")
OPS = {}
CACHE = {}
stats = {"seen": 0}
RESULTS = {}


def register(fn):
    OPS[fn.__name__] = fn  # run at import, by the decorator: a fresh worker has it
    return fn


def kernel(k):  # a lazy cache the workers fill themselves
    if k not in CACHE:
        CACHE[k] = k
    return CACHE[k]


@register
def roll(image, amount):
    return np.roll(image, amount, axis=0)


class Shift:
    def __init__(self, amount=0):
        self.amount = amount

    @classmethod
    def from_args(cls):  # (run where it is made: its value goes with the instance)
        return cls(ARGS["amount"])

    def __call__(self, image, rng):
        log.debug("shift")
        return OPS["roll"](image, self._amount() + len(stats) + len(RESULTS) + self.amount
                           + int(rng.integers(0, 2)))

    def _amount(self):
        return kernel(1)


async def unused():
    stats["seen"] += 1  # never run


def main():
    global ARGS
    ARGS = {"amount": 1}
    config = Config()  # (a dataclass of no methods, named here)

    def tally(stats):  # a nested function's parameter, not the global
        stats["n"] = config.epochs

    tally({})
    stats = {}  # main's own, not the global
    stats["n"] = 1
    log.propagate = False  # no pixel changes
    losses = np.append(np.zeros(0), 1.0)  # numpy's function, not a change of numpy
    x = np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3)
    kw = dict(workers=0) if sys.argv[1] == "none" else dict(workers=2, start_method="spawn")
    with shmaug.Loader(x, batch_size=4, augment=Shift.from_args(), seed=0, **kw) as loader:
        print("DIGEST", hashlib.md5(b"".join(xb.tobytes() for xb, _ in loader)).hexdigest())
    RESULTS["loss"] = float(losses[0])  # after the loader: its workers are done


if __name__ == "__main__":
    cv2.add(np.zeros(2), np.ones(2))
    main()
'''


def test_what_changes_nothing_the_workers_read_is_not_told(tmp_path):
    """Ordinary scripts the check read as changing what the augment reads: numpy's and
    OpenCV's functions named like a dict's changes, a decorator's registry filled at import,
    a lazy cache filled through a method, main()'s own local of a global's name (a nested
    function's parameter too), a logger's setting, a function never run, a result kept after
    the loader, a global only a factory classmethod reads (its value goes with the instance),
    a dataclass of no methods (a KeyError once): not told, and the same batches."""
    script = tmp_path / "train.py"
    script.write_text(UNCHANGED)
    done = {m: run(script, m) for m in ("none", "spawn")}
    digest = {m: d.stdout.split("DIGEST ")[1].split()[0] for m, d in done.items()}
    assert digest["spawn"] == digest["none"]
    assert "sets again" not in done["spawn"].stderr, done["spawn"].stderr


def test_a_script_read_from_stdin_starts_spawned_workers(tmp_path):
    """`python - < train.py`: each spawned worker tried to import '<stdin>' as the script and
    died ("No such file"); its code goes by value, as a notebook's does."""
    done = subprocess.run([sys.executable, "-"], input=STDIN, cwd=tmp_path, text=True,
                          capture_output=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-2000:]


UNGUARDED = '''
import numpy as np, shmaug
try:  # a threaded runtime, loaded
    import torch
except ImportError:
    import tensorflow
def flip(image, rng):
    return image[:, ::-1]
x = np.zeros((8, 4, 4), np.uint8)
with shmaug.Loader(x, batch_size=4, augment=flip, workers=2) as loader:
    list(loader)
print("OK")
'''


def test_an_unguarded_script_forked_beside_a_threaded_runtime_is_told(tmp_path):
    """A script doing its work at its top keeps fork (a fresh worker would run it again); one
    that had loaded JAX and called it in its augment hung on sample 0 with nothing but a stall
    warning. Told once, naming the guard; a guarded script starts by forkserver, untold."""
    if not RUNTIME:
        pytest.skip("needs torch or TensorFlow")
    script = tmp_path / "train.py"
    script.write_text(UNGUARDED)
    told = run(script, "").stderr
    assert told.count("ShmaugWarning: Your script does its work at its top") == 1, told
    assert f"while {RUNTIME} is loaded" in told and 'under `if __name__ == "__main__":`' in told


HANDLES = '''
import sqlite3, sys
import numpy as np
import shmaug

DB = None


def load(index):  # reads the script's global handle
    DB.execute("select 1")
    return np.zeros((8, 8, 3), np.uint8)


if __name__ == "__main__":
    DB = sqlite3.connect(":memory:")
    x = np.zeros((8, 8, 8, 3), np.uint8)
    if sys.argv[1] == "global":
        try:
            with shmaug.Loader(x, batch_size=4, workers=2, load=load, start_method="spawn") as l:
                list(l)
        except shmaug.WorkerError:
            pass  # (the warning said why)
    else:
        db = sqlite3.connect(":memory:")

        def read(index):  # a closure over a handle, under the guard
            db.execute("select 1")
            return np.zeros((8, 8, 3), np.uint8)
        try:
            shmaug.Loader(x, batch_size=4, workers=2, load=read, start_method="spawn")
        except shmaug.NotPicklableError as refused:
            print("REFUSED", refused)
'''


def test_a_handle_a_spawned_worker_cannot_take_is_named_with_opening_it_there(tmp_path):
    """An HDF5 user's LMDB environment: a global set under the guard was told to be handed
    over with functools.partial, which cannot pickle it; a closure over one under the guard
    started the workers and died in them, told to guard a script that was guarded."""
    script = tmp_path / "train.py"
    script.write_text(HANDLES)
    told = run(script, "global").stderr
    assert "`load` reads `DB`" in told and "`DB` is a Connection, which cannot go to " \
        "another process: open it inside `load` on first use" in told, told[-2000:]
    assert "functools.partial" not in told
    refused = run(script, "closure").stdout
    assert "REFUSED `read` of your script is defined under its `if __name__ == \"__main__\":` " \
        "guard, which spawn workers do not run" in refused and "open it inside on first " \
        "use" in refused, refused[-2000:]


STDIN_HANDLE = '''
import sqlite3, numpy as np, shmaug
db = sqlite3.connect(":memory:")
def aug(image, rng):
    db.execute("select 1")
    return image
try:
    shmaug.Loader(np.zeros((8, 8, 8), np.uint8), batch_size=4, workers=2, augment=aug,
                  start_method="spawn")
except shmaug.NotPicklableError as refused:
    print("REFUSED", refused)
'''


def test_code_read_from_stdin_that_cannot_go_by_value_is_told_to_move_into_a_module(tmp_path):
    """It was told of a `__main__` guard the code read from stdin (or a notebook) has not."""
    done = subprocess.run([sys.executable, "-"], input=STDIN_HANDLE, cwd=tmp_path, text=True,
                          capture_output=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "REFUSED `aug` is defined where spawn workers cannot import it" in done.stdout, \
        done.stdout + done.stderr[-2000:]
    assert "importable .py module" in done.stdout and "guard" not in done.stdout
