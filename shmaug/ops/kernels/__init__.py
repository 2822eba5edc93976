"""The pixel work: pure functions of (array, drawn parameters) -> array. Nothing here draws a
random number or checks a user's argument; the ops do both, then call a kernel.

- ``cv``: OpenCV kernels (warps, filters, noise, erasing), the default backend;
- ``pil``: PIL kernels, the same functions for PIL's exact look (``backend="pil"``);
- ``colour``: colour kernels (hue, saturation, equalize, JPEG, ...).
"""
