"""Finding and reading a TAO model skill: the folder a job's spec, command and image come from.

A skill bank holds one folder per model under ``skills/models/<skill>/``. This module
reads what taospec uses from one of them:

- ``references/skill_info.yaml``: ``network_arch``, ``container_image`` (a literal URI
  whose trailing ``# versions-key: <dotted key>`` comment names its pin in the bank's
  ``versions.yaml``), ``gpu_spec_key`` and ``actions`` (each with its ``command``,
  ``config_format``, ``mode``, ``inputs``, ``outputs`` and ``upload_excludes``; an action
  may name its own ``container_image``);
- ``references/spec_template_<action>.yaml``: the action's default spec, when there is one;
- ``schemas/<action>.schema.json``: the action's schema in TAO's dialect (checked by
  :mod:`taospec.taoschema`), when there is one.

A model folder may hold a second workflow of the model beside its own, in another
container: ``references/tao-deploy-<model>.skill_info.yaml`` describes TAO Deploy's
TensorRT actions (``gen_trt_engine``, and ``evaluate`` and ``inference`` of an engine). A
job names it ``skill: tao-deploy-<model>``; its actions read the folder's templates (by
its ``spec_templates``) and schemas, and its ``container_image: tao_toolkit.deploy``, a
key of the bank's ``versions.yaml`` under ``images``, names the image pinned there.

Everything else in a skill (prose, AutoML settings, backend contracts) is left alone.
Every error in a skill's own files is one line naming the file, and the line where YAML
gives one. PyYAML is imported when a skill is first read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from taospec.diagnostics import closest
from taospec.errors import InvalidInput
from taospec.yamlsrc import tao_loader

INFO = Path("references") / "skill_info.yaml"
WORKFLOW = ".skill_info.yaml"
"""How the name of a workflow's file ends, in a model folder's ``references/``."""
MODELS = Path("skills") / "models"
BANK_VARIABLE = "TAO_SKILL_BANK"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_KEY_PART = re.compile(r"([^.\[\]]+)((?:\[\d+\])*)\Z")
_VERSIONS_KEY = re.compile(r"#\s*versions-key:\s*([A-Za-z0-9_.-]+)")
_PIN = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+\Z")
"""A ``container_image`` that is a key of versions.yaml's ``images`` (``tao_toolkit.deploy``),
not an image reference (which a dot alone never makes: it has a ``/`` or a ``:``)."""

KeyPath = tuple[str | int, ...]
"""A spec key as a path: ``dataset.train_data_sources[0].image_dir`` is
``("dataset", "train_data_sources", 0, "image_dir")``."""

SkillFinder = Callable[[str, Path, Mapping[str, str]], Path]
"""Finds where a job's ``skill:`` is described (see :func:`find_skill`, the one on disk)."""


class SkillError(InvalidInput):
    """A skill that cannot be found or read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Input:
    """A spec key holding a path the action reads."""

    spec_key: str
    type: str
    """``file`` or ``folder`` (the bank also uses ``file`` for folders); a few skills use
    ``local_glob`` (a pattern of paths, mounted by the folder it starts in) or ``list``,
    which taospec passes on without treating it as a path."""
    optional: bool = False

    @property
    def path(self) -> KeyPath:
        """The key as a path into the spec."""
        return parse_key(self.spec_key)


@dataclass(frozen=True, slots=True)
class Output:
    """A spec key naming something the action writes."""

    spec_key: str
    type: str


@dataclass(frozen=True, slots=True)
class Action:
    """One action of a skill: how it runs and what its spec reads and writes."""

    name: str
    command: str
    config_format: str
    mode: str
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    upload_excludes: tuple[str, ...]
    template_path: Path | None
    schema_path: Path | None
    image_uri: str | None = None
    """This action's own image (e.g. a deploy image for ``gen_trt_engine``), if it has one."""
    versions_key: str | None = None


