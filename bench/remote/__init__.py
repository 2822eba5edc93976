"""The object-storage benchmark, ``python -m bench.remote``: shmaug, tf.data and torch +
webdataset through a real S3 server behind a delaying proxy (``data``, ``peers``); ``cost`` is
``python -m bench.remote.cost``, the CPU of one GET.
"""
