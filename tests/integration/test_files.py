"""Image files as a source: decode in the workers, the same batches as the packed file."""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.sources.files import ImageFiles, ImageReadError
from tests import _ops
from tests._helpers import assert_same_batches, needs_keras

pytestmark = pytest.mark.timeout(120)

# class -> (name, PIL mode, (height, width)): PNG and JPEG (and BMP), grey and RGB(A), varied sizes
LAYOUT = {
    "ant": [("0.png", "RGB", (20, 30)), ("1.jpg", "L", (25, 17)), ("2.png", "L", (33, 33))],
    "bee": [("0.jpg", "RGB", (40, 28)), ("1.png", "RGBA", (18, 18)), ("2.bmp", "RGB", (16, 16))],
    "cat": [("0.png", "L", (12, 40)), ("1.jpeg", "RGB", (31, 23))],
}


def picture(mode: str, size: tuple[int, int], seed: int) -> Image.Image:
    """A smooth picture plus noise, so JPEG keeps it recognisable."""
    rng = np.random.default_rng(seed)
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w]
    channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    planes = [(yy * (3 + c) + xx * (5 - c) + rng.integers(0, 40, (h, w))) % 256
              for c in range(channels)]
    array = np.stack(planes, axis=-1).astype(np.uint8)
    return Image.fromarray(array[..., 0] if channels == 1 else array, mode)


def write_folder(root: Path) -> Path:
    for c, (label, files) in enumerate(LAYOUT.items()):
        (root / label).mkdir(parents=True)
        for i, (name, mode, size) in enumerate(files):
            picture(mode, size, 10 * c + i).save(root / label / name)
    (root / "cat" / "notes.txt").write_text("not an image")  # ignored, as Keras does
    return root


@pytest.fixture
def folder(tmp_path):
    return write_folder(tmp_path / "data")


def epoch(x, y, **kwargs):
    with shmaug.Loader(x, y, batch_size=3, **kwargs) as loader:
        return [b for b in loader]


def test_directory_gives_sorted_classes_and_labels(folder):
    files = ImageFiles.from_directory(folder, image_size=(16, 24))
    assert files.class_names == ("ant", "bee", "cat")
    assert files.class_indices == {"ant": 0, "bee": 1, "cat": 2}
    assert files.labels.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    assert [os.path.basename(p) for p in files.paths[-2:]] == ["0.png", "1.jpeg"]
    assert len(files) == 8 and files.output_shape == (16, 24, 3)
    assert "8 files" in repr(files)


def test_dataframe_and_paths_give_the_same_classes_as_the_folder(folder):
    pd = pytest.importorskip("pandas")
    by_folder = ImageFiles.from_directory(folder, image_size=(16, 16))
    rows = [(os.path.relpath(p, folder), by_folder.class_names[y])
            for p, y in zip(by_folder.paths, by_folder.labels)]
    df = pd.DataFrame(rows[::-1], columns=["filename", "class"])  # order must not matter
    by_df = ImageFiles.from_dataframe(df, folder, image_size=(16, 16))
    assert by_df.class_names == by_folder.class_names
    assert by_df.class_indices == by_folder.class_indices
    by_path = dict(zip(by_df.paths, by_df.labels.tolist()))
    assert by_path == dict(zip(by_folder.paths, by_folder.labels.tolist()))
    by_list = ImageFiles.from_paths(by_folder.paths, [r[1] for r in rows], image_size=(16, 16))
    assert by_list.class_names == by_folder.class_names
    np.testing.assert_array_equal(by_list.labels, by_folder.labels)
    with pytest.raises(shmaug.ArgumentError, match=r"`y_col`='label' is not a column"):
        ImageFiles.from_dataframe(df, folder, y_col="label")


