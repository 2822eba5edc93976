"""The worker protocol: what travels on a worker's two pipes, and the results the pool hands out.

Every message but the stop sentinel starts with a tag byte that says what it is;
``decode_message`` and ``decode_result`` are the only places that read one. The kind of a
message never depends on its length, so no payload (a pickle of any length) can pass for
another kind.

Task pipe, parent -> worker (``encode_task``, ``ring_message``, ``STOP``; ``decode_message``):

- ``T`` + ``Task.to_bytes()`` (56 bytes): a slice to make. Packed, not pickled: the main
  process sends several per batch and shares the cores with the workers.
- ``R`` + pickle of ``RingHandles``: the output ring, sized by the probe, for a worker that
  started before it existed.
- the empty message: the stop sentinel. The worker stops once the messages before it are
  done. It is the one message without a tag, and every other has one, so an empty message is
  nothing else. (On Windows a wait may take an empty message itself: ``worker._serve`` reads
  at once for that.)

Result pipe, worker -> parent (``encode_result``; ``decode_result``):

- ``D`` + the ticket (signed 64-bit): ``Done``, the hot path, 9 bytes.
- ``P`` + pickle of a ``Failed`` or ``Probed`` (an error record, or what sample 0 looks like).

``Died`` and ``TimedOut`` never cross a pipe: the parent makes them when a worker vanishes or
outlasts ``timeout`` with a task. All five are small frozen types matched by class, as
``torch.utils.data._utils.worker`` does.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass, field
from typing import Union

from ...errors import ErrorRecord
from ..handoff.ring import RingHandles, TargetLayout
from ..plan.schedule import Task

# -- what a result may carry ------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """What sample 0 looks like: the loaded input and the augmented output. Small and
    picklable; made where user code runs (a worker, or this process with ``workers=0``)."""

    shape: tuple[int, ...]  # of the augmented sample
    dtype: str
    input_dtype: str  # of the sample as loaded (``x[0]`` or ``load(0)``), before `augment`
    input_range: tuple[float, float] | None  # its finite min and max; None if none is finite
    input_nonfinite: bool  # it holds NaN or infinity
    targets: TargetLayout = field(default_factory=dict)  # the augmented targets' shapes


PROBE_SLOT = (1 << 64) - 1  # a task for this slot is the probe: sample 0 of epoch 0, no ring


def probe_task(ticket: int) -> Task:
    return Task(ticket, 0, PROBE_SLOT, 0, 0, 1, 0)


# -- results: one type per kind -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """The task's rows are written (or it was cancelled and skipped)."""

    ticket: int


@dataclass(frozen=True, slots=True)
class Failed:
    """A sample of the task raised; the worker lives on."""

    ticket: int
    record: ErrorRecord


@dataclass(frozen=True, slots=True)
class Probed:
    """The probe's answer (``probe_task``)."""

    ticket: int
    probe: Probe


@dataclass(frozen=True, slots=True)
class Died:
    """As many workers as the pool allows died running this task: reported, not redone."""

    ticket: int
    worker_id: int
    exitcode: int | None
    sample_index: int  # the sample the last of them was making


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The task ran longer than ``timeout``; its worker was stopped and replaced."""

    ticket: int
    worker_id: int
    sample_index: int


Result = Union[Done, Failed, Probed, Died, TimedOut]

# -- the task pipe ----------------------------------------------------------------------------

_TASK, _RING = b"T", b"R"
STOP = b""  # the stop sentinel, as sent: no tag, no payload


@dataclass(frozen=True, slots=True)
class Stop:
    """The stop sentinel, decoded."""


Message = Union[Task, RingHandles, Stop]


def encode_task(task: Task) -> bytes:
    return _TASK + task.to_bytes()


def ring_message(handles: RingHandles) -> bytes:
    """The control message that gives a running worker the output ring."""
    return _RING + pickle.dumps(handles, protocol=pickle.HIGHEST_PROTOCOL)


def decode_message(data: bytes) -> Message:
    """A task-pipe message, by its tag.

    Raises:
        ValueError: the tag is none of the protocol's (or the message is empty).
    """
    tag = data[:1]
    if tag == _TASK and len(data) == 1 + Task.WIRE_SIZE:
        return Task.from_bytes(data[1:])
    if tag == _RING:
        handles = pickle.loads(data[1:])
        if isinstance(handles, RingHandles):
            return handles
    elif not data:
        return Stop()
    raise ValueError(_unknown("task", data, f"{_TASK!r} + a task's {Task.WIRE_SIZE} bytes, "
                                            f"{_RING!r} + the ring's pickle, or the empty stop"))


# -- the result pipe --------------------------------------------------------------------------

_DONE, _PICKLED = b"D", b"P"
_TICKET = struct.Struct("<q")  # behind the tag
_DONE_SIZE = 1 + _TICKET.size


def encode_result(result: Done | Failed | Probed) -> bytes:
    """``Done`` as 9 packed bytes; a failure or a probe pickled behind its tag."""
    if type(result) is Done:
        return _DONE + _TICKET.pack(result.ticket)
    return _PICKLED + pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def decode_result(data: bytes) -> Done | Failed | Probed:
    """A result-pipe message, by its tag (the main process reads one per task: kept lean).

    Raises:
        ValueError: the tag is none of the protocol's (or the message is empty).
    """
    tag = data[:1]
    if tag == _DONE and len(data) == _DONE_SIZE:
        return Done(_TICKET.unpack_from(data, 1)[0])
    if tag == _PICKLED:
        result = pickle.loads(data[1:])
        if isinstance(result, (Failed, Probed)):
            return result
    raise ValueError(_unknown("result", data, f"{_DONE!r} + an 8-byte ticket, or {_PICKLED!r} + "
                                              f"a pickled Failed or Probed"))


def _unknown(pipe: str, data: bytes, expected: str) -> str:
    return (f"Not a message of shmaug's worker protocol on the {pipe} pipe: expected {expected}; "
            f"received tag {data[:1]!r} in {len(data)} bytes. Both ends of a pipe must run the "
            f"same shmaug; if they do, this is a bug: please report it.")
