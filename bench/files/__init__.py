"""The image-folder benchmark, ``python -m bench.files``: shmaug against tf.data, Grain and
PyTorch on folders of JPEGs (``peers``, measured by ``child``); ``memory`` is
``python -m bench.files.memory``, 1.28 million files.
"""
