"""The click-free command lines mean exactly what click makes of them."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec.cli import app, fast

WORDS = [
    "jobs/train.yaml",
    "train",
    "x y",
    "--format",
    "json",
    "sh",
    "text",
    "yaml",
    "--user",
    "1000:1000",
    "-q",
    "--quiet",
    "--json",
    "--state",
    "RUNNING",
    "running",
    "--limit",
    "5",
    "0",
    "05",
    "-1",
    "+3",
    "٣",
    "-n",
    "--dry-run",
    "--check",
    "-B",
    "--force",
    "-k",
    "--keep-going",
    "-j",
    "--jobs",
    "2",
    "-d",
    "--detach",
    "-f",
    "--follow",
    "--allow-shared-gpus",
    "--",
    "-",
    "-h",
    "--help",
    "--format=json",
    "-dB",
    "-j2",
    "--bogus",
    "",
]


def click_values(words: list[str]) -> dict[str, Any] | None:
    """What click passes to the command for ``words``, or None when click refuses them."""
    command = app.cli.get_command(click.Context(app.cli), words[0])
    assert command is not None
    try:
        with command.make_context(words[0], list(words[1:])) as context:
            return dict(context.params)
    except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
        return None


def normal(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


@settings(max_examples=1500, deadline=None)
@given(
    verb=st.sampled_from(sorted(fast.VERBS)),
    words=st.lists(st.sampled_from(WORDS), max_size=6),
)
def test_where_the_fast_path_answers_click_agrees(verb: str, words: list[str]) -> None:
    parsed = fast.parse([verb, *words])
    if parsed is None:
        return
    assert parsed[0] == verb
    from_click = click_values([verb, *words])
    assert from_click is not None, f"click refuses {words} but the fast path took it"
    assert normal(parsed[1]) == normal(from_click)


@pytest.mark.parametrize(
    "words",
    [
        ["render", "jobs/train.yaml"],
        ["render", "jobs/train.yaml", "--format", "json", "--user", "0:0", "a", "b"],
        ["validate", "-q", "a.yaml", "b.yaml"],
        ["validate", "a.yaml", "--jobs", "4", "b.yaml"],
        ["status", "hello-greet-0a1b2c", "--json"],
        ["ls"],
        ["ls", "--state", "COMPLETE", "--limit", "5", "--json"],
        [
            "run",
            "jobs/tao-workflow.yaml",
            "train",
            "-n",
            "--check",
            "-B",
            "-k",
            "-j",
            "3",
            "-d",
            "-f",
            "--allow-shared-gpus",
            "--user",
            "1:1",
        ],
    ],
)
def test_every_option_of_the_plain_forms_is_known(words: list[str]) -> None:
    parsed = fast.parse(words)
    assert parsed is not None
    assert normal(parsed[1]) == normal(click_values(words) or {})


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--version"],
        ["render"],
        ["render", "a", "--format=json"],
        ["ls", "--limit", "0"],
        ["run", "-dB", "a"],
        ["status", "a", "b"],
        ["validate"],
        ["lint", "x"],
        ["render", "-"],
    ],
)
def test_anything_else_goes_to_click(words: list[str]) -> None:
    assert fast.parse(words) is None


def test_the_fast_path_does_not_load_click() -> None:
    script = (
        "import sys\nfrom taospec.cli import main\n"
        "code = main(['ls', '--limit', '1'])\n"
        "assert 'click' not in sys.modules, 'click was loaded'\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"TAO_STATE_DIR": "/nonexistent-taospec-state", "PATH": "/usr/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ID")
