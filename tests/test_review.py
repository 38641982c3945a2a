"""Reviewing job specs in git: diff, run -n's why, pre-commit hooks, CI formats, editors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT, Runner, write

OUTPUT_SCHEMA = json.loads((Path(__file__).parent / "output.schema.json").read_text())


def conforms(data: object, shape: str) -> None:
    """``data`` has the documented shape ``shape`` (a $defs entry of output.schema.json)."""
    schema = {**OUTPUT_SCHEMA, "$ref": f"#/$defs/{shape}"}
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


VERSIONS = """\
images:
  trainer: registry.example/tao/trainer:6.0.0
"""

PIPELINE = """\
version: 1
defaults:
  network_arch: classification
  platform: docker
  user: "1000:1000"
  image: {versions_key: images.trainer}
  results_root: /tmp/taospec-review-results
jobs:
  train:
    action: train
    command: train -e {config_path} results_dir={results_dir}
    spec:
      optim: {lr: 0.0001}
  evaluate:
    action: evaluate
    needs: [train]
    command: evaluate model={needs.train.results_dir}/model.pth
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a committed pipeline and its versions.yaml."""
    path = tmp_path / "repo"
    (path / "jobs").mkdir(parents=True)
    git(path, "init", "-q")
    write(path / "jobs" / "versions.yaml", VERSIONS)
    write(path / "jobs" / "pipeline.yaml", PIPELINE)
    commit(path, "first")
    return path


def in_repo(taospec: Runner, repo: Path) -> Runner:
    return Runner(taospec.env, repo)


# -- taospec diff -------------------------------------------------------------


def test_diff_of_an_unchanged_work_tree_is_empty_and_exits_0(taospec: Runner, repo: Path):
    done = in_repo(taospec, repo)("diff", "jobs/pipeline.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "jobs/pipeline.yaml: train: unchanged\njobs/pipeline.yaml: evaluate: unchanged\n"
    )


def test_diff_shows_a_changed_learning_rate_and_image_pin(taospec: Runner, repo: Path):
    spec = repo / "jobs" / "pipeline.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0003"))
    versions = repo / "jobs" / "versions.yaml"
    versions.write_text(versions.read_text().replace("6.0.0", "6.1.0"))
    done = in_repo(taospec, repo)("diff", "jobs/pipeline.yaml")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "jobs/pipeline.yaml: train: changed\n" in out
    assert "jobs/pipeline.yaml: evaluate: changed\n" in out
    assert "--- HEAD:jobs/pipeline.yaml#train\n+++ jobs/pipeline.yaml#train\n" in out
    assert "-  lr: 0.0001\n+  lr: 0.0003\n" in out
    # the image pin changed in versions.yaml: both targets show the new image
    assert out.count("+    registry.example/tao/trainer:6.1.0") == 2
    assert "JOB_ID" in out
    # the work tree was only read
    assert "6.1.0" in versions.read_text()


def test_diff_shows_what_the_record_says_where_no_command_names_it(
    taospec: Runner, repo: Path, state_dir: Path
):
    # a local job's image is in its record alone: diff said "unchanged" (exit 0) and run -n
    # showed no change, where run --check found the plan changed and ran it again
    spec = write(
        repo / "jobs" / "local.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\n"
        f"image: taospec-test/busybox:1\nresults_root: {state_dir}/r\ncommand: echo hi\n",
    )
    commit(repo, "local")
    run = in_repo(taospec, repo)
    assert run("run", "jobs/local.yaml").returncode == 0
    spec.write_text(spec.read_text().replace("busybox:1", "busybox:2"))
    done = run("diff", "jobs/local.yaml")
    assert done.returncode == 1, done.stderr
    assert "-# Recorded as: image taospec-test/busybox:1, network_arch hello" in done.stdout
    assert "+# Recorded as: image taospec-test/busybox:2, network_arch hello" in done.stdout
    shown = run("run", "-n", "jobs/local.yaml").stdout
    assert "# what changed since the last run of local:" in shown
    assert "+# Recorded as: image taospec-test/busybox:2" in shown


@pytest.mark.parametrize("side", ["revision", "work tree"])
def test_diff_refuses_a_passed_value_written_on_either_side(
    taospec: Runner, repo: Path, side: str
) -> None:
    # diff printed "-  text: <the value>"; render refuses the same file
    value = "correcthorsebattery"
    spec = repo / "jobs" / "pipeline.yaml"
    plain = spec.read_text().replace(
        "  results_root: /tmp/taospec-review-results\n",
        "  results_root: /tmp/taospec-review-results\n  env: {pass: [PLAIN_VAR]}\n",
    )
    written = plain.replace("optim: {lr: 0.0001}", f"optim: {{lr: 0.0001, note: {value}}}")
    spec.write_text(written if side == "revision" else plain)
    commit(repo, "a side")
    spec.write_text(plain if side == "revision" else written)
    for fmt in ("text", "json"):
        done = in_repo(taospec, repo)(
            "diff", "--format", fmt, "jobs/pipeline.yaml", env={"PLAIN_VAR": value}
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "holds the value of PLAIN_VAR" in done.stderr
        assert value not in done.stdout + done.stderr


def test_diff_redacts_a_committed_value_now_passed_as_the_plan_quotes_it(
    taospec: Runner, repo: Path
) -> None:
    # the old side's plan wrote the value as shlex.quote does, 'Pa'"'"'ss w0rd!42', and
    # redaction looked for it only as it is
    value = "Pa'ss w0rd!42"
    spec = repo / "jobs" / "pipeline.yaml"
    plain = spec.read_text()
    spec.write_text(plain.replace("command: train", f'command: train --note "{value}"'))
    commit(repo, "a note")
    spec.write_text(
        plain.replace(
            "  results_root: /tmp/taospec-review-results\n",
            "  results_root: /tmp/taospec-review-results\n  env: {pass: [PLAIN_VAR]}\n",
        )
    )
    for fmt in ("text", "json"):
        done = in_repo(taospec, repo)(
            "diff", "--format", fmt, "jobs/pipeline.yaml", env={"PLAIN_VAR": value}
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert "--note" in done.stdout, fmt
        assert "w0rd" not in done.stdout + done.stderr, fmt
        assert "<redacted>" in done.stdout, fmt


def test_diff_between_two_commits_reads_only_git(taospec: Runner, repo: Path):
    first = git(repo, "rev-parse", "HEAD").strip()
    spec = repo / "jobs" / "pipeline.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0005"))
    second = commit(repo, "faster")
    spec.write_text("this: [is not a job\n")  # the work tree is broken; git is not
    done = in_repo(taospec, repo)("diff", first, second, "jobs/pipeline.yaml")
    assert done.returncode == 1, done.stderr
    assert f"--- {first}:jobs/pipeline.yaml#train\n+++ {second}:jobs/pipeline.yaml#train\n" in (
        done.stdout
    )
    assert "+  lr: 0.0005\n" in done.stdout
    assert "jobs/pipeline.yaml: evaluate: unchanged" in done.stdout
    one_rev = in_repo(taospec, repo)("diff", "HEAD~1", "jobs/pipeline.yaml")
    assert one_rev.returncode == 2
    assert "jobs/pipeline.yaml:2:1: $: YAML syntax error" in one_rev.stderr
    assert "jobs/pipeline.yaml is invalid in the work tree" in one_rev.stderr


def test_diff_names_added_and_removed_targets(taospec: Runner, repo: Path):
    spec = repo / "jobs" / "pipeline.yaml"
    text = (
        spec.read_text()
        .replace("  evaluate:\n", "  export:\n")
        .replace("action: evaluate", "action: export")
    )
    spec.write_text(text)
    done = in_repo(taospec, repo)("diff", "--format", "json", "jobs/pipeline.yaml")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    conforms(data, "diff")
    statuses = {t["target"]: t["status"] for t in data["files"][0]["targets"]}
    assert statuses == {"train": "unchanged", "export": "added", "evaluate": "removed"}
    assert data["old"] == "HEAD"
    assert data["new"] is None
    assert data["changed"] is True


def test_diff_follows_a_file_git_sees_renamed(taospec: Runner, repo: Path):
    git(repo, "mv", "jobs/pipeline.yaml", "jobs/classify.yaml")
    spec = repo / "jobs" / "classify.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0002"))
    git(repo, "add", "-A")
    done = in_repo(taospec, repo)("diff", "jobs/classify.yaml")
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(
        "jobs/classify.yaml: renamed from jobs/pipeline.yaml at HEAD\n"
        "jobs/classify.yaml: train: changed\n"
        "--- HEAD:jobs/pipeline.yaml#train\n+++ jobs/classify.yaml#train\n"
    )
    assert "-  lr: 0.0001\n+  lr: 0.0002\n" in done.stdout
    assert "jobs/classify.yaml: evaluate: unchanged\n" in done.stdout
    first = git(repo, "rev-parse", "HEAD").strip()
    second = commit(repo, "rename")
    between = in_repo(taospec, repo)(
        "diff", "--format", "json", first, second, "jobs/classify.yaml"
    )
    assert between.returncode == 1, between.stderr
    data = json.loads(between.stdout)
    conforms(data, "diff")
    assert data["files"][0]["renamed_from"] == "jobs/pipeline.yaml"
    statuses = {t["target"]: t["status"] for t in data["files"][0]["targets"]}
    assert statuses == {"train": "changed", "evaluate": "unchanged"}
    # a file git does not know was moved is new: every target is added
    (repo / "jobs" / "classify.yaml").rename(repo / "jobs" / "untracked.yaml")
    moved = in_repo(taospec, repo)("diff", "jobs/untracked.yaml")
    assert moved.returncode == 1, moved.stderr
    assert "renamed" not in moved.stdout
    assert "jobs/untracked.yaml: train: added\n" in moved.stdout


def test_diff_reads_files_and_folders_with_spaces_and_non_ascii_names(taospec: Runner, repo: Path):
    # git quotes such paths in its listings ("jobs/r\303\251sum\303\251.yaml") unless told not to
    folder = repo / "jobs" / "équipe 2"
    folder.mkdir()
    write(folder / "versions.yaml", VERSIONS)
    write(folder / "résumé job.yaml", PIPELINE)
    commit(repo, "non-ascii names")
    run = in_repo(taospec, repo)
    done = run("diff", "jobs/équipe 2/résumé job.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (
        "jobs/équipe 2/résumé job.yaml: train: unchanged\n"
        "jobs/équipe 2/résumé job.yaml: evaluate: unchanged\n"
    )
    pins = folder / "versions.yaml"
    pins.write_text(VERSIONS.replace("6.0.0", "6.1.0"))
    moved = run("diff", "jobs/équipe 2/résumé job.yaml")
    assert moved.returncode == 1, moved.stderr
    assert "-    registry.example/tao/trainer:6.0.0 train \\\n" in moved.stdout
    assert "+    registry.example/tao/trainer:6.1.0 train \\\n" in moved.stdout
    assert "jobs/équipe 2/résumé job.yaml: evaluate: changed\n" in moved.stdout
    pins.write_text(VERSIONS)
    git(repo, "mv", "jobs/équipe 2/résumé job.yaml", "jobs/équipe 2/ünï cödé.yaml")
    renamed = run("diff", "jobs/équipe 2/ünï cödé.yaml")
    assert renamed.returncode == 0, renamed.stdout + renamed.stderr
    assert renamed.stdout.startswith(
        "jobs/équipe 2/ünï cödé.yaml: renamed from jobs/équipe 2/résumé job.yaml at HEAD\n"
        "jobs/équipe 2/ünï cödé.yaml: train: unchanged\n"
    )


SINGLE = """\
version: 1
network_arch: hello
action: greet
platform: local
image: {versions_key: images.trainer}
user: "1000:1000"
results_root: /tmp/taospec-review-results
command: echo hello
"""


def test_diff_of_a_versions_file_compares_the_job_files_beside_it(taospec: Runner, repo: Path):
    # what CI passes when it diffs the files a change touched: a moved pin and nothing else
    jobs = repo / "jobs"
    write(jobs / "gone.yml", SINGLE)
    write(jobs / "configs" / "nested.yaml", PIPELINE)  # not beside it: its own folder
    commit(repo, "more jobs")
    (jobs / "gone.yml").unlink()
    write(jobs / "new.yaml", PIPELINE)
    (jobs / "versions.yaml").write_text(VERSIONS.replace("6.0.0", "6.1.0"))
    run = in_repo(taospec, repo)
    done = run("diff", "jobs/versions.yaml")
    assert done.returncode == 1, done.stderr
    headers = [line for line in done.stdout.splitlines() if line.startswith("jobs/")]
    assert headers == [
        "jobs/gone.yml: gone: removed",
        "jobs/new.yaml: train: added",
        "jobs/new.yaml: evaluate: added",
        "jobs/pipeline.yaml: train: changed",
        "jobs/pipeline.yaml: evaluate: changed",
    ]
    assert "+    registry.example/tao/trainer:6.1.0 train \\\n" in done.stdout
    second = commit(repo, "move the pin")
    data = json.loads(
        run("diff", "--format", "json", "HEAD~1", second, "jobs/versions.yaml").stdout
    )
    conforms(data, "diff")
    assert [f["file"] for f in data["files"]] == [
        "jobs/gone.yml",
        "jobs/new.yaml",
        "jobs/pipeline.yaml",
    ]
    inside = Runner(taospec.env, jobs)("diff", "HEAD~1", "versions.yaml", "pipeline.yaml")
    assert inside.returncode == 1, inside.stderr
    assert [line for line in inside.stdout.splitlines() if line[0] not in " +-@"] == [
        "gone.yml: gone: removed",
        "new.yaml: train: added",
        "new.yaml: evaluate: added",
        "pipeline.yaml: train: changed",
        "pipeline.yaml: evaluate: changed",
    ]


def test_diff_of_a_renamed_file_names_the_old_path_when_that_side_is_invalid(
    taospec: Runner, repo: Path
):
    spec = repo / "jobs" / "pipeline.yaml"
    good = spec.read_text()
    spec.write_text(good.replace("action: train", "action: train\n    gpus: [zero]"))
    commit(repo, "broken")
    git(repo, "mv", "jobs/pipeline.yaml", "jobs/classify.yaml")
    (repo / "jobs" / "classify.yaml").write_text(good)
    git(repo, "add", "-A")
    done = in_repo(taospec, repo)("diff", "jobs/classify.yaml")
    assert done.returncode == 2
    assert "jobs/classify.yaml is invalid at HEAD (as jobs/pipeline.yaml)" in done.stderr
    assert done.stdout == ""


SKILL_BANK = Path(__file__).resolve().parent / "skills"
TINY = SKILL_BANK / "skills" / "models" / "tao-train-tiny"


def skill_job(repo: Path, skill: str) -> Path:
    """A docker job in ``repo`` that trains with the tiny skill named ``skill``."""
    (repo / "data" / "images").mkdir(parents=True, exist_ok=True)
    write(repo / "data" / "t.json", "{}\n")
    return write(
        repo / "jobs" / "t.yaml",
        f"""\
