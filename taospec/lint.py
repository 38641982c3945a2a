"""The secret lint: find credential material written inline, and redact it.

Secrets travel by name (``docker run -e NGC_KEY``), through stdin or, in a
manifest, through ``valueFrom.secretKeyRef``; never as a value in a job spec,
a command line or a log line. Each way a value leaks in anyway is reported as a
:class:`Finding` that names the variable, flag or kind of token, never the
value, so the report is safe to print and to store.

Four families of rules feed one list of hits (a span, and what to write there):

* shell-word rules read each logical line as shell words: ``NAME=literal``,
  ``--export=ALL,NAME=literal``, ``--password VALUE``, ``login -p VALUE``,
  ``Authorization: ...`` words, and all of these inside ``bash -c '...'``;
* pattern rules read raw characters: token prefixes, JWTs, URL userinfo,
  signed URLs, JSON keys, ``args: ["--token", "..."]``, authorization headers,
  bearer tokens and AWS secret keys after a secret name;
* block rules read several lines: PEM private keys and Kubernetes env entries
  (block, flow and JSON forms);
* free-text rules read prose, where a value is not a shell word: the whole
  value of a secret-named ``NAME=value``, ``--flag value``, ``key: value``,
  ``key:value`` or ``key = value``, and token shapes beyond the reference list
  (``gho_``, ``glpat-``, bare AWS keys, certificates, loosely spaced bearers).

:func:`lint_text` reports the first three families (those of the TAO secret
lint); :func:`find_secret_literals`, which judges job-file values, and
:func:`redact` use all four, so what either reports, redaction removes.
:func:`redact` also removes given values and those of secret-named
environment variables. Everything here is pure and standard library only.
"""

from __future__ import annotations

import binascii
import bisect
import functools
import itertools
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from taospec import braces

PLACEHOLDER = "<redacted>"
"""What :func:`redact` writes in place of a secret value."""

MIN_SECRET_LENGTH = 4
"""Known secret values shorter than this are too likely to be ordinary text."""

_Pattern = Callable[[], re.Pattern[str]]


def _lazy(source: str, flags: int = 0) -> _Pattern:
    """A pattern compiled when a rule first needs it: most text reaches few rules."""
    return functools.cache(lambda: re.compile(source, flags))


def _run(rules: Iterable[Callable[[str], Iterator[_Hit]]], text: str) -> Iterator[_Hit]:
    """The hits of each rule over ``text``, rule after rule."""
    return itertools.chain.from_iterable(rule(text) for rule in rules)


