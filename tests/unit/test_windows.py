"""The recipes' crops (``ops/builtin/windows.py``) and the decode of a JPEG's window alone
(``sources/images/decode.py``, ``turbo.py``), in this process.

Against torchvision's own transform where it imports (``RandomResizedCrop.get_params``'s
windows, KS tests on many draws; ``F.resized_crop``'s pixels with the window pinned); against
PIL's crop + resize, which torchvision runs on a PIL image, everywhere. The decode-time path
against the whole decode, with libjpeg-turbo and with OpenCV's fallback.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image

from shmaug.deferred import Undecoded
from shmaug.resample import Resample, after_dct, resize_box
from shmaug import ops
from shmaug.ops import Compose, Maybe, Op
from shmaug.ops.builtin.windows import centre_window, window_of
from shmaug.sources.images import decode, turbo
from shmaug.sources.images.reader import Decoder

FILTERS = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC,
           "nearest": Image.Resampling.NEAREST, "area": Image.Resampling.BOX,
           "lanczos3": Image.Resampling.LANCZOS}
# Mean |partial - whole| per value (0..255) of a window decoded alone against the same window
# cut from the whole decode: libjpeg-turbo upsamples chroma at the window's edges from less
# context, and decodes at 1/2-1/8 scale (a box average) where the window is that much larger
# than the output, against the filter of a full-resolution resample (at full scale, against
# the same finish: ``after_dct``).
PARTIAL_TOLERANCE = {"full scale": 0.5, "reduced scale": decode.REDUCED_TOLERANCE["area"]}


def photo(h: int = 375, w: int = 500, seed: int = 0) -> np.ndarray:
    """A photo-like RGB picture: smooth colour, edges, grain."""
    rng = np.random.default_rng(seed)
    small = rng.random((h // 16 + 2, w // 16 + 2, 3)).astype(np.float32)
    image = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) * 200 + 20
    cv2.circle(image, (w // 3, h // 2), h // 5, (250, 40, 90), -1)
    image += rng.normal(0, 4, image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def jpeg(image: np.ndarray, quality: int = 90) -> np.ndarray:
    ok, data = cv2.imencode(".jpg", image[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return data.ravel()


def deferred(data: np.ndarray, color_mode: str | None = "rgb", reduced: bool = True) -> Undecoded:
    """A JPEG as a loader's workers get it: how its window decodes decided here, once."""
    decoder = Decoder(None, color_mode, "bilinear", 0, reduced).with_jpeg_mode()
    made = decoder.undecoded_or_pixels(data, "test.jpg")
    assert isinstance(made, Undecoded)
    return made


# -- the draw ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(375, 500), (500, 333), (64, 640), (1, 1)])
@pytest.mark.parametrize("scale,ratio", [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.9, 1.0), (3.0, 4.0)),
                                         ((0.5, 0.5), (1.0, 1.0))])
def test_windows_lie_inside_with_torchvisions_bounds(shape, scale, ratio) -> None:
    h, w = shape
    rng = np.random.default_rng(0)
    for _ in range(300):
        top, left, ch, cw = window_of(h, w, rng, scale, ratio)
        assert 0 <= top and top + ch <= h and 0 <= left and left + cw <= w and ch and cw


def test_the_fallback_is_torchvisions_centred_window() -> None:
    # 10 tries cannot fit a 3:1 to 4:1 window covering 90% of a 1:10 strip: the centre
    # window of the nearest aspect within ratio remains, drawn from nothing further.
    rng = np.random.default_rng(0)
    assert window_of(64, 640, rng, (0.9, 1.0), (3.0, 4.0)) == (0, 192, 64, 256)
    assert window_of(640, 64, rng, (0.9, 1.0), (3.0, 4.0)) == (309, 0, 21, 64)


