"""A trainer process for the Ray tests that must end a process: ``interrupt`` (joins the
cluster at argv[2], prints its makers' pids, waits for the Ctrl-C the test sends) and ``gone``
(starts a cluster of its own, shuts it down mid-epoch and reports how the loader ended)."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import ray

import shmaug
import shmaug.ray
from tests._ops import noisy


def loader(**kw):
    x = np.random.default_rng(0).integers(0, 256, (64, 8, 8, 3), dtype=np.uint8)
    return shmaug.Loader(x, None, 8, noisy, seed=0,
                         workers=shmaug.ray.Workers(nodes=1, cpus_per_node=1, **kw))


def interrupt(address: str) -> None:
    ray.init(address=address, log_to_driver=False)
    with loader() as it:
        next(iter(it))
        print(json.dumps({"pids": it._run.pool._fleet.pids()}), flush=True)
        while True:
            for _ in it:
                time.sleep(0.05)


def gone() -> None:
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, connect=False,
                head_node_args={"num_cpus": 0, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    with loader(lost_after_s=10) as it:
        batches = iter(it)
        next(batches)
        pids = it._run.pool._fleet.pids()
        for node in c.list_all_nodes():  # the whole cluster, at once, as a lost network
            node.kill_all_processes(check_alive=False, allow_graceful=False)
        began = time.monotonic()
        try:
            for _ in range(1000):
                it.batch(0, epoch=5 + _)
            error = None
        except Exception as e:  # noqa: BLE001 - reported to the test
            error = f"{type(e).__name__}: {e}"
        print(json.dumps({"pids": pids, "error": error,
                          "seconds": time.monotonic() - began}), flush=True)


if __name__ == "__main__":
    interrupt(sys.argv[2]) if sys.argv[1] == "interrupt" else gone()
