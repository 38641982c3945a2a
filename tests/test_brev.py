"""platform: brev, end to end through the brev emulator (tests/fakes/brev) and the real engine.

The emulator's instances are this machine: a remote command runs under
``bash -c`` here and its ``docker`` reaches the local engine, so every job
below really starts a container. The real ``taospec`` command runs with
``tests/fakes`` first on PATH.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taospec import plantext
from taospec.errors import CommandFailed, InvalidInput
from taospec.executor import check_gpus, run_step
from taospec.identity import Identity
from taospec.ledger import Ledger
from taospec.plan import GPU_IDS, Plan
from taospec.platforms import brev, render
from tests.conftest import (
    COUNTED,
    ROOT,
    Runner,
    a_follow_shows_the_bar_as_it_is_redrawn,
    bash_words,
    bytes_read,
    load_job,
    progress_bar,
    refused_by_validate_and_run,
    write,
)
from tests.remote_shell import absolute, containers, docker, remote_calls
from tests.test_docker_jobs import (
    DROPPING_FOLLOW,
    ENGINE_PROXY,
    EPOCHS,
    GATED_FAILING,
    HALF_WRITTEN,
    INTERLEAVED,
    INTERLEAVED_FAILING,
    LIKE_DOCKERS_OWN,
    LOG_CHUNK,
    LONG_LAST_LINES,
    LONG_LINE,
    LONG_THEN_LIVE,
    PIECES_FAILING,
    UNENDED_TAILS,
    _docker_following,
    _only_job,
    _wait_for,
    a_look_hands_on_each_line_as_docker_logs_gives_it,
    followed_tail_of_long_then_live,
    last_lines_of_a_failure_broken_by_the_other_stream,
    last_lines_of_a_failure_logged_in_pieces,
    logs_of_a_line_broken_by_the_other_stream,
    look_while_a_value_is_half_written,
    start,
    stop_process,
    stopped_following,
    tail_of_a_line_logged_in_pieces,
    tail_reads_of_a_gated_failure,
    tails_read_from_the_end,
)
from tests.test_quoting import JOB_IDS, commands, docker_args, hostile

pytestmark = pytest.mark.engine

FAKES = ROOT / "tests" / "fakes"
SECRET = "nvapi-canary-7f3e9a1b2c4d"
ROOT_LAUNCHER = Identity(0, 0, (), "root")


# -- the emulator -------------------------------------------------------------


class Brev:
    """The emulator's environment, state file and the docker containers the tests made."""

    def __init__(self, tmp: Path) -> None:
        self.state = tmp / "brev-state.json"
        self.env = {
            "PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}",
            "BREV_EMULATOR_STATE": str(self.state),
        }
        self.job_ids: list[str] = []

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        return subprocess.run(
            ["brev", *args],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def add(self, name: str, *flags: str) -> None:
        assert self("_emulator", "add", name, *flags).returncode == 0

    def data(self) -> dict:
        return json.loads(self.state.read_text())

    def instances(self) -> list[str]:
        listed = json.loads(self("ls", "--json").stdout)["workspaces"] or []
        return [w["name"] for w in listed]

    def commands(self) -> list[dict]:
        return self.data()["exec_log"]


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Brev]:
    """A logged-in emulator; the containers of the jobs a test records are removed after it."""
    fake = Brev(tmp_path)
    assert fake("login", "--token", "emulator-token").returncode == 0
    yield fake
    for job_id in fake.job_ids:
        for cid in containers(job_id):
            docker("rm", "-f", cid)


def job_file(
    root: Path,
    image: str,
    command: str,
    instance: str = "box",
    ephemeral: bool = False,
    **extra: str,
) -> Path:
    lines = [
        "version: 1",
        "network_arch: hello",
        "action: greet",
        "platform: brev",
        f"brev: {{instance: {instance}, ephemeral: {str(ephemeral).lower()}}}",
        f"image: {image}",
        f"results_root: {root / 'results'}",
        'user: "1000:1000"',
        f"command: {json.dumps(command)}",
        *(f"{key}: {value}" for key, value in {"docker": "{shm_size: 64m}", **extra}.items()),
    ]
    return write(root / "job.yaml", "\n".join(lines) + "\n")


def run(taospec: Runner, emulator: Brev, *args: str, **env: str):
    """``taospec ARGS`` with the emulator on PATH; remembers a printed job id for cleanup."""
    done = taospec(*args, env={**emulator.env, "TAOSPEC_RETRY_INTERVAL": "0.1", **env})
    words = done.stdout.split()
    if args[0] == "run" and words:
        emulator.job_ids.append(words[0])
    return done


def record(state_dir: Path, job_id: str) -> dict:
    return json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())


def states(state_dir: Path, job_id: str) -> list[str]:
    return [t["state"] for t in record(state_dir, job_id)["transitions"]]


def everything_written(state_dir: Path) -> str:
    """Every file the ledger wrote, as one text."""
    return "".join(p.read_text(errors="replace") for p in state_dir.rglob("*") if p.is_file())


# -- the full cycle -------------------------------------------------------------


@pytest.fixture
def ngc_image(engine: str) -> Iterator[str]:
    """The test image under an nvcr.io name, so that the plan has its NGC login step."""
    name = "nvcr.io/taospec-test/busybox:brev"
    docker("tag", engine, name)
    yield name
    docker("rmi", name)


