"""The local platform for real: processes, exit codes, logs, cancel, healing, ownership."""

from __future__ import annotations

import json
import os
import pty
import select
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from taospec.platforms.common import HELD_AT_MOST
from tests.conftest import (
    Runner,
    a_follow_shows_the_bar_as_it_is_redrawn,
    a_look_reads_the_log_a_block_at_a_time,
    progress_bar,
    refused_by_validate_and_run,
    run_counting_reads,
    spawn,
    taospec_command,
    write,
)


def job_file(tmp_path: Path, command: str, **extra: str) -> Path:
    lines = [
        "version: 1",
        "network_arch: hello",
        "action: greet",
        "platform: local",
        "image: busybox:1",
        f"results_root: {tmp_path / 'results'}",
        f"command: {json.dumps(command)}",
        *(f"{key}: {value}" for key, value in extra.items()),
    ]
    return write(tmp_path / "job.yaml", "\n".join(lines) + "\n")


def sweep_file(tmp_path: Path, matrix: str, command: str) -> Path:
    """``sweep.yaml``: one job ``a`` of the local platform, with ``matrix`` and ``command``
    written as given (YAML flow text)."""
    return write(
        tmp_path / "sweep.yaml",
        "version: 1\n"
        "defaults: {network_arch: hello, action: greet, platform: local, image: busybox:1,\n"
        f"  results_root: {tmp_path / 'results'}}}\n"
        "jobs:\n"
        "  a:\n"
        f"    matrix: {matrix}\n"
        f"    command: {command}\n",
    )


def record(state_dir: Path, job_id: str) -> dict:
    return json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())


def wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_job_that_succeeds_is_complete_with_its_output(taospec: Runner, tmp_path, state_dir):
    spec = job_file(
        tmp_path,
        "sh -c 'echo out-$0 > {results_dir}/out.txt; cat {config_path}' x",
        spec="{greeting: hi}",
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == "COMPLETE"
    results = tmp_path / "results" / job_id
    assert (results / "out.txt").read_text() == "out-x\n"
    assert (results / "taospec.log").read_text() == "greeting: hi\n"
    rec = record(state_dir, job_id)
    assert [t["state"] for t in rec["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
    assert rec["terminal_state"] == "COMPLETE"
    assert rec["backend_ref"].startswith("pid:")
    assert rec["results_dir"] == str(results)


def test_a_job_that_exits_3_is_an_error_with_the_code_and_log_tail(taospec: Runner, tmp_path):
    spec = job_file(tmp_path, "sh -c 'echo about to fail; exit 3'")
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id, state = done.stdout.split()
    assert state == "ERROR"
    assert "process exited with code 3" in done.stderr
    assert "| about to fail" in done.stderr
    status = json.loads(taospec("status", job_id, "--json").stdout)
    assert status["state"] == "ERROR"
    assert status["exit_code"] == 3


def test_detach_then_status_logs_and_cancel_from_other_processes(
    taospec: Runner, tmp_path, state_dir
):
    spec = job_file(tmp_path, "sh -c 'for i in 1 2 3; do echo line-$i; done; exec sleep 300'")
    done = taospec("run", "--detach", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert taospec("status", job_id).stdout.split()[1] == "RUNNING"
    wait_for(lambda: "line-3" in taospec("logs", job_id).stdout)
    assert taospec("logs", job_id, "--tail", "1").stdout == "line-3\n"
    pid = int(json.loads(taospec("show", job_id).stdout)["backend_ref"][4:])
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0
    assert "CANCELED" in cancelled.stdout
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid))
    again = taospec("cancel", job_id)
    assert again.returncode == 0
    assert "already ended CANCELED; nothing to cancel" in again.stdout
    assert taospec("status", job_id).stdout.split()[1] in ("UNKNOWN", "CANCELED")
    assert json.loads(taospec("show", job_id).stdout)["terminal_state"] == "CANCELED"
    # one cancel at a time per job: its lock file was left behind by every cancel
    assert list((state_dir / "taospec" / "cancel").iterdir()) == []


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_only_passed_names_reach_the_process(taospec: Runner, tmp_path):
    spec = job_file(
        tmp_path,
        "sh -c 'env | sort > {results_dir}/env.txt'",
        env="{pass: [PASSED_ONE], set: {SET_ONE: 'a b'}}",
    )
    done = taospec("run", spec, env={"PASSED_ONE": "p1", "NOT_PASSED": "nope"})
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    env = (tmp_path / "results" / job_id / "env.txt").read_text().splitlines()
    names = {line.split("=", 1)[0] for line in env}
    assert "PASSED_ONE=p1" in env
    assert "SET_ONE=a b" in env
    assert f"TAO_JOB_ID={job_id}" in env
    assert "NOT_PASSED" not in names
    assert f"HOME={tmp_path / 'results' / job_id}/.tao-runtime/home" in env


@pytest.mark.parametrize("value", ["COMPLETE", "RUNNING", "PENDING", "agent"])
def test_a_passed_value_that_is_a_word_of_the_record_leaves_the_record_readable(
    taospec: Runner, tmp_path, state_dir, value: str
) -> None:
    # MY_TOKEN=COMPLETE made the ledger's redaction write "<redacted>" as a state: the run
    # said FAILED for a job that exited 0, and left its record RUNNING and unreadable.
    spec = job_file(tmp_path, "true", env="{pass: [MY_TOKEN]}")
    done = taospec("run", spec, env={"MY_TOKEN": value})
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    rec = record(state_dir, job_id)
    assert [t["state"] for t in rec["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
    assert {t["source"] for t in rec["transitions"]} <= {"agent", "poller"}
    assert (rec["platform"], rec["terminal_state"]) == ("local", "COMPLETE")
    shown = taospec("status", job_id, env={"MY_TOKEN": value})
    assert shown.returncode == 0, shown.stderr


def test_a_path_the_job_sets_is_the_path_it_runs_with(taospec: Runner, tmp_path):
    # the launcher's PATH came after env.set, so a job's own PATH was silently dropped
    spec = job_file(
        tmp_path, "/bin/sh -c 'echo \"$PATH\" > {results_dir}/path.txt'", env="{set: {PATH: /bin}}"
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert (tmp_path / "results" / job_id / "path.txt").read_text() == "/bin\n"
    assert 'PATH="$PATH"' not in taospec("render", spec).stdout


def test_a_path_without_the_shells_tools_still_starts_the_job_and_records_its_end(
    taospec: Runner, tmp_path
):
    # the wrapper was `sh`, found through the job's own PATH: PATH=/nonexist failed every
    # launch with "sh: command not found"; its mv, found the same way, kept no exit code
    spec = job_file(tmp_path, "/bin/echo ok", env="{set: {PATH: /nonexist}}")
    assert taospec("validate", spec).returncode == 0
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == "COMPLETE"
    assert (tmp_path / "results" / job_id / "taospec.log").read_text() == "ok\n"
    plan = taospec("render", spec).stdout  # what a reviewer reads names the same programs
    assert "    /bin/sh \\\n" in plan
    assert "command -p mv -f" in plan


@pytest.mark.parametrize(
    ("installed", "why", "code"),
    [(None, "command not found", 127), ("not executable\n", "Permission denied", 126)],
    ids=["missing", "not-executable"],
)
def test_a_step_whose_program_taospec_cannot_start_is_recorded_error_naming_it(
    taospec: Runner, tmp_path: Path, state_dir: Path, installed: str | None, why: str, code: int
) -> None:
    # the prepare step's install, looked up on the PATH taospec runs with: the record it
    # opened stayed PENDING, run exited 2 as if nothing had been recorded, and the next run
    # of the target found its job not ended
    bare = tmp_path / "bin"
    bare.mkdir()
    if installed is not None:
        (bare / "install").write_text(installed)  # mode 644: found, and not to be run
    spec = job_file(tmp_path, "/bin/echo ok")
    done = taospec("run", spec, env={"PATH": str(bare)})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (rec,) = (json.loads(p.read_text()) for p in (state_dir / "jobs").glob("*.json"))
    assert rec["terminal_state"] == "ERROR", rec["transitions"]
    assert rec["err_class"] == "ERR_PROGRAM"
    said = (
        f"taospec cannot start install on this machine ({why}), which a step of the job's "
        "plan runs: it is not the job's command; install it, or give taospec a PATH that "
        "holds one it may run"
    )
    assert f"command failed (exit {code}): install; install: {why}; {said}" in done.stderr
    assert said in rec["transitions"][-1]["message"]
    again = taospec("run", spec)  # the record ended: nothing holds the target back
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[1] == "COMPLETE"


def test_a_results_folder_gone_before_the_launch_is_recorded_error_saying_so(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # the folder the prepare step made was gone when the launch opened its log file there
    # (a cleanup of the results root in between, here an install that makes nothing): an
    # internal error left the record PENDING for good
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "install").write_text("#!/bin/sh\nexit 0\n")
    (stand_in / "install").chmod(0o755)
    spec = job_file(tmp_path, "/bin/echo ok")
    done = taospec("run", spec, env={"PATH": str(stand_in)})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (rec,) = (json.loads(p.read_text()) for p in (state_dir / "jobs").glob("*.json"))
    assert rec["terminal_state"] == "ERROR", rec["transitions"]
    assert rec["err_class"] == "ERR_INFRA"
    folder = f"{tmp_path}/results/{rec['id']}"
    said = f"the job's folder {folder}, which the plan made before the launch, is gone"
    assert said in done.stderr
    assert said in rec["transitions"][-1]["message"]
    again = taospec("run", spec)  # made again by the next run's prepare step
    assert again.returncode == 0, again.stderr


@pytest.mark.skipif(
    os.getuid() != 0, reason="switching to another user needs root; CI runs as root"
)
def test_as_root_a_path_without_setpriv_still_switches_to_the_jobs_user(
    taospec: Runner, open_tmp: Path
):
    spec = job_file(open_tmp, "/usr/bin/id -u", user='"1000:1000"', env="{set: {PATH: /nonexist}}")
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert (open_tmp / "results" / job_id / "taospec.log").read_text() == "1000\n"
    plan = json.loads(taospec("render", "--format", "json", spec).stdout)
    (launch,) = [step["argv"] for step in plan["steps"] if step["name"] == "launch"]
    assert launch[:2] == ["/bin/sh", "-c"]
    assert launch[5:9] == ["command", "-p", "setpriv", "--reuid=1000"]


def test_a_passed_name_missing_from_the_environment_is_refused_before_anything(
    taospec: Runner, tmp_path, state_dir
):
    spec = job_file(tmp_path, "true", env="{pass: [SURELY_UNSET_VARIABLE]}")
    done = taospec("run", spec)
    assert done.returncode == 2
    # at its place, as every refusal of bad input is (it was "taospec: FILE: env.pass ...")
    assert f"{spec}:8:14: $.env.pass[0]: SURELY_UNSET_VARIABLE is not set" in done.stderr
    assert list(state_dir.iterdir()) == []
    assert not (tmp_path / "results").exists()
    # a review runs nothing, so it needs no passed value
    assert taospec("run", "-n", spec).returncode == 0


@pytest.mark.skipif(
    os.getuid() != 0, reason="switching to another user needs root; CI runs as root"
)
def test_as_root_a_job_with_a_user_runs_as_that_user_and_owns_its_results(
    taospec: Runner, open_tmp: Path
):
    tmp_path = open_tmp
    spec = job_file(
        tmp_path, "sh -c 'id -u > {results_dir}/uid; touch {results_dir}/made'", user='"1000:1000"'
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    results = tmp_path / "results" / done.stdout.split()[0]
    assert (results / "uid").read_text() == "1000\n"
    assert (results / "made").stat().st_uid == 1000
    assert results.stat().st_uid == 1000


def test_a_crash_between_launch_and_the_running_mark_is_healed_by_status(
    taospec: Runner, tmp_path, state_dir
):
    """Open and launch by hand the way submit does, but never mark RUNNING."""
    spec = job_file(tmp_path, "sleep 300")
    opened = taospec(
        "record",
        "open",
        "--platform",
        "local",
        "--image",
        "busybox:1",
        "--network-arch",
        "hello",
        "--action",
        "greet",
        "--storage-tier",
        "A",
        "--results-root",
        str(tmp_path / "results"),
    )
    job_id = opened.stdout.strip()
    results = tmp_path / "results" / job_id
    results.mkdir(parents=True)
    child = subprocess.Popen(
        ["sleep", "300"],
        env={"TAO_JOB_ID": job_id, "PATH": os.environ["PATH"]},
        start_new_session=True,
    )
    try:
        healed = taospec("status", job_id, "--json")
        assert json.loads(healed.stdout)["state"] == "RUNNING"
        rec = record(state_dir, job_id)
        assert rec["backend_ref"] == f"pid:{child.pid}"
        assert rec["transitions"][-1]["source"] == "poller"
        assert "healed" in rec["transitions"][-1]["message"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert spec.exists()


def test_ctrl_c_while_following_cancels_the_job(taospec: Runner, tmp_path, state_dir):
    spec = job_file(tmp_path, "sleep 300")
    env = {**taospec.env}
    follower = subprocess.Popen(
        [*__import__("tests.conftest").conftest.taospec_command(), "run", str(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    wait_for(
        lambda: (
            (state_dir / "jobs").exists()
            and any(
                json.loads(text)["backend_ref"]
                for p in (state_dir / "jobs").glob("*.json")
                if (text := p.read_text())  # empty: reserved by open, not written yet
            )
        )
    )
    follower.send_signal(signal.SIGINT)
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 130, err
    job_id = out.split()[0]
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"


def test_a_step_check_ended_by_a_signal_cancels_the_submit_instead_of_running_the_step(
    tmp_path: Path, state_dir: Path
) -> None:
    # A SIGHUP to the process group can end an `unless` check (docker image inspect) before
    # taospec itself is interrupted; the step it guards (docker pull) must not run then.
    from dataclasses import replace

    from taospec.errors import JobFailed
    from taospec.executor import submit
    from taospec.ledger import Ledger
    from taospec.platforms import render
    from tests.conftest import load_job

    plan = render(load_job(job_file(tmp_path, "true")))
    marker = tmp_path / "the-step-ran"
    guarded = replace(
        plan.steps[0],
        argv=("touch", str(marker)),
        unless=("sh", "-c", "kill -HUP $$"),
    )
    plan = replace(plan, steps=(guarded, *plan.steps[1:]))
    ledger = Ledger(state_dir)
    with pytest.raises(JobFailed, match="interrupted; recorded CANCELED"):
        submit(plan, ledger)
    (job_id,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    assert not marker.exists()


def test_a_submit_in_a_worker_thread_stops_when_the_run_is_cancelled(
    tmp_path: Path, state_dir: Path
) -> None:
    # A pipeline submits from worker threads, and Python raises the interrupt in the main
    # thread only. A signal to the group can make a check answer "needed" (docker image
    # inspect exits 1 when the signal cancels it); the guarded step (docker pull) must not
    # start then, and the job is CANCELED, not an ERROR of its own.
    import threading
    from dataclasses import replace

    from taospec.errors import JobFailed
    from taospec.executor import submit
    from taospec.ledger import Ledger
    from taospec.platforms import render
    from tests.conftest import load_job

    cancelling = threading.Event()
    plan = render(load_job(job_file(tmp_path, "true")))
    marker = tmp_path / "the-step-ran"
    answer = tmp_path / "the-check-answered"
    guarded = replace(
        plan.steps[0],
        argv=("touch", str(marker)),
        unless=("sh", "-c", f"touch {answer}; exit 1"),
    )
    plan = replace(plan, steps=(guarded, *plan.steps[1:]))
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            submit(plan, Ledger(state_dir), stopping=cancelling.is_set, progress=progress)
        except JobFailed as failure:
            failures.append(failure)

    def progress(line: str) -> None:
        if line.endswith(": opened record, results in " + line.rsplit(" ", 1)[-1]):
            cancelling.set()  # the main thread was interrupted while the check runs

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=60)
    assert answer.exists()
    assert not marker.exists()
    assert len(failures) == 1
    assert "recorded CANCELED" in str(failures[0])
    (job_id,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"


def test_a_run_interrupted_while_its_job_is_submitted_says_how_the_job_ended(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # the worker recorded the job CANCELED, but the run exited 130 saying nothing of it:
    # the outcome it put on the queue was never read once the run was interrupted
    stand_ins = tmp_path / "bin"
    real = shutil.which("install")
    write(stand_ins / "install", f'#!/bin/sh\nkill -INT "$PPID"\nsleep 1\nexec {real} "$@"\n')
    (stand_ins / "install").chmod(0o755)
    path = f"{stand_ins}:{os.environ['PATH']}"
    seen = tmp_path / "notified"
    notifier = json.dumps(f"echo $TAOSPEC_STATE >> {seen}")
    done = taospec("run", job_file(tmp_path, "echo ran", notify=notifier), env={"PATH": path})
    assert done.returncode == 130, done.stderr
    job_id, state = done.stdout.split()
    assert state == "CANCELED"
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    assert "\njob: CANCELED in " in done.stderr
    assert seen.read_text() == "CANCELED\n"  # its notifier ran, once
    assert not (tmp_path / "results" / job_id / "taospec.log").exists()  # it never launched


def test_a_failure_of_taospec_between_the_open_and_the_first_step_closes_the_record(
    tmp_path: Path, state_dir: Path
) -> None:
    # a bug of taospec's own raised once the record was open (a path that is no UTF-8 did)
    # left it PENDING until a later status closed it as never launched
    from taospec.executor import submit
    from taospec.ledger import Ledger
    from taospec.platforms import render
    from tests.conftest import load_job

    marker = tmp_path / "the-job-ran"
    plan = render(load_job(job_file(tmp_path, f"touch {marker}")))

    def failing(_: object) -> None:
        raise UnicodeEncodeError("utf-8", "x\udcff", 1, 2, "surrogates not allowed")

    with pytest.raises(UnicodeEncodeError):
        submit(plan, Ledger(state_dir), opened=failing)
    (job_id,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
    closed = record(state_dir, job_id)
    assert (closed["terminal_state"], closed["err_class"]) == ("ERROR", "ERR_INFRA")
    assert closed["transitions"][-1]["message"] == (
        "taospec failed before launching (UnicodeEncodeError: 'utf-8' codec can't encode "
        "character '\\udcff' in position 1: surrogates not allowed); nothing was launched"
    )
    assert not marker.exists()
    assert not (tmp_path / "results" / job_id).exists()  # no step ran


@pytest.mark.parametrize("where", ["as the open returns", "inside the open"])
def test_an_interrupt_that_lands_while_the_record_is_opened_cancels_it(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # A SIGHUP to the process group can land in the moment between the record's creation
    # and the submit's cancel-on-interrupt: the record was then left PENDING, with nothing
    # launched and no run that knew of it.
    from taospec.errors import JobFailed
    from taospec.executor import submit
    from taospec.ledger import Ledger, store
    from taospec.platforms import render
    from tests.conftest import load_job

    marker = tmp_path / "the-job-ran"
    plan = render(load_job(job_file(tmp_path, f"touch {marker}")))
    ledger = Ledger(state_dir)
    if where == "as the open returns":
        real_open = Ledger.open

        def opening(self: Ledger, **fields: object) -> object:
            opened = real_open(self, **fields)
            os.kill(os.getpid(), signal.SIGINT)
            return opened

        monkeypatch.setattr(Ledger, "open", opening)
    else:
        real_append = store.journal.append

        def appending(path: str, event: dict[str, str]) -> None:
            real_append(path, event)
            os.kill(os.getpid(), signal.SIGINT)  # the record and its journal line exist

        monkeypatch.setattr(store.journal, "append", appending)
    with pytest.raises((KeyboardInterrupt, JobFailed)):
        submit(plan, ledger)
    (job_id,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    assert not marker.exists()


def test_a_passed_value_is_kept_out_of_every_form_of_output(
    taospec: Runner, tmp_path, state_dir
) -> None:
    # status --json redacted the text JSON had already escaped ("..\"..", "\u00e9"), and
    # a value spanning lines was looked for whole in output read a line at a time
    value = 'quoted"value\\é-0123\nsecond-line-of-it'
    passed = {"PLAIN_VAR": value}
    spec = job_file(
        tmp_path, 'sh -c \'printf "%s\\n" "$PLAIN_VAR"; sleep 30\'', env="{pass: [PLAIN_VAR]}"
    )
    done = taospec("run", "--detach", spec, env=passed)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    results = tmp_path / "results" / job_id
    event = {"status": "RUNNING", "message": f"epoch 1 with {value}"}
    (results / "status.json").write_text(json.dumps(event) + "\n")
    wait_for(lambda: "second-line" in (results / "taospec.log").read_text())
    said = [
        taospec("status", "--json", job_id, env=passed),
        taospec("status", job_id, env=passed),
        taospec("logs", job_id, env=passed),
    ]
    assert taospec("cancel", job_id, env=passed).returncode == 0
    for output in said:
        assert output.returncode == 0, output.stderr
        for form in (value, *value.splitlines(), json.dumps(value)[1:-1]):
            assert form not in output.stdout + output.stderr
    assert "epoch 1 with <redacted>" in json.loads(said[0].stdout)["progress"]["message"]
    for path in state_dir.rglob("*"):
        if path.is_file():
            assert "second-line-of-it" not in path.read_text(errors="replace"), path


def test_a_passed_value_written_in_the_job_is_found_without_its_line_ending(
    taospec: Runner, tmp_path, state_dir
) -> None:
    # a token file's CRLF: the value with its "\r" is in no job, the token itself was
    spec = job_file(
        tmp_path, "cat {config_path}", env="{pass: [PLAIN_VAR]}", spec="{key: sekrit-0123}"
    )
    done = taospec("run", spec, env={"PLAIN_VAR": "sekrit-0123\r"})
    assert done.returncode == 2, done.stderr
    assert "$.spec.key: holds the value of PLAIN_VAR" in done.stderr
    assert list(state_dir.iterdir()) == []


def test_a_follow_shows_a_progress_bar_before_its_line_ends(taospec: Runner, tmp_path) -> None:
    # logs -f handed on whole lines alone (or 64 KiB pieces): a bar redrawn with \r, which
    # ends its line once an epoch is over, showed nothing until then
    gate = tmp_path / "gate"
    spec = job_file(tmp_path, f"sh -c {shlex.quote(progress_bar(300, str(gate)))}")
    started = taospec("run", "--detach", spec)
    assert started.returncode == 0, started.stderr
    a_follow_shows_the_bar_as_it_is_redrawn(
        taospec, started.stdout.strip(), 300, gate.touch, tmp_path
    )


def _bar_job(tmp_path: Path) -> tuple[Path, Path, str]:
    """A job file whose job draws :func:`progress_bar` of 300 steps, its gate, and the
    output it writes."""
    gate = tmp_path / "gate"
    spec = job_file(tmp_path, f"sh -c {shlex.quote(progress_bar(300, str(gate)))}")
    bar = "".join(f"step {i:05d}\r" for i in range(300))
    return spec, gate, f"first\n{bar} done\n"


def _wait_for_text(read: Callable[[], str], text: str, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while text not in read():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, f"{text!r} was not shown"
        time.sleep(0.1)


def test_run_follow_of_one_job_writes_a_progress_bar_as_it_is_redrawn(
    taospec: Runner, tmp_path: Path
) -> None:
    # run -f handed on whole lines alone: a bar redrawn with \r showed nothing until its
    # line ended, an epoch later
    spec, gate, written = _bar_job(tmp_path)
    shown = tmp_path / "stdout"
    with shown.open("w") as out:
        child = spawn(["run", "-f", str(spec)], taospec.env, taospec.cwd, stdout=out)
        try:
            _wait_for_text(lambda: shown.read_bytes().decode(), "step 00150\r", child)
        finally:
            gate.touch()
        _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    job_id = err.split(": opened record")[0].split("\n")[-1]
    assert shown.read_bytes().decode() == f"{written}{job_id} COMPLETE\n"


def test_run_follow_writes_a_line_longer_than_it_holds_as_the_job_wrote_it(
    taospec: Runner, tmp_path: Path
) -> None:
    # the first piece of a line too long to hold went on as a line, and run -f ended it
    # with a line break the job never wrote
    gate = tmp_path / "gate"
    script = (
        f"head -c {2 * HELD_AT_MOST} /dev/zero | tr '\\0' x; "
        f"while [ ! -e {gate} ]; do sleep 0.1; done; echo ' done'"
    )
    spec = job_file(tmp_path, f"sh -c {shlex.quote(script)}")
    shown = tmp_path / "stdout"
    with shown.open("w") as out:
        child = spawn(["run", "-f", str(spec)], taospec.env, taospec.cwd, stdout=out)
        try:
            _wait_for_text(lambda: shown.read_bytes().decode(), "x" * HELD_AT_MOST, child)
        finally:
            gate.touch()
        _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    job_id = err.split(": opened record")[0].split("\n")[-1]
    assert shown.read_text() == f"{'x' * 2 * HELD_AT_MOST} done\n{job_id} COMPLETE\n"


def test_run_follow_on_a_terminal_shows_the_bar_under_the_jobs_live_line(
    taospec: Runner, tmp_path: Path
) -> None:
    # under live lines the bar's parts would break them: its last redraw is drawn with
    # them, and the line goes out whole once it ends
    spec, gate, written = _bar_job(tmp_path)
    shown = tmp_path / "stdout"
    primary, secondary = pty.openpty()
    drawn = bytearray()

    def read_terminal() -> str:
        while select.select([primary], [], [], 0)[0]:
            try:
                drawn.extend(os.read(primary, 1 << 16))
            except OSError:  # the terminal closed
                break
        return drawn.decode(errors="replace")

    try:
        with shown.open("w") as out:
            child = subprocess.Popen(
                [*taospec_command(), "run", "-f", str(spec)],
                env={**taospec.env, "TERM": "xterm"},
                cwd=taospec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=secondary,
            )
            os.close(secondary)
            try:
                _wait_for_text(read_terminal, "    step 0029", child)
                assert shown.read_bytes().decode() == "first\n"  # the bar is on the terminal
            finally:
                gate.touch()
            deadline = time.monotonic() + 120
            while child.poll() is None and time.monotonic() < deadline:
                read_terminal()
                time.sleep(0.1)
            assert child.wait(timeout=10) == 0, read_terminal()
    finally:
        os.close(primary)
    assert shown.read_bytes().decode().startswith(written)


def test_run_follow_of_several_jobs_writes_each_bar_line_whole(taospec: Runner, tmp_path):
    # the parts of two jobs' bars, written as they came, would break each other's lines
    command = """[sh, -c, 'printf "s%s\\r" "$0" "$0"; sleep 1; echo end', '{matrix.n}']"""
    spec = sweep_file(tmp_path, "{n: [1, 2]}", command)
    shown = tmp_path / "stdout"
    with shown.open("w") as out:
        child = spawn(["run", "-f", str(spec)], taospec.env, taospec.cwd, stdout=out)
        _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    lines = shown.read_bytes().decode().split("\n")
    bars = sorted(line for line in lines if line.endswith("end"))
    assert [bar.split("] ", 1)[1] for bar in bars] == ["s1\rs1\rend", "s2\rs2\rend"]
    assert all(bar.startswith("[a[") for bar in bars), bars


def test_a_value_written_in_two_pieces_is_followed_as_one_line(taospec: Runner, tmp_path) -> None:
    # logs -f and run -f handed on each piece they read, redacted alone: the value went
    # out whole (or split over two lines it never had)
    value = "pieces-of-a-secret-0123"
    command = (
        'sh -c \'printf "%s" "${PLAIN_VAR%%-0123}"; sleep 1; printf "%s\\n" -0123; '
        'printf "ca"; sleep 1; printf "f\\303"; sleep 1; printf "\\251 done\\n"\''
    )
    spec = job_file(tmp_path, command, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": value}
    followed = taospec("run", "--follow", spec, env=passed)
    assert followed.returncode == 0, followed.stderr
    started = taospec("run", "--detach", "--force", spec, env=passed)
    assert started.returncode == 0, started.stderr
    logs = taospec("logs", "--follow", started.stdout.split()[0], env=passed)
    assert logs.returncode == 0, logs.stderr
    for said in (followed.stdout + followed.stderr, logs.stdout):
        assert value not in said
        assert "pieces-of-a" not in said
        assert "<redacted>\n" in said
        assert "café done\n" in said  # a character split between two reads is read whole


@pytest.mark.parametrize("separator", ["\f", "\x1e", "\u2028"], ids=["ff", "rs", "ls"])
def test_a_value_holding_what_splitlines_breaks_at_is_redacted_whole(
    taospec: Runner, tmp_path, separator: str
) -> None:
    # logs split the output with str.splitlines, which also breaks at \f, \v, \x1c-\x1e,
    # \x85, \u2028 and \u2029, and redacted each piece alone: both halves went out
    value = f"Ab12Xy{separator}Cd34Ef56"
    command = 'sh -c \'printf "out=%s\\n" "$PLAIN_VAR"; exit 3\''
    spec = job_file(tmp_path, command, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": value}
    ran = taospec("run", spec, env=passed)  # a failure prints the last lines of its output
    assert ran.returncode == 1, ran.stderr
    job_id = ran.stdout.split()[0]
    assert "| out=<redacted>\n" in ran.stderr
    shown = [taospec("logs", *how, job_id, env=passed) for how in ((), ("--tail", "1"), ("-f",))]
    assert [said.stdout for said in shown] == ["out=<redacted>\n"] * 3
    for said in (ran.stdout + ran.stderr, *(said.stdout + said.stderr for said in shown)):
        assert "Ab12Xy" not in said
        assert "Cd34Ef56" not in said


def test_a_line_too_long_to_hold_is_cut_outside_a_passed_value(taospec: Runner, tmp_path) -> None:
    # logs -f hands on a line longer than it holds unended: the first piece of a value
    # the job was still writing went out, unredacted, and the rest after it
    value = "Zq8sup3rs3cretVALUE0123456789X"
    fill = f"head -c {HELD_AT_MOST - 6} /dev/zero | tr '\\0' x"
    script = write(
        tmp_path / "long.sh",
        f"sleep 2\n{fill}; printf '%syy' \"$PLAIN_VAR\"; sleep 3; echo\n"
        f'{fill}; printf %s "${{PLAIN_VAR%%VALUE*}}"; sleep 3; echo "VALUE${{PLAIN_VAR#*VALUE}}"\n',
    )
    spec = job_file(tmp_path, f"sh {script}", env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": value}
    started = taospec("run", "--detach", spec, env=passed)
    assert started.returncode == 0, started.stderr
    followed = taospec("logs", "-f", started.stdout.strip(), env=passed)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.count("x") == 2 * (HELD_AT_MOST - 6)
    # the first line held its value whole across where it was cut, the second was cut
    # while the value was half written
    assert followed.stdout.replace("x", "") == "<redacted>yy\n<redacted>\n"


def test_logs_of_a_long_run_are_read_a_block_at_a_time(taospec: Runner, tmp_path) -> None:
    # logs read the whole log at once and split it into a list of its lines: a log of
    # 100 MB took 300 MB of memory, and one of gigabytes would not fit
    started = taospec("run", "--detach", job_file(tmp_path, "true"))
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    assert taospec("status", job_id).stdout.split()[1] == "COMPLETE"
    a_look_reads_the_log_a_block_at_a_time(taospec, job_id, tmp_path / "results" / job_id)


def test_a_follow_of_a_long_run_reads_its_log_a_block_at_a_time(taospec: Runner, tmp_path) -> None:
    # logs -f read all of the log there was at once before it handed on a line: a follow
    # of a job that had written 144 MB took 575 MB of memory, and one of gigabytes would
    # not fit
    started = taospec("run", "--detach", job_file(tmp_path, "true"))
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    assert taospec("status", job_id).stdout.split()[1] == "COMPLETE"
    a_look_reads_the_log_a_block_at_a_time(taospec, job_id, tmp_path / "results" / job_id, "-f")


def _gated_follow(taospec: Runner, tmp_path: Path, head: str, size: int, rest: str) -> str:
    """What ``logs -f`` hands on of a local job that runs the shell text ``head``, then
    waits for a gate before it runs ``rest``, followed once its log holds ``size`` bytes:
    a look at it then (``logs``) and what the follow handed on before the gate show at most
    the x's that begin its line."""
    gate = tmp_path / "gate"
    script = write(
        tmp_path / "long.sh",
        f"{head}\nwhile [ ! -e {gate} ]; do sleep 0.1; done; {rest}\n",
    )
    started = taospec("run", "--detach", job_file(tmp_path, f"sh {script}"))
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    log = tmp_path / "results" / job_id / "taospec.log"
    wait_for(lambda: log.exists() and log.stat().st_size == size)
    looked = taospec("logs", job_id)  # a look at it while it runs cuts it as well
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout.strip("x ") == ""
    follower = subprocess.Popen(
        [*taospec_command(), "logs", "-f", job_id], env=taospec.env, cwd=taospec.cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert follower.stdout is not None
    first = os.read(follower.stdout.fileno(), 1 << 17)  # what it handed on before the gate
    gate.touch()
    after, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert first.strip(b"x ") == b""
    return (first + after).decode()


def test_a_line_too_long_to_hold_is_cut_outside_a_token_found_by_its_form(
    taospec: Runner, tmp_path
) -> None:
    # logs -f handed on a line longer than it holds as far as it was written: a key the
    # job was still writing, which redaction finds by its form alone (no passed value),
    # went out in two pieces, each too short for the pattern, and neither was redacted
    token = "nvapi-Qw3rTy8uIo1pAs5dFg7hJk9L"
    head = f"head -c {HELD_AT_MOST - 10} /dev/zero | tr '\\0' x; printf ' {token[:14]}'"
    followed = _gated_follow(taospec, tmp_path, head, HELD_AT_MOST + 5, f"echo {token[14:]}")
    assert followed.count("x") == HELD_AT_MOST - 10
    assert followed.replace("x", "") == " <redacted>\n"


def test_a_line_too_long_to_hold_is_cut_before_a_value_that_runs_on(
    taospec: Runner, tmp_path
) -> None:
    # logs -f cut a line longer than it holds before its last three words only: of a
    # quoted password of several words still being written, the first went out, where
    # the line, once ended, is redacted whole
    head = (
        f"head -c {HELD_AT_MOST} /dev/zero | tr '\\0' x; "
        'printf \' {"password": "hunter2 is my pass word\''
    )
    followed = _gated_follow(taospec, tmp_path, head, HELD_AT_MOST + 38, "echo '\"}'")
    assert followed.count("x") == HELD_AT_MOST
    assert followed.replace("x", "") == ' {"password": "<redacted>"}\n'


def test_a_job_that_ends_between_a_read_and_the_look_at_it_is_read_to_its_end(
    taospec: Runner, tmp_path, state_dir, monkeypatch
) -> None:
    # logs -f, after a read found nothing new, asked whether the job still ran and stopped:
    # a job that wrote the rest of its line and ended in between had the half held back
    # handed on as it was (the first part of a passed value) and the rest never read
    from taospec.ledger import Ledger
    from taospec.platforms import local

    value = "Zq8sup3rs3cretVALUE0123456789X"
    gate = tmp_path / "gate"
    script = write(
        tmp_path / "half.sh",
        f'printf "out=%s" "${{PLAIN_VAR%%VALUE*}}"; while [ ! -e {gate} ]; do sleep 0.1; done\n'
        'echo "VALUE${PLAIN_VAR#*VALUE}"\n',
    )
    spec = job_file(tmp_path, f"sh {script}", env="{pass: [PLAIN_VAR]}")
    started = taospec("run", "--detach", spec, env={"PLAIN_VAR": value})
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    log = tmp_path / "results" / job_id / "taospec.log"
    wait_for(lambda: log.exists() and log.read_text() == "out=Zq8sup3rs3cret")
    ledger = Ledger(state_dir)
    real = local.status

    def the_job_ends_first(record, sidecar):  # the gap, made wide: the job ends in it
        gate.touch()
        wait_for(lambda: real(record, sidecar).terminal)
        return real(record, sidecar)

    monkeypatch.setattr(local, "status", the_job_ends_first)
    handed: list[str] = []
    code = local.logs(
        ledger.get(job_id), ledger.sidecar(job_id), tail=None, follow=True, on_line=handed.append
    )
    assert code == 0
    assert handed == [f"out={value}\n"]


def test_the_last_lines_shown_of_a_failed_job_never_begin_inside_a_line(
    taospec: Runner, tmp_path
) -> None:
    # a failure's last lines were read from the log's last 64 KiB, whose first line began
    # wherever that did: inside a line, with the second part of a passed value in it
    value = "Zq8sup3rs3cretVALUE0123456789X"
    script = write(
        tmp_path / "long.sh",
        f'printf "%s" "$PLAIN_VAR"; head -c {(1 << 16) - 16} /dev/zero | tr "\\0" x\n'
        "echo; exit 3\n",
    )
    spec = job_file(tmp_path, f"sh {script}", env="{pass: [PLAIN_VAR]}")
    ran = taospec("run", spec, env={"PLAIN_VAR": value})
    assert ran.returncode == 1, ran.stderr
    assert "last lines of" not in ran.stderr  # the one line began before the last 64 KiB
    assert "VALUE" not in ran.stdout + ran.stderr


def test_a_look_at_a_running_job_s_log_shows_no_part_of_a_value_being_written(
    taospec: Runner, tmp_path
) -> None:
    # logs (not -f) printed the unended last line as it was: the first half of a passed
    # value the job was still writing went out, unredacted
    value = "Zq8sup3rs3cretVALUE0123456789X"
    script = write(
        tmp_path / "half.sh",
        'echo first; printf "out=%s" "${PLAIN_VAR%%VALUE*}"; sleep 4\n'
        'echo "VALUE${PLAIN_VAR#*VALUE}"\n',
    )
    spec = job_file(tmp_path, f"sh {script}", env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": value}
    started = taospec("run", "--detach", spec, env=passed)
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    log = tmp_path / "results" / job_id / "taospec.log"
    deadline = time.monotonic() + 10
    while "out=" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    looked = taospec("logs", job_id, env=passed)
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout.startswith("first\n")
    assert "Zq8sup3r" not in looked.stdout
    assert taospec("logs", job_id, "--tail", "0", env=passed).stdout == ""
    ended = taospec("logs", "-f", job_id, env=passed)
    assert ended.stdout == "first\nout=<redacted>\n"


def test_a_job_s_own_text_is_not_recorded_where_its_passed_values_are_unknown(
    taospec: Runner, tmp_path, state_dir
) -> None:
    # status from a shell without the variable recorded the traceback's last line, which
    # quoted the value, in the record and the journal: redaction knows only values it has
    value = "correcthorsebattery"
    script = write(
        tmp_path / "fail.sh",
        "sleep 1\necho 'Traceback (most recent call last):' >&2\n"
        'echo "ValueError: invalid api key $PLAIN_VAR" >&2\nexit 1\n',
    )
    spec = job_file(tmp_path, f"sh {script}", env="{pass: [PLAIN_VAR]}")
    started = taospec("run", "--detach", spec, env={"PLAIN_VAR": value})
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.split()[0]
    results = tmp_path / "results" / job_id
    wait_for(
        lambda: (
            (results / ".tao-runtime").exists()
            and "api key" in (results / "taospec.log").read_text()
        )
    )
    time.sleep(0.5)
    elsewhere = {k: v for k, v in taospec.env.items() if k != "PLAIN_VAR"}
    polled = taospec("status", job_id, env=elsewhere)
    assert "ERROR" in polled.stdout, polled.stderr
    assert "note: PLAIN_VAR is not set here" in polled.stderr
    message = record(state_dir, job_id)["transitions"][-1]["message"]
    assert "the program raised ValueError (its message is left out: PLAIN_VAR is not set" in (
        message
    )
    for path in state_dir.rglob("*"):
        if path.is_file():
            assert value not in path.read_text(errors="replace"), path


def test_cancel_ends_every_process_of_the_job_not_only_its_leader(
    taospec: Runner, tmp_path, state_dir
) -> None:
    # the wrapper shell, the group's leader, dies on TERM at once: cancel took that for the
    # job's end and never sent KILL, and a command that ignores TERM ran on, recorded CANCELED
    spec = job_file(tmp_path, "sh -c 'trap \"\" TERM; sleep 300 & sleep 301; wait'")
    started = taospec("run", "--detach", spec)
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.split()[0]
    wait_for(lambda: len(_group_of(job_id)) >= 3)
    group = _group_of(job_id)
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "killed" in cancelled.stdout + cancelled.stderr
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in group), timeout=5)


def _group_of(job_id: str) -> list[int]:
    """The live processes whose environment names ``job_id``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                environ = Path(f"/proc/{entry.name}/environ").read_bytes().split(b"\0")
                stat = Path(f"/proc/{entry.name}/stat").read_text()
                state = stat.rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if f"TAO_JOB_ID={job_id}".encode() in environ and state not in ("Z", "X"):
                found.append(int(entry.name))
    return found


def test_the_rendered_script_passes_a_value_by_name_and_runs_what_run_runs(
    taospec: Runner, tmp_path: Path
) -> None:
    # the script launched the job with `setsid env -i ... PLAIN_VAR="$PLAIN_VAR" ...`: the
    # value was in the argv of setsid and env, which any user (and an execve audit log)
    # sees; `run` gives the job the same environment with no value on a command line
    value = "Zq8Lm3Vt7Rx"
    spec = job_file(tmp_path, "env", env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": value}
    ran = taospec("run", spec, env=passed)
    assert ran.returncode == 0, ran.stderr
    job_id = ran.stdout.split()[0]
    by_run = (tmp_path / "results" / job_id / "taospec.log").read_text()
    script = taospec("render", "--format", "sh", spec, env=passed)
    assert script.returncode == 0, script.stderr
    assert value not in script.stdout
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    seen = tmp_path / "argv.log"
    for tool in ("setsid", "env"):  # each notes its argv, then is the real one
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        write(stand_ins / tool, f'#!/bin/sh\nprintf "%s\\n" "$*" >> {seen}\nexec {real} "$@"\n')
        (stand_ins / tool).chmod(0o755)
    write(stand_ins / "taospec", '#!/bin/sh\n[ "$2" = open ] && echo by-script\nexit 0\n')
    (stand_ins / "taospec").chmod(0o755)
    launcher = {"PATH": f"{stand_ins}:/usr/bin:/bin", "PLAIN_VAR": value, "OTHER": "x",
                "BASH_FUNC_f%%": "() { :; }"}  # fmt: skip
    done = subprocess.run(["bash", "-c", script.stdout], env=launcher, cwd=tmp_path,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    exit_file = tmp_path / "results" / "by-script" / "taospec.exit"
    wait_for(exit_file.exists)
    assert seen.read_text().strip(), "the stand-ins did not run"
    assert value not in seen.read_text()
    by_script = (tmp_path / "results" / "by-script" / "taospec.log").read_text()

    def variables(log: str, job: str) -> dict[str, str]:
        pairs = (line.partition("=") for line in log.replace(job, "ID").splitlines())
        return {name: text for name, _, text in pairs if name != "PATH"}

    assert f"PLAIN_VAR={value}\n" in by_script
    assert variables(by_script, "by-script") == variables(by_run, job_id)


def test_a_job_whose_leader_was_killed_runs_while_its_group_does(
    taospec: Runner, tmp_path, state_dir
) -> None:
    # status asked the group's leader (the wrapper shell) only: with it killed, the job was
    # recorded ERROR "disappeared" while its command ran on, and cancel then left it running
    spec = job_file(tmp_path, "sh -c 'echo hi; sleep 300'")
    started = taospec("run", "--detach", spec)
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.split()[0]
    wait_for(lambda: len(_group_of(job_id)) >= 3)
    leader = int(record(state_dir, job_id)["backend_ref"][4:])
    os.kill(leader, signal.SIGKILL)
    wait_for(lambda: leader not in _group_of(job_id))
    rest = _group_of(job_id)
    assert rest
    shown = taospec("status", job_id)
    assert shown.stdout.split()[1] == "RUNNING", shown.stdout
    assert "leader" in shown.stdout
    assert record(state_dir, job_id)["terminal_state"] is None
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "CANCELED" in cancelled.stdout
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in rest), timeout=5)


def test_a_job_whose_leader_was_killed_ends_when_its_group_does(
    taospec: Runner, tmp_path, state_dir
) -> None:
    spec = job_file(tmp_path, "sh -c 'echo hi; sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.split()[0]
    wait_for(lambda: len(_group_of(job_id)) >= 3)
    leader = int(record(state_dir, job_id)["backend_ref"][4:])
    os.kill(leader, signal.SIGKILL)
    wait_for(lambda: leader not in _group_of(job_id))
    assert taospec("status", job_id).stdout.split()[1] == "RUNNING"
    for pid in _group_of(job_id):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _group_of(job_id))
    shown = taospec("status", job_id)
    assert shown.stdout.split()[1:3] == ["ERROR", "ERR_INFRA"], shown.stdout
    assert "left no exit code" in shown.stdout


def test_a_command_that_ended_ends_its_job_whatever_it_left_running(
    taospec: Runner, tmp_path, state_dir
) -> None:
    # the wrapper wrote the command's exit code and left; a process the command started in
    # the background lives on in the group, and must not keep the job RUNNING
    spec = job_file(tmp_path, "sh -c 'sleep 300 >/dev/null 2>&1 & echo started'")
    ran = taospec("run", spec)
    assert ran.returncode == 0, ran.stderr
    job_id = ran.stdout.split()[0]
    assert record(state_dir, job_id)["terminal_state"] == "COMPLETE"
    left = _group_of(job_id)
    assert left, "the background process should still run"
    for pid in left:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("gone", ["removed", "results_root a file", "log removed"])
def test_logs_of_a_job_whose_results_are_gone_says_so_and_exits_2(
    gone: str, taospec: Runner, tmp_path, state_dir
) -> None:
    """Its log cannot be read because its results are gone, which is no failure of the job
    (exit 1) nor of taospec (3): what logs needs is not there (2), as for an engine that does
    not answer. It printed "(no log yet …)" and exited 0."""
    done = taospec("run", job_file(tmp_path, "echo hello"))
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    results = tmp_path / "results"
    assert taospec("logs", job_id).stdout == "hello\n"
    before = [p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())]
    if gone == "log removed":
        (results / job_id / "taospec.log").unlink()
        why = f"{results / job_id / 'taospec.log'} is gone"
    else:
        subprocess.run(["rm", "-r", str(results)], check=True)
        why = f"its results directory {results / job_id} is gone"
        if gone == "results_root a file":
            results.write_text("not a directory\n")
            why = f"{results} is a file now, not a directory"
    logs = taospec("logs", job_id)
    assert (logs.returncode, logs.stdout) == (2, ""), logs.stderr
    assert logs.stderr == (
        f"taospec: cannot read the output of {job_id}: {why} (removed or replaced since the "
        "job ran); the job's record is unchanged (COMPLETE)\n"
    )
    assert [p.read_bytes() for p in sorted((state_dir / "jobs").iterdir())] == before


def test_logs_of_a_job_not_launched_yet_says_there_is_no_log_yet(taospec: Runner, tmp_path):
    fields = {"platform": "local", "image": "x", "network-arch": "a", "action": "b",
              "storage-tier": "A", "results-root": str(tmp_path / "results")}  # fmt: skip
    job_id = taospec("record", "open", *(f"--{k}={v}" for k, v in fields.items())).stdout.strip()
    logs = taospec("logs", job_id)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.startswith("(no log yet at ")


def _recorded_error(done: subprocess.CompletedProcess[str], state_dir: Path) -> dict:
    """The one record of a run whose launch failed: ERROR, and said without a traceback."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    (name,) = [p.stem for p in (state_dir / "jobs").glob("*.json")]
    rec = record(state_dir, name)
    assert rec["terminal_state"] == "ERROR"
    return rec


def test_a_command_its_own_path_does_not_find_is_recorded_error(
    taospec: Runner, tmp_path, state_dir
):
    # env.set PATH is the job's own: the wrapper starts, and its command is not found there
    spec = job_file(tmp_path, "sh -c 'echo hi'", env="{set: {PATH: /nonexistent}}")
    done = taospec("run", spec)
    rec = _recorded_error(done, state_dir)
    assert rec["err_class"] == "ERR_PROGRAM"
    assert rec["transitions"][-1]["message"].startswith("process exited with code 127; ")
    assert "the job's command cannot be started" in done.stderr
    log = tmp_path / "results" / rec["id"] / "taospec.log"
    assert "not found" in log.read_text()  # dash and bash word the rest apart


def test_a_launch_whose_argument_the_kernel_refuses_is_recorded_error(
    taospec: Runner, tmp_path, state_dir
):
    # the job file's own words stay under what validate lets them take (some 1.7 MB of results
    # directories); the values env.pass copies from this machine bring the whole past what the
    # kernel takes (2 MiB here): a fact of the machine, found at the launch
    root = tmp_path.joinpath(*["d" * 200] * 15)
    words = " ".join(["{results_dir}" * 38] * 15)
    spec = job_file(tmp_path, f"sh -c 'echo hi' {words}", env="{pass: [BIG1, BIG2, BIG3]}")
    spec.write_text(spec.read_text().replace(str(tmp_path / "results"), str(root)))
    assert taospec("validate", spec).returncode == 0
    done = taospec("run", spec, env={f"BIG{n}": "v" * 120_000 for n in (1, 2, 3)})
    rec = _recorded_error(done, state_dir)
    assert "Argument list too long" in rec["transitions"][-1]["message"]
    # the command's first word is fine: the advice is about the lengths the kernel takes
    assert "the kernel takes no argument or environment this long" in done.stderr
    assert "first word" not in done.stderr


def test_words_each_under_the_limit_but_past_it_together_are_refused_at_the_command(
    taospec: Runner, tmp_path, state_dir
):
    # each word is under the kernel's limit for one, together they pass its limit for all
    # (2 MiB): validate passed 800 results directories of some 3,000 bytes, and the launch
    # failed with E2BIG
    root = tmp_path.joinpath(*["d" * 200] * 15)
    words = " ".join(["{results_dir}" * 40] * 20)
    spec = job_file(tmp_path, f"sh -c 'echo hi' {words}")
    spec.write_text(spec.read_text().replace(str(tmp_path / "results"), str(root)))
    refused_by_validate_and_run(
        taospec, spec, f"{spec}:7:10: $.command: the command's words", "bytes too many"
    )
    assert not (state_dir / "jobs").exists()
    assert not root.exists()
    # env.set's entries count with the words: each of these passes alone
    half = " ".join(["{results_dir}" * 40] * 10)
    value = "{results_dir}" * 40
    spec = job_file(
        tmp_path,
        f"sh -c 'echo hi' {half}",
        env="{set: {" + ", ".join(f"V{n}: '{value}'" for n in range(10)) + "}}",
    )
    spec.write_text(spec.read_text().replace(str(tmp_path / "results"), str(root)))
    done = taospec("validate", spec)
    assert done.returncode == 2, done.stderr
    assert f"{spec}:7:10: $.command: the command's words" in done.stderr


def test_an_argument_longer_than_the_kernel_takes_is_refused_at_its_line(
    taospec: Runner, tmp_path, state_dir
):
    long = "x" * 131072
    spec = job_file(
        tmp_path,
        f"sh -c 'echo $0' {long}",
        env=f"{{set: {{FOO: '{long[:131068]}'}}}}",  # FOO=... and its NUL: one byte over
        spec=f"{{text: '{long}'}}",  # the spec file is no argument: as long as it likes
    )
    said = refused_by_validate_and_run(
        taospec,
        spec,
        f"{spec}:7:10: $.command: one argument is 131072 bytes",
        f"{spec}:8:18: $.env.set.FOO: FOO=... is 131072 bytes",
    )
    assert all("$.spec" not in text for text in said)
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "results").exists()


def test_a_long_word_of_a_listed_or_matrix_filled_command_is_refused_at_its_line(
    taospec: Runner, tmp_path, state_dir
):
    long = "x" * 131072
    listed = job_file(tmp_path, "unused")
    listed.write_text(listed.read_text().replace('"unused"', f"[sh, -c, 'echo $0', {long}]"))
    half = long[: len(long) // 2]
    swept = sweep_file(tmp_path, f"{{v: [{half}]}}", f"\"sh -c 'echo $0' {half}{{matrix.v}}\"")
    for spec, where in ((listed, "7:30: $.command[3]"), (swept, "7:14: $.jobs.a.command")):
        refused_by_validate_and_run(taospec, spec, f"{spec}:{where}: one argument is 131072 bytes")
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "results").exists()


def test_an_escaped_brace_counts_as_the_one_byte_it_runs_as(taospec: Runner, tmp_path):
    # '{{' is one brace once filled: a word of the longest length the kernel takes, written
    # with escapes, was refused by validate as if each escape were two bytes
    word = "{{" * 8 + "x" * (131071 - 8)
    spec = job_file(
        tmp_path,
        f'sh -c \'printf %s "$0" | wc -c; printf %s "$FOO" | wc -c\' {word}',
        env=f"{{set: {{FOO: '{word[: -len('FOO=')]}'}}}}",
    )
    checked = taospec("validate", spec)
    assert checked.returncode == 0, checked.stderr
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    log = next((tmp_path / "results").glob("*/taospec.log")).read_text()
    assert log.split() == ["131071", "131067"]
    # a matrix value goes in with its braces doubled, and runs with them single
    swept = sweep_file(tmp_path, "{v: ['{ab}']}", f'"echo {"x" * (131071 - 4)}{{matrix.v}}"')
    checked = taospec("validate", swept)
    assert checked.returncode == 0, checked.stderr


def test_a_placeholder_that_fills_a_word_past_the_kernels_limit_is_refused_at_its_line(
    taospec: Runner, tmp_path, state_dir
):
    # validate passed a word that only its placeholder made too long: the launch failed
    # with E2BIG and the run recorded ERROR
    root = tmp_path / ("r" * 200)
    one_id = len("hello-greet-123456")
    under = "x" * (131071 - len("FOO=") - one_id) + "{job_id}"  # the longest FOO takes
    over = "x" + under
    many = "{results_dir}" * (131072 // (len(str(root)) + 1 + one_id) + 1)  # short as written
    spec = job_file(
        tmp_path,
        f"sh -c 'echo $0' {many}",
        env=f"{{set: {{FOO: '{over}', BAR: '{under[1:]}'}}}}",
    )
    spec.write_text(spec.read_text().replace(str(tmp_path / "results"), str(root)))
    said = refused_by_validate_and_run(
        taospec,
        spec,
        f"{spec}:7:10: $.command: one argument is ",
        f"{spec}:8:18: $.env.set.FOO: FOO=... is 131072 bytes once",
        "each job id counted at the most characters taospec mints for its job: 18",
    )
    assert all("$.env.set.BAR" not in text for text in said)
    assert not (state_dir / "jobs").exists()
    assert not root.exists()


def test_an_upstreams_results_dir_that_fills_a_word_past_the_limit_is_refused(
    taospec: Runner, tmp_path, state_dir
):
    root = tmp_path / ("u" * 200)
    upstream = len(f"{root}/hello-prep-123456")
    word = "x" * (131072 - upstream) + "{needs.prep.results_dir}"
    spec = write(
        tmp_path / "pipe.yaml",
        "version: 1\n"
        "defaults: {network_arch: hello, platform: local, image: busybox:1,\n"
        f"  results_root: {tmp_path / 'results'}}}\n"
        "jobs:\n"
        f"  prep: {{action: prep, command: 'true', results_root: {root}}}\n"
        f'  use: {{action: use, needs: [prep], command: "echo {word}"}}\n',
    )
    refused_by_validate_and_run(
        taospec, spec, f"{spec}:6:46: $.jobs.use.command: one argument is 131072 bytes once"
    )
    assert not (state_dir / "jobs").exists()


def test_a_placeholder_shorter_than_its_name_leaves_a_long_word_valid(taospec: Runner, tmp_path):
    # in a container {results_dir} is /results: the word runs 5 bytes shorter than written
    word = "x" * (131071 - len("/results")) + "{results_dir}"
    spec = job_file(tmp_path, f"echo {word}", user='"1000:1000"')
    spec.write_text(spec.read_text().replace("platform: local", "platform: docker"))
    done = taospec("validate", spec)
    assert done.returncode == 0, done.stderr


SPARSE_LOG = 4 << 30
"""How large a log the tails below read the end of: a sparse file, with no line end in it."""


def test_the_tail_of_a_huge_log_reads_its_end_alone(taospec: Runner, tmp_path) -> None:
    # logs --tail N read the whole log file to keep its last N lines: a training run's
    # log of gigabytes was read (and held) whole to print a few lines
    spec = job_file(tmp_path, "sh -c 'echo early'")
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    log = tmp_path / "results" / job_id / "taospec.log"
    os.truncate(log, SPARSE_LOG)
    with log.open("ab") as more:
        more.write("\nline-1\nline-2 ünïcode\nline-3 no end".encode())
    looked, read = run_counting_reads(taospec, "logs", job_id, "--tail", "2")
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout == "line-2 ünïcode\nline-3 no end"
    assert read < 1 << 25, read  # some MiB: Python and taospec themselves
    assert taospec("logs", job_id, "--tail", "0").stdout == ""
    assert taospec("logs", job_id, "--tail", "3").stdout == "line-1\n" + looked.stdout
    for tail in ("0", "1", "2", "3"):  # ended, the last line not ended is one of the last
        followed = taospec("logs", job_id, "--tail", tail, "-f").stdout
        assert followed == taospec("logs", job_id, "--tail", tail).stdout, tail


def test_following_the_tail_of_a_huge_log_reads_its_end_alone(taospec: Runner, tmp_path) -> None:
    # logs -f --tail N read the whole log file before it began to follow it
    go = tmp_path / "go"
    spec = job_file(
        tmp_path,
        f"sh -c 'echo early; truncate -s {SPARSE_LOG} {{results_dir}}/taospec.log; echo; "
        f"echo line-1; echo line-2; until [ -e {go} ]; do sleep 0.1; done; echo line-3'",
    )
    started = taospec("run", "--detach", spec)
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.strip()
    log = tmp_path / "results" / job_id / "taospec.log"
    wait_for(lambda: log.exists() and log.stat().st_size > SPARSE_LOG)
    wait_for(lambda: _ends(log, b"line-2\n"))
    with subprocess.Popen(
        [*taospec_command(), "logs", "-f", "--tail", "2", job_id],
        stdout=subprocess.PIPE,
        text=True,
        env=taospec.env,
        cwd=taospec.cwd,
    ) as follow:
        assert follow.stdout is not None
        shown = [follow.stdout.readline(), follow.stdout.readline()]
        io = Path(f"/proc/{follow.pid}/io").read_text()  # while it follows the job
        go.touch()
        rest = follow.stdout.read()
        assert follow.wait(timeout=60) == 0
    assert shown == ["line-1\n", "line-2\n"]
    assert rest == "line-3\n"
    read = int(next(line.split()[1] for line in io.splitlines() if line.startswith("rchar:")))
    assert read < 1 << 25, read  # some MiB: Python and taospec themselves


def _ends(path: Path, text: bytes) -> bool:
    with path.open("rb") as file:
        file.seek(-len(text), os.SEEK_END)
        return file.read() == text


def test_a_look_into_a_pipe_shows_what_a_follow_shows_a_line_at_a_time(
    taospec: Runner, tmp_path: Path
) -> None:
    # a look into a pipe redacts its output a block at a time; a follow, a line at a time
    bar = "Epoch 1:  50%|\u2588\u2588\u2588\u2588\u2588     | 256/512 [00:31<00:31, 8.2it/s]"
    script = write(
        tmp_path / "train.sh",
        f"i=0; while [ $i -lt 3000 ]; do echo '{bar}'; i=$((i+1)); done\n"
        "echo 'NGC_API_KEY=nvapi-AbCdEf0123456789AbCdEf0123'\n"
        f"i=0; while [ $i -lt 3000 ]; do printf '%s\\r' '{bar}'; i=$((i+1)); done; echo\n"
        'echo "weights ghp_AbCdEfGhIjKlMnOpQrSt0123 loaded"\n',
    )
    started = taospec("run", "--detach", job_file(tmp_path, f"sh {script}"))
    job_id = started.stdout.strip()
    wait_for(lambda: taospec("status", job_id).stdout.split()[1] == "COMPLETE")
    looked, followed = taospec("logs", job_id), taospec("logs", "-f", job_id)
    assert looked.returncode == followed.returncode == 0, looked.stderr + followed.stderr
    assert looked.stdout == followed.stdout
    assert looked.stdout.count(bar) == 6000
    assert "nvapi-" not in looked.stdout
    assert "ghp_" not in looked.stdout
    assert looked.stdout.count("<redacted>") == 2


def test_a_job_file_whose_path_is_not_utf8_runs_checks_and_graphs(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # a target's key on disk is a digest of its file's path, which ended in a traceback
    # (exit 3) for bytes that are no UTF-8, after the record opened and before the launch
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/d\xffx"))
    folder.mkdir()
    spec = job_file(tmp_path, "sh -c 'echo ran'").rename(folder / os.fsdecode(b"x\xff.yaml"))
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == "COMPLETE"
    assert record(state_dir, job_id)["terminal_state"] == "COMPLETE"
    checked = taospec("run", "--check", spec)
    assert checked.returncode == 0, checked.stderr
    planned = taospec("run", "-n", spec)
    assert (planned.returncode, planned.stderr) == (0, "")
    assert f"up to date (job {job_id})" in planned.stdout
    graphed = taospec("graph", spec)
    assert (graphed.returncode, graphed.stderr) == (0, "")
    assert "up to date" in graphed.stdout
