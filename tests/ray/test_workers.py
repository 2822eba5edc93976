"""Remote workers on a real Ray cluster (``conftest.cluster``): the same batches as a local
``Loader``, every sample once through a killed actor and a removed node, nothing left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import shmaug
from tests._helpers import assert_same_batches, running, shmaug_segments
from tests._ops import noisy
from tests.ray.conftest import ROOT

ray = pytest.importorskip("ray")
import shmaug.ray  # noqa: E402

pytestmark = pytest.mark.ray

N, BATCH = 96, 8


def remote(**kw):
    return shmaug.ray.Workers(nodes=2, cpus_per_node=1, lost_after_s=60, **kw)


def fleet_of(loader):
    return loader._run.pool._fleet


def data():
    rng = np.random.default_rng(7)
    return rng.integers(0, 256, (N, 12, 10, 3), dtype=np.uint8), np.arange(N)


def local_epochs(x, y, epochs, **kw):
    with shmaug.Loader(x, y, BATCH, noisy, workers=1, **kw) as loader:
        return [b for _ in range(epochs) for b in loader]


def gone(pids, timeout_s=15.0):
    """Whether every process in ``pids`` ended, and its shared memory with it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = running(pids)
        segments = set().union(*(shmaug_segments(p) for p in pids))
        if not alive and not segments:
            return True
        time.sleep(0.1)
    return False


def test_arrays_bit_identical_and_resume(cluster):
    x, y = data()
    expected = local_epochs(x, y, 2, seed=5, shuffle=True)
    with shmaug.Loader(x, y, BATCH, noisy, seed=5, shuffle=True, workers=remote()) as loader:
        got = [b for _ in range(2) for b in loader]
        assert_same_batches(got, expected)
        assert "shmaug.ray.Workers(nodes=2, cpus_per_node=1)" in repr(loader)
        assert loader.workers in (1, 2)  # the makers ready now (the second may still start)
        # in the dataset's order (evaluate), and resume mid-epoch from state_dict
        np.testing.assert_array_equal(loader.batch(3, epoch=1, in_order=True)[1], y[24:32])
        loader.epoch = 1
        it = iter(loader)
        for _ in range(4):
            next(it)
        state = loader.state_dict()
        pids = fleet_of(loader).pids()
    assert gone(pids), "a closed loader left a maker, a worker or shared memory behind"
    with shmaug.Loader(x, y, BATCH, noisy, seed=5, shuffle=True, workers=remote()) as again:
        again.load_state_dict(state)
        assert_same_batches(list(again), expected[len(expected) // 2 + 4:])


def test_image_folder_bit_identical(cluster, tmp_path):
    from PIL import Image
    rng = np.random.default_rng(3)
    for i in range(40):
        folder = tmp_path / f"class{i % 2}"
        folder.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (20 + i % 5, 24, 3), dtype=np.uint8)).save(
            folder / f"{i:03d}.png")
    _same_as_local(shmaug.ImageFiles.from_directory(tmp_path, image_size=(16, 16)), seed=1)


def test_a_killed_actor_loses_nothing(cluster):
    x, y = data()
    expected = local_epochs(x, y, 1, seed=2, shuffle=True)
    with shmaug.Loader(x, y, BATCH, noisy, seed=2, shuffle=True, workers=remote()) as loader:
        got = []
        for i, batch in enumerate(loader):
            got.append(batch)
            if i == 2:
                fleet = fleet_of(loader)
                victim = next(iter(fleet._live.values()))
                ray.kill(victim, no_restart=True)
        assert fleet._replaced >= 1 and loader.stats()["respawns"] == fleet._replaced
    assert_same_batches(got, expected)  # every sample once, in order, bit for bit
    seen = np.concatenate([b[1] for b in got])
    assert sorted(seen.tolist()) == list(range(N))


def test_a_removed_node_loses_nothing(cluster):
    x, y = data()
    expected = local_epochs(x, y, 1, seed=4, shuffle=True)
    worker_nodes = [n for n in cluster.worker_nodes]
    try:
        with shmaug.Loader(x, y, BATCH, noisy, seed=4, shuffle=True,
                           workers=remote()) as loader:
            got = []
            for i, batch in enumerate(loader):
                got.append(batch)
                if i == 2:
                    cluster.remove_node(worker_nodes[-1])
            assert fleet_of(loader)._replaced >= 1
        assert_same_batches(got, expected)
    finally:
        if len(cluster.worker_nodes) < 2:
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()


def test_ray_data_map_batches_same_streams(cluster):
    x, _ = data()
    with shmaug.Loader(x, None, N, noisy, seed=9, workers=0) as loader:
        loader.epoch = 2
        expected = loader.batch(0, epoch=2)[0]
    ds = ray.data.from_items([{"image": im, "id": i} for i, im in enumerate(x)])
    out = ds.map_batches(shmaug.ray.AugmentBatches(noisy, seed=9, epoch=2), batch_format="numpy",
                         batch_size=16).take_all()
    got = np.stack([row["image"] for row in sorted(out, key=lambda r: r["id"])])
    np.testing.assert_array_equal(got, expected)


def test_a_user_error_arrives_with_its_type(cluster):
    from tests._ops import MARKER, fail_on_marker
    x, y = data()
    x[13, 0, 0, 0] = MARKER
    with shmaug.Loader(x, y, BATCH, fail_on_marker, seed=0, workers=remote()) as loader:
        with pytest.raises(ValueError, match="bad pixel in this sample") as caught:
            for _ in loader:
                pass
    error = caught.value  # as a local pool raises it: the op, the sample, said once
    assert isinstance(error, shmaug.errors.WorkerError)
    assert (error.sample_index, error.op) == (13, "fail_on_marker"), str(error)
    assert str(error).count("raised by") == 1, str(error)


