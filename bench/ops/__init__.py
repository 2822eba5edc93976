"""The ops benchmark, ``python -m bench.ops``: microseconds per image for every registered op,
against PIL, numpy and albumentations (``albumentations_twins``); ``run`` drives it.
"""
