"""Who asks a ``Sequence`` for a batch, read off the call stack.

Keras asks with nothing but an index, from the thread calling ``fit`` (JAX, torch) or from
tf.data's threads (TensorFlow). The one signal that is the same on every backend is the frame
that asks: the generator frame of the pass (Keras makes a fresh one per pass), Keras'
``PyDatasetAdapter`` of the Sequence, or its trainer's ``_symbolic_build``. ``_passes`` binds
asks to batches; this module only finds the frames.

It reads a frame's locals only where it must (a method's ``self``, Keras' own frames): before
Python 3.13, ``frame.f_locals`` leaves a snapshot of them on the frame, which kept the arrays
of a user's loop alive after their ``del``, until that function returned.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

_GENERATOR = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR

_BUILDERS = {"_symbolic_build", "_maybe_symbolic_build"}  # Keras 3's trainers, every backend


def keras_is_building() -> bool:
    """Whether Keras' trainer is building the model up the stack (it then draws a batch or
    more from a pass of its own, and drops it with ``EpochIterator.reset()``)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _BUILDERS and "keras" in code.co_filename:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


_INFERENCE = {"evaluate", "predict"}  # Keras 3's trainers (fit's validation calls evaluate)


def keras_is_inferring() -> bool:
    """Whether Keras' ``evaluate`` or ``predict`` runs up the stack: Keras never shuffles
    their passes (nor ``fit``'s validation, which runs ``evaluate``)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _INFERENCE and code.co_filename.endswith("trainer.py") \
                and "keras" in code.co_filename:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _self_of(frame: Any) -> Any:
    """The ``self`` of a method's frame, else None (its locals left unread)."""
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return None
    return frame.f_locals.get("self")


def _keras_self(frame: Any) -> Any:
    """The ``self`` of one of Keras' own methods' frame, else None."""
    code = frame.f_code
    if "keras" not in code.co_filename or not code.co_argcount or \
            code.co_varnames[0] != "self":
        return None
    return _keras_local(frame, "self")


def _keras_local(frame: Any, name: str) -> Any:
    """Local ``name`` of one of Keras' own running frames (None: unbound). Before Python
    3.13 ``f_locals`` leaves a snapshot of every local on the frame until its next read: on
    ``fit``'s frame it held the previous epoch's tf.data iterator past its epoch, and its
    release at the next epoch's read (a wait on tf.data's threads, the GIL held) began that
    epoch 0.7-2.5 s late, every few epochs. Keras' code keeps no ``locals()`` of its own,
    so the snapshot is emptied once read (a user's frame's is left as it is)."""
    found = frame.f_locals
    try:
        return found.get(name)
    finally:
        if sys.version_info < (3, 13) and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
            found.clear()


def asking_loop(seq: object) -> Any:
    """The generator frame asking ``seq`` for a batch (one per pass: ``_passes``' docstring),
    or None for an ask from no loop. Skips the plain frames of ``seq``'s own methods: a
    subclass's ``__getitem__`` calling ours, directly or through a helper (``for b in seq``
    and ``to_tf_dataset`` are generators of ``seq``'s: they are loops)."""
    frame = sys._getframe(2)
    while frame is not None and not frame.f_code.co_flags & _GENERATOR and (
            frame.f_code.co_name == "__getitem__" or _self_of(frame) is seq):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or not frame.f_code.co_flags & _GENERATOR:
        return None
    return frame


def keras_asks(seq: object) -> bool:
    """Whether Keras' ``PyDatasetAdapter`` of ``seq`` called ``seq.__getitem__`` itself (for
    ``fit``, ``evaluate`` or ``predict``), not through a subclass's override, which gets the
    batch before Keras does and may expect numpy."""
    frame = sys._getframe(2)  # the caller of the __getitem__ calling this
    return bool(frame.f_code.co_flags & _GENERATOR) and getattr(
        _keras_self(frame), "py_dataset", None) is seq


def keras_adapter(seq: object) -> Any:
    """Keras' ``PyDatasetAdapter`` of ``seq`` up the stack (asking for a batch, probing the
    signature, beginning an epoch), or None."""
    frame = sys._getframe(2)
    while frame is not None:
        owner = _keras_self(frame)
        if owner is not seq and getattr(owner, "py_dataset", None) is seq:
            return owner
        frame = frame.f_back  # type: ignore[assignment]
    return None


def from_adapter(seq: object) -> bool:
    """Whether Keras' ``PyDatasetAdapter`` of ``seq`` is calling (through ``seq``'s own
    methods, such as a subclass's override calling ``super()``)."""
    frame = sys._getframe(2)
    while frame is not None and _self_of(frame) is seq:
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and getattr(_keras_self(frame), "py_dataset", None) is seq


def trainer_call() -> tuple[str, Any] | None:
    """The innermost of Keras' ``fit``, ``evaluate`` and ``predict`` up the stack, and its
    model (fit's validation is its ``evaluate``), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _INFERENCE | {"fit"} and "keras" in code.co_filename and \
                code.co_filename.endswith("trainer.py"):
            return code.co_name, _keras_local(frame, "self")
        frame = frame.f_back  # type: ignore[assignment]
    return None


def by_hand() -> bool:
    """Whether a Sequence is read by a loop of the user's: not under Keras' ``fit``,
    ``evaluate`` or ``predict`` (``trainer_call``), nor by ``to_tf_dataset``'s generator,
    which tells of its order itself."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_TO_TF_DATASET):
            return False
        frame = frame.f_back  # type: ignore[assignment]
    return trainer_call() is None


_TO_TF_DATASET = os.path.join("shmaug", "keras", "_tf_data.py")


def fit_argument(name: str) -> Any:
    """The argument ``name`` of Keras' ``fit`` up the stack as ``fit`` holds it now (its
    ``initial_epoch`` once ``BackupAndRestore`` has set it, its ``callbacks`` as a
    ``CallbackList``), or None (no ``fit``, or none given). Read where Keras begins an epoch:
    in the thread calling ``fit``, on every backend."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "fit" and "keras" in code.co_filename and \
                code.co_filename.endswith("trainer.py"):
            return _keras_local(frame, name)
        frame = frame.f_back  # type: ignore[assignment]
    return None
