"""``taospec logs`` of a finished local job whose log is a training run's, against ``cat``.

The job is a copy of ``jobs/hello.yaml``, run once into the workspace; its log is then
replaced by :data:`LOG_BYTES` of what TAO trainers print: progress-bar lines (blocks,
rates, losses) and, every tenth line, a logger line naming a checkpoint. Each line is
redacted on its way out, which is what the figure measures (into a pipe, as here, a block
of lines at a time); ``cat`` of the same file, a new process too, is the floor of reading
and writing the bytes.
"""

from __future__ import annotations

from pathlib import Path

from measure import Run, alternate, run_once, seconds
from report import Figure
from workspace import Workspace

LOG_BYTES = 20_000_000


def training_log(path: Path, size: int) -> int:
    """Write about ``size`` bytes of training output to ``path``; how many it wrote."""
    lines = []
    written = 0
    step = 0
    while written < size:
        bar = "\u2588" * (step % 10) + " " * (9 - step % 10)
        line = (
            f"Epoch {step // 512}: {step % 100:3d}%|{bar}| {step % 512}/512 "
            f"[01:02<00:00, 8.2it/s, loss=0.{step % 997:03d}, lr=1e-4, v_num=0]\n"
        )
        if step % 10 == 0:
            line += (
                f"[2026-12-05 10:{step % 60:02d}:00,123 - nvidia_tao_pytorch - INFO] "
                f"Saving checkpoint to /results/train/model_epoch_{step:03d}.pth\n"
            )
        lines.append(line)
        written += len(line.encode())
        step += 1
    path.write_text("".join(lines), encoding="utf-8")
    return written


def logs_figures(ws: Workspace, times: int = 5) -> list[Figure]:
    """``taospec logs`` and ``cat`` of one training log, alternately."""
    results, state = ws.fresh("log-results"), ws.fresh("log-state")
    job = ws.copy_job(
        "hello.yaml",
        ws.fresh("log-job"),
        {"results_root: /tmp/taospec-results": f"results_root: {results}"},
    )
    ran = ws.taospec_run(["run", str(job)], state=state, capture=True)
    job_id = ran.stdout.decode().split()[0]
    log = results / job_id / "taospec.log"
    megabytes = training_log(log, LOG_BYTES) / 1e6

    def shown() -> Run:
        return ws.taospec_run(["logs", job_id], state=state)

    def read() -> Run:
        return run_once(["cat", str(log)], env=ws.env())

    logged, catted = alternate([shown, read], times)
    return [
        Figure(
            "logs",
            f"taospec logs of a {megabytes:.0f} MB training log",
            "MB/s",
            seconds(logged).inverse(megabytes),
            "cat of the same file",
            seconds(catted).inverse(megabytes),
            note="every line redacted on its way out, a block at a time into a pipe",
            reference_unit="MB/s",
        )
    ]
