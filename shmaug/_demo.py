"""`shmaug demo`: what shmaug is for, measured side by side in about a minute on two cores.

Renders a labelled glyph data set locally and trains the same small CNN on it three times:

1. on batches already in memory: the model alone, as fast as this machine runs it;
2. fed by Keras' own ``PyDataset`` workers (``workers=N, use_multiprocessing=True``), the
   augmentation done in ``__getitem__`` as users write it;
3. fed by ``shmaug.Sequence`` with the same augmentation and the same N.

It prints, for each contender, images/s fed, the share of time the model waited for data and
seconds per epoch, then writes ``augmented_samples.png`` (a grid of augmented glyphs) and
``feeding.png`` (each run's step times against the model alone's).

How the data wait is measured, the same way for both contenders: an epoch fed by a contender
takes ``t`` seconds, the same steps on batches already in memory take ``t0``, and the wait is
``1 - t0 / t``. Neither a callback timing the gap between batches nor a wrapped ``__getitem__``
sees it on the TensorFlow backend: the next batch is fetched inside the compiled train step, and
Keras' workers call ``__getitem__`` in other processes. Timings come from callbacks at the
boundaries Keras itself times, so they agree with its own lines. Owns the demo only; the
engine, the facade and the glyphs live in their modules.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import signal
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

_STARTED = time.perf_counter()  # "done in" counts TensorFlow's import, which follows
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported: no C++ logs

import keras  # noqa: E402  (the demo is a Keras program; the CLI imports it on demand)
import numpy as np  # noqa: E402

import shmaug  # noqa: E402
from shmaug.platform import cpu_name  # noqa: E402
from shmaug.sources.glyphs import CJK_CLASSES, LATIN_CLASSES, find_cjk_font, render_glyphs  # noqa: E402

if TYPE_CHECKING:
    from shmaug.engine.config.options import StartMethod


@dataclass(frozen=True)
class Profile:
    """How big a run is. ``classes`` is a cap: fewer when the font has fewer."""

    classes: int
    per_class: int  # training glyphs per class
    val_per_class: int
    epochs: int
    batch_size: int


# The default must finish within 90 s on 2 busy cores whatever fonts are installed: the class
# count is capped (a CJK font offers 126), since time grows with classes x glyphs per class.
PROFILES = {
    "quick": Profile(classes=10, per_class=24, val_per_class=6, epochs=1, batch_size=60),
    "default": Profile(classes=36, per_class=50, val_per_class=20, epochs=3, batch_size=128),
    "full": Profile(classes=len(CJK_CLASSES), per_class=400, val_per_class=60, epochs=8,
                    batch_size=128),
}


def build_model(side: int, classes: int, channels: int = 1) -> Any:
    """The demo's small CNN (also the consumer of the benchmark suites' fit runs)."""

    def block(filters: int, strides: int = 1) -> list[Any]:
        return [keras.layers.Conv2D(filters, 3, strides=strides, use_bias=False),
                keras.layers.BatchNormalization(momentum=0.9), keras.layers.ReLU()]

    return keras.Sequential([
        keras.Input((side, side, channels)),
        keras.layers.Rescaling(1 / 255),
        *block(32, strides=2),
        keras.layers.MaxPooling2D(),
        *block(64),
        *block(96),
        keras.layers.GlobalMaxPooling2D(),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(classes, activation="softmax"),
    ])


# -- the contenders ------------------------------------------------------------------------------


class KerasGlyphs(keras.utils.PyDataset):  # type: ignore[misc]
    """Keras' own way: ``__getitem__`` augments each sample of the batch, and Keras' worker
    processes call it in parallel. Shuffles the samples each epoch and seeds each batch from
    (seed, epoch, batch), as a careful user would. Module level, so spawned workers import it.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, augment: Any, seed: int,
                 workers: int) -> None:
        super().__init__(workers=workers, use_multiprocessing=True)
        self.x, self.y, self.batch_size = x, y, batch_size
        self.augment, self.seed = augment, seed
        self.epoch = 0  # on_epoch_end runs here; Keras starts new worker processes each epoch
        self.order = self._order()

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.x))

    def __len__(self) -> int:
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        _leave_ctrl_c_to_the_parent()
        rng = np.random.default_rng([self.seed, self.epoch, index])
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        return np.stack([self.augment(self.x[i], rng) for i in rows]), self.y[rows]

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self.order = self._order()


def _leave_ctrl_c_to_the_parent() -> None:
    """In a Keras worker, ignore SIGINT: Ctrl-C reaches every process of the terminal, and the
    main process reports it once (shmaug's own workers do the same)."""
    if multiprocessing.parent_process() is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_FORK_HOOKED = False


