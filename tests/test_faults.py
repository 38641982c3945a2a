"""Every outcome is recorded under faults, on the real engine and real filesystems.

Faults are injected for real: a docker stand-in first on PATH that kills
taospec at a chosen moment or fills the state folder, containers removed
behind taospec's back, a read-only bind remount and a tiny tmpfs as the state
folder, and signals to the whole process group at many delays.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import Runner, spawn, taospec_command, write

pytestmark = pytest.mark.engine

REAL_DOCKER = shutil.which("docker") or "/usr/bin/docker"


def job_file(root: Path, image: str, command: str, name: str = "job.yaml", **extra: str) -> Path:
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
    return write(root / name, "\n".join(lines) + "\n")


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([REAL_DOCKER, *args], capture_output=True, text=True, check=False)


def record(state_dir: Path, job_id: str) -> dict:
    return json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())


def states(state_dir: Path, job_id: str) -> list[str]:
    return [t["state"] for t in record(state_dir, job_id)["transitions"]]


def labelled(job_id: str) -> list[str]:
    return docker("ps", "-aq", "--filter", f"label=tao-job={job_id}").stdout.split()


def job_ids(state_dir: Path) -> list[str]:
    jobs = state_dir / "jobs"
    return sorted(p.stem for p in jobs.glob("*.json")) if jobs.exists() else []


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def stand_in(folder: Path, on_run: str) -> dict[str, str]:
    """A ``docker`` first on PATH: runs ``on_run`` (bash) for ``docker run``, else the real one.

    ``on_run`` sees the arguments after ``run`` in "$@" with ``--gpus X`` removed
    (the test engine has no GPU runtime) and $REAL naming the real docker. ``docker
    info`` adds the NVIDIA runtime to the engine's own list, as a GPU host's engine has.
    """
    script = f"""#!/bin/bash
REAL={REAL_DOCKER}
if [ "$1" = info ]; then
  "$REAL" "$@" | sed 's/\t{{/\t{{"nvidia":{{"path":"nvidia"}},/'
  exit "${{PIPESTATUS[0]}}"
fi
if [ "$1" != run ]; then exec "$REAL" "$@"; fi
shift
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) shift 2; continue;;
    --gpus=*) shift; continue;;
  esac
  args+=("$1"); shift
done
set -- "${{args[@]}}"
{on_run}
"""
    path = write(folder / "bin" / "docker", script)
    path.chmod(0o755)
    return {"PATH": f"{folder / 'bin'}:{os.environ['PATH']}"}


@pytest.fixture
def cleanup(state_dir: Path):
    """Remove every container the test's jobs made (by name and by label)."""
    yield
    for job_id in job_ids(state_dir):
        leftovers = labelled(job_id)
        if leftovers:
            docker("rm", "-f", *leftovers)


# -- 1. cancel asks the backend first ------------------------------------------


@pytest.mark.parametrize(("code", "state"), [(0, "COMPLETE"), (3, "ERROR")])
def test_cancel_of_a_job_that_ended_records_its_real_outcome_and_keeps_the_container(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    code: int,
    state: str,
) -> None:
    spec = job_file(open_tmp, engine, f"sh -c 'echo said-{code}; exit {code}'")
    job_id = taospec("run", "-d", spec).stdout.strip()
    assert docker("wait", job_id).stdout.strip() == str(code)
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"{job_id} already ended {state}" in cancelled.stdout
    rec = record(state_dir, job_id)
    assert rec["terminal_state"] == state
    assert "CANCELED" not in states(state_dir, job_id)
    assert labelled(job_id), "the container of a finished job is kept"
    assert taospec("logs", job_id).stdout == f"said-{code}\n"
    if code:
        assert json.loads(taospec("status", job_id, "--json").stdout)["state"] == "ERROR"


def test_sixteen_concurrent_cancels_all_succeed_and_record_one_canceled(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, "sleep 300")
    job_id = taospec("run", "-d", spec).stdout.strip()
    with ThreadPoolExecutor(16) as pool:
        done = list(pool.map(lambda _: taospec("cancel", job_id), range(16)))
    assert [d.returncode for d in done] == [0] * 16, [d.stderr for d in done]
    assert states(state_dir, job_id).count("CANCELED") == 1
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    assert labelled(job_id) == []
    assert taospec("status", job_id).stdout.split()[1] == "CANCELED"


