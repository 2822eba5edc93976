"""The built-in ops, by what they do to an image: each samples its parameters from ``rng``,
then calls a kernel (``kernels``), and is registered by name (``core.register``).

Ops that move pixels:

- ``geometric``: flips, rotate, shear, scale and translate, perspective, elastic, sine warp,
  resize, crop, resized crop;
- ``framing``: Keras' framing ops: zoom, zoom out, translation, centre crop;
- ``windows``: the reference recipes' crops (random resized crop, centre resized crop), which
  also take a photo not yet decoded and decode only their window;
- ``warp``: what those share: the warp by a matrix, the matrices, sizes in pixels.

Ops that change values in place:

- ``colour``: Keras' colour layers (hue, saturation, color jitter, grayscale, ...);
- ``tone``: brightness and contrast, gamma;
- ``filters``: gaussian blur, sharpen, smooth;
- ``noise``: gaussian noise, JPEG re-compression;
- ``erasing``: cutout, random erasing.

- ``checks``: the parameter checks the ops register, run when an ``Op`` is built.
"""
