"""A job file that names a TAO model skill: what the skill adds to it, and what it checks.

:func:`apply_skill` takes a job whose file passed the job schema and names ``skill:``,
and returns the job's keys as the skill completes them:

- ``network_arch``, ``image``, ``command`` and ``upload_excludes`` from the skill and
  action where the job file leaves them out (the image through the versions key the skill
  names, in the job's nearest versions.yaml, else the skill bank's, else the literal URI);
- ``spec``: the action's template with the job's ``spec:`` deep-merged over it, the
  skill's ``gpu_spec_key`` set from ``gpus:``, and ``results_dir`` (when the action writes
  one and nobody set it) set to ``{results_dir}``; template text is taken literally;
- ``mounts``: each declared input the spec sets to a host path, mounted read-only at
  ``/inputs/<n>/<name>`` (in a container; a ``local`` job reads it where it is), its spec
  value rewritten to that path; a ``mounts:`` entry whose source holds the path is used
  instead (the job's mounts are returned typed, beside its keys). A mount it adds meets the
  checks a ``mounts:`` entry meets; it is refused, and a missing source reported, at the
  spec key that names the input.

The merged spec is checked against the action's schema (:mod:`taospec.taoschema`):
errors are problems at ``$.spec.<key>`` in the job file (at the ``skill:`` line when the
template supplied the value), and so are the warnings, which are returned apart.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taospec import lint, overrides, placeholders
from taospec.diagnostics import JsonPath, Problem
from taospec.job import (
    CONTAINER_RESULTS,
    PYXIS,
    Mount,
    SpecInput,
    results_seen_at,
    slurm_container,
)
from taospec.rules import (
    command_overrides,
    command_words,
    deploy_word_problems,
    mount_refusals,
    secret_key_message,
    shell_syntax,
    split_command,
    tao_deploy,
)
from taospec.skills import (
    Action,
    KeyPath,
    Skill,
    SkillError,
    SkillFinder,
    find_skill,
    load_skill,
    parse_key,
    read_template,
)
from taospec.taoschema import (
    ABSENT,
    COMPOSED,
    Finding,
    absent,
    check_spec,
    converted_to,
    dotted,
    every_item,
    gpu_count_problem,
    gpu_count_unknown,
    lookup,
    merge_spec,
    schema_node,
    typed_config,
    unfilled,
    unheld_interpolations,
    unset_inputs,
    user_paths,
    with_gpu_count,
)
from taospec.versions import Images, Unpinned, image_in
from taospec.yamlsrc import Source

INPUTS_ROOT = "/inputs"
"""Where inputs are mounted in a container: ``/inputs/<n>/<name>``."""
PATH_TYPES = ("file", "folder", "local_glob")
"""Input types that name paths of this machine (``list`` is passed on as written): a
``local_glob`` by the folder its pattern starts in, which is mounted as a folder input is."""
_GLOB = re.compile(r"[*?\[]")
"""What makes a part of a path a pattern, as Python's glob reads it."""


@dataclass(frozen=True, slots=True)
class Applied:
    """A job's keys completed by its skill, its mounts with the inputs added, and what the
    check left as warnings."""

    data: dict[str, Any]
    versions_key: str | None
    mounts: tuple[Mount, ...]
    spec_inputs: tuple[SpecInput, ...]
    warnings: tuple[Problem, ...]
    """Each a :class:`Problem` whose message begins ``warning:``."""


def apply_skill(
    source: Source,
    file: Path,
    images: Images,
    known: tuple[str, ...],
    environ: Mapping[str, str],
    *,
    find: SkillFinder = find_skill,
) -> tuple[Applied | None, list[Problem]]:
    """The job in ``source`` (checked, naming ``skill:``) completed by its skill.

    Returns None and the problems when the skill cannot be used or the merged spec fails
    its check; ``known`` are the placeholders the job's values may use; ``find`` finds the
    skill's folder (the job file as a revision had it finds the revision's).
    """
    data = source.data
    try:
        skill = load_skill(find(data["skill"], file.resolve().parent, environ))
    except SkillError as exc:
        return None, [source.problem(("skill",), str(exc))]
    try:
        action = skill.action(data["action"])
    except SkillError as exc:
        return None, [source.problem(("action",), str(exc))]
    unwritable = skill.unwritable(action)
    if unwritable:
        return None, [source.problem(("skill",), unwritable)]
    given = command_overrides(data)  # a job without a command runs the skill's
    passed = [each for each in given if each.read is not None]
    try:
        template = read_template(action)
        added = [each.read.key.partition(".")[0] for each in passed if each.read]
        schema, borrowed = borrow_sections(
            read_schema(action), [*template, *(data.get("spec") or {}), *added], action
        )
    except SkillError as exc:
        return None, [source.problem(("skill",), str(exc))]

    skill = _for_action(skill, action.name, template)
    problems: list[Problem] = []
    filled = dict(data)
    filled.setdefault("network_arch", skill.network_arch)
    filled.setdefault("upload_excludes", list(action.upload_excludes))
    if "command" not in data:
        filled["command"] = action.command
        problems += _command_problems(source, action, known)
    versions_key = None
    if "image" not in data:
        image, versions_key, why = _image(skill, action, images, file)
        if image is None:
            fix = "fix that pin, or give image:" if versions_key else "give image:"
            problems.append(source.problem(("skill",), f"{why}; {fix}"))
        filled["image"] = image

    deploy = tao_deploy(filled.get("image"))
    network = entrypoint(filled["command"], action.name)
    unread = unread_sections(borrowed, action.name, deploy=deploy, network=network)
    spec, composed, spec_problems, warnings = _spec(
        source, skill, action, template, schema, passed=passed, borrowed=borrowed, unread=unread
    )
    problems += spec_problems
    gpus = _gpu_key(skill, source)
    if passed and not spec_problems:
        problems += _override_problems(
            source, passed, spec=spec, composed=composed, schema=schema, gpus=gpus
        )
        warnings += _unmounted_inputs(source, passed, skill, action)
    # the rules judged the words where the job names the image itself
    problems += deploy_word_problems(source, given) if deploy and "image" not in data else []
    warnings += _one_gpu(source, action.name) if deploy else []
    if not problems:
        problems += _launch_problems(
            source,
            action.name,
            spec,
            given,
            gpus=gpus,
            deploy=deploy,
            schema=schema,
            network=network,
        )
        problems += _lost_outputs(source, action, spec, passed)
    if problems:
        return None, problems
    mounts, inputs, mount_problems = _inputs(source, file, action, spec)
    if mount_problems:
        return None, mount_problems
    filled["spec"] = spec
    return Applied(filled, versions_key, mounts, inputs, tuple(warnings)), []


def read_schema(action: Action) -> dict[str, Any]:
    """The action's TAO schema (empty, checking nothing but ``???``, when it has none)."""
    return {} if action.schema_path is None else _schema_file(action.schema_path)


