"""shmaug: image augmentation on every CPU core, over shared memory, feeding Keras.

Importing shmaug starts no process, changes no thread count and does not import Keras or
TensorFlow (spawned workers re-import this package). The Keras facade (`Sequence`,
`StallMonitor`, `EpochSync`, the `shmaug.keras` package) is loaded on first access.

`dir(shmaug)` is the public API: the names of `__all__` and the public parts (`engine`,
`errors`, `keras`, `ops`, `seeding`, `sources`), nothing this module imports for itself.

The parts, in the order a batch meets them ([Architecture](../architecture.md)):

- ``sources``: where sample i comes from besides an array: image files, record shards,
  buckets;
- ``engine``: batches made by a persistent worker pool over shared memory (``Loader``);
- ``keras``: the Keras facade (``Sequence``, callbacks);
- ``ray``: the workers on other nodes, through Ray (``shmaug.ray.Workers``; imported only
  when asked for: ``import shmaug.ray``);
- ``ops``: what the workers run on each sample, and a registry;
- ``memory``: shared memory that outlives no one, used by the engine and the sources.

Beside them, the base every part may use, and the command line:

- ``errors``: the ``ShmaugError`` tree, and how a worker's exception travels home;
- ``seeding``: (seed, epoch, sample index) -> random stream;
- ``platform``: what differs between platforms, decided once;
- ``deferred``: a photo not yet decoded, which a source hands a decode-time crop;
- ``resample``: every resize's filters, and the exact resample of a window of pixels;
- ``whole_decodes``: each fallback from that crop to a whole decode, counted by reason;
- ``presets``: ready-made pipelines;
- ``cli``, ``_demo``, ``_interrupt``: the ``shmaug`` command (``demo``, ``bench``, ``pack``,
  ``doctor``);
- ``_doctor``: ``shmaug.doctor()``, what ``shmaug doctor`` prints, for a run's records;
- ``__main__``: the same command as ``python -m shmaug``.
"""

import importlib as _importlib
import logging as _logging
import typing as _typing

from . import platform as _platform
from . import presets
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ClosedError,
    DistributionError,
    DuplicateOpError,
    ImageReadError,
    NotInitializedError,
    NotPicklableError,
    OutputMismatchError,
    RemoteError,
    SharedMemoryError,
    ShmaugError,
    ShmaugWarning,
    UnknownOpError,
    WorkerDied,
    WorkerError,
    WorkerTimeout,
)
from .sources.files import ImageFiles
from .sources.records import ImageRecords
from .engine.loader import Loader
from .ops import (
    Compose,
    Maybe,
    OneOf,
    SomeOf,
    available,
    from_albumentations,
    from_array,
    from_config,
    from_keras,
    from_pil,
    get,
    register,
)
from .sources.pack import pack
from ._doctor import doctor

if _typing.TYPE_CHECKING:  # typed for users' checkers; imported lazily (__getattr__)
    from .keras import EpochSync as EpochSync
    from .keras import Sequence as Sequence
    from .keras import StallMonitor as StallMonitor

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ClosedError",
    "Compose",
    "DistributionError",
    "DuplicateOpError",
    "ImageFiles",
    "ImageReadError",
    "ImageRecords",
    "Loader",
    "Maybe",
    "NotInitializedError",
    "NotPicklableError",
    "OneOf",
    "OutputMismatchError",
    "RemoteError",
    "SharedMemoryError",
    "ShmaugError",
    "ShmaugWarning",
    "SomeOf",
    "UnknownOpError",
    "WorkerDied",
    "WorkerError",
    "WorkerTimeout",
    "__version__",
    "available",
    "doctor",
    "from_albumentations",
    "from_array",
    "from_config",
    "from_keras",
    "from_pil",
    "get",
    "pack",
    "presets",
    "register",
]

# The public parts beside __all__ (not in it: `from shmaug import *` must not bind `keras`).
_PUBLIC_MODULES = ("engine", "errors", "keras", "ops", "seeding", "sources")

_logging.getLogger(__name__).addHandler(_logging.NullHandler())

_LAZY = ("EpochSync", "Sequence", "StallMonitor")  # shmaug.keras's, loaded when asked for
if _platform.keras_installed() or _typing.TYPE_CHECKING:  # (else not public: see there)
    __all__ += ["EpochSync", "Sequence", "StallMonitor"]  # (_LAZY, spelled out for checkers)
    __all__.sort()


def __dir__() -> list[str]:
    # Tab completion and help(): the public API only, the lazy facade names included.
    return sorted({*__all__, *_PUBLIC_MODULES})


def __getattr__(name: str) -> _typing.Any:
    # The facade imports Keras; load it only when someone asks for it.
    if name == "keras":
        return _importlib.import_module(".keras", __name__)
    if name in _LAZY:  # (shmaug.keras says what to install where Keras is missing)
        return getattr(_importlib.import_module(".keras", __name__), name)
    raise AttributeError(f"module 'shmaug' has no attribute {name!r}")
