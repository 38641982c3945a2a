"""Job files that name a model skill: defaults, the merged and checked spec, inputs, init.

Every test uses the tiny skill under tests/skills (TAO_SKILL_BANK points there) and the
real ``taospec`` command; the spec a job would read is taken from the plan's spec-file
step (or, for hostile text, from a real local run) and parsed back.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from taospec.skilljob import _glob_start
from tests.conftest import Runner, load_job, write

BANK = Path(__file__).resolve().parent / "skills"
TEMPLATE = BANK / "skills/models/tao-train-tiny/references/spec_template_train.yaml"
PINNED = "registry.invalid/pinned/tiny:1"


@pytest.fixture
def bank(taospec: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """The command line (and this process) with TAO_SKILL_BANK at the test bank, and a
    versions.yaml beside the jobs that pins the skill's image key."""
    monkeypatch.setenv("TAO_SKILL_BANK", str(BANK))
    taospec.env["TAO_SKILL_BANK"] = str(BANK)
    write(tmp_path / "versions.yaml", f"images:\n  tao_toolkit:\n    pyt: {PINNED}\n")
    write(tmp_path / "data" / "train.json", "{}\n")
    return taospec


def job(tmp_path: Path, *lines: str, name: str = "job.yaml") -> Path:
    head = ["version: 1", "skill: tao-train-tiny", f"results_root: {tmp_path / 'results'}"]
    return write(tmp_path / name, "\n".join([*head, *lines]) + "\n")


TRAIN = (
    "action: train",
    "platform: docker",
    'user: "1000:1000"',
    "gpus: [0, 1]",
    "spec:",
    "  dataset:",
    "    train_data_sources:",
    "      - image_dir: data/images",
    "        json_file: data/train.json",
    "    classes: [cat, dog]",
    "  train: {num_epochs: 3}",
)


def plan(runner: Runner, file: Path) -> dict[str, Any]:
    done = runner("render", file, "--format", "json")
    assert done.returncode == 0, done.stderr
    rendered: dict[str, Any] = json.loads(done.stdout)
    return rendered


def step(rendered: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in rendered["steps"] if s["name"] == name)
    return found


def spec_of(rendered: dict[str, Any]) -> Any:
    return yaml.safe_load(step(rendered, "spec-file")["stdin_text"])


def invalid(runner: Runner, file: Path) -> list[str]:
    done = runner("validate", file)
    assert done.returncode == 2, done.stdout + done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith(str(file))]


def line_of(file: Path, text: str) -> int:
    return next(i for i, line in enumerate(file.read_text().splitlines(), 1) if text in line)


def test_a_short_job_renders_the_whole_checked_spec(bank: Runner, tmp_path: Path) -> None:
    file = job(tmp_path, *TRAIN)
    assert len(file.read_text().splitlines()) < 15
    rendered = plan(bank, file)
    data = tmp_path.resolve() / "data"
    assert spec_of(rendered) == {
        "results_dir": "/results",
        "model": {"backbone": "tiny_a", "depth": 2},
        "dataset": {
            "train_data_sources": [
                {"image_dir": "/inputs/0/images", "json_file": "/inputs/1/train.json"}
            ],
            "val_data_sources": {"image_dir": ""},
            "batch_size": 4,
            "classes": ["cat", "dog"],
        },
        "train": {
            "num_gpus": 2,
            "num_epochs": 3,
            "pretrained_model_path": "",
            "checkpoint_interval": 0,
            "loss": "focal",
            "optim": {"lr": 0.001, "warmup_lr": "${train.optim.lr}"},
        },
        "labels": yaml.safe_load(TEMPLATE.read_text())["labels"],
    }
    assert rendered["record"]["image"] == PINNED
    assert rendered["record"]["network_arch"] == "tiny_net"
    assert rendered["record"]["upload_excludes"] == ["inputs/"]
    launch = step(rendered, "launch")["argv"]
    assert launch[-4:] == [PINNED, "tiny_net", "train", "-e", "/results/stage/spec.yaml"][-4:]
    assert PINNED in launch
    assert (
        f"input spec.dataset.train_data_sources[0].image_dir: {data}/images, read-only at "
        "/inputs/0/images" in rendered["notes"]
    )
    text = bank("render", file)
    said = "$.spec.train.checkpoint_interval: warning: in tao-train-tiny's template"
    assert f"{file}:2:8: {said}" in text.stderr
    assert "/inputs/0/images" in text.stdout
    assert f"{data}/images:/inputs/0/images:ro" in text.stdout


def test_the_job_file_overrides_what_the_skill_gives(bank: Runner, tmp_path: Path) -> None:
    file = job(
        tmp_path,
        *TRAIN,
        "network_arch: my_net",
        "image: registry.invalid/mine:2",
        "command: [tiny_net, train, -e, '{config_path}', train.num_epochs=2]",
        "upload_excludes: []",
    )
    rendered = plan(bank, file)
    assert rendered["record"]["image"] == "registry.invalid/mine:2"
    assert rendered["record"]["network_arch"] == "my_net"
    assert rendered["record"]["upload_excludes"] == []
    assert step(rendered, "launch")["argv"][-5:] == [
        "tiny_net", "train", "-e", "/results/stage/spec.yaml", "train.num_epochs=2",
    ]  # fmt: skip


def test_without_a_pin_beside_the_job_the_banks_versions_file_names_the_image(
    bank: Runner, tmp_path: Path
) -> None:
    write(tmp_path / "versions.yaml", "images: {other: registry.invalid/other:1}\n")
    rendered = plan(bank, job(tmp_path, *TRAIN))
    assert rendered["record"]["image"] == "registry.invalid/tao/tao-toolkit:9.9.9-pyt"


@pytest.mark.parametrize("pin", ["Registry.invalid/BAD", "5", "[a]", "''"])
def test_a_pin_beside_the_job_that_names_no_image_is_refused_not_passed_over(
    bank: Runner, tmp_path: Path, pin: str
) -> None:
    # the bank's own pin was used instead, and a typo in the project's pin ran another image
    write(tmp_path / "versions.yaml", f"images:\n  tao_toolkit:\n    pyt: {pin}\n")
    file = job(tmp_path, *TRAIN)
    (said,) = invalid(bank, file)
    assert said.startswith(
        f"{file}:2:8: $.skill: skill tao-train-tiny names the image of train by its pin "
        f"images.tao_toolkit.pyt: {tmp_path / 'versions.yaml'}: 'images.tao_toolkit.pyt' "
    )
    assert said.endswith("; fix that pin, or give image:")
    assert bank("render", file).returncode == 2


def test_a_misspelt_nested_key_fails_with_its_line_and_a_suggestion(
    bank: Runner, tmp_path: Path
) -> None:
    file = job(tmp_path, *TRAIN[:-1], "  train:", "    optim:", "      lrr: 0.01")
    line = line_of(file, "lrr:")
    assert invalid(bank, file) == [
        f"{file}:{line}:7: $.spec.train.optim.lrr: unknown key 'lrr'; did you mean 'lr'?"
    ]


def test_a_value_of_the_wrong_type_fails_at_its_line(bank: Runner, tmp_path: Path) -> None:
    file = job(tmp_path, *TRAIN[:-1], "  train: {num_epochs: ten}")
    line = line_of(file, "num_epochs: ten")
    assert invalid(bank, file) == [
        f"{file}:{line}:23: $.spec.train.num_epochs: 'ten' is not an integer"
    ]


def test_values_left_unset_are_errors_where_they_were_left(bank: Runner, tmp_path: Path) -> None:
    file = job(tmp_path, *TRAIN[:-2], "  model:", "    backbone: ???")
    skill_line = line_of(file, "skill:")
    assert invalid(bank, file) == [
        f"{file}:{skill_line}:8: $.spec.dataset.classes: not set yet (???): set "
        f"spec.dataset.classes in the job file's spec (the value comes from {TEMPLATE})",
        f"{file}:{line_of(file, 'backbone')}:15: $.spec.model.backbone: not set yet (???): set "
        "spec.model.backbone in the job file's spec",
    ]


