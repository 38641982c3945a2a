"""``validate`` over many files in worker processes says exactly what one process says."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, Runner, taospec_command, write

EXAMPLES = ROOT / "tests" / "examples"


def mixed_files(folder: Path, copies: int = 3) -> list[str]:
    """Valid and invalid job files, each several times under its own name, interleaved."""
    shutil.copy(ROOT / "jobs" / "versions.yaml", folder / "versions.yaml")
    sources = [
        *sorted((EXAMPLES / "valid").glob("*.yaml")),
        *sorted((EXAMPLES / "invalid").glob("*.yaml")),
        *sorted(p for p in (ROOT / "jobs").glob("*.yaml") if p.name != "versions.yaml"),
    ]
    files = []
    for copy in range(copies):
        for source in sources:
            target = folder / f"{source.parent.name}-{source.stem}-{copy}.yaml"
            target.write_bytes(source.read_bytes())
            files.append(str(target))
    files.insert(len(files) // 2, str(folder / "missing.yaml"))
    files.append(str(folder))  # a directory
    return files


def valid_files(folder: Path, count: int) -> list[str]:
    """``count`` distinct valid job files."""
    text = (EXAMPLES / "valid" / "minimal.yaml").read_text()
    return [
        str(
            write(
                folder / f"job-{index:04d}.yaml",
                text.replace("num_epochs: 1", f"num_epochs: {index + 1}"),
            )
        )
        for index in range(count)
    ]


def test_workers_print_what_one_process_prints(taospec: Runner, tmp_path: Path) -> None:
    files = mixed_files(tmp_path)
    assert len(files) > 2 * 32
    serial = taospec("validate", "-j", "1", *files)
    assert serial.returncode == 2
    invalid = len(list((EXAMPLES / "invalid").glob("*.yaml"))) * 3 + 2
    assert serial.stderr.endswith(f"{invalid} of {len(files)} job files are invalid\n")
    assert serial.stdout.count(": ok\n") == len(files) - invalid
    for jobs in (["-j", "2"], ["-j", "5"], [], ["--jobs=3"]):
        run = taospec("validate", *jobs, *files)
        assert (run.returncode, run.stdout, run.stderr) == (
            serial.returncode,
            serial.stdout,
            serial.stderr,
        ), jobs
    quiet = taospec("validate", "-q", "-j", "2", *files)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (2, "", serial.stderr)


def test_a_jobs_count_below_one_is_refused(taospec: Runner, tmp_path: Path) -> None:
    files = valid_files(tmp_path, 40)
    refused = taospec("validate", "-j", "0", *files)
    assert refused.returncode == 2
    assert "0 is not in the range x>=1" in refused.stderr


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(word) for word in text.split()]


def started_with_workers(tmp_path: Path, count: int) -> tuple[subprocess.Popen[str], list[int]]:
    """A real ``taospec validate -j 2`` over ``count`` files, once its workers are running."""
    files = valid_files(tmp_path, count)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAOSPEC_")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT prints every thread's stack (see finished)
    process = subprocess.Popen(
        [*taospec_command(), "validate", "-q", "-j", "2", *files],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(found := children(process.pid)) < 2:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the workers never started"
        time.sleep(0.005)
    return process, found


def finished(process: subprocess.Popen[str]) -> tuple[str, str]:
    """``process``'s output once it has ended; if it has not within a minute, it is
    stopped with SIGABRT and the test fails showing where each of its threads was."""
    try:
        return process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            # The workers hold the output pipes open: the output ends only with them.
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        raise AssertionError(f"validate did not end; its threads were at:\n{stderr}") from None


def no_process_left(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGHUP, signal.SIGTERM], ids=lambda s: s.name
)
def test_an_interrupt_to_the_group_stops_every_process_and_exits_130(
    tmp_path: Path, signum: int
) -> None:
    """Ctrl-C in a terminal, a hangup, or ``kill -TERM -<group>``: the whole group gets it."""
    process, _ = started_with_workers(tmp_path, 3000)
    os.killpg(process.pid, signum)
    stdout, stderr = finished(process)
    assert process.returncode == 130, stderr
    assert stderr.strip() == "taospec: interrupted"  # after the blank line closing the ^C echo
    assert stdout == ""
    assert no_process_left(process.pid)


def test_ctrl_c_sent_to_the_parent_alone_stops_the_workers(tmp_path: Path) -> None:
    process, _ = started_with_workers(tmp_path, 3000)
    os.kill(process.pid, signal.SIGINT)
    _, stderr = finished(process)
    assert process.returncode == 130
    assert stderr.strip() == "taospec: interrupted"  # after the blank line closing the ^C echo
    assert no_process_left(process.pid)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_a_worker_stopped_by_a_signal_is_an_internal_error(tmp_path: Path, signum: int) -> None:
    """Neither a missing file nor an interruption of taospec: no verdict, exit 3. A worker
    that took SIGTERM as Ctrl-C sent it back as its files' answer, and taospec said
    "interrupted"; the pool's own SIGTERM (stopping the workers left when one died) then
    did not end a worker that was checking files, which could wait for ever on a lock the
    dead one held, and this test with it."""
    process, found = started_with_workers(tmp_path, 3000)
    os.kill(found[0], signum)
    stdout, stderr = finished(process)
    assert process.returncode == 3, stderr
    assert stderr.strip() == "taospec: a validate worker process died; no verdict was given"
    assert stdout == ""
    assert no_process_left(process.pid)
