"""The typed job model: what a loaded job file is, frozen.

A :class:`JobFile` holds its :class:`Target` objects in file order; each
target holds one :class:`Job`. :mod:`taospec.loader` is the only place that
makes them.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taospec.diagnostics import JsonPath, SpecError, closest
from taospec.errors import InvalidInput

MISSING = "???"
"""OmegaConf's "mandatory value not given yet": what ``init`` writes for a value the user
must still give."""

_MATRIX = re.compile(r"^(?P<base>[^\[\]]+)(?:\[(?P<pairs>[^\[\]]*)\])?$")


@dataclass(frozen=True, slots=True)
class Mount:
    """A bind mount: a host path seen by the job at ``target``.

    ``written_at`` is where the job file wrote ``source`` when no ``mounts:`` entry did:
    the spec key of the skill input the mount carries; ``template``, the skill's template
    that gave that key its value, when the job file did not.
    """

    source: str
    target: str
    readonly: bool = False
    written_at: JsonPath = ()
    template: str | None = None

    @classmethod
    def entry(cls, entry: Mapping[str, Any]) -> Mount:
        """The mount a (checked) ``mounts:`` entry writes."""
        return cls(entry["source"], entry["target"], entry.get("readonly", False))


@dataclass(frozen=True, slots=True)
class SpecInput:
    """A host path a skill's action reads, named by its spec key.

    ``host_path`` is absolute (placeholders such as ``{needs.prep.results_dir}`` kept);
    ``job_path`` is what the spec file holds: the path inside the container where the
    input is mounted, or ``host_path`` itself where nothing is mounted (``local``).
    """

    spec_key: str
    host_path: str
    job_path: str


@dataclass(frozen=True, slots=True)
class DockerOptions:
    """``docker:`` settings."""

    host: str | None = None
    shm_size: str = "8g"
    ipc: str = "host"
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BrevOptions:
    """``brev:`` settings."""

    instance: str
    ephemeral: bool = False


PYXIS = "pyxis"
"""How a Slurm job runs its container unless ``slurm.container`` says otherwise."""


def slurm_container(fields: Mapping[str, Any]) -> str:
    """How a job's fields, as written, run it on Slurm: ``slurm.container`` (``pyxis``,
    ``docker`` or ``none``) or its default; ``""`` for a job on another platform."""
    if fields.get("platform") != "slurm":
        return ""
    block = fields.get("slurm")
    return str(block.get("container", PYXIS)) if isinstance(block, dict) else PYXIS


@dataclass(frozen=True, slots=True)
class SlurmOptions:
    """``slurm:`` settings. The node count is the job's ``nodes``."""

    login: str | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    cpus_per_task: int | None = None
    container: str = PYXIS
    extra_sbatch: tuple[str, ...] = ()


CONTAINER_RESULTS = "/results"
"""Where a job in a container sees its results directory."""
SPEC_FILE = "stage/spec.yaml"
"""Where the job's spec file is written, under its results directory."""


@dataclass(frozen=True, slots=True)
class Job:
    """One validated job. ``command`` and ``spec`` still hold their placeholders."""

    file: str
    name: str
    network_arch: str
    action: str
    platform: str
    image: str
    versions_key: str | None
    command: tuple[str, ...]
    spec: Mapping[str, Any] | None
    gpus: tuple[int | str, ...] | str
    nodes: int
    storage_tier: str
    results_root: str
    mounts: tuple[Mount, ...]
    env_pass: tuple[str, ...]
    env_set: tuple[tuple[str, str], ...]
    user: str
    upload_excludes: tuple[str, ...]
    docker: DockerOptions
    brev: BrevOptions | None
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    skill: str | None = None
    """The skill the job file names, as written."""
    spec_inputs: tuple[SpecInput, ...] = ()
    notify: tuple[str, ...] = ()
    retry_max: int = 0
    """``retry: {max: N}``: retries ``taospec run`` submits for an ERR_INFRA failure."""
    gpus_free: int = 0
    """``gpus: {free: N}``: N GPU ids picked at submit by occupancy (``gpus`` is then ())."""

    def sees_results_at(self, results_dir: str) -> str:
        """``results_dir`` as the job itself sees it: at /results in a container (docker,
        brev, and slurm unless ``container: none``), where it is for a local process."""
        return results_seen_at(self.platform, self.slurm.container, results_dir)

    def mount_source_at(self, index: int) -> JsonPath:
        """Where the job file wrote the source of mount ``index``: its ``mounts:`` entry, or
        the spec key of the skill input the mount carries."""
        return self.mounts[index].written_at or ("mounts", index, "source")


def results_seen_at(platform: str, slurm_container: str, results_dir: str) -> str:
    """Where a job on ``platform`` sees ``results_dir`` (see :meth:`Job.sees_results_at`)."""
    if platform == "local" or (platform == "slurm" and slurm_container == "none"):
        return results_dir
    return CONTAINER_RESULTS


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


