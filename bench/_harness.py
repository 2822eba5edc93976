"""Shared helpers for the benchmark scripts in ``bench/``: timing, memory, bounds, output.

Owns the mechanics every benchmark needs so that each script is only its contenders:

- ``Stats`` / ``summarize`` / ``time_calls``: repeat, then quote median with min-max.
- ``deadline`` / ``guarded``: a contender that hangs or raises is reported, not fatal.
- ``run_json``: run a child process under a hard timeout and read the JSON it prints.
- ``memory_of`` / ``worker_memory``: USS / PSS of processes (psutil), by pid.
- ``Row`` / ``markdown_table`` / ``write_results``: one JSON + one Markdown file per script.
- ``progress``: a tqdm bar over the runs (on stderr, off when not a terminal).
- ``base_parser``: ``--quick`` and ``--out``, the same for every script.

Timings live only here and in the scripts that use it, never in tests. Nothing in this module
imports TensorFlow or Keras.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
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
    env.setdefault("PYTHONWARNINGS", "ignore")
    env.update(extra)
    return env


def report_json(payload: Any) -> None:
    """How a child process hands its result to ``run_json``: one marked line on stdout."""
    sys.stdout.write(JSON_MARKER + json.dumps(payload) + "\n")
    sys.stdout.flush()


def run_json(argv: Sequence[str], timeout_s: float, env: dict[str, str] | None = None) -> Outcome:
    """Run ``argv`` with a hard timeout; its value is the payload of its ``report_json`` line.

    The child gets its own session so that on timeout its whole process group (workers
    included) is killed; nothing else is touched. stderr passes through (progress bars).
    """
    try:
        proc = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=None, text=True,
            env=env or child_env(), cwd=str(REPO_ROOT), start_new_session=True,
        )
    except OSError as exc:
        return Outcome("error", error=f"could not start {argv[0]}: {exc}")
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return Outcome("timeout", error=f"killed after {timeout_s:g} s")
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    payload = None
    for line in out.splitlines():
        if line.startswith(JSON_MARKER):
            payload = json.loads(line[len(JSON_MARKER):])
    if payload is None:
        tail = out.strip().splitlines()[-3:]
        return Outcome("error", error=f"exit code {proc.returncode}, no result; {tail}"[:300])
    return Outcome("ok", payload)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
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


# -- results -----------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of a results table: a figure of one contender in one section."""

    section: str
    contender: str
    metric: str
    unit: str
    stats: Stats | None = None  # None when the contender failed or the row is text only
    status: str = "ok"  # "ok", "timeout", "error: ..."
    ratio: str = ""  # e.g. "0.62x copy"
    target: str = ""  # e.g. ">= 0.5x copy: met"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stats"] = self.stats.to_dict() if self.stats is not None else None
        return d


def fmt_num(x: float, digits: int = 3) -> str:
    """A number with ``digits`` significant figures, no exponent for everyday magnitudes."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def fmt_stats(s: Stats | None, digits: int = 3) -> tuple[str, str]:
    """``(median, "min-max")`` as text."""
    if s is None or not s.values:
        return "n/a", ""
    if s.n == 1:
        return fmt_num(s.median, digits), "(1 run)"
    return fmt_num(s.median, digits), f"{fmt_num(s.lo, digits)} – {fmt_num(s.hi, digits)}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def rows_table(rows: Sequence[Row]) -> str:
    """The standard table: one line per row, median and min-max side by side."""
    body = []
    for r in rows:
        med, spread = fmt_stats(r.stats)
        status = r.status if r.status != "ok" else "ok"
        body.append([r.section, r.contender, f"{r.metric} ({r.unit})" if r.unit else r.metric,
                     med if r.status == "ok" else "—", spread, r.ratio, r.target, status, r.note])
    return markdown_table(
        ["section", "contender", "metric", "median", "min – max", "ratio", "target", "status",
         "note"], body)


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        # Others' work on the machine skews everything: record how busy it was.
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    with contextlib.suppress(Exception):
        info["git_commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=5).stdout.strip()
    with contextlib.suppress(Exception):
        import numpy

        info["numpy"] = numpy.__version__
    return info


def write_results(out_dir: str | Path, name: str, rows: Sequence[Row],
                  meta: dict[str, Any], markdown_extra: str = "") -> str:
    """Write ``<out>/<name>.json`` and ``<out>/<name>.md``; return the Markdown text."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    payload = {"name": name, "meta": meta, "rows": [r.to_dict() for r in rows]}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    env = meta.get("environment", {})
    head = (f"# {name}\n\n{'quick run (tiny sizes, 1 repeat): smoke only' if meta.get('quick') else 'full run'}"
            f" · {env.get('usable_cpus')} CPUs · Python {env.get('python')} · "
            f"commit {env.get('git_commit', '?')} · {env.get('time', '')} · "
            f"load average {env.get('load_avg_1m')} at start\n\n")
    text = head + rows_table(rows) + "\n" + (("\n" + markdown_extra + "\n") if markdown_extra else "")
    (out / f"{name}.md").write_text(text)
    return text


def rows_from_json(items: Sequence[dict[str, Any]]) -> list[Row]:
    """Rebuild rows a child process reported (``Row.to_dict`` output)."""
    rows = []
    for d in items:
        d = dict(d)
        s = d.pop("stats")
        rows.append(Row(**d, stats=Stats(tuple(s["values"])) if s else None))
    return rows


# -- progress and arguments ----------------------------------------------------------------------


def progress(total: int, desc: str) -> Any:
    """A tqdm bar over ``total`` runs on stderr; silent when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr,
                disable=not sys.stderr.isatty(), dynamic_ncols=True)


def base_parser(description: str, default_out: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and 1 repeat: a smoke run (CI), not a measurement")
    parser.add_argument("--out", default=default_out,
                        help=f"folder for the JSON and Markdown results (default {default_out})")
    return parser
