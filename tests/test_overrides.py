"""Hydra's overrides after a TAO entrypoint's ``-e {config_path}``, read as Hydra reads them.

A command may give ``key=value`` words to a TAO entrypoint after its ``-e {config_path}``;
the entrypoint joins them with spaces and splits the line again with ``shlex.split``, and
TAO composes its spec with Hydra, which refused a misspelled key, a value it reads as a
sweep, or one OmegaConf cannot make the key's type, once the job had started. Hydra and
OmegaConf themselves are the ground truth here, given what the entrypoint passes them.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import functools
import io
import json
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import get_args_parser
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from hydra.errors import HydraException
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from taospec import overrides
from taospec.overrides import UNREAD, override, typed
from taospec.taoschema import converted_to
from tests.conftest import Runner, write
from tests.test_skill_jobs import BANK
from tests.test_tao_reading import spec_file, tiny_skill_job

PARSER = OverridesParser.create()
HOW = {
    OverrideType.CHANGE: "",
    OverrideType.ADD: "+",
    OverrideType.FORCE_ADD: "++",
    OverrideType.DEL: "~",
}
VALUE_PARTS = [
    "a", "1", ",", "'", '"', "\\", "[", "]", "{", "}", "(", ")", "${", " ", ":", "=", "$",
    ".", "choice(", "range(", "interval(", "x(", "sort(", "shuffle(", "tag(", "str(", "int(",
    "reverse=",
]  # fmt: skip
KEY_PARTS = ["~", "+", "a", ".", "0", "01", "1_0", "$", "-", "_", "/", "@", "=", "=1", "B9", " "]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(VALUE_PARTS), max_size=9).map("".join))
@example("sort(1,2)")
@example("tag(x,choice(1,2))")
@example("shuffle()")
@example("a\\,b")
@example("${a,b}")
def test_a_value_is_a_sweep_exactly_when_hydra_reads_one(value: str) -> None:
    word = f"train.lr={value}"
    try:
        hydra = PARSER.parse_override(word)
    except HydraException:
        return  # Hydra refuses the word whatever taospec makes of it
    read = override(word)
    assert read is not None
    assert read.sweep == hydra.is_sweep_override()


GRAMMAR_PARTS = [
    *VALUE_PARTS, "'a'", "[1, 2]", "{a: b}", "${x}", "\\ ", "\t", "#", "!", "é", "a b", "})",
    "foo(", "-", "/", "@", "|", "*",
]  # fmt: skip


@settings(max_examples=6000, deadline=None)
@given(st.lists(st.sampled_from(GRAMMAR_PARTS), max_size=9).map("".join))
@example("[a,b")  # each of these passed validate, and failed when the job started
@example("a)")
@example("#x")
@example("$(id)")
@example("café")
@example("[a] ")
@example("'a' ,'b'")
@example("foo(1)")
def test_a_value_hydra_cannot_read_is_one_taospec_calls_misread(value: str) -> None:
    read = override(f"train.lr={value}")
    assert read is not None
    why = overrides.misread(read.value)
    try:
        PARSER.parse_override(f"train.lr={value}")
        refused = ""
    except HydraException as error:
        refused = str(error)
    if not refused:
        assert why is None, why
    elif "while evaluating" not in refused or "Unknown function" in refused:
        assert why is not None, refused  # what a function makes of its arguments is its own


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(KEY_PARTS), max_size=8).map("".join))
@example("0.a=")
@example("~a.b")
def test_an_override_s_key_is_the_key_hydra_reads(word: str) -> None:
    read = override(word)
    try:
        hydra = PARSER.parse_override(word)
    except HydraException:
        return
    if not hydra.key_or_group or hydra.package is not None or "/" in hydra.key_or_group:
        return  # a config group's or package's: no TAO spec has one
    assert read is not None
    assert (read.how, read.key) == (HOW[hydra.type], hydra.key_or_group)


def tao_passes(words: list[str]) -> list[str] | None:
    """What a TAO entrypoint (``dino``, given ``words`` after it) hands its action's Hydra,
    or None where it uses no ``{config_path}``: it reads its action and spec file with
    argparse (``parse_known_args``), joins the words it does not read with spaces and
    splits the line again with ``shlex.split``, as TAO's PyTorch and Data Services
    entrypoints do. ValueError where it cannot split the line."""
    parser = argparse.ArgumentParser("dino", add_help=True, exit_on_error=False)
    parser.add_argument("subtask", choices=["train", "evaluate"])
    parser.add_argument("-e", "--experiment_spec_file", default=None)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args, unknown = parser.parse_known_args(words)
    except (argparse.ArgumentError, SystemExit):
        return None  # the entrypoint stops at its arguments
    if args.experiment_spec_file != "{config_path}":
        return None
    return shlex.split(" ".join(unknown))


PASSED_PARTS = [
    "a=1", "b", " ", "'", '"', "\\", "$x", "#", ",", "=", "{config_path}", "-e", "--x", "-k", "--",
]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PASSED_PARTS), max_size=5).map("".join), max_size=5))
@example(["-e", "{config_path}"])
@example(["x='a", "b'"])
@example(["a=1", "-e", "{config_path}", "-e=b"])
@example(["a=1", "-e", "-e{config_path}"])  # -e takes no option for its file: argparse stops
def test_the_words_read_are_the_words_tao_s_entrypoint_passes_hydra(words: list[str]) -> None:
    # "--=x" is a start of every long option, which argparse refuses as ambiguous
    assume(not any(word.startswith("--=") for word in words))
    command = ["dino", "train", "-e", "{config_path}", *words]
    read = list(overrides.given(command, "train"))
    try:
        passed = tao_passes(command[1:])
    except ValueError:
        # the entrypoint cannot split the line: taospec says which word it cannot split
        assert any(each.pieces is None for each in read)
        return
    if passed is None:
        assert read == []
    elif all(each.pieces is not None for each in read):
        assert [each.passed for each in read] == passed


@pytest.mark.parametrize(
    "command",
    [
        ["dino", "train", "-e", "{config_path}", "x=1"],
        ["dino", "train", "--experiment_spec_file", "{config_path}", "x=1"],
        ["dino", "train", "--experiment_spec_file={config_path}", "x=1"],
        ["dino", "train", "--experiment_spec={config_path}", "x=1"],
        ["dino", "train", "--exp", "{config_path}", "x=1"],
        ["dino", "train", "--e", "{config_path}", "x=1"],
        ["dino", "train", "-e=/elsewhere.yaml", "-e", "{config_path}", "x=1"],
        ["dino", "train", "-e{config_path}", "x=1"],
        ["dino", "train", "x=1", "-e", "{config_path}"],  # argparse passes on what it does not read
        ["tao", "model", "dino", "train", "-e", "{config_path}", "x=1"],
    ],
)
def test_the_spec_file_is_found_as_tao_s_entrypoint_reads_it(command: list[str]) -> None:
    assert [(each.passed, each.read) for each in overrides.given(command, "train")] == [
        ("x=1", override("x=1"))
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["train", "-e", "{config_path}", "x=1"],  # the action must follow an entrypoint
        ["dino", "train", "-e", "spec.yaml", "x=1"],  # not the spec file taospec writes
        ["dino", "train", "-e", "{config_path}", "--exp=other.yaml", "x=1"],  # the last one
        ["dino", "evaluate", "-e", "{config_path}", "x=1"],  # another action's
        ["dino", "train", "-x", "{config_path}", "x=1"],
    ],
)
def test_a_command_that_runs_no_entrypoint_passes_hydra_nothing(command: list[str]) -> None:
    assert list(overrides.given(command, "train")) == []


HYDRA_WORDS = [
    "--cfg", "-c", "job", "--resolve", "--package", "-p", "_global_", "--run", "-r", "--multirun",
    "-m", "--shell-completion", "-sc", "--config-path", "-cp", "/x", "--config-name", "-cn",
    "--config-dir", "-cd", "--experimental-rerun", "--info", "-i", "--hydra-help", "--cf",
    "--conf", "--ru", "--in", "--cfg=job", "--run=x", "-cpX", "-rm", "--gpus", "-k", "-o",
    "--results_dir", "2", "-1", "a=1", "~a", "+a=1", "a/b=x", "hydra/x=y", "--", "hydra",
    "-cjob", "-rX", "-s", "-scX", "--info=config", "--cfg=x", "-c=all", "--pack", "-rmh",
]  # fmt: skip


def hydra_reads(words: list[str]) -> argparse.Namespace | None:
    """What Hydra's argument parser makes of ``words`` (what TAO's entrypoint passes on), as
    a TAO action script's Hydra reads them, after the spec file's folder and name, which the
    entrypoint gives first; None where it, or its override parser after it, refuses them."""
    spec_file = ["--config-path", "/results/stage", "--config-name", "spec.yaml"]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parsed = get_args_parser().parse_args([*spec_file, *words])
    except SystemExit:
        return None
    try:
        PARSER.parse_overrides(parsed.overrides)
    except HydraException:
        return None
    return parsed


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(HYDRA_WORDS), max_size=6))
@example(["-r", "/x", "-k", "key", "--gpus", "2"])  # an older TAO's words
@example(["--cfg", "job", "a=1"])
@example(["--info", "--run"])
def test_a_word_is_refused_exactly_where_hydra_s_argument_parser_refuses_it(
    words: list[str],
) -> None:
    command = ["dino", "train", "-e", "{config_path}", *words]
    passed = tao_passes(command[1:])
    assert passed is not None
    given_words = list(overrides.given(command, "train"))
    refused = list(overrides.unread(given_words))
    read = hydra_reads(passed)
    assert bool(refused) == (read is None), refused
    if read is not None:
        assert overrides.multirun(given_words) == read.multirun


@settings(  # most lists of these words are ones Hydra's parser refuses, which assume() drops
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(
    st.lists(st.sampled_from([*HYDRA_WORDS, "hydra.run.dir=x", "hydra/job_logging=x"]), max_size=6)
)
@example(["-rmh"])
@example(["--cfg=job", "--resolve", "-p", "x"])
def test_a_word_is_said_to_run_other_than_the_action_where_hydra_s_parser_reads_so(
    words: list[str],
) -> None:
    # what Hydra's argument parser reads from the words decides what TAO's run does: a
    # help or a printed config instead of the action, a multirun, an option it ignores or
    # stops at, and a setting TAO's runner sets again after them
    command = ["dino", "train", "-e", "{config_path}", *words]
    passed = tao_passes(command[1:])
    assert passed is not None
    read = hydra_reads(passed)
    assume(read is not None)
    assert read is not None
    shows = read.cfg is not None or read.help
    keys = [each.key_or_group for each in PARSER.parse_overrides(read.overrides)]
    other = (
        shows
        or read.hydra_help
        or read.info is not None
        or read.shell_completion
        or read.multirun
        or read.experimental_rerun is not None
        or read.resolve
        or read.package is not None
        or (read.config_path, read.config_name) != ("/results/stage", "spec.yaml")
        or any(key in overrides.TAO_SETS for key in keys)
    )
    unrun = list(overrides.unrun(list(overrides.given(command, "train"))))
    assert bool(unrun) == other, unrun


def dino_job(folder: Path, command: object) -> Path:
    """A job without a skill running ``command``, with a spec; its command on line 6."""
    file = folder / "job.yaml"
    file.write_text(
        "version: 1\nnetwork_arch: dino\naction: train\nimage: busybox\n"
        f"results_root: {folder}/r\ncommand: {json.dumps(command)}\nspec: {{}}\n"
    )
    return file


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["-r", "/results"], "$.command[5]: '/results': Hydra reads '/results' as an override"),
        (["-k", "key"], "$.command[4]: '-k': Hydra's argument parser has no option -k"),
        (["--gpus", "2"], "$.command[4]: '--gpus': Hydra's argument parser has no option --gpus"),
        (["--conf", "x"], "finds --conf ambiguous (--config-path, --config-name, --config-dir)"),
        (["--cfg", "jobs"], "'jobs': Hydra's option --cfg takes job, hydra, all, not 'jobs'"),
        (["a=1", "--cfg", "job", "b=2"], "$.command[7]: 'b=2': Hydra's argument parser takes"),
        (["--cfg"], "$.command[4]: '--cfg': Hydra's option --cfg takes a value, and gets none"),
        (["--run", "a=1", "b=2"], ""),
        (["a=1", "-r"], ""),
        (["--config-dir", "/x", "-r", "a=1"], ""),
    ],
)
def test_a_word_hydra_s_argument_parser_refuses_is_refused_at_its_item(
    taospec: Runner, tmp_path: Path, words: list[str], said: str
) -> None:
    # an older TAO took -r, -k and --gpus itself; now its entrypoint gives all but -e to
    # Hydra, whose argument parser stopped the job once it had started
    file = dino_job(tmp_path, ["dino", "train", "-e", "{config_path}", *words])
    done = taospec("validate", file)
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said:
        assert f"{file}:6:" in done.stderr


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ("--cfg job", "'--cfg': Hydra's --cfg prints the config and exits 0"),
        ("-m", "'-m': Hydra's multirun runs the action in a folder of its own"),
        ("--info", "'--info': Hydra's --info prints what it knows of the run"),
        ("--config-name x", "'--config-name': TAO's entrypoint gives Hydra the spec file"),
        ("-k key", "'-k': Hydra's argument parser has no option -k"),
        ("", ""),
    ],
)
def test_a_command_string_of_options_alone_is_judged_as_its_list_is(
    taospec: Runner, tmp_path: Path, words: str, said: str
) -> None:
    # a string command was judged only when it held an "=": "dino train -e {config_path}
    # --cfg job" passed, and its job would have ended COMPLETE having run nothing
    file = dino_job(tmp_path, f"dino train -e {{config_path}} {words}".strip())
    done = taospec("validate", file)
    assert done.returncode == (2 if said else 0), done.stderr
    if said:
        assert f"{file}:6:10: $.command: {said}" in done.stderr


@pytest.mark.parametrize(
    ("command", "written", "fixed"),
    [
        (
            "dino train -e {config_path} 'model.backbone=my run'",
            "write \"'model.backbone=my run'\" in the command, quotes and all",
            "dino train -e {config_path} \"'model.backbone=my run'\"",
        ),
        (
            ["dino", "train", "-e", "{config_path}", "model.backbone=my run"],
            "make the item 'model.backbone=my run', quotes and all",
            ["dino", "train", "-e", "{config_path}", "'model.backbone=my run'"],
        ),
    ],
    ids=["string", "list"],
)
def test_a_word_the_entrypoint_splits_is_told_how_to_reach_hydra_whole(
    taospec: Runner, tmp_path: Path, command: object, written: str, fixed: object
) -> None:
    # a string command was told to "make the word 'model.backbone=my run'", which is what
    # it held: taospec's own split takes those quotes off before the entrypoint sees them
    done = taospec("validate", dino_job(tmp_path, command))
    assert done.returncode == 2, done.stderr
    assert f"set the key in spec: instead, or {written}: TAO's entrypoint takes" in done.stderr
    mended = taospec("validate", dino_job(tmp_path, fixed))
    assert mended.returncode == 0, mended.stderr


TAO_ACTION = Path(__file__).with_name("tao_action.py")
SETS_THE_SPEC = "train.num_epochs=6"


def tao_runs(folder: Path, words: list[str]) -> str | None:
    """What TAO's action, started as TAO's entrypoint starts it (:mod:`tests.tao_action`),
    runs with ``words`` after its ``-e`` on a spec file of a ``train.num_epochs``: the spec,
    Hydra's settings and the folder it runs with, or None where it runs nothing or fails."""
    spec = folder / "spec.yaml"
    spec.write_text("train:\n  num_epochs: 3\n")
    done = subprocess.run(
        [sys.executable, TAO_ACTION, "train", "-e", spec, *words],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    ran = [line for line in done.stdout.splitlines() if line.startswith("RAN ")]
    return ran[0] if done.returncode == 0 and len(ran) == 1 else None


@pytest.mark.slow
@pytest.mark.parametrize(
    "words",
    [
        ["-h"],  # the entrypoint's own help
        ["--help"],
        ["--he"],
        ["-h", "-e", "{config_path}"],
        ["train.num_epochs=6 -h"],  # split again: Hydra's help
        ["--hydra-help"],
        ["--version"],
        ["--cfg", "job"],
        ["-cjob"],
        ["--cfg=all", "--resolve", "--package", "train"],
        ["--info"],
        ["-i", "config"],
        ["--shell-completion"],
        ["-sc", "install=bash"],
        ["-m"],
        ["-rm"],
        ["--multirun", SETS_THE_SPEC],
        ["--resolve"],
        ["--package", "train"],
        ["-p", "train", SETS_THE_SPEC],
        ["--experimental-rerun", "x"],
        ["--config-name", "spec.yaml"],
        ["-cn", "other.yaml"],
        ["-cp", "/"],
        ["hydra.run.dir=/tmp/elsewhere"],
        ["++hydra.run.dir=/tmp/elsewhere"],
        ["hydra.output_subdir=.hydra"],
        ["hydra/hydra_logging=disabled"],
        ["--run"],  # asks for what is done anyway: taken
        ["-r", SETS_THE_SPEC],
        ["hydra.job.chdir=true"],
        ["hydra.job.name=x"],
        ["hydra.verbose=true"],
        ["hydra/job_logging=stdout"],  # what TAO sets anyway
        ["-cd", "/"],  # another folder to find configs in
    ],
)
def test_a_word_is_refused_where_tao_s_run_with_it_runs_nothing_or_as_without_it(
    taospec: Runner, tmp_path: Path, words: list[str]
) -> None:
    # TAO's entrypoint and runner start Hydra's run their own way: a help or a printed
    # config ends the job COMPLETE having run nothing, a multirun runs the action in a
    # folder of its own, and TAO sets hydra.run.dir, hydra.output_subdir and
    # hydra/job_logging after the job's words
    bare = tao_runs(tmp_path, [word for word in words if word == SETS_THE_SPEC])
    assert bare is not None
    plain = [word.replace("{config_path}", str(tmp_path / "spec.yaml")) for word in words]
    ran = tao_runs(tmp_path, plain)
    asks_the_default = words[0] in ("--run", "-r")
    elsewhere = ran is not None and json.loads(ran[4:])["cwd"] != str(tmp_path)  # multirun
    unrun = ran is None or elsewhere or (ran == bare and not asks_the_default)
    file = dino_job(tmp_path, ["dino", "train", "-e", "{config_path}", *words])
    done = taospec("validate", file)
    assert done.returncode == (2 if unrun else 0), (ran, done.stderr)
    if unrun:
        assert f"{file}:6:" in done.stderr
        assert "$.command[4]" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "words",
    [
        ["train.num_epochs=6", "train.num_epochs=7"],
        ["train.num_epochs=6", "++train.num_epochs=7"],
        ["train.num_epochs=6", "+train.x=1", "train.num_epochs=7"],
        ["train.num_epochs=6", "~train.num_epochs"],
        ["train.num_epochs=6", "~train"],
        ["+train.x=1", "++train.x=2"],
        ["+train.x=1", "train.x=2"],  # the add makes the key the set needs
        ["+train.x=1", "~train.x"],  # the add makes the key the delete needs
        ["train.num_epochs=6", "~train.num_epochs", "+train.num_epochs=7"],
        ["train.num_epochs=6", "hydra.job.name=x"],
        ["train.num_epochs=6", "+train.x=1"],
        ["train={num_epochs:6}", "train.num_epochs=7"],
        ["train.num_epochs=6", "train={num_epochs:7}"],  # a mapping merges: read as a set
        ["hydra.job.name=a", "hydra.job.name=b"],
    ],
)
def test_a_word_is_refused_where_a_later_one_undoes_it(
    taospec: Runner, tmp_path: Path, words: list[str]
) -> None:
    # Hydra reads the words in order, so a later set or delete of a key leaves the run
    # as it would be without the word before it, which a reviewer reads as taking effect
    ran, without = tao_runs(tmp_path, words), tao_runs(tmp_path, words[1:])
    assert ran is not None
    file = dino_job(tmp_path, ["dino", "train", "-e", "{config_path}", *words])
    done = taospec("validate", file)
    undone = ran == without
    assert done.returncode == (2 if undone else 0), done.stderr
    assert ("$.command[4]" in done.stderr) == undone


