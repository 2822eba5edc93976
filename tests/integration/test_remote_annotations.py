"""Detection and segmentation sets in a bucket (issue 49): a COCO JSON and its images, and a
segmentation folder's images and masks, read from a real S3 server (moto) give the batches
the same sets give from disk, masks included, through the remote layer and its disk cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.errors import ArgumentError
from shmaug.ops import Compose, Maybe, Op
from shmaug.sources import from_coco, from_segmentation
from tests.annotations_data import add_polygons, write_coco
from tests.integration._s3 import BUCKET, KEY, SECRET, options, start_server

pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
pytest.importorskip("moto.server", reason="needs moto[server]")
boto3 = pytest.importorskip("boto3", reason="needs boto3 (moto[server] brings it)")

pytestmark = pytest.mark.timeout(120)
IMAGES = [(f"{i}.png", 40 + 8 * (i % 2), 32, [(4 + i, 6, 16, 10, 1 + i % 2, 0)])
          for i in range(6)]
CATEGORIES = [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}]
AUGMENT = Compose([Maybe(Op("hflip")), Op("rotate", degrees=(-10, 10), border="constant")],
                  bounding_box_format="xyxy")


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    """A server holding ``coco/`` (a JSON with polygon masks and its images) and ``seg/``
    (images and masks): their endpoint and local root."""
    root = tmp_path_factory.mktemp("sets")
    json_path, _ = write_coco(root / "coco", IMAGES, CATEGORIES)
    add_polygons(json_path)
    for i in range(5):
        for part in ("images", "masks"):
            (root / "seg" / part).mkdir(parents=True, exist_ok=True)
        ids = np.zeros((24, 30), np.uint8)
        ids[4 + i:14 + i, 5:20] = 1 + i % 2
        Image.fromarray((ids > 0).astype(np.uint8) * 200).convert("RGB").save(
            root / "seg" / "images" / f"{i}.png")
        Image.fromarray(ids).save(root / "seg" / "masks" / f"{i}.png")
    server, endpoint = start_server()
    try:
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                              aws_secret_access_key=SECRET, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for path in root.rglob("*"):
            if path.is_file():
                client.upload_file(str(path), BUCKET, path.relative_to(root).as_posix())
        yield endpoint, root
    finally:
        server.stop()


def assert_same(got: list, expected: list) -> None:
    """Two runs' batches, an image array and a dict of targets each, equal bit for bit."""
    assert len(got) == len(expected)
    for (xa, ya), (xb, yb) in zip(got, expected):
        np.testing.assert_array_equal(xa, xb)
        assert ya.keys() == yb.keys()
        for key in ya:
            np.testing.assert_array_equal(ya[key], yb[key])


def batches(files, y, workers=2):
    with shmaug.Loader(files, y, batch_size=4, augment=AUGMENT, workers=workers, seed=2,
                       shuffle=True) as loader:
        return list(loader)


def test_a_coco_set_in_a_bucket_gives_its_local_batches_masks_included(bucket, tmp_path):
    endpoint, root = bucket
    url = f"s3://{BUCKET}/coco"
    remote = from_coco(f"{url}/annotations/instances.json", f"{url}/images",
                       image_size=(16, 20), masks="instances", storage_options=options(endpoint),
                       cache_dir=tmp_path / "cache")
    local = from_coco(root / "coco" / "annotations" / "instances.json", root / "coco" / "images",
                      image_size=(16, 20), masks="instances")
    assert remote[0].paths[0] == f"{url}/images/0.png"
    assert_same(batches(*remote), batches(*local, workers=0))
    assert len([p for p in (tmp_path / "cache").rglob("*") if p.is_file()]) >= len(IMAGES)


def test_a_segmentation_folder_in_a_bucket_gives_its_local_batches(bucket):
    endpoint, root = bucket
    url = f"s3://{BUCKET}/seg"
    remote = from_segmentation(f"{url}/images", f"{url}/masks", image_size=(12, 15),
                               storage_options=options(endpoint))
    local = from_segmentation(root / "seg" / "images", root / "seg" / "masks",
                              image_size=(12, 15))
    assert remote[1]["segmentation_masks"].paths[0] == f"{url}/masks/0.png"
    augment = Compose([Maybe(Op("hflip")), Op("rotate", degrees=(-10, 10))])
    made = []
    for files, y in (remote, local):
        with shmaug.Loader(files, y, batch_size=2, augment=augment, workers=2, seed=0,
                           shuffle=True) as loader:
            made.append(list(loader))
    assert_same(*made)


def test_a_bucket_set_needs_its_image_sizes_and_its_json(bucket):
    endpoint, root = bucket
    url = f"s3://{BUCKET}/coco"
    with pytest.raises(shmaug.errors.ShmaugError, match="nothing.json"):
        from_coco(f"{url}/annotations/nothing.json", f"{url}/images",
                  storage_options=options(endpoint))
    import json

    data = json.loads((root / "coco" / "annotations" / "instances.json").read_text())
    del data["images"][2]["width"]
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    client.put_object(Bucket=BUCKET, Key="coco/annotations/sizeless.json",
                      Body=json.dumps(data).encode())
    with pytest.raises(ArgumentError, match=r"no width and height, e\.g\. .*2\.png"):
        from_coco(f"{url}/annotations/sizeless.json", f"{url}/images",
                  storage_options=options(endpoint))


def test_local_paths_refuse_storage_options(bucket, tmp_path):
    endpoint, root = bucket
    with pytest.raises(ArgumentError, match="`storage_options` applies to URLs"):
        from_coco(Path(root / "coco" / "annotations" / "instances.json"),
                  root / "coco" / "images", storage_options=options(endpoint))
