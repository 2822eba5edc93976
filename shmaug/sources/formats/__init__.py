"""Record files: what a record format is to shmaug, one module per format (its scan in the
main process and its read in a worker), and the table of every record.

- ``registry``: ``RecordFormat``, the protocol of a format's read, and ``FORMATS``;
- ``table``: ``RecordTable``: shard, offset and size of every record, in one flat block;
- ``shards``: finding shards (globs, braces, URLs), the optional libraries, the index cache;
- ``tfrecord``: TFRecord files without TensorFlow: framing, CRCs, the scan and the read;
- ``example``: ``tf.train.Example`` read by hand (the TF Object Detection reader reads its
  boxes with it too);
- ``array_record``: ArrayRecord files of Examples, read through their own reader;
- ``tfds``: TensorFlow Datasets' prepared shards, by name and split;
- ``tar``: WebDataset tar shards: which members make a sample;
- ``arrow``: Hugging Face datasets: each image's bytes in the Arrow files.
"""