def borrow_sections(
    schema: dict[str, Any], sections: Iterable[Any], action: Action
) -> tuple[dict[str, Any], frozenset[str]]:
    """The action's ``schema`` with each top-level section among ``sections`` that it lacks
    and another schema of the skill's folder holds, and the sections so borrowed. TAO's
    experiment config holds every action's section, where each action's schema keeps only
    its own (a TAO Deploy template carries them all, and so may a spec copied from TAO's
    examples). ``<section>.schema.json`` is read first; a section no schema holds stays
    unknown."""
    properties = schema.get("properties")
    wanted = {key for key in sections if isinstance(key, str)} - set(properties or ())
    if action.schema_path is None or not wanted or not isinstance(properties, dict):
        return schema, frozenset()
    folder = action.schema_path.parent
    named = [folder / f"{key}.schema.json" for key in sorted(wanted)]
    found: dict[str, Any] = {}
    for path in dict.fromkeys([*named, *sorted(folder.glob("*.schema.json"))]):
        if path == action.schema_path or not path.is_file():
            continue
        held = _schema_file(path).get("properties")
        held = held if isinstance(held, dict) else {}
        found.update((key, held[key]) for key in wanted - set(found) if key in held)
        if len(found) == len(wanted):
            break
    return {**schema, "properties": {**properties, **found}}, frozenset(found)


_ACTION_SECTIONS = frozenset(
    {
        "calibrate", "dataset_convert", "distill", "evaluate", "export", "gen_trt_engine",
        "inference", "prune", "quantize", "retrain", "train",
    }
)  # fmt: skip
"""The sections of a TAO experiment config that each belong to one action."""
_DEPLOY_READS = {
    ("classification_tf2", "gen_trt_engine"): "train",
    ("classification_tf2", "inference"): "evaluate",
    ("efficientdet_tf2", "gen_trt_engine"): "train",
    ("oneformer", "evaluate"): "export",
    ("oneformer", "inference"): "export",
}
"""The one section of another action that TAO Deploy's script for ``(network, action)``
reads (TAO Deploy 6.25.11, ``cv/<network>/scripts/<action>.py`` and what it calls); every
other script of TAO Deploy reads no other action's section."""


def unread_sections(
    borrowed: frozenset[str], action: str, *, deploy: bool, network: str | None
) -> frozenset[str]:
    """Of the ``borrowed`` sections (:func:`borrow_sections`), those TAO never reads when it
    runs ``action``, so that a ``???`` there needs no value: OmegaConf fails on one only
    where it is read. Known for TAO Deploy's scripts (``deploy``), whose ``network`` the
    command names: every other action's section but the one :data:`_DEPLOY_READS` names.
    None for another image, whose scripts may read any section."""
    if not deploy or network is None:
        return frozenset()
    return (borrowed & _ACTION_SECTIONS) - {_DEPLOY_READS.get((network, action))}


