"""Faults on the ledger's side: damaged records, dead writers' debris, full and read-only disks.

Disks are real: a small tmpfs that fills up, and a read-only bind mount of the
state root (the tests run as root and unmount what they mount).
"""

from __future__ import annotations

import errno
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taospec import durable
from taospec.ledger import Ledger, LedgerCorrupt, WriteFailed
from tests.conftest import Runner, taospec_command, write
from tests.ledgers import open_job

DEAD_PID = 4_194_305  # above the largest pid_max Linux allows


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs: a few records fit, then it is full."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a writable state root, a read-only view of it)."""
    state, view = tmp_path / "ro-state", tmp_path / "ro-view"
    state.mkdir()
    view.mkdir()
    mount("--bind", str(state), str(view))
    try:
        mount("-o", "remount,bind,ro", str(view))
        yield state, view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=True)


def damaged(ledger: Ledger, good: str) -> dict[str, bytes]:
    """Record files no reader can use, beside a good one: name -> content."""
    record = (Path(ledger.jobs_dir) / f"{good}.json").read_bytes()
    files = {
        "foreign-1.json": json.dumps({"id": "foreign-1", "owner": "someone"}).encode(),
        "text-1.json": b"not json at all\n",
        "list-1.json": b"[1, 2, 3]\n",
        "cut-1.json": record[: len(record) // 2],
        "copy-1.json": record,  # the good record again, under another name
        "deep-1.json": b"[" * 100_000 + b"]" * 100_000,  # too deep for Python's decoder
    }
    for name, data in files.items():
        (Path(ledger.jobs_dir) / name).write_bytes(data)
    return files


def test_ls_skips_each_unreadable_record_with_one_warning(ledger: Ledger) -> None:
    good = [open_job(ledger).id for _ in range(2)]
    files = damaged(ledger, good[0])
    warnings: list[str] = []
    assert [r.id for r in ledger.list(warn=warnings.append)] == good[::-1]
    assert len(warnings) == len(files)
    for name in files:
        (line,) = [w for w in warnings if f"/{name}:" in w]
        assert "\n" not in line
    assert any("holds the record of" in w for w in warnings)


def test_record_list_reports_unreadable_records_and_goes_on(
    taospec: Runner, state_dir: Path
) -> None:
    ledger = Ledger(state_dir)
    good = open_job(ledger, results_root="/r")
    files = damaged(ledger, good.id)
    done = taospec("record", "list")
    assert done.returncode == 0
    # As the recorder lists them: a JSON object field by field, "?" where it lacks one,
    # and the id it holds (copy-1 holds the good record), in file-name order.
    line = f"{good.id}\tdocker\tPENDING\t/r/{good.id}"
    assert done.stdout.splitlines() == [line, "foreign-1\t?\t?\t?", line]
    unlisted = [name for name in files if name not in ("foreign-1.json", "copy-1.json")]
    corrupt = sorted(f"{Path(name).stem}\t<corrupt>" for name in unlisted)
    assert sorted(done.stderr.splitlines()) == corrupt
    listed = taospec("ls")
    assert listed.returncode == 0
    assert good.id in listed.stdout
    assert len(listed.stderr.splitlines()) == len(files)


@pytest.mark.parametrize("verb", ["status", "show", "logs", "cancel", "retry"])
def test_a_verb_asked_about_a_damaged_record_names_it_and_exits_2(
    taospec: Runner, state_dir: Path, verb: str
) -> None:
    ledger = Ledger(state_dir)
    good = open_job(ledger, results_root="/r")
    files = damaged(ledger, good.id)
    side = open_job(ledger, results_root="/r")
    sidecar = Path(ledger.jobs_dir) / f"{side.id}.taospec"
    sidecar.write_bytes(b"[")  # the record is whole, what taospec keeps beside it is not
    files[sidecar.name] = b"["
    for name in files:
        job_id = name.rpartition(".")[0]
        done = taospec(verb, job_id)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"taospec: {ledger.jobs_dir}/{name}: ")
    for name, data in files.items():
        assert (Path(ledger.jobs_dir) / name).read_bytes() == data
    assert ledger.get(good.id).transitions == good.transitions


def aged(path: Path) -> Path:
    """``path``, last written longer ago than a sweep waits for."""
    then = time.time() - durable.STALE_AFTER - 1
    os.utime(path, (then, then))
    return path


