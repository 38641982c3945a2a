"""Reading YAML: what a job file may never hold is refused, with its place."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from taospec import yamlsrc
from taospec.diagnostics import SpecError
from tests.conftest import Runner, write


def test_alias_bombs_are_refused_before_anything_is_built_at_the_alias() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(5)
    )
    with pytest.raises(SpecError) as raised:
        yamlsrc.parse(bomb, "bomb.yaml")
    (problem,) = raised.value.problems
    assert "expands to more than 100000 values" in problem.message
    assert (problem.line, problem.column, problem.path) == (5, 44, ("e", 9))  # e's last *d


def test_aliases_that_expand_past_a_files_text_are_refused_at_the_alias() -> None:
    big = "x" * 100_000
    many = ", ".join(["*S"] * 2000)
    with pytest.raises(SpecError) as raised:
        yamlsrc.parse(f"big: &S {big}\nmany: [{many}]\n", "bomb.yaml")
    (problem,) = raised.value.problems
    # "big" (3) + 11 times 100,000 passes the limit at the 11th alias, many[10]
    assert (problem.line, problem.column, problem.path) == (2, 8 + 4 * 10, ("many", 10))
    assert "more than 1,048,576 characters of text through aliases" in problem.message
    few = ", ".join(["*S"] * 9)
    assert len(yamlsrc.parse(f"big: &S {big}\nmany: [{few}]\n", "ok.yaml").data["many"]) == 9


@pytest.mark.parametrize(
    "written",
    [
        "1" + "0" * 4300,
        "1" + "0" * 640,
        "-0x" + "f" * 4000,
        "0b" + "1" * 2200,
        "0" + "7" * 800,
        "1" + ":59" * 400,
    ],
)
def test_an_integer_past_the_digit_limit_is_refused_at_its_line(written: str) -> None:
    with pytest.raises(SpecError) as raised:
        yamlsrc.parse(f"version: 1\nspec:\n  seed: {written}\n", "long.yaml")
    (problem,) = raised.value.problems
    assert (problem.line, problem.column, problem.path) == (3, 9, ("spec", "seed"))
    assert "an integer of more than 640 digits" in problem.message


def test_an_integer_at_the_digit_limit_loads_and_a_tagged_non_integer_is_refused() -> None:
    most = "9" * yamlsrc.MAX_INT_DIGITS
    assert str(yamlsrc.parse(f"seed: {most}\n", "ok.yaml").data["seed"]) == most
    with pytest.raises(SpecError, match=r"bad.yaml:2:4: \$.b: !!int 'abc': YAML cannot read"):
        yamlsrc.parse("a: 1\nb: !!int abc\n", "bad.yaml")


@pytest.mark.parametrize(
    "tagged", ["!!int 0x", "!!float abc", "!!bool maybe", "!!timestamp abc", "!!int '1:x'"]
)
def test_a_tag_yaml_cannot_read_its_text_as_is_refused_at_its_line(tagged: str) -> None:
    with pytest.raises(SpecError) as raised:
        yamlsrc.parse(f"a: 1\nb: [{tagged}]\n", "bad.yaml")
    (problem,) = raised.value.problems
    assert (problem.line, problem.column, problem.path) == (2, 5, ("b", 0))
    assert "YAML cannot read this text as a" in problem.message


def test_a_tag_on_text_yaml_reads_as_it_says_loads() -> None:
    text = "a: !!float 1e3\nb: !!int '12'\nc: !!bool 'yes'\nd: !!float 2\n"
    assert yamlsrc.parse(text, "ok.yaml").data == {"a": 1000.0, "b": 12, "c": True, "d": 2.0}


def _nested(levels: int, leaf: str = "v") -> str:
    """A mapping ``levels`` deep under ``top``, one key a line."""
    lines = [f"{'  ' * depth}k{depth}:" for depth in range(levels - 1)]
    return "top:\n" + "".join(f"  {line}\n" for line in lines) + "  " * levels + leaf + "\n"


def test_nesting_is_allowed_to_max_depth_and_refused_past_it_at_the_deep_node() -> None:
    deepest = yamlsrc.parse(_nested(yamlsrc.MAX_DEPTH), "deep.yaml").data
    for depth in range(yamlsrc.MAX_DEPTH - 1):
        deepest = deepest["top" if depth == 0 else f"k{depth - 1}"]
    assert deepest == {f"k{yamlsrc.MAX_DEPTH - 2}": "v"}
    too_deep = _nested(yamlsrc.MAX_DEPTH, "[v]")
    with pytest.raises(SpecError) as raised:
        yamlsrc.parse(too_deep, "deep.yaml")
    (problem,) = raised.value.problems
    assert "more than 64 levels deep" in problem.message
    assert (problem.line, problem.column) == (too_deep.count("\n"), 2 * yamlsrc.MAX_DEPTH + 2)


def test_aliases_that_nest_deeper_than_the_text_are_refused() -> None:
    # Each anchor holds the one before it: 70 lines of text, 70 levels once expanded.
    chain = "a0: &a0 [x]\n" + "".join(f"a{n}: &a{n} [*a{n - 1}]\n" for n in range(1, 70))
    with pytest.raises(SpecError, match="more than 64 levels deep"):
        yamlsrc.parse(chain, "chain.yaml")
    shallow = "a0: &a0 [x]\n" + "".join(f"a{n}: &a{n} [*a{n - 1}]\n" for n in range(1, 60))
    value = yamlsrc.parse(shallow, "chain.yaml").data["a59"]
    for _ in range(59):
        (value,) = value
    assert value == ["x"]


def test_an_alias_to_itself_is_refused() -> None:
    with pytest.raises(SpecError, match="an alias refers to itself"):
        yamlsrc.parse("a: &a [x, *a]\n", "loop.yaml")


def test_a_duplicate_under_an_anchor_is_reported_once_where_it_is_written() -> None:
    text = "base: &base {k: 1, k: 2}\none: *base\ntwo: *base\n"
    with pytest.raises(SpecError) as raised:
        yamlsrc.parse(text, "dup.yaml")
    assert [(p.line, p.column, p.path) for p in raised.value.problems] == [(1, 20, ("base", "k"))]


def test_a_key_given_twice_is_refused_at_its_second_place() -> None:
    with pytest.raises(SpecError, match=r"dup.yaml:3:1: \$.a: duplicate key 'a'"):
        yamlsrc.parse("a: 1\nb: 2\na: 3\n", "dup.yaml")
    with pytest.raises(SpecError, match=r"dup.yaml:2:6: \$.x.k: duplicate key 'k'"):
        yamlsrc.parse("x: {k: 1,\n     k: 2}\n", "dup.yaml")


def test_values_come_out_as_pyyaml_builds_them() -> None:
    source = yamlsrc.parse("a: [1, 1.5, true, ~, '2', x]\nb: {c: 0x1F}\n", "ok.yaml")
    assert source.data == {"a": [1, 1.5, True, None, "2", "x"], "b": {"c": 31}}
    assert source.locate(("b", "c")) == (2, 8)


def test_an_empty_document_and_a_list_are_not_job_files() -> None:
    with pytest.raises(SpecError, match="is empty"):
        yamlsrc.parse("# nothing\n", "empty.yaml")
    with pytest.raises(SpecError, match="holds a list"):
        yamlsrc.parse("- a\n", "list.yaml")


def test_one_mebibyte_is_the_largest_job_file(tmp_path: Path) -> None:
    most = tmp_path / "most.yaml"
    most.write_bytes(b"version: 1\n#" + b"x" * (yamlsrc.MAX_BYTES - 13) + b"\n")
    assert most.stat().st_size == yamlsrc.MAX_BYTES
    assert yamlsrc.read_text(most, "most.yaml").encode() == most.read_bytes()
    over = tmp_path / "over.yaml"
    over.write_bytes(most.read_bytes() + b"\n")
    with pytest.raises(SpecError, match="is larger than 1 MiB"):
        yamlsrc.read_text(over, "over.yaml")


def test_a_pipe_is_read_to_its_end_exactly_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = "version: 1\n" * 3000

    def feed() -> None:
        with fifo.open("w") as writer:
            writer.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        assert yamlsrc.read_text(fifo, "fifo") == data
    finally:
        feeder.join()


def test_a_long_integer_in_a_job_file_or_versions_yaml_is_refused_by_every_command(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    long = "1" + "0" * 4300
    write(tmp_path / "versions.yaml", f"images:\n  test: {{busybox: 'busybox:1'}}\n  n: {long}\n")
    job = write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\n"
        f"results_root: {tmp_path / 'results'}\ncommand: [echo, hi]\n"
        "image: {versions_key: images.test.busybox}\n",
    )
    at_versions = f"{tmp_path / 'versions.yaml'}:3:6: $.images.n: an integer of more than 640"
    with_seed = write(tmp_path / "seed.yaml", job.read_text() + f"spec: {{seed: 0x{'f' * 4000}}}\n")
    at_seed = f"{with_seed}:8:14: $.spec.seed: an integer of more than 640 digits"
    for verb in ("validate", "render", "run"):
        for path, expected in ((job, at_versions), (with_seed, at_seed)):
            result = taospec(verb, path)
            assert (result.returncode, result.stdout) == (2, ""), result.stderr
            assert expected in result.stderr
    assert list(state_dir.iterdir()) == []