_MESSAGES = {
    "inline-secret-assignment": (
        "{s} is assigned an inline secret value; pass it by name (-e {s}) or through stdin"
    ),
    "secret-flag": (
        "an inline secret value is given to {s}; pass it through stdin "
        "(e.g. --password-stdin) or an environment variable"
    ),
    "login-password-flag": (
        '{s} gives the login password inline; pipe it in with printf %s "$VAR" | ... '
        "--password-stdin"
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
        'variable ("{s}: $TOKEN")'
    ),
    "bearer-token": "an inline {s} appears; read it from an environment variable",
    "basic-credential": "an inline {s} appears; read it from an environment variable",
    "password-option": (
        "a password is given inline to {s} (read it from an environment variable, or a file "
        "the tool reads)"
    ),
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


class Finding(NamedTuple):
    """One inline secret: its line, the rule that caught it, and what it is called.

    ``subject`` is a name, a flag, a header or a token kind, never the value.
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
    """A shell word's text, quotes removed, and its span.

    A ``$``, backtick or backslash the shell takes literally is written with a
    backslash in front (``'$HOME'`` reads ``\\$HOME``), so it is no reference.
    """

    text: str
    start: int
    end: int


class _Hit(NamedTuple):
    """What a rule reports, and the span :func:`redact` rewrites to ``replacement``."""

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

_SINGLE_KEYWORDS = frozenset({"SECRET", "PASSWORD", "PASSWD", "APIKEY", "TOKEN", "CREDENTIAL"})
_LAST_KEYWORDS = frozenset({"PASS"})  # DB_PASS and pass=, but not PASS_THROUGH
_KEYWORD_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("NGC", "KEY")})
_LOCATION_PARTS = frozenset({"FILE", "PATH", "DIR"})
_CAMEL = _lazy(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_BREAKS = _lazy(r"[_.-]+")
_LONG_OPTION = _lazy(r"--[A-Za-z][A-Za-z0-9-]*")


def _name_parts(name: str) -> list[str]:
    """A name's upper-cased parts, split at ``_ - .`` and camelCase boundaries."""
    return [part for part in _NAME_BREAKS().split(_CAMEL().sub("_", name).upper()) if part]


_KEYWORDS = {*_SINGLE_KEYWORDS, *_LAST_KEYWORDS, *(pair[-1] for pair in _KEYWORD_PAIRS)}
_SECRET_NAME_WORDS = tuple(
    sorted(word for word in _KEYWORDS if not any(o != word and o in word for o in _KEYWORDS))
)
"""The shortest keywords (KEY, PASS...): one is in every name :func:`is_secret_name` accepts."""


def _may_name_secret(text: str) -> bool:
    """Whether ``text`` may hold a name :func:`is_secret_name` accepts: one that holds
    none of :data:`_SECRET_NAME_WORDS` has no secret part (as most names a plan sets)."""
    upper = text.upper()
    return any(word in upper for word in _SECRET_NAME_WORDS)


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag, header or key name says it holds a secret.

    A part is SECRET, PASSWORD, PASSWD, APIKEY, TOKEN or CREDENTIAL, two parts
    read API KEY, ACCESS KEY or NGC KEY, or the last part is PASS. A last part
    FILE, PATH or DIR (``NGC_KEY_FILE``) says where a secret lives: not a secret.
    """
    if not _may_name_secret(name):
        return False
    parts = _name_parts(name)
    if not parts or parts[-1] in _LOCATION_PARTS:
        return False
    if parts[-1] in _LAST_KEYWORDS or any(part in _SINGLE_KEYWORDS for part in parts):
        return True
    return any(pair in _KEYWORD_PAIRS for pair in itertools.pairwise(parts))


def _is_secret_flag(flag: str) -> bool:
    """Whether a long option ends in a secret word: ``--api-key``, not ``--token-file``."""
    if not flag.startswith("--") or not _may_name_secret(flag):
        return False
    if _LONG_OPTION().fullmatch(flag) is None:
        return False
    parts = _name_parts(flag[2:])
    return bool(parts) and (
        parts[-1] in _SINGLE_KEYWORDS
        or parts[-1] in _LAST_KEYWORDS
        or tuple(parts[-2:]) in _KEYWORD_PAIRS
    )


_PARAMETER = _lazy(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
_DEFAULT = _lazy(r"[^:=+?#%/^,-]*:?[-=+](?P<default>.*)", re.DOTALL)


def _carries_literal(value: str, depth: int = 0) -> bool:
    """Whether word text holds literal material, not only ``$VAR``, ``${VAR}``, ``$(...)``,
    backticks or the placeholder (``${VAR:-default}`` carries what its default carries)."""
    if value in ("", PLACEHOLDER):
        return False
    if depth > 16:
        return True
    index = 0
    while index < len(value):
        if value[index] == "`":
            closing = value.find("`", index + 1)
            index = len(value) if closing < 0 else closing + 1
        elif value[index] != "$":
            return True
        elif value[index + 1 : index + 2] == "(":
            index = _closing(value, index + 1)
        elif value[index + 1 : index + 2] == "{":
            end = _closing(value, index + 1)
            inner = value[index + 2 : end - 1] if value[end - 1] == "}" else value[index + 2 :]
            match = _DEFAULT().fullmatch(inner)  # ${NAME:-default} and kin: judge the default
            if match is not None:
                default = match["default"]
                if len(default) >= 2 and default[0] == default[-1] and default[0] in "'\"":
                    default = _protect(default[1:-1]) if default[0] == "'" else default[1:-1]
                if _carries_literal(default, depth + 1):
                    return True
            index = end
        elif (parameter := _PARAMETER().match(value, index + 1)) is not None:
            index = parameter.end()
        else:
            return True
    return False


_INERT = re.compile(r"[A-Za-z0-9_./:,+%~-]*")
_INERT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:,+%~-")


def _has_break(text: str) -> bool:
    """Whether ``text`` holds a character outside the inert set (see :func:`_is_inert`)."""
    return any(char not in _INERT_CHARS for char in text)


def _raw_literal(raw: str) -> bool:
    """Whether raw (still quoted) text carries literal material, read as a shell reads it."""
    raw = raw.strip()
    if raw == PLACEHOLDER:
        return False
    return _carries_literal(_read_pieces(raw))


def _scalar_literal(raw: str) -> bool:
    """Whether a YAML/JSON scalar as written is a literal (not empty, null or a reference)."""
    text = raw.strip()
    if text in ("", "~", "null", "Null", "NULL", PLACEHOLDER):
        return False
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text.strip() not in ("", PLACEHOLDER) and _carries_literal(text)


# -- reading shell words --------------------------------------------------------

_WORD_BREAKS = frozenset(" \t\r\n|&;()")
_OPERATORS = frozenset("|&;()\n")
_COMMENT_STARTS = frozenset(" \t\r\n;&|()")
_PLAIN = re.compile(r"[^ \t\r\n|&;()\\'\"$`]+")
_UNESCAPE = _lazy(r"\\(.)", re.DOTALL)


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
    return 3 if text.startswith("\\\r\n", index) else 0


_DOUBLE_QUOTED_RUN = _lazy(r'[^"\\$]+')
"""Text inside double quotes that holds no quote, escape or expansion: taken as it is."""


def _read_double_quoted(text: str, index: int) -> tuple[str, int]:
    """A double-quoted string's text from ``index`` (past the quote), and its end."""
    parts: list[str] = []
    ordinary = _DOUBLE_QUOTED_RUN()
    while index < len(text):
        if (run := ordinary.match(text, index)) is not None:
            parts.append(run.group())
            index = run.end()
            continue
        char = text[index]
        if char == '"':
            return "".join(parts), index + 1
        skip = _continuation_length(text, index)
        if skip:
            index += skip
        elif char == "\\" and index + 1 < len(text):
            escaped = text[index + 1]  # inside double quotes only $ ` \ " are escapes
            if escaped == '"':
                parts.append('"')
            else:
                parts.append(("\\" if escaped in "$`\\" else "\\\\") + escaped)
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


def _read_pieces(raw: str) -> str:
    """All of ``raw`` read as one word, blanks and operators too (as a shell reads the word
    of ``${NAME:-word}``): quotes and escapes removed."""
    parts: list[str] = []
    index = 0
    while index < len(raw):
        piece, index = _read_piece(raw, index)
        parts.append(piece)
    return "".join(parts)


def _expansions(text: str) -> Iterator[tuple[bool, str]]:
    """What the shell reads again inside word text as the reader keeps it (a ``$`` or
    backtick it takes literally escaped): ``(True, script)`` for each ``$(...)`` and
    backtick substitution, ``(False, word)`` for the word of each ``${NAME:-word}``
    (``-``, ``=``, ``+``, with or without ``:``), each as it is written there."""
    index = 0
    while index < len(text):
        char, following = text[index], text[index + 1 : index + 2]
        if char == "\\":
            index += 2
        elif char == "`":
            closing = text.find("`", index + 1)
            end = len(text) if closing < 0 else closing
            yield True, _BACKTICK_ESCAPE().sub(r"\1", text[index + 1 : end])
            index = end + 1
        elif char == "$" and following in ("(", "{"):
            end = _closing(text, index + 1)
            closed = text[end - 1] == (")" if following == "(" else "}")
            inner = text[index + 2 : end - 1] if closed else text[index + 2 :]
            if following == "(":
                yield True, inner
            elif (match := _DEFAULT().fullmatch(inner)) is not None:
                yield False, match["default"]
            index = end
        else:
            index += 1


_BACKTICK_ESCAPE = _lazy(r"\\([$`\\])")
"""Inside backticks a backslash escapes only ``$``, a backtick and itself."""


def _read_word(text: str, start: int) -> _Word:
    """Read the shell word that starts at ``start``."""
    parts: list[str] = []
    index = start
    while index < len(text):
        plain = _PLAIN.match(text, index)
        if plain is not None:
            parts.append(plain.group())
            index = plain.end()
        elif text[index] in _WORD_BREAKS:
            break
        elif skip := _continuation_length(text, index):
            index += skip
        else:
            piece, index = _read_piece(text, index)
            parts.append(piece)
    return _Word("".join(parts), start, min(index, len(text)))


def _commands(text: str) -> list[list[_Word]]:
    """Split shell text into simple commands (at ``| & ; ( )`` and newlines) of words.

    Text with no quote, escape or expansion (most lines a job writes) is split by one
    regular expression: each word is then a run of what breaks no word, as
    :func:`_parsed_commands` reads it a character at a time."""
    if _QUOTING().search(text) is not None:
        return _parsed_commands(text)
    commands: list[list[_Word]] = [[]]
    for piece in _PIECE().finditer(text):
        if piece.lastgroup is None:  # an operator
            if commands[-1]:
                commands.append([])
        else:
            commands[-1].append(_Word(piece.group(), piece.start(), piece.end()))
    return [words for words in commands if words]


_QUOTING = _lazy(r"[\\'\"$`]")
"""What a shell reads a word's characters other than as they stand by."""
_PIECE = _lazy(r"(?P<word>[^ \t\r\n|&;()]+)|[|&;()\n]")
"""A word of text without :data:`_QUOTING`, or an operator that ends a command."""


def _parsed_commands(text: str) -> list[list[_Word]]:
    """:func:`_commands` of any shell text, read a character at a time."""
    commands: list[list[_Word]] = [[]]
    index = 0
    while index < len(text):
        char = text[index]
        skip = _continuation_length(text, index)
        if skip:
            index += skip
        elif char in _OPERATORS:
            commands.append([])
            index += 1
        elif char in _WORD_BREAKS:
            index += 1
        else:
            word = _read_word(text, index)
            commands[-1].append(word)
            index = max(word.end, index + 1)
    return [words for words in commands if words]


_ESCAPE_OR_QUOTE = _lazy(r'[\\"]')
"""What a double-quoted string's end is looked for at: an escape, or its closing quote."""


def _quote_end(text: str, index: int) -> int:
    """The index just past the quote closing the one at ``index``, or -1 when none does.

    Inside single quotes ``''`` is YAML's escaped quote; to a shell it is two
    adjacent quoted strings in one word, so reading it as one changes no span.
    """
    if text[index] == "'":
        closing = text.find("'", index + 1)
        while closing >= 0 and text.startswith("''", closing):
            closing = text.find("'", closing + 2)
        return -1 if closing < 0 else closing + 1
    stop = _ESCAPE_OR_QUOTE()
    position = index + 1
    while (found := stop.search(text, position)) is not None:
        if found.group() == '"':
            return found.end()
        position = found.start() + 2
    return -1


def _line_end(text: str, index: int) -> int:
    """The index of the newline ending the line that holds ``index`` (or the text's end)."""
    end = text.find("\n", index)
    return len(text) if end < 0 else end


_ORDINARY_RUN = _lazy(r"[^\\'\"#\n]+")
"""A run of characters none of which starts anything :func:`_logical_lines` reads."""


def _logical_lines(text: str) -> list[_Chunk]:
    """Split text into logical lines, each with its first physical line's number and offset.

    A newline ends a logical line unless a backslash escapes it or a quoted
    string that closes later holds it; a quote that never closes, and quotes in
    a ``#`` comment, are ordinary characters. The chunks joined by newlines are ``text``.
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
        else:  # ordinary text: the whole run up to the next character that can matter
            run = _ORDINARY_RUN().match(text, index)
            index = index + 1 if run is None else run.end()
            char = text[index - 1]
        word_start = char in _COMMENT_STARTS
    chunks.append(_Chunk(first, start, text[start:]))
    return chunks


# -- shell-word rules ------------------------------------------------------------
#
# Each rule reads the word at ``index`` of a simple command and returns at most one hit.

_ASSIGNMENT = _lazy(
    r"(?P<prefix>--?[A-Za-z][A-Za-z0-9-]*=|-e(?=[A-Za-z_]))?"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)",
    re.DOTALL,
)
_EXPORT = "--export="
_EXPORT_ITEM = _lazy(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)", re.DOTALL)
_HEADER_WORD = _lazy(r"(?P<name>[A-Za-z][A-Za-z0-9-]*)[ \t]*:[ \t]+(?P<value>.*)", re.DOTALL)
_AUTH_HEADERS = frozenset({"AUTHORIZATION", "PROXY-AUTHORIZATION"})
_AUTH_SCHEME = _lazy(r"(?i)(?:bearer|basic|token|digest|bot|apikey)[ \t]+")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash"})
_SHELL_C_OPTION = _lazy(r"-[A-Za-z]*c[A-Za-z]*")
_MAX_NESTING = 3


def _requote(protected: str) -> str:
    """Shell-quote protected word text, for a replacement that keeps part of a word."""
    return shlex.quote(_unprotect(protected)) if protected else ""


def _assignment_hit(words: Sequence[_Word], index: int) -> _Hit | None:
    """``NAME=literal`` for a secret NAME, bare or after ``export``, ``-e``, ``--env=``."""
    word = words[index]
    if "=" not in word.text:
        return None
    match = _ASSIGNMENT().fullmatch(word.text)
    if match is None or word.text.startswith(_EXPORT) or not is_secret_name(match["name"]):
        return None
    if not _carries_literal(match["value"]):  # NAME=$VAR, NAME=${VAR} and NAME= pass
        return None
    kept = f"{match['prefix'] or ''}{match['name']}={PLACEHOLDER}"
    return _Hit("inline-secret-assignment", match["name"], word.start, word.end, kept)


def _export_hit(words: Sequence[_Word], index: int) -> _Hit | None:
    """``--export=ALL,NAME=literal`` (sbatch, srun); redaction keeps the items before it."""
    word = words[index]
    if not word.text.startswith(_EXPORT):
        return None
    items = word.text[len(_EXPORT) :].split(",")
    for position, item in enumerate(items):
        match = _EXPORT_ITEM().fullmatch(item)
        if match and is_secret_name(match["name"]) and _carries_literal(match["value"]):
            kept = _requote(_EXPORT + ",".join([*items[:position], match["name"] + "="]))
            return _Hit(
                "inline-secret-assignment", match["name"], word.start, word.end, kept + PLACEHOLDER
            )
    return None


def _value_after(words: Sequence[_Word], index: int, rule: str, subject: str) -> _Hit | None:
    """The literal word after the flag at ``index`` (not another long option), if any."""
    if index + 1 < len(words):
        value = words[index + 1]
        if not value.text.startswith("--") and _carries_literal(value.text):
            return _Hit(rule, subject, value.start, value.end)
    return None


def _flag_hit(words: Sequence[_Word], index: int) -> _Hit | None:
    """``--token VALUE`` or ``--token=VALUE`` for any flag ending in a secret word."""
    word = words[index]
    if _is_secret_flag(word.text):
        return _value_after(words, index, "secret-flag", word.text)
    flag, equals, value = word.text.partition("=")
    if equals and _is_secret_flag(flag) and _carries_literal(value):
        return _Hit("secret-flag", flag, word.start, word.end, f"{flag}={PLACEHOLDER}")
    return None


def _login_hit(words: Sequence[_Word], index: int) -> _Hit | None:
    """``-p VALUE`` or ``-pVALUE`` after a ``login`` word (not ``docker run -p 8080:8080``)."""
    word = words[index]
    if not word.text.startswith("-p") or word.text.startswith("--"):
        return None
    if all(earlier.text != "login" for earlier in words[:index]):
        return None
    if word.text == "-p":
        return _value_after(words, index, "login-password-flag", "-p")
    if _carries_literal(word.text[2:]):
        return _Hit("login-password-flag", "-p", word.start, word.end, "-p" + PLACEHOLDER)
    return None


def _split_scheme(value: str) -> tuple[str, str]:
    """An authorization value's scheme word with its space (``Bearer ``), and the rest."""
    match = _AUTH_SCHEME().match(value)
    return ("", value) if match is None else (match.group(), value[match.end() :])


def _open_quote(text: str, index: int) -> str:
    """The quote left open at ``index`` on its line (an odd number of them before it), or ""."""
    line_start = text.rfind("\n", 0, index) + 1
    return next((q for q in ("'", '"') if text.count(q, line_start, index) % 2), "")


def _bare_scheme(name: str, credential: str) -> bool:
    """Whether an authorization header holds a scheme word alone (``Authorization: Bearer``,
    the value to come elsewhere): no credential is written."""
    return (
        name.upper() in _AUTH_HEADERS
        and _AUTH_SCHEME().fullmatch(credential.strip() + " ") is not None
    )


def _header_word_hit(words: Sequence[_Word], index: int) -> _Hit | None:
    """A word such as ``'Authorization: Bearer x'`` or ``'X-Api-Key: x'`` (curl ``-H``)."""
    word = words[index]
    if ": " not in word.text and ":\t" not in word.text:  # a header's colon, then a blank
        return None
    match = _HEADER_WORD().fullmatch(word.text)
    if match is None:
        return None
    name = match["name"]
    if name.upper() not in _AUTH_HEADERS and not is_secret_name(name):
        return None
    scheme, credential = _split_scheme(match["value"])
    if credential.strip() == PLACEHOLDER or not _carries_literal(credential):
        return None
    if _bare_scheme(name, credential):
        return None
    replacement = _requote(f"{name}: {scheme}") + PLACEHOLDER
    return _Hit("auth-header", name, word.start, word.end, replacement)


_WORD_RULES = (_assignment_hit, _export_hit, _flag_hit, _login_hit, _header_word_hit)


def _is_shell_script(words: Sequence[_Word], index: int) -> bool:
    """Whether the word at ``index`` is the script of ``sh -c``, ``bash -lc`` and the like."""
    option = words[index - 1].text if index >= 2 else ""
    if not option.startswith("-") or _SHELL_C_OPTION().fullmatch(option) is None:
        return False
    return any(word.text.rsplit("/", 1)[-1] in _SHELLS for word in words[: index - 1])


@functools.lru_cache(maxsize=64)
def _script_text_hits(script: str, free_text: bool, depth: int) -> tuple[_Hit, ...]:
    """The hits inside one ``sh -c`` script (plans repeat the same scripts)."""
    return tuple(_text_hits(script, free_text, depth))


def _command_hits(words: Sequence[_Word], depth: int, free_text: bool) -> Iterator[_Hit]:
    """Every shell-word rule over one simple command; a ``sh -c`` script's hits are its word's.
    A script is read as the shell reads it, not as one word: ``sh -c 'KEY=$X run'`` assigns
    ``$X``, where the word rules alone would read the value ``$X run``."""
    for index, word in enumerate(words):
        if depth < _MAX_NESTING and _is_shell_script(words, index):
            script = _unprotect(word.text)
            inner = _script_text_hits(script, free_text, depth + 1)
            if inner:  # a script without hits needs no replacement worked out
                replacement = shlex.quote(_apply(script, inner))
                for found in inner:
                    yield _Hit(found.rule, found.subject, word.start, word.end, replacement)
        # Each word rule needs a leading dash (flags), "=" (assignments) or ":" (headers).
        elif word.text.startswith("-") or "=" in word.text or ":" in word.text:
            for rule in _WORD_RULES:
                if (hit := rule(words, index)) is not None:
                    yield hit


# -- pattern rules ----------------------------------------------------------------
#
# Each rule first looks for a literal that every one of its matches contains, so that
# text without it costs a substring search, not a regular expression.


def _may_hold(text: str, lowered: str) -> bool:
    """Whether ``text`` may hold ``lowered`` in any case as ``(?i)`` reads it (which takes
    some non-ASCII letters for ASCII ones, the Kelvin sign for ``k``)."""
    return not text.isascii() or lowered in text.lower()


# A distinctive prefix only needs to start a word; "sk-" must also not follow "_" or "-".
_WORD_START = r"(?<![A-Za-z0-9])"
_STANDS_ALONE = r"(?<![A-Za-z0-9_-])"
_TOKEN_PATTERNS: tuple[tuple[str, _Pattern], ...] = (
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


def _token_hits(
    text: str,
    patterns: Sequence[tuple[str, _Pattern]] = _TOKEN_PATTERNS,
    gate: _Pattern = _TOKEN_PREFIX,
) -> Iterator[_Hit]:
    """Well-known token prefixes and JWTs anywhere: secrets whatever their name."""
    if gate().search(text) is None:  # one scan for a literal instead of one per pattern
        return
    for subject, pattern in patterns:
        for match in pattern().finditer(text):
            yield _Hit("token-prefix", subject, match.start(), match.end())


_URL_USERINFO = _lazy(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s/?#@:'\"]+:"
    r"(?P<password>[^\s/?#@'\"]*)@"
)
_URL_TOKEN = _lazy(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://"
    r"(?P<token>(?=[A-Za-z_-]*[0-9])(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,})@"
)


def _url_hits(text: str) -> Iterator[_Hit]:
    """``scheme://user:password@host`` with a literal password, and ``scheme://TOKEN@host``."""
    if "://" not in text or "@" not in text:
        return
    for match in _URL_USERINFO().finditer(text):
        if _carries_literal(match["password"]):
            yield _Hit("url-userinfo", "URL password", *match.span("password"))
    for match in _URL_TOKEN().finditer(text):
        if not any(pattern().fullmatch(match["token"]) for _, pattern in _TOKEN_PATTERNS):
            yield _Hit("url-userinfo", "URL token", *match.span("token"))


_SIGNED_PARAMS = {
    name.lower(): name for name in ("X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token")
}
_SIGNED_URL = _lazy(
    r"(?<![A-Za-z0-9-])(?P<param>X-Amz-(?:Signature|Credential|Security-Token))="
    r"(?P<value>[^&\s'\"#\\]+)",
    re.IGNORECASE,
)


def _signed_url_hits(text: str) -> Iterator[_Hit]:
    """A pre-signed URL's ``X-Amz-Signature``/``-Credential``/``-Security-Token`` value."""
    if "=" not in text or not _may_hold(text, "x-amz-"):
        return
    for match in _SIGNED_URL().finditer(text):
        if _carries_literal(match["value"]):
            # (?i) also reads the long s (U+017F) as s: such a name is reported as written
            subject = _SIGNED_PARAMS.get(match["param"].lower(), match["param"])
            yield _Hit("signed-url", subject, *match.span("value"))


_FORMAT_RULES = (_token_hits, _url_hits, _signed_url_hits)
"""The rules that judge a value by its form alone: safe on paths and URIs too."""


_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
_JSON_PAIR = _lazy(
    r"(?P<q>[\"'])(?P<key>[A-Za-z0-9_.-]{1,64})(?P=q)\s*:\s*(?P<value>" + _QUOTED + ")"
)


def _json_hits(text: str) -> Iterator[_Hit]:
    """A quoted secret-named key with a quoted value: ``"password": "x"``, ``'token': 'x'``."""
    if ":" not in text or ('"' not in text and "'" not in text):
        return
    for match in _JSON_PAIR().finditer(text):
        if is_secret_name(match["key"]) and _scalar_literal(match["value"]):
            start, end = match.span("value")
            yield _Hit("json-credential", match["key"], start + 1, end - 1)


_ARRAY_FLAG = _lazy(
    r"(?P<q>[\"'])(?P<flag>--[A-Za-z][A-Za-z0-9-]*)"
    r"(?:(?P=q)\s*,\s*(?P<value>" + _QUOTED + r"|[^\s,\]\"'][^,\]\n]*)"
    r"|=(?P<joined>(?:(?!(?P=q))[^\\\n]|\\.)*)(?P=q))"
)


def _array_flag_hits(text: str) -> Iterator[_Hit]:
    """A secret flag in an array: ``args: ["--token", "x"]`` or ``["--token=x"]``."""
    if "--" not in text:
        return
    for match in _ARRAY_FLAG().finditer(text):
        group = "value" if match["value"] is not None else "joined"
        value = match[group].strip()
        unquoted = value[1:-1] if value[:1] in "'\"" else value
        literal = not unquoted.startswith("--") and _scalar_literal(value)
        if literal and _is_secret_flag(match["flag"]):
            yield _Hit("secret-flag", match["flag"], *match.span(group))


_HEADER = _lazy(
    r"(?i)(?<![A-Za-z0-9_-])(?P<name>(?:proxy-)?authorization)(?P<q>[\"']?)[ \t]*[:=][ \t]*"
)


def _header_hits(text: str) -> Iterator[_Hit]:
    """``Authorization: <credential>`` in any form: a header line, a quoted ``-H``, JSON.

    The value runs to the quote that closes it, or to the end of the line; the
    scheme word (``Bearer``...) is kept. A header inside a value already taken
    is part of it (which keeps the scan linear).
    """
    if not _may_hold(text, "authorization"):
        return
    taken = 0
    for match in _HEADER().finditer(text):
        if match.start() < taken:
            continue
        start = match.end()
        end = _line_end(text, start)
        opened = "" if match["q"] else _open_quote(text, match.start())
        if opened:  # the name is in a quoted word (-H 'Authorization: x', -e 'V=Authorization: x')
            closing = _quote_end(opened + text[start:], 0)
            if closing > 0 and start + closing - 2 < end:
                end = start + closing - 2
        elif text[start : start + 1] in ("'", '"'):
            closing = _quote_end(text, start)
            end = end if closing < 0 else closing - 1
            start += 1
        if text[start:end].endswith("\r"):
            end -= 1
        taken = end
        scheme, credential = _split_scheme(text[start:end])
        if _bare_scheme(match["name"], credential):
            continue
        if _has_break(text[match.start() : end]) and _raw_literal(credential):
            yield _Hit("auth-header", match["name"], start + len(scheme), end)


_BEARER = _lazy(r"(?i)(?<![A-Za-z0-9_-])bearer[ \t]+(?P<value>[A-Za-z0-9._~+/-]+=*)")
"""The value is RFC 6750's b64token: a ``:`` or ``,`` after it (``-v '/x/Bearer 00:/data'``)
ends it, as a rendered word's ``:/data`` or ``,readonly`` must not make it look random."""


def _bearer_hits(text: str) -> Iterator[_Hit]:
    """``bearer <token>`` anywhere: a run with a digit, or of 20 characters or more."""
    if not _may_hold(text, "bearer"):
        return
    for match in _BEARER().finditer(text):
        value = match["value"]
        looks_random = len(value) >= 20 or any(char.isdigit() for char in value)
        if looks_random and len(value) >= 8 and _raw_literal(value):
            yield _Hit("bearer-token", "bearer token", *match.span("value"))


_AWS_SECRET_VALUE = _lazy(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_SECRET_NAME = _lazy(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)"
    r"(?:[\"']?[ \t]*[:=]?[ \t]+[\"']?|[\"'][ \t]*[:=,]?[ \t]*[\"']?)\Z"
)
_NAME_WINDOW = 128
"""How far before a 40-character value its name is looked for."""


def _aws_secret_hits(text: str) -> Iterator[_Hit]:
    """A 40-character base64 run right after a secret name: an AWS secret access key.

    ``aws configure set aws_secret_access_key <key>``, ``SecretAccessKey: <key>``;
    ``NAME=<key>`` is the assignment rule's, ``--flag <key>`` the flag rule's.
    """
    if len(text) < 41:  # a name, then the 40 characters
        return
    for value in _AWS_SECRET_VALUE().finditer(text):
        start = value.start()
        before = _AWS_SECRET_NAME().search(text, max(0, start - _NAME_WINDOW), start)
        if before is None or text[before.start() - 1 : before.start()] == "-":
            continue
        if is_secret_name(before["name"]):
            yield _Hit("aws-secret-key", before["name"], *value.span())


# -- block rules ----------------------------------------------------------------

_PEM = _lazy(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?:.*?-----END (?P=kind)-----|.*)",
    re.DOTALL,
)
_CERTIFICATE = _lazy(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*CERTIFICATE)-----(?:.*?-----END (?P=kind)-----|.*)", re.DOTALL
)


