"""Where the time of one run goes, in one line, for a figure that missed its target.

The run is repeated once under :mod:`cProfile` (``python -m cProfile -o FILE
SCRIPT ARG...``) and summarised: the whole run, the time spent importing, the
taospec functions that take the most time (leaving out the entry points that
contain everything), and the functions anywhere with the most time of their own.
"""

from __future__ import annotations

import pstats
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from measure import run_once

Key = tuple[str, int, str]
IMPORT = "_find_and_load"
WRAPPER_SHARE = 0.8


def profile_script(
    script: Sequence[str],
    out: Path,
    *,
    env: Mapping[str, str],
    cwd: Path,
    expect: Sequence[int] = (0, 1),
) -> str:
    """Run ``python -m cProfile -o OUT SCRIPT...`` once and summarise it."""
    run_once(
        [sys.executable, "-m", "cProfile", "-o", str(out), *script],
        env=env,
        cwd=cwd,
        expect=expect,
    )
    return summarise(pstats.Stats(str(out)))


def _label(key: Key) -> str:
    file, line, name = key
    path = Path(file)
    if "taospec" in path.parts:
        module = ".".join(path.parts[path.parts.index("taospec") :]).removesuffix(".py")
        return f"{module}.{name}"
    if file.startswith("<") or file == "~":
        return name.strip("<>")
    return f"{path.stem}:{line}({name})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def summarise(stats: pstats.Stats, *, count: int = 4) -> str:
    """``total 91 ms; imports 52 ms; taospec: a 20 ms, b 9 ms; own time: c 6 ms, ...``."""
    table: Mapping[Key, tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in table.values())
    imports = sum(cum for key, (_, _, _, cum, _) in table.items() if key[2] == IMPORT)
    ours = sorted(
        (
            (cum, key)
            for key, (_, _, _, cum, _) in table.items()
            if "/taospec/" in key[0] and cum < WRAPPER_SHARE * total
        ),
        reverse=True,
    )[:count]
    own = sorted(((tt, key) for key, (_, _, tt, _, _) in table.items()), reverse=True)[:count]
    parts = [f"total {_ms(total)}", f"imports {_ms(imports)}"]
    if ours:
        parts.append("taospec: " + ", ".join(f"{_label(k)} {_ms(t)}" for t, k in ours))
    parts.append("own time: " + ", ".join(f"{_label(k)} {_ms(t)}" for t, k in own))
    return "; ".join(parts)