def test_submit_status_logs_cancel_on_an_instance(
    ngc_image: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    emulator.add("gpu-box", "--env", f"NGC_KEY={SECRET}")
    command = (
        "sh -c 'echo gpu-box; echo line-1; cat {config_path}; "
        'test -n "$NGC_KEY" && echo key-present; echo line-2; exec sleep 300\''
    )
    spec = job_file(
        open_tmp,
        ngc_image,
        command,
        "gpu-box",
        env="{pass: [NGC_KEY]}",
        spec="{greeting: hi}",
    )
    done = run(taospec, emulator, "run", "--detach", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    rec = record(state_dir, job_id)
    assert rec["platform"] == "brev"
    assert rec["backend_ref"] == f"gpu-box/{job_id}"
    assert states(state_dir, job_id) == ["PENDING", "RUNNING"]
    assert len(containers(job_id)) == 1

    status = run(taospec, emulator, "status", job_id, "--json")
    assert json.loads(status.stdout)["state"] == "RUNNING", status.stdout + status.stderr

    expected = ["gpu-box", "line-1", "greeting: hi", "key-present", "line-2"]
    logs = _wait_for_logs(taospec, emulator, job_id, expected)
    assert logs.splitlines() == expected  # the job's own "gpu-box" stays, brev's trailer goes
    tail = run(taospec, emulator, "logs", job_id, "--tail", "1")
    assert tail.stdout == "line-2\n"

    cancelled = run(taospec, emulator, "cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "container removed on instance gpu-box" in cancelled.stdout
    assert containers(job_id) == []
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "CANCELED"]
    assert emulator.instances() == ["gpu-box"]  # not ephemeral: the instance stays

    ran = emulator.commands()
    assert {c["instance"] for c in ran} == {"gpu-box"}  # stdin never added instance names
    login = [c["command"] for c in ran if "docker login" in c["command"]]
    assert login, "the plan has an NGC login step"
    assert '"$NGC_KEY" | docker login nvcr.io' in login[0]
    outputs = done.stdout + done.stderr + status.stdout + logs + cancelled.stdout
    assert SECRET not in outputs
    assert SECRET not in everything_written(state_dir)
    assert all(SECRET not in c["command"] for c in ran)


def _wait_for_logs(taospec: Runner, emulator: Brev, job_id: str, lines: list[str]) -> str:
    import time

    deadline = time.monotonic() + 30
    while True:
        out = run(taospec, emulator, "logs", job_id).stdout
        if out.splitlines()[-1:] == lines[-1:] or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def test_a_finished_job_is_complete_and_status_reads_it_from_the_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    emulator.add("box")
    spec = job_file(open_tmp, engine, "sh -c 'id -u > {results_dir}/uid; echo done'")
    done = run(taospec, emulator, "run", spec)
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == "COMPLETE"
    assert (open_tmp / "results" / job_id / "uid").read_text() == "1000\n"
    assert (open_tmp / "results" / job_id).stat().st_uid == 1000
    again = run(taospec, emulator, "status", job_id)
    assert again.stdout.split()[:2] == [job_id, "COMPLETE"]


def test_a_failing_job_is_an_error_with_its_code_and_log_tail(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    emulator.add("box")
    spec = job_file(open_tmp, engine, "sh -c 'echo about to fail; exit 3'")
    done = run(taospec, emulator, "run", spec)
    assert done.returncode == 1
    job_id = done.stdout.split()[0]
    assert record(state_dir, job_id)["terminal_state"] == "ERROR"
    assert "exited with code 3" in done.stderr
    assert "| about to fail" in done.stderr
    assert "| box" not in done.stderr  # brev's trailing instance line is not the job's output


def test_a_look_at_a_running_container_shows_no_part_of_a_value_being_written(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # logs (not -f) printed the unended last line as docker logs gave it, brev's trailing
    # instance line joined to it: the first part of a passed value the job was still
    # writing went out, unredacted
    spec, passed = _passing_a_value(emulator, open_tmp, engine, HALF_WRITTEN)
    done = run(taospec, emulator, "run", "--detach", spec, **passed)
    assert done.returncode == 0, done.stderr

    look_while_a_value_is_half_written(_on_box(taospec, emulator), done.stdout.strip(), passed)


def test_a_look_at_all_of_the_output_hands_on_each_line_as_it_comes_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # logs (not -f) gathered the whole output brev exec passed on before it printed a line:
    # the output of a long run, gigabytes, was held in memory
    emulator.add("box")
    done = run(taospec, emulator, "run", job_file(open_tmp, engine, EPOCHS))
    assert done.returncode == 0, done.stderr
    env = {**taospec.env, **emulator.env}
    a_look_hands_on_each_line_as_docker_logs_gives_it(
        env, open_tmp, done.stdout.split()[0], open_tmp
    )


def test_a_line_of_stdout_is_not_broken_by_a_line_of_stderr_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # logs read what brev exec passed on of docker logs' stdout and stderr as one pipe: a
    # stderr line broke a stdout line the job was writing, and the value in it, in two
    spec, passed = _passing_a_value(emulator, open_tmp, engine, INTERLEAVED)
    done = run(taospec, emulator, "run", "--detach", spec, **passed)
    assert done.returncode == 0, done.stderr

    logs_of_a_line_broken_by_the_other_stream(
        _on_box(taospec, emulator), done.stdout.strip(), passed
    )


def test_tail_on_an_instance_counts_whole_lines_and_never_begins_inside_one(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # logs --tail N passed N to docker logs, which counts each piece of a long line as a
    # line: --tail 1 began inside the line, with the second part of the passed value
    spec, passed = _passing_a_value(emulator, open_tmp, engine, LONG_LINE)
    done = run(taospec, emulator, "run", spec, **passed)
    assert done.returncode == 0, done.stderr

    tail_of_a_line_logged_in_pieces(_on_box(taospec, emulator), done.stdout.split()[0], passed)


def _logs_reads(emulator: Brev) -> Callable[[], list[list[str]]]:
    """The arguments of each ``docker logs`` the instance ran (each read's last command)."""

    def reads() -> list[list[str]]:
        ran = [c["command"].rpartition("; ")[2] for c in emulator.commands()]
        return [shlex.split(last)[1:] for last in ran if last.startswith("docker logs ")]

    return reads


def test_tail_on_an_instance_reads_a_window_at_the_end_of_a_large_output(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # logs --tail 3 read all of the container's output over brev exec to count its whole
    # lines: a look at the end of a long training job carried gigabytes
    spec, passed = _passing_a_value(emulator, open_tmp, engine, LONG_LAST_LINES)
    done = run(taospec, emulator, "run", spec, **passed)
    assert done.returncode == 0, done.stderr

    job_id = done.stdout.split()[0]
    tails_read_from_the_end(_on_box(taospec, emulator), job_id, passed, _logs_reads(emulator))


def test_the_last_lines_shown_of_a_failed_container_never_begin_inside_a_line_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # the last lines run prints were docker logs --tail 50, which counts each piece of a
    # line logged in pieces as a line: they began inside the passed value
    spec, passed = _passing_a_value(emulator, open_tmp, engine, PIECES_FAILING)
    last_lines_of_a_failure_logged_in_pieces(run(taospec, emulator, "run", spec, **passed))


def test_the_last_lines_shown_of_a_failed_container_are_each_stream_s_whole_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    # the last lines run prints were read with 2>&1 on the instance: a stderr line written
    # while a stdout line was half written broke it, and the value in it, in two
    spec, passed = _passing_a_value(emulator, open_tmp, engine, INTERLEAVED_FAILING)
    env = {**emulator.env, "TAOSPEC_RETRY_INTERVAL": "0.1", **passed}
    running = start(taospec, "run", spec, env=env)

    job_id = _job_id_seen(state_dir, emulator)

    last_lines_of_a_failure_broken_by_the_other_stream(running, job_id)


def test_the_last_lines_run_shows_are_read_from_the_end_of_the_output_alone_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    # log_tail read all of the container's output over brev exec, each time: run's progress
    # line, every TAOSPEC_PROGRESS_INTERVAL, read the whole log of a multi-day job again
    emulator.add("box")
    spec = job_file(open_tmp, engine, GATED_FAILING)
    env = {**emulator.env, "TAOSPEC_RETRY_INTERVAL": "0.1", "TAOSPEC_PROGRESS_INTERVAL": "0.1"}
    running = start(taospec, "run", spec, env=env)

    job_id = _job_id_seen(state_dir, emulator)

    try:
        tail_reads_of_a_gated_failure(running, job_id, _logs_reads(emulator))
    finally:
        running.kill()


# -- brev's hazards ---------------------------------------------------------------


def docker_shim(folder: Path, flag: Path) -> Path:
    """A ``docker`` that drops the connection once, right after ``docker run`` started a container.

    It kills the ``bash -c`` brev runs the remote command in, exactly what a
    broken ssh connection does; brev then checks the instance and runs the
    whole command again.
    """
    real = subprocess.run(
        ["sh", "-c", "command -v docker"], capture_output=True, text=True, check=True
    )
    folder.mkdir()
    shim = folder / "docker"
    shim.write_text(
        "#!/bin/sh\n"
        f'{shlex.quote(real.stdout.strip())} "$@"; code=$?\n'
        f'if [ "$1" = run ] && [ ! -e {shlex.quote(str(flag))} ]; then\n'
        f"  touch {shlex.quote(str(flag))}; kill -KILL $PPID\n"
        "fi\n"
        'exit "$code"\n'
    )
    shim.chmod(0o755)
    return folder


def test_following_shows_each_streams_unended_last_line_once_the_job_has_ended_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, tmp_path: Path
) -> None:
    # the instance's docker logs --follow may stop before the last piece of a line the job
    # never ended is logged, and logs -f (and run -f) never read it: the last line was lost
    emulator.add("box")
    real = shutil.which("docker")
    stand_in = write(tmp_path / "bin" / "docker", DROPPING_FOLLOW.replace("REAL", repr(real)))
    stand_in.chmod(0o755)
    path = f"{stand_in.parent}{os.pathsep}{emulator.env['PATH']}"
    spec = job_file(open_tmp, engine, UNENDED_TAILS)
    job_id = run(taospec, emulator, "run", "--detach", spec).stdout.strip()
    followed = run(taospec, emulator, "logs", "-f", job_id, PATH=path)
    assert followed.returncode == 1, followed.stderr
    assert sorted(followed.stdout.split("\n")) == ["final-err", "final-out", "step"]
    ran = run(taospec, emulator, "run", "-B", "-f", spec, PATH=path)
    assert ran.returncode == 1, ran.stderr
    shown = ran.stdout.splitlines()
    emulator.job_ids.append(shown[-1].split()[0])
    assert shown[0] == "step"
    assert sorted(shown[1:3]) == ["final-err", "final-out"], ran.stdout


def test_a_launch_that_brev_runs_twice_starts_one_container(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path, tmp_path: Path
) -> None:
    emulator.add("box")
    shims = docker_shim(tmp_path / "shims", tmp_path / "dropped")
    spec = job_file(open_tmp, engine, "sleep 300")
    path = f"{FAKES}{os.pathsep}{shims}{os.pathsep}{os.environ['PATH']}"
    done = run(taospec, emulator, "run", "--detach", spec, PATH=path)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert (tmp_path / "dropped").exists(), "the first launch really ran and then broke"
    launches = [c for c in emulator.commands() if "TAOSPEC_LAUNCH" in c["command"]]
    assert [(c["attempt"], c["exit_code"]) for c in launches] == [(1, 255), (2, 0)]
    assert len(containers(job_id)) == 1
    assert states(state_dir, job_id) == ["PENDING", "RUNNING"]
    assert run(taospec, emulator, "status", job_id).stdout.split()[1] == "RUNNING"


def test_a_launch_whose_first_connection_fails_is_run_again_once(
    engine: str, emulator: Brev, open_tmp: Path, monkeypatch
) -> None:
    emulator.add("box")
    for name, value in emulator.env.items():
        monkeypatch.setenv(name, value)
    spec = job_file(open_tmp, engine, "sleep 300")
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER).with_job_id("hello-greet-f1f1f1")
    emulator.job_ids.append(plan.job_id)
    steps = {step.name: step for step in plan.steps}
    run_step(steps["prepare"], os.environ)
    _arm_fail_first_exec(emulator, "box")
    first = run_step(steps["launch"], os.environ)
    assert "TAOSPEC_LAUNCH=started" in first.stdout.splitlines()
    assert "Connection failed, checking instance status..." in first.stderr
    assert len(containers(plan.job_id)) == 1
    again = run_step(steps["launch"], os.environ)  # taospec's own retry is safe too
    assert "TAOSPEC_LAUNCH=exists" in again.stdout.splitlines()
    assert len(containers(plan.job_id)) == 1
    assert brev.backend_ref(first, plan.job_id) == f"box/{plan.job_id}"


def _arm_fail_first_exec(emulator: Brev, name: str) -> None:
    """Set the emulator's documented ``fail_first_exec`` flag on an instance that exists."""
    data = emulator.data()
    data["instances"][name]["fail_first_exec"] = True
    emulator.state.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("command", "mounts", "said", "code"),
    [
        ("/no/such/program", "[]", "no such file", 127),  # the command of the image, mistyped
        ("true", "[{source: /etc/hostname, target: /data}]", "a mount puts a file where", 125),
    ],
)
def test_a_container_the_instance_created_but_could_not_start_is_removed(
    engine: str,
    taospec: Runner,
    emulator: Brev,
    open_tmp: Path,
    state_dir: Path,
    command: str,
    mounts: str,
    said: str,
    code: int,
) -> None:
    # docker run -d on the instance created the container and failed to start it: it stayed
    # "created" there, with the job's passed values in its configuration, until a prune
    value = "launch-" + secrets.token_hex(6)
    emulator.add("box", "--env", f"LAUNCH_TOKEN={value}")
    spec = job_file(open_tmp, engine, command, mounts=mounts, env="{pass: [LAUNCH_TOKEN]}")
    done = run(taospec, emulator, "run", spec)
    job_id = _only_job(state_dir)
    emulator.job_ids.append(job_id)
    assert done.returncode == 1, done.stderr
    assert said in done.stderr.lower()
    rec = record(state_dir, job_id)
    assert (rec["terminal_state"], rec["err_class"]) == ("ERROR", "ERR_PROGRAM")
    assert f"(exit {code})" in rec["transitions"][-1]["message"], rec["transitions"][-1]["message"]
    assert containers(job_id) == []
    assert docker("ps", "-aq", "--filter", f"name=^{job_id}$").stdout == ""


def test_a_container_the_instance_started_is_not_removed_by_a_launch_that_failed(
    engine: str,
    taospec: Runner,
    emulator: Brev,
    open_tmp: Path,
    state_dir: Path,
    tmp_path: Path,
) -> None:
    # the removal of a container created but not started follows docker run's own exit
    # codes; a container that runs when docker run says one of them is left running
    emulator.add("box")
    real = shutil.which("docker")
    stand_in = write(
        tmp_path / "bin" / "docker",
        f'#!/bin/sh\n{shlex.quote(str(real))} "$@"; code=$?\n'
        '[ "$1" = run ] && { echo "docker: the answer was lost" >&2; exit 125; }\n'
        'exit "$code"\n',
    )
    stand_in.chmod(0o755)
    spec = job_file(open_tmp, engine, "sleep 300")
    path = f"{FAKES}{os.pathsep}{stand_in.parent}{os.pathsep}{os.environ['PATH']}"
    done = run(taospec, emulator, "run", spec, PATH=path)
    job_id = _only_job(state_dir)
    emulator.job_ids.append(job_id)
    assert done.returncode == 1, done.stderr
    assert "launch: docker run failed" in done.stderr
    running = docker("inspect", "--format", "{{.State.Status}}", job_id)
    assert running.stdout == "running\n", running.stderr


def test_the_naive_exec_form_is_rejected_and_the_one_argument_form_works(
    engine: str, emulator: Brev
) -> None:
    emulator.add("box")
    naive = shlex.split("brev exec box -- docker ps -a --filter label=tao-job=x")
    glued = emulator(*naive[1:])
    assert glued.returncode == 1
    assert 'could not look up instance "docker"' in glued.stderr
    assert 'could not look up instance "ps"' in glued.stderr
    ran = [c["command"] for c in emulator.commands()]
    assert ran == ["label=tao-job=x"]  # only the last word ran, on box: the rest were names

    command = brev.remote.command(["docker", "ps", "-a", "--filter", "label=tao-job=x"])
    proper = emulator(*brev.exec_argv("box", command)[1:])
    assert proper.returncode == 0, proper.stderr
    assert proper.stdout.splitlines()[0].startswith("CONTAINER ID")
    assert proper.stdout.splitlines()[-1] == "box"  # piped: brev names the instance last


def test_a_slow_instance_is_probed_until_it_answers(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    emulator.add("box", "--probes-before-ready", "4")
    spec = job_file(open_tmp, engine, "echo up")
    done = run(taospec, emulator, "run", spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "COMPLETE"
    for attempt in range(1, 5):
        assert f"probe: not yet ({attempt}/{brev.PROBE_ATTEMPTS}), retrying" in done.stderr
    assert "probe: not yet (5/" not in done.stderr
    assert emulator.commands()[0]["command"] == "echo ok"


def test_an_instance_not_ready_at_submit_is_err_infra_and_retried(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    """Its sshd answers only after the first submit's probe gave up: ``retry:`` submits again."""
    emulator.add("box", "--probes-before-ready", str(brev.PROBE_ATTEMPTS + 3))
    spec = job_file(open_tmp, engine, "echo up", retry="{max: 1}")
    quick = {"TAOSPEC_RETRY_INTERVAL": "0", "TAOSPEC_SUBMIT_BACKOFF": "0"}
    done = run(taospec, emulator, "run", spec, **quick)
    assert done.returncode == 0, done.stderr
    last_id, state = done.stdout.split()
    assert state == "COMPLETE"
    first_id = record(state_dir, last_id)["retry_of"]
    first = record(state_dir, first_id)
    assert (first["terminal_state"], first["err_class"]) == ("ERROR", "ERR_INFRA")
    assert "the job's host did not answer over ssh" in first["transitions"][-1]["message"]
    assert f"job: {first_id} ended ERROR ERR_INFRA while submitting; retry 1 of 1" in done.stderr
    assert not any(first_id in c["command"] for c in emulator.commands())  # nothing ran for it


def test_an_instance_that_never_answers_fails_after_the_probe_budget(
    engine: str, emulator: Brev, open_tmp: Path, monkeypatch
) -> None:
    emulator.add("box", "--probes-before-ready", "10")
    for name, value in emulator.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TAOSPEC_RETRY_INTERVAL", "0")
    plan = render(load_job(job_file(open_tmp, engine, "true")), launcher=ROOT_LAUNCHER)
    probe = plan.steps[0]
    with pytest.raises(Exception, match="no output line starting with 'ok' after 3 attempts"):
        run_step(dataclasses.replace(probe, attempts=3), os.environ)
    assert emulator.commands() == []  # nothing ran on an instance that was not up


def _set_instance(emulator: Brev, name: str, **fields: object) -> None:
    """Set documented emulator fields of an instance that exists."""
    data = emulator.data()
    data["instances"][name].update(fields)
    emulator.state.write_text(json.dumps(data))


NOT_ANSWERING = {
    "sshd down": (
        {"probes_before_ready": 1000},
        "Brev instance box does not answer through brev exec (ssh: connect to host box port "
        "22: Connection refused): check it with brev ls (it may be stopped, starting or "
        "unreachable), and that brev exec box 'echo ok' works from this machine",
    ),
    "logged out": (
        {},
        "Brev instance box does not answer through brev exec (not logged in, run brev login): "
        "check it with brev ls (it may be stopped, starting or unreachable), and that "
        "brev exec box 'echo ok' works from this machine",
    ),
    "its engine down": (
        {"env": {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}},
        "the Docker engine on Brev instance box does not answer (Cannot connect to the Docker "
        "daemon at unix:///nonexistent/docker.sock. Is the docker daemon running?): start "
        "dockerd there",
    ),
}


@pytest.mark.parametrize("fault", sorted(NOT_ANSWERING))
def test_status_logs_and_cancel_exit_2_when_the_instance_does_not_answer(
    fault: str, engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    """As for a Docker engine that does not answer: exit 2, the instance named, what to check,
    nothing written (status said UNKNOWN and exited 0; cancel exited 1 after writing a cancel
    begun and a cancel failed into the sidecar)."""
    emulator.add("box")
    running = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, "sleep 300"))
    assert running.returncode == 0, running.stderr
    job_id = running.stdout.strip()
    (open_tmp / "ended").mkdir()
    ended = run(taospec, emulator, "run", job_file(open_tmp / "ended", engine, "echo ended"))
    assert ended.stdout.split()[1:] == ["COMPLETE"], ended.stderr
    ended_id = ended.stdout.split()[0]
    before = {p.name: p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())}
    fields, said = NOT_ANSWERING[fault]
    if fault == "logged out":
        assert emulator("logout").returncode == 0
    _set_instance(emulator, "box", **fields)
    for verb, cannot in (
        ("status", "cannot tell the state of"),
        ("logs", "cannot read the output of"),
        ("cancel", "cannot cancel"),
    ):
        done = run(taospec, emulator, verb, job_id)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == f"taospec: {cannot} {job_id}: {said}; nothing was changed\n"
    # logs of a job that ended asks status once its output could not be read: brev failed,
    # or the instance's engine did (an empty output and exit 0 before)
    logs = run(taospec, emulator, "logs", ended_id)
    assert (logs.returncode, logs.stdout) == (2, ""), logs.stderr
    assert logs.stderr.endswith(
        f"taospec: cannot read the output of {ended_id}: {said}; nothing was changed\n"
    )
    assert {p.name: p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())} == before
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout.strip() == "running"
    if fault == "logged out":
        assert emulator("login", "--token", "emulator-token").returncode == 0
    _set_instance(emulator, "box", probes_before_ready=0, env={})
    assert run(taospec, emulator, "cancel", job_id).returncode == 0


@pytest.mark.parametrize("sshd_down", [False, True])
def test_following_a_job_whose_output_stops_coming_says_it_may_still_run(
    sshd_down: bool, engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """The instance's docker logs --follow dies (with its sshd, when ``sshd_down``): logs -f
    ended quietly with exit 0, as if the job had."""
    emulator.add("box")
    running = run(
        taospec, emulator, "run", "-d", job_file(open_tmp, engine, "sh -c 'echo one; sleep 300'")
    )
    job_id = running.stdout.strip()
    following = start(taospec, "logs", "-f", job_id, env=emulator.env)
    assert following.stdout is not None
    assert following.stdout.readline() == "one\n"
    if sshd_down:
        _set_instance(emulator, "box", probes_before_ready=1000)
    stop_process(["docker", "logs", "--follow", job_id])
    _, err = stopped_following(following, job_id)
    if sshd_down:
        assert NOT_ANSWERING["sshd down"][1] in err, err
        _set_instance(emulator, "box", probes_before_ready=0)
    else:
        said = "its output stopped (docker logs on instance box exited 143) while the job is"
        assert f"{said} RUNNING" in err, err
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout.strip() == "running"


@pytest.mark.parametrize("fault", ["its own error", "no answer"])
def test_following_a_job_whose_instance_engine_breaks_the_stream_says_what_docker_said(
    fault: str, engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """The instance's engine is reached through a socket that ends each docker logs
    --follow with an error of the engine's own (or stops answering): the docker CLI writes
    its error where it writes the job's stderr and exits 1, and logs -f showed that error
    as the job's output."""
    socket_path = open_tmp / "engine.sock"
    says = f"Error grabbing logs: unexpected EOF in {SECRET}"
    proxy = subprocess.Popen(
        [sys.executable, "-c", ENGINE_PROXY, str(socket_path), "/var/run/docker.sock"],
        env={**os.environ, "DAEMON_SAYS": says},
    )
    try:
        _wait_for(socket_path.exists)
        emulator.add("box", "--env", f"DOCKER_HOST=unix://{socket_path}")
        spec = job_file(open_tmp, engine, "sh -c 'echo one; sleep 300'")
        job_id = run(taospec, emulator, "run", "-d", spec).stdout.strip()
        following = start(taospec, "logs", "-f", job_id, env=emulator.env)
        assert following.stdout is not None
        assert following.stdout.readline() == "one\n"
        if fault == "no answer":
            proxy.terminate()
        else:
            proxy.send_signal(signal.SIGUSR1)
        out, err = stopped_following(following, job_id)
    finally:
        proxy.terminate()
        proxy.wait()
    assert out == ""
    if fault == "no answer":
        assert "the Docker engine on Brev instance box does not answer" in err, err
    else:
        assert (
            "its output stopped (docker logs on instance box exited 1: error from daemon in "
            "stream: Error grabbing logs: unexpected EOF in <redacted>) while the job is "
            "RUNNING" in err
        ), err
    follows = [c for c in emulator.commands() if "--follow" in c["command"]]
    assert [(c["attempt"], c["exit_code"]) for c in follows] == [(1, 0)]  # brev ran it once
    assert SECRET not in err
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout.strip() == "running"


def test_a_jobs_own_lines_that_look_like_dockers_errors_are_shown_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    emulator.add("box")
    spec = job_file(open_tmp, engine, LIKE_DOCKERS_OWN)
    job_id = run(taospec, emulator, "run", "-d", spec).stdout.strip()
    followed = run(taospec, emulator, "logs", "-f", job_id)
    assert followed.returncode == 0, followed.stderr
    assert sorted(followed.stdout.splitlines()) == [
        "error from daemon in stream: Error grabbing logs: unexpected EOF",
        "step",
        "unexpected EOF",
    ], followed.stdout


def test_brevs_notice_that_it_starts_a_stopped_instance_is_not_the_jobs_output(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """brev exec starts a stopped instance before it runs the command, and says so on its
    stdout, after ssh's refusal on its stderr: logs and logs -f showed both as the job's."""
    emulator.add("box")
    spec = job_file(open_tmp, engine, "sh -c 'echo one; echo two >&2'")
    done = run(taospec, emulator, "run", spec)
    assert done.stdout.split()[1:] == ["COMPLETE"], done.stderr
    job_id = done.stdout.split()[0]
    for args in (["logs", "-f", job_id], ["logs", job_id]):
        assert emulator("stop", "box").returncode == 0
        before = len(emulator.commands())
        shown = run(taospec, emulator, *args)
        assert shown.returncode == 0, shown.stderr
        assert (sorted(shown.stdout.splitlines()), shown.stderr) == (["one", "two"], "")
        assert emulator.commands()[before]["attempt"] == 2  # brev started box to read it


def test_a_jobs_last_line_like_the_follows_own_marker_is_the_jobs_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """The follow's remote command says docker's exit code in a line of its own: a job
    whose last stderr line ended with that text had it read as docker's code (the follow
    said the output could not be read, exit 1)."""
    emulator.add("box")
    spec = job_file(open_tmp, engine, "sh -c 'echo step; echo at TAOSPEC_FOLLOWED=7 >&2'")
    done = run(taospec, emulator, "run", spec)
    assert done.stdout.split()[1:] == ["COMPLETE"], done.stderr
    followed = run(taospec, emulator, "logs", "-f", done.stdout.split()[0])
    assert followed.returncode == 0, followed.stderr
    assert sorted(followed.stdout.splitlines()) == ["at TAOSPEC_FOLLOWED=7", "step"]


def test_dockers_error_before_a_dropped_connection_is_not_the_jobs_output(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, tmp_path: Path
) -> None:
    """The instance's engine breaks docker logs --follow (the docker CLI writes its error
    where it writes the job's stderr), then the connection drops before the follow's
    remote command could say docker's code: brev runs the command again, and the follow
    showed docker's error as the job's last stderr line, and left out the job's next one."""
    socket_path = open_tmp / "engine.sock"
    proxy = subprocess.Popen(
        [sys.executable, "-c", ENGINE_PROXY, str(socket_path), "/var/run/docker.sock"],
        env={**os.environ, "DAEMON_SAYS": "Error grabbing logs: unexpected EOF"},
    )
    dropped = tmp_path / "dropped"
    shims = tmp_path / "shims"
    shims.mkdir()
    real = shutil.which("docker")
    assert real is not None
    write(
        shims / "docker",
        "#!/bin/sh\n"  # the connection drops once docker logs has failed, before the marker
        f'{shlex.quote(real)} "$@"; code=$?\n'
        f'if [ "$1" = logs ] && [ "$code" != 0 ] && [ ! -e {shlex.quote(str(dropped))} ]; then\n'
        f"  touch {shlex.quote(str(dropped))}; kill -KILL $PPID\n"
        "fi\n"
        'exit "$code"\n',
    ).chmod(0o755)
    path = f"{FAKES}{os.pathsep}{shims}{os.pathsep}{os.environ['PATH']}"
    try:
        _wait_for(socket_path.exists)
        emulator.add("box", "--env", f"DOCKER_HOST=unix://{socket_path}")
        command = (
            "sh -c 'echo one; echo e1 >&2; while [ ! -e /tmp/gate ]; do sleep 0.2; done; "
            "echo two; echo e2 >&2'"
        )
        job_id = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, command))
        job_id = job_id.stdout.strip()
        env = {**emulator.env, "PATH": path}
        following = start(taospec, "logs", "-f", job_id, env=env)
        assert following.stdout is not None
        assert sorted(following.stdout.readline() for _ in range(2)) == ["e1\n", "one\n"]
        proxy.send_signal(signal.SIGUSR1)
        _wait_for(dropped.exists)
        time.sleep(2)  # brev's second run has shown what the job wrote so far, once more
        assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
        out, err = following.communicate(timeout=60)
    finally:
        proxy.terminate()
        proxy.wait()
    assert following.returncode == 0, err
    assert (sorted(out.splitlines()), err) == (["e2", "two"], "")


def _drop_connection(command: str) -> None:
    """Kill, as a dropped ssh connection would, the emulator's ``bash -c ...`` whose command
    holds ``command``, and what it runs: brev then says "Connection failed" and runs the
    command again."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
                if argv[:2] != [b"bash", b"-c"] or command.encode() not in argv[2]:
                    continue
                shell = int(cmdline.parent.name)
                children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
                os.kill(shell, signal.SIGKILL)
                for child in children:
                    os.kill(int(child), signal.SIGKILL)
                return
            except (OSError, ValueError):
                continue
        time.sleep(0.1)
    raise AssertionError(f"no bash -c {command!r} ran")


def test_following_through_a_dropped_connection_shows_each_line_once(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """brev runs a command again when its ssh connection drops, and docker logs --follow
    then starts from the beginning: the follow showed every earlier line twice, and brev's
    "Connection failed" notice as if the job had written it."""
    emulator.add("box")
    command = (
        "sh -c 'echo one; echo two >&2; echo three; while [ ! -e /tmp/gate ]; do sleep 0.2; "
        "done; echo four; echo five >&2'"
    )
    job_id = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, command))
    job_id = job_id.stdout.strip()
    following = start(taospec, "logs", "-f", job_id, env=emulator.env)
    assert following.stdout is not None
    shown = sorted(following.stdout.readline() for _ in range(3))
    assert shown == ["one\n", "three\n", "two\n"]
    _drop_connection(f"docker logs --follow {job_id} || ")
    time.sleep(2)  # brev's second run has shown what the job wrote so far, once more
    assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
    out, err = following.communicate(timeout=60)
    assert following.returncode == 0, err
    assert (sorted(out.splitlines()), err) == (["five", "four"], "")


def test_a_line_a_dropped_connection_cut_in_two_shows_once_whole(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """The connection drops after docker logs --follow handed on the first piece of each
    stream's first line (docker logs a long line in pieces): that piece showed joined to
    the same line from brev's second run, and on stderr to brev's "Connection failed"."""
    emulator.add("box")
    command = (
        f"sh -c 'head -c {LOG_CHUNK} /dev/zero | tr \\\\0 x; "
        f"head -c {LOG_CHUNK} /dev/zero | tr \\\\0 y >&2; "
        "while [ ! -e /tmp/gate ]; do sleep 0.2; done; echo end; echo end >&2'"
    )
    job_id = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, command))
    job_id = job_id.stdout.strip()
    following = start(taospec, "logs", "-f", job_id, env=emulator.env)

    def both_pieces_logged() -> bool:
        logged = docker("logs", job_id)
        return len(logged.stdout) == len(logged.stderr) == LOG_CHUNK

    _wait_for(both_pieces_logged)
    time.sleep(1)  # the follow has handed both pieces on
    _drop_connection(f"docker logs --follow {job_id} || ")
    time.sleep(2)  # brev's second run has handed them on once more
    assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
    out, err = following.communicate(timeout=60)
    assert following.returncode == 0, err
    shown = sorted((line[0], len(line) - 3, line[-3:]) for line in out.splitlines())
    assert (shown, err) == ([("x", LOG_CHUNK, "end"), ("y", LOG_CHUNK, "end")], ""), shown


@pytest.mark.parametrize("drop", [False, True], ids=["steady", "dropped-connection"])
def test_a_follow_shows_a_progress_bar_before_its_line_ends_on_an_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, drop: bool
) -> None:
    # logs -f handed on whole lines alone: a bar redrawn with \r, which ends its line once
    # an epoch is over, showed nothing until then; and brev runs the read again from the
    # output's start when its connection drops, so the parts shown before come again
    emulator.add("box")
    steps = 2000  # docker logs the line's first 16 KiB as a piece
    command = f"sh -c {shlex.quote(progress_bar(steps, '/tmp/gate'))}"
    started = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, command))
    job_id = started.stdout.strip()
    dropped: list[bool] = []

    def open_gate() -> None:  # after one drop, when asked for; then the gate, as it ends
        if drop and not dropped:
            dropped.append(True)
            _drop_connection(f"docker logs --follow {job_id} || ")
            time.sleep(2)  # brev's second run has handed the bar's piece on once more
        docker("exec", job_id, "touch", "/tmp/gate")

    on_path = Runner({**taospec.env, **emulator.env}, taospec.cwd)
    a_follow_shows_the_bar_as_it_is_redrawn(on_path, job_id, steps, open_gate, open_tmp)
    assert dropped == ([True] if drop else [])


def test_following_the_tail_of_a_long_output_on_an_instance_reads_its_end_alone(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    # logs -f --tail N of a job on an instance carried all of its output over brev exec
    # before the last N lines showed: of a job with days of output, hundreds of megabytes
    emulator.add("box")
    spec = job_file(open_tmp, engine, LONG_THEN_LIVE)
    job_id = run(taospec, emulator, "run", "-d", spec).stdout.strip()
    _wait_for(lambda: docker("logs", "--tail", "1", job_id).stdout == "ready\n", timeout=120)
    following = subprocess.Popen(
        [sys.executable, "-c", COUNTED, "logs", "-f", "--tail", "5", job_id],
        env={**taospec.env, **emulator.env},
        cwd=taospec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _docker_following(job_id), timeout=120)
        assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
        out, err = following.communicate(timeout=120)
    finally:
        following.kill()
    assert following.returncode == 0, err
    followed_tail_of_long_then_live(out)
    whole = len(docker("logs", job_id).stdout)
    assert whole > 60_000_000
    # rchar counts what the brev, ssh and docker processes it waited for read as well (each
    # of brev's runs reads its own Python): far above the windows, far below one copy
    assert bytes_read(err) < whole // 2, (bytes_read(err), whole)


def test_following_the_tail_through_a_dropped_connection_shows_each_line_once(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    """brev runs a follow's command again when its ssh connection drops: a line the job
    writes after that shows while the job runs, once, whatever the follow of the last
    lines began with (a follow that begins with a window at the end of the output must
    begin at the same place again, or it passes over later lines as if shown)."""
    emulator.add("box")
    command = (
        "sh -c 'seq 200; while [ ! -e /tmp/gate ]; do sleep 0.2; done; seq 201 300; "
        "while [ ! -e /tmp/gate2 ]; do sleep 0.2; done; echo live; "
        "while [ ! -e /tmp/gate3 ]; do sleep 0.2; done; echo end'"
    )
    job_id = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, command))
    job_id = job_id.stdout.strip()
    _wait_for(lambda: docker("logs", "--tail", "1", job_id).stdout == "200\n")
    following = start(taospec, "logs", "-f", "--tail", "2", job_id, env=emulator.env)
    assert following.stdout is not None
    assert [following.stdout.readline() for _ in range(2)] == ["199\n", "200\n"]
    assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
    assert [following.stdout.readline() for _ in range(100)][-1] == "300\n"
    _drop_connection(f"{job_id} || echo TAOSPEC_FOLLOWED")
    time.sleep(2)  # brev's second run has begun
    assert docker("exec", job_id, "touch", "/tmp/gate2").returncode == 0
    ready = select.select([following.stdout], [], [], 10)[0]
    live = following.stdout.readline() if ready else None
    assert docker("exec", job_id, "touch", "/tmp/gate3").returncode == 0
    out, err = following.communicate(timeout=60)
    assert following.returncode == 0, err
    assert (live, out, err) == ("live\n", "end\n", "")


def test_a_job_on_a_deleted_instance_is_recorded_error_once(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    """status answered UNKNOWN and exited 0, every time, for a job whose instance brev no
    longer knows: it cannot be running there."""
    emulator.add("box")
    spec = job_file(open_tmp, engine, "sleep 300")
    job_id = run(taospec, emulator, "run", "-d", spec).stdout.strip()
    assert emulator("delete", "box").returncode == 0
    docker("rm", "-f", job_id)  # the emulator's instances are this machine: deleted with it
    done = run(taospec, emulator, "status", job_id)
    assert done.returncode == 0, done.stderr
    gone = (
        "brev: instance box was deleted (brev ls lists no instance of that name); the job's "
        "container went with it"
    )
    assert done.stdout == f"{job_id} ERROR ERR_INFRA {gone}\n", done.stderr
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "ERROR"]
    assert record(state_dir, job_id)["transitions"][-1]["message"] == gone
    again = run(taospec, emulator, "status", job_id)
    assert again.stdout == done.stdout
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "ERROR"]


def test_an_ephemeral_instance_deleted_by_someone_else_ends_its_job_cleanly(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    """The teardown's ``brev delete`` of an instance someone already deleted failed with
    "not found", so the status that recorded the job's end exited 1 with that failure, and
    every later status tried the delete again."""
    emulator.add("spot")
    spec = job_file(open_tmp, engine, "sleep 300", "spot", ephemeral=True)
    job_id = run(taospec, emulator, "run", "-d", spec).stdout.strip()
    assert emulator("delete", "spot").returncode == 0
    docker("rm", "-f", job_id)  # the emulator's instances are this machine: deleted with it
    done = run(taospec, emulator, "status", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split()[1:3] == ["ERROR", "ERR_INFRA"]
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "ERROR"]
    again = run(taospec, emulator, "status", job_id)
    assert (again.returncode, again.stdout, again.stderr) == (0, done.stdout, "")


def test_the_reviewed_delete_line_and_the_executor_agree_on_a_deleted_instance(
    engine: str, emulator: Brev, open_tmp: Path, monkeypatch
) -> None:
    """The listing's teardown line, run by bash, ends as the executor's step does: an instance
    already deleted counts as done, any other failure fails and shows brev's words."""
    emulator.add("spot")
    for name, value in emulator.env.items():
        monkeypatch.setenv(name, value)
    spec = job_file(open_tmp, engine, "true", "spot", ephemeral=True)
    (step,) = render(load_job(spec), launcher=ROOT_LAUNCHER).teardown
    line = plantext.command_line(step)

    def by_hand() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True, check=False)

    assert (by_hand().returncode, emulator.instances()) == (0, [])
    assert by_hand().returncode == 0
    assert run_step(step, os.environ).returncode == 1  # brev's own exit: counted as done
    assert emulator("logout").returncode == 0
    refused = by_hand()
    assert refused.returncode == 1
    assert "not logged in" in refused.stderr
    with pytest.raises(CommandFailed, match="not logged in"):
        run_step(step, os.environ)
    assert emulator("login", "--token", "emulator-token").returncode == 0


@pytest.mark.parametrize("faults", [1, 1000])
def test_an_instance_brev_could_not_look_up_but_may_exist_is_no_answer(
    faults: int, engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    """brev exec could not look the instance up because brev's API failed; after one fault
    brev ls lists the instance again, after many it fails too. Neither says the instance was
    deleted: status exits 2 naming what to check, and writes nothing."""
    emulator.add("box")
    job_id = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, "sleep 300"))
    job_id = job_id.stdout.strip()
    before = {p.name: p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())}
    _set_instance(emulator, "box", probes_before_ready=1000)
    data = emulator.data()
    data["api_faults"] = faults
    emulator.state.write_text(json.dumps(data))
    done = run(taospec, emulator, "status", job_id)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    said = (
        "Brev instance box does not answer through brev exec (ssh connection failed and could "
        'not look up instance "box": exit status 255): check it with brev ls (it may be '
        "stopped, starting or unreachable), and that brev exec box 'echo ok' works from this "
        "machine"
        if faults == 1
        else "brev does not answer: brev exec could not look up instance box and brev ls failed "
        "(cannot reach the Brev API (emulated fault): connection refused): check that brev ls "
        "works from this machine"
    )
    assert (
        done.stderr == f"taospec: cannot tell the state of {job_id}: {said}; nothing was changed\n"
    )
    assert {p.name: p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())} == before
    data = emulator.data()
    data["api_faults"] = 0
    emulator.state.write_text(json.dumps(data))
    _set_instance(emulator, "box", probes_before_ready=0)
    assert run(taospec, emulator, "status", job_id).stdout.split()[1] == "RUNNING"
    assert run(taospec, emulator, "cancel", job_id).returncode == 0


