"""``taospec run --detach`` of a container that exits at once, against ``docker run -d``.

The job is a copy of ``jobs/hello-docker.yaml`` with its results under the
workspace, edited before every run (see :mod:`edits`). Each taospec run gets a
fresh ``TAO_STATE_DIR``, so it always decides, records, prepares and launches.
The reference is ``docker run -d`` of the same image and the same command line
as the job's launch step, on the same engine. Both containers are removed after
each round, outside the timing.
"""

from __future__ import annotations

import json
import subprocess

from hotspots import profile_script
from measure import BenchError, Run, run_once, seconds
from report import Figure, Target
from workspace import ROOT, Workspace

IMAGE = "taospec-test/busybox:1"


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def _job_command(ws: Workspace, job: str) -> list[str]:
    """The command the job's container runs: the launch step's words after the image."""
    shown = ws.taospec_run(["render", job, "--format", "json"], capture=True)
    plan = json.loads(shown.stdout)
    argv: list[str] = next(s["argv"] for s in plan["steps"] if s["name"] == "launch")
    return [word.replace("${JOB_ID}", "bench") for word in argv[argv.index(IMAGE) + 1 :]]


def submit_figures(ws: Workspace, times: int = 7) -> list[Figure]:
    """run --detach against docker run -d, alternately."""
    if _docker("image", "inspect", IMAGE).returncode != 0:
        raise BenchError(f"the Docker engine lacks {IMAGE}; run `make env` first")
    results = ws.fresh("docker-results")
    job = ws.edited_job(
        "hello-docker.yaml", {"results_root: /tmp/taospec-results": f"results_root: {results}"}
    )
    command = _job_command(ws, str(job.path))
    args = ["run", "--detach", str(job.path)]
    containers: list[str] = []

    def taospec() -> Run:
        job.edit()
        run = ws.taospec_run(args, state=ws.fresh("state"), capture=True)
        containers.append(run.stdout.decode().split()[-1])
        return run

    def bare() -> Run:
        run = run_once(["docker", "run", "-d", IMAGE, *command], env=ws.env(), capture=True)
        containers.append(run.stdout.decode().strip())
        return run

    ours: list[Run] = []
    reference: list[Run] = []
    for round_number in range(times + 1):
        try:
            mine, theirs = taospec(), bare()
        finally:
            _docker("rm", "-f", *containers)
            containers.clear()
        if round_number:  # the first round warms the engine
            ours.append(mine)
            reference.append(theirs)
    figure = Figure(
        "run_detach",
        "taospec run --detach, edited jobs/hello-docker.yaml",
        "ms",
        seconds(ours).scaled(1000),
        "docker run -d",
        seconds(reference).scaled(1000),
        Target("ratio_max", 1.3),
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
    return [figure]
