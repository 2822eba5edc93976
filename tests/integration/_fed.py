"""A Sequence that writes down what it feeds, for the subprocess tests of fit, resume and
tf.distribute: one JSON line per batch served inside an epoch."""

from __future__ import annotations

import hashlib
import json
import os

import shmaug


class Recorded(shmaug.Sequence):
    """Appends [epoch tag, sample indices, content hash of each row] per batch a pass took
    (not the looks: signature probes) to ``path`` (O_APPEND: a SIGKILL loses nothing
    written). ``keras_epoch`` is the tag, set by the caller at each epoch; -1 (before the
    first: a batch drawn to build the model) records nothing."""

    def __init__(self, *args, path, **kwargs):
        super().__init__(*args, **kwargs)
        self.path = path
        self.keras_epoch = -1

    def __getitem__(self, index):
        batch = super().__getitem__(index)
        (epoch, planned, in_order), took = self._runtime.passes.last  # a pass took it (a look: no)
        if took and self.keras_epoch >= 0:  # not a batch drawn to build the model
            x = batch[0]
            ids = self.loader.indices(planned, epoch=epoch, in_order=in_order)
            line = [self.keras_epoch, ids.tolist(),
                    [hashlib.sha1(row.tobytes()).hexdigest()[:16] for row in x]]
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            finally:
                os.close(fd)
        return batch


def read(path):
    """epoch tag -> {sample id: hash} (asserting no sample twice in an epoch), and the tags
    in the order they were first fed."""
    out: dict[int, dict[int, str]] = {}
    order: list[int] = []
    with open(path) as f:
        for line in f:
            epoch, ids, hashes = json.loads(line)
            if epoch not in out:
                out[epoch] = {}
                order.append(epoch)
            for i, h in zip(ids, hashes):
                assert i not in out[epoch], f"sample {i} fed twice in epoch {epoch}"
                out[epoch][i] = h
    return out, order


def jitter(image, rng):
    """A small augmentation of float images in [0, 1]: Gaussian noise, sigma 0.05."""
    return (image + rng.normal(0.0, 0.05, image.shape)).astype(image.dtype)
