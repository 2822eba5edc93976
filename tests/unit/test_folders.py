"""Keras' folder conventions without Keras: listing order, the split, the label encodings.

tests/integration/test_files_keras.py compares the same against Keras itself, where it is
installed; these run everywhere.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from shmaug.sources.images import folders as F
from shmaug.errors import ArgumentError, ArgumentTypeError


def test_walk_sorts_folders_by_path_as_keras_does(tmp_path):
    for name in ["x/2.png", "x/z/3.png", "x-y/4.PNG", "1.jpg", "notes.txt", "x/b.JPEG", "x/a.gif"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = [p[len(str(tmp_path)) + 1:] for p in F.walk(str(tmp_path), follow_links=False)]
    # "x-y" sorts before "x/z" ('-' < '/'): Keras' order, not a depth-first walk's.
    assert found == ["1.jpg", "x/2.png", "x/a.gif", "x/b.JPEG", "x-y/4.PNG", "x/z/3.png"]
    assert F.walk(str(tmp_path), False, recursive=False) == [str(tmp_path / "1.jpg")]


def test_hidden_folders_are_not_classes(tmp_path):
    for name in ("b", "a", ".ipynb_checkpoints"):
        (tmp_path / name).mkdir()
    assert F.class_folders(str(tmp_path), None) == ["a", "b"]
    assert F.class_folders(str(tmp_path), ["b", "a"]) == ["b", "a"]


@pytest.mark.parametrize("n, split", [(10, 0.2), (17, 0.3), (1000, 0.25), (3, 0.5)])
def test_split_is_keras_shuffle_then_tail(n, split):
    training, validation = F.split(n, split, seed=42)
    count = int(split * n)
    order = np.arange(n)
    np.random.RandomState(42).shuffle(order)  # what Keras does to its list of files
    assert validation.tolist() == sorted(order[-count:].tolist())
    assert training.tolist() == sorted(order[:-count].tolist())
    assert sorted(training.tolist() + validation.tolist()) == list(range(n))


def test_a_split_leaving_a_subset_empty_is_refused():
    with pytest.raises(ArgumentError, match=r"leaves no image for validation.*between 0\.2"):
        F.split(5, 0.1, seed=0)


def test_encodings_and_back():
    classes = np.array([0, 2, 1, 2])
    onehot = F.encode(classes, "categorical", 3)
    assert onehot.dtype == np.float32 and onehot.tolist()[1] == [0, 0, 1]
    assert F.classes_of(onehot, "categorical", 4).tolist() == classes.tolist()
    binary = F.encode(np.array([1, 0, 1]), "binary", 2)
    assert binary.shape == (3, 1) and binary.dtype == np.float32
    assert F.classes_of(binary, "binary", 3).tolist() == [1, 0, 1]
    assert F.encode(classes, "int", 3).dtype == np.int64
    with pytest.raises(ArgumentError, match=r"needs exactly 2 classes; this source has 3"):
        F.encode(classes, "binary", 3)
    with pytest.raises(ArgumentError, match=r"class indices 0\.\.1 \(2 classes\)"):
        F.encode(classes, "categorical", 2)
    with pytest.raises(ArgumentError, match=r"one-hot rows"):
        F.classes_of(np.array([[0.5, 0.5]] * 4), "categorical", 4)
    with pytest.raises(ArgumentTypeError, match=r"must be ints"):
        F.classes_of(np.array([0.5, 1.5]), "int", 2)


def test_argument_checks_name_the_fix():
    with pytest.raises(ArgumentError, match=r"`seed` must be an int in \[0, 2\*\*32\)"):
        F.check_split_args(0.2, "training", -1)
    with pytest.raises(ArgumentError, match=r"`validation_split` must be a number"):
        F.check_split_args(True, "training", 1)
    F.check_split_args(None, None, None)
    F.check_labels_args("inferred", "categorical", ["a"])
    with pytest.raises(ArgumentTypeError, match=r"list of ints"):
        F.check_labels_args(["a", "b"], "int", None)


def _tiny_folder(root, shape=(6, 12, 3)):
    from PIL import Image

    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        Image.fromarray(np.zeros(shape, np.uint8)).save(root / name / "0.png")
    return root


@pytest.mark.parametrize("name, value, where", [
    ("batch_size", 32, r"shmaug\.Sequence\(files, batch_size=32\).*shmaug\.Loader"),
    ("shuffle", True, r"shmaug\.Sequence\(files, shuffle=True, seed=.*shmaug\.Loader"),
], ids=["batch_size", "shuffle"])
def test_keras_loader_arguments_say_where_they_belong(tmp_path, name, value, where):
    """Keras' image_dataset_from_directory batches and shuffles; here the loader does."""
    from shmaug.sources.files import ImageFiles

    with pytest.raises(ArgumentTypeError, match=rf"`{name}`.*from_directory.*{where}"):
        ImageFiles.from_directory(_tiny_folder(tmp_path), image_size=(4, 4), **{name: value})
    with pytest.raises(TypeError, match=r"`follow_symlinks`.*not an argument of.*from_dir"):
        ImageFiles.from_directory(tmp_path, image_size=(4, 4), follow_symlinks=False)