def input_files(path: Path) -> Iterator[tuple[str, Path]]:
    """The files the input ``path`` is made of, each with its name within the input: the
    file itself (named ""), or a folder's files, by sorted relative names.

    Links are followed, into folders too (a folder reached twice is walked once, so a
    link back up ends). Anything that is not a file or a folder, the input or a member
    of it (a broken link, a FIFO, a socket, a device), is refused with
    :class:`InvalidInput`: its content cannot be fingerprinted.
    """
    why = unreadable(path)
    if why:
        raise InvalidInput(why)
    if path.is_file():
        yield "", path
        return
    seen = {os.path.realpath(path)}
    for root, dirs, files in os.walk(path, followlinks=True, onerror=_unlisted):
        dirs[:] = [d for d in sorted(dirs) if _first_visit(Path(root, d), seen)]
        for name in dirs:  # a folder the walk could not list it would pass over
            if why := unreadable(Path(root, name)):
                raise InvalidInput(why)
        for name in sorted(files):
            member = Path(root, name)
            if why := unreadable(member):
                raise InvalidInput(why)
            yield member.relative_to(path).as_posix(), member


def _first_visit(folder: Path, seen: set[str]) -> bool:
    real = os.path.realpath(folder)
    if real in seen:
        return False
    seen.add(real)
    return True


def _unlisted(refused: OSError) -> None:
    raise InvalidInput(f"{refused.filename} cannot be listed ({refused.strerror})")


def unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be an input (None when it is a file or a folder this user may
    read)."""
    found = status(path)
    if isinstance(found, str):
        return f"{path} cannot be looked up on this machine ({found})"
    if found is not None and stat.S_ISREG(found.st_mode):
        return None if os.access(path, os.R_OK) else f"{path} is a file this user may not read"
    if found is not None and stat.S_ISDIR(found.st_mode):
        readable = os.access(path, os.R_OK | os.X_OK)
        return None if readable else f"{path} is a folder this user may not read"
    if path.is_symlink():
        return f"{path} is a broken symbolic link"
    if os.path.lexists(path):
        return f"{path} is neither a file nor a folder; inputs are files or folders"
    return f"{path} does not exist; inputs are files or folders on this machine"


def status(path: str | Path, *, follow: bool = True) -> os.stat_result | str | None:
    """What is at ``path`` (``follow``-ing a link there), None when nothing is, or why the
    kernel would not say: a name longer than the file system takes, a symlink loop, a folder
    on the way that this user may not enter (:func:`closed_folder`, named)."""
    try:
        return Path(path).stat(follow_symlinks=follow)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError as refused:
        closed = closed_folder(Path(path))
        return f"this user may not enter {closed}" if closed else refused.strerror or str(refused)
    except OSError as unanswered:
        return unanswered.strerror or str(unanswered)


def closed_folder(path: Path) -> Path | None:
    """The first folder on the way to ``path`` that this user may not enter (EACCES), None
    when there is none: each name on the way is looked up in turn, until one is refused."""
    for inner in (*reversed(path.parents), path)[1:]:
        try:
            inner.lstat()
        except PermissionError:
            return inner.parent
        except OSError:
            return None
    return None


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
            matches = matching(name, list(self.targets))
            if not matches:
                raise SpecError.single(self.file, f"has no target {name!r}{_hint(name, self)}")
            chosen += [m for m in matches if m not in chosen]
        return chosen


def _hint(name: str, jobfile: JobFile) -> str:
    guess = closest(name, jobfile.targets)
    return f" (did you mean {guess!r}?)" if guess else f"; targets: {', '.join(jobfile.targets)}"


def matching(name: str, names: list[str]) -> list[str]:
    """Targets a needs entry or command-line name stands for: a matrix target by some or
    all of its values, each as its name writes it or as a number of the same value
    (``lr=1e-4`` for ``lr=0.0001``) where none is written so."""
    if name in names:
        return [name]
    parsed = _MATRIX.match(name)
    if not parsed:
        return []
    base = parsed.group("base")
    wanted = set(filter(None, (parsed.group("pairs") or "").split(",")))
    out, alike = [], []
    for candidate in names:
        found = _MATRIX.match(candidate)
        if not found or found.group("base") != base:
            continue
        have = set(filter(None, (found.group("pairs") or "").split(",")))
        if wanted <= have:
            out.append(candidate)
        elif all(any(_same_value(pair, held) for held in have) for pair in wanted):
            alike.append(candidate)
    return out or alike


_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _same_value(pair: str, held: str) -> bool:
    """Whether ``key=value`` names a target's ``key=value``: as written, or as a number
    written another way (compared exactly, as decimals)."""
    if pair == held:
        return True
    key, _, value = pair.partition("=")
    their_key, _, theirs = held.partition("=")
    if key != their_key or not (_NUMBER.fullmatch(value) and _NUMBER.fullmatch(theirs)):
        return False
    from decimal import Decimal  # only a name that matches no target as written pays for it

    return Decimal(value) == Decimal(theirs)
