"""The JPEG libraries a decode-time resized crop could use, each on the same crops of real
photographs (issue 60's choice of the library on the hot path).

    python -m bench.files.jpeg_libraries [--files 60] [--rounds 3] [--path DIR]
        [--out bench/results/files]

Each path gives a 224 x 224 crop of a ``RandomResizedCrop`` window, one core, CPU time per
crop (``time.process_time``: a shared host's other load is not counted), rounds
interleaved, the median over rounds:

- ``turbojpeg-0.0.2 (shmaug)``: shmaug's own path: libjpeg-turbo 3 from the ``turbojpeg``
  wheel through ctypes, the window alone at the smallest of 1/8, 1/4, 1/2, 1/1 that keeps it
  at least 224 (``decode.dct_scale``), then OpenCV (``resample.after_dct``);
- ``simplejpeg``: the whole photo at the same scale (``min_height``/``min_width``; it has no
  region), cut, then the same finish;
- ``PyTurboJPEG``: the same through PyTurboJPEG's ``decode(scaling_factor=...)``, loading the
  same libjpeg-turbo 3 file (a system one is version 2.1 on many distributions);
- ``opencv``: ``cv2.imdecode`` of the whole photo at the same scale, then the same finish
  (shmaug without libjpeg-turbo);
- ``full decode``: ``cv2.imdecode`` alone, no crop: the ceiling a whole decode sets.

``--path DIR``: where simplejpeg and PyTurboJPEG were installed (``pip install --target``):
PyTurboJPEG's module is named ``turbojpeg``, as the wheel shmaug uses, so it is loaded from
its file. A library that is not found is reported so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from bench.common.harness import described

SIZE = (224, 224)


def paths(extra: str | None) -> dict[str, Callable[..., Any] | str]:
    """Each library's crop, or why it is missing."""
    import cv2

    from shmaug.resample import Resample, after_dct
    from shmaug.sources.images import decode, turbo

    how = Resample()
    out: dict[str, Callable[..., Any] | str] = {}

    def ours(data: np.ndarray, header: Any, window: Any) -> Any:
        return decode.resized_window(data, "x", "rgb", header, window, SIZE, how, "turbo")

    def whole_then_cut(decoded: np.ndarray, window: Any, m: int) -> Any:
        box = tuple(v * m / 8 for v in window)
        return after_dct(decoded, box, SIZE, how)

    out["turbojpeg-0.0.2 (shmaug)"] = ours if turbo.available() else "libjpeg-turbo 3 not found"
    out["opencv"] = lambda d, h, w: decode.resized_window(d, "x", "rgb", h, w, SIZE, how,
                                                          "opencv")
    out["full decode"] = lambda d, h, w: cv2.imdecode(d, cv2.IMREAD_COLOR)
    if extra and extra not in sys.path:
        sys.path.append(extra)  # after the venv's: its numpy wins
    try:
        import simplejpeg

        def simple(data: np.ndarray, header: Any, window: Any) -> Any:
            m = decode.dct_scale(window[2:], SIZE)
            pixels = simplejpeg.decode_jpeg(data.tobytes(), "RGB",
                                            min_height=-(-header[0] * m // 8),
                                            min_width=-(-header[1] * m // 8))
            return whole_then_cut(pixels, window, pixels.shape[0] * 8 // header[0] if m < 8
                                  else 8)
        out[f"simplejpeg {simplejpeg.__version__}"] = simple
    except ImportError as exc:
        out["simplejpeg"] = f"not installed ({exc})"
    found = [os.path.join(p, "turbojpeg.py") for p in sys.path
             if os.path.isfile(os.path.join(p, "turbojpeg.py"))]
    lib = turbo.library()
    if found and lib is not None:
        spec = importlib.util.spec_from_file_location("pyturbojpeg", found[0])
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        jpeg = module.TurboJPEG(lib.path)
        from math import gcd

        def pyturbo(data: np.ndarray, header: Any, window: Any) -> Any:
            m = decode.dct_scale(window[2:], SIZE)
            g = gcd(m, 8)
            pixels = jpeg.decode(data.tobytes(), pixel_format=module.TJPF_RGB,
                                 scaling_factor=(m // g, 8 // g))
            return whole_then_cut(pixels, window, m)
        out["PyTurboJPEG (same libjpeg-turbo 3)"] = pyturbo
    else:
        out["PyTurboJPEG"] = "not installed, or no libjpeg-turbo 3 to load"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=described(__doc__))
    p.add_argument("--files", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--path", default=None)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    import cv2

    from bench.files import photos
    from bench.files.crop_quality import cpu_name
    from shmaug.ops.builtin.windows import window_of
    from shmaug.sources.images import decode

    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    items = []
    for data_bytes in photos.jpegs(args.files, seed=1):
        data = np.frombuffer(data_bytes, np.uint8)
        header = decode.jpeg_header(data)
        assert header is not None
        window = tuple(float(v) for v in window_of(header[0], header[1], rng, (0.08, 1.0),
                                                   (3 / 4, 4 / 3)))
        items.append((data, header, window))
    contenders = paths(args.path)
    runs = {k: f for k, f in contenders.items() if callable(f)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(args.rounds):
        names = list(runs)
        names = names[r % len(names):] + names[:r % len(names)]
        for name in names:
            began = time.process_time()
            for item in items:
                runs[name](*item)
            times[name].append(1e6 * (time.process_time() - began) / len(items))
    ceiling = float(np.median(times["full decode"]))
    lines = [f"# JPEG libraries on the crop path ({cpu_name()})", "",
             f"`python -m bench.files.jpeg_libraries {' '.join(argv or sys.argv[1:])}`: "
             f"{args.files} real photos, one random window each, 224 x 224, CPU µs per crop, "
             f"one core, median of {args.rounds} interleaved rounds.", "",
             "| library | µs per crop | ÷ full decode's time | rounds |", "|---|---:|---:|---|"]
    for name, f in contenders.items():
        if callable(f):
            med = float(np.median(times[name]))
            lines.append(f"| {name} | {med:.0f} | {med / ceiling:.2f} | "
                         + " ".join(f"{v:.0f}" for v in times[name]) + " |")
        else:
            lines.append(f"| {name} | — | — | {f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "jpeg_libraries.md").write_text(text)
        (Path(args.out) / "jpeg_libraries.json").write_text(json.dumps(times, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
