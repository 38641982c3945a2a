"""The job spec's JSON Schema and the sentences its errors become.

The schema's one real file is ``schemas/job.schema.json`` at the top of the
repository, which editors read through the ``yaml-language-server`` comment at
the top of each example job. A built wheel carries it inside the package as
``taospec/schemas/job.schema.json`` (pyproject.toml's force-include); an
editable install runs the checkout's package, so there it is read from the
checkout.

A document is first put to the schema compiled by :mod:`taospec.schemacheck`;
only a document that check rejects (or cannot judge) is handed to jsonschema,
which is imported then and finds every error with its message. The schema is
never checked against its metaschema at run time (tests/test_schema.py does
that).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from taospec import schemacheck
from taospec.diagnostics import Problem, closest
from taospec.lint import redacted
from taospec.yamlsrc import Source

if TYPE_CHECKING:  # the library itself is imported where it is first used
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


SCHEMA_NAME = "job.schema.json"
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def schema_path() -> Path:
    """The schema's file: inside the installed package, else in the checkout."""
    packaged = Path(__file__).resolve().parent / "schemas" / SCHEMA_NAME
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "schemas" / SCHEMA_NAME


def schema_text() -> str:
    """The schema exactly as shipped: inside the installed package, else in the checkout."""
    return schema_path().read_text("utf-8")


@cache
def schema() -> dict[str, Any]:
    """The parsed schema."""
    loaded: dict[str, Any] = json.loads(schema_text())
    return loaded


def _focused(definition: str | None) -> dict[str, Any]:
    """The schema, or the schema checking one ``$defs`` entry instead of the whole file."""
    root = schema()
    if definition is None:
        return root
    focused = {k: v for k, v in root.items() if k not in ("if", "then", "else")}
    focused["$ref"] = f"#/$defs/{definition}"
    return focused


@cache
def _validator(definition: str | None) -> Draft202012Validator:
    from jsonschema import Draft202012Validator, validators

    # The same reading of "pattern" as the compiled check (schemacheck.pattern_search).
    checker = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, {"pattern": _pattern}
    )
    return cast("Draft202012Validator", checker(_focused(definition)))


def _pattern(
    validator: Draft202012Validator, pattern: str, instance: Any, _schema: Any
) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError

    if (
        validator.is_type(instance, "string")
        and schemacheck.pattern_search(pattern)(instance) is None
    ):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _check(definition: str | None) -> schemacheck.Check | None:
    """The compiled yes/no check, or None when the schema uses what it cannot compile."""
    try:
        return schemacheck.compile_schema(_focused(definition))
    except schemacheck.Uncompilable:
        return None


def is_image_ref(text: str) -> bool:
    """Whether ``text`` is an image reference Docker accepts (the schema's ``image_ref``, its
    repository name no longer than the engine takes)."""
    node = schema()["$defs"]["image_ref"]
    return (
        len(text) <= node["maxLength"]
        and bool(schemacheck.pattern_search(node["pattern"])(text))
        and image_name_too_long(text) is None
    )


IMAGE_NAME_MAX = 255
"""The longest repository name the engine takes, its registry included."""
_DOCKER_HUB = ("docker.io", "index.docker.io")


def image_name_too_long(ref: str) -> str | None:
    """Why the engine refuses the repository name of the image reference ``ref`` as too long,
    or None. It reads the name without tag and digest, ``docker.io/`` before a name whose
    first part names no registry (no ``.`` or ``:``, not ``localhost``), and ``library/``
    before a Docker Hub name of one part: ``busybox`` is ``docker.io/library/busybox``."""
    name = ref.partition("@")[0]
    if name.rfind(":") > name.rfind("/"):
        name = name[: name.rfind(":")]
    first, slash, rest = name.partition("/")
    if not slash:
        full = f"docker.io/library/{name}"
    elif first in _DOCKER_HUB:
        full = f"docker.io/{'' if '/' in rest else 'library/'}{rest}"
    elif "." in first or ":" in first or first == "localhost":
        full = name
    else:
        full = f"docker.io/{name}"
    if len(full) <= IMAGE_NAME_MAX:
        return None
    added = f" as {full[: len(full) - len(name)]}..." if full != name else ""
    return (
        f"the repository name is {len(full)} characters{added}, past the {IMAGE_NAME_MAX} "
        "the engine takes; shorten it"
    )


def is_valid(data: Any, definition: str | None = None) -> bool:
    """True when the compiled check accepts ``data``: then jsonschema finds nothing either."""
    check = _check(definition)
    if check is None or not schemacheck.is_plain(data):
        return False
    try:
        return check(data)
    except schemacheck.Unsure:
        return False


