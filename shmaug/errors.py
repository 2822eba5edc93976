"""Every error and warning shmaug raises, and how a worker's exception travels home.

The tree (each class also subclasses the nearest builtin, so ``except ValueError`` keeps
working for code that does not know shmaug):

```text
ShmaugError
├── ArgumentError        (ValueError)    an argument has a value we cannot use
├── ArgumentTypeError    (TypeError)     an argument has a type we cannot use
├── NotPicklableError    (TypeError)     something bound for the workers does not pickle
├── OutputMismatchError  (ValueError)    a sample's output shape differs from the batch's
├── SharedMemoryError    (OSError)       /dev/shm cannot hold what was asked
├── ImageReadError       (OSError)       an image file is missing, unreadable or corrupt
├── RemoteError          (OSError)       object storage refused a credential or kept failing
├── UnknownOpError       (LookupError)   no op registered under that name
├── DuplicateOpError     (ValueError)    an op name is taken
├── ClosedError          (RuntimeError)  the loader was used after close()
├── NotInitializedError  (AttributeError) a Sequence subclass skipped super().__init__()
├── DistributionError    (RuntimeError)  a Keras distribution set up to train wrong
├── WorkerError          (RuntimeError)  a worker raised; carries its traceback
│   └── WorkerDied                       a worker vanished (exit code inside)
└── WorkerTimeout        (TimeoutError)  a task ran longer than `timeout`
```

Warnings (``warnings.warn``: something the user should change in their code or data; each is
said once per loader, ``Sequence`` or ``ImageFiles``; operational detail goes to ``logging``):

```text
UserWarning
└── ShmaugWarning                        e.g. files replaced under on_error="skip"
```

A user op that raises ``ValueError`` in a worker reaches the consumer as an exception that is
*both* a ``ValueError`` and a ``WorkerError`` (see ``rebuild``), so either ``except`` works.
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import traceback
import urllib.parse
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = [  # (what completion offers)
    "ShmaugError", "ArgumentError", "ArgumentTypeError", "NotPicklableError",
    "OutputMismatchError", "SharedMemoryError", "ImageReadError", "RemoteError",
    "UnknownOpError", "DuplicateOpError", "ClosedError", "NotInitializedError",
    "DistributionError", "WorkerError", "WorkerDied", "WorkerTimeout", "ShmaugWarning",
]


MASK = "***"  # what a secret is shown as
_URL = re.compile(r"\bhttps?://[^\s'\"<>`]+", re.IGNORECASE)


def shown_url(url: str) -> str:
    """A web ``url`` as messages, logs and ``stats()`` show it: what comes before its host
    (a password, a token as the user name) and the values of its query (a presigned URL's
    signature) as ``***``. (A bucket's key may hold "?" and "#": s3:// and gs:// are left
    as they are; their secrets are in ``storage_options``.)"""
    if not url.lower().startswith(("http://", "https://")):
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # (a malformed host, "http://[::1": nothing to mask in it)
        return url
    user, at, host = parts.netloc.rpartition("@")
    netloc = f"{MASK}@{host}" if at else parts.netloc
    query = "&".join(f"{k.partition('=')[0]}={MASK}" if "=" in k else MASK
                     for k in parts.query.split("&")) if parts.query else ""
    if netloc == parts.netloc and query == parts.query:
        return url
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrubbed_urls(text: str) -> str:
    """``text`` with every web URL in it as ``shown_url`` shows it (the sentence's own
    punctuation after it left out of it)."""
    if "://" not in text:
        return text

    def shown(match: re.Match[str]) -> str:
        url, depth = match.group(0), 0
        for i, c in enumerate(url):  # a ")" the URL opened no "(" for is the sentence's
            depth += (c == "(") - (c == ")")
            if depth < 0:
                url = url[:i]
                break
        end = url.rstrip(".,;:!")
        return shown_url(end) + match.group(0)[len(end):]
    return _URL.sub(shown, text)


class ShmaugError(Exception):
    """Root of every error shmaug raises. Shown, a URL's secrets are masked (``shown_url``):
    the message may name a URL given with a password or a presigned query."""

    def __str__(self) -> str:
        return scrubbed_urls(super().__str__())

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (to a pool's parent, a Ray driver, a deepcopy) without calling the
        # constructor, which may want keywords (``WorkerDied``'s) that ``args`` lacks. An
        # OSError's file names are outside its ``args``, as its own reduce gives them.
        args = self.args
        if isinstance(self, OSError) and (self.filename, self.filename2) != (None, None):
            args = (*args, self.filename, None, self.filename2)[:len(args) + (
                1 if self.filename2 is None else 3)]
        return _unpickled, (type(self), args), dict(vars(self))


def _unpickled(cls: type[ShmaugError], args: tuple[Any, ...]) -> ShmaugError:
    err = cls.__new__(cls, *args)  # (which sets ``args``, and an OSError's fields, but for
    if not err.args:  # an OSError whose class has an __init__ of its own, which sets them)
        err.args = args
    return err


class DistributionError(ShmaugError, RuntimeError):
    """A multi-process Keras distribution set up in a way that would train wrong (e.g. hosts
    with different initial weights); the message says the fix."""


# Where ``on_error='skip'`` goes, said by an unreadable image's error: it is found in a worker,
# far from the source's call (a command replaces it: its flag is the only place).
SKIP_WHERE = (" to the source that reads it (ImageFiles.from_directory, from_dataframe or "
              "from_paths, ImageRecords.from_tfrecord, from_webdataset, ...)")


class ShmaugWarning(UserWarning):
    """Something the user should change in their code or data; filter it by this category."""


def warn(message: str) -> None:
    """``warnings.warn(message, ShmaugWarning)``, attributed to the first caller outside shmaug.

    The line a warning shows (and the place Python's default filter shows it once for) is then
    the user's (or Keras', when Keras calls us), never a line inside shmaug.
    """
    frame = sys._getframe(1)  # our caller: stacklevel 2
    level = 2
    while frame.f_back is not None and from_shmaug(frame.f_globals.get("__name__")):
        frame = frame.f_back
        level += 1
    warnings.warn(scrubbed_urls(message), ShmaugWarning, stacklevel=level)


def got(value: Any) -> str:
    """A received value as an error message shows it: its repr (cut at 60 characters) and
    its type."""
    text = repr(value)
    return f"{text[:57] + '...' if len(text) > 60 else text} (type {type(value).__name__})"


def missing(value: Any) -> bool:
    """Whether ``value`` is a missing entry (None, a NaN, pandas' NA or NaT), which a message
    tells apart from a wrong one: its fix is to leave the row out."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, (str, bytes)) or hasattr(value, "__len__"):  # (arrays, containers)
        return False
    try:
        return bool(value != value)  # a NaN, Python's or numpy's: nothing else is unequal
    except (TypeError, ValueError):  # to itself
        return False


def from_shmaug(module: object) -> bool:
    """Whether ``module`` (a ``__module__`` or ``__name__``) is shmaug's own: user code is
    what shmaug checks, frames and ships, never itself."""
    name = str(module or "")
    return name == "shmaug" or name.startswith("shmaug.")


class ArgumentError(ShmaugError, ValueError):
    """An argument has a value shmaug cannot use; the message names it and the fix."""


class ArgumentTypeError(ShmaugError, TypeError):
    """An argument has a type shmaug cannot use; the message names it and the fix."""


class NotPicklableError(ShmaugError, TypeError):
    """Something that must reach the workers (an op, a subclass) cannot be pickled."""


class OutputMismatchError(ShmaugError, ValueError):
    """A sample's augmented output does not fit the batch's shape or dtype."""


class SharedMemoryError(ShmaugError, OSError):
    """Shared memory (/dev/shm) cannot hold the requested block."""


class ImageReadError(ShmaugError, OSError):
    """An image file is missing, unreadable, corrupt or has the wrong channel count."""


class RemoteError(ShmaugError, OSError):
    """Object storage refused the credentials, or a request kept failing after its retries
    (never skipped by ``on_error="skip"``: it is not about one image)."""


class UnknownOpError(ShmaugError, LookupError):
    """No augmentation op is registered under the requested name."""


class DuplicateOpError(ShmaugError, ValueError):
    """An augmentation op name is already registered."""


class ClosedError(ShmaugError, RuntimeError):
    """The loader (or its pool) was used after ``close()``."""


class NotInitializedError(ShmaugError, AttributeError):
    """A ``Sequence`` subclass's ``__init__`` did not call ``super().__init__(...)``; an
    ``AttributeError`` too, so ``hasattr`` keeps working."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# The debug switch that shows shmaug's own frames in a worker's traceback (JAX's name for
# its own switch, JAX_TRACEBACK_FILTERING=off); Keras' keras.config.disable_traceback_filtering()
# does the same when Keras is in use.
FILTERING_ENV = "SHMAUG_TRACEBACK_FILTERING"

_READ_ONLY = (
    "shmaug hands each op its image as a read-only view of the data in shared memory (so "
    "no op can corrupt the dataset), and this code writes into its input. Fix: copy first, "
    "`image = image.copy()`, before writing in place (`image += ...`, `image[...] = ...`, "
    "`cv2.xxx(image, dst=image)`), or return a new array (`image + ...`)."
)


def advice(exc: BaseException) -> str:
    """What to do about an exception an op raised, when its message alone does not say
    (numpy's and OpenCV's complaints about a read-only input); else ""."""
    text = str(exc)
    if "read-only" in text or "marked as readonly" in text:
        return _READ_ONLY
    return ""


def _filtered(exc: BaseException) -> tuple[str, bool]:
    """The traceback of ``exc`` (and of its causes) without shmaug's own frames, and whether
    any frame was left: the user's code is what the reader can change. An error raised with
    only shmaug's frames (an unreadable image) keeps none: its message says what and the fix,
    and the header says the frames were left out, which must then be true of every one."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen = set()
    kept_any = False
    node: traceback.TracebackException | None = te
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        kept = [f for f in node.stack if not str(f.filename).startswith(_PACKAGE_DIR)]
        kept_any = kept_any or bool(kept)
        node.stack = traceback.StackSummary.from_list(kept)
        node = node.__cause__ or (None if node.__suppress_context__ else node.__context__)
    return "".join(te.format()), kept_any


def _show_all_frames() -> bool:
    """Whether the debug switch asks for shmaug's frames too: SHMAUG_TRACEBACK_FILTERING=off
    (0, false, no), or Keras' own switch when Keras is already in use."""
    if os.environ.get(FILTERING_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return True
    keras = sys.modules.get("keras")
    if keras is None or type(keras).__name__ == "_LazyModule":  # a worker's lazy import, not
        return False  # loaded yet (engine.workers.lazy_imports): unused, and a read loads it
    enabled = getattr(getattr(keras, "config", None), "is_traceback_filtering_enabled", None)
    try:
        return enabled is not None and not enabled()
    except Exception:  # a Keras without the switch
        return False


@dataclass(frozen=True)
class ErrorRecord:
    """What a worker sends home when a sample fails: small, always picklable."""

    exc_type: bytes | None  # pickled exception class, or None when the class does not pickle
    type_name: str
    message: str  # with ``advice`` appended where there is some
    traceback: str  # in full, shmaug's frames included
    worker_id: int
    sample_index: int
    epoch: int
    op: str
    user_traceback: str = ""  # without shmaug's frames (what the message shows by default)
    only_ours: bool = False  # every frame was shmaug's: the message shows none by default
    attributes: bytes | None = None  # the exception's own attributes that pickle (its code)
    sample_name: str = ""  # the sample's file (or shard and record), where its source names it

    @classmethod
    def capture(
        cls, exc: BaseException, tb: str, *, worker_id: int, sample_index: int, epoch: int,
        op: str, sample_name: str = ""
    ) -> ErrorRecord:
        try:
            exc_type: bytes | None = pickle.dumps(type(exc))
        except Exception:
            exc_type = None
        message = str(exc).rstrip()
        hint = advice(exc)
        if hint:
            message = f"{message}\n{hint}" if "\n" in message else f"{message}. {hint}"
        try:
            user, kept_any = _filtered(exc)
        except Exception:  # a traceback we cannot walk: the full one will do
            user, kept_any = "", True
        return cls(exc_type, type(exc).__qualname__, message, tb, worker_id, sample_index,
                   epoch, op, user, not kept_any, _attributes(exc), sample_name)

    def _named(self) -> str:
        """The sample's file where the message does not name it (an op's error on a file
        source's sample: a too-small crop named index 2 of a folder of thousands)."""
        if not self.sample_name or self.sample_name in self.message:
            return ""
        return f" ({self.sample_name})"

    def describe(self, named: bool = True) -> str:
        """The message of the error raised for this record. ``named=False`` where that
        error is of the worker's own type: Python's report already starts with the type's
        name, so "ImageReadError: ImageReadError: ..." would say it twice."""
        where = f"shmaug worker {self.worker_id}" if self.worker_id >= 0 else "the main process"
        filtering = bool(self.user_traceback) and not _show_all_frames()
        if filtering and self.only_ours:
            tb = (f"Worker traceback: shmaug's own frames only, left out ({FILTERING_ENV}=off "
                  f"shows them).")
        elif filtering:
            heading = (f"Traceback (shmaug's own frames left out; {FILTERING_ENV}=off shows "
                       f"them):")
            tb = self.user_traceback.rstrip()
            tb = heading + tb[len("Traceback (most recent call last):"):] \
                if tb.startswith("Traceback (most recent call last):") else tb
            tb = f"Worker traceback:\n{tb}"
        else:
            tb = f"Worker traceback:\n{self.traceback.rstrip()}"
        return (
            f"{f'{self.type_name}: ' if named else ''}{self.message}\n"
            f"(raised by `{self.op}` in {where} on sample index {self.sample_index}"
            f"{self._named()}, epoch {self.epoch})\n{tb}"
        )


class WorkerError(ShmaugError, RuntimeError):
    """A worker raised while producing a sample.

    Attributes carry the context: ``worker_id``, ``sample_index``, ``epoch``, ``op`` (the
    callable that ran) and ``worker_traceback`` (the text of the traceback in the worker).
    """

    worker_id: int = -1
    sample_index: int = -1
    epoch: int = -1
    op: str = ""
    worker_traceback: str = ""
    record: ErrorRecord | None = None  # what the worker sent: pickled with the error, so a
    # Ray node's arrives in the trainer as it was raised there (``engine.remote``)
    _rebuilt_with: frozenset[str] = frozenset()  # attributes ``rebuild`` set (made again)

    def _attach(self, record: ErrorRecord) -> None:
        self.record = record
        self.worker_id = record.worker_id
        self.sample_index = record.sample_index
        self.epoch = record.epoch
        self.op = record.op
        self.worker_traceback = record.traceback
        self._rebuilt_with = frozenset((*vars(self), "_rebuilt_with"))


class WorkerDied(WorkerError):
    """A worker process vanished; ``exitcode`` says how (negative: killed by that signal),
    ``sample_index`` on which sample where it died running a task (-1: as it started)."""

    def __init__(self, message: str, *, worker_id: int, exitcode: int | None,
                 sample_index: int = -1) -> None:
        super().__init__(message)
        self.worker_id = worker_id
        self.exitcode = exitcode
        self.sample_index = sample_index


class WorkerTimeout(ShmaugError, TimeoutError):
    """A task ran longer than the loader's ``timeout``; ``sample_index`` names the sample."""

    def __init__(self, message: str, *, worker_id: int, sample_index: int) -> None:
        super().__init__(message)
        self.worker_id = worker_id
        self.sample_index = sample_index


_MIXED: dict[type, type] = {}


def _plain_str(self: BaseException) -> str:
    # KeyError would print the multi-line message as a quoted repr.
    return str(self.args[0]) if self.args else ""


def _rebuilt_again(self: WorkerError) -> tuple[Any, ...]:
    # A mixed class is made at run time, so it pickles as its record, rebuilt where it
    # lands (of the worker's type there too, where that type loads).
    state = {k: v for k, v in vars(self).items() if k not in self._rebuilt_with}
    if self.record is None:
        return WorkerError, (str(self),), state
    return rebuild, (self.record,), state  # (which sets the worker's attributes, if they load)


def _mixed_class(exc_type: type[BaseException]) -> type[BaseException] | None:
    """A subclass of both ``exc_type`` and ``WorkerError`` that prints as ``exc_type``."""
    if exc_type not in _MIXED:
        try:
            mixed = type(exc_type.__name__, (exc_type, WorkerError),
                         {"__str__": _plain_str, "__reduce__": _rebuilt_again})
        except TypeError:  # layout conflict with an exotic builtin exception
            return None
        mixed.__module__ = exc_type.__module__
        mixed.__qualname__ = exc_type.__qualname__
        _MIXED[exc_type] = mixed
    return _MIXED[exc_type]


def rebuild(record: ErrorRecord) -> WorkerError:
    """The exception to raise in the consumer for a failed sample.

    It is an instance of the worker's exception type *and* of ``WorkerError``, with the
    worker's exception's attributes that pickle (its ``code``); where that type cannot be made
    (a layout no mix takes), of its nearest base class that can, so ``except`` clauses for the
    type or its builtin base still work. Its message carries the worker's message, traceback,
    worker id and sample index, and the worker's type name where the error is of another
    type (a base, or ``WorkerError`` itself).
    """
    exc_type: Any = None
    if record.exc_type is not None:
        try:
            exc_type = pickle.loads(record.exc_type)
        except Exception:
            exc_type = None
    if isinstance(exc_type, type) and issubclass(exc_type, Exception) and not issubclass(
        exc_type, WorkerError
    ):
        for base in exc_type.__mro__:
            if base is Exception or not issubclass(base, Exception):
                break
            err = _mixed_instance(base, record.describe(named=base is not exc_type),
                                  record.attributes if base is exc_type else None)
            if err is not None:
                err._attach(record)
                return err
    err = WorkerError(record.describe())
    _set_attributes(err, record.attributes)  # (its type did not load, or cannot be made)
    err._attach(record)
    return err


def _set_attributes(err: BaseException, attributes: bytes | None) -> None:
    """Give ``err`` the worker's exception's ``attributes`` (``_attributes``') that load."""
    for name, value in (pickle.loads(attributes) if attributes is not None else {}).items():
        try:
            setattr(err, name, pickle.loads(value))
        except Exception:  # a class this process cannot load: the rest will do
            pass


def _attributes(exc: BaseException) -> bytes | None:
    """The attributes of ``exc`` that pickle (a ``code``, a ``returncode``), for ``rebuild``."""
    kept = {}
    for name, value in getattr(exc, "__dict__", {}).items():
        try:  # each on its own: one whose class does not load there leaves the rest
            kept[name] = pickle.dumps(value)
        except Exception:
            continue
    return pickle.dumps(kept) if kept else None


def _mixed_instance(exc_type: type[BaseException], text: str, attributes: bytes | None
                    ) -> WorkerError | None:
    """An instance of ``exc_type`` mixed with ``WorkerError`` that says ``text``, with the
    worker's exception's ``attributes``; a Python class's constructor that wants other
    arguments than a message (``MyError(code, detail)``) is not called, its attributes come
    from the worker."""
    mixed = _mixed_class(exc_type)
    if mixed is None:
        return None
    try:
        err = mixed(text)
    except Exception:
        if exc_type.__module__ == "builtins":  # its fields are C's (UnicodeDecodeError's
            return None  # start, end): made without them, they would read 0 and None
        try:
            err = mixed.__new__(mixed, text)
            err.args = (text,)
        except Exception:
            return None
    if not isinstance(err, WorkerError):
        return None
    _set_attributes(err, attributes)
    return err
