"""validate's journal of files known valid: one line per valid file, never a wrong verdict."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from taospec import cache
from taospec.diagnostics import SpecError
from tests.conftest import ROOT, Runner, taospec_command

EXAMPLES = ROOT / "tests" / "examples"


def journal(cache_home: Path) -> Path:
    return cache_home / "taospec" / cache.VERDICTS_FILE


def job_files(folder: Path) -> tuple[list[str], list[str]]:
    """(valid, invalid) job files: 40 distinct valid ones and every invalid example."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (EXAMPLES / "valid" / "minimal.yaml").read_text()
    valid = []
    for index in range(40):
        path = folder / f"job-{index:02d}.yaml"
        path.write_text(text.replace("num_epochs: 1", f"num_epochs: {index + 1}"))
        valid.append(str(path))
    invalid = []
    for source in sorted((EXAMPLES / "invalid").glob("*.yaml")):
        shutil.copy(source, folder / source.name)
        invalid.append(str(folder / source.name))
    return valid, invalid


@pytest.fixture
def fresh_process_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process as a new one would start: journal not read, nothing unsaved."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_verdicts", None)
    monkeypatch.setattr(cache, "_unsaved", [])
    return tmp_path / "cache"


def test_validate_keeps_one_line_per_valid_file_and_nothing_else(
    taospec: Runner, tmp_path: Path
) -> None:
    valid, invalid = job_files(tmp_path / "jobs")
    files = [f for pair in zip(valid, invalid, strict=False) for f in pair]
    files += valid[len(invalid) :]
    assert len(set(files)) == len(files) == len(valid) + len(invalid)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    cold = taospec("validate", "-j", "2", *files, env=env)
    assert cold.returncode == 2
    lines = journal(tmp_path / "cache").read_bytes().split(b"\n")
    assert lines[0] + b"\n" == cache.VERDICTS_MAGIC
    assert lines[-1] == b""
    keys = lines[1:-1]
    assert len(keys) == len(set(keys)) == len(valid)
    assert all(len(key) == 64 and int(key, 16) >= 0 for key in keys)
    assert sorted(p.name for p in (tmp_path / "cache" / "taospec").iterdir()) == [
        cache.VERDICTS_FILE
    ]
    warm = taospec("validate", "-j", "2", *files, env=env)
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        cold.returncode,
        cold.stdout,
        cold.stderr,
    )
    assert journal(tmp_path / "cache").read_bytes().count(b"\n") == len(keys) + 1  # nothing new


def test_a_file_changed_after_it_was_found_valid_is_checked_again(
    taospec: Runner, tmp_path: Path
) -> None:
    valid, _ = job_files(tmp_path / "jobs")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert taospec("validate", "-q", *valid, env=env).returncode == 0
    Path(valid[7]).write_text(Path(valid[7]).read_text().replace("action: train", "action: 7"))
    done = taospec("validate", "-q", *valid, env=env)
    assert done.returncode == 2
    assert (
        done.stderr
        == f"{valid[7]}:3:9: $.action: 7 is not a string\n1 of 40 job files are invalid\n"
    )


def test_the_journal_is_read_once_and_known_files_are_not_checked_again(
    fresh_process_state: Path, tmp_path: Path
) -> None:
    valid, invalid = job_files(tmp_path / "jobs")
    assert all(cache.check_valid(file) for file in valid[:3])
    assert not journal(fresh_process_state).exists()  # a batch is not full yet
    cache.save_verdicts()
    assert journal(fresh_process_state).read_bytes().count(b"\n") == 4
    assert not any(cache.check_valid(file) for file in valid[:3])
    cache._verdicts = None  # as a new process
    assert not any(cache.check_valid(file) for file in valid[:3])
    assert cache.check_valid(valid[3])
    with pytest.raises(SpecError):
        cache.check_valid(invalid[0])
    cache.save_verdicts()
    assert journal(fresh_process_state).read_bytes().count(b"\n") == 5


