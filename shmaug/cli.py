"""The `shmaug` command: `demo` (the main job), `pack` (image files to one .npy) and `bench`
(the benchmark suite)."""

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
    pack = sub.add_parser("pack", help="decode and resize image files once into a memory-mappable .npy")
    pack.add_argument("src", type=Path, help="a folder (one sub-folder per class) or a CSV file")
    pack.add_argument("out", type=Path, help="output folder: images.npy, labels.npy, manifest.json")
    pack.add_argument("--image-size", type=int, nargs=2, metavar=("H", "W"), default=(256, 256))
    pack.add_argument("--color-mode", default="rgb", choices=["grayscale", "rgb", "rgba", "keep"])
    pack.add_argument("--interpolation", default="bilinear")
    pack.add_argument("--on-error", default="raise", choices=["raise", "skip"])
    pack.add_argument("--workers", type=int, default=None, help="default: one per core")
    pack.add_argument("--x-col", default="filename", help="CSV column of image paths")
    pack.add_argument("--y-col", default="class", help="CSV column of labels ('' for none)")
    pack.add_argument("--directory", type=Path, default=None,
                      help="CSV paths are relative to this (default: the CSV's folder)")
    pack.add_argument("--overwrite", action="store_true", help="redo a complete output")
    pack.add_argument("--verify", action="store_true",
                      help="re-hash a complete output against its manifest before trusting it")
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
    elif args.command == "pack":
        return _pack(args)
    return 0


def _pack(args: argparse.Namespace) -> int:
    """`shmaug pack SRC OUT`: a folder or a CSV of paths and labels, packed once."""
    import csv

    from .files import ImageFiles
    from .pack import pack

    options = dict(image_size=tuple(args.image_size), interpolation=args.interpolation,
                   on_error=args.on_error,
                   color_mode=None if args.color_mode == "keep" else args.color_mode)
    if args.src.suffix.lower() == ".csv":
        with open(args.src, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        root = args.directory if args.directory is not None else args.src.parent
        paths = [str(root / row[args.x_col]) for row in rows if row]
        labels = [row[args.y_col] for row in rows if row] if args.y_col else None
        files = ImageFiles.from_paths(paths, labels, **options)
    else:
        files = ImageFiles.from_directory(args.src, **options)
    packed = pack(files, args.out, workers=args.workers, overwrite=args.overwrite,
                  verify=args.verify, progress=True)
    state = "written" if packed.created else "already complete, nothing redone"
    logging.getLogger("shmaug.cli").info(
        "%s: %d images %s, classes %s", packed.images, packed.manifest["count"], state,
        packed.class_names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
