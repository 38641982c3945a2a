"""Rendering: golden plans for every example job, the seed's canonical launch, shellcheck."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from taospec import plantext, remote
from taospec.errors import InvalidInput
from taospec.identity import Identity
from taospec.loader import load_jobfile
from taospec.placeholders import JOB_ID, STAND_IN
from taospec.plan import SPEC_STEP, Step, lint_plan, plan_from_json, upstream_stand_ins
from taospec.platforms import render
from tests.conftest import Runner, load_job, taospec_command, write

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"
EXAMPLE_JOBS = sorted(p for p in (ROOT / "jobs").glob("*.yaml") if p.name != "versions.yaml")
ROOT_LAUNCHER = Identity(0, 0, (), "root")
ALICE = Identity(1000, 1000, (27, 44), "alice")
FORMATS = {
    "txt": plantext.text,
    "json": lambda plan: json.dumps(plan.to_json(), indent=2) + "\n",  # render --format json
    "sh": plantext.script,
}
UPDATE = os.environ.get("TAOSPEC_UPDATE_GOLDEN") == "1"


def rendered(path: Path, launcher: Identity = ROOT_LAUNCHER) -> dict[str, str]:
    """Every format of every target's plan (a pipeline's upstream results as stand-ins)."""
    jobfile = load_jobfile(path.relative_to(ROOT))
    plans = []
    for name in jobfile.closure():
        target = jobfile.targets[name]
        upstream = upstream_stand_ins(target.needs)
        plans.append(render(target.job, launcher=launcher, upstream=upstream))
    return {ext: "\n".join(fmt(plan) for plan in plans) for ext, fmt in FORMATS.items()}


@pytest.fixture(autouse=True)
def no_ambient_engine(tmp_path: Path, monkeypatch) -> Iterator[None]:
    """A docker plan names the engine the environment points the CLI at: here, none. An ssh
    command has taospec's ConnectTimeout unless ssh's configuration sets one: here, none
    (the real ``ssh`` told to read no configuration file)."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    real = shutil.which("ssh")
    assert real
    write(tmp_path / "bin" / "ssh", f'#!/bin/sh\nexec {real} -F none "$@"\n').chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    remote._configured.cache_clear()  # asked once per process: ask this ssh
    yield
    remote._configured.cache_clear()


