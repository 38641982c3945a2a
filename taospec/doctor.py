"""Preflight: is the host a job would run on ready for it?

Each check returns a :class:`Check`; a failing one carries a sentence saying
what to do (from NVIDIA's prerequisites and common error modes for TAO on
Docker). :func:`host_checks` starts at most one process (``docker info``)
and is what ``run`` can afford before opening a record; with ``full`` it
adds the docker client's version and the GPUs themselves (``nvidia-smi``).

:func:`job_checks` takes them from a docker job (``run`` asks for the cheap set,
``taospec doctor FILE`` for the full one): the image, its GPUs (ids, UUIDs or
``"all"``), ``results_root``, ``docker.shm_size`` and ``docker.ipc``, and the
environment that points the docker CLI at its engine (``DOCKER_HOST``).
Filesystem checks measure this machine, so they are made only when the engine
is local; with ``DOCKER_HOST=ssh://...`` the paths live on the far host.
:class:`Engines` asks each engine the jobs name once, as soon as the jobs are
known, so that the engine answers while ``run`` renders their plans.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from taospec import gpupick, proc, remote
from taospec.diagnose import diagnose
from taospec.dockerargs import size_bytes
from taospec.errors import TaospecError
from taospec.job import Job
from taospec.platforms.docker import NGC_KEY, NGC_REGISTRY, registry

GIB = 1024**3
MIN_DOCKER = (20, 10)
RESULTS_MIN_FREE = 5 * GIB
DATA_ROOT_MIN_FREE = 20 * GIB
SHM_PATH = "/dev/shm"
TIMEOUT = 60.0
INFO_FORMAT = "{{json .ServerVersion}}\t{{json .Runtimes}}\t{{json .DockerRootDir}}"


@dataclass(frozen=True, slots=True)
class Check:
    """One preflight answer: what was checked, whether it passed, what was seen, what to do."""

    name: str
    ok: bool
    detail: str
    advice: str = ""


@dataclass(frozen=True, slots=True)
class Engine:
    """What ``docker info`` says about the engine."""

    version: str
    runtimes: tuple[str, ...]
    root_dir: str


# -- the sets ------------------------------------------------------------------


def host_checks(
    *,
    image: str,
    gpus: Sequence[int | str] | str,
    results_root: str,
    shm_size: str = "8g",
    ipc: str = "host",
    env_pass: Collection[str] = (),
    docker_env: Sequence[tuple[str, str]] = (),
    full: bool = False,
    found: Engine | Check | None = None,
) -> list[Check]:
    """The checks that start at most one process (``docker info``, none when the engine's
    answer is ``found`` already), made before a record is opened; ``full`` adds the docker
    client first and the GPUs the job names last."""
    local = engine_is_local(docker_env)
    checks = [docker_client(docker_env)] if full else []
    checks += engine_checks(gpus, docker_env, local=local, found=found)
    checks.append(ngc_login(image, env_pass, docker_env))
    if local:
        checks.append(free_space("results_root free space", results_root, RESULTS_MIN_FREE))
        checks.append(shm(shm_size, ipc))
    if full:
        checks.append(gpus_exist(gpus, docker_env))
    return checks


def failed(checks: Sequence[Check]) -> list[Check]:
    return [check for check in checks if not check.ok]


def docker_jobs(jobs: Sequence[Job]) -> list[Job]:
    """The docker jobs, one per distinct set of checked values."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for job in jobs:
        if job.platform == "docker" and _key(job) not in seen:
            seen.add(_key(job))
            out.append(job)
    return out


def _key(job: Job) -> tuple[object, ...]:
    """What a docker job's checks depend on: equal keys, equal answers."""
    return (
        job.image,
        job.gpus,
        job.results_root,
        job.docker.shm_size,
        job.docker.ipc,
        job.env_pass,
        job.docker.host,
    )


def _docker_env(job: Job) -> tuple[tuple[str, str], ...]:
    """The environment that points the docker CLI at the job's engine."""
    return (("DOCKER_HOST", job.docker.host),) if job.docker.host else ()


def job_checks(job: Job, *, full: bool, engines: Engines | None = None) -> list[Check]:
    """The cheap (``run``) or full (``doctor``) checks for a docker job's host; ``engines``
    holds the engine's answer when it was asked earlier."""
    return host_checks(
        image=job.image,
        gpus="all" if job.gpus_free else job.gpus,
        results_root=job.results_root,
        shm_size=job.docker.shm_size,
        ipc=job.docker.ipc,
        env_pass=job.env_pass,
        docker_env=_docker_env(job),
        full=full,
        found=None if engines is None else engines.answer(job),
    )


