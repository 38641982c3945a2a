"""Figures 1 and 5: ``render`` and ``validate`` as whole processes, and render's memory.

``render`` is measured the way a person meets it: the same file rendered again
(the cache under ``$XDG_CACHE_HOME/taospec`` already holds it). The first
render of a file, with an empty cache, is reported beside it. ``validate``
runs over 500 generated job files in one call with an empty cache each time,
as a fresh CI machine would.
"""

from __future__ import annotations

from pathlib import Path

from measure import alternate, maxrss_mib, seconds
from report import Figure, Target
from workspace import ROOT, Workspace

RENDER = ["render", "jobs/train.yaml"]
VALIDATE_FILES = 500
VARIANTS = (
    ("train.yaml", "num_epochs: 10", "num_epochs: {n}"),
    ("hello.yaml", "repeat: 1", "repeat: {n}"),
    ("hello-docker.yaml", "shm_size: 64m", "shm_size: {n}m"),
)


def render_figures(ws: Workspace, times: int = 21, cold_times: int = 7) -> list[Figure]:
    """Warm and cold render against the bare interpreter, and render's peak memory."""
    warm_cache = ws.fresh("cache")
    warm, bare = alternate(
        [lambda: ws.taospec_run(RENDER, cache=warm_cache), ws.bare], times, warmup=2
    )
    cold, cold_bare = alternate(
        [lambda: ws.taospec_run(RENDER, cache=ws.fresh("cache")), ws.bare], cold_times
    )
    return [
        Figure(
            "render",
            "taospec render jobs/train.yaml",
            "ms",
            seconds(warm).scaled(1000),
            "python -c pass",
            seconds(bare).scaled(1000),
            Target("ratio_max", 6),
        ),
        Figure(
            "render_cold",
            "render, first time (empty cache)",
            "ms",
            seconds(cold).scaled(1000),
            "python -c pass",
            seconds(cold_bare).scaled(1000),
        ),
        Figure(
            "render_memory",
            "render peak memory, first time",
            "MiB",
            maxrss_mib(cold),
            "python -c pass",
            maxrss_mib(cold_bare),
            Target("max", 40),
        ),
        Figure(
            "render_memory_warm",
            "render peak memory, cached",
            "MiB",
            maxrss_mib(warm),
            "python -c pass",
            maxrss_mib(bare),
        ),
    ]


def job_files(ws: Workspace, count: int = VALIDATE_FILES) -> list[Path]:
    """``count`` distinct, valid job files made from the example jobs."""
    folder = ws.fresh("validate")
    files = []
    for index in range(count):
        name, old, new = VARIANTS[index % len(VARIANTS)]
        copy = ws.copy_job(name, folder, {old: new.format(n=index + 1)})
        target = copy.with_name(f"{copy.stem}-{index:03d}.yaml")
        copy.rename(target)
        files.append(target)
    return files


def validate_figures(ws: Workspace, times: int = 5) -> list[Figure]:
    """``validate`` over 500 files in one process: files per second, cold and cached."""
    files = [str(path) for path in job_files(ws)]
    args = ["validate", "-q", *files]
    warm_cache = ws.fresh("cache")
    cold, warm, bare = alternate(
        [
            lambda: ws.taospec_run(args, cache=ws.fresh("cache")),
            lambda: ws.taospec_run(args, cache=warm_cache),
            ws.bare,
        ],
        times,
    )
    reference = seconds(bare).scaled(1000)
    return [
        Figure(
            "validate",
            f"taospec validate, {len(files)} files in one call",
            "files/s",
            seconds(cold).inverse(len(files)),
            "python -c pass",
            reference,
            Target("min", 1000),
            note="empty cache each run, as on a fresh CI machine",
            reference_unit="ms",
        ),
        Figure(
            "validate_warm",
            f"validate, {len(files)} files again (cached)",
            "files/s",
            seconds(warm).inverse(len(files)),
        ),
    ]


if __name__ == "__main__":
    workspace = Workspace()
    try:
        for figure in render_figures(workspace, 5, 3) + validate_figures(workspace, 2):
            print(figure)
    finally:
        workspace.remove()
    print(ROOT)