def test_a_cancel_that_cannot_write_stops_nothing(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    spec = job_file(open_tmp, engine, "sh -c 'sleep 3; echo done'")
    job_id = taospec("run", "-d", spec).stdout.strip()
    subprocess.run(["mount", "--bind", state_dir, state_dir], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", state_dir], check=True)
        refused = taospec("cancel", job_id)
    finally:
        subprocess.run(["umount", state_dir], check=True)
    assert refused.returncode == 3, refused.stderr
    assert "Traceback" not in refused.stderr
    said = refused.stderr.strip().splitlines()[-1]
    assert said.startswith("taospec: cannot write")
    assert "Read-only file system; nothing was stopped: " in said
    assert f"{state_dir} (TAO_STATE_DIR) first; let this user write there" in said
    assert docker("wait", job_id).stdout.strip() == "0", "the job was left to finish"
    assert taospec("status", job_id).stdout.split()[1] == "COMPLETE"
    assert record(state_dir, job_id)["terminal_state"] == "COMPLETE"


def engine_fails(folder: Path, verbs: str) -> dict[str, str]:
    """A ``docker`` first on PATH that answers the given verbs (``kill|rm``) as an engine
    that went away does, and hands every other command to the real one."""
    script = f"""#!/bin/bash
case "$1" in
  {verbs}) echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2
       exit 1;;
esac
exec {REAL_DOCKER} "$@"
"""
    path = write(folder / "failing" / "docker", script)
    path.chmod(0o755)
    return {"PATH": f"{path.parent}:{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("verbs", "ended"),
    [("kill|rm", "ERROR"), ("rm", "CANCELED")],
    ids=["nothing-stopped", "killed-not-removed"],
)
def test_a_failed_cancel_leaves_the_job_its_own_end_unless_it_stopped_the_job(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    verbs: str,
    ended: str,
) -> None:
    gate = open_tmp / "gate"
    gate.mkdir(mode=0o777)
    command = "sh -c 'while [ ! -e /gate/go ]; do sleep 0.1; done; exit 3'"
    mounts = f"[{{source: {gate}, target: /gate, readonly: true}}]"
    job_id = taospec("run", "-d", job_file(open_tmp, engine, command, mounts=mounts)).stdout.strip()
    failed = taospec("cancel", job_id, env=engine_fails(open_tmp, verbs))
    assert failed.returncode == 1, failed.stderr
    assert "Cannot connect to the Docker daemon" in failed.stderr
    (gate / "go").touch()
    docker("wait", job_id)
    shown = taospec("status", job_id)
    rec = record(state_dir, job_id)
    assert rec["terminal_state"] == ended, rec["transitions"]
    assert shown.stdout.split()[1] == ended
    last = rec["transitions"][-1]["message"]
    if ended == "ERROR":
        # the job ran on and ended with its own exit code: that end is recorded as the job's
        assert "exit code 3" in last
        assert "an earlier cancel failed at" in last
    else:
        assert "a cancel began at" in last
    again = taospec("cancel", job_id)
    assert again.returncode == 0, again.stderr


def no_engine(cannot: str, host: str) -> str:
    """What status, logs and cancel say when the engine a job was launched on does not answer."""
    return (
        f"taospec: {cannot}: the Docker engine at {host} (the engine the job was launched on) "
        f"does not answer (Cannot connect to the Docker daemon at {host}. Is the docker daemon "
        "running?): start dockerd there; the job's status, output and cancel are asked of that "
        "engine alone; nothing was changed\n"
    )


def test_status_logs_and_cancel_exit_2_alike_when_the_engine_does_not_answer(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    """As run refuses an engine that does not answer: exit 2, the engine named, nothing written
    (cancel exited 1, "job failed", and left a cancel begun in the sidecar)."""
    # the engine's socket through a link of the test's own: removing the link is the engine
    # gone, for the jobs launched through it and for nothing else
    link = open_tmp / "engine.sock"
    link.symlink_to("/var/run/docker.sock")
    through = {"DOCKER_HOST": f"unix://{link}"}
    job_id = taospec("run", "-d", job_file(open_tmp, engine, "sleep 300"), env=through)
    job_id = job_id.stdout.strip()
    ended = taospec(
        "run", "-d", job_file(open_tmp, engine, "sh -c 'exit 3'", "ended.yaml"), env=through
    )
    ended_id = ended.stdout.strip()
    docker("wait", ended_id)
    assert taospec("status", ended_id).stdout.split()[1] == "ERROR"
    files = [state_dir / "jobs" / f"{job_id}{ext}" for ext in (".json", ".taospec")]
    before = [path.read_bytes() for path in files]
    link.unlink()
    for verb, cannot in (
        ("status", "cannot tell the state of"),
        ("logs", "cannot read the output of"),
        ("cancel", "cannot cancel"),
    ):
        done = taospec(verb, job_id)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == no_engine(f"{cannot} {job_id}", through["DOCKER_HOST"])
    assert [path.read_bytes() for path in files] == before
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout.strip() == "running"
    # a job that ended is not polled by logs: docker logs fails, and the engine is then asked
    logs = taospec("logs", ended_id)
    assert logs.returncode == 2, logs.stderr
    assert logs.stderr.endswith(
        no_engine(f"cannot read the output of {ended_id}", through["DOCKER_HOST"])
    )
    link.symlink_to("/var/run/docker.sock")
    # a shell whose DOCKER_HOST names a dead engine does not change which engine is asked
    elsewhere = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    assert taospec("logs", ended_id, env=elsewhere).returncode == 0
    assert taospec("cancel", job_id, env=elsewhere).returncode == 0


def test_a_run_whose_engine_stops_answering_says_the_job_may_still_run_and_exits_2(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    """run followed a job whose engine went away until it gave up, then exited 1 (the job
    failed) as UNKNOWN, with the record's "launched" for its reason, while the job ran on."""
    link = open_tmp / "engine.sock"
    link.symlink_to("/var/run/docker.sock")
    through = {"DOCKER_HOST": f"unix://{link}"}
    argv = ["run", str(job_file(open_tmp, engine, "sleep 300"))]
    child = spawn(argv, {**taospec.env, **through}, open_tmp)
    wait_for(lambda: any(states(state_dir, i)[-1] == "RUNNING" for i in job_ids(state_dir)))
    (job_id,) = job_ids(state_dir)
    link.unlink()
    out, err = child.communicate(timeout=120)
    assert (child.returncode, out) == (2, f"{job_id} UNKNOWN\n"), err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert f"the Docker engine at {through['DOCKER_HOST']}" in last
    assert "does not answer" in last
    assert f"the job may still be running: taospec logs -f {job_id} follows it again" in last
    assert states(state_dir, job_id) == ["PENDING", "RUNNING"]
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout.strip() == ("running")


def test_a_retry_whose_engine_stops_answering_stops_following_and_exits_2(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    """retry followed its job in silence for as long as the engine did not answer."""
    link = open_tmp / "engine.sock"
    link.symlink_to("/var/run/docker.sock")
    through = {"DOCKER_HOST": f"unix://{link}"}
    first = taospec("run", "-d", job_file(open_tmp, engine, "sleep 300"), env=through)
    first_id = first.stdout.strip()
    docker("kill", first_id)
    assert taospec("status", first_id).stdout.split()[1] == "ERROR"
    child = spawn(["retry", first_id], taospec.env, open_tmp)
    wait_for(lambda: len(job_ids(state_dir)) == 2)
    (job_id,) = set(job_ids(state_dir)) - {first_id}
    wait_for(lambda: states(state_dir, job_id)[-1] == "RUNNING")
    link.unlink()
    try:
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()  # a retry that still follows would follow for ever
    assert (child.returncode, out) == (2, f"{job_id}\n"), err
    last = err.splitlines()[-1]
    assert last.startswith(f"taospec: stopped following {job_id}: the Docker engine at "), last
    assert last.endswith(f"the job may still be running: taospec logs -f {job_id} follows it again")
    assert states(state_dir, job_id) == ["PENDING", "RUNNING"]


# -- 2. status records what it learns ------------------------------------------------


def test_a_container_left_in_created_is_pending_and_cancel_removes_it(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    env = stand_in(open_tmp, '"$REAL" create "${@:2}" >/dev/null; kill -9 $PPID; exit 1')
    spec = job_file(open_tmp, engine, "sleep 300")
    killed = taospec("run", "-d", spec, env=env)
    assert killed.returncode == -9
    (job_id,) = job_ids(state_dir)
    assert docker("inspect", "--format", "{{.State.Status}}", job_id).stdout.strip() == "created"
    shown = taospec("status", job_id)
    assert shown.stdout.split()[1] == "PENDING"
    rec = record(state_dir, job_id)
    assert states(state_dir, job_id) == ["PENDING", "PENDING"]
    assert rec["backend_ref"]
    assert "RUNNING" not in states(state_dir, job_id)
    assert taospec("cancel", job_id).returncode == 0
    assert labelled(job_id) == []
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"


def test_a_container_removed_outside_taospec_is_an_infra_error(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    job_id = taospec("run", "-d", job_file(open_tmp, engine, "sleep 300")).stdout.strip()
    docker("rm", "-f", job_id)
    shown = taospec("status", job_id)
    assert shown.stdout.split()[1] == "ERROR"
    assert "the container disappeared" in shown.stdout
    rec = record(state_dir, job_id)
    assert (rec["terminal_state"], rec["err_class"]) == ("ERROR", "ERR_INFRA")


def test_a_record_taospec_never_launched_is_closed_after_the_grace_period(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    env = stand_in(open_tmp, "kill -9 $PPID; exit 1")
    assert taospec("run", "-d", job_file(open_tmp, engine, "sleep 300"), env=env).returncode == -9
    (job_id,) = job_ids(state_dir)
    early = taospec("status", job_id)
    assert early.stdout.split()[1] == "UNKNOWN"
    assert record(state_dir, job_id)["terminal_state"] is None
    late = taospec("status", job_id, env={"TAOSPEC_LAUNCH_GRACE": "0"})
    assert late.stdout.split()[1] == "ERROR", late.stdout
    rec = record(state_dir, job_id)
    assert (rec["terminal_state"], rec["err_class"]) == ("ERROR", "ERR_INFRA")
    assert "the container disappeared" in rec["transitions"][-1]["message"]


def _gone(pid: int) -> bool:
    """The process ended (a zombie nobody reaps has ended too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


@pytest.mark.parametrize("own_group", [True, False], ids=["own-group", "shared-group"])
def test_a_record_stays_open_while_the_launch_a_killed_taospec_started_runs(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    own_group: bool,
) -> None:
    # taospec SIGKILLed while its `docker run` was slow: status closed the record as "never
    # launched" (taospec's own pid was gone), then the orphaned docker CLI started the
    # container, which ran on with its record saying ERROR for good
    gate, reached = open_tmp / "gate", open_tmp / "reached"
    waiting = f"echo $$ > {reached}.tmp; mv {reached}.tmp {reached}"
    waiting += f"; until [ -e {gate} ]; do sleep 0.05; done"
    env = stand_in(open_tmp, f'{waiting}; exec "$REAL" run "$@"')
    child = subprocess.Popen(
        [*taospec_command(), "run", str(job_file(open_tmp, engine, "sleep 300"))],
        env={**taospec.env, **env},
        cwd=open_tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=own_group,
    )
    wait_for(reached.exists)
    child.kill()
    child.wait()
    launcher = int(reached.read_text())
    try:
        (job_id,) = job_ids(state_dir)
        early = taospec("status", job_id, env={"TAOSPEC_LAUNCH_GRACE": "0"})
        assert early.stdout.split()[1] == "PENDING", early.stdout  # docker run still launches
        assert record(state_dir, job_id)["terminal_state"] is None
        gate.touch()
        wait_for(lambda: _gone(launcher))
    finally:
        if not _gone(launcher):  # a failed test leaves no launch waiting at the gate
            os.kill(launcher, signal.SIGKILL)
    late = taospec("status", job_id, env={"TAOSPEC_LAUNCH_GRACE": "0"})
    assert late.stdout.split()[1] == "RUNNING", late.stdout
    assert record(state_dir, job_id)["backend_ref"]
    assert taospec("cancel", job_id).returncode == 0
    assert record(state_dir, job_id)["terminal_state"] == "CANCELED"
    assert labelled(job_id) == []


def test_a_created_container_of_a_record_closed_as_never_launched_is_removed(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # the record was closed ERROR and its created container kept: nothing stopped a later
    # `docker start` from running a job its record says ended
    env = stand_in(open_tmp, '"$REAL" create "${@:2}" >/dev/null; kill -9 $PPID; exit 1')
    killed = taospec("run", "-d", job_file(open_tmp, engine, "sleep 300"), env=env)
    assert killed.returncode == -9
    (job_id,) = job_ids(state_dir)
    assert labelled(job_id)
    closed = taospec("status", job_id, env={"TAOSPEC_LAUNCH_GRACE": "0"})
    assert closed.stdout.split()[1:3] == ["ERROR", "ERR_INFRA"], closed.stdout
    assert "never launched" in closed.stdout
    assert "container removed" in closed.stdout
    assert labelled(job_id) == []


def test_cancel_of_a_job_recorded_as_ended_stops_what_still_runs(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # cancel answered "already ended ERROR; nothing to cancel" and left the container running
    job_id = taospec("run", "-d", job_file(open_tmp, engine, "sleep 300")).stdout.strip()
    marked = taospec("record", "mark", job_id, "--state", "ERROR", "--message", "closed by hand")
    assert marked.returncode == 0, marked.stderr
    cancelled = taospec("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "already ended ERROR" in cancelled.stdout
    assert "docker: running" in cancelled.stdout
    assert "container removed" in cancelled.stdout
    assert labelled(job_id) == []
    assert record(state_dir, job_id)["terminal_state"] == "ERROR"
    again = taospec("cancel", job_id)
    assert again.stdout.strip() == f"{job_id} already ended ERROR; nothing to cancel"


def test_status_of_a_cancelled_job_says_canceled(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    job_id = taospec("run", "-d", job_file(open_tmp, engine, "sleep 300")).stdout.strip()
    assert taospec("cancel", job_id).returncode == 0
    assert taospec("status", job_id).stdout.split()[1] == "CANCELED"
    assert json.loads(taospec("status", job_id, "--json").stdout)["state"] == "CANCELED"


# -- 3. no outcome depends on a write that can fail after the launch -------------


@pytest.fixture
def small_state(tmp_path: Path):
    """A 1 MiB tmpfs as the state folder."""
    path = tmp_path / "small"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", path], check=True)
    yield path
    subprocess.run(["umount", "-l", path], check=False)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the filesystem of ``folder``, leaving about ``leave`` bytes free."""
    space = os.statvfs(folder)
    free = space.f_bavail * space.f_frsize
    with open(folder / "filler", "wb") as out, contextlib.suppress(OSError):
        out.write(b"\0" * max(0, free - leave))


@pytest.mark.parametrize("detach", [True, False], ids=["detach", "follow"])
@pytest.mark.parametrize("leave", [64 * 1024, 0], ids=["under-256KiB", "full"])
def test_no_launch_without_room_to_record_the_outcome(
    engine: str, taospec: Runner, open_tmp: Path, small_state: Path, detach: bool, leave: int
) -> None:
    """An internal error (the ledger cannot take the job's writes) exits 3 with one
    message, followed or not: exit 1 says that a job failed."""
    spec = job_file(open_tmp, engine, "sleep 300")
    env = {"TAO_STATE_DIR": str(small_state)}
    assert taospec("run", "-d", spec, env=env).returncode == 0  # the state folder exists
    for job_id in job_ids(small_state):
        assert taospec("cancel", job_id, env=env).returncode == 0
    before = job_ids(small_state)
    fill(small_state, leave=leave)
    refused = taospec("run", *(["-d"] if detach else []), "-B", spec, env=env)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    said = [line for line in refused.stderr.splitlines() if "starting" not in line]
    assert len(said) == 1, refused.stderr
    assert "nothing was launched" in said[0]
    if not leave:
        assert "No space left on device; nothing was launched" in said[0]
        assert f"{small_state} (TAO_STATE_DIR) first; free some space there" in said[0]
    opened = sorted(set(job_ids(small_state)) - set(before))
    assert len(opened) <= 1
    for job_id in opened:
        assert labelled(job_id) == []
        if leave:
            assert record(small_state, job_id)["terminal_state"] == "ERROR"
    assert sorted((open_tmp / "results").iterdir()) == [
        open_tmp / "results" / job_id for job_id in before
    ], "nothing ran"


def test_a_write_failing_after_the_launch_is_healed_by_status(
    engine: str, taospec: Runner, open_tmp: Path, small_state: Path
) -> None:
    env = stand_in(
        open_tmp,
        f'"$REAL" run "$@"; code=$?; head -c 2000000 /dev/zero > {small_state}/filler; exit $code',
    )
    env["TAO_STATE_DIR"] = str(small_state)
    spec = job_file(open_tmp, engine, "sh -c 'sleep 2; echo finished'")
    launched = taospec("run", "-d", spec, env=env)
    (job_id,) = job_ids(small_state)
    try:
        assert launched.returncode == 3, launched.stderr
        assert "Traceback" not in launched.stderr
        assert launched.stderr.strip().count("\n") == 0, launched.stderr
        assert f"{job_id} was launched" in launched.stderr
        assert record(small_state, job_id)["terminal_state"] is None
        failed = taospec("status", job_id, env={"TAO_STATE_DIR": str(small_state)})
        assert failed.returncode == 3
        assert "Traceback" not in failed.stderr
        (small_state / "filler").unlink()
        assert docker("wait", job_id).stdout.strip() == "0"
        logs = taospec("logs", job_id, env={"TAO_STATE_DIR": str(small_state)})
        assert logs.stdout == "finished\n"
        healed = record(small_state, job_id)
        assert [t["state"] for t in healed["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
        assert healed["backend_ref"]
    finally:
        docker("rm", "-f", job_id)


def test_a_pipeline_exits_3_when_one_target_hits_an_internal_error_and_one_fails(
    engine: str, taospec: Runner, open_tmp: Path, small_state: Path
) -> None:
    """One target fails (its command exits 3), the next is launched but its RUNNING mark
    cannot be written: the run exits 3 (over 1), reporting the job that runs."""
    env = stand_in(
        open_tmp,
        f'"$REAL" run "$@"; code=$?; case "$*" in *unrecorded*) '
        f"head -c 2000000 /dev/zero > {small_state}/filler;; esac; exit $code",
    )
    env["TAO_STATE_DIR"] = str(small_state)
    results = open_tmp / "results"
    defaults = (
        f"network_arch: demo, platform: docker, image: {engine}, results_root: {results}, "
        'user: "1000:1000", docker: {shm_size: 64m}'
    )
    spec = write(
        open_tmp / "pipeline.yaml",
        f"version: 1\ndefaults: {{{defaults}}}\njobs:\n"
        "  failing: {action: failing, command: \"sh -c 'exit 3'\"}\n"
        "  unrecorded: {action: unrecorded, command: \"sh -c 'echo unrecorded; sleep 300'\"}\n",
    )
    done = taospec("run", "-k", spec, env=env)
    ids = {record(small_state, i)["action"]: i for i in job_ids(small_state)}
    try:
        assert done.returncode == 3, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert record(small_state, ids["failing"])["terminal_state"] == "ERROR"
        running = ids["unrecorded"]
        assert f"{running} was launched" in done.stderr
        assert docker("inspect", "--format", "{{.State.Status}}", running).stdout.strip() == (
            "running"
        )
        assert f"unrecorded: INTERNAL ERROR  {running} was launched" in done.stderr
    finally:
        docker("rm", "-f", *ids.values())


# -- 4. the GPU check and the launch are one critical section -------------------


def test_sixteen_concurrent_submits_of_gpu_0_launch_exactly_one(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    env = stand_in(open_tmp, 'exec "$REAL" run "$@"')
    spec = job_file(open_tmp, engine, "sleep 300", gpus="[0]")
    # -B: a late submit is not stopped earlier, as a duplicate of the running job (the same
    # plan), so that only the GPU check decides
    with ThreadPoolExecutor(16) as pool:
        done = list(pool.map(lambda _: taospec("run", "-d", "-B", spec, env=env), range(16)))
    winners = [d for d in done if d.returncode == 0]
    assert len(winners) == 1, [d.stderr for d in done]
    holder = winners[0].stdout.strip()
    for loser in (d for d in done if d.returncode != 0):
        assert loser.returncode == 2, loser.stderr
        # the holder running, or still launching: its PENDING record holds GPU 0
        assert f"of running job {holder} " in loser.stderr or (
            f"of job {holder}, launching " in loser.stderr
        )
    running = [j for j in job_ids(state_dir) if labelled(j)]
    assert running == [holder]


def test_overlapping_pairs_never_both_launch(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    env = stand_in(open_tmp, 'exec "$REAL" run "$@"')
    one = job_file(open_tmp, engine, "sleep 300", name="one.yaml", gpus="[0]")
    two = job_file(open_tmp, engine, "sleep 300", name="two.yaml", gpus="[0, 1]")
    for _ in range(4):
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(lambda spec: taospec("run", "-d", spec, env=env), [one, two]))
        codes = sorted(d.returncode for d in done)
        assert codes == [0, 2], [d.stderr for d in done]
        holder = next(d.stdout.strip() for d in done if d.returncode == 0)
        refused = next(d.stderr for d in done if d.returncode == 2)
        assert f"of running job {holder} " in refused or f"of job {holder}, launching " in refused
        assert taospec("cancel", holder).returncode == 0


# -- 4b. one job at a time per target fingerprint ---------------------------------


def held_first_launch(folder: Path) -> tuple[dict[str, str], Path, Path]:
    """A stand-in whose every ``docker run`` adds a line to ``reached``; the first one then
    waits until ``gate`` exists (a long first-time pull), the others run at once."""
    gate, reached, held = folder / "gate", folder / "reached", folder / "held"
    env = stand_in(
        folder,
        f"echo $$ >> {reached}\n"
        f"if mkdir {held} 2>/dev/null; then until [ -e {gate} ]; do sleep 0.05; done; fi\n"
        'exec "$REAL" run "$@"',
    )
    return env, gate, reached


def launches(reached: Path) -> int:
    return len(reached.read_text().splitlines()) if reached.exists() else 0


def refusal(job_id: str, state: str = "PENDING") -> str:
    return (
        f"job: job {job_id} is still {state}; follow it with `taospec logs -f {job_id}`, "
        f"or stop it with `taospec cancel {job_id}`\n"
    )


def test_concurrent_runs_of_one_target_launch_exactly_one_job(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # every run decided before the first had launched (its index entry came after its
    # submit returned), so each of them started the same job
    env, gate, reached = held_first_launch(open_tmp)
    spec = job_file(open_tmp, engine, "sleep 300")
    pool = ThreadPoolExecutor(6)
    try:
        runs = [pool.submit(taospec, "run", "-d", spec, env=env) for _ in range(6)]
        # the first launch is held at the gate: the other five end, or launch too
        wait_for(lambda: sum(r.done() for r in runs) == 5 or launches(reached) > 1, 120)
        assert launches(reached) == 1, [r.result().stderr for r in runs if r.done()]
        (job_id,) = job_ids(state_dir)
        gate.touch()
        done = [r.result() for r in runs]
    finally:
        gate.touch()
        pool.shutdown()
    winners = [d for d in done if d.returncode == 0]
    assert [w.stdout.strip() for w in winners] == [job_id], [d.stderr for d in done]
    for loser in (d for d in done if d.returncode != 0):
        assert (loser.returncode, loser.stdout) == (2, ""), loser.stderr
        assert refusal(job_id) in loser.stderr
        assert f"`taospec run -B {spec}` to start another" in loser.stderr
    assert job_ids(state_dir) == [job_id]
    assert [j for j in job_ids(state_dir) if labelled(j)] == [job_id]


def test_a_run_while_the_same_job_is_still_being_launched_is_refused(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    env, gate, reached = held_first_launch(open_tmp)
    spec = job_file(open_tmp, engine, "sleep 300")
    first = spawn(["run", "-d", str(spec)], {**taospec.env, **env}, open_tmp)
    try:
        wait_for(reached.exists)  # opened, and held in its `docker run`
        (job_id,) = job_ids(state_dir)
        opened = record(state_dir, job_id)
        assert opened["terminal_state"] is None
        dry = taospec("run", "-n", spec, env=env)
        assert dry.stdout == f"busy  job  job {job_id} is still PENDING\n", dry.stderr
        assert taospec("run", "--check", spec, env=env).returncode == 1
        for args in (("run", spec), ("run", "-d", spec)):
            refused = taospec(*args, env=env)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert refused.stderr.endswith(
                refusal(job_id) + "nothing was run: run again once it has ended, or "
                f"`taospec run -B {spec}` to start another\n"
            )
        assert job_ids(state_dir) == [job_id]
        assert record(state_dir, job_id) == opened  # asking wrote nothing
        assert taospec("status", job_id).stdout.split()[1] == "PENDING"
        forced = taospec("run", "-d", "-B", spec, env=env)
        assert forced.returncode == 0, forced.stderr
        other = forced.stdout.strip()
        assert other not in ("", job_id)
        gate.touch()
        out, err = first.communicate(timeout=120)
        assert (first.returncode, out.strip()) == (0, job_id), err
    finally:
        gate.touch()
        if first.poll() is None:
            first.kill()
            first.wait()
    assert sorted(j for j in job_ids(state_dir) if labelled(j)) == sorted([job_id, other])


def test_a_run_while_the_same_job_waits_to_retry_its_submit_is_refused(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    # the first `docker run` fails as a registry hiccup does (ERR_INFRA); the run that
    # launched it waits before its retry, and another run must not start the job meanwhile
    failed_once = open_tmp / "failed-once"
    env = stand_in(
        open_tmp,
        f"if mkdir {failed_once} 2>/dev/null; then\n"
        "  echo 'docker: error pulling image: TLS handshake timeout.' >&2; exit 125\n"
        'fi\nexec "$REAL" run "$@"',
    )
    spec = job_file(open_tmp, engine, "sleep 300", retry="{max: 1}")
    first = subprocess.Popen(  # followed, so that it says when it begins to wait
        [*taospec_command(), "run", str(spec)],
        env={**taospec.env, **env, "TAOSPEC_SUBMIT_BACKOFF": "600"},
        cwd=open_tmp,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert first.stderr is not None
        waiting = next((line for line in first.stderr if "retry 1 of 1 in 600s" in line), "")
        assert waiting, first.communicate()
        (job_id,) = job_ids(state_dir)
        assert record(state_dir, job_id)["err_class"] == "ERR_INFRA"
        refused = taospec("run", "-d", spec, env=env)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        said = f"job: job {job_id} ended ERROR ERR_INFRA; the taospec that launched it submits"
        assert said in refused.stderr
        assert job_ids(state_dir) == [job_id]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGTERM)
        first.communicate(timeout=60)
    # the run that would retry it is gone: a run starts the job again
    again = taospec("run", "-d", spec, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() != job_id


# -- 5. signals -----------------------------------------------------------------

DELAYS = [0.05 + i * (2.0 - 0.05) / 19 for i in range(20)]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.mark.parametrize("detach", [False, True], ids=["follow", "detach"])
def test_a_signal_to_the_process_group_at_any_moment_cancels_everything(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup, detach: bool
) -> None:
    spec = job_file(open_tmp, engine, "sleep 300")
    for index, delay in enumerate(DELAYS):
        signum = SIGNALS[index % len(SIGNALS)]
        before = set(job_ids(state_dir))
        argv = [*taospec_command(), "run", *(["-d"] if detach else []), str(spec)]
        child = subprocess.Popen(
            argv,
            env=taospec.env,
            cwd=open_tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)
        out, err = child.communicate(timeout=120)
        started = set(job_ids(state_dir)) - before
        # Python's own start-up (before taospec's code runs) may print its interrupt.
        assert b"Traceback" not in err or not started, err.decode()
        for job_id in started:
            rec = record(state_dir, job_id)
            # The submit was over once the id was printed: the job runs (a signal that lands
            # while the interpreter shuts down ends only taospec), and cancel ends it.
            finished = detach and job_id in out.decode()
            if finished:
                assert taospec("cancel", job_id).returncode == 0
                rec = record(state_dir, job_id)
            assert rec["terminal_state"] == "CANCELED", (delay, signum, rec, err.decode())
            assert labelled(job_id) == [], (delay, signum)
            time.sleep(0.5)
            assert labelled(job_id) == [], (delay, signum, "created after the cancel")


# -- 6. prune: no container keeps a passed value after its job is done ------------


def test_prune_removes_passed_values_and_logs_still_work(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    value = "pruned-" + os.urandom(6).hex()
    spec = job_file(open_tmp, engine, "sh -c 'echo out-line; echo err-line >&2'")
    write(spec, spec.read_text() + "env: {pass: [PRUNE_TOKEN]}\n")
    env = {"PRUNE_TOKEN": value}
    job_id = taospec("run", spec, env=env).stdout.split()[0]
    config = docker("inspect", "--format", "{{json .Config.Env}}", job_id).stdout
    assert f"PRUNE_TOKEN={value}" in config, "a container keeps the passed value"
    running = taospec("run", "-d", spec, "-B", env=env).stdout.strip()
    dry = taospec("prune", "--dry-run")
    assert f"{job_id}: would copy" in dry.stdout
    assert labelled(job_id)
    assert taospec("prune", "--older-than", "1h").stdout == ""
    assert labelled(job_id)
    pruned = taospec("prune")
    assert pruned.returncode == 0, pruned.stderr
    assert f"{job_id}: output copied" in pruned.stdout
    assert labelled(job_id) == []
    assert labelled(running), "a running job's container is kept"
    every = docker("ps", "-aq").stdout.split()
    configs = docker("inspect", "--format", "{{json .Config.Env}}", *every).stdout
    assert value not in configs.replace(
        docker("inspect", "--format", "{{json .Config.Env}}", running).stdout, ""
    )
    logs = taospec("logs", job_id)
    assert sorted(logs.stdout.splitlines()) == ["err-line", "out-line"]
    assert taospec("logs", job_id, "--tail", "1").stdout.count("\n") == 1
    assert (open_tmp / "results" / job_id / "taospec.log").stat().st_uid == 1000


def test_prune_keeps_the_container_of_a_job_whose_sidecar_is_damaged_and_goes_on(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup
) -> None:
    """prune stopped at a sidecar edited by hand (exit 3), every later job's container, and
    the passed values in it, left where they were."""
    spec = job_file(open_tmp, engine, "echo out-line")
    ids = [taospec("run", "-B", spec).stdout.split()[0] for _ in range(3)]
    damaged = state_dir / "jobs" / f"{ids[1]}.taospec"
    damaged.write_text("[")
    pruned = taospec("prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "Traceback" not in pruned.stderr
    for job_id in (ids[0], ids[2]):
        assert f"{job_id}: output copied" in pruned.stdout
        assert labelled(job_id) == []
    (said,) = pruned.stderr.splitlines()
    assert said.startswith(f"{ids[1]}: kept: {damaged}: not valid JSON"), said
    assert labelled(ids[1]), "which engine holds it is in the sidecar: it is left as it is"
    assert damaged.read_text() == "["


# -- 7. the engine a job ran on is the engine every later verb asks ----------------

REAL_ENGINE = "unix:///var/run/docker.sock"


@pytest.fixture
def empty_engine(tmp_path: Path):
    """Another docker engine (a stand-in on a unix socket) that holds no container: it
    answers ``/_ping``, an empty ``docker ps -a`` and "No such container" to the rest."""
    import socketserver
    import threading
    from http.server import BaseHTTPRequestHandler

    class Engine(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def answer(self, code: int, body: object) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Api-Version", "1.41")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path.endswith("/_ping"):
                return self.answer(200, b"OK")
            if path.endswith("/containers/json"):
                return self.answer(200, [])
            name = path.rsplit("/containers/", 1)[-1].split("/")[0]
            return self.answer(404, {"message": f"No such container: {name}"})

        do_HEAD = do_POST = do_DELETE = do_GET

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

        def get_request(self):  # type: ignore[no-untyped-def]
            request, _ = super().get_request()
            return request, ("empty-engine", 0)

    socket = tmp_path / "empty-engine.sock"
    server = Server(str(socket), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"unix://{socket}"
    server.shutdown()
    server.server_close()


def contexts(folder: Path, **endpoints: str) -> dict[str, str]:
    """A private docker configuration holding a context per endpoint."""
    config = folder / "docker-config"
    for name, host in endpoints.items():
        made = subprocess.run(
            [REAL_DOCKER, "context", "create", name, "--docker", f"host={host}"],
            env={**os.environ, "DOCKER_CONFIG": str(config)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert made.returncode == 0, made.stderr
    return {"DOCKER_CONFIG": str(config)}


def running_there(taospec: Runner, job_id: str, env: dict[str, str]) -> None:
    """status and logs from a shell whose environment names another engine find the
    running job where it runs."""
    status = taospec("status", job_id, env=env)
    assert status.returncode == 0, status.stderr
    assert status.stdout.split()[1] == "RUNNING", status.stdout
    assert taospec("logs", job_id, env=env).stdout == "started\n"


@pytest.mark.parametrize(
    "launch",
    ["DOCKER_HOST", "DOCKER_CONTEXT", "docker context use", "nothing"],
)
def test_later_verbs_ask_the_engine_the_job_was_launched_on(
    engine: str,
    taospec: Runner,
    open_tmp: Path,
    state_dir: Path,
    cleanup,
    empty_engine: str,
    launch: str,
) -> None:
    env = contexts(open_tmp, real=REAL_ENGINE, empty=empty_engine)
    if launch == "DOCKER_HOST":
        env["DOCKER_HOST"] = REAL_ENGINE
    elif launch == "DOCKER_CONTEXT":
        env["DOCKER_CONTEXT"] = "real"
    elif launch == "docker context use":
        (Path(env["DOCKER_CONFIG"]) / "config.json").write_text('{"currentContext": "real"}')
    spec = job_file(open_tmp, engine, "sh -c 'echo started; sleep 300'")
    job_id = taospec("run", "-d", spec, env=env).stdout.strip()
    wait_for(lambda: docker("logs", job_id).stdout == "started\n")
    elsewhere = {"DOCKER_CONFIG": env["DOCKER_CONFIG"]}
    running_there(taospec, job_id, {**elsewhere, "DOCKER_HOST": empty_engine})
    running_there(taospec, job_id, {**elsewhere, "DOCKER_CONTEXT": "empty"})
    (Path(env["DOCKER_CONFIG"]) / "config.json").write_text('{"currentContext": "empty"}')
    running_there(taospec, job_id, elsewhere)
    cancelled = taospec("cancel", job_id, env=elsewhere)
    assert cancelled.returncode == 0, cancelled.stderr
    assert labelled(job_id) == [], "the cancel stopped the job where it runs"
    assert states(state_dir, job_id) == ["PENDING", "RUNNING", "CANCELED"]


def test_a_plan_runs_on_its_own_engine_whatever_the_launch_environment_names(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, cleanup, empty_engine: str
) -> None:
    spec = job_file(open_tmp, engine, "sh -c 'echo started; exit 3'")
    pinned = taospec("run", spec, env={"DOCKER_HOST": REAL_ENGINE})
    assert pinned.returncode == 1, pinned.stderr
    first = pinned.stdout.split()[0]
    # the stored plan names the engine: its retry runs there, not where this shell points
    retried = taospec("retry", "--detach", first, env={"DOCKER_HOST": empty_engine})
    assert retried.returncode == 0, retried.stderr
    second = retried.stdout.split()[0]
    assert labelled(second), "the retry ran on the engine its plan names"
    # a plan on the local engine is refused where the environment names another, and
    # nothing is recorded or started
    local = taospec("run", "-B", spec)
    assert local.returncode == 1, local.stderr
    third = local.stdout.split()[0]
    before = job_ids(state_dir)
    refused = taospec("retry", "--detach", third, env={"DOCKER_HOST": empty_engine})
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"runs on the local engine, but the environment names {empty_engine}" in (refused.stderr)
    assert job_ids(state_dir) == before
    # the engine a run's environment names differs from the last run's: the diff says so
    dry = taospec("run", "-n", "-B", spec, env={"DOCKER_HOST": REAL_ENGINE})
    assert f"+# Note: engine: {REAL_ENGINE} from $DOCKER_HOST" in dry.stdout
    assert f"+DOCKER_HOST={REAL_ENGINE} docker" in dry.stdout
