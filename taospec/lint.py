"""The secret lint: find credential material written inline, and redact it.

A job spec, a rendered command line or a log line must never carry a secret's
value. Secrets travel by name (``docker run -e NGC_KEY``), through stdin
(``printf %s "$NGC_KEY" | docker login --password-stdin``) or, in a manifest,
through ``valueFrom.secretKeyRef``. This module finds the ways a value leaks
in anyway and reports each as a :class:`Finding` that names the variable,
flag or kind of token, never the value, so the report itself is safe to print
and to store.

Four families of rules feed one list of hits (a span, and what to write there):

* shell-word rules read each logical line as shell words (quotes, ``$VAR``
  references, ``$(...)``, operators, comments and continuations understood):
  ``NAME=literal``, ``sbatch --export=ALL,NAME=literal``, ``--password VALUE``
  style flags, ``-p VALUE`` on a ``login`` command, ``Authorization: ...``
  header words, and the same rules inside ``bash -c '...'`` scripts;
* pattern rules look at the raw characters: well-known token prefixes, JWTs,
  URL userinfo, signed-URL parameters, JSON or dict credential keys, flags in
  ``args: ["--token", "..."]`` arrays, authorization headers, bearer tokens
  and AWS secret access keys next to a secret name;
* block rules read several lines at once: PEM private keys, and Kubernetes
  env lists (``- name: NGC_KEY`` with an inline ``value:``, in block, flow
  and JSON form, block scalars included);
* free-text rules, for :func:`redact` and :func:`find_secret_literals`, read
  prose such as a job-record message, where a value is not a shell word: the
  whole value of a secret-named ``NAME=value``, ``--flag value``,
  ``key: value``, ``key:value`` or ``key = value`` is taken (never split on
  ``& ? , ;``); they also take token shapes beyond the lint's reference list
  (``gho_``, ``glpat-``, bare AWS keys, certificates, loosely spaced bearer tokens).

:func:`lint_text` reports the first three families; :func:`redact` rewrites
what all four find, so whatever the lint or the job-value check reports,
redaction removes.
:func:`redact` also removes every value given to it and the value of each
secret-named variable in this process's environment.

All functions are pure (the environment is read once) and use only the
standard library.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

PLACEHOLDER = "<redacted>"
"""What :func:`redact` writes in place of a secret value."""


def _lazy(source: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A pattern compiled when a rule first needs it: most text reaches few rules."""
    return functools.cache(lambda: re.compile(source, flags))


MIN_SECRET_LENGTH = 4
"""Known secret values shorter than this are too likely to be ordinary text."""

_SINGLE_KEYWORDS = frozenset({"SECRET", "PASSWORD", "PASSWD", "APIKEY", "TOKEN", "CREDENTIAL"})
_LAST_KEYWORDS = frozenset({"PASS"})  # DB_PASS and pass=, but not PASS_THROUGH
_KEYWORD_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("NGC", "KEY")})
_LOCATION_PARTS = frozenset({"FILE", "PATH", "DIR"})
_AUTH_HEADERS = frozenset({"AUTHORIZATION", "PROXY-AUTHORIZATION"})
_AUTH_SCHEME = _lazy(r"(?i)(?:bearer|basic|token|digest|bot|apikey)[ \t]+")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash"})
_MAX_NESTING = 3
_MAX_PASSES = 8

