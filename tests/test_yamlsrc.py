"""The quick construction of ordinary documents gives exactly what the careful path gives.

:func:`taospec.yamlsrc.parse` builds an ordinary document (mappings, lists,
plain scalars; no alias, no duplicate key) in one walk, and leaves every other
document to the careful path: the alias and duplicate-key checks, then
PyYAML's own construction. Here both are run on generated documents full of
YAML's corner cases and must agree on the value, its types and every error.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec import yamlsrc
from taospec.diagnostics import SpecError
from tests.conftest import ROOT

SCALARS = [
    "1", "-7", "+3", "0", "017", "0o17", "0x1F", "0b101", "1_000", "1:30", "190:20:30",
    "1.5", "-1e3", "1e3", "6.8523015e+5", ".inf", "-.Inf", ".NaN", "0.", "._", "1__0",
    "yes", "No", "on", "OFF", "true", "False", "TRUE", "y", "n", "~", "null", "Null", "",
    "2024-01-01", "2001-12-14t21:59:43.10-05:00", "x", "hello world", "'quoted'", '"a\\tb"',
    '"\\u00e9"', "'1'", '"true"', "!!str 12", "!!int '7'", "!!float 1", "!!bool maybe",
    "!!int x", "!!null ''", "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [{a: 1}]",
    "!!pairs [{a: 1}]", "!custom x", "!!timestamp 2024-01-01", "=", "<<", "'<<'", "?",
    "'{a}'", "a: b", "[1, 2]", "{}", "[]", "{a: 1}",
]  # fmt: skip
KEYS = ["a", "b", "a", "1", "0x1", "true", "yes", "~", "'a'", "<<", "=", "!!str k", "[x]", "{k: v}"]


@st.composite
def documents(draw: st.DrawFn) -> str:
    """YAML text in flow style: nested mappings and lists of corner-case scalars and aliases."""
    anchors: list[str] = []

    def node(depth: int) -> str:
        choice = draw(st.integers(0, 9))
        if anchors and choice == 0:
            return "*" + draw(st.sampled_from(anchors))
        if depth < 3 and choice in (1, 2, 3):
            pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), st.none()), max_size=4))
            text = "{" + ", ".join(f"{key}: {node(depth + 1)}" for key, _ in pairs) + "}"
        elif depth < 3 and choice in (4, 5):
            items = draw(st.lists(st.none(), max_size=4))
            text = "[" + ", ".join(node(depth + 1) for _ in items) + "]"
        else:
            text = draw(st.sampled_from(SCALARS))
        if draw(st.integers(0, 7)) == 0 and not text.startswith("!"):
            name = f"a{len(anchors)}"
            text = f"&{name} {text}"
            anchors.append(name)
        return text

    return (
        "top: "
        + node(0)
        + "\n"
        + "\n".join(f"k{i}: {node(1)}" for i in range(draw(st.integers(0, 3))))
    )


def careful(text: str) -> Any:
    """What parse gave before it had a quick path: the tree checks, then PyYAML builds."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise SpecError.single("f.yaml", "is empty; a job file is a mapping of keys")
        yamlsrc._check_tree(root, "f.yaml")
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        raise yamlsrc._yaml_error(exc, "f.yaml") from None
    except yaml.YAMLError as exc:
        raise SpecError.single("f.yaml", f"is not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SpecError.single("f.yaml", "holds something else; a job file is a mapping of keys")
    return data


def outcome(call: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", call(text)
    except SpecError as exc:
        return "problems", str(exc)
    except Exception as exc:
        return "error", (type(exc).__name__, str(exc))


def quick(text: str) -> Any:
    return yamlsrc.parse(text, "f.yaml").data


def same(a: Any, b: Any) -> bool:
    """Equal, type for type (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(
            same(k1, k2) and same(v1, v2)
            for (k1, v1), (k2, v2) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def agree(text: str) -> None:
    kind, value = outcome(quick, text)
    expected_kind, expected = outcome(careful, text)
    if kind == expected_kind == "problems" and " holds " in value:  # not a mapping
        assert expected.endswith("holds something else; a job file is a mapping of keys")
        return
    assert kind == expected_kind, (text, value, expected)
    assert same(value, expected) if kind == "value" else value == expected, text


@settings(max_examples=1500, deadline=None)
@given(documents())
def test_generated_documents_come_out_as_the_careful_path_makes_them(text: str) -> None:
    agree(text)


JOB_FILES = sorted(
    [*(ROOT / "jobs").glob("*.yaml"), *(ROOT / "tests" / "examples").rglob("*.yaml")]
)


@pytest.mark.parametrize("path", JOB_FILES, ids=[f"{p.parent.name}/{p.name}" for p in JOB_FILES])
def test_every_example_file_comes_out_the_same(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return  # not-utf8.yaml never reaches the parser
    agree(text)


@pytest.mark.parametrize("name", ["train.yaml", "tao-workflow.yaml", "hello-docker.yaml"])
def test_ordinary_job_files_take_the_quick_path(name: str) -> None:
    loader = yaml.CSafeLoader((ROOT / "jobs" / name).read_text())
    try:
        data = yamlsrc._plain_document(loader, loader.get_single_node())
    finally:
        loader.dispose()
    assert data is not yamlsrc._UNSURE
    assert same(data, careful((ROOT / "jobs" / name).read_text()))


@pytest.mark.parametrize(
    "text",
    [
        "a: &x {k: 1}\nb: *x\n",  # an alias
        "a: 1\na: 2\n",  # a duplicate key
        "base: &b {x: 1}\njob: {<<: *b, y: 2}\n",  # a merge key
        "when: 2024-01-01\n",  # a date
        "a: !!set {x, y}\n",
        "a: !!bool maybe\n",  # a scalar its constructor refuses
        "? [1, 2]\n: x\n",  # a key that is not a scalar
        "a: [" + ", ".join(["1"] * yamlsrc.MAX_NODES) + "]\n",  # too many nodes
    ],
)
def test_anything_unusual_goes_the_careful_way(text: str) -> None:
    loader = yaml.CSafeLoader(text)
    try:
        assert yamlsrc._plain_document(loader, loader.get_single_node()) is yamlsrc._UNSURE
    finally:
        loader.dispose()
    agree(text)


def test_the_careful_path_still_refuses_alias_bombs_and_duplicate_keys() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(5)
    )
    with pytest.raises(SpecError, match="expands to more than 100000 values"):
        yamlsrc.parse(bomb, "bomb.yaml")
    with pytest.raises(SpecError, match=r"dup.yaml:3:1: \$.a: duplicate key 'a'"):
        yamlsrc.parse("a: 1\nb: 2\na: 3\n", "dup.yaml")
