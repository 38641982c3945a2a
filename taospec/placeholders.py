"""``{name}`` placeholders in commands, spec values and environment values.

``{config_path}``, ``{results_dir}`` and ``{job_id}`` are filled when a plan is
rendered. ``{{`` and ``}}`` stand for literal braces; any other brace is taken
literally, so ``{"a": 1}`` needs no escaping unless it looks like a name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from taospec.diagnostics import closest

JOB_PLACEHOLDERS = ("config_path", "results_dir", "job_id")
"""Every job may use these; pipeline jobs also ``needs.<target>.results_dir``."""

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_\[\]=,.-]+)*)\}")


def names(text: str) -> list[str]:
    """The placeholder names used in ``text``, in order."""
    return [m.group(1) for m in _TOKEN.finditer(text) if m.group(1)]


def unknown(text: str, known: Iterable[str]) -> list[str]:
    """Sentences about every placeholder in ``text`` that is not in ``known``."""
    allowed = list(known)
    found = []
    for name in names(text):
        if name in allowed:
            continue
        if name.startswith("needs.") and name.endswith(".results_dir"):
            target = name[len("needs.") : -len(".results_dir")]
            found.append(
                f"{{{name}}} refers to target {target!r}, which this job does not need; "
                f"add it to needs: (a matrix target by its full name, e.g. {target}[x=1])"
            )
            continue
        guess = closest(name, allowed)
        hint = f" (did you mean {{{guess}}}?)" if guess else ""
        choices = ", ".join("{" + a + "}" for a in allowed)
        found.append(
            f"unknown placeholder {{{name}}}{hint}; known: {choices}; write {{{{ and }}}} "
            "for literal braces"
        )
    return found


def expand(text: str, values: Mapping[str, str]) -> str:
    """Fill every placeholder in ``text``. A name missing from ``values`` is a bug."""

    def fill(match: re.Match[str]) -> str:
        text = match.group(0)
        if text in ("{{", "}}"):
            return text[0]
        return values[match.group(1)]

    return _TOKEN.sub(fill, text)


def expand_known(text: str, values: Mapping[str, str]) -> str:
    """Fill only the placeholders named in ``values``; leave escapes and others as they are."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return values[name] if name in values else match.group(0)

    return _TOKEN.sub(fill, text)
