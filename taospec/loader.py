"""The one loader: read a job file, check it whole, and return it typed.

:func:`load_jobfile` reads single-job files and pipelines. A single-job file
is a pipeline of one target named after the file. In a pipeline, each job is
``defaults`` deep-merged with its own keys (mappings merge, lists and single
values replace), expanded once per ``matrix`` combination, checked whole
(:mod:`taospec.rules`), and linked to the targets it ``needs``. Every problem
is reported at once, at the line that set the offending value, in the job or
in defaults; nothing downstream sees a raw dict.
"""

from __future__ import annotations

import graphlib
import itertools
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from taospec import lint, placeholders
from taospec.diagnostics import (
    JsonPath,
    Problem,
    SpecError,
    closest,
    raise_if_any,
    shown_file,
    unique,
)
from taospec.job import (
    PYXIS,
    SPEC_FILE,
    BrevOptions,
    DockerOptions,
    Job,
    JobFile,
    Mount,
    SlurmOptions,
    Target,
    matching,
)
from taospec.jobids import id_like
from taospec.rules import (
    check,
    filled_by_plan,
    left_as_text,
    lost_braces,
    schema_problems,
    secret_literals,
    split_command,
)
from taospec.versions import Images
from taospec.yamlsrc import STDIN, MergedSource, Source, parse, read_text

if TYPE_CHECKING:
    from taospec.skilljob import Applied
    from taospec.skills import SkillFinder

PIPELINE_KEYS = ("needs", "matrix", "inputs")


def load_jobfile(path: str | Path, versions: str | Path | None = None) -> JobFile:
    """Read, validate and type every target of the file at ``path`` (``-``: standard input).

    Its versions keys resolve in ``versions`` when given, else in the nearest
    versions.yaml, looked for when first needed.
    """
    return load_located(path, versions)[0]


def shown_name(path: str) -> str:
    """How messages name the job file ``path`` (``-`` is ``<stdin>``)."""
    return "<stdin>" if path == STDIN else path


def load_located(
    path: str | Path, versions: str | Path | None = None
) -> tuple[JobFile, dict[str, Source]]:
    """:func:`load_jobfile`, with the source each target's values are located in."""
    given = Path(path)
    piped = is_piped(str(path))
    display = shown_name(str(path))
    file = Path("stdin") if piped else given
    images = None
    if versions is not None:
        if not Path(versions).is_file():
            raise SpecError.single(str(versions), "no such versions file (given by --versions)")
        images = Images.with_versions_file(file, Path(versions))
    text = read_text(given, display)
    return _load_text(text, display, file, images, shown_name(STDIN) if piped else display)


def is_piped(path: str) -> bool:
    """Whether the job file at ``path`` is a pipe with no path of its own: standard input
    (``-``, ``/dev/stdin``) or a process substitution (``/dev/fd/63``), whose path names a
    new pipe each time. Such a file is known as ``<stdin>`` and its one job as ``stdin``, so
    that its plan and what ``run`` remembers of it do not change with the pipe (a named
    FIFO keeps its own path)."""
    # os.path.exists answers False where Path.exists raises (a name longer than 255 bytes)
    return path == STDIN or not os.path.exists(os.path.realpath(path))  # noqa: PTH110


def load_jobfile_text(
    text: str, display: str, images: Images | None = None, skills: SkillFinder | None = None
) -> tuple[JobFile, dict[str, Source]]:
    """:func:`load_located` for the ``text`` of the job file at path ``display``.

    Nothing is read from disk but what ``images`` and ``skills`` read: a job
    file as it was at a git revision is given with an :class:`Images` whose
    reader finds the versions.yaml of that revision, and a finder of the skill
    folders that revision holds.
    """
    return _load_text(text, display, Path(display), images, skills=skills)


def _load_text(
    text: str,
    display: str,
    file: Path,
    images: Images | None,
    job_file: str | None = None,
    *,
    skills: SkillFinder | None = None,
) -> tuple[JobFile, dict[str, Source]]:
    """The job file ``text``, its problems shown at ``display``; each job's file is
    ``job_file`` (default: ``display``), and a single job is named after ``file``."""
    source = parse(text, display, tao_reads=_read_by_tao)
    lint.register(_passed_values(source.data))  # before any problem quotes a value
    images = images or Images(file)
    job_file = job_file or display
    if "jobs" not in source.data:
        return _single(source, file, images, job_file, skills)
    raise_if_any(schema_problems(source))
    return _pipeline(source, file, images, job_file, skills)


