"""The record-format benchmark, ``python -m bench.records``: the same JPEGs in TFRecord,
ArrayRecord, a Hugging Face dataset and WebDataset, read by shmaug and by each format's own
reader (``peers``, measured by ``bench.files.child``); ``index`` is
``python -m bench.records.index``, 1.28 million records.
"""