UNDONE_WORDS = [
    "train.a=5", "train.a=6", "++train.a=7", "+train.c=1", "++train.c=2", "train.c=3",
    "~train.a", "~train.c", "~train", "+train={c:4}", "train={a:8}", "train={a:9,b:9}",
    "train.b=[1]", "~train.b",
]  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(UNDONE_WORDS), min_size=2, max_size=5))
@example(["train.a=5", "train={a:8}"])
@example(["+train.c=1", "++train.c=2"])
@example(["~train", "++train.a=7", "~train", "++train.a=7"])
def test_a_word_said_to_be_undone_changes_nothing_hydra_composes(words: list[str]) -> None:
    def composed(these: list[str]) -> object:
        spec = OmegaConf.create({"train": {"a": 1, "b": 2}})
        OmegaConf.set_struct(spec, True)  # as Hydra holds the spec it applies them to
        try:
            ConfigLoaderImpl._apply_overrides_to_config(PARSER.parse_overrides(these), spec)
            return OmegaConf.to_container(spec)
        except (HydraException, OmegaConfBaseException) as exc:
            return type(exc)

    whole = composed(words)
    assume(isinstance(whole, dict))  # a word the spec cannot take fails the run instead
    command = ["dino", "train", "-e", "{config_path}", *words]
    for each, _, _ in overrides.undone(list(overrides.given(command, "train"))):
        at = each.index - 4
        assert whole == composed(words[:at] + words[at + 1 :]), words[at]


