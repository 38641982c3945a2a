"""Preflight on the real engine here (no GPU runtime), a stand-in nvidia-smi and a small tmpfs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taospec import doctor
from taospec.commands import doctor as doctor_command
from taospec.doctor import Check
from tests.conftest import JOBS, load_job, returned, write

FAKES = Path(__file__).resolve().parent / "fakes"
NGC_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"
TWO_GPUS = "0, GPU-1f3a0c52-0000-4000-8000-000000000000, 30712 MiB\n1, GPU-2b7e, 3 MiB"
NOWHERE = (("DOCKER_HOST", "unix:///nonexistent/docker.sock"),)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted afterwards (tests run as root)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.fixture
def fake_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CSV", TWO_GPUS)


def free(path: str) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


# -- the engine ----------------------------------------------------------------------


@pytest.mark.engine
def test_the_engine_here_has_no_nvidia_runtime_and_says_what_to_do(engine: str) -> None:
    checks = by_name(doctor.engine_checks(gpus=(0,)))
    real = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert checks["docker engine"] == Check("docker engine", True, f"version {real}")
    runtime = checks["NVIDIA runtime"]
    assert not runtime.ok
    assert runtime.detail.startswith("not registered with the engine (runtimes: ")
    assert "runc" in runtime.detail
    assert "nvidia-ctk runtime configure --runtime=docker" in runtime.advice
    # the advice quotes what docker itself says when --gpus is asked of this engine
    launched = subprocess.run(["docker", "run", "--rm", "--gpus", "all", engine, "true"],
                              capture_output=True, text=True, check=False)  # fmt: skip
    assert launched.returncode != 0
    quoted = 'could not select device driver "" with capabilities: [[gpu]]'
    assert quoted in launched.stderr
    assert quoted in runtime.advice


@pytest.mark.engine
def test_without_gpus_the_runtime_is_not_needed(engine: str) -> None:
    checks = by_name(doctor.engine_checks(gpus=()))
    assert checks["NVIDIA runtime"] == Check(
        "NVIDIA runtime", True, "not needed: the job names no GPUs"
    )
    assert checks["docker data root free space"].detail.endswith("(needs 20.0 GiB)")


@pytest.mark.engine
def test_without_a_job_the_runtime_is_reported_and_not_needed(engine: str) -> None:
    # doctor without a file said "not needed: the job names no GPUs" of no job at all
    checks = by_name(doctor.engine_checks(gpus=None))
    runtime = checks["NVIDIA runtime"]
    assert runtime.ok
    assert runtime.detail.startswith("not registered (runtimes: ")  # this engine's own list
    assert runtime.detail.endswith("runc); a GPU job needs it")
    assert doctor.nvidia_runtime(("nvidia", "runc"), None) == Check(
        "NVIDIA runtime", True, "registered (runtimes: nvidia, runc)"
    )


def test_free_space_under_a_file_is_that_of_the_folder_holding_it(tmp_path: Path) -> None:
    # a results_root under a file (refused by its own check) was "free on <the file>"
    (tmp_path / "afile").write_text("x\n")
    check = doctor.free_space("results_root free space", f"{tmp_path}/afile/sub", 1)
    assert check.ok
    assert check.detail.endswith(f" free on {tmp_path} (needs 0.0 MiB)")


def test_no_engine_is_one_failed_check_with_what_to_do() -> None:
    checks = doctor.engine_checks(gpus=(0,), docker_env=NOWHERE)
    assert len(checks) == 1
    (check,) = checks
    assert (check.name, check.ok) == ("docker engine", False)
    assert "Cannot connect to the Docker daemon at unix:///nonexistent/docker.sock" in check.detail
    assert check.advice.startswith("start dockerd")


def test_a_remote_engine_gets_no_filesystem_checks_from_here() -> None:
    remote = (("DOCKER_HOST", "tcp://127.0.0.1:9"),)
    assert not doctor.engine_is_local(remote)
    assert doctor.engine_is_local(NOWHERE)
    names = [c.name for c in doctor.host_checks(image="busybox:1", gpus=(), results_root="/",
                                                docker_env=remote)]  # fmt: skip
    assert names == ["docker engine", "NGC login"]


def docker_first_on_path(tmp: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A ``docker`` script running ``body``, found before the real one."""
    write(tmp / "bin" / "docker", f"#!/bin/sh\n{body}\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}")


