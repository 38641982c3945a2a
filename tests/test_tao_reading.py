"""An experiment spec means to taospec what it means to TAO.

TAO reads its spec file with OmegaConf, whose YAML reading differs from PyYAML's in two
ways: a float needs neither a dot nor a signed exponent (``1e-4``, ``1e3``, ``1_0e3`` are
numbers), and a date is text. Each test here asks OmegaConf itself: the spec a job file
writes reads, with OmegaConf, as the values its ``spec:`` holds read with OmegaConf, and
taospec's own reading (what it checks, names targets by and shows) is that reading too.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from omegaconf.errors import GrammarParseError, UnsupportedValueType

from taospec import interpolations
from taospec.errors import InvalidInput
from taospec.platforms import render
from tests.conftest import Runner, load_job, write
from tests.test_skill_jobs import BANK

FLOATS_TO_OMEGACONF = re.compile(
    r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
"""The pattern OmegaConf adds to YAML's floats (written out here from its documented
grammar, so that the strategy below covers every shape it names)."""

TEXTS = (
    "1e-4 1e3 -2E+5 1_0e3 .5 1.0e3 2.0e-05 10:30.5 2024-01-01 2001-12-14t21:59:43.10-05:00 "
    "1_000 0x1F 010 yes Off ~ null 1e e3 1.2.3 lr 1e-4x"
)
SCALARS = st.one_of(
    st.from_regex(FLOATS_TO_OMEGACONF, fullmatch=True).filter(lambda t: "nan" not in t.lower()),
    st.sampled_from(TEXTS.split()),
)
"""Texts YAML and OmegaConf may read as numbers, dates, booleans or nothing (NaN is left out:
it equals nothing, not even itself)."""

WRITTEN = st.sampled_from(
    ["{0}", "'{0}'", '"{0}"', "!!str {0}", "&a{1} {0}"]
    + [f"!!{kind} {{0}}" for kind in ("float", "int", "bool", "null", "timestamp")]
)
"""How a job file writes a scalar: plain, quoted either way, tagged, anchored."""

HEAD = "version: 1\nnetwork_arch: n\naction: train\nimage: busybox\ncommand: 'true'\n"


def tao_reads(text: str) -> Any:
    """What TAO's reader makes of the YAML ``text``: OmegaConf, without resolving anything."""
    return OmegaConf.to_container(OmegaConf.create(text))


def spec_file(job: Path) -> str:
    plan = render(load_job(job)).with_job_id("job-1")
    step = next(s for s in plan.steps if s.name == "spec-file")
    return step.stdin_text or ""


def tiny_skill_job(taospec: Runner, tmp_path: Path, *spec: str, bank: Path = BANK) -> Path:
    """A train job of ``bank``'s tao-train-tiny skill, its data in place, whose spec sets the
    skill's inputs and then each line of ``spec``."""
    taospec.env["TAO_SKILL_BANK"] = str(bank)
    (tmp_path / "data").mkdir()
    write(tmp_path / "data" / "train.json", "{}\n")
    head = (
        f"version: 1\nskill: tao-train-tiny\naction: train\nimage: busybox\n"
        f"results_root: {tmp_path}/r\nspec:\n  dataset:\n"
        "    train_data_sources: [{image_dir: data, json_file: data/train.json}]\n"
        "    classes: [a, b]\n"
    )
    return write(tmp_path / "job.yaml", head + "".join(f"  {line}\n" for line in spec))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.tuples(SCALARS, WRITTEN), min_size=1, max_size=6))
@example(values=[("2001-12-14t21:59:43.10-05:00", "!!timestamp {0}")])
def test_the_spec_file_means_to_tao_what_the_job_file_s_spec_means(
    tmp_path: Path, values: list[tuple[str, str]]
) -> None:
    block = "".join(f"  k{i}: {how.format(text, i)}\n" for i, (text, how) in enumerate(values))
    job = write(tmp_path / "job.yaml", f"{HEAD}results_root: {tmp_path}/r\nspec:\n{block}")
    try:
        meant = tao_reads(block.replace("  ", "", 1).replace("\n  ", "\n"))
    except Exception:  # PyYAML's constructors fail each its own way on a tag its text is not
        with pytest.raises(InvalidInput):  # refused before TAO would refuse it
            load_job(job)
        return
    assert load_job(job).spec == meant  # taospec checks and shows what TAO will read
    assert tao_reads(spec_file(job)) == meant


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ('"1e3"', "1e3"),  # quoted: text, which TAO would have read as 1000.0
        ("'1_0e3'", "1_0e3"),
        ("!!str 1e-4", "1e-4"),
        ("1e-4", 0.0001),  # plain: a number, as TAO reads it
        ("1e3", 1000.0),
        ("2024-01-01", "2024-01-01"),  # a date is text to TAO
        ('"2024-01-01"', "2024-01-01"),
    ],
)
def test_a_spec_value_is_the_type_tao_reads(tmp_path: Path, written: str, meant: object) -> None:
    job = write(tmp_path / "job.yaml", f"{HEAD}results_root: {tmp_path}/r\nspec: {{v: {written}}}")
    assert load_job(job).spec == {"v": meant}
    assert tao_reads(spec_file(job)) == {"v": meant}
    assert type(tao_reads(spec_file(job))["v"]) is type(meant)


