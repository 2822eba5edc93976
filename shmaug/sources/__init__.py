"""Sample sources: where the engine's workers read sample i from, besides an array.

Public: ``ImageFiles`` (``shmaug.sources.files``), ``pack`` (``shmaug.sources.pack``) and
``render_glyphs`` (``shmaug.sources.glyphs``, the synthetic data of the demo and examples).
Internal: ``_paths`` (the path table in shared memory), ``_folders`` (listing and labels),
``_reader`` (the worker-side read) and ``_decode`` (decode and resize).

A source is random access: a length and ``load(i)``, run in a worker. Whatever a worker
needs to find sample i is one flat table in the loader's shared memory, so a worker's memory
does not grow with the number of samples. Sources import the engine's store; the engine never
imports a source.
"""

from .files import ImageFiles
from .glyphs import render_glyphs
from .pack import pack

__all__ = ["ImageFiles", "pack", "render_glyphs"]
