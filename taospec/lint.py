"""The secret lint: find credential material written inline, and redact it.

A job spec, a rendered command line or a log line must never carry a secret's
value. Secrets travel by name (``docker run -e NGC_KEY``) or through stdin
(``printf %s "$NGC_KEY" | docker login --password-stdin``). This module finds
the ways a value leaks in anyway and reports each as a :class:`Finding` that
names the variable or flag, never the value, so the report itself is safe to
print and to store.

Two families of rules share one scanner:

* shell-word rules read the text as shell words (quotes, ``$VAR``
  references, ``$(...)``, operators and backslash continuations understood):
  ``NAME=literal`` assignments, ``--password VALUE`` style flags, ``-p VALUE``
  on a ``login`` command, and the same rules inside ``bash -c '...'`` scripts;
* pattern rules look at the raw characters: well-known token prefixes,
  passwords in URL userinfo, signed-URL credential parameters and JSON
  credential keys.

Every rule yields a hit with the span of the offending value, so :func:`lint_text`
and :func:`redact` can never disagree about what a secret is.

All functions are pure and use only the standard library.
"""

from __future__ import annotations

import bisect
import itertools
import re
import shlex
from collections.abc import Iterable, Iterator, Sequence

from taospec.values import Value

PLACEHOLDER = "<redacted>"
"""What :func:`redact` writes in place of a secret value."""

MIN_SECRET_LENGTH = 4
"""Known secret values shorter than this are too likely to be ordinary text."""

_SINGLE_KEYWORDS = frozenset({"SECRET", "PASSWORD", "PASSWD", "APIKEY", "TOKEN", "CREDENTIAL"})
_KEYWORD_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("NGC", "KEY")})
_LOCATION_PARTS = frozenset({"FILE", "PATH", "DIR"})
_SECRET_FLAGS = frozenset(
    {
        "--password",
        "--passwd",
        "--token",
        "--api-key",
        "--apikey",
        "--access-token",
        "--auth-token",
    }
)
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash"})
_MAX_NESTING = 3
_MAX_PASSES = 8

_WORD_BREAKS = frozenset(" \t\r\n|&;()")
_OPERATORS = frozenset("|&;()\n")
_PLAIN = re.compile(r"[^ \t\r\n|&;()\\'\"$`]+")
_ASSIGNMENT = re.compile(
    r"(?P<prefix>--?[A-Za-z][A-Za-z0-9-]*=|-e(?=[A-Za-z_]))?"
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)",
    re.DOTALL,
)
_SHELL_C_OPTION = re.compile(r"-[A-Za-z]*c[A-Za-z]*")
_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
_DEFAULT = re.compile(r"[^:=+?#%/^,-]*:?[-=+](?P<default>.*)", re.DOTALL)
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)

# A distinctive prefix only needs to start a word; "sk-" must also not follow "_" or "-".
_WORD_START = r"(?<![A-Za-z0-9])"
_STANDS_ALONE = r"(?<![A-Za-z0-9_-])"
_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nvapi- token", re.compile(_WORD_START + r"nvapi-[A-Za-z0-9_-]{16,}")),
    ("github_pat_ token", re.compile(_WORD_START + r"github_pat_[A-Za-z0-9_]{16,}")),
    ("ghp_ token", re.compile(_WORD_START + r"ghp_[A-Za-z0-9]{16,}")),
    # Real Hugging Face tokens mix cases; an all-lowercase hf_ word is an identifier.
    ("hf_ token", re.compile(_WORD_START + r"hf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{16,}")),
    ("AKIA key", re.compile(r"(?<![A-Za-z0-9])AKIA[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ("xox?- token", re.compile(_WORD_START + r"xox[a-z]-[A-Za-z0-9-]{10,}")),
    # sk- keys carry a long random run with a digit; host names like sk-east-node-01 do not.
    (
        "sk- token",
        re.compile(
            _STANDS_ALONE
            + r"sk-(?=[A-Za-z0-9_-]*?[A-Za-z0-9]{16})(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{16,}"
        ),
    ),
)
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s/?#@:'\"]+:"
    r"(?P<password>[^\s/?#@'\"]*)@"
)
_SIGNED_PARAMS = {
    name.lower(): name for name in ("X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token")
}
_SIGNED_URL = re.compile(
    r"(?<![A-Za-z0-9-])(?P<param>X-Amz-(?:Signature|Credential|Security-Token))="
    r"(?P<value>[^&\s'\"#\\]+)",
    re.IGNORECASE,
)
_JSON_PAIR = re.compile(r"\"(?P<key>[A-Za-z0-9_-]{1,64})\"\s*:\s*\"(?P<value>(?:[^\"\\\n]|\\.)*)\"")
_INERT = re.compile(r"[A-Za-z0-9_./:,+%~-]*")  # text redact need not scan fully: _is_inert

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
        'JSON key "{s}" holds an inline secret value; load it from an environment '
        "variable or a secret file"
    ),
}


