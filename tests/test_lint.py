"""Tests for taospec.lint: the secret lint rules, argv linting and redaction."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec.lint import (
    PLACEHOLDER,
    Finding,
    is_secret_name,
    lint_argv,
    lint_text,
    looks_like_secret_value,
    redact,
)

ASSIGN = "inline-secret-assignment"
FLAG = "secret-flag"
LOGIN = "login-password-flag"
TOKEN = "token-prefix"
URL = "url-userinfo"
SIGNED = "signed-url"
JSON = "json-credential"
HEADER = "auth-header"
BEARER = "bearer-token"
AWS = "aws-secret-key"
PEM = "private-key"
MANIFEST = "manifest-env-value"

NVAPI = "nvapi-AbCdEf0123456789AbCdEf0123"
HF = "hf_AbCdEfGhIjKlMnOpQrSt"
GHP = "ghp_AbCdEfGhIjKlMnOpQrSt0123"
GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghij"
AKIA = "AKIAIOSFODNN7EXAMPLE"
SLACK = "xoxb-1234567890-abcdefghij"
OPENAI = "sk-proj-AbCdEfGhIjKlMnOp1234"


def pairs(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(finding.rule, finding.subject) for finding in findings}


# (text, exact findings, the secret value in the text)
FLAGGED = [
    ("docker run -e NGC_KEY=abc123 nvcr.io/nvidia/tao", {(ASSIGN, "NGC_KEY")}, "abc123"),
    ("export NGC_API_KEY=abc123", {(ASSIGN, "NGC_API_KEY")}, "abc123"),
    ("docker run --env NGC_KEY=abc123 img", {(ASSIGN, "NGC_KEY")}, "abc123"),
    ("docker run --env=NGC_KEY=abc123 img", {(ASSIGN, "NGC_KEY")}, "abc123"),
    ("docker run -eNGC_KEY=abc123 img", {(ASSIGN, "NGC_KEY")}, "abc123"),
    ("WANDB_API_KEY=abc123 python train.py", {(ASSIGN, "WANDB_API_KEY")}, "abc123"),
    ('export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI"', {(ASSIGN, "AWS_SECRET_ACCESS_KEY")}, "wJalr"),
    (
        f"export aws_access_key_id={AKIA}",
        {(ASSIGN, "aws_access_key_id"), (TOKEN, "AKIA key")},
        AKIA,
    ),
    (
        f"export HF_TOKEN=${{HF_TOKEN:-{HF}}}",
        {(ASSIGN, "HF_TOKEN"), (TOKEN, "hf_ token")},
        HF,
    ),
    ("export DB_PASSWORD=${PREFIX}tail9", {(ASSIGN, "DB_PASSWORD")}, "tail9"),
    ("export NGC_KEY='$LITERAL_DOLLAR'", {(ASSIGN, "NGC_KEY")}, "$LITERAL_DOLLAR"),
    (
        "NGC_KEY=abc123 HF_TOKEN=xyz789 docker run img",
        {(ASSIGN, "NGC_KEY"), (ASSIGN, "HF_TOKEN")},
        "xyz789",
    ),
    ("docker build --build-arg NGC_KEY=abc123 .", {(ASSIGN, "NGC_KEY")}, "abc123"),
    ("docker run -e 'MY_TOKEN=two words' img", {(ASSIGN, "MY_TOKEN")}, "two words"),
    ("docker login -u '$oauthtoken' --password abc123 nvcr.io", {(FLAG, "--password")}, "abc123"),
    ("tool --token=abc123", {(FLAG, "--token")}, "abc123"),
    ("tool --api-key abc123", {(FLAG, "--api-key")}, "abc123"),
    ("tool --password 'pa ss'", {(FLAG, "--password")}, "pa ss"),
    ("docker login -u x -p hunter2 nvcr.io", {(LOGIN, "-p")}, "hunter2"),
    ("docker login -u x -phunter2 nvcr.io", {(LOGIN, "-p")}, "hunter2"),
    ("echo ready && helm registry login -u x -p hunter2 h", {(LOGIN, "-p")}, "hunter2"),
    (f"echo {NVAPI}", {(TOKEN, "nvapi- token")}, NVAPI),
    (f"git clone https://{GHP}@github.com/org/repo", {(TOKEN, "ghp_ token")}, GHP),
    (f"GH={GITHUB_PAT} gh repo list", {(TOKEN, "github_pat_ token")}, GITHUB_PAT),
    (
        f'curl -H "Authorization: Bearer {OPENAI}" api',
        {(TOKEN, "sk- token"), (HEADER, "Authorization"), (BEARER, "bearer token")},
        OPENAI,
    ),
    (f"SLACK_HOOK={SLACK} notify", {(TOKEN, "xox?- token")}, SLACK),
    (
        f"huggingface-cli login --token {HF}",
        {(FLAG, "--token"), (TOKEN, "hf_ token")},
        HF,
    ),
    (
        "pip install --index-url https://user:hunter2@pypi.example.com/simple pkg",
        {(URL, "URL password")},
        "hunter2",
    ),
    ("psql postgres://admin:s3cret@db:5432/x", {(URL, "URL password")}, "s3cret"),
    (
        'wget "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKID%2F2024&X-Amz-Signature=f00dfeed"',
        {(SIGNED, "X-Amz-Credential"), (SIGNED, "X-Amz-Signature")},
        "f00dfeed",
    ),
    (
        "curl 'https://h/k?x-amz-security-token=FwoGZXIvYXdz'",
        {(SIGNED, "X-Amz-Security-Token")},
        "FwoGZXIvYXdz",
    ),
    (
        """curl -d '{"username": "u", "password": "hunter2"}' http://h""",
        {(JSON, "password")},
        "hunter2",
    ),
    ('{"api_key": "abc123", "token": "t0k3n"}', {(JSON, "api_key"), (JSON, "token")}, "t0k3n"),
    ("""echo '{"aws_secret_access_key": "wJalr9"}'""", {(JSON, "aws_secret_access_key")}, "wJalr9"),
    ('{"secret":"s3cr3t"}', {(JSON, "secret")}, "s3cr3t"),
    (
        "bash -c 'export NGC_KEY=abc123 && docker login -p hunter2 nvcr.io'",
        {(ASSIGN, "NGC_KEY"), (LOGIN, "-p")},
        "hunter2",
    ),
    ('docker run img sh -c "TOKEN=abc123 python x.py"', {(ASSIGN, "TOKEN")}, "abc123"),
    ("docker run img /bin/bash -lc 'tool --api-key abc123'", {(FLAG, "--api-key")}, "abc123"),
]

