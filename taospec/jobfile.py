"""A job file: one job, or a pipeline of named targets with defaults, needs and matrices.

:func:`load_jobfile` is the loader for both forms. A single-job file is a
pipeline of one target named after the file. In a pipeline, each job is
``defaults`` deep-merged with its own keys (mappings merge, lists and single
values replace), expanded once per ``matrix`` combination, checked whole
against the job schema, and linked to the targets it ``needs``. Problems
point at the line that set the offending value, in the job or in defaults.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from taospec import placeholders, schema
from taospec.diagnostics import JsonPath, Problem, SpecError, closest, raise_if_any, unique
from taospec.spec import Images, Job, build_job, check
from taospec.yamlsrc import MergedSource, Source, parse, read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from typing import Any

PIPELINE_KEYS = ("needs", "matrix", "inputs")
_MATRIX = re.compile(r"^(?P<base>[^\[\]]+)(?:\[(?P<pairs>[^\[\]]*)\])?$")


@dataclass(frozen=True, slots=True)
class Target:
    """One runnable target: its job, what it needs, and what its identity depends on.

    ``inputs`` are launcher-side paths, as written in the file (relative to it
    unless absolute); ``base`` is the name in the file, before matrix expansion.
    """

    name: str
    job: Job
    needs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    base: str = ""

    def input_paths(self) -> tuple[Path, ...]:
        """The inputs as paths on this machine."""
        folder = Path(self.job.file).parent
        return tuple(Path(p) if Path(p).is_absolute() else folder / p for p in self.inputs)


@dataclass(frozen=True, slots=True)
class JobFile:
    """Every target of one file, in file order (matrix expansions in value order)."""

    file: str
    targets: dict[str, Target]
    pipeline: bool

    def closure(self, wanted: tuple[str, ...] = ()) -> list[str]:
        """``wanted`` (default: all) and what they need, dependencies first."""
        chosen = self.select(wanted) if wanted else list(self.targets)
        order: list[str] = []
        for name in chosen:
            self._visit(name, order)
        return order

    def _visit(self, name: str, order: list[str]) -> None:
        if name in order:
            return
        for need in self.targets[name].needs:
            self._visit(need, order)
        order.append(name)

    def select(self, wanted: tuple[str, ...]) -> list[str]:
        """Target names for command-line names (a matrix base stands for its expansions)."""
        chosen: list[str] = []
        for name in wanted:
            matches = _matching(name, list(self.targets))
            if not matches:
                raise SpecError.single(self.file, f"has no target {name!r}{_hint(name, self)}")
            chosen += [m for m in matches if m not in chosen]
        return chosen

    def dependents(self, name: str) -> list[str]:
        """Every target that needs ``name``, directly or not."""
        out: list[str] = []
        for other in self.closure():
            if other not in out and (
                name in self.targets[other].needs
                or any(n in out for n in self.targets[other].needs)
            ):
                out.append(other)
        return out


def _hint(name: str, jobfile: JobFile) -> str:
    guess = closest(name, jobfile.targets)
    return f" (did you mean {guess!r}?)" if guess else f"; targets: {', '.join(jobfile.targets)}"


def load_jobfile(path: str | Path, images: Images | None = None) -> JobFile:
    """Read, validate and type every target of the file at ``path``.

    ``images`` resolves its versions keys (default: against the nearest
    versions.yaml, looked for when first needed).
    """
    file = Path(path)
    display = str(path)
    source = parse(read_text(file, display), display)
    images = images or Images(file)
    if "jobs" not in source.data:
        return _single(source, file, images)
    raise_if_any(schema.validate(source))
    return _pipeline(source, file, images)


def _single(source: Source, file: Path, images: Images) -> JobFile:
    problems = check(source, file, images=images)
    for key in ("needs", "matrix"):
        if key in source.data:
            problems.append(
                source.problem((key,), f"{key} belongs to a pipeline file's jobs:", key=True)
            )
    raise_if_any(problems)
    inputs = tuple(source.data.get("inputs", []))
    job = build_job(source, file, file.stem, images)
    return JobFile(str(file), {file.stem: Target(file.stem, job, (), inputs, file.stem)}, False)


# -- pipelines ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Expansion:
    name: str
    base: str
    data: dict[str, Any]
    values: tuple[tuple[str, str], ...]


def _pipeline(source: Source, file: Path, images: Images) -> JobFile:
    defaults = source.data.get("defaults") or {}
    expansions = [
        expansion
        for base, own in source.data["jobs"].items()
        for expansion in _expand(base, merge(defaults, own or {}))
    ]
    names = [e.name for e in expansions]
    problems: list[Problem] = []
    needs: dict[str, tuple[str, ...]] = {}
    for expansion in expansions:
        resolved, where = _resolve_needs(source, expansion, names)
        problems += where
        needs[expansion.name] = resolved
    problems += _cycles(source, expansions, needs)
    targets: dict[str, Target] = {}
    for expansion in expansions:
        data = {"version": source.data["version"], **_without_pipeline_keys(expansion.data)}
        merged = MergedSource(source.file, data, source.root, job_path=("jobs", expansion.base))
        known = (
            *placeholders.JOB_PLACEHOLDERS,
            *(f"needs.{n}.results_dir" for n in needs[expansion.name]),
        )
        found = check(merged, file, known, definition="job", images=images)
        problems += found
        if not found:
            job = build_job(merged, file, expansion.name, images)
            inputs = tuple(expansion.data.get("inputs", []))
            targets[expansion.name] = Target(
                expansion.name, job, needs[expansion.name], inputs, expansion.base
            )
    raise_if_any(unique(problems))
    return JobFile(str(file), targets, True)


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
        from decimal import Decimal  # only for floats Python writes with an exponent

        return format(Decimal(repr(value)), "f")
    return str(value)


def _expand(base: str, data: dict[str, Any]) -> Iterator[_Expansion]:
    matrix = data.get("matrix")
    if not isinstance(matrix, dict) or not matrix:
        yield _Expansion(base, base, data, ())
        return
    keys = list(matrix)
    for combo in itertools.product(*(matrix[k] for k in keys)):
        values = tuple((k, matrix_value(v)) for k, v in zip(keys, combo, strict=True))
        name = f"{base}[{','.join(f'{k}={v}' for k, v in values)}]"
        filled = _fill(data, {f"matrix.{k}": v for k, v in values})
        yield _Expansion(name, base, filled, values)


def _fill(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return placeholders.expand_known(value, values)
    if isinstance(value, dict):
        return {k: _fill(v, values) if k != "matrix" else v for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def _matching(name: str, names: list[str]) -> list[str]:
    """Targets a needs entry or command-line name stands for."""
    if name in names:
        return [name]
    parsed = _MATRIX.match(name)
    if not parsed:
        return []
    base = parsed.group("base")
    wanted = set(filter(None, (parsed.group("pairs") or "").split(",")))
    out = []
    for candidate in names:
        found = _MATRIX.match(candidate)
        if not found or found.group("base") != base:
            continue
        have = set(filter(None, (found.group("pairs") or "").split(",")))
        if wanted <= have:
            out.append(candidate)
    return out


def _resolve_needs(
    source: Source, expansion: _Expansion, names: list[str]
) -> tuple[tuple[str, ...], list[Problem]]:
    raw = expansion.data.get("needs") or []
    found: list[str] = []
    problems = []
    for index, need in enumerate(raw):
        matches = _matching(need, names)
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
    base_of = {e.name: e for e in expansions}
    problems: list[Problem] = []
    reported: set[frozenset[str]] = set()
    for start in needs:
        path = _cycle_from(start, needs)
        if path and frozenset(path) not in reported:
            reported.add(frozenset(path))
            first, second = path[0], path[1]
            raw = base_of[first].data.get("needs") or []
            index = next((i for i, n in enumerate(raw) if second in _matching(n, list(needs))), 0)
            where: JsonPath = ("jobs", base_of[first].base, "needs", index)
            problems.append(_at(source, where, "dependency cycle: " + " -> ".join(path)))
    return problems


def _cycle_from(start: str, needs: dict[str, tuple[str, ...]]) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    while stack:
        name, path = stack.pop()
        for need in needs.get(name, ()):
            if need == start:
                return [*path, start]
            if need not in path:
                stack.append((need, [*path, need]))
    return None