version: 1
skill: {skill}
action: train
platform: docker
user: "1000:1000"
results_root: /tmp/taospec-review-results
spec:
  dataset:
    train_data_sources: [{{image_dir: {repo}/data/images, json_file: {repo}/data/t.json}}]
    classes: [a]
""",
    )


def test_diff_reads_a_skill_folder_in_the_repository_at_each_revision(taospec: Runner, repo: Path):
    # both sides read the skill from the work tree: "unchanged" while render showed the change
    shutil.copytree(TINY, repo / "skills" / "tiny")
    skill_job(repo, "../skills/tiny")
    first = commit(repo, "skill")
    info = repo / "skills" / "tiny" / "references" / "skill_info.yaml"
    template = repo / "skills" / "tiny" / "references" / "spec_template_train.yaml"
    info.write_text(info.read_text().replace("tiny_net train -e", "tiny_net train --evil -e"))
    template.write_text(template.read_text().replace("  depth: 2", "  depth: 5"))
    run = in_repo(taospec, repo)
    done = run("diff", "jobs/t.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "jobs/t.yaml: t: changed\n" in done.stdout
    assert "-  depth: 2\n+  depth: 5\n" in done.stdout
    assert "+    --evil \\\n" in done.stdout
    assert "outside the repository" not in done.stdout
    second = commit(repo, "evil")
    info.write_text("not: [a skill\n")  # the work tree is broken; git is not
    between = run("diff", first, second, "jobs/t.yaml")
    assert between.returncode == 1, between.stdout + between.stderr
    assert "-  depth: 2\n+  depth: 5\n" in between.stdout
    assert "+    --evil \\\n" in between.stdout
    same = run("diff", second, second, "jobs/t.yaml")
    assert (same.returncode, same.stdout) == (0, "jobs/t.yaml: t: unchanged\n"), same.stderr
    # a skill the revision does not have is a problem at that revision's skill: line
    shutil.rmtree(repo / "skills")
    third = commit(repo, "no skill")
    gone = run("diff", second, third, "jobs/t.yaml")
    assert gone.returncode == 2
    assert f"jobs/t.yaml:2:8: $.skill: skill '../skills/tiny': {third}:skills/tiny/" in (
        gone.stderr
    )
    assert f"jobs/t.yaml is invalid at {third}" in gone.stderr


def test_diff_says_a_skill_outside_the_repository_is_read_as_it_is_now(taospec: Runner, repo: Path):
    skill_job(repo, "tao-train-tiny")
    commit(repo, "skill")
    run = in_repo(taospec, repo)
    env = {"TAO_SKILL_BANK": str(SKILL_BANK)}
    note = (
        f"jobs/t.yaml: skill tao-train-tiny read from {TINY}, outside the repository: "
        "the same on both sides\n"
    )
    done = run("diff", "jobs/t.yaml", env=env)
    assert (done.returncode, done.stdout) == (0, note + "jobs/t.yaml: t: unchanged\n"), done.stderr
    data = json.loads(run("diff", "--format", "json", "jobs/t.yaml", env=env).stdout)
    conforms(data, "diff")
    assert data["files"][0]["notes"] == [note.removeprefix("jobs/t.yaml: ").rstrip("\n")]


def test_diff_reads_a_deploy_workflow_of_a_bank_in_the_repository_at_each_revision(
    taospec: Runner, repo: Path
):
    # tao-deploy-<model> is a file in a model's folder, not a folder of its own
    shutil.copytree(SKILL_BANK, repo / "bank")
    references = repo / "bank" / "skills" / "models" / "tao-train-tiny" / "references"
    write(repo / "export" / "m.onnx", "onnx\n")
    write(
        repo / "jobs" / "e.yaml",
        "version: 1\nskill: tao-deploy-tiny\naction: gen_trt_engine\nplatform: docker\n"
        f'user: "1000:1000"\nresults_root: /tmp/taospec-review-results\n'
        f"spec: {{gen_trt_engine: {{onnx_file: {repo}/export/m.onnx}}}}\n",
    )
    first = commit(repo, "deploy job")
    template = references / "spec_template_deploy_gen_trt_engine.yaml"
    template.write_text(template.read_text().replace("data_type: FP16", "data_type: INT8"))
    second = commit(repo, "int8")
    template.unlink()  # the work tree has no template; both revisions do
    env = {"TAO_SKILL_BANK": str(repo / "bank")}
    done = in_repo(taospec, repo)("diff", first, second, "jobs/e.yaml", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "outside the repository" not in done.stdout
    assert "-    data_type: FP16\n+    data_type: INT8\n" in done.stdout


HOST_JOB = """\
version: 1
network_arch: h
action: train
platform: {platform}
image: {{versions_key: images.trainer}}
results_root: /tmp/taospec-review-results
user: host
command: echo hi
"""


def test_diff_compares_user_host_jobs_as_a_named_stand_in_whoever_runs_it(
    taospec: Runner, repo: Path
):
    # as root (CI) diff was refused, advising --user, an option diff does not have
    spec = write(repo / "jobs" / "h.yaml", HOST_JOB.format(platform="docker"))
    commit(repo, "host job")
    spec.write_text(spec.read_text().replace("echo hi", "echo bye"))
    run = in_repo(taospec, repo)
    done = run("diff", "jobs/h.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(
        "jobs/h.yaml: user: host shown as 1000:1000 (host-user), a stand-in for whoever "
        "runs the job\njobs/h.yaml: h: changed\n"
    )
    assert "-    registry.example/tao/trainer:6.0.0 echo hi\n" in done.stdout
    assert "+    registry.example/tao/trainer:6.0.0 echo bye\n" in done.stdout
    data = json.loads(run("diff", "--format", "json", "jobs/h.yaml").stdout)
    conforms(data, "diff")
    assert data["files"][0]["notes"] == [
        "user: host shown as 1000:1000 (host-user), a stand-in for whoever runs the job"
    ]


def test_diff_places_a_plan_refusal_at_its_line_once(taospec: Runner, repo: Path):
    # "jobs/h.yaml: jobs/h.yaml: ..." with no line, where render gives one
    write(repo / "jobs" / "h.yaml", HOST_JOB.format(platform="docker"))
    commit(repo, "host job")
    env = {"DOCKER_HOST": "tcp://admin:hunter2secret@engine.example:2376"}
    done = in_repo(taospec, repo)("diff", "jobs/h.yaml", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("jobs/h.yaml:1:1: $: $DOCKER_HOST ("), done.stderr
    assert "jobs/h.yaml: jobs/h.yaml" not in done.stderr
    assert "hunter2secret" not in done.stderr
    assert "jobs/h.yaml is invalid at HEAD" in done.stderr
    rendered = in_repo(taospec, repo)("render", "--user", "1000:1000", "jobs/h.yaml", env=env)
    assert rendered.returncode == 2
    assert rendered.stderr.startswith("jobs/h.yaml:1:1: $: $DOCKER_HOST ("), rendered.stderr


def test_diff_with_an_invalid_revision_says_which(taospec: Runner, repo: Path):
    spec = repo / "jobs" / "pipeline.yaml"
    good = spec.read_text()
    spec.write_text(good.replace("action: train", "action: train\n    gpus: [zero]"))
    commit(repo, "broken")
    spec.write_text(good)
    done = in_repo(taospec, repo)("diff", "jobs/pipeline.yaml")
    assert done.returncode == 2
    assert "jobs/pipeline.yaml:11:12: $.jobs.train.gpus[0]: 'zero' is not valid" in done.stderr
    assert "jobs/pipeline.yaml is invalid at HEAD" in done.stderr
    assert done.stdout == ""


def test_diff_with_a_revision_git_does_not_know_says_so(taospec: Runner, repo: Path):
    run = in_repo(taospec, repo)
    done = run("diff", "HEAD~9", "jobs/pipeline.yaml")
    assert done.returncode == 2
    assert done.stderr == (
        "taospec: HEAD~9: no such file at HEAD or in the work tree, nor a revision git knows\n"
    )
    # a second word that is neither was said to be no file alone
    second = run("diff", "HEAD", "HEAD~9", "jobs/pipeline.yaml")
    assert second.stderr == (
        "taospec: HEAD~9: no such file at HEAD or in the work tree, nor a revision git knows\n"
    )
    alone = run("diff", "jobs/gone.yaml")
    assert alone.stderr == "taospec: jobs/gone.yaml: no such file at HEAD or in the work tree\n"


@pytest.mark.parametrize("where", ["outside git", "another repository"])
def test_diff_reads_a_revision_in_the_repository_of_the_files_named(
    taospec: Runner, repo: Path, tmp_path: Path, where: str
) -> None:
    # the first word was judged a revision in the repository of the folder diff runs in:
    # from outside git it became a file ("HEAD~1: not in a git repository"), and from
    # another repository a revision that repository lacks was refused there
    first = git(repo, "rev-parse", "HEAD").strip()
    spec = repo / "jobs" / "pipeline.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0005"))
    commit(repo, "faster")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    if where == "another repository":
        git(cwd, "init", "-q")
        (cwd / "x").write_text("x\n")
        commit(cwd, "only")
    for rev in ("HEAD~1", first):
        done = Runner(taospec.env, cwd)("diff", rev, "HEAD", spec)
        assert done.returncode == 1, done.stderr
        assert f"--- {rev}:jobs/pipeline.yaml#train\n+++ HEAD:jobs/pipeline.yaml#train\n" in (
            done.stdout
        )
        assert "-  lr: 0.0001\n+  lr: 0.0005\n" in done.stdout


def test_diff_takes_revisions_before_a_double_dash_as_git_diff_does(taospec: Runner, repo: Path):
    # click ended its options at "--" and dropped it: a revision named like a file in the
    # work tree was read as that file, and an unknown one as a missing file
    git(repo, "branch", "before")
    spec = repo / "jobs" / "pipeline.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0005"))
    (repo / "before").write_text("a file named like the branch\n")
    run = in_repo(taospec, repo)
    done = run("diff", "before", "--", "jobs/pipeline.yaml")
    assert done.returncode == 1, done.stderr
    assert "--- before:jobs/pipeline.yaml#train\n+++ jobs/pipeline.yaml#train\n" in done.stdout
    assert "-  lr: 0.0001\n+  lr: 0.0005\n" in done.stdout
    both = run("diff", "--format", "json", "before", "HEAD", "--", "jobs/pipeline.yaml")
    assert both.returncode == 0, both.stderr
    assert (json.loads(both.stdout)["old"], json.loads(both.stdout)["new"]) == ("before", "HEAD")
    unknown = run("diff", "HEAD~9", "--", "jobs/pipeline.yaml")
    assert unknown.returncode == 2
    assert unknown.stderr == f"taospec: HEAD~9: not a revision of the git repository at {repo}\n"
    # after "--" every word is a file, even one git knows as a revision
    files = run("diff", "--", "before", "jobs/pipeline.yaml")
    assert files.returncode == 2
    assert files.stderr.startswith("before:1:1: $: "), files.stderr
    assert "taospec diff: before is invalid in the work tree" in files.stderr
    # a file missing after "--" was said to be perhaps "a revision git knows" too
    missing = run("diff", "--", "gone.yaml", "jobs/pipeline.yaml")
    assert missing.returncode == 2
    assert missing.stderr == "taospec: gone.yaml: no such file at HEAD or in the work tree\n"


def test_diff_in_a_repository_with_no_commit_says_so(taospec: Runner, tmp_path: Path) -> None:
    # a new repository's first diff said only "HEAD: not a revision"
    fresh = tmp_path / "fresh"
    (fresh / "jobs").mkdir(parents=True)
    git(fresh, "init", "-q")
    write(fresh / "jobs" / "versions.yaml", VERSIONS)
    write(fresh / "jobs" / "pipeline.yaml", PIPELINE)
    done = in_repo(taospec, fresh)("diff", "jobs/pipeline.yaml")
    assert done.returncode == 2
    assert done.stderr == (
        f"taospec: HEAD: not a revision of the git repository at {fresh}, which has no commit "
        "yet: commit the job files, then diff compares with that\n"
    )


def test_diff_in_a_shallow_clone_says_it_may_lack_the_revision(
    taospec: Runner, repo: Path, tmp_path: Path
) -> None:
    # CI checks out one commit: a revision before it was only "not a revision git knows"
    spec = repo / "jobs" / "pipeline.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0005"))
    commit(repo, "faster")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    run = in_repo(taospec, clone)
    hint = (
        ", a shallow clone that may lack it (git fetch --unshallow, or a deeper fetch, brings it)"
    )
    guessed = run("diff", "HEAD~1", "jobs/pipeline.yaml")
    assert guessed.returncode == 2
    nor = "nor a revision git knows"
    assert (
        guessed.stderr
        == f"taospec: HEAD~1: no such file at HEAD or in the work tree, {nor}{hint}\n"
    )
    named = run("diff", "HEAD~1", "HEAD", "--", "jobs/pipeline.yaml")
    assert named.returncode == 2
    assert named.stderr == (
        f"taospec: HEAD~1: not a revision of the git repository at {clone}{hint}\n"
    )
    assert guessed.stdout == named.stdout == ""
    git(clone, "fetch", "-q", "--unshallow")
    done = run("diff", "HEAD~1", "HEAD", "jobs/pipeline.yaml")
    assert done.returncode == 1, done.stderr
    assert "-  lr: 0.0001\n+  lr: 0.0005\n" in done.stdout
    # a full clone says nothing of depth
    assert "shallow" not in in_repo(taospec, repo)("diff", "HEAD~5", "jobs/pipeline.yaml").stderr


def test_diff_of_a_folder_says_it_is_one(taospec: Runner, repo: Path):
    # git show REV:jobs prints the folder's listing, which was read as a job file
    # ("holds a single str value")
    run = in_repo(taospec, repo)
    for args in (["jobs"], ["HEAD", "HEAD", "jobs"]):
        done = run("diff", *args)
        assert done.returncode == 2
        assert done.stderr == (
            "jobs:1:1: $: is a directory, not a job file\ntaospec diff: jobs is invalid at HEAD\n"
        )
        assert done.stdout == ""


def test_diff_of_a_file_at_neither_revision_names_both(taospec: Runner, repo: Path):
    # between two revisions the second side is no work tree
    done = in_repo(taospec, repo)("diff", "HEAD", "HEAD", "jobs/gone.yaml")
    assert done.returncode == 2
    assert done.stderr == "taospec: jobs/gone.yaml: no such file at HEAD or at HEAD\n"


def test_diff_of_revisions_alone_asks_for_a_job_file(taospec: Runner, repo: Path):
    # `taospec diff main HEAD $(git diff --name-only main -- jobs)` where no job file
    # changed: the last revision was read as a file, "HEAD: no such file at ..."
    run = in_repo(taospec, repo)
    for revs in (["HEAD"], ["HEAD", "HEAD"]):
        done = run("diff", *revs)
        assert done.returncode == 2
        assert done.stderr == (
            "taospec: diff: name at least one job file (after --, an empty list compares nothing)\n"
        ), revs
        assert done.stdout == ""


def test_diff_of_an_empty_list_after_dashes_compares_nothing(taospec: Runner, repo: Path):
    # `taospec diff main HEAD -- $(git diff --name-only main -- jobs)`, the README's CI
    # step, failed (exit 2) on every change that touched no job file
    run = in_repo(taospec, repo)
    done = run("diff", "HEAD", "HEAD", "--")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == "taospec diff: no job file named after --: nothing compared\n"
    as_json = run("diff", "--format", "json", "HEAD", "--")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"old": "HEAD", "new": None, "changed": False,
                                          "files": []}  # fmt: skip
    unknown = run("diff", "HEAD~9", "HEAD", "--")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("taospec: HEAD~9: not a revision"), unknown.stderr


def test_diff_reads_a_job_file_committed_as_a_symbolic_link_through_it(
    taospec: Runner, repo: Path
) -> None:
    # git show REV:link prints the link's target, which was read as the job file
    (repo / "jobs" / "alias.yaml").symlink_to("pipeline.yaml")
    commit(repo, "an alias")
    spec = repo / "jobs" / "pipeline.yaml"
    spec.write_text(spec.read_text().replace("lr: 0.0001", "lr: 0.0005"))
    done = in_repo(taospec, repo)("diff", "jobs/alias.yaml")
    assert done.returncode == 1, done.stderr
    assert "--- HEAD:jobs/alias.yaml#train\n+++ jobs/alias.yaml#train\n" in done.stdout
    assert "-  lr: 0.0001\n+  lr: 0.0005\n" in done.stdout
    assert "jobs/alias.yaml: evaluate: unchanged\n" in done.stdout
    for name, target in (("out.yaml", "/etc/hostname"), ("loop.yaml", "loop.yaml")):
        (repo / "jobs" / name).symlink_to(target)
        commit(repo, name)
        refused = in_repo(taospec, repo)("diff", "HEAD", "HEAD", f"jobs/{name}")
        assert refused.returncode == 2
        assert refused.stderr == (
            f"jobs/{name}: a symbolic link at HEAD that leads out of the repository or round a "
            f"loop\ntaospec diff: jobs/{name} is invalid at HEAD\n"
        )


def test_diff_outside_git_is_refused(taospec: Runner, tmp_path: Path):
    outside = tmp_path / "plain"
    outside.mkdir()
    write(outside / "versions.yaml", VERSIONS)
    write(outside / "job.yaml", PIPELINE)
    done = Runner(taospec.env, outside)("diff", "job.yaml")
    assert done.returncode == 2
    assert "not in a git repository" in done.stderr


# -- run -n shows why ---------------------------------------------------------


def local_job(tmp_path: Path, lr: str) -> Path:
    lines = [
        "version: 1",
        "network_arch: hello",
        "action: greet",
        "platform: local",
        "image: busybox:1",
        f"results_root: {tmp_path / 'results'}",
        "command: sh -c 'cat {config_path} > {results_dir}/out.txt'",
        f"spec: {{optim: {{lr: {lr}}}}}",
    ]
    return write(tmp_path / "job.yaml", "\n".join(lines) + "\n")


def test_dry_run_shows_how_the_plan_changed_since_the_last_job(taospec: Runner, tmp_path: Path):
    spec = local_job(tmp_path, "0.1")
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    assert taospec("run", "-n", spec).stdout.startswith("skip")
    local_job(tmp_path, "0.2")
    dry = taospec("run", "-n", spec)
    assert dry.returncode == 0, dry.stderr
    assert "run   job  plan changed" in dry.stdout
    assert "# what changed since the last run of job:" in dry.stdout
    assert f"--- {job_id} (last run)\n+++ job (now)\n" in dry.stdout
    assert "-  lr: 0.1\n+  lr: 0.2\n" in dry.stdout
    # the old job's id is shown as $JOB_ID, so only the real change shows
    assert job_id not in dry.stdout.split("(last run)")[1]

    as_json = taospec("run", "-n", "--json", spec)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    conforms(data, "run_dry")
    decision = data["decisions"][0]
    assert (decision["target"], decision["run"], decision["reason"]) == (
        "job",
        True,
        "plan changed",
    )
    assert "+  lr: 0.2\n" in decision["changes"]
    assert decision["plan"]["job_id"] is None

    refused = taospec("run", "--json", spec)
    assert refused.returncode == 2
    assert "--json goes with -n" in refused.stderr

    listed = taospec("ls", "--json")
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["id"] for r in lines] == [job_id]
    for line in lines:
        conforms(line, "record")
    assert lines[0]["state"] == "COMPLETE"
    shown = taospec("show", "--json", job_id)
    assert shown.returncode == 0, shown.stderr
    conforms(json.loads(shown.stdout), "record")
    plan = taospec("show", "--json", "--plan", job_id)
    assert json.loads(plan.stdout)["job_id"] == job_id
    conforms(json.loads(plan.stdout), "plan")


# -- validate formats ----------------------------------------------------------


def test_dry_run_redacts_a_value_the_last_job_wrote_that_this_one_passes(
    taospec: Runner, tmp_path: Path
) -> None:
    # run -n printed the last job's plan, which held the value, as the change since then
    value = "Pa'ss w0rd!42"
    spec = local_job(tmp_path, "0.1")
    plain = spec.read_text()
    spec.write_text(plain.replace("command: sh -c", f'command: echo --note "{value}" && sh -c'))
    done = taospec("run", spec)
    assert done.returncode == 0, done.stderr
    spec.write_text(plain + "env: {pass: [PLAIN_VAR]}\n")
    for json_flag in ((), ("--json",)):
        dry = taospec("run", "-n", *json_flag, spec, env={"PLAIN_VAR": value})
        assert dry.returncode == 0, dry.stderr
        assert "(last run)" in dry.stdout
        assert "<redacted>" in dry.stdout, json_flag
        assert "w0rd" not in dry.stdout + dry.stderr, json_flag


def test_validate_formats_for_ci(taospec: Runner, repo: Path):
    bad = write(repo / "jobs" / "bad.yaml", PIPELINE.replace("platform: docker", "platform: moon"))
    run = in_repo(taospec, repo)
    text = run("validate", "jobs/pipeline.yaml", "jobs/bad.yaml")
    assert text.returncode == 2
    assert "jobs/bad.yaml:4:13: $.defaults.platform:" in text.stderr

    github = run("validate", "--format", "github", "jobs/pipeline.yaml", "jobs/bad.yaml")
    assert github.returncode == 2
    lines = github.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("::error file=jobs/bad.yaml,line=4,col=13::$.defaults.platform: ")
    # GitHub finds an annotation's file from the top of the checkout, whichever folder the
    # step ran in: from jobs/, file=bad.yaml annotated no line of the pull request
    for where, named in (("jobs", "bad.yaml"), ("jobs", "../jobs/bad.yaml"), (".", str(bad))):
        in_step = Runner({**taospec.env, "GITHUB_WORKSPACE": str(repo)}, repo / where)
        annotated = in_step("validate", "--format", "github", named).stdout
        assert annotated.startswith("::error file=jobs/bad.yaml,line=4,col=13::"), annotated
    outside = write(repo / "x.yaml", bad.read_text())  # outside the checkout: as given
    elsewhere = Runner({**taospec.env, "GITHUB_WORKSPACE": str(repo / "jobs")}, repo)
    annotated = elsewhere("validate", "--format", "github", str(outside)).stdout
    assert annotated.startswith(f"::error file={outside},line=4,col=13::"), annotated
    outside.unlink()

    as_json = run("validate", "--format", "json", "jobs/pipeline.yaml", str(bad))
    assert as_json.returncode == 2
    files = [json.loads(line) for line in as_json.stdout.splitlines()]
    for item in files:
        conforms(item, "validate")
    assert [(f["file"], f["valid"]) for f in files] == [
        ("jobs/pipeline.yaml", True),
        (str(bad), False),
    ]
    assert files[1]["problems"][0]["line"] == 4
    assert files[1]["problems"][0]["path"] == "$.defaults.platform"


# -- editors and shells ----------------------------------------------------------


def test_schema_path_names_the_schema_file(taospec: Runner):
    done = taospec("schema", "--path")
    assert done.returncode == 0
    path = Path(done.stdout.strip())
    assert path.name == "job.schema.json"
    assert path.read_text() == taospec("schema").stdout


def complete(runner: Runner, shell: str, words: str) -> list[str]:
    """What the real command answers a shell asking to complete ``words``."""
    env = {
        "_TAOSPEC_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    if shell == "fish":  # fish passes the word being completed itself
        env["COMP_CWORD"] = words.rpartition(" ")[2]
    done = runner(env=env)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_shell_completion_offers_job_ids_and_targets(taospec: Runner, repo: Path, tmp_path):
    run = in_repo(taospec, repo)
    assert complete(run, "bash", "taospec run jobs/pipeline.yaml ") == [
        "plain,train",
        "plain,evaluate",
    ]
    assert complete(run, "bash", "taospec render jobs/pipeline.yaml ev") == ["plain,evaluate"]
    assert complete(run, "bash", "taospec graph missing.yaml ") == []
    ids = []
    for lr in ("0.1", "0.2"):
        done = taospec("run", local_job(tmp_path, lr))
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.split()[0])
    for verb in ("status", "logs", "cancel", "show"):
        assert complete(taospec, "bash", f"taospec {verb} ") == [
            f"plain,{ids[1]}",
            f"plain,{ids[0]}",
        ]
    zsh = complete(taospec, "zsh", "taospec status hel")
    assert zsh[:3] == ["plain", ids[1], "COMPLETE local"]
    fish = complete(taospec, "fish", "taospec show ")
    assert fish[0] == f"plain,{ids[1]}\tCOMPLETE local"
    script = taospec(env={"_TAOSPEC_COMPLETE": "bash_source"})
    assert "_TAOSPEC_COMPLETE=bash_complete" in script.stdout


def test_validate_of_a_versions_file_validates_the_job_files_beside_it(taospec: Runner, repo: Path):
    # a commit that broke every job through versions.yaml alone was never checked
    write(repo / "jobs" / "configs" / "nested.yaml", "not: [a job\n")  # not beside it
    run = in_repo(taospec, repo)
    done = run("validate", "jobs/versions.yaml", "jobs/pipeline.yaml")
    assert (done.returncode, done.stdout) == (0, "jobs/pipeline.yaml: ok\n"), done.stderr
    versions = repo / "jobs" / "versions.yaml"
    versions.write_text(versions.read_text().replace("example/tao", "example/TAO"))
    broken = run("validate", "-q", "jobs/versions.yaml")
    assert broken.returncode == 2
    assert broken.stderr.startswith("jobs/pipeline.yaml:6:25: $.defaults.image.versions_key: ")
    assert "1 of 1 job files is invalid" in broken.stderr


def test_the_validate_hook_takes_the_versions_file_of_the_jobs_it_checks():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "taospec-validate"]
    for path in ("jobs/versions.yaml", "jobs/train.yaml", "jobs/a.yml"):
        assert re.search(hook["files"], path), path
        assert not re.search(hook.get("exclude", "^$"), path), path
    assert not re.search(hook["files"], "jobs/configs/spec.yaml")


# -- pre-commit -----------------------------------------------------------------


@pytest.mark.slow
def test_pre_commit_hook_validates_job_files_in_another_repository(tmp_path: Path):
    pre_commit = Path(sys.executable).parent / "pre-commit"
    assert pre_commit.exists(), "pip install -e '.[test]' installs pre-commit"
    user = tmp_path / "user"
    (user / "jobs").mkdir(parents=True)
    git(user, "init", "-q")
    write(user / "jobs" / "versions.yaml", VERSIONS)
    write(user / "jobs" / "pipeline.yaml", PIPELINE)
    write(user / "deploy.sh", "#!/bin/sh\ndocker login -p hunter2-secret-value nvcr.io\n")
    commit(user, "jobs")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TAOSPEC_", "PRE_COMMIT"))},
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
    }

    def hook(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(pre_commit), "try-repo", str(ROOT), name, "--all-files"],
            cwd=user,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    passed = hook("taospec-validate")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "taospec validate" in passed.stdout
    assert "Passed" in passed.stdout

    write(user / "jobs" / "bad.yaml", PIPELINE.replace("platform: docker", "platform: moon"))
    git(user, "add", "-A")
    failed = hook("taospec-validate")
    assert failed.returncode == 1
    assert "Failed" in failed.stdout
    assert "jobs/bad.yaml:4:13: $.defaults.platform:" in failed.stdout

    # a commit that breaks the jobs through versions.yaml alone is checked too
    (user / "jobs" / "bad.yaml").unlink()
    versions = user / "jobs" / "versions.yaml"
    versions.write_text(versions.read_text().replace("example/tao", "example/TAO"))
    git(user, "add", "-A")
    staged = subprocess.run(
        [str(pre_commit), "try-repo", str(ROOT), "taospec-validate"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert staged.returncode == 1, staged.stdout + staged.stderr
    assert "jobs/pipeline.yaml:6:25: $.defaults.image.versions_key:" in staged.stdout
    git(user, "checkout", "HEAD", "--", "jobs/versions.yaml")

    linted = hook("taospec-lint")
    assert linted.returncode == 1
    assert "deploy.sh:" in linted.stdout
    assert "hunter2-secret-value" not in linted.stdout
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