@pytest.mark.parametrize("method, given, fix", [
    ("from_directory", {"target_size": [150, 150]}, r"`image_size`. Fix: pass "
                                                    r"`image_size=\(150, 150\)`"),
    ("from_directory", {"class_mode": "sparse"}, r"`label_mode`. Fix: pass `label_mode='int'`"),
    ("from_directory", {"classes": ["ant"]}, r"`class_names`. Fix: pass `class_names=\['ant'\]`"),
    ("from_dataframe", {"target_size": (150, 150)}, r"from_dataframe .*which calls it "
                                                    r"`image_size`"),
    ("from_dataframe", {"class_names": ["ant"]}, r"calls it `classes`. Fix: pass "
                                                 r"`classes=\['ant'\]`"),
    ("from_dataframe", {"class_mode": "raw"}, r"`y_col=None`\) and give the loader"),
    ("from_dataframe", {"shuffle": True}, r"`shuffle` is not an argument of "
                                          r"ImageFiles.from_dataframe.*shmaug.Sequence"),
    ("from_dataframe", {"validate_filenames": False}, r"from_dataframe.*Fix: leave it "
                                                      r"out.*on_error='skip'"),
    # Keras' arguments that have another place: "Fix: leave `validation_split` out"
    ("from_dataframe", {"validation_split": 0.2}, r"split the DataFrame first.*frac=0.2.*same "
                                                  r"`classes=`"),
    ("from_dataframe", {"weight_col": "w"}, r"`sample_weight`.*sample_weight=df\['w'\]"),
    ("from_dataframe", {"y_col": ["class", "w"]}, r"several columns.*`y_col=None`.*"
                                                  r"df\[\['class', 'w'\]\].to_numpy\(\)")])
def test_image_data_generators_argument_names_are_told_ours(folder, method, given, fix):
    """flow_from_directory's target_size and class_mode were told to be left out (giving
    256x256 int labels without a word), and flow_from_dataframe's names raised a bare
    TypeError naming from_paths, a method the user never called."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"filename": ["ant/0.png"], "class": ["ant"], "w": [1.0]})
    with pytest.raises(TypeError, match=fix):
        if method == "from_directory":
            ImageFiles.from_directory(folder, **given)
        else:
            ImageFiles.from_dataframe(df, folder, **given)


def test_a_dataframes_labels_are_refused_with_the_fix_where_they_are_not_one_class_each(folder):
    """A missing label was told "must be all ints ... received 'dog' (type str)"; a column of
    lists (flow_from_dataframe's multi-label) raised numpy's "inhomogeneous shape"; `classes`
    leaving a class out was told to add it to `class_names`, an argument it has not."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"filename": ["ant/0.png", "bee/0.jpg", "cat/0.png"],
                       "class": ["ant", "bee", "cat"]})
    cases = [(df.assign(**{"class": ["ant", None, "cat"]}), {}, r"no label in 1 row\(s\), e.g. "
              r"index 1 \('bee/0.jpg'\).*dropna\(subset=\['class'\]\)"),
             (df.assign(**{"class": ["ant", float("nan"), "cat"]}), {}, r"no label in 1 row"),
             (df.assign(**{"class": pd.array(["ant", pd.NA, "cat"], dtype="string")}), {},
              r"no label in 1 row"),  # (pandas' NA has no truth value)
             (df.assign(**{"class": [["ant"], ["bee", "ant"], ["cat"]]}), {},
              r"several classes per row.*MultiLabelBinarizer"),
             (df, {"classes": ["ant", "bee"]}, r"`classes`=\['ant', 'bee'\] leaves out.*\['cat'\]"
              r".*isin\(\['ant', 'bee'\]\)"),
             # a NaN path became the file 'nan', told it had no extension
             (df.assign(filename=["ant/0.png", float("nan"), "cat/0.png"]), {},
              r"`x_col`='filename' has no path in 1 row\(s\), e.g. index 1\. Fix: leave "
              r"them out, df.dropna\(subset=\['filename'\]\)\.$")]
    for frame, given, fix in cases:
        with pytest.raises((shmaug.ArgumentError, shmaug.ArgumentTypeError), match=fix):
            ImageFiles.from_dataframe(frame, folder, **given)


