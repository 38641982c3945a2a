"""Checking merged specs against TAO-dialect schemas: the tiny test skill, and the real
skill bank when TAO_SKILL_BANK names a checkout."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from taospec.commands import init
from taospec.skilljob import fills_results_dir, template_sections
from taospec.skills import MODELS, available_skills, find_skill, load_skill
from taospec.taoschema import (
    Finding,
    check_spec,
    dotted,
    every_item,
    gpu_count_problem,
    lookup,
    merge_spec,
    unfilled,
    unset_inputs,
    user_paths,
    wants_list,
    with_gpu_count,
)

TINY = Path(__file__).parent / "skills" / "skills" / "models" / "tao-train-tiny"
SKILL = load_skill(TINY)
TRAIN = SKILL.actions["train"]
SCHEMA = json.loads(TRAIN.schema_path.read_text())  # type: ignore[union-attr]
TEMPLATE = yaml.safe_load(TRAIN.template_path.read_text())  # type: ignore[union-attr]


def check(user: dict[str, Any]) -> list[Finding]:
    merged = merge_spec(TEMPLATE, user)
    return check_spec(SCHEMA, merged, user_paths(TEMPLATE, user), skill=SKILL.name)


def user_findings(user: dict[str, Any]) -> list[Finding]:
    return [f for f in check(user) if f.origin == "user"]


def by_path(findings: list[Finding]) -> dict[tuple[Any, ...], Finding]:
    return {f.path: f for f in findings}


def test_merge_merges_mappings_and_replaces_lists_and_values() -> None:
    template = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    user = {"a": {"c": [3]}, "d": {"e": 2}}
    assert merge_spec(template, user) == {"a": {"b": 1, "c": [3]}, "d": {"e": 2}}
    assert template == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_user_paths_are_what_the_user_adds_or_replaces() -> None:
    template = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    user = {"a": {"c": [3], "new": {"x": 1}}, "d": {"e": 2}}
    assert user_paths(template, user) == {("a", "c"), ("a", "new"), ("d",)}


def test_the_template_alone_has_only_what_the_user_must_set() -> None:
    findings = check({})
    errors = [f for f in findings if f.severity == "error"]
    assert [(f.path, f.kind) for f in errors] == [(("dataset", "classes"), "unset")]
    assert "set spec.dataset.classes" in errors[0].message
    warnings = [f for f in findings if f.severity == "warning"]
    assert [(f.path, f.kind) for f in warnings] == [(("train", "checkpoint_interval"), "minimum")]
    assert warnings[0].origin == "template"
    assert "tao-train-tiny's template" in warnings[0].message


def test_an_unknown_key_the_user_adds_is_an_error_with_a_hint() -> None:
    findings = by_path(check({"train": {"num_epoch": 3}, "trian": {"x": 1}}))
    typo = findings[("train", "num_epoch")]
    assert (typo.severity, typo.kind, typo.origin) == ("error", "unknown-key", "user")
    assert "did you mean 'num_epochs'?" in typo.message
    assert "did you mean 'train'?" in findings[("trian",)].message
    assert str(typo) == "spec.train.num_epoch: unknown key 'num_epoch'; did you mean 'num_epochs'?"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("train", "num_epochs"), "ten", "'ten' is not an integer"),
        (("train", "num_epochs"), True, "True is not an integer"),
        (("train", "num_epochs"), [1], "[1] is not an integer"),
        (("train", "optim", "lr"), False, "False is not a number"),
        (("train", "optim", "amp"), 1, "1 is not true or false"),
        (("model", "depth"), 2.5, "2.5 is not an integer"),
        (("results_dir",), 3, "3 is not a string"),
        (("dataset", "classes"), {"a": 1}, "{'a': 1} is not a list"),
        (("wandb",), ["x"], "['x'] is not a mapping"),
    ],
)
def test_a_wrong_type_the_user_writes_is_an_error(
    path: tuple[str, ...], value: Any, expected: str
) -> None:
    user: Any = value
    for part in reversed(path):
        user = {part: user}
    finding = by_path(check(user))[path]
    assert (finding.severity, finding.kind, finding.message) == ("error", "type", expected)


def test_values_of_the_right_type_pass() -> None:
    user = {
        "train": {"num_epochs": 3, "optim": {"lr": 1, "warmup_lr": 0.5, "amp": True}},
        "model": {"backbone": "tiny_b", "depth": 8},
        "dataset": {"classes": ["a"], "batch_size": 10**9},
        "wandb": {"anything": {"goes": 1}},
        "results_dir": None,
    }
    assert user_findings(user) == []


def test_interpolations_are_never_type_errors() -> None:
    user = {"train": {"num_epochs": "${dataset.batch_size}", "optim": {"lr": "${eval:'1/2'}"}}}
    assert [f for f in check(user) if f.path[0] == "train" and f.kind == "type"] == []


def test_a_number_written_as_text_is_a_warning_with_the_fix() -> None:
    finding = by_path(check({"train": {"optim": {"lr": "1e-4"}}}))[("train", "optim", "lr")]
    assert (finding.severity, finding.kind) == ("warning", "type")
    assert "as it is quoted: write it without quotes" in finding.message


def test_bounds_and_enums_the_user_breaks_are_warnings_naming_the_skill() -> None:
    findings = by_path(check({"model": {"depth": 9, "backbone": "huge"}, "train": {"loss": "x"}}))
    for path, kind in [
        (("model", "depth"), "maximum"),
        (("model", "backbone"), "enum"),
        (("train", "loss"), "enum"),
    ]:
        assert (findings[path].severity, findings[path].kind) == ("warning", kind)
        assert "tao-train-tiny" in findings[path].message
    assert ("dataset", "batch_size") not in by_path(check({"dataset": {"batch_size": 10**12}}))


def test_a_value_still_unset_after_merging_is_an_error_naming_the_key() -> None:
    finding = by_path(check({"train": {"num_epochs": "???"}}))[("train", "num_epochs")]
    assert (finding.severity, finding.kind, finding.origin) == ("error", "unset", "user")
    assert "set spec.train.num_epochs" in finding.message
    assert ("dataset", "classes") not in by_path(check({"dataset": {"classes": ["a"]}}))


def test_hostile_keys_are_checked_like_any_other() -> None:
    hostile = {
        "a key with spaces": "x",
        "say \"hi\" 'there'": 2,
        "$(touch /tmp/taospec-pwned)": False,
    }
    assert user_findings({"labels": hostile, "dataset": {"classes": []}}) == []
    finding = by_path(check({"labels": {"$(rm -rf /)\nx": 1}}))[("labels", "$(rm -rf /)\nx")]
    assert finding.severity == "error"
    assert "unknown key '$(rm -rf /)\\nx'" in finding.message
    assert str(finding).startswith("spec.labels['$(rm -rf /)\\nx']: ")


def test_inputs_resolve_through_list_indexes() -> None:
    spec = merge_spec(
        TEMPLATE,
        {"dataset": {"train_data_sources": [{"image_dir": "/d/img", "json_file": "/d/a.json"}]}},
    )
    paths = [path for declared in TRAIN.inputs for path in every_item(spec, declared.path)]
    assert {dotted(path): lookup(spec, path) for path in paths} == {
        "dataset.train_data_sources[0].image_dir": "/d/img",
        "dataset.train_data_sources[0].json_file": "/d/a.json",
        "dataset.val_data_sources.image_dir": "",
        "train.pretrained_model_path": "",
    }
    assert every_item({"dataset": {"train_data_sources": []}}, TRAIN.inputs[0].path) == []


def test_required_inputs_left_empty_are_errors() -> None:
    found = unset_inputs(TEMPLATE, TRAIN, frozenset())
    assert [(f.path, f.kind, f.severity) for f in found] == [
        (("dataset", "train_data_sources", 0, "image_dir"), "input", "error"),
        (("dataset", "train_data_sources", 0, "json_file"), "input", "error"),
    ]
    user = {"dataset": {"train_data_sources": [{"image_dir": "/i", "json_file": "/j"}]}}
    assert unset_inputs(merge_spec(TEMPLATE, user), TRAIN, user_paths(TEMPLATE, user)) == []


def test_the_gpu_key_is_set_from_gpus_or_must_agree() -> None:
    assert with_gpu_count(SKILL, TEMPLATE, {}, 2) == {"train": {"num_gpus": 2}}
    assert with_gpu_count(SKILL, TEMPLATE, {"train": {"num_epochs": 1}}, 4) == {
        "train": {"num_epochs": 1, "num_gpus": 4}
    }
    assert with_gpu_count(SKILL, TEMPLATE, {}, None) == {}
    assert with_gpu_count(SKILL, {"evaluate": {}}, {}, 2) == {}
    assert gpu_count_problem(SKILL, {"train": {"num_gpus": 2}}, 2) is None
    assert gpu_count_problem(SKILL, {}, 2) is None
    problem = gpu_count_problem(SKILL, {"train": {"num_gpus": 1}}, 2)
    assert problem is not None
    assert "spec.train.num_gpus is 1 but gpus: names 2 GPU(s)" in problem


def test_every_template_of_the_skill_bank_leaves_only_inputs_and_unset_values(
    skill_bank: Path,
) -> None:
    """Over a real tao-skill-bank checkout: a template alone has no error but the inputs
    and ??? it leaves to the user, and the job file `taospec init` writes for it parses
    and names those, but for a ??? in a section TAO Deploy never reads."""

    counts: collections.Counter[str] = collections.Counter()
    environ = {"TAO_SKILL_BANK": str(skill_bank)}
    for name in available_skills(skill_bank / MODELS):  # deploy workflows too
        skill = load_skill(find_skill(name, skill_bank, environ))
        counts["skills"] += 1
        counts["deploy workflows"] += name.startswith("tao-deploy-")
        for action in skill.actions.values():
            if action.template_path is None or action.schema_path is None:
                continue
            counts["templates"] += 1
            template = init.read_template(action)
            schema = json.loads(action.schema_path.read_text())
            findings = check_spec(schema, template, frozenset(), skill=skill.name)
            findings += unset_inputs(template, action, frozenset())
            for finding in findings:
                counts[f"{finding.severity} {finding.kind}"] += 1
                assert finding.kind in {"unset", "input"} or finding.severity == "warning", finding
                assert finding.severity == "error" or skill.name in finding.message
            job = yaml.safe_load(init.job_text(skill, action, name, skill_bank))
            assert (job["skill"], job["action"]) == (name, action.name)
            must = {f.path for f in findings if f.kind in {"unset", "input"}}
            if fills_results_dir(action, template):  # the run's results folder
                must -= {("results_dir",)}
                counts["results_dir left to the run"] += 1
            _, unread = template_sections(skill, action, template)
            left = {path for path in must if path[0] in unread}  # TAO Deploy never reads
            counts["??? TAO Deploy never reads"] += len(left)
            asked = set(init.required_paths(template, skill, action))
            assert must - left <= asked
            assert not left & asked
            counts["<placeholder> values"] += sum(
                unfilled(lookup(template, path)) not in (None, "???") for path in must
            )
    found = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"\nskill bank {skill_bank}: {found}")
    assert counts["templates"] > 0
    assert counts["deploy workflows"] > 0


def test_wants_list_reads_the_schema_down_lists_items_and_is_silent_where_it_says_nothing() -> None:
    schema = {
        "properties": {
            "a": {"type": "array", "items": {"properties": {"b": {"type": "list_2"}}}},
            "c": {"type": "collection", "properties": {"d": {"type": "string"}}},
            "e": {"type": "categorical"},
            "f": {"type": "resnet_101"},
        }
    }
    assert wants_list(schema, ("a",)) is True
    assert wants_list(schema, ("a", 0, "b")) is True
    assert wants_list(schema, ("c", "d")) is False
    assert wants_list(schema, ("e",)) is False
    assert wants_list(schema, ("f",)) is None  # a type taospec does not know
    assert wants_list(schema, ("c", "x")) is None
    assert wants_list(schema, ("c", 0)) is None  # no items: nothing said of them