def test_a_matrix_value_is_the_number_tao_reads_and_names_its_target_so(
    taospec: Runner, tmp_path: Path
) -> None:
    file = write(
        tmp_path / "jobs.yaml",
        f"""\
version: 1
defaults: {{network_arch: n, image: busybox, command: 'true', results_root: {tmp_path}/r}}
jobs:
  t:
    action: train
    matrix: {{lr: [1e-4, "3e-4"]}}
    spec: {{lr: "{{matrix.lr}}"}}
""",
    )
    rendered = taospec("render", file, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    specs = {
        plan["target"]: tao_reads(
            next(s["stdin_text"] for s in plan["steps"] if s["name"] == "spec-file")
        )
        for plan in json.loads(rendered.stdout)
    }
    assert specs == {"t[lr=0.0001]": {"lr": 0.0001}, "t[lr=3e-4]": {"lr": "3e-4"}}


def test_a_value_outside_the_spec_keeps_yaml_s_reading(tmp_path: Path) -> None:
    # an environment variable's value is text wherever it came from: 1e3 stays as written
    job = write(
        tmp_path / "job.yaml",
        f"{HEAD}results_root: {tmp_path}/r\nenv: {{set: {{SCALE: 1e3}}}}\nspec: {{v: 1e3}}\n",
    )
    loaded = load_job(job)
    assert dict(loaded.env_set) == {"SCALE": "1e3"}
    assert loaded.spec == {"v": 1000.0}


def test_a_skill_s_template_is_read_as_tao_reads_it(taospec: Runner, tmp_path: Path) -> None:
    # a template writes lr: 1e-5, a number to TAO; read as text, it was quoted into the spec
    bank = tmp_path / "bank"
    shutil.copytree(BANK, bank)
    template = bank / "skills/models/tao-train-tiny/references/spec_template_train.yaml"
    template.write_text(
        template.read_text().replace("lr: 0.001", "lr: 1e-5\n    since: 2024-01-01")
    )
    file = tiny_skill_job(taospec, tmp_path, bank=bank)
    rendered = taospec("render", file, "--format", "json")
    assert rendered.returncode == 0, rendered.stderr
    assert "optim.lr" not in rendered.stderr  # no "is a string, not a number"
    steps = json.loads(rendered.stdout)["steps"]
    spec = tao_reads(next(s["stdin_text"] for s in steps if s["name"] == "spec-file"))
    assert spec["train"]["optim"] == {
        "lr": 1e-5,
        "since": "2024-01-01",
        "warmup_lr": "${train.optim.lr}",
    }


@pytest.mark.parametrize(
    "value",
    [
        "${train.optim.lr}",
        "${train.num_epochs}",
        "${dataset.classes.1}",
        "${dataset.train_data_sources.0.image_dir}",
        "lr ${train.optim.lr} at depth ${model.depth}",
        "\\${train.optim.lrr}",  # escaped: text
        "${oc.env:HOME}",  # a resolver's, not a key
        "${train.optim.lrr}",
        "${trian.num_epochs}",
        "${dataset.classes.5}",
        "lr ${train.optim.lr} at depth ${model.deep}",
    ],
)
def test_an_interpolation_names_a_key_the_spec_holds_as_omegaconf_finds_it(
    taospec: Runner, tmp_path: Path, value: str
) -> None:
    # a key misspelled in ${...} passed validate; TAO then failed reading it, once started
    file = tiny_skill_job(
        taospec, tmp_path, f"train: {{pretrained_model_path: {json.dumps(value)}}}"
    )
    user = yaml.safe_load(file.read_text())["spec"]
    template = OmegaConf.load(
        BANK / "skills/models/tao-train-tiny/references/spec_template_train.yaml"
    )
    merged = OmegaConf.merge(template, user)
    try:
        OmegaConf.to_container(merged, resolve=True)
    except Exception as exc:  # what TAO meets when it reads the value
        found = type(exc).__name__
    else:
        found = ""
    done = taospec("validate", file)
    assert (done.returncode, bool(found)) in {(0, False), (2, True)}, done.stderr
    if found:
        line = next(
            n for n, text in enumerate(file.read_text().splitlines(), 1) if "train:" in text
        )
        assert f"{file}:{line}:" in done.stderr
        assert "spec.train.pretrained_model_path:" in done.stderr
        assert "which the spec does not hold" in done.stderr


def test_an_interpolation_may_name_a_key_the_skill_s_schema_gives_a_default(
    taospec: Runner, tmp_path: Path
) -> None:
    # train.optim.amp is in the schema TAO merges the spec file into, not in the template
    file = tiny_skill_job(taospec, tmp_path, 'train: {pretrained_model_path: "${train.optim.amp}"}')
    done = taospec("validate", file)
    assert done.returncode == 0, done.stderr


def test_an_interpolation_is_omegaconf_s_and_reaches_tao_as_written(
    taospec: Runner, tmp_path: Path
) -> None:
    # ${results_dir} (TAO's own idiom, in the skill bank's templates) was read as $ and the
    # placeholder {results_dir}: the job read "$/results-root/<id>/train/model.pth"
    spec = {
        "results_dir": "/results",
        "evaluate": {"checkpoint": "${results_dir}/train/model.pth"},
        "escaped": "${{results_dir}}",  # the doubled braces a literal brace takes, as before
        "filled": "{results_dir}",  # taospec's placeholder, as before
        "lr": 0.1,
        "warmup": "${lr}",
        "sum": "${eval:'${lr} * 2'}",
        "id": "${job_id}",
    }
    file = write(
        tmp_path / "job.yaml", f"{HEAD}results_root: {tmp_path}/r\nspec: {json.dumps(spec)}\n"
    )
    done = taospec("validate", file)
    assert done.returncode == 0, done.stderr
    written = tao_reads(spec_file(file))
    assert written["evaluate"] == {"checkpoint": "${results_dir}/train/model.pth"}
    assert written["escaped"] == "${results_dir}"
    assert written["filled"] == f"{tmp_path}/r/job-1"
    assert (written["warmup"], written["sum"], written["id"]) == (
        "${lr}",
        "${eval:'${lr} * 2'}",
        "${job_id}",
    )
    resolved = OmegaConf.create(spec_file(file))
    assert resolved.evaluate.checkpoint == "/results/train/model.pth"
    assert resolved.warmup == 0.1


@pytest.mark.parametrize(
    "value",
    ["${results_dir/train", "${a.b", "x ${a} ${b", "${a:{x: 1}", "${eval:'1'", "${a:\\}"],
)
def test_an_interpolation_that_never_closes_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, value: str
) -> None:
    with pytest.raises(GrammarParseError):  # TAO cannot read such a spec file at all
        OmegaConf.create({"v": value})
    file = write(
        tmp_path / "job.yaml", f"{HEAD}results_root: {tmp_path}/r\nspec:\n  v: {value!r}\n"
    )
    done = taospec("validate", file)
    if "'" in value or "\\" in value:  # quoted or escaped inside: left to OmegaConf
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 2
    assert f"{file}:8:6: $.spec.v: " in done.stderr
    assert "opens an OmegaConf interpolation (${) that never closes" in done.stderr


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["${", "}", "{", "a", ".", ":", "\\", "'", '"', " ", "$", ","]), max_size=10
    ).map("".join)
)
def test_only_an_interpolation_omegaconf_cannot_read_is_refused(text: str) -> None:
    if interpolations.unclosed(text) is not None:
        with pytest.raises(GrammarParseError):
            OmegaConf.create({"v": text})


