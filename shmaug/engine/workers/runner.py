"""The slice loop: a task's samples loaded, augmented and written into its rows of the ring.

``SliceRunner`` is what a worker runs for each task (``worker.worker_main``) and what the main
process runs itself with ``workers=0`` (``inline.InlinePool``): one code path, identical
batches. It owns the per-sample seeding (``SampleSeeder``, and the watch on the global
generators), the checks of what ``augment`` returned, and the error record of a sample that
failed; a failing sample never kills the worker. The boxes of a task's samples move together
once its images are made (``ops.targets.box_moves``). It writes its worker's row of the status
block (``status``); it owns no shared memory (the caller attaches and closes it) and no pipe
(its results are encoded by ``wire``).
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Callable, Protocol

import numpy as np

from .. import source
from ... import whole_decodes
from ...deferred import Undecoded
from ..config.inputs import sample_output
from ...errors import ArgumentTypeError, ErrorRecord, OutputMismatchError
from ...ops.mixing import Mix
from ...ops.targets.box_moves import Noted, deferring, settle
from ...ops.targets.sample import SETTLED, Undrawn
from ..plan.schedule import IN_ORDER, OrderCache, Shard, Shuffle, Task, seed_epoch
from ...seeding import GlobalsWatch, SampleSeeder, torch_generator
from ..handoff.ring import Targets
from .status import IDLE, WorkerStatus
from ...memory.store import dtype_text, read_aheads_of
from .wire import PROBE_SLOT, Done, Failed, Probe, Probed

# The user's `augment`, fn(image, rng) -> image, as the engine takes it: any callable, its output
# checked against sample 0's (``config.inputs``). Not ``shmaug.ops.Augment``, a registered op's
# signature, which returns an array by contract.
AugmentFn = Callable[[np.ndarray, np.random.Generator], Any]
Load = Callable[[int], Any]


class TargetAugment(Protocol):
    """An `augment` that moves targets with its image (``from_albumentations`` is one): the
    loader hands it the entries of ``y`` its plan moves (``ops.plan.Plan.moves``)."""

    def augment_targets(self, image: np.ndarray, targets: Targets,
                        rng: np.random.Generator) -> tuple[np.ndarray, Targets]:
        """One sample and its targets' rows, augmented with one draw; each target keeps one
        shape for every sample."""


def op_name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name or type(fn).__name__)


class SliceRunner:
    """Fills a task's rows: sample index -> load -> augment -> write into the ring slot.

    With ``target_inputs`` (the dataset's targets that `augment` transforms along with each
    image, e.g. segmentation masks), `augment` is called as
    ``augment.augment_targets(image, {name: target_inputs[name][index]}, rng)`` (see
    ``TargetAugment``) and returns ``(image, {name: target})``; each target goes to its own
    block of the ring, ``target_out[name]``. A target is an array, or the ``load`` of a
    target source (masks in files), called for its row as an image source's is;
    ``target_made`` holds those whose rows go to the ring as they are made, unmoved.

    Used by every worker and, for ``workers=0``, by the main process itself: one code path,
    identical batches.
    """

    def __init__(
        self,
        x: Any,
        out: np.ndarray | None,
        augment: AugmentFn | None,
        load: Load | None,
        *,
        seed: int,
        n: int,
        shuffle: Shuffle,
        seed_globals: bool | None,
        generation: Any,
        worker_id: int = -1,
        status: WorkerStatus | None = None,
        shard: Shard = Shard(),
        target_inputs: Targets | None = None,
        cdf: np.ndarray | None = None,
        mix: Mix | None = None,
        target_made: dict[str, Any] | None = None,
        cast: bool = False,
    ) -> None:
        self.x = x  # read-only view of the dataset (or None with `load`)
        self.out = out  # (slots, batch_size, *sample_shape), shared; None until the probe is done
        self.augment = augment
        self._cast = cast  # `output_dtype` declared: samples of another dtype cast to it
        self.load = load
        self.target_inputs = target_inputs or {}  # read-only, all samples (or their loads)
        self.target_made = target_made or {}  # loads of targets passed on unmoved
        self.target_out: Targets = {}  # their ring blocks, as `out`
        self.orders = OrderCache(seed, n, shuffle, shard=shard, cdf=cdf)
        # MixUp / CutMix over the pairs of each task, once its rows are written (``mixing``)
        self.mix, self._seed, self._shard = mix, seed, shard.index
        # seed_globals None: unknown; watch the globals and seed them once a sample draws.
        watch = GlobalsWatch() if seed_globals is None else None
        self.watch = watch if watch is not None and watch.usable else None
        unwatchable = seed_globals is None and self.watch is None  # then seed them always
        self.seeder = SampleSeeder(seed, seed_globals=seed_globals is True or unwatchable,
                                   seed_torch=seed_globals is not False)
        self._torch_loaded = torch_generator() is not None  # (a sample that loads it: again)
        self.generation = generation  # the ring's shared per-slot generation counters
        self.worker_id, self.status = worker_id, status  # (status: its shared row, or None)
        self._op = op_name(augment) if augment is not None else "load"
        self._load_name = op_name(load) if load is not None else "x[index]"  # for error records
        self._stage = self._op  # the step a failing sample was in
        self._maker = "`augment`" if augment is not None else "`load`"  # what made an image
        self._took = _taking(augment)  # (a PIL image from `load`: an array for shmaug's ops)
        # a task's boxes moved together once its images are made (``targets.box_moves``)
        self._boxes_together = bool(self.target_inputs) and getattr(
            augment, "boxes_together", False) is True
        self._noted: Noted | None = None  # the boxes of the task being made, while it is
        self._index = -1  # the sample being made (for error records)
        self._loaded: Any = None  # the last sample as loaded, before `augment` (for the probe)
        # The hooks of the load and of the target sources' loads (masks in a bucket): a fetch
        # of a task's samples together, (name, hook, whether it takes ``ahead=``), and the
        # known order (a disk cache planning its eviction and fetches:
        # ``sources.cache.plan.CachePlan``), called with each task.
        loads = [load, *(t for t in (*self.target_inputs.values(), *self.target_made.values())
                         if not isinstance(t, np.ndarray))]
        self._prefetches: list[tuple[str, source.Hook, bool]] = []
        for fn in loads:
            hook, takes_ahead = source.prefetch_hook(fn)
            if hook is not None:
                self._prefetches.append((self._load_name if fn is load else op_name(fn), hook,
                                         takes_ahead))
        self._plans = [plan for plan in map(source.plan_hook, loads) if plan is not None]
        # a memory map's rows, asked a task at a time
        self._read_aheads = read_aheads_of((x, *self.target_inputs.values()))
        self.ahead: list[Task] = []  # the tasks received after the one running, in order
        # this process's whole decodes (``shmaug.whole_decodes``) its status row holds
        self._whole_decodes = whole_decodes.counts()

    def run(self, task: Task) -> Done | Failed | Probed:
        began = time.perf_counter()
        status = self.status
        if status is not None:  # which task, since when: for timeouts and crash blame
            status.started = time.monotonic()
            status.ticket = task.ticket
        self._index = -1
        if self.watch is not None:
            # What ran between tasks (workers=0: the user's code) is not ours, nor is a
            # Gaussian the generators hold back.
            self.watch.forget_cached()
        try:
            result: Done | Failed | Probed = (
                self._probe(task) if task.slot == PROBE_SLOT else self._fill(task))
        except Exception as exc:  # a failing sample never kills the worker
            record = ErrorRecord.capture(
                exc, traceback.format_exc(), worker_id=self.worker_id,
                sample_index=self._index, epoch=seed_epoch(task.epoch), op=self._stage,
                sample_name=source.sample_name(self.load, self._index),
            )
            result = Failed(task.ticket, record)
        if status is not None:
            status.ticket = IDLE
            status.busy_s += time.perf_counter() - began
            status.tasks_done += 1
            said, self._whole_decodes = self._whole_decodes, whole_decodes.counts()
            if said != self._whole_decodes:
                status.add_whole_decodes(tuple(
                    now - before for now, before in zip(self._whole_decodes, said)))
        return result

    def _streams(self, epoch: int, indices: np.ndarray) -> Any:
        # Per-sample streams also seed the globals, which a `load` may use too.
        seeded = self.augment is not None or self.seeder.seed_globals or self.watch is not None
        return self.seeder.streams(epoch, indices) if seeded else None

    def _fill(self, task: Task) -> Done:
        """Make the task's samples and write them into its rows of the ring slot."""
        indices = self.orders(task.epoch)[task.start : task.stop]
        keys = self.orders.keys(task.epoch, task.start, task.stop)
        epoch = seed_epoch(task.epoch)  # (the task's key may also say: in the dataset's order)
        streams = self._streams(epoch, keys)
        assert self.out is not None, "a task arrived before the ring (the probe comes first)"
        rows = self.out[task.slot]
        for read_ahead in self._read_aheads:
            read_ahead(indices)
        for plan in self._plans:  # the order of this epoch and of the next
            plan(task.epoch, self.orders(task.epoch), task.start, self.orders(task.epoch + 1))
        if self._prefetches and len(indices) and (
                self.generation[task.slot] == task.generation):
            # A source over a network fetches the task's samples together (and those of the
            # tasks behind it), never raising per sample; a timeout blames the first.
            self._index = int(indices[0])
            if self.status is not None:
                self.status.current_index = self._index
            ahead = self._ahead_indices() if self.wants_ahead else None
            for self._stage, hook, takes_ahead in self._prefetches:
                if takes_ahead:
                    hook(indices, ahead=ahead)
                else:
                    hook(indices)
        held: list[tuple[int, int, Targets, np.ndarray | None]] = []  # completed by settle
        noted: Noted = []  # the task's boxes, moved together once its images are made
        self._noted = noted if self._boxes_together else None
        try:
            for p, index, key in zip(range(task.start, task.stop), indices.tolist(),
                                     keys.tolist()):
                if self.generation[task.slot] != task.generation:
                    break  # the batch was cancelled: skip the rest
                self._index = index
                if self.status is not None:
                    self.status.current_index = index
                rng = next(streams) if streams is not None else None  # before `load`: it draws
                mark = len(noted)
                image, made = self._watched_sample(epoch, index, rng, key)
                self._stage = "writing the output"
                self._write(rows[p - task.row0], image, index)
                if len(noted) > mark:  # its boxes wait for the task's
                    held.append((p - task.row0, index,
                                 *self._held(made, task.slot, p - task.row0, index)))
                else:
                    self._write_targets(task.slot, p - task.row0, index, made)
        finally:
            self._noted = None
        if noted and self.generation[task.slot] == task.generation:
            self._stage = (f"{self._op} (moving the boxes of samples {held[0][1]} to "
                           f"{held[-1][1]} together)")
            settle(noted)
            self._stage = "writing the output"
            for row, self._index, made, masks in held:
                self._write_targets(task.slot, row, self._index,
                                    {name: t for name, t in made.items() if t is not masks})
        if self.mix is not None and not task.epoch & IN_ORDER and (
                self.generation[task.slot] == task.generation):  # a pass that trains
            self._stage, self._index = "mixing pairs (mix=)", int(indices[0])
            drawn = self.mix.draws(self._seed, epoch, self._shard, task.row0, len(rows),
                                   rows.shape[1:])
            self.mix.mix_rows(rows, task.start - task.row0, task.stop - task.row0, drawn)
        return Done(task.ticket)

    def _held(self, made: Targets, slot: int, row: int, index: int
              ) -> tuple[Targets, np.ndarray | None]:
        """A sample whose boxes wait for the task's: what they do not complete written now,
        and ``made`` (which ``settle`` completes) held with only what they do. One mask per
        box is written now too, and held as its row of the ring, where a dropped box's mask
        is zeroed in place (a task's masks are not held)."""
        self._write_targets(slot, row, index, {name: target for name, target in made.items()
                                               if name not in SETTLED or name == "masks"})
        for name in made.keys() - SETTLED:
            del made[name]
        masks = None
        if "masks" in made:
            masks = made["masks"] = self.target_out["masks"][slot, row]
        return made, masks

    def _write_targets(self, slot: int, row: int, index: int, made: Targets) -> None:
        for name, target in made.items():
            self._write(self.target_out[name][slot, row, ...], target, index, name)  # (0-d: a view)

    @property
    def wants_ahead(self) -> bool:
        """Whether a load fetches the samples of the tasks queued behind (``ahead``)."""
        return any(takes_ahead for _, _, takes_ahead in self._prefetches)

    def _ahead_indices(self) -> np.ndarray:
        """The samples of the tasks queued behind this one (not cancelled), in order."""
        parts = [self.orders(t.epoch)[t.start:t.stop] for t in self.ahead
                 if t.slot != PROBE_SLOT and self.generation[t.slot] == t.generation]
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def _probe(self, task: Task) -> Probed:
        """Sample 0 of epoch 0, made exactly as in an epoch, described instead of written."""
        self._index = 0
        if self.status is not None:
            self.status.current_index = 0
        streams = self._streams(0, np.zeros(1, np.int64))
        image, made = self._watched_sample(0, 0, next(streams) if streams is not None else None,
                                           0)
        out = sample_output(image, self._maker)
        targets = {}
        for name, target in made.items():
            target = sample_output(target, self._maker, f"target {name!r}")
            targets[name] = (tuple(target.shape), dtype_text(target.dtype))
        probe = Probe(tuple(out.shape), dtype_text(out.dtype), *_as_loaded(self._loaded),
                      targets=targets)
        return Probed(task.ticket, probe)

    def _watched_sample(self, epoch: int, index: int, rng: np.random.Generator | None,
                        key: int) -> tuple[Any, Targets]:
        """``_sample``; when it drew from the unseeded globals (while they are watched), seed
        them from now on and make it again, as every sample will be made (also when the
        unseeded attempt raised)."""
        mark = len(self._noted) if self._noted is not None else 0
        try:
            sample = self._sample(index, rng)
        except Exception:
            if not self._drew_from_globals():
                raise
            self._forget(mark)
            return self._sample(index, self.seeder.restream(epoch, key))
        if self._drew_from_globals():
            self._forget(mark)
            sample = self._sample(index, self.seeder.restream(epoch, key))
        return sample

    def _forget(self, mark: int) -> None:
        """Drop the boxes the attempt that is made again noted for the task."""
        if self._noted is not None:
            del self._noted[mark:]

    def _drew_from_globals(self) -> bool:
        """Whether the last sample drew from a global generator not yet seeded; it is seeded
        per sample from now on (the watch ends once both are). torch's, seeded wherever it is
        loaded (here, or by ``from_pil`` / ``from_array``), was not for a sample during which
        it loaded."""
        torch_came = not self._torch_loaded and torch_generator() is not None
        self._torch_loaded |= torch_came
        if self.watch is None:
            return torch_came
        python, numpy = self.watch.moved()
        seeder = self.seeder
        python, numpy = python and not seeder.seed_python, numpy and not seeder.seed_numpy
        if not (python or numpy):
            return torch_came
        seeder.seed_python |= python
        seeder.seed_numpy |= numpy
        if seeder.seed_python and seeder.seed_numpy:
            self.watch = None
        return True

    def _sample(self, index: int, rng: np.random.Generator | None) -> tuple[Any, Targets]:
        """Sample ``index``, loaded and augmented, and its augmented targets (``_stage`` names
        the step, for errors)."""
        self._stage = self._load_name
        image = self._loaded = self.x[index] if self.load is None else self._took(self.load(index))
        if isinstance(image, tuple) and self.load is not None and (
                self.augment is None or hasattr(self.augment, "with_value_range")):
            # (a function of the user's takes what its own load returns: a stereo pair)
            raise ArgumentTypeError(
                f"`{self._load_name}` returned a tuple of {len(image)} for sample index {index}, "
                f"as a torch Dataset's __getitem__ returns (image, label); it returns the image "
                f"alone. Fix: return the image (e.g. `return np.asarray(self[index][0])`), "
                f"and pass the labels as `y`.")
        passed = self._rows(self.target_made, index)
        if self.augment is None or rng is None:
            return image, passed
        if not self.target_inputs:
            self._stage = self._op
            return self._array(self.augment(image, rng), index), passed
        given = self._rows(self.target_inputs, index)
        self._stage = self._op
        op: TargetAugment = self.augment  # type: ignore[assignment]  # the loader checked it
        with deferring(self._noted):  # (this call's boxes join the task's, if it takes them)
            image, made = op.augment_targets(image, given, rng)
        image = self._array(image, index)
        if not isinstance(made, dict) or made.keys() != given.keys():
            raise OutputMismatchError(
                f"{self._op}.augment_targets returned targets "
                f"{sorted(made) if isinstance(made, dict) else type(made).__name__} for sample "
                f"index {index}; expected a dict of {sorted(given)}. Fix: return (image, "
                f"{{name: target}}) with every target it was given.")
        if self._noted is not None:  # (shmaug's own dict: the task's boxes settle into it)
            made.update(passed)
            return image, made
        return image, {**made, **passed}

    def _rows(self, targets: dict[str, Any], index: int) -> Targets:
        """Sample ``index``'s row of each target: an array's, or made by a source's ``load``
        (``_stage`` names it, for errors)."""
        rows = {}
        for name, target in targets.items():
            if isinstance(target, np.ndarray):
                rows[name] = target[index]
            else:
                self._stage = op_name(target)
                rows[name] = row = target(index)
                if not isinstance(row, (np.ndarray, Undrawn)) or row.dtype.kind not in "biuf" \
                        or len(row.shape) < 2:
                    raise ArgumentTypeError(
                        f"`{self._stage}` (the target source of {name}) returned "
                        f"{type(row).__name__} {getattr(row, 'dtype', '')} of shape "
                        f"{np.shape(row)} for sample index {index}; a target's row must be a "
                        f"numeric array of at least 2 dimensions (a mask (H, W[, 1])). Fix: "
                        f"return one from its load(index).")
        return rows

    def _array(self, out: Any, index: int) -> np.ndarray:
        """What `augment` returned, if it is a numpy array: a list, a PIL image or a tensor is
        refused, not converted (a list of uint8 pixels would become an int64 batch)."""
        if isinstance(out, np.ndarray):
            return out
        kind = type(out).__module__.replace("builtins", "")
        kind += f"{'.' if kind else ''}{type(out).__qualname__}"
        if hasattr(out, "dtype"):  # a tensor: its dtype is known, and may be what is wanted
            fix = ("Fix: return it as a numpy array of its own dtype, e.g. `result.numpy()` "
                   "(a torch tensor on a GPU: `result.cpu().numpy()`) or "
                   "`np.asarray(result)`: a batch takes sample 0's dtype, a float [0, 1] "
                   "image included.")
        elif _several_images(out):
            fix = ("Several images of one sample (views, crops) make one array. Fix: return them "
                   "stacked, `np.stack(views)`, or, of several sizes, packed flat "
                   "(docs/ops.md, \"Several views of each sample\"); a Sequence's `model_inputs` "
                   "hook names them for a model's inputs.")
        elif isinstance(out, (list, tuple, dict)) and len(out) > 1 and all(
                isinstance(v, np.ndarray) for v in (out.values() if isinstance(out, dict)
                                                    else out)):
            fix = ("An image and what lies on it (a mask, boxes) are moved together by an "
                   "object with `target_names` and `augment_targets(image, targets, rng)` "
                   "(docs/ops.md, \"Bring your own function\"), or by "
                   "`shmaug.from_albumentations(...)`. Fix: return the image alone from "
                   "`augment`, and give the targets in `y`.")
        else:
            fix = ("shmaug does not convert it, as its dtype would be a guess (a list of uint8 "
                   "pixels becomes int64). Fix: return an array in the image's dtype, e.g. "
                   "`np.asarray(result, dtype=image.dtype)`.")
        raise ArgumentTypeError(
            f"`augment` ({self._op}) must return the image as a numpy array; on sample index "
            f"{index} it returned {kind}. {fix}")

    def _write(self, row: np.ndarray, image: Any, index: int, target: str | None = None
               ) -> None:
        image = np.asarray(image)
        if image.shape == row.shape and image.dtype == row.dtype:
            row[...] = image  # the common case, a little cheaper than copyto's checks
            return
        # (`output_dtype` casts values without scaling them: offered only within a kind)
        of = "" if target is None else f" (target {target!r})"
        dtype_arg = f", or pass `output_dtype={image.dtype}`" if target is None and \
            image.dtype.kind == row.dtype.kind else ""
        if image.shape != row.shape:
            raise OutputMismatchError(
                f"Sample index {index} produced{of} shape {image.shape} but the batch expects "
                f"{row.shape} (learned from the first sample or `output_shape`). Fix: "
                f"{_shape_fix(image.shape, row.shape, self._maker, target)}.")
        # Another float width is only rounding; a declared `output_dtype` asks for a cast
        # within a kind or to a wider one (uint8 into float32, float32 into bfloat16), but
        # for integers that would wrap. Anything else is an op that made another dtype than
        # sample 0's: uint16 would wrap in a uint8 batch, uint8 values sit among [0, 1] ones.
        src, dst = image.dtype, row.dtype
        wraps = src.kind in "biu" and dst.kind in "iu" and not np.can_cast(src, dst, "safe")
        if not (src.kind == dst.kind == "f"
                or self._cast and np.can_cast(src, dst, "same_kind") and not wraps):
            whence = "`output_dtype`" if self._cast else "sample 0's"
            raise OutputMismatchError(
                f"Sample index {index} produced{of} dtype {image.dtype}, which the batch's "
                f"dtype {row.dtype} ({whence}) "
                f"would hold only wrapped or on another scale. Fix: return {row.dtype} from "
                f"{self._maker} for every sample, scaled to its range{dtype_arg}.")
        if dst == np.float16 and (src.kind == "f" or src.itemsize >= 2) and image.size:
            _refuse_float16_overflow(image, index, of)
        np.copyto(row, image, casting="unsafe")  # (checked above)