_WORD_BREAKS = frozenset(" \t\r\n|&;()")
_OPERATORS = frozenset("|&;()\n")
_COMMENT_STARTS = frozenset(" \t\r\n;&|()")
_PLAIN = re.compile(r"[^ \t\r\n|&;()\\'\"$`]+")
_ASSIGNMENT = _lazy(
    r"(?P<prefix>--?[A-Za-z][A-Za-z0-9-]*=|-e(?=[A-Za-z_]))?"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)",
    re.DOTALL,
)
_EXPORT = "--export="
_EXPORT_ITEM = _lazy(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)", re.DOTALL)
_HEADER_WORD = _lazy(r"(?P<name>[A-Za-z][A-Za-z0-9-]*)[ \t]*:[ \t]+(?P<value>.*)", re.DOTALL)
_LONG_OPTION = _lazy(r"--[A-Za-z][A-Za-z0-9-]*")
_SHELL_C_OPTION = _lazy(r"-[A-Za-z]*c[A-Za-z]*")
_PARAMETER = _lazy(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
_DEFAULT = _lazy(r"[^:=+?#%/^,-]*:?[-=+](?P<default>.*)", re.DOTALL)
_UNESCAPE = _lazy(r"\\(.)", re.DOTALL)
_CAMEL = _lazy(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_BREAKS = _lazy(r"[_.-]+")

# A distinctive prefix only needs to start a word; "sk-" must also not follow "_" or "-".
_WORD_START = r"(?<![A-Za-z0-9])"
_STANDS_ALONE = r"(?<![A-Za-z0-9_-])"
_TOKEN_PATTERNS: tuple[tuple[str, Callable[[], re.Pattern[str]]], ...] = (
    ("nvapi- token", _lazy(_WORD_START + r"nvapi-[A-Za-z0-9_-]{16,}")),
    ("github_pat_ token", _lazy(_WORD_START + r"github_pat_[A-Za-z0-9_]{16,}")),
    ("ghp_ token", _lazy(_WORD_START + r"ghp_[A-Za-z0-9]{16,}")),
    # Real Hugging Face tokens mix cases; an all-lowercase hf_ word is an identifier.
    ("hf_ token", _lazy(_WORD_START + r"hf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{16,}")),
    ("AKIA key", _lazy(r"(?<![A-Za-z0-9])AKIA[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("xox?- token", _lazy(_WORD_START + r"xox[a-z]-[A-Za-z0-9-]{10,}")),
    # sk- keys carry a long random run with a digit; host names like sk-east-node-01 do not.
    (
        "sk- token",
        _lazy(
            _STANDS_ALONE
            + r"sk-(?=[A-Za-z0-9_-]*?[A-Za-z0-9]{16})(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{16,}"
        ),
    ),
    # A JSON Web Token: base64url JSON header and payload (both start '{"'), then a signature.
    (
        "JWT",
        _lazy(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*=*"),
    ),
)
TOKEN_PREFIXES = ("nvapi-", "github_pat_", "ghp_", "hf_", "AKIA", "xox", "sk-", "eyJ")
"""The literal each token pattern starts with, right after its look-behind (a test holds this)."""
_TOKEN_PREFIX = _lazy("|".join(map(re.escape, TOKEN_PREFIXES)))
# Shapes beyond the reference list, for redaction and job values only: other GitHub and
# GitLab tokens, Hugging Face tokens of any case, and a bare AWS secret access key.
_EXTRA_TOKEN_PATTERNS = (
    ("gh?_ token", "gh", _lazy(_WORD_START + r"gh[osur]_[A-Za-z0-9]{16,}")),
    ("glpat- token", "glpat-", _lazy(_WORD_START + r"glpat-[A-Za-z0-9_-]{20,}")),
    ("hf_ token", "hf_", _lazy(_WORD_START + r"hf_[A-Za-z0-9]{30,}")),
)
_URL_USERINFO = _lazy(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s/?#@:'\"]+:"
    r"(?P<password>[^\s/?#@'\"]*)@"
)
_URL_TOKEN = _lazy(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://"
    r"(?P<token>(?=[A-Za-z_-]*[0-9])(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,})@"
)
_SIGNED_PARAMS = {
    name.lower(): name for name in ("X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token")
}
_SIGNED_URL = _lazy(
    r"(?<![A-Za-z0-9-])(?P<param>X-Amz-(?:Signature|Credential|Security-Token))="
    r"(?P<value>[^&\s'\"#\\]+)",
    re.IGNORECASE,
)
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
_JSON_PAIR = _lazy(
    r"(?P<q>[\"'])(?P<key>[A-Za-z0-9_.-]{1,64})(?P=q)\s*:\s*(?P<value>" + _QUOTED + ")"
)
_ARRAY_FLAG = _lazy(
    r"(?P<q>[\"'])(?P<flag>--[A-Za-z][A-Za-z0-9-]*)"
    r"(?:(?P=q)\s*,\s*(?P<value>" + _QUOTED + r"|[^\s,\]\"'][^,\]\n]*)"
    r"|=(?P<joined>(?:(?!(?P=q))[^\\\n]|\\.)*)(?P=q))"
)
_HEADER = _lazy(
    r"(?i)(?<![A-Za-z0-9_-])(?P<name>(?:proxy-)?authorization)(?P<q>[\"']?)[ \t]*[:=][ \t]*"
)
_BEARER = _lazy(r"(?i)(?<![A-Za-z0-9_-])bearer[ \t]+(?P<value>[^\s'\"]+)")
_AWS_SECRET_VALUE = _lazy(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_SECRET_NAME = _lazy(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)"
    r"(?:[\"']?[ \t]*[:=]?[ \t]+[\"']?|[\"'][ \t]*[:=,]?[ \t]*[\"']?)\Z"
)
_LOOSE_BEARER = _lazy(r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_NAME_WINDOW = 128
"""How far before a 40-character value its name is looked for."""
_PEM = _lazy(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:.*?-----END (?P=kind)-----|.*)",
    re.DOTALL,
)
_CERTIFICATE = _lazy(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*CERTIFICATE)-----(?:.*?-----END (?P=kind)-----|.*)", re.DOTALL
)
_BLOCK_ARG = _lazy(
    r"^(?P<indent>[ \t]*)-[ \t]+(?P<q>[\"']?)(?P<flag>--[A-Za-z][A-Za-z0-9-]*)(?P=q)[ \t]*\r?\n"
    r"(?P=indent)-[ \t]+(?P<value>[^\n]*?)\r?$",
    re.MULTILINE,
)
_KEY_LINE = _lazy(
    r"(?P<lead>[ \t]*(?P<dash>-[ \t]+)?)(?P<q>[\"']?)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)"
    r"[ \t]*:(?:[ \t]+|(?=[ \t]*\r?$))"
)
_FLOW_MAPPING = _lazy(r"\{[^{}]*\}")
_FLOW_KEY = _lazy(r"(?<![A-Za-z0-9_-])(?P<q>[\"']?)(?P<key>name|valueFrom|value)(?P=q)\s*:")
# Free-text rules: where a secret-named value starts in prose.
_FREE_ASSIGNMENT = _lazy(r"(?<![A-Za-z0-9_./$-])(?P<name>[A-Za-z_][A-Za-z0-9_-]*)=")
_FREE_FLAG = _lazy(r"(?<![A-Za-z0-9_-])(?P<flag>--[A-Za-z][A-Za-z0-9-]*)(?:=|[ \t]+)")
_FREE_KEY = _lazy(
    r"(?<![A-Za-z0-9_./$-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)"
    r"(?:[ \t]*:[ \t]+|[ \t]*:(?=[ \t]*\r?$)|[ \t]*:(?=\S)|[ \t]+=[ \t]*|=[ \t]+)"
)
_AFTER_QUOTED = frozenset({"", " ", "\t", "\r", "\n", ",", "]", "}"})
_BLOCK_INDICATOR = _lazy(r"[|>][0-9+-]*[ \t]*(?:#.*)?$")
_PLACEHOLDER_REFERENCE = _lazy(r"\{[A-Za-z_][A-Za-z0-9_.\[\]=-]*\}")
_INERT = re.compile(r"[A-Za-z0-9_./:,+%~-]*")  # text redact need not scan fully: _is_inert
_INERT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:,+%~-")

_MESSAGES = {
    "inline-secret-assignment": (
        "{s} is assigned an inline secret value; pass it by name (-e {s}) or through stdin"
    ),
    "secret-flag": (
        "{s} is given an inline secret value; pass it through stdin "
        "(e.g. --password-stdin) or an environment variable"
    ),
    "login-password-flag": (
        "{s} gives the login password inline; pipe it in with "
        'printf %s "$VAR" | ... --password-stdin'
    ),
    "token-prefix": "an inline {s} appears; pass it through an environment variable by name",
    "url-userinfo": (
        "a {s} is written inline in a URL's userinfo; use a credential helper "
        "or an environment variable"
    ),
    "signed-url": "a signed URL carries {s}; pass the URL through an environment variable",
    "json-credential": (
        'key "{s}" holds an inline secret value; load it from an environment '
        "variable or a secret file"
    ),
    "auth-header": (
        'the "{s}" header carries an inline credential; build it from an environment '
        'variable ("{s}: Bearer $TOKEN")'
    ),
    "bearer-token": "an inline {s} appears; read it from an environment variable",
    "aws-secret-key": (
        "{s} is given an inline AWS secret access key; pass it by name or use a profile"
    ),
    "private-key": "an inline {s} block appears; mount the key file or use a secret store",
    "pem-block": "an inline {s} block appears; mount the file instead",
    "manifest-env-value": (
        "env entry {s} has an inline value; use valueFrom.secretKeyRef or $({s})"
    ),
    "secret-key-value": "{s} is given an inline secret value",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One inline secret: where it is, which rule caught it, and what it is called.

    ``subject`` is a variable name, a flag, a header or a token kind; it never
    holds the secret's value, so a finding is always safe to print.
    """

    line: int
    rule: str
    subject: str

    def __str__(self) -> str:
        template = _MESSAGES.get(self.rule)
        if template is None:
            return f"line {self.line}: {self.subject}: {self.rule}"
        return f"line {self.line}: {template.format(s=self.subject)}"


class _Word(NamedTuple):
    """A shell word: its text with quotes removed, and its span in the scanned string.

    In ``text`` a ``$``, a backtick or a backslash that the shell takes
    literally (quoted or escaped) is written with a backslash in front, so
    ``'$HOME'`` reads ``\\$HOME`` and is not mistaken for a reference.
    """

    text: str
    start: int
    end: int


class _Hit(NamedTuple):
    """One rule match: what to report, and which span :func:`redact` rewrites to what.

    The scanner's records are named tuples: cheaper than dataclasses to define at
    every start and to create, and a redaction creates many.
    """

    rule: str
    subject: str
    start: int
    end: int
    replacement: str = PLACEHOLDER


class _Chunk(NamedTuple):
    """A logical line: its first physical line's number, its offset, and its text."""

    line: int
    start: int
    text: str


# -- names and values ---------------------------------------------------------


def _name_parts(name: str) -> list[str]:
    """A name's word parts, split at ``_ - .`` and where a lowercase letter meets an uppercase."""
    return [part for part in _NAME_BREAKS().split(_CAMEL().sub("_", name).upper()) if part]


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag, header or key name says it holds a secret.

    The name is split into word parts on ``_``, ``-``, ``.`` and camelCase
    boundaries; it is a secret name when a part is SECRET, PASSWORD, PASSWD,
    APIKEY, TOKEN or CREDENTIAL, two adjacent parts read API KEY, ACCESS KEY
    or NGC KEY, or the last part is PASS (case-insensitive). ``TOKENIZER_PATH``,
    ``MONKEY``, ``KEYBOARD`` and ``PASS_THROUGH`` are not secret names. A name
    whose last part is FILE, PATH or DIR (``NGC_KEY_FILE``) says where a secret
    lives, which is the sanctioned way to pass one, so it is not one either.
    """
    parts = _name_parts(name)
    if not parts or parts[-1] in _LOCATION_PARTS:
        return False
    if parts[-1] in _LAST_KEYWORDS or any(part in _SINGLE_KEYWORDS for part in parts):
        return True
    return any(pair in _KEYWORD_PAIRS for pair in itertools.pairwise(parts))


def _is_secret_flag(flag: str) -> bool:
    """Whether a long option takes a secret: its name ends in a secret word.

    ``--password``, ``--token``, ``--api-key``, ``--hf-token`` and
    ``--aws-secret-access-key`` do; ``--password-stdin``, ``--token-file``
    and ``--token-limit`` do not.
    """
    if _LONG_OPTION().fullmatch(flag) is None:
        return False
    parts = _name_parts(flag[2:])
    if not parts:
        return False
    if parts[-1] in _SINGLE_KEYWORDS or parts[-1] in _LAST_KEYWORDS:
        return True
    return len(parts) >= 2 and (parts[-2], parts[-1]) in _KEYWORD_PAIRS


def _is_auth_header(name: str) -> bool:
    """Whether an HTTP header carries a credential (Authorization, X-Api-Key...)."""
    return name.upper() in _AUTH_HEADERS or is_secret_name(name)


def looks_like_secret_value(value: str) -> bool:
    """Whether a value carries credential material whatever name it is stored under.

    True for well-known token prefixes (``nvapi-``, ``hf_``, ``ghp_``,
    ``github_pat_``, ``AKIA``, ``xox?-``, ``sk-``), JWTs, a URL with a
    password or a token in its userinfo, a signed URL's credential parameters,
    a PEM private key and a bearer token.
    """
    return any(True for _ in itertools.chain(_format_hits(value), _pem_hits(value))) or any(
        True for _ in _bearer_hits(value)
    )


def _carries_literal(value: str, depth: int = 0) -> bool:
    """Whether a word's text holds literal material rather than only references.

    Empty text and the redaction placeholder carry nothing. ``$VAR``,
    ``${VAR}``, ``$(...)`` and backticks are resolved at run time and carry
    nothing; ``${VAR:-default}`` carries whatever its default carries; any
    other character is literal.
    """
    if value in ("", PLACEHOLDER):
        return False
    if depth > 16:
        return True
    index = 0
    while index < len(value):
        if value[index] == "`":
            closing = value.find("`", index + 1)
            index = len(value) if closing < 0 else closing + 1
        elif value[index] == "$":
            index, literal = _expansion(value, index, depth)
            if literal:
                return True
        else:
            return True
    return False


def _expansion(value: str, index: int, depth: int) -> tuple[int, bool]:
    """Read the ``$`` expansion at ``index``: where it ends, and whether it is literal."""
    following = value[index + 1 : index + 2]
    if following == "(":
        return _closing(value, index + 1), False
    if following == "{":
        end = _closing(value, index + 1)
        inner = value[index + 2 : end - 1] if value[end - 1 : end] == "}" else value[index + 2 :]
        return end, _default_carries_literal(inner, depth)
    match = _PARAMETER().match(value, index + 1)
    if match is not None:
        return match.end(), False
    return index + 1, True


def _default_carries_literal(inner: str, depth: int) -> bool:
    """Judge ``${NAME:-default}`` (and ``-``, ``=``, ``:=``, ``+``, ``:+``) by its default."""
    match = _DEFAULT().fullmatch(inner)
    if match is None:
        return False
    default = match["default"]
    if len(default) >= 2 and default[0] == default[-1] and default[0] in "'\"":
        body = default[1:-1]
        default = _protect(body) if default[0] == "'" else body
    return _carries_literal(default, depth + 1)


def _has_break(text: str) -> bool:
    """Whether ``text`` holds a character outside the inert set (see :func:`_is_inert`)."""
    return any(char not in _INERT_CHARS for char in text)


def _field_text(raw: str) -> str:
    """The text of a free-text value as a shell would read it, operators kept as characters."""
    parts: list[str] = []
    index = 0
    while index < len(raw):
        piece, index = _read_piece(raw, index)
        parts.append(piece)
    return "".join(parts)


def _raw_literal(raw: str) -> bool:
    """Whether raw (still quoted) text carries literal material: see :func:`_carries_literal`."""
    return raw.strip() != PLACEHOLDER and _carries_literal(_field_text(raw.strip()))


def _scalar_literal(raw: str) -> bool:
    """Whether a YAML/JSON scalar as written is a literal value (not empty, null or a reference)."""
    text = raw.strip()
    if text in ("", "~", "null", "Null", "NULL", PLACEHOLDER):
        return False
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text.strip() not in ("", PLACEHOLDER) and _carries_literal(text)


# -- reading shell words --------------------------------------------------------


def _protect(text: str) -> str:
    """Mark ``$``, backticks and backslashes as literal by escaping them."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")


def _unprotect(text: str) -> str:
    """Undo :func:`_protect`: the characters a nested shell would read."""
    return _UNESCAPE().sub(r"\1", text)


def _closing(text: str, index: int) -> int:
    """The index just past the bracket that closes the one at ``index`` (or the end)."""
    opening = text[index]
    closing = ")" if opening == "(" else "}"
    depth = 0
    for position in range(index, len(text)):
        if text[position] == opening:
            depth += 1
        elif text[position] == closing:
            depth -= 1
            if depth == 0:
                return position + 1
    return len(text)


def _continuation_length(text: str, index: int) -> int:
    """The length of a backslash-newline at ``index`` (0 when there is none)."""
    if text.startswith("\\\n", index):
        return 2
    if text.startswith("\\\r\n", index):
        return 3
    return 0


def _double_quoted_escape(escaped: str) -> str:
    """The text of a backslash escape inside double quotes (only ``$ ` \\ "`` are escapes)."""
    if escaped == '"':
        return '"'
    if escaped in "$`\\":
        return "\\" + escaped
    return "\\\\" + escaped


def _read_double_quoted(text: str, index: int) -> tuple[str, int]:
    """Read a double-quoted string's body from ``index``; return its text and the end."""
    parts: list[str] = []
    while index < len(text):
        char = text[index]
        if char == '"':
            return "".join(parts), index + 1
        skip = _continuation_length(text, index)
        if skip:
            index += skip
        elif char == "\\" and index + 1 < len(text):
            parts.append(_double_quoted_escape(text[index + 1]))
            index += 2
        elif char == "$" and text[index + 1 : index + 2] in ("(", "{"):
            end = _closing(text, index + 1)
            parts.append(text[index:end])
            index = end
        else:
            parts.append(char)
            index += 1
    return "".join(parts), len(text)


def _read_piece(text: str, index: int) -> tuple[str, int]:
    """Read one piece of a word (a quote, an escape, an expansion or a character)."""
    char = text[index]
    following = text[index + 1 : index + 2]
    if char == "\\":
        return _protect(following), index + 2
    if char == "'":
        closing = text.find("'", index + 1)
        closing = len(text) if closing < 0 else closing
        return _protect(text[index + 1 : closing]), closing + 1
    if char == '"':
        return _read_double_quoted(text, index + 1)
    if char == "$" and following in ("(", "{"):
        end = _closing(text, index + 1)
        return text[index:end], end
    if char == "`":
        closing = text.find("`", index + 1)
        end = len(text) if closing < 0 else closing + 1
        return text[index:end], end
    return char, index + 1


def _read_word(text: str, start: int) -> _Word:
    """Read the shell word that starts at ``start``."""
    parts: list[str] = []
    index = start
    while index < len(text):
        plain = _PLAIN.match(text, index)
        if plain is not None:
            parts.append(plain.group())
            index = plain.end()
            continue
        if text[index] in _WORD_BREAKS:
            break
        skip = _continuation_length(text, index)
        if skip:
            index += skip
            continue
        piece, index = _read_piece(text, index)
        parts.append(piece)
    end = min(index, len(text))
    return _Word("".join(parts), start, end)


def _commands(text: str) -> list[list[_Word]]:
    """Split shell text into simple commands (at ``| & ; ( )`` and newlines) of words."""
    commands: list[list[_Word]] = []
    current: list[_Word] = []
    index = 0
    while index < len(text):
        char = text[index]
        skip = _continuation_length(text, index)
        if skip:
            index += skip
        elif char in _OPERATORS:
            if current:
                commands.append(current)
            current = []
            index += 1
        elif char in _WORD_BREAKS:
            index += 1
        else:
            word = _read_word(text, index)
            current.append(word)
            index = max(word.end, index + 1)
    if current:
        commands.append(current)
    return commands


def _quote_end(text: str, index: int) -> int:
    """The index just past the quote that closes the one at ``index``, or -1 when none does.

    Inside single quotes ``''`` is YAML's escaped quote; to a shell it is two
    adjacent quoted strings in one word, so reading it as one changes no span.
    """
    if text[index] == "'":
        closing = text.find("'", index + 1)
        while closing >= 0 and text.startswith("''", closing):  # YAML's escaped quote
            closing = text.find("'", closing + 2)
        return -1 if closing < 0 else closing + 1
    position = index + 1
    while position < len(text):
        if text[position] == "\\":
            position += 2
        elif text[position] == '"':
            return position + 1
        else:
            position += 1
    return -1


def _line_end(text: str, index: int) -> int:
    """The index of the newline that ends the line holding ``index`` (or the end of text)."""
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _logical_lines(text: str) -> list[_Chunk]:
    """Split text into logical lines, each with its first physical line's number and offset.

    A newline ends a logical line unless it is escaped by a backslash or
    inside a quoted string that closes later; a quote that never closes, and
    quotes in a ``#`` comment, are ordinary characters. Joining the chunks
    with newlines gives back ``text`` exactly.
    """
    chunks: list[_Chunk] = []
    start = index = 0
    line = first = 1
    word_start = True
    while index < len(text):
        char = text[index]
        if char == "\\":
            skip = _continuation_length(text, index) or 2
            line += 1 if text[index + skip - 1 : index + skip] == "\n" else 0
            index += skip
        elif char in "'\"" and (closing := _quote_end(text, index)) >= 0:
            line += text.count("\n", index, closing)
            index = closing
        elif char == "#" and word_start:
            index = _line_end(text, index)
        elif char == "\n":
            chunks.append(_Chunk(first, start, text[start:index]))
            index += 1
            line += 1
            start, first = index, line
        else:
            index += 1
        word_start = char in _COMMENT_STARTS
    chunks.append(_Chunk(first, start, text[start:]))
    return chunks


# -- shell-word rules ------------------------------------------------------------


def _requote(protected: str) -> str:
    """Shell-quote protected word text, for a replacement that keeps part of a word."""
    return shlex.quote(_unprotect(protected)) if protected else ""


def _assignment_hits(word: _Word) -> Iterator[_Hit]:
    """``NAME=literal`` for a secret NAME, bare or after ``export``, ``-e``, ``--env=``.

    The value is judged by :func:`_carries_literal`, so ``NAME=$VAR``,
    ``NAME=${VAR}`` and ``NAME=`` pass while ``NAME=${VAR:-literal}`` does not.
    """
    match = _ASSIGNMENT().fullmatch(word.text)
    if match is None or word.text.startswith(_EXPORT) or not is_secret_name(match["name"]):
        return
    if _carries_literal(match["value"]):
        kept = f"{match['prefix'] or ''}{match['name']}="
        yield _Hit(
            "inline-secret-assignment", match["name"], word.start, word.end, kept + PLACEHOLDER
        )


def _export_hits(word: _Word) -> Iterator[_Hit]:
    """``--export=ALL,NAME=literal`` (sbatch, srun): each item judged by its variable's name.

    ``--export=ALL,NGC_KEY`` (the name alone) and ``NAME=$VAR`` pass. Redaction
    keeps the items before the first secret and drops everything after it.
    """
    if not word.text.startswith(_EXPORT):
        return
    items = word.text[len(_EXPORT) :].split(",")
    for index, item in enumerate(items):
        match = _EXPORT_ITEM().fullmatch(item)
        if match is None or not is_secret_name(match["name"]):
            continue
        if _carries_literal(match["value"]):
            kept = ",".join([*items[:index], match["name"] + "="])
            replacement = _requote(_EXPORT + kept) + PLACEHOLDER
            yield _Hit("inline-secret-assignment", match["name"], word.start, word.end, replacement)
            return


def _is_flag_value(text: str) -> bool:
    """Whether the word after a flag is a literal value (not another long option)."""
    return not text.startswith("--") and _carries_literal(text)


def _flag_hits(words: Sequence[_Word], index: int) -> Iterator[_Hit]:
    """``--password``, ``--token``, ``--api-key`` (any flag ending in a secret word) given a value.

    Both ``--token VALUE`` and ``--token=VALUE`` count; ``--password-stdin``
    and a ``$VAR`` value pass.
    """
    text = words[index].text
    if _is_secret_flag(text):
        if index + 1 < len(words) and _is_flag_value(words[index + 1].text):
            value = words[index + 1]
            yield _Hit("secret-flag", text, value.start, value.end)
        return
    flag, equals, value_text = text.partition("=")
    if equals and _is_secret_flag(flag) and _carries_literal(value_text):
        word = words[index]
        yield _Hit("secret-flag", flag, word.start, word.end, f"{flag}={PLACEHOLDER}")


def _login_hits(words: Sequence[_Word], index: int) -> Iterator[_Hit]:
    """``-p VALUE`` (or ``-pVALUE``) after a ``login`` word in the same command.

    ``docker login -u x -p y nvcr.io`` is flagged; ``docker run -p 8080:8080``
    is a port mapping and passes because no ``login`` precedes it.
    """
    text = words[index].text
    if not text.startswith("-p") or text.startswith("--"):
        return
    if not any(word.text == "login" for word in words[:index]):
        return
    if text == "-p":
        if index + 1 < len(words) and _is_flag_value(words[index + 1].text):
            value = words[index + 1]
            yield _Hit("login-password-flag", "-p", value.start, value.end)
    elif _carries_literal(text[2:]):
        word = words[index]
        yield _Hit("login-password-flag", "-p", word.start, word.end, "-p" + PLACEHOLDER)


def _split_scheme(value: str) -> tuple[str, str]:
    """An authorization value's scheme word with its space (``Bearer ``), and the rest."""
    match = _AUTH_SCHEME().match(value)
    return ("", value) if match is None else (match.group(), value[match.end() :])


def _header_word_hits(word: _Word) -> Iterator[_Hit]:
    """A word such as ``'Authorization: Bearer x'`` or ``'X-Api-Key: x'`` (curl ``-H``)."""
    match = _HEADER_WORD().fullmatch(word.text)
    if match is None or not _is_auth_header(match["name"]):
        return
    scheme, credential = _split_scheme(match["value"])
    if credential.strip() != PLACEHOLDER and _carries_literal(credential):
        replacement = _requote(f"{match['name']}: {scheme}") + PLACEHOLDER
        yield _Hit("auth-header", match["name"], word.start, word.end, replacement)


def _is_shell_script(words: Sequence[_Word], index: int) -> bool:
    """Whether the word at ``index`` is the script of ``sh -c``, ``bash -lc`` and the like."""
    if index < 2 or _SHELL_C_OPTION().fullmatch(words[index - 1].text) is None:
        return False
    return any(word.text.rsplit("/", 1)[-1] in _SHELLS for word in words[: index - 1])


def _script_hits(word: _Word, depth: int, free_text: bool) -> Iterator[_Hit]:
    """Every rule applied inside a ``bash -c`` script, reported on its word.

    Redaction rewrites the whole script word, re-quoted with :func:`shlex.quote`.
    """
    script = _unprotect(word.text)
    inner = _script_text_hits(script, free_text, depth + 1)
    if not inner:
        return
    replacement = shlex.quote(_apply(script, inner))
    for hit in inner:
        yield _Hit(hit.rule, hit.subject, word.start, word.end, replacement)


@functools.lru_cache(maxsize=64)
def _script_text_hits(script: str, free_text: bool, depth: int) -> tuple[_Hit, ...]:
    """The hits inside one ``sh -c`` script, read once per process for each script.

    A pipeline's plans repeat the same scripts (every local target's exit-code
    wrapper), and a script's hits depend on its text alone.
    """
    return tuple(_text_hits(script, free_text, depth))


def _command_hits(words: Sequence[_Word], depth: int, free_text: bool) -> Iterator[_Hit]:
    """Every shell-word rule over one simple command."""
    for index, word in enumerate(words):
        # Each word rule needs a leading dash (flags), "=" (assignments) or ":" (headers).
        if word.text.startswith("-") or "=" in word.text or ":" in word.text:
            yield from _assignment_hits(word)
            yield from _export_hits(word)
            yield from _flag_hits(words, index)
            yield from _login_hits(words, index)
            yield from _header_word_hits(word)
        if depth < _MAX_NESTING and _is_shell_script(words, index):
            yield from _script_hits(word, depth, free_text)


def _shell_hits(chunk: str, depth: int, free_text: bool) -> Iterator[_Hit]:
    """The shell-word rules over every simple command in one logical line."""
    for words in _commands(chunk):
        yield from _command_hits(words, depth, free_text)


# -- pattern rules ----------------------------------------------------------------
#
# Each rule first looks for a literal that every one of its matches contains, so that
# text without it costs a substring search, not a regular expression.


def _may_hold(text: str, lowered: str) -> bool:
    """Whether ``text`` may hold ``lowered`` in any case, as a ``(?i)`` pattern reads it.

    ASCII text is simply lowered; other text may hold characters that such a pattern
    takes for ASCII letters (the Kelvin sign for ``k``), so it is always scanned.
    """
    return not text.isascii() or lowered in text.lower()


def _token_hits(text: str) -> Iterator[_Hit]:
    """Well-known token prefixes and JWTs anywhere: secrets whatever their name."""
    if _TOKEN_PREFIX().search(text) is None:  # one scan for a literal instead of eight
        return
    for subject, pattern in _TOKEN_PATTERNS:
        for match in pattern().finditer(text):
            yield _Hit("token-prefix", subject, match.start(), match.end())


def _url_hits(text: str) -> Iterator[_Hit]:
    """``scheme://user:password@host`` with a literal password, and ``scheme://TOKEN@host``."""
    if "://" not in text or "@" not in text:
        return
    for match in _URL_USERINFO().finditer(text):
        if _carries_literal(match["password"]):
            start, end = match.span("password")
            yield _Hit("url-userinfo", "URL password", start, end)
    for match in _URL_TOKEN().finditer(text):
        if not any(pattern().fullmatch(match["token"]) for _, pattern in _TOKEN_PATTERNS):
            start, end = match.span("token")
            yield _Hit("url-userinfo", "URL token", start, end)


def _signed_url_hits(text: str) -> Iterator[_Hit]:
    """A pre-signed URL's ``X-Amz-Signature``/``-Credential``/``-Security-Token`` value."""
    if "=" not in text or not _may_hold(text, "x-amz-"):
        return
    for match in _SIGNED_URL().finditer(text):
        if _carries_literal(match["value"]):
            start, end = match.span("value")
            # (?i) also reads the long s (U+017F) as s: such a name is reported as written
            subject = _SIGNED_PARAMS.get(match["param"].lower(), match["param"])
            yield _Hit("signed-url", subject, start, end)


def _format_hits(text: str) -> Iterator[_Hit]:
    """The rules that judge a value by its form alone: safe on paths and URIs too."""
    yield from _token_hits(text)
    yield from _url_hits(text)
    yield from _signed_url_hits(text)


def _json_hits(text: str) -> Iterator[_Hit]:
    """A quoted secret-named key with a quoted value: ``"password": "x"``, ``'token': 'x'``."""
    if ":" not in text or ('"' not in text and "'" not in text):
        return
    for match in _JSON_PAIR().finditer(text):
        if is_secret_name(match["key"]) and _scalar_literal(match["value"]):
            start, end = match.span("value")
            yield _Hit("json-credential", match["key"], start + 1, end - 1)


def _array_flag_hits(text: str) -> Iterator[_Hit]:
    """A secret flag in an array: ``args: ["--token", "x"]`` or ``["--token=x"]``."""
    if "--" not in text:
        return
    for match in _ARRAY_FLAG().finditer(text):
        if not _is_secret_flag(match["flag"]):
            continue
        group = "value" if match["value"] is not None else "joined"
        value = match[group].strip()
        unquoted = value[1:-1] if value[:1] in "'\"" else value
        if not unquoted.startswith("--") and _scalar_literal(value):
            start, end = match.span(group)
            yield _Hit("secret-flag", match["flag"], start, end)


def _quoted_or_line_end(text: str, start: int, quote: str) -> int:
    """Where a value at ``start`` ends: at ``quote`` when one is open, else at the line end."""
    end = _line_end(text, start)
    if quote:
        closing = _quote_end(quote + text[start:], 0)
        if closing > 0 and start + closing - 2 < end:
            return start + closing - 2
    return end - 1 if text[start:end].endswith("\r") else end


def _header_hits(text: str) -> Iterator[_Hit]:
    """``Authorization: <credential>`` in any form: a header line, a quoted ``-H``, JSON.

    The value runs to the quote that closes it, or to the end of the line;
    the scheme word (``Bearer``, ``Basic``...) is kept. A header inside a value
    already taken is part of it (which keeps the scan linear).
    """
    if not _may_hold(text, "authorization"):
        return
    taken = 0
    for match in _HEADER().finditer(text):
        if match.start() < taken:
            continue
        start = match.end()
        if text[start : start + 1] in ("'", '"'):
            closing = _quote_end(text, start)
            end = _line_end(text, start) if closing < 0 else closing - 1
            start += 1
        else:
            before = text[match.start() - 1 : match.start()] if match.start() else ""
            quote = before if before in ("'", '"') and not match["q"] else ""
            end = _quoted_or_line_end(text, start, quote)
        taken = end
        scheme, credential = _split_scheme(text[start:end])
        if _has_break(text[match.start() : end]) and _raw_literal(credential):
            yield _Hit("auth-header", match["name"], start + len(scheme), end)


def _bearer_hits(text: str) -> Iterator[_Hit]:
    """``bearer <token>`` anywhere: a run with a digit, or of 20 characters or more."""
    if not _may_hold(text, "bearer"):
        return
    for match in _BEARER().finditer(text):
        value = match["value"]
        looks_random = len(value) >= 20 or any(char.isdigit() for char in value)
        if looks_random and len(value) >= 8 and _raw_literal(value):
            start, end = match.span("value")
            yield _Hit("bearer-token", "bearer token", start, end)


def _aws_secret_hits(text: str) -> Iterator[_Hit]:
    """A 40-character base64 run right after a secret name: an AWS secret access key.

    ``aws configure set aws_secret_access_key <key>``, ``--aws-secret-access-key
    <key>``, ``SecretAccessKey: <key>``; ``NAME=<key>`` is the assignment rule's.
    """
    if len(text) < 41:  # a name, then the 40 characters
        return
    for value in _AWS_SECRET_VALUE().finditer(text):
        start, end = value.span()
        before = _AWS_SECRET_NAME().search(text, max(0, start - _NAME_WINDOW), start)
        if before is None or text[before.start() - 1 : before.start()] == "-":
            continue  # a flag's value is the flag rule's to report
        if is_secret_name(before["name"]):
            yield _Hit("aws-secret-key", before["name"], start, end)


def _pattern_hits(text: str) -> Iterator[_Hit]:
    """Every pattern rule over raw text."""
    yield from _format_hits(text)
    yield from _json_hits(text)
    yield from _array_flag_hits(text)
    yield from _header_hits(text)
    yield from _bearer_hits(text)
    yield from _aws_secret_hits(text)


# -- block rules ----------------------------------------------------------------


def _pem_hits(text: str, pattern: Callable[[], re.Pattern[str]] = _PEM) -> Iterator[_Hit]:
    """A PEM private key block, markers included (to the end of text when it has no END)."""
    if "-----BEGIN " not in text:
        return
    rule = "private-key" if pattern is _PEM else "pem-block"
    for match in pattern().finditer(text):
        yield _Hit(rule, match["kind"], match.start(), match.end())


class _KeyLine(NamedTuple):
    """A ``key: value`` line of a block mapping: the key's column and the value's span."""

    column: int
    item: bool
    key: str
    start: int
    end: int


def _continuation_end(text: str, end: int, column: int) -> int:
    """Extend a value ending at ``end`` over the following lines indented past ``column``."""
    position = end
    while position < len(text):
        following = _line_end(text, position + 1)
        line = text[position + 1 : following]
        if line.strip():
            if len(line) - len(line.lstrip(" \t")) <= column:
                break
            end = following
        position = following
    return end


def _key_lines(text: str) -> Iterator[_KeyLine]:
    """The ``key: value`` lines of block YAML, skipping lines inside a multi-line value."""
    position = 0
    while position <= len(text):
        end = _line_end(text, position)
        match = _KEY_LINE().match(text, position, end)
        following = end + 1
        if match is not None:
            column = len(match["lead"])
            start = match.end()
            if start < end or match["key"] == "value":
                value_end = _continuation_end(text, end, column)
                following = value_end + 1
            else:
                value_end = end
            yield _KeyLine(column, bool(match["dash"]), match["key"], start, value_end)
        position = following


def _env_entry_hits(text: str, entry: Sequence[_KeyLine]) -> Iterator[_Hit]:
    """One Kubernetes env entry: a secret ``name`` with a literal ``value`` (not ``valueFrom``)."""
    names = [line for line in entry if line.key == "name"]
    if not names or not is_secret_name(text[names[0].start : names[0].end].strip().strip("'\"")):
        return
    subject = text[names[0].start : names[0].end].strip().strip("'\"")
    for line in entry:
        if line.key == "value" and _block_scalar_literal(text[line.start : line.end]):
            yield _Hit("manifest-env-value", subject, line.start, line.end)


def _block_scalar_literal(raw: str) -> bool:
    """Whether a block YAML value (``|`` or ``>`` block scalars included) is a literal."""
    first, _, rest = raw.partition("\n")
    if _BLOCK_INDICATOR().match(first.strip()):
        return bool(rest.strip())
    return _scalar_literal(raw)


def _manifest_hits(text: str) -> Iterator[_Hit]:
    """Kubernetes env entries in block form: ``- name: X`` and ``value: ...`` in either order."""
    if "name" not in text or "value" not in text or ":" not in text:
        return
    entry: list[_KeyLine] = []
    for line in _key_lines(text):
        if line.item or (entry and line.column < entry[0].column):
            yield from _env_entry_hits(text, entry)
            entry = [line] if line.item else []
        elif entry and line.column == entry[0].column:
            entry.append(line)
    yield from _env_entry_hits(text, entry)


def _flow_value_end(body: str, start: int, limit: int) -> int:
    """Where a flow mapping value starting at ``start`` ends (quoted, or before ``limit``)."""
    if body[start : start + 1] in ("'", '"'):
        closing = _quote_end(body, start)
        if closing > 0:
            return closing
    end = limit
    while end > start and body[end - 1] in " \t\r\n,":
        end -= 1
    return end


def _flow_hits(text: str) -> Iterator[_Hit]:
    """Env entries in flow or JSON form: ``{name: X, value: y}``, keys in either order."""
    if "{" not in text or "name" not in text or "value" not in text:
        return
    for mapping in _FLOW_MAPPING().finditer(text):
        body = mapping.group()
        keys = list(_FLOW_KEY().finditer(body))
        fields: dict[str, tuple[int, int]] = {}
        consumed = 0
        for index, key in enumerate(keys):
            if key.start() < consumed:
                continue
            start = key.end() + len(body[key.end() :]) - len(body[key.end() :].lstrip())
            limit = keys[index + 1].start() if index + 1 < len(keys) else len(body) - 1
            end = _flow_value_end(body, start, max(limit, start))
            fields.setdefault(key["key"], (start, end))
            consumed = end
        if "name" not in fields or "value" not in fields:
            continue
        name = body[slice(*fields["name"])].strip().strip("'\"")
        start, end = fields["value"]
        if is_secret_name(name) and _scalar_literal(body[start:end]):
            quoted = body[start] in "'\"" and end - start >= 2 and body[end - 1] == body[start]
            start, end = (start + 1, end - 1) if quoted else (start, end)
            yield _Hit("manifest-env-value", name, mapping.start() + start, mapping.start() + end)


def _block_arg_hits(text: str) -> Iterator[_Hit]:
    """A secret flag as one block-sequence item and its value as the next (``- --token``)."""
    if "--" not in text or "\n" not in text:
        return
    for match in _BLOCK_ARG().finditer(text):
        value = match["value"].strip()
        literal = not value.startswith("--") and _scalar_literal(value)
        if literal and _is_secret_flag(match["flag"]):
            start, end = match.span("value")
            yield _Hit("secret-flag", match["flag"], start, end)


def _block_hits(text: str) -> Iterator[_Hit]:
    """Every rule that reads several lines at once."""
    yield from _pem_hits(text)
    yield from _manifest_hits(text)
    yield from _flow_hits(text)
    yield from _block_arg_hits(text)


# -- free-text rules (redaction only) ---------------------------------------------


def _field_end(text: str, start: int) -> int:
    """Where a free-text value starting at ``start`` ends: at whitespace outside quotes.

    A quoted part is one unit (it may span lines); a quote that never closes
    runs to the end of its line. ``& ? , ;`` never end a value.
    """
    index = start
    while index < len(text) and text[index] not in " \t\r\n":
        if text[index] in "'\"":
            closing = _quote_end(text, index)
            index = _line_end(text, index) if closing < 0 else closing
        else:
            index += 2 if text[index] == "\\" else 1
    return min(index, len(text))


def _clip_to_quote(text: str, start: int, end: int, opening: int) -> int:
    """End a value at the quote that closes the one just before ``opening``, if it is open."""
    quote = text[opening - 1 : opening] if opening else ""
    if quote not in ("'", '"'):
        return end
    closing = _quote_end(quote + text[start:end], 0)
    return end if closing < 0 else start + closing - 2


def _free_assignment_hits(text: str) -> Iterator[_Hit]:
    """``NAME=value`` anywhere in prose (after a space, ``,``, ``?``, ``&``...), value whole.

    A match inside a value already taken is part of that value: skipping it keeps
    the scan linear on text such as ``a=a=a=...``.
    """
    if "=" not in text:
        return
    taken = 0
    for match in _FREE_ASSIGNMENT().finditer(text):
        if match.start() < taken or not is_secret_name(match["name"]):
            continue
        end = _clip_to_quote(text, match.end(), _field_end(text, match.end()), match.start())
        taken = end
        if _raw_literal(text[match.end() : end]):
            yield _Hit("inline-secret-assignment", match["name"], match.end(), end)


def _free_flag_hits(text: str) -> Iterator[_Hit]:
    """``--token value`` or ``--token=value`` in prose: the whole next value, whatever it is."""
    if "--" not in text:
        return
    taken = 0
    for match in _FREE_FLAG().finditer(text):
        if match.start() < taken or not _is_secret_flag(match["flag"]):
            continue
        end = _clip_to_quote(text, match.end(), _field_end(text, match.end()), match.start())
        taken = end
        if _raw_literal(text[match.end() : end]):
            yield _Hit("secret-flag", match["flag"], match.end(), end)


def _key_value_end(text: str, start: int, column: int, yaml_style: bool) -> int:
    """Where a YAML/INI value starting at ``start`` ends.

    A quoted value ends at its closing quote (lines included) when a space,
    the line's end, ``,``, ``]`` or ``}`` follows it. Anything else runs to the end of its
    line and over the lines indented past ``column``; a YAML value (``key:``)
    stops at a `` #`` comment, which a YAML plain value cannot hold.
    """
    if text[start : start + 1] in ("'", '"'):
        closing = _quote_end(text, start)
        if closing > 0 and text[closing : closing + 1] in _AFTER_QUOTED:
            return closing
    end = _line_end(text, start)
    comment = text.find(" #", start, end) if yaml_style else -1
    if comment >= 0:
        return comment
    return _continuation_end(text, end, column)


def _free_key_hits(text: str) -> Iterator[_Hit]:
    """``password: value`` (YAML) and ``password = value`` (INI) in prose, value whole."""
    if ":" not in text and "=" not in text:
        return
    for match in _FREE_KEY().finditer(text):
        if not is_secret_name(match["name"]):
            continue
        line_start = text.rfind("\n", 0, match.start()) + 1
        line = text[line_start : match.start()]
        column = len(line) - len(line.lstrip(" \t"))
        if text[match.end() - 1] == ":" and text[match.end() : match.end() + 1].strip():
            # token:value, one field as NAME=value is
            end = _clip_to_quote(text, match.end(), _field_end(text, match.end()), match.start())
            if _raw_literal(text[match.end() : end]):
                yield _Hit("secret-key-value", match["name"], match.end(), end)
            continue
        yaml_style = ":" in text[match.end("name") : match.end()]
        end = _key_value_end(text, match.end(), column, yaml_style)
        end = _clip_to_quote(text, match.end(), end, match.start())
        raw = text[match.end() : end]
        if _has_break(text[match.start() : end]) and _block_scalar_literal(raw.strip(" \t")):
            yield _Hit("secret-key-value", match["name"], match.end(), end)


def _extra_token_hits(text: str) -> Iterator[_Hit]:
    """Token shapes beyond the lint's reference list, and a bare AWS secret access key."""
    for subject, literal, pattern in _EXTRA_TOKEN_PATTERNS:
        if literal in text:
            for match in pattern().finditer(text):
                yield _Hit("token-prefix", subject, match.start(), match.end())
    if len(text) < 40:
        return
    for match in _AWS_SECRET_VALUE().finditer(text):
        value = match.group()  # mixed case, and a digit, "/" or "+"
        if value.lower() != value != value.upper() and not value.isalpha():
            yield _Hit("token-prefix", "AWS secret access key", match.start(), match.end())


def _loose_bearer_hits(text: str) -> Iterator[_Hit]:
    """``bearer`` and any whitespace, then eight or more token characters."""
    if not _may_hold(text, "bearer"):
        return
    for match in _LOOSE_BEARER().finditer(text):
        start, end = match.span("value")
        yield _Hit("bearer-token", "bearer token", start, end)


def _free_text_hits(text: str) -> Iterator[_Hit]:
    """Every free-text rule."""
    yield from _free_assignment_hits(text)
    yield from _free_flag_hits(text)
    yield from _free_key_hits(text)
    yield from _extra_token_hits(text)
    yield from _loose_bearer_hits(text)
    yield from _pem_hits(text, _CERTIFICATE)


# -- collecting hits --------------------------------------------------------------


def _text_hits(text: str, free_text: bool, depth: int = 0) -> list[_Hit]:
    """Every hit in ``text``: the lint's rules, and the free-text rules when asked."""
    hits = [
        hit._replace(start=hit.start + chunk.start, end=hit.end + chunk.start)
        for chunk in _logical_lines(text)
        for hit in _shell_hits(chunk.text, depth, free_text)
    ]
    hits.extend(_pattern_hits(text))
    hits.extend(_block_hits(text))
    if free_text:
        hits.extend(_free_text_hits(text))
    return hits


# -- lint ---------------------------------------------------------------------------


def _findings(located: Iterable[tuple[int, _Hit]]) -> list[Finding]:
    """One finding per distinct (line, rule, subject), by line, in the order first seen."""
    seen: dict[tuple[int, str, str], None] = {}
    for line, hit in sorted(located, key=lambda pair: pair[0]):
        seen.setdefault((line, hit.rule, hit.subject), None)
    return [Finding(line, rule, subject) for line, rule, subject in seen]


def _located(text: str, free_text: bool = False) -> list[tuple[int, _Hit]]:
    """The lint's hits in ``text``, each with the line it is reported on.

    A shell-word hit reports its logical line's first physical line, every other
    hit the line where its value starts. With ``free_text`` the free-text rules
    add what the lint's rules do not already cover, so a value is reported once.
    """
    located = [
        (chunk.line, hit._replace(start=hit.start + chunk.start, end=hit.end + chunk.start))
        for chunk in _logical_lines(text)
        for hit in _shell_hits(chunk.text, 0, free_text=False)
    ]
    hits = [*_pattern_hits(text), *_block_hits(text)]
    if free_text:
        taken = itertools.chain((hit for _, hit in located), hits)
        runs = _covered_runs([(hit.start, hit.end) for hit in taken])
        starts = [start for start, _ in runs]
        for hit in _free_text_hits(text):
            index = bisect.bisect_left(starts, hit.end) - 1
            if index < 0 or runs[index][1] <= hit.start:
                hits.append(hit)
    newlines = [match.start() for match in re.finditer("\n", text)]
    located += [(bisect.bisect_right(newlines, hit.start - 1) + 1, hit) for hit in hits]
    return located


def lint_text(text: str) -> list[Finding]:
    """Find inline secrets in a command line, a script or a manifest.

    Lines continued with a trailing backslash, or inside a quoted string, are
    joined first; a shell-word finding on a joined line reports its first
    physical line, every other finding the line where the value starts.
    """
    return _findings(_located(text))


def lint_argv(argv: Sequence[str]) -> list[Finding]:
    """Find inline secrets in an argument list, each element judged as one shell word.

    ``-e NAME=literal`` is flagged and ``-e NAME`` passes; ``--password``
    followed by a value or ``--password=x`` is flagged; ``-p X`` is flagged only
    after ``login``; token prefixes are flagged anywhere. Findings report line 1.
    """
    words = [_Word(text, index, index) for index, text in enumerate(argv)]
    hits: list[_Hit] = list(_command_hits(words, 0, free_text=False))
    # The pattern rules read each element; one scan of them all, a line each, does it
    # at once (a finding names its rule and subject, never its place).
    elements = "\n".join(argv)
    hits.extend(_pattern_hits(elements))
    hits.extend(_block_hits(elements))
    return _findings((1, hit) for hit in hits)


def find_secret_literals(value: str) -> list[Finding]:
    """The inline secrets in ONE literal value of a job file (``env.set``, ``command``, ``spec:``).

    Every rule of :func:`lint_text` applies (``password=x``, ``pass=x``,
    ``--password x``, token prefixes, JWTs, PEM blocks, bearer tokens, AWS
    secret keys...). taospec's own ``{name}`` placeholders count as
    references, so ``results_dir={results_dir}`` and ``--token {matrix.t}``
    pass. The free-text rules apply too, so what :func:`redact` removes is refused
    here. Lines are counted within the value.
    """
    text = _PLACEHOLDER_REFERENCE().sub("${TAOSPEC_PLACEHOLDER}", value)
    return _findings(_located(text, free_text=True))


# -- redact -------------------------------------------------------------------------


def _apply(text: str, hits: Iterable[_Hit]) -> str:
    """Rewrite each hit's span; overlapping spans merge under the earliest (then longest) hit.

    A merged span is rewritten whole with that hit's replacement, so a value
    two rules read differently (a shell word, a free-text value) never leaves a tail.
    """
    merged: list[_Hit] = []
    for hit in sorted(hits, key=lambda hit: (hit.start, -hit.end)):
        if merged and hit.start < merged[-1].end:
            if hit.end > merged[-1].end:
                merged[-1] = merged[-1]._replace(end=hit.end)
        else:
            merged.append(hit)
    parts: list[str] = []
    position = 0
    for hit in merged:
        parts.append(text[position : hit.start])
        parts.append(hit.replacement)
        position = hit.end
    parts.append(text[position:])
    return "".join(parts)


def _inside_placeholder(position: int, starts: Sequence[int], ends: Sequence[int]) -> bool:
    """Whether ``position`` falls strictly inside one of the placeholders."""
    index = bisect.bisect_left(starts, position) - 1
    return index >= 0 and position < ends[index]


def _occurrences(text: str, value: str) -> Iterator[tuple[int, int]]:
    """Every (possibly overlapping) span where ``value`` occurs in ``text``."""
    start = text.find(value)
    while start >= 0:
        yield start, start + len(value)
        start = text.find(value, start + 1)


def _covered_runs(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge spans that overlap or touch into maximal runs."""
    runs: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((start, end))
    return runs


def _redact_values(text: str, secrets: Sequence[str]) -> str:
    """Replace every occurrence of each known secret value with the placeholder.

    Occurrences are merged into runs and each run becomes one placeholder, so
    overlapping secrets leave nothing behind. An occurrence that would cut into
    an existing placeholder (start or end strictly inside it) is left alone;
    that keeps redaction idempotent.
    """
    guarded = [match.span() for match in re.finditer(re.escape(PLACEHOLDER), text)]
    starts = [start for start, _ in guarded]
    ends = [end for _, end in guarded]
    spans = (
        (start, end)
        for value in secrets
        for start, end in _occurrences(text, value)
        if not _inside_placeholder(start, starts, ends)
        and not _inside_placeholder(end, starts, ends)
    )
    return _apply(
        text, (_Hit("secret-value", "", start, end) for start, end in _covered_runs(spans))
    )


@functools.cache
def _environment_secrets() -> tuple[str, ...]:
    """The values of this process's secret-named environment variables, read once.

    A value of a variable such as ``WANDB_API_KEY`` or ``NGC_KEY`` that shows up
    alone in a message (an error echoing it back) is redacted like a given value.
    """
    return tuple(
        value
        for name, value in os.environ.items()
        if is_secret_name(name) and len(value) >= MIN_SECRET_LENGTH
    )


def _known_secrets(secret_values: Iterable[str]) -> list[str]:
    """The given values long enough to look for, with those of the environment."""
    values = itertools.chain(secret_values, _environment_secrets())
    return sorted({value for value in values if len(value) >= MIN_SECRET_LENGTH})


def _redact_pass(text: str, secrets: Sequence[str]) -> str:
    """One pass of redaction: known values, then every rule, free-text rules included."""
    text = _redact_values(text, secrets)
    return _apply(text, _text_hits(text, free_text=True))


def _is_inert(text: str, secrets: Sequence[str]) -> bool:
    """Whether redacting ``text`` cannot change it, known without the full scan.

    Text made only of ASCII letters, digits and ``_ . / : , + % ~ -`` is a
    single plain shell word: it has no quote, ``$``, backtick, backslash,
    space, newline, operator, ``=``, ``@``, brace or ``"``, so no assignment,
    flag value, header, ``login -p``, ``sh -c`` script, URL userinfo,
    signed-URL parameter, JSON, YAML or manifest pair, PEM block or AWS key
    (which needs a space or a quote before it) can be read in it. Only a
    token (a JWT included) or a known value could be redacted there, and both
    are looked for. Ids, paths, image names and times are such text, and a
    writer redacts many of them.

    A new rule must keep this true or narrow the characters;
    tests/test_redact_inert.py holds it against the full scan.
    """
    plain_word_hits = itertools.chain(
        _token_hits(text), _extra_token_hits(text), _free_key_hits(text)
    )
    return (
        _INERT.fullmatch(text) is not None
        and not any(True for _ in plain_word_hits)
        and not any(value in text for value in secrets)
    )


_registered: list[str] = []


def register(values: Iterable[str]) -> None:
    """Values this process must never print, log or raise (a job's passed variables)."""
    _registered.extend(value for value in values if value)


def redacted(text: str) -> str:
    """``text`` redacted, with every value :func:`register` was given removed too.

    What taospec prints, logs or raises about a job passes through here.
    """
    return redact(text, _registered)


def redact(text: str, secret_values: Iterable[str] = ()) -> str:
    """Return free text with secret material replaced by ``<redacted>``.

    Every occurrence of each given secret value (at least
    :data:`MIN_SECRET_LENGTH` characters) and of each secret-named variable's
    value in this process's environment is replaced, and so is every value
    the lint and free-text rules find, whole: ``NAME=<redacted>``,
    ``--password <redacted>``, ``Authorization: Bearer <redacted>``,
    ``password: <redacted>``, ``user:<redacted>@host``,
    ``"password": "<redacted>"``, Kubernetes env values, PEM blocks, JWTs
    and token-prefixed strings.

    Passes repeat until nothing changes, so ``redact(redact(x)) == redact(x)``.
    Outside the placeholders no given secret value survives. Never raises.
    """
    return Redactor(secret_values).text(text)


def _redact_fully(text: str, secrets: Sequence[str]) -> str:
    """:func:`redact` by the full scan, pass after pass until nothing changes."""
    current = text
    for _ in range(_MAX_PASSES):
        following = _redact_pass(current, secrets)
        if following == current:
            break
        current = following
    return current


def redact_location(text: str, secret_values: Iterable[str] = ()) -> str:
    """Redact a path or URI field (``results_dir``, ``image``, ``backend_ref``).

    Only the format rules apply, as the TAO recorder does for such fields: URL
    userinfo, pre-signed URL credentials, well-known token prefixes and JWTs,
    the given secret values and the environment's. A path segment such as
    ``/exp/token=v1/run`` is a name, not an assignment, and survives.
    """
    return Redactor(secret_values).location(text)


class Redactor:
    """:func:`redact` and :func:`redact_location` for one set of secret values.

    The values worth looking for (the given ones and the environment's) are
    worked out once, for a writer such as the ledger that redacts every field of
    every record it writes.
    """

    __slots__ = ("_secrets",)

    def __init__(self, secret_values: Iterable[str] = ()) -> None:
        self._secrets = _known_secrets(secret_values)

    def text(self, text: str) -> str:
        """:func:`redact` of ``text``."""
        if _is_inert(text, self._secrets):
            return text
        return _redact_fully(text, self._secrets)

    def location(self, text: str) -> str:
        """:func:`redact_location` of ``text``."""
        current = _redact_values(text, self._secrets)
        for _ in range(_MAX_PASSES):
            following = _apply(current, list(_format_hits(current)))
            if following == current:
                break
            current = following
        return current
