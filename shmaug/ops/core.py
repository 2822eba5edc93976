"""The op registry, bound ops, config round trip and the picklability check.

Owns: ``register`` / ``get`` / ``available``, the :class:`Op` object (a registered function
with bound parameters), ``to_config`` / ``from_config`` and ``check_picklable``. The built-in
ops live in ``builtin/`` (parameter sampling) over ``kernels/`` (pure kernels); composition
lives in ``compose.py``; the legacy PIL wrapper in ``interop/legacy.py``.

An op is a function ``op(image, rng, **params) -> image`` whose extra parameters all have
defaults, so ``op(image, rng)`` always works. Registration is an explicit decorator; it returns
the function unchanged, so the function stays importable (and picklable) under its own name.
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import importlib
import inspect
import logging
import pickle
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from ..errors import (
    ArgumentError,
    ArgumentTypeError,
    DuplicateOpError,
    from_shmaug,
    NotPicklableError,
    UnknownOpError,
)
from ..seeding import trusted_rng_use

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
_C = TypeVar("_C", bound=type)
Augment = Callable[[np.ndarray, np.random.Generator], np.ndarray]
"""What the loader runs per sample: ``augment(image, rng) -> image``."""
Check = Callable[[Any, str], object]
"""``check(value, name)`` raises for a bad parameter value (e.g. ``params.bounds``)."""

# What an op does to what lies on its image (a mask, boxes, keypoints): ``register(targets=)``.
STILL = "still"  # it moves no pixel: they stay right as they are (colour, noise, blur, erasing)
WARPED = "warped"  # it moves pixels through the moves it notes (targets.moves): they follow
BLENDED = "blended"  # it blends copies moved differently (AugMix): none can follow
TARGET_KINDS = (STILL, WARPED, BLENDED)


def still(fn: F) -> F:
    """Mark ``fn``, a function of the user's (an ``augment`` override), as moving no pixel,
    so masks, boxes and keypoints pass it as they are: ``fn.targets = "still"``, which a
    type checker refuses to see set on a function."""
    fn.targets = STILL  # type: ignore[attr-defined]
    return fn


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One registry entry: the function and what its signature allows."""

    name: str
    fn: Callable[..., np.ndarray]
    params: tuple[str, ...]  # keyword parameters after (image, rng), in signature order
    defaults: Mapping[str, Any]
    module: str  # where fn is defined; from_config imports it when the name is unknown
    checks: Mapping[str, Check] = field(default_factory=dict)  # run by Op(...) per parameter
    targets: str | None = None  # STILL, WARPED or BLENDED; None: its author did not say
    takes_undecoded: bool = False  # it crops a photo at decode time (``shmaug.deferred``)
    sized_by: tuple[str, str] | None = None  # the (height, width) parameters setting its size


_REGISTRY: dict[str, OpSpec] = {}


def _local_kind(obj: Any) -> str | None:
    """'a lambda' / 'a local function (closure)' when obj cannot be found at module level."""
    qualname = getattr(obj, "__qualname__", "")
    if "<lambda>" in qualname:
        return "a lambda"
    if "<locals>" in qualname:
        return f"a local function (closure) defined inside `{qualname.split('.<locals>')[0]}`"
    return None


