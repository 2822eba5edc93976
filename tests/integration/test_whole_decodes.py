"""Every fallback from the decode-time crop to a whole decode is counted in ``stats()`` and
said in one log line (issue 57): ``on_error="skip"`` on a JPEG cut short here (an
``augment`` override that reads the pixels itself: tests/integration/test_override_plan.py);
boxes and masks over undecoded photos need none (tests/integration/test_targets_undecoded.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, Op
from shmaug.sources import from_coco
from tests.annotations_data import write_coco

pytestmark = pytest.mark.timeout(180)
# six JPEGs of several sizes, a box each: (name, width, height, [(x, y, w, h, class, crowd)])
JPEGS = [(f"{i}.jpg", 80 + 8 * i, 60 + 4 * i, [(5, 5, 20, 15, 1, 0)]) for i in range(6)]
MESSAGE = "decoded a photo whole"


def _crop(**targets) -> Compose:
    return Compose([Op("random_resized_crop", height=32, width=32), Maybe(Op("hflip"))],
                   **targets)


def test_the_crop_alone_decodes_no_photo_whole(tmp_path) -> None:
    json_path, folder = write_coco(tmp_path, JPEGS)
    files, _ = from_coco(json_path, folder, image_size=None)
    with shmaug.Loader(files, batch_size=3, augment=_crop(), workers=2, seed=0) as loader:
        for _ in loader:
            pass
        assert loader.stats()["whole_decodes"] == {}


_SKIP_WITHOUT_TURBO = """
import json, logging, sys
import numpy as np
import shmaug
logging.basicConfig()  # the log line, on stderr
from shmaug.ops import Compose, Op
augment = Compose([Op("random_resized_crop", height=32, width=32)])
made = {}
for on_error in ("raise", "skip"):
    files = shmaug.ImageFiles.from_directory(sys.argv[1], image_size=None, on_error=on_error)
    with shmaug.Loader(files, batch_size=3, augment=augment, workers=1, seed=0) as loader:
        made[on_error] = np.concatenate([x for x, _ in loader])
        counted = loader.stats()["whole_decodes"]
