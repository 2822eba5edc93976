"""Ctrl-C noted wherever it lands, so that a wait for a batch off the main thread ends too.

Why: TensorFlow's ``fit`` waits in C for tf.data's thread, which waits on shmaug for a batch.
Python raises ``KeyboardInterrupt`` only in the main thread, and only when it next runs Python
code, so a batch that never comes (an op hung, no ``timeout=``) held both for good, Ctrl-C or
not. ``watch_presses`` notes each press through ``signal.set_wakeup_fd`` (written by the C
handler, whichever thread the signal lands on), where nobody else holds it; ``give_up`` ends
such a wait ``GIVE_UP_AFTER_S`` after a press, which a batch on its way would have beaten:
``fit`` then ends (TensorFlow reports the KeyboardInterrupt). The command line has its own
(``shmaug._interrupt``).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
import time
from contextlib import suppress

from ... import platform
from ...errors import warn

GIVE_UP_AFTER_S = 1.0  # after a press, what a wait off the main thread is left to finish
_pressed = 0.0  # monotonic time of the latest Ctrl-C noted (0: none)
_pair: list[socket.socket] = []  # the wakeup fd's pair, held for the process: its fd stays ours
_tried: list[int] = []  # the process that tried to take the wakeup fd (once: each try swaps it)


def watch_presses() -> None:
    """Note each Ctrl-C as it lands, whichever thread it lands on, for ``give_up``. Tried once
    per process, from the main thread, and only where Ctrl-C has Python's own handler and no
    one else holds the wakeup fd (asyncio's loop, the command line's ``always_ends``). One
    that takes it later (an asyncio loop handling signals) ends the watch: Ctrl-C then waits
    for the batch, as before."""
    if _tried == [os.getpid()] or os.name != "posix" or \
            threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    _tried[:] = [os.getpid()]
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    if previous != -1:  # another's: left as it was
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        return
    _pair.extend((reader, writer))
    os.register_at_fork(after_in_child=_forget)
    atexit.register(_forget)
    platform.start_thread(_note, "shmaug-ctrl-c-notes", reader)


def give_up(began: float) -> None:
    """Raise KeyboardInterrupt in a thread other than the main one, waiting since ``began``
    (monotonic), once Ctrl-C was pressed after that and ``GIVE_UP_AFTER_S`` ago: the main
    thread, which would have raised it, waits in C on this one."""
    pressed = _pressed
    if pressed > began and time.monotonic() - pressed >= GIVE_UP_AFTER_S and \
            threading.current_thread() is not threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (not the user's)
        said = (f"Ctrl-C: a batch asked for by thread {threading.current_thread().name!r} "
                f"did not come within {GIVE_UP_AFTER_S:.0f} s, and the main thread may wait on "
                f"that thread in C, where Ctrl-C never reaches it (TensorFlow's fit waits so on "
                f"tf.data's), so the wait is given up; what waits on it ends with an error of "
                f"its own (TensorFlow's names KeyboardInterrupt). A hung op? Pass `timeout=` "
                f"seconds to have its task raise WorkerTimeout, naming the sample.")
        warn(said)
        raise KeyboardInterrupt(said)


def _note(reader: socket.socket) -> None:
    global _pressed
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            _pressed = time.monotonic()


def _forget() -> None:
    """In a forked child: the pair is the parent's, and a signal there is not a press here;
    at exit: the pair closed, before the wakeup fd is left to name a closed socket."""
    with suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for end in _pair:
        end.close()
    _pair.clear()
