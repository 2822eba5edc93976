"""What the pool reports about its workers: the error a failed, dead or overdue task becomes
for the consumer, and the warning for a task that runs far longer than tasks take.

The pool (``pool.py``) decides when; this module only words it, with the fix, and finds the
stalled worker from the status block. ``as_error`` is what the consumer's side (the prefetch,
the probe) calls on a result that is not a success.
"""

from __future__ import annotations

from ... import platform
from ...errors import WorkerDied, WorkerTimeout, rebuild
from .status import StatusBlock
from .wire import Died, Done, Failed, Probed, Result, TimedOut

MAX_DEATHS_PER_TASK = 3  # a task that kills this many workers is reported, not retried
# With no `timeout`, a task that has run this long, and this many times the average task, is
# logged once (a hung op), and left running.
STALL_MIN_S = 60.0
STALL_FACTOR = 50.0


def as_error(result: Result, timeout: float | None) -> BaseException:
    """The exception for a task result that is not a success: failed, died or timed out."""
    match result:
        case Failed(record=record):
            return rebuild(record)
        case Died(worker_id=wid, exitcode=code, sample_index=index):
            return describe_death(wid, code, index)
        case TimedOut(worker_id=wid, sample_index=index):
            return describe_timeout(wid, index, float(timeout or 0))
        case Done() | Probed():  # pragma: no cover
            raise AssertionError(f"not an error result: {result!r}")


def describe_death(wid: int, code: int | None, index: int) -> WorkerDied:
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    return WorkerDied(
        f"shmaug worker {wid} died ({how}) while processing sample index {index}; "
        f"{MAX_DEATHS_PER_TASK} workers in all died running that task. The op likely crashes "
        f"the interpreter on this sample "
        f"(a segfault in native code, or os._exit). Fix: run with `workers=0` to debug it "
        f"in this process.",
        worker_id=wid,
        exitcode=code,
        sample_index=index,
    )


def describe_startup_failure(wid: int, code: int | None, start_method: str,
                             retries: int = 0, replacing: bool = False) -> WorkerDied:
    """``replacing``: the pool had started, so what fails now is what changed since."""
    again = f" (and {retries} replacement(s) in a row before it)" if retries else ""
    near = platform.limits_met()
    if replacing:
        return WorkerDied(
            f"shmaug worker {wid} exited with code {code} before it was ready{again}, "
            f"replacing one that had worked: a limit of this process is met now, or what a "
            f"worker reads as it starts has changed since the pool started (its error is "
            f"printed above by the worker), e.g. a "
            f"memory-mapped `x` file truncated or rewritten (\"mmap length is greater than "
            f"file size\"), or a module of your ops edited or removed. Fix: leave the "
            f"dataset's files and the ops' modules as they are while a loader reads them "
            f"(write a new file and make a new loader), then run again.{near}",
            worker_id=wid,
            exitcode=code,
        )
    hint = ""
    if start_method != "fork":
        hint = (
            f" With start_method={start_method!r} a worker re-imports the modules "
            f"that define your ops (and your main script when an op is defined there): they "
            f"must be importable files (a notebook's or `python -c`'s code goes by value), "
            f"and the script must guard its work with `if __name__ == \"__main__\":`."
        )
    fix = ("make the augmentation importable there, or run with start_method='fork' where "
           "available, or workers=0 to debug in this process" if start_method != "fork" else
           "read the worker's error above (an op's module that fails to import, or a limit of "
           "this process met), or run with workers=0 to debug in this process")
    return WorkerDied(
        f"shmaug worker {wid} exited with code {code} before it was ready{again}, so the pool "
        f"cannot start (its error, if any, is printed above by the worker).{hint} Fix: "
        f"{fix}.{near}",
        worker_id=wid,
        exitcode=code,
    )


def describe_timeout(wid: int, index: int, timeout: float) -> WorkerTimeout:
    return WorkerTimeout(
        f"A task in shmaug worker {wid} ran longer than `timeout`={timeout} s, on sample index "
        f"{index}. The worker was killed and replaced. Fix: find why the op stalls on that "
        f"sample (try it with `workers=0`), or raise `timeout`.",
        worker_id=wid,
        sample_index=index,
    )


def stalled(status: StatusBlock, owing: dict[int, float],
            now: float) -> tuple[int, float, float, bool] | None:
    """The first of the workers owing tasks (``owing``: its id, since when it owes its next)
    whose task has run ``STALL_MIN_S`` and ``STALL_FACTOR`` times as long as the average task,
    or which, ready, has not taken its next for as long: (its id, the seconds, the average
    task's seconds, whether between tasks); None when none has. Between tasks, a worker is
    stopped (SIGSTOP) or stuck outside any op: its queued tasks wait on it in silence."""
    done = status.tasks_done()
    usual = status.busy_total() / done if done else 0.0
    limit = max(STALL_MIN_S, STALL_FACTOR * usual)
    for wid, since in owing.items():
        row = status.row(wid)
        if not row.idle and now - row.started > limit:
            return wid, now - row.started, usual, False
        if row.idle and row.ready and now - since > limit:
            return wid, now - since, usual, True
    return None


def stall_warning(wid: int, pid: int | None, op: str, index: int | None, ran: float,
                  usual: float) -> str:
    """The warning for a stalled worker: in ``op`` on sample ``index``, or between tasks
    (``index`` None)."""
    where = f"in {op} on sample index {index}" if index is not None else (
        "between tasks, with tasks queued for it")
    if pid is not None and _stopped(pid):  # a stalled node, a debugger: not the op's doing
        return (f"shmaug worker {wid} (pid {pid}) is stopped (state T: SIGSTOP, SIGTSTP or a "
                f"debugger) {where}, for {ran:.0f} s now, while a task "
                f"takes {usual:.3f} s on average; it is left so, and the pass waits for it. "
                f"`kill -CONT {pid}` resumes it; pass `timeout=` seconds to have a task that "
                f"takes longer raise WorkerTimeout (its worker is replaced).")
    if index is None:
        return (f"shmaug worker {wid} (pid {pid}) has not taken its next task for {ran:.0f} "
                f"s, while a task takes {usual:.3f} s on average; the pass waits for it. "
                f"Something in the worker outside the ops holds it (a thread an op started, "
                f"a library's exit hook): try the ops with workers=0, or look at it with "
                f"`py-spy dump --pid {pid}`.")
    return (f"shmaug worker {wid} (pid {pid}) has been running {op} on sample index {index} "
            f"for {ran:.0f} s, while a task takes {usual:.3f} s on average; it is left running. "
            f"If the op hangs on that sample, try it with workers=0; pass `timeout=` seconds to "
            f"have a task that runs longer raise WorkerTimeout (its worker is replaced).")


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal or traced (Linux's /proc; False
    elsewhere, or where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False