def register(
    name: str, *, replace: bool = False, uses_global_rng: bool | None = None,
    checks: Mapping[str, Check] | None = None, targets: str | None = None,
    takes_undecoded: bool = False, sized_by: tuple[str, str] | None = None,
) -> Callable[[F], F]:
    """Register ``fn(image, rng, **params)`` as an op under ``name``.

    Args:
        name: registry name, used by ``get`` and in configs.
        replace: allow replacing an op already registered under ``name`` (the same
            module's function of the same name, defined again, always replaces it).
        uses_global_rng: whether the op draws from the global ``random`` / ``np.random``.
            True: the loader seeds them for every sample (~10 us). None (the default) or
            False: the workers watch for a draw (under 1 us a sample) and seed them from the
            first one on (that sample is made again, seeded); only shmaug's own ops, which
            draw from ``rng`` alone, are taken at their word that they never draw.
        checks: ``{parameter: check(value, name)}``, run on the bound or default value when
            an :class:`Op` is built, so a bad value fails in the main process and not when a
            worker first takes that branch of a pipeline.
        targets: what the op does to the masks, boxes and keypoints that lie on its image:
            ``"still"`` (it moves no pixel, so they stay right as they are), ``"warped"`` (it
            moves pixels only through shmaug's ops, whose moves they follow) or
            ``"blended"`` (none can follow). None (the default): it does not say, and a
            pipeline given such targets refuses it rather than leave them behind.
        takes_undecoded: the op takes a photo not yet decoded (a ``shmaug.deferred.Undecoded``,
            which it may crop at decode time) as well as pixels; a pipeline that starts with
            it is handed photos undecoded.
        sized_by: the names of its (height, width) parameters when they alone set the size
            of its output, whatever the input's (a resize, a resized crop): a pipeline over
            photos of many sizes is then known to give one size where both are pixels.

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        DuplicateOpError: ``name`` is taken and ``replace`` is false.
        NotPicklableError: the function is a lambda or closure (it could not reach workers).
        ArgumentError: the signature does not start with ``(image, rng)``, a parameter has
            no default, ``targets`` is none of those, or ``sized_by`` names no parameter.

    Example:
        >>> @register("ink_bleed")
        ... def ink_bleed(image, rng, strength=(0.1, 0.4)): ...
        >>> get("ink_bleed")  # doctest: +SKIP
    """
    if not isinstance(name, str) or not name:
        raise ArgumentTypeError(
            f"`name` expects a non-empty str; received {name!r} ({type(name).__name__}). "
            f'Use @shmaug.register("my_op").'
        )

    if targets is not None and targets not in TARGET_KINDS:
        raise ArgumentError(
            f"`targets` of op `{name}` expects one of {list(TARGET_KINDS)} or None; received "
            f"{targets!r}. Fix: \"still\" for an op that moves no pixel.")

    def decorate(fn: F) -> F:
        if uses_global_rng is not None:
            fn.uses_global_rng = bool(uses_global_rng)  # type: ignore[attr-defined]
        if name in _REGISTRY and not replace and not _redefined(_REGISTRY[name].fn, fn):
            raise DuplicateOpError(
                f"op name `{name}` is already registered (by {_REGISTRY[name].module}."
                f"{_REGISTRY[name].fn.__qualname__}); received another function "
                f"{fn.__module__}.{fn.__qualname__}. Pick another name or pass replace=True."
            )
        kind = _local_kind(fn)
        if kind is not None:
            raise NotPicklableError(
                f"op `{name}` is {kind}, which cannot be pickled for spawned workers. Move it "
                f"to module level (a `def` at the top of a module) and register it there."
            )
        params = list(inspect.signature(fn).parameters.values())
        if len(params) < 2 or any(
            p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params[:2]
        ):
            raise ArgumentError(
                f"op `{name}` expects a signature fn(image, rng, **params); received "
                f"{fn.__qualname__}{inspect.signature(fn)}. Take the image and rng first."
            )
        extra = [p for p in params[2:] if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        missing = [p.name for p in extra if p.default is p.empty]
        if missing:
            raise ArgumentError(
                f"op `{name}` expects a default for every parameter after (image, rng); "
                f"received none for {missing}. Give each a default range, e.g. strength=(0.1, 0.4)."
            )
        unknown = [s for s in sized_by or () if s not in {p.name for p in extra}]
        if unknown or (sized_by is not None and len(sized_by) != 2):
            raise ArgumentError(
                f"`sized_by` of op `{name}` expects the names of its (height, width) "
                f"parameters; received {sized_by!r}, and {unknown or sized_by} are not two of "
                f"its parameters {[p.name for p in extra]}. Fix: sized_by=(\"height\", "
                f"\"width\") naming two of them.")
        _REGISTRY[name] = OpSpec(
            name, fn, tuple(p.name for p in extra), {p.name: p.default for p in extra},
            fn.__module__, dict(checks or {}), targets, bool(takes_undecoded),
            None if sized_by is None else (str(sized_by[0]), str(sized_by[1])),
        )
        return fn

    return decorate


def _redefined(old: Callable[..., Any], new: Callable[..., Any]) -> bool:
    """Whether ``new`` is ``old`` defined again (a notebook cell run twice, a module
    reloaded): the same module and name, so it replaces it."""
    return old is new or (getattr(old, "__module__", None), getattr(old, "__qualname__", None)) \
        == (getattr(new, "__module__", None), getattr(new, "__qualname__", ""))


def _spec(name: str, module: str = "") -> OpSpec:
    known = _REGISTRY.get(name)
    if module and module != __name__ and (known is None or known.module != module):
        # a user op: importing its module registers it (in a fresh worker; also where it
        # replaced a built-in of that name, registered there already)
        if module not in sys.modules:
            _LOADING.get().may_import(f"op {name!r} of module {module!r}", module)
        try:
            importlib.import_module(module)
        except ImportError:
            logger.debug("could not import %s to find op %s", module, name)
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), _REGISTRY, n=3)
        hint = f"Did you mean {', '.join(repr(c) for c in close)}? " if close else ""
        raise UnknownOpError(
            f"no op registered as `{name}`. {hint}Known ops: {', '.join(available())}. "
            f"Register yours with @shmaug.register({name!r}) in a module that is imported."
        ) from None


def available() -> list[str]:
    """Sorted names of every registered op.

    Example:
        >>> "rotate" in available()
        True
    """
    return sorted(_REGISTRY)


