"""Results of the engine-style benchmarks: rows, number formatting, Markdown, one JSON + one .md.

Owns how a figure is written down, so every script reports the same way:

- ``Row``: one figure of one contender in one section, with its status, ratio and target.
- ``fmt_num`` / ``fmt_stats`` / ``markdown_table`` / ``rows_table``: text for the tables.
- ``environment``: what the numbers were measured on (CPUs, versions, load average).
- ``write_results`` / ``rows_from_json``: ``<out>/<name>.json`` and ``.md``; rows a child
  process reported, rebuilt.

Measuring (timing, bounds, child processes, memory) is ``harness.py``'s; this module only
writes. Nothing here imports TensorFlow or Keras.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import psutil

from shmaug.platform import cpu_name

from bench.common.harness import REPO_ROOT, Stats


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


NOT_JUDGED = "not judged: a quick run measures nothing"
QUICK = ("**QUICK run** (tiny sizes and repeat counts): a smoke test that the script works; "
         "its figures measure nothing, and no target or comparison is judged on them")
_VERDICT = re.compile(r"\b(met|MISSED)\b")


def process_age_s() -> float:
    """Seconds since this process started: a run's wall time, imports included."""
    return time.time() - psutil.Process().create_time()


def took(seconds: float) -> str:
    """A run's wall time as its report states it: seconds below 2 minutes, else minutes."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def verdict(met: bool | None, quick: bool = False) -> str:
    """How a target reads: "met" / "MISSED" ("n/a" when unknown), or, for a ``--quick`` run
    (tiny sizes, 1 repeat, cores shared), ``NOT_JUDGED``: its figures are no measurement."""
    if quick:
        return NOT_JUDGED
    return {True: "met", False: "MISSED", None: "n/a"}[met]


def unjudged(text: str) -> str:
    """``text`` with its met / MISSED verdicts replaced by ``NOT_JUDGED``."""
    return _VERDICT.sub(NOT_JUDGED, text)


def fmt_us(v: float | None, decimals: int = 0) -> str:
    """A time in µs with thousands separators; "—" for a contender that did not run."""
    return "—" if v is None else f"{v:,.{decimals}f}"


def fmt_times(a: float | None, b: float | None, decimals: int = 1) -> str:
    """``a / b`` as "1.5x"; "—" where either did not run."""
    return "—" if a is None or b is None else f"{a / b:.{decimals}f}x"


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


def cpu_model() -> str:
    """The processor's name (``shmaug.platform.cpu_name``: the demo's too)."""
    return cpu_name()


def threads_per_core() -> int | None:
    """Hardware threads per core (2: the CPU count is twice the cores, and scaling past the
    cores adds only what a core's second thread gives)."""
    with contextlib.suppress(OSError, ValueError):
        text = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text()
        return sum(int(b) - int(a) + 1 if "-" in part else 1
                   for part in text.strip().split(",") for a, _, b in [part.partition("-")])
    return None


def command() -> str:
    """How this process was started, as a reader would type it again (``python -m
    bench.engine --quick``): every result names its command beside its CPU."""
    argv = list(getattr(sys, "orig_argv", sys.argv))[1:]
    return " ".join(["python", *argv])


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "threads_per_core": threads_per_core(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": command(),
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
    with contextlib.suppress(Exception):
        import cv2

        info["opencv"] = cv2.__version__
    return info


def write_study(out_dir: str | Path, name: str, results: Any, said: str, table: str,
                argv: Sequence[str], quick: bool, seconds: float) -> None:
    """A study's run, ``python -m bench.<name> <argv>``: what it measured (``said``), the
    command, how long it took and its ``table``, printed and written as ``<out>/<name>.md``;
    its ``results`` as ``<out>/<name>.json``."""
    text = ((f"{QUICK}.\n\n" if quick else "") + f"{said} (`python -m bench.{name} "
            f"{' '.join(argv)}`, took {took(seconds)}):\n\n{table}\n")
    print(text)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=1))
    (out / f"{name}.md").write_text(text)


def write_results(out_dir: str | Path, name: str, rows: Sequence[Row],
                  meta: dict[str, Any], markdown_extra: str = "") -> str:
    """Write ``<out>/<name>.json`` and ``<out>/<name>.md``; return the Markdown text."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if meta.get("quick"):  # its figures measure nothing: no target is judged on them
        rows = [replace(r, target=unjudged(r.target)) if r.target else r for r in rows]
    payload = {"name": name, "meta": meta, "rows": [r.to_dict() for r in rows]}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    env = meta.get("environment", {})
    wall = f" · took {took(meta['wall_s'])}" if meta.get("wall_s") else ""
    head = (f"# {name}\n\n{QUICK if meta.get('quick') else 'full run'}"
            f" · {env.get('usable_cpus')} CPUs ({env.get('cpu', '?')}) · Python {env.get('python')} · "
            f"commit {env.get('git_commit', '?')} · {env.get('time', '')} · "
            f"load average {env.get('load_avg_1m')} at start{wall}\n\n"
            + (f"Command: `{env['command']}`\n\n" if env.get("command") else ""))
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