@dataclass(frozen=True, slots=True)
class Skill:
    """A model skill as taospec uses it."""

    name: str
    folder: Path
    network_arch: str
    image_uri: str | None
    versions_key: str | None
    gpu_spec_key: str | None
    actions: Mapping[str, Action]

    def action(self, name: str) -> Action:
        """The action called ``name``, or an error listing the skill's actions."""
        found = self.actions.get(name)
        if found is None:
            message = f"skill {self.name} has no action {name!r}"
            raise SkillError(_unknown(message, name, list(self.actions)))
        return found

    def unwritable(self, action: Action) -> str | None:
        """Why taospec cannot give ``action`` its spec (it writes one only as YAML), naming
        the actions it can; None when it can."""
        if action.config_format == "yaml":
            return None
        runs = sorted(name for name, each in self.actions.items() if each.config_format == "yaml")
        listed = ", ".join(runs[:-1]) + (" and " if len(runs) > 1 else "") + "".join(runs[-1:])
        runnable = f"taospec runs {listed}" if runs else "taospec runs none"
        runnable = f"of its actions, {runnable}"
        return (
            f"skill {self.name}'s {action.name} reads its spec as {action.config_format} "
            f"(config_format), and taospec writes a spec only as YAML; {runnable}"
        )

    @property
    def versions_file(self) -> Path | None:
        """The ``versions.yaml`` at the root of the bank this skill sits in, if any."""
        root = bank_root(self.folder)
        candidate = None if root is None else Path(root) / "versions.yaml"
        return candidate if candidate is not None and candidate.is_file() else None


def bank_root(folder: PurePath) -> PurePath | None:
    """The root of the bank a skill ``folder`` sits in (``<root>/skills/<group>/<skill>``)."""
    return folder.parents[2] if folder.parent.parent.name == "skills" else None


def parse_key(dotted: str) -> KeyPath:
    """``a.b[0].c`` as ``("a", "b", 0, "c")``; a ValueError for anything else."""
    path: list[str | int] = []
    for part in dotted.split("."):
        match = _KEY_PART.match(part)
        if match is None:
            raise ValueError(f"{dotted!r} is not a dotted spec key (like dataset.sources[0].dir)")
        path.append(match.group(1))
        path.extend(int(index) for index in re.findall(r"\d+", match.group(2)))
    return tuple(path)


# Finding a skill


def find_skill(ref: str, job_dir: Path, environ: Mapping[str, str]) -> Path:
    """The folder of the skill ``ref`` names, or the file of a workflow in a model folder
    (``references/<name>.skill_info.yaml``, see :func:`load_skill`).

    A ``ref`` holding a ``/`` (or ``~``-free absolute path) is a skill folder, or a
    workflow's file, relative to ``job_dir`` (the job file's folder) unless absolute. A
    bare name such as ``tao-train-dino`` is looked up under
    ``$TAO_SKILL_BANK/skills/models/``, and ``tao-deploy-dino`` in the ``references/`` of
    the folders there.
    """
    if "/" in ref:
        path = (job_dir / ref).resolve()
        if path.name.endswith(WORKFLOW) and path.is_file():
            return path
        if not (path / INFO).is_file():
            raise SkillError(f"skill {ref!r}: {path / INFO} does not exist")
        return path
    return _in_bank(ref, environ)


def _in_bank(name: str, environ: Mapping[str, str]) -> Path:
    bank = environ.get(BANK_VARIABLE, "")
    if not bank:
        raise SkillError(
            f"skill {name!r}: set {BANK_VARIABLE} to a tao-skill-bank checkout, "
            "or give the skill's folder as a path (e.g. ./skills/models/" + name + ")"
        )
    models = Path(bank) / MODELS
    folder = models / name
    if _NAME.match(name) and (folder / INFO).is_file():
        return folder
    workflows = sorted(models.glob(f"*/references/{name}{WORKFLOW}")) if _NAME.match(name) else []
    if len(workflows) == 1:
        return workflows[0]
    if workflows:
        held = ", ".join(str(each.relative_to(models)) for each in workflows)
        raise SkillError(
            f"skill {name!r} is described by more than one file in {models} ({held}); "
            f"name the one you mean by its path (skill: {workflows[0]})"
        )
    names = available_skills(models)
    message = f"skill {name!r} is not in {models}"
    if not names:
        raise SkillError(f"{message}, which holds no skills: is {BANK_VARIABLE} a skill bank?")
    raise SkillError(_unknown(message, name, names))


def available_skills(models: Path) -> list[str]:
    """The names of the skill folders under ``models`` (those with a skill_info.yaml) and
    of the workflows in their ``references/``."""
    if not models.is_dir():
        return []
    folders = [entry.name for entry in models.iterdir() if (entry / INFO).is_file()]
    workflows = [
        entry.name.removesuffix(WORKFLOW) for entry in models.glob(f"*/references/*{WORKFLOW}")
    ]
    return sorted({*folders, *workflows})


