"""The docker platform on a real engine, through the real ``taospec`` command.

Every job runs as the non-root ``1000:1000`` in the locally built busybox
image, with its results under a directory every user can traverse.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from taospec.errors import JobFailed
from taospec.executor import submit
from taospec.ledger import Ledger
from taospec.platforms import docker as docker_platform
from taospec.platforms import render
from taospec.platforms.base import last_lines
from tests.conftest import (
    COUNTED,
    Runner,
    a_follow_shows_the_bar_as_it_is_redrawn,
    bytes_read,
    load_job,
    progress_bar,
    run_counting_reads,
    taospec_command,
    write,
)

pytestmark = pytest.mark.engine


def job_file(root: Path, image: str, command: str, **extra: str) -> Path:
    lines = [
        "version: 1",
        "network_arch: hello",
        "action: greet",
        "platform: docker",
        f"image: {image}",
        f"results_root: {root / 'results'}",
        'user: "1000:1000"',
        "docker: {shm_size: 64m}",
        f"command: {json.dumps(command)}",
        *(f"{key}: {value}" for key, value in extra.items()),
    ]
    return write(root / "job.yaml", "\n".join(lines) + "\n")


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def cleanup(state_dir: Path):
    """Remove the containers this test made: named after its jobs, or collide-*."""
    yield
    jobs = state_dir / "jobs"
    ids = [p.stem for p in jobs.glob("*.json")] if jobs.exists() else []
    ids += docker("ps", "-aq", "--filter", "name=collide-").stdout.split()
    if ids:
        docker("rm", "-f", *ids)


def record(state_dir: Path, job_id: str) -> dict:
    return json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())


def test_success_is_complete_and_results_belong_to_the_job_user(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(
        open_tmp,
        engine,
        "sh -c 'id -u > {results_dir}/uid; cat {config_path} > {results_dir}/copy'",
        spec="{greeting: hi}",
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == "COMPLETE"
    results = open_tmp / "results" / job_id
    assert (results / "uid").read_text() == "1000\n"
    assert (results / "copy").read_text() == "greeting: hi\n"
    for path in (results, results / "uid", results / ".tao-runtime" / "home"):
        assert (path.stat().st_uid, path.stat().st_gid) == (1000, 1000), path
    rec = record(state_dir, job_id)
    assert [t["state"] for t in rec["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
    labels = docker("inspect", "--format", '{{index .Config.Labels "tao-job"}} {{.Name}}', job_id)
    assert labels.stdout.split() == [job_id, f"/{job_id}"]
    assert rec["backend_ref"] == docker("inspect", "--format", "{{.Id}}", job_id).stdout.strip()


def test_the_rendered_script_records_a_failed_pull_as_run_does(
    taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # the script opened a record, its pull failed under set -e, and the record stayed
    # PENDING for ever; run records the same failure ERROR
    spec = job_file(open_tmp, "127.0.0.1:9/taospec-none:1", "true")
    ran = taospec("run", spec)
    assert ran.returncode == 1, ran.stderr
    by_run = record(state_dir, ran.stderr.split(": opened record")[0].split()[-1])
    assert by_run["terminal_state"] == "ERROR"
    script = taospec("render", "--format", "sh", spec)
    assert script.returncode == 0, script.stderr
    bin_dir = str(Path(taospec_command()[0]).parent)
    env = {**taospec.env, "PATH": f"{bin_dir}:{taospec.env['PATH']}"}
    done = subprocess.run(["bash", "-c", script.stdout], env=env, cwd=open_tmp,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    (by_script,) = (
        json.loads(path.read_text())
        for path in (state_dir / "jobs").glob("*.json")
        if path.stem != by_run["id"]
    )
    assert by_script["terminal_state"] == "ERROR", by_script["transitions"]
    assert by_script["transitions"][-1]["message"] == (
        "the script stopped (exit 1) before the job launched"
    )
    assert "backend_ref" not in by_script or by_script["backend_ref"] is None
    listed = taospec("ls")
    assert f"{by_script['id']}  ERROR" in listed.stdout, listed.stdout


def test_exit_3_is_an_error_with_the_code_and_the_log_tail(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, "sh -c 'echo step one; echo broke >&2; exit 3'")
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id, state = done.stdout.split()
    assert state == "ERROR"
    assert "docker: exited with code 3" in done.stderr
    assert "| broke" in done.stderr
    rec = record(state_dir, job_id)
    assert rec["terminal_state"] == "ERROR"
    assert rec["err_class"] == "ERR_PROGRAM"
    status = json.loads(taospec("status", job_id, "--json").stdout)
    assert (status["state"], status["exit_code"]) == ("ERROR", 3)


@pytest.mark.parametrize(
    ("command", "mounts", "said"),
    [
        ("/no/such/program", "[]", "no such file"),  # the command of the image, mistyped
        ("true", "[{source: /etc/hostname, target: /data}]", "a mount puts a file where"),
    ],
)
def test_a_container_the_engine_created_but_could_not_start_is_removed(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    command: str,
    mounts: str,
    said: str,
) -> None:
    # docker run -d created the container and failed to start it: it stayed "created" with
    # the job's passed values in its configuration until a prune
    value = "launch-" + secrets.token_hex(6)
    spec = job_file(open_tmp, engine, command, mounts=mounts, env="{pass: [LAUNCH_TOKEN]}")
    done = taospec("run", spec, env={"LAUNCH_TOKEN": value})
    assert done.returncode == 1, done.stderr
    assert said in done.stderr.lower()
    job_id = _only_job(state_dir)
    assert record(state_dir, job_id)["terminal_state"] == "ERROR"
    assert docker("ps", "-aq", "--filter", f"label=tao-job={job_id}").stdout == ""
    assert docker("ps", "-aq", "--filter", f"name=^{job_id}$").stdout == ""


def test_a_plan_step_whose_program_is_not_on_taospecs_path_is_recorded_error_naming_it(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # a PATH that holds docker and nothing else: the engine answers the preflight, and the
    # prepare step's install is not found once the record is open; the record stayed
    # PENDING, and run exited 2 as if nothing had been recorded
    bare = open_tmp / "bin"
    bare.mkdir()
    (bare / "docker").symlink_to(shutil.which("docker") or "docker")
    spec = job_file(open_tmp, engine, "true")
    done = taospec("run", spec, env={"PATH": str(bare)})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    job_id = _only_job(state_dir)
    rec = record(state_dir, job_id)
    assert rec["terminal_state"] == "ERROR", rec["transitions"]
    assert "install: command not found" in rec["transitions"][-1]["message"]
    assert "; taospec cannot start install on this machine (command not found)" in done.stderr
    assert docker("ps", "-aq", "--filter", f"name=^{job_id}$").stdout == ""


def test_a_file_mounted_over_a_folder_of_the_image_is_the_job_files_mistake(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # runc refuses it inside an "OCI runtime create failed", which was read as an unhealthy
    # runtime (ERR_INFRA) and retried; the image has a /data folder
    assert docker("run", "--rm", engine, "test", "-d", "/data").returncode == 0
    spec = job_file(open_tmp, engine, "true", mounts="[{source: /etc/hostname, target: /data}]")
    done = taospec("run", spec)
    assert done.returncode == 1
    assert "a mount puts a file where the image has a folder, or a folder" in done.stderr
    assert "journalctl" not in done.stderr
    assert record(state_dir, _only_job(state_dir))["err_class"] == "ERR_PROGRAM"


def test_a_file_runc_lets_a_mount_cover_under_proc_is_mounted_as_lxcfs_mounts_it(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # every target under /proc was refused at validate, /proc/cpuinfo too, over which lxcfs
    # mounts a container's own view of its CPUs; runc lets a mount cover a few such files
    view = write(open_tmp / "cpuinfo", "processor\t: 0\n")
    view.chmod(0o644)
    mounts = f"[{{source: {view}, target: /proc/cpuinfo, readonly: true}}]"
    spec = job_file(open_tmp, engine, "cat /proc/cpuinfo", mounts=mounts)
    assert taospec("validate", spec).returncode == 0
    done = taospec("run", "--follow", spec)
    assert done.returncode == 0, done.stderr
    assert "processor\t: 0\n" in done.stdout
    extra = f'docker: {{shm_size: 64m, extra_args: ["-v", "{view}:/proc/x:ro"]}}'
    spec.write_text(spec.read_text().replace("docker: {shm_size: 64m}", extra))
    checked = taospec("validate", spec)
    assert checked.returncode == 2
    assert f"-v {view}:/proc/x:ro: /proc/x cannot be a mount target" in checked.stderr


NR_OPEN = int(Path("/proc/sys/fs/nr_open").read_text())


@pytest.mark.parametrize(
    ("extra_args", "sentence"),
    [
        (
            ["--sysctl", "net.ipv4.taospec_has_no_such_setting=1"],
            "a --sysctl of docker.extra_args names a setting this kernel does not have",
        ),
        (
            ["--sysctl", "net.core.somaxconn=abc"],  # the kernel reads a number there
            "or gives it a value the kernel refuses",
        ),
        (
            ["--cpuset-cpus", str(os.cpu_count())],  # CPUs count from 0
            "docker.extra_args asks for CPUs or memory nodes the Docker host does not have",
        ),
        (
            ["--network", "taospec-has-no-such-network"],
            "docker.extra_args names a runtime or a network the Docker host does not have",
        ),
        (
            ["--ulimit", f"nofile={NR_OPEN + 1}"],  # no process may hold more than nr_open
            "a --ulimit of docker.extra_args asks more than the Docker host allows",
        ),
    ],
)
def test_an_option_this_machine_refuses_at_the_start_is_the_job_files_mistake(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    extra_args: list[str],
    sentence: str,
) -> None:
    # validate leaves them to the launch (another kernel or engine may take them); runc's
    # refusal comes inside an "OCI runtime create failed", read before as an unhealthy
    # runtime (ERR_INFRA), which retry: then ran again and again
    spec = job_file(open_tmp, engine, "true", retry="{max: 2}")
    docker_key = f"docker: {{shm_size: 64m, extra_args: {json.dumps(extra_args)}}}"
    spec.write_text(spec.read_text().replace("docker: {shm_size: 64m}", docker_key))
    assert taospec("validate", spec).returncode == 0
    done = taospec("run", spec)
    assert done.returncode == 1
    assert sentence in done.stderr
    assert "journalctl" not in done.stderr
    assert "retry 1 of 2" not in done.stderr
    assert record(state_dir, _only_job(state_dir))["err_class"] == "ERR_PROGRAM"


def test_a_mount_whose_word_for_docker_passes_the_limit_is_refused(
    taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    # docker run gets a mount as one word, SOURCE:TARGET:ro; the source passes alone (with
    # its NUL, one byte under the kernel's limit for one argument), the word does not
    source = "/" + "d" * 131_069
    mounts = f"[{{source: {source}, target: /data, readonly: true}}]"
    spec = job_file(open_tmp, "busybox:1", "true", mounts=mounts)
    for verb in ("validate", "run"):
        done = taospec(verb, spec)
        assert done.returncode == 2, done.stderr
        assert f"{spec}:10:19: $.mounts[0].source: the word docker run gets for this mount" in (
            done.stderr
        )
        assert "is 131079 bytes" in done.stderr
    assert not (state_dir / "jobs").exists()


@pytest.mark.parametrize(
    ("size", "kib"),
    [
        ("64MB", 65536), ("0.5g", 524288), ("2Mib", 2048), ("1t", 1024**3),
        # docker reads the number as Go's ParseFloat does: exponents, a bare point, digit
        # underscores, and one blank before the unit
        ("1e3g", 1000 * 1024**2), (".5g", 524288), ("8 g", 8 * 1024**2), ("1_000m", 1024000),
    ],
)  # fmt: skip
def test_a_shm_size_written_as_docker_reads_it_runs(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup, size: str, kib: int
) -> None:
    # docker takes a decimal number, units up to p and a b or ib after the unit (as compose
    # files write 2gb); the schema took only digits and one of b, k, m, g
    spec = job_file(open_tmp, engine, "sh -c 'df -k /dev/shm > {results_dir}/shm'")
    text = spec.read_text().replace("shm_size: 64m", f"shm_size: {size}, ipc: private")
    spec.write_text(text)
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = _only_job(state_dir)
    assert (open_tmp / "results" / job_id / "shm").read_text().split()[-5] == str(kib)


@pytest.mark.parametrize(
    ("largest", "past"),
    [("8589934591g", "8589934592g"), ("9223372036854775295", "9223372036854775296")],
)
def test_a_shm_size_past_what_docker_counts_is_refused_at_its_line(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    largest: str,
    past: str,
) -> None:
    # docker reads --shm-size as a float64 times its unit into a signed 64-bit byte count;
    # past 2**63 the count is negative and the engine refuses the launch ("SHM size can not
    # be less than 0") after the record was opened
    spec = job_file(open_tmp, engine, "true")
    text = spec.read_text().replace("shm_size: 64m", f"shm_size: '{largest}', ipc: private")
    spec.write_text(text)
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = _only_job(state_dir)
    assert record(state_dir, job_id)["terminal_state"] == "COMPLETE"
    spec.write_text(text.replace(largest, past))
    for verb in ("validate", "run"):
        done = taospec(verb, spec)
        assert done.returncode == 2, done.stderr
        assert f"{spec}:8:20: $.docker.shm_size: docker.shm_size '{past}' is" in done.stderr
        assert "past the 8 EiB docker counts" in done.stderr
    assert _only_job(state_dir) == job_id


def test_a_retry_whose_env_file_is_gone_is_the_job_files_mistake(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # run refuses a missing env file before any record; a retry launches the stored plan,
    # and docker's "open ...: no such file or directory" was an unrecognised exit 125
    env_file = write(open_tmp / "job.env", "GREETING=hi\n")
    spec = job_file(open_tmp, engine, "sh -c 'exit 3'")
    extra = f"docker: {{shm_size: 64m, extra_args: [--env-file, {env_file}]}}"
    write(spec, spec.read_text().replace("docker: {shm_size: 64m}", extra))
    first, _ = taospec("run", spec).stdout.split()
    env_file.unlink()
    retried = taospec("retry", first)
    assert retried.returncode == 1
    assert "a file docker run reads itself (an --env-file) is missing" in retried.stderr
    (again,) = [p.stem for p in (state_dir / "jobs").glob("*.json") if p.stem != first]
    assert record(state_dir, again)["err_class"] == "ERR_PROGRAM"


def test_a_finished_jobs_status_is_its_record_and_needs_no_engine(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, "sh -c 'exit 3'")
    job_id, _ = taospec("run", spec).stdout.split()
    # no engine answers (a job's later verbs ask its own engine, whatever DOCKER_HOST says)
    absent = write(open_tmp / "bin" / "docker", "#!/bin/sh\necho 'Cannot connect' >&2\nexit 1\n")
    absent.chmod(0o755)
    no_engine = {"PATH": f"{absent.parent}:{os.environ['PATH']}"}
    done = taospec("status", job_id, "--json", env=no_engine)
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert (status["state"], status["exit_code"], status["err_class"]) == (
        "ERROR",
        3,
        "ERR_PROGRAM",
    )
    assert "exited with code 3" in status["message"]
    # A job recorded before exit codes were noted in the sidecar: its engine is asked.
    sidecar = state_dir / "jobs" / f"{job_id}.taospec"
    data = json.loads(sidecar.read_text())
    del data["exit_code"]
    sidecar.write_text(json.dumps(data))
    asked = json.loads(taospec("status", job_id, "--json").stdout)
    assert (asked["state"], asked["exit_code"]) == ("ERROR", 3)
    unanswered = json.loads(taospec("status", job_id, "--json", env=no_engine).stdout)
    assert (unanswered["state"], unanswered["exit_code"]) == ("ERROR", None)


def test_detach_status_logs_and_cancel_from_other_processes(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, "sh -c 'for i in 1 2 3 4; do echo line $i; done; sleep 300'")
    done = taospec("run", "--detach", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert taospec("status", job_id).stdout.split()[1] == "RUNNING"
    deadline = time.monotonic() + 20
    while "line 4" not in taospec("logs", job_id).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert taospec("logs", job_id, "--tail", "2").stdout == "line 3\nline 4\n"
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert docker("ps", "-aq", "--filter", f"name=^{job_id}$").stdout.strip() == ""
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    assert "output copied to" in cancelled.stdout
    # The container is gone; its output was kept in the results directory.
    kept = taospec("logs", job_id)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.startswith("line 1\nline 2\nline 3\nline 4\n")
    assert taospec("logs", job_id, "--tail", "1").stdout == "line 4\n"
    assert taospec("logs", job_id, "--tail", "0").stdout == ""
    assert "nothing to cancel" in taospec("cancel", job_id).stdout
    assert record(state_dir, job_id)["transitions"][-1]["state"] == "CANCELED"


def test_an_existing_container_with_the_jobs_name_is_never_replaced(
    engine: str, open_tmp: Path, state_dir: Path, cleanup, monkeypatch
) -> None:
    name = f"collide-{secrets.token_hex(3)}"
    existing = docker("run", "-d", "--name", name, engine, "sleep", "300").stdout.strip()
    spec = job_file(open_tmp, engine, "true")
    ledger = Ledger(state_dir)
    monkeypatch.setattr("taospec.ledger.store.mint_id", lambda arch, action: name)
    with pytest.raises(JobFailed, match="a container with the job's name already exists"):
        submit(render(load_job(spec)), ledger)
    assert docker("inspect", "--format", "{{.Id}} {{.State.Status}}", name).stdout.split() == [
        existing,
        "running",
    ]
    assert ledger.get(name).terminal_state == "ERROR"


def test_gpus_on_an_engine_without_the_gpu_runtime_give_the_documented_message(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    """The preflight refuses it before any record is opened, saying what to install."""
    spec = job_file(open_tmp, engine, "true", gpus="[0]")
    done = taospec("run", spec)
    assert done.returncode == 2
    assert "preflight: NVIDIA runtime: not registered with the engine" in done.stderr
    assert "NVIDIA Container Toolkit" in done.stderr
    assert 'could not select device driver "" with capabilities: [[gpu]]' in done.stderr
    assert (
        not (state_dir / "ledger.jsonl").exists()
        or not (state_dir / "ledger.jsonl").read_text().strip()
    )


def test_a_crash_between_launch_and_the_running_mark_is_healed_by_status(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    opened = taospec(
        "record",
        "open",
        "--platform",
        "docker",
        "--image",
        engine,
        "--network-arch",
        "hello",
        "--action",
        "greet",
        "--storage-tier",
        "A",
        "--results-root",
        str(open_tmp / "results"),
    )
    job_id = opened.stdout.strip()
    docker("run", "-d", "--name", job_id, "--label", f"tao-job={job_id}", engine, "true")
    container = docker("inspect", "--format", "{{.Id}}", job_id).stdout.strip()
    docker("wait", job_id)
    healed = json.loads(taospec("status", job_id, "--json").stdout)
    assert healed["state"] == "COMPLETE"
    states = [(t["state"], t["source"]) for t in record(state_dir, job_id)["transitions"]]
    assert states == [("PENDING", "agent"), ("RUNNING", "poller"), ("COMPLETE", "poller")]
    assert record(state_dir, job_id)["backend_ref"] == container


def test_a_secret_passed_by_name_lands_nowhere_taospec_writes_or_shows(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    canary = "nvapi-" + secrets.token_hex(24)
    spec = job_file(
        open_tmp,
        engine,
        "sh -c 'echo key is $NGC_KEY; test -n \"$NGC_KEY\" && sleep 3'",
        env="{pass: [NGC_KEY]}",
    )
    seen_in_cmdline: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    if canary.encode() in cmdline.read_bytes():
                        seen_in_cmdline.append(str(cmdline))
                except OSError:
                    continue
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        done = taospec("run", "--follow", spec, env={"NGC_KEY": canary})
    finally:
        stop.set()
        sampler.join()
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[-2]
    outputs = [done.stdout, done.stderr]
    for args in (
        ("status", job_id),
        ("logs", job_id),
        ("show", job_id),
        ("show", "--plan", job_id),
        ("ls",),
        ("render", spec),
    ):
        result = taospec(*args, env={"NGC_KEY": canary})
        outputs += [result.stdout, result.stderr]
    assert "key is <redacted>" in done.stdout
    assert all(canary not in text for text in outputs)
    for path in state_dir.rglob("*"):
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), path
    assert seen_in_cmdline == []


def _wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _only_job(state_dir: Path) -> str:
    jobs = state_dir / "jobs"
    found = sorted(p.stem for p in jobs.glob("*.json")) if jobs.exists() else []
    return found[0] if len(found) == 1 else ""


def test_a_cancel_that_lands_while_the_container_is_created_stops_it_too(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # the cancel recorded CANCELED "no container was left", the container started a moment
    # later and ran on untracked, and the run said "invalid input" (exit 2)
    held = open_tmp / "held-bin"
    held.mkdir()
    inside, go = open_tmp / "inside-docker-run", open_tmp / "go"
    (held / "docker").write_text(  # docker run waits, inside the launch, until the cancel is done
        f'#!/bin/sh\nif [ "$1" = run ]; then : > {inside}; '
        f'while [ ! -e {go} ]; do sleep 0.1; done; fi\nexec {shutil.which("docker")} "$@"\n'
    )
    (held / "docker").chmod(0o755)
    spec = job_file(open_tmp, engine, "sh -c 'sleep 300'")
    env = {**taospec.env, "PATH": f"{held}:{taospec.env['PATH']}"}
    running = subprocess.Popen(
        [*taospec_command(), "run", str(spec)], env=env, cwd=open_tmp, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        _wait_for(inside.exists, timeout=60)
        job_id = _only_job(state_dir)
        cancelled = taospec("cancel", job_id)
        assert cancelled.returncode == 0, cancelled.stderr
        go.touch()
        _, err = running.communicate(timeout=60)
    finally:
        go.touch()
        running.kill()
    assert running.returncode == 1, err
    assert f"{job_id}: recorded CANCELED while it launched" in err
    assert "container removed" in err
    assert docker("ps", "-aq", "--filter", f"name=^{job_id}$").stdout.strip() == ""
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"


def test_a_cancel_while_another_process_watches_the_job_is_recorded_canceled(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # the watcher's poll saw the killed container's exit 137 first and recorded ERROR
    # ("most likely the host ran out of memory"), and cancel then exited 2
    spec = job_file(open_tmp, engine, "sh -c 'sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    watcher = subprocess.Popen(
        [*taospec_command(), "logs", "-f", job_id], env=taospec.env, cwd=open_tmp,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(1)
        cancelled = taospec("cancel", job_id)
        watcher.wait(timeout=60)
    finally:
        watcher.kill()
    assert cancelled.returncode == 0, cancelled.stderr
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"


def test_an_end_a_cancel_brought_about_is_recorded_as_the_cancel_not_diagnosed(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    """A poll (logs -f, status) that sees the kill before cancel records it: CANCELED,
    with what docker saw, and not the advice for a container killed from outside."""
    spec = job_file(open_tmp, engine, "sh -c 'sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    Ledger(state_dir).update_sidecar(job_id, cancel_requested="2026-12-04T05:00:00Z")
    docker("kill", job_id)
    docker("wait", job_id)
    assert taospec("status", job_id).returncode == 0
    last = record(state_dir, job_id)["transitions"][-1]
    assert (last["state"], last["message"]) == (
        "CANCELED",
        "a cancel began at 2026-12-04T05:00:00Z; docker: exited with code 137",
    )


def test_a_container_removed_outside_taospec_is_recorded_as_it_ended_by_cancel(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # cancel recorded CANCELED "container removed" (the engine's docker rm --force of a
    # missing container exits 0); status recorded ERROR: which came first decided
    spec = job_file(open_tmp, engine, "sh -c 'sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    docker("rm", "-f", job_id)
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "container removed" not in cancelled.stdout
    kept = record(state_dir, job_id)
    assert (kept["terminal_state"], kept["err_class"]) == ("ERROR", "ERR_INFRA")


def test_a_stop_from_outside_is_an_infrastructure_error(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # docker stop kills a PID 1 that ignores SIGTERM: exit 137 with no OOM kill, which was
    # classed ERR_PROGRAM "most likely the host ran out of memory" and never retried
    spec = job_file(open_tmp, engine, "sh -c 'sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    docker("stop", "-t", "1", job_id)
    shown = taospec("status", job_id)
    assert shown.stdout.split()[1:3] == ["ERROR", "ERR_INFRA"], shown.stdout
    assert "docker saw no out-of-memory kill" in shown.stdout
    retried = taospec("retry", "--detach", job_id)
    assert retried.returncode == 0, retried.stderr


def test_run_starts_no_second_container_for_a_job_still_running(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, "sh -c 'sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    assert taospec("run", "-n", spec).stdout == f"busy  job  job {job_id} is still RUNNING\n"
    refused = taospec("run", spec)
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    assert f"`taospec logs -f {job_id}`" in refused.stderr
    assert [p.stem for p in (state_dir / "jobs").glob("*.json")] == [job_id]
    # stopped behind taospec's back: the record said RUNNING; the run records the end, goes on
    docker("stop", "-t", "1", job_id)
    assert taospec("run", "-n", spec).stdout.startswith(f"run   job  last run {job_id} ended ERROR")
    assert record(state_dir, job_id)["terminal_state"] == "ERROR"


def test_retry_asks_the_backend_whether_the_job_has_ended(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # a detached job that failed but was never polled read as "has not ended (RUNNING)"
    spec = job_file(open_tmp, engine, "sh -c 'exit 3'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    _wait_for(lambda: docker("inspect", "-f", "{{.State.Status}}", job_id).stdout == "exited\n")
    retried = taospec("retry", "--detach", job_id)
    assert retried.returncode == 0, retried.stderr
    assert record(state_dir, job_id)["terminal_state"] == "ERROR"


def test_a_container_created_by_a_launch_that_died_is_closed_after_the_grace(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # docker created the container, the submitting taospec died before starting it: the
    # record stayed PENDING "docker: created" for ever, and retry refused it
    cut = open_tmp / "cut-bin"
    cut.mkdir()
    (cut / "docker").write_text(
        f"#!{sys.executable}\nimport os, signal, subprocess, sys\n"
        f"real = {shutil.which('docker')!r}\nargs = sys.argv[1:]\nif args[:1] == ['run']:\n"
        "    subprocess.run([real, 'create', *[a for a in args[1:] if a != '-d']], check=False)\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n    sys.exit(0)\n"
        "os.execv(real, [real, *args])\n"
    )
    (cut / "docker").chmod(0o755)
    spec = job_file(open_tmp, engine, "sh -c 'echo never'")
    died = taospec("run", spec, env={"PATH": f"{cut}:{taospec.env['PATH']}"})
    assert died.returncode == -9, died.stderr
    job_id = _only_job(state_dir)
    assert docker("inspect", "-f", "{{.State.Status}}", job_id).stdout == "created\n"
    waiting = taospec("status", job_id)
    assert waiting.stdout.split()[1] == "PENDING", waiting.stdout  # within the grace
    closed = taospec("status", job_id, env={"TAOSPEC_LAUNCH_GRACE": "0"})
    assert closed.stdout.split()[1:3] == ["ERROR", "ERR_INFRA"], closed.stdout
    assert "never launched" in closed.stdout
    assert taospec("retry", "--detach", job_id).returncode == 0


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_follow_shows_a_progress_bar_before_its_line_ends(
    engine: str, taospec: Runner, open_tmp: Path, cleanup, stream: str
) -> None:
    # logs -f handed on whole lines alone: a bar redrawn with \r, which ends its line once
    # an epoch is over, showed nothing until then (docker logs -f shows its 16 KiB pieces);
    # tqdm draws its bar on stderr
    steps = 2000  # 22,000 characters: docker logs the first 16 KiB of the line as a piece
    script = ("exec >&2; " if stream == "stderr" else "") + progress_bar(steps, "/tmp/gate")
    spec = job_file(open_tmp, engine, f"sh -c {shlex.quote(script)}")
    started = taospec("run", "--detach", spec)
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    opened = lambda: docker("exec", job_id, "touch", "/tmp/gate")  # noqa: E731
    a_follow_shows_the_bar_as_it_is_redrawn(taospec, job_id, steps, opened, open_tmp)


def test_logs_of_a_container_removed_outside_taospec_exit_2_with_why(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # docker logs said "No such container" and taospec logs exited 0; then 1, which says
    # the job failed, of a job that COMPLETED too: what it says is that nothing can be read
    spec = job_file(open_tmp, engine, "sh -c 'echo hi; sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    docker("rm", "-f", job_id)
    shown = taospec("logs", job_id)
    assert shown.returncode == 2, shown.stderr
    assert "No such container" in shown.stdout + shown.stderr
    assert f"{job_id}: its output could not be read (docker exited 1)" in shown.stderr
    done = taospec("run", job_file(open_tmp, engine, "echo hi"))
    assert done.returncode == 0, done.stderr
    completed = done.stdout.split()[0]
    docker("rm", "-f", completed)
    for argv in (("logs", completed), ("logs", "-f", completed)):
        shown = taospec(*argv)
        assert shown.returncode == 2, (argv, shown.stderr)
        assert f"{completed}: its output could not be read (docker exited 1)" in shown.stderr


def a_look_hands_on_each_line_as_docker_logs_gives_it(
    env: dict[str, str], cwd: Path, job_id: str, folder: Path
) -> None:
    """``logs`` of the ended job ``job_id`` (run with ``env``), its ``docker logs`` kept from
    ending once it has given all of the output (a ``docker`` first on PATH that then waits
    for a gate): each line goes out before the read ends, so the output is never held whole."""
    gate = folder / "logs-gate"
    real = shutil.which("docker")
    held = write(
        folder / "logs-held" / "docker",
        f"""#!/bin/bash