def test_centre_window_is_resize_256_then_centre_crop_224() -> None:
    top, left, h, w = centre_window(375, 500, (224, 224), 0.875)
    # torchvision: Resize(256) -> 256 x 341; CenterCrop(224) -> top 16, left 58
    assert (h, w) == pytest.approx((224 * 375 / 256, 224 * 500 / 341))
    assert (top, left) == pytest.approx((16 * 375 / 256, 58 * 500 / 341))


def torchvision_windows(h: int, w: int, n: int, scale, ratio) -> np.ndarray:
    torch = pytest.importorskip("torch")
    transforms = pytest.importorskip("torchvision.transforms")
    torch.manual_seed(0)
    image = torch.empty(3, h, w)
    return np.array([transforms.RandomResizedCrop.get_params(image, list(scale), list(ratio))
                     for _ in range(n)], np.float64)


@pytest.mark.parametrize("shape,scale,ratio", [
    ((375, 500), (0.08, 1.0), (3 / 4, 4 / 3)),  # ImageNet's
    ((300, 900), (0.5, 1.0), (1 / 2, 2.0)),  # a wide photo: many draws rejected
    ((100, 1000), (0.6, 1.0), (2.0, 3.0)),  # mostly the fallback
])
def test_window_distribution_matches_torchvision(shape, scale, ratio) -> None:
    stats = pytest.importorskip("scipy.stats")
    h, w = shape
    n = 4000
    theirs = torchvision_windows(h, w, n, scale, ratio)
    rng = np.random.default_rng(1)
    ours = np.array([window_of(h, w, rng, scale, ratio) for _ in range(n)], np.float64)

    def described(win: np.ndarray) -> dict[str, np.ndarray]:
        top, left, ch, cw = win.T
        return {"area": ch * cw / (h * w), "aspect": cw / ch,
                "centre y": (top + ch / 2) / h, "centre x": (left + cw / 2) / w}

    for name, (a, b) in {k: (described(ours)[k], described(theirs)[k])
                         for k in ("area", "aspect", "centre y", "centre x")}.items():
        result = stats.ks_2samp(a, b)
        assert result.pvalue > 1e-3, f"{name}: KS {result.statistic:.3f}, p {result.pvalue:.2g}"


# -- the pixels -------------------------------------------------------------------------------


@pytest.mark.parametrize("interpolation", sorted(FILTERS))
def test_a_window_is_pils_crop_then_resize_exactly(interpolation) -> None:
    image = photo()
    for seed in range(5):
        out = Op("random_resized_crop", height=96, width=128,
                 interpolation=interpolation)(image, np.random.default_rng(seed))
        top, left, h, w = window_of(375, 500, np.random.default_rng(seed), (0.08, 1.0),
                                    (3 / 4, 4 / 3))
        pil = Image.fromarray(image).crop((left, top, left + w, top + h)).resize(
            (128, 96), FILTERS[interpolation])
        np.testing.assert_array_equal(out, np.asarray(pil))


# Mean |shmaug - torchvision| per value (0..255) with the window pinned, shmaug decoding the
# window alone (libjpeg-turbo), torchvision the whole file (PIL), by interpolation. PIL's
# filters on both sides: the pixels are the same but for chroma upsampled at the window's
# edges from less context (measured: 0 for windows on MCU edges, up to 0.008 otherwise).
TORCHVISION_TOLERANCE = {"bilinear": 0.05, "bicubic": 0.05, "nearest": 0.05, "area": 0.05,
                         "lanczos3": 0.05}


