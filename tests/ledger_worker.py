"""A separate process that writes to a ledger, for the multi-process tests.

Usage:
    ledger_worker.py mark ROOT GO_FILE TAG COUNT SHARED_ID OWN_ID
        wait for GO_FILE, then mark both records RUNNING COUNT times each,
        with messages ``TAG shared <i>`` and ``TAG own <i>``.
    ledger_worker.py churn ROOT
        print "ready", then open, mark and update jobs until killed.
    ledger_worker.py protocol ROOT GO_FILE TAG COUNT ID
        wait for GO_FILE, then append COUNT transitions to record ID the way the
        TAO record format says any writer must (see protocol_mark), without taospec.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from taospec.ledger import Ledger


def mark(root: Path, go_file: Path, tag: str, count: int, shared: str, own: str) -> None:
    """Hammer one shared and one private record with non-terminal transitions."""
    ledger = Ledger(root)
    while not go_file.exists():
        time.sleep(0.001)
    for i in range(count):
        ledger.mark(shared, "RUNNING", message=f"{tag} shared {i}")
        ledger.mark(own, "RUNNING", message=f"{tag} own {i}", source="poller")


def churn(root: Path) -> None:
    """Open and drive jobs to completion in a tight loop, forever."""
    ledger = Ledger(root)
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        record = ledger.open(
            platform="docker",
            image="nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt",
            network_arch="visual_changenet",
            action="train",
            storage_tier="A",
            results_root=str(root / "results"),
            sidecar={"spec": "jobs/train.yaml", "n": n},
        )
        ledger.mark(record.id, "RUNNING", backend_ref=f"c{n:064x}")
        ledger.update_sidecar(record.id, gpus=["0", "1"])
        ledger.mark(record.id, "COMPLETE", message="exit 0", source="poller")


def protocol_mark(jobs: Path, job_id: str, message: str) -> None:
    """One transition by the documented protocol, with nothing of taospec.

    Exclusive flock on jobs/.<id>.json.lock for the whole read-modify-write; the
    new record goes to jobs/.<id>.json.<pid>.tmp, is fsynced, renamed over the
    record, and the folder is fsynced.
    """
    record = jobs / f"{job_id}.json"
    with (jobs / f".{job_id}.json.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(record.read_text())
        stamp = datetime.now(timezone.utc).isoformat()
        data["transitions"].append(
            {"ts": stamp, "state": "RUNNING", "message": message, "source": "backend-hook"}
        )
        temp = jobs / f".{record.name}.{os.getpid()}.tmp"
        with temp.open("w") as out:
            out.write(json.dumps(data, indent=2) + "\n")
            out.flush()
            os.fsync(out.fileno())
        temp.replace(record)
        folder = os.open(jobs, os.O_RDONLY)
        os.fsync(folder)
        os.close(folder)


def protocol(root: Path, go_file: Path, tag: str, count: int, job_id: str) -> None:
    """COUNT protocol transitions on one record, once GO_FILE appears."""
    while not go_file.exists():
        time.sleep(0.001)
    for i in range(count):
        protocol_mark(root / "jobs", job_id, f"{tag} {i}")


def taospec_marks(root: Path, go_file: Path, tag: str, count: int, job_id: str) -> None:
    """COUNT taospec transitions on one record, once GO_FILE appears."""
    ledger = Ledger(root)
    while not go_file.exists():
        time.sleep(0.001)
    for i in range(count):
        ledger.mark(job_id, "RUNNING", message=f"{tag} {i}")


def main(argv: list[str]) -> None:
    """Dispatch on the mode named by the first argument."""
    mode, root = argv[0], Path(argv[1])
    if mode == "mark":
        mark(root, Path(argv[2]), argv[3], int(argv[4]), argv[5], argv[6])
    elif mode == "churn":
        churn(root)
    elif mode == "protocol":
        protocol(root, Path(argv[2]), argv[3], int(argv[4]), argv[5])
    elif mode == "taospec":
        taospec_marks(root, Path(argv[2]), argv[3], int(argv[4]), argv[5])
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