def _kept(value: Any) -> Any:
    """A parameter as the op's function gets it: lists (from JSON) as tuples, so bound ops
    compare and hash equal after a round trip; an array as a read-only copy of it (a change
    to the caller's array would not reach the workers)."""
    if isinstance(value, (list, tuple)):
        return tuple(_kept(v) for v in value)
    if isinstance(value, np.ndarray):
        kept = value.copy()
        kept.flags.writeable = False
        return kept
    return value


def _frozen(value: Any) -> Any:
    """A kept parameter as the op compares, hashes and shows it: an array wrapped (``==`` on
    arrays is elementwise, and they do not hash)."""
    if isinstance(value, np.ndarray):
        return _ArrayParam(value)
    if isinstance(value, tuple):
        return tuple(_frozen(v) for v in value)
    return value


class _ArrayParam:
    """An array parameter as the op compares it: equal to an array or nested tuples of the
    same numbers (what its config reads back as), hashed as those tuples (only when hashed:
    a texture of millions of pixels would cost seconds per ``bind``), shown as numpy does."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __eq__(self, other: object) -> bool:
        try:
            theirs = np.asarray(other.array if isinstance(other, _ArrayParam) else other)
        except ValueError:  # (nested sequences of several lengths)
            return False
        if not isinstance(other, _ArrayParam):  # (the numbers a config reads back as: a NaN
            return bool(np.array_equal(self.array, theirs))  # there equals none, as in Python)
        try:  # (NaN equals NaN: an op equals its copy, and hashes alike)
            return bool(np.array_equal(self.array, theirs, equal_nan=True))
        except TypeError:  # (no NaN in strings or objects)
            return bool(np.array_equal(self.array, theirs))

    def __hash__(self) -> int:
        return hash(_nan_named(self.array.tolist()))

    def __repr__(self) -> str:
        """numpy's, on one line, for a few values; a large one by its dtype and shape (a
        texture's pixels made a loader's repr a screenful)."""
        if self.array.size > 16:
            return f"<{self.array.dtype} array {self.array.shape}>"
        return "array(" + np.array2string(self.array, separator=", ").replace("\n", "") + ")"


def _nan_named(value: Any) -> Any:
    """Numbers in nested lists as nested tuples, a NaN as "nan": Python hashes a float NaN
    by its identity, so an array with one hashed apart from its copy, which it equals."""
    if isinstance(value, list):
        return tuple(_nan_named(v) for v in value)
    return "nan" if isinstance(value, float) and value != value else value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    if isinstance(value, _ArrayParam):
        return value.array.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


# Other libraries' names for what an op's parameters are, told where one is passed to an op
_THEIRS = {
    "fill_mode": "Keras' name for `border` ('nearest' is border='replicate')",
    "border_mode": "albumentations' name for `border`",
    "cval": "ImageDataGenerator's `fill`, as a fraction of the value range (c / 255)",
    "fill_value": "Keras' `fill`, as a fraction of the value range (c / 255)",
    "value": "albumentations' `fill`, as a fraction of the value range (c / 255)",
    "p": "a probability: wrap the op, Maybe(Op(...), p=...)",
    "rotation_range": "ImageDataGenerator's: Op('rotate', degrees=(-r, r))",
    "width_shift_range": "ImageDataGenerator's: Op('translate', x=(-w, w)), w a fraction of "
                         "the width (pixels: divided by it)",
    "height_shift_range": "ImageDataGenerator's: Op('translate', y=(-h, h)), h a fraction of "
                          "the height (pixels: divided by it)",
    "zoom_range": "ImageDataGenerator's: Op('zoom', height_factor=(-z, z), width_factor=(-z, z))",
    "shear_range": "ImageDataGenerator's, in degrees: Op('shear', x=(-t, t)) with t its tangent",
    "brightness_range": "ImageDataGenerator's: Op('brightness_contrast', brightness=(a, b), "
                        "contrast=1.0)",
}


def read_only(cls: _C) -> _C:
    """``cls`` (a frozen dataclass of the public API) refusing an attribute set or deleted
    with the fix: a frozen dataclass may not define ``__setattr__`` itself, and its own names
    none (with slots, on 3.11, a name not a field, ``op.degrees = 5``, raised a bare
    ``TypeError`` about ``super``)."""
    def refuse(self: Any, name: str, *value: Any) -> None:
        raise dataclasses.FrozenInstanceError(_refusal(self, name))
    cls.__setattr__ = refuse  # type: ignore[method-assign]
    cls.__delattr__ = refuse  # type: ignore[method-assign,assignment]
    return cls


def _refusal(obj: Any, name: str) -> str:
    kind = type(obj).__name__
    if isinstance(obj, Op):
        spec = _REGISTRY.get(obj.name)
        fix = (f"make another with op.bind({name}=...)" if spec is not None and
               name in spec.params else f"bind the op's parameters as you make it, "
               f"Op({obj.name!r}, ...)")
        what = repr(obj)
    elif not from_shmaug(type(obj).__module__):  # a subclass's own attribute
        fix = (f"set it as {kind} is made, with object.__setattr__(self, {name!r}, value) "
               f"(a frozen dataclass)")
        what = f"This {kind}"
    else:  # (not dataclasses.replace: a pipeline's range is bound into its ops as made)
        given = {f.name for f in dataclasses.fields(obj) if f.init}
        fix = (f"make another, {kind}(..., {name}=...)" if name in given
               else f"give what it takes as you make it, {kind}(...)")
        what = f"This {kind}"
    return (f"{what} is read-only (`.{name}` not changed): workers take it as they start, "
            f"and a change would not reach them. Fix: {fix}, and a new loader with it for the "
            f"next stage (docs/loader.md#changing-settings-between-epochs).")


class _RunsWith:
    """``Op.__signature__``: of an op, its function's signature with the values the op runs
    with (bound, else the defaults; ``inspect.signature`` and ``help`` showed ``(image, rng,
    **override)``, and an op's ranges were found only in its source); of the class, None, so
    that ``inspect`` reads its constructor's."""

    def __get__(self, op: Any, owner: Any = None) -> inspect.Signature | None:
        if op is None:
            return None
        signature = inspect.signature(op.fn)
        return signature.replace(parameters=[
            p.replace(default=op.kwargs[p.name]) if p.name in op.kwargs else p
            for p in signature.parameters.values()])


@read_only
@dataclass(frozen=True, slots=True, init=False)
class Op:
    """A registered op with some parameters bound: a picklable ``op(image, rng)`` callable.

    Unbound parameters keep the function's defaults. It pickles and configures by name, so the
    function itself never crosses a process boundary; but a script's own op (registered in
    ``__main__``) pickles with its function, which a fresh worker may not register.

    Example:
        >>> rot = Op("rotate", degrees=(-5, 5))
        >>> rot.to_config()
        {'type': 'Op', 'name': 'rotate', 'params': {'degrees': [-5, 5]}}
    """

    name: str
    params: tuple[tuple[str, Any], ...]
    fn: Callable[..., np.ndarray] = field(compare=False, repr=False)
    kwargs: Mapping[str, Any] = field(compare=False, repr=False)

    @property
    def uses_global_rng(self) -> bool | None:
        """Whether the op draws from the global RNGs; None when unknown: its author did not
        say, or said False of a function of their own (``seeding.trusted_rng_use``)."""
        says = getattr(self.fn, "uses_global_rng", None)
        if says is None and from_shmaug(self.fn.__module__):
            return False
        return trusted_rng_use(says, self.fn)

    def __init__(self, name: str, /, **params: Any) -> None:
        spec = _spec(name, str(params.pop("_module", "")))
        unknown = sorted(set(params) - set(spec.params))
        if unknown and not _has_var_keyword(spec.fn):
            theirs = [f"`{u}` is {_THEIRS[u]}" for u in unknown if u in _THEIRS]
            raise ArgumentError(
                f"op `{name}` has no parameter {', '.join(f'`{u}`' for u in unknown)}; "
                + (f"expected some of {list(spec.params)}. " + (
                    f"Fix: {'; '.join(theirs)} (docs/keras.md#from-imagedatagenerator)."
                    if theirs else "Check the spelling.") if spec.params
                   else f"it takes none. Fix: Op({name!r}) alone.")
            )
        kept = {k: _kept(v) for k, v in params.items()}
        for key, check in spec.checks.items():
            check(kept.get(key, spec.defaults.get(key)), key)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "params",
                           tuple(sorted((k, _frozen(v)) for k, v in kept.items())))
        object.__setattr__(self, "fn", spec.fn)
        # read-only: a change would reach this process and not the workers, which got the
        # op when they started (a schedule changes ops by a new Op per stage: bind)
        object.__setattr__(self, "kwargs", Params(kept))

    __signature__ = _RunsWith()

    def __call__(self, image: np.ndarray, rng: np.random.Generator, **override: Any) -> np.ndarray:
        if override:
            return self.fn(image, rng, **{**self.kwargs, **override})
        return self.fn(image, rng, **self.kwargs)

    @property
    def takes_undecoded(self) -> bool:
        """Whether the op takes a photo not yet decoded (``register(takes_undecoded=)``)."""
        spec = _REGISTRY.get(self.name)
        return spec is not None and spec.takes_undecoded

    @property
    def fixes_size(self) -> bool:
        """Whether every output has one size whatever the input's: its ``sized_by``
        parameters (``register(sized_by=)``) are both pixels (ints), not fractions."""
        spec = _REGISTRY.get(self.name)
        if spec is None or spec.sized_by is None:
            return False
        sides = [self.kwargs.get(k, spec.defaults[k]) for k in spec.sized_by]
        return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in sides)

    def bind(self, **params: Any) -> Op:
        """A copy with more parameters bound (later values win)."""
        return Op(self.name, **{**self.kwargs, **params})

    @property
    def targets(self) -> str | None:
        """What the op does to the targets on its image (``register(targets=)``)."""
        spec = _REGISTRY.get(self.name)
        return None if spec is None else spec.targets

    @property
    def takes_value_range(self) -> bool:
        """Whether the op has a ``value_range`` parameter (every built-in op that reads levels
        does; a user's op may not, and then takes its image as it is)."""
        spec = _REGISTRY.get(self.name)
        return spec is not None and "value_range" in spec.params

    def with_value_range(self, value_range: tuple[float, float]) -> Op:
        """This op with ``value_range`` bound, if it takes one and has none bound yet (a
        range bound on the op itself wins: an op may work after a change of range)."""
        if not self.takes_value_range or "value_range" in self.kwargs:
            return self
        return self.bind(value_range=value_range)

    def to_config(self) -> dict[str, Any]:
        """A JSON-ready dict; ``from_config`` rebuilds an equal op."""
        cfg: dict[str, Any] = {"type": "Op", "name": self.name,
                               "params": {k: _thaw(v) for k, v in self.params}}
        module = _REGISTRY[self.name].module if self.name in _REGISTRY else ""
        if not from_shmaug(module):
            cfg["module"] = module
        return cfg

    def __reduce__(self) -> tuple[Any, ...]:
        spec = _REGISTRY.get(self.name)
        if spec is not None and spec.module == "__main__" and getattr(
                sys.modules.get("__main__"), spec.fn.__qualname__, None) is spec.fn:
            # A script's op goes with its function: a fresh worker imports the script but not
            # what its `if __name__ == "__main__":` guard registers (shipped by value then,
            # engine/workers/shipping.py). Its checks ran here, and may not pickle.
            return (_registered_op, (replace(spec, checks={}), dict(self.kwargs)))
        return (_rebuild_op, (self.name, spec.module if spec else "", dict(self.kwargs)))

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.params)
        return f"Op({self.name!r}{args})"


