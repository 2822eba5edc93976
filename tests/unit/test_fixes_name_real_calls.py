"""A message's fix must be one a user can follow: every shmaug call it names exists and takes
what the fix passes it.

The guard reads the package's source: each string literal that holds a "Fix:" (an f-string's
fields read as ``{}``) and names ``shmaug.X...``, or a public class's member
(``ImageRecords.from_tfrecord``), has each name resolved on the package; where the fix writes a
call, the call's arguments are bound to the callable's signature. The ``tf.data`` refusal's
fixes are also run as written, on a tiny folder and tiny record shards. No process is started.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
from pathlib import Path

import cv2
import pytest

import shmaug
from tests import records_data as D

PACKAGE = Path(shmaug.__file__).parent
_CLASSES = sorted(n for n in shmaug.__all__ if n[:1].isupper() and not n.endswith(
    ("Error", "Died", "Timeout", "Warning")))
# `shmaug.A.b`, or a public class's member without the prefix (`ImageFiles.from_directory`).
_NAMED = re.compile(r"\bshmaug(?:\.[A-Za-z_]\w*)+|(?<![\w.])(?:%s)\.[A-Za-z_]\w*"
                    % "|".join(_CLASSES))


def _text(node: ast.AST) -> str | None:
    """A string literal as a message reads, its f-string fields as ``{}``; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _call_after(text: str, end: int) -> str | None:
    """The balanced ``(...)`` right after ``text[:end]``, or None."""
    if not text.startswith("(", end):
        return None
    depth = 0
    for i in range(end, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[end:i + 1]
    return None


def named_calls() -> list[tuple[str, str, str | None]]:
    """(where, dotted name, its call's argument text or None) for each name a fix names."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            text = _text(node)
            if text is None or "Fix:" not in text:
                continue
            for match in _NAMED.finditer(text):
                name = match.group(0).rstrip(".")
                where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                found.add((where, name, _call_after(text, match.end())))
    return sorted(found, key=lambda f: (f[0], f[1], f[2] or ""))


def resolve(name: str) -> object:
    """``shmaug.A.b`` (or ``A.b`` for a public class ``A``) as an object of the package."""
    parts = name.split(".")
    obj: object = shmaug
    for part in parts[1:] if parts[0] == "shmaug" else parts:
        if part in ("Sequence", "StallMonitor", "EpochSync", "keras"):
            pytest.importorskip("keras")
        if obj is shmaug and part == "ray":  # an optional part: imported by name, with Ray
            pytest.importorskip("ray")
            importlib.import_module("shmaug.ray")
        obj = getattr(obj, part)
    return obj


def check_binds(name: str, args: str) -> None:
    """The call ``name args`` as a fix writes it binds to the callable's signature."""
    try:
        call = ast.parse(f"f{args}".replace("{}", "0"), mode="eval").body
    except SyntaxError:
        return  # prose in parentheses, not a call
    assert isinstance(call, ast.Call)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        return
    target = resolve(name)
    signature = inspect.signature(target)  # a class: its constructor's, without self
    signature.bind(*range(len(call.args)), **{k.arg: 0 for k in call.keywords if k.arg})


def test_the_scan_finds_the_fixes_it_guards():
    names = {name for _, name, _ in named_calls()}
    # the tf.data refusal's, at least: a scan that finds nothing guards nothing
    assert {"shmaug.ImageFiles.from_directory", "shmaug.ImageRecords.from_tfrecord",
            "shmaug.ImageRecords.from_tfds"} <= names, names


@pytest.mark.parametrize("where, name, args", named_calls(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_each_call_a_fix_names_exists_and_takes_its_arguments(where, name, args):
    try:
        resolve(name)
    except AttributeError as exc:
        pytest.fail(f"{where}: a fix names {name}, which does not exist ({exc})")
    if args is not None and callable(resolve(name)):
        try:
            check_binds(name, args)
        except TypeError as exc:
            pytest.fail(f"{where}: a fix writes {name}{args}, which its signature refuses "
                        f"({exc})")


def test_the_guard_catches_a_call_that_takes_other_arguments():
    with pytest.raises(TypeError):
        check_binds("shmaug.ImageRecords.from_tfds", "(name, 'train', None, 'jpg')")
    with pytest.raises(TypeError):
        check_binds("shmaug.Compose", "([...], steps=2)")
    with pytest.raises(AttributeError):
        resolve("shmaug.ImageRecords.from_tar")


# -- the tf.data refusal's fixes, run as written ----------------------------------------------

def _tf_data_fixes() -> tuple[str, list[str]]:
    tf = pytest.importorskip("tensorflow")
    ds = tf.data.Dataset.from_tensor_slices((D.image(0)[None], [0]))
    with pytest.raises(shmaug.ArgumentTypeError) as info:
        shmaug.Loader(ds, workers=0)
    message = str(info.value)
    return message, re.findall(r"`(shmaug\.Image\w+\.from_\w+\([^`]*\))`", message)


def _run(call: str, **names: object) -> object:
    return eval(call, {"shmaug": shmaug, **names})  # the fix's own text, nothing added


def test_the_tf_data_refusal_names_constructors_that_run_as_written(tmp_path, monkeypatch):
    message, calls = _tf_data_fixes()
    assert "shmaug.ImageFiles(directory)" not in message
    assert "shmaug.ImageRecords(...)" not in message
    assert [c.split("(")[0] for c in calls] == [
        "shmaug.ImageFiles.from_directory", "shmaug.ImageRecords.from_tfrecord",
        "shmaug.ImageRecords.from_tfds"], message
    for label in ("ant", "bee"):  # a folder of class sub-folders
        os.makedirs(tmp_path / "photos" / label)
        for i in range(2):
            cv2.imwrite(str(tmp_path / "photos" / label / f"{i}.png"), D.image(i))
    files = _run(calls[0], directory=str(tmp_path / "photos"))
    assert len(files) == 4 and files.class_names == ("ant", "bee")
    monkeypatch.chdir(tmp_path)  # the fix's pattern names shards in the working folder
    D.write_tfrecords(tmp_path, shards=2, per_shard=2)
    records = _run(calls[1])
    assert len(records) == 4 and records.read(3).shape[-1] == 3


def test_the_tf_data_refusal_names_a_from_tfds_that_runs_as_written(tmp_path):
    pytest.importorskip("tensorflow_datasets")
    from tests.unit.test_records_tfds import ShmaugTiny

    _, calls = _tf_data_fixes()
    ShmaugTiny(data_dir=str(tmp_path)).download_and_prepare()
    # As written, but for the data folder: TFDS' default is the user's home.
    call = ast.parse(calls[2], mode="eval").body
    assert isinstance(call, ast.Call)
    call.keywords.append(ast.keyword("data_dir", ast.Constant(str(tmp_path))))
    records = _run(ast.unparse(call), name="shmaug_tiny")
    assert len(records) == 10 and records.class_names == ("ant", "bee", "cat")


# -- the API pages name real constructors and link real pages --------------------------------

def test_image_records_docstring_names_every_constructor():
    # It named two of five (issue 36): a reader of the API page missed the other formats.
    constructors = {name for name, value in vars(shmaug.ImageRecords).items()
                    if name.startswith("from_") and isinstance(value, classmethod)}
    assert len(constructors) >= 5, constructors
    missing = {name for name in constructors
               if f"``{name}``" not in (shmaug.ImageRecords.__doc__ or "")}
    assert not missing, missing


# Docstrings another change edits; each still names its page as text.
_LINK_PENDING: set[str] = set()


def test_docstrings_link_the_pages_they_name():
    # "(docs/remote.md)" showed as text on the API page (issue 36): mkdocstrings renders a
    # Markdown link relative to the API page, [Object storage](../remote.md), and
    # `mkdocs build --strict` checks it.
    plain = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node) or ""
            for match in re.finditer(r"(?<![(/\w])docs/\w+\.md", doc):
                plain.append(f"{where}: {match.group(0)}")
    plain = [p for p in plain if p.split(":")[0] not in _LINK_PENDING]
    assert not plain, plain