def wait_for(path: Path) -> str:
    """The text of ``path`` once something has written a line to it (at most 30 s)."""
    for _ in range(300):
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"nothing wrote {path}")


@pytest.mark.engine
def test_engines_ask_when_made_and_answer_every_job_from_that_one_question(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = subprocess.run(["sh", "-c", "command -v docker"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    calls = tmp_path / "calls"
    docker_first_on_path(tmp_path, monkeypatch, f'echo "$*" >> {calls}\nexec {real} "$@"')
    job = load_job(JOBS / "hello-docker.yaml")
    with doctor.Engines([job, job]) as engines:
        assert wait_for(calls).startswith("info --format")  # asked before anyone reads it
        first, again = engines.answer(job), engines.answer(job)
    assert isinstance(first, doctor.Engine)
    assert again is first
    assert len(calls.read_text().splitlines()) == 1


@pytest.mark.engine
def test_doctor_asks_an_engine_once_for_all_its_jobs(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = subprocess.run(["sh", "-c", "command -v docker"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    calls = tmp_path / "calls"
    docker_first_on_path(tmp_path, monkeypatch, f'echo "$*" >> {calls}\nexec {real} "$@"')
    spec = write(
        tmp_path / "two.yaml",
        f"version: 1\ndefaults:\n  network_arch: demo\n  platform: docker\n  image: {engine}\n"
        f"  results_root: {tmp_path}\n  command: 'true'\njobs:\n"
        "  one: {action: one, docker: {shm_size: 64m}}\n"
        "  two: {action: two, docker: {shm_size: 32m}}\n",
    )
    doctor_command.verb(str(spec))
    shown = capsys.readouterr().out
    assert shown.count("docker engine: version") == 2  # both jobs' checks, one answer
    asked = [line.split()[0] for line in calls.read_text().splitlines()]
    assert asked.count("info") == 1


def test_leaving_the_block_ends_a_question_nobody_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pid"
    docker_first_on_path(tmp_path, monkeypatch, f"echo $$ > {pid_file}\nexec sleep 600")
    started = time.monotonic()
    with doctor.Engines([load_job(JOBS / "hello-docker.yaml")]):
        pid = int(wait_for(pid_file))
        assert os.path.exists(f"/proc/{pid}")
    assert not os.path.exists(f"/proc/{pid}")  # ended and collected, not left behind
    assert time.monotonic() - started < 60


def test_an_engine_that_does_not_answer_fails_at_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # after the timeout docker info was waited for until what it started had ended
    pid_file = tmp_path / "pid"
    docker_first_on_path(tmp_path, monkeypatch, f"sleep 60 & echo $! > {pid_file}\nwait")
    monkeypatch.setattr(doctor, "TIMEOUT", 1)
    try:
        answer = returned(doctor.engine, 30)
        assert answer, "the timeout did not bound the engine check"
        assert isinstance(answer[0], Check)
        assert (answer[0].ok, answer[0].detail) == (False, "(taospec: timed out after 1 s)")
    finally:
        os.kill(int(wait_for(pid_file)), signal.SIGKILL)


@pytest.mark.parametrize(
    ("version", "ok"),
    [("20.10.24+dfsg1", True), ("28.2.2", True), ("v24.0.7", True), ("19.03.15", False),
     ("20.9.0", False), ("", False)],
)  # fmt: skip
def test_docker_must_be_20_10_or_newer(version: str, ok: bool) -> None:
    check = doctor.engine_version(version)
    assert check.ok is ok
    assert bool(check.advice) is not ok


def test_the_docker_client_answers_even_without_an_engine() -> None:
    check = doctor.docker_client(NOWHERE)
    assert check.ok
    assert check.detail.startswith("version ")


# -- GPUs --------------------------------------------------------------------------


def test_named_gpus_are_found_by_index_or_uuid(fake_smi: None) -> None:
    assert doctor.gpus_exist((0, "GPU-2b7e")) == Check(
        "GPUs", True, "0, GPU-2b7e present (the host has GPUs: 0, 1)"
    )
    assert doctor.gpus_exist("all").ok


def test_a_gpu_the_host_lacks_fails(fake_smi: None) -> None:
    check = doctor.gpus_exist((1, 2, "GPU-ffff"))
    assert not check.ok
    assert check.detail == "not on the host: 2, GPU-ffff (the host has GPUs: 0, 1)"
    assert "nvidia-smi -L" in check.advice


def test_all_on_a_host_with_no_gpu_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CSV", "")
    assert doctor.gpus_exist("all").detail == "not on the host: any (the host has GPUs: none)"


def test_no_driver_fails_with_what_nvidia_smi_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_NVIDIA_SMI_CSV", raising=False)
    check = doctor.gpus_exist((0,))
    assert not check.ok
    assert check.detail.startswith("cannot read GPU occupancy (exit 9)")
    assert "install the NVIDIA driver" in check.advice
    assert doctor.gpus_exist(()).ok


# -- NGC login ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ({"auths": {"nvcr.io": {"auth": "JG9hdXRodG9rZW46eA=="}}}, "logged in to nvcr.io "
         "(credentials in {path})"),
        ({"auths": {"https://nvcr.io": {}}, "credsStore": "pass"}, "logged in to nvcr.io "
         "(credentials in docker-credential-pass)"),
        ({"credHelpers": {"nvcr.io": "secretservice"}}, "credentials for nvcr.io kept by "
         "docker-credential-secretservice"),
    ],
)  # fmt: skip
def test_an_ngc_login_in_the_docker_config_passes(
    tmp_path: Path, config: dict[str, object], detail: str
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config))
    env = (("DOCKER_CONFIG", str(tmp_path)),)
    check = doctor.ngc_login(NGC_IMAGE, (), env, {})
    path = tmp_path / "config.json"
    assert check == Check("NGC login", True, detail.format(path=path))


def test_no_ngc_login_fails_and_says_how(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"ghcr.io": {}}}))
    env = (("DOCKER_CONFIG", str(tmp_path)),)
    check = doctor.ngc_login(NGC_IMAGE, ("NGC_KEY",), env, {})
    assert not check.ok
    assert check.detail == (
        f"NGC_KEY is named in env.pass but not set; no login for nvcr.io in {tmp_path}/config.json"
    )
    assert "docker login nvcr.io -u '$oauthtoken' --password-stdin" in check.advice
    assert doctor.ngc_login(NGC_IMAGE, ("NGC_KEY",), env, {"NGC_KEY": "nvapi-x"}).ok
    assert doctor.ngc_login("busybox:1", (), env, {}).ok


