"""What the quick verbs load: ``status`` and ``ls`` start without pathlib, ``render``
without the ledger or the pipeline.

On Python 3.10 and 3.11, ``import pathlib`` also imports ``urllib.parse`` and
``ipaddress``: about 7% of the instructions of ``taospec ls`` and of ``taospec
status`` on a finished job. The ledger, its durable writes, the reader of TAO's
``status.json`` and the CLI itself use string paths, so the two verbs a person
runs most often do not pay for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taospec.ledger import Ledger
from tests.conftest import ROOT
from tests.ledgers import open_job

PROBE = """\
import sys
from taospec.cli import main
code = main(sys.argv[1:])
loaded = [m for m in ("pathlib", "urllib.parse", "ipaddress") if m in sys.modules]
print("loaded:", *loaded, file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("verb", ["ls", "status"])
def test_status_and_ls_start_without_pathlib(tmp_path: Path, verb: str) -> None:
    ledger = Ledger(tmp_path / "state")
    record = open_job(ledger)
    ledger.mark(record.id, "RUNNING", backend_ref="container:x")
    ledger.mark(record.id, "COMPLETE", message="exit 0")
    ledger.update_sidecar(record.id, exit_code=0)  # as taospec notes it: status answers from here
    args = [verb] if verb == "ls" else [verb, record.id]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env={**os.environ, "TAO_STATE_DIR": ledger.root},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert record.id in done.stdout
    assert done.stderr.splitlines()[-1] == "loaded:"


def test_the_command_line_looks_for_cycles_every_50000_new_objects_not_every_700() -> None:
    """What a command's start allocates lives until it exits (README, Performance)."""
    done = subprocess.run(
        [sys.executable, "-c", "import gc, taospec.cli; print(gc.get_threshold()[0])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(done.stdout) == 50_000


def test_render_loads_neither_the_ledger_nor_the_pipeline(tmp_path: Path) -> None:
    """README, Performance: each verb loads what it uses. ``render`` refuses an id that
    would spell a secret, which needs the id rule (``taospec.jobids``), not the ledger; a
    job without ``skill:`` needs none of the skill bank's code."""
    probe = PROBE.replace(
        '("pathlib", "urllib.parse", "ipaddress")',
        '("taospec.ledger", "taospec.pipeline", "taospec.executor", "taospec.fingerprint", '
        '"taospec.skills", "taospec.taoschema", "taospec.skilljob")',
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "render", str(ROOT / "jobs" / "train.yaml")],
        env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "docker run" in done.stdout
    assert done.stderr.splitlines()[-1] == "loaded:"
