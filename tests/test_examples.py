"""Every file under tests/examples/ is a test case.

``valid/*.yaml`` must load. ``invalid/*.yaml`` must fail with exactly the
lines in the ``.err`` file beside it (``{file}`` stands for the path), through
the real command, with exit code 2 and nothing written.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, load_job

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
    *problems, summary = result.stderr.splitlines()
    assert summary == "1 of 1 job files is invalid"
    assert "\n".join(problems) + "\n" == expected
    assert list(state_dir.iterdir()) == []


def test_every_invalid_example_has_its_expected_output() -> None:
    missing = [p.name for p in INVALID if not p.with_suffix(".err").exists()]
    assert missing == []


HOOK_FILES = (ROOT / ".pre-commit-config.yaml", ROOT / ".pre-commit-hooks.yaml")


def _validate_hooks(path: Path) -> list[dict[str, str]]:
    data = yaml.safe_load(path.read_text())
    hooks = data if isinstance(data, list) else [h for r in data["repos"] for h in r["hooks"]]
    return [hook for hook in hooks if hook["id"] == "taospec-validate"]


@pytest.mark.parametrize("config", HOOK_FILES, ids=[p.name for p in HOOK_FILES])
def test_the_validate_hook_picks_this_repositorys_job_files_and_they_pass(
    config: Path, taospec
) -> None:
    """What the hook's files/exclude patterns select in this repository are job files."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    (hook,) = _validate_hooks(config)
    picked = [
        name
        for name in tracked
        if re.search(hook["files"], name) and not re.search(hook.get("exclude", "^$"), name)
    ]
    assert "jobs/train.yaml" in picked
    assert not [name for name in picked if "/configs/" in name]
    assert "jobs/versions.yaml" in picked  # validate checks the job files beside it
    done = taospec("validate", "--quiet", *(ROOT / name for name in picked))
    assert done.returncode == 0, done.stderr
