"""redact's short cut for inert text must answer exactly what the full scan answers.

:func:`taospec.lint.redact` returns text made only of letters, digits and
``_ . / : , + % ~ -`` unchanged when no token pattern and no known value
occurs in it, and plain prose (ASCII letters, digits, spaces and ``. , ; ! ? ( )
'``) unchanged when none of the literals of its gate and no known value occurs
in it, without reading either as shell words. These tests hold that short cut
against every rule: on inert text no rule may find anything, and on any text
(non-ASCII text included) the answer is the full scan's.
"""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from taospec import lint
from taospec.ledger.record import OPENED_MESSAGE
from taospec.lint import PLACEHOLDER, Redactor, lint_argv, lint_text, redact, redact_location
from taospec.platforms.common import redacted_block, redacted_output

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
    "tokens",
    "TOKENS",
    "tokenS",
    "secreToken",
    "keypoints",
    "passed",
    "passwd",
    '"FOO_TOKEN"x',
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

# Plain prose, and what the rules could still find in it.
PROSE_CHARS = string.ascii_letters + string.digits + " .,;!?()'"
AWS_RUN = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY12"  # 40 characters, no / or +
JWT_PROSE = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5"
PROSE_FOUND = [
    "bearer abc12345",
    "Bearer abcdefghijklmnopqrstu",
    "BEARER  abcdefgh12",
    "key AKIAIOSFODNN7EXAMPLE here",
    f"got {JWT_PROSE} back",
    f"password {AWS_RUN}",
    f"SecretAccessKey '{AWS_RUN}'",
    f"a {AWS_RUN} run",
]
# Characters (?i) reads as ASCII letters, and other non-ASCII text.
CASE_FOLDED = ["\u017f", "\u212a", "\u0131", "\u0130", "\u00e9", "\u00a0", "\u2028"]
PROSE_PIECES = [
    *PROSE_FOUND,
    OPENED_MESSAGE,
    "launched",
    "exit 3 (killed)",
    "bearer",
    "Bearer",
    "AKIA",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJ",
    JWT_PROSE,
    AWS_RUN,
    AWS_RUN[:39],
    "password",
    "SecretAccessKey",
    "token",
    "secret",
    "api key",
    "NGC KEY",
    "login p hunter2",
    "bash c",
    "export",
    "Authorization",
    "Basic",
    "xoxb",
    "ghp",
    "gho",
    "hf",
    "sk",
    "nvapi",
    "github pat",
    "glpat",
    "BEGIN PRIVATE KEY",
    "'",
    "(",
    ")",
    ";",
    " ",
    ".",
    *CASE_FOLDED,
    "-",
    ":",
    "=",
    "_",
    "\n",
    "<redacted>",
]
PROSE = st.text(alphabet=PROSE_CHARS, max_size=80)


def _rule_patterns() -> dict[str, re.Pattern[str]]:
    """Every pattern of the lint, by name: the lazily compiled ones and the token shapes."""
    patterns = {
        name: value()
        for name, value in vars(lint).items()
        if name.lstrip("_").isupper() and hasattr(value, "cache_info")
        if not name.startswith(("_PROSE", "_LOGGED"))
    }
    for subject, pattern in (*lint._TOKEN_PATTERNS, *lint._EXTRA_TOKEN_PATTERNS):
        patterns[subject] = pattern()
    return {name: p for name, p in patterns.items() if isinstance(p, re.Pattern)}


RULE_PATTERNS = _rule_patterns()


def _matches_in(alphabet: str | None) -> dict[str, st.SearchStrategy[str]]:
    """Texts each pattern matches, written from ``alphabet`` (those it can match in it)."""
    found = {}
    for name, pattern in RULE_PATTERNS.items():
        strategy = st.from_regex(pattern, alphabet=alphabet)
        try:
            strategy.validate()
        except InvalidArgument:  # the pattern needs a character outside the alphabet
            continue
        found[name] = strategy
    return found


PROSE_MATCHES = _matches_in(PROSE_CHARS)
RULE_TEXT = st.one_of(*_matches_in(None).values())
PROSE_MIXED = st.lists(
    st.one_of(st.sampled_from(PROSE_PIECES), PROSE, *PROSE_MATCHES.values()), max_size=6
).flatmap(lambda parts: st.sampled_from(["", " "]).map(lambda sep: sep.join(parts)))

