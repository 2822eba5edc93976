"""How the benchmark scripts in ``bench/`` measure: timing, bounds, child processes, memory.

Owns the mechanics every benchmark needs so that each script is only its contenders:

- ``Stats`` / ``summarize`` / ``paired_ratio`` / ``time_calls``: repeat, then quote the median
  with min-max; ratios of figures taken side by side in one round.
- ``deadline`` / ``guarded``: a contender that hangs or raises is reported, not fatal.
- ``run_json`` / ``report_json`` / ``child_env``: run a child process under a hard timeout and
  read the one JSON line it prints.
- ``memory_of`` / ``worker_memory`` / ``pool_children`` / ``wait_gone``: USS / PSS of
  processes (psutil), by pid, and the end of the ones a benchmark started.
- ``progress`` / ``base_parser`` / ``described``: a tqdm bar over the runs; ``--quick`` and
  ``--out``, the same for every script; its description, from its docstring.

How a figure is written down (rows, tables, JSON) is ``report.py``'s. Timings live only here
and in the scripts that use it, never in tests. Nothing in this module imports TensorFlow or
Keras.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import psutil

REPO_ROOT = Path(__file__).resolve().parents[2]
_DEPTH = int(os.environ.get("SHMAUG_BENCH_DEPTH", "0"))  # a bench run's child: 1, its child 2
RESULTS = "bench/results"  # the committed results (from the repository root), a folder a script
JSON_MARKER = "BENCH_JSON:"  # prefix of the one stdout line a child process reports on


# -- statistics ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Repeated measurements of one figure: quote ``median`` with ``lo``-``hi``."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else math.nan

    @property
    def lo(self) -> float:
        return min(self.values) if self.values else math.nan

    @property
    def hi(self) -> float:
        return max(self.values) if self.values else math.nan

    def scaled(self, k: float) -> Stats:
        return Stats(tuple(v * k for v in self.values))

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.lo, "max": self.hi, "n": self.n,
                "values": list(self.values)}


def summarize(values: Sequence[float]) -> Stats:
    return Stats(tuple(float(v) for v in values))


def ratio(a: Stats, b: Stats) -> float:
    """Ratio of medians, ``a / b`` (nan when either is missing)."""
    if not a.values or not b.values or b.median == 0:
        return math.nan
    return a.median / b.median


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> Stats:
    """Per-round ratios ``a[i] / b[i]`` of measurements taken side by side in one round."""
    return summarize([x / y for x, y in zip(a, b) if y])


def time_calls(fn: Callable[[int], Any], number: int) -> float:
    """Seconds per call of ``fn(i)`` for ``i`` in ``range(number)`` (one timed loop)."""
    t0 = time.perf_counter()
    for i in range(number):
        fn(i)
    return (time.perf_counter() - t0) / number


# -- bounds ----------------------------------------------------------------------------------


class ContenderTimeout(Exception):
    """A contender ran past its deadline."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise ``ContenderTimeout`` in the main thread if the block runs past ``seconds``.

    Uses SIGALRM (POSIX, main thread only); elsewhere the block runs unbounded and the hard
    timeout of the parent process (``run_json``) is the only bound.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or seconds <= 0:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise ContenderTimeout(f"no result within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    """What a bounded call gave: ``status`` is "ok", "timeout" or "error"."""

    status: str
    value: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def guarded(fn: Callable[[], Any], timeout_s: float) -> Outcome:
    """Run ``fn()`` under ``deadline(timeout_s)``; never raises (except KeyboardInterrupt)."""
    try:
        with deadline(timeout_s):
            return Outcome("ok", fn())
    except ContenderTimeout as exc:
        return Outcome("timeout", error=str(exc))
    except Exception as exc:  # a failing contender is reported and the harness goes on
        return Outcome("error", error=f"{type(exc).__name__}: {exc}"[:300])


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child benchmark process: repo on the path, TensorFlow quiet."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["SHMAUG_BENCH_DEPTH"] = str(_DEPTH + 1)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(extra)
    return env


def report_json(payload: Any) -> None:
    """How a child process hands its result to ``run_json``: one marked line on stdout."""
    sys.stdout.write(JSON_MARKER + json.dumps(payload) + "\n")
    sys.stdout.flush()


def run_json(argv: Sequence[str], timeout_s: float, env: dict[str, str] | None = None) -> Outcome:
    """Run ``argv`` with a hard timeout; its value is the payload of its ``report_json`` line.

    The child gets its own session so that on timeout, or as this process is terminated, its
    whole process group (workers included) is ended; nothing else is touched. stderr passes
    through (progress bars).
    """
    try:
        with _child(argv, env or child_env(), stderr=None, cwd=str(REPO_ROOT)) as proc:
            try:
                out, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return Outcome("timeout", error=f"killed after {timeout_s:g} s")
    except OSError as exc:
        return Outcome("error", error=f"could not start {argv[0]}: {exc}")
    payload = None
    for line in out.splitlines():
        if line.startswith(JSON_MARKER):
            payload = json.loads(line[len(JSON_MARKER):])
    if payload is None:
        tail = out.strip().splitlines()[-3:]
        return Outcome("error", error=f"exit code {proc.returncode}, no result; {tail}"[:300])
    return Outcome("ok", payload)


def rotated_rounds(rounds: int, configs: Sequence[Any], run_one: Callable[[Any], dict[str, Any]],
                   desc: str) -> list[dict[str, Any]]:
    """``run_one(config)`` for every config in every round, each round starting one config
    further on (interleaved, so none always runs first on a drifting host); the results with
    their round number, behind a progress bar."""
    results = []
    bar = progress(rounds * len(configs), desc)
    for r in range(rounds):
        k = r % len(configs)
        for config in [*configs[k:], *configs[:k]]:
            results.append({"round": r, **run_one(config)})
            bar.update()
    bar.close()
    return results


def missing_module(modules: Sequence[str]) -> str | None:
    """The ``ModuleNotFoundError`` a child would report first when importing ``modules`` in
    this order (``"ModuleNotFoundError: No module named 'torch'"``), or None when all are
    installed: a driver then skips that child (a process start and its imports) and records
    the same reason."""
    import importlib.util

    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError as exc:  # a dotted name whose parent is missing
            return f"ModuleNotFoundError: No module named {exc.name!r}"
        if not found:
            return f"ModuleNotFoundError: No module named {module!r}"
    return None


def child_result(argv: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """Run a child measurement (``argv``) and return the JSON object on its last stdout line;
    RuntimeError with its stderr when it fails (``subprocess.TimeoutExpired`` past
    ``timeout_s``, its group ended)."""
    with _child(argv, child_env(), stderr=subprocess.PIPE) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise
    if proc.returncode:
        raise RuntimeError(f"{list(argv)} failed:\n{err[-2000:]}")
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


# The groups of the children running now (each in its own session): ended when this process
# is terminated, from any thread's child (``_on_terminate``), or as each child is done.
_GROUPS: set[subprocess.Popen[str]] = set()
_GROUPS_LOCK = threading.Lock()


@contextlib.contextmanager
def _child(argv: Sequence[str], env: dict[str, str], stderr: Any, cwd: str | None = None
           ) -> Iterator[subprocess.Popen[str]]:
    """A child in its own session, whose group is ended on the way out, or as this process
    is terminated (``timeout``, ``kill``, a cancelled CI job: it ran on after its parent,
    with its workers and their shared memory)."""
    _watch_terminate()
    if _TERMINATING:
        raise SystemExit(143)  # (terminated: a queued job starts nothing)
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=stderr, text=True,
                            env=env, cwd=cwd, start_new_session=True)
    with _GROUPS_LOCK:
        _GROUPS.add(proc)
    try:
        yield proc
    finally:
        with _GROUPS_LOCK:
            _GROUPS.discard(proc)
        if proc.poll() is None:
            _kill_group(proc)
        else:  # (its workers, where any outlived it)
            _end_group(proc)


def _watch_terminate() -> None:
    """Once, from the main thread (the first child, or ``base_parser``): SIGTERM ends every
    child's group, then exits with 143, as Ctrl-C does through the ``finally`` clauses."""
    global _WATCHING
    if _WATCHING or threading.current_thread() is not threading.main_thread():
        return
    _WATCHING = True
    signal.signal(signal.SIGTERM, _on_terminate)


_WATCHING = False


def _on_terminate(signum: int, frame: Any) -> None:
    global _TERMINATING
    _TERMINATING = True  # (a pool's thread starts no further child: ``_child``)
    while True:  # (no lock: the main thread may hold it, here, under this handler)
        try:
            running = list(_GROUPS)
            break
        except RuntimeError:  # (changed by another thread while read)
            continue
    for proc in running:  # (a child of another thread too: that thread's wait then returns)
        _end_group(proc)
    raise SystemExit(128 + signum)


_TERMINATING = False


def _end_group(proc: subprocess.Popen[str]) -> None:
    """TERM ``proc``'s group (a bench child ends its own children's groups on it), then KILL
    what is left of it after a grace that is shorter the deeper this run (a child's KILL of
    its own child comes before its parent's KILL of it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 4.0 / (1 + _DEPTH)
        while time.monotonic() < deadline:
            proc.poll()  # (reaps the leader: a zombie would keep its group)
            os.killpg(proc.pid, 0)  # (ProcessLookupError: the group is gone)
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    _end_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=5)


# -- memory ----------------------------------------------------------------------------------


def memory_of(pid: int) -> dict[str, float]:
    """USS, PSS and RSS of one process, in MiB (nan for a figure the OS does not give)."""
    info = psutil.Process(pid).memory_full_info()
    mib = 1.0 / 2**20
    return {k: getattr(info, k, math.nan) * mib for k in ("uss", "pss", "rss")}


def worker_memory(pids: Sequence[int]) -> list[dict[str, float]]:
    """``memory_of`` for each pid still alive (one dict per process, with its pid)."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                continue  # exited, not yet reaped: it has no memory left to measure
            out.append({"pid": pid, **memory_of(pid)})
    return out


def pool_children(exclude: Sequence[int] = ()) -> list[int]:
    """Pids of this process's children that are pool workers (not multiprocessing helpers)."""
    pids = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmd = " ".join(child.cmdline())
            if child.pid in exclude or "resource_tracker" in cmd or "forkserver" in cmd:
                continue
            pids.append(child.pid)
    return pids


def wait_gone(pids: Sequence[int], timeout_s: float) -> None:
    """Wait for processes this benchmark started to exit; kill (by pid) any that do not."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=timeout_s)


# -- progress and arguments ----------------------------------------------------------------------


def described(doc: str | None) -> str | None:
    """A script's ``--help`` description: its docstring's first paragraph, on one line (its
    first line alone stopped mid-sentence: "...against torchvision's")."""
    return " ".join(doc.split("\n\n")[0].split()) if doc else None


def progress(total: int, desc: str) -> Any:
    """A tqdm bar over ``total`` runs on stderr; silent when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr,
                disable=not sys.stderr.isatty(), dynamic_ncols=True)


