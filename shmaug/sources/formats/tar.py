"""WebDataset tar shards: which members make a sample, and where each image's bytes lie.

A WebDataset shard is a plain tar whose members are grouped by key: ``dir/0001.jpg`` and
``dir/0001.cls`` are sample ``dir/0001``'s image and label (the key is the member's path up to
the first dot of its file name; the extension is the rest, compared in lower case). ``scan``
reads one shard's headers once with ``tarfile`` (it seeks over member data) and reads only the
small label members; each sample's image is then an offset and a length in the tar, which
``table.RecordTable`` keeps in shared memory and a worker reads directly (the member is the
image: the ``registry.RAW`` format). This module knows the layout; the table knows where,
``records.py`` what it means.
"""

from __future__ import annotations

import tarfile
from typing import Any, BinaryIO, Sequence

from .shards import Scan, Shards, cached
from ...errors import ArgumentError, RemoteError


_HEADER_BYTES = 1 << 20  # the most a long name's or a pax record's member may hold
_IMAGE_BYTES = 1 << 30  # the most an image member may hold


class _CappedInfo(tarfile.TarInfo):
    """A member's header whose own extension (a GNU long name, a pax record) is read whole
    by tarfile: one claiming gigabytes (8 KiB on disk, with holes) took 4 GB while indexing."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED and self.size > _HEADER_BYTES:
            raise tarfile.ReadError(
                f"a header extension of {self.size:,} bytes, where a long name or a pax "
                f"record takes a few hundred")
        member: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return member


_EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
             tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


def split_name(name: str) -> tuple[str, str]:
    """``(key, extension)`` of a member name, as WebDataset splits it."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), ext.lower() if dot else ""


def indexer(found: Shards, image_exts: Sequence[str], label_ext: str | None,
            index_cache: str | None) -> Scan:
    """The scan of ``found``'s shards, each streamed once, its index kept in ``index_cache``
    (None: not kept)."""

    def streamed(path: str) -> tuple[list[int], list[int], list[Any]]:
        with found.opened(path) as (f, _):
            return scan(path, image_exts, label_ext, f)

    # ("tar2": an index kept before a member met twice was refused may lack a sample)
    return cached(streamed, index_cache, f"tar2|{tuple(image_exts)}|{label_ext}", found)


def scan(path: str, image_exts: Sequence[str], label_ext: str | None,
         fileobj: BinaryIO | None = None) -> tuple[list[int], list[int], list[Any]]:
    """Every sample of one shard: ``(image data offsets, image sizes, label texts)``, in
    the order the tar holds them (labels empty without ``label_ext``). ``fileobj``: the
    shard opened (a bucket's object, streamed); ``path`` then only names it.

    Raises:
        ArgumentError: not an uncompressed tar; a sample without an image or a label.
    """
    try:
        tar = tarfile.open(path, mode="r:", fileobj=fileobj, tarinfo=_CappedInfo)
    except RemoteError:
        raise  # (an OSError too, but the bucket's failure: not about the shard's format)
    except (tarfile.TarError, OSError) as exc:
        raise ArgumentError(
            f"`tar_files`: cannot read {path!r} as an uncompressed tar ({exc}). Fix: pass "
            f"WebDataset .tar shards (compressed .tar.gz cannot be read at an offset: "
            f"decompress them once)."
        ) from None
    # A sample's members by key, wherever they lie (a tar written without --sort=name
    # scatters them); a member met twice is refused, where the last one was kept and a
    # sample went missing without a word (WebDataset refuses two in a row as well).
    samples: dict[str, dict[str, tarfile.TarInfo]] = {}
    with tar:
        try:
            for member in tar:
                if member.isfile():
                    if member.issparse():  # (its holes would be read as the sample's bytes)
                        raise ArgumentError(
                            f"{member.name!r} of {path!r} is a sparse tar member, whose "
                            f"bytes are not stored where a sample's are read, and whose "
                            f"holes expand to its full size ({member.size:,} bytes) when "
                            f"read. Fix: rewrite the shard without --sparse (WebDataset's "
                            f"writers never make one).")
                    key, ext = split_name(member.name)
                    members = samples.setdefault(key, {})
                    if ext in members:
                        raise ArgumentError(
                            f"sample {list(samples).index(key)} (key {key!r}) of {path!r} "
                            f"holds {member.name!r} twice: which one is the sample's is "
                            f"unknown. Fix: rewrite the shard with one member per extension "
                            f"and key.")
                    members[ext] = member
        except tarfile.TarError as exc:
            raise ArgumentError(
                f"`tar_files`: {path!r} is cut short or corrupt after {len(samples)} "
                f"sample(s) ({exc}). Fix: rewrite the shard, or leave it out."
            ) from None
        offsets, sizes, labels = [], [], []
        for number, (key, members) in enumerate(samples.items()):
            image = next((members[e] for e in image_exts if e in members), None)
            where = f"sample {number} (key {key!r}) of {path!r}"
            if image is None:
                raise ArgumentError(
                    f"{where} has no image member with `image_ext` {list(image_exts)}; its "
                    f"members are {sorted(members)}. Fix: pass `image_ext=` the extension "
                    f"its images have (several: a list), or remove the sample."
                )
            if image.size > _IMAGE_BYTES:
                raise ArgumentError(
                    f"The image member of {where} holds {image.size:,} bytes, past the "
                    f"{_IMAGE_BYTES:,} an image member may. Fix: rewrite the shard, or "
                    f"leave it out.")
            offsets.append(image.offset_data)
            sizes.append(image.size)
            if label_ext is None:
                continue
            label = members.get(label_ext)
            if label is None:
                raise ArgumentError(
                    f"{where} has no label member {key + '.' + label_ext!r} (`label_ext`="
                    f"{label_ext!r}); its members are {sorted(members)}. Fix: add the label "
                    f"to the shard, pass `label_ext=` the extension its labels have, or "
                    f"`label_ext=None` for no labels."
                )
            if label.size > _LABEL_BYTES:  # read whole, as every label is, at indexing
                raise ArgumentError(
                    f"The label member of {where} (`label_ext`={label_ext!r}) holds "
                    f"{label.size:,} bytes, where a label is a class index or name. Fix: "
                    f"pass `label_ext=` the extension of the labels, or rewrite the shard.")
            reader = tar.extractfile(label)
            assert reader is not None  # a regular file
            labels.append(_label_value(reader.read(), where, label_ext))
    return offsets, sizes, labels


_LABEL_BYTES = 64 * 1024  # the most a label member may hold (a class index or name)


def _label_value(raw: bytes, where: str, label_ext: str) -> Any:
    """A label member's text: an int (a class index, WebDataset's ``.cls``) or a class name."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ArgumentError(
            f"The label member of {where} (`label_ext`={label_ext!r}) is not UTF-8 text. "
            f"Fix: write the class index or name as text."
        ) from None
    try:
        return int(text)
    except ValueError:
        return text
