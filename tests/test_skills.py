"""Finding and reading model skills: the test bank in tests/skills, and broken skills."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from taospec.errors import EXIT_INVALID
from taospec.skills import Input, SkillError, find_skill, load_skill, parse_key

BANK = Path(__file__).parent / "skills"
TINY = BANK / "skills" / "models" / "tao-train-tiny"
ENV = {"TAO_SKILL_BANK": str(BANK)}


def write_skill(root: Path, info: str) -> Path:
    folder = root / "skills" / "models" / "tao-train-broken"
    (folder / "references").mkdir(parents=True)
    (folder / "references" / "skill_info.yaml").write_text(info)
    return folder


def test_a_bare_name_is_found_in_the_bank(tmp_path: Path) -> None:
    assert find_skill("tao-train-tiny", tmp_path, ENV) == TINY


def test_a_path_is_relative_to_the_job_files_folder() -> None:
    job_dir = Path(__file__).parent
    assert find_skill("skills/skills/models/tao-train-tiny", job_dir, {}) == TINY.resolve()
    assert find_skill(str(TINY.resolve()), Path("/"), {}) == TINY.resolve()


def test_an_unknown_name_gets_a_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(SkillError) as caught:
        find_skill("tao-train-tinny", tmp_path, ENV)
    assert "did you mean 'tao-train-tiny'?" in str(caught.value)
    assert caught.value.exit_code == EXIT_INVALID


def test_a_name_without_a_bank_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="set TAO_SKILL_BANK"):
        find_skill("tao-train-tiny", tmp_path, {})


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match=r"nowhere/references/skill_info\.yaml does not exist"):
        find_skill("./nowhere", tmp_path, {})


def test_the_tiny_skill_reads_as_written() -> None:
    skill = load_skill(TINY)
    assert (skill.name, skill.network_arch, skill.gpu_spec_key) == (
        "tao-train-tiny",
        "tiny_net",
        "train.num_gpus",
    )
    assert skill.image_uri == "registry.invalid/tao/tao-toolkit:9.9.9-pyt"
    assert skill.versions_key == "images.tao_toolkit.pyt"
    assert list(skill.actions) == ["train", "evaluate", "export"]
    train = skill.actions["train"]
    assert train.command == "tiny_net train -e {config_path}"
    assert (train.config_format, train.mode, train.upload_excludes) == (
        "yaml",
        "config",
        ("inputs/",),
    )
    assert train.inputs[0] == Input("dataset.train_data_sources[0].image_dir", "folder", False)
    assert train.inputs[2].optional
    assert train.template_path == (TINY / "references" / "spec_template_train.yaml").resolve()
    assert train.schema_path == (TINY / "schemas" / "train.schema.json").resolve()


def test_an_action_may_have_no_template_and_its_own_image() -> None:
    export = load_skill(TINY).actions["export"]
    assert (export.template_path, export.schema_path) == (None, None)
    assert export.image_uri == "registry.invalid/tao/tao-toolkit:9.9.9-deploy"
    assert export.versions_key == "images.tao_toolkit.deploy"
    assert (export.config_format, export.mode) == ("yaml", "config")


def test_each_versions_key_names_the_pin_of_its_literal_image() -> None:
    skill = load_skill(TINY)
    assert skill.versions_file == BANK / "versions.yaml"
    pins = yaml.safe_load(skill.versions_file.read_text())
    for key, uri in [(skill.versions_key, skill.image_uri)] + [
        (a.versions_key, a.image_uri) for a in skill.actions.values() if a.image_uri
    ]:
        node = pins
        for part in str(key).split("."):
            node = node[part]
        assert node == uri


DEPLOY = TINY / "references" / "tao-deploy-tiny.skill_info.yaml"


def test_a_deploy_workflow_is_found_by_its_name_or_path(tmp_path: Path) -> None:
    # the bank keeps TAO Deploy's actions in references/tao-deploy-<model>.skill_info.yaml;
    # skill: tao-deploy-dino was "not in the bank", and no job could run gen_trt_engine
    assert find_skill("tao-deploy-tiny", tmp_path, ENV) == DEPLOY
    assert find_skill(str(DEPLOY), Path("/"), {}) == DEPLOY.resolve()
    with pytest.raises(SkillError, match="did you mean 'tao-deploy-tiny'"):
        find_skill("tao-deploy-tinny", tmp_path, ENV)
    with pytest.raises(SkillError, match=r"\(known: tao-deploy-tiny, tao-train-odd, tao-train"):
        find_skill("x", tmp_path, ENV)


def test_a_workflow_two_model_folders_hold_is_named_by_its_path(tmp_path: Path) -> None:
    models = tmp_path / "skills" / "models"
    for model in ("tao-train-a", "tao-train-b"):
        (models / model / "references").mkdir(parents=True)
        (models / model / "references" / "tao-deploy-x.skill_info.yaml").write_text("{}\n")
    with pytest.raises(SkillError) as caught:
        find_skill("tao-deploy-x", tmp_path, {"TAO_SKILL_BANK": str(tmp_path)})
    first = models / "tao-train-a" / "references" / "tao-deploy-x.skill_info.yaml"
    assert str(caught.value) == (
        f"skill 'tao-deploy-x' is described by more than one file in {models} "
        "(tao-train-a/references/tao-deploy-x.skill_info.yaml, "
        "tao-train-b/references/tao-deploy-x.skill_info.yaml); "
        f"name the one you mean by its path (skill: {first})"
    )
    assert find_skill(str(first), Path("/"), {}) == first


def test_a_deploy_workflow_reads_its_model_folders_templates_and_schemas() -> None:
    skill = load_skill(DEPLOY)
    assert (skill.name, skill.network_arch, skill.folder) == ("tao-deploy-tiny", "tiny_net", TINY)
    assert (skill.image_uri, skill.versions_key) == (None, "images.tao_toolkit.deploy")
    assert skill.versions_file == BANK / "versions.yaml"
    assert skill.gpu_spec_key is None
    engine, evaluate = skill.action("gen_trt_engine"), skill.action("evaluate")
    references = (TINY / "references").resolve()
    assert engine.template_path == references / "spec_template_deploy_gen_trt_engine.yaml"
    assert evaluate.template_path == references / "spec_template_deploy_evaluate.yaml"
    assert engine.schema_path == (TINY / "schemas" / "gen_trt_engine.schema.json").resolve()
    assert evaluate.schema_path == (TINY / "schemas" / "evaluate.schema.json").resolve()
    assert [each.spec_key for each in engine.inputs] == ["gen_trt_engine.onnx_file"]


def test_an_unknown_action_is_named_with_a_hint() -> None:
    with pytest.raises(SkillError, match="has no action 'trian'; did you mean 'train'"):
        load_skill(TINY).action("trian")


def test_keys_with_list_indexes_parse() -> None:
    assert parse_key("dataset.sources[0].image_dir") == ("dataset", "sources", 0, "image_dir")
    assert parse_key("a b.$(x)") == ("a b", "$(x)")
    assert parse_key("m[1][2]") == ("m", 1, 2)
    for bad in ["a..b", "a[x]", "", "[0]"]:
        with pytest.raises(ValueError):
            parse_key(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("network_arch: x\nactions: {train: [\n", r"skill_info\.yaml:3: not valid YAML"),
        ("actions: {}\n", r"skill_info\.yaml:1: network_arch is missing"),
        (
            "network_arch: x\nactions:\n  train:\n    mode: config\n",
            r"skill_info\.yaml:4: command is missing",
        ),
        (
            "network_arch: x\nactions:\n  train:\n    command: c\n    mode: shell\n",
            r"skill_info\.yaml:5: mode must be one of config, args, not 'shell'",
        ),
        (
            "network_arch: x\nactions:\n  t:\n    command: c\n    inputs:\n"
            "      a[x]:\n        type: file\n",
            r"skill_info\.yaml:6: 'a\[x\]' is not a dotted spec key",
        ),
        (
            "network_arch: x\nactions:\n  t:\n    command: c\n    inputs:\n"
            "      a:\n        type: file\n        optional: maybe\n",
            r"skill_info\.yaml:8: optional must be true or false",
        ),
        ("network_arch: x\nactions: [train]\n", r"skill_info\.yaml:2: actions must be a mapping"),
    ],
)
def test_errors_in_a_skills_files_name_the_file_and_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    folder = write_skill(tmp_path, text)
    with pytest.raises(SkillError, match=expected) as caught:
        load_skill(folder)
    assert "\n" not in str(caught.value)
    assert str(folder / "references" / "skill_info.yaml") in str(caught.value)
