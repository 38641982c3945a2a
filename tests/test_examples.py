"""Every file under tests/examples/ is a test case.

``valid/*.yaml`` must load. ``invalid/*.yaml`` must fail with exactly the
lines in the ``.err`` file beside it (``{file}`` stands for the path), through
the real command, with exit code 2 and nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import load_job

EXAMPLES = Path(__file__).parent / "examples"
VALID = sorted((EXAMPLES / "valid").glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_example_loads(path: Path) -> None:
    job = load_job(path)
    assert job.file == str(path)
    assert job.command


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_example_reports_exact_problems(path: Path, taospec, state_dir: Path) -> None:
    expected = path.with_suffix(".err").read_text().replace("{file}", str(path))
    result = taospec("validate", path)
    assert result.returncode == 2
    assert result.stdout == ""
    problems = [line for line in result.stderr.splitlines() if not line.endswith("are invalid")]
    assert "\n".join(problems) + "\n" == expected
    assert list(state_dir.iterdir()) == []


def test_every_invalid_example_has_its_expected_output() -> None:
    missing = [p.name for p in INVALID if not p.with_suffix(".err").exists()]
    assert missing == []
