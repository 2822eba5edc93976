"""`pack`: one pass of decoding into a memory-mappable .npy, atomic, resumable, idempotent."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

import shmaug
from shmaug.sources.files import ImageFiles
from tests._helpers import running, shmaug_segments
from tests.integration.test_files import picture, write_folder

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def test_pack_writes_images_labels_and_a_manifest(tmp_path):
    folder = write_folder(tmp_path / "data")
    packed = shmaug.pack(folder, tmp_path / "out", image_size=(12, 10), color_mode="grayscale",
                         workers=2, progress=False)
    assert packed.created
    assert sorted(os.listdir(tmp_path / "out")) == ["images.npy", "labels.npy", "manifest.json"]
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["count"] == 8 and m["shape"] == [8, 12, 10, 1] and m["class_names"] == ["ant", "bee", "cat"]
    assert m["source"]["image_size"] == [12, 10] and m["source"]["color_mode"] == "grayscale"
    assert m["sha256"] == hashlib.sha256(Path(packed.images).read_bytes()).hexdigest()
    x, y = packed.open()
    assert isinstance(x, np.memmap) and y.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
    files = ImageFiles.from_directory(folder, image_size=(12, 10), color_mode="grayscale")
    np.testing.assert_array_equal(x, np.stack([files.load(i) for i in range(len(files))]))


@pytest.mark.skipif(not hasattr(os, "posix_fallocate"), reason="reserves room where it can")
def test_a_disk_too_small_for_the_pack_is_told_before_a_pixel_is_written(tmp_path,
                                                                          monkeypatch):
    """Onto a 3 MB tmpfs, a 3.9 MB pack died with SIGBUS writing its memory map: no message,
    its partial file left. (The disk's answer stood in for: a mount needs root.)"""
    import errno

    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    folder = write_folder(tmp_path / "data")
    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(shmaug.ArgumentError, match=r"`out` .* bytes free, and the pack needs "
                                                   r"[\d,]+ bytes .*No space left.*Fix: free"):
        shmaug.pack(folder, tmp_path / "out", image_size=(12, 10), workers=0, progress=False)
    assert not (tmp_path / "out").exists()  # (a folder made for it, and its partial file)


_PACK_ONTO = """
import sys, shmaug
try:
    shmaug.pack(sys.argv[1], sys.argv[2], image_size=(12, 10), color_mode="grayscale",
                workers=0, progress=False)
    print("packed")
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="a tmpfs of its own: Linux's mount namespaces, as root")
@pytest.mark.parametrize("room, said", [
    ("8k", r"ArgumentError `out` .*/disk/out' has 4,096 bytes free once images.npy \([\d,]+ "
           r"bytes\) is reserved, and labels.npy and manifest.json, written after the decode, "
           r"need up to [\d,]+ more\. Fix: free"),
    ("160k", r"^packed$")])  # (a diff review's: 3 pages needed, refused for 70,912 bytes)
def test_a_disk_with_room_for_the_images_alone_is_told_before_the_decode(tmp_path, room, said):
    """An SRE's 8 KiB tmpfs held images.npy, not labels.npy and the manifest: "No space left
    on device", with no path, no sizes and no fix, after the whole decode (thrown away)."""
    folder = write_folder(tmp_path / "data")
    (tmp_path / "disk").mkdir()
    script = (f"mount -t tmpfs -o size={room} tmpfs {tmp_path / 'disk'} && exec "
              f"{sys.executable} -c '{_PACK_ONTO}' {folder} {tmp_path / 'disk' / 'out'}")
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, text=True,
                         capture_output=True, timeout=60, env={**os.environ,
                                                              "PYTHONPATH": str(ROOT)})
    if "unshare" in out.stderr and out.returncode:
        pytest.skip(f"no mount namespace here: {out.stderr.strip()}")
    assert re.search(said, out.stdout.strip()), out.stdout + out.stderr[-2000:]


def test_a_pack_stores_class_indices_and_opens_them_as_the_source_encodes_them(tmp_path):
    """One pack for every label_mode; ``open()`` gives the labels as the source's own
    ``labels`` (a categorical source's pack gave indices, and a one-hot model's fit failed)."""
    folder = write_folder(tmp_path / "data")
    for mode in ("int", "categorical"):
        files = ImageFiles.from_directory(folder, image_size=(6, 5), label_mode=mode)
        packed = shmaug.pack(files, tmp_path / mode, workers=1, progress=False)
        stored = np.load(packed.labels)
        assert stored.dtype == np.int64 and stored.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
        y = packed.open()[1]
        assert y.dtype == files.labels.dtype and packed.label_mode == mode
        np.testing.assert_array_equal(y, files.labels)
    assert json.loads((tmp_path / "int" / "manifest.json").read_text())["source"] == \
        json.loads((tmp_path / "categorical" / "manifest.json").read_text())["source"]
    again = shmaug.pack(ImageFiles.from_directory(folder, image_size=(6, 5),
                                                  label_mode="categorical"),
                        tmp_path / "int", workers=1, progress=False)  # the int pack, found
    assert not again.created and again.open()[1].shape == (8, 3)


