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
    assert "['ant', 'bee']" in str(w[0].message) and "class_names=" in str(w[0].message)
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
