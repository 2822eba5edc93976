"""Registry, bound ops, composition, config round trip, picklability and ``from_pil``."""

from __future__ import annotations

import functools
import json
import pickle
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug import errors, ops
from shmaug.ops import Compose, Maybe, OneOf, Op, SomeOf
from shmaug.ops import core
from tests import _ops as _tests_ops


@pytest.fixture
def scratch_registry() -> Iterator[None]:
    """Ops registered by a test are removed afterwards."""
    before = dict(core._REGISTRY)
    yield
    core._REGISTRY.clear()
    core._REGISTRY.update(before)


def ink_bleed(image: np.ndarray, rng: np.random.Generator, strength: Any = (0.1, 0.4)) -> np.ndarray:
    """A user op defined at module level."""
    s = ops.params.draw(rng, strength, "strength", 0.0, 1.0)
    return ops.gaussian_blur(image, rng, sigma=2.0 * s)


def other_op(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return image


def plain_function(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Not registered; module level, so it configures by reference."""
    return image


def old_pil_aug(img: Image.Image) -> Image.Image:
    """Classic legacy code: global `random`, PIL in and out."""
    angle = random.choice([-10, -5, 0, 5, 10])
    dx = random.choice([-2, 0, 2])
    return img.rotate(angle).transform(img.size, Image.Transform.AFFINE, (1, 0, dx, 0, 1, 0))


def old_pil_aug_tuple(img: Image.Image) -> tuple[Image.Image, str]:
    return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT), "flipped"


def returns_array(img: Image.Image) -> np.ndarray:
    return np.asarray(img)


def old_array_aug(img: np.ndarray) -> np.ndarray:
    """Classic legacy code on arrays: numpy's global generator, array in and out."""
    shift = int(np.random.randint(-3, 4))
    return np.roll(img * np.random.uniform(0.5, 1.0), shift, axis=1)


def old_array_in_place(img: np.ndarray) -> np.ndarray:
    img += 1  # edits its input: a read-only view would refuse
    return img * np.random.random()


def returns_none(img: np.ndarray) -> None:
    return None


def returns_list(img: np.ndarray) -> list:
    return img.tolist()  # would be an int64 batch of uint8 pixels


def returns_pil(img: np.ndarray) -> Image.Image:
    return Image.fromarray(img)


def old_cv_aug(img: np.ndarray) -> np.ndarray:
    """Legacy OpenCV code: given a PIL image, OpenCV says "src is not a numpy array"."""
    import cv2

    return cv2.GaussianBlur(img, (3, 3), float(np.random.uniform(0.1, 1.0)))


IMAGE = np.random.default_rng(0).integers(0, 256, (32, 32), dtype=np.uint8)


# --- registry ---------------------------------------------------------------------------


def bare_op(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return image


def test_register_get_available(scratch_registry: None) -> None:
    assert shmaug.register("ink_bleed")(ink_bleed) is ink_bleed
    assert "ink_bleed" in shmaug.available() and shmaug.available() == sorted(shmaug.available())
    op = shmaug.get("ink_bleed")
    assert op.fn is ink_bleed and op.uses_global_rng is None  # unknown: the loader watches
    out = op(IMAGE, np.random.default_rng(1))
    assert out.shape == IMAGE.shape and not np.array_equal(out, IMAGE)


def test_duplicate_name_is_an_error_unless_replace(scratch_registry: None) -> None:
    shmaug.register("ink_bleed")(ink_bleed)
    shmaug.register("ink_bleed")(ink_bleed)  # the same function again is harmless
    with pytest.raises(errors.DuplicateOpError, match="replace=True"):
        shmaug.register("ink_bleed")(other_op)
    with pytest.raises(errors.DuplicateOpError):
        shmaug.register("rotate")(other_op)
    shmaug.register("ink_bleed", replace=True)(other_op)
    assert shmaug.get("ink_bleed").fn is other_op
    with pytest.raises(errors.DuplicateOpError, match="`rotate`"):  # the name first, then
        shmaug.register("rotate")(lambda image, rng: image)  # what is wrong with the function


def test_an_op_replacing_a_built_in_is_the_users_in_a_fresh_worker_too(
        scratch_registry: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spawned worker has the built-in of that name registered already, so it did not
    import the user's module, and ran the built-in: batches depended on the start method."""
    import sys

    (tmp_path / "my_flips.py").write_text(
        "import numpy as np, shmaug\n"
        "@shmaug.register('hflip', replace=True, uses_global_rng=False, targets='still')\n"
        "def my_hflip(image, rng):\n    return np.zeros_like(image)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    built_in = core._REGISTRY["hflip"]
    import my_flips  # noqa: F401  (registers)
    shipped = pickle.dumps(Op("hflip"))
    core._REGISTRY["hflip"] = built_in  # a fresh worker: the built-in, the module not imported
    del sys.modules["my_flips"]
    image = np.full((4, 4), 7, np.uint8)
    assert not pickle.loads(shipped)(image, np.random.default_rng(0)).any()
    assert core._REGISTRY["hflip"].module == "my_flips"


def test_a_definition_run_again_replaces_its_op(scratch_registry: None) -> None:
    """A notebook cell run twice, or importlib.reload: the same module and name define the
    op again, which replaces it rather than clash with itself."""
    cell = ("import shmaug\n@shmaug.register('ink_cell')\n"
            "def ink_cell(image, rng, strength=(0.1, 0.4)):\n    return image + {}\n")
    first: dict[str, Any] = {"__name__": "notebook_cell"}
    exec(cell.format(0), first)
    again: dict[str, Any] = {"__name__": "notebook_cell"}
    exec(cell.format(1), again)
    assert shmaug.get("ink_cell").fn is again["ink_cell"] is not first["ink_cell"]
    elsewhere: dict[str, Any] = {"__name__": "another_module"}
    with pytest.raises(errors.DuplicateOpError, match="notebook_cell.ink_cell"):
        exec(cell.format(2), elsewhere)


def test_an_op_without_parameters_says_it_takes_none(scratch_registry: None) -> None:
    shmaug.register("bare")(bare_op)
    with pytest.raises(errors.ArgumentError, match=r"no parameter `strength`; it takes none"):
        Op("bare", strength=1)


def test_lambda_and_closure_registration_say_move_to_module_level(scratch_registry: None) -> None:
    with pytest.raises(errors.NotPicklableError, match="lambda.*module level"):
        shmaug.register("anon")(lambda image, rng: image)

    def local(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return image

    with pytest.raises(errors.NotPicklableError, match="closure.*test_lambda_and_closure.*module level"):
        shmaug.register("local")(local)
    assert "anon" not in shmaug.available() and "local" not in shmaug.available()


class _DbImages:
    """A source holding an open connection (an HDF5 user's h5py.File, an LMDB Environment)."""

    def __init__(self) -> None:
        import sqlite3

        self.size, self.db = 4, sqlite3.connect(":memory:")

    def __len__(self) -> int:
        return self.size

    def load(self, index: int) -> np.ndarray:
        return np.full((8, 8), index, np.uint8)


def test_a_handle_held_by_a_source_or_load_is_named_with_the_lazy_open_fix() -> None:
    # An HDF5 user's module-level source was told to move it to module level and register
    # it as an op: neither was wrong; the open file was.
    source = _DbImages()
    for given in (source, source.load):
        with pytest.raises(errors.NotPicklableError, match=r"holds `db`, a Connection.*open it "
                           r"in each process on first use \(`self.db = None`.*__getstate__\(self\)"
                           r": return \{\*\*self.__dict__, 'db': None\}") as refused:
            core.check_picklable(given, "load")
        assert "register" not in str(refused.value)
    source.db.close()
    source.db = None  # type: ignore[assignment]
    core.check_picklable(source.load, "load")


class _Handles:
    """A helper holding the connection for a source."""

    def __init__(self) -> None:
        import sqlite3

        self.db = sqlite3.connect(":memory:")


class _NestedDbImages(_DbImages):
    """The connection one level down: in a dict, or in a helper object."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.db.close()
        self.db = None  # type: ignore[assignment]
        helper = _Handles()  # (one connection: each opened is closed by the test)
        self.handles: object = {"dict": {"db": helper.db}, "list": [helper.db],
                                "helper": helper}[kind]


def test_a_handle_one_level_down_is_named_with_the_attribute_to_leave_out() -> None:
    # A zip source's {"zip": ZipFile} or helper object was told to define `load` at module
    # level and register an op, naming the base class's method.
    for kind, where in (("dict", r"handles\['db'\]"), ("helper", r"handles.db"),
                        ("list", r"handles\[0\]")):  # (a file per shard: diff review)
        source = _NestedDbImages(kind)
        with pytest.raises(errors.NotPicklableError, match=rf"\(_NestedDbImages.load\) holds "
                           rf"`{where}`, a Connection.*`self.handles = None`.*'handles': None"):
            core.check_picklable(source.load, "load")
        held = source.handles
        connection = (held["db"] if isinstance(held, dict) else held[0]
                      if isinstance(held, list) else held.db)  # type: ignore[attr-defined]
        connection.close()  # (Python 3.13 warns of one collected open, in a later test)


class _DropsItsFile:
    """Leaves its file out of the pickle already; its lock is what refuses."""

    def __init__(self) -> None:
        import threading

        self.f, self.lock = open(__file__, "rb"), threading.Lock()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "f": None}

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return image


def test_what_is_no_handle_keeps_the_module_level_fix() -> None:
    """A lambda attribute, or a lock beside a file the object already leaves out, was told
    the open-handle fix, naming the file."""
    drops = _DropsItsFile()
    try:
        with pytest.raises(errors.NotPicklableError) as refused:
            core.check_picklable(drops, "augment")
        assert "holds" not in str(refused.value) and "_thread.lock" in str(refused.value)
    finally:
        drops.f.close()


def test_bad_signatures_are_rejected(scratch_registry: None) -> None:
    def no_default(image: Any, rng: Any, strength: Any) -> Any: ...
    def no_rng(image: Any) -> Any: ...

    no_default.__qualname__ = no_rng.__qualname__ = "module_level_lookalike"
    with pytest.raises(errors.ArgumentError, match="`strength`|strength"):
        shmaug.register("x")(no_default)
    with pytest.raises(errors.ArgumentError, match=r"fn\(image, rng"):
        shmaug.register("y")(no_rng)
    with pytest.raises(errors.ArgumentTypeError, match="`name`"):
        shmaug.register(3)  # type: ignore[arg-type]


def square_crop(image: np.ndarray, rng: np.random.Generator, side: int = 8,
                rows: int = 8) -> np.ndarray:
    """A user's sizing op that also takes undecoded photos (it crops their pixels here)."""
    return np.asarray(image)[:rows, :side]


def test_an_op_declares_what_the_plan_reads_in_its_registration(scratch_registry: None) -> None:
    """What the engine reads about an op (its targets kind, whether it takes a photo
    undecoded, whether it fixes the output size) is declared once, in ``register``."""
    from shmaug.ops.plan import plan_of

    shmaug.register("square_crop", targets="warped", takes_undecoded=True,
                    sized_by=("rows", "side"))(square_crop)
    plan = plan_of(Compose([Op("square_crop"), Op("hflip")]))
    assert plan.takes_undecoded and plan.fixes_size is True
    assert not plan_of(Compose([Op("hflip"), Op("square_crop")])).takes_undecoded
    assert plan_of(Compose([Op("square_crop", rows=0.5)])).fixes_size is False  # a fraction
    assert Op("square_crop").targets == "warped"
    assert not Op("hflip").takes_undecoded and Op("random_resized_crop").takes_undecoded
    with pytest.raises(errors.ArgumentError, match=r"sized_by.*\('height', 'depth'\).*Fix"):
        shmaug.register("bad_sizes", sized_by=("height", "depth"))(square_crop)


def test_unknown_op_suggests_close_names() -> None:
    with pytest.raises(errors.UnknownOpError, match="rotate") as info:
        shmaug.get("rotat")
    assert isinstance(info.value, LookupError)


def test_op_rejects_unknown_parameters_and_bad_ranges() -> None:
    with pytest.raises(errors.ArgumentError, match="`degree`"):
        Op("rotate", degree=5)
    with pytest.raises(errors.ArgumentError, match="`degrees`.*low <= high"):
        Op("rotate", degrees=(10, -10))(IMAGE, np.random.default_rng(0))
    with pytest.raises(errors.ArgumentTypeError, match="`degrees`"):
        Op("rotate", degrees="big")(IMAGE, np.random.default_rng(0))
    for endless in (float("nan"), (0, float("inf")), (float("-inf"), 3)):  # no inf in the fix
        with pytest.raises(errors.ArgumentError, match=r"`degrees` expects finite numbers.*"
                                                       r"e\.g\. degrees=\(0\.0, 1\.0\)"):
            Op("rotate", degrees=endless)
    with pytest.raises(errors.ArgumentError, match=r"`p` expects a finite number.*e\.g\. p=0"):
        Maybe(Op("rotate"), p=float("nan"))
    with pytest.raises(errors.ArgumentError, match=r"`min_area` expects a finite.*min_area=0"):
        Compose([Op("rotate")], min_area=float("inf"))
    with pytest.raises(errors.ArgumentError, match=r"`mask_fill` expects a finite number; "):
        Compose([Op("rotate")], mask_fill=float("nan"))  # (no "within [-inf, inf]")
    with pytest.raises(errors.ArgumentError, match="`border`.*'constant'"):
        Op("rotate", border="mirror")(IMAGE, np.random.default_rng(0))
    with pytest.raises(errors.ArgumentError, match="Fix: border='replicate', shmaug's name"):
        Op("rotate", border="nearest")
    with pytest.raises(errors.ArgumentError, match="Fix: interpolation='linear', shmaug's"):
        Op("zoom", interpolation="bilinear")
    for wrong in ("0.5", None):  # (a pair is no fix for a lone number)
        with pytest.raises(errors.ArgumentTypeError, match=r"`p` expects one number; received "
                                                           r".*Pass e\.g\. p=0\.5\."):
            Maybe(Op("rotate"), p=wrong)
    with pytest.raises(errors.ArgumentError, match="`backend`.*'cv'"):
        Op("elastic", backend="pil")(IMAGE, np.random.default_rng(0))
    with pytest.raises(errors.ArgumentError, match="`border`.*backend='pil'"):
        Op("rotate", border="wrap", backend="pil")(IMAGE, np.random.default_rng(0))
    with pytest.raises(errors.ArgumentError, match="`image`"):
        Op("rotate")(IMAGE.astype(np.int16), np.random.default_rng(0))
    for given, told in ((64.0, 64), (0, 1), ("a", 2)):  # (64.0 was told height=2)
        with pytest.raises(errors.ArgumentError, match=rf"Pass e\.g\. height={told}\.$"):
            Op("random_resized_crop", height=given, width=8)
    with pytest.raises(errors.ArgumentError, match=r"image's height 1 and width 2000; "
                                                   r"received height 64 and width 64"):
        Op("crop", height=64, width=64)(np.zeros((1, 2000), np.uint8), np.random.default_rng(0))


def test_bind_and_override() -> None:
    rot = shmaug.get("rotate").bind(degrees=(-5, 5))
    assert rot == Op("rotate", degrees=[-5, 5])
    assert rot.bind(degrees=0)(IMAGE, np.random.default_rng(0)) is IMAGE or np.array_equal(
        rot.bind(degrees=0)(IMAGE, np.random.default_rng(0)), IMAGE
    )
    np.testing.assert_array_equal(rot(IMAGE, np.random.default_rng(0), degrees=0), IMAGE)


# --- composition ------------------------------------------------------------------------


def _pipelines() -> list[Any]:
    return [
        Op("rotate", degrees=(-5, 5)),
        Compose([ops.rotate, "gaussian_blur", functools.partial(ops.shear, x=0.2)]),
        OneOf([Op("sine_warp"), Op("smooth")], weights=[3, 1]),
        Maybe(Op("hflip"), p=0.3),
        SomeOf(["gamma", "gaussian_noise", "cutout"], n=(1, 2), random_order=True),
        Compose([plain_function, ops.from_pil(old_pil_aug)]),
        shmaug.presets.glyph_distort(),
        shmaug.presets.glyph_distort(backend="pil", fill=1.0),
    ]


@pytest.mark.parametrize("pipeline", _pipelines(), ids=lambda p: type(p).__name__)
def test_pipelines_pickle_and_round_trip_through_json(pipeline: Any) -> None:
    clone = pickle.loads(ops.check_picklable(pipeline))
    assert clone == pipeline
    cfg = json.loads(json.dumps(ops.to_config(pipeline)))
    rebuilt = shmaug.from_config(cfg, safe_mode=False)  # (a function of this module's)
    assert rebuilt == pipeline
    assert ops.to_config(rebuilt) == cfg
    seed = 11
    if not getattr(pipeline, "uses_global_rng", True):
        np.testing.assert_array_equal(
            pipeline(IMAGE, np.random.default_rng(seed)), rebuilt(IMAGE, np.random.default_rng(seed))
        )


def test_every_builtin_op_round_trips_through_config() -> None:
    for name in shmaug.available():
        op = Op(name)
        assert shmaug.from_config(json.loads(json.dumps(op.to_config()))) == op
        assert pickle.loads(pickle.dumps(op)) == op


def scale_channels(image: np.ndarray, rng: np.random.Generator,
                   gains: Any = (1.0, 1.0, 1.0)) -> np.ndarray:
    assert isinstance(gains, (np.ndarray, tuple))
    return (image * np.asarray(gains)).astype(image.dtype)


def test_an_array_parameter_compares_hashes_and_configures_as_its_numbers(
        scratch_registry: None) -> None:
    """An array bound to an op ran, but ``==``, ``hash`` and ``to_config`` raised numpy's
    and Python's bare errors."""
    shmaug.register("scale_channels")(scale_channels)
    gains = np.array([1.5, 1.0, 0.5])
    op = shmaug.get("scale_channels").bind(gains=gains)
    gains[0] = 9.0  # the caller's array changed after binding: not the op's
    as_tuple = Op("scale_channels", gains=(1.5, 1.0, 0.5))
    assert op == as_tuple and hash(op) == hash(as_tuple)
    assert isinstance(op.kwargs["gains"], np.ndarray) and not op.kwargs["gains"].flags.writeable
    cfg = json.loads(json.dumps(op.to_config()))
    assert cfg["params"] == {"gains": [1.5, 1.0, 0.5]}
    assert shmaug.from_config(cfg, safe_mode=False) == op
    clone = pickle.loads(pickle.dumps(op))
    assert clone == op and isinstance(clone.kwargs["gains"], np.ndarray)  # workers get it so
    image = np.full((2, 2, 3), 100, np.uint8)
    np.testing.assert_array_equal(op(image, np.random.default_rng(0))[0, 0], [150, 100, 50])
    scalar = np.array(1.5)  # 0-d: kept as a copy too
    bound = op.bind(gains=scalar)
    scalar[...] = 9.0
    assert float(bound.kwargs["gains"]) == 1.5 and not bound.kwargs["gains"].flags.writeable
    assert bound == Op("scale_channels", gains=1.5) and bound.to_config()["params"] == {
        "gains": 1.5}
    texture = np.zeros((512, 512, 3), np.uint8)  # a large one: compared as an array, and
    large = op.bind(gains=texture)  # shown as numpy shows it (its nested tuples were 4 MB of
    assert len(repr(large)) < 1000 and large == op.bind(gains=texture.copy())  # repr, 1.5 s)
    assert large != op and op != large
    with_nan = op.bind(gains=np.array([np.nan, 1.0, 1.0]))  # (NaN != NaN: it equalled no copy)
    assert pickle.loads(pickle.dumps(with_nan)) == with_nan
    assert len({with_nan, pickle.loads(pickle.dumps(with_nan))}) == 1


@pytest.mark.parametrize("mix", [ops.MixUp(0.2, num_classes=10), ops.CutMix(p=0.5),
                                 ops.Mix(label_smoothing=0.1)], ids=repr)
def test_a_mix_round_trips_through_its_config(mix: Any) -> None:
    cfg = json.loads(json.dumps(ops.to_config(mix)))  # (was refused: "not a module-level
    assert set(cfg) == {"type", "mixup_alpha", "cutmix_alpha", "p", "switch_p",  # function")
                        "label_smoothing", "num_classes"}  # every setting, defaults included
    rebuilt = shmaug.from_config(cfg)
    assert rebuilt == mix and hash(rebuilt) == hash(mix) and repr(rebuilt) == repr(mix)


def test_registered_functions_and_partials_become_ops() -> None:
    pipe = Compose([ops.rotate, functools.partial(ops.shear, x=0.1), "smooth"])
    assert pipe.ops == (Op("rotate"), Op("shear", x=0.1), Op("smooth"))


def test_uses_global_rng_flags() -> None:
    legacy = ops.from_pil(old_pil_aug)
    says_yes = _tests_ops.SaysGlobal()
    assert legacy.uses_global_rng is False  # seeds the globals itself from rng
    assert Op("rotate").uses_global_rng is False
    assert Compose(["rotate", OneOf(["shear", "smooth"])]).uses_global_rng is False
    assert Compose(["rotate", Maybe(says_yes)]).uses_global_rng is True
    assert OneOf(["rotate", plain_function]).uses_global_rng is None  # unknown: watched
    assert OneOf([says_yes, plain_function]).uses_global_rng is True  # one says yes
    assert shmaug.presets.glyph_distort().uses_global_rng is False


@pytest.mark.parametrize("weights", [[float("nan"), 1.0], [float("inf"), 1.0], [1.0, -1.0]])
def test_one_of_refuses_weights_that_are_not_finite_non_negative(weights) -> None:
    """NaN and inf passed the check and always picked the last op ([inf, 1] too)."""
    with pytest.raises(errors.ArgumentError, match=r"`weights` of OneOf expects 2 finite"):
        OneOf([Op("hflip"), Op("vflip")], weights=weights)


@pytest.mark.parametrize("config,key,hint", [
    ({"type": "Maybe", "op": {"type": "Op", "name": "hflip", "params": {}}, "prob": 0.05},
     "prob", "Did you mean 'p' for 'prob'"),
    ({"type": "OneOf", "ops": [{"type": "Op", "name": "hflip", "params": {}}], "weight": [9]},
     "weight", "Did you mean 'weights'"),
    ({"type": "Compose", "ops": [{"type": "Op", "name": "hflip", "params": {}}],
      "valu_range": [0, 255]}, "valu_range",
     "Did you mean 'value_range'"),
    ({"type": "Compose", "ops": [{"type": "Op", "name": "rotate", "parms": {"degrees": 30}}]},
     "parms", "Did you mean 'params'"),  # (an Op's keys went unchecked: rotate at defaults)
    ({"type": "Op", "name": "rotate", "params": {}, "value_range": [0, 1]}, "value_range", ""),
    ({"type": "Mix", "mixup_alpa": 0.3}, "mixup_alpa", "Did you mean 'mixup_alpha'")])
def test_a_config_key_its_type_does_not_take_is_refused(config, key, hint) -> None:
    """A hand-edited typo was dropped and the default taken without a word (p=0.5)."""
    with pytest.raises(errors.ArgumentError, match=rf"has the key\(s\) \['{key}'\].*{hint}"):
        shmaug.from_config(config)
    defaulted = {"type": "Compose", "ops": [{"type": "Op", "name": "hflip", "params": {}}],
                 "value_range": None, "mask_fill": 0}
    assert shmaug.from_config(defaulted) == Compose([Op("hflip")])  # its keys, at defaults


def test_a_pipeline_config_whose_ops_are_not_a_list_says_so() -> None:
    with pytest.raises(errors.ArgumentError, match=r"`config\['ops'\]` of type 'Compose' must be "
                                                   r"a list of its members' configs; received "
                                                   r"'hflip'"):  # (was: received 'h')
        shmaug.from_config({"type": "Compose", "ops": "hflip"})


def test_one_of_follows_weights_and_maybe_p() -> None:
    pick = OneOf([Op("hflip"), Op("vflip")], weights=[3, 1])
    image = np.arange(16, dtype=np.uint8).reshape(4, 4)
    rng = np.random.default_rng(0)
    hits = sum(np.array_equal(pick(image, rng), image[:, ::-1]) for _ in range(4000))
    assert 0.72 < hits / 4000 < 0.78
    assert Maybe("hflip", p=0.0)(image, rng) is image
    np.testing.assert_array_equal(Maybe("hflip", p=1.0)(image, rng), image[:, ::-1])
    with pytest.raises(errors.ArgumentError, match="`weights`"):
        OneOf(["hflip", "vflip"], weights=[1])
    with pytest.raises(errors.ArgumentError, match="`p`"):
        Maybe("hflip", p=1.5)


def test_some_of_applies_n_distinct_ops() -> None:
    image = np.zeros((8, 8), np.uint8)
    some = SomeOf([Op("cutout", holes=1, size=0.25, fill=v) for v in (0.2, 0.4, 0.6, 0.8)], n=2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        levels = set(np.unique(some(image, rng))) - {0}
        assert 1 <= len(levels) <= 2  # two holes (they may overlap and hide one)
    with pytest.raises(errors.ArgumentError, match="`n`"):
        SomeOf(["hflip"], n=3)
    with pytest.raises(errors.ArgumentTypeError, match="`ops`"):
        Compose("rotate")  # type: ignore[arg-type]


# --- picklability -----------------------------------------------------------------------


def test_check_picklable_names_the_lambda_inside_a_pipeline() -> None:
    pipe = Compose(["rotate", OneOf(["shear", lambda image, rng: image])])
    with pytest.raises(errors.NotPicklableError) as info:
        ops.check_picklable(pipe, name="augment")
    msg = str(info.value)
    assert "augment.ops[1].ops[1]" in msg and "lambda" in msg and "module level" in msg


def test_check_picklable_names_a_closure_in_from_pil() -> None:
    def legacy(img: Image.Image) -> Image.Image:
        return img

    with pytest.raises(errors.NotPicklableError, match=r"ops\[0\]\.fn.*closure.*module level"):
        ops.check_picklable(Compose([ops.from_pil(legacy)]))


def test_to_config_refuses_a_lambda() -> None:
    with pytest.raises(errors.ArgumentError, match="lambda"):
        Compose([lambda image, rng: image]).to_config()


def test_from_config_errors() -> None:
    with pytest.raises(errors.ArgumentError, match="'type'"):
        shmaug.from_config({"ops": []})
    with pytest.raises(errors.ArgumentError, match="Compose"):
        shmaug.from_config({"type": "Pipeline"})
    with pytest.raises(errors.UnknownOpError):
        shmaug.from_config({"type": "Op", "name": "nope", "params": {}})


def test_user_op_config_names_its_module(scratch_registry: None) -> None:
    shmaug.register("ink_bleed")(ink_bleed)
    cfg = Op("ink_bleed", strength=0.2).to_config()
    assert cfg["module"] == __name__
    del core._REGISTRY["ink_bleed"]  # as in a fresh worker: from_config imports the module
    with pytest.raises(errors.UnknownOpError):
        shmaug.from_config(cfg)  # importing this test module again does not re-register


# --- from_pil ---------------------------------------------------------------------------


def _called(op: Any, image: np.ndarray, seed: int) -> np.ndarray:
    """A direct call, with the globals disturbed first: only `rng` may matter."""
    random.seed(seed * 7919 + 1)
    np.random.seed(seed * 104729 + 1)
    out: np.ndarray = op(image, np.random.default_rng(seed))
    return out


@pytest.mark.parametrize("wrap, fn", [(ops.from_pil, old_pil_aug),
                                      (ops.from_array, old_array_aug)])
def test_legacy_wrappers_are_a_function_of_image_and_rng(wrap: Any, fn: Any) -> None:
    op = wrap(fn)
    image = np.zeros((24, 24, 3), np.uint8)
    image[4:20, 10:14] = 255
    first = _called(op, image, 1)
    assert first.shape == image.shape
    random.seed(5)  # whatever the globals hold before, the same rng gives the same image
    np.testing.assert_array_equal(first, op(image, np.random.default_rng(1)))
    outs = {_called(op, image, s).tobytes() for s in range(12)}
    assert len(outs) > 3, "different rngs should give different legacy draws"
    assert op.uses_global_rng is False  # it seeds the globals itself: the loader need not


def old_tensor_aug(image: Any) -> Any:
    """A torchvision-style transform: it calls a tensor's method numpy arrays lack."""
    return image.flip(-1)


def test_from_array_gets_a_writable_copy_and_keeps_what_fn_returns() -> None:
    image = np.zeros((8, 8), np.uint8)
    image.flags.writeable = False
    out = ops.from_array(old_array_in_place)(image, np.random.default_rng(0))
    assert out.dtype == np.float64 and (image == 0).all()


@pytest.mark.parametrize("wrap, fn, hint", [
    (ops.from_pil, old_array_aug, r"from_pil hands `fn` a PIL.Image.*from_array\(fn\)"),
    (ops.from_pil, old_cv_aug, r"(?s)not a numpy array.*from_pil hands `fn` a PIL.Image.*"
                               r"from_array\(fn\)"),
    (ops.from_array, old_pil_aug, r"from_array hands `fn` a numpy array.*from_pil\(fn\)"),
    (ops.from_array, old_tensor_aug, r"from_array hands `fn` a numpy array.*torch tensors.*"
                                     r"torch\.from_numpy\(image\)\.permute\(2, 0, 1\)"),
])
def test_the_wrong_legacy_wrapper_says_which_one_to_use(wrap: Any, fn: Any, hint: str) -> None:
    import cv2

    with pytest.raises((TypeError, AttributeError, cv2.error), match=hint):
        wrap(fn)(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0))


def an_op_already(image: Any, rng: Any) -> Any:
    return image


@pytest.mark.parametrize("wrap", [ops.from_pil, ops.from_array])
def test_a_function_of_image_and_rng_wrapped_is_told_it_is_an_op_already(wrap: Any) -> None:
    """It failed at sample 0 on its missing ``rng``, with the hint to use the other
    wrapper."""
    with pytest.raises(errors.ArgumentError, match=r"'an_op_already', which wants 2 arguments"
                                                   r".*pass it as `augment=`"):
        wrap(an_op_already)
    wrap(functools.wraps(an_op_already)(lambda image: image))  # a wrapper gives the rest


@pytest.mark.parametrize("wrap, fn, wanted", [
    (ops.from_pil, returns_array, "PIL.Image"),
    (ops.from_array, returns_none, "numeric numpy"),
    (ops.from_array, returns_list, r"received list.*np.asarray\(result, dtype=image.dtype\)"),
    (ops.from_array, returns_pil, r"received Image.*shmaug.from_pil\(fn\)")])
def test_legacy_wrappers_name_a_bad_result(wrap: Any, fn: Any, wanted: str) -> None:
    with pytest.raises(errors.OutputMismatchError, match=wanted):
        wrap(fn)(np.zeros((8, 8), np.uint8), np.random.default_rng(0))


def test_old_from_pil_configs_still_load() -> None:
    ref = f"{__name__}:old_pil_aug"
    assert shmaug.from_config({"type": "from_pil", "fn": ref, "seed_globals": True},
                              custom_objects={"old_pil_aug": old_pil_aug}) == \
        ops.from_pil(old_pil_aug)
    op = shmaug.from_config({"type": "from_array", "fn": f"{__name__}:old_array_aug"},
                            custom_objects={f"{__name__}:old_array_aug": old_array_aug})
    assert op == ops.from_array(old_array_aug) and ops.to_config(op)["type"] == "from_array"


@pytest.mark.parametrize("shape", [(16, 16), (16, 16, 1), (16, 16, 3)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float16])
def test_from_pil_keeps_layout_and_takes_tuple_results(shape: tuple[int, ...], dtype: Any) -> None:
    image = (np.random.default_rng(0).random(shape) * (255 if dtype == np.uint8 else 1)).astype(dtype)
    out = ops.from_pil(old_pil_aug_tuple)(image, np.random.default_rng(0))
    assert out.shape == image.shape and out.dtype == image.dtype
    np.testing.assert_allclose(out.astype(np.float32), image[:, ::-1].astype(np.float32), atol=1 / 255 + 1e-3)
    with pytest.raises(errors.OutputMismatchError, match="PIL.Image"):
        ops.from_pil(returns_array)(image, np.random.default_rng(0))


def _global_user_op(image, rng, strength=0.5):  # type: ignore[no-untyped-def]
    return image


def _pure_user_op(image, rng, strength=0.5):  # type: ignore[no-untyped-def]
    return image


def _unsaid_user_op(image, rng, strength=0.5):  # type: ignore[no-untyped-def]
    return image


def test_user_ops_say_whether_they_use_the_globals_or_are_watched(scratch_registry: None) -> None:
    from shmaug.ops import Op

    shmaug.register("_test_unsaid_user_op")(_unsaid_user_op)
    shmaug.register("_test_global_user_op", uses_global_rng=True)(_global_user_op)
    shmaug.register("_test_pure_user_op", uses_global_rng=False)(_pure_user_op)
    assert Op("_test_unsaid_user_op").uses_global_rng is None
    assert Op("_test_global_user_op").uses_global_rng is True
    assert Op("_test_pure_user_op").uses_global_rng is None  # a user's False: watched
    assert Op("rotate").uses_global_rng is False
    assert shmaug.Compose([Op("rotate"), Op("_test_unsaid_user_op")]).uses_global_rng is None
    assert shmaug.Compose([Op("rotate"), Op("_test_global_user_op")]).uses_global_rng is True


def test_draw_is_public_and_draws_a_parameter_as_the_builtin_ops_do() -> None:
    rng = np.random.default_rng(0)
    assert ops.draw(rng, 0.3) == 0.3 and ops.draw_int(rng, 2) == 2  # a number is used as is
    drawn = [ops.draw(rng, (0.1, 0.4), "strength") for _ in range(50)]
    assert all(0.1 <= v <= 0.4 for v in drawn) and len(set(drawn)) > 40
    assert {ops.draw_int(rng, (1, 3), "holes") for _ in range(60)} == {1, 2, 3}
    assert ops.draw(np.random.default_rng(7), (0.0, 1.0)) == \
        ops.draw(np.random.default_rng(7), (0.0, 1.0))
    with pytest.raises(errors.ArgumentError, match="`strength` expects low <= high"):
        ops.draw(rng, (0.4, 0.1), "strength")
    with pytest.raises(errors.ArgumentTypeError, match="`strength` expects a"):
        ops.draw(rng, "strong", "strength")
    with pytest.raises(errors.ArgumentError, match=r"within \[0"):
        ops.draw(rng, -1.0, "strength", lo=0)


class Stateful:
    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return image


def test_a_config_of_an_instance_says_it_is_one() -> None:
    """It said "not a module-level function" of a module-level class's instance."""
    with pytest.raises(errors.ArgumentError, match=r"an instance of Stateful.*@shmaug.register"):
        Compose([Stateful()]).to_config()


@pytest.mark.parametrize("given, told", [
    ({"fill_mode": "nearest"}, r"`fill_mode` is Keras' name for `border` \('nearest' is "
                               r"border='replicate'\)"),
    ({"rotation_range": 20}, r"degrees=\(-r, r\)"),
    ({"p": 0.5}, r"Maybe\(Op\(\.\.\.\), p=\.\.\.\)"),
    ({"degres": 5}, r"Check the spelling\.$")])
def test_other_libraries_parameter_names_are_told_ours(given, told) -> None:
    """ImageDataGenerator's and albumentations' names were told "Check the spelling"."""
    with pytest.raises(shmaug.ArgumentError, match=told):
        Op("rotate", **given)


def test_an_ops_parameters_are_read_only_as_the_workers_took_them() -> None:
    """A RandAugment schedule set `ra.kwargs["magnitude"] = 9`: workers=0 used it, the
    workers kept 0, and params and to_config still said 0."""
    op = Op("rand_augment", magnitude=0)
    with pytest.raises(TypeError):
        op.kwargs["magnitude"] = 9  # type: ignore[index]
    stronger = op.bind(magnitude=9)
    assert dict(stronger.params)["magnitude"] == 9 and dict(op.params)["magnitude"] == 0
    assert pickle.loads(pickle.dumps(stronger)) == stronger
    assert json.loads(json.dumps(op.kwargs)) == {"magnitude": 0}  # (a dict still)


def test_an_ops_parameter_set_as_an_attribute_is_told_bind() -> None:
    """`op.degrees = 5` (a schedule changing its level by hand) raised Python's bare
    `TypeError: super(type, obj): ...` on 3.11 (a frozen, slotted dataclass), naming no fix."""
    op = Op("rotate", degrees=(-5, 5))
    with pytest.raises(AttributeError, match=r"`\.degrees` not changed.*workers take it as "
                                             r"they start.*op\.bind\(degrees=\.\.\.\)"):
        op.degrees = 5  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"`\.name` not changed.*Op\('rotate', "):
        op.name = "shear"  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"`\.params` not changed"):
        del op.params
    assert op == Op("rotate", degrees=(-5, 5)) and pickle.loads(pickle.dumps(op)) == op
    # the other frozen parts of a pipeline: a name not a field was the same TypeError
    pipe, mix = shmaug.Compose(["hflip"]), shmaug.ops.MixUp(0.2, num_classes=3)
    with pytest.raises(AttributeError, match=r"This Compose is read-only \(`\.p` not "
                                             r"changed\).*as you make it, Compose\(\.\.\.\)"):
        pipe.p = 0.5  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"This Mix is read-only.*Fix: make another, "
                                             r"Mix\(\.\.\., mixup_alpha=\.\.\.\)"):
        mix.mixup_alpha = 0.4  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(pipe)) == pipe and pickle.loads(pickle.dumps(mix)) == mix

    class Logged(shmaug.Compose):  # a subclass's own attribute: told how a frozen one sets it
        def __init__(self, ops, tag):
            super().__init__(ops)
            self.tag = tag

    with pytest.raises(AttributeError, match=r"This Logged is read-only.*object\.__setattr__"
                                             r"\(self, 'tag', value\)"):
        Logged(["hflip"], "a")


def test_a_config_runs_no_code_it_names_unless_told_to(tmp_path, monkeypatch) -> None:
    """A shared config ran code: a from_array whose fn is 'pickle:loads' unpickled each image
    (its bytes a payload), and an op's 'module' was imported by from_config itself. As Keras'
    load_model, safe_mode (the default) resolves functions only from custom_objects and
    imports no module; safe_mode=False is for configs you wrote or trust."""
    evil = {"type": "Compose", "ops": [{"type": "from_array", "fn": "pickle:loads"},
                                       {"type": "Op", "name": "hflip"}]}
    with pytest.raises(errors.ArgumentError, match=r"names the function 'pickle:loads'.*"
                                                   r"custom_objects=\{'loads': loads\}.*"
                                                   r"safe_mode=False"):
        shmaug.from_config(evil)
    (tmp_path / "planted_ops.py").write_text("import pathlib\n"
                                             "pathlib.Path(__file__).with_suffix('.ran')"
                                             ".write_text('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(errors.ArgumentError, match=r"op 'hflip' of module 'planted_ops'.*"
                                                   r"import planted_ops first"):
        shmaug.from_config({"type": "Op", "name": "hflip", "module": "planted_ops"})
    assert not (tmp_path / "planted_ops.ran").exists()
    trusted = shmaug.from_config({"type": "from_array", "fn": f"{__name__}:old_array_aug"},
                                 safe_mode=False)
    assert trusted == ops.from_array(old_array_aug)


def test_an_ops_signature_shows_the_values_it_runs_with() -> None:
    """Fourth review: inspect.signature and help showed (image, rng, **override): an op's
    ranges, to tune by eye, were found only in its source."""
    import inspect

    shown = inspect.signature(Op("rotate", degrees=(-5, 5))).parameters
    assert shown["degrees"].default == (-5, 5) and shown["border"].default == "constant"
    assert inspect.signature(Op("rotate")).parameters["degrees"].default == (-15.0, 15.0)
    assert list(inspect.signature(Op).parameters) == ["name", "params"]  # (the class: its own)