def _read_by_tao(path: JsonPath) -> bool:
    """Whether TAO reads the value at ``path`` of a job file: the spec, in a job or in
    defaults, and a matrix's values, which a spec takes with their type."""
    start = {"jobs": 2, "defaults": 1}.get(str(path[0]), 0) if path else 0
    return path[start : start + 1] in (("spec",), ("matrix",))


def _passed_values(data: Any) -> Iterator[str]:
    """This environment's values of the variables a parsed job file passes by name
    (``env.pass`` of the file, its defaults and its jobs), checked or not."""
    blocks = [data] if isinstance(data, dict) else []
    if blocks and isinstance(data.get("defaults"), dict):
        blocks.append(data["defaults"])
    if blocks and isinstance(data.get("jobs"), dict):
        blocks += [job for job in data["jobs"].values() if isinstance(job, dict)]
    for block in blocks:
        env = block.get("env")
        names = env.get("pass") if isinstance(env, dict) else None
        for name in names if isinstance(names, list) else []:
            if isinstance(name, str) and os.environ.get(name):
                yield os.environ[name]


def _single(
    source: Source, file: Path, images: Images, job_file: str, skills: SkillFinder | None
) -> tuple[JobFile, dict[str, Source]]:
    problems = check(source, images) + lost_braces(source) + left_as_text(source)
    named = _naming_problem(source, (), "the job file's name", file.stem)
    problems += [named] if named else []
    for key in ("needs", "matrix"):
        if key in source.data:
            problems.append(
                source.problem((key,), f"{key} belongs to a pipeline file's jobs:", key=True)
            )
    raise_if_any(problems)
    applied = _skill(source, file, images, placeholders.JOB_PLACEHOLDERS, skills, warned=set())
    inputs = tuple(source.data.get("inputs", []))
    name = shown_file(file.stem)  # one line wherever it is shown, whatever the file's name
    job = build_job(source, name, images, applied, job_file)
    target = Target(name, job, (), inputs, name)
    raise_if_any(_results_problems(source, {name: target}, pipeline=False))
    return JobFile(str(file), {name: target}, False), {name: source}


class _Expansion(NamedTuple):
    name: str
    base: str
    data: dict[str, Any]
    values: tuple[tuple[str, str], ...]


MAX_TARGETS = 1000
"""A pipeline expands to at most this many targets (a matrix multiplies quickly)."""


NAME_MARKS = (",", "=", "[", "]")
"""What a target name is made of around its matrix values: a value holding one could name
two combinations alike (``a[x=1,y=2]``) or a target a ``needs`` entry cannot tell apart."""
_MARK_MESSAGE = (
    "{key}={value!r} cannot be a matrix value: the value names its target (name[{key}=...]), "
    "where ',', '=', '[' and ']' separate names and values; write it without them"
)


_CONTROL_MESSAGE = (
    "{key}={value!r} cannot be a matrix value: the value names its target (name[{key}=...]), "
    "which taospec prints on one line and you name on the command line; write it without a "
    "control character (a newline, a tab)"
)


_NAMING_MESSAGE = (
    "{what} holds what looks like a credential ({found}), and it names a target, which every "
    "plan, listing and state file shows: name it otherwise"
)


def _naming_problem(
    source: Source, where: JsonPath, what: str, text: str, *, key: bool = True
) -> Problem | None:
    """A credential in what names a target (a job's name, a matrix key or value)."""
    found = secret_literals(text)
    if not found:
        return None
    return source.problem(where, _NAMING_MESSAGE.format(what=what, found=found[0]), key=key)