GROUP_PARTS = ["~", "+", "a", "b", "/", "@", ".", "=", "1", "0", "_", "-", "$", ":", " "]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(GROUP_PARTS), max_size=9).map("".join))
@example("a/b=x")
@example("a@p=x")
@example("~a/b")
@example("@a.1=")  # a package's later parts may be numbers
def test_a_config_group_s_override_is_read_where_hydra_reads_one(word: str) -> None:
    try:
        hydra = PARSER.parse_override(word)
    except HydraException:
        return  # Hydra refuses the word whatever taospec makes of it
    named = "/" in hydra.key_or_group or hydra.package is not None
    package = "" if hydra.package is None else f"@{hydra.package}"
    assert overrides.group(word) == (hydra.key_or_group + package if named else None)


def test_a_word_that_is_no_override_is_not_read_as_one() -> None:
    for word in ("--gpus", "2", "/data/x=1", "-k", "key", "a b=1", "{config_path}"):
        assert override(word) is None


@pytest.mark.parametrize(
    "words",
    [
        ["train.num_epochs=5"],
        ["train.optim.lr=0.01", "model.depth=4"],
        ["results_dir={results_dir}/run"],
        ["dataset.classes=[a,b,c]"],
        ["model.backbone='tiny_a,tiny_b'"],
        ["+train.extra=1"],  # added: Hydra's + adds a key a structured spec lacks
        ["+train.num_epochs=5"],  # held already: + only adds
        ["+train.optim={lr: 1}"],  # a mapping merges into what is held
        ["+dataset.classes=[c]"],
        ["+dataset.train_data_sources.0.image_dir=/x"],
        ["++train.optim.lr=0.5"],
        ["~train.checkpoint_interval"],
        ["dataset.train_data_sources.0.image_dir=/data/x"],
        ["train.optim.lrr=0.01"],
        ["trian.num_epochs=5"],
        ["~train.optim.lrr"],
        ["model.backbone=tiny_a,tiny_b"],
        ["train.num_epochs=choice(1,2)"],
        ["train.num_epochs=5", "model.deep=3"],
        ["hydra.job.name=tiny"],  # Hydra's own configuration
        # the entrypoint splits its words again as a shell does before Hydra reads them
        ["model.backbone=\"'tiny_a,tiny_b'\""],  # Hydra gets the quotes: text
        ["'model.backbone=tiny_a\\,tiny_b'"],  # Hydra gets \,: text
        ["train.num_epochs=5 6"],  # Hydra gets 6 as a word of its own
        ["'train.num_epochs=5'"],
        ["train.optim.lrr='0.1'"],
        ["'train.optim.lrr=0.1'"],
        ["model.backbone='tiny_a"],  # the entrypoint cannot split it
        # TAO's Hydra has the spec file, and no config groups but Hydra's own
        ["model/backbone=tiny_b"],
        ["~model/backbone"],
        ["train@x=1"],
        ["model.backbone@pkg=tiny_b"],
        ["hydra/hydra_logging=disabled"],
        # a mapping merges into the one the spec holds
        ["train.optim={lr:0.5}"],
        ["train.optim={lrr:0.5}"],
        ["train.optim={}"],
        ["model={backbone:tiny_b,depth:3}"],
        ["train={optim:{lr:0.5}}"],
        ["train={optim:{lr:0.5,x:1}}"],
        ["+train={optim:{x:1}}"],
        ["++train.optim={x:1}"],
        ["train.optim={1:1}"],
        ["dataset.train_data_sources=[{image_dir:/x,json_file:/y}]"],
        # TAO's spec is the network's dataclass config: typed, it deletes no key of its
        # own and merges in no key its fields lack, + or not
        ["~train.optim.lr"],
        ["~train.optim"],
        ["~wandb"],
        ["~train"],  # the top level is Hydra's own
        ["+train.optim={x:1}"],
        ["+train.optim={lr:0.5}"],
        ["+train.optim.x=1"],
        ["+train.extra={a:1}"],
        # Hydra reads the words in order, each on the spec the ones before it left
        ["+train.extra=1", "train.extra=2"],
        ["train.extra=2", "+train.extra=1"],
        ["+train.extra=1", "+train.extra=2"],
        ["+train.extra=1", "~train.extra"],
        ["~train.extra", "+train.extra=1"],
        ["+train.extra={a:1}", "train.extra.a=2", "train.extra.b=3"],
        ["+train.extra={a:1}", "train.extra={b:1}"],
        ["+train.extra={a:1}", "~train.extra.a", "train.extra.a=2"],
        ["+train.extra={a:1}", "~train.extra.a", "+train.extra.a=2"],
        ["~train", "train.num_epochs=5"],
        ["~train", "+train.num_epochs=5"],
        ["~train", "~train"],
        ["++train.extra=1", "train.extra=2"],
    ],
)
def test_an_override_is_refused_exactly_where_hydra_refuses_it(
    taospec: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, words: list[str]
) -> None:
    file = tiny_skill_job(taospec, tmp_path)
    plain = tiny_skill_job_spec_file(file, monkeypatch)
    # a job's text writes a brace it holds twice over ('}}' stands for one)
    command = [
        "tiny_net",
        "train",
        "-e",
        "{config_path}",
        *(w.replace("}}", "}}}}") for w in words),
    ]
    text = file.read_text().replace(
        "action: train\n", f"action: train\ncommand: {json.dumps(command)}\n"
    )
    file.write_text(text)
    refused = tao_refuses(tmp_path / "specs", plain, words)
    done = taospec("validate", file)
    assert (done.returncode, bool(refused)) in {(0, False), (2, True)}, (refused, done.stderr)
    if refused:
        line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith("command:"))
        assert f"{file}:{line}:" in done.stderr
        assert "$.command[" in done.stderr
        assert "Hydra" in done.stderr


