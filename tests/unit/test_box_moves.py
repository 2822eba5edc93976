"""A task's boxes moved together (``targets.box_moves``): the same bits as each sample's alone,
whatever the samples' moves (none, several, a field, a perspective), formats and thresholds;
and a loader whose `augment` reads its boxes itself still gets them moved."""

from __future__ import annotations

import numpy as np
import pytest

from shmaug.ops import Compose, Maybe, Op
from shmaug.ops.targets import box_moves, formats
from shmaug.ops.targets.moves import MatrixMove, noting, through_matrices

H, W, BOXES = 48, 64, 6
OPS = [Maybe(Op("hflip")), Maybe(Op("rotate", degrees=(-40, 40), border="constant")),
       Maybe(Op("perspective", border="constant")), Maybe(Op("sine_warp", border="constant")),
       Maybe(Op("random_resized_crop", height=40, width=40))]


def sample(rng: np.random.Generator, fmt: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """An image and its padded boxes (some rows -1), labels and one mask per box row."""
    image = rng.integers(0, 255, (H, W, 3), np.uint8)
    xy = np.sort(rng.uniform(-4, [W + 4, H + 4], (BOXES, 2, 2)), axis=1)  # some reach outside
    xyxy = np.c_[xy[:, 0], xy[:, 1] + 1].clip(0, (W, H, W, H))
    boxes = formats.from_xyxy(xyxy, fmt, H, W).astype(np.float32)
    labels = rng.integers(0, 5, BOXES)
    pad = rng.random(BOXES) < 0.3
    boxes[pad], labels[pad] = -1, -1
    masks = np.zeros((BOXES, H, W), np.uint8)
    for i, (x0, y0, x1, y1) in enumerate(xyxy.astype(int)):
        masks[i, y0:y1 + 1, x0:x1 + 1] = 1
    return image, {"boxes": boxes, "box_labels": labels, "masks": masks}


@pytest.mark.parametrize("fmt", ["xyxy", "rel_center_xywh", "yxyx"])
@pytest.mark.parametrize("thresholds", [{}, {"min_visibility": 0.4, "min_area": 30.0}])
def test_a_tasks_boxes_moved_together_are_each_samples_alone_to_the_bit(fmt, thresholds):
    pipe = Compose(OPS, bounding_box_format=fmt, **thresholds)
    samples = [sample(np.random.default_rng(i), fmt) for i in range(24)]
    alone = [pipe.augment_targets(image, t, np.random.default_rng(100 + i))[1]
             for i, (image, t) in enumerate(samples)]
    noted: box_moves.Noted = []
    with box_moves.deferring(noted):
        together = [pipe.augment_targets(image, t, np.random.default_rng(100 + i))[1]
                    for i, (image, t) in enumerate(samples)]
    waiting = [(t["boxes"] == s[1]["boxes"]).all() for t, s in zip(together, samples)]
    assert 0 < len(noted) == sum(waiting) < len(samples)  # a field's sample moves at once
    box_moves.settle(noted)
    dropped = 0
    for one, many in zip(alone, together):
        for name in ("boxes", "box_labels", "masks"):
            assert one[name].dtype == many[name].dtype
            np.testing.assert_array_equal(one[name], many[name], err_msg=name)
        dropped += int(((one["box_labels"] == -1) & (one["boxes"] == -1).all(1)).sum())
    assert dropped > BOXES * len(samples) * 0.3  # padding, and boxes the moves pushed out


def test_a_task_of_another_layout_or_no_boxes_settles_each_group_as_its_own() -> None:
    pipe = Compose([Op("hflip")], bounding_box_format="xyxy")
    image, t = sample(np.random.default_rng(0), "xyxy")
    ints = {"boxes": np.rint(t["boxes"]).astype(np.int32)}
    empty = {"boxes": np.zeros((0, 4), np.float32)}
    noted: box_moves.Noted = []
    with box_moves.deferring(noted):
        got = [pipe.augment_targets(image, given, np.random.default_rng(0))[1]
               for given in (t, ints, empty)]
    box_moves.settle(noted)
    real = (t["boxes"] != -1).any(1)
    np.testing.assert_allclose(got[0]["boxes"][real][:, [2, 0]], W - t["boxes"][real][:, [0, 2]])
    assert got[1]["boxes"].dtype == np.int32
    np.testing.assert_array_equal(got[1]["boxes"][real][:, [2, 0]],
                                  W - ints["boxes"][real][:, [0, 2]])
    assert got[2]["boxes"].shape == (0, 4)


def test_each_box_moves_by_its_own_matrix_as_alone() -> None:
    rng = np.random.default_rng(0)
    moves = [MatrixMove(np.r_[rng.normal(size=(2, 3)), [[0, 0, 1]]], (H, W)) for _ in range(5)]
    boxes = np.sort(rng.uniform(0, 40, (5, 2, 2)), axis=1).reshape(5, 4)[:, [0, 2, 1, 3]]
    edges = np.array([m.edges() for m in moves])
    together = through_matrices(edges, boxes, False)
    for m, box, row in zip(moves, boxes, together):
        np.testing.assert_array_equal(through_matrices(np.array(m.edges()), box[None], False)[0],
                                      row)
        corners = m.points(box[[0, 1, 2, 1, 2, 3, 0, 3]].reshape(4, 2))
        np.testing.assert_allclose(row, [*corners.min(0), *corners.max(0)], atol=1e-9)


class ReadsItsBoxes(Compose):
    """A user's pipeline whose ``augment_targets`` reads the moved boxes before returning."""

    def augment_targets(self, image, targets, rng):
        out, moved = super().augment_targets(image, targets, rng)
        moved["boxes"] = np.where(moved["boxes"] >= 0, moved["boxes"] + 0.5, moved["boxes"])
        return out, moved


def test_a_loader_moves_a_tasks_boxes_together_and_a_wrapper_reading_them_gets_them_moved():
    import shmaug

    pipe = Compose([Op("hflip"), Op("rotate", degrees=(-30, 30), border="constant")],
                   bounding_box_format="xyxy")
    made = [sample(np.random.default_rng(i), "xyxy") for i in range(8)]
    x = np.stack([image for image, _ in made])
    y = {"boxes": np.stack([t["boxes"] for _, t in made]),
         "box_labels": np.stack([t["box_labels"] for _, t in made])}
    batches = {}
    wrapper = ReadsItsBoxes(pipe.ops, bounding_box_format="xyxy")
    assert pipe.boxes_together and not wrapper.boxes_together
    for name, augment in (("pipe", pipe), ("wrapper", wrapper)):
        with shmaug.Loader(x, y, batch_size=8, augment=augment, workers=0, seed=3,
                           shuffle=False) as loader:
            batches[name] = next(iter(loader))[1]
    moved, wrapped = batches["pipe"]["boxes"], batches["wrapper"]["boxes"]
    real = moved >= 0
    assert real.any() and not np.array_equal(moved, y["boxes"])
    np.testing.assert_allclose(wrapped[real], moved[real] + 0.5, rtol=1e-6)


def test_a_pipeline_called_inside_a_task_by_the_users_code_gets_its_boxes_moved() -> None:
    """Only the runner's own call of its pipeline leaves boxes to the task: a load (or an
    override) that calls a pipeline of its own gets them moved at once."""
    import shmaug

    flip = Compose([Op("hflip")], bounding_box_format="xyxy")
    seen = []

    def load(index: int) -> np.ndarray:
        image = np.zeros((H, W, 3), np.uint8)
        box = {"boxes": np.array([[1.0, 2.0, 10.0, 12.0]], np.float32)}
        seen.append(flip.augment_targets(image, box, np.random.default_rng(index))[1]["boxes"])
        return image

    pipe = Compose([Op("rotate", degrees=(-30, 30), border="constant")],
                   bounding_box_format="xyxy")
    _, t = sample(np.random.default_rng(0), "xyxy")
    y = {"boxes": np.stack([t["boxes"]] * 4), "box_labels": np.stack([t["box_labels"]] * 4)}
    with shmaug.Loader(list(range(4)), y, load=load, batch_size=4, augment=pipe, workers=0,
                       seed=1) as loader:
        moved = next(iter(loader))[1]["boxes"]
    assert len(seen) >= 4
    for boxes in seen:
        np.testing.assert_array_equal(boxes, [[W - 10.0, 2.0, W - 1.0, 12.0]])
    assert not np.array_equal(moved, y["boxes"])  # and the task's own moved together


def test_a_loader_zeroes_the_instance_mask_of_each_box_its_task_drops() -> None:
    import shmaug

    pipe = Compose([Op("translation", height_factor=(-0.5, 0.5), width_factor=(-0.5, 0.5),
                       border="constant")], bounding_box_format="xyxy", min_visibility=0.6)
    made = [sample(np.random.default_rng(i), "xyxy") for i in range(8)]
    x = np.stack([image for image, _ in made])
    y = {name: np.stack([t[name] for _, t in made]) for name in ("boxes", "box_labels", "masks")}
    with shmaug.Loader(x, y, batch_size=8, augment=pipe, workers=0, seed=5) as loader:
        got = next(iter(loader))[1]
    real = y["box_labels"] != -1
    dropped = real & (got["box_labels"] == -1)
    kept = got["box_labels"] != -1
    assert dropped.any() and kept.any()
    assert not got["masks"][dropped].any()  # zeroed where the ring holds them
    assert got["masks"][kept].reshape(kept.sum(), -1).any(1).all()
    assert ((got["boxes"][dropped] == -1).all())


@pytest.mark.parametrize("name, fmt", [("boxes", "xyxy"), ("keypoints", "xy")])
def test_unsigned_boxes_or_keypoints_are_refused_with_the_fix(name, fmt) -> None:
    from shmaug.errors import ArgumentError

    pipe = Compose([Op("hflip")], bounding_box_format="xyxy", keypoint_format="xy")
    rows = np.array([[1, 1, 3, 3]] if name == "boxes" else [[1, 1]], np.uint16)
    with pytest.raises(ArgumentError, match=r"uint16, which cannot hold -1.*astype\('float32'\)"):
        pipe.augment_targets(np.zeros((8, 8, 3), np.uint8), {name: rows},
                             np.random.default_rng(0))


def test_two_sets_of_boxes_or_unsigned_labels_are_refused_before_anything_moves() -> None:
    import shmaug
    from shmaug.errors import ArgumentError

    pipe = Compose([Op("hflip")], bounding_box_format="xyxy")
    image, t = sample(np.random.default_rng(0), "xyxy")
    x = np.stack([image] * 4)
    both = {"boxes": np.stack([t["boxes"]] * 4), "bboxes": np.stack([t["boxes"]] * 4)}
    with pytest.raises(ArgumentError, match="both 'boxes' and 'bboxes'"):
        shmaug.Loader(x, both, batch_size=4, augment=pipe, workers=0)
    unsigned = {"boxes": both["boxes"], "box_labels": np.stack([t["box_labels"]] * 4).clip(0)
                .astype(np.uint8)}
    with pytest.raises(ArgumentError, match=r"uint8, which cannot hold -1.*astype\('int32'\)"):
        shmaug.Loader(x, unsigned, batch_size=4, augment=pipe, workers=0)
    with pytest.raises(ArgumentError, match="cannot hold -1"):
        pipe.augment_targets(image, {"boxes": t["boxes"],
                                     "box_labels": unsigned["box_labels"][0]},
                             np.random.default_rng(0))


@pytest.mark.parametrize("fmt", formats.BOX_FORMATS)
def test_a_box_whose_edge_lay_on_the_crops_edge_is_dropped_in_every_format(fmt) -> None:
    # the crop of seed 1 ends at row 120, the box's top: float32's rounding of the relative
    # formats left a sliver of 3.5e-8 of the image, labelled, in rel_center_xywh alone
    image = np.zeros((200, 300, 3), np.uint8)
    rows = formats.from_xyxy(np.array([[100.0, 120, 140, 190]]), fmt, 200, 300)
    pipe = Compose([Op("resized_crop", scale=(0.3, 0.6))], bounding_box_format=fmt)
    with noting() as moves:
        pipe(image, np.random.default_rng(1))
    assert moves[0].points(np.array([[0.0, 120.0]]))[0, 1] == moves[0].size[0]  # the edge
    moved = pipe.augment_targets(image, {"boxes": rows.astype(np.float32),
                                         "box_labels": np.array([7])},
                                 np.random.default_rng(1))[1]
    assert moved["box_labels"].tolist() == [-1] and (moved["boxes"] == -1).all()
