"""Loading a job file: parse, validate, and return a frozen, typed :class:`Job`.

:func:`load_job` is the one way into taospec for a spec. It reads the file
(:mod:`taospec.yamlsrc`), checks it against the JSON Schema
(:mod:`taospec.schema`), applies the rules a schema cannot express (GPU
counts, dotted spec keys, secrets in ``env.set``, placeholders, the image's
versions key), and reports every problem at once. Nothing downstream sees a
raw dict.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from taospec import placeholders, schema
from taospec.diagnostics import JsonPath, Problem, SpecError, unique
from taospec.yamlsrc import Source, parse_shared, read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from typing import Any

GPU_COUNT_MESSAGE = (
    "GPUs are chosen by id, not by count: a count always lands on the first devices, so on a "
    "shared host every job piles onto GPU 0 while the others sit idle. List the ids to use, "
    "e.g. [0, 1] (see nvidia-smi), or write 'all'"
)
RESULTS_TARGET = "/results"
MULTI_NODE_REFUSALS = {
    "brev": (
        "multi-node is not supported on Brev: instances are independent machines with no "
        "cross-instance coordination; use one instance with several GPUs (gpus: [0, 1, ...]) "
        "or a cluster platform"
    ),
    "docker": "a Docker host is one node; use several GPUs on it, or a cluster platform",
    "local": "a local process runs on this one machine; use a cluster platform for more nodes",
}


VERSIONS_FILE = "versions.yaml"


@dataclass(frozen=True, slots=True)
class Mount:
    """A bind mount: a host path seen by the job at ``target``."""

    source: str
    target: str
    readonly: bool = False


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


@dataclass(frozen=True, slots=True)
class SlurmOptions:
    """``slurm:`` settings. The node count is the job's ``nodes``."""

    login: str | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    cpus_per_task: int | None = None
    container: str = "pyxis"
    extra_sbatch: tuple[str, ...] = ()


_NO_SLURM = SlurmOptions()


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
    slurm: SlurmOptions = _NO_SLURM


def load_job(path: str | Path) -> Job:
    """The one job of a single-job file (or of a pipeline with one target)."""
    from taospec.jobfile import load_jobfile

    jobfile = load_jobfile(path)
    if len(jobfile.targets) != 1:
        names = ", ".join(jobfile.targets)
        raise SpecError.single(
            str(path),
            f"is a pipeline of {len(jobfile.targets)} targets ({names}); name the target to use",
        )
    return next(iter(jobfile.targets.values())).job


def check(
    source: Source,
    file: Path,
    known: tuple[str, ...] = placeholders.JOB_PLACEHOLDERS,
    definition: str | None = None,
    images: Images | None = None,
) -> list[Problem]:
    """Every problem in ``source``: schema violations first, then the rules beyond it.

    ``known`` are the placeholders its values may use; ``definition`` names
    the schema's ``$defs`` entry to check against (default: the whole file).
    ``images`` resolves versions keys (pass the one :func:`build_job` gets).
    """
    problems = [_reword(source, p) for p in schema.validate(source, definition)]
    problems += list(_rules(source, images or Images(file), known))
    return unique(problems)


def _reword(source: Source, problem: Problem) -> Problem:
    gpus = source.data.get("gpus")
    if problem.path[:1] == ("gpus",) and (isinstance(gpus, int) and not isinstance(gpus, bool)):
        return source.problem(("gpus",), GPU_COUNT_MESSAGE)
    return problem


def _rules(source: Source, images: Images, known: tuple[str, ...]) -> Iterator[Problem]:
    data = source.data
    yield from _nul_bytes(source, data, ())
    yield from _command_rules(source, known)
    yield from _spec_rules(source, known)
    yield from _env_rules(source, known)
    yield from _mount_rules(source, known)
    yield from _platform_rules(source)
    yield from _image_rules(source, images)


