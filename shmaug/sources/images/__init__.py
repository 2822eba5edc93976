"""The image-file path: folders listed as Keras lists them, paths in one flat table, and the
workers' read of sample i (bytes, decode, resize), shared by ``ImageFiles`` and
``ImageRecords``.

- ``folders``: Keras' folder conventions: which files a directory holds, their labels, the
  split;
- ``paths``: ``PathTable``: millions of paths and class indices in one flat block;
- ``reader``: what a source runs in a worker: sample i to pixels, standing in on error;
- ``decode``: one image's bytes to pixels in the requested colour mode and size, or one
  window of them resampled (a decode-time crop);
- ``headers``: an image's stored size read from its header, before it is decoded (the
  pixel limit that refuses decompression bombs);
- ``turbo``: libjpeg-turbo's TurboJPEG 3 through ctypes: a JPEG's window decoded alone;
- ``settings``: ``DecodeSettings``, the settings both image sources share, and their protocol.
"""
