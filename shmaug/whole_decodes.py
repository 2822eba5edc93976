"""Photos decoded whole where a decode-time crop would have decoded only its window, counted.

Why: the decode-time crop (``shmaug.deferred``) is a speed promise, and each path that falls
back to a whole decode keeps the batches right but costs a full decode per photo. None may do
so silently: each counts here, by reason, in the process that decodes; a worker's runner hands
its counts to the loader (the workers' status block), whose ``stats()["whole_decodes"]`` shows
them and which logs each reason once, the first time it is seen.
"""

from __future__ import annotations

REASONS: dict[str, str] = {
    "on_error_skip": "on_error='skip' must read a JPEG that is cut short (no end marker) "
                     "or damaged before the op does, where it can be stood in for",
    "override": "the Sequence's augment override read the photo's pixels itself before "
                "calling super().augment(image, rng), which would have decoded only the window",
    "turbo_refused": "libjpeg-turbo refused the JPEG (damaged in a way OpenCV reads past, "
                     "such as a stray marker): OpenCV decoded it whole, at the same DCT scale",
}

_counts = dict.fromkeys(REASONS, 0)


def count(reason: str) -> None:
    """One whole decode, for ``reason`` (a key of ``REASONS``), in this process."""
    _counts[reason] += 1


def counts() -> tuple[int, ...]:
    """This process's counts so far, in ``REASONS``' order."""
    return tuple(_counts.values())


def summary(counts: tuple[float, ...]) -> dict[str, int]:
    """``counts`` (in ``REASONS``' order) by reason, the reasons never seen left out."""
    return {reason: int(n) for reason, n in zip(REASONS, counts) if n}


def message(reason: str) -> str:
    """The log line for the first whole decode of ``reason``."""
    return (f"shmaug decoded a photo whole instead of the window its decode-time crop "
            f"takes, because {REASONS[reason]}. The batches are right; each such photo costs "
            f"a full decode (stats()['whole_decodes'] counts them).")