def _has_var_keyword(fn: Callable[..., Any]) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def _rebuild_op(name: str, module: str, params: dict[str, Any]) -> Op:
    return Op(name, _module=module, **params)


def _registered_op(spec: OpSpec, params: dict[str, Any]) -> Op:
    """A script's op in a worker, registered there first where the script's import did not
    (or where it replaced another op of that name, a built-in one included)."""
    known = _REGISTRY.get(spec.name)
    if known is None or not _redefined(known.fn, spec.fn):
        _REGISTRY[spec.name] = spec
    return Op(spec.name, **params)


def get(name: str) -> Op:
    """The op registered as ``name``, as an :class:`Op` with its default parameters.

    Raises:
        UnknownOpError: nothing is registered under ``name`` (the message lists close names).

    Example:
        >>> rot = get("rotate").bind(degrees=(-5, 5))
        >>> out = rot(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    return Op(name)


def with_value_range(member: Any, value_range: tuple[float, float] | None) -> Any:
    """``member`` with ``value_range`` bound where it takes one (ops, compositions, from_pil);
    a plain callable is returned as it is."""
    bind = getattr(member, "with_value_range", None)
    return member if value_range is None or bind is None else bind(value_range)


class Params(dict[str, Any]):
    """An op's bound parameters: a dict that refuses changes (``Op.bind`` makes another op).
    A change would reach this process and not the workers, which took the op when they
    started; a dict still, for ``json.dumps`` and ``dataclasses.asdict``."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("An Op's parameters are read-only: the workers took them when they "
                        "started. Fix: op.bind(name=value) makes another op with them.")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (Params, (dict(self),))


