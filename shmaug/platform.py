"""What differs between platforms, decided once, in one place.

The engine branches on these flags, never on ``sys.platform`` or ``hasattr`` itself, so every
branch can be reached on any machine: ``SHMAUG_EMULATE_WINDOWS=1`` in the environment (read at
import, so spawned workers inherit it) makes Linux take the Windows branches. It is a test
switch for CI, not a user setting: the shared memory underneath stays POSIX (segments are
still unlinked by name), so only shmaug's own choices are emulated, namely:

- waiting: ``multiprocessing.connection.wait`` instead of one kept ``select.poll``;
- signals: no ``pthread_sigmask`` around a worker's start (Ctrl-C is not blocked then);
- start methods: "spawn" only, and the default;
- stopping a stuck worker: ``terminate()`` (TerminateProcess on Windows), as there is no
  SIGKILL to escalate to;
- shared-memory capacity: no /dev/shm to measure (Windows backs segments with the paging
  file; macOS has no such mount either), so no up-front check;
- cores: ``os.cpu_count()``, without ``sched_getaffinity``;
- malloc: no glibc ``mallopt`` to tune a worker's allocator with;
- a parent's death: no ``prctl`` to have the kernel kill a worker with it.

And a Ctrl-C held through a step it must not cut in two (``sigint_deferred``).

It also holds the one switch of how JPEGs are decoded (``jpeg_setting``), which is not a
platform's but a machine's: which libjpeg-turbo is loadable there; and the processor's name
(``cpu_name``), which every measured figure names.
"""

from __future__ import annotations

import ctypes
import errno
import math
import multiprocessing
import os
import platform
import select
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

EMULATE_WINDOWS = os.environ.get("SHMAUG_EMULATE_WINDOWS", "") == "1"
WINDOWS = sys.platform == "win32" or EMULATE_WINDOWS

HAS_POLL = hasattr(select, "poll") and not WINDOWS
HAS_SIGMASK = hasattr(signal, "pthread_sigmask") and not WINDOWS
# What a terminal or a job scheduler (Slurm's TERM at the end, its `--signal=USR1@...` before)
# sends a whole process group, where this OS has them: the main process's to handle.
GROUP_SIGNALS = frozenset(getattr(signal, name) for name in (
    "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU") if hasattr(signal, name))
HAS_AFFINITY = hasattr(os, "sched_getaffinity") and not WINDOWS
SHM_DIR: str | None = None if WINDOWS else "/dev/shm"  # measured only where it may exist
DEFAULT_START_METHOD: str | None = "spawn" if WINDOWS else None  # None: Python's default


def keras_installed() -> bool:
    """Whether Keras can be imported here, without importing it: the facade's names are
    public only then (without it, `from shmaug import *`, help() and inspect.getmembers,
    which fetch every name, met its ImportError)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("keras")
    except (ImportError, ValueError):  # (a stand-in module without a spec)
        return False
    return spec is not None and spec.origin is not None  # (not a folder named keras)


def start_methods() -> list[str]:
    """The start methods a worker pool may use here."""
    return ["spawn"] if WINDOWS else multiprocessing.get_all_start_methods()


def stop(process: Any) -> None:
    """End a worker that will not stop by itself: SIGKILL on POSIX, TerminateProcess on
    Windows (``Process.kill`` is ``terminate`` there; emulated by ``terminate()``)."""
    if WINDOWS:
        process.terminate()
    else:
        process.kill()


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Run a step Ctrl-C must not cut in two (a worker's start, a shared segment made and
    recorded): in the main thread, a press (which any thread may take: TensorFlow's) waits,
    and its handler runs once the step is done; elsewhere, nothing changes."""
    held: list[tuple[int, Any]] = []
    handler = signal.getsignal(signal.SIGINT)
    swap = callable(handler) and threading.current_thread() is threading.main_thread()
    if swap:
        signal.signal(signal.SIGINT, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        if swap:
            signal.signal(signal.SIGINT, handler)
        if held and callable(handler):  # (the press, now: Python's KeyboardInterrupt)
            handler(*held[0])


def cpu_name() -> str:
    """The processor's name, family and model: figures from two hosts of one VM kind can
    differ by 4x, so every figure (a benchmark's, the demo's) names it."""
    text = _read("/proc/cpuinfo") or ""
    info = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in
                                                  text.split("\n\n")[0].splitlines())}
    if info.get("model name"):  # (the name alone, "AMD EPYC", hides the generation)
        return f"{info['model name']}, family {info.get('cpu family')} model {info.get('model')}"
    return platform.processor() or platform.machine()


