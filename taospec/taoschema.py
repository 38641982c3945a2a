"""Checking a TAO experiment spec against a skill's schema, in TAO's own dialect.

A job's spec is the skill's template for the action deep-merged with what the user's job
file adds (:func:`merge_spec`). TAO's schemas are not JSON Schema: each node has nested
``properties`` and a leaf ``type`` (``int``, ``float``, ``string``, ``bool``, ``list``,
``collection``, ``categorical`` with ``enum``, ``object``, and a few spellings of the
same), with ``default``, ``minimum`` and ``maximum`` (which may be ``Infinity``). Keys
such as ``automl_*``, ``popular``, ``math_cond`` and ``x_tao_schema`` serve TAO's own
tools and constrain nothing.

Measured over the skill bank, the schemas' bounds and enums describe rather than enforce
(templates break them), and a few templates carry keys their schema lacks. So:

- an unknown key or a wrong type in a value the user's spec adds is an ``error`` (with a
  "did you mean" for keys); a value still ``???`` once merged is an ``error`` naming the
  key to set; so is a required input left empty;
- a value outside ``minimum``/``maximum`` or ``enum``, and any problem in a value the
  skill's own template supplies, is a ``warning`` that names the skill;
- an OmegaConf interpolation (``${...}``) is never a type error, and ``null`` is accepted
  anywhere (TAO's optional fields); but one that names a key neither the merged spec nor
  the schema holds is a finding, since OmegaConf fails when TAO reads the value.

Lists are values, not trees: the merge replaces them whole, and their items are not
checked against the schema (the bank's schemas rarely describe them).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from taospec import braces, interpolations
from taospec.diagnostics import closest
from taospec.job import MISSING
from taospec.skills import Action, KeyPath, Skill, parse_key

Severity = Literal["error", "warning"]
Origin = Literal["user", "template"]
Kind = Literal[
    "unknown-key", "type", "unset", "input", "minimum", "maximum", "enum", "interpolation"
]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem in a merged spec, at a path relative to the spec's root."""

    path: KeyPath
    message: str
    severity: Severity
    origin: Origin
    """``user`` when the user's spec wrote the value (or a mapping or list holding it)."""
    kind: Kind

    def __str__(self) -> str:
        return f"spec.{dotted(self.path)}: {self.message}"


