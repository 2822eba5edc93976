"""Ops that draw from torch's global generator (torchvision's transforms do): seeded per sample
as ``random`` and ``np.random`` are, so batches are the same for any worker count and start
method, and no two workers repeat each other's draws; a worker runs torch on one thread; a
tensor returned is refused with a fix that keeps its dtype. Runs where torch is installed (CI's
torch venv: marker ``torch``)."""

from __future__ import annotations

import numpy as np
import pytest

import shmaug

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]

X = np.zeros((12, 4, 4, 1), np.float32)


def torch_draw(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The draws a torchvision transform makes (``torch.rand``, ``torch.randint``), beside
    legacy code's from ``np.random`` (the sample during which torch loads is made again with
    both seeded)."""
    out = image.copy()
    out[0, 0, 0] = torch.rand(1).item()
    out[0, 1, 0] = float(torch.randint(0, 1000, (1,)).item())
    out[0, 2, 0] = float(np.random.randint(0, 1000))
    return out


def torch_flip(image: np.ndarray) -> np.ndarray:
    """A torchvision v1 transform's draw, behind ``from_array``."""
    return image[:, ::-1] + 1 if torch.rand(1).item() < 0.5 else image


def torch_threads(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.full_like(image, torch.get_num_threads())


def to_tensor(image: np.ndarray, rng: np.random.Generator) -> object:
    return torch.from_numpy(image.copy()) / 255


def epoch(augment, **kwargs) -> np.ndarray:
    with shmaug.Loader(X, np.arange(len(X)), batch_size=4, augment=augment, seed=kwargs.pop(
            "seed", 3), **kwargs) as loader:
        return np.concatenate([xb for xb, _ in loader])


@pytest.fixture(scope="module")
def inline() -> np.ndarray:
    return epoch(torch_draw, workers=0)


@pytest.mark.parametrize("workers,start_method", [(1, "fork"), (2, "fork"), (2, "spawn")])
def test_torch_draws_are_the_same_for_any_workers_and_start_method(
        inline: np.ndarray, workers: int, start_method: str) -> None:
    """Under spawn the worker loads torch lazily, in sample 0: that sample is made again,
    seeded."""
    np.testing.assert_array_equal(epoch(torch_draw, workers=workers, start_method=start_method),
                                  inline)


@pytest.mark.parametrize("workers", [1, 2])
def test_from_array_seeds_torch_from_its_rng(workers: int) -> None:
    x = np.arange(12 * 4 * 4, dtype=np.float32).reshape(12, 4, 4, 1)
    made = []
    for w in (0, workers):
        with shmaug.Loader(x, np.arange(12), batch_size=4, augment=shmaug.from_array(
                torch_flip, targets="still"), seed=1, workers=w) as loader:
            made.append(np.concatenate([xb for xb, _ in loader]))
    np.testing.assert_array_equal(*made)
    assert 0 < (made[0][:, 0, 0, 0] != x[:, 0, 0, 0]).sum() < 12  # some flipped, not all


def test_each_sample_draws_its_own_and_a_seed_its_own(inline: np.ndarray) -> None:
    draws = inline[:, 0, 0, 0]
    assert len(set(draws.tolist())) == len(X)
    assert not np.array_equal(epoch(torch_draw, workers=0, seed=4), inline)


def test_the_callers_own_torch_stream_is_kept_under_workers_0() -> None:
    torch.manual_seed(7)
    expect = [torch.rand(3) for _ in range(2)]
    torch.manual_seed(7)
    first = torch.rand(3)
    epoch(torch_draw, workers=0)
    torch.testing.assert_close([first, torch.rand(3)], expect)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_worker_runs_torch_on_one_thread(start_method: str) -> None:
    torch.set_num_threads(2)  # what the parent (and a spawned child) would take on 2 cores
    assert set(epoch(torch_threads, workers=2, start_method=start_method).ravel()) == {1.0}


def test_a_tensor_returned_is_refused_with_a_fix_that_keeps_its_dtype() -> None:
    with pytest.raises(TypeError, match=r"returned torch\.Tensor.*`result\.numpy\(\)`.*sample "
                                        r"0's dtype") as caught:
        epoch(to_tensor, workers=1)
    assert "image.dtype" not in str(caught.value)  # a float [0, 1] image cast to uint8 is 0/1
