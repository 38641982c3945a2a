"""Behaviour tests for the brev CLI emulator in tests/fakes/brev.

Every test runs the emulator as a real subprocess against a state file in
tmp_path, with stdin from /dev/null unless the test is about stdin.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

BREV = Path(__file__).resolve().parent / "fakes" / "brev"
CONNECTION_FAILED = "Connection failed, checking instance status..."


class Brev:
    """Runs the emulator with a private state file and HOME."""

    def __init__(self, tmp_path: Path) -> None:
        self.state_path = tmp_path / "state.json"
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "BREV_EMULATOR_STATE": str(self.state_path),
        }

    def run(
        self,
        *args: str,
        stdin: Any = subprocess.DEVNULL,
        input_text: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        if input_text is not None:
            return subprocess.run(
                [str(BREV), *args],
                input=input_text,
                capture_output=True,
                text=True,
                env=env,
                check=False,
                timeout=60,
            )
        return subprocess.run(
            [str(BREV), *args],
            stdin=stdin,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )

    def add(self, name: str, *flags: str) -> str:
        result = self.run("_emulator", "add", name, *flags)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def login(self) -> None:
        result = self.run("login", "--token", "tok-for-tests")
        assert result.returncode == 0, result.stderr

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state_path.read_text(encoding="utf-8"))
        return data

    def runs(self) -> list[tuple[str, str, int, int]]:
        return [
            (entry["instance"], entry["command"], entry["exit_code"], entry["attempt"])
            for entry in self.state()["exec_log"]
        ]


@pytest.fixture
def brev(tmp_path: Path) -> Brev:
    return Brev(tmp_path)


@pytest.fixture
def box(brev: Brev) -> Brev:
    """Logged in, with one RUNNING instance called box."""
    brev.login()
    brev.add("box")
    return brev


# --- state and the _emulator helper ------------------------------------------


def test_state_variable_is_required(brev: Brev) -> None:
    env = {k: v for k, v in brev.env.items() if k != "BREV_EMULATOR_STATE"}
    result = subprocess.run(
        [str(BREV), "ls"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1
    assert "BREV_EMULATOR_STATE is not set" in result.stderr
    assert result.stdout == ""


def test_emulator_add_writes_the_documented_state(brev: Brev) -> None:
    instance_id = brev.add(
        "gpu1",
        "--status",
        "STOPPED",
        "--probes-before-ready",
        "2",
        "--env",
        "NGC_KEY=abc",
        "--env",
        "X=a=b",
        "--fail-first-exec",
        "--id",
        "id123",
    )
    assert instance_id == "id123"
    assert brev.state() == {
        "logged_in": False,
        "instances": {
            "gpu1": {
                "id": "id123",
                "status": "STOPPED",
                "probes_before_ready": 2,
                "env": {"NGC_KEY": "abc", "X": "a=b"},
                "fail_first_exec": True,
            }
        },
        "exec_log": [],
    }


def test_emulator_add_defaults_and_random_id(brev: Brev) -> None:
    instance_id = brev.add("plain")
    inst = brev.state()["instances"]["plain"]
    assert len(instance_id) == 9
    assert inst == {
        "id": instance_id,
        "status": "RUNNING",
        "probes_before_ready": 0,
        "env": {},
        "fail_first_exec": False,
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--status", "WEIRD"], "--status must be one of"),
        (["--probes-before-ready", "-1"], "--probes-before-ready wants a whole number"),
        (["--probes-before-ready", "x"], "--probes-before-ready wants a whole number"),
        (["--env", "NOEQUALS"], "--env wants NAME=VALUE"),
        (["--bogus"], "unknown flag: --bogus"),
    ],
)
def test_emulator_add_rejects_bad_input(brev: Brev, flags: list[str], message: str) -> None:
    result = brev.run("_emulator", "add", "box", *flags)
    assert result.returncode == 1
    assert message in result.stderr
    assert not brev.state_path.exists()


def test_emulator_add_refuses_a_duplicate(brev: Brev) -> None:
    brev.add("box")
    result = brev.run("_emulator", "add", "box")
    assert result.returncode == 1
    assert result.stderr.splitlines() == ['instance "box" already exists']


def test_concurrent_execs_are_all_logged(box: Brev) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: box.run("exec", "box", f"echo run{i}"), range(12)))
    assert [r.returncode for r in results] == [0] * 12
    assert sorted(cmd for _, cmd, _, _ in box.runs()) == sorted(f"echo run{i}" for i in range(12))
    assert not list(box.state_path.parent.glob(".state.json.*"))


# --- login ---------------------------------------------------------------------------


def test_commands_need_login(brev: Brev) -> None:
    brev.add("box")
    for args in (
        ["exec", "box", "echo hi"],
        ["ls"],
        ["delete", "box"],
        ["stop", "box"],
        ["start", "box"],
    ):
        result = brev.run(*args)
        assert result.returncode == 1, args
        assert result.stderr.splitlines() == ["not logged in, run brev login"], args
        assert result.stdout == "", args
    assert brev.state()["exec_log"] == []


def test_login_token_is_never_stored_or_printed(brev: Brev) -> None:
    token = "brev-secret-token-9f8e7d"
    result = brev.run("login", "--token", token)
    assert result.returncode == 0
    assert token not in result.stdout + result.stderr
    raw = brev.state_path.read_text(encoding="utf-8")
    assert token not in raw
    assert brev.state()["logged_in"] is True
    assert brev.run("ls", "--json").returncode == 0


def test_login_without_token_fails_and_logout_logs_out(brev: Brev) -> None:
    result = brev.run("login")
    assert result.returncode == 1
    assert "brev login --token <token>" in result.stderr
    brev.login()
    assert brev.run("logout").returncode == 0
    assert brev.state()["logged_in"] is False
    assert brev.run("ls").stderr.splitlines() == ["not logged in, run brev login"]


# --- exec: argument form ---------------------------------------------------------


def test_exec_one_argument_command_runs_and_prints_instance_when_piped(box: Brev) -> None:
    result = box.run("exec", "box", "echo hello world")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["hello world", "box"]
    assert result.stderr == ""
    assert box.runs() == [("box", "echo hello world", 0, 1)]


def test_double_dash_does_not_group_the_command(box: Brev) -> None:
    result = box.run("exec", "box", "--", "docker", "ps")
    assert result.returncode == 1
    assert 'could not look up instance "docker"' in result.stderr
    assert "=== box ===" in result.stderr
    assert "Error on docker:" in result.stderr
    # `ps` (the last word alone) ran on box, then instance "docker" failed.
    assert box.runs() == [("box", "ps", 0, 1)]
    assert result.stdout.splitlines()[-1] == "box"


def test_unquoted_multiword_command_fails_but_one_argument_works(box: Brev) -> None:
    naive = box.run("exec", "box", "echo", "hello")
    assert naive.returncode == 1
    assert 'could not look up instance "echo"' in naive.stderr
    # The lone last word ran (twice: it failed and brev retried) as the command.
    assert box.runs() == [("box", "hello", 127, 1), ("box", "hello", 127, 2)]
    quoted = box.run("exec", "box", "echo hello")
    assert quoted.returncode == 0
    assert quoted.stdout.splitlines() == ["hello", "box"]


def test_dash_instance_name_reaches_ssh_as_an_option(box: Brev) -> None:
    result = box.run("exec", "box", "--", "--rm", "true")
    assert result.returncode == 1
    assert "ssh: illegal option -- -" in result.stderr
    assert 'could not look up instance "--rm"' in result.stderr


def test_exec_without_positionals_is_a_usage_error(box: Brev) -> None:
    result = box.run("exec")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "requires at least 1 arg(s), only received 0"
    assert "brev exec [instance...] <command>" in result.stderr


def test_exec_with_only_a_command_is_a_usage_error(box: Brev) -> None:
    result = box.run("exec", "echo hi")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "instance name required: provide as argument or pipe from another command"
    ]
    assert box.state()["exec_log"] == []


def test_exec_empty_command_is_refused(box: Brev) -> None:
    result = box.run("exec", "box", "")
    assert result.returncode == 1
    assert result.stderr.splitlines() == ["command is required"]


def test_unknown_instance_is_named(box: Brev) -> None:
    result = box.run("exec", "nope", "echo hi")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "ssh: Could not resolve hostname nope: Name or service not known",
        CONNECTION_FAILED,
        'ssh connection failed and could not look up instance "nope": exit status 255',
        "Please check your instances with: brev ls",
    ]
    assert result.stdout == ""


def test_exec_by_id_goes_through_the_retry_path(brev: Brev) -> None:
    brev.login()
    instance_id = brev.add("box", "--id", "abc123xyz")
    result = brev.run("exec", instance_id, "echo via-id")
    assert result.returncode == 0
    assert CONNECTION_FAILED in result.stderr
    assert result.stdout.splitlines() == ["via-id", "abc123xyz"]
    assert brev.runs() == [("box", "echo via-id", 0, 2)]


def test_exec_host_flag_is_accepted(box: Brev) -> None:
    result = box.run("exec", "--host", "box", "echo host")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["host", "box"]


# --- exec: stdin ---------------------------------------------------------------------


def test_piped_stdin_lines_become_instance_names(box: Brev) -> None:
    box.add("x")
    result = box.run("exec", "box", "echo hi", input_text="x\n\n  \n")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["hi", "box", "hi", "x"]
    assert [inst for inst, _, _, _ in box.runs()] == ["box", "x"]


def test_piped_stdin_unknown_line_fails_naming_it(box: Brev) -> None:
    result = box.run("exec", "box", "echo hi", input_text="x\n")
    assert result.returncode == 1
    assert 'could not look up instance "x"' in result.stderr
    assert box.runs() == [("box", "echo hi", 0, 1)]


def test_piped_stdin_supplies_the_only_instance(box: Brev) -> None:
    result = box.run("exec", "echo chained", input_text="box\n")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["chained", "box"]


def test_regular_file_stdin_adds_instances(box: Brev, tmp_path: Path) -> None:
    names = tmp_path / "names.txt"
    names.write_text("ghost\n", encoding="utf-8")
    with names.open(encoding="utf-8") as handle:
        result = box.run("exec", "box", "echo hi", stdin=handle)
    assert result.returncode == 1
    assert 'could not look up instance "ghost"' in result.stderr


def test_dev_null_stdin_adds_nothing(box: Brev) -> None:
    result = box.run("exec", "box", "echo hi", stdin=subprocess.DEVNULL)
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["hi", "box"]
    assert [inst for inst, _, _, _ in box.runs()] == ["box"]


# --- exec: the command ---------------------------------------------------------------


def test_at_file_reads_the_command(box: Brev, tmp_path: Path) -> None:
    script = tmp_path / "setup.sh"
    script.write_text("echo one\necho two\n", encoding="utf-8")
    result = box.run("exec", "box", f"@{script}")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["one", "two", "box"]
    assert box.runs() == [("box", "echo one\necho two\n", 0, 1)]


def test_at_file_missing_fails(box: Brev, tmp_path: Path) -> None:
    missing = tmp_path / "missing.sh"
    result = box.run("exec", "box", f"@{missing}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"open {missing}: no such file or directory"]
    assert box.state()["exec_log"] == []


def test_remote_environment_cwd_and_stdin(brev: Brev) -> None:
    brev.login()
    brev.add("box", "--env", "NGC_KEY=instance-key")
    command = 'echo "key=$NGC_KEY"; echo "local=${LOCAL_ONLY:-unset}"; pwd; wc -c'
    result = brev.run("exec", "box", command, extra_env={"LOCAL_ONLY": "leak"})
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "key=instance-key",
        "local=unset",
        str(brev.home),
        "0",
        "box",
    ]


def test_pass_env_forwards_named_local_variables(box: Brev) -> None:
    result = box.run(
        "exec",
        "box",
        'echo "$FAKE_DOCKER_STATE"',
        extra_env={
            "FAKE_DOCKER_STATE": "/tmp/d.json",
            "BREV_EMULATOR_PASS_ENV": "FAKE_DOCKER_STATE",
        },
    )
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["/tmp/d.json", "box"]


def test_stderr_passes_through(box: Brev) -> None:
    result = box.run("exec", "box", "echo to-err >&2")
    assert result.returncode == 0
    assert result.stderr.splitlines() == ["to-err"]
    assert result.stdout.splitlines() == ["box"]


# --- exec: failure, retry and readiness ----------------------------------------------


def test_failing_command_runs_twice_and_exits_one(box: Brev) -> None:
    result = box.run("exec", "box", "echo attempt; exit 7")
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["attempt", "attempt"]
    assert result.stderr.splitlines() == [CONNECTION_FAILED, "exit status 7"]
    assert box.runs() == [
        ("box", "echo attempt; exit 7", 7, 1),
        ("box", "echo attempt; exit 7", 7, 2),
    ]


def test_fail_first_exec_runs_the_command_once_and_succeeds(brev: Brev) -> None:
    brev.login()
    brev.add("box", "--fail-first-exec")
    result = brev.run("exec", "box", "echo launched")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["launched", "box"]
    assert result.stderr.splitlines() == [
        "ssh: connect to host box port 22: Connection reset by peer",
        CONNECTION_FAILED,
    ]
    assert brev.runs() == [("box", "echo launched", 0, 2)]
    assert brev.state()["instances"]["box"]["fail_first_exec"] is False
    again = brev.run("exec", "box", "echo again")
    assert again.returncode == 0
    assert again.stderr == ""


def test_stopped_instance_is_started_then_runs_once(brev: Brev) -> None:
    brev.login()
    brev.add("box", "--status", "STOPPED")
    result = brev.run("exec", "box", "echo up")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["Instance box is starting. ", "", "up", "box"]
    assert result.stderr.splitlines() == [
        "ssh: connect to host box port 22: Connection refused",
        CONNECTION_FAILED,
    ]
    assert brev.state()["instances"]["box"]["status"] == "RUNNING"
    assert brev.runs() == [("box", "echo up", 0, 2)]


def test_probes_before_ready_fail_n_exec_calls(brev: Brev) -> None:
    brev.login()
    brev.add("box", "--probes-before-ready", "2")
    listed = json.loads(brev.run("ls", "--json").stdout)
    assert listed["workspaces"][0]["status"] == "RUNNING"
    for remaining in (1, 0):
        probe = brev.run("exec", "box", "echo ok")
        assert probe.returncode == 1
        assert probe.stdout == ""
        assert 'could not connect to instance "box"' in probe.stderr
        assert brev.state()["instances"]["box"]["probes_before_ready"] == remaining
    assert brev.state()["exec_log"] == []
    ready = brev.run("exec", "box", "echo ok")
    assert ready.returncode == 0
    assert ready.stdout.splitlines() == ["ok", "box"]
    assert brev.runs() == [("box", "echo ok", 0, 1)]


def test_api_faults_fail_the_next_n_lookups_and_listings(box: Brev) -> None:
    data = box.state()
    data["instances"]["box"]["probes_before_ready"] = 1000  # every ssh attempt fails
    data["api_faults"] = 2
    box.state_path.write_text(json.dumps(data))
    probe = box.run("exec", "box", "echo ok")
    assert probe.returncode == 1
    assert 'ssh connection failed and could not look up instance "box"' in probe.stderr
    listed = box.run("ls", "--json")
    assert (listed.returncode, listed.stdout) == (1, "")
    assert "cannot reach the Brev API" in listed.stderr
    assert box.state()["api_faults"] == 0
    assert json.loads(box.run("ls", "--json").stdout)["workspaces"][0]["name"] == "box"
    assert box.state()["exec_log"] == []


def test_non_running_status_is_reported(brev: Brev) -> None:
    brev.login()
    brev.add("box", "--status", "STARTING")
    result = brev.run("exec", "box", "echo hi")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        'instance "box" is in state "STARTING" — please check with: brev ls'
    )
    assert brev.state()["exec_log"] == []


def test_no_trailing_instance_line_when_stdout_is_a_terminal(box: Brev) -> None:
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            [str(BREV), "exec", "box", "echo tty"],
            stdin=subprocess.DEVNULL,
            stdout=secondary,
            stderr=subprocess.PIPE,
            env=box.env,
            check=False,
            timeout=60,
        )
        os.close(secondary)
        secondary = -1
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
        if secondary != -1:
            os.close(secondary)
    assert proc.returncode == 0
    assert b"".join(chunks).decode().splitlines() == ["tty"]


# --- ls ------------------------------------------------------------------------------


def test_ls_json_shape(brev: Brev) -> None:
    brev.login()
    brev.add("a", "--id", "ida")
    brev.add("b", "--id", "idb", "--status", "STOPPED")
    result = brev.run("ls", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert list(data) == ["workspaces"]
    summary = [(w["name"], w["id"], w["status"]) for w in data["workspaces"]]
    assert summary == [("a", "ida", "RUNNING"), ("b", "idb", "STOPPED")]


def test_ls_json_with_no_instances_is_null(brev: Brev) -> None:
    brev.login()
    result = brev.run("ls", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"workspaces": None}


def test_ls_table(brev: Brev) -> None:
    brev.login()
    brev.add("box", "--id", "id1")
    brev.add("longer-name", "--id", "id2", "--status", "STOPPED")
    result = brev.run("ls")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "You have 2 instances in Org emulator",
        "NAME         STATUS   ID",
        "box          RUNNING  id1",
        "longer-name  STOPPED  id2",
        "",
    ]


def test_ls_rejects_extra_arguments(box: Brev) -> None:
    result = box.run("ls", "instances", "extra")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "too many args provided"


# --- delete / stop / start -----------------------------------------------------------


def test_delete_removes_and_prints_name_when_piped(box: Brev) -> None:
    result = box.run("delete", "box")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["box"]
    assert box.state()["instances"] == {}


def test_delete_unknown_names_it_but_deletes_the_rest(box: Brev) -> None:
    result = box.run("delete", "box", "ghost")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "1 error occurred:",
        "\t* instance with id/name ghost not found",
        "",
    ]
    assert result.stdout == ""
    assert box.state()["instances"] == {}


def test_stop_then_start(box: Brev) -> None:
    stopped = box.run("stop", "box")
    assert stopped.returncode == 0
    assert stopped.stdout.splitlines() == ["box"]
    assert box.state()["instances"]["box"]["status"] == "STOPPED"
    started = box.run("start", "box")
    assert started.returncode == 0
    assert started.stdout.splitlines() == ["box"]
    assert box.state()["instances"]["box"]["status"] == "RUNNING"


def test_start_of_a_running_instance_fails(box: Brev) -> None:
    result = box.run("start", "box")
    assert result.returncode == 1
    assert "\t* Instance is not stopped status=RUNNING" in result.stderr.splitlines()


def test_stop_unknown_instance_fails(box: Brev) -> None:
    result = box.run("stop", "ghost")
    assert result.returncode == 1
    assert "instance with id/name ghost not found" in result.stderr
    assert box.state()["instances"]["box"]["status"] == "RUNNING"


# --- usage ---------------------------------------------------------------------------


def test_unknown_subcommand_is_a_usage_error(box: Brev) -> None:
    result = box.run("frobnicate")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == 'unknown command "frobnicate" for "brev"'
    assert "Usage:" in result.stderr


def test_unknown_flag_is_a_usage_error(box: Brev) -> None:
    result = box.run("exec", "--bogus", "box", "echo hi")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "unknown flag: --bogus"
    assert "brev exec [instance...] <command>" in result.stderr
    assert box.state()["exec_log"] == []


def test_help_exits_zero(box: Brev) -> None:
    result = box.run("exec", "--help")
    assert result.returncode == 0
    assert "brev exec [instance...] <command>" in result.stdout
