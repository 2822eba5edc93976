"""Sample sources: where the engine's workers read sample i from, besides an array.

Public: ``ImageFiles`` (``shmaug.sources.files``), ``ImageRecords`` (``shmaug.sources.records``:
TFRecord and WebDataset shards), ``pack`` (``shmaug.sources.pack``) and
``render_glyphs`` (``shmaug.sources.glyphs``, the synthetic data of the demo and examples).
Internal: ``_paths`` (the path table in shared memory), ``_folders`` (listing and labels),
``_reader`` (the worker-side read), ``_decode`` (decode and resize), ``_options`` (the settings
and protocol both image sources share), ``_index`` (the record table in shared memory),
``_tfrecord`` / ``_example`` (TFRecord framing and ``tf.train.Example``) and ``_tar``
(WebDataset shards).

A source is random access: a length and ``load(i)``, run in a worker. Whatever a worker
needs to find sample i is one flat table in the loader's shared memory, so a worker's memory
does not grow with the number of samples. Sources import the engine's store; the engine never
imports a source.
"""

from .files import ImageFiles
from .records import ImageRecords
from .glyphs import render_glyphs
from .pack import pack

__all__ = ["ImageFiles", "ImageRecords", "pack", "render_glyphs"]
