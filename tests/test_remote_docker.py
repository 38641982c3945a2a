"""``docker.host: ssh://...`` for real: the loopback sshd (scripts/ensure-sshd.sh), the engine.

The docker CLI reaches the engine through its own ssh transport, and
taospec's ``ssh`` steps check and create the job's paths on that host. The
"remote" host is this machine seen through sshd, so its paths are ours.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taospec import plantext, remote
from taospec.errors import InvalidInput
from taospec.identity import Identity
from taospec.ledger import Ledger
from taospec.platforms import render
from tests.conftest import ROOT, Runner, bash_words, load_job, write
from tests.remote_shell import absolute, containers, docker, remote_calls
from tests.test_docker_jobs import (
    HALF_WRITTEN,
    INTERLEAVED,
    logs_of_a_line_broken_by_the_other_stream,
    look_while_a_value_is_half_written,
)
from tests.test_quoting import JOB_IDS, commands, docker_args, hostile

pytestmark = pytest.mark.engine

ALIVE = ("-o", "ServerAliveInterval=20")
"""taospec's keepalives where ssh's configuration sets none: 3 of them unanswered (ssh's
ServerAliveCountMax) 20 s apart, and ssh drops the connection. The loopback sshd's port has
BatchMode in its configuration, which sets no keepalive: they are added there too."""

HOST = "ssh://root@taospec-test"
GPU_HOST = "ssh://root@taospec-gpu"
"""The same sshd on 127.0.0.2, where nvidia-smi is the stand-in (scripts/ensure-sshd.sh)."""
ROOT_LAUNCHER = Identity(0, 0, (), "root")
GPU_ENGINE = ROOT / "tests" / "fakes" / "gpu-engine"
# GPU 1 and 3 are nearly idle, 2 is in use a little, 0 a lot (by something outside taospec).
FOUR_GPUS = "0, GPU-aaaa, 9000 MiB\n1, GPU-bbbb, 10 MiB\n2, GPU-cccc, 500 MiB\n3, GPU-dddd, 20 MiB"


def ssh_answers(alias: str = "taospec-test") -> bool:
    argv = ["ssh", "-o", "BatchMode=yes", alias, "true"]
    done = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, check=False)
    return done.returncode == 0


@pytest.fixture(scope="session")
def sshd(engine: str) -> str:
    """The loopback sshd answering as Host taospec-test and Host taospec-gpu (started by
    scripts/ensure-sshd.sh)."""
    if not (ssh_answers() and ssh_answers("taospec-gpu")):
        started = subprocess.run(
            [str(ROOT / "scripts" / "ensure-sshd.sh")],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert ssh_answers(), f"no loopback sshd: {started.stderr.strip()[-2000:]}"
        assert ssh_answers("taospec-gpu"), f"no GPU host: {started.stderr.strip()[-2000:]}"
    ports = subprocess.run(
        ["ssh", "-G", "taospec-test"], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    return next(line.split()[1] for line in ports if line.startswith("port "))


@pytest.fixture
def job_ids() -> Iterator[list[str]]:
    """Job ids whose containers are removed after the test (only those)."""
    ids: list[str] = []
    yield ids
    for job_id in ids:
        for cid in containers(job_id):
            docker("rm", "-f", cid)


def job_file(root: Path, image: str, command: str, host: str = HOST, **extra: str) -> Path:
    (root / "data").mkdir(exist_ok=True)
    (root / "results").mkdir(exist_ok=True)
    lines = [
        "version: 1",
        "network_arch: hello",
        "action: greet",
        "platform: docker",
        f"docker: {{host: {json.dumps(host)}, shm_size: 64m}}",
        f"image: {image}",
        f"results_root: {root / 'results'}",
        'user: "1000:1000"',
        f"command: {json.dumps(command)}",
        *(f"{key}: {value}" for key, value in extra.items()),
    ]
    return write(root / "job.yaml", "\n".join(lines) + "\n")


def data_mount(root: Path, source: Path | None = None) -> str:
    return json.dumps([{"source": str(source or root / "data"), "target": "/data"}])


def started(done: subprocess.CompletedProcess[str], job_ids: list[str]) -> str:
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    job_ids.append(job_id)
    return job_id


def test_the_full_cycle_runs_over_ssh(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, job_ids
) -> None:
    (open_tmp / "data").mkdir()
    (open_tmp / "data" / "input.txt").write_text("from the host\n")
    command = "sh -c 'cat /data/input.txt; cat {config_path}; echo line-3; exec sleep 300'"
    spec = job_file(open_tmp, engine, command, mounts=data_mount(open_tmp), spec="{a: b}")
    job_id = started(taospec("run", "--detach", spec), job_ids)
    side = Ledger(state_dir).sidecar(job_id)
    assert side["docker_host"] == HOST
    steps = [s["name"] for s in side["plan"]["steps"]]
    assert steps == ["paths-check", "prepare", "pull", "launch"]
    assert side["plan"]["steps"][0]["argv"][:6] == ["ssh", "-o", "BatchMode=yes", *ALIVE, "--"]

    assert taospec("status", job_id).stdout.split()[1] == "RUNNING"
    deadline = time.monotonic() + 30
    while "line-3" not in (logs := taospec("logs", job_id).stdout):
        assert time.monotonic() < deadline, logs
        time.sleep(0.2)
    assert logs == "from the host\na: b\nline-3\n"
    results = open_tmp / "results" / job_id
    assert results.stat().st_uid == 1000
    assert (results / "stage" / "spec.yaml").read_text() == "a: b\n"

    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "container removed" in cancelled.stdout
    assert containers(job_id) == []


def test_a_host_with_a_port_runs_to_completion(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, job_ids
) -> None:
    host = f"ssh://root@127.0.0.1:{sshd}"
    spec = job_file(open_tmp, engine, "sh -c 'id -u > {results_dir}/uid'", host)
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER)
    assert plan.steps[0].argv[:8] == ("ssh", "-o", "BatchMode=yes", *ALIVE, "-p", sshd, "--")
    assert plan.steps[0].argv[8] == "root@127.0.0.1"
    done = taospec("run", spec)
    job_id = started(done, job_ids)
    assert done.stdout.split()[1] == "COMPLETE"
    assert (open_tmp / "results" / job_id / "uid").read_text() == "1000\n"


def test_ssh_to_a_host_that_takes_the_connection_and_never_answers_gives_up(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, silent_port: int
) -> None:
    """taospec's own ssh steps waited for ever on such a host. Where ssh's configuration sets
    a ConnectTimeout (the loopback sshd's port has one) taospec adds none: see above."""
    port = str(silent_port)
    spec = job_file(open_tmp, engine, "true", f"ssh://root@127.0.0.1:{port}")
    rendered = taospec("render", "--format", "json", spec, env={"TAOSPEC_SSH_CONNECT_TIMEOUT": "2"})
    assert rendered.returncode == 0, rendered.stderr
    step = json.loads(rendered.stdout)["steps"][0]
    ssh = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", *ALIVE, "-p", port, "--"]
    assert (step["name"], step["argv"][:11]) == ("paths-check", [*ssh, "root@127.0.0.1"])
    began = time.monotonic()
    done = subprocess.run(step["argv"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60, check=False)  # fmt: skip
    assert time.monotonic() - began < 20
    assert (done.returncode, done.stdout) == (255, ""), done.stderr
    assert f"Connection to 127.0.0.1 port {port} timed out" in done.stderr


def test_a_look_at_a_running_container_over_ssh_shows_no_part_of_a_value_being_written(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, job_ids
) -> None:
    # logs (not -f) printed the unended last line as docker logs gave it: the first part
    # of a passed value the job was still writing went out, unredacted
    spec = job_file(open_tmp, engine, HALF_WRITTEN, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    job_id = started(taospec("run", "--detach", spec, env=passed), job_ids)
    look_while_a_value_is_half_written(taospec, job_id, passed)


def test_a_line_of_stdout_over_ssh_is_not_broken_by_a_line_of_stderr(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, job_ids
) -> None:
    # logs read docker logs' stdout and stderr as one pipe: a stderr line broke a stdout
    # line the job was writing, and the value in it, in two
    spec = job_file(open_tmp, engine, INTERLEAVED, env="{pass: [PLAIN_VAR]}")
    passed = {"PLAIN_VAR": "Zq8sup3rs3cretVALUE0123456789X"}
    job_id = started(taospec("run", "--detach", spec, env=passed), job_ids)
    logs_of_a_line_broken_by_the_other_stream(taospec, job_id, passed)


def test_a_mount_source_missing_on_the_host_fails_before_anything_starts(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, job_ids
) -> None:
    gone = open_tmp / "not there"
    spec = job_file(open_tmp, engine, "true", mounts=data_mount(open_tmp, gone))
    done = taospec("run", spec)
    assert done.returncode == 1
    assert f"paths-check: mounts[0].source {gone} does not exist on {HOST}" in done.stderr
    (record,) = [p for p in (state_dir / "jobs").glob("*.json") if "." not in p.stem]
    job_ids.append(record.stem)
    assert json.loads(record.read_text())["terminal_state"] == "ERROR"
    assert containers(record.stem) == []
    assert list((open_tmp / "results").iterdir()) == []  # prepare never ran


def test_a_results_root_missing_on_the_host_is_refused(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path
) -> None:
    spec = job_file(open_tmp, engine, "true")
    write(spec, spec.read_text().replace(str(open_tmp / "results"), str(open_tmp / "nowhere")))
    done = taospec("run", spec)
    assert done.returncode == 1
    assert f"results_root {open_tmp / 'nowhere'} does not exist on {HOST}" in done.stderr
    assert not (open_tmp / "nowhere").exists()


def test_free_gpus_are_read_with_nvidia_smi_on_the_ssh_host(
    sshd: str,
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    tmp_path: Path,
    job_ids: list[str],
) -> None:
    gpus_log = tmp_path / "gpus.log"
    env = {
        # The GPU engine's docker (it starts containers without --gpus and logs the flag);
        # no nvidia-smi on this side: it runs on the GPU host, which ssh sends the CSV to.
        "PATH": f"{GPU_ENGINE}{os.pathsep}{os.environ['PATH']}",
        "FAKE_DOCKER_REAL": str(shutil.which("docker")),
        "FAKE_DOCKER_GPUS_LOG": str(gpus_log),
        "FAKE_NVIDIA_SMI_CSV": FOUR_GPUS,
    }
    assert shutil.which("nvidia-smi", path=env["PATH"]) is None

    def submit(name: str, count: int, host: str = GPU_HOST) -> subprocess.CompletedProcess[str]:
        (open_tmp / name).mkdir()
        spec = job_file(open_tmp / name, engine, "sleep 300", host, gpus=f"{{free: {count}}}")
        return taospec("run", "--detach", spec, env=env)

    first_id = started(submit("first", 2), job_ids)
    assert gpus_log.read_text() == '"device=1,3"\n'
    side = Ledger(state_dir).sidecar(first_id)
    assert (side["gpus_chosen"], side["docker_host"]) == ("1,3", GPU_HOST)
    assert json.loads(taospec("show", first_id).stdout)["gpus_chosen"] == "1,3"
    assert '"device=1,3"' in side["plan"]["steps"][-1]["argv"]

    # The GPUs a running job of the ledger holds on that host are left out.
    second_id = started(submit("second", 2), job_ids)
    assert gpus_log.read_text().splitlines()[-1] == '"device=0,2"'
    records = sorted((state_dir / "jobs").glob("*.json"))
    refused = submit("third", 1)
    assert refused.returncode == 1
    assert f"GPU 3 held by running job {first_id}" in refused.stderr
    assert f"GPU 0 held by running job {second_id}" in refused.stderr
    assert sorted((state_dir / "jobs").glob("*.json")) == records

    # The query runs on the job's host: the one without nvidia-smi says so.
    elsewhere = submit("elsewhere", 1, HOST)
    assert elsewhere.returncode == 2
    assert (
        "cannot read GPU occupancy (exit 127): ssh -o BatchMode=yes -o ServerAliveInterval=20 -- "
        in (elsewhere.stderr)
    )
    assert "nvidia-smi: command not found" in elsewhere.stderr
    for job_id in (first_id, second_id):
        assert taospec("cancel", job_id).returncode == 0


def test_ssh_destinations_are_parsed_and_never_read_as_options() -> None:
    # ssh's configuration here sets no ConnectTimeout nor keepalives for these: taospec's
    # are added
    ours = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", *ALIVE)
    assert remote.ssh_argv("ssh://gpu") == (*ours, "--", "gpu")
    assert remote.ssh_argv("ssh://u@gpu:22") == (*ours, "-p", "22", "--", "u@gpu")
    # "--" keeps taospec's own ssh from reading them as options, but DOCKER_HOST goes to
    # docker's ssh as well, and slurm.login and brev.instance refuse a leading dash
    bad_hosts = ("ssh://-oProxyCommand=x", "ssh://-oProxyCommand=x@gpu", "ssh://gpu:0")
    for bad in ("ssh://gpu:port", "ssh://", "ssh://gpu/path", *bad_hosts):
        with pytest.raises(InvalidInput):
            remote.ssh_argv(bad)


DOCKER_HOST_PATTERN = re.compile(
    json.loads((ROOT / "schemas" / "job.schema.json").read_text())["$defs"]["fields"]["properties"][
        "docker"
    ]["properties"]["host"]["pattern"]
)


def ssh_accepts(url: str) -> bool:
    try:
        remote.ssh_argv(url)
    except InvalidInput:
        return False
    return True


@given(
    st.builds(
        "".join,
        st.tuples(
            st.just("ssh://"),
            st.sampled_from(["", "u@", "a@b@", "@", "u:p@", "u?@", "u#@", "-oX@", "u-@"]),
            st.sampled_from(["gpu", "10.0.0.1", "[::1]", "", "-oX", "h?x", "h#x", "ü", "g-"]),
            st.sampled_from(
                [
                    "",
                    ":",
                    ":0",
                    ":000",
                    ":22",
                    ":022",
                    ":65535",
                    ":65536",
                    ":065536",
                    ":99999",
                    ":port",
                    ":-1",
                ]
            ),  # fmt: skip
            st.sampled_from(["", "/", "/path", "//", "?q", "#f"]),
        ),
    )
)
def test_the_schema_accepts_exactly_the_ssh_hosts_that_can_be_reached(url: str) -> None:
    # validate must not pass a docker.host that render then refuses, nor refuse one it runs.
    assert bool(DOCKER_HOST_PATTERN.search(url)) == ssh_accepts(url), url


@st.composite
def ssh_documents(draw: st.DrawFn) -> dict[str, object]:
    """A remote docker job with a hostile value in every path and string."""
    text = hostile(exclude="{}")
    return {
        "version": 1,
        "network_arch": "arch",
        "action": "act",
        "platform": "docker",
        "docker": {"host": HOST, "extra_args": draw(docker_args(text, max_size=2))},
        "image": "taospec-test/busybox:1",
        "command": draw(commands(max_size=3)),
        "results_root": draw(absolute()),
        "user": "1000:1000",
        "mounts": [{"source": draw(absolute()), "target": "/data"}],
        "env": {"set": {"MODE": draw(text)}},
        "spec": {"train": {"note": draw(text)}},
    }


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=ssh_documents(), job_id=JOB_IDS, shell=st.sampled_from(["bash", "sh"]))
def test_hostile_values_survive_the_local_shell_and_the_hosts_shell(
    tmp_path: Path, doc: dict, job_id: str, shell: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    shown = render(load_job(path), launcher=ROOT_LAUNCHER)
    real = shown.with_job_id(job_id)
    local = render(load_job(path), launcher=ROOT_LAUNCHER, job_id=job_id)
    results = real.record.results_dir
    calls: list[list[str]] = []
    for plan_step, real_step in zip(shown.steps[:2], real.steps[:2], strict=True):
        argv = bash_words(plantext.argv_text(plan_step.argv), {"JOB_ID": job_id})
        assert argv == list(real_step.argv)
        assert argv[:7] == ["ssh", "-o", "BatchMode=yes", *ALIVE, "--", "root@taospec-test"]
        calls += remote_calls(argv[7], shell)  # a login shell on the host may be dash
    source = doc["mounts"][0]["source"]
    assert calls[:2] == [["test", "-e", doc["results_root"]], ["test", "-e", source]]
    install = calls[2]
    assert install[:8] == ["install", "-d", "-m", "0755", "-o", "1000", "-g", "1000"]
    assert install[8:10] == [results, f"{results}/stage"]
    assert calls[3][-1] == f"{results}/stage/spec.yaml"
    assert calls[4:] == [["stdin", ""]]  # the script holds no spec: it reads the step's input
    assert yaml.safe_load(real.steps[1].stdin_text or "") == {
        "train": {"note": doc["spec"]["train"]["note"]}
    }
    launch = local.steps[-1]
    assert launch.env == (("DOCKER_HOST", HOST),)
    assert bash_words(plantext.argv_text(shown.steps[-1].argv), {"JOB_ID": job_id}) == list(
        launch.argv
    )


def test_a_spec_longer_than_one_argument_reaches_the_host_whole(
    sshd: str, engine: str, taospec: Runner, open_tmp: Path, job_ids
) -> None:
    """The spec travels on the prepare step's stdin: inside the one argument ssh hands the
    host's shell, a spec of 128 KiB or more failed the launch with E2BIG."""
    note = "word " * 40_000  # 200,000 bytes
    document = json.dumps({"n": note, "id": "{job_id}"})
    spec = job_file(open_tmp, engine, "sh -c 'wc -c < {config_path}'", spec=document)
    assert taospec("validate", spec).returncode == 0
    done = taospec("run", spec)
    job_id = started(done, job_ids)
    assert done.stdout.split()[1] == "COMPLETE", done.stderr
    written = open_tmp / "results" / job_id / "stage" / "spec.yaml"
    assert yaml.safe_load(written.read_text()) == {"n": note, "id": job_id}
    assert written.stat().st_uid == 1000

    # What render shows for the step does the same: the spec on its input, the id filled.
    prepare = render(load_job(spec), launcher=ROOT_LAUNCHER).steps[1]
    assert prepare.name == "prepare"
    script = write(open_tmp / "prepare.sh", f"set -e\n{plantext.command_line(prepare)}\n")
    by_hand = subprocess.run(
        ["bash", str(script)],
        env={**os.environ, "JOB_ID": "by-hand"},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert by_hand.returncode == 0, by_hand.stderr
    written = open_tmp / "results" / "by-hand" / "stage" / "spec.yaml"
    assert yaml.safe_load(written.read_text()) == {"n": note, "id": "by-hand"}
