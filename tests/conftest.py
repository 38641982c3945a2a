"""Shared fixtures: the real ``taospec`` command, a private ledger, and the real engine."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TypeVar

import pytest

from taospec.interrupts import INTERRUPTS
from taospec.job import Job
from taospec.ledger import Ledger
from taospec.loader import load_jobfile

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "jobs"
TEST_IMAGE = "taospec-test/busybox:1"
REQUIRE_ENGINE = os.environ.get("TAOSPEC_REQUIRE_ENGINE") == "1"


def load_job(path: str | os.PathLike[str]) -> Job:
    """The job of a file that holds one."""
    (target,) = load_jobfile(path).targets.values()
    return target.job


def taospec_command() -> list[str]:
    """The installed console script when there is one, else ``python -m taospec``."""
    script = Path(sys.executable).parent / "taospec"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "taospec"]


def spawn(
    argv: list[str], env: dict[str, str], cwd: Path, stdout: IO[str] | int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """``taospec`` with ``argv`` started in the background, its output piped as text (its
    stdout to ``stdout`` when given)."""
    return subprocess.Popen(
        [*taospec_command(), *argv],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def progress_bar(steps: int, gate: str) -> str:
    """A job's shell command: ``first``, then a progress bar of ``steps`` steps redrawn in
    place with ``\\r``, its line ended (`` done``) only once ``gate`` exists."""
    return (
        f'echo first; i=0; while [ $i -lt {steps} ]; do printf "step %05d\\r" $i; '
        f'i=$((i + 1)); done; while [ ! -e {gate} ]; do sleep 0.1; done; echo " done"'
    )


def a_follow_shows_the_bar_as_it_is_redrawn(
    taospec: Runner, job_id: str, steps: int, open_gate: Callable[[], object], folder: Path
) -> None:
    """``logs -f`` of a job running :func:`progress_bar` shows the bar while its line is
    not ended (all but its last redraws, which may begin a value), and in the end each
    character the job wrote, once."""
    shown = folder / "followed.txt"
    with shown.open("w") as out:
        follow = spawn(["logs", "-f", job_id], taospec.env, taospec.cwd, stdout=out)
        try:
            mid = f"step {steps // 2:05d}\r"
            deadline = time.monotonic() + 60
            while mid not in shown.read_bytes().decode():
                assert follow.poll() is None, follow.communicate()
                assert time.monotonic() < deadline, "the bar was not shown while redrawn"
                time.sleep(0.1)
            open_gate()
            assert follow.wait(timeout=120) == 0, follow.communicate()
        finally:
            open_gate()  # the job ends, whatever the follow did
            if follow.poll() is None:
                follow.kill()
            follow.communicate()
    bar = "".join(f"step {i:05d}\r" for i in range(steps))
    assert shown.read_bytes().decode() == f"first\n{bar} done\n"


def a_look_reads_the_log_a_block_at_a_time(
    taospec: Runner, job_id: str, results: Path, *options: str
) -> None:
    """``logs`` (with ``options``: ``-f``) of the ended job ``job_id``, its log
    (``taospec.log`` in ``results``) made a pipe: each line goes out before the pipe is done
    with, so the log is never read whole."""
    log = results / "taospec.log"
    log.unlink()
    os.mkfifo(log)
    reader = subprocess.Popen(
        [*taospec_command(), "logs", *options, job_id], env=taospec.env, cwd=taospec.cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert reader.stdout is not None
    with log.open("w") as writer:
        writer.write("epoch 1 loss=0.5\nepoch 2 lo")
        writer.flush()
        shown = select.select([reader.stdout], [], [], 30)[0]  # the pipe still open
        assert shown, "logs waited for the whole log"
        assert os.read(reader.stdout.fileno(), 100) == b"epoch 1 loss=0.5\n"
        writer.write("ss=0.4\n")
    rest, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert rest == b"epoch 2 loss=0.4\n"


class Runner:
    """Runs the real ``taospec`` command in a subprocess with a private environment."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd

    def __call__(
        self,
        *args: str | os.PathLike[str],
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        merged = {**self.env, **(env or {})}
        return subprocess.run(
            [*taospec_command(), *map(str, args)],
            input=input,
            capture_output=True,
            text=True,
            env=merged,
            cwd=self.cwd,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
            check=False,
        )


COUNTED = (
    "import runpy, sys\n"
    "try:\n"
    "    runpy.run_module('taospec', run_name='__main__', alter_sys=True)\n"
    "finally:\n"
    "    sys.stderr.write(open('/proc/self/io').read())\n"
    "    sys.stderr.write(''.join(l for l in open('/proc/self/status') if l.startswith('VmHWM')))\n"
)
"""``python -c COUNTED ARGS`` runs ``taospec ARGS``, then writes its /proc/PID/io and its
peak resident memory (``VmHWM``) on stderr."""


def bytes_read(stderr: str) -> int:
    """``rchar`` of what :data:`COUNTED` wrote on ``stderr``."""
    (rchar,) = (line.split()[1] for line in stderr.splitlines() if line.startswith("rchar:"))
    return int(rchar)


def peak_memory(stderr: str) -> int:
    """The peak resident memory, in bytes, that :data:`COUNTED` wrote on ``stderr``."""
    (kib,) = (line.split()[1] for line in stderr.splitlines() if line.startswith("VmHWM:"))
    return int(kib) * 1024


def run_counting_reads(runner: Runner, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """``taospec *args`` run for real, and how many bytes its process read (``rchar`` of
    /proc/PID/io: from files and pipes, Python's own imports included)."""
    done = subprocess.run(
        [sys.executable, "-c", COUNTED, *args],
        capture_output=True,
        text=True,
        env=runner.env,
        cwd=runner.cwd,
        timeout=120,
        check=False,
    )
    return done, bytes_read(done.stderr)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A private TAO_STATE_DIR."""
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """A ledger in a private folder, not created until it is written to."""
    return Ledger(tmp_path / "state")


@pytest.fixture(autouse=True)
def interrupts_restored() -> Iterator[None]:
    """Each test starts with the interrupt handlers the one before it found: a cancel run in
    this process holds interrupts off (``interrupts.hold``, SIG_IGN), and every process a
    later test started would inherit that and ignore SIGTERM."""
    saved = {signum: signal.getsignal(signum) for signum in INTERRUPTS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture
def open_tmp(tmp_path: Path) -> Iterator[Path]:
    """A directory every user can traverse (pytest's own tmp dirs are private to root)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="taospec-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    _cancel_slurm_jobs_under(path)
    shutil.rmtree(path, ignore_errors=True)


def _cancel_slurm_jobs_under(folder: Path) -> None:
    """Cancel every Slurm job still queued or running in ``folder``: a test that stops
    before it opens its job's gate would leave that job waiting for a gate in a deleted
    folder, holding the node, and the next run's Slurm tests would find it allocated."""
    if shutil.which("squeue") is None:
        return
    listed = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True,
                            timeout=30, check=False)  # fmt: skip
    inside = [
        job_id
        for job_id, _, workdir in (line.partition(" ") for line in listed.stdout.splitlines())
        if Path(workdir).is_relative_to(folder)
    ]
    if inside:
        subprocess.run(["scancel", *inside], timeout=30, check=False)


@pytest.fixture
def taospec(state_dir: Path, tmp_path: Path) -> Runner:
    """The real command line, with its ledger in ``state_dir``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAOSPEC_")}
    env["TAO_STATE_DIR"] = str(state_dir)
    env["PYTHONPATH"] = str(ROOT)
    return Runner(env, tmp_path)


def _engine_problem() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI on PATH (make test installs Debian's docker.io as root)"
    info = subprocess.run([docker, "info"], capture_output=True, text=True, check=False)
    if info.returncode != 0:
        return "docker info fails: " + (info.stderr.strip().splitlines() or ["?"])[-1]
    image = subprocess.run(
        [docker, "image", "inspect", TEST_IMAGE], capture_output=True, check=False
    )
    if image.returncode != 0:
        return f"the test image {TEST_IMAGE} is missing (scripts/ensure-docker.sh builds it)"
    return None


NO_SKILL_BANK = (
    "TAO_SKILL_BANK is not set: this test reads a tao-skill-bank checkout, which the project "
    "does not ship and a CI machine cannot fetch"
)


@pytest.fixture(scope="session")
def skill_bank() -> Path:
    """The NVIDIA-TAO/tao-skill-bank checkout at $TAO_SKILL_BANK; skips, saying so, without one."""
    bank = os.environ.get("TAO_SKILL_BANK")
    if not bank:
        pytest.skip(reason=NO_SKILL_BANK)
    return Path(bank)


@pytest.fixture(scope="session")
def engine() -> str:
    """A Docker engine that answers, with the test image; skips (or fails in CI) without one."""
    problem = _engine_problem()
    if problem is not None:
        if REQUIRE_ENGINE:
            pytest.fail(f"TAOSPEC_REQUIRE_ENGINE=1 but {problem}")
        pytest.skip(reason=f"no Docker engine: {problem}")
    return TEST_IMAGE


def bash_words(text: str, env: dict[str, str] | None = None) -> list[str]:
    """The words a real bash makes of ``text`` used as a command's arguments."""
    script = 'words() { printf "%s\\0" "$@"; }\nwords ' + text
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        env={"PATH": os.environ["PATH"], **(env or {})},
        check=True,
    )
    return done.stdout.decode().split("\0")[:-1]


T = TypeVar("T")


def returned(call: Callable[[], T], bound: float) -> list[T]:
    """``call``'s answer, in a list left empty when it had not returned within ``bound``
    seconds (a generous bound: the guard of a wait that would otherwise last a minute)."""
    answer: list[T] = []
    worker = threading.Thread(target=lambda: answer.append(call()), daemon=True)
    worker.start()
    worker.join(bound)
    return answer


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose server accepts every connection and never says a word: an ssh
    host that is up as far as TCP goes and then hangs (its sshd stuck, a firewall that
    swallows the traffic). Its connections are closed after the test."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the server closed under it: the test is over
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept
    server.close()
    for connection in held:
        connection.close()


class Relay:
    """A loopback TCP relay to ``target`` that stops forwarding once :meth:`freeze` is called,
    keeping every connection open: a host that answered and then hangs mid-session (a node
    that locks up, a network that starts dropping the traffic)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.frozen = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self.frozen.set()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self.server.close()
        for connection in self.held:
            connection.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the server closed under it: the test is over
            while True:
                client = self.server.accept()[0]
                upstream = socket.create_connection(self.target)
                self.held += [client, upstream]
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not self.frozen.is_set():  # frozen: read and dropped, never answered
                    sink.sendall(data)
            if not self.frozen.is_set():
                sink.shutdown(socket.SHUT_WR)


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (creating parents) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def refused_by_validate_and_run(taospec: Runner, spec: Path, *said: str) -> list[str]:
    """``validate`` and ``run`` of ``spec`` each exit 2 saying each text of ``said``; what
    each wrote on stderr."""
    errors = []
    for verb in ("validate", "run"):
        done = taospec(verb, spec)
        assert done.returncode == 2, done.stderr
        for text in said:
            assert text in done.stderr, (text, done.stderr)
        errors.append(done.stderr)
    return errors


def arguments(values: Sequence[str]) -> list[str]:
    """A copy as a list, for comparisons with bash output."""
    return list(values)


def _slurm_problem() -> str | None:
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        return "no sinfo on PATH (scripts/ensure-slurm.sh installs Slurm as root)"
    done = subprocess.run(
        [sinfo, "-h", "-N", "-o", "%t"], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        return "sinfo fails: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    states = {state.strip("*~#!%$@^-") for state in done.stdout.split()}
    if not states & {"idle", "mix", "alloc"}:
        return f"no Slurm node can take jobs (sinfo: {' '.join(sorted(states)) or 'no nodes'})"
    return None


@pytest.fixture(scope="session")
def slurm() -> None:
    """A Slurm cluster with a node that takes jobs; skips (or fails in CI) without one."""
    problem = _slurm_problem()
    if problem is not None:
        if REQUIRE_ENGINE:
            pytest.fail(f"TAOSPEC_REQUIRE_ENGINE=1 but {problem}")
        why = f"no Slurm cluster: {problem} (scripts/ensure-slurm.sh starts one as root)"
        pytest.skip(reason=why)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for a real engine or cluster carries the ``engine`` marker too."""
    for item in items:
        if {"engine", "slurm"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.engine)
