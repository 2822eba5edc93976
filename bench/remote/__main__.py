"""``python -m bench.remote``: runs ``bench/remote/run.py`` as the main module (why: see
``bench/__init__.py``)."""

import runpy

runpy.run_module("bench.remote.run", run_name="__main__", alter_sys=True)
