"""Images in object storage: a real S3 server (moto) on localhost, read through s3:// URLs.

The batches must equal those from the same images on local disk, bit for bit, under fork and
spawn; secrets never show; faults (a deleted object, bad credentials, the server stopped
mid-epoch) give their errors without hanging or leaving anything behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import traceback

import numpy as np
import pytest

import shmaug
from shmaug.errors import ImageReadError, RemoteError, ShmaugError
from shmaug.sources.files import ImageFiles
from tests._helpers import TIME_SCALE, assert_same_batches
from tests.integration._s3 import (
    BUCKET, KEY, SECRET, free_port, options, stop_server_mid_epoch, upload)

pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
pytest.importorskip("moto.server", reason="needs moto[server]")
boto3 = pytest.importorskip("boto3", reason="needs boto3 (moto[server] brings it)")

pytestmark = pytest.mark.timeout(120)

@contextlib.contextmanager
def checking_credentials():
    """The server refuses keys it does not know (moto accepts any key unless told so)."""
    from moto import settings

    before = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = before


@pytest.fixture(params=["obstore", "fsspec"])
def transport(request, monkeypatch):
    """Each client a read's GETs may take (``shmaug.sources.remote._transport``): obstore, where it is
    installed and the options say all it needs (as ``options()`` do), else fsspec."""
    if request.param == "fsspec":
        monkeypatch.setenv("SHMAUG_TRANSPORT", "fsspec")
    else:
        pytest.importorskip("obstore", reason="needs obstore (the remote extra has it)")
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(name)  # obstore would read some of them (and then not be used)
    return request.param


def epoch(x, **kwargs):
    with shmaug.Loader(x, x.labels, batch_size=3, **kwargs) as loader:
        return [b for b in loader]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_bucket_folder_gives_the_local_folders_batches(s3, method, transport):
    endpoint, root = s3
    remote = ImageFiles.from_directory(f"s3://{BUCKET}/train/", image_size=(8, 8),
                                       storage_options=options(endpoint))
    local = ImageFiles.from_directory(root, image_size=(8, 8))
    assert [p.split("/train/")[1] for p in remote.paths] == \
        [p.split("/train/")[1] for p in local.paths]
    assert remote.class_names == local.class_names == ("ant", "bee")
    np.testing.assert_array_equal(remote.classes, local.classes)
    kwargs = dict(shuffle=True, seed=3, workers=2, start_method=method)
    assert_same_batches(epoch(remote, **kwargs), epoch(local, **kwargs))


def test_url_list_gives_the_local_lists_batches(s3):
    endpoint, root = s3
    local = ImageFiles.from_directory(root, image_size=(6, 7))
    urls = [f"s3://{BUCKET}/train/" + p.split("/train/")[1] for p in local.paths]
    remote = ImageFiles.from_paths(urls, [local.class_names[c] for c in local.classes],
                                   image_size=(6, 7), storage_options=options(endpoint))
    kwargs = dict(shuffle=False, workers=2, start_method="fork")
    assert_same_batches(epoch(remote, **kwargs), epoch(local, **kwargs))
    assert_same_batches(epoch(remote, workers=0), epoch(local, workers=0))


def test_missing_objects_are_named_before_any_process_starts(s3):
    endpoint, _ = s3
    with pytest.raises(shmaug.ArgumentError, match="nope.png.*on_error='skip'"):
        ImageFiles.from_paths([f"s3://{BUCKET}/train/ant/0.png", f"s3://{BUCKET}/nope.png"],
                              storage_options=options(endpoint))
    with pytest.raises(shmaug.ArgumentError, match="holds no object"):
        ImageFiles.from_directory(f"s3://{BUCKET}/nothing/", storage_options=options(endpoint))
    with pytest.raises(shmaug.ArgumentError, match="bucket 'nobucket', which does not exist"):
        ImageFiles.from_directory("s3://nobucket/x/", storage_options=options(endpoint))


def test_deleted_object_is_an_error_naming_it_or_is_skipped_and_counted(s3):
    endpoint, _ = s3
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    gone = f"s3://{BUCKET}/gone/ant/1.png"
    for i in range(3):
        client.copy_object(Bucket=BUCKET, Key=f"gone/ant/{i}.png",
                           CopySource={"Bucket": BUCKET, "Key": f"train/ant/{i}.png"})
    raising = ImageFiles.from_directory(f"s3://{BUCKET}/gone/", image_size=(8, 8),
                                        storage_options=options(endpoint))
    skipping = ImageFiles.from_directory(f"s3://{BUCKET}/gone/", image_size=(8, 8),
                                         on_error="skip", storage_options=options(endpoint))
    client.delete_object(Bucket=BUCKET, Key="gone/ant/1.png")
    with pytest.raises(ImageReadError, match=f"{gone}.*no such object"):
        epoch(raising, workers=2, start_method="fork")
    with shmaug.Loader(skipping, skipping.labels, batch_size=3, workers=2,
                       start_method="fork") as loader:
        with pytest.warns(shmaug.ShmaugWarning, match="gone/ant/1.png': no such object"):
            batches = [b for b in loader]
        assert loader.stats()["skipped"] == 1
        assert loader.stats()["unreadable"] == [gone]
    np.testing.assert_array_equal(batches[0][0][1], batches[0][0][2])  # its stand-in: 2.png


def test_secrets_never_show(s3, caplog, monkeypatch, transport):
    endpoint, _ = s3
    caplog.set_level(logging.DEBUG)
    files = ImageFiles.from_directory(f"s3://{BUCKET}/train/", image_size=(8, 8),
                                      on_error="skip", storage_options=options(endpoint))
    shown = [repr(files), repr(files.load.table.remote), str(files._settings_text())]
    with shmaug.Loader(files, files.labels, batch_size=3, workers=2,
                       start_method="fork") as loader:
        list(loader)
        shown.append(repr(loader.stats()))
        shown.append(repr(loader))
    assert "'secret': '***'" in shown[0] and endpoint in shown[0]
    # A refused credential, an unreachable endpoint (both at once) and a server that never
    # answers (timed out, retried): their messages, and the retry log.
    monkeypatch.setenv("SHMAUG_REQUEST_TIMEOUT_S", "0.5")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never answers
        for opts in (options(endpoint, secret=SECRET + "-wrong"),
                     options("http://127.0.0.1:9", secret=SECRET),
                     options(f"http://127.0.0.1:{silent.getsockname()[1]}", secret=SECRET)):
            bad = ImageFiles.from_paths([f"s3://{BUCKET}/train/ant/0.png"], on_error="skip",
                                        storage_options=opts)
            with checking_credentials(), pytest.raises(ShmaugError) as caught:
                bad.read(0)
            shown.append(str(caught.value))
    shown += [r.getMessage() for r in caplog.records]
    for text in shown:
        assert SECRET not in text, text
    assert any("retrying" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("shards", ["train-*.tar", "train-{000000..000001}.tar"])
def test_listing_or_sizing_shards_on_a_silent_endpoint_ends_in_an_error(monkeypatch, shards):
    """Listing a glob, and reading the shards' sizes and etags, ran on botocore's own clock:
    an endpoint that takes connections and never answers held the constructor for minutes
    (the workers' reads were bounded)."""
    monkeypatch.setenv("SHMAUG_REQUEST_TIMEOUT_S", "0.5")
    with socket.create_server(("127.0.0.1", 0), backlog=64) as silent:
        opts = options(f"http://127.0.0.1:{silent.getsockname()[1]}", secret=SECRET)
        with checking_credentials(), pytest.raises(RemoteError,
                                                   match=r"no answer within SHMAUG_REQUEST"):
            shmaug.ImageRecords.from_webdataset(f"s3://{BUCKET}/wds/{shards}",
                                                image_ext="png", storage_options=opts)


def closed_port() -> str:
    """An endpoint on localhost where nothing listens: every connection is refused."""
    return f"http://127.0.0.1:{free_port()}"


def assert_short_and_ours(error: BaseException) -> str:
    """The error's text, after checking that it comes without the backend's traceback (no
    chained exception, no frame of fsspec, s3fs, aiobotocore or botocore) and masks the secret."""
    shown = "".join(traceback.format_exception(error))
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    assert "site-packages" not in shown and shown.count("\n") < 60, shown
    assert SECRET not in shown and "Fix:" in str(error)
    return str(error)


@pytest.mark.parametrize("call, pattern", [("from_tfrecord", "train-*"),
                                           ("from_webdataset", "*.tar")])
@pytest.mark.parametrize("fault", ["missing bucket", "refused credential", "unreachable endpoint"])
def test_a_glob_in_a_bucket_reports_its_fault_naming_the_url_and_the_fix(s3, call, pattern,
                                                                         fault):
    """The same rules as a list or braces of URLs (issue 36): no fsspec/aiobotocore traceback."""
    endpoint, _ = s3
    bucket, opts, raised, says = {
        "missing bucket": ("nobucket", options(endpoint), shmaug.ArgumentError,
                           "does not exist|none matched"),
        "refused credential": (BUCKET, options(endpoint, key="AKIDNOBODY"), RemoteError,
                               "was refused.*Fix: pass credentials"),
        "unreachable endpoint": (BUCKET, options(closed_port()), RemoteError,
                                 "Fix: check that the endpoint"),
    }[fault]
    url = f"s3://{bucket}/{pattern}"
    checking = checking_credentials() if fault == "refused credential" else contextlib.nullcontext()
    with checking, pytest.raises(raised) as caught:
        getattr(shmaug.ImageRecords, call)(url, storage_options=opts)
    text = assert_short_and_ours(caught.value)
    assert repr(url) in text and re.search(says, text), text


def test_a_bucket_folder_given_for_shards_is_called_a_folder(s3):
    endpoint, _ = s3
    with pytest.raises(shmaug.ArgumentError, match=(
            rf"received 's3://{BUCKET}/train' \(type str\), which is a folder.*"
            rf"Fix: .*'s3://{BUCKET}/train/\*'")):
        shmaug.ImageRecords.from_webdataset(f"s3://{BUCKET}/train",
                                            storage_options=options(endpoint))


@pytest.mark.parametrize("what", ["braces", "glob", "listing", "paths", "read"])
def test_an_unreachable_endpoint_is_reported_at_once(what, transport):
    """A refused connection is not transient: neither shmaug nor botocore retries it (before
    issue 36: 4 attempts of botocore's 5, 41.5 s). botocore's retry settings as a user has
    them (not FAST)."""
    opts = {"client_kwargs": {"endpoint_url": closed_port(), "region_name": "us-east-1"},
            "key": KEY, "secret": SECRET}
    url = f"s3://{BUCKET}/train/ant/0.png"
    calls = {
        "braces": lambda: shmaug.ImageRecords.from_webdataset(
            f"s3://{BUCKET}/shards/shard-{{0..1}}.tar", storage_options=opts),
        "glob": lambda: shmaug.ImageRecords.from_tfrecord(f"s3://{BUCKET}/shards/train-*",
                                                          storage_options=opts),
        "listing": lambda: ImageFiles.from_directory(f"s3://{BUCKET}/train/",
                                                     storage_options=opts),
        "paths": lambda: ImageFiles.from_paths([url], storage_options=opts),
        "read": lambda: ImageFiles.from_paths([url], on_error="skip",
                                              storage_options=opts).read(0),
    }
    began = time.perf_counter()
    with pytest.raises(RemoteError, match="connection was refused") as caught:
        calls[what]()
    elapsed = time.perf_counter() - began
    assert f"s3://{BUCKET}/" in assert_short_and_ours(caught.value)
    # One attempt, not retries with backoff (32-41 s before); generous for a loaded runner,
    # whose first call may also import s3fs
    assert elapsed < 8.0 * TIME_SCALE, f"{elapsed:.1f} s to report a refused connection"


def test_bad_credentials_are_refused_at_once_naming_the_fix(s3, transport):
    endpoint, _ = s3
    bad = options(endpoint, key="AKIDNOBODY")
    with checking_credentials():
        with pytest.raises(RemoteError, match="refused.*Fix: pass credentials") as caught:
            ImageFiles.from_paths([f"s3://{BUCKET}/train/ant/0.png"], on_error="skip",
                                  storage_options=bad).read(0)  # the GET itself refused
        assert SECRET not in assert_short_and_ours(caught.value)
        with pytest.raises(RemoteError, match="refused.*Fix: pass credentials") as caught:
            ImageFiles.from_paths([f"s3://{BUCKET}/train/ant/0.png"],
                                  storage_options=options(endpoint, key="AKIDNOBODY"))
        assert SECRET not in str(caught.value)
        with pytest.raises(RemoteError, match="refused"):
            ImageFiles.from_directory(f"s3://{BUCKET}/train/",
                                      storage_options=options(endpoint, key="AKIDNOBODY"))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_server_stopped_mid_epoch_is_an_error_not_a_hang(tmp_path, monkeypatch, method,
                                                        transport):
    # Forked workers inherit the test server's listening socket: connections to the stopped
    # server then hang instead of being refused, which the request timeout must end.
    monkeypatch.setenv("SHMAUG_REQUEST_TIMEOUT_S", "2")

    def made(endpoint: str) -> ImageFiles:
        upload(endpoint, tmp_path / "train")
        return ImageFiles.from_directory(f"s3://{BUCKET}/train/", image_size=(8, 8),
                                         storage_options=options(endpoint))

    stop_server_mid_epoch(made, method)


class Throttling:
    """A proxy in front of the server that answers its first ``burst`` connections with
    503 SlowDown (as S3 throttles), then forwards."""

    BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")

    def __init__(self, endpoint: str, burst: int) -> None:
        self.target = ("127.0.0.1", int(endpoint.rsplit(":", 1)[1]))
        self.burst, self.refused = burst, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            client.settimeout(10)
            if self.refused < self.burst:
                self.refused += 1
                with client:
                    client.recv(1 << 16)
                    client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                                   b"Connection: close\r\nContent-Length: "
                                   + str(len(self.BODY)).encode() + b"\r\n\r\n" + self.BODY)
                continue
            server = socket.create_connection(self.target, timeout=10)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(1 << 16):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.listener.close()


