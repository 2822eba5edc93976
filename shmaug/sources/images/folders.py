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

Also the checks of paths and labels every constructor shares (extensions, existence, class-name
labels). This module only lists, labels and splits; decoding is ``decode.py``'s and the source
object is ``files.py``'s. It starts no process and reads no image.
"""

from __future__ import annotations

import os
import unicodedata
import urllib.parse
from collections import Counter
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ...deferred import looks_encoded
from ...errors import ArgumentError, ArgumentTypeError, got, missing, warn

if TYPE_CHECKING:
    from ..remote import Listing

KERAS_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")  # image_dataset_from_directory's
EXTENSIONS = (*KERAS_EXTENSIONS, ".tif", ".tiff", ".webp")  # and what OpenCV / PIL also decode
LABEL_MODES = ("int", "categorical", "binary", None)
SUBSETS = ("training", "validation", "both")


def walk(root: str, follow_links: bool, recursive: bool = True, listing: Listing | None = None,
         extensions: tuple[str, ...] = EXTENSIONS) -> list[str]:
    """Files under ``root`` with one of ``extensions`` in Keras' order: folders sorted by
    path, files by name; other files are ignored (as Keras does). ``listing``: a bucket
    listed once (``remote._urls.Listing``) instead of the local disk."""
    found = listing.walk(root, recursive) if listing is not None else []
    if listing is None:
        for dirpath, _, filenames in os.walk(root, followlinks=follow_links):
            found.append((dirpath, filenames))
            if not recursive:
                break
    found.sort(key=lambda entry: entry[0])
    out: list[str] = []
    for dirpath, filenames in found:
        prefix = dirpath.rstrip("/") + "/" if listing is not None else os.path.join(dirpath, "")
        out += [prefix + f for f in sorted(filenames) if f.lower().endswith(extensions)]
    return out


def list_directory(root: str, labels: Any, class_names: Sequence[str] | None,
                   follow_links: bool, listing: Listing | None = None,
                   extensions: tuple[str, ...] = KERAS_EXTENSIONS
                   ) -> tuple[list[str], np.ndarray | None, list[str]]:
    """The image files under ``root`` as Keras lists them (``extensions``: Keras' own by
    default; the images shmaug also decodes left out, with a warning), their class indices
    (or None) and the class names, for ``labels`` "inferred", None or a list of ints
    (checked already).

    Raises:
        ArgumentError: no image file; a list of labels of another length than the files.
    """
    left_out: Counter[str] = Counter()  # extension -> files shmaug decodes, left out

    def listed(folder: str, recursive: bool = True) -> list[str]:
        found = walk(folder, follow_links, recursive, listing)
        kept = [p for p in found if p.lower().endswith(extensions)]
        left_out.update(os.path.splitext(p)[1].lower() for p in found
                        if not p.lower().endswith(extensions))
        return kept

    classes: np.ndarray | None = None
    names: list[str] = []
    if isinstance(labels, str):  # "inferred"
        names = class_folders(root, class_names, listing)
        paths: list[str] = []
        counts = []  # files per class, in class order
        for name in names:
            join = os.path.join if listing is None else listing.join
            in_class = listed(join(root, name))
            counts.append(len(in_class))
            paths += in_class
        if names:
            classes = np.repeat(np.arange(len(names), dtype=np.int64), counts)
            if walk(root, follow_links, recursive=False, listing=listing,
                    extensions=extensions):
                warn(f"{root!r}: the images directly in this folder are ignored; only those "
                     f"in its class sub-folders {names} are read (as Keras' "
                     f"image_dataset_from_directory does). Fix: move them into a class "
                     f"folder to read them.")
        else:
            paths = listed(root)
            if paths:  # (pointed at one class's folder, most often)
                warn(f"{root!r} has no class sub-folders, so its {len(paths)} images are read "
                     f"unlabelled (Keras' image_dataset_from_directory finds no image here). "
                     f"Fix: point at the folder above it, whose sub-folders are the classes, "
                     f"or pass labels=None to read them unlabelled without this warning.")
    else:
        paths = listed(root)
        if labels is not None:
            classes = np.asarray(labels, dtype=np.int64)
            if len(classes) != len(paths):
                kinds = (f", {', '.join(extensions)} ones; extensions= lists others too"
                         if left_out else "")
                raise ArgumentError(
                    f"`labels` must have one int per image file in {root!r}: it has "
                    f"{len(classes)} and the folder {len(paths)}. Fix: one label per file, "
                    f"in the order Keras lists them (folders sorted by path, then files"
                    f"{kinds}).")
            names = [str(v) for v in sorted(set(classes.tolist()))]
    others = ", ".join(f"{n} {ext} file{'s' if n > 1 else ''}" for ext, n in left_out.items())
    wider = f"extensions={tuple(sorted(set(extensions) | set(left_out)))!r}"
    if not paths:
        raise ArgumentError(
            f"`directory` {root!r} holds no image file (looked for {', '.join(extensions)}"
            f"{' in ' + str(names) if names else ''}{'; it holds ' + others if others else ''})"
            f". Fix: " + (f"pass {wider} to read those too (Keras' image_dataset_from_directory "
                          f"reads none of them)." if others else
                          "point at the folder with one sub-folder of images per class."))
    if others:
        why = (f"as Keras' image_dataset_from_directory leaves them out (it reads "
               f"{', '.join(KERAS_EXTENSIONS)})" if extensions == KERAS_EXTENSIONS else
               "as `extensions` (which replaces Keras' list) does not name them")
        warn(f"{root!r} holds {others}, left out {why}. Fix: pass {wider} to read them too.")
    return paths, classes, names


def extensions_of(given: Sequence[str] | None) -> tuple[str, ...]:
    """``from_directory``'s ``extensions`` checked: lower case with their dot, each one
    shmaug decodes; None: Keras' own list."""
    if given is None:
        return KERAS_EXTENSIONS
    if isinstance(given, str) or not isinstance(given, (list, tuple)) or \
            not all(isinstance(e, str) for e in given):
        raise ArgumentTypeError(
            f"`extensions` must be a tuple of file extensions; received {got(given)}. Fix: "
            f"e.g. extensions={EXTENSIONS!r}.")
    chosen = tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in given)
    unknown = [e for e in chosen if e not in EXTENSIONS]
    if unknown or not chosen:
        raise ArgumentError(
            f"`extensions` must name files shmaug decodes ({', '.join(EXTENSIONS)}); received "
            f"{tuple(given)!r}. Fix: pick among those (None: Keras' {KERAS_EXTENSIONS!r}).")
    return chosen