def _pem_hits(text: str, pattern: _Pattern = _PEM, rule: str = "private-key") -> Iterator[_Hit]:
    """A PEM private key (or certificate) block, markers included (to the end without END)."""
    if "-----BEGIN " not in text:
        return
    for match in pattern().finditer(text):
        yield _Hit(rule, match["kind"], match.start(), match.end())


class _KeyLine(NamedTuple):
    """A ``key: value`` line of a block mapping: the key's column and the value's span."""

    column: int
    item: bool
    key: str
    start: int
    end: int


_KEY_LINE = _lazy(
    r"(?P<lead>[ \t]*(?P<dash>-[ \t]+)?)(?P<q>[\"']?)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)"
    r"[ \t]*:(?:[ \t]+|(?=[ \t]*\r?$))"
)
_BLOCK_INDICATOR = _lazy(r"[|>][0-9+-]*[ \t]*(?:#.*)?$")


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
            value_end = end
            if match.end() < end or match["key"] == "value":
                value_end = _continuation_end(text, end, column)
                following = value_end + 1
            yield _KeyLine(column, bool(match["dash"]), match["key"], match.end(), value_end)
        position = following


def _block_scalar_literal(raw: str) -> bool:
    """Whether a block YAML value (``|`` or ``>`` block scalars included) is a literal."""
    first, _, rest = raw.partition("\n")
    if _BLOCK_INDICATOR().match(first.strip()):
        return bool(rest.strip())
    return _scalar_literal(raw)


