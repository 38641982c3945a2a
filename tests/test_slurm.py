"""The slurm platform on a real single-node Slurm (scripts/ensure-slurm.sh), and its goldens.

Jobs with ``container: none`` and ``container: docker`` are submitted with
the real ``taospec`` command to the real scheduler: success, exit codes,
cancel, the time limit, logs while running, a login node over the loopback
ssh server, secrets through the sidecar env file, and a lost ``sbatch``
answer (a wrapper that submits but does not answer). Pyxis and multi-node
scripts cannot run on one machine: they are golden files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pty
import re
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from taospec import lint, plantext, rules
from taospec.identity import Identity
from taospec.placeholders import JOB_ID
from taospec.platforms import render
from taospec.platforms import slurm as platform
from taospec.platforms.common import HELD_AT_MOST
from taospec.states import CANCELED, COMPLETE, ERROR, PENDING, RUNNING
from tests.conftest import (
    COUNTED,
    ROOT,
    TEST_IMAGE,
    Relay,
    Runner,
    a_follow_shows_the_bar_as_it_is_redrawn,
    a_look_reads_the_log_a_block_at_a_time,
    bash_words,
    bytes_read,
    load_job,
    peak_memory,
    progress_bar,
    run_counting_reads,
    spawn,
    write,
)

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TAOSPEC_UPDATE_GOLDEN") == "1"
LOGIN = "root@taospec-test"
LAUNCHER = Identity(1000, 1000, (), "alice")
CONTAINERS = ["none", "docker"]
SLURM_STATE = Path(os.environ.get("TAOSPEC_TEST_STATE", "/tmp/taospec-test-state")) / "slurm"


# -- helpers ---------------------------------------------------------------


def job_file(folder: Path, command: list[str] | str, container: str = "none", **extra) -> Path:
    """A slurm job spec in ``folder``, its results under ``folder/results``."""
    doc: dict[str, object] = {
        "version": 1,
        "network_arch": "slurmtest",
        "action": container,
        "platform": "slurm",
        "image": TEST_IMAGE,
        "command": command,
        "results_root": str(folder / "results"),
    }
    slurm_block = {"container": container, **extra.pop("slurm", {})}
    doc.update(extra)
    doc["slurm"] = slurm_block
    return write(folder / f"{container}.yaml", yaml.safe_dump(doc, sort_keys=False))


def shown(taospec: Runner, job_id: str) -> dict:
    """The job's record, as ``taospec show`` prints it."""
    done = taospec("show", job_id)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def status(taospec: Runner, job_id: str) -> dict:
    done = taospec("status", "--json", job_id)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def submit(taospec: Runner, spec: Path, env: dict[str, str] | None = None) -> str:
    done = taospec("run", "-d", spec, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


def opened_id(done: subprocess.CompletedProcess[str]) -> str:
    """The id of the job whose record ``taospec run`` opened (also when the submit failed)."""
    match = re.search(r"^(\S+): opened record", done.stderr, re.MULTILINE)
    assert match, done.stderr
    return match.group(1)


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what or predicate}"
        time.sleep(0.2)


def log_of(results: Path, job_id: str) -> str:
    path = results / job_id / "taospec.log"
    return path.read_text() if path.exists() else ""


def containers_of(job_id: str) -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=tao-job={job_id}", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()


def slurm_state(slurm_id: str) -> str:
    shown_job = subprocess.run(
        ["scontrol", "-o", "show", "job", slurm_id], capture_output=True, text=True, check=True
    )
    native = platform.parse_scontrol(shown_job.stdout)
    assert native is not None
    return native.state


def jobs_named(name: str) -> list[str]:
    return platform.jobs_named(name, None)


# -- real jobs -------------------------------------------------------------


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_job_that_succeeds_is_complete_with_its_output(
    container: str, slurm, engine, taospec: Runner, open_tmp: Path
) -> None:
    spec = job_file(
        open_tmp, "sh -c 'echo out-$0 > {results_dir}/out.txt; cat {config_path}' x",
        container, spec={"greeting": "hi"},
    )  # fmt: skip
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == COMPLETE
    results = open_tmp / "results" / job_id
    assert (results / "out.txt").read_text() == "out-x\n"
    assert log_of(open_tmp / "results", job_id) == "greeting: hi\n"
    record = shown(taospec, job_id)
    assert [t["state"] for t in record["transitions"]] == [PENDING, RUNNING, COMPLETE]
    assert record["platform"] == "slurm"
    assert jobs_named(job_id) == [record["backend_ref"]]
    assert slurm_state(record["backend_ref"]) == "COMPLETED"
    script = (results / "taospec.sbatch").read_text()
    assert f"#SBATCH --job-name={job_id}\n" in script
    assert f"#SBATCH --output={results}/taospec.log\n" in script
    if container == "docker":
        assert containers_of(job_id) == []


@pytest.mark.parametrize("container", CONTAINERS)
def test_exit_code_3_is_an_error_with_its_code(
    container: str, slurm, engine, taospec: Runner, open_tmp: Path
) -> None:
    spec = job_file(open_tmp, ["sh", "-c", "echo failing; exit 3"], container)
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id, state = done.stdout.split()
    assert state == ERROR
    record = shown(taospec, job_id)
    assert record["terminal_state"] == ERROR
    assert record["err_class"] == "ERR_PROGRAM"
    assert "slurm: FAILED, exit code 3" in record["transitions"][-1]["message"]
    assert "failing" in done.stderr  # the log tail
    now = status(taospec, job_id)
    assert (now["state"], now["exit_code"]) == (ERROR, 3)
    if container == "docker":
        assert containers_of(job_id) == []


@pytest.mark.parametrize("container", CONTAINERS)
def test_cancel_stops_a_running_job_and_leaves_no_container(
    container: str, slurm, engine, taospec: Runner, open_tmp: Path
) -> None:
    spec = job_file(open_tmp, ["sh", "-c", "echo started; sleep 300"], container)
    job_id = submit(taospec, spec)
    results = open_tmp / "results"
    wait_for(lambda: "started" in log_of(results, job_id), what="the job's first line")
    if container == "docker":
        assert containers_of(job_id) == [job_id]
    done = taospec("cancel", job_id)
    assert done.returncode == 0, done.stderr
    assert f"{job_id} CANCELED" in done.stdout
    record = shown(taospec, job_id)
    assert record["terminal_state"] == CANCELED
    assert slurm_state(record["backend_ref"]) == "CANCELLED"
    assert containers_of(job_id) == []  # gone by the time cancel returns
    again = taospec("cancel", job_id)
    assert again.returncode == 0
    assert "already ended CANCELED" in again.stdout


