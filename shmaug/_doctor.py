"""``shmaug.doctor()``: what decides a run's speed and its pixels in this environment, as
``shmaug doctor`` prints it, for a run's own records."""

from __future__ import annotations


def doctor() -> dict[str, str]:
    """The facts ``shmaug doctor`` prints, by name: shmaug's, Python's, numpy's, OpenCV's
    (and its CPU kernels), Pillow's and the JPEG decoder's versions, the cores and shared
    memory. Versions of these change pixels (see Determinism): log it with a run's seed to
    know later what made it, e.g. ``wandb.config.update(shmaug.doctor())``."""
    from .memory.store import shm_report
    from .sources.images.decode import decoder_report

    return {**decoder_report(), "shared memory": shm_report()}
