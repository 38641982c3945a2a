"""Tests for taospec.lint: the secret lint rules, argv linting and redaction."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taospec import braces, lint, rules
from taospec.lint import (
    PLACEHOLDER,
    Finding,
    find_secret_literals,
    is_secret_name,
    lint_argv,
    lint_text,
    redact,
)
from tests.conftest import Runner, bash_words

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
    # a script that gives a tool its password on the command line, as a job value can't
    ("curl -u admin:hunter2 https://x", {("password-option", "curl -u")}, "hunter2"),
    ("sh -c 'sshpass -p hunter3pw ssh host'", {("password-option", "sshpass -p")}, "hunter3pw"),
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
    # a header name with nothing after it: the quote after it closes the word it is in
    "export WANDB_MODE='Authorization: '\n\nexec srun --container-image='nvcr.io#nvidia/tao' x",
    "docker run -e 'MODE=Authorization: ' \\\n  img train \\\n  -e /results/spec.yaml",
    "exec srun --container-image=img \\\n  Authorization: Bearer",  # a scheme word, no credential
    "curl -H 'Authorization: Basic' h",
    "docker run -e 'MODE=Authorization: Bearer ' \\\n  img",
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

AWS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2"
K8S_VALUE = "k8sSecretValue42"

# Kubernetes, Slurm and the other forms: (text, exact findings, the secret value in the text).
FORMS_FLAGGED = [
    (
        f"env:\n- name: MODEL\n  value: /m.pth\n- name: NGC_API_KEY\n  value: {K8S_VALUE}\n",
        {(MANIFEST, "NGC_API_KEY")},
        K8S_VALUE,
    ),
    (
        f"env:\n  - value: {K8S_VALUE}\n    name: NGC_API_KEY\n",
        {(MANIFEST, "NGC_API_KEY")},
        K8S_VALUE,
    ),
    (
        f'env:\n- name: "HF_TOKEN"\n  value: "{K8S_VALUE}"\n',
        {(MANIFEST, "HF_TOKEN")},
        K8S_VALUE,
    ),
    (
        f"env:\n- name: NGC_API_KEY\n  value: |\n    {K8S_VALUE}\n    second\n- name: NEXT\n"
        "  value: keep\n",
        {(MANIFEST, "NGC_API_KEY")},
        K8S_VALUE,
    ),
    (
        f"env:\n- name: DB_PASSWORD\n  value: >-\n    {K8S_VALUE}\n",
        {(MANIFEST, "DB_PASSWORD")},
        K8S_VALUE,
    ),
    (f"- {{name: NGC_KEY, value: {K8S_VALUE}}}", {(MANIFEST, "NGC_KEY")}, K8S_VALUE),
    (f"- {{value: {K8S_VALUE}, name: NGC_KEY}}", {(MANIFEST, "NGC_KEY")}, K8S_VALUE),
    (f"env: [{{name: NGC_KEY, value: '{K8S_VALUE}'}}]", {(MANIFEST, "NGC_KEY")}, K8S_VALUE),
    (
        f'{{"env": [{{"name": "NGC_KEY", "value": "{K8S_VALUE}"}}]}}',
        {(MANIFEST, "NGC_KEY")},
        K8S_VALUE,
    ),
    (
        f'{{"value": "{K8S_VALUE}", "name": "WANDB_API_KEY"}}',
        {(MANIFEST, "WANDB_API_KEY")},
        K8S_VALUE,
    ),
    (
        f'{{\n  "name": "HF_TOKEN",\n  "value": "{K8S_VALUE}"\n}}',
        {(MANIFEST, "HF_TOKEN")},
        K8S_VALUE,
    ),
    (f'args: ["--token", "{K8S_VALUE}"]', {(FLAG, "--token")}, K8S_VALUE),
    (f"args: ['--api-key', '{K8S_VALUE}', '--verbose']", {(FLAG, "--api-key")}, K8S_VALUE),
    (f'command: ["tool", "--password={K8S_VALUE}"]', {(FLAG, "--password")}, K8S_VALUE),
    (f"args:\n  - --hf-token\n  - {K8S_VALUE}\n", {(FLAG, "--hf-token")}, K8S_VALUE),
    (
        "sbatch --export=ALL,NGC_API_KEY=nvapiLiteral0 train.sh",
        {(ASSIGN, "NGC_API_KEY")},
        "nvapiLiteral0",
    ),
    (
        "sbatch --export=NGC_API_KEY=plain123,ALL train.sh",
        {(ASSIGN, "NGC_API_KEY")},
        "plain123",
    ),
    (
        "srun --export=ALL,MODE=fast,HF_TOKEN=plain123 python x.py",
        {(ASSIGN, "HF_TOKEN")},
        "plain123",
    ),
    ("#SBATCH --export=ALL,DB_PASSWORD=plain123", {(ASSIGN, "DB_PASSWORD")}, "plain123"),
    ("mysql -u root pass=plain123", {(ASSIGN, "pass")}, "plain123"),
    ("export DB_PASS=plain123", {(ASSIGN, "DB_PASS")}, "plain123"),
    ("tool passwd=plain123", {(ASSIGN, "passwd")}, "plain123"),
    ("tool --password plain123 --verbose", {(FLAG, "--password")}, "plain123"),
    ("tool --hf-token plain123", {(FLAG, "--hf-token")}, "plain123"),
    ("tool --client-secret=plain123", {(FLAG, "--client-secret")}, "plain123"),
    (
        f"aws configure set aws_secret_access_key {AWS_KEY}",
        {(AWS, "aws_secret_access_key")},
        AWS_KEY,
    ),
    (
        f"tool --aws-secret-access-key {AWS_KEY}",
        {(FLAG, "--aws-secret-access-key")},
        AWS_KEY,
    ),
    (f"SecretAccessKey: {AWS_KEY}", {(AWS, "SecretAccessKey")}, AWS_KEY),
    (
        f'{{"SecretAccessKey": "{AWS_KEY}"}}',
        {(AWS, "SecretAccessKey"), (JSON, "SecretAccessKey")},
        AWS_KEY,
    ),
    (f"echo {JWT}", {(TOKEN, "JWT")}, JWT),
    (f"curl -b session={JWT} https://h", {(TOKEN, "JWT")}, JWT),
    (
        f"cat > key <<EOF\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n"
        "-----END RSA PRIVATE KEY-----\nEOF",
        {(PEM, "RSA PRIVATE KEY")},
        PEM_BODY,
    ),
    (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + PEM_BODY
        + '\\n-----END PRIVATE KEY-----"}',
        {(PEM, "PRIVATE KEY")},
        PEM_BODY,
    ),
    (
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n",
        {(PEM, "OPENSSH PRIVATE KEY")},
        PEM_BODY,
    ),
    (
        "curl -H 'Authorization: Bearer plain1234' https://h",
        {(HEADER, "Authorization"), (BEARER, "bearer token")},
        "plain1234",
    ),
    ("curl -H 'X-Api-Key: plain1234' https://h", {(HEADER, "X-Api-Key")}, "plain1234"),
    (
        "curl -H 'Accept: json' -H 'authorization: token plain1234' h",
        {(HEADER, "authorization")},
        "plain1234",
    ),
    (
        "wget --header='Authorization: Basic dXNlcjpwYXNz' h",
        {(HEADER, "Authorization")},
        "dXNlcjpw",
    ),
    (
        "http h 'X-Trace: 1' && send --data x bearer plain1234",
        {(BEARER, "bearer token")},
        "plain1234",
    ),
    (
        "git clone https://0123456789abcdef0123456789abcdef@github.com/org/repo",
        {(URL, "URL token")},
        "0123456789abcdef0123456789abcdef",
    ),
]

FORMS_ALLOWED = [
    "env:\n- name: NGC_API_KEY\n  value: $(NGC_API_KEY)\n",
    'env:\n- name: NGC_API_KEY\n  value: "$(NGC_API_KEY)"\n',
    "env:\n- name: NGC_API_KEY\n  valueFrom:\n    secretKeyRef:\n      name: ngc\n      key: key\n",
    "env:\n- name: MODEL_PATH\n  value: /models/dino.pth\n- name: EPOCHS\n  value: '10'\n",
    "env:\n- name: NGC_API_KEY\n  value: ''\n",
    "- {name: NGC_KEY, valueFrom: {secretKeyRef: {name: ngc, key: key}}}",
    "- {name: NGC_KEY, value: $(NGC_KEY)}",
    '{"env": [{"name": "NGC_KEY", "value": "$(NGC_KEY)"}]}',
    '{"name": "MODEL", "value": "/models/x.pth"}',
    'args: ["--token", "$(HF_TOKEN)"]',
    'args: ["--token-limit", "512", "--max-tokens", "64"]',
    "args:\n  - --password-stdin\n  - --verbose\n",
    "sbatch --export=ALL,NGC_API_KEY train.sh",
    "sbatch --export=ALL,NGC_API_KEY,HF_TOKEN train.sh",
    "sbatch --export=ALL,NGC_API_KEY=$NGC_API_KEY train.sh",
    "sbatch --export=NONE --parsable job.sbatch",
    "#SBATCH --export=ALL,MODE=fast",
    "tool --token-limit 5 --password-stdin",
    "python run.py PASS_THROUGH=1 bypass=2 compass=north",
    "echo $PASS",
    'curl -H "Authorization: Bearer $TOKEN" https://h',
    "curl -H 'Content-Type: application/json' https://h",
    "echo missing bearer token, asked for bearer auth",
    "aws configure set region us-east-1",
    "echo aws_secret_access_key is read from the profile",
    "echo eyJhbGciOiJIUzI1NiJ9 alone is a header",
    "echo -----BEGIN PUBLIC KEY-----",
    "git clone https://github-actions@github.com/org/repo",
    "python train.py results_dir=/exp/token=v1/run",
    "# don't pass NGC_KEY inline\ndocker run -e NGC_KEY img",
]


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED + FORMS_FLAGGED)
def test_flagged(text: str, expected: set[tuple[str, str]], secret: str) -> None:
    assert pairs(lint_text(text)) == expected


@pytest.mark.parametrize("text", ALLOWED + FORMS_ALLOWED)
def test_allowed(text: str) -> None:
    assert lint_text(text) == []


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED + FORMS_FLAGGED)
def test_findings_never_show_the_value(
    text: str, expected: set[tuple[str, str]], secret: str
) -> None:
    findings = lint_text(text)
    assert findings
    for finding in findings:
        assert secret not in str(finding)
        assert secret not in repr(finding)


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED + FORMS_FLAGGED)
def test_redact_removes_what_lint_finds(
    text: str, expected: set[tuple[str, str]], secret: str
) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert lint_text(redacted) == []
    assert redact(redacted) == redacted


@pytest.mark.parametrize(("text", "expected", "secret"), FLAGGED + FORMS_FLAGGED)
def test_a_finding_reads_the_same_through_taospec_s_own_redaction(
    text: str, expected: set[tuple[str, str]], secret: str
) -> None:
    # Everything taospec prints is redacted; "--token is given ..." came out of render as
    # "--token <redacted> given ...", the flag's rule reading "is" as its value.
    for finding in lint_text(text):
        assert redact(str(finding)) == str(finding)


def test_finding_message_names_the_variable() -> None:
    (finding,) = lint_text("echo hi\n\nexport NGC_KEY=abc123")
    assert finding == Finding(3, ASSIGN, "NGC_KEY")
    assert str(finding) == (
        "line 3: NGC_KEY is assigned an inline secret value; "
        "pass it by name (-e NGC_KEY) or through stdin"
    )


def test_every_rule_has_a_message() -> None:
    text = "\n".join(case[0] for case in FLAGGED + FORMS_FLAGGED)
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
    # a shell's script is read as a script, not as one NAME=value word
    (["sh", "-c", "NGC_API_KEY=$NGC_KEY ngc registry model list"], set()),
    (["bash", "-lc", "HF_TOKEN=$(cat /run/secrets/hf) python train.py"], set()),
    (["sh", "-c", "HF_TOKEN=${HF:-} python train.py"], set()),
    (["sh", "-c", "NGC_API_KEY=abc123 ngc registry model list"], {(ASSIGN, "NGC_API_KEY")}),
    (["env", "NGC_API_KEY=$NGC_KEY run"], {(ASSIGN, "NGC_API_KEY")}),
    ([], set()),
]


@pytest.mark.parametrize(("argv", "expected"), ARGV_CASES)
def test_lint_argv(argv: list[str], expected: set[tuple[str, str]]) -> None:
    findings = lint_argv(argv)
    assert pairs(findings) == expected
    assert all(finding.line == 1 for finding in findings)


@pytest.mark.parametrize(
    "script", ["echo ab''cd \"e\"'f'g", 'printf %s a\\b \'c d\' "x\\"y\\z"', "run a\\\nb"]
)
def test_argv_words_reads_a_script_as_the_shell_does(script: str) -> None:
    words = list(lint.argv_words(["sh", "-c", script]))
    assert words[:3] == [(0, "sh"), (1, "-c"), (2, script)]
    assert [word for index, word in words[3:] if index == 2] == bash_words(script)


DOUBLE_QUOTED = st.lists(
    st.sampled_from(["a", "b c", "\t", "'", '\\"', "\\\\", "\\$", "\\a", "\\\n", "\n", "#", "|"]),
    max_size=12,
).map(lambda pieces: '"' + "".join(pieces) + '"')


@settings(max_examples=200, deadline=None)
@given(words=st.lists(DOUBLE_QUOTED, min_size=1, max_size=3))
def test_argv_words_reads_double_quotes_as_the_shell_does(words: list[str]) -> None:
    script = "echo " + " ".join(words)
    read = [word for index, word in lint.argv_words(["sh", "-c", script]) if index == 2]
    assert read[1:] == bash_words(script)


@pytest.mark.parametrize(
    "script",
    [
        'printf %s $(printf %s Pa"ss"w0rd)',
        'printf %s "$(printf %s Pa\'ss\'w0rd)"',
        "printf %s `printf %s Pa''ss\\\\w0rd`",
        'printf %s "`printf %s Pa\\"ss\\"w0rd`"',
        'printf %s ${UNSET:-Pa"ss"w0rd}',
        'printf %s "${UNSET:=Pa"ss"w0rd}"',
        "printf %s ${PATH:+Pa''ss''w0rd}",
        "printf %s ${UNSET-Pa\\ss\\w0rd}",
        'printf %s "${UNSET:-"$(printf %s Pa\'ss\'w0rd)"}"',
        "printf %s $(printf %s `printf %s Pa''ss''w0rd`)",
    ],
    ids=[
        "subst", "subst-in-quotes", "backticks", "backticks-in-quotes", "default", "assign",
        "alternative", "unset-default", "nested", "backticks-in-subst",
    ],
)  # fmt: skip
def test_argv_words_reads_the_words_inside_expansions(script: str) -> None:
    # the shell removes quotes inside $(...), backticks and ${NAME:-word} too: these words
    # join Pa, ss and w0rd in a child's argv, where the reader did not look
    assert bash_words(f"$({script})") == ["Passw0rd"]  # what bash makes of them
    words = [word for _, word in lint.argv_words(["sh", "-c", script])]
    assert "Passw0rd" in words, words


def test_argv_words_inside_expansions_are_the_shells_words() -> None:
    script = 'echo $(date +%s) "${HOME:-/tmp}" `id -u` ${X:+-v} $((1 + 2))'
    words = [word for index, word in lint.argv_words(["sh", "-c", script]) if index == 2]
    assert words[1:] == [
        "echo", "$(date +%s)", "${HOME:-/tmp}", "`id -u`", "${X:+-v}", "$((1 + 2))",
        "date", "+%s", "/tmp", "id", "-u", "-v", "1", "+", "2",
    ]  # fmt: skip


def test_argv_words_follow_expansions_as_deep_as_the_lint_follows_scripts() -> None:
    for levels in range(1, 5):  # sh -c is the first level
        script = "echo " + "$(echo " * (levels - 1) + "a\\b" + ")" * (levels - 1)
        words = [word for _, word in lint.argv_words(["sh", "-c", script])]
        assert ("ab" in words) == (levels <= 3), levels
    deep = "echo " + "${A:-$(echo " * 3000 + "x" + ")}" * 3000  # read to its bound only
    assert len(list(lint.argv_words(["sh", "-c", deep]))) == 8  # 3 levels: no RecursionError


def test_argv_words_follows_scripts_as_deep_as_the_lint_does() -> None:
    script = "echo a\\b"  # a shell reads the word ab
    for levels in range(1, 5):
        argv = ["sh", "-c", script]
        words = [word for _, word in lint.argv_words(argv)]
        assert ("ab" in words) == (levels <= 3), levels  # the lint reads three scripts deep
        script = shlex.join(argv)


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


NAMEISH = st.text(alphabet="aAkKeEyYpPsStToOnNcCrRdDiIlLfF_.-0ßﬀıK", max_size=24)


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=24), NAMEISH))
def test_a_name_judged_by_its_short_cut_has_no_keyword_part(name: str) -> None:
    """Names and flags without KEY, PASS, TOKEN, SECRET or CREDENTIAL are refused before
    they are split: none of their parts may be a keyword (or the KEY of a pair)."""
    if not lint._may_name_secret(name):
        keywords = lint._SINGLE_KEYWORDS | lint._LAST_KEYWORDS | {"KEY"}
        assert not set(lint._name_parts(name)) & keywords
        assert not set(lint._name_parts(name[2:])) & keywords


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
    assert lint_text(value)


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
    assert lint_text(value) == []


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
    ("text", "open_from"),
    [
        ("Authorization: Bearer eyJhbGciOi", 0),  # the token and the words a rule needs
        ("step 3: curl -u admin:s3cr", 8),
        ("ends with a space ", 5),
        ("x" * 70000 + " nvapi-Qw3rTy8u", 70015 - lint.OPEN_AT_MOST),  # handed on
        ("x " * 40000 + '"eyJ' + "a" * 4500, 80001),  # the whole token, though longer
        ("y" * 70000 + "nvapi-Qw3rTy8u", 70014 - lint.OPEN_AT_MOST),  # no break for long
    ],
)
def test_output_still_being_written_is_cut_before_what_a_rule_may_yet_find(
    text: str, open_from: int
) -> None:
    assert lint.still_open(text) == open_from


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


def test_a_manifest_finding_reports_the_value_line() -> None:
    text = "env:\n- name: MODEL\n  value: /m\n- name: NGC_KEY\n  value: abc123\n"
    assert lint_text(text) == [Finding(5, MANIFEST, "NGC_KEY")]


def test_a_quoted_apostrophe_in_a_comment_does_not_join_lines() -> None:
    text = "# don't\nexport TOKEN=abc123\necho 'it is'\n"
    assert lint_text(text) == [Finding(2, ASSIGN, "TOKEN")]


def test_a_multi_line_quoted_value_is_one_word() -> None:
    text = "tool --password 'first line\nsecond9 line' --next"
    assert lint_text(text) == [Finding(1, FLAG, "--password")]
    assert "second9" not in redact(text)


def test_a_block_scalar_is_removed_whole_and_the_next_entry_kept() -> None:
    text = "- name: NGC_KEY\n  value: |\n    abc123\n    def456\n- name: NEXT\n  value: keep\n"
    assert redact(text) == "- name: NGC_KEY\n  value: <redacted>\n- name: NEXT\n  value: keep\n"


def test_export_keeps_the_items_before_the_secret() -> None:
    text = "sbatch --export=ALL,MODE=fast,NGC_KEY=abc123,HF_TOKEN train.sh"
    assert redact(text) == "sbatch --export=ALL,MODE=fast,NGC_KEY=<redacted> train.sh"


SPEC_VALUES_FLAGGED = [
    ("password=hunter22", {(ASSIGN, "password")}),
    ("export password=hunter22; run", {(ASSIGN, "password")}),
    ("export password=$X;hunter22", {(ASSIGN, "password")}),
    ("db pass=hunter22", {(ASSIGN, "pass")}),
    ("tool --password hunter22", {(FLAG, "--password")}),
    (f"aws configure set aws_secret_access_key {AWS_KEY}", {(AWS, "aws_secret_access_key")}),
    (JWT, {(TOKEN, "JWT")}),
    (
        f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n-----END EC PRIVATE KEY-----\n",
        {(PEM, "EC PRIVATE KEY")},
    ),
    ("Bearer plain1234", {(BEARER, "bearer token")}),
    (NVAPI, {(TOKEN, "nvapi- token")}),
    (HF, {(TOKEN, "hf_ token")}),
    (GHP, {(TOKEN, "ghp_ token")}),
    (GITHUB_PAT, {(TOKEN, "github_pat_ token")}),
    (AKIA, {(TOKEN, "AKIA key")}),
    (OPENAI, {(TOKEN, "sk- token")}),
    (f"visual_changenet train --api-key={NVAPI}", {(FLAG, "--api-key"), (TOKEN, "nvapi- token")}),
    ("https://user:hunter22@host/data", {(URL, "URL password")}),
    # judged as the plan carries them, filled in: the plan's lint refuses NGC_KEY=/data/...
    ("NGC_KEY={needs.prepare.results_dir}", {(ASSIGN, "NGC_KEY")}),
    ("tool --token={results_dir}", {(FLAG, "--token")}),
]

SPEC_VALUES_ALLOWED = [
    "/data/results",
    "/lustre/exp/token=v1/run",
    "0.0001",
    "10",
    "${HOME}/data",
    "${NGC_KEY}",
    "{results_dir}",
    "visual_changenet train -e {config_path} results_dir={results_dir}",
    "export API_TOKEN=$MY_TOKEN; exit 3",  # a reference, then the shell's separator
    'API_TOKEN="$MY_TOKEN"&& run',
    "tool --token {matrix.token}",
    "nvidia/segformer-b5",
    "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
    "hf_transfer",
    "sk-east-cluster-node-01",
    "offline",
    "tokenizer: bpe",
    "max_tokens=512",
    "s3://bucket/datasets/levir-cd",
    "",
    # a tool's password option with no password in it, and look-alikes
    "docker run -u 1000:1000 img",
    "mysql -p tao_db",
    "curl -u bob: https://x",
    "curl -u $CREDENTIALS https://x",
    "sshpass -e ssh host",
    "Basic training ends at epoch 10",
    "Basic dXNlcg==",  # base64 of "user": no password
]


@pytest.mark.parametrize(("value", "expected"), SPEC_VALUES_FLAGGED)
def test_find_secret_literals_flags_a_spec_value(
    value: str, expected: set[tuple[str, str]]
) -> None:
    findings = find_secret_literals(value)
    assert pairs(findings) == expected
    for finding in findings:
        assert value not in str(finding)


@pytest.mark.parametrize("value", SPEC_VALUES_ALLOWED)
def test_find_secret_literals_passes_ordinary_spec_values(value: str) -> None:
    assert find_secret_literals(value) == []


FREE_TEXT = [
    ("AWS_SECRET_ACCESS_KEY=abc&tailSECRETpart,more", "AWS_SECRET_ACCESS_KEY=<redacted>"),
    ("failed: NGC_KEY=a;b;c, retrying", "failed: NGC_KEY=<redacted> retrying"),
    ("GET /x?user=u&token=abc?def&page=2 failed", "GET /x?user=u&token=<redacted> failed"),
    ("srun --export=ALL,NGC_KEY=a,b,c x", "srun --export=ALL,NGC_KEY=<redacted> x"),
    ("login with --password a,b;c&d ok", "login with --password <redacted> ok"),
    ("Authorization: Bearer abc,def;ghi", "Authorization: Bearer <redacted>"),
    ("proxy said: authorization=Basic dXNlcjpwYXNz", "proxy said: authorization=Basic <redacted>"),
    (
        "headers={'Authorization': 'Bearer abc123'}",
        "headers={'Authorization': 'Bearer <redacted>'}",
    ),
    ("retrying with bearer abc123xyz", "retrying with bearer <redacted>"),
    ("aws_secret_access_key: abc def ghi\nnext: 1", "aws_secret_access_key: <redacted>\nnext: 1"),
    ("password = hunter2 and more", "password = <redacted>"),
    ("token: 'a b c' # set", "token: <redacted> # set"),
    (
        "config:\n  password: |\n    line1\n    line2\n  user: bob",
        "config:\n  password: <redacted>\n  user: bob",
    ),
    (
        "clone https://0123456789abcdef0123456789@github.com/o/r failed",
        "clone https://<redacted>@github.com/o/r failed",
    ),
    (f"token {JWT} expired", "token <redacted> expired"),
    (
        f"key:\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n-----END PRIVATE KEY-----\ndone",
        "key:\n<redacted>\ndone",
    ),
    ("wrote /exp/token=v1/run", "wrote /exp/token=v1/run"),
    ("NGC_KEY=$NGC_KEY", "NGC_KEY=$NGC_KEY"),
    ("max_tokens=512 tokenizer: bpe", "max_tokens=512 tokenizer: bpe"),
]


@pytest.mark.parametrize(("text", "expected"), FREE_TEXT)
def test_redact_free_text_takes_values_whole(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected


def test_the_lint_command_reads_manifests_and_sbatch_scripts(
    taospec: Runner, tmp_path: Path
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "spec:\n  containers:\n  - name: tao\n    env:\n    - name: MODEL\n      value: /m.pth\n"
        f"    - name: NGC_API_KEY\n      value: {K8S_VALUE}\n"
    )
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\nsbatch --export=ALL,HF_TOKEN={K8S_VALUE} train.sh\n")
    for path, line, subject in [(manifest, 8, "NGC_API_KEY"), (script, 2, "HF_TOKEN")]:
        done = taospec("lint", path)
        assert done.returncode == 1
        assert f"{path}:line {line}: " in done.stderr
        assert subject in done.stderr
        assert K8S_VALUE not in done.stderr + done.stdout
    clean = tmp_path / "clean.yaml"
    clean.write_text(
        "env:\n- name: NGC_API_KEY\n  valueFrom:\n    secretKeyRef: {name: ngc, key: k}\n"
    )
    assert taospec("lint", clean).returncode == 0


def test_every_token_pattern_starts_with_a_listed_prefix() -> None:
    # The lint skips the token patterns when none of these literals is in the text.
    for subject, pattern in lint._TOKEN_PATTERNS:
        body = re.sub(r"^\(\?<!\[[^\]]*\]\)", "", pattern().pattern)
        assert body.startswith(lint.TOKEN_PREFIXES), (subject, body)


# Each pattern rule first looks for a literal every match contains; a match without it
# would be a secret the gate lets through. Hypothesis writes texts each pattern matches.
GATES = {
    "_URL_USERINFO": lambda text: "://" in text and "@" in text,
    "_URL_TOKEN": lambda text: "://" in text and "@" in text,
    "_SIGNED_URL": lambda text: "=" in text and lint._may_hold(text, "x-amz-"),
    "_JSON_PAIR": lambda text: ":" in text and ('"' in text or "'" in text),
    "_ARRAY_FLAG": lambda text: "--" in text,
    "_HEADER": lambda text: lint._may_hold(text, "authorization"),
    "_BEARER": lambda text: lint._may_hold(text, "bearer"),
    "_BASIC": lambda text: lint._may_hold(text, "basic"),
    "_PEM": lambda text: "-----BEGIN " in text,
    "_BLOCK_ARG": lambda text: "--" in text and "\n" in text,
    "_FLOW_MAPPING": lambda text: "{" in text,
    "_FREE_ASSIGNMENT": lambda text: "=" in text,
    "_FREE_FLAG": lambda text: "--" in text,
    "_FREE_KEY": lambda text: ":" in text or "=" in text,
}


@pytest.mark.parametrize("name", sorted(GATES))
def test_a_rule_s_gate_lets_every_match_through(name: str) -> None:
    pattern = getattr(lint, name)()

    @settings(max_examples=150, deadline=None)
    @given(st.from_regex(pattern))
    def check(text: str) -> None:
        assert GATES[name](text), text

    check()


@pytest.mark.parametrize(
    "text",
    [
        "Authorızation: Basic dXNlcjpwYXNzd29yZA1234",  # dotless i, read as i by (?i)
        "curl -H 'AUTHORİZATION: Bearer abcdefgh12345678'",  # dotted capital I
        "https://bucket/x?X-Amz-ſignature=0123456789abcdef",  # long s, read as s
        "s3://b/k?X-Amz-Security-To\u212aen=0123456789abcdef",  # Kelvin sign, read as k
    ],
)
def test_non_ascii_case_forms_are_redacted_like_ascii_ones(text: str) -> None:
    # (?i) patterns read some non-ASCII letters as ASCII ones, so such text is always
    # scanned; a parameter name with one is reported as written, never a crash.
    assert PLACEHOLDER in redact(text)
    assert lint_text(text)


# Shapes the job-value check refuses beyond the lint's reference list: redaction removes
# each of them from free text too, while the lint of command lines keeps to that list.
GHO = "gho_AbCdEfGhIj0123456789AbCdEfGhIj012345"
BEYOND_THE_LIST = [  # (the value, the secret in it)
    (GHO, GHO),
    ("ghs_" + GHO[4:], "ghs_" + GHO[4:]),
    ("ghu_" + GHO[4:], "ghu_" + GHO[4:]),
    ("ghr_" + GHO[4:], "ghr_" + GHO[4:]),
    ("glpat-AbCdEfGhIj0123456789", "glpat-AbCdEfGhIj0123456789"),
    ("hf_" + "a" * 34, "hf_" + "a" * 34),
    (AWS_KEY, AWS_KEY),
    ("token:0000abcd", "0000abcd"),
    ("password:hunter22", "hunter22"),
    ("bearer\u00a0abcdefgh1", "abcdefgh1"),
    ("Bearer\nabcdefghij", "abcdefghij"),
    (f"-----BEGIN CERTIFICATE-----\n{PEM_BODY}\n-----END CERTIFICATE-----", PEM_BODY),
    # a password given to a tool's own option, and HTTP Basic credentials without a header
    ("curl -u bob:hunter2pw https://x", "hunter2pw"),
    ("curl --user='bob:hunter2 pw' https://x", "hunter2 pw"),
    ("/usr/bin/sshpass -p hunter3pw ssh host", "hunter3pw"),
    ("mysqldump -phunter4pw tao_db", "hunter4pw"),
    ("HTTP_AUTH=Basic Ym9iOmh1bnRlcjVwdw==", "Ym9iOmh1bnRlcjVwdw=="),
]


@pytest.mark.parametrize(("value", "secret"), BEYOND_THE_LIST)
def test_a_value_the_job_check_refuses_is_redacted_from_free_text(value: str, secret: str) -> None:
    assert find_secret_literals(value)
    for said in (*map(str, find_secret_literals(value)), *rules.secret_literals(value)):
        assert redact(said) == said  # a finding's words survive taospec's own redaction
    redacted = redact(f"job failed: {value} (exit 1)")
    assert secret not in redacted
    assert PLACEHOLDER in redacted
    assert redact(redacted) == redacted


@pytest.mark.parametrize(("value", "secret"), BEYOND_THE_LIST[:6])
def test_command_lines_keep_to_the_reference_token_list(value: str, secret: str) -> None:
    assert lint_text(f"echo {value}") == []


def test_a_value_is_reported_once_by_the_rule_that_names_it() -> None:
    value = f"tool --aws-secret-access-key {AWS_KEY}"
    assert pairs(find_secret_literals(value)) == {(FLAG, "--aws-secret-access-key")}


@pytest.mark.parametrize(
    ("subject", "prefixes"),
    [
        *((subject, lint.TOKEN_PREFIXES) for subject, _ in lint._TOKEN_PATTERNS),
        *((subject, lint._EXTRA_TOKEN_PREFIXES) for subject, _ in lint._EXTRA_TOKEN_PATTERNS),
    ],
)
def test_every_match_of_a_token_pattern_holds_a_listed_prefix(
    subject: str, prefixes: tuple[str, ...]
) -> None:
    # The token rules, and the gates for a line of a job's output, look for these
    # literals alone: a match without one would be a token they let through.
    pattern = dict((*lint._TOKEN_PATTERNS, *lint._EXTRA_TOKEN_PATTERNS))[subject]()

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(pattern))
    def check(text: str) -> None:
        found = pattern.search(text)
        assert found is not None
        assert any(prefix in found.group() for prefix in prefixes), (subject, found.group())

    check()


RULE_PIECES = st.lists(
    st.sampled_from(
        [
            *" \t\n\r'\"$`\\{}()[]<>|;&#@/.,_+%~!?*aZ09",
            "sh",
            " -c ",
            "bash",
            "login",
            " -p ",
            "bearer ",
            "Bearer\t",
            "AUTHORIZATION",
            "Authorization",
            "token",
            "TOKEN",
            "PASSWORD",
            "password",
            "NGC_KEY",
            "api_key",
            "secret",
            "AKIA",
            "ghp_",
            "gho_",
            "hf_",
            "eyJ",
            "xox",
            "sk-",
            "nvapi-",
            "glpat-",
            "github_pat_",
            "BEGIN",
            "-----BEGIN ",
            "PRIVATE KEY",
            "name",
            "value",
            "valueFrom",
            "export",
            "://",
            "X-Amz-",
            "\u017f",
            "\u212a",
            "=",
            ":",
            "--",
            "-",
            "A" * 16,
            "a1B2" * 5,
            "x" * 39,
            "a-",
            "-b",
            "''",
            "\\-",
        ]  # fmt: skip
    ),
    max_size=12,
).map("".join)


@settings(max_examples=1500)
@given(st.one_of(RULE_PIECES, st.text(max_size=45), SHELLISH))
def test_text_the_quick_check_passes_holds_nothing_any_rule_finds(text: str) -> None:
    # find_secret_literals skips the scan when _may_hold_secret says no rule can fire.
    if not lint._may_hold_secret(text):
        assert lint._located(text, free_text=True) == []


@pytest.mark.parametrize(
    "text",
    [
        "login '-p' abc",
        "login \\-p abc",
        "login ''-p abc",
        "login -pabc",
        "a --token x",
        "TOKEN=abc",
        "bearer abc123xyz",
        'sh -c "TOKEN=ab"',
        "x --api-key=abc",
    ],  # fmt: skip
)
def test_short_secrets_reach_the_scan(text: str) -> None:
    assert lint._located(text, free_text=True)
    assert lint._may_hold_secret(text)


def test_short_values_without_rule_characters_skip_the_scan() -> None:
    for value in ("/data", "hello, TAO", "offline", "LEVIR-CD", "a-b-c d-e"):
        assert not lint._may_hold_secret(value)
    for value in ("-p", "a -p", "'-p'", "a--b", "a=b", "x:y", "bearer abc", "AKIAxx", "ghp_"):
        assert lint._may_hold_secret(value)
    for value in ("\u017f", "a" * 40, "''-p", "\\-p", "$(x)-p", "a\\\n-p", "sk-"):
        assert lint._may_hold_secret(value)


@settings(max_examples=300)
@given(st.one_of(st.text(), SHELLISH))
def test_what_the_job_check_passes_redaction_leaves_alone(text: str) -> None:
    # One detector: whatever redact would rewrite, find_secret_literals reports.
    if braces.token().search(text) is None and not find_secret_literals(text):
        assert redact(text) == text


@settings(max_examples=2000)
@given(st.text(alphabet=" \t\r\n|&;()ab-=:x{}é", max_size=40))
def test_plain_text_is_split_into_commands_as_the_shell_reader_splits_it(text: str) -> None:
    # the regular expression that splits text without quotes or escapes must give the
    # words and spans the character-at-a-time reader gives
    assert lint._commands(text) == lint._parsed_commands(text)
