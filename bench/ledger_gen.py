"""Write a large ledger fast, byte for byte as taospec writes it, without fsync.

Each generated job is a finished local-platform run of one job file (the suite
uses a copy of ``jobs/hello.yaml`` whose results_root is in its workspace):
its record (PENDING, RUNNING, COMPLETE), its sidecar with the plan, and three
journal lines (the ledger's lock stripes need no file per job). One job is
encoded by the ledger's own encoders with a token in place of the id and the
times; every job is then that encoding with the token replaced, so generating
200,000 jobs takes seconds, not the hours a durable writer would need.
tests/test_bench.py checks that a generated job is exactly what
:class:`taospec.ledger.Ledger` writes.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from taospec import __version__
from taospec.jobfile import load_jobfile
from taospec.ledger import Mark, Record, Transition
from taospec.ledger.durable import encode_json
from taospec.ledger.journal import encode_line
from taospec.ledger.store import _open_event, _transition_event
from taospec.plan import render

ROOT = Path(__file__).resolve().parent.parent
ID_MARK = "zzbenchtoken0zz"
TIMES = tuple(f"zz0000-00-00T00:00:00.00000{step}+00:00zz" for step in (1, 2, 3))
START = datetime(2025, 1, 1, tzinfo=timezone.utc)  # noqa: UP017
PID = 4_194_305  # above the largest pid_max Linux allows, so no live process matches


def job_id(index: int) -> str:
    """The id of the ``index``-th generated job, shaped like a minted one."""
    return f"hello-greet-{index:06x}"


def _time(index: int, step: int) -> str:
    moment = START + timedelta(seconds=index, microseconds=1000 * step)
    return moment.isoformat(timespec="microseconds")


def templates(spec: Path) -> tuple[bytes, bytes, bytes]:
    """(record, sidecar, journal lines) of one run of ``spec``, with marks for id and times."""
    target = load_jobfile(spec).targets[spec.stem]
    plan = render(target.job).with_job_id(ID_MARK)
    key = f"{spec.resolve()}#{spec.stem}"
    notes: dict[str, object] = {
        "spec": str(spec),
        "target": key,
        "taospec": __version__,
        "plan_digest": plan.digest(),
    }
    sidecar = {**notes, "plan": plan.to_json(), "start_time": 123456, "fingerprint": "0" * 64}
    opened = Record(
        id=ID_MARK,
        platform="local",
        backend_ref=None,
        image=target.job.image,
        network_arch=target.job.network_arch,
        action=target.job.action,
        results_dir=plan.record.results_dir,
        storage_tier="A",
        upload_excludes=(),
        submitted_at=TIMES[0],
        transitions=(
            Transition(
                TIMES[0], "PENDING", f"opened by taospec for {spec} (target {spec.stem})", "agent"
            ),
        ),
        terminal_state=None,
    )
    running = replace(
        opened,
        backend_ref=f"pid:{PID}",
        transitions=(*opened.transitions, Transition(TIMES[1], "RUNNING", "launched", "agent")),
    )
    done = replace(
        running,
        transitions=(
            *running.transitions,
            Transition(TIMES[2], "COMPLETE", "process exited 0", "poller"),
        ),
        terminal_state="COMPLETE",
        terminal_write_by="poller",
    )
    journal = (
        encode_line(_open_event(opened, notes))
        + encode_line(_transition_event(running, Mark("RUNNING", backend_ref=f"pid:{PID}")))
        + encode_line(_transition_event(done, Mark("COMPLETE")))
    )
    return encode_json(done.to_json()), encode_json(sidecar), journal


class _Filler:
    """A template cut at its tokens, put back together with one job's values."""

    def __init__(self, template: bytes) -> None:
        tokens = [ID_MARK.encode(), *(t.encode() for t in TIMES)]
        self.parts: list[bytes | int] = []
        rest = template
        while rest:
            found = [(rest.find(t), i) for i, t in enumerate(tokens) if t in rest]
            if not found:
                self.parts.append(rest)
                break
            at, which = min(found)
            self.parts += [rest[:at], which]
            rest = rest[at + len(tokens[which]) :]

    def fill(self, values: list[bytes]) -> bytes:
        """The template with token ``i`` replaced by ``values[i]``."""
        return b"".join(values[p] if isinstance(p, int) else p for p in self.parts)


def generate(root: Path, count: int, spec: Path) -> list[str]:
    """Write ``count`` finished runs of ``spec`` under the state root ``root``; return their ids."""
    record, sidecar, journal = (_Filler(t) for t in templates(spec))
    jobs = root / "jobs"
    jobs.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    ids = []
    with (root / "ledger.jsonl").open("wb") as lines:
        for index in range(count):
            name = job_id(index)
            values = [name.encode(), *(_time(index, step).encode() for step in range(3))]
            for path, data in (
                (f"{jobs}/{name}.json", record.fill(values)),
                (f"{jobs}/{name}.taospec", sidecar.fill(values)),
            ):
                fd = os.open(path, flags, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            lines.write(journal.fill(values))
            ids.append(name)
    return ids


def finish(root: Path, name: str) -> None:
    """Give one generated job the results directory its COMPLETE state implies."""
    record = json.loads((root / "jobs" / f"{name}.json").read_bytes())
    folder = Path(record["results_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "taospec.exit").write_text("0\n")
    (folder / "taospec.log").write_text("hello from " + name + "\n")


if __name__ == "__main__":
    # ledger_gen.py STATE COUNT JOB_FILE FINISHED_INDEX: prints the finished job's id
    state, number, job_file = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    made = generate(state, number, job_file)
    finish(state, made[int(sys.argv[4])])
    print(made[int(sys.argv[4])])
