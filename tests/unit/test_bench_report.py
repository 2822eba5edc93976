"""The suite report's tables put numbers in number columns (bench/suite/report.py). No process
is started and nothing is measured: the tables are built from made-up results."""

from __future__ import annotations

import re

from bench.suite import report as suite_report


def run(contender: str, workers: int, status: str = "ok", rates=(1000.0,)) -> dict:
    spec = {"workload": "W1", "impl": "pil", "contender": contender, "workers": workers}
    return {"spec": spec, "status": status, "rates": list(rates) if status == "ok" else [],
            **({"error": "ran past 60 s"} if status != "ok" else {})}


def cells(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")][2:]
            for line in table.splitlines() if line.startswith("| ") and "contender" not in line]


def test_a_scaling_cell_is_a_number_or_empty_never_a_status():
    # Without contender 1's run a cell read "ok" instead of its images/s (issue 36).
    results = [run("shmaug_loader", 1), run("shmaug_loader", 2, rates=(1800.0,)),
               run("pool", 1), run("pool", 2, status="timeout")]
    table = suite_report.scaling_table(results, 2)
    rows = cells(table)
    assert rows == [["1,000", ""], ["1,000", "1,800"]], table
    assert "Not measured: 3. Pool + RawArray recipe (fork), pil ops, N=2: timeout" in table
    assert "no efficiency" in table
    with_single = suite_report.scaling_table([*results, run("keras_single", 1, rates=(1000.0,))], 2)
    assert cells(with_single)[1] == ["1,000 (100%)", "1,800 (90%)"], with_single
    assert "no efficiency" not in with_single
    for row in cells(with_single) + rows:
        for cell in row:
            assert cell in ("", "—") or re.fullmatch(r"[\d,.]+( \(\d+%\))?", cell), cell


def test_the_suites_arguments_are_checked_and_render_writes_beside_its_json(tmp_path, capsys):
    """``--repeats 0`` became the default, ``--timeout -5`` killed every run, ``--impls foo``
    was ignored, and ``--render x.json`` overwrote the committed results."""
    import json

    import pytest

    from bench.suite import run as suite_run

    for bad in (["--repeats", "0"], ["--jobs", "-1"], ["--timeout", "-5"], ["--workers", "-2"],
                ["--impls", "foo"]):
        with pytest.raises(SystemExit) as info:
            suite_run.parse(["--quick", *bad])
        assert info.value.code == 2 and bad[0] in capsys.readouterr().err
    saved = tmp_path / "suite.json"
    assert suite_run.parse(["--render", str(saved)]).out == str(tmp_path)
    saved.write_text(json.dumps({"results": []}))
    assert suite_run.main(["--render", str(saved)]) == 2
    assert "is not a suite.json a run wrote" in capsys.readouterr().err