def class_folders(root: str, class_names: Sequence[str] | None, listing: Listing | None = None
                  ) -> list[str]:
    """The class sub-folders of ``root``: sorted, hidden ones left out, or ``class_names``."""
    if listing is not None:
        subdirs = [name for name in listing.subdirs(root) if not name.startswith(".")]
    else:
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
            f"{missing} (found {subdirs}).{_normalized_apart(missing, subdirs)} Fix: correct "
            f"the names or the folder."
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


# ImageDataGenerator's flow_from_directory / flow_from_dataframe names for what a source takes.
RENAMED = {"target_size": "image_size", "classes": "class_names", "class_mode": "label_mode",
           "class_names": "classes"}  # (the last: from_dataframe keeps Keras' `classes`)
# class_mode -> label_mode (None: no label_mode says it: the targets go in as `y`)
_CLASS_MODES = {"categorical": "'categorical'", "binary": "'binary'", "sparse": "'int'",
                None: "None"}


def check_data_format(value: Any) -> None:
    """Keras' ``data_format``: a source gives channels-last images (H, W, C), as Keras does
    by default; channels-first is refused with the fix."""
    if value in (None, "channels_last"):
        return
    fix = ("leave it out and keep the model channels-last (Keras' default); a model that "
           "takes channels first gets np.moveaxis(xb, -1, 1) of each batch, from a Sequence "
           "subclass's `model_inputs` (docs/keras.md)") \
        if value == "channels_first" else "pass 'channels_last' or leave it out"
    raise ArgumentError(
        f"`data_format` of ImageFiles.from_directory is 'channels_last' (or None): shmaug's "
        f"sources and ops give images (H, W, C); received {got(value)}. Fix: {fix}.")