if [ "$1" = logs ] && [[ " $* " != *" --follow "* && " $* " != *" --tail "* ]]; then
  {real} "$@"; code=$?
  while [ ! -e {gate} ]; do sleep 0.1; done
  exit $code
fi
exec {real} "$@"
""",
    )
    held.chmod(0o755)
    env = {**env, "PATH": f"{held.parent}:{env['PATH']}"}
    reader = subprocess.Popen(
        [*taospec_command(), "logs", job_id], env=env, cwd=cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert reader.stdout is not None
    try:
        shown = select.select([reader.stdout], [], [], 60)[0]  # docker logs not ended yet
        assert shown, "logs waited for docker logs to end"
        first = os.read(reader.stdout.fileno(), 100)
        assert first.startswith(b"epoch 1 loss=0.5\n")
    finally:
        gate.touch()
    rest, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert first + rest == b"epoch 1 loss=0.5\nepoch 2 loss=0.4\n"


def test_a_look_at_all_of_the_output_hands_on_each_line_as_docker_logs_gives_it(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    done = taospec("run", job_file(open_tmp, engine, EPOCHS))
    assert done.returncode == 0, done.stderr
    a_look_hands_on_each_line_as_docker_logs_gives_it(
        taospec.env, open_tmp, done.stdout.split()[0], open_tmp
    )


EPOCHS = "sh -c 'echo epoch 1 loss=0.5; echo epoch 2 loss=0.4'"
"""A job's command: two lines of output, the first of which a look must hand on early."""