def dotted(path: KeyPath) -> str:
    """A path the way skills write keys: ``dataset.sources[0].dir`` (odd keys quoted)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


# Merging


def merge_spec(template: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` with ``user`` laid over it: mappings merge key by key, lists and
    single values replace. Neither argument is changed."""
    merged = copy.deepcopy(dict(template))
    for key, value in user.items():
        below = merged.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_spec(below, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def user_paths(template: Mapping[str, Any], user: Mapping[str, Any]) -> frozenset[KeyPath]:
    """The paths whose values the user's spec supplies once merged over ``template``.

    A key the user merely descends through (a mapping in both) is not one; a key the
    user adds, or whose value replaces the template's, is, and so is everything under it.
    This is the ``user_paths`` :func:`check_spec` takes.
    """
    return frozenset(_user_paths(template, user, ()))


def _user_paths(template: Any, user: Mapping[str, Any], at: KeyPath) -> Iterator[KeyPath]:
    for key, value in user.items():
        below = template.get(key) if isinstance(template, Mapping) else None
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            yield from _user_paths(below, value, (*at, key))
        else:
            yield (*at, key)


def _origin(path: KeyPath, users: frozenset[KeyPath]) -> Origin:
    return "user" if any(path[:n] in users for n in range(1, len(path) + 1)) else "template"


# Checking


@dataclass(frozen=True, slots=True)
class _Context:
    users: frozenset[KeyPath]
    skill: str
    template: Mapping[str, Any]

    def finding(self, path: KeyPath, kind: Kind, message: str, *, soft: bool = False) -> Finding:
        """A finding at ``path``: an error when the user wrote it and it is not ``soft``."""
        origin = _origin(path, self.users)
        if origin == "template":
            return Finding(path, f"in {self.skill}'s template: {message}", "warning", origin, kind)
        if soft:
            return Finding(path, f"{message} (a hint from {self.skill})", "warning", origin, kind)
        return Finding(path, message, "error", origin, kind)


def check_spec(
    schema: Mapping[str, Any],
    spec: Mapping[str, Any],
    user_paths: frozenset[KeyPath] | set[KeyPath],
    *,
    skill: str,
    template: Mapping[str, Any] | None = None,
    composed: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """Every finding in the merged ``spec`` against the action's TAO ``schema``.

    ``user_paths`` are the paths the user's spec supplies (see :func:`user_paths`);
    everything else came from the skill's ``template`` (of the skill named ``skill``). A key
    the schema lacks and the template sets is the skill's own: a user's value for it is
    kept, with a warning, where any other unknown key is an error. An interpolation names a
    key of the spec as TAO composes it (``composed``, the spec where no command adds keys).
    """
    context = _Context(frozenset(user_paths), skill, template or {})
    found = list(_unset(spec, (), context))
    found.extend(_node(schema, spec, (), context))
    found.extend(_dangling(schema, spec if composed is None else composed, spec, (), context))
    return found


def _dangling(
    schema: Mapping[str, Any], spec: Mapping[str, Any], value: Any, at: KeyPath, context: _Context
) -> Iterator[Finding]:
    """A finding for every interpolation in ``value`` (at ``at`` in ``spec``) that names a
    key neither the spec nor the skill's schema holds: OmegaConf fails when TAO reads it."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _dangling(schema, spec, item, (*at, key), context)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _dangling(schema, spec, item, (*at, index), context)
    elif isinstance(value, str) and "${" in value:
        if _origin(at, context.users) == "user":  # as the spec file will hold it
            value = braces.fill(value, str)
        for message in unheld_interpolations(schema, spec, value):
            yield context.finding(at, "interpolation", message)


def unheld_interpolations(
    schema: Mapping[str, Any], spec: Mapping[str, Any], text: str
) -> Iterator[str]:
    """A sentence about each interpolation in ``text`` (as the spec file holds it) that
    names a key neither ``spec`` nor the skill's ``schema`` holds: OmegaConf fails when TAO
    reads the value."""
    for name in interpolations.keys(text):
        lacks = absent(schema, spec, name)
        if lacks is not None:
            first, guess = lacks
            hint = f"; did you mean ${{{guess}}}?" if guess else ""
            yield (
                f"${{{name}}} names spec.{first}, which the spec does not hold{hint} (TAO fails "
                "when it reads this value)"
            )


def absent(
    schema: Mapping[str, Any], spec: Mapping[str, Any], key: str
) -> tuple[str, str | None] | None:
    """Where the dotted ``key`` leaves what TAO reads (the spec file merged into the skill's
    ``schema``): the path to the first part the spec lacks, and the path meant, when a
    name there is close; None where the key may be read."""
    parts = key.split(".")
    missing = _missing(schema, spec, parts)
    if missing is None:
        return None
    held, names = missing
    guess = closest(parts[held], names)
    return ".".join(parts[: held + 1]), ".".join([*parts[:held], guess]) if guess else None


def _missing(
    schema: Mapping[str, Any], spec: Mapping[str, Any], parts: list[str]
) -> tuple[int, list[str]] | None:
    """Where the key path ``parts`` leaves what TAO reads, the spec file merged into the
    skill's schema (the index of the first part it lacks, and the names it holds there);
    None where the path reaches a value, or goes where neither can say (below an
    interpolation, or where the schema names no keys: a skill without a schema, a value of
    it without properties, whose keys TAO's own config may hold beyond the spec's)."""
    value: Any = spec
    node: Any = schema
    for index, part in enumerate(parts):
        properties = node.get("properties") if isinstance(node, Mapping) else None
        known = [str(key) for key in properties] if isinstance(properties, Mapping) else []
        node = properties.get(part) if isinstance(properties, Mapping) else None
        if _interpolated(value):
            return None  # what it stands for is OmegaConf's to find
        if isinstance(value, list):  # the spec's own list: the schema's default is gone
            if not (part.isdigit() and int(part) < len(value)):
                return index, []
            value = value[int(part)]
        elif isinstance(value, Mapping) or value is ABSENT:
            held = [str(key) for key in value] if isinstance(value, Mapping) else []
            spec_holds = isinstance(value, Mapping)
            value = value.get(part, ABSENT) if spec_holds else ABSENT
            if value is ABSENT and node is None and known:
                return index, list(dict.fromkeys(held + known))
            if value is ABSENT and node is None:
                return None  # where the schema names no keys, TAO's config may hold more
        else:
            return index, []  # a number or text holds no keys
    return None


_PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_]*>")
"""A skill template's own mark of a value left to fill in (``<out_dir>``, ``<required>``,
``<train_data_root>/annotations.txt``), as ``???`` is OmegaConf's."""


def unfilled(value: Any) -> str | None:
    """How a template's ``value`` says it is still to be set: ``???``, or the placeholder
    it holds (TAO would take ``<out_dir>`` as a folder's name); None when it is set."""
    if value == MISSING:
        return MISSING
    found = _PLACEHOLDER.search(value) if isinstance(value, str) else None
    return found.group() if found else None


def _unset(value: Any, at: KeyPath, context: _Context) -> Iterator[Finding]:
    """A finding for every value still ``???``, or still the template's placeholder,
    wherever it sits (lists included). A value the job itself gives is its own, ``<...>``
    included."""
    origin = _origin(at, context.users)
    mark = MISSING if value == MISSING else unfilled(value) if origin == "template" else None
    if mark is not None:
        message = f"not set yet ({mark}): set spec.{dotted(at)} in the job file's spec"
        yield Finding(at, message, "error", origin, "unset")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _unset(item, (*at, key), context)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unset(item, (*at, index), context)


def _node(
    schema: Mapping[str, Any], value: Any, at: KeyPath, context: _Context
) -> Iterator[Finding]:
    properties = schema.get("properties")
    if isinstance(value, Mapping) and isinstance(properties, Mapping):
        for key, item in value.items():
            yield from _member(properties, key, item, (*at, key), context)
    elif at:
        yield from _leaf(schema, value, at, context)


def _member(
    properties: Mapping[str, Any], key: Any, value: Any, at: KeyPath, context: _Context
) -> Iterator[Finding]:
    below = properties.get(key) if isinstance(key, str) else None
    if isinstance(below, Mapping):
        yield from _node(below, value, at, context)
        return
    names = list(properties)
    if _origin(at, context.users) == "user":
        if lookup(context.template, at) is not ABSENT:
            sets = f"unknown key {key!r} ({context.skill}'s template sets it: kept)"
            yield Finding(at, sets, "warning", "user", "unknown-key")
            return
        beside = lookup(context.template, at[:-1])  # the template's own keys are known too
        names += beside if isinstance(beside, Mapping) else ()
    guess = closest(str(key), [str(name) for name in names if name != key])
    hint = f"; did you mean {guess!r}?" if guess else ""
    yield context.finding(at, "unknown-key", f"unknown key {key!r}{hint}")


def _leaf(
    schema: Mapping[str, Any], value: Any, at: KeyPath, context: _Context
) -> Iterator[Finding]:
    if value is None or value == MISSING or _interpolated(value):
        return
    if unfilled(value) is not None and _origin(at, context.users) == "template":
        return  # reported as not set yet
    wrong = _type_problem(schema.get("type"), value)
    if wrong is not None:
        message, soft = wrong
        yield context.finding(at, "type", message, soft=soft)
        return
    yield from _enum(schema, value, at, context)
    yield from _bounds(schema, value, at, context)


def _interpolated(value: Any) -> bool:
    """Whether only OmegaConf can say what ``value`` holds: an interpolation, or a value
    only TAO's composition makes (:data:`COMPOSED`)."""
    return value is COMPOSED or (isinstance(value, str) and "${" in value)


def _enum(
    schema: Mapping[str, Any], value: Any, at: KeyPath, context: _Context
) -> Iterator[Finding]:
    choices = schema.get("enum")
    if not isinstance(choices, list) or not choices:
        return
    values = value if isinstance(value, list) else [value]  # a multiple choice is a list
    for item in values:
        if item not in choices:
            listed = ", ".join(repr(choice) for choice in choices)
            message = f"{item!r} is not one of the schema's choices: {listed}"
            yield context.finding(at, "enum", message, soft=True)


def _bounds(
    schema: Mapping[str, Any], value: Any, at: KeyPath, context: _Context
) -> Iterator[Finding]:
    if not _is_number(value):
        return
    low, high = schema.get("minimum"), schema.get("maximum")
    if _is_number(low) and value < low:
        message = f"{value!r} is below the schema's minimum {low!r}"
        yield context.finding(at, "minimum", message, soft=True)
    if _is_number(high) and value > high:
        message = f"{value!r} is above the schema's maximum {high!r}"
        yield context.finding(at, "maximum", message, soft=True)


# Types


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _instance(kind: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, kind)


_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_is_int, "an integer"),
    "integer": (_is_int, "an integer"),
    "ordered_int": (_is_int, "an integer"),
    "float": (_is_number, "a number"),
    "number": (_is_number, "a number"),
    "string": (_instance(str), "a string"),
    "bool": (_instance(bool), "true or false"),
    "boolean": (_instance(bool), "true or false"),
    "list": (_instance(list), "a list"),
    "array": (_instance(list), "a list"),
    "subset_list": (_instance(list), "a list"),
    "optional_list": (_instance(list), "a list"),
    "collection": (_instance(Mapping), "a mapping"),
    "object": (_instance(Mapping), "a mapping"),
}
"""What each TAO type accepts. ``categorical`` is checked by its enum only; ``list_2``
and the like (a list of a fixed length) are lists; any other type is not checked."""


