"""``python -m bench``: the benchmark suite (``bench/suite.py``); ``--help`` lists the options."""

import sys

from bench.suite import main

if __name__ == "__main__":
    sys.exit(main())