def forge(cache_home: Path, files: list[str]) -> None:
    """A journal that says ``files`` are valid (what only its owner could write)."""
    keys = [cache.Snapshot(file).key("valid", ()).encode() for file in files]
    path = journal(cache_home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(cache.VERDICTS_MAGIC + b"".join(key + b"\n" for key in keys))


def test_the_journal_is_trusted_only_in_a_private_folder_and_as_a_regular_file(
    fresh_process_state: Path, tmp_path: Path
) -> None:
    _, invalid = job_files(tmp_path / "jobs")
    forge(fresh_process_state, invalid[:1])
    assert cache.check_valid(invalid[0]) is False  # the owner's own journal is believed
    folder = fresh_process_state / "taospec"
    for unsafe in (0o777, 0o720, 0o702):
        folder.chmod(unsafe)
        cache._verdicts = None
        with pytest.raises(SpecError):
            cache.check_valid(invalid[0])
    folder.chmod(0o700)
    real = tmp_path / "elsewhere"
    journal(fresh_process_state).rename(real)
    journal(fresh_process_state).symlink_to(real)
    cache._verdicts = None
    with pytest.raises(SpecError):
        cache.check_valid(invalid[0])


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # the last line without its newline: still a whole key
        lambda data: data[:-20],  # a torn last line
        lambda data: data.replace(b"\n", b"", 1),  # the magic line runs into a key
        lambda data: data[: len(cache.VERDICTS_MAGIC)] + b"x" + data[len(cache.VERDICTS_MAGIC) :],
        lambda data: b"taospec-verdicts 9\n" + data[len(cache.VERDICTS_MAGIC) :],
        lambda data: b"",
    ],
)
def test_damaged_lines_are_never_a_verdict(
    fresh_process_state: Path, tmp_path: Path, damage: object
) -> None:
    valid, _ = job_files(tmp_path / "jobs")
    forge(fresh_process_state, valid[:2])
    path = journal(fresh_process_state)
    damaged = damage(path.read_bytes())  # type: ignore[operator]
    path.write_bytes(damaged)
    believed = damaged.startswith(cache.VERDICTS_MAGIC)
    whole = {line for line in damaged.split(b"\n")[1:] if len(line) == 64}
    for file in valid[:3]:
        key = cache.Snapshot(file).key("valid", ()).encode()
        assert cache.check_valid(file) is not (believed and key in whole)


def test_a_journal_grown_too_large_is_started_afresh(
    fresh_process_state: Path, tmp_path: Path
) -> None:
    valid, _ = job_files(tmp_path / "jobs")
    path = journal(fresh_process_state)
    path.parent.mkdir(parents=True, mode=0o700)
    filler = b"f" * 64 + b"\n"
    path.write_bytes(cache.VERDICTS_MAGIC + filler * (cache.VERDICTS_MAX_BYTES // len(filler) + 1))
    assert cache.check_valid(valid[0])
    cache.save_verdicts()
    key = cache.Snapshot(valid[0]).key("valid", ()).encode()
    assert path.read_bytes() == cache.VERDICTS_MAGIC + key + b"\n"
    assert [p.name for p in path.parent.iterdir()] == [cache.VERDICTS_FILE]


def test_many_processes_appending_at_once_lose_no_line(taospec: Runner, tmp_path: Path) -> None:
    folders = [tmp_path / f"jobs-{n}" for n in range(4)]
    batches = [job_files(folder)[0] for folder in folders]
    env = {**taospec.env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    running = [
        subprocess.Popen([*taospec_command(), "validate", "-q", "-j", "2", *files], env=env)
        for files in batches
    ]
    assert [process.wait(timeout=120) for process in running] == [0] * len(running)
    keys = journal(tmp_path / "cache").read_bytes().split(b"\n")
    keys = [key for key in keys if key and key + b"\n" != cache.VERDICTS_MAGIC]
    assert all(len(key) == 64 for key in keys)
    assert len(set(keys)) == sum(len(files) for files in batches)
