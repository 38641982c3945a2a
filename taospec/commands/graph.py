"""``taospec graph``: the dependency graph with each target's state, as Mermaid or DOT."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from taospec import preflight
from taospec.commands.session import open_ledger
from taospec.diagnostics import SpecError
from taospec.errors import EXIT_OK
from taospec.loader import load_located
from taospec.pipeline import Decision, decide


def run(
    file: str, targets: Sequence[str] = (), *, fmt: str = "mermaid", user: str | None = None
) -> int:
    """Print the graph of ``file``'s targets (and what they need)."""
    try:
        jobfile, sources = load_located(file)
        names = jobfile.closure(tuple(targets))
        preflight.refuse_passed_values_shown(jobfile, sources, names)  # target names are shown
        decisions = decide(jobfile, names, open_ledger(), user=user)
    except SpecError as refused:  # graph runs nothing: the refusal says what it did not do
        raise SpecError(refused.problems, outcome="no graph was drawn") from None
    print("\n".join(mermaid(decisions) if fmt == "mermaid" else dot(decisions)))
    return EXIT_OK


def node_id(name: str) -> str:
    """A graph node id for a target name (matrix names hold brackets and commas)."""
    return "t_" + re.sub(r"[^A-Za-z0-9]", "_", name)


def _label(decision: Decision) -> str:
    state = "up to date" if not decision.run else decision.reason
    return f"{decision.target.name}\n{state}"


def mermaid(decisions: list[Decision]) -> list[str]:
    """A Mermaid flowchart; up-to-date targets and those that will run styled apart."""
    lines = ["flowchart LR"]
    for decision in decisions:
        label = _label(decision).replace('"', "#quot;").replace("\n", "<br/>")
        style = "todo" if decision.run else "done"
        lines.append(f'    {node_id(decision.target.name)}["{label}"]:::{style}')
    for decision in decisions:
        for need in decision.target.needs:
            lines.append(f"    {node_id(need)} --> {node_id(decision.target.name)}")
    lines.append("    classDef done fill:#d9f2d9,stroke:#2e7d32")
    lines.append("    classDef todo fill:#fff3cd,stroke:#b7791f")
    return lines


def dot(decisions: list[Decision]) -> list[str]:
    """A Graphviz digraph."""
    lines = ["digraph taospec {", "    rankdir=LR;", "    node [shape=box];"]
    for decision in decisions:
        color = "#fff3cd" if decision.run else "#d9f2d9"
        label = json.dumps(_label(decision))
        lines.append(
            f"    {node_id(decision.target.name)} [label={label}, style=filled, "
            f'fillcolor="{color}"];'
        )
    for decision in decisions:
        for need in decision.target.needs:
            lines.append(f"    {node_id(need)} -> {node_id(decision.target.name)};")
    lines.append("}")
    return lines