def test_a_categorical_column_numbers_every_category_also_those_a_subset_lacks(folder):
    """A fold without one class numbered the others from 0: its labels scored as others."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"filename": ["bee/0.jpg", "cat/0.png"],
                       "class": pd.Categorical(["bee", "cat"], categories=["cat", "ant", "bee"],
                                               ordered=True)})
    files = ImageFiles.from_dataframe(df, folder, image_size=(8, 8))
    assert files.class_indices == {"ant": 0, "bee": 1, "cat": 2}  # sorted, as names always are
    assert files.labels.tolist() == [1, 2]
    assert "classes=" not in repr(files)  # inferred, not passed: the repr shows the call made


@pytest.mark.parametrize("labels, told", [
    (["dog", "dog ", "cat"], r"'dog' and 'dog ' differ only in case or in spaces"),
    (["DOG", "dog", "cat"], r"'DOG' and 'dog' differ only in case"),
    (["cat|dog", "cat", "dog"], r"such as 'cat\|dog' look like several labels joined by '\|'.*"
                                r"MultiLabelBinarizer.*split\('\|'\)"),
    (["bird;cat", "dog", "cat"], r"joined by ';'"),
    (["cat|dog", "dog|bird", "bird|cat"], r"joined by '\|'")])  # (every row two tags)
def test_class_names_that_look_like_typos_or_joined_labels_are_told(folder, labels, told):
    """A hand-made CSV's 'dog ' and 'DOG', or its multi-label 'cat|dog' column, became
    classes of their own without a word."""
    paths = [str(folder / p) for p in ("ant/0.png", "bee/0.jpg", "cat/0.png")]
    with pytest.warns(shmaug.ShmaugWarning, match=told):
        ImageFiles.from_paths(paths, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (from the diff review: names that are classes)
        ImageFiles.from_paths(paths, ["cat", "dog", "Smith, J."])  # (a comma alone: no join)
        ImageFiles.from_paths(paths, ["Paris, France", "Lyon, France", "Austin, Texas"])
        ImageFiles.from_paths(paths, ["A", "a", "b"])  # (EMNIST's letters of both cases)
        ImageFiles.from_paths(paths, labels, class_names=sorted(set(labels)))  # (given)
        ImageFiles.from_paths(paths, ["Quercus robur; L.", "Fagus sylvatica; L.", "cat"])
    pd = pytest.importorskip("pandas")  # (a Categorical's categories are the data's names)
    with pytest.warns(shmaug.ShmaugWarning, match=told):
        ImageFiles.from_dataframe(pd.DataFrame({"filename": paths, "class": pd.Categorical(
            labels)}), image_size=(8, 8))


@needs_keras
def test_validation_one_hot_rows_of_another_width_are_refused_when_fit_begins(folder):
    """A holdout without the last class, or of class ids (no names), made narrower one-hot
    rows: Keras' bare shape error, or (ids of class 0 alone, width 1) a silent fit."""
    from tests._ops import tiny_model

    pd = pytest.importorskip("pandas")
    rows = pd.DataFrame({"filename": ["ant/0.png", "bee/0.jpg", "cat/0.png"] * 2,
                         "class": ["ant", "bee", "cat"] * 2, "cid": [0, 1, 2] * 2})
    model = tiny_model((8, 8, 3), 3)
    model.compile("sgd", "categorical_crossentropy")
    for col in ("class", "cid"):
        made = [ImageFiles.from_dataframe(part, folder, y_col=col, image_size=(8, 8),
                                          label_mode="categorical")
                for part in (rows, rows[rows[col].isin(["ant", "bee", 0])])]
        with shmaug.Sequence(made[0], batch_size=4, workers=0) as t, \
                shmaug.Sequence(made[1], batch_size=4, workers=0) as v:
            with pytest.raises(shmaug.ArgumentError, match=r"one-hot labels are (2|1) wide "
                                                           r"against the training data's 3.*"
                                                           r"classes=list\(range\(k\)\)"):
                model.fit(t, validation_data=v, epochs=1, verbose=0)


@needs_keras
def test_validation_files_numbering_their_classes_otherwise_are_refused_when_fit_begins(folder):
    from tests._ops import tiny_model

    pd = pytest.importorskip("pandas")
    train = ImageFiles.from_directory(folder, image_size=(8, 8))
    rows = pd.DataFrame({"filename": ["bee/0.jpg", "cat/0.png"], "class": ["bee", "cat"]})
    model = tiny_model((8, 8, 3), 3)
    for classes, refused in ((None, True), (["ant", "bee", "cat"], False)):
        val = ImageFiles.from_dataframe(rows, folder, image_size=(8, 8), classes=classes)
        with shmaug.Sequence(train, batch_size=4, workers=0) as t, \
                shmaug.Sequence(val, batch_size=4, workers=0) as v:
            if refused:
                with pytest.raises(shmaug.ArgumentError, match=r"numbers its classes otherwise.*"
                                   r"\{'bee': 0, 'cat': 1\} against.*it has no \['ant'\].*"
                                   r"classes=\['ant', 'bee', 'cat'\].*empty folder"):
                    model.fit(t, validation_data=v, epochs=1, verbose=0)
            else:
                model.fit(t, validation_data=v, epochs=1, verbose=0)
    # labels of their own (y given): the sources' class numbers are not theirs
    val = ImageFiles.from_dataframe(rows, folder, image_size=(8, 8))
    with shmaug.Sequence(train, np.arange(8) % 3, batch_size=4, workers=0) as t, \
            shmaug.Sequence(val, np.array([1, 2]), batch_size=4, workers=0) as v:
        model.fit(t, validation_data=v, epochs=1, verbose=0)