def _type_problem(name: Any, value: Any) -> tuple[str, bool] | None:
    """Why ``value`` is not of TAO type ``name`` and whether that is only a warning."""
    if not isinstance(name, str):
        return None
    accepts, description = _TYPES.get(name, (None, ""))
    if accepts is None and name.startswith("list_"):
        accepts, description = _TYPES["list"]
    if accepts is None or accepts(value):
        return None
    if description in {"an integer", "a number"} and _numeric_text(value):
        return (
            f"{value!r} is a string, not {description}, as it is quoted: write it without "
            "quotes (TAO may convert it, but say what you mean)",
            True,
        )
    return f"{value!r} is not {description}", False


def converted_to(schema: Mapping[str, Any], key: str, value: Any) -> str | None:
    """What the spec key ``key`` holds by the skill's ``schema`` (``an integer``, ``a
    list``...) where OmegaConf, converting as it sets a typed value (``"5"`` to 5, ``yes``
    to true, anything but a list or mapping to text), cannot make ``value`` one; None where
    it can, or where the schema gives the key no type it checks."""
    node = schema_node(schema, key)
    if node is None:
        return None
    name = node.get("type")
    kind = _TYPES[name][1] if name in _TYPES else "a list" if str(name).startswith("list_") else ""
    if value is None or not kind:
        return None
    accepted = {
        "an integer": type(value) in (str, int) and _converts(int, value),
        "a number": type(value) in (float, str, int) and _converts(float, value),
        "true or false": isinstance(value, int)
        or (isinstance(value, str) and (_converts(int, value) or value.lower() in _BOOL_WORDS)),
        "a string": not isinstance(value, list | dict),
        "a list": isinstance(value, list),
        "a mapping": isinstance(value, dict),
    }[kind]
    return None if accepted else kind


