"""The machinery every typed part of a record shares: field validation on construction, and JSON in and out.

A part is a frozen, keyword-only dataclass derived from :class:`Part`. Its annotations are the schema: ``int`` (a whole
number, never a boolean), ``float`` (any finite number), ``str``, ``bool``, ``X | None`` (optional),
``tuple[X, ...]`` (a JSON list), ``tuple[X, Y]`` (a JSON list of two), ``Mapping[str, X]`` (a JSON object), ``Any``
(any JSON data) and nested parts. A field's ``metadata={"min": 0}`` refuses negative numbers.

Construction checks every field and normalises what JSON or a producer hands in (lists become tuples, numpy scalars
Python numbers, a NaN or infinity in an optional number None, a JSON object in a nested part's place that part);
anything else raises :class:`RecordError` naming the field and what is accepted. :meth:`Part.to_dict` writes the
fields that hold a value (None is left out: absent and None mean the same when read back); :meth:`Part.from_dict`
refuses fields the schema does not have.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from truepeak.errors import TruepeakError

#: ``metadata`` of a field that must not be negative.
NONNEGATIVE = {"min": 0}


class RecordError(TruepeakError):
    """A record, or a part of one, that breaks the schema. ``field`` is the dotted path of the bad field
    (``"workload.m"``; empty for a rule about the whole record) and the message says what is accepted."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"field '{field}' {problem}" if field else problem)

    def within(self, prefix: str) -> RecordError:
        """The same error with ``prefix`` in front of the field's path (``"m"`` -> ``"workload.m"``)."""
        if not prefix:
            return self
        return RecordError(f"{prefix}.{self.field}" if self.field else prefix, self.problem)


