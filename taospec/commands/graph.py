"""``taospec graph``: the dependency graph with each target's state, as Mermaid or DOT."""

from __future__ import annotations

import hashlib
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
    """A graph node id for a target name, the same in every graph: the name itself when it
    is letters and digits alone, else its letters and digits with a digest of the whole
    name after them (matrix names hold brackets, dots and dashes, and ``levir-cd`` and
    ``levir.cd`` are two targets); only those ids hold a ``_`` after ``t_``."""
    if re.fullmatch(r"[A-Za-z0-9]+", name):
        return f"t_{name}"
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"t_{re.sub(r'[^A-Za-z0-9]+', '_', name).strip('_')}_{digest}"


def mermaid_text(text: str) -> str:
    """``text`` as a Mermaid label in double quotes shows it: ``#``, the quote and the
    characters HTML reads as markup as Mermaid's entity codes, a newline as ``<br/>``."""
    escaped = re.sub(r'[#"<>&]', lambda found: f"#{ord(found.group())};", text)
    return escaped.replace("\n", "<br/>")


def dot_text(text: str) -> str:
    """``text`` as a DOT double-quoted string that Graphviz shows as written: a backslash
    (which would begin an escape such as ``\\N``, the node's name) and the quote escaped,
    a newline as ``\\n``; any other character as it is (DOT files are UTF-8)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _label(decision: Decision) -> str:
    state = "up to date" if not decision.run else decision.reason
    return f"{decision.target.name}\n{state}"


def mermaid(decisions: list[Decision]) -> list[str]:
    """A Mermaid flowchart; up-to-date targets and those that will run styled apart."""
    lines = ["flowchart LR"]
    for decision in decisions:
        label = mermaid_text(_label(decision))
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
        label = dot_text(_label(decision))
        lines.append(
            f"    {node_id(decision.target.name)} [label={label}, style=filled, "
            f'fillcolor="{color}"];'
        )
    for decision in decisions:
        for need in decision.target.needs:
            lines.append(f"    {node_id(need)} -> {node_id(decision.target.name)};")
    lines.append("}")
    return lines