@pytest.mark.parametrize("interpolation", sorted(FILTERS))
def test_pixels_match_torchvisions_resized_crop(interpolation) -> None:
    F = pytest.importorskip("torchvision.transforms.functional")
    from torchvision.transforms import InterpolationMode

    modes = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC,
             "nearest": InterpolationMode.NEAREST, "area": InterpolationMode.BOX,
             "lanczos3": InterpolationMode.LANCZOS}
    data = jpeg(photo(420, 560, 3))
    source = Image.open(__import__("io").BytesIO(data.tobytes())).convert("RGB")
    for window in [(10, 20, 300, 400), (100, 200, 57, 61), (0, 0, 420, 560)]:
        top, left, h, w = window
        theirs = np.asarray(F.resized_crop(source, top, left, h, w, [224, 224], modes[interpolation]))
        # the exact mode (reduced_decode=False): torchvision's pixels; the reduced crop's
        # distance from them is test_the_reduced_crop_is_within_its_stated_quality's
        ours = deferred(data, reduced=False).resized_window(
            tuple(map(float, window)), (224, 224), Resample(interpolation))
        diff = np.abs(ours.astype(int) - theirs.astype(int)).mean()
        assert diff <= TORCHVISION_TOLERANCE[interpolation], (window, diff)


CV_FLAGS = {"bilinear": cv2.INTER_LINEAR, "bicubic": cv2.INTER_CUBIC,
            "nearest": cv2.INTER_NEAREST_EXACT, "area": cv2.INTER_AREA}  # (its nearest:
# the pixel under each centre, as PIL and TensorFlow take it)


@pytest.mark.parametrize("interpolation", sorted(CV_FLAGS))
def test_without_antialias_a_window_is_opencvs_crop_then_resize(interpolation) -> None:
    image = photo()
    for seed in range(5):
        out = Op("random_resized_crop", height=96, width=128, interpolation=interpolation,
                 antialias=False)(image, np.random.default_rng(seed))
        top, left, h, w = window_of(375, 500, np.random.default_rng(seed), (0.08, 1.0),
                                    (3 / 4, 4 / 3))
        expected = cv2.resize(image[top:top + h, left:left + w], (128, 96),
                              interpolation=CV_FLAGS[interpolation])
        np.testing.assert_array_equal(out, expected)


def test_a_fractional_box_without_antialias_is_the_resize_of_a_finer_grid() -> None:
    # a 2x finer image, the box at half-pixel offsets: the same scene, sampled the same way
    image = photo(80, 120)
    fine = cv2.resize(image, (240, 160), interpolation=cv2.INTER_NEAREST)
    coarse = resize_box(image, (10.0, 20.0, 40.0, 60.0), (20, 30), Resample(antialias=False))
    finer = resize_box(fine, (20.0, 40.0, 80.0, 120.0), (20, 30), Resample(antialias=False))
    assert np.abs(coarse.astype(int) - finer.astype(int)).mean() < 3


def test_resize_box_takes_any_dtype_and_layout() -> None:
    image = photo(40, 60).astype(np.float32) / 255
    for given in (image, image[..., 0], image.astype(np.float16), (image * 1000).astype(np.uint16)):
        for how in (Resample(), Resample(within=False), Resample(antialias=False)):
            out = resize_box(given, (3.5, 4.0, 20.0, 30.0), (10, 15), how)
            assert out.shape == (10, 15, *given.shape[2:]) and out.dtype == given.dtype


# -- the decode of a window alone -------------------------------------------------------------


def windows(h: int, w: int) -> list[tuple[float, float, float, float]]:
    rng = np.random.default_rng(5)
    return [tuple(map(float, window_of(h, w, rng, (0.08, 1.0), (3 / 4, 4 / 3))))
            for _ in range(12)] + [(0.0, 0.0, float(h), float(w))]


@pytest.mark.parametrize("use_turbo", [True, False], ids=["libjpeg-turbo", "opencv"])
@pytest.mark.parametrize("size,quality", [((224, 224), 90), ((64, 64), 75), ((160, 96), 95)])
def test_a_window_decoded_alone_is_the_whole_decode_cut(monkeypatch, use_turbo, size,
                                                        quality) -> None:
    if use_turbo and not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    monkeypatch.setattr(turbo, "available", lambda: use_turbo)
    data = jpeg(photo(), quality)
    whole = decode.decode_bytes(data, "test.jpg", "rgb")
    for window in windows(375, 500):
        part = deferred(data).resized_window(window, size, Resample())
        scaled = decode.dct_scale(window[2:], size) < 8
        # at full scale the reduced crop's own finish, on the whole decode's pixels
        cut = (resize_box if scaled else after_dct)(whole, window, size, Resample())
        tolerance = PARTIAL_TOLERANCE["reduced scale" if scaled else "full scale"]
        assert part.shape == (*size, 3) and part.dtype == np.uint8
        assert np.abs(part.astype(int) - cut.astype(int)).mean() <= tolerance, window