_PACK_INTO = """
import sys, shmaug
packed = shmaug.pack(sys.argv[1], sys.argv[2], image_size=(64, 64), workers=0, progress=False)
print(packed.created, flush=True)
"""


def test_two_packs_into_one_folder_at_once_take_turns(tmp_path):
    """Two ranks packing into one folder: the second zeroed rows of the first's partial file,
    under the manifest the first then wrote (black images in a pack that looked complete).
    A pack now waits while another holds the folder, then packs; the next finds it done."""
    from shmaug.sources.pack import _alone

    folder = tmp_path / "data" / "a"
    folder.mkdir(parents=True)
    for i in range(12):
        picture("RGB", (100, 100), i).save(folder / f"{i}.png")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", _PACK_INTO, str(folder.parent), str(out)]
    with _alone(str(out)):  # another pack, under way
        waiting = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env)
        said = waiting.stderr.readline()  # (blocks until it warns: it is waiting)
        assert "Another process is packing into" in said, said
        time.sleep(0.5)
        assert waiting.poll() is None and os.listdir(out) == []  # it waits, writing nothing
    made, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and made.strip() == "True", err
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and again.stdout.strip() == "False", again.stderr
    packed = shmaug.pack(folder.parent, out, image_size=(64, 64), verify=True, progress=False)
    assert packed.verified and not packed.created
    files = ImageFiles.from_directory(folder.parent, image_size=(64, 64))
    np.testing.assert_array_equal(packed.open()[0], np.stack([files.load(i) for i in
                                                              range(len(files))]))


def test_second_run_says_it_is_done_and_changed_sources_are_refused(tmp_path, caplog):
    folder = write_folder(tmp_path / "data")
    out = tmp_path / "out"
    first = shmaug.pack(folder, out, image_size=(8, 8), workers=0, progress=False)
    stamp = os.stat(first.images).st_mtime_ns
    caplog.set_level("INFO", logger="shmaug.sources.pack")
    again = shmaug.pack(folder, out, image_size=(8, 8), workers=0, progress=False, verify=True)
    assert not again.created and os.stat(again.images).st_mtime_ns == stamp
    assert "already holds a complete pack" in caplog.text
    with pytest.raises(shmaug.ArgumentError, match=r"another source or with other settings: "
                                                   r"image_size differs"):
        shmaug.pack(folder, out, image_size=(9, 9), workers=0, progress=False)
    touched = next(p for p in Path(folder).rglob("*") if p.is_file())
    os.utime(touched, (1, 1))  # the same bytes, another time (a copy without -t)
    with pytest.raises(shmaug.ArgumentError, match=r"files_sha256 differs \(files_sha256 "
                                                   r"covers each file's path, size and "
                                                   r"modification time.*np.load"):
        shmaug.pack(folder, out, image_size=(8, 8), workers=0, progress=False)
    redone = shmaug.pack(folder, out, image_size=(9, 9), workers=0, progress=False, overwrite=True)
    assert redone.created and redone.open()[0].shape == (8, 9, 9, 3)
    Path(redone.images).write_bytes(b"truncated")  # damaged after the fact: packed again
    assert shmaug.pack(folder, out, image_size=(9, 9), workers=0, progress=False).created


