"""Quoting is correct by construction: hostile values survive a real bash intact.

Every string field a spec can hold gets values full of quotes, ``$()``,
backticks, newlines, spaces and unicode. The plan's text form, parsed back by
bash, must give exactly the plan's argument lists.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from taospec import dockerargs, lint, plantext, templates
from taospec.identity import Identity
from taospec.loader import load_jobfile
from taospec.placeholders import JOB_ID, escape
from taospec.plan import Step
from taospec.platforms import render
from taospec.rules import (
    DOCKER_OWN_OPTIONS,
    DOCKER_SHORT_FLAGS,
    docker_options,
    image_taken,
    shell_syntax,
)
from tests.conftest import bash_words, load_job

LAUNCHER = Identity(1000, 1000, (), "alice")
HOSTILE_PIECES = ["'", '"', "$(id)", "`id`", "\n", " ", "\\", "$HOME", "${x:-y}", "*", "!",
                  ";", "&&", "|", "#", "~", "é", "日本", "\t", "'\"'\"'", "--", "-e"]  # fmt: skip
JOB_IDS = st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True)


CONTROLS = "".join(map(chr, range(0x20))) + "\x7f"
"""The control characters, which a matrix value may not hold (it names its target)."""


def hostile(min_size: int = 0, exclude: str = "") -> st.SearchStrategy[str]:
    """Hostile text that holds no credential: validate refuses one (``/BEARER\r0000`` is
    a bearer token), so it is not a value a spec can hold."""
    alphabet = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00" + exclude)
    pieces = st.sampled_from([p for p in HOSTILE_PIECES if not set(p) & set(exclude)])
    texts = st.lists(st.one_of(st.text(alphabet, max_size=6), pieces), min_size=min_size)
    return texts.map("".join).filter(lambda text: not lint.find_secret_literals(text))


TAKEN = (
    *DOCKER_OWN_OPTIONS,
    "--label",
    "--label-file",
    "--volume",
    "--mount",
    "--tmpfs",
    "--attach",
)
"""Options that would take over one of taospec's own ``docker run`` (validate refuses them)."""


def takes_over(word: str) -> bool:
    """Whether docker reads ``word`` as one of :data:`TAKEN`; one-letter options run together,
    the first that takes a value ending the run (``-du0`` is ``-d -u 0``)."""
    if word.startswith("--"):
        flag, _, value = word.partition("=")
        return flag in TAKEN or (flag == "--detach" and value.lower() in ("false", "0", "f"))
    letters = word[1:] if word.startswith("-") else ""
    if re.fullmatch(r"-[diPqt]*d=(false|0|f)", word, re.IGNORECASE):  # -d=false runs attached
        return True
    taking = next((f"-{c}" for c in letters if c not in DOCKER_SHORT_FLAGS), "")
    return taking in ("-u", "-v", "-l", "-a")


def docker_args(text: st.SearchStrategy[str], max_size: int = 3) -> st.SearchStrategy[list[str]]:
    """``docker.extra_args`` of hostile words that take over none of taospec's options, give
    none a value docker run refuses (validate refuses ``-mx``, a memory of ``x``) and leave
    the image where it is: a word that is no option is the value of ``--hostname=``."""
    options = text.map(lambda word: word if word.startswith("-") else f"--hostname={word}")
    words = st.lists(options.filter(lambda word: not takes_over(word)), max_size=max_size)
    return words.filter(
        lambda args: (
            image_taken(args) is None
            and not any(dockerargs.misread(f, v) for _, f, v in docker_options(args))
        )
    )


def commands(max_size: int = 4) -> st.SearchStrategy[list[str]]:
    """A hostile command as a list of words, the program's name not empty (validate refuses
    an empty one)."""
    words = st.lists(hostile(min_size=1, exclude="{}"), min_size=1, max_size=max_size)
    return words.filter(lambda command: command[0] != "" and not lint.lint_argv(command))


def absolute(exclude: str = ":") -> st.SearchStrategy[str]:
    """An absolute path other than / (which validate refuses as a results_root)."""
    paths = hostile(exclude=exclude).map(lambda s: "/" + s)
    return paths.filter(lambda path: path.strip("/") and not lint.find_secret_literals(path))