@pytest.mark.parametrize("path", EXAMPLE_JOBS, ids=[p.stem for p in EXAMPLE_JOBS])
@pytest.mark.parametrize("ext", sorted(FORMATS))
def test_example_job_matches_its_golden_file(path: Path, ext: str, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    text = rendered(path)[ext]
    golden = GOLDEN / f"{path.stem}.{ext}"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text()


def test_seed_canonical_launch_has_the_seeds_flags(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    plan = render(load_job("tests/golden/seed-canonical.yaml"), launcher=ALICE)
    launch = plan.with_job_id("visual_changenet-train-0a1b2c").steps[-1]
    home = "/results/.tao-runtime/home"
    assert launch.argv == (
        "docker", "run", "-d",
        "--name", "visual_changenet-train-0a1b2c",
        "--label", "tao-job=visual_changenet-train-0a1b2c",
        "--label", "tao-owner=alice",
        "--gpus", "all",
        "--ipc=host",
        "--shm-size=8g",
        "--user", "1000:1000", "--group-add", "27", "--group-add", "44",
        "-v", "/host/results/visual_changenet-train-0a1b2c:/results",
        "-v", "/host/data:/data",
        "-e", f"HOME={home}",
        "-e", "USER=alice", "-e", "LOGNAME=alice",
        "-e", f"XDG_CACHE_HOME={home}/.cache",
        "-e", f"HF_HOME={home}/.cache/huggingface",
        "-e", f"TORCH_HOME={home}/.cache/torch",
        "-e", f"TRITON_CACHE_DIR={home}/.cache/triton",
        "-e", f"TORCHINDUCTOR_CACHE_DIR={home}/.cache/torchinductor",
        "-e", f"MPLCONFIGDIR={home}/.cache/matplotlib",
        "-e", "HF_TOKEN", "-e", "NGC_KEY",
        "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "visual_changenet", "train", "-e", "/results/stage/spec.yaml",
    )  # fmt: skip
    assert [s.name for s in plan.steps] == ["prepare", "login", "pull", "launch"]
    assert plan.steps[1].stdin_env == "NGC_KEY"
    assert "--password-stdin" in plan.steps[1].argv


def test_gpu_ids_carry_the_literal_quotes_docker_needs(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    launch = render(load_job("jobs/train.yaml"), launcher=ROOT_LAUNCHER).steps[-1]
    assert launch.argv[launch.argv.index("--gpus") + 1] == '"device=0,1"'
    assert "--gpus '\"device=0,1\"'" in plantext.command_line(launch)


def test_dry_run_plan_and_submitted_plan_differ_only_by_the_id(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    job = load_job("jobs/train.yaml")
    reviewed = render(job, launcher=ROOT_LAUNCHER)
    submitted = render(job, job_id="visual_changenet-train-abc123", launcher=ROOT_LAUNCHER)
    assert reviewed.with_job_id("visual_changenet-train-abc123") == submitted
    assert reviewed.digest() == submitted.digest()
    assert JOB_ID not in json.dumps(submitted.to_json())


DOLLARS_COMMAND = (
    "command: [sh, -c, 'printf \"[%s]\\\\n\" \"$@\"; exit 1', sh, '${{JOB_ID}}', '{job_id}',\n"
    "          '$${{JOB_ID}}', '$HOME ${{HOME:-x}} $$', '$${{x}}{job_id}']\n"
)
"""Literal ``${JOB_ID}`` text beside the job id, and other ``$``s, as a job's command."""


def dollars_job(folder: Path) -> Path:
    return write(
        folder / "job.yaml",
        "version: 1\nnetwork_arch: a\nplatform: local\naction: b\nimage: busybox:1\n"
        f"results_root: {folder / 'results'}\n" + DOLLARS_COMMAND,
    )


def test_a_json_plan_tells_literal_dollar_text_from_a_stand_in_and_reads_back(
    tmp_path: Path,
) -> None:
    plan = render(load_job(dollars_job(tmp_path)), launcher=ALICE)
    words = ["${JOB_ID}", JOB_ID, "$${JOB_ID}", "$HOME ${HOME:-x} $$", "$${x}" + JOB_ID]
    assert list(plan.steps[-1].argv[-5:]) == words
    argv = plan.to_json()["steps"][-1]["argv"]
    assert list(argv[-5:]) == [
        "$${JOB_ID}",
        "${JOB_ID}",
        "$$$${JOB_ID}",
        words[3],
        "$$$${x}${JOB_ID}",
    ]
    assert plan_from_json(json.loads(json.dumps(plan.to_json()))) == plan
    submitted = plan.with_job_id("a-b-123abc")
    assert plan_from_json(submitted.to_json()) == submitted
    old = {**submitted.to_json(), "format": None}  # stored before the encoding: as written
    assert plan_from_json(old).steps[-1].argv == tuple(old["steps"][-1]["argv"])


def test_literal_dollar_text_runs_as_written_in_a_run_and_its_retry(
    taospec: Runner, tmp_path: Path
) -> None:
    spec = dollars_job(tmp_path)
    first = taospec("run", spec).stdout.split()[0]
    retried = taospec("retry", first).stdout.split()[0]  # from the stored plan
    for job_id in (first, retried):
        ran = (tmp_path / "results" / job_id / "taospec.log").read_text().splitlines()
        assert ran == [
            f"[{w}]" for w in ("${JOB_ID}", job_id, "$${JOB_ID}", "$HOME ${HOME:-x} $$")
        ] + [f"[$${{x}}{job_id}]"]
    shown = taospec("render", spec, "--format", "json").stdout
    assert json.loads(shown)["steps"][-1]["argv"][-5:-3] == ["$${JOB_ID}", "${JOB_ID}"]


def test_upstreams_whose_names_read_alike_get_stand_ins_of_their_own() -> None:
    alike = ["prep[ds=a/b]", "prep[ds=a b]", "prep[ds=é]", "prep[ds=ü]", "prep[ds=a_b]"]
    shown = [STAND_IN.sub(r"$\1", s) for s in upstream_stand_ins(alike).values()]
    assert shown == [
        "$UPSTREAM_PREP_DS_A_B",
        "$UPSTREAM_PREP_DS_A_B_2",
        "$UPSTREAM_PREP_DS",
        "$UPSTREAM_PREP_DS_2",
        "$UPSTREAM_PREP_DS_A_B_3",
    ]


def test_root_launcher_with_user_host_is_refused_for_docker(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "version: 1\nnetwork_arch: a\naction: b\nplatform: docker\nimage: busybox:1\n"
        "command: 'true'\nresults_root: /r\n"
    )
    with pytest.raises(InvalidInput, match=r"user: host would run this writable launch as root"):
        render(load_job(spec), launcher=ROOT_LAUNCHER)
    plan = render(load_job(spec), launcher=ALICE)
    assert plan.steps[-1].argv[plan.steps[-1].argv.index("--user") + 1] == "1000:1000"


def test_remote_host_prefixes_every_docker_command_and_warns(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "version: 1\nnetwork_arch: a\naction: b\nplatform: docker\nimage: busybox:1\n"
        "command: 'true'\nresults_root: /r\nuser: '1000:1000'\ndocker: {host: 'ssh://u@box'}\n"
    )
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER)
    text = plantext.text(plan)
    assert "mount sources and results_root are paths on that host" in text
    docker_lines = [line for line in text.splitlines() if "docker " in line and "#" not in line]
    assert docker_lines
    assert all("DOCKER_HOST=ssh://u@box " in line for line in docker_lines)


HOSTLESS = (
    "version: 1\nnetwork_arch: a\naction: b\nplatform: docker\nimage: busybox:1\n"
    "command: 'true'\nresults_root: /r\nuser: '1000:1000'\n"
)


@pytest.mark.parametrize(
    ("environ", "env", "facts", "said"),
    [
        (
            {"DOCKER_HOST": "ssh://u@box"},
            (("DOCKER_HOST", "ssh://u@box"),),
            {"docker_host": "ssh://u@box", "engine": "ssh://u@box from $DOCKER_HOST"},
            "engine: ssh://u@box from $DOCKER_HOST",
        ),
        (
            {"DOCKER_CONTEXT": "gpu-box"},
            (("DOCKER_HOST", ""), ("DOCKER_CONTEXT", "gpu-box")),
            {"docker_context": "gpu-box", "engine": "docker context gpu-box from $DOCKER_CONTEXT"},
            "engine: docker context gpu-box from $DOCKER_CONTEXT",
        ),
        (
            {"config": "gpu-box"},
            (("DOCKER_HOST", ""), ("DOCKER_CONTEXT", "gpu-box")),
            {"docker_context": "gpu-box"},
            "engine: docker context gpu-box from docker context use (",
        ),
        ({"config": "default", "DOCKER_CONTEXT": "default"}, (), {}, None),
        ({"config": "gpu-box", "DOCKER_CONTEXT": "default"}, (), {}, None),
    ],
    ids=["DOCKER_HOST", "DOCKER_CONTEXT", "docker-context-use", "default", "default-over-use"],
)
def test_the_engine_the_environment_names_is_in_the_plan_and_every_docker_command(
    tmp_path: Path, monkeypatch, environ: dict[str, str], env: tuple, facts: dict, said: str | None
) -> None:
    spec = write(tmp_path / "job.yaml", HOSTLESS)
    if "config" in environ:
        write(tmp_path / "no-docker-config" / "config.json", json.dumps(
            {"currentContext": environ["config"]}
        ))  # fmt: skip
    for name in ("DOCKER_HOST", "DOCKER_CONTEXT"):
        if name in environ:
            monkeypatch.setenv(name, environ[name])
    plan = render(load_job(spec), launcher=ROOT_LAUNCHER)
    docker_steps = [s for s in plan.steps if s.argv[0] == "docker"]
    assert [step.env for step in docker_steps] == [env] * len(docker_steps)
    backend = dict(plan.backend)
    assert {k: v for k, v in backend.items() if k != "engine"} == {
        k: v for k, v in facts.items() if k != "engine"
    }
    if said is None:
        assert "engine" not in backend
        assert "# Note: engine" not in plantext.text(plan)
        return
    assert backend["engine"].startswith(said.removeprefix("engine: "))
    assert f"# Note: {said}" in plantext.text(plan)


def test_a_docker_host_holding_a_password_is_refused_and_never_shown(
    taospec: Runner, tmp_path: Path
) -> None:
    spec = write(tmp_path / "job.yaml", HOSTLESS)
    write(tmp_path / "versions.yaml", (ROOT / "jobs" / "versions.yaml").read_text())
    host = "tcp://admin:s3cr3t-pass@box:2376"
    for argv in (("render", spec), ("run", "-n", spec), ("run", "-d", spec)):
        refused = taospec(*argv, env={"DOCKER_HOST": host})
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "$DOCKER_HOST (tcp://admin:" in refused.stderr
        assert "s3cr3t-pass" not in refused.stdout + refused.stderr
    assert not any(Path(taospec.env["TAO_STATE_DIR"]).iterdir()), "nothing was written"


def test_an_ssh_docker_host_from_the_environment_is_a_remote_host_as_docker_host_is(
    taospec: Runner, tmp_path: Path
) -> None:
    spec = write(tmp_path / "job.yaml", HOSTLESS + "mounts: [{source: /only/there, target: /d}]\n")
    write(tmp_path / "versions.yaml", (ROOT / "jobs" / "versions.yaml").read_text())
    here = taospec("run", "-n", spec)
    assert "/only/there does not exist on this machine" in here.stderr
    there = taospec("run", "-n", spec, env={"DOCKER_HOST": "ssh://u@box"})
    assert there.returncode == 0, there.stderr
    assert "does not exist on this machine" not in there.stderr
    assert "# paths-check: check on ssh://u@box that results_root and every mount" in there.stdout


def test_inline_secret_in_the_command_is_refused_and_never_printed(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    secret = "nvapi-" + "Q" * 40
    spec.write_text(
        "version: 1\nnetwork_arch: a\naction: b\nimage: busybox:1\n"
        f"command: 'curl -H token {secret}'\nresults_root: /r\n"
    )
    with pytest.raises(InvalidInput) as caught:
        render(load_job(spec), launcher=ALICE)  # refused while loading, at the command's line
    assert secret not in str(caught.value)
    assert ":5:10: $.command: holds what looks like a credential" in str(caught.value)


def test_a_script_that_sets_a_secret_name_from_a_variable_renders(tmp_path: Path) -> None:
    # the script of sh -c was also read as one NAME=value word, whose value "$MY_HF python
    # train.py" holds literal text: a job passing its token on by name was refused
    spec = write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: a\naction: b\nimage: busybox:1\nresults_root: /r\n"
        "env: {pass: [MY_HF]}\ncommand: sh -c 'HF_TOKEN=$MY_HF python train.py'\n",
    )
    plan = render(load_job(spec), launcher=ALICE)
    assert "-c 'HF_TOKEN=$MY_HF python train.py'" in plantext.text(plan)


def brace_job(folder: Path, lines: str) -> Path:
    return write(
        folder / "job.yaml",
        "version: 1\nnetwork_arch: a\naction: b\nplatform: local\nimage: busybox:1\n"
        f"results_root: {folder / 'results'}\n" + lines,
    )


@pytest.mark.parametrize(
    ("lines", "where", "shown"),
    [
        (
            """command: [echo, '{"a": {"b": 1}}']\n""",
            ':7:17: $.command[1]: \'{"a": {"b": 1}}\' runs as \'{"a": {"b": 1}\'',
            "'}}' stands for one literal brace; write '}}}}' for two",
        ),
        (
            """command: "echo '{\\"a\\": {\\"b\\": \\"{job_id}\\"}}'"\n""",
            ":7:10: $.command: ",
            'runs as \'{"a": {"b": "{job_id}"}\'',
        ),
        (  # a string command is judged as its words, whose quote removal made this '1}}'
            """command: "echo {\\"a\\": {\\"b\\": 1}}"\n""",
            ":7:10: $.command: '1}}' runs as '1}'",
            "write '}}}}' for two",
        ),
        (
            "command: [bash, -c, 'echo {{a,b},c}']\n",
            ":7:21: $.command[2]: 'echo {{a,b},c}' runs as 'echo {a,b},c}'",
            "'{{' stands for one literal brace; write '{{{{' for two",
        ),
        (
            'command: \'true\'\nspec: {train: {extra: \'{"x": {"y": {"z": 1}}}\'}}\n',
            ":8:23: $.spec.train.extra: ",
            'runs as \'{"x": {"y": {"z": 1}}\'',
        ),
        (
            "command: 'true'\nenv: {set: {CFG: '{\"a\": {}}'}}\n",
            ":8:18: $.env.set.CFG: '{\"a\": {}}' runs as '{\"a\": {}'",
            "",
        ),
    ],
)
def test_a_field_whose_braces_would_no_longer_pair_up_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, state_dir: Path, lines: str, where: str, shown: str
) -> None:
    spec = brace_job(tmp_path, lines)
    for verb in ("validate", "render", "run"):
        refused = taospec(verb, spec)
        assert (refused.returncode, refused.stdout.strip()) == (2, ""), refused.stderr
        assert f"{spec}{where}" in refused.stderr
        assert shown in refused.stderr
    assert list(state_dir.iterdir()) == []
    assert not (tmp_path / "results").exists()


def test_escapes_that_leave_the_braces_paired_keep_their_meaning(tmp_path: Path) -> None:
    words = [
        '{"a": {"b": 1}}}}',  # two braces, as the refusal says
        "{{.Id}}",  # a Go template's braces, doubled
        "{{{job_id}}}",
        "{{job_id}",  # the text {job_id}
        "}}",  # one brace, an escape of a field that does not pair up
        "x}}}}",
        '{"a": "{results_dir}"}',
    ]
    spec = brace_job(tmp_path, f"command: [echo, {', '.join(json.dumps(w) for w in words)}]\n")
    plan = render(load_job(spec), launcher=ALICE).with_job_id("a-b-123abc")
    assert list(plan.steps[-1].argv[-len(words) :]) == [
        '{"a": {"b": 1}}',
        "{.Id}",
        "{a-b-123abc}",
        "{job_id}",
        "}",
        "x}}",
        f'{{"a": "{tmp_path}/results/a-b-123abc"}}',
    ]


@pytest.mark.parametrize("path", EXAMPLE_JOBS, ids=[p.stem for p in EXAMPLE_JOBS])
def test_rendered_script_passes_shellcheck(path: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    script = tmp_path / "plan.sh"
    script.write_text(rendered(path)["sh"])
    assert shutil.which("shellcheck"), "shellcheck is missing: make test installs it as root"
    done = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_an_integer_written_as_a_float_is_rendered_as_an_integer(tmp_path: Path) -> None:
    # JSON Schema counts 2.0 as an integer; sbatch, srun and torchrun were handed "2.0"
    path = tmp_path / "job.yaml"
    path.write_text(
        "version: 1\nnetwork_arch: a\naction: b\nplatform: slurm\nimage: busybox:1\n"
        "command: echo hi\nresults_root: /data/results\nnodes: 2.0\ngpus: [0, 1.0]\n"
        "retry: {max: 2.0}\nslurm: {cpus_per_task: 16.0, container: none}\n"
    )
    job = load_job(path)
    assert (job.nodes, job.gpus, job.retry_max, job.slurm.cpus_per_task) == (2, (0, 1), 2, 16)
    shown = plantext.text(render(job, launcher=Identity(1000, 1000, (), "u")))
    assert "#SBATCH --nodes=2\n" in shown
    assert "#SBATCH --cpus-per-task=16\n" in shown
    assert "2.0" not in shown
    assert "16.0" not in shown
    path.write_text(path.read_text().replace("gpus: [0, 1.0]", "gpus: {free: 1.0}"))
    path.write_text(path.read_text().replace("platform: slurm", "platform: docker"))
    path.write_text(path.read_text().replace("nodes: 2.0\n", ""))  # a Docker host is one node
    path.write_text(path.read_text().replace("slurm: {cpus_per_task: 16.0, container: none}\n", ""))
    free = load_job(path).gpus_free  # int("1.0") crashed the pick of free GPUs at submit
    assert (free, type(free)) == (1, int)


def test_the_job_id_and_upstream_results_in_a_spec_are_filled_in(tmp_path: Path) -> None:
    # YAML wrote a stand-in's NUL as the escape \0, which no substitution found: the spec
    # file said "\0JOB_ID\0"; a literal backslash-zero in the spec stays as it is
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        "version: 1\ndefaults: {network_arch: a, platform: local, image: busybox:1, "
        "results_root: /data/results}\njobs:\n  prepare: {action: p, command: 'true'}\n"
        "  train:\n    action: t\n    needs: [prepare]\n    command: 'true'\n"
        "    spec: {id: '{job_id}', data: '{needs.prepare.results_dir}/out', "
        "plain: 'a\\0JOB_ID\\0', quoted: 'b\\\\0JOB_ID\\0'}\n"
    )
    job = load_jobfile(path).targets["train"].job
    upstream = upstream_stand_ins(["prepare"])
    plan = render(job, launcher=Identity(1000, 1000, (), "u"), upstream=upstream)
    (content,) = [s.stdin_text for s in plan.with_job_id("t-1").steps if s.stdin_text]
    assert yaml.safe_load(content.replace(upstream["prepare"], "/up")) == {
        "id": "t-1",
        "data": "/up/out",
        "plain": "a\\0JOB_ID\\0",
        "quoted": "b\\\\0JOB_ID\\0",
    }
    shown = plantext.text(plan)
    assert 'id: "${JOB_ID}"\n' in shown  # filled in by sed from $JOB_ID as the script runs
    assert 'data: "${UPSTREAM_PREPARE}/out"\n' in shown


def test_the_plan_lint_reads_each_word_list_apart_and_places_only_spec_findings_at_spec(
    monkeypatch,
) -> None:
    # A command ending in --token took the environment's first entry as its value; and a
    # finding in the sbatch script (made of env.set, among others) was placed at spec:.
    monkeypatch.chdir(ROOT)
    plan = render(load_job("jobs/train-remote-docker.yaml"), launcher=ROOT_LAUNCHER)
    launch = plan.steps[-1]
    assert launch.env  # DOCKER_HOST, after the command's last word
    ending = dataclasses.replace(launch, argv=(*launch.argv, "--token"))
    lint_plan(dataclasses.replace(plan, steps=(*plan.steps[:-1], ending)))

    def refused_at(step: Step) -> tuple[str | int, ...]:
        with pytest.raises(InvalidInput) as caught:
            lint_plan(dataclasses.replace(plan, steps=(*plan.steps, step)))
        assert "secret-value" not in str(caught.value)
        return caught.value.key

    text = "export T='Authorization: Bearer secret-value'\n"
    assert refused_at(Step(SPEC_STEP, ("cat",), "spec", stdin_text=text)) == ("spec",)
    assert refused_at(Step("script", ("cat",), "script", stdin_text=text)) == ()


def test_the_script_of_one_target_with_needs_requires_its_upstream_results(
    taospec: Runner, tmp_path: Path
) -> None:
    # "name one target (prep, train)" though one was named: the upstream was rendered too
    write(tmp_path / "versions.yaml", (ROOT / "jobs" / "versions.yaml").read_text())
    write(
        tmp_path / "f.yaml",
        "version: 1\ndefaults: {network_arch: f, platform: local, "
        f"image: {{versions_key: images.test.busybox}}, results_root: {tmp_path}/results}}\n"
        "jobs:\n  prep: {action: prep, command: echo p}\n"
        '  train: {action: train, needs: [prep], command: "ls {needs.prep.results_dir}"}\n',
    )
    done = taospec("render", "--format", "sh", "f.yaml", "train")
    assert done.returncode == 0, done.stderr
    script = done.stdout
    assert script.startswith("#!/usr/bin/env bash\n# taospec plan: f.yaml (target train,")
    assert "# Set UPSTREAM_PREP to the results directory of the job of target prep" in script
    assert script.count("taospec record open") == 1  # train's alone
    guard = ': "${UPSTREAM_PREP:?'
    assert guard in script
    assert script.index(guard) < script.index("taospec record open")
    assert 'ls "$UPSTREAM_PREP"' in script
    path = write(tmp_path / "train.sh", script)
    assert subprocess.run(["shellcheck", str(path)], check=False).returncode == 0
    # run without the upstream's results: it stops before the record opens
    bin_dir = tmp_path / "bin"
    marker = tmp_path / "record-opened"
    write(bin_dir / "taospec", f"#!/bin/sh\ntouch {marker}\necho id-1\n").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    ran = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, check=False)
    assert ran.returncode != 0
    assert "UPSTREAM_PREP" in ran.stderr
    assert not marker.exists()
    # the whole file still needs a target named for a script
    whole = taospec("render", "--format", "sh", "f.yaml")
    assert whole.returncode == 2
    assert "name one target (prep, train)" in whole.stderr


def _train_script_run(
    taospec: Runner, tmp_path: Path, upstream: str
) -> subprocess.CompletedProcess[str]:
    """The script of target ``train`` of ``f.yaml`` (shellcheck-clean) run by bash with
    ``UPSTREAM_PREP`` set to ``upstream``, the real taospec on its PATH."""
    done = taospec("render", "--format", "sh", "f.yaml", "train")
    assert done.returncode == 0, done.stderr
    path = write(tmp_path / "train.sh", done.stdout)
    assert subprocess.run(["shellcheck", str(path)], check=False).returncode == 0
    real = shlex.join(taospec_command())
    write(tmp_path / "bin" / "taospec", f'#!/bin/sh\nexec {real} "$@"\n').chmod(0o755)
    env = {**taospec.env, "PATH": f"{tmp_path}/bin:{os.environ['PATH']}", "UPSTREAM_PREP": upstream}
    return subprocess.run(
        ["bash", str(path)], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("given", ["hello-prep-0a1b2c", "results/hello-prep-0a1b2c", ""])
def test_the_script_refuses_an_upstream_results_directory_that_is_no_absolute_path(
    taospec: Runner, tmp_path: Path, given: str
) -> None:
    # a job id given for the path ran the job anyway: docker -v took the relative word for
    # a named volume and mounted a new empty one, and a local job read it from inside its
    # own results directory, where env -C starts it
    write(tmp_path / "versions.yaml", (ROOT / "jobs" / "versions.yaml").read_text())
    write(
        tmp_path / "f.yaml",
        "version: 1\ndefaults: {network_arch: hello, platform: docker, user: '1000:1000', "
        f"image: {{versions_key: images.test.busybox}}, results_root: {tmp_path}/results}}\n"
        "jobs:\n  prep: {action: prep, command: echo p}\n"
        "  train:\n    action: train\n    needs: [prep]\n"
        "    mounts: [{source: '{needs.prep.results_dir}', target: /model, readonly: true}]\n"
        "    command: cat /model/model.txt\n",
    )
    ran = _train_script_run(taospec, tmp_path, given)
    assert ran.returncode != 0
    assert "UPSTREAM_PREP" in ran.stderr
    assert "set it to the results directory of the upstream job" in ran.stderr
    listed = taospec("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == ""  # no record was opened, so no job ran


@pytest.mark.parametrize(
    "upstream",
    [
        "/r/with space/$HOME #x:y/ok",
        "/r/a|b", "/r/a&b", "/r/a\\b", "/r/a'b", '/r/a"b', "/r/a\nb", "/r/a\tb",
    ],
)  # fmt: skip
def test_the_script_writes_an_upstream_folder_into_the_spec_as_it_is_or_stops(
    taospec: Runner, tmp_path: Path, upstream: str
) -> None:
    # sed wrote it into the spec file: a | or & changed what it wrote, and a quote or a
    # backslash in the spec's double-quoted text made other YAML (or none) of it
    write(tmp_path / "versions.yaml", (ROOT / "jobs" / "versions.yaml").read_text())
    write(
        tmp_path / "f.yaml",
        "version: 1\ndefaults: {network_arch: hello, platform: local, "
        f"image: {{versions_key: images.test.busybox}}, results_root: {tmp_path}/results}}\n"
        "jobs:\n  prep: {action: prep, command: echo p}\n"
        '  train: {action: train, needs: [prep], command: "true", '
        'spec: {data: "{needs.prep.results_dir}/model.txt"}}\n',
    )
    ran = _train_script_run(taospec, tmp_path, upstream)
    if upstream.startswith("/r/with space"):
        assert ran.returncode == 0, ran.stderr
        (spec,) = (tmp_path / "results").glob("*/stage/spec.yaml")
        assert yaml.safe_load(spec.read_text()) == {"data": f"{upstream}/model.txt"}
        return
    assert ran.returncode == 2, ran.stderr
    assert "UPSTREAM_PREP=" in ran.stderr
    assert "cannot write into the job's files as it is" in ran.stderr
    assert taospec("ls", "--json").stdout == ""  # it stopped before the record opened


def test_the_script_takes_a_job_id_it_is_given_only_if_it_is_one(
    taospec: Runner, tmp_path: Path
) -> None:
    # JOB_ID is written as it is into the files the script makes and the paths it names
    done = taospec("render", "--format", "sh", ROOT / "jobs" / "hello.yaml")
    path = write(tmp_path / "hello.sh", done.stdout)
    env = {**taospec.env, "JOB_ID": "hello-greet-1'; touch /tmp/x #"}
    ran = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, check=False)
    assert ran.returncode == 2
    assert "not a job id (letters, digits, '.', '_' and '-')" in ran.stderr
    assert taospec("ls", "--json").stdout == ""
