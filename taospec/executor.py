"""Submit a plan: record first, then run its steps exactly as rendered.

The plan is the only input. :func:`submit` opens the job record (minting the
id and binding the results directory), substitutes the id into the reviewed
plan, runs each step in order, and marks the record RUNNING with the
backend's handle. Any failure before that marks the record ERROR with what
went wrong and what to do.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from taospec import platforms, proc
from taospec.diagnose import diagnose
from taospec.errors import CommandFailed, InvalidInput, JobFailed
from taospec.job import Job
from taospec.ledger import Ledger, Record
from taospec.plan import FAILED, Plan, Step, plan_from_json
from taospec.states import CANCELED, ERROR, RUNNING

Progress = Callable[[str], None]
RETRY_INTERVAL = float(os.environ.get("TAOSPEC_RETRY_INTERVAL", "5"))
"""Seconds between attempts of a step that waits for a line (e.g. an instance's probe)."""


def secret_values(names: tuple[str, ...], environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the passed variables, which must never be written anywhere."""
    env = os.environ if environ is None else environ
    return [env[name] for name in names if env.get(name)]


def check_environment(job: Job, environ: Mapping[str, str]) -> None:
    """Every name the job passes must be set, or the job would start with an empty value.

    Brev reads the passed variables on the instance, where its plan checks them.
    """
    if job.platform == "brev":
        return
    missing = [name for name in job.env_pass if name not in environ]
    if missing:
        names = ", ".join(missing)
        raise InvalidInput(
            f"{job.file}: env.pass names {names}, but this environment does not set "
            f"{'it' if len(missing) == 1 else 'them'}; export {names} before submitting "
            "(the value is passed by name and never written down)"
        )


def check_gpus(plan: Plan, ledger: Ledger) -> None:
    """Refuse GPU ids that a RUNNING job on the same docker host already holds."""
    wanted = plan.backend_value("gpus")
    if not wanted:
        return
    host = _gpu_host(dict(plan.backend))
    for record in ledger.list(state=RUNNING):
        side = ledger.sidecar(record.id)
        held = str(side.get("gpus") or "")
        if not held or _gpu_host(side) != host:
            continue
        if _overlap(wanted, held):
            raise InvalidInput(
                f"{plan.file}: GPUs {wanted} overlap GPUs {held} of running job {record.id} on "
                f"{host or 'the local engine'}; pick free ids, wait for it, or pass "
                "--allow-shared-gpus"
            )


def _gpu_host(facts: Mapping[str, object]) -> str:
    """The machine whose GPUs a job holds: its docker host, its brev instance, or ''."""
    if facts.get("instance"):
        return f"brev instance {facts['instance']}"
    return str(facts.get("docker_host") or "")


def _overlap(a: str, b: str) -> bool:
    if "all" in (a, b):
        return True
    return bool(set(a.split(",")) & set(b.split(",")))


@dataclass(frozen=True, slots=True)
class Submission:
    """A submitted job: its record and the plan that ran, with the real id."""

    record: Record
    plan: Plan


def submit(
    plan: Plan,
    ledger: Ledger,
    *,
    environ: Mapping[str, str] | None = None,
    sidecar: Mapping[str, object] | None = None,
    progress: Progress = lambda _: None,
) -> Submission:
    """Open the record, run the plan's steps, mark RUNNING. Raises JobFailed on failure."""
    env = dict(os.environ if environ is None else environ)
    results_root = plan.record.results_dir.rsplit("/", 1)[0]
    fields = plan.record
    record = ledger.open(
        platform=fields.platform,
        image=fields.image,
        network_arch=fields.network_arch,
        action=fields.action,
        storage_tier=fields.storage_tier,
        results_root=results_root,
        upload_excludes=fields.upload_excludes,
        sidecar={**(sidecar or {}), **dict(plan.backend), "plan_digest": plan.digest()},
        sidecar_for=lambda job_id: {"plan": plan.with_job_id(job_id).to_json()},
        message=f"opened by taospec for {plan.file} (target {plan.target})",
    )
    real = plan.with_job_id(record.id)
    progress(f"{record.id}: opened record, results in {record.results_dir}")
    try:
        ref = _run_steps(real, record, ledger, env, progress)
    except CommandFailed as failure:
        _mark_failed(ledger, record, failure)
        raise JobFailed(f"{record.id}: {failure}") from None
    except KeyboardInterrupt:
        _interrupted(real, ledger, record)
        raise
    marked = ledger.mark(record.id, RUNNING, message="launched", backend_ref=ref)
    progress(f"{record.id}: RUNNING ({ref})")
    return Submission(marked, real)


def _run_steps(
    plan: Plan, record: Record, ledger: Ledger, env: dict[str, str], progress: Progress
) -> str:
    """Run the plan's steps; the last one launches the job through its platform."""
    *preparation, launch = plan.steps
    for step in preparation:
        if _not_needed(step):
            progress(f"{record.id}: {step.name}: not needed")
            continue
        progress(f"{record.id}: {step.name}")
        run_step(step, env, progress)
    progress(f"{record.id}: {launch.name}")
    launched = platforms.get(plan.platform).launch(launch, plan, _Runner(env, progress))
    if launched.facts:
        ledger.update_sidecar(record.id, **launched.facts)
    return launched.ref


def _not_needed(step: Step) -> bool:
    """True when the step's ``unless`` command says it has nothing to do."""
    return bool(step.unless) and proc.run(step.unless, extra_env=step.env, check=False).ok


class _Runner:
    """Runs a platform's launch step with this submit's environment and progress."""

    def __init__(self, env: Mapping[str, str], progress: Progress) -> None:
        self.env = env
        self.progress = progress

    def run(self, step: Step) -> proc.Result:
        return run_step(step, self.env, self.progress)

    def run_unchecked(self, step: Step) -> proc.Result:
        return proc.run(step.argv, extra_env=step.env, stdin=step.stdin_text, check=False)

    def spawn(self, step: Step) -> int:
        assert step.log_path is not None, f"step {step.name} has no log file to start detached"
        return proc.spawn_detached(
            step.argv,
            env=proc.environment(step.env, step.pass_env, clean=step.clean_env, base=self.env),
            cwd=step.cwd or "/",
            log_path=step.log_path,
        )


def run_step(
    step: Step, env: Mapping[str, str], progress: Progress = lambda _: None
) -> proc.Result:
    """Run one non-detached step; with ``expect``, retry until its output has that line."""
    stdin = step.stdin_text if step.stdin_env is None else env[step.stdin_env]
    if step.stdin_env_file:
        stdin = env_file_text(step.stdin_env_file, env)
    if step.expect is None:
        return proc.run(step.argv, extra_env=step.env, stdin=stdin)
    result = None
    for attempt in range(1, step.attempts + 1):
        result = proc.run(step.argv, extra_env=step.env, stdin=stdin, check=False)
        reasons = [
            line[len(FAILED) :] for line in result.stdout.splitlines() if line.startswith(FAILED)
        ]
        if reasons:
            raise StepFailed(step, reasons, result)
        if any(line.startswith(step.expect) for line in result.stdout.splitlines()):
            return result
        if attempt < step.attempts:
            progress(f"{step.name}: not yet ({attempt}/{step.attempts}), retrying")
            time.sleep(RETRY_INTERVAL)
    assert result is not None
    raise CommandFailed(
        proc.shown(step.argv),
        result.returncode,
        f"{result.output()}\n(no output line starting with {step.expect!r} after "
        f"{step.attempts} attempt{'s' if step.attempts > 1 else ''})",
    )


class StepFailed(CommandFailed):
    """A step whose output said why it failed (``TAOSPEC_FAILED=`` lines); not retried.

    The message is the step's own reasons, then its error output indented.
    """

    def __init__(self, step: Step, reasons: list[str], result: proc.Result) -> None:
        super().__init__(proc.shown(step.argv), result.returncode, result.output())
        message = f"{step.name}: " + "; ".join(proc.redacted(r) for r in reasons)
        errors = proc.redacted(result.stderr.strip())
        if errors:
            message += "\n" + "\n".join("    " + line for line in errors.splitlines())
        self.args = (message,)


def env_file_text(names: tuple[str, ...], env: Mapping[str, str]) -> str:
    """``NAME='value'`` lines for a job to source; the values go to the step's stdin only."""
    return "".join(f"{name}={shlex.quote(env[name])}\n" for name in names)


def teardown(record: Record, ledger: Ledger, progress: Progress = lambda _: None) -> None:
    """Run the stored plan's teardown steps once, after the job has ended."""
    side = ledger.sidecar(record.id)
    stored = side.get("plan")
    if side.get("teardown_done") or not isinstance(stored, dict):
        return
    steps = plan_from_json(stored).teardown
    for step in steps:
        progress(f"{record.id}: {step.name}")
        run_step(step, os.environ, progress)
    ledger.update_sidecar(record.id, teardown_done=True)


def _mark_failed(ledger: Ledger, record: Record, failure: CommandFailed) -> None:
    diagnosis = diagnose(failure.output)
    message = str(failure) if diagnosis is None else f"{failure}\n{diagnosis}"
    err_class = diagnosis.err_class if diagnosis else "ERR_PROGRAM"
    ledger.mark(record.id, ERROR, message=message, err_class=err_class)
    if diagnosis:
        failure.args = (f"{failure}\n  => {diagnosis}",)


def _interrupted(plan: Plan, ledger: Ledger, record: Record) -> None:
    """Ctrl-C during submit: remove whatever may have started, then record CANCELED."""
    current = ledger.get(record.id)
    note = platforms.get(plan.platform).cancel(current, ledger.sidecar(record.id))
    ledger.mark(record.id, CANCELED, message=f"interrupted during submit; {note}")
    teardown(current, ledger)