# A line of a training log: printable ASCII but expansions, tabs, bars.
BAR_CHARS = "\u2588\u258f\u2589\u2501\u2578\u2502\u2500\u259f"
LOGGED_CHARS = "".join(c for c in string.printable if c not in "$`\n\x0b\x0c") + BAR_CHARS + "\x1b"
LOG_LINES = [
    "Epoch 3/100: 100%|\u2588\u2588\u2588\u2588| 512/512 [01:02<00:00, 8.2it/s, loss=0.123]",
    "[2026-12-05 10:11:00,123 - nvidia_tao_pytorch - INFO] Saving checkpoint to /results/a.pth",
    "Epoch 0:  10%|\u2588         | 51/512 [00:05<00:46, 9.9it/s]\r",
    "train_loss_step=0.45, val_acc=0.91, lr=1e-4; {a: 1, b: [2, 3]} (#4) <5> & ~6 ^7 *8 ?9",
    "\u2501\u2501\u2501\u2578 42/100 0:00:03",
    "\x1b[32mINFO\x1b[0m Epoch 1 | loss=0.5 \x1b[1;31m[WARN]\x1b[0m slow step",
    "Validation metrics: {'val_loss': 0.25, 'val_acc': 0.91, \"mode\": \"eval\"}",
    '{"images": [{"file": "/data/img_0000001.jpg", "label": 1}]}',
]
# Quotes and backslashes that join pieces of a word, as a shell reads it (a"'"b reads a'b).
JOINS = ["sh -c ", 'a"\'"', "x'\"'", '""', "''", '"', "'", "\\", "x\\", '\\"']
LOGGED_MATCHES = _matches_in(LOGGED_CHARS)
LOGGED = st.text(alphabet=LOGGED_CHARS, max_size=80)
LOGGED_MIXED = st.tuples(
    st.lists(
        st.one_of(
            st.sampled_from([*PIECES, *PROSE_PIECES, *LOG_LINES, *JOINS]),
            LOGGED,
            *LOGGED_MATCHES.values(),
        ),
        max_size=6,
    ),
    st.sampled_from(["", " ", "\t", "\r", ", ", "="]),
    st.sampled_from(["", "\n"]),
).map(lambda parts: parts[1].join(parts[0]) + parts[2])
ANY_TEXT = st.one_of(
    INERT, MIXED, PROSE, PROSE_MIXED, LOGGED, LOGGED_MIXED, RULE_TEXT, st.text(max_size=60)
)
# A job value of logged text with placeholders, each of which a rule may read beside what
# stands around it: after a secret word, a token prefix or the start of a run, in quotes.
PLACEHOLDERS = ["{results_dir}", "{config_path}", "{job_id}", "{matrix.t}", "{{", "}}"]
WITH_PLACEHOLDERS = st.lists(
    st.one_of(
        st.sampled_from([*PLACEHOLDERS, *PIECES, *JOINS, "nvapi-", "AKIA", AWS_RUN[:30]]),
        LOGGED,
        *LOGGED_MATCHES.values(),
    ),
    max_size=8,
).flatmap(lambda parts: st.sampled_from(["", " ", "=", ":"]).map(lambda sep: sep.join(parts)))


def secrets_of(values: list[str]) -> list[str]:
    """The known values redact would look for (the environment's included)."""
    return lint._known_secrets(values)


@settings(max_examples=2000)
@given(text=st.one_of(INERT, MIXED, PROSE, PROSE_MIXED, LOGGED, LOGGED_MIXED), values=SECRETS)
def test_no_rule_finds_anything_in_text_called_inert(text: str, values: list[str]) -> None:
    secrets = secrets_of(values)
    if not lint._is_inert(text, secrets):
        return
    assert lint._text_hits(text, free_text=True) == []
    assert lint._redact_values(text, secrets) == text
    assert lint._redact_fully(text, secrets) == text
    assert location_scan(text, secrets) == text
    assert lint_text(text) == []
    assert lint_argv([text]) == []


@settings(max_examples=1000)
@given(text=ANY_TEXT, values=SECRETS)
def test_redact_answers_what_the_full_scan_answers(text: str, values: list[str]) -> None:
    assert redact(text, values) == lint._redact_fully(text, secrets_of(values))