def prepare_out(path: str | Path, *, file: bool = False) -> Path:
    """Create the folder results go to (for a ``file``, the folder it goes in) and check it
    takes a file, before anything is measured: a run must not measure for minutes and then
    fail to write. Exits with the reason when it cannot."""
    out = Path(path)
    folder = out.parent if file else out
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write_check_"):
            pass
    except OSError as exc:
        raise SystemExit(f"bench: cannot write results to {folder}/: "
                         f"{exc.strerror or exc}. Fix: pass --out with a folder you can "
                         f"write to.") from None
    return out


def quick_out(default_out: str) -> str:
    """Where a ``--quick`` run writes when no ``--out`` is given: the system's temp folder,
    never the repository, whose ``bench/results/`` hold the committed measurements. One fixed
    folder per script (each quick run replaces the last), so smoke runs leave no litter: the
    default's place under ``bench/results/`` (``files/memory`` for ``bench/results/files/memory/``).
    """
    where = Path(default_out).relative_to(RESULTS)
    return str(Path(tempfile.gettempdir()) / "shmaug-bench-quick" / where)


class _BenchParser(argparse.ArgumentParser):
    """Resolves ``--out`` after parsing: as given; else, for ``--quick``, ``quick_out``; for
    ``--render``, the saved run's own folder (never the committed results' unless it is
    theirs); else the committed results' folder."""

    def __init__(self, *args: Any, default_out: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default_out = default_out

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, rest = super().parse_known_args(args, namespace)
        if getattr(parsed, "out", None) is not None:
            return parsed, rest
        if parsed.quick:
            parsed.out = quick_out(self.default_out)
        elif getattr(parsed, "render", None):
            parsed.out = os.path.dirname(os.path.abspath(parsed.render))
        else:
            parsed.out = self.default_out
        return parsed, rest


def base_parser(description: str, default_out: str, prog: str | None = None
                ) -> argparse.ArgumentParser:
    """``--quick`` and ``--out``; the program is named as it is run (``python -m bench.x``),
    or ``prog`` when another command runs it (``shmaug bench``). A quick run writes nowhere
    under the repository unless ``--out`` says so (``quick_out``)."""
    if prog is None:
        module = getattr(sys.modules["__main__"], "__spec__", None)
        # A benchmark's __main__.py runs its run.py as the main module: both are its command.
        name = module.name.removesuffix(".__main__").removesuffix(".run") if module else ""
        prog = f"python -m {name}" if name.startswith("bench") else None  # else argparse's own
    _watch_terminate()  # (from the main thread, before a section runs its children in threads)
    parser = _BenchParser(description=description, prog=prog, default_out=default_out)
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and 1 repeat: a smoke run (CI), not a measurement")
    what = "file for the JSON results" if default_out.endswith(".json") else \
        "folder for the JSON and Markdown results"
    parser.add_argument("--out", default=None,
                        help=f"{what} (default {default_out}; with --quick "
                             f"{quick_out(default_out)}, outside the repository)")
    return parser


def study_parser(description: str, default_out: str, child: str) -> argparse.ArgumentParser:
    """``base_parser`` with a study's ``--rounds`` and its hidden ``--child`` (what one run in
    a fresh child process measures: ``child`` says its form)."""
    parser = base_parser(description, default_out)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS, metavar=child)
    return parser


def consume(epoch: Any, step_s: float) -> tuple[float, list[float]]:
    """One epoch (an iterable of batches) taken by a consumer that sleeps ``step_s`` per batch,
    a simulated accelerator: the wall seconds, and the seconds waited for each batch."""
    waits: list[float] = []
    t0, it = time.perf_counter(), iter(epoch)
    while True:
        ta = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        waits.append(time.perf_counter() - ta)
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:  # an accelerator step: the CPU stays free meanwhile
            time.sleep(min(0.002, max(0.0, end - time.perf_counter())))
    return time.perf_counter() - t0, waits