def refuse_extra_args(extra: dict[str, Any], accepted: Sequence[str],
                      method: str = "from_directory",
                      instead: Mapping[str, str] | None = None) -> None:
    """``method`` given an argument it does not take: say where it belongs (Keras'
    ``batch_size`` and ``shuffle`` go to the loader, ImageDataGenerator's names have ours,
    ``instead`` names what else to do for others, ``{value}`` the one given) or that it has
    no use here."""
    for name, value in extra.items():
        if instead and name in instead:
            raise ArgumentTypeError(
                f"`{name}` is not an argument of ImageFiles.{method} (received "
                f"{name}={got(value)}). Fix: {instead[name].format(value=value)}.")
        if name in RENAMED and RENAMED[name] in accepted:
            _refuse_renamed(name, value, method)
        if name == "batch_size":
            raise ArgumentTypeError(
                f"`batch_size` is not an argument of ImageFiles.{method} (received "
                f"batch_size={value!r}): a source finds the files and their labels, and the "
                f"loader batches them. Fix: pass it to the loader, "
                f"shmaug.Sequence(files, batch_size={value!r}) or "
                f"shmaug.Loader(files, batch_size={value!r})."
            )
        if name == "shuffle":
            raise ArgumentTypeError(
                f"`shuffle` is not an argument of ImageFiles.{method} (received "
                f"shuffle={value!r}): a source keeps the files in folder order, and the loader "
                f"shuffles them anew every epoch, each file exactly once. Fix: pass it to the "
                f"loader, shmaug.Sequence(files, shuffle={value!r}, seed=0) or "
                f"shmaug.Loader(files, shuffle={value!r}, seed=0)."
            )
        raise ArgumentTypeError(
            f"`{name}` is not an argument of ImageFiles.{method} (received {name}="
            f"{got(value)}); it takes {', '.join(accepted)}. Fix: leave `{name}` out."
        )


def _refuse_renamed(name: str, value: Any, method: str) -> None:
    ours = RENAMED[name]
    if name == "target_size":
        fix = f"pass `image_size={tuple(value) if isinstance(value, list) else value!r}`"
    elif name == "class_mode" and value in _CLASS_MODES:
        fix = f"pass `label_mode={_CLASS_MODES[value]}`"
    elif name == "class_mode":
        fix = ("pass `label_mode=None` (from_dataframe: `y_col=None`) and give the loader "
               "the targets as `y`, in the files' order")
    else:
        fix = f"pass `{ours}={value!r}`"
    raise ArgumentTypeError(
        f"`{name}` is not an argument of ImageFiles.{method} (received {name}="
        f"{got(value)}), which calls it `{ours}`. Fix: {fix}.")


def check_aspect_args(crop_to_aspect_ratio: Any, pad_to_aspect_ratio: Any) -> str | None:
    """``"crop"``, ``"pad"`` or None from Keras' two flags, which exclude each other."""
    for name, value in (("crop_to_aspect_ratio", crop_to_aspect_ratio),
                        ("pad_to_aspect_ratio", pad_to_aspect_ratio)):
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentTypeError(
                f"`{name}` must be True or False; received {got(value)}. Fix: "
                f"`{name}=True` resizes without distorting the aspect ratio."
            )
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ArgumentError(
            "Only one of `crop_to_aspect_ratio` and `pad_to_aspect_ratio` can be True (as in "
            "Keras); received both. Fix: crop (cut the sides that do not fit) or pad (black "
            "bars), not both."
        )
    return "crop" if crop_to_aspect_ratio else "pad" if pad_to_aspect_ratio else None


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


_NOT_CLASSES = ("per-image label sequences (OCR's text, padded ids) or other targets are no "
                "classes: give `labels=None` here and pass them as the loader's `y`, in the "
                "paths' order.")


def _classes_array(labels: Any, n: int) -> np.ndarray:
    """``labels`` as one array; sequences of several lengths refused with the fix."""
    try:
        return np.asarray(labels)
    except ValueError:  # ragged
        raise ArgumentError(f"`labels` must hold one class per path ({n}); received rows of "
                            f"several lengths. Fix: {_NOT_CLASSES}") from None


def classes_of(labels: Any, label_mode: str | None, n: int) -> np.ndarray:
    """int64 class index per image from ``labels``: ints, or (for ``label_mode``
    'categorical' / 'binary') the encoding ``encode`` makes of them."""
    array: np.ndarray = _classes_array(labels, n)
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
        fix = _NOT_CLASSES if array.ndim > 1 and len(array) == n else \
            "pass len(labels) == len(paths)."
        raise ArgumentError(
            f"`labels` must hold one int per path ({n}); received shape {array.shape}. "
            f"Fix: {fix}")
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
    if label_mode == "int" and len(classes) and classes.max() >= num_classes:
        raise ArgumentError(
            f"`labels` must be class indices below {num_classes} ({num_classes} classes "
            f"named); received {classes.max()}. Fix: correct the labels, or pass "
            f"`class_names` naming every class.")
    if label_mode == "int" and len(classes) and classes.min() < 0:
        i = int(np.argmax(classes < 0))
        warn(f"{int((classes < 0).sum())} of {len(classes)} labels are negative ({classes[i]} "
             f"at sample {i}), which no class is: they are kept as they are, for a loss that "
             f"skips them (Keras' `ignore_class=-1`); a sparse loss without it fails on them "
             f"or, on a GPU, gives NaN. Fix: pass `label_key=None` (records) or no labels to "
             f"read the images alone, or leave those samples out.")
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


