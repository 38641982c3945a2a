"""Known failures, recognised from docker's output or a job's log tail.

Each :class:`Diagnosis` says what happened, what to do, and whether retrying
the same job could help (``ERR_INFRA``) or not (``ERR_PROGRAM``).
"""

from __future__ import annotations

import re

from taospec.values import Value

INFRA = "ERR_INFRA"
PROGRAM = "ERR_PROGRAM"


class Diagnosis(Value):
    """A recognised failure."""

    __slots__ = ("what", "advice", "err_class")  # noqa: RUF023 - the constructor's order
    what: str
    advice: str
    err_class: str

    def __init__(self, what: str, advice: str, err_class: str) -> None:
        self._assign(what, advice, err_class)

    def __str__(self) -> str:
        return f"{self.what}: {self.advice}"


_KNOWN: tuple[tuple[str, Diagnosis], ...] = (
    (
        r'could not select device driver "" with capabilities: \[\[gpu\]\]',
        Diagnosis(
            "no GPU runtime on the Docker host",
            "the NVIDIA Container Toolkit is missing or docker is not configured for it; install "
            "it (tao-setup-nvidia-gpu-host --backend docker --install), restart docker, or drop "
            "gpus: from the spec to run without GPUs",
            INFRA,
        ),
    ),
    (
        r"Cannot connect to the Docker daemon|error during connect|docker daemon is not running",
        Diagnosis(
            "no Docker engine answers",
            "start dockerd (or check docker.host and that ssh to it works), then submit again",
            INFRA,
        ),
    ),
    (
        r"unauthorized: authentication required|unauthorized:|denied: requested access",
        Diagnosis(
            "the registry refused the image",
            "NGC_KEY is missing or invalid: export it, list it under env.pass so taospec logs in "
            "with --password-stdin, or run docker login nvcr.io yourself",
            INFRA,
        ),
    ),
    (
        r"pull access denied|manifest unknown|repository does not exist|not found: manifest",
        Diagnosis(
            "the image cannot be found",
            "check the image reference (or its versions.yaml key) and that you may pull it",
            INFRA,
        ),
    ),
    (
        r"[Nn]o space left on device",
        Diagnosis(
            "a filesystem is full",
            "see which one with df -h / /var/lib/docker <results_root>; bind-mounted results are "
            "not counted by docker system df, so clean finished job directories, not images",
            INFRA,
        ),
    ),
    (
        r"is already in use by container|Conflict\. The container name",
        Diagnosis(
            "a container with the job's name already exists",
            "taospec never replaces it; inspect it with docker ps -a and remove it yourself "
            "if it is stale",
            PROGRAM,
        ),
    ),
    (
        r"getpwuid\(\): uid not found",
        Diagnosis(
            "the image has no user for the job's UID",
            "taospec sets USER and LOGNAME for this; check that the command or image does not "
            "unset them (do not run as root instead)",
            PROGRAM,
        ),
    ),
    (
        r"Bus error|DataLoader worker \(pid \d+\) (?:is killed|exited unexpectedly)",
        Diagnosis(
            "/dev/shm is too small",
            "raise docker.shm_size in the spec (e.g. 16g)",
            PROGRAM,
        ),
    ),
    (
        r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED",
        Diagnosis(
            "the job ran out of GPU memory",
            "lower the batch size, or pick GPUs that are free (nvidia-smi)",
            PROGRAM,
        ),
    ),
    (
        r"Xid|uncorrectable ECC|GPU has fallen off the bus",
        Diagnosis("a GPU fault", "the GPU itself failed; resubmit on other GPUs", INFRA),
    ),
    (
        r"[Pp]ermission denied",
        Diagnosis(
            "permission denied",
            "the job runs as its UID:GID: make mount sources readable (and results_root "
            "writable) for it; HOME and caches already live under /results",
            PROGRAM,
        ),
    ),
    (
        r"No such container",
        Diagnosis(
            "the container is gone",
            "it died at start or was removed; see taospec logs and docker ps -a",
            PROGRAM,
        ),
    ),
)


def diagnose(text: str) -> Diagnosis | None:
    """The first known failure ``text`` shows, if any."""
    for pattern, diagnosis in _KNOWN:
        if re.search(pattern, text):  # compiled on first use: only a failure pays
            return diagnosis
    return None