def _unknown(message: str, name: str, choices: list[str]) -> str:
    guess = closest(name, list(choices))
    if guess:
        return f"{message}; did you mean {guess!r}?"
    return f"{message} (known: {', '.join(sorted(choices))})"


# Reading a skill


def load_skill(path: Path) -> Skill:
    """The skill at ``path``: a model folder (holding ``references/skill_info.yaml``), or a
    workflow's ``references/<name>.skill_info.yaml`` in one, named ``<name>``, whose
    actions read that folder's templates and schemas."""
    workflow = path.name.endswith(WORKFLOW)
    folder = path.parent.parent if workflow else path
    info = _Document.read(path if workflow else folder / INFO)
    info.mapping((), "the skill description")
    image_uri, versions_key = _image(info, ("container_image",))
    actions = info.mapping(("actions",), "a mapping of action names to actions")
    named = path.name.removesuffix(WORKFLOW) if workflow else _optional_str(info, ("name",))
    return Skill(
        name=named or folder.name,
        folder=folder,
        network_arch=_required_str(info, ("network_arch",)),
        image_uri=image_uri,
        versions_key=versions_key,
        gpu_spec_key=_gpu_key(info),
        actions={name: _action(info, folder, str(name)) for name in actions},
    )


def _action(info: _Document, folder: Path, name: str) -> Action:
    at = ("actions", name)
    info.mapping(at, "a mapping with command, config_format, mode and inputs")
    image_uri, versions_key = _image(info, (*at, "container_image"))
    outputs = tuple(_output(info, (*at, "outputs", key)) for key in _keys(info, (*at, "outputs")))
    written = {output.spec_key for output in outputs}
    return Action(
        name=name,
        command=_required_str(info, (*at, "command")),
        config_format=_optional_str(info, (*at, "config_format")) or "yaml",
        mode=_choice(info, (*at, "mode"), ("config", "args")),
        # a key the action lists as an output too is one TAO writes (a deploy skill's
        # gen_trt_engine.trt_engine): mounted read-only as an input, the write would fail
        inputs=tuple(
            _input(info, (*at, "inputs", key))
            for key in _keys(info, (*at, "inputs"))
            if key not in written
        ),
        outputs=outputs,
        upload_excludes=_strings(info, (*at, "upload_excludes")),
        template_path=_template(folder, info, name),
        schema_path=_existing(folder / "schemas" / f"{name}.schema.json"),
        image_uri=image_uri,
        versions_key=versions_key,
    )


def _input(info: _Document, at: tuple[str, ...]) -> Input:
    key = at[-1]
    _check_key(info, at, key)
    info.mapping(at, "a mapping with type (file or folder) and optional")
    optional = info.get((*at, "optional"), False)
    if not isinstance(optional, bool):
        raise info.error((*at, "optional"), "optional must be true or false")
    return Input(key, _required_str(info, (*at, "type")), optional)


def _output(info: _Document, at: tuple[str, ...]) -> Output:
    info.mapping(at, "a mapping with type (file or folder)")
    return Output(at[-1], _required_str(info, (*at, "type")))


def _check_key(info: _Document, at: tuple[str, ...], key: str) -> None:
    try:
        parse_key(key)
    except ValueError as exc:
        raise info.error(at, str(exc), key=True) from None


def _template(folder: Path, info: _Document, action: str) -> Path | None:
    """The template ``spec_templates`` names (from references/ or the skill's folder), or
    ``references/spec_template_<action>.yaml``."""
    candidates = [folder / "references" / f"spec_template_{action}.yaml"]
    named = info.get(("spec_templates", action), None)
    if isinstance(named, str) and named:
        candidates[:0] = [folder / "references" / named, folder / named]
    return next(filter(None, map(_existing, candidates)), None)


def _existing(path: Path) -> Path | None:
    return path.resolve() if path.is_file() else None


def _gpu_key(info: _Document) -> str | None:
    key = _optional_str(info, ("gpu_spec_key",))
    if key is not None:
        try:
            parse_key(key)
        except ValueError as exc:
            raise info.error(("gpu_spec_key",), str(exc)) from None
    return key


