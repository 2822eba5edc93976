"""Sample sources: where the engine's workers read sample i from, besides an array.

Public:

- ``files``: ``ImageFiles``, image files in folders, path lists and DataFrames;
- ``records``: ``ImageRecords``, images inside TFRecord, TFDS, ArrayRecord, Hugging Face and
  WebDataset shards;
- ``pack``: ``pack``, image files decoded once into a memory-mappable ``.npy``;
- ``glyphs``: ``render_glyphs``, the synthetic data of the demo and examples;
- ``annotations``: ``from_coco``, ``from_voc``: detection sets (COCO JSON, Pascal VOC XML)
  read into ``(files, y)``, an ``ImageFiles`` and its boxes in Keras' layout;
  ``from_tf_object_detection``, ``from_huggingface_detection``: the same from record shards
  (``(records, y)``); ``from_segmentation``: an images folder and a masks folder, the masks a
  ``MaskFiles`` (a target the workers decode).

Internal, by stage:

- ``images``: the image-file path: folders, the path table, the worker-side read, decoding;
- ``formats``: record files: one module per format (its scan and its read), the record table;
- ``remote``: object storage: the client, its transport and error rules, the look-ahead;
- ``cache``: the disk cache of a bucket source, planned from the known order.

A source is random access: a length and ``load(i)``, run in a worker. Whatever a worker
needs to find sample i is one flat table in the loader's shared memory, so a worker's memory
does not grow with the number of samples. Sources use ``shmaug.memory`` for those tables; the
engine never imports a source.
"""

from .files import ImageFiles
from .records import ImageRecords
from .glyphs import render_glyphs
from .pack import pack
from .annotations import (MaskFiles, from_coco, from_huggingface_detection, from_segmentation,
                          from_tf_object_detection, from_voc)

__all__ = ["ImageFiles", "ImageRecords", "MaskFiles", "from_coco", "from_huggingface_detection",
           "from_segmentation", "from_tf_object_detection", "from_voc", "pack", "render_glyphs"]
