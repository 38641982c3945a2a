"""Which GPUs of a host are free: read their occupancy and pick the least used.

On a shared host a job names its GPUs by id or UUID, never by count (a count
always lands on the first GPUs, busy or not). This module asks ``nvidia-smi``
on the host for each GPU's memory in use, leaves out the GPUs a running job
holds, and picks the ones using the least memory, ties going to the lower
index, so the same answers give the same pick.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from taospec import proc
from taospec.errors import EXIT_JOB_FAILED, InvalidInput, TaospecError

QUERY = ("nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader")
QUERY_TIMEOUT = 60.0
_MIB = {"B": 1 / (1024 * 1024), "KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1024 * 1024}


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as ``nvidia-smi`` reports it."""

    index: str
    uuid: str
    memory_used_mib: int

    def named(self, names: Collection[str]) -> bool:
        """True when ``names`` holds this GPU's index or UUID."""
        return self.index in names or self.uuid in names


class NoFreeGpus(TaospecError):
    """Fewer GPUs are free on the host than the job asks for."""

    exit_code = EXIT_JOB_FAILED


def query_argv(prefix: Sequence[str] = ()) -> tuple[str, ...]:
    """The occupancy query: here, or after ``prefix`` (``ssh HOST``, ``brev exec INSTANCE``).

    Both ``ssh`` and ``brev exec`` hand their last argument to a shell on the far
    side, so there the query travels as one shell-quoted argument.
    """
    if not prefix:
        return QUERY
    return (*prefix, shlex.join(QUERY))


def parse(text: str) -> tuple[Gpu, ...]:
    """``nvidia-smi --query-gpu=index,uuid,memory.used --format=csv,noheader`` output."""
    return tuple(_gpu(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip())


def _gpu(number: int, line: str) -> Gpu:
    fields = [field.strip() for field in line.split(",")]
    if len(fields) != 3 or not fields[0].isdigit():
        raise InvalidInput(
            f"nvidia-smi output line {number}: expected 'index, uuid, memory.used', got {line!r}"
        )
    return Gpu(fields[0], fields[1], _mib(number, fields[2]))


def _mib(number: int, text: str) -> int:
    amount, _, unit = text.partition(" ")
    try:
        return round(float(amount) * _MIB[unit or "MiB"])
    except (ValueError, KeyError):
        raise InvalidInput(
            f"nvidia-smi output line {number}: memory.used {text!r} is not a size like '123 MiB'"
        ) from None


def query(prefix: Sequence[str] = (), timeout: float = QUERY_TIMEOUT) -> tuple[Gpu, ...]:
    """The host's GPUs and their occupancy, asked through ``prefix`` (see :func:`query_argv`)."""
    argv = query_argv(prefix)
    result = proc.run(argv, timeout=timeout, check=False)
    if not result.ok:
        raise InvalidInput(
            f"cannot read GPU occupancy (exit {result.returncode}): {proc.shown(argv)}\n"
            f"    {result.output() or 'no output'}\n"
            "  check that the NVIDIA driver is installed there (nvidia-smi -L)"
        )
    return answer(result.stdout)


def answer(stdout: str) -> tuple[Gpu, ...]:
    """The GPUs in the query's output, read from its CSV rows only: ``brev exec`` prints
    the instance's name after piped output, and a remote script may add a marker line."""
    return parse("\n".join(line for line in stdout.splitlines() if "," in line))


def pick(gpus: Sequence[Gpu], count: int, held: Mapping[str, str]) -> tuple[str, ...]:
    """The indexes of ``count`` free GPUs using the least memory, in index order.

    ``held`` maps the GPUs (index or UUID) running jobs hold to who holds them.
    """
    free = [gpu for gpu in gpus if not gpu.named(held)]
    if len(free) < count:
        raise NoFreeGpus(_shortage(gpus, count, held, len(free)))
    chosen = sorted(free, key=lambda gpu: (gpu.memory_used_mib, int(gpu.index)))[:count]
    return tuple(gpu.index for gpu in sorted(chosen, key=lambda gpu: int(gpu.index)))


def _shortage(gpus: Sequence[Gpu], count: int, held: Mapping[str, str], free: int) -> str:
    reasons = [_why_taken(gpu, held) for gpu in gpus]
    taken = "; ".join(reason for reason in reasons if reason) or "the host has no GPU"
    return (
        f"need {count} free GPU(s), {free} of {len(gpus)} free: {taken}; wait for a job to "
        "finish, ask for fewer GPUs, or name GPUs yourself in gpus:"
    )


def _why_taken(gpu: Gpu, held: Mapping[str, str]) -> str:
    for name in (gpu.index, gpu.uuid):
        if name in held:
            return f"GPU {gpu.index} held by {held[name]}"
    return ""
