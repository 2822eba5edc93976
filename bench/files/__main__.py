"""``python -m bench.files``: runs ``bench/files/run.py`` as the main module (why: see
``bench/__init__.py``)."""

import runpy

runpy.run_module("bench.files.run", run_name="__main__", alter_sys=True)