def _nul_bytes(source: Source, value: Any, path: JsonPath) -> Iterator[Problem]:
    if isinstance(value, str) and "\x00" in value:
        yield source.problem(path, "contains a NUL character, which no process argument can hold")
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _nul_bytes(source, child, (*path, str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _nul_bytes(source, child, (*path, index))


def _strings(value: Any, path: JsonPath) -> Iterator[tuple[JsonPath, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _strings(child, (*path, str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _strings(child, (*path, index))


def _placeholder_rules(
    source: Source, value: Any, path: JsonPath, known: tuple[str, ...]
) -> Iterator[Problem]:
    for where, text in _strings(value, path):
        for message in placeholders.unknown(text, known):
            yield source.problem(where, message)


def _command_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    command = source.data.get("command")
    if isinstance(command, str):
        try:
            words = split_command(command)
        except ValueError as exc:
            yield source.problem(("command",), f"cannot be split into words: {exc}")
            return
        if command and not words:
            yield source.problem(("command",), "is blank; say what the job runs")
    if isinstance(command, str | list):
        yield from _placeholder_rules(source, command, ("command",), known)


def _spec_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    spec = source.data.get("spec")
    if not isinstance(spec, dict):
        return
    yield from _dotted_keys(source, spec, ("spec",))
    yield from _placeholder_rules(source, spec, ("spec",), known)


def _dotted_keys(source: Source, value: Any, path: JsonPath) -> Iterator[Problem]:
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                yield source.problem((*path, str(key)), f"key {key!r} must be text", key=True)
            elif "." in key:
                nested = ": {".join(key.split(".")) + ": ...}" + "}" * (key.count(".") - 1)
                yield source.problem(
                    (*path, key),
                    f"dotted key {key!r} is ambiguous in a TAO spec; nest it instead ({nested})",
                    key=True,
                )
            yield from _dotted_keys(source, child, (*path, str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _dotted_keys(source, child, (*path, index))


def _env_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    from taospec import lint

    env = source.data.get("env")
    if not isinstance(env, dict):
        return
    passed: list[Any] = env["pass"] if isinstance(env.get("pass"), list) else []
    values: dict[Any, Any] = env["set"] if isinstance(env.get("set"), dict) else {}
    for name, value in values.items():
        path = ("env", "set", name)
        if name in passed:
            yield source.problem(path, f"{name} is both passed and set; keep one", key=True)
        if lint.is_secret_name(str(name)):
            yield source.problem(
                path,
                f"{name} looks like a secret; list it under env.pass so its value comes from "
                "the launcher's environment and is never written down",
                key=True,
            )
        elif isinstance(value, str) and lint.looks_like_secret_value(value):
            yield source.problem(
                path,
                f"the value of {name} looks like a credential; pass it by name under env.pass",
            )
        if isinstance(value, str):
            yield from _placeholder_rules(source, value, path, known)


def _mount_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    mounts = source.data.get("mounts")
    if not isinstance(mounts, list):
        return
    upstream = tuple(name for name in known if name.startswith("needs."))
    seen: dict[str, int] = {}
    for index, mount in enumerate(mounts):
        if isinstance(mount, dict) and isinstance(mount.get("source"), str):
            where = ("mounts", index, "source")
            yield from _placeholder_rules(source, mount["source"], where, upstream)
        if not isinstance(mount, dict) or not isinstance(mount.get("target"), str):
            continue
        target = mount["target"].rstrip("/") or "/"
        path = ("mounts", index, "target")
        if target == RESULTS_TARGET:
            yield source.problem(path, "/results is where the job's results directory is mounted")
        elif target in seen:
            yield source.problem(path, f"{target} is already the target of mounts[{seen[target]}]")
        else:
            seen[target] = index


def _platform_rules(source: Source) -> Iterator[Problem]:
    data = source.data
    platform = data.get("platform", "local")
    if platform == "brev" and "brev" not in data:
        yield source.problem(("platform",), "platform brev needs a brev: block naming the instance")
    nodes = data.get("nodes", 1)
    if isinstance(nodes, int) and nodes > 1 and platform in MULTI_NODE_REFUSALS:
        yield source.problem(("nodes",), MULTI_NODE_REFUSALS[platform])
    if platform == "local" and data.get("mounts"):
        yield source.problem(
            ("mounts",), "a local process sees the host's files directly; mounts need a container"
        )
    if platform == "local" and data.get("gpus") == "all":
        yield source.problem(
            ("gpus",), "a local process sees every GPU already; list ids to restrict it"
        )
    if platform == "slurm":
        yield from _slurm_rules(source)


SLURM_OWN_OPTIONS = {"--job-name": "-J", "--output": "-o", "--chdir": "-D", "--nodes": "-N",
                     "--ntasks-per-node": "", "--ntasks": "-n", "--parsable": ""}  # fmt: skip
"""sbatch options the slurm platform sets itself (the job name is how a lost answer is found)."""
SBATCH_PATH = re.compile(r"/[A-Za-z0-9_@+=:,./-]*")
"""A path an #SBATCH line can carry: sbatch reads those lines itself, not through a shell."""


def _slurm_rules(source: Source) -> Iterator[Problem]:
    """What a Slurm job needs beyond the schema."""
    data = source.data
    if data.get("gpus") == "all":
        yield source.problem(
            ("gpus",),
            "Slurm allocates GPUs by count: list one id per GPU the job needs on each node "
            "(e.g. [0, 1] for two); Slurm picks which",
        )
    if "user" in data and data["user"] != "host":
        yield source.problem(
            ("user",),
            "a Slurm job runs as the account that submits it (the user in slurm.login, or "
            "you); leave user: out",
        )
    root = data.get("results_root")
    if isinstance(root, str) and not SBATCH_PATH.fullmatch(root):
        yield source.problem(
            ("results_root",),
            "the sbatch script names its output file and working directory in #SBATCH lines, "
            "which sbatch reads without a shell: use only letters, digits and _@+=:,./- here",
        )
    block = data.get("slurm") if isinstance(data.get("slurm"), dict) else {}
    yield from _extra_sbatch_rules(source, block.get("extra_sbatch"))
    if block.get("container", "pyxis") == "pyxis":
        yield from _pyxis_mount_rules(source)


def _extra_sbatch_rules(source: Source, lines: Any) -> Iterator[Problem]:
    """extra_sbatch may not take over the options taospec sets."""
    owned = {flag for pair in SLURM_OWN_OPTIONS.items() for flag in pair if flag}
    for index, line in enumerate(lines if isinstance(lines, list) else []):
        flag = re.match(r"--[A-Za-z-]+|-[A-Za-z]", line) if isinstance(line, str) else None
        if flag and flag.group(0) in owned:
            yield source.problem(
                ("slurm", "extra_sbatch", index),
                f"{flag.group(0)} is set by taospec: the job is named after its id, writes its "
                "output into its results directory and runs one task per node",
            )


def _pyxis_mount_rules(source: Source) -> Iterator[Problem]:
    """Pyxis separates mounts with ',' and their fields with ':'."""
    mounts = source.data.get("mounts")
    for index, mount in enumerate(mounts if isinstance(mounts, list) else []):
        for key in ("source", "target"):
            value = mount.get(key) if isinstance(mount, dict) else None
            if isinstance(value, str) and ("," in value or ":" in value):
                yield source.problem(
                    ("mounts", index, key),
                    "pyxis's --container-mounts cannot carry a path with ',' or ':'",
                )


def _image_rules(source: Source, images: Images) -> Iterator[Problem]:
    image = source.data.get("image")
    if isinstance(image, dict) and isinstance(image.get("versions_key"), str):
        try:
            images.resolve(image["versions_key"])
        except LookupError as exc:
            yield source.problem(("image", "versions_key"), str(exc))


class Images:
    """The image each versions key names for one job file, each key looked up once.

    Checking a job and building it both need its image; one :class:`Images`
    per load finds and reads versions.yaml once for both (and once for every
    target of a pipeline), so they also see the same bytes.
    """

    def __init__(self, spec_file: Path) -> None:
        self.spec_file = spec_file
        self._found: dict[str, tuple[bool, str]] = {}
        self._versions: tuple[Path | None] | None = None

    @classmethod
    def with_versions_file(cls, spec_file: Path, versions_file: Path | None) -> Images:
        """Images for ``spec_file`` whose nearest versions.yaml was already found (or not)."""
        images = cls(spec_file)
        images._versions = (versions_file,)
        return images

    def resolve(self, key: str) -> str:
        """:func:`resolve_versions_key` for this file (raises its LookupError again)."""
        found = self._found.get(key)
        if found is None:
            if self._versions is None:
                self._versions = (find_versions_file(self.spec_file),)
            try:
                found = (True, image_in(self._versions[0], key, self.spec_file))
            except LookupError as exc:
                found = (False, str(exc))
            self._found[key] = found
        resolved, text = found
        if not resolved:
            raise LookupError(text)
        return text


def find_versions_file(start: Path) -> Path | None:
    """The nearest ``versions.yaml`` next to ``start`` or in a parent directory.

    A job file read from a pipe or a process substitution has no folder of its
    own: the search starts in the current directory.
    """
    real = Path(os.path.realpath(start))
    folder = real.parent if real.is_file() else Path.cwd()
    for candidate in (folder, *folder.parents):
        found = candidate / VERSIONS_FILE
        if found.is_file():
            return found
    return None


def resolve_versions_key(key: str, spec_file: Path) -> str:
    """The image URI that ``key`` names in the nearest versions.yaml."""
    return image_in(find_versions_file(spec_file), key, spec_file)


def image_in(versions: Path | None, key: str, spec_file: Path) -> str:
    """The image URI that ``key`` names in ``versions``, the versions.yaml ``spec_file`` uses."""
    if versions is None:
        raise LookupError(
            f"image key {key!r} needs a versions.yaml next to {spec_file} or in a parent "
            "directory, and there is none"
        )
    node: Any = parse_shared(read_text(versions, str(versions)), str(versions)).data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise LookupError(f"{versions} has no key {key!r}")
        node = node[part]
    if not isinstance(node, str) or not node:
        raise LookupError(f"{versions}: {key!r} is not an image reference")
    return node


def build_job(source: Source, file: Path, name: str, images: Images | None = None) -> Job:
    """The typed job for a checked ``source`` (its data already merged and expanded)."""
    data = source.data
    image = data["image"]
    versions_key = image["versions_key"] if isinstance(image, dict) else None
    env = data.get("env", {})
    docker = data.get("docker", {})
    brev = data.get("brev")
    gpus = data.get("gpus", [])
    return Job(
        file=source.file,
        name=name,
        network_arch=data["network_arch"],
        action=data["action"],
        platform=data.get("platform", "local"),
        image=(images or Images(file)).resolve(versions_key) if versions_key else image,
        versions_key=versions_key,
        command=_command(data["command"]),
        spec=_freeze(data["spec"]) if "spec" in data else None,
        gpus=gpus if isinstance(gpus, str) else tuple(gpus),
        nodes=data.get("nodes", 1),
        storage_tier=data.get("storage_tier", "A"),
        results_root=data["results_root"],
        mounts=tuple(
            Mount(m["source"], m["target"], m.get("readonly", False))
            for m in data.get("mounts", [])
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
    )


def _slurm_options(block: Mapping[str, Any]) -> SlurmOptions:
    return SlurmOptions(
        login=block.get("login"),
        partition=block.get("partition"),
        account=block.get("account"),
        time=block.get("time"),
        cpus_per_task=block.get("cpus_per_task"),
        container=block.get("container", "pyxis"),
        extra_sbatch=tuple(block.get("extra_sbatch", [])),
    )


def _command(command: str | list[str]) -> tuple[str, ...]:
    return split_command(command) if isinstance(command, str) else tuple(command)


@lru_cache(maxsize=256)
def split_command(command: str) -> tuple[str, ...]:
    """``command``'s words as :func:`shlex.split` makes them (checking and building share them)."""
    return tuple(shlex.split(command))


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