ALLOWED = [
    "docker run -e NGC_KEY nvcr.io/nvidia/tao",
    "printf %s \"$NGC_KEY\" | docker login -u '$oauthtoken' --password-stdin nvcr.io",
    "docker run -p 8080:8080 img",
    "docker run -p 8080:8080 img login",
    'docker login -u x -p "$NGC_KEY" nvcr.io',
    "export NGC_KEY=$NGC_KEY",
    'export NGC_KEY="${NGC_KEY}"',
    "export NGC_KEY=${NGC_KEY:-}",
    "export NGC_KEY=${NGC_KEY:?set NGC_KEY first}",
    "export NGC_KEY=",
    'export NGC_KEY=""',
    "export NGC_KEY=$(cat /run/secrets/ngc)",
    "export HF_TOKEN=`cat token.txt`",
    'tool --token "$TOKEN"',
    "tool --password=$PW",
    "tool --token --verbose",
    'docker run img bash -c "export NGC_KEY=\\$NGC_KEY"',
    "git clone ssh://git@github.com/org/repo",
    "git clone https://user:$PW@github.com/x",
    "git clone https://user@github.com/x",
    "python train.py TOKENIZER_PATH=/models/tok",
    "MONKEY=banana KEYBOARD=us make",
    "export NGC_KEY_FILE=/run/secrets/ngc",
    "export TOKEN=<redacted>",
    "run task-AbCdEfGhIjKlMnOpQr1234 on sk-east-cluster-node-01",
    "pip install hf_transfer && python -c 'import hf_hub_download_to_cache'",
    "echo AKIAIOSFODNN7EXAMPLEX xoxo-hugs nvapi-short",
    'curl "https://h/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600"',
    'curl "https://h/k?X-Amz-Signature=$SIG"',
    '{"password": "", "user": "x"}',
    '{"password_file": "/run/secrets/pw", "tokenizer": "bpe"}',
    "echo use --password-stdin",
    "",
]


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED)
def test_flagged(text: str, expected: set[tuple[str, str]], secret: str) -> None:
    assert pairs(lint_text(text)) == expected


