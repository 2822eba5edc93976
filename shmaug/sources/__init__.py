"""Sample sources: where the engine's workers read sample i from, besides an array.

Public: ``ImageFiles`` (``shmaug.sources.files``), ``ImageRecords`` (``shmaug.sources.records``:
TFRecord, TFDS, ArrayRecord, Hugging Face and WebDataset shards), ``pack``
(``shmaug.sources.pack``) and ``render_glyphs`` (``shmaug.sources.glyphs``, the synthetic data
of the demo and examples). Internal: ``_paths`` (the path table in shared memory), ``_folders``
(listing and labels), ``_reader`` (the worker-side read), ``_decode`` (decode and resize),
``_options`` (``DecodeSettings`` and the protocol both image sources share), ``_index`` (the
record table in shared memory), ``_formats`` (the record-format protocol and registry), one
module per record format holding its scan and its read (``_tfrecord``, ``_array_record``;
``_tar`` and ``_arrow`` scan records that are the image bytes), ``_example``
(``tf.train.Example``), ``_tfds`` (TFDS metadata), ``_shards`` (finding shards), ``_bucket``
(image files in a bucket, a task's objects fetched together) and the object-storage layer,
one module per job (``_urls``, ``_secrets``, ``_client``, ``_failures``, ``_ahead``,
``_spans``, ``_round_trip``, ``_remote_settings``), which the sources reach through
``_remote``.

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