def spec_document(draw: st.DrawFn, platform: str) -> dict[str, object]:
    no_braces = "{}"
    doc: dict[str, object] = {
        "version": 1,
        "network_arch": "arch",
        "action": "act",
        "platform": platform,
        "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
        "command": draw(commands()),
        "results_root": draw(absolute(exclude=":{}")),
        "user": "1000:1000",
        "env": {
            "pass": ["NGC_KEY"],
            "set": {"MODE": draw(hostile(exclude=no_braces))},
        },
        "spec": {"train": {"note": draw(hostile(exclude=no_braces))}},
    }
    if platform == "docker":
        source = draw(absolute(":{}"))
        doc["mounts"] = [{"source": source, "target": "/data", "readonly": draw(st.booleans())}]
        doc["docker"] = {"extra_args": draw(docker_args(hostile(exclude=no_braces)))}
    return doc


@st.composite
def documents(draw: st.DrawFn) -> dict[str, object]:
    return spec_document(draw, draw(st.sampled_from(["docker", "local"])))


def load(tmp_path: Path, doc: dict[str, object]):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))  # escaped: PyYAML emits a raw NEL it cannot read back
    return load_job(path)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=documents(), job_id=JOB_IDS)
def test_bash_reads_back_every_argument_exactly(tmp_path: Path, doc, job_id: str) -> None:
    job = load(tmp_path, doc)
    assert job.command == tuple(doc["command"])  # the YAML round trip kept every value
    plan = render(job, launcher=LAUNCHER)
    real = plan.with_job_id(job_id)
    for shown, ran in zip(plan.steps, real.steps, strict=True):
        text = plantext.argv_text(shown.argv)
        assert bash_words(text, {"JOB_ID": job_id}) == list(ran.argv), shown.name
        assert JOB_ID not in plantext.command_line(shown)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=documents())
def test_spec_file_heredoc_is_written_byte_for_byte(tmp_path: Path, doc) -> None:
    import subprocess

    plan = render(load(tmp_path, doc), launcher=LAUNCHER)
    step = next(s for s in plan.steps if s.name == "spec-file")
    opener, body = plantext.heredoc(step.stdin_text or "")
    out = subprocess.run(["bash", "-c", f"cat {opener}\n{body}\n"], capture_output=True, check=True)
    assert out.stdout.decode() == step.stdin_text
    assert yaml.safe_load(out.stdout)["train"]["note"] == doc["spec"]["train"]["note"]


@given(text=hostile())
def test_the_spec_file_reads_back_as_the_spec_for_any_text(text: str) -> None:
    from taospec.yamlsrc import dump_yaml

    assert yaml.safe_load(dump_yaml({"note": text, "list": [text]})) == {
        "note": text,
        "list": [text],
    }


@settings(max_examples=40, deadline=None)
@given(text=hostile())
def test_placeholder_id_splices_into_any_word(text: str) -> None:
    arg = text + JOB_ID + text
    assert bash_words(plantext.word(arg), {"JOB_ID": "my-id"}) == [text + "my-id" + text]


SHELL_TEXT = st.lists(
    st.one_of(
        st.sampled_from(["'", '"', "\\", " ", "\t", "\n", "\r", "#", "$", "`", JOB_ID, "\u00a0"]),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=4),
        hostile().map(shlex.quote),
    ),
    max_size=12,
).map("".join)


def split_or_error(split: Callable[[str], Sequence[str]], text: str) -> object:
    try:
        return tuple(split(text))
    except ValueError as error:
        return str(error)


@settings(max_examples=800)
@given(text=SHELL_TEXT)
def test_template_lines_split_exactly_as_shlex_splits_them(text: str) -> None:
    assert split_or_error(templates.argv, text) == split_or_error(shlex.split, text)


@given(words=st.lists(hostile(), max_size=6))
def test_quoted_words_split_back_to_themselves(words: list[str]) -> None:
    line = " ".join(templates.quote(word) for word in words)
    assert templates.argv(line) == tuple(words)