def test_dead_writers_temp_files_go_and_live_ones_stay(ledger: Ledger) -> None:
    record = open_job(ledger)
    dead = Path(ledger.jobs_dir) / f".{record.id}.json.{DEAD_PID}.tmp"
    live = Path(ledger.jobs_dir) / f".{record.id}.json.{os.getpid()}.tmp"
    foreign = Path(ledger.jobs_dir) / f".{record.id}.json.lock"
    for path in (dead, live, foreign):
        aged(write(path, "{"))
    assert [r.id for r in ledger.list()] == [record.id]
    assert not dead.exists()
    assert live.exists()
    assert foreign.exists()
    live.unlink()


def test_a_fresh_temp_file_of_a_process_this_host_cannot_see_stays(ledger: Ledger) -> None:
    # A writer in a container (another pid namespace) or on another host sharing the folder
    # is alive where os.kill cannot see it: ls removed its temp file between its fsync and
    # its rename, and the recorder's mark failed with FileNotFoundError and was lost.
    record = open_job(ledger)
    other = Path(ledger.jobs_dir) / f".{record.id}.json.{DEAD_PID}.tmp"
    write(other, "{")
    ledger.list()
    assert other.exists()
    aged(other)
    Ledger(ledger.root).list()
    assert not other.exists()


def test_a_write_removes_the_temp_files_of_writers_that_died_since_ls(ledger: Ledger) -> None:
    record = open_job(ledger)
    writer = subprocess.Popen(["sleep", "60"])
    temp = aged(write(Path(ledger.jobs_dir) / f".{record.id}.json.{writer.pid}.tmp", "{"))
    stat = Path(ledger.jobs_dir).stat()  # settled, so the listing remembers what it saw
    os.utime(ledger.jobs_dir, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10_000_000_000))
    ledger.list()
    assert temp.exists()  # its writer is alive
    writer.kill()
    writer.wait()
    Ledger(ledger.root).mark(record.id, "RUNNING")
    assert not temp.exists()


def test_record_list_removes_dead_writers_temp_files(taospec: Runner, state_dir: Path) -> None:
    record = open_job(Ledger(state_dir))
    dead = aged(write(state_dir / "jobs" / f".{record.id}.json.{DEAD_PID}.tmp", "{"))
    assert taospec("record", "list").returncode == 0
    assert not dead.exists()


def test_a_missing_sidecar_reads_as_none(ledger: Ledger) -> None:
    noted = open_job(ledger, sidecar={"spec": "/jobs/a.yaml"})
    (Path(ledger.jobs_dir) / f"{noted.id}.taospec").unlink()
    assert ledger.sidecar(noted.id) == {}