_FLOAT16_INF = 65520.0  # float16 rounds what lies below to 65504, its largest value


def _refuse_float16_overflow(image: np.ndarray, index: int, of: str) -> None:
    """A float16 batch holds at most 65504: a brighter 16-bit pixel or a float above that
    would become inf, and training on it silently fails."""
    # fmin / fmax pass over NaN (a masked pixel), which min / max return, hiding every other
    # value; over all axes at once, no flattened copy of a strided sample
    low = float(np.fmin.reduce(image, axis=None))
    high = float(np.fmax.reduce(image, axis=None))
    if max(high, -low) >= _FLOAT16_INF:
        raise OutputMismatchError(
            f"Sample index {index} produced{of} {image.dtype} values spanning {low:g}..{high:g}, "
            f"but the batch is float16 (`output_dtype`), whose largest value is 65504: the "
            f"rest would become inf. Fix: scale the samples down (divide by 65535, in "
            f"`augment` or in `x` itself: float16 then keeps about 11 bits of each level), or "
            f"pass `output_dtype='float32'` ('bfloat16' keeps the range but 8 bits: 65535 "
            f"becomes 65536, 30001 becomes 29952).")


def _several_images(out: Any) -> bool:
    """Whether ``out`` holds several images of one layout: views of one size, or three or
    more crops of several (DINO's), or views by name; not an image and its mask or heatmap (a
    pair of two sizes, or a dict with an ``image``)."""
    if isinstance(out, dict):
        return "image" not in out and len({getattr(v, "shape", None) for v in out.values()}) \
            == 1 and _several_images(list(out.values()))
    if not isinstance(out, (list, tuple)) or len(out) < 2 or not all(
            isinstance(v, np.ndarray) and v.ndim == out[0].ndim >= 2 and
            v.shape[2:] == out[0].shape[2:] for v in out):
        return False
    return len(out) > 2 or out[0].shape == out[1].shape


