"""On a machine with a GPU and many cores: ``Model.fit`` on the GPU fed by shmaug and by Keras'
own workers, and images/s for 1 to (cores - 1) workers.

    python -m bench.gpu scaling --out bench/results/gpu   # shmaug.Loader, workers = 1..cores-1
    python -m bench.gpu fit --out bench/results/gpu       # Model.fit fed three ways (KERAS_BACKEND)
    python -m bench.gpu pinned --out bench/results/gpu    # the ring page-locked or not
    python -m bench.gpu alone --out bench/results/gpu     # W2's ops in k processes, no shmaug
    python -m bench.gpu imagenet --out bench/results/gpu  # JPEGs into ResNet50: shmaug vs timm
    python -m bench.gpu report --out bench/results/gpu    # gpu.md and gpu_scaling.png from the JSON
    python -m bench.gpu all --quick                       # CI's smoke run: tiny, on the CPU

Each section is its own command and writes its own JSON as each figure comes in, so a section
cut short (a device lease is minutes long) keeps what it measured. The workloads are the
suite's (``bench.common.workloads``), with shmaug's ops for every contender:

- **scaling**: W1 (glyphs, batch 256) and W2 (photos 224x224 -> float32, batch 64): images/s
  of ``shmaug.Loader`` (fork) for every worker count, and of Keras ``PyDataset(workers=N,
  use_multiprocessing=True)`` as ``fit`` drives it at a few counts. A run is one warm-up
  epoch, then ``--repeats`` timed epochs, each checked to hold every sample exactly once.
- **fit** (``bench.gpu.fit``): ``Model.fit`` on the GPU, W2 into ResNet50 (224x224, 10
  classes) and W1 into the demo's small CNN, fed by ``shmaug.Sequence``, by ``PyDataset``
  with worker processes (fork) and with threads, each with cores - 1 workers. The figures:
  images/s, the **share of wall time the GPU waits**, ``1 - t_compute / t_fed`` (t_compute:
  the same epochs fed from batches already in RAM), and the GPU's busy share read from NVML
  while the epochs run (when ``pynvml`` is there).
- **alone**: W2's ops with no loader, in 1 and (cores - 1) independent processes, each
  batch into a new array: how the ops scale on the machine without shmaug.
- **imagenet** (``bench.gpu.imagenet``): ImageNet-like JPEGs into ResNet50 under ``fit``,
  shmaug's decode-time random resized crop against timm's transform in a ``DataLoader``.
- **pinned** (``bench.gpu.pinned``): lent W2 batches sent to the GPU from the ring as it is,
  from the ring registered with the driver (page-locked), and through a pinned staging buffer.

Nothing here judges a target: the figures describe a machine this project is lent only now
and then. ``--quick`` runs everything tiny on the CPU (a small CNN in place of ResNet50).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from bench.common.harness import base_parser, deadline, described, prepare_out
from shmaug.platform import cpu_count
from bench.common.report import QUICK, environment, fmt_num, markdown_table, took
from bench.gpu.imagenet import imagenet_table
from bench.gpu.pinned import pinned_table, run_pinned

SCALING_SIZES = {"W1": (32768, 256), "W2": (4096, 64)}  # (images, batch size)
QUICK_SIZES = {"W1": (256, 64), "W2": (32, 16)}
SCALING, FIT, HANDOVER, PINNED, ALONE, IMAGENET = (
    "gpu_scaling.json", "gpu_fit.json", "gpu_handover.json", "gpu_pinned.json",
    "gpu_alone.json", "gpu_imagenet.json")
FEEDERS = ("shmaug_sequence", "keras_fork", "keras_threads")  # bench.gpu.fit's, without Keras
MORE_FEEDERS = ("shmaug_sequence_pageable",)  # only when --feeders names them
HANDED = ("uint8", "bfloat16", "float32", "float32_lent", "sequence")  # handover's variants


def parser() -> Any:
    p = base_parser(described(__doc__), "bench/results/gpu")
    p.add_argument("section", choices=("scaling", "handover", "alone", "fit", "imagenet", "pinned",
                                       "report", "all"))
    p.add_argument("--repeats", type=int, default=None, help="timed epochs per run (default 3)")
    p.add_argument("--workloads", default=None,
                   help="fit: the workloads to run, comma-separated (default W1,W2; --quick: "
                        "W1, as the two run the same code on the CPU: the small CNN for both)")
    p.add_argument("--feeders", default=",".join(FEEDERS),
                   help=f"fit: the feeders to run, comma-separated (default {','.join(FEEDERS)}; "
                        f"also {','.join(MORE_FEEDERS)})")
    p.add_argument("--w2-model", choices=("resnet50", "small"), default="resnet50",
                   help="fit: the model W2 trains (small: the demo's CNN, so the feeding and "
                        "not the GPU is what a W2 fit measures)")
    p.add_argument("--variants", default=",".join(HANDED),
                   help=f"handover: what is handed over, comma-separated (default "
                        f"{','.join(HANDED)})")
    p.add_argument("--counts", default=None,
                   help="handover: worker counts, comma-separated (default 1,4,8,12 and the "
                        "largest)")
    p.add_argument("--imagenet-feeders", default=None,
                   help="imagenet: the feeders, separated by ';' (default: shmaug and timm, "
                        "each with and without RandAugment; also 'shmaug, antialias=False')")
    p.add_argument("--files", type=int, default=0,
                   help="imagenet: JPEGs to write and read per epoch (default 6,144)")
    p.add_argument("--max-workers", type=int, default=None,
                   help="largest worker count (default: usable cores - 1, at least 1)")
    return p


def keras_counts(top: int) -> list[int]:
    """The worker counts Keras' PyDataset is measured at: a few, to put shmaug's curve beside."""
    return sorted({n for n in (1, 4, top) if n <= top})


def save(out: Path, name: str, payload: dict[str, Any]) -> None:
    (out / name).write_text(json.dumps(payload, indent=2) + "\n")


def epoch_rates(epoch: Callable[[], Iterable[Any]], n: int, repeats: int) -> list[float]:
    """One whole warm-up epoch (Keras' enqueuer serves stale batches after a partial one), then
    ``repeats`` timed epochs, each checked to deliver every sample exactly once: images/s each."""
    for _ in epoch():
        pass
    rates = []
    for _ in range(repeats):
        began = time.perf_counter()
        ids = np.concatenate([np.array(yb) for _, yb in epoch()])  # a copy: lent batches are reused
        rates.append(n / (time.perf_counter() - began))
        if not np.array_equal(np.sort(ids), np.arange(n)):
            raise RuntimeError(f"an epoch did not hold each of the {n} samples exactly once")
    return rates


def run_scaling(out: Path, quick: bool, repeats: int, top: int) -> dict[str, Any]:
    from bench.suite import peers
    from bench.common.workloads import WORKLOADS, augment_for, build_data, output_spec

    payload: dict[str, Any] = {"environment": environment(), "quick": quick, "repeats": repeats,
                               "workloads": {}}
    for wl, (n, bs) in (QUICK_SIZES if quick else SCALING_SIZES).items():
        x, ids = build_data(wl, n)
        augment = augment_for(wl, "shmaug")
        _, out_dtype = output_spec(wl, x)
        runs: list[dict[str, Any]] = []
        payload["workloads"][wl] = {"title": WORKLOADS[wl].title, "n": n, "batch_size": bs,
                                    "runs": runs}
        plan = [("shmaug_loader", k) for k in range(1, top + 1)]
        plan += [("keras_fork", k) for k in keras_counts(top)]
        for name, workers in plan:
            run: dict[str, Any] = {"contender": name, "label": peers.REGISTRY[name].label,
                                   "workers": workers, "rates": [], "status": "ok"}
            began = time.perf_counter()
            try:
                with deadline(30 + 8 * n / bs), \
                        peers.running(name, x, ids, bs, augment, out_dtype, workers) as c:
                    run["rates"] = epoch_rates(c.epoch, n, repeats)
            except Exception as exc:  # a failed run is a result; the others still run
                run["status"] = f"{type(exc).__name__}: {exc}"
            rate = f"{np.median(run['rates']):,.0f} images/s" if run["rates"] else run["status"]
            print(f"scaling {wl} {name} workers={workers}: {rate} "
                  f"({time.perf_counter() - began:.1f} s)", flush=True)
            runs.append(run)
            save(out, SCALING, payload)
    return payload


def run_handover(out: Path, quick: bool, repeats: int, top: int,
                 handed: tuple[str, ...] = HANDED, counts: tuple[int, ...] = ()
                 ) -> dict[str, Any]:
    """Where W2's scaling flattens: the same ops delivering uint8 (a quarter of float32's
    bytes), bfloat16 written by the workers (half), float32, float32 lent from the ring
    (``copy=False``, no copy out of it), and float32 read by Keras' adapter from a
    ``Sequence`` as ``fit`` reads it (needs Keras)."""
    import shmaug
    from bench.suite import peers
    from bench.common.workloads import augment_for, build_data

    n, bs = (QUICK_SIZES if quick else SCALING_SIZES)["W2"]
    x, ids = build_data("W2", n)
    to_float = augment_for("W2", "shmaug")

    def loader(augment: Any, copy: bool, dtype: Any = None) -> Callable[[int], Any]:
        return lambda workers: shmaug.Loader(x, ids, batch_size=bs, augment=augment,
                                             workers=workers, seed=0, copy=copy,
                                             output_dtype=dtype)

    def sequence(workers: int) -> Any:
        return peers.running("shmaug_sequence", x, ids, bs, to_float, np.float32, workers)

    every = {"uint8": loader(to_float.fn, True),
             "bfloat16": loader(to_float, True, "bfloat16"), "float32": loader(to_float, True),
             "float32, copy=False": loader(to_float, False),
             "float32, Sequence as fit reads it": sequence}
    variants = {name: start for key, (name, start) in zip(HANDED, every.items())
                if key in handed}
    payload: dict[str, Any] = {"environment": environment(), "quick": quick, "repeats": repeats,
                               "n": n, "batch_size": bs, "runs": []}
    for variant, start in variants.items():
        for workers in sorted({k for k in (counts or (1, 4, 8, 12, top)) if k <= top}):
            run: dict[str, Any] = {"variant": variant, "workers": workers, "rates": [],
                                   "status": "ok"}
            try:
                with deadline(30 + 8 * n / bs), start(workers) as feeder:
                    epoch = feeder.__iter__ if isinstance(feeder, shmaug.Loader) else feeder.epoch
                    run["rates"] = epoch_rates(epoch, n, repeats)
            except Exception as exc:  # a failed run is a result; the others still run
                run["status"] = f"{type(exc).__name__}: {exc}"
            payload["runs"].append(run)
            rate = f"{median(run['rates']):,.0f} images/s" if run["rates"] else run["status"]
            print(f"handover W2 {variant} workers={workers}: {rate}", flush=True)
            save(out, HANDOVER, payload)
    return payload


def _augment_share(x: np.ndarray, lo: int, hi: int, bs: int, start: Any, out: Any) -> None:
    """One process of ``run_alone``: its share of W2's images, batch by batch, timed from
    a common start so the slowest process gives the rate."""
    from threadpoolctl import threadpool_limits

    from bench.common.workloads import augment_for, make_batch

    threadpool_limits(1)  # one thread per process, as a shmaug worker runs (OpenCV: the parent)
    augment = augment_for("W2", "shmaug")
    start.wait()
    began = time.perf_counter()
    for b in range(lo, hi, bs):
        make_batch(x, augment, b, min(b + bs, hi), np.float32)
    out.put(time.perf_counter() - began)


def run_alone(out: Path, quick: bool, repeats: int, top: int) -> dict[str, Any]:
    """W2's ops alone, with no shmaug: in 1 and k independent processes (fork), each on its
    own share of the images, each batch into a new array (as a loop of one's own makes it),
    nothing shared or handed over. How the ops scale on the machine without a loader, to put
    beside ``handover``."""
    import multiprocessing as mp

    import cv2

    from bench.common.workloads import build_data

    n, bs = (QUICK_SIZES if quick else SCALING_SIZES)["W2"]
    x, _ = build_data("W2", n)
    payload: dict[str, Any] = {"environment": environment(), "quick": quick, "repeats": repeats,
                               "n": n, "batch_size": bs, "runs": []}
    ctx = mp.get_context("fork")
    cv2.setNumThreads(1)  # inherited by the forks (set in a fork, it can deadlock)
    for k in sorted({1, top}):
        rates = []
        for _ in range(repeats):
            start, results = ctx.Barrier(k + 1), ctx.Queue()
            share = -(-n // k)
            procs = [ctx.Process(target=_augment_share,
                                 args=(x, i * share, min(n, (i + 1) * share), bs, start, results))
                     for i in range(k)]
            for p in procs:
                p.start()
            start.wait()
            rates.append(n / max(results.get(timeout=600) for _ in procs))
            for p in procs:
                p.join()
        payload["runs"].append({"processes": k, "rates": rates})
        print(f"alone W2 processes={k}: {median(rates):,.0f} images/s", flush=True)
        save(out, ALONE, payload)
    return payload


def alone_table(payload: dict[str, Any]) -> str:
    by = {r["processes"]: median(r["rates"]) for r in payload["runs"]}
    one, top = by.get(1, float("nan")), max(by)
    rows = [[str(k), fmt_num(rate), f"{rate / one:.2f}x", f"{rate / (k * one):.2f}"]
            for k, rate in sorted(by.items())]
    return (f"### W2's ops alone, {payload['n']:,} images in {top} independent processes, each "
            f"batch a new array (no shmaug)"
            f"\n\n" + markdown_table(["processes", "images/s", "÷ 1 process", "of linear"], rows))


# -- the report ------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def scaling_tables(payload: dict[str, Any]) -> str:
    parts = []
    for wl, info in payload["workloads"].items():
        by = {(r["contender"], r["workers"]): r for r in info["runs"]}
        one = median(by.get(("shmaug_loader", 1), {}).get("rates", []))
        rows = []
        for k in sorted({w for _, w in by}):
            s = by.get(("shmaug_loader", k))
            k_run = by.get(("keras_fork", k))
            rate = median(s["rates"]) if s else float("nan")
            keras_rate = median(k_run["rates"]) if k_run else float("nan")
            rows.append([str(k), fmt_num(rate) if s and s["rates"] else (s or {}).get("status", ""),
                         f"{rate / one:.2f}x" if one == one else "",
                         f"{rate / (k * one):.0%}" if one == one else "",
                         (fmt_num(keras_rate) if k_run["rates"] else k_run["status"]) if k_run else "",
                         f"{rate / keras_rate:.2f}x" if k_run and k_run["rates"] else ""])
        parts.append(f"### {wl}: {info['title']}, {info['n']:,} images, batch {info['batch_size']}\n\n"
                     + markdown_table(["workers", "shmaug Loader images/s", "vs 1 worker",
                                         "efficiency", "Keras PyDataset (fork) images/s",
                                         "shmaug ÷ Keras"], rows))
    return "\n\n".join(parts)


def fit_tables(payload: dict[str, Any]) -> str:
    parts = []
    for case in payload["cases"]:
        rows = []
        compute = median(case.get("compute_rates", []))
        for feeder in case["feeders"]:
            ok = bool(feeder["rates"]) and compute == compute
            rate = median(feeder["rates"])
            # the share of an epoch's wall time beyond what the GPU needs for it
            wait = median([max(0.0, 1 - r / compute) for r in feeder["rates"]])
            busy = [b for b in feeder.get("gpu_busy", []) if b is not None]
            alone = median(feeder.get("no_model_rates", []))
            rows.append([feeder["label"], fmt_num(rate) if feeder["rates"] else feeder["status"],
                         f"{rate / compute:.2f}" if ok else "",
                         f"{wait:.0%}" if ok else "",
                         f"{median(busy):.0%}" if busy else "n/a",
                         fmt_num(alone) if alone == alone else "",
                         f"{max(0.0, 1 - alone / compute):.0%}" if alone == alone and ok else ""])
        busy = [b for b in case.get("compute_gpu_busy", []) if b is not None]
        rows.append(["batches already in RAM (the GPU's own pace)", fmt_num(compute), "1.00",
                     "0%", f"{median(busy):.0%}" if busy else "n/a", "", ""])
        parts.append(f"### {case['workload']} into {case['model']}: {case['n']:,} images per "
                     f"epoch, batch {case['batch_size']}, {case['workers']} workers\n\n"
                     + markdown_table(["fed by", "images/s", "of the GPU's pace",
                                         "GPU waits (share of wall time)", "GPU busy (NVML)",
                                         "no model: images/s", "least wait (CPU-bound)"], rows))
    return "\n\n".join(parts)


def handover_table(payload: dict[str, Any]) -> str:
    variants = list(dict.fromkeys(r["variant"] for r in payload["runs"]))
    counts = sorted({r["workers"] for r in payload["runs"]})
    by = {(r["variant"], r["workers"]): median(r["rates"]) for r in payload["runs"] if r["rates"]}
    rows = [[str(k)] + [fmt_num(by[v, k]) if (v, k) in by else "" for v in variants]
            for k in counts]
    rows.append([f"{counts[-1]} ÷ 1"]
                + [f"{by[v, counts[-1]] / by[v, 1]:.2f}x" if (v, counts[-1]) in by and (v, 1) in by
                   else "" for v in variants])
    rows.append(["of linear"]
                + [f"{by[v, counts[-1]] / (counts[-1] * by[v, 1]):.2f}"
                   if (v, counts[-1]) in by and (v, 1) in by else "" for v in variants])
    return (f"### W2 photos, {payload['n']:,} images, batch {payload['batch_size']}: images/s "
            f"by what is handed over\n\n" + markdown_table(["workers", *variants], rows))


def plot_scaling(payload: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(payload["workloads"]), figsize=(11, 4.2), squeeze=False)
    for ax, (wl, info) in zip(axes[0], payload["workloads"].items()):
        for name, style in (("shmaug_loader", "o-"), ("keras_fork", "s--")):
            pts = [(r["workers"], median(r["rates"])) for r in info["runs"]
                   if r["contender"] == name and r["rates"]]
            if pts:
                label = next(r["label"] for r in info["runs"] if r["contender"] == name)
                ax.plot(*zip(*pts), style, label=label.split(". ", 1)[-1])
        one = [median(r["rates"]) for r in info["runs"]
               if r["contender"] == "shmaug_loader" and r["workers"] == 1 and r["rates"]]
        if one:
            top = max(r["workers"] for r in info["runs"])
            ax.plot([1, top], [one[0], one[0] * top], ":", color="grey", label="linear from 1 worker")
        ax.set(title=f"{wl}: {info['title']}", xlabel="workers", ylabel="images/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{payload['environment']['cpu']}, {payload['environment']['usable_cpus']} CPUs",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(out: Path) -> str:
    parts = ["# shmaug on a GPU machine\n"]
    for name, title, tables in ((FIT, "Model.fit on the GPU", fit_tables),
                                (SCALING, "images/s by worker count", scaling_tables),
                                (HANDOVER, "where W2's scaling flattens", handover_table),
                                (ALONE, "the ops alone, without a loader", alone_table),
                                (IMAGENET, "ImageNet JPEGs into ResNet50", imagenet_table),
                                (PINNED, "page-locked memory", pinned_table)):
        if not (out / name).exists():
            continue
        payload = json.loads((out / name).read_text())
        env = payload["environment"]
        tpc = env.get("threads_per_core")
        threads = f", {tpc} hardware thread(s) per core" if tpc else ", threads per core not recorded"
        head = (f"## {title}\n\n{QUICK if payload['quick'] else 'full run'} · "
                f"{env['usable_cpus']} CPUs ({env['cpu']}{threads}) · {env.get('memory_gib')} GiB · "
                f"Python {env['python']} · commit {env.get('git_commit', '?')} · {env['time']}")
        if "keras" in payload:
            head += (f" · {payload['device']} · Keras {payload['keras']} on {payload['backend']} "
                     f"{payload.get('backend_version', '')}").rstrip()
        parts.append(f"{head}\n\nimages/s: the median of {payload['repeats']} timed epochs.\n\n"
                     + tables(payload))
        if name == SCALING:
            plot_scaling(payload, out / "gpu_scaling.png")
    text = "\n\n".join(parts) + "\n"
    (out / "gpu.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = prepare_out(args.out)
    repeats = args.repeats or (1 if args.quick else 3)
    top = args.max_workers or (2 if args.quick else max(1, cpu_count() - 1))
    began = time.perf_counter()
    if args.section in ("scaling", "all"):
        run_scaling(out, args.quick, repeats, top)
    if args.section in ("handover", "all"):
        run_handover(out, args.quick, repeats, top,
                     tuple(v for v in HANDED if v in args.variants.split(",")),
                     tuple(int(c) for c in args.counts.split(",")) if args.counts else ())
    if args.section in ("alone", "all"):
        run_alone(out, args.quick, repeats, top)
    if args.section in ("fit", "all"):
        from bench.gpu.fit import run_fit

        workloads = args.workloads or ("W1" if args.quick else "W1,W2")
        run_fit(args.quick, repeats, top, lambda payload: save(out, FIT, payload),
                tuple(w for w in ("W2", "W1") if w in workloads.split(",")),
                tuple(f for f in FEEDERS + MORE_FEEDERS if f in args.feeders.split(",")),
                w2_model=args.w2_model)
    if args.section in ("imagenet", "all"):
        import tempfile

        from bench.gpu.imagenet import DEFAULT_FEEDERS, run_imagenet

        chosen = (tuple(f.strip() for f in args.imagenet_feeders.split(";"))
                  if args.imagenet_feeders else DEFAULT_FEEDERS[:2] if args.quick
                  else DEFAULT_FEEDERS)
        with tempfile.TemporaryDirectory(prefix="shmaug-imagenet-") as root:
            run_imagenet(args.quick, repeats, top, Path(root),
                         lambda payload: save(out, IMAGENET, payload), chosen, args.files)
    if args.section in ("pinned", "all"):
        run_pinned(args.quick, repeats, top, lambda payload: save(out, PINNED, payload))
    print(write_report(out), flush=True)
    print(f"bench.gpu {args.section}: wrote {out}/ in {took(time.perf_counter() - began)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
