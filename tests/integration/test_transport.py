"""Which client sends a read's GETs (``shmaug.sources.remote._transport``): obstore where the options
say all it needs, fsspec otherwise, the same bytes either way, against real servers (moto's S3
and, where installed, nginx); and no hang in workers forked from a process that used obstore.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import shmaug
from shmaug.sources.files import ImageFiles
from tests.integration._s3 import BUCKET, KEY, SECRET, options

pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
pytest.importorskip("obstore", reason="needs obstore (the remote extra has it)")
pytest.importorskip("moto.server", reason="needs moto[server]")

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch):
    """What this machine's environment may set for AWS: obstore would read some of it."""
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)


def transport(protocol: str, opts: dict | None) -> str:
    from shmaug.sources.remote import Remote

    return Remote(protocol, opts).transport


def test_obstore_takes_only_the_options_it_can_honour(s3, monkeypatch):
    endpoint, _ = s3
    creds = {"key": KEY, "secret": SECRET}
    assert transport("s3", options(endpoint)) == "obstore"
    assert transport("s3", {**creds, "endpoint_url": endpoint}) == "obstore"
    assert transport("s3", {"anon": True, "client_kwargs": {"region_name": "eu-west-1"}}) \
        == "obstore"
    assert transport("s3", {**creds, "use_listings_cache": False,
                            "client_kwargs": {"region_name": "eu-west-1"}}) == "obstore"
    # botocore's to find or to honour: credentials from the environment or a profile, the
    # bucket's region, options obstore has no word for.
    assert transport("s3", None) == "fsspec"
    assert transport("s3", {"client_kwargs": {"endpoint_url": endpoint}}) == "fsspec"
    assert transport("s3", creds) == "fsspec"
    assert transport("s3", {**options(endpoint), "profile": "dev"}) == "fsspec"
    assert transport("s3", {**options(endpoint), "requester_pays": True}) == "fsspec"
    assert transport("s3", {**options(endpoint),
                            "config_kwargs": {"signature_version": "s3v4"}}) == "fsspec"
    assert transport("s3", {**creds, "endpoint_url": endpoint,
                            "client_kwargs": {"endpoint_url": endpoint}}) == "fsspec"
    for malformed in ("127.0.0.1:9", "http://", "http://host:port", "ftp://host"):
        assert transport("s3", {**creds, "endpoint_url": malformed}) == "fsspec", malformed
    assert transport("http", None) == "obstore"
    assert transport("https", {"headers": {"Authorization": "Bearer x"}}) == "fsspec"
    # What obstore would read from the environment and botocore, given credentials, would not.
    for name, value in (("AWS_SESSION_TOKEN", "t"), ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "true"),
                        ("AWS_SKIP_SIGNATURE", "true"), ("AWS_ENDPOINT", "http://elsewhere")):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            assert transport("s3", options(endpoint)) == "fsspec", name
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")  # overridden by the options' region
    assert transport("s3", options(endpoint)) == "obstore"
    monkeypatch.setenv("SHMAUG_TRANSPORT", "fsspec")
    assert transport("s3", options(endpoint)) == "fsspec"


def test_both_clients_read_the_same_bytes_from_s3(s3, monkeypatch):
    from shmaug.sources.remote import Remote

    endpoint, root = s3
    url = f"s3://{BUCKET}/train/bee/2.png"
    local = (root / "bee" / "2.png").read_bytes()
    ranges = [(0, 8), (5, 20), (len(local) - 7, 7)]
    read = {}
    for name in ("obstore", "fsspec"):
        monkeypatch.setenv("SHMAUG_TRANSPORT", "auto" if name == "obstore" else name)
        remote = Remote("s3", options(endpoint))
        assert remote.transport == name
        read[name] = (remote.fetch(url), remote.read_range(url, 3, 40),
                      remote.read_ranges(url, ranges))
        with pytest.raises(FileNotFoundError, match="no such object"):
            remote.fetch(f"s3://{BUCKET}/train/bee/missing.png")
    assert read["obstore"] == read["fsspec"] == (
        local, local[3:40], [local[o:o + n] for o, n in ranges])


def test_keys_obstore_would_rewrite_are_read_through_fsspec(s3, monkeypatch):
    """obstore parses a key as a path: it refuses ``.``, ``..`` and empty segments and drops a
    leading or trailing ``/``, which would read another object. Those keys go to fsspec."""
    import boto3

    from shmaug.sources.remote import Remote

    endpoint, _ = s3
    keys = ["odd/a b/c(1).png", "odd/x//y.png", "odd/p%20q.png", "odd/ü+é.png", "/odd/lead",
            "odd/trail/", "odd/trail", "odd/./x", "odd/../x", "odd/q?x=1", "odd/h#1"]
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    for i, key in enumerate(keys):
        client.put_object(Bucket=BUCKET, Key=key, Body=f"object {i}".encode())
    remote = Remote("s3", options(endpoint))
    assert remote.transport == "obstore"
    for i, key in enumerate(keys):
        assert remote.fetch(f"s3://{BUCKET}/{key}") == f"object {i}".encode(), key
        assert remote.read_range(f"s3://{BUCKET}/{key}", 2, 5) == f"object {i}".encode()[2:5]