def test_keras_verbose_and_data_format_are_taken_as_keras_means_them(tmp_path, caplog):
    """A Keras call ported as it is: `verbose` and `data_format` were refused."""
    import logging

    from shmaug.sources.files import ImageFiles

    folder = _tiny_folder(tmp_path)
    with caplog.at_level(logging.INFO, logger="shmaug.sources.files"):
        files = ImageFiles.from_directory(folder, image_size=(4, 4), verbose=True,
                                          data_format="channels_last")
    assert f"Found {len(files)} files belonging to {len(files.class_names)} classes." in \
        caplog.messages
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="shmaug.sources.files"):
        ImageFiles.from_directory(folder, image_size=(4, 4), verbose=False)
    assert not caplog.messages
    with pytest.raises(ArgumentError, match=r"channels_first.*np\.moveaxis\(xb, -1, 1\)"):
        ImageFiles.from_directory(folder, image_size=(4, 4), data_format="channels_first")


def test_a_reduced_decode_pads_where_keras_pads_from_the_files_own_size(tmp_path):
    """A 517x589 photo padded to 224x224 fills 223 rows in Keras (its size in float32); decoded
    at half size first, its 259x295 pixels rounded to 224 rows: a row of photo where Keras
    has black (|d| up to 255)."""
    from PIL import Image

    from shmaug.resample import fitted
    from shmaug.sources.files import ImageFiles

    root = _tiny_folder(tmp_path)
    bright = np.random.default_rng(0).integers(60, 256, (589, 517, 3), np.uint8)
    Image.fromarray(bright).save(root / "a" / "0.jpg", quality=90)
    top, left, rows, cols = fitted(589, 517, (224, 224))
    assert (top, rows) == (0, 223)  # (Keras' float32 rounding, as tested against it)
    for reduced in (True, False):
        padded = ImageFiles.from_directory(root, image_size=(224, 224), pad_to_aspect_ratio=True,
                                           reduced_decode=reduced).read(0)
        assert (padded[rows:] == 0).all() and padded[:rows, left + 2:left + cols - 2].min() > 0


