"""The reduced resized crop (the default: the window scaled in the DCT by an eighth, then
OpenCV) against the exact one (``reduced_decode=False``: torchvision's antialiased
``resized_crop``, which PIL's filter is), on real photographs: scikit-image's and
scikit-learn's, cut and rescaled to ImageNet's sizes and written at q75-95 4:2:0
(``bench.files.photos``). torchvision is not installable beside the pinned torch here; its
antialiased resize of a PIL image is PIL's, which the exact path is held to in
tests/unit/test_windows.py."""

from __future__ import annotations

import numpy as np
import pytest

from shmaug.resample import SAMPLED_TO, Resample
from shmaug.ops.builtin.windows import centre_window, window_of
from shmaug.sources.images import decode, turbo

pytest.importorskip("skimage")
pytest.importorskip("sklearn")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b) ** 2))
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


@pytest.fixture(scope="module")
def files() -> list[np.ndarray]:
    from bench.files import photos

    return [np.frombuffer(data, np.uint8) for data in photos.jpegs(12, seed=3)]


@pytest.mark.parametrize("mode", ["turbo", "opencv"])
@pytest.mark.parametrize("interpolation", sorted(decode.REDUCED_CROP_QUALITY))
def test_the_reduced_crop_is_within_its_stated_quality(files, mode, interpolation) -> None:
    if mode == "turbo" and not turbo.available():
        pytest.skip("no libjpeg-turbo 3 here (pip install shmaug[jpeg])")
    rng = np.random.default_rng(0)
    size = (224, 224)
    mads, psnrs, finishes = [], [], {"dct": 0, "halved": 0, "sampled": 0}
    for data in files:
        header = decode.jpeg_header(data)
        h, w = header[0], header[1]
        windows = [(tuple(float(v) for v in window_of(h, w, rng, (0.08, 1.0), (3 / 4, 4 / 3))),
                    True) for _ in range(2)] + [(centre_window(h, w, size, 0.875), False)]
        for window, within in windows:
            how = Resample(interpolation, within=within)
            exact = decode.resized_window(data, "x", "rgb", header, window, size, how, mode,
                                          reduced=False)
            ours = decode.resized_window(data, "x", "rgb", header, window, size, how, mode)
            assert ours.shape == exact.shape == (*size, 3)
            mads.append(np.abs(ours.astype(int) - exact).mean())
            psnrs.append(psnr(ours, exact))
            m = decode.dct_scale(window[2:], size)
            rest = max(window[2] / size[0], window[3] / size[1]) * m / 8
            finish = "dct" if m < 8 else "halved" if rest > SAMPLED_TO else "sampled"
            finishes[finish] += 1
            if finish == "halved":  # OpenCV's filter at twice the size, then 2x2 averages
                assert not np.array_equal(ours, exact), window
    mad_bound, psnr_bound = decode.REDUCED_CROP_QUALITY[interpolation]
    assert np.mean(mads) <= mad_bound, np.mean(mads)
    assert np.median(psnrs) >= psnr_bound, np.median(psnrs)
    assert min(psnrs) >= 25.0, min(psnrs)
    assert min(finishes.values()) >= 5, finishes  # each way of finishing was exercised


def test_one_rule_picks_the_smallest_eighth_that_keeps_the_output() -> None:
    assert decode.dct_scale((448.0, 448.0), (224, 224)) == 4
    assert decode.dct_scale((447.0, 600.0), (224, 224)) == 8  # 447 * 4/8 < 224: full scale
    assert decode.dct_scale((256.0, 256.0), (224, 224)) == 8  # (7/8: slower than 8/8)
    assert decode.dct_scale((900.0, 900.0), (224, 224)) == 2
    assert decode.dct_scale((3000.0, 3000.0), (224, 224)) == 1


@pytest.mark.parametrize("interpolation", ["area", "bilinear", "nearest"])
def test_a_whole_photo_decoded_reduced_is_within_its_stated_tolerance(files, interpolation
                                                                      ) -> None:
    """A fixed ``image_size`` decodes a JPEG at the smallest eighth that keeps it: the median
    distance to a full decode + the same resize, over real photos, as stated."""
    bound = decode.REDUCED_TOLERANCE["area" if interpolation == "area" else
                                     "same interpolation"]
    for size in ((16, 16), (32, 32), (48, 96), (100, 150)):
        mads = []
        for data in files:
            reduced = decode.decode_bytes(data, "x", "rgb", size)
            full = decode.decode_bytes(data, "x", "rgb")
            assert reduced.shape[0] < full.shape[0]  # (every one is scaled in the DCT)
            ours = decode.resize(reduced, size, interpolation).astype(int)
            mads.append(np.abs(ours - decode.resize(full, size, interpolation)).mean())
        assert np.median(mads) <= bound, (size, sorted(mads))

