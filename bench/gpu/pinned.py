"""Page-locked memory (``python -m bench.gpu pinned``): does a page-locked output ring
(``Loader(pin_memory=True)``) make the host-to-device copy of a lent batch cheaper?

A copy from pageable memory is staged by the driver: the calling thread copies the bytes into
a page-locked buffer of the driver's, then the GPU reads that. A ring registered with the
driver is read by the GPU directly. W2 float32 batches, lent (``copy=False``) by two
``Loader``s, one with ``pin_memory=True``, are sent to the GPU in interleaved rounds (an epoch
each):

- **torch, pageable**: ``torch.from_numpy(batch).to(device)``, what Keras' torch backend does
  with the tensor a ``Sequence`` hands it over a lent slot;
- **torch, ring pinned**: the same call, from the pinned loader;
- **torch, pinned staging**: copied into a page-locked buffer first, then sent without
  blocking (what ``torch.utils.data.DataLoader(pin_memory=True)`` does);
- **jax, pageable** and **jax, ring pinned**: ``jax.device_put(batch)``, as Keras' JAX
  trainer sends a batch (when JAX is installed).

Each batch's copy finishes before the next batch is asked for (a lent batch is valid until
then). Per variant: images/s and the main thread's CPU time per batch (``time.thread_time``).
Without CUDA (the CPU smoke run) the arrays stay on the CPU and the pinned rows are not run.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

Send = Callable[[np.ndarray], None]  # one lent batch to the device, finished on return


def send_epoch(loader: Any, send: Send) -> tuple[float, float, int]:
    """One epoch sent to the device: (seconds, main thread CPU seconds, batches)."""
    batches = 0
    began, cpu = time.perf_counter(), time.thread_time()
    for xb, _ in loader:
        send(xb)  # the lent slot goes back when the next batch is asked for
        batches += 1
    return time.perf_counter() - began, time.thread_time() - cpu, batches


def torch_ways(shape: tuple[int, ...]) -> tuple[str, dict[str, Send]]:
    """The device torch sends to, and its three ways (keyed by variant)."""
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    staging = torch.empty(shape, dtype=torch.float32, pin_memory=cuda)

    def plain(xb: np.ndarray) -> None:
        torch.from_numpy(xb).to(device)
        sync()

    def staged(xb: np.ndarray) -> None:
        part = staging[: len(xb)]
        part.copy_(torch.from_numpy(xb))
        part.to(device, non_blocking=True)
        sync()

    name = torch.cuda.get_device_name(0) if cuda else "cpu (no CUDA)"
    return name, {"torch, pageable": plain, "torch, ring pinned": plain,
                  "torch, pinned staging": staged}


def jax_ways() -> tuple[str, dict[str, Send]]:
    """The device JAX sends to, and its two ways."""
    import jax

    def put(xb: np.ndarray) -> None:
        jax.device_put(xb).block_until_ready()

    return jax.devices()[0].device_kind, {"jax, pageable": put, "jax, ring pinned": put}


def run_pinned(quick: bool, repeats: int, workers: int, report: Callable[[dict[str, Any]], None]
               ) -> dict[str, Any]:
    import shmaug
    from bench.common.report import environment
    from bench.common.workloads import augment_for, build_data
    from bench.gpu.run import QUICK_SIZES, SCALING_SIZES

    n, bs = (QUICK_SIZES if quick else SCALING_SIZES)["W2"]
    payload: dict[str, Any] = {"environment": environment(), "quick": quick, "repeats": repeats,
                               "n": n, "batch_size": bs, "workers": workers, "runs": []}
    x, ids = build_data("W2", n)
    ways: dict[str, Send] = {}
    payload["device"] = "neither torch nor JAX is installed"
    try:
        payload["device"], ways = torch_ways((bs, *x.shape[1:]))
    except ImportError:
        pass
    try:
        device, more = jax_ways()
        payload["device"] = device if not ways else payload["device"]
        ways.update(more)
    except ImportError:
        pass
    runs = {v: {"variant": v, "rates": [], "cpu_ms_per_batch": [], "status": "ok"}
            for v in ways}
    payload["runs"] = list(runs.values())

    def loader(pin: bool) -> Any:
        return shmaug.Loader(x, ids, batch_size=bs, augment=augment_for("W2", "shmaug"),
                             workers=workers, seed=0, copy=False, pin_memory=pin)

    with loader(False) as pageable, loader(True) as pinned:
        for each in (pageable, pinned):  # a warm-up epoch each: the workers start
            send_epoch(each, lambda xb: None)
        for _ in range(repeats):
            for variant, send in ways.items():
                run = runs[variant]
                source = pinned if variant.endswith("ring pinned") else pageable
                if source is pinned and not pinned.pinned:
                    run["status"] = "ring not pinned (no CUDA)"
                    continue
                try:
                    seconds, cpu, batches = send_epoch(source, send)
                except Exception as exc:  # a failed variant is a result; the others still run
                    run["status"] = f"{type(exc).__name__}: {exc}"
                    continue
                run["rates"].append(n / seconds)
                run["cpu_ms_per_batch"].append(1000 * cpu / batches)
                print(f"pinned W2 {variant} workers={workers}: {n / seconds:,.0f} images/s, "
                      f"{1000 * cpu / batches:.2f} ms CPU a batch", flush=True)
                report(payload)
    report(payload)
    return payload


def pinned_table(payload: dict[str, Any]) -> str:
    from bench.common.report import fmt_num, markdown_table

    if not payload["runs"]:
        return payload["device"]
    rows = []
    for r in payload["runs"]:
        base = next(b for b in payload["runs"]
                    if b["variant"] == r["variant"].split(",")[0] + ", pageable")
        one = float(np.median(base["rates"])) if base["rates"] else float("nan")
        rate = float(np.median(r["rates"])) if r["rates"] else float("nan")
        rows.append([r["variant"], fmt_num(rate) if r["rates"] else r["status"],
                     f"{rate / one:.2f}x" if r["rates"] and one == one else "",
                     f"{np.median(r['cpu_ms_per_batch']):.2f}" if r["rates"] else ""])
    return (f"### W2 float32, {payload['n']:,} images, batch {payload['batch_size']}, "
            f"{payload['workers']} workers, lent batches sent to {payload['device']}\n\n"
            + markdown_table(["sent", "images/s", "÷ pageable",
                              "main thread CPU ms a batch"], rows))
