"""Where the time of one run goes, in one line, for a figure that missed its target.

The run is repeated once under :mod:`cProfile` (``python -m cProfile -o FILE
SCRIPT ARG...``) and once with ``-X importtime``, and summarised: the whole run,
the time spent importing and the libraries that cost most of it, the taospec
functions that take the most time (leaving out the CLI layer, whose entry points
contain everything), and the functions anywhere with the most time of their own.
"""

from __future__ import annotations

import pstats
import subprocess
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
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", *script],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    return summarise(pstats.Stats(str(out)), heaviest_imports(timed.stderr))


def heaviest_imports(report: str, count: int = 4) -> list[tuple[str, float]]:
    """The packages other than taospec that an ``-X importtime`` report spent longest on."""
    took: dict[str, float] = {}
    for line in report.splitlines():
        if not line.startswith("import time:") or line.endswith("imported package"):
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        package = name.strip().split(".")[0]
        if package != "taospec":
            took[package] = max(took.get(package, 0.0), int(cumulative) / 1e6)
    return sorted(took.items(), key=lambda item: item[1], reverse=True)[:count]


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


def summarise(
    stats: pstats.Stats, imported: list[tuple[str, float]] | None = None, *, count: int = 4
) -> str:
    """``total 91 ms; imports 52 ms (yaml 20 ms, ...); taospec: a 20 ms, ...; own time: ...``."""
    table: Mapping[Key, tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in table.values())
    imports = sum(cum for key, (_, _, _, cum, _) in table.items() if key[2] == IMPORT)
    ours = sorted(
        (
            (cum, key)
            for key, (_, _, _, cum, _) in table.items()
            if "/taospec/" in key[0]
            and "/taospec/cli/" not in key[0]
            and cum < WRAPPER_SHARE * total
        ),
        reverse=True,
    )[:count]
    own = sorted(((tt, key) for key, (_, _, tt, _, _) in table.items()), reverse=True)[:count]
    heavy = ", ".join(f"{name} {_ms(took)}" for name, took in imported or [])
    parts = [f"total {_ms(total)}", f"imports {_ms(imports)}" + (f" ({heavy})" if heavy else "")]
    if ours:
        parts.append("taospec: " + ", ".join(f"{_label(k)} {_ms(t)}" for t, k in ours))
    parts.append("own time: " + ", ".join(f"{_label(k)} {_ms(t)}" for t, k in own))
    return "; ".join(parts)
