"""redact's short cut for inert text must answer exactly what the full scan answers.

:func:`taospec.lint.redact` returns text made only of letters, digits and
``_ . / : , + % ~ -`` unchanged when no token pattern and no known value
occurs in it, without reading it as shell words. These tests hold that short
cut against every rule: on inert text no rule may find anything, and on any
text the answer is the full scan's.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec import lint
from taospec.lint import PLACEHOLDER, Redactor, lint_argv, lint_text, redact, redact_location

INERT_CHARS = "abcxyzAKIVNGCPQ0123456789_./:,+%~-"
TOKENS = [
    "nvapi-AbCdEf0123456789AbCdEf0123",
    "hf_AbCdEfGhIjKlMnOpQrSt",
    "ghp_AbCdEfGhIjKlMnOpQrSt0123",
    "github_pat_11ABCDEFG0123456789_abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
    "sk-proj-AbCdEfGhIjKlMnOp1234",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]
AWS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
# What each rule finds, whole, and the pieces each rule keys on.
FOUND = [
    "NGC_KEY=abc123",
    "-eNGC_KEY=abc123",
    "--password hunter2",
    "--token=abc123",
    "login -p hunter2",
    "login -phunter2",
    "https://user:hunter2@host",
    "X-Amz-Signature=abc123",
    '"password":"hunter2"',
    "bash -c NGC_KEY=abc123",
    "--export=ALL,NGC_KEY=abc123",
    "'Authorization: Bearer abc123'",
    "Authorization: Bearer abc123",
    "bearer abc12345",
    f"aws_secret_access_key {AWS_KEY}",
    f'"SecretAccessKey": "{AWS_KEY}"',
    "password: hunter2",
    "password = hunter2",
    "x?TOKEN=abc&tail,more",
    "--token abc;def",
    "https://0123456789abcdef0123456789@github.com/x",
    "-----BEGIN PRIVATE KEY-----\nMIIabc\n-----END PRIVATE KEY-----",
    "- name: NGC_KEY\n  value: abc123",
    "{name: NGC_KEY, value: abc123}",
    '["--token", "abc123"]',
]
PIECES = [
    *TOKENS,
    *FOUND,
    "--password",
    "--token",
    "--api-key",
    "-p",
    "-psecret9",
    "--export=",
    "Authorization",
    "authorization:",
    "Bearer",
    "bearer",
    AWS_KEY,
    "aws_secret_access_key",
    "aws_secret_access_key:",
    "password:",
    "password",
    "token:",
    "pass",
    "eyJhbGciOiJIUzI1NiJ9",
    ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.",
    "-----BEGIN PRIVATE KEY-----",
    "- name: ",
    "value: ",
    "{",
    "}",
    "[",
    ",",
    ":",
    "\t",
    "login",
    "bash",
    "sh",
    "-c",
    "-lc",
    "NGC_KEY",
    "API_KEY",
    "X-Amz-Signature",
    "https://user:pw",
    "s3://bucket/key",
    "nvapi-",
    "sk-",
    "hf_",
    "AKIA",
    "xoxb-",
    "ghp_",
    " ",
    "=",
    "@",
    '"',
    "'",
    "$",
    "\\",
    "\n",
    "<redacted>",
]
INERT = st.text(alphabet=INERT_CHARS, max_size=60)
MIXED = st.lists(st.one_of(st.sampled_from(PIECES), INERT), max_size=8).map("".join)
SECRETS = st.lists(st.text(alphabet=INERT_CHARS + " =@", min_size=1, max_size=8), max_size=3)


def secrets_of(values: list[str]) -> list[str]:
    """The known values redact would look for (the environment's included)."""
    return lint._known_secrets(values)


@settings(max_examples=500)
@given(text=st.one_of(INERT, MIXED), values=SECRETS)
def test_no_rule_finds_anything_in_text_called_inert(text: str, values: list[str]) -> None:
    secrets = secrets_of(values)
    if not lint._is_inert(text, secrets):
        return
    assert lint._text_hits(text, free_text=True) == []
    assert lint._redact_values(text, secrets) == text
    assert lint._redact_fully(text, secrets) == text
    assert lint_text(text) == []
    assert lint_argv([text]) == []


@settings(max_examples=500)
@given(text=st.one_of(INERT, MIXED, st.text(max_size=60)), values=SECRETS)
def test_redact_answers_what_the_full_scan_answers(text: str, values: list[str]) -> None:
    assert redact(text, values) == lint._redact_fully(text, secrets_of(values))


@settings(max_examples=500)
@given(text=st.one_of(INERT, MIXED, st.text(max_size=60)), values=SECRETS)
def test_text_redaction_leaves_as_it_is_comes_back_itself(text: str, values: list[str]) -> None:
    """Unchanged is told by identity: the very object when equal, another string when not."""
    redactor = Redactor(values)
    for redacted in (
        redact(text, values),
        redact_location(text, values),
        redactor.text(text),
        redactor.location(text),
    ):
        assert (redacted is text) == (redacted == text)


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("template", ["{}", "/results/{}/ckpt", "run.{}", "a:{}"])
def test_a_token_in_otherwise_inert_text_is_redacted(token: str, template: str) -> None:
    text = template.format(token)
    assert not lint._is_inert(text, [])
    assert token not in redact(text)
    assert PLACEHOLDER in redact(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("/results/hunter22/ckpt", "hunter22"),
        ("job-abcd-123456", "abcd"),
        ("nvcr.io/team/image:tag9", "team/image"),
    ],
)
def test_a_known_value_in_otherwise_inert_text_is_redacted(text: str, secret: str) -> None:
    assert not lint._is_inert(text, [secret])
    assert secret not in redact(text, [secret])
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "hello-greet-0a1b2c",
        "/tmp/taospec-results/hello-greet-0a1b2c",
        "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt",
        "pid:1234",
        "2025-01-01T00:00:00.000000Z",
        "--password",
        "-pword",
        "sk-east-node-01",
        "",
    ],
)
def test_ids_paths_and_images_are_inert(text: str) -> None:
    assert lint._is_inert(text, [])
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "NGC_KEY=abc123",
        "--password hunter2",
        "--token=abc123",
        "docker login -p hunter2",
        "https://user:hunter2@host/path",
        "https://host/f?X-Amz-Signature=abc123",
        '{"password": "hunter2"}',
        "bash -c 'export NGC_KEY=abc123'",
        *FOUND[10:],
    ],
)
def test_text_a_rule_reads_is_never_inert(text: str) -> None:
    assert not lint._is_inert(text, [])
    assert redact(text) != text
