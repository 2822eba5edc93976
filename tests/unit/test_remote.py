"""The fetch layer without a server: retries, what is never retried, masking, coalescing."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np

import pytest

from shmaug.errors import ArgumentError, RemoteError
from shmaug.sources.files import ImageFiles
from shmaug.sources.records import ImageRecords
from shmaug.sources.remote import bucket as B
from shmaug.sources.remote import ahead as A
from shmaug.sources.remote import _client as C
from shmaug.sources.remote import _round_trip as RT
from shmaug.sources.remote import _secrets as S
from shmaug.sources.remote import _spans
from shmaug.sources.remote import _urls as U
from shmaug.sources.formats.shards import Shards

pytest.importorskip("fsspec", reason="needs the remote extra: pip install 'shmaug[remote]'")

SECRET = "SEKRIT-unit-0000"


class Flaky:
    """A filesystem whose first ``failures`` reads raise ``error``."""

    async_impl = False

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    # s3fs' signature: a range passed by position would land in version_id.
    def cat_file(self, url: str, version_id: str | None = None, start: int | None = None,
                 end: int | None = None) -> bytes:
        assert version_id is None
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        data = b"0123456789" * 10
        return data[start:end]


class Offsets(Flaky):
    """A filesystem whose bytes name their own offsets (``content``); it notes each request."""

    def __init__(self) -> None:
        super().__init__(0, OSError())
        self.asked: list[tuple[str, int, int]] = []

    def cat_file(self, url, version_id=None, start=None, end=None):
        self.calls += 1
        self.asked.append((url[-6:], start, end))
        return content(start, end)


OFFSETS = [0, 20, 40, 10, 30, 90]  # three 5-byte records in each of two shards


def two_shards(remote):
    from shmaug.sources.formats.table import RecordTable

    return RecordTable.build(("memory://b/s0.tar", "memory://b/s1.tar"),
                             np.array([0, 0, 0, 1, 1, 1]), np.array(OFFSETS),
                             np.array([5] * 6), None, "raw", remote=remote)


@pytest.fixture
def offsets_fs(monkeypatch):
    fs = Offsets()
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    return fs


@pytest.fixture
def remote(monkeypatch):
    monkeypatch.setattr(C, "BACKOFF_S", 0.0)
    made = C.Remote("memory", {"key": "AK", "secret": SECRET})
    return made



def test_a_503_burst_is_retried_then_read(monkeypatch, remote):
    fs = Flaky(C.RETRIES, OSError("503 SlowDown: please reduce your request rate"))
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    assert remote.fetch("memory://b/x.png") == b"0123456789" * 10
    assert fs.calls == C.RETRIES + 1


def test_a_lasting_failure_names_the_object_and_the_last_failure(monkeypatch, remote):
    fs = Flaky(99, TimeoutError(f"read timed out (secret {SECRET})"))
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    with pytest.raises(RemoteError, match=r"'memory://b/x.png' after 4 attempts.*TimeoutError"
                       ) as caught:
        remote.fetch("memory://b/x.png")
    assert fs.calls == C.RETRIES + 1
    assert SECRET not in str(caught.value) and "***" in str(caught.value)


def test_a_short_test_credential_is_not_masked_inside_other_words():
    """A local server's key "k" and secret "test": masked wherever they occurred, the bucket
    in an error read "buc***et" and a URL "b***t"; a real secret is masked whole."""
    from shmaug.sources.remote._secrets import secrets_of

    options = {"key": "k", "secret": "test", "client_kwargs": {"token": SECRET}}
    assert secrets_of(options) == [SECRET]


@pytest.mark.parametrize("error, raised", [(FileNotFoundError("gone"), FileNotFoundError),
                                           (PermissionError("403 AccessDenied"), RemoteError)])
def test_missing_objects_and_refused_credentials_are_not_retried(monkeypatch, remote, error,
                                                                 raised):
    fs = Flaky(99, error)
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    with pytest.raises(raised, match="memory://b/x.png"):
        remote.fetch("memory://b/x.png")
    assert fs.calls == 1


def refused_connection() -> BaseException:
    """What aiobotocore raises for a closed port: botocore's error around the refusal."""
    botocore = pytest.importorskip("botocore.exceptions")
    return botocore.EndpointConnectionError(
        endpoint_url="http://127.0.0.1:9/b/x.png",
        error=ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)"))


