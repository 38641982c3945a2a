"""Free GPUs by occupancy: nvidia-smi's answer, read here, over a remote shell, or via brev exec."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from taospec import gpupick
from taospec.errors import InvalidInput
from taospec.gpupick import Gpu, NoFreeGpus
from tests.conftest import returned, write

FAKES = Path(__file__).resolve().parent / "fakes"
FOUR = (
    "0, GPU-1f3a0c52-0000-4000-8000-000000000000, 30712 MiB\n"
    "1, GPU-2b7e1d63-1111-4111-8111-111111111111, 3 MiB\n"
    "2, GPU-3c8f2e74-2222-4222-8222-222222222222, 1200 MiB\n"
    "3, GPU-4d903f85-3333-4333-8333-333333333333, 3 MiB\n"
)


@pytest.fixture
def fake_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nvidia-smi stand-in first on PATH, answering with four GPUs."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CSV", FOUR)


def test_parse_reads_units_and_spaces() -> None:
    gpus = gpupick.parse("0, GPU-a, 123 MiB\n1,GPU-b,2 GiB\n\n")
    assert gpus == (Gpu("0", "GPU-a", 123), Gpu("1", "GPU-b", 2048))


def test_parse_names_the_line_it_cannot_read() -> None:
    with pytest.raises(InvalidInput, match=r"line 2: memory.used '\[N/A\]'"):
        gpupick.parse("0, GPU-a, 1 MiB\n1, GPU-b, [N/A]\n")
    with pytest.raises(InvalidInput, match="line 1: expected 'index, uuid, memory.used'"):
        gpupick.parse("No devices were found\n")


def test_the_least_used_free_gpus_are_picked_ties_by_index(fake_smi: None) -> None:
    gpus = gpupick.query()
    assert [gpu.memory_used_mib for gpu in gpus] == [30712, 3, 1200, 3]
    assert gpupick.pick(gpus, 2, {}) == ("1", "3")
    assert gpupick.pick(gpus, 3, {}) == ("1", "2", "3")
    assert gpupick.pick(gpus, 1, {}) == ("1",)


def test_held_gpus_are_left_out_by_index_or_uuid(fake_smi: None) -> None:
    gpus = gpupick.query()
    held = {"1": "a", "GPU-4d903f85-3333-4333-8333-333333333333": "b"}
    assert gpupick.pick(gpus, 2, held) == ("0", "2")


def test_too_few_free_gpus_says_who_holds_them(fake_smi: None) -> None:
    gpus = gpupick.query()
    held = {"0": "train[lr=0.1] (dino-train-a1)", "GPU-2b7e1d63-1111-4111-8111-111111111111": "x"}
    with pytest.raises(NoFreeGpus) as raised:
        gpupick.pick(gpus, 3, held)
    assert str(raised.value) == (
        "need 3 free GPU(s), 2 of 4 free: GPU 0 held by train[lr=0.1] (dino-train-a1); GPU 1 "
        "held by x; wait for a job to finish, ask for fewer GPUs, or name GPUs yourself in gpus:"
    )
    assert raised.value.exit_code == 1


def test_a_host_without_a_driver_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_NVIDIA_SMI_CSV", raising=False)
    with pytest.raises(InvalidInput) as raised:
        gpupick.query()
    text = str(raised.value)
    assert "cannot read GPU occupancy (exit 9): nvidia-smi --query-gpu" in text
    assert "couldn't communicate with the NVIDIA driver" in text


def test_over_a_remote_shell_the_query_is_one_argument(fake_smi: None) -> None:
    """ssh HOST CMD and sh -c CMD both hand CMD to a shell: the argument must split back."""
    argv = gpupick.query_argv(("ssh", "-o", "BatchMode=yes", "ubuntu@gpu-box"))
    assert argv[:4] == ("ssh", "-o", "BatchMode=yes", "ubuntu@gpu-box")
    assert shlex.split(argv[4]) == list(gpupick.QUERY)
    assert len(gpupick.query(("sh", "-c"))) == 4


def test_through_brev_exec(fake_smi: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BREV_EMULATOR_STATE", str(tmp_path / "brev.json"))
    for args in (
        ["login", "--token", "t"],
        ["_emulator", "add", "box", "--env", f"FAKE_NVIDIA_SMI_CSV={FOUR}"],
    ):
        subprocess.run(["brev", *args], check=True, capture_output=True)
    gpus = gpupick.query(("brev", "exec", "box"))
    assert gpupick.pick(gpus, 1, {"1": "a"}) == ("3",)


def test_a_query_that_hangs_is_stopped_at_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # after the timeout the query waited for what nvidia-smi (a wrapper here) had started
    pid_file = tmp_path / "pid"
    write(tmp_path / "bin" / "nvidia-smi", f"#!/bin/sh\nsleep 60 & echo $! > {pid_file}\nwait\n")
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def query() -> str:
        with pytest.raises(InvalidInput) as raised:
            gpupick.query(timeout=1)
        return str(raised.value)

    try:
        answer = returned(query, 30)
        assert answer, "the timeout did not bound the query"
        assert "(taospec: timed out after 1 s)" in answer[0]
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