def test_the_output_kept_by_prune_is_redacted_a_whole_line_at_a_time(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # logs read the kept copy with str.splitlines, which also breaks at a form feed, and
    # redacted each piece alone: both halves of the value went out
    value = "Ab12Xy\fCd34Ef56"
    spec = job_file(
        open_tmp, engine, 'sh -c \'printf "out=%s\\n" "$PLAIN_VAR"\'', env="{pass: [PLAIN_VAR]}"
    )
    passed = {"PLAIN_VAR": value}
    done = taospec("run", spec, env=passed)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    live = taospec("logs", job_id, env=passed)
    pruned = taospec("prune", env=passed)
    assert f"{job_id}: output copied" in pruned.stdout, pruned.stderr
    kept = taospec("logs", job_id, env=passed)
    assert [live.stdout, kept.stdout] == ["out=<redacted>\n"] * 2


def test_the_output_kept_by_prune_and_cancel_holds_the_lines_logs_showed(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # the copy was all of stdout, then all of stderr: an unended stdout line took the first
    # stderr line into it ("partialerr1"), and logs of the copy showed other lines than before
    command = "sh -c 'echo out1; printf partial; echo err1 >&2; echo err2 >&2'"
    done = taospec("run", job_file(open_tmp, engine, command))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    live = taospec("logs", job_id).stdout
    assert taospec("prune").returncode == 0
    kept = taospec("logs", job_id).stdout
    assert (
        sorted(kept.splitlines())
        == sorted(live.splitlines())
        == sorted(["out1", "partial", "err1", "err2"])
    )
    assert kept.endswith("\npartial")  # a line not ended comes last, as logs shows it
    script = "echo early >&2; printf step; sleep 0.3; echo late >&2; sleep 300"
    started = taospec("run", "-d", job_file(open_tmp, engine, f"sh -c {shlex.quote(script)}"))
    job_id = started.stdout.strip()
    _wait_for(lambda: docker("logs", job_id).stderr == "early\nlate\n")
    assert taospec("cancel", job_id).returncode == 0
    kept = taospec("logs", job_id).stdout
    assert sorted(kept.splitlines()) == ["early", "late", "step"], kept


def test_every_read_of_the_output_keeps_the_unended_line_of_each_stream_apart(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # logs joined stdout's unended line to stderr's ("abcdef"), and so did --tail 2, while
    # logs -f showed them apart ("abc\ndef")
    command = "sh -c 'echo one; printf abc; sleep 0.2; printf def >&2'"
    done = taospec("run", job_file(open_tmp, engine, command))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    shown = {
        how: taospec("logs", *how.split(), job_id).stdout
        for how in ("", "-f", "--tail 1", "--tail 2", "--tail 3", "-f --tail 2")
    }
    assert shown == {
        "": "one\nabc\ndef",
        "-f": "one\nabc\ndef",
        "--tail 1": "def",
        "--tail 2": "abc\ndef",
        "--tail 3": "one\nabc\ndef",
        "-f --tail 2": "abc\ndef",
    }
    assert taospec("prune").returncode == 0
    assert taospec("logs", job_id).stdout == "one\nabc\ndef"  # the copy prune kept


def test_prune_of_a_job_whose_results_folder_is_gone_says_so_and_what_to_do(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # it said the folder "is not on this machine", of a folder removed from this machine
    done = taospec("run", job_file(open_tmp, engine, "echo hi"))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    shutil.rmtree(open_tmp / "results" / job_id)
    pruned = taospec("prune")
    assert pruned.returncode == 0, pruned.stderr
    assert f"{job_id}: kept: its results directory {open_tmp}/results/{job_id} is gone" in (
        pruned.stderr
    )
    assert f"or remove the container with its output: docker rm {job_id}" in pruned.stderr
    assert docker("inspect", "--type", "container", job_id).returncode == 0


def test_the_tail_of_a_huge_kept_output_reads_its_end_alone(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # logs --tail N of a pruned job read the whole copy prune kept of its output
    done = taospec("run", job_file(open_tmp, engine, "sh -c 'echo early'"))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    pruned = taospec("prune")
    assert f"{job_id}: output copied" in pruned.stdout, pruned.stderr
    kept = open_tmp / "results" / job_id / "taospec.log"
    huge = 4 << 30
    os.truncate(kept, huge)  # sparse: no line end in it
    with kept.open("ab") as more:
        more.write(b"\nline-1\nline-2\nline-3")
    looked, read = run_counting_reads(taospec, "logs", "--tail", "2", job_id)
    assert (looked.returncode, looked.stdout) == (0, "line-2\nline-3"), looked.stderr
    assert read < 1 << 25, read  # some MiB: Python and taospec themselves


LOG_CHUNK = 16 * 1024
"""What docker's log copier holds of a line before it hands the line on unended."""
HALF_WRITTEN = (
    f"sh -c 'echo first; head -c {LOG_CHUNK - 8} /dev/zero | tr \\\\0 x; "
    'printf %s "${PLAIN_VAR%%VALUE*}"; while [ ! -e /tmp/gate ]; do sleep 0.2; done; '
    'echo "VALUE${PLAIN_VAR#*VALUE}"\''
)
"""A job that writes a line of ``x`` and the first part of its passed value (docker hands
on the first 8 characters of it: the line's first :data:`LOG_CHUNK`), waits for /tmp/gate
(made with ``docker exec``), then writes the rest."""


def look_while_a_value_is_half_written(
    taospec: Callable[..., subprocess.CompletedProcess[str]], job_id: str, passed: dict
) -> None:
    """``logs`` of the running container (``taospec``: how the test runs taospec) shows no
    part of the value it is still writing, and the whole line once it has ended."""
    _wait_for(lambda: "Zq8sup3r" in docker("logs", job_id).stdout)
    looked = taospec("logs", job_id, env=passed)
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout.startswith("first\nxxxx")
    assert "Zq8" not in looked.stdout
    assert "Zq8" not in taospec("logs", job_id, "--tail", "1", env=passed).stdout
    assert taospec("logs", job_id, "--tail", "0", env=passed).stdout == ""
    assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
    _wait_for(lambda: docker("inspect", "-f", "{{.State.Running}}", job_id).stdout == "false\n")
    ended = taospec("logs", job_id, env=passed).stdout
    assert ended == "first\n" + "x" * (LOG_CHUNK - 8) + "<redacted>\n"


def test_a_look_at_a_running_container_shows_no_part_of_a_value_being_written(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # logs (not -f) printed the unended last line as docker logs gave it: the first part
    # of a passed value the job was still writing went out, unredacted
    spec = job_file(open_tmp, engine, HALF_WRITTEN, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    started = taospec("run", "--detach", spec, env=passed)
    assert started.returncode == 0, started.stderr
    look_while_a_value_is_half_written(taospec, started.stdout.strip(), passed)


INTERLEAVED = (
    f"sh -c 'echo first; head -c {LOG_CHUNK - 8} /dev/zero | tr \\\\0 x; "
    'printf %s "${PLAIN_VAR%%VALUE*}"; while [ ! -e /tmp/gate ]; do sleep 0.2; done; '
    f"head -c {LOG_CHUNK} /dev/zero | tr \\\\0 y >&2; "
    "while [ ! -e /tmp/gate2 ]; do sleep 0.2; done; "
    'echo >&2; echo "VALUE${PLAIN_VAR#*VALUE}"\''
)
"""A job that writes, to stdout, a line of ``x`` and the first part of its passed value
(docker logs the line's first :data:`LOG_CHUNK` as one piece), then once /tmp/gate is made
a line of ``y`` to stderr (logged as one piece too), then once /tmp/gate2 is the ends of
both lines."""


def logs_of_a_line_broken_by_the_other_stream(
    taospec: Callable[..., subprocess.CompletedProcess[str]], job_id: str, passed: dict
) -> None:
    """``logs`` of the job :data:`INTERLEAVED` runs shows no part of the value while both
    its lines are unended, and (with ``-f`` too) once it has ended hands each stream's lines
    on whole, in their order: the stderr line does not break the stdout line holding the
    value. (Where it goes among them depends on which pipe is read first.)"""
    _wait_for(lambda: "Zq8sup3r" in docker("logs", job_id).stdout)
    assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
    _wait_for(lambda: docker("logs", job_id).stderr == "y" * LOG_CHUNK)
    looked = taospec("logs", job_id, env=passed)
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout.startswith("first\n")
    assert "xxxx" in looked.stdout
    assert "Zq8" not in looked.stdout
    assert docker("exec", job_id, "touch", "/tmp/gate2").returncode == 0
    _wait_for(lambda: docker("inspect", "-f", "{{.State.Running}}", job_id).stdout == "false\n")
    for how in ((), ("-f",)):
        shown = taospec("logs", *how, job_id, env=passed)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines(keepends=True)
        line = "x" * (LOG_CHUNK - 8) + "<redacted>\n"
        assert sorted(lines) == sorted(["first\n", "y" * LOG_CHUNK + "\n", line])
        assert lines.index("first\n") < lines.index(line)


def test_a_line_of_stdout_is_not_broken_by_a_line_of_stderr(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # docker logs writes the container's stdout and stderr apart and logs read them as one
    # pipe: a stderr line written while a stdout line was half written (docker logs a line
    # in pieces of LOG_CHUNK) broke it in two, and the value in it reached redaction in
    # two pieces, neither of which it knows
    spec = job_file(open_tmp, engine, INTERLEAVED, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    started = taospec("run", "--detach", spec, env=passed)
    assert started.returncode == 0, started.stderr
    logs_of_a_line_broken_by_the_other_stream(taospec, started.stdout.strip(), passed)


LONG_LINE = (
    f"sh -c 'echo first; head -c {LOG_CHUNK - 8} /dev/zero | tr \\\\0 x; echo \"$PLAIN_VAR\"'"
)
"""A job that writes a line docker logs in two pieces, the second holding the second part
of its passed value."""


def tail_of_a_line_logged_in_pieces(
    taospec: Callable[..., subprocess.CompletedProcess[str]], job_id: str, passed: dict
) -> None:
    """``logs --tail N`` (``-f`` too) of the job :data:`LONG_LINE` ran shows its last N
    whole lines."""
    line = "x" * (LOG_CHUNK - 8) + "<redacted>\n"
    for how in ((), ("-f",)):
        for tail, shown in (("1", line), ("2", "first\n" + line), ("3", "first\n" + line)):
            looked = taospec("logs", *how, "--tail", tail, job_id, env=passed)
            assert looked.returncode == 0, looked.stderr
            assert (how, tail, looked.stdout) == (how, tail, shown)
        assert taospec("logs", *how, "--tail", "0", job_id, env=passed).stdout == ""


def test_tail_counts_whole_lines_and_never_begins_inside_one(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # logs --tail N passed N to docker logs, which counts each piece of a line it logged in
    # pieces of LOG_CHUNK as a line: --tail 1 began inside the line, with the second part
    # of the passed value it held, which redaction does not know
    spec = job_file(open_tmp, engine, LONG_LINE, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    done = taospec("run", spec, env=passed)
    assert done.returncode == 0, done.stderr
    tail_of_a_line_logged_in_pieces(taospec, done.stdout.split()[0], passed)


LONG_LAST_LINES = (
    'sh -c \'v="$PLAIN_VAR"; a="${v%%VALUE*}"; b="VALUE${v#*VALUE}"; seq 200000; echo before; '
    f'head -c {LOG_CHUNK - 14} /dev/zero | tr \\\\0 x; printf %s "$a"; i=0; '
    f'while [ $i -lt 200 ]; do printf %s "$b"; head -c {LOG_CHUNK - 30} /dev/zero | tr \\\\0 y; '
    'printf %s "$a"; i=$((i + 1)); done; echo "$b"; echo after\''
)
"""A job that writes 200,000 short lines, then ``before``, a line docker logs in 202 pieces
with its passed value split between each piece and the next (each but the first begins
with the value's last 16 characters), and ``after``."""
LONG_LAST_LINE = "x" * (LOG_CHUNK - 14) + ("<redacted>" + "y" * (LOG_CHUNK - 30)) * 200
LONG_LAST_LINE += "<redacted>\n"
"""That long line, as ``logs`` shows it."""


def tails_read_from_the_end(
    taospec: Callable[..., subprocess.CompletedProcess[str]],
    job_id: str,
    passed: dict,
    reads: Callable[[], list[list[str]]],
) -> None:
    """``logs --tail N`` of the job :data:`LONG_LAST_LINES` ran shows its last N whole lines
    and reads only the end of its output: ``reads()`` is each ``docker logs`` run so far
    (the words after ``docker``)."""
    for tail, shown in (
        ("1", "after\n"),
        ("2", LONG_LAST_LINE + "after\n"),
        ("3", "before\n" + LONG_LAST_LINE + "after\n"),
        ("5", "199999\n200000\nbefore\n" + LONG_LAST_LINE + "after\n"),
    ):
        looked = taospec("logs", "--tail", tail, job_id, env=passed)
        assert looked.returncode == 0, looked.stderr
        assert (tail, looked.stdout) == (tail, shown)
    assert reads()
    for argv in reads():
        assert argv[:2] == ["logs", "--tail"], argv
        assert int(argv[2]) <= 1024, argv


def test_tail_reads_a_window_at_the_end_of_a_large_output(
    engine: str, taospec: Runner, open_tmp: Path, tmp_path: Path, cleanup
) -> None:
    # logs --tail 3 read all of the container's output (docker logs without --tail) to count
    # its whole lines: a look at the end of a long training job read gigabytes
    job_id, env, reads = _recorded_run(taospec, open_tmp, tmp_path, engine, LONG_LAST_LINES)
    tails_read_from_the_end(taospec, job_id, env, reads)


def _recorded_run(
    taospec: Runner, open_tmp: Path, tmp_path: Path, engine: str, command: str
) -> tuple[str, dict[str, str], Callable[[], list[list[str]]]]:
    """Run ``command``, passed a value as PLAIN_VAR, to its end: its job id, the environment
    that passes the value and puts a recording docker CLI first on PATH, and what it read."""
    env, reads = recording_docker(tmp_path)
    spec = job_file(open_tmp, engine, command, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    done = taospec("run", spec, env=passed)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0], {**passed, **env}, reads


def logged(pieces: list[tuple[bool, str]]):
    """``docker logs --tail WINDOW`` over ``pieces`` (whether stderr's, text) as docker logged
    them: the last WINDOW pieces (all when None), each stream's lines handed on as they end
    and what a stream leaves unended last, as ``proc.stream`` hands them on."""

    def read(window: int | None, out: Callable[[str], None], err: Callable[[str], None]) -> int:
        held = {False: "", True: ""}
        for error, piece in pieces if window is None else pieces[-window:]:
            *ended, held[error] = (held[error] + piece).split("\n")
            for line in ended:
                (err if error else out)(line + "\n")
        for error, rest in held.items():
            if rest:
                (err if error else out)(rest)
        return 0

    return read


def test_a_tail_never_leaves_out_a_whole_line_it_shows() -> None:
    # each stream's first line in a window may begin inside a line logged in pieces, and was
    # left out: of a job whose stderr (a traceback) came after much stdout, logs --tail 5
    # showed the traceback without its first line
    stdout = [(False, f"{number}\n") for number in range(1000)]
    traceback = ["Traceback (most recent call last):\n", "  frame\n", "Error: boom\n"]
    read = logged(stdout + [(True, line) for line in traceback])
    shown = last_lines(docker_platform.looked_at(5, False, read).lines, 5)
    assert shown == ["998\n", "999\n", *traceback]
    # a line logged in pieces at a window's edge is shown whole or not at all
    long_line = [(False, "x" * 16384)] * 3 + [(False, "y\n")]
    read = logged(stdout + long_line + [(True, line) for line in traceback])
    for lines in range(1, 6):
        shown = last_lines(docker_platform.looked_at(lines, False, read).lines, lines)
        assert shown == ["999\n", "x" * 3 * 16384 + "y\n", *traceback][-lines:]


def followed_after_a_look(
    tail: int, looked: list[tuple[bool, str]], between: list[tuple[bool, str]], live: list
) -> list[str]:
    """What ``logs -f --tail TAIL`` shows of a running job whose output was ``looked`` when
    the look read it, that logged ``between`` before the follow began, then ``live``."""
    earlier = docker_platform.Earlier.looked(tail, logged(looked), writing=True)
    shown: list[str] = []
    followed = docker_platform.Followed(
        earlier.after(False, shown.append), earlier.after(True, shown.append)
    )
    begun = looked + between
    replay = begun if earlier.window is None else begun[-earlier.window :]
    logged(replay + live)(None, followed.line(False), followed.line(True))
    return shown


def numbered(first: int, last: int) -> list[tuple[bool, str]]:
    return [(False, f"{number}\n") for number in range(first, last)]


def test_a_follow_begins_with_the_last_lines_of_a_look_at_a_window() -> None:
    # logs -f --tail N read all of the output, then followed all of it from its start; it
    # now looks at a window at its end and follows from there: a follow's window begins
    # later when the job logged more in between, and its first lines are found in the look
    warned = [(True, "warning\n")]
    live = [(False, "live\n"), (True, "Traceback\n"), (False, "after\n")]
    shown_live = ["live\n", "Traceback\n", "after\n"]
    ending = ["997\n", "998\n", "999\n"]
    for between in (0, 1, 20, docker_platform.SHIFT_ROOM):  # the follow still holds the tail
        more = numbered(1000, 1000 + between)
        shown = followed_after_a_look(3, warned + numbered(0, 1000), more, live)
        assert shown == [*ending, *(line for _, line in more), *shown_live], between
    # the stream the look saw only at the start of its window, which the follow's no longer
    # holds: the first line it logs after the look is shown
    looked = numbered(0, 990) + warned + numbered(990, 1000)
    more = numbered(1000, 1070)
    shown = followed_after_a_look(3, looked, more, live)
    assert shown == [*ending, *(line for _, line in more), *shown_live]
    # a stream that first writes after the look
    shown = followed_after_a_look(2, numbered(0, 1000), [], live)
    assert shown == ["998\n", "999\n", *shown_live]

    # a short output, all of which the look read: the follow begins with its first line
    shown = followed_after_a_look(2, [(False, "step\n")] * 5, [(False, "step\n")], live)
    assert shown == ["step\n"] * 3 + shown_live

    # a stream whose lines are all the same: no line of the other is left out, and none of
    # its own logged after the look (of those before, it may show more than the tail)
    def warning_every_tenth(first: int, last: int) -> list[tuple[bool, str]]:
        pieces = numbered(first, last)
        return [piece for i, piece in enumerate(pieces) for piece in (piece, *warned[: i % 10 < 1])]

    for between in (0, 30, 60):
        more = warning_every_tenth(1000, 1000 + between)
        shown = followed_after_a_look(3, warning_every_tenth(0, 1000), more, live)
        assert [line for line in shown if line != "warning\n"] == [
            *ending,
            *(line for error, line in more if not error),
            *shown_live,
        ], between
        after = shown[shown.index("1000\n") :] if more else []
        assert after.count("warning\n") == sum(error for error, _ in more), between


def test_a_follow_whose_window_begins_inside_a_line_never_shows_a_piece_of_it() -> None:
    # the follow's window (74 pieces for a tail of 2) of these 1014 begins inside the line
    # logged in pieces 1000 to 1003 once the job has logged 61 to 63 more
    long_line = [(False, "x" * LOG_CHUNK)] * 3 + [(False, "y\n")]
    looked = numbered(0, 1000) + long_line + numbered(1000, 1010)
    for between in range(55, 70):
        more = numbered(2000, 2000 + between)
        shown = followed_after_a_look(2, looked, more, [(False, "z\n")])
        assert shown == ["1008\n", "1009\n", *(line for _, line in more), "z\n"], between
    # the line is the tail's first: shown whole
    looked = numbered(0, 1000) + long_line + numbered(1000, 1001)
    for between in range(0, 10):
        shown = followed_after_a_look(2, looked, numbered(2000, 2000 + between), [])
        assert shown[:2] == ["x" * 3 * LOG_CHUNK + "y\n", "1000\n"], between


def ended_after_a_follow(tail: int, output: list[tuple[bool, str]], followed_to: int) -> str:
    """What ``logs -f --tail TAIL`` shows of a job that logged ``output``: the look read its
    first 1000 pieces, the follow gave them up to piece ``followed_to`` and left out what
    each stream left unended, and the end read after the job has ended gives all of it."""
    earlier = docker_platform.Earlier.looked(tail, logged(output[:1000]), writing=True)
    assert earlier.window is not None
    shown: list[str] = []
    followed = docker_platform.Followed(
        earlier.after(False, shown.append), earlier.after(True, shown.append)
    )
    takes = {error: followed.line(error) for error in (False, True)}
    replay = output[1000 - earlier.window : followed_to]
    logged(replay)(
        None,
        lambda line: line.endswith("\n") and takes[False](line),
        lambda line: line.endswith("\n") and takes[True](line),
    )
    followed.stopped(0, None)
    window = followed.pieces + docker_platform.END_MARGIN
    read = logged(output)
    followed.end(lambda out, err: read(window, out, err), True, earlier.unlooked())
    return "".join(shown)


def test_the_end_of_a_follow_from_a_window_is_found_in_a_window_at_the_end() -> None:
    # the end of a follow that began with a window read all of the output once more
    finals = [(False, "final-out"), (True, "final-err")]
    shown = ended_after_a_follow(2, numbered(0, 1000) + finals, 1002)
    assert shown == "998\n999\nfinal-out\nfinal-err"
    # lines it never gave, ended or not, and the same again as the ones before
    more = [(True, "warn\n"), *numbered(1000, 1005), (False, "1004\n"), (True, "last\n")]
    shown = ended_after_a_follow(2, numbered(0, 1000) + more + finals, 1003)
    assert shown.split("\n") == [
        "998", "999", "warn", "1000", "1001", "1002", "1003", "1004", "1004", "last",
        "final-out", "final-err",
    ]  # fmt: skip
    # a stream that logged nothing before, whose lines the follow never gave
    traceback = [(True, "Traceback (most recent call last):\n"), (True, "Error: boom\n")]
    shown = ended_after_a_follow(2, numbered(0, 1010) + traceback, 1010)
    assert shown == "998\n999\n" + "".join(f"{n}\n" for n in range(1000, 1010)) + "".join(
        line for _, line in traceback
    )
    # lines all the same: which of them the follow began with, and which it ended with, is
    # not known; it shows all its window holds (74 pieces), then what the job left unended,
    # which begins after a newline
    steps = [(False, "step\n")] * 1100 + [(False, "end")]
    assert ended_after_a_follow(2, steps, 1050) == "step\n" * (74 + 50) + "end"


def test_a_running_job_s_progress_bar_holds_back_no_tail() -> None:
    # a bar a trainer redraws on stderr without a newline is one unended piece in a window:
    # the last lines of a running job (run's progress line) came back empty behind it
    pieces = [(False, f"epoch {number}\n") for number in range(100)] + [(True, "\r 40%|####")]
    found = docker_platform.last_whole_lines(3, logged(pieces), writing=True)
    assert found == ["epoch 97\n", "epoch 98\n", "epoch 99\n"]


PAST_THE_LARGEST_WINDOW = (
    'sh -c \'echo first; printf %s "$PLAIN_VAR"; '
    f"head -c {600 * LOG_CHUNK} /dev/zero | tr \\\\0 y; echo'"
)
"""A job that writes ``first``, then a line that begins with its passed value and that
docker logs in 601 pieces: more than the largest window ``logs --tail 1`` reads."""


def test_tail_shows_a_line_longer_than_its_largest_window_whole(
    engine: str, taospec: Runner, open_tmp: Path, tmp_path: Path, cleanup
) -> None:
    job_id, env, reads = _recorded_run(taospec, open_tmp, tmp_path, engine, PAST_THE_LARGEST_WINDOW)
    line = "<redacted>" + "y" * (600 * LOG_CHUNK) + "\n"
    for tail, shown in (("1", line), ("2", "first\n" + line)):
        looked = taospec("logs", "--tail", tail, job_id, env=env)
        assert looked.returncode == 0, looked.stderr
        assert looked.stdout == shown
        assert reads()[-1] == ["logs", job_id]  # windows first, then all of it
        assert reads()[-2][:2] == ["logs", "--tail"]


PIECES_FAILING = (
    f'sh -c \'head -c {LOG_CHUNK - 8} /dev/zero | tr \\\\0 x; printf %s "$PLAIN_VAR"; '
    f"head -c {49 * LOG_CHUNK} /dev/zero | tr \\\\0 y; echo; exit 3'"
)
"""A job that fails after writing one line, which docker logs in 51 pieces: the last 50 of
them (docker's ``--tail 50``) begin inside its passed value."""


def last_lines_of_a_failure_logged_in_pieces(done: subprocess.CompletedProcess[str]) -> None:
    """``run`` of the job :data:`PIECES_FAILING` shows its last lines whole."""
    assert done.returncode == 1, done.stderr
    line = "x" * (LOG_CHUNK - 8) + "<redacted>" + "y" * (49 * LOG_CHUNK)
    assert f"  | {line}\n" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr


def test_the_last_lines_shown_of_a_failed_container_never_begin_inside_a_line(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # the last lines run prints (and status reads for its diagnosis) were docker logs
    # --tail 50, which counts each piece of a line logged in pieces as a line: they began
    # inside the line, with the second part of the passed value, which redaction does not know
    spec = job_file(open_tmp, engine, PIECES_FAILING, env="{pass: [PLAIN_VAR]}")
    done = taospec("run", spec, env={"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"})
    last_lines_of_a_failure_logged_in_pieces(done)


INTERLEAVED_FAILING = INTERLEAVED[:-1] + "; exit 3'"
""":data:`INTERLEAVED`, failing once it has written its lines."""


def last_lines_of_a_failure_broken_by_the_other_stream(
    running: subprocess.Popen[str], job_id: Callable[[], str]
) -> None:
    """``run`` (``running``) of the job :data:`INTERLEAVED_FAILING` (``job_id()`` once it is
    recorded) shows, once it has failed, each stream's last lines whole: the stderr line
    does not break the stdout line holding the value."""
    _wait_for(lambda: bool(job_id()) and "Zq8sup3r" in docker("logs", job_id()).stdout)
    assert docker("exec", job_id(), "touch", "/tmp/gate").returncode == 0
    _wait_for(lambda: docker("logs", job_id()).stderr == "y" * LOG_CHUNK)
    assert docker("exec", job_id(), "touch", "/tmp/gate2").returncode == 0
    out, err = running.communicate(timeout=120)
    assert running.returncode == 1, err
    shown = [line for line in err.splitlines() if line.startswith("  | ")]
    line = "x" * (LOG_CHUNK - 8) + "<redacted>"
    assert sorted(shown) == sorted(f"  | {text}" for text in ("first", "y" * LOG_CHUNK, line))
    assert "Zq8" not in out + err


def start(taospec: Runner, *args: str | os.PathLike[str], env: dict[str, str]):
    """``taospec ARGS`` started, its output piped."""
    return subprocess.Popen(
        [*taospec_command(), *map(str, args)],
        env={**taospec.env, **env},
        cwd=taospec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_last_lines_shown_of_a_failed_container_are_each_stream_s_whole_lines(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, INTERLEAVED_FAILING, env="{pass: [PLAIN_VAR]}")
    running = start(taospec, "run", spec, env={"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"})
    last_lines_of_a_failure_broken_by_the_other_stream(running, lambda: _only_job(state_dir))


GATED_FAILING = (
    "sh -c 'echo started; echo working; while [ ! -e /tmp/gate ]; do sleep 0.2; done; "
    "echo about to fail; exit 3'"
)
"""A job that writes two lines, then once /tmp/gate is made a third, and fails."""


def tail_reads_of_a_gated_failure(
    running: subprocess.Popen[str], job_id: Callable[[], str], reads: Callable[[], list[list[str]]]
) -> None:
    """``run`` (``running``, with a progress line every 0.1 s) of the job
    :data:`GATED_FAILING` (``job_id()`` once it is recorded) reads the job's output, for its
    progress line while it runs and for the last lines it shows once it has failed, with
    ``docker logs --tail`` alone: ``reads()`` is each ``docker logs`` it ran so far (the
    words after ``docker``)."""
    _wait_for(lambda: bool(job_id()) and bool(reads()))  # a progress line read the output
    assert docker("exec", job_id(), "touch", "/tmp/gate").returncode == 0
    out, err = running.communicate(timeout=120)
    assert running.returncode == 1, err
    assert re.search(r"^job \S+  RUNNING  ", err, re.M), err
    assert "  | started\n  | working\n  | about to fail\n" in err
    assert len(reads()) >= 2, reads()
    for argv in reads():
        assert argv[:2] == ["logs", "--tail"], argv
        assert argv[2].isdigit(), argv


def recording_docker(folder: Path) -> tuple[dict[str, str], Callable[[], list[list[str]]]]:
    """A ``docker`` first on PATH (the environment to run with) that notes each argv it is
    given, then runs the real one; and each ``docker logs`` it was given so far."""
    calls, real = folder / "docker-calls", shutil.which("docker")
    assert real is not None
    stand_in = write(
        folder / "bin" / "docker",
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {shlex.quote(str(calls))}\n'
        f'exec {shlex.quote(real)} "$@"\n',
    )
    stand_in.chmod(0o755)

    def reads() -> list[list[str]]:
        noted = calls.read_text().splitlines() if calls.exists() else []
        return [line.split() for line in noted if line.split()[:1] == ["logs"]]

    return {"PATH": f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}"}, reads


def test_the_last_lines_run_shows_are_read_from_the_end_of_the_output_alone(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, tmp_path: Path, cleanup
) -> None:
    # log_tail read all of the container's output, each time: run's progress line, every
    # TAOSPEC_PROGRESS_INTERVAL, read the whole log of a multi-day job again
    env, reads = recording_docker(tmp_path)
    spec = job_file(open_tmp, engine, GATED_FAILING)
    running = start(taospec, "run", spec, env={**env, "TAOSPEC_PROGRESS_INTERVAL": "0.1"})
    try:
        tail_reads_of_a_gated_failure(running, lambda: _only_job(state_dir), reads)
    finally:
        running.kill()


INSIDE_A_LONG_LINE = (
    'sh -c \'v="$PLAIN_VAR"; a="${v%%VALUE*}"; b="VALUE${v#*VALUE}"; '
    f'head -c {LOG_CHUNK - 14} /dev/zero | tr \\\\0 x; printf %s "$a"; i=0; '
    f'while [ $i -lt 200 ]; do printf %s "$b"; head -c {LOG_CHUNK - 30} /dev/zero | tr \\\\0 y; '
    'printf %s "$a"; i=$((i + 1)); done; echo "$b"; '
    "while [ ! -e /tmp/gate ]; do sleep 0.2; done'"
)
"""A job that writes a line docker logs in 202 pieces, its passed value split between each
piece and the next (each but the first begins with the value's last 16 characters), then
waits for /tmp/gate."""


def test_the_progress_line_shows_no_piece_of_a_line_longer_than_the_tail_it_reads(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, tmp_path: Path, cleanup
) -> None:
    # each docker logs --tail the progress line reads of a job whose last line is long
    # begins inside that line, with the second part of a passed value, which redaction does
    # not know: of each stream, everything up to its first newline is left out
    env, reads = recording_docker(tmp_path)
    spec = job_file(open_tmp, engine, INSIDE_A_LONG_LINE, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    progress = {"TAOSPEC_PROGRESS_INTERVAL": "0.1"}
    running = start(taospec, "run", spec, env={**env, **passed, **progress})
    try:
        _wait_for(lambda: bool(_only_job(state_dir)))
        job_id = _only_job(state_dir)
        _wait_for(lambda: docker("logs", "--tail", "1", job_id).stdout == "VALUE0123456789X\n")
        mark = len(reads())

        def firsts() -> int:  # progress lines begun since the line was written
            windows = [int(argv[2]) for argv in reads()]
            return windows[mark:].count(min(windows)) if windows else 0

        _wait_for(lambda: firsts() >= 2)  # the first of them has been printed
        assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
        out, err = running.communicate(timeout=120)
    finally:
        running.kill()
    assert running.returncode == 0, err
    assert re.search(r"^job \S+  RUNNING  \d+s$", err, re.M), err
    assert "VALUE" not in out + err


UNENDED_TAILS = "sh -c 'echo step; sleep 0.5; printf final-out; printf final-err >&2; exit 3'"
"""A job that writes a line, then the last of each stream without a newline, and fails."""

DROPPING_FOLLOW = """#!/usr/bin/env python3
# docker, but `docker logs --follow` leaves out what each stream has not ended when it stops,
# as the real one may (it can stop once the container exits, before the log copier has
# flushed the last piece of a line the job never ended)
import os, subprocess, sys, threading
argv = [REAL, *sys.argv[1:]]
if "logs" not in sys.argv[1:2] or "--follow" not in sys.argv:
    os.execv(REAL, argv)
child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def copy(source, fd):
    data = source.read()
    os.write(fd, data[: data.rfind(b"\\n") + 1])
threads = [threading.Thread(target=copy, args=(child.stdout, 1)),
           threading.Thread(target=copy, args=(child.stderr, 2))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
sys.exit(child.wait())
"""


def dropping_follow(tmp_path: Path) -> dict[str, str]:
    """The environment of a taospec whose docker is :data:`DROPPING_FOLLOW`."""
    real = shutil.which("docker")
    stand_in = write(tmp_path / "bin" / "docker", DROPPING_FOLLOW.replace("REAL", repr(real)))
    stand_in.chmod(0o755)
    return {"PATH": f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}"}


def test_following_shows_each_streams_unended_last_line_once_the_job_has_ended(
    engine: str, taospec: Runner, open_tmp: Path, tmp_path: Path, cleanup
) -> None:
    # docker logs --follow may stop before the last piece of a line the job never ended is
    # logged, and logs -f (and run -f) never read it: the job's last line was lost
    env = dropping_follow(tmp_path)
    spec = job_file(open_tmp, engine, UNENDED_TAILS)
    job_id = taospec("run", "--detach", spec).stdout.strip()
    followed = taospec("logs", "-f", job_id, env=env)
    assert followed.returncode == 1, followed.stderr
    assert sorted(followed.stdout.split("\n")) == ["final-err", "final-out", "step"]
    ran = taospec("run", "-B", "-f", spec, env=env)
    assert ran.returncode == 1, ran.stderr
    shown = ran.stdout.splitlines()
    assert shown[0] == "step"
    assert sorted(shown[1:3]) == ["final-err", "final-out"], ran.stdout


GATED_UNENDED_TAILS = (
    "sh -c 'seq 300; while [ ! -e /tmp/gate ]; do sleep 0.1; done; "
    "printf final-out; printf final-err >&2; exit 3'"
)
"""A job that writes 300 lines, then once /tmp/gate is made the last of each stream
without a newline, and fails."""


def test_following_the_tail_shows_each_streams_unended_last_line_once_the_job_has_ended(
    engine: str, taospec: Runner, open_tmp: Path, tmp_path: Path, cleanup
) -> None:
    # a follow that began with a window of the output is found in the end of the output
    # once the job has ended: what it left out is shown, and nothing twice
    env = dropping_follow(tmp_path)
    job_id = taospec("run", "--detach", job_file(open_tmp, engine, GATED_UNENDED_TAILS)).stdout
    job_id = job_id.strip()
    _wait_for(lambda: docker("logs", "--tail", "1", job_id).stdout == "300\n")
    following = start(taospec, "logs", "-f", "--tail", "2", job_id, env=env)
    try:
        _wait_for(lambda: _docker_following(job_id))
        assert docker("exec", job_id, "touch", "/tmp/gate").returncode == 0
        out, err = following.communicate(timeout=60)
    finally:
        following.kill()
    assert following.returncode == 1, err
    assert out == "299\n300\nfinal-out\nfinal-err"


def test_following_the_tail_of_an_ended_job_of_lines_all_the_same_shows_the_tail(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # logs -f --tail 2 of an ended job that logged 200 lines "same" showed 74 of them: the
    # follow's window, wider than the look's tail, was found at the look's last line, as
    # if the job had logged the lines before it since
    spec = job_file(open_tmp, engine, "sh -c 'for i in $(seq 200); do echo same; done'")
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    for tail in (0, 2, 5):
        followed = taospec("logs", "-f", "--tail", str(tail), job_id)
        assert followed.returncode == 0, followed.stderr
        assert followed.stdout == "same\n" * tail, (tail, len(followed.stdout.splitlines()))


def test_following_the_tail_of_an_ended_job_counts_its_unended_last_line_as_docker_does(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # logs -f --tail 1 of an ended job whose output ends without a newline printed 2 lines,
    # holding the last back as if it could still go on; docker logs -f --tail 1 prints 1
    done = taospec("run", job_file(open_tmp, engine, "sh -c 'printf \"a\\\\nb\\\\nc\"'"))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    for tail in ("0", "1", "2", "3"):
        dockers = docker("logs", "--follow", "--tail", tail, job_id).stdout
        assert taospec("logs", "-f", "--tail", tail, job_id).stdout == dockers, tail
        assert taospec("logs", "--tail", tail, job_id).stdout == dockers, tail


LIKE_DOCKERS_OWN = (
    "sh -c 'echo unexpected EOF >&2; sleep 0.5; echo step; "
    "echo error from daemon in stream: Error grabbing logs: unexpected EOF >&2'"
)
"""A job that writes, on stderr, lines of the form of the docker CLI's own errors, one of
them its last, and completes."""


def test_a_jobs_own_lines_that_look_like_dockers_errors_are_shown(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, LIKE_DOCKERS_OWN)
    job_id = taospec("run", "--detach", spec).stdout.strip()
    followed = taospec("logs", "-f", job_id)
    assert followed.returncode == 0, followed.stderr
    ran = taospec("run", "-B", "-f", spec)
    assert ran.returncode == 0, ran.stderr
    for shown in (followed.stdout.splitlines(), ran.stdout.splitlines()[:-1]):
        assert sorted(shown) == [
            "error from daemon in stream: Error grabbing logs: unexpected EOF",
            "step",
            "unexpected EOF",
        ], shown


LONG_THEN_LIVE = (
    "sh -c 'echo early-err >&2; pad=$(head -c 1000 /dev/zero | tr \\\\0 y); "
    'seq 60000 | sed "s/$/ $pad/"; echo ready; '
    "while [ ! -e /tmp/gate ]; do sleep 0.1; done; echo live-1; sleep 0.5; "
    "echo live-err >&2; sleep 0.5; echo live-2; sleep 0.5; echo live-3'"
)
"""A job that writes a line on stderr, then 60,000 numbered lines of 1 KB and ``ready``, and
once /tmp/gate is made, a live line now and then, one of them (the first since the start)
on stderr, and completes."""


def followed_tail_of_long_then_live(out: str) -> None:
    """Assert that a ``logs -f --tail 5`` of :data:`LONG_THEN_LIVE` showed the last lines and
    each live line once, stdout's in their order. The stderr line comes through a pipe of
    its own, so where it falls among stdout's lines is whichever pipe was read first (on a
    busy machine, half a second is not enough to decide it)."""
    pad = " " + "y" * 1000
    shown = out.splitlines(keepends=True)
    assert shown.count("live-err\n") == 1, shown[-6:]
    shown.remove("live-err\n")
    last = [f"{number}{pad}\n" for number in range(59997, 60001)]
    assert shown == [*last, "ready\n", "live-1\n", "live-2\n", "live-3\n"]


def _docker_following(job_id: str) -> bool:
    """Whether a ``docker logs --follow`` of ``job_id`` runs (found in /proc)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:2] == [b"logs"] and b"--follow" in argv and job_id.encode() in argv:
            return True
    return False


def test_following_the_tail_of_a_long_output_reads_its_end_alone(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # logs -f --tail N read the container's whole output three times (to count the lines
    # before the last N, then streamed from its start, then once more when it ended): of a
    # job with days of output, following began minutes late
    spec = job_file(open_tmp, engine, LONG_THEN_LIVE)
    job_id = taospec("run", "--detach", spec).stdout.strip()
    _wait_for(lambda: docker("logs", "--tail", "1", job_id).stdout == "ready\n", timeout=120)
    following = subprocess.Popen(
        [sys.executable, "-c", COUNTED, "logs", "-f", "--tail", "5", job_id],
        env=taospec.env,
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
    assert bytes_read(err) < whole // 10, (bytes_read(err), whole)


CHATTY = (
    "sh -c 'i=0; while :; do echo $i; i=$((i + 1)); [ $((i % 8)) = 0 ] && usleep {pause}; done'"
)
"""A job that writes numbered lines, 8 at a time with a pause of ``pause`` microseconds
between, until it is stopped."""


@pytest.mark.parametrize("pause", [1, 20000])  # tens of thousands of lines a second, hundreds
def test_following_the_tail_of_a_chatty_job_shows_each_line_once_in_order(
    engine: str, taospec: Runner, open_tmp: Path, cleanup, pause: int
) -> None:
    # the follow begins with a window at the end after the look read one: however many
    # lines the job logs between the two, no line is shown twice, none after the first is
    # left out, and none is shown from inside
    spec = job_file(open_tmp, engine, CHATTY.format(pause=pause))
    job_id = taospec("run", "--detach", spec).stdout.strip()
    _wait_for(lambda: int(docker("logs", "--tail", "1", job_id).stdout or 0) > 1000)
    for tail in ("5", "200"):
        following = start(taospec, "logs", "-f", "--tail", tail, job_id, env={})
        assert following.stdout is not None
        try:
            shown = [following.stdout.readline() for _ in range(600)]
        finally:
            following.kill()
            following.communicate()
        numbers = [int(line) for line in shown]
        assert numbers == list(range(numbers[0], numbers[0] + 600)), tail


def stop_process(argv: list[str], timeout: float = 30) -> None:
    """SIGTERM to the process whose argv is ``argv``, once one runs (found in /proc)."""
    wanted = "\0".join(argv).encode() + b"\0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if cmdline.read_bytes() == wanted:
                    os.kill(int(cmdline.parent.name), signal.SIGTERM)
                    return
            except (OSError, ValueError):
                continue
        time.sleep(0.1)
    raise AssertionError(f"no process ran {argv}")


def stopped_following(following: subprocess.Popen[str], job_id: str) -> tuple[str, str]:
    """What a ``logs -f`` whose backend stopped answering while the job ran printed after
    what was read of it, and its stderr: exit 2, saying the job may still be running and
    how to follow it again."""
    out, err = following.communicate(timeout=60)
    assert following.returncode == 2, (out, err)
    assert f"stopped following the output of {job_id}: " in err, err
    assert err.endswith(
        f"; the job may still be running: taospec logs -f {job_id} follows it again\n"
    ), err
    return out, err


def test_following_a_job_whose_docker_logs_dies_says_it_may_still_run(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # logs -f ended as if the job had, with exit 1 and "its output could not be read"
    spec = job_file(open_tmp, engine, "sh -c 'echo one; sleep 60'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    following = start(taospec, "logs", "-f", job_id, env={})
    stop_process(["docker", "logs", "--follow", job_id])
    _, err = stopped_following(following, job_id)
    # the docker CLI exits 143 once it handles SIGTERM; before that, the signal ends it
    stopped = re.search(r"its output stopped \(docker (.*)\) while the job is RUNNING", err)
    assert stopped is not None, err
    assert stopped[1] in ("exited 143", "was ended by SIGTERM"), err
    assert taospec("status", job_id).stdout.split()[1] == "RUNNING"


ENGINE_PROXY = """import os, signal, socket, sys, threading
listen, target = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX)
server.bind(listen)
server.listen(16)
followers = []
def pump(a, b):
    try:
        while data := a.recv(65536):
            if b"/logs?" in data and b"follow=1" in data:
                followers.append(a)
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def fail_follows(signum, frame):
    message = os.environ["DAEMON_SAYS"].encode()
    frame = bytes([3, 0, 0, 0]) + len(message).to_bytes(4, "big") + message
    for client in followers:
        client.sendall(b"%x\\r\\n%s\\r\\n" % (len(frame), frame))
        client.shutdown(socket.SHUT_RDWR)
signal.signal(signal.SIGUSR1, fail_follows)
while True:
    client, _ = server.accept()
    upstream = socket.socket(socket.AF_UNIX)
    upstream.connect(target)
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
"""
"""A socket that passes everything on to the local engine's, while it runs. On SIGUSR1
it ends each ``docker logs --follow`` as the engine does when it cannot read the log:
with a frame of the stream the engine keeps for its own errors (3), holding DAEMON_SAYS."""


def proxied_job(
    taospec: Runner, open_tmp: Path, engine: str, command: str, daemon_says: str = ""
) -> tuple[subprocess.Popen[bytes], str]:
    """The proxy, and a job it started, launched on the engine through it."""
    socket_path = open_tmp / "engine.sock"
    proxy = subprocess.Popen(
        [sys.executable, "-c", ENGINE_PROXY, str(socket_path), "/var/run/docker.sock"],
        env={**os.environ, "DAEMON_SAYS": daemon_says},
    )
    _wait_for(socket_path.exists)
    spec = job_file(open_tmp, engine, command, env="{pass: [PLAIN_VAR]}")
    text = spec.read_text().replace(
        "docker: {shm_size: 64m}", f'docker: {{shm_size: 64m, host: "unix://{socket_path}"}}'
    )
    spec.write_text(text)
    job_id = taospec("run", "--detach", spec, env={"PLAIN_VAR": PASSED}).stdout.strip()
    return proxy, job_id


PASSED = "Zq8sup3rs3cretVALUE0123456789X"


def test_following_a_job_whose_engine_stops_answering_says_it_may_still_run(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # the job's engine is reached through a socket that stops answering mid-follow, as an
    # engine that is stopped does (the shared engine itself keeps running); the docker CLI
    # then writes its own error ("unexpected EOF") where it writes the job's stderr, and
    # logs -f showed it as the job's output
    proxy, job_id = proxied_job(taospec, open_tmp, engine, "sh -c 'echo one; sleep 60'")
    try:
        following = start(taospec, "logs", "-f", job_id, env={})
        assert following.stdout is not None
        assert following.stdout.readline() == "one\n"
    finally:
        proxy.terminate()
        proxy.wait()
    out, err = stopped_following(following, job_id)
    assert out == ""
    socket_path = open_tmp / "engine.sock"
    assert (
        f"the Docker engine at unix://{socket_path} (the engine the job was launched on) "
        "does not answer" in err
    ), err
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout == "running\n"


def test_following_a_job_whose_log_the_engine_cannot_read_says_what_docker_said(
    engine: str, taospec: Runner, open_tmp: Path, cleanup
) -> None:
    # the engine ends a follow with an error of its own, which the docker CLI writes where
    # it writes the job's stderr, and logs -f showed it as the job's last line
    says = f"Error grabbing logs: unexpected EOF in {PASSED}"
    command = "sh -c 'echo one; sleep 60'"
    proxy, job_id = proxied_job(taospec, open_tmp, engine, command, daemon_says=says)
    try:
        following = start(taospec, "logs", "-f", job_id, env={"PLAIN_VAR": PASSED})
        assert following.stdout is not None
        assert following.stdout.readline() == "one\n"
        proxy.send_signal(signal.SIGUSR1)
        out, err = stopped_following(following, job_id)
    finally:
        proxy.terminate()
        proxy.wait()
    assert out == ""
    assert (
        "its output stopped (docker exited 1: error from daemon in stream: Error grabbing "
        "logs: unexpected EOF in <redacted>) while the job is RUNNING" in err
    ), err
    assert PASSED not in err
