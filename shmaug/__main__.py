"""``python -m shmaug``: the ``shmaug`` command, where its script is not on the PATH."""

import sys

from .cli import main

sys.exit(main())
