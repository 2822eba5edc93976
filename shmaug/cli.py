"""The `shmaug` command: `demo` (the main job), `pack` (image files to one .npy), `doctor`
(what this machine decodes with) and `bench` (the benchmark suite).

Owns the command line only: parsing, checking what was typed, and how failures look. A user
mistake (a bad flag value, a missing folder, a CSV without the column, an unreadable image, any
``ShmaugError``) ends as ONE line on stderr that names the flag, the value and the fix, with exit
status 2 (argparse's convention); Ctrl-C ends with one line and status 130. ``--debug`` shows
the full traceback instead. Anything else is a bug in shmaug and keeps its traceback.

The library's messages name Python arguments (``on_error='skip'``); `as_flags` rewrites them in
the command's own flags (``--on-error skip``) through one explicit table per command.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import logging
import multiprocessing
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NoReturn, TextIO

from . import __version__, _interrupt
from .errors import SKIP_WHERE, ShmaugError, ShmaugWarning, WorkerError

EXIT_USAGE = 2  # argparse's status for a bad command line; ours for any user mistake
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_GRACE_S = 10.0  # after Ctrl-C, how long exit handlers may take before the process ends
_LOG_FORMAT = "%(name)s: %(message)s"  # the library's logger names the part that speaks

# Python argument -> the flag (or positional) that sets it, per command. Every library message
# a command shows goes through its table (`as_flags`), so it names what the user can type.
PACK_FLAGS: dict[str, str] = {
    "image_size": "--image-size",
    "color_mode": "--color-mode",
    "interpolation": "--interpolation",
    "extensions": "--extensions",
    "class_names": "--class-names",
    "on_error": "--on-error",
    "workers": "--workers",
    "overwrite": "--overwrite",
    "verify": "--verify",
    "x_col": "--x-col",
    "y_col": "--y-col",
    "out": "OUT",
    "source": "SRC",
    "directory": "SRC",  # from_directory's folder; a CSV's `--directory` replaces it (_pack)
    # Where a CLI user finds the figures; the longer names first (replaced in this order).
    "stats()['skipped']": "manifest.json's `skipped`",
    "stats()['unreadable']": "manifest.json's `unreadable`",
    "stats()": "manifest.json's `skipped`",
    SKIP_WHERE: "",  # (the command's flag is the only place it goes)
    # A folder without class folders: a pack has no labels flag; it packs them unlabelled.
    "or pass labels=None to read them unlabelled without this warning":
        "or pack it as it is: its images are written unlabelled (no labels.npy)",
    # A skip warning written for a loader's epochs; a pack reads each file once.
    "in this epoch and every other": "in the pack",
    "not repeated for this loader": "not repeated for this pack",
}
DEMO_FLAGS: dict[str, str] = {
    "epochs": "--epochs",
    "workers": "--workers",
    "start_method": "--start-method",
    "seed": "--seed",
    "out": "--out",
}
# Values that read differently as flags; any other value loses its quotes and brackets.
_FLAG_VALUES: dict[tuple[str, str], str] = {
    ("--color-mode", "None"): "keep",
}


class CommandError(Exception):
    """A mistake on the command line, found before any work starts; the message names the
    flag, the value and the fix."""


def as_flags(message: str, flags: Mapping[str, str]) -> str:
    """``message`` with the Python arguments it names rewritten as ``flags`` says.

    ``on_error='skip'`` becomes ``--on-error skip``, ``image_size=(224, 224)`` becomes
    ``--image-size 224 224``, ``overwrite=True`` becomes ``--overwrite`` and a backticked
    ``\\`workers\\``` becomes ``\\`--workers\\```. Entries that are not identifiers are replaced
    word for word.

    Example:
        >>> as_flags("pass on_error='skip'", PACK_FLAGS)
        'pass --on-error skip'
    """
    names = [n for n in flags if n.isidentifier()]
    if names:
        alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        value = r"'[^']*'|\"[^\"]*\"|\([^)]*\)|\[[^\]]*\]|[\w.+-]+"
        assignment = re.compile(rf"\b(?P<name>{alternatives})(?P<tick>`?)=(?P<value>{value})?")
        message = assignment.sub(lambda m: _assignment(m, flags), message)
        message = re.sub(rf"`(?P<name>{alternatives})`", lambda m: f"`{flags[m['name']]}`",
                         message)
    for python, cli in flags.items():
        if not python.isidentifier():
            message = message.replace(python, cli)
    return message


def _assignment(match: re.Match[str], flags: Mapping[str, str]) -> str:
    flag, raw = flags[match["name"]], match["value"] or ""
    if raw == "True" or not raw:
        return flag + match["tick"]
    words = _FLAG_VALUES.get((flag, raw))
    if words is None:
        words = " ".join(re.sub(r"[()\[\]'\",]", " ", raw).split())
    return f"{flag}{match['tick']} {words}"


# -- the parser ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr (no usage block), status 2."""

    def error(self, message: str) -> NoReturn:
        _say(self.prog, f"{message}. See `{self.prog} --help`.")
        sys.exit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="shmaug", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"shmaug {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error instead of one line")
    # Also accepted after the subcommand; SUPPRESS keeps the top-level value when absent there.
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    demo = sub.add_parser("demo", parents=[debug],
                          help="train a small CNN on rendered glyphs, fed by Keras' own workers "
                               "and by shmaug side by side")
    size = demo.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a tiny run (seconds), for smoke tests")
    size.add_argument("--full", action="store_true",
                      help="every class, more glyphs and epochs: for a machine with many cores "
                           "or an accelerator")
    demo.add_argument("--epochs", type=int, default=None, help="epochs per contender "
                      "(default 3; --quick 1, --full 8)")
    demo.add_argument("--per-class", type=int, default=None, help="training glyphs per class")
    demo.add_argument("--workers", type=int, default=None,
                      help="worker processes for each contender (default: one per core)")
    demo.add_argument("--start-method", default=None,
                      choices=multiprocessing.get_all_start_methods(),
                      help="how shmaug starts its workers (Keras keeps the platform default)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", type=Path, default=Path("shmaug_demo_out"),
                      help="folder for the PNGs (default: shmaug_demo_out)")
    pack = sub.add_parser("pack", parents=[debug],
                          help="decode and resize image files once into a memory-mappable .npy")
    pack.add_argument("src", type=Path, metavar="SRC",
                      help="a folder (one sub-folder per class) or a CSV file")
    pack.add_argument("out", type=Path, metavar="OUT",
                      help="output folder: images.npy, labels.npy, manifest.json")
    pack.add_argument("--image-size", type=int, nargs=2, metavar=("H", "W"), default=(256, 256),
                      help="the size every image is resized to (default: 256 256)")
    pack.add_argument("--color-mode", default="rgb", choices=["grayscale", "rgb", "rgba", "keep"])
    pack.add_argument("--interpolation", default="bilinear")
    pack.add_argument("--on-error", default="raise", choices=["raise", "skip"])
    pack.add_argument("--extensions", nargs="+", default=None, metavar="EXT",
                      help="a folder's files to read, instead of Keras' .bmp .gif .jpeg .jpg "
                           ".png (e.g. --extensions .jpg .png .webp)")
    pack.add_argument("--class-names", nargs="+", default=None, metavar="NAME",
                      help="a folder's class sub-folders to read, in label order (default: "
                           "every sub-folder, sorted)")
    pack.add_argument("--workers", type=int, default=None, help="default: one per core")
    pack.add_argument("--x-col", default="filename", help="CSV column of image paths")
    pack.add_argument("--y-col", default="class", help="CSV column of labels ('' for none)")
    pack.add_argument("--directory", type=Path, default=None,
                      help="CSV paths are relative to this (default: the CSV's folder)")
    pack.add_argument("--overwrite", action="store_true", help="redo a complete output")
    pack.add_argument("--verify", action="store_true",
                      help="re-hash a complete output against its manifest before trusting it")
    sub.add_parser("doctor", parents=[debug],
                   help="say which libraries decode images here (which JPEG decoder a loader "
                        "started now would use), and the cores and shared memory")
    sub.add_parser("bench", add_help=False,
                   help="the benchmark suite (`python -m bench` in a clone; see bench/README.md)")
    return parser


