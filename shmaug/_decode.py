"""Decoding one image file in a worker: bytes -> uint8 (H, W, C) in the requested colour mode.

OpenCV first (its wheels decode JPEG with libjpeg-turbo), PIL for what OpenCV cannot read;
then channel conversion to RGB order and resizing. ``files.ImageFiles`` decides which file and
what to do when one is unreadable; this module only turns one file into pixels, or says why not.
"""

from __future__ import annotations

import numpy as np

from .errors import ImageReadError

COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}  # None: keep the files' own channels

_PIL_MODES = {"L": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA", "I;16": "I;16"}


def decode(path: str, color_mode: str | None) -> np.ndarray:
    """uint8 (H, W, C) in RGB(A) order, converted to ``color_mode``'s channel count.

    Reads the bytes with numpy (unicode paths work everywhere), decodes with OpenCV (whose
    wheels use libjpeg-turbo), and falls back to PIL for what OpenCV cannot read.
    """
    import cv2

    try:
        data = np.fromfile(path, np.uint8)
    except OSError as exc:
        reason = "no such file" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
        raise unreadable(path, reason) from None
    if data.size == 0:
        raise unreadable(path, "the file is empty (0 bytes)")
    image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)  # BGR(A); we convert channels ourselves
    if image is None:
        image = _decode_pil(path, data)
    if image.dtype == np.uint16:
        image = (image // 257).astype(np.uint8)  # 65535 -> 255, as PIL and TF do
    elif image.dtype != np.uint8:
        raise ImageReadError(
            f"Cannot use image file {path!r}: its pixels are {image.dtype}, not 8 or 16 bit. "
            f"Fix: convert the file to 8-bit PNG or JPEG."
        )
    if image.ndim == 2:
        image = image[:, :, None]
    return _convert(image, COLOR_MODES[color_mode] if color_mode else None)


def _decode_pil(path: str, data: np.ndarray) -> np.ndarray:
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data.tobytes())) as im:
            im.seek(0)  # first frame of an animated GIF / multi-page TIFF
            frame: Image.Image = im
            if frame.mode not in _PIL_MODES:
                keep_alpha = frame.mode in ("PA", "RGBa") or "transparency" in frame.info
                frame = frame.convert("RGBA" if keep_alpha else "RGB")
            array = np.asarray(frame)
    except Exception as exc:  # PIL raises many types for bad data; the reason is the message
        raise unreadable(path, f"neither OpenCV nor PIL can decode it ({_pil_reason(exc)}); "
                                "it is corrupt, truncated or not an image") from None
    if array.ndim == 3 and array.shape[2] >= 3:  # to OpenCV's BGR(A), like the main path
        array = array[:, :, [2, 1, 0, *range(3, array.shape[2])]]
    return np.ascontiguousarray(array)


def unreadable(path: str, reason: str) -> ImageReadError:
    return ImageReadError(
        f"Cannot read image file {path!r}: {reason}. Fix: replace or remove the file, or pass "
        f"on_error='skip' to replace it with the next readable image and count it in stats()."
    )


def _pil_reason(exc: Exception) -> str:
    from PIL import UnidentifiedImageError

    if isinstance(exc, UnidentifiedImageError):
        return "no decoder recognises its format"
    return f"PIL: {type(exc).__name__}: {exc}"


def _convert(bgr: np.ndarray, channels: int | None) -> np.ndarray:
    """OpenCV-ordered (BGR, BGRA, grey, grey+alpha) to RGB-ordered ``channels``."""
    import cv2

    c = bgr.shape[2]
    if c == 2 and channels != 2:  # grey + alpha: alpha is kept only for rgba
        alpha = bgr[:, :, 1:]
        bgr = bgr[:, :, :1]
        if channels == 4:
            return np.concatenate([np.repeat(bgr, 3, axis=2), alpha], axis=2)
        c = 1
    codes = {
        (1, 3): cv2.COLOR_GRAY2RGB, (1, 4): cv2.COLOR_GRAY2RGBA,
        (3, 1): cv2.COLOR_BGR2GRAY, (3, 3): cv2.COLOR_BGR2RGB, (3, 4): cv2.COLOR_BGR2RGBA,
        (4, 1): cv2.COLOR_BGRA2GRAY, (4, 3): cv2.COLOR_BGRA2RGB, (4, 4): cv2.COLOR_BGRA2RGBA,
    }
    code = codes.get((c, channels if channels is not None else c))
    out = bgr if code is None else cv2.cvtColor(bgr, code)
    return out if out.ndim == 3 else out[:, :, None]


def resize(image: np.ndarray, size: tuple[int, int], interpolation: str) -> np.ndarray:
    import cv2

    if image.shape[:2] == size:
        return image
    flags = {"area": cv2.INTER_AREA, "bicubic": cv2.INTER_CUBIC, "bilinear": cv2.INTER_LINEAR,
             "lanczos3": cv2.INTER_LANCZOS4, "lanczos5": cv2.INTER_LANCZOS4,
             "nearest": cv2.INTER_NEAREST}
    out = cv2.resize(image, (size[1], size[0]), interpolation=flags[interpolation])
    return out if out.ndim == 3 else out[:, :, None]
