"""``python -m bench.ops``: runs ``bench/ops/run.py`` as the main module (why: see
``bench/__init__.py``)."""

import runpy

runpy.run_module("bench.ops.run", run_name="__main__", alter_sys=True)
