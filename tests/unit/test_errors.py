from __future__ import annotations

import pickle
import re
import threading
import traceback

import numpy as np
import pytest

from shmaug.errors import _PACKAGE_DIR as PACKAGE_DIR
from shmaug.errors import ErrorRecord, WorkerError, rebuild


class NeedsTwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)
        self.code, self.detail = a, b


def record_for(exc):
    try:
        raise exc
    except Exception as caught:
        return ErrorRecord.capture(caught, traceback.format_exc(), worker_id=1, sample_index=17,
                                   epoch=2, op="my_op")


@pytest.mark.parametrize("exc", [ValueError("bad"), KeyError("k"), OSError(5, "io"),
                                 ZeroDivisionError("zero")])
def test_rebuilt_error_is_both_the_original_type_and_a_worker_error(exc):
    err = rebuild(pickle.loads(pickle.dumps(record_for(exc))))
    assert isinstance(err, type(exc)) and isinstance(err, WorkerError)
    assert type(err).__name__ == type(exc).__name__
    text = str(err)
    assert "sample index 17" in text and "worker 1" in text and "my_op" in text
    assert "Traceback" in text
    assert err.sample_index == 17 and err.worker_id == 1 and err.epoch == 2


def test_a_type_whose_constructor_wants_more_than_a_message_keeps_its_type_and_attributes():
    """``except NeedsTwoArgs`` catches it, and ``.code`` is the worker's (it was a plain
    WorkerError)."""
    err = rebuild(record_for(NeedsTwoArgs(42, "custom")))
    assert isinstance(err, NeedsTwoArgs) and isinstance(err, WorkerError)
    assert (err.code, err.detail) == (42, "custom")
    assert "42" in str(err) and "custom" in str(err) and "sample index 17" in str(err)


def test_a_builtin_that_needs_its_fields_is_its_nearest_base_not_one_with_zeroed_fields():
    try:
        b"\xff".decode("utf-8")
    except UnicodeDecodeError as exc:
        err = rebuild(record_for(exc))
    assert not isinstance(err, UnicodeDecodeError) and isinstance(err, ValueError)
    assert "UnicodeDecodeError" in str(err) and "0xff" in str(err)


def test_attributes_that_do_not_pickle_are_left_out():
    exc = KeyError("nope")
    exc.lock, exc.code = threading.Lock(), 7  # a lock does not pickle: left out, the rest kept
    err = rebuild(record_for(exc))
    assert isinstance(err, KeyError) and err.code == 7 and not hasattr(err, "lock")


@pytest.mark.parametrize("exc", [ValueError("bad"), KeyError("k"), OSError(5, "io"),
                                 NeedsTwoArgs(42, "custom"), MadeByNewLater := None][:4])
def test_a_rebuilt_error_pickles_and_copies_as_itself(exc):
    """To a process pool's parent, a Ray driver, ``copy.deepcopy``: the class made at run time
    did not pickle ("not the same object as builtins.ValueError")."""
    import copy

    err = rebuild(record_for(exc))
    err.seen = "by the trainer"  # set after it was raised: kept too
    for again in (pickle.loads(pickle.dumps(err)), copy.deepcopy(err)):
        assert type(again) is type(err) and isinstance(again, WorkerError)
        assert str(again) == str(err) and again.sample_index == 17 and again.seen == err.seen
        assert vars(again).get("code") == vars(err).get("code")


def test_shmaugs_errors_with_keyword_constructors_pickle():
    from shmaug.errors import ArgumentError, WorkerDied, WorkerTimeout

    for err in (WorkerDied("gone", worker_id=1, exitcode=-9),
                WorkerTimeout("slow", worker_id=0, sample_index=5), ArgumentError("bad")):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err) and vars(again) == vars(err)


class ShapeMemoryError(MemoryError):  # like numpy's _ArrayMemoryError(shape, dtype)
    def __init__(self, shape, dtype):
        super().__init__(f"Unable to allocate {shape} {dtype}")


def test_an_error_whose_constructor_takes_no_message_is_of_its_own_type():
    err = rebuild(record_for(ShapeMemoryError((2**31,), "uint8")))
    assert isinstance(err, ShapeMemoryError) and isinstance(err, WorkerError)
    assert "Unable to allocate" in str(err) and type(err).__name__ == "ShapeMemoryError"