WRAPPERS = {"albumentations": "shmaug.from_albumentations", "keras": "shmaug.from_keras"}
"""Pipelines of other libraries, by their top module, and the shmaug function that takes
them: they are called otherwise than fn(image, rng)."""


def as_op(obj: Any) -> Callable[..., Any]:
    """Normalize a pipeline member: registered functions (or partials of them) become Ops."""
    import functools

    top = type(obj).__module__.partition(".")[0]
    if top in WRAPPERS:  # (found at its first sample, in a worker, as a KeyError)
        given = "A.Compose([...])" if top == "albumentations" else "[...]"
        raise ArgumentTypeError(
            f"pipeline members are called fn(image, rng); received {type(obj).__qualname__} "
            f"of {top}, which is called otherwise. Fix: wrap it as a member of its own, "
            f"{WRAPPERS[top]}({given}).")

    if isinstance(obj, functools.partial) and not obj.args:
        name = _registered_name(obj.func)
        if name is not None:
            return Op(name, **obj.keywords)
    if isinstance(obj, str):
        return Op(obj)
    name = _registered_name(obj)
    if name is not None:
        return Op(name)
    if not callable(obj) or isinstance(obj, type):
        what = f"the class {obj.__qualname__} itself" if isinstance(obj, type) else \
            f"{obj!r} ({type(obj).__name__})"
        raise ArgumentTypeError(
            f"pipeline members must be callables fn(image, rng) or op names; received "
            f"{what}. Use shmaug.get(name), an instance such as Op('rotate'), or a "
            f"registered function."
        )
    member: Callable[..., Any] = obj
    return member


