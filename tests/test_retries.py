"""Retries keep their history: ``retry ID`` by hand, ``retry: {max: N}`` for infrastructure
failures only, the chain cap, ``show``'s chain, and the plan digest untouched by reactions.

Local jobs for real. A job stopped by SIGTERM from outside is ERR_INFRA; a marker file
makes its second run succeed. A submit that fails ERR_INFRA is a real full filesystem (a
small tmpfs; the tests run as root), one that fails ERR_PROGRAM a real ``docker run`` of a
command the image lacks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from taospec.errors import InvalidInput
from taospec.ledger import Ledger
from taospec.pipeline import busy_line
from taospec.plan import plan_from_json
from taospec.platforms import render
from taospec.preflight import stored_launch_absent
from taospec.retrying import MAX_CHAIN, backoff, backoff_first
from taospec.states import ERROR
from tests.conftest import Runner, load_job, spawn, taospec_command, write
from tests.test_docker_jobs import docker
from tests.test_docker_jobs import job_file as docker_job_file
from tests.test_local_jobs import job_file, record, wait_for

# First run: leave a marker and stop itself with SIGTERM, as a host shutdown would.
FLAKY = "sh -c 'if [ -e {mark} ]; then echo second-run; else touch {mark}; kill -TERM $$; fi'"


def test_an_infra_failure_is_retried_and_the_retry_completes(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = job_file(tmp_path, FLAKY.format(mark=tmp_path / "mark"), retry="{max: 2}")
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    retry_id, state = done.stdout.split()
    assert state == "COMPLETE"
    retried = record(state_dir, retry_id)
    first_id = retried["retry_of"]
    assert record(state_dir, first_id)["err_class"] == "ERR_INFRA"
    assert f"job: {first_id} ended ERROR ERR_INFRA; retry 1 of 2" in done.stderr
    assert (tmp_path / "results" / retry_id / "taospec.log").read_text() == "second-run\n"
    # The retry's completion is what the up-to-date logic finds.
    again = taospec("run", spec)
    assert again.returncode == 0, again.stderr
    assert f"job: up to date (job {retry_id})" in again.stderr
    shown = taospec("show", first_id)
    assert json.loads(shown.stdout)["retried_by"] == [retry_id]
    assert f"{first_id}: retried by {retry_id}" in shown.stderr


def test_a_program_failure_is_never_retried(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = job_file(tmp_path, "sh -c 'echo broken; exit 3'", retry="{max: 3}")
    done = taospec("run", spec)
    assert done.returncode == 1
    job_id, state = done.stdout.split()
    assert (state, record(state_dir, job_id)["err_class"]) == ("ERROR", "ERR_PROGRAM")
    assert len(list((state_dir / "jobs").glob("*.json"))) == 1
    assert "retry" not in done.stderr


def test_retries_stop_at_max(taospec: Runner, tmp_path: Path, state_dir: Path) -> None:
    spec = job_file(tmp_path, "sh -c 'kill -TERM $$'", retry="{max: 2}")
    done = taospec("run", spec)
    assert done.returncode == 1
    last_id, state = done.stdout.split()
    assert state == "ERROR"
    chain = [last_id]
    while record(state_dir, chain[0]).get("retry_of"):
        chain.insert(0, record(state_dir, chain[0])["retry_of"])
    assert len(chain) == 3  # the job and its two retries
    assert len(list((state_dir / "jobs").glob("*.json"))) == 3
    assert f"job: {last_id} ended ERROR ERR_INFRA; no retries left (max 2)" in done.stderr
    shown = taospec("show", chain[1])
    assert shown.returncode == 0
    lines = shown.stderr.splitlines()
    assert lines[0] == f"{chain[1]}: retry of {chain[0]}; retried by {chain[2]}"
    assert lines[1] == "retry chain, earliest first:"
    assert [line[2:].split()[0] for line in lines[2:]] == chain
    assert lines[3].startswith(f"* {chain[1]}  ERROR ERR_INFRA")
    assert lines[3].endswith(f"retry of {chain[0]}")
    assert json.loads(shown.stdout)["retry_chain"] == chain


def test_retry_by_hand_runs_the_same_plan_as_a_new_job(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    mark = tmp_path / "mark"
    spec = job_file(tmp_path, f"sh -c 'if [ -e {mark} ]; then echo ok; exit 0; fi; exit 3'")
    failed = taospec("run", spec)
    assert failed.returncode == 1
    first_id = failed.stdout.split()[0]
    mark.touch()
    retried = taospec("retry", first_id)
    assert retried.returncode == 0, retried.stderr
    retry_id = retried.stdout.strip()
    assert retry_id != first_id
    assert record(state_dir, retry_id)["retry_of"] == first_id
    assert record(state_dir, first_id)["terminal_state"] == "ERROR"  # history kept
    assert f"{retry_id}: COMPLETE" in retried.stderr
    plans = [Ledger(state_dir).sidecar(j)["plan"] for j in (first_id, retry_id)]
    assert plans[1]["steps"] == json.loads(
        json.dumps(plans[0]["steps"]).replace(first_id, retry_id)
    )
    # A COMPLETE job is not retried; nor is its retry chain grown from the failed one's side.
    refused = taospec("retry", retry_id)
    assert refused.returncode == 2
    assert f"{retry_id} COMPLETED; there is nothing to retry" in refused.stderr
    assert taospec("run", spec).stderr.strip().endswith(f"up to date (job {retry_id})")


@pytest.mark.parametrize("where", ["notify:", "$TAOSPEC_NOTIFY"])
def test_retry_by_hand_reacts_to_the_end_as_the_stored_plan_says(
    taospec: Runner, tmp_path: Path, state_dir: Path, where: str
) -> None:
    # retry ID skipped notify:, $TAOSPEC_NOTIFY and retry:, which the plan it reran shows
    count, seen = tmp_path / "count", tmp_path / "notified"
    # the first run fails in the program, its retry is stopped from outside, then it works
    command = (
        f"sh -c 'n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}; "
        f"case $n in 0) exit 3;; 1) kill -TERM $$;; esac; echo ok'"
    )
    notifier = f'echo "$TAOSPEC_JOB_ID $TAOSPEC_STATE" >> {seen}'
    own = {"notify": json.dumps(notifier)} if where == "notify:" else {}
    spec = job_file(tmp_path, command, retry="{max: 2}", **own)
    failed = taospec("run", spec, env={} if own else {"TAOSPEC_NOTIFY": notifier})
    assert failed.returncode == 1
    first_id = failed.stdout.split()[0]
    assert seen.read_text() == f"{first_id} ERROR\n"
    # what runs is the notifier the stored plan shows, not one this environment names
    other = tmp_path / "other"
    retried = taospec("retry", first_id, env={"TAOSPEC_NOTIFY": f"echo x >> {other}"})
    assert retried.returncode == 0, retried.stderr
    retry_id, last_id = retried.stdout.split()
    assert record(state_dir, retry_id)["err_class"] == "ERR_INFRA"
    assert record(state_dir, last_id)["retry_of"] == retry_id
    assert f"{retry_id} ended ERROR ERR_INFRA; retry 2 of 2" in retried.stderr
    assert f"{last_id}: COMPLETE" in retried.stderr
    assert seen.read_text() == f"{first_id} ERROR\n{last_id} COMPLETE\n"
    assert not other.exists()


def test_retry_by_hand_stops_where_the_retry_policy_does(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    seen = tmp_path / "notified"
    notifier = json.dumps(f'echo "$TAOSPEC_JOB_ID $TAOSPEC_STATE" >> {seen}')
    spec = job_file(tmp_path, "sh -c 'kill -TERM $$'", retry="{max: 1}", notify=notifier)
    failed = taospec("run", spec)
    assert failed.returncode == 1
    last = failed.stdout.split()[0]
    retried = taospec("retry", last)
    assert retried.returncode == 1
    (retry_id,) = retried.stdout.split()
    assert f"{retry_id} ended ERROR ERR_INFRA; no retries left (max 1)" in retried.stderr
    assert seen.read_text() == f"{last} ERROR\n{retry_id} ERROR\n"


def test_retry_refuses_a_job_that_has_not_ended(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "sleep 300")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    try:
        for args in ((), ("-B",)):  # another job of its plan may be forced, not a retry of it
            refused = taospec("retry", *args, job_id)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert refused.stderr == (
                f"{job_id}: job {job_id} is still RUNNING; follow it with `taospec logs -f "
                f"{job_id}`, or stop it with `taospec cancel {job_id}`\n"
                "nothing was run: retry it once it has ended\n"
            )
    finally:
        assert taospec("cancel", job_id).returncode == 0


def _refused_retry(taospec: Runner, job_id: str) -> str:
    """What a retry of ``job_id`` that is refused (exit 2, nothing submitted) says."""
    refused = taospec("retry", job_id)
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    return refused.stderr


def _retry_into_a_file(taospec: Runner, spec: Path, state_dir: Path) -> None:
    """The job fails; its results_root is then a file: the retry is refused, no record opened."""
    failed = taospec("run", spec)
    assert failed.returncode == 1, failed.stderr
    first_id = failed.stdout.split()[0]
    root = spec.parent / "results"
    subprocess.run(["rm", "-rf", str(root)], check=True)  # a container may own what it wrote
    root.write_text("not a folder\n")
    assert _refused_retry(taospec, first_id) == (
        f"taospec: {first_id}: {root} is not a folder on this machine; each job's results go "
        "in a folder made under results_root, and a retry makes its own there: move what is "
        "there, then retry\n"
    )
    assert [p.stem for p in _records(state_dir)] == [first_id]  # no record was opened


def test_retry_refuses_a_results_root_that_is_a_file_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    _retry_into_a_file(taospec, job_file(tmp_path, "sh -c 'exit 3'"), state_dir)


@pytest.mark.engine
def test_retry_of_a_docker_job_refuses_a_results_root_that_is_a_file(
    engine: str, taospec: Runner, tmp_path: Path, state_dir: Path, containers_removed: None
) -> None:
    _retry_into_a_file(taospec, docker_job_file(tmp_path, engine, "sh -c 'exit 3'"), state_dir)


@pytest.mark.engine
def test_retry_of_a_docker_job_refuses_a_mount_source_that_is_gone(
    engine: str, taospec: Runner, tmp_path: Path, state_dir: Path, containers_removed: None
) -> None:
    """The job's data folder is moved after it failed: the retry, which runs the plan as it
    was stored, would have the engine mount an empty root-owned folder in its place; it is
    refused before any record opens, and nothing is made there."""
    data = tmp_path / "data"
    data.mkdir()
    mounts = f"[{{source: {data}, target: /data, readonly: true}}]"
    spec = docker_job_file(tmp_path, engine, "sh -c 'ls /data; exit 3'", mounts=mounts)
    failed = taospec("run", spec)
    assert failed.returncode == 1, failed.stderr
    first_id = failed.stdout.split()[0]
    data.rename(tmp_path / "moved")
    assert _refused_retry(taospec, first_id) == (
        f"taospec: {first_id}: its plan needs what is not here: {data} (-v {data}:/data:ro) "
        "does not exist on this machine, and the Docker engine would make it an empty "
        "root-owned folder and the job would see no data. A retry runs the plan as it was "
        "stored: restore it and retry, or run the job file again\n"
    )
    assert not data.exists()
    assert [p.stem for p in _records(state_dir)] == [first_id]  # no record was opened
    (tmp_path / "moved").rename(data)
    # its own results folder is not asked about: the retry makes its own
    subprocess.run(["rm", "-rf", str(tmp_path / "results" / first_id)], check=True)
    retried = taospec("retry", first_id)
    assert retried.returncode == 1, retried.stderr  # it ran again, and failed as the job does
    assert record(state_dir, retried.stdout.split()[0])["retry_of"] == first_id


def test_the_paths_a_stored_docker_launch_needs_are_read_from_its_options_alone(
    tmp_path: Path,
) -> None:
    """Bind sources and devices of ``mounts`` and ``docker.extra_args`` (any case of a
    ``--mount`` key), read up to the image: the command's own words are not docker's; the
    job's results folder, which the plan makes, and a present path are not asked about."""
    here = tmp_path / "here"
    here.mkdir()
    gone = tmp_path / "gone"
    options = [
        f"-v={gone}/a:/a",
        "--mount",
        f"type=bind,SRC={gone}/b,dst=/b",
        f"--device={gone}/c",
        f"--volume={here}:/here",
        "-v",
        "named:/named",
    ]
    spec = docker_job_file(
        tmp_path,
        "busybox:1",
        f"sh -c 'echo -v {gone}/d:/d'",
        mounts=f"[{{source: {gone}/e, target: /e}}]",
    )
    text = spec.read_text().replace("docker: {", f"docker: {{extra_args: {json.dumps(options)}, ")
    spec.write_text(text)
    plan = plan_from_json(render(load_job(spec)).to_json())
    absent = stored_launch_absent(plan)
    assert [(a.option.split()[0], a.path, a.found) for a in absent] == [
        ("-v", f"{gone}/e", None),
        ("-v", f"{gone}/a", None),
        ("--mount", f"{gone}/b", None),
        ("--device", f"{gone}/c", None),
    ]
    assert absent[2].docker == "docker run refuses a bind mount whose source is missing"
    remote = plan_from_json({**plan.to_json(), "backend": [["docker_host", "ssh://gpu-box"]]})
    assert stored_launch_absent(remote) == []


