"""Section 4 of the engine benchmark: time to the first batch and worker memory, TF in ``__main__``.

A script is written to a temp folder that imports TensorFlow at its top, like a user's training
script, then times ``shmaug.Loader`` (or the Keras PyDataset + adapter) to the first batch with
2 workers and reads each worker's USS / PSS, under spawn and under fork (alternating which
contender goes first). Targets: shmaug under spawn <= 1.5 s; < 80 MB USS per worker.
"""

from __future__ import annotations

import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.harness import Outcome, progress, run_json, summarize
from bench.common.report import Row, fmt_num


STARTUP_SCRIPT = textwrap.dedent('''
    """Main script of a user who imported TensorFlow first (written by bench/engine/startup.py)."""
    import tensorflow  # noqa: F401  -- the point of this probe
    import json, multiprocessing, sys, time

    import keras
    import numpy as np
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    import shmaug
    from bench.common.harness import guarded, pool_children, report_json, wait_gone, worker_memory
    from shmaug.sources.glyphs import render_glyphs

    N, BS, SEED = 1024, 64, 0


    class GlyphDataset(keras.utils.PyDataset):
        """What a Keras user writes: gather and augment each sample in __getitem__."""

        def __init__(self, x, y, batch_size, augment, **kwargs):
            super().__init__(**kwargs)
            self.x, self.y, self.bs, self.augment = x, y, batch_size, augment

        def __len__(self):
            return -(-len(self.x) // self.bs)

        def __getitem__(self, i):
            lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
            out = np.empty((hi - lo, *self.x.shape[1:]), self.x.dtype)
            for j in range(lo, hi):
                out[j - lo] = self.augment(self.x[j], np.random.default_rng([SEED, 0, j]))
            return out, self.y[lo:hi]


    def probe_shmaug(method, x, y, declared=False):
        # declared: output shape given, so the Loader runs no OpenCV here before forking
        out = dict(output_shape=x.shape[1:], output_dtype=x.dtype) if declared else {}
        t0 = time.perf_counter()
        loader = shmaug.Loader(x, y, batch_size=BS, augment=shmaug.presets.glyph_distort(),
                               workers=2, seed=SEED, start_method=method, **out)
        try:
            result = {}
            for i, _ in enumerate(loader):
                if i == 0:
                    result["first_batch_s"] = time.perf_counter() - t0
                    result["mem_first"] = worker_memory(loader.pids)
                if i == len(loader) // 2:
                    result["mem_mid"] = worker_memory(loader.pids)
            return result
        finally:
            loader.close()


    def probe_keras(method, x, y):
        before = set(pool_children())
        t0 = time.perf_counter()
        ds = GlyphDataset(x, y, BS, shmaug.presets.glyph_distort(), workers=2,
                          use_multiprocessing=True)
        adapter = PyDatasetAdapter(ds, shuffle=False)
        adapter.on_epoch_begin()
        pids = []
        try:
            out = {}
            for i, _ in enumerate(adapter.get_numpy_iterator()):
                if i == 0:
                    out["first_batch_s"] = time.perf_counter() - t0
                    pids = [p for p in pool_children() if p not in before]
                    out["mem_first"] = worker_memory(pids)
                if i == len(ds) // 2:  # by the last batch its workers are already leaving
                    out["mem_mid"] = worker_memory(pids)
            return out
        finally:
            adapter.on_epoch_end()
            wait_gone(pids, 10)


    if __name__ == "__main__":
        method, order, timeout = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3])
        multiprocessing.set_start_method(method, force=True)  # Keras' pool follows this
        x, y, _ = render_glyphs(N, 64, seed=SEED)
        probes = {"shmaug": probe_shmaug, "keras": probe_keras,
                  "shmaug_declared": lambda m, x, y: probe_shmaug(m, x, y, declared=True)}
        result = {}
        for name in order:
            out = guarded(lambda: probes[name](method, x, y), timeout)
            result[name] = {"status": out.status, "error": out.error, **(out.value or {})}
        report_json(result)
''')