class MadeByNew(LookupError):  # a __new__ that wants its own arguments too
    def __new__(cls, key, table):
        return super().__new__(cls, key, table)


def test_an_error_that_cannot_be_made_is_its_nearest_base_that_can():
    err = rebuild(record_for(MadeByNew("k", "t")))
    assert type(err).__mro__[1:3] == (LookupError, WorkerError)
    assert isinstance(err, LookupError) and not isinstance(err, MadeByNew)
    assert "MadeByNew" in str(err)


def _through_shmaug(exc):
    """``exc`` raised by user code called from inside shmaug (a bound op), as in a worker."""
    from shmaug.ops import core

    def user_code(image, rng):
        raise exc

    spec = core.OpSpec("user", user_code, (), {}, __name__)
    core._REGISTRY["_test_user_code"] = spec
    try:
        core.Op("_test_user_code")(None, None)
    except Exception as caught:
        return ErrorRecord.capture(caught, traceback.format_exc(), worker_id=0, sample_index=3,
                                   epoch=0, op="user")
    finally:
        del core._REGISTRY["_test_user_code"]


def test_the_message_leaves_shmaugs_frames_out_unless_a_switch_asks(monkeypatch):
    import sys
    import types

    from shmaug import errors

    monkeypatch.delenv(errors.FILTERING_ENV, raising=False)
    record = _through_shmaug(ValueError("nope"))
    assert "ops/core.py" in record.traceback  # kept in full on the record
    text = str(rebuild(record))
    assert "in user_code" in text and "ops/core.py" not in text
    monkeypatch.setenv(errors.FILTERING_ENV, "off")
    assert "ops/core.py" in str(rebuild(record))
    monkeypatch.delenv(errors.FILTERING_ENV)
    # Keras' own switch, when Keras is in use: keras.config.disable_traceback_filtering()
    keras = types.SimpleNamespace(config=types.SimpleNamespace(
        is_traceback_filtering_enabled=lambda: False))
    monkeypatch.setitem(sys.modules, "keras", keras)
    assert "ops/core.py" in str(rebuild(record))


def _ours_only(call, *args):
    """The record of what ``call(*args)`` (shmaug's own code) raised, with only shmaug's
    frames on its traceback, as in a worker (whose loop is shmaug's too)."""
    try:
        call(*args)
    except Exception as caught:
        ours_only = caught.with_traceback(caught.__traceback__.tb_next)
        return ErrorRecord.capture(ours_only, traceback.format_exc(), worker_id=0,
                                   sample_index=0, epoch=0, op=call.__name__)
    raise AssertionError(f"{call.__name__} did not raise")


def _shown_frames_of_shmaug(text):
    return [line for line in text.splitlines()
            if line.strip().startswith('File "') and PACKAGE_DIR in line]


def test_an_error_raised_with_only_shmaugs_frames_shows_none_and_says_so(monkeypatch):
    # The header said "shmaug's own frames left out", then showed one (issue 36).
    from shmaug import errors
    from shmaug.ops import params as _params

    monkeypatch.delenv(errors.FILTERING_ENV, raising=False)
    record = _ours_only(_params.check_image, "not an image")
    assert record.only_ours and "in check_image" in record.traceback  # kept in full
    text = str(rebuild(record))
    assert not _shown_frames_of_shmaug(text), text
    assert "Worker traceback: shmaug's own frames only, left out" in text
    assert "SHMAUG_TRACEBACK_FILTERING=off shows them" in text
    monkeypatch.setenv(errors.FILTERING_ENV, "off")
    assert "in check_image" in str(rebuild(record))


def test_a_traceback_said_to_leave_shmaugs_frames_out_shows_none_of_them(monkeypatch):
    from shmaug import errors
    from shmaug.ops import params as _params
    from shmaug.sources.images import decode as _decode

    monkeypatch.delenv(errors.FILTERING_ENV, raising=False)
    garbage = np.frombuffer(b"no image here", np.uint8)
    for record in (_through_shmaug(ValueError("nope")), record_for(ValueError("bad")),
                   _ours_only(_params.check_image, "not an image"),
                   _ours_only(_decode.decode_bytes, garbage, "image file 'a.png'", "rgb")):
        text = str(rebuild(record))
        assert "frames left out" in text or "frames only, left out" in text, text
        assert not _shown_frames_of_shmaug(text), text