@pytest.mark.parametrize("error", ["builtin", "botocore"])
def test_a_refused_connection_is_reported_at_once(monkeypatch, remote, error):
    """Nothing listens there: another try cannot help (issue 36: 4 attempts, 41.5 s)."""
    fs = Flaky(99, refused_connection() if error == "botocore" else ConnectionRefusedError(
        111, "Connection refused"))
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    with pytest.raises(RemoteError, match=r"Could not connect to read 'memory://b/x.png': the "
                       r"connection was refused.*Fix: check that the endpoint") as caught:
        remote.fetch("memory://b/x.png")
    assert fs.calls == 1
    assert caught.value.__suppress_context__ and SECRET not in str(caught.value)


class Listed(Flaky):
    """A filesystem whose listings fail with ``error`` (then list one object)."""

    def glob(self, pattern: str, detail: bool = False) -> list[str]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return ["b/train-0"]

    def find(self, path: str, detail: bool = False) -> list[str] | dict[str, dict]:
        """As fsspec's: with ``detail``, each object's info by path."""
        found = self.glob(path)
        return {p: {"name": p, "size": 3, "ETag": '"e"', "type": "file"} for p in found} \
            if detail else found


@pytest.mark.parametrize("call", ["glob", "listing"])
@pytest.mark.parametrize("error, raised, says", [
    (OSError("503 SlowDown"), None, ""),
    (PermissionError("403 AccessDenied"), RemoteError, "was refused.*Fix: pass credentials"),
    ("refused", RemoteError, "connection was refused.*Fix: check that the endpoint"),
    (TimeoutError("timed out"), RemoteError, "after 4 attempts.*TimeoutError"),
])
def test_listings_follow_the_rules_of_reads(monkeypatch, remote, call, error, raised, says):
    """A glob and a bucket folder's listing: transient failures retried, refusals at once."""
    fs = Listed(1 if raised is None else 99,
                refused_connection() if error == "refused" else error)
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    run = {"glob": lambda: remote.glob("memory://b/train-*"),
           "listing": lambda: list(remote.listing("memory://b/").dirs)}[call]
    if raised is None:
        assert run() == (["memory://b/train-0"] if call == "glob" else ["memory://b"])
        assert fs.calls == 2
        return
    with pytest.raises(raised, match=says) as caught:
        run()
    assert "memory://b/" in str(caught.value) and SECRET not in str(caught.value)
    assert fs.calls == (C.RETRIES + 1 if "attempts" in says else 1)


@pytest.mark.parametrize("error, says", [
    ("refused", r"Could not connect to read 'memory://b/x.tar' to index it: the connection "
                r"was refused"),
    ("timeout", r"Could not read 'memory://b/x.tar' to index it; the last failure: "
                r"ReadTimeoutError.*Fix: check that the endpoint"),
])
def test_an_index_scan_that_fails_mid_stream_names_the_shard(monkeypatch, remote, error, says):
    """The scan streams a shard through the backend's file object, whose errors (botocore's
    are not OSError) follow the same rules."""
    botocore = pytest.importorskip("botocore.exceptions")
    failure = (refused_connection() if error == "refused"
               else botocore.ReadTimeoutError(endpoint_url="http://h/b/x.tar"))

    class Failing(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer):  # type: ignore[no-untyped-def]
            raise failure

    class Opens:
        def open(self, path, mode, **kwargs):  # type: ignore[no-untyped-def]
            return Failing()

    monkeypatch.setattr(C.Remote, "fs", lambda self: Opens())
    shards = Shards(["memory://b/x.tar"], remote, {"memory://b/x.tar": "100|etag"})
    with pytest.raises(RemoteError, match=says) as caught:
        with shards.opened("memory://b/x.tar") as (f, size):
            f.read(10)
    assert caught.value.__suppress_context__


@pytest.mark.parametrize("call", [ImageRecords.from_tfrecord, ImageRecords.from_webdataset])
def test_a_folder_given_for_shards_is_called_a_folder(tmp_path, call):
    folder = tmp_path / "shards"
    folder.mkdir()
    with pytest.raises(ArgumentError, match=(
            rf"\(type str\), which is a folder\. Fix: .*{re.escape(repr(str(folder) + '/*'))}")):
        call(str(folder))


def test_missing_shards_are_listed_with_an_ellipsis_where_cut_short(tmp_path):
    for k in range(2):
        (tmp_path / f"shard-{k}.tar").touch()
    with pytest.raises(ArgumentError) as caught:
        ImageRecords.from_webdataset(str(tmp_path / "shard-{0..5}.tar"))
    text = str(caught.value)
    assert "4 do not exist: " in text and "shard-4.tar" in text and "shard-5.tar" not in text
    assert "… (1 more)" in text, text
    with pytest.raises(ArgumentError) as caught:
        ImageRecords.from_webdataset(str(tmp_path / "shard-{0..4}.tar"))
    assert "3 do not exist: " in str(caught.value) and "…" not in str(caught.value)


