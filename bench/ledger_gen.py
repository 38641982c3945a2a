"""A large ledger made of copies of one real job, written fast and without fsync.

One job is run for real (``taospec run FILE``, a local process) into a template
state root; whatever that run wrote is the template: the files under ``jobs/``
whose names carry the job id (its record, its sidecar, and any per-job lock
file the ledger keeps), the journal lines that name it, and everything else
(lock stripes, taospec's own indexes) once as it is. Every generated job is
that template with the id and the three transition times replaced, so the
generator knows nothing of the ledger's formats and follows them when they
change; 200,000 jobs take seconds, not the hours a durable writer would need.
The real job stays in the ledger, with its results, for ``status`` to ask about.

    python bench/ledger_gen.py STATE COUNT JOB_FILE   # prints the real job's id
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

START = datetime(2025, 1, 1, tzinfo=timezone.utc)
TAOSPEC = Path(sys.executable).with_name("taospec")


@dataclass(frozen=True, slots=True)
class Template:
    """One real job's files, cut where its id and times appear."""

    job_id: str
    times: tuple[str, ...]
    per_job: dict[str, bytes]
    """Name under ``jobs/`` (with the id in it) to content."""
    journal: bytes
    """The journal lines that name the job."""

    def tokens(self) -> list[bytes]:
        """What a copy replaces: the id, then each time."""
        return [self.job_id.encode(), *(t.encode() for t in self.times)]


def job_id(index: int) -> str:
    """The id of the ``index``-th generated job, shaped like a minted one."""
    return f"hello-greet-{index:06x}"


def _time(index: int, step: int, like: str) -> str:
    moment = START + timedelta(seconds=index, microseconds=1000 * step)
    text = (
        moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if like.endswith("Z")
        else moment.isoformat(timespec="microseconds")
    )
    if len(text) != len(like):
        raise ValueError(f"the ledger writes times like {like!r}, not like {text!r}")
    return text


def run_template(state: Path, spec: Path) -> Template:
    """Run ``spec`` once for real into the empty state root ``state``; read back what it wrote."""
    env = {**os.environ, "TAO_STATE_DIR": str(state)}
    subprocess.run(
        [str(TAOSPEC), "run", str(spec)], env=env, check=True, capture_output=True, text=True
    )
    records = sorted((state / "jobs").glob("*.json"))
    if len(records) != 1:
        raise RuntimeError(f"one run of {spec} left {len(records)} records in {state / 'jobs'}")
    record = json.loads(records[0].read_bytes())
    name = record["id"]
    times = tuple(transition["ts"] for transition in record["transitions"])
    per_job = {
        path.name: path.read_bytes() for path in (state / "jobs").iterdir() if name in path.name
    }
    lines = (state / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    journal = b"".join(line for line in lines if name.encode() in line)
    return Template(name, times, per_job, journal)


def _fill(template: bytes, tokens: list[bytes], values: list[bytes]) -> bytes:
    for token, value in zip(tokens, values, strict=True):
        template = template.replace(token, value)
    return template


def generate(root: Path, count: int, spec: Path) -> str:
    """A state root of ``count`` jobs: the real run of ``spec`` and older copies; its id."""
    template_root = root.with_name(root.name + "-template")
    template = run_template(template_root, spec)
    template_root.rename(root)
    real_journal = (root / "ledger.jsonl").read_bytes()
    tokens = template.tokens()
    jobs = root / "jobs"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    names = [job_id(i) for i in range(count) if job_id(i) != template.job_id][: count - 1]
    with (root / "ledger.jsonl").open("wb") as journal:
        for index, name in enumerate(names):
            times = [_time(index, step, t).encode() for step, t in enumerate(template.times)]
            values = [name.encode(), *times]
            for file, content in template.per_job.items():
                fd = os.open(jobs / file.replace(template.job_id, name), flags, 0o600)
                try:
                    os.write(fd, _fill(content, tokens, values))
                finally:
                    os.close(fd)
            journal.write(_fill(template.journal, tokens, values))
        journal.write(real_journal)  # the real run is the newest: its lines come last
    return template.job_id


if __name__ == "__main__":
    print(generate(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
