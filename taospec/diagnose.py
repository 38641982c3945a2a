"""Why a job failed, and whether running it again could help.

:func:`classify` turns what the backend said (exit code, its own message:
docker's state and errors, Slurm's job state) and the job's log tail into a
:class:`Diagnosis` with a class, always: ``ERR_INFRA`` for faults of the
machine or the service around the job (a node or boot failure, preemption, a
GPU Xid or ECC error, an image pull failure, eviction, a daemon or runtime
error), which a retry under a new record may cure; ``ERR_PROGRAM`` for faults
of the job itself (out of memory, a device-side assert, a traceback, a missing
file, a timeout), which a retry repeats.

:func:`diagnose` is the older question, "does this text show a failure we
know?", answered with the same sentences.
"""

from __future__ import annotations

import re
import signal
from typing import NamedTuple

from taospec import lint

INFRA = "ERR_INFRA"
PROGRAM = "ERR_PROGRAM"


class Diagnosis(NamedTuple):
    """A failure's class, what happened (one sentence) and what to do."""

    err_class: str
    sentence: str
    advice: str

    def __str__(self) -> str:
        return f"{self.sentence}: {self.advice}"


def _infra(sentence: str, advice: str) -> Diagnosis:
    return Diagnosis(INFRA, sentence, advice)


def _program(sentence: str, advice: str) -> Diagnosis:
    return Diagnosis(PROGRAM, sentence, advice)


_NO_GPU_RUNTIME = _infra(
    "no GPU runtime on the Docker host",
    "the NVIDIA Container Toolkit is missing or docker is not configured for it; install it "
    "(tao-setup-nvidia-gpu-host --backend docker --install), restart docker, or drop gpus: "
    "from the spec to run without GPUs",
)
_SHM = _program("/dev/shm is too small", "raise docker.shm_size in the spec (e.g. 16g)")
_NODE_FAIL = _infra(
    "a node of the job failed", "submit again; Slurm will place it on healthy nodes"
)
_PREEMPTED = _infra(
    "the scheduler preempted the job for another one",
    "submit again, or ask for a partition or QOS that is not preemptible",
)
_TIME_LIMIT = _program(
    "the job reached its time limit",
    "raise slurm.time, or make the job shorter (fewer epochs, resume from a checkpoint)",
)
_HOST_OOM = _program(
    "the job ran out of host memory (the kernel's out-of-memory killer stopped it)",
    "lower the batch size or the number of data loader workers, or run on a host with more memory",
)

_NO_COMMAND = _program(
    "the job's command cannot be started",
    "check the command's first word: it must exist in the image (or on the host, for "
    "platform local), be a file the job's UID may execute, and be built for this CPU",
)
_NO_COMMAND_AT_PATH = (
    r'container process(?: caused)?:? "?exec: \\?"[^"\\\n]+\\?": '
    r"(?:stat [^:\n]+: )?(?:no such file or directory|permission denied|not a directory)"
)
"""runc's word that the command's path (``/no/such/binary``, ``./bin/train``) names nothing
the job's UID may execute in the container: ``unable to start container process: exec:
"/x": stat /x: no such file or directory`` (``starting container process caused: exec:``
before runc 1.1, with the quotes escaped before 1.0); also ``permission denied`` and ``not
a directory``. The job's fault, though it comes inside an ``OCI runtime create failed``."""
_TOO_LONG = _program(
    "the kernel takes no argument or environment this long (exit 126, E2BIG)",
    "shorten what the job's command and env.set expand to (placeholders filled in), or the "
    "variables this machine adds (env.pass values; for docker, the launcher's whole "
    "environment): each argument and NAME=value under 128 KiB, all of them together under "
    "getconf ARG_MAX; put long text in the spec, which the job reads from a file",
)
_RUNTIME = _infra(
    "the container runtime failed to start the container",
    "the Docker host's runtime is unhealthy; see journalctl -u docker there and submit again",
)

