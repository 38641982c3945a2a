"""The job schema: valid under its metaschema, documented everywhere, shipped and printed."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema

from taospec import schema
from tests.conftest import ROOT, Runner

SCHEMA_FILE = ROOT / "schemas" / "job.schema.json"


def test_the_schema_is_valid_draft_2020_12() -> None:
    data = json.loads(SCHEMA_FILE.read_text())
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(data)


def _properties(node: object, pointer: str = "#"):
    if isinstance(node, dict):
        for name, child in node.get("properties", {}).items():
            yield f"{pointer}/properties/{name}", child
        for key, child in node.items():
            yield from _properties(child, f"{pointer}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _properties(child, f"{pointer}/{index}")


def test_every_property_has_a_description_and_examples() -> None:
    data = json.loads(SCHEMA_FILE.read_text())
    found = list(_properties(data))
    assert len(found) > 40
    undocumented = [p for p, node in found if not node.get("description")]
    without_examples = [p for p, node in found if "examples" not in node]
    assert undocumented == []
    assert without_examples == []


def test_the_package_reads_the_same_file(taospec: Runner) -> None:
    assert schema.schema_text() == SCHEMA_FILE.read_text()
    printed = taospec("schema")
    assert printed.returncode == 0
    assert printed.stdout == SCHEMA_FILE.read_text()


def test_every_example_job_points_editors_at_the_schema() -> None:
    for path in sorted((ROOT / "jobs").glob("*.yaml")):
        if path.name == "versions.yaml":
            continue
        first = path.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../schemas/job.schema.json", path


def test_the_wheel_ships_the_schema(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    wheel = next(tmp_path.glob("taospec-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read("taospec/schemas/job.schema.json").decode()
        names = archive.namelist()
    assert shipped == SCHEMA_FILE.read_text()
    assert "taospec/templates/docker.j2" in names


def test_a_refused_key_is_reported_at_the_key_in_words(tmp_path: Path) -> None:
    from taospec.diagnostics import SpecError
    from taospec.loader import load_jobfile

    job = tmp_path / "pipeline.yaml"
    job.write_text(
        "version: 1\n"
        "defaults: {network_arch: a, action: b, platform: local, image: 'busybox:1',\n"
        "           results_root: /r, command: 'echo {matrix.lr}'}\n"
        "jobs:\n"
        "  good: {}\n"
        "  -bad: {}\n"
        "  sweep:\n"
        "    matrix: {lr: [1], 2x: [1]}\n"
    )
    try:
        load_jobfile(str(job))
    except SpecError as exc:
        found = sorted((p.line, p.column, p.path, p.message) for p in exc.problems)
    else:
        raise AssertionError("a bad target name and matrix key were accepted")
    assert found == [
        (6, 3, ("jobs", "-bad"), "'-bad' is not valid here: expected a target name: ASCII "
         "letters, digits, '.', '_' and '-', starting with a letter or digit"),
        (8, 23, ("jobs", "sweep", "matrix", "2x"), "'2x' is not valid here: expected a matrix "
         "key: a letter or underscore, then letters, digits and underscores"),
    ]  # fmt: skip