def _matrix_problems(source: Source, defaults: Mapping[str, Any]) -> list[Problem]:
    """Duplicate matrix values, names that hold a credential, and matrices past
    :data:`MAX_TARGETS`, before any expansion."""
    problems: list[Problem] = []
    total = 0
    for base, own in source.data["jobs"].items():
        named = _naming_problem(source, ("jobs", base), "the job's name", str(base))
        problems += [named] if named else []
        merged = merge(defaults, own or {})
        matrix = merged.get("matrix")
        if not isinstance(matrix, dict):
            total += 1
            continue
        count = 1
        for key, values in matrix.items():
            values = values if isinstance(values, list) else []
            count *= len(values)
            named = _naming_problem(source, ("jobs", base, "matrix", key), "the matrix key", key)
            problems += [named] if named else []
            first: set[str] = set()
            for index, value in enumerate(matrix_value(v) for v in values):
                where: JsonPath = ("jobs", base, "matrix", key, index)
                if (
                    named := _naming_problem(source, where, "the matrix value", value, key=False)
                ) is not None:
                    problems.append(named)
                elif any(mark in value for mark in NAME_MARKS):
                    problems.append(_at(source, where, _MARK_MESSAGE.format(key=key, value=value)))
                elif any(char < " " or char == "\x7f" for char in value):
                    said = _CONTROL_MESSAGE.format(key=key, value=value)
                    problems.append(_at(source, where, said))
                elif value not in first:
                    first.add(value)
                else:
                    problems.append(
                        _at(source, where, f"{key}={value} is listed twice; each value runs once")
                    )
        total += count
        problems += _matrix_in_scripts(source, base, matrix, _words(merged))
        problems += _matrix_in_scripts(source, base, matrix, list(_notify(merged.get("notify"))))
        if count > MAX_TARGETS:
            problems.append(
                _at(
                    source,
                    ("jobs", base, "matrix"),
                    f"expands to {count:,} targets; at most {MAX_TARGETS:,} are allowed: "
                    "split the sweep into several files or list fewer values",
                )
            )
    if total > MAX_TARGETS and not problems:
        problems.append(
            source.problem(
                ("jobs",),
                f"the jobs expand to {total:,} targets; at most {MAX_TARGETS:,} are allowed",
            )
        )
    return problems


def _pipeline(
    source: Source, file: Path, images: Images, job_file: str, skills: SkillFinder | None
) -> tuple[JobFile, dict[str, Source]]:
    defaults = source.data.get("defaults") or {}
    raise_if_any(_matrix_problems(source, defaults))
    expansions = [
        expansion
        for base, own in source.data["jobs"].items()
        for expansion in _expand(base, merge(defaults, own or {}))
    ]
    names = [e.name for e in expansions]
    written = [  # each job as written, before its matrix values go in with braces doubled
        MergedSource(source.file, merge(defaults, own or {}), source.root, ("jobs", base))
        for base, own in source.data["jobs"].items()
    ]
    problems = [problem for job in written for problem in lost_braces(job) + left_as_text(job)]
    needs: dict[str, tuple[str, ...]] = {}
    for expansion in expansions:
        resolved, where = _resolve_needs(source, expansion, names)
        problems += where
        needs[expansion.name] = resolved
    problems += _cycles(source, expansions, needs)
    datas = {e.name: e.data for e in expansions}
    targets: dict[str, Target] = {}
    sources: dict[str, Source] = {}
    warned: set[str] = set()
    for expansion in expansions:
        data = {"version": source.data["version"], **_without_pipeline_keys(expansion.data)}
        merged = MergedSource(source.file, data, source.root, job_path=("jobs", expansion.base))
        known_needs = needs[expansion.name]
        known = (
            *placeholders.JOB_PLACEHOLDERS,
            *(f"needs.{n}.results_dir" for n in known_needs),
        )
        upstream = {
            f"needs.{need}.results_dir": _longest_results(datas[need])
            for need in needs[expansion.name]
        }
        found = check(merged, images, known, definition="job", upstream=upstream)
        problems += found
        applied = None
        if not found and "skill" in merged.data:
            try:
                applied = _skill(merged, file, images, known, skills, warned=warned)
            except SpecError as exc:
                problems += exc.problems
                continue
        if not found:
            job = build_job(merged, expansion.name, images, applied, job_file)
            inputs = tuple(expansion.data.get("inputs", []))
            targets[expansion.name] = Target(
                expansion.name, job, needs[expansion.name], inputs, expansion.base
            )
            sources[expansion.name] = merged
    problems += _results_problems(source, targets, pipeline=True)
    raise_if_any(unique(problems))
    return JobFile(str(file), targets, True), sources