def _registered_name(obj: Any) -> str | None:
    for spec in _REGISTRY.values():
        if spec.fn is obj:
            return spec.name
    return None


# --- config round trip ------------------------------------------------------------------

_CONFIG_TYPES: dict[str, Callable[[dict[str, Any]], Any]] = {}
CONFIG_VERSION = 1  # the config format from_config reads; a config may say so in "version"


def config_type(tag: str) -> Callable[[F], F]:
    """Register the builder for configs whose ``type`` is ``tag`` (used by compose / legacy)."""

    def decorate(builder: F) -> F:
        _CONFIG_TYPES[tag] = builder
        return builder

    return decorate


def to_config(obj: Any) -> dict[str, Any]:
    """Config of any pipeline member: an object with ``to_config`` or a module-level function."""
    if hasattr(obj, "to_config"):
        cfg: dict[str, Any] = obj.to_config()
        return cfg
    kind = _local_kind(obj)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if kind is None and (module is None or qualname is None) and callable(obj):
        raise ArgumentError(  # an instance with state: a config names code, not objects
            f"cannot write a config for {obj!r}: it is an instance of "
            f"{type(obj).__qualname__}, whose state a config cannot name. Fix: make it a "
            f"module-level function registered with @shmaug.register(name), its settings "
            f"as the op's parameters.")
    if kind is not None or module is None or qualname is None:
        raise ArgumentError(
            f"cannot write a config for {obj!r}: it is {kind or 'not a module-level function'}. "
            f"Define it at module level and register it with @shmaug.register(name)."
        )
    return {"type": "callable", "ref": f"{module}:{qualname}"}


@dataclass(frozen=True)
class _Trusted:
    """What a ``from_config`` call may resolve: a config is code where it names functions or
    modules (``pickle:loads`` as a ``from_array`` function), so in ``safe_mode`` only what
    ``custom_objects`` gives, and modules imported already, as Keras' ``load_model``."""

    safe_mode: bool = False  # (outside from_config: a pickle's names, from this process)
    custom_objects: Mapping[str, Any] = field(default_factory=dict)
    active: bool = False  # within a from_config call: a member's nested call keeps it

    def may_import(self, what: str, module: str) -> None:
        if self.safe_mode:
            raise ArgumentError(
                f"`config` names {what}, which is not imported here, and importing a module a "
                f"config names runs its code. Fix: import {module} first (its "
                f"@shmaug.register runs), or from_config(config, safe_mode=False) for a "
                f"config you wrote or trust.")

    def resolved(self, ref: str) -> Any:
        qualname = ref.partition(":")[2]
        for key in (ref, qualname, qualname.rpartition(".")[2]):
            if key in self.custom_objects:
                return self.custom_objects[key]
        if self.safe_mode:
            raise ArgumentError(
                f"`config` names the function {ref!r}, which from_config would import and "
                f"call: a config is code where it names functions. Fix: pass it, "
                f"from_config(config, custom_objects={{{qualname!r}: {qualname}}}), or "
                f"from_config(config, safe_mode=False) for a config you wrote or trust.")
        return _imported(ref)


_LOADING: contextvars.ContextVar[_Trusted] = contextvars.ContextVar("_LOADING",
                                                                     default=_Trusted())


def from_config(config: Mapping[str, Any], *, safe_mode: bool = True,
                custom_objects: Mapping[str, Any] | None = None) -> Any:
    """Rebuild a pipeline from ``pipeline.to_config()`` (a dict, e.g. loaded from JSON).

    A config names ops by their registered names; one that names a function (a member of
    your own, ``from_array``'s or ``from_pil``'s) or an op's module to import is code. As
    Keras' ``load_model``, ``safe_mode`` resolves those only from ``custom_objects`` (keyed
    by ``"module:qualname"`` or the function's name) and modules imported already;
    ``safe_mode=False`` imports them, for a config you wrote or trust.

    Raises:
        ArgumentError: the config is malformed, names an unknown type, or (in safe mode) a
            function or module not given.
        UnknownOpError: it names an op that is not registered (and its module does not import).

    Example:
        >>> import json
        >>> p = Op("rotate", degrees=(-5, 5))
        >>> from_config(json.loads(json.dumps(p.to_config()))) == p
        True
    """
    if _LOADING.get().active:  # a member's config, within the call that loads the whole
        return _built(config)
    token = _LOADING.set(_Trusted(bool(safe_mode), dict(custom_objects or {}), active=True))
    try:
        return _built(config)
    finally:
        _LOADING.reset(token)


