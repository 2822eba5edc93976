"""``Workers``: the Ray fleet a ``Loader`` or ``Sequence`` is asked to make its batches with."""

from __future__ import annotations

import importlib.util
import logging
from typing import TYPE_CHECKING, Any

from ..engine.config import checks as check
from ..engine.remote import Fleet, RemoteWorkers
from ..errors import ArgumentError, got

if TYPE_CHECKING:
    from ..engine.config.options import Options

log = logging.getLogger(__name__)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"`{name}` must be a positive integer; received {got(value)}. "
                            f"Fix: pass e.g. `{name}=2`.")
    return value


class Workers(RemoteWorkers):
    """Batches made on Ray nodes: ``nodes`` actors, each running ``cpus_per_node`` shmaug
    workers on its node, bit-identical to a local ``Loader`` with the same seed.

    Args:
        nodes: makers (Ray actors) to start; Ray spreads them over the nodes with room.
        cpus_per_node: CPUs each maker reserves (``num_cpus``), and the worker processes it
            runs there.
        address: the Ray cluster to join when Ray is not initialized yet (``"auto"``, or
            ``"ray://head:10001"``); None: ``ray.init()``'s default (``RAY_ADDRESS``, else a
            local Ray).
        resources: custom Ray resources each maker needs, to keep them on CPU nodes (e.g.
            ``{"cpu_node": 1}`` with nodes started by ``ray start --resources``).
        lost_after_s: seconds with batches owed and no answer from any maker before the loader
            raises ``WorkerTimeout`` (a cluster that went away); longer than a batch takes.
        start_timeout_s: seconds for the first maker to be ready (placed, its data read, its
            sample 0 made).
        start_method: the makers' own workers' (forkserver: Ray runs threads).
        max_replacements: makers started in place of lost ones before a loss is an error.
        runtime_env: Ray's, for the makers (e.g. ``{"pip": ["shmaug"]}``).

    Example:
        >>> ray.init(address="auto")
        >>> loader = shmaug.Loader(x, y, 256, augment, seed=0,
        ...                        workers=shmaug.ray.Workers(nodes=4, cpus_per_node=32))
    """

    def __init__(self, nodes: int = 1, cpus_per_node: int = 1, *, address: str | None = None,
                 resources: dict[str, float] | None = None, lost_after_s: float = 120.0,
                 start_timeout_s: float = 120.0, start_method: str | None = "forkserver",
                 max_replacements: int = 16, runtime_env: dict[str, Any] | None = None) -> None:
        self.nodes = _positive("nodes", nodes)
        self.cpus_per_node = _positive("cpus_per_node", cpus_per_node)
        self.address = address
        self.resources = dict(resources or {})
        self.lost_after_s = float(check.timeout(lost_after_s) or 0) or 120.0
        self.start_timeout_s = float(check.timeout(start_timeout_s) or 0) or 120.0
        self.start_method = check.start_method(start_method)
        self.max_replacements = max(0, int(max_replacements))
        self.runtime_env = runtime_env
        if not _ray_installed():  # (said here, not at the first batch)
            raise ModuleNotFoundError(
                'shmaug.ray.Workers runs the workers on a Ray cluster, and Ray is not '
                'installed. Fix: pip install "shmaug[ray]", or workers=N for processes on '
                'this machine.', name="ray")

    @property
    def count(self) -> int:
        return self.nodes * self.cpus_per_node

    def start(self, options: Options, batches: int) -> Fleet:
        import ray

        from .fleet import RayFleet

        if not ray.is_initialized():
            log.info("ray.init(address=%r)", self.address)
            ray.init(address=self.address, log_to_driver=False)
        return RayFleet(self, options, batches)

    def __repr__(self) -> str:
        return (f"shmaug.ray.Workers(nodes={self.nodes}, cpus_per_node={self.cpus_per_node}"
                f"{f', address={self.address!r}' if self.address else ''})")


def _ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError, AttributeError):  # (a None left in sys.modules)
        return False