def _env_entry_hits(text: str, entry: Sequence[_KeyLine]) -> Iterator[_Hit]:
    """One Kubernetes env entry: a secret ``name`` with a literal ``value`` (not ``valueFrom``)."""
    names = [line for line in entry if line.key == "name"]
    subject = text[names[0].start : names[0].end].strip().strip("'\"") if names else ""
    if not is_secret_name(subject):
        return
    for line in entry:
        if line.key == "value" and _block_scalar_literal(text[line.start : line.end]):
            yield _Hit("manifest-env-value", subject, line.start, line.end)


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


_FLOW_MAPPING = _lazy(r"\{[^{}]*\}")
_FLOW_KEY = _lazy(r"(?<![A-Za-z0-9_-])(?P<q>[\"']?)(?P<key>name|valueFrom|value)(?P=q)\s*:")


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
            if body[start] in "'\"" and end - start >= 2 and body[end - 1] == body[start]:
                start, end = start + 1, end - 1  # the value inside its quotes
            yield _Hit("manifest-env-value", name, mapping.start() + start, mapping.start() + end)


_BLOCK_ARG = _lazy(
    r"^(?P<indent>[ \t]*)-[ \t]+(?P<q>[\"']?)(?P<flag>--[A-Za-z][A-Za-z0-9-]*)(?P=q)[ \t]*\r?\n"
    r"(?P=indent)-[ \t]+(?P<value>[^\n]*?)\r?$",
    re.MULTILINE,
)


def _block_arg_hits(text: str) -> Iterator[_Hit]:
    """A secret flag as one block-sequence item and its value as the next (``- --token``)."""
    if "--" not in text or "\n" not in text:
        return
    for match in _BLOCK_ARG().finditer(text):
        value = match["value"].strip()
        literal = not value.startswith("--") and _scalar_literal(value)
        if literal and _is_secret_flag(match["flag"]):
            yield _Hit("secret-flag", match["flag"], *match.span("value"))


# -- free-text rules (redaction and job values) ----------------------------------

_FREE_ASSIGNMENT = _lazy(r"(?<![A-Za-z0-9_./$-])(?P<name>[A-Za-z_][A-Za-z0-9_-]*)=")
_FREE_FLAG = _lazy(r"(?<![A-Za-z0-9_-])(?P<flag>--[A-Za-z][A-Za-z0-9-]*)(?:=|[ \t]+)")
_FREE_KEY = _lazy(
    r"(?<![A-Za-z0-9_./$-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)"
    r"(?:[ \t]*:[ \t]+|[ \t]*:(?=[ \t]*\r?$)|[ \t]*:(?=\S)|[ \t]+=[ \t]*|=[ \t]+)"
)
_AFTER_QUOTED = frozenset({"", " ", "\t", "\r", "\n", ",", "]", "}"})


def _field_end(text: str, start: int, opening: int) -> int:
    """Where a free-text value ends: at whitespace outside quotes (never at ``& ? , ;``),
    or at a quote of the kind of those just before its name (at ``opening``), which
    encloses the field (``"'password=x": ...`` ends before the ``"``); a quote that never
    closes runs to the end of its line."""
    enclosing = opening
    while enclosing > 0 and text[enclosing - 1] in "'\"":
        enclosing -= 1
    closes = text[enclosing:opening]
    index = start
    while index < len(text) and text[index] not in " \t\r\n":
        if text[index] in closes and index > start:
            break
        if text[index] in "'\"":
            closing = _quote_end(text, index)
            index = _line_end(text, index) if closing < 0 else closing
        else:
            index += 2 if text[index] == "\\" else 1
    return min(index, len(text))


def _clip_to_quote(text: str, start: int, end: int, opening: int) -> int:
    """End a value at the quote that closes the one just before ``opening``, if it is open."""
    quote = text[opening - 1 : opening]
    if quote not in ("'", '"'):
        return end
    closing = _quote_end(quote + text[start:end], 0)
    return end if closing < 0 else start + closing - 2


def _field_hits(
    text: str, pattern: _Pattern, rule: str, secret: Callable[[str], bool]
) -> Iterator[_Hit]:
    """``NAME=value`` or ``--flag value`` anywhere in prose, the value whole; a match inside
    a value already taken is part of it (which keeps ``a=a=a=...`` linear)."""
    taken = 0
    for match in pattern().finditer(text):
        if match.start() < taken or not secret(match[1]):
            continue
        end = _field_end(text, match.end(), match.start())
        taken = _clip_to_quote(text, match.end(), end, match.start())
        # a value may end at a shell's separator (``API_TOKEN=$MY_TOKEN; ...``), which is
        # no literal of its own
        if _raw_literal(text[match.end() : taken].rstrip(";&|)")):
            yield _Hit(rule, match[1], match.end(), taken)


def _key_value_end(text: str, start: int, column: int, yaml_style: bool) -> int:
    """Where a YAML/INI value ends: at its closing quote, or a YAML `` #`` comment, or
    after the lines indented past ``column``."""
    end = _line_end(text, start)
    if text[start : start + 1] in ("'", '"'):
        closing = _quote_end(text, start)
        if closing > 0 and text[closing : closing + 1] in _AFTER_QUOTED:
            rest = text[closing:end].lstrip(" \t\r")
            # a comma or bracket ends a YAML flow value, never an INI one: `= '',22`
            if not rest or rest[0] == "#" or (yaml_style and rest[0] in ",]}"):
                return closing  # else the quotes open an INI value: `"" 22`
    comment = text.find(" #", start, end) if yaml_style else -1
    return comment if comment >= 0 else _continuation_end(text, end, column)


def _free_key_hits(text: str) -> Iterator[_Hit]:
    """``password: value`` (YAML), ``password = value`` (INI) and ``token:value`` in prose."""
    if ":" not in text and "=" not in text:
        return
    for match in _FREE_KEY().finditer(text):
        if not is_secret_name(match["name"]):
            continue
        start = match.end()
        if text[start - 1] == ":" and text[start : start + 1].strip():  # token:value, one field
            end = _field_end(text, start, match.start())
            end = _clip_to_quote(text, start, end, match.start())
            if _raw_literal(text[start:end]):
                yield _Hit("secret-key-value", match["name"], start, end)
            continue
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        column = len(line) - len(line.lstrip(" \t"))
        yaml_style = ":" in text[match.end("name") : start]
        end = _clip_to_quote(
            text, start, _key_value_end(text, start, column, yaml_style), match.start()
        )
        raw = text[start:end].strip(" \t")
        if _has_break(text[match.start() : end]) and _block_scalar_literal(raw):
            yield _Hit("secret-key-value", match["name"], start, end)


