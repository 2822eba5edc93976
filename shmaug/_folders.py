"""Keras' folder conventions: which files a directory holds, their labels, and the split.

``ImageFiles.from_directory`` follows ``keras.utils.image_dataset_from_directory``:

- ``labels="inferred"``: one sub-folder per class (names sorted, or ``class_names`` to pick and
  order them; folders whose name starts with "." are not classes), files searched recursively;
  ``labels=None`` or ``label_mode=None``: every image under the folder, unlabelled; a list of
  ints: one label per image in the order Keras lists them (the walk sorted by folder path, files
  sorted within a folder), class names their sorted distinct values.
- ``validation_split`` / ``subset`` / ``seed``: the files are shuffled as Keras shuffles them
  (``np.random.RandomState(seed).shuffle``), the last ``int(validation_split * n)`` are the
  validation subset and the others the training subset, so each subset holds the files Keras
  puts in it for the same folder and seed. Within a subset files stay in folder order (the
  loader's ``shuffle`` shuffles the epochs).
- ``label_mode``: "int" (class index), "categorical" (one-hot float32), "binary" (float32
  0 or 1, shape (n, 1)), None (no labels).

This module only lists, labels and splits; decoding is ``_decode.py``'s and the source object is
``files.py``'s. It starts no process and reads no image.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .errors import ArgumentError, ArgumentTypeError

# Keras' image_dataset_from_directory list, plus what OpenCV / PIL also decode.
EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
LABEL_MODES = ("int", "categorical", "binary", None)
SUBSETS = ("training", "validation", "both")


def got(value: Any) -> str:
    text = repr(value)
    return f"{text[:57] + '...' if len(text) > 60 else text} (type {type(value).__name__})"


def walk(root: str, follow_links: bool, recursive: bool = True) -> list[str]:
    """Image files under ``root`` in Keras' order: folders sorted by path, files by name;
    other files are ignored (as Keras does)."""
    found = []
    for dirpath, _, filenames in os.walk(root, followlinks=follow_links):
        found.append((dirpath, filenames))
        if not recursive:
            break
    found.sort(key=lambda entry: entry[0])
    out: list[str] = []
    for dirpath, filenames in found:
        prefix = os.path.join(dirpath, "")
        out += [prefix + f for f in sorted(filenames) if f.lower().endswith(EXTENSIONS)]
    return out


def class_folders(root: str, class_names: Sequence[str] | None) -> list[str]:
    """The class sub-folders of ``root``: sorted, hidden ones left out, or ``class_names``."""
    subdirs = sorted(e.name for e in os.scandir(root)
                     if e.is_dir(follow_symlinks=True) and not e.name.startswith("."))
    if class_names is None:
        return subdirs
    if isinstance(class_names, str):
        raise ArgumentTypeError(
            f"`class_names` must be a list of sub-folder names; received the single string "
            f"{class_names!r}. Fix: pass `class_names=[{class_names!r}, ...]`."
        )
    missing = sorted(set(class_names) - set(subdirs))
    if missing:
        raise ArgumentError(
            f"`class_names` must name sub-folders of {root!r}; these are not there: "
            f"{missing} (found {subdirs}). Fix: correct the names or the folder."
        )
    return [str(c) for c in class_names]


def check_labels_args(labels: Any, label_mode: Any, class_names: Any) -> None:
    """Keras' rules for ``labels``, ``label_mode`` and ``class_names``, with the fix."""
    if label_mode not in LABEL_MODES:
        raise ArgumentError(
            f"`label_mode` must be 'int', 'categorical', 'binary' or None; received "
            f"{got(label_mode)}. Fix: 'int' for sparse_categorical_crossentropy, "
            f"'categorical' for categorical_crossentropy, 'binary' for two classes."
        )
    if isinstance(labels, str):
        if labels != "inferred":
            raise ArgumentError(
                f"`labels` must be 'inferred', None or a list of ints (one per image); "
                f"received {labels!r}. Fix: `labels='inferred'` takes the class from the "
                f"sub-folder."
            )
        return
    if labels is not None and not _int_sequence(labels):
        raise ArgumentTypeError(
            f"`labels` must be 'inferred', None or a list of ints (one per image, in the "
            f"order the folder is listed); received {got(labels)}. Fix: pass "
            f"`labels='inferred'` to take the class from the sub-folder."
        )
    if class_names is not None:
        which = "labels=None (no labels)" if labels is None else "a list of `labels`"
        raise ArgumentError(
            f"`class_names` can only be passed with labels='inferred'; received {which} and "
            f"class_names={list(class_names)!r}. Fix: drop `class_names` (with a list of "
            f"labels the class names are the sorted distinct labels)."
        )


def _int_sequence(value: Any) -> bool:
    if isinstance(value, (bytes, dict)) or not hasattr(value, "__len__"):
        return False
    array = np.asarray(value)
    return array.ndim == 1 and (array.dtype.kind in "iu" or len(array) == 0)