def _taking(augment: Any) -> Callable[[Any], Any]:
    """How a ``load``'s sample is taken: a PIL image (torchvision's habit) as an array where
    shmaug's ops or nothing follow (a user's function takes it as it is: PIL's methods)."""
    return _pil_as_array if augment is None or hasattr(augment, "with_value_range") \
        else _as_it_is


def _pil_as_array(loaded: Any) -> Any:
    return np.asarray(loaded) if type(loaded).__module__.startswith("PIL.") else loaded


def _as_it_is(loaded: Any) -> Any:
    return loaded


def _shape_fix(made: tuple[int, ...], expected: tuple[int, ...], maker: str,
               target: str | None) -> str:
    """The fix for a sample of shape ``made`` where the batch holds ``expected``: another
    channel count where both are images (H, W[, C]) of one height and width, else one shape
    from ``maker`` (what made it: `augment` or `load`)."""
    images = target is None and 2 <= len(made) <= 3 and 2 <= len(expected) <= 3
    if images and made[:2] == expected[1::-1] and made[2:] == expected[2:]:
        return (f"its height and width are the batch's swapped (a portrait image among "
                f"landscape ones, or an odd quarter turn, `rot90`, of a non-square image): "
                f"make {maker} end in one size (a `resize` or `crop`; a square one before "
                f"`rot90`), or keep to half turns (`Maybe(Op('rot90', k=2))`)")
    if not images or made[:2] != expected[:2]:
        return (f"make {maker} return one shape for every sample (resize, crop or pad); a "
                f"size changed on purpose between epochs (a progressive resize) takes a new "
                f"Sequence or Loader per size (docs/loader.md, \"Changing settings between "
                f"epochs\")")
    channels = ("one channel, (H, W)" if len(expected) == 2 else
                f"{expected[2]} channels, (H, W, {expected[2]})")
    return (f"give every image {channels}: convert one of another channel count (grayscale "
            f"beside RGB, RGBA) where it is read (`color_mode=` of a file source; in a `load` "
            f"of yours e.g. `np.asarray(PIL.Image.open(path).convert('RGB'))`)"
            + (", and keep the channel count in `augment`" if maker == "`augment`" else ""))


def _as_loaded(loaded: Any) -> tuple[str, tuple[float, float] | None, bool]:
    """Sample 0 as loaded, for the probe: its dtype, finite range (None: none finite) and
    whether it holds NaN or infinity. A file's pixels not yet decoded (a decode-time crop
    follows) are taken to span their dtype's range, as photos do (decoding an 8000x6000 scan
    whole for its own made the loader's start cost ten epochs of crops): a `value_range`
    narrower than the files' dtype is refused as it was."""
    if isinstance(loaded, Undecoded):
        info = np.iinfo(loaded.dtype)
        return dtype_text(loaded.dtype), (float(info.min), float(info.max)), False
    pixels = np.asarray(loaded)
    numeric = pixels.dtype.kind in "biuf" and pixels.size > 0
    finite = pixels[np.isfinite(pixels)] if numeric and pixels.dtype.kind == "f" else pixels
    span = (float(finite.min()), float(finite.max())) if numeric and finite.size else None
    return dtype_text(pixels.dtype), span, bool(numeric and finite.size < pixels.size)
