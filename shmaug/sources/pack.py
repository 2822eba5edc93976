"""``pack``: decode and resize image files once into a memory-mappable ``.npy`` (uint8, or
uint16 for an ``ImageFiles(dtype="uint16")`` source).

The answer to "convert the dataset to TFRecords so the CPU stops decoding JPEG every epoch",
without leaving numpy: the packed ``images.npy`` goes straight to ``shmaug.Loader`` /
``shmaug.Sequence`` as ``x`` and is memory-mapped by every worker.

An output directory holds ``images.npy`` (N, H, W, C) of the source's dtype, ``labels.npy``
(N,) int64 when the source has labels, and ``manifest.json`` (class names, source, image size,
colour mode, count, sha256 of ``images.npy``). Everything is written under a ``.partial`` name,
flushed and fsync'ed, then renamed, the manifest last: an output is complete exactly when its
manifest is there, so an interrupted pack never leaves one that looks complete. A second run
over a complete output for the same source returns it without redoing the work. Packs into one
directory at once (every rank of a job, one job launched twice) take turns: the later ones wait
on a lock of the directory, then find the first's pack complete.

This module owns the output directory; decoding is ``ImageFiles``' and parallelism is
``Loader``'s (the workers decode into shared memory, this process writes to the file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, warn
from .files import ImageFiles
from .images.settings import encoded_labels

if TYPE_CHECKING:
    from ..engine.config.options import StartMethod

log = logging.getLogger(__name__)

IMAGES, LABELS, MANIFEST = "images.npy", "labels.npy", "manifest.json"
_MANIFEST_ROOM = 2**16  # bytes kept free for the manifest beside its class names (the
# unreadable files' names: 300 of them made one of 61 KB)
PARTIAL = ".partial"  # suffix of files being written; never mistaken for a finished output
PACK_FORMAT = "shmaug-pack/1"
# How a nearest resize rounds, recorded since it takes the pixel under each output pixel's
# centre (as Keras does): a nearest pack whose manifest lacks it, made by an earlier shmaug,
# holds the pixel half a pixel off and is packed again.
_NEAREST, _CENTRE = "nearest_pixel", "centre"
_HASH_CHUNK = 1 << 24  # bytes read at a time when verifying a checksum


@dataclass(frozen=True, slots=True)
class Packed:
    """A finished pack: where its files are, and its manifest.

    Attributes:
        directory: the output directory.
        images: path of ``images.npy``, to pass as ``x``.
        labels: path of ``labels.npy`` (class indices, int64), or None when the source has
            no labels.
        manifest: the parsed ``manifest.json``.
        created: True when this call wrote it, False when it was already complete.
        verified: True when it was already complete and ``verify`` re-hashed ``images.npy``
            against the manifest's sha256 (they matched).
        label_mode: how ``open`` encodes the labels: the packed source's (``"int"``,
            ``"categorical"`` one-hot float32, ``"binary"`` float32 (N, 1)), as its own
            ``labels`` were; one pack serves every mode.

    Example:
        >>> packed = shmaug.pack("flowers/", "flowers_64", image_size=(64, 64))
        >>> x, y = packed.open()
        >>> loader = shmaug.Loader(packed.images, y, batch_size=64, augment=fn)
    """

    directory: str
    images: str
    labels: str | None
    manifest: dict[str, Any]
    created: bool
    verified: bool = False
    label_mode: str = "int"

    @property
    def class_names(self) -> list[str]:
        return list(self.manifest["class_names"])

    def open(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(images, labels)``: images memory-mapped read-only, labels loaded (small) and
        encoded as ``label_mode`` says."""
        y = None if self.labels is None else np.load(self.labels)
        if y is not None and self.label_mode != "int":
            y = encoded_labels(y, self.label_mode, len(y), tuple(self.class_names))[0]
        return np.load(self.images, mmap_mode="r"), y