class Engines:
    """``docker info`` for each engine a run's docker jobs name, asked once and at once.

    ``run`` asks as soon as it has read the job file and reads the answers in its
    preflight, after the plans are rendered: the engine answers while taospec renders,
    rather than before the launch. Leaving the ``with`` block ends a query nobody read.
    """

    def __init__(self, jobs: Iterable[Job]) -> None:
        self._asked: dict[tuple[tuple[str, str], ...], proc.Started | Check] = {}
        self._answers: dict[tuple[tuple[str, str], ...], Engine | Check] = {}
        for job in jobs:
            env = _docker_env(job)
            if job.platform == "docker" and env not in self._asked:
                self._asked[env] = ask_engine(env)

    def answer(self, job: Job) -> Engine | Check:
        """What the job's engine said (asked now if it was not asked before)."""
        env = _docker_env(job)
        if env not in self._answers:
            self._answers[env] = engine(env, self._asked.pop(env, None))
        return self._answers[env]

    def __enter__(self) -> Engines:
        return self

    def __exit__(self, *_: object) -> None:
        for asked in self._asked.values():
            if isinstance(asked, proc.Started):
                asked.discard()
        self._asked.clear()


def is_space_check(check: Check) -> bool:
    """Free space (results_root, docker's data root, /dev/shm): warned about by ``run``,
    never a reason to refuse it."""
    return check.name.endswith("free space") or check.name == SHM_PATH


# -- the docker engine -----------------------------------------------------------


def engine_is_local(docker_env: Sequence[tuple[str, str]] = ()) -> bool:
    """True when the docker CLI talks to an engine on this machine."""
    host = dict(docker_env).get("DOCKER_HOST", os.environ.get("DOCKER_HOST", ""))
    return not host or host.startswith("unix://")


def ask_engine(docker_env: Sequence[tuple[str, str]] = ()) -> proc.Started | Check:
    """Start ``docker info`` and return at once (:func:`engine` reads the answer), or a
    failed check when there is no docker CLI."""
    try:
        return proc.start(("docker", "info", "--format", INFO_FORMAT), extra_env=docker_env)
    except TaospecError:
        return _no_docker("docker engine")


def engine(
    docker_env: Sequence[tuple[str, str]] = (), asked: proc.Started | Check | None = None
) -> Engine | Check:
    """The engine's version, runtimes and data root; or a failed check saying why not.
    ``asked`` is the :func:`ask_engine` to read, when it was started earlier."""
    asked = ask_engine(docker_env) if asked is None else asked
    if isinstance(asked, Check):
        return asked
    result = asked.wait(TIMEOUT)
    try:
        version, runtimes, root = (json.loads(field) for field in result.stdout.split("\t"))
    except ValueError:
        return _no_engine(result.output())
    if not result.ok:
        return _no_engine(result.output())
    return Engine(str(version), tuple(sorted(runtimes or {})), str(root))


def _no_docker(name: str) -> Check:
    advice = "install Docker >= 20.10 (https://docs.docker.com/engine/install/)"
    return Check(name, False, "docker: command not found", advice)


def _no_engine(output: str) -> Check:
    known = diagnose(output)
    last = output.splitlines()[-1] if output else "docker info failed without output"
    return Check(
        "docker engine",
        False,
        last,
        known.advice if known else "start dockerd, or point DOCKER_HOST (docker.host) at one",
    )


def engine_checks(
    gpus: Sequence[int | str] | str | None,
    docker_env: Sequence[tuple[str, str]] = (),
    *,
    local: bool = True,
    found: Engine | Check | None = None,
) -> list[Check]:
    """Engine version, NVIDIA runtime and (when local) the data root's free space: one call
    (none when the engine's answer is ``found`` already). ``gpus`` None: no job asks."""
    found = engine(docker_env) if found is None else found
    if isinstance(found, Check):
        return [found]
    checks = [engine_version(found.version), nvidia_runtime(found.runtimes, gpus)]
    if local:
        checks.append(
            free_space(
                "docker data root free space", found.root_dir, DATA_ROOT_MIN_FREE, _DATA_ROOT
            )
        )
    return checks


