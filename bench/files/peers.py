"""The contenders of ``bench.files``: reading a folder of JPEGs as each library's users do.

Every contender reads the same files (in the same order, no shuffle), delivers uint8 batches of
224x224x3 with each file's id as its target (for the exactly-once check), and applies the same
augmentation where its library has it: a random horizontal flip (p=0.5), a rotation by a
uniform -15..15 degrees (bilinear, black corners) and a Gaussian blur of sigma uniform 0.5..1.5.

- ``shmaug`` / ``shmaug_full``: ``shmaug.Loader`` over ``ImageFiles`` (OpenCV decode in the
  workers, fork), with ``reduced_decode`` on (the default) and off (the decode before it);
  ops ``Maybe(hflip)``, ``rotate``, ``gaussian_blur``.
- ``tf``: tf.data as its guide writes it: ``from_tensor_slices(paths)``, ``map(read_file +
  tf.io.decode_jpeg + tf.image.resize + random flip + rotation (the projective transform
  Keras' ``RandomRotation`` uses) + separable Gaussian blur, num_parallel_calls=AUTOTUNE)``,
  ``batch``, ``prefetch(AUTOTUNE)``; C++ kernels, no GIL.
- ``grain`` / ``torch``: the suite's Grain (``MapDataset`` + ``mp_prefetch``, spawn) and
  PyTorch ``DataLoader`` (fork) contenders (``bench.suite.peers``) over the paths, each sample made
  by ``pil_sample``: PIL open + convert + resize, then PIL's flip, rotate and GaussianBlur.

``build`` raises ImportError when a contender's library is missing (reported as skipped).
Nothing here imports TensorFlow, Grain or torch until their contender is built.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from bench.suite.peers._base import Base
from bench.suite.peers.shmaug_engine import ShmaugLoader

SIZE = 224
FLIP_P = 0.5
DEGREES = 15.0
SIGMA = (0.5, 1.5)

LABELS = {
    "shmaug": "shmaug ImageFiles (reduced decode)",
    "shmaug_full": "shmaug ImageFiles, reduced_decode=False (before)",
    "tf": "tf.data native (decode_jpeg + tf.image, AUTOTUNE)",
    "grain": "Grain MapDataset + PIL (spawn)",
    "torch": "PyTorch DataLoader + PIL (fork)",
}


def pil_sample(path: Any, rng: np.random.Generator) -> np.ndarray:
    """One file as a PIL user makes it (torchvision's ImageFolder loader, then the ops); a
    file object (a record's JPEG bytes) opens the same way."""
    from PIL import Image

    with Image.open(path if hasattr(path, "read") else str(path)) as opened:
        return pil_ops(opened, rng)


def pil_ops(opened: Any, rng: np.random.Generator) -> np.ndarray:
    """An opened PIL image to 224x224 RGB, then PIL's flip, rotate and GaussianBlur (also the
    ops of ``bench.records.peers``' Hugging Face and WebDataset peers, whose libraries decode)."""
    from PIL import Image, ImageFilter

    image = opened.convert("RGB").resize((SIZE, SIZE), Image.Resampling.BILINEAR)
    if rng.random() < FLIP_P:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = image.rotate(float(rng.uniform(-DEGREES, DEGREES)), Image.Resampling.BILINEAR)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(*SIGMA))))
    return np.asarray(image)


def shmaug_augment() -> Any:
    import shmaug

    return shmaug.Compose([shmaug.Maybe("hflip", p=FLIP_P),
                           shmaug.get("rotate").bind(degrees=(-DEGREES, DEGREES)),
                           shmaug.get("gaussian_blur").bind(sigma=SIGMA)])


class ShmaugFiles(ShmaugLoader):
    """``shmaug.Loader`` over ``ImageFiles.from_paths`` (workers decode, resize, augment)."""

    reduced = True

    def source(self) -> Any:
        import shmaug

        return shmaug.ImageFiles.from_paths(list(self.x), image_size=(SIZE, SIZE),
                                            reduced_decode=self.reduced)


class ShmaugFull(ShmaugFiles):
    reduced = False


def _tf_sample(path: Any, i: Any) -> Any:
    import tensorflow as tf

    return tf_augment(tf.io.read_file(path), i)


def tf_augment(encoded: Any, i: Any) -> Any:
    """tf.data's decode + resize + flip + rotation + blur of one JPEG's bytes (also
    ``bench.records.peers``')."""
    import math

    import tensorflow as tf

    image = tf.io.decode_jpeg(encoded, channels=3)
    image = tf.image.resize(image, (SIZE, SIZE))  # float32, bilinear
    image = tf.image.random_flip_left_right(image)
    angle = tf.random.uniform([], -DEGREES, DEGREES) * (math.pi / 180)
    cos, sin, side = tf.cos(angle), tf.sin(angle), float(SIZE - 1)
    offset_x = (side - (cos * side - sin * side)) / 2  # as keras.layers.RandomRotation
    offset_y = (side - (sin * side + cos * side)) / 2
    transform = tf.stack([cos, -sin, offset_x, sin, cos, offset_y, 0.0, 0.0])[None]
    image = tf.raw_ops.ImageProjectiveTransformV3(
        images=image[None], transforms=transform, output_shape=[SIZE, SIZE], fill_value=0.0,
        interpolation="BILINEAR", fill_mode="CONSTANT")
    sigma = tf.random.uniform([], *SIGMA)
    taps = tf.range(-5.0, 6.0)  # covers 3 sigma of the largest blur
    kernel = tf.exp(-(taps ** 2) / (2 * sigma ** 2))
    kernel = tf.tile((kernel / tf.reduce_sum(kernel))[:, None, None, None], [1, 1, 3, 1])
    image = tf.pad(image, [[0, 0], [5, 5], [5, 5], [0, 0]], mode="REFLECT")
    image = tf.nn.depthwise_conv2d(image, kernel, [1, 1, 1, 1], "VALID")
    image = tf.nn.depthwise_conv2d(image, tf.transpose(kernel, [1, 0, 2, 3]), [1, 1, 1, 1], "VALID")
    return tf.cast(tf.clip_by_value(tf.round(image[0]), 0, 255), tf.uint8), i


class TfFiles(Base):
    """tf.data's own pipeline: C++ decode and ops in a parallel ``map``."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import tensorflow as tf

        ds = tf.data.Dataset.from_tensor_slices((list(self.x), self.y))
        self.ds = ds.map(_tf_sample, num_parallel_calls=tf.data.AUTOTUNE).batch(
            self.bs).prefetch(tf.data.AUTOTUNE)

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()


def build(name: str, paths: np.ndarray, ids: np.ndarray, bs: int, workers: int) -> Base:
    """Contender ``name`` over ``paths``; raises ImportError when its library is missing."""
    if name in ("shmaug", "shmaug_full"):
        cls = ShmaugFiles if name == "shmaug" else ShmaugFull
        return cls(paths, ids, bs, shmaug_augment(), np.uint8, workers, "fork")
    if name == "tf":
        return TfFiles(paths, ids, bs, None, np.uint8, workers, None)
    if name == "grain":
        from bench.suite.peers.grain_loader import Grain

        return Grain(paths, ids, bs, pil_sample, np.uint8, workers, "spawn")
    if name == "torch":
        from bench.suite.peers.torch_loader import Torch

        return Torch(paths, ids, bs, pil_sample, np.uint8, workers, "fork")
    raise KeyError(f"no contender {name!r}; known: {sorted(LABELS)}")