def test_a_required_input_left_out_is_an_error(bank: Runner, tmp_path: Path) -> None:
    file = job(tmp_path, *[x for x in TRAIN if "json_file" not in x])
    assert invalid(bank, file) == [
        f"{file}:{line_of(file, '- image_dir')}:9: "
        "$.spec.dataset.train_data_sources[0].json_file: "
        "set spec.dataset.train_data_sources[0].json_file: the file that train reads"
    ]
    file = job(tmp_path, "action: evaluate", "spec: {evaluate: {checkpoint: m.pth}}", name="e.yaml")
    found = invalid(bank, file)
    assert (
        f"{file}:2:8: $.spec.dataset.test_data_sources.image_dir: set "
        "spec.dataset.test_data_sources.image_dir: the folder that evaluate reads (the value "
        f"comes from {TEMPLATE.with_name('spec_template_evaluate.yaml')})"
    ) in found


def test_a_required_input_declared_at_a_list_index_is_needed_in_every_item(
    bank: Runner, tmp_path: Path
) -> None:
    """The skill declares dataset.train_data_sources[0].json_file: a second source without
    one passed validate, and train met an empty path only once it ran."""
    (tmp_path / "data" / "more").mkdir(parents=True, exist_ok=True)
    file = job(tmp_path, *TRAIN[:-2], "      - image_dir: data/more", *TRAIN[-2:])
    assert invalid(bank, file) == [
        f"{file}:{line_of(file, '- image_dir: data/more')}:9: "
        "$.spec.dataset.train_data_sources[1].json_file: "
        "set spec.dataset.train_data_sources[1].json_file: the file that train reads"
    ]


def test_the_gpu_key_follows_gpus_and_a_different_value_is_refused(
    bank: Runner, tmp_path: Path
) -> None:
    one = job(tmp_path, *[x.replace("[0, 1]", "[3]") for x in TRAIN], name="one.yaml")
    assert spec_of(plan(bank, one))["train"]["num_gpus"] == 1
    agree = job(tmp_path, *TRAIN[:-1], "  train: {num_gpus: 2}", name="agree.yaml")
    assert spec_of(plan(bank, agree))["train"]["num_gpus"] == 2
    clash = job(tmp_path, *TRAIN[:-1], "  train:", "    num_gpus: 4", name="clash.yaml")
    assert invalid(bank, clash) == [
        f"{clash}:{line_of(clash, 'num_gpus')}:15: $.spec.train.num_gpus: spec.train.num_gpus "
        "is 4 but gpus: names 2 GPU(s); leave spec.train.num_gpus out (taospec sets it from "
        "gpus:) or make the two agree"
    ]


EVALUATE = (
    "action: evaluate",
    "platform: docker",
    'user: "1000:1000"',
    "gpus: [0, 1]",
    "spec:",
    "  dataset: {test_data_sources: {image_dir: data/images}}",
    "  labels:",
    "    'say \"hi\" ''there''': 1",
    '    "$(touch /tmp/taospec-pwned)\\nnext line": x',
    "  evaluate:",
    "    checkpoint: m.pth",
)


def test_an_evaluate_s_gpu_key_is_the_one_tao_reads_for_it(bank: Runner, tmp_path: Path) -> None:
    # TAO's PyTorch entrypoint launches an evaluate on evaluate.num_gpus GPUs: setting the
    # skill's train.num_gpus from gpus: left the evaluation on one GPU of the two
    write(tmp_path / "m.pth", "")
    spec = spec_of(plan(bank, job(tmp_path, *EVALUATE)))
    assert spec["evaluate"]["num_gpus"] == 2
    assert "num_gpus" not in spec.get("train", {})
    clash = job(tmp_path, *EVALUATE, "    num_gpus: 1", name="clash.yaml")
    assert invalid(bank, clash) == [
        f"{clash}:{line_of(clash, 'num_gpus')}:15: $.spec.evaluate.num_gpus: "
        "spec.evaluate.num_gpus is 1 but gpus: names 2 GPU(s); leave spec.evaluate.num_gpus "
        "out (taospec sets it from gpus:) or make the two agree"
    ]
    ids = job(tmp_path, *EVALUATE, "    gpu_ids: [0, 1, 2]", name="ids.yaml")
    assert "names 3 GPU ids" in invalid(bank, ids)[0]


def test_the_gpu_key_follows_free_gpus_and_all_asks_for_a_count(
    bank: Runner, tmp_path: Path
) -> None:
    # {free: 2} and all left the template's num_gpus: 1, silently: the trainer used 1 GPU
    free = [x.replace("[0, 1]", "{free: 2}") for x in TRAIN]
    assert spec_of(plan(bank, job(tmp_path, *free, name="free.yaml")))["train"]["num_gpus"] == 2
    clash = job(tmp_path, *free[:-1], "  train: {num_gpus: 3}", name="clash.yaml")
    assert invalid(bank, clash) == [
        f"{clash}:{line_of(clash, 'num_gpus')}:21: $.spec.train.num_gpus: spec.train.num_gpus "
        "is 3 but gpus: names 2 GPU(s); leave spec.train.num_gpus out (taospec sets it from "
        "gpus:) or make the two agree"
    ]
    every = [x.replace("[0, 1]", "all") for x in TRAIN]
    refused = job(tmp_path, *every, name="all.yaml")
    assert invalid(bank, refused) == [
        f"{refused}:{line_of(refused, 'gpus')}:7: $.gpus: gpus: all leaves the number of GPUs "
        "to the host, and skill tao-train-tiny's spec.train.num_gpus must name it: list the "
        "ids (gpus: [0, 1]), ask for a number of them (gpus: {free: 2}), or set "
        "spec.train.num_gpus yourself"
    ]
    counted = job(tmp_path, *every[:-1], "  train: {num_gpus: 4}", name="counted.yaml")
    assert spec_of(plan(bank, counted))["train"]["num_gpus"] == 4


def test_inputs_are_mounted_read_only_unless_a_mount_already_holds_them(
    bank: Runner, tmp_path: Path
) -> None:
    data = tmp_path.resolve() / "data"
    file = job(
        tmp_path,
        *TRAIN,
        "mounts:",
        f"  - {{source: {data}, target: /data, readonly: true}}",
        "  - {source: /srv/unrelated, target: /inputs/0}",
    )
    rendered = plan(bank, file)
    sources = spec_of(rendered)["dataset"]["train_data_sources"]
    assert sources == [{"image_dir": "/data/images", "json_file": "/data/train.json"}]
    launch = " ".join(step(rendered, "launch")["argv"])
    assert launch.count(f"{data}:") == 1
    assert "/inputs/1" not in launch
    assert f"-v {data}:/data:ro" in launch

    apart = job(
        tmp_path,
        *TRAIN[:-4],
        "    - {image_dir: /srv/tiny/images, json_file: /srv/tiny/images}",
        "    classes: [cat]",
        "mounts: [{source: /srv/other, target: /inputs/0}]",
        name="apart.yaml",
    )
    rendered = plan(bank, apart)
    sources = spec_of(rendered)["dataset"]["train_data_sources"]
    assert sources == [{"image_dir": "/inputs/1/images", "json_file": "/inputs/1/images"}]
    launch = " ".join(step(rendered, "launch")["argv"])
    assert launch.count("/srv/tiny/images:/inputs/1/images:ro") == 1
    loaded = load_job(apart)
    assert [(i.spec_key, i.job_path) for i in loaded.spec_inputs] == [
        ("dataset.train_data_sources[0].image_dir", "/inputs/1/images"),
        ("dataset.train_data_sources[0].json_file", "/inputs/1/images"),
    ]


