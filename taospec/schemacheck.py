"""A yes/no check for the job schema, compiled once into plain Python functions.

Validating with jsonschema costs far more than loading it, and loading it
costs more than most commands. Most files are valid, and a valid file needs
no error messages, so :func:`compile_schema` turns the schema into nested
closures that answer only "valid or not". Their answer is exactly
jsonschema's (Draft 2020-12, no format assertions) for plain YAML data:
mappings, lists, text, integers, finite floats, booleans and null. For
anything else :func:`is_plain` says no, and for anything a closure cannot
decide exactly (``uniqueItems`` over booleans, nulls or containers) it raises
:class:`Unsure`; in both cases the caller asks jsonschema, which also writes
every error message. A schema using a keyword not listed in
:data:`KEYWORDS` is not compiled at all. tests/test_schemacheck.py compares
the answers with jsonschema's on generated documents.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "$defs", "title", "description", "examples", "default"}
)
KEYWORDS = frozenset(
    {
        "type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
        "required", "properties", "additionalProperties", "propertyNames", "minProperties",
        "items", "minItems", "uniqueItems", "oneOf", "if", "then", "else", "$ref",
    }
)  # fmt: skip
_SCALARS = (str, int, bool, type(None))


class Unsure(Exception):
    """The compiled check cannot answer exactly for this document."""


class Uncompilable(ValueError):
    """The schema uses something the compiler does not know."""


def is_plain(value: Any) -> bool:
    """True for the data YAML's safe loader makes of ordinary documents."""
    kind = type(value)
    if kind is dict:
        return all(_plain_key(k) and is_plain(v) for k, v in value.items())
    if kind is list:
        return all(is_plain(v) for v in value)
    if kind is float:
        return math.isfinite(value)
    return kind in _SCALARS


def _plain_key(key: Any) -> bool:
    return type(key) in _SCALARS or (type(key) is float and math.isfinite(key))


def compile_schema(root: dict[str, Any]) -> Check:
    """The check for the schema ``root``, resolving ``$ref`` within it."""
    compiled: dict[str, Check] = {}

    def ref(pointer: str) -> Check:
        if pointer not in compiled:
            compiled[pointer] = lambda value: False  # replaced below; guards recursion
            target = _resolve(root, pointer)
            compiled[pointer] = build(target)

        def deferred(value: Any) -> bool:  # looked up when called: references may recurse
            return compiled[pointer](value)

        return deferred

    def build(schema: Any) -> Check:
        if schema is True:
            return lambda value: True
        if schema is False:
            return lambda value: False
        if not isinstance(schema, dict):
            raise Uncompilable(f"a schema must be an object or a boolean, not {schema!r}")
        unknown = set(schema) - KEYWORDS - ANNOTATIONS
        if unknown:
            raise Uncompilable(f"unknown keywords {sorted(unknown)}")
        if "$id" in schema and schema is not root:
            raise Uncompilable("$id below the root")
        checks = [check for check in _keywords(schema, build, ref) if check is not None]
        if not checks:
            return lambda value: True
        if len(checks) == 1:
            return checks[0]
        return lambda value: all(check(value) for check in checks)

    return build(root)