def test_both_clients_read_the_same_bytes_over_http(tmp_path, monkeypatch):
    """Range GETs against nginx (where installed); a URL obstore would encode again (a
    space, ``%20``) stays with fsspec in the same process."""
    from bench.remote.serve import Nginx, nginx_binary
    from shmaug.sources.remote import Remote

    if nginx_binary() is None:
        pytest.skip("needs nginx (e.g. apt-get install nginx)")
    data = np.random.default_rng(0).integers(0, 256, 50_000, np.uint8).tobytes()
    (tmp_path / "www").mkdir()
    for name in ("blob.bin", "a blob.bin"):
        (tmp_path / "www" / name).write_bytes(data)
    server = Nginx(tmp_path / "www", workers=1)
    try:
        base = f"http://127.0.0.1:{server.port}"
        read = {}
        for name in ("obstore", "fsspec"):
            monkeypatch.setenv("SHMAUG_TRANSPORT", "auto" if name == "obstore" else name)
            remote = Remote("http", None)
            assert remote.transport == name
            read[name] = [remote.fetch(f"{base}/blob.bin"), remote.fetch(f"{base}/a%20blob.bin"),
                          remote.read_range(f"{base}/blob.bin", 100, 4_000),
                          *remote.read_ranges(f"{base}/blob.bin", [(9, 10), (40_000, 999)])]
        assert read["obstore"] == read["fsspec"] == [
            data, data, data[100:4_000], data[9:19], data[40_000:40_999]]
    finally:
        server.close()


def test_workers_forked_after_the_main_process_used_obstore_do_not_hang(s3):
    """obstore's runtime, once used, hangs a forked child's requests: such workers take fsspec
    and give the same batches."""
    endpoint, root = s3
    remote = ImageFiles.from_directory(f"s3://{BUCKET}/train/", image_size=(8, 8),
                                       storage_options=options(endpoint))
    local = ImageFiles.from_directory(root, image_size=(8, 8))
    assert remote.load.table.remote.transport == "obstore"
    np.testing.assert_array_equal(remote.read(0), local.read(0))  # obstore, in this process
    with shmaug.Loader(remote, batch_size=4, workers=2, start_method="fork") as loader:
        got = np.concatenate([images for images, _ in loader])
    np.testing.assert_array_equal(got, np.stack([local.read(i) for i in range(len(local))]))


def test_obstore_used_before_a_fork_leaves_the_workers_on_fsspec(s3):
    """Whoever used obstore in a process (here the user, on an in-memory store), a fork of it
    must not: its requests hang and the parent could crash (a segfault, before the guard saw
    any use but shmaug's). obstore imported also makes the default start method forkserver."""
    endpoint, _ = s3
    script = f"""
import obstore, shmaug
from obstore.store import MemoryStore
from shmaug.engine.workers.launch import default_start_method
from shmaug.sources.files import ImageFiles

store = MemoryStore()
obstore.put(store, "a", b"1")
obstore.get(store, "a").bytes()
print(default_start_method())
files = ImageFiles.from_directory("s3://{BUCKET}/train/", image_size=(8, 8),
                                  storage_options={options(endpoint)!r})
with shmaug.Loader(files, batch_size=4, workers=2, start_method="fork") as loader:
    print(sum(len(images) for images, _ in loader))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=100, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["forkserver", "7"]


@pytest.mark.parametrize("via", ["obstore", "fsspec"])
def test_a_server_that_ignores_ranges_is_an_error_not_the_wrong_bytes(tmp_path, monkeypatch,
                                                                      via):
    """Python's own HTTP server answers a range request with the whole file (200): fsspec
    returned it as the range."""
    from shmaug.errors import RemoteError
    from shmaug.sources.remote import Remote

    if via == "fsspec":
        monkeypatch.setenv("SHMAUG_TRANSPORT", "fsspec")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 40)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *_: None  # type: ignore[attr-defined]
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            remote = Remote("http", None)
            assert remote.transport == via
            url = f"http://127.0.0.1:{server.server_address[1]}/blob.bin"
            assert remote.fetch(url) == bytes(range(256)) * 40
            with pytest.raises(RemoteError, match="ignores range requests.*Fix: serve"):
                remote.read_ranges(url, [(10, 5)])
        finally:
            server.shutdown()
            thread.join(timeout=10)
