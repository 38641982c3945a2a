"""Figure 4: ``taospec run --check`` of a 200-target pipeline that is entirely up to date.

The pipeline is 100 ``prepare-N`` targets (each with an input file) and 100
``train-N`` targets that need them, all local processes running ``true``. It
is run once for real, then ``run --check`` must answer "all up to date"
(exit 0) every time it is timed.
"""

from __future__ import annotations

from pathlib import Path

from measure import alternate, seconds
from report import Figure, Target
from workspace import Workspace

PAIRS = 100


def pipeline_text(results: Path) -> str:
    """The pipeline file: defaults, then prepare-N and train-N for N < PAIRS."""
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
    for index in range(PAIRS):
        lines += [
            f"  prepare-{index:03d}:",
            "    action: dataset_convert",
            "    inputs: [classes.txt]",
            f"    spec: {{dataset: {{shard: {index}, of: {PAIRS}}}}}",
            f"  train-{index:03d}:",
            "    action: train",
            f"    needs: [prepare-{index:03d}]",
            f"    env: {{set: {{DATA: '{{needs.prepare-{index:03d}.results_dir}}'}}}}",
            "    spec: {train: {num_epochs: 10, optim: {lr: 0.0001}}}",
        ]
    return "\n".join(lines) + "\n"


def pipeline_figures(ws: Workspace, times: int = 11) -> list[Figure]:
    """Run the pipeline once, then time --check against the bare interpreter."""
    folder = ws.fresh("pipeline")
    (folder / "versions.yaml").write_text(
        "images:\n  test:\n    busybox: taospec-test/busybox:1\n", encoding="utf-8"
    )
    (folder / "classes.txt").write_text("no-change\nchange\n", encoding="utf-8")
    job = folder / "pipeline.yaml"
    job.write_text(pipeline_text(folder / "results"), encoding="utf-8")
    state, cache = ws.fresh("state"), ws.fresh("cache")
    ws.taospec_run(["run", "--jobs", "8", str(job)], state=state, cache=cache)
    check = ["run", "--check", str(job)]
    checked, bare = alternate(
        [lambda: ws.taospec_run(check, state=state, cache=cache), ws.bare], times
    )
    cold, cold_bare = alternate(
        [lambda: ws.taospec_run(check, state=state, cache=ws.fresh("cache")), ws.bare], 3
    )
    return [
        Figure(
            "check",
            f"taospec run --check, {2 * PAIRS} targets up to date",
            "ms",
            seconds(checked).scaled(1000),
            "python -c pass",
            seconds(bare).scaled(1000),
            Target("max", 300),
        ),
        Figure(
            "check_cold",
            "run --check, first time (empty cache)",
            "ms",
            seconds(cold).scaled(1000),
            "python -c pass",
            seconds(cold_bare).scaled(1000),
        ),
    ]