def test_whole_decode_on_request_is_exactly_the_cut(monkeypatch) -> None:
    monkeypatch.setenv("SHMAUG_JPEG", "whole")
    data = jpeg(photo())
    whole = decode.decode_bytes(data, "test.jpg", "rgb")
    for window in windows(375, 500):
        for how in (Resample(), Resample(antialias=False), Resample(within=False)):
            np.testing.assert_array_equal(deferred(data).resized_window(window, (64, 64), how),
                                          resize_box(whole, window, (64, 64), how))


@pytest.mark.parametrize("color_mode,channels", [("grayscale", 1), ("rgba", 4), (None, 3)])
def test_colour_modes_come_out_as_the_whole_decodes(color_mode, channels) -> None:
    data = jpeg(photo())
    made = deferred(data, color_mode)
    assert made.shape == (375, 500, channels)
    out = made.resized_window((50.0, 60.0, 200.0, 300.0), (32, 48), Resample())
    whole = decode.decode_bytes(data, "test.jpg", color_mode)
    cut = resize_box(whole, (50.0, 60.0, 200.0, 300.0), (32, 48), Resample())
    assert out.shape == cut.shape == (32, 48, channels)  # (a 1/4 scale decode)
    assert np.abs(out.astype(int) - cut.astype(int)).mean() <= PARTIAL_TOLERANCE["reduced scale"]


def test_grey_jpegs_and_pngs_take_the_same_window() -> None:
    grey = cv2.cvtColor(photo(), cv2.COLOR_RGB2GRAY)
    ok, data = cv2.imencode(".jpg", grey)
    made = deferred(data.ravel())
    assert made.shape == (375, 500, 3)  # rgb, as the whole decode converts it
    ok, png = cv2.imencode(".png", photo()[..., ::-1])
    decoder = Decoder(None, "rgb", "bilinear", 0, True)
    pixels = decoder.undecoded_or_pixels(png.ravel(), "test.png")  # not a JPEG: decoded at once
    assert isinstance(pixels, np.ndarray) and pixels.shape == (375, 500, 3)
    pipe = Compose([Op("random_resized_crop", height=64, width=64), Maybe(Op("hflip"))])
    assert pipe.takes_undecoded and pipe(pixels, np.random.default_rng(0)).shape == (64, 64, 3)


def test_a_pipeline_that_does_not_crop_first_gets_pixels() -> None:
    made = deferred(jpeg(photo()))
    pipe = Compose([Op("hflip"), Op("random_resized_crop", height=32, width=32)])
    assert not pipe.takes_undecoded
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(pipe(made, rng), pipe(made.decode(), np.random.default_rng(0)))


