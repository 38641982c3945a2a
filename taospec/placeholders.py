"""``{name}`` placeholders in commands, spec values and environment values.

``{config_path}``, ``{results_dir}`` and ``{job_id}`` are filled when a plan is
rendered. ``{{`` and ``}}`` stand for literal braces; any other brace is taken
literally, so ``{"a": 1}`` needs no escaping unless it looks like a name, and a brace
right after ``$`` opens none (OmegaConf's ``${results_dir}``, a shell's ``${HOME}``). ``{needs.``
and ``{matrix.`` always start a placeholder: one that cannot be read is refused,
never left as text. So is a field whose braces pair up as written but not once each
``{{`` and ``}}`` is read as one brace (:func:`lost_brace`): the end of ``{"a": {"b": 1}}``
would lose one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from taospec.braces import fill, name_of, token
from taospec.diagnostics import closest
from taospec.job import matching
from taospec.yamlsrc import dump_yaml

JOB_PLACEHOLDERS = ("config_path", "results_dir", "job_id")
"""Every job may use these; pipeline jobs also ``needs.<target>.results_dir``."""

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
_SCRIPT_OPTION = re.compile(r"-[A-Za-z]*c[A-Za-z]*")
_PLAIN = re.compile(r"[\w@%+=:,./-]*", re.ASCII)
"""What ``shlex.quote`` leaves as it is: text every shell context reads as itself."""


def stand_in(name: str) -> str:
    """A value that is not known yet, shown as ``$NAME`` until it is."""
    return f"\x00{name}\x00"


JOB_ID = stand_in("JOB_ID")
"""Stands for the job id until the record is opened; no spec value can hold a NUL.

