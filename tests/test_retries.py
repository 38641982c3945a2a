"""Retries keep their history: ``retry ID`` by hand, ``retry: {max: N}`` for infrastructure
failures only, the chain cap, ``show``'s chain, and the plan digest untouched by reactions.

Local jobs for real. A job stopped by SIGTERM from outside is ERR_INFRA; a marker file
makes its second run succeed."""

from __future__ import annotations

import json
from pathlib import Path

from taospec.ledger import Ledger
from taospec.loader import load_job
from taospec.platforms import render
from taospec.retrying import MAX_CHAIN
from taospec.states import ERROR
from tests.conftest import Runner, write
from tests.test_local_jobs import job_file, record

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


def test_retry_refuses_a_job_that_has_not_ended(taospec: Runner, tmp_path: Path) -> None:
    spec = job_file(tmp_path, "sleep 300")
    job_id = taospec("run", "--detach", spec).stdout.strip()
    try:
        refused = taospec("retry", job_id)
        assert refused.returncode == 2
        assert f"{job_id} has not ended (RUNNING)" in refused.stderr
    finally:
        assert taospec("cancel", job_id).returncode == 0


def test_a_chain_holds_at_most_ten_retries(taospec: Runner, state_dir: Path) -> None:
    ledger = Ledger(state_dir)
    previous = None
    for _ in range(MAX_CHAIN + 1):
        opened = ledger.open(
            platform="local",
            image="busybox:1",
            network_arch="hello",
            action="greet",
            storage_tier="A",
            results_root=str(state_dir / "results"),
            retry_of=previous,
        )
        ledger.mark(opened.id, ERROR, message="stopped from outside", err_class="ERR_INFRA")
        previous = opened.id
    refused = taospec("retry", str(previous))
    assert refused.returncode == 2
    assert f"already retry {MAX_CHAIN} of its chain" in refused.stderr
    assert len(list((state_dir / "jobs").glob("*.json"))) == MAX_CHAIN + 1


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
        "# Note: retry: taospec run submits a retry (a new job) when the job ends ERROR "
        "ERR_INFRA, at most 3 times" in shown.stdout
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