def location_scan(text: str, secrets: list[str]) -> str:
    """redact_location by its own scan: the known values, then the format rules, until stable."""
    current = lint._redact_values(text, secrets)
    return lint._until_stable(current, lambda v: lint._apply(v, lint._run(lint._FORMAT_RULES, v)))


@settings(max_examples=1000)
@given(text=st.one_of(ANY_TEXT, INERT, MIXED), values=SECRETS)
def test_redact_location_answers_what_its_own_scan_answers(text: str, values: list[str]) -> None:
    # a path or image the full scan cannot change is left as it is without the scan
    assert redact_location(text, values) == location_scan(text, secrets_of(values))


BARS = range(0x2500, 0x25A0)
"""Box-drawing and block characters: the one non-ASCII text a gate judges."""


@settings(max_examples=500)
@given(
    before=st.one_of(PROSE, PROSE_MIXED, LOGGED),
    char=st.one_of(
        st.sampled_from(CASE_FOLDED),
        st.characters(min_codepoint=128).filter(lambda c: ord(c) not in BARS),
    ),
    after=st.one_of(PROSE, PROSE_MIXED, LOGGED),
)
def test_non_ascii_text_always_takes_the_full_scan(before: str, char: str, after: str) -> None:
    # (?i) reads the long s as s and the Kelvin sign as k: no ASCII gate can judge such text.
    text = before + char + after
    assert not lint._is_inert(text, [])
    assert redact(text) == lint._redact_fully(text, secrets_of([]))


def test_no_bar_character_reads_as_an_ascii_letter_or_a_blank() -> None:
    # which is why a gate of ASCII literals judges a line that draws a bar
    for char in map(chr, BARS):
        assert char.upper() == char == char.lower() == char.casefold(), hex(ord(char))
        assert re.fullmatch(r"(?i)[\x00-\x7f]", char) is None, hex(ord(char))
        assert re.fullmatch(r"[\s\w]", char) is None, hex(ord(char))


def test_the_rules_that_can_match_plain_prose_are_those_its_gate_knows() -> None:
    # Each pattern Hypothesis can match within the prose alphabet, and why the gate
    # covers it. A new rule that can match prose must be added here and to the gate.
    helpers = {
        "_AUTH_SCHEME": "read only after an authorization header's ':' or '='",
        "_AWS_SECRET_NAME": "looked for only before a 40-character run",
        "_CAMEL": "splits names",
        "_NAME_BREAKS": "splits names",
        "_PARAMETER": "read only after '$'",
        "_TOKEN_PREFIX": "the token patterns' gate; 'xox' needs 'xox?-'",
        "_WORD_TOKEN_PREFIX": "both token gates in one, for plain words",
        "_RULE_MARK": "the gate of a short job value, in find_secret_literals",
        "_ORDINARY_RUN": "skips ordinary text while splitting logical lines",
        "_PASSWORD_TOOL": "finds a tool's name; its password options start with '-'",
        "_COMMAND_END": "ends the command a tool's name starts",
        "_READ_ACROSS": "finds nothing: where a line redrawn in place is not cut",
        "_READ_AFTER": "finds nothing: where a line redrawn in place is not cut",
        "_QUOTING": "finds nothing: picks how shell text is split into words",
        "_PIECE": "finds nothing: splits shell text without quotes into words",
        "_DOUBLE_QUOTED_RUN": "finds nothing: skips ordinary text inside double quotes",
        "_AWS_RUN": "the gate of a line of training output that holds quotes",
    }
    gated = {"AKIA key", "JWT", "_BEARER", "_LOOSE_BEARER", "_BASIC", "_AWS_SECRET_VALUE"}
    assert set(PROSE_MATCHES) == set(helpers) | gated