def refuse_encoded(values: Any, where: str) -> None:
    """Refuse images themselves where paths are wanted: encoded bytes (a Parquet column of
    JPEGs) were read as paths named ``b'\\xff\\xd8...'``, in a message of megabytes."""
    first = next(iter(values), None)
    if isinstance(first, (bytes, bytearray, memoryview)) and looks_encoded(bytes(first[:64])):
        raise ArgumentTypeError(
            f"{where} holds bytes ({bytes(first[:12])!r}...), not paths: images encoded in "
            f"memory. Fix: shmaug.ImageRecords.from_bytes(images, labels), which holds "
            f"them once in shared memory for the workers to decode.")


def check_extensions(paths: Sequence[str]) -> None:
    from ..remote import is_url, shown_url

    def name(path: str) -> str:  # (a web URL's query is no part of its file's name; a
        # bucket's key may hold "?" and "#")
        web = is_url(path) and path.lower().startswith(("http://", "https://"))
        return urllib.parse.urlsplit(path).path if web else path

    bad = [shown_url(p) for p in paths if not name(p).lower().endswith(EXTENSIONS)
           and not p.lower().endswith(EXTENSIONS)]  # (a download's ?file=cat.jpg)
    bare = [p for p in bad if not os.path.splitext(name(p))[1]]
    if bare:  # a Kaggle table's image ids
        raise ArgumentError(
            f"{len(bare)} path(s) have no extension, e.g. {bare[0]!r} (image ids, not file "
            f"names?); shmaug reads {', '.join(EXTENSIONS)} files. Fix: add the files' "
            f"extension, e.g. df['id'].astype(str) + '.jpg', or name the files as they are "
            f"on disk.")
    if bad:
        raise ArgumentError(
            f"{len(bad)} path(s) have an extension shmaug does not decode, e.g. {bad[0]!r}; "
            f"expected one of {', '.join(EXTENSIONS)}. Fix: convert or drop those files."
        )


def check_exist(paths: Sequence[str]) -> None:
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ArgumentError(
            f"{len(missing)} image file(s) do not exist, e.g. {missing[0]!r}."
            f"{_normalized_apart(*_first_absent(missing[0]))} Fix: correct the paths (or "
            f"`directory=`), or pass on_error='skip' to replace them and count them."
        )


def _first_absent(path: str) -> tuple[list[str], list[str]]:
    """The first part of ``path`` that is not there, and what its folder holds."""
    head, parts = os.path.abspath(path), []
    while head != os.path.dirname(head):
        head, tail = os.path.split(head)
        parts.append(tail)
    for part in reversed(parts):
        if not os.path.exists(os.path.join(head, part)):
            try:
                return [part], os.listdir(head)
            except OSError:
                return [], []
        head = os.path.join(head, part)
    return [], []


def _normalized_apart(wanted: Sequence[str], present: Sequence[str]) -> str:
    """A sentence where a name wanted equals one present but for its Unicode normalization
    (macOS writes names decomposed, NFD; a CSV or typed text holds them composed, NFC): the
    two print alike, and "not there" alone would not say why."""
    nfc = {unicodedata.normalize("NFC", p): p for p in present}
    for name in wanted:
        twin = nfc.get(unicodedata.normalize("NFC", name))
        if twin is not None and twin != name:
            return (f" {name!r} differs from {twin!r}, which is there, only in its Unicode "
                    f"normalization (NFC against NFD, as macOS writes names): use "
                    f"unicodedata.normalize('{_form(twin)}', name) on yours.")
    return ""


def tell_label_names(names: Sequence[str]) -> None:
    """Warn where two class names differ only in their Unicode normalization (they print
    alike), or in case or spaces at their ends (a hand-made CSV's 'dog ' and 'DOG'): they
    are two classes (as in Keras), which a model then learns apart."""
    by_form: dict[str, str] = {}
    by_text: dict[str, str] = {}
    for name in names:
        twin = by_form.setdefault(unicodedata.normalize("NFC", name), name)
        if twin != name:
            warn(f"Class names {twin!r} and {name!r} differ only in their Unicode "
                 f"normalization (NFC against NFD, as macOS writes names): they print alike "
                 f"and are two classes. Fix: normalize the labels first, e.g. "
                 f"[unicodedata.normalize('NFC', label) for label in labels].")
            return
        twin = by_text.setdefault(name.strip().casefold(), name)
        if twin != name and (len(name.strip()) > 1 or twin.strip() == name.strip()):
            # (one letter of each case may be two classes: EMNIST's 'a' and 'A')
            warn(f"Class names {twin!r} and {name!r} differ only in case or in spaces at "
                 f"their ends: they are two classes. Fix: tidy the labels first, e.g. "
                 f"df[y_col].str.strip().str.lower(); or, where they are two classes, pass "
                 f"them as `classes=` (`class_names=`), which silences this.")
            return
    _warn_joined(names)