def test_a_tagged_date_in_the_spec_is_refused_at_its_line(taospec: Runner, tmp_path: Path) -> None:
    # PyYAML reads a date, which taospec wrote as plain text; OmegaConf holds no dates
    with pytest.raises(UnsupportedValueType):
        OmegaConf.create("v: !!timestamp 2024-01-01\n")
    file = write(
        tmp_path / "job.yaml",
        f"{HEAD}results_root: {tmp_path}/r\nspec:\n  v: !!timestamp 2024-01-01\n"
        "  w: 2024-01-01\n",  # untagged: text to TAO, and kept so
    )
    done = taospec("validate", file)
    assert done.returncode == 2
    assert f"{file}:8:6: $.spec.v: a date (!!timestamp) cannot be part of a spec" in done.stderr
    assert "$.spec.w" not in done.stderr


def test_a_set_in_the_spec_is_refused_at_its_line(taospec: Runner, tmp_path: Path) -> None:
    # PyYAML reads !!set, and taospec wrote it; OmegaConf refuses the spec file holding it
    with pytest.raises(UnsupportedValueType):
        OmegaConf.create("v: !!set {x}\n")
    file = write(
        tmp_path / "job.yaml", f"{HEAD}results_root: {tmp_path}/r\nspec:\n  v: !!set {{x}}\n"
    )
    done = taospec("validate", file)
    assert done.returncode == 2
    assert f"{file}:8:6: $.spec.v: a set (!!set) cannot be part of a spec" in done.stderr
    outside = write(
        tmp_path / "env.yaml", f"{HEAD}results_root: {tmp_path}/r\nenv: {{set: !!set {{x}}}}\n"
    )
    done = taospec("validate", outside)  # the schema's own check: env.set is a mapping of text
    assert done.returncode == 2
    assert "a set (!!set)" not in done.stderr
