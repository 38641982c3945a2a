"""The paths a job file names: refused with their place, exit 2, never a traceback, where no
file system holds them, where this machine lacks them, where docker cannot mount them, and
where this user may not reach or read them.

A name longer than 255 bytes made ``Path.exists()`` raise (ENAMETOOLONG) in the checks of
this machine, and ``validate --here``, ``run -n`` and ``run`` ended in an internal error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from taospec.ledger import Ledger
from tests.conftest import TEST_IMAGE, Runner, taospec_command, write
from tests.test_docker_jobs import cleanup  # noqa: F401 - a fixture
from tests.test_gate import refused

LONG = "a" * 256  # one byte past the longest name ext4, xfs, btrfs and tmpfs take
LONGEST = "a" * 255


def docker_job(
    tmp_path: Path, results_root: Path, rest: str = "", command: str = "echo hi"
) -> Path:
    return write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: docker\n"
        f'image: {TEST_IMAGE}\nuser: "1000:1000"\nresults_root: {results_root}\n'
        f"command: {command}\n{rest}",
    )


@pytest.mark.parametrize(
    ("field", "rest", "where"),
    [
        ("results_root", "", ":7:15: $.results_root: aaaa"),
        ("source", "mounts: [{{source: {tmp}/{name}, target: /data}}]\n", ":9:19: $.mounts[0]"),
        ("target", "mounts: [{{source: {tmp}, target: /data/{name}}}]\n", ":9:"),
    ],
)
@pytest.mark.parametrize("verb", [["validate"], ["validate", "--here"], ["run", "-n"], ["run"]])
def test_a_name_longer_than_linux_takes_is_refused_at_its_place(
    taospec: Runner, tmp_path: Path, state_dir: Path, field: str, rest: str, where: str,
    verb: list[str],
) -> None:  # fmt: skip
    root = tmp_path / (LONG if field == "results_root" else "results")
    spec = docker_job(tmp_path, root, rest.format(tmp=tmp_path, name=LONG))
    (line,) = refused(taospec(*verb, spec), where, "is a name of 256 bytes", "longer than 255")
    assert line.startswith(str(spec)), line
    assert ("mounts[0].target" in line) == (field == "target")
    assert Ledger(state_dir).list() == []


def test_a_name_of_255_bytes_is_a_name(taospec: Runner, tmp_path: Path) -> None:
    (tmp_path / LONGEST).mkdir()
    spec = docker_job(tmp_path, tmp_path / LONGEST / "results")
    checked = taospec("validate", "--here", spec)
    assert checked.returncode == 0, checked.stderr


def test_a_path_longer_than_linux_takes_is_refused(taospec: Runner, tmp_path: Path) -> None:
    root = "/" + "/".join(["b" * 200] * 21)  # every name fits; the whole is 4,221 bytes
    spec = docker_job(tmp_path, Path(root))
    refused(taospec("validate", spec), ":7:15: $.results_root: this path is 4221 bytes")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("[--env-file, {path}]", "$.docker.extra_args[0]: --env-file {path} cannot be looked up"),
        (
            '[--security-opt, "seccomp={path}"]',
            "$.docker.extra_args[0]: --security-opt seccomp={path}: the seccomp profile "
            "cannot be looked up",
        ),
    ],
)
@pytest.mark.parametrize("verb", [["validate", "--here"], ["run"]])
def test_a_file_docker_run_reads_named_past_the_limit_is_refused(
    taospec: Runner, tmp_path: Path, state_dir: Path, args: str, said: str, verb: list[str]
) -> None:
    path = tmp_path / LONG
    spec = docker_job(
        tmp_path, tmp_path / "results", f"docker: {{extra_args: {args.format(path=path)}}}\n"
    )
    refused(taospec(*verb, spec), said.format(path=path), "File name too long")
    assert Ledger(state_dir).list() == []


@pytest.mark.parametrize("verb", [["validate"], ["render"], ["run"], ["run", "-n"]])
def test_a_job_file_named_past_the_limit_cannot_be_read(
    taospec: Runner, tmp_path: Path, verb: list[str]
) -> None:
    named = tmp_path / f"{LONG}.yaml"
    refused(taospec(*verb, named), f"{named}:1:1: $: cannot be read: File name too long")


@pytest.mark.parametrize("verb", [["validate", "--here"], ["run"]])
def test_a_results_root_the_kernel_cannot_look_up_is_refused_with_its_reason(
    taospec: Runner, tmp_path: Path, state_dir: Path, verb: list[str]
) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    spec = docker_job(tmp_path, loop / "results")
    refused(
        taospec(*verb, spec),
        f":7:15: $.results_root: {loop}/results cannot be looked up on this machine (Too many "
        "levels of symbolic links)",
    )
    assert Ledger(state_dir).list() == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # dockerd made the missing folder, root-owned and empty, and the job saw no data
        ("[-v, '{path}:/data:ro']", "the Docker engine would create it"),
        ("[--volume={path}:/data]", "the Docker engine would create it"),
        # docker run refused it once the record was open
        ("[--mount, 'type=bind,src={path},dst=/data']", "docker run refuses a bind mount"),
        # "error gathering device information", read as a command that cannot start
        ("[--device, '{path}:/dev/xvdc:rwm']", "docker run refuses a device"),
    ],
)
def test_a_bind_mount_or_device_of_extra_args_missing_here_is_refused_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path, args: str, said: str
) -> None:
    missing = tmp_path / "no-such-dataset"
    spec = docker_job(
        tmp_path, tmp_path / "results", f"docker: {{extra_args: {args.format(path=missing)}}}\n"
    )
    assert taospec("validate", spec).returncode == 0
    for verb in (["validate", "--here"], ["run"]):
        refused(
            taospec(*verb, spec),
            f"{spec}:9:",
            "$.docker.extra_args[0]: ",
            f"{missing} does not exist on this machine",
            said,
        )
    assert not missing.exists()
    assert Ledger(state_dir).list() == []
    missing.mkdir()
    here = taospec("validate", "--here", spec)
    assert here.returncode == 0, here.stderr


def test_named_volumes_tmpfs_and_cdi_devices_of_extra_args_are_no_paths_here(
    taospec: Runner, tmp_path: Path
) -> None:
    args = (
        "[-v, 'cache:/cache', --mount, 'type=volume,src=data,dst=/data', --tmpfs, /scratch, "
        "--device, nvidia.com/gpu=all, --device, /dev/null]"
    )
    spec = docker_job(tmp_path, tmp_path / "results", f"docker: {{extra_args: {args}}}\n")
    here = taospec("validate", "--here", spec)
    assert here.returncode == 0, here.stderr


@pytest.mark.parametrize(
    ("mounts", "args", "said"),
    [
        ("[{source: {src}, target: /data}]", "[-v, '{src}/sub:/data']", "of mounts[0]"),
        ("[{source: {src}, target: /data}]", "[--tmpfs, /data/]", "of mounts[0]"),
        ("[]", "[-v, '{src}:/data', --mount, 'type=bind,src={src}/sub,dst=//data']", "[0]"),
        ("[]", "['--volume={src}:/data:ro', -v, '{src}/sub:/data/x/..']", "[0]"),
    ],
)
def test_a_second_mount_at_one_target_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, mounts: str, args: str, said: str
) -> None:
    # docker run: "Error response from daemon: Duplicate mount point: /data", once the
    # record was open
    (tmp_path / "src" / "sub").mkdir(parents=True)
    rest = f"mounts: {mounts}\ndocker: {{extra_args: {args}}}\n".replace(
        "{src}", str(tmp_path / "src")
    )
    spec = docker_job(tmp_path, tmp_path / "results", rest)
    (line,) = refused(taospec("validate", spec), "$.docker.extra_args[", "/data is already the")
    assert line.split(": ", 2)[1] != "$.docker.extra_args[0]" or said != "[0]", line
    assert said in line, line


@pytest.mark.engine
@pytest.mark.usefixtures("cleanup")
def test_the_same_volume_given_twice_is_mounted_once_and_runs(
    engine: str, taospec: Runner, open_tmp: Path, state_dir: Path
) -> None:
    source = open_tmp / "src"
    source.mkdir(mode=0o755)
    (source / "seen").write_text("here\n")
    rest = (
        f"mounts: [{{source: {source}, target: /data}}]\n"
        f"docker: {{extra_args: [-v, '{source}:/data', -v, '{source}:/data']}}\n"
    )
    spec = docker_job(open_tmp, open_tmp / "results", rest, command="cat /data/seen")
    ran = taospec("run", spec)
    assert ran.returncode == 0, ran.stderr
    assert taospec("logs", ran.stdout.split()[0]).stdout == "here\n"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"A=1\n=hidden-value\n", "line 2 has no variable name"),
        (b"A B=hidden-value\n", "the name on line 1 holds a blank"),
        (b"\xff=hidden-value\n", "line 1 is not UTF-8"),
        (b"A=1\nB=hidden\xe2\x80\xa8C =value\n", None),  # U+2028 ends no line for docker
        (b"\xef\xbb\xbf# c\n\n  A=1\r\nB\n", None),
    ],
)
def test_an_env_file_docker_run_refuses_is_refused_without_its_values(
    taospec: Runner, tmp_path: Path, state_dir: Path, text: bytes, said: str | None
) -> None:
    # docker run refused it once the record was open, quoting the line, value and all
    env_file = tmp_path / "job.env"
    env_file.write_bytes(text)
    spec = docker_job(
        tmp_path, tmp_path / "results", f"docker: {{extra_args: [--env-file, {env_file}]}}\n"
    )
    here = taospec("validate", "--here", spec)
    if said is None:
        assert here.returncode == 0, here.stderr
        return
    refused(here, f"$.docker.extra_args[0]: --env-file {env_file}: docker run refuses it: {said}")
    assert "hidden" not in here.stderr
    ran = taospec("run", spec)
    refused(ran, said)
    assert "hidden" not in ran.stderr
    assert Ledger(state_dir).list() == []


def test_a_cid_file_is_refused_at_its_item(taospec: Runner, tmp_path: Path) -> None:
    # it ran once, then every later run of the job failed: "container ID file found"
    spec = docker_job(
        tmp_path, tmp_path / "results", f"docker: {{extra_args: [--cidfile, {tmp_path}/cid]}}\n"
    )
    refused(taospec("validate", spec), ":9:", "$.docker.extra_args[0]: --cidfile: docker run")


def test_a_throttled_device_missing_here_is_refused_before_any_record(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    missing = "/dev/taospec-no-such-device"
    assert not Path(missing).exists()
    args = f"[--device-read-bps, '{missing}:1mb']"
    spec = docker_job(tmp_path, tmp_path / "results", f"docker: {{extra_args: {args}}}\n")
    assert taospec("validate", spec).returncode == 0
    said = f"{missing} does not exist on this machine, and docker run refuses a device"
    for verb in (["validate", "--here"], ["run"]):
        refused(taospec(*verb, spec), f"{spec}:9:", "$.docker.extra_args[0]: ", said)
    assert Ledger(state_dir).list() == []


def _a_disk() -> str:
    """A whole disk of this machine, by its node under /dev."""
    nodes = (Path("/dev", disk.name) for disk in sorted(Path("/sys/block").iterdir()))
    return next(str(node) for node in nodes if node.is_block_device())


@pytest.mark.parametrize(
    ("flag", "rate"), [("--device-read-bps", "1mb"), ("--device-write-iops", "10")]
)
def test_only_a_block_device_is_throttled(
    engine: str, taospec: Runner, tmp_path: Path, state_dir: Path, flag: str, rate: str
) -> None:
    # /dev/null passed, opened the record, and the container did not start ("no such device")
    for device, taken in ((_a_disk(), True), ("/dev/null", False)):
        value = f"{device}:{rate}"
        asked = subprocess.run(
            ["docker", "run", "--rm", f"{flag}={value}", engine, "true"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert (asked.returncode == 0) == taken, asked.stderr
        spec = docker_job(tmp_path, tmp_path, f"docker: {{extra_args: [{flag}, '{value}']}}\n")
        here = taospec("validate", "--here", spec)
        if taken:
            assert here.returncode == 0, here.stderr
            continue
        said = f"$.docker.extra_args[0]: {flag} {value}: /dev/null is no block device"
        refused(here, f"{spec}:9:", said)
        refused(taospec("run", spec), said)


HELD_TO_PERMISSIONS = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search",
                       "--inh-caps", "-dac_override,-dac_read_search", "--")  # fmt: skip
"""Runs a command as root without the capabilities that let root past a folder's mode: it
meets EACCES where any other user would (the tests run as root, and this machine's Python is
private to root, so they cannot run taospec as another user)."""


def held(taospec: Runner, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``taospec *args`` run as root held to permissions (:data:`HELD_TO_PERMISSIONS`)."""
    return subprocess.run(
        [*HELD_TO_PERMISSIONS, *taospec_command(), *map(str, args)], capture_output=True,
        text=True, env=taospec.env, cwd=taospec.cwd, timeout=120, stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip


@pytest.fixture
def closed(tmp_path: Path) -> Path:
    """A folder of user 1000's, mode 700, with a folder ``data`` in it: root held to
    permissions may not enter it, as ``ls`` finds."""
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip(reason="needs root and setpriv, to be held to a folder's mode")
    folder = tmp_path / "closed"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "seen").write_text("here\n")
    os.chown(folder, 1000, 1000)
    folder.chmod(0o700)
    looked = subprocess.run([*HELD_TO_PERMISSIONS, "ls", folder], capture_output=True,
                            text=True, check=False)  # fmt: skip
    assert looked.returncode != 0, looked
    assert "Permission denied" in looked.stderr, looked
    return folder