def test_paths_without_an_extension_are_told_to_add_it(folder):
    """A Kaggle table's image ids were told "convert or drop those files"."""
    with pytest.raises(shmaug.ArgumentError, match=r"1 path\(s\) have no extension, e.g. .*"
                                                   r"ant/0'.*df\['id'\].astype\(str\) \+ "
                                                   r"'.jpg'"):
        ImageFiles.from_paths([str(folder / "ant" / "0")], [0])
    with pytest.raises(shmaug.ArgumentError, match=r"extension shmaug does not decode.*convert"):
        ImageFiles.from_paths([str(folder / "cat" / "notes.txt")], [0])


def test_a_dataframes_float_column_is_told_to_go_in_as_y(folder):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"filename": ["ant/0.png", "bee/0.jpg"], "score": [0.5, 1.25]})
    with pytest.raises(TypeError, match=r"`y_col`='score' holds floats.*y_col=None.*"
                                        r"df\['score'\].to_numpy\(\)"):
        ImageFiles.from_dataframe(df, folder, y_col="score")
    files = ImageFiles.from_dataframe(df, folder, y_col=None, image_size=(8, 8))
    with shmaug.Loader(files, df["score"].to_numpy(), batch_size=2, workers=0) as loader:
        assert loader.batch(0)[1].tolist() == [0.5, 1.25]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_decode_in_workers_equals_the_packed_file(folder, tmp_path, method):
    files = ImageFiles.from_directory(folder, image_size=(20, 20))
    packed = shmaug.pack(files, tmp_path / "packed", workers=2, start_method=method,
                         progress=False)
    x, y = packed.open()
    assert x.shape == (8, 20, 20, 3) and x.dtype == np.uint8
    kwargs = dict(shuffle=True, seed=3, workers=2, start_method=method)
    decoded = epoch(files, files.labels, **kwargs)
    assert_same_batches(decoded, epoch(packed.images, y, **kwargs))
    assert_same_batches(decoded, epoch(files, files.labels, shuffle=True, seed=3, workers=0))
    # With augmentation too: the packed file and the files give bit-identical epochs.
    aug = dict(kwargs, augment=_ops.noisy)
    assert_same_batches(epoch(files, files.labels, **aug), epoch(packed.images, y, **aug))


def test_color_modes_convert_every_file_consistently(folder):
    for mode, channels in [("grayscale", 1), ("rgb", 3), ("rgba", 4)]:
        files = ImageFiles.from_directory(folder, image_size=(8, 8), color_mode=mode)
        images = [files.load(i) for i in range(len(files))]
        assert {im.shape for im in images} == {(8, 8, channels)}
        assert {im.dtype for im in images} == {np.dtype(np.uint8)}
    # A grey PNG read as rgb is its grey value three times; as rgba, opaque.
    grey = ImageFiles.from_paths([folder / "ant" / "2.png"], image_size=(33, 33), color_mode="rgb")
    source = np.asarray(Image.open(folder / "ant" / "2.png"))
    np.testing.assert_array_equal(grey.load(0), np.repeat(source[..., None], 3, axis=2))
    rgba = ImageFiles.from_paths([folder / "ant" / "2.png"], image_size=(33, 33), color_mode="rgba")
    assert (rgba.load(0)[..., 3] == 255).all()
    # RGB channel order (not OpenCV's BGR) for a lossless file.
    rgb = ImageFiles.from_paths([folder / "ant" / "0.png"], image_size=(20, 30))
    np.testing.assert_array_equal(rgb.load(0), np.asarray(Image.open(folder / "ant" / "0.png")))


def test_mixed_channel_counts_without_a_color_mode_name_the_file(folder):
    files = ImageFiles.from_directory(folder, image_size=(8, 8), color_mode=None)
    assert files.channels == 3  # learned from the first file, ant/0.png
    with pytest.raises(ImageReadError, match=r"1\.jpg.*1 channel\(s\) but this source has 3"):
        files.load(1)
    with pytest.raises(shmaug.WorkerError, match=r"(?s)(1\.jpg|2\.png).*color_mode=.*`ImageFiles\.load`"):
        epoch(files, None, workers=2)
    skipping = ImageFiles.from_directory(folder, image_size=(8, 8), color_mode=None,
                                         on_error="skip")
    with shmaug.Loader(skipping, None, batch_size=4, workers=2) as loader, \
            pytest.warns(shmaug.ShmaugWarning, match=r"1 channel\(s\) but this source has 3"):
        xs = np.concatenate([xb for xb, _ in loader])
        assert loader.stats()["skipped"] == 4  # the grey JPEG and PNGs, and the RGBA PNG
    reference = np.stack([skipping.load(i) for i in range(len(skipping))])
    np.testing.assert_array_equal(xs, reference)  # same stand-ins in the workers as here


