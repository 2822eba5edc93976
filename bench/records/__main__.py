"""``python -m bench.records``: runs ``bench/records/run.py`` as the main module (why: see
``bench/__init__.py``)."""

import runpy

runpy.run_module("bench.records.run", run_name="__main__", alter_sys=True)
