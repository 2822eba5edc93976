"""Workers follow a container's CPU quota: a pod limited to 2 CPUs on a 64-core node got 64
workers and a ring for 64, since the cores were read off the affinity alone."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shmaug import platform as _platform


def _laid_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc: str,
              files: dict[str, str]) -> None:
    """/proc/self/cgroup and the cgroup file system's files, as the kernel lays them out."""
    (tmp_path / "proc").write_text(proc)
    for name, text in files.items():
        (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / name).write_text(text)
    monkeypatch.setattr(_platform, "_PROC_CGROUP", str(tmp_path / "proc"))
    monkeypatch.setattr(_platform, "_CGROUP", str(tmp_path / "fs"))


@pytest.mark.parametrize("proc, files, cpus", [
    ("0::/kubepods/pod1/c1\n", {"kubepods/pod1/c1/cpu.max": "max 100000",
                                "kubepods/pod1/cpu.max": "150000 100000"}, 1.5),  # a parent's
    ("0::/\n", {"cpu.max": "max 100000"}, None),
    ("4:cpu,cpuacct:/docker/abc\n", {"cpu,cpuacct/cpu.cfs_quota_us": "200000",  # the container
                                     "cpu,cpuacct/cpu.cfs_period_us": "100000"}, 2.0),  # root
    ("4:cpu,cpuacct:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "-1",
                           "cpu,cpuacct/cpu.cfs_period_us": "100000"}, None),
    ("4:cpu,cpuacct:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "garbage",
                           "cpu,cpuacct/cpu.cfs_period_us": "100000"}, None)])
def test_the_quota_is_read_from_the_process_cgroup_and_its_ancestors(
        tmp_path, monkeypatch, proc, files, cpus) -> None:
    _laid_out(tmp_path, monkeypatch, proc, files)
    assert _platform.cgroup_cpus() == cpus
    cores = len(os.sched_getaffinity(0)) if _platform.HAS_AFFINITY else os.cpu_count()
    assert _platform.cpu_count() == (cores if cpus is None else min(cores, math.ceil(cpus)))


@pytest.mark.parametrize("proc, files, limit", [
    ("0::/pod/c1\n", {"pod/c1/memory.max": "max", "pod/memory.max": str(3 << 20)}, 3 << 20),
    ("0::/\n", {"memory.max": "max"}, None),
    ("4:memory:/process_api/abc\n", {"memory/process_api/abc/memory.limit_in_bytes":
                                      "9223372036854771712",  # (v1's "no limit")
                                      "memory/process_api/memory.limit_in_bytes":
                                      str(5 << 20)}, 5 << 20)])
def test_the_memory_is_the_ram_capped_by_the_cgroups_limits(tmp_path, monkeypatch, proc, files,
                                                            limit) -> None:
    """What a memory-mapped file is measured against (``store.read_ahead_of``): a container
    limited to a few GiB caches no more of it than that, whatever the host's RAM."""
    _laid_out(tmp_path, monkeypatch, proc, files)
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert _platform.memory_bytes() == (ram if limit is None else min(ram, limit))


def _v1_cpu_cgroup() -> Path | None:
    root = Path("/sys/fs/cgroup/cpu")
    return root if sys.platform == "linux" and os.access(root, os.W_OK) and \
        (root / "cpu.cfs_quota_us").exists() else None


@pytest.mark.skipif(_v1_cpu_cgroup() is None, reason="needs a writable cgroup v1 cpu hierarchy")
def test_a_process_in_a_half_cpu_cgroup_counts_one_core() -> None:
    group = _v1_cpu_cgroup() / f"shmaug_test_{os.getpid()}"  # type: ignore[operator]
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("50000")
        code = "import shmaug.platform as p; print(p.cpu_count(), p.cgroup_cpus())"
        done = subprocess.run(["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec '
                               f'{sys.executable} -c "{code}"'], capture_output=True, text=True,
                              timeout=60)
        assert done.stdout.split() == ["1", "0.5"], done.stdout + done.stderr
    finally:
        group.rmdir()


@pytest.mark.parametrize("env, pinned, expected", [
    ({"LOCAL_WORLD_SIZE": "4"}, False, 16),  # torchrun's 4 ranks share the host's 64 cores
    ({"LOCAL_WORLD_SIZE": "1"}, False, 64),
    ({}, False, 64),
    ({"LOCAL_WORLD_SIZE": "128"}, False, 1),  # at least one
    ({"LOCAL_WORLD_SIZE": "4"}, True, 8),  # pinned to 8 cores of its own: those
    ({"SLURM_CPUS_PER_TASK": "16"}, False, 16),  # a Slurm task, not pinned: its CPUs
    ({"SLURM_CPUS_PER_TASK": "16", "LOCAL_WORLD_SIZE": "4"}, False, 4),
    ({"SLURM_CPUS_PER_TASK": "16"}, True, 8),
    ({"SLURM_CPUS_PER_TASK": "1"}, True, 8)])  # pinned (a batch step over 8 tasks): its own
def test_workers_none_shares_the_host_among_torchruns_ranks(monkeypatch, env, pinned, expected):
    """Under torchrun each rank's loader started a worker per core of the whole host (8 ranks
    on 64 cores: 512 workers), where DataLoader users pass cores // ranks; a Slurm task on a
    cluster that does not pin tasks, one per core of the node (a cluster reviewer)."""
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_platform.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(_platform, "HAS_AFFINITY", True)
    monkeypatch.setattr(_platform.os, "sched_getaffinity",
                        lambda pid: set(range(8 if pinned else 64)), raising=False)
    monkeypatch.setattr(_platform, "cgroup_cpus", lambda: None)
    assert _platform.cores_per_rank() == expected


def test_a_slurm_task_counts_its_own_cpus_in_a_real_process() -> None:
    """`workers=None` in a 1-CPU Slurm task on a node that does not pin tasks started one
    worker per core of the node, and `shmaug doctor` counted them all."""
    code = ("import numpy as np, shmaug; from shmaug import cli\n"
            "with shmaug.Loader(np.zeros((8, 4, 4), np.uint8), batch_size=4, workers=None,\n"
            "                   augment=shmaug.ops.Op('hflip')) as loader:\n"
            "    print('workers', loader.workers)\n"
            "cli.main(['doctor'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SLURM_CPUS_PER_TASK": "1"})
    assert "workers 1\n" in done.stdout and "cores: 1\n" in done.stdout, \
        done.stdout + done.stderr[-2000:]
