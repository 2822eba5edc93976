"""shmaug: image augmentation on every CPU core, over shared memory, feeding Keras.

Importing shmaug starts no process, changes no thread count and does not import Keras or
TensorFlow (spawned workers re-import this package). The Keras facade (`Sequence`,
`StallMonitor`, `EpochSync`) is loaded on first access.
"""

from __future__ import annotations

import logging
from typing import Any

from . import _moved, presets
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ClosedError,
    DistributionError,
    DuplicateOpError,
    ImageReadError,
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
    from_pil,
    get,
    register,
)
from .sources.pack import pack

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ClosedError",
    "Compose",
    "DistributionError",
    "DuplicateOpError",
    "EpochSync",
    "ImageFiles",
    "ImageReadError",
    "Loader",
    "Maybe",
    "NotPicklableError",
    "OneOf",
    "OutputMismatchError",
    "RemoteError",
    "Sequence",
    "SharedMemoryError",
    "ShmaugError",
    "ShmaugWarning",
    "SomeOf",
    "StallMonitor",
    "UnknownOpError",
    "WorkerDied",
    "WorkerError",
    "WorkerTimeout",
    "__version__",
    "available",
    "from_albumentations",
    "from_array",
    "from_config",
    "from_pil",
    "get",
    "pack",
    "presets",
    "register",
]

logging.getLogger(__name__).addHandler(logging.NullHandler())

_LAZY = {"EpochSync": "keras.callbacks", "Sequence": "keras.sequence",
         "StallMonitor": "keras.callbacks"}
_moved.install(__name__)  # the flat layout's module paths, for one release


def __getattr__(name: str) -> Any:
    # The facade imports Keras; load it only when someone asks for it.
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(f".{_LAZY[name]}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != "keras":
                raise
            raise ModuleNotFoundError(
                f"shmaug.{name} is the Keras facade and needs Keras 3, which is not installed. "
                f'Fix: pip install "shmaug[tf]" (or keras with a backend of your choice); '
                f"shmaug.Loader works without it.", name="keras") from None
        return getattr(module, name)
    moved = _moved.old_path(__name__, name)
    if moved is not None:
        return moved
    raise AttributeError(f"module 'shmaug' has no attribute {name!r}")
