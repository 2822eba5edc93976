"""The object-storage benchmark, ``python -m bench.remote``: shmaug (with and without its disk
cache), MosaicML Streaming, litdata, tf.data and torch + webdataset through nginx or moto's S3
server behind a delaying, counting proxy (``serve``, ``data``, ``peers``); ``cost`` is
``python -m bench.remote.cost``, the CPU of one GET per client.
"""
