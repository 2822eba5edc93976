"""``python -m shmaug``: the ``shmaug`` command, where its script is not on the PATH."""

import sys

from .cli import main

if __name__ == "__main__":  # (not when a module walker or pydoc imports it)
    sys.exit(main())
