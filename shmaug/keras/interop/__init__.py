"""A ``Sequence`` as another library's dataset, for models whose ``fit`` takes that and no
``PyDataset`` (keras-hub's task models). Imported only when such a form is asked for; each
module imports its library.

- ``grain_batches``: ``Sequence.to_grain``, the batches as a Grain ``MapDataset``.

(``to_tf_dataset`` stays in the facade's ``_tf_data``: it shares the shard bookkeeping of
``_distribution``, which a sub-package may not reach into.)
"""