def test_an_input_declared_at_a_list_index_is_mounted_for_every_item(
    bank: Runner, tmp_path: Path
) -> None:
    """The skill declares dataset.train_data_sources[0].image_dir: a second source's paths
    passed validate and reached the container as this machine's paths, never mounted."""
    (tmp_path / "data" / "more").mkdir(parents=True, exist_ok=True)
    write(tmp_path / "data" / "more.json", "{}\n")
    file = job(
        tmp_path,
        *TRAIN[:-2],
        "      - image_dir: data/more",
        "        json_file: data/more.json",
        *TRAIN[-2:],
    )
    rendered = plan(bank, file)
    sources = spec_of(rendered)["dataset"]["train_data_sources"]
    assert sources == [  # numbered as declared: each source's image_dir, then json_file
        {"image_dir": "/inputs/0/images", "json_file": "/inputs/2/train.json"},
        {"image_dir": "/inputs/1/more", "json_file": "/inputs/3/more.json"},
    ]
    data = tmp_path.resolve() / "data"
    assert (
        f"input spec.dataset.train_data_sources[1].image_dir: {data}/more, read-only at "
        "/inputs/1/more" in rendered["notes"]
    )
    launch = " ".join(step(rendered, "launch")["argv"])
    assert f"-v {data}/more:/inputs/1/more:ro" in launch
    assert str(data) not in json.dumps(spec_of(rendered))


def test_each_path_of_an_input_holding_a_list_is_mounted(
    bank: Runner, tmp_path: Path, state_dir: Path
) -> None:
    (tmp_path / "data" / "more").mkdir(parents=True, exist_ok=True)
    file = write(
        tmp_path / "cal.yaml",
        "version: 1\nskill: tao-train-odd\naction: calibrate\nplatform: docker\n"
        f'user: "1000:1000"\nresults_root: {tmp_path / "results"}\n'
        "spec:\n  calibrate:\n    image_dirs: [data/images, data/more, data/none]\n",
    )
    data = tmp_path.resolve() / "data"
    rendered = plan(bank, file)
    assert spec_of(rendered)["calibrate"]["image_dirs"] == [
        "/inputs/0/images",
        "/inputs/1/more",
        "/inputs/2/none",
    ]
    launch = " ".join(step(rendered, "launch")["argv"])
    assert f"-v {data}/images:/inputs/0/images:ro" in launch
    assert f"-v {data}/more:/inputs/1/more:ro" in launch
    where = f"{file}:9:42: $.spec.calibrate.image_dirs[2]"
    done = bank("validate", "--here", file)
    assert done.returncode == 2
    assert f"{where}: {data}/none does not exist on this machine" in done.stderr
    assert list(state_dir.iterdir()) == []


def test_a_skill_command_only_a_shell_understands_is_refused(bank: Runner, tmp_path: Path) -> None:
    head = f"version: 1\nskill: tao-train-odd\naction: serve\nresults_root: {tmp_path}\n"
    file = write(tmp_path / "serve.yaml", head)
    [found] = invalid(bank, file)
    assert found.startswith(f"{file}:2:8: $.skill: the skill's command for serve (")
    assert found.endswith(
        "is shell script (it holds a line break), and taospec runs a command as words, "
        "through no shell; give command: yourself, e.g. as the list [bash, -c, <script>]"
    )
    words = write(
        tmp_path / "words.yaml", head + "command: [bash, -c, 'odd_net serve <<< ready']\n"
    )
    done = bank("validate", words)
    assert done.returncode == 0, done.stderr


def test_an_action_that_reads_its_spec_as_toml_is_refused(
    bank: Runner, tmp_path: Path, state_dir: Path
) -> None:
    head = f"version: 1\nskill: tao-train-odd\naction: tune\nresults_root: {tmp_path}\n"
    file = write(tmp_path / "tune.yaml", head + "spec: {tune: {rate: 0.1}}\n")
    assert invalid(bank, file) == [
        f"{file}:2:8: $.skill: skill tao-train-odd's tune reads its spec as toml "
        "(config_format), and taospec writes a spec only as YAML; of its actions, taospec "
        "runs calibrate, collect, predict and serve"
    ]
    assert bank("run", file).returncode == 2
    assert list(state_dir.iterdir()) == []


def test_init_refuses_an_action_that_reads_its_spec_as_toml(bank: Runner, tmp_path: Path) -> None:
    """init wrote a job file for it and said to fill it in, which validate then refused for
    a reason no edit of the file can mend (every action of tao-finetune-cosmos-reason)."""
    done = bank("init", "tao-train-odd", "tune", "-o", "tune.yaml")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "taospec: skill tao-train-odd's tune reads its spec as toml (config_format), and "
        "taospec writes a spec only as YAML; of its actions, taospec runs calibrate, collect, "
        "predict and serve\n"
    )
    assert not (tmp_path / "tune.yaml").exists()


def test_an_action_without_a_template_takes_the_spec_as_written(
    bank: Runner, tmp_path: Path
) -> None:
    bare = job(tmp_path, "action: export", "platform: docker", 'user: "1000:1000"', "gpus: [0]")
    assert invalid(bank, bare) == [
        f"{bare}:2:8: $.spec.export.checkpoint: set spec.export.checkpoint: the file that "
        "export reads"
    ]
    file = job(
        tmp_path,
        "action: export",
        "platform: docker",
        'user: "1000:1000"',
        "gpus: [0]",
        "spec: {export: {checkpoint: data/train.json, onnx_file: '{results_dir}/m.onnx'}}",
        name="export.yaml",
    )
    rendered = plan(bank, file)
    assert spec_of(rendered) == {
        "export": {"checkpoint": "/inputs/0/train.json", "onnx_file": "/results/m.onnx"}
    }
    assert rendered["record"]["image"] == "registry.invalid/tao/tao-toolkit:9.9.9-deploy"
    assert step(rendered, "launch")["argv"][-4:] == [
        "tiny_net", "export", "-e", "/results/stage/spec.yaml",
    ]  # fmt: skip


def test_hostile_keys_and_values_reach_the_spec_file_unchanged(
    bank: Runner, tmp_path: Path
) -> None:
    canary = tmp_path / "pwned"
    hostile = f'it\'s "quoted" $(touch {canary}) `touch {canary}`\nsecond line; {{{{x}}}}'
    folder = tmp_path / 'in put\'s "dir" $(x)'
    folder.mkdir()
    user = {
        "dataset": {
            "train_data_sources": [{"image_dir": str(folder), "json_file": "data/train.json"}],
            "classes": [hostile, "$(id)"],
        },
        "labels": {"a key with spaces": hostile, "$(touch /tmp/taospec-pwned)\nnext line": "ok"},
    }
    file = job(
        tmp_path,
        "action: train",
        "platform: local",
        "command: [cat, '{config_path}']",
        f"spec: {json.dumps(user)}",
    )
    done = bank("run", file)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    written = yaml.safe_load((tmp_path / "results" / job_id / "taospec.log").read_text())
    assert written["labels"] == {
        **yaml.safe_load(TEMPLATE.read_text())["labels"],
        "a key with spaces": hostile.replace("{{x}}", "{x}"),
        "$(touch /tmp/taospec-pwned)\nnext line": "ok",
    }
    assert written["dataset"]["classes"] == [hostile.replace("{{x}}", "{x}"), "$(id)"]
    assert written["dataset"]["train_data_sources"] == [
        {
            "image_dir": str(folder.resolve()),
            "json_file": str(tmp_path.resolve() / "data/train.json"),
        }
    ]
    assert written["train"]["optim"]["warmup_lr"] == "${train.optim.lr}"
    assert not canary.exists()