def _built(config: Mapping[str, Any]) -> Any:
    """``from_config``'s work, each member's config in turn."""
    if not isinstance(config, Mapping) or "type" not in config:
        raise ArgumentError(
            f"`config` expects a dict with a 'type' key, as written by to_config(); received "
            f"{config!r}. Fix: pass the dict that pipeline.to_config() returned."
        )
    version = config.get("version", 1)  # configs written so far carry none: the first format
    if version != CONFIG_VERSION:
        raise ArgumentError(
            f"`config['version']` is {version!r} but this shmaug reads config version "
            f"{CONFIG_VERSION}; the config was written by another shmaug version. Fix: install "
            f"the shmaug that wrote it, or rebuild the pipeline in code and save it again."
        )
    tag = config["type"]
    try:
        if tag == "Op":
            params = config.get("params", {})
            if not isinstance(params, Mapping):
                raise ArgumentError(
                    f"`config['params']` of op {config.get('name')!r} must be a dict of "
                    f"parameters; received {params!r}. Fix: pass the dict that to_config() wrote."
                )
            return _unknown_keys_refused(
                config, Op(config["name"], _module=config.get("module", ""), **params))
        if tag == "callable":
            return resolve_ref(config["ref"])  # (in safe mode: from custom_objects)
        if tag not in _CONFIG_TYPES:
            raise ArgumentError(
                f"`config['type']` expects one of {['Op', 'callable', *sorted(_CONFIG_TYPES)]}; "
                f"received {tag!r}. Was it written by a newer shmaug? Fix: install the shmaug "
                f"that wrote it, or register the op or type it names before loading."
            )
        return _unknown_keys_refused(config, _CONFIG_TYPES[tag](dict(config)))
    except KeyError as exc:  # a builder's missing entry: name it, not a bare KeyError
        raise ArgumentError(
            f"`config` of type {tag!r} lacks the key {exc.args[0]!r} (keys: {sorted(config)}). "
            f"Fix: pass the dict that pipeline.to_config() returned, unedited."
        ) from None


_ALIASES = {"prob": "p", "probability": "p", "proba": "p"}  # what difflib finds too far
_CONFIG_META = frozenset({"version", "module", "seed_globals"})  # keys any config may hold
# ("seed_globals": from_pil's and from_array's old key, read and ignored)


def _unknown_keys_refused(config: Mapping[str, Any], built: Any) -> Any:
    """``built``, unless ``config`` has keys its own config does not (a hand-edited typo,
    ``prob`` for ``p``, would be dropped and its default taken without a word)."""
    try:
        known = set(to_config(built)) | _CONFIG_META
    except Exception:  # a member that writes no config: its builder read what it reads
        return built
    if dataclasses.is_dataclass(built):  # (a default left out of its config: mask_fill)
        known |= {f.name for f in dataclasses.fields(built)
                  if f.init and f.compare and f.name[0] != "_"}
    extra = sorted(set(config) - known)
    if extra:
        close = {k: [_ALIASES[k]] if _ALIASES.get(k) in known else
                 difflib.get_close_matches(k, known, n=1) for k in extra}
        hint = "".join(f" Did you mean {m[0]!r} for {k!r}?" for k, m in close.items() if m)
        raise ArgumentError(
            f"`config` of type {config['type']!r} has the key(s) {extra}, which it does not "
            f"take (it takes {sorted(known - _CONFIG_META)}).{hint} "
            f"Fix: rename or remove them.")
    return built


def resolve_ref(ref: str) -> Any:
    """``"module:qualname"``, as the ``from_config`` call in progress may resolve it."""
    return _LOADING.get().resolved(str(ref))


def _imported(ref: str) -> Any:
    """Import ``"module:qualname"``."""
    module, _, qualname = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ArgumentError(
            f"config reference `{ref}` does not resolve ({exc}). Make sure its module is "
            f"importable in this process (on sys.path, not a notebook cell)."
        ) from None
    return obj


# --- picklability -----------------------------------------------------------------------


def children(obj: Any) -> Iterator[tuple[str, Any]]:
    """(label, child) pairs of a composition object, for error paths."""
    ops = getattr(obj, "ops", None)
    if isinstance(ops, tuple):
        for i, op in enumerate(ops):
            yield f"ops[{i}]", op
    for attr in ("op", "fn"):
        child = getattr(obj, attr, None)
        if child is not None and not isinstance(obj, Op):
            yield attr, child


