"""The cache can never change what taospec prints: cold, warm and off give the same bytes.

Every example job and every hostile input is run three ways (no cache, an
empty cache, the cache that run filled) and compared whole; any byte changed
in a job file or versions.yaml, a new versions.yaml nearer the job, another
``--user`` or a damaged entry must give what a run without the cache gives.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from taospec import cache, codec, yamlsrc
from taospec.identity import launcher
from taospec.jobfile import load_jobfile
from taospec.plan import render, upstream_stand_in
from taospec.spec import find_versions_file
from tests.conftest import ROOT, Runner

EXAMPLES = sorted(p for p in (ROOT / "jobs").glob("*.yaml") if p.name != "versions.yaml")
INVALID = sorted((ROOT / "tests" / "examples" / "invalid").glob("*.yaml"))
HOSTILE = """\
version: 1
network_arch: "it's $(rm -rf ~) `x`"
action: "a\\nb; c"
platform: docker
image: 'nvcr.io/x:1'
command: [sh, -c, "echo \\"$HOME\\" 'q' \\\\ {job_id} && printf '%s\\\\n' ☃ \\u00e9"]
results_root: /data/r e s
user: "1000:1000"
env:
  set: {WANDB_MODE: "off line $x", EMPTY: ""}
spec: {"weird key": ["a'b", "c\\"d", "\\t", 1.0, 1, true, null, "\\u2028", "$(x)"]}
"""


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "jinja" not in p.parts)


def three_ways(taospec: Runner, tmp_path: Path, *args: str | os.PathLike[str]) -> None:
    """Off, cold and warm give the same exit code, output and errors."""
    folder = tmp_path / f"cache-{len(list(tmp_path.glob('cache-*')))}"
    off = taospec(*args, env={"TAOSPEC_CACHE": "off"})
    cold = taospec(*args, env={"XDG_CACHE_HOME": str(folder)})
    warm = taospec(*args, env={"XDG_CACHE_HOME": str(folder)})
    for run in (cold, warm):
        assert (run.returncode, run.stdout, run.stderr) == (off.returncode, off.stdout, off.stderr)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
@pytest.mark.parametrize("fmt", ["text", "json", "sh"])
def test_every_example_renders_the_same_from_the_cache(
    taospec: Runner, tmp_path: Path, path: Path, fmt: str
) -> None:
    three_ways(taospec, tmp_path, "render", path, "--format", fmt)
    three_ways(taospec, tmp_path, "render", path, "--format", fmt, "--user", "4242:4242")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_dry_runs_and_validation_are_the_same_from_the_cache(
    taospec: Runner, tmp_path: Path, path: Path
) -> None:
    three_ways(taospec, tmp_path, "run", "--dry-run", path)
    three_ways(taospec, tmp_path, "validate", path)


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_files_give_the_same_errors_and_are_never_kept(
    taospec: Runner, tmp_path: Path, path: Path
) -> None:
    three_ways(taospec, tmp_path, "render", path)
    three_ways(taospec, tmp_path, "validate", path)
    assert entries(tmp_path / "cache-0") == entries(tmp_path / "cache-1") == []


def test_hostile_values_come_back_byte_for_byte(taospec: Runner, tmp_path: Path) -> None:
    job = tmp_path / "hostile.yaml"
    job.write_text(HOSTILE)
    for fmt in ("text", "json", "sh"):
        three_ways(taospec, tmp_path, "render", job, "--format", fmt)
    three_ways(taospec, tmp_path, "run", "-n", job)


def test_any_changed_byte_is_a_new_answer(taospec: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "jobs"
    shutil.copytree(ROOT / "jobs", folder)
    job = folder / "train.yaml"
    cache_env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    original = job.read_bytes()
    taospec("render", job, env=cache_env)
    for position in range(0, len(original), max(1, len(original) // 40)):
        changed = bytearray(original)
        changed[position] = ord("#") if changed[position] != ord("#") else ord("x")
        job.write_bytes(bytes(changed))
        warm = taospec("render", job, "--format", "json", env=cache_env)
        off = taospec("render", job, "--format", "json", env={"TAOSPEC_CACHE": "off"})
        assert (warm.returncode, warm.stdout, warm.stderr) == (
            off.returncode,
            off.stdout,
            off.stderr,
        ), position
    job.write_bytes(original)
    before = taospec("render", job, env=cache_env).stdout
    versions = folder / "versions.yaml"
    versions.write_text(versions.read_text().replace("6.0.0-pyt", "6.1.0-pyt"))
    after = taospec("render", job, env=cache_env).stdout
    assert after != before
    assert "tao-toolkit:6.1.0-pyt" in after
    assert after == taospec("render", job, env={"TAOSPEC_CACHE": "off"}).stdout


def test_a_nearer_versions_file_is_seen(taospec: Runner, tmp_path: Path) -> None:
    shutil.copy(ROOT / "jobs" / "versions.yaml", tmp_path / "versions.yaml")
    nested = tmp_path / "team" / "job"
    nested.mkdir(parents=True)
    job = nested / "train.yaml"
    shutil.copy(ROOT / "jobs" / "train.yaml", job)
    cache_env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = taospec("render", job, env=cache_env).stdout
    (tmp_path / "team" / "versions.yaml").write_text(
        "images:\n  tao_toolkit:\n    pyt: registry.example/tao:nearer\n"
    )
    second = taospec("render", job, env=cache_env)
    assert "registry.example/tao:nearer" in second.stdout
    assert second.stdout != first
    (tmp_path / "team" / "versions.yaml").unlink()
    assert taospec("render", job, env=cache_env).stdout == first


def test_a_symlink_pointed_elsewhere_is_a_new_answer(taospec: Runner, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    link = tmp_path / "job.yaml"
    link.symlink_to(tmp_path / "jobs" / "train.yaml")
    cache_env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = taospec("render", link, env=cache_env).stdout
    link.unlink()
    link.symlink_to(tmp_path / "jobs" / "hello.yaml")
    assert taospec("render", link, env=cache_env).stdout != first
    assert (
        taospec("render", link, env=cache_env).stdout
        == taospec("render", link, env={"TAOSPEC_CACHE": "off"}).stdout
    )


def test_damaged_or_foreign_entries_are_not_used(taospec: Runner, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    cache_env = {"XDG_CACHE_HOME": str(folder)}
    job = ROOT / "jobs" / "train.yaml"
    good = taospec("render", job, env=cache_env).stdout
    stored = entries(folder)
    assert stored
    damages = [
        lambda data: data[:-1],
        lambda data: data[:-5] + b"XXXXX",
        lambda data: b"",
        lambda data: data.replace(b"taospec-cache 1", b"taospec-cache 9", 1),
        lambda data: data.split(b"\n", 2)[0] + b"\n" + b"0" * 64 + b"\n" + data.split(b"\n", 2)[2],
    ]
    for damage in damages:
        for entry in stored:
            entry.write_bytes(damage(entry.read_bytes()))
        assert taospec("render", job, env=cache_env).stdout == good
        stored = entries(folder)
    for entry in entries(folder):
        entry.write_text("forged output\n")
    (folder / "taospec").chmod(0o777)
    assert taospec("render", job, env=cache_env).stdout == good


def test_an_answer_resting_on_bytes_the_key_does_not_hold_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    job = tmp_path / "jobs" / "hello.yaml"

    def changed_meanwhile() -> str:
        job.write_text(job.read_text().replace("hello, TAO", "changed"))
        return yamlsrc.read_text(job, str(job))

    answer = cache.text("probe", str(job), (), changed_meanwhile)
    assert "changed" in answer
    assert entries(tmp_path / "cache") == []
    assert cache.text("probe", str(job), (), job.read_text) == job.read_text()
    assert len(entries(tmp_path / "cache")) == 1


def test_an_edit_to_taospec_itself_keeps_answers_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code = cache.code_identity()
    assert cache.code_unchanged(code)
    digest, seen, folders = cache._code  # type: ignore[misc]
    name, inode, size, mtime = seen[0]
    edited = [(name, inode, size, mtime + 1), *seen[1:]]
    monkeypatch.setattr(cache, "_code", (digest, edited, folders))
    monkeypatch.setattr(cache, "_checked", None)
    assert not cache.code_unchanged(code)
    cache.text("probe", str(ROOT / "jobs" / "hello.yaml"), (), lambda: "x")
    assert entries(tmp_path / "cache") == []


def test_a_file_added_to_taospec_keeps_answers_out_but_bytecode_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = cache.code_identity()
    digest, seen, _ = cache._code  # type: ignore[misc]
    package = tmp_path / "package"
    package.mkdir()
    (package / "module.py").write_text("x = 1\n")
    folders = [(str(package), cache._entries(p.name for p in package.iterdir()))]
    monkeypatch.setattr(cache, "_code", (digest, seen, folders))

    def unchanged() -> bool:
        monkeypatch.setattr(cache, "_checked", None)
        return cache.code_unchanged(code)

    assert unchanged()
    (package / "__pycache__").mkdir()  # what any import writes, on a machine that allows it
    (package / "__pycache__" / "module.cpython-311.pyc").write_bytes(b"")
    (package / "stray.pyc").write_bytes(b"")
    assert unchanged()
    (package / "new.py").write_text("y = 2\n")
    assert not unchanged()
    (package / "new.py").unlink()
    assert unchanged()
    (package / "module.py").unlink()
    assert not unchanged()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_loaded_files_and_plans_read_back_as_equal_values(path: Path) -> None:
    jobfile = load_jobfile(path)
    assert codec.same(cache._undump_value(cache._dump_value(jobfile)), jobfile)
    for name in jobfile.closure():
        target = jobfile.targets[name]
        upstream = {need: upstream_stand_in(need) for need in target.needs}
        plan = render(target.job, upstream=upstream)
        back = cache._undump_value(cache._dump_value(plan))
        assert codec.same(back, plan)
        assert back.digest() == plan.digest()
        assert json.dumps(codec.encode(target.job)) == json.dumps(codec.encode(target.job))


def test_the_codec_keeps_types_apart() -> None:
    assert not codec.same((1,), (1.0,))
    assert not codec.same((True,), (1,))
    assert not codec.same([1], (1,))
    assert not codec.same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    with pytest.raises(codec.Unencodable):
        codec.encode({"when": __import__("datetime").date(2024, 1, 1)})
    with pytest.raises(codec.Unencodable):
        codec.encode(float("nan"))


def test_a_spec_the_key_text_cannot_carry_still_loads_and_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    job = tmp_path / "dated.yaml"
    job.write_text((ROOT / "tests/examples/valid/minimal.yaml").read_text())
    job.write_text(job.read_text().replace("num_epochs: 1", "started: 2024-01-01"))
    for _ in range(2):
        loaded = cache.load_jobfile(str(job))
        assert codec.same(loaded, load_jobfile(job))
        plan = cache.render(loaded.targets["dated"].job)
        assert codec.same(plan, render(load_jobfile(job).targets["dated"].job))


def test_the_key_reads_what_the_loader_reads(tmp_path: Path) -> None:
    found = launcher()
    assert cache.launcher_identity() == (found.uid, found.gid, found.groups, found.name)
    (tmp_path / "a" / "b").mkdir(parents=True)
    job = tmp_path / "a" / "b" / "job.yaml"
    job.write_text("x")
    assert cache._nearest_versions(str(job.resolve())) is None or find_versions_file(job)
    for place in (tmp_path, tmp_path / "a", tmp_path / "a" / "b"):
        (place / "versions.yaml").write_text("images: {}\n")
        assert cache._nearest_versions(os.path.realpath(job)) == str(find_versions_file(job))
    assert cache.MAX_FILE_BYTES == yamlsrc.MAX_BYTES


def inode(file: Path) -> tuple[int, int]:
    info = file.stat()
    return info.st_dev, info.st_ino


def test_each_thread_records_its_own_reads(tmp_path: Path) -> None:
    import threading

    files = [tmp_path / f"{n}.yaml" for n in range(8)]
    for file in files:
        file.write_text(file.name)
    seen: dict[str, list[str]] = {}
    start = threading.Barrier(len(files))

    def read(file: Path) -> None:
        with yamlsrc.recording() as reads:
            start.wait()
            for _ in range(50):
                yamlsrc.read_text(file, str(file))
        seen[file.name] = [(identity == inode(file), raw.decode()) for identity, raw in reads]

    threads = [threading.Thread(target=read, args=(file,)) for file in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {file.name: [(True, file.name)] * 50 for file in files}


def test_unused_entries_are_pruned_and_used_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    job = str(ROOT / "jobs" / "hello.yaml")
    assert cache.text("old", job, (), lambda: "old") == "old"
    assert cache.text("used", job, (), lambda: "used") == "used"
    old, used = entries(tmp_path / "cache")
    month_ago = __import__("time").time() - 31 * 24 * 3600
    for entry in (old, used):
        os.utime(entry, (month_ago, month_ago))
    if old.read_bytes().endswith(b"used"):
        old, used = used, old
    assert cache.text("used", job, (), lambda: "recomputed") == "used"
    assert cache.prune(str(tmp_path / "cache" / "taospec")) == 1
    assert entries(tmp_path / "cache") == [used]
    assert cache.text("old", job, (), lambda: "recomputed") == "recomputed"
