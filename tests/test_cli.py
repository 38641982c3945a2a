"""The command line's contract: exit codes, the lint and record verbs, input limits, GPUs."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

from taospec import proc
from taospec.cli import run_guarded
from taospec.errors import EXIT_INTERNAL, EXIT_INTERRUPTED
from taospec.ledger import Ledger
from tests.conftest import ROOT, Runner, taospec_command, write
from tests.ledgers import open_job

HELLO = """\
version: 1
network_arch: hello
action: greet
image: busybox:1
results_root: {root}
command: {command}
"""


def test_usage_errors_and_unknown_jobs_exit_2(taospec: Runner) -> None:
    assert taospec("render").returncode == 2
    assert taospec("run", "--jobs", "0", "x.yaml").returncode == 2
    unknown = taospec("status", "no-such-job-123456")
    assert unknown.returncode == 2
    assert "no job-record at " in unknown.stderr
    assert "no-such-job-123456.json" in unknown.stderr
    assert taospec("show", "../escape").returncode == 2


def test_a_usage_error_or_a_bug_never_prints_a_secret_it_quotes(
    taospec: Runner, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "ghp_" + "U" * 36
    done = taospec("ls", "--state", token)
    assert done.returncode == 2
    assert "Error: Invalid value for '--state': '<redacted>' is not one of" in done.stderr
    assert token not in done.stderr + done.stdout

    def bug() -> int:
        raise KeyError(f"NGC_KEY={token}")

    assert run_guarded(bug) == EXIT_INTERNAL
    said = capsys.readouterr().err
    assert said.startswith("taospec: internal error (a bug; please report it with this output):")
    assert "KeyError: NGC_KEY=<redacted>" in said
    assert token not in said


def test_a_failure_an_interrupt_caused_exits_130_and_a_bug_still_exits_3(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Ctrl-C landed inside threading's Condition while validate awaited its workers; the
    # lock's release then failed in its place, and taospec called it a bug (exit 3)
    def cleanup_failed_under_an_interrupt() -> int:
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("cannot release un-acquired lock")

    assert run_guarded(cleanup_failed_under_an_interrupt) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "taospec: interrupted\n"

    def bug_after_a_handled_error() -> int:
        try:
            raise ValueError("handled")
        except ValueError:
            raise RuntimeError("a bug") from None

    assert run_guarded(bug_after_a_handled_error) == EXIT_INTERNAL
    assert "RuntimeError: a bug" in capsys.readouterr().err


def test_ls_shows_one_row_per_job_whatever_its_results_path_holds(
    taospec: Runner, state_dir: Path
) -> None:
    # a results_root may hold a newline (docker mounts it), and ls printed it as it was:
    # the row broke in two, and a script reading a job per line read two
    record = open_job(Ledger(state_dir), results_root="/data/run\nlog\tx")
    listed = taospec("ls").stdout.splitlines()
    assert len(listed) == 2
    assert listed[1].startswith(record.id)
    assert listed[1].endswith(f"/data/run\\nlog\\tx/{record.id}")


@pytest.mark.parametrize("argv", [["ls"], ["ls", "--json"], ["render", "{job}"]])
def test_output_whose_reader_has_gone_is_no_failure(
    taospec: Runner, state_dir: Path, argv: list[str]
) -> None:
    # `taospec ls | head -1` exited 1, which says a job failed: click ends a write to a
    # closed pipe with exit 1
    open_job(Ledger(state_dir))
    job = ROOT / "jobs" / "hello.yaml"
    read, written = os.pipe()
    os.close(read)  # the reader has gone before the first write
    try:
        done = subprocess.run(
            [*taospec_command(), *(word.format(job=job) for word in argv)],
            stdout=written,
            stderr=subprocess.PIPE,
            text=True,
            env=taospec.env,
            check=False,
        )
    finally:
        os.close(written)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_relative_state_dir_is_refused(taospec: Runner) -> None:
    done = taospec("ls", env={"TAO_STATE_DIR": "relative/state"})
    assert done.returncode == 2
    assert "TAO_STATE_DIR must be an absolute path" in done.stderr


def test_lint_reads_a_file_or_stdin_and_never_prints_the_value(
    taospec: Runner, tmp_path: Path
) -> None:
    secret = "nvapi-" + "Z" * 40
    script = write(tmp_path / "launch.sh", f"docker run -e NGC_KEY={secret} image\n")
    flagged = taospec("lint", script)
    assert flagged.returncode == 1
    assert "NGC_KEY" in flagged.stderr
    assert secret not in flagged.stderr + flagged.stdout
    piped = taospec("lint", "-", input=f"docker login -u x --password {secret} nvcr.io\n")
    assert piped.returncode == 1
    assert "--password" in piped.stderr
    assert secret not in piped.stderr
    clean = taospec("lint", input="docker run -e NGC_KEY image\n")
    assert clean.returncode == 0


def test_a_file_over_one_mebibyte_is_refused(taospec: Runner, tmp_path: Path) -> None:
    big = write(tmp_path / "big.yaml", "version: 1\n# " + "x" * (1024 * 1024) + "\n")
    done = taospec("validate", big)
    assert done.returncode == 2
    assert f"{big}:1:1: $: is larger than 1 MiB" in done.stderr


def test_record_verbs_work_like_the_tao_recorder(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    opened = taospec(
        "record",
        "open",
        "--platform",
        "docker",
        "--image",
        "img:1",
        "--network-arch",
        "dino",
        "--action",
        "train",
        "--storage-tier",
        "B",
        "--results-root",
        str(tmp_path),
        "--upload-exclude",
        "*.tmp",
        "--upload-exclude",
        "ckpt/*",
    )
    assert opened.returncode == 0, opened.stderr
    job_id = opened.stdout.strip()
    assert job_id.startswith("dino-train-")
    marked = taospec(
        "record",
        "mark",
        job_id,
        "--state",
        "RUNNING",
        "--backend-ref",
        "abc",
        "--message",
        "launched by hand",
    )
    assert marked.returncode == 0, marked.stderr
    done = taospec(
        "record",
        "mark",
        job_id,
        "--state",
        "ERROR",
        "--source",
        "poller",
        "--err-class",
        "ERR_INFRA",
        "--message",
        "node lost",
    )
    assert done.returncode == 0
    again = taospec("record", "mark", job_id, "--state", "ERROR", "--source", "poller")
    assert again.returncode == 0
    conflicting = taospec("record", "mark", job_id, "--state", "COMPLETE")
    assert conflicting.returncode == 1
    # ls takes a state in any case; record mark's states are the recorder's, exactly.
    assert taospec("ls", "--state", "error").stdout.splitlines()[1].startswith(job_id)
    assert taospec("record", "mark", job_id, "--state", "error").returncode == 2
    record = json.loads(taospec("record", "show", job_id).stdout)
    assert record["results_dir"] == f"{tmp_path}/{job_id}"
    assert record["upload_excludes"] == ["*.tmp", "ckpt/*"]
    assert record["err_class"] == "ERR_INFRA"
    assert [t["state"] for t in record["transitions"]] == ["PENDING", "RUNNING", "ERROR"]
    listed = [json.loads(line) for line in taospec("record", "list", "--json").stdout.splitlines()]
    assert [r["id"] for r in listed] == [job_id]
    both = taospec(
        "record",
        "open",
        "--platform",
        "docker",
        "--image",
        "i",
        "--network-arch",
        "a",
        "--action",
        "b",
        "--storage-tier",
        "A",
    )
    assert both.returncode == 1


@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_gpus_a_job_holds_on_another_machine_s_own_engine_are_not_claimed_here(
    taospec: Runner, tmp_path: Path, state_dir: Path, state: str
) -> None:
    # a ledger two machines share (a state folder on NFS): a job that machine opened for
    # itself holds that machine's GPUs; it refused the same ids here
    ledger = Ledger(state_dir)
    this_process = {"pid": os.getpid(), "start": proc.start_time(os.getpid())}

    def holding(host: str) -> str:
        note = {**this_process, "host": host}
        job_id = open_job(ledger, platform="local", sidecar={"gpus": "0,1", "submitter": note}).id
        if state == "RUNNING":
            ledger.mark(job_id, "RUNNING")
        return job_id

    holding("gpu-box-2")
    spec = write(
        tmp_path / "job.yaml",
        HELLO.format(root=tmp_path / "results", command="'true'") + "gpus: [1]\n",
    )
    ran = taospec("run", spec)
    assert ran.returncode == 0, ran.stderr
    held_here = holding(os.uname().nodename)
    refused = taospec("run", "-B", spec)
    assert refused.returncode == 2, refused.stderr
    assert f"overlap GPUs 0,1 of {'running job' if state == 'RUNNING' else 'job'} {held_here}" in (
        refused.stderr
    )


def test_machines_sharing_a_state_folder_claim_their_own_gpus_without_waiting_for_each_other(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # the lock held from the GPU pick to the record's open was one file for "this machine",
    # whichever machine it was: one machine's claim waited for every other's
    def job(name: str, command: str) -> Path:
        text = HELLO.format(root=tmp_path / "results", command=command) + "gpus: [1]\n"
        return write(tmp_path / name / "job.yaml", text)

    # two jobs: one job's runs take turns anyway, from the decision that it runs to its open
    spec, theirs = job("here", "'true'"), job("there", "echo there")
    elsewhere = [
        "unshare", "--uts", "sh", "-c", 'hostname gpu-box-2 && exec "$@"', "sh",
        *taospec_command(), "run", "-B", str(theirs),
    ]  # fmt: skip

    def other_machine() -> subprocess.Popen[str]:
        return subprocess.Popen(
            elsewhere, env=taospec.env, cwd=tmp_path, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    first = other_machine()
    said = first.communicate(timeout=120)[1]
    assert first.returncode == 0, said
    (lock,) = (state_dir / "taospec").glob("gpus-*.lock")
    with open(lock, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # gpu-box-2 is between its GPU check and its open
        waiting = other_machine()
        here = taospec("run", "-B", spec, timeout=60)
        assert here.returncode == 0, here.stderr
        assert waiting.poll() is None  # the other machine's next claim waits for its own
        assert len(list((state_dir / "taospec").glob("gpus-*.lock"))) == 2
    said = waiting.communicate(timeout=120)[1]
    assert waiting.returncode == 0, said


def test_overlapping_gpu_ids_are_refused_unless_allowed(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    first = write(
        tmp_path / "a" / "job.yaml",
        HELLO.format(root=tmp_path / "results", command="sleep 300") + "gpus: [0, 1]\n",
    )
    second = write(
        tmp_path / "b" / "job.yaml",
        HELLO.format(root=tmp_path / "results", command="'true'") + "gpus: [1]\n",
    )
    running = taospec("run", "--detach", first)
    assert running.returncode == 0, running.stderr
    job_id = running.stdout.strip()
    try:
        refused = taospec("run", second)
        assert refused.returncode == 2
        assert f"overlap GPUs 0,1 of running job {job_id}" in refused.stderr
        allowed = taospec("run", "--allow-shared-gpus", second)
        assert allowed.returncode == 0, allowed.stderr
    finally:
        taospec("cancel", job_id)