def pack(
    source: Any,
    out: str | os.PathLike[str],
    *,
    image_size: tuple[int, int] | None = None,
    color_mode: str | None = None,
    interpolation: str | None = None,
    on_error: str | None = None,
    workers: int | None = None,
    batch_size: int = 64,
    start_method: StartMethod | None = None,
    overwrite: bool = False,
    verify: bool = False,
    progress: bool = True,
) -> Packed:
    """Decode and resize every image of ``source`` once, in parallel, into ``out/``.

    Args:
        source: a ``shmaug.ImageFiles``; a directory (one sub-folder per class, or flat);
            a list of image paths; or a pandas DataFrame with ``filename`` and ``class``
            columns (build ``ImageFiles.from_dataframe`` for other names).
        out: output directory (created if needed).
        image_size, color_mode, interpolation, on_error: as ``ImageFiles``; None keeps the
            value of an ``ImageFiles`` source, or ``ImageFiles``' default ((256, 256),
            "rgb", "bilinear", "raise").
        workers: decoding processes; None for one per core, 0 for this process only.
        batch_size: images decoded per task batch.
        start_method: as ``Loader``.
        overwrite: redo even when ``out`` already holds a complete pack (of any source).
        verify: when ``out`` is already complete, also re-hash ``images.npy`` against the
            manifest's checksum (reads the whole file) before trusting it.
        progress: show a tqdm progress bar on stderr.

    Returns:
        A ``Packed``; ``created`` is False when ``out`` already held this pack.

    Raises:
        ArgumentError: a bad source or setting, or ``out`` holds a pack of another source.
        ImageReadError (inside a ``WorkerError``): an unreadable file, with ``on_error="raise"``.

    Example:
        >>> shmaug.pack("data/train", "train_224", image_size=(224, 224)).images
        'train_224/images.npy'
    """
    files = _as_files(source, image_size=image_size, color_mode=color_mode,
                      interpolation=interpolation, on_error=on_error)
    if files.image_size is None:
        raise ArgumentError(
            "`image_size` must be set to pack: a pack is one array of equal images, and this "
            "source keeps each photo at its own size (image_size=None). Fix: pass "
            "`image_size=(h, w)` to pack(), or read the files with a loader whose pipeline "
            "crops them (`Op('random_resized_crop', ...)`) instead of packing them."
        )
    directory = os.fspath(out)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ArgumentError(
            f"`out` must be a directory (it will hold {IMAGES}, {LABELS} and {MANIFEST}); "
            f"received {directory!r}, which is a file. Fix: pass a directory path."
        )
    made = not os.path.isdir(directory)  # removed again if the pack fails (it is ours)
    described = describe(files)
    label_mode = files.label_mode or "int"
    with _alone(directory):
        existing = _complete(directory, described, verify) if not overwrite else None
        if existing is not None:
            checked = ", and images.npy matches its sha256" if existing.verified else ""
            log.info("%s already holds a complete pack of this source (%d images%s); nothing "
                     "to do (overwrite=True redoes it)", directory, existing.manifest["count"],
                     checked)
            return dataclasses.replace(existing, label_mode=label_mode)
        _remove(os.path.join(directory, MANIFEST))  # from here on, `out` is not complete
        try:
            return dataclasses.replace(_write(
                files, directory, described, workers=workers, batch_size=batch_size,
                start_method=start_method, progress=progress), label_mode=label_mode)
        except BaseException:  # its partial files are gone (_write); so is a folder made for it
            if made:
                with contextlib.suppress(OSError):  # not empty: someone else's files, kept
                    os.rmdir(directory)
            raise


def _reserve(path: str, directory: str, beside: int) -> None:
    """Take the disk room of the whole of ``path`` now (a memory map written past what the
    disk holds kills the process with SIGBUS: no message, the partial file left behind), and
    see that ``beside`` bytes more are free for the files written after the decode (labels,
    manifest: refused there, the whole decode was thrown away)."""
    fallocate = getattr(os, "posix_fallocate", None)  # (Linux; elsewhere, as before)
    if fallocate is None:
        return
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        try:
            fallocate(f.fileno(), 0, size)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                return  # (a file system that cannot reserve: as before)
            free, need = shutil.disk_usage(directory).free, size + beside
            raise ArgumentError(
                f"`out` {directory!r} has {free:,} bytes free, and the pack needs {need:,} "
                f"bytes ({need / 2**20:,.1f} MiB) for {IMAGES}, {LABELS} and {MANIFEST} "
                f"({exc.strerror}). Fix: free room there, or pack to a disk that holds "
                f"it.") from None
    free = shutil.disk_usage(directory).free  # (with images.npy's room taken)
    if free < beside:
        raise ArgumentError(
            f"`out` {directory!r} has {free:,} bytes free once {IMAGES} ({size:,} bytes) is "
            f"reserved, and {LABELS} and {MANIFEST}, written after the decode, need up to "
            f"{beside:,} more. Fix: free room there, or pack to a disk that holds it.")


