"""Detection annotations where users keep them, read into ``(files, y)``: an ``ImageFiles``
over the image folder and ``y`` in Keras' box layout, ``{"boxes": (N, max_boxes, 4),
"labels": (N, max_boxes)}`` padded with -1, which a ``Loader`` or ``Sequence`` takes as it is.

- ``coco``: ``from_coco``, COCO-format JSON (``instances_*.json``) over an image folder;
- ``voc``: ``from_voc``, a Pascal VOC folder of XML annotations over its ``JPEGImages``;
- ``segmentation``: ``from_segmentation``, an images folder beside a masks folder, paired by
  stem;
- ``masks``: ``MaskFiles``, mask files as a target the workers decode (class ids kept, resized
  by nearest neighbour);
- ``_boxes``: what the box readers share: the settings they refuse, the image sizes, and the boxes
  clipped, scaled to ``image_size``, written in the ``bounding_box_format`` asked and padded.

The tables are read once, in the main process; the workers get paths (the ``ImageFiles``'
shared table) and the engine's targets, so nothing here runs in a worker.
"""

from .coco import from_coco
from .masks import MaskFiles
from .segmentation import from_segmentation
from .voc import from_voc

__all__ = ["MaskFiles", "from_coco", "from_segmentation", "from_voc"]