@pytest.mark.parametrize("text", ALLOWED)
def test_allowed(text: str) -> None:
    assert lint_text(text) == []


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED)
def test_findings_never_show_the_value(
    text: str, expected: set[tuple[str, str]], secret: str
) -> None:
    findings = lint_text(text)
    assert findings
    for finding in findings:
        assert secret not in str(finding)
        assert secret not in repr(finding)


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED)
def test_redact_removes_what_lint_finds(
    text: str, expected: set[tuple[str, str]], secret: str
) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert lint_text(redacted) == []
    assert redact(redacted) == redacted


def test_finding_message_names_the_variable() -> None:
    (finding,) = lint_text("echo hi\n\nexport NGC_KEY=abc123")
    assert finding == Finding(3, ASSIGN, "NGC_KEY")
    assert str(finding) == (
        "line 3: NGC_KEY is assigned an inline secret value; "
        "pass it by name (-e NGC_KEY) or through stdin"
    )


def test_every_rule_has_a_message() -> None:
    text = "\n".join(case[0] for case in FLAGGED)
    for finding in lint_text(text):
        assert str(finding).startswith(f"line {finding.line}: ")
        assert finding.rule not in str(finding)


def test_continuations_are_joined_and_report_the_first_line() -> None:
    text = (
        "docker run --rm \\\n"
        "  -e NGC_KEY=abc123 \\\n"
        "  nvcr.io/nvidia/tao\n"
        "echo fine\n"
        "export TOKEN=xyz789\n"
    )
    assert lint_text(text) == [Finding(1, ASSIGN, "NGC_KEY"), Finding(5, ASSIGN, "TOKEN")]


def test_login_split_over_continuation_lines() -> None:
    text = "echo start\ndocker login -u x \\\n  -p hunter2 \\\n  nvcr.io\n"
    assert lint_text(text) == [Finding(2, LOGIN, "-p")]


def test_flag_value_on_the_next_physical_line() -> None:
    assert lint_text("tool --password \\\n  hunter2") == [Finding(1, FLAG, "--password")]


def test_crlf_lines() -> None:
    text = "docker run \\\r\n -e NGC_KEY=abc123 img\r\nexport TOKEN=x\r\n"
    assert lint_text(text) == [Finding(1, ASSIGN, "NGC_KEY"), Finding(3, ASSIGN, "TOKEN")]


def test_escaped_backslash_is_not_a_continuation() -> None:
    text = "echo a\\\\\nexport TOKEN=x"
    assert lint_text(text) == [Finding(2, ASSIGN, "TOKEN")]


def test_same_finding_twice_on_a_line_is_reported_once() -> None:
    assert lint_text("tool -e NGC_KEY=a -e NGC_KEY=b") == [Finding(1, ASSIGN, "NGC_KEY")]


