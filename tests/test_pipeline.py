"""Make-like pipelines for real: up-to-date skipping, inputs, -j, -k, Ctrl-C, matrices, errors."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from taospec.fingerprint import Fingerprint
from taospec.pipeline import Board, _columns
from tests.conftest import ROOT, Runner, taospec_command, write

GOLDEN = Path(__file__).parent / "golden"


def pipeline(tmp: Path, jobs: str, platform: str = "local", extra: str = "") -> Path:
    text = (
        "version: 1\n"
        "defaults:\n"
        "  network_arch: demo\n"
        f"  platform: {platform}\n"
        "  image: taospec-test/busybox:1\n"
        f"  results_root: {tmp / 'results'}\n"
        f"{extra}"
        "jobs:\n" + jobs
    )
    return write(tmp / "pipeline.yaml", text)


THREE_STAGES = """\
  prepare:
    action: prepare
    inputs: [data.txt]
    command: sh -c 'cat {data} > {{results_dir}}/prepared.txt'
  train:
    action: train
    needs: [prepare]
    inputs: [train.cfg]
    command: sh -c 'tr a-z A-Z < {{needs.prepare.results_dir}}/prepared.txt > {{results_dir}}/model'
  evaluate:
    action: evaluate
    needs: [train]
    command: sh -c 'wc -c < {{needs.train.results_dir}}/model > {{results_dir}}/score'
"""


@pytest.fixture
def three(tmp_path: Path) -> Path:
    write(tmp_path / "data.txt", "hello\n")
    write(tmp_path / "train.cfg", "epochs: 1\n")
    return pipeline(tmp_path, THREE_STAGES.format(data=tmp_path / "data.txt"))


def decisions(taospec: Runner, spec: Path, *targets: str) -> dict[str, str]:
    done = taospec("run", "--dry-run", spec, *targets)
    assert done.returncode == 0, done.stderr
    out = {}
    for line in done.stdout.splitlines():
        if line.startswith(("run ", "skip ", "busy ")):
            verb, name, reason = line.split(maxsplit=2)
            out[name] = f"{verb} {reason}"
    return out


def journal(state_dir: Path) -> list[dict]:
    path = state_dir / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def records(state_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((state_dir / "jobs").glob("*.json"))]


@pytest.fixture
def engine(engine: str, state_dir: Path) -> Iterator[str]:
    """The test image; afterwards, every container the test's jobs left is removed."""
    yield engine
    ids = [r["id"] for r in records(state_dir)]
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)


def docker_image_id(image: str) -> str:
    found = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip()


def fingerprint_digest(stored: dict) -> str:
    return Fingerprint(**stored).digest


def launches_by_target(launches: list[dict]) -> dict[str, str]:
    """Target name -> job id, from the index's last-launch files."""
    return {launch["target"].rsplit("#", 1)[1]: launch["job_id"] for launch in launches}


def test_three_stages_run_once_in_order_then_everything_is_up_to_date(
    taospec: Runner, three: Path, tmp_path: Path, state_dir: Path
) -> None:
    assert taospec("run", "--check", three).returncode == 1
    first = taospec("run", three)
    assert first.returncode == 0, first.stderr
    ran = [line.split() for line in first.stdout.splitlines()]
    assert [state for _, state in ran] == ["COMPLETE"] * 3
    assert [job_id.split("-")[1] for job_id, _ in ran] == ["prepare", "train", "evaluate"]
    score = tmp_path / "results" / ran[2][0] / "score"
    assert score.read_text().strip() == "6"
    assert "TARGET" in first.stderr
    opened = len(journal(state_dir))
    second = taospec("run", three)
    assert second.returncode == 0, second.stderr
    assert second.stdout == ""
    assert second.stderr.count("up to date") == 3
    assert len(journal(state_dir)) == opened
    assert taospec("run", "--check", three).returncode == 0
    assert decisions(taospec, three) == {
        "prepare": f"skip up to date (job {ran[0][0]})",
        "train": f"skip up to date (job {ran[1][0]})",
        "evaluate": f"skip up to date (job {ran[2][0]})",
    }


def test_a_job_file_named_another_way_is_the_same_target(
    taospec: Runner, three: Path, tmp_path: Path, state_dir: Path
) -> None:
    # the plan's digest held the file as the command line named it: run ./pipeline.yaml
    # after run pipeline.yaml ran every target again, and a job still running was not seen
    first = taospec("run", three)
    assert first.returncode == 0, first.stderr
    opened = len(journal(state_dir))
    inside = Runner(taospec.env, tmp_path)
    for named in ("pipeline.yaml", "./pipeline.yaml", f"{tmp_path}/./pipeline.yaml"):
        assert inside("run", "--check", named).returncode == 0, named
        assert set(decisions(inside, Path(named)).values()) == {
            f"skip up to date (job {line.split()[0]})" for line in first.stdout.splitlines()
        }
    again = inside("run", "./pipeline.yaml")
    assert (again.returncode, again.stdout) == (0, "")
    assert len(journal(state_dir)) == opened


def test_the_dry_run_as_json_holds_every_target_s_plan(taospec: Runner, three: Path) -> None:
    # the README said a target that waits for an upstream has no plan there
    done = taospec("run", "-n", "--json", three)
    assert done.returncode == 0, done.stderr
    plans = {d["target"]: json.dumps(d["plan"]) for d in json.loads(done.stdout)["decisions"]}
    assert sorted(plans) == ["evaluate", "prepare", "train"]
    assert "${UPSTREAM_PREPARE}" in plans["train"]
    assert "${UPSTREAM_TRAIN}" in plans["evaluate"]


def test_changing_an_input_reruns_that_stage_and_its_dependents_only(
    taospec: Runner, three: Path, tmp_path: Path
) -> None:
    assert taospec("run", three).returncode == 0
    (tmp_path / "train.cfg").write_text("epochs: 2\n")
    found = decisions(taospec, three)
    assert found["prepare"].startswith("skip up to date")
    assert found["train"] == "run input train.cfg changed"
    assert found["evaluate"] == "run upstream train will run"
    again = taospec("run", three)
    assert again.returncode == 0, again.stderr
    assert [line.split()[0].split("-")[1] for line in again.stdout.splitlines()] == [
        "train",
        "evaluate",
    ]


def test_an_input_folder_holding_a_name_that_is_not_utf8_is_fingerprinted_by_its_bytes(
    taospec: Runner, tmp_path: Path
) -> None:
    # the fingerprint of a folder's member names ended in a traceback (exit 3) for one
    # that is no UTF-8, as a file copied from another system's encoding may be named
    data = tmp_path / "data"
    data.mkdir()
    member = data / os.fsdecode(b"caf\xe9.txt")
    member.write_text("one\n")
    spec = pipeline(
        tmp_path, "  a:\n    action: prepare\n    inputs: [data]\n    command: 'true'\n"
    )
    first = taospec("run", spec)
    assert first.returncode == 0, first.stderr
    assert decisions(taospec, spec)["a"].startswith("skip up to date")
    member.write_text("two\n")
    assert decisions(taospec, spec)["a"] == "run input data changed"


