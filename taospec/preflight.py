"""What a job needs of this machine, checked before anything is recorded.

Plain ``validate`` judges a job file alone; ``validate --here`` and ``run``
also ask this machine: do the mount sources exist (a missing one would be
created by dockerd as an empty root-owned directory) and the ``--env-file`` files
and seccomp profiles of ``docker.extra_args``, are the ``inputs`` files
or folders, are the ``env.pass``
variables set, are the platform's command-line tools installed, does a Slurm
job's cluster have its partition, and would the platform render the job at all.
Every answer is a :class:`Problem` at the line that caused it.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from taospec import identity, lint, platforms, proc, rules
from taospec.diagnostics import (
    JsonPath,
    Problem,
    SpecError,
    format_path,
    raise_if_any,
    unique,
)
from taospec.errors import InvalidInput
from taospec.identity import Identity
from taospec.job import Job, JobFile, Target, closed_folder, input_files, status, unreadable
from taospec.jobids import mint_source, minted_form
from taospec.plan import Plan, upstream_stand_ins
from taospec.yamlsrc import MergedSource, Source

TOOLS = {"docker": ("docker",), "brev": ("brev",), "local": ()}
"""The command-line tools each platform runs on this machine (slurm: see :func:`_tools`)."""


class Verdict(NamedTuple):
    """What this machine says about a job file: refusals, and warnings that do not refuse."""

    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]


def here(
    jobfile: JobFile,
    sources: Mapping[str, Source],
    *,
    launcher: Identity | None = None,
    user: str | None = None,
) -> Verdict:
    """Every check ``run`` makes on this machine, for every target."""
    who = launcher or identity.launcher()
    problems: list[Problem] = []
    warnings: list[str] = []
    roots: RootVerdicts = {}
    for name, target in jobfile.targets.items():
        source = sources[name]
        job = target.job
        found = on_this_machine(job, source, user, roots) + inputs(target, source)
        found += passed_variables(job, source, os.environ)
        found += passed_values_written(job, source, os.environ)
        found += tools(job, source)
        warnings += _user_warnings(job, source, who, user)
        if not found:
            upstream = upstream_stand_ins(target.needs)
            found += _render_refusals(job, source, who, user, upstream)
        problems += found
    problems += slurm_partitions((t.job, sources[n]) for n, t in jobfile.targets.items())
    return Verdict(tuple(unique(problems)), tuple(dict.fromkeys(warnings)))


RootVerdicts = dict[tuple[str, str | None, str], str | None]
"""What :func:`results_root_unusable` said of each (platform, docker host, results_root) a
run has asked about: its targets mostly share one, asked of the kernel once."""


def on_this_machine(
    job: Job, source: Source, user: str | None = None, roots: RootVerdicts | None = None
) -> list[Problem]:
    """What ``run`` stops at that is a fact of this machine, not of the job file: a mount
    source, an env file or a seccomp profile missing here, a results_root that is not a
    folder or that a local job's user (``user``: ``--user``) cannot reach (``run -n`` and
    ``doctor`` report them, as the machine a job is reviewed on need not be the one it runs
    on). ``roots`` holds the results_root verdicts of the targets asked before."""
    found = mount_sources(job, source) + extra_host_paths(job, source) + cli_files(job, source)
    found += results_root(job, source, {} if roots is None else roots)
    return found or results_root_reached(job, source, user)


def _elsewhere(job: Job) -> bool:
    """A job whose paths are another host's: not docker or local, or a docker job whose
    engine (``docker.host``, or a DOCKER_HOST the plan takes from the environment) is
    remote; its plan checks them there."""
    if job.platform not in ("docker", "local") or job.docker.host:
        return True
    host = os.environ.get("DOCKER_HOST", "") if job.platform == "docker" else ""
    return bool(host) and not host.startswith("unix://")


DOCKER_FILES = frozenset({"/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/.dockerenv"})
"""Files docker writes into every container: a folder mounted over one fails the launch
("not a directory"); a file takes its place."""


def mount_sources(job: Job, source: Source) -> list[Problem]:
    """Mount sources that do not exist here, where the container engine would mount them,
    and folders mounted where docker writes a file (:data:`DOCKER_FILES`)."""
    if _elsewhere(job):
        return []
    problems = []
    for index, mount in enumerate(job.mounts):
        if "{" in mount.source:
            continue
        found = status(mount.source)
        if not isinstance(found, os.stat_result) and mount.template is not None:
            key = format_path(mount.written_at).removeprefix("$.")
            fix = f"set {key} in the job file (the value comes from {mount.template})"
            said = _no_source(mount.source, found, fix=fix)
            problems.append(source.about(mount.written_at, said, ("skill",)))
        elif not isinstance(found, os.stat_result):
            problems.append(
                source.problem(job.mount_source_at(index), _no_source(mount.source, found))
            )
        elif (
            stat.S_ISDIR(found.st_mode)
            and (target := rules.mount_target_path(mount.target)) in DOCKER_FILES
        ):
            problems.append(
                source.problem(
                    mount.written_at or ("mounts", index, "target"),
                    f"{mount.source} is a folder on this machine, and docker writes "
                    f"{target} into every container as a file, which a folder cannot "
                    "be mounted over; mount a file there, or the folder elsewhere, e.g. /data",
                )
            )
    return problems


def _no_source(path: str, found: str | None, why: str = "", fix: str = "fix the path") -> str:
    """What a mount whose source ``path`` is not here is told: ``found`` is the kernel's
    reason, when it gave one; ``why`` how docker run fails, when it refuses the mount;
    ``fix``, what else mends it."""
    if found is not None:
        if closed_folder(Path(path)) is not None:
            fix = f"let this user enter that folder, or {fix}"
        return f"{path} cannot be looked up on this machine ({found}); {fix}"
    if why:
        return f"{path} does not exist on this machine, and {why}; create it, or {fix}"
    return (
        f"{path} does not exist on this machine; the Docker engine would create it as an "
        f"empty root-owned directory and the job would see no data. Create it, or {fix}"
    )


def extra_host_paths(job: Job, source: Source) -> list[Problem]:
    """The bind mounts and devices of ``docker.extra_args`` (:func:`rules.bind_source`,
    :func:`rules.device_path`) whose path does not exist here, where the engine runs:
    dockerd makes a missing ``-v`` source an empty root-owned folder, as it would a missing
    ``mounts:`` source, and docker run refuses a missing ``--mount type=bind`` source or
    device once the record is open. A throttle (``--device-read-bps`` and the like) of a
    device that is no block device fails the container's start: the kernel throttles block
    devices only."""
    if job.platform != "docker" or _elsewhere(job):
        return []
    problems = []
    for index, flag, value in rules.docker_options(job.docker.extra_args):
        path = rules.bind_source(flag, value) or rules.device_path(flag, value)
        found = None if path is None or "{" in path else status(path)
        if path is None or "{" in path:
            continue
        if not isinstance(found, os.stat_result):
            said = _no_source(path, found, _MISSING_REFUSED.get(flag, ""))
        elif flag in rules.THROTTLES and not stat.S_ISBLK(found.st_mode):
            said = (
                f"{path} is no block device, and only a block device's reads and writes can be "
                "throttled (the container would not start); name the disk, e.g. /dev/sda"
            )
        else:
            continue
        problems.append(source.problem(("docker", "extra_args", index), f"{flag} {value}: {said}"))
    return problems


ENGINE_FACTS = frozenset({"docker_host", "docker_context", "engine"})
"""The backend facts of a plan that pinned its engine; a plan without one (stored before
engines were pinned) runs on the engine ``$DOCKER_HOST`` names."""


class Absent(NamedTuple):
    """A path of this machine a stored plan names that is not here: ``option`` names it,
    ``found`` is the kernel's reason when it gave one, ``docker`` how docker run takes it."""

    option: str
    path: str
    found: str | None
    docker: str


