"""The compiled schema check answers exactly as jsonschema does, wherever it answers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema._utils import equal as jsonschema_equal
from jsonschema._utils import uniq as jsonschema_uniq

from taospec import schema, schemacheck
from taospec.yamlsrc import parse

ROOT = Path(__file__).resolve().parent.parent
DEFINITIONS = (None, "job")


def documents() -> list[dict[str, Any]]:
    """Every job file this repository has, valid or not, as data."""
    found = []
    for path in sorted([*ROOT.glob("jobs/*.yaml"), *ROOT.glob("tests/examples/*/*.yaml")]):
        try:
            found.append(parse(path.read_text(), str(path)).data)
        except Exception:  # files that are not YAML mappings are the loader's business
            continue
    return found


def jsonschema_valid(data: Any, definition: str | None) -> bool:
    """jsonschema's verdict, with ``pattern`` read as JSON Schema's ECMA-262 dialect reads it
    (the one keyword taospec's validator implements itself; tests/test_schema.py tests it)."""
    validator = schema._validator(definition)
    return next(iter(validator.iter_errors(data)), None) is None


def compiled(definition: str | None) -> schemacheck.Check:
    return schemacheck.compile_schema(schema._focused(definition))


def agree(data: Any, definition: str | None) -> None:
    """Where the compiled check answers, its answer is jsonschema's."""
    if not schemacheck.is_plain(data):
        return
    try:
        answer = compiled(definition)(data)
    except schemacheck.Unsure:
        return
    assert answer == jsonschema_valid(data, definition), json.dumps(data, default=repr)


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_every_example_gets_jsonschemas_answer(definition: str | None) -> None:
    examples = documents()
    assert len(examples) > 20
    for data in examples:
        agree(data, definition)
    valid = [d for d in examples if jsonschema_valid(d, None)]
    assert valid
    assert all(compiled(None)(d) for d in valid)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70000),
    st.sampled_from([0.0, 1.0, 2.5, -1.0, 1e20, 0.0001]),
    st.sampled_from(
        [
            "",
            "all",
            "x",
            "/data",
            "/data/results",
            "relative/path",
            "1000:1000",
            "host",
            "docker",
            "local",
            "brev",
            "slurm",
            "NGC_KEY",
            "lower_case",
            "A",
            "8g",
            "pyxis",
            "none",
            "{job_id}",
            "GPU-0123abcd-0123-0123-0123-0123456789ab",
            "A",
            "B",
            "C",
            "jobs",
            "train",
        ]
    ),
    st.text(max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["a", "source", "target", "pass", "set", "x"]), inner, max_size=3
        ),
    ),
    max_leaves=8,
)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            out += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += paths(value, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """An example document with a few values replaced, removed or added."""
    data = copy.deepcopy(draw(st.sampled_from(documents())))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.sampled_from(paths(data)))
        if not where:
            continue
        parent = data
        for part in where[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            parent[where[-1]] = draw(VALUES)
        elif action == "remove":
            del parent[where[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["gpus", "nodes", "user", "extra", "docker", "slurm"]))] = (
                draw(VALUES)
            )
        else:
            parent.append(draw(VALUES))
    return data


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(), definition=st.sampled_from(DEFINITIONS))
def test_changed_documents_get_jsonschemas_answer(data: Any, definition: str | None) -> None:
    agree(data, definition)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.one_of(
            st.integers(-2, 2), st.sampled_from([1.0, 0.0, 2.0]), st.sampled_from(["a", "b", "1"])
        ),
        max_size=5,
    )
)
def test_uniqueness_is_jsonschemas(items: list[Any]) -> None:
    assert schemacheck.unique(items) == jsonschema_uniq(items)


@settings(max_examples=300, deadline=None)
@given(one=VALUES, two=VALUES)
def test_equality_is_jsonschemas(one: Any, two: Any) -> None:
    assert schemacheck.equal(one, two) == jsonschema_equal(one, two)
    assert schemacheck.equal(one, copy.deepcopy(one)) == jsonschema_equal(one, copy.deepcopy(one))


def test_what_it_cannot_judge_goes_to_jsonschema() -> None:
    with pytest.raises(schemacheck.Unsure):
        schemacheck.unique([True, 1])
    with pytest.raises(schemacheck.Unsure):
        schemacheck.unique([[1], [1]])
    assert not schemacheck.is_plain({"when": __import__("datetime").date(2024, 1, 1)})
    assert not schemacheck.is_plain({"x": float("nan")})
    assert not schemacheck.is_plain({("a", "b"): 1})
    assert schemacheck.is_plain({1: [None, True, 1.5, "x", {}]})


def test_a_schema_with_an_unknown_keyword_is_not_compiled() -> None:
    with pytest.raises(schemacheck.Uncompilable):
        schemacheck.compile_schema({"type": "object", "patternProperties": {"^a": {}}})
    with pytest.raises(schemacheck.Uncompilable):
        schemacheck.compile_schema({"$ref": "https://example.com/other.json"})
    with pytest.raises(schemacheck.Uncompilable):
        schemacheck.compile_schema({"type": "decimal"})


def test_references_may_recurse() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    check = schemacheck.compile_schema(tree)
    assert check({"kids": [{"kids": []}, {}]})
    assert not check({"kids": [{"kids": [{"other": 1}]}]})