@pytest.mark.parametrize("damage", ["zeroed", "truncated"])
def test_corrupt_bytes_past_the_header_fall_back_to_the_whole_decodes_verdict(damage) -> None:
    """libjpeg-turbo only warns on a broken scan (and fills it with grey), where OpenCV and
    PIL refuse the file: the window takes the whole decode's verdict, so a partly downloaded
    file is refused on every path, never delivered half grey."""
    from shmaug.errors import ImageReadError

    data = jpeg(photo()).copy()
    if damage == "zeroed":
        data[len(data) // 2:] = 0  # the scan broken half way
    else:
        data = data[:len(data) // 2]  # a download cut short
    with pytest.raises(ImageReadError, match="test.jpg.*truncated"):
        decode.decode_bytes(data, "test.jpg", "rgb")
    for window, size in (((0.0, 0.0, 375.0, 500.0), (32, 32)),  # a reduced scale
                         ((200.0, 0.0, 175.0, 500.0), (224, 224))):  # in full, the damage
        with pytest.raises(ImageReadError, match="test.jpg.*truncated"):
            deferred(data).resized_window(window, size, Resample())
    # a window above the damage is whole, real pixels: libjpeg-turbo never reads the rest
    top = deferred(data).resized_window((0.0, 0.0, 40.0, 500.0), (20, 250), Resample())
    assert top.std() > 10


def test_reduced_decode_false_decodes_every_pixel_of_the_window() -> None:
    data = jpeg(photo(), 95)
    whole = decode.decode_bytes(data, "test.jpg", "rgb")
    window = (10.0, 20.0, 300.0, 400.0)  # more than twice 64: a 1/4 scale decode by default
    full = deferred(data, reduced=False).resized_window(window, (64, 64), Resample())
    cut = resize_box(whole, window, (64, 64), Resample())
    assert np.abs(full.astype(int) - cut.astype(int)).mean() <= PARTIAL_TOLERANCE["full scale"]
    scaled = deferred(data).resized_window(window, (64, 64), Resample())
    assert not np.array_equal(scaled, full)


def test_a_header_libjpeg_turbo_refuses_is_an_error_naming_the_file() -> None:
    from shmaug.errors import ImageReadError

    if not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    data = jpeg(photo())
    sos = bytes(data).index(b"\xff\xda")
    cut = data[:sos].copy()  # the frame header, and no scan
    with pytest.raises(turbo.TurboError):
        turbo.header(cut)
    decoder = Decoder(None, "rgb", "bilinear", 3, True).with_jpeg_mode()
    with pytest.raises(ImageReadError, match="test.jpg.*libjpeg-turbo cannot read it"):
        decoder.undecoded_or_pixels(cut, "image file 'test.jpg'", checked=True)
    # unchecked (on_error="raise"), it is deferred, and the op's decode gives its verdict
    assert isinstance(decoder.undecoded_or_pixels(cut, "image file 'test.jpg'"), Undecoded)


def test_a_worker_without_the_loaders_libjpeg_turbo_says_so(monkeypatch) -> None:
    if not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    made = deferred(jpeg(photo()))
    monkeypatch.setattr(turbo, "available", lambda: False)
    with pytest.raises(RuntimeError, match="cannot load it.*SHMAUG_JPEG=opencv"):
        made.resized_window((0.0, 0.0, 100.0, 100.0), (32, 32), Resample())


def test_one_switch_says_how_jpegs_decode_and_reads_the_two_it_replaced(monkeypatch) -> None:
    from shmaug.errors import ArgumentError
    from shmaug.platform import jpeg_setting

    for name in ("SHMAUG_JPEG", "SHMAUG_TURBOJPEG", "SHMAUG_PARTIAL_DECODE"):
        monkeypatch.delenv(name, raising=False)
    assert jpeg_setting() == ("auto", None)
    monkeypatch.setenv("SHMAUG_PARTIAL_DECODE", "0")
    assert jpeg_setting() == ("whole", None) and decode.decide_jpeg_mode() == "whole"
    monkeypatch.delenv("SHMAUG_PARTIAL_DECODE")
    monkeypatch.setenv("SHMAUG_TURBOJPEG", "off")
    assert jpeg_setting() == ("opencv", None) and decode.decide_jpeg_mode() == "opencv"
    monkeypatch.setenv("SHMAUG_TURBOJPEG", "/opt/lib/libturbojpeg.so.0")
    assert jpeg_setting() == ("turbo", "/opt/lib/libturbojpeg.so.0")
    monkeypatch.setenv("SHMAUG_JPEG", "OpenCV")  # the new one wins
    assert jpeg_setting() == ("opencv", None)
    monkeypatch.setenv("SHMAUG_JPEG", "turbojpeg")
    with pytest.raises(ArgumentError, match="SHMAUG_JPEG must be one of.*'turbojpeg'.*Fix"):
        jpeg_setting()


def test_doctor_names_the_decoder_a_loader_would_use(monkeypatch, capsys) -> None:
    from shmaug.cli import main

    monkeypatch.setenv("SHMAUG_JPEG", "opencv")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "SHMAUG_JPEG: opencv" in out and "JPEG decode-time crop: OpenCV: the whole" in out
    import re

    import cv2
    import PIL

    for line in (f"numpy: {np.__version__}", f"Pillow: {PIL.__version__}",  # what changes
                 f"OpenCV CPU kernels: {cv2.getCPUFeaturesLine()}"):  # pixels (determinism.md)
        assert f"\n{line}\n" in out, out

    from shmaug import platform

    shm = re.search(r"^shared memory: (.*)$", out, re.M)  # what a 64 MiB container lacks
    assert shm is not None, out
    assert re.fullmatch(r"/dev/shm: [\d.]+ ([MG])iB, [\d.]+ \1iB free; (no shmaug segment "
                        r"there|.*shmaug.* hold [\d,]+ bytes.*)", shm.group(1)) \
        if platform.SHM_DIR else "no /dev/shm" in shm.group(1), out
    # the same facts from code, for a run's records (a reproducibility reviewer scraped the
    # command's text from a subprocess)
    import shmaug

    facts = shmaug.doctor()
    assert facts["numpy"] == np.__version__ and facts["Pillow"] == PIL.__version__
    assert out.startswith("".join(f"{name}: {value}\n" for name, value in facts.items()
                                  if name != "shared memory"))
    if turbo.available():
        monkeypatch.setenv("SHMAUG_JPEG", "auto")
        assert main(["doctor"]) == 0
        out = capsys.readouterr().out
        assert "JPEG decode-time crop: libjpeg-turbo 3" in out
        assert "libjpeg-turbo: libjpeg-turbo 3 (TurboJPEG 3 API) at " in out


@pytest.mark.parametrize("augment,fixes", [
    (Compose([Op("random_resized_crop", height=8, width=8), Maybe(Op("hflip"))]), True),
    (Compose([ops.OneOf([Op("random_resized_crop", height=8, width=8),
                         Op("center_resized_crop", height=8, width=8)])]), True),
    (Compose([Maybe(Op("resize", height=8, width=8), p=1.0)]), True),
    (Compose([Maybe(Op("resize", height=8, width=8), p=0.5)]), False),
    (Compose([Op("crop", height=8, width=8)]), False),  # fails on a photo smaller than 8
    (Compose([Op("resize", height=0.5, width=0.5)]), False),
    (Compose([Op("hflip"), lambda image, rng: image]), None),
])
def test_which_pipelines_give_photos_one_size(augment, fixes) -> None:
    from shmaug.ops.compose import fixes_size

    assert fixes_size(augment) is fixes


@pytest.mark.parametrize("interpolation", ["bicubic", "lanczos3"])
def test_a_centre_window_decoded_alone_reads_the_margin_its_filter_needs(interpolation) -> None:
    """``within=False`` resamples the pixels around the window too: libjpeg-turbo must decode
    them (the margin), or the edges of the output differ from the whole decode's."""
    if not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    grey = cv2.cvtColor(photo(375, 500, seed=3), cv2.COLOR_RGB2GRAY)  # (no chroma to upsample)
    data = np.frombuffer(cv2.imencode(".jpg", grey, [cv2.IMWRITE_JPEG_QUALITY, 90])[1],
                         np.uint8)
    header = decode.jpeg_header(data)
    how = Resample(interpolation, within=False)
    for window in windows(375, 500):
        for size in ((224, 224), (40, 60)):
            m = decode.dct_scale(window[2:], size)
            whole = decode.decode_bytes(data, "x", "grayscale", None, m)
            scaled = tuple(v * m / 8 for v in window)
            alone = decode.resized_window(data, "x", "grayscale", header, window, size, how,
                                          "turbo")
            cut = after_dct(whole, scaled, size, how)
            assert np.abs(alone.astype(int) - cut.astype(int)).max() <= 1, (window, size)


@pytest.mark.parametrize("shape", [(300, 200), (300, 200, 1), (300, 200, 3), (300, 200, 4)])
@pytest.mark.parametrize("box,size,mad", [
    # tiny outputs and a 16x shrink (k = 16 blocks) show the filters' shapes most: a box over
    # each output pixel against PIL's triangle over two
    ((0.0, 0.0, 300.0, 200.0), (1, 1), 10.0), ((10.5, 3.25, 120.0, 90.0), (2, 3), 10.0),
    ((0.0, 0.0, 290.0, 190.0), (16, 12), 8.0),
    ((50.0, 40.0, 60.0, 30.0), (224, 224), 1.0),  # an enlargement
    ((0.0, 0.0, 300.0, 20.0), (30, 30), 3.0)])  # elongated: 10x on one axis, 0.67x on the other
def test_the_reduced_finish_keeps_shape_and_dtype_and_nears_pils(shape, box, size, mad) -> None:
    rng = np.random.default_rng(0)
    smooth = cv2.resize(rng.random((12, 8, 4)).astype(np.float32), (200, 300)) * 255
    pixels = np.ascontiguousarray(smooth[:, :, :shape[2] if len(shape) == 3 else 1]
                                  .reshape(shape).astype(np.uint8))
    out = after_dct(pixels, box, size, Resample())
    assert out.shape == (*size, *shape[2:]) and out.dtype == np.uint8
    exact = resize_box(pixels, box, size, Resample())
    assert np.abs(out.astype(int) - exact.astype(int)).mean() <= mad
    half = after_dct(pixels.astype(np.float16), box, size, Resample())
    assert half.dtype == np.float16 and half.shape == out.shape


def test_the_reduced_finish_of_nearest_holds_only_values_the_window_holds() -> None:
    pixels = np.random.default_rng(0).integers(0, 4, (300, 300), np.uint8) * 60
    out = after_dct(pixels, (0.0, 0.0, 300.0, 300.0), (100, 100), Resample("nearest"))
    assert set(np.unique(out)) <= {0, 60, 120, 180}


@pytest.mark.parametrize("ky,kx", [(1, 2), (2, 1), (2, 2), (4, 2), (1, 4), (4, 4), (8, 2),
                                   (8, 1)])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_the_reduced_finish_averages_each_block_to_its_rounded_mean(ky, kx, channels) -> None:
    """The antialiasing of the reduced finish: each ky x kx block's mean, rounded half up on
    8-bit pixels, and exact in float32."""
    from shmaug.resample import _block_means

    rng = np.random.default_rng(ky * 10 + kx)
    fine = rng.integers(0, 256, (ky * 24, kx * 20, channels), np.uint8)
    sums = fine.reshape(24, ky, 20, kx, channels).astype(np.int64).sum((1, 3))
    out = _block_means(fine, ky, kx)
    assert out.shape == (24, 20, channels) and out.dtype == np.uint8
    # a square part, then pairs, round twice: within 1 of the mean rounded once, and no drift
    # past two roundings half up (halvings all the way drifted by up to 0.75 of a level)
    exact = (sums + ky * kx // 2) // (ky * kx)
    assert np.abs(out.astype(int) - exact).max() <= (0 if max(ky, kx) == 2 else 1)
    assert abs(out.mean() - (sums / (ky * kx)).mean()) <= 0.4
    floats = _block_means(fine.astype(np.float32), ky, kx)
    np.testing.assert_allclose(floats, sums / (ky * kx), atol=1e-4)