class Finding(Value):
    """One inline secret: where it is, which rule caught it, and what it is called.

    ``subject`` is a variable name, a flag or a token kind; it never holds the
    secret's value, so a finding is always safe to print.
    """

    __slots__ = ("line", "rule", "subject")
    line: int
    rule: str
    subject: str

    def __init__(self, line: int, rule: str, subject: str) -> None:
        self._assign(line, rule, subject)

    def __str__(self) -> str:
        template = _MESSAGES.get(self.rule)
        if template is None:
            return f"line {self.line}: {self.subject}: {self.rule}"
        return f"line {self.line}: {template.format(s=self.subject)}"


class _Word(Value):
    """A shell word: its text with quotes removed, and its span in the scanned string.

    In ``text`` a ``$``, a backtick or a backslash that the shell takes
    literally (quoted or escaped) is written with a backslash in front, so
    ``'$HOME'`` reads ``\\$HOME`` and is not mistaken for a reference.
    """

    __slots__ = ("text", "start", "end")  # noqa: RUF023 - the order they are given in
    text: str
    start: int
    end: int

    def __init__(self, text: str, start: int, end: int) -> None:
        self._assign(text, start, end)


class _Hit(Value):
    """One rule match: what to report, and which span :func:`redact` rewrites to what."""

    __slots__ = ("rule", "subject", "start", "end", "replacement")  # noqa: RUF023 - as given
    rule: str
    subject: str
    start: int
    end: int
    replacement: str

    def __init__(self, rule: str, subject: str, start: int, end: int, replacement: str) -> None:
        self._assign(rule, subject, start, end, replacement)


# -- names and values ---------------------------------------------------------


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or JSON key name says it holds a secret.

    The name is split into word parts on ``_`` and ``-``; it is a secret name
    when a part is SECRET, PASSWORD, PASSWD, APIKEY, TOKEN or CREDENTIAL, or two
    adjacent parts read API KEY, ACCESS KEY or NGC KEY (case-insensitive).
    ``TOKENIZER_PATH``, ``MONKEY`` and ``KEYBOARD`` are not secret names. A
    name whose last part is FILE, PATH or DIR (``NGC_KEY_FILE``) says where a
    secret lives, which is the sanctioned way to pass one, so it is not a
    secret name either.
    """
    parts = [part for part in re.split(r"[_-]+", name.upper()) if part]
    if not parts or parts[-1] in _LOCATION_PARTS:
        return False
    if any(part in _SINGLE_KEYWORDS for part in parts):
        return True
    return any(pair in _KEYWORD_PAIRS for pair in itertools.pairwise(parts))


def looks_like_secret_value(value: str) -> bool:
    """Whether a value carries credential material whatever name it is stored under.

    True for well-known token prefixes (``nvapi-``, ``hf_``, ``ghp_``,
    ``github_pat_``, ``AKIA``, ``xox?-``, ``sk-``), a URL with a password in
    its userinfo, and a signed URL's credential parameters.
    """
    return any(True for _ in _value_pattern_hits(value))


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
    match = _PARAMETER.match(value, index + 1)
    if match is not None:
        return match.end(), False
    return index + 1, True


def _default_carries_literal(inner: str, depth: int) -> bool:
    """Judge ``${NAME:-default}`` (and ``-``, ``=``, ``:=``, ``+``, ``:+``) by its default."""
    match = _DEFAULT.fullmatch(inner)
    if match is None:
        return False
    default = match["default"]
    if len(default) >= 2 and default[0] == default[-1] and default[0] in "'\"":
        body = default[1:-1]
        default = _protect(body) if default[0] == "'" else body
    return _carries_literal(default, depth + 1)


# -- reading shell words --------------------------------------------------------


def _protect(text: str) -> str:
    """Mark ``$``, backticks and backslashes as literal by escaping them."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")


