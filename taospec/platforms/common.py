"""Steps that every platform writing on this machine shares: directories and the spec file."""

from __future__ import annotations

from taospec import templates
from taospec.identity import Identity
from taospec.plan import SPEC_FILE, Context, Step


def owner(context: Context) -> Identity | None:
    """Who should own what taospec creates, when that is not the launcher itself."""
    if (
        context.identity.uid == context.launcher.uid
        and context.identity.gid == context.launcher.gid
    ):
        return None
    return context.identity


def local_steps(context: Context) -> list[Step]:
    """Create the results tree on this machine, then write the spec file into it."""
    macros = templates.module(
        "common",
        {
            "owner": owner(context),
            "dirs": context.host_dirs(),
            "spec_path": f"{context.results_dir}/{SPEC_FILE}",
        },
    )
    steps = [
        Step(
            "prepare",
            templates.argv(macros.prepare()),
            "create the results directory, its stage and the job's HOME and caches",
        )
    ]
    spec = context.spec_yaml
    if spec is not None:
        steps.append(
            Step(
                "spec-file",
                templates.argv(macros.spec_file()),
                f"write the experiment spec the job reads as {context.config_path}",
                stdin_text=spec,
            )
        )
    return steps