def ignore_ctrl_c_in_forked_children() -> None:
    """Have every process forked from now on ignore SIGINT from its first instruction.

    Keras starts new pool workers each epoch. One that Ctrl-C reached before its first
    ``__getitem__`` (where ``_leave_ctrl_c_to_the_parent`` runs) died printing a
    KeyboardInterrupt traceback under the demo's one line. (One it reaches while CPython's
    own after-fork hooks run, before this one, finds the CLI's handler, which leaves a press
    in another process alone: ``_interrupt``.) Spawned workers keep the ``__getitem__``
    guard. (A hang at exit in ``multiprocessing.Pool``'s finalizer is the CLI's to cut short:
    ``cli._exit_within``.)
    """
    global _FORK_HOOKED
    if not _FORK_HOOKED and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        _FORK_HOOKED = True


class InMemory(keras.utils.PyDataset):  # type: ignore[misc]
    """Batches made before training: the model's own time, with no data work at all."""

    def __init__(self, batches: list[tuple[np.ndarray, np.ndarray]]) -> None:
        super().__init__()
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.batches[index]


class Clock(keras.callbacks.Callback):  # type: ignore[misc]
    """Seconds per epoch and per step, at the boundaries Keras' own progress line uses, and
    Keras' logs of each epoch.

    A step's time runs from the end of the previous step (or the epoch's start) to its own
    end, so it includes fetching the batch on every backend.
    """

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[float] = []  # seconds of each finished epoch
        self.steps: list[float] = []  # seconds of each step, all epochs in order
        self.logs: list[dict[str, float]] = []  # Keras' logs at the end of each epoch
        self._began = self._last = 0.0

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._began = self._last = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        now = time.perf_counter()
        self.steps.append(now - self._last)
        self._last = now

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self.epochs.append(time.perf_counter() - self._began)
        self.logs.append({k: float(v) for k, v in (logs or {}).items()})


ALONE, KERAS, SHMAUG = "the model alone", "Keras PyDataset", "shmaug.Sequence"


@dataclass
class Run:
    """One contender: its model, what ``fit`` is given, and what was measured."""

    name: str
    data: Any
    model: Any
    clock: Clock = field(default_factory=Clock)
    val_accuracy: float = float("nan")


# -- the run -------------------------------------------------------------------------------------