@pytest.mark.parametrize("verb", [["validate", "--here"], ["run"]])
def test_a_results_root_in_a_folder_this_user_may_not_enter_is_refused_naming_it(
    taospec: Runner, tmp_path: Path, state_dir: Path, closed: Path, verb: list[str]
) -> None:
    spec = docker_job(tmp_path, closed / "results")
    (line,) = refused(held(taospec, *verb, spec))
    assert line == (
        f"{spec}:7:15: $.results_root: {closed}/results cannot be looked up on this machine "
        f"(this user may not enter {closed}); each job's results go in a folder made under "
        "results_root: let this user enter that folder, or choose a results_root it can reach"
    )
    assert Ledger(state_dir).list() == []


@pytest.mark.parametrize("verb", [["validate", "--here"], ["run"]])
def test_a_mount_source_in_a_folder_this_user_may_not_enter_is_refused_naming_it(
    taospec: Runner, tmp_path: Path, state_dir: Path, closed: Path, verb: list[str]
) -> None:
    # the source is there, and dockerd could mount it; taospec cannot tell that it is
    rest = f"mounts: [{{source: {closed}/data, target: /data}}]\n"
    spec = docker_job(tmp_path, tmp_path / "results", rest)
    (line,) = refused(held(taospec, *verb, spec))
    assert line == (
        f"{spec}:9:19: $.mounts[0].source: {closed}/data cannot be looked up on this machine "
        f"(this user may not enter {closed}); let this user enter that folder, or fix the path"
    )
    assert Ledger(state_dir).list() == []


