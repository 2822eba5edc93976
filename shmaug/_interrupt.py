"""Ctrl-C ends a ``shmaug`` command, wherever the signal lands (the command line only; in a
user's program, ``engine.handoff.presses`` notes presses the same way).

The kernel hands a process-directed SIGINT to any thread that does not block it. Python's
handler then only flags it, and raises ``KeyboardInterrupt`` when the *main* thread next runs
Python code. With JAX, TensorFlow or a ``multiprocessing.Pool`` around, the signal often lands
on one of their threads while the main thread waits in C for a result that, once Ctrl-C has
reached the workers too, never comes (seen: the demo on JAX waiting forever on Keras'
``PyDataset`` pool). So a watcher thread, woken through ``signal.set_wakeup_fd``, delivers the
press to the main thread itself (its wait then ends with EINTR and the usual
``KeyboardInterrupt``), and if the command is still running ``grace_s`` later, it says so in the
command's one line and ends the process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

_REDELIVER_AFTER_S = 0.3  # the main thread normally raises KeyboardInterrupt well before this
_SET: list[int] = []  # the wakeup fd ``always_ends`` set, while set (none in a forked child)


def _forget_in_child() -> None:
    """A forked child inherits the wakeup fd: a SIGINT for it alone would write to the
    parent's watcher, which would end the parent's command."""
    if _SET:
        _SET.clear()
        with suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


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
    me = os.getpid()

    def raise_in_main(signum: int, frame: object) -> None:
        # once: a second press (or our redelivery) must not cut cleanup; and not in a child
        # forked meanwhile, where the press reaches a worker before it ignores Ctrl-C (CI saw
        # one inside CPython's own after-fork hook print a KeyboardInterrupt traceback)
        if seen.is_set() or os.getpid() != me:
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
        _SET[:] = [writer.fileno()]
        signal.signal(signal.SIGINT, raise_in_main)
        thread = threading.Thread(target=_watch, name="shmaug-ctrl-c", daemon=True,
                                  args=(reader, seen, done, grace_s, on_timeout, status))
        thread.start()
        yield
    finally:
        done.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if previous is not None:
            _SET.clear()
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
    exit_now(status)


def exit_now(status: int) -> None:
    """End the process with ``status`` at once, and the worker processes it started with it.

    Keras' ``PyDataset`` pool workers ignore Ctrl-C in the demo and the bench; left running
    past ``os._exit``, one finishing its batch met the closed pipe and printed a BrokenPipe
    traceback under the command's one line (seen in CI, on JAX)."""
    for child in multiprocessing.active_children():
        with suppress(OSError, ValueError):  # ended meanwhile
            child.kill()
    os._exit(status)