def version_tuple(text: str) -> tuple[int, int] | None:
    """``20.10.24+dfsg1`` -> (20, 10); None when it is no version."""
    found = re.match(r"^v?(\d+)\.(\d+)", text.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def engine_version(version: str, name: str = "docker engine") -> Check:
    """Docker must be 20.10 or newer."""
    parsed = version_tuple(version)
    if parsed is not None and parsed >= MIN_DOCKER:
        return Check(name, True, f"version {version}")
    return Check(
        name,
        False,
        f"version {version or 'unknown'}, older than 20.10",
        "upgrade Docker to 20.10 or newer (https://docs.docker.com/engine/install/)",
    )


def docker_client(docker_env: Sequence[tuple[str, str]] = ()) -> Check:
    """The docker CLI's own version (``docker version``); it parses ``--gpus``."""
    argv = ("docker", "version", "--format", "{{.Client.Version}}")
    try:
        result = proc.run(argv, extra_env=docker_env, timeout=TIMEOUT, check=False)
    except TaospecError:
        return _no_docker("docker client")
    lines = result.stdout.strip().splitlines()  # the client answers even when no engine does
    return engine_version(lines[0] if lines else "", "docker client")


def nvidia_runtime(runtimes: Sequence[str], gpus: Sequence[int | str] | str | None) -> Check:
    """With GPUs named, the engine must know the ``nvidia`` runtime; with no job (``gpus``
    None), whether it does is said, and is no failure."""
    listed = ", ".join(runtimes) or "none"
    if gpus is None:
        known = "nvidia" in runtimes
        said = f"{'registered' if known else 'not registered'} (runtimes: {listed})"
        return Check("NVIDIA runtime", True, said + ("" if known else "; a GPU job needs it"))
    if not gpus:
        return Check("NVIDIA runtime", True, "not needed: the job names no GPUs")
    if "nvidia" in runtimes:
        return Check("NVIDIA runtime", True, f"registered (runtimes: {listed})")
    return Check(
        "NVIDIA runtime",
        False,
        f"not registered with the engine (runtimes: {listed})",
        "install the NVIDIA Container Toolkit on the Docker host and register it "
        "(nvidia-ctk runtime configure --runtime=docker), then restart docker; without it "
        'docker run --gpus fails with: could not select device driver "" with capabilities: '
        "[[gpu]]",
    )


# -- GPUs -------------------------------------------------------------------------


def gpus_exist(
    gpus: Sequence[int | str] | str, docker_env: Sequence[tuple[str, str]] = ()
) -> Check:
    """Every GPU the job names (id or UUID) is on the host; ``all`` needs at least one.

    The host is the engine's: ``nvidia-smi`` runs here for a local engine, through ssh for
    an ``ssh://`` one; on a host taospec reaches only through docker, it is not checked.
    """
    if not gpus:
        return Check("GPUs", True, "not needed: the job names no GPUs")
    host = dict(docker_env).get("DOCKER_HOST", os.environ.get("DOCKER_HOST", ""))
    if engine_is_local(docker_env):
        prefix: tuple[str, ...] = ()
    elif host.startswith("ssh://"):
        prefix = remote.ssh_argv(host)
    else:
        return Check("GPUs", True, f"not checked: nvidia-smi cannot be run on {host} from here")
    try:
        found = gpupick.query(prefix)
    except TaospecError as error:
        advice = (
            f"make sure ssh reaches {host} and nvidia-smi answers there, or drop gpus:"
            if prefix
            else "install the NVIDIA driver on the host (nvidia-smi must answer), or drop gpus:"
        )
        return Check("GPUs", False, str(error).splitlines()[0], advice)
    return _named_gpus(gpus, found)


def _named_gpus(gpus: Sequence[int | str] | str, found: Sequence[gpupick.Gpu]) -> Check:
    host = ", ".join(gpu.index for gpu in found) or "none"
    wanted = [str(gpu) for gpu in gpus] if not isinstance(gpus, str) else []
    if isinstance(gpus, str):
        missing = [] if found else ["any"]
    else:
        missing = [name for name in wanted if not any(gpu.named({name}) for gpu in found)]
    if missing:
        return Check(
            "GPUs",
            False,
            f"not on the host: {', '.join(missing)} (the host has GPUs: {host})",
            "name GPUs the host has, by index or UUID (nvidia-smi -L lists them)",
        )
    named = "all" if isinstance(gpus, str) else ", ".join(wanted)
    return Check("GPUs", True, f"{named} present (the host has GPUs: {host})")


# -- NGC login ----------------------------------------------------------------------


def ngc_login(
    image: str,
    env_pass: Collection[str] = (),
    docker_env: Sequence[tuple[str, str]] = (),
    environ: Mapping[str, str] = os.environ,
) -> Check:
    """An nvcr.io image needs a docker login there, or NGC_KEY passed (taospec logs in)."""
    if registry(image) != NGC_REGISTRY:
        return Check("NGC login", True, f"not needed: {image} is not on {NGC_REGISTRY}")
    if NGC_KEY in env_pass and environ.get(NGC_KEY):
        return Check("NGC login", True, "NGC_KEY is set; taospec logs in before pulling")
    config = docker_config(docker_env, environ)
    known = _login_in(config)
    if known:
        return Check("NGC login", True, known)
    unset = f"{NGC_KEY} is named in env.pass but not set; " if NGC_KEY in env_pass else ""
    return Check(
        "NGC login",
        False,
        f"{unset}no login for {NGC_REGISTRY} in {config}",
        "get an API key from https://ngc.nvidia.com/, then export NGC_KEY and list it under "
        "env.pass, or log in once: echo \"$NGC_KEY\" | docker login nvcr.io -u '$oauthtoken' "
        "--password-stdin",
    )


def docker_config(
    docker_env: Sequence[tuple[str, str]] = (), environ: Mapping[str, str] = os.environ
) -> Path:
    """The docker CLI's config file: ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``."""
    folder = dict(docker_env).get("DOCKER_CONFIG", environ.get("DOCKER_CONFIG", ""))
    return Path(folder or Path.home() / ".docker") / "config.json"


def _login_in(config: Path) -> str:
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError, RecursionError):
        return ""
    if not isinstance(data, dict):
        return ""
    auths = data.get("auths") or {}
    helpers = data.get("credHelpers") or {}
    if NGC_REGISTRY in helpers:
        return f"credentials for {NGC_REGISTRY} kept by docker-credential-{helpers[NGC_REGISTRY]}"
    if any(key.removeprefix("https://").rstrip("/") == NGC_REGISTRY for key in auths):
        store = data.get("credsStore")
        where = f"docker-credential-{store}" if store else str(config)
        return f"logged in to {NGC_REGISTRY} (credentials in {where})"
    return ""