def _unprotect(text: str) -> str:
    """Undo :func:`_protect`: the characters a nested shell would read."""
    return _UNESCAPE.sub(r"\1", text)


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


# -- shell-word rules ------------------------------------------------------------


def _assignment_hits(word: _Word) -> Iterator[_Hit]:
    """``NAME=literal`` for a secret NAME, bare or after ``export``, ``-e``, ``--env=``.

    The value is judged by :func:`_carries_literal`, so ``NAME=$VAR``,
    ``NAME=${VAR}`` and ``NAME=`` pass while ``NAME=${VAR:-literal}`` does not.
    """
    match = _ASSIGNMENT.fullmatch(word.text)
    if match is None or not is_secret_name(match["name"]):
        return
    if _carries_literal(match["value"]):
        kept = f"{match['prefix'] or ''}{match['name']}="
        yield _Hit(
            "inline-secret-assignment",
            match["name"],
            word.start,
            word.end,
            kept + PLACEHOLDER,
        )


def _is_flag_value(text: str) -> bool:
    """Whether the word after a flag is a literal value (not another long option)."""
    return not text.startswith("--") and _carries_literal(text)


def _flag_hits(words: Sequence[_Word], index: int) -> Iterator[_Hit]:
    """``--password``, ``--token``, ``--api-key`` (and kin) given a literal value.

    Both ``--token VALUE`` and ``--token=VALUE`` count; ``--password-stdin``
    and a ``$VAR`` value pass.
    """
    text = words[index].text
    if text in _SECRET_FLAGS:
        if index + 1 < len(words) and _is_flag_value(words[index + 1].text):
            value = words[index + 1]
            yield _Hit("secret-flag", text, value.start, value.end, PLACEHOLDER)
        return
    flag, equals, value_text = text.partition("=")
    if equals and flag in _SECRET_FLAGS and _carries_literal(value_text):
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
            yield _Hit("login-password-flag", "-p", value.start, value.end, PLACEHOLDER)
    elif _carries_literal(text[2:]):
        word = words[index]
        yield _Hit("login-password-flag", "-p", word.start, word.end, "-p" + PLACEHOLDER)


def _is_shell_script(words: Sequence[_Word], index: int) -> bool:
    """Whether the word at ``index`` is the script of ``sh -c``, ``bash -lc`` and the like."""
    if index < 2 or _SHELL_C_OPTION.fullmatch(words[index - 1].text) is None:
        return False
    return any(word.text.rsplit("/", 1)[-1] in _SHELLS for word in words[: index - 1])


def _script_hits(word: _Word, depth: int) -> Iterator[_Hit]:
    """The shell-word rules applied inside a ``bash -c`` script, reported on its word.

    Redaction rewrites the whole script word, re-quoted with :func:`shlex.quote`.
    """
    script = _unprotect(word.text)
    inner = list(_shell_hits(script, depth + 1))
    if not inner:
        return
    replacement = shlex.quote(_apply(script, inner))
    for hit in inner:
        yield _Hit(hit.rule, hit.subject, word.start, word.end, replacement)