def _schema_file(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SkillError(f"{path}: cannot read the schema: {exc}") from None
    if not isinstance(loaded, dict):
        raise SkillError(f"{path}: a schema must be a JSON object")
    return loaded


def _command_problems(source: Source, action: Action, known: tuple[str, ...]) -> list[Problem]:
    where = f"the skill's command for {action.name} ({action.command!r})"
    try:
        split_command(action.command)
    except ValueError as exc:
        return [source.problem(("skill",), f"{where} cannot be split into words: {exc}")]
    shell = shell_syntax(action.command)
    if shell is not None:
        message = (
            f"{where} is shell script (it holds {shell}), and taospec runs a command as "
            "words, through no shell; give command: yourself, e.g. as the list "
            "[bash, -c, <script>]"
        )
        return [source.problem(("skill",), message)]
    return [
        source.problem(("skill",), f"{where}: {message}")
        for message in placeholders.unknown(action.command, known)
    ]


def _override_problems(
    source: Source,
    passed: list[overrides.Given],
    *,
    spec: Mapping[str, Any],
    composed: Mapping[str, Any],
    schema: Mapping[str, Any],
    gpus: tuple[str, int] | None,
) -> list[Problem]:
    """The Hydra overrides the job's command ``passed`` to TAO's entrypoint (``tiny_net
    train -e {config_path} train.num_epochs=5``) that Hydra refuses once the job has
    started, as :func:`_refused` finds them, and one that gives the skill's GPU count key
    (of ``gpus``, the key and the count ``gpus:`` names) another count."""
    command = source.data["command"]
    problems = []
    state = spec  # the spec as Hydra has it when it reads each word
    deleted: set[KeyPath] = set()
    for each in passed:
        read = each.read
        if read is None or read.key.startswith("hydra."):
            continue  # Hydra's own configuration (hydra.run.dir), not the spec's
        at = ("command", each.index) if isinstance(command, list) else ("command",)
        filled = bool(placeholders.names(each.passed))
        path = _key_path(read.key)
        gone = next((was for was in deleted if path[: len(was)] == was), None)
        if gone is not None and read.how in ("", "~"):
            refused = [
                f"an earlier word deletes spec.{dotted(gone)}, and Hydra reads the words in "
                f"order; to set it again write +{read.key}=..."
            ]
        else:
            refused = list(_refused(read, state, composed, schema, filled=filled))
        if not refused:
            state, schema = _apply(state, deleted, read, path, schema)
        count = _count(read.value) if gpus and read.key == gpus[0] and not filled else None
        if gpus is not None and count is not None and count != gpus[1] and read.how != "~":
            refused.append(
                f"spec.{gpus[0]} would be {count}, but gpus: names {gpus[1]} GPU(s), and "
                f"taospec sets spec.{gpus[0]} from gpus:; leave the word out, or make gpus: "
                "name as many"
            )
        problems += [source.problem(at, f"{each.shown}: {why}") for why in refused]
    return problems


_GPU_SECTIONS = {
    "train": "train",
    "evaluate": "evaluate",
    "inference": "inference",
    "distill": "train",
}
"""The actions TAO's PyTorch entrypoint may launch on several GPUs, each with the spec
section it reads their number from."""
_GPU_WORDS = ("num_gpus", "gpu_ids", "cuda_blocking")


def _for_action(skill: Skill, action: str, template: Mapping[str, Any]) -> Skill:
    """``skill`` with the GPU count key TAO reads for ``action``: its PyTorch entrypoint
    launches an evaluate or inference on as many GPUs as that action's own section says,
    so where the skill's key is ``train.num_gpus`` and the action's ``template`` holds
    ``<section>.num_gpus``, that key is the one ``gpus:`` sets."""
    section = _GPU_SECTIONS.get(action)
    if skill.gpu_spec_key != "train.num_gpus" or section in (None, "train"):
        return skill
    own = f"{section}.num_gpus"
    if lookup(template, parse_key(own)) is ABSENT:
        return skill
    return dataclasses.replace(skill, gpu_spec_key=own)


def template_sections(
    skill: Skill, action: Action, template: Mapping[str, Any]
) -> tuple[dict[str, Any], frozenset[str]]:
    """The action's schema, with the other sections its ``template`` holds borrowed
    (:func:`borrow_sections`), and those TAO leaves unread (:func:`unread_sections`), as
    the skill's own command runs the action in the image the bank's versions file pins."""
    schema, borrowed = borrow_sections(read_schema(action), template, action)
    deploy = tao_deploy(bank_image(skill, action))
    network = entrypoint(action.command, action.name)
    return schema, unread_sections(borrowed, action.name, deploy=deploy, network=network)


def _launch_problems(
    source: Source,
    action: str,
    spec: Mapping[str, Any],
    given: list[overrides.Given],
    *,
    gpus: tuple[str, int] | None,
    deploy: bool,
    schema: Mapping[str, Any],
    network: str | None,
) -> list[Problem]:
    """Where TAO would launch the job's ``action`` on other GPUs or nodes than the job
    gives it: the number and ids its PyTorch entrypoint launches on (:func:`_launched_gpus`,
    judged first; GPU 0 for an action it reads no ids for), then the nodes and the one GPU
    an action runs on (:func:`_node_count`, :func:`_gpu_index`). ``given``: the command's
    words to Hydra; ``gpus``: the skill's GPU key and the number ``gpus:`` names;
    ``deploy``: whether the image is TAO Deploy's; ``network``: the command's entrypoint
    (:func:`entrypoint`)."""
    if not deploy:  # TAO Deploy's entrypoint runs no torchrun: _gpu_index judges its GPU
        on_gpu_0 = _on_gpu_0(action, spec, given, gpus)
        torchrun = _torchrun_host_gpus(source, action, network, on_gpu_0)
        if torchrun:
            return torchrun
    if gpus is not None:
        launched = _launched_gpus(source, action, spec, given, gpus, network=network)
        if launched:
            return launched
    passed = [each for each in given if each.read is not None]
    return [
        *_node_count(source, action, spec, passed, schema),
        *_gpu_index(source, action, spec, passed, deploy=deploy),
    ]


def _on_gpu_0(
    action: str, spec: Mapping[str, Any], given: list[overrides.Given], gpus: tuple[str, int] | None
) -> str | None:
    """Why TAO's PyTorch entrypoint launches ``action`` on GPU 0, whichever GPUs the job
    has, where it does: it reads GPU ids only for some actions, from the words that name
    them or else from the action's section, and takes 0 where neither does. None where it
    reads them, or where :func:`_launched_gpus` judges them (``gpus``: the skill's GPU key
    and count, judged there where the key is that section's ``num_gpus``)."""
    section = _GPU_SECTIONS.get(action)
    if section is None:
        return "it reads GPU ids only for train, evaluate, inference and distill"
    held = spec.get(section)
    named = isinstance(held, Mapping) and ("num_gpus" in held or "gpu_ids" in held)
    worded = any(word in each.word for each in given for word in _GPU_WORDS)
    if named or worded or (gpus is not None and gpus[0] == f"{section}.num_gpus"):
        return None
    return f"spec.{section} names no num_gpus or gpu_ids, and no word of the command does"


def _torchrun_host_gpus(
    source: Source, action: str, network: str | None, on_gpu_0: str | None
) -> list[Problem]:
    """A problem where a local job's ``gpus:`` are not the host's GPUs TAO's entrypoint
    runs a torchrun ``network``'s ``action`` on, whatever the job shows the process: it sets
    ``CUDA_VISIBLE_DEVICES`` to the GPU ids it reads (:func:`_launched_gpus` judges them),
    and to 0 where it reads none (``on_gpu_0``: why, :func:`_on_gpu_0`). The ids
    ``gpus: {free: N}`` picks at submit can be neither."""
    host = source.data.get("gpus")
    if source.data.get("platform", "local") != "local" or network not in TORCHRUN:
        return []
    launches = f"launches {network} with torchrun, first setting CUDA_VISIBLE_DEVICES to"
    if isinstance(host, Mapping):
        which = "0" if on_gpu_0 else "the GPU ids it reads from the spec"
        said = (
            f"TAO's entrypoint {launches} {which}, in place of the ids gpus: picks at submit, "
            "which the spec cannot name; name the GPUs, or run the job in a container"
        )
    elif on_gpu_0 and isinstance(host, list) and host != [0]:
        said = (
            f"TAO's entrypoint runs {network} {action} on the host's GPU 0 ({on_gpu_0}): it "
            f"{launches} 0 in place of the {_joined(host)} gpus: gives the process; write "
            "[0], or run the job in a container"
        )
    else:
        return []
    return [source.problem(("gpus",), said)]


def _launched_gpus(
    source: Source,
    action: str,
    spec: Mapping[str, Any],
    given: list[overrides.Given],
    gpus: tuple[str, int],
    *,
    network: str | None,
) -> list[Problem]:
    """A problem where TAO's PyTorch entrypoint would launch the action on another number
    of GPUs than ``gpus:`` names (``gpus``: the skill's GPU key and that number), or on
    GPUs the job does not give it (:func:`_unseen_gpus`; ``network``: the entrypoint's).

    The entrypoint decides the number itself: from the words it passes on, when any
    names ``num_gpus``, ``gpu_ids`` or ``cuda_blocking`` (read as text: the first
    ``num_gpus=`` as an int, 1 without one, the first ``gpu_ids=`` as a Python literal,
    [0] without one), and from the spec's section of the action otherwise; it takes the
    larger of the count and the number of ids, and launches on the ids where they are as
    many, else on 0 to that number less one. Judged where the skill's GPU key is that
    section's ``num_gpus``."""
    section = _GPU_SECTIONS.get(action)
    key, wanted = gpus
    if section is None or key != f"{section}.num_gpus":
        return []
    words = list({each.index: each.word for each in given}.items())
    line = " " + " ".join(word for _, word in words)
    named = next((index for index, word in words if any(w in word for w in _GPU_WORDS)), None)
    if named is None:
        held = spec.get(section)
        written = isinstance(held, Mapping) and "gpu_ids" in held
        ids = held.get("gpu_ids", [0]) if isinstance(held, Mapping) else [0]
        at_ids: JsonPath = ("spec", section, "gpu_ids")
        if not isinstance(ids, list):
            return []
        if len(ids) <= wanted:  # fewer ids: the entrypoint launches on 0 to wanted - 1
            ran = ids if len(ids) == wanted else list(range(wanted))
            beyond = _unseen_gpus(source, ran, wanted, network)
            named_on = _launched_on(ran, len(ids) if written else None, wanted)
            said = f"TAO's entrypoint runs the action on {named_on}"
            return [source.problem(at_ids, f"{said}, {beyond}")] if beyond else []
        return [
            source.problem(
                at_ids,
                f"names {len(ids)} GPU ids, and TAO's entrypoint launches the action on as "
                f"many GPUs as the larger of spec.{key} and the ids, but gpus: names "
                f"{wanted}; name as many ids, or leave spec.{section}.gpu_ids out",
            )
        ]
    launched, beyond = None, None
    try:
        count = line.split("num_gpus=")[1].split()[0] if "num_gpus" in line else "1"
        ids = line.split("gpu_ids=")[1].split()[0] if "gpu_ids" in line else "[0]"
        if placeholders.names(count + ids):
            return []  # known once the plan fills them
        listed = ast.literal_eval(ids)
        launched = max(int(count), len(listed))
    except (IndexError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        why = (
            "it reads the first num_gpus= as a whole number and the first gpu_ids= as a "
            "Python list, each up to the next blank, and fails on these words"
        )
    else:
        ordered = isinstance(listed, list | tuple) and len(listed) == launched
        on = list(listed) if ordered else list(range(launched))
        beyond = _unseen_gpus(source, on, wanted, network) if launched == wanted else None
        given_ids = len(listed) if "gpu_ids" in line else None
        said = f"TAO's entrypoint runs the action on {_launched_on(on, given_ids, wanted)}"
        if launched == wanted and beyond is None:
            return []
        why = (
            f"it would launch the action on {launched} GPU(s), but gpus: names {wanted}; "
            f"add {key}={wanted} to the command"
        )
    at: JsonPath = ("command", named) if isinstance(source.data["command"], list) else ("command",)
    word = dict(words)[named]
    if launched == wanted and beyond is not None:
        return [source.problem(at, f"{word!r}: {said}, {beyond}")]
    return [
        source.problem(
            at,
            f"{word!r}: TAO's entrypoint takes the number of GPUs from the command line, not "
            f"the spec, once a word names num_gpus, gpu_ids or cuda_blocking: {why}",
        )
    ]


_CONTAINED = ("docker", "brev")
"""The platforms whose job runs in a container given exactly the GPUs ``gpus:`` names."""
TORCHRUN = frozenset({"bevfusion", "pointpillars", "rtdetr"})
"""The networks TAO's PyTorch entrypoint launches with torchrun (its
``LIGHTNING_EXCLUDED_NETWORKS``), first setting ``CUDA_VISIBLE_DEVICES`` to the GPU ids
it launches on."""


def _unseen_gpus(source: Source, ids: list[Any], count: int, network: str | None) -> str | None:
    """What the GPU ids TAO launches ``network``'s action on name that the job does not
    give it, and the fix; None where they are its own, or where that cannot be told.

    A container numbers its GPUs from 0, whichever ids of the host ``gpus:`` gives it, and
    so does a local process, shown them by ``CUDA_VISIBLE_DEVICES``. But for a network it
    launches with torchrun, TAO's entrypoint sets ``CUDA_VISIBLE_DEVICES`` to the ids
    themselves, which in a local job number the host's GPUs."""
    host = source.data.get("gpus")
    local = source.data.get("platform", "local") == "local"
    if local and network in TORCHRUN:
        if not isinstance(host, list) or sorted(map(repr, ids)) == sorted(map(repr, host)):
            return None  # no gpus: shows it every GPU; {free: N}: _torchrun_host_gpus
        return (
            f"but it launches {network} with torchrun, first setting CUDA_VISIBLE_DEVICES "
            f"to them, in place of the {_joined(host)} gpus: gives the process; write "
            f"{host}"
        )
    if not local and source.data.get("platform") not in _CONTAINED:
        return None
    if all(type(each) is int and 0 <= each < count for each in ids):
        return None
    return f"but {_numbered(source, count)}; write {list(range(count))}"


def _launched_on(ids: list[Any], given: int | None, count: int) -> str:
    """The GPUs TAO's entrypoint launches on, ``ids``, as a message names them: the
    ``given`` ids, or 0 to ``count`` less one where fewer or none (None) were given."""
    names = ", ".join(map(repr, ids))
    if given == len(ids):
        return f"the GPUs these ids number ({names})"
    gpus = f"GPU {names}" if count == 1 else f"GPUs {names} (0 to {count - 1}"
    why = "where no gpu_ids are given" if given is None else f"as gpu_ids names only {given}"
    return f"{gpus}, {why})" if count > 1 else f"{gpus} ({why})"


def entrypoint(command: object, action: str) -> str | None:
    """The TAO entrypoint a job's ``command`` runs: the word before the action (``rtdetr``
    in ``rtdetr train -e {config_path}``, also after ``tao model``)."""
    words = command_words(command)
    at = None if words is None else overrides.action_at(words, action)
    return None if words is None or at is None else str(words[at - 1])


def _numbered(source: Source, count: int) -> str:
    """How the job's container, or its local process, numbers the ``count`` GPUs it is
    given."""
    if count == 1:
        seen = "its GPU as 0"
    else:
        last = "1" if count == 2 else f"{count - 1}"
        seen = f"its {count} GPUs as 0 {'and' if count == 2 else 'to'} {last}"
    if source.data.get("platform", "local") != "local":
        return f"the container sees {seen} (whichever ids of the host gpus: gives it)"
    host = source.data.get("gpus")
    shown = _joined(host) if isinstance(host, list) else "the ids picked at submit"
    return f"CUDA_VISIBLE_DEVICES={shown} shows the process {seen}"


def _joined(ids: list[Any]) -> str:
    return ",".join(map(str, ids))


def _final(
    source: Source, key: str, spec: Mapping[str, Any], passed: list[overrides.Given]
) -> tuple[object, JsonPath, str]:
    """What TAO reads at the spec key ``key``: the value of the last word that sets it
    (its text, None for one the plan fills), else the spec's; where that was written, and
    the word to name in a message (empty for the spec's)."""
    setting = [each for each in passed if each.read and each.read.key == key]
    word = setting[-1] if setting and setting[-1].read and setting[-1].read.how != "~" else None
    if word is None or word.read is None:
        return lookup(spec, _key_path(key)), ("spec", *_key_path(key)), ""
    listed = isinstance(source.data["command"], list)
    at: JsonPath = ("command", word.index) if listed else ("command",)
    value = None if placeholders.names(word.passed) else word.read.value
    return value, at, f"{word.shown}: "


def _one_gpu(source: Source, action: str) -> list[Problem]:
    """A warning where ``gpus:`` names more than one GPU for TAO Deploy, which runs every
    action on one: the others would be held for nothing."""
    count = gpu_count(source.data.get("gpus", []))
    if count is None or count < 2:
        return []
    message = (
        f"warning: TAO Deploy runs {action} on one GPU, so {count - 1} of the {count} "
        "GPUs gpus: names would sit idle, held by this job; name one"
    )
    return [source.problem(("gpus",), message)]


def _gpu_index(
    source: Source,
    action: str,
    spec: Mapping[str, Any],
    passed: list[overrides.Given],
    *,
    deploy: bool,
) -> list[Problem]:
    """A problem where the one GPU TAO runs ``action`` on (``<action>.gpu_id``, as the last
    word that sets it leaves it: export, gen_trt_engine, prune; in TAO Deploy's evaluate
    and inference, the largest of ``<action>.gpu_ids``) is an index the job's container,
    or its local process, does not have. TAO Deploy's entrypoint sets
    ``CUDA_VISIBLE_DEVICES`` to that GPU (0 where the spec names none), so in a local job it
    must be one of the host's ids ``gpus:`` names."""
    count = gpu_count(source.data.get("gpus", []))
    platform = source.data.get("platform", "local")
    local = platform == "local"
    if count is None or (platform not in _CONTAINED and not local):
        return []
    many = deploy and action in ("evaluate", "inference")
    key = f"{action}.gpu_ids" if many else f"{action}.gpu_id"
    value, at, shown = _final(source, key, spec, passed)
    if shown and isinstance(value, str):
        value = overrides.typed(value) if many else _count(value)
    if many and isinstance(value, list) and value and all(type(i) is int for i in value):
        value = max(value)
    host = source.data.get("gpus")
    if local and deploy:
        named = f"{value}" if value is not ABSENT else "0, where the spec names none"
        value = 0 if value is ABSENT else value
        if type(value) is not int or not isinstance(host, list) or value in host:
            return []
        which = f"the largest of spec.{key}" if many else f"spec.{key}"
        fix = f"one of {host}" if len(host) > 1 else f"{host[0]}"
        message = (
            f"{shown}TAO Deploy's entrypoint sets CUDA_VISIBLE_DEVICES to the GPU it runs "
            f"{action} on, {which} ({named}), in place of the {_joined(host)} gpus: gives "
            f"the process; make it {fix}"
        )
        return [source.problem(at, message)]
    if type(value) is not int or 0 <= value < count:
        return []
    if many:
        message = (
            f"{shown}TAO Deploy runs {action} on GPU {value}, the largest of spec.{key}, "
            f"but {_numbered(source, count)}; make them some of {list(range(count))}"
        )
        return [source.problem(at, message)]
    message = (
        f"{shown}TAO runs {action} on the GPU spec.{key} numbers ({value}), but "
        f"{_numbered(source, count)}; make it one of {list(range(count))}"
    )
    return [source.problem(at, message)]


def _lost_outputs(
    source: Source, action: Action, spec: Mapping[str, Any], passed: list[overrides.Given]
) -> list[Problem]:
    """A problem for each path the action writes (the skill's outputs, ``results_dir``
    among them, as the last word that sets each leaves it) that a job in a container
    would write outside every folder mounted into it, where it is gone with the container,
    or into one mounted read-only, where the write fails. A path the plan fills, one
    relative to the container's working folder or one OmegaConf resolves is left to TAO."""
    data = source.data
    seen = results_seen_at(data.get("platform", "local"), slurm_container(data), "")
    if seen != CONTAINER_RESULTS:
        return []
    mounts = {CONTAINER_RESULTS: False, INPUTS_ROOT: True}  # target: read-only
    for each in data.get("mounts", []):
        target = posixpath.normpath(str(each.get("target", "/")))
        mounts[target] = bool(each.get("readonly", False))
    problems = []
    for key in dict.fromkeys(output.spec_key for output in action.outputs):
        value, at, shown = _final(source, key, spec, passed)
        if shown and isinstance(value, str):
            typed = overrides.typed(value)
            value = typed if isinstance(typed, str) else None
        if not isinstance(value, str) or not value.startswith("/") or "${" in value:
            continue
        path = posixpath.normpath(value.replace("{results_dir}", CONTAINER_RESULTS))
        if placeholders.names(path):
            continue
        held = [t for t in mounts if path == t or path.startswith(t.rstrip("/") + "/")]
        root = max(held, key=len, default=None)
        if root is not None and not mounts[root]:
            continue
        where = (
            f"into {root}, which is mounted read-only, so the write fails"
            if root is not None
            else "inside the container but outside every folder mounted into it, so it "
            "would be gone with the container"
        )
        message = (
            f"{shown}TAO writes spec.{key} to {path}, {where}; write it under "
            f"{CONTAINER_RESULTS} (the job's results folder), or in a mounts: entry's target"
        )
        problems.append(source.problem(at, message))
    return problems


def _node_count(
    source: Source,
    action: str,
    spec: Mapping[str, Any],
    passed: list[overrides.Given],
    schema: Mapping[str, Any],
) -> list[Problem]:
    """A problem where TAO would run the action on more or fewer nodes than the job has
    (``nodes:``, 1 unless on Slurm): the spec's ``num_nodes`` in the action's section, as
    the last word that sets it leaves it, where the skill's schema holds that key. TAO
    waits for every node it is told of to join the run."""
    section = _GPU_SECTIONS.get(action)
    key = f"{section}.num_nodes"
    node = schema_node(schema, key) if section is not None else None
    if node is None or node.get("type") != "int":
        return []  # the skill's TAO reads no such count
    nodes = source.data.get("nodes", 1)
    value, at, shown = _final(source, key, spec, passed)
    if shown:  # a word's text, None where the plan fills it
        count = _count(value) if isinstance(value, str) else None
    else:
        count = value if isinstance(value, int) and not isinstance(value, bool) else None
    if count is None or count == nodes:
        return []
    message = (
        f"{shown}TAO would run the action on {count} node(s) (spec.{key}) and wait for each "
        f"to join, but the job has {nodes} (nodes: {nodes}), so it would wait until it is "
        f"stopped; make spec.{key} {nodes}, or nodes: {count}"
    )
    return [source.problem(at, message)]


def _count(value: str) -> int | None:
    """The whole number OmegaConf makes of an override's ``value`` for an integer key."""
    typed = overrides.typed(value)
    if isinstance(typed, bool) or not isinstance(typed, int | str):
        return None
    try:
        return int(typed)
    except ValueError:
        return None


def _gpu_key(skill: Skill, source: Source) -> tuple[str, int] | None:
    """The skill's GPU count key and the count the job's ``gpus:`` names; None where the
    skill has no such key or ``gpus: all`` names no count here."""
    count = gpu_count(source.data.get("gpus", []))
    if skill.gpu_spec_key is None or count is None:
        return None
    return skill.gpu_spec_key, count


def _unmounted_inputs(
    source: Source, passed: list[overrides.Given], skill: Skill, action: Action
) -> list[Problem]:
    """A warning for each override ``passed`` to TAO that sets a path the action reads (one
    of its inputs, or a key holding one) in a job run in a container: taospec mounts an
    input the spec sets, not one a command sets, so the job sees the path only where a
    ``mounts:`` entry, or the image, holds it."""
    data = source.data
    if data.get("platform", "local") == "local":
        return []
    targets = [str(m.get("target", "")).rstrip("/") + "/" for m in data.get("mounts", [])]
    inputs = [each for each in action.inputs if each.type in PATH_TYPES]
    warnings = []
    for each in passed:
        read = each.read
        if read is None or read.how == "~":
            continue
        found = next((i for i in inputs if _holds(_key_path(read.key), i.path)), None)
        value = str(overrides.typed(read.value))
        if found is None or any(value.startswith(t) for t in targets):
            continue
        at: JsonPath = (
            ("command", each.index) if isinstance(data["command"], list) else ("command",)
        )
        message = (
            f"warning: {each.shown} sets {skill.name}'s input {found.spec_key}, which taospec "
            "mounts into the container only when spec: sets it; set it in spec: instead, or "
            "mount the path with a mounts: entry"
        )
        warnings.append(source.problem(at, message))
    return warnings


def _key_path(key: str) -> KeyPath:
    """A dotted key of an override as a spec path (a number a list's index)."""
    return tuple(int(part) if part.isdigit() else part for part in key.split("."))


def _holds(path: KeyPath, input_path: KeyPath) -> bool:
    """Whether the spec key ``path`` is ``input_path`` or holds it (an index in
    ``input_path`` stands for each item of its list)."""
    if len(path) > len(input_path):
        return False
    return all(
        part == declared or (isinstance(part, int) and isinstance(declared, int))
        for part, declared in zip(path, input_path, strict=False)
    )


_HYDRA_READS = "Hydra, which reads the words after -e {config_path} as overrides of the spec,"


def _refused(
    read: overrides.Override,
    spec: Mapping[str, Any],
    composed: Mapping[str, Any],
    schema: Mapping[str, Any],
    *,
    filled: bool,
) -> Iterator[str]:
    """Why Hydra refuses the override ``read`` of the merged ``spec``, whose keys and types
    the skill's ``schema`` gives: a key neither holds set or deleted, a key held added
    (``+`` only adds), a value OmegaConf cannot make the key's type (unless placeholders
    are ``filled`` into it when the plan is rendered), an interpolation naming a key
    neither holds once the command's overrides add theirs (``composed``)."""
    lacks = _lacks(schema, spec, read.key) if read.how in ("", "~") else None
    if lacks is not None:
        change = "delete" if read.how == "~" else "set"
        yield f"{lacks}, and {_HYDRA_READS} refuses to {change} a key it does not hold"
    parent = read.key.rpartition(".")[0]
    if read.how == "~" and lacks is None and parent and typed_config(schema, parent):
        yield (
            f"spec.{parent} is one of the network's dataclass configs, which TAO's Hydra "
            f"holds typed, and a typed config deletes none of its keys; set spec.{read.key} "
            "to the value wanted instead"
        )
    held = lookup(spec, _key_path(read.key)) if read.how in ("+", "++") else None
    if (
        held is not None
        and held is not ABSENT
        and read.how == "+"
        and not read.value.startswith(("[", "{"))
    ):
        yield (
            f"the spec holds spec.{read.key} already, and Hydra's + only adds a key; write "
            f"{read.key}={read.value} to set it"
        )
    value = overrides.typed(read.value)
    unread = lacks is not None or read.how == "~" or filled or value is overrides.UNREAD
    kind = None if unread else converted_to(schema, read.key, value)
    if kind is not None:
        yield f"spec.{read.key} is {kind}, and {_HYDRA_READS} cannot make {read.value!r} one"
    elif not unread and isinstance(value, dict) and (read.how == "" or isinstance(held, dict)):
        yield from _merged(read.key, value, spec, schema)  # + and ++ merge into what is held
    yield from unheld_interpolations(schema, composed, read.value)


def _apply(
    state: Mapping[str, Any],
    deleted: set[KeyPath],
    read: overrides.Override,
    path: KeyPath,
    schema: Mapping[str, Any],
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """``state``, the spec as Hydra has it, changed as the override ``read`` of the key at
    ``path`` changes it (copied along ``path`` alone), noting in ``deleted`` the keys it
    deletes (and no longer those it adds again); and the ``schema`` the words after it are
    judged by, which names the keys of a mapping added where it names none (Hydra holds
    such a mapping as given). A value only Hydra's evaluation tells stands as
    :data:`COMPOSED`."""
    value = overrides.typed(read.value)
    if read.how == "~":
        deleted.add(path)
        return _changed(state, path, lambda held: ABSENT), schema
    deleted.difference_update([was for was in deleted if was[: len(path)] == path])

    def change(held: Any) -> Any:
        if isinstance(value, dict) and isinstance(held, dict):
            return merge_spec(held, value)  # Hydra merges a mapping into the one held
        return COMPOSED if value is overrides.UNREAD else value

    if isinstance(value, dict) and read.how in ("+", "++") and lookup(state, path) is ABSENT:
        schema = _with_keys(schema, path, value)
    return _changed(state, path, change), schema


def _changed(node: Any, path: KeyPath, change: Callable[[Any], Any]) -> Any:
    """``node`` with its value at ``path`` (:data:`ABSENT` where it has none) made
    ``change(value)`` (:data:`ABSENT`: taken out), mappings missing on the way added;
    ``node`` itself where a number, text or list's end is in the way."""
    if not path:
        return change(node)
    part, rest = path[0], path[1:]
    if isinstance(node, Mapping):
        held = node.get(part, ABSENT if not rest else {})
        new = _changed(held, rest, change)
        copied = {key: item for key, item in node.items() if key != part}
        if new is not ABSENT:
            copied[part] = new
        return copied if new is not held or part not in node else node
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        new = _changed(node[part], rest, change)
        kept = [] if new is ABSENT else [new]
        return node if new is node[part] else [*node[:part], *kept, *node[part + 1 :]]
    return node


def _with_keys(schema: Mapping[str, Any], path: KeyPath, value: Any) -> Mapping[str, Any]:
    """``schema`` naming, at ``path``, the keys of the mapping ``value`` (and theirs, at any
    depth) where it names none there; ``schema`` itself where it does, or cannot reach it."""
    if not path:
        if not isinstance(value, dict) or "properties" in schema:
            return schema
        return {"properties": {key: _with_keys({}, (), item) for key, item in value.items()}}
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not isinstance(path[0], str):
        return schema
    member = properties.get(path[0], {})
    if not isinstance(member, Mapping):
        return schema
    changed = _with_keys(member, path[1:], value)
    if changed is member:
        return schema
    return {**schema, "properties": {**properties, path[0]: changed}}


def _lacks(schema: Mapping[str, Any], spec: Mapping[str, Any], key: str) -> str | None:
    """Where the dotted ``key`` leaves the spec TAO reads (:func:`absent`), said with the
    key meant where a name there is close; None where the key may be read."""
    lacks = absent(schema, spec, key)
    if lacks is None:
        return None
    first, guess = lacks
    return f"the spec holds no spec.{first}" + (f" (did you mean {guess}?)" if guess else "")


def _merged(
    key: str, value: dict[Any, Any], spec: Mapping[str, Any], schema: Mapping[str, Any]
) -> Iterator[str]:
    """Why Hydra refuses to merge the mapping ``value`` into the one ``spec.<key>`` holds,
    as it sets a mapping: a key neither the spec nor the schema holds there (TAO's spec
    takes no new key but through ``+``), or a value OmegaConf cannot make its key's type."""
    for name, item in value.items():
        path = f"{key}.{name}"
        lacks = _lacks(schema, spec, path)
        if lacks is not None:
            yield (
                f"Hydra merges a mapping into spec.{key}, and refuses its key {name!r}: "
                f"{lacks}; add a key with +{path}=..."
            )
            continue
        kind = None if item is overrides.UNREAD else converted_to(schema, path, item)
        if kind is not None:
            yield f"spec.{path} is {kind}, and {_HYDRA_READS} cannot make {item!r} one"
        elif isinstance(item, dict):
            yield from _merged(path, item, spec, schema)


def _image(
    skill: Skill, action: Action, images: Images, file: Path
) -> tuple[str | None, str | None, str]:
    """The image URI, the versions key it was found by (None when taken literally), and,
    without a URI, why not."""
    uri, key = _named_image(skill, action)
    if key is None:
        return uri, None, f"skill {skill.name} names no container_image for {action.name}"
    try:
        return images.resolve(key), key, ""
    except Unpinned:
        pass  # the bank's own versions file pins it
    except LookupError as exc:  # the job's versions.yaml pins it, to no image
        why = f"skill {skill.name} names the image of {action.name} by its pin {key}: {exc}"
        return None, key, why
    try:
        return image_in(skill.versions_file, key, file), key, ""
    except LookupError as exc:
        why = f"skill {skill.name} names the image of {action.name} by its pin {key}: {exc}"
        return uri, None, why


def bank_image(skill: Skill, action: Action) -> str | None:
    """The image the skill names for ``action``, a versions key as the bank's own
    versions file pins it; None where it names none, or that file does not pin it."""
    uri, key = _named_image(skill, action)
    if key is None or skill.versions_file is None:
        return uri
    try:
        return image_in(skill.versions_file, key, skill.versions_file)
    except LookupError:
        return uri


def _named_image(skill: Skill, action: Action) -> tuple[str | None, str | None]:
    """The image the skill names for ``action`` (its own, else the skill's): its URI and
    its versions key, either None where not given."""
    if action.image_uri is None and action.versions_key is None:
        return skill.image_uri, skill.versions_key
    return action.image_uri, action.versions_key


# The spec


def _spec(
    source: Source,
    skill: Skill,
    action: Action,
    template: dict[str, Any],
    schema: Mapping[str, Any],
    *,
    passed: list[overrides.Given],
    borrowed: frozenset[str],
    unread: frozenset[str],
) -> tuple[dict[str, Any], dict[str, Any], list[Problem], list[Problem]]:
    """The spec file's content, the spec as TAO composes it with the overrides ``passed``,
    the problems and the warnings (none about what the template holds in the ``borrowed``
    sections, another action's, which this one does not read, but for a value not set
    yet outside the sections TAO is known to leave ``unread``)."""
    user_spec = source.data.get("spec") or {}
    gpus = source.data.get("gpus", [])
    count = gpu_count(gpus)
    problems = []
    unknown = gpu_count_unknown(skill, template, user_spec) if gpus == "all" else None
    if unknown is not None:
        problems.append(source.problem(("gpus",), unknown))
    mismatch = gpu_count_problem(skill, user_spec, count)
    if mismatch is not None and skill.gpu_spec_key is not None:
        at: JsonPath = ("spec", *parse_key(skill.gpu_spec_key))
        problems.append(source.problem(at, mismatch))
    user = with_gpu_count(skill, template, user_spec, count)
    users = user_paths(template, user)
    merged = merge_spec(template, user)
    composed = _composed(merged, passed)
    # the run's results folder, where the template leaves results_dir to it
    fills = ("results_dir",) not in users and fills_results_dir(action, merged)
    checked = {**merged, "results_dir": ""} if fills else merged
    findings = [
        finding
        for finding in check_spec(
            schema, checked, users, skill=skill.name, template=template, composed=composed
        )
        if finding.origin == "user"
        or not finding.path
        or finding.path[0] not in borrowed
        or (finding.kind == "unset" and finding.path[0] not in unread)
    ]
    findings += unset_inputs(merged, action, users)
    warnings = []
    for finding in findings:
        if finding.severity == "error":
            problems.append(_problem(source, finding, action))
        else:
            warned = dataclasses.replace(finding, message=f"warning: {finding.message}")
            warnings.append(_problem(source, warned, action))
    literal = _literal_template(merged, (), users)
    if fills:
        literal["results_dir"] = "{results_dir}"
    for path, name in lint.secret_keyed_values(literal):
        if path not in users:  # the job file's own values are the rules' to refuse
            message = secret_key_message(name)
            if action.template_path is not None:
                message += f" (the value comes from {action.template_path})"
            problems.append(source.about(("spec", *path), message, ("skill",)))
    return literal, composed, problems, warnings


def _composed(spec: dict[str, Any], passed: list[overrides.Given]) -> dict[str, Any]:
    """``spec`` with the keys the overrides ``passed`` add (``+key=``, ``++key=``), as
    Hydra adds them before OmegaConf resolves an interpolation; ``spec`` itself where none
    add one. A list, mapping or interpolation added stands as :data:`COMPOSED`."""
    added = [each.read for each in passed if each.read and each.read.how in ("+", "++")]
    if not added:
        return spec
    composed = copy.deepcopy(spec)
    for read in added:
        value = overrides.typed(read.value)
        if value is overrides.UNREAD or isinstance(value, list | dict):
            value = COMPOSED
        *parents, last = _key_path(read.key)
        node: Any = composed
        for part in parents:
            if isinstance(node, dict):
                node = node.setdefault(part, {})
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        else:
            if isinstance(node, dict):
                node[last] = value
    return composed


def gpu_count(gpus: object) -> int | None:
    """How many GPUs ``gpus:`` names per node: its ids, or N of ``{free: N}``; None for
    ``all`` (known only on the host), none named, or a value the job's checks refuse."""
    if isinstance(gpus, list) and gpus:
        return len(gpus)
    free = gpus.get("free") if isinstance(gpus, dict) else None
    return free if isinstance(free, int) and not isinstance(free, bool) and free > 0 else None


def _problem(source: Source, finding: Finding, action: Action) -> Problem:
    at: JsonPath = ("spec", *finding.path)
    if finding.origin == "user":
        return source.problem(at, finding.message, key=finding.kind == "unknown-key")
    message = finding.message
    if action.template_path is not None:
        message += f" (the value comes from {action.template_path})"
    return source.about(at, message, ("skill",))


def fills_results_dir(action: Action, spec: Mapping[str, Any]) -> bool:
    """Whether taospec sets ``results_dir`` to the run's results folder: the action writes
    it and ``spec`` leaves it to the run (empty, or the template's ``<out_dir>``)."""
    held = spec.get("results_dir", "")
    writes = any(o.spec_key == "results_dir" for o in action.outputs)
    return writes and (held in ("", None) or unfilled(held) is not None)


def _literal_template(value: Any, at: KeyPath, users: frozenset[KeyPath]) -> Any:
    """``value`` with the template's text made literal (braces doubled), the user's kept."""
    if any(at[:n] in users for n in range(1, len(at) + 1)):
        return copy.deepcopy(value)
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, Mapping):
        return {k: _literal_template(v, (*at, k), users) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal_template(v, (*at, i), users) for i, v in enumerate(value)]
    return value


# Inputs


def _inputs(
    source: Source, file: Path, action: Action, spec: dict[str, Any]
) -> tuple[tuple[Mount, ...], tuple[SpecInput, ...], list[Problem]]:
    """The job's mounts with each input added, the inputs, and what cannot be mounted.

    ``spec`` is changed in place: each input's value becomes the path the job sees.
    """
    data = source.data
    explicit: list[dict[str, Any]] = list(data.get("mounts", []))
    container = data.get("platform", "local") != "local"
    pyxis = slurm_container(data) == PYXIS
    folder = str(file.resolve().parent).replace("{", "{{").replace("}", "}}")
    added: dict[str, str] = {}
    mounts = [Mount.entry(m) for m in explicit]
    used = {str(m.get("target", "")).rstrip("/") for m in explicit}
    found: list[SpecInput] = []
    problems: list[Problem] = []
    for key, path, value, glob in _input_paths(spec, action):
        value, pattern = _glob_start(value) if glob else (value, "")
        host = _host_path(value, folder)
        at: JsonPath = ("spec", *path)
        if pattern and host == "/":
            problems.append(source.problem(at, f"input {value + pattern!r}: {_GLOB_AT_ROOT}"))
            continue
        job_path = host
        if container:
            job_path = _covered(host, explicit) or added.get(host) or ""
            if not job_path:
                job_path = _new_target(host, used)
                refused = _refusal(host, job_path, pyxis=pyxis)
                if refused:
                    problems.append(source.problem(at, f"input {host!r}: {refused}"))
                    continue
                used.add(job_path)
                added[host] = job_path
                given = lookup(data.get("spec"), path) is not ABSENT  # else the template's
                template = None if given else str(action.template_path)
                mounts.append(Mount(host, job_path, True, written_at=at, template=template))
        _set(spec, path, posixpath.join(job_path, pattern) if pattern else job_path)
        found.append(SpecInput(key, host, job_path))
    return tuple(mounts), tuple(found), problems


def _glob_start(value: str) -> tuple[str, str]:
    """Of a glob input's pattern (``data/vids/*.mp4``), the folder it starts in and the
    pattern below it (``data/vids``, ``*.mp4``); a path without one, as it is. An
    upstream's results folder (``{needs.train[lr=1].results_dir}``) is a folder, never a
    pattern."""
    parts = value.split("/")
    first = 1 if parts[0].startswith("{needs.") else 0
    at = next((i for i in range(first, len(parts)) if _GLOB.search(parts[i])), None)
    if at is None:
        return value, ""
    return "/".join(parts[:at]) or ("/" if value.startswith("/") else "."), "/".join(parts[at:])


_GLOB_AT_ROOT = (
    "a glob input is mounted by the folder its pattern starts in, and this one starts at /, "
    "which is not mounted; name the folder the files are in, e.g. /data/vids/*.mp4"
)


def _input_paths(spec: dict[str, Any], action: Action) -> list[tuple[str, KeyPath, str, bool]]:
    """Each path an input of ``action`` names in ``spec``: its spec key, where it is, the
    path, and whether it is a glob pattern (``local_glob``). A key declared at a list index
    (``sources[0].dir``) names that field of every item of the list, and a value may be one
    path or a list of them (each item is one)."""
    found = []
    for declared in action.inputs:
        if declared.type not in PATH_TYPES:
            continue
        for path in every_item(spec, declared.path):
            value = lookup(spec, path)
            items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for index, item in items:
                where = path if index is None else (*path, index)
                if isinstance(item, str) and _is_path(item):
                    found.append((dotted(where), where, item, declared.type == "local_glob"))
    return found


def _refusal(host: str, target: str, *, pyxis: bool) -> str | None:
    """Why ``host`` cannot be mounted at ``target``, as for a ``mounts:`` entry (the target
    is made from the host's name, so the first reason is the one to act on)."""
    if pyxis and ("," in host or ":" in host):
        return "pyxis's --container-mounts cannot carry a path with ',' or ':'"
    refusals = mount_refusals(host, target)
    return refusals[0][1] if refusals else None


def _is_path(value: str) -> bool:
    return value not in ("", "???") and "://" not in value


def _host_path(value: str, folder: str) -> str:
    if value.startswith(("/", "{needs.")):
        return posixpath.normpath(value) if value.startswith("/") else value
    return posixpath.normpath(f"{folder}/{value}")


def _covered(host: str, mounts: list[dict[str, Any]]) -> str | None:
    """Where a ``mounts:`` entry holding ``host`` puts it in the container, if one does."""
    for mount in mounts:
        source = str(mount.get("source", ""))
        base = source.rstrip("/") or "/"
        target = str(mount.get("target", "")).rstrip("/")
        if host == base:
            return target or "/"
        prefix = base if base.endswith("/") else base + "/"
        if host.startswith(prefix):
            return f"{target}/{host[len(prefix) :]}"
    return None


def _new_target(host: str, used: set[str]) -> str:
    name = posixpath.basename(host.rstrip("/"))
    n = next(i for i in itertools.count() if f"{INPUTS_ROOT}/{i}" not in used)
    base = f"{INPUTS_ROOT}/{n}"
    used.add(base)
    return f"{base}/{name}" if name and "{" not in name and "}" not in name else base


def _set(spec: Any, path: KeyPath, value: str) -> None:
    node = spec
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