def test_retry_keeps_a_passed_value_out_of_the_record_it_finds_ended(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # retry polled the old job before it knew the passed values: the ERROR it recorded
    # quoted the traceback, the value whole, in the record and the journal
    secret = "Zq8sup3rs3cretVALUE0123456789X"
    passed = {"MYVAL": secret}
    failing = (
        'sh -c \'echo "Traceback (most recent call last):"; '
        'echo "ValueError: bad key $MYVAL"; exit 1\''
    )
    spec = job_file(tmp_path, failing, env="{pass: [MYVAL]}")
    job_id = taospec("run", "--detach", spec, env=passed).stdout.strip()
    wait_for((tmp_path / "results" / job_id / "taospec.exit").exists)
    assert record(state_dir, job_id)["terminal_state"] is None  # no one has asked since
    retried = taospec("retry", "--detach", job_id, env=passed)
    assert retried.returncode == 0, retried.stderr
    assert record(state_dir, job_id)["terminal_state"] == "ERROR"
    written = [*(state_dir / "jobs").glob("*.json"), state_dir / "ledger.jsonl"]
    assert all(secret not in path.read_text() for path in written)
    assert secret not in retried.stdout + retried.stderr
    wait_for((tmp_path / "results" / retried.stdout.strip() / "taospec.exit").exists)


def _failed_job(ledger: Ledger, state_dir: Path, retry_of: str | None) -> str:
    opened = ledger.open(
        platform="local",
        image="busybox:1",
        network_arch="hello",
        action="greet",
        storage_tier="A",
        results_root=str(state_dir / "results"),
        retry_of=retry_of,
    )
    ledger.mark(opened.id, ERROR, message="stopped from outside", err_class="ERR_INFRA")
    return opened.id


@pytest.mark.parametrize("shape", ["in a line", "branching"])
def test_a_chain_holds_at_most_ten_retries(taospec: Runner, state_dir: Path, shape: str) -> None:
    # each retry of one job counts: twelve retries of the same job were all accepted
    ledger = Ledger(state_dir)
    first = previous = _failed_job(ledger, state_dir, None)
    for _ in range(MAX_CHAIN):
        previous = _failed_job(ledger, state_dir, previous if shape == "in a line" else first)
    for asked in (previous, first):
        refused = taospec("retry", asked)
        assert refused.returncode == 2
        assert f"(from {first}) already holds {MAX_CHAIN} retries" in refused.stderr
    assert len(list((state_dir / "jobs").glob("*.json"))) == MAX_CHAIN + 1


def test_a_retry_that_fills_its_branching_chain_ends_as_a_job_with_no_retries_left(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    """Retries of the job's other branches fill its chain to the cap with this retry: it is
    not retried again (a retry of it would be refused), so it ends the chain. It was said to
    be retried, the command exited 2 and its notifier never ran."""
    seen = tmp_path / "notified"
    notifier = json.dumps(f"echo $TAOSPEC_JOB_ID >> {seen}")
    spec = job_file(tmp_path, "sh -c 'kill -TERM $$'", retry="{max: 2}", notify=notifier)
    ran = taospec("run", spec)
    assert ran.returncode == 1, ran.stderr
    ledger = Ledger(state_dir)
    first = record(state_dir, ran.stdout.split()[0])["retry_of"]
    first = record(state_dir, first)["retry_of"]  # the job, and its two retries in a line
    for _ in range(MAX_CHAIN - 3):
        _failed_job(ledger, state_dir, first)
    seen.unlink()
    retried = taospec("retry", first)
    assert retried.returncode == 1, retried.stderr
    last = retried.stdout.split()[0]
    assert record(state_dir, last)["retry_of"] == first
    assert retried.stderr.endswith(
        f"{last} ended ERROR ERR_INFRA; its chain already holds {MAX_CHAIN} retries\n"
        f"{last}: ERROR ERR_INFRA\n"
    )
    assert seen.read_text() == f"{last}\n"
    assert len(list((state_dir / "jobs").glob("*.json"))) == MAX_CHAIN + 1


def test_a_chain_is_shown_earliest_first(taospec: Runner, state_dir: Path) -> None:
    # retries of retries were listed after every retry of the job before them, whenever
    # they were submitted
    ledger = Ledger(state_dir)
    first = _failed_job(ledger, state_dir, None)
    early = _failed_job(ledger, state_dir, first)
    of_early = _failed_job(ledger, state_dir, early)
    late = _failed_job(ledger, state_dir, first)
    shown = taospec("show", "--json", first)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["retry_chain"] == [first, early, of_early, late]


def test_notify_and_retry_do_not_change_the_plan_digest(tmp_path: Path) -> None:
    plain = render(load_job(job_file(tmp_path, "true")))
    reacting = render(load_job(job_file(tmp_path, "true", notify="'echo done'", retry="{max: 3}")))
    assert reacting.digest() == plain.digest()
    assert reacting.reactions
    assert not plain.reactions
    assert reacting.notes == plain.notes


def test_the_dry_run_shows_the_retry_policy(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "true", retry="{max: 3}")
    shown = taospec("run", "-n", spec)
    assert (
        "# Note: retry: the taospec run or retry following the job submits a retry (a new job) "
        "when it, or its submit, ends ERROR ERR_INFRA, at most 3 times" in shown.stdout
    )
    bad = write(tmp_path / "bad.yaml", spec.read_text().replace("max: 3", "max: 11"))
    refused = taospec("validate", bad)
    assert refused.returncode == 2
    assert "retry.max" in refused.stderr or "$.retry.max" in refused.stderr


def test_a_pipeline_default_retry_and_the_target_done_on_its_last_retry(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    flaky = FLAKY.format(mark=tmp_path / "mark")
    spec = write(
        tmp_path / "pipeline.yaml",
        f"""\
version: 1
defaults:
  network_arch: hello
  action: greet
  platform: local
  image: busybox:1
  results_root: {tmp_path / "results"}
  retry: {{max: 1}}
jobs:
  prep:
    command: {json.dumps(flaky)}
  train:
    needs: [prep]
    command: "sh -c 'cat {{needs.prep.results_dir}}/taospec.log'"
""",
    )
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    (prep_id, prep_state), (train_id, train_state) = map(str.split, done.stdout.splitlines())
    assert (prep_state, train_state) == ("COMPLETE", "COMPLETE")
    assert record(state_dir, prep_id)["retry_of"]
    log = (tmp_path / "results" / train_id / "taospec.log").read_text()
    assert log == "second-run\n"


# -- a submit that fails -------------------------------------------------------------


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs filled to the last byte by ``filler``; unmounted afterwards."""
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        filled = subprocess.run(
            ["dd", "if=/dev/zero", f"of={mount / 'filler'}", "bs=64k"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert "No space left on device" in filled.stderr
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def results_on(spec: Path, root: Path) -> Path:
    """``spec`` with its results_root moved under ``root``."""
    lines = [
        f"results_root: {root / 'results'}" if line.startswith("results_root:") else line
        for line in spec.read_text().splitlines()
    ]
    return write(spec, "\n".join(lines) + "\n")


def chain_of(state_dir: Path, last_id: str) -> list[dict]:
    """The records of ``last_id``'s chain, earliest first."""
    chain = [record(state_dir, last_id)]
    while chain[0].get("retry_of"):
        chain.insert(0, record(state_dir, chain[0]["retry_of"]))
    return chain


def test_a_submit_that_fails_err_infra_is_retried_up_to_max(
    taospec: Runner, tmp_path: Path, state_dir: Path, full_fs: Path
) -> None:
    spec = results_on(
        job_file(tmp_path, "cat {config_path}", retry="{max: 2}", spec="{a: b}"), full_fs
    )
    done = taospec("run", spec, env={"TAOSPEC_SUBMIT_BACKOFF": "0"})
    assert done.returncode == 1
    ids = sorted(p.stem for p in (state_dir / "jobs").glob("*.json"))
    assert len(ids) == 3  # the job and its two retries, each with its own record
    (last,) = [i for i in ids if not any(record(state_dir, j).get("retry_of") == i for j in ids)]
    chain = chain_of(state_dir, last)
    assert sorted(r["id"] for r in chain) == ids
    for job in chain:
        assert (job["terminal_state"], job["err_class"]) == ("ERROR", "ERR_INFRA")
        assert "No space left on device" in job["transitions"][-1]["message"]
        assert "a filesystem is full" in job["transitions"][-1]["message"]
        assert job["backend_ref"] is None  # nothing was launched
    first, second, third = (r["id"] for r in chain)
    assert f"job: {first} ended ERROR ERR_INFRA while submitting; retry 1 of 2\n" in done.stderr
    assert f"job: {second} ended ERROR ERR_INFRA while submitting; retry 2 of 2\n" in done.stderr
    assert (
        f"job: {third} ended ERROR ERR_INFRA while submitting; no retries left (max 2)"
        in done.stderr
    )
    shown = taospec("show", first)
    assert json.loads(shown.stdout)["retry_chain"] == [first, second, third]


def test_without_retry_a_failed_submit_is_not_submitted_again(
    taospec: Runner, tmp_path: Path, state_dir: Path, full_fs: Path
) -> None:
    spec = results_on(job_file(tmp_path, "cat {config_path}", spec="{a: b}"), full_fs)
    done = taospec("run", spec, env={"TAOSPEC_SUBMIT_BACKOFF": "0"})
    assert done.returncode == 1
    (only,) = (state_dir / "jobs").glob("*.json")
    assert record(state_dir, only.stem)["err_class"] == "ERR_INFRA"
    assert "while submitting" not in done.stderr
    assert done.stderr.count("a filesystem is full") == 1  # the closing line, once


@pytest.mark.parametrize("retry", ["{max: 2}", "{max: 0}"])
def test_a_chain_that_ends_in_a_failed_submit_notifies_once_for_its_last_job(
    taospec: Runner, tmp_path: Path, state_dir: Path, full_fs: Path, retry: str
) -> None:
    # the last job was recorded ERROR, but no notifier ran, with retry: or without
    seen = tmp_path / "notified"
    notify = json.dumps(f'echo "$TAOSPEC_JOB_ID $TAOSPEC_STATE $TAOSPEC_ERR_CLASS" >> {seen}')
    spec = job_file(tmp_path, "cat {config_path}", retry=retry, spec="{a: b}", notify=notify)
    done = taospec("run", results_on(spec, full_fs), env={"TAOSPEC_SUBMIT_BACKOFF": "0"})
    assert done.returncode == 1
    ids = sorted(p.stem for p in (state_dir / "jobs").glob("*.json"))
    (last,) = [i for i in ids if not any(record(state_dir, j).get("retry_of") == i for j in ids)]
    assert len(ids) == (3 if retry == "{max: 2}" else 1)
    assert seen.read_text() == f"{last} ERROR ERR_INFRA\n"


def test_a_detached_run_retries_a_failed_submit_too(
    taospec: Runner, tmp_path: Path, state_dir: Path, full_fs: Path
) -> None:
    spec = results_on(job_file(tmp_path, "true", retry="{max: 1}", spec="{a: b}"), full_fs)
    done = taospec("run", "--detach", spec, env={"TAOSPEC_SUBMIT_BACKOFF": "0"})
    assert done.returncode == 1
    ids = [p.stem for p in _records(state_dir)]
    assert len(ids) == 2
    retry = next(record(state_dir, i) for i in ids if record(state_dir, i).get("retry_of"))
    assert retry["retry_of"] in ids
    assert f"{retry['id']}: command failed" in done.stderr  # the last failure is the one shown


def test_a_retry_interrupted_while_followed_says_it_cancelled_the_job(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # it cancelled the job and exited 130, its last word the job's RUNNING line
    mark = tmp_path / "mark"
    spec = job_file(
        tmp_path, f"sh -c 'if [ -e {mark} ]; then sleep 300; else touch {mark}; exit 3; fi'"
    )
    first = taospec("run", spec).stdout.split()[0]
    following = spawn(["retry", first], taospec.env, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not any(r != first and record(state_dir, r)["transitions"][-1]["state"] == "RUNNING"
                      for r in (p.stem for p in _records(state_dir))):  # fmt: skip
            assert following.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        following.send_signal(signal.SIGINT)
        out, err = following.communicate(timeout=60)
    finally:
        if following.poll() is None:
            following.kill()
    assert following.returncode == 130, err
    retry_id = out.strip()
    assert record(state_dir, retry_id)["terminal_state"] == "CANCELED"
    assert err.endswith(f"{retry_id}: CANCELED (interrupted)\n")


@pytest.mark.engine
def test_a_docker_submit_that_failed_err_infra_succeeds_on_its_retry(
    engine: str,
    taospec: Runner,
    tmp_path: Path,
    state_dir: Path,
    full_fs: Path,
    containers_removed: None,
) -> None:
    """The filesystem is full at the first submit and has room again during the wait."""
    spec = docker_job_file(tmp_path, engine, "cat {config_path}", retry="{max: 3}", spec="{a: b}")
    results_on(spec, full_fs)
    env = {**taospec.env, "TAOSPEC_SUBMIT_BACKOFF": "2"}
    running = spawn(["run", str(spec)], env, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not any(json.loads(p.read_text())["terminal_state"] for p in _records(state_dir)):
            assert running.poll() is None, running.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (full_fs / "filler").unlink()  # room again, as when a cleanup frees the disk
        out, err = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 0, err
    last_id, state = out.split()[:2]
    assert state == "COMPLETE"
    chain = chain_of(state_dir, last_id)
    assert len(chain) == 2
    failed = chain[0]
    assert (failed["terminal_state"], failed["err_class"]) == ("ERROR", "ERR_INFRA")
    said = f"job: {failed['id']} ended ERROR ERR_INFRA while submitting; retry 1 of 3 in 2s"
    assert said in err
    assert (full_fs / "results" / last_id / "stage" / "spec.yaml").read_text() == "a: b\n"
    assert taospec("logs", last_id).stdout == "a: b\n"  # the retry ran the job


@pytest.fixture
def containers_removed(state_dir: Path) -> Iterator[None]:
    """The containers of the test's jobs are removed after it."""
    yield
    ids = [p.stem for p in _records(state_dir)]
    if ids:
        docker("rm", "-f", *ids)


def _records(state_dir: Path) -> list[Path]:
    """The records written so far (one reserved by open and not written yet is empty)."""
    jobs = state_dir / "jobs"
    found = jobs.glob("*.json") if jobs.exists() else []
    return sorted(p for p in found if not p.name.startswith(".") and p.stat().st_size)


@pytest.mark.engine
@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("no-such-command-here", "executable file not found"),
        # a path the image lacks: runc's stat, which came inside "OCI runtime create failed"
        # and was taken for an unhealthy runtime (ERR_INFRA), and retried
        ("/no/such/binary", "stat /no/such/binary: no such file or directory"),
    ],
)
def test_a_docker_submit_that_failed_err_program_is_not_retried(
    command: str,
    said: str,
    engine: str,
    taospec: Runner,
    tmp_path: Path,
    state_dir: Path,
    containers_removed: None,
) -> None:
    spec = docker_job_file(tmp_path, engine, command, retry="{max: 3}")
    done = taospec("run", spec, env={"TAOSPEC_SUBMIT_BACKOFF": "0"})
    assert done.returncode == 1
    (job_id,) = [p.stem for p in _records(state_dir)]
    job = record(state_dir, job_id)
    assert (job["terminal_state"], job["err_class"]) == ("ERROR", "ERR_PROGRAM")
    assert said in job["transitions"][-1]["message"]
    assert "while submitting" not in done.stderr


def test_the_wait_between_submits_doubles_and_is_bounded() -> None:
    assert [backoff(n) for n in range(1, 8)] == [5, 10, 20, 40, 60, 60, 60]
    assert [backoff(n, 0.5) for n in (1, 2, 3)] == [0.5, 1, 2]
    assert backoff(3, 0) == 0
    assert backoff(2, 90) == 90  # a first wait set longer than the bound stays
    assert backoff_first({}) == 5
    assert backoff_first({"TAOSPEC_SUBMIT_BACKOFF": "0.25"}) == 0.25
    for bad in ("-1", "soon", "nan", "inf"):
        with pytest.raises(InvalidInput, match="TAOSPEC_SUBMIT_BACKOFF"):
            backoff_first({"TAOSPEC_SUBMIT_BACKOFF": bad})


# -- a retry starts nothing while a job of the same plan is under way -------------------


def _failed_then_sleeps(taospec: Runner, tmp_path: Path) -> tuple[Path, str]:
    """A job file whose first job fails; once ``mark`` exists its jobs sleep instead."""
    mark = tmp_path / "mark"
    spec = job_file(tmp_path, f"sh -c 'if [ -e {mark} ]; then exec sleep 300; fi; exit 3'")
    failed = taospec("run", spec)
    assert failed.returncode == 1, failed.stderr
    mark.touch()
    return spec, failed.stdout.split()[0]


def _retry_refusal(failed_id: str, busy_id: str, state: str = "RUNNING") -> str:
    return (
        f"{failed_id}: job {busy_id} is still {state}; follow it with `taospec logs -f "
        f"{busy_id}`, or stop it with `taospec cancel {busy_id}`\n"
        f"nothing was run: retry it once that job has ended, or `taospec retry -B "
        f"{failed_id}` to start another\n"
    )


def test_retry_refuses_while_a_newer_job_of_the_same_plan_runs(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # retry started a second copy of the plan that a later run had under way
    spec, failed_id = _failed_then_sleeps(taospec, tmp_path)
    running = taospec("run", "-d", spec)
    assert running.returncode == 0, running.stderr
    running_id = running.stdout.strip()
    try:
        for args in ((), ("--detach",)):
            refused = taospec("retry", *args, failed_id)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert refused.stderr == _retry_refusal(failed_id, running_id)
        assert len(_records(state_dir)) == 2
        forced = taospec("retry", "-B", "--detach", failed_id)
        assert forced.returncode == 0, forced.stderr
        forced_id = forced.stdout.strip()
        assert record(state_dir, forced_id)["retry_of"] == failed_id
        # the retry is now the plan's newest job: a run refuses to start it again
        refused = taospec("run", spec)
        assert refused.returncode == 2, refused.stderr
        assert f"job: job {forced_id} is still RUNNING" in refused.stderr
    finally:
        for rec in _records(state_dir):
            taospec("cancel", rec.stem)


def test_concurrent_retries_and_runs_of_one_plan_start_one_job(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec, failed_id = _failed_then_sleeps(taospec, tmp_path)
    pool = ThreadPoolExecutor(6)
    try:
        calls = [("retry", "--detach", failed_id)] * 3 + [("run", "-d", str(spec))] * 3
        done = list(pool.map(lambda args: taospec(*args), calls))
        started = [d.stdout.strip() for d in done if d.returncode == 0]
        assert len(started) == 1, [(d.returncode, d.stderr) for d in done]
        (job_id,) = started
        for loser in (d for d in done if d.returncode != 0):
            assert (loser.returncode, loser.stdout) == (2, ""), loser.stderr
            assert f"job {job_id} is still " in loser.stderr
        assert sorted(p.stem for p in _records(state_dir)) == sorted([failed_id, job_id])
    finally:
        pool.shutdown()
        for rec in _records(state_dir):
            taospec("cancel", rec.stem)


def _waiting(argv: list[str], env: dict[str, str], cwd: Path, said: str) -> subprocess.Popen:
    """``taospec *argv``, followed, once it says ``said`` (it begins to wait to resubmit)."""
    waiting = subprocess.Popen(
        [*taospec_command(), *argv],
        env={**env, "TAOSPEC_SUBMIT_BACKOFF": "600"},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert waiting.stderr is not None
    if not any(said in line for line in waiting.stderr):
        waiting.kill()
        raise AssertionError(f"{argv} never said {said!r}: {waiting.communicate()}")
    return waiting


def _stopped(waiting: subprocess.Popen) -> int:
    """SIGTERM to the process's group, as a closed terminal sends it: its exit code."""
    if waiting.poll() is None:
        os.killpg(waiting.pid, signal.SIGTERM)
    waiting.communicate(timeout=60)
    return waiting.returncode


def test_a_run_while_a_retry_waits_to_resubmit_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, full_fs: Path
) -> None:
    # a followed retry whose submit failed ERR_INFRA waited without saying so: a run of the
    # plan meanwhile started a second job, and the retry then stopped
    spec = results_on(
        job_file(tmp_path, "cat {config_path}", retry="{max: 3}", spec="{a: b}"), full_fs
    )
    run = ["run", str(spec)]
    first = _waiting(run, taospec.env, tmp_path, "retry 1 of 3 in 600s")
    assert _stopped(first) == 130
    (failed_id,) = (p.stem for p in _records(state_dir))
    retry = _waiting(["retry", failed_id], taospec.env, tmp_path, "retry 2 of 3 in 600s")
    try:
        (waiting_id,) = (p.stem for p in _records(state_dir) if p.stem != failed_id)
        assert record(state_dir, waiting_id)["err_class"] == "ERR_INFRA"
        (full_fs / "filler").unlink()  # room again: nothing but the check stops a run now
        refused = taospec("run", "-d", spec)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        assert refused.stderr == (
            f"job: {busy_line(_due(waiting_id, retry.pid), waiting_id)}\n"
            f"nothing was run: run again once it has ended, or `taospec run -B {spec}` "
            "to start another\n"
        )
        assert len(_records(state_dir)) == 2
    finally:
        stopped = _stopped(retry)
    assert stopped == 130
    # the retry that would submit it is gone: a run starts the job again
    again = taospec("run", "-d", spec)
    assert again.returncode == 0, again.stderr
    assert len(_records(state_dir)) == 3


def test_a_followed_retry_submits_again_what_it_waited_to_submit(
    taospec: Runner, tmp_path: Path, state_dir: Path, full_fs: Path
) -> None:
    # its own note of the wait does not keep the retry from submitting
    spec = results_on(job_file(tmp_path, "true", retry="{max: 2}", spec="{a: b}"), full_fs)
    assert _stopped(_waiting(["run", str(spec)], taospec.env, tmp_path, "in 600s")) == 130
    (failed_id,) = (p.stem for p in _records(state_dir))
    done = taospec("retry", failed_id, env={"TAOSPEC_SUBMIT_BACKOFF": "0"})
    assert done.returncode == 1
    assert "not retried" not in done.stderr
    last = done.stdout.split()[-1]
    assert [r["id"] for r in chain_of(state_dir, last)[:1]] == [failed_id]
    assert len(chain_of(state_dir, last)) == 3 == len(_records(state_dir))
    assert f"{last} ended ERROR ERR_INFRA while submitting; no retries left (max 2)" in done.stderr


def _in_the_old_shape(state_dir: Path, job_id: str) -> None:
    """``job_id``'s sidecar as a taospec wrote it before launches noted their work."""
    sidecar = state_dir / "jobs" / f"{job_id}.taospec"
    notes = json.loads(sidecar.read_text())
    del notes["work"]
    sidecar.write_text(json.dumps(notes))


def _launched_since(taospec: Runner, spec: Path) -> str:
    """A job of a changed plan of ``spec``'s target, under way: the target's last launch."""
    write(spec, spec.read_text().replace("sleep 300", "sleep 301"))
    changed = taospec("run", "-d", spec)
    assert changed.returncode == 0, changed.stderr
    return changed.stdout.strip()


def test_a_retry_of_an_old_record_refuses_while_its_plan_runs(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # a job from before launches noted their work, once its target had launched another
    # plan, was retried without the look: a second copy of the plan under way started
    spec, failed_id = _failed_then_sleeps(taospec, tmp_path)
    _in_the_old_shape(state_dir, failed_id)
    running = taospec("run", "-d", spec)
    assert running.returncode == 0, running.stderr
    running_id = running.stdout.strip()
    try:
        _launched_since(taospec, spec)
        for args in (("--detach",), ()):
            refused = taospec("retry", *args, failed_id)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert refused.stderr == _retry_refusal(failed_id, running_id)
        assert len(_records(state_dir)) == 3
    finally:
        for rec in _records(state_dir):
            taospec("cancel", rec.stem)


def test_a_retry_of_an_old_record_whose_work_is_not_known_asks_for_b(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec, failed_id = _failed_then_sleeps(taospec, tmp_path)
    _in_the_old_shape(state_dir, failed_id)
    try:
        _launched_since(taospec, spec)
        for args in (("--detach",), ()):
            refused = taospec("retry", *args, failed_id)
            assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
            assert refused.stderr == (
                f"{failed_id}: launched by a taospec that did not note which plan's work it "
                "ran, so whether another job of that plan is under way cannot be told\n"
                f"nothing was run: `taospec retry -B {failed_id}` retries it without that "
                "check\n"
            )
        assert len(_records(state_dir)) == 2
        forced = taospec("retry", "-B", "--detach", failed_id)
        assert forced.returncode == 0, forced.stderr
        assert record(state_dir, forced.stdout.strip())["retry_of"] == failed_id
    finally:
        for rec in _records(state_dir):
            taospec("cancel", rec.stem)


def _due(job_id: str, pid: int) -> str:
    """Why a plan is busy while the process ``pid`` waits to resubmit ``job_id``."""
    return (
        f"job {job_id} ended ERROR ERR_INFRA; the taospec that launched it submits its retry "
        f"(pid {pid})"
    )