def test_the_rules_that_can_match_a_logged_line_are_those_its_gate_knows() -> None:
    # Each pattern Hypothesis can match within the alphabet of a logged line, and why a
    # hit needs what the gate looks for. A new rule that can match such a line must be
    # added here, and its literal to the gate when it keys on one.
    secret_word = (
        "a hit needs a secret word that ends a part of the name, flag, key or header it reads,"
        " a name that no letter or digit follows"
    )
    reasons = {
        "_CAMEL": "splits names",
        "_NAME_BREAKS": "splits names",
        "_LONG_OPTION": "a flag is secret by its secret word",
        "_PARAMETER": "read only after '$'",
        "_DEFAULT": "read only inside '${...}'",
        "_UNESCAPE": "undoes an escape: a word is the line less some quotes and backslashes",
        "_BACKTICK_ESCAPE": "read only inside backticks",
        "_QUOTING": "finds nothing: picks how shell text is split into words",
        "_PIECE": "finds nothing: splits shell text without quotes into words",
        "_DOUBLE_QUOTED_RUN": "finds nothing: skips ordinary text inside double quotes",
        "_ORDINARY_RUN": "skips ordinary text while splitting logical lines",
        "_READ_ACROSS": "finds nothing: where a line redrawn in place is not cut",
        "_READ_AFTER": "finds nothing: where a line redrawn in place is not cut",
        "_RULE_MARK": "the gate of a short job value, in find_secret_literals",
        "_ASSIGNMENT": secret_word,
        "_EXPORT_ITEM": secret_word,
        "_HEADER_WORD": "an authorization header, or " + secret_word,
        "_AUTH_SCHEME": "read only after an authorization header",
        "_SHELL_C_OPTION": "the script a shell runs is a piece of the line: the same gate",
        "_FREE_ASSIGNMENT": secret_word,
        "_FREE_FLAG": secret_word,
        "_FREE_KEY": secret_word,
        "_KEY_LINE": "a manifest env entry, or a key: " + secret_word,
        "_BLOCK_INDICATOR": "read only after a secret key",
        "_BLOCK_ARG": "needs a line after the line, and " + secret_word,
        "_FLOW_MAPPING": "an env entry: " + secret_word,
        "_FLOW_KEY": "an env entry: " + secret_word,
        "_AWS_SECRET_NAME": "looked for only before a 40-character run: " + secret_word,
        "_JSON_PAIR": "a quoted key: " + secret_word,
        "_ARRAY_FLAG": "a quoted flag: " + secret_word,
        "_AWS_RUN": "the gate's own: a bare AWS key's run, joined by quotes",
        "_ESCAPE_OR_QUOTE": "finds nothing: where a double-quoted string ends",
        "_PASSWORD_TOOL": "the gate holds each tool's name",
        "_COMMAND_END": "ends the command a tool's name starts",
        "_URL_USERINFO": "the gate holds '@'",
        "_URL_TOKEN": "the gate holds '@'",
        "_SIGNED_URL": "the gate holds 'x-amz-'",
        "_HEADER": "the gate holds 'authorization'",
        "_BEARER": "the gate holds 'bearer'",
        "_LOOSE_BEARER": "the gate holds 'bearer'",
        "_BASIC": "the gate holds 'basic'",
        "_PEM": "the gate holds '-----begin '",
        "_CERTIFICATE": "the gate holds '-----begin '",
        "_TOKEN_PREFIX": "a token shape: looked for by the token rules themselves",
        "_EXTRA_TOKEN_PREFIX": "a token shape: looked for by the token rules themselves",
        "_WORD_TOKEN_PREFIX": "a token shape: looked for by the token rules themselves",
        "_AWS_SECRET_VALUE": "a bare AWS key: looked for by its rule itself",
    }
    token_shapes = {subject for subject, _ in (*lint._TOKEN_PATTERNS, *lint._EXTRA_TOKEN_PATTERNS)}
    unexplained = set(LOGGED_MATCHES) - set(reasons) - token_shapes
    assert unexplained == set()


@pytest.mark.parametrize(
    "text",
    [
        *LOG_LINES,
        *(f"{line}\n" for line in LOG_LINES),
        "\r".join(LOG_LINES[2] for _ in range(50)),
    ],
)
def test_training_log_lines_are_inert(text: str) -> None:
    assert lint._is_inert(text, [])
    assert lint._redact_fully(text, []) == text


@pytest.mark.parametrize("text", ["cost $5\n", "a`b`\n", "a\nb"])
def test_a_line_with_an_expansion_or_two_lines_takes_the_full_scan(text: str) -> None:
    assert not lint._is_inert(text, [])
    assert redact(text) == lint._redact_fully(text, [])