def stored_launch_absent(plan: Plan) -> list[Absent]:
    """The paths of this machine that a stored docker plan's launch mounts or passes as a
    device (``-v``, ``--mount type=bind``, ``--device``...: its ``mounts`` and
    ``docker.extra_args``, and the upstream results a pipeline target mounts) and that are
    not here, where its engine runs; none when the engine is elsewhere. A path that holds
    a stand-in (its own results folder, which the plan makes) is not asked about."""
    pinned = ENGINE_FACTS.intersection(dict(plan.backend))
    host = plan.backend_value("docker_host") or ("" if pinned else os.environ.get("DOCKER_HOST"))
    if (
        plan.platform != "docker"
        or plan.backend_value("docker_context")
        or (host and not host.startswith("unix://"))
    ):
        return []
    plan = plan.with_placeholder_id()  # its own results folder, which the retry makes anew
    absent = []
    for step in plan.steps:
        if step.name != "launch" or step.argv[:2] != ("docker", "run"):
            continue
        for _, flag, value in rules.docker_options(step.argv[2:], until_image=True):
            path = rules.bind_source(flag, value) or rules.device_path(flag, value)
            if path is None or "\x00" in path:
                continue
            found = status(path)
            if not isinstance(found, os.stat_result):
                docker = _MISSING_REFUSED.get(
                    flag,
                    "the Docker engine would make it an empty "
                    "root-owned folder and the job would see no data",
                )
                absent.append(Absent(f"{flag} {value}", path, found, docker))
    return absent