def test_a_secret_in_the_skill_s_template_is_refused_at_the_skill_line(
    bank: Runner, tmp_path: Path
) -> None:
    # the job file's own spec values are the rules' to judge; a template's are merged in
    # after them, so a bank whose template gave a password wrote it into the spec file
    own = tmp_path / "bank"
    shutil.copytree(BANK, own)
    template = own / TEMPLATE.relative_to(BANK)
    template.write_text(template.read_text() + "auth: {user: me, password: hunter2pw}\n")
    bank.env["TAO_SKILL_BANK"] = str(own)
    file = job(tmp_path, *TRAIN)
    for verb in ("validate", "render"):
        said = bank(verb, file)
        assert said.returncode == 2, said.stderr
        assert "hunter2pw" not in said.stdout + said.stderr
        assert f"{file}:2:8: $.spec.auth.password: a spec file is written" in said.stderr
        assert f"(the secret-named key is password) (the value comes from {template})" in (
            said.stderr
        )
    overridden = job(tmp_path, *TRAIN, "  auth: {password: $DB_PASSWORD}", name="own.yaml")
    assert bank("validate", overridden).returncode == 0


@pytest.mark.parametrize("verb", ["validate", "render"])
def test_a_skill_s_warning_quoting_a_value_shows_no_passed_value(
    bank: Runner, tmp_path: Path, verb: str
) -> None:
    # a value the schema only hints at (a choice it does not list) is quoted in a warning,
    # which was printed as it was: the value of a passed variable (registered as the file
    # was read) or of a secret-named one went to stderr, before render refused the file
    value = "Zq8Rt5Lp2Wx"
    loss = next(i for i, line in enumerate(TRAIN) if line.startswith("  train:"))
    lines = [
        *TRAIN[:loss],
        f"  train: {{num_epochs: 3, loss: {value}}}",
        "env: {pass: [PLAIN_VAR]}",
    ]
    file = job(tmp_path, *lines)
    for env in ({"PLAIN_VAR": value}, {"PLAIN_VAR": "other-value", "HF_TOKEN": value}):
        done = bank(verb, file, env=env)
        assert "'<redacted>' is not one of the schema's choices: 'ce', 'focal'" in done.stderr
        assert value not in done.stderr  # (render's plan is the job's: HF_TOKEN is not passed)


def test_init_then_validate_lists_exactly_what_is_left(bank: Runner, tmp_path: Path) -> None:
    made = bank("init", "tao-train-tiny", "train", "-o", "new.yaml")
    assert made.returncode == 0, made.stderr
    file = tmp_path / "new.yaml"
    text = file.read_text()
    found = invalid(bank, file)
    assert [line.split(": ", 2)[1] for line in found] == [
        "$.spec.dataset.train_data_sources[0].image_dir",
        "$.spec.dataset.train_data_sources[0].json_file",
        "$.spec.dataset.classes",
    ]
    assert all("not set yet (???)" in line for line in found)
    filled = (
        text.replace("image_dir: ???", "image_dir: data/images")
        .replace("json_file: ???", "json_file: data/train.json")
        .replace("classes: ???", "classes: [cat]")
    )
    file.write_text(filled)
    done = bank("validate", file)
    assert done.returncode == 0, done.stderr
    assert spec_of(plan(bank, file))["dataset"]["classes"] == ["cat"]
    again = bank("init", "tao-train-tiny", "train", "-o", "new.yaml")
    assert again.returncode == 2
    assert "already exists" in again.stderr


def test_init_of_an_action_with_nothing_to_fill_validates_as_written(
    bank: Runner, tmp_path: Path
) -> None:
    made = bank("init", "tao-train-odd", "predict", "-o", "new.yaml")
    assert made.returncode == 0, made.stderr
    file = tmp_path / "new.yaml"
    done = bank("validate", file)
    assert done.returncode == 0, done.stderr
    assert "# Optional inputs: predict.checkpoint (file)" in file.read_text()
    assert spec_of(plan(bank, file))["predict"]["threshold"] == 0.5


def test_an_unknown_skill_or_action_is_refused_at_its_line(bank: Runner, tmp_path: Path) -> None:
    file = write(
        tmp_path / "job.yaml",
        f"version: 1\nskill: tao-train-tinny\naction: train\nresults_root: {tmp_path}\n",
    )
    assert invalid(bank, file) == [
        f"{file}:2:8: $.skill: skill 'tao-train-tinny' is not in "
        f"{BANK}/skills/models; did you mean 'tao-train-tiny'?"
    ]
    file.write_text(f"version: 1\nskill: tao-train-tiny\naction: trian\nresults_root: {tmp_path}\n")
    assert invalid(bank, file) == [
        f"{file}:3:9: $.action: skill tao-train-tiny has no action 'trian'; did you mean 'train'?"
    ]


def test_without_a_skill_the_image_and_command_are_still_required(
    bank: Runner, tmp_path: Path
) -> None:
    file = write(tmp_path / "job.yaml", f"version: 1\naction: train\nresults_root: {tmp_path}\n")
    found = invalid(bank, file)
    assert len(found) == 1
    assert "'network_arch', 'image', 'command'" in found[0]
    assert os.environ["TAO_SKILL_BANK"] == str(BANK)