LOGGED_READ = [
    "export NGC_KEY=abc123\n",
    "Epoch 1 | --api-key abc123 | lr=1e-4",
    "ngcKey: abc123",
    "run --password=hunter2 now\n",
    "curl -u user:hunter2 https://host",
    "mysql -phunter22 db",
    "sshpass -p hunter2 ssh host",
    "docker login -p hunter2 nvcr.io",
    "Authorization: Bearer abc123def456",
    "AUTHORIZATION = abc123",
    "https://user:hunter2@host/x",
    "git clone https://0123456789abcdef0123456789@github.com/x",
    "GET /f?X-Amz-Signature=abc123&x=1",
    "x|bearer abcdefgh1234",
    "x|BASIC dXNlcjpodW50ZXIy",
    "-----BEGIN PRIVATE KEY-----\n",
    "{name: NGC_KEY, value: abc123}",
    "key: nvapi-AbCdEf0123456789AbCdEf0123",
    "loss=0.1 nvapi-AbCdEf0123456789AbCdEf0123\n",
    "weights ghp_AbCdEfGhIjKlMnOpQrSt0123 \u2588",
    "AKIAIOSFODNN7EXAMPLE|",
    f"x|{AWS_KEY}|",
    "sh -c NGC_KEY=abc123;",
    "{'password': 'hunter2'}",
    '{"api_key": "abc123"}\n',
    '["--token", "abc123"]',
    'x "Authorization: Bearer abc123def" y',
    "run NGC_K'E'Y=abc123",
    'sh -c NGC_K"E"Y=abc123',
    # quotes join a token's pieces inside a script: the text has a letter before it
    'sh -c a"\'"nvapi-AbCdEf"0123456789AbCdEf0123" ',
    'sh -c x"\'"wJalrXUtnFEMI/K7MDEN"G/bPxRfiCYzzzmplQ123"!',
    'sh -c z"\'"AKIAIOSFODNN7EXAM"PLE"!',
    'sh -c "x\'"eyJhbGci"OiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjg"!',
    # a secret word that ends a part of a name, though a letter follows it in the line
    "secreToken=abc123",  # SECRET goes on (o), TOKEN within it is a part of its own
    "tokenS=abc123",  # camelCase: the S starts a new part
    "apiKey=abc123",
    "passwd=hunter22",  # PASS goes on only into PASSWORD and PASSWD
    "PASSWORD=hunter22",
    "user_password: hunter22",
    '{name: "FOO_TOKEN"x, value: "hunter22"}',  # the name ends at its quote
    # a backslash a shell word reads past: NGC_KEY, --password, a token's prefix
    "NGC_K\\EY=abc123",
    "run --pass\\word hunter22",
    "token\\S=abc123",
    "sh -c nv\\api-AbCdEf0123456789AbCdEf0123",
    "sh -c 'export NGC_KEY=ab\\c123'",
    "sh -c 'secre\\Token=abc123'",
    '{name: "FOO_TOKEN"\\x, value: "hunter22"}',
]
"""Lines of training output's alphabet that a rule reads a value in."""

CONTINUED = [
    "step 120 | 4521.7 tokens/s | loss 1.93",
    "{'loss': 1.2, 'tokens/s': 4500.0, 'num_tokens': 81920}",
    "Detected 17 keypoints in 12 images; TOKENS=5",
    "all 12 checks passed, passes=3, Passthrough=on",
    "apikeys=1 monkeys=2 secretary=none credentials=none tokenizer: bpe",
    # backslashes a shell would read past, as sample text and JSON print them
    "{'text': 'Describe the image.\\nAnswer: a cat', 'tokens': 81}",
    '{"msg": "Starting \\"train\\"", "path": "C:\\\\data\\\\train"}',
    "loss\\t0.5\\ttokens/s\\t4500 \\u2588\\u2588",
]
"""Lines where each secret word goes on, in the same part of every name a rule reads, into
a word that is no secret word (``tokens``, ``keypoints``, ``passed``), some with backslashes
a shell would read past."""


@pytest.mark.parametrize("text", CONTINUED)
def test_a_secret_word_a_letter_or_digit_goes_on_from_leaves_a_line_inert(text: str) -> None:
    assert lint._is_inert(text, [])
    assert lint._redact_fully(text, []) == text
    lines = [f"{line}\n" for line in (LOG_LINES[1], text, LOG_LINES[0])]
    assert lint._inert_each(lines, []) == [True, True, True]


@pytest.mark.parametrize("text", LOGGED_READ)
def test_a_logged_line_a_rule_reads_is_never_inert(text: str) -> None:
    assert lint._LOGGED().fullmatch(text)
    assert not lint._is_inert(text, [])
    assert redact(text) != text
    assert redact(text) == lint._redact_fully(text, secrets_of([]))


