"""The ledger at 200,000 jobs (status, ls, ls's memory) and durable transitions.

The ledgers are made by ``bench/ledger_gen.py``: one real run of a local job,
copied. The job ``status`` asks about has finished, so it answers from its record
and sidecar. ``ls --limit 50`` is measured twice at 200,000 jobs: on a ledger no one
wrote since the last ``ls``, and, as a person meets it, on a second one that gets
a new job (``taospec record open``, outside the timing) before each ``ls``. It is
measured on a 2,000-job ledger too: its peak memory must not grow with the ledger.
The ledgers live on tmpfs (/dev/shm) when there is one: 600,000 files take
seconds to write and delete there and minutes on a disk; every read is served
from memory on either. Durable transitions are judged against the fsync floor
measured alternately in the same run (``bench/transitions.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hotspots import profile_script
from measure import Run, Stats, alternate, maxrss_mib, run_once, seconds
from report import Figure, Target
from workspace import ROOT, Workspace

BENCH = Path(__file__).resolve().parent
BIG, SMALL = 200_000, 2_000
TRANSITION_PAIRS = 500


def generate(ws: Workspace, count: int) -> tuple[Path, str]:
    """A state root holding ``count`` finished jobs, and the id of one to ask about."""
    state = ws.fresh_in_memory(f"ledger-{count}")
    folder = ws.fresh("ledger-job")
    job = ws.copy_job(
        "hello.yaml",
        folder,
        {"results_root: /tmp/taospec-results": f"results_root: {folder}/results"},
    )
    state.rmdir()  # the generator makes it, from a real run's state root
    made = run_once(
        [ws.python, str(BENCH / "ledger_gen.py"), str(state), str(count), str(job)],
        env=ws.env(),
        capture=True,
    )
    return state, made.stdout.decode().strip()


def _profiled(ws: Workspace, figure: Figure, args: list[str], state: Path) -> Figure:
    if figure.met is not False:
        return figure
    out = ws.fresh("profile") / "run.prof"
    where = profile_script([ws.taospec, *args], out, env=ws.env(state=state), cwd=ROOT)
    return figure.with_profile(where)


def ledger_figures(ws: Workspace, times: int = 15) -> list[Figure]:
    """status and ls on 200,000 jobs, ls's memory at 2,000 and 200,000 jobs."""
    big, asked = generate(ws, BIG)
    busy, _ = generate(ws, BIG)  # one that gets a new job before each ls
    small, _ = generate(ws, SMALL)
    ls = ["ls", "--limit", "50"]
    opened = ["record", "open", "--platform", "local", "--image", "bench",
              "--network-arch", "bench", "--action", "list", "--storage-tier", "A",
              "--results-root", "/tmp"]  # fmt: skip

    def after_a_job() -> Run:
        """``ls`` as a person meets it: right after a job was opened (outside the timing)."""
        ws.taospec_run(opened, state=busy, capture=True)
        return ws.taospec_run(ls, state=busy)

    status, listed, fresh, listed_small, bare, floor = alternate(
        [
            lambda: ws.taospec_run(["status", asked], state=big),
            lambda: ws.taospec_run(ls, state=big),
            after_a_job,
            lambda: ws.taospec_run(ls, state=small),
            ws.bare,
            lambda: ws.libraries("click"),
        ],
        times,
        warmup=2,
    )
    reference = seconds(bare).scaled(1000)
    figures = [
        Figure(
            "status",
            f"taospec status ID, {BIG:,} jobs",
            "ms",
            seconds(status).scaled(1000),
            "python -c pass",
            reference,
            Target("ratio_max", 5),
        ),
        Figure(
            "ls",
            f"taospec ls --limit 50, {BIG:,} jobs",
            "ms",
            seconds(listed).scaled(1000),
            "python -c pass",
            reference,
            Target("ratio_max", 5),
        ),
        Figure(
            "ls_after_a_job",
            f"taospec ls --limit 50, {BIG:,} jobs, right after a job was opened",
            "ms",
            seconds(fresh).scaled(1000),
            "python -c pass",
            reference,
            Target("ratio_max", 5),
            note=(
                "a new record changes the jobs folder, so ls scans it again: what ls costs "
                "after a run, where the row above lists a ledger no one wrote since"
            ),
        ),
        Figure(
            "cli_library",
            "import click (the library status and ls import)",
            "ms",
            seconds(floor).scaled(1000),
            "python -c pass",
            reference,
            note="no target: the part of status's and ls's ratios taospec cannot remove",
        ),
        Figure(
            "ls_memory",
            f"ls --limit 50 peak memory, {BIG:,} jobs",
            "MiB",
            maxrss_mib(listed),
            f"{SMALL:,} jobs",
            maxrss_mib(listed_small),
            Target("ratio_max", 1.05),
            note="independent of the number of jobs: within 5% of the 2,000-job ledger",
        ),
    ]
    status_figure, ls_figure, fresh_figure, library, memory = figures
    status_figure = _profiled(ws, status_figure, ["status", asked], big)
    ls_figure = _profiled(ws, ls_figure, ls, big)
    if fresh_figure.met is False:
        ws.taospec_run(opened, state=busy, capture=True)  # the profiled ls meets a new job too
        fresh_figure = _profiled(ws, fresh_figure, ls, busy)
    return [status_figure, ls_figure, fresh_figure, library, _profiled(ws, memory, ls, big)]


def transition_figures(ws: Workspace, times: int = 5) -> list[Figure]:
    """Durable open+mark transitions per second for one writer, against the fsync floor."""

    def rate(mode: str) -> float:
        script = [str(BENCH / "transitions.py"), mode, str(ws.fresh(mode)), str(TRANSITION_PAIRS)]
        run = run_once([ws.python, *script], env=ws.env(), capture=True)
        return float(run.stdout)

    ledger: list[float] = []
    floor: list[float] = []
    for _ in range(times):
        ledger.append(rate("ledger"))
        floor.append(rate("floor"))
    figure = Figure(
        "transitions",
        "durable open+mark, one writer",
        "transitions/s",
        Stats.of(ledger),
        "fsync floor",
        Stats.of(floor),
        Target("ratio_min", 0.7),
        note=(
            "through the public Ledger API; the floor, alternated with it, does only the "
            "TAO recorder's file work: open reserves <id>.json with O_EXCL, mark holds flock "
            "on .<id>.json.lock; each writes a temp file + fsync, renames, fsyncs the folder"
        ),
    )
    if figure.met is False:
        script = [str(BENCH / "transitions.py"), "ledger", str(ws.fresh("ledger")), "200"]
        out = ws.fresh("profile") / "transitions.prof"
        figure = figure.with_profile(profile_script(script, out, env=ws.env(), cwd=ROOT))
    return [figure]


if __name__ == "__main__":
    workspace = Workspace()
    try:
        for figure in transition_figures(workspace, 1):
            print(figure)
    finally:
        workspace.remove()
    sys.exit(0)