def test_a_full_disk_fails_one_write_with_its_path_and_leaves_no_ghost(
    small_disk: Path, taospec: Runner
) -> None:
    ledger = Ledger(small_disk / "state")
    opened: list[str] = []
    with pytest.raises(WriteFailed) as caught:  # noqa: PT012 - fill it up
        for _ in range(10_000):
            opened.append(
                open_job(ledger, sidecar={"notes": "x" * 2000}, upload_excludes=["y" * 2000]).id
            )
    message = str(caught.value)
    assert message.startswith(f"cannot write {small_disk}/state/")
    assert message.endswith("No space left on device")
    assert "\n" not in message
    names = os.listdir(ledger.jobs_dir)
    assert [n for n in names if n.endswith(".tmp")] == []
    records = sorted(n[: -len(".json")] for n in names if n.endswith(".json"))
    assert records == sorted(opened)  # the failed open removed what it wrote
    for job_id in opened:
        assert ledger.get(job_id).id == job_id
    env = {"TAO_STATE_DIR": str(ledger.root)}
    done = taospec(
        "record", "open", "--platform", "docker", "--image", "i" * 60_000, "--network-arch",
        "a", "--action", "b", "--storage-tier", "A", "--results-root", "/r", env=env,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(f"cannot write {ledger.jobs_dir}/")
    assert done.stderr.endswith("No space left on device\n")
    assert len(done.stderr.splitlines()) == 1
    assert sorted(n for n in os.listdir(ledger.jobs_dir) if n.endswith(".json")) == [
        f"{i}.json" for i in sorted(opened)
    ]


def test_a_read_only_ledger_refuses_writes_in_one_line_and_still_lists(
    read_only: tuple[Path, Path], taospec: Runner
) -> None:
    state, view = read_only
    record = open_job(Ledger(state))
    env = {"TAO_STATE_DIR": str(view)}
    marked = taospec("record", "mark", record.id, "--state", "RUNNING", env=env)
    assert marked.returncode == 1
    assert marked.stderr.startswith(f"cannot write {view}/jobs/")
    assert marked.stderr.endswith("Read-only file system\n")
    assert len(marked.stderr.splitlines()) == 1
    opened = taospec(
        "record", "open", "--platform", "docker", "--image", "i", "--network-arch", "a",
        "--action", "b", "--storage-tier", "A", "--results-root", "/r", env=env,
    )  # fmt: skip
    assert opened.returncode == 1
    assert "Read-only file system" in opened.stderr
    listed = taospec("ls", env=env)
    assert listed.returncode == 0
    assert record.id in listed.stdout
    with pytest.raises(WriteFailed, match="Read-only file system"):
        Ledger(view).mark(record.id, "RUNNING")
    assert Ledger(state).get(record.id) == record


def test_an_open_that_cannot_journal_removes_its_record(ledger: Ledger) -> None:
    open_job(ledger)
    Path(ledger.journal_path).unlink()
    Path(ledger.journal_path).mkdir()  # appending now fails: EISDIR
    with pytest.raises(WriteFailed, match="ledger.jsonl: Is a directory"):
        open_job(ledger, sidecar={"spec": "/jobs/a.yaml"})
    names = sorted(os.listdir(ledger.jobs_dir))
    assert len([n for n in names if n.endswith(".json")]) == 1
    assert [n for n in names if n.endswith((".taospec", ".tmp"))] == []


def test_json_nested_too_deeply_is_damage_in_a_sidecar_and_the_journal(ledger: Ledger) -> None:
    record = open_job(ledger, sidecar={"note": "kept"})
    other = open_job(ledger)
    with Path(ledger.journal_path).open("ab") as journal:
        journal.write(b"[" * 4000 + b"\n")
    assert [r.id for r in ledger.list()] == [other.id, record.id]
    (Path(ledger.jobs_dir) / f"{record.id}.taospec").write_bytes(b"[" * 100_000)
    with pytest.raises(LedgerCorrupt, match="nests too deeply"):
        ledger.sidecar(record.id)


def test_a_damaged_record_is_refused_when_read_by_id(ledger: Ledger) -> None:
    record = open_job(ledger)
    (Path(ledger.jobs_dir) / f"{record.id}.json").write_text("[]")
    with pytest.raises(LedgerCorrupt, match="must be a JSON object"):
        ledger.mark(record.id, "RUNNING")


KILL_AT_FSYNC = (
    "import os, sys; from taospec import durable; real = os.fsync\n"
    "def dying(fd):\n"
    "    if os.path.basename(os.readlink(f'/proc/self/fd/{fd}')).startswith(sys.argv[1]):\n"
    "        os._exit(137)  # as SIGKILL: the data is written, nothing after it happens\n"
    "    real(fd)\n"
    "durable.os.fsync = dying\n"
)
"""A program's start that makes it die when it fsyncs a file whose name starts with argv[1]."""


def killed_while_writing(start: str, program: str) -> None:
    """Run ``program`` in a new Python, killed the moment it has written a file whose name
    starts with ``start`` (before that file is renamed or linked anywhere)."""
    died = subprocess.run([sys.executable, "-c", KILL_AT_FSYNC + program, start], check=False)
    assert died.returncode == 137


def test_a_create_killed_half_way_leaves_the_name_free(tmp_path: Path) -> None:
    # the name was reserved empty before the bytes were written: a kill between the two
    # left an empty file that no reader could use and no creator could take again
    target = tmp_path / "one.json"
    killed_while_writing(".one.json.", f"durable.create_exclusive({str(target)!r}, b'x' * 1000)")
    assert not target.exists()
    assert durable.create_exclusive(target, b"whole\n")
    assert target.read_bytes() == b"whole\n"
    assert not durable.create_exclusive(target, b"again\n")
    assert target.read_bytes() == b"whole\n"
    assert [n for n in os.listdir(tmp_path) if not n.endswith(".tmp")] == ["one.json"]


def test_without_hard_links_a_create_reserves_the_name_and_renames_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as on FAT or a FUSE mount: link() is refused, the file system itself is real
    def refused(*_: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(durable.os, "link", refused)
    target = tmp_path / "one.json"
    assert durable.create_exclusive(target, b"whole\n", mode=0o644)
    assert target.read_bytes() == b"whole\n"
    assert target.stat().st_mode & 0o777 == 0o644 & ~current_umask()
    assert not durable.create_exclusive(target, b"again\n")
    assert target.read_bytes() == b"whole\n"
    assert sorted(os.listdir(tmp_path)) == ["one.json"]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("killed_in", ["taospec", "json"])
def test_an_open_killed_before_its_record_is_whole_leaves_no_record(
    ledger: Ledger, killed_in: str
) -> None:
    # the record was written before its sidecar: a kill between the two left a PENDING
    # record without the submitter note that lets `status` close a launch that died
    Path(ledger.jobs_dir).mkdir(parents=True)
    program = (
        "from taospec.ledger import Ledger; from tests.ledgers import open_job\n"
        f"open_job(Ledger({str(ledger.root)!r}), job_id='cut-1', sidecar={{'note': 'x'}})"
    )
    killed_while_writing(f".cut-1.{killed_in}.", program)  # the sidecar's or the record's temp
    assert not (Path(ledger.jobs_dir) / "cut-1.json").exists()
    assert [r.id for r in ledger.list()] == []
    record = open_job(ledger, job_id="cut-1", sidecar={"note": "the second open's"})
    assert ledger.get("cut-1") == record
    assert ledger.sidecar("cut-1") == {"note": "the second open's"}


def opening_cut(ledger: Ledger, job_id: str) -> str:
    """A program that opens ``job_id`` on ``ledger`` with a sidecar note."""
    return (
        "from taospec.ledger import Ledger; from tests.ledgers import open_job\n"
        f"open_job(Ledger({str(ledger.root)!r}), job_id={job_id!r}, sidecar={{'note': 'x'}})"
    )


def test_prune_removes_the_sidecar_an_open_killed_before_its_record_left(
    ledger: Ledger, taospec: Runner
) -> None:
    # nothing removed it: the next open of that id replaces it, and ids are random
    Path(ledger.jobs_dir).mkdir(parents=True)
    killed_while_writing(".cut-1.json.", opening_cut(ledger, "cut-1"))
    left = Path(ledger.jobs_dir) / "cut-1.taospec"
    assert json.loads(left.read_bytes()) == {"note": "x"}
    recorded = open_job(ledger, sidecar={"note": "a recorded job's"})
    assert taospec("prune", "--older-than", "1h").stdout == ""
    dry = taospec("prune", "-n")
    assert dry.stdout == "cut-1: would remove its sidecar, which no record goes with\n"
    assert left.exists()
    pruned = taospec("prune")
    assert (pruned.returncode, pruned.stdout, pruned.stderr) == (
        0,
        "cut-1: sidecar removed: no record goes with it\n",
        "",
    )
    assert not left.exists()
    assert ledger.sidecar(recorded.id) == {"note": "a recorded job's"}
    assert taospec("prune").stdout == ""


PAUSE_AT_FSYNC = (
    "import os, sys; from taospec import durable; real = os.fsync\n"
    "def pausing(fd):\n"
    "    if os.path.basename(os.readlink(f'/proc/self/fd/{fd}')).startswith(sys.argv[1]):\n"
    "        print('paused', flush=True)\n"
    "        sys.stdin.readline()\n"
    "    real(fd)\n"
    "durable.os.fsync = pausing\n"
)
"""A program's start that makes it wait for a line on stdin when it fsyncs a file whose name
starts with argv[1], having said ``paused``."""


def waiting_for_a_flock(pid: int) -> bool:
    return any(
        line.split()[1:3] == ["->", "FLOCK"] and line.split()[5] == str(pid)
        for line in Path("/proc/locks").read_text().splitlines()
    )


def test_prune_keeps_the_sidecar_of_an_open_in_progress(ledger: Ledger, taospec: Runner) -> None:
    # prune lists the sidecar before the open writes its record: it waits for the open's
    # lock, then finds the record, and leaves both as they are
    Path(ledger.jobs_dir).mkdir(parents=True)
    command = [sys.executable, "-c", PAUSE_AT_FSYNC + opening_cut(ledger, "cut-2"), ".cut-2.json."]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as opener:
        assert opener.stdin is not None
        assert opener.stdout is not None
        try:
            assert select.select([opener.stdout], [], [], 30)[0], "the open never paused"
            assert opener.stdout.readline() == "paused\n"
            with subprocess.Popen(
                [*taospec_command(), "prune"],
                env=taospec.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ) as prune:
                deadline = time.monotonic() + 30
                while not waiting_for_a_flock(prune.pid):
                    assert prune.poll() is None, prune.communicate()
                    assert time.monotonic() < deadline, "prune never waited for the open's lock"
                    time.sleep(0.01)
                opener.stdin.write("\n")
                opener.stdin.flush()
                assert opener.wait(timeout=30) == 0
                out, err = prune.communicate(timeout=60)
        finally:
            opener.kill()
    assert (prune.returncode, out, err) == (0, "", "")
    assert ledger.sidecar("cut-2") == {"note": "x"}
    assert ledger.get("cut-2").state == "PENDING"


def test_a_temp_file_left_linked_to_the_record_is_never_written_through(ledger: Ledger) -> None:
    # a creator killed between linking the record and removing its temp left the temp as a
    # second name of the record; the next writer of that pid (pid 1 in every container)
    # opened it with O_TRUNC and emptied the record in place
    record = open_job(ledger)
    path = Path(ledger.jobs_dir) / f"{record.id}.json"
    temp = Path(durable.temp_path(str(path)))
    os.link(path, temp)
    before = path.read_bytes()
    ledger.mark(record.id, "RUNNING", message="launched")
    assert ledger.get(record.id).state == "RUNNING"
    assert path.stat().st_nlink == 1
    assert not temp.exists()
    assert before != path.read_bytes()


@pytest.mark.parametrize("detach", [True, False], ids=["detach", "follow"])
def test_a_run_on_a_read_only_state_folder_says_nothing_was_launched_and_where(
    read_only: tuple[Path, Path], taospec: Runner, tmp_path: Path, detach: bool
) -> None:
    _, view = read_only
    marker = tmp_path / "ran"
    spec = write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\nimage: busybox:1\n"
        f"results_root: {tmp_path / 'results'}\ncommand: touch {marker}\n",
    )
    refused = taospec("run", *(["-d"] if detach else []), spec, env={"TAO_STATE_DIR": str(view)})
    assert refused.returncode == 3, refused.stdout + refused.stderr
    said = [line for line in refused.stderr.splitlines() if "starting" not in line]
    assert len(said) == 1, refused.stderr
    assert f"cannot write {view}/" in said[0]
    assert "Read-only file system; nothing was launched" in said[0]
    assert f"the state folder {view} (TAO_STATE_DIR)" in said[0]
    assert not marker.exists()
    assert not (tmp_path / "results").exists()


def test_a_record_whose_index_note_cannot_be_written_ends_error_with_nothing_launched(
    state_dir: Path, taospec: Runner, tmp_path: Path
) -> None:
    # the record opens; the note that lets other runs see it cannot be written
    write(state_dir / "taospec" / "works", "a file where a folder of notes belongs\n")
    marker = tmp_path / "ran"
    spec = write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\nimage: busybox:1\n"
        f"results_root: {tmp_path / 'results'}\ncommand: touch {marker}\n",
    )
    refused = taospec("run", "-d", spec)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "; nothing was launched: taospec writes to the state folder" in refused.stderr
    [record] = [json.loads(p.read_text()) for p in (state_dir / "jobs").glob("*.json")]
    assert (record["terminal_state"], record["err_class"]) == ("ERROR", "ERR_INFRA")
    assert "nothing was launched" in record["transitions"][-1]["message"]
    assert not marker.exists()


@pytest.mark.parametrize("cut", ["interrupt", "sync failed"])
def test_an_open_cut_short_once_its_record_is_linked_leaves_no_record(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, cut: str
) -> None:
    # A SIGHUP to a run's process group landed right after the record's name was linked:
    # the open removed the sidecar and left the record, PENDING with no submitter note,
    # which nothing could close. A failed sync of the folder did the same.
    link = os.link
    linked: list[str] = []

    def linking(source: str, target: str) -> None:
        link(source, target)
        linked.append(target)
        if cut == "interrupt":
            raise KeyboardInterrupt

    def sync(folder: str) -> None:
        if linked:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(durable.os, "link", linking)
    if cut == "sync failed":
        monkeypatch.setattr(durable, "fsync_folder", sync)
    with pytest.raises(KeyboardInterrupt if cut == "interrupt" else WriteFailed):
        open_job(ledger, job_id="cut-2", sidecar={"note": "x"})
    assert linked == [os.path.join(ledger.jobs_dir, "cut-2.json")]
    assert [n for n in os.listdir(ledger.jobs_dir) if not n.startswith(".")] == []