def section_startup(quick: bool) -> list[Row]:
    repeats = 1 if quick else 3
    methods = ("spawn", "fork")
    # A fork probe that hangs (see section_scaling's NOTE) costs its whole timeout: keep it
    # short; spawn needs long enough for Keras' workers to import TensorFlow.
    contender_timeout = {"spawn": 45.0 if quick else 60.0, "fork": 15.0 if quick else 30.0}
    hard_timeout = 150.0
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="shmaug-bench-") as tmp:
        script = Path(tmp) / "tf_user_script.py"
        script.write_text(STARTUP_SCRIPT)
        jobs = []
        for r in range(repeats):
            for method in methods:
                order = "shmaug,keras" if r % 2 == 0 else "keras,shmaug"
                if method == "fork":  # first, while OpenCV has not yet run in that process
                    order = "shmaug_declared," + order
                jobs.append((method, [sys.executable, str(script), method, order,
                                      str(contender_timeout[method])]))
        bar = progress(len(jobs), "startup")

        def one(job: tuple[str, list[str]]) -> tuple[str, Outcome]:
            out = run_json(job[1], hard_timeout)
            bar.update()
            return job[0], out

        # Quick mode is a smoke run: both start methods at once to stay well under a minute.
        with ThreadPoolExecutor(max_workers=2 if quick else 1) as ex:
            outcomes = list(ex.map(one, jobs))
        bar.close()
    for method, out in outcomes:
        for who in ("shmaug", "keras", "shmaug_declared"):
            if who == "shmaug_declared" and method != "fork":
                continue
            key = (method, who)
            if not out.ok:
                errors.setdefault(key, []).append(f"{out.status}: {out.error}")
                continue
            res = out.value.get(who, {})
            if res.get("status") != "ok":
                errors.setdefault(key, []).append(f"{res.get('status')}: {res.get('error')}")
                continue
            results.setdefault(key, []).append(res)
    sec = "4 startup, TF imported in __main__, 2 workers, glyph_distort"
    rows = []
    labels = (("shmaug", "shmaug Loader"), ("keras", "keras PyDataset(mp)"),
              ("shmaug_declared", "shmaug Loader, output declared"))
    for method in methods:
        for who, label in labels:
            if who == "shmaug_declared" and method != "fork":
                continue
            key = (method, who)
            name = f"{label}, {method}"
            runs = results.get(key, [])
            errs = errors.get(key, [])
            if not runs:
                status = f"{len(errs)}/{repeats} runs failed, {errs[-1] if errs else 'no result'}"
            elif errs:
                status = f"ok {len(runs)}/{repeats} runs; {len(errs)} failed: {errs[-1]}"
            else:
                status = "ok"
            first = summarize([x["first_batch_s"] for x in runs]) if runs else None
            target = ""
            if who.startswith("shmaug") and first is not None and method == "spawn":
                target = f"<= 1.5 s: {'met' if first.median <= 1.5 else 'MISSED'}"
            rows.append(Row(sec, name, "time to first batch", "s", first, status,
                              target=target, extra={"runs": runs}))
            for when, metric in (("mem_first", "USS/worker after 1st batch"),
                                 ("mem_mid", "USS/worker mid-epoch")):
                uss = [max(w["uss"] for w in x[when]) for x in runs if x.get(when)]
                pss = [max(w["pss"] for w in x[when]) for x in runs if x.get(when)]
                nworkers = [len(x[when]) for x in runs if x.get(when)]
                st = summarize(uss) if uss else None
                tgt = ""
                if who.startswith("shmaug") and st is not None:
                    tgt = f"< 80 MB: {'met' if st.median < 80 * 1e6 / 2**20 else 'MISSED'}"
                note = (f"max over {max(nworkers)} workers; PSS {fmt_num(float(np.median(pss)))} MiB"
                        if uss else "")
                rows.append(Row(sec, name, metric, "MiB", st, status,
                                  target=tgt, note=note))
    return rows
