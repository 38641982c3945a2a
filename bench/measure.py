"""Whole-process measurements: wall time and peak memory of one child, repeated.

Every figure in the suite comes from here. A command is started by the small
launcher in ``bench/spawn.py`` and reaped with ``os.wait4``, which hands back
that child's own resource usage, so ``ru_maxrss`` is the peak resident memory
of exactly that process and the time is its own, without the launcher's
start-up. A subject and its reference are run in alternation
(subject, reference, subject, ...) so that drift on a shared machine hits both
alike.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class BenchError(RuntimeError):
    """A measured command did not do what the figure assumes (wrong exit code, ...)."""


@dataclass(frozen=True, slots=True)
class Run:
    """One finished child."""

    seconds: float
    maxrss_kib: int
    returncode: int
    stdout: bytes = b""


@dataclass(frozen=True, slots=True)
class Stats:
    """Median, min and max of one quantity over repeated runs."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        """Summarise ``values`` (at least one)."""
        return cls(statistics.median(values), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Stats:
        """The same figures multiplied by ``factor`` (seconds to milliseconds, ...)."""
        return Stats(self.median * factor, self.low * factor, self.high * factor, self.count)

    def inverse(self, numerator: float) -> Stats:
        """``numerator / value`` for each figure: durations become rates (min and max swap)."""
        return Stats(
            numerator / self.median, numerator / self.high, numerator / self.low, self.count
        )


SPAWN = Path(__file__).with_name("spawn.py")


def run_once(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    expect: Sequence[int] = (0,),
    capture: bool = False,
) -> Run:
    """Run ``argv`` to completion through :mod:`spawn`; stdout is discarded unless ``capture``."""
    with tempfile.TemporaryDirectory(prefix="taospec-bench-run-") as scratch:
        report = Path(scratch, "report")
        out_path, err_path = Path(scratch, "out"), Path(scratch, "err")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            subprocess.run(
                [
                    sys.executable,
                    "-S",
                    "-I",
                    str(SPAWN),
                    str(report),
                    str(cwd or Path.cwd()),
                    *argv,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out if capture else subprocess.DEVNULL,
                stderr=err,
                env=dict(env),
                check=True,
            )
        elapsed, maxrss, code = report.read_text(encoding="ascii").split()
        if int(code) not in expect:
            text = err_path.read_text(errors="replace").strip()
            raise BenchError(f"{' '.join(argv)} exited {code} (expected {list(expect)}):\n{text}")
        stdout = out_path.read_bytes() if capture else b""
        return Run(float(elapsed), int(maxrss), int(code), stdout)


def alternate(
    subjects: Sequence[Callable[[], Run]], times: int, *, warmup: int = 1
) -> list[list[Run]]:
    """Run each of ``subjects`` ``times`` times, in turn, after ``warmup`` untimed rounds."""
    for _ in range(warmup):
        for subject in subjects:
            subject()
    runs: list[list[Run]] = [[] for _ in subjects]
    for _ in range(times):
        for index, subject in enumerate(subjects):
            runs[index].append(subject())
    return runs


def seconds(runs: Sequence[Run]) -> Stats:
    """Wall times of ``runs``."""
    return Stats.of([run.seconds for run in runs])


def maxrss_mib(runs: Sequence[Run]) -> Stats:
    """Peak resident memory of ``runs`` in MiB."""
    return Stats.of([run.maxrss_kib / 1024 for run in runs])