def test_ranges_are_coalesced_and_returned_in_the_order_asked(monkeypatch, remote):
    fs = Flaky(0, OSError())
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    ranges = [(50, 5), (0, 3), (5, 2), (95, 5)]
    assert remote.read_ranges("memory://b/s.tar", ranges) == [b"01234", b"012", b"56",
                                                              b"56789"]
    assert RT.coalesce(ranges, gap=10) == [(0, 7, [1, 2]), (50, 55, [0]), (95, 100, [3])]
    # A request's span is bounded: a chain of close ranges splits into requests in flight
    # together rather than one long serial read.
    assert RT.coalesce(ranges, gap=50, span=60) == [(0, 55, [1, 2, 0]), (95, 100, [3])]
    assert RT.coalesce(ranges, gap=50, span=50) == [(0, 7, [1, 2]), (50, 100, [0, 3])]
    assert fs.calls == 1  # all within GAP of each other: one request


def test_secrets_are_masked_at_every_depth():
    options = {"key": "AK", "secret": SECRET, "anon": False, "token": "T0K",
               "client_kwargs": {"endpoint_url": "http://h", "aws_secret_access_key": SECRET}}
    shown = repr(C.Remote("memory", options))
    assert SECRET not in shown and "T0K" not in shown and "'AK'" not in shown
    assert "'endpoint_url': 'http://h'" in shown and "'anon': False" in shown
    # in text, values of SHORTEST characters or more (a repr masks every one, as above)
    assert S.secrets_of(options) == [SECRET]


def test_a_missing_backend_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gcsfs", None)
    with pytest.raises(ArgumentError, match=r'pip install "shmaug\[gcs\]"'):
        C.Remote("gs", None)


def test_an_unknown_scheme_is_refused_at_once_naming_it(caplog):
    pytest.importorskip("fsspec")
    caplog.set_level(logging.DEBUG, logger=C.__name__)
    for make in (lambda: ImageFiles.from_directory("s4://bucket/x/", image_size=(8, 8)),
                 lambda: ImageFiles.from_paths(["s4://bucket/x/a.png"], image_size=(8, 8))):
        with pytest.raises(ArgumentError, match=r"No filesystem reads s4:// URLs.*s3://.*"
                                                r"Fix: check the URL's scheme"):
            make()
    assert "retrying" not in caplog.text


def test_urls_and_local_paths():
    assert U.protocol_of("s3://b/k.png") == "s3" and U.protocol_of("GS://b/k") == "gs"
    assert U.protocol_of("/data/a.png") is None and U.protocol_of("file:///a.png") is None
    with pytest.raises(ArgumentError, match="storage_options"):
        B.remote_for("/data/a.png", {"anon": True})


def test_a_tasks_objects_are_fetched_together(monkeypatch, remote):
    lock, running, most = threading.Lock(), [0], [0]

    class Slow(Flaky):
        def cat_file(self, url, version_id=None, start=None, end=None):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.2)
            with lock:
                running[0] -= 1
            return url.encode()

    monkeypatch.setattr(C.Remote, "fs", lambda self: Slow(0, OSError()))
    urls = [f"memory://b/{i}.png" for i in range(12)]
    assert remote.fetch_all(urls) == [u.encode() for u in urls]
    assert most[0] > 1  # not one after another