def run(*, profile: str = "default", epochs: int | None = None, per_class: int | None = None,
        workers: int | None = None, out: Path = Path("shmaug_demo_out"), seed: int = 0,
        start_method: StartMethod | None = None) -> dict[str, Any]:
    """Render glyphs; train the model alone, fed by Keras' workers and fed by shmaug, epoch
    by epoch in turn; print the comparison and write the two PNGs. Returns the figures."""
    # Each run compiles its own model; TensorFlow warns about the retracing that causes. JAX
    # says it found no TPU, and warns at every fork of its process; the processes forked here
    # (shmaug's workers, Keras' PyDataset workers) run numpy and OpenCV, never JAX.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", "os.fork\\(\\) was called", RuntimeWarning)
    out.mkdir(parents=True, exist_ok=True)  # now: a folder that cannot be made fails at once
    ignore_ctrl_c_in_forked_children()
    size = PROFILES[profile]
    epochs = epochs or size.epochs
    per_class = per_class or size.per_class
    font = find_cjk_font()
    classes = min(size.classes, len(CJK_CLASSES if font else LATIN_CLASSES))
    n_train, n_val = classes * per_class, classes * size.val_per_class
    x, y, _ = render_glyphs(n_train + n_val, 64, classes=classes, seed=seed)
    x = x[..., None]  # (N, 64, 64, 1): the channel axis a Conv2D expects
    x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    augment = shmaug.presets.glyph_distort()
    batch = size.batch_size
    _say(f"shmaug demo: {n_train:,} training and {n_val:,} validation glyphs of {classes} "
         f"classes ({'CJK font ' + Path(font).name if font else 'Pillow built-in font'}), "
         f"64x64, batch {batch}, {epochs} epoch{'s' if epochs > 1 else ''}; {_backend()}")
    in_memory = InMemory([(x_train[i:i + batch], y_train[i:i + batch])
                          for i in range(0, n_train, batch)])
    with shmaug.Sequence(x_train, y_train, batch_size=batch, augment=augment, workers=workers,
                         seed=seed, shuffle=True, start_method=start_method) as train:
        workers = train.loader.workers  # None meant one per core: now a number, for Keras too
        _say(f"The same small CNN three times, an epoch of each in turn: {ALONE} on batches "
             f"already in memory; fed augmented glyphs (shmaug.presets.glyph_distort) by "
             f"{workers} worker processes of Keras' PyDataset (use_multiprocessing=True, "
             f"{multiprocessing.get_context().get_start_method()}, augmenting in "
             f"__getitem__); and by {workers} of shmaug.Sequence "
             f"({start_method or 'default start method'}, shared memory).")
        runs = [Run(ALONE, in_memory, _compiled(classes, seed)),
                Run(KERAS, KerasGlyphs(x_train, y_train, batch, augment, seed, workers),
                    _compiled(classes, seed)),
                Run(SHMAUG, train, _compiled(classes, seed))]
        for r in runs:  # two untimed steps: tracing, and the workers' start
            r.model.fit(r.data, epochs=1, steps_per_epoch=min(2, len(in_memory)), verbose=0)
        epoch_stats: list[dict[str, Any]] = []  # shmaug's own figures, one per epoch of it
        for epoch in range(epochs):
            turn = epoch % len(runs)  # take turns going first: the host's speed drifts
            for r in runs[turn:] + runs[:turn]:
                train.reset_stats()
                r.model.fit(r.data, initial_epoch=epoch, epochs=epoch + 1, verbose=0,
                            callbacks=[r.clock])
                if r.data is train:
                    epoch_stats.append(train.stats())
                _say(_epoch_line(r, epoch, epochs, n_train))
    stats = {"hit_rate": statistics.fmean(s["hit_rate"] for s in epoch_stats),
             "busy": statistics.fmean(statistics.fmean(s["worker_busy"] or [0.0])
                                      for s in epoch_stats)}
    for r in runs[1:]:
        r.val_accuracy = float(r.model.evaluate(x_val, y_val, batch_size=256, verbose=0)[1])
    figures = {r.name: _figures(r, runs[0], n_train) for r in runs}
    _report(figures, stats, workers)
    out.mkdir(parents=True, exist_ok=True)
    grid = sample_grid(x_train[:8], augment, seed, out / "augmented_samples.png")
    plot = plot_steps(runs[1:], statistics.median(runs[0].clock.steps), out / "feeding.png")
    _say(f"augmented samples: {grid}\nstep times of both runs: {plot}")
    seconds = time.perf_counter() - _STARTED
    _say(f"done in {seconds:.0f} s")
    return {"keras": figures[KERAS], "shmaug": figures[SHMAUG], "alone": figures[ALONE],
            "hit_rate": stats["hit_rate"], "grid": str(grid), "plot": str(plot),
            "seconds": seconds}


def _backend() -> str:
    """Which Keras runs the models: e.g. "Keras 3.15.1 on JAX 0.10.2 (KERAS_BACKEND=jax)"."""
    name = keras.backend.backend()  # also the name of the backend's module
    version = getattr(sys.modules.get(name), "__version__", "")
    label = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}.get(name, name)
    backend = " ".join(filter(None, (label, version)))
    return f"Keras {keras.__version__} on {backend} (KERAS_BACKEND={name}); CPU: {cpu_name()}"


def _say(text: str) -> None:
    print(text, flush=True)  # flush: a pipe would hold ours back while Keras writes


def _compiled(classes: int, seed: int) -> Any:
    keras.utils.set_random_seed(seed)  # the same initial weights for every run
    model = build_model(64, classes)
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def _epoch_line(r: Run, epoch: int, epochs: int, n: int) -> str:
    """One line per epoch and run, numbered as Keras numbers epochs, from Keras' own logs."""
    t, logs = r.clock.epochs[-1], r.clock.logs[-1]
    learnt = "" if r.name == ALONE else (
        f"  loss {logs.get('loss', float('nan')):.3f}  "
        f"accuracy {logs.get('accuracy', float('nan')):.3f}")
    return (f"epoch {epoch + 1}/{epochs}  {r.name:<16} {t:6.1f} s  {n / t:7,.0f} images/s"
            f"{learnt}")


def _figures(r: Run, alone: Run, n: int) -> dict[str, float]:
    """Mean seconds per epoch; the wait is how much longer that was than the model alone's,
    epochs taken in the same turns."""
    t, t0 = statistics.fmean(r.clock.epochs), statistics.fmean(alone.clock.epochs)
    return {"images_per_s": n / t, "wait": max(0.0, 1.0 - t0 / t), "s_per_epoch": t,
            "val_accuracy": r.val_accuracy}


