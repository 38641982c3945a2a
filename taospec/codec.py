"""Frozen values (taospec's Values, tuples, mappings, scalars) as key text, and exact equality.

:mod:`taospec.cache` names a rendered plan by the job it was rendered from:
:func:`encode` gives equal jobs the same JSON data in every process (every
JSON object in it is a tagged wrapper, ``{"t": [...]}`` for a tuple,
``{"c": "module:Class", "f": {...}}`` for a :class:`~taospec.values.Value`, so nothing is
ambiguous), and raises :class:`Unencodable` for a value of any other type.
:func:`same` compares two values by type as well as by value, so the cache
can check that what it would hand back is exactly what was computed.
"""

from __future__ import annotations

import math
from types import MappingProxyType

from taospec.values import Value

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
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
    if isinstance(value, Value) and kind.__module__.startswith("taospec."):
        named = {name: encode(getattr(value, name)) for name in kind.__slots__}
        return {"c": f"{kind.__module__}:{kind.__qualname__}", "f": named}
    raise Unencodable(f"a {kind.__qualname__} value")


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
    if isinstance(a, Value):
        return all(same(getattr(a, name), getattr(b, name)) for name in a.__slots__)
    return bool(a == b)
