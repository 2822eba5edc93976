"""An op whose module warns as it is imported (a deprecated import in a user's op module)."""

from __future__ import annotations

import warnings

warnings.warn("a module of ops, imported", FutureWarning, stacklevel=1)


def identity(image, rng):
    return image