# What the backend's own message says, checked before the log: the backend knows best.
_NATIVE: tuple[tuple[str, Diagnosis], ...] = (
    (r"\bNODE_FAIL\b", _NODE_FAIL),
    (
        r"\bBOOT_FAIL\b",
        _infra("a node of the job failed to boot", "submit again, or ask the cluster's admins"),
    ),
    (r"\bPREEMPTED\b", _PREEMPTED),
    (
        r"\bEvicted\b|[Tt]he node was low on resource",
        _infra("the job was evicted from its node", "submit again once the node has room"),
    ),
    (r"\bOUT_OF_MEMORY\b|OOMKilled|out-of-memory killer", _HOST_OOM),
    (r"\bTIMEOUT\b|\bDEADLINE\b", _TIME_LIMIT),
)

# What a failure looks like in docker's output or the job's log, most specific first.
NO_ENGINE = _infra(
    "no Docker engine answers",
    "start dockerd (or check docker.host and that ssh to it works), then submit again",
)
"""What docker says when the engine it is pointed at does not answer."""

_SSH_TIMED_OUT = (
    r"Connection timed out during banner exchange|Connection to \S+ port \d+ timed out|"
    r"ssh: connect to host \S+ port \d+: Connection timed out"
)
"""OpenSSH's words for a host that did not answer within ssh's ConnectTimeout: one that took
the connection and never spoke (the first two lines), or one that never took it."""
_CONNECT_TIMEOUT = re.compile(r"\bConnectTimeout=(\d+)")


def _ssh_timed_out(within: str) -> Diagnosis:
    """The job's host did not answer ssh ``within`` (``7 s``, ``its ConnectTimeout``)."""
    return _infra(
        f"the job's host did not answer over ssh within {within}",
        "check that it is up and that ssh -o BatchMode=yes to it works from this machine, "
        "then submit again; if it is only slow to answer, give it a longer ConnectTimeout "
        "in ~/.ssh/config",
    )


_SSH_NO_ANSWER = _ssh_timed_out("its ConnectTimeout")

