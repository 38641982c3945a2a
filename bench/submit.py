"""Figure 2: ``taospec run --detach`` of a container that exits at once, against ``docker run -d``.

The job is ``jobs/hello-docker.yaml`` with its results under the workspace.
Each taospec run gets a fresh ``TAO_STATE_DIR`` (and ``--force``), so it always
records, prepares and launches; the cache is the person's usual one, already
holding the file. The reference is ``docker run -d`` of the same image and the
same command line as the job's launch step, on the same engine. Both
containers are removed after each round, outside the timing.
"""

from __future__ import annotations

import json
import subprocess

from measure import BenchError, Run, run_once, seconds
from report import Figure, Target
from workspace import Workspace

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
    folder = ws.fresh("docker-job")
    job = str(
        ws.copy_job(
            "hello-docker.yaml",
            folder,
            {"results_root: /tmp/taospec-results": f"results_root: {folder}/results"},
        )
    )
    command = _job_command(ws, job)
    cache = ws.fresh("cache")
    containers: list[str] = []

    def taospec() -> Run:
        run = ws.taospec_run(
            ["run", "--detach", "--force", job], state=ws.fresh("state"), cache=cache, capture=True
        )
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
        if round_number:  # the first round warms the engine and the cache
            ours.append(mine)
            reference.append(theirs)
    return [
        Figure(
            "run_detach",
            "taospec run --detach jobs/hello-docker.yaml",
            "ms",
            seconds(ours).scaled(1000),
            "docker run -d",
            seconds(reference).scaled(1000),
            Target("ratio_max", 1.3),
        )
    ]