def test_a_pipeline_names_the_skill_once_in_defaults(bank: Runner, tmp_path: Path) -> None:
    file = write(
        tmp_path / "pipe.yaml",
        "\n".join(
            [
                "version: 1",
                "defaults:",
                "  skill: tao-train-tiny",
                "  platform: docker",
                '  user: "1000:1000"',
                f"  results_root: {tmp_path / 'results'}",
                "  gpus: [0]",
                "jobs:",
                "  train:",
                "    action: train",
                "    spec: {dataset: {train_data_sources: [{image_dir: /d/i, json_file: /d/j}],",
                "                     classes: [a]}}",
                "  evaluate:",
                "    action: evaluate",
                "    needs: [train]",
                "    spec:",
                "      evaluate: {checkpoint: '{needs.train.results_dir}/model.pth'}",
                "      dataset: {test_data_sources: {image_dir: /d/test}}",
                "      labels:",
                "        'say \"hi\" ''there''': 1",
                '        "$(touch /tmp/taospec-pwned)\\nnext line": x',
            ]
        )
        + "\n",
    )
    done = bank("validate", file)
    assert done.returncode == 0, done.stderr
    rendered = bank("render", file, "evaluate", "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    plans = json.loads(rendered.stdout)
    evaluate = plans[-1] if isinstance(plans, list) else plans
    spec = spec_of(evaluate)
    assert spec["evaluate"]["checkpoint"] == "/inputs/0/model.pth"
    assert any(
        note.startswith("input spec.evaluate.checkpoint: ")
        and note.endswith("/model.pth, read-only at /inputs/0/model.pth")
        and "{needs" not in note
        for note in evaluate["notes"]
    )
    assert spec["dataset"]["test_data_sources"]["image_dir"] == "/inputs/1/test"
    launch = step(evaluate, "launch")["argv"]
    assert "/d/test:/inputs/1/test:ro" in launch
    assert spec["labels"] == {
        "say \"hi\" 'there'": 1,
        "$(touch /tmp/taospec-pwned)\nnext line": "x",
    }


def test_an_input_docker_run_cannot_mount_is_refused_at_its_spec_key(
    bank: Runner, tmp_path: Path, state_dir: Path
) -> None:
    (tmp_path / "data" / "a:b").mkdir()
    file = job(tmp_path, *TRAIN[:7], "      - image_dir: data/a:b", *TRAIN[8:])
    where = f"{file}:{line_of(file, 'image_dir')}:20"
    folder = tmp_path.resolve() / "data" / "a:b"
    assert invalid(bank, file) == [
        f"{where}: $.spec.dataset.train_data_sources[0].image_dir: input '{folder}': docker "
        "run -v separates source, target and options with ':', so a source holding ':' cannot "
        "be mounted; link or move it to a path without ':'"
    ]
    done = bank("run", file)
    assert done.returncode == 2
    assert where in done.stderr
    assert list(state_dir.iterdir()) == []
    assert not (tmp_path / "results").exists()


def test_a_missing_input_is_reported_at_the_spec_key_that_names_it(
    bank: Runner, tmp_path: Path, state_dir: Path
) -> None:
    file = job(tmp_path, *TRAIN[:7], "      - image_dir: data/none", *TRAIN[8:])
    where = f"{file}:{line_of(file, 'image_dir')}:20: $.spec.dataset.train_data_sources[0]"
    missing = tmp_path.resolve() / "data" / "none"
    said = f"{where}.image_dir: {missing} does not exist on this machine"
    for verb, code in ((("run", "-n"), 0), (("validate", "--here"), 2), (("run",), 2)):
        done = bank(*verb, file)
        assert done.returncode == code, done.stderr
        assert said in done.stderr
    assert list(state_dir.iterdir()) == []


def test_an_upstream_input_docker_cannot_mount_is_refused_at_its_spec_key(
    bank: Runner, tmp_path: Path
) -> None:
    file = write(
        tmp_path / "pipe.yaml",
        "\n".join(
            [
                "version: 1",
                "defaults:",
                "  skill: tao-train-tiny",
                '  user: "1000:1000"',
                f"  results_root: {tmp_path / 'results'}",
                "jobs:",
                "  train:",
                "    action: train",
                f"    results_root: '{tmp_path / 'res:ults'}'",
                "    spec: {dataset: {train_data_sources: [{image_dir: /d/i, json_file: /d/j}],",
                "                     classes: [a]}}",
                "  evaluate:",
                "    action: evaluate",
                "    platform: docker",
                "    needs: [train]",
                "    spec:",
                "      evaluate: {checkpoint: '{needs.train.results_dir}/model.pth'}",
                "      dataset: {test_data_sources: {image_dir: /d/test}}",
                "      labels:",
                "        'say \"hi\" ''there''': 1",
                '        "$(touch /tmp/taospec-pwned)\\nnext line": x',
            ]
        )
        + "\n",
    )
    refused = [line for line in invalid(bank, file) if ": warning: " not in line]
    assert refused == [
        f"{file}:17:30: $.jobs.evaluate.spec.evaluate.checkpoint: {{needs.train.results_dir}} "
        f"is a folder under '{tmp_path / 'res:ults'}', whose ':' or ',' the container's mount "
        "option would split; give target train a results_root without them"
    ]


def test_a_key_the_template_sets_and_its_schema_lacks_may_be_given_a_value(
    bank: Runner, tmp_path: Path
) -> None:
    """The template sets predict.batch_hint, which the schema lacks (a warning): a job that
    changed its value was refused as if it had misspelled a key."""
    head = f"version: 1\nskill: tao-train-odd\naction: predict\nresults_root: {tmp_path}\nspec:\n"
    changed = write(tmp_path / "changed.yaml", head + "  predict: {batch_hint: 16}\n")
    done = bank("validate", changed)
    assert done.returncode == 0, done.stderr
    assert (
        f"{changed}:6:13: $.spec.predict.batch_hint: warning: unknown key 'batch_hint' "
        "(tao-train-odd's template sets it: kept)"
    ) in done.stderr
    assert spec_of(plan(bank, changed))["predict"]["batch_hint"] == 16
    typo = write(tmp_path / "typo.yaml", head + "  predict: {batch_hnt: 16}\n")
    assert invalid(bank, typo) == [
        f"{typo}:6:13: $.spec.predict.batch_hnt: unknown key 'batch_hnt'; did you mean "
        "'batch_hint'?"
    ]


def test_init_for_a_skill_that_names_no_image_asks_for_one(bank: Runner, tmp_path: Path) -> None:
    """A skill with container_image: null got a job file without image:, which validate
    then refused for a reason the file did not show; and init's note spoke of ??? under
    spec: where there were none."""
    folder = tmp_path / "imageless"
    shutil.copytree(BANK / "skills" / "models" / "tao-train-odd", folder)
    info = folder / "references" / "skill_info.yaml"
    text = info.read_text()
    info.write_text(text.replace(text.split("container_image: ")[1].split("\n")[0], "null"))
    made = bank("init", "./imageless", "predict", "-o", "new.yaml")
    assert made.returncode == 0, made.stderr
    assert made.stderr == "new.yaml: written; set every ??? in it, then taospec validate new.yaml\n"
    file = tmp_path / "new.yaml"
    assert "image: ???  # tao-train-odd names no image for predict" in file.read_text()
    assert invalid(bank, file)[0] == (
        f"{file}:12:8: $.image: not set yet (???): set image: to the container image to run, "
        "a full reference (registry/repository:tag) or {versions_key: <a key of versions.yaml>}"
    )
    said = bank("init", "tao-train-odd", "predict", "-o", "full.yaml").stderr
    assert said == "full.yaml: written; nothing in it to fill in; taospec validate full.yaml\n"


def pipeline(tmp_path: Path, *jobs: str) -> Path:
    """A pipeline whose defaults name the test skill and hold a whole train spec."""
    head = [
        "version: 1",
        "defaults:",
        "  skill: tao-train-tiny",
        f"  results_root: {tmp_path / 'results'}",
        "  spec:",
        "    dataset:",
        "      train_data_sources: [{image_dir: data/images, json_file: data/train.json}]",
        "      classes: [cat, dog]",
        "jobs:",
    ]
    return write(tmp_path / "pipeline.yaml", "\n".join([*head, *jobs]) + "\n")


def test_a_pipeline_names_the_target_a_value_its_template_left_unset_is_for(
    bank: Runner, tmp_path: Path
) -> None:
    # the problem said $.spec.evaluate.checkpoint, which named none of the file's targets
    file = pipeline(
        tmp_path,
        "  train: {action: train}",
        "  check: {action: evaluate, spec: {dataset: {test_data_sources: {image_dir: /t}}}}",
    )
    refused = [line for line in invalid(bank, file) if ".checkpoint:" in line]
    assert refused == [
        f"{file}:3:10: $.jobs.check.spec.evaluate.checkpoint: not set yet (???): set "
        "spec.evaluate.checkpoint in the job file's spec (the value comes from "
        f"{BANK / 'skills/models/tao-train-tiny/references/spec_template_evaluate.yaml'})"
    ]


def test_a_warning_names_its_target_and_line_and_a_matrix_says_it_once(
    bank: Runner, tmp_path: Path
) -> None:
    # a warning named no line and no target, and came once for each value of a matrix
    file = pipeline(
        tmp_path,
        "  train:",
        "    action: train",
        "    matrix: {epochs: [1, 2, 3]}",
        "    spec: {train: {num_epochs: '{matrix.epochs}'}}",
        "  again: {action: train, spec: {train: {num_epochs: '5'}}}",
    )
    done = bank("validate", file)
    assert done.returncode == 0, done.stderr
    template = BANK / "skills/models/tao-train-tiny/references/spec_template_train.yaml"
    assert done.stderr.splitlines() == [
        f"{file}:3:10: $.jobs.train.spec.train.checkpoint_interval: warning: in "
        "tao-train-tiny's template: 0 is below the schema's minimum 1 (the value comes from "
        f"{template})",
        f"{file}:14:53: $.jobs.again.spec.train.num_epochs: warning: '5' is a string, not an "
        "integer, as it is quoted: write it without quotes (TAO may convert it, but say what "
        "you mean) (a hint from tao-train-tiny)",
        f"{file}:3:10: $.jobs.again.spec.train.checkpoint_interval: warning: in "
        "tao-train-tiny's template: 0 is below the schema's minimum 1 (the value comes from "
        f"{template})",
    ]


def _own_bank(bank: Runner, tmp_path: Path, changes: dict[str, tuple[str, str]]) -> Path:
    """A copy of the test bank in use, the first ``old`` text of each of its tiny skill's
    reference files named in ``changes`` made ``new``: the copy's references folder."""
    folder = tmp_path / "bank" / "skills" / "models" / "tao-train-tiny"
    shutil.copytree(BANK / "skills" / "models" / "tao-train-tiny", folder)
    shutil.copy(BANK / "versions.yaml", tmp_path / "bank" / "versions.yaml")
    for name, (old, new) in changes.items():
        path = folder / "references" / name
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new, 1))
    bank.env["TAO_SKILL_BANK"] = str(tmp_path / "bank")
    return folder / "references"


