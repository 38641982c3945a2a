"""``gpus: {free: N}``: at submit, under the GPU lock, the N GPUs of the job's host that no
running job holds and that use the least memory, read with ``nvidia-smi`` there (the
stand-in ``tests/fakes/nvidia-smi``); the dry run shows ``$GPU_IDS``, the sidecar and
``show`` the ids chosen. Docker jobs go through ``tests/fakes/gpu-engine/docker``."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from taospec.ledger import Ledger
from tests.conftest import Runner, bash_words, taospec_command
from tests.test_docker_jobs import job_file as docker_job_file
from tests.test_local_jobs import job_file, wait_for
from tests.test_shared_gpus import STAND_IN, docker

FAKES = Path(__file__).parent / "fakes"
# GPU 1 and 3 are nearly idle, 2 is in use a little, 0 a lot (by something outside taospec).
FOUR = "0, GPU-aaaa, 9000 MiB\n1, GPU-bbbb, 10 MiB\n2, GPU-cccc, 500 MiB\n3, GPU-dddd, 20 MiB"


def smi(csv: str) -> dict[str, str]:
    return {"PATH": f"{FAKES}:{os.environ['PATH']}", "FAKE_NVIDIA_SMI_CSV": csv}


def test_local_jobs_get_the_least_used_free_gpus(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    env = smi(FOUR)
    first = job_file(tmp_path / "a", "sh -c 'echo $CUDA_VISIBLE_DEVICES; sleep 300'")
    first.write_text(first.read_text() + "gpus: {free: 2}\n")
    running = taospec("run", "--detach", first, env=env)
    assert running.returncode == 0, running.stderr
    first_id = running.stdout.strip()
    try:
        log = tmp_path / "a" / "results" / first_id / "taospec.log"
        wait_for(lambda: log.exists() and log.read_text())
        assert log.read_text() == "1,3\n"
        assert Ledger(state_dir).sidecar(first_id)["gpus_chosen"] == "1,3"
        assert json.loads(taospec("show", first_id).stdout)["gpus_chosen"] == "1,3"
        # While it holds 1 and 3, the next job gets the two left.
        second = job_file(tmp_path / "b", "sh -c 'echo $CUDA_VISIBLE_DEVICES'")
        second.write_text(second.read_text() + "gpus: {free: 2}\n")
        done = taospec("run", second, env=env)
        assert done.returncode == 0, done.stderr
        second_id = done.stdout.split()[0]
        assert (tmp_path / "b" / "results" / second_id / "taospec.log").read_text() == "0,2\n"
        # A third finds none free, says who holds what, and opens no record.
        third = job_file(tmp_path / "c", "true")
        third.write_text(third.read_text() + "gpus: {free: 3}\n")
        refused = taospec("run", third, env=env)
        assert refused.returncode == 1
        assert f"GPU 1 held by running job {first_id}" in refused.stderr
        assert "need 3 free GPU(s), 2 of 4 free" in refused.stderr
        assert len(list((state_dir / "jobs").glob("*.json"))) == 2
    finally:
        taospec("cancel", first_id)


def test_the_dry_run_says_the_ids_are_chosen_at_submit(taospec: Runner, tmp_path: Path) -> None:
    spec = docker_job_file(tmp_path, "busybox:1", "echo hi", gpus="{free: 2}")
    shown = taospec("run", "-n", spec)
    assert shown.returncode == 0, shown.stderr
    assert "# Note: gpus: the 2 GPU ids are chosen at submit (shown as $GPU_IDS" in shown.stdout
    line = next(x for x in shown.stdout.splitlines() if "--gpus" in x)
    assert line.strip() == "--gpus '\"device='\"$GPU_IDS\"'\"' \\"
    words = bash_words(line.strip().rstrip("\\"), {"GPU_IDS": "1,3"})
    assert words == ["--gpus", '"device=1,3"']


def test_free_gpus_are_refused_on_slurm_only(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "true", gpus="{free: 1}")
    spec.write_text(spec.read_text().replace("platform: local", "platform: slurm"))
    refused = taospec("validate", spec)
    assert refused.returncode == 2
    assert (
        "gpus: {free: N} reads the GPUs of the host the job runs on, which a Slurm job does not "
        "know before the scheduler places it" in refused.stderr
    )
    brev = "platform: brev\nbrev: {instance: box}\nuser: '1000:1000'"
    spec.write_text(spec.read_text().replace("platform: slurm", brev))
    allowed = taospec("validate", spec)
    assert allowed.returncode == 0, allowed.stderr


@pytest.mark.engine
def test_a_docker_job_skips_gpus_other_users_containers_hold(
    taospec: Runner, tmp_path: Path, state_dir: Path, engine: str
) -> None:
    name = f"free-gpus-{secrets.token_hex(4)}"
    made = docker("create", "--name", name, "--gpus", '"device=1"', "--label",
                  "tao-owner=alice", engine, "sleep", "300")  # fmt: skip
    assert made.returncode == 0, made.stderr
    real = subprocess.run(
        ["sh", "-c", "command -v docker"], capture_output=True, text=True, check=True
    )
    env = {
        **smi("0, GPU-aaaa, 8000 MiB\n1, GPU-bbbb, 10 MiB\n2, GPU-cccc, 100 MiB"),
        "FAKE_DOCKER_REAL": real.stdout.strip(),
        "FAKE_DOCKER_RUNNING": made.stdout.strip(),
        "FAKE_DOCKER_GPUS_LOG": str(tmp_path / "gpus.log"),
    }
    env["PATH"] = f"{STAND_IN}:{env['PATH']}"
    spec = docker_job_file(tmp_path, engine, "echo hi", gpus="{free: 1}")
    try:
        done = taospec("run", spec, env=env)
        assert done.returncode == 0, done.stderr
        job_id = done.stdout.split()[0]
        assert (tmp_path / "gpus.log").read_text() == '"device=2"\n'
        assert json.loads(taospec("show", job_id).stdout)["gpus_chosen"] == "2"
        assert "job: GPUs 2 chosen" in done.stderr
        plan = json.loads(taospec("show", "--plan", "--json", job_id).stdout)
        assert '"device=2"' in plan["steps"][-1]["argv"]
        more = docker_job_file(tmp_path, engine, "echo hi", gpus="{free: 3}")
        refused = taospec("run", more, env=env)
        assert refused.returncode == 1
        assert f"GPU 1 held by container {name} (owner alice)" in refused.stderr
    finally:
        ids = [p.stem for p in (state_dir / "jobs").glob("*.json")]
        docker("rm", "-f", name, *ids)


def pull_held(tmp_path: Path, engine: str) -> tuple[dict[str, str], dict[str, str], Path]:
    """The environment of the GPU engine's stand-in with the four GPUs; the same with a pull
    of ``engine`` that waits until the returned gate exists."""
    real = subprocess.run(["sh", "-c", "command -v docker"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    env = {**smi(FOUR), "FAKE_DOCKER_REAL": real}
    env["PATH"] = f"{STAND_IN}:{env['PATH']}"
    gate = tmp_path / "pulled"
    return env, {**env, "FAKE_DOCKER_PULLED": engine, "FAKE_DOCKER_PULL": str(gate)}, gate


def test_a_job_pulling_its_image_keeps_its_gpus_and_no_other_job_waiting(
    taospec: Runner, tmp_path: Path, state_dir: Path, engine: str
) -> None:
    """The GPU lock was held through every step of a submit: while one job pulled an image
    of many gigabytes, every other GPU job of the machine waited for it. The lock now ends
    at the record's open, and from then on the PENDING record holds its GPUs while the
    taospec that opened it (or a launch it started) runs."""
    env, pulling, gate = pull_held(tmp_path, engine)

    def spec(name: str, gpus: str) -> Path:
        return docker_job_file(tmp_path / name, engine, "sleep 300", gpus=gpus)

    def detached(name: str, gpus: str) -> subprocess.CompletedProcess[str]:
        return taospec("run", "--detach", spec(name, gpus), env=env, timeout=30)

    first = subprocess.Popen(
        [*taospec_command(), "run", "--detach", str(spec("a", "[1]"))],
        env={**taospec.env, **pulling}, cwd=taospec.cwd, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: Path(f"{gate}.waiting").exists())
        (pulling_id,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
        other = detached("b", "[2]")  # waited for the pull to end: 30 s, then a failure
        assert other.returncode == 0, other.stderr
        same = detached("c", "[1]")
        assert same.returncode == 2
        assert f"overlap GPUs 1 of job {pulling_id}, launching" in same.stderr
        free = detached("d", "{free: 1}")  # 1 and 2 are held: 3 uses the least memory
        assert free.returncode == 0, free.stderr
        assert json.loads(taospec("show", free.stdout.strip()).stdout)["gpus_chosen"] == "3"
        gate.touch()
        out, err = first.communicate(timeout=60)
        assert (first.returncode, out.strip()) == (0, pulling_id), err
    finally:
        if first.poll() is None:
            os.killpg(first.pid, 9)
        ids = [p.stem for p in (state_dir / "jobs").glob("*.json")]
        docker("rm", "-f", *ids)


def test_a_launch_that_was_killed_holds_no_gpus(
    taospec: Runner, tmp_path: Path, state_dir: Path, engine: str
) -> None:
    env, pulling, gate = pull_held(tmp_path, engine)
    killed = subprocess.Popen(
        [*taospec_command(), "run", "--detach",
         str(docker_job_file(tmp_path / "a", engine, "sleep 300", gpus="[1]"))],
        env={**taospec.env, **pulling}, cwd=taospec.cwd, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    wait_for(lambda: Path(f"{gate}.waiting").exists())
    os.killpg(killed.pid, 9)
    killed.wait()
    (stale,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
    assert Ledger(state_dir).get(stale).state == "PENDING"
    again = docker_job_file(tmp_path / "b", engine, "sleep 300", gpus="[1]")
    try:
        done = taospec("run", "--detach", again, env=env)
        assert done.returncode == 0, done.stderr
    finally:
        docker("rm", "-f", *[p.stem for p in (state_dir / "jobs").glob("*.json")])


def test_the_note_says_one_gpu_or_how_many() -> None:
    from taospec.plan import gpu_ids_note

    assert gpu_ids_note(1).startswith("gpus: the GPU id is chosen at submit")
    assert gpu_ids_note(3).startswith("gpus: the 3 GPU ids are chosen at submit")
