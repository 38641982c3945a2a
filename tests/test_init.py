"""`taospec init`: job files written for the tiny test skill, read back with PyYAML."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from taospec.commands import init
from taospec.errors import EXIT_INVALID, EXIT_OK, InvalidInput
from taospec.skills import SkillError, find_skill, load_skill, parse_key
from taospec.taoschema import MISSING, lookup

BANK = Path(__file__).parent / "skills"
TINY = BANK / "skills" / "models" / "tao-train-tiny"
ENV = {"TAO_SKILL_BANK": str(BANK)}


def written(tmp_path: Path, action: str, skill: str = "tao-train-tiny") -> tuple[str, Any]:
    out = tmp_path / "job.yaml"
    assert init.run(skill, action, out, job_dir=tmp_path, environ=ENV) == EXIT_OK
    text = out.read_text()
    return text, yaml.safe_load(text)


def unset_paths(value: Any, at: tuple[Any, ...] = ()) -> set[tuple[Any, ...]]:
    if value == MISSING:
        return {at}
    if isinstance(value, dict):
        return set().union(*(unset_paths(v, (*at, k)) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(unset_paths(v, (*at, i)) for i, v in enumerate(value)))
    return set()


def test_a_train_job_names_the_skill_and_marks_what_to_fill(tmp_path: Path) -> None:
    text, job = written(tmp_path, "train")
    schema = init.SCHEMA_FILE
    assert schema.is_file()
    first = text.splitlines()[0]
    assert first == f"# yaml-language-server: $schema={os.path.relpath(schema, tmp_path)}"
    assert (tmp_path / first.split("=", 1)[1]).resolve() == schema.resolve()
    assert {k: job[k] for k in ["version", "skill", "action", "platform", "user", "gpus"]} == {
        "version": 1,
        "skill": "tao-train-tiny",
        "action": "train",
        "platform": "docker",
        "user": "1000:1000",
        "gpus": [0],
    }
    assert job["results_root"] == str(tmp_path.resolve() / "results")
    assert unset_paths(job["spec"]) == {
        ("dataset", "train_data_sources", 0, "image_dir"),
        ("dataset", "train_data_sources", 0, "json_file"),
        ("dataset", "classes"),
    }
    assert "image_dir: ???  # input: the folder that train reads" in text
    # the schema wants a list there: a single class written as text was refused
    assert "classes: ???  # the template leaves it for you: a list" in text
    assert "  # model:\n  #   backbone: tiny_a\n" in text
    assert "    # batch_size: 4\n" in text
    assert "# Optional inputs: dataset.val_data_sources.image_dir (folder)" in text


def test_an_input_the_template_holds_as_a_list_is_written_as_wanting_a_list(
    tmp_path: Path,
) -> None:
    """calibrate.image_dirs is a folder input whose template value is a list: the comment
    said "the folder", and the one folder a person then wrote was refused as no list."""
    text, job = written(tmp_path, "calibrate", skill="tao-train-odd")
    assert job["spec"] == {"calibrate": {"image_dirs": MISSING}}
    assert "image_dirs: ???  # input: a list of the folders that calibrate reads" in text


def test_whether_an_input_wants_a_list_is_the_schemas_word_before_the_templates(
    tmp_path: Path,
) -> None:
    """init judged a list only by the template's value: an input whose schema wants a list
    (type array) but that the template lacks was written as one folder, and one whose
    schema wants a string but whose template holds a list as a list of files."""
    text, _ = written(tmp_path, "collect", skill="tao-train-odd")
    assert "sources: ???  # input: a list of the folders that collect reads" in text
    assert "manifest: ???  # input: the file that collect reads" in text
    # the schema says nothing of extras: the template's list decides
    assert "extras: ???  # input: a list of the folders that collect reads" in text


def test_a_value_left_in_another_action_s_section_is_read_by_that_action_s_schema(
    tmp_path: Path,
) -> None:
    """TAO's config holds every action's section and each action's schema only its own: a
    list left ??? in evaluate: of a train template was written as wanting one value."""
    folder = tmp_path / "skill"
    (folder / "references").mkdir(parents=True)
    (folder / "schemas").mkdir()
    (folder / "references" / "skill_info.yaml").write_text(
        "name: two\nnetwork_arch: two_net\ncontainer_image: registry.invalid/two:1\n"
        "actions:\n  train:\n    command: two_net train -e {config_path}\n"
        "    config_format: yaml\n    mode: config\n"
        "spec_templates:\n  train: template.yaml\n"
    )
    (folder / "references" / "template.yaml").write_text(
        "train: {epochs: 1}\nevaluate:\n  gpu_ids: ???\n"
    )
    section = {"type": "collection", "properties": {"gpu_ids": {"type": "list"}}}
    for name in ("train", "evaluate"):
        schema = {"type": "object", "properties": {name: section}}
        (folder / "schemas" / f"{name}.schema.json").write_text(json.dumps(schema))
    out = tmp_path / "job.yaml"
    assert init.run("./skill", "train", out, job_dir=tmp_path, environ={}) == EXIT_OK
    assert "gpu_ids: ???  # the template leaves it for you: a list" in out.read_text()


@pytest.mark.parametrize(
    ("image", "asked"),
    [
        ("tao_toolkit.deploy", False),  # pinned in the bank's versions.yaml: TAO Deploy's
        ("registry.invalid/two:1-deploy", False),
        ("tao_toolkit.pyt", True),  # TAO PyTorch's scripts may read any section
    ],
)
def test_a_value_tao_deploy_never_reads_is_left_commented(
    tmp_path: Path, image: str, asked: bool
) -> None:
    """TAO Deploy's gen_trt_engine reads no other action's section: a ??? in evaluate: of
    its template is no value to fill in, and init shows it as a default."""
    root = tmp_path / "bank"
    folder = root / "skills" / "models" / "two"
    (folder / "references").mkdir(parents=True)
    (folder / "schemas").mkdir()
    (root / "versions.yaml").write_text(
        "images:\n  tao_toolkit:\n    pyt: registry.invalid/t:1-pyt\n"
        "    deploy: registry.invalid/t:1-deploy\n"
    )
    (folder / "references" / "skill_info.yaml").write_text(
        f"name: two\nnetwork_arch: two_net\ncontainer_image: {image}\nactions:\n"
        "  gen_trt_engine:\n    command: two_net gen_trt_engine -e {config_path}\n"
        "    config_format: yaml\n    mode: config\n"
        "spec_templates:\n  gen_trt_engine: template.yaml\n"
    )
    (folder / "references" / "template.yaml").write_text(
        "gen_trt_engine:\n  onnx_file: ???\nevaluate:\n  trt_engine: ???\n"
    )
    section = {"type": "collection", "properties": {"onnx_file": {}, "trt_engine": {}}}
    for name in ("gen_trt_engine", "evaluate"):
        schema = {"type": "object", "properties": {name: section}}
        (folder / "schemas" / f"{name}.schema.json").write_text(json.dumps(schema))
    out = tmp_path / "job.yaml"
    assert (
        init.run("./bank/skills/models/two", "gen_trt_engine", out, job_dir=tmp_path, environ={})
        == EXIT_OK
    )
    wanted = {("gen_trt_engine", "onnx_file")} | ({("evaluate", "trt_engine")} if asked else set())
    assert unset_paths(yaml.safe_load(out.read_text())["spec"]) == wanted
    assert ("\n  # evaluate:\n  #   trt_engine: ???\n" in out.read_text()) is not asked


def test_hostile_keys_come_back_byte_for_byte(tmp_path: Path) -> None:
    _, job = written(tmp_path, "evaluate")
    assert job["spec"]["labels"] == {
        "say \"hi\" 'there'": MISSING,
        "$(touch /tmp/taospec-pwned)\nnext line": MISSING,
    }
    assert unset_paths(job["spec"]) == {
        ("evaluate", "checkpoint"),
        ("dataset", "test_data_sources", "image_dir"),
        ("labels", "say \"hi\" 'there'"),
        ("labels", "$(touch /tmp/taospec-pwned)\nnext line"),
    }
    assert not Path("/tmp/taospec-pwned").exists()


def test_an_action_without_a_template_holds_only_its_inputs(tmp_path: Path) -> None:
    _, job = written(tmp_path, "export")
    assert job["spec"] == {"export": {"checkpoint": MISSING}}
    skill = load_skill(TINY)
    for declared in skill.actions["export"].inputs:
        assert lookup(job["spec"], parse_key(declared.spec_key)) == MISSING


def test_a_skill_path_is_written_relative_to_the_job_file(tmp_path: Path) -> None:
    out = tmp_path / "jobs" / "train.yaml"
    out.parent.mkdir()
    cwd = Path(__file__).parent
    ref = "skills/skills/models/tao-train-tiny"
    assert init.run(ref, "train", out, job_dir=cwd, environ={}) == EXIT_OK
    job = yaml.safe_load(out.read_text())
    assert job["skill"] != ref
    assert find_skill(job["skill"], out.parent, {}) == TINY.resolve()


def test_the_default_file_is_named_for_skill_and_action(tmp_path: Path) -> None:
    assert init.run("tao-train-tiny", "evaluate", None, job_dir=tmp_path, environ=ENV) == EXIT_OK
    assert (tmp_path / "tao-train-tiny-evaluate.yaml").is_file()


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    out.write_text("mine\n")
    with pytest.raises(InvalidInput, match="already exists") as caught:
        init.run("tao-train-tiny", "train", out, job_dir=tmp_path, environ=ENV)
    assert caught.value.exit_code == EXIT_INVALID
    assert out.read_text() == "mine\n"


def test_an_unknown_action_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="did you mean 'evaluate'"):
        init.run("tao-train-tiny", "evaluat", tmp_path / "x.yaml", job_dir=tmp_path, environ=ENV)
    assert list(tmp_path.iterdir()) == []