Any ``\\x00NAME\\x00`` is such a stand-in, shown to a reviewer as ``$NAME``.
"""
STAND_IN = re.compile("\x00([A-Za-z_][A-Za-z0-9_]*)\x00")

_MATRIX_IN_NAME = re.compile(r"\{\{|\}\}|\{(matrix\.[A-Za-z_][A-Za-z0-9_]*)\}")
_LOOKALIKE = re.compile(r"\{(?:needs|matrix)\.")
"""How a placeholder :func:`~taospec.braces.token` cannot read starts: it is refused, never
left as text."""


def names(text: str) -> list[str]:
    """The placeholder names used in ``text``, in order."""
    return [name_of(m) for m in token().finditer(text) if m.group(1)]


def unknown(text: str, known: Iterable[str]) -> list[str]:
    """Sentences about every placeholder in ``text`` that is not in ``known``, and about
    text that starts like one but is none (it would be left as it is)."""
    allowed = list(known)
    found = _lookalikes(text)
    for name in names(text):
        if name in allowed:
            continue
        if name.startswith("needs.") and name.endswith(".results_dir"):
            found.append(_unneeded(name, name[len("needs.") : -len(".results_dir")], allowed))
            continue
        guess = closest(name, allowed)
        hint = f" (did you mean {{{guess}}}?)" if guess else ""
        # a mount source of a job that needs no target takes none
        choices = (
            "known: " + ", ".join("{" + a + "}" for a in allowed)
            if allowed
            else "no placeholder is filled in here"
        )
        found.append(
            f"unknown placeholder {{{name}}}{hint}; {choices}; write {{{{ and }}}} "
            "for literal braces"
        )
    return found


def _unneeded(name: str, target: str, allowed: list[str]) -> str:
    """Why ``{needs.<target>.results_dir}`` (``name``) names no target this job needs, and
    which to write: of a matrix target, one of its expansions by its full name."""
    needed = [a[len("needs.") : -len(".results_dir")] for a in allowed if a.startswith("needs.")]
    base = target.partition("[")[0]
    of_base = [n for n in needed if n.partition("[")[0] == base]
    said = f"{{{name}}} names target {target!r}, "
    if of_base:
        listed = ", ".join(of_base)
        example = (matching(target, of_base) or of_base)[0]
        return (
            f"{said}and this job needs {listed}: name the one whose results it reads by its "
            f"full name, e.g. {{needs.{example}.results_dir}}"
        )
    example = f" (a matrix target by its full name, e.g. {base}[x=1])" if "[" not in target else ""
    return f"{said}which this job does not need; add it to needs:{example}"


def _lookalikes(text: str) -> list[str]:
    """Sentences about each ``{needs.`` or ``{matrix.`` in ``text`` that starts no placeholder."""
    read = [match.span() for match in token().finditer(text)]
    found = []
    for match in _LOOKALIKE.finditer(text):
        if any(start <= match.start() < end for start, end in read):
            continue
        head, brace, _ = text[match.start() :].partition("}")
        shown = head + brace if len(head) < 80 else head[:80] + "..."
        found.append(
            f"{shown!r} is not a placeholder taospec can read, and would be left as it "
            "is: write {needs.<target>.results_dir} with the target's full name (e.g. "
            "{needs.prep[ds=a b].results_dir}), {matrix.<key>}, or {{ for a literal brace"
        )
    return found


SHOWN = 80
"""A message shows at most this much of a word (with ``...`` where it is cut)."""


def lost_brace(words: Sequence[str]) -> tuple[int, str] | None:
    """Where a field (a command's words, or one value) loses a brace it means, and a sentence
    about it: the index of the word and its first escape that pairs with none (None when the
    field keeps its braces).

    A field whose braces pair up as written (as many ``{`` as ``}``, placeholders aside) but
    not once each ``{{`` and ``}}`` is read as one brace holds a nested mapping or a brace
    expansion (``{"a": {"b": 1}}``, ``{{a,b},c}``), not escapes. Balanced escapes
    (``{{.Id}}``) and the escapes of a field that does not pair up (``}}}}`` for two braces,
    ``{{job_id}`` for the text ``{job_id}``) keep their meaning. Read the field as the user
    wrote it, before a matrix value goes in with its braces doubled.
    """
    written = shown = 0  # '{' less '}', as written and as the plan reads them
    opened: list[tuple[int, re.Match[str]]] = []  # the '{{' no '}}' closed yet
    stray: tuple[int, re.Match[str]] | None = None  # the first '}}' that closes no '{{'
    for index, word in enumerate(words):
        for match in token().finditer(word):
            if match[0] == "{{":
                opened.append((index, match))
            elif match[0] == "}}" and opened:
                opened.pop()
            elif match[0] == "}}" and stray is None:
                stray = (index, match)
        for lone in token().split(word)[:: 1 + token().groups]:  # the text between tokens
            written += lone.count("{") - lone.count("}")
            shown += lone.count("{") - lone.count("}")
        escapes = [m[0] for m in token().finditer(word) if m[0] in ("{{", "}}")]
        written += 2 * (escapes.count("{{") - escapes.count("}}"))
        shown += escapes.count("{{") - escapes.count("}}")
    if written or not shown:
        return None
    # written == 0 leaves shown == (number of '}}') - (number of '{{'): that many pair with none
    found = stray if shown > 0 else opened[0]
    assert found is not None
    index, match = found
    word, brace = words[index], match[0][0]
    text, runs = word, _unescaped(word)
    if len(word) > SHOWN and brace == "}":  # the text up to the escape
        text, runs = word[: match.end()], _unescaped(word[: match.end()])
        text, runs = "..." + text[3 - SHOWN :], "..." + runs[3 - SHOWN :]
    elif len(word) > SHOWN:  # the text from the escape
        text, runs = word[match.start() :], _unescaped(word[match.start() :])
        text, runs = text[: SHOWN - 3] + "...", runs[: SHOWN - 3] + "..."
    return index, (
        f"{text!r} runs as {runs!r}, its braces no longer paired: '{brace * 2}' stands for one "
        f"literal brace; write '{brace * 4}' for two (a single '{brace}' is kept as written)"
    )


def _unescaped(text: str) -> str:
    """``text`` with each ``{{`` and ``}}`` read as one brace, its placeholders as written."""
    return token().sub(lambda m: m[0][0] if m[0] in ("{{", "}}") else m[0], text)


def expand(text: str, values: Mapping[str, str]) -> str:
    """Fill every placeholder in ``text``. A name missing from ``values`` is a bug."""
    return fill(text, values.__getitem__)


def escape(text: str) -> str:
    """``text`` written so that :func:`expand` gives it back as it is: each brace doubled."""
    return text.replace("{", "{{").replace("}", "}}")


def expand_known(text: str, values: Mapping[str, str]) -> str:
    """Fill only the placeholders named in ``values``; leave escapes and others as they are."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        if name and name.startswith("needs."):  # a matrix value may name the upstream
            return _MATRIX_IN_NAME.sub(fill, match.group(0))
        return match.group(0)

    return token().sub(fill, text)