def test_a_known_value_in_a_logged_line_is_redacted() -> None:
    text = "Epoch 1: 100%|\u2588\u2588| loss=0.1 run=hunter22\n"
    assert lint._is_inert(text, [])
    assert not lint._is_inert(text, ["hunter22"])
    assert redact(text, ["hunter22"]) == f"Epoch 1: 100%|\u2588\u2588| loss=0.1 run={PLACEHOLDER}\n"


@pytest.mark.parametrize(
    "name", ["AKIA key", "JWT", "_BEARER", "_LOOSE_BEARER", "_BASIC", "_AWS_SECRET_VALUE"]
)
def test_every_prose_match_of_a_rule_passes_the_prose_gate(name: str) -> None:
    @settings(max_examples=200, deadline=None)
    @given(PROSE_MATCHES[name])
    def check(text: str) -> None:
        assert lint._PROSE_GATE().search(text) is not None, text

    check()


@settings(max_examples=500)
@given(text=ANY_TEXT, values=SECRETS)
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


NAME_PARTS = st.sampled_from(
    [*lint._SINGLE_KEYWORDS, *lint._LAST_KEYWORDS, "API", "ACCESS", "NGC", "KEY", "FILE", "x"]
)
NAMES = st.one_of(
    st.text(max_size=20),
    st.lists(
        st.tuples(NAME_PARTS, st.sampled_from(["lower", "upper", "title"]), st.sampled_from("_.-")),
        min_size=1,
        max_size=4,
    ).map(lambda parts: "".join(getattr(w, case)() + sep for w, case, sep in parts).strip("_.-")),
)


@settings(max_examples=500)
@given(name=NAMES)
def test_every_secret_name_holds_a_secret_word(name: str) -> None:
    # The plain-word short cut runs the token:value rule only on text holding one.
    if lint.is_secret_name(name):
        assert lint._may_name_secret(name)
        assert lint._may_name_secret(f"x/{name}:y")


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
        OPENED_MESSAGE,
        "launched",
        "exit 3 (killed)",
        "Training finished; 12 epochs, best at 9. Done!",
        "it's done, isn't it?",
        "bear errors",
        "AKI A",
        AWS_RUN[:39],
        " ",
    ],
)
def test_plain_prose_is_inert(text: str) -> None:
    assert lint._is_inert(text, [])
    assert lint._redact_fully(text, []) == text
    assert redact(text) is text


@pytest.mark.parametrize("text", PROSE_FOUND)
def test_prose_a_rule_reads_is_never_inert(text: str) -> None:
    assert lint._PROSE().fullmatch(text)
    assert not lint._is_inert(text, [])
    assert redact(text) != text
    assert redact(text) == lint._redact_fully(text, secrets_of([]))


def test_a_known_value_in_plain_prose_is_redacted() -> None:
    text = "the run with hunter22 failed"
    assert not lint._is_inert(text, ["hunter22"])
    assert redact(text, ["hunter22"]) == f"the run with {PLACEHOLDER} failed"


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
        "NGC_KEY:abc123",
        "accessKey:abc123",
        "db.pass:hunter22",
        *FOUND[10:],
    ],
)
def test_text_a_rule_reads_is_never_inert(text: str) -> None:
    assert not lint._is_inert(text, [])
    assert redact(text) != text


# Pieces of a job's output as a look hands them on: whole lines, and parts of a line.
PIECE = st.one_of(LOGGED_MIXED, LOGGED).map(lambda text: text.replace("\n", "") + "\n")
PART = st.one_of(LOGGED_MIXED, LOGGED, st.sampled_from(PIECES)).map(
    lambda text: text.replace("\n", "")
)
BLOCK = st.lists(st.one_of(PIECE, PART, st.sampled_from([f"{line}\n" for line in LOG_LINES])))


@settings(max_examples=2000)
@given(pieces=BLOCK, values=SECRETS)
def test_pieces_found_inert_among_others_are_each_inert(
    pieces: list[str], values: list[str]
) -> None:
    secrets = secrets_of(values)
    for piece, inert in zip(pieces, lint._inert_each(pieces, secrets), strict=True):
        if inert:
            assert lint._is_inert(piece, secrets), piece
            assert lint._redact_fully(piece, secrets) == piece