def _report(figures: dict[str, dict[str, float]], stats: dict[str, float], workers: int) -> None:
    rows = [("", "images/s fed", "waiting for data", "s/epoch", "val. accuracy")]
    rows += [(name, f"{f['images_per_s']:,.0f}", "-" if name == ALONE else f"{f['wait']:.0%}",
              f"{f['s_per_epoch']:.1f}", "-" if name == ALONE else f"{f['val_accuracy']:.3f}")
             for name, f in figures.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    _say("")
    for r in rows:
        _say("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]))
    _say("(means over the epochs; waiting for data: how much longer an epoch took than the "
         "model alone's on batches already in memory)")
    k, s = figures[KERAS], figures[SHMAUG]
    _say(f"shmaug's {workers} workers were busy {stats['busy']:.0%} of their epochs; "
         f"{stats['hit_rate']:.0%} of batches were ready when Keras asked.")
    if max(k["wait"], s["wait"]) < 0.1:
        _say("Here the model, not the input pipeline, sets the pace: both keep it fed, and "
             "what separates them is this machine's noise. The gap opens when the model "
             "outruns the augmentation, as on an accelerator: `shmaug demo --full` there.")
    else:
        _say(f"shmaug fed the model {s['images_per_s'] / k['images_per_s']:.2f}x the images/s "
             f"of Keras' workers: the model waited for data {k['wait']:.0%} of the time with "
             f"Keras' workers and {s['wait']:.0%} with shmaug.")


# -- pictures ------------------------------------------------------------------------------------


def sample_grid(x: np.ndarray, augment: Any, seed: int, path: Path, draws: int = 7) -> Path:
    """A PNG: one row per glyph, the original then ``draws`` augmentations, each from a
    different epoch, exactly as the workers make them (``workers=0`` runs the same code)."""
    from PIL import Image

    with shmaug.Loader(x, None, batch_size=len(x), augment=augment, workers=0,
                       seed=seed) as loader:
        epochs = [loader.batch(0, epoch=e)[0] for e in range(draws)]
    rows = np.concatenate([x, *epochs], axis=2)  # (n, H, W * (draws + 1), C): a row per glyph
    grid = rows.reshape(-1, *rows.shape[2:]).squeeze()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).resize((grid.shape[1] * 2, grid.shape[0] * 2),
                                 Image.Resampling.NEAREST).save(path)
    return path


_COLOURS = {"Keras PyDataset": (214, 96, 77), "shmaug.Sequence": (67, 147, 195)}


def plot_steps(runs: list[Run], alone_step_s: float, path: Path) -> Path:
    """A small PNG: milliseconds per training step, step after step, for each run, over the
    model alone's median step (dashed). Drawn with Pillow, so it needs no plotting library."""
    from PIL import Image, ImageDraw, ImageFont

    w, h, left, right, top, bottom = 720, 320, 56, 16, 36, 36
    img = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=12)
    steps = max(len(r.clock.steps) for r in runs)
    all_ms = [1e3 * s for r in runs for s in r.clock.steps] + [1e3 * alone_step_s]
    top_ms = float(np.percentile(all_ms, 98)) * 1.15 or 1.0  # a first-step spike stays visible

    def xy(i: float, ms: float) -> tuple[float, float]:
        return (left + (w - left - right) * i / max(steps - 1, 1),
                h - bottom - (h - top - bottom) * min(ms, top_ms) / top_ms)

    draw.rectangle([left, top, w - right, h - bottom], outline=(160, 160, 160))
    for tick in np.linspace(0, top_ms, 5):
        _, ty = xy(0, tick)
        draw.text((4, ty - 6), f"{tick:,.0f}", fill="black", font=font)
    draw.text((4, 8), "ms per training step (lower is better); dashed: the model alone",
              fill="black", font=font)
    draw.text((left, h - bottom + 8), f"step 1 .. {steps} (all epochs in order)", fill="black",
              font=font)
    y0 = xy(0, 1e3 * alone_step_s)[1]
    for x0 in range(left, w - right, 12):
        draw.line([(x0, y0), (x0 + 6, y0)], fill=(90, 90, 90), width=2)
    legend_x = w - right - 300
    for k, r in enumerate(runs):
        colour = _COLOURS.get(r.name, (0, 0, 0))
        points = [xy(i, 1e3 * s) for i, s in enumerate(r.clock.steps)]
        if len(points) > 1:
            draw.line(points, fill=colour, width=2)
        draw.text((legend_x + 150 * k, 8 + 14), r.name, fill=colour, font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path