_MISSING_REFUSED = {
    "--mount": "docker run refuses a bind mount whose source is missing",
    **dict.fromkeys(rules.DEVICE_OPTIONS, "docker run refuses a device that is missing"),
}
"""How docker run fails on a path of ``docker.extra_args`` that is missing, by its option
(a missing ``-v`` source is made instead)."""


def cli_files(job: Job, source: Source) -> list[Problem]:
    """The files of ``docker.extra_args`` that the docker CLI reads itself, here, whatever
    engine it talks to, and that would fail the launch (exit 125): an ``--env-file`` or a
    seccomp profile that is not a file here, an env file that sets a variable ``-e`` may
    not (:data:`rules.OWN_VARIABLES`), a profile that is not JSON."""
    if job.platform != "docker":
        return []
    problems = []
    for index, flag, value in rules.docker_options(job.docker.extra_args):
        where = ("docker", "extra_args", index)
        profile = rules.seccomp_profile(value) if flag == "--security-opt" else None
        if flag == "--env-file" and "{" not in value:
            problems += _env_file(source, where, value)
        elif profile is not None and profile.startswith("/"):  # a relative one: the job file's
            problems += _seccomp_profile(source, where, value, Path(profile))
    return problems


def _env_file(source: Source, where: tuple[str | int, ...], value: str) -> list[Problem]:
    found = status(value)
    if isinstance(found, str):
        return [source.problem(where, f"--env-file {value} cannot be looked up here: {found}")]
    if found is None or not stat.S_ISREG(found.st_mode):
        return [
            source.problem(
                where,
                f"--env-file {value} does not exist on this machine, where docker run "
                "reads it (whatever engine it runs on); create it, or fix the path",
            )
        ]
    try:
        names = env_file_names(Path(value))
    except OSError as refused:
        return [
            source.problem(where, f"--env-file {value} cannot be read here: {refused.strerror}")
        ]
    except ValueError as malformed:
        return [source.problem(where, f"--env-file {value}: docker run refuses it: {malformed}")]
    return [
        source.problem(where, f"--env-file {value} sets {name}: {rules.OWN_VARIABLES[name]}")
        for name in dict.fromkeys(names)
        if name in rules.OWN_VARIABLES
    ]