def cpu_count() -> int:
    """Cores this process may run on: its affinity, capped by its cgroup's CPU quota rounded
    up (a container limited to 2 CPUs on a 64-core node would otherwise start 64 workers and
    a ring for 64) and by a Slurm job's ``SLURM_CPUS_PER_TASK`` (a cluster that does not pin
    a task to its CPUs leaves it the whole node's affinity)."""
    cores = len(os.sched_getaffinity(0)) if HAS_AFFINITY else os.cpu_count() or 1
    quota, slurm = cgroup_cpus(), os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0 and cores >= (os.cpu_count() or 1):
        cores = min(cores, int(slurm))  # (a pinned step, a batch script over several
        # tasks' CPUs among them, keeps its affinity)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cores_per_rank() -> int:
    """``cpu_count()`` shared among the ranks ``torchrun`` started on this host
    (``LOCAL_WORLD_SIZE``): each rank's loader would otherwise start a worker per core of the
    whole host (8 ranks on 64 cores: 512 workers). A rank pinned to cores of its own (an
    affinity narrower than the host) keeps them."""
    cores, ranks = cpu_count(), os.environ.get("LOCAL_WORLD_SIZE", "")
    pinned = HAS_AFFINITY and len(os.sched_getaffinity(0)) < (os.cpu_count() or 1)
    if ranks.isdigit() and int(ranks) > 1 and not pinned:
        return max(1, cores // int(ranks))
    return cores


_CGROUP = "/sys/fs/cgroup"
_PROC_CGROUP = "/proc/self/cgroup"  # (a test points both at a laid-out copy)


def cgroup_cpus() -> float | None:
    """The CPUs this process's cgroups (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``) allow it,
    the least of its own and its ancestors'; None without a quota (or off Linux)."""
    return _cgroup_least("cpu", _v2_quota, _v1_quota)


def memory_bytes() -> int | None:
    """The memory this process and its page cache may use: the machine's RAM, capped by its
    cgroups' limits (v2 ``memory.max``, v1 ``memory.limit_in_bytes``); None where unknown."""
    try:
        ram: float | None = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # (Windows has no sysconf)
        ram = None
    limits = [v for v in (ram, _cgroup_least("memory", _v2_memory, _v1_memory)) if v]
    return int(min(limits)) if limits else None


def _cgroup_least(controller: str, v2: Callable[[str], float | None],
                  v1: Callable[[str], float | None]) -> float | None:
    """The least limit ``v2`` (a v2 cgroup folder's) or ``v1`` (a folder of ``controller``'s
    v1 hierarchy) reads in this process's cgroups and their ancestors; None: none set."""
    try:
        with open(_PROC_CGROUP) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            limits += [v2(folder) for folder in _ancestors(_CGROUP, path)]
        elif controller in controllers.split(","):
            for mount in {f"{_CGROUP}/{controllers}", f"{_CGROUP}/{controller}"}:
                limits += [v1(folder) for folder in _ancestors(mount, path)]
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None


def memory_available() -> int | None:
    """Bytes this process may still fill before the OOM killer ends it: the machine's
    ``MemAvailable`` and free swap, capped by each cgroup's limit less its use (less the
    page cache it can drop, active or not: the kernel drops it before it kills; tmpfs pages
    are on its anon lists, not counted so); None where unknown (not Linux)."""
    fields = dict(line.split(":", 1) for line in (_read("/proc/meminfo") or "").splitlines()
                  if ":" in line)
    try:
        host = sum(int(fields[k].split()[0]) * 1024 for k in ("MemAvailable", "SwapFree"))
    except (KeyError, ValueError, IndexError):
        return None
    room = _cgroup_least("memory", _v2_room, _v1_room)
    return int(min(host, room)) if room is not None else host


def _v2_room(folder: str) -> float | None:
    limit, used = _v2_memory(folder), _read(os.path.join(folder, "memory.current"))
    if limit is None or not used or not used.isdigit():
        return None
    return limit - int(used) + _stat(folder, "active_file") + _stat(folder, "inactive_file")


def _v1_room(folder: str) -> float | None:
    limit, used = _v1_memory(folder), _read(os.path.join(folder, "memory.usage_in_bytes"))
    if limit is None or limit >= 2**62 or not used or not used.isdigit():
        return None
    return limit - int(used) + _stat(folder, "total_active_file") + \
        _stat(folder, "total_inactive_file")


def _stat(folder: str, key: str) -> int:
    """One figure of a cgroup's ``memory.stat`` (0 where absent)."""
    for line in (_read(os.path.join(folder, "memory.stat")) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.isdigit():
            return int(value)
    return 0


def _v2_memory(folder: str) -> float | None:
    text = _read(os.path.join(folder, "memory.max"))  # "max" or bytes
    return float(text) if text and text.isdigit() else None


def _v1_memory(folder: str) -> float | None:
    text = _read(os.path.join(folder, "memory.limit_in_bytes"))  # (no limit: ~2**63)
    return float(text) if text and text.isdigit() else None


def _ancestors(mount: str, path: str) -> list[str]:
    """``mount/path`` and each folder above it up to ``mount`` (a container sees its own
    cgroup at the mount's root, whatever path /proc names)."""
    parts = [p for p in path.split("/") if p]
    return [os.path.join(mount, *parts[:k]) for k in range(len(parts), -1, -1)]


def _v2_quota(folder: str) -> float | None:
    text = _read(os.path.join(folder, "cpu.max"))  # "max 100000" or "50000 100000"
    quota, _, period = (text or "max").partition(" ")
    try:
        return None if quota == "max" or not period else int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def _v1_quota(folder: str) -> float | None:
    quota = _read(os.path.join(folder, "cpu.cfs_quota_us"))
    period = _read(os.path.join(folder, "cpu.cfs_period_us"))
    try:
        q, p = int(quota or -1), int(period or -1)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None  # -1: no quota


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, ValueError):
        return None


def open_files() -> tuple[int, int] | None:
    """(descriptors this process has open, its soft ``ulimit -n``), or None where unknown
    (no /proc, no limit): a worker inherits the first and opens more within the second."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        return len(os.listdir("/proc/self/fd")), int(soft)
    except (ImportError, OSError, ValueError):
        return None


def rlimit(name: str) -> int | None:
    """This process's soft ``RLIMIT_<name>`` (``AS``: bytes it may map, ``ulimit -v``;
    ``NPROC``: processes and threads of its user, ``ulimit -u``), or None where none is set
    (or where the limit means nothing: Windows, root's NPROC)."""
    try:
        import resource

        soft = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))[0]
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or (name == "NPROC" and os.geteuid() == 0):
        return None
    return int(soft)


LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM})
"""The errors a limit of this process (``ulimit``) gives, which ``limits_met`` explains."""


def limits_met(code: int | None = None) -> str:
    """The limits of this process (``ulimit``) that a worker starting may meet, each with its
    fix: the one an OS error's ``code`` names (``LIMIT_ERRNOS``), or, with no code (a
    worker's own error is printed, not known here), those set low enough to matter, each
    behind the words of the error it gives."""
    files, threads, space = open_files(), rlimit("NPROC"), rlimit("AS")
    said: list[tuple[str, str]] = []  # (the error's words, what to do)
    if code in (errno.EMFILE, errno.ENFILE) or (
            code is None and files is not None and files[1] - files[0] < 32):
        limit = rlimit("NOFILE")  # (with every descriptor taken, /proc/self/fd is unread)
        held = f"{files[0]} files open of the {files[1]}" if files else \
            f"as many files open as the {limit or 'number'}"
        said.append(("Too many open files", (
            f"This process has {held} its `ulimit -n` allows, and a loader opens one per "
            f"shared-memory block, a worker starting about 4 more: raise the limit "
            f"(`ulimit -n 4096`; Docker: `--ulimit nofile=4096`), close the loaders you no "
            f"longer use, or use fewer workers.")))
    if threads is not None and (code == errno.EAGAIN or code is None and _few(threads)):
        said.append(("can't start new thread\" or \"Resource temporarily unavailable", (
            f"`ulimit -u` allows this user {threads:,} processes and threads in all, and each "
            f"worker takes a few, its BLAS one per core (`OPENBLAS_NUM_THREADS=1` in the "
            f"environment keeps it to one): raise the limit or use fewer workers.")))
    if space is not None and (code == errno.ENOMEM or code is None and _little(space)):
        said.append(("Cannot allocate memory", (
            f"`ulimit -v` lets this process map {space / 2**30:,.1f} GiB, and a forked worker "
            f"starts with all the parent maps (`x` and its copy in shared memory among it) "
            f"and maps the dataset again: raise the limit, use start_method='spawn', or pass "
            f"`x` as a .npy path (mapped, not copied).")))
    if code is None:
        return "".join(f' If its error says "{words}": {fix}' for words, fix in said)
    return "".join(f" {fix}" for _, fix in said)