def test_a_503_burst_is_retried_and_a_lasting_one_names_the_object(s3, transport):
    endpoint, root = s3
    local = ImageFiles.from_directory(root, image_size=(8, 8))
    urls = [f"s3://{BUCKET}/train/" + p.split("/train/")[1] for p in local.paths]
    proxy = Throttling(endpoint, burst=2)
    try:
        remote = ImageFiles.from_paths(urls, on_error="skip", image_size=(8, 8),
                                       storage_options=options(proxy.endpoint))
        got = [remote.read(i) for i in range(len(urls))]
        assert proxy.refused == 2
        for i, image in enumerate(got):
            np.testing.assert_array_equal(image, local.read(i))
        proxy.burst = 10**6  # throttled for good: shmaug's retries run out
        with pytest.raises(RemoteError, match=r"train/ant/0.png' after 4 attempts.*Slow ?Down"):
            ImageFiles.from_paths(urls[:1], storage_options=options(proxy.endpoint)).read(0)
    finally:
        proxy.close()


def test_a_whole_object_costs_one_request(s3, monkeypatch):
    """s3fs sends a HEAD (for the size) before a whole object's GET unless told not to split
    it: for small images that doubles what each costs the client and the server. (obstore
    sends one GET.)"""
    from shmaug.sources.remote import Remote

    monkeypatch.setenv("SHMAUG_TRANSPORT", "fsspec")
    endpoint, root = s3
    remote = Remote("s3", options(endpoint))
    url = f"s3://{BUCKET}/train/ant/0.png"
    remote.fetch(url)  # the client exists from here on
    sent: list[str] = []
    remote.fs().s3.meta.events.register("before-send",
                                        lambda request, **_: sent.append(request.method))
    assert remote.fetch(url) == (root / "ant" / "0.png").read_bytes()
    assert sent == ["GET"]