@pytest.mark.parametrize(
    ("pieces", "inert"),
    [
        (["loss=0.1 a", "nvapi-AbCdEf0123456789AbCdEf0123\n", "b\n"], [True, False, True]),
        (["a\n", "x=wJalrXUtnFEMI/K7MDEN", "G/bPxRfiCYzzzmplQ1234\n"], [True, False, False]),
        (["x wJalrXUtnFEMIK7MDENGbPxRfiCYEXA", "MPLEKEYab\n", "cd\n"], [False, False, True]),
        (["ab", "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY12\n"], [False, False]),
        (["Epoch 1 pa", "ss\n", "x\n", "cost $5\n", "y\n"], [False, False, True, False, True]),
        (["a\n", "'to'\n", "to'k'en\n", "", "b\n"], [True, True, False, True, True]),
        (["tokens\n", "step --token", "s 5\n", "TOKEN", "S\n"], [True, False, True, False, True]),
    ],
)
def test_the_pieces_a_match_overlaps_are_read_alone(pieces: list[str], inert: list[bool]) -> None:
    assert lint._inert_each(pieces, []) == inert


def test_a_line_a_rule_reads_costs_only_itself_however_many_there_are() -> None:
    bar, read = f"{LOG_LINES[0]}\n", "Saved model with a token count of 12\n"
    pieces = [bar, read] * 500
    assert lint._inert_each(pieces, []) == [True, False] * 500
    assert lint._inert_each(pieces, ["0.123]"]) == [False, False] * 500


@settings(max_examples=500)
@given(pieces=BLOCK)
def test_a_block_is_redacted_as_its_pieces_are_each(pieces: list[str]) -> None:
    assert redacted_block(pieces) == "".join(map(redacted_output, pieces))


@pytest.mark.parametrize("text", LOGGED_READ)
def test_a_block_holding_a_line_a_rule_reads_is_never_read_as_inert(text: str) -> None:
    lines = [f"{line}\n" for line in LOG_LINES]
    pieces = [*lines, text.rstrip("\n") + "\n", *lines]
    assert lint._inert_each(pieces, []) == [True] * len(lines) + [False] + [True] * len(lines)


@pytest.mark.parametrize(
    "joined",
    [
        ["loss=0.1 a", "nvapi-AbCdEf0123456789AbCdEf0123\n"],  # a look-behind the next piece
        ["x=wJalrXUtnFEMI/K7MDEN", "G/bPxRfiCYzzzmplQ1234\n"],  # a run across two parts
        ["Epoch 1 pass", "word=hunter22\n"],  # a secret word across two parts
    ],
)
def test_what_two_pieces_make_together_is_never_read_as_inert(joined: list[str]) -> None:
    assert not all(lint._inert_each(joined, []))


def test_training_output_is_read_together_and_a_secret_line_within_it_is_redacted() -> None:
    lines = [f"{line}\n" for line in LOG_LINES] * 50
    assert all(lint._inert_each(lines, []))
    marked = [*lines[:100], "export NGC_KEY=abc123\n", *lines[100:]]
    shown = redacted_block(marked)
    assert shown == "".join(map(redacted_output, marked))
    assert "abc123" not in shown
    assert shown.count("\n") == len(marked)


def test_a_piece_holding_two_lines_is_read_alone() -> None:
    pieces = ["a\n", "b\nc\n", "d"]
    assert lint._inert_each(pieces, []) == [True, False, True]
    assert lint.inert_pieces(pieces) == [True, False, True]


ARGUMENT_LISTS = st.lists(
    st.one_of(
        LOGGED,
        LOGGED_MIXED,
        st.sampled_from([*PIECES, *JOINS, *LOG_LINES, "-u", "-p", "login", "sh", "-c"]),
        *LOGGED_MATCHES.values(),
    ),
    max_size=7,
)


def full_argv_scan(argv: list[str]) -> list[lint.Finding]:
    """What every rule of :func:`lint.lint_argv` finds in ``argv``, with no gate."""
    words = [lint._Word(text, index, index) for index, text in enumerate(argv)]
    hits = [
        *lint._command_hits(words, 0, free_text=False),
        *lint._run(lint._RAW_RULES, "\n".join(argv)),
    ]
    return lint._findings((1, hit) for hit in hits)