def _resolve(root: dict[str, Any], pointer: str) -> Any:
    if not pointer.startswith("#"):
        raise Uncompilable(f"only local references are compiled, not {pointer!r}")
    node: Any = root
    for part in filter(None, pointer[1:].split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise Uncompilable(f"{pointer} does not resolve")
    return node


def _keywords(
    schema: dict[str, Any], build: Callable[[Any], Check], ref: Callable[[str], Check]
) -> list[Check | None]:
    """One check per keyword of ``schema``."""
    return [
        _type(schema["type"]) if "type" in schema else None,
        _enum(schema["enum"]) if "enum" in schema else None,
        _const(schema["const"]) if "const" in schema else None,
        *_string(schema),
        *_number(schema),
        *_object(schema, build),
        *_array(schema, build),
        *_combined(schema, build),
        ref(schema["$ref"]) if "$ref" in schema else None,
    ]


_EXACT_TYPES = {"string": str, "object": dict, "array": list, "boolean": bool}


def is_type(value: Any, name: str) -> bool:
    """jsonschema's Draft 2020-12 type check (integral floats are integers, booleans are not)."""
    kind = type(value)
    if name in _EXACT_TYPES:
        return kind is _EXACT_TYPES[name]
    if name == "null":
        return value is None
    if name == "integer":
        return kind is int or (kind is float and value.is_integer())
    if name == "number":
        return kind in (int, float)
    raise Uncompilable(f"unknown type {name!r}")


def _type(wanted: str | list[str]) -> Check:
    names = [wanted] if isinstance(wanted, str) else list(wanted)
    for name in names:
        is_type(None, name)  # refuses unknown names now, not while checking
    if len(names) == 1 and names[0] in _EXACT_TYPES:
        exact = _EXACT_TYPES[names[0]]
        return lambda value: type(value) is exact
    return lambda value: any(is_type(value, name) for name in names)


def equal(one: Any, two: Any) -> bool:
    """JSON equality: ``True`` is not ``1``; lists and mappings compare item by item."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    return bool(one == two)


def _enum(options: list[Any]) -> Check:
    return lambda value: any(equal(option, value) for option in options)


def _const(wanted: Any) -> Check:
    return lambda value: equal(value, wanted)


def pattern_search(pattern: str) -> Callable[[str], re.Match[str] | None]:
    """A JSON Schema ``pattern``'s search, with ``$`` read as ECMA-262 (JSON Schema's
    dialect) reads it: the end of the text.

    Python's ``$`` also matches just before a final newline, which let a value such
    as ``"busybox:1\\n"`` (a YAML block scalar) pass ``^[a-z0-9:]+$``. The schema's
    patterns use ``$`` only as their last character (tests/test_schema.py holds it).
    """
    backslashes = len(pattern[:-1]) - len(pattern[:-1].rstrip("\\"))
    if pattern.endswith("$") and backslashes % 2 == 0:
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern).search


def _string(schema: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    if "pattern" in schema:
        search = pattern_search(schema["pattern"])
        checks.append(lambda value: type(value) is not str or search(value) is not None)
    if "minLength" in schema:
        low = schema["minLength"]
        checks.append(lambda value: type(value) is not str or len(value) >= low)
    if "maxLength" in schema:
        high = schema["maxLength"]
        checks.append(lambda value: type(value) is not str or len(value) <= high)
    return checks


def _number(schema: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    if "minimum" in schema:
        low = schema["minimum"]
        checks.append(lambda value: type(value) not in (int, float) or value >= low)
    if "maximum" in schema:
        high = schema["maximum"]
        checks.append(lambda value: type(value) not in (int, float) or value <= high)
    return checks


def _object(schema: dict[str, Any], build: Callable[[Any], Check]) -> list[Check]:
    checks: list[Check] = []
    if "required" in schema:
        names = list(schema["required"])
        checks.append(lambda value: type(value) is not dict or all(n in value for n in names))
    if "minProperties" in schema:
        low = schema["minProperties"]
        checks.append(lambda value: type(value) is not dict or len(value) >= low)
    properties = schema.get("properties", {})
    if properties:
        known = [(name, build(sub)) for name, sub in properties.items()]

        checks.append(
            lambda value: (
                type(value) is not dict
                or all(check(value[name]) for name, check in known if name in value)
            )
        )
    if "additionalProperties" in schema:
        checks.append(_additional(schema["additionalProperties"], properties, build))
    if "propertyNames" in schema:
        names_check = build(schema["propertyNames"])
        checks.append(lambda value: type(value) is not dict or all(map(names_check, value)))
    return checks


def _additional(rule: Any, properties: dict[str, Any], build: Callable[[Any], Check]) -> Check:
    if rule is True:
        return lambda value: True
    if rule is False:
        names = frozenset(properties)
        return lambda value: type(value) is not dict or names.issuperset(value)
    check = build(rule)
    return lambda value: (
        type(value) is not dict
        or all(check(item) for key, item in value.items() if key not in properties)
    )


def _array(schema: dict[str, Any], build: Callable[[Any], Check]) -> list[Check]:
    checks: list[Check] = []
    if "items" in schema:
        item_check = build(schema["items"])

        checks.append(lambda value: type(value) is not list or all(map(item_check, value)))
    if "minItems" in schema:
        low = schema["minItems"]
        checks.append(lambda value: type(value) is not list or len(value) >= low)
    if schema.get("uniqueItems") is True:
        checks.append(lambda value: type(value) is not list or unique(value))
    return checks


def unique(items: list[Any]) -> bool:
    """No two items equal, for lists of text and numbers; :class:`Unsure` for anything else.

    Text never equals a number, and ``1`` equals ``1.0``, as in jsonschema.
    """
    texts = [item for item in items if type(item) is str]
    numbers = [item for item in items if type(item) in (int, float)]
    if len(texts) + len(numbers) != len(items):
        raise Unsure("uniqueItems over booleans, nulls or containers")
    return len(set(texts)) == len(texts) and len(set(numbers)) == len(numbers)


def _combined(schema: dict[str, Any], build: Callable[[Any], Check]) -> list[Check]:
    checks: list[Check] = []
    if "oneOf" in schema:
        choices = [build(s) for s in schema["oneOf"]]
        checks.append(lambda value: sum(1 for c in choices if c(value)) == 1)
    if "if" in schema:
        condition = build(schema["if"])
        then = build(schema.get("then", True))
        otherwise = build(schema.get("else", True))
        checks.append(lambda value: then(value) if condition(value) else otherwise(value))
    return checks