def validate(source: Source, definition: str | None = None) -> list[Problem]:
    """Every schema violation in ``source`` (against one ``$defs`` entry, if named)."""
    if is_valid(source.data, definition):
        return []
    validator = _validator(definition)
    return [p for error in validator.iter_errors(source.data) for p in _problems(source, error)]


def _problems(source: Source, error: ValidationError) -> list[Problem]:
    error = _most_specific(error)
    path = tuple(error.absolute_path)
    if error.validator == "additionalProperties":
        return _unknown_keys(source, error, path)
    if "propertyNames" in error.absolute_schema_path and isinstance(error.instance, str):
        # A key that is refused: point at the key itself, not at its mapping's first line.
        return [source.problem((*path, error.instance), _sentence(error), key=True)]
    return [source.problem(path, _sentence(error) + _gpus_hint(path, error.instance))]


def _gpus_hint(path: tuple[Any, ...], value: object) -> str:
    """``gpus: "0,1"`` is a list written as text: say how to write it."""
    if path != ("gpus",) or not isinstance(value, str):
        return ""
    ids = [part.strip() for part in value.replace(" ", ",").split(",") if part.strip()]
    if ids and all(part.isdigit() for part in ids):
        return f"; write a list of ids: gpus: [{', '.join(ids)}]"
    return ""


def _most_specific(error: ValidationError) -> ValidationError:
    """For oneOf/anyOf, the error of the branch meant for the value's type.

    A value whose type fits no branch is reported against the oneOf itself,
    whose description says what is accepted. An error below the value (a list's
    item, a mapping's key) is the branch's that took the value's type.
    """
    while error.validator in ("oneOf", "anyOf") and error.context:
        depth = len(error.absolute_path)
        typed = [
            e
            for e in error.context
            if e.validator not in {"type", "const"} or len(e.absolute_path) > depth
        ]
        if not typed:
            return error
        error = max(typed, key=lambda e: len(e.absolute_path))
    return error


def _unknown_keys(source: Source, error: ValidationError, path: tuple[Any, ...]) -> list[Problem]:
    node: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    allowed = sorted(node.get("properties", {}))
    instance: Any = error.instance
    extra = sorted(str(k) for k in set(instance) - set(allowed))
    problems = []
    for name in extra:
        message = f"unknown key {name!r}"
        guess = closest(name, allowed)
        if guess:
            message += f" (did you mean {guess!r}?)"
        else:
            message += f"; allowed keys here: {', '.join(allowed)}"
        problems.append(source.problem((*path, name), message, key=True))
    return problems


def _sentence(error: ValidationError) -> str:
    value: Any = error.instance
    kind = error.validator
    wanted: Any = error.validator_value
    node: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    if kind == "type":
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        return f"{_show(value)} is not {' or '.join(_TYPE_NAMES[n] for n in names)}"
    if kind == "required":
        missing = [repr(k) for k in wanted if k not in value]
        plural = "s" if len(missing) > 1 else ""
        return f"missing required key{plural} {', '.join(missing)}"
    if kind == "minLength" and wanted == 1:
        return "must not be empty"
    if kind == "minItems" and wanted == 1:
        return "must list at least one item"
    if kind == "enum":
        options = ", ".join(repr(v) for v in wanted)
        return f"{_show(value)} is not one of {options}{_hint(value, wanted)}"
    if kind == "const":
        return f"{_show(value)} must be {wanted!r}"
    if kind == "pattern":
        what = node.get("description", f"text matching {wanted}")
        return f"{_show(value)} is not valid here: expected {_lower_first(what.rstrip('.'))}"
    if kind == "oneOf":
        what = node.get("description", "").split(". ")[0].rstrip(".")
        return f"{_show(value)} is not valid here: expected {_lower_first(what)}"
    return error.message


def _lower_first(text: str) -> str:
    """``text`` to go after "expected": its first letter lowered unless it starts an acronym."""
    if not text or text[1:2].isupper():
        return text
    return text[0].lower() + text[1:]


def _hint(value: object, options: list[Any]) -> str:
    if not isinstance(value, str):
        return ""
    guess = closest(value, [str(o) for o in options])
    return f" (did you mean {guess!r}?)" if guess else ""


def _show(value: object) -> str:
    """``value`` as a problem quotes it, redacted before it is cut to 60 characters: a cut
    through a secret would leave the part before it, which redaction no longer finds."""
    text = redacted(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."
