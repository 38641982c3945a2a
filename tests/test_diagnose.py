"""Known failures become a sentence saying what happened and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taospec.diagnose import INFRA, PROGRAM, diagnose
from tests.conftest import Runner, write


@pytest.mark.parametrize(
    ("output", "what", "err_class"),
    [
        (
            'docker: Error response from daemon: could not select device driver "" with '
            "capabilities: [[gpu]].",
            "no GPU runtime on the Docker host",
            INFRA,
        ),
        (
            "Error response from daemon: unauthorized: authentication required",
            "the registry refused the image",
            INFRA,
        ),
        (
            "Error response from daemon: pull access denied for nvcr.io/x, repository does not "
            "exist or may require 'docker login'",
            "the image cannot be found",
            INFRA,
        ),
        (
            "Error response from daemon: manifest unknown: manifest unknown",
            "the image cannot be found",
            INFRA,
        ),
        ("OSError: [Errno 28] No space left on device", "a filesystem is full", INFRA),
        (
            "ERROR: Unexpected bus error encountered in worker. Bus error (core dumped)",
            "/dev/shm is too small",
            PROGRAM,
        ),
        (
            "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
            "/dev/shm is too small",
            PROGRAM,
        ),
        (
            "PermissionError: [Errno 13] Permission denied: '/results/train'",
            "permission denied",
            PROGRAM,
        ),
        (
            "KeyError: 'getpwuid(): uid not found: 1000'",
            "the image has no user for the job's UID",
            PROGRAM,
        ),
        (
            'docker: Error response from daemon: Conflict. The container name "/x" is already in '
            'use by container "abc".',
            "a container with the job's name already exists",
            PROGRAM,
        ),
        (
            "Error: No such container: visual_changenet-train-0a1b2c",
            "the container is gone",
            PROGRAM,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "the job ran out of GPU memory",
            PROGRAM,
        ),
        ("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "a GPU fault", INFRA),
        (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.",
            "no Docker engine answers",
            INFRA,
        ),
    ],
)
def test_known_failures_are_recognised(output: str, what: str, err_class: str) -> None:
    found = diagnose(output)
    assert found is not None
    assert (found.what, found.err_class) == (what, err_class)
    assert found.advice


def test_ordinary_output_is_not_a_diagnosis() -> None:
    assert diagnose("epoch 3/10 loss=0.12\nall good") is None


def test_a_failed_jobs_log_tail_is_diagnosed_and_classified(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = write(
        tmp_path / "job.yaml",
        (
            "version: 1\nnetwork_arch: dino\naction: train\nimage: busybox:1\n"
            f"results_root: {tmp_path / 'results'}\n"
            'command: [sh, -c, \'echo "DataLoader worker (pid 77) is killed by signal: Bus error"; '
            "exit 1']\n"
        ),
    )
    done = taospec("run", spec)
    assert done.returncode == 1
    assert "/dev/shm is too small: raise docker.shm_size in the spec" in done.stderr
    job_id = done.stdout.split()[0]
    record = json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())
    assert record["err_class"] == PROGRAM
