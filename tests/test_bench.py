"""The benchmark suite's own machinery (never its timings).

An edited job file must differ from every earlier run and mean the same job,
the one-target edit of the pipeline must leave exactly that target to run, a
generated ledger must be what a real run writes, the floor must do the file
work it claims, a target is met or missed by the rule the table states, and
README.md's performance section must be the table in bench/results/latest.json.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import Runner

from taospec.ledger import Ledger, Record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import edits  # noqa: E402
import hotspots  # noqa: E402
import ledger_gen  # noqa: E402
import pipeline  # noqa: E402
import report  # noqa: E402
import transitions  # noqa: E402
from measure import Stats  # noqa: E402


def copy_job(name: str, folder: Path, results: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "jobs" / "versions.yaml", folder)
    text = (ROOT / "jobs" / name).read_text()
    text = text.replace("results_root: /tmp/taospec-results", f"results_root: {results}")
    (folder / name).write_text(text)
    return folder / name


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    return copy_job("hello.yaml", tmp_path / "job", tmp_path / "results")


def test_an_edited_file_differs_every_run_and_renders_the_same_job(
    tmp_path: Path, taospec: Runner
) -> None:
    job = edits.EditedFile(copy_job("train.yaml", tmp_path / "job", tmp_path / "results"))
    original = job.path.read_bytes()
    seen = {original}
    rendered = set()
    for _ in range(3):
        written = job.edit()
        assert job.path.read_bytes() == written
        assert written not in seen
        assert written.startswith(original)
        assert edits.SUITE_TOKEN.encode() in written
        seen.add(written)
        done = taospec("render", job.path)
        assert done.returncode == 0, done.stderr
        rendered.add(done.stdout)
    assert job.edits == 3
    assert len(rendered) == 1


def test_the_pipeline_edit_leaves_exactly_one_target_to_run(
    tmp_path: Path, taospec: Runner
) -> None:
    job = pipeline.edited_pipeline(tmp_path, pairs=2)
    assert taospec("run", job.path).returncode == 0
    assert taospec("run", "--check", job.path).returncode == 0
    verdicts = []
    for _ in range(2):
        job.edit()
        checked = taospec("run", "--check", job.path)
        assert checked.returncode == 1, checked.stderr
        verdicts.append([line.split()[:2] for line in checked.stdout.splitlines()])
    edited = pipeline.edited_target(2)
    for lines in verdicts:
        assert sorted(target for verdict, target in lines if verdict == "run") == [edited]
        assert sorted(target for verdict, target in lines if verdict == "skip") == sorted(
            {"prepare-000", "train-000", "prepare-001", "train-001"} - {edited}
        )


def test_a_generated_ledger_is_copies_of_a_real_run(
    tmp_path: Path, hello: Path, taospec: Runner
) -> None:
    state = tmp_path / "generated"
    real_id = ledger_gen.generate(state, 6, hello)
    ledger = Ledger(state)
    records = ledger.list()
    assert len(records) == 6
    assert records[0].id == real_id
    real = records[0]

    def shape(record: Record) -> dict[str, object]:
        data = record.to_json()
        data.update(id="", backend_ref="", submitted_at="", results_dir="")
        data["transitions"] = [{**t, "ts": ""} for t in data["transitions"]]  # type: ignore[attr-defined]
        return data

    for copy in records[1:]:
        assert shape(copy) == shape(real)
        assert copy.results_dir == real.results_dir.replace(real_id, copy.id)
        assert copy.submitted_at < real.submitted_at
        side = ledger.sidecar(copy.id)
        assert json.dumps(side) == json.dumps(ledger.sidecar(real_id)).replace(real_id, copy.id)
        assert [e["event"] for e in ledger.journal(copy.id)] == [
            e["event"] for e in ledger.journal(real_id)
        ]
    env = {"TAO_STATE_DIR": str(state)}
    done = taospec("status", real_id, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == [real_id, "COMPLETE"]
    listed = taospec("ls", "--limit", "3", env=env)
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == [
        r.id for r in records[:3]
    ]


def test_the_floor_does_a_transitions_file_work(tmp_path: Path) -> None:
    transitions.open_write(tmp_path, "job-1.json", b"one")
    with pytest.raises(FileExistsError):  # the open reserves the name, as the recorder does
        transitions.open_write(tmp_path, "job-1.json", b"again")
    transitions.mark_write(tmp_path, "job-1.json", b"two")
    assert (tmp_path / "job-1.json").read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".job-1.json.lock", "job-1.json"]
    assert transitions.floor_rate(tmp_path / "floor", 3) > 0
    assert len(list((tmp_path / "floor").glob("job-*.json"))) == 3


def test_a_profile_names_the_time_of_a_real_run(tmp_path: Path, hello: Path) -> None:
    script = [str(Path(sys.executable).with_name("taospec")), "render", str(hello)]
    where = hotspots.profile_script(script, tmp_path / "p.prof", env={}, cwd=ROOT)
    parts = where.split("; ")
    assert parts[0].startswith("total ")
    assert parts[0].endswith(" ms")
    assert parts[1].startswith("imports ")
    named = re.fullmatch(r"imports \d+ ms \((.+)\)", parts[1])
    assert named, where
    libraries = [entry.rsplit(" ", 2)[0] for entry in named.group(1).split(", ")]
    assert "taospec" not in libraries
    assert all(importlib.util.find_spec(name) for name in libraries), libraries
    assert any(part.startswith("taospec: taospec.") for part in parts), where
    assert parts[-1].startswith("own time: ")


def test_ratios_and_targets_are_judged_as_the_table_says() -> None:
    slow = Stats(100.0, 90.0, 120.0, 5)
    bare = Stats(20.0, 19.0, 25.0, 5)
    within = report.Figure("a", "a", "ms", slow, "bare", bare, report.Target("ratio_max", 5))
    over = report.Figure("b", "b", "ms", slow, "bare", bare, report.Target("ratio_max", 4.9))
    share = report.Figure("c", "c", "t/s", bare, "floor", slow, report.Target("ratio_min", 0.7))
    rate = report.Figure("d", "d", "files/s", slow, target=report.Target("min", 1000))
    other_unit = report.Figure("e", "e", "files/s", slow, "bare", bare, reference_unit="ms")
    assert (within.ratio, share.ratio, rate.ratio, other_unit.ratio) == (5.0, 0.2, None, None)
    assert (within.met, over.met, share.met, rate.met, other_unit.met) == (
        True,
        False,
        False,
        False,
        None,
    )
    assert [f.target.text(f.unit) for f in (within, share, rate) if f.target] == [
        "<= 5x",
        ">= 0.70x",
        ">= 1,000 files/s",
    ]
    with pytest.raises(ValueError, match="unknown target kind"):
        report.Target("fastest", 1)
    missed = over.with_profile("total 100 ms; imports 60 ms")
    assert report.Figure.from_json(json.loads(json.dumps(missed.to_json()))) == missed


def test_the_table_shows_misses_with_their_profile(tmp_path: Path) -> None:
    bare = Stats(20.0, 19.0, 25.0, 5)
    met = report.Figure("a", "render", "ms", Stats(30.0, 29.0, 31.0, 5), "bare", bare,
                        report.Target("ratio_max", 8))  # fmt: skip
    missed = report.Figure(
        "b", "check", "ms", Stats(700.0, 650.0, 800.0, 5), "bare", bare,
        report.Target("max", 600), profile="total 700 ms; imports 90 ms",
    )  # fmt: skip
    results = {
        "date": "2026-01-01",
        "seconds": 1.0,
        "machine": {"cpus": 2, "python": "3.10.13", "system": "Linux"},
        "figures": [met.to_json(), missed.to_json()],
    }
    rows = report.rows([met, missed])
    assert rows[1][-3:] == ("1.50x", "<= 8x", "met")
    assert rows[2][-2:] == ("<= 600 ms", "MISSED")
    assert rows[2][1] == "700 ms (650-800)"
    text = report.text_table([met, missed])
    assert "b (MISSED) profile: total 700 ms; imports 90 ms" in text
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{report.BEGIN}\nold table\n{report.END}\nafter\n")
    report.write_readme(results, readme)
    body = report.readme_section(readme)
    assert body == report.markdown(results)
    row = "| check | 700 ms (650-800) | bare: 20 ms (19-25) | 35.00x | <= 600 ms | MISSED |"
    assert row in body
    assert "- **check** (MISSED), where the time goes: total 700 ms; imports 90 ms" in body
    assert readme.read_text().startswith("before\n")
    assert readme.read_text().endswith("after\n")


def test_readme_shows_the_table_in_latest_json() -> None:
    results = json.loads(report.RESULTS.read_text())
    assert report.readme_section() == report.markdown(results)