# -- the front door -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run one `shmaug` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    at = _command_position(argv)
    if argv[at : at + 1] == ["bench"]:  # bench parses its own flags
        debug = "--debug" in argv[:at]
        return _guarded("shmaug bench", {}, debug, lambda: _bench(argv[at + 1 :]))
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    if args.command == "demo":
        return _guarded("shmaug demo", DEMO_FLAGS, args.debug, lambda: _demo(args))
    if args.command == "doctor":
        return _guarded("shmaug doctor", {}, args.debug, _doctor)
    flags = {**PACK_FLAGS, "directory": "--directory"} if _is_csv(args.src) else PACK_FLAGS
    return _guarded("shmaug pack", flags, args.debug, lambda: _pack(args))


def _command_position(argv: list[str]) -> int:
    """Index of the subcommand in ``argv`` (top-level flags come before it)."""
    for i, word in enumerate(argv):
        if not word.startswith("-"):
            return i
    return len(argv)


def _guarded(prog: str, flags: Mapping[str, str], debug: bool, work: Callable[[], int]) -> int:
    """Run ``work``; a user mistake becomes one line on stderr and status 2, Ctrl-C one line
    and status 130. With ``debug`` the traceback is printed instead of the line. A
    ``ShmaugWarning`` is one line too, in the command's flags (see ``_warnings_as_lines``)."""
    handlers = list(logging.getLogger().handlers)
    formatters = [handler.formatter for handler in handlers]
    for handler in handlers:  # log lines name flags too (`--overwrite`), while it runs
        handler.setFormatter(_FlagFormatter(flags))
    try:
        with _warnings_as_lines(prog, flags), _interrupt.always_ends(
                EXIT_GRACE_S, lambda: _cut_short(prog), EXIT_INTERRUPTED):
            return work()
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        _say(prog, "interrupted (Ctrl-C).")
        _exit_within(EXIT_GRACE_S, EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except (CommandError, ShmaugError, ShmaugWarning, OSError) as exc:  # (a warning: one
        # that -W error / PYTHONWARNINGS=error escalated, as its line says it may be)
        if debug:
            traceback.print_exc()
            return EXIT_USAGE
        escalated = "a warning made an error (-W / PYTHONWARNINGS): " \
            if isinstance(exc, ShmaugWarning) else ""
        _say(prog, escalated + as_flags(_one_line(exc), flags))
        return EXIT_USAGE
    finally:  # main() may run inside another program: its handlers are its own again
        for handler, formatter in zip(handlers, formatters):
            handler.setFormatter(formatter)


def _cut_short(prog: str) -> None:
    """Ctrl-C, and the main thread still blocked in a library ``EXIT_GRACE_S`` later: free
    shmaug's processes and shared memory from here, then say it (the process exits next)."""
    from .engine.loader import close_open_loaders

    close_open_loaders()
    _say(prog, "interrupted (Ctrl-C).")


def _exit_within(seconds: float, status: int) -> None:
    """End the process with ``status`` if it is still running ``seconds`` from now.

    An interrupted command exits through every library's exit handlers, and one of them can
    wait forever: ``multiprocessing.Pool``'s finalizer does, for Keras' ``PyDataset`` workers
    (in the demo and the bench), when a worker was left holding the pool's task queue lock
    (seen in CI: "interrupted" printed, then no exit). shmaug's own cleanup runs before that
    handler (exit handlers run last registered first), so this only cuts short a hang.
    """
    timer = threading.Timer(seconds, _interrupt.exit_now, args=(status,))
    timer.daemon = True
    timer.start()


def _one_line(exc: BaseException) -> str:
    """The first line of the message; a worker's error also says where to find its traceback."""
    if isinstance(exc, OSError) and not isinstance(exc, ShmaugError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}."
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, WorkerError):  # its first line is "TypeName: message"
        text = text.removeprefix(f"{type(exc).__name__}: ")
        text += " (--debug shows the worker's traceback)"
    return text


