"""``validate`` over many files in worker processes says exactly what one process says.

The command runs for real; the worker pool is driven directly with real forks.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taospec import workers
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
    serial = taospec("validate", "-j", "1", *files, env={"TAOSPEC_CACHE": "off"})
    assert serial.returncode == 2
    invalid = len(list((EXAMPLES / "invalid").glob("*.yaml"))) * 3 + 2
    assert serial.stderr.endswith(f"{invalid} of {len(files)} job files are invalid\n")
    assert serial.stdout.count(": ok\n") == len(files) - invalid
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    for env in ({"TAOSPEC_CACHE": "off"}, cache, cache):  # no cache, empty cache, filled cache
        for jobs in (["-j", "2"], ["-j", "5"], []):
            run = taospec("validate", *jobs, *files, env=env)
            assert (run.returncode, run.stdout, run.stderr) == (
                serial.returncode,
                serial.stdout,
                serial.stderr,
            ), (env, jobs)
    quiet = taospec("validate", "-q", "-j", "2", *files, env={"TAOSPEC_CACHE": "off"})
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (2, "", serial.stderr)


def test_click_and_the_fast_path_share_the_jobs_option(taospec: Runner, tmp_path: Path) -> None:
    files = valid_files(tmp_path, 40)
    fast = taospec("validate", "--jobs", "3", *files)
    through_click = taospec("validate", "--jobs=3", *files)
    assert fast.returncode == through_click.returncode == 0
    assert fast.stdout == through_click.stdout == "".join(f"{f}: ok\n" for f in files)
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
    env.update({"TAOSPEC_CACHE": "off", "PYTHONPATH": str(ROOT)})
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


def no_process_left(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_stops_every_process_and_exits_130(tmp_path: Path) -> None:
    process, _ = started_with_workers(tmp_path, 3000)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal does: the whole group
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr == "taospec: interrupted\n"
    assert stdout == ""
    assert no_process_left(process.pid)


def test_ctrl_c_sent_to_the_parent_alone_stops_the_workers(tmp_path: Path) -> None:
    process, _ = started_with_workers(tmp_path, 3000)
    os.kill(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr == "taospec: interrupted\n"
    assert no_process_left(process.pid)


def test_a_killed_worker_is_an_internal_error_not_a_missing_file(tmp_path: Path) -> None:
    process, found = started_with_workers(tmp_path, 3000)
    os.kill(found[0], signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 3
    assert "a worker process was killed by signal 9 before answering for " in stderr
    assert "job files are invalid" not in stderr
    assert stdout == ""
    assert no_process_left(process.pid)


# -- the pool itself -----------------------------------------------------------


@pytest.fixture(autouse=True)
def collectable_again() -> Iterator[None]:
    """The pool freezes what the process holds before it forks; give it back to the collector."""
    yield
    gc.unfreeze()


def reaped() -> bool:
    """True when this process has no child left to reap."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def squares(count: int, size: int) -> Iterator[object]:
    return workers.ordered(lambda index: (index * index, os.getpid()), count, size)


def test_answers_come_in_order_from_several_processes() -> None:
    answers = list(squares(500, 3))
    assert [value for value, _ in answers] == [index * index for index in range(500)]
    pids = {pid for _, pid in answers}
    assert len(pids) == 3
    assert os.getpid() not in pids
    assert reaped()


def test_an_exception_in_a_worker_fails_at_its_item_after_every_earlier_answer() -> None:
    def work(index: int) -> int:
        if index == 137:
            raise ValueError("item 137 is bad")
        return index

    seen: list[int] = []
    with pytest.raises(workers.WorkerFailed) as failed:
        seen.extend(workers.ordered(work, 400, 2, lambda index: f"file-{index}.yaml"))
    assert seen == list(range(137))
    assert "failed on file-137.yaml" in str(failed.value)
    assert "ValueError: item 137 is bad" in str(failed.value)
    assert failed.value.exit_code == 3
    assert reaped()


def test_a_worker_that_dies_fails_its_first_unanswered_item() -> None:
    def work(index: int) -> int:
        if index == 250:
            os.kill(os.getpid(), signal.SIGKILL)
        return index

    seen: list[int] = []
    with pytest.raises(workers.WorkerFailed, match="killed by signal 9 before answering for"):
        seen.extend(workers.ordered(work, 400, 2))
    assert seen == list(range(len(seen)))
    assert len(seen) <= 250
    assert reaped()


def test_stopping_early_kills_and_reaps_the_workers() -> None:
    answers = squares(100_000, 2)
    value, pid = next(answers)
    assert value == 0
    assert pid != os.getpid()
    answers.close()
    assert reaped()
