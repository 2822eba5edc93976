"""``y`` as a tree: the targets a loader is given, found by name in its dicts, lists and
tuples (``filed_under``), read at a path (``leaf``), and gathered per batch (``gather``); what the
checks (``inputs``) and the engine share, before anything starts and at every batch."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ...memory.ragged import RaggedImages
from ...ops.targets.sample import BOX_LABELS
from .. import source


def is_target_source(value: Any) -> bool:
    """Whether a target is a source whose rows the workers make (``load(index)``, like an
    image source: ``shmaug.sources.MaskFiles``, COCO's masks), rather than an array."""
    return not isinstance(value, np.ndarray) and isinstance(value, source.Source) and callable(
        getattr(value, "load", None))


Path = tuple[Any, ...]
"""Where an entry lies in ``y``: the keys (of dicts) and indices (of lists and tuples) from
its root, e.g. ``("bounding_boxes", "labels")``. A target the workers make is matched back to
its place in ``y`` by it (``gather``)."""


class Filed(NamedTuple):
    """A target found in ``y``: its name inside (Keras' or albumentations'; the labels beside
    boxes are ``box_labels``), where it lies, and the array (or target source)."""

    name: str
    path: Path
    value: Any


def made_targets(y: Any, moved: dict[str, Filed], at: Path = ()) -> dict[str, Filed]:
    """The target sources of ``y`` that `augment` does not move (``moved``), by where they
    are as the user reads it (``"y['masks']"``, ``shown``): the workers make their rows and
    pass them as they are."""
    if is_target_source(y):
        return {} if any(at == m.path for m in moved.values()) else {shown(at): Filed(
            shown(at), at, y)}
    items = y.items() if isinstance(y, dict) else (
        enumerate(y) if isinstance(y, (list, tuple)) else ())
    found: dict[str, Filed] = {}
    for key, value in items:
        found.update(made_targets(value, moved, (*at, key)))
    return found


def shown(at: Path) -> str:
    """``at`` as the user reads it: ``y['masks']``, ``y[0]``."""
    return "y" + "".join(f"[{key!r}]" for key in at)


def only_leaf(y: Any, at: Path = ()) -> Path | None:
    """Where the one array of ``y`` lies (``Mix.label_array``'s: ``y`` itself, or the only
    array in a dict / list / tuple); None where there is not one."""
    found = list(leaves(y, at))
    return found[0][0] if len(found) == 1 else None


def emptied(tree: Any) -> Any:
    """``tree`` (``x``, ``y``, targets by name) with each array an empty one of its dtype and
    sample shape, dicts, lists and tuples kept: what a closed loader holds instead of the
    user's arrays. Other values (a source's paths) stay."""
    if isinstance(tree, dict):
        return {k: emptied(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        items = [emptied(v) for v in tree]
        return tuple(items) if isinstance(tree, tuple) else items  # (a namedtuple's too)
    if isinstance(tree, np.ndarray):  # (not tree[:0]: a view keeps the whole array alive)
        return np.empty((0, *tree.shape[1:]), tree.dtype)
    if isinstance(tree, RaggedImages):
        return tree.released()
    return tree


def leaf(y: Any, at: Path) -> Any:
    """The entry of ``y`` at ``at``."""
    for key in at:
        y = y[key]
    return y


def side_named(at: Path) -> str:
    """The array at ``at`` of a Sequence's side dict as the user names it: ``x['meta']`` (its
    other ``inputs``), ``sample_weight[...]``, ``y[...]``."""
    return {"inputs": "x", "sample_weight": "sample_weight"}.get(str(at[0]), "y") + "".join(
        f"[{key!r}]" for key in at[1:])


def leaves(y: Any, at: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every leaf of ``y`` but None (dicts, lists and tuples looked into), with its path."""
    if isinstance(y, dict):
        for key, value in y.items():
            yield from leaves(value, (*at, key))
    elif isinstance(y, (list, tuple)):
        for i, value in enumerate(y):
            yield from leaves(value, (*at, i))
    elif y is not None:
        yield at, y


def holds_text(value: Any) -> bool:
    """Whether ``value`` is an array of text (a DataFrame's class names), which no loss
    takes."""
    return isinstance(value, np.ndarray) and value.dtype.kind in "USO" and value.size > 0 \
        and isinstance(value.flat[0], (str, bytes))


BOX_LABEL_KEYS = ("labels", "classes")  # beside "boxes": Keras' (and keras-hub's), KerasCV's


def filed_under(y: Any, names: Collection[str], at: Path = ()) -> Iterator[Filed]:
    """The arrays (and target sources) filed in any dict of ``y`` under one of ``names``,
    depth first, in order (one so filed is not looked into). A dict holding ``boxes`` is
    Keras' box layout (``bounding_boxes``, or keras-hub's y): its ``labels`` (KerasCV's
    ``classes``) are the boxes' (named ``box_labels`` inside, found again by their path)."""
    boxes = isinstance(y, dict) and isinstance(y.get("boxes"), np.ndarray)
    # the boxes' labels: of "labels" (Keras') and "classes" (KerasCV's), the one of a label
    # per box row, (N, M) (a multi-task y's other may be an image's own class)
    label_key = None
    if boxes:
        rows = y["boxes"].shape[:2]
        present = [k for k in BOX_LABEL_KEYS if k in y]
        label_key = next((k for k in present if getattr(y[k], "shape", ())[:2] == rows),
                         present[0] if present else None)
    items = y.items() if isinstance(y, dict) else (
        enumerate(y) if isinstance(y, (list, tuple)) else ())
    for key, value in items:
        if boxes and key == label_key:  # (an object that moves boxes itself names
            named = str(key) if key in names else BOX_LABELS  # them as they are in y)
            if named in names and isinstance(value, np.ndarray):
                yield Filed(named, (*at, key), value)
        elif isinstance(y, dict) and key in names and (
                isinstance(value, np.ndarray) or is_target_source(value)):
            yield Filed(str(key), (*at, key), value)
        else:
            yield from filed_under(value, names, (*at, key))


def gather(y: Any, positions: np.ndarray, made: Mapping[Path, np.ndarray] | None = None,
           at: Path = ()) -> Any:
    """The batch's rows of ``y``; an array whose place in ``y`` (``at``, its ``Path``) is
    in ``made`` (a target the workers made, already batched) is taken from there."""
    if y is None:
        return None
    if isinstance(y, dict):
        return {k: gather(v, positions, made, (*at, k)) for k, v in y.items()}
    if isinstance(y, (list, tuple)):
        return type(y)(gather(v, positions, made, (*at, i)) for i, v in enumerate(y))
    if made and at in made:
        return made[at]
    return y[positions]