def test_the_error_type_is_named_once():
    # "ImageReadError: ImageReadError: Cannot read ..." (issue 36): Python's report names
    # the type, so the message does not when the error is of the worker's own type.
    from shmaug import ImageReadError
    from shmaug.sources.images import decode as _decode

    garbage = np.frombuffer(b"no image here", np.uint8)
    err = rebuild(_ours_only(_decode.decode_bytes, garbage, "image file 'a.png'", "rgb"))
    assert isinstance(err, ImageReadError) and isinstance(err, WorkerError)
    shown = "".join(traceback.format_exception_only(type(err), err))
    assert shown.startswith("shmaug.errors.ImageReadError: Cannot read image file 'a.png'")
    assert shown.count("ImageReadError") == 1, shown
    user = rebuild(record_for(ValueError("bad")))
    assert str(user).startswith("bad\n") and "ValueError: bad" in str(user)  # its traceback
    # Raised as another type, the message keeps the worker's type name.
    assert str(rebuild(record_for(MadeByNew("a", "b")))).startswith("MadeByNew: ")


def test_a_read_only_complaint_gets_the_fix():
    record = record_for(ValueError("output array is read-only"))
    assert "read-only view of the data in shared memory" in record.message
    assert "image = image.copy()" in str(rebuild(record))
    assert record_for(ValueError("bad")).message == "bad"


def _fails_on_marked(image, rng):
    if image[0, 0] == 7:
        raise ValueError("the user's op failed")
    return image


def _shmaug_frames(call):
    from pathlib import Path

    with pytest.raises(ValueError) as caught:
        call()
    return {Path(f.filename).relative_to(PACKAGE_DIR).as_posix()
            for f in traceback.extract_tb(caught.value.__traceback__)
            if f.filename.startswith(PACKAGE_DIR)}


def test_faults_md_names_the_shmaug_frames_pythons_own_traceback_shows():
    # docs/faults.md said shmaug's frames are left out of "the traceback", and Python's own
    # (of the raise in the main process) showed loader.py and handoff/prefetch.py (issue 36): those
    # cannot be taken out of it, so the page names them.
    from pathlib import Path

    import shmaug

    page = (Path(__file__).parents[2] / "docs" / "faults.md").read_text(encoding="utf-8")
    x = np.zeros((8, 4, 4), np.uint8)
    x[5, 0, 0] = 7
    seen = set()
    with shmaug.Loader(x, batch_size=4, augment=_fails_on_marked, workers=0) as loader:
        seen |= _shmaug_frames(lambda: loader.batch(1))
        seen |= _shmaug_frames(lambda: list(loader))
    seen |= _shmaug_frames(lambda: shmaug.Loader(x[5:], augment=_fails_on_marked, workers=0))
    assert {"engine/loader.py", "engine/handoff/prefetch.py"} <= seen, seen
    assert all(f"`{name}`" in page for name in seen), (seen, "not all named in faults.md")


def test_a_dataset_dict_is_refused_in_sentences_that_end_and_begin():
    # "(type DatasetDict). it is a DatasetDict: pick a split ... Fix: pass one split" (issue 36)
    import re

    import shmaug

    datasets = pytest.importorskip("datasets")
    split = datasets.Dataset.from_dict({"image": [b""], "label": [0]})
    with pytest.raises(shmaug.ArgumentTypeError) as caught:
        shmaug.ImageRecords.from_huggingface(datasets.DatasetDict(train=split, test=split))
    text = str(caught.value)
    assert "a DatasetDict of the splits ['train', 'test']. Fix: " in text, text
    assert text.endswith("pick a split, e.g. `dataset['train']`."), text
    assert not re.search(r"\. [a-z]", text.replace("e.g. ", "")), text  # a sentence's start
    assert text.count("Fix:") == 1 and "(type DatasetDict)" not in text, text