def _seccomp_profile(
    source: Source, where: tuple[str | int, ...], value: str, profile: Path
) -> list[Problem]:
    said = f"--security-opt {value}: the seccomp profile"
    found = status(profile)
    if isinstance(found, str):
        return [source.problem(where, f"{said} cannot be looked up here: {found}")]
    if found is None or not stat.S_ISREG(found.st_mode):
        return [
            source.problem(
                where,
                f"{said} does not exist on this machine, where docker run reads it (whatever "
                "engine it runs on); create it, or fix the path",
            )
        ]
    try:
        json.loads(profile.read_bytes())
    except OSError as refused:
        return [source.problem(where, f"{said} cannot be read here: {refused.strerror}")]
    except ValueError as wrong:
        return [
            source.problem(where, f"{said} is not JSON, which docker run sends the engine: {wrong}")
        ]
    return []


def env_file_names(path: Path) -> list[str]:
    """The variable names a docker env file sets, in order, read as docker run reads it: each
    line (cut at ``\n``, a ``\r`` before it dropped) not blank and not a ``#`` comment is
    ``NAME=value`` or ``NAME`` alone (passed from the environment). A file docker refuses
    raises ValueError saying which line and why. Only names are read out: a value may be a
    secret, and none leaves this function, nor any message of it."""
    names = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            line = raw.removesuffix(b"\r").decode()
        except UnicodeDecodeError:
            raise ValueError(f"line {number} is not UTF-8") from None
        line = line.removeprefix("\ufeff" if number == 1 else "").lstrip()
        if not line or line.startswith("#"):
            continue
        name = line.partition("=")[0]
        if not name:
            raise ValueError(f"line {number} has no variable name")
        if " " in name or "\t" in name:
            raise ValueError(f"the name on line {number} holds a blank")
        names.append(name)
    return names


def slurm_partitions(targets: Iterable[tuple[Job, Source]]) -> list[Problem]:
    """Each ``slurm.partition`` the job's cluster lacks (sbatch would refuse the job once its
    record is open), the cluster asked once for each place its commands run: here, or its
    login node over ssh. A cluster that does not answer is not judged here."""
    from taospec.platforms import slurm  # only a Slurm job that names a partition loads it

    known: dict[str | None, list[str] | None] = {}
    problems = []
    for job, source in targets:
        named = job.slurm.partition if job.platform == "slurm" else None
        if not named:
            continue
        login = job.slurm.login
        if login not in known:
            known[login] = slurm.partitions(login)
        there = known[login]
        if there is None or named in there:
            continue
        problems.append(
            source.problem(
                ("slurm", "partition"),
                f"the Slurm cluster {f'on {login}' if login else 'here'} has no partition "
                f"{named!r} (it has {', '.join(there)}), and sbatch would refuse the job; name "
                "one of them, or leave partition out for the cluster's default",
            )
        )
    return problems


def results_root(job: Job, source: Source, roots: RootVerdicts) -> list[Problem]:
    """A ``results_root`` that is, or lies under, what is not a folder here, where the job's
    results folder would be made in it (the record would open, then the job fail); each
    verdict is noted in ``roots``, and one found there is not asked again."""
    if _elsewhere(job):
        return []
    key = (job.platform, job.docker.host, job.results_root)
    if key not in roots:
        roots[key] = results_root_unusable(*key)
    why = roots[key]
    if why is None:
        return []
    return [source.problem(("results_root",), f"{why}: {unusable_root_fix(job.results_root)}")]


def unusable_root_fix(root: str, *, retry: bool = False) -> str:
    """What mends a results_root :func:`results_root_unusable` refuses: the way into a folder
    on the way that this user may not enter, else what is there; a ``retry`` keeps its
    job's results_root, so only the first half is said."""
    if closed_folder(Path(root)) is not None:  # why it could not be looked up
        return "let this user enter that folder" + (
            "" if retry else ", or choose a results_root it can reach"
        )
    return "move what is there" if retry else "give a folder, or move what is there"


