"""``python -m bench.ray``: what going through Ray costs (shmaug.ray.Workers).

- ``__main__``: the two measurements: the trainer's CPU per MB of batches arriving through
  Ray's object store, shmaug's local ring and Ray Data's ``iter_batches``; and the images/s of
  one Ray node of 2 CPUs against local workers on the same 2 CPUs.

The op lives here, not in ``__main__``: a Ray node imports it by name.
"""

import numpy as np


def copy_op(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Nothing to augment but a copy: the batch's bytes are all there is to move."""
    return image
