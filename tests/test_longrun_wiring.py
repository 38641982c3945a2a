"""The long-run pieces wired into the verbs, for real: progress lines when stderr is not a
terminal, classified failures in status and show, ``logs -f`` exit codes, ``notify:``,
and ``doctor`` (with ``run``'s preflight) on this machine's docker engine."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from taospec import settings
from taospec.plan import plan_from_json
from tests.conftest import Runner, taospec_command, write
from tests.test_local_jobs import job_file

# One status.json line per second: epoch 1..4 with a falling loss, then a normal end.
TRAINER = """\
import json, sys, time
for epoch in range(1, 5):
    with open(sys.argv[1] + "/status.json", "a") as out:
        loss = 0.9 - epoch / 10
        event = {"status": "RUNNING", "epoch": epoch, "max_epoch": 4, "kpi": {"loss": loss}}
        out.write(json.dumps(event) + "\\n")
    time.sleep(1)
"""
PROGRESS_LINE = re.compile(r"^\S+ \S+  RUNNING  \d+s  epoch [1-4]/4  loss=0\.[5-8]$", re.M)


def test_piped_run_prints_a_progress_line_per_interval_and_a_summary(
    taospec: Runner, tmp_path: Path
) -> None:
    trainer = write(tmp_path / "trainer.py", TRAINER)
    spec = job_file(tmp_path, f"python3 {trainer} {{results_dir}}")
    done = taospec("run", spec, env={"TAOSPEC_PROGRESS_INTERVAL": "1"})
    assert done.returncode == 0, done.stderr
    job_id, state = done.stdout.split()
    assert state == "COMPLETE"
    lines = PROGRESS_LINE.findall(done.stderr)
    assert len(lines) >= 2, done.stderr
    assert all(line.startswith(f"job {job_id}  RUNNING") for line in lines)
    assert "\x1b[" not in done.stderr  # no cursor movement when not a terminal
    results = tmp_path / "results" / job_id
    assert "job: COMPLETE in " in done.stderr
    assert f"results {results}" in done.stderr
    status = taospec("status", job_id)
    assert status.stdout.splitlines()[1] == "  progress: epoch 4/4  loss=0.5"
    shown = json.loads(taospec("show", job_id).stdout)
    assert shown["progress"]["epoch"] == 4
    assert shown["progress"]["kpi"] == {"loss": 0.5}


def test_without_status_json_the_progress_line_is_the_last_output_line(
    taospec: Runner, tmp_path: Path
) -> None:
    spec = job_file(tmp_path, "sh -c 'for i in 1 2 3; do echo step-$i of 3; sleep 1; done'")
    done = taospec("run", spec, env={"TAOSPEC_PROGRESS_INTERVAL": "1"})
    assert done.returncode == 0, done.stderr
    assert re.search(r"^job \S+  RUNNING  \d+s  step-[1-3] of 3$", done.stderr, re.M), done.stderr


@pytest.mark.parametrize("name", sorted(settings.SECONDS))
def test_a_setting_that_is_not_seconds_refuses_the_run_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path, name: str
) -> None:
    # Each used to be read where it is used; three of them at import, where "soon" was a
    # traceback (exit 3), one halfway through a build, after its record was opened.
    spec = job_file(tmp_path, "true")
    for argv in (("run", spec), ("ls",)):
        done = taospec(*argv, env={name: "soon"})
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"taospec: {name}='soon': give the seconds "), done.stderr
        assert "Traceback" not in done.stderr
    assert not (state_dir / "jobs").exists()
    helped = taospec("run", "--help", env={name: "soon"})  # help is no verb: it still shows
    assert (helped.returncode, helped.stdout.split(" ", 2)[:2]) == (0, ["Usage:", "taospec"])


def test_a_failure_is_classified_in_run_status_and_show(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(
        tmp_path,
        "python3 -c 'raise ValueError(\"bad label map\")'",
    )
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id, state = done.stdout.split()
    assert state == "ERROR"
    summary = [line for line in done.stderr.splitlines() if line.startswith("job: ERROR ERR_")]
    assert len(summary) == 1, done.stderr
    assert "ERR_PROGRAM" in summary[0]
    assert "the program raised ValueError: bad label map" in summary[0]
    assert summary[0].endswith(f"taospec logs {job_id}")
    assert taospec("status", job_id).stdout.split()[1:3] == ["ERROR", "ERR_PROGRAM"]
    assert json.loads(taospec("status", job_id, "--json").stdout)["err_class"] == "ERR_PROGRAM"
    shown = json.loads(taospec("show", job_id).stdout)
    assert (shown["terminal_state"], shown["err_class"]) == ("ERROR", "ERR_PROGRAM")


def test_a_job_killed_from_outside_is_infrastructure(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "sh -c 'kill -TERM $$'")
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id = done.stdout.split()[0]
    assert taospec("status", job_id).stdout.split()[1:3] == ["ERROR", "ERR_INFRA"]


def test_logs_follow_exits_0_for_complete_and_1_for_error(taospec: Runner, tmp_path: Path) -> None:
    good = job_file(tmp_path, "sh -c 'sleep 1; echo fine'")
    job_id = taospec("run", "--detach", good).stdout.strip()
    followed = taospec("logs", "-f", job_id)
    assert (followed.returncode, followed.stdout) == (0, "fine\n"), followed.stderr

    bad = job_file(tmp_path, "sh -c 'sleep 1; echo broken; exit 4'")
    job_id = taospec("run", "--detach", bad).stdout.strip()
    followed = taospec("logs", "-f", job_id)
    assert (followed.returncode, followed.stdout) == (1, "broken\n")
    assert f"{job_id} ended ERROR (ERR_PROGRAM)" in followed.stderr
    assert taospec("logs", job_id).returncode == 0  # without -f, reading is success


def test_logs_follow_exits_1_for_a_canceled_job(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "sh -c 'echo started; exec sleep 300'")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    assert taospec("cancel", job_id).returncode == 0
    followed = taospec("logs", "-f", job_id)
    assert followed.returncode == 1
    assert f"{job_id} ended CANCELED" in followed.stderr


def test_notify_runs_once_with_the_outcome_in_its_environment(
    taospec: Runner, tmp_path: Path
) -> None:
    seen = tmp_path / "notified.env"
    spec = job_file(
        tmp_path,
        "sh -c 'exit 5'",
        notify=json.dumps(f"env | grep ^TAOSPEC_ | sort >> {seen}; echo --- >> {seen}"),
    )
    rendered = taospec("render", spec)
    note = "# Note: notify: when the job ends, the taospec run or retry following it runs sh -c"
    assert note in rendered.stdout
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id = done.stdout.split()[0]
    text = seen.read_text()
    assert text.count("---") == 1
    variables = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert variables["TAOSPEC_JOB_ID"] == job_id
    assert variables["TAOSPEC_STATE"] == "ERROR"
    assert variables["TAOSPEC_ERR_CLASS"] == "ERR_PROGRAM"
    assert variables["TAOSPEC_RESULTS_DIR"] == str(tmp_path / "results" / job_id)
    assert variables["TAOSPEC_DURATION"].isdigit()


def test_a_failing_notifier_is_reported_and_changes_nothing(
    taospec: Runner, tmp_path: Path
) -> None:
    spec = job_file(tmp_path, "true", notify='["sh", "-c", "echo no pager >&2; exit 9"]')
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "COMPLETE"
    assert "failed (exit 9)" in done.stderr
    assert "no pager" in done.stderr


def test_a_notifier_carrying_a_secret_is_refused(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "true", notify='["curl", "--password", "hunter2", "https://x"]')
    done = taospec("run", spec)
    assert done.returncode == 2
    assert ": $.notify: holds what looks like a credential (--password, secret flag)" in done.stderr
    assert "hunter2" not in done.stderr


def test_a_notifier_from_the_environment_carrying_a_secret_is_refused_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # $TAOSPEC_NOTIFY runs under sh -c, as a string notify: does: its words are argv.
    spec = job_file(tmp_path, "true")
    done = taospec("run", spec, env={"TAOSPEC_NOTIFY": "curl --password hunter2 https://x"})
    assert done.returncode == 2
    assert done.stderr.startswith("taospec: TAOSPEC_NOTIFY would carry inline secrets")
    assert "TAOSPEC_NOTIFY: line 1: an inline secret value is given to --password;" in done.stderr
    assert "hunter2" not in done.stderr
    assert not (state_dir / "jobs").exists()


@pytest.mark.parametrize("written", ["{v}", "'{v}'", "{a}''{b}", "$(printf %s {a}\\{b})"])
def test_a_notifier_from_the_environment_writing_a_passed_value_is_refused_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path, written: str
) -> None:
    # no rule knows the value by its form, but it would be the notifier's argv (sh -c ...),
    # as it would be in notify:, which is refused for it
    value = "Vq3Lm8Tz5Rx"
    seen = tmp_path / "notified"
    spec = job_file(tmp_path, "true", env="{pass: [PLAIN_VAR]}")
    command = f"echo {written.format(v=value, a=value[:5], b=value[5:])} > {seen}"
    done = taospec("run", spec, env={"TAOSPEC_NOTIFY": command, "PLAIN_VAR": value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("taospec: TAOSPEC_NOTIFY holds the value of PLAIN_VAR"), (
        done.stderr
    )
    assert value not in done.stderr + done.stdout
    assert not seen.exists()
    assert not (state_dir / "jobs").exists()


def test_a_notifier_from_the_environment_runs_under_a_shell(
    taospec: Runner, tmp_path: Path
) -> None:
    """As the README's notify: example does, with a redirection."""
    spec = job_file(tmp_path, "true")
    ended = tmp_path / "ended.txt"
    command = f'echo "$TAOSPEC_JOB_ID $TAOSPEC_STATE" >> {ended}'
    done = taospec("run", spec, env={"TAOSPEC_NOTIFY": command})
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert ended.read_text() == f"{job_id} COMPLETE\n"


