"""The benchmark suite's own correctness (never its timings).

The generated ledger must be byte for byte what the ledger writes, README.md's
performance section must be the table in bench/results/latest.json, and a
target is met or missed by the rule the table states.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from taospec.ledger import Ledger, Record
from taospec.ledger.durable import encode_json as _encode_json
from taospec.ledger.journal import encode_line as _journal_line

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import ledger_gen  # noqa: E402
import report  # noqa: E402
from measure import Stats  # noqa: E402


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copy(ROOT / "jobs" / "versions.yaml", folder)
    text = (ROOT / "jobs" / "hello.yaml").read_text()
    text = text.replace("results_root: /tmp/taospec-results", f"results_root: {tmp_path}/results")
    (folder / "hello.yaml").write_text(text)
    return folder / "hello.yaml"


def test_generated_files_are_what_the_ledger_writes(tmp_path: Path, hello: Path) -> None:
    state = tmp_path / "state"
    ids = ledger_gen.generate(state, 3, hello)
    for job_id in ids:
        raw = (state / "jobs" / f"{job_id}.json").read_bytes()
        record = Record.from_json(json.loads(raw))
        assert _encode_json(record.to_json()) == raw
        assert record.state == "COMPLETE"
        assert record.results_dir == f"{tmp_path}/results/{job_id}"
        side = (state / "jobs" / f"{job_id}.taospec").read_bytes()
        assert _encode_json(json.loads(side)) == side
        assert json.loads(side)["plan"]["job_id"] == job_id
    assert sorted(p.name for p in (state / "jobs").iterdir()) == sorted(
        f"{job_id}.{suffix}" for job_id in ids for suffix in ("json", "taospec")
    )
    lines = (state / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 9
    assert all(_journal_line(json.loads(line)) == line for line in lines)
    ledger = Ledger(state)
    assert [r.id for r in ledger.list()] == ids[::-1]
    assert [e["event"] for e in ledger.journal(ids[1])] == ["open", "transition", "transition"]


def test_generated_job_has_the_shape_of_a_real_run(tmp_path: Path, hello: Path) -> None:
    real = Ledger(tmp_path / "real")
    opened = real.open(
        platform="local",
        image="taospec-test/busybox:1",
        network_arch="hello",
        action="greet",
        storage_tier="A",
        results_root=f"{tmp_path}/results",
        sidecar={"spec": str(hello), "target": f"{hello.resolve()}#hello"},
        message=f"opened by taospec for {hello} (target hello)",
    )
    real.mark(opened.id, "RUNNING", message="launched", backend_ref="pid:1")
    done = real.mark(opened.id, "COMPLETE", message="process exited 0", source="poller")
    state = tmp_path / "state"
    made = ledger_gen.generate(state, 1, hello)[0]
    generated = Ledger(state).get(made)

    def shape(record: Record) -> dict[str, object]:
        data = record.to_json()
        data.update(id="", backend_ref="", submitted_at="", results_dir="")
        data["transitions"] = [{**t, "ts": ""} for t in data["transitions"]]  # type: ignore[attr-defined]
        return data

    assert shape(generated) == shape(done)
    real_events = [
        {k: v for k, v in e.items() if k not in ("ts", "id", "results_dir", "backend_ref")}
        for e in real.journal()
    ]
    made_events = [
        {k: v for k, v in e.items() if k not in ("ts", "id", "results_dir", "backend_ref")}
        for e in Ledger(state).journal()
    ]
    assert made_events == real_events


def test_a_generated_finished_job_answers_status(
    tmp_path: Path, hello: Path, taospec: object
) -> None:
    state = tmp_path / "state"
    made = ledger_gen.generate(state, 5, hello)
    ledger_gen.finish(state, made[2])
    done = taospec("status", made[2], env={"TAO_STATE_DIR": str(state)})  # type: ignore[operator]
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{made[2]} COMPLETE process exited 0\n"


def test_readme_shows_the_table_in_latest_json() -> None:
    results = json.loads(report.RESULTS.read_text())
    assert report.readme_section() == report.markdown(results)


def test_targets_are_judged_as_the_table_says() -> None:
    fast = Stats(100.0, 90.0, 120.0, 5)
    bare = Stats(20.0, 19.0, 25.0, 5)
    within = report.Figure("a", "a", "ms", fast, "bare", bare, report.Target("ratio_max", 5))
    over = report.Figure("b", "b", "ms", fast, "bare", bare, report.Target("ratio_max", 4.9))
    rate = report.Figure("c", "c", "files/s", fast, target=report.Target("min", 1000))
    assert (within.met, over.met, rate.met) == (True, False, False)
    assert report.Figure.from_json(json.loads(json.dumps(within.to_json()))) == within