class _FlagFormatter(logging.Formatter):
    """``name: message`` with the library's argument names rewritten as the command's flags."""

    def __init__(self, flags: Mapping[str, str]) -> None:
        super().__init__(_LOG_FORMAT)
        self.flags = flags

    def format(self, record: logging.LogRecord) -> str:
        return as_flags(super().format(record), self.flags)


def _say(prog: str, message: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)


@contextmanager
def _warnings_as_lines(prog: str, flags: Mapping[str, str]) -> Iterator[None]:
    """Show each ``ShmaugWarning`` as ``<prog>: warning: <message>`` with the library's argument
    names rewritten as flags, instead of Python's two lines (file, line number, source line).

    Which warnings are shown (once each, by default) stays with Python's filters, so
    ``-W``/``PYTHONWARNINGS`` still silence or escalate them; other categories look as usual.
    """
    with warnings.catch_warnings():
        plain = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            if issubclass(category, ShmaugWarning):
                from tqdm import tqdm  # on a line of its own, not after a progress bar

                tqdm.write(f"{prog}: warning: {as_flags(str(message), flags)}", file=sys.stderr)
            else:
                plain(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


# -- doctor --------------------------------------------------------------------------------------


def _doctor() -> int:
    """`shmaug doctor`: one line per fact a slow or odd loader is explained by, on stdout."""
    from ._doctor import doctor

    for name, value in doctor().items():
        print(f"{name}: {value}")
    return 0


# -- demo ----------------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    """`shmaug demo`: check the flags here, where their names are known, then run it."""
    _at_least("--epochs", args.epochs, 1)
    _at_least("--per-class", args.per_class, 1)
    _at_least("--workers", args.workers, 0)
    _at_least("--seed", args.seed, 0)
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(f"`--out` {str(args.out)!r} is a file; the demo writes PNGs into a "
                           f"folder. Fix: pass a folder path, e.g. `--out shmaug_demo_out`.")
    _writable("`--out`", args.out,  # before training, not after
              f"--out {_quoted(Path(tempfile.gettempdir()) / 'shmaug_demo_out')}")
    try:
        from ._demo import run
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("keras", "tensorflow", "jax", "torch"):
            raise CommandError(
                f"the demo trains a Keras model, and {exc.name!r} is not installed. Fix: "
                f"`pip install 'shmaug[tf]'` (Keras 3 with TensorFlow), or 'shmaug[jax]' / "
                f"'shmaug[torch]' with KERAS_BACKEND=jax / torch."
            ) from exc
        raise
    profile = "quick" if args.quick else "full" if args.full else "default"
    run(profile=profile, epochs=args.epochs, per_class=args.per_class, workers=args.workers,
        out=args.out, seed=args.seed, start_method=args.start_method)
    return 0


def _writable(flag: str, given: Path, example: str, folder: Path | None = None) -> None:
    """Refuse, before any work, ``flag``'s folder ``given`` that cannot be made or written
    (``folder``: where it is made, if not ``given`` itself)."""
    folder = given if folder is None else folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise CommandError(f"{flag} {str(given)!r} cannot be written ({exc.strerror or exc}). "
                           f"Fix: pass a folder you can write to, e.g. {example}.") from None


def _quoted(path: Path) -> str:
    """``path`` as a shell takes it (a temp folder under a user name with a space)."""
    return subprocess.list2cmdline([str(path)]) if os.name == "nt" else shlex.quote(str(path))


def _at_least(flag: str, value: int | None, low: int) -> None:
    if value is not None and value < low:
        raise CommandError(f"`{flag}` must be an integer >= {low}; received {value}. Fix: e.g. "
                           f"`{flag} {max(low, 2)}`.")


# -- pack ----------------------------------------------------------------------------------------


def _is_csv(path: Path) -> bool:
    return path.suffix.lower() == ".csv"


def _pack(args: argparse.Namespace) -> int:
    """`shmaug pack SRC OUT`: a folder or a CSV of paths and labels, packed once."""
    from .sources.files import ImageFiles
    from .sources.pack import pack

    height, width = args.image_size
    if height <= 0 or width <= 0:
        raise CommandError(f"`--image-size` must be two sizes > 0 (H W); received {height} "
                           f"{width}. Fix: e.g. `--image-size 224 224`.")
    _at_least("--workers", args.workers, 0)
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(f"OUT {str(args.out)!r} is a file; pack writes a folder (images.npy, "
                           f"labels.npy, manifest.json). Fix: pass a folder path.")
    _writable("OUT", args.out,
              f"`shmaug pack SOURCE {_quoted(Path(tempfile.gettempdir()) / 'packed')}`",
              args.out if args.out.is_dir() else args.out.parent)
    options: dict[str, Any] = dict(
        image_size=(height, width), interpolation=args.interpolation, on_error=args.on_error,
        color_mode=None if args.color_mode == "keep" else args.color_mode)
    for flag, given in (("--extensions", args.extensions), ("--class-names", args.class_names)):
        if _is_csv(args.src) and given:
            raise CommandError(f"`{flag}` chooses the files of a folder; a CSV names its own. "
                               f"Fix: leave it out, or list only the files you want in the CSV.")
    if _is_csv(args.src):
        paths, labels = _read_csv(args.src, args.x_col, args.y_col, args.directory)
        files = ImageFiles.from_paths(paths, labels, **options)
    elif args.src.is_dir():
        files = ImageFiles.from_directory(args.src, extensions=args.extensions,
                                          class_names=args.class_names, **options)
    elif args.src.exists():
        raise CommandError(f"SRC {str(args.src)!r} is neither a folder nor a .csv file. Fix: "
                           f"pass a folder with one sub-folder of images per class, or a CSV "
                           f"of paths and labels.")
    else:
        raise CommandError(f"SRC {str(args.src)!r} does not exist. Fix: pass a folder with one "
                           f"sub-folder of images per class, or a CSV of paths and labels.")
    # The bar only on a terminal: elsewhere (a log, a pipe, CI) each redraw is a line of its own.
    packed = pack(files, args.out, workers=args.workers, overwrite=args.overwrite,
                  verify=args.verify, progress=sys.stderr.isatty())
    state = "written" if packed.created else (
        "already complete (images.npy verified against the manifest's sha256), nothing redone"
        if packed.verified else "already complete, nothing redone")
    # Named, not __name__: run as `python -m shmaug.cli`, __name__ is "__main__", outside the
    # `shmaug` parent a user configures.
    logging.getLogger("shmaug.cli").info(
        "%s: %d images of %dx%d (height x width) %s, classes %s", packed.images,
        packed.manifest["count"], height, width, state, packed.class_names)
    return 0


def _read_csv(src: Path, x_col: str, y_col: str, directory: Path | None
              ) -> tuple[list[str], list[str] | None]:
    """Paths (joined to ``directory``, default the CSV's folder) and labels from a CSV whose
    header names ``x_col`` and, unless it is empty, ``y_col``."""
    if not src.is_file():
        raise CommandError(f"SRC {str(src)!r} does not exist. Fix: pass the CSV of image paths "
                           f"(and labels), or a folder with one sub-folder per class.")
    root = directory if directory is not None else src.parent
    if not root.is_dir():
        raise CommandError(f"`--directory` {str(root)!r} is not a folder. Fix: pass the folder "
                           f"the CSV's paths are relative to.")
    try:
        with open(src, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = list(reader.fieldnames or [])
            rows = [row for row in reader if any((v or "").strip() for v in row.values())]
    except UnicodeDecodeError as exc:
        raise CommandError(f"SRC {str(src)!r} is not a UTF-8 text CSV ({exc.reason} at byte "
                           f"{exc.start}). Fix: save it as UTF-8 CSV.") from None
    for flag, col, otherwise in (("--x-col", x_col, ""),
                                 ("--y-col", y_col, " (or `--y-col ''` for no labels)")):
        if col and col not in columns:
            other = [c for c in columns if c != x_col] or columns
            hint = f"`{flag} {other[0]}`{otherwise}" if columns else "a CSV with a header row"
            raise CommandError(f"`{flag}` {col!r} is not a column of {src.name}; its columns "
                               f"are {columns}. Fix: pass {hint}.")
    if not rows:
        raise CommandError(f"SRC {str(src)!r} has a header but no rows. Fix: list one image "
                           f"per row under `{x_col}`.")
    empty = [i + 2 for i, row in enumerate(rows) if not (row.get(x_col) or "").strip()]
    if empty:
        raise CommandError(f"`--x-col` {x_col!r} is empty on line {empty[0]} of {src.name} "
                           f"({len(empty)} rows in all). Fix: give every row an image path.")
    paths = [os.path.join(root, row[x_col].strip()) for row in rows]
    labels = [(row.get(y_col) or "").strip() for row in rows] if y_col else None
    return paths, labels


# -- bench ---------------------------------------------------------------------------------------


def _bench(argv: list[str]) -> int:
    """Run the repository's benchmark suite in this process (it lives beside the package, in a
    clone, not inside it), so its errors and Ctrl-C end as for the other commands."""
    if not os.path.isfile(os.path.join("bench", "__main__.py")):
        said = ("`shmaug bench` runs the suite in bench/ of a shmaug clone, and there is no "
                "bench/ here. Fix: cd into the clone (where bench/ is) and run it again.")
        if {"-h", "--help"} & set(argv):  # (asked what it is: told, and no error)
            print(f"usage: shmaug bench [options]\n\n{said}")
            return 0
        raise CommandError(said)
    sys.path.insert(0, os.getcwd())
    suite = importlib.import_module("bench.suite.run")
    return int(suite.main(argv, prog="shmaug bench") or 0)  # its --help names this command


if __name__ == "__main__":
    sys.exit(main())
