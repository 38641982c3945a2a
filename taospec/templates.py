"""The Jinja environment that turns step templates into argument lists.

Every ``{{ value }}`` in a template is shell-quoted by ``finalize`` (see
:func:`quote`) and every missing name is an error (``StrictUndefined``). A
macro renders one command line; :func:`argv` splits it back with POSIX rules,
which undo ``shlex.quote`` exactly, so the argument list holds each value
untouched. The lines templates render use three forms only (bare words,
single quotes, and double quotes with no backslash inside); :func:`argv`
reads those with two regular expressions and hands anything else to
``shlex.split``, which reads them the same but a character at a time (a test
holds the two to the same answer for any text).

Jinja is imported when a template is first needed. Each template is found and
compiled once: within a process the environment keeps it and does not ask its
file again whether it changed (a run renders every target from the same
templates), and across processes Jinja's bytecode cache keeps the compiled
code under ``$XDG_CACHE_HOME/taospec/jinja``, keyed by the template's name and
a checksum of its source, so an edited template is compiled afresh.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taospec.placeholders import JOB_ID

if TYPE_CHECKING:  # the library itself is imported where it is first used
    import jinja2


class Shell(str):
    """Text that is already shell syntax and must not be quoted again."""

    __slots__ = ()


def quote(text: str) -> str:
    """``text`` as one shell word; the plan's placeholder id stays bare between quoted pieces.

    A real id is made of ``[A-Za-z0-9._-]``, which no shell treats specially,
    so :meth:`~taospec.plan.Plan.with_job_id` can fill it in later.
    """
    if JOB_ID not in text:
        return shlex.quote(text)
    return JOB_ID.join(shlex.quote(part) if part else "" for part in text.split(JOB_ID))


def _finalize(value: object) -> str:
    if isinstance(value, Shell):
        return str(value)
    return quote(str(value))


@cache
def environment() -> jinja2.Environment:
    """The one template environment; templates compile once."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("taospec", "templates"),
        bytecode_cache=_bytecode_cache(),
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        auto_reload=False,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Jinja's own cache of compiled templates, in a private folder under ``$XDG_CACHE_HOME``.

    It holds Jinja's compiled code keyed by each template's source, never an
    answer of taospec's; it is skipped when the folder cannot be made private.
    """
    import jinja2

    base = os.environ.get("XDG_CACHE_HOME", "")
    folder = (
        Path(base if Path(base).is_absolute() else Path.home() / ".cache") / "taospec" / "jinja"
    )
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder))


def module(name: str, values: Mapping[str, Any]) -> Any:
    """The macros of ``templates/<name>.j2`` bound to ``values``."""
    return environment().get_template(f"{name}.j2").make_module(dict(values))


_WORD = re.compile(r"(?:[^ \t\r\n'\"\\]+|'[^']*'|\"[^\"\\]*\")+")
"""One shell word made of bare text, single-quoted text and double-quoted text without ``\\``."""
_QUOTED = re.compile(r"'([^']*)'|\"([^\"\\]*)\"")


def _unquoted(match: re.Match[str]) -> str:
    single = match.group(1)
    return match.group(2) if single is None else single


def argv(rendered: str) -> tuple[str, ...]:
    """The argument list a rendered command line stands for (``shlex.split``'s answer)."""
    text = str(rendered)
    words = _WORD.findall(text)
    if _WORD.sub("", text).strip(" \t\r\n"):  # a backslash or a lone quote
        return tuple(shlex.split(text))
    return tuple(_QUOTED.sub(_unquoted, word) for word in words)
