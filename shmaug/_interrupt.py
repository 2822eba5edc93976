"""Ctrl-C ends a ``shmaug`` command, wherever the signal lands, and a wait for a batch that
the main thread waits on from C (``watch_presses``, ``give_up``).

The kernel hands a process-directed SIGINT to any thread that does not block it. Python's
handler then only flags it, and raises ``KeyboardInterrupt`` when the *main* thread next runs
Python code. With JAX, TensorFlow or a ``multiprocessing.Pool`` around, the signal often lands
on one of their threads while the main thread waits in C for a result that, once Ctrl-C has
reached the workers too, never comes (seen: the demo on JAX waiting forever on Keras'
``PyDataset`` pool). So a watcher thread, woken through ``signal.set_wakeup_fd``, delivers the
press to the main thread itself (its wait then ends with EINTR and the usual
``KeyboardInterrupt``), and if the command is still running ``grace_s`` later, it says so in the
command's one line and ends the process.

In a user's program shmaug only notes each press (``watch_presses``: the same wakeup fd, where
nobody else holds it). TensorFlow's ``fit`` waits in C for tf.data's thread, which waits on
shmaug for a batch; a batch that never comes (an op hung, no ``timeout=``) held both for good,
Ctrl-C or not. ``give_up`` ends such a wait ``GIVE_UP_AFTER_S`` after a press, which a batch
on its way would have beaten: ``fit`` then ends (TensorFlow reports the KeyboardInterrupt).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from .errors import warn

_REDELIVER_AFTER_S = 0.3  # the main thread normally raises KeyboardInterrupt well before this


@contextmanager
def always_ends(grace_s: float, on_timeout: Callable[[], None], status: int) -> Iterator[None]:
    """Within the block, a Ctrl-C the main thread has not acted on in ``_REDELIVER_AFTER_S``
    is delivered to it again; ``grace_s`` after a press, ``on_timeout()`` runs and the process
    exits with ``status``. Does nothing outside the main thread or without ``pthread_kill``."""
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "pthread_kill") or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield  # another thread, Windows, or a program that handles (or ignores) Ctrl-C itself
        return
    seen = threading.Event()  # the main thread has raised KeyboardInterrupt for the press

    def raise_in_main(signum: int, frame: object) -> None:
        if seen.is_set():  # once: a second press (or our redelivery) must not cut cleanup
            return
        seen.set()
        raise KeyboardInterrupt

    reader, writer = socket.socketpair()
    done = threading.Event()
    previous: int | None = None
    thread: threading.Thread | None = None
    try:
        writer.setblocking(False)
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGINT, raise_in_main)
        thread = threading.Thread(target=_watch, name="shmaug-ctrl-c", daemon=True,
                                  args=(reader, seen, done, grace_s, on_timeout, status))
        thread.start()
        yield
    finally:
        done.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if previous is not None:
            signal.set_wakeup_fd(previous)
        with suppress(OSError):  # wakes the watcher's recv: done, it returns (EOF
            writer.send(b"\0")  # alone would not come while a forked child holds `writer`)
        writer.close()
        if thread is not None:
            thread.join(1.0)
        reader.close()


def _watch(reader: socket.socket, seen: threading.Event, done: threading.Event,
           grace_s: float, on_timeout: Callable[[], None], status: int) -> None:
    main = threading.main_thread().ident
    assert main is not None
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data or done.is_set():
            return
        if signal.SIGINT in data:
            break
    if not seen.wait(_REDELIVER_AFTER_S) and not done.is_set():
        # Ends the main thread's wait where it waits on a lock or a system call (EINTR);
        # a library's own wait in C resumes, and the grace below ends the process instead.
        signal.pthread_kill(main, signal.SIGINT)
    if done.wait(grace_s):
        return
    on_timeout()
    os._exit(status)


# -- in a user's program: a wait the main thread cannot interrupt ------------------------------

GIVE_UP_AFTER_S = 1.0  # after a press, what a wait off the main thread is left to finish
_pressed = 0.0  # monotonic time of the latest Ctrl-C noted (0: none)
_pair: list[socket.socket] = []  # the wakeup fd's pair, held for the process: its fd stays ours


def watch_presses() -> None:
    """Note each Ctrl-C as it lands, whichever thread it lands on, for ``give_up``. Once per
    process, from the main thread, and only where Ctrl-C has Python's own handler and no one
    else holds the wakeup fd (asyncio's loop, the command line's ``always_ends``)."""
    if _pair or os.name != "posix" or \
            threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
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
    threading.Thread(target=_note, args=(reader,), name="shmaug-ctrl-c-notes",
                     daemon=True).start()


def give_up(began: float) -> None:
    """Raise KeyboardInterrupt in a thread other than the main one, waiting since ``began``
    (monotonic), once Ctrl-C was pressed after that and ``GIVE_UP_AFTER_S`` ago: the main
    thread, which would have raised it, waits in C on this one."""
    pressed = _pressed
    if pressed > began and time.monotonic() - pressed >= GIVE_UP_AFTER_S and \
            threading.current_thread() is not threading.main_thread():
        said = (f"Ctrl-C: a batch asked for by thread {threading.current_thread().name!r} "
                f"did not come within {GIVE_UP_AFTER_S:.0f} s, while the main thread waits on "
                f"that thread (TensorFlow's fit waits so on tf.data's), so the wait is given "
                f"up and what waits on it ends with an error of its own (TensorFlow's names "
                f"KeyboardInterrupt). A hung op? Pass `timeout=` seconds to have its task "
                f"raise WorkerTimeout, naming the sample.")
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