def test_the_review_shows_the_notifier_from_the_environment_and_run_runs_that_one(
    taospec: Runner, tmp_path: Path
) -> None:
    # $TAOSPEC_NOTIFY ran after run, but neither render nor run -n showed it
    spec = job_file(tmp_path, "true")
    ended = tmp_path / "ended.txt"
    command = f'echo "$TAOSPEC_STATE after ${{TAOSPEC_DURATION}}s" >> {ended}'
    env = {"TAOSPEC_NOTIFY": command}
    note = (
        f"# Note: notify: when the job ends, the taospec run or retry following it runs sh -c "
        f"'echo \"$TAOSPEC_STATE after ${{TAOSPEC_DURATION}}s\" >> {ended}' here ($TAOSPEC_NOTIFY)"
    )
    for review in (("render", spec), ("run", "-n", spec)):
        shown = taospec(*review, env=env)
        assert shown.returncode == 0, shown.stderr
        assert note in shown.stdout
    as_json = json.loads(taospec("render", "--format", "json", spec, env=env).stdout)
    assert plan_from_json(as_json).notifier == ("sh", "-c", command)
    assert not ended.exists()
    done = taospec("run", spec, env=env)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert re.fullmatch(r"COMPLETE after \d+s\n", ended.read_text())
    assert note in taospec("show", "--plan", job_id).stdout  # what ran is what was shown
    # a job's own notify: is the one shown, and the one run
    own = tmp_path / "own.txt"
    spec = job_file(tmp_path, "true", notify=json.dumps(f"echo own >> {own}"))
    shown = taospec("render", spec, env=env)
    assert f"following it runs sh -c 'echo own >> {own}' here\n" in shown.stdout
    assert "TAOSPEC_NOTIFY" not in shown.stdout
    assert taospec("run", "-B", spec, env=env).returncode == 0
    assert own.read_text() == "own\n"
    assert ended.read_text().count("COMPLETE") == 1


