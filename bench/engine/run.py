"""The engine benchmark: shmaug side by side with a plain copy and Keras PyDataset.

Run ``python -m bench.engine [--quick] [--out bench/results/engine] [--sections main,...]``. Five sections, each in its
own child process (so one that hangs or crashes is reported and the rest still run), and
inside a section every contender runs in the same process, interleaved round by round
(``contenders.interleave``):

1. identity (``identity.py``): GB/s handed to the consumer with an identity ``augment``
   on 224x224x3 uint8, ``shmaug.Loader(workers=2)`` vs a single-process copy (the
   memory-bandwidth ceiling) vs ``keras.utils.PyDataset(workers=2, use_multiprocessing=True)``.
2. scaling (``scaling.py``): images/s of a CPU-bound pipeline
   (``presets.glyph_distort`` on 64x64 glyphs) with ``workers`` = 0, 1, 2.
3. seeding (``seeding.py``): cost of ``SampleSeeder.streams()`` per sample (a 64-sample
   task at a time, as workers do) as a share of a cheap op's time.
4. startup (``startup.py``): time to the first batch and worker USS when the main script
   has imported TensorFlow, shmaug vs Keras PyDataset, under spawn and fork.
5. main (``main_process.py``): the consumer process's own CPU per image and per batch on W1
   and W3, and the feed rate it implies for a many-core host (1 / CPU per image).

This module is the driver only: it starts the sections, collects their rows and writes
``engine.json`` / ``engine.md``. See ``bench/README.md`` for how to read the table.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from bench.common.harness import base_parser, described, prepare_out, report_json, run_json
from bench.common.report import Row, environment, rows_from_json, write_results

NAME = "engine"


SECTIONS: dict[str, str] = {  # section -> the module whose ``section_<name>(quick)`` runs it
    "identity": "bench.engine.identity",
    "scaling": "bench.engine.scaling",
    "seeding": "bench.engine.seeding",
    "startup": "bench.engine.startup",
    "main": "bench.engine.main_process",
}
_SECTION_TIMEOUT_S = {"identity": 240.0, "scaling": 180.0, "seeding": 120.0, "startup": 420.0,
                      "main": 240.0}
_QUICK_TIMEOUT_S = 100.0


def _run_section_child(name: str, quick: bool) -> None:
    # Only the section asked for is imported: the child stays as light as that section.
    section: Callable[[bool], list[Row]] = getattr(importlib.import_module(SECTIONS[name]),
                                                     f"section_{name}")
    rows = section(quick)
    report_json([r.to_dict() for r in rows])


def _run_sections(quick: bool, names: list[str]) -> list[Row]:
    argv = [sys.executable, "-m", "bench.engine.run", "--section"]

    def one(name: str) -> list[Row]:
        t0 = time.perf_counter()
        out = run_json(argv + [name] + (["--quick"] if quick else []),
                         _QUICK_TIMEOUT_S if quick else _SECTION_TIMEOUT_S[name])
        print(f"[bench.engine] section {name}: {out.status} in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr, flush=True)
        if out.ok:
            return rows_from_json(out.value)
        return [Row(name, "(whole section)", "", "", None, f"{out.status}: {out.error}")]

    if quick:  # a smoke run: sections at once (timings meaningless, speed matters)
        with ThreadPoolExecutor(max_workers=len(names)) as ex:
            parts = list(ex.map(one, names))
    else:  # measurements: one section at a time, nothing else competing for the 2 cores
        parts = [one(name) for name in names]
    return [row for part in parts for row in part]


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(described(__doc__), "bench/results/engine")
    parser.add_argument("--section", choices=sorted(SECTIONS), help=argparse.SUPPRESS)
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {', '.join(SECTIONS)} (default: all)")
    args = parser.parse_args(argv)
    prepare_out(args.out)  # before measuring, not after
    if args.section:
        _run_section_child(args.section, args.quick)
        return 0
    t0 = time.perf_counter()
    names = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(names) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    rows = _run_sections(args.quick, names)
    meta = {"quick": args.quick, "environment": environment(),
            "wall_s": round(time.perf_counter() - t0, 1)}
    text = write_results(args.out, NAME, rows, meta)
    print(text)
    print(f"wrote {Path(args.out) / (NAME + '.json')} and {NAME}.md "
          f"in {meta['wall_s']} s", file=sys.stderr)
    # A contender that fails is a result (it is in the table); a section that crashed is a bug.
    return 1 if any(r.contender == "(whole section)" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