def test_a_nearest_pack_made_half_a_pixel_off_is_packed_again(tmp_path, caplog):
    # Packs made before nearest resizes took the pixel under each centre hold other pixels
    # than a fresh read; their manifest lacks the entry that says so.
    folder = write_folder(tmp_path / "data")
    out = tmp_path / "out"
    first = shmaug.pack(folder, out, image_size=(5, 7), interpolation="nearest", workers=0,
                        progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"].pop("nearest_pixel") == "centre"
    (out / "manifest.json").write_text(json.dumps(manifest))  # as packed before
    np.save(first.images, np.zeros((8, 5, 7, 3), np.uint8))
    again = shmaug.pack(folder, out, image_size=(5, 7), interpolation="nearest", workers=0,
                        progress=False)
    assert again.created and "half a pixel off" in caplog.text
    files = ImageFiles.from_directory(folder, image_size=(5, 7), interpolation="nearest")
    np.testing.assert_array_equal(again.open()[0],
                                  np.stack([files.load(i) for i in range(len(files))]))
    bilinear = shmaug.pack(folder, tmp_path / "bilinear", image_size=(5, 7), workers=0,
                           progress=False)  # other interpolations' manifests are as before
    assert "nearest_pixel" not in bilinear.manifest["source"]


def test_a_pack_of_other_decode_settings_is_not_returned_as_this_ones(tmp_path):
    """reduced_decode=False decodes JPEGs in full before the resize: other pixels. A pack
    made one way is refused for the other, as other settings are, nearest or not; each
    pack holds what a loader reads."""
    folder = tmp_path / "data"
    (folder / "a").mkdir(parents=True)
    for i in range(3):
        picture("RGB", (120, 90), i).save(folder / "a" / f"{i}.jpg", quality=85)
    for interpolation in ("bilinear", "nearest"):
        out = tmp_path / interpolation
        full, reduced = (ImageFiles.from_directory(folder, image_size=(20, 16),
                                                   interpolation=interpolation,
                                                   reduced_decode=flag) for flag in (False, True))
        for files, other in ((full, reduced), (reduced, full)):
            made = shmaug.pack(files, out, workers=0, progress=False, overwrite=True)
            np.testing.assert_array_equal(
                made.open()[0], np.stack([files.load(i) for i in range(len(files))]))
            with pytest.raises(shmaug.ArgumentError, match=r"another source or with other "
                                                           r"settings.*overwrite=True"):
                shmaug.pack(other, out, workers=0, progress=False)
            assert not shmaug.pack(files, out, workers=0, progress=False).created


def test_pack_from_paths_without_labels_and_from_the_cli(tmp_path):
    for i in range(4):
        picture("RGB", (10, 10 + i), i).save(tmp_path / f"{i}.jpg")
    paths = sorted(str(p) for p in tmp_path.glob("*.jpg"))
    packed = shmaug.pack(paths, tmp_path / "out", image_size=(6, 6), workers=0, progress=False)
    assert packed.labels is None and packed.open()[1] is None
    csv = tmp_path / "list.csv"
    csv.write_text("filename,class\n" + "".join(f"{i}.jpg,{'ab'[i % 2]}\n" for i in range(4)))
    cmd = [sys.executable, "-m", "shmaug.cli", "pack", str(csv), str(tmp_path / "cli"),
           "--image-size", "6", "6", "--workers", "0"]
    for _ in range(2):
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    assert "already complete" in proc.stderr
    m = json.loads((tmp_path / "cli" / "manifest.json").read_text())
    assert m["class_names"] == ["a", "b"]
    np.testing.assert_array_equal(np.load(tmp_path / "cli" / "images.npy"), packed.open()[0])
    refused = subprocess.run(cmd[:-2] + ["--extensions", ".jpg"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "`--extensions` chooses the files of a folder" in \
        refused.stderr


def test_the_cli_packs_a_folders_webp_files_when_asked(tmp_path):
    (tmp_path / "data" / "a").mkdir(parents=True)
    for i in range(3):
        picture("RGB", (10, 12), i).save(tmp_path / "data" / "a" / f"{i}.webp", "WEBP")
    cmd = [sys.executable, "-m", "shmaug.cli", "pack", str(tmp_path / "data"),
           str(tmp_path / "out"), "--image-size", "6", "6", "--workers", "0"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "3 .webp files" in proc.stderr and "--extensions" in \
        proc.stderr, proc.stderr  # (the fix in the flag's name)
    proc = subprocess.run(cmd + ["--extensions", ".webp"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["count"] == 3


CHILD = textwrap.dedent("""
    import sys, time
    import shmaug, shmaug.sources.images.reader as reader

    _resize = reader.resize
    def slow_resize(*args):  # a slow decoder, so the kill lands part-way (fork keeps it)
        time.sleep(0.02)
        return _resize(*args)
    reader.resize = slow_resize
    shmaug.pack(sys.argv[1], sys.argv[2], image_size=(16, 16), workers=2, batch_size=4,
                start_method="fork", progress=False)
""")


def test_killed_pack_leaves_no_complete_looking_output_and_a_rerun_finishes(tmp_path):
    folder = tmp_path / "data"
    for c in range(2):
        (folder / f"c{c}").mkdir(parents=True)
        for i in range(150):
            picture("RGB", (20, 20), 1000 * c + i).save(folder / f"c{c}" / f"{i:03d}.png")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        partial = out / "images.npy.partial"
        deadline = time.monotonic() + 60
        while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # part-way: 300 images take ~3 s here
        assert proc.poll() is None, f"pack finished or failed before the kill: {proc.stderr.read()}"
        workers = [c.pid for c in psutil.Process(proc.pid).children()]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert not (out / "manifest.json").exists() and not (out / "images.npy").exists()
    deadline = time.monotonic() + 10  # workers follow their parent; the tracker unlinks
    while time.monotonic() < deadline and (
            shmaug_segments(proc.pid) or any(psutil.pid_exists(p) for p in workers)):
        time.sleep(0.1)
    assert not shmaug_segments(proc.pid)
    assert not running(workers)

    packed = shmaug.pack(folder, out, image_size=(16, 16), workers=2, progress=False)
    assert packed.created and sorted(os.listdir(out)) == ["images.npy", "labels.npy", "manifest.json"]
    files = ImageFiles.from_directory(folder, image_size=(16, 16))
    x = packed.open()[0]
    for i in (0, 149, 150, 299):
        np.testing.assert_array_equal(x[i], files.load(i))
