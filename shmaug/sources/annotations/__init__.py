"""Detection and segmentation targets where users keep them, read into ``(files, y)``: an
``ImageFiles`` (or ``ImageRecords``) over the images and ``y`` in Keras' layout, boxes as
``{"boxes": (N, max_boxes, 4), "labels": (N, max_boxes)}`` padded with -1, masks as
``segmentation_masks`` (or per box, ``masks``), which a ``Loader`` or ``Sequence`` takes as
it is.

- ``coco``: ``from_coco``, COCO-format JSON (``instances_*.json``) over an image folder;
- ``voc``: ``from_voc``, a Pascal VOC folder of XML annotations over its ``JPEGImages``;
- ``segmentation``: ``from_segmentation``, an images folder beside a masks folder, paired by
  stem;
- ``coco_masks``: COCO's polygons and RLEs in one shared table, drawn by the workers
  (``from_coco(masks=...)``);
- ``tf_od``: ``from_tf_object_detection``, TF Object Detection API TFRecords, boxes read in the
  records' index scan;
- ``hf_objects``: ``from_huggingface_detection``, a Hugging Face dataset's ``objects`` column
  (pyarrow);
- ``masks``: ``MaskFiles``, mask files as a target the workers decode (class ids kept, resized
  by nearest neighbour);
- ``_boxes``: what the box readers share: the settings they refuse, the image sizes, and the boxes
  clipped, scaled to ``image_size``, written in the ``bounding_box_format`` asked and padded.

The tables are read once, in the main process; the workers get paths (the ``ImageFiles``'
shared table) and the engine's targets. Only the masks run in a worker: decoded
(``MaskFiles``) or drawn (``coco_masks``) beside their image, from tables in shared memory.
"""

from .coco import from_coco
from .hf_objects import from_huggingface_detection
from .masks import MaskFiles
from .segmentation import from_segmentation
from .tf_od import from_tf_object_detection
from .voc import from_voc

__all__ = ["MaskFiles", "from_coco", "from_huggingface_detection", "from_segmentation",
           "from_tf_object_detection", "from_voc"]