def test_an_identity_through_obstore_is_fsspecs_and_builds_no_botocore_client(s3):
    """A worker reading through obstore checks an object's identity (a disk cache's download
    does, first) with obstore's HEAD: building botocore's client for s3fs' ``info`` took
    ~0.9 s of CPU per worker and held back the first downloads while records were read by
    range (epoch 1 read 59 MB through obstore against 41 MB through s3fs; issue 51)."""
    pytest.importorskip("obstore", reason="needs obstore (the remote extra has it)")
    from shmaug.sources.remote._client import Remote

    endpoint, _ = s3
    url = f"s3://{BUCKET}/train/ant/0.png"
    by_fsspec = Remote("s3", options(endpoint)).identities([url])  # (builds botocore's)
    remote = Remote("s3", options(endpoint))
    assert remote.transport == "obstore"
    assert remote.read_range(url, 0, 10)  # obstore serves this process now
    assert remote.identities([url]) == by_fsspec
    assert remote.fs()._s3 is None  # s3fs never built its botocore client here
    # a folder and a missing object: fsspec's answers, as before
    assert isinstance(remote.identities([f"s3://{BUCKET}/train"])[0], IsADirectoryError)
    assert isinstance(remote.identities([f"s3://{BUCKET}/nope"])[0], FileNotFoundError)
