"""shmaug's benchmarks and studies; ``bench/README.md`` draws the layout and says how to run each.

A benchmark is a package (``suite``, ``engine``, ``ops``, ``files``, ``records``, ``remote``,
``gpu``) run as ``python -m bench.<name>`` (the suite: ``python -m bench``); a study is one
module here (``python -m bench.<study>``); ``common`` holds what they share.

A benchmark's ``__main__.py`` runs its ``run.py`` through ``runpy`` as the main module instead
of importing its ``main``: multiprocessing re-imports the main module in spawned workers only
when it is not a package's ``__main__``, and what those workers import is part of what a
benchmark measures. So ``run.py`` stays the main module, as ``bench/<name>.py`` was when each
benchmark was one module.
"""