def _image(info: _Document, at: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The image reference ``at`` names and its versions key; a key of ``images`` alone
    (``tao_toolkit.deploy``) gives no reference, only the key."""
    uri = _optional_str(info, at)
    if uri is None:
        return None, None
    if _PIN.match(uri):
        return None, f"images.{uri}"
    match = _VERSIONS_KEY.search(info.line_text(at))
    return uri, match.group(1) if match else None


def _keys(info: _Document, at: tuple[str, ...]) -> list[str]:
    value = info.get(at, None)
    if value is None:
        return []
    info.mapping(at, "a mapping of spec keys")
    return [str(key) for key in value]


def _strings(info: _Document, at: tuple[str, ...]) -> tuple[str, ...]:
    value = info.get(at, None) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise info.error(at, "must be a list of strings")
    return tuple(value)


def _required_str(info: _Document, at: tuple[str, ...]) -> str:
    value = _optional_str(info, at)
    if value is None:
        raise info.error(at[:-1], f"{at[-1]} is missing: give it as a non-empty string")
    return value


def _optional_str(info: _Document, at: tuple[str, ...]) -> str | None:
    value = info.get(at, None)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise info.error(at, f"{at[-1]} must be a non-empty string")
    return value


def _choice(info: _Document, at: tuple[str, ...], choices: tuple[str, ...]) -> str:
    value = _optional_str(info, at) or choices[0]
    if value not in choices:
        raise info.error(at, f"{at[-1]} must be one of {', '.join(choices)}, not {value!r}")
    return value


def read_template(action: Action) -> dict[str, Any]:
    """The action's template as a mapping (empty when the action has none)."""
    import yaml

    if action.template_path is None:
        return {}
    file = action.template_path
    try:
        data = yaml.load(file.read_text(encoding="utf-8"), Loader=tao_loader())  # noqa: S506
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{file}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else str(file)
        raise SkillError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SkillError(f"{file}:1: a spec template must be a mapping")
    return data


class _Document:
    """A YAML file's data, with the line each value starts on."""

    def __init__(self, file: Path, text: str, data: Any, root: Any) -> None:
        self.file = file
        self.lines = text.splitlines()
        self.data = data
        self.root = root

    @classmethod
    def read(cls, file: Path) -> _Document:
        """Parse ``file``, or a one-line error naming it (and the line YAML blames)."""
        import yaml

        try:
            text = file.read_text(encoding="utf-8")
            loader = yaml.SafeLoader(text)
            try:
                root = loader.get_single_node()
                data = loader.construct_document(root) if root is not None else None
            finally:
                loader.dispose()
        except OSError as exc:
            raise SkillError(f"{file}: cannot read: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise SkillError(f"{file}: not UTF-8 text") from None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f"{file}:{mark.line + 1}" if mark is not None else str(file)
            raise SkillError(f"{where}: not valid YAML: {exc.problem}") from None
        except yaml.YAMLError as exc:
            raise SkillError(f"{file}: not valid YAML: {exc}") from None
        return cls(file, text, data, root)

    def get(self, at: tuple[str, ...], default: Any) -> Any:
        """The value at ``at``, or ``default`` where the path leaves the data."""
        value = self.data
        for part in at:
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value

    def mapping(self, at: tuple[str, ...], what: str) -> Mapping[Any, Any]:
        """The mapping at ``at``; an error saying it must be ``what`` otherwise."""
        value = self.get(at, None)
        if not isinstance(value, dict):
            name = at[-1] if at else "the file"
            raise self.error(at, f"{name} must be {what}")
        return value

    def error(self, at: tuple[str, ...], message: str, *, key: bool = False) -> SkillError:
        """A one-line error at the line of the value (or key) at ``at``."""
        return SkillError(f"{self.file}:{self.line(at, key=key)}: {message}")

    def line(self, at: tuple[str, ...], *, key: bool = False) -> int:
        """The 1-based line of the value at ``at`` (of its key with ``key=True``)."""
        node = self.root
        line = 0 if node is None else node.start_mark.line
        for part in at:
            pair = _pair(node, part)
            if pair is None:
                break
            line = pair[0].start_mark.line if key and part == at[-1] else pair[1].start_mark.line
            node = pair[1]
        return line + 1

    def line_text(self, at: tuple[str, ...]) -> str:
        """The text of the line the value at ``at`` starts on (comments included)."""
        return self.lines[self.line(at) - 1]


def _pair(node: Any, key: str) -> tuple[Any, Any] | None:
    """The (key node, value node) of ``key`` in a mapping node, if it is one and has it."""
    if node is None or node.id != "mapping":
        return None
    for key_node, value_node in node.value:
        if getattr(key_node, "value", None) == key:
            return key_node, value_node
    return None
