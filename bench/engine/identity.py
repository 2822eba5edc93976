"""Section 1 of the engine benchmark: GB/s an identity pipeline hands to the consumer.

``shmaug.Loader(workers=2)`` (copying out, and lending the slot with ``copy=False``) against
the memory-bandwidth ceiling in one process (``np.copyto`` into one buffer, and a fancy-index
gather) and ``keras.utils.PyDataset(workers=2, use_multiprocessing=True)``, on 224x224x3 uint8,
batch 64. Ratios are per round (paired), then the median; the target is shmaug >= 0.5x the
faster ceiling.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench.common.harness import paired_ratio, summarize
from bench.common.report import Row, fmt_num
from bench.engine.contenders import (
    CopyGather, CopyTo, KerasRun, ShmaugRun, first_batch_ms, identity, interleave, steady_rate,
)

GB = 1e9


def section_identity(quick: bool) -> list[Row]:
    n, bs = (256, 64) if quick else (2048, 64)
    rounds, timeout = (1, 60.0) if quick else (9, 90.0)
    x = np.random.default_rng(0).integers(0, 256, (n, 224, 224, 3), dtype=np.uint8)
    batch_bytes = [float(x[lo:lo + bs].nbytes) for lo in range(0, n, bs)]
    contenders: dict[str, Callable[[], Any]] = {
        "copy ceiling: np.copyto": lambda: CopyTo(x, bs),
        "copy ceiling: x[idx] gather": lambda: CopyGather(x, bs),
        # Built before Keras is imported: its workers fork from a process without TensorFlow.
        "shmaug Loader(workers=2)": lambda: ShmaugRun(x, bs, identity, 2),
        # copy=False lends the shared slot instead of copying it out (for consumers that copy
        # anyway, e.g. to a device); the workers' copy is then the only one.
        "shmaug Loader(workers=2, copy=False)": lambda: ShmaugRun(x, bs, identity, 2, copy=False),
        "keras PyDataset(workers=2, mp)": lambda: KerasRun(x, bs, identity, 2),
    }
    runs, status, notes = interleave(contenders, rounds, timeout, "identity")
    rates = {k: [steady_rate(t, batch_bytes) / GB for t in v] for k, v in runs.items()}
    sec = "1 identity 224x224x3 u8, batch 64"
    ceil_names = ["copy ceiling: np.copyto", "copy ceiling: x[idx] gather"]
    rows = []
    for name in contenders:
        ok = status[name] == "ok" and rates[name]
        stats = summarize(rates[name]) if ok else None
        ratio_txt, target, extra = "", "", {}
        if ok and name not in ceil_names[:1]:
            parts = []
            for ceil, short in zip(ceil_names, ("copyto", "gather")):
                if status[ceil] == "ok" and rates[ceil] and ceil != name:
                    pr = paired_ratio(rates[name], rates[ceil])
                    extra[f"ratio_vs_{short}"] = pr.to_dict()
                    parts.append(f"{pr.median:.2f}x {short}")
            ratio_txt = ", ".join(parts)
        if ok and name.startswith("shmaug"):
            best = [extra[k]["median"] for k in ("ratio_vs_copyto", "ratio_vs_gather") if k in extra]
            if best:
                worst = min(best)  # judged against the faster ceiling
                target = f">= 0.50x copy: {'met' if worst >= 0.5 else 'MISSED'} ({worst:.2f}x)"
        note = ""
        if runs[name]:
            fb = first_batch_ms(runs[name])
            note = f"first batch {fmt_num(fb.median)} ms"
            extra["first_batch_ms"] = fb.to_dict()
        if name in notes:
            note += "; " + notes[name]
        rows.append(Row(sec, name, "delivered", "GB/s", stats, status[name], ratio_txt,
                          target, note, extra))
    return rows
