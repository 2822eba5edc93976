"""ShmaugWarning: what the user should change is a warning they see, once, at their own line.

No process starts here; the warnings raised by running loaders are tested beside them
(test_files.py, test_sequence_fit.py, test_loader_args.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.errors import warn


def test_shmaug_warning_is_a_user_warning_not_an_error():
    assert issubclass(shmaug.ShmaugWarning, UserWarning)
    assert not issubclass(shmaug.ShmaugWarning, shmaug.ShmaugError)


def test_warn_points_at_the_first_caller_outside_shmaug():
    with pytest.warns(shmaug.ShmaugWarning, match="look here") as warned:
        warn("look here")  # called from outside shmaug: this line
    assert warned[0].filename == __file__


def test_images_beside_class_folders_are_one_warning_at_the_callers_line(tmp_path):
    for name in ("ant", "bee"):
        (tmp_path / name).mkdir()
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / name / "0.png")
    for stray in ("stray.png", "other.jpg"):
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / stray)
    with pytest.warns(shmaug.ShmaugWarning, match=r"directly in this folder are ignored") as w:
        files = shmaug.ImageFiles.from_directory(tmp_path, image_size=(4, 4))
    assert len(w) == 1 and w[0].filename == __file__
    assert "['ant', 'bee']" in str(w[0].message) and "move them into a class" in \
        str(w[0].message)
    assert len(files) == 2
    # Filterable by category, as a user would silence it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", shmaug.ShmaugWarning)
        shmaug.ImageFiles.from_directory(tmp_path, image_size=(4, 4))


def test_a_folder_of_class_folders_only_says_nothing(tmp_path):
    (tmp_path / "ant").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "ant" / "0.png")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")  # record every warning, even one said before
        files = shmaug.ImageFiles.from_directory(tmp_path, image_size=(4, 4))
    assert [str(w.message) for w in said] == []
    assert len(files) == 1 and files.class_names == ("ant",)


class _Hooked:
    level = 0

    def augment(self, image, rng):
        image.mean()  # a name on another object: not read off self
        return image * self.gain + self.level + (lambda z: z + self.shift)(0) + f(image, self.k)


def f(image, k):
    return image


def test_the_hooks_reads_off_self_are_found_on_every_python():
    """Python 3.13 pushes `image` and `self` in one instruction (LOAD_FAST_LOAD_FAST) before
    `image * self.gain`: the diff review found such reads missed there."""
    from shmaug.keras._checks import _self_attributes

    code = _Hooked.augment.__code__
    assert _self_attributes(code, "self") == {"gain", "level", "shift", "k"}


def test_plain_values_are_fingerprinted_alike_whatever_their_type_and_big_ones_not():
    from shmaug.keras._checks import _NOT_PLAIN, _canonical

    def canon(value):
        return _canonical(value, [1000, 1 << 20])

    assert canon(0.5) == canon(np.float64(0.5)) and canon(True) == canon(np.bool_(True))
    assert canon({"b": 1, "a": [2, 3]}) == canon({"a": (2, 3), "b": np.int64(1)})
    assert canon({3, 1, 2}) == canon({2, 3, 1}) and canon(np.arange(3)) != canon(np.arange(4))
    for big in (b"x" * (2 << 20), list(range(5000)), object(), [1, object()]):
        assert canon(big) is _NOT_PLAIN