def sweep(tmp_path: Path, value: str, command: object) -> Path:
    path = tmp_path / "sweep.yaml"
    doc = {
        "version": 1,
        "defaults": {
            "network_arch": "arch",
            "platform": "local",
            "image": "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
            "results_root": "/results root/it's",
            "user": "1000:1000",
        },
        "jobs": {"sweep": {"action": "act", "matrix": {"v": [value]}, "command": command}},
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=hostile(min_size=1, exclude=",=[]" + CONTROLS), job_id=JOB_IDS)
def test_a_matrix_value_fills_one_word_of_a_string_command(
    tmp_path: Path, value: str, job_id: str
) -> None:
    # braces too: a matrix value is not read for placeholders again ({job_id} stays as written)
    command = "printf '%s\\n' {matrix.v} 'x {matrix.v} y' {results_dir}"
    written = escape(value)
    words = ("printf", "%s\\n", written, f"x {written} y", "{results_dir}")
    assume(not lint.lint_argv(words))  # validate refuses a command that carries a credential
    (target,) = load_jobfile(sweep(tmp_path, value, command)).targets.values()
    assert target.job.command == words
    plan = render(target.job, launcher=LAUNCHER).with_job_id(job_id)
    launch = next(step for step in plan.steps if step.name == "launch")
    ran = bash_words(plantext.argv_text(launch.argv))
    assert ran == list(launch.argv)
    assert ran[-5:] == ["printf", "%s\\n", value, f"x {value} y", f"/results root/it's/{job_id}"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=hostile(min_size=1, exclude="/{},=[]\r"),
    value=hostile(min_size=1, exclude="{},=[]" + CONTROLS),
)
def test_the_script_s_comments_stay_comments_whatever_the_file_and_target_are_named(
    tmp_path: Path, name: str, value: str
) -> None:
    # a newline in the file's name or a matrix value (so in the target's name) ended the
    # script's first comment line, and bash ran the rest of it as a command; a matrix value
    # holds no control character now (validate refuses one), a file's name still may
    folder = tmp_path / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = folder / f"{name}\ntouch INJECTED #.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "defaults": {
                    "network_arch": "a",
                    "platform": "local",
                    "image": "busybox:1",
                    "results_root": "/data/results",
                },  # fmt: skip
                "jobs": {
                    "t": {
                        "action": "b",
                        "matrix": {"v": [f"{value} touch INJECTED #"]},
                        "command": ["true"],
                        "notify": f"echo {value}\ntrue #\ntrue",
                    }
                },
            }  # fmt: skip
        )
    )
    (target,) = load_jobfile(path).targets.values()
    script = plantext.script(render(target.job, launcher=LAUNCHER))
    fake = folder / "bin"
    fake.mkdir()
    (fake / "taospec").write_text("#!/bin/sh\nexit 1\n")  # the script stops at its record
    (fake / "taospec").chmod(0o755)
    subprocess.run(["bash", "-c", script], cwd=folder, env={"PATH": f"{fake}:/usr/bin:/bin"},
                   capture_output=True, check=False)  # fmt: skip
    assert not (folder / "INJECTED").exists(), script.split("\n")[:4]
    notes = [line for line in script.split("\n") if line.startswith("# Note: ")]
    assert any("\\ntrue #\\ntrue" in line for line in notes), notes  # the line breaks show


def test_only_what_a_shell_alone_reads_counts_as_shell_syntax() -> None:
    said = {
        "dino train -e {config_path} results_dir={results_dir}": None,
        """bash -lc 'pip install "x<7" && x train -e {config_path}'""": None,
        "tool --sep '|' --redirect '>'": None,
        "prep && train -e {config_path}": "'&&'",
        "python - {config_path} <<'PY'": "'<<'",
        "train > log": "'>'",
        "prep\ntrain -e {config_path}\n": "a line break",
    }
    assert {command: shell_syntax(command) for command in said} == said


@settings(max_examples=25, deadline=None)
@given(text=hostile(), said=st.sampled_from(["instance gone", "permission denied"]))
def test_a_step_whose_aim_may_already_hold_reads_its_input_and_judges_its_error_output(
    tmp_path_factory, text: str, said: str
) -> None:
    """``already_done`` wraps the command in a command substitution: its input, a
    here-document, must be read inside it (a body after the ``)`` is unterminated for bash
    and runs as commands for any shell that goes on)."""
    out = tmp_path_factory.mktemp("done") / "input"
    for stdin_text in (None, f"{text}\n"):  # as every step's input ends (a here-document does)
        script = f'cat > "$0"; echo {shlex.quote(said)} >&2; exit 1'
        step = Step(
            "teardown", ("sh", "-c", script, str(out)), "delete", stdin_text=stdin_text,
            already_done="gone",
        )  # fmt: skip
        line = plantext.command_line(step)
        ran = subprocess.run(
            ["bash", "-c", line], stdin=subprocess.DEVNULL, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        assert "warning" not in ran.stderr, line
        assert (ran.returncode == 0) is (said == "instance gone"), (line, ran.stderr)
        assert ran.stderr == ("" if ran.returncode == 0 else f"{said}\n"), line
        assert out.read_bytes().decode() == (stdin_text or ""), line