print(json.dumps([counted, bool((made["raise"] == made["skip"]).all())]))
"""


def test_skipping_without_libjpeg_turbo_decodes_intact_photos_as_raising_does(tmp_path
                                                                              ) -> None:
    """Without libjpeg-turbo, ``on_error="skip"`` decoded every JPEG whole before its crop:
    3x slower on large photos, and other pixels than ``on_error="raise"`` gives. Only a JPEG
    cut short is decoded whole now (test_a_jpeg_cut_short_is_stood_in_for_...)."""
    _, folder = write_coco(tmp_path, JPEGS)
    env = {**os.environ, "SHMAUG_JPEG": "opencv"}  # as where libjpeg-turbo is not installed
    done = subprocess.run([sys.executable, "-c", _SKIP_WITHOUT_TURBO, str(folder)], env=env,
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    counted, same = json.loads(done.stdout.strip().splitlines()[-1])
    assert counted == {} and same, (counted, same)
    assert MESSAGE not in done.stderr


def test_a_jpeg_libjpeg_turbo_refuses_is_decoded_whole_and_counted(tmp_path) -> None:
    """A stray SOF marker before the end: libjpeg-turbo refuses a window that reaches it,
    OpenCV reads the file (with a warning), so that window comes from a whole decode,
    counted."""
    from shmaug import whole_decodes
    from shmaug.resample import Resample
    from shmaug.sources.images import decode, turbo

    if not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    _, folder = write_coco(tmp_path, JPEGS)
    whole = (folder / "2.jpg").read_bytes()
    odd = np.frombuffer(whole[:-2] + b"\xff\xc0\x01\x02\x03" + whole[-2:], np.uint8)
    how = Resample("bilinear", within=True, antialias=True)
    header = decode.jpeg_header(odd)
    before = whole_decodes.summary(whole_decodes.counts())
    for data in (np.frombuffer(whole, np.uint8), odd):
        out = decode.resized_window(data, "2.jpg", "rgb", header, (0, 0, *header[:2]),
                                    (32, 32), how, "turbo")
        assert out.shape == (32, 32, 3) and out.std() > 10
    counted = whole_decodes.summary(whole_decodes.counts())
    assert counted.get("turbo_refused", 0) == before.get("turbo_refused", 0) + 1, counted


@pytest.mark.parametrize("jpeg", ["turbo", "opencv"])
def test_a_jpeg_cut_short_is_stood_in_for_not_delivered_half_grey(tmp_path, monkeypatch,
                                                                 jpeg) -> None:
    """``on_error="skip"`` reads a JPEG's header only before the op decodes its window; a
    file with no end marker (a download cut short) is decoded whole there instead, where it
    can still be stood in for: libjpeg-turbo alone would fill the missing rows with grey and
    only warn, and OpenCV's refusal in the op could not be stood in for."""
    from shmaug.sources.images import turbo

    if jpeg == "turbo" and not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    monkeypatch.setenv("SHMAUG_JPEG", jpeg)  # (read when the source is made)
    _, folder = write_coco(tmp_path, JPEGS)
    cut = folder / "3.jpg"
    whole = cut.read_bytes()
    scan = whole.index(b"\xff\xda")  # cut half way through the scan: the header reads
    cut.write_bytes(whole[: (scan + len(whole)) // 2])
    paths = sorted(folder.glob("*.jpg"))
    files = shmaug.ImageFiles.from_paths(paths, [0] * len(paths), image_size=None,
                                         on_error="skip")
    with pytest.warns(shmaug.ShmaugWarning, match="3.jpg"), \
            shmaug.Loader(files, batch_size=3, augment=_crop(), workers=2, seed=0) as loader:
        delivered = [(x, y) for x, y in loader]
        stats = loader.stats()
    assert stats["skipped"] == 1 and stats["unreadable"] == [str(cut)], stats
    # the cut file alone was decoded whole (the probe's look, the epoch's, a batch made ahead
    # for the next: fewer than one for each file)
    assert set(stats["whole_decodes"]) == {"on_error_skip"}, stats["whole_decodes"]
    assert 1 <= stats["whole_decodes"]["on_error_skip"] < len(paths), stats["whole_decodes"]
    images = np.concatenate([x for x, _ in delivered])
    assert len(images) == len(paths)
    assert (images == 128).all(-1).mean((1, 2)).max() < 0.2  # no half-grey photo


@pytest.mark.parametrize("jpeg", ["turbo", "opencv"])
def test_a_damaged_jpeg_with_its_end_marker_is_stood_in_for(tmp_path, monkeypatch, jpeg):
    """A Huffman table past its 256 codes, the end marker intact: without libjpeg-turbo
    (whose header read refuses it) nothing looked at the file before the op, which then
    failed in the worker, where no stand-in can be made."""
    from shmaug.sources.images import turbo

    if jpeg == "turbo" and not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    monkeypatch.setenv("SHMAUG_JPEG", jpeg)
    _, folder = write_coco(tmp_path, JPEGS)
    bad = folder / "3.jpg"
    data = bytearray(bad.read_bytes())
    table = data.find(b"\xff\xc4")  # the first DHT: its 16 counts summed past 256
    data[table + 5:table + 21] = b"\xff" * 16
    bad.write_bytes(bytes(data))
    paths = sorted(folder.glob("*.jpg"))
    files = shmaug.ImageFiles.from_paths(paths, [0] * len(paths), image_size=None,
                                         on_error="skip")
    with pytest.warns(shmaug.ShmaugWarning, match="3.jpg"), \
            shmaug.Loader(files, batch_size=3, augment=_crop(), workers=1, seed=0) as loader:
        assert sum(len(x) for x, _ in loader) == len(paths)
        assert loader.stats()["unreadable"] == [str(bad)]