def test_importing_shmaug_and_reading_local_files_imports_no_fsspec(tmp_path):
    code = ("import sys, numpy as np, cv2, shmaug\n"
            f"cv2.imwrite({str(tmp_path / 'a.png')!r}, np.zeros((4, 4, 3), np.uint8))\n"
            f"shmaug.ImageFiles.from_paths([{str(tmp_path / 'a.png')!r}]).read(0)\n"
            "assert 'fsspec' not in sys.modules and 's3fs' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_tasks_records_are_read_with_one_request_per_shard(monkeypatch, remote):
    fs = Flaky(0, OSError())
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    table = two_shards(remote)  # a task holds four of the six records
    table.prefetch([4, 0, 2, 3])
    assert fs.calls == 2  # grouped by shard, neighbours coalesced
    assert [bytes(table.fetch(i)) for i in (0, 2, 3, 4)] == [b"01234", b"01234", b"01234",
                                                             b"01234"]
    assert fs.calls == 2  # handed out from the task's reads
    assert bytes(table.fetch(5)) == b"01234" and fs.calls == 2  # its small shard read whole


@pytest.mark.parametrize("cache", [8 * 60, 100])
def test_shards_are_read_whole_only_where_all_of_them_fit_the_span_cache(monkeypatch, offsets_fs,
                                                                         remote, cache):
    # The span cache holds the shards' extents (45 + 95 bytes), or not.
    monkeypatch.setenv("SHMAUG_SPAN_CACHE_MB", str(cache / (1 << 20)))
    table = two_shards(remote)
    table.prefetch([0, 3])
    fits = cache >= 45 + 95
    assert sorted(offsets_fs.asked) == ([("s0.tar", 0, 45), ("s1.tar", 0, 95)] if fits else
                                        [("s0.tar", 0, 5), ("s1.tar", 10, 15)])
    for i in (0, 3, 1, 2, 5):  # the rest from the shards' spans, or a request each
        assert bytes(table.fetch(i)) == content(OFFSETS[i], OFFSETS[i] + 5)
    assert offsets_fs.calls == (2 if fits else 5)


def test_webdataset_braces_expand_as_webdataset_writes_them():
    from shmaug.sources.formats.shards import braces

    assert braces("s3://b/train-{000..002}.tar") == [f"s3://b/train-{k:03d}.tar" for k in range(3)]
    assert braces("a{1..2}-{x,y}") == ["a1-x", "a1-y", "a2-x", "a2-y"]
    assert braces("plain/{}.tar") == ["plain/{}.tar"]


@pytest.mark.parametrize("call", [
    lambda: ImageRecords.from_array_record("s3://b/train.array_record-*"),
    lambda: ImageRecords.from_tfds("mnist", data_dir="gs://tfds-data/datasets"),
])
def test_formats_read_only_from_local_files_refuse_urls_naming_the_fix(call):
    with pytest.raises(ArgumentError, match=r"on local disk.*URL.*Fix: copy them to local disk"):
        call()


def test_the_gap_read_through_grows_with_the_measured_round_trip():
    trip = RT.RoundTrip()
    assert trip.gap() == RT.GAP  # nothing measured yet: a fast store's gap
    for _ in range(30):
        trip.observe(0.020, 10_000)  # 20 ms per small request: a bucket's first byte
    assert trip.gap() == pytest.approx(0.020 * RT.BANDWIDTH, rel=0.01)
    trip.observe(5.0, 10_000)  # one stall moves the average, bounded: no 400 MB reads
    assert trip.gap() == RT.MAX_GAP
    for _ in range(60):
        trip.observe(0.0002, 10_000)  # local speed again
    assert trip.gap() == RT.GAP


def content(start: int, end: int) -> bytes:
    """Bytes that name their own offset (mod 251): a wrong slice or order shows."""
    return bytes(i % 251 for i in range(start, end))


def test_records_far_apart_share_a_request_once_requests_are_slow(monkeypatch, remote):
    class Slow(Flaky):
        def cat_file(self, url, version_id=None, start=None, end=None):
            self.calls += 1
            time.sleep(0.02)
            return content(start, end)

    fs = Slow(0, OSError())
    monkeypatch.setattr(C.Remote, "fs", lambda self: fs)
    monkeypatch.setenv("SHMAUG_SPAN_CACHE_MB", "0")  # coalescing alone: every read is a request
    ranges = [(1_000_300, 300), (1_000, 256)]  # ~1 MB apart: two requests at the first gap
    expected = [content(o, o + n) for o, n in ranges]
    assert remote.read_ranges("memory://b/s.tar", ranges) == expected
    assert fs.calls == 2
    for _ in range(20):  # the process learns that a request costs ~20 ms
        remote.read_ranges("memory://b/s.tar", [(0, 256)])
    fs.calls = 0
    assert remote.read_ranges("memory://b/s.tar", ranges) == expected  # the same bytes...
    assert fs.calls == 1  # ...in one request: reading 1 MB costs less than 20 ms more


def test_only_s3_is_asked_for_a_whole_object_in_one_get():
    def one_get(protocol, options):  # decided once, when the process's filesystem is built
        remote = C.Remote(protocol, options)
        remote.fs()
        return remote._one_get

    assert one_get("memory", None) == {}
    pytest.importorskip("s3fs")
    assert one_get("s3", {"anon": True}) == {"max_concurrency": 1}
    assert one_get("s3", {"anon": True, "max_concurrency": 8}) == {}  # the user's


def test_the_records_of_the_tasks_queued_behind_are_read_with_the_tasks(offsets_fs, remote):
    table = two_shards(remote)
    tasks = [[0, 3], [1, 4], [2, 5]]  # a worker's task, then the two queued behind it
    for k, task in enumerate(tasks):
        table.prefetch(task, [i for later in tasks[k + 1:] for i in later])
        assert [bytes(table.fetch(i)) for i in task] == [content(OFFSETS[i], OFFSETS[i] + 5)
                                                         for i in task]
    assert offsets_fs.calls == 2  # one request per shard for all three tasks (alone: six)


def rounds_of(fetched, outcomes=None):
    """A ``fetch`` for ``Fetched.request`` that records each round's samples and puts
    ``outcomes[i]`` (default: b"x") for each, and the list it records them in."""
    rounds = []

    def fetch(samples):
        rounds.append(samples)
        fetched.put(samples, [(outcomes or {}).get(i, b"x") for i in samples])
    return fetch, rounds


def settled(fetched):
    """Wait for the background rounds asked for so far."""
    for done in list(fetched._flight.values()):
        done.result(timeout=10)
    return fetched


def test_read_ahead_is_bounded_and_forgets_what_is_no_longer_wanted(monkeypatch):
    monkeypatch.setattr(A, "AHEAD", 3)
    fetched = A.Fetched()
    fetch, rounds = rounds_of(fetched, {0: RemoteError("0"), 1: b"1", 2: b"2",
                                        3: RemoteError("3")})
    # No size seen yet: as many samples ahead as the task has, in the task's round.
    fetched.request([0, 1], iter([2, 3, 4, 5]), fetch)
    assert rounds == [[0, 1, 2, 3]]
    assert isinstance(fetched.take(0), RemoteError)  # the task's own failure is its error
    assert fetched.take(1) == b"1" and fetched.take(1) is None  # each use handed out once
    fetched.request([2, 3], [], fetch)
    assert rounds[-1] == [3]  # a queued sample that failed: fetched again
    fetch, rounds = rounds_of(fetched, {3: FileNotFoundError("3")})
    fetched.request([3], [], fetch)  # (taken by no one: its task was cancelled)
    assert isinstance(fetched.take(3), FileNotFoundError)
    # Sizes known: at most AHEAD samples ahead; sample 2 (a cancelled task's) is dropped.
    fetched.request([7], range(8, 20), fetch)
    assert rounds[-1] == [7, 8, 9, 10] and fetched.take(2) is None


def test_read_ahead_hands_a_sample_out_once_per_use_and_retries_stale_failures():
    fetched = A.Fetched()
    fetch, rounds = rounds_of(fetched, {5: b"a", 6: b"b", 1: RemoteError("1")})
    fetched.request([5, 5, 6], [6], fetch)  # drawn twice here, and once behind
    assert rounds == [[5, 6]]
    assert [fetched.take(i) for i in (5, 5, 5, 6)] == [b"a", b"a", None, b"b"]
    fetched.request([6], [], fetch)
    assert len(rounds) == 1 and fetched.take(6) == b"b"
    fetched.request([1], [], fetch)  # its task fails before taking it
    fetched.request([1], [], fetch)
    assert rounds[-2:] == [[1], [1]]  # the next task asking tries again


def test_read_ahead_holds_about_ahead_bytes_once_sizes_are_known(monkeypatch):
    monkeypatch.setattr(A, "AHEAD_BYTES", 100)
    fetched = A.Fetched()
    fetch, rounds = rounds_of(fetched, {0: b"x" * 40})  # 40 bytes a sample: two ahead
    fetched.request([0], [], fetch)
    fetched.request([1], range(2, 10), fetch)
    assert rounds[-1] == [1, 2, 3]


def test_the_next_round_travels_while_the_task_decodes():
    """Once half the window behind a task is neither here nor asked for, it is asked for in
    the background: the task that asks goes on at once; a later task whose samples are in
    that round waits for it, and for no more."""
    fetched = A.Fetched()
    started, release = threading.Event(), threading.Event()

    def fetch(samples):
        rounds.append(samples)
        if len(rounds) > 2:
            started.set()
            assert release.wait(10)  # the background round, held in flight
        fetched.put(samples, [b"x"] * len(samples))
    rounds: list = []
    fetched.request([0], [], fetch)  # a size seen: the window is AHEAD samples
    fetched.request([1, 2], [3, 4, 5, 6, 7, 8], fetch)
    assert rounds[-1] == [1, 2, 3, 4, 5, 6, 7, 8]  # the task's round takes the window
    fetched.request([3, 4], [5, 6, 7, 8, 9, 10], fetch)
    assert len(rounds) == 2  # a third of the window not asked for: not yet
    fetched._sample_s, fetched._round_s = 1.0, 0.5  # its round ends before it is wanted
    fetched.request([5, 6], [7, 8, 9, 10, 11, 12], fetch)  # returns with the round held
    assert started.wait(10) and rounds[-1] == [9, 10, 11, 12] and fetched.take(5) == b"x"
    waiting = threading.Thread(target=fetched.request, args=([9, 10], [11, 12], fetch))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive()  # its samples are in the round held in flight
    release.set()
    waiting.join(10)
    assert not waiting.is_alive() and fetched.take(9) == b"x" and fetched.take(12) == b"x"


def test_a_round_that_would_end_too_late_waits_to_go_with_the_next_tasks():
    """Where the work queued before them is shorter than a round, the samples not asked for
    go with the next task's own round: one wait, not one per task."""
    fetched = A.Fetched()
    fetch, rounds = rounds_of(fetched)
    fetched.request([0], [], fetch)
    fetched.request([1, 2], [3, 4], fetch)
    fetched._sample_s, fetched._round_s = 0.001, 10.0  # a round takes 10 s, a sample 1 ms
    fetched.request([3, 4], [5, 6, 7, 8], fetch)
    assert settled(fetched) and rounds[-1] == [1, 2, 3, 4]  # half the window: not in time
    fetched.request([5, 6], [7, 8, 9, 10], fetch)
    assert rounds[-1] == [5, 6, 7, 8, 9, 10]


def test_a_background_rounds_failure_is_fetched_again_by_its_own_task_and_no_thread_stays():
    """A failure in a round fetched ahead is not the task's error, even when its task is
    already waiting for that round: the task fetches it again. The round's thread is a daemon
    (a worker's exit never waits for a round) and ends once no round is queued."""
    fetched = A.Fetched()
    held, release = threading.Event(), threading.Event()

    def fetch(samples):
        rounds.append(samples)
        if 5 in samples and not release.is_set():  # the background round: held, then fails 4
            held.set()
            assert release.wait(10)
            fetched.put(samples, [RemoteError("a timeout") if i == 4 else b"x"
                                  for i in samples])
        else:
            fetched.put(samples, [b"x"] * len(samples))
    rounds: list = []
    fetched.request([0], [], fetch)
    fetched.request([1, 2], [3], fetch)
    fetched._sample_s, fetched._round_s = 1.0, 0.5
    fetched.request([3], [4, 5], fetch)  # 4 and 5 in the background
    assert held.wait(10)
    threads = [t for t in threading.enumerate() if t.name == "shmaug-ahead"]
    assert len(threads) == 1 and threads[0].daemon
    waiting = threading.Thread(target=fetched.request, args=([4], [5], fetch))
    waiting.start()  # the task of 4 waits for the round bringing it
    waiting.join(0.2)
    release.set()
    waiting.join(10)
    threads[0].join(10)
    assert not waiting.is_alive() and not threads[0].is_alive()  # no round left: it ended
    assert rounds[-1] == [4] and fetched.take(4) == b"x"  # fetched again, by its task


def test_a_round_that_raises_fails_its_own_samples_only():
    fetched = A.Fetched()

    def fetch(samples):
        raise ValueError("a bug in the source")
    fetched.request([0], [], fetch)
    assert isinstance(fetched.take(0), ValueError) and fetched.take(1) is None
    fetch_ok, _ = rounds_of(fetched)
    fetched.request([0], [], fetch_ok)  # not a missing object: the next task tries again
    assert settled(fetched).take(0) == b"x"


def test_only_a_prefetch_hook_that_names_ahead_is_given_the_queued_tasks_samples():
    from shmaug.engine.source import prefetch_hook as _prefetch_hook

    class Old:
        def prefetch(self, indices, *, verbose=False):
            pass

    class Chunked:
        def prefetch(self, indices, chunk=64):
            pass

    class New:
        def prefetch(self, indices, ahead=()):
            pass

    assert [_prefetch_hook(t())[1] for t in (Old, Chunked, New)] == [False, False, True]
    assert _prefetch_hook(object()) == (None, False)


def test_bytes_read_through_a_gap_serve_a_later_read_without_a_request(offsets_fs, remote):
    url = "memory://b/s.tar"
    assert remote.read_ranges(url, [(0, 10), (5000, 10)]) == [content(0, 10),
                                                             content(5000, 5010)]
    assert offsets_fs.calls == 1  # one request read through the gap...
    assert remote.read_ranges(url, [(2000, 30), (4000, 7)]) == [content(2000, 2030),
                                                              content(4000, 4007)]
    assert offsets_fs.calls == 1  # ...and the records in it come from what it read
    assert remote.read_ranges(url, [(5005, 10)]) == [content(5005, 5015)]  # past its end
    assert remote.read_ranges("memory://b/other.tar", [(0, 10)]) == [content(0, 10)]
    assert offsets_fs.calls == 3


def test_the_span_cache_is_bounded_and_drops_the_least_recently_used(monkeypatch):
    monkeypatch.setenv("SHMAUG_SPAN_CACHE_MB", str(100 / (1 << 20)))
    spans = _spans.Spans()
    spans.keep("a", 0, content(0, 40))
    spans.keep("b", 0, content(0, 40))
    assert spans.find("a", 10, 5) == content(10, 15)  # "a" is now the most recent
    spans.keep("c", 100, content(100, 140))  # 120 bytes: "b" goes
    assert spans.find("b", 0, 5) is None and spans.find("a", 0, 40) == content(0, 40)
    assert spans.find("c", 130, 10) == content(130, 140) and spans.find("c", 130, 11) is None
    assert spans.find("c", 90, 20) is None  # begins before the span
    spans.keep("d", 0, content(0, 101))  # larger than the whole cache: not kept
    assert spans.find("d", 0, 1) is None and spans.find("c", 100, 1) == content(100, 101)


def test_spans_of_one_object_that_overlap_are_merged_and_those_that_touch_are_not(monkeypatch):
    spans = _spans.Spans()
    spans.keep("u", 100, content(100, 110))
    spans.keep("u", 0, content(0, 10))
    spans.keep("u", 5, content(5, 20))  # overlaps [0, 10): one span [0, 20)
    spans.keep("u", 20, content(20, 30))  # touches it: apart (no record straddles them)
    assert spans.find("u", 2, 18) == content(2, 20) and spans.find("u", 20, 10) == content(20, 30)
    assert spans.find("u", 15, 10) is None and spans.find("u", 28, 5) is None
    spans.keep("u", 15, content(15, 105))  # bridges all three
    assert spans.find("u", 0, 110) == content(0, 110)
    assert spans.find("v", 0, 1) is None
    monkeypatch.setenv("SHMAUG_SPAN_CACHE_MB", str(150 / (1 << 20)))
    spans.keep("u", 100, content(100, 200))  # merged, 200 bytes would not fit: kept alone
    assert spans.find("u", 100, 100) == content(100, 200) and spans.find("u", 0, 1) is None


def test_the_span_cache_agrees_with_the_object_under_random_reads(monkeypatch):
    """Whatever is kept, merged or dropped, a hit is the object's bytes and the cache stays
    within its bound, its spans sorted and disjoint."""
    rng = np.random.default_rng(0)
    for cache in (50, 300, 2000):
        monkeypatch.setenv("SHMAUG_SPAN_CACHE_MB", str(cache / (1 << 20)))
        spans = _spans.Spans()
        for _ in range(400):
            url = f"u{rng.integers(2)}"
            start, size = int(rng.integers(0, 1000)), int(rng.integers(1, 200))
            if rng.random() < 0.5:
                spans.keep(url, start, content(start, start + size))
            else:
                found = spans.find(url, start, size)
                assert found is None or found == content(start, start + size)
            assert spans._size == sum(map(len, spans._data.values())) <= cache
            for key, starts in spans._starts.items():
                ends = [s0 + len(spans._data[(key, s0)]) for s0 in starts]
                assert starts == sorted(starts) and all(e <= s for e, s in zip(ends, starts[1:]))


@pytest.mark.parametrize("value, expected", [("128", 128 << 20), ("0", 0), ("0.5", 1 << 19),
                                             ("lots", 32 << 20), ("-1", 32 << 20)])
def test_the_span_cache_is_sized_from_the_environment(value, expected):
    code = ("import logging; logging.basicConfig()\n"
            "from shmaug.sources.remote._settings import settings; "
            "print(settings().span_cache)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SHMAUG_SPAN_CACHE_MB": value},
                          check=True)
    assert int(done.stdout) == expected
    assert ("SHMAUG_SPAN_CACHE_MB" in done.stderr) == (expected == 32 << 20)