def test_corrupt_file_is_named_with_its_reason(folder):
    (folder / "bee" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    (folder / "cat" / "0.png").write_bytes(b"")
    files = ImageFiles.from_directory(folder, image_size=(8, 8))
    with pytest.raises(ImageReadError, match=r"bee/1\.png.*corrupt"):
        files.load(4)
    with pytest.raises(ImageReadError, match=r"cat/0\.png.*empty \(0 bytes\)"):
        files.load(6)
    with pytest.raises(shmaug.WorkerError, match=r"bee/1\.png.*on_error='skip'") as info:
        epoch(files, files.labels, workers=2)
    assert isinstance(info.value, ImageReadError) and info.value.sample_index == 4


@pytest.mark.parametrize("start_method", [m for m in ("fork", "spawn")
                                          if m in multiprocessing.get_all_start_methods()])
def test_a_corrupt_png_is_told_by_shmaugs_error_alone(folder, capfd, start_method):
    """Issue 60: OpenCV printed its own ``[ERROR:0@0.350] global grfmt_png.cpp ... IHDR chunk
    shall be first`` on the workers' stderr before shmaug's error. (Not forkserver: its
    workers write to the stderr the server started with, which capfd does not hold.)"""
    (folder / "bee" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    files = ImageFiles.from_directory(folder, image_size=(8, 8))
    capfd.readouterr()
    with pytest.raises(shmaug.WorkerError, match=r"bee/1\.png.*corrupt"):
        epoch(files, files.labels, workers=2, start_method=start_method)
    err = capfd.readouterr().err
    assert "IHDR" not in err and "[ERROR:" not in err, err


def test_a_corrupt_png_read_in_this_process_prints_nothing_of_opencvs(folder, capfd):
    """Its lines came back where the main process decodes (workers=0; the stand-in's warning
    of on_error='skip'), outside `logging`: an observability engineer's log read "[ERROR:"
    beside shmaug's warning naming the file. OpenCV's level is the user's again after."""
    import cv2

    (folder / "bee" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    level = cv2.utils.logging.getLogLevel()
    capfd.readouterr()
    with pytest.warns(shmaug.ShmaugWarning, match=r"bee/1\.png"):
        epoch(ImageFiles.from_directory(folder, image_size=(8, 8), on_error="skip"), None,
              workers=0)
    # decodes side by side in threads: each ran while another put the user's level back
    from concurrent.futures import ThreadPoolExecutor

    from shmaug.sources.images.decode import imdecode

    corrupt = np.frombuffer((folder / "bee" / "1.png").read_bytes(), np.uint8)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: imdecode(corrupt, cv2.IMREAD_UNCHANGED), range(2000)))
    err = capfd.readouterr().err
    assert "IHDR" not in err and "[ERROR:" not in err, err
    assert cv2.utils.logging.getLogLevel() == level != cv2.utils.logging.LOG_LEVEL_SILENT


@pytest.mark.parametrize("workers", [0, 2])
def test_an_ops_error_on_a_files_sample_names_the_file(folder, workers):
    """A document engineer's crop larger than one 1x7 scan named "sample index 2" of a
    folder of thousands; the file is what they look for."""
    from PIL import Image

    Image.new("RGB", (7, 1)).save(folder / "ant" / "0.png")  # (index 0 of the sorted paths)
    files = ImageFiles.from_directory(folder, image_size=None)
    crop = shmaug.ops.Op("crop", height=4, width=4)
    with pytest.raises(shmaug.WorkerError, match=r"(?s)crop.*on sample index 0 \(.*ant/0\.png\)"):
        epoch(files, files.labels, workers=workers, augment=crop, output_shape=(4, 4, 3))
    # a stand-in's pixels: the file read, the one to fix, named first (a diff review's)
    (folder / "ant" / "1.jpg").write_bytes(b"not a jpeg")
    Image.new("RGB", (7, 1)).save(folder / "ant" / "2.png")
    (folder / "ant" / "0.png").unlink()
    files = ImageFiles.from_directory(folder, image_size=None, on_error="skip")
    with pytest.raises(shmaug.WorkerError, match=r"(?s)on sample index 0 \(.*ant/2\.png, "
                                                 r"standing in for the unreadable .*ant/1\.jpg\)"):
        epoch(files, files.labels, workers=workers, augment=crop, output_shape=(4, 4, 3))


def test_skip_replaces_deterministically_and_counts(folder):
    (folder / "bee" / "1.png").write_bytes(b"garbage")
    files = ImageFiles.from_directory(folder, image_size=(8, 8), on_error="skip")
    expected = [files.load(i) for i in range(len(files))]
    np.testing.assert_array_equal(expected[4], expected[5])  # the next readable file
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(files.load))(4), expected[4])
    runs = []
    for workers in (0, 2):
        with shmaug.Loader(files, files.labels, batch_size=3, workers=workers) as loader, \
                pytest.warns(shmaug.ShmaugWarning, match=r"bee[/\\]+1\.png.*corrupt"):
            runs.append([b for b in loader])
            assert loader.stats()["skipped"] == 1
            assert loader.stats()["unreadable"] == [str(folder / "bee" / "1.png")]
    assert_same_batches(*runs)
    np.testing.assert_array_equal(np.concatenate([xb for xb, _ in runs[1]]), np.stack(expected))