@settings(max_examples=1000)
@given(argv=ARGUMENT_LISTS)
def test_an_argument_list_is_judged_as_the_full_scan_judges_it(argv: list[str]) -> None:
    assert lint.lint_argv(argv) == full_argv_scan(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["docker", "login", "-u", "x", "-p", "hunter22"],  # a tool's option in two items
        ["curl", "-H", "Authorization: Bearer abcdefgh12345678"],
        ["git", "clone", "https://me:hunter22@github.com/x"],
        ["run", "--token", "abc123456"],
        ["echo", "-----BEGIN PRIVATE KEY-----", "MIIB", "-----END PRIVATE KEY-----"],
        ["sh", "-c", "NGC_KEY=abc123 run"],
    ],
)
def test_an_argument_list_a_rule_reads_is_scanned(argv: list[str]) -> None:
    assert not all(lint._inert_each([f"{item}\n" for item in argv], ()))
    assert lint.lint_argv(argv) == full_argv_scan(argv) != []


# A line a rule reads, cut anywhere by a backslash-newline, which a shell joins again.
CONTINUED_LINE = st.tuples(
    st.sampled_from(
        [
            "NGC_KEY=abc123456",
            "run --password hunter22",
            "curl -H 'Authorization: Bearer abcdefgh12345678'",
            "sh -c 'HF_TOKEN=abc123456 run'",
        ]
    ),
    st.integers(min_value=1, max_value=20),
).map(lambda cut: cut[0][: cut[1]] + "\\\n" + cut[0][cut[1] :])
MULTILINE_TEXT = st.lists(
    st.one_of(
        LOGGED,
        CONTINUED_LINE,
        LOGGED_MIXED.map(lambda line: line.rstrip("\n")),
        st.sampled_from([*PIECES, *JOINS, *LOG_LINES, "- --token", "- name: NGC_KEY"]),
        st.one_of(*LOGGED_MATCHES.values()),
    ),
    min_size=2,
    max_size=6,
).map("\n".join)


@settings(max_examples=1000)
@given(text=st.one_of(MULTILINE_TEXT, st.lists(st.one_of(LOGGED, CONTINUED_LINE)).map("\n".join)))
def test_a_text_of_many_lines_is_judged_as_the_full_scan_judges_it(text: str) -> None:
    # The plan's spec file and a step's input: lines the gate reads together.
    assert lint.lint_text(text) == lint._findings(lint._located(text))


@pytest.mark.parametrize(
    "text",
    [
        "NGC_KE\\\nY=abc123456\n",  # a shell joins the lines: NGC_KEY=abc123456
        "run --pass\\\r\nword hunter22\n",
        "- --token\n- abc123456\n",  # a YAML list of flags, a flag and its value
        "x: 1\nAuthorization: Basic dXNlcjpodW50ZXIy\n",
    ],
)
def test_a_text_whose_lines_a_rule_reads_together_is_scanned(text: str) -> None:
    assert lint.lint_text(text) == lint._findings(lint._located(text)) != []


@pytest.mark.parametrize(
    ("value", "passed"),
    [
        ("visual_changenet train -e {config_path} results_dir={results_dir}", True),
        ("sh -c 'echo {job_id} > {results_dir}/id'", True),
        ("nvapi-{x}AbCdEf0123456789AbCdEf", True),  # the reference ends the token
        ("--token {x}", False),  # a secret word
        ("NGC_KEY={x}", False),
        ("echo $HOME {x}", False),  # another expansion: the full scan reads it
        ("`id` {x}", False),
        ("{x} nvapi-AbCdEf0123456789AbCdEf0123", False),  # a token shape
    ],
)
def test_a_value_with_placeholders_skips_the_scan_of_its_references_only_when_inert(
    value: str, passed: bool
) -> None:
    assert lint._references_inert(value) is passed
    reference = lint.braces.fill(value, lint._as_reference)
    if passed:
        assert lint._findings(lint._located(reference, free_text=True)) == []


@settings(max_examples=1000)
@given(text=st.one_of(ANY_TEXT, WITH_PLACEHOLDERS))
def test_a_job_value_is_judged_as_the_full_scan_judges_it(text: str) -> None:
    # find_secret_literals skips the scan of what redact leaves alone: the same findings.
    texts = [text]
    if "{" in text:
        texts = [lint.braces.fill(text, f) for f in (lint._as_reference, lint._filled)]
    scanned = next(
        (found for t in texts if (found := lint._findings(lint._located(t, free_text=True)))),
        [],
    )
    assert lint.find_secret_literals(text) == scanned
