"""What an image source runs in a worker: encoded bytes to pixels, and one sample index to pixels.

``Decoder`` turns encoded image bytes into the source's image (decode, check the channels,
resize). ``Reader`` is ``ImageFiles.load`` and ``ImageRecords.load``: it asks its table (a
``PathTable`` of files, or a ``RecordTable`` of records in shards) for sample ``index``'s bytes
and decodes them, standing in for an unreadable sample with ``on_error="skip"``. A loader gives
the workers ``reader.sharing(store).marking(handle, marks)``: the table in the loader's shared
memory and the loader's marks of stand-ins, so a pickled reader carries only handles and
settings. A table provides ``fetch(i)`` (the bytes), ``what(i)`` (how errors name them),
``[i]`` (the name ``stats()`` lists), ``class_of(i)``, ``share(store)``, ``NOUN`` and
``SOURCE``. ``files.py`` and ``records.py`` own the source objects; this module only reads.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from . import turbo
from .decode import (COLOR_MODES, decode_bytes, jpeg_ends, jpeg_header, resize,
                     resized_window, scaled_whole, unreadable, decide_jpeg_mode,
                     limited, pixel_limit, refuse_bomb, scan_reads)
from ... import whole_decodes
from ...deferred import Undecoded
from ...engine.source import MARKS
from ...resample import Resample, Window
from ...errors import ImageReadError
from ...memory.store import ArrayHandle, SharedStore, attach_block

log = logging.getLogger(__name__)
_MARK = MARKS.char  # a stand-in's index + 1, in a worker's bytes (native, as the loader's array)
_MARK_SIZE = MARKS.itemsize


@dataclass(frozen=True, slots=True)
class Decoder:
    """Turns one sample's encoded bytes into the source's image: decode, check channels,
    resize (``image_size`` None: not resized)."""

    image_size: tuple[int, int] | None
    color_mode: str | None
    interpolation: str
    channels: int  # 0 until learned from the first file (color_mode=None)
    reduced_decode: bool
    aspect: str | None = None  # "crop" / "pad": Keras' crop_to_ / pad_to_aspect_ratio
    jpeg_mode: str = "opencv"  # how JPEGs decode: "turbo", "opencv" or "whole" (decide_jpeg_mode)
    dtype: str = "uint8"  # "uint16": 16-bit files kept, 8-bit ones scaled by 257
    # the most pixels a file may have (``decode.pixel_limit``), read where the source is made
    # and kept for its workers (a spawned worker's PIL has its default)
    max_pixels: int | None = dataclasses.field(default_factory=pixel_limit)

    def with_jpeg_mode(self) -> Decoder:
        """This decoder, with how JPEGs decode decided here, once, for every process it is
        sent to (``decode.decide_jpeg_mode``): a window, for a decode-time crop, and a whole
        photo resized to ``image_size`` (at the smallest eighth of its size that keeps it at
        least ``image_size``, with libjpeg-turbo; ``reduced_decode=False``: every pixel)."""
        return dataclasses.replace(self, jpeg_mode=decide_jpeg_mode())

    def __call__(self, data: np.ndarray, what: str) -> np.ndarray:
        with limited(self.max_pixels):
            return self._decoded(data, what)

    def _decoded(self, data: np.ndarray, what: str) -> np.ndarray:
        size = self.image_size
        image = None
        if size is not None and self.reduced_decode and self.aspect is None:
            image = scaled_whole(data, what, self.color_mode, size, self.jpeg_mode)
        if image is None:
            image = decode_bytes(data, what, self.color_mode,
                                 size if self.reduced_decode else None, dtype=self.dtype)
        if self.dtype == "uint16" and image.dtype == np.uint8:
            image = image.astype(np.uint16) * np.uint16(257)  # 255 -> 65535, one scale
        self._check_channels(image.shape[-1], what)
        if size is None:
            return image
        header = jpeg_header(data) if self.aspect == "pad" and self.reduced_decode else None
        return resize(image, size, self.interpolation, self.aspect,
                      header[:2] if header else None)

    def undecoded_or_pixels(self, data: np.ndarray, what: str, checked: bool = False
                            ) -> np.ndarray | Undecoded:
        """The bytes of a JPEG undecoded, with its size, for an `augment` that decodes only
        its window (``shmaug.deferred``); any other file decoded, as ``__call__``.
        ``checked``: an unreadable JPEG must fail here, where it can be stood in for, not in
        the op: libjpeg-turbo reads its header (a few microseconds), OpenCV its scan at 1/8
        in grey (``decode.scan_reads``), and a file whose image has no end marker (a download
        cut short: ``decode.jpeg_ends``) or that does not read so is decoded here, whole.
        (Decoding every file whole without libjpeg-turbo made a crop pipeline 3x slower, and
        its pixels the exact path's.)"""
        header = jpeg_header(data) if self.image_size is None and self.dtype == "uint8" \
            else None  # (a window decodes to uint8)
        if header is None or not header[0] or not header[1] or header[2] not in (1, 3):
            return self(data, what)
        with limited(self.max_pixels):  # (before a window's decode, which it passes)
            refuse_bomb(header[0], header[1], what)
        if checked and self.jpeg_mode == "turbo":
            try:
                turbo.header(data)
            except turbo.TurboError as exc:
                raise unreadable(what, f"libjpeg-turbo cannot read it ({exc})") from None
        if checked and (not jpeg_ends(data) or  # cut short (no end marker its walk reaches)
                        self.jpeg_mode != "turbo" and not scan_reads(data)):  # damaged
            whole_decodes.count("on_error_skip")
            return self(data, what)
        channels = COLOR_MODES[self.color_mode] if self.color_mode else header[2]
        self._check_channels(channels, what)
        return EncodedImage(data, what, self, header, (header[0], header[1], channels))

    def _check_channels(self, channels: int, what: str) -> None:
        if self.channels and channels != self.channels:
            raise ImageReadError(
                f"Cannot use {what}: it has {channels} channel(s) but "
                f"this source has {self.channels} (color_mode=None keeps the first file's "
                f"channels). Fix: pass color_mode='grayscale', 'rgb' or 'rgba' to convert."
            )


class EncodedImage(Undecoded):
    """A JPEG's bytes and its size from the header: decoded whole (``decode``) or only
    around a window (``resized_window``) by the op that draws the window."""

    __slots__ = ("data", "what", "decoder", "header", "_shape")

    def __init__(self, data: np.ndarray, what: str, decoder: Decoder,
                 header: tuple[int, int, int, int], shape: tuple[int, int, int]) -> None:
        self.data, self.what, self.decoder, self.header, self._shape = (
            data, what, decoder, header, shape)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self._shape

    def decode(self) -> np.ndarray:
        return self.decoder(self.data, self.what)

    def resized_window(self, window: Window, size: tuple[int, int],
                       how: Resample) -> np.ndarray:
        decoder = self.decoder
        with limited(decoder.max_pixels):
            return resized_window(self.data, self.what, decoder.color_mode, self.header,
                                  window, size, how, decoder.jpeg_mode, decoder.reduced_decode)

    def __repr__(self) -> str:
        return f"<EncodedImage {self.what}, shape {self._shape}, not decoded>"


class Reader:
    """A source's ``load``: decodes sample ``index``, standing in for it when it is unreadable.

    ``sharing(store)`` gives a reader whose path table lives in ``store`` (the loader's) and
    pickles as its handle; ``marking(handle, marks)`` one that also sets ``marks[index]`` to
    the stand-in's index + 1 for each sample it stood in for (shared, owned by the loader,
    which counts the marks of what it delivers and gives it the stand-in's targets).
    Pickled for a worker, it carries only handles and settings.
    """

    __slots__ = ("table", "decoder", "on_error", "by_class", "_handle", "_marks", "_block",
                 "hands_undecoded")
    uses_global_rng = False  # decoding draws no random numbers: no need to seed the globals

    def __init__(self, table: Any, decoder: Decoder, on_error: str, by_class: bool,
                 handle: ArrayHandle | None = None, marks: Any = None,
                 hands_undecoded: bool = False) -> None:
        self.table = table  # a PathTable or RecordTable, in this process or shared
        self.decoder = decoder
        self.hands_undecoded = hands_undecoded  # JPEGs handed over undecoded (see below)
        self.on_error = on_error
        self.by_class = by_class  # invariant: a stand-in must be of the sample's class
        self._handle = handle  # the marks' shared block, or None: stand-ins are not recorded
        self._marks = marks  # invariant: writable, a stand-in's index + 1 per sample, or None
        self._block: Any = None  # in a worker: the attached block behind ``_marks``

    @property
    def __name__(self) -> str:  # how a worker error names the stage that failed
        return f"{self.table.SOURCE}.load"

    def sharing(self, store: SharedStore) -> Reader:
        """A reader of the same samples whose path table is copied once into ``store``."""
        return type(self)(self.table.share(store), self.decoder, self.on_error, self.by_class,
                       self._handle, self._marks, self.hands_undecoded)

    def marking(self, handle: ArrayHandle, marks: np.ndarray) -> Reader:
        """A reader of the same samples that records its stand-ins in ``marks`` (whose shared
        block ``handle`` names, for the workers)."""
        return type(self)(self.table, self.decoder, self.on_error, self.by_class, handle, marks,
                      self.hands_undecoded)

    def handing_undecoded(self) -> Reader:
        """A reader of the same samples that hands JPEGs over undecoded (``EncodedImage``),
        where the source keeps photos at their own size, for an `augment` that decodes only
        the window it crops; a loader asks for it when its `augment`'s plan ``takes_undecoded``."""
        if self.decoder.image_size is not None:
            return self
        return type(self)(self.table, self.decoder.with_jpeg_mode(), self.on_error, self.by_class,
                      self._handle, self._marks, True)

    @property
    def prefetch(self) -> Callable[..., None] | None:
        """The engine's hook before a task's samples are made one by one: the table's, where
        it reads over a network (``remote.bucket.RemoteTable``, ``RecordTable`` of URLs) and fetches
        a task's samples, and those of the tasks queued behind it (``ahead``), together; None
        where there is nothing to fetch, which a worker sees once, at start."""
        return getattr(self.table, "prefetch", None)

    @property
    def plan(self) -> Callable[..., None] | None:
        """The engine's hook with the known order (the table's: ``RecordTable.plan``), or
        None; seen once per worker, as ``prefetch``."""
        return getattr(self.table, "plan", None)

    def read(self, index: int) -> np.ndarray:
        """Sample ``index`` decoded; no stand-in."""
        return self.decoder(self.table.fetch(index), self.table.what(index))

    def _made(self, index: int) -> np.ndarray | Undecoded:
        if self.hands_undecoded:
            return self.decoder.undecoded_or_pixels(
                self.table.fetch(index), self.table.what(index), checked=self.on_error == "skip")
        return self.read(index)

    def __call__(self, index: int) -> np.ndarray | Undecoded:
        kept = self._stood_in(index) if self.on_error == "skip" else None  # (kept: see there)
        try:
            return self._made(index if kept is None else kept)
        except ImageReadError as exc:
            if kept is not None:  # (another stand-in now would part a batch in flight from
                raise self._lost_stand_in(index, kept, exc) from exc  # its targets)
            if self.on_error == "raise":
                raise
            first = exc
        table, n = self.table, len(self.table)
        own = table.class_of(index) if self.by_class else None
        for step in range(1, n):
            substitute = (index + step) % n
            if self.by_class and table.class_of(substitute) != own:
                continue  # the stand-in must carry the label the batch gives this sample
            try:
                image = self._made(substitute)
            except ImageReadError:
                continue
            self._mark(index, substitute)
            # The user hears of it from the loader, once (``replaced_warning``).
            log.debug("%s Using %s instead (on_error='skip')", first, table[substitute])
            return image
        kind = "of its class " if self.by_class else ""
        cause = str(first).partition(" Fix:")[0]  # (its fix offers on_error='skip', taken)
        raise ImageReadError(
            f"No other {table.NOUN} {kind}in this source can be read, so none can stand in "
            f"for {table.what(index)} ({cause}). Fix: replace or remove the unreadable "
            f"{table.NOUN}s (stats()['unreadable'] lists those met so far), or add a "
            f"readable one{' to its class' if self.by_class else ''}."
        )

    def _lost_stand_in(self, index: int, kept: int, exc: ImageReadError) -> ImageReadError:
        """The stand-in kept for ``index`` became unreadable as the loader ran (a file
        rewritten or deleted under it): choosing another would give batches made with the
        first the second's targets, so the epoch stops, naming both."""
        cause = str(exc).partition(" Fix:")[0]
        return ImageReadError(
            f"{self.table.what(kept)}, which stood in for the unreadable "
            f"{self.table.what(index)} (on_error='skip'), cannot be read any more ({cause}): "
            f"files changed while the loader ran. Fix: replace or remove the unreadable "
            f"{self.table.NOUN}s, then make a new loader (which chooses its stand-ins again).")

    def _mark(self, index: int, substitute: int) -> None:
        """Record that ``substitute`` stood in for ``index`` (its targets go with it)."""
        if isinstance(self._marks, memoryview):  # (a worker's: no numpy view, see below)
            struct.pack_into(_MARK, self._marks, index * _MARK_SIZE, substitute + 1)
        elif self._marks is not None:
            self._marks[index] = substitute + 1

    def _stood_in(self, index: int) -> int | None:
        """The stand-in chosen for ``index`` before, if any (None without marks): read in
        its place from then on, so a file that reads again later (repaired, a read that
        failed once) never goes out with its stand-in's targets, whatever is in flight."""
        if isinstance(self._marks, memoryview):
            mark = struct.unpack_from(_MARK, self._marks, index * _MARK_SIZE)[0]
        else:
            mark = 0 if self._marks is None else int(self._marks[index])
        return mark - 1 if mark else None

    def name(self, index: int) -> str:
        """What ``stats()["unreadable"]`` calls sample ``index``: its path (or shard and
        record)."""
        return str(self.table[index])

    def read_name(self, index: int) -> str:
        """What was read for sample ``index``, for an op's error on its pixels: its name, or
        its stand-in's (on_error='skip'), the file to fix, beside it."""
        kept = self._stood_in(index) if self.on_error == "skip" else None
        return self.name(index) if kept is None else \
            f"{self.table[kept]}, standing in for the unreadable {self.table[index]}"

    def replaced_warning(self, index: int) -> str:
        """The loader's one warning, for the first stand-in it delivers (read again here for
        the reason: a worker's exception does not travel with a successful batch)."""
        try:
            self.read(index)
            reason = f"Could not read {self.table.what(index)} (it reads now)"
        except ImageReadError as exc:
            reason = str(exc).split(" Fix:")[0].rstrip(".")
        kind = " of its class" if self.by_class else ""
        return (
            f"{reason}. With on_error='skip' it is replaced by the next readable "
            f"{self.table.NOUN}{kind}, in this epoch and every other (with that "
            f"{self.table.NOUN}'s targets; a prediction for it is its stand-in's). This "
            f"warning is not repeated for this loader: "
            f"stats()['unreadable'] lists every unreadable {self.table.NOUN} met (the rows "
            f"to set aside) and stats()['skipped'] counts the stand-ins delivered. "
            f"Fix: replace or remove the {self.table.NOUN}(s)."
        )

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.table, self.decoder, self.on_error, self.by_class, self._handle,
                self.hands_undecoded)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        (self.table, self.decoder, self.on_error, self.by_class, self._handle,
         self.hands_undecoded) = state
        self._marks = self._block = None
        if self._handle is not None:  # in a worker: the loader's marks, by name
            self._block = attach_block(self._handle)
            self._marks = self._block.buf  # bytes, no numpy view: closing never meets one


if TYPE_CHECKING:  # mypy holds the reader to what the engine asks of a source's load
    from ...engine import source as engine

    _AS_THE_ENGINE_SEES_IT: tuple[type[engine.Sharing], type[engine.Marking], type[engine.Marked],
                                  type[engine.Prefetching], type[engine.Planning]] = (
        Reader, Reader, Reader, Reader, Reader)
