"""Problems found in a user's file, and the error that carries them.

A :class:`Problem` points at one place: file, line, column and the JSON path
of the value. :class:`SpecError` collects every problem in a file so that the
user sees them all at once, sorted by position, in the form editors jump to:
``jobs/train.yaml:12:5: $.gpus[1]: 'two' is not an integer``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from taospec.errors import InvalidInput

JsonPath = tuple[str | int, ...]


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` was most likely meant to be, for a "did you mean" hint."""
    import difflib  # only a mistake pays for it

    guess = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return guess[0] if guess else None


def format_path(path: JsonPath) -> str:
    """Render a path the way JSONPath does: ``$.env.pass[0]``, ``$['a.b']``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += "[" + repr(part) + "]"
    return out


def shown_file(name: str) -> str:
    """How a message line names the file ``name``: as it is, unless it holds a character
    that does not show as itself (a newline would split the line in two, an escape sequence
    would drive the terminal); then as a shell's ``$'...'`` quotes it (``$'a\\nb.yaml'``),
    which a shell reads back as the very name. A byte that is not UTF-8 (held by Python as a
    lone surrogate) is written as that byte, ``\\xff``."""
    if name.isprintable():
        return name
    return "$'" + "".join(_shell_escape(c) for c in name) + "'"


_SHELL_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _shell_escape(char: str) -> str:
    if char in _SHELL_ESCAPES:
        return _SHELL_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x80 or 0xDC80 <= code <= 0xDCFF:  # a control, or a byte os.fsdecode kept
        return f"\\x{code & 0xFF:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """One thing wrong with a file, at one place; problems sort by place, then path."""

    line: int
    column: int
    path: JsonPath
    message: str
    file: str = ""

    def __post_init__(self) -> None:
        # A message may quote the value it refuses; whatever prints it, no secret goes out.
        from taospec.lint import redacted  # only a mistake pays for it

        object.__setattr__(self, "message", redacted(self.message))

    def __str__(self) -> str:
        """The line editors jump to, each part redacted as what it is: the file as a path,
        the path and the message as text. Redacting the whole line instead would take
        ``$.spec.Authorization: holds ...`` for a header and cut the message."""
        from taospec.lint import redacted, redacted_location  # only a mistake pays for it

        where = f"{shown_file(redacted_location(self.file))}:{self.line}:{self.column}"
        # each key is redacted before repr() escapes it: "w\nnvapi-..." shown as 'w\\nnvapi-...'
        # puts the escape's letter against the token, where no rule sees a token start
        path = "$"
        for part in self.path:
            hidden = redacted(part) if isinstance(part, str) else part
            if hidden is part or not isinstance(part, str):
                path += format_path((part,))[1:]
            else:  # in the form the key itself has: $.<redacted>, ['w\\n<redacted>']
                path += f".{hidden}" if part.isidentifier() else f"[{hidden!r}]"
        return f"{where}: {redacted(path)}: {redacted(self.message)}"


class SpecError(InvalidInput):
    """A file that cannot be used, with every problem found in it."""

    redacted_in_parts = True  # each problem's line is (see Problem.__str__)

    def __init__(self, problems: Sequence[Problem], *, outcome: str = "nothing was run") -> None:
        self.problems = tuple(
            sorted(unique(problems), key=lambda p: (p.file, p.line, p.column, p.message))
        )
        self.outcome = outcome
        super().__init__("\n".join(str(p) for p in self.problems))

    def report(self) -> str:
        """Every problem on its own line, then how many there were and ``outcome``: what the
        verb did not do for them."""
        count = len(self.problems)
        return f"{self}\ntaospec: {count} problem{'s' if count > 1 else ''}; {self.outcome}"

    @classmethod
    def single(cls, file: str, message: str, line: int = 1, column: int = 1) -> SpecError:
        """An error about the whole file (syntax, size, encoding)."""
        return cls([Problem(line, column, (), message, file)])


def unique(problems: Iterable[Problem]) -> list[Problem]:
    """Each place and message once (matrix expansions and schema branches repeat them)."""
    seen: set[tuple[str, int, int, str]] = set()
    out = []
    for problem in problems:
        key = (problem.file, problem.line, problem.column, problem.message)
        if key not in seen:
            seen.add(key)
            out.append(problem)
    return out


def raise_if_any(problems: Iterable[Problem]) -> None:
    """Raise one :class:`SpecError` holding all ``problems``, if there are any."""
    found = list(problems)
    if found:
        raise SpecError(found)