def test_missing_file_unknown_extension_and_empty_folder(folder, tmp_path):
    missing = [folder / "ant" / "0.png", folder / "ant" / "gone.png"]
    with pytest.raises(shmaug.ArgumentError, match=r"1 image file\(s\) do not exist.*gone\.png"):
        ImageFiles.from_paths(missing, image_size=(8, 8))
    files = ImageFiles.from_paths(missing, image_size=(8, 8), on_error="skip")
    np.testing.assert_array_equal(files.load(1), files.load(0))
    vanishing = folder / "ant" / "vanishing.png"
    vanishing.write_bytes((folder / "ant" / "0.png").read_bytes())
    strict = ImageFiles.from_paths([vanishing], image_size=(8, 8))
    vanishing.unlink()  # vanished after the check
    with pytest.raises(ImageReadError, match=r"vanishing\.png.*no such file"):
        strict.load(0)
    with pytest.raises(shmaug.ArgumentError, match=r"extension.*notes\.txt.*\.png"):
        ImageFiles.from_paths([folder / "cat" / "notes.txt"], image_size=(8, 8))
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(shmaug.ArgumentError, match=r"holds no image file"):
        ImageFiles.from_directory(tmp_path / "empty", image_size=(8, 8))
    with pytest.raises(shmaug.ArgumentError, match=r"`paths` is empty"):
        ImageFiles.from_paths([], image_size=(8, 8))
    for size in ((8,), "64", b"64"):  # a string is not read digit by digit: "64" as (6, 4)
        with pytest.raises(shmaug.ArgumentError, match=r"`image_size` must be \(height, width\)"):
            ImageFiles.from_directory(folder, image_size=size)
    with pytest.raises(shmaug.ArgumentError, match=r"`color_mode` must be one of"):
        ImageFiles.from_directory(folder, color_mode="RGB")


def test_flat_folder_has_no_labels(tmp_path):
    for i in range(3):
        picture("RGB", (10 + i, 12), i).save(tmp_path / f"{i}.png")
    # (pointed at one class's folder by mistake, most often: Keras finds no image there)
    with pytest.warns(shmaug.ShmaugWarning, match="no class sub-folders.*labels=None"):
        files = ImageFiles.from_directory(tmp_path, image_size=(6, 6))
    assert files.labels is None and files.class_names == () and len(files) == 3
    files = ImageFiles.from_directory(tmp_path, image_size=(6, 6), labels=None)  # said: quiet
    assert files.labels is None and len(files) == 3
    ((xb, yb),) = epoch(files, None, workers=0)
    assert xb.shape == (3, 6, 6, 3) and yb is None


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_read_the_paths_from_the_loaders_shared_memory(folder, method):
    files = ImageFiles.from_directory(folder, image_size=(8, 8))
    with shmaug.Loader(files, batch_size=4, workers=2, start_method=method, seed=0) as loader:
        sent = loader._run.load  # what the workers were sent: the table by name, not the paths
        assert sent.table.shared and not files.load.table.shared
        assert len(pickle.dumps(sent)) < 1_000
        xs = np.concatenate([xb for xb, _ in loader])
    np.testing.assert_array_equal(xs, np.stack([files.load(i) for i in range(len(files))]))


@needs_keras
def test_keras_sequence_over_image_files(folder):
    files = ImageFiles.from_directory(folder, image_size=(8, 8))
    with shmaug.Sequence(files, files.labels, batch_size=4, workers=2, seed=0) as seq:
        xb, yb = seq[1]
    assert xb.shape == (4, 8, 8, 3) and yb.tolist() == [1, 1, 2, 2]