def _few(tasks: int) -> bool:
    """Whether a `ulimit -u` of ``tasks`` is low enough to matter to a loader."""
    return tasks < 4096


def _little(space: int) -> bool:
    """Whether a `ulimit -v` of ``space`` bytes is low enough to matter (under the RAM)."""
    return space < (memory_bytes() or space + 1)


def start_thread(target: Callable[..., object], name: str, *args: Any) -> threading.Thread:
    """A daemon thread running ``target(*args)``, started; one that cannot start names the
    limits of this process set low enough to matter (``ulimit -u``: a shared login node's
    user count includes the user's other jobs; ``ulimit -v``: no room for its stack), each
    with its fix, not Python's bare "can't start new thread"."""
    thread = threading.Thread(target=target, name=name, args=args, daemon=True)
    try:
        thread.start()
    except RuntimeError as exc:  # (Python's words do not say which limit: each set low)
        threads, space = rlimit("NPROC"), rlimit("AS")
        why = (limits_met(errno.EAGAIN) if threads is not None and _few(threads) else "") + \
            (limits_met(errno.ENOMEM) if space is not None and _little(space) else "")
        if not why:
            raise
        raise RuntimeError(f"{exc} ({name}).{why}") from exc
    return thread


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt(param, value)``; None where the C library is not glibc (Windows,
    macOS, musl)."""
    if WINDOWS or not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
        mallopt: Callable[[int, int], int] = libc.mallopt
    except (OSError, AttributeError):
        return None
    return mallopt


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> bool:
    """Have the kernel SIGKILL this process when the thread that started it ends (Linux's
    ``PR_SET_PDEATHSIG``): a worker stuck in C code that holds the GIL cannot run its own
    watchdog. Whether it was set."""
    if WINDOWS or not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0)
    except (OSError, AttributeError):
        return False


JPEG_MODES = ("auto", "turbo", "opencv", "whole")
_OFF = ("0", "off", "false", "no")


def ours(path: str) -> bool:
    """Whether the file at ``path`` was written by this user, its folder's owner or root: one
    another user planted in a folder they may write (a shared cache's entry, an index cache)
    is not read as ours (swapped images, forged offsets and labels). POSIX only."""
    if not hasattr(os, "geteuid"):
        return True
    try:
        owner = os.stat(path, follow_symlinks=False).st_uid
        folder = os.stat(os.path.dirname(os.path.abspath(path))).st_uid
    except OSError:
        return False
    return owner in (os.geteuid(), folder, 0)


def jpeg_setting() -> tuple[str, str | None]:
    """How JPEGs are decoded, from ``SHMAUG_JPEG``, read when a loader starts: ``(mode,
    library path or None)``. Modes: "auto" (unset: libjpeg-turbo 3 where found, else
    OpenCV), "turbo" (libjpeg-turbo 3 or an error), "opencv" (never libjpeg-turbo), "whole"
    (every pixel decoded, then cut: the reference recipes' work, to compare); a path to a
    ``libturbojpeg`` file is "turbo" with that library. The two switches it replaces are
    still read where it is unset: ``SHMAUG_TURBOJPEG`` (a path, or ``off``: "opencv") and
    ``SHMAUG_PARTIAL_DECODE=0`` ("whole").

    Raises:
        ArgumentError: ``SHMAUG_JPEG`` is neither a mode nor a path.
    """
    raw = os.environ.get("SHMAUG_JPEG", "").strip()
    if not raw:
        if os.environ.get("SHMAUG_PARTIAL_DECODE", "").strip().lower() in _OFF:
            return "whole", None
        old = os.environ.get("SHMAUG_TURBOJPEG", "").strip()
        if old.lower() in _OFF:
            return "opencv", None
        return ("turbo", old) if old else ("auto", None)
    if raw.lower() in JPEG_MODES:
        return raw.lower(), None
    if os.sep in raw or "/" in raw or raw.endswith((".so", ".dll", ".dylib")) or ".so." in raw:
        return "turbo", raw
    from .errors import ArgumentError

    raise ArgumentError(
        f"SHMAUG_JPEG must be one of {list(JPEG_MODES)} or a path to libturbojpeg; received "
        f"{raw!r}. Fix: unset it (auto), or e.g. SHMAUG_JPEG=opencv.")