def _warn_joined(names: Sequence[str]) -> None:
    """Warn where class names look like several labels joined, as a CSV's multi-label
    column is read (one class per combination): a part of one is a class name itself ('cat|dog'
    beside 'cat'), or, joined by '|' or ';', a part recurs at another place ('cat|dog',
    'bird|cat'); a path of a hierarchy ('Aves|Corvus', 'Aves|Pica') keeps each part at its
    depth, and 'Paris, France' beside 'Lyon, France' is no such thing either."""
    known = set(names)
    for sep in "|;,":
        joined = [n for n in names if sep in n]
        places: dict[str, set[int]] = {}
        for name in joined:
            for at, part in enumerate(name.split(sep)):
                places.setdefault(part.strip(), set()).add(at)
        moved = sep != "," and any(len(at) > 1 for at in places.values())
        if moved or any(p in known for p in places):
            shown = ", ".join(repr(n) for n in joined[:3])
            warn(f"Class names such as {shown} look like several labels joined by {sep!r}: "
                 f"each combination is taken as a class of its own. Fix, for multi-label "
                 f"rows: y_col=None, and as the loader's `y` the multi-hot rows "
                 f"sklearn.preprocessing.MultiLabelBinarizer().fit_transform(df[col].str"
                 f".split({sep!r})), with a sigmoid output and binary cross-entropy; where they "
                 f"are classes (a path in a hierarchy), pass them as `classes=`, which "
                 f"silences this.")
            return


def _form(name: str) -> str:
    return "NFD" if unicodedata.is_normalized("NFD", name) else "NFC"


def encode_names(
    labels: Any, n: int, class_names: Sequence[str] | None
) -> tuple[np.ndarray | None, tuple[str, ...]]:
    """Labels as int64 indices plus class names: strings map through their sorted names (a
    pandas ``Categorical`` of strings through all its categories, sorted, as ``from_dataframe``
    numbers them: a fold that lacks a class numbers the others alike; one of ints holds class
    ids)."""
    if labels is None:
        return None, tuple(class_names or ())
    inferred = class_names is None  # (a Categorical's categories are the data's too)
    if class_names is None and str(getattr(labels, "dtype", "")) == "category":
        categories = labels.cat.categories if hasattr(labels, "cat") else labels.categories
        if all(isinstance(c, str) for c in categories):  # (names; ints are class ids)
            class_names = sorted(categories)
    values = labels.to_pylist() if callable(getattr(labels, "to_pylist", None)) \
        else list(labels)  # (a pyarrow column: its scalars are no str or int)
    if len(values) != n:
        raise ArgumentError(
            f"`labels` must have one entry per image ({n}); received {len(values)}. "
            f"Fix: pass one label per image, in the images' order."
        )
    absent = next((i for i, v in enumerate(values) if missing(v)), None)
    if absent is not None:
        raise ArgumentError(
            f"`labels` has no label at index {absent} ({values[absent]!r}). Fix: leave "
            f"those images out, e.g. df.dropna(subset=['label']), or give them a class.")
    if all(isinstance(v, str) for v in values):
        names = tuple(class_names) if class_names is not None else tuple(sorted(set(values)))
        if inferred:  # (names given are the user's to keep: no warning)
            tell_label_names(names)
        lookup = {name: i for i, name in enumerate(names)}
        unknown = sorted(set(values) - set(lookup))
        if unknown:
            raise ArgumentError(
                f"`labels` holds names that are not in `class_names` {list(names)}: "
                f"{unknown}. Fix: add them to `class_names` or correct the labels."
            )
        return np.array([lookup[v] for v in values], np.int64), names
    array = _classes_array(values, n)
    if array.dtype.kind not in "iu":
        raise ArgumentTypeError(
            f"`labels` must be all ints (class indices) or all strings (class names); "
            f"received dtype {array.dtype}, e.g. {got(values[0])}. Fix: convert them; for "
            f"regression targets leave `labels` out and give the loader them as `y`."
        )
    if class_names is not None and len(array) \
            and not 0 <= array.min() <= array.max() < len(class_names):
        raise ArgumentError(
            f"int `labels` must index `class_names` (0..{len(class_names) - 1}); received "
            f"{array.min()}..{array.max()}. Fix: correct the labels or the names."
        )
    return array.astype(np.int64), tuple(class_names or ())