_EXTRA_TOKEN_PATTERNS: tuple[tuple[str, _Pattern], ...] = (
    ("gh?_ token", _lazy(_WORD_START + r"gh[osur]_[A-Za-z0-9]{16,}")),
    ("glpat- token", _lazy(_WORD_START + r"glpat-[A-Za-z0-9_-]{20,}")),
    ("hf_ token", _lazy(_WORD_START + r"hf_[A-Za-z0-9]{30,}")),  # any case, unlike the lint's
)
_EXTRA_TOKEN_PREFIXES = ("gho_", "ghs_", "ghu_", "ghr_", "glpat-", "hf_")
"""What every match of :data:`_EXTRA_TOKEN_PATTERNS` holds, as :data:`TOKEN_PREFIXES` is for
the lint's (not ``gh`` alone, which ``weights`` and ``length`` hold)."""
_EXTRA_TOKEN_PREFIX = _lazy("|".join(map(re.escape, _EXTRA_TOKEN_PREFIXES)))
_ANY_TOKEN_PREFIX = "|".join(map(re.escape, (*TOKEN_PREFIXES, *_EXTRA_TOKEN_PREFIXES)))
"""Every token prefix either rule set knows, as one alternation."""


def _bare_aws_key_hits(text: str) -> Iterator[_Hit]:
    """A 40-character run of mixed case with a digit, ``/`` or ``+``: an AWS secret key."""
    if len(text) < 40:
        return
    for match in _AWS_SECRET_VALUE().finditer(text):
        value = match.group()
        if value.lower() != value != value.upper() and not value.isalpha():
            yield _Hit("token-prefix", "AWS secret access key", *match.span())