def _engine_plan(bank: Runner, tmp_path: Path) -> dict[str, Any]:
    """The plan of the test bank's deploy gen_trt_engine as init writes it, once the one
    value it asks for (the onnx file to read) is set."""
    made = bank("init", "tao-deploy-tiny", "gen_trt_engine", "-o", "engine.yaml")
    assert made.returncode == 0, made.stderr
    file = tmp_path / "engine.yaml"
    found = invalid(bank, file)
    assert [line.split(": ", 2)[1] for line in found] == ["$.spec.gen_trt_engine.onnx_file"]
    write(tmp_path / "export" / "model.onnx", "onnx\n")
    file.write_text(file.read_text().replace("onnx_file: ???", "onnx_file: export/model.onnx"))
    return plan(bank, file)


def test_a_deploy_workflow_s_job_runs_its_action_in_the_pinned_deploy_image(
    bank: Runner, tmp_path: Path
) -> None:
    # TAO Deploy's gen_trt_engine (the bank's tao-deploy-<model>) could not be named at all
    rendered = _engine_plan(bank, tmp_path)
    assert rendered["record"]["image"] == "registry.invalid/tao/tao-toolkit:9.9.9-deploy"
    assert rendered["record"]["network_arch"] == "tiny_net"
    launch = step(rendered, "launch")["argv"]
    assert launch[-4:] == ["tiny_net", "gen_trt_engine", "-e", "/results/stage/spec.yaml"]
    onnx = tmp_path.resolve() / "export" / "model.onnx"
    assert f"{onnx}:/inputs/0/model.onnx:ro" in launch
    assert spec_of(rendered)["results_dir"] == "/results"  # the template's <out_dir>
    assert spec_of(rendered)["gen_trt_engine"] == {
        "gpu_id": 0,
        "onnx_file": "/inputs/0/model.onnx",
        "trt_engine": "/results/tiny.engine",
        "tensorrt": {"data_type": "FP16", "max_batch_size": 8},
    }


def test_a_key_a_skill_lists_as_an_input_and_an_output_is_written_not_mounted(
    bank: Runner, tmp_path: Path
) -> None:
    # the bank's tao-deploy-centerpose and -clip list gen_trt_engine.trt_engine under both:
    # init asked for it as an input, and the engine TAO writes went to a read-only mount
    both = "      gen_trt_engine.onnx_file:\n        type: file\n"
    engine = "      gen_trt_engine.trt_engine:\n        type: file\n"
    _own_bank(bank, tmp_path, {"tao-deploy-tiny.skill_info.yaml": (both, both + engine)})
    rendered = _engine_plan(bank, tmp_path)  # init asks for the onnx file alone
    assert spec_of(rendered)["gen_trt_engine"]["trt_engine"] == "/results/tiny.engine"
    assert [w for w in step(rendered, "launch")["argv"] if w.endswith(":ro")] == [
        f"{tmp_path.resolve() / 'export' / 'model.onnx'}:/inputs/0/model.onnx:ro"
    ]


def test_a_glob_input_mounts_the_folder_its_pattern_starts_in(bank: Runner, tmp_path: Path) -> None:
    # a local_glob input (the bank's cosmos-embed mp4_urls) went into the container as the
    # host's pattern, with nothing mounted: the job saw no files
    declared = "      dataset.val_data_sources.image_dir:\n        type: "
    _own_bank(bank, tmp_path, {"skill_info.yaml": (declared + "folder", declared + "local_glob")})
    (tmp_path / "data" / "vids").mkdir(parents=True)
    (tmp_path / "data" / "images").mkdir()
    val = "    val_data_sources: {image_dir: data/vids/*.mp4}"
    file = job(tmp_path, *TRAIN[:-1], val, TRAIN[-1])
    rendered = plan(bank, file)
    assert spec_of(rendered)["dataset"]["val_data_sources"]["image_dir"] == "/inputs/2/vids/*.mp4"
    vids = tmp_path.resolve() / "data" / "vids"
    assert f"{vids}:/inputs/2/vids:ro" in step(rendered, "launch")["argv"]
    assert bank("validate", "--here", file).returncode == 0
    # a path of a file or folder input is no pattern, whatever it holds
    (tmp_path / "data" / "img[1]").mkdir()
    file.write_text(file.read_text().replace("image_dir: data/images", "image_dir: data/img[1]"))
    rendered = plan(bank, file)
    images = tmp_path.resolve() / "data" / "img[1]"
    assert f"{images}:/inputs/0/img[1]:ro" in step(rendered, "launch")["argv"]
    # an upstream's results folder is the folder a pattern below it starts in
    upstream = "{needs.train[lr=1e-4].results_dir}"
    assert _glob_start(f"{upstream}/vids/*.mp4") == (f"{upstream}/vids", "*.mp4")
    assert _glob_start(f"{upstream}/model.pth") == (f"{upstream}/model.pth", "")


def test_a_template_s_input_that_is_not_here_is_placed_at_the_skill_naming_the_template(
    bank: Runner, tmp_path: Path
) -> None:
    # it was placed at the first key of the job's spec, and told to "fix the path" the job
    # file does not hold
    default = "  pretrained_model_path: "
    changed = {"spec_template_train.yaml": (default + "''", default + "/m/t.pth")}
    template = _own_bank(bank, tmp_path, changed) / "spec_template_train.yaml"
    (tmp_path / "data" / "images").mkdir()
    file = job(tmp_path, *TRAIN)
    done = bank("validate", "--here", file)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-2] == (
        f"{file}:2:8: $.spec.train.pretrained_model_path: /m/t.pth does not exist on this "
        "machine; the Docker engine would create it as an empty root-owned directory and the "
        "job would see no data. Create it, or set spec.train.pretrained_model_path in the job "
        f"file (the value comes from {template})"
    )


def test_a_deploy_evaluate_is_checked_by_the_model_s_schema(bank: Runner, tmp_path: Path) -> None:
    lines = (
        "action: evaluate",
        "spec:",
        "  dataset: {test_data_sources: {image_dir: data}, batch_size: 2}",
        "  evaluate: {trt_engine: data/train.json, trt_engne: x}",
    )
    file = write(
        tmp_path / "job.yaml",
        "\n".join(
            ["version: 1", "skill: tao-deploy-tiny", f"results_root: {tmp_path / 'r'}", *lines]
        ),
    )
    assert invalid(bank, file) == [
        f"{file}:7:43: $.spec.evaluate.trt_engne: unknown key 'trt_engne'; did you mean "
        "'trt_engine'?"
    ]


def test_a_workflow_whose_pin_no_versions_file_holds_says_which_pin(
    bank: Runner, tmp_path: Path
) -> None:
    folder = tmp_path / "bank" / "skills" / "models" / "tao-train-tiny"
    shutil.copytree(BANK / "skills" / "models" / "tao-train-tiny", folder)
    (tmp_path / "versions.yaml").unlink()
    info = folder / "references" / "tao-deploy-tiny.skill_info.yaml"
    info.write_text(info.read_text().replace("tao_toolkit.deploy", "tao_toolkit.trt"))
    bank.env["TAO_SKILL_BANK"] = str(tmp_path / "bank")
    file = write(
        tmp_path / "job.yaml",
        f"version: 1\nskill: tao-deploy-tiny\naction: gen_trt_engine\nresults_root: {tmp_path}\n",
    )
    refused = [line for line in invalid(bank, file) if "$.skill:" in line]
    assert refused == [
        f"{file}:2:8: $.skill: skill tao-deploy-tiny names the image of gen_trt_engine by its "
        f"pin images.tao_toolkit.trt: image key 'images.tao_toolkit.trt' needs a versions.yaml "
        f"next to {file} or in a parent directory, and there is none; give image:"
    ]


