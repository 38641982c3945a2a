"""OmegaConf's ``${...}`` interpolations, as TAO reads them in a spec file.

TAO reads the spec with OmegaConf, which refuses a whole file holding an interpolation left
open, and fails when it resolves one naming a key the spec lacks. Both are read here from
the text as the spec file holds it (each ``{{`` and ``}}`` of the job file one brace); what
a key is, the spec and the skill's schema say (:mod:`taospec.taoschema`). Nothing here
imports a schema, so the rules every job file passes can read it at no cost.
"""

from __future__ import annotations

import re

KEY = re.compile(r"(?<!\\)\$\{([A-Za-z_][\w-]*(?:\.[\w-]+)*)\}")
"""An interpolation of a key by its path from the spec's root (``${train.optim.lr}``,
``${dataset.classes.0}``), not escaped (``\\${...}`` is text). A resolver's (``${oc.env:X}``)
and a relative one (``${.x}``) name no key this can look up."""


def keys(text: str) -> list[str]:
    """The dotted key paths ``text``'s interpolations name, in order."""
    return KEY.findall(text) if "${" in text else []


def unclosed(text: str) -> str | None:
    """A sentence about the first interpolation ``text`` opens and never closes, or None.

    ``${`` opens one unless an odd number of backslashes stands before it; inside, each
    ``{`` opens and each ``}`` closes (a nested ``${``, a resolver's mapping). A quote or a
    backslash inside leaves the rest to OmegaConf, whose grammar reads them.
    """
    at = text.find("${")
    while at != -1:
        backslashes = len(text[:at]) - len(text[:at].rstrip("\\"))
        if backslashes % 2:
            at = text.find("${", at + 2)
            continue
        depth, end = 0, at + 1
        for end in range(at + 1, len(text)):
            char = text[end]
            if char in "'\"\\":
                return None
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth == 0:
                break
        else:
            shown = text[at:] if len(text) - at <= 40 else text[at : at + 40] + "..."
            return (
                f"{shown!r} opens an OmegaConf interpolation (${{) that never closes: TAO "
                "cannot read the spec file; close it with }, or write \\${ for the text"
            )
        at = text.find("${", end + 1)
    return None
