"""``render`` and ``validate`` as whole processes, on job files just edited.

``render`` renders a private copy of ``jobs/train.yaml`` that is edited before
every run (see :mod:`edits`), against the bare interpreter measured in
alternation; its peak memory comes from the same runs. ``validate`` checks 500
distinct job files in one call, every one of them edited before each run, as a
CI job checking a branch's files meets them.
"""

from __future__ import annotations

from collections.abc import Sequence

from edits import EditedFile, edit_all
from hotspots import profile_script
from measure import Run, alternate, maxrss_mib, seconds
from report import Figure, Target
from workspace import ROOT, Workspace

VALIDATE_FILES = 500
RENDER_LIBRARIES = ("click", "yaml", "jinja2")
"""What ``render`` of a job without ``skill:`` imports besides the standard library."""
VARIANTS = (
    ("train.yaml", "num_epochs: 10", "num_epochs: {n}"),
    ("hello.yaml", "repeat: 1", "repeat: {n}"),
    ("hello-docker.yaml", "shm_size: 64m", "shm_size: {n}m"),
)


def profiled(ws: Workspace, figure: Figure, args: Sequence[str], edit: EditedFile | None) -> Figure:
    """``figure``, with where one more run of ``taospec ARGS`` spends its time if it missed."""
    if figure.met is not False:
        return figure
    if edit is not None:
        edit.edit()
    profile = profile_script(
        [ws.taospec, *args], ws.fresh("profile") / "run.prof", env=ws.env(), cwd=ROOT
    )
    return figure.with_profile(profile)


def render_figures(ws: Workspace, times: int = 21) -> list[Figure]:
    """Render of an edited file against the bare interpreter, and its peak memory."""
    job = ws.edited_job("train.yaml")
    args = ["render", str(job.path)]

    def render() -> Run:
        job.edit()
        return ws.taospec_run(args)

    rendered, bare, floor = alternate(
        [render, ws.bare, lambda: ws.libraries(*RENDER_LIBRARIES)], times, warmup=2
    )
    speed = Figure(
        "render",
        "taospec render, edited jobs/train.yaml",
        "ms",
        seconds(rendered).scaled(1000),
        "python -c pass",
        seconds(bare).scaled(1000),
        Target("ratio_max", 8),
    )
    memory = Figure(
        "render_memory",
        "render peak memory, edited jobs/train.yaml",
        "MiB",
        maxrss_mib(rendered),
        "python -c pass",
        maxrss_mib(bare),
        Target("max", 40),
    )
    libraries = Figure(
        "render_libraries",
        f"import {', '.join(RENDER_LIBRARIES)} (render's libraries alone)",
        "ms",
        seconds(floor).scaled(1000),
        "python -c pass",
        seconds(bare).scaled(1000),
        note="no target: the part of render's ratio taospec cannot remove",
    )
    return [profiled(ws, speed, args, job), libraries, profiled(ws, memory, args, job)]


def job_files(ws: Workspace, count: int = VALIDATE_FILES) -> list[EditedFile]:
    """``count`` distinct, valid job files made from the example jobs."""
    folder = ws.fresh("validate")
    files = []
    for index in range(count):
        name, old, new = VARIANTS[index % len(VARIANTS)]
        copy = ws.copy_job(name, folder, {old: new.format(n=index + 1)})
        target = copy.with_name(f"{copy.stem}-{index:03d}.yaml")
        copy.rename(target)
        files.append(EditedFile(target))
    return files


def validate_figures(ws: Workspace, times: int = 5) -> list[Figure]:
    """``validate`` over 500 edited files in one process: files per second."""
    files = job_files(ws)
    args = ["validate", "-q", *(str(file.path) for file in files)]

    def validate() -> Run:
        edit_all(files)
        return ws.taospec_run(args)

    checked, bare = alternate([validate, ws.bare], times)
    figure = Figure(
        "validate",
        f"taospec validate, {len(files)} edited files in one call",
        "files/s",
        seconds(checked).inverse(len(files)),
        "python -c pass",
        seconds(bare).scaled(1000),
        Target("min", 1000),
        note="every file is edited before each run, as a branch's changed files reach CI",
        reference_unit="ms",
    )
    if figure.met is False:
        edit_all(files)
        figure = profiled(ws, figure, args, None)
    return [figure]


if __name__ == "__main__":
    workspace = Workspace()
    try:
        for measured in render_figures(workspace, 5) + validate_figures(workspace, 2):
            print(measured)
    finally:
        workspace.remove()
