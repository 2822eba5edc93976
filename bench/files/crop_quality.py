"""How far the reduced resized crop is from the exact one, on real photographs.

    python -m bench.files.crop_quality [--files 120] [--crops 3] [--out bench/results/files]

The reference is PIL's antialiased resize of the window of the whole decoded photo (shmaug's
exact path, ``reduced_decode=False``), which is what torchvision's ``resized_crop`` with
``antialias=True`` reproduces on a PIL image (tests/unit/test_windows.py holds torchvision
to it where it imports). Where torchvision imports, the random windows are also compared with
its ``resized_crop(antialias=True)`` on uint8 tensors (bilinear, bicubic), which has kernels of
its own: the rows "against torchvision's tensors". For each interpolation and each way a JPEG's
window is decoded ("turbo": the window alone, "opencv": the whole photo; both at 1/8, 1/4,
1/2 or 1/1 in the DCT), it prints the mean absolute difference per value (0..255) and the
PSNR (dB), over ``--crops`` random windows (torchvision's ``RandomResizedCrop`` draw) and the
centre crop of each of ``--files`` photos (``bench.files.photos``) at 224 x 224, and the time
per crop of each path. With libjpeg-turbo, also the time of a whole decode at each eighth of a
photo's size: why ``decode.DCT_EIGHTHS`` holds only 1/8, 1/4, 1/2 and 1/1 (the others have no
SIMD code). Writes ``crop_quality.md`` and ``crop_quality.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench.common.harness import described

INTERPOLATIONS = ("bilinear", "bicubic", "area", "lanczos3")
SIZE = (224, 224)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b) ** 2))
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except Exception:
        return platform.processor() or "unknown"


def measure(files: int, crops: int, seed: int = 0) -> dict[str, Any]:
    from bench.files import photos
    from shmaug.resample import Resample
    from shmaug.ops.builtin.windows import centre_window, window_of
    from shmaug.sources.images import decode, turbo

    rng = np.random.default_rng(seed)
    modes = ["turbo", "opencv"] if turbo.available() else ["opencv"]
    figures: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {"exact": [], **{m: [] for m in modes}}
    datas = [np.frombuffer(data_bytes, np.uint8) for data_bytes in photos.jpegs(files, seed)]
    tv_crop = _torchvision_crop()

    def add(name: str, out: np.ndarray, reference: np.ndarray) -> None:
        row = figures.setdefault(name, {"mad": [], "psnr": []})
        row["mad"].append(float(np.abs(out.astype(np.int16) - reference).mean()))
        row["psnr"].append(psnr(out, reference))

    for data in datas:
        header = decode.jpeg_header(data)
        assert header is not None
        h, w = header[0], header[1]
        whole = decode.decode_bytes(data, "x", "rgb") if tv_crop else None
        windows: list[tuple[Any, bool]] = [
            (tuple(float(v) for v in window_of(h, w, rng, (0.08, 1.0), (3 / 4, 4 / 3))), True)
            for _ in range(crops)]
        windows.append((centre_window(h, w, SIZE, 0.875), False))
        for interpolation in INTERPOLATIONS:
            for window, within in windows:
                how = Resample(interpolation, within=within, antialias=True)
                t = time.perf_counter()
                exact = decode.resized_window(data, "x", "rgb", header, window, SIZE, how,
                                              "turbo" if "turbo" in modes else "opencv",
                                              reduced=False)
                times["exact"].append(time.perf_counter() - t)
                tv = tv_crop(whole, window, interpolation) if tv_crop and within else None
                if tv is not None:
                    add(f"{interpolation} exact, against torchvision's tensors", exact, tv)
                for mode in modes:
                    t = time.perf_counter()
                    fast = decode.resized_window(data, "x", "rgb", header, window, SIZE, how,
                                                 mode)
                    times[mode].append(time.perf_counter() - t)
                    add(f"{interpolation} {mode}", fast, exact)
                    if tv is not None:
                        add(f"{interpolation} {mode}, against torchvision's tensors", fast, tv)
    return {
        "cpu": cpu_name(), "files": files, "crops": crops + 1, "modes": modes,
        "rows": {k: {"mad_mean": float(np.mean(v["mad"])), "mad_max": float(np.max(v["mad"])),
                     "psnr_median": float(np.median(v["psnr"])),
                     "psnr_p5": float(np.percentile(v["psnr"], 5)),
                     "psnr_min": float(np.min(v["psnr"]))} for k, v in figures.items()},
        "us_per_crop": {k: 1e6 * float(np.median(v)) for k, v in times.items()},
        "us_per_eighth": eighths(datas[:60]) if "turbo" in modes else {},
    }


def _torchvision_crop() -> Any:
    """torchvision v2's ``resized_crop(antialias=True)`` of a window of a whole decoded photo,
    on a uint8 tensor, as a ``tv_tensors.Image`` pipeline crops (its own antialiased kernels,
    not PIL's), for bilinear and bicubic (None for the others); None without torchvision."""
    try:
        import torch
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms.v2 import functional as F
    except ImportError:
        return None
    modes = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}

    def crop(whole: np.ndarray, window: Any, interpolation: str) -> np.ndarray | None:
        if interpolation not in modes:
            return None
        top, left, h, w = (int(v) for v in window)
        out = F.resized_crop(torch.from_numpy(whole).permute(2, 0, 1), top, left, h, w,
                             list(SIZE), interpolation=modes[interpolation], antialias=True)
        return np.asarray(out.permute(1, 2, 0).numpy())
    return crop


