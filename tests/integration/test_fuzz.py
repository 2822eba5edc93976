"""Malformed and hostile inputs at every public door: each gets a clear error, none hangs,
crashes or leaks.

Every case names the error type and the argument it must name; every message must also say
how to fix it (``REMEDY``). Cases marked ``early`` must fail before any worker process is even
created: a typo must not fork a million processes or allocate terabytes first. The autouse
guard in conftest checks that no segment or process outlives a case, and each case runs
under a hard timeout.

"""

from __future__ import annotations

import multiprocessing.process
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from PIL import Image

import shmaug
from tests import _ops
from tests._helpers import needs_keras

pytestmark = pytest.mark.timeout(60)

REMEDY = re.compile(r"\bFix\b|Pass e\.g\.|Register yours|Check the spelling|Pick another name|"
                    r"Move it to module level|Take the image and rng first|Define it at module")

X = np.random.default_rng(0).integers(0, 255, (8, 6, 6), np.uint8)
XF = (X / 255).astype(np.float32)


# -- hostile ops (module level, so workers can import them) ------------------------------


def returns_none(image, rng):
    return None


def returns_text(image, rng):
    return "an image, honest"


def returns_objects(image, rng):
    return np.array([object()] * 4)


def returns_complex(image, rng):
    return image.astype(np.complex64)


def returns_scalar(image, rng):
    return 3.0


def takes_image_only(image):
    return image  # legacy code: wrapped by from_array, not given as it is


def preprocess(image, mode="tf"):
    return image / 127.5 - 1 if mode == "tf" else image  # an option, not a generator


def falls_back(image, rnd=None):
    return image  # its second parameter is the generator, under a short name


def returns_a_list(image, rng):
    return image.tolist()  # numpy would make it an int64 batch of uint8 data


def returns_two_views(image, rng):
    return image, image[::-1]  # SimCLR's two views, as a tuple


def returns_crops(image, rng):
    return image, image, image[:3, :3]  # DINO's global and local crops


def returns_named_views(image, rng):
    return {"view_a": image, "view_b": image[::-1]}  # views by name, for a two-input model


def returns_image_and_mask(image, rng):
    return image, image[..., 0] > 0  # an image and its mask, as a segmentation user writes


def list_on_odd(image, rng):
    return image.tolist() if image.flat[0] % 2 else image


# X's samples start with an even pixel on sample 0 and an odd one on some later samples.
def shorter_on_odd(image, rng):
    return image[:-1] if image.flat[0] % 2 else image


def float_on_odd(image, rng):
    """uint8 on sample 0 (so the batch is uint8), float64 on some later ones."""
    return image * 0.5 if image.flat[0] % 2 else image


