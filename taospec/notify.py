"""Tell someone a job ended: run a command of theirs with the outcome in its environment.

The notifier (an argument list: a job's ``notify:``, or ``$TAOSPEC_NOTIFY`` under
``sh -c``) is put in the job's plan when it is rendered, and the one the plan shows (kept
with the job's record, :func:`planned`) runs once when the job reaches a terminal state, with
this process's environment plus
``TAOSPEC_JOB_ID``, ``TAOSPEC_STATE``, ``TAOSPEC_ERR_CLASS``,
``TAOSPEC_DURATION`` (whole seconds) and ``TAOSPEC_RESULTS_DIR``; nothing
else is added, and none of those is a secret. It is bounded by a timeout, past which its
process group is stopped (:func:`taospec.proc.run_bounded`); what it leaves in the
background when it exits is not waited for. A notifier that fails is reported as a
message, never raised: the job's outcome is already recorded and must not be changed by its
messenger.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from taospec import lint, proc
from taospec.errors import InvalidInput, TaospecError
from taospec.plan import plan_from_json

NOTIFY_ENV = "TAOSPEC_NOTIFY"
TIMEOUT = 30.0


def notifier(
    environ: Mapping[str, str] = os.environ, passed: Sequence[str] = ()
) -> tuple[str, ...]:
    """The notifier ``$TAOSPEC_NOTIFY`` names, run under ``sh -c`` as a string ``notify:``
    is; () when unset.

    Refused when it carries an inline secret, by the rules a job file's values meet, or
    the value of a variable in ``passed`` (the run's ``env.pass`` names), as written or in
    pieces the shell's quote removal joins: its words are the notifier's argv, which any
    user of the machine can read.
    """
    raw = environ.get(NOTIFY_ENV, "").strip()
    if not raw:
        return ()
    findings = lint.find_secret_literals(raw)
    if findings:
        listed = "\n".join(f"  {NOTIFY_ENV}: {finding}" for finding in findings)
        raise InvalidInput(
            f"{NOTIFY_ENV} would carry inline secrets; read them from the environment in the "
            f"command instead:\n{listed}"
        )
    argv = ("sh", "-c", raw)
    words = [word for _, word in lint.argv_words(argv)]  # the script and its words
    for name in passed:
        forms = lint.secret_forms(environ.get(name, ""))
        if any(form in word for word in words for form in forms):
            raise InvalidInput(
                f"{NOTIFY_ENV} holds the value of {name}, which env.pass passes by name so "
                f"that the value is never written down; refer to ${name} in the command instead"
            )
    return argv


def planned(sidecar: Mapping[str, object]) -> tuple[str, ...]:
    """The notifier a job's stored plan shows, the one that runs when it ends; () for none,
    or for a record that holds no plan."""
    stored = sidecar.get("plan")
    return plan_from_json(stored).notifier if isinstance(stored, dict) else ()


def outcome(
    job_id: str, state: str, err_class: str | None, duration: float, results_dir: str
) -> tuple[tuple[str, str], ...]:
    """The variables a notifier gets."""
    return (
        ("TAOSPEC_JOB_ID", job_id),
        ("TAOSPEC_STATE", state),
        ("TAOSPEC_ERR_CLASS", err_class or ""),
        ("TAOSPEC_DURATION", str(max(0, round(duration)))),
        ("TAOSPEC_RESULTS_DIR", results_dir),
    )


def notify(
    argv: Sequence[str],
    variables: tuple[tuple[str, str], ...],
    *,
    timeout: float = TIMEOUT,
) -> str | None:
    """Run ``argv`` with ``variables`` (see :func:`outcome`) added; None when it succeeded,
    else what went wrong, in one message to print."""
    if not argv:
        return None
    try:
        result = proc.run_bounded(argv, extra_env=variables, timeout=timeout)
    except (TaospecError, OSError, ValueError) as error:
        return f"notifier {proc.shown(argv)} could not run: {error}"
    if result.ok:
        return None
    output = result.output()
    if result.timed_out:  # said in the message, not by the note that ends its output
        output = output.rpartition("\n")[0].strip()
        what = f"ran past its {timeout:g} s timeout and was stopped"
    else:
        what = f"failed (exit {result.returncode})"
    detail = "".join("\n    " + text for text in output.splitlines()[-5:])
    return f"notifier {proc.shown(argv)} {what}{detail}"
