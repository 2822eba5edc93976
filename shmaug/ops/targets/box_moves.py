"""Boxes moved through their samples' moves, the boxes of many samples in one set of numpy
calls: a task's (``deferring``, then ``settle``), or one sample's alone.

Why: 10 boxes cost a sample what the numpy calls cost, not their arithmetic (about 30 calls,
each 1-3 µs after the image's warp has evicted what numpy uses), as much as a flip of the
image itself. A worker's task moves the boxes of all its samples once their images are made
(``engine.workers.runner``): the same calls, over every box of the task.

Each sample's boxes move as ``sample.move`` states (the box of the moved outline, clipped to
each move's output; dropped when nothing, too little of its moved area, or too small an area
is left). The arithmetic is elementwise, row by row, so a box moves to the same bits alone or
among a task's: the batches stay bit-identical whatever the worker count.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from . import formats
from .moves import IDENTITY_EDGES, MatrixMove, Move, boxes as moved_boxes, through_matrices

if TYPE_CHECKING:
    from .sample import TargetOptions


@dataclass(slots=True)
class Pending:
    """One sample's boxes (M, >= 4) and their labels, waiting for ``moves``; ``out`` is the
    dict of its moved targets, which ``settle`` completes (``name``: the boxes' key in it)."""

    out: dict[str, np.ndarray]
    name: str
    rows: np.ndarray
    labels: np.ndarray | None
    moves: list[Move]
    shape: tuple[int, ...]  # its image's, before the moves
    masks_given: bool  # out's "masks" are the sample's own (copied before a dropped box's goes)


LEAST_SIDE = 1e-3
"""Pixels a moved box's side must keep, else nothing of it is left: a box whose edge lay on
the crop's edge keeps a sliver of float32's rounding in the ``rel_`` formats (about 6e-8 of
the image's side), none in the others; a side that thin is no box in any. (Past about
16,000 pixels a side, such a sliver outgrows it.)"""

Noted = list[tuple["Pending", str, "TargetOptions"]]
"""A task's boxes waiting to move together (``settle``)."""

_NOTED: contextvars.ContextVar[Noted | None] = contextvars.ContextVar(
    "shmaug_noted_boxes", default=None)


@contextlib.contextmanager
def deferring(noted: Noted | None) -> Iterator[None]:
    """Within, the pipeline call that claims it (``claimed``) leaves its sample's boxes
    unmoved in the dict it returns and notes them in ``noted``, until ``settle(noted)`` moves
    them and completes that dict. For a caller that reads no box before then: the engine's
    runner, around its own call of shmaug's pipeline. None: boxes move at once."""
    token = _NOTED.set(noted)
    try:
        yield
    finally:
        _NOTED.reset(token)


@contextlib.contextmanager
def claimed() -> Iterator[Noted | None]:
    """What an enclosing ``deferring`` opened, taken by the pipeline call that moves one
    sample's targets; cleared within, so that whatever runs inside (an op, or a user's code
    calling a pipeline of its own) gets its boxes moved."""
    noted = _NOTED.get()
    token = _NOTED.set(None)
    try:
        yield noted
    finally:
        _NOTED.reset(token)


def defer(pending: Pending, fmt: str, options: TargetOptions, noted: Noted | None) -> None:
    """Move ``pending``'s boxes now, or note them in ``noted`` to move with the task's. A
    sample a field moves is moved now: its boxes follow their outlines sample by sample in any
    case, and the task would hold its fields (8 bytes a pixel)."""
    if noted is None or not all(isinstance(m, MatrixMove) for m in pending.moves):
        _settle([pending], fmt, options)
    else:
        noted.append((pending, fmt, options))


def settle(noted: Noted) -> None:
    """Move the boxes noted under ``deferring``, samples alike (format, options, layout) at
    once, and complete their samples' dicts."""
    groups: dict[tuple[object, ...], tuple[str, TargetOptions, list[Pending]]] = {}
    for pending, fmt, options in noted:
        labels = pending.labels
        key = (fmt, options, pending.rows.dtype, pending.rows.shape[1:], None if labels is None
               else (labels.dtype, labels.shape[1:]))
        groups.setdefault(key, (fmt, options, []))[2].append(pending)
    for fmt, options, group in groups.values():
        _settle(group, fmt, options)


def _settle(group: list[Pending], fmt: str, options: TargetOptions) -> None:
    """Move the boxes of ``group`` (one layout) and write them, their labels and (one mask per
    box) their masks into each sample's ``out``."""
    rows = _joined([p.rows for p in group])
    if not len(rows):  # no boxes in the whole dataset: nothing to move
        for p in group:
            p.out[p.name] = p.rows.copy()
            if p.labels is not None:
                p.out[formats.BOX_LABELS] = p.labels.copy()
        return
    labels = None if group[0].labels is None else _joined(
        [p.labels for p in group if p.labels is not None])
    counts = [len(p.rows) for p in group]
    real = ~formats.padding(rows[:, :4], None if labels is None else
                            labels.reshape(len(rows), -1)[:, 0])
    owner = np.repeat(np.arange(len(group)), counts)[real] if len(group) > 1 else None
    sizes = [p.shape[:2] for p in group]  # each sample's (height, width), as it moves
    xyxy = formats.to_xyxy(rows[real], fmt, *_per_row(sizes, owner))
    xyxy, alive = _moved(group, owner, xyxy, sizes, options)
    kept = real.copy()
    kept[real] = alive
    out = np.full_like(rows, formats.PAD)
    written = formats.from_xyxy(xyxy[alive], fmt, *_per_row(sizes, owner, alive))
    out[kept, :4] = written if rows.dtype.kind == "f" else np.rint(written)
    if rows.shape[1] > 4:  # extra columns (albumentations' label columns) ride along
        out[kept, 4:] = rows[kept, 4:]
    if labels is not None:
        labels = labels.copy()
        labels[~kept] = formats.PAD
    start = 0
    for p, count in zip(group, counts):
        part = slice(start, start + count) if len(group) > 1 else slice(None)
        start += count
        p.out[p.name] = out[part]
        if labels is not None:
            p.out[formats.BOX_LABELS] = labels[part]
        stack = p.out.get("masks")
        if stack is not None and len(stack) == count and not kept[part].all():
            stack = p.out["masks"] = stack.copy() if p.masks_given else stack
            stack[~kept[part]] = 0  # one mask per box row: a dropped box's goes with it


def _moved(group: list[Pending], owner: np.ndarray | None, xyxy: np.ndarray,
           sizes: list[tuple[int, ...]], options: TargetOptions
           ) -> tuple[np.ndarray, np.ndarray]:
    """The real boxes (``xyxy``, pixels; ``owner``: each one's sample, None for one sample)
    moved and clipped through their samples' moves, and which of them are kept; ``sizes``
    ends as each sample's final (height, width)."""
    given = xyxy[:, 2:] - xyxy[:, :2] > LEAST_SIDE  # a box given with no area (a line, a
    alive = given[:, 0] & given[:, 1]  # point) is dropped: a rotation made a real box of it
    visible = np.ones(len(xyxy)) if options.min_visibility else None  # the share inside
    for k in range(max(len(p.moves) for p in group)):
        step = [p.moves[k] if k < len(p.moves) else None for p in group]
        at: slice | np.ndarray = slice(None)  # the rows of the samples that move
        if owner is not None and None in step:
            at = np.flatnonzero(np.array([m is not None for m in step])[owner])
        box, of = xyxy[at], None if owner is None else owner[at]
        edges = [m.edges() if isinstance(m, MatrixMove) else IDENTITY_EDGES for m in step]
        perspective = any(e[6:] != IDENTITY_EDGES[6:] for e in edges)
        table = np.array(edges)
        moved = through_matrices(table if of is None else table[of], box, perspective)
        for s, m in enumerate(step):
            if m is not None:
                sizes[s] = m.size
                if not isinstance(m, MatrixMove):  # a field's boxes, sample by sample
                    mine = slice(None) if of is None else of == s
                    moved[mine] = moved_boxes(m, box[mine])
        extent = np.array([(w, h, w, h) for h, w in sizes], np.float64)
        clipped = np.minimum(np.maximum(moved, 0.0), extent if of is None else extent[of])
        sides = clipped[:, 2:] - clipped[:, :2] > LEAST_SIDE  # (clipped: some area inside)
        inside = sides[:, 0] & sides[:, 1]  # (a reduction costs numpy 3x more on 2 columns)
        share = None
        if visible is not None:
            area, full = _area(clipped), _area(moved)
            share = np.divide(area, full, out=np.zeros_like(area), where=full > 0)
        if isinstance(at, slice):  # every row moved
            xyxy, alive = clipped, alive & inside
            visible = None if share is None else visible * share
        else:
            xyxy[at], alive[at] = clipped, alive[at] & inside
            if visible is not None:
                visible[at] *= share
    if visible is not None:
        alive &= visible >= options.min_visibility
    if options.min_area:
        alive &= _area(xyxy) >= options.min_area
    return xyxy, alive


def _per_row(sizes: list[tuple[int, ...]], owner: np.ndarray | None,
             rows: np.ndarray | None = None) -> tuple[Any, Any]:
    """(height, width) for each box row (``owner``: their samples; ``rows``: which of them),
    or the one sample's as numbers."""
    if owner is None:
        return float(sizes[0][0]), float(sizes[0][1])
    per_box = np.array(sizes, np.float64)[owner if rows is None else owner[rows]]
    return per_box[:, 0], per_box[:, 1]


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _area(xyxy: np.ndarray) -> np.ndarray:
    sides = np.maximum(xyxy[:, 2:4] - xyxy[:, :2], 0.0)
    area: np.ndarray = sides[:, 0] * sides[:, 1]
    return area