def _results_problems(
    source: Source, targets: Mapping[str, Target], *, pipeline: bool
) -> list[Problem]:
    """Results directories where the command or a mount cannot use them.

    A job's own ``{results_dir}`` and ``{config_path}`` are known but for the id,
    as the job sees them (:meth:`Job.sees_results_at`); ``{needs.X.results_dir}``
    is X's ``results_root`` and an id. An id is plain text, so the shape is known
    now: a ``sh -c`` script would read any but plain text as syntax, and a mount
    source holding ':' (or ',', for pyxis) cannot be mounted.
    """
    problems = []
    for target in targets.values():
        job = target.job
        where: JsonPath = ("jobs", target.base) if pipeline else ()
        seen = job.sees_results_at(_results_dir(job.results_root, "id"))
        shown_seen = job.sees_results_at(_results_dir(job.results_root, "$JOB_ID"))
        roots = {need: targets[need].job.results_root for need in target.needs if need in targets}
        upstream = {
            "results_dir": seen,
            "config_path": f"{seen}/{SPEC_FILE}",
            **{f"needs.{need}.results_dir": f"{root}/id" for need, root in roots.items()},
        }
        shown = {
            "results_dir": shown_seen,
            "config_path": f"{shown_seen}/{SPEC_FILE}",
            **{f"needs.{need}.results_dir": f"{root}/<id>" for need, root in roots.items()},
        }
        pyxis = job.platform == "slurm" and job.slurm.container == PYXIS
        for index, mount in enumerate(job.mounts):
            for name in placeholders.names(mount.source):
                value = upstream.get(name, "")
                if name.startswith("needs.") and (":" in value or (pyxis and "," in value)):
                    problems.append(
                        _at(
                            source,
                            (*where, *job.mount_source_at(index)),
                            f"{{{name}}} is a folder under {value.rsplit('/', 1)[0]!r}, "
                            "whose ':' or ',' the container's mount option would split; give "
                            f"target {name[len('needs.') : -len('.results_dir')]} a "
                            "results_root without them",
                        )
                    )
        for sentence in placeholders.in_scripts(job.command, upstream, shown):
            problems.append(
                _at(source, (*where, "command"), sentence)
                if pipeline
                else source.problem(("command",), sentence)
            )
    return problems


def _longest_results(data: Mapping[str, Any]) -> str:
    """The longest results directory the job in ``data`` can have: its id as minted."""
    root = data.get("results_root")
    return _results_dir(
        root if isinstance(root, str) else "", id_like(data.get("network_arch"), data.get("action"))
    )


def _results_dir(root: str, job_id: str) -> str:
    return f"{root.rstrip('/')}/{job_id}"


