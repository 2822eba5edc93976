"""The default start method is safe where a threaded runtime runs (issue 30 §3): a Sequence
under any Keras backend forks no process that has JAX's, TensorFlow's or torch's threads, so
nothing warns of a fork deadlock; its batches are the same. CI runs this module under
each ``KERAS_BACKEND``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras")

pytestmark = [pytest.mark.keras, pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import numpy as np, keras, shmaug, tqdm
list(tqdm.tqdm(range(2)))  # its lock fixes multiprocessing's default context at fork
if keras.backend.backend() == "jax":
    import jax.numpy as jnp; jnp.zeros(1).block_until_ready()  # JAX's threads run
x = np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3)
args = dict(batch_size=4, augment=shmaug.get("rotate"), workers=2, seed=0, shuffle=True)
with shmaug.Sequence(x, np.arange(16), **args) as seq:
    got = [seq[i][0] for i in range(len(seq))]
    print("METHOD", seq.loader._run.pool._ctx.get_start_method())
with shmaug.Sequence(x, np.arange(16), **{**args, "workers": 0}) as ref:  # as fork's
    assert all((a == ref[i][0]).all() for i, a in enumerate(got)), "other batches"
print("OK")
"""


def test_a_sequence_under_a_threaded_backend_starts_its_workers_without_fork():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
    assert "METHOD forkserver" in proc.stdout, proc.stdout
    assert "os.fork() was called" not in proc.stderr, proc.stderr
    assert "deadlock" not in proc.stderr.lower(), proc.stderr


_NO_TEMP = """
import numpy as np, shmaug
try:
    with shmaug.Loader(np.zeros((8, 4, 4), np.uint8), batch_size=4, workers=1,
                       augment=shmaug.ops.Op("hflip"), start_method="forkserver") as loader:
        print("served", loader.batch(0)[0].shape)
except shmaug.ArgumentError as exc:
    print(exc)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("unshare") is None
                    or os.geteuid() != 0, reason="a mount namespace of its own (root, Linux)")
def test_a_forkserver_without_a_writable_temporary_folder_is_told_the_fix(tmp_path):
    """A cluster reviewer: with /tmp, /var/tmp, TMPDIR and the working folder read-only, the
    forkserver failed with Python's "No usable temporary directory", not saying that spawn
    (or a TMPDIR of one's own) works there."""
    (tmp_path / "cwd").mkdir()
    mounts = " && ".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {d}"
                         for d in ("/tmp", "/var/tmp", str(tmp_path)))
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"{mounts} && cd {tmp_path / 'cwd'} && exec "
         f"{sys.executable} -c '{_NO_TEMP}'"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path / "missing"), "PYTHONPATH": str(ROOT)})
    if "mount" in done.stderr and done.returncode:  # (no right to mount here)
        pytest.skip(done.stderr[-300:])
    assert "needs a writable temporary folder" in done.stdout and \
        "start_method='spawn'" in done.stdout, done.stdout + done.stderr[-2000:]