def _scripted(image, rng):
    return image


_scripted.__module__ = "__main__"  # as a def in the training script


def test_an_op_of_the_training_script_is_refused_before_a_maker_starts(cluster):
    x, y = data()
    with pytest.raises(shmaug.NotPicklableError, match=r"`augment` holds `_scripted`, defined "
                                                      r"in the script.*Fix: .*py_modules"):
        shmaug.Loader(x, y, BATCH, shmaug.ops.Compose([_scripted]), seed=0, workers=remote())


def child(*args, **kw):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, "-m", "tests.ray._child_ray", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, text=True, **kw)


def test_ctrl_c_leaves_nothing(cluster):
    proc = child("interrupt", cluster.address)
    try:
        pids = json.loads(proc.stdout.readline())["pids"]
        assert len(pids) == 2  # the maker and its one worker
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.stdout.close()
    assert gone(pids, 30), "Ctrl-C left a maker, a worker or shared memory behind"


def test_a_cluster_that_goes_away_is_an_error_in_bounded_time():
    proc = child("gone")
    out, _ = proc.communicate(timeout=240)
    report = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert report["error"] is not None and "Ray" in report["error"], report
    assert report["seconds"] < 60, report
    # Ray kills a lost node's processes together with shmaug's resource tracker there, so
    # its segments wait for the next shmaug store on that node, which sweeps them
    # (``memory._leftovers``): started here, on the one host of this cluster.
    subprocess.run([sys.executable, "-c", "from shmaug.memory.store import SharedStore; "
                    "SharedStore().close()"], check=True, timeout=120)
    assert gone(report["pids"], 30), "the lost cluster's makers left something behind"


@pytest.mark.keras
def test_fit_with_remote_workers(cluster):
    """Keras' fit on a Sequence whose workers are Ray actors: each Keras epoch is one whole
    shmaug epoch, the very batches a local run plans (on the CI's Keras backend)."""
    from tests import _fit
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    plan = _fit.Plan(x, seed=5, shuffle=True)
    try:
        with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.mark, seed=5,
                             shuffle=True, workers=remote()) as seq:
            model.fit(seq, epochs=2, verbose=0, callbacks=[_fit.EpochTag(log)])
        assert [plan.which_epoch(log.train[k]) for k in range(2)] == [0, 1]
    finally:
        plan.close()


def test_targets_the_workers_move_are_refused_with_the_fix(cluster):
    x, _ = data()
    masks = np.zeros((N, 12, 10), np.uint8)
    with pytest.raises(shmaug.errors.ArgumentError, match="local workers"):
        shmaug.Loader(x, {"segmentation_masks": masks}, BATCH,
                      shmaug.presets.light(), seed=0, workers=remote())


def test_tfrecord_shards_bit_identical(cluster, tmp_path):
    pytest.importorskip("tensorflow")  # (writes the shards)
    from tests import records_data as D
    records = shmaug.ImageRecords.from_tfrecord(D.write_tfrecords(tmp_path, 2, 20),
                                                image_size=D.SHAPE[:2])
    _same_as_local(records, seed=8)


def _same_as_local(x, seed: int) -> None:
    """An epoch of ``x`` from remote workers, bit for bit the local pool's."""
    kwargs = {"batch_size": 6, "augment": noisy, "seed": seed, "shuffle": True}
    with shmaug.Loader(x, workers=1, **kwargs) as local:
        expected = list(local)
    with shmaug.Loader(x, workers=remote(), **kwargs) as loader:
        assert_same_batches(list(loader), expected)


def test_a_mix_is_bit_identical(cluster):
    """MixUp / CutMix (the ImageNet recipe's): a maker failed to start, its labels left behind
    with the targets."""
    x, y = data()
    onehot = np.eye(4, dtype=np.float32)[y % 4]
    kwargs = {"mix": shmaug.ops.Mix(mixup_alpha=0.8, cutmix_alpha=1.0), "seed": 2,
              "shuffle": True}
    expected = local_epochs(x, onehot, 2, **kwargs)
    with shmaug.Loader(x, onehot, BATCH, noisy, workers=remote(), **kwargs) as loader:
        assert_same_batches([b for _ in range(2) for b in loader], expected)


@pytest.mark.keras
def test_a_sequences_mix_with_other_inputs_and_weights_is_the_local_ones(cluster):
    """Only the labels a mix reads go to the makers (a Sequence's other inputs and weights
    stay with the trainer, which gathers them)."""
    x, y = data()
    meta = np.random.default_rng(1).random((N, 7)).astype(np.float32)
    kwargs = {"batch_size": BATCH, "mix": shmaug.ops.Mix(mixup_alpha=0.8), "shuffle": True,
              "seed": 0, "image_key": "image", "augment": noisy,
              "sample_weight": np.arange(N, dtype=np.float32)}
    onehot = np.eye(4, dtype=np.float32)[y % 4]
    with shmaug.Sequence({"image": x, "meta": meta}, onehot, workers=remote(), **kwargs) as seq, \
            shmaug.Sequence({"image": x, "meta": meta}, onehot, workers=1, **kwargs) as local:
        for i in range(len(local)):
            (got_x, got_y, got_w), (want_x, want_y, want_w) = seq[i], local[i]
            for name in ("image", "meta"):
                np.testing.assert_array_equal(got_x[name], want_x[name])
            np.testing.assert_array_equal(got_y, want_y)
            np.testing.assert_array_equal(got_w, want_w)
