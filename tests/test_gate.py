"""``validate`` refuses what ``render`` and ``run`` would refuse, each at its place.

One test per kind of job file that used to pass ``validate`` (or crash it),
then a generated product of mutations of a good job file: ``validate --here``
refuses exactly what ``render`` or ``run -n`` refuses on this machine, with
the same messages, and nothing ever ends in a traceback. Last, what ``validate``
passes, ``render`` renders, for every value of every example set to each of a
list of wrongly typed values and every string to each of a list of hostile texts.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from taospec import dockerargs, loader, preflight, rules
from taospec.cli import main
from taospec.diagnostics import SpecError
from taospec.errors import InvalidInput
from taospec.identity import Identity
from taospec.loader import load_located
from taospec.plan import upstream_stand_ins
from taospec.platforms import render
from taospec.versions import Images
from tests.conftest import JOBS, ROOT, TEST_IMAGE, Runner, taospec_command, write

LOCATED = re.compile(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): (?P<path>\$\S*): (?P<msg>.+)$")

BASE = """\
version: 1
network_arch: hello
action: greet
platform: docker
image: busybox:1
results_root: {root}
user: "1000:1000"
command: sh -c 'echo hi'
"""


def job(tmp_path: Path, extra: str = "", name: str = "job.yaml") -> Path:
    return write(tmp_path / name, BASE.format(root=tmp_path / "results") + extra)


def greet(platform: str, results_root: object, rest: str = "") -> str:
    """A job file's text: busybox greeting on ``platform``, its results under ``results_root``."""
    return (
        "version: 1\nnetwork_arch: hello\naction: greet\n"
        f"platform: {platform}\nimage: busybox:1\nresults_root: {results_root}\n"
        f"command: echo hi\n{rest}"
    )


