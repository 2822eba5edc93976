"""The suite's contenders, and the child process that measures them (``python -m bench.contenders``).

A contender is built from ``(x, y, batch_size, augment, workers, start_method)`` and offers
``epoch()`` (an iterator of ``(xb, yb)`` numpy batches in order), ``pids()`` (its worker
processes) and ``close()``. The child runs ONE spec (one contender on one workload), under the
parent's hard timeout, and reports JSON: time to first batch, images/s per timed epoch (epoch 0
is warm-up), exactly-once checks, USS/PSS mid-epoch, and the data-wait fraction of a consumer
that takes a fixed ``step_s`` per batch. ``--fit`` instead trains a small CNN (``fit_keras``).

This module imports TensorFlow at the top on purpose: a user's training script does, and that
is what spawned workers which re-run ``__main__`` pay for.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402  -- see the module docstring

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, Iterator  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402

from bench import _harness as H  # noqa: E402
from bench import workloads as W  # noqa: E402

KINDS = {  # contender -> (kind, start method); the kind decides the class below
    "keras_single": ("keras_single", None),
    "keras_threads": ("keras_adapter", None),
    "keras_fork": ("keras_adapter", "fork"),
    "keras_spawn": ("keras_adapter", "spawn"),
    "pool": ("pool", "fork"),
    "pool_spawn": ("pool", "spawn"),
    "tfdata_gen": ("tfdata_gen", None),
    "tfdata_map": ("tfdata_map", None),
    "torch": ("torch", "fork"),
    "shmaug_loader": ("shmaug_loader", "fork"),
    "shmaug_spawn": ("shmaug_loader", "spawn"),
    "shmaug_sequence": ("shmaug_sequence", "fork"),
    "copy": ("copy", None),
}
WARMUP_BATCHES = 4  # excluded from the timing; the pools start and the caches fill
PARALLEL = {"keras_threads", "keras_fork", "keras_spawn", "pool", "pool_spawn", "torch",
            "shmaug_loader", "shmaug_spawn", "shmaug_sequence"}


# -- the users' Keras dataset -------------------------------------------------------------------


class AugDataset(keras.utils.PyDataset):  # type: ignore[misc]
    """What a Keras user writes: gather and augment each sample in ``__getitem__``."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, augment: Any,
                 out_dtype: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.x, self.y, self.bs, self.augment, self.out_dtype = x, y, batch_size, augment, out_dtype

    def __len__(self) -> int:
        return -(-len(self.x) // self.bs)

    def __getitem__(self, i: int) -> Any:
        lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
        return W.make_batch(self.x, self.augment, lo, hi, self.out_dtype), self.y[lo:hi]


class Base:
    def __init__(self, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
                 workers: int, method: str | None) -> None:
        self.x, self.y, self.bs, self.augment, self.out_dtype = x, y, bs, augment, out_dtype
        self.workers, self.method = workers, method
        self.nb = -(-len(x) // bs)
        self._before = set(H.pool_children())

    # Keras' enqueuer serves batches queued in an abandoned epoch at the start of the next
    # one (stale, repeated samples): its warm-up must be a whole epoch.
    full_warmup = False

    def pids(self) -> list[int]:
        return [p for p in H.pool_children() if p not in self._before]

    def keras_data(self) -> Any:
        """What ``Model.fit`` is given (None when this contender has no Keras form)."""
        return None

    def close(self) -> None:
        pass


class KerasSingle(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.ds = AugDataset(self.x, self.y, self.bs, self.augment, self.out_dtype)

    def epoch(self) -> Iterator[Any]:
        for i in range(len(self.ds)):
            yield self.ds[i]

    def keras_data(self) -> Any:
        return self.ds


class KerasAdapter(Base):
    """``PyDataset(workers=N)`` driven the way ``fit`` drives it (its ``PyDatasetAdapter``)."""

    full_warmup = True

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

        if self.method:
            mp.set_start_method(self.method, force=True)  # Keras' pool follows it
        self.ds = AugDataset(self.x, self.y, self.bs, self.augment, self.out_dtype,
                             workers=self.workers, use_multiprocessing=self.method is not None)
        self.adapter = PyDatasetAdapter(self.ds, shuffle=False)

    def epoch(self) -> Iterator[Any]:
        self.adapter.on_epoch_begin()
        try:
            yield from self.adapter.get_numpy_iterator()
        finally:
            self.adapter.on_epoch_end()

    def keras_data(self) -> Any:
        return self.ds


# -- the hand-rolled Pool + RawArray recipe -------------------------------------------------------

_POOL: dict[str, Any] = {}


def _pool_init(raw: Any, shape: tuple[int, ...], dtype: str, augment: Any, out_dtype: Any) -> None:
    _POOL["x"] = np.frombuffer(raw, dtype=dtype).reshape(shape)
    _POOL["augment"], _POOL["out_dtype"] = augment, out_dtype


def _pool_work(lo: int, hi: int) -> np.ndarray:
    return W.make_batch(_POOL["x"], _POOL["augment"], lo, hi, _POOL["out_dtype"])


class PoolSequence(keras.utils.PyDataset):  # type: ignore[misc]
    """The recipe: dataset in a RawArray, an ``mp.Pool`` held by a Sequence, ``starmap`` over
    index slices in ``__getitem__``, results concatenated."""

    def __init__(self, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
                 workers: int, method: str) -> None:
        super().__init__()
        ctx = mp.get_context(method)
        self.raw = ctx.RawArray("b", x.nbytes)
        np.frombuffer(self.raw, dtype=x.dtype).reshape(x.shape)[...] = x
        self.pool = ctx.Pool(workers, initializer=_pool_init,
                             initargs=(self.raw, x.shape, x.dtype.str, augment, out_dtype))
        self.n, self.y, self.bs, self.workers = len(x), y, bs, workers

    def __len__(self) -> int:
        return -(-self.n // self.bs)

    def __getitem__(self, i: int) -> Any:
        lo, hi = i * self.bs, min((i + 1) * self.bs, self.n)
        cuts = np.linspace(lo, hi, self.workers + 1).astype(int)
        parts = self.pool.starmap(_pool_work, [(int(a), int(b)) for a, b in zip(cuts, cuts[1:])])
        return np.concatenate(parts), self.y[lo:hi]


class Pool(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.seq = PoolSequence(self.x, self.y, self.bs, self.augment, self.out_dtype,
                                self.workers, self.method or "fork")

    def epoch(self) -> Iterator[Any]:
        for i in range(len(self.seq)):
            yield self.seq[i]

    def keras_data(self) -> Any:
        return self.seq

    def close(self) -> None:
        self.seq.pool.terminate()
        self.seq.pool.join()


# -- tf.data -------------------------------------------------------------------------------------


class TfBase(Base):
    def _signature(self) -> Any:
        return (tf.TensorSpec((None, *self.x.shape[1:]), tf.as_dtype(np.dtype(self.out_dtype))),
                tf.TensorSpec((None,), tf.as_dtype(self.y.dtype)))

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()

    def keras_data(self) -> Any:
        return self.ds


class TfGen(TfBase):
    """``Dataset.from_generator(batches).prefetch(AUTOTUNE)``."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)

        def gen() -> Iterator[Any]:
            for i in range(self.nb):
                lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
                yield W.make_batch(self.x, self.augment, lo, hi, self.out_dtype), self.y[lo:hi]

        self.ds = tf.data.Dataset.from_generator(gen, output_signature=self._signature()).prefetch(
            tf.data.AUTOTUNE)


class TfMap(TfBase):
    """``Dataset.range(batches).map(tf.numpy_function(batch), num_parallel_calls=AUTOTUNE)``."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        sig = self._signature()

        def batch(i: Any) -> Any:
            lo, hi = int(i) * self.bs, min((int(i) + 1) * self.bs, len(self.x))
            return W.make_batch(self.x, self.augment, lo, hi, self.out_dtype), self.y[lo:hi]

        def wrap(i: Any) -> Any:
            xb, yb = tf.numpy_function(batch, [i], [sig[0].dtype, sig[1].dtype])
            xb.set_shape(sig[0].shape)
            yb.set_shape(sig[1].shape)
            return xb, yb

        self.ds = tf.data.Dataset.range(self.nb).map(
            wrap, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


# -- PyTorch ----------------------------------------------------------------------------------


class TorchSamples:
    """A map-style dataset: one augmented sample and its id."""

    def __init__(self, x: np.ndarray, y: np.ndarray, augment: Any, out_dtype: Any) -> None:
        self.x, self.y, self.augment, self.out_dtype = x, y, augment, out_dtype

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, j: int) -> Any:
        if self.augment is None:
            return self.x[j], self.y[j]
        return self.augment(self.x[j], np.random.default_rng()).astype(self.out_dtype, copy=False), self.y[j]


def _torch_collate(items: list[Any]) -> Any:
    """Stack into numpy (float16 has no default torch collate path issue, but keep it equal)."""
    import torch

    xb = np.stack([a for a, _ in items])
    return torch.from_numpy(xb), torch.from_numpy(np.array([b for _, b in items]))


class Torch(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import torch  # noqa: F401  -- ImportError is reported as "skipped"
        from torch.utils.data import DataLoader

        self.loader = DataLoader(TorchSamples(self.x, self.y, self.augment, self.out_dtype),
                                 batch_size=self.bs, shuffle=False, num_workers=self.workers,
                                 persistent_workers=True, collate_fn=_torch_collate,
                                 multiprocessing_context=self.method)

    def epoch(self) -> Iterator[Any]:
        for xb, yb in self.loader:
            yield xb.numpy(), yb.numpy()

    def close(self) -> None:
        it = getattr(self.loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()


# -- shmaug -----------------------------------------------------------------------------------


class ShmaugLoader(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import shmaug

        self.loader = shmaug.Loader(self.x, self.y, batch_size=self.bs, augment=self.augment,
                                    workers=self.workers, seed=0, start_method=self.method)

    def epoch(self) -> Iterator[Any]:
        yield from self.loader

    def pids(self) -> list[int]:
        return list(self.loader.pids)

    def close(self) -> None:
        self.loader.close()


class ShmaugSequence(KerasAdapter):
    """``shmaug.Sequence`` driven by Keras' ``PyDatasetAdapter``, as under ``fit``."""

    full_warmup = False  # it asks Keras for no workers: no enqueuer, nothing stale

    def __init__(self, *a: Any) -> None:
        Base.__init__(self, *a)
        import shmaug
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

        self.ds = shmaug.Sequence(self.x, self.y, batch_size=self.bs, augment=self.augment,
                                  workers=self.workers, seed=0, start_method=self.method)
        self.adapter = PyDatasetAdapter(self.ds, shuffle=False)

    def pids(self) -> list[int]:
        return list(self.ds.loader.pids) if self.ds._loader is not None else []

    def close(self) -> None:
        self.ds.close()


class Copy(Base):
    """The memory-copy ceiling: slice and copy each batch in this process."""

    def epoch(self) -> Iterator[Any]:
        for i in range(self.nb):
            lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
            yield self.x[lo:hi].copy(), self.y[lo:hi]


CLASSES = {"keras_single": KerasSingle, "keras_adapter": KerasAdapter, "pool": Pool,
           "tfdata_gen": TfGen, "tfdata_map": TfMap, "torch": Torch,
           "shmaug_loader": ShmaugLoader, "shmaug_sequence": ShmaugSequence, "copy": Copy}


def build(name: str, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
          workers: int) -> Base:
    kind, method = KINDS[name]
    return CLASSES[kind](x, y, bs, augment, out_dtype, workers, method)


# -- the measurement --------------------------------------------------------------------------


def _memory(c: Base) -> dict[str, Any]:
    main = H.memory_of(os.getpid())
    workers = H.worker_memory(c.pids())
    return {"uss": main["uss"] + sum(w["uss"] for w in workers),
            "pss": main["pss"] + sum(w["pss"] for w in workers),
            "main_uss": main["uss"], "workers": len(workers),
            "worker_uss": [w["uss"] for w in workers], "worker_pss": [w["pss"] for w in workers]}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One contender on one workload: see the module docstring."""
    wl = W.WORKLOADS[spec["workload"]]
    n = wl.n_quick if spec["quick"] else wl.n
    bs = wl.batch_size_quick if spec["quick"] else wl.batch_size
    x, ids = W.build_data(wl.name, n)
    augment = W.augment_for(wl.name, spec["impl"])
    _, out_dtype = W.output_spec(wl.name, x)
    result: dict[str, Any] = {"n": n, "batch_size": bs, "rates": [], "problems": []}
    t0 = time.perf_counter()
    c = build(spec["contender"], x, ids, bs, augment, out_dtype, spec["workers"])
    try:
        for r in range(spec["repeats"] + 1):  # round 0: warm-up, gives time to first batch
            seen: list[np.ndarray] = []
            images = 0
            t_start = time.perf_counter()
            for b, (xb, yb) in enumerate(c.epoch()):
                if r == 0:
                    if b == 0:
                        result["first_batch_s"] = time.perf_counter() - t0
                    if b + 1 >= WARMUP_BATCHES and not c.full_warmup:
                        break  # warm-up is the first batches of an epoch, not a whole one
                    continue
                if r == 1 and b == max(1, (n // bs) // 2):
                    result["memory"] = _memory(c)
                images += len(xb)
                seen.append(np.asarray(yb))
            elapsed = time.perf_counter() - t_start
            if r == 0:
                continue
            got = np.concatenate(seen) if seen else np.empty(0, np.int64)
            if len(got) != n or len(np.unique(got)) != n:
                result["problems"].append(
                    f"epoch {r}: {len(got)} samples, {len(np.unique(got))} distinct of {n}")
            result["rates"].append(images / elapsed)
        if spec.get("step_s"):
            result["wait"] = _wait_epoch(c, spec["step_s"])
    finally:
        pids = H.guarded(c.pids, 10).value or []
        c.close()
        H.wait_gone(pids, 10)
    if spec.get("probe") and augment is not None:
        result["distinct"] = _distinct_probe(spec, x[:1], bs, augment, out_dtype)
    return result


def _distinct_probe(spec: dict[str, Any], one: np.ndarray, bs: int, augment: Any,
                    out_dtype: Any) -> float:
    """Share of distinct outputs when every sample is the SAME image: a worker that repeats
    another's random stream (the classic forked-RNG failure) shows up as identical outputs."""
    n = bs * 2 * max(1, spec["workers"])
    x = np.ascontiguousarray(np.repeat(one, n, axis=0))
    c = build(spec["contender"], x, np.arange(n), bs, augment, out_dtype, spec["workers"])
    try:
        outs = [np.asarray(xb) for xb, _ in c.epoch()]
    finally:
        pids = H.guarded(c.pids, 10).value or []
        c.close()
        H.wait_gone(pids, 10)
    flat = np.concatenate(outs).reshape(n, -1)
    return len({row.tobytes() for row in flat}) / n



def _wait_epoch(c: Base, step_s: float) -> dict[str, float]:
    """One epoch with a consumer that takes ``step_s`` per batch (a simulated accelerator)."""
    waited, t0 = 0.0, time.perf_counter()
    it = iter(c.epoch())
    while True:
        ta = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        waited += time.perf_counter() - ta
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:  # an accelerator step: the CPU stays free meanwhile
            time.sleep(min(0.002, max(0.0, end - time.perf_counter())))
    wall = time.perf_counter() - t0
    return {"wait_s": waited, "wall_s": wall, "fraction": waited / wall if wall else float("nan")}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", help="JSON spec: workload, impl, contender, workers, quick, ...")
    spec = json.loads(parser.parse_args().spec)
    try:
        if spec.get("fit"):
            from bench.contenders_keras import fit_keras

            out = fit_keras(spec)
        else:
            out = measure(spec)
        H.report_json({"status": "ok", **out})
    except ImportError as exc:
        H.report_json({"status": "skipped", "error": f"{type(exc).__name__}: {exc}"})
    except Exception as exc:
        H.report_json({"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]})
    sys.stdout.flush()
    os._exit(0)  # do not wait for a contender's stuck non-daemon threads or pools
