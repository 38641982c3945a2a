"""``taospec init``: write a new job file for one action of a TAO model skill.

The file names the skill and action (the image, command and default spec come from the
skill when it is loaded), runs on the local Docker engine on GPU 0, and holds a ``spec:``
block with only what the user must fill in: each required input and each value the
template leaves ``???``, set to ``???`` and marked. The template's other keys follow as
comments, so a person sees the defaults and can uncomment what they want to change
(where nothing is left to fill in, ``spec: {}`` stands above them).
Inside a list that holds a required value everything is written out, because the user's
list replaces the template's whole list.

An existing file is never overwritten.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from taospec.errors import EXIT_OK, InvalidInput
from taospec.job import MISSING
from taospec.skilljob import fills_results_dir, template_sections
from taospec.skills import (
    Action,
    Input,
    KeyPath,
    Skill,
    find_skill,
    load_skill,
    read_template,
)
from taospec.taoschema import dotted, lookup, unfilled, wants_list

_PACKAGED = Path(__file__).resolve().parent.parent / "schemas" / "job.schema.json"
SCHEMA_FILE = (
    _PACKAGED if _PACKAGED.is_file() else _PACKAGED.parents[2] / "schemas" / "job.schema.json"
)
"""The schema the modeline points at: inside an installed package, else in the checkout."""


def run(
    skill: str,
    action: str,
    output: str | os.PathLike[str] | None,
    *,
    job_dir: str | os.PathLike[str],
    environ: Mapping[str, str],
) -> int:
    """Write the job file for ``action`` of ``skill`` to ``output``.

    ``skill`` is a bank name or a skill folder relative to ``job_dir`` (see
    :func:`taospec.skills.find_skill`); ``output`` defaults to
    ``<job_dir>/<skill>-<action>.yaml``. Raises :class:`InvalidInput` (exit 2) when the
    skill, the action or its template cannot be used, or when ``output`` exists.
    """
    here = Path(job_dir)
    folder = find_skill(skill, here, environ)
    loaded = load_skill(folder)
    chosen = loaded.action(action)
    unwritable = loaded.unwritable(chosen)
    if unwritable:
        raise InvalidInput(unwritable)
    target = Path(output) if output is not None else here / f"{loaded.name}-{chosen.name}.yaml"
    reference = skill if "/" not in skill else os.path.relpath(folder, target.resolve().parent)
    text = job_text(loaded, chosen, reference, target.resolve().parent)
    _write_new(target, text)
    unset = any("???" in line.partition("#")[0] for line in text.splitlines())
    to_fill = "set every ??? in it, then" if unset else "nothing in it to fill in;"
    print(f"{target}: written; {to_fill} taospec validate {target}", file=sys.stderr)
    return EXIT_OK


def _write_new(target: Path, text: str) -> None:
    try:
        with target.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise InvalidInput(
            f"{target}: already exists; taospec init never overwrites a file"
        ) from None
    except OSError as exc:
        raise InvalidInput(f"{target}: cannot write: {exc.strerror or exc}") from None


def job_text(skill: Skill, action: Action, reference: str, job_dir: Path) -> str:
    """The whole job file, for a file in ``job_dir`` naming the skill as ``reference``."""
    template = read_template(action)
    required = required_paths(template, skill, action)
    named = (action.image_uri, action.versions_key, skill.image_uri, skill.versions_key)
    image = [] if any(named) else [f"image: ???  # {skill.name} names no image for {action.name}"]
    lines = [
        f"# yaml-language-server: $schema={os.path.relpath(SCHEMA_FILE, job_dir)}",
        f"# {skill.name} {action.name}: set every ??? (if any), then `taospec validate`.",
        "# The commented keys are the template's defaults; uncomment one to change it.",
        *_optional_inputs(action),
        "version: 1",
        f"skill: {_flow(reference)}",
        f"action: {_flow(action.name)}",
        "platform: docker",
        'user: "1000:1000"  # who the container runs as, UID:GID ("host": whoever runs taospec)',
        "gpus: [0]",
        f"results_root: {_flow(str(job_dir.resolve() / 'results'))}",
        *image,
        *_spec_lines(template, required),
    ]
    return "\n".join(lines) + "\n"


_UNCOMMENT = "to change a default, drop {} and uncomment it"


def _spec_lines(template: Mapping[str, Any], required: Mapping[KeyPath, str]) -> list[str]:
    lines = list(_mapping_lines(_with_required(template, required), (), required, 2))
    if all(line.lstrip().startswith("#") for line in lines):
        # Only comments under a bare ``spec:`` would read as null, which is no mapping.
        return [f"spec: {{}}  # nothing to fill in; {_UNCOMMENT}", *lines]
    return ["spec:", *lines]


def required_paths(template: Mapping[str, Any], skill: Skill, action: Action) -> dict[KeyPath, str]:
    """What the user must set: each required input and each ``???`` TAO reads, with a
    note (a ``???`` in a section TAO leaves unread is not, see :func:`unread_sections`)."""
    schema, unread = template_sections(skill, action, template)
    required = {
        path: "the template leaves it for you" + (": a list" if wants_list(schema, path) else "")
        for path in _missing(template, ())
        if (path != ("results_dir",) or not fills_results_dir(action, template))
        and path[0] not in unread
    }
    for declared in action.inputs:
        if not declared.optional:
            required[declared.path] = _input_note(template, schema, declared, action)
    return required


def _input_note(
    template: Mapping[str, Any], schema: Mapping[str, Any], declared: Input, action: Action
) -> str:
    """What a required input is: a list where the schema wants one (a single path there is
    refused), or where it does not say and the template holds one."""
    said = wants_list(schema, declared.path)
    listed = isinstance(lookup(template, declared.path), list) if said is None else said
    listed = listed and declared.type != "list"
    what = f"a list of the {declared.type}s" if listed else f"the {declared.type}"
    return f"input: {what} that {action.name} reads"


def _missing(value: Any, at: KeyPath) -> Iterator[KeyPath]:
    if unfilled(value) is not None:
        yield at
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _missing(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _missing(item, (*at, index))


def _optional_inputs(action: Action) -> list[str]:
    optional = [f"{i.spec_key} ({i.type})" for i in action.inputs if i.optional]
    return [f"# Optional inputs: {', '.join(optional)}."] if optional else []


def _with_required(template: Mapping[str, Any], required: Mapping[KeyPath, str]) -> Any:
    """The template with every required path present (set to ``???``)."""
    tree = copy.deepcopy(dict(template))
    for path in required:
        _put(tree, path)
    return tree


def _put(tree: Any, path: KeyPath) -> None:
    node = tree
    for part, following in zip(path, (*path[1:], None), strict=True):
        if following is None:
            node[part] = MISSING
            return
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(part, int):
            node.extend({} for _ in range(part + 1 - len(node)))
            node[part] = node[part] if isinstance(node[part], dict | list) else empty
        elif not isinstance(node.get(part), dict | list):
            node[part] = empty
        node = node[part]


def _holds(required: Mapping[KeyPath, str], at: KeyPath) -> bool:
    return any(path[: len(at)] == at for path in required)


def _mapping_lines(
    mapping: Mapping[Any, Any], at: KeyPath, required: Mapping[KeyPath, str], indent: int
) -> Iterator[str]:
    """Lines of a mapping outside any list: what holds nothing required is a comment."""
    pad = " " * indent
    for key, value in mapping.items():
        path = (*at, key)
        if not _holds(required, path):
            yield from _commented({key: value}, pad)
        elif path in required:
            yield f"{pad}{_flow(key)}: {MISSING}  # {_note(required[path], value, path)}"
        elif isinstance(value, Mapping):
            yield f"{pad}{_flow(key)}:"
            yield from _mapping_lines(value, path, required, indent + 2)
        else:
            yield f"{pad}{_flow(key)}:  # this list replaces the template's whole list"
            yield from _list_lines(value, path, required, indent + 2)


def _list_lines(
    items: list[Any], at: KeyPath, required: Mapping[KeyPath, str], indent: int
) -> Iterator[str]:
    """Lines of a list holding a required value: every item, written out."""
    pad = " " * indent
    for index, item in enumerate(items):
        inner = list(_kept_lines(item, (*at, index), required, indent + 2))
        yield f"{pad}- {inner[0].lstrip()}"
        yield from inner[1:]


def _kept_lines(
    value: Any, at: KeyPath, required: Mapping[KeyPath, str], indent: int
) -> Iterator[str]:
    """Lines of a value inside a list: nothing is commented out."""
    pad = " " * indent
    if at in required:
        yield f"{pad}{MISSING}  # {required[at]}"
    elif isinstance(value, Mapping) and value:
        for key, item in value.items():
            path = (*at, key)
            if path in required:
                yield f"{pad}{_flow(key)}: {MISSING}  # {_note(required[path], item, path)}"
            elif isinstance(item, Mapping | list) and item and _holds(required, path):
                yield f"{pad}{_flow(key)}:"
                yield from _nested_lines(item, path, required, indent + 2)
            else:
                yield f"{pad}{_flow(key)}: {_flow(item)}"
    elif isinstance(value, list) and value and _holds(required, at):
        yield from _list_lines(value, at, required, indent)
    else:
        yield f"{pad}{_flow(value)}"


def _nested_lines(
    value: Any, at: KeyPath, required: Mapping[KeyPath, str], indent: int
) -> Iterator[str]:
    if isinstance(value, list):
        yield from _list_lines(value, at, required, indent)
    else:
        yield from _kept_lines(value, at, required, indent)


def _note(note: str, template_value: Any, path: KeyPath) -> str:
    if template_value in (MISSING, "", None) or template_value == [""]:
        return note
    return f"{note} (the template has {_flow(template_value)} at {dotted(path)})"


def _commented(value: Mapping[Any, Any], pad: str) -> Iterator[str]:
    import yaml

    text = yaml.safe_dump(dict(value), sort_keys=False, allow_unicode=True, width=88)
    for line in text.splitlines():
        yield f"{pad}# {line}"


def _flow(value: Any) -> str:
    """``value`` as YAML on one line (quoted where YAML would read it otherwise)."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), allow_unicode=True)
    text = text.removesuffix("\n...\n").removesuffix("\n")
    if "\n" in text:
        text = yaml.safe_dump(
            value, default_flow_style=True, default_style='"', width=float("inf")
        ).removesuffix("\n")
    return text