ARGV_CASES = [
    (["docker", "run", "-e", "NGC_KEY=abc123", "img"], {(ASSIGN, "NGC_KEY")}),
    (["docker", "run", "-e", "NGC_KEY", "img"], set()),
    (["docker", "run", "-e", "NGC_KEY=$NGC_KEY", "img"], set()),
    (["docker", "run", "--env=HF_TOKEN=abc123", "img"], {(ASSIGN, "HF_TOKEN")}),
    (["env", "NGC_KEY=a b; c", "run"], {(ASSIGN, "NGC_KEY")}),
    (["docker", "login", "--password", "abc123", "nvcr.io"], {(FLAG, "--password")}),
    (["tool", "--password=x"], {(FLAG, "--password")}),
    (["docker", "login", "--password-stdin", "-u", "x"], set()),
    (["docker", "run", "-p", "8080:8080", "img"], set()),
    (["docker", "login", "-u", "x", "-p", "hunter2", "nvcr.io"], {(LOGIN, "-p")}),
    (["python", "-c", f"print('{NVAPI}')"], {(TOKEN, "nvapi- token")}),
    (["sh", "-c", "export NGC_KEY=abc123; run"], {(ASSIGN, "NGC_KEY")}),
    (["git", "clone", "https://u:pw12@h/x"], {(URL, "URL password")}),
    (["echo", "export NGC_KEY=abc123"], set()),
    ([], set()),
]


@pytest.mark.parametrize(("argv", "expected"), ARGV_CASES)
def test_lint_argv(argv: list[str], expected: set[tuple[str, str]]) -> None:
    findings = lint_argv(argv)
    assert pairs(findings) == expected
    assert all(finding.line == 1 for finding in findings)


@pytest.mark.parametrize(
    "name",
    [
        "NGC_KEY",
        "ngc_key",
        "NGC_API_KEY",
        "NGC_CLI_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
        "DB_PASSWORD",
        "MYSQL_PASSWD",
        "OPENAI_APIKEY",
        "GOOGLE_CREDENTIAL",
        "api-key",
        "x-access-key",
        "password",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "TOKENIZER_PATH",
        "MONKEY",
        "KEYBOARD",
        "HOME",
        "KEY",
        "API",
        "SECRETARY",
        "MAX_TOKENS",
        "NGC_KEY_FILE",
        "HF_TOKEN_PATH",
        "SECRETS_DIR",
        "",
        "__",
    ],
)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    "value",
    [
        NVAPI,
        HF,
        GHP,
        GITHUB_PAT,
        AKIA,
        SLACK,
        OPENAI,
        f"Bearer {NVAPI}",
        "https://user:hunter2@host/x",
        "https://h/k?X-Amz-Signature=f00dfeed",
    ],
)
def test_secret_values(value: str) -> None:
    assert looks_like_secret_value(value)


@pytest.mark.parametrize(
    "value",
    [
        "hello",
        "sk-learn",
        "sk-east-cluster-node-01",
        "task-AbCdEfGhIjKlMnOpQr1234",
        "hf_transfer",
        "hf_hubdownloadtocache",
        "nvapi-short",
        "AKIAIOSFODNN7EXAMPL",
        "https://user@host",
        "ssh://git@host",
        "https://u:$PW@host",
        "https://h/k?X-Amz-Expires=3600",
        "",
    ],
)
def test_ordinary_values(value: str) -> None:
    assert not looks_like_secret_value(value)