def test_comments_key_order_and_whitespace_change_nothing(taospec: Runner, three: Path) -> None:
    assert taospec("run", three).returncode == 0
    text = three.read_text()
    reordered = text.replace(
        "    action: prepare\n    inputs: [data.txt]\n",
        "    inputs: [data.txt]   # the raw data\n\n    action: prepare\n",
    )
    assert reordered != text
    three.write_text("# a comment at the top\n" + reordered)
    assert taospec("run", "--check", three).returncode == 0


def test_an_input_spelled_another_way_is_the_same_input(
    taospec: Runner, three: Path, tmp_path: Path
) -> None:
    # `./data.txt` for `data.txt` was "input ./data.txt changed", and reran the stage
    assert taospec("run", three).returncode == 0
    text = three.read_text()
    respelled = text.replace("[data.txt]", "[./data.txt]").replace("[train.cfg]", "[.//train.cfg]")
    assert respelled != text
    three.write_text(respelled)
    assert taospec("run", "--check", three).returncode == 0
    (tmp_path / "train.cfg").write_text("epochs: 2\n")  # its content is still what counts
    assert decisions(taospec, three)["train"] == "run input train.cfg changed"
    # a .. behind a link leads elsewhere: it is another input, never folded into one
    (tmp_path / "other" / "inner").mkdir(parents=True)
    (tmp_path / "other" / "data.txt").write_text("other\n")
    (tmp_path / "link").symlink_to(tmp_path / "other" / "inner")
    both = "[./data.txt, link/../data.txt]"
    three.write_text(three.read_text().replace("[./data.txt]", both))
    assert taospec("run", three).returncode == 0
    (tmp_path / "other" / "data.txt").write_text("changed\n")
    assert decisions(taospec, three)["prepare"] == "run input link/../data.txt changed"


