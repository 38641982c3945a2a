"""Platforms: where a job runs. Each module satisfies :class:`taospec.platforms.base.Platform`.

:func:`render` turns a job into its plan through its platform, and refuses a
plan that would carry a secret.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from taospec import identity, lint, proc
from taospec.diagnostics import SpecError, shown_file
from taospec.errors import InvalidInput
from taospec.identity import Identity
from taospec.job import Job
from taospec.notify import NOTIFY_ENV
from taospec.placeholders import JOB_ID
from taospec.plan import Context, Plan, lint_plan
from taospec.platforms.base import Platform

NAMES = ("docker", "brev", "slurm", "local")
"""The platforms a job file may name; each is the module ``taospec.platforms.<name>``."""

if TYPE_CHECKING:  # mypy holds every platform module to the protocol here
    from taospec.platforms import brev, docker, local, slurm
    from taospec.yamlsrc import Source

    _CHECKED: Mapping[str, Platform] = {
        "docker": docker,
        "brev": brev,
        "slurm": slurm,
        "local": local,
    }


def get(name: str) -> Platform:
    """The platform called ``name`` (a job file's ``platform:``).

    Only that platform's module is imported: rendering a Docker job never loads
    what Slurm or Brev need.
    """
    if name not in NAMES:
        raise ValueError(f"unknown platform {name!r}")
    return cast(Platform, importlib.import_module(f"taospec.platforms.{name}"))


def render(
    job: Job,
    *,
    job_id: str = JOB_ID,
    user: str | None = None,
    launcher: Identity | None = None,
    upstream: Mapping[str, str] | None = None,
    source: Source | None = None,
    notifier: Sequence[str] = (),
) -> Plan:
    """Render ``job`` into its plan, refusing any plan that carries a secret.

    ``launcher`` is who submits (default: this process); ``user`` overrides
    the spec's ``user:``; ``upstream`` gives each needed target's results
    directory (or a stand-in from :func:`taospec.plan.upstream_stand_ins`).
    ``notifier`` is the launcher's ``$TAOSPEC_NOTIFY`` (as
    :func:`taospec.notify.notifier` reads and checks it): the plan's notifier when the
    job has no ``notify:``. With the job's ``source``, a refusal is a located problem
    (:class:`~taospec.diagnostics.SpecError`) at the key it is about.
    """
    try:
        return _render(job, job_id, user, launcher, upstream, notifier=tuple(notifier))
    except SpecError:
        raise
    except InvalidInput as refused:
        if source is None:
            raise
        raise source.refusal(refused) from None


def _render(
    job: Job,
    job_id: str,
    user: str | None,
    launcher: Identity | None,
    upstream: Mapping[str, str] | None,
    *,
    notifier: tuple[str, ...],
) -> Plan:
    submitter = launcher or identity.launcher()
    platform = get(job.platform)
    results_dir = f"{job.results_root.rstrip('/')}/{job_id}"
    context = Context(
        job=job,
        job_id=job_id,
        identity=identity.resolve(job.user, user, submitter, platform=job.platform, file=job.file),
        launcher=submitter,
        results_dir=results_dir,
        job_results=job.sees_results_at(results_dir),
        upstream=tuple(sorted((upstream or {}).items())),
        user_from_host=job.user == "host" and not user,
    )
    plan = platform.plan(context)
    if job.spec_inputs:
        plan = replace(plan, notes=(*plan.notes, *_input_notes(context)))
    lint_plan(plan, context.spec_yaml)
    if job.notify:
        _lint_notify(job)
    if job.notify or notifier:
        argv, where = (job.notify, "") if job.notify else (notifier, f" (${NOTIFY_ENV})")
        note = (
            f"notify: when the job ends, the taospec run or retry following it runs "
            f"{proc.shown(argv)} here{where}"
        )
        plan = replace(plan, reactions=(*plan.reactions, note), notifier=argv)
    if job.retry_max:
        note = (
            f"retry: the taospec run or retry following the job submits a retry (a new job) "
            f"when it, or its submit, ends ERROR ERR_INFRA, at most {job.retry_max} "
            f"time{'s' if job.retry_max > 1 else ''}"
        )
        plan = replace(plan, reactions=(*plan.reactions, note), retry_max=job.retry_max)
    return plan


def _input_notes(context: Context) -> tuple[str, ...]:
    """Where each input the skill's spec names is on the host, and where the job reads it."""
    return tuple(
        f"input spec.{i.spec_key}: {context.expand(i.host_path)}, read-only at "
        f"{context.expand(i.job_path)}"
        if i.job_path != i.host_path
        else f"input spec.{i.spec_key}: {context.expand(i.host_path)}"
        for i in context.job.spec_inputs
    )


def _lint_notify(job: Job) -> None:
    """Refuse a ``notify:`` command that carries a secret, as a step's command would be."""
    findings = lint.lint_argv(job.notify)
    if findings:
        listed = "\n".join(f"  notify: {finding}" for finding in findings)
        raise InvalidInput(
            f"{shown_file(job.file)}: the notify command would carry inline secrets; read them "
            f"from the environment in the command instead:\n{listed}",
            key=("notify",),
        )
