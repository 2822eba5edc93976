"""``python -m bench``: the benchmark suite (``bench/suite/run.py``); ``--help`` lists the options."""

import sys

from bench.suite.run import main

if __name__ == "__main__":
    sys.exit(main())