def script_words(words: Sequence[str]) -> list[int]:
    """Which of a command's words a shell runs as a script: the one after ``sh -c``.

    ``-c`` may come in a cluster (``bash -lc``, ``sh -ec``); the shell may be
    named by its path, and come after a wrapper such as ``env`` or ``timeout``.
    """
    found = []
    shell = False
    for index, word in enumerate(words[:-1]):
        if shell and _SCRIPT_OPTION.fullmatch(word):
            found.append(index + 1)
            shell = False
        elif word.rsplit("/", 1)[-1] in SHELLS:
            shell = True
    return found


def in_scripts(
    words: Sequence[str], values: Mapping[str, str], shown: Mapping[str, str] | None = None
) -> list[str]:
    """Sentences about each value in ``values`` a script word of ``words`` would read as syntax.

    A placeholder in ``sh -c '...'`` is filled into the script's text, where a
    quote, a space, ``$`` or a glob character of its value would be read by the
    shell, not passed on. Only values that ``shlex.quote`` leaves as they are
    can stand there; any other goes in as an argument, which no shell reads.
    ``shown`` gives a value as a message should show it (default: as it is).
    """
    found = []
    for index in script_words(words):
        shell = next(w for w in reversed(words[:index]) if w.rsplit("/", 1)[-1] in SHELLS)
        for name in dict.fromkeys(names(words[index])):
            value = values.get(name)
            if value is not None and _PLAIN.fullmatch(value) is None:
                found.append(
                    f"{{{name}}} is {(shown or values)[name]!r} and stands in the script `{shell} "
                    f"{words[index - 1]}` runs, where the shell would read its characters as "
                    f"syntax; pass it as an argument instead: {shell} -c '... \"$1\"' sh "
                    f"{{{name}}}"
                )
    return found


def spec_file_text(spec: Mapping[str, Any], expand: Callable[[str], str]) -> str:
    """The spec file a plan writes: ``spec`` as YAML, each string value filled by ``expand``.

    A stand-in's NUL makes YAML double-quote its string and write the NUL as the escape
    ``\\0``; the stand-in is put back, so that the value replacing it lands in those quotes.
    """
    return _ESCAPED_STAND_IN.sub(_unescape, dump_yaml(_thaw(spec, expand)))


_ESCAPED_STAND_IN = re.compile(r"\\\\|\\0([A-Za-z_][A-Za-z0-9_]*)\\0")
"""A stand-in as a double-quoted YAML string writes it (an escaped backslash is read first,
so that ``\\\\0`` stays a backslash and a 0)."""


def _unescape(match: re.Match[str]) -> str:
    return stand_in(match[1]) if match[1] else match[0]


def _thaw(value: Any, expand: Callable[[str], str]) -> Any:
    """``value`` as plain dicts and lists, each string filled by ``expand``."""
    if isinstance(value, Mapping):
        return {k: _thaw(v, expand) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_thaw(v, expand) for v in value]
    if isinstance(value, str):
        return expand(value)
    return value