def _command_hits(words: Sequence[_Word], depth: int) -> Iterator[_Hit]:
    """Every shell-word rule over one simple command."""
    for index, word in enumerate(words):
        yield from _assignment_hits(word)
        yield from _flag_hits(words, index)
        yield from _login_hits(words, index)
        if depth < _MAX_NESTING and _is_shell_script(words, index):
            yield from _script_hits(word, depth)


def _shell_hits(text: str, depth: int = 0) -> Iterator[_Hit]:
    """The shell-word rules over every simple command in ``text``."""
    for words in _commands(text):
        yield from _command_hits(words, depth)


# -- pattern rules ----------------------------------------------------------------


def _token_hits(text: str) -> Iterator[_Hit]:
    """Well-known token prefixes anywhere: these values are secrets whatever their name."""
    for subject, pattern in _TOKEN_PATTERNS:
        for match in pattern.finditer(text):
            yield _Hit("token-prefix", subject, match.start(), match.end(), PLACEHOLDER)


def _url_hits(text: str) -> Iterator[_Hit]:
    """``scheme://user:password@host`` with a literal password (``$PW`` passes)."""
    for match in _URL_USERINFO.finditer(text):
        if _carries_literal(match["password"]):
            start, end = match.span("password")
            yield _Hit("url-userinfo", "URL password", start, end, PLACEHOLDER)


def _signed_url_hits(text: str) -> Iterator[_Hit]:
    """A pre-signed URL's ``X-Amz-Signature``/``-Credential``/``-Security-Token`` value."""
    for match in _SIGNED_URL.finditer(text):
        if _carries_literal(match["value"]):
            start, end = match.span("value")
            subject = _SIGNED_PARAMS[match["param"].lower()]
            yield _Hit("signed-url", subject, start, end, PLACEHOLDER)


def _json_hits(text: str) -> Iterator[_Hit]:
    """A JSON key with a secret name (``"password"``, ``"api_key"``...) and a string value."""
    for match in _JSON_PAIR.finditer(text):
        if is_secret_name(match["key"]) and _carries_literal(match["value"]):
            start, end = match.span("value")
            yield _Hit("json-credential", match["key"], start, end, PLACEHOLDER)


def _value_pattern_hits(text: str) -> Iterator[_Hit]:
    """The pattern rules that judge a value on its own, without a key."""
    yield from _token_hits(text)
    yield from _url_hits(text)
    yield from _signed_url_hits(text)


def _pattern_hits(text: str) -> Iterator[_Hit]:
    """Every pattern rule over raw text."""
    yield from _value_pattern_hits(text)
    yield from _json_hits(text)


def _chunk_hits(chunk: str) -> list[_Hit]:
    """Every rule over one logical line."""
    return [*_shell_hits(chunk), *_pattern_hits(chunk)]


