"""``python -m bench.engine``: runs ``bench/engine/run.py`` as the main module (why: see
``bench/__init__.py``)."""

import runpy

runpy.run_module("bench.engine.run", run_name="__main__", alter_sys=True)