def tao_refuses(folder: Path, plain: str, words: list[str]) -> str:
    """Why TAO refuses the spec file ``plain`` with ``words`` after its ``-e``, or "": its
    entrypoint splits the words again, its Hydra composes the file, validated against the
    network's dataclass config of the same name (here the tiny skill's schema made one:
    :func:`dataclass_of`), with what it gets as overrides, and OmegaConf resolves every
    value as TAO reads them."""
    folder.mkdir()
    (folder / "spec.yaml").write_text(plain)
    filled = [word.replace("{results_dir}", "/results/job-1") for word in words]
    store = ConfigStore.instance()
    store.store(name="spec", node=dataclass_of(TINY_SCHEMA, "ExperimentConfig"))
    try:
        passed = tao_passes(["train", "-e", "{config_path}", *filled])
        assert passed is not None
        with warnings.catch_warnings(), initialize_config_dir(str(folder), version_base=None):
            warnings.simplefilter("ignore")  # Hydra's note that the same name is deprecated
            OmegaConf.to_container(compose("spec", passed), resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        return str(exc)
    finally:
        del store.repo["spec.yaml"]
    return ""


TINY_SCHEMA = json.loads(
    (BANK / "skills/models/tao-train-tiny/schemas/train.schema.json").read_text()
)
_LEAVES: dict[str, Any] = {"int": int, "float": float, "bool": bool, "string": str}
_LEAVES.update(categorical=str, list=list[Any], collection=dict[str, Any])


def dataclass_of(node: dict[str, Any], name: str) -> Any:
    """The dataclass config a TAO network declares, as its JSON ``node`` in a skill's schema
    lists it: a node with properties is a dataclass of those fields, each typed as TAO's
    schema names it, its default the schema's (a mapping whose keys are no Python names
    stays a dict)."""
    fields = []
    for key, member in node.get("properties", {}).items():
        kind = member.get("type")
        if (
            kind in ("collection", "object")
            and "properties" in member
            and all(each.isidentifier() for each in member["properties"])
        ):
            nested = dataclass_of(member, f"{name}_{key}")
            fields.append((key, nested, dataclasses.field(default_factory=nested)))
            continue
        default = member.get(
            "default", [] if kind == "list" else {} if kind == "collection" else None
        )
        typed = _LEAVES.get(kind, Any)
        factory = functools.partial(copy.deepcopy, default)
        fields.append((key, typed | None, dataclasses.field(default_factory=factory)))
    return dataclasses.make_dataclass(name, fields)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("train: {pretrained_model_path: '${train.extra}'}", ["+train.extra=/m.pth"]),
        ("train: {pretrained_model_path: '${train.extra}'}", ["++train.extra=/m.pth"]),
        ("train: {pretrained_model_path: '${train.extra}'}", []),
        ("train: {pretrained_model_path: '${train.extra}'}", ["+train.extr=/m.pth"]),
        ("train: {pretrained_model_path: '${train.extra.a}'}", ["+train.extra={a:/m}"]),
        ("train: {pretrained_model_path: '${train.extra}'}", ["train.extra=/m.pth"]),
        (
            "train: {num_epochs: 3}",
            ["+train.extra=/m", "train.pretrained_model_path=${train.extra}"],
        ),
        (
            "train: {num_epochs: 3}",
            ["train.pretrained_model_path=${train.extra}", "+train.extra=/m"],
        ),
    ],
)
def test_an_interpolation_is_judged_on_the_spec_hydra_composes(
    taospec: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, words: list[str]
) -> None:
    # Hydra adds a + key before OmegaConf resolves the spec: an interpolation may name it
    # the interpolation hidden from taospec while it writes the spec file TAO reads
    file = tiny_skill_job(taospec, tmp_path, re.sub(r"\$\{(.*?)\}", r"OPEN_\1_CLOSE", spec))
    plain, text = tiny_skill_job_spec_file(file, monkeypatch), file.read_text()
    plain, text = (re.sub("OPEN_(.*?)_CLOSE", r"${\1}", each) for each in (plain, text))
    command = ["tiny_net", "train", "-e", "{config_path}", *words]
    text = text.replace("action: train\n", f"action: train\ncommand: {json.dumps(command)}\n")
    file.write_text(text)
    refused = tao_refuses(tmp_path / "specs", plain, words)
    done = taospec("validate", file)
    assert (done.returncode, bool(refused)) in {(0, False), (2, True)}, (refused, done.stderr)
    if refused:
        assert "${train.extr" in done.stderr or "train.extra" in done.stderr


