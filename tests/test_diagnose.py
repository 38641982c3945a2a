"""Known failures become a sentence saying what happened and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taospec.diagnose import INFRA, PROGRAM, classify, diagnose
from tests.conftest import Runner, write

LOGS = Path(__file__).parent / "fakes" / "logs"


@pytest.mark.parametrize(
    ("output", "what", "err_class"),
    [
        (
            'docker: Error response from daemon: could not select device driver "" with '
            "capabilities: [[gpu]].",
            "no GPU runtime on the Docker host",
            INFRA,
        ),
        (
            "Error response from daemon: unauthorized: authentication required",
            "the registry refused the image",
            INFRA,
        ),
        (
            "Error response from daemon: pull access denied for nvcr.io/x, repository does not "
            "exist or may require 'docker login'",
            "the image cannot be found",
            INFRA,
        ),
        (
            "Error response from daemon: manifest unknown: manifest unknown",
            "the image cannot be found",
            INFRA,
        ),
        (
            'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: '
            "lookup registry-1.docker.io on 10.255.255.53:53: no such host",
            "the registry could not be reached",
            INFRA,
        ),
        (
            'Error response from daemon: Get "https://nvcr.io/v2/": dial tcp 10.0.0.7:443: '
            "connect: no route to host",
            "the registry could not be reached",
            INFRA,
        ),
        ("OSError: [Errno 28] No space left on device", "a filesystem is full", INFRA),
        (
            "ERROR: Unexpected bus error encountered in worker. Bus error (core dumped)",
            "/dev/shm is too small",
            PROGRAM,
        ),
        (
            "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.",
            "/dev/shm is too small",
            PROGRAM,
        ),
        (
            "PermissionError: [Errno 13] Permission denied: '/results/train'",
            "permission denied",
            PROGRAM,
        ),
        (
            "KeyError: 'getpwuid(): uid not found: 1000'",
            "the image has no user for the job's UID",
            PROGRAM,
        ),
        (
            'docker: Error response from daemon: Conflict. The container name "/x" is already in '
            'use by container "abc".',
            "a container with the job's name already exists",
            PROGRAM,
        ),
        (
            "Error: No such container: visual_changenet-train-0a1b2c",
            "the container is gone",
            PROGRAM,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "the job ran out of GPU memory",
            PROGRAM,
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=2112, GPU has fallen off the bus.",
            "a GPU fault (Xid 79)",
            INFRA,
        ),
        (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.",
            "no Docker engine answers",
            INFRA,
        ),
        (
            'could not connect to instance "box": \nssh: connect to host box port 22: '
            "Connection refused\nPlease check with: brev ls\n(no output line starting with 'ok' "
            "after 120 attempts)",
            "the job's host did not answer over ssh (a Brev instance, docker.host or login node)",
            INFRA,
        ),
        (
            'instance "box" is in state "STOPPING" — please check with: brev ls',
            "the job's host did not answer over ssh (a Brev instance, docker.host or login node)",
            INFRA,
        ),
        (
            "ssh: connect to host gpu-7 port 22: Connection timed out",
            "the job's host did not answer over ssh within its ConnectTimeout",
            INFRA,
        ),
        (
            "Timeout, server 10.0.0.9 not responding.",
            "the job's host stopped answering over ssh in the middle of a command",
            INFRA,
        ),
        (
            "Connection timed out during banner exchange\nConnection to 10.0.0.9 port 22 timed out",
            "the job's host did not answer over ssh within its ConnectTimeout",
            INFRA,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: "
            'exec: "/no/such/binary": stat /no/such/binary: no such file or directory: unknown',
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: "
            'exec: "./bin/train": stat ./bin/train: no such file or directory: unknown',
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: "
            'exec: "/etc/passwd": permission denied: unknown',
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: "
            'exec: "/etc/passwd/x": stat /etc/passwd/x: not a directory: unknown: Are you trying '
            "to mount a directory onto a file (or vice-versa)?",
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: "
            'exec: "nosuchbinary": executable file not found in $PATH: unknown',
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: OCI runtime create failed: "
            "container_linux.go:380: starting container process caused: exec: "
            '"/opt/x": stat /opt/x: no such file or directory: unknown.',
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: OCI runtime create failed: "
            'container_linux.go:348: starting container process caused "exec: \\"/opt/x\\": '
            'stat /opt/x: no such file or directory": unknown.',
            "the job's command cannot be started",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            "during container init: error running hook #0: error running hook: exit status 1, "
            "stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: mount "
            "error: stat failed: /dev/nvidia3: no such file or directory: unknown",
            "the container runtime failed to start the container",
            INFRA,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            "during container init: error running hook #0: error running hook: exec: "
            '"nvidia-container-runtime-hook": executable file not found in $PATH: unknown',
            "the container runtime failed to start the container",
            INFRA,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            'during container init: error mounting "/data" to rootfs at "/data": '
            "mkdir /var/lib/docker/overlay2/x/merged/data: permission denied: unknown",
            "the container runtime failed to start the container",
            INFRA,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            'during container init: error mounting "/etc/hostname" to rootfs at "/data": '
            "mount /etc/hostname:/data (via /proc/self/fd/6), flags: 0x5000: not a directory: "
            "unknown: Are you trying to mount a directory onto a file (or vice-versa)? Check if "
            "the specified host path exists and is the expected type",
            "a mount puts a file where the image has a folder, or a folder where it has a file",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            'during container init: error mounting "tmpfs" to rootfs at "/x": mount tmpfs:/x '
            "(via /proc/self/fd/6), flags: 0xe, data: size=10GB: invalid argument: unknown",
            "the kernel refused the options of one of the job's mounts",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            "during container init: open /proc/sys/net/ipv4/foo: no such file or directory: "
            "unknown",
            "a --sysctl of docker.extra_args names a setting this kernel does not have, or "
            "gives it a value the kernel refuses",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            "during container init: write /proc/sys/net/core/somaxconn: invalid argument: "
            "unknown",
            "a --sysctl of docker.extra_args names a setting this kernel does not have, or "
            "gives it a value the kernel refuses",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            "during container init: error setting cgroup config for procHooks process: failed "
            'to write "1:3 1048576": write /sys/fs/cgroup/blkio/docker/1e6f1e30/blkio.throttle'
            ".read_bps_device: no such device: unknown",
            "the Docker host's kernel cannot apply a resource setting of docker.extra_args",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: unable to "
            'apply cgroup configuration: failed to write "1000": write /sys/fs/cgroup/cpu/'
            "docker/42ccebb5/cpu.rt_runtime_us: invalid argument: unknown",
            "the Docker host's kernel cannot apply a resource setting of docker.extra_args",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: Requested CPUs are not available - requested "
            "99, available: 0-1",
            "docker.extra_args asks for CPUs or memory nodes the Docker host does not have",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: Range of CPUs is from 0.01 to 2.00, as there "
            "are only 2 CPUs available",
            "docker.extra_args asks for CPUs or memory nodes the Docker host does not have",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: network nosuchnet not found",
            "docker.extra_args names a runtime or a network the Docker host does not have",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: Unknown runtime specified nosuch",
            "docker.extra_args names a runtime or a network the Docker host does not have",
            PROGRAM,
        ),
        (
            "docker: Error response from daemon: failed to create shim task: OCI runtime "
            "create failed: runc create failed: unable to start container process: error "
            "during container init: error setting rlimits for ready process: error setting "
            "rlimit type 7: operation not permitted: unknown",
            "a --ulimit of docker.extra_args asks more than the Docker host allows",
            PROGRAM,
        ),
        (
            "docker: open /nonexistent: no such file or directory\n\nRun 'docker run --help' "
            "for more information",
            "a file docker run reads itself (an --env-file) is missing",
            PROGRAM,
        ),
        (
            "docker: opening seccomp profile (/x.json) failed: open /x.json: no such file or "
            "directory\n\nRun 'docker run --help' for more information",
            "the seccomp profile docker run reads itself is missing or not JSON",
            PROGRAM,
        ),
        (
            "docker: compacting json for seccomp profile (/x.json) failed: invalid character "
            "'n' looking for beginning of object key string",
            "the seccomp profile docker run reads itself is missing or not JSON",
            PROGRAM,
        ),
        (
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
            "(connect failure)",
            "the Slurm controller (slurmctld) does not answer",
            INFRA,
        ),
        (
            "sbatch: error: Memory specification can not be satisfied\nsbatch: error: Batch "
            "job submission failed: Requested node configuration is not available",
            "no node of the cluster has what the job asks for (Slurm refused it)",
            PROGRAM,
        ),
        (
            "sbatch: error: Invalid generic resource (gres) specification",
            "the cluster has no such generic resource (Slurm refused the job)",
            PROGRAM,
        ),
        *(
            (
                f"sbatch: error: Batch job submission failed: {said}",
                "the cluster knows no such partition, account, QOS or feature (Slurm refused "
                "the job)",
                PROGRAM,
            )
            for said in (
                "Invalid partition name specified",
                "Invalid qos specification",
                "Invalid feature specification",
                "Invalid account or account/partition combination specified",
            )
        ),
        (
            'ssh connection failed and could not look up instance "bxo": exit status 255',
            "the Brev instance does not exist",
            PROGRAM,
        ),
    ],
)
def test_known_failures_are_recognised(output: str, what: str, err_class: str) -> None:
    found = diagnose(output)
    assert found is not None
    assert (found.sentence, found.err_class) == (what, err_class)
    assert found.advice


def test_ordinary_output_is_not_a_diagnosis() -> None:
    assert diagnose("epoch 3/10 loss=0.12\nall good") is None


def test_a_failed_jobs_log_tail_is_diagnosed_and_classified(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    spec = write(
        tmp_path / "job.yaml",
        (
            "version: 1\nnetwork_arch: dino\naction: train\nimage: busybox:1\n"
            f"results_root: {tmp_path / 'results'}\n"
            'command: [sh, -c, \'echo "DataLoader worker (pid 77) is killed by signal: Bus error"; '
            "exit 1']\n"
        ),
    )
    done = taospec("run", spec)
    assert done.returncode == 1
    assert "/dev/shm is too small: raise docker.shm_size in the spec" in done.stderr
    job_id = done.stdout.split()[0]
    record = json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())
    assert record["err_class"] == PROGRAM


def test_an_exception_line_is_redacted_before_it_is_clipped(
    taospec: Runner, tmp_path: Path, state_dir: Path
) -> None:
    # the line was cut to 200 characters and redacted after: the passed value crossed the
    # cut, so 29 of its 30 characters went to the record, the journal and every output
    value = "Zq8sup3rs3cretVALUE0123456789X"
    command = (
        "sh -c 'echo Traceback \\(most recent call last\\):; "
        'printf "ValueError: %0155d %s is wrong\\n" 0 "$PLAIN_VAR"; exit 1\''
    )
    spec = write(
        tmp_path / "job.yaml",
        "version: 1\nnetwork_arch: hello\naction: greet\nplatform: local\nimage: busybox:1\n"
        f"results_root: {tmp_path / 'results'}\nenv: {{pass: [PLAIN_VAR]}}\n"
        f"command: {json.dumps(command)}\n",
    )
    passed = {"PLAIN_VAR": value}
    done = taospec("run", spec, env=passed)
    assert done.returncode == 1, done.stderr
    job_id = done.stdout.split()[0]
    record = json.loads((state_dir / "jobs" / f"{job_id}.json").read_text())
    raised = f"the program raised ValueError: {'0' * 155} <redacted> is wrong: fix what"
    assert raised in record["transitions"][-1]["message"]
    said = [done.stdout, done.stderr]
    for verb in (("status", job_id), ("status", job_id, "--json"), ("show", job_id)):
        shown = taospec(*verb, env=passed)
        assert shown.returncode in (0, 1), shown.stderr
        said += [shown.stdout, shown.stderr]
    stored = [path.read_text() for path in state_dir.rglob("*") if path.is_file()]
    for text in said + stored:
        assert "Zq8sup" not in text


TORCHRUN_TAIL = (LOGS / "torchrun-valueerror.log").read_text()

DEVICE_ASSERT_TAIL = (LOGS / "device-assert.log").read_text()

MISSING_FILE_TAIL = (LOGS / "missing-file.log").read_text()

NCCL_TIMEOUT_TAIL = (LOGS / "nccl-timeout.log").read_text()

ECC_TAIL = (LOGS / "ecc.log").read_text()

PULL_TAIL = (
    "Unable to find image 'nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt' locally\n"
    'docker: Error response from daemon: Get "https://nvcr.io/v2/": net/http: TLS handshake '
    "timeout.\n"
)


@pytest.mark.parametrize(
    ("exit_code", "native", "tail", "err_class", "sentence"),
    [
        (1, "docker: exited with code 1", TORCHRUN_TAIL, PROGRAM,
         "the program raised ValueError: num_classes (2) does not match the dataset's label "
         "values (0..4)"),
        (1, "docker: exited with code 1", DEVICE_ASSERT_TAIL, PROGRAM,
         "a CUDA kernel assertion failed (a device-side assert)"),
        (1, "process exited with code 1", MISSING_FILE_TAIL, PROGRAM,
         "a file the job needs is missing"),
        (134, "docker: exited with code 134", NCCL_TIMEOUT_TAIL, PROGRAM, "the job timed out"),
        (1, "docker: exited with code 1", ECC_TAIL, INFRA, "a GPU fault"),
        (125, "", PULL_TAIL, INFRA, "pulling the image failed"),
        (137, "docker: exited with code 137 (killed by the kernel's out-of-memory killer)",
         "Epoch 1: 3%|", PROGRAM,
         "the job ran out of host memory (the kernel's out-of-memory killer stopped it)"),
        (137, "docker: exited with code 137", "Epoch 1: 3%|", PROGRAM,
         "the job was killed (SIGKILL)"),
        (143, "docker: exited with code 143", "Epoch 9: 50%|", INFRA,
         "the job was stopped from outside (SIGTERM)"),
        (139, "docker: exited with code 139", "", PROGRAM, "the job crashed (SIGSEGV)"),
        (135, "docker: exited with code 135", "", PROGRAM, "/dev/shm is too small"),
        (0, "slurm: NODE_FAIL, exit code 0: a node of the job failed; submitting again may help",
         "", INFRA, "a node of the job failed"),
        (0, "slurm: BOOT_FAIL", "", INFRA, "a node of the job failed to boot"),
        (None, "slurm: PREEMPTED", "", INFRA, "the scheduler preempted the job for another one"),
        (None, "slurm: TIMEOUT, killed by signal 15: the job reached its time limit (slurm.time)",
         "slurmstepd: error: *** JOB 77 ON gpu-3 CANCELLED AT 2025-06-01T10:00:00 DUE TO TIME "
         "LIMIT ***", PROGRAM, "the job reached its time limit"),
        (1, "slurm: FAILED, exit code 1",
         "slurmstepd: error: *** JOB 78 ON gpu-4 CANCELLED AT 2025-06-01T10:00:00 DUE TO NODE "
         "FAILURE ***", INFRA, "a node of the job failed"),
        (None, "Evicted: The node was low on resource: ephemeral-storage.", "", INFRA,
         "the job was evicted from its node"),
        (1, "docker: exited with code 1", "Segmentation fault in worker; NVRM: Xid "
         "(PCI:0000:3b:00): 13, Graphics Exception", PROGRAM,
         "the job's GPU code faulted (Xid 13, an application error)"),
        (127, "process exited with code 127", "sh: 1: visual_changenet: not found", PROGRAM,
         "the job's command cannot be started (exit 127)"),
        (126, "", "sh: Argument list too long", PROGRAM,
         "the kernel takes no argument or environment this long (exit 126, E2BIG)"),
        (126, "process exited with code 126", "sh: /opt/run.sh: Permission denied", PROGRAM,
         "permission denied"),
        (3, "process exited with code 3", "epoch 3 done\nbye", PROGRAM,
         "the job failed (exit code 3) without an error taospec recognises"),
        (None, "", "", PROGRAM, "the job failed (no exit code) without an error taospec "
         "recognises"),
    ],
)  # fmt: skip
def test_every_failure_gets_a_class_and_a_sentence(
    exit_code: int | None, native: str, tail: str, err_class: str, sentence: str
) -> None:
    found = classify(exit_code, native, tail)
    assert (found.err_class, found.sentence) == (err_class, sentence)
    assert found.advice
    assert str(found) == f"{found.sentence}: {found.advice}"


# what this machine's OpenSSH says when the host took the connection and never spoke
SSH_TIMED_OUT = (
    "Connection timed out during banner exchange\nConnection to 127.0.0.1 port 40017 timed out\n"
)


@pytest.mark.parametrize(
    ("command", "within"),
    [
        ("ssh -o BatchMode=yes -o ConnectTimeout=7 -- login 'sbatch x'", "within 7 s"),
        ("ssh -o BatchMode=yes -- login 'sbatch x'", "within its ConnectTimeout"),
    ],
)
def test_a_step_whose_ssh_timed_out_says_how_long_it_waited(command: str, within: str) -> None:
    """A submit whose ssh to its host timed out got "the job failed (exit code 255) without
    an error taospec recognises"; the wait is taospec's ConnectTimeout when the command
    carries it, else the one ssh's configuration sets."""
    found = classify(255, "", SSH_TIMED_OUT, command=command)
    assert found.err_class == INFRA
    assert found.sentence == f"the job's host did not answer over ssh {within}"
    assert "check that it is up" in found.advice
    assert "ConnectTimeout in ~/.ssh/config" in found.advice


def test_the_backends_word_comes_before_the_log() -> None:
    """A node failure stays infrastructure even when the job's own log shows a traceback."""
    found = classify(None, "slurm: NODE_FAIL", TORCHRUN_TAIL)
    assert found.err_class == INFRA


def test_a_long_exception_line_is_clipped() -> None:
    tail = "Traceback (most recent call last):\nKeyError: '" + "x" * 500 + "'\n"
    found = classify(1, "", tail)
    assert found.sentence.startswith("the program raised KeyError: 'xxx")
    assert found.sentence.endswith("...")
    assert len(found.sentence) < 260
