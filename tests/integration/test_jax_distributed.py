"""A Loader under jax.distributed without num_shards: every process would read the whole
dataset and train on the same batches, as under torch.distributed, where it warned; under
JAX it said nothing. Two real JAX processes over loopback. Runs where JAX is installed (CI's
JAX venv: marker ``jax``)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytest.importorskip("jax")

pytestmark = [pytest.mark.jax, pytest.mark.timeout(180)]

PROCESS = """
import os, sys, warnings
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
jax.distributed.initialize(f"127.0.0.1:{sys.argv[2]}", num_processes=2,
                           process_id=int(sys.argv[1]))
import numpy as np, shmaug
x = np.zeros((8, 4, 4), np.uint8)
with warnings.catch_warnings(record=True) as told:
    warnings.simplefilter("always")
    shmaug.Loader(x, batch_size=4, workers=0).close()
    said = [str(w.message) for w in told if w.category is shmaug.ShmaugWarning]
    assert len(said) == 1 and "jax.distributed runs 2 processes" in said[0], said
    assert "shard_index=jax.process_index()" in said[0], said
    shmaug.Loader(x, batch_size=4, workers=0, num_shards=jax.process_count(),
                  shard_index=jax.process_index()).close()
    assert len([w for w in told if w.category is shmaug.ShmaugWarning]) == 1
jax.distributed.shutdown()
print("OK")
"""


def test_an_unsharded_loader_under_jax_distributed_is_warned_of():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, "-c", PROCESS, str(i), port],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=150)
        assert proc.returncode == 0 and "OK" in out, err[-2000:]