def eighths(datas: list[np.ndarray], rounds: int = 3) -> dict[str, float]:
    """µs per whole photo decoded by libjpeg-turbo at each M/8 of its size: the median of
    ``rounds`` interleaved rounds over ``datas``."""
    from shmaug.sources.images import decode, turbo

    headers = [decode.jpeg_header(d) for d in datas]
    runs: dict[int, list[float]] = {m: [] for m in range(8, 0, -1)}
    for _ in range(rounds):
        for m in runs:
            t = time.perf_counter()
            for data, header in zip(datas, headers):
                assert header is not None
                turbo.decode_window(data, (0, 0, header[0], header[1]), m, 3)
            runs[m].append((time.perf_counter() - t) / len(datas))
    return {f"{m}/8": 1e6 * float(np.median(v)) for m, v in runs.items()}


def markdown(result: dict[str, Any], command: str) -> str:
    lines = [f"# Reduced resized crop against the exact path ({result['cpu']})", "",
             f"`{command}`: {result['files']} real photos (scikit-image, scikit-learn; "
             f"ImageNet's sizes, q75-95 4:2:0), {result['crops']} windows each (random + "
             "centre), 224 x 224. Reference: the window of the whole decode, resized by "
             "PIL's antialiased filter (what torchvision's `resized_crop(antialias=True)` "
             "reproduces).", "",
             "| interpolation, decode | MAD mean | MAD max | PSNR median (dB) | PSNR 5th pct | "
             "PSNR min |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in result["rows"].items():
        lines.append(f"| {name} | {row['mad_mean']:.2f} | {row['mad_max']:.2f} | "
                     f"{row['psnr_median']:.1f} | {row['psnr_p5']:.1f} | {row['psnr_min']:.1f} |")
    lines += ["", "Median time per crop, one core, all interpolations: " + ", ".join(
        f"{k} {v:.0f} µs" for k, v in result["us_per_crop"].items()), ""]
    scales = result["us_per_eighth"]
    if scales:
        lines += ["A whole photo decoded by libjpeg-turbo at each scale (one core, the first "
                  "60 photos, median of 3 interleaved rounds):", "",
                  "| scale | µs per photo | ÷ 8/8 |", "|---|---:|---:|"]
        lines += [f"| {k} | {v:.0f} | {v / scales['8/8']:.2f} |" for k, v in scales.items()]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=described(__doc__))
    p.add_argument("--files", type=int, default=120)
    p.add_argument("--crops", type=int, default=3)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    import cv2

    cv2.setNumThreads(1)
    result = measure(args.files, args.crops)
    import sys

    command = "python -m bench.files.crop_quality " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = markdown(result, command.strip())
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "crop_quality.md").write_text(text)
        (out / "crop_quality.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
