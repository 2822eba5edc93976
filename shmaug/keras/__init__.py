"""The Keras facade: a ``keras.utils.PyDataset`` over the engine's ``Loader``.

The only part of shmaug that imports Keras, and only when one of the public names is used:
``import shmaug`` does not load this package, and its pure internals (``_passes``) import
without Keras installed.

Public:

- ``sequence``: ``Sequence``, the PyDataset contract over a Loader: its hooks, Keras' asks
  bound to shmaug's batches, the workers' life cycle;
- ``callbacks``: ``EpochSync`` (resume, ``initial_epoch``) and ``StallMonitor``;
- ``interop``: a Sequence as another library's dataset (``to_grain``: Grain).

Internal, each one concern of a Sequence:

- ``_passes``: which planned batch answers each ask of Keras: its passes, and their order;
- ``_stack``: who asks, read off the call stack (the pass's generator, Keras' adapter);
- ``_runtime``: what a Sequence builds and pickling drops (``Runtime``), its life cycle;
- ``_batches``: what Keras gets for a batch (inputs, targets, sample weights; torch tensors);
- ``_checks``: checks of what only the facade takes;
- ``_resume``: ``state_dict`` and ``load_state_dict``;
- ``_distribution``: the shard a process serves under ``keras.distribution``;
- ``_tf_data``: ``to_tf_dataset`` and a ``tf.distribute.InputContext``'s shard;
- ``_idle``: Sequences nobody asks stop their workers;
- ``_describe``: ``repr()``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .callbacks import EpochSync, StallMonitor
    from .sequence import Sequence

from ..platform import keras_installed

_HOME = {"EpochSync": "callbacks", "Sequence": "sequence", "StallMonitor": "callbacks"}
if TYPE_CHECKING:
    __all__ = ["EpochSync", "Sequence", "StallMonitor"]
else:  # public where Keras is installed: see ``keras_installed``
    __all__ = ["EpochSync", "Sequence", "StallMonitor"] if keras_installed() else []


def __getattr__(name: str) -> Any:
    if name in _HOME:
        try:
            module = importlib.import_module(f".{_HOME[name]}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name == "keras":
                raise ModuleNotFoundError(
                    f"shmaug.{name} is the Keras facade and needs Keras 3, which is not "
                    f'installed. Fix: pip install "shmaug[tf]" (or keras with a backend of '
                    f"your choice); shmaug.Loader works without it.", name="keras") from None
            backend = (exc.name or "").split(".")[0]
            if backend not in ("tensorflow", "jax", "torch"):
                raise
            raise ModuleNotFoundError(
                f"shmaug.{name} needs Keras' backend, and {backend!r} (the backend Keras was "
                f"asked for: KERAS_BACKEND, else ~/.keras/keras.json, else tensorflow) is not "
                f'installed. Fix: pip install "shmaug[tf]"; or with JAX or PyTorch, pip '
                f'install "shmaug[jax]" or "shmaug[torch]" and set KERAS_BACKEND=jax or '
                f"torch before Keras is imported.", name=exc.name) from None
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # Tab completion: the public names and modules, as dir(shmaug) (not Any, importlib, ...).
    return sorted({*__all__, *(("callbacks", "sequence") if __all__ else ())})