@pytest.mark.parametrize("value, expected", [("", "auto"), ("fsspec", "fsspec"),
                                             (" FSSPEC ", "fsspec"), ("rust", "auto")])
def test_the_transport_is_read_from_the_environment(monkeypatch, caplog, value, expected):
    from shmaug.sources.remote._settings import settings

    monkeypatch.setenv("SHMAUG_TRANSPORT", value)
    with caplog.at_level(logging.WARNING, logger="shmaug.sources.remote._settings"):
        assert settings().transport == expected
    assert ("SHMAUG_TRANSPORT='rust' is not one of auto, fsspec" in caplog.text) == (
        value == "rust")


@pytest.mark.parametrize("value, expected", [("", False), ("1", True), (" On ", True),
                                             ("0", False), ("maybe", False)])
def test_offline_is_read_from_the_environment(monkeypatch, caplog, value, expected):
    from shmaug.sources.remote._settings import settings

    monkeypatch.setenv("SHMAUG_OFFLINE", value)
    with caplog.at_level(logging.WARNING, logger="shmaug.sources.remote._settings"):
        assert settings().offline is expected
    assert ("SHMAUG_OFFLINE='maybe' is neither on" in caplog.text) == (value == "maybe")


def test_offline_every_call_fails_at_once_naming_the_object_and_no_download_is_queued(
        monkeypatch, tmp_path):
    """An endpoint that accepts connections and never answers: offline, no call reaches it
    (a call that did would wait there until the test's timeout)."""
    import socket

    from shmaug.sources.cache.disk_cache import DiskCache

    pytest.importorskip("s3fs")
    monkeypatch.setenv("SHMAUG_OFFLINE", "1")
    monkeypatch.setenv("SHMAUG_REQUEST_TIMEOUT_S", "0.5")  # a call that went would fail soon
    monkeypatch.setattr(C, "RETRIES", 0)
    with socket.create_server(("127.0.0.1", 0), backlog=8) as endpoint:
        endpoint.setblocking(False)
        remote = C.Remote("s3", {"client_kwargs": {
            "endpoint_url": f"http://127.0.0.1:{endpoint.getsockname()[1]}"}, "anon": True})
        remote.cache = DiskCache(str(tmp_path), None)
        url = "s3://bucket/train-0.tar"
        for call in (lambda: remote.fetch(url), lambda: remote.read_ranges(url, [(0, 10)]),
                     lambda: remote.glob("s3://bucket/*.tar")):
            with pytest.raises(RemoteError, match=r"Could not (read|list) 's3://bucket/.*': "
                                                  r"SHMAUG_OFFLINE=1 keeps shmaug off the "
                                                  r"network, and the disk cache "
                                                  r"\(cache_dir=.*\) does not hold it\. "
                                                  r"Fix: unset SHMAUG_OFFLINE"):
                call()
        assert isinstance(remote.identities([url])[0], RemoteError)
        remote.cache.want(url, remote)
        assert remote.cache._jobs is None  # nothing queued, no thread started
        with pytest.raises(BlockingIOError):  # no connection waits to be accepted
            endpoint.accept()