def test_cancel_of_a_job_that_already_ended_is_reported_not_an_error(
    slurm, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    spec = job_file(open_tmp, ["true"])
    job_id = submit(taospec, spec)
    slurm_id = shown(taospec, job_id)["backend_ref"]
    wait_for(lambda: slurm_state(slurm_id) == "COMPLETED", what="the job to complete")
    done = taospec("cancel", job_id)  # the record has not seen the end yet
    assert done.returncode == 0, done.stderr
    # cancel asks the backend first: the job's real outcome is recorded, nothing is cancelled.
    assert f"{job_id} already ended COMPLETE (slurm: COMPLETED" in done.stdout
    assert shown(taospec, job_id)["terminal_state"] == COMPLETE


def test_a_job_slurm_no_longer_knows_is_unknown_and_says_why(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    fields = {"platform": "slurm", "image": "x", "network-arch": "a", "action": "b",
              "storage-tier": "A", "results-root": str(open_tmp)}  # fmt: skip
    opened = taospec("record", "open", *(f"--{key}={value}" for key, value in fields.items()))
    job_id = opened.stdout.strip()
    marked = taospec("record", "mark", job_id, "--state", "RUNNING", "--backend-ref", "999999")
    assert marked.returncode == 0, marked.stderr
    now = status(taospec, job_id)
    assert now["state"] == "UNKNOWN"
    assert "scontrol does not know job 999999" in now["message"]
    assert "accounting storage is disabled" in now["message"]


def test_a_lost_running_mark_is_healed_by_the_job_name(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    fields = {"platform": "slurm", "image": "x", "network-arch": "a", "action": "b",
              "storage-tier": "A", "results-root": str(open_tmp)}  # fmt: skip
    job_id = taospec("record", "open", *(f"--{k}={v}" for k, v in fields.items())).stdout.strip()
    submitted = subprocess.run(
        ["sbatch", "--parsable", f"--job-name={job_id}", "--output=/dev/null", "--wrap=sleep 300"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    slurm_id = submitted.stdout.strip()
    try:
        now = status(taospec, job_id)
        assert now["backend_ref"] == slurm_id
        # What Slurm says is recorded: PENDING for a moment while it schedules, then RUNNING.
        assert now["recorded_state"] == now["state"]
        assert now["state"] in (PENDING, RUNNING)
        assert "healed" in shown(taospec, job_id)["transitions"][-1]["message"]
    finally:
        subprocess.run(["scancel", slurm_id], check=False)


@pytest.mark.slow
def test_the_time_limit_ends_jobs_in_error_and_removes_the_container(
    slurm, engine, taospec: Runner, open_tmp: Path
) -> None:
    jobs = {}
    for container in CONTAINERS:
        spec = job_file(open_tmp, ["sh", "-c", "echo started; sleep 600"], container,
                        slurm={"time": "1"})  # fmt: skip
        jobs[container] = submit(taospec, spec)
    results = open_tmp / "results"
    wait_for(lambda: all("started" in log_of(results, j) for j in jobs.values()))
    assert containers_of(jobs["docker"]) == [jobs["docker"]]
    # Slurm counts whole minutes and checks limits about every 30 s.
    wait_for(lambda: all(status(taospec, j)["state"] == ERROR for j in jobs.values()),
             timeout=180, what="the time limit")  # fmt: skip
    for job_id in jobs.values():
        record = shown(taospec, job_id)
        assert record["terminal_state"] == ERROR
        assert "slurm: TIMEOUT" in record["transitions"][-1]["message"]
        assert "time limit" in record["transitions"][-1]["message"]
    wait_for(lambda: containers_of(jobs["docker"]) == [], timeout=30, what="container removal")


@pytest.mark.parametrize("limit", ["UNLIMITED", "infinite"])
def test_a_job_without_a_time_limit_is_written_as_sbatch_takes_it(
    slurm, taospec: Runner, open_tmp: Path, limit: str
) -> None:
    # sbatch takes UNLIMITED or INFINITE, in any case, for no time limit of the job's own;
    # the schema refused them
    spec = job_file(open_tmp, "true", slurm={"time": limit})
    assert taospec("validate", spec).returncode == 0
    job_id = submit(taospec, spec)
    slurm_id = shown(taospec, job_id)["backend_ref"]
    shown_job = subprocess.run(["scontrol", "-o", "show", "job", slurm_id],
                               capture_output=True, text=True, check=True)  # fmt: skip
    assert "TimeLimit=UNLIMITED" in shown_job.stdout.split(), shown_job.stdout


@pytest.mark.parametrize(
    ("limit", "kept"),
    [("35791393", "24855-03:13:00"), ("1:99:99", "02:41:00"), ("0-0:0:1", "00:01:00")],
)
def test_a_time_limit_slurm_keeps_as_written_passes(
    slurm, taospec: Runner, open_tmp: Path, limit: str, kept: str
) -> None:
    # Slurm counts whole minutes, a second over rounds up, and 35,791,393 is its last
    spec = job_file(open_tmp, "true", slurm={"time": limit})
    assert taospec("validate", spec).returncode == 0
    slurm_id = shown(taospec, submit(taospec, spec))["backend_ref"]
    shown_job = subprocess.run(["scontrol", "-o", "show", "job", slurm_id],
                               capture_output=True, text=True, check=True)  # fmt: skip
    assert f"TimeLimit={kept}" in shown_job.stdout.split(), shown_job.stdout


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        # sbatch wraps these to another limit (99999999999 minutes became 2981813-22:48:00),
        # reads them as none at all, or refuses them, after the record was opened
        ("35791394", "35791394 minutes"),
        ("99999999999", "99999999999 minutes"),
        ("2982616-13:33", "4294967853 minutes"),
        ("4294967293", "4294967293 minutes"),
        # a zero limit is Slurm's word for none, which the plan then does not say
        ("0", "0 asks Slurm for no time limit"),
        ("00:00:00", "00:00:00 asks Slurm for no time limit"),
    ],
)
def test_a_time_limit_slurm_does_not_keep_as_written_is_refused(
    taospec: Runner, open_tmp: Path, state_dir: Path, limit: str, said: str
) -> None:
    spec = job_file(open_tmp, "true", slurm={"time": limit})
    for verb in ("validate", "run"):
        done = taospec(verb, spec)
        assert done.returncode == 2, done.stderr
        assert "$.slurm.time: slurm.time " in done.stderr, done.stderr
        assert said in done.stderr, done.stderr
    assert not (state_dir / "jobs").exists()


@pytest.mark.parametrize("container", CONTAINERS)
def test_logs_while_running_and_follow_until_the_end(
    container: str, slurm, engine, taospec: Runner, open_tmp: Path
) -> None:
    gate = open_tmp / "gate"
    command = ["sh", "-c", "echo first; while [ ! -e /gate/open ]; do sleep 0.2; done; "
               "echo second; echo -n partial"]  # fmt: skip
    gate.mkdir()
    spec = job_file(open_tmp, command, container)
    if container == "docker":
        spec = job_file(open_tmp, command, container, mounts=[{"source": str(gate),
                                                               "target": "/gate"}])  # fmt: skip
    else:
        spec = job_file(open_tmp, [*command[:2], command[2].replace("/gate", str(gate))])
    job_id = submit(taospec, spec)
    wait_for(lambda: "first" in log_of(open_tmp / "results", job_id), what="the first line")
    now = taospec("logs", job_id)
    assert now.returncode == 0
    assert now.stdout == "first\n"
    assert status(taospec, job_id)["state"] == RUNNING
    follower = subprocess.Popen(
        [*taospec_argv(), "logs", "-f", job_id], env=taospec.env, cwd=taospec.cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    assert follower.poll() is None, "logs -f must keep following while the job runs"
    (gate / "open").touch()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert out == "first\nsecond\npartial"
    tail = taospec("logs", "--tail", "1", job_id)
    assert tail.stdout == "partial"


def test_a_follow_shows_a_progress_bar_before_its_line_ends(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    # logs -f handed on whole lines alone: a bar redrawn with \r, which ends its line once
    # an epoch is over, showed nothing until then
    gate = open_tmp / "gate"
    job_id = submit(taospec, job_file(open_tmp, ["sh", "-c", progress_bar(300, str(gate))]))
    a_follow_shows_the_bar_as_it_is_redrawn(taospec, job_id, 300, gate.touch, open_tmp)


def test_a_follow_hands_on_a_line_longer_than_it_holds_before_it_ends(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    # a follow held the line being written whole, however long, and read it anew at each
    # poll: a job that never ends its line grew taospec's memory without bound
    gate, shown = open_tmp / "gate", open_tmp / "followed.txt"
    script = (
        f"head -c {2 * HELD_AT_MOST} /dev/zero | tr '\\0' x; "
        f"while [ ! -e {gate} ]; do sleep 0.1; done; echo ' done'"
    )
    job_id = submit(taospec, job_file(open_tmp, ["sh", "-c", script]))
    with shown.open("w") as out:
        follow = spawn(["logs", "-f", job_id], taospec.env, taospec.cwd, stdout=out)
        try:
            deadline = time.monotonic() + 60
            while shown.stat().st_size < HELD_AT_MOST:
                assert follow.poll() is None, follow.communicate()
                assert time.monotonic() < deadline, "the long line was held whole"
                time.sleep(0.1)
            gate.touch()
            assert follow.wait(timeout=120) == 0, follow.communicate()
        finally:
            gate.touch()
            if follow.poll() is None:
                follow.kill()
            follow.communicate()
    assert shown.read_text() == "x" * 2 * HELD_AT_MOST + " done\n"


def taospec_argv() -> list[str]:
    from tests.conftest import taospec_command

    return taospec_command()


def _ssh_problem() -> str | None:
    done = subprocess.run(["ssh", "-o", "BatchMode=yes", LOGIN, "command -v sbatch"],
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    if done.returncode != 0:
        return "ssh to the loopback sshd fails (scripts/ensure-sshd.sh): " + done.stderr.strip()
    return None


@pytest.fixture
def login_node() -> str:
    problem = _ssh_problem()
    if problem is not None:
        if os.environ.get("TAOSPEC_REQUIRE_ENGINE") == "1":
            pytest.fail(problem)
        pytest.skip(reason=problem)
    return LOGIN


def test_a_job_submitted_through_a_login_node_over_ssh(
    slurm, login_node: str, taospec: Runner, open_tmp: Path
) -> None:
    spec = job_file(open_tmp, ["sh", "-c", "echo on-the-cluster; cat {config_path}; sleep 300"],
                    slurm={"login": login_node}, spec={"where": "cluster"})  # fmt: skip
    dry = taospec("run", "-n", spec)
    ssh = f"ssh -o BatchMode=yes -o ServerAliveInterval=20 -- {login_node}"
    assert ssh in " ".join(dry.stdout.replace("\\\n", " ").split())  # as one line
    assert "'sbatch --parsable " in dry.stdout
    job_id = submit(taospec, spec)
    results = open_tmp / "results"
    wait_for(lambda: "where: cluster" in log_of(results, job_id), what="the job's output")
    assert taospec("logs", job_id).stdout == "on-the-cluster\nwhere: cluster\n"
    record = shown(taospec, job_id)
    assert jobs_named(job_id) == [record["backend_ref"]]
    assert status(taospec, job_id)["state"] == RUNNING
    done = taospec("cancel", job_id)
    assert done.returncode == 0, done.stderr
    assert slurm_state(record["backend_ref"]) == "CANCELLED"
    assert "slurm: CANCELLED" in status(taospec, job_id)["message"]


@pytest.mark.parametrize("through_login", [False, True], ids=["here", "login-node"])
def test_logs_of_a_long_run_are_read_a_block_at_a_time(
    slurm, login_node: str, taospec: Runner, open_tmp: Path, through_login: bool
) -> None:
    # logs read the whole output file at once (over ssh too): a log of gigabytes would not
    # fit in memory
    login = {"slurm": {"login": login_node}} if through_login else {}
    job_id = submit(taospec, job_file(open_tmp, ["true"], **login))
    wait_for(lambda: "COMPLETE" in taospec("status", job_id).stdout, what="the job's end")
    a_look_reads_the_log_a_block_at_a_time(taospec, job_id, open_tmp / "results" / job_id)


@pytest.mark.parametrize("through_login", [False, True], ids=["here", "login-node"])
def test_a_follow_far_behind_the_job_holds_its_output_a_block_at_a_time(
    slurm, login_node: str, taospec: Runner, open_tmp: Path, through_login: bool
) -> None:
    """logs -f read all the output there was at each look (over ssh, in one answer): a
    follow of a run that had written 24 MiB held them all, several times over (over 160 MB).
    Its reads end where they may, inside a character too, so a read over ssh brings the
    bytes as they are (decoded there, a byte that is not UTF-8 counted as three and moved
    the next read's start)."""
    login = {"slurm": {"login": login_node}} if through_login else {}
    job_id = submit(taospec, job_file(open_tmp, ["true"], **login))
    wait_for(lambda: "COMPLETE" in taospec("status", job_id).stdout, what="the job's end")
    line = b"\xc3\xa9poch 1 \xe6\xad\xa5 2 \xff loss=0.25 " + b"x" * 69 + b"\n"
    with (open_tmp / "results" / job_id / "taospec.log").open("ab") as log:
        for _ in range(24):
            log.write(line * ((1 << 20) // len(line)))
    written = (open_tmp / "results" / job_id / "taospec.log").read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", COUNTED, "logs", "-f", job_id], env=taospec.env,
        cwd=taospec.cwd, capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    shown = written.decode(errors="replace").encode()  # as every look at the output shows it
    assert hashlib.sha256(done.stdout).digest() == hashlib.sha256(shown).digest()
    peak = peak_memory(done.stderr.decode())
    assert peak < 48 << 20, peak


def test_logs_hand_on_a_passed_value_whole_to_redaction(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    # logs split the output with str.splitlines, which also breaks at a form feed, and
    # logs -f handed on the line the job was still writing as its first read found it:
    # pieces of the value, each redacted alone, went out as they were
    value = "Ab12Xy\fCd34Ef56"
    gate = open_tmp / "gate"
    script = (
        'printf "out=%s\\n" "$PLAIN_VAR"; printf %s "${PLAIN_VAR%%Cd*}"; '
        f'while [ ! -e {gate} ]; do sleep 0.2; done; printf "%s\\n" "Cd${{PLAIN_VAR#*Cd}}"'
    )
    spec = job_file(open_tmp, ["sh", "-c", script], env={"pass": ["PLAIN_VAR"]})
    passed = {"PLAIN_VAR": value}
    job_id = submit(taospec, spec, env=passed)
    results = open_tmp / "results"
    wait_for(lambda: log_of(results, job_id).endswith("Ab12Xy\f"), what="half the value")
    follower = subprocess.Popen(
        [*taospec_argv(), "logs", "-f", job_id], env={**taospec.env, **passed},
        cwd=taospec.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)
    gate.touch()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert out == "out=<redacted>\n<redacted>\n"
    assert taospec("logs", job_id, env=passed).stdout == out
    assert taospec("logs", "--tail", "1", job_id, env=passed).stdout == "<redacted>\n"


def test_a_look_at_a_running_job_s_output_shows_no_part_of_a_value_being_written(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    # logs (not -f) printed the output file's unended last line as it was: the first
    # part of a passed value the job was still writing went out, unredacted
    value = "Zq8sup3rs3cretVALUE0123456789X"
    gate = open_tmp / "gate"
    script = (
        'echo first; printf "out=%s" "${PLAIN_VAR%%VALUE*}"; '
        f'while [ ! -e {gate} ]; do sleep 0.2; done; echo "VALUE${{PLAIN_VAR#*VALUE}}"'
    )
    spec = job_file(open_tmp, ["sh", "-c", script], env={"pass": ["PLAIN_VAR"]})
    passed = {"PLAIN_VAR": value}
    job_id = submit(taospec, spec, env=passed)
    results = open_tmp / "results"
    wait_for(lambda: log_of(results, job_id).endswith("Zq8sup3rs3cret"), what="half the value")
    looked = taospec("logs", job_id, env=passed)
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout.startswith("first\n")
    assert "Zq8sup3r" not in looked.stdout
    assert taospec("logs", "--tail", "1", job_id, env=passed).stdout == "first\n"
    gate.touch()
    wait_for(lambda: status(taospec, job_id)["state"] == COMPLETE, what="the end")
    assert taospec("logs", job_id, env=passed).stdout == "first\nout=<redacted>\n"


def test_secrets_reach_the_job_through_a_mode_600_file_and_are_never_written(
    slurm, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    secret = "hf_" + "Zq7" * 12
    command = ["sh", "-c", 'printf %s "$HF_TOKEN" | md5sum']
    spec = job_file(open_tmp, command, env={"pass": ["HF_TOKEN"]},
                    slurm={"extra_sbatch": ["--hold"]})  # fmt: skip
    env = {"HF_TOKEN": secret}
    rendered = taospec("render", spec, env=env)
    assert "HF_TOKEN" in rendered.stdout
    job_id = submit(taospec, spec, env=env)
    results = open_tmp / "results" / job_id
    env_file = results / ".tao-runtime" / "secrets.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # held: written, not yet read
    slurm_id = shown(taospec, job_id)["backend_ref"]
    subprocess.run(["scontrol", "release", slurm_id], check=True)
    wait_for(lambda: status(taospec, job_id)["state"] == COMPLETE, what="the released job")
    digest = hashlib.md5(secret.encode()).hexdigest()
    assert log_of(open_tmp / "results", job_id).split()[0] == digest
    assert not env_file.exists()
    for folder in (state_dir, open_tmp, SLURM_STATE):
        found = subprocess.run(["grep", "-rlF", secret, str(folder)], capture_output=True,
                               text=True, check=False)  # fmt: skip
        assert found.stdout == "", f"the secret's value was written to {found.stdout}"


def test_cancel_of_a_held_job_deletes_the_unread_env_file(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    spec = job_file(open_tmp, ["true"], env={"pass": ["HF_TOKEN"]},
                    slurm={"extra_sbatch": ["--hold"]})  # fmt: skip
    job_id = submit(taospec, spec, env={"HF_TOKEN": "hf_" + "x" * 30})
    env_file = open_tmp / "results" / job_id / ".tao-runtime" / "secrets.env"
    assert env_file.exists()
    assert status(taospec, job_id)["state"] == PENDING
    done = taospec("cancel", job_id)
    assert done.returncode == 0, done.stderr
    assert not env_file.exists()


def test_a_held_job_slurm_ends_unread_leaves_no_env_file_once_recorded(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    secret = "hf_" + "Wk4" * 10
    spec = job_file(open_tmp, ["true"], env={"pass": ["HF_TOKEN"]},
                    slurm={"extra_sbatch": ["--hold"]})  # fmt: skip
    job_id = submit(taospec, spec, env={"HF_TOKEN": secret})
    env_file = open_tmp / "results" / job_id / ".tao-runtime" / "secrets.env"
    assert env_file.exists()
    # scancel from outside taospec: the script never runs, so it never reads the file
    subprocess.run(["scancel", shown(taospec, job_id)["backend_ref"]], check=True)
    wait_for(lambda: status(taospec, job_id)["state"] == CANCELED, what="the cancelled job")
    assert not env_file.exists()
    found = subprocess.run(["grep", "-rlF", secret, str(open_tmp)], capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert found.stdout == "", f"the secret's value was left in {found.stdout}"


def test_hostile_values_reach_the_command_exactly(slurm, taospec: Runner, open_tmp: Path) -> None:
    hostile = ["a'b", '"q"', "$(id)", "`id`", "c d", "\\", "$HOME", "*", "line\nbreak", "é日本"]
    spec = job_file(open_tmp, ["sh", "-c", 'printf "[%s]\\n" "$@" "$MODE"', "sh", *hostile],
                    env={"set": {"MODE": "m'$(x)`y`"}})  # fmt: skip
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    expected = "".join(f"[{value}]\n" for value in [*hostile, "m'$(x)`y`"])
    assert log_of(open_tmp / "results", job_id) == expected


# -- a cluster that does not answer -------------------------------------------


@pytest.fixture
def dead_controller(open_tmp: Path) -> dict[str, str]:
    """SLURM_CONF naming this cluster's controller on a port nothing listens on: the real
    Slurm commands then fail as they do when slurmctld is down (MessageTimeout=1 makes them
    give up at once rather than after their usual retries)."""
    text = Path("/etc/slurm/slurm.conf").read_text()
    kept = [line for line in text.splitlines() if not line.startswith(("SlurmctldPort", "Message"))]
    lines = [*kept, "SlurmctldPort=1", "MessageTimeout=1", ""]
    conf = write(open_tmp / "dead" / "slurm.conf", "\n".join(lines))
    return {"SLURM_CONF": str(conf)}


def ssh_with(folder: Path, *options: str) -> dict[str, str]:
    """A PATH whose ``ssh`` is the real one given ``options`` first (``ssh -G`` included)."""
    real = shutil.which("ssh")
    assert real
    folder.mkdir()
    write(folder / "ssh", f'#!/bin/sh\nexec {real} {" ".join(options)} "$@"\n').chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


@pytest.fixture
def refused_ssh(open_tmp: Path) -> dict[str, str]:
    """A PATH whose ``ssh`` is the real one sent to a port nothing listens on: the login node
    refuses the connection, as a login node that is down or unreachable does."""
    return ssh_with(open_tmp / "no-login", "-o", "Port=1")


def ledger_files(state_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())}


CONTROLLER_DOWN = (
    "the Slurm controller (slurmctld) does not answer the Slurm commands on this machine "
    "(slurm_load_jobs error: Unable to contact slurm controller (connect failure)): check "
    "that slurmctld runs and that this machine's slurm.conf (or SLURM_CONF) names it "
    "(scontrol ping)"
)


def none_can_reach(taospec: Runner, job_id: str, why: str, **how: Any) -> None:
    """status, logs and cancel of ``job_id`` each exit 2 saying ``why`` and that nothing
    was changed."""
    for verb, cannot in (
        ("status", "cannot tell the state of"),
        ("logs", "cannot read the output of"),
        ("cancel", "cannot cancel"),
    ):
        done = taospec(verb, job_id, **how)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == f"taospec: {cannot} {job_id}: {why}; nothing was changed\n"


NO_ROOM = "the partition's nodes cannot hold what it asks"


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"slurm": {"cpus_per_task": 3}}, {"PartitionConfig": NO_ROOM}),
        (
            {"nodes": 2},  # Slurm gives either reason, as its scheduler has looked or not
            {"PartitionConfig": NO_ROOM,
             "PartitionNodeLimit": "the partition does not allow that many nodes"},
        ),
    ],
    ids=["cpus", "nodes"],
)  # fmt: skip
def test_a_job_that_can_never_start_here_says_why_it_waits(
    slurm, taospec: Runner, open_tmp: Path, extra: dict[str, Any], why: dict[str, str]
) -> None:
    """More CPUs per task than a node has, or more nodes than the cluster: sbatch takes the
    job and Slurm keeps it pending for ever. run followed it with no word of why."""
    spec = job_file(open_tmp, ["true"], **extra)
    running = spawn(["run", str(spec)], {**taospec.env, "TAOSPEC_PROGRESS_INTERVAL": "0.5"},
                    taospec.cwd)  # fmt: skip
    assert running.stderr is not None
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while not (found := re.search(r"  PENDING  .*\(([A-Za-z]+)\): ", seen[-1] if seen else "")):
            assert time.monotonic() < deadline, "".join(seen)
            seen.append(running.stderr.readline())
        reason, line = found.group(1), seen[-1]
        assert reason in why, line
        said = f"slurm: PENDING ({reason}): {why[reason]}; it waits until that changes"
        assert line.rstrip().endswith(said), line
        job_id = line.split()[1]
        message = status(taospec, job_id)["message"]  # the reason may have changed since
        assert any(message.startswith(f"slurm: PENDING ({r}): {w};") for r, w in why.items())
    finally:
        running.send_signal(signal.SIGINT)
        _, rest = running.communicate(timeout=120)
    assert running.returncode == 130, rest
    assert shown(taospec, job_id)["terminal_state"] == CANCELED


def test_a_live_board_shows_why_a_job_waits_under_its_line(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    """On a terminal, run draws live lines instead of progress lines: the reason a job
    can never start reached the plain lines only, and the live line said PENDING alone."""
    spec = job_file(open_tmp, ["true"], slurm={"cpus_per_task": 3})
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # wide
    drawn = bytearray()
    child = subprocess.Popen(
        [*taospec_argv(), "run", str(spec)],
        env={**taospec.env, "TERM": "xterm"},
        cwd=taospec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    try:
        said = f"    slurm: PENDING (PartitionConfig): {NO_ROOM}; it waits until that changes"
        deadline = time.monotonic() + 60
        while said not in drawn.decode(errors="replace"):
            assert child.poll() is None, drawn.decode()
            assert time.monotonic() < deadline, drawn.decode()
            if select.select([primary], [], [], 0.2)[0]:
                drawn.extend(os.read(primary, 1 << 16))
        assert re.search(r"  PENDING +\S+  \S+  ", drawn.decode(errors="replace"))
    finally:
        child.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # the terminal closed
                if select.select([primary], [], [], 0.2)[0]:
                    drawn.extend(os.read(primary, 1 << 16))
        os.close(primary)
    assert child.wait(timeout=10) == 130, drawn.decode(errors="replace")


def test_a_wait_that_ends_on_its_own_is_named_alone() -> None:
    native = platform.parse_scontrol("JobId=7 JobState=PENDING Reason=Resources ExitCode=0:0")
    assert native is not None
    shown_status = platform.to_status(native)
    assert (shown_status.state, shown_status.message) == (PENDING, "slurm: PENDING (Resources)")


def test_status_logs_and_cancel_exit_2_when_slurmctld_does_not_answer(
    slurm, taospec: Runner, open_tmp: Path, state_dir: Path, dead_controller: dict[str, str]
) -> None:
    """As for a Docker engine that does not answer: exit 2, what did not answer and what to
    check, nothing written (status said UNKNOWN and exited 0; cancel exited 1 after writing a
    cancel begun and a cancel failed into the sidecar)."""
    job_id = submit(taospec, job_file(open_tmp, ["sleep", "300"]))
    slurm_id = shown(taospec, job_id)["backend_ref"]
    before = ledger_files(state_dir)
    try:
        none_can_reach(taospec, job_id, CONTROLLER_DOWN, env=dead_controller)
        assert ledger_files(state_dir) == before
        assert slurm_state(slurm_id) in ("PENDING", "RUNNING")
        # a record whose Slurm job id was lost is looked up by name (squeue): refused alike
        fields = {"platform": "slurm", "image": "x", "network-arch": "a", "action": "b",
                  "storage-tier": "A", "results-root": str(open_tmp)}  # fmt: skip
        opened = taospec("record", "open", *(f"--{k}={v}" for k, v in fields.items()))
        lost = opened.stdout.strip()
        done = taospec("status", lost, env=dead_controller)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert CONTROLLER_DOWN in done.stderr
    finally:
        assert taospec("cancel", job_id).returncode == 0


def test_following_a_job_whose_controller_stops_answering_says_it_may_still_run(
    slurm, taospec: Runner, open_tmp: Path, dead_controller: dict[str, str]
) -> None:
    """logs -f ended quietly with exit 0 once slurmctld stopped answering, as if the job had
    ended. Its SLURM_CONF names this cluster's controller until it is made the dead one's."""
    conf = open_tmp / "live" / "slurm.conf"
    write(conf, Path("/etc/slurm/slurm.conf").read_text())
    job_id = submit(taospec, job_file(open_tmp, ["sh", "-c", "echo one; sleep 300"]))
    try:
        follower = subprocess.Popen(
            [*taospec_argv(), "logs", "-f", job_id], env={**taospec.env, "SLURM_CONF": str(conf)},
            cwd=taospec.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert follower.stdout is not None
        assert follower.stdout.readline() == "one\n"
        conf.write_text(Path(dead_controller["SLURM_CONF"]).read_text())
        out, err = follower.communicate(timeout=60)
        assert (follower.returncode, out) == (2, ""), err
        assert err == (
            f"taospec: stopped following the output of {job_id}: {CONTROLLER_DOWN}; the job "
            f"may still be running: taospec logs -f {job_id} follows it again\n"
        )
        assert status(taospec, job_id)["state"] == RUNNING
    finally:
        assert taospec("cancel", job_id).returncode == 0


def test_status_logs_and_cancel_exit_2_when_the_login_node_does_not_answer(
    slurm, login_node: str, taospec: Runner, open_tmp: Path, state_dir: Path,
    refused_ssh: dict[str, str],
) -> None:  # fmt: skip
    """logs of a job that ended printed "(no output yet …)" and exited 0; status UNKNOWN, 0."""
    refused = (
        f"the Slurm login node {login_node} does not answer over ssh (ssh: connect to host "
        "127.0.0.1 port 1: Connection refused): check that it is up and that "
        f"ssh -o BatchMode=yes {login_node} true works from this machine"
    )
    running = submit(taospec, job_file(open_tmp, ["sleep", "300"], slurm={"login": login_node}))
    ended = submit(taospec, job_file(open_tmp, ["echo", "ended"], "docker",
                                     slurm={"login": login_node}))  # fmt: skip
    wait_for(lambda: status(taospec, ended)["state"] == COMPLETE, what="the job to complete")
    before = ledger_files(state_dir)
    try:
        none_can_reach(taospec, running, refused, env=refused_ssh)
        logs = taospec("logs", ended, env=refused_ssh)
        assert (logs.returncode, logs.stdout) == (2, ""), logs.stderr
        assert logs.stderr.endswith(
            f"taospec: cannot read the output of {ended}: {refused}; nothing was changed\n"
        )
        assert ledger_files(state_dir) == before
        assert status(taospec, running)["state"] == RUNNING
        assert taospec("logs", ended).stdout == "ended\n"
    finally:
        assert taospec("cancel", running).returncode == 0


def stuck_login(login: str, seconds: int, port: int) -> str:
    return (
        f"the Slurm login node {login} did not answer over ssh within {seconds} s (Connection "
        f"to 127.0.0.1 port {port} timed out): check that it is up and that "
        f"ssh -o BatchMode=yes {login} true works from this machine; if it is only slow to "
        "answer, give it a longer ConnectTimeout in ~/.ssh/config"
    )


def test_status_logs_and_cancel_give_up_on_a_login_node_that_never_answers(
    slurm, login_node: str, taospec: Runner, open_tmp: Path, state_dir: Path, silent_port: int
) -> None:
    """A login node that took the connection and never spoke held status, logs and cancel
    (and run's partition check, and submit) for ever: ssh has no time limit of its own."""
    silent = {**ssh_with(open_tmp / "silent", "-o", f"Port={silent_port}"),
              "TAOSPEC_SSH_CONNECT_TIMEOUT": "2"}  # fmt: skip
    stuck = stuck_login(login_node, 2, silent_port)
    running = submit(taospec, job_file(open_tmp, ["sleep", "300"], slurm={"login": login_node}))
    before = ledger_files(state_dir)
    try:
        none_can_reach(taospec, running, stuck, env=silent, timeout=60)
        assert ledger_files(state_dir) == before
        assert status(taospec, running)["state"] == RUNNING
        spec = job_file(open_tmp, ["true"], slurm={"login": login_node, "partition": "debug"})
        checked = taospec("validate", "--here", spec, env=silent, timeout=60)
        assert checked.returncode == 0, checked.stderr  # a cluster that does not answer: unjudged
        submitted = taospec("run", spec, env=silent, timeout=60)
        assert submitted.returncode == 1, submitted.stderr
        assert f"Connection to 127.0.0.1 port {silent_port} timed out" in submitted.stderr
        # the reason given was "exit code 255 without an error taospec recognises"
        assert "; the job's host did not answer over ssh within 2 s: check that it is up" in (
            submitted.stderr
        )
    finally:
        assert taospec("cancel", running).returncode == 0


def test_a_connect_timeout_the_users_ssh_config_sets_is_kept(
    slurm, login_node: str, taospec: Runner, open_tmp: Path, silent_port: int
) -> None:
    """taospec adds its ConnectTimeout only where ssh's own configuration sets none: on the
    command line it would win over the user's."""
    config = write(open_tmp / "ssh_config", "ConnectTimeout 1\nInclude ~/.ssh/config\n")
    own = ssh_with(open_tmp / "own", "-F", str(config), "-o", f"Port={silent_port}")
    silent = {**ssh_with(open_tmp / "silent", "-o", f"Port={silent_port}"),
              "TAOSPEC_SSH_CONNECT_TIMEOUT": "2"}  # fmt: skip
    spec = job_file(open_tmp, ["sleep", "300"], slurm={"login": login_node})
    alive = ["-o", "ServerAliveInterval=20"]  # neither sets keepalives: taospec's are added
    for env, ssh in (
        (own, ["ssh", "-o", "BatchMode=yes", *alive, "--", login_node]),
        (
            silent,
            ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", *alive, "--", login_node],
        ),
    ):
        rendered = taospec("render", "--format", "json", spec, env=env)
        assert rendered.returncode == 0, rendered.stderr
        steps = json.loads(rendered.stdout)["steps"]
        assert {tuple(step["argv"][:-1]) for step in steps} == {tuple(ssh)}
    running = submit(taospec, spec)
    try:
        began = time.monotonic()
        done = taospec("status", running, env=own, timeout=60)
        assert time.monotonic() - began < 20  # ssh's 1 s, not taospec's 30 s
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert stuck_login(login_node, 1, silent_port) in done.stderr
    finally:
        assert taospec("cancel", running).returncode == 0


@pytest.mark.parametrize("users_config", ["", "BatchMode yes\n"])
def test_ssh_to_a_login_node_that_goes_silent_mid_session_gives_up(
    login_node: str, taospec: Runner, open_tmp: Path, users_config: str
) -> None:
    """A connection that was made and then went silent (the login node hung during a status
    call, or during one of the reads of a logs -f that follows a job for days) held ssh for
    ever: ConnectTimeout bounds only the connect. Here the real sshd is reached through a
    relay that stops forwarding once the remote command has started. A user's ``BatchMode
    yes`` sets no keepalive: ``ssh -G`` then says ssh's own 300 s for batch use, which
    taospec took for the user's and kept (three unanswered: 15 minutes)."""
    keys = SLURM_STATE.parent / "ssh"
    config = subprocess.run(["ssh", "-G", login_node], capture_output=True, text=True, check=True)
    port = next(line.split()[1] for line in config.stdout.splitlines() if line.startswith("port "))
    relay = Relay(("127.0.0.1", int(port)))
    users = write(open_tmp / "ssh_config", users_config + "Include ~/.ssh/config\n")
    via = ssh_with(open_tmp / "relay", "-F", str(users), "-o", f"Port={relay.port}",
                   "-o", "IdentitiesOnly=yes",
                   "-i", str(keys / "id_ed25519"), "-o", "StrictHostKeyChecking=no",
                   "-o", f"UserKnownHostsFile={keys / 'known_hosts'}")  # fmt: skip
    spec = job_file(open_tmp, ["true"], slurm={"login": login_node})
    rendered = taospec("render", "--format", "json", spec,
                       env={**via, "TAOSPEC_SSH_ALIVE_TIMEOUT": "3"})  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    ssh = json.loads(rendered.stdout)["steps"][0]["argv"][:-1]
    assert "ServerAliveInterval=1" in ssh  # 3 unanswered keepalives 1 s apart: 3 s
    with subprocess.Popen([*ssh, "echo up; sleep 120"], env={**os.environ, **via},
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as session:  # fmt: skip
        try:
            assert session.stdout is not None
            assert session.stdout.readline() == "up\n"  # logged in, and the command runs
            relay.freeze()
            began = time.monotonic()
            try:
                _, err = session.communicate(timeout=45)
            except subprocess.TimeoutExpired:
                pytest.fail(f"ssh still waits on the silent connection: {' '.join(ssh)}")
            assert time.monotonic() - began < 20
            assert session.returncode == 255, err
            assert "Timeout, server 127.0.0.1 not responding" in err
        finally:
            session.kill()
            relay.close()


@pytest.mark.parametrize("over_ssh", [False, True])
def test_a_partition_the_cluster_lacks_is_refused_before_any_record(
    slurm, request: pytest.FixtureRequest, taospec: Runner, open_tmp: Path, state_dir: Path,
    over_ssh: bool,
) -> None:  # fmt: skip
    # sbatch refused it only once the record was open: exit 1, a failed job that never ran
    login = {"login": request.getfixturevalue("login_node")} if over_ssh else {}
    listed = subprocess.run(["sinfo", "--noheader", "--format=%P"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    default = next(word[:-1] for word in listed.stdout.split() if word.endswith("*"))
    spec = job_file(open_tmp, ["true"], slurm={"partition": "nope", **login})
    assert taospec("validate", spec).returncode == 0  # the file alone says nothing of it
    line = 1 + spec.read_text().splitlines().index("  partition: nope")
    where = f"on {LOGIN}" if login else "here"
    expected = (
        f"{spec}:{line}:14: $.slurm.partition: the Slurm cluster {where} has no partition "
        f"'nope' (it has {default}"
    )
    for verb in (("validate", "--here"), ("run",)):
        done = taospec(*verb, spec)
        assert done.returncode == 2, done.stderr
        located = [line for line in done.stderr.splitlines() if ": $." in line]
        assert len(located) == 1, done.stderr
        assert located[0].startswith(expected), done.stderr
    assert not (state_dir / "jobs").exists()
    assert not (open_tmp / "results").exists()
    spec = job_file(open_tmp, ["true"], slurm={"partition": default, **login})
    done = taospec("validate", "--here", spec)
    assert done.returncode == 0, done.stderr


# -- a lost sbatch answer ----------------------------------------------------


def lossy_sbatch(folder: Path, body: str) -> dict[str, str]:
    """A PATH whose ``sbatch`` is a wrapper around the real one (``$real``)."""
    real = shutil.which("sbatch")
    assert real
    folder.mkdir(exist_ok=True)
    write(folder / "sbatch", f"#!/bin/sh\nreal={real}\n{body}\n").chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def test_a_lost_sbatch_answer_adopts_the_one_job_of_that_name(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    path = lossy_sbatch(open_tmp / "bin", '"$real" "$@" >/dev/null\necho "ssh: timed out" >&2\n'
                        "exit 255")  # fmt: skip
    spec = job_file(open_tmp, ["sh", "-c", "echo adopted"])
    done = taospec("run", spec, env=path)
    assert done.returncode == 0, done.stderr
    assert "sbatch gave no job id" in done.stderr
    job_id = done.stdout.split()[0]
    record = shown(taospec, job_id)
    assert jobs_named(job_id) == [record["backend_ref"]]
    assert record["terminal_state"] == COMPLETE
    assert log_of(open_tmp / "results", job_id) == "adopted\n"


def test_an_empty_sbatch_answer_is_reconciled_the_same_way(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    path = lossy_sbatch(open_tmp / "bin", '"$real" "$@" >/dev/null')
    done = taospec("run", spec := job_file(open_tmp, ["true"]), env=path)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert jobs_named(job_id) == [shown(taospec, job_id)["backend_ref"]]
    assert spec.exists()


def test_several_jobs_of_that_name_stop_the_submission(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    path = lossy_sbatch(open_tmp / "bin", '"$real" "$@" >/dev/null\n"$real" "$@" >/dev/null\n'
                        "exit 1")  # fmt: skip
    spec = job_file(open_tmp, ["sleep", "300"])
    done = taospec("run", spec, env=path)
    assert done.returncode == 1
    job_id = opened_id(done)
    ids = jobs_named(job_id)
    try:
        assert len(ids) == 2
        assert f"2 Slurm jobs are named {job_id} ({', '.join(ids)})" in done.stderr
        assert "adopts none of them" in done.stderr
        record = shown(taospec, job_id)
        assert record["backend_ref"] is None
        assert record["terminal_state"] == ERROR
    finally:
        subprocess.run(["scancel", *ids], check=False)


def test_no_job_of_that_name_fails_the_attempt(slurm, taospec: Runner, open_tmp: Path) -> None:
    path = lossy_sbatch(open_tmp / "bin", 'echo "sbatch: error: Socket timed out" >&2\nexit 1')
    spec = job_file(open_tmp, ["true"], env={"pass": ["HF_TOKEN"]})
    done = taospec("run", spec, env={**path, "HF_TOKEN": "hf_" + "y" * 30})
    assert done.returncode == 1
    job_id = opened_id(done)
    assert jobs_named(job_id) == []
    assert f"no Slurm job is named {job_id}: nothing was submitted" in done.stderr
    record = shown(taospec, job_id)
    assert record["terminal_state"] == ERROR
    assert not (open_tmp / "results" / job_id / ".tao-runtime" / "secrets.env").exists()


def test_a_submit_slurmctld_does_not_answer_is_the_cluster_s_fault(
    slurm, taospec: Runner, open_tmp: Path, dead_controller: dict[str, str]
) -> None:
    # it was recorded ERR_PROGRAM, "without an error taospec recognises", which retry: skips
    done = taospec("run", job_file(open_tmp, ["true"]), env=dead_controller)
    assert done.returncode == 1, done.stderr
    record = shown(taospec, opened_id(done))
    assert (record["terminal_state"], record["backend_ref"]) == (ERROR, None)
    assert record["err_class"] == "ERR_INFRA"
    said = record["transitions"][-1]["message"]
    assert "Batch job submission failed: Unable to contact slurm controller" in said, said
    assert "the Slurm controller (slurmctld) does not answer" in said, said


@pytest.mark.parametrize(
    ("extra", "said", "why"),
    [
        ({"slurm": {"extra_sbatch": ["--mem=1T"]}}, "Requested node configuration is not "
         "available", "no node of the cluster has what the job asks for"),
        ({"gpus": [0]}, "Invalid generic resource (gres) specification",
         "the cluster has no such generic resource"),
    ],
)  # fmt: skip
def test_a_job_the_cluster_cannot_take_is_refused_not_adopted(
    slurm, taospec: Runner, open_tmp: Path, extra: dict[str, Any], said: str, why: str
) -> None:
    # a node that lacks the memory asked for: slurmctld refused the job but kept it, FAILED
    # (BadConstraints); taospec adopted it as "submitted before the answer was lost" and
    # recorded "the job crashed (SIGHUP)" from its exit code 0:1
    block = {"container": "none", **extra.pop("slurm", {})}
    done = taospec("run", job_file(open_tmp, ["true"], slurm=block, **extra))
    assert done.returncode == 1, done.stderr
    assert "adopted" not in done.stderr
    record = shown(taospec, opened_id(done))
    assert (record["terminal_state"], record["backend_ref"]) == (ERROR, None)
    assert record["err_class"] == "ERR_PROGRAM"
    message = record["transitions"][-1]["message"]
    assert said in message, message
    assert why in message, message


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


@pytest.mark.parametrize("sbatch", ["killed", "submits"])
def test_a_record_whose_sbatch_never_ran_is_closed_once_no_launch_can_come(
    slurm, taospec: Runner, open_tmp: Path, state_dir: Path, sbatch: str
) -> None:
    # taospec and its sbatch killed before anything was submitted: the record stayed PENDING
    # for good ("no single job is named"), where docker and local close it after the grace
    gate, reached = open_tmp / "gate", open_tmp / "reached"
    wait = f"echo $$ > {reached}.tmp; mv {reached}.tmp {reached}\n"
    wait += f'until [ -e {gate} ]; do sleep 0.05; done\nexec "$real" "$@"'
    path = lossy_sbatch(open_tmp / "bin", wait)
    child = subprocess.Popen(
        [*taospec_argv(), "run", str(job_file(open_tmp, ["sleep", "300"]))],
        env={**taospec.env, **path},
        cwd=open_tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_for(reached.exists, what="sbatch to start")
    child.kill()
    child.wait()
    launcher = int(reached.read_text())
    try:
        (job_id,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
        grace = {"TAOSPEC_LAUNCH_GRACE": "0"}
        early = taospec("status", job_id, env=grace)  # sbatch may still submit
        assert early.stdout.split()[1] == "PENDING", early.stdout  # it is still launching
        assert shown(taospec, job_id)["terminal_state"] is None
        if sbatch == "submits":
            gate.touch()
            wait_for(lambda: _ended(launcher), what="sbatch to end")
    finally:
        if not _ended(launcher):  # killed here, and by a failed test: nothing left waiting
            os.kill(launcher, 9)
    wait_for(lambda: _ended(launcher), what="sbatch to end")
    late = taospec("status", job_id, env=grace)
    if sbatch == "killed":
        assert late.stdout.split()[1:3] == ["ERROR", "ERR_INFRA"], late.stdout
        assert "never launched" in late.stdout
        assert shown(taospec, job_id)["terminal_state"] == ERROR
        return
    (slurm_id,) = jobs_named(job_id)
    try:
        assert late.stdout.split()[1] in (PENDING, RUNNING), late.stdout
        assert shown(taospec, job_id)["backend_ref"] == slurm_id
    finally:
        subprocess.run(["scancel", slurm_id], check=False)


# -- rendering: goldens for what one machine cannot run --------------------------


GOLDEN_JOBS = {
    "slurm-pyxis": {
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "gpus": [0, 1],
        "mounts": [{"source": "/lustre/datasets/levir-cd", "target": "/data", "readonly": True}],
        "env": {"pass": ["NGC_KEY"], "set": {"WANDB_MODE": "offline"}},
        "slurm": {"login": "alice@login.cluster.example", "partition": "gpu",
                  "account": "tao", "time": "04:00:00", "cpus_per_task": 16,
                  "container": "pyxis", "extra_sbatch": ["--qos=high"]},
    },
    "slurm-multinode-pyxis": {
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "gpus": [0, 1, 2, 3, 4, 5, 6, 7],
        "nodes": 4,
        "mounts": [{"source": "/lustre/datasets/levir-cd", "target": "/data", "readonly": True}],
        "slurm": {"partition": "gpu", "time": "1-00:00:00", "container": "pyxis"},
    },
    "slurm-multinode-docker": {
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "gpus": [0, 1],
        "nodes": 2,
        "env": {"pass": ["HF_TOKEN"]},
        "slurm": {"container": "docker", "time": "2:00:00"},
    },
    "slurm-multinode-none": {"nodes": 2, "slurm": {"container": "none"}},
}  # fmt: skip


def golden_spec(tmp_path: Path, name: str) -> Path:
    doc = {
        "version": 1,
        "network_arch": "visual_changenet",
        "action": "train",
        "platform": "slurm",
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "command": "visual_changenet train -e {config_path} results_dir={results_dir}",
        "results_root": "/lustre/results",
        "spec": {"train": {"num_epochs": 10}},
        **GOLDEN_JOBS[name],
    }
    return write(tmp_path / f"{name}.yaml", yaml.safe_dump(doc, sort_keys=False))


def sbatch_script(spec: Path, job_id: str = "visual_changenet-train-0a1b2c") -> str:
    plan = render(load_job(spec), launcher=LAUNCHER).with_job_id(job_id)
    (step,) = [s for s in plan.steps if s.name == "script"]
    assert step.stdin_text is not None
    return step.stdin_text


@pytest.mark.parametrize("name", sorted(GOLDEN_JOBS))
def test_scripts_match_their_golden_files_and_pass_the_checks(name: str, tmp_path: Path) -> None:
    text = sbatch_script(golden_spec(tmp_path, name))
    golden = GOLDEN / f"{name}.sbatch"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text()
    assert lint.lint_text(text) == []
    path = write(tmp_path / "job.sbatch", text)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    checked = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout


def test_multi_node_runs_one_task_per_node_with_a_rendezvous_on_the_first(
    tmp_path: Path,
) -> None:
    text = sbatch_script(golden_spec(tmp_path, "slurm-multinode-pyxis"))
    assert "#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n" in text
    assert "#SBATCH --gpus-per-node=8\n" in text
    assert 'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"' in text
    assert "exec srun --nodes=4 --ntasks-per-node=1 \\\n" in text
    assert "torchrun --nnodes=4 --nproc-per-node=8" in text
    assert '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --no-python' in text
    assert "--container-image='nvcr.io#nvidia/tao/tao-toolkit:6.0.0-pyt'" in text
    assert "--container-mounts=/lustre/results/visual_changenet-train-0a1b2c:/results," in text


def test_the_plan_shows_secret_names_only_and_sbatch_never_sees_them(tmp_path: Path) -> None:
    spec = job_file(tmp_path, ["true"], env={"pass": ["HF_TOKEN", "NGC_KEY"]})
    plan = render(load_job(spec), launcher=LAUNCHER)
    names = [s.name for s in plan.steps]
    assert names == ["prepare", "script", "check-script", "env-file", "launch"]
    env_step = plan.steps[3]
    assert env_step.stdin_env_file == ("HF_TOKEN", "NGC_KEY")
    assert env_step.argv[:3] == ("install", "-m", "0600")
    launch = plan.steps[4]
    assert launch.argv[:5] == ("env", "-u", "HF_TOKEN", "-u", "NGC_KEY")
    text = plantext.text(plan)
    assert 'printf \'%s=%q\\n\' HF_TOKEN "$HF_TOKEN" NGC_KEY "$NGC_KEY" | install -m 0600' in text
    assert plan.secrets == ("HF_TOKEN", "NGC_KEY")


def test_the_rendered_text_writes_exactly_the_submitted_script(
    tmp_path: Path, open_tmp: Path
) -> None:
    """The reviewed listing's script step, run by bash, writes the script the executor writes."""
    spec = job_file(
        open_tmp, ["sh", "-c", "echo ${{JOB_ID}} '${{JOB_ID}}'"], env={"set": {"A": "$x"}}
    )
    plan = render(load_job(spec), launcher=LAUNCHER)
    (step,) = [s for s in plan.steps if s.name == "script"]
    job_id = "slurmtest-none-abc123"
    (open_tmp / "results" / job_id).mkdir(parents=True)
    line = plantext.command_line(step)
    subprocess.run(["bash", "-c", line], env={"JOB_ID": job_id, "PATH": os.environ["PATH"]},
                   check=True)  # fmt: skip
    written = (open_tmp / "results" / job_id / "taospec.sbatch").read_text()
    assert written == plan.with_job_id(job_id).steps[1].stdin_text
    assert "exec sh -c 'echo ${JOB_ID} '" in written  # the command's own text is untouched
    assert "${JOB_ID_1}" in line  # so the listing shows the id under another name


def test_a_remote_command_gives_the_far_side_shell_the_argument_list() -> None:
    argv = ["install", "-m", "0644", "/dev/stdin", f"/r/a b/{JOB_ID}/x", "it's", "$HOME", "`id`",
            *(f"/results/{JOB_ID}/.tao-runtime/home/.cache/dir{i}" for i in range(6))]  # fmt: skip
    command = platform.on("u@h", argv)[-1]
    assert "\\\n" in command  # long enough to be laid out on several lines
    real = command.replace(JOB_ID, "job-1")
    assert bash_words(real) == [a.replace(JOB_ID, "job-1") for a in argv]


# -- Slurm's answers in TAO's vocabulary -----------------------------------------


@pytest.mark.parametrize(
    ("text", "state", "code", "err_class", "words"),
    [
        ("JobId=5 JobName=x JobState=COMPLETED Reason=None ExitCode=0:0", COMPLETE, 0, None,
         "slurm: COMPLETED, exit code 0"),
        ("JobId=5 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0", ERROR, 3, "ERR_PROGRAM",
         "slurm: FAILED, exit code 3"),
        ("JobId=5 JobState=FAILED Reason=JobLaunchFailure ExitCode=0:15", ERROR, None,
         "ERR_INFRA", "killed by signal 15; the job was stopped from outside"),
        ("JobId=5 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15", ERROR, None, "ERR_PROGRAM",
         "time limit"),
        ("JobId=5 JobState=OUT_OF_MEMORY ExitCode=0:125", ERROR, None, "ERR_PROGRAM", "memory"),
        ("JobId=5 JobState=NODE_FAIL Reason=NodeDown ExitCode=0:0", ERROR, 0, "ERR_INFRA",
         "a node of the job failed"),
        ("JobId=5 JobState=BOOT_FAIL ExitCode=0:0", ERROR, 0, "ERR_INFRA", "failed to boot"),
        ("JobId=5 JobState=CANCELLED Reason=None ExitCode=0:15", CANCELED, None, None,
         "slurm: CANCELLED"),
        ("JobId=5 JobState=PREEMPTED ExitCode=0:0", CANCELED, 0, None, "PREEMPTED"),
        ("JobId=5 JobState=PENDING Reason=Resources ExitCode=0:0", PENDING, None, None,
         "slurm: PENDING (Resources)"),
        ("JobId=5 JobState=COMPLETING ExitCode=0:0", RUNNING, None, None, "COMPLETING"),
        ("JobId=5 JobState=RUNNING Reason=None ExitCode=0:0", RUNNING, None, None,
         "slurm: RUNNING"),
    ],
)  # fmt: skip
def test_scontrol_states_map_to_the_vocabulary(text, state, code, err_class, words) -> None:
    native = platform.parse_scontrol(text)
    assert native is not None
    found = platform.to_status(native)
    assert (found.state, found.exit_code, found.err_class) == (state, code, err_class)
    assert words in found.message


@pytest.mark.parametrize(
    ("text", "state", "native"),
    [
        ("CANCELLED by 0|0:15\n", CANCELED, "CANCELLED"),
        ("CANCELLED+|0:15\n", CANCELED, "CANCELLED"),
        ("NODE_FAIL|0:0\n", ERROR, "NODE_FAIL"),
        ("COMPLETED|0:0\n", COMPLETE, "COMPLETED"),
        ("FAILED|2:0\n", ERROR, "FAILED"),
    ],
)
def test_sacct_annotated_and_truncated_states_use_the_first_word(text, state, native) -> None:
    parsed = platform.parse_sacct(text)
    assert parsed is not None
    assert parsed.state == native
    assert platform.to_status(parsed).state == state


def test_an_unknown_job_is_unknown() -> None:
    assert platform.parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None
    assert platform.parse_sacct("") is None


# -- what the spec refuses --------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"gpus": "all"}, "Slurm allocates GPUs by count"),
        ({"user": "1000:1000"}, "runs as the account that submits it"),
        ({"results_root": "/data/my results"}, "which sbatch reads without a shell"),
        ({"slurm": {"container": "none", "extra_sbatch": ["--job-name=x"]}}, "--job-name is set"),
        ({"slurm": {"container": "none", "extra_sbatch": ["-o /tmp/x"]}}, "-o is set by taospec"),
        (
            {"slurm": {"container": "none", "extra_sbatch": ["--job-nam=x"]}},
            "--job-nam starts "
            "--job-name, and sbatch takes the start of a long option for the option",
        ),
        ({"slurm": {"container": "none", "extra_sbatch": ["--outp /x"]}}, "--outp starts --output"),
        (  # pyxis's, at the batch script's level
            {"slurm": {"extra_sbatch": ["--container-image=nvcr.io/nvidia/tao:x"]}},
            "--container-image is pyxis's, which would run taospec's batch script itself",
        ),
        (  # sbatch's other name for --ntasks-per-node
            {"slurm": {"container": "none", "extra_sbatch": ["--tasks-per-node=2"]}},
            "--tasks-per-node is set by taospec",
        ),
        ({"mounts": [{"source": "/a,b", "target": "/data"}]}, "cannot carry a path with ','"),
    ],
)
def test_the_spec_refuses_what_sbatch_or_pyxis_cannot_carry(
    extra: dict, message: str, taospec: Runner, tmp_path: Path
) -> None:
    doc = {"version": 1, "network_arch": "a", "action": "b", "platform": "slurm",
           "image": "busybox:1", "command": "true", "results_root": "/data/results"}  # fmt: skip
    spec = write(tmp_path / "job.yaml", yaml.safe_dump({**doc, **extra}))
    done = taospec("validate", spec)
    assert done.returncode == 2
    assert message in done.stderr


# -- pipelines -------------------------------------------------------------


def test_a_pipeline_submits_independent_targets_at_once_and_waits_for_needs(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    stamp = "sh -c 'date +%s.%N > {results_dir}/start; sleep 3; date +%s.%N > {results_dir}/end'"
    spec = write(
        open_tmp / "pipeline.yaml",
        yaml.safe_dump(
            {
                "version": 1,
                "defaults": {
                    "network_arch": "slurmtest",
                    "platform": "slurm",
                    "image": TEST_IMAGE,
                    "results_root": str(open_tmp / "results"),
                    "slurm": {"container": "none"},
                    "command": stamp,
                },
                "jobs": {
                    "left": {"action": "left"},
                    "right": {"action": "right"},
                    "join": {"action": "join", "needs": ["left", "right"]},
                },
            },
            sort_keys=False,
        ),
    )
    done = taospec("run", spec, timeout=300)
    assert done.returncode == 0, done.stderr
    ids = {line.split()[0].split("-")[1]: line.split()[0] for line in done.stdout.splitlines()}
    assert sorted(ids) == ["join", "left", "right"]

    def span(name: str) -> tuple[float, float]:
        folder = open_tmp / "results" / ids[name]
        return float((folder / "start").read_text()), float((folder / "end").read_text())

    left, right, join = span("left"), span("right"), span("join")
    assert left[0] < right[1], (left, right)  # the two ran side by side
    assert right[0] < left[1], (left, right)
    assert join[0] >= max(left[1], right[1]), (left, right, join)
    assert taospec("run", "--check", spec).returncode == 0


@pytest.mark.parametrize(
    "line",
    [
        "--comment=a", "--comment a", '--comment="a b"', "--comment='a b'",  # sbatch takes these
        "--comment=a b", "--comment a b", "--comment=it's", '--comment="a b',  # and refuses these
        "--exclusive", "--exclusive=user", "--requeue", "-H",  # options that take no word
        "--exclusive user", "--requeue yes", "-H now", "--nice 5", "--hold x",
        "--hol x", "--requ yes", "--exclusi user", "--ni 5",  # a start of one, read as it
        # sbatch reads the line itself: a backslash ends a word at a blank (outside quotes),
        # escapes a quote inside single quotes, and a # after a blank starts a comment
        "--comment=a\\ b", "--comment='a\\'b'", '--comment="a\\ b"', "--comment a #b c",
    ],
)  # fmt: skip
def test_validate_passes_exactly_the_extra_sbatch_lines_sbatch_reads(
    slurm: None, open_tmp: Path, line: str
) -> None:
    # sbatch splits an #SBATCH line into words as a shell would and takes an option and at
    # most one value; taospec's rule must agree with the real sbatch on every such line.
    script = write(
        open_tmp / "check.sbatch",
        f"#!/bin/bash\n#SBATCH {line}\n#SBATCH --output={open_tmp}/out.txt\ntrue\n",
    )
    checked = subprocess.run(
        ["sbatch", "--test-only", str(script)], capture_output=True, text=True, check=False
    )
    misread = "Invalid directive" in checked.stderr or "Unmatched" in checked.stderr
    assert misread == (rules._sbatch_misreads(line) is not None), checked.stderr
    assert misread or checked.returncode == 0, checked.stderr


SBATCH_SIZES = [
    # sbatch takes these
    "--mem=16G", "--mem=1", "--mem=1k", "--mem=512MB", "--mem=1Gb", "--mem=+1", "--mem=01",
    "--mem=-0", "--mem=' 1'", "--mem=0", "--mem 64M", "--mem=9223372036854775807",
    "--mem-per-cpu=4g", "--mem-per-gpu=8G", "--tmp=1", "--mem=1T", "--tmp=100GB",
    # and its parser refuses these on any cluster
    "--mem=abc", "--mem=1x", "--mem=-1", "--mem=1.5G", "--mem=1KiB", "--mem=1GBB", "--mem=1p",
    "--mem=0x10", "--mem=1e3", "--mem=G", "--mem=''", "--mem=99999999999999999999",
    "--mem-per-cpu=abc", "--mem-per-gpu='1 G'", "--tmp=1Gx", "--mem 2..",
]  # fmt: skip


@pytest.mark.parametrize("line", SBATCH_SIZES)
def test_validate_refuses_exactly_the_sizes_sbatch_refuses(
    slurm: None, taospec: Runner, open_tmp: Path, line: str
) -> None:
    # each passed validate and failed at sbatch (exit 255, "Invalid --mem specification")
    # once the record was open; a size no node has is the cluster's to refuse, not the file's
    script = write(
        open_tmp / "size.sbatch",
        f"#!/bin/bash\n#SBATCH {line}\n#SBATCH --output={open_tmp}/out.txt\ntrue\n",
    )
    checked = subprocess.run(
        ["sbatch", "--test-only", str(script)], capture_output=True, text=True, check=False
    )
    refuses = checked.returncode == 255
    assert refuses == ("sbatch: error: Invalid --" in checked.stderr), checked.stderr
    doc = {"version": 1, "network_arch": "a", "action": "b", "platform": "slurm",
           "image": "busybox:1", "command": "true", "results_root": "/data/results",
           "slurm": {"container": "none", "extra_sbatch": ["--qos=x", line]}}  # fmt: skip
    path = write(open_tmp / "job.yaml", yaml.safe_dump(doc, width=200, sort_keys=False))
    done = taospec("validate", path)
    assert (done.returncode == 2) == refuses, (checked.stderr, done.stderr)
    if refuses:
        (said,) = [said for said in done.stderr.splitlines() if ": $." in said]
        assert re.match(rf"{path}:\d+:\d+: \$\.slurm\.extra_sbatch\[1\]: --", said), said
        assert ": sbatch refuses it: a size is " in said, said


SBATCH_VALUES = [
    # sbatch takes these: times (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, D- and -D, the words)
    "--time=5", "--time=1-", "--time=-1", "--time 1:30", "-t1-2:3:4", "-t 10:00", "-t0",
    "--time=UNLIMITED", "--time=infinite", "--time=1-2:3", "--time=00:90", "--time=-0",
    "--time-min=30", "--time-min=1-0",
    # counts (C's strtol: blanks and a sign before the digits; --core-spec may be 0)
    "-c1", "-c 2", "--cpus-per-task=' 1'", "--cpus-per-task=+1", "--mincpus=1",
    "--cpus-per-gpu=1", "--core-spec=0", "-S0", "--threads-per-core=1", "--cpus-per-t=2",
    "--threads=1",  # sbatch has no --threads (srun has): it is a start of --threads-per-core
    # signals ([{R|B}:]<sig_num>[@sig_time]) and keywords
    "--signal=USR1", "--signal=B:USR1@30", "--signal=RB:sigterm@0", "--signal='USR1 '",
    "--signal=15@", "--signal=BR:HUP", "--signal=RUSR1", "--signal=+10@+5",
    "--signal=' SIGusr2'", "--signal=USR1@65535", "--signal=USR1@' 5'", "--signal 10",
    "--mail-type=END,FAIL", "--mail-type=all", "--mail-type=,end,", "--mail-type=NONE",
    "--open-mode=append", "--open-mode=T", "--exclusive=user", "--exclusive=MCS",
    "--exclusive=''", "--exclusive", "--kill-on-invalid-dep=YES", "--kill-on-invalid-dep no",
    "--open-mode=a\u00e9", "--mail-type=END,\u00c9ND",  # sbatch reads a's byte, END
    # and its parser refuses these on any cluster
    "--time=5m", "-t1:2:3:4", "--time=2:", "--time=''", "--time=' 5'", "-t1:2-3", "-t=5",
    "--time=1-2-3", "--time=-", "--time=1-:30", "--time=-1:2", "--time=forever",
    "--time-min=5m", "--time-min=1-2:3:4:5", "--time", "-t",
    "-c0", "-c-0", "--mincpus=0", "--cpus-per-gpu=0", "-c1x", "-c 0x10", "--cpus-per-task=''",
    "--cpus-per-task=' 2 '", "--core-spec=-1", "--thread-spec=0", "--sockets-per-node=0",
    "--ntasks-per-gpu=0", "-c99999999999999999999", "--cpus-per-t=0", "-c", "--threads=0",
    "--signal=FOO", "--signal=USR1@-1", "--signal=USR1@70000", "--signal=USR1@5s",
    "--signal=0", "--signal=''", "--signal=X:USR1", "--signal=B:", "--signal=65536",
    "--signal=BUS", "--signal=::USR1", "--signal=USR1@5@6", "--signal=\u017figusr1",
    "--mail-type=FOO", "--mail-type=''", "--mail-type=,", "--open-mode=x", "--open-mode=''",
    "--exclusive=bogus", "--kill-on-invalid-dep=maybe", "--kill-on-invalid-dep=1",
]  # fmt: skip
SBATCH_PARSER_REFUSAL = re.compile(
    r"^sbatch: error: (Invalid --[a-z-]+ specification|Invalid numeric value|Numeric argument)",
    re.MULTILINE,
)


def sbatch_test_only(open_tmp: Path, line: str) -> subprocess.CompletedProcess[str]:
    script = write(
        open_tmp / "value.sbatch",
        f"#!/bin/bash\n#SBATCH {line}\n#SBATCH --output={open_tmp}/out.txt\ntrue\n",
    )
    return subprocess.run(
        ["sbatch", "--test-only", str(script)], capture_output=True, text=True, check=False
    )


def validate_extra_sbatch(
    taospec: Runner, open_tmp: Path, line: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    doc = {"version": 1, "network_arch": "a", "action": "b", "platform": "slurm",
           "image": "busybox:1", "command": "true", "results_root": "/data/results",
           "slurm": {"container": "none", "extra_sbatch": ["--qos=x", line]}}  # fmt: skip
    path = write(open_tmp / "job.yaml", yaml.safe_dump(doc, width=200, sort_keys=False))
    return path, taospec("validate", path)


@pytest.mark.parametrize("line", SBATCH_VALUES)
def test_validate_refuses_exactly_the_values_sbatch_refuses(
    slurm: None, taospec: Runner, open_tmp: Path, line: str
) -> None:
    # each passed validate and failed at sbatch ("Invalid --time specification", "Invalid
    # numeric value") once the record was open; what the cluster refuses (a count of CPUs or
    # GPUs no node has) is left to the submit
    checked = sbatch_test_only(open_tmp, line)
    refuses = SBATCH_PARSER_REFUSAL.search(checked.stderr) is not None
    assert refuses == (checked.returncode in (1, 255) and refuses), checked.stderr
    path, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert (done.returncode == 2) == refuses, (checked.stderr, done.stderr)
    if refuses:
        (said,) = [said for said in done.stderr.splitlines() if ": $." in said]
        assert re.match(rf"{path}:\d+:\d+: \$\.slurm\.extra_sbatch\[1\]: -", said), said
        assert ": sbatch refuses it: " in said or " takes a value" in said, said


SBATCH_MISREAD_VALUES = [
    # sbatch 22.05 takes these but keeps another value than the one written: a negative
    # count of days, a time past what Slurm keeps, a count past C's int (which Slurm 23.02
    # and later refuse), a signal number past 16 bits
    "--time=-5", "--time=35791394", "--time=99999-", "-c4294967297", "--mincpus=2147483648",
    "--signal=65537", "--signal=-1",
]  # fmt: skip


@pytest.mark.parametrize("line", SBATCH_MISREAD_VALUES)
def test_validate_refuses_a_value_sbatch_would_keep_as_another(
    slurm: None, taospec: Runner, open_tmp: Path, line: str
) -> None:
    checked = sbatch_test_only(open_tmp, line)
    assert SBATCH_PARSER_REFUSAL.search(checked.stderr) is None, checked.stderr
    path, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == 2, done.stderr
    assert re.search(rf"{path}:\d+:\d+: \$\.slurm\.extra_sbatch\[1\]: -.* would ", done.stderr)


@pytest.mark.parametrize(
    "line", ["--exclusive=topo", "--exclusive=allocation", "--signal=CHLD", "--signal=B:PIPE@9"]
)
def test_validate_passes_a_value_a_newer_sbatch_takes(
    taospec: Runner, open_tmp: Path, line: str
) -> None:
    # a newer Slurm takes these (CHLD and PIPE from 23.11, topo from 24.05, allocation from
    # 26.05) and sbatch 22.05 refuses them: which Slurm the cluster runs is its own to say
    _, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [("--job-nam=mine", "JobName", "mine"), ("--chd=/tmp", "WorkDir", "/tmp")],
)
def test_sbatch_takes_the_start_of_an_option_taospec_sets_for_that_option(
    slurm: None, taospec: Runner, open_tmp: Path, line: str, field: str, value: str
) -> None:
    # why the spec refuses an abbreviation of an option taospec sets: sbatch honours it
    script = write(
        open_tmp / "abbreviated.sbatch",
        f"#!/bin/bash\n#SBATCH --job-name=taospec\n#SBATCH --chdir={open_tmp}\n"
        f"#SBATCH {line}\n#SBATCH --output={open_tmp}/out.txt\ntrue\n",
    )
    submitted = subprocess.run(["sbatch", "--hold", "--parsable", str(script)],
                               capture_output=True, text=True, check=True)  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        shown = subprocess.run(["scontrol", "show", "job", job_id],
                               capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        subprocess.run(["scancel", job_id], check=False)
    assert f"{field}={value}" in shown.stdout.split(), shown.stdout
    doc = {"version": 1, "network_arch": "a", "action": "b", "platform": "slurm",
           "image": "busybox:1", "command": "true", "results_root": "/data/results",
           "slurm": {"container": "none", "extra_sbatch": [line]}}  # fmt: skip
    done = taospec("validate", write(open_tmp / "job.yaml", yaml.safe_dump(doc)))
    assert done.returncode == 2
    assert "$.slurm.extra_sbatch[0]: " + line.partition("=")[0] + " starts --" in done.stderr


def test_a_value_sbatch_would_cut_at_an_unquoted_hash_is_refused_at_its_item(
    slurm: None, taospec: Runner, open_tmp: Path
) -> None:
    # sbatch reads an unquoted # as a comment even inside a word, so the job ran with
    # --comment=run and not the run#3 the reviewer read in its script
    script = write(
        open_tmp / "hash.sbatch",
        f"#!/bin/bash\n#SBATCH --comment=run#3\n#SBATCH --output={open_tmp}/out.txt\ntrue\n",
    )
    submitted = subprocess.run(["sbatch", "--hold", "--parsable", str(script)],
                               capture_output=True, text=True, check=True)  # fmt: skip
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        shown = subprocess.run(["scontrol", "show", "job", job_id],
                               capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        subprocess.run(["scancel", job_id], check=False)
    assert "Comment=run" in shown.stdout.split(), shown.stdout
    doc = {"version": 1, "network_arch": "a", "action": "b", "platform": "slurm",
           "image": "busybox:1", "command": "true", "results_root": "/data/results",
           "slurm": {"container": "none",
                     "extra_sbatch": ["--comment=run#3", "--qos=x #why"]}}  # fmt: skip
    path = write(open_tmp / "job.yaml", yaml.safe_dump(doc, width=200))
    for verb in ("validate", "run"):
        done = taospec(verb, path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("$.slurm.extra_sbatch") == 1, done.stderr
        assert re.search(
            r":\d+:\d+: \$\.slurm\.extra_sbatch\[0\]: sbatch reads an unquoted # as the start "
            r"of a comment, so it would read '--comment=run' and drop '#3'",
            done.stderr,
        ), done.stderr


def test_an_extra_sbatch_line_sbatch_would_refuse_is_refused_at_its_item(
    taospec: Runner, tmp_path: Path
) -> None:
    job = yaml.safe_load((ROOT / "jobs" / "train-slurm.yaml").read_text())
    job["slurm"]["extra_sbatch"] = ["--qos=high", "--comment=two words"]
    path = write(tmp_path / "job.yaml", yaml.safe_dump(job, sort_keys=False))
    (tmp_path / "versions.yaml").write_text((ROOT / "jobs" / "versions.yaml").read_text())
    done = taospec("validate", path)
    assert done.returncode == 2, done.stderr
    assert re.search(
        r":\d+:\d+: \$\.slurm\.extra_sbatch\[1\]: sbatch reads an #SBATCH line as one option "
        r"and at most one value, so 'words' would be a word it refuses",
        done.stderr,
    ), done.stderr


GETOPT_REFUSAL = re.compile(
    r"^sbatch: (?:unrecognized option|invalid option|option '[^']*' is ambiguous)", re.MULTILINE
)
"""How sbatch (glibc's getopt_long) says it reads no option in a word."""


def sbatch_refuses_the_option(open_tmp: Path, line: str) -> bool:
    """Whether sbatch reads no option it knows in ``#SBATCH <line>``."""
    return GETOPT_REFUSAL.search(sbatch_test_only(open_tmp, line).stderr) is not None


def item_line(path: Path, line: str) -> int:
    """The line of ``path`` that holds the item ``line``."""
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if line in text)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("--partiton=gpu", "sbatch knows no option --partiton and would refuse the job "
                           "(did you mean --partition?)"),
        ("--memory=4G", "sbatch knows no option --memory and would refuse the job "
                        "(did you mean --mem?)"),
        ("-Z", "sbatch knows no option -Z and would refuse the job"),
        ("--gpu=2", "sbatch refuses --gpu as ambiguous: it starts --gpu-bind, --gpu-freq, "
                    "--gpus, --gpus-per-node, --gpus-per-socket and --gpus-per-task; write the "
                    "option out"),
        ("--me=1G", "sbatch refuses --me as ambiguous: it starts --mem, --mem-bind, "
                    "--mem-per-cpu, --mem-per-gpu and --mem-update; write the option out"),
    ],
)  # fmt: skip
def test_an_option_sbatch_does_not_know_or_cannot_tell_is_refused_at_its_item(
    slurm: None, taospec: Runner, open_tmp: Path, line: str, said: str
) -> None:
    # each passed validate and failed at sbatch ("unrecognized option", "is ambiguous") once
    # the record was open
    assert sbatch_refuses_the_option(open_tmp, line)
    path, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == 2, done.stderr
    at = rf"{re.escape(str(path))}:{item_line(path, line)}:\d+: \$\.slurm\.extra_sbatch\[1\]: "
    assert re.search(at + re.escape(said) + "$", done.stderr, re.MULTILINE), done.stderr


def test_an_ambiguous_start_names_the_options_sbatch_names(
    slurm: None, taospec: Runner, open_tmp: Path
) -> None:
    checked = sbatch_test_only(open_tmp, "--cont")
    assert re.search(r"'--cont' is ambiguous; possibilities: ", checked.stderr), checked.stderr
    _, done = validate_extra_sbatch(taospec, open_tmp, "--cont")
    assert done.returncode == 2, done.stderr
    assert sorted(re.findall(r"'(--[a-z-]+)'", checked.stderr)[1:]) == [
        "--container", "--context", "--contiguous"
    ]  # fmt: skip
    assert (  # and those a newer sbatch adds (--container-id from 23.02, --container-type 26.05)
        "$.slurm.extra_sbatch[1]: sbatch refuses --cont as ambiguous: it starts --container, "
        "--container-id, --container-type, --context and --contiguous; write the option out"
    ) in done.stderr, done.stderr


@pytest.mark.parametrize(
    "line", ["--parti=debug", "--qo=normal", "--comm=a", "--gpus-per-t=1", "--mem=1G", "-pdebug"]
)
def test_a_start_of_one_option_is_taken_for_it(
    slurm: None, taospec: Runner, open_tmp: Path, line: str
) -> None:
    # getopt_long takes a start of one long option for that option, and an option's whole
    # name for itself even where it starts others (--mem, --mem-per-cpu)
    assert not sbatch_refuses_the_option(open_tmp, line)
    _, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "line", ["-Hz", "-HZ", "-HQ", "-HOv", "-Hk", "-Hpdebug", "-Hvz", "-H1", "-kHW", "-vvj"]
)
def test_grouped_short_options_are_read_as_sbatch_reads_them(
    slurm: None, taospec: Runner, open_tmp: Path, line: str
) -> None:
    # getopt reads each letter after an option that takes no value as an option of its own
    refuses = sbatch_refuses_the_option(open_tmp, line)
    assert refuses == (rules._sbatch_unknown_option(line) is not None)
    _, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == (2 if refuses else 0), done.stderr


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("-HN2", "sbatch reads -HN2 as -H -N (and a value), and -N is set by taospec"),
        ("-Ha1-3", "sbatch reads -Ha1-3 as -H -a (and a value), and -a: taospec runs one"),
        ("--no", "sbatch refuses --no as ambiguous"),
        ("--nt", "sbatch refuses --nt as ambiguous"),
    ],
)
def test_an_option_taospec_sets_is_refused_once_however_it_is_written(
    taospec: Runner, open_tmp: Path, line: str, said: str
) -> None:
    # one problem each: an ambiguous start is no option taospec sets, as sbatch reads it
    _, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == 2
    assert done.stderr.count("$.slurm.extra_sbatch[1]") == 1, done.stderr
    assert said in done.stderr


def test_the_option_table_is_the_one_sbatch_reads(slurm: None, open_tmp: Path) -> None:
    refused = [name for name in sorted(rules.SBATCH_OPTIONS)
               if sbatch_refuses_the_option(open_tmp, name)]  # fmt: skip
    assert refused == []
    # no option is missing: sbatch names every option a letter starts when it is ambiguous
    for letter in "abcdefghijklmnopqrstuvwxyz":
        table = sorted(name for name in rules.SBATCH_OPTIONS if name.startswith(f"--{letter}"))
        said = sbatch_test_only(open_tmp, f"--{letter}").stderr
        if "is ambiguous" in said:
            assert sorted(re.findall(r"'(--[a-z-]+)'", said)[1:]) == table, said
        else:
            assert len(table) == ("unrecognized option" not in said), (table, said)
    for letter in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
        known = not sbatch_refuses_the_option(open_tmp, f"-{letter}")
        assert known == (f"-{letter}" in rules.SBATCH_OPTIONS), letter


def misspellings(name: str) -> list[str]:
    """``name``, every start of it, and it with a letter dropped, doubled or two swapped."""
    word = name[2:]
    middle = len(word) // 2
    return [
        *(f"--{word[:end]}" for end in range(1, len(word) + 1)),
        f"--{word[:middle]}{word[middle + 1 :]}",
        f"--{word[:middle]}{word[middle]}{word[middle:]}",
        f"--{word[: middle - 1]}{word[middle]}{word[middle - 1]}{word[middle + 1 :]}",
        f"--{word}s",
    ]


@pytest.mark.parametrize("name", sorted(n for n in rules.SBATCH_OPTIONS if n.startswith("--")))
def test_validate_refuses_exactly_the_starts_and_misspellings_sbatch_refuses(
    slurm: None, open_tmp: Path, name: str
) -> None:
    # the starts and misspellings of no option a newer sbatch added, which sbatch 22.05 and
    # every later one read alike
    newer = rules.SBATCH_NEWER_OPTIONS
    words = [w for w in misspellings(name) if not any(n.startswith(w) for n in newer)]
    assert words
    for word in words:
        refuses = sbatch_refuses_the_option(open_tmp, word)
        assert refuses == (rules._sbatch_unknown_option(word) is not None), word


@pytest.mark.parametrize(
    "line", ["--tres-per-task=gpu:1", "--tres-per-t=gpu:1", "--oom-kill-step", "--segment=2"]
)
def test_validate_passes_an_option_a_newer_sbatch_takes(
    slurm: None, taospec: Runner, open_tmp: Path, line: str
) -> None:
    # sbatch 22.05 knows none of these (--tres-per-task from Slurm 23.02, --segment from
    # 24.05, --oom-kill-step from 24.11): which Slurm the cluster runs is its own to say
    assert sbatch_refuses_the_option(open_tmp, line)
    _, done = validate_extra_sbatch(taospec, open_tmp, line)
    assert done.returncode == 0, done.stderr


def test_a_start_a_newer_sbatch_finds_ambiguous_is_refused(
    slurm: None, taospec: Runner, open_tmp: Path
) -> None:
    # sbatch 22.05 takes --res for --reservation; 24.05 added --resv-ports and refuses it
    assert not sbatch_refuses_the_option(open_tmp, "--res=x")
    _, done = validate_extra_sbatch(taospec, open_tmp, "--res=x")
    assert done.returncode == 2, done.stderr
    assert (
        "$.slurm.extra_sbatch[1]: sbatch 24.05 and later refuse --res as ambiguous: it starts "
        "--reservation, --resources and --resv-ports; write the option out"
    ) in done.stderr, done.stderr


def test_following_the_tail_through_a_login_node_reads_its_end_alone(
    slurm, login_node: str, taospec: Runner, open_tmp: Path
) -> None:
    """logs -f --tail N over ssh read the whole output file from its start, to know where to
    follow from: a run of days carried its whole output over the network before a line
    showed. Here 128 MiB (sparse: no line end in it) come before the last lines."""
    log, gate = "{results_dir}/taospec.log", open_tmp / "gate"
    lines = "; ".join(f"echo line-{n}" for n in range(1, 7))
    command = (
        f"truncate -s {128 << 20} {log}; {{ echo; {lines}; }} >> {log}; "
        f"while [ ! -e {gate} ]; do sleep 0.2; done; {{ echo after-1; echo after-2; }} >> {log}"
    )
    job_id = submit(taospec, job_file(open_tmp, ["sh", "-c", command], slurm={"login": login_node}))
    wait_for(lambda: "line-6" in log_of(open_tmp / "results", job_id), what="the last lines")
    with subprocess.Popen(
        [sys.executable, "-c", COUNTED, "logs", "-f", "--tail", "3", job_id], env=taospec.env,
        cwd=taospec.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as follower:  # fmt: skip
        assert follower.stdout is not None
        shown = [follower.stdout.readline() for _ in range(3)]
        gate.touch()
        rest, err = follower.communicate(timeout=120)
    assert follower.returncode == 0, err
    assert shown + rest.splitlines(keepends=True) == [
        "line-4\n",
        "line-5\n",
        "line-6\n",
        "after-1\n",
        "after-2\n",
    ]
    assert bytes_read(err) < 1 << 25, bytes_read(err)  # some MiB: Python and taospec themselves


def test_following_the_tail_of_an_ended_job_counts_its_unended_last_line(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    # logs -f --tail 1 of an ended job whose output ends without a newline printed 2 lines,
    # holding the last back as if the job could still go on with it
    done = taospec("run", job_file(open_tmp, ["sh", "-c", 'printf "a\\nb\\nc"']))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    for tail, shown in (("0", ""), ("1", "c"), ("2", "b\nc"), ("3", "a\nb\nc")):
        assert taospec("logs", "-f", "--tail", tail, job_id).stdout == shown, tail
        assert taospec("logs", "--tail", tail, job_id).stdout == shown, tail


def test_the_tail_of_a_huge_output_file_reads_its_end_alone(
    slurm, taospec: Runner, open_tmp: Path
) -> None:
    # the last lines a failed job's diagnosis reads, and logs --tail N, read the whole
    # output file: a training run's output of gigabytes, to show a few lines
    huge = 4 << 30
    log = "{results_dir}/taospec.log"
    command = (
        f"echo early; truncate -s {huge} {log}; "  # sparse: no line end in it
        f"{{ echo; echo line-1; echo line-2; echo Traceback: CUDA out of memory; }} >> {log}; "
        "exit 3"
    )
    done, read = run_counting_reads(taospec, "run", job_file(open_tmp, ["sh", "-c", command]))
    assert done.returncode == 1, done.stderr
    assert "the job ran out of GPU memory" in done.stderr
    assert read < 1 << 25, read  # some MiB: Python and taospec themselves
    job_id = done.stdout.split()[0]
    looked, read = run_counting_reads(taospec, "logs", "--tail", "2", job_id)
    assert (looked.returncode, looked.stdout) == (0, "line-2\nTraceback: CUDA out of memory\n")
    assert read < 1 << 25, read