def test_a_placeholder_the_template_leaves_is_a_value_not_set_yet(
    bank: Runner, tmp_path: Path
) -> None:
    # the bank's templates mark some values <out_dir>, <required> or
    # <train_data_root>/annotations.txt; they passed validate and reached TAO as paths
    made = bank("init", "tao-deploy-tiny", "evaluate", "-o", "evaluate.yaml")
    assert made.returncode == 0, made.stderr
    file = tmp_path / "evaluate.yaml"
    text = file.read_text()
    assert "    batch_size: ???  # the template leaves it for you" in text
    assert "      image_dir: ???  # input: the folder that evaluate reads" in text
    template = BANK / "skills/models/tao-train-tiny/references/spec_template_deploy_evaluate.yaml"
    left = write(
        tmp_path / "left.yaml",
        f"version: 1\nskill: tao-deploy-tiny\naction: evaluate\nresults_root: {tmp_path}\n"
        "spec: {evaluate: {trt_engine: data/train.json}}\n",
    )
    assert invalid(bank, left) == [
        f"{left}:2:8: $.spec.dataset.batch_size: not set yet (<batch_size>): set "
        f"spec.dataset.batch_size in the job file's spec (the value comes from {template})",
        f"{left}:2:8: $.spec.dataset.test_data_sources.image_dir: not set yet "
        "(<eval_data_root>): set spec.dataset.test_data_sources.image_dir in the job file's "
        f"spec (the value comes from {template})",
    ]
    filled = text.replace("batch_size: ???", "batch_size: 2").replace(
        "image_dir: ???", "image_dir: data"
    )
    file.write_text(filled.replace("trt_engine: ???", "trt_engine: data/train.json"))
    assert spec_of(plan(bank, file))["dataset"]["batch_size"] == 2
    # a value the job itself gives is its own, <...> and all
    mine = write(
        tmp_path / "mine.yaml",
        left.read_text().replace(
            "spec: {", "spec: {dataset: {test_data_sources: {image_dir: data}, batch_size: 2}, "
        )
        + "  model: {backbone: <tiny_a>}\n",
    )
    assert not [line for line in invalid(bank, mine) if "not set yet" in line]


def deploy_job(
    tmp_path: Path,
    action: str,
    spec: str,
    *words: str,
    gpus: str = "[0]",
    platform: str = "docker",
    network: str = "tiny_net",
) -> Path:
    """A job (docker unless ``platform`` says) of the test skill's TAO Deploy workflow, its
    inputs in place, its command naming ``network``."""
    write(tmp_path / "data" / "m.onnx", "onnx\n")
    command = [network, action, "-e", "{config_path}", *words]
    return write(
        tmp_path / "deploy.yaml",
        f"version: 1\nskill: tao-deploy-tiny\naction: {action}\nplatform: {platform}\n"
        f'user: "1000:1000"\ngpus: {gpus}\nresults_root: {tmp_path / "r"}\n'
        f"command: {json.dumps(command)}\nspec: {spec}\n",
    )


ENGINE_SPEC = "{gen_trt_engine: {onnx_file: data/m.onnx}}"


def test_another_action_s_section_is_checked_by_that_action_s_schema(
    bank: Runner, tmp_path: Path
) -> None:
    # TAO's config holds every action's section, and each action's schema only its own: a
    # deploy template that carries evaluate: drew "unknown key 'evaluate'" in every
    # gen_trt_engine job, and a user's evaluate: values were refused as unknown
    file = deploy_job(tmp_path, "gen_trt_engine", ENGINE_SPEC)
    done = bank("validate", file)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert spec_of(plan(bank, file))["evaluate"] == {"batch_size": 0}  # the template's, as is
    file = deploy_job(
        tmp_path,
        "gen_trt_engine",
        "{gen_trt_engine: {onnx_file: data/m.onnx}, evaluate: {batch_size: 2}}",
    )
    assert bank("validate", file).returncode == 0
    file = deploy_job(
        tmp_path,
        "gen_trt_engine",
        "{gen_trt_engine: {onnx_file: data/m.onnx}, evaluate: {batch_sise: 2}, evaluation: {}}",
    )
    spec = line_of(file, "spec:")
    text = file.read_text().splitlines()[spec - 1]
    assert invalid(bank, file) == [
        f"{file}:{spec}:{text.index('batch_sise') + 1}: $.spec.evaluate.batch_sise: unknown "
        "key 'batch_sise'; did you mean 'batch_size'?",
        f"{file}:{spec}:{text.index('evaluation') + 1}: $.spec.evaluation: unknown key "
        "'evaluation'; did you mean 'evaluate'?",
    ]


def test_a_value_not_set_yet_in_another_action_s_section_is_still_an_error(
    bank: Runner, tmp_path: Path
) -> None:
    # only the template's slips there are let go: whether TAO reads a ??? is its own
    folder = tmp_path / "skill"
    write(
        folder / "references" / "skill_info.yaml",
        "name: two\nnetwork_arch: two_net\ncontainer_image: registry.invalid/two:1\n"
        "actions:\n  train:\n    command: two_net train -e {config_path}\n"
        "    config_format: yaml\n    mode: config\nspec_templates:\n  train: template.yaml\n",
    )
    write(folder / "references" / "template.yaml", "train: {}\nevaluate:\n  checkpoint: ???\n")
    for name in ("train", "evaluate"):
        schema = {"type": "object", "properties": {name: {"type": "collection", "properties": {}}}}
        write(folder / "schemas" / f"{name}.schema.json", json.dumps(schema))
    file = write(
        tmp_path / "job.yaml",
        f"version: 1\nskill: ./skill\naction: train\nresults_root: {tmp_path / 'r'}\n",
    )
    assert invalid(bank, file) == [
        f"{file}:2:8: $.spec.evaluate.checkpoint: not set yet (???): set "
        "spec.evaluate.checkpoint in the job file's spec (the value comes from "
        f"{(folder / 'references' / 'template.yaml').resolve()})"
    ]


@pytest.mark.parametrize(
    ("gpus", "spec", "words", "said"),
    [
        ("[1]", "", [], "$.gpus: TAO's entrypoint runs pointpillars evaluate on the host's GPU 0"),
        ("[0]", "", [], ""),
        ("[1]", "gpu_ids: [1]", [], ""),  # launched on the ids it reads: the host's 1
        ("[1]", "", ["evaluate.gpu_ids=[1]"], ""),
        ("{free: 1}", "", [], "$.gpus: TAO's entrypoint launches pointpillars with torchrun"),
    ],
)
def test_a_local_torchrun_action_whose_spec_names_no_gpu_ids_runs_on_gpu_0(
    bank: Runner, tmp_path: Path, gpus: str, spec: str, words: list[str], said: str
) -> None:
    # TAO's entrypoint reads evaluate's ids from spec.evaluate, [0] where it names none,
    # and sets CUDA_VISIBLE_DEVICES to them; pointpillars' evaluate schema has no such key
    folder = tmp_path / "skill"
    write(
        folder / "references" / "skill_info.yaml",
        "name: pp\nnetwork_arch: pointpillars\ncontainer_image: registry.invalid/pp:1\n"
        "gpu_spec_key: train.num_gpus\nactions:\n  evaluate:\n"
        "    command: pointpillars evaluate -e {config_path}\n"
        "    config_format: yaml\n    mode: config\nspec_templates:\n  evaluate: t.yaml\n",
    )
    write(folder / "references" / "t.yaml", "evaluate:\n  batch_size: 1\n")
    command = ["pointpillars", "evaluate", "-e", "{config_path}", *words]
    file = write(
        tmp_path / "job.yaml",
        f"version: 1\nskill: ./skill\naction: evaluate\nplatform: local\ngpus: {gpus}\n"
        f"command: {json.dumps(command)}\nresults_root: {tmp_path / 'r'}\n"
        + (f"spec:\n  evaluate: {{{spec}}}\n" if spec else ""),
    )
    done = bank("validate", file)
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said and gpus == "[1]":
        assert (
            "(spec.evaluate names no num_gpus or gpu_ids, and no word of the command does): "
            "it launches pointpillars with torchrun, first setting CUDA_VISIBLE_DEVICES to 0 "
            "in place of the 1 gpus: gives the process; write [0], or run the job in a "
            "container"
        ) in done.stderr
    elif said:
        assert "CUDA_VISIBLE_DEVICES to 0, in place of the ids gpus: picks at submit" in (
            done.stderr
        )