def merge(base: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``own`` over ``base``: mappings merge key by key; lists and single values replace."""
    out = dict(base)
    for key, value in own.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _without_pipeline_keys(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in PIPELINE_KEYS}


def matrix_value(value: object) -> str:
    """A matrix value as it appears in target names and ``{matrix.*}`` (0.00005, not 5e-05)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and "e" in repr(value):
        from decimal import Decimal  # only such a float pays for the module

        return format(Decimal(repr(value)), "f")
    return str(value)


def _expand(base: str, data: dict[str, Any]) -> Iterator[_Expansion]:
    matrix = data.get("matrix")
    if not isinstance(matrix, dict) or not matrix:
        yield _Expansion(base, base, data, ())
        return
    keys = list(matrix)
    # a value is filled into each word of the command, never into the text it is split from
    words = _words(data) if isinstance(data.get("command"), str) else None
    for combo in itertools.product(*(matrix[k] for k in keys)):
        values = tuple((k, matrix_value(v)) for k, v in zip(keys, combo, strict=True))
        name = f"{base}[{','.join(f'{k}={v}' for k, v in values)}]"
        named = {f"matrix.{k}": v for k, v in values}
        typed = {  # text goes in as every value does, its braces doubled
            f"{{matrix.{k}}}": v for k, v in zip(keys, combo, strict=True) if not isinstance(v, str)
        }
        filled = _fill(data, named, typed=typed)
        if words is not None and filled["command"] != data["command"]:
            filled["command"] = _fill(words, named, ("command",))
        yield _Expansion(name, base, filled, values)


def _fill(
    value: Any,
    values: Mapping[str, str],
    path: JsonPath = (),
    typed: Mapping[str, object] | None = None,
) -> Any:
    """``value`` (the job's data at ``path``) with its ``{matrix.*}`` placeholders filled.

    A value arrives as written: where the plan fills placeholders later
    (:func:`~taospec.rules.filled_by_plan`), its braces are doubled as it goes in, so that
    ``{job_id}`` or ``{{x}}`` in a matrix value is not read a second time. A value of the
    spec that is one placeholder and nothing else becomes the matrix value as YAML read it
    (``typed``: the values not text, by placeholder), so that ``lr: "{matrix.lr}"`` is a
    number when the value is one; in longer text the value is text.
    """
    if isinstance(value, str) and path[:1] == ("spec",) and typed and value in typed:
        return typed[value]
    if isinstance(value, str):
        if filled_by_plan(path):
            values = {name: placeholders.escape(text) for name, text in values.items()}
        return placeholders.expand_known(value, values)
    if isinstance(value, dict):
        return {
            k: v if (*path, k) == ("matrix",) else _fill(v, values, (*path, k), typed)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_fill(v, values, (*path, i), typed) for i, v in enumerate(value)]
    return value


def _resolve_needs(
    source: Source, expansion: _Expansion, names: list[str]
) -> tuple[tuple[str, ...], list[Problem]]:
    raw = expansion.data.get("needs") or []
    found: list[str] = []
    problems = []
    for index, need in enumerate(raw):
        matches = matching(need, names)
        where: JsonPath = ("jobs", expansion.base, "needs", index)
        if not matches:
            guess = closest(need, names)
            hint = f" (did you mean {guess!r}?)" if guess else f"; targets: {', '.join(names)}"
            problems.append(_at(source, where, f"unknown target {need!r}{hint}"))
        if expansion.name in matches:
            problems.append(_at(source, where, f"{expansion.name} cannot need itself"))
        found += [m for m in matches if m not in found and m != expansion.name]
    return tuple(found), problems


def _at(source: Source, path: JsonPath, message: str) -> Problem:
    """A problem at ``path``, or at ``defaults`` when the job inherited the value."""
    if _has(source.data, path):
        return source.problem(path, message)
    return source.problem(("defaults", *path[2:]), message)


def _has(data: Any, path: JsonPath) -> bool:
    for part in path:
        in_mapping = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if in_mapping or in_list:
            data = data[part]
        else:
            return False
    return True


def _cycles(
    source: Source, expansions: list[_Expansion], needs: dict[str, tuple[str, ...]]
) -> list[Problem]:
    """A dependency cycle among the targets, at the needs entry that closes it."""
    try:
        graphlib.TopologicalSorter(needs).prepare()
    except graphlib.CycleError as exc:
        path = list(reversed(exc.args[1]))  # each target, then one it needs
    else:
        return []
    first, second = path[0], path[1]
    base_of = {e.name: e for e in expansions}
    raw = base_of[first].data.get("needs") or []
    index = next((i for i, n in enumerate(raw) if second in matching(n, list(needs))), 0)
    where: JsonPath = ("jobs", base_of[first].base, "needs", index)
    return [_at(source, where, "dependency cycle: " + " -> ".join(path))]


def _skill(
    source: Source,
    file: Path,
    images: Images,
    known: tuple[str, ...],
    skills: SkillFinder | None,
    *,
    warned: set[str],
) -> Applied | None:
    """What the job's ``skill:`` adds (None without one, its folder found by ``skills``,
    default on disk); its warnings go to stderr, each once (``warned``: those shown)."""
    if "skill" not in source.data:
        return None
    from taospec.skilljob import apply_skill  # the skill bank's code, for jobs that name one
    from taospec.skills import find_skill

    applied, problems = apply_skill(
        source, file, images, known, os.environ, find=skills or find_skill
    )
    raise_if_any(problems)
    assert applied is not None
    for warning in map(str, applied.warnings):  # each part redacted as what it is
        if warning not in warned:  # a matrix's jobs share their base's warnings
            warned.add(warning)
            print(warning, file=sys.stderr)
    return applied


def build_job(source: Source, name: str, images: Images, applied: Applied | None, file: str) -> Job:
    """The typed job for a checked ``source`` (its data already merged and expanded),
    completed by its skill when ``applied`` holds what the skill adds; ``file`` is the job
    file it came from (see :func:`_load_text`)."""
    data = applied.data if applied is not None else source.data
    image = data["image"]
    versions_key = image["versions_key"] if isinstance(image, dict) else None
    if applied is not None and applied.versions_key is not None:
        versions_key = None
    env = data.get("env", {})
    docker = data.get("docker", {})
    brev = data.get("brev")
    gpus = data.get("gpus", [])
    if isinstance(gpus, list):
        gpus = tuple(map(_whole, gpus))
    return Job(
        file=file,
        name=name,
        network_arch=data["network_arch"],
        action=data["action"],
        platform=data.get("platform", "local"),
        image=images.resolve(versions_key) if versions_key else image,
        versions_key=applied.versions_key if applied and applied.versions_key else versions_key,
        command=_command(data["command"]),
        spec=_freeze(data["spec"]) if "spec" in data else None,
        gpus=() if isinstance(gpus, dict) else gpus,
        nodes=_whole(data.get("nodes", 1)),
        storage_tier=data.get("storage_tier", "A"),
        results_root=data["results_root"],
        mounts=(
            applied.mounts
            if applied is not None
            else tuple(Mount.entry(m) for m in data.get("mounts", []))
        ),
        env_pass=tuple(env.get("pass", [])),
        env_set=tuple(sorted((k, _env_value(v)) for k, v in env.get("set", {}).items())),
        user=str(data.get("user", "host")),
        upload_excludes=tuple(data.get("upload_excludes", [])),
        docker=DockerOptions(
            host=docker.get("host"),
            shm_size=docker.get("shm_size", "8g"),
            ipc=docker.get("ipc", "host"),
            extra_args=tuple(docker.get("extra_args", [])),
        ),
        brev=BrevOptions(brev["instance"], brev.get("ephemeral", False)) if brev else None,
        slurm=_slurm_options(data.get("slurm", {})),
        skill=data.get("skill"),
        spec_inputs=applied.spec_inputs if applied is not None else (),
        notify=_notify(data.get("notify")),
        retry_max=_whole(data.get("retry", {}).get("max", 0)),
        gpus_free=_whole(gpus.get("free", 0)) if isinstance(gpus, dict) else 0,
    )


def _whole(value: Any) -> Any:
    """An integer the file may spell as a float (JSON Schema counts 2.0 as an integer),
    written out as 2, as every tool the plan runs reads it."""
    return int(value) if isinstance(value, float) else value


def _notify(value: str | list[str] | None) -> tuple[str, ...]:
    """``notify:`` as an argument list: a string runs under ``sh -c``, a list as given."""
    if value is None:
        return ()
    return ("sh", "-c", value) if isinstance(value, str) else tuple(value)


def _matrix_in_scripts(
    source: Source, base: str, matrix: Mapping[str, Any], words: list[str] | None
) -> list[Problem]:
    """Matrix values that a ``sh -c`` script of ``words`` (a command) would read as syntax."""
    problems = []
    for key, values in matrix.items():
        name = f"matrix.{key}"
        for index, value in enumerate(values if isinstance(values, list) else []):
            for sentence in placeholders.in_scripts(words or [], {name: matrix_value(value)}):
                problems.append(_at(source, ("jobs", base, "matrix", key, index), sentence))
    return problems


def _words(data: Mapping[str, Any]) -> list[str] | None:
    """The command's words with their placeholders, when it can be split (the rules say why not)."""
    command = data.get("command")
    if isinstance(command, list):
        return [str(word) for word in command]
    if not isinstance(command, str):
        return None
    try:
        return list(split_command(command)) or None
    except ValueError:
        return None


def _slurm_options(block: Mapping[str, Any]) -> SlurmOptions:
    return SlurmOptions(
        login=block.get("login"),
        partition=block.get("partition"),
        account=block.get("account"),
        time=block.get("time"),
        cpus_per_task=_whole(block.get("cpus_per_task")),
        container=block.get("container", PYXIS),
        extra_sbatch=tuple(block.get("extra_sbatch", [])),
    )


def _command(command: str | list[str]) -> tuple[str, ...]:
    return split_command(command) if isinstance(command, str) else tuple(command)


def _env_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value
