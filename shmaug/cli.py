"""The `shmaug` command: `demo` (the main job) and `bench` (the benchmark suite)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shmaug", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train a small CNN on rendered glyphs through shmaug")
    demo.add_argument("--epochs", type=int, default=6)
    demo.add_argument("--per-class", type=int, default=100, help="training glyphs per class")
    demo.add_argument("--workers", type=int, default=None, help="default: one per core")
    demo.add_argument("--start-method", default=None, choices=["fork", "spawn", "forkserver"])
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", type=Path, default=Path("shmaug_demo_out"))
    demo.add_argument("--quick", action="store_true", help="a tiny run (seconds), for smoke tests")
    sub.add_parser("bench", add_help=False,
                   help="the benchmark suite (`python -m bench` in a clone; see bench/README.md)")
    return parser


def _bench(argv: list[str]) -> int:
    """Run the repository's benchmark suite (it lives beside the package, not inside it)."""
    import os
    import subprocess

    if not os.path.isfile(os.path.join("bench", "__main__.py")):
        print("shmaug bench runs the suite in bench/ of a shmaug clone: cd into the clone "
              "(where bench/ is) and run it again.", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, "-m", "bench", *argv])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        return _bench(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.command == "demo":
        from ._demo import run

        run(epochs=1 if args.quick else args.epochs, per_class=4 if args.quick else args.per_class,
            workers=args.workers, out=args.out, seed=args.seed, start_method=args.start_method)
    return 0


if __name__ == "__main__":
    sys.exit(main())
