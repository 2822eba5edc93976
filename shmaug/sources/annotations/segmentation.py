"""A segmentation set as it is usually kept: a folder of images beside a folder of masks,
paired by file stem (``images/a/0001.jpg`` with ``masks/a/0001.png``), locally or in a bucket.

The folders are listed once, in the main process; the images become an ``ImageFiles`` and the
masks a ``MaskFiles`` (``masks.py``), both decoded in the workers. Pairing is checked here,
before anything starts: an image without a mask, a mask without an image, two files of one
stem and (locally) a mask of another size than its image are each refused, naming the files.
``ids`` (a split file or a list of stems, as ``from_voc``'s) keeps a split's pairs alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any, Literal, overload

from ..files import ImageFiles
from ..images import folders as F
from ..images.settings import DEFAULT_IMAGE_SIZE, image_size_of
from ..remote import bucket as B
from ..remote import protocol_of
from ...errors import ArgumentError, got
from .masks import MaskFiles, check_pair_sizes
from .voc import read_ids

log = logging.getLogger(__name__)
UNPAIRED = ("raise", "drop")
Pair = tuple[ImageFiles, dict[str, MaskFiles]]  # (files, {"segmentation_masks": masks})


@overload
def from_segmentation(
    images: str | os.PathLike[str], masks: str | os.PathLike[str], *,
    ids: str | os.PathLike[str] | Sequence[str] | None = ...,
    image_size: tuple[int, int] | None = ..., mask_suffix: str = ..., image_suffix: str = ...,
    unpaired: str = ..., check_sizes: bool = ..., color_mode: str | None = ...,
    interpolation: str = ..., reduced_decode: bool = ..., dtype: str = ...,
    storage_options: dict[str, Any] | None = ...,
    cache_dir: str | os.PathLike[str] | None = ..., cache_limit: int | str | None = ...,
    validation_split: float | None = ..., subset: Literal["both"], seed: int | None = ...,
) -> tuple[Pair, Pair]: ...


@overload
def from_segmentation(
    images: str | os.PathLike[str], masks: str | os.PathLike[str], *,
    ids: str | os.PathLike[str] | Sequence[str] | None = ...,
    image_size: tuple[int, int] | None = ..., mask_suffix: str = ..., image_suffix: str = ...,
    unpaired: str = ..., check_sizes: bool = ..., color_mode: str | None = ...,
    interpolation: str = ..., reduced_decode: bool = ..., dtype: str = ...,
    storage_options: dict[str, Any] | None = ...,
    cache_dir: str | os.PathLike[str] | None = ..., cache_limit: int | str | None = ...,
    validation_split: float | None = ...,
    subset: Literal["training", "validation"] | None = ..., seed: int | None = ...,
) -> Pair: ...


def from_segmentation(
    images: str | os.PathLike[str], masks: str | os.PathLike[str], *,
    ids: str | os.PathLike[str] | Sequence[str] | None = None,
    image_size: tuple[int, int] | None = DEFAULT_IMAGE_SIZE, mask_suffix: str = "",
    image_suffix: str = "", unpaired: str = "raise", check_sizes: bool = True,
    color_mode: str | None = "rgb", interpolation: str = "bilinear", reduced_decode: bool = True,
    dtype: str = "uint8", storage_options: dict[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None, cache_limit: int | str | None = None,
    validation_split: float | None = None, subset: str | None = None, seed: int | None = None,
) -> Pair | tuple[Pair, Pair]:
    """An images folder and a masks folder as ``(files, y)`` for ``shmaug.Loader`` /
    ``shmaug.Sequence``: ``y = {"segmentation_masks": MaskFiles}``, Keras' name, so a batch's
    masks are ``(batch, height, width, 1)`` class ids, decoded in the workers and moved with
    their images by the pipeline.

    Images are every image file under ``images`` (searched recursively, in Keras' order:
    folders by path, files by name); each pairs with the mask of the same relative path and
    stem under ``masks``, of any image extension (PNG keeps ids exactly; a palette PNG's ids
    are its indices).

    Args:
        images: the images folder (or a bucket URL, ``"s3://bucket/images/"``).
        masks: the masks folder (a URL of the same bucket for a bucket's images).
        ids: which pairs, in order, as ``from_voc``'s: a split file of one stem per line
            (VOC's ``ImageSets/Segmentation/train.txt``) or a list of stems (relative,
            without the extension and suffix); each must have its image and its mask
            (``unpaired="drop"`` leaves out those without). Files outside the split are
            left alone, paired or not. None: every pair of the folders.
        image_size: ``(height, width)`` both are resized to (the masks by nearest
            neighbour); None keeps each at its own size (then crop to one in ``augment``).
        mask_suffix: what ends a mask's stem, past the stem it shares with its image
            (``"_mask"`` pairs ``0001.jpg`` with ``0001_mask.png``); given, the files under
            ``masks`` whose stems do not end so are not masks, and are left alone.
        image_suffix: the same for the images (Cityscapes: ``"_leftImg8bit"`` beside
            ``mask_suffix="_gtFine_labelIds"``).
        unpaired: "raise" (default) refuses an image without a mask and a mask without an
            image, naming them; "drop" leaves them out (and logs how many).
        check_sizes: read each pair's headers and refuse a mask of another size than its
            image (it would be stretched off its pixels); on a bucket it is not checked.
        color_mode: as ``ImageFiles.from_paths``.
        interpolation: the images' resize filter, as ``ImageFiles.from_paths``.
        reduced_decode: as ``ImageFiles.from_paths``.
        dtype: the images', as ``ImageFiles.from_paths``: "uint16" keeps a 16-bit PNG or TIFF
            (an X-ray, a CT slice) at 16 bits, where "uint8" (default) scales it to 8.
        storage_options: for a bucket, as ``ImageFiles.from_directory``.
        cache_dir: for a bucket, as ``ImageFiles.from_directory``.
        cache_limit: for a bucket, as ``ImageFiles.from_directory``.
        validation_split: with ``subset`` ("training", "validation", or "both" for the two)
            and ``seed``, the pairs of that subset, drawn as Keras'
            ``image_dataset_from_directory`` draws its split (the same seed, the same
            subsets, never overlapping).
        subset: as ``validation_split`` says.
        seed: as ``validation_split`` says.

    Returns:
        ``(files, {"segmentation_masks": masks})``, one mask per image, in the images' order;
        with ``subset="both"``, a ``(training, validation)`` tuple of two such pairs.

    Raises:
        ArgumentError: a folder that does not exist or holds no image, an unpaired file (with
            ``unpaired="raise"``), two files of one stem, a mask of another size than its
            image.

    Example:
        >>> files, y = from_segmentation("data/images", "data/masks", image_size=(256, 256))
        >>> train = shmaug.Sequence(files, y, batch_size=16, shuffle=True, augment=Compose(
        ...     [Maybe(Op("hflip")), Op("rotate", degrees=(-15, 15))]))
    """
    F.check_split_args(validation_split, subset, seed)
    if unpaired not in UNPAIRED:
        raise ArgumentError(f"`unpaired` must be one of {list(UNPAIRED)}; received "
                            f"{got(unpaired)}. Fix: 'raise' to refuse unpaired files, 'drop' "
                            f"to leave them out.")
    size = image_size_of(image_size)
    image_root, mask_root = os.fspath(images), os.fspath(masks)
    found = _stems("images", image_root, image_suffix, storage_options)
    by_stem = _stems("masks", mask_root, mask_suffix, storage_options)
    if ids is not None:  # the split's stems alone, in its order
        wanted = read_ids(ids, "ImageSets/Segmentation/<split>.txt", storage_options)
        lonely = [s for s in wanted if s not in found]  # (no image: named by its stem)
        orphans = [s for s in wanted if s in found and s not in by_stem]
        _refuse_outside(lonely, orphans, unpaired, image_root, mask_root)
        found = {s: found[s] for s in dict.fromkeys(wanted) if s in found}
        lonely = orphans = []
    else:
        lonely = [p for stem, p in found.items() if stem not in by_stem]
        orphans = [p for stem, p in by_stem.items() if stem not in found]
    if unpaired == "raise":
        _refuse_unpaired(lonely, "image", "mask", mask_root, mask_suffix)
        _refuse_unpaired(orphans, "mask", "image", image_root, image_suffix)
    elif lonely or orphans:
        log.info("from_segmentation: left out %d image(s) without a mask and %d mask(s) "
                 "without an image (unpaired='drop')", len(lonely), len(orphans))
    pairs = [(path, by_stem[stem]) for stem, path in found.items() if stem in by_stem]
    if not pairs:
        raise ArgumentError(
            f"No image under {image_root!r} has a mask under {mask_root!r} (stems compared "
            f"with mask_suffix={mask_suffix!r}, image_suffix={image_suffix!r}). Fix: check "
            f"the folders and the suffixes.")
    if check_sizes and protocol_of(image_root) is None:  # (a bucket's: a request each)
        check_pair_sizes(pairs)
    options: dict[str, Any] = dict(storage_options=storage_options, cache_dir=cache_dir,
                                   cache_limit=cache_limit)

    def made(rows: Any) -> Pair:
        chosen = [pairs[i] for i in rows]
        files = ImageFiles.from_paths([p for p, _ in chosen], image_size=size,
                                      color_mode=color_mode, interpolation=interpolation,
                                      label_mode=None, reduced_decode=reduced_decode,
                                      dtype=dtype, **options)
        masks = MaskFiles([m for _, m in chosen], size, check_sizes=False,  # (done above)
                          **options)
        return files, {"segmentation_masks": masks}

    if validation_split is None:
        return made(range(len(pairs)))
    training, validation = F.split(len(pairs), validation_split, int(seed))  # type: ignore[arg-type]
    if subset == "both":
        return made(training.tolist()), made(validation.tolist())
    return made((training if subset == "training" else validation).tolist())


def _stems(what: str, root: str, suffix: str, storage_options: Any) -> dict[str, str]:
    """Each image file under ``root`` by its relative stem, less ``suffix`` (given: only the
    files whose stems end so)."""
    remote = B.remote_for(root, storage_options)
    listing = B.listed(remote, root, None)
    if listing is None and not os.path.isdir(root):
        raise ArgumentError(f"`{what}` must be an existing folder; received {root!r}. Fix: "
                            f"pass the folder that holds the {what}.")
    base = root.rstrip("/") + "/" if listing is not None else os.path.join(root, "")
    out: dict[str, str] = {}
    for path in F.walk(root, False, True, listing):
        stem = os.path.splitext(path[len(base):])[0]
        if suffix and not stem.endswith(suffix):
            continue  # (Cityscapes keeps colour and instance files beside the ids)
        stem = stem[:len(stem) - len(suffix)]
        if stem in out:
            raise ArgumentError(
                f"{out[stem]!r} and {path!r} have one stem, so which is the pair of the "
                f"{'mask' if what == 'images' else 'image'} {stem!r} is unclear. Fix: keep "
                f"one file per stem in `{what}`.")
        out[stem] = path
    if not out:
        raise ArgumentError(f"`{what}` ({root!r}) holds no image file (extensions: "
                            f"{', '.join(F.EXTENSIONS)}). Fix: pass the folder of the {what}.")
    return out


def _refuse_outside(no_image: list[str], no_mask: list[str], unpaired: str,
                    image_root: str, mask_root: str) -> None:
    """The ids of a split without an image or a mask: refused, naming the first, or
    (``unpaired="drop"``) logged and left out."""
    for stems, what, root in ((no_image, "image", image_root), (no_mask, "mask", mask_root)):
        if not stems:
            continue
        if unpaired == "drop":
            log.info("from_segmentation: left out %d id(s) of `ids` without a %s under %r "
                     "(unpaired='drop')", len(stems), what, root)
            continue
        raise ArgumentError(
            f"{len(stems)} id(s) of `ids` have no {what} under {root!r}, e.g. {stems[0]!r}. "
            f"Fix: pass the split that goes with these folders (and check mask_suffix and "
            f"image_suffix), or unpaired='drop' to leave them out.")


def _refuse_unpaired(paths: list[str], what: str, other: str, where: str, suffix: str
                     ) -> None:
    if paths:
        named = f" with the suffix {suffix!r}" if suffix else ""
        raise ArgumentError(
            f"{len(paths)} {what}(s) have no {other} of the same stem{named} under {where!r}, "
            f"e.g. {paths[0]!r}. Fix: add the {other}s, remove the {what}s, check "
            f"`mask_suffix`, or pass unpaired='drop' to leave them out.")
