"""The brace grammar of job text: ``{name}`` placeholders and ``{{``/``}}`` escapes.

What a placeholder means and which are allowed is :mod:`taospec.placeholders`'
concern; this module only reads them, so that the secret lint (a lower layer)
reads job text exactly as the plan fills it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


@functools.cache
def token() -> re.Pattern[str]:
    """An escaped brace, or a placeholder: a name, or an upstream's results directory. A
    matrix target's name may hold any character its values may (all but ``,=[]``), a brace
    doubled; a ``{matrix.<key>}`` in it is filled when the matrix expands. A brace after a
    ``$`` opens no placeholder: ``${...}`` is OmegaConf's interpolation in a spec (TAO's
    ``${results_dir}``) and a shell's parameter in a script, and stays as written. Compiled
    when first read: the verbs that never read job text (``status``, ``ls``) never pay for it."""
    return re.compile(
        r"\{\{|\}\}|(?<!\$)\{(needs\.[A-Za-z0-9][A-Za-z0-9_.-]*"
        r"\[(?:[^\[\]{}]|\{\{|\}\}|\{matrix\.[A-Za-z_][A-Za-z0-9_]*\})*\]\.results_dir"
        r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_\[\]=,.-]+)*)\}"
    )


def name_of(match: re.Match[str]) -> str:
    """The name a placeholder stands for: the target it names holds each doubled brace once."""
    return match.group(1).replace("{{", "{").replace("}}", "}")


def fill(text: str, value: Callable[[str], str]) -> str:
    """``text`` with each placeholder replaced by ``value`` of its name, each escape by its
    brace: what the plan writes, for any ``value``."""

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        return value(name_of(match))

    return token().sub(replace, text)
