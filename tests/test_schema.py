"""The job schema: valid under its metaschema, documented everywhere, shipped and printed."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest

from taospec import schema, schemacheck
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


def _patterns(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        return own + [p for value in node.values() for p in _patterns(value)]
    if isinstance(node, list):
        return [p for value in node for p in _patterns(value)]
    return []


def _undescribed_patterns(node: object, path: str = "$") -> list[str]:
    if isinstance(node, dict):
        own = [path] if "pattern" in node and "description" not in node else []
        return own + [p for k, v in node.items() for p in _undescribed_patterns(v, f"{path}/{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _undescribed_patterns(v, f"{path}/{i}")]
    return []


def test_every_pattern_says_in_words_what_it_accepts() -> None:
    # a refused value is explained by the description beside its pattern, never the regex
    assert _undescribed_patterns(schema.schema()) == []


def test_patterns_end_the_text_only_at_their_end() -> None:
    # schemacheck.pattern_search reads a final "$" as the end of the text (ECMA-262's
    # reading); a "$" anywhere else would be read as Python reads it.
    patterns = _patterns(schema.schema())
    assert len(patterns) > 10
    for pattern in patterns:
        assert "$" not in pattern[:-1], pattern
    search = schemacheck.pattern_search("^[a-z]+$")
    assert search("abc")
    assert not search("abc\n")
    assert not search("abc\nd")
    assert schemacheck.pattern_search(r"^a\$")("a$\n")  # an escaped "$" is a dollar sign


@pytest.mark.parametrize(
    ("key", "value"),
    [("image", "taospec-test/busybox:1\n"), ("network_arch", "hello\n"), ("action", "greet\n")],
)
def test_a_value_with_a_final_newline_fails_its_pattern(
    tmp_path: Path, key: str, value: str
) -> None:
    from taospec.diagnostics import SpecError
    from taospec.loader import load_jobfile

    fields = {
        "version": 1, "network_arch": "hello", "action": "greet", "platform": "docker",
        "user": "1000:1000", "results_root": "/r", "command": "echo hi",
        "image": "taospec-test/busybox:1",
    }  # fmt: skip
    fields[key] = value
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(fields))  # JSON is YAML, and spells the newline plainly
    with pytest.raises(SpecError) as raised:
        load_jobfile(str(job))
    assert [p.path for p in raised.value.problems] == [(key,)]
    assert "is not valid here" in raised.value.problems[0].message


IMAGE_REFS = [
    # accepted: each names a repository no machine has, as the test tags and removes it
    "taospec-probe/busybox:1", "nvcr.io/taospec-probe/tao-toolkit:6.0.0-pyt", "taospec-probe",
    "localhost/taospec-probe", "localhost:5000/taospec-probe/b:1.0", "1.2.3.4:5000/taospec-probe",
    "nvcr.io:8443/taospec-probe:1", "UPPER.io:5000/taospec-probe/y:TAG_1", "taospec_probe/x:1",
    "taospec__probe/c:1", "taospec-probe--c:1", "taospec-probe:_1", "taospec-probe:" + "t" * 128,
    # refused
    "BusyBox:1", "nvcr.io/NVIDIA/tao:5", "Foo/bar:1", "a/B:1", "x:-bad", "x:.1", "x:" + "t" * 129,
    "a//b:1", "a___b:1", "_a:1", "a_:1", "a:1:2", "a@b", "a-.io/x", "a.io:/x", "-a.io/x",
    "busybox:1 ", "busy box",
    # the repository name as the engine reads it is 255 characters at most, docker.io/ (and
    # library/ for a one-part name) added where no registry is named
    "a" * 237 + ":1", "a" * 238 + ":1", "x/" + "a" * 243, "x/" + "a" * 244,
    "nvcr.io/" + "a" * 247, "nvcr.io/" + "a" * 248 + ":1", "localhost/" + "a" * 245,
    "localhost/" + "a" * 246,
]  # fmt: skip
DIGEST = "sha256:" + "a" * 64


def _tag(image: str, ref: str) -> subprocess.CompletedProcess[str]:
    argv = ["docker", "tag", image, ref]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_image_references_are_read_as_docker_reads_them(engine: str) -> None:
    # docker tag parses its second argument with Docker's own reference grammar, offline.
    for ref in IMAGE_REFS:
        present = ["docker", "image", "inspect", ref]
        assert subprocess.run(present, capture_output=True, check=False).returncode != 0, ref
        tagged = _tag(engine, ref)
        if tagged.returncode == 0:
            subprocess.run(["docker", "rmi", ref], capture_output=True, check=True)
        else:
            misread = ("invalid reference format", "must not be more than 255 characters")
            assert any(why in tagged.stderr for why in misread), (ref, tagged.stderr)
        assert schema.is_image_ref(ref) == (tagged.returncode == 0), ref
    for ref in (f"busybox@{DIGEST}", f"nvcr.io/nvidia/tao:5@{DIGEST}"):
        tagged = _tag(engine, ref)
        assert "refusing to create a tag with a digest reference" in tagged.stderr, ref
        assert schema.is_image_ref(ref), ref
    assert not schema.is_image_ref("busybox@sha256:" + "a" * 31)  # too short a digest


DIGESTS = [
    # accepted: the algorithms Docker knows, each with its own length of lowercase hex
    "sha256:" + "a" * 64, "sha384:" + "b" * 96, "sha512:" + "c" * 128,
    # refused: the grammar lets them by, and docker refuses the reference at the pull
    "sha256:" + "A" * 64, "sha256:" + "a" * 32, "sha256:" + "a" * 65, "sha512:" + "a" * 64,
    "md5:" + "a" * 32, "blake3:" + "a" * 64, "sha256+b64:" + "a" * 64,
]  # fmt: skip


@pytest.mark.parametrize("digest", DIGESTS)
def test_digests_are_read_as_docker_reads_them(engine: str, digest: str) -> None:
    # the grammar took any algorithm name and 32 or more hex digits of either case, and the
    # job failed at docker pull ("invalid checksum digest format") after its record opened
    tagged = _tag(engine, f"busybox@{digest}")
    accepted = "refusing to create a tag with a digest reference" in tagged.stderr
    assert accepted or "is not a valid repository/tag" in tagged.stderr, tagged.stderr
    assert schema.is_image_ref(f"busybox@{digest}") == accepted
    assert schema.is_image_ref(f"nvcr.io/nvidia/tao:5@{digest}") == accepted


@pytest.mark.parametrize(
    ("line", "where", "message"),
    [
        ("command: [echo, 1]", ("command", 1), "1 is not a string"),
        ("command: [echo, [x]]", ("command", 1), "['x'] is not a string"),
        ("command: []", ("command",), "must list at least one item"),
        ("notify: [echo, null]", ("notify", 1), "None is not a string"),
    ],
)
def test_a_list_refused_for_one_item_is_refused_at_that_item(
    tmp_path: Path, line: str, where: tuple[object, ...], message: str
) -> None:
    # a list whose one item was no text was refused at the list, as if a list were not
    # allowed there: "$.command: ['echo', 1] is not valid here"
    from taospec.diagnostics import SpecError
    from taospec.loader import load_jobfile

    job = tmp_path / "job.yaml"
    job.write_text(
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\n"
        f"image: busybox:1\nresults_root: /r\n{line}\n"
        + ("" if line.startswith("command") else "command: echo hi\n")
    )
    with pytest.raises(SpecError) as raised:
        load_jobfile(str(job))
    assert [(p.path, p.message) for p in raised.value.problems] == [(where, message)]
