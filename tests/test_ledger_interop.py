"""taospec and other writers of the TAO record format share one ledger safely.

Another writer is written here from the documented protocol alone (the lock
file, the temp name, fsync and rename): it and taospec's ledger, in separate
processes, mark one record at once and no transition is lost. A taospec record
is shown and listed in the documented format; with a checkout of
NVIDIA-TAO/tao-skill-bank at $TAO_SKILL_BANK, the TAO recorder's own ``show``
and ``list`` of it are compared with taospec's, and the other way round.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from taospec.ledger import Ledger
from tests.conftest import Runner, taospec_command
from tests.ledgers import open_job

REPO = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("ledger_worker.py")


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_taospec_and_a_protocol_writer_lose_no_transition(ledger: Ledger, tmp_path: Path) -> None:
    rounds, count = 4, 20
    for round_ in range(rounds):
        record = open_job(ledger)
        go = tmp_path / f"go-{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), mode, str(ledger.root), str(go), tag, str(count),
                 record.id],
                env=worker_env(),
            )
            for mode, tag in (("taospec", "ours"), ("protocol", "theirs"))
        ]  # fmt: skip
        time.sleep(0.3)
        go.touch()
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
        marked = ledger.get(record.id)
        messages = [t.message for t in marked.transitions[1:]]
        expected = {f"{tag} {i}" for tag in ("ours", "theirs") for i in range(count)}
        assert sorted(messages) == sorted(expected)
        assert [m for m in messages if m.startswith("ours")] == [f"ours {i}" for i in range(count)]
    for path in Path(ledger.jobs_dir).glob("*.json"):
        assert isinstance(json.loads(path.read_text()), dict)
    for line in Path(ledger.journal_path).read_bytes().splitlines():
        assert isinstance(json.loads(line), dict)
    assert [n for n in os.listdir(ledger.jobs_dir) if n.endswith(".tmp")] == []
    locks = sorted(n for n in os.listdir(ledger.jobs_dir) if n.endswith(".lock"))
    assert locks == sorted(f".{r.id}.json.lock" for r in ledger.list())


def recorder_script(bank: Path, tmp_path: Path) -> Path:
    """The recorder's script, copied out of the skill bank checkout ``bank``."""
    folder = tmp_path / "recorder"
    folder.mkdir()
    for name in ("tao_job_record.py", "redact_secrets.py"):
        (folder / name).write_bytes((bank / "scripts" / name).read_bytes())
    return folder / "tao_job_record.py"


