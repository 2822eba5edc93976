"""The "real small CNN" consumer: ``Model.fit`` on the CPU fed by a contender.

Runs inside the suite's child process, ``bench.suite.child`` (``"fit": true`` in the spec).
The model is the demo's small CNN (``shmaug._demo.build_model``). The data-wait fraction is
measured by pairing, in the same process and round by round, one epoch fed by the contender
with one epoch fed from batches already in RAM (the compute-only time):
``wait = 1 - t_compute / t_contender``.
"""

from __future__ import annotations

import time
from typing import Any

import keras

from bench.suite import peers
from bench.common.workloads import WORKLOADS, augment_for, build_data, make_batch, output_spec

CLASSES = 10


class Cached(keras.utils.PyDataset):  # type: ignore[misc]
    """Batches already computed: the same model work with no data work at all."""

    def __init__(self, batches: list[Any]) -> None:
        super().__init__()
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> Any:
        return self.batches[i]


def fit_keras(spec: dict[str, Any]) -> dict[str, Any]:
    from shmaug._demo import build_model

    wl = WORKLOADS[spec["workload"]]
    bs = wl.batch_size_quick if spec["quick"] else wl.batch_size
    n = bs * spec["fit_batches"]
    x, ids = build_data(wl.name, n)
    y = ids % CLASSES
    augment = augment_for(wl.name, spec["impl"])
    _, out_dtype = output_spec(wl.name, x)
    with peers.running(spec["contender"], x, y, bs, augment, out_dtype, spec["workers"]) as c:
        data = c.keras_data()
        if data is None:
            raise ImportError(f"{spec['contender']} has no Keras form to pass to fit")
        cached = Cached([(make_batch(x, augment, i, min(i + bs, n), out_dtype), y[i:i + bs])
                         for i in range(0, n, bs)])
        keras.utils.set_random_seed(0)
        model = build_model(x.shape[1], CLASSES)
        model.compile("adam", "sparse_categorical_crossentropy")
        model.fit(data, epochs=1, verbose=0)  # warm-up: tracing, worker start
        model.fit(cached, epochs=1, verbose=0)
        fed, compute = [], []
        for _ in range(spec["repeats"]):
            t = time.perf_counter()
            model.fit(data, epochs=1, verbose=0)
            fed.append(time.perf_counter() - t)
            t = time.perf_counter()
            model.fit(cached, epochs=1, verbose=0)
            compute.append(time.perf_counter() - t)
        return {"n": n, "batch_size": bs, "fit_s": fed, "compute_s": compute,
                "rates": [n / t for t in fed],
                "wait_fraction": [max(0.0, 1 - b / a) for a, b in zip(fed, compute)]}