_KNOWN: tuple[tuple[str, Diagnosis], ...] = (
    (r"DUE TO NODE FAILURE", _NODE_FAIL),
    (r"DUE TO PREEMPTION", _PREEMPTED),
    (r"DUE TO TIME LIMIT", _TIME_LIMIT),
    (
        r"uncorrectable ECC|ECC error|cudaErrorECCUncorrectable|GPU has fallen off the bus|"
        r"GPU is lost|row[- ]remapping failure",
        _infra("a GPU fault", "the GPU itself failed; resubmit on other GPUs"),
    ),
    (r'could not select device driver "" with capabilities: \[\[gpu\]\]', _NO_GPU_RUNTIME),
    (
        r"unknown or invalid runtime name: nvidia|nvidia-container-cli: initialization error|"
        r"nvidia-container-runtime did not terminate",
        _infra(
            "the NVIDIA container runtime failed on the Docker host",
            "check the host with docker info and nvidia-smi; reinstall or reconfigure the NVIDIA "
            "Container Toolkit (nvidia-ctk runtime configure --runtime=docker) and restart docker",
        ),
    ),
    (
        r"Driver/library version mismatch|nvidia-container-cli: requirement error",
        _infra(
            "the host's NVIDIA driver does not match what the job needs",
            "the driver was upgraded without a reboot, or is older than the image requires "
            "(TAO needs driver >= 580); reboot or upgrade the host's driver",
        ),
    ),
    (
        r"Cannot connect to the Docker daemon|error during connect|docker daemon is not running",
        NO_ENGINE,
    ),
    (
        r"could not connect to instance|"
        r'instance "[^"\n]*" is in state "(?:STARTING|STOPPING|DEPLOYING)"|'
        r"ssh: connect to host \S+ port \d+: (?!Connection timed out)|kex_exchange_identification",
        _infra(
            "the job's host did not answer over ssh (a Brev instance, docker.host or login node)",
            "it may still be starting, be stopping or be unreachable: check it (brev ls, or ssh "
            "to it yourself), then submit again",
        ),
    ),
    (
        r"Unable to contact slurm controller",
        _infra(
            "the Slurm controller (slurmctld) does not answer",
            "check that slurmctld runs (scontrol ping) and that slurm.conf (or SLURM_CONF) "
            "names it, then submit again",
        ),
    ),
    (
        r"Requested node configuration is not available",
        _program(
            "no node of the cluster has what the job asks for (Slurm refused it)",
            "ask for fewer nodes, CPUs (slurm.cpus_per_task) or GPUs, or less memory "
            "(extra_sbatch), or for a partition whose nodes have them (sinfo -N -o "
            "'%N %P %c %m %G' lists them)",
        ),
    ),
    (
        r"Invalid generic resource \(gres\) specification",
        _program(
            "the cluster has no such generic resource (Slurm refused the job)",
            "gpus: asks each node for GPUs as the gres gpu, which the partition's nodes must "
            "have (sinfo -o '%P %G'); check also the --gres and --gpus of extra_sbatch",
        ),
    ),
    (
        r"Invalid (?:feature|qos|account\b[^\n]*|partition name) specifi",
        _program(
            "the cluster knows no such partition, account, QOS or feature (Slurm refused the job)",
            "check slurm.partition, slurm.account and extra_sbatch against sinfo and "
            "sacctmgr show assoc user=$USER",
        ),
    ),
    (_SSH_TIMED_OUT, _SSH_NO_ANSWER),
    (
        r"Timeout, server \S+ not responding",  # ssh's ServerAliveCountMax keepalives unanswered
        _infra(
            "the job's host stopped answering over ssh in the middle of a command",
            "it hung or its network dropped the traffic: check that it is up and that ssh "
            "-o BatchMode=yes to it works from this machine; the command may have done its "
            "work there first, so look for the job on the host before submitting again",
        ),
    ),
    (
        r"could not look up instance",
        _program(
            "the Brev instance does not exist",
            "check brev.instance against brev ls; taospec does not create instances (brev "
            "create does)",
        ),
    ),
    (
        r"unauthorized: authentication required|unauthorized:|denied: requested access",
        _infra(
            "the registry refused the image",
            "NGC_KEY is missing or invalid: export it, list it under env.pass so taospec logs in "
            "with --password-stdin, or run docker login nvcr.io yourself",
        ),
    ),
    (
        r"pull access denied|manifest unknown|repository does not exist|not found: manifest",
        _infra(
            "the image cannot be found",
            "check the image reference (or its versions.yaml key) and that you may pull it",
        ),
    ),
    (
        r'Get "https?://[^"\s]+/v2/[^"\s]*": (?:dial tcp|proxyconnect)|'
        r"dial tcp: lookup \S+(?: on \S+)?: (?:no such host|server misbehaving)",
        _infra(
            "the registry could not be reached",
            "the Docker host has no route or DNS to the registry; check its network and proxy "
            "(docker pull the image there), or load the image on that host (docker load)",
        ),
    ),
    (
        r"toomanyrequests|TLS handshake timeout|failed to register layer|"
        r"error pulling image|failed to resolve reference|"
        r"net/http: request canceled",
        _infra(
            "pulling the image failed",
            "the registry or the network failed during the pull; submit again, or pull the "
            "image on the host first (docker pull)",
        ),
    ),
    (
        r"[Nn]o space left on device",
        _infra(
            "a filesystem is full",
            "see which one with df -h / /var/lib/docker <results_root>; bind-mounted results are "
            "not counted by docker system df, so clean finished job directories, not images",
        ),
    ),
    (
        r"is already in use by container|Conflict\. The container name",
        _program(
            "a container with the job's name already exists",
            "taospec never replaces it; inspect it with docker ps -a and remove it yourself if "
            "it is stale",
        ),
    ),
    (
        r"bind source path does not exist|invalid mount config",
        _program(
            "a mount source does not exist on the Docker host",
            "create it or fix mounts[].source; with docker.host it is a path on that host",
        ),
    ),
    (
        r'error mounting "[^"\n]*" to rootfs at "[^"\n]*": [^\n]*: not a directory',
        _program(
            "a mount puts a file where the image has a folder, or a folder where it has a file",
            "a mount's source and what the image holds at its target must both be files or "
            "both be folders: mount a file at a new path (e.g. /data/<name>), or mount the "
            "folder that holds it (mounts[], or a -v in docker.extra_args)",
        ),
    ),  # runc's ENOTDIR for the job's own mount: no fault of the runtime, though it says so
    (
        r"(?m)^docker: open [^\n]+: no such file or directory",
        _program(
            "a file docker run reads itself (an --env-file) is missing",
            "create it, or fix the path in docker.extra_args; docker reads it on the machine "
            "that runs taospec, whatever engine the job runs on",
        ),
    ),
    (
        r"(?m)^docker: (?:opening|compacting json for) seccomp profile \(",
        _program(
            "the seccomp profile docker run reads itself is missing or not JSON",
            "fix the file, or its path in docker.extra_args (--security-opt seccomp=...); "
            "docker reads it on the machine that runs taospec, whatever engine the job runs on",
        ),
    ),
    (
        r'error mounting "[^"\n]*" to rootfs at "[^"\n]*": [^\n]*: invalid argument',
        _program(
            "the kernel refused the options of one of the job's mounts",
            "check what docker.extra_args gives --tmpfs, -v and --mount (a tmpfs size such "
            "as 512m, 1g or 50%, a mode in octal, numeric IDs), and mounts[]",
        ),
    ),  # runc's EINVAL for the job's own mount options, inside an "OCI runtime create failed"
    (
        r"(?:open|write) /proc/sys/[^:\n]+: (?:no such file or directory|invalid argument)",
        _program(
            "a --sysctl of docker.extra_args names a setting this kernel does not have, or "
            "gives it a value the kernel refuses",
            "check its name and range with sysctl -a on the Docker host, or drop it",
        ),
    ),
    (
        r'failed to write "[^"\n]*": write /sys/fs/cgroup/[^:\n]+: '
        r"(?:no such device|invalid argument|numerical result out of range)",
        _program(
            "the Docker host's kernel cannot apply a resource setting of docker.extra_args",
            "a --device-read-bps (-iops, and the write ones) throttles a block device only, "
            "and --cpu-rt-* needs a kernel with real-time group scheduling; fix or drop it",
        ),
    ),  # runc writes the job's own limits into its cgroup: the job's options, not the runtime
    (
        r"error setting rlimits?\b[^\n]*: operation not permitted",
        _program(
            "a --ulimit of docker.extra_args asks more than the Docker host allows",
            "lower it to at most the engine's own hard limit (for nofile, also the host's "
            "fs.nr_open), or drop it to keep the engine's defaults",
        ),
    ),
    (
        r"Requested CPUs are not available|Range of CPUs is from|"
        r"Requested memory nodes are not available",
        _program(
            "docker.extra_args asks for CPUs or memory nodes the Docker host does not have",
            "see what it has (nproc, lscpu there) and fix --cpus, --cpuset-cpus or "
            "--cpuset-mems, or drop them",
        ),
    ),
    (
        r"Unknown runtime specified|Error response from daemon: network \S+ not found",
        _program(
            "docker.extra_args names a runtime or a network the Docker host does not have",
            "see docker info (Runtimes) and docker network ls there, and fix or drop "
            "--runtime or --network",
        ),
    ),
    (r"error running (?:\w+ )?hook", _RUNTIME),  # the runtime's own hook, not the job's
    (_NO_COMMAND_AT_PATH, _NO_COMMAND),
    (r"executable file not found in \$PATH|: command not found|exec format error", _NO_COMMAND),
    (
        r"OCI runtime (?:create|start) failed|failed to create shim|error creating overlay mount",
        _RUNTIME,
    ),
    (
        r"getpwuid\(\): uid not found",
        _program(
            "the image has no user for the job's UID",
            "taospec sets USER and LOGNAME for this; check that the command or image does not "
            "unset them (do not run as root instead)",
        ),
    ),
    (r"Bus error|DataLoader worker \(pid \d+\) (?:is killed|exited unexpectedly)", _SHM),
    (
        r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|"
        r"CUDA error: out of memory",
        _program(
            "the job ran out of GPU memory",
            "lower the batch size, or pick GPUs that are free (nvidia-smi)",
        ),
    ),
    (
        r"device-side assert triggered",
        _program(
            "a CUDA kernel assertion failed (a device-side assert)",
            "usually a label outside the model's class count: check the dataset's labels "
            "against the spec; CUDA_LAUNCH_BLOCKING=1 names the failing operation",
        ),
    ),
    (
        r"collective operation timeout|Watchdog caught collective|timed out after \d+ ?s|"
        r"\bTimeoutError\b",
        _program(
            "the job timed out",
            "an operation waited too long (a stuck data source or a rank that died first); "
            "read the log above the timeout for the first failure",
        ),
    ),
    (
        r"No CUDA GPUs are available|CUDA driver initialization failed|no CUDA-capable device",
        _program(
            "the job sees no GPU",
            "name GPUs in gpus: (ids or UUIDs), and check that the platform passes them",
        ),
    ),
    (
        r"[Pp]ermission denied",
        _program(
            "permission denied",
            "the job runs as its UID:GID: make mount sources readable (and results_root "
            "writable) for it; HOME and caches already live under /results",
        ),
    ),
    (
        r"No such container",
        _program(
            "the container is gone",
            "it died at start or was removed; see taospec logs and docker ps -a",
        ),
    ),
    (
        r"FileNotFoundError|No such file or directory",
        _program(
            "a file the job needs is missing",
            "check the paths in the spec against the mounts (the job sees container paths), "
            "and that upstream targets produced what this one reads",
        ),
    ),
)