_BOOL_WORDS = frozenset({"yes", "y", "on", "true", "no", "n", "off", "false"})
"""The words OmegaConf takes for true or false (in any case)."""


def _converts(kind: Callable[[Any], Any], value: Any) -> bool:
    try:
        kind(value)
    except ValueError:
        return False
    return True


def schema_node(schema: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """What the skill's ``schema`` says of the spec's value at the dotted ``key``; None
    where it says nothing."""
    node: Any = schema
    for part in key.split("."):
        properties = node.get("properties")
        node = properties.get(part) if isinstance(properties, Mapping) else None
        if not isinstance(node, Mapping):
            return None
    found: Mapping[str, Any] = node
    return found


def typed_config(schema: Mapping[str, Any], key: str) -> bool:
    """Whether the skill's ``schema`` says the spec's value at the dotted ``key`` is one of
    the network's dataclass configs (a ``collection`` or ``object`` with properties), which
    TAO's Hydra holds as a typed config: it takes no key its fields lack, and deletes none
    of its keys."""
    node = schema_node(schema, key)
    if node is None:
        return False
    return node.get("type") in ("collection", "object") and isinstance(
        node.get("properties"), Mapping
    )


def wants_list(schema: Mapping[str, Any], path: KeyPath) -> bool | None:
    """Whether ``schema`` says the value at ``path`` is a list (a list type, or ``items``)
    or a value of another type it names; None where it says neither."""
    node: Any = schema
    for part in path:
        if isinstance(part, int):
            node = node.get("items")
        else:
            properties = node.get("properties")
            node = properties.get(part) if isinstance(properties, Mapping) else None
        if not isinstance(node, Mapping):
            return None
    name = node.get("type")
    if "items" in node or (isinstance(name, str) and name.startswith("list_")):
        return True
    if name == "categorical":
        return False
    known = isinstance(name, str) and name in _TYPES
    return _TYPES[name][1] == "a list" if known else None


def _numeric_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


# Inputs


ABSENT: Any = object()
"""What :func:`lookup` gives for a path the spec does not hold."""
COMPOSED: Any = object()
"""A value a command's override gives a key, whose keys and items only Hydra's reading
tells (a list, a mapping, an interpolation)."""


def lookup(spec: Any, path: KeyPath) -> Any:
    """The value at ``path`` in ``spec`` (list indexes included), or :data:`ABSENT`."""
    value = spec
    for part in path:
        if isinstance(part, int):
            if not isinstance(value, list) or part >= len(value):
                return ABSENT
        elif not isinstance(value, Mapping) or part not in value:
            return ABSENT
        value = value[part]
    return value


def every_item(spec: Any, path: KeyPath) -> list[KeyPath]:
    """``path`` with each list index in it standing for every item the list holds."""
    paths: list[KeyPath] = [()]
    for part in path:
        grown: list[KeyPath] = []
        for at in paths:
            if isinstance(part, int):
                node = lookup(spec, at)
                grown += [(*at, i) for i in range(len(node))] if isinstance(node, list) else []
            else:
                grown.append((*at, part))
        paths = grown
    return paths


def unset_inputs(
    spec: Mapping[str, Any], action: Action, user_paths: frozenset[KeyPath] | set[KeyPath]
) -> list[Finding]:
    """An error for each required input that is absent or empty in the merged ``spec``.

    (An input still ``???`` is reported by :func:`check_spec`, once.)
    """
    found = []
    for declared in action.inputs:
        if declared.optional:
            continue
        # declared at a list index, the input is needed in every item the list holds
        for path in every_item(spec, declared.path) or [declared.path]:
            value = lookup(spec, path)
            if value is ABSENT or _empty(value):
                key = dotted(path)
                message = f"set spec.{key}: the {declared.type} that {action.name} reads"
                origin = _origin(path, frozenset(user_paths))
                found.append(Finding(path, message, "error", origin, "input"))
    return found


def _empty(value: Any) -> bool:
    if isinstance(value, list):
        return all(_empty(item) for item in value)
    return value is None or value == ""


# GPUs


def gpu_count_problem(skill: Skill, user_spec: Mapping[str, Any], gpus: int | None) -> str | None:
    """Why the user's spec disagrees with the job's number of GPUs, or None.

    ``gpus`` is how many GPUs the job's ``gpus:`` names per node (None for ``all``, which
    taospec cannot count); the skill's ``gpu_spec_key`` must equal it.
    """
    key = skill.gpu_spec_key
    if key is None or gpus is None:
        return None
    value = lookup(user_spec, parse_key(key))
    if value is ABSENT or (_is_int(value) and value == gpus):
        return None
    return (
        f"spec.{key} is {value!r} but gpus: names {gpus} GPU(s); leave spec.{key} out "
        "(taospec sets it from gpus:) or make the two agree"
    )


def gpu_count_unknown(
    skill: Skill, template: Mapping[str, Any], user_spec: Mapping[str, Any]
) -> str | None:
    """Why ``gpus: all`` cannot set the skill's ``gpu_spec_key`` (which GPUs ``all`` names,
    and so how many, is known only on the host, and the plan shows the spec the job reads),
    or None: the action's ``template`` has no such key, or the user's spec sets it."""
    key = skill.gpu_spec_key
    if key is None:
        return None
    path = parse_key(key)
    if lookup(user_spec, path) is not ABSENT or lookup(template, path) is ABSENT:
        return None
    return (
        f"gpus: all leaves the number of GPUs to the host, and skill {skill.name}'s "
        f"spec.{key} must name it: list the ids (gpus: [0, 1]), ask for a number of them "
        f"(gpus: {{free: 2}}), or set spec.{key} yourself"
    )


def with_gpu_count(
    skill: Skill, template: Mapping[str, Any], user_spec: Mapping[str, Any], gpus: int | None
) -> dict[str, Any]:
    """``user_spec`` with the skill's ``gpu_spec_key`` set to ``gpus``.

    Set only when the user left it out and the action's ``template`` has the key (an
    action whose spec has no such key gets none); check :func:`gpu_count_problem` first.
    """
    key = skill.gpu_spec_key
    if key is None or gpus is None:
        return dict(user_spec)
    path = parse_key(key)
    if lookup(user_spec, path) is not ABSENT or lookup(template, path) is ABSENT:
        return dict(user_spec)
    return merge_spec(user_spec, _nested(path, gpus))


def _nested(path: KeyPath, value: Any) -> dict[str, Any]:
    for part in reversed(path):
        value = {part: value}
    return dict(value)