def test_skip_stand_in_keeps_the_samples_label(tmp_path):
    from PIL import Image

    for name, value in (("a_black", 0), ("b_white", 255)):
        (tmp_path / name).mkdir()
        for i in range(2):
            Image.fromarray(np.full((8, 8), value, np.uint8)).save(tmp_path / name / f"{i}.png")
    (tmp_path / "a_black" / "1.png").write_bytes(b"corrupt")  # the last file of class 0
    files = ImageFiles.from_directory(tmp_path, image_size=(8, 8), color_mode="grayscale",
                                      on_error="skip")
    with shmaug.Loader(files, batch_size=4, workers=0) as loader, \
            pytest.warns(shmaug.ShmaugWarning, match=r"a_black[/\\]+1\.png"):
        xb, yb = loader.batch(0)
    for image, label in zip(xb, yb):
        assert image.mean() == (0 if files.class_names[label] == "a_black" else 255)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stand_in_hands_out_its_own_targets_from_the_loaders_y(tmp_path, workers):
    """A regression value, multi-hot row or weight given as the loader's `y` stayed the
    unreadable file's while its stand-in's pixels went out (keras.md's recipe for
    class_mode="raw"): now every target is the stand-in's, in every epoch and worker count."""
    paths = []
    for i in range(8):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(np.full((4, 4), 10 * i, np.uint8)).save(paths[-1])
    paths[2].write_bytes(b"corrupt")
    paths[7].write_bytes(b"")  # (the last: its stand-in wraps round to the first)
    files = ImageFiles.from_paths([str(p) for p in paths], image_size=(4, 4),
                                  color_mode="grayscale", on_error="skip")
    value = np.arange(8, dtype=np.float32)
    y = {"value": value, "weight": 1 + value, "tags": np.eye(8, dtype=np.uint8)}
    with pytest.warns(shmaug.ShmaugWarning, match="replaced by the next readable"), \
            shmaug.Loader(files, y, batch_size=4, workers=workers, shuffle=True,
                          seed=3) as loader:
        for epoch in range(2):
            loader.epoch = epoch
            for xb, yb in loader:
                np.testing.assert_array_equal(xb[:, 0, 0, 0], 10 * yb["value"])
                np.testing.assert_array_equal(yb["weight"], 1 + yb["value"])
                np.testing.assert_array_equal(yb["tags"].argmax(1), yb["value"])
        assert loader.stats()["skipped"] == 4


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stand_in_is_kept_for_the_loaders_life_pixels_and_targets(tmp_path, workers):
    """From the diff reviews: a mark once set stayed, so a file repaired (or a read that had
    failed once) handed its pixels out with its stand-in's `y`; clearing the mark as it read
    again gave a batch in flight the stand-in's pixels with the file's own `y`. The stand-in
    is kept: pixels and targets together, every epoch; a new loader reads the file."""
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(np.full((4, 4), 10 * i, np.uint8)).save(paths[-1])
    good = paths[3].read_bytes()
    paths[3].write_bytes(b"corrupt")
    files = ImageFiles.from_paths([str(p) for p in paths], image_size=(4, 4),
                                  color_mode="grayscale", on_error="skip")
    with pytest.warns(shmaug.ShmaugWarning, match="replaced by the next readable"), \
            shmaug.Loader(files, np.arange(4.0), batch_size=4, workers=workers) as loader:
        xb, yb = loader.batch(0, epoch=0)
        assert yb.tolist() == [0, 1, 2, 0] and xb[:, 0, 0, 0].tolist() == [0, 10, 20, 0]
        paths[3].write_bytes(good)  # (repaired, as the warning's fix says)
        for epoch in (1, 50):  # (in flight since before the repair; read after it)
            xb, yb = loader.batch(0, epoch=epoch)
            assert yb.tolist() == [0, 1, 2, 0] and xb[:, 0, 0, 0].tolist() == [0, 10, 20, 0]
        first = paths[0].read_bytes()
        paths[0].write_bytes(b"")  # (the stand-in itself, rewritten under the loader)
        with warnings.catch_warnings(), pytest.raises(
                ImageReadError, match=r"0.png', which stood in for the unreadable .*3.png'.*"
                                      r"make a new loader"):
            warnings.simplefilter("ignore")  # (0.png, a sample too, is stood in for)
            loader.batch(0, epoch=80)
        paths[0].write_bytes(first)
    with shmaug.Loader(files, np.arange(4.0), batch_size=4, workers=workers) as loader:
        xb, yb = loader.batch(0)
        assert yb.tolist() == [0, 1, 2, 3] and xb[:, 0, 0, 0].tolist() == [0, 10, 20, 30]