def kind_of(value: Any) -> str:
    """What a JSON value is, in words: ``"null"``, ``"a boolean"``, ``"a number"``, ``"a string"``, ``"a list"``,
    ``"an object"``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _scalar(value: Any) -> Any:
    """A numpy or torch scalar as the Python number it holds; anything else as it is."""
    if not isinstance(value, (bool, int, float, str)) and hasattr(value, "item") and hasattr(value, "dtype"):
        return value.item()
    return value


@functools.cache
def _optional(tp: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, else ``(tp, False)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True
    return tp, False


def _expected(tp: Any) -> str:
    """What a field of type ``tp`` accepts, in words."""
    tp, _ = _optional(tp)
    origin = typing.get_origin(tp)
    if tp is int:
        return "a whole number"
    if tp is float:
        return "a number"
    if tp is str:
        return "a string"
    if tp is bool:
        return "a boolean"
    if origin is tuple:
        return "a list"
    if origin in (Mapping, dict) or _is_part(tp):
        return "an object"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in tp)
    return "JSON data"


def _plural(tp: Any) -> str:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is not Ellipsis:
        return "pairs of numbers"
    return {int: "whole numbers", float: "numbers", str: "strings", bool: "booleans"}.get(tp, "values")


def _is_part(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Part)


def coerce(value: Any, tp: Any, name: str) -> Any:
    """``value`` checked against the annotation ``tp`` and normalised (module docstring).

    Raises:
        RecordError: the value does not fit; ``field`` is ``name``.
    """
    base, optional = _optional(tp)
    value = _scalar(value)
    if value is None:
        if optional or base is Any:
            return None
        raise RecordError(name, "is null" if base not in (int, float) else f"is null, not {_expected(base)}")

    def bad() -> RecordError:
        return RecordError(name, f"is {kind_of(value)}, not {_expected(base)}{' or null' if optional else ''}")

    if base is Any:
        return _json_data(value, name)
    if base is bool:
        if not isinstance(value, bool):
            raise bad()
        return value
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return value
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        if not math.isfinite(value):
            if optional:
                return None
            raise RecordError(name, f"is {value!r}, not a finite number")
        return value
    if base is str:
        if not isinstance(value, str):
            raise bad()
        return value
    if isinstance(base, type) and issubclass(base, enum.Enum):
        try:
            return base(value)
        except ValueError:
            raise RecordError(name, f"is {value!r}, not {_expected(base)}") from None
    if _is_part(base):
        if isinstance(value, base):
            return value
        if isinstance(value, Mapping):
            return base.from_dict(value, name)
        raise bad()
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise bad()
        if len(args) == 2 and args[1] is Ellipsis:
            item = args[0]
            if item is float and all(type(v) is float and math.isfinite(v) or type(v) is int for v in value):
                return tuple(value)  # the common case (samples), checked in one pass
            try:
                return tuple(coerce(v, item, name) for v in value)
            except RecordError:
                raise RecordError(name, f"is a list, not a list of {_plural(item)}") from None
        if len(value) != len(args):
            raise RecordError(name, f"is a list of {len(value)}, not of {len(args)}")
        return tuple(coerce(v, a, name) for v, a in zip(value, args))
    if origin in (Mapping, dict):
        if not isinstance(value, Mapping):
            raise bad()
        key_tp, value_tp = args
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise RecordError(name, "has a key that is not a string")
            out[k] = coerce(v, value_tp, f"{name}.{k}")
        return out
    if isinstance(base, type):
        if isinstance(value, base):
            return value
        raise RecordError(name, f"is {kind_of(value)}, not a {base.__name__}")
    return value


def _json_data(value: Any, name: str) -> Any:
    """JSON data as it will be written: tuples as lists, numpy scalars as numbers, NaN and infinity as None."""
    value = _scalar(value)
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _json_data(v, f"{name}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_data(v, name) for v in value]
    if isinstance(value, Part):
        return value.to_dict()
    raise RecordError(name, f"is {kind_of(value)}; a record holds numbers, strings, lists and objects")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Part:
    """Base of every typed part of a record: checked on construction, written and read as a JSON object."""

    #: What the part is, in words, for messages (``"a gemm workload"``).
    DESCRIPTION: ClassVar[str] = "a record part"

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            value = coerce(getattr(self, f.name), hints[f.name], f.name)
            low = f.metadata.get("min")
            if low is not None and isinstance(value, (int, float)) and value < low:
                raise RecordError(f.name, f"is negative ({value!r})" if value < 0 else
                                  f"is {value!r}; it must be at least {low}")
            object.__setattr__(self, f.name, value)

    def to_dict(self) -> dict[str, Any]:
        """The part as a JSON object: every field that holds a value, in field order (None is left out)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = _json_data(value, f.name)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = ""):
        """The part from a JSON object (:meth:`to_dict`'s output).

        Args:
            data: the JSON object.
            where: the part's path in the record, for messages (``"workload"``).

        Raises:
            RecordError: not an object, a required field missing, a field the schema does not have, or a field of the
                wrong type; the message names the field (``field 'workload.m' is missing``).
        """
        if not isinstance(data, Mapping):
            raise RecordError(where, f"is {kind_of(data)}, not an object")
        known = {f.name: f for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                raise RecordError(_join(where, str(key)), f"is not a field of {cls.DESCRIPTION}")
        kwargs = {}
        for name, f in known.items():
            if name in data:
                kwargs[name] = data[name]  # checked (and nested parts built) by __post_init__
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(_join(where, name), "is missing")
        try:
            return cls(**kwargs)
        except RecordError as exc:
            raise exc.within(where) from None

    def replace(self, **changes: Any):
        """A copy with ``changes`` (checked like a new part)."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AsRead(Part):
    """A part of a record kind this truepeak does not know: its JSON object kept as read (``data``), so a newer file
    still renders."""

    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    @classmethod
    def from_dict(cls, data: Any, where: str = ""):
        if not isinstance(data, Mapping):
            raise RecordError(where, f"is {kind_of(data)}, not an object")
        return cls(data=data)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


__all__ = ["RecordError", "Part", "AsRead", "NONNEGATIVE", "coerce", "kind_of"]
