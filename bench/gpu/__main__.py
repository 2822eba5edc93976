"""``python -m bench.gpu``: runs ``bench/gpu/run.py`` as the main module (why: see
``bench/__init__.py``)."""

import runpy

runpy.run_module("bench.gpu.run", run_name="__main__", alter_sys=True)
