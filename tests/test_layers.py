"""The package's imports point down its layers only, and never in a circle.

Every import counts, at module level or inside a function: the graph a
reader sees is the graph that runs. A new module must be given its layer here.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

from taospec import states
from tests.conftest import ROOT

PACKAGE = ROOT / "taospec"

LAYERS: list[tuple[str, set[str]]] = [
    ("cli", {"taospec.__main__", "taospec.cli", "taospec.cli.app"}),
    ("commands", {"taospec.commands"}),
    ("loading and pipelines", {"taospec.loader", "taospec.pipeline", "taospec.fingerprint",
                               "taospec.polling", "taospec.preflight", "taospec.gitrev",
                               "taospec.plandiff", "taospec.retrying"}),
    ("executor and preflight", {"taospec.executor", "taospec.doctor"}),
    ("platforms", {"taospec.platforms", "taospec.remote", "taospec.gpupick", "taospec.notify",
                   "taospec.progress", "taospec.ticker"}),
    ("plans and templates", {"taospec.plan", "taospec.plantext", "taospec.templates",
                             "taospec.identity"}),
    ("spec and schema", {"taospec.job", "taospec.rules", "taospec.dockerargs",
                         "taospec.versions", "taospec.schema",
                         "taospec.schemacheck", "taospec.yamlsrc", "taospec.diagnostics",
                         "taospec.placeholders", "taospec.skills", "taospec.taoschema",
                         "taospec.skilljob"}),
    ("ledger and processes", {"taospec.ledger", "taospec.proc", "taospec.lint", "taospec.settings",
                              "taospec.states", "taospec.errors", "taospec.diagnose",
                              "taospec.durable", "taospec.interrupts", "taospec.braces",
                              "taospec.jobids",
                              "taospec"}),
]  # fmt: skip


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        names[dotted.removesuffix(".__init__")] = path
    return names


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            wanted = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in wanted:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def layer_of(module: str) -> int:
    """The index of ``module``'s layer: its own entry, or its package's."""
    candidates = [
        (len(prefix), index)
        for index, (_, members) in enumerate(LAYERS)
        for prefix in members
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert candidates, f"{module} has no layer: add it to LAYERS in tests/test_layers.py"
    return max(candidates)[1]


def graph() -> dict[str, set[str]]:
    known = module_names()
    return {
        module: {
            target
            for target in imports(path, known)
            if target != module and not module.startswith(target + ".")
        }
        for module, path in known.items()
    }


def test_every_import_points_down_or_across() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer_of(target) < layer_of(module)
    ]
    assert upward == []


def test_no_module_imports_itself_back() -> None:
    graphlib.TopologicalSorter(graph()).prepare()  # raises CycleError naming the circle


def test_the_test_sees_a_deferred_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from taospec.cli import main\n    return main\n")
    assert imports(module, module_names()) == {"taospec.cli"}


def test_state_names_are_spelled_only_in_states() -> None:
    # One home for the vocabulary: elsewhere a state is taospec.states' constant. A dict
    # literal's keys are a backend's own names (docker's, Slurm's) mapped onto it, and
    # Slurm's FAILED is compared as Slurm spells it.
    spelled = {*states.STATES, states.FAILED}
    found = []
    for name, path in sorted(module_names().items()):
        if name == "taospec.states":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in spelled and id(node) not in keys:
                found.append((name, node.value, node.lineno))
    assert [(name, value) for name, value, _ in found] == [("taospec.platforms.slurm", "FAILED")], (
        found
    )
