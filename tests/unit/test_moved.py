"""The flat layout's import paths keep working for one release, each with a warning naming
the new path; the names they gave are the very same objects."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

import shmaug
from shmaug._moved import MOVED

# A name each old module was imported for (the keras ones need Keras: tested where it is).
GIVES = {"files": "ImageFiles", "glyphs": "render_glyphs", "loader": "Loader",
         "pack": "pack", "pool": "WorkerPool", "prefetch": "Prefetcher", "ring": "OutputRing",
         "schedule": "BatchPlan", "store": "SharedStore", "sequence": "Sequence",
         "callbacks": "StallMonitor"}


def test_every_moved_module_has_a_case():
    assert set(GIVES) == set(MOVED)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_same_object(old):
    if MOVED[old].startswith("shmaug.keras"):
        pytest.importorskip("keras")
    module = importlib.import_module(f"shmaug.{old}")
    with pytest.warns(DeprecationWarning, match=rf"`shmaug\.{old}` moved to `{MOVED[old]}`"):
        got = getattr(module, GIVES[old])
    assert got is getattr(importlib.import_module(MOVED[old]), GIVES[old])


def test_from_import_of_an_old_path_warns_at_the_callers_line():
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from shmaug.files import ImageFiles\n")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stderr
    assert "<string>:2: DeprecationWarning: `shmaug.files` moved to `shmaug.sources.files`" in err


def test_importing_an_old_path_leaves_the_top_level_names_alone():
    importlib.import_module("shmaug.pack")
    assert callable(shmaug.pack) and shmaug.pack.__module__ == "shmaug.sources.pack"
    assert shmaug.Loader.__module__ == "shmaug.engine.loader"


def test_an_object_pickled_under_an_old_path_still_loads(tmp_path):
    from PIL import Image

    Image.new("L", (4, 4)).save(tmp_path / "a.png")
    files = shmaug.ImageFiles.from_paths([str(tmp_path / "a.png")])
    old = pickle.dumps(files, protocol=0).replace(b"shmaug.sources.files", b"shmaug.files")
    assert b"shmaug.files" in old
    with pytest.warns(DeprecationWarning, match="shmaug.sources.files"):
        again = pickle.loads(old)
    assert type(again) is shmaug.ImageFiles and len(again) == 1


def test_setting_through_an_old_path_sets_on_the_module():
    from shmaug.engine import _store

    placeholder = sys.modules["shmaug.store"]
    with pytest.warns(DeprecationWarning):
        placeholder.FREE_MARGIN_FOR_TEST = 1  # forwarded, not kept on the placeholder
    assert _store.FREE_MARGIN_FOR_TEST == 1
    del _store.FREE_MARGIN_FOR_TEST
