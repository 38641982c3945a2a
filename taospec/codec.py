"""Frozen values (taospec's dataclasses, tuples, mappings, scalars) to JSON and back, exactly.

:mod:`taospec.cache` stores loaded job files and rendered plans with this.
Every JSON object in an encoding is a tagged wrapper (``{"t": [...]}`` for a
tuple, ``{"c": "module:Class", "f": {...}}`` for a dataclass, ...), so nothing
is ambiguous, and :func:`same` compares two values by type as well as by
value, so the cache can check that what it would hand back is exactly what
was computed. A value of any other type raises :class:`Unencodable`.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from types import MappingProxyType
from typing import Any

_SCALARS = (bool, int, str)


class Unencodable(ValueError):
    """The value holds something this codec does not carry exactly."""


def encode(value: Any) -> Any:
    """Plain JSON data for ``value``."""
    kind = type(value)
    if value is None or kind in _SCALARS:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise Unencodable("a float that is not finite")
        return value
    if kind is tuple:
        return {"t": [encode(v) for v in value]}
    if kind is list:
        return {"l": [encode(v) for v in value]}
    if kind is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is MappingProxyType:
        return {"m": [[encode(k), encode(v)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and kind.__module__.startswith("taospec."):
        fields = dataclasses.fields(value)
        if not all(f.init for f in fields):
            raise Unencodable(f"{kind.__qualname__} has fields its constructor does not take")
        named = {f.name: encode(getattr(value, f.name)) for f in fields}
        return {"c": f"{kind.__module__}:{kind.__qualname__}", "f": named}
    raise Unencodable(f"a {kind.__qualname__} value")


def decode(data: Any) -> Any:
    """The value :func:`encode` made ``data`` from."""
    if data is None or type(data) in (*_SCALARS, float):
        return data
    if type(data) is not dict:
        raise Unencodable("not an encoding")
    if set(data) == {"c", "f"} and type(data["c"]) is str and type(data["f"]) is dict:
        return _instance(data["c"], data["f"])
    if len(data) != 1:
        raise Unencodable("not an encoding")
    ((tag, items),) = data.items()
    if tag == "t":
        return tuple(decode(v) for v in items)
    if tag == "l":
        return [decode(v) for v in items]
    if tag in ("d", "m"):
        built = {decode(k): decode(v) for k, v in items}
        return built if tag == "d" else MappingProxyType(built)
    raise Unencodable(f"unknown tag {tag!r}")


def _instance(name: str, fields: dict[str, Any]) -> Any:
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith("taospec."):
        raise Unencodable(f"{name} is not one of taospec's classes")
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    cls = getattr(module, qualname, None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise Unencodable(f"{name} is not a dataclass")
    return cls(**{key: decode(value) for key, value in fields.items()})


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1 == 1.0 == True`` are not the same)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return repr(a) == repr(b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) in (dict, MappingProxyType):
        return (
            list(a) == list(b)
            and all(same(k, j) for k, j in zip(a, b, strict=True))
            and all(same(a[k], b[k]) for k in a)
        )
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)