def results_root_reached(job: Job, source: Source, user: str | None = None) -> list[Problem]:
    """A local job that root starts as another user gets its results folder made and handed
    to it, but reaches it only through the folders above: one that user may not enter (a
    parent such as /root, mode 700) fails the job after its record opened. Asked of the
    kernel as that user, with the setpriv options the launch uses; nothing is made."""
    if job.platform != "local" or os.getuid() != 0 or shutil.which("setpriv") is None:
        return []
    try:
        who = identity.resolve(
            job.user, user, identity.launcher(), platform=job.platform, file=job.file
        )
    except InvalidInput as refused:  # --user, at the user: key as render places it
        return list(source.refusal(refused).problems)
    path = Path(job.results_root)
    there = next((p for p in (path, *path.parents) if _is_folder(p)), None)
    if who.uid == 0 or there is None:
        return []
    groups = f"--groups={','.join(map(str, who.groups))}" if who.groups else "--clear-groups"
    argv = ["setpriv", f"--reuid={who.uid}", f"--regid={who.gid}", groups, "--", "test", "-x"]

    def reaches(folder: Path) -> bool:
        return proc.run([*argv, str(folder)], check=False, timeout=30).ok

    if reaches(there):
        return []
    blocked = next((p for p in (*reversed(there.parents), there) if not reaches(p)), there)
    return [
        source.problem(
            ("results_root",),
            f"the job runs as {who.spec}, who cannot reach {blocked} (a folder on the way to "
            f"its results folder); let that user enter it (chmod o+x {blocked}), or choose a "
            "results_root it can reach",
        )
    ]


def results_root_unusable(platform: str, docker_host: str | None, root: str) -> str | None:
    """Why a job's results folder cannot be made under ``root`` on this machine (it is, or lies
    under, what is not a folder, or no folder can be made where it would be), where
    ``platform`` makes it here; None when it can be."""
    if platform not in ("docker", "local") or docker_host:
        return None
    path = Path(root)
    there, found = path, None
    for there in (path, *path.parents):
        if (found := status(there, follow=False)) is not None:
            break
    if isinstance(found, str):
        why = f"{root} cannot be looked up on this machine ({found})"
    elif not _is_folder(there):
        what = "is" if there == path else f"lies under {there}, which is"
        why = f"{root} {what} not a folder on this machine"
    elif (refused := _refuses_folders(there)) is None:
        return None
    elif there == path:
        why = f"{root} takes no new folder on this machine ({refused})"
    else:
        why = f"{root} cannot be made on this machine: {there} takes no new folder ({refused})"
    return f"{why}; each job's results go in a folder made under results_root"


def _is_folder(path: Path) -> bool:
    found = status(path)
    return isinstance(found, os.stat_result) and stat.S_ISDIR(found.st_mode)


def _refuses_folders(folder: Path) -> str | None:
    """Why this process could not make a folder in ``folder`` (None when it could), asked of
    the kernel without making one, since ``validate --here`` and ``run -n`` write nothing: a
    filesystem mounted read-only, one of the kernel's own (/proc, /sys, /dev/pts), or no
    permission to write there."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "its filesystem is mounted read-only"
    except OSError as unreadable:
        return unreadable.strerror or str(unreadable)
    if (kind := _filesystem_type(folder)) in KERNEL_FILESYSTEMS:
        return f"it is a {kind} filesystem, which holds no files but the kernel's own"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "this user may not write in it"
    return None


KERNEL_FILESYSTEMS = frozenset(
    {"proc", "sysfs", "devpts", "cgroup", "cgroup2", "mqueue", "debugfs", "tracefs",
     "securityfs", "pstore", "bpf", "configfs", "fusectl", "binfmt_misc", "efivarfs"}
)  # fmt: skip
"""Filesystems that show the kernel's state: a folder made there is refused, or is not a
folder at all (a cgroup), so no job's results can go there (statvfs cannot tell them)."""

MOUNTINFO = "/proc/self/mountinfo"