_LOOSE_BEARER = _lazy(r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")


def _loose_bearer_hits(text: str) -> Iterator[_Hit]:
    """``bearer``, any whitespace, then eight or more token characters."""
    if _may_hold(text, "bearer"):
        for match in _LOOSE_BEARER().finditer(text):
            yield _Hit("bearer-token", "bearer token", *match.span("value"))


_BASIC = _lazy(
    r"(?<![A-Za-z0-9_-])(?i:basic)[ \t]+(?P<value>[A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])"
)


def _basic_hits(text: str) -> Iterator[_Hit]:
    """``Basic <base64>`` whose base64 reads as ``user:password``, header name or not."""
    if _may_hold(text, "basic"):
        for match in _BASIC().finditer(text):
            value = match["value"]
            try:
                decoded = binascii.a2b_base64(value + "=" * (-len(value) % 4))
            except (binascii.Error, ValueError):
                continue
            _, colon, password = decoded.partition(b":")
            if colon and password and all(32 <= byte < 127 for byte in decoded):
                yield _Hit("basic-credential", "Basic credential", *match.span("value"))


_OPTION_TOOLS = r"curl|sshpass|mysql|mysqldump|mysqladmin|mariadb"
_PASSWORD_TOOL = _lazy(rf"(?<![\w./-])(?:[\w.-]*/)*(?P<tool>{_OPTION_TOOLS})(?=[ \t])")
_OPTION_VALUE = r"(?P<q>['\"]?)(?P<value>[^ \t'\"\n;|&(),][^ \t'\"\n;|&()]*)"
_PASSWORD_OPTIONS = {
    "curl": _lazy(r"[ \t](?P<flag>-u|--user|-U|--proxy-user)(?:=|[ \t]+)?" + _OPTION_VALUE),
    "sshpass": _lazy(r"[ \t](?P<flag>-p)[ \t]*" + _OPTION_VALUE),
    "mysql": _lazy(r"[ \t](?P<flag>-p)" + _OPTION_VALUE),  # -p alone asks for it
}
_COMMAND_END = _lazy(r"[\n;|&]")


def _password_option_hits(text: str) -> Iterator[_Hit]:
    """A password given to a tool's own option: ``curl -u user:password``,
    ``sshpass -p password``, ``mysql -ppassword`` (and mysqldump, mysqladmin, mariadb)."""
    for tool in _PASSWORD_TOOL().finditer(text):
        name = tool["tool"]
        option = _PASSWORD_OPTIONS.get(name, _PASSWORD_OPTIONS["mysql"])()
        end = _COMMAND_END().search(text, tool.end())
        for match in option.finditer(text, tool.end(), end.start() if end else len(text)):
            start, stop = match.span("value")
            if match["q"]:  # a quoted value runs to its closing quote
                closing = text.find(match["q"], start)
                stop = closing if closing >= 0 else len(text)
            if name == "curl":  # user:password; the user is kept
                colon = text.find(":", start, stop)
                if colon < 0:
                    continue
                start = colon + 1
            if start < stop and _carries_literal(text[start:stop]):
                yield _Hit("password-option", f"{name} {match['flag']}", start, stop)


_RAW_RULES = (
    *_FORMAT_RULES, _json_hits, _array_flag_hits, _header_hits, _bearer_hits, _aws_secret_hits,
    _pem_hits, _manifest_hits, _flow_hits, _block_arg_hits, _password_option_hits,
)  # fmt: skip
"""The pattern and block rules: those that read raw text rather than shell words."""


def _free_text_hits(text: str) -> Iterator[_Hit]:
    """Every free-text rule."""
    if "=" in text:
        yield from _field_hits(text, _FREE_ASSIGNMENT, "inline-secret-assignment", is_secret_name)
    if "--" in text:
        yield from _field_hits(text, _FREE_FLAG, "secret-flag", _is_secret_flag)
    yield from _free_key_hits(text)
    yield from _token_hits(text, _EXTRA_TOKEN_PATTERNS, _EXTRA_TOKEN_PREFIX)
    yield from _bare_aws_key_hits(text)
    yield from _loose_bearer_hits(text)
    yield from _basic_hits(text)
    yield from _pem_hits(text, _CERTIFICATE, "pem-block")


# -- lint ---------------------------------------------------------------------------


def _shell_located(text: str, depth: int, free_text: bool) -> list[tuple[int, _Hit]]:
    """The shell-word hits of every logical line, each with that line's number."""
    return [
        (chunk.line, hit._replace(start=hit.start + chunk.start, end=hit.end + chunk.start))
        for chunk in _logical_lines(text)
        for words in _commands(chunk.text)
        for hit in _command_hits(words, depth, free_text)
    ]


def _text_hits(text: str, free_text: bool, depth: int = 0) -> list[_Hit]:
    """Every hit in ``text``: the lint's rules, and the free-text rules when asked."""
    hits = [hit for _, hit in _shell_located(text, depth, free_text)]
    hits += _run(_RAW_RULES, text)
    if free_text:
        hits += _free_text_hits(text)
    return hits


def _findings(located: Iterable[tuple[int, _Hit]]) -> list[Finding]:
    """One finding per distinct (line, rule, subject), by line, in the order first seen."""
    seen: dict[tuple[int, str, str], None] = {}
    for line, hit in sorted(located, key=lambda pair: pair[0]):
        seen.setdefault((line, hit.rule, hit.subject), None)
    return [Finding(line, rule, subject) for line, rule, subject in seen]


def _located(text: str, free_text: bool = False) -> list[tuple[int, _Hit]]:
    """The hits in ``text`` with their lines: what :func:`_text_hits` finds, except
    free-text hits that overlap another hit (so a value is reported once)."""
    located = _shell_located(text, 0, free_text)
    hits = list(_run(_RAW_RULES, text))
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

    Text whose lines are each inert, read together (:func:`_inert_each`), is known
    without the full scan, unless a backslash ends a line: a shell joins such a line
    to the next (``NGC_KE\\`` then ``Y=...``), which the gate reads apart. Otherwise a
    quote open across lines keeps the line break in its word, and every pattern rule
    that reads across lines needs a literal of the gate on one of them.
    """
    if "\\\n" not in text and "\\\r\n" not in text:
        lines = [f"{line}\n" for line in text.split("\n")]
        if all(_inert_each(lines, ())):
            return []
    return _findings(_located(text))


def lint_argv(argv: Sequence[str]) -> list[Finding]:
    """Find inline secrets in an argument list, each element read as one shell word.

    ``-p X`` counts only after ``login``; every finding reports line 1.

    A list whose items are each inert, read together as lines (:func:`_inert_each`), is
    known without the full scan. An item is one word as it stands, a piece of its line
    with nothing taken out, and a shell's script among them is a line the gate reads as
    such; the pattern rules read the items as the lines they are joined into, and any
    rule that reads a flag and its value in two items needs a literal of the gate in
    one of them. So what no rule finds in a line alone is not found in the list.
    """
    if all(_inert_each([f"{item}\n" for item in argv], ())):
        return []
    words = [_Word(text, index, index) for index, text in enumerate(argv)]
    elements = "\n".join(argv)  # the pattern rules read every element in one scan
    hits = itertools.chain(_command_hits(words, 0, free_text=False), _run(_RAW_RULES, elements))
    return _findings((1, hit) for hit in hits)


def argv_words(argv: Sequence[str], depth: int = 0) -> Iterator[tuple[int, str]]:
    """The words an argument list runs, each with the index of its item: the items and, for
    a shell's script among them (``sh -c SCRIPT``), each word of the script as that shell
    reads it, quotes and escapes removed (``a''b`` and ``a\\b`` read ``ab``), and so on into
    the scripts it runs, as deep as the lint follows scripts."""
    words = [_Word(text, index, index) for index, text in enumerate(argv)]
    for index, word in enumerate(words):
        yield index, word.text
        if depth < _MAX_NESTING and _is_shell_script(words, index):
            yield from ((index, text) for text in _script_words(word.text, depth + 1))


def _script_words(script: str, depth: int) -> Iterator[str]:
    """The words of a script as a shell reads them (see :func:`argv_words`), and those it
    reads again inside their expansions: the script of a ``$(...)`` or a backtick, the word
    of ``${NAME:-word}`` (quotes are removed there too: ``$(printf %s a''b)`` runs ``ab``),
    each level of them one more of the nesting the lint follows."""
    for command in _commands(script):
        yield from (text for _, text in argv_words([_unprotect(r.text) for r in command], depth))
        if depth < _MAX_NESTING:
            for read in command:
                yield from _expanded_words(read.text, depth + 1)


def _expanded_words(text: str, depth: int) -> Iterator[str]:
    """The words inside the expansions of word ``text`` as the reader keeps it."""
    for is_script, inner in _expansions(text):
        if is_script:
            yield from _script_words(inner, depth)
        else:
            word = _read_pieces(inner)
            yield _unprotect(word)
            if depth < _MAX_NESTING:
                yield from _expanded_words(word, depth + 1)


def find_secret_literals(
    value: str, open_end: bool = False, fill: Callable[[str], str] | None = None
) -> list[Finding]:
    """The inline secrets in ONE literal value of a job file (``env.set``, ``command``, ``spec:``).

    Every rule :func:`redact` uses applies, so what it would remove is refused here.
    Lines are counted within the value. A value is judged twice when it holds
    placeholders: with each as a reference, and as the plan's lint reads it, each
    filled in by ``fill`` (a name to the text the plan writes, :func:`_filled` when
    None); so ``--token={results_dir}`` counts, as the plan carries
    ``--token=/results``, and ``--token {matrix.t}`` is judged by the values the
    matrix gives it, where the loader expands it.

    Text :func:`redact` would leave alone, known to be without the full scan (a line of
    plain words, :func:`_is_inert`), holds nothing any of these rules finds.

    A bearer value is judged by its length, which the plan changes in a value it
    extends, ``open_end`` (``results_root`` becomes ``<results_root>/<id>/...``): a
    bearer value that runs to its end counts however short it is.
    """
    texts = [value]
    if "{" in value:
        texts = [braces.fill(value, f) for f in (_as_reference, fill or _filled)]
    for index, text in enumerate(texts):
        if not _may_hold_secret(text) or _is_inert(text, ()):
            continue
        if index == 0 and len(texts) == 2 and _references_inert(value):
            continue
        if found := _findings(_located(text, free_text=True)):
            return found
    if open_end and _may_hold(texts[0], "bearer"):
        ending = [m for m in _BEARER().finditer(texts[0]) if m.end() == len(texts[0])]
        if ending and _raw_literal(ending[-1]["value"]):
            return [
                Finding(
                    texts[0].count("\n", 0, ending[-1].start()) + 1, "bearer-token", "bearer token"
                )
            ]
    return []


_STAND_IN = "${TAOSPEC_PLACEHOLDER}"
"""A placeholder read as a reference."""


def _as_reference(name: str) -> str:
    return _STAND_IN


def _references_inert(value: str) -> bool:
    """Whether ``value``, its placeholders read as references, is inert: known from the
    value with a blank for each placeholder, without the full scan.

    A blanked line of :data:`_LOGGED` holds no ``$`` or backtick, so the value holds none
    but its stand-ins (:data:`_STAND_IN`). The reader keeps each stand-in in its word as
    it stands (it holds no quote, blank or operator, and no default to read again), so
    every piece a rule reads is a piece of the blanked text's reading with the blank
    made the stand-in. The stand-in holds no literal of the gate, no token prefix and no
    run an AWS key's could be part of, and it ends a name part, a token and a run where
    it stands, as the blank does (a letter would go on with a name part, and no blank
    would join what stands on either side). So what :func:`_logged_read` passes blanked
    is passed with its references (see :func:`_is_inert`): the command
    ``tao train -e {config_path} results_dir={results_dir}`` skips the full scan.
    """
    blanked = braces.fill(value, _as_blank)
    return _LOGGED().fullmatch(blanked) is not None and not _logged_read(blanked)


def _as_blank(name: str) -> str:
    return " "


def secret_keyed_values(
    value: object, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Where a parsed document (a job's spec) gives a secret-named key a literal string.

    Yields the value's path and the key's name: ``password: hunter2`` and the
    manifest form ``{name: NGC_KEY, value: ...}``. Only a string counts, one
    that carries text once its placeholders are read as references: a boolean
    or a number is configuration (TAO specs set ``use_summary_token: true``),
    and ``password: $DB_PASSWORD`` or ``""`` holds no secret. The lint reads
    text and cannot tell ``true`` from ``"true"``, so this walk, not a text
    rule, is what keeps such values out of a spec file.
    """
    if isinstance(value, Mapping):
        name = value.get("name")
        if isinstance(name, str) and is_secret_name(name) and _literal_string(value.get("value")):
            yield (*path, "value"), name
        for key, child in value.items():
            where = (*path, str(key))
            if isinstance(key, str) and is_secret_name(key) and _literal_string(child):
                yield where, key
            else:
                yield from secret_keyed_values(child, where)
    elif isinstance(value, (list, tuple)):
        for index, child in enumerate(value):
            yield from secret_keyed_values(child, (*path, index))


def _literal_string(value: object) -> bool:
    """Whether ``value`` is a string holding literal text, placeholders read as references."""
    if not isinstance(value, str):
        return False
    return _carries_literal(braces.fill(value.strip(), _as_reference))


def _filled(name: str) -> str:
    """A placeholder as the plan's lint reads it once filled in: ``{job_id}`` as ``JOB_ID``,
    a path (``{results_dir}``, ``{config_path}``, ``{needs.<target>.results_dir}``) as
    ``/JOB_ID``; a matrix value stays a reference, as the loader judges its values."""
    if name.startswith("matrix."):
        return _STAND_IN
    return "JOB_ID" if name == "job_id" else "/JOB_ID"


_QUIET_LENGTH = 40
"""Text shorter than this holds no 40-character AWS secret key (bare or after its name)."""
_RULE_MARK = _lazy(
    r"[=:]|(?<![A-Za-z0-9])-|" + _ANY_TOKEN_PREFIX + r"|(?i:bearer|authorization|basic)"
)
"""What some rule needs in ASCII text: ``=`` or ``:``; a dash no letter or digit comes
right before (one that may start a word, ``-p`` or ``'--token'``, or a ``--``; a
``LEVIR-CD`` dash cannot); a token prefix; ``bearer``, ``authorization`` or ``basic`` in
any case."""


def _may_hold_secret(text: str) -> bool:
    """False only when no rule of :func:`_located` (free text included) can fire on ``text``.

    Every rule needs ``=``, ``:`` or a dash that can start a word or a ``--``
    (shell words, URLs, signed URLs, JSON, array and block flags, headers, PEM
    blocks, manifests, free-text keys, flags and assignments), a token prefix,
    ``bearer`` or ``authorization`` in any case (non-ASCII text may spell them),
    or 40 characters: so short values such as ``/data``, ``LEVIR-CD`` or
    ``hello, TAO`` skip the whole scan.
    """
    if len(text) >= _QUIET_LENGTH or not text.isascii():
        return True
    return _RULE_MARK().search(text) is not None


# -- redact -------------------------------------------------------------------------

_MAX_PASSES = 8


def _apply(text: str, hits: Iterable[_Hit]) -> str:
    """Rewrite each hit's span; overlapping spans merge, whole, under the earliest (then
    longest) hit's replacement, so a value two rules read differently leaves no tail.
    Without hits this is ``text`` itself."""
    ordered = sorted(hits, key=lambda hit: (hit.start, -hit.end))
    if not ordered:
        return text
    merged: list[_Hit] = []
    for hit in ordered:
        if merged and hit.start < merged[-1].end:
            if hit.end > merged[-1].end:
                merged[-1] = merged[-1]._replace(end=hit.end)
        else:
            merged.append(hit)
    parts: list[str] = []
    position = 0
    for hit in merged:
        parts += (text[position : hit.start], hit.replacement)
        position = hit.end
    parts.append(text[position:])
    return "".join(parts)


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
    """Replace each run of known values' occurrences by one placeholder; an occurrence
    that would cut into a placeholder is left alone, which keeps redaction idempotent.
    Text that holds none of them is returned itself."""
    if not any(value in text for value in secrets):
        return text
    guarded = [match.span() for match in re.finditer(re.escape(PLACEHOLDER), text)]
    starts = [start for start, _ in guarded]

    def inside_placeholder(position: int) -> bool:
        index = bisect.bisect_left(starts, position) - 1
        return index >= 0 and position < guarded[index][1]

    spans = []
    for value in secrets:
        start = text.find(value)
        while start >= 0:
            end = start + len(value)
            if not inside_placeholder(start) and not inside_placeholder(end):
                spans.append((start, end))
            start = text.find(value, start + 1)
    return _apply(text, (_Hit("secret-value", "", *span) for span in _covered_runs(spans)))


@functools.cache
def _environment_secrets() -> tuple[str, ...]:
    """The values of this process's secret-named environment variables, read once."""
    return tuple(value for name, value in os.environ.items() if is_secret_name(name))


def _known_secrets(secret_values: Iterable[str]) -> list[str]:
    """The given values long enough to look for, with those of the environment, each
    also without the blanks around it and, when it spans lines, line by line; each of
    these also as taospec prints text escaped (:func:`escaped_forms`)."""
    values = itertools.chain(secret_values, _environment_secrets())
    return sorted(
        {shown for value in values for form in secret_forms(value) for shown in escaped_forms(form)}
    )


def secret_forms(value: str) -> set[str]:
    """The texts a secret ``value`` can show as, long enough to look for: itself, without
    the blanks around it (a token file's CRLF) and, when it spans lines (a PEM key, JSON
    credentials), each of its lines, since output is read and redacted line by line."""
    forms = {value, value.strip()}
    if "\n" in value or "\r" in value:
        forms.update(line.strip() for line in value.splitlines())
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def spelled_in(text: str, values: Iterable[str], spelling: Callable[[str], str]) -> bool:
    """Whether ``text`` holds one of ``values`` as ``spelling`` writes it (a minted id
    spells unsafe runs as ``-``), where that is :data:`MIN_SECRET_LENGTH` or longer:
    redaction looks for values only as taospec prints them."""
    return any(len(form) >= MIN_SECRET_LENGTH and form in text for form in map(spelling, values))


def _in_repr(text: str, quote: str) -> str:
    """``text`` as ``repr`` writes it between ``quote`` marks (the marks left out): a
    longer string that holds it may be shown in either, as it holds ``'`` or not."""
    if quote == '"' and '"' in text:
        return repr(text)[1:-1]  # repr quotes such text with ', and so any text holding it
    other = "'" if quote == '"' else '"'
    return repr(text + other)[1:-2]  # the other mark makes repr choose ``quote``


_ESCAPES: tuple[Callable[[str], str], ...] = (
    lambda text: text,
    lambda text: _in_repr(text, "'"),
    lambda text: _in_repr(text, '"'),
    lambda text: json.dumps(text)[1:-1],
    lambda text: json.dumps(text, ensure_ascii=False)[1:-1],
    lambda text: text.replace("'", "'\"'\"'"),  # inside the quotes of shlex.quote
)
"""Each way taospec prints text escaped: itself, Python's ``repr`` in either quotes
(``{value!r}`` in a message), a JSON string (both with and without ``\\u`` escapes) and
``shlex.quote`` (a plan's command line): each without the quotes around it, which a
longer string holding the value puts elsewhere."""


def escaped_forms(text: str) -> set[str]:
    """``text`` as each of :data:`_ESCAPES` writes it, and each of those again written by
    each (a plan's quoted command line in JSON), so that redaction finds a value however
    it is printed, not only as it is. Printable ASCII without quotes or backslashes (most
    tokens) is written by each as it is."""
    if text.isascii() and text.isprintable() and not any(mark in text for mark in "'\"\\"):
        return {text}
    once = {escape(text) for escape in _ESCAPES}
    return {escape(form) for form in once for escape in _ESCAPES}


def _until_stable(text: str, rewrite: Callable[[str], str]) -> str:
    """Apply ``rewrite`` until nothing changes (at most :data:`_MAX_PASSES` times); text
    that the first pass leaves as it is comes back itself."""
    for _ in range(_MAX_PASSES):
        following = rewrite(text)
        if following == text:
            break
        text = following
    return text


def _redact_fully(text: str, secrets: Sequence[str]) -> str:
    """:func:`redact` by the full scan: known values, then every rule, until stable."""

    def one_pass(current: str) -> str:
        current = _redact_values(current, secrets)
        return _apply(current, _text_hits(current, free_text=True))

    return _until_stable(text, one_pass)


_PROSE = _lazy(r"[A-Za-z0-9 .,;!?()']*")
"""Plain prose: ASCII letters, digits, spaces and ``. , ; ! ? ( ) '``, no line break."""
_PROSE_GATE = _lazy(r"AKIA|eyJ|(?i:bearer|basic)|[A-Za-z0-9]{40}")
"""What a rule can still find in plain prose starts one of these (see :func:`_is_inert`)."""
_LOGGED = _lazy(r"[\t\r\x1b -#%-_a-~\u2500-\u259f]*\n?")
"""A line of a job's output without an expansion: printable ASCII but ``$`` and backtick,
tabs, ``\\r`` (a bar redrawn in place), the escape that begins a colour, box-drawing and
block characters (the bar itself), and a line break at its end."""
_AWS_RUN = _lazy(r"[A-Za-z0-9/+]{40}")
"""A run of a bare AWS key's characters, as long as one, whatever stands around it."""
_LOGGED_LITERALS = (
    *(word.lower() for word in _SECRET_NAME_WORDS),
    *(name.lower() for name in _AUTH_HEADERS),
    *_OPTION_TOOLS.split("|"),
    "login",
    "bearer",
    "basic",
    "x-amz-",
    "-----begin ",
    "@",
)
_LOGGED_GATE = _lazy(
    "|".join(
        re.escape(literal)
        for literal in _LOGGED_LITERALS
        if not any(other != literal and other in literal for other in _LOGGED_LITERALS)
    )
)
"""What a rule can find in such a line holds one of these in any case (the pattern is read
in the lowered line: ``(?i)`` tries each literal at each place), or a token shape (see
:func:`_is_inert`)."""


def _is_inert(text: str, secrets: Sequence[str]) -> bool:
    """Whether redacting ``text`` cannot change it, known without the full scan.

    Ids, paths, images and times are text of ASCII letters, digits and ``_ . / : ,
    + % ~ -``: one plain word without quotes, spaces, ``=`` or ``@``, where only token
    shapes, ``token:value`` and known values can be found.

    Messages are often plain prose (:data:`_PROSE`, such as the open's own message).
    Its alphabet lacks what the other rules key on (``- = : _ / @ " $ { [``, tabs and
    line breaks), so no shell word is a flag, an assignment or a header and no key,
    URL, JSON, YAML, PEM or ``sh -c`` rule can match. What can still be found is an
    ``AKIA`` key, a JWT (``eyJ``), a bearer token, a Basic credential or a 40-character
    AWS secret run,
    each of which holds a literal of :data:`_PROSE_GATE`, and a known value: prose
    holding neither is inert.

    A job's output is lines of training logs (:data:`_LOGGED`): no ``$`` or backtick, so
    each shell word, and each script an ``sh -c`` word holds, is a piece of the text with
    some of its quotes and backslashes taken out (the reader writes a backslash it keeps
    as two, which only parts what stands around it). Every rule then finds only what holds a
    literal of :data:`_LOGGED_GATE` (a secret word of a name, flag, key, header or env
    entry; ``authorization``, ``bearer``, ``basic``; ``login`` and the tools whose
    password options are read; ``x-amz-``; a PEM marker; the ``@`` of a URL's user) or a
    token shape, in the text or in such a piece; of a secret word, one that ends a part
    of the name a rule reads (:func:`_goes_on`: not ``tokens`` or ``keypoints``). Each of
    these is in the text with all of its quotes and backslashes taken out
    (:func:`_unquoted`), the literals and a token's prefix (none holds a quote or a
    backslash), and a bare AWS key's run, which may grow there (:data:`_AWS_RUN`, judged
    without what stands around it). A line without quotes and backslashes is those
    pieces; of one with either, a token prefix or such a run anywhere takes the full scan
    (they may join a token that a shell word reads, ``a"'"nvapi-x"y"`` or ``nv\\api-x``,
    where the text has a letter before it or none). A line holding none of these, and no
    known value, is inert.

    The alphabets are ASCII but for box-drawing and block characters, because ``(?i)``
    reads some other letters as ASCII ones (the long s as ``s``, the Kelvin sign as
    ``k``): any other text takes the full scan.

    A new rule must keep this true; tests/test_redact_inert.py holds it against the
    full scan.
    """
    if _INERT.fullmatch(text) is not None:
        # each rule's own gate first: most words hold no token prefix, ':' or secret word
        if _token_shaped(text):
            return False
        if ":" in text and _may_name_secret(text) and any(_free_key_hits(text)):
            return False
    elif _PROSE().fullmatch(text) is not None:
        if _PROSE_GATE().search(text) is not None:
            return False
    elif _LOGGED().fullmatch(text) is None or _logged_read(text):
        return False
    return not secrets or not any(value in text for value in secrets)


_NAME_WORDS = frozenset(word.lower() for word in _SECRET_NAME_WORDS)
_GOES_ON = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _gate_spans(
    unquoted: str, removed: Sequence[int], ends: Sequence[int]
) -> Iterator[tuple[int, int]]:
    """Where :data:`_LOGGED_GATE` finds a literal in ``unquoted`` (pieces ending at ``ends``,
    joined, with quotes and backslashes taken out at ``removed``), but a secret word that
    goes on into a longer word (:func:`_goes_on`): ``tokens``, ``keypoints`` and
    ``passed`` are read as nothing. A search goes on from the next character after such a
    word, for a literal it overlaps (``secreToken``)."""
    lowered = unquoted.lower()
    gate = _LOGGED_GATE()
    found = gate.search(lowered)
    while found is not None:
        start, end = found.span()
        if found.group() in _NAME_WORDS and _goes_on(unquoted, start, end, removed, ends):
            found = gate.search(lowered, start + 1)
        else:
            yield start, end
            found = gate.search(lowered, end)


def _goes_on(
    unquoted: str, start: int, end: int, removed: Sequence[int], ends: Sequence[int]
) -> bool:
    """Whether the secret word at ``start:end`` of ``unquoted`` goes on into a longer part
    of every name a rule may read that holds it, a part that is no secret word.

    :func:`is_secret_name` and :func:`_is_secret_flag` accept a name for a part that is a
    keyword, and every keyword ends with its secret word (``APIKEY``, ``TOKEN``) but
    ``PASSWORD`` and ``PASSWD``, where ``w`` follows ``PASS``. Parts break at ``_ . -``
    and where ``_CAMEL`` splits, before an upper-case letter that follows a lower-case
    one or a digit. So a part goes on past the word's last letter into a lower-case
    letter or a digit, and from an upper-case letter into an upper-case one. Every name
    a rule reads ends where no letter or digit follows it: at ``=``, ``:``, a blank, a
    quote, a comma, a brace, or the end of its word or line. A word followed by such a
    character within its piece, with no quote or backslash taken out between them (so the
    text has them side by side, as has every shell word made of it), is then in a part
    longer than itself. That part is a keyword only if it begins within the word (``secreToken``),
    and then its own secret word begins after this one does, where the search goes on.
    """
    if end >= ends[bisect.bisect_right(ends, start)]:
        return False  # the last of its piece: the piece alone is read to its end
    if removed and bisect.bisect_left(removed, start + 1) != bisect.bisect_right(removed, end):
        return False  # a quote or a backslash stood within it or after it
    after = unquoted[end]
    if after in "wW" and unquoted[start:end].lower() == "pass":
        return False
    return after in _GOES_ON or (after in _UPPER and unquoted[end - 1] in _UPPER)


def _unquoted(text: str) -> str:
    """``text`` without its quotes and backslashes: what every shell word made of a piece of
    it holds, and more (see :func:`_is_inert`)."""
    return text.replace('"', "").replace("'", "").replace("\\", "")


def _quotes_at(text: str) -> list[int]:
    """Where each quote and backslash of ``text`` stood once they are taken out
    (:func:`_unquoted`): an index into the text without them, before which it stood."""
    return [quote.start() - n for n, quote in enumerate(_LOGGED_QUOTE().finditer(text))]


_LOGGED_QUOTE = _lazy(r"[\"'\\]")


def _inert_each(pieces: Sequence[str], secrets: Sequence[str]) -> list[bool]:
    """Which of ``pieces`` (lines, or parts of lines) are inert, found in one pass of each
    search over the pieces read together, however many of them fail.

    A piece outside :data:`_LOGGED` (a line break at its end alone) fails alone. What
    :func:`_is_inert` then needs absent from a piece is a literal or a run that is in the
    piece with its quotes and backslashes taken out whenever a rule may find something in
    it: the literals of :data:`_LOGGED_GATE` (which hold the secret words of ``_may_name_secret``
    and ``bearer``/``basic`` of :data:`_PROSE_GATE`) but a secret word that goes on
    (:func:`_goes_on`), every token prefix (which holds ``AKIA`` and ``eyJ``) rather than
    a token shape, whose look-arounds a neighbouring piece could change, a run of a bare
    AWS key's characters as long as one (which holds ``[A-Za-z0-9]{40}``), and a known
    value. Each search runs over the pieces joined, quotes and backslashes taken out (for
    which lowering keeps every length), and every piece a match overlaps fails: a match
    within a piece alone overlaps one in the joined text, since a search that reaches the
    piece's match unconsumed finds it there. Whether a secret word goes on is judged
    within its piece, as the piece alone judges it.
    """
    inert = [_LOGGED().fullmatch(piece) is not None for piece in pieces]
    kept = [index for index, ok in enumerate(inert) if ok]
    text = "".join(pieces[i] for i in kept)
    joined = _unquoted(text)
    removed = _quotes_at(text) if len(joined) != len(text) else []
    unquoted = [_unquoted(pieces[i]) for i in kept] if removed else [pieces[i] for i in kept]
    ends = list(itertools.accumulate(map(len, unquoted)))
    spans = [
        *_gate_spans(joined, removed, ends),
        *((m.start(), m.end()) for m in _WORD_TOKEN_PREFIX().finditer(joined)),
        *((m.start(), m.end()) for m in _AWS_RUN().finditer(joined)),
    ]
    if secrets:
        text_ends = list(itertools.accumulate(len(pieces[i]) for i in kept))
        for value in secrets:
            at = text.find(value)
            while at >= 0:
                first = bisect.bisect_right(text_ends, at)
                last = bisect.bisect_left(text_ends, at + len(value))
                for index in kept[first : last + 1]:
                    inert[index] = False
                at = text.find(value, at + 1)
    for start, end in spans:
        first, last = bisect.bisect_right(ends, start), bisect.bisect_left(ends, end)
        for index in kept[first : last + 1]:
            inert[index] = False
    return inert


def _logged_read(text: str) -> bool:
    """Whether a rule may find something in ``text``, a line of :data:`_LOGGED` (see
    :func:`_is_inert`)."""
    unquoted = _unquoted(text)
    removed = _quotes_at(text) if len(unquoted) != len(text) else []
    if any(_gate_spans(unquoted, removed, (len(unquoted),))):
        return True
    if len(unquoted) == len(text):
        return _token_shaped(text)
    return _WORD_TOKEN_PREFIX().search(unquoted) is not None or (
        _AWS_RUN().search(unquoted) is not None
    )


def _token_shaped(text: str) -> bool:
    """Whether ``text`` holds a token of a known shape or a bare AWS secret key."""
    tokens = _WORD_TOKEN_PREFIX().search(text) is not None and any(
        itertools.chain(
            _token_hits(text), _token_hits(text, _EXTRA_TOKEN_PATTERNS, _EXTRA_TOKEN_PREFIX)
        )
    )
    if tokens or len(text) < 40 or _AWS_SECRET_VALUE().search(text) is None:
        return tokens
    return any(_bare_aws_key_hits(text))


_WORD_TOKEN_PREFIX = _lazy(_ANY_TOKEN_PREFIX)
"""The literals of both token gates: a word holding none of them holds no token shape."""

_registered: list[str] = []
_unknown: list[str] = []
_redactor: list[Redactor] = []
"""The :class:`Redactor` of the registered values, made when :func:`redacted` first needs
it after a value is registered (not for each line of a job's output)."""


def register(values: Iterable[str]) -> None:
    """Values this process must never print, log or raise (a job's passed variables)."""
    _registered.extend(value for value in values if value)
    _redactor.clear()


def register_unknown(names: Iterable[str]) -> None:
    """Passed variables whose values this process cannot know (they are not set here), so
    that redaction cannot find them in a job's own output."""
    _unknown.extend(names)


def known_values() -> list[str]:
    """Every text :func:`redacted` removes by value: the registered values and those of
    secret-named environment variables, in each form it looks for them."""
    return _known_secrets(_registered)


OPEN_AT_MOST = 4096
"""How far back from the end of output still being written :func:`still_open` looks: more
than any token a rule finds by its form (a JWT, a session token) is long."""
_TOKEN_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.=+/~"
)
"""What the tokens found by their form are made of."""
_WORD = re.compile(r"\S+")