_XID = re.compile(r"\bXid\b(?:\s*\([^)\n]*\))?:?\s*(\d+)")
# Xids that the GPU reports for an application's own fault, not the hardware's.
_PROGRAM_XIDS = frozenset({13, 31, 43})
_EXCEPTION = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?::.*)?$")
KILLED = _program(
    "the job was killed (SIGKILL)",
    "nobody asked taospec to stop it, so most likely the host ran out of memory (dmesg "
    "says); lower the batch size or the number of data loader workers",
)
"""What a SIGKILL nothing else explains is taken for: the kernel's OOM killer."""
_SIGNAL_IN_MESSAGE = re.compile(r"(?:killed by )?signal:? (\d+)")
_SENTENCE_WIDTH = 200
_WRAPPERS = ("ChildFailedError",)  # torchrun's report of a rank that failed before it
_SIGNALS: dict[int, Diagnosis] = {
    signal.SIGBUS: _SHM,
    signal.SIGTERM: _infra(
        "the job was stopped from outside (SIGTERM)",
        "something other than taospec stopped it (a host shutdown, a scheduler, docker stop); "
        "submit again",
    ),
    signal.SIGKILL: KILLED,
}


KILLED_FROM_OUTSIDE = _infra(
    "the container was killed (SIGKILL) and docker saw no out-of-memory kill",
    "something other than taospec stopped it (docker stop or docker kill, an engine "
    "restart); submit again",
)
"""A container's SIGKILL that docker's own OOM report rules out as memory (``docker stop``
of a command that ignores SIGTERM ends the same way)."""