def test_a_review_refuses_a_notifier_from_the_environment_as_run_does(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    value = "Vq3Lm8Tz5Rx"
    spec = job_file(tmp_path, "true", env="{pass: [PLAIN_VAR]}")
    env = {"TAOSPEC_NOTIFY": f"echo {value}", "PLAIN_VAR": value}
    for review in (("render", spec), ("run", "-n", spec)):
        refused = taospec(*review, env=env)
        assert refused.returncode == 2, refused.stdout
        assert "TAOSPEC_NOTIFY holds the value of PLAIN_VAR" in refused.stderr
        assert value not in refused.stdout + refused.stderr
        secret = taospec(*review, env={"TAOSPEC_NOTIFY": "curl --password hunter2 https://x"})
        assert secret.returncode == 2
        assert "TAOSPEC_NOTIFY would carry inline secrets" in secret.stderr
        assert "hunter2" not in secret.stdout + secret.stderr
    assert not (state_dir / "jobs").exists()


def test_a_notifier_that_queues_work_in_the_background_does_not_hold_run(
    taospec: Runner, tmp_path: Path
) -> None:
    # notify: 'sleep 45 & echo queued' kept run 45 s: the sleep held the notifier's pipes
    pid_file = tmp_path / "pid"
    spec = job_file(tmp_path, "true", notify=json.dumps(f"sleep 60 & echo $! > {pid_file}"))
    try:
        done = taospec("run", spec, timeout=45)  # raises when run is still waiting
        assert done.returncode == 0, done.stderr
        assert "job: notifier" not in done.stderr
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_notify_is_allowed_under_pipeline_defaults(taospec: Runner, tmp_path: Path) -> None:
    seen = tmp_path / "states"
    spec = write(
        tmp_path / "pipe.yaml",
        f"""version: 1
defaults:
  network_arch: hello
  action: greet
  platform: local
  image: busybox:1
  results_root: {tmp_path / "results"}
  notify: 'echo "$TAOSPEC_STATE" >> {seen}'
jobs:
  first:
    command: "true"
  second:
    needs: [first]
    command: "true"
""",
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    assert seen.read_text() == "COMPLETE\nCOMPLETE\n"


def test_doctor_without_a_file_checks_the_local_engine(taospec: Runner) -> None:
    done = taospec("doctor")
    assert done.returncode == 0, done.stdout
    assert re.search(r"^ok    docker engine: version \d+\.\d+", done.stdout, re.M)
    assert re.search(r"^ok    NVIDIA runtime: (not )?registered \(runtimes: ", done.stdout, re.M)
    assert "the job" not in done.stdout  # no job was named


def test_doctor_and_run_refuse_gpus_on_an_engine_without_the_nvidia_runtime(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = write(
        tmp_path / "gpu.yaml",
        f"""version: 1
network_arch: hello
action: greet
platform: docker
image: busybox:1
gpus: [0]
user: "1000:1000"
results_root: {tmp_path / "results"}
command: "true"
""",
    )
    doctor = taospec("doctor", spec)
    assert doctor.returncode == 1
    assert "FAIL  NVIDIA runtime: not registered with the engine" in doctor.stdout
    assert "nvidia-ctk runtime configure" in doctor.stdout
    done = taospec("run", spec)
    assert done.returncode == 2
    assert "preflight: NVIDIA runtime: not registered" in done.stderr
    assert not (state_dir / "jobs").exists() or not list((state_dir / "jobs").iterdir())
    assert not (tmp_path / "results").exists()


def test_doctor_passes_a_docker_job_without_gpus(taospec: Runner, tmp_path: Path) -> None:
    spec = write(
        tmp_path / "cpu.yaml",
        f"""version: 1
network_arch: hello
action: greet
platform: docker
image: busybox:1
user: "1000:1000"
results_root: {tmp_path / "results"}
command: "true"
""",
    )
    done = taospec("doctor", spec)
    assert done.returncode == 0, done.stdout
    assert "ok    GPUs: not needed" in done.stdout
    assert "ok    NGC login: not needed" in done.stdout


HALF_A_VALUE = """\
import os, sys, time
value = os.environ["PLAIN_VAR"]
os.write(1, ("first\\n" + value[:8]).encode())
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
os.write(1, (value[8:] + "\\n").encode())
"""
"""A job that writes a line and, in the same write, the first part of its passed value,
then once the file its argument names exists, the rest."""


def test_a_progress_line_shows_no_part_of_a_value_being_written(
    taospec: Runner, tmp_path: Path
) -> None:
    # the progress line showed the running job's last line as its log ended, not yet
    # ended: the first part of a passed value the job was still writing, which redaction
    # does not know
    gate = tmp_path / "gate"
    script = write(tmp_path / "half.py", HALF_A_VALUE)
    spec = job_file(tmp_path, f"python3 {script} {gate}", env="{pass: [PLAIN_VAR]}")
    env = {
        **taospec.env,
        "PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X",
        "TAOSPEC_PROGRESS_INTERVAL": "0.1",
    }
    running = subprocess.Popen(
        [*taospec_command(), "run", str(spec)],
        env=env,
        cwd=taospec.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert running.stderr is not None
    seen = []
    for line in running.stderr:  # until a progress line says what the job wrote
        seen.append(line)
        if re.match(r"\S+ \S+  RUNNING  \d+s  \S", line):
            break
    gate.touch()
    out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    assert seen[-1].endswith("  first\n"), seen
    assert "Zq8" not in "".join(seen) + out + err