@contextlib.contextmanager
def _alone(directory: str) -> Iterator[None]:
    """``directory`` (made if need be) held by this pack alone: a second pack into it waits
    here for the first to end (both wrote one partial file: the second zeroed rows the first
    had written, under the manifest the first then renamed into place). A lock of the
    directory itself (``flock``), which dies with its process; none where there is no
    ``fcntl`` (Windows), or where the filesystem takes none on a directory (NFS, Lustre
    without ``flock``): packs into one folder at once are then the caller's to avoid."""
    fcntl: Any = None
    with contextlib.suppress(ImportError):
        import fcntl
    while True:
        os.makedirs(directory, exist_ok=True)
        if fcntl is None:
            yield
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                warn(f"Another process is packing into {directory!r}: this one waits for it "
                     f"to end, then returns its pack if it is of this source.")
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # no lock to take here (EBADF on NFS, ENOSYS on Lustre)
                fcntl = None
                continue
            here, held = os.stat(directory) if os.path.isdir(directory) else None, os.fstat(fd)
            if here is not None and (here.st_ino, here.st_dev) == (held.st_ino, held.st_dev):
                try:
                    yield
                finally:  # (unlocked before closed: a forked child holding a copy of the
                    fcntl.flock(fd, fcntl.LOCK_UN)  # descriptor would keep it held)
                return
        finally:
            os.close(fd)


def describe(files: ImageFiles) -> dict[str, Any]:
    """What a pack is of: settings plus a fingerprint of (path, size, mtime, label) per file."""
    digest = hashlib.sha256()
    # Class indices, whatever `label_mode` encodes them as (a pack stores indices).
    classes = files.classes
    labels = classes if classes is not None else np.full(len(files), -1)
    for path, label in zip(files.paths, labels.tolist()):
        try:
            st = os.stat(path)
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "missing"
        digest.update(f"{os.path.abspath(path)}\0{stamp}\0{label}\n".encode("utf-8", "replace"))
    root = os.path.commonpath([os.path.abspath(p) for p in files.paths])
    return {
        "root": root, "count": len(files), "files_sha256": digest.hexdigest(),
        "image_size": list(files.image_size or ()), "color_mode": files.color_mode,
        "channels": files.channels, "interpolation": files.interpolation,
        "on_error": files.on_error,
        # Only when set: the manifests of packs made before these existed stay complete.
        **({"crop_to_aspect_ratio": True} if files.crop_to_aspect_ratio else {}),
        **({"pad_to_aspect_ratio": True} if files.pad_to_aspect_ratio else {}),
        **({_NEAREST: _CENTRE} if files.interpolation == "nearest" else {}),
        **({"reduced_decode": False} if not files.reduced_decode else {}),
        **({"dtype": files.dtype} if files.dtype != "uint8" else {}),
    }


# -- inside -------------------------------------------------------------------------------------


def _as_files(source: Any, **options: Any) -> ImageFiles:
    given: dict[str, Any] = {k: (tuple(v) if k == "image_size" else v) for k, v in options.items()
             if v is not None}
    if isinstance(source, ImageFiles):
        return dataclasses.replace(source, **given) if given else source
    if isinstance(source, (str, os.PathLike)):
        files: ImageFiles = ImageFiles.from_directory(source, **given)  # no subset: one source
        return files
    if hasattr(source, "columns"):  # a pandas DataFrame, duck-typed: pandas stays optional
        return ImageFiles.from_dataframe(source, **given)
    if isinstance(source, Sequence):
        return ImageFiles.from_paths(source, **given)
    raise ArgumentTypeError(
        f"`source` must be a shmaug.ImageFiles, a directory, a list of image paths or a pandas "
        f"DataFrame; received type {type(source).__name__}. Fix: e.g. `pack('data/train', "
        f"'train_packed', image_size=(224, 224))`."
    )