def test_a_container_removed_on_a_live_instance_is_recorded_error_once(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    """status answered UNKNOWN, every time, for a job whose container was removed on an
    instance that still runs: the job stayed RUNNING for good, where docker's records ERROR."""
    emulator.add("box")
    job_id = run(taospec, emulator, "run", "-d", job_file(open_tmp, engine, "sleep 300"))
    job_id = job_id.stdout.strip()
    docker("rm", "-f", job_id)
    done = run(taospec, emulator, "status", job_id)
    gone = f"docker: the container disappeared (no container named {job_id} on instance box)"
    assert done.stdout == f"{job_id} ERROR ERR_INFRA {gone}\n", done.stderr
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "ERROR"]
    again = run(taospec, emulator, "status", job_id)
    assert again.stdout == done.stdout
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "ERROR"]


def test_an_ephemeral_instance_is_deleted_when_the_job_is_cancelled(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    emulator.add("spot")
    emulator.add("other")
    spec = job_file(open_tmp, engine, "sleep 300", "spot", ephemeral=True)
    done = run(taospec, emulator, "run", "--detach", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert sorted(emulator.instances()) == ["other", "spot"]
    cancelled = run(taospec, emulator, "cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert containers(job_id) == []
    assert emulator.instances() == ["other"]
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "CANCELED"]
    again = run(taospec, emulator, "cancel", job_id)
    assert "already ended CANCELED" in again.stdout


def test_an_ephemeral_instance_is_deleted_after_its_job_completes(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    emulator.add("spot")
    command = "sh -c 'echo kept > {results_dir}/result.txt'"
    spec = job_file(open_tmp, engine, command, "spot", ephemeral=True)
    done = run(taospec, emulator, "run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "COMPLETE"]
    assert emulator.instances() == []
    assert (open_tmp / "results" / job_id / "result.txt").read_text() == "kept\n"
    later = run(taospec, emulator, "status", job_id)
    assert later.returncode == 0
    # The instance is gone; the recorded outcome stands, with what the backend said then.
    assert later.stdout.split()[1:] == ["COMPLETE", "docker:", "exited", "0"]
    assert record(state_dir, job_id)["terminal_state"] == "COMPLETE"


def test_a_secret_missing_on_the_instance_fails_before_launch_naming_it(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path
) -> None:
    emulator.add("box", "--env", f"HF_TOKEN={SECRET}")
    spec = job_file(open_tmp, engine, "true", env="{pass: [HF_TOKEN, NGC_KEY]}")
    done = run(taospec, emulator, "run", spec, NGC_KEY=SECRET)
    assert done.returncode == 1
    assert "env-check: NGC_KEY (env.pass) is not set on instance box" in done.stderr
    assert "HF_TOKEN (env.pass)" not in done.stderr
    assert SECRET not in done.stdout + done.stderr
    job_id = done.stdout.split()[0] if done.stdout.strip() else _only_record(state_dir)
    rec = record(state_dir, job_id)
    assert rec["terminal_state"] == "ERROR"
    assert "NGC_KEY (env.pass) is not set on instance box" in rec["transitions"][-1]["message"]
    assert containers(job_id) == []
    assert not any("docker run" in c["command"] for c in emulator.commands())
    assert not (open_tmp / "results" / job_id).exists()


def _only_record(state_dir: Path) -> str:
    (path,) = [p for p in (state_dir / "jobs").glob("*.json") if p.stem.count(".") == 0]
    return path.stem


def test_passed_names_need_not_be_set_on_this_machine(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    emulator.add("box", "--env", f"NGC_KEY={SECRET}")
    spec = job_file(open_tmp, engine, "sh -c 'test -n \"$NGC_KEY\"'", env="{pass: [NGC_KEY]}")
    done = run(taospec, emulator, "run", spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "COMPLETE"


def test_a_missing_mount_source_on_the_instance_fails_before_launch(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path
) -> None:
    emulator.add("box")
    gone = open_tmp / "no such dataset"
    spec = job_file(
        open_tmp, engine, "true", mounts=json.dumps([{"source": str(gone), "target": "/data"}])
    )
    done = run(taospec, emulator, "run", spec)
    assert done.returncode == 1
    assert f"paths-check: mounts[0].source {gone} does not exist on instance box" in done.stderr
    assert not any("docker run" in c["command"] for c in emulator.commands())


# -- gpus: {free: N} --------------------------------------------------------------

# GPU 1 and 3 are nearly idle, 2 is in use a little, 0 a lot (by something outside taospec).
FOUR_GPUS = "0, GPU-aaaa, 9000 MiB\n1, GPU-bbbb, 10 MiB\n2, GPU-cccc, 500 MiB\n3, GPU-dddd, 20 MiB"
GPU_ENGINE = FAKES / "gpu-engine"


def gpu_instance(emulator: Brev, name: str, logs: Path, *flags: str) -> Path:
    """An instance whose ``nvidia-smi`` (the stand-in) reports :data:`FOUR_GPUS` and whose
    docker is the stand-in of an engine with the NVIDIA runtime (``tests/fakes/gpu-engine``,
    which starts the container without ``--gpus`` and logs the flag's value)."""
    log = logs / f"{name}-gpus.log"
    emulator.add(
        name,
        "--env",
        f"FAKE_NVIDIA_SMI_CSV={FOUR_GPUS}",
        "--env",
        f"FAKE_DOCKER_REAL={shutil.which('docker')}",
        "--env",
        f"FAKE_DOCKER_GPUS_LOG={log}",
        *flags,
    )
    return log


def with_gpu_engine(emulator: Brev) -> dict[str, str]:
    """PATH for taospec, which brev passes on to its instances: the GPU engine's docker first."""
    return {"PATH": f"{GPU_ENGINE}{os.pathsep}{emulator.env['PATH']}"}


def test_free_gpus_are_read_and_picked_on_the_instance(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path, tmp_path: Path
) -> None:
    log = gpu_instance(emulator, "gpu-box", tmp_path)
    other_log = gpu_instance(emulator, "other-box", tmp_path)
    env = with_gpu_engine(emulator)

    def submit(name: str, instance: str, count: int):
        spec = job_file(open_tmp / name, engine, "sleep 300", instance, gpus=f"{{free: {count}}}")
        return run(taospec, emulator, "run", "--detach", spec, **env)

    first = submit("first", "gpu-box", 2)
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip()
    assert log.read_text() == '"device=1,3"\n'  # the least used two, by the instance's answer
    side = Ledger(state_dir).sidecar(first_id)
    assert (side["gpus_chosen"], side["gpus"]) == ("1,3", "1,3")
    assert json.loads(run(taospec, emulator, "show", first_id).stdout)["gpus_chosen"] == "1,3"
    launch = side["plan"]["steps"][-1]["argv"]
    assert launch[:3] == ["brev", "exec", "gpu-box"]
    assert "--gpus '\"device=1,3\"'" in launch[3]  # where named ids would be
    queries = [c for c in emulator.commands() if "nvidia-smi" in c["command"]]
    assert [c["instance"] for c in queries] == ["gpu-box"]
    query = "nvidia-smi --query-gpu=index,uuid,memory.used --format=csv,noheader"
    assert query in queries[0]["command"]

    # While the first job holds 1 and 3 on gpu-box, the next one there gets the two left;
    # on another instance the same ids are free.
    second = submit("second", "gpu-box", 2)
    assert second.returncode == 0, second.stderr
    assert log.read_text().splitlines()[-1] == '"device=0,2"'
    elsewhere = submit("elsewhere", "other-box", 2)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert other_log.read_text() == '"device=1,3"\n'

    # None is left on gpu-box: refused before any record, naming who holds what.
    records = sorted((state_dir / "jobs").glob("*.json"))
    refused = submit("third", "gpu-box", 1)
    assert refused.returncode == 1
    assert f"GPU 1 held by running job {first_id}" in refused.stderr
    assert "need 1 free GPU(s), 0 of 4 free" in refused.stderr
    assert sorted((state_dir / "jobs").glob("*.json")) == records
    for job_id in emulator.job_ids:
        assert run(taospec, emulator, "cancel", job_id).returncode == 0


def test_the_gpu_query_waits_for_a_slow_instance_and_names_a_broken_driver(
    engine: str, taospec: Runner, emulator: Brev, open_tmp: Path, state_dir: Path, tmp_path: Path
) -> None:
    log = gpu_instance(emulator, "slow", tmp_path, "--probes-before-ready", "2")
    spec = job_file(open_tmp / "slow", engine, "echo up", "slow", gpus="{free: 1}")
    done = run(taospec, emulator, "run", spec, **with_gpu_engine(emulator))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "COMPLETE"
    assert f"gpu-query: not yet (2/{brev.PROBE_ATTEMPTS}), retrying" in done.stderr
    assert "job: GPUs 1 chosen" in done.stderr
    assert log.read_text() == '"device=1"\n'

    emulator.add("no-driver")  # nvidia-smi there fails as on a host without the driver
    spec = job_file(open_tmp / "broken", engine, "true", "no-driver", gpus="{free: 1}")
    records = sorted((state_dir / "jobs").glob("*.json"))
    refused = run(taospec, emulator, "run", spec, **with_gpu_engine(emulator))
    assert refused.returncode == 2
    assert "cannot read GPU occupancy on brev instance no-driver" in refused.stderr
    assert "nvidia-smi failed on instance no-driver" in refused.stderr
    assert "couldn't communicate with the NVIDIA driver" in refused.stderr
    ran = [c for c in emulator.commands() if c["instance"] == "no-driver"]
    assert len(ran) == 1  # a failure it reported is not run again, by brev or by taospec
    assert sorted((state_dir / "jobs").glob("*.json")) == records  # refused before any record


def test_the_dry_run_shows_the_ids_as_chosen_at_submit(
    taospec: Runner, open_tmp: Path, emulator: Brev
) -> None:
    spec = job_file(open_tmp, "busybox:1", "true", "box", gpus="{free: 2}")
    shown = run(taospec, emulator, "run", "-n", spec)
    assert shown.returncode == 0, shown.stderr
    assert "# Note: gpus: the 2 GPU ids are chosen at submit (shown as $GPU_IDS" in shown.stdout
    assert '"device=\'"$GPU_IDS"\'"' in shown.stdout
    assert emulator.commands() == []  # nothing asked at review time
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER)
    assert plan.backend_value("gpus") == "\x00GPU_IDS\x00"
    launch = plan.steps[-1]
    real = plan.with_value(GPU_IDS, "1,3").with_job_id("hello-greet-a1b2c3")
    words = bash_words(
        plantext.argv_text(launch.argv), {"GPU_IDS": "1,3", "JOB_ID": "hello-greet-a1b2c3"}
    )
    assert words == list(real.steps[-1].argv)
    assert "--gpus '\"device=1,3\"'" in words[3]


# -- what a plan says -----------------------------------------------------------


def test_user_host_is_refused_with_a_way_out(engine: str, open_tmp: Path) -> None:
    spec = job_file(open_tmp, engine, "true")
    text = spec.read_text().replace('user: "1000:1000"\n', "")
    write(spec, text)
    with pytest.raises(InvalidInput, match=r"user: host would mean this machine's 0:0"):
        render(load_job(spec), launcher=ROOT_LAUNCHER)
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER, user="1000:1000")
    assert "--user 1000:1000" in plan.steps[-1].argv[-1]


def test_root_and_docker_host_are_refused(engine: str, open_tmp: Path) -> None:
    spec = job_file(open_tmp, engine, "true")
    with pytest.raises(InvalidInput, match="UID 0"):
        render(load_job(spec), launcher=ROOT_LAUNCHER, user="0:0")
    spec = job_file(open_tmp, engine, "true", docker="{host: 'ssh://me@elsewhere', shm_size: 64m}")
    with pytest.raises(InvalidInput, match="docker.host does not apply to platform brev"):
        render(load_job(spec), launcher=ROOT_LAUNCHER)


def test_multi_node_is_refused_with_the_reason(taospec: Runner, open_tmp: Path) -> None:
    spec = job_file(open_tmp, "busybox:1", "true", nodes="2")
    done = taospec("validate", spec)
    assert done.returncode == 2
    assert "multi-node is not supported on Brev" in done.stdout + done.stderr


def test_words_that_join_past_one_argument_are_refused_on_brev(
    taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    # brev exec takes the remote command as ONE argument: two words of 70,000 bytes pass
    # alone, and join into an argument the kernel refuses at brev exec (E2BIG)
    spec = job_file(open_tmp, "busybox:1", f"echo {'x' * 70_000} {'y' * 70_000}")
    refused_by_validate_and_run(
        taospec,
        spec,
        f"{spec}:9:10: $.command: on Brev the container's command line",
        "bytes too many",
    )
    assert not (state_dir / "jobs").exists()
    # a little shorter, validate passes it, and the argument brev exec gets is under the limit
    spec = job_file(open_tmp, "busybox:1", f"echo {'x' * 62_000} {'y' * 62_000}")
    assert taospec("validate", spec).returncode == 0
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER)
    assert 124_000 < len(plan.steps[-1].argv[-1].encode()) < 131_072


def test_a_spec_past_one_argument_of_brev_exec_is_refused_at_the_spec(
    taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    # brev exec hands the remote command no input (it reads instance names from a piped
    # stdin), so the prepare step carries the spec inside its one argument: a spec of
    # 200,000 bytes passed validate and failed at the launch with E2BIG
    spec = job_file(open_tmp, "busybox:1", "true", spec=json.dumps({"n": "word " * 40_000}))
    refused_by_validate_and_run(
        taospec,
        spec,
        f"{spec}:11:7: $.spec: on Brev the spec file reaches the instance inside ONE argument",
        "bytes too many",
        "mount",
    )
    assert not (state_dir / "jobs").exists()
    # a little shorter, validate passes it, and the argument brev exec gets is under the limit
    spec = job_file(open_tmp, "busybox:1", "true", spec=json.dumps({"n": "word " * 25_000}))
    assert taospec("validate", spec).returncode == 0
    prepare = render(load_job(spec), launcher=ROOT_LAUNCHER).steps[-2]
    assert prepare.name == "prepare"
    assert 120_000 < len(prepare.argv[-1].encode()) < 131_072


def test_a_spec_whose_quotes_brev_exec_quotes_again_past_one_argument_is_refused(
    taospec: Runner, open_tmp: Path
) -> None:
    """brev exec runs ``bash -c "... && ssh -T ... ALIAS '<command>'"``, each ``'`` of the
    command written ``'\\''``: an argument three bytes longer per quote than the one it
    was given. A spec of apostrophes under the limit as taospec quoted it passed validate,
    and was past it in the argument brev exec hands bash."""
    plain = job_file(open_tmp, "busybox:1", "true", spec=json.dumps({"n": "its. " * 5_000}))
    prepare = render(load_job(plain), launcher=ROOT_LAUNCHER).steps[-2].argv[-1]
    assert len(prepare.replace("'", "'\\''").encode()) < 131_072
    spec = job_file(open_tmp, "busybox:1", "true", spec=json.dumps({"n": "it's " * 5_000}))
    refused_by_validate_and_run(
        taospec,
        spec,
        f"{spec}:11:7: $.spec: on Brev the spec file reaches the instance inside ONE argument",
        "bytes too many",
    )


def test_gpu_overlap_is_checked_per_instance(open_tmp: Path, state_dir: Path) -> None:
    ledger = Ledger(state_dir)
    held = ledger.open(
        platform="brev",
        image="i",
        network_arch="a",
        action="b",
        storage_tier="A",
        results_root=str(open_tmp),
        sidecar={"instance": "box-a", "gpus": "0,1"},
    )
    ledger.mark(held.id, "RUNNING", message="launched", backend_ref=f"box-a/{held.id}")

    def plan_on(instance: str, platform: str = "brev") -> Plan:
        spec = job_file(open_tmp, "busybox:1", "true", instance, gpus="[1]")
        if platform == "docker":
            docker_job = spec.read_text().replace("platform: brev", "platform: docker")
            kept = [line for line in docker_job.splitlines(True) if "brev:" not in line]
            write(spec, "".join(kept))
        return render(load_job(spec), launcher=ROOT_LAUNCHER)

    check_gpus(plan_on("box-b"), ledger)
    check_gpus(plan_on("box-a", "docker"), ledger)  # the local engine is another machine
    with pytest.raises(InvalidInput, match=f"running job {held.id} on brev instance box-a"):
        check_gpus(plan_on("box-a"), ledger)


def test_the_plan_records_instance_ref_and_teardown(open_tmp: Path) -> None:
    spec = job_file(open_tmp, "busybox:1", "true", "spot", ephemeral=True, gpus="[0, 1]")
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER)
    assert dict(plan.backend) == {
        "instance": "spot",
        "ephemeral": "true",
        "env_source": "instance",
        "gpus": "0,1",
    }
    assert [s.argv for s in plan.teardown] == [("brev", "delete", "spot")]
    assert [s.name for s in plan.steps] == ["probe", "pull", "prepare", "launch"]
    assert plan.steps[0].argv == ("brev", "exec", "spot", "echo ok")
    assert plan.steps[0].attempts * 5 == 600
    assert all(len(s.argv) == 4 and s.argv[:3] == ("brev", "exec", "spot") for s in plan.steps)
    assert all(s.stdin_text is None and s.stdin_env is None for s in plan.steps)


# -- hostile values survive both shells -------------------------------------------------


@st.composite
def brev_documents(draw: st.DrawFn) -> dict[str, object]:
    """A brev job with a hostile value in every string field a plan carries."""
    text = hostile(exclude="{}")
    return {
        "version": 1,
        "network_arch": "arch",
        "action": "act",
        "platform": "brev",
        "brev": {"instance": "box", "ephemeral": True},
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "command": draw(commands(max_size=4)),
        "results_root": draw(absolute()),
        "user": "1000:1000",
        "mounts": [
            {"source": draw(absolute()), "target": "/data", "readonly": draw(st.booleans())},
            {"source": draw(absolute()), "target": "/more"},
        ],
        "env": {"pass": ["NGC_KEY"], "set": {"MODE": draw(text)}},
        "docker": {"extra_args": draw(docker_args(text))},
        "spec": {"train": {"note": draw(text)}},
    }


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=brev_documents(), job_id=JOB_IDS)
def test_hostile_values_survive_the_local_and_the_remote_shell(
    tmp_path: Path, doc: dict, job_id: str
) -> None:
    job_file_path = tmp_path / "job.yaml"
    job_file_path.write_text(yaml.safe_dump(doc))
    shown = render(load_job(job_file_path), launcher=ROOT_LAUNCHER)
    real = shown.with_job_id(job_id)
    docker_doc = {**doc, "platform": "docker"}
    del docker_doc["brev"]
    job_file_path.write_text(yaml.safe_dump(docker_doc))
    local = {
        s.name: s
        for s in render(load_job(job_file_path), launcher=ROOT_LAUNCHER).with_job_id(job_id).steps
    }

    calls: list[list[str]] = []
    for plan_step, real_step in zip(shown.steps, real.steps, strict=True):
        argv = bash_words(plantext.argv_text(plan_step.argv), {"JOB_ID": job_id})
        assert argv == list(real_step.argv), plan_step.name  # the local shell: brev's argv
        assert argv[:3] == ["brev", "exec", "box"]
        assert len(argv) == 4
        calls += remote_calls(argv[3], NGC_KEY=SECRET)  # the remote shell: what runs there

    mounts = doc["mounts"]
    assert calls == [
        ["printenv", "NGC_KEY"],
        *(["test", "-e", m["source"]] for m in mounts),
        ["docker", "image", "inspect", doc["image"]],
        list(local["login"].argv),
        ["stdin", SECRET],
        ["docker", "image", "inspect", doc["image"]],
        list(local["pull"].argv),
        list(local["prepare"].argv),
        list(local["spec-file"].argv),
        ["stdin", local["spec-file"].stdin_text],
        ["docker", "container", "inspect", job_id],
        list(local["launch"].argv),
    ]


def _passing_a_value(
    emulator: Brev, folder: Path, engine: str, command: str
) -> tuple[Path, dict[str, str]]:
    """A job file running ``command`` on an instance, passed a value the tests look for."""
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    emulator.add("box", "--env", f"PLAIN_VAR={passed['PLAIN_VAR']}")
    return job_file(folder, engine, command, env="{pass: [PLAIN_VAR]}"), passed


def _on_box(taospec: Runner, emulator: Brev) -> Callable[..., subprocess.CompletedProcess[str]]:
    """taospec run against the emulator, with the environment given."""

    def on_box(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return run(taospec, emulator, *args, **env)

    return on_box


def _job_id_seen(state_dir: Path, emulator: Brev) -> Callable[[], str]:
    """The only job's id once it exists, made known to the emulator."""

    def job_id() -> str:
        found = _only_job(state_dir)
        if found and found not in emulator.job_ids:
            emulator.job_ids.append(found)
        return found

    return job_id