# -- lint ---------------------------------------------------------------------------


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Group physical lines joined by a trailing backslash, with the first line's number.

    Joining the chunks with newlines gives back ``text`` exactly.
    """
    chunks: list[tuple[int, str]] = []
    group: list[str] = []
    first = 1
    for number, line in enumerate(text.split("\n"), start=1):
        if not group:
            first = number
        group.append(line)
        stripped = line.rstrip("\r")
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 0:
            chunks.append((first, "\n".join(group)))
            group = []
    if group:
        chunks.append((first, "\n".join(group)))
    return chunks


def _findings(line: int, hits: Iterable[_Hit]) -> list[Finding]:
    """One finding per distinct (rule, subject), in the order first seen."""
    seen: dict[tuple[str, str], None] = {}
    for hit in hits:
        seen.setdefault((hit.rule, hit.subject), None)
    return [Finding(line, rule, subject) for rule, subject in seen]


def lint_text(text: str) -> list[Finding]:
    """Find inline secrets in a command line or script.

    Lines continued with a trailing backslash are joined first; a finding on
    a joined line reports its first physical line.
    """
    findings: list[Finding] = []
    for line, chunk in _logical_lines(text):
        findings.extend(_findings(line, _chunk_hits(chunk)))
    return findings


def lint_argv(argv: Sequence[str]) -> list[Finding]:
    """Find inline secrets in an argument list, each element judged as one shell word.

    ``-e NAME=literal`` is flagged and ``-e NAME`` passes; ``--password``
    followed by a value or ``--password=x`` is flagged; ``-p X`` is flagged only
    after ``login``; token prefixes are flagged anywhere. Findings report line 1.
    """
    words = [_Word(text, index, index) for index, text in enumerate(argv)]
    hits: list[_Hit] = list(_command_hits(words, 0))
    for text in argv:
        hits.extend(_pattern_hits(text))
    return _findings(1, hits)


# -- redact -------------------------------------------------------------------------


def _apply(text: str, hits: Iterable[_Hit]) -> str:
    """Rewrite each hit's span; where spans overlap the earliest (then longest) wins."""
    parts: list[str] = []
    position = 0
    for hit in sorted(hits, key=lambda hit: (hit.start, -hit.end)):
        if hit.start < position:
            continue
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
        text,
        (_Hit("secret-value", "", start, end, PLACEHOLDER) for start, end in _covered_runs(spans)),
    )


def _redact_pass(text: str, secrets: Sequence[str]) -> str:
    """One pass of redaction: known values, then every rule on each logical line."""
    text = _redact_values(text, secrets)
    return "\n".join(_apply(chunk, _chunk_hits(chunk)) for _, chunk in _logical_lines(text))


def _is_inert(text: str, secrets: Sequence[str]) -> bool:
    """Whether redacting ``text`` cannot change it, known without the full scan.

    Text made only of ASCII letters, digits and ``_ . / : , + % ~ -`` is a
    single plain shell word: it has no quote, ``$``, backtick, backslash,
    space, newline, operator, ``=``, ``@`` or ``"``, so no assignment, flag
    value, ``login -p``, ``sh -c`` script, URL password, signed-URL parameter
    or JSON pair can be read in it. Only a token or a known value could be
    redacted there, and both are looked for. Ids, paths, image names and
    times are such text, and a writer redacts many of them.

    A new rule must keep this true or narrow the characters;
    tests/test_redact_inert.py holds it against the full scan.
    """
    return (
        _INERT.fullmatch(text) is not None
        and not any(pattern.search(text) for _, pattern in _TOKEN_PATTERNS)
        and not any(value in text for value in secrets)
    )


def redact(text: str, secret_values: Iterable[str] = ()) -> str:
    """Return ``text`` with secret material replaced by ``<redacted>``.

    Every occurrence of each given secret value (at least
    :data:`MIN_SECRET_LENGTH` characters) is replaced, and so is every value
    the lint rules find: ``NAME=<redacted>``, ``--password <redacted>``,
    ``user:<redacted>@host``, ``X-Amz-Signature=<redacted>``,
    ``"password": "<redacted>"``, and token-prefixed strings whole.

    Passes repeat until nothing changes, so ``redact(redact(x)) == redact(x)``.
    Outside the placeholders no given secret value survives. Never raises.
    """
    secrets = sorted({value for value in secret_values if len(value) >= MIN_SECRET_LENGTH})
    if _is_inert(text, secrets):
        return text
    return _redact_fully(text, secrets)


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
    userinfo, pre-signed URL credentials, well-known token prefixes, and the
    given secret values. A path segment such as ``/exp/token=v1/run`` is a
    name, not an assignment, and survives.
    """
    secrets = sorted({value for value in secret_values if len(value) >= MIN_SECRET_LENGTH})
    current = _redact_values(text, secrets)
    for _ in range(_MAX_PASSES):
        following = _apply(current, list(_value_pattern_hits(current)))
        if following == current:
            break
        current = following
    return current