def _docstring_tree(doc):
    """The class names drawn in errors.py's tree: the first word of each line, after its
    branch (``├── ``, ``│   └── ``)."""
    import re

    return {m.group(1) for m in re.finditer(r"^[│├└─ ]*([A-Z]\w+)", doc, re.M)}


def test_every_exported_error_is_on_the_api_page_and_in_the_tree():
    # RemoteError was exported but missing from docs/api/errors.md (issue 36).
    import re
    from pathlib import Path

    import shmaug
    from shmaug import errors

    # Read from shmaug.errors, not getattr(shmaug, ...): that would load the Keras facade's
    # names, which a Python without Keras (CI's 3.10 and 3.13 runs) cannot import
    exported = {name for name in shmaug.__all__ if isinstance(vars(errors).get(name), type)
                and issubclass(vars(errors)[name], (errors.ShmaugError, Warning))}
    page = (Path(__file__).parents[2] / "docs" / "api" / "errors.md").read_text(encoding="utf-8")
    members = set(re.search(r"members: \[([^\]]*)\]", page).group(1).replace(" ", "").split(","))
    assert exported <= members, exported - members
    assert exported <= _docstring_tree(errors.__doc__), exported - _docstring_tree(errors.__doc__)


def test_the_errors_docstring_is_markdown_not_restructuredtext():
    # mkdocstrings renders it as Markdown: a "::" showed as text on the errors page (issue 36).
    from shmaug import errors

    assert "::" not in errors.__doc__ and "```text" in errors.__doc__


def test_an_os_error_of_shmaugs_keeps_its_file_name_through_a_pickle():
    import copy

    from shmaug.errors import ImageReadError

    err = ImageReadError(2, "No such file", "/data/a.jpg")
    for again in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert (again.errno, again.filename, str(again)) == (2, "/data/a.jpg", str(err))


def test_a_rebuilt_error_loads_where_its_attributes_classes_do_not(tmp_path):
    """The worker's attributes are made again from its record, which tolerates a class that
    does not load: a pickled error whose attribute was of such a class failed to load."""
    import subprocess
    import sys

    (tmp_path / "usererr.py").write_text(
        "class Thing: pass\n"
        "class MyErr(ValueError):\n"
        "    def __init__(self, code, detail):\n"
        "        super().__init__(f'{code}: {detail}'); self.code = code; self.thing = Thing()\n")
    make = ("import sys, pickle, traceback; sys.path.insert(0, sys.argv[1])\n"
            "import shmaug.errors as E; from usererr import MyErr\n"
            "try: raise MyErr(3, 'bad')\n"
            "except Exception as x: rec = E.ErrorRecord.capture(x, traceback.format_exc(), "
            "worker_id=1, sample_index=2, epoch=0, op='f')\n"
            "sys.stdout.buffer.write(pickle.dumps(E.rebuild(rec)))\n")
    data = subprocess.run([sys.executable, "-c", make, str(tmp_path)], capture_output=True,
                          check=True).stdout
    err = pickle.loads(data)  # (usererr is not importable here)
    assert isinstance(err, WorkerError) and err.code == 3 and "MyErr" in str(err)


def test_a_worker_that_cannot_start_near_the_open_file_limit_names_the_limit(monkeypatch):
    """With `ulimit -n` 28-32 (a container's), the workers died of "Too many open files" and
    the error named only a module not importable there, or a dataset file rewritten: the limit
    is named beside them (the worker's own error, printed above, tells which)."""
    from shmaug import platform
    from shmaug.engine.workers.reports import describe_startup_failure

    monkeypatch.setattr(platform, "open_files", lambda: (26, 32))
    for replacing in (False, True):
        error = describe_startup_failure(0, 1, "forkserver", replacing=replacing)
        assert re.search(r"If its error says \"Too many open files\": This process has 26 "
                         r"files open of the 32 its `ulimit -n` allows.*raise the limit "
                         r"\(`ulimit -n 4096`", str(error))
    monkeypatch.setattr(platform, "open_files", lambda: (26, 1024))
    error = describe_startup_failure(0, 1, "forkserver")
    assert "importable" in str(error) and "ulimit" not in str(error)