def tiny_skill_job_spec_file(file: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The spec file taospec writes for the skill job ``file``, its job id ``job-1``."""
    monkeypatch.setenv("TAO_SKILL_BANK", str(BANK))
    return spec_file(file)


def test_a_string_command_s_overrides_are_read_and_refused_at_its_line(
    taospec: Runner, tmp_path: Path
) -> None:
    file = tiny_skill_job(taospec, tmp_path)
    text = file.read_text().replace(
        "action: train\n",
        "action: train\ncommand: tiny_net train -e {config_path} train.optim.lrr=0.1\n",
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == 2
    assert f"{file}:4:10: $.command: 'train.optim.lrr=0.1': the spec holds no " in done.stderr
    assert "spec.train.optim.lrr (did you mean train.optim.lr?)" in done.stderr


def test_words_after_another_command_are_its_own(taospec: Runner, tmp_path: Path) -> None:
    # not the skill's entrypoint: its key=value words are its own
    file = tiny_skill_job(taospec, tmp_path)
    text = file.read_text().replace(
        "action: train\n", "action: train\ncommand: [env, 'trian.num_epochs=a,b', tiny_net]\n"
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        (["dino", "train", "-e", "{config_path}", "model.backbone=a,b"], True),
        (["tao", "model", "dino", "train", "-e", "{config_path}", "train.lr=choice(1,2)"], True),
        ("dino train -e {config_path} 'model.backbone=a, b'", True),
        (["dino", "train", "-e", "{config_path}", "dataset.classes=[a,b]", "x=\"'a,b'\""], False),
        (["dino", "train", "-e", "{config_path}", "x='a,b'"], True),  # Hydra gets x=a,b
        (["dino", "train", "-e", "{config_path}", "x=a\\,b"], True),  # Hydra gets x=a,b
        (["dino", "train", "-e", "{config_path}", "'x=a\\,b'"], False),
        (["dino", "train", "--experiment_spec_file={config_path}", "x=a,b"], True),
        (["dino", "train", "x=a,b", "-e", "{config_path}"], True),
        (["dino", "train", "-e", "{config_path}", "-m", "x=a,b"], True),  # one job a record
        (["dino", "evaluate", "-e", "{config_path}", "model.backbone=a,b"], False),  # not train
        (["env", "-e", "{config_path}", "model.backbone=a,b"], False),
    ],
)
def test_a_sweep_given_to_any_tao_entrypoint_is_refused(
    taospec: Runner, tmp_path: Path, command: object, refused: bool
) -> None:
    # a job without a skill has no schema for the keys, but Hydra reads its values alike
    file = dino_job(tmp_path, command)
    done = taospec("validate", file)
    assert done.returncode == (2 if refused else 0), done.stderr
    if refused:
        assert f"{file}:6:" in done.stderr
        assert ": $.command" in done.stderr
        assert "reads this value as a sweep over several values" in done.stderr
        multirun = "Hydra's multirun (-m) takes, running the values one after another"
        assert (multirun in done.stderr) == ("-m" in command), done.stderr


@pytest.mark.parametrize(
    ("word", "said"),
    [
        ("x=[a,b", "at its end: a comma, or the ] that closes the ["),
        ("x=a)", "at ')' (character 2): a value ends here"),
        ("train.loss=$(id)", "at '(' (character 2): a value ends here"),
        ("x=#x", "at '#' (character 1): Hydra reads unquoted text of ASCII letters"),
        ("x=café", "at 'é' (character 4): Hydra reads unquoted text"),
        ("x=foo(1)", "Hydra has no function foo"),
        ("train.gpu_ids=[0,]", "at ']' (character 4): a value, which is missing"),
        ("x=\"{'a':1}\"", "a key of the mapping, unquoted"),  # TAO's split leaves the '
        ("x='café'", "at 'é' (character 4)"),  # and takes these away
        ("x=\"'café'\"", ""),
        ("x=int(1)", ""),
        ("'x={a: [1, 2]}'", ""),
        ("x=${y}z", ""),
        ("results_dir={results_dir}", ""),
    ],
)
def test_a_value_hydra_s_grammar_cannot_read_is_refused_at_the_command(
    taospec: Runner, tmp_path: Path, word: str, said: str
) -> None:
    # validate passed each, where a sweep in the same place was refused, and the job
    # stopped at Hydra's OverrideParseException once it had started
    file = dino_job(tmp_path, ["dino", "train", "-e", "{config_path}", word])
    done = taospec("validate", file)
    assert done.returncode == (2 if said else 0), done.stderr
    if said:
        assert f"{file}:6:" in done.stderr
        assert f"$.command[4]: {word!r}" in done.stderr
        assert (
            "Hydra, which reads the words after -e {config_path} as overrides of the spec, "
            "cannot read this value"
        ) in done.stderr
        assert said in done.stderr


@dataclasses.dataclass
class Typed:
    """A spec of one key of each type a skill's schema names, as TAO's config declares it."""

    integer: int = 0
    number: float = 0.0
    flag: bool = False
    text: str = ""
    items: list[Any] = dataclasses.field(default_factory=list)
    mapping: dict[str, Any] = dataclasses.field(default_factory=dict)


TYPED_SCHEMA = {
    "properties": {
        "integer": {"type": "int"},
        "number": {"type": "float"},
        "flag": {"type": "bool"},
        "text": {"type": "string"},
        "items": {"type": "list"},
        "mapping": {"type": "collection"},
    }
}
TYPED_PARTS = [
    "1", "0", "_", ".", "e", "-", "inf", "true", "yes", "Off", "null", "a", " ", "'", "[", "]",
    "{", "}", ":", "x", "int(", ")", "${integer}",
]  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(
    key=st.sampled_from(sorted(TYPED_SCHEMA["properties"])),
    value=st.lists(st.sampled_from(TYPED_PARTS), max_size=6).map("".join),
)
@example(key="integer", value="'5'")
@example(key="flag", value="1")
@example(key="number", value="1_0e3")
def test_a_value_is_refused_for_a_key_s_type_exactly_where_omegaconf_refuses_it(
    key: str, value: str
) -> None:
    word = f"{key}={value}"
    try:
        parsed = PARSER.parse_overrides([word])
    except HydraException:
        return  # Hydra refuses the word whatever taospec makes of it
    read = override(word)
    assert read is not None
    if read.sweep or typed(read.value) is UNREAD or typed(read.value) is None:
        return  # a sweep is refused on its own; the rest is Hydra's to evaluate
    if typed(read.value):
        return  # a mapping merges into the one held, and a key it adds is refused (below)
    spec = OmegaConf.structured(Typed)
    OmegaConf.set_struct(spec, True)
    try:
        ConfigLoaderImpl._apply_overrides_to_config(parsed, spec)
    except HydraException:
        refused = True
    else:
        refused = False
    assert (converted_to(TYPED_SCHEMA, key, typed(read.value)) is not None) == refused


@pytest.mark.parametrize(
    ("word", "refused"),
    [
        ("train.num_epochs=ten", True),
        ("model={depth:ten}", True),  # a mapping's values are set on their keys' types
        ("model={depth:3}", False),
        ("train={optim:{lr:fast}}}}", True),  # '}}}}': the job's text doubles a brace
        ("train={optim:{lr:0.5}}}}", False),
        ("train.num_epochs='5'", False),  # OmegaConf makes the text 5
        ("train.num_epochs=5.0", True),
        ("train.optim.lr=1e-3", False),
        ("train.optim.lr=fast", True),
        ("train.optim.amp=yes", False),
        ("train.optim.amp=maybe", True),
        ("dataset.classes=a", True),
        ("dataset.classes=[a,b]", False),
        ("train.pretrained_model_path=[a]", True),
        ("train.optim.lr=${train.optim.warmup_lr}", False),
        ("train.optim.lr=${train.optim.warmup}", True),
        ("train.num_epochs={job_id}", False),  # filled when the plan is rendered: not known here
    ],
)
def test_a_skill_job_s_override_value_is_read_as_omegaconf_sets_it(
    taospec: Runner, tmp_path: Path, word: str, refused: bool
) -> None:
    file = tiny_skill_job(taospec, tmp_path)
    command = ["tiny_net", "train", "-e", "{config_path}", word]
    text = file.read_text().replace(
        "action: train\n", f"action: train\ncommand: {json.dumps(command)}\n"
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == (2 if refused else 0), done.stderr
    if refused:
        assert f"{file}:4:" in done.stderr
        assert "$.command[4]" in done.stderr


@pytest.mark.parametrize(
    ("platform", "word", "warned"),
    [
        ("docker", "dataset.train_data_sources.0.image_dir=/data/x", True),
        ("docker", "dataset.train_data_sources=[{image_dir:/y}]", True),  # a key holding one
        ("docker", "train.pretrained_model_path=/mnt/m.pth", False),  # a mounts: entry holds it
        ("docker", "train.pretrained_model_path=/opt/m.pth", True),
        ("docker", "train.num_epochs=3", False),
        ("local", "dataset.train_data_sources.0.image_dir=/data/x", False),  # read where it is
    ],
)
def test_an_input_set_by_an_override_is_said_to_be_left_unmounted(
    taospec: Runner, tmp_path: Path, platform: str, word: str, warned: bool
) -> None:
    # taospec mounts an input the spec sets; one a command sets reached a container that
    # had no such path, once the job had started
    file = tiny_skill_job(taospec, tmp_path)
    command = ["tiny_net", "train", "-e", "{config_path}", word]
    text = file.read_text().replace(
        "action: train\n",
        f"action: train\nplatform: {platform}\ncommand: {json.dumps(command)}\n"
        + (f"mounts: [{{source: {tmp_path}, target: /mnt}}]\n" if platform != "local" else ""),
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == 0, done.stderr
    said = f"warning: {word!r} sets tao-train-tiny's input "
    assert (said in done.stderr) == warned, done.stderr


@pytest.mark.parametrize(
    ("gpus", "word", "refused"),
    [
        ("[0, 1]", "train.num_gpus=2", False),
        ("[0, 1]", "train.num_gpus=4", True),
        ("[0]", "++train.num_gpus=8", True),
        ("all", "train.num_gpus=8", False),  # which GPUs 'all' names is the host's to say
    ],
)
def test_an_override_of_the_gpu_count_must_agree_with_gpus(
    taospec: Runner, tmp_path: Path, gpus: str, word: str, refused: bool
) -> None:
    # taospec sets the skill's gpu_spec_key from gpus:, and refuses a spec that says
    # otherwise; the same key given on the command line slipped past it
    file = tiny_skill_job(taospec, tmp_path)
    command = ["tiny_net", "train", "-e", "{config_path}", word]
    spec = "  train: {num_gpus: 8}\n" if gpus == "all" else ""
    text = (
        file.read_text().replace(
            "action: train\n",
            f"action: train\nplatform: docker\ngpus: {gpus}\ncommand: {json.dumps(command)}\n",
        )
        + spec
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == (2 if refused else 0), done.stderr
    if refused:
        assert "but gpus: names" in done.stderr


@pytest.mark.parametrize(
    ("words", "spec", "launched"),
    [
        # TAO's PyTorch entrypoint takes the number of GPUs from its words once one names
        # num_gpus, gpu_ids or cuda_blocking: the first num_gpus= read with int() (1 without
        # one), the first gpu_ids= with ast.literal_eval() ([0] without one), each up to the
        # next blank, and launches the larger of the count and the number of ids
        (["train.gpu_ids=[0,1]"], "", 2),
        (["train.gpu_ids=[0]"], "", 1),
        (["train.gpu_ids=[0]", "train.num_gpus=2"], "", 2),
        (["+train.cuda_blocking=true"], "", 1),
        (["+train.cuda_blocking=true", "train.num_gpus=2"], "", 2),
        (["train.gpu_ids='[0,1]'"], "", 5),  # the literal is the text '[0,1]', 5 long
        (["train.num_gpus='2'"], "", None),  # int("'2'") fails
        (["train.gpu_ids=[0]", "results_dir={results_dir}"], "", 1),
        (["train.gpu_ids={job_id}"], "", 2),  # known once the plan fills it: left to TAO
        # otherwise from the spec's train section: num_gpus (taospec's, from gpus:), gpu_ids
        ([], "train: {gpu_ids: [0, 1, 2]}", 3),
        ([], "train: {gpu_ids: [0]}", 2),
        ([], "", 2),
    ],
)
def test_the_number_of_gpus_tao_s_entrypoint_launches_must_be_the_one_gpus_names(
    taospec: Runner, tmp_path: Path, words: list[str], spec: str, launched: int | None
) -> None:
    file = tiny_skill_job(taospec, tmp_path, spec)
    command = ["tiny_net", "train", "-e", "{config_path}", *words]
    text = file.read_text().replace(
        "action: train\n",
        f"action: train\nplatform: docker\ngpus: [0, 1]\ncommand: {json.dumps(command)}\n",
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == (0 if launched == 2 else 2), done.stderr
    if launched is None:
        assert "fails on these words" in done.stderr
    elif launched != 2 and words:
        assert f"launch the action on {launched} GPU(s), but gpus: names 2" in done.stderr
        assert "$.command[4]" in done.stderr
    elif launched != 2:
        assert f"$.spec.train.gpu_ids: names {launched} GPU ids" in done.stderr


def validate_tiny(
    taospec: Runner, tmp_path: Path, spec: str, command: list[str], head: str
) -> subprocess.CompletedProcess[str]:
    """``validate`` of the tiny skill's job whose spec holds ``spec``, run as ``command``
    (its action the second word), with the keys in ``head`` added."""
    file = tiny_skill_job(taospec, tmp_path, spec)
    keys = f"action: {command[1]}\n{head}command: {json.dumps(command)}\n"
    file.write_text(file.read_text().replace("action: train\n", keys))
    return taospec("validate", file)


@pytest.mark.parametrize(
    ("platform", "gpus", "words", "spec", "said"),
    [
        ("docker", "[2, 3]", [], "train: {gpu_ids: [2, 3]}", "$.spec.train.gpu_ids: "),
        ("docker", "[2, 3]", [], "train: {gpu_ids: [0, 1]}", ""),
        ("docker", "[2, 3]", [], "train: {gpu_ids: [1, 0]}", ""),
        # fewer ids than GPUs: TAO's entrypoint uses 0 to 1 instead
        ("docker", "[2, 3]", [], "train: {gpu_ids: [3]}", ""),
        ("docker", "{free: 2}", [], "train: {gpu_ids: [1, 2]}", "$.spec.train.gpu_ids: "),
        ("docker", "[2, 3]", [], "train: {gpu_ids: [0, -1]}", "$.spec.train.gpu_ids: "),
        ("docker", "[2, 3]", ["train.gpu_ids=[2,3]"], "", "$.command[4]: 'train.gpu_ids=[2,3]'"),
        # the entrypoint takes the words' ids, not the spec's
        ("docker", "[2, 3]", ["train.gpu_ids=[0,1]"], "train: {gpu_ids: [2, 3]}", ""),
        ("docker", "[2, 3]", ["train.gpu_ids=[1]", "train.num_gpus=2"], "", ""),
        ("docker", "[0, 1]", [], "train: {gpu_ids: [0, 1]}", ""),
        # a local process is shown its GPUs from 0 by CUDA_VISIBLE_DEVICES
        ("local", "[2, 3]", [], "train: {gpu_ids: [2, 3]}", "$.spec.train.gpu_ids: "),
        ("local", "[2, 3]", [], "train: {gpu_ids: [0, 1]}", ""),
        ("local", "{free: 2}", [], "train: {gpu_ids: [1, 2]}", "$.spec.train.gpu_ids: "),
    ],
)
def test_a_container_s_gpus_are_named_from_0_whichever_ids_gpus_gives(
    taospec: Runner,
    tmp_path: Path,
    platform: str,
    gpus: str,
    words: list[str],
    spec: str,
    said: str,
) -> None:
    # docker run --gpus '"device=2,3"' shows the container GPUs 0 and 1; TAO's run took
    # train.gpu_ids [2, 3] as the devices to train on, and failed once it had started
    command = ["tiny_net", "train", "-e", "{config_path}", *words]
    head = f"platform: {platform}\ngpus: {gpus}\n"
    done = validate_tiny(taospec, tmp_path, spec, command, head)
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said and platform == "docker":
        assert "the container sees its 2 GPUs as 0 and 1" in done.stderr
    elif said:
        shown = "2,3" if gpus == "[2, 3]" else "the ids picked at submit"
        assert f"CUDA_VISIBLE_DEVICES={shown} shows the process its 2 GPUs as 0 and 1" in (
            done.stderr
        )


@pytest.mark.parametrize(
    ("gpus", "words", "spec", "said"),
    [
        ("[2, 3]", [], "train: {gpu_ids: [2, 3]}", ""),
        ("[2, 3]", [], "train: {gpu_ids: [3, 2]}", ""),
        ("[2, 3]", [], "train: {gpu_ids: [0, 1]}", "the GPUs these ids number (0, 1), but"),
        ("[2, 3]", [], "", "on GPUs 0, 1 (0 to 1, where no gpu_ids are given), but"),
        ("[2, 3]", [], "train: {gpu_ids: [2]}", "(0 to 1, as gpu_ids names only 1), but"),
        ("[0, 1]", [], "", ""),
        ("[2, 3]", ["train.gpu_ids=[0,1]"], "train: {gpu_ids: [2, 3]}", "$.command[4]: 'train"),
        ("[2, 3]", ["train.gpu_ids=[2,3]"], "train: {gpu_ids: [0, 1]}", ""),
    ],
)
def test_a_local_torchrun_network_runs_on_the_host_gpus_its_ids_name(
    taospec: Runner, tmp_path: Path, gpus: str, words: list[str], spec: str, said: str
) -> None:
    # TAO's entrypoint launches bevfusion, pointpillars and rtdetr with torchrun, first
    # setting CUDA_VISIBLE_DEVICES to the ids: a local job given GPUs 2 and 3 ran on 0 and 1
    command = ["rtdetr", "train", "-e", "{config_path}", *words]
    done = validate_tiny(taospec, tmp_path, spec, command, f"platform: local\ngpus: {gpus}\n")
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said:
        assert (
            "but it launches rtdetr with torchrun, first setting CUDA_VISIBLE_DEVICES to "
            "them, in place of the 2,3 gpus: gives the process; write [2, 3]"
        ) in done.stderr


@pytest.mark.parametrize(
    ("gpus", "word", "spec", "said"),
    [
        ("[1]", "", ", gpu_id: 1", "$.spec.export.gpu_id: "),
        ("[1]", "", ", gpu_id: 0", ""),
        ("[1]", "export.gpu_id=1", "", "$.command[4]: 'export.gpu_id=1': "),
        ("[1]", "export.gpu_id=0", ", gpu_id: 1", ""),  # the word decides
        ("[4, 5]", "", ", gpu_id: 1", ""),
        ("all", "", ", gpu_id: 7", ""),  # how many 'all' holds is the host's to say
    ],
)
def test_one_gpu_an_action_runs_on_is_named_as_its_container_numbers_it(
    taospec: Runner, tmp_path: Path, gpus: str, word: str, spec: str, said: str
) -> None:
    # export set torch.cuda.set_device(export.gpu_id): "invalid device ordinal", at run
    command = ["tiny_net", "export", "-e", "{config_path}", *([word] if word else [])]
    exported = f"export: {{checkpoint: data/train.json{spec}}}"
    done = validate_tiny(taospec, tmp_path, exported, command, f"platform: docker\ngpus: {gpus}\n")
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr


@pytest.mark.parametrize(
    ("network", "spec", "said"),
    [
        ("tiny_net", ", gpu_id: 1", "$.spec.export.gpu_id: "),
        ("tiny_net", ", gpu_id: 0", ""),
    ],
)
def test_one_gpu_a_local_action_runs_on_is_named_as_its_process_sees_it(
    taospec: Runner, tmp_path: Path, network: str, spec: str, said: str
) -> None:
    command = [network, "export", "-e", "{config_path}"]
    exported = f"export: {{checkpoint: data/train.json{spec}}}"
    done = validate_tiny(taospec, tmp_path, exported, command, "platform: local\ngpus: [1]\n")
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said:
        assert "(1), but CUDA_VISIBLE_DEVICES=1 shows the process its GPU as 0; make it" in (
            done.stderr
        )


@pytest.mark.parametrize(
    ("action", "spec", "said"),
    [
        ("train", "train: {gpu_ids: [0, 1]}", "to the GPU ids it reads from the spec, in place"),
        ("export", "export: {checkpoint: data/train.json}", "CUDA_VISIBLE_DEVICES to 0, in place"),
    ],
)
def test_a_local_torchrun_network_cannot_take_gpus_picked_at_submit(
    taospec: Runner, tmp_path: Path, action: str, spec: str, said: str
) -> None:
    # TAO's entrypoint replaces CUDA_VISIBLE_DEVICES with ids written before submit
    command = ["rtdetr", action, "-e", "{config_path}"]
    done = validate_tiny(taospec, tmp_path, spec, command, "platform: local\ngpus: {free: 2}\n")
    assert done.returncode == 2, done.stderr
    assert "$.gpus: TAO's entrypoint launches rtdetr with torchrun, first setting " in done.stderr
    assert said in done.stderr
    assert "ids gpus: picks at submit, which the spec cannot name; name the GPUs" in done.stderr


@pytest.mark.parametrize(
    ("platform", "gpus", "spec", "said"),
    [
        ("local", "[1]", "", "$.gpus: TAO's entrypoint runs rtdetr export on the host's GPU 0"),
        ("local", "[0, 1]", "", "$.gpus: TAO's entrypoint runs rtdetr export on the host's"),
        ("local", "[0]", ", gpu_id: 0", ""),
        ("local", "[0]", ", gpu_id: 1", "$.spec.export.gpu_id: "),
        ("docker", "[1]", ", gpu_id: 0", ""),  # the container sees host GPU 1 as 0
        ("docker", "[1]", ", gpu_id: 1", "$.spec.export.gpu_id: "),
    ],
)
def test_a_torchrun_network_runs_an_action_that_reads_no_gpu_ids_on_gpu_0(
    taospec: Runner, tmp_path: Path, platform: str, gpus: str, spec: str, said: str
) -> None:
    # TAO's entrypoint reads GPU ids for train, evaluate, inference and distill, and sets
    # CUDA_VISIBLE_DEVICES to 0 for any other action of a network it launches with
    # torchrun: a local rtdetr export given GPU 1 ran on the host's GPU 0
    command = ["rtdetr", "export", "-e", "{config_path}"]
    exported = f"export: {{checkpoint: data/train.json{spec}}}"
    head = f"platform: {platform}\ngpus: {gpus}\n"
    done = validate_tiny(taospec, tmp_path, exported, command, head)
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said.startswith("$.gpus"):
        assert (
            "(it reads GPU ids only for train, evaluate, inference and distill): it launches "
            "rtdetr with torchrun, first setting CUDA_VISIBLE_DEVICES to 0 in place of the "
            f"{gpus[1:-1].replace(', ', ',')} gpus: gives the process; write [0], or run the "
            "job in a container"
        ) in done.stderr


@pytest.mark.parametrize(
    ("extra", "word", "spec", "said"),
    [
        ("", "", "results_dir: /workspace/out", "outside every folder mounted into it"),
        ("", "", "results_dir: /results/run1", ""),
        ("", "", "results_dir: /results/../workspace", "to /workspace, inside the container"),
        ("", "results_dir=/workspace/out", "", "$.command[4]: 'results_dir=/workspace/out': "),
        ("", "results_dir={results_dir}/a", "results_dir: /workspace/out", ""),  # the word wins
        ("mounts: [{source: /srv, target: /data}]", "", "results_dir: /data/out", ""),
        (
            "mounts: [{source: /srv, target: /data, readonly: true}]",
            "",
            "results_dir: /data/out",
            "into /data, which is mounted read-only",
        ),
        (
            "mounts: [{source: /srv, target: /data, readonly: true}, "
            "{source: /srv, target: /data/o}]",
            "",
            "results_dir: /data/o/run",
            "",
        ),
        ("", "", "results_dir: /inputs/0/x", "into /inputs, which is mounted read-only"),
        ("", "", "results_dir: out", ""),  # the container's working folder: left to TAO
        ("", "", "results_dir: ${train.optim.lr}", ""),  # OmegaConf's to resolve
        ("platform: local", "", "results_dir: /workspace/out", ""),  # a folder of the host
    ],
)
def test_what_the_action_writes_must_land_in_a_folder_mounted_writable(
    taospec: Runner, tmp_path: Path, extra: str, word: str, spec: str, said: str
) -> None:
    # results_dir: /workspace/out passed, and a run's checkpoints went into the
    # container's own file system, gone when the container was removed
    command = ["tiny_net", "train", "-e", "{config_path}", *([word] if word else [])]
    platform = "" if "platform" in extra else "platform: docker\n"
    done = validate_tiny(taospec, tmp_path, spec, command, f"{platform}{extra}\n")
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if said:
        assert "write it under /results (the job's results folder)" in done.stderr


def test_an_output_of_another_action_is_judged_too(taospec: Runner, tmp_path: Path) -> None:
    command = ["tiny_net", "export", "-e", "{config_path}", "export.onnx_file=/tmp/m.onnx"]
    exported = "export: {checkpoint: data/train.json}"
    done = validate_tiny(taospec, tmp_path, exported, command, "platform: docker\n")
    assert done.returncode == 2
    assert "'export.onnx_file=/tmp/m.onnx': TAO writes spec.export.onnx_file to /tmp/m.onnx" in (
        done.stderr
    )


@pytest.mark.parametrize(
    ("image", "refused"),
    [
        ("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-deploy", True),
        (f"nvcr.io/nvidia/tao/tao-toolkit:7.1.0-deploy@sha256:{'a1' * 32}", True),
        ("{versions_key: images.tao_toolkit.deploy}", True),
        ("nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt", False),
    ],
)
def test_a_job_naming_tao_deploy_s_image_has_its_words_read_as_bash_reads_them(
    taospec: Runner, tmp_path: Path, image: str, refused: bool
) -> None:
    # a job without a skill that runs TAO Deploy's entrypoint itself
    write(
        tmp_path / "versions.yaml",
        "images:\n  tao_toolkit:\n    deploy: nvcr.io/nvidia/tao/tao-toolkit:7.1.0-deploy\n",
    )
    command = ["dino", "gen_trt_engine", "-e", "{config_path}", "gen_trt_engine.x=$HOME"]
    file = write(
        tmp_path / "job.yaml",
        f"version: 1\nnetwork_arch: dino\naction: gen_trt_engine\nplatform: docker\n"
        f'image: {image}\nuser: "1000:1000"\nresults_root: {tmp_path}/r\n'
        f"command: {json.dumps(command)}\nspec: {{gen_trt_engine: {{x: 1}}}}\n",
    )
    done = taospec("validate", file)
    said = "$.command[4]: 'gen_trt_engine.x=$HOME': TAO Deploy's entrypoint runs the words"
    assert (said in done.stderr) == refused, done.stderr
    assert done.returncode == (2 if refused else 0), done.stderr


@pytest.mark.parametrize(
    ("words", "spec", "nodes", "said"),
    [
        ([], "", "", ""),  # the schema's 1
        ([], "train: {num_nodes: 1}", "", ""),
        ([], "train: {num_nodes: 2}", "", "$.spec.train.num_nodes: TAO would run"),
        ([], "train: {num_nodes: 2}", "platform: slurm\nnodes: 2\n", ""),
        (["train.num_nodes=2"], "", "", "$.command[4]: 'train.num_nodes=2': TAO would run"),
        (["train.num_nodes=2", "train.num_nodes=1"], "", "", "sets train.num_nodes again"),
        (["train.num_nodes=1"], "train: {num_nodes: 2}", "", ""),
        (["train.num_nodes={job_id}"], "", "", ""),  # known once the plan fills it
    ],
)
def test_the_number_of_nodes_tao_waits_for_must_be_the_job_s(
    taospec: Runner, tmp_path: Path, words: list[str], spec: str, nodes: str, said: str
) -> None:
    # TAO's run takes train.num_nodes from the spec it composes and waits for that many
    # nodes to join: a job on one host told of two waits until it is stopped
    file = tiny_skill_job(taospec, tmp_path, spec)
    command = ["tiny_net", "train", "-e", "{config_path}", *words]
    text = file.read_text().replace(
        "action: train\n", f"action: train\n{nodes}command: {json.dumps(command)}\n"
    )
    file.write_text(text)
    done = taospec("validate", file)
    assert done.returncode == (2 if said else 0), done.stderr
    assert said in done.stderr
    if "TAO would run" in said:
        assert "but the job has 1 (nodes: 1)" in done.stderr


def test_an_override_is_not_refused_where_no_schema_names_the_keys(
    taospec: Runner, tmp_path: Path
) -> None:
    # tao-train-tiny's export has no schema: TAO's own config may hold keys its spec lacks,
    # and results_dir=... was refused as a key the spec did not hold
    taospec.env["TAO_SKILL_BANK"] = str(BANK)
    checkpoint = tmp_path / "model.pth"
    checkpoint.write_text("weights\n")
    command = ["tiny_net", "export", "-e", "{config_path}", "results_dir=/r", "export.batch=2"]
    file = tmp_path / "job.yaml"
    file.write_text(
        "version: 1\nskill: tao-train-tiny\naction: export\nimage: busybox\n"
        f"results_root: {tmp_path}/r\ncommand: {json.dumps(command)}\n"
        f"spec: {{export: {{checkpoint: {checkpoint}, note: '${{export.size}}'}}}}\n"
    )
    done = taospec("validate", file)
    assert done.returncode == 0, done.stderr