# -- space -------------------------------------------------------------------------------


def test_results_root_on_a_small_disk_fails(small_fs: Path) -> None:
    check = doctor.free_space("results_root free space", str(small_fs / "results" / "a"),
                              doctor.RESULTS_MIN_FREE)  # fmt: skip
    assert not check.ok
    assert check.detail == f"16.0 MiB free on {small_fs} (needs 5.0 GiB)"
    assert "results_root at a larger disk" in check.advice
    assert doctor.free_space("x", str(small_fs), 8 * 1024 * 1024).ok


def test_a_filling_disk_is_seen(small_fs: Path) -> None:
    need = 8 * 1024 * 1024
    assert doctor.free_space("x", str(small_fs), need).ok
    (small_fs / "fill").write_bytes(b"\0" * (12 * 1024 * 1024))
    assert not doctor.free_space("x", str(small_fs), need).ok


def test_a_small_dev_shm_fails_for_ipc_host(small_fs: Path) -> None:
    check = doctor.shm("8g", "host", str(small_fs))
    assert not check.ok
    assert check.detail == f"16.0 MiB free of 16.0 MiB on {small_fs}; the job asks 8g"
    assert "Bus error" in check.advice
    assert doctor.shm("8m", "host", str(small_fs)).ok
    assert doctor.shm("8g", "private", str(small_fs)).ok