def _filesystem_type(path: Path) -> str | None:
    """The type of the filesystem holding ``path`` (``ext4``, ``proc``), as this process's
    mount table says: the last mount on the longest mount point above it; None unread."""
    real = os.path.realpath(path)
    found: tuple[int, str] | None = None
    try:
        with Path(MOUNTINFO).open(encoding="utf-8", errors="surrogateescape") as table:
            for line in table:
                fields = line.split()
                point = _unescaped(fields[4])
                kind = fields[fields.index("-") + 1]
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and (found is None or len(point) >= found[0]):
                    found = (len(point), kind)
    except (OSError, IndexError, ValueError):
        return None
    return found[1] if found else None


def _unescaped(field: str) -> str:
    """A mount point as mountinfo writes it, its blanks and backslashes as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def inputs(target: Target, source: Source) -> list[Problem]:
    """Inputs that are not a file or a folder here, or hold what is neither: the
    fingerprint reads each of their files (only their names are looked at here)."""
    problems = []
    for index, path in enumerate(target.input_paths()):
        why = unreadable(path)
        if why is None:
            try:
                collections.deque(input_files(path), maxlen=0)
            except InvalidInput as refused:  # said as the fingerprint says it
                why = f"{target.inputs[index]}: {refused}"
        if why:
            problems.append(source.problem(("inputs", index), why))
    return problems


def passed_variables(job: Job, source: Source, environ: Mapping[str, str]) -> list[Problem]:
    """``env.pass`` names this environment does not set (brev reads them on the instance)."""
    if job.platform == "brev":
        return []
    return [
        source.problem(
            ("env", "pass", index),
            f"{name} is not set in this environment; export {name} before submitting "
            "(its value is passed by name and never written down)",
        )
        for index, name in enumerate(job.env_pass)
        if name not in environ
    ]


def refuse_passed_values_shown(
    jobfile: JobFile, sources: Mapping[str, Source], names: Iterable[str]
) -> None:
    """For a verb that shows the job (render, graph, diff): refuse a job that writes a passed
    variable's value (:func:`passed_values_written`); the loader has registered the values,
    so none is printed."""
    raise_if_any(
        problem
        for name in names
        for problem in passed_values_written(jobfile.targets[name].job, sources[name], os.environ)
    )


def passed_values_written(job: Job, source: Source, environ: Mapping[str, str]) -> list[Problem]:
    """Values of the job's ``env.pass`` variables written in the job itself, where they would
    land in argv, the spec file or the plan (and the ledger, which redacts them, would keep
    paths and names that are not the job's)."""
    values = {  # a Brev job reads them on the instance; this machine's are judged all the same
        name: lint.secret_forms(environ[name]) for name in job.env_pass if name in environ
    }
    written = [*rules.texts(source.data), *_words_run(source.data)]
    found = unique(
        source.problem(path, _WRITTEN.format(name=name), key=is_key)
        for path, text, is_key in written
        for name, forms in values.items()
        if any(form in text for form in forms)
    )
    if isinstance(source, MergedSource) and source.job_path:  # a pipeline job: its name
        named = str(source.job_path[-1])  # is printed, recorded and stored as the target's
        found += [
            source.problem((), _NAMED.format(name=name))
            for name, forms in values.items()
            if any(form in named for form in forms)
        ]
    where = str(Path(source.file).resolve())  # stored with its targets' state; render shows it
    found += [
        source.problem((), _IN_PATH.format(name=name))
        for name, forms in values.items()
        if any(form in where for form in forms)
    ]
    found += [
        source.problem(("image",), _WRITTEN.format(name=name) + " (the image versions.yaml names)")
        for name, forms in values.items()
        if not found and any(form in job.image for form in forms)
    ]
    found += [
        source.problem(spot, _MINTED.format(name=name))
        for name, forms in values.items()
        if not found and (spot := _in_minted_id(job, forms)) is not None
    ]
    return found


def _in_minted_id(job: Job, forms: Iterable[str]) -> JsonPath | None:
    """Where the id minted for ``job`` would hold one of ``forms`` as an id spells it: in
    its network_arch, its action, or (the job's top) across the two; None if nowhere."""
    minted = {
        ("network_arch",): minted_form(job.network_arch),
        ("action",): minted_form(job.action),
        (): mint_source(job.network_arch, job.action),
    }
    return next(
        (at for at, text in minted.items() if lint.spelled_in(text, forms, minted_form)), None
    )


def _words_run(data: Mapping[str, Any]) -> Iterator[tuple[JsonPath, str, bool]]:
    """The words the job's commands run, as taospec splits a string ``command`` and as a
    shell reads a script (``sh -c``, a string ``notify``), each with its item's path: quote
    removal can join a value written in pieces (``"sh -c 'x' ab''cd"`` runs ``abcd``)."""
    for path in rules.ARGUMENT_LISTS:
        value: Any = data
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            yield from (((*path, i), word, False) for i, word in lint.argv_words(value))
        elif isinstance(value, str):
            yield from ((path, word, False) for _, word in lint.argv_words(_argv(path, value)))


def _argv(path: JsonPath, command: str) -> Sequence[str]:
    """What a string runs: ``notify`` runs under ``sh -c``, ``command`` as taospec splits it
    (nothing, when it does not split: another rule refuses it)."""
    if path == ("notify",):
        return ("sh", "-c", command)
    try:
        return rules.split_command(command)
    except ValueError:
        return ()


_IN_PATH = (
    "the job file's path holds the value of {name}, which env.pass passes by name so that "
    "the value is never written down; the path is shown by render and stored with the state "
    "of its targets: move or rename the file"
)
_NAMED = (
    "this job's name holds the value of {name}, which env.pass passes by name so that the "
    "value is never written down; a job's name is printed, recorded and stored as its "
    "target's: name the job otherwise"
)
_MINTED = (
    "the job's id, minted from network_arch and action, would hold the value of {name} as an "
    "id spells it (each run of other characters than letters, digits, '.', '_' and '-' as "
    "'-'), which env.pass passes by name so that the value is never written down; an id is "
    "printed, recorded and names the job's container: write them otherwise"
)
_WRITTEN = (
    "holds the value of {name}, which env.pass passes by name so that the value is never "
    "written down (argv, spec file, plan, ledger); write the job without it (a command can "
    "refer to ${name})"
)


def tools(job: Job, source: Source) -> list[Problem]:
    """The platform's command-line tools that are not on PATH here, and ``nvidia-smi`` for
    a job that picks free GPUs of this machine."""
    found = [
        source.problem(("platform",), f"platform {job.platform} runs {tool}, which is not on "
                       f"PATH here; install it (or run from a machine that has it)")
        for tool in _tools(job)
        if shutil.which(tool) is None
    ]  # fmt: skip
    if job.gpus_free and not _elsewhere(job) and shutil.which("nvidia-smi") is None:
        found.append(
            source.problem(
                ("gpus",),
                "gpus: {free: N} asks nvidia-smi which GPUs are free, and nvidia-smi is not "
                "on PATH here; install the NVIDIA driver, or list the GPU ids",
            )
        )
    return found


def _tools(job: Job) -> tuple[str, ...]:
    if job.platform == "slurm":
        return ("ssh",) if job.slurm.login else ("sbatch",)
    return TOOLS.get(job.platform, ())


def _user_warnings(job: Job, source: Source, who: Identity, user: str | None) -> Iterator[str]:
    """An explicit UID:GID that is not the launcher's own, for a non-root docker launcher."""
    given = user or job.user
    if job.platform != "docker" or given == "host" or who.uid == 0 or given == who.spec:
        return
    message = (
        f"warning: the job runs as {given}, but you are {who.spec}; its results directory will "
        f"belong to {given} and you may not be able to clean it up. Write user: host (or "
        f'user: "{who.spec}") unless {given} is meant'
    )
    yield str(source.problem(("user",), message))


def _render_refusals(
    job: Job, source: Source, who: Identity, user: str | None, upstream: dict[str, str]
) -> list[Problem]:
    """What the platform refuses while rendering the job's plan, at the line it concerns."""
    try:
        platforms.render(job, user=user, launcher=who, upstream=upstream, source=source)
    except SpecError as refused:
        return list(refused.problems)
    return []
