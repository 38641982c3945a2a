"""The package's imports point down its layers only, and never in a circle.

Every import counts, at module level or inside a function: the graph a
reader sees is the graph that runs. The layers are the README's table ("How the
code is laid out"), so a new module is given its layer, and its line saying what
it owns, there.
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

from taospec import states
from tests.conftest import ROOT

PACKAGE = ROOT / "taospec"

LAID_OUT = "## How the code is laid out"


def readme_layers(readme: str) -> list[tuple[str, set[str]]]:
    """The README's layer table, top to bottom: each row's layer and its modules, named as
    imports name them (``cli/`` the package ``taospec.cli``, ``__init__.py`` ``taospec``)."""
    section = readme.split(LAID_OUT, 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ")]
    assert rows, f"no layer table under {LAID_OUT!r}"
    assert rows[0][0].strip() == "layer", f"no layer table under {LAID_OUT!r}"
    layers = []
    for layer, modules in rows[1:]:
        names = set()
        for file in re.findall(r"`([^`]+)`", modules):
            dotted = file.removesuffix("/").removesuffix(".py").replace("/", ".")
            names.add("taospec" if dotted == "__init__" else f"taospec.{dotted}")
        layers.append((layer.strip(), names))
    return layers


LAYERS = readme_layers((ROOT / "README.md").read_text(encoding="utf-8"))


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
    """The index of ``module``'s layer: its own entry, or its package's (``cli/``; the row
    of ``__init__.py`` holds that module alone, not the whole of ``taospec``)."""
    candidates = [
        (len(prefix), index)
        for index, (_, members) in enumerate(LAYERS)
        for prefix in members
        if module == prefix or (prefix != "taospec" and module.startswith(prefix + "."))
    ]
    assert candidates, f"{module} has no layer: give it a row in README.md, {LAID_OUT!r}"
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


def test_every_module_the_readme_names_exists() -> None:
    known = module_names()
    named = [name for _, members in LAYERS for name in members]
    assert [name for name in named if name not in known] == []
    assert len(named) == len(set(named)), "a module is named in two rows"


def test_every_module_has_a_layer() -> None:
    for module in module_names():
        layer_of(module)


def test_the_table_is_read_as_written() -> None:
    table = f"""{LAID_OUT}

| layer | modules | owns |
|---|---|---|
| top | `cli/`, `__main__.py` | the `commands/` it calls |
| bottom | `ledger/`, `proc.py`, `__init__.py` | records |

## Next
| not | `read.py` | |
"""
    assert readme_layers(table) == [
        ("top", {"taospec.cli", "taospec.__main__"}),
        ("bottom", {"taospec.ledger", "taospec.proc", "taospec"}),
    ]


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