def check_split_args(validation_split: Any, subset: Any, seed: Any) -> None:
    """Keras' rules for ``validation_split``, ``subset`` and ``seed``, with the fix."""
    if validation_split is not None and (isinstance(validation_split, bool) or not isinstance(
            validation_split, (int, float, np.integer, np.floating))
            or not 0 < validation_split < 1):
        raise ArgumentError(
            f"`validation_split` must be a number between 0 and 1 (exclusive); received "
            f"{got(validation_split)}. Fix: e.g. `validation_split=0.2`."
        )
    if subset is not None and subset not in SUBSETS:
        raise ArgumentError(
            f"`subset` must be 'training', 'validation' or 'both'; received {got(subset)}. "
            f"Fix: 'both' returns the two subsets as a (training, validation) tuple."
        )
    if (validation_split is None) != (subset is None):
        given, missing = (("validation_split", "subset") if subset is None
                          else ("subset", "validation_split"))
        raise ArgumentError(
            f"`{given}` needs `{missing}` (as in Keras, one without the other means nothing); "
            f"received validation_split={validation_split!r}, subset={subset!r}. Fix: pass "
            f"both, e.g. `validation_split=0.2, subset='training', seed=1337`."
        )
    if validation_split is not None and (seed is None or isinstance(seed, bool) or not isinstance(
            seed, (int, np.integer)) or not 0 <= seed < 2**32):
        raise ArgumentError(
            f"`seed` must be an int in [0, 2**32) with `validation_split`, so that the "
            f"training and validation subsets (each made by its own call) do not overlap; "
            f"received {got(seed)}. Fix: pass the same `seed=` to both calls, e.g. "
            f"`seed=1337`."
        )


def split(n: int, validation_split: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions (in folder order, sorted) of Keras' training and validation subsets."""
    count = int(validation_split * n)
    if count == 0 or count == n:
        raise ArgumentError(
            f"`validation_split`={validation_split} of {n} image(s) leaves "
            f"{'no image for validation' if count == 0 else 'no image for training'}. Fix: "
            f"a `validation_split` between {1 / n:.3g} and {1 - 1 / n:.3g}, or more images."
        )
    order = np.random.RandomState(seed).permutation(n)  # Keras: RandomState(seed).shuffle
    return np.sort(order[:-count]), np.sort(order[-count:])


def classes_of(labels: Any, label_mode: str | None, n: int) -> np.ndarray:
    """int64 class index per image from ``labels``: ints, or (for ``label_mode``
    'categorical' / 'binary') the encoding ``encode`` makes of them."""
    array: np.ndarray = np.asarray(labels)
    if label_mode == "categorical" and array.ndim == 2 and array.shape[0] == n:
        if not (np.isin(array, (0, 1)).all() and (array.sum(axis=1) == 1).all()):
            raise ArgumentError(
                "2-D `labels` with label_mode='categorical' must be one-hot rows. Fix: pass "
                "the class index per image instead."
            )
        indices: np.ndarray = array.argmax(axis=1).astype(np.int64)
        return indices
    if label_mode == "binary" and array.shape == (n, 1):
        array = array[:, 0]
    if array.ndim == 1 and array.dtype.kind == "f" and np.isin(array, (0, 1)).all():
        array = array.astype(np.int64)  # binary labels given back as floats
    if array.shape != (n,):
        raise ArgumentError(
            f"`labels` must hold one int per path ({n}); received shape {array.shape}. "
            f"Fix: pass len(labels) == len(paths)."
        )
    if n and array.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"`labels` must be ints (class indices); received dtype {array.dtype}. Fix: "
            f"convert them, or use ImageFiles.from_paths for class-name strings."
        )
    out: np.ndarray = array.astype(np.int64)
    return out


def encode(classes: np.ndarray, label_mode: str, num_classes: int) -> np.ndarray:
    """Keras' encodings: 'int' the index, 'categorical' one-hot float32 (n, num_classes),
    'binary' float32 (n, 1)."""
    if label_mode == "int":
        out = classes.copy()
        out.flags.writeable = False
        return out
    if len(classes) and (classes.min() < 0 or classes.max() >= num_classes):
        raise ArgumentError(
            f"`labels` must be class indices 0..{num_classes - 1} ({num_classes} classes); "
            f"received {classes.min()}..{classes.max()}. Fix: correct the labels, or pass "
            f"`class_names` naming every class."
        )
    if label_mode == "binary" and num_classes != 2:
        raise ArgumentError(
            f"`label_mode`='binary' needs exactly 2 classes; this source has {num_classes}. "
            f"Fix: label_mode='categorical' (or 'int') for more classes."
        )
    if label_mode == "binary":
        out = classes.astype(np.float32)[:, None]
    else:
        out = np.zeros((len(classes), num_classes), np.float32)
        out[np.arange(len(classes)), classes] = 1.0
    out.flags.writeable = False
    return out
