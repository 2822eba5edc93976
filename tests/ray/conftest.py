"""A real Ray cluster on this machine (a head without CPUs and two 1-CPU nodes, each its own
raylet), shared by the module's tests, and a leak check that knows Ray's processes.

Ray's own processes (raylets, idle workers it keeps) outlive a test by design; what must not is
shmaug's: the makers' actors, their worker processes and their shared memory, checked by the
tests themselves through ``maker_pids``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:  # a venv without `shmaug[ray]`: nothing here to run
    ray = None
collect_ignore = [] if ray is not None else ["test_workers.py"]

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(autouse=True)
def no_leaks():
    """Replaces the suite's: Ray's processes are children of the test process."""
    yield


@pytest.fixture(scope="module")
def cluster():
    # The nodes' workers import the tests' ops (tests._ops) and this tree's shmaug.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    c = Cluster(initialize_head=True, connect=False,
                head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