def members(obj: Any) -> Iterator[Any]:
    """``obj`` and every pipeline member inside it, depth first: the one walk of a pipeline
    tree. A member that says what it does to targets (an op, ``from_array(fn,
    targets="still")``) speaks for what it wraps."""
    yield obj
    if getattr(obj, "targets", None) in TARGET_KINDS:
        return
    for _, child in children(obj):
        yield from members(child)


def _first_unpicklable(obj: Any, path: str) -> tuple[str, Any, Exception] | None:
    try:
        pickle.dumps(obj)
        return None
    except Exception as exc:
        for label, child in children(obj):
            found = _first_unpicklable(child, f"{path}.{label}")
            if found is not None:
                return found
        return path, obj, exc


def check_picklable(fn: Any, name: str = "augment") -> bytes:
    """Pickle ``fn`` for the workers, or explain which op cannot travel and how to fix it.

    Args:
        fn: the pipeline (any callable).
        name: what the caller calls it, used in the message.

    Returns:
        The pickled bytes.

    Raises:
        NotPicklableError: naming the first op inside ``fn`` that does not pickle, whether it
            is a lambda, closure or local function, and telling to define it at module level.

    Example:
        >>> blob = check_picklable(Op("rotate"))
    """
    try:
        return pickle.dumps(fn)
    except Exception:
        found = _first_unpicklable(fn, name)
    path, bad, exc = found if found is not None else (name, fn, Exception("unknown"))
    owner = getattr(bad, "__self__", None)  # (a bound method: named by its object's class)
    what = (f"{type(owner).__qualname__}.{bad.__name__}" if owner is not None and
            not inspect.ismodule(owner) and hasattr(bad, "__name__") else
            getattr(bad, "__qualname__", None) or type(bad).__qualname__)
    local = _local_kind(bad)
    kind = local or f"a {type(bad).__name__} object"
    held = None if local else _held(bad)
    if held is not None:
        where, handle, top = held
        raise NotPicklableError(
            f"`{name}` cannot be pickled for the worker processes: `{path}` ({what}) holds "
            f"`{where}`, a {type(handle).__name__}, and pickling it failed with "
            f"{type(exc).__name__}: {exc}. An open file, database or connection (h5py, LMDB, "
            f"sqlite3, a file object) cannot go to another process. Fix: open it in each "
            f"process on first use (`self.{top} = None` in __init__, made in the method "
            f"that reads it while it is None), and leave it out of the pickle: def "
            f"__getstate__(self): return {{**self.__dict__, {top!r}: None}} "
            f"(docs/loader.md#files-databases-and-handles).")
    raise NotPicklableError(
        f"`{name}` cannot be pickled for the worker processes: `{path}` ({what}) is {kind} "
        f"and pickling it failed with {type(exc).__name__}: {exc}. Define it at module level "
        f"(a `def` at the top of an importable module, not a lambda or a function inside "
        f"another function), and register custom ops with @shmaug.register(name)."
    )


def _state(obj: Any) -> dict[str, Any]:
    """What ``obj`` (or a bound method's object) pickles: its ``__getstate__``'s dict where
    it has one of its own, else its attributes; {} for a function, a class or a module (what
    they hold is code, not state)."""
    owner = getattr(obj, "__self__", obj)
    if inspect.isfunction(owner) or inspect.isclass(owner) or inspect.ismodule(owner):
        return {}
    if getattr(type(owner), "__getstate__", None) is not getattr(object, "__getstate__", None):
        try:
            state = owner.__getstate__()
        except Exception:  # noqa: BLE001 - then its attributes
            state = None
        if isinstance(state, dict):
            return state
    attributes = getattr(owner, "__dict__", None)
    return attributes if isinstance(attributes, dict) else {}


def is_handle(value: Any) -> bool:
    """Whether ``value`` is an open handle no other process can take: something to close
    (a file, an h5py File, an LMDB Environment, a sqlite3 Connection, a socket) that does
    not pickle. Arrays and code are not (nor a lock: the fix for it is another)."""
    if isinstance(value, np.ndarray) or inspect.isroutine(value) or inspect.isclass(value) \
            or not callable(getattr(value, "close", None)):
        return False
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - whatever refuses it
        return True
    return False


def _held(obj: Any) -> tuple[str, Any, str] | None:
    """The first open handle ``obj`` (or a bound method's object) pickles with (``is_handle``):
    where it lies (an attribute, or one level inside one: a dict's entry, a helper object's
    attribute), the handle, and the attribute to leave out; None where it holds none."""
    for key, value in _state(obj).items():
        if is_handle(value):
            return key, value, key
        inner = value.items() if isinstance(value, dict) else enumerate(value) \
            if isinstance(value, (list, tuple)) else () if isinstance(value, np.ndarray) \
            else _state(value).items()  # (a file per shard: a list of them)
        for sub, item in inner:
            if is_handle(item):
                return (f"{key}.{sub}" if not isinstance(value, (dict, list, tuple)) else
                        f"{key}[{sub!r}]", item, key)
    return None