@pytest.mark.parametrize("verb", [["validate", "--here"], ["run", "-n"], ["run"]])
@pytest.mark.parametrize(
    ("named", "said"),
    [
        # Path.is_file() raised PermissionError: an internal error
        ("{closed}/data/seen", "{closed}/data/seen cannot be looked up on this machine (this "
         "user may not enter {closed})"),
        # the walk passed over the folder it could not list, and the fingerprint left it out
        ("{tmp}/input", "{tmp}/input/closed is a folder this user may not read"),
        # the fingerprint's open() raised PermissionError: an internal error
        ("{tmp}/unread", "{tmp}/unread is a file this user may not read"),
        ("{tmp}/held", "{tmp}/held/unread is a file this user may not read"),
    ],
    ids=["in-a-closed-folder", "holding-a-closed-folder", "unreadable", "holding-one"],
)  # fmt: skip
def test_an_input_this_user_may_not_reach_or_read_is_refused_at_its_line(
    taospec: Runner, tmp_path: Path, state_dir: Path, closed: Path, verb: list[str],
    named: str, said: str,
) -> None:  # fmt: skip
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "closed").symlink_to(closed)
    (tmp_path / "held").mkdir()
    for unread in (tmp_path / "unread", tmp_path / "held" / "unread"):
        unread.write_text("secret\n")
        os.chown(unread, 1000, 1000)
        unread.chmod(0o600)
    path = named.format(closed=closed, tmp=tmp_path)
    spec = docker_job(tmp_path, tmp_path / "results", f"inputs: [{path}]\n")
    said = said.format(closed=closed, tmp=tmp_path)
    refused(held(taospec, *verb, spec), f"{spec}:9:10: $.inputs[0]: ", said)
    assert Ledger(state_dir).list() == []