def refused(result: subprocess.CompletedProcess[str], *expected: str) -> list[str]:
    """Assert exit 2, located lines, each expected text present; return the located lines."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if LOCATED.match(line)]
    assert lines, result.stderr
    for text in expected:
        assert any(text in line for line in lines), (text, result.stderr)
    return lines


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ("docker: {1: x}\n", ":9:10: $.docker['1']: key '1' is not text to YAML (it reads as int)"),
        ("~: 1\n", ":9:1: $['~']: key '~' is not text to YAML (it reads as null)"),
        ("true: 1\n", ":9:1: $.true: key 'true' is not text to YAML (it reads as bool)"),
        ("2020-01-01: x\n", ":9:1: $['2020-01-01']: key '2020-01-01' is not text"),
    ],
)
def test_non_text_keys_are_refused_at_the_key(
    taospec: Runner, tmp_path: Path, state_dir: Path, extra: str, where: str
) -> None:
    path = job(tmp_path, extra)
    result = taospec("validate", path)
    refused(result, str(path) + where)
    assert list(state_dir.iterdir()) == []


def test_a_nul_character_is_refused_where_it_is_written(taospec: Runner, tmp_path: Path) -> None:
    # a key too: the plan's stand-ins are NUL-delimited, and a spec key "\0JOB_ID\0" was
    # filled with the job id at submit
    spec = 'spec: {train: {tags: [x, "y\\0"]}, "\\0JOB_ID\\0": 1}\n'
    path = job(tmp_path, 'env: {set: {A: "a\\0b"}}\n' + spec)
    lines = refused(taospec("validate", path), "contains a NUL character")
    paths = [LOCATED.match(line)["path"] for line in lines]
    assert paths == ["$.env.set.A", "$.spec.train.tags[1]", "$.spec['\\x00JOB_ID\\x00']"]
    assert lines[-1].startswith(f"{path}:10:35: ")  # at the key
    # an env value is a process's environment entry; the spec goes into a file, where a NUL
    # is refused because taospec's own stand-ins are written with it
    assert lines[0].endswith(": contains a NUL character, which no process argument can hold")
    for line in lines[1:]:
        assert line.endswith(
            ": contains a NUL character, which taospec reserves to mark, in the spec it "
            "renders, the values it fills in at submit (the job id, an upstream's results "
            "folder)"
        ), line


@pytest.mark.parametrize(
    ("mounts", "expected"),
    [
        ("[{source: /tmp, target: /results/stage}]",
         "$.mounts[0].target: /results/stage is at or under /results"),
        ("[{source: /tmp, target: /data}, {source: /srv, target: /x/../data}]",
         "$.mounts[1].target: /x/../data (as /data) is already the target of mounts[0]"),
        ("[{source: '/tmp/a:b', target: /data}]",
         "$.mounts[0].source: docker run -v separates source, target and options with ':'"),
        ("[{source: /tmp, target: /data}, {source: /srv, target: /data/}]",
         "$.mounts[1].target: /data/ (as /data) is already the target of mounts[0]"),
    ],
)  # fmt: skip
def test_mounts_docker_rejects_are_refused(
    taospec: Runner, tmp_path: Path, mounts: str, expected: str
) -> None:
    path = job(tmp_path, f"mounts: {mounts}\n")
    refused(taospec("validate", path), expected)
    refused(taospec("render", path), expected)


def test_mounts_under_dev_and_at_sys_itself_are_left_to_run(
    engine: str, taospec: Runner, open_tmp: Path
) -> None:
    # the container's /dev is its own tmpfs, where a target is made; /sys itself is covered
    mounts = f"[{{source: {open_tmp}, target: /dev/data}}, {{source: {open_tmp}, target: /sys}}]"
    path = job(open_tmp, f"mounts: {mounts}\n")
    path.write_text(path.read_text().replace("busybox:1", engine))
    done = taospec("run", "-f", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hi\n")


@pytest.mark.parametrize(
    "target", ["/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv"]
)
def test_a_folder_mounted_over_a_file_docker_writes_is_refused_here(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path, target: str
) -> None:
    # docker writes these files into every container; a folder over one failed the launch
    # with "not a directory", once the record was open
    folder = open_tmp / "folder"
    folder.mkdir()
    path = job(open_tmp, f"mounts: [{{source: {folder}, target: {target}}}]\n")
    path.write_text(path.read_text().replace("busybox:1", engine))
    assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
    said = (
        f"{path}:9:{29 + len(str(folder))}: $.mounts[0].target: {folder} is a folder on this "
        f"machine, and docker writes {target} into every container as a file"
    )
    refused(taospec("validate", "--here", path), said)
    refused(taospec("run", path), said)
    assert not (state_dir / "jobs").exists()  # no record was opened
    folder.rmdir()
    folder.write_text("127.0.0.1 localhost\n")  # a file over the file is docker's own way
    done = taospec("run", "-f", path)
    assert done.returncode == 0, done.stderr


def test_validate_here_checks_this_machine_and_run_checks_mounts_before_recording(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    missing = tmp_path / "no-such-dataset"
    path = job(
        tmp_path, f"mounts: [{{source: {missing}, target: /data}}]\nenv: {{pass: [GATE_VAR]}}\n"
    )
    plain = taospec("validate", path)
    assert plain.returncode == 0, plain.stderr
    here = taospec("validate", "--here", path)
    refused(
        here,
        f"{path}:9:19: $.mounts[0].source: {missing} does not exist on this machine",
        f"{path}:10:14: $.env.pass[0]: GATE_VAR is not set in this environment",
    )
    assert taospec("validate", "--here", path, env={"GATE_VAR": "1"}).returncode == 2
    missing.mkdir()
    assert taospec("validate", "--here", path, env={"GATE_VAR": "1"}).returncode == 0
    missing.rmdir()
    ran = taospec("run", path, env={"GATE_VAR": "1"})
    refused(ran, f"{path}:9:19: $.mounts[0].source: {missing} does not exist")
    checked = taospec("run", "--check", path)
    refused(checked, f"{path}:9:19: $.mounts[0].source: {missing} does not exist")
    # A dry run warns and still shows the plan, for a job meant for another machine.
    dry = taospec("run", "-n", path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.startswith(
        f"warning: {path}:9:19: $.mounts[0].source: {missing} does not exist on this machine"
    )
    assert dry.stderr.count("warning:") == 1
    assert f"-v {missing}:/data" in dry.stdout
    doctored = taospec("doctor", path)  # doctor FILE reports it as a failed check
    assert doctored.returncode == 1, doctored.stderr
    assert doctored.stdout.splitlines()[0] == (
        f"FAIL  {path}:9:19: $.mounts[0].source: {missing} does not exist on this machine; the "
        "Docker engine would create it as an empty root-owned directory and the job would see "
        "no data. Create it, or fix the path (run stops here)"
    )
    assert "docker engine: " in doctored.stdout  # and still checks the job's host
    assert not missing.exists()
    assert list(state_dir.iterdir()) == []  # no record was opened


def test_run_refuses_an_env_file_missing_here_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # docker run read it only once the record was open: exit 125, "open ...: no such file"
    missing = tmp_path / "no-such.env"
    path = job(
        tmp_path, f"docker:\n  extra_args: [--env-file, {missing}, '--env-file={missing}']\n"
    )
    assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
    expected = [
        f"{path}:10:{column}: $.docker.extra_args[{index}]: --env-file {missing} does not exist "
        "on this machine, where docker run reads it (whatever engine it runs on)"
        for column, index in ((16, 0), (30 + len(str(missing)), 2))
    ]
    refused(taospec("validate", "--here", path), *expected)
    refused(taospec("run", path), *expected)
    dry = taospec("run", "-n", path)  # a review warns of it and still shows the plan
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.startswith(f"warning: {expected[0]}")
    remote = write(tmp_path / "remote.yaml", path.read_text() + "  host: ssh://gpu.invalid\n")
    refused(taospec("validate", "--here", remote), "(whatever engine it runs on)")
    assert list(state_dir.iterdir()) == []  # no record was opened
    missing.write_text("GREETING=hi\n")
    assert taospec("validate", "--here", path).returncode == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("[--restart, always]", "--restart always: a job's record holds one run"),
        ("['--restart=on-failure:3']", "--restart on-failure:3: a job's record holds one run"),
        ("[--restart, unless-stopped]", "Retry a failed job with retry: (each attempt a new"),
        ("[--log-driver, none]", "--log-driver none: taospec reads the job's output with docker"),
        ("['--log-driver=none']", "the none driver keeps none of it"),
    ],
)
def test_an_option_that_undoes_how_taospec_runs_and_reads_a_container_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, args: str, said: str
) -> None:
    # a container restarted by its policy ran the job again under the same record (with
    # always, a job that ended never ended, each run over the last one's results); with no
    # log the job ran, but logs, run -f, a failure's diagnosis and the copy kept at cancel
    # got nothing: "configured logging driver does not support reading"
    path = job(tmp_path, f"docker: {{extra_args: {args}}}\n")
    for verb in ("validate", "run"):
        refused(taospec(verb, path), f"{path}:9:23: $.docker.extra_args[0]: ", said)
    assert not (state_dir / "jobs").exists()


def test_a_restart_policy_of_no_and_a_log_docker_logs_reads_are_taken(
    engine: str, taospec: Runner, tmp_path: Path
) -> None:
    plain = job(tmp_path, "docker: {extra_args: [--restart, 'no']}\n", "plain.yaml")
    assert taospec("validate", plain).returncode == 0  # docker's default, which changes nothing
    unlogged = job(tmp_path, "docker: {extra_args: [--log-driver, none]}\n")
    attached = write(tmp_path / "slurm.yaml", unlogged.read_text().replace(
        "platform: docker", "platform: slurm\nslurm: {container: docker}"))  # fmt: skip
    assert "log-driver" not in taospec("validate", attached).stderr  # its run is attached
    local = job(tmp_path, "docker: {extra_args: [--log-driver, local]}\n", "local.yaml")
    local.write_text(local.read_text().replace("busybox:1", engine))
    done = taospec("run", "-f", local)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hi\n")  # docker logs reads the local driver


def test_run_refuses_a_seccomp_profile_missing_or_unread_here_before_any_record(
    engine: str, taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # docker run reads the profile itself, here, and sends the engine its JSON: one missing
    # (or not JSON) failed the launch with exit 125 once the record was open
    profile = tmp_path / "seccomp.json"
    path = job(tmp_path, f"docker:\n  extra_args: ['--security-opt=seccomp={profile}']\n")
    assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
    said = f"{path}:10:16: $.docker.extra_args[0]: --security-opt seccomp={profile}: "
    missing = said + "the seccomp profile does not exist on this machine, where docker run "
    refused(taospec("validate", "--here", path), missing + "reads it (whatever engine")
    refused(taospec("run", path), missing)
    profile.write_text("{not json")
    refused(taospec("run", path), said + "the seccomp profile is not JSON")
    assert list(state_dir.iterdir()) == []  # no record was opened
    profile.write_text('{"defaultAction": "SCMP_ACT_ALLOW"}')
    assert taospec("validate", "--here", path).returncode == 0
    ran = subprocess.run(
        ["docker", "run", "--rm", f"--security-opt=seccomp={profile}", engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr  # the engine takes the profile taospec passed


def test_an_env_file_setting_what_gpus_decides_is_refused_without_its_values(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # -e CUDA_VISIBLE_DEVICES was refused, but an env file handed the container the same
    env_file = tmp_path / "job.env"
    env_file.write_text(
        "\ufeff# GPUs\n\nTOKEN=s3cr3t-Value-42\n  CUDA_VISIBLE_DEVICES=s3cr3t-Value-43\n"
        "TAO_JOB_ID\nCUDA_VISIBLE_DEVICES=s3cr3t-Value-44\n#NVIDIA_VISIBLE_DEVICES=all\n"
    )
    path = job(tmp_path, f"docker:\n  extra_args: [--init, --env-file, {env_file}]\n")
    assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
    expected = [
        f"{path}:10:24: $.docker.extra_args[1]: --env-file {env_file} sets {name}: "
        for name in ("CUDA_VISIBLE_DEVICES", "TAO_JOB_ID")
    ]
    for verb in (("validate", "--here"), ("run",), ("run", "-n")):
        result = taospec(*verb, path)
        assert "s3cr3t" not in result.stdout + result.stderr
        if verb == ("run", "-n"):  # a review warns of it and still shows the plan
            assert result.returncode == 0, result.stderr
            assert result.stderr.startswith(f"warning: {expected[0]}")
            continue
        lines = refused(result, *expected, "choose them with gpus: instead")
        assert len(lines) == 2, lines
    assert list(state_dir.iterdir()) == []  # no record was opened
    env_file.write_text("# CUDA_VISIBLE_DEVICES=0\nTOKEN=x\nCUDA_VERSION\n")
    done = taospec("validate", "--here", path)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("platform", ["local", "docker"])
def test_a_results_root_that_is_a_file_is_refused_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path, platform: str
) -> None:
    path = job(tmp_path)
    path.write_text(path.read_text().replace("platform: docker", f"platform: {platform}"))
    (tmp_path / "results").write_text("not a folder\n")
    assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
    for verb in (("validate", "--here"), ("run",)):
        refused(
            taospec(*verb, path),
            f"{path}:6:15: $.results_root: {tmp_path / 'results'} is not a folder on this "
            "machine; each job's results go in a folder made under results_root",
        )
    dry = taospec("run", "-n", path)  # a review warns of it and still shows the plan
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.startswith(f"warning: {path}:6:15: $.results_root: ")
    doctored = taospec("doctor", path)  # doctor FILE reports it as a failed check
    assert doctored.returncode == 1, doctored.stderr
    assert doctored.stdout.splitlines()[0] == (
        f"FAIL  {path}:6:15: $.results_root: {tmp_path / 'results'} is not a folder on this "
        "machine; each job's results go in a folder made under results_root: give a folder, "
        "or move what is there (run stops here)"
    )
    path.write_text(path.read_text().replace("/results", "/results/sub"))
    refused(
        taospec("run", path),
        f"{path}:6:15: $.results_root: {tmp_path / 'results/sub'} lies under "
        f"{tmp_path / 'results'}, which is not a folder on this machine",
    )
    assert list(state_dir.iterdir()) == []  # no record was opened


def test_a_results_root_targets_share_is_asked_of_the_machine_once_and_refused_at_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "results").write_text("not a folder\n")
    (tmp_path / "elsewhere").mkdir()
    path = tmp_path / "pipeline.yaml"
    lines = ["version: 1", "defaults:", "  platform: local", "  network_arch: n"]
    lines += ["  image: busybox", "  command: 'true'", "jobs:"]
    for name, root in (("a", "results"), ("b", "results"), ("c", "results"), ("d", "elsewhere")):
        lines += [f"  {name}:", "    action: x", f"    results_root: {tmp_path / root}"]
    path.write_text("\n".join(lines) + "\n")
    asked: list[str] = []
    unusable = preflight.results_root_unusable

    def asking(platform: str, host: str | None, root: str) -> str | None:
        asked.append(root)
        return unusable(platform, host, root)

    monkeypatch.setattr(preflight, "results_root_unusable", asking)
    jobfile, sources = load_located(str(path))
    found = [str(p) for p in preflight.here(jobfile, sources).problems]
    assert sorted(asked) == [str(tmp_path / "elsewhere"), str(tmp_path / "results")]
    assert [p.split(": $.")[0] for p in found] == [f"{path}:{n}:19" for n in (10, 13, 16)]
    assert all(f"{tmp_path / 'results'} is not a folder on this machine" in p for p in found)


@pytest.mark.parametrize("platform", ["local", "docker"])
def test_a_results_root_its_user_may_not_write_in_is_unusable(
    open_tmp: Path, platform: str
) -> None:
    """The check found a folder there and passed; the record then opened and the launch's
    install -d failed for want of permission, diagnosed as a missing file. Asked as user
    1000 (a child of this process, as this machine's Python is private to root), and without
    making anything."""
    locked = open_tmp / "locked"
    locked.mkdir(mode=0o755)  # root's: user 1000 reads it and may not write in it
    root = str(locked / "results")
    read, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: what it found goes through the pipe, and it ends there
        try:
            os.setgroups([])
            os.setgid(1000)
            os.setuid(1000)
            why = preflight.results_root_unusable(platform, None, root) or ""
            os.write(write_end, why.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read, "rb") as said:
        why = said.read().decode()
    assert os.waitpid(child, 0)[1] == 0
    assert why == (
        f"{root} cannot be made on this machine: {locked} takes no new folder (this user may "
        "not write in it); each job's results go in a folder made under results_root"
    )
    assert list(locked.iterdir()) == []  # nothing was made to find it out
    assert preflight.results_root_unusable(platform, None, root) is None  # root may


@pytest.mark.parametrize(
    ("root", "mount", "kind"),
    [("/proc/taospec-results", "/proc", "proc"), ("/dev/pts/results", "/dev/pts", "devpts")],
)
def test_a_results_root_on_a_kernel_filesystem_is_refused_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path, root: str, mount: str, kind: str
) -> None:
    """/proc takes no folder whoever asks, yet statvfs calls it writable and root may write
    there: validate --here passed, and run recorded an ERROR when the launch made none."""
    path = job(tmp_path)
    for platform in ("local", "docker"):
        path.write_text(
            path.read_text()
            .replace(str(tmp_path / "results"), root)
            .replace("platform: docker", f"platform: {platform}")
            .replace("platform: local", f"platform: {platform}")
        )
        assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
        for verb in (("validate", "--here"), ("run",)):
            refused(
                taospec(*verb, path),
                f"{path}:6:15: $.results_root: {root} cannot be made on this machine: {mount} "
                f"takes no new folder (it is a {kind} filesystem, which holds no files but the "
                "kernel's own); each job's results go in a folder made under results_root",
            )
    assert list(state_dir.iterdir()) == []  # no record was opened
    assert not os.path.exists(root)


LOCAL_PIPELINE = """\
version: 1
defaults: {{network_arch: hello, platform: local, image: busybox:1, results_root: {root}}}
jobs:
  greet:
    action: greet
    command: sh -c 'echo hi'
"""


def pipeline(tmp_path: Path, extra: str) -> Path:
    text = LOCAL_PIPELINE.format(root=tmp_path / "results") + extra
    return write(tmp_path / "pipeline.yaml", text)


@pytest.mark.parametrize(
    "make",
    [
        lambda folder: folder.symlink_to(folder.parent / "nowhere"),  # a broken link
        os.mkfifo,
        lambda folder: None,  # nothing there
    ],
    ids=["broken-link", "fifo", "missing"],
)
def test_an_input_that_is_not_a_file_or_folder_is_refused_at_its_key(
    taospec: Runner, tmp_path: Path, state_dir: Path, make: Any
) -> None:
    # a broken link was a traceback (exit 3), a FIFO hung the run, a missing input had no place
    make(tmp_path / "data")
    path = pipeline(tmp_path, "    inputs: [data]\n")
    for verb in (("validate", "--here"), ("run", "-n"), ("run",)):
        lines = refused(taospec(*verb, path, timeout=60), f"{path}:7:14: $.jobs.greet.inputs[0]: ")
        assert f"{tmp_path / 'data'} " in lines[0]
    assert list(state_dir.iterdir()) == []


@pytest.mark.parametrize("inside", ["broken-link", "fifo"])
def test_what_an_input_folder_holds_that_is_no_file_is_refused_at_the_input(
    taospec: Runner, tmp_path: Path, state_dir: Path, inside: str
) -> None:
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("a\n")
    odd = folder / "sub" / "odd"
    odd.symlink_to(tmp_path / "nowhere") if inside == "broken-link" else os.mkfifo(odd)
    path = pipeline(tmp_path, "    inputs: [data]\n")
    # validate --here looked at the input itself only, and passed what run then refused
    for verb in (("validate", "--here"), ("run", "--check"), ("run", "-n"), ("run",)):
        lines = refused(taospec(*verb, path, timeout=60), f"{path}:7:14: $.jobs.greet.inputs[0]: ")
        assert f"data: {odd} " in lines[0]
    assert list(state_dir.iterdir()) == [] or not (state_dir / "jobs").exists()


def test_a_matrix_value_that_would_blur_target_names_is_refused(
    taospec: Runner, tmp_path: Path
) -> None:
    # x="1,y=2" y="3" and x="1" y="2,y=3" were both a[x=1,y=2,y=3]: one sweep point was lost
    path = pipeline(
        tmp_path,
        "    matrix: {x: ['1,y=2', '1'], y: ['3', '2,y=3']}\n"
        "    command: sh -c 'echo \"$1\"' sh {matrix.x}\n",
    )
    path.write_text(path.read_text().replace("    command: sh -c 'echo hi'\n", "", 1))
    lines = refused(taospec("validate", path),
                    "$.jobs.greet.matrix.x[0]: x='1,y=2' cannot be a matrix value",
                    "$.jobs.greet.matrix.y[1]: y='2,y=3' cannot be a matrix value")  # fmt: skip
    assert len(lines) == 2


def test_a_matrix_value_with_a_control_character_is_refused(
    taospec: Runner, tmp_path: Path
) -> None:
    # a newline in it made a target name of two lines, in run's line per target and its summary
    path = pipeline(tmp_path, '    matrix: {x: ["p\\nq", "a\\tb", ok]}\n')
    path.write_text(path.read_text().replace("echo hi'", "echo hi' {matrix.x}"))
    for verb in (("validate",), ("run", "--check"), ("render",)):
        lines = refused(taospec(*verb, path),
                        "$.jobs.greet.matrix.x[0]: x='p\\nq' cannot be a matrix value",
                        "$.jobs.greet.matrix.x[1]: x='a\\tb' cannot be a matrix value")  # fmt: skip
        assert len(lines) == 2, lines


def test_a_problem_every_matrix_target_shares_is_reported_once(
    taospec: Runner, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-dataset"
    path = pipeline(tmp_path, f"    matrix: {{lr: [1, 2]}}\n    mounts: [{{source: {missing}, "
                    "target: /data}]\n")  # fmt: skip
    path.write_text(path.read_text().replace("platform: local", "platform: docker, user: '1:1'"))
    for verb in (("run", "--check"), ("validate", "--here")):
        lines = refused(taospec(*verb, path), f"$.jobs.greet.mounts[0].source: {missing} does not")
        assert len(lines) == 1, lines
    warned = taospec("run", "-n", path)  # a dry run warns, once, and shows the plans
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.count(f"$.jobs.greet.mounts[0].source: {missing} does not") == 1


def test_a_passed_value_written_in_the_job_is_refused_where_it_is_written(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # it landed in argv, the spec file and the plan; the ledger redacted it out of the
    # record's paths, which then named no real folder (and a retry ran "<redacted>")
    value = "correcthorsebattery"
    (tmp_path / value).mkdir()
    path = job(
        tmp_path,
        f"env: {{pass: [GATE_VAR], set: {{NOTE: 'a {value}'}}}}\n"
        f"mounts: [{{source: {tmp_path / value}, target: /data}}]\nspec: {{{value}: 1}}\n",
    )
    env = {"GATE_VAR": value}
    expected = "holds the value of GATE_VAR, which env.pass passes by name"
    for verb in (("validate", "--here"), ("render",), ("run", "-n"), ("run",)):
        done = taospec(*verb, path, env=env)
        lines = refused(done, f"{path}:9:37: $.env.set.NOTE: {expected}",
                        f"{path}:10:19: $.mounts[0].source: {expected}",
                        f"{path}:11:8: $.spec.<redacted>: {expected}")  # fmt: skip
        assert len(lines) == 3
        assert value not in done.stdout + done.stderr
    assert list(state_dir.iterdir()) == []
    short = taospec("validate", "--here", path, env={"GATE_VAR": "abc"})  # too short to redact
    assert short.returncode == 0, short.stderr


@pytest.mark.parametrize(
    ("arch", "action", "expected"),
    [
        ("model_Pa-ss-w0rd-42", "greet", "2:15: $.network_arch"),
        ("hello", "x-Pa-ss-w0rd-42", "3:9: $.action"),
        ("Pa-ss", "w0rd-42", "1:1: $"),  # across the two: the id is Pa-ss-w0rd-42-<hex>
    ],
    ids=["arch", "action", "across"],
)
def test_a_passed_value_a_minted_id_would_spell_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, arch: str, action: str, expected: str
) -> None:
    # the id minted from these spells "Pa'ss w0rd!42" as Pa-ss-w0rd-42, where redaction did
    # not look: the ledger, the output and the container's name carried it
    value = "Pa'ss w0rd!42"
    path = job(tmp_path, "env: {pass: [GATE_VAR]}\n")
    text = path.read_text().replace("network_arch: hello", f"network_arch: {arch}")
    path.write_text(text.replace("action: greet", f"action: {action}"))
    for verb in (("validate", "--here"), ("render",), ("run", "-n"), ("run",)):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        lines = refused(done, f"{path}:{expected}: the job's id, minted from network_arch and")
        assert len(lines) == 1, lines
        assert value not in done.stdout + done.stderr
        assert "Pa-ss-w0rd" not in done.stdout + done.stderr.replace(str(path), "")
    assert list(state_dir.iterdir()) == []
    short = taospec("run", "-n", path, env={"GATE_VAR": "Pa'!!"})  # Pa-: too short to look for
    assert short.returncode == 0, short.stderr


@pytest.mark.parametrize(
    ("command", "extra", "expected"),
    [
        ("\"sh -c 'sleep 3' correct''horse''battery\"", "", "8:10: $.command"),
        ('"echo correct\\\\horsebattery"', "", "8:10: $.command"),
        ("[sh, -c, \"bash -c 'echo correct\\\\horsebattery'\"]", "", "8:19: $.command[2]"),
        ("'true'", "notify: \"echo correct''horse''battery\"\n", "10:9: $.notify"),
        ("[sh, -c, 'echo $(printf %s correct\"horse\"battery)']", "", "8:19: $.command[2]"),
        ("[sh, -c, 'echo `printf %s correct\"horse\"battery`']", "", "8:19: $.command[2]"),
        ("[sh, -c, 'echo ${U:-correct\"horse\"battery}']", "", "8:19: $.command[2]"),
        ("[sh, -c, 'echo ${U:=correct''horse''battery}']", "", "8:19: $.command[2]"),
        ("[sh, -c, 'echo ${HOME:+correct\"\"horse\"\"battery}']", "", "8:19: $.command[2]"),
        ("[sh, -c, 'echo \"${U:-$(printf %s correct\"horse\"battery)}\"']", "",
         "8:19: $.command[2]"),
        ("'true'", "notify: \"echo $(printf %s correct''horse''battery)\"\n", "10:9: $.notify"),
    ],
    ids=[
        "quotes-join", "backslash", "nested-script", "notify", "substitution", "backticks",
        "default", "assign", "alternative", "nested-expansions", "notify-substitution",
    ],
)  # fmt: skip
def test_a_passed_value_that_quote_removal_joins_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, command: str, extra: str, expected: str
) -> None:
    # only the strings as written were checked: a shell (or the split of a string command)
    # joined the pieces, and render, run -n and the job's argv held the value whole
    value = "correcthorsebattery"
    path = job(tmp_path, "env: {pass: [GATE_VAR]}\n" + extra)
    path.write_text(path.read_text().replace("sh -c 'echo hi'", command))
    for verb in (("validate", "--here"), ("render",), ("run", "-n"), ("run",)):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        lines = refused(done, f"{path}:{expected}: holds the value of GATE_VAR")
        assert len(lines) == 1, lines
        assert value not in done.stdout + done.stderr
    assert list(state_dir.iterdir()) == []


def test_expansions_that_hold_no_passed_value_pass(taospec: Runner, tmp_path: Path) -> None:
    # the words inside $(...), backticks and ${NAME:-word} are read for a passed value: an
    # ordinary script that holds none, and the repository's own jobs, are no refusal
    script = (
        '[sh, -c, \'echo "$(date +%s)" ${HOME:-/tmp} `id -u` ${X:+-v} $((1 + 2)) '
        '"${GATE_VAR:?}" $(printf %s "$GATE_VAR")\']'
    )
    path = job(tmp_path, "env: {pass: [GATE_VAR]}\nnotify: 'echo \"$(hostname)\" `date`'\n")
    path.write_text(path.read_text().replace("sh -c 'echo hi'", script))
    done = taospec("run", "-n", path, env={"GATE_VAR": "correcthorsebattery"})
    assert done.returncode == 0, done.stderr
    assert "date +%s" in done.stdout
    assert "hostname" in done.stdout
    values = dict.fromkeys(("NGC_KEY", "HF_TOKEN", "WANDB_API_KEY"), "correcthorsebattery")
    for example in sorted(JOBS.glob("*.yaml")):
        if example.name != "versions.yaml":
            shown = taospec("render", example, env=values)
            assert shown.returncode == 0, (example, shown.stderr)


def test_a_refusal_before_the_job_is_typed_quotes_no_passed_value(
    taospec: Runner, tmp_path: Path
) -> None:
    # a schema error quoted the value: the passed names were known only once the job
    # was loaded, and a name that looks like no secret's (PLAIN_VAR) is not guessed at
    value = "correcthorsebattery"
    path = job(tmp_path, f"env: {{pass: [GATE_VAR]}}\nplatform: {value}\n")
    path.write_text(path.read_text().replace("platform: docker\n", "", 1))
    for verb in (("validate",), ("validate", "--format", "json"), ("render",), ("run",)):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        assert done.returncode == 2, done.stderr
        assert "$.platform" in done.stdout + done.stderr
        assert value not in done.stdout + done.stderr, verb


def test_a_refusal_quotes_no_passed_value_escaped(taospec: Runner, tmp_path: Path) -> None:
    # the schema error showed the value as repr() escapes it, 'Q7w\\e9Rt\'y"u1Io', and
    # redaction looked for it only as it is
    value = "Q7w\\e9Rt'y\"u1Io"
    path = job(tmp_path, "env: {pass: [GATE_VAR]}\nstorage_tier: " + json.dumps(value) + "\n")
    for verb in (("validate",), ("validate", "--format", "json")):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        assert done.returncode == 2, done.stderr
        said = done.stdout + done.stderr
        assert "$.storage_tier" in said
        assert "u1Io" not in said, verb
        assert "<redacted>" in said, verb


def test_a_refusal_cuts_a_value_it_quotes_only_once_it_is_redacted(
    taospec: Runner, tmp_path: Path
) -> None:
    # the schema error cut the value to 57 characters, then redacted what was left: the
    # value no longer whole, 29 of its 30 characters were printed
    value = "Zq8sup3rs3cretVALUE0123456789X"
    path = job(tmp_path, f"env: {{pass: [GATE_VAR]}}\nstorage_tier: {'a' * 27}{value}bb\n")
    for verb in (("validate",), ("validate", "--format", "json")):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        assert done.returncode == 2, done.stderr
        said = done.stdout + done.stderr
        assert f"'{'a' * 27}<redacted>bb' is not one of 'A', 'B', 'C'" in said, verb
        assert "Zq8sup" not in said, verb


def test_a_brev_job_is_refused_a_passed_value_written_in_it_like_any_other(
    taospec: Runner, tmp_path: Path
) -> None:
    # a Brev job reads the value on the instance, so the check passed it over, and render
    # printed this machine's value of the variable written in the spec
    value = "correcthorsebattery"
    path = job(
        tmp_path, f"brev: {{instance: box}}\nenv: {{pass: [GATE_VAR]}}\nspec: {{n: {value}}}\n"
    )
    path.write_text(path.read_text().replace("platform: docker", "platform: brev"))
    for verb in (("render",), ("run", "-n")):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        refused(done, f"{path}:11:11: $.spec.n: holds the value of GATE_VAR")
        assert value not in done.stdout + done.stderr


def test_a_pipeline_job_named_after_a_passed_value_is_refused_at_its_name(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # validate --here passed it; run -n, run --check and graph printed the value as the
    # target's name, and the target's state file stored it (run itself redacted it)
    value = "correcthorsebattery"
    path = write(tmp_path / "p.yaml", (
        f"version: 1\ndefaults: {{network_arch: a, platform: local, image: busybox:1,\n"
        f"  results_root: {tmp_path / 'r'}, env: {{pass: [GATE_VAR]}}}}\n"
        f"jobs:\n  {value}:\n    action: b\n    command: 'true'\n"
    ))  # fmt: skip
    expected = f"{path}:5:3: $.jobs.<redacted>: this job's name holds the value of GATE_VAR"
    verbs = (("validate", "--here"), ("render",), ("run", "-n"), ("run", "--check"), ("graph",))
    for verb in verbs:
        done = taospec(*verb, path, env={"GATE_VAR": value})
        refused(done, expected)
        assert value not in done.stdout + done.stderr, verb
    assert list(state_dir.iterdir()) == []


NAMING_TOKEN = "nvapi-" + "Nq8Zr7XwLmNpQ4sTuV2yBcDe"


@pytest.mark.parametrize(
    ("jobs", "where"),
    [
        (f"  {NAMING_TOKEN}:\n    action: b\n", ":5:3: $.jobs['<redacted>']: the job's name holds"),
        (
            f"  t:\n    action: b\n    matrix: {{k: [1, {NAMING_TOKEN}]}}\n",
            ":7:21: $.jobs.t.matrix.k[1]: the matrix value holds",
        ),
        (
            f"  t:\n    action: b\n    matrix: {{ghp_{'Zr7XwLmNpQ4sTuV2' * 3}: [1]}}\n",
            ":7:14: $.jobs.t.matrix.<redacted>: the matrix key holds",
        ),
        (
            "  t:\n    action: b\n    matrix: {k: ['Bearer Zr7XwLmNpQ4sTuV2']}\n",
            ":7:18: $.jobs.t.matrix.k[0]: the matrix value holds",
        ),
    ],
)
def test_what_names_a_target_is_refused_when_it_holds_a_credential(
    taospec: Runner, tmp_path: Path, state_dir: Path, jobs: str, where: str
) -> None:
    # a matrix value only names its target: it passed validate, and render, the JSON plan,
    # run -n and run --check printed the token in the target's name
    path = write(tmp_path / "p.yaml", (
        f"version: 1\ndefaults: {{network_arch: a, platform: local, image: busybox:1,\n"
        f"  results_root: {tmp_path / 'r'}, command: 'true'}}\njobs:\n{jobs}"
    ))  # fmt: skip
    for verb in (("validate",), ("render",), ("run", "-n"), ("run", "--check"), ("graph",)):
        done = taospec(*verb, path)
        refused(done, f"{path}{where} what looks like a credential")
        assert "Zr7XwLmNpQ4sTuV2" not in done.stdout + done.stderr, verb
    assert list(state_dir.iterdir()) == []


def test_a_job_file_named_like_a_credential_is_refused(taospec: Runner, tmp_path: Path) -> None:
    # its name names its target, which render printed in the plan's header and target
    path = job(tmp_path, name=f"{NAMING_TOKEN}.yaml")
    for verb in ("validate", "render"):
        done = taospec(verb, path)
        assert done.returncode == 2, done.stderr
        assert "$: the job file's name holds what looks like a credential" in done.stderr
        assert NAMING_TOKEN not in done.stdout + done.stderr


def test_validate_redacts_what_it_prints(taospec: Runner, tmp_path: Path) -> None:
    token = "nvapi-" + "Qx7Rk2Wm9Lp4Zt8Yv3Nb6Hc1"
    folder = tmp_path / token
    folder.mkdir()
    path = write(folder / "job.yaml", BASE.format(root=tmp_path / "r") + "gpus: 2\n")
    for fmt in ("text", "json", "github"):
        done = taospec("validate", "--format", fmt, path)
        assert done.returncode == 2
        assert token not in done.stdout + done.stderr
        assert "<redacted>" in done.stdout + done.stderr
    ok = taospec("validate", write(folder / "ok.yaml", BASE.format(root=tmp_path / "r")))
    assert ok.returncode == 0
    assert ok.stdout == f"{tmp_path}/<redacted>/ok.yaml: ok\n"


def test_a_folder_named_like_a_credential_keeps_the_output_s_form(
    taospec: Runner, tmp_path: Path
) -> None:
    # The whole finished line was redacted as free text: api_token=v1/bad.yaml:9:7 lost the
    # file, line and column, and --format json printed {"file": api_token=<redacted> ...
    write(tmp_path / "api_token=v1" / "bad.yaml", BASE.format(root=tmp_path / "r") + "gpus: 2\n")
    write(tmp_path / "api_token=v1" / "ok.yaml", BASE.format(root=tmp_path / "r"))
    bad = "api_token=v1/bad.yaml"  # as given, relative to the runner's folder (tmp_path)
    done = taospec("validate", "--format", "json", bad)
    assert done.returncode == 2
    verdict = json.loads(done.stdout)
    assert verdict["file"] == bad
    assert [(p["line"], p["column"], p["path"]) for p in verdict["problems"]] == [(9, 7, "$.gpus")]
    github = taospec("validate", "--format", "github", bad).stdout
    assert github.startswith(f"::error file={bad},line=9,col=7::$.gpus: "), github
    ok = taospec("validate", "api_token=v1/ok.yaml")
    assert ok.stdout == "api_token=v1/ok.yaml: ok\n"
    for verb in ("validate", "render", "run"):  # the text form, on stderr, keeps its place too
        said = taospec(verb, bad).stderr
        assert said.startswith(f"{bad}:9:7: $.gpus: GPUs are chosen by id"), said


def test_a_token_in_a_key_after_an_escape_is_not_shown(taospec: Runner, tmp_path: Path) -> None:
    # the path shows keys by repr: "w\nnvapi-..." became 'w\\nnvapi-...', and the escape's n
    # against the token hid it from the redaction, which printed it whole
    token = "nvapi-abcdefghijklmnopqrstuvwxyz0123456789"
    path = job(tmp_path, f'spec: {{"w\\n{token}": 4}}\n')
    for verb in ("validate", "render"):
        said = taospec(verb, path)
        assert said.returncode == 2, said.stderr
        assert token not in said.stderr + said.stdout


def test_a_problem_at_a_key_named_like_a_header_keeps_its_message(
    taospec: Runner, tmp_path: Path
) -> None:
    # "$.spec.Authorization: holds what looks like ..." was redacted as a whole line, and
    # the output's redaction read the path and the message as one header and its value
    path = job(tmp_path, "spec: {Authorization: 'Basic dXNlcjpwYXNzd29yZA'}\n")
    for verb in ("validate", "render"):
        said = taospec(verb, path)
        refused(said, f"{path}:9:23: $.spec.Authorization: holds what looks like a credential")
        assert "dXNlcjpwYXNzd29yZA" not in said.stderr + said.stdout


def test_validate_here_names_missing_platform_tools(taospec: Runner, tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    path = job(tmp_path)
    result = taospec("validate", "--here", path, env={"PATH": str(bare)})
    refused(result, f"{path}:4:11: $.platform: platform docker runs docker, which is not on PATH")
    brev = write(
        tmp_path / "brev.yaml",
        BASE.format(root="/home/u/r").replace("docker", "brev") + "brev: {instance: box}\n",
    )
    refused(taospec("validate", "--here", brev, env={"PATH": str(bare)}),
            "$.platform: platform brev runs brev, which is not on PATH")  # fmt: skip
    slurm = write(
        tmp_path / "slurm.yaml",
        BASE.format(root="/home/u/r").replace("docker", "slurm").replace('user: "1000:1000"\n', ""),
    )
    refused(taospec("validate", "--here", slurm, env={"PATH": str(bare)}),
            "$.platform: platform slurm runs sbatch, which is not on PATH")  # fmt: skip
    assert taospec("validate", slurm, env={"PATH": str(bare)}).returncode == 0


SECRETS = [
    "password=hunter2hunter2",
    "--password s3cr3tvalue",
    "pass=abcdefgh",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpM",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Authorization: Bearer abcdef0123456789",
    "nvapi-" + "Q" * 40,
    "hf_" + "a" * 34,
    "ghp_" + "b" * 36,
]


@pytest.mark.parametrize("secret", SECRETS)
def test_secret_literals_are_refused_where_they_are_written(
    taospec: Runner, tmp_path: Path, secret: str
) -> None:
    quoted = yaml.safe_dump(secret, default_style='"').strip()
    path = write(
        tmp_path / "job.yaml",
        BASE.format(root=tmp_path / "r")
        + f"env: {{set: {{GREETING: {quoted}}}}}\nspec: {{login: {{value: {quoted}}}}}\n",
    )
    text = path.read_text().replace("command: sh -c 'echo hi'", f"command: [echo, {quoted}]")
    path.write_text(text)
    result = taospec("validate", path)
    lines = refused(
        result,
        "$.env.set.GREETING: the value of GREETING looks like a credential",
        "$.spec.login.value: holds what looks like a credential",
        "$.command[1]: holds what looks like a credential",
    )
    assert secret not in result.stderr
    assert len(lines) == 3


TOKEN = "ghp_" + "c" * 36


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ("docker: {host: 'ssh://bob:hunter2pw@gpu-box'}\n", ":9:16: $.docker.host: "),
        (f"upload_excludes: ['{TOKEN}']\n", ":9:19: $.upload_excludes[0]: "),
        (f"mounts: [{{source: /srv/{TOKEN}, target: /data}}]\n", ":9:19: $.mounts[0].source: "),
        (f"docker: {{extra_args: ['--label', 'x={TOKEN}']}}\n", ":9:34: $.docker.extra_args[1]: "),
        # keys are written out too, and a spec's list can hold a flag and its value
        (f"spec: {{{TOKEN}: 1}}\n", ":9:8: $.spec.<redacted>: "),
        (f"env: {{set: {{{TOKEN}: x}}}}\n", ":9:13: $.env.set.<redacted>: "),
        ("spec: {args: [--password, hunter2pw]}\n", ":9:14: $.spec.args: "),
    ],
)
def test_a_secret_in_any_field_a_plan_carries_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, extra: str, where: str
) -> None:
    # Every string of a job reaches its plan; validate used to judge only the command, the
    # spec and notify, so these passed it and were refused by render's lint, unlocated.
    path = job(tmp_path, extra)
    for argv in (("validate", path), ("render", path)):
        result = taospec(*argv)
        refused(result, f"{path}{where}holds what looks like a credential")
        assert TOKEN not in result.stderr + result.stdout
        assert "hunter2pw" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        # a key and its value share the spec file's line
        ("{Authorization: 'Basic dXNlcjpwYXNzd29yZA'}", ":9:23: $.spec.Authorization"),
        ("{a: {b: [1, {Proxy-Authorization: 'Basic dXNlcjpwYXNzd29yZA'}]}}",
         ":9:41: $.spec.a.b[1]['Proxy-Authorization']"),
        # YAML writes the tab as \t, a credential's letters to a text lint
        ('{header: "Authorization: bearer\\t"}', ":9:16: $.spec.header"),
        ('{Authorization: "bearer\\t"}', ":9:23: $.spec.Authorization"),
        # a placeholder's value is written in the quotes around it
        ("{o: '{results_dir}', Authorization: 'Basic {job_id}dXNlcjpwYXNzd29yZA'}",
         ":9:43: $.spec.Authorization"),
    ],
)  # fmt: skip
def test_the_spec_file_is_judged_as_the_plan_writes_it(
    taospec: Runner, tmp_path: Path, spec: str, where: str
) -> None:
    # each spec value was judged alone, as written: these passed validate, and render
    # refused the spec file's text at $.spec with no more of a place than that
    path = job(tmp_path, f"spec: {spec}\n")
    for verb in ("validate", "render", "run"):
        said = taospec(verb, "--check", path) if verb == "run" else taospec(verb, path)
        refused(said, f"{path}{where}: holds what looks like a credential")


def test_a_credential_in_the_spec_is_told_how_the_spec_names_a_variable(
    taospec: Runner, tmp_path: Path
) -> None:
    # it was told to "refer to $NAME", which OmegaConf, which reads TAO's spec, leaves as it is
    path = job(tmp_path, f"spec: {{encryption_key: {TOKEN}}}\n")
    (said,) = refused(taospec("validate", path), f"{path}:9:24: $.spec.encryption_key: holds")
    assert said.endswith(
        " pass it by name under env.pass and write ${oc.env:NAME} in its place (TAO's "
        "OmegaConf reads it from the job's environment)"
    )
    path.write_text(path.read_text().replace("echo hi", f"echo {TOKEN}").replace("spec: ", "x: "))
    path.write_text(path.read_text().replace(f"x: {{encryption_key: {TOKEN}}}\n", ""))
    (said,) = refused(taospec("validate", path), f"{path}:8:10: $.command: holds")
    assert said.endswith(" pass it by name under env.pass and refer to $NAME instead")


@pytest.mark.parametrize(
    ("spec", "path", "name"),
    [
        ("{db: {password: hunter2pw}}", "$.spec.db.password", "password"),
        ("{X-Api-Key: hunter2pw}", "$.spec['X-Api-Key']", "X-Api-Key"),
        ('{"--token": hunter2pw}', "$.spec['--token']", "--token"),
        ("{auth: {db_pass: 'hunter2pw and more'}}", "$.spec.auth.db_pass", "db_pass"),
        ("{env: [{name: NGC_KEY, value: hunter2pw}]}", "$.spec.env[0].value", "NGC_KEY"),
        ('{hf: {HF_TOKEN: "hunter2pw{job_id}"}}', "$.spec.hf.HF_TOKEN", "HF_TOKEN"),
    ],
)
def test_a_secret_named_spec_key_with_a_literal_value_is_refused_at_the_value(
    taospec: Runner, tmp_path: Path, spec: str, path: str, name: str
) -> None:
    # The lint reads command lines, where "password: x" is no shell word: these passed
    # validate, render and run, and the spec file, the plan and render's output held them.
    file = job(tmp_path, f"spec: {spec}\n")
    line = f"spec: {spec}"
    column = line.index("hunter2pw") + (line[line.index("hunter2pw") - 1] not in "'\"")
    expected = (
        f"{file}:9:{column}: {path}: a spec file is written with the job's results and shown "
        "by render, so it cannot hold secrets; pass this value by name under env.pass and "
        "write ${oc.env:NAME} as the value, for TAO to read it from the job's environment "
        f"(the secret-named key is {name})"
    )
    for verb in ("validate", "render", "run"):
        said = taospec(verb, "--check", file) if verb == "run" else taospec(verb, file)
        assert expected in refused(said), said.stderr
        assert "hunter2pw" not in said.stdout + said.stderr


def test_a_secret_named_spec_key_holding_no_literal_text_passes(
    taospec: Runner, tmp_path: Path
) -> None:
    # TAO specs set use_summary_token: true (Visual ChangeNet); a number, a reference, an
    # empty value, a placeholder or a key that names where a secret lives holds none.
    spec = (
        "{model: {use_summary_token: true, max_token: 77}, auth: {password: $DB_PASSWORD, "
        "api_key: '', token_file: /run/secrets/t, session_token: '{job_id}'}}"
    )
    file = job(tmp_path, f"spec: {spec}\n")
    assert taospec("validate", file).returncode == 0
    rendered = taospec("render", "--format", "json", file)
    assert rendered.returncode == 0, rendered.stderr
    spec_file = next(s for s in json.loads(rendered.stdout)["steps"] if s["name"] == "spec-file")
    assert "use_summary_token: true" in spec_file["stdin_text"]
    assert "password: $DB_PASSWORD" in spec_file["stdin_text"]


@pytest.mark.parametrize(
    ("platform", "extra"),
    [("docker", "docker: {host: 'ssh://u@gpu-box'}\n"), ("brev", "brev: {instance: box}\n")],
)
def test_a_remote_script_judges_the_spec_file_as_the_document_it_is(
    taospec: Runner, tmp_path: Path, platform: str, extra: str
) -> None:
    # On a remote host the spec file is written by a quoted printf in the remote script;
    # the lint read YAML's quotes there as shell text and refused a bare scheme at "$",
    # line 1, that validate and every other platform pass.
    bare = "spec: {x: 'Authorization: Basic ', y: \"it's\"}\n"
    path = job(tmp_path, extra + bare)
    path.write_text(path.read_text().replace("platform: docker", f"platform: {platform}"))
    for verb in ("validate", "render"):
        said = taospec(verb, path)
        assert said.returncode == 0, said.stderr
    path.write_text(path.read_text().replace("Basic '", "Basic dXNlcjpwYXNzd29yZA'"))
    for verb in ("validate", "render"):
        refused(taospec(verb, path), f"{path}:10:11: $.spec.x: holds what looks like a credential")


AUTHORIZATION_SET = "env: {set: {AUTHORIZATION: not-a-secret}}\n"


@pytest.mark.parametrize(
    ("platform", "extra", "where"),
    [
        # the plan passes AUTHORIZATION=x, which reads as a header; validate judged x alone
        ("local", AUTHORIZATION_SET, ":9:28: $.env.set.AUTHORIZATION: "),
        ("docker", AUTHORIZATION_SET, ":9:28: $.env.set.AUTHORIZATION: "),
        # docker run's image follows extra_args, and a last --token takes it for its value
        ("docker", "docker: {extra_args: [--label, --token]}\n", ":9:22: $.docker.extra_args: "),
    ],
)  # fmt: skip
def test_what_the_plan_s_lint_reads_in_a_pair_validate_refuses_at_its_place(
    taospec: Runner, tmp_path: Path, platform: str, extra: str, where: str
) -> None:
    # both passed validate; render and run --check refused them at 1:1 $
    path = job(tmp_path, extra)
    path.write_text(path.read_text().replace("platform: docker", f"platform: {platform}"))
    for verb in ("validate", "render", "run"):
        said = taospec(verb, "--check", path) if verb == "run" else taospec(verb, path)
        refused(said, f"{path}{where}")


@pytest.mark.parametrize(
    "host", ["ssh://-oProxyCommand=x", "ssh://-oProxyCommand=x@gpu-box", "ssh://u@gpu-box:0"]
)
def test_a_docker_host_ssh_would_read_as_an_option_is_refused(
    taospec: Runner, tmp_path: Path, host: str
) -> None:
    # slurm.login and brev.instance refused a leading dash; docker.host took it to ssh
    path = job(tmp_path, f"docker: {{host: '{host}'}}\n")
    for verb in ("validate", "render"):
        refused(taospec(verb, path), f"{path}:9:16: $.docker.host: {host!r} is not valid here")
    path.write_text(path.read_text().replace(host, "ssh://u@gpu-box:2222"))
    assert taospec("validate", path).returncode == 0


@pytest.mark.parametrize(
    ("command", "where"),
    [
        ("\"sh -c 'curl -u bob:hunter2pw https://x'\"", ":8:10: $.command: "),
        ("[curl, -u, 'bob:hunter2pw', 'https://x']", ":8:10: $.command: "),
        ("[sh, -c, 'sshpass -p hunter2pw ssh h']", ":8:19: $.command[2]: "),
        ("[mysqldump, -phunter2pw, db]", ":8:10: $.command: "),
        ("[curl, -H, 'X-Auth: Basic Ym9iOmh1bnRlcjJwdw==', 'https://x']", ":8:21: $.command[2]: "),
    ],
)
def test_a_password_given_to_a_tool_s_own_option_is_refused(
    taospec: Runner, tmp_path: Path, command: str, where: str
) -> None:
    # the lint knew NAME=value, --password value and login -p, and these passed every
    # check: the plan, argv and render's output carried the password
    path = job(tmp_path)
    path.write_text(path.read_text().replace("sh -c 'echo hi'", command))
    for verb in ("validate", "render"):
        said = taospec(verb, path)
        refused(said, f"{path}{where}holds what looks like a credential")
        assert "hunter2pw" not in said.stdout + said.stderr
        assert "Ym9iOmh1bnRlcjJwdw" not in said.stdout + said.stderr


def test_a_short_bearer_value_is_judged_by_what_the_plan_makes_of_it(
    taospec: Runner, tmp_path: Path
) -> None:
    # A mount source "/srv/Bearer 00" passed validate, and render refused "-v /srv/Bearer
    # 00:/data" as a bearer token "00:/data"; a results_root "/srv/Bearer 0" passed validate
    # and render refused the results directory "/srv/Bearer 0/JOB_ID" alike.
    path = job(tmp_path, "mounts: [{source: '/srv/Bearer 00', target: /data}]\n")
    assert taospec("validate", path).returncode == 0
    rendered = taospec("render", path)
    assert rendered.returncode == 0, rendered.stderr
    assert "/srv/Bearer 00" in rendered.stdout
    path.write_text(
        path.read_text().replace(
            f"results_root: {tmp_path}/results", "results_root: '/srv/Bearer 0'"
        )
    )
    for argv in (("validate", path), ("render", path)):
        refused(taospec(*argv), f"{path}:6:15: $.results_root: holds what looks like a credential")


@pytest.mark.parametrize("platform", ["local", "docker"])
def test_a_placeholder_is_judged_as_the_path_the_plan_fills_in(
    taospec: Runner, tmp_path: Path, platform: str
) -> None:
    # validate filled {results_dir} as "/<id>", shorter than any real results directory:
    # "Bearer {results_dir}" passed it, and render refused the spec file at $.spec
    path = job(tmp_path, 'spec: {auth: "Bearer {results_dir}"}\n')
    path.write_text(path.read_text().replace("platform: docker", f"platform: {platform}"))
    for verb in ("validate", "render"):
        refused(taospec(verb, path), f"{path}:9:14: $.spec.auth: holds what looks like a")


def test_an_image_versions_yaml_names_with_a_credential_is_refused_at_its_key(
    taospec: Runner, tmp_path: Path
) -> None:
    write(tmp_path / "versions.yaml", f"images:\n  tok: registry.example.com/{TOKEN}:1\n")
    path = job(tmp_path)
    path.write_text(
        path.read_text().replace("image: busybox:1", "image: {versions_key: images.tok}")
    )
    for verb in ("validate", "render"):
        result = taospec(verb, path)
        refused(result, f"{path}:5:23: $.image.versions_key: names an image that holds what "
                "looks like a credential (ghp_ token, token prefix) in versions.yaml")  # fmt: skip
        assert TOKEN not in result.stderr + result.stdout


def test_a_refusal_only_rendering_can_make_is_located_by_render_run_and_validate_here(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # Who the job runs as is known only at render (--user, or user: host as root). render
    # and run used to print the refusal with the file alone; they now place it at its key.
    path = job(tmp_path)
    for given in ("0:0", "0:1000"):
        expected = f"{path}:7:7: $.user: --user {given} would run this writable launch as root"
        for argv in (("render",), ("run", "-n"), ("validate", "--here"), ("validate",)):
            refused(taospec(*argv, "--user", given, path), expected)  # validate: it passed
    assert not (state_dir / "jobs").exists()
    local = path.read_text().replace("platform: docker", "platform: local")
    path.write_text(local.replace('user: "1000:1000"\n', ""))
    assert taospec("validate", "--user", "0:0", path).returncode == 0  # as root, it runs as root


@pytest.mark.parametrize(
    ("platform", "given", "expected"),
    [
        ("docker", "3000000000:1000", "--user 3000000000:1000 holds an id past 2,147,483,647"),
        ("local", "99999999999:1", "--user 99999999999:1 holds an id past 4,294,967,294"),
        ("docker", "\uff11\uff10\uff10\uff10:1000", ":7:7: $.user: --user '\uff11\uff10"),
        ("slurm", "1000:1000", "--user 1000:1000: a Slurm job runs as the account that submits"),
    ],
    ids=["past-docker", "past-linux", "full-width-digits", "slurm"],
)
def test_a_user_given_on_the_command_line_is_judged_as_the_files_user_is(
    taospec: Runner, tmp_path: Path, state_dir: Path, platform: str, given: str, expected: str
) -> None:
    # user: in the file was refused at validate for each of these; --user passed them, and
    # run opened a record that docker or install then refused (or ran as uid 1000 for
    # full-width digits); a Slurm job's install steps were made to chown as another user
    path = job(tmp_path)
    text = path.read_text().replace("platform: docker", f"platform: {platform}")
    path.write_text(text.replace('user: "1000:1000"\n', "") if platform == "slurm" else text)
    for argv in (("render",), ("run", "-n"), ("run",), ("validate", "--here"), ("validate",)):
        refused(taospec(*argv, "--user", given, path), expected)
    assert not (state_dir / "jobs").exists()
    assert taospec("validate", "--user", "1000:1000", job(tmp_path)).returncode == 0


def test_docker_host_on_a_brev_job_is_refused_at_its_line(taospec: Runner, tmp_path: Path) -> None:
    path = job(tmp_path, "brev: {instance: box}\ndocker: {host: 'ssh://gpu-box'}\n")
    path.write_text(path.read_text().replace("platform: docker", "platform: brev"))
    expected = f"{path}:10:16: $.docker.host: docker.host does not apply to platform brev"
    refused(taospec("validate", path), expected)
    refused(taospec("render", path), expected)


FOREIGN_BLOCKS = [
    ("local", "docker: {host: 'ssh://gpu-box'}\n", "docker"),
    ("local", "slurm: {partition: gpu}\n", "slurm"),
    ("docker", "brev: {instance: box}\n", "brev"),
    ("docker", "slurm: {partition: gpu}\n", "slurm"),
    ("slurm", "brev: {instance: box}\n", "brev"),
    ("slurm", "docker: {host: 'ssh://gpu-box'}\n", "docker.host"),
    ("brev", "brev: {instance: box}\nslurm: {partition: gpu}\n", "slurm"),
]


@pytest.mark.parametrize(("platform", "extra", "key"), FOREIGN_BLOCKS)
def test_a_block_for_another_platform_is_refused_at_its_key(
    taospec: Runner, tmp_path: Path, state_dir: Path, platform: str, extra: str, key: str
) -> None:
    # render and run ignored such a block: a job meant for a remote engine ran here
    path = job(tmp_path, extra)
    text = path.read_text().replace("platform: docker", f"platform: {platform}")
    if platform in ("local", "slurm"):
        text = text.replace('user: "1000:1000"\n', "")
    path.write_text(text)
    block = key.partition(".")[0]
    line = next(n for n, row in enumerate(text.splitlines(), 1) if row.startswith(block))
    named = key if "." in key else key + ":"
    expected = f"$.{key}: {named} does not apply to platform {platform} ("
    lines = refused(taospec("run", "-n", path), f"{path}:{line}:", expected)
    assert lines == refused(taospec("validate", path), expected)
    assert not (state_dir / "jobs").exists()


@pytest.mark.parametrize("size", ["1..2g", "1e", "1__0m", "_1g", "1e+-3g", "5 5g", "8  g"])
def test_a_shm_size_docker_cannot_read_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, size: str
) -> None:
    path = job(tmp_path, f"docker: {{shm_size: '{size}'}}\n")
    for verb in ("validate", "run"):
        lines = refused(taospec(verb, path), f"{path}:9:20: $.docker.shm_size: '{size}' is")
        assert len(lines) == 1, lines


@pytest.mark.parametrize(
    ("container", "extra", "expected"),
    [
        ("none", "mounts: [{source: /etc, target: /data}]\n",
         "$.mounts: a Slurm job with slurm.container: none runs its command on the node"),
        ("none", "docker: {shm_size: 1g}\n",
         "$.docker: docker: does not apply to a Slurm job whose slurm.container is none"),
        ("pyxis", "docker: {extra_args: [--init]}\n",
         "$.docker: docker: does not apply to a Slurm job whose slurm.container is pyxis"),
    ],
)  # fmt: skip
def test_what_a_slurm_job_s_container_runtime_ignores_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, container: str, extra: str, expected: str
) -> None:
    # render and run left these out of the script: the job ran without its mounts or options
    text = greet("slurm", tmp_path / "results", f"slurm: {{container: {container}}}\n{extra}")
    path = write(tmp_path / "job.yaml", text)
    for verb in ("validate", "run"):
        lines = refused(taospec(verb, path), f"{path}:9:", expected)
        assert len(lines) == 1, lines
    assert not (state_dir / "jobs").exists()
    docker = write(
        tmp_path / "docker.yaml", text.replace(f"container: {container}", "container: docker")
    )
    done = taospec("validate", docker)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("container", ["pyxis", "none"])
@pytest.mark.parametrize("block", ["{host: 'ssh://gpu-box'}", "{host: 'ssh://gpu-box', ipc: host}"])
def test_a_docker_host_on_a_slurm_job_whose_container_ignores_docker_is_one_problem(
    taospec: Runner, tmp_path: Path, state_dir: Path, container: str, block: str
) -> None:
    # the block was refused twice: once as docker: for the container, once as docker.host
    text = greet(
        "slurm", tmp_path / "results", f"slurm: {{container: {container}}}\ndocker: {block}\n"
    )
    path = write(tmp_path / "job.yaml", text)
    expected = f"{path}:9:16: $.docker.host: docker.host does not apply to platform slurm ("
    others = "; its other options apply to a Slurm job only with slurm.container: docker"
    for verb in ("validate", "render", "run"):
        lines = refused(taospec(verb, path), expected)
        assert len(lines) == 1, lines
        assert (others in lines[0]) == ("ipc" in block), lines
    assert not (state_dir / "jobs").exists()


def test_a_pipeline_s_defaults_serve_the_platforms_that_read_them(
    taospec: Runner, tmp_path: Path
) -> None:
    # defaults may carry docker: for the docker jobs; the local job beside them ignores it
    path = write(
        tmp_path / "pipeline.yaml",
        f"""\
version: 1
defaults:
  network_arch: hello
  image: busybox:1
  results_root: {tmp_path / "results"}
  docker: {{shm_size: 1g}}
jobs:
  here:
    action: greet
    platform: local
    command: sh -c 'echo hi'
  there:
    action: greet
    platform: docker
    user: "1000:1000"
    command: sh -c 'echo hi'
""",
    )
    assert taospec("validate", path).returncode == 0
    rendered = taospec("render", path, "there")
    assert rendered.returncode == 0, rendered.stderr
    assert "--shm-size=1g" in rendered.stdout
    assert taospec("render", path, "here").returncode == 0
    # docker.host names where a job runs: a job of another platform refuses it inherited too
    with_host = path.read_text().replace("shm_size: 1g", "host: 'ssh://gpu-box'")
    for platform in ("local", "slurm"):
        path.write_text(with_host.replace("platform: local", f"platform: {platform}"))
        expected = f"$.defaults.docker.host: docker.host does not apply to platform {platform}"
        refused(taospec("validate", path), f"{path}:6:", expected)


@pytest.mark.parametrize(("platform", "refused_at"), [("local", 8), ("docker", None)])
def test_a_results_dir_a_script_would_misread_is_refused_where_the_job_sees_it(
    taospec: Runner, tmp_path: Path, platform: str, refused_at: int | None
) -> None:
    # A local process sees its results where they are, so a results_root the shell reads as
    # syntax cannot stand in its `sh -c` script; a container sees /results. validate used
    # to pass the local job, which render then refused at no line.
    root = tmp_path / "odd $(x) dir"
    path = write(
        tmp_path / "job.yaml",
        BASE.replace("platform: docker", f"platform: {platform}")
        .replace("results_root: {root}", f"results_root: '{root}'")
        .replace("sh -c 'echo hi'", "sh -c 'ls {results_dir} {config_path}'")
        + "spec: {}\n",
    )
    for argv in (("validate", path), ("render", path)):
        result = taospec(*argv)
        if refused_at is None:
            assert result.returncode == 0, result.stderr
            continue
        lines = refused(
            result,
            f"{path}:{refused_at}:10: $.command: {{config_path}} is "
            f"'{root}/$JOB_ID/stage/spec.yaml' and stands in the script `sh -c` runs",
            f"{path}:{refused_at}:10: $.command: {{results_dir}} is '{root}/$JOB_ID' and stands",
        )
        assert len(lines) == 2


NO_SPEC_PIPELINE = """\
version: 1
defaults:
  network_arch: hello
  platform: docker
  image: busybox:1
  results_root: RESULTS
  user: "1000:1000"
  command: [cat, "{config_path}"]
jobs:
  plain: {action: greet}
  sweep:
    action: greet
    matrix: {n: [1, 2]}
    command: sh -c 'cat {config_path} > {results_dir}/{matrix.n}'
"""


@pytest.mark.parametrize("command", ["sh -c 'cat {config_path}'", '[cat, "{config_path}"]'])
def test_a_command_reading_the_spec_file_of_a_job_without_spec_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, command: str
) -> None:
    # no spec: means no spec file: the job ran and failed on a file that was never written
    path = write(
        tmp_path / "job.yaml",
        BASE.format(root=tmp_path / "results").replace("sh -c 'echo hi'", command),
    )
    expected = f"{path}:8:10: $.command: {{config_path}} is the spec file, which only a job"
    for verb in ("validate", "run"):
        lines = refused(taospec(verb, path), expected, "add a spec:")
        assert len(lines) == 1, lines
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "results").exists()
    path.write_text(path.read_text() + "spec: {}\n")
    done = taospec("validate", path)
    assert done.returncode == 0, done.stderr


def test_a_pipeline_command_reading_a_spec_file_no_target_has_is_refused(
    taospec: Runner, tmp_path: Path
) -> None:
    path = write(
        tmp_path / "pipeline.yaml", NO_SPEC_PIPELINE.replace("RESULTS", str(tmp_path / "r"))
    )
    lines = refused(taospec("validate", path))
    assert [line.split(": ")[1] for line in lines] == [
        "$.defaults.command",
        "$.jobs.sweep.command",
    ], lines
    assert lines[0].startswith(f"{path}:8:")
    assert lines[1].startswith(f"{path}:14:")
    path.write_text(path.read_text().replace("jobs:", "  spec: {train: {epochs: 1}}\njobs:"))
    done = taospec("validate", path)
    assert done.returncode == 0, done.stderr


def test_an_env_value_naming_the_spec_file_of_a_job_without_spec_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # the job got the path of a spec file that was never written
    path = job(tmp_path, "env:\n  set:\n    MODE: train\n    CFG: 'at {config_path}'\n")
    expected = f"{path}:12:10: $.env.set.CFG: {{config_path}} is the spec file, which only a job"
    for verb in ("validate", "run"):
        lines = refused(taospec(verb, path), expected, "add a spec:")
        assert len(lines) == 1, lines
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "results").exists()
    pipeline = write(
        tmp_path / "pipeline.yaml",
        NO_SPEC_PIPELINE.replace("RESULTS", str(tmp_path / "r"))
        .replace('[cat, "{config_path}"]', "[env]\n  env: {set: {CFG: '{config_path}'}}")
        .replace("cat {config_path} >", "env >"),
    )
    lines = refused(taospec("validate", pipeline))
    assert [line.split(": ")[1] for line in lines] == ["$.defaults.env.set.CFG"], lines
    assert lines[0].startswith(f"{pipeline}:9:"), lines
    path.write_text(path.read_text() + "spec: {}\n")
    done = taospec("validate", path)
    assert done.returncode == 0, done.stderr


def test_a_placeholder_where_none_is_filled_in_says_so(taospec: Runner, tmp_path: Path) -> None:
    # a mount source of a job that needs no target takes no placeholder, and the message
    # listed the ones it takes as "known: ;"
    path = job(tmp_path, 'mounts: [{source: "/tmp/x/{job_id}", target: /data}]\n')
    (line,) = refused(taospec("validate", path))
    assert line == (
        f"{path}:9:19: $.mounts[0].source: unknown placeholder {{job_id}}; no placeholder is "
        "filled in here; write {{ and }} for literal braces"
    )


def test_a_matrix_job_s_text_command_is_refused_at_its_own_line(
    taospec: Runner, tmp_path: Path
) -> None:
    # a matrix fills a text command word by word; a problem in a word pointed at the job's
    # name with a path such as $.jobs.sweep.command[2], which names nothing in the file
    text = (
        NO_SPEC_PIPELINE.replace("RESULTS", str(tmp_path / "r"))
        .replace('[cat, "{config_path}"]', "echo {nosuch} {matrix.n}")
        .replace("cat {config_path} >", "echo {matrix.n} {nosuch} >")
        .replace("  plain: {action: greet}", "  plain: {action: greet, matrix: {n: [1]}}")
    )
    path = write(tmp_path / "pipeline.yaml", text)
    lines = refused(taospec("validate", path))
    assert [line.split(": unknown placeholder {nosuch}")[0] for line in lines] == [
        f"{path}:8:12: $.defaults.command",
        f"{path}:14:14: $.jobs.sweep.command",
    ], lines


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ("command: [tool, --token, s3cr3tvalue9]\n", ":8:10: $.command: "),
        ("notify: [curl, --password, hunter2, 'https://x']\n", ":9:9: $.notify: "),
    ],
)
def test_a_flag_and_its_value_in_two_items_of_a_list_are_refused_at_the_list(
    taospec: Runner, tmp_path: Path, line: str, where: str
) -> None:
    # The plan's lint reads a list as the command line it becomes; validate judged each item
    # alone, so these passed it and render refused them at no line.
    path = job(tmp_path, line)
    if line.startswith("command:"):
        path.write_text(path.read_text().replace("command: sh -c 'echo hi'\n", ""))
    for argv in (("validate", path), ("render", path)):
        result = taospec(*argv)
        lines = refused(result, f"{path}{where}holds what looks like a credential (")
        assert len(lines) == 1, result.stderr
        assert "s3cr3tvalue9" not in result.stderr
        assert "hunter2" not in result.stderr


def test_a_passed_name_that_looks_like_a_credential_is_refused_at_its_place(
    taospec: Runner, tmp_path: Path
) -> None:
    # Every passed name is written into the plan (-e NAME), where the lint refuses a token.
    path = job(tmp_path, f"env: {{pass: [NGC_KEY, {TOKEN}]}}\n")
    for argv in (("validate", path), ("render", path)):
        result = taospec(*argv)
        lines = refused(result, f"{path}:9:23: $.env.pass[1]: the name itself looks like a")
        assert len(lines) == 1, result.stderr
        assert TOKEN not in result.stderr


@pytest.mark.parametrize("secret", SECRETS[-1:])
def test_a_refused_value_is_never_echoed_with_its_secret(
    taospec: Runner, tmp_path: Path, secret: str
) -> None:
    # Messages quote the value they refuse; a secret inside it is redacted in every output.
    (tmp_path / "versions.yaml").write_text(f"images:\n  leaky: 'https://u:{secret}@h/x'\n")
    in_image = job(tmp_path, name="image.yaml")
    in_image.write_text(in_image.read_text().replace("busybox:1", f"'{secret}:-x'"))
    pinned = job(tmp_path, name="pinned.yaml")
    pinned.write_text(
        pinned.read_text().replace("image: busybox:1", "image: {versions_key: images.leaky}")
    )
    for path in (in_image, pinned):
        for argv in (("validate", path), ("render", path)):
            result = taospec(*argv)
            refused(result, "<redacted>")
            assert secret not in result.stderr + result.stdout
        for fmt in ("json", "github"):
            result = taospec("validate", "--format", fmt, path)
            assert result.returncode == 2
            assert "<redacted>" in result.stdout
            assert secret not in result.stderr + result.stdout


def test_root_and_host_users_are_refused_with_what_to_write(
    taospec: Runner, tmp_path: Path
) -> None:
    root = job(tmp_path, name="root.yaml")
    root.write_text(root.read_text().replace('"1000:1000"', '"0:0"'))
    refused(taospec("validate", root),
            f"{root}:7:7: $.user: user: '0:0' runs the container as root (UID 0)",
            'write a non-root account, e.g. user: "1000:1000"')  # fmt: skip
    brev = write(
        tmp_path / "brev.yaml",
        BASE.format(root="/home/u/r").replace("docker", "brev").replace('"1000:1000"', "host")
        + "brev: {instance: box}\n",
    )
    refused(taospec("validate", brev), f"{brev}:7:7: $.user: user: host would mean this machine")


@pytest.mark.parametrize(
    ("platform", "user", "said"),
    [
        ("brev", "2147483648:1000", ":7:7: $.user: user: '2147483648:1000' holds an id past 2,14"),
        ("local", "4294967294:4294967294", ""),
        ("docker", "2147483647:2147483647", ""),
    ],
)
def test_ids_past_what_docker_takes_are_refused_where_docker_runs_the_job(
    taospec: Runner, tmp_path: Path, platform: str, user: str, said: str
) -> None:
    # the engine refuses them at the launch, "uids and gids must be in range 0-2147483647"; a
    # local process may run as any id an account can have
    path = write(
        tmp_path / "job.yaml",
        BASE.format(root="/home/u/r").replace("docker", platform).replace("1000:1000", user)
        + ("brev: {instance: box}\n" if platform == "brev" else ""),
    )
    checked = taospec("validate", path)
    if said:
        refused(checked, f"{path}{said}")
    else:
        assert checked.returncode == 0, checked.stderr


PASSED_BUT_FAILED_AT_RUN = [
    ('user: "1000:1000"', 'user: "00:0"', "$.user: user: '00:0' runs the container as root"),
    (
        'user: "1000:1000"',
        'user: "99999999999999999999:1"',
        "$.user: user: '99999999999999999999:1' holds an id past 4,294,967,294",
    ),
    (
        'user: "1000:1000"',
        'user: "4294967294:4294967294"',
        "$.user: user: '4294967294:4294967294' holds an id past 2,147,483,647, the largest UID",
    ),
    ('user: "1000:1000"', 'user: "2147483648:1000"', "uids and gids must be in range 0-2147483647"),
    ("command: sh -c 'echo hi'", 'command: [""]', "$.command[0]: the program to run is an empty"),
    ("command: sh -c 'echo hi'", "command: \"'' hi\"", "$.command: the program to run is an"),
    ("results_root: RESULTS", "results_root: /", "$.results_root: results_root: / would put"),
    ("", "mounts: [{source: SOURCE, target: /}]", "$.mounts[0].target: / cannot be a mount"),
    ("", "mounts: [{source: SOURCE, target: /results/..}]", "/results/.. (that is /) cannot"),
    ("", "mounts: [{source: SOURCE, target: /proc/x}]", "$.mounts[0].target: /proc/x cannot be"),
    ("", "mounts: [{source: SOURCE, target: /dev}]", "$.mounts[0].target: /dev cannot be a mount"),
    ("", "mounts: [{source: SOURCE, target: /sys/x}]", "$.mounts[0].target: /sys/x cannot be"),
    ("", "mounts: [{source: SOURCE, target: /x/../sys/x}]", "(that is /sys/x) cannot be a"),
    ("image: busybox:1", "image: busybox@sha256:" + "A" * 64, "$.image: 'busybox@sha256:AAA"),
    # docker.extra_args, as docker reads them: --mount keys in any case, a target of the
    # container's own; each passed validate, and docker or runc refused the container
    *(
        ("", f"docker: {{extra_args: {args}}}", said)
        for args, said in [
            ('["--mount", "type=bind,src=SOURCE,DST=/results"]', "mounts at or under /results"),
            ('["--mount", "type=BIND,SRC=./rel,dst=/x"]', "docker reads ./rel from the folder"),
            ('["-v", "SOURCE:/results/.."]', ":/results/..: /results/.. (that is /) cannot be"),
            ('["--mount", "type=bind,src=SOURCE,dst=/"]', ",dst=/: / cannot be a mount target"),
            ('["--tmpfs", "/proc/x"]', "--tmpfs /proc/x: /proc/x cannot be a mount target"),
            ('["-v", "SOURCE:/dev"]', ":/dev: /dev cannot be a mount target"),
        ]
    ),
]


@pytest.mark.parametrize(("was", "now", "refusal"), PASSED_BUT_FAILED_AT_RUN)
def test_what_failed_only_at_run_is_refused_by_validate_at_its_key(
    taospec: Runner, tmp_path: Path, state_dir: Path, was: str, now: str, refusal: str
) -> None:
    # each passed validate, then opened a record and failed (or refused without a place)
    text = BASE.format(root="RESULTS")
    text = text.replace(was, now) if was else text + now + "\n"
    text = text.replace("RESULTS", str(tmp_path / "results")).replace("SOURCE", str(tmp_path))
    path = write(tmp_path / "job.yaml", text)
    lines = refused(taospec("validate", path), refusal)
    assert refused(taospec("run", path), refusal) == lines
    assert not (state_dir / "jobs").exists()


def test_a_non_root_launcher_is_warned_about_another_uid(tmp_path: Path) -> None:
    path = job(tmp_path)
    jobfile, sources = load_located(path)
    alice = Identity(1001, 1001, (), "alice")
    verdict = preflight.here(jobfile, sources, launcher=alice)
    assert verdict.problems == ()
    assert verdict.warnings == (
        f"{path}:7:7: $.user: warning: the job runs as 1000:1000, but you are 1001:1001; its "
        "results directory will belong to 1000:1000 and you may not be able to clean it up. "
        'Write user: host (or user: "1001:1001") unless 1000:1000 is meant',
    )
    root = Identity(0, 0, (), "root")
    assert preflight.here(jobfile, sources, launcher=root).warnings == ()


def test_a_pipeline_s_warning_names_where_its_targets_user_is_set(tmp_path: Path) -> None:
    # the warning said $.user, a key the pipeline file does not have; said once for both
    lines = BASE.format(root=tmp_path / "results").splitlines()
    head = "\n".join("  " + line for line in lines if not line.startswith("version"))
    path = write(
        tmp_path / "pipeline.yaml",
        f"version: 1\ndefaults:\n{head}\njobs:\n  a: {{}}\n  b: {{}}\n",
    )
    jobfile, sources = load_located(path)
    alice = Identity(1001, 1001, (), "alice")
    verdict = preflight.here(jobfile, sources, launcher=alice)
    assert [warning.split(": warning: ")[0] for warning in verdict.warnings] == [
        f"{path}:8:9: $.defaults.user"
    ]


def test_huge_matrices_and_duplicate_values_are_refused_before_expanding(
    taospec: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = ", ".join(str(i) for i in range(100))
    sweep = write(
        tmp_path / "sweep.yaml",
        "version: 1\ndefaults: {network_arch: a, action: b, image: 'busybox:1', "
        "results_root: /r, command: 'echo {matrix.a} {matrix.b} {matrix.c}'}\njobs:\n  t:\n"
        f"    matrix:\n      a: [{values}]\n      b: [{values}]\n      c: [{values}]\n",
    )
    assert sweep.stat().st_size < 1500
    expanded: list[str] = []
    real_expand = loader._expand

    def expand(base: str, data: dict[str, Any]) -> Any:
        expanded.append(base)
        return real_expand(base, data)

    monkeypatch.setattr(loader, "_expand", expand)
    assert main(["validate", str(sweep)]) == 2
    assert expanded == []  # the count was refused from the value lists alone
    small = write(tmp_path / "small.yaml", sweep.read_text().replace(values, "1, 2"))
    assert main(["validate", str(small)]) == 0
    assert expanded == ["t"]
    refused(taospec("validate", sweep),
            f"{sweep}:6:7: $.jobs.t.matrix: expands to 1,000,000 targets")  # fmt: skip
    twice = write(
        tmp_path / "twice.yaml",
        "version: 1\ndefaults: {network_arch: a, action: b, image: 'busybox:1', "
        "results_root: /r, command: 'echo {matrix.lr}'}\njobs:\n  t:\n    matrix: {lr: [1, 1]}\n",
    )
    refused(
        taospec("validate", twice), f"{twice}:5:22: $.jobs.t.matrix.lr[1]: lr=1 is listed twice"
    )


def test_every_unknown_key_gpu_text_and_syntax_errors_are_explained(
    taospec: Runner, tmp_path: Path
) -> None:
    path = job(tmp_path, 'foo: 1\nbar: 2\ngpus: "0,1"\n')
    result = taospec("validate", path)
    refused(
        result,
        f"{path}:9:1: $.foo: unknown key 'foo'",
        f"{path}:10:1: $.bar: unknown key 'bar'",
        "expected GPUs by index or UUID, or `all`; write a list of ids: gpus: [0, 1]",
    )
    assert "gPU" not in result.stderr
    for text, hint in [
        ("version: 1\nspec:\n\tx: 1\n", "replace the tab with spaces"),
        ("version: 1\ncommand: echo a: b\n", "a value holding ': ' must be quoted"),
        ("version: 1\nspec:\n  a: 1\n b: 2\n", "check the indentation"),
    ]:
        bad = write(tmp_path / "syntax.yaml", text)
        refused(taospec("validate", bad), "YAML syntax error", hint)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            'version: 1\ncommand: "dino train\nresults_root: /x\n',
            ":4:1: $: YAML syntax error: while scanning a quoted scalar (line 2, column 10), "
            "found unexpected end of stream; close the quote that begins there",
        ),
        (
            "---\nversion: 1\n---\nversion: 2\n",
            ":3:1: $: YAML syntax error: expected a single document in the stream (line 2, "
            "column 1), but found another document; the file must be one YAML document",
        ),
        (
            "version: 1\nresults_root: *root\n",
            ":2:15: $: YAML syntax error: found undefined alias *root; an alias (*name) repeats",
        ),
        (
            "version: 1\nskill: [tao-train-dino\naction: x\n",
            ":3:7: $: YAML syntax error: while parsing a flow sequence (line 2, column 8), did "
            "not find expected ',' or ']'",
        ),
    ],
    ids=["open-quote", "two-documents", "alias", "open-list"],
)
def test_a_syntax_error_says_what_the_parser_was_reading_and_where_it_began(
    taospec: Runner, tmp_path: Path, text: str, said: str
) -> None:
    # only the last part of PyYAML's message was kept: "found unexpected end of stream" at
    # the file's end, of a quote left open lines above; "but found another document"
    bad = write(tmp_path / "syntax.yaml", text)
    refused(taospec("validate", bad), f"{bad}{said}")


def test_the_versions_file_search_ends_at_the_repository_top(
    taospec: Runner, tmp_path: Path
) -> None:
    text = (JOBS / "hello-docker.yaml").read_text()
    (tmp_path / "versions.yaml").write_text("images:\n  test:\n    busybox: stray/busybox:1\n")
    plain = write(tmp_path / "plain" / "jobs" / "hello.yaml", text)
    shown = taospec("render", plain)  # no repository: the nearest file above is used
    assert shown.returncode == 0, shown.stderr
    assert "stray/busybox:1" in shown.stdout
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    inside = write(repo / "jobs" / "hello.yaml", text)
    refused(taospec("validate", inside), "$.image.versions_key: image key 'images.test.busybox' "
            "needs a versions.yaml")  # fmt: skip
    (repo / "versions.yaml").write_text((JOBS / "versions.yaml").read_text())
    pinned = taospec("render", inside)
    assert pinned.returncode == 0, pinned.stderr
    assert "taospec-test/busybox:1" in pinned.stdout
    assert "stray" not in pinned.stdout


def test_mounts_that_join_past_one_argument_for_pyxis_are_refused(
    taospec: Runner, tmp_path: Path
) -> None:
    # pyxis gets the results directory and every mount as ONE --container-mounts value: 40
    # sources of 3,514 bytes each pass alone, and joined they make an argument sbatch's
    # srun cannot start with (E2BIG)
    source = "/" + "/".join(["s" * 250] * 14)
    mounts = ", ".join(f"{{source: {source}, target: /m{n}}}" for n in range(40))
    text = greet("slurm", tmp_path / "results", f"mounts: [{mounts}]\n")
    path = write(tmp_path / "job.yaml", text)
    refused(taospec("validate", path), f"{path}:8:9: $.mounts: pyxis's --container-mounts value")
    # with docker run, each mount is a word of its own
    docker = write(tmp_path / "docker.yaml", text + "slurm: {container: docker}\n")
    done = taospec("validate", docker)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("platform", "root", "refusal"),
    [
        ("docker", "/data/run:1", "docker run -v separates source, target and options with ':'"),
        ("brev", "/data/run:1", "docker run -v separates source, target and options with ':'"),
        ("slurm", "/data/run,1", "pyxis's --container-mounts mounts the results directory"),
        ("slurm", "/data/run:1", "pyxis's --container-mounts mounts the results directory"),
        ("slurm-docker", "/data/run:1", "docker run -v separates"),
    ],
)
def test_a_results_root_the_platform_cannot_mount_is_refused(
    taospec: Runner, tmp_path: Path, platform: str, root: str, refusal: str
) -> None:
    name, _, container = platform.partition("-")
    text = (
        f"version: 1\nnetwork_arch: hello\naction: greet\nimage: busybox:1\n"
        f'platform: {name}\nresults_root: "{root}"\ncommand: echo hi\n'
    )
    text += "brev: {instance: gpu-box}\n" if name == "brev" else ""
    text += f"slurm: {{container: {container}}}\n" if container else ""
    job = write(tmp_path / "job.yaml", text)
    lines = refused(taospec("validate", job), "$.results_root: " + refusal)
    assert lines[0].startswith(f"{job}:6:15: ")
    if name != "slurm":  # a local process takes the same directory as it is
        here = text.replace(f"platform: {name}", "platform: local").split("brev:")[0]
        local = write(tmp_path / "local.yaml", here)
        done = taospec("validate", local)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--name", "mine"], "--name: taospec names the container after the job's id"),
        (["--name=mine"], "--name: taospec names the container"),
        (["--rm"], "--rm: taospec keeps the stopped container"),
        (["-u", "0"], "-u: taospec sets the container's user from user:"),
        (["-u0"], "-u: taospec sets the container's user from user:"),
        (["--gpus", "all"], "--gpus: taospec passes gpus: as --gpus"),
        (["--shm-size=1g"], "--shm-size: taospec passes docker.shm_size"),
        (["--label", "tao-job=other"], "tao-job: taospec labels the container"),
        (["-ltao-owner=bob"], "tao-owner: taospec labels the container"),
        (["-v", "/etc:/results"], "/etc:/results mounts at or under /results"),
        (["--volume=/etc:/results/x:ro"], "/etc:/results/x:ro mounts at or under /results"),
        (["--mount", "type=bind,source=/etc,target=/results"], "type=bind,source=/etc,target"),
        # docker reads one-letter options run together: -tu0 is -t -u 0
        (["-tu0"], "-u: taospec sets the container's user from user:"),
        (["-itu", "0:0"], "-u: taospec sets the container's user from user:"),
        (["-dtv/etc:/results"], "/etc:/results mounts at or under /results"),
        (["--label", "tao-job"], "tao-job: taospec labels the container"),
        (["-l", "tao-owner"], "tao-owner: taospec labels the container"),
        (["--label-file", "labels"], "--label-file: write each label as --label"),
        (["--tmpfs", "/results"], "/results mounts at or under /results"),
        (["-v", "/etc://results"], "/etc://results mounts at or under /results"),
        # run attached, the launch waits for the job and takes its output for the container id
        (["--detach=false"], "--detach=false: taospec starts the container detached"),
        (["-d=0"], "-d=0: taospec starts the container detached"),
        (["-td=false"], "-d=false: taospec starts the container detached"),
        (["-a", "stdout"], "-a: taospec starts the container detached"),
        (["--attach=stderr"], "--attach: taospec starts the container detached"),
    ],
)
def test_extra_args_cannot_take_over_taospecs_docker_run(
    taospec: Runner, tmp_path: Path, args: list[str], refusal: str
) -> None:
    text = greet(
        "docker",
        "/data/results",
        f"user: '1000:1000'\ndocker:\n  extra_args: {json.dumps(['--init', *args])}\n",
    )
    refused(taospec("validate", write(tmp_path / "job.yaml", text)),
            f"$.docker.extra_args[1]: {refusal}")  # fmt: skip
    fine = [
        "--label",
        "team=cv",
        "-v",
        "/etc:/data:ro",
        "--ulimit",
        "memlock=-1",
        "-d",
        "-e",
        "-u0",
    ]
    ok = text.replace(json.dumps(["--init", *args]), json.dumps(fine))
    done = taospec("validate", write(tmp_path / "ok.yaml", ok))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["-e", "CUDA_VISIBLE_DEVICES=3"], "-e CUDA_VISIBLE_DEVICES"),
        (["--env", "CUDA_VISIBLE_DEVICES=3"], "--env CUDA_VISIBLE_DEVICES"),
        (["-eCUDA_VISIBLE_DEVICES=3"], "-e CUDA_VISIBLE_DEVICES"),
        (["--env=CUDA_VISIBLE_DEVICES=3"], "--env CUDA_VISIBLE_DEVICES"),
        (["-te", "CUDA_VISIBLE_DEVICES"], "-e CUDA_VISIBLE_DEVICES"),
        (["-e", "NVIDIA_VISIBLE_DEVICES=all"], "-e NVIDIA_VISIBLE_DEVICES"),
        (["--env=NVIDIA_VISIBLE_DEVICES"], "--env NVIDIA_VISIBLE_DEVICES"),
    ],
)
@pytest.mark.parametrize("platform", ["docker", "slurm"])
def test_extra_args_cannot_set_what_gpus_decides(
    taospec: Runner, tmp_path: Path, state_dir: Path, args: list[str], shown: str, platform: str
) -> None:
    # env.set refused these, but -e in extra_args handed the container GPUs beside gpus:'s,
    # which no other job's accounting knew of
    text = BASE.format(root=tmp_path / "results").replace(
        "platform: docker", f"platform: {platform}"
    )
    if platform == "slurm":  # the container's options reach its docker run
        text = text.replace('user: "1000:1000"\n', "") + "slurm: {container: docker}\n"
    extra = f"docker: {{extra_args: {json.dumps(['--init', *args])}}}\n"
    path = write(tmp_path / "job.yaml", text + extra)
    expected = f"{path}:9:33: $.docker.extra_args[1]: {shown}: "
    for verb in ("validate", "run"):
        lines = refused(taospec(verb, path), expected, "choose them with gpus: instead")
        assert len(lines) == 1, lines
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "results").exists()
    fine = path.read_text().replace(json.dumps(["--init", *args]), '[-e, "CUDA_VERSION=12"]')
    done = taospec("validate", write(tmp_path / "fine.yaml", fine))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("line", "word"),
    [("--array=1-3", "--array"), ("-a 1-3", "-a"), ("--array 1-3", "--array"), ("-a1-3", "-a"),
     ("--arr=0-1", "--arr")],
)  # fmt: skip
def test_an_array_job_is_refused_with_a_matrix_suggested(
    taospec: Runner, tmp_path: Path, state_dir: Path, line: str, word: str
) -> None:
    # sbatch ran an array job, but taospec followed only the one id sbatch printed
    rest = f"slurm:\n  container: none\n  extra_sbatch: [--qos=high, '{line}', -A proj]\n"
    text = greet("slurm", tmp_path / "results", rest)
    path = write(tmp_path / "job.yaml", text)
    expected = f"{path}:10:30: $.slurm.extra_sbatch[1]: {word}: "
    for verb in ("validate", "run"):
        lines = refused(taospec(verb, path), expected, "one Slurm job per target", "matrix:")
        assert len(lines) == 1, lines
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "results").exists()
    done = taospec("validate", write(tmp_path / "fine.yaml", text.replace(f"'{line}'", "-t 5")))
    assert done.returncode == 0, done.stderr


def test_a_slurm_job_runs_its_container_attached(taospec: Runner, tmp_path: Path) -> None:
    rest = "slurm: {container: docker}\ndocker: {extra_args: [-a, stdout, -d]}\n"
    text = greet("slurm", "/data/results", rest)
    refusal = "$.docker.extra_args[2]: -d: the Slurm job runs the container attached"
    lines = refused(taospec("validate", write(tmp_path / "job.yaml", text)), refusal)
    assert len(lines) == 1


SCRIPT_SWEEP = """\
version: 1
defaults:
  network_arch: hello
  platform: local
  image: busybox:1
  results_root: RESULTS
jobs:
  greet:
    action: greet
    matrix: {who: [plain-1.0, "it's", "$(id)"]}
    command: sh -c 'echo {matrix.who} > {results_dir}/out'
"""


def test_a_value_a_shell_script_would_misread_is_refused_before_anything_runs(
    taospec: Runner, tmp_path: Path
) -> None:
    sweep = write(tmp_path / "sweep.yaml", SCRIPT_SWEEP.replace("RESULTS", str(tmp_path / "r")))
    lines = refused(taospec("validate", sweep), "$.jobs.greet.matrix.who[1]: {matrix.who} is "
                    "\"it's\" and stands in the script `sh -c` runs")  # fmt: skip
    assert [line.split(": ")[1] for line in lines] == [
        "$.jobs.greet.matrix.who[1]",
        "$.jobs.greet.matrix.who[2]",
    ]
    assert "pass it as an argument instead: sh -c '... \"$1\"' sh {matrix.who}" in lines[0]
    as_argument = "command: sh -c 'echo \"$1\" > {results_dir}/out' sh {matrix.who}"
    ok = write(tmp_path / "ok.yaml", SCRIPT_SWEEP.replace("RESULTS", str(tmp_path / "r")).replace(
        "command: sh -c 'echo {matrix.who} > {results_dir}/out'", as_argument))  # fmt: skip
    assert taospec("validate", ok).returncode == 0
    notify = write(tmp_path / "notify.yaml", ok.read_text() + "    notify: echo {matrix.who}\n")
    refused(taospec("validate", notify), "$.jobs.greet.matrix.who[2]: {matrix.who} is '$(id)'")
    # a results directory the script would misread: refused at render, before any record
    root = tmp_path / "it's here"
    single = write(tmp_path / "one.yaml", "version: 1\nnetwork_arch: hello\naction: greet\n"
                   f"image: busybox:1\nresults_root: \"{root}\"\n"
                   "command: sh -c 'touch {results_dir}/out'\n")  # fmt: skip
    state = tmp_path / "state"
    for verb in ("render", "run"):
        done = taospec(verb, single, env={"TAO_STATE_DIR": str(state)})
        assert done.returncode == 2, (verb, done.stderr)
        assert f'{{results_dir}} is "{root}/$JOB_ID" and stands in the script' in done.stderr
    assert not root.exists()
    assert not (state / "jobs").exists() or not any((state / "jobs").iterdir())


UPSTREAM = """\
version: 1
defaults: {network_arch: hello, image: "busybox:1", user: "1000:1000"}
jobs:
  up: {action: make, platform: local, results_root: "ROOT", command: "true"}
  down:
    action: use
    platform: docker
    needs: [up]
    results_root: /data/results
    mounts: [{source: "{needs.up.results_dir}", target: /in}]
    command: COMMAND
"""


def test_an_upstream_results_directory_is_held_to_where_it_is_filled_in(
    taospec: Runner, tmp_path: Path
) -> None:
    def job(root: str, command: str) -> Path:
        text = UPSTREAM.replace("ROOT", root).replace("COMMAND", command)
        return write(tmp_path / "pipeline.yaml", text)

    refused(taospec("validate", job("/data/a:b", "ls /in")),
            "pipeline.yaml:10:23: $.jobs.down.mounts[0].source: {needs.up.results_dir} is a "
            "folder under '/data/a:b'", "give target up a results_root without them")  # fmt: skip
    script = "sh -c 'ls {needs.up.results_dir}'"
    refused(taospec("validate", job("/data/a b", script)),
            "pipeline.yaml:11:14: $.jobs.down.command: {needs.up.results_dir} is "
            "'/data/a b/<id>' and stands in the script `sh -c` runs")  # fmt: skip
    for fine in (job("/data/a b", "ls /in"), job("/data/ab", script)):
        done = taospec("validate", fine)
        assert done.returncode == 0, done.stderr


def test_job_files_from_pipes_are_read_once(taospec: Runner, tmp_path: Path) -> None:
    text = (JOBS / "hello-docker.yaml").read_text()
    versions = str(JOBS / "versions.yaml")
    ok = taospec("validate", "--versions", versions, "-", input=text)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "<stdin>: ok\n"  # as its problems name it
    shown = taospec("render", "--versions", versions, "-", input=text)
    assert shown.returncode == 0, shown.stderr
    assert "taospec-test/busybox:1" in shown.stdout
    via_dev = taospec("render", "--versions", versions, "/dev/stdin", input=text)
    assert via_dev.returncode == 0, via_dev.stderr
    lost = taospec("validate", "-", input=text)  # a pipe has no folder: nothing is searched
    refused(lost, "<stdin>:8:23: $.image.versions_key: image key 'images.test.busybox' needs a "
            "versions.yaml, and a job file read from a pipe has no directory to search for "
            "one: validate and render take --versions FILE")  # fmt: skip
    assert "next to" not in lost.stderr, lost.stderr  # a pipe is next to nothing
    command = " ".join(taospec_command())
    substituted = subprocess.run(
        ["bash", "-c", f"{command} validate --versions {versions} <(cat {JOBS}/hello-docker.yaml)"],
        capture_output=True, text=True, env=taospec.env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert substituted.returncode == 0, substituted.stderr
    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat {JOBS / 'hello-docker.yaml'} > {fifo}"])
    fed = taospec("render", "--versions", versions, fifo)
    writer.wait(timeout=30)
    assert fed.returncode == 0, fed.stderr
    assert f"# taospec plan: {fifo}" in fed.stdout
    missing = taospec("validate", "--versions", tmp_path / "nope.yaml", "-", input=text)
    assert missing.returncode == 2
    assert "no such versions file" in missing.stderr


def test_a_piped_job_file_is_target_stdin_and_remembered_whatever_its_pipe(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    """A pipe's path (/dev/fd/63, /dev/stdin) names a new pipe each run: the target was named
    "63", and the plan and what run remembers of it changed with the pipe."""
    spec = write(
        tmp_path / "hello.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\n"
        f"image: busybox:1\nresults_root: {tmp_path / 'results'}\ncommand: sh -c 'echo hi'\n",
    )
    command = " ".join(taospec_command())

    def bash(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              env=taospec.env, cwd=tmp_path, check=False)  # fmt: skip

    dry = bash(f"{command} run -n <(cat {spec})")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].split() == ["run", "stdin", "never", "run"]
    assert "# taospec plan: <stdin> (target stdin, platform local)" in dry.stdout
    ran = bash(f"{command} run <(cat {spec})")
    assert ran.returncode == 0, ran.stderr
    job_id = ran.stdout.split()[0]
    again = bash(f"cat {spec} | {command} run /dev/stdin")
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip().endswith(f"stdin: up to date (job {job_id})")
    targets = (state_dir / "taospec" / "targets").iterdir()
    remembered = [json.loads(path.read_text())["target"] for path in targets]
    assert remembered == [f"{(tmp_path / '<stdin>').resolve()}#stdin"]
    assert bash(f"{command} run -n {spec}").stdout.split()[:2] == ["run", "hello"]  # a file's own


# -- the product ---------------------------------------------------------------------

FIELDS = ["version", "network_arch", "action", "platform", "image", "command", "spec", "gpus",
          "nodes", "storage_tier", "results_root", "mounts", "env", "user", "upload_excludes",
          "docker", "brev", "slurm", "inputs", "needs", "matrix"]  # fmt: skip
BAD: dict[str, Any] = {
    "wrong-type": [1, {"a": 1}],
    "empty": "",
    "hostile": "$(touch /tmp/gate-pwned); `id` ; ../../etc/passwd\n--privileged",
    "non-text-key": {1: "x"},
    "huge": "x" * 200_000,
}


def _good(tmp_path: Path) -> dict[str, Any]:
    data = yaml.safe_load(BASE.format(root=tmp_path / "results"))
    data["mounts"] = [{"source": str(tmp_path), "target": "/data", "readonly": True}]
    data["env"] = {"pass": ["GATE_PRODUCT"], "set": {"MODE": "x"}}
    data["spec"] = {"train": {"epochs": 1}}
    data["gpus"] = [0]
    return data


def _bodies(stderr: str) -> list[str]:
    """Each problem's message (without its file, place and path)."""
    out = []
    for line in stderr.splitlines():
        match = LOCATED.match(line)
        if match:
            out.append(match["msg"])
        elif ": " in line and not line.startswith("taospec: ") and " job files " not in line:
            out.append(line.split(": ", 1)[1])
    return out


def _call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.err


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("field", FIELDS)
def test_validate_here_refuses_exactly_what_render_or_run_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    field: str, kind: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GATE_PRODUCT", "1")
    monkeypatch.chdir(tmp_path)
    data = _good(tmp_path)
    data[field] = BAD[kind]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, width=1_000_000))
    validated, said = _call(capsys, "validate", "--here", str(path))
    rendered, render_said = _call(capsys, "render", str(path))
    dry, dry_said = _call(capsys, "run", "-n", str(path))
    assert {validated, rendered, dry} <= {0, 2}, (said, render_said, dry_said)
    assert (validated == 2) == (rendered == 2 or dry == 2), (said, render_said, dry_said)
    for body in _bodies(render_said) + _bodies(dry_said):
        assert body in _bodies(said), (body, said)
    assert not Path("/tmp/gate-pwned").exists()
    assert not (tmp_path / "results").exists()