def still_open(text: str) -> int:
    """Where the end of ``text``, output a job is still writing, begins that a rule may
    find a secret in only once more is written: its last three words (a token, and what a
    rule needs before it, such as ``Bearer``, ``--password`` or ``curl -u``), within the
    last :data:`OPEN_AT_MOST` characters, and not inside a token that began before them,
    unless its run of token characters is longer than that again: output that holds no
    break for so long is still handed on."""
    start = max(len(text) - OPEN_AT_MOST, 0)
    words = [word.start() for word in _WORD.finditer(text, start)]
    cut = words[-3] if len(words) >= 3 else start
    run = cut
    while run > 0 and text[run - 1] in _TOKEN_CHARACTERS and cut - run < OPEN_AT_MOST:
        run -= 1
    return run if run == 0 or text[run - 1] not in _TOKEN_CHARACTERS else cut


_READ_AFTER = _lazy(r"(?i)bearer|basic")
"""What a rule reads a credential after, whatever comes before it."""
_SECRET_NAME_WORD = "|".join(_SECRET_NAME_WORDS)
_READ_ACROSS = _lazy(
    rf"['\"{{]|\blogin\b|(?<![\w./-])(?:[\w.-]*/)*(?:{_OPTION_TOOLS})(?=\s)"
    rf"|(?i:-----BEGIN|authorization|(?:{_SECRET_NAME_WORD})[A-Za-z0-9_.-]*[ \t]*[:=])"
)
"""Where a rule may begin to read a value that runs on past blanks: to the quote or brace
that closes it (a quoted password, JSON, a flow mapping), to a PEM block's end, to the
line's end (a header, ``password = value``), or, after a ``login`` or a tool a password
option is read for (``curl -u``), to the command's end."""