def open_and_mark(taospec: Runner) -> str:
    """A taospec record with a URI results_dir, a non-ASCII message and a late err_class."""
    opened = taospec(
        "record", "open", "--platform", "Docker ", "--image", "nvcr.io/nvidia/tao/tao:6-pyt",
        "--network-arch", "dino", "--action", "train", "--storage-tier", "A",
        "--results-dir", "s3://bucket/exp/token=v1/run", "--upload-exclude", "ckpt/*",
        "--parent-job", "automl-7",
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    job_id = opened.stdout.strip()
    steps = [
        ("--state", "RUNNING", "--backend-ref", "c0ffee", "--message", "é launched"),
        ("--state", "ERROR", "--source", "poller", "--message", "exit 3"),
        ("--state", "ERROR", "--err-class", "ERR_PROGRAM"),
    ]
    for step in steps:
        assert taospec("record", "mark", job_id, *step).returncode == 0
    return job_id


def test_a_taospec_record_is_shown_and_listed_in_the_documented_format(
    taospec: Runner, state_dir: Path
) -> None:
    job_id = open_and_mark(taospec)
    raw = (state_dir / "jobs" / f"{job_id}.json").read_text()
    shown = taospec("record", "show", job_id)
    listed = taospec("record", "list")
    # The documented format: show is json.dumps(record, indent=2); the file is that and "\n".
    assert shown.stdout == raw
    assert raw == json.dumps(json.loads(raw), indent=2) + "\n"
    assert "\\u00e9 launched" in raw
    assert list(json.loads(raw))[-2:] == ["terminal_write_by", "err_class"]
    assert listed.stdout == f"{job_id}\tdocker\tERROR\ts3://bucket/exp/token=v1/run\n"


def test_the_recorder_shows_and_lists_a_taospec_record_as_taospec_does(
    taospec: Runner, state_dir: Path, tmp_path: Path, skill_bank: Path
) -> None:
    script = recorder_script(skill_bank, tmp_path)
    job_id = open_and_mark(taospec)
    shown, listed = taospec("record", "show", job_id), taospec("record", "list")
    env = {**os.environ, "TAO_STATE_DIR": str(state_dir)}
    theirs = [
        subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                       env=env, check=False)
        for args in (("show", job_id), ("list",))
    ]  # fmt: skip
    assert theirs[0].stdout == shown.stdout
    assert theirs[1].stdout == listed.stdout
    # and the other way round: a record the recorder writes and marks, taospec shows alike
    made = subprocess.run(
        [sys.executable, str(script), "open", "--platform", "slurm", "--image", "img:1",
         "--network-arch", "dino", "--action", "eval", "--storage-tier", "B",
         "--results-root", "/lustre/r"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout.strip()  # fmt: skip
    assert taospec("record", "mark", made, "--state", "COMPLETE").returncode == 0
    again = subprocess.run(
        [sys.executable, str(script), "show", made], capture_output=True, text=True, env=env,
        check=True,
    )  # fmt: skip
    assert again.stdout == taospec("record", "show", made).stdout
    assert json.loads(again.stdout)["terminal_state"] == "COMPLETE"


def recorded(script: Path, state_dir: Path | str, *args: str) -> tuple[int, str, str]:
    """The recorder's exit code, stdout and stderr for ``args`` on the ledger at ``state_dir``."""
    env = {**os.environ, "TAO_STATE_DIR": str(state_dir)}
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          env=env, check=False)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_bad_id_and_a_bad_state_root_are_refused_in_the_recorders_order(
    taospec: Runner, state_dir: Path, tmp_path: Path, skill_bank: Path
) -> None:
    script = recorder_script(skill_bank, tmp_path)
    not_a_folder = state_dir / "file"
    not_a_folder.write_text("")
    for root in ("", "relative/state", str(not_a_folder)):
        for job_id in ("../x", ".hidden", "ok-id"):
            for verb in (("show", job_id), ("mark", job_id, "--state", "RUNNING")):
                ours = taospec("record", *verb, env={"TAO_STATE_DIR": root})
                mine = (ours.returncode, ours.stdout, ours.stderr)
                assert mine == recorded(script, root, *verb), (root, verb)


def test_the_recorder_lists_and_shows_partial_records_as_taospec_does(
    taospec: Runner, state_dir: Path, tmp_path: Path, skill_bank: Path
) -> None:
    script = recorder_script(skill_bank, tmp_path)
    job_id = open_and_mark(taospec)
    jobs = state_dir / "jobs"
    whole = json.loads((jobs / f"{job_id}.json").read_text())
    partial = {
        "empty": {},
        "no-platform": {"id": "no-platform", "transitions": [{"state": "RUNNING"}]},
        "nulls": {"id": None, "platform": None, "transitions": [{"state": 3}], "results_dir": []},
        "no-steps": {**whole, "transitions": [], "platform": {"a": 1}},
        "renamed": whole,
    }
    for name, data in partial.items():
        (jobs / f"{name}.json").write_text(json.dumps(data))
    (jobs / "torn.json").write_text('{"id": ')
    (jobs / "bom.json").write_bytes(b'\xef\xbb\xbf{"id": "bom"}')
    # the recorder's Path.glob("*.json") finds dot-named files and names that are no id
    for name in (".hidden.json", ".json", "a b.json", ".torn.json"):
        (jobs / name).write_bytes((jobs / f"{job_id}.json").read_bytes()[: len(name) * 3])
    (jobs / ".copy.json").write_bytes((jobs / f"{job_id}.json").read_bytes())
    ours = taospec("record", "list")
    assert (ours.returncode, ours.stdout, ours.stderr) == recorded(script, state_dir, "list")
    (jobs / "listed.json").write_text('[1, {"a": null}]')
    for name in (*partial, "listed"):
        shown = taospec("record", "show", name)
        assert (shown.returncode, shown.stdout, shown.stderr) == recorded(
            script, state_dir, "show", name
        ), name


def test_a_run_whose_job_another_writer_ended_reports_that_end(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    """An agent's recorder marked the job ERROR while run followed it: run failed to record
    the job's own end over it, and exited 2 with "refusing transition", naming no job."""
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "version: 1\nnetwork_arch: demo\naction: nap\nplatform: local\nimage: busybox:1\n"
        f"results_root: {tmp_path / 'results'}\ncommand: sh -c 'sleep 3'\n"
    )
    run = subprocess.Popen(
        [*taospec_command(), "run", str(spec)],
        env=taospec.env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    jobs = state_dir / "jobs"
    deadline = time.monotonic() + 30
    while not any("RUNNING" in p.read_text() for p in jobs.glob("*.json")):
        assert time.monotonic() < deadline, "the job never ran"
        time.sleep(0.05)
    (path,) = jobs.glob("*.json")
    marked = taospec("record", "mark", path.stem, "--state", "ERROR", "--message", "stopped")
    assert marked.returncode == 0, marked.stderr
    out, err = run.communicate(timeout=60)
    assert (run.returncode, out) == (1, f"{path.stem} ERROR\n"), err
    assert "refusing" not in err
    assert "job: ERROR in " in err
    assert "  stopped; taospec logs " in err
    record = json.loads(path.read_text())
    assert [(t["state"], t["message"]) for t in record["transitions"]][1:] == [
        ("RUNNING", "launched"),
        ("ERROR", "stopped"),
    ]
    status = taospec("status", path.stem)
    assert status.stdout.split()[:2] == [path.stem, "ERROR"]


RECORDER_SUITE = "scripts/tests/test_tao_job_record.py"
RECORD_SCHEMA = "skills/core/tao-artifacts/references/job_record.schema.json"
STAND_IN = '''"""The TAO recorder's command line, answered by `taospec record` in this process."""
import contextlib, io, json, sys, uuid  # the suite reaches json and uuid through this module
from taospec.cli import main as taospec

def main(argv):
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        code = taospec(["record", *argv])
    sys.stderr.write(said.getvalue())
    if code == 0:
        return 0
    raise SystemExit(said.getvalue().strip() if code == 1 else code)  # as the recorder exits
'''
NOT_TAOSPEC_S = {
    "test_atomic_write_cleans_temporary_file_after_io_failure": "calls the recorder's private "
    "_atomic_write",
    "test_open_never_overwrites_existing_record": "forces two ids alike through uuid.uuid4; "
    "taospec draws its suffix from os.urandom and, on a name taken, draws again",
}


def test_the_recorder_s_own_suite_passes_against_taospec_record(
    skill_bank: Path, tmp_path: Path
) -> None:
    """The skill bank's tests of its recorder, run with `taospec record` in its place."""
    bank = tmp_path / "bank"
    for name in (RECORDER_SUITE, RECORD_SCHEMA):
        (bank / name).parent.mkdir(parents=True, exist_ok=True)
        (bank / name).write_bytes((skill_bank / name).read_bytes())
    (bank / "scripts" / "tao_job_record.py").write_text(STAND_IN)
    left_out = [f"--deselect={RECORDER_SUITE}::{name}" for name in NOT_TAOSPEC_S]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
         RECORDER_SUITE, *left_out],
        cwd=bank, env=worker_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    counted = re.fullmatch(rf"(\d+) passed, {len(NOT_TAOSPEC_S)} deselected in .*", summary)
    assert counted is not None, summary  # nothing failed, skipped or errored
    assert int(counted[1]) >= 30, summary