def _complete(directory: str, described: dict[str, Any], verify: bool) -> Packed | None:
    """The pack in ``directory`` when it is complete and of this source; None to (re)do it."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("%s is unreadable (%s); packing again", path, exc)
        return None
    made = manifest.get("source")
    if _NEAREST in described and isinstance(made, dict) and _NEAREST not in made and \
            manifest.get("format") == PACK_FORMAT and made == {
                k: v for k, v in described.items() if k != _NEAREST}:
        log.warning("%s was packed by an earlier shmaug, whose nearest resizes took the pixel "
                    "half a pixel off Keras'; packing again", directory)
        return None
    if manifest.get("format") != PACK_FORMAT or manifest.get("source") != described:
        made = manifest.get("source") if isinstance(manifest.get("source"), dict) else {}
        differ = sorted(k for k in {*made, *described} if made.get(k) != described.get(k))
        files = (" (files_sha256 covers each file's path, size and modification time: a "
                 "copy without its times, a checkout or a touch changes it)"
                 if differ == ["files_sha256"] else "")
        raise ArgumentError(
            f"`out` {directory!r} already holds a pack of another source or with other "
            f"settings: {', '.join(differ) or 'its format'} differ{'s' if len(differ) == 1 else ''}"
            f"{files}. Fix: pass another `out`, or overwrite=True to replace it; a pack is "
            f"read without its source by np.load(os.path.join(out, 'images.npy'), "
            f"mmap_mode='r') and its labels.npy."
        )
    packed = _packed(directory, manifest, created=False)
    problem = _check_files(packed, verify)
    if problem:
        log.warning("%s: %s; packing again", directory, problem)
        return None
    return dataclasses.replace(packed, verified=verify)


def _check_files(packed: Packed, verify: bool) -> str:
    m = packed.manifest
    try:
        if os.path.getsize(packed.images) != m["bytes"]:
            return f"{IMAGES} has {os.path.getsize(packed.images)} bytes, not {m['bytes']}"
        if packed.labels is not None and not os.path.isfile(packed.labels):
            return f"{LABELS} is missing"
        if verify and _sha256(packed.images) != m["sha256"]:
            return f"{IMAGES} does not match the manifest's sha256"
    except OSError as exc:
        return str(exc)
    return ""


def _packed(directory: str, manifest: dict[str, Any], *, created: bool) -> Packed:
    labels = os.path.join(directory, LABELS) if manifest["labels"] else None
    return Packed(directory, os.path.join(directory, IMAGES), labels, manifest, created)


def _write(files: ImageFiles, directory: str, described: dict[str, Any], *, workers: int | None,
           batch_size: int, start_method: StartMethod | None, progress: bool) -> Packed:
    from tqdm import tqdm

    from ..engine.loader import Loader

    final = {name: os.path.join(directory, name) for name in (IMAGES, LABELS, MANIFEST)}
    partial = {name: path + PARTIAL for name, path in final.items()}
    assert files.image_size is not None  # (pack refused a source without one)
    sample = (*files.image_size, files.channels)
    shape = (len(files), *sample)
    began = time.perf_counter()
    done = False
    try:
        images = np.lib.format.open_memmap(partial[IMAGES], mode="w+", dtype=files.dtype,
                                           shape=shape)
        classes = files.classes  # (its file and the manifest's room are checked now too)
        _reserve(partial[IMAGES], directory, beside=_MANIFEST_ROOM + len(json.dumps(
            list(files.class_names))) + (0 if classes is None else classes.nbytes + 4096))
        with open(partial[IMAGES], "rb") as f:  # the header: hash the file as it is written
            digest = hashlib.sha256(f.read(images.offset))
        with Loader(files, None, batch_size, workers=workers, start_method=start_method,
                    output_shape=sample, output_dtype=files.dtype, seed=0) as loader, \
                tqdm(total=len(files), unit="img", desc=f"pack {directory}",
                     disable=not progress) as bar:
            start = 0
            for xb, _ in loader:  # in order: shuffle is off, so batch k is rows k*B ...
                images[start:start + len(xb)] = xb
                digest.update(np.ascontiguousarray(xb).data)
                start += len(xb)
                bar.update(len(xb))
            skipped = int(loader.stats()["skipped"])
            unreadable = loader.stats()["unreadable"]
        images.flush()
        del images
        _fsync(partial[IMAGES])
        if classes is not None:
            with open(partial[LABELS], "wb") as f:
                np.save(f, classes)
                _sync(f)
        manifest = {
            "format": PACK_FORMAT, "count": len(files), "shape": list(shape), "dtype": files.dtype,
            "class_names": list(files.class_names), "labels": classes is not None,
            "sha256": digest.hexdigest(), "bytes": os.path.getsize(partial[IMAGES]),
            "skipped": skipped, "unreadable": unreadable, "source": described,
        }
        with open(partial[MANIFEST], "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            _sync(f)
        # The manifest last: until it is renamed, `out` is incomplete whatever else is there.
        os.replace(partial[IMAGES], final[IMAGES])
        if classes is not None:
            os.replace(partial[LABELS], final[LABELS])
        else:
            _remove(final[LABELS])
        os.replace(partial[MANIFEST], final[MANIFEST])
        _fsync_dir(directory)
        done = True
    finally:
        if not done:
            for path in partial.values():
                _remove(path)
    log.info("packed %d images into %s in %.1f s (%d unreadable replaced)", len(files),
             final[IMAGES], time.perf_counter() - began, skipped)
    return _packed(directory, manifest, created=True)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _sync(f: Any) -> None:
    f.flush()
    os.fsync(f.fileno())


def _fsync(path: str) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows cannot open a directory
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
