"""Redaction leaves no tail: no piece of a secret value survives, whatever it holds.

Each form places a value the way a person or a tool writes it (an assignment,
a flag, a header, a YAML or INI key, URL userinfo, a JSON key, a Kubernetes env
entry), quoted as that form quotes. The property: no run of the value as long
as :data:`taospec.lint.MIN_SECRET_LENGTH` survives :func:`taospec.lint.redact`
outside the placeholders (runs the surrounding text holds anyway excepted),
and redacting twice changes nothing. The same forms then go through the real
command line, into the ledger and back out.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec import lint
from taospec.lint import MIN_SECRET_LENGTH, PLACEHOLDER, redact, redact_location
from tests.conftest import ROOT, Runner

Form = Callable[[str], str]


def _one_line(value: str) -> bool:
    return "\n" not in value and "\r" not in value


def _bare(value: str) -> bool:
    return not any(char.isspace() for char in value)


# name -> (how the form writes a value, which values the form can hold unquoted)
FORMS: dict[str, tuple[Form, Callable[[str], bool]]] = {
    "assignment, shell-quoted": (
        lambda v: f"export AWS_SECRET_ACCESS_KEY={shlex.quote(v)} && run",
        lambda v: True,
    ),
    "assignment, bare in a message": (
        lambda v: f"job failed: AWS_SECRET_ACCESS_KEY={v} (exit 1)",
        _bare,
    ),
    "assignment in a query string": (
        lambda v: f"GET https://h/x?user=u&api_key={v} 403",
        _bare,
    ),
    "sbatch --export": (
        lambda v: f"sbatch --export=ALL,NGC_API_KEY={shlex.quote(v)} train.sh",
        lambda v: True,
    ),
    "flag, shell-quoted": (lambda v: f"tool --password {shlex.quote(v)} --verbose", lambda v: True),
    "flag with =, shell-quoted": (lambda v: f"tool --token={shlex.quote(v)} go", lambda v: True),
    "flag, bare in a message": (lambda v: f"ran tool --api-key {v} twice", _bare),
    "header, curl -H": (
        lambda v: f"curl -H {shlex.quote('Authorization: Bearer ' + v)} https://h/x",
        lambda v: True,
    ),
    "header line": (
        lambda v: f"request headers:\nAuthorization: Bearer {v}\nAccept: */*",
        _one_line,
    ),
    "api key header, curl -H": (
        lambda v: f"curl -H {shlex.quote('X-Api-Key: ' + v)} https://h/x",
        lambda v: True,
    ),
    "YAML key": (
        lambda v: (
            "config:\n"
            + yaml.safe_dump({"aws_secret_access_key": v, "region": "us-east-1"}, indent=2)
            + "done: true"
        ),
        lambda v: True,
    ),
    "INI key": (lambda v: f"[default]\npassword = {v}\nregion = us", _one_line),
    "URL userinfo": (
        lambda v: f"clone https://user:{quote(v, safe='')}@github.com/o/r failed",
        lambda v: True,
    ),
    "JSON key": (lambda v: json.dumps({"user": "u", "password": v, "n": 1}), lambda v: True),
    "dict repr": (lambda v: repr({"token": v}), lambda v: True),
    "Kubernetes env, block": (
        lambda v: yaml.safe_dump({"env": [{"name": "NGC_API_KEY", "value": v}]}, indent=2),
        lambda v: True,
    ),
    "Kubernetes env, flow": (
        lambda v: yaml.safe_dump(
            {"env": [{"value": v, "name": "NGC_API_KEY"}]}, default_flow_style=True, width=10**6
        ),
        lambda v: True,
    ),
    "Kubernetes env, JSON": (
        lambda v: json.dumps({"env": [{"name": "HF_TOKEN", "value": v}]}, indent=2),
        lambda v: True,
    ),
}

# Letters and digits the surrounding text does not spell, and every separator.
SEPARATORS = "&,;:'\" \n=/?@#"
VALUES = st.text(
    alphabet="qvzQVZ2357" + SEPARATORS, min_size=MIN_SECRET_LENGTH, max_size=24
).filter(lambda v: sum(char.isalnum() for char in v) >= 2)


HOSTILE = "Zq7&vQx'Wk9\"pJ,\nmZ; x:y=z/w"
BARE_HOSTILE = "Zq7&vQxWk9pJ,mZ;x:y=z/w"  # for the forms that hold no space


def runs(text: str) -> set[str]:
    """Every substring of ``text`` as long as the shortest secret."""
    size = MIN_SECRET_LENGTH
    return {text[i : i + size] for i in range(len(text) - size + 1)}


def surviving(value: str, form: Form, redacted: str) -> set[str]:
    """The runs of ``value`` left in ``redacted`` outside the placeholders.

    Runs that the form's own text holds with an empty value, or the
    placeholder holds, prove nothing and are left out.
    """
    expected_anyway = runs(form("")) | runs(PLACEHOLDER)
    pieces = redacted.split(PLACEHOLDER)
    return {run for run in runs(value) - expected_anyway if any(run in piece for piece in pieces)}


def test_every_separator_is_in_the_alphabet() -> None:
    assert set("&,;:'\" \n=/") <= set(SEPARATORS)


@settings(max_examples=600, deadline=None)
@given(value=VALUES, name=st.sampled_from(sorted(FORMS)))
def test_no_run_of_a_value_survives_and_redact_is_idempotent(value: str, name: str) -> None:
    form, holds = FORMS[name]
    if not holds(value):
        return
    text = form(value)
    once = redact(text)
    assert surviving(value, form, once) == set(), (name, text, once)
    assert redact(once) == once


# name -> how taospec itself prints a text that holds a value: escaped, in quotes it chooses
PRINTED: dict[str, Form] = {
    "repr in a message": lambda v: f"$.storage_tier: {v!r} is not one of 'A', 'B', 'C'",
    "repr of a longer text": lambda v: repr(f"--note={v} --verbose"),
    "repr of a list": lambda v: repr(["--note", v]),
    "JSON string": lambda v: json.dumps({"message": f"refused {v} twice"}),
    "JSON string, non-ASCII kept": lambda v: json.dumps({"m": v}, ensure_ascii=False),
    "shell word": lambda v: shlex.join(["mytool", "--note", v, "--verbose"]),
    "shell word with its flag": lambda v: shlex.join(["mytool", f"--note={v}"]),
    "shell word in JSON": lambda v: json.dumps({"diff": shlex.join(["mytool", "--note", v])}),
    "shell word in repr": lambda v: repr(shlex.join(["mytool", "--note", v])),
}
ESCAPED_VALUES = st.text(
    alphabet="qvzQVZ2357\\é\t\x0c" + SEPARATORS, min_size=MIN_SECRET_LENGTH, max_size=24
).filter(lambda v: sum(char.isalnum() for char in v) >= 2 and len(v.strip()) == len(v))


def printed_runs(value: str) -> set[str]:
    """The runs of ``value`` as it is, and as repr, JSON and the shell each escape it."""
    escaped = (repr(value)[1:-1], json.dumps(value)[1:-1], shlex.quote(value))
    return runs(value).union(*map(runs, escaped))


@settings(max_examples=600, deadline=None)
@given(value=ESCAPED_VALUES, name=st.sampled_from(sorted(PRINTED)))
def test_a_known_value_is_redacted_as_taospec_prints_it_escaped(value: str, name: str) -> None:
    # a passed value was found only as it is: '{value!r}' printed Q7w\\e9Rt\'y"u1Io whole,
    # and diff printed a committed value after shlex.quote wrote ' as '"'"'
    form = PRINTED[name]
    text = form(value)
    once = redact(text, [value])
    pieces = once.split(PLACEHOLDER)
    expected_anyway = runs(form("")) | runs(PLACEHOLDER)
    left = {run for run in printed_runs(value) - expected_anyway if any(run in p for p in pieces)}
    assert left == set(), (name, text, once)
    assert redact(once, [value]) == once


def test_the_readme_says_a_known_value_too_short_to_redact_is_not() -> None:
    # the README promised every passed value kept out, and never said that a short one is not
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = f"A value shorter than {MIN_SECRET_LENGTH} characters (`lint.MIN_SECRET_LENGTH`)"
    assert f"{said} is not redacted, nor refused where a job writes it" in readme
    short, enough = "Zq7vW"[: MIN_SECRET_LENGTH - 1], "Zq7vW"[:MIN_SECRET_LENGTH]
    assert redact(f"got {short}!", [short]) == f"got {short}!"
    assert redact(f"got {enough}!", [enough]) == f"got {PLACEHOLDER}!"


QUOTED_THEN_MORE = [
    ('[default]\npassword = "" 22\nregion = us', "[default]\npassword = <redacted>\nregion = us"),
    ("password = 'ab' cd\nregion = us", "password = <redacted>\nregion = us"),
    ('password: "abcdefgh12" # a comment', "password: <redacted> # a comment"),
    ('password = "abcdefgh12"  \nnext=1', "password = <redacted>  \nnext=1"),
    # a comma ends a YAML flow value after its quotes, an INI value never: `'',22` survived
    ("[default]\npassword = '',22\nregion = us", "[default]\npassword = <redacted>\nregion = us"),
    ("{password: '', region: us}", "{password: '', region: us}"),
]


@pytest.mark.parametrize(("text", "expected"), QUOTED_THEN_MORE)
def test_a_quoted_start_ends_the_value_only_where_the_line_does(text: str, expected: str) -> None:
    # an INI value may begin with quotes and go on: the whole rest of the line is the value
    assert redact(text) == expected


ENCLOSED = [
    # a field inside quotes ends at one of them, and the prose after it survives
    ("\"'password=abc\": TAO's entrypoint", "\"'password=<redacted>\": TAO's entrypoint"),
    ("'\"token=abc': it's here", "'\"token=<redacted>': it's here"),
    ("\"password=abc\" and 'x'", "password=<redacted> and 'x'"),
    # a value that opens with the enclosing quote runs on to its own closing one
    ("'password='abc'' and more", "password=<redacted> and more"),
]


@pytest.mark.parametrize(("text", "expected"), ENCLOSED)
def test_a_field_in_quotes_ends_at_them(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_form_is_redacted_with_a_hostile_value(name: str) -> None:
    form, holds = FORMS[name]
    value = HOSTILE if holds(HOSTILE) else BARE_HOSTILE
    once = redact(form(value))
    assert surviving(value, form, once) == set()
    assert PLACEHOLDER in once


LOCATIONS = [
    (
        "https://user:Zq7pw&x,y@host/bucket/run",
        "Zq7pw&x,y",
        "https://user:<redacted>@host/bucket/run",
    ),
    (
        "https://Zq7pKwXmVyNbHj4RtGsLcDfA@github.com/o/r",
        "Zq7pKwXmVyNbHj4RtGsLcDfA",
        "https://<redacted>@github.com/o/r",
    ),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=Zq7pWxKvQm&x=1",
        "Zq7pWxKvQm",
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=<redacted>&x=1",
    ),
    ("/exp/token=v1/run", "", "/exp/token=v1/run"),
    ("/exp/password=abc/run", "", "/exp/password=abc/run"),
]


@pytest.mark.parametrize(("location", "secret", "expected"), LOCATIONS)
def test_redact_location_applies_format_rules_only(
    location: str, secret: str, expected: str
) -> None:
    assert redact_location(location) == expected
    assert redact_location(expected) == expected


# -- through the real command line ------------------------------------------------


def files_under(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}


def assert_nowhere(value: str, form: Form, state_dir: Path, outputs: list[str]) -> None:
    """No run of ``value`` in any file under the state dir nor in any output."""
    # a record holds a random hex id and digit timestamps: a value with a run of
    # those characters would be found there by chance, and the test would flake
    by_chance = {run for run in runs(value) if re.fullmatch(r"[0-9a-f:.TZ+-]+", run)}
    assert not by_chance, f"choose a test value without {sorted(by_chance)}"
    expected_anyway = runs(form("")) | runs(PLACEHOLDER)
    leaks = runs(value) - expected_anyway
    for path, data in files_under(state_dir).items():
        text = data.decode("utf-8", "replace")
        found = {run for run in leaks if run in text or json.dumps(run)[1:-1] in text}
        assert not found, (path, found)
    for output in outputs:
        found = {run for run in leaks if run in output or json.dumps(run)[1:-1] in output}
        assert not found, found


def open_record(taospec: Runner, results_dir: str, env: dict[str, str] | None = None) -> str:
    opened = taospec(
        "record",
        "open",
        "--platform",
        "docker",
        "--image",
        "img:1",
        "--network-arch",
        "dino",
        "--action",
        "train",
        "--storage-tier",
        "B",
        "--results-dir",
        results_dir,
        env=env,
    )
    assert opened.returncode == 0, opened.stderr
    return opened.stdout.strip()


def read_back(taospec: Runner, job_id: str, env: dict[str, str] | None = None) -> list[str]:
    shown = taospec("record", "show", job_id, env=env)
    listed = taospec("ls", env=env)
    records = taospec("record", "list", env=env)
    assert shown.returncode == 0, shown.stderr
    assert listed.returncode == 0, listed.stderr
    return [
        shown.stdout,
        shown.stderr,
        listed.stdout,
        listed.stderr,
        records.stdout,
        records.stderr,
    ]


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_hostile_message_leaves_no_trace_in_the_ledger(
    taospec: Runner, state_dir: Path, tmp_path: Path, name: str
) -> None:
    form, holds = FORMS[name]
    value = HOSTILE if holds(HOSTILE) else BARE_HOSTILE
    job_id = open_record(taospec, str(tmp_path / "results"))
    marked = taospec("record", "mark", job_id, "--state", "ERROR", "--message", form(value))
    assert marked.returncode == 0, marked.stderr
    outputs = [marked.stdout, marked.stderr, *read_back(taospec, job_id)]
    assert_nowhere(value, form, state_dir, outputs)
    assert PLACEHOLDER in outputs[2]


@pytest.mark.parametrize(("location", "secret", "expected"), LOCATIONS)
def test_a_backend_ref_is_redacted_as_a_location(
    taospec: Runner, state_dir: Path, tmp_path: Path, location: str, secret: str, expected: str
) -> None:
    job_id = open_record(taospec, str(tmp_path / "results"))
    marked = taospec("record", "mark", job_id, "--state", "RUNNING", "--backend-ref", location)
    assert marked.returncode == 0, marked.stderr
    outputs = read_back(taospec, job_id)
    assert json.loads(outputs[0])["backend_ref"] == expected
    if secret:
        assert_nowhere(secret, lambda v: "", state_dir, outputs)


@pytest.mark.parametrize("location", ["/exp/token=v1/run", "/exp/NGC_KEY=abc&x,y/run"])
def test_a_results_dir_path_keeps_its_segments(taospec: Runner, location: str) -> None:
    job_id = open_record(taospec, location)
    assert json.loads(read_back(taospec, job_id)[0])["results_dir"] == location


def test_a_results_dir_uri_is_redacted_as_a_location(taospec: Runner, state_dir: Path) -> None:
    location, secret, expected = LOCATIONS[0]
    job_id = open_record(taospec, location)
    outputs = read_back(taospec, job_id)
    assert json.loads(outputs[0])["results_dir"] == expected
    assert_nowhere(secret, lambda v: "", state_dir, outputs)


def test_a_secret_from_the_environment_is_redacted_when_it_appears_alone(
    taospec: Runner, state_dir: Path, tmp_path: Path
) -> None:
    value = "Zq7eNvQx9Wk2pJ"
    env = {"WANDB_API_KEY": value}
    job_id = open_record(taospec, str(tmp_path / "results"), env=env)
    message = f"wandb refused the key {value}; check the account"
    marked = taospec("record", "mark", job_id, "--state", "ERROR", "--message", message, env=env)
    assert marked.returncode == 0, marked.stderr
    outputs = [marked.stdout, marked.stderr, *read_back(taospec, job_id)]
    assert_nowhere(value, lambda v: "", state_dir, outputs)
    shown = json.loads(outputs[2])
    assert shown["transitions"][-1]["message"] == (
        "wandb refused the key <redacted>; check the account"
    )


HUGE_FORMS = [
    "a", "a=", "x=y&", "password=", "--token ", "--token=", "Authorization: ", "bearer ",
    "password: ", "- name: A_TOKEN\n  value: x\n", '{"password": "', "'\"", "\\", "${", "$(",
    "A" * 40 + " ", "-----BEGIN PRIVATE KEY-----\n", "a\n", "a ", "https://", "--a", "a-",
]  # fmt: skip


@pytest.mark.parametrize("form", HUGE_FORMS)
@pytest.mark.timeout(120)
def test_a_huge_repetitive_value_is_scanned_in_one_pass(form: str) -> None:
    """A value of 64 KiB made of one form repeated (a job file may hold 1 MiB): every rule
    reads it in linear time. A rule that rescans from each match hangs here for minutes; the
    timeout turns that hang into a failure of this form's case."""
    text = form * (64 * 1024 // len(form))
    lint.lint_text(text)
    once = lint.redact(text)
    assert lint.redact(once) == once