def diagnose(text: str) -> Diagnosis | None:
    """The first known failure ``text`` shows, if any."""
    return _gpu_fault(text) or _first(_KNOWN, text)


def classify(
    exit_code: int | None, native_message: str, log_tail: str, *, command: str = ""
) -> Diagnosis:
    """Why a job ended in ERROR, with ``ERR_INFRA`` or ``ERR_PROGRAM``; never None.

    ``native_message`` is what the backend said (docker's state or error text,
    ``slurm: NODE_FAIL``, ``killed by signal 15``); ``log_tail`` the job's last
    output. The backend's word comes first, then the log's known failures, then
    a traceback's last line, then the exit code. ``command`` is the failed step's
    command line: an ssh that timed out names the ConnectTimeout it carries.
    """
    both = f"{native_message}\n{log_tail}"
    found = _first(_NATIVE, native_message) or diagnose(both)
    given = _CONNECT_TIMEOUT.search(command)
    if found is _SSH_NO_ANSWER and given:
        return _ssh_timed_out(f"{given[1]} s")
    return found or _traceback(log_tail) or _by_exit(exit_code, native_message, both)


def cannot_start(program: str, why: str) -> Diagnosis:
    """A program a step of the job's plan runs on this machine (``install``, ``docker``, the
    local launch's ``/bin/sh``) that taospec could not start, ``why`` as the shell says it:
    the machine's fault, which a retry repeats until it is mended."""
    return _program(
        f"taospec cannot start {program} on this machine ({why}), which a step of the job's "
        "plan runs",
        "it is not the job's command; install it, or give taospec a PATH that holds one it may run",
    )


