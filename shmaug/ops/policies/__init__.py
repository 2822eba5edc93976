"""Augmentation policies, as torchvision v2 draws them.

- ``augment``: ``rand_augment``, ``trivial_augment_wide``, ``auto_augment`` and ``aug_mix``;
- ``_space``: the operations they choose among, and their magnitude tables.
"""
