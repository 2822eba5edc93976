"""Augmentation code from elsewhere, run by shmaug's workers as ops.

- ``keras_layers``: ``from_keras``: Keras preprocessing layers read as shmaug ops;
- ``albumentations``: ``from_albumentations``: an albumentations pipeline, targets included;
- ``legacy``: ``from_pil`` / ``from_array``: legacy functions, unchanged, seeded per sample.
"""