def folder_gone(folder: str) -> Diagnosis:
    """A launch whose folder, which the plan made before it, was removed in between."""
    return _infra(
        f"the job's folder {folder}, which the plan made before the launch, is gone",
        "something removed it in between (a cleanup of the results root?); run the job again",
    )


def _first(table: tuple[tuple[str, Diagnosis], ...], text: str) -> Diagnosis | None:
    for pattern, diagnosis in table:
        if re.search(pattern, text):
            return diagnosis
    return None


def _gpu_fault(text: str) -> Diagnosis | None:
    codes = [int(code) for code in _XID.findall(text)]
    if not codes:
        return None
    hardware = [code for code in codes if code not in _PROGRAM_XIDS]
    if hardware:
        return _infra(
            f"a GPU fault (Xid {hardware[-1]})",
            "the GPU itself failed; resubmit on other GPUs and tell the host's admins",
        )
    return _program(
        f"the job's GPU code faulted (Xid {codes[-1]}, an application error)",
        "an illegal memory access or a bad kernel in the job; CUDA_LAUNCH_BLOCKING=1 names "
        "the failing operation",
    )


def _traceback(log_tail: str) -> Diagnosis | None:
    _, marker, after = log_tail.partition("Traceback (most recent call last)")
    if not marker:
        return None
    raised = [m.group(0).strip() for line in after.splitlines() if (m := _EXCEPTION.match(line))]
    causes = [line for line in raised if not line.partition(":")[0].endswith(_WRAPPERS)] or raised
    # redacted before it is cut: a cut through a value leaves a part redaction cannot find
    last = _clip(lint.redacted(causes[-1])) if causes else "an exception"
    unknown = lint.unknown_names()
    if unknown and causes:  # its message is the job's own text, which may hold their values
        verb = "is" if len(unknown) == 1 else "are"
        last = f"{last.partition(':')[0]} (its message is left out: {', '.join(unknown)} "
        last += f"{verb} not set here, so the value could not be kept out of it)"
    return _program(
        f"the program raised {last}",
        "fix what the traceback shows (taospec logs ID prints it whole); running it again "
        "will fail the same way",
    )


def _by_exit(exit_code: int | None, native_message: str, both: str) -> Diagnosis:
    number = _signal_number(exit_code, native_message)
    if number is not None:
        return _by_signal(number)
    if exit_code == 126 and "Argument list too long" in both:  # E2BIG, said as a shell says it
        return _TOO_LONG
    if exit_code in (126, 127):
        return _program(
            f"the job's command cannot be started (exit {exit_code})",
            "check the command's first word exists in the image and is executable",
        )
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    return _program(
        f"the job failed ({code}) without an error taospec recognises",
        "read the end of its output (taospec logs ID) for the cause",
    )


def _signal_number(exit_code: int | None, native_message: str) -> int | None:
    found = _SIGNAL_IN_MESSAGE.search(native_message)
    if found:
        return int(found.group(1))
    if exit_code is not None and 128 < exit_code < 128 + 65:
        return exit_code - 128
    if exit_code is not None and exit_code < 0:
        return -exit_code
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _by_signal(number: int) -> Diagnosis:
    known = _SIGNALS.get(number)
    if known is not None:
        return known
    return _program(
        f"the job crashed ({_signal_name(number)})",
        "a crash inside the program or a library it loads; read the end of its output "
        "(taospec logs ID)",
    )


def _clip(text: str) -> str:
    return text if len(text) <= _SENTENCE_WIDTH else text[: _SENTENCE_WIDTH - 3] + "..."
