"""The bench commands as ``python -m`` runs them, in this process (``runpy``): their --help,
and a results folder they cannot make, refused before anything is measured."""

from __future__ import annotations

import re
import sys
import time

import pytest

from tests._helpers import TIME_SCALE
from tests.integration._smoke import ROOT


def _run_as_main(module, argv, capsys, monkeypatch, code=None):
    """``python -m module *argv`` in this process, as the interpreter runs it (runpy, as
    ``__main__``, with its argv): its stdout, after the SystemExit it must end with (``code``,
    or any failure when None). Saves the second or more a new interpreter costs."""
    import runpy

    monkeypatch.setattr(sys, "argv", [module, *argv])
    monkeypatch.chdir(ROOT)
    # As a fresh `python -m` finds them, not yet run: the module, and what a package's
    # __main__.py runs as the main module in turn (its run.py).
    for name in (module, f"{module}.__main__", f"{module}.run"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(SystemExit) as ended:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    said = capsys.readouterr()
    if code is None:
        assert ended.value.code not in (0, None), said.err[-2000:]
        message = ended.value.code if isinstance(ended.value.code, str) else said.err
        assert "cannot write results to" in message, message[-2000:]
    else:
        assert ended.value.code in (code, None if code == 0 else code), said.err[-2000:]
    return said.out


@pytest.mark.parametrize("script", [
    ["-m", "bench.gpu", "all", "--quick", "--out", "{out}"],
    ["-m", "bench.ops", "--quick", "--out", "{out}/ops.json"],
    ["-m", "bench.ops", "--w1", "--quick", "--out", "{out}/w1.json"],
    ["-m", "bench.ops", "--keras", "--quick", "--out", "{out}/keras.json"],
    ["-m", "bench.ops", "--targets", "--quick", "--out", "{out}/targets.json"],
    ["-m", "bench.engine", "--quick", "--out", "{out}"],
    ["-m", "bench.files", "--quick", "--out", "{out}"],
    ["-m", "bench.files.imagenet", "--quick", "--out", "{out}"],
    ["-m", "bench.files.coco", "--quick", "--out", "{out}"],
    ["-m", "bench.recycle", "--quick", "--out", "{out}"],
    ["-m", "bench.wait_trace", "--quick", "--out", "{out}/trace.json"],
    ["-m", "bench.remote", "--quick", "--out", "{out}"],
    ["-m", "bench.records.locality", "--quick", "--out", "{out}"],
    ["-m", "bench.records.locality_cache", "--quick", "--out", "{out}"],
    ["-m", "bench", "--quick", "--out", "{out}"],
])
def test_a_bench_script_makes_its_output_folder_before_it_measures(script, tmp_path, capsys,
                                                                   monkeypatch):
    """A folder it cannot make (here: under a file) fails at once, with nothing measured.
    Each command runs in this process, as ``python -m`` runs it (``_run_as_main``); every one
    also runs as a process of its own in its smoke test (test_bench_smoke.py,
    test_bench_gpu_smoke.py)."""
    (tmp_path / "a_file").write_text("")
    out = str(tmp_path / "a_file" / "results")
    args = [a.format(out=out) for a in script]
    assert args[0] == "-m"
    began = time.monotonic()
    said = _run_as_main(args[1], args[2:], capsys, monkeypatch)
    assert not said.strip(), said[-2000:]  # no table: nothing was measured
    assert time.monotonic() - began < 30 * TIME_SCALE


@pytest.mark.parametrize("module", ["bench", "bench.engine", "bench.ops", "bench.files",
                                    "bench.files.imagenet", "bench.files.coco",
                                    "bench.files.memory",
                                    "bench.records", "bench.records.index",
                                    "bench.records.locality", "bench.records.locality_cache",
                                    "bench.remote", "bench.remote.cache_space",
                                    "bench.gpu", "bench.recycle",
                                    "bench.wait_trace", "bench.soak", "bench.autoworkers"])
def test_bench_help_names_the_command_and_no_issue_number(module, capsys, monkeypatch):
    """Run as ``python -m`` runs it (runpy, ``__main__``, its argv), in this process: a new
    interpreter per command cost a second or more each; every command here also runs as a
    process of its own in its smoke test (test_bench_smoke.py, test_bench_gpu_smoke.py)."""
    out = _run_as_main(module, ["--help"], capsys, monkeypatch, code=0)
    assert not re.search(r"\b[Ii]ssue \d", out), out
    # A benchmark's __main__.py runs its run.py: neither file may stand for the command.
    assert "__main__.py" not in out and "run.py" not in out, out


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is TerminateProcess there")
def test_a_bench_run_terminated_takes_its_measuring_child_with_it(tmp_path):
    """`timeout 300 python -m bench` (SIGTERM) left the child measuring, with its workers
    and their shared memory, running after the parent was gone."""
    import signal
    import subprocess

    import psutil

    script = tmp_path / "parent.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from bench.common.harness import run_json\n"
        "run_json([sys.executable, '-c', 'import time; print(1, flush=True); "
        "time.sleep(120)'], 300)\n")
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60 * TIME_SCALE
        while not psutil.Process(parent.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = psutil.Process(parent.pid).children()[0]
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(30 * TIME_SCALE) == 128 + signal.SIGTERM
        child.wait(30 * TIME_SCALE)  # (psutil.TimeoutExpired where it outlived its parent)
    finally:
        if parent.poll() is None:
            parent.kill()