def _sixteen_bit_folder(root: Path) -> dict[str, np.ndarray]:
    """A 12-bit camera's tiles as 16-bit PNGs, one 8-bit PNG among them, and a JPEG."""
    import cv2

    rng = np.random.default_rng(5)
    made = {}
    for cls in ("cells", "empty"):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            tile = rng.integers(900, 4096, (24, 20)).astype(np.uint16)
            cv2.imwrite(str(root / cls / f"{i}.png"), tile)
            made[f"{cls}/{i}.png"] = tile
    eight = rng.integers(0, 256, (24, 20)).astype(np.uint8)
    cv2.imwrite(str(root / "cells" / "8bit.png"), eight)
    made["cells/8bit.png"] = eight
    return made


def test_sixteen_bit_files_keep_their_values_with_dtype_uint16(tmp_path):
    """16-bit PNGs were cut to 8 bits without a word (a 12-bit tile's 1000 and 1200 became
    3 and 4); ``dtype="uint16"`` keeps them, scales 8-bit files by 257 onto the same scale,
    and the workers' batches are the main process's, augmented or not."""
    made = _sixteen_bit_folder(tmp_path)
    kept = ImageFiles.from_directory(tmp_path, image_size=None, color_mode="grayscale",
                                     dtype="uint16", label_mode=None)
    assert "dtype='uint16'" in repr(kept)
    for i, path in enumerate(kept.paths):
        want = made[Path(path).relative_to(tmp_path).as_posix()]
        want = want.astype(np.uint16) * 257 if want.dtype == np.uint8 else want
        np.testing.assert_array_equal(kept.load(i)[..., 0], want)
    cut = ImageFiles.from_directory(tmp_path, image_size=None, color_mode="grayscale",
                                    label_mode=None)
    assert cut.load(0).dtype == np.uint8  # Keras' decoders' depth stays the default
    for i, path in enumerate(cut.paths):  # their high byte, as tf.io.decode_png keeps it
        want = made[Path(path).relative_to(tmp_path).as_posix()]  # (// 257 was 1 off on
        if want.dtype == np.uint16:  # 45% of values: fifth review)
            np.testing.assert_array_equal(cut.load(i)[..., 0], (want >> 8).astype(np.uint8))
            if importlib.util.find_spec("tensorflow") is not None:
                import tensorflow as tf

                np.testing.assert_array_equal(
                    cut.load(i), tf.io.decode_png(Path(path).read_bytes(), 1).numpy())
    sized = ImageFiles.from_directory(tmp_path, image_size=(16, 16), color_mode="grayscale",
                                      dtype=np.uint16)
    augment = shmaug.Compose([shmaug.ops.Op("rotate", degrees=(-20, 20))])
    batches = []
    for workers in (0, 2):
        with shmaug.Loader(sized, batch_size=4, augment=augment, workers=workers,
                           seed=3) as loader:
            batches.append(list(loader))
    assert batches[0][0][0].dtype == np.uint16 and batches[0][0][0].max() > 900
    assert_same_batches(batches[0], batches[1])


def test_a_pack_of_sixteen_bit_files_is_uint16(tmp_path):
    _sixteen_bit_folder(tmp_path / "tiles")
    files = ImageFiles.from_directory(tmp_path / "tiles", image_size=(16, 16),
                                      color_mode="grayscale", dtype="uint16")
    packed = shmaug.pack(files, tmp_path / "packed", workers=0, progress=False)
    images = np.load(packed.images, mmap_mode="r")
    assert images.dtype == np.uint16 and images.max() > 900
    assert packed.manifest["dtype"] == "uint16"
    eight = shmaug.pack(tmp_path / "tiles", tmp_path / "packed8", image_size=(16, 16),
                        color_mode="grayscale", workers=0, progress=False)
    assert np.load(eight.images).dtype == np.uint8


@pytest.mark.parametrize("dtype", ["float32", "int16", 16, "rgb"])
def test_a_pixel_dtype_other_than_uint8_or_uint16_is_refused(tmp_path, dtype):
    _sixteen_bit_folder(tmp_path)
    with pytest.raises(shmaug.ArgumentError, match=r"`dtype` must be 'uint8' or 'uint16'.*"
                                                   r"Fix: `dtype='uint16'`"):
        ImageFiles.from_directory(tmp_path, dtype=dtype)
