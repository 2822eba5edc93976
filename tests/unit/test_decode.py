"""Decoding one file: JPEG headers, reduced-size JPEG decoding and its stated tolerance."""

from __future__ import annotations

import io
import os
import time

import cv2
import numpy as np
import pytest
from PIL import Image

from shmaug.sources.images.decode import (REDUCED_TOLERANCE, decode, jpeg_ends, jpeg_header,
                                          reduction, resize)
from shmaug.errors import ImageReadError
from shmaug.sources.files import ImageFiles


def photo(h: int, w: int, seed: int = 0) -> np.ndarray:
    """Photo-like RGB: smooth colour fields and edges, plus fine grain that aliases when a
    resize skips pixels (the case where a reduced decode and a full one differ most)."""
    rng = np.random.default_rng(seed)
    small = rng.normal(0, 1, (h // 32 + 2, w // 32 + 2, 3)).astype(np.float32)
    field = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) * 40 + 128
    cv2.circle(field, (w // 3, h // 2), h // 4, (200.0, 40.0, 90.0), -1)
    grain = cv2.resize(rng.normal(0, 1, (h // 2, w // 2)).astype(np.float32), (w, h))
    field += (rng.normal(0, 1, (h, w)) * 4 + grain * 5)[..., None]
    return np.clip(field, 0, 255).astype(np.uint8)


def save(path, array, fmt="JPEG", **kwargs):
    Image.fromarray(array).save(path, fmt, **kwargs)
    return str(path)


def test_jpeg_header_reads_size_and_components(tmp_path):
    rgb, grey = photo(40, 56), photo(40, 56)[..., 0]
    for name, array, kwargs, marker in [("base.jpg", rgb, {}, 0xC0),
                                        ("prog.jpg", rgb, {"progressive": True}, 0xC2),
                                        ("grey.jpg", grey, {}, 0xC0)]:
        data = np.fromfile(save(tmp_path / name, array, **kwargs), np.uint8)
        assert jpeg_header(data) == (40, 56, 1 if array.ndim == 2 else 3, marker)
    png = np.fromfile(save(tmp_path / "a.png", rgb, "PNG"), np.uint8)
    assert jpeg_header(png) is None  # by content, not by name
    assert jpeg_header(np.frombuffer(b"\xff\xd8\xff", np.uint8)) is None  # cut short
    cmyk = io.BytesIO()
    Image.fromarray(rgb).convert("CMYK").save(cmyk, "JPEG")
    header = jpeg_header(np.frombuffer(cmyk.getvalue(), np.uint8))
    assert header is not None and header[2] == 4 and reduction(header, (5, 7)) == 1


def test_a_jpeg_with_data_after_its_end_is_whole_and_one_cut_short_is_not(tmp_path):
    # A motion photo appends its video after the image's end marker: more than a KiB that
    # holds no end marker of its own. The walk reaches the image's; a cut file has none.
    video = np.random.default_rng(0).integers(0, 0xFF, 5000, np.uint8).tobytes()  # no 0xFF
    thumbnail = Image.fromarray(photo(16, 16))
    exif = Image.Exif()
    for kwargs in ({}, {"progressive": True}, {"restart_marker_blocks": 1},
                   {"exif": exif.tobytes()}):
        buffer = io.BytesIO()
        Image.fromarray(photo(64, 80)).save(buffer, "JPEG", **kwargs)
        whole = buffer.getvalue()
        assert jpeg_ends(np.frombuffer(whole, np.uint8))
        assert jpeg_ends(np.frombuffer(whole + video, np.uint8)), kwargs
        scan = whole.rindex(b"\xff\xda")
        for cut in (whole[:-2], whole[: (scan + len(whole)) // 2]):
            assert not jpeg_ends(np.frombuffer(cut, np.uint8)), kwargs
            assert not jpeg_ends(np.frombuffer(cut + video, np.uint8)), kwargs
    # an end marker inside a segment (an EXIF thumbnail's) is skipped with it
    buffer = io.BytesIO()
    thumbnail.save(buffer, "JPEG")
    app1 = b"\xff\xe1" + (len(buffer.getvalue()) + 2).to_bytes(2, "big") + buffer.getvalue()
    whole = io.BytesIO()
    Image.fromarray(photo(64, 80)).save(whole, "JPEG")
    data = whole.getvalue()[:2] + app1 + whole.getvalue()[2:]
    assert jpeg_ends(np.frombuffer(data + video, np.uint8))
    assert not jpeg_ends(np.frombuffer(data[: len(data) // 2] + video, np.uint8))


def test_reduction_keeps_the_image_at_least_the_target(tmp_path):
    path = save(tmp_path / "odd.jpg", photo(17, 33))
    assert decode(path, "rgb", (3, 5)).shape == (5, 9, 3)  # 1/4: 17/8 rows would be too few
    header = (2000, 3000, 3, 0xC0)
    assert reduction(header, (224, 224)) == 8  # 250 x 375
    assert reduction(header, (251, 224)) == 4  # 250 rows would be too few
    assert reduction(header, (900, 1400)) == 2
    assert reduction(header, (1001, 1400)) == 1
    assert reduction((375, 500, 3, 0xC0), (224, 224)) == 1  # ImageNet-size: decoded in full
    # one rule for windows and whole photos (dct_scale): the scaled extent itself, not
    # libjpeg's rounded-up pixel count, is at least the target: 17/8 = 2.1 is too few
    assert reduction((17, 17, 3, 0xC0), (3, 3)) == 4
    assert reduction((24, 24, 3, 0xC0), (3, 3)) == 8
    assert reduction((16, 16, 3, 0xC0), (3, 3)) == 4  # 16/8 = 2 is too few
    assert reduction((2000, 3000, 3, 0xC3), (224, 224)) == 1  # lossless: not scaled
    assert reduction((2000, 3000, 3, -1), (224, 224)) == 1  # 12-bit samples
    assert reduction(None, (224, 224)) == 1


@pytest.mark.parametrize("interpolation", ["area", "bilinear", "bicubic", "nearest", "lanczos3"])
def test_reduced_decode_is_within_the_stated_tolerance(tmp_path, interpolation):
    path = save(tmp_path / "camera.jpg", photo(768, 1024), quality=90)
    size = (96, 128)  # 1/8 of the JPEG
    reduced = decode(path, "rgb", size)
    assert reduced.shape == (96, 128, 3)
    full = decode(path, "rgb")
    assert full.shape == (768, 1024, 3)
    ours = resize(reduced, size, interpolation).astype(int)
    before = resize(full, size, interpolation).astype(int)  # what reduced_decode=False gives
    alias_free = resize(full, size, "area").astype(int)
    assert np.abs(ours - before).mean() <= REDUCED_TOLERANCE["same interpolation"]
    if interpolation == "area":
        assert np.abs(ours - alias_free).mean() <= REDUCED_TOLERANCE["area"]
    else:  # libjpeg's block scaling averages what a shrinking resize skips: never further
        # from the alias-free image than a full decode + the same resize.
        assert np.abs(ours - alias_free).mean() <= np.abs(before - alias_free).mean()


def test_image_files_decode_large_jpegs_reduced_and_nothing_else(tmp_path):
    big = photo(512, 640)
    paths = [save(tmp_path / "big.jpg", big), save(tmp_path / "big.png", big, "PNG"),
             save(tmp_path / "big.bmp", big, "BMP"), save(tmp_path / "big.webp", big, "WEBP"),
             save(tmp_path / "big.tif", big, "TIFF"),
             save(tmp_path / "small.jpg", photo(34, 45)),  # under 8/7 of the size: in full
             save(tmp_path / "grey.jpg", big[..., 1])]
    on, off = (ImageFiles.from_paths(paths, image_size=(30, 40), interpolation="area",
                                     reduced_decode=flag) for flag in (True, False))
    for i, path in enumerate(paths):
        a, b = on.load(i), off.load(i)
        assert a.shape == b.shape == (30, 40, 3)
        if path.endswith(("big.jpg", "grey.jpg")):
            assert not np.array_equal(a, b)  # decoded at 1/8, then resized
            assert np.abs(a.astype(int) - b).mean() <= REDUCED_TOLERANCE["area"]
        else:
            np.testing.assert_array_equal(a, b, err_msg=path)  # other formats: untouched
    assert repr(on).count("reduced_decode") == 0 and "reduced_decode=False" in repr(off)


def test_a_whole_photo_is_scaled_by_the_smallest_eighth_with_libjpeg_turbo(tmp_path,
                                                                         monkeypatch):
    from shmaug.sources.images import turbo

    if not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    path = save(tmp_path / "a.jpg", photo(450, 600), quality=90)
    # 4/8 keeps 225 rows >= 224 (1/4 would not)
    on, off = (ImageFiles.from_paths([path], image_size=(224, 224), interpolation="area",
                                     reduced_decode=flag) for flag in (True, False))
    assert on.load.decoder.jpeg_mode == "turbo"
    scales = []
    decode_window = turbo.decode_window
    monkeypatch.setattr(turbo, "decode_window", lambda data, window, eighths, channels: (
        scales.append(eighths) or decode_window(data, window, eighths, channels)))
    a, b = on.load(0), off.load(0)
    assert scales == [4]  # libjpeg-turbo decoded it, at 1/2
    assert a.shape == b.shape == (224, 224, 3)
    assert not np.array_equal(a, b)
    assert np.abs(a.astype(int) - b).mean() <= REDUCED_TOLERANCE["area"]


def test_reduced_decode_ignores_exif_orientation_as_the_full_decode_does(tmp_path):
    array = np.zeros((400, 600, 3), np.uint8)
    array[:200, :300] = 255  # a white top-left quarter shows any rotation or flip
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    path = save(tmp_path / "rotated.jpg", array, exif=exif.tobytes())
    for flag in (True, False):
        files = ImageFiles.from_paths([path], image_size=(40, 60), reduced_decode=flag)
        out = files.load(0)
        assert out.shape == (40, 60, 3)
        assert out[:20, :30].mean() > 200 and out[20:, 30:].mean() < 50


def test_grayscale_mode_and_reduced_colour_jpegs_agree_with_the_full_decode(tmp_path):
    path = save(tmp_path / "c.jpg", photo(512, 512))
    for mode, channels in (("grayscale", 1), ("rgba", 4), (None, 3)):
        on, off = (ImageFiles.from_paths([path], image_size=(64, 64), color_mode=mode,
                                         interpolation="area", reduced_decode=flag)
                   for flag in (True, False))
        a, b = on.load(0), off.load(0)
        assert a.shape == b.shape == (64, 64, channels)
        assert np.abs(a.astype(int) - b).mean() <= REDUCED_TOLERANCE["area"]


def test_reduced_decode_must_be_a_bool(tmp_path):
    path = save(tmp_path / "c.jpg", photo(16, 16))
    with pytest.raises(TypeError, match=r"`reduced_decode` must be True or False"):
        ImageFiles.from_paths([path], reduced_decode="yes")


def _png_claiming(side: int) -> bytearray:
    """A small PNG whose header claims ``side`` x ``side`` pixels (its CRC renewed)."""
    import struct
    import zlib

    out = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 120, np.uint8)).save(out, "PNG")
    data = bytearray(out.getvalue())
    struct.pack_into(">II", data, 16, side, side)  # IHDR's width and height
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    return data


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "BMP", "GIF", "WEBP", "TIFF"])
def test_an_image_past_pils_pixel_limit_is_refused_before_it_is_decoded(tmp_path,
                                                                        monkeypatch, kind):
    """A decompression bomb (a megabyte of PNG holding 20000x20000 pixels) was decoded, 1.2
    GB in each worker, where Keras' load_img refuses it: it is an unreadable file now, named,
    that on_error='skip' stands in for, unless PIL.Image.MAX_IMAGE_PIXELS is raised. (The
    limit is lowered here, so that real files of 64x64 pixels are past it.)"""
    import shmaug
    from shmaug.ops import Op

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1500)  # refused past 3,000 pixels
    bomb = save(tmp_path / f"bomb.{kind.lower()}", photo(64, 64), kind)
    good = save(tmp_path / "good.png", photo(32, 32), "PNG")
    with pytest.raises(shmaug.ImageReadError, match=r"bomb\..*64x64 pixels.*MAX_IMAGE_PIXELS"):
        ImageFiles.from_paths([bomb, good], image_size=(8, 8)).load(0)
    skipping = ImageFiles.from_paths([bomb, good], image_size=(8, 8), on_error="skip")
    np.testing.assert_array_equal(skipping.load(0), skipping.load(1))
    if kind == "JPEG":  # a decode-time crop decodes a JPEG's window alone: refused there too
        crop = Op("random_resized_crop", height=8, width=8)
        with pytest.raises(shmaug.ImageReadError, match=r"64x64"):
            with shmaug.Loader(ImageFiles.from_paths([good, bomb], image_size=None),
                               batch_size=2,  # (the good file first: a loader decodes it
                               augment=crop, workers=0) as loader:  # whole to look at it)
                loader.batch(0)
        # a spawned worker's PIL has its default: the limit goes with the source, read
        # when it is made (the setting was not seen there, either way)
        with pytest.raises(shmaug.ImageReadError, match=r"64x64"):
            with shmaug.Loader(ImageFiles.from_paths([good, bomb], image_size=(8, 8)),
                               batch_size=2, augment=Op("hflip"), workers=1,
                               start_method="spawn") as loader:
                loader.batch(0)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    assert ImageFiles.from_paths([bomb], image_size=(8, 8)).load(0).shape == (8, 8, 3)


def test_a_mask_past_pils_pixel_limit_is_refused_before_it_is_decoded(tmp_path, monkeypatch):
    """A 900 KB grey PNG of 30000x30000 as a mask decoded to 3.6 GB in a worker: masks were
    not checked at all (a lowered limit here, on a real file of 64x64)."""
    from shmaug.sources.annotations.masks import decode_mask

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1500)
    out = io.BytesIO()
    Image.fromarray(np.zeros((64, 64), np.uint8)).save(out, "PNG")
    with pytest.raises(ImageReadError, match=r"m\.png.*64x64 pixels"):
        decode_mask(np.frombuffer(out.getvalue(), np.uint8), "mask file 'm.png'")
    from shmaug.sources.annotations.masks import MaskDecoder  # the source's limit, kept:

    kept = MaskDecoder(None)  # (made now: 3,000 pixels)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)  # as a spawned worker's default
    with pytest.raises(ImageReadError, match=r"64x64 pixels.*remove its pair"):
        kept(np.frombuffer(out.getvalue(), np.uint8), "mask file 'm.png'")
    assert MaskDecoder(None)(np.frombuffer(out.getvalue(), np.uint8), "m").shape == (64, 64, 1)


def test_image_headers_give_their_stored_size_without_decoding(tmp_path):
    """BMP, GIF, WebP and TIFF headers, read before a decode (a 1 KB run-length BMP claimed
    30000x30000): each format as PIL writes it, and an OS/2 BMP's 16-bit core header (read
    as 32-bit, every such file was refused as a bomb)."""
    import struct

    from shmaug.sources.images.headers import stored_dims

    image = photo(37, 53)
    for fmt, options in (("BMP", {}), ("GIF", {}), ("WEBP", {}), ("WEBP", {"lossless": True}),
                         ("TIFF", {}), ("TIFF", {"compression": "tiff_deflate"}),
                         ("PNG", {})):
        out = io.BytesIO()
        Image.fromarray(image).save(out, fmt, **options)
        assert stored_dims(np.frombuffer(out.getvalue(), np.uint8)) == (37, 53), fmt
    core = (b"BM" + struct.pack("<IHHI", 14 + 12 + 100 * 300, 0, 0, 26) +
            struct.pack("<IHHHH", 12, 100, 50, 1, 24) + bytes(100 * 3 * 50))
    assert stored_dims(np.frombuffer(core, np.uint8)) == (50, 100)
    assert stored_dims(np.frombuffer(b"BM" + bytes(10), np.uint8)) is None  # cut short


def test_memory_running_short_in_a_decode_names_the_file():
    """OpenCV's failed allocation reached the user as cv2.error naming no file."""
    import cv2

    from shmaug.sources.images.decode import raise_if_refused

    with pytest.raises(MemoryError, match=r"decoding image file 'big.png'.*fewer workers"):
        raise_if_refused(cv2.error("OpenCV(5.1.0) alloc.cpp:73: error: (-4:Insufficient "
                                   "memory) Failed to allocate 1200000000 bytes"),
                         ImageReadError, "image file 'big.png'")


def test_a_png_past_opencvs_pixel_limit_is_an_unreadable_file_a_source_can_skip(tmp_path,
                                                                               monkeypatch):
    """A header claiming 60000x60000 pixels (damaged, or a scan to tile first), past PIL's
    limit lifted: OpenCV's assertion escaped as cv2.error, naming no file, and
    on_error='skip' passed it by."""
    import shmaug

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    data = _png_claiming(60000)
    (tmp_path / "huge.png").write_bytes(bytes(data))
    good = save(tmp_path / "good.png", photo(8, 8), "PNG")
    paths = [str(tmp_path / "huge.png"), good]
    with pytest.raises(shmaug.ImageReadError, match=r"huge.png.*more pixels than OpenCV decodes"):
        ImageFiles.from_paths(paths, image_size=(8, 8)).load(0)
    skipping = ImageFiles.from_paths(paths, image_size=(8, 8), on_error="skip")
    np.testing.assert_array_equal(skipping.load(0), skipping.load(1))  # the next stands in
    from shmaug.sources.annotations.masks import decode_mask

    with pytest.raises(shmaug.ImageReadError, match=r"m.png.* as a mask: .*more pixels"):
        decode_mask(np.frombuffer(bytes(data), np.uint8), "mask file 'm.png'")


def test_float_and_multiband_tiffs_are_told_to_become_an_array(tmp_path):
    """A float TIFF was told to become an 8-bit PNG (losing what it holds), and a 5-band
    one (satellite data) was called corrupt: both are told to go in as an array."""
    floats = tmp_path / "f32.tif"
    Image.fromarray(np.linspace(0, 1, 32 * 40, dtype=np.float32).reshape(32, 40)).save(floats)
    with pytest.raises(ImageReadError, match=r"float32.*Fix: read the files into one array"):
        ImageFiles.from_paths([str(floats)], [0], image_size=(32, 40), color_mode=None)
    tifffile = pytest.importorskip("tifffile")
    bands = tmp_path / "bands.tif"
    tifffile.imwrite(bands, np.zeros((32, 40, 5), np.uint16), photometric="minisblack",
                     planarconfig="contig")
    with pytest.raises(ImageReadError) as err:
        ImageFiles.from_paths([str(bands)], [0], image_size=(32, 40), color_mode=None)
    assert "corrupt" not in str(err.value) and "multiband" in str(err.value)
    assert "mmap_mode='r'" in str(err.value)


@pytest.mark.parametrize("data, options", [
    (np.zeros((8, 8, 3), np.float16), {"photometric": "rgb"}),
    (np.zeros((8, 8, 3), np.float16), {"photometric": "rgb", "byteorder": ">"}),
    (np.zeros((8, 8, 5), np.uint16), {"bigtiff": True, "photometric": "minisblack",
                                      "planarconfig": "contig"})])
def test_a_tiff_header_says_float_or_many_bands_wherever_it_keeps_them(data, options):
    """Values longer than 4 bytes (SampleFormat of 3 samples) lie at an offset, and a BigTIFF
    has 8-byte ones: both were read as the value itself, and such files called corrupt."""
    from shmaug.sources.images.decode import _tiff_beyond_images

    tifffile = pytest.importorskip("tifffile")
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, data, **options)
    assert _tiff_beyond_images(np.frombuffer(buffer.getvalue(), np.uint8))
    tifffile.imwrite(buffer := io.BytesIO(), np.zeros((8, 8, 3), np.uint8), bigtiff=True,
                     photometric="rgb")
    assert not _tiff_beyond_images(np.frombuffer(buffer.getvalue(), np.uint8))


def test_a_damaged_tiff_is_still_called_damaged_with_the_skip_fix(tmp_path):
    """Only a TIFF whose header says float or more than 4 bands is sent to an array; one
    cut short is unreadable, with on_error='skip' offered."""
    whole = tmp_path / "whole.tif"
    cv2.imwrite(str(whole), np.zeros((32, 32, 3), np.uint8))
    cut = tmp_path / "cut.tif"
    cut.write_bytes(whole.read_bytes()[:40])
    with pytest.raises(ImageReadError, match=r"corrupt, truncated or not an image.*"
                                             r"on_error='skip'"):
        ImageFiles.from_paths([str(cut)], [0], image_size=(32, 32), color_mode=None)


def test_libjpeg_turbo_is_found_where_no_temporary_folder_is_usable(monkeypatch):
    """A read-only container with no TMPDIR: ctypes' find_library runs a compiler in a
    temporary folder and raised FileNotFoundError, after the wheel's own library was found,
    out of every JPEG loader and `shmaug doctor`. The system is asked last, and its failure
    means none there."""
    from shmaug.sources.images import turbo

    asked = []

    def no_temp(name):
        asked.append(name)
        raise FileNotFoundError("No usable temporary directory found")

    monkeypatch.setattr(turbo, "find_library", no_temp)
    monkeypatch.setattr(turbo, "_LIBRARY", None)
    monkeypatch.setattr(turbo, "_LOOKED", False)
    monkeypatch.delenv("SHMAUG_JPEG", raising=False)
    bundled = turbo.available()  # (the wheel's library, where the jpeg extra is installed)
    assert asked == ([] if bundled else ["turbojpeg"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_while_a_thread_decodes_leaves_the_childs_decodes_free():
    """A worker forked while another thread of the parent decoded (OpenCV's log held off,
    its lock taken) waited for good at its first decode."""
    from shmaug.sources.images import decode

    with decode._QUIET:
        decode._quieted[0] += 1
        pid = os.fork()
        if pid == 0:  # (the child: exit 0 once a decode returns)
            decode.imdecode(np.frombuffer(b"not an image", np.uint8), 1)
            os._exit(0)
        decode._quieted[0] -= 1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the child's decode waited on the parent's lock")