def test_the_product_holds_for_the_shipped_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for path in sorted(JOBS.glob("*.yaml")):
        if path.name == "versions.yaml":
            continue
        code, said = _call(capsys, "validate", str(path))
        assert code == 0, said
    assert (ROOT / "README.md").read_text().count("validate --here") >= 1


# -- every string of every example -------------------------------------------------------

HOSTILE_VALUES = [
    "a b", "$(id)", "x'y", 'x"y', "a\nb", "a:b", "a,b", "a;b", "-x", "", "~", "*", "é",
    "/tmp/a b", "/tmp/a:b", "{results_dir}", "{config_path}", "{job_id}", "{nope}", "a{b",
    "ghp_" + "z" * 36, "nvapi-" + "Q" * 40, "AKIAABCDEFGHIJKLMNOP", "https://u:pw123456@h/x",
    "-----BEGIN RSA PRIVATE KEY-----", "Authorization: Bearer abcdef0123456789",
    "TOKEN=abcdefgh", "--password=x1234567",
    # values that become a credential only as the plan carries them, and values that look
    # like one only until the plan's words are read as a shell reads them
    "/x/Bearer 00", "/Bearer 0", "--token", "Bearer 0{results_dir}", "Authorization: ",
    "--token={results_dir}", "nvapi-00000000{job_id}Bearer ", "Authorization: Bearer ",
    "nvapi-xxxxxxxxxxxxxx\\yy",  # as a string command, shlex makes it one 16-letter token
    "Authorization: bearer\t", "bearer\t",  # YAML writes the tab as \t in the spec file
    "Authorization: Basic ",  # YAML quotes it; a remote script quotes the spec file again
]  # fmt: skip


