"""Shared GPU hosts: the overlap check asks the engine which running containers hold which
GPUs (taospec's from any ledger, and any container with a GPU device request), and names
the container, its owner and the GPUs when it refuses.

The engine here has no GPU runtime: ``docker create --gpus`` makes containers with real
device requests that cannot start, and the stand-in ``tests/fakes/gpu-engine/docker``
lists them as running (and runs a job's container without its ``--gpus`` flag)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from taospec.executor import Container, inspect_gpus
from tests.conftest import Runner
from tests.test_docker_jobs import job_file

pytestmark = pytest.mark.engine
STAND_IN = Path(__file__).parent / "fakes" / "gpu-engine"


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def created(engine: str) -> Iterator[list[str]]:
    """Names of containers made by the test; removed after it."""
    names: list[str] = []
    yield names
    if names:
        docker("rm", "-f", *names)


def create(created: list[str], engine: str, *flags: str) -> str:
    name = f"shared-gpus-{secrets.token_hex(4)}"
    made = docker("create", "--name", name, *flags, engine, "sleep", "300")
    assert made.returncode == 0, made.stderr
    created.append(name)
    return made.stdout.strip()


@pytest.fixture
def gpu_engine(taospec: Runner, state_dir: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment that puts the stand-in docker first on PATH."""
    real = shutil.which("docker")
    assert real is not None
    env = {
        "PATH": f"{STAND_IN}:{os.environ['PATH']}",
        "FAKE_DOCKER_REAL": real,
        "FAKE_DOCKER_GPUS_LOG": str(tmp_path / "gpus.log"),
    }
    yield env
    jobs = state_dir / "jobs"
    ids = [p.stem for p in jobs.glob("*.json")] if jobs.exists() else []
    if ids:
        docker("rm", "-f", *ids)


def test_device_requests_and_labels_are_read_from_the_real_engine(
    engine: str, created: list[str]
) -> None:
    alice = create(
        created,
        engine,
        "--gpus",
        '"device=0,2"',
        "--label",
        "tao-job=detect-train-1a2b3c",
        "--label",
        "tao-owner=alice",
    )
    anyone = create(created, engine, "--gpus", "all", "--user", "1234:1234")
    counted = create(created, engine, "--gpus", "2")
    plain = create(created, engine, "--label", "tao-job=no-gpus")
    found = inspect_gpus([alice, anyone, counted, plain])
    assert found == [
        Container(created[0], "0,2", "detect-train-1a2b3c", "alice", ""),
        Container(created[1], "all", None, None, "1234:1234"),
        Container(created[2], "0,1", None, None, ""),
    ]
    assert found[0].whose() == "job detect-train-1a2b3c, owner alice"
    assert found[1].whose() == "user 1234:1234, no tao-owner label"


def test_a_running_container_of_another_user_is_refused_by_name_owner_and_gpu(
    taospec: Runner, tmp_path: Path, engine: str, created: list[str], gpu_engine: dict[str, str]
) -> None:
    other = create(
        created,
        engine,
        "--gpus",
        '"device=0"',
        "--label",
        "tao-job=hello-greet-0f0f0f",
        "--label",
        "tao-owner=alice",
    )
    env = {**gpu_engine, "FAKE_DOCKER_RUNNING": other}
    spec = job_file(tmp_path, engine, "echo hi", gpus="[0]")
    refused = taospec("run", spec, env=env)
    assert refused.returncode == 2, refused.stderr
    assert (
        f"GPUs 0 overlap GPUs 0 of running container {created[0]} (job hello-greet-0f0f0f, "
        "owner alice) on the local engine; pick free ids, wait for it, or pass "
        "--allow-shared-gpus"
    ) in refused.stderr
    assert refused.stdout == ""
    # A free GPU runs, and the job's container says who submitted it.
    spec = job_file(tmp_path, engine, "echo hi", gpus="[1]")
    done = taospec("run", spec, env=env)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    labels = docker("inspect", "--format", "{{json .Config.Labels}}", job_id).stdout
    assert '"tao-owner":"root"' in labels
    assert (tmp_path / "gpus.log").read_text() == '"device=1"\n'


def test_a_container_without_an_owner_label_is_named_with_its_user(
    taospec: Runner, tmp_path: Path, engine: str, created: list[str], gpu_engine: dict[str, str]
) -> None:
    other = create(created, engine, "--gpus", "all", "--user", "4321:4321")
    env = {**gpu_engine, "FAKE_DOCKER_RUNNING": other}
    spec = job_file(tmp_path, engine, "echo hi", gpus="[3]")
    refused = taospec("run", spec, env=env)
    assert refused.returncode == 2
    assert (
        f"GPUs 3 overlap GPUs all of running container {created[0]} (user 4321:4321, no "
        "tao-owner label)"
    ) in refused.stderr
    allowed = taospec("run", "--allow-shared-gpus", spec, env=env)
    assert allowed.returncode == 0, allowed.stderr