# -- files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Files:
    good: str
    garbage: str  # not an image at all, with a .png name
    truncated: str  # the first half of a real PNG
    empty: str  # a zero-byte .jpg
    zero_npy: str  # a zero-byte .npy
    cut_npy: str  # the first half of a real .npy
    a_file: str  # a regular file, where a directory is expected


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    d = tmp_path_factory.mktemp("fuzz")
    rgb = np.random.default_rng(1).integers(0, 255, (8, 8, 3), np.uint8)
    Image.fromarray(rgb).save(d / "good.png")
    (d / "garbage.png").write_bytes(b"not an image at all" * 10)
    png = (d / "good.png").read_bytes()
    (d / "truncated.png").write_bytes(png[: len(png) // 2])
    (d / "empty.jpg").write_bytes(b"")
    (d / "zero.npy").write_bytes(b"")
    np.save(d / "ok.npy", X)
    npy = (d / "ok.npy").read_bytes()
    (d / "cut.npy").write_bytes(npy[: len(npy) // 2])
    return Files(*(str(d / n) for n in ("good.png", "garbage.png", "truncated.png",
                                        "empty.jpg", "zero.npy", "cut.npy", "ok.npy")))


def loader(x: Any, y: Any = None, **kwargs: Any) -> shmaug.Loader:
    """A loader with real worker processes (one; forked where the platform allows)."""
    return shmaug.Loader(x, y, **{"batch_size": 4, "workers": 1, **kwargs})


def epoch(x: Any, y: Any = None, **kwargs: Any) -> list[Any]:
    with loader(x, y, **kwargs) as L:
        return list(L)


def sequence(x: Any, y: Any = None, **kwargs: Any) -> Any:
    return shmaug.Sequence(x, y, **{"batch_size": 4, "workers": 1, **kwargs})


def pack(source: Any, out: str, **kwargs: Any) -> Any:
    return shmaug.pack(source, out, **{"progress": False, "workers": 1, "image_size": (8, 8),
                                       **kwargs})


def resume(state: Any, **kwargs: Any) -> None:
    """Load ``state`` into a fresh loader (workers=0: the state check is this process's)."""
    with shmaug.Loader(X, **{"batch_size": 4, "workers": 0, "seed": 0, **kwargs}) as L:
        L.load_state_dict(state)


def state(**changes: Any) -> dict[str, Any]:
    with shmaug.Loader(X, batch_size=4, workers=0, seed=0) as L:
        return {**L.state_dict(), **changes}


def paths(f: Files, *names: str) -> shmaug.ImageFiles:
    return shmaug.ImageFiles.from_paths([getattr(f, n) for n in names], image_size=(8, 8))


# -- the cases -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    call: Callable[[Files, Path], Any]
    error: type[BaseException]
    names: str  # a regex the message must contain: the argument (or file) it is about
    early: bool = True  # refused before any worker process is created


CASES: dict[str, Case] = {
    # x: dtypes, ranks, emptiness, values
    "x complex dtype": Case(lambda f, t: loader(X.astype(np.complex64)), TypeError, "`x`.*complex64"),
    "x of strings": Case(lambda f, t: loader(X.astype(str)), TypeError, "`x`.*dtype"),
    "x rank 2": Case(lambda f, t: loader(X[0]), ValueError, r"`x`.*\(6, 6\)"),
    "x rank 5": Case(lambda f, t: loader(X[None, ..., None]), ValueError, r"`x`.*\(1, 8, 6, 6, 1\)"),
    "x None": Case(lambda f, t: loader(None), TypeError, "`x`.*None"),
    "x a scalar": Case(lambda f, t: loader(np.float32(1)), TypeError, "`x`"),
    "x empty": Case(lambda f, t: loader(X[:0]), ValueError, "`x` is empty"),
    "x list of ragged images": Case(lambda f, t: loader([X[0], X[1][:3]]), ValueError,
                                    r"`x` is a list of images of several sizes \(6x6, 3x6.*"
                                    r"`augment` is None"),  # (held in shared memory: none here)
    "x object array of ragged images": Case(lambda f, t: loader(np.array(
        [X[0], X[1][:3], None], dtype=object)[:2]), ValueError,
        r"`x` is a list of images of several sizes \(6x6, 3x6"),
    "x tuple of ragged images": Case(lambda f, t: loader((X[0], X[1][:3])), TypeError,
                                     r"`x` as a tuple.*\(3, 6\).*several sizes as a list"),
    "x object array of paths": Case(lambda f, t: loader(np.array(["a.png", "b.png"], dtype=object)),
                                    TypeError, r"`x` as an array of dtype object holds 2 path\(s\).*"
                                               r"ImageFiles\.from_paths"),
    "x array of paths": Case(lambda f, t: loader(np.array(["a.png", "b.png"])), TypeError,
                             r"`x` as an array of dtype <U5 holds 2 path\(s\).*from_paths"),
    "op returns crops of several sizes": Case(lambda f, t: loader(X, augment=returns_crops),
                                              TypeError, r"`augment`.*returned tuple.*packed flat",
                                              early=False),
    "x tuple of input arrays": Case(lambda f, t: loader((X, X)), TypeError,
                                    r"`x` as a tuple.*\(8, 6, 6\).*image_key"),
    "x NaN into a pipeline": Case(lambda f, t: loader(np.where(XF > 0.5, np.nan, XF),
                                                      augment=shmaug.presets.glyph_distort()),
                                  ValueError, "`x` holds NaN"),
    "x inf with a value_range": Case(lambda f, t: loader(np.where(XF > 0.5, np.inf, XF),
                                                         augment=_ops.identity, value_range=(0, 1)),
                                     ValueError, "`x` holds NaN or infinity"),
    "x 0..255 floats as 0..1": Case(lambda f, t: loader(XF * 255, augment=shmaug.presets.glyph_distort()),
                                    ValueError, "`value_range`.*0..25"),
    "x zero-byte .npy": Case(lambda f, t: loader(f.zero_npy), ValueError, "`x`.*zero.npy"),
    "x truncated .npy": Case(lambda f, t: loader(f.cut_npy), ValueError, "`x`.*cut.npy"),
    "x path that is no .npy": Case(lambda f, t: loader(f.good), ValueError, "`x` as a path"),
    # y: lengths, dicts, types
    "y of another length": Case(lambda f, t: loader(X, np.arange(5)), ValueError, "`y`.*5 entries"),
    "y dict, one entry short": Case(lambda f, t: loader(X, {"a": np.arange(8), "b": np.arange(7)}),
                                    ValueError, r"`y\['b'\]`.*7 entries"),
    "y list, one of another length": Case(lambda f, t: loader(X, [np.arange(8), np.arange(9)]),
                                          ValueError, r"`y\[1\]`.*9 entries"),
    "y of objects": Case(lambda f, t: loader(X, np.array([object()] * 8)), TypeError, "`y`.*object"),
    "y a scalar": Case(lambda f, t: loader(X, 3), ValueError, "`y`.*scalar"),
    # non-integer and huge arguments
    "batch_size 2.5": Case(lambda f, t: loader(X, batch_size=2.5), ValueError, "`batch_size`.*2.5"),
    "batch_size '4'": Case(lambda f, t: loader(X, batch_size="4"), ValueError, "`batch_size`.*str"),
    "batch_size True": Case(lambda f, t: loader(X, batch_size=True), ValueError, "`batch_size`.*bool"),
    "batch_size 0": Case(lambda f, t: loader(X, batch_size=0), ValueError, "`batch_size`"),
    "batch_size > n, remainder dropped": Case(lambda f, t: loader(X, batch_size=9, drop_remainder=True),
                                              ValueError, "`batch_size`=9"),
    "workers 10**6": Case(lambda f, t: loader(X, workers=10**6), ValueError, "`workers`=1000000"),
    "workers -1": Case(lambda f, t: loader(X, workers=-1), ValueError, "`workers`"),
    "workers 2.0": Case(lambda f, t: loader(X, workers=2.0), ValueError, "`workers`.*float"),
    "max_queue_size 10**9": Case(lambda f, t: loader(X, max_queue_size=10**9), ValueError,
                                 r"`max_queue_size`=1000000000.*[\d,]{10,} bytes"),
    "max_queue_size 0": Case(lambda f, t: loader(X, max_queue_size=0), ValueError, "`max_queue_size`"),
    "timeout NaN": Case(lambda f, t: loader(X, timeout=float("nan")), ValueError, "`timeout`.*nan"),
    "seed -1": Case(lambda f, t: loader(X, seed=-1), ValueError, "`seed`"),
    "start_method 'thread'": Case(lambda f, t: loader(X, start_method="thread"), ValueError,
                                  "`start_method`.*'thread'"),
    "augment not callable": Case(lambda f, t: loader(X, augment=3), TypeError, "`augment`"),
    "augment the class Op, not an op": Case(lambda f, t: loader(X, augment=shmaug.ops.Op),
                                            TypeError, "`augment`.*the class"),
    "shuffle 'no'": Case(lambda f, t: loader(X, shuffle="no"), TypeError, "`shuffle`.*'no'"),
    "x of height 0": Case(lambda f, t: loader(X[:, :0]), ValueError, "`x`.*no pixels"),
    "x int64 through shmaug's ops": Case(lambda f, t: loader(
        X.astype(np.int64), augment=shmaug.presets.glyph_distort()), TypeError, "`x`.*int64"),
    "x bool through shmaug's ops": Case(lambda f, t: loader(
        X > 100, augment=shmaug.presets.glyph_distort()), TypeError, "`x`.*bool"),
    "x big-endian float32 through shmaug's ops": Case(lambda f, t: loader(
        (X / 255).astype(">f4"), augment=shmaug.presets.glyph_distort()), TypeError,
        r"`x`.*>f4.*float32 in big-endian byte order.*x.astype\(np.float32\)"),
    "x channels-first through shmaug's ops": Case(lambda f, t: loader(
        np.zeros((4, 3, 16, 16), np.uint8), augment=shmaug.presets.glyph_distort()), ValueError,
        "`x`.*channels-first.*np.moveaxis"),
    "augment written as fn(image)": Case(lambda f, t: loader(X, augment=takes_image_only),
                                         TypeError, r"`augment`.*takes_image_only.*\(image\)"
                                                    r".*shmaug.from_array\(fn\)"),
    "x a generator": Case(lambda f, t: loader((image for image in X)), TypeError,
                          r"`x`.*generator.*cannot be read by index.*np.stack\(list"),
    "x an (x, y) pair": Case(lambda f, t: loader((X, np.arange(len(X)))), TypeError,
                             r"`x` is a pair of .* images .* labels.*two arguments"),
    "x an (x, one-hot y) pair": Case(lambda f, t: loader((X, np.eye(3)[np.arange(len(X)) % 3])),
                                     TypeError, r"`x` is a pair of 8 images .* labels \(8, 3\)"),
    "x a list of several inputs, y given": Case(lambda f, t: loader(
        [X, np.zeros((len(X), 2), np.float32)], np.arange(len(X))), TypeError,
        r"`x` as a list holds 2 arrays of 8 rows each .*several inputs.*image_key='image'"),
    "x a list of several inputs, y a list": Case(lambda f, t: loader(
        [X, np.zeros((len(X), 2), np.float32)], list(range(len(X)))), TypeError,
        r"`x` as a list holds 2 arrays of 8 rows each .*several inputs"),
    "x a list of as many 13-band images as labels": Case(lambda f, t: loader(
        [np.zeros((8, 8, 13), np.uint16)] * 8, np.arange(8)), TypeError,
        r"`x` as a list holds 8 arrays of shape \(8, 8, 13\): images of 13 channels, or 8 "
        r"inputs"),
    "augment np.flip": Case(lambda f, t: loader(X, augment=np.flip), TypeError,
                            r"`augment`.*`axis`, is an option"),
    "y a list of per-sample rows": Case(lambda f, t: loader(X, [np.eye(3)[i % 3] for i in
                                                             range(len(X))]), ValueError,
                                        r"`y` .* a list of 8 arrays, one per sample.*shape "
                                        r"\(3,\). Fix: `np.stack\(y\)`"),
    "augment with an option second": Case(lambda f, t: loader(X, augment=preprocess),
                                          TypeError, r"`augment`.*preprocess.*`mode`, is an "
                                                     r"option.*shmaug.from_array\(fn\)"),
    "augment a lambda": Case(lambda f, t: loader(X, augment=lambda image, rng: image), TypeError,
                             "`augment`.*lambda"),
    "output_shape with a 0": Case(lambda f, t: loader(X, augment=_ops.identity, output_shape=(0, 3)),
                                  ValueError, "`output_shape`"),
    "output_dtype uint8 of float images no op makes": Case(lambda f, t: loader(
        (X / 255).astype(np.float32), output_dtype="uint8"), TypeError,
        r"`output_dtype` is uint8 but `x` holds float32.*\(x \* 255\)\.round\(\)"),
    "output_dtype object": Case(lambda f, t: loader(X, augment=_ops.identity, output_dtype=object),
                                TypeError, "`output_dtype`"),
    # ops that misbehave: caught on sample 0 by the probe (in a worker) or on a later sample
    "op returns None": Case(lambda f, t: loader(X, augment=returns_none), TypeError,
                            "`augment`.*None", early=False),
    "op returns text": Case(lambda f, t: loader(X, augment=returns_text), TypeError,
                            "`augment`.*str", early=False),
    "op returns objects": Case(lambda f, t: loader(X, augment=returns_objects), TypeError,
                               "`augment`.*ndarray", early=False),
    "op returns complex": Case(lambda f, t: loader(X, augment=returns_complex), TypeError,
                               "`augment`.*complex", early=False),
    "op returns a scalar": Case(lambda f, t: loader(X, augment=returns_scalar), TypeError,
                                "`augment`.*float", early=False),
    "op returns a list": Case(lambda f, t: loader(X, augment=returns_a_list), TypeError,
                              r"`augment` \(returns_a_list\) must return the image as a numpy "
                              r"array.*returned list.*int64", early=False),
    "op returns two views": Case(lambda f, t: loader(X, augment=returns_two_views), TypeError,
                                 r"`augment`.*returned tuple.*Fix: return them stacked",
                                 early=False),
    "op returns views by name": Case(lambda f, t: loader(X, augment=returns_named_views),
                                     TypeError, r"`augment`.*returned dict.*Fix: return them "
                                     r"stacked.*`model_inputs` hook", early=False),
    "op returns an image and its mask": Case(
        lambda f, t: loader(X, augment=returns_image_and_mask), TypeError,
        r"`augment`.*returned tuple.*`augment_targets\(image, targets, rng\)`", early=False),
    "augment a list of views": Case(lambda f, t: loader(X, augment=[_ops.identity] * 2),
                                    TypeError, r"`augment` must be.*received \[.*runs its ops "
                                    r"in turn.*np\.stack\(\[view\(image, rng\)", early=True),
    "op returns a list on some samples": Case(lambda f, t: epoch(X, augment=list_on_odd),
                                              TypeError,
                                              r"`augment`.*sample index \d+ it returned list",
                                              early=False),
    "op shape differs on some samples": Case(lambda f, t: epoch(X, augment=shorter_on_odd),
                                             ValueError, r"Sample index \d+ produced shape.*`augment`",
                                             early=False),
    "op dtype differs on some samples": Case(lambda f, t: epoch(X, augment=float_on_odd),
                                             ValueError,
                                             r"Sample index \d+ produced dtype float64.*`augment`"
                                             r"(?!.*output_dtype)",  # a cast would not scale it
                                             early=False),
    "output_shape that is not the op's": Case(lambda f, t: loader(X, augment=_ops.identity,
                                                                  output_shape=(5, 5)),
                                              ValueError, r"`output_shape` is \(5, 5\)", early=False),
    "op parameter of the wrong type": Case(lambda f, t: loader(X, augment=shmaug.from_config(
        {"type": "Op", "name": "rotate", "params": {"degrees": "lots"}})), TypeError,
        "`degrees`.*'lots'", early=False),
    # image files
    "image file that is no image": Case(lambda f, t: epoch(paths(f, "good", "garbage"), batch_size=2),
                                        OSError, "garbage.png.*on_error='skip'", early=False),
    "truncated image file": Case(lambda f, t: epoch(paths(f, "good", "truncated"), batch_size=2),
                                 OSError, "truncated.png.*corrupt, truncated", early=False),
    "zero-byte image file": Case(lambda f, t: epoch(paths(f, "good", "empty"), batch_size=2),
                                 OSError, r"empty.jpg.*0 bytes", early=False),
    "ImageFiles paths as one string": Case(lambda f, t: shmaug.ImageFiles.from_paths(f.good),
                                           TypeError, "`paths`.*single path"),
    "ImageFiles image_size 0": Case(lambda f, t: shmaug.ImageFiles.from_paths(
        [f.good], image_size=(0, 8)), ValueError, "`image_size`"),
    "ImageFiles labels of another length": Case(lambda f, t: shmaug.ImageFiles.from_paths(
        [f.good], labels=[1, 2]), ValueError, "`labels`"),
    "ImageFiles missing folder": Case(lambda f, t: shmaug.ImageFiles.from_directory(
        str(t / "nowhere")), ValueError, "`directory`"),
    # pack
    "pack a number": Case(lambda f, t: pack(42, str(t / "out")), TypeError, "`source`"),
    "pack into a file": Case(lambda f, t: pack([f.good], f.a_file), ValueError, "`out`"),
    "pack with workers 10**6": Case(lambda f, t: pack([f.good], str(t / "out"), workers=10**6),
                                    ValueError, "`workers`"),
    "pack a corrupt file": Case(lambda f, t: pack([f.good, f.garbage], str(t / "out")), OSError,
                                "garbage.png", early=False),
    # the op registry and configs
    "get an unknown op": Case(lambda f, t: shmaug.get("rotat"), LookupError, "`rotat`.*'rotate'"),
    "register a lambda": Case(lambda f, t: shmaug.register("fuzz_lambda")(lambda image, rng: image),
                              TypeError, "`fuzz_lambda`.*lambda"),
    "register a taken name": Case(lambda f, t: shmaug.register("rotate")(_ops.identity),
                                  ValueError, "`rotate`"),
    "register a bad signature": Case(lambda f, t: shmaug.register("fuzz_len")(len), ValueError,
                                     "`fuzz_len`"),
    "config of another version": Case(lambda f, t: shmaug.from_config(
        {"type": "Op", "name": "rotate", "version": 99}), ValueError, r"`config\['version'\]` is 99"),
    "config of an unknown type": Case(lambda f, t: shmaug.from_config({"type": "Warp9"}), ValueError,
                                      r"`config\['type'\]`.*'Warp9'"),
    "config of an unknown op": Case(lambda f, t: shmaug.from_config({"type": "Op", "name": "teleport"}),
                                    LookupError, "`teleport`"),
    "config missing a key": Case(lambda f, t: shmaug.from_config({"type": "Compose"}), ValueError,
                                 "`config`.*'ops'"),
    "config params not a dict": Case(lambda f, t: shmaug.from_config(
        {"type": "Op", "name": "rotate", "params": [1]}), ValueError, r"`config\['params'\]`"),
    "config with an unknown parameter": Case(lambda f, t: shmaug.from_config(
        {"type": "Op", "name": "rotate", "params": {"spin": 3}}), ValueError, "`spin`"),
    "config not a dict": Case(lambda f, t: shmaug.from_config(None), ValueError, "`config`"),
    # a loader's saved state from another version, run or loader
    "state of another version": Case(lambda f, t: resume(state(version=99)), ValueError,
                                     "`state`.*version=99"),
    "state of another format": Case(lambda f, t: resume(state(format="shmaug.Sequence")),
                                    ValueError, "`state`.*format='shmaug.Sequence'"),
    "state not a dict": Case(lambda f, t: resume([1, 2]), TypeError, "`state`"),
    "state of another seed": Case(lambda f, t: resume(state(), seed=1), ValueError,
                                  "`state`.*seed=0.*seed=1"),
    "state of another batch_size": Case(lambda f, t: resume(state(), batch_size=2), ValueError,
                                        "`state`.*batch_size=4.*batch_size=2"),
}

SEQUENCE_CASES: dict[str, Case] = {
    "Sequence x dict, two image candidates": Case(lambda f, t: sequence({"a": X, "b": X}),
                                                  ValueError, "`x` is a dict.*`image_key=`"),
    "Sequence x dict, image_key missing": Case(lambda f, t: sequence(
        {"a": X, "m": np.zeros((8, 3))}, image_key="img"), ValueError, "`image_key`='img'"),
    "Sequence x dict, extra input short": Case(lambda f, t: sequence({"a": X, "m": np.zeros((5, 3))}),
                                               ValueError, r"`x\['m'\]`.*5 entries"),
    "Sequence sample_weight short": Case(lambda f, t: sequence(X, np.arange(8),
                                                               sample_weight=np.ones(3)),
                                         ValueError, "`sample_weight`"),
    "Sequence max_queue_size 10**9": Case(lambda f, t: sequence(X, max_queue_size=10**9),
                                          ValueError, "`max_queue_size`"),
    "Sequence workers 10**6": Case(lambda f, t: sequence(X, workers=10**6), ValueError, "`workers`"),
    "Sequence shuffle 'no'": Case(lambda f, t: sequence(X, shuffle="no"), TypeError,
                                  "`shuffle`.*'no'"),
    "Sequence x tuple of input arrays": Case(lambda f, t: sequence((X, X)), TypeError, "`x` as a tuple"),
}


def processes_created() -> str:
    """How many Process objects this interpreter has made (the counter behind 'Process-N')."""
    return repr(multiprocessing.process._process_counter)  # type: ignore[attr-defined]


def check(case: Case, files: Files, tmp_path: Path) -> None:
    before = processes_created()
    with pytest.raises(case.error) as info:
        case.call(files, tmp_path)
    message = str(info.value)
    assert isinstance(info.value, shmaug.ShmaugError), f"not a shmaug error: {info.value!r}"
    assert re.search(case.names, message, re.S), f"does not name {case.names!r}: {message}"
    assert REMEDY.search(message), f"no remedy in: {message}"
    if case.early:
        assert processes_created() == before, "a process was created before the error"


# test_hostile_input* refuse each input and match its message against the case's `names`; this
# checks that every case asks for what the module docstring promises, so that the two together
# hold "a documented error naming its argument". It replaces a count of the two dicts (at least
# thirty), which only an edit of this file could change.
@pytest.mark.parametrize("name", [*CASES, *SEQUENCE_CASES])
def test_every_case_asks_for_a_documented_error_naming_its_argument(name: str) -> None:
    """Its error is a builtin that an error of errors.py's tree subclasses (so the raised
    error can be both), and its message must name the argument in backticks, or for a file
    error the file."""
    case = {**CASES, **SEQUENCE_CASES}[name]
    documented = {base for error in vars(shmaug.errors).values()
                  if isinstance(error, type) and issubclass(error, shmaug.ShmaugError)
                  for base in error.__mro__ if base.__module__ == "builtins"}
    assert case.error in documented - {Exception, BaseException, object}, case.error
    named = re.search(r"`[^`]+`", case.names) or (
        issubclass(case.error, OSError) and re.search(r"\w+\.(png|jpg|npy)", case.names))
    assert named, f"{name!r} does not ask the message to name its argument: {case.names!r}"


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input(name: str, files: Files, tmp_path: Path) -> None:
    check(CASES[name], files, tmp_path)


@needs_keras
@pytest.mark.parametrize("name", list(SEQUENCE_CASES))
def test_hostile_input_to_sequence(name: str, files: Files, tmp_path: Path) -> None:
    check(SEQUENCE_CASES[name], files, tmp_path)


# -- what must work, not fail --------------------------------------------------------------


def test_a_huge_batch_size_is_one_batch_of_everything() -> None:
    """batch_size=10**12 on 8 samples: as in Keras, one batch; the ring holds 8 rows, not 10**12."""
    with loader(X, np.arange(8), batch_size=10**12, augment=_ops.identity) as L:
        (xb, yb), = list(L)
    np.testing.assert_array_equal(xb, X)
    np.testing.assert_array_equal(yb, np.arange(8))


def test_one_sample_is_a_dataset() -> None:
    with loader(X[:1], np.arange(1), augment=_ops.identity) as L:
        assert [xb.shape for xb, _ in L] == [(1, 6, 6)]


def test_a_config_without_a_version_is_read() -> None:
    """Configs written so far carry no version: they keep loading."""
    op = shmaug.from_config({"type": "Op", "name": "rotate", "params": {"degrees": [-5, 5]}})
    assert shmaug.from_config({**op.to_config(), "version": 1}) == op


@needs_keras
def test_one_sample_sequence_serves_its_batch() -> None:
    with sequence(X[:1], np.arange(1), augment=_ops.identity) as seq:
        xb, yb = seq[0]
    assert xb.shape == (1, 6, 6) and yb.tolist() == [0]


def to_uint16_on_odd(image, rng):
    return image.astype(np.uint16) * 100 if image.flat[0] % 2 else image


def to_uint8_on_odd(image, rng):
    return (image * 255).astype(np.uint8) if image.flat[0] % 2 else image


def to_float64_on_odd(image, rng):
    return image.astype(np.float64) if image.flat[0] % 2 else image


@pytest.mark.parametrize("x,augment", [
    (X, to_uint16_on_odd),  # 20,000 wrapped to 32 in the uint8 batch
    ((X / 255).astype(np.float32), to_uint8_on_odd)])  # 0..255 among [0, 1] values
def test_a_sample_of_another_dtype_than_sample_0s_is_refused_not_cast(x, augment):
    x = x.copy()
    x[:, 0, 0] = np.arange(len(x))  # odd samples change their dtype
    with pytest.raises(shmaug.OutputMismatchError, match=r"Sample index 1 produced dtype .*"
                                                         r"sample 0's"):
        with shmaug.Loader(x, batch_size=len(x), augment=augment, workers=0) as L:
            L.batch(0)


def test_another_float_width_and_a_declared_lossless_cast_are_stored():
    floats = (X / 255).astype(np.float32)
    floats[:, 0, 0] = np.arange(len(X))
    with shmaug.Loader(floats, batch_size=4, augment=to_float64_on_odd, workers=0) as L:
        assert L.batch(0)[0].dtype == np.float32
    with shmaug.Loader(X, batch_size=4, augment=_ops.identity, workers=0,
                       output_dtype="float32") as L:
        np.testing.assert_array_equal(L.batch(0)[0], X[:4].astype(np.float32))


def test_inputs_next_to_the_refused_ones_are_not_mistaken_for_them() -> None:
    """The diff review's cases: a generator under a short name with a None default is an
    rng, not an option; two images of different shapes are not an (x, y) pair."""
    with loader(X, augment=falls_back) as L:
        assert L.batch(0)[0].shape == (4, 6, 6)
    images = [np.zeros((16, 16, 3), np.uint8), np.zeros((16, 16), np.uint8)]
    with pytest.raises(ValueError) as err:
        loader(images)
    assert "pair" not in str(err.value) and "several channel counts" in str(err.value)