TYPED_VALUES: list[Any] = [
    -1, 0, 1, 2, 10**9, True, False, 1.5, None, [], [None], {}, "x", [0, 0], ["all"], "all",
    {"free": 1}, {"free": 0},
]  # fmt: skip


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every value in ``value`` with its path, the containers before what they hold."""
    found = [(path, value)] if path else []
    if isinstance(value, dict):
        found += [p for key, item in value.items() for p in _places(item, (*path, key))]
    elif isinstance(value, list):
        found += [p for i, item in enumerate(value) for p in _places(item, (*path, i))]
    return found


@pytest.mark.parametrize(
    "example", sorted(p.name for p in JOBS.glob("*.yaml") if p.name != "versions.yaml")
)
def test_what_validate_passes_renders_for_any_value_anywhere(example: str) -> None:
    # Each value of the example, in turn, replaced by each of a list of wrongly typed values
    # (and each string by each hostile text): the loader (validate, without --here) refuses
    # it with located problems or accepts it, and what it accepts must render; otherwise
    # validate would pass what render refuses with no line to point at, or crash.
    path = JOBS / example
    good = yaml.safe_load(path.read_text())
    images = Images(path)
    for place, old in _places(good):
        for value in [*TYPED_VALUES, *(HOSTILE_VALUES if isinstance(old, str) else [])]:
            data = copy.deepcopy(good)
            holder = data
            for part in place[:-1]:
                holder = holder[part]
            holder[place[-1]] = value
            try:
                jobfile = loader.load_jobfile_text(yaml.safe_dump(data), str(path), images)[0]
            except SpecError:
                continue
            except Exception as crashed:  # any other exception is a crash, reported as one
                pytest.fail(f"{place} = {value!r}: validate crashed: {crashed!r}")
            for target in jobfile.targets.values():
                try:
                    render(target.job, upstream=upstream_stand_ins(target.needs))
                except InvalidInput as refused:
                    pytest.fail(f"{place} = {value!r} passes validate, but render: {refused}")


@pytest.mark.parametrize(
    ("written", "read"), [("1:30", "90"), ("010", "8"), ("NO", "false"), ("1.10", "1.1")]
)
def test_an_env_value_yaml_would_change_is_refused_with_its_quoted_form(
    taospec: Runner, tmp_path: Path, written: str, read: str
) -> None:
    # YAML 1.1 reads 1:30 as sexagesimal 90: the job got T=90 and nobody saw it
    path = job(tmp_path, f"env: {{set: {{T: {written}}}}}\n")
    refused(taospec("validate", path),
            f"{path}:9:16: $.env.set.T: YAML reads {written} as {read}, the value T would get; "
            f"quote it to pass it as written: T: '{written}'")  # fmt: skip
    path.write_text(path.read_text().replace(f"T: {written}", f"T: '{written}'"))
    assert taospec("validate", path).returncode == 0
    path.write_text(path.read_text().replace(f"T: '{written}'", "T: 10"))
    assert taospec("validate", path).returncode == 0  # a number YAML keeps as written


def test_a_job_file_whose_path_holds_a_passed_value_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # the path was stored with the target's state and printed in render's header
    value = "correcthorsebattery"
    path = job(tmp_path / value, "env: {pass: [GATE_VAR]}\n")
    for verb in (("render",), ("run", "-n"), ("run",)):
        done = taospec(*verb, path, env={"GATE_VAR": value})
        assert done.returncode == 2, done.stderr
        assert "$: the job file's path holds the value of GATE_VAR" in done.stderr
        assert value not in done.stdout + done.stderr
    assert list(state_dir.iterdir()) == []


def shell_job(folder: Path, platform: str, env: str, command: str = "env") -> Path:
    """A job on ``platform`` (``slurm/<container>`` for Slurm) whose ``env:`` is ``env``."""
    platform, _, container = platform.partition("/")
    rest = f"slurm: {{container: {container}}}\n" if container else ""
    rest += f"env: {env}\n"
    text = greet(platform, folder / "results", rest).replace("busybox:1", TEST_IMAGE)
    return write(folder / "job.yaml", text.replace("command: echo hi", f"command: {command}"))


@pytest.mark.parametrize(
    ("platform", "env", "where"),
    [
        ("local", "{set: {OPTIND: o}}", ":8:13: $.env.set.OPTIND: "),  # sh stopped: no exit code
        ("local", "{set: {IFS: ','}}", ":8:13: $.env.set.IFS: "),  # sh put back its own
        ("local", "{pass: [PWD]}", ":8:14: $.env.pass[0]: "),
        ("slurm/none", "{set: {UID: '5'}}", ":9:13: $.env.set.UID: "),  # readonly in bash
        ("slurm/none", "{set: {SECONDS: '5'}}", ":9:13: $.env.set.SECONDS: "),  # bash's clock
        ("slurm/pyxis", "{set: {RANDOM: '5'}}", ":9:13: $.env.set.RANDOM: "),
        ("slurm/docker", "{pass: [EUID]}", ":9:14: $.env.pass[0]: "),  # the sourced file
    ],
)
def test_a_variable_the_launching_shell_sets_itself_is_refused_where_it_is_written(
    slurm: None, taospec: Runner, open_tmp: Path, state_dir: Path, platform: str, env: str,
    where: str,
) -> None:  # fmt: skip
    # local jobs start through sh and Slurm jobs through the bash of the sbatch script, which
    # keep these names for themselves: the job got another value, or none, or never started
    path = shell_job(open_tmp, platform, env)
    name = re.findall(r"[A-Z]+", env)[0]
    shell = "sh" if platform == "local" else "bash"
    for verb in ("validate", "run"):
        done = taospec(verb, path, env={"PWD": "/x", "EUID": "5"})
        refused(done, f"{path}{where}{shell} ")
        assert f"sets {name} itself" in done.stderr, done.stderr
    assert not (state_dir / "jobs").exists()


@pytest.mark.parametrize(
    ("platform", "name"), [("docker", "OPTIND"), ("docker", "IFS"), ("slurm/docker", "UID")]
)
def test_a_variable_docker_run_passes_as_written_reaches_the_job(
    slurm: None, engine: str, taospec: Runner, open_tmp: Path, platform: str, name: str
) -> None:
    # docker run -e hands the container the value as written: no shell of taospec's reads it
    user = 'user: "1000:1000"\n' if platform == "docker" else ""
    path = shell_job(open_tmp, platform, f"{{set: {{{name}: 'v,1'}}}}\n{user}")
    done = taospec("run", path, timeout=300)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[0]
    seen = taospec("logs", job_id)
    subprocess.run(["docker", "rm", "-f", job_id], capture_output=True, check=False)
    assert f"{name}=v,1" in seen.stdout.splitlines(), seen.stdout


@pytest.mark.parametrize(
    ("args", "relative"),
    [
        ("[-v, './data:/data:ro']", "./data"),
        ("['--volume=../jobs/data:/data']", "../jobs/data"),
        ("[--mount, 'type=bind,src=./data,dst=/data']", "./data"),
        ("[--env-file, job.env]", "job.env"),
        ("[--security-opt, seccomp=profile.json]", "profile.json"),
    ],
)
def test_a_relative_path_docker_reads_from_where_taospec_runs_is_refused(
    engine: str, taospec: Runner, open_tmp: Path, tmp_path: Path, state_dir: Path, args: str,
    relative: str,
) -> None:  # fmt: skip
    # docker run reads these paths from the folder it runs in: a job that ran from its own
    # folder got ./data; run from anywhere else, dockerd made an empty root-owned ./data
    # there and the job read nothing (or docker found no env file), and validate passed
    folder = open_tmp / "jobs"
    write(folder / "data" / "f", "x\n")
    write(folder / "job.env", "GREETING=hi\n")
    text = greet(
        "docker", open_tmp / "results", f'user: "1000:1000"\ndocker: {{extra_args: {args}}}\n'
    )
    path = write(folder / "job.yaml", text.replace("busybox:1", TEST_IMAGE))
    lines = refused(taospec("validate", path))
    assert f"{path}:9:23: $.docker.extra_args[0]: " in lines[0]  # at the option's word
    assert f"docker reads {relative} from the folder it runs in, not the job file's" in lines[0]
    assert refused(taospec("run", path)) == lines
    assert not (state_dir / "jobs").exists()
    assert not (tmp_path / "data").exists()


def test_a_results_root_a_local_job_s_user_cannot_reach_is_refused_before_any_record(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    """Root starts a local job as its UID:GID and hands it its results folder, which that
    user could not reach under a folder only root may enter (as under /root): the record
    opened and the job failed for want of permission. A container's bind mount reaches it."""
    locked = open_tmp / "private"
    locked.mkdir(mode=0o700)
    root = locked / "results"
    rest = 'user: "1000:1000"\n'
    path = write(open_tmp / "job.yaml", greet("local", root, rest).replace("echo hi", "'true'"))
    assert taospec("validate", path).returncode == 0  # the file alone says nothing of here
    said = (
        f"{path}:6:15: $.results_root: the job runs as 1000:1000, who cannot reach {locked} "
        "(a folder on the way to its results folder)"
    )
    for verb in (("validate", "--here"), ("run",)):
        refused(taospec(*verb, path), said)
    dry = taospec("run", "-n", path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stderr.startswith(f"warning: {said}")
    assert not (state_dir / "jobs").exists()
    assert list(locked.iterdir()) == []
    docker = greet("docker", root, rest).replace("busybox:1", engine).replace("echo hi", "'true'")
    done = taospec("run", write(open_tmp / "job.yaml", docker))
    assert done.returncode == 0, done.stderr
    subprocess.run(["docker", "rm", "-f", done.stdout.split()[0]], capture_output=True, check=False)


ULIMITS = [
    # docker run takes these (the kernel may still refuse a limit when the container starts)
    "core=0", "nofile=1024:2048", "stack=8388608:-1", "nofile=+2048:4096", "memlock=-1",
    "rtprio=0:0", "nofile=-1:-1",
    # and its own parser refuses these before anything starts
    "nofile=abc", "memlock=unlimited", "nofile=1024:512", "foo=1", "as=1", "NOFILE=1",
    "nofile=1:2:3", "nofile", "nofile=", "nofile=9223372036854775808", "=1", "nofile= 1",
]  # fmt: skip


@pytest.mark.parametrize("limit", ULIMITS)
def test_validate_refuses_exactly_the_ulimits_docker_run_refuses(
    engine: str, taospec: Runner, tmp_path: Path, limit: str
) -> None:
    # docker run refused these with exit 125 once the record had opened, and validate passed
    checked = subprocess.run(
        ["docker", "run", "--rm", "--ulimit", limit, engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    misread = 'for "--ulimit" flag' in checked.stderr
    for args in (f"[--ulimit, '{limit}']", f"['--ulimit={limit}']"):
        path = job(tmp_path, f"docker: {{extra_args: {args}}}\n")
        done = taospec("validate", path)
        assert (done.returncode == 2) == misread, (checked.stderr, done.stderr)
        if misread:
            said = f": $.docker.extra_args[0]: --ulimit {limit}: docker run refuses it: "
            assert refused(done, said)[0].startswith(f"{path}:9:2")


def test_validate_here_names_nvidia_smi_missing_for_free_gpus(
    taospec: Runner, tmp_path: Path
) -> None:
    # gpus: {free: N} asks nvidia-smi which GPUs are free: validate --here passed, then run
    # stopped at "nvidia-smi: command not found", with no line to fix
    path = write(tmp_path / "job.yaml", greet("local", tmp_path / "results", "gpus: {free: 1}\n"))
    bare = {"PATH": str(tmp_path / "no-tools")}
    assert taospec("validate", path, env=bare).returncode == 0
    refused(taospec("validate", "--here", path, env=bare),
            f"{path}:8:7: $.gpus: gpus: {{free: N}} asks nvidia-smi which GPUs are free, and "
            "nvidia-smi is not on PATH here")  # fmt: skip


def _keeps(argv: list[str], name: str) -> bool:
    """Whether the shell ``argv`` starts hands its command ``name`` with a value not 'zz'."""
    done = subprocess.run(argv, capture_output=True, text=True, cwd="/", check=False)
    return f"{name}=zz" not in done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("dash") is None, reason="needs dash, Debian's /bin/sh")
def test_the_shell_variables_refused_are_those_the_shells_keep() -> None:
    # a local job starts under sh, which is dash or bash; a Slurm job's script is bash
    candidates = {*rules.SHELL_VARIABLES["sh"], *rules.SHELL_VARIABLES["bash"], "UID", "EUID",
                  "SECONDS", "HOME", "LANG", "BASH_ENV", "ENV", "PS3", "MAIL", "A_B"}  # fmt: skip
    for name in sorted(candidates):
        started = [["env", f"{name}=zz", shell, "-c", "exec env"] for shell in ("dash", "bash")]
        started[1][2:3] = ["bash", "--posix"]  # bash as sh
        sh_keeps = any(_keeps(argv, name) for argv in started)
        assert sh_keeps == (name in rules.SHELL_VARIABLES["sh"]), name
        script = f"set -euo pipefail; export {name}=zz; exec env"
        assert _keeps(["bash", "-c", script], name) == (name in rules.SHELL_VARIABLES["bash"]), name


@pytest.mark.parametrize(
    ("versions", "said"),
    [
        ("# nothing yet\n", "is empty; a versions.yaml is a mapping of keys"),
        ("- nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt\n", "holds a list; a versions.yaml is a"),
        ("nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt\n", "holds a single str value; a versions"),
    ],
)
def test_a_versions_yaml_of_the_wrong_shape_is_named_as_one(
    taospec: Runner, tmp_path: Path, state_dir: Path, versions: str, said: str
) -> None:
    # it was refused as "a job file is a mapping of keys", which sent the reader to the job file
    text = (JOBS / "hello-docker.yaml").read_text()
    path = write(tmp_path / "hello.yaml", text)
    write(tmp_path / "versions.yaml", versions)
    for verb in ("validate", "render", "run"):
        lines = refused(taospec(verb, path), f"{tmp_path / 'versions.yaml'}:1:1: $: {said}")
        assert not any("job file" in line for line in lines), lines
    assert list(state_dir.iterdir()) == []


CAPS, SECURITY = ("--cap-add", "--cap-drop"), ("--security-opt",)
DOCKER_VALUES = [
    # docker run takes these
    ("--security-opt", "no-new-privileges"), ("--security-opt", "no-new-privileges=true"),
    ("--security-opt", "no-new-privileges:1"), ("--security-opt", "seccomp=unconfined"),
    ("--security-opt", "seccomp:unconfined"), ("--security-opt", "systempaths=unconfined"),
    ("--security-opt", "label=disable"), ("--cap-add", "SYS_PTRACE"),
    ("--cap-add", "cap_sys_admin"), ("--cap-drop", "NET_RAW"), ("--cap-drop", "all"),
    ("--cpus", "1.5"), ("--cpus", "1/2"), ("--cpus", "1e-1"), ("--cpus", ".5"), ("--cpus", "0"),
    ("--cpus", "+1"), ("--cpus", "0x1p-1"), ("--cpus", "0.01"), ("--memory", "64m"),
    ("--memory", "1e3m"), ("--memory", "64 m"), ("--memory", "0"), ("-m", "6m"),
    ("--memory", "64MiB"), ("--memory", "1_000_000_000b"), ("--memory-reservation", "64m"),
    ("--memory-swap", "-1"), ("--pids-limit", "-1"), ("--pids-limit", "0x10"),
    ("--pids-limit", "010"), ("--pids-limit", "1_0"), ("--pids-limit", "+5"),
    ("--stop-timeout", "10"), ("--oom-score-adj", "500"), ("--memory-swappiness", "-1"),
    ("--memory-swappiness", "100"), ("--blkio-weight", "500"), ("-c", "512"),
    ("--health-interval", "1h30m"), ("--health-interval", "1.5s"), ("--health-timeout", "0"),
    ("--health-interval", "1ms"), ("--health-retries", "3"), ("--read-only", "T"),
    ("--init", "1"), ("--privileged", "False"), ("--workdir", "/x"), ("-w", "/"),
    ("--cpu-period", "100000"), ("--cpu-quota", "-1"), ("-p", "80"),
    ("--publish", "127.0.0.1::80/udp"), ("-p", "8000-8001/UDP"),
    ("--sysctl", "net.core.somaxconn=1024"), ("--sysctl", "kernel.shmmax=65536"),
    ("--mount", "type=tmpfs,target=/x,tmpfs-mode=1777,tmpfs-size=1g"),
    ("--mount", '"type=tmpfs",dst=/x'), ("--mount", "TYPE=volume,target=/x,volume-nocopy"),
    ("--dns", "8.8.8.8"), ("--dns", "::1"), ("--dns-search", "example.com"), ("--dns-search", "."),
    ("--expose", "80"), ("--expose", "80-90/udp"), ("--expose", "0"), ("-p", "127.0.0.1:8080:80"),
    ("-p", "[::1]:8080:80"), ("-p", "8000-8001:80-81"), ("-p", ":80"), ("--pull", "never"),
    ("--pull", "missing"), ("--userns", "host"), ("--userns", ""), ("--uts", "host"),
    ("--pid", "host"), ("--pid", ""), ("--cgroupns", "private"), ("--cgroupns", "host"),
    ("--ipc", "private"), ("--ipc", "shareable"), ("--ipc", "none"), ("--ipc", "host"),
    ("--isolation", "default"), ("--isolation", "DEFAULT"), ("--isolation", ""),
    ("--link-local-ip", "169.254.1.1"), ("--cpu-period", "1000"), ("--cpu-period", "0"),
    ("--cpu-quota", "1000"), ("--cpu-quota", "0"), ("--cpu-quota", "-5"), ("--cpu-shares", "0"),
    ("--cpuset-cpus", "0"), ("--cpuset-cpus", "0-1"), ("--cpuset-cpus", "0,1"),
    ("--cpuset-cpus", ""), ("--stop-signal", "TERM"), ("--stop-signal", "sigterm"),
    ("--stop-signal", "9"), ("--stop-signal", "256"), ("--stop-signal", "SIGRTMIN+3"),
    ("--stop-signal", "RTMAX-14"), ("--stop-signal", "CLD"), ("--stop-signal", ""),
    ("--hostname", "h" * 64), ("-v", "/tmp:/data:ro"), ("-v", "/tmp:/data:z"),
    ("-v", "/tmp:/data:ro,Z"), ("-v", "/tmp:/data:delegated"), ("-v", "/tmp:/data:rw,z,private"),
    ("--device", "/dev/null:/dev/x:mr"), ("--device", "/dev/null:rw"), ("--device", "/dev/null"),
    ("--device", "/dev/null:/dev/x"), ("--device-cgroup-rule", "c *:* rwm"),
    ("--device-cgroup-rule", "b 8:0 r"), ("--device-cgroup-rule", "c 1:3 rr"),
    # the docker CLI's parser refuses these
    ("--cpus", "abc"), ("--cpus", "0.0000000001"), ("--cpus", "1/0"), ("--cpus", "1/-2"),
    ("--memory", "1x"), ("--memory", "-1"), ("--memory", "1gi"), ("--memory", "1.5.2g"),
    ("--memory", "16EiB"), ("--memory-swap", "1x"), ("--pids-limit", "x"),
    ("--pids-limit", "08"), ("--pids-limit", "1__0"), ("--pids-limit", "9223372036854775808"),
    ("--stop-timeout", "1.5"), ("--oom-score-adj", "x"), ("--blkio-weight", "70000"),
    ("--blkio-weight", "-1"), ("-c", "x"), ("--health-interval", "5"),
    ("--health-interval", "5d"), ("--health-interval", "-5s"), ("--health-retries", "-1"),
    ("--memory-swappiness", "101"), ("--memory-swappiness", "-2"), ("--read-only", "maybe"),
    ("--init", "yes"), ("--io-maxiops", "x"), ("--io-maxbandwidth", "x"),
    ("--kernel-memory", "x"), ("-d", "maybe"), ("--init", ""), ("-p", "abc"),
    ("-p", "70000"), ("--publish", "80/xyz"), ("-p", "81-80"), ("--sysctl", "vm.swappiness=1"),
    ("--sysctl", "net.core.somaxconn"), ("--ip", "1.2.3"), ("--ip", "::1"),
    ("--ip6", "10.0.0.1"), ("--mount", "type=tmpfs"), ("--mount", "type=tmpfs,dst=/x,bogus=1"),
    ("--mount", "type=tmpfs,dst=/x,tmpfs-size=abc"), ("--mount", "type=tmpfs,dst=/x,tmpfs-mode=9"),
    ("--mount", "type=foo,dst=/x"), ("--mount", "type=tmpfs,dst=x"), ("--mount", "dst=/x,ro=no"),
    ("--mount", "type=tmpfs,dst=/x,volume-nocopy"), ("--mount", "dst=/x,nocopy"),
    ("--security-opt", "foo"), ("--security-opt", "disable"), ("--security-opt", "label="),
    ("--security-opt", "seccomp="), ("--dns", "notanip"), ("--dns-search", "bad domain"),
    ("--dns-search", "a..b"), ("--dns-search", "-a.com"), ("--dns-search", "a_b.com"),
    ("--expose", "abc"), ("--expose", "90-80"), ("--expose", "70000"),
    ("-p", "127.0.0.1:99999:80"), ("-p", "99999:80"), ("-p", "127.0.0.1:8001-8000:80"),
    ("--pull", "sometimes"), ("--pull", "Never"), ("--userns", "bogus"), ("--userns", "HOST"),
    ("--uts", "bogus"), ("--pid", "bogus"), ("--pid", "container:"), ("--cgroupns", "bogus"),
    ("--device", "rel"), ("--device", "/dev/null:rel"), ("--device", "/dev/null:/dev/x:rwx"),
    ("--device", "/dev/null:/dev/x:rr"), ("--device", "/dev/null:/dev/x:"),
    ("--device", "/dev/null::rw"), ("--device", "/dev/null:/dev/x:RW"),
    ("--device-read-bps", "/tmp/x:1mb"), ("--device-read-bps", "/dev/null"),
    ("--device-read-bps", "/dev/null:abc"), ("--device-write-bps", "/dev/null:1x"),
    ("--device-read-iops", "/dev/null:1.5"), ("--device-write-iops", "/dev/null:abc"),
    ("--device-cgroup-rule", "bad rule"), ("--device-cgroup-rule", "a 1:3 rwmr"),
    ("--device-cgroup-rule", "x 1:3 r"), ("--device-cgroup-rule", "c 1:3"),
    ("--device-cgroup-rule", "c  1:3 r"),
    # and the engine refuses these on any machine
    ("--workdir", "rel"), ("--workdir", "./x"), ("-w", "~"), ("--memory", "4m"),
    ("--memory-reservation", "1k"), ("--oom-score-adj", "2000"), ("--cpus", "-1"),
    ("--cpus", "0.001"), ("--health-timeout", "500us"), ("--health-interval", "5\u00b5s"),
    ("--security-opt", "foo=bar"), ("--security-opt", "=x"), ("--security-opt", "label:user=x"),
    ("--security-opt", "no-new-privileges="), ("--security-opt", "no-new-privileges=maybe"),
    ("--security-opt", "systempaths=x"), ("--security-opt", "systempaths:unconfined"),
    ("--cap-add", "FOO"), ("--cap-add", "SYS_PTRACED"), ("--cap-drop", "CAP_FOO"),
    ("--ipc", "bogus"), ("--ipc", "container:"), ("--isolation", "hyperv"),
    ("--isolation", "process"), ("--link-local-ip", "notanip"), ("--cpu-period", "100"),
    ("--cpu-period", "1000001"), ("--cpu-quota", "1"), ("--cpu-quota", "999"),
    ("--cpu-shares", "-5"), ("--cpuset-cpus", "a-b"), ("--cpuset-cpus", "1-0"),
    ("--cpuset-cpus", "0-"), ("--cpuset-cpus", ",0"), ("--cpuset-mems", "x"),
    ("--stop-signal", "SIGFOO"), ("--stop-signal", "RTMIN+16"), ("--stop-signal", "RTMAX-15"),
    ("--stop-signal", "0"), ("--stop-signal", "UNUSED"), ("--hostname", "h" * 65),
    ("-v", "/tmp:/data:bogus"), ("-v", "/tmp:/data:rw,ro"), ("-v", "/tmp:/data:ro,rw"),
    ("-v", "/tmp:/data:shared,slave"), ("-v", "/tmp:/data:RO"), ("-v", "/tmp:/data:z,Z"),
    ("-v", "/tmp:/data:nocopy"),
    # the kernel reads a tmpfs's size, counts, mode and IDs as the container starts
    ("--tmpfs", "/x:size=10g"), ("--tmpfs", "/x:size=50%"), ("--tmpfs", "/x:size=0x10m"),
    ("--tmpfs", "/x:size=010k"), ("--tmpfs", "/x:size=1m%"), ("--tmpfs", "/x:nr_inodes=10m"),
    ("--tmpfs", "/x:mode=777"), ("--tmpfs", "/x:mode=+1777"), ("--tmpfs", "/x:uid=4294967294"),
    ("--tmpfs", "/x:uid=0x10"), ("--tmpfs", "/x:uid=+5,gid=010,ro,noexec"),
    ("--tmpfs", "/x:size=10GB"), ("--tmpfs", "/x:size=1.5g"), ("--tmpfs", "/x:size=-1"),
    ("--tmpfs", "/x:size=+1m"), ("--tmpfs", "/x:size=0x"), ("--tmpfs", "/x:size="),
    ("--tmpfs", "/x:nr_inodes=1%"), ("--tmpfs", "/x:nr_blocks=5%"), ("--tmpfs", "/x:mode=8"),
    ("--tmpfs", "/x:mode=0x1ff"), ("--tmpfs", "/x:uid=-1"), ("--tmpfs", "/x:uid=4294967295"),
    ("--tmpfs", "/x:uid=08"), ("--tmpfs", "/x:gid=abc"), ("--tmpfs", "/x:mode=77777777777"),
]  # fmt: skip


@pytest.mark.parametrize(("flag", "value"), DOCKER_VALUES)
def test_validate_refuses_exactly_the_option_values_docker_run_refuses(
    engine: str, taospec: Runner, tmp_path: Path, flag: str, value: str
) -> None:
    # each passed validate and ended in exit 125 once the record had opened
    joined = f"{flag}={value}"
    checked = subprocess.run(
        ["docker", "run", "--rm", "--health-cmd=true", joined, engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode in (0, 125), checked.stderr
    switch = flag in ("--read-only", "--init", "--privileged", "-d")
    forms = [[joined]] if switch else [[joined], [flag, value]]
    for args in forms:
        path = job(tmp_path, f"docker: {{extra_args: {json.dumps(args)}}}\n")
        done = taospec("validate", path)
        assert (done.returncode == 2) == (checked.returncode == 125), (checked.stderr, done.stderr)
        if checked.returncode == 125:
            shown = joined if switch else f"{flag} {value}"
            said = f": $.docker.extra_args[0]: {shown}: docker run refuses it: "
            assert refused(done, said)[0].startswith(f"{path}:9:")


DOCKER_ARG_SETS = [
    ["--memory=64m", "--memory-swap=32m"], ["--memory-swap=1g"], ["-m=64m", "--memory-swap=32m"],
    ["--memory=64m", "--memory-reservation=128m"], ["--memory=0", "--memory-swap=1g"],
    ["--memory=64m", "--memory=128m", "--memory-swap=100m"], ["--memory=64m", "--memory-swap=64m"],
    ["--memory=64m", "--memory-swap=-1"], ["--memory-reservation=128m"], ["--memory-swap=-1"],
    ["--memory=64m", "--memory-swap=0"], ["--memory=64m", "--memory-reservation=64m"],
    ["--memory=128m", "--memory=64m", "--memory-reservation=100m"],
]  # fmt: skip


@pytest.mark.parametrize("args", DOCKER_ARG_SETS, ids=" ".join)
def test_validate_refuses_exactly_the_memory_limits_docker_run_refuses_together(
    engine: str, taospec: Runner, tmp_path: Path, args: list[str]
) -> None:
    # each alone is a size docker reads; together the engine refused them, the record open
    checked = subprocess.run(
        ["docker", "run", "--rm", *args, engine, "true"], capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert checked.returncode in (0, 125), checked.stderr
    path = job(tmp_path, f"docker: {{extra_args: {json.dumps(args)}}}\n")
    done = taospec("validate", path)
    assert (done.returncode == 2) == (checked.returncode == 125), (checked.stderr, done.stderr)
    if checked.returncode == 125:
        (line,) = refused(done, ": docker run refuses it: ")
        assert line.startswith(f"{path}:9:"), line


@pytest.mark.parametrize(
    ("flags", "value", "taken"),
    [
        (CAPS, "BPF", True), (CAPS, "cap_perfmon", True), (CAPS, "CHECKPOINT_RESTORE", True),
        (CAPS, "ALL", True), (CAPS, "CAP_BPFF", False), (CAPS, "SYS-ADMIN", False),
        (CAPS, "", False),
        (SECURITY, "writable-cgroups=true", True), (SECURITY, "writable-cgroups:0", True),
        (SECURITY, "seccomp=builtin", True), (SECURITY, "apparmor=tao-profile", True),
        (SECURITY, "label=level:s0:c100,c200", True), (SECURITY, "writable-cgroups", False),
        (SECURITY, "writable-cgroups=maybe", False), (SECURITY, "Label=disable", False),
    ],
)  # fmt: skip
def test_a_value_a_later_engine_or_another_host_may_take_is_left_to_it(
    flags: tuple[str, ...], value: str, taken: bool
) -> None:
    # engine 20.10 refuses CAP_BPF and CAP_PERFMON, which later engines on later kernels
    # take, and writable-cgroups and seccomp=builtin, which engine 29 takes; a label or an
    # AppArmor profile depends on the host's SELinux and AppArmor: none is refused here,
    # while a name no Linux capability has, a key no engine knows, a switch without a bool
    # and a bare key are
    for flag in flags:
        assert (dockerargs.misread(flag, value) is None) == taken


def test_an_image_name_longer_than_the_engine_allows_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # docker.io/library/ goes before a one-part name, and the engine refuses a name past 255
    # characters: validate passed it and the job ended ERROR at the pull, its record open
    long = "a" * 238
    path = write(tmp_path / "job.yaml", BASE.replace("busybox:1", long + ":1").format(
        root=tmp_path / "results"))  # fmt: skip
    for verb in ("validate", "render", "run"):
        refused(taospec(verb, path), f"{path}:5:8: $.image: ", "docker.io/library/")
    write(tmp_path / "versions.yaml", f"images:\n  long: {long}\n")
    pinned_text = BASE.replace("busybox:1", "{{versions_key: images.long}}")
    pinned = write(tmp_path / "pinned.yaml", pinned_text.format(root=tmp_path / "results"))
    refused(taospec("validate", pinned), f"{pinned}:5:23: $.image.versions_key: ", "255")
    assert list(state_dir.iterdir()) == []
    shorter = write(tmp_path / "job.yaml", BASE.replace("busybox:1", long[1:] + ":1").format(
        root=tmp_path / "results"))  # fmt: skip
    assert taospec("validate", shorter).returncode == 0


IMAGE_TAKERS = [
    # docker run would read a word of these as the image, the job's image as the command
    (["--privileged", "true"], 1), (["x"], 0), (["-t", "x"], 1), (["--", "x"], 0),
    (["-"], 0), (["--init", "--hostname", "box", "host"], 3),
    # or the last option would take the job's image for its value
    (["--hostname"], 0), (["-p"], 0), (["-tw"], 0), (["--workdir=/x", "-e"], 1),
    # while these leave the image where taospec puts it
    (["--hostname", "box"], None), (["-h", "box", "-t"], None), (["--privileged=true"], None),
    (["--network", "none", "--init"], None), (["-thbox"], None), (["-e", "A=1"], None),
    (["--add-host", "a:1.2.3.4", "-w", "/x"], None),
]  # fmt: skip


@pytest.mark.parametrize(("args", "at"), IMAGE_TAKERS)
def test_extra_args_that_would_move_the_image_are_refused_at_the_word(
    engine: str, taospec: Runner, tmp_path: Path, args: list[str], at: int | None
) -> None:
    # --privileged true passed validate and docker ran the image `true` (privileged), with the
    # job's image as its command; a last --hostname took the image for the host name
    created = subprocess.run(
        ["docker", "create", "--pull=never", *args, engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if created.returncode == 0:
        container = created.stdout.strip()
        shown = ["docker", "inspect", "--format", "{{.Config.Image}}", container]
        image = subprocess.run(shown, capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run(["docker", "rm", container], capture_output=True, check=True)
    assert (created.returncode == 0 and image == engine) == (at is None), created.stderr
    path = job(tmp_path, f"docker: {{extra_args: {json.dumps(args)}}}\n")
    done = taospec("validate", path)
    if at is None:
        assert done.returncode == 0, done.stderr
    else:
        refused(done, f"$.docker.extra_args[{at}]: ")
        assert "the job's image" in done.stderr


OPTION_NAMES = [
    # docker run knows none of these, and refuses the run
    (["--priviledged"], "--privileged"), (["--shm_size=1g"], "--shm-size"),
    (["--gpu", "all"], "--gpus"), (["--memmory=1g"], "--memory"), (["-x"], None), (["-tX"], None),
    (["--network-mode=host"], "--network"), (["--zzz"], None),
    # and knows these
    (["--privileged"], ""), (["--net=none"], ""), (["--dns-opt=ndots:1"], ""), (["-P"], ""),
    (["--rm=false"], "taospec keeps"), (["--disable-content-trust"], ""), (["-q"], ""),
    (["--health-start-interval=1s"], ""), (["--cgroupns=private"], ""),
]  # fmt: skip


@pytest.mark.parametrize(("args", "hint"), OPTION_NAMES)
def test_an_option_docker_run_does_not_know_is_refused_at_its_word(
    engine: str, taospec: Runner, tmp_path: Path, args: list[str], hint: str | None
) -> None:
    # a misspelt option passed validate and docker run refused it ("unknown flag") once the
    # record had opened
    created = subprocess.run(
        ["docker", "create", "--pull=never", *args, engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    subprocess.run(["docker", "rm", created.stdout.strip()], capture_output=True, check=False)
    unknown = "unknown flag" in created.stderr or "unknown shorthand flag" in created.stderr
    assert unknown == (hint != "" and hint != "taospec keeps"), created.stderr
    done = taospec("validate", job(tmp_path, f"docker: {{extra_args: {json.dumps(args)}}}\n"))
    if not unknown:
        assert done.returncode == 0 or hint in done.stderr, done.stderr
        assert "knows no such option" not in done.stderr
        return
    refused(done, "$.docker.extra_args[0]: ", "docker run knows no such option")
    assert f"did you mean {hint!r}" in done.stderr if hint else "did you mean" not in done.stderr


VOLUMES = [
    # docker run takes these
    ("--security-opt", "no-new-privileges"), ("--security-opt", "no-new-privileges=true"),
    ("--security-opt", "no-new-privileges:1"), ("--security-opt", "seccomp=unconfined"),
    ("--security-opt", "seccomp:unconfined"), ("--security-opt", "systempaths=unconfined"),
    ("--security-opt", "label=disable"),
    ("-v", "/tmp:/x"), ("-v", "vol-gate:/x:ro"), ("--volume", "/tmp:/x:ro,z"), ("-v", "/x"),
    ("--tmpfs", "/x"), ("--tmpfs", "/x:size=1m"),
    # and refuses these
    ("-v", "/tmp::/x"), ("-v", "/tmp:/x:"), ("-v", ":/x"), ("--volume", "/tmp:/x:ro:z"),
    ("-v", "vol-gate:x"), ("--tmpfs", "x:size=1m"),
]  # fmt: skip


@pytest.mark.parametrize(("flag", "value"), VOLUMES)
def test_a_volume_docker_run_cannot_read_is_refused_at_its_item(
    engine: str, taospec: Runner, tmp_path: Path, flag: str, value: str
) -> None:
    # -v /tmp:/x:ro:z and --tmpfs x passed validate and docker run refused them once the
    # record had opened
    created = subprocess.run(
        ["docker", "create", "--pull=never", f"{flag}={value}", engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if created.returncode == 0:
        subprocess.run(["docker", "rm", "-v", created.stdout.strip()], check=True)
    subprocess.run(["docker", "volume", "rm", "vol-gate"], capture_output=True, check=False)
    for args in ([f"{flag}={value}"], [flag, value]):
        done = taospec("validate", job(tmp_path, f"docker: {{extra_args: {json.dumps(args)}}}\n"))
        assert (done.returncode == 2) == (created.returncode != 0), (created.stderr, done.stderr)
        if created.returncode != 0:
            refused(done, f"$.docker.extra_args[0]: {flag} {value}".rstrip() + ": docker run ")


HOSTS_AND_ENV = [
    # docker run takes these
    ("--security-opt", "no-new-privileges"), ("--security-opt", "no-new-privileges=true"),
    ("--security-opt", "no-new-privileges:1"), ("--security-opt", "seccomp=unconfined"),
    ("--security-opt", "seccomp:unconfined"), ("--security-opt", "systempaths=unconfined"),
    ("--security-opt", "label=disable"),
    ("-e", "A=1"), ("--env", "A="), ("-e", "A"), ("--add-host", "a:1.2.3.4"),
    ("--add-host", "a=1.2.3.4"), ("--add-host", "a:::1"), ("--add-host", "a=[::1]"),
    ("--add-host", "a:host-gateway"),
    # and refuses these
    ("-e", "=x"), ("--env", "=1"), ("--add-host", "foo"), ("--add-host", "foo:1.2.3"),
    ("--add-host", ":1.2.3.4"), ("--add-host", "a:01.2.3.4"), ("--add-host", "a:fe80::1%eth0"),
    ("--add-host", "a:b:1.2.3.4"), ("--add-host", "a=host"),
]  # fmt: skip


@pytest.mark.parametrize(("flag", "value"), HOSTS_AND_ENV)
def test_an_env_or_host_entry_docker_run_cannot_read_is_refused_at_its_item(
    engine: str, taospec: Runner, tmp_path: Path, flag: str, value: str
) -> None:
    # -e =x and --add-host foo passed validate and docker run refused them once the record
    # had opened
    created = subprocess.run(
        ["docker", "create", "--pull=never", flag, value, engine, "true"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if created.returncode == 0:
        subprocess.run(["docker", "rm", created.stdout.strip()], capture_output=True, check=True)
    for args in ([f"{flag}={value}"], [flag, value]):
        done = taospec("validate", job(tmp_path, f"docker: {{extra_args: {json.dumps(args)}}}\n"))
        assert (done.returncode == 2) == (created.returncode != 0), (created.stderr, done.stderr)
        if created.returncode != 0:
            refused(done, f"$.docker.extra_args[0]: {flag} {value}: docker run refuses it: ")