def test_a_target_s_latest_completed_job_stands_however_it_was_followed(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # only a followed run noted a job that completed a fingerprint another job already had:
    # after a retry, or a detached -B, of prep the target kept its first job, and what
    # needs it was up to date on that job's results
    flag = tmp_path / "flag"
    prep = f"sh -c 'test ! -e {flag} && date +%s%N > {{results_dir}}/out.txt'"
    spec = pipeline(
        tmp_path,
        f'  prep: {{action: prep, command: "{prep}"}}\n'
        '  use: {action: use, needs: [prep], command: "cat {needs.prep.results_dir}/out.txt"}\n',
    )
    assert taospec("run", spec).returncode == 0
    flag.touch()
    failed = taospec("run", "-B", spec, "prep")
    assert failed.returncode == 1, failed.stderr
    flag.unlink()
    retried = taospec("retry", failed.stdout.split()[0])
    assert retried.returncode == 0, retried.stderr
    retry_id = retried.stdout.split()[0]
    assert decisions(taospec, spec) == {
        "prep": f"skip up to date (job {retry_id})",
        "use": "run upstream prep changed",
    }
    assert taospec("run", spec).returncode == 0
    detached = taospec("run", "-d", "-B", spec, "prep")
    assert detached.returncode == 0, detached.stderr
    job_id = detached.stdout.strip()
    deadline = time.monotonic() + 30
    while json.loads(taospec("status", "--json", job_id).stdout)["state"] != "COMPLETE":
        assert time.monotonic() < deadline, "the detached job did not complete"
        time.sleep(0.2)
    assert decisions(taospec, spec) == {
        "prep": f"skip up to date (job {job_id})",
        "use": "run upstream prep changed",
    }
    ran = taospec("run", spec)
    assert ran.returncode == 0, ran.stderr
    (used,) = ran.stdout.split()[::2]
    out = (tmp_path / "results" / job_id / "out.txt").read_text()
    assert (tmp_path / "results" / used / "taospec.log").read_text() == out


def test_a_changed_command_is_a_changed_plan(taospec: Runner, three: Path) -> None:
    assert taospec("run", three).returncode == 0
    three.write_text(three.read_text().replace("wc -c", "wc -l"))
    found = decisions(taospec, three)
    assert found["evaluate"] == "run plan changed"
    assert found["train"].startswith("skip")


def test_missing_results_make_a_target_out_of_date(
    taospec: Runner, three: Path, tmp_path: Path
) -> None:
    first = taospec("run", three)
    evaluate_id = first.stdout.splitlines()[2].split()[0]
    subprocess.run(["rm", "-rf", str(tmp_path / "results" / evaluate_id)], check=True)
    assert decisions(taospec, three)["evaluate"] == "run results missing"


def test_force_rebuilds_the_named_target_and_what_needs_it(taospec: Runner, three: Path) -> None:
    assert taospec("run", three).returncode == 0
    forced = taospec("run", "-B", three, "train")
    assert forced.returncode == 0, forced.stderr
    names = [line.split()[0].split("-")[1] for line in forced.stdout.splitlines()]
    assert names == ["train"]
    assert decisions(taospec, three)["evaluate"] == "run upstream train changed"


def single_job(tmp: Path, command: str) -> Path:
    """A one-job local file (its target is ``job``)."""
    return write(
        tmp / "job.yaml",
        "version: 1\nnetwork_arch: demo\naction: nap\nplatform: local\nimage: busybox:1\n"
        f"results_root: {tmp / 'results'}\ncommand: {json.dumps(command)}\n",
    )


def test_a_job_still_running_is_not_started_again_unless_forced(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = single_job(tmp_path, "sleep 300")
    first = taospec("run", "--detach", spec)
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.strip()
    try:
        dry = taospec("run", "-n", spec)
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout == f"busy  job  job {job_id} is still RUNNING\n"  # and no plan
        checked = taospec("run", "--check", spec)
        assert (checked.returncode, checked.stdout) == (1, dry.stdout)
        opened = len(journal(state_dir))
        for args in (("run", spec), ("run", "--detach", spec)):
            refused = taospec(*args)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert refused.stderr == (
                f"job: job {job_id} is still RUNNING; follow it with `taospec logs -f {job_id}`, "
                f"or stop it with `taospec cancel {job_id}`\n"
                f"nothing was run: run again once it has ended, or `taospec run -B {spec}` to "
                "start another\n"
            )
        assert len(journal(state_dir)) == opened
        forced = taospec("run", "-B", "--detach", spec)
        assert forced.returncode == 0, forced.stderr
        assert forced.stdout.strip() not in ("", job_id)
    finally:
        for rec in records(state_dir):
            taospec("cancel", rec["id"])
    assert {r["terminal_state"] for r in records(state_dir)} == {"CANCELED"}


@pytest.mark.parametrize("force", [(), ("-B",)])
@pytest.mark.parametrize("damage", ["{", "[]", '{"id": "x"}'])
def test_a_damaged_record_of_the_last_job_is_no_complete_job_and_the_target_runs_again(
    taospec: Runner, tmp_path: Path, state_dir: Path, force: tuple[str, ...], damage: str
) -> None:
    spec = single_job(tmp_path, "echo hi")
    first = taospec("run", spec)
    assert first.returncode == 0, first.stderr
    done_id = first.stdout.split()[0]
    (state_dir / "jobs" / f"{done_id}.json").write_text(damage)  # edited by hand
    again = taospec("run", *force, spec)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    new_id, state = again.stdout.split()
    assert (state, new_id != done_id) == ("COMPLETE", True)
    assert (state_dir / "jobs" / f"{done_id}.json").read_text() == damage
    others = [p for p in (state_dir / "jobs").glob("*.json") if p.stem != done_id]
    kept = [json.loads(p.read_text()) for p in others]
    assert [(r["id"], r["terminal_state"]) for r in kept] == [(new_id, "COMPLETE")]
    assert decisions(taospec, spec) == {"job": f"skip up to date (job {new_id})"}


def test_a_running_job_whose_sidecar_is_damaged_refuses_the_run_until_forced(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    """run exited 3 asking the job whose sidecar was edited by hand whether it still runs."""
    spec = single_job(tmp_path, "sleep 300")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    sidecar = state_dir / "jobs" / f"{job_id}.taospec"
    kept = sidecar.read_bytes()
    sidecar.write_text("[")
    try:
        opened = len(journal(state_dir))
        for args in (("run", "-n", spec), ("run", spec), ("run", "--detach", spec)):
            refused = taospec(*args)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert "Traceback" not in refused.stderr
            assert f"{sidecar}: not valid JSON" in refused.stderr
            assert f"job {job_id} is recorded RUNNING" in refused.stderr
            assert "-B" in refused.stderr
        assert len(journal(state_dir)) == opened
        forced = taospec("run", "-B", "--detach", spec)
        assert forced.returncode == 0, forced.stderr
        taospec("cancel", forced.stdout.strip())
    finally:
        sidecar.write_bytes(kept)
        taospec("cancel", job_id)
    assert {r["terminal_state"] for r in records(state_dir)} == {"CANCELED"}


@pytest.mark.parametrize(("code", "state"), [(0, "COMPLETE"), (3, "ERROR")])
def test_a_job_recorded_running_that_has_ended_is_recorded_and_the_run_goes_on(
    taospec: Runner, tmp_path: Path, state_dir: Path, code: int, state: str
) -> None:
    go = tmp_path / "go"
    spec = single_job(tmp_path, f"sh -c 'while [ ! -e {go} ]; do sleep 0.1; done; exit {code}'")
    first = taospec("run", "--detach", spec)
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.strip()
    go.touch()
    exit_file = tmp_path / "results" / job_id / "taospec.exit"
    deadline = time.monotonic() + 30
    while not exit_file.exists():
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)
    assert records(state_dir)[0]["transitions"][-1]["state"] == "RUNNING"  # nobody asked since
    if code == 0:
        assert decisions(taospec, spec) == {"job": f"skip up to date (job {job_id})"}
        assert records(state_dir)[0]["terminal_state"] == "COMPLETE"
        again = taospec("run", spec)
        assert (again.returncode, again.stdout) == (0, ""), again.stderr
    else:
        again = taospec("run", spec)
        assert again.returncode == 1, again.stderr
        assert len(records(state_dir)) == 2
    assert next(r for r in records(state_dir) if r["id"] == job_id)["terminal_state"] == state


def test_a_pipeline_refuses_to_start_an_upstream_still_running_elsewhere(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    jobs = """\
  prepare:
    action: prepare
    command: sleep 300
  other:
    action: other
    command: "true"
  train:
    action: train
    needs: [prepare]
    command: ls {needs.prepare.results_dir}
"""
    spec = pipeline(tmp_path, jobs)
    first = taospec("run", "--detach", spec, "prepare")
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.strip()
    try:
        assert decisions(taospec, spec) == {
            "prepare": f"busy job {job_id} is still RUNNING",
            "other": "run never run",
            "train": f"run upstream prepare: job {job_id} is still RUNNING",
        }
        # -B on what would run: the same build, with another job of prepare
        for targets, forced in (((), "prepare other train"), (("train",), "train prepare")):
            refused = taospec("run", spec, *targets)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert f"prepare: job {job_id} is still RUNNING; follow it" in refused.stderr
            assert f"taospec logs -f {job_id}" in refused.stderr
            assert f"`taospec run -B {spec} {forced}` to start another" in refused.stderr
        assert [r["id"] for r in records(state_dir)] == [job_id]
    finally:
        taospec("cancel", job_id)


def test_concurrent_runs_of_pipelines_sharing_targets_start_each_job_once(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # each run decides, and takes its targets' locks one at a time, in its own order
    jobs = "".join(
        f"  {name}:\n    action: {name}\n    command: sleep 300\n" for name in ("one", "two")
    )
    spec = pipeline(tmp_path, jobs)
    orders = [("one", "two"), ("two", "one")] * 3
    try:
        with ThreadPoolExecutor(len(orders)) as pool:
            done = list(pool.map(lambda names: taospec("run", "-d", spec, *names), orders))
        assert sorted(r["action"] for r in records(state_dir)) == ["one", "two"]
        for run in done:
            assert run.returncode in (0, 2), run.stderr
            if run.returncode == 2:
                assert "is still" in run.stderr, run.stderr
                assert "to start another" in run.stderr
    finally:
        for rec in records(state_dir):
            taospec("cancel", rec["id"])


def _interval(state_dir: Path, action: str) -> tuple[datetime, datetime]:
    rec = next(r for r in records(state_dir) if r["action"] == action)
    times = {
        t["state"]: datetime.fromisoformat(t["ts"].replace("Z", "+00:00"))
        for t in rec["transitions"]
    }
    return times["RUNNING"], times[rec["terminal_state"]]


def test_jobs_2_overlaps_independent_targets_but_never_two_sharing_a_gpu(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    jobs = "".join(
        f"  {name}:\n    action: {name}\n    command: sleep 2\n{gpus}"
        for name, gpus in [("a", ""), ("b", ""), ("c", "    gpus: [0]\n"), ("d", "    gpus: [0]\n")]
    )
    spec = pipeline(tmp_path, jobs)
    done = taospec("run", "-j", "2", spec, "a", "b")
    assert done.returncode == 0, done.stderr
    a, b = _interval(state_dir, "a"), _interval(state_dir, "b")
    assert a[0] < b[1], (a, b)
    assert b[0] < a[1], (a, b)
    done = taospec("run", "-j", "2", spec, "c", "d")
    assert done.returncode == 0, done.stderr
    c, d = _interval(state_dir, "c"), _interval(state_dir, "d")
    assert c[1] <= d[0] or d[1] <= c[0], (c, d)


FAILING = """\
  bad:
    action: bad
    command: sh -c 'echo broken; exit 4'
  good:
    action: good
    command: 'true'
  after:
    action: after
    needs: [bad]
    command: 'true'
"""


def test_a_failure_stops_the_build_and_keep_going_builds_the_rest(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = pipeline(tmp_path, FAILING)
    stopped = taospec("run", spec)
    assert stopped.returncode == 1
    assert [r["action"] for r in records(state_dir)] == ["bad"]
    assert "| broken" in stopped.stderr
    # each target that did not run says why, as -k's do (the table alone said NOT RUN)
    assert "\ngood: NOT RUN  not started, as a target failed; run -k builds what" in stopped.stderr
    assert "\nafter: NOT RUN  an upstream target failed\n" in stopped.stderr
    kept = taospec("run", "-k", spec)
    assert kept.returncode == 1
    finished = {r["action"]: r["terminal_state"] for r in records(state_dir)}
    assert finished.get("good") == "COMPLETE"
    assert "after" not in finished


def test_a_failure_in_the_middle_stops_its_dependents(
    taospec: Runner, three: Path, state_dir: Path
) -> None:
    three.write_text(three.read_text().replace("tr a-z A-Z <", "false <"))
    done = taospec("run", three)
    assert done.returncode == 1
    states = {r["action"]: r["terminal_state"] for r in records(state_dir)}
    assert states == {"prepare": "COMPLETE", "train": "ERROR"}


def test_a_job_whose_submit_failed_is_reported_by_its_id_and_recorded_state(
    engine: str, taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # The record was opened and marked ERROR when docker run refused, yet run printed no
    # "ID STATE" line for it, and its summary row said FAILED with no job.
    jobs = """\
  bad:
    action: bad
    docker: {extra_args: [--network, taospec-has-no-such-network]}
    command: 'true'
  after:
    action: after
    needs: [bad]
    command: 'true'
"""
    spec = pipeline(tmp_path, jobs, platform="docker", extra='  user: "1000:1000"\n')
    done = taospec("run", spec)
    assert done.returncode == 1, done.stderr
    (record,) = records(state_dir)
    assert record["terminal_state"] == "ERROR"
    assert done.stdout == f"{record['id']} ERROR\n"
    rows = [line.split() for line in done.stderr.splitlines()]
    assert ["bad", "ERROR", record["id"], "0:00"] in rows
    assert ["after", "NOT", "RUN"] in rows
    assert f"bad: ERROR ERR_PROGRAM in 0s  results {tmp_path / 'results' / record['id']}" in (
        done.stderr
    )


WAITS_ON_A_REFUSAL = """\
  a:
    action: a
    command: 'true'
  b:
    action: b
    needs: [a]
    platform: brev
    brev: {instance: box}
    command: 'true'
"""


def test_a_target_its_platform_refuses_stops_the_run_before_its_upstream_runs(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = pipeline(tmp_path, WAITS_ON_A_REFUSAL)
    refusal = f"{spec}:11:3: $.jobs.b.user: user: host would mean this machine's"
    done = taospec("run", spec)
    assert done.returncode == 2
    assert refusal in done.stderr
    assert done.stderr.rstrip().endswith("nothing was run")
    assert list(state_dir.iterdir()) == []
    assert not (tmp_path / "results").exists()
    # Only a build renders what waits on an upstream: --check stays as cheap as it was.
    checked = taospec("run", "--check", spec)
    assert (checked.returncode, checked.stdout.split()) == (
        1,
        ["run", "a", "never", "run", "run", "b", "upstream", "a", "will", "run"],
    )


def test_ctrl_c_cancels_every_running_job(taospec: Runner, tmp_path: Path, state_dir: Path) -> None:
    jobs = "".join(f"  {n}:\n    action: {n}\n    command: sleep 300\n" for n in ("x", "y"))
    spec = pipeline(tmp_path, jobs)
    follower = subprocess.Popen(
        [*taospec_command(), "run", "-j", "2", str(spec)],
        env=taospec.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while sum(1 for r in _safe_records(state_dir) if r["backend_ref"]) < 2:
        assert time.monotonic() < deadline, "jobs did not start"
        time.sleep(0.1)
    follower.send_signal(signal.SIGINT)
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 130, err
    assert {r["action"]: r["terminal_state"] for r in records(state_dir)} == {
        "x": "CANCELED",
        "y": "CANCELED",
    }
    for rec in records(state_dir):
        pid = int(rec["backend_ref"].removeprefix("pid:"))
        assert not _alive(pid), rec["id"]


def _safe_records(state_dir: Path) -> list[dict]:
    try:
        return records(state_dir)
    except (OSError, ValueError):
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_matrix_expands_into_named_targets_with_their_values(
    taospec: Runner, tmp_path: Path
) -> None:
    jobs = """\
  train:
    action: train
    matrix: {lr: [0.1, 0.00005], seed: [1, 2]}
    command: sh -c 'echo lr={matrix.lr} seed={matrix.seed} > {results_dir}/args'
  report:
    action: report
    needs: ["train[seed=2]"]
    command: 'true'
"""
    spec = pipeline(tmp_path, jobs)
    found = decisions(taospec, spec)
    assert list(found) == [
        "train[lr=0.1,seed=1]",
        "train[lr=0.1,seed=2]",
        "train[lr=0.00005,seed=1]",
        "train[lr=0.00005,seed=2]",
        "report",
    ]
    assert found["report"] == "run upstream train[lr=0.1,seed=2] will run"
    done = taospec("run", spec, "train[lr=0.00005,seed=2]")
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert (tmp_path / "results" / job_id / "args").read_text() == "lr=0.00005 seed=2\n"


@pytest.mark.parametrize(
    ("needs", "command", "said"),
    [
        ('["train[lr=1e-4]"]', "echo hi", ""),
        ("[train]", "echo hi", ""),
        (
            "[train]",
            "echo {needs.train.results_dir}",
            "{needs.train.results_dir} names target 'train', and this job needs "
            "train[lr=0.0001], train[lr=0.001]: name the one whose results it reads by its full "
            "name, e.g. {needs.train[lr=0.0001].results_dir}",
        ),
        (
            "[train]",
            "echo {needs.other.results_dir}",
            "{needs.other.results_dir} names target 'other', which this job does not need; add "
            "it to needs: (a matrix target by its full name, e.g. other[x=1])",
        ),
    ],
)
def test_a_matrix_target_is_named_by_its_values_however_a_number_is_written(
    taospec: Runner, tmp_path: Path, needs: str, command: str, said: str
) -> None:
    # needs: [train[lr=1e-4]] was an unknown target ("did you mean 'train[lr=0.001]'?") of a
    # target named train[lr=0.0001]; {needs.train.results_dir} with train in needs was told
    # to add train to needs
    spec = pipeline(
        tmp_path,
        '  train: {action: train, matrix: {lr: [1e-4, 0.001]}, command: "echo {matrix.lr}"}\n'
        f'  agg: {{action: agg, needs: {needs}, command: "{command}"}}\n',
    )
    done = taospec("validate", spec)
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if not said:
        assert "run   agg" in taospec("run", "-n", spec, "train[lr=1e-4]", "agg").stdout


def test_a_matrix_target_named_by_a_word_and_a_number_written_another_way(
    taospec: Runner, tmp_path: Path
) -> None:
    # a value that is no number was compared as one: ds=levir never named ds=levir
    spec = pipeline(
        tmp_path,
        "  train: {action: train, matrix: {ds: [levir, whu], lr: [1e-4, 0.001]}, "
        'command: "echo {matrix.lr}"}\n'
        '  agg: {action: agg, needs: ["train[ds=levir,lr=1e-4]"], command: "echo hi"}\n',
    )
    shown = taospec("run", "-n", spec, "agg")
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[1] for line in shown.stdout.splitlines()[:2]] == [
        "train[ds=levir,lr=0.0001]",
        "agg",
    ]


def test_a_matrix_value_arrives_as_written_wherever_it_is_filled(
    taospec: Runner, tmp_path: Path
) -> None:
    jobs = """\
  t:
    action: t
    matrix: {v: ["a{{b}}c", "{job_id}", "{foo}"]}
    command: [sh, -c, 'printf "[%s][%s]\\n" "$1" "$X" > "$2/out"; cat "$3" >> "$2/out"',
              sh, "{matrix.v}", "{results_dir}", "{config_path}"]
    env: {set: {X: "{matrix.v}"}}
    spec: {k: "{matrix.v}"}
  s:
    action: s
    matrix: {v: ["{results_dir}"]}
    command: printf '[%s]' {matrix.v}
"""
    spec = pipeline(tmp_path, jobs)
    assert taospec("validate", spec).returncode == 0
    rendered = taospec("render", spec, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    launches = {
        plan["target"]: next(step["argv"] for step in plan["steps"] if step["name"] == "launch")
        for plan in json.loads(rendered.stdout)
    }
    for value in ("a{{b}}c", "{job_id}", "{foo}"):
        assert value in launches[f"t[v={value}]"]
    assert launches["s[v={results_dir}]"][-3:] == ["printf", "[%s]", "{results_dir}"]
    done = taospec("run", spec, "t")
    assert done.returncode == 0, done.stderr
    outs = sorted(p.read_text() for p in (tmp_path / "results").glob("*/out"))
    assert outs == sorted(
        [
            "[a{{b}}c][a{{b}}c]\nk: a{{b}}c\n",
            "[{job_id}][{job_id}]\nk: '{job_id}'\n",
            "[{foo}][{foo}]\nk: '{foo}'\n",
        ]
    )


def test_a_spec_value_that_is_one_matrix_placeholder_keeps_the_values_yaml_type(
    taospec: Runner, tmp_path: Path
) -> None:
    # lr: "{matrix.lr}" (the README's own pattern) wrote lr: '0.0001', a string, into the
    # spec the job reads; a skill's schema then warned to write 1.0e-4, which a matrix
    # value cannot follow
    jobs = """\
  t:
    action: t
    matrix: {lr: [0.0001, 0.00005], seed: [3], flag: [true], v: ["1e-4", "{job_id}"]}
    command: 'true'
    env: {set: {LR: "{matrix.lr}"}}
    spec:
      optim: {lr: "{matrix.lr}", seed: "{matrix.seed}", flag: "{matrix.flag}", v: "{matrix.v}"}
      text: "lr={matrix.lr}"
      list: ["{matrix.seed}", " {matrix.seed}"]
"""
    spec = pipeline(tmp_path, jobs)
    rendered = taospec("render", spec, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    specs = {
        plan["target"]: yaml.safe_load(
            next(s["stdin_text"] for s in plan["steps"] if s["name"] == "spec-file")
        )
        for plan in json.loads(rendered.stdout)
    }
    assert specs["t[lr=0.00005,seed=3,flag=true,v=1e-4]"] == {
        "optim": {"lr": 0.00005, "seed": 3, "flag": True, "v": "1e-4"},
        "text": "lr=0.00005",
        "list": [3, " 3"],
    }
    assert specs["t[lr=0.0001,seed=3,flag=true,v={job_id}]"]["optim"]["v"] == "{job_id}"
    launch = next(s for s in json.loads(rendered.stdout)[0]["steps"] if s["name"] == "launch")
    assert ["LR", "0.0001"] in launch["env"]  # an environment variable's value is text


def test_an_upstream_is_named_in_a_placeholder_whatever_its_matrix_value_holds(
    taospec: Runner, tmp_path: Path
) -> None:
    jobs = """\
  prep:
    action: prep
    matrix: {ds: [levir/cd, "a b:c+d@é{x}"]}
    command: 'true'
  train:
    action: train
    needs: ["prep[ds=levir/cd]", "prep[ds=a b:c+d@é{x}]"]
    command: [sh, -c, 'echo "$@" > {results_dir}/upstream', sh,
              "{needs.prep[ds=levir/cd].results_dir}",
              "{needs.prep[ds=a b:c+d@é{{x}}].results_dir}"]
  each:
    action: each
    matrix: {ds: [levir/cd, "a b:c+d@é{x}"]}
    needs: ["prep[ds={matrix.ds}]"]
    command: [sh, -c, 'echo "$1" > {results_dir}/upstream', sh,
              "{needs.prep[ds={matrix.ds}].results_dir}"]
"""
    spec = pipeline(tmp_path, jobs)
    assert taospec("validate", spec).returncode == 0
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    dirs = {
        line.partition(": COMPLETE")[0]: line.split()[-1]
        for line in done.stderr.splitlines()
        if ": COMPLETE in " in line and " results " in line
    }
    written = (Path(dirs["train"]) / "upstream").read_text()
    assert written == f"{dirs['prep[ds=levir/cd]']} {dirs['prep[ds=a b:c+d@é{x}]']}\n"
    for value in ("levir/cd", "a b:c+d@é{x}"):
        each = (Path(dirs[f"each[ds={value}]"]) / "upstream").read_text()
        assert each == dirs[f"prep[ds={value}]"] + "\n"


def test_the_secret_lint_reads_an_upstreams_placeholder_whatever_its_matrix_value_holds(
    taospec: Runner, tmp_path: Path
) -> None:
    """A placeholder is a reference, not a password, however the upstream's name is written."""
    jobs = """\
  prep:
    action: prep
    matrix: {ds: [levir/cd, "a b"]}
    command: 'true'
  train:
    action: train
    matrix: {ds: [levir/cd]}
    needs: ["prep[ds=levir/cd]", "prep[ds=a b]"]
    command: 'true'
    spec:
      password: "{needs.prep[ds=levir/cd].results_dir}"
      token: "{needs.prep[ds=a b].results_dir}"
      secret: "{needs.prep[ds={matrix.ds}].results_dir}"
"""
    spec = pipeline(tmp_path, jobs)
    done = taospec("validate", spec)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_what_starts_like_a_placeholder_but_is_none_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    jobs = """\
  prep:
    action: prep
    matrix: {ds: [levir/cd]}
    command: 'true'
  train:
    action: train
    needs: ["prep[ds=levir/cd]"]
    command: [echo, "{needs.prep[ds=levir/cd].result_dir}", "{{needs.prep}}"]
    env: {set: {X: "{matrix.ds"}}
"""
    spec = pipeline(tmp_path, jobs)
    for verb in ("validate", "run"):
        done = taospec(verb, spec)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.splitlines()[:2] == [
            f"{spec}:15:21: $.jobs.train.command[1]: '{{needs.prep[ds=levir/cd].result_dir}}' is "
            "not a placeholder taospec can read, and would be left as it is: write "
            "{needs.<target>.results_dir} with the target's full name (e.g. "
            "{needs.prep[ds=a b].results_dir}), {matrix.<key>}, or {{ for a literal brace",
            f"{spec}:16:20: $.jobs.train.env.set.X: '{{matrix.ds' is not a placeholder taospec "
            "can read, and would be left as it is: write {needs.<target>.results_dir} with the "
            "target's full name (e.g. {needs.prep[ds=a b].results_dir}), {matrix.<key>}, or {{ "
            "for a literal brace",
        ]
    assert list(state_dir.iterdir()) == []


def test_an_upstreams_placeholder_where_no_plan_fills_it_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # Outside command, spec, env.set and mount sources the placeholder was kept as text:
    # validate passed, then run said "{needs.a.results_dir}/o does not exist" of an input,
    # the notifier echoed the placeholder, and docker -v got it as a volume name.
    jobs = """\
  a:
    action: a
    command: 'true'
  b:
    action: b
    needs: [a]
    command: 'true'
    inputs: ["{needs.a.results_dir}/o"]
    notify: [echo, "{needs.a.results_dir}"]
  c:
    action: c
    needs: [a]
    matrix: {v: [x]}
    platform: docker
    user: "1000:1000"
    command: 'true'
    notify: [echo, "{matrix.v}", "{matrix.w}", "{{needs.a}}"]
    docker: {extra_args: ["-v", "{needs.a.results_dir}:/up"]}
"""
    spec = pipeline(tmp_path, jobs, extra='  notify: "echo {needs.b.results_dir}"\n')
    only = (
        "is filled in only in command, spec values, env.set values and mount sources; "
        "here it would be left as it is"
    )
    expected = [
        f"{spec}:7:11: $.defaults.notify: {{needs.b.results_dir}} {only}",
        f"{spec}:16:14: $.jobs.b.inputs[0]: {{needs.a.results_dir}} {only}",
        f"{spec}:17:20: $.jobs.b.notify[1]: {{needs.a.results_dir}} {only}",
        f"{spec}:25:34: $.jobs.c.notify[2]: {{matrix.w}} names no key of this job's matrix "
        "(v), and would be left as it is",
        f"{spec}:26:33: $.jobs.c.docker.extra_args[1]: {{needs.a.results_dir}} {only}",
    ]
    for verb in ("validate", "render", "run"):
        done = taospec(verb, spec)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.splitlines()[:-1] == expected, done.stderr
    assert list(state_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        (
            "  a:\n    action: a\n    command: 'true'\n    needs: [b]\n"
            "  b:\n    action: b\n    command: 'true'\n    needs: [a]\n",
            ["{file}:11:13: $.jobs.a.needs[0]: dependency cycle: a -> b -> a"],
        ),
        (
            "  a:\n    action: a\n    command: 'true'\n    needs: [prepar]\n"
            "  prepare:\n    action: p\n    command: 'true'\n",
            ["{file}:11:13: $.jobs.a.needs[0]: unknown target 'prepar' (did you mean 'prepare'?)"],
        ),
        (
            "  a:\n    action: a\n    command: 'cat {needs.b.results_dir}/x'\n",
            [
                "{file}:10:14: $.jobs.a.command: {needs.b.results_dir} names target 'b', which "
                "this job does not need; add it to needs: (a matrix target by its full name, "
                "e.g. b[x=1])"
            ],
        ),
        (
            "  a:\n    action: a\n    command: 'true'\n    gpu: [0]\n",
            ["{file}:11:5: $.jobs.a.gpu: unknown key 'gpu' (did you mean 'gpus'?)"],
        ),
    ],
    ids=["cycle", "unknown-target", "placeholder-without-need", "typo"],
)
def test_pipeline_errors_name_the_line(
    taospec: Runner, tmp_path: Path, state_dir: Path, jobs: str, expected: list[str]
) -> None:
    spec = pipeline(tmp_path, jobs)
    done = taospec("validate", spec)
    assert done.returncode == 2
    *problems, summary = done.stderr.splitlines()
    assert summary == "1 of 1 job files is invalid"
    assert problems == [e.replace("{file}", str(spec)) for e in expected]
    assert taospec("run", spec).returncode == 2
    assert list(state_dir.iterdir()) == []


def test_a_defaults_error_points_at_defaults(taospec: Runner, tmp_path: Path) -> None:
    spec = pipeline(
        tmp_path, "  a:\n    action: a\n    command: 'true'\n", extra="  storage_tier: Z\n"
    )
    done = taospec("validate", spec)
    assert f"{spec}:7:17: $.defaults.storage_tier: 'Z' is not one of 'A', 'B', 'C'" in done.stderr


def test_braces_are_judged_as_written_before_a_matrix_value_goes_in(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # The value closes the mapping the command opens: the field as written does not pair
    # up, so its braces are its own text (the value goes in with its braces doubled).
    jobs = """  t:
    action: t
    matrix: {v: ["1}", "{{x}"]}
    command: [echo, '{"a": {"b": {matrix.v}']
"""
    spec = pipeline(tmp_path, jobs)
    rendered = taospec("render", spec, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    launches = [plan["steps"][-1]["argv"] for plan in json.loads(rendered.stdout)]
    assert [argv[-1] for argv in launches] == ['{"a": {"b": 1}', '{"a": {"b": {{x}']
    # A field that pairs up as written but would not once its escapes are read: refused at
    # the line that wrote it (defaults, for both jobs that take it), and nothing is written.
    extra = """  command: [echo, '{"a": {"b": 1}}', '{matrix.v}']\n"""
    jobs = "  a:\n    action: a\n  b:\n    action: b\n    matrix: {v: [x]}\n"
    spec = pipeline(tmp_path, jobs, extra=extra)
    for verb in ("validate", "run"):
        done = taospec(verb, spec)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        found = [line for line in done.stderr.splitlines() if "no longer paired" in line]
        assert found == [
            f"""{spec}:7:19: $.defaults.command[1]: '{{"a": {{"b": 1}}}}' runs as """
            """'{"a": {"b": 1}', its braces no longer paired: '}}' stands for one literal """
            "brace; write '}}}}' for two (a single '}' is kept as written)"
        ]
    assert list(state_dir.iterdir()) == []


def test_mermaid_graph_matches_its_golden_file(taospec: Runner, monkeypatch) -> None:
    done = taospec("graph", ROOT / "jobs" / "tao-workflow.yaml")
    assert done.returncode == 0, done.stderr
    golden = GOLDEN / "tao-workflow.mmd"
    import os

    if os.environ.get("TAOSPEC_UPDATE_GOLDEN") == "1":
        golden.write_text(done.stdout)
    assert done.stdout == golden.read_text()
    dot = taospec("graph", "--format", "dot", ROOT / "jobs" / "tao-workflow.yaml")
    assert dot.stdout.startswith("digraph taospec {")
    assert "t_prepare -> t_train_lr_0_0001_06347a6c6b;" in dot.stdout


def test_each_target_is_its_own_node_and_labels_read_as_written(
    taospec: Runner, tmp_path: Path
) -> None:
    # levir-cd, levir_cd and levir.cd (and any two non-ASCII names) made one node id, so the
    # picture merged them; DOT labels came out as caf\u00e9, which Graphviz prints literally
    jobs = (
        "  prep: {action: prep, command: echo p}\n"
        "  train:\n"
        "    action: train\n"
        "    needs: [prep]\n"
        "    matrix: {ds: [levir-cd, levir_cd, levir.cd, café, cafè, 'a\"b\\N<i>#1']}\n"
        '    command: "echo {matrix.ds}"\n'
    )
    spec = pipeline(tmp_path, jobs)
    names = ["levir-cd", "levir_cd", "levir.cd", "café", "cafè", 'a"b\\N<i>#1']
    drawn = taospec("graph", spec)
    assert drawn.returncode == 0, drawn.stderr
    nodes = re.findall(r"^    (\S+)\[\"(.*)\"\]:::todo$", drawn.stdout, re.M)
    assert len({node for node, _ in nodes}) == 7, drawn.stdout
    assert [label.partition("<br/>")[0] for _, label in nodes[1:]] == [
        f"train[ds={name}]" for name in names[:-1]
    ] + ["train[ds=a#34;b\\N#60;i#62;#35;1]"]
    edges = re.findall(r"^    (\S+) --> (\S+)$", drawn.stdout, re.M)
    assert edges == [(nodes[0][0], node) for node, _ in nodes[1:]]
    again = taospec("graph", spec)
    assert again.stdout == drawn.stdout  # stable
    dot = taospec("graph", "--format", "dot", spec)
    assert dot.returncode == 0, dot.stderr
    dot_nodes = re.findall(r'^    (\S+) \[label="((?:[^"\\]|\\.)*)", ', dot.stdout, re.M)
    assert [node for node, _ in dot_nodes] == [node for node, _ in nodes]
    assert [label.partition("\\n")[0] for _, label in dot_nodes[1:]] == [
        f"train[ds={name}]" for name in names[:-1]
    ] + ['train[ds=a\\"b\\\\N<i>#1]']
    assert re.findall(r"^    (\S+) -> (\S+);$", dot.stdout, re.M) == edges


def test_a_graph_refused_says_no_graph_was_drawn_not_that_nothing_was_run(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = pipeline(tmp_path, "  a:\n    action: 1\n    command: 'true'\n")
    done = taospec("graph", spec)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"{spec}:9:13: $.jobs.a.action: 1 is not a string",
        "taospec: 1 problem; no graph was drawn",
    ]
    assert list(state_dir.iterdir()) == []


def test_a_pipeline_on_the_real_engine_passes_results_downstream(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    jobs = """\
  make:
    action: make
    command: sh -c 'echo made-by-$(id -u) > {results_dir}/out'
  use:
    action: use
    needs: [make]
    mounts: [{source: "{needs.make.results_dir}", target: /in, readonly: true}]
    command: sh -c 'cat /in/out > {results_dir}/copy'
"""
    spec = pipeline(
        open_tmp, jobs, platform="docker", extra='  user: "1000:1000"\n  docker: {shm_size: 64m}\n'
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    use_id = done.stdout.splitlines()[1].split()[0]
    assert (open_tmp / "results" / use_id / "copy").read_text() == "made-by-1000\n"
    assert taospec("run", "--check", spec).returncode == 0


def test_launches_record_the_engines_image_id_and_a_retagged_image_reruns(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    tag = f"taospec-test/busybox:fingerprint-{os.getpid()}"
    subprocess.run(["docker", "tag", engine, tag], check=True)
    jobs = f"""\
  make:
    action: make
    image: {tag}
    command: sh -c 'echo made > {{results_dir}}/out'
  use:
    action: use
    image: {tag}
    needs: [make]
    command: sh -c 'echo used > {{results_dir}}/out'
"""
    spec = pipeline(
        open_tmp, jobs, platform="docker", extra='  user: "1000:1000"\n  docker: {shm_size: 64m}\n'
    )
    try:
        done = taospec("run", spec)
        assert done.returncode == 0, done.stderr
        image_id = docker_image_id(tag)
        launches = [json.loads(p.read_text()) for p in (state_dir / "taospec/targets").iterdir()]
        assert sorted(launch["fingerprint"]["image"] for launch in launches) == [image_id] * 2
        for record in records(state_dir):
            sidecar = json.loads((state_dir / "jobs" / f"{record['id']}.taospec").read_text())
            launch = next(item for item in launches if item["job_id"] == record["id"])
            assert sidecar["fingerprint"] == fingerprint_digest(launch["fingerprint"])
        assert decisions(taospec, spec) == {
            "make": f"skip up to date (job {launches_by_target(launches)['make']})",
            "use": f"skip up to date (job {launches_by_target(launches)['use']})",
        }

        retag = f"FROM {engine}\nLABEL taospec.test=retagged\n"
        subprocess.run(
            ["docker", "build", "-q", "-t", tag, "-"],
            input=retag.encode(),
            capture_output=True,
            check=True,
        )
        assert docker_image_id(tag) != image_id
        assert decisions(taospec, spec) == {
            "make": "run image changed",
            "use": "run upstream make will run",
        }
    finally:
        subprocess.run(["docker", "rmi", tag], capture_output=True, check=False)


LOOKUP = "docker image inspect --format"


def test_the_engine_is_asked_for_an_image_id_only_when_a_launched_job_may_match(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    jobs = """\
  make:
    action: make
    command: sh -c 'echo made > {results_dir}/out'
"""
    spec = pipeline(
        open_tmp, jobs, platform="docker", extra='  user: "1000:1000"\n  docker: {shm_size: 64m}\n'
    )
    verbose = {"TAOSPEC_VERBOSE": "1"}
    never = taospec("run", "--dry-run", spec, env=verbose)
    assert never.returncode == 0, never.stderr
    assert "run   make  never run" in never.stdout
    assert LOOKUP not in never.stderr  # nothing launched this work: no need to ask

    done = taospec("run", spec, env=verbose)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(LOOKUP) == 1  # asked while the plan's steps ran
    job_id = done.stdout.split()[0]
    (launch,) = [json.loads(p.read_text()) for p in (state_dir / "taospec/targets").iterdir()]
    assert launch["fingerprint"]["image"] == docker_image_id(engine)
    sidecar = json.loads((state_dir / "jobs" / f"{job_id}.taospec").read_text())
    assert sidecar["fingerprint"] == fingerprint_digest(launch["fingerprint"])

    again = taospec("run", "--dry-run", spec, env=verbose)
    assert f"skip  make  up to date (job {job_id})" in again.stdout
    assert LOOKUP in again.stderr  # a launched job may match: the image decides

    forced = taospec("run", "--dry-run", "-B", spec, env=verbose)
    assert "run   make  forced (-B)" in forced.stdout
    assert LOOKUP not in forced.stderr


def test_reverting_a_change_finds_the_earlier_job_again_even_in_an_older_index(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    first = "  make:\n    action: make\n    command: sh -c 'echo one > {results_dir}/out'\n"
    second = first.replace("echo one", "echo two")
    extra = '  user: "1000:1000"\n  docker: {shm_size: 64m}\n'
    spec = pipeline(open_tmp, first, platform="docker", extra=extra)
    one = taospec("run", spec)
    assert one.returncode == 0, one.stderr
    spec = pipeline(open_tmp, second, platform="docker", extra=extra)
    assert decisions(taospec, spec) == {"make": "run plan changed"}
    assert taospec("run", spec).returncode == 0
    spec = pipeline(open_tmp, first, platform="docker", extra=extra)
    up_to_date = {"make": f"skip up to date (job {one.stdout.split()[0]})"}
    assert decisions(taospec, spec) == up_to_date

    works = state_dir / "taospec" / "works"  # as an index written before works were noted
    for marker in works.iterdir():
        marker.unlink()
    works.rmdir()
    assert decisions(taospec, spec) == up_to_date


# The local job is started detached, to outlive the Popen object that started it.
@pytest.mark.filterwarnings("ignore:subprocess .* is still running:ResourceWarning")
def test_a_target_launched_right_after_its_decision_hashes_its_inputs_once(
    three: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taospec import fingerprint
    from taospec.ledger import Ledger
    from taospec.loader import load_jobfile
    from taospec.pipeline import Build, decide

    hashed: list[Path] = []
    real_hash = fingerprint.hash_path

    def counted(path: Path) -> str:
        hashed.append(path)
        return real_hash(path)

    monkeypatch.setattr(fingerprint, "hash_path", counted)
    ledger = Ledger(tmp_path / "state")
    jobfile = load_jobfile(str(three))
    (decision,) = decide(jobfile, ["prepare"], ledger)
    assert decision.run
    assert decision.work is not None
    record, launched = Build(jobfile, [decision], ledger).launch(decision, {})
    assert [path.name for path in hashed] == ["data.txt"]
    assert launched == decision.work.with_image(None)
    assert ledger.sidecar(record.id)["fingerprint"] == launched.digest


@pytest.mark.engine
def test_one_engine_is_asked_once_for_every_docker_job_that_runs_on_it(
    taospec: Runner, engine: str, tmp_path: Path
) -> None:
    """The two jobs' checks differ (their /dev/shm sizes), their engine does not."""
    spec = pipeline(
        tmp_path,
        "  one:\n    action: one\n    command: 'true'\n    docker: {shm_size: 64m}\n"
        "  two:\n    action: two\n    command: 'true'\n    docker: {shm_size: 32m}\n",
        platform="docker",
        extra='  user: "1000:1000"\n',
    )
    real = subprocess.run(["sh", "-c", "command -v docker"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    calls = tmp_path / "docker-calls"
    write(tmp_path / "bin" / "docker", f'#!/bin/sh\necho "$*" >> {calls}\nexec {real} "$@"\n')
    (tmp_path / "bin" / "docker").chmod(0o755)
    done = taospec(
        "run", "--detach", spec, env={"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 2  # both launched
    asked = [line.split()[:2] for line in calls.read_text().splitlines()]
    assert asked.count(["info", "--format"]) == 1
    assert asked.count(["run", "-d"]) == 2


def test_concurrent_runs_start_one_job_per_plan_and_leave_no_lock_behind(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # each plan's deciding lock stayed as a file for good: the folder grew with every plan
    specs = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        specs.append(single_job(tmp_path / name, f"sh -c 'sleep 300 || echo {name}'"))
    pool = ThreadPoolExecutor(9)
    try:
        done = list(pool.map(lambda spec: taospec("run", "-d", spec), specs * 3))
        for spec in specs:
            runs = [d for d, s in zip(done, specs * 3, strict=True) if s == spec]
            started = [d.stdout.strip() for d in runs if d.returncode == 0]
            assert len(started) == 1, [(d.returncode, d.stderr) for d in runs]
            for loser in (d for d in runs if d.returncode != 0):
                assert (loser.returncode, loser.stdout) == (2, ""), loser.stderr
                assert f"job {started[0]} is still " in loser.stderr
        assert len(records(state_dir)) == 3
        assert os.listdir(state_dir / "taospec" / "deciding") == []
        for spec in specs:  # refused under the lock, which goes with each decision too
            assert taospec("run", spec).returncode == 2
        assert os.listdir(state_dir / "taospec" / "deciding") == []
    finally:
        pool.shutdown()
        for rec in records(state_dir):
            taospec("cancel", rec["id"])


LOCK_WORKER = """
import sys, time
from pathlib import Path
from taospec.fingerprint import Index
from taospec.ledger import Ledger
counter = Path(sys.argv[2])
for _ in range(int(sys.argv[3])):
    with Index(Ledger(sys.argv[1])).deciding("work"):
        seen = int(counter.read_text() or 0)
        time.sleep(0.001)
        counter.write_text(str(seen + 1))
"""


def test_the_deciding_lock_excludes_other_processes_while_its_file_comes_and_goes(
    tmp_path: Path, state_dir: Path
) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    workers = [
        subprocess.Popen([sys.executable, "-c", LOCK_WORKER, str(state_dir), str(counter), "60"])
        for _ in range(4)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0] * 4
    assert counter.read_text() == "240"  # no increment lost: never two inside at once
    assert os.listdir(state_dir / "taospec" / "deciding") == []


def test_the_live_lines_are_as_wide_as_the_terminal_they_are_drawn_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a bar under a live line was cut to stdout's width, which run -f > train.log makes a
    # file's (80 columns), whatever the terminal the live lines (stderr) are drawn on
    primary, secondary = pty.openpty()
    try:
        fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 37, 0, 0))
        with os.fdopen(os.dup(secondary), "w") as terminal:
            monkeypatch.setattr(sys, "stderr", terminal)
            assert _columns() == 37
            fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
            monkeypatch.setenv("COLUMNS", "41")
            assert _columns() == 41  # one that says 0 columns: as shutil reads it
    finally:
        os.close(primary)
        os.close(secondary)


@pytest.mark.parametrize(
    ("redraw", "drawn"),
    [
        # tqdm's colour= and a bar of several positions (moved to with cursor-up)
        ("\x1b[32m 45%|####5     |\x1b[0m 450/1000\x1b[A", " 45%|####5     | 450/1000"),
        ("\x1b]0;epoch 3\x07ep 3\t loss=0.1\x08", "ep 3  loss=0.1"),  # a title, a tab
        ("訓練" * 40, "訓練" * 8 + "訓"),  # wide characters: two cells each
        ("e\u0301" * 80, "e\u0301" * 35),  # a combining accent takes no cell
    ],
    ids=["colour-and-cursor", "title-and-tab", "wide", "combining"],
)
def test_a_bar_is_drawn_under_its_live_line_as_one_line_of_plain_text(
    monkeypatch: pytest.MonkeyPatch, redraw: str, drawn: str
) -> None:
    # a bar's escapes (colour, cursor moves) and wide characters were drawn as they came:
    # the bar moved the cursor or spilled onto a second line, and the live lines were then
    # erased a line short, each redraw leaving one more behind
    monkeypatch.setattr("taospec.pipeline._columns", lambda: 40)
    written: list[str] = []
    board = Board(enabled=True, live=True, write=written.append)
    board.start("train")
    board.redrawn("train", f"step 1\r{redraw}\r")
    bar = written[-1].split("\n")[-2]
    assert bar == f"    {drawn}"