# -- space ----------------------------------------------------------------------------

_RESULTS = (
    "free space where results_root lives: remove finished job directories (their records "
    "terminal), or point results_root at a larger disk; docker system prune does not touch them"
)
_DATA_ROOT = (
    "docker's data root holds the images (TAO images are 5-40 GB): remove unused images after "
    'reviewing docker system df, or move it to a larger disk ("data-root" in '
    "/etc/docker/daemon.json) and restart docker"
)


def free_space(name: str, path: str, need: int, advice: str = _RESULTS) -> Check:
    """At least ``need`` bytes free on the filesystem holding ``path`` (or its nearest parent
    folder: what lies under a file is another check's)."""
    existing = _nearest_existing(Path(path))
    stats = os.statvfs(existing)
    free = stats.f_bavail * stats.f_frsize
    detail = f"{_gib(free)} free on {existing} (needs {_gib(need)})"
    return Check(name, free >= need, detail, "" if free >= need else advice)


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return Path("/")


def _gib(size: int) -> str:
    """``5.0 GiB``, or ``16.0 MiB`` below one GiB."""
    if size < GIB:
        return f"{size / 1024**2:.1f} MiB"
    return f"{size / GIB:.1f} GiB"


def shm(shm_size: str, ipc: str = "host", path: str = SHM_PATH) -> Check:
    """With ``ipc: host`` the job uses the host's /dev/shm: it must have ``shm_size`` free."""
    if ipc != "host":
        return Check("/dev/shm", True, f"not needed: the container gets its own {shm_size}")
    need = size_bytes(shm_size)
    if need is None:
        raise ValueError(f"{shm_size!r} is not a size docker reads; validate refuses it")
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize
    total = stats.f_blocks * stats.f_frsize
    detail = f"{_gib(free)} free of {_gib(total)} on {path}; the job asks {shm_size}"
    if free >= need:
        return Check("/dev/shm", True, detail)
    return Check(
        "/dev/shm",
        False,
        detail,
        f"the job shares the host's {path} (docker.ipc: host): enlarge it (mount -o "
        f"remount,size={-(-need // 1024**2)}m {path}), lower docker.shm_size, or set docker.ipc: "
        "private so --shm-size gives the container its own; too little ends in Bus error",
    )
