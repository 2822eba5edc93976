"""Keras' torch backend copies every numpy array it is handed (``np.array(x)`` in its
``convert_to_tensor``); ``shmaug.Sequence`` hands Keras' own reads torch tensors over the
batch's memory instead (``shmaug/keras/_batches.py``), which Keras takes as they are. Other
backends, and a batch asked for by hand, get numpy arrays. That no lent slot is overwritten
while such a tensor lives is ``test_poisoned_slots``' test, on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._helpers import needs_keras

pytestmark = needs_keras


@pytest.mark.parametrize("output_dtype", [None, "bfloat16"])
def test_keras_reads_the_backends_own_arrays_and_a_hand_ask_reads_numpy(output_dtype) -> None:
    """bfloat16 (ml_dtypes'), which torch.from_numpy refuses, went to Keras' own conversion
    on torch: 20 ms a 64x224x224x3 batch, where its bits are shared as a bfloat16 tensor."""
    import keras
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    import shmaug
    from tests import _fit

    x, y = _fit.data(32)  # 8 batches: past the first two, lent from their slots
    torch_backend = keras.backend.backend() == "torch"
    made = x if output_dtype is None else x.astype(output_dtype)  # (the values cast)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.same, workers=2, seed=0,
                         shuffle=False, max_queue_size=4, output_dtype=output_dtype) as seq:
        adapter = PyDatasetAdapter(seq, shuffle=False)
        ring = seq.loader._run.ring.view
        start, stop = ring.ctypes.data, ring.ctypes.data + ring.nbytes
        rows, labels, in_ring = [], [], 0
        adapter.on_epoch_begin()
        for xb, yb in (adapter.get_torch_dataloader() if torch_backend
                       else adapter.get_numpy_iterator()):
            if torch_backend:
                import torch
                from keras.src.backend.torch.core import convert_to_tensor

                assert isinstance(xb, torch.Tensor) and convert_to_tensor(xb) is xb
                in_ring += start <= xb.data_ptr() < stop  # the slot's memory, not a copy
                if output_dtype == "bfloat16":
                    assert xb.dtype == torch.bfloat16
                    xb = xb.view(torch.int16).numpy().view(made.dtype)
                else:
                    xb = xb.numpy()
                yb = yb.numpy()
            else:
                assert isinstance(xb, np.ndarray)
            rows.append(xb.copy())
            labels.append(yb.copy())
            del xb, yb  # as Keras does after its step: the slot goes back
        adapter.on_epoch_end()
        if torch_backend:
            assert in_ring >= len(rows) - 2  # all but the first two, which are copies
        np.testing.assert_array_equal(np.concatenate(rows), made)
        np.testing.assert_array_equal(np.concatenate(labels), y)
        by_hand, _ = seq[0]
        assert isinstance(by_hand, np.ndarray)
        np.testing.assert_array_equal(by_hand, made[:_fit.BATCH])