def test_a_urls_own_secrets_are_masked_wherever_shmaug_shows_it():
    """A password before the host and a presigned URL's signature were printed whole in
    errors, warnings and stats()["unreadable"] (only storage_options were masked), and a
    presigned URL's query was read as its file's extension and refused."""
    import warnings

    import shmaug
    from shmaug.errors import shown_url
    from shmaug.sources.images.folders import check_extensions

    assert shown_url("https://bob:hunter2password@h.example/a.png") == \
        "https://***@h.example/a.png"
    assert shown_url("https://ghp_t0ken@github.com/a.png") == "https://***@github.com/a.png"
    assert shown_url("http://[::1") == "http://[::1"  # (malformed: shown, not raised)
    for key in ("s3://b/cat#1.jpg", "gs://b/what?.png"):  # a key's own "#" and "?"
        assert shown_url(key) == key
    assert shown_url("https://h.example/a.png?X-Amz-Signature=abc&X-Amz-Credential=AKIA&v") \
        == "https://h.example/a.png?X-Amz-Signature=***&X-Amz-Credential=***&***"
    plain = "s3://bucket/train/a.png"
    assert shown_url(plain) == plain
    text = str(shmaug.ArgumentError("cannot read 'https://u:pw12345678@h/a.png?token=t0k'"))
    assert "pw12345678" not in text and "t0k" not in text and "https://***@h/a.png" in text
    said = str(shmaug.ArgumentError("see https://h/a.png?sig=s3cr3t). Fix: it, or "
                                    "http://[fe80::1%eth0/x."))
    assert said == "see https://h/a.png?sig=***). Fix: it, or http://[fe80::1%eth0/x.", said
    said = str(shmaug.ArgumentError("'https://h/denied(1).png?X-Amz-Signature=s3cr3t' and "
                                    "(http://h/x.png?BareT0ken99)"))  # a name's own ( )
    assert said == "'https://h/denied(1).png?X-Amz-Signature=***' and (http://h/x.png?***)"
    said = str(shmaug.ArgumentError("(https://h/a.png?sig=s3cr3t)—next, `https://h/b?v`"))
    assert said == "(https://h/a.png?sig=***)—next, `https://h/b?***`", said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shmaug.errors.warn("skipped https://h/a.png?sig=s3cr3t")
    assert "s3cr3t" not in str(caught[0].message)
    check_extensions(["https://h.example/a.png?X-Amz-Signature=abc",  # a .png: read
                      "https://h.example/get?file=cat.jpg", "s3://b/cat#1.jpg"])
    with pytest.raises(shmaug.ArgumentError, match=r"e\.g\. 'https://h/a\.txt\?sig=\*\*\*'"):
        check_extensions(["https://h/a.txt?sig=s3cr3t"])
