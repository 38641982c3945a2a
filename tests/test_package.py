"""A release build installs into a clean virtualenv and works there.

``python -m build`` makes the sdist and then the wheel from that sdist, as a
release does; the wheel goes into a new virtualenv of this interpreter (so the
Python 3.10 run of ``make test`` installs it on 3.10), and the installed
``taospec`` must answer ``schema``, ``validate`` and ``render`` exactly as the
checkout's does.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import taospec_command

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schemas" / "job.schema.json"
COMMANDS = (
    ("schema",),
    ("validate", "jobs/train.yaml"),
    ("render", "jobs/train.yaml"),
)


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done  # type: ignore[no-any-return]


def _only(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"{pattern} in {folder}: {found}"
    return found[0]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as ``python -m build`` makes a release."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)])
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed ``taospec`` script of a new virtualenv holding only the wheel and its deps."""
    venv = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(venv)])
    wheel = _only(dist, "taospec-*.whl")
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)])
    return venv / "bin" / "taospec"


def test_the_sdist_carries_the_schema_and_the_licence(dist: Path) -> None:
    sdist = _only(dist, "taospec-*.tar.gz")
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        member = archive.extractfile(f"{top}/schemas/job.schema.json")
        assert member is not None
        assert member.read() == SCHEMA.read_bytes()
        assert f"{top}/LICENSE" in archive.getnames()
        assert not any(m.issym() or m.islnk() for m in archive.getmembers())


def test_the_wheel_carries_the_schema_inside_the_package(dist: Path) -> None:
    with zipfile.ZipFile(_only(dist, "taospec-*.whl")) as archive:
        assert archive.read("taospec/schemas/job.schema.json") == SCHEMA.read_bytes()
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert "taospec/templates/docker.j2" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert b"Requires-Python: >=3.10" in metadata.splitlines()
    assert not any(line.startswith(b"Requires-Dist: sh") for line in metadata.splitlines())


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_the_installed_tool_answers_as_the_checkout_does(
    installed: Path, args: tuple[str, ...], tmp_path: Path
) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TAO_STATE_DIR": str(tmp_path / "tao")}
    from_wheel = _run([str(installed), *args], cwd=ROOT, env=env)
    from_checkout = _run([*taospec_command(), *args], cwd=ROOT, env=env)
    assert from_wheel.stdout == from_checkout.stdout
    assert from_wheel.stderr == from_checkout.stderr
    assert from_wheel.stdout.strip(), "the command printed nothing"
