"""``taospec run --detach`` of a container that exits at once, against ``docker run -d``.

The job is a copy of ``jobs/hello-docker.yaml`` with its results under the
workspace, edited before every run (see :mod:`edits`). Each taospec run gets a
fresh ``TAO_STATE_DIR``, so it always decides, records, prepares and launches.
The reference is the job's own launch step typed by hand: ``docker run -d``
with the same options, mounts, image and command as the plan's launch step
(its job id replaced by a name of the round's own, its results folder made
beforehand), on the same engine. A second row adds to each launch by hand the
time Python takes to start and import taospec's libraries, measured in the same
rounds: the least ``run --detach`` can take before any of its own work. Each
launch is timed once the container before it has ended, the three measured
commands take turns at going first, and containers are removed after each round, outside the
timing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from hotspots import profile_script
from measure import BenchError, Run, Stats, run_once, seconds
from report import Figure, Target
from workspace import ROOT, Workspace

IMAGE = "taospec-test/busybox:1"
LIBRARIES = ("click", "yaml", "jinja2")
"""What ``run`` imports besides the standard library."""


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def _launch_argv(ws: Workspace, job: str) -> list[str]:
    """The plan's launch step, ``${JOB_ID}`` standing for the job id."""
    shown = ws.taospec_run(["render", job, "--format", "json"], capture=True)
    plan = json.loads(shown.stdout)
    argv: list[str] = next(s["argv"] for s in plan["steps"] if s["name"] == "launch")
    return argv


def submit_figures(ws: Workspace, times: int = 15) -> list[Figure]:
    """run --detach against the same launch by hand, and a plain docker run -d, alternately."""
    if _docker("image", "inspect", IMAGE).returncode != 0:
        raise BenchError(f"the Docker engine lacks {IMAGE}; run `make env` first")
    results = ws.fresh("docker-results")
    job = ws.edited_job(
        "hello-docker.yaml", {"results_root: /tmp/taospec-results": f"results_root: {results}"}
    )
    launch = _launch_argv(ws, str(job.path))
    args = ["run", "--detach", str(job.path)]
    containers: list[str] = []

    def settled(run: Run, container: str) -> Run:
        """``run``, once the container it started has ended (outside the timing), so the
        next launch meets an idle engine rather than one still tearing a container down."""
        containers.append(container)
        _docker("wait", container)
        return run

    def taospec(_: int) -> Run:
        job.edit()
        run = ws.taospec_run(args, state=ws.fresh("state"), capture=True)
        return settled(run, run.stdout.decode().split()[-1])

    def by_hand(round_number: int) -> Run:
        name = f"bench-{round_number}"
        (results / name).mkdir()
        argv = [word.replace("${JOB_ID}", name) for word in launch]
        return settled(run_once(argv, env=ws.env(), capture=True), name)

    def libraries(_: int) -> Run:
        return ws.libraries(*LIBRARIES)

    measured: dict[Callable[[int], Run], list[Run]] = {taospec: [], by_hand: [], libraries: []}
    order = list(measured)
    for round_number in range(times + 1):
        try:
            runs = {who: who(round_number) for who in order}
        finally:
            _docker("rm", "-f", *containers)
            containers.clear()
        if round_number:  # the first round warms the engine
            for who, run in runs.items():
                measured[who].append(run)
        order = order[1:] + order[:1]  # each goes first, second and last in turn
    ours, reference, imports = measured.values()
    figure = Figure(
        "run_detach",
        "taospec run --detach, edited jobs/hello-docker.yaml",
        "ms",
        seconds(ours).scaled(1000),
        "its launch step by hand",
        seconds(reference).scaled(1000),
        Target("ratio_max", 1.3),
        note="the reference is docker run -d with the launch step's options, mounts and command",
    )
    floor = Figure(
        "run_detach_floor",
        "the launch by hand, then Python importing click, yaml and jinja2",
        "ms",
        Stats.of([a.seconds + b.seconds for a, b in zip(reference, imports, strict=True)]).scaled(
            1000
        ),
        "its launch step by hand",
        seconds(reference).scaled(1000),
        note="no target: the least run --detach can take, with none of taospec's own work",
    )
    if figure.met is False:
        job.edit()
        state = ws.fresh("state")
        out = ws.fresh("profile") / "run.prof"
        try:
            where = profile_script([ws.taospec, *args], out, env=ws.env(state=state), cwd=ROOT)
        finally:
            # the container is named after the job id, the record's name
            _docker("rm", "-f", *(path.stem for path in state.glob("jobs/*.json")))
        figure = figure.with_profile(where)
    return [figure, floor]