def test_dev_shm_is_measured_in_each_size_form_docker_reads(small_fs: Path) -> None:
    # 16 MiB free: what docker reads as 16 MiB or less fits, what it reads as more does not
    for size in ("16MB", "16mib", "0.015625g", "16384K", "16384kb", "16777216b"):
        assert doctor.shm(size, "host", str(small_fs)).ok, size
    for size, mib in (("16.5m", 17), ("1t", 1024**2), ("1P", 1024**3), ("17MB", 17)):
        check = doctor.shm(size, "host", str(small_fs))
        assert not check.ok, size
        # tmpfs takes a whole number and one letter: the size in MiB, rounded up
        assert f"remount,size={mib}m {small_fs})" in check.advice, check.advice


def test_the_shm_check_reads_a_size_as_docker_does(small_fs: Path) -> None:
    # doctor read sizes more narrowly than docker and validate: these raised ValueError
    for size, fits in (("8 MB", True), (".5m", True), ("1e3m", False), ("1_000m", False)):
        assert doctor.shm(size, "host", str(small_fs)).ok is fits, size


# -- the command ----------------------------------------------------------------------------


def test_the_command_prints_each_check_and_advice(capsys: pytest.CaptureFixture[str]) -> None:
    checks = [
        Check("docker engine", True, "version 20.10.24"),
        Check("NVIDIA runtime", False, "not registered", "install the toolkit"),
    ]
    assert doctor_command.run(checks) == 1
    assert capsys.readouterr().out == (
        "ok    docker engine: version 20.10.24\n"
        "FAIL  NVIDIA runtime: not registered\n"
        "      install the toolkit\n"
    )
    assert doctor_command.run(checks[:1]) == 0


def test_the_command_prints_no_secret_a_check_quotes(capsys: pytest.CaptureFixture[str]) -> None:
    token = "ghp_" + "D" * 36
    quoted = Check(
        "docker engine", False, f"cannot connect to https://u:{token}@h", f"-e T={token}"
    )
    assert doctor_command.run([quoted]) == 1
    out = capsys.readouterr().out
    assert token not in out
    assert "FAIL  docker engine: cannot connect to https://u:<redacted>@h" in out


@pytest.mark.engine
def test_full_checks_on_this_host(engine: str, fake_smi: None, small_fs: Path) -> None:
    checks = doctor.host_checks(image=engine, gpus=(0,), results_root=str(small_fs), full=True)
    root = subprocess.run(["docker", "info", "--format", "{{.DockerRootDir}}"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert [(c.name, c.ok) for c in checks] == [
        ("docker client", True),
        ("docker engine", True),
        ("NVIDIA runtime", False),
        ("docker data root free space", free(root) >= 20 * 1024**3),
        ("NGC login", True),
        ("results_root free space", False),
        ("/dev/shm", free("/dev/shm") >= 8 * 1024**3),
        ("GPUs", True),
    ]


def test_the_gpus_of_an_ssh_engine_are_asked_on_that_host(
    fake_smi: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvidia-smi runs through ssh (here an ssh that runs the command locally, and notes
    where it was sent); a host reached only through docker is not checked."""
    sent = tmp_path / "sent"
    (tmp_path / "bin").mkdir()
    ssh = tmp_path / "bin" / "ssh"
    ssh.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -G "*) echo "connecttimeout none"; exit 0;; esac\n'  # ssh -G says
        'while [ "$1" != -- ]; do shift; done\n'
        f'echo "$2" >> {sent}\n'
        'shift 2\nexec sh -c "$*"\n'
    )
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    remote_host = (("DOCKER_HOST", "ssh://ubuntu@gpu-box:2222"),)
    assert doctor.gpus_exist((1,), remote_host) == Check(
        "GPUs", True, "1 present (the host has GPUs: 0, 1)"
    )
    assert sent.read_text() == "ubuntu@gpu-box\n"
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")  # no nvidia-smi
    missing = doctor.gpus_exist((1,), remote_host)
    assert not missing.ok
    assert "ssh reaches ssh://ubuntu@gpu-box:2222 and nvidia-smi answers" in missing.advice
    tcp = doctor.gpus_exist((0,), (("DOCKER_HOST", "tcp://gpu-box:2376"),))
    assert tcp == Check(
        "GPUs", True, "not checked: nvidia-smi cannot be run on tcp://gpu-box:2376 from here"
    )