@pytest.mark.parametrize(
    ("tag", "network", "action", "section", "unset"),
    [
        # TAO Deploy's gen_trt_engine reads no other action's section: OmegaConf fails on
        # a ??? only where it is read
        ("1-deploy", "two_net", "gen_trt_engine", "evaluate", False),
        ("1", "two_net", "gen_trt_engine", "evaluate", True),  # TAO PyTorch: may read any
        ("1-deploy", "oneformer", "evaluate", "inference", False),
        ("1-deploy", "oneformer", "evaluate", "export", True),  # it reads export.task
        ("1-deploy", "two_net", "gen_trt_engine", "dataset", True),  # no action's section
    ],
)
def test_a_value_tao_deploy_never_reads_need_not_be_set(
    bank: Runner, tmp_path: Path, tag: str, network: str, action: str, section: str, unset: bool
) -> None:
    folder = tmp_path / "skill"
    write(
        folder / "references" / "skill_info.yaml",
        f"name: two\nnetwork_arch: {network}\ncontainer_image: registry.invalid/two:{tag}\n"
        f"actions:\n  {action}:\n    command: {network} {action} -e {{config_path}}\n"
        f"    config_format: yaml\n    mode: config\nspec_templates:\n  {action}: t.yaml\n",
    )
    write(folder / "references" / "t.yaml", f"{action}: {{}}\n{section}:\n  checkpoint: ???\n")
    for name in (action, section):
        schema = {"type": "object", "properties": {name: {"type": "collection", "properties": {}}}}
        write(folder / "schemas" / f"{name}.schema.json", json.dumps(schema))
    file = write(
        tmp_path / "job.yaml",
        f"version: 1\nskill: ./skill\naction: {action}\nresults_root: {tmp_path / 'r'}\n",
    )
    done = bank("validate", file)
    assert done.returncode == (2 if unset else 0), done.stderr
    said = f"$.spec.{section}.checkpoint: not set yet (???): set spec.{section}.checkpoint"
    assert (said in done.stderr) is unset
    if not unset:  # the spec TAO reads holds it as written
        plan = bank("render", file)
        assert plan.returncode == 0, plan.stderr
        assert f"{section}:\n  checkpoint: ???\n" in plan.stdout


@pytest.mark.parametrize(
    ("word", "refused"),
    [
        ("gen_trt_engine.tensorrt.max_batch_size=16", False),
        ("gen_trt_engine.tensorrt.data_type=INT8", False),
        ("+gen_trt_engine.verbose=true", False),
        ("gen_trt_engine.trt_engine=/results/$(id).engine", True),
        ("gen_trt_engine.trt_engine='/results/a b.engine'", True),
        ("gen_trt_engine.trt_engine=/results/a`id`.engine", True),
        ("+gen_trt_engine.opts={a:1,b:2}", True),  # bash's brace expansion: two words
        ("gen_trt_engine.trt_engine=/results/x;id", True),
        ("gen_trt_engine.tensorrt.data_type=FP*", True),
        ("~gen_trt_engine.tensorrt.min_batch_size", True),  # bash's ~user, not Hydra's delete
        ("gen_trt_engine.gpu_id=0#0", True),
        ("+gen_trt_engine.layers=[a,b]", False),  # a glob only a file named like ...=a matches
    ],
)
def test_tao_deploy_s_entrypoint_reads_its_words_again_with_bash(
    bank: Runner, tmp_path: Path, word: str, refused: bool
) -> None:
    # TAO Deploy's entrypoint runs `bash -c '<python script> <the words>'`: a word bash
    # reads otherwise ran as shell script in the container, or split in two
    file = deploy_job(tmp_path, "gen_trt_engine", ENGINE_SPEC, word)
    done = bank("validate", file)
    assert done.returncode == (2 if refused else 0), done.stderr
    if refused:
        assert f"$.command[4]: {word!r}: TAO Deploy's entrypoint runs the words" in done.stderr
        assert "set it in spec: instead" in done.stderr


@pytest.mark.parametrize(
    ("gpus", "ids", "refused"),
    [
        ("[5]", "[0]", False),
        ("[5]", "[1]", True),
        ("[4, 5]", "[1]", False),
        ("[4, 5]", "[0, 4]", True),
    ],
)
def test_tao_deploy_runs_an_evaluate_on_the_largest_gpu_id_of_its_container(
    bank: Runner, tmp_path: Path, gpus: str, ids: str, refused: bool
) -> None:
    # TAO Deploy sets CUDA_VISIBLE_DEVICES to the largest of evaluate.gpu_ids
    spec = (
        "{dataset: {test_data_sources: {image_dir: data}, batch_size: 1}, "
        f"evaluate: {{trt_engine: data/m.onnx, gpu_ids: {ids}}}}}"
    )
    file = deploy_job(tmp_path, "evaluate", spec, gpus=gpus)
    done = bank("validate", file)
    assert done.returncode == (2 if refused else 0), done.stderr
    if refused:
        assert "$.spec.evaluate.gpu_ids: TAO Deploy runs evaluate on GPU" in done.stderr


EVALUATE_SPEC = (
    "{dataset: {test_data_sources: {image_dir: data}, batch_size: 1}, "
    "evaluate: {trt_engine: data/m.onnx}}"
)


@pytest.mark.parametrize(
    ("action", "spec", "said"),
    [
        ("gen_trt_engine", ENGINE_SPEC, "spec.gen_trt_engine.gpu_id (0)"),  # the template's
        ("gen_trt_engine", "{gen_trt_engine: {onnx_file: data/m.onnx, gpu_id: 3}}", ""),
        ("evaluate", EVALUATE_SPEC, "the largest of spec.evaluate.gpu_ids (0, where the spec"),
        ("evaluate", EVALUATE_SPEC.replace("m.onnx}", "m.onnx, gpu_ids: [3]}"), ""),
    ],
)
@pytest.mark.parametrize("network", ["tiny_net", "rtdetr"])  # TAO Deploy runs no torchrun
def test_a_local_tao_deploy_job_runs_on_the_host_gpu_its_id_names(
    bank: Runner, tmp_path: Path, action: str, spec: str, said: str, network: str
) -> None:
    # TAO Deploy's entrypoint sets CUDA_VISIBLE_DEVICES to the one GPU id it runs on, 0
    # unless the spec says: a local job given GPU 3 built its engine on GPU 0
    file = deploy_job(tmp_path, action, spec, gpus="[3]", platform="local", network=network)
    done = bank("validate", file)
    assert done.returncode == (2 if said else 0), done.stderr
    if said:
        runs = f"TAO Deploy's entrypoint sets CUDA_VISIBLE_DEVICES to the GPU it runs {action}"
        assert runs in done.stderr
        assert said in done.stderr
        assert "in place of the 3 gpus: gives the process; make it 3" in done.stderr


def test_tao_deploy_given_more_gpus_than_the_one_it_runs_on_is_warned(
    bank: Runner, tmp_path: Path
) -> None:
    # TAO Deploy's entrypoint sets num_gpus = 1 for every action
    file = deploy_job(tmp_path, "gen_trt_engine", ENGINE_SPEC, gpus="[0, 1]")
    done = bank("validate", file)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"{file}:6:7: $.gpus: warning: TAO Deploy runs gen_trt_engine on one GPU, so 1 of "
        "the 2 GPUs gpus: names would sit idle, held by this job; name one\n"
    )
    one = deploy_job(tmp_path, "gen_trt_engine", ENGINE_SPEC)
    assert bank("validate", one).stderr == ""
