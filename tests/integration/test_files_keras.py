"""ImageFiles.from_directory against Keras' image_dataset_from_directory, on the same folder.

Every image is a 2x2 PNG whose pixel value is its id, so each (image, label) pair Keras yields
names the file it came from: the tests compare, per subset, which files Keras puts there and
the label it gives each, with what ImageFiles gives for the same arguments and seed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.sources.files import ImageFiles
from tests._helpers import needs_keras

pytestmark = [needs_keras, pytest.mark.timeout(180)]
# Keras' image_dataset_from_directory builds a tf.data pipeline on every backend.
pytest.importorskip("tensorflow")

# Nested folders whose sorted paths differ from a depth-first walk ("x-y" < "x/z"), a hidden
# folder (not a class for Keras), and a file that is not an image.
FILES = ["ant/0.png", "ant/1.png", "ant/x/2.png", "ant/x/z/3.png", "ant/x-y/4.png", "ant/x-y/5.png",
         "bee/0.png", "bee/1.png", "bee/2.png", "bee/3.png", "bee/4.png",
         "cat/a.png", "cat/b.png", "cat/c.png", "cat/sub/d.png", "cat/sub/e.png", "cat/f.png",
         ".hidden/0.png", "ant/x/notes.txt"]


def make_folder(root: Path, top_level: bool = False) -> Path:
    names = FILES + (["top.png"] if top_level else [])
    for i, name in enumerate(names):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".png"):
            Image.fromarray(np.full((2, 2, 3), 10 + i, np.uint8)).save(path)
        else:
            path.write_text("not an image")
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_folder(tmp_path_factory.mktemp("keras_folder") / "data")


@pytest.fixture(scope="module")
def flat_and_nested(tmp_path_factory):
    return make_folder(tmp_path_factory.mktemp("keras_folder_top") / "data", top_level=True)


def ids_of_paths(files: ImageFiles) -> list[int]:
    return [int(files.read(i)[0, 0, 0]) for i in range(len(files))]


def keras_pairs(ds) -> dict[int, object]:
    """id -> label (as a tuple of floats/ints, or None) of every element of a Keras dataset."""
    out = {}
    for element in ds:
        image, label = element if isinstance(element, tuple) else (element, None)
        key = int(np.asarray(image)[0, 0, 0])
        assert key not in out, "Keras yielded a file twice"
        out[key] = None if label is None else tuple(np.atleast_1d(np.asarray(label)).tolist())
    return out


def our_pairs(files: ImageFiles) -> dict[int, object]:
    labels = files.labels
    return {key: None if labels is None else tuple(np.atleast_1d(labels[i]).tolist())
            for i, key in enumerate(ids_of_paths(files))}


def keras_dataset(directory, **kwargs):
    import keras

    return keras.utils.image_dataset_from_directory(
        str(directory), image_size=(2, 2), batch_size=None, interpolation="nearest",
        verbose=False, **kwargs)


def ours(directory, **kwargs):
    return ImageFiles.from_directory(directory, image_size=(2, 2), interpolation="nearest",
                                     **kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(label_mode="categorical", class_names=["cat", "ant"]),
    dict(label_mode="binary", class_names=["bee", "cat"]),
    dict(label_mode=None),
])
@pytest.mark.parametrize("seed", [7, 1234])
def test_each_subset_holds_what_keras_puts_there(folder, kwargs, seed):
    split = dict(validation_split=0.3, seed=seed)
    k_train, k_val = keras_dataset(folder, subset="both", **split, **kwargs)
    train, val = ours(folder, subset="both", **split, **kwargs)
    for mine, theirs in ((train, k_train), (val, k_val)):
        assert sorted(map(os.path.normpath, mine.paths)) == sorted(
            map(os.path.normpath, theirs.file_paths))
        assert our_pairs(mine) == keras_pairs(theirs)
        assert list(mine.class_names) == list(theirs.class_names or [])
    assert not set(train.paths) & set(val.paths)
    # One subset per call, as a training script makes them, gives the same files.
    alone = ours(folder, subset="validation", **split, **kwargs)
    assert alone.paths == val.paths
    np.testing.assert_array_equal(alone.labels, val.labels)


def test_the_whole_folder_and_its_encodings_match_keras(folder):
    for mode in ("int", "categorical"):
        assert our_pairs(ours(folder, label_mode=mode)) == keras_pairs(
            keras_dataset(folder, label_mode=mode, shuffle=False))
    files = ours(folder, label_mode="categorical")
    assert files.labels.dtype == np.float32 and files.labels.shape == (17, 3)
    assert files.classes.tolist() == files.labels.argmax(axis=1).tolist()
    binary = ours(folder, label_mode="binary", class_names=["ant", "bee"])
    assert binary.labels.dtype == np.float32 and binary.labels.shape == (11, 1)
    # Files stay in folder order within a source (Keras' order: folders sorted by path).
    names = [os.path.relpath(p, folder).replace(os.sep, "/") for p in ours(folder).paths]
    assert names[:6] == ["ant/0.png", "ant/1.png", "ant/x/2.png", "ant/x-y/4.png",
                         "ant/x-y/5.png", "ant/x/z/3.png"]


def test_labels_none_and_a_list_of_labels_match_keras(flat_and_nested):
    folder = flat_and_nested
    unlabelled = ours(folder, labels=None)
    assert unlabelled.labels is None and len(unlabelled) == 19  # hidden folder and top file too
    assert our_pairs(unlabelled) == keras_pairs(keras_dataset(folder, labels=None, shuffle=False))
    given = [i % 3 for i in range(19)]
    for mode in ("int", "categorical"):
        split = dict(validation_split=0.25, subset="training", seed=3, label_mode=mode)
        mine = ours(folder, labels=given, **split)
        theirs = keras_dataset(folder, labels=given, **split)
        assert our_pairs(mine) == keras_pairs(theirs)
        assert list(mine.class_names) == ["0", "1", "2"] == theirs.class_names


def test_images_keras_does_not_list_are_left_out_with_a_warning_and_read_when_asked(tmp_path):
    # .webp and .tif beside Keras' formats: listed, they would move every file of the split
    make_folder(tmp_path / "data")
    for i, name in enumerate(["ant/extra.webp", "bee/scan.tif", "cat/sub/also.WEBP"]):
        Image.fromarray(np.full((2, 2, 3), 200 + i, np.uint8)).save(
            tmp_path / "data" / name, "TIFF" if name.endswith(".tif") else "WEBP")
    split = dict(validation_split=0.3, seed=7, subset="both")
    k_train, k_val = keras_dataset(tmp_path / "data", **split)
    with pytest.warns(shmaug.ShmaugWarning, match=r"2 \.webp files, 1 \.tif file, left out "
                      r"as Keras.*extensions=\('\.bmp', .*'\.tif', '\.webp'\)"):
        train, val = ours(tmp_path / "data", **split)
    for mine, theirs in ((train, k_train), (val, k_val)):
        assert sorted(map(os.path.normpath, mine.paths)) == sorted(
            map(os.path.normpath, theirs.file_paths))
    wide = ours(tmp_path / "data", extensions=(".png", "WEBP", ".tif"))
    assert len(wide) == 17 + 3 and "extensions=('.png', '.webp', '.tif')" in repr(wide)
    with pytest.warns(shmaug.ShmaugWarning, match=r"2 \.webp files, 1 \.tif file, left out as "
                      r"`extensions` \(which replaces Keras' list\) does not name them"):
        assert len(ours(tmp_path / "data", extensions=["png"])) == 17
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`extensions` must be a tuple.*5"):
        ours(tmp_path / "data", extensions=5)
    only_webp = tmp_path / "webp"
    (only_webp / "ant").mkdir(parents=True)
    Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(only_webp / "ant" / "0.webp")
    with pytest.raises(shmaug.ArgumentError, match=r"holds no image file.*it holds 1 \.webp "
                                                   r"file.*Fix: pass extensions="):
        ours(only_webp)
    with pytest.raises(shmaug.ArgumentError, match=r"`extensions` must name files shmaug "
                                                   r"decodes.*'\.heic'"):
        ours(only_webp, extensions=(".png", ".heic"))
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`extensions` must be a tuple"):
        ours(only_webp, extensions=".webp")


def test_arguments_keras_refuses_are_refused_with_the_fix(folder):
    import shmaug

    cases = [
        (dict(validation_split=0.2, subset="training"), r"`seed` must be an int.*same `seed=`"),
        (dict(validation_split=0.2, seed=1), r"`validation_split` needs `subset`"),
        (dict(subset="training", seed=1), r"`subset` needs `validation_split`"),
        (dict(validation_split=1.5, subset="both", seed=1), r"between 0 and 1"),
        (dict(validation_split=0.2, subset="train", seed=1), r"'training', 'validation' or 'both'"),
        (dict(validation_split=0.01, subset="both", seed=1), r"leaves no image for validation"),
        (dict(label_mode="sparse"), r"`label_mode` must be 'int', 'categorical', 'binary'"),
        (dict(label_mode="binary"), r"needs exactly 2 classes; this source has 3"),
        (dict(labels="infer"), r"`labels` must be 'inferred', None or a list of ints"),
        (dict(labels=[0, 1]), r"one int per image file.*it has 2 and the folder 18"),
        (dict(labels=None, class_names=["ant"]), r"`class_names` can only be passed with"),
        (dict(label_mode=None, class_names=["ant"]), r"`class_names` can only be passed with"),
        (dict(class_names="ant"), r"list of sub-folder names"),
        (dict(class_names=["ant", "dog"]), r"not there: \['dog'\]"),
    ]
    for kwargs, message in cases:
        with pytest.raises((shmaug.ArgumentError, shmaug.ArgumentTypeError), match=message):
            ours(folder, **kwargs)


def test_repr_shows_what_was_passed(folder):
    train, _ = ours(folder, validation_split=0.3, subset="both", seed=7,
                    label_mode="categorical")
    text = repr(train)
    assert text.startswith(f"<ImageFiles from_directory({str(folder)!r}, "
                           f"label_mode='categorical', image_size=(2, 2), ")
    assert "validation_split=0.3, subset='both', seed=7)[0]:" in text
    assert "color_mode" not in text
    assert "3 classes ['ant', 'bee', 'cat']" in text and "images (2, 2, 3)>" in text
    assert f"{len(train)} files" in text
    plain = ImageFiles.from_paths(train.paths[:2], image_size=(4, 4), color_mode="grayscale")
    assert repr(plain) == ("<ImageFiles from_paths(<2 paths>, image_size=(4, 4), "
                           "color_mode='grayscale'): 2 files, no labels, images (4, 4, 1)>")


@pytest.fixture(scope="module")
def wide_and_tall(tmp_path_factory):
    """Smooth gradients of other aspect ratios than the output's, each half a different colour."""
    root = tmp_path_factory.mktemp("aspect") / "data"
    for i, (h, w) in enumerate([(40, 96), (90, 36), (50, 50), (33, 71)]):
        yy, xx = np.mgrid[0:h, 0:w]
        pixels = np.stack([xx * 255 // (w - 1), yy * 255 // (h - 1),
                           np.where(xx < w // 3, 200, 30)], axis=-1).astype(np.uint8)
        (root / "c").mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(root / "c" / f"{i}.png")
    return root


@pytest.mark.parametrize("how", ["crop_to_aspect_ratio", "pad_to_aspect_ratio"])
def test_crop_and_pad_to_aspect_ratio_match_keras(wide_and_tall, how):
    import keras

    size = (24, 32)
    theirs = keras.utils.image_dataset_from_directory(
        str(wide_and_tall), image_size=size, batch_size=None, shuffle=False, labels=None,
        verbose=False, **{how: True})
    mine = ImageFiles.from_directory(wide_and_tall, image_size=size, labels=None, **{how: True})
    plain = ImageFiles.from_directory(wide_and_tall, image_size=size, labels=None)
    for i, theirs_i in enumerate(theirs):
        expected = np.asarray(theirs_i, np.float32)
        got = mine.read(i).astype(np.float32)
        assert got.shape == expected.shape
        # OpenCV's and TensorFlow's bilinear resizes round differently: a few levels of 255.
        assert np.abs(got - expected).mean() < 3.0, (i, np.abs(got - expected).mean())
        if i != 2:  # not square: without crop or pad the picture is another one
            assert np.abs(plain.read(i).astype(np.float32) - expected).mean() > 10.0, i


def test_nearest_takes_the_pixels_keras_takes(wide_and_tall):
    """Nearest samples the pixel under each output pixel's centre, as TensorFlow does:
    OpenCV's INTER_NEAREST floors its position, half a pixel off (a user's folder differed
    from Keras' by 16 levels of 255 a pixel, median)."""
    import keras

    for size in ((24, 32), (17, 9)):
        theirs = keras.utils.image_dataset_from_directory(
            str(wide_and_tall), image_size=size, batch_size=None, shuffle=False, labels=None,
            verbose=False, interpolation="nearest")
        mine = ImageFiles.from_directory(wide_and_tall, image_size=size, labels=None,
                                         interpolation="nearest")
        for i, theirs_i in enumerate(theirs):
            got, expected = mine.read(i), np.asarray(theirs_i, np.uint8)
            # but where a centre falls on a pixel edge exactly: a tie each rounds its own way
            with Image.open(mine.paths[i]) as photo:
                h, w = photo.height, photo.width
            ties = [((np.arange(n) + 0.5) * given / n % 1) == 0 for n, given in
                    zip(size, (h, w))]
            parted = (got != expected).any(-1) & ~(ties[0][:, None] | ties[1][None, :])
            assert not parted.any(), (i, size, np.argwhere(parted)[:5])