JOB = "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\nimage: busybox:1\n"


@pytest.mark.parametrize(
    ("name", "shown"),
    [("a\nb.yaml", "$'a\\nb.yaml'"), ("it's\t\x1b[31m.yaml", "$'it\\'s\\t\\x1b[31m.yaml'")],
)
def test_a_job_file_named_with_a_control_character_is_named_on_one_line(
    taospec: Runner, tmp_path: Path, state_dir: Path, name: str, shown: str
) -> None:
    # validate printed "a", then "b.yaml: ok", on a line of its own
    ok = write(tmp_path / name, f"{JOB}results_root: {tmp_path}/results\ncommand: 'true'\n")
    checked = taospec("validate", ok.name)
    assert (checked.returncode, checked.stdout) == (0, f"{shown}: ok\n"), checked.stderr
    said = subprocess.run(["bash", "-c", f"printf %s {shown}"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert said.stdout == name  # a shell reads the name back from what was shown
    ok.write_text(ok.read_text() + "bogus: 1\n")
    for verb in (["validate"], ["render"], ["run", "-n"], ["run"]):
        (line,) = refused(taospec(*verb, ok.name), f"{shown}:8:1: $.bogus: unknown key 'bogus'")
        assert line.startswith(f"{shown}:8:1: "), line
    assert Ledger(state_dir).list() == []


def test_a_job_file_named_with_a_newline_runs_as_a_target_named_on_one_line(
    taospec: Runner, tmp_path: Path
) -> None:
    # its target was the file's stem as it is: run printed "a", then "b: starting"
    write(tmp_path / "a\nb.yaml", f"{JOB}results_root: {tmp_path}/results\ncommand: 'true'\n")
    done = taospec("run", "a\nb.yaml")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "$'a\\nb': starting", lines
    assert re.fullmatch(r"\$'a\\nb': COMPLETE in \d+s  results .+", lines[-1]), lines
    again = taospec("run", "-n", "a\nb.yaml")
    assert again.stdout.startswith("skip  $'a\\nb'  up to date (job "), again.stdout


def test_a_message_of_a_whole_job_file_named_with_a_newline_is_one_line(
    taospec: Runner, tmp_path: Path
) -> None:
    defaults = "network_arch: hello, platform: local, image: busybox:1, command: 'true'"
    pipeline = write(
        tmp_path / "p\nq.yaml",
        f"version: 1\ndefaults: {{{defaults}, results_root: {tmp_path}/results}}\n"
        "jobs:\n  a: {action: x}\n  b: {action: y}\n",
    )
    done = taospec("render", "--format", "sh", pipeline.name)
    assert done.returncode == 2, done.stderr
    said = "taospec: $'p\\nq.yaml': --format sh writes one job's script"
    assert done.stderr.startswith(said), done.stderr


def test_a_retry_whose_results_root_this_user_may_not_enter_says_what_mends_it(
    taospec: Runner, tmp_path: Path, state_dir: Path, closed: Path
) -> None:
    # it said "move what is there", which mends nothing
    spec = write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nimage: none\n"
        f"results_root: {closed}/results\ncommand: 'true'\n",
    )
    ran = taospec("run", spec)  # root not held to permissions enters it
    assert ran.returncode == 0, ran.stderr
    job_id = ran.stdout.split()[0]
    retried = held(taospec, "retry", job_id)
    assert retried.returncode == 2, retried.stderr
    assert retried.stderr == (
        f"taospec: {job_id}: {closed}/results cannot be looked up on this machine (this user "
        f"may not enter {closed}); each job's results go in a folder made under results_root, "
        "and a retry makes its own there: let this user enter that folder, then retry\n"
    )
    assert len(Ledger(state_dir).list()) == 1