def apart_before(text: str) -> int:
    """How much of ``text``, the start of a line, holds nothing from which a rule may read
    a value that runs on (:data:`_READ_ACROSS`)."""
    found = _READ_ACROSS().search(text)
    return len(text) if found is None else found.start()


def apart_at(text: str, at: int) -> bool:
    """Whether a line holding ``text`` may be redacted in two parts, before ``at`` and from
    it, with what each rule finds in it whole, ``at`` being no further into the line than
    :func:`apart_before`: none of the last three words before it is one a rule reads a
    value after (a flag, a key or header ending in ``:`` or ``=``, a word that may name a
    secret, or one holding ``Bearer`` or ``Basic``), and the word after it is no flag,
    which a rule reads by the command before it (``docker login``, ``sshpass``)."""
    words = text[max(at - OPEN_AT_MOST, 0) : at].split()[-3:]
    after = text[at : at + OPEN_AT_MOST].split()[:1]
    return not any(word.startswith("-") for word in after) and not any(
        word.startswith("-")
        or word.endswith((":", "="))
        or _READ_AFTER().search(word) is not None
        or _may_name_secret(word)
        for word in words
    )


def unknown_names() -> tuple[str, ...]:
    """The names given to :func:`register_unknown`: while there is one, a job's own output
    must not be quoted where it is recorded."""
    return tuple(_unknown)


def redacted(text: str) -> str:
    """``text`` redacted, values given to :func:`register` too (for all taospec prints)."""
    if not _redactor:
        _redactor.append(Redactor(_registered))
    return _redactor[0].text(text)


def inert_pieces(pieces: Sequence[str]) -> list[bool]:
    """Of the ``pieces`` of a job's output (lines, or parts of lines), those
    :func:`redacted` would leave as they are (True), known by reading them together, and
    those it must read (False): a few scans of a block of output instead of several per
    line (:func:`_inert_each`)."""
    if not _redactor:
        _redactor.append(Redactor(_registered))
    return _inert_each(pieces, _redactor[0]._secrets)


def redacted_location(text: str) -> str:
    """A path or URI redacted as :func:`redact_location` does, values given to
    :func:`register` too: ``/exp/token=v1/run`` survives, as it does in a record."""
    return redact_location(text, _registered)


def redact(text: str, secret_values: Iterable[str] = ()) -> str:
    """Free text with secret material replaced by ``<redacted>``: the given values (of
    :data:`MIN_SECRET_LENGTH` or more), secret-named environment variables' values, and
    whatever any rule finds, whole. ``redact(redact(x)) == redact(x)``; never raises.
    Text it leaves as it is comes back as the very object given (``redact(x) is x``)."""
    return Redactor(secret_values).text(text)


def redact_location(text: str, secret_values: Iterable[str] = ()) -> str:
    """Redact a path or URI field (``results_dir``, ``image``...) by the format rules and
    the known values only, as the TAO recorder does: ``/exp/token=v1/run`` survives.
    Like :func:`redact`, text it leaves as it is comes back itself."""
    return Redactor(secret_values).location(text)


class Redactor:
    """:func:`redact` and :func:`redact_location` for one set of secret values,
    worked out once for a writer (the ledger) that redacts many fields.

    Both return the very string given when they leave it as it is, so a caller
    tells "unchanged" by identity (``is``) without comparing the text.
    """

    __slots__ = ("_secrets",)

    def __init__(self, secret_values: Iterable[str] = ()) -> None:
        self._secrets = _known_secrets(secret_values)

    def text(self, text: str) -> str:
        """:func:`redact` of ``text``."""
        if _is_inert(text, self._secrets):
            return text
        return _same_if_equal(text, _redact_fully(text, self._secrets))

    def location(self, text: str) -> str:
        """:func:`redact_location` of ``text``: what the full scan cannot change (see
        :func:`_is_inert`), its format rules and the known values cannot either."""
        if _is_inert(text, self._secrets):
            return text
        current = _redact_values(text, self._secrets)
        current = _until_stable(current, lambda value: _apply(value, _run(_FORMAT_RULES, value)))
        return _same_if_equal(text, current)

    def holds(self, text: str, spelling: Callable[[str], str]) -> bool:
        """:func:`spelled_in` for the known values."""
        return spelled_in(text, self._secrets, spelling)


def _same_if_equal(text: str, result: str) -> str:
    """``text`` itself when ``result`` reads the same, else ``result``."""
    return text if result == text else result