REDACTIONS = [
    ("docker run -e NGC_KEY=abc123 img", "docker run -e NGC_KEY=<redacted> img"),
    ('export NGC_KEY="abc 123"', "export NGC_KEY=<redacted>"),
    ("docker run --env=NGC_KEY=abc123 img", "docker run --env=NGC_KEY=<redacted> img"),
    (
        "docker login -u x --password hunter2 nvcr.io",
        "docker login -u x --password <redacted> nvcr.io",
    ),
    ("tool --token=abc123", "tool --token=<redacted>"),
    ("docker login -u x -p hunter2 nvcr.io", "docker login -u x -p <redacted> nvcr.io"),
    (
        "docker login -u x \\\n  -p hunter2 nvcr.io",
        "docker login -u x \\\n  -p <redacted> nvcr.io",
    ),
    (f"echo {NVAPI} done", "echo <redacted> done"),
    (f"export NGC_KEY={NVAPI}", "export NGC_KEY=<redacted>"),
    (
        "git clone https://user:hunter2@github.com/x",
        "git clone https://user:<redacted>@github.com/x",
    ),
    (
        "https://b/k?X-Amz-Signature=f00dfeed&x=1",
        "https://b/k?X-Amz-Signature=<redacted>&x=1",
    ),
    (
        '{"password": "hunter2", "user": "u"}',
        '{"password": "<redacted>", "user": "u"}',
    ),
    # Free text never ends a value at ";": the script's ";" goes with it.
    (
        "bash -c 'export NGC_KEY=abc123; run'",
        "bash -c 'export NGC_KEY=<redacted> run'",
    ),
    ("docker run -e NGC_KEY -p 8080:8080 img", "docker run -e NGC_KEY -p 8080:8080 img"),
    ("plain text\nwith lines\n", "plain text\nwith lines\n"),
]


@pytest.mark.parametrize(("text", "expected"), REDACTIONS)
def test_redact_rules(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("token is s3cr3tvalue here", ["s3cr3tvalue"], "token is <redacted> here"),
        ("s3cr3t s3cr3t", ["s3cr3t"], "<redacted> <redacted>"),
        ("abc abc", ["abc"], "abc abc"),
        ("keep this", [""], "keep this"),
        ("xxabcdyy", ["abcd", "cdyy"], "xx<redacted>"),
        ("path /a/b/long-value/c", ["long-value", "/a/b"], "path <redacted>/<redacted>/c"),
        ("already <redacted> here", ["dact"], "already <redacted> here"),
        ("a dact b", ["dact"], "a <redacted> b"),
        ("multi\nline secret\nvalue", ["line secret\nvalue"], "multi\n<redacted>"),
    ],
)
def test_redact_known_values(text: str, secrets: list[str], expected: str) -> None:
    assert redact(text, secrets) == expected
    assert redact(expected, secrets) == expected


@pytest.mark.parametrize(
    "text",
    [
        "\\",
        "'",
        '"',
        "${",
        "$(",
        "`",
        "\\\n",
        "NGC_KEY=${",
        "a=b=c=d",
        "--password",
        "-p",
        "login -p",
    ],
)
def test_redact_and_lint_tolerate_fragments(text: str) -> None:
    assert redact(redact(text)) == redact(text)
    lint_text(text)


def test_deeply_nested_defaults_do_not_overflow() -> None:
    text = "NGC_KEY=" + "${A:-" * 3000 + "x" + "}" * 3000
    assert redact(text) == "NGC_KEY=<redacted>"
    assert pairs(lint_text(text)) == {(ASSIGN, "NGC_KEY")}


SHELLISH = st.text(alphabet='aNGC_KEY=$\'"\\ -p login{}():/@|;&\n\r#"<>-', max_size=80)
SECRET_TEXT = st.text(alphabet=st.characters(blacklist_characters="<>"), min_size=4, max_size=20)


@settings(max_examples=300)
@given(st.one_of(st.text(), SHELLISH))
def test_redact_never_raises_and_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    lint_text(text)


@settings(max_examples=300)
@given(
    before=st.one_of(st.text(max_size=30), SHELLISH),
    secret=SECRET_TEXT,
    after=st.one_of(st.text(max_size=30), SHELLISH),
)
def test_known_secret_never_survives(before: str, secret: str, after: str) -> None:
    out = redact(before + secret + after, [secret])
    assert all(secret not in piece for piece in out.split(PLACEHOLDER))
    if secret not in PLACEHOLDER:
        assert secret not in out
    assert redact(out, [secret]) == out
