"""Frozen values without :mod:`dataclasses`, for every typed object taospec loads.

Importing :mod:`dataclasses` imports :mod:`inspect`, and making each class
generates and compiles its methods: together they cost more than the rest
of a command's start. Jobs, plans, records and a backend's status are
:class:`Value` subclasses instead: equal, hashed and shown by their fields,
immutable, and copied with :meth:`Value.replace`, as frozen dataclasses are.
Each lists its fields in ``__slots__`` and takes them in an ``__init__`` that
a reader (and the type checker) sees whole.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for ``ls``
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Self


class Value:
    """An immutable value compared, hashed and shown by its fields, as a frozen dataclass is.

    Subclasses list their fields in ``__slots__`` and set them with
    :meth:`_set` in ``__init__``.
    """

    __slots__: tuple[str, ...] = ()

    def _set(self, values: Mapping[str, object]) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, values[name])

    def _assign(self, *values: object) -> None:
        """Set every field, in ``__slots__`` order (the quick way for small, busy values)."""
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__ or not isinstance(other, Value):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuilt, (type(self), self._fields()))

    def replace(self, **changes: object) -> Self:
        """A copy with ``changes`` applied."""
        values = {name: getattr(self, name) for name in self.__slots__}
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(type(self))
        copy._set({**values, **changes})
        return copy


def as_data(value: object) -> object:
    """``value`` with every :class:`Value` in it turned into a dict of its fields, recursively.

    Tuples stay tuples and lists lists, as :func:`dataclasses.asdict` leaves them.
    """
    if isinstance(value, Value):
        return {name: as_data(getattr(value, name)) for name in value.__slots__}
    if isinstance(value, tuple | list):
        return type(value)(as_data(item) for item in value)
    if isinstance(value, dict):
        return {as_data(key): as_data(item) for key, item in value.items()}
    return value


def _rebuilt(cls: type[Value], fields: tuple[object, ...]) -> Value:
    """A value from its fields (how copies and pickles of a :class:`Value` are made)."""
    value = object.__new__(cls)
    value._set(dict(zip(cls.__slots__, fields, strict=True)))
    return value
