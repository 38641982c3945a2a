"""``taospec run --check`` of a 200-target pipeline right after one target was edited.

The pipeline is 100 ``prepare-N`` targets (each with an input file) and 100
``train-N`` targets that need them, all local processes running ``true``. It
is run once for real; then, before each timed run, one target's spec is
changed to a value no earlier run saw, and ``run --check`` must answer that
this target would run (exit 1) while the other 199 are up to date.
"""

from __future__ import annotations

from pathlib import Path

from edits import EditedFile
from hotspots import profile_script
from measure import Run, alternate, seconds
from report import Figure, Target
from workspace import ROOT, Workspace

PAIRS = 100


def pipeline_text(results: Path, pairs: int = PAIRS) -> str:
    """The pipeline file: defaults, then prepare-N and train-N for N < ``pairs``."""
    lines = [
        "# 200 targets for the benchmark: prepare-N, then train-N on its output.",
        "version: 1",
        "defaults:",
        "  network_arch: bench",
        "  platform: local",
        "  image: {versions_key: images.test.busybox}",
        f"  results_root: {results}",
        "  command: 'true'",
        "jobs:",
    ]
    for index in range(pairs):
        lines += [
            f"  prepare-{index:03d}:",
            "    action: dataset_convert",
            "    inputs: [classes.txt]",
            f"    spec: {{dataset: {{shard: {index}, of: {pairs}}}}}",
            f"  train-{index:03d}:",
            "    action: train",
            f"    needs: [prepare-{index:03d}]",
            f"    env: {{set: {{DATA: '{{needs.prepare-{index:03d}.results_dir}}'}}}}",
            "    spec: {train: {num_epochs: 10, optim: {lr: 0.0001}}}",
        ]
    return "\n".join(lines) + "\n"


def edited_target(pairs: int = PAIRS) -> str:
    """The target each edit changes: a train target in the middle of the file."""
    return f"train-{pairs // 2:03d}"


def edit_one_target(text: str, number: int, target: str) -> str:
    """``text`` with ``target``'s epochs set to a value of this edit's own."""
    head, mark, tail = text.partition(f"  {target}:\n")
    if not mark or "num_epochs: 10," not in tail:
        raise ValueError(f"the pipeline has no target {target} with num_epochs: 10")
    return head + mark + tail.replace("num_epochs: 10,", f"num_epochs: {10 + number},", 1)


def edited_pipeline(folder: Path, pairs: int = PAIRS) -> EditedFile:
    """The pipeline in ``folder`` with its inputs, as an edited file changing one target."""
    (folder / "versions.yaml").write_text(
        "images:\n  test:\n    busybox: taospec-test/busybox:1\n", encoding="utf-8"
    )
    (folder / "classes.txt").write_text("no-change\nchange\n", encoding="utf-8")
    path = folder / "pipeline.yaml"
    path.write_text(pipeline_text(folder / "results", pairs), encoding="utf-8")
    target = edited_target(pairs)
    return EditedFile(path, lambda text, number: edit_one_target(text, number, target))


def pipeline_figures(ws: Workspace, times: int = 11) -> list[Figure]:
    """Run the pipeline once, then time --check right after each edit of one target."""
    job = edited_pipeline(ws.fresh("pipeline"))
    state = ws.fresh("state")
    ws.taospec_run(["run", "--jobs", "8", str(job.path)], state=state)
    check = ["run", "--check", str(job.path)]

    def checked() -> Run:
        job.edit()
        return ws.taospec_run(check, state=state, expect=(1,))

    runs, bare = alternate([checked, ws.bare], times)
    figure = Figure(
        "check",
        f"taospec run --check, {2 * PAIRS} targets, one just edited",
        "ms",
        seconds(runs).scaled(1000),
        "python -c pass",
        seconds(bare).scaled(1000),
        Target("max", 600),
        note=(
            f"{edited_target()} changed before each run: --check exits 1 for it alone, "
            "the other targets are up to date"
        ),
    )
    if figure.met is False:
        job.edit()
        profile = profile_script(
            [ws.taospec, *check],
            ws.fresh("profile") / "run.prof",
            env=ws.env(state=state),
            cwd=ROOT,
        )
        figure = figure.with_profile(profile)
    return [figure]