def test_crop_or_pad_to_aspect_ratio_keeps_the_shapes_proportions(tmp_path):
    """A 6x12 image with a white centre square: cropped to a square it fills the output (the
    black sides are cut), padded to a square it is a band (black bars above and below)."""
    from PIL import Image

    from shmaug.sources.files import ImageFiles

    pixels = np.zeros((6, 12, 3), np.uint8)
    pixels[:, 3:9] = 255  # the centre 6x6 square
    root = _tiny_folder(tmp_path)
    Image.fromarray(pixels).save(root / "a" / "0.png")
    kwargs = dict(image_size=(6, 6), interpolation="nearest")
    cropped = ImageFiles.from_directory(root, crop_to_aspect_ratio=True, **kwargs).read(0)
    assert (cropped == 255).all()
    padded = ImageFiles.from_directory(root, pad_to_aspect_ratio=True, **kwargs).read(0)
    assert (padded[:1] == 0).all() and (padded[-1:] == 0).all()  # bars: 6 rows -> 3, padded
    assert (padded[2:4, 2:4] == 255).all() and (padded[2:4, :1] == 0).all()
    again = pickle.loads(pickle.dumps(ImageFiles.from_directory(root, pad_to_aspect_ratio=True,
                                                                **kwargs)))  # for workers
    np.testing.assert_array_equal(again.read(0), padded)
    plain = ImageFiles.from_directory(root, **kwargs).read(0)
    assert (plain[:, :1] == 0).all()  # squeezed: the black sides remain
    with pytest.raises(ArgumentError, match=r"Only one of `crop_to_aspect_ratio`"):
        ImageFiles.from_directory(root, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True,
                                  **kwargs)


@pytest.mark.parametrize("labels", [[[1, 2, 3], [4, 5], [6]],  # ragged: numpy's own error
                                    np.array([[1, 2, 3], [4, 5, 0], [6, 0, 0]])])  # padded
def test_label_sequences_per_path_are_told_to_go_in_as_y(labels):
    """OCR's character ids per image: a bare numpy ValueError, or a fix already satisfied
    ("pass len(labels) == len(paths)")."""
    with pytest.raises(ArgumentError, match=r"`labels` must hold one (class|int) per path "
                                            r"\(3\).*give `labels=None` here.*loader's `y`"):
        F.classes_of(F.encode_names(labels, 3, None)[0], "int", 3)


def test_one_label_for_every_path_is_told_the_count_it_needs():
    """From the last read of the change: a scalar `labels` met len() of a 0-d array (a bare
    TypeError) in the message meant for label sequences."""
    with pytest.raises(ArgumentError, match=r"one int per path \(2\); received shape \(\).*"
                                            r"len\(labels\) == len\(paths\)"):
        F.classes_of(3, "int", 2)


def test_names_apart_only_in_their_unicode_normalization_say_so(tmp_path, caplog):
    """A folder written on macOS (NFD) and names typed or read from a CSV (NFC) print alike:
    "not there (found ['café'])" named no cause, and labels of both were two classes."""
    import logging
    import unicodedata

    from PIL import Image

    from shmaug.errors import ShmaugWarning
    from shmaug.sources.files import ImageFiles

    nfc, nfd = "café", unicodedata.normalize("NFD", "café")
    for name in (nfd, "thé"):
        (tmp_path / name).mkdir()
        Image.new("RGB", (6, 6)).save(tmp_path / name / "a.png")
    with pytest.raises(ArgumentError, match=rf"these are not there: \['{nfc}'\].*differs from "
                                            rf"'{nfd}', which is there, only in its Unicode "
                                            r"normalization.*normalize\('NFD', name\)"):
        ImageFiles.from_directory(tmp_path, class_names=[nfc, "thé"])
    with pytest.raises(ArgumentError, match=r"do not exist.*only in its Unicode normalization"):
        ImageFiles.from_paths([str(tmp_path / nfc / "a.png")])
    with pytest.warns(ShmaugWarning, match=r"differ only in their Unicode normalization.*two "
                                           r"classes"):
        F.encode_names([nfc, nfd, "thé"], 3, None)
    with caplog.at_level(logging.INFO, logger="shmaug.sources.files"):  # (Keras' line: it
        files = ImageFiles.from_directory(tmp_path, labels=None, verbose=True)  # said "0
    assert caplog.messages == ["Found 2 files."]  # classes")
    many = ImageFiles.from_paths([str(tmp_path / nfd / "a.png")] * 10,
                                 [f"c{i}" for i in range(10)])
    assert "10 classes ['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', ... (2 more)]" in \
        repr(many) and files  # (a quoted '...' read as a class)
