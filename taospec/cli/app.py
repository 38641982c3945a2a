"""The click command line: every verb, its options and its help.

Only :mod:`taospec.cli` knows click. Each command hands its typed options to
one plain function in :mod:`taospec.commands` and exits with the code it
returns; :func:`taospec.cli.main` handles whatever is raised.

Each verb imports its command module when it runs, here and nowhere else, so
that ``render`` never loads the ledger, the pipeline or the worker pool, and
``ls`` never loads YAML or Jinja.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from taospec import settings, states

if TYPE_CHECKING:  # completion alone builds these, so only completion imports them
    from click.shell_completion import CompletionItem

_Command = TypeVar("_Command", bound=Callable[..., Any])


def _complete_job_ids(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Job ids in the ledger, newest first, for status, logs, cancel and show."""
    from click.shell_completion import CompletionItem

    from taospec.commands import completion

    return [CompletionItem(i, help=h) for i, h in completion.job_ids(incomplete)]


def _complete_targets(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """The target names of the job file already on the command line."""
    from click.shell_completion import CompletionItem

    from taospec.commands import completion

    file = ctx.params.get("file")
    if not isinstance(file, str):
        return []
    return [CompletionItem(name) for name in completion.targets(file, incomplete)]


JOB_ID_ARGUMENT = click.argument("job_id", shell_complete=_complete_job_ids)
TARGETS_ARGUMENT = click.argument("targets", nargs=-1, shell_complete=_complete_targets)
USER_OPTION = click.option(
    "--user", metavar="UID:GID", help="Run the job as this UID:GID instead of the spec's user."
)


VERSIONS_OPTION = click.option(
    "--versions",
    metavar="FILE",
    help="The versions.yaml that resolves image versions keys (default: the nearest one "
    "beside the job file; needed for a job file read from a pipe).",
)
JSON_LINES_OPTION = click.option(
    "--json", "as_json", is_flag=True, help="One JSON record per line, with its state."
)


def format_option(*choices: str, help: str | None = None) -> Callable[[_Command], _Command]:
    """``--format`` as ``fmt``, one of ``choices``; the first is the default."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=choices[0],
        show_default=True,
        help=help,
    )


class _Verb(click.Command):
    """A verb: before it runs (not for ``--help``), a ``TAOSPEC_*`` setting that is not
    seconds stops it with exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        settings.check()
        return super().invoke(ctx)


class _Verbs(click.Group):
    command_class = _Verb
    group_class = type  # ``record`` is a group of verbs too


class _RecorderVerb(_Verb):
    """A ``record`` verb: a long option may be shortened to any prefix that names one
    option, as the TAO recorder's argparse allows (``--sta`` for ``--state``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options = {
            name: not (param.is_flag or param.count)
            for param in self.get_params(ctx)
            if isinstance(param, click.Option)
            for name in (*param.opts, *param.secondary_opts)
            if name.startswith("--")
        }  # each long option, and whether it takes a value
        spelled: list[str] = []
        words = iter(args)
        for word in words:
            if word == "--":
                spelled += [word, *words]
                break
            name, equals, value = word.partition("=")
            if name.startswith("--") and name not in options:
                matches = [option for option in options if option.startswith(name)]
                if len(matches) > 1:
                    raise click.UsageError(
                        f"ambiguous option: {name} could match {', '.join(matches)}", ctx
                    )
                if matches:
                    name = matches[0]
            spelled.append(name + equals + value)
            if options.get(name) and not equals:
                following = next(words, None)
                if following is not None and _reads_as_option(following):
                    raise click.UsageError(f"argument {name}: expected one argument", ctx)
                if following is not None:
                    spelled.append(following)  # the option's value, as written
        return super().parse_args(ctx, spelled)


def _reads_as_option(word: str) -> bool:
    """Whether argparse takes ``word`` for an option rather than a value: it starts with
    a dash and is not ``-`` alone, a negative number or a word holding a space."""
    return (
        word.startswith("-")
        and len(word) > 1
        and re.fullmatch(r"-\d+|-\d*\.\d+", word) is None
        and " " not in word
    )


class _SeparatedVerb(_Verb):
    """A verb whose arguments keep a ``--`` for the command to read (``diff``: the
    revisions, then the files, as ``git diff`` reads them): click ends its options at the
    first ``--`` and drops it, so that one is written twice and the second stays."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            args = [*args[:cut], "--", *args[cut:]]
        return super().parse_args(ctx, args)


class _RecorderVerbs(_Verbs):
    command_class = _RecorderVerb


@click.group(cls=_Verbs, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="taospec")
def cli() -> None:
    """Declarative YAML job specs for NVIDIA TAO containers.

    Exit codes: 0 done, 1 the job failed, 2 invalid input or usage,
    3 internal error, 130 interrupted.
    """


@cli.command()
@click.argument("files", nargs=-1, required=True)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing for valid files.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Check files in up to N processes at once (default: one per CPU for many files).",
)
@format_option(
    "text",
    "json",
    "github",
    help="text: file:line:col messages; json: one object per file; github: annotations.",
)
@click.option(
    "--here",
    is_flag=True,
    help="Also make every check run makes on this machine: mount sources, env.pass "
    "variables, the platform's tools.",
)
@VERSIONS_OPTION
@USER_OPTION
def validate(files: tuple[str, ...], **options: Any) -> None:
    """Check job files (- reads standard input) against the schema and taospec's rules."""
    from taospec.commands import validate as validate_verb

    sys.exit(validate_verb.run(files, **options))


@cli.command()
@click.argument("file")
@TARGETS_ARGUMENT
@format_option(
    "text", "json", "sh", help="text: for review; sh: a bash script to run by hand; json: data."
)
@USER_OPTION
@VERSIONS_OPTION
def render(file: str, targets: tuple[str, ...], **options: Any) -> None:
    """Show the exact commands FILE's jobs (or TARGETS) will run, starting none. FILE - is stdin."""
    from taospec.commands import render as render_verb

    sys.exit(render_verb.run(file, targets, **options))


@cli.command("init")
@click.argument("skill")
@click.argument("action")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="The job file to write (default: ./<skill>-<action>.yaml); never overwritten.",
)
def init_command(skill: str, action: str, output: str | None) -> None:
    """Write a job file for ACTION of the model SKILL, with only what to fill in left as ???.

    SKILL is a name in $TAO_SKILL_BANK/skills/models/ or a path to a skill folder;
    tao-deploy-MODEL names the model's TAO Deploy (TensorRT) actions.
    """
    import os

    from taospec.commands import init as init_verb

    sys.exit(init_verb.run(skill, action, output, job_dir=os.getcwd(), environ=os.environ))


@cli.command(cls=_SeparatedVerb)
@click.argument("args", nargs=-1, required=True, metavar="[REV_A [REV_B]] [--] FILE...")
@format_option("text", "json", help="text: a unified diff per target; json: data for tools.")
def diff(args: tuple[str, ...], fmt: str) -> None:
    """Show how FILEs' plans changed between two git revisions.

    Default: HEAD against the work tree; one revision: it against the work
    tree. A leading word is a revision when it is no file in the work tree;
    -- ends the revisions, as it does for git diff.
    Exit 0 when no plan changed, 1 when one did, 2 on invalid input.
    """
    from taospec.commands import diff as diff_verb

    sys.exit(diff_verb.run(args, fmt=fmt))


@cli.command()
@click.option("--path", "as_path", is_flag=True, help="Print the schema file's path instead.")
def schema(as_path: bool) -> None:
    """Print the job spec's JSON Schema (for editors: --path)."""
    from taospec.schema import schema_path, schema_text

    if as_path:
        click.echo(str(schema_path()))
        return
    click.echo(schema_text(), nl=False)


@cli.command("lint")
@click.argument("files", nargs=-1)
def lint_command(files: tuple[str, ...]) -> None:
    """Check command lines or scripts (FILES, or - / none for stdin) for inline secrets."""
    from taospec.commands import lint as lint_verb

    code = 0
    for file in files or ("-",):
        if file == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            try:
                with open(file, encoding="utf-8") as stream:
                    text, name = stream.read(), file
            except (OSError, UnicodeDecodeError) as exc:
                raise click.BadParameter(f"{file}: {exc}") from None
        code = max(code, lint_verb.run(text, name))
    sys.exit(code)


STATES = click.Choice(states.STATES)


@cli.command()
@click.argument("file")
@TARGETS_ARGUMENT
@click.option(
    "-n",
    "--dry-run",
    is_flag=True,
    help=(
        "Say what would run and why, and show its plans; start nothing (a job found to have "
        "ended is recorded, as status does)."
    ),
)
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 if anything would run or is running, 0 if all is up to date.",
)
@click.option("-B", "--force", is_flag=True, help="Run the named targets even if up to date.")
@click.option(
    "-k",
    "--keep-going",
    is_flag=True,
    help="Keep building what does not depend on a failed target.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run up to N independent targets at once.",
)
@click.option("-d", "--detach", is_flag=True, help="Return after submit; print the job ids.")
@click.option("-f", "--follow", is_flag=True, help="Stream the jobs' output while they run.")
@click.option(
    "--allow-shared-gpus",
    is_flag=True,
    help="Submit even if a running job on the same host holds one of the GPUs.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="With -n: one JSON document of the decisions."
)
@USER_OPTION
def run(file: str, targets: tuple[str, ...], **options: Any) -> None:
    """Build FILE's TARGETS (default: all) and what they need, skipping what is up to date.

    Docker targets are checked first (taospec doctor's cheap checks): a failed
    check stops the run with exit 2 before any record is opened; too little
    free space (results_root, docker's data root, /dev/shm) is only a warning
    on stderr, so a small CI disk does not block a run.

    On a terminal the running jobs are redrawn in place (not with TERM=dumb);
    otherwise each running job gets one progress line every
    $TAOSPEC_PROGRESS_INTERVAL seconds (default 60): state, elapsed time, and
    epoch/KPIs from its status.json, or its last output line. A job's notify:
    command runs once when it ends. Each target ends with one summary line.

    A target whose job of the same plan has not ended (started by another run)
    is not started again: the run starts nothing and says how to follow that
    job, or to start another with -B.

    Exit 0 when every job that ran completed, 1 when one failed (or, with
    --check, when something would run or is running), 2 when a preflight
    check failed or a job of the same plan is still running, 130 when
    interrupted.
    """
    from taospec.commands import run as run_verb

    sys.exit(run_verb.run(file, targets, **options))


@cli.command()
@click.argument("file")
@TARGETS_ARGUMENT
@format_option("mermaid", "dot")
@USER_OPTION
def graph(file: str, targets: tuple[str, ...], fmt: str, user: str | None) -> None:
    """Print FILE's dependency graph with each target's state (Mermaid or Graphviz)."""
    from taospec.commands import graph as graph_verb

    sys.exit(graph_verb.run(file, targets, fmt=fmt, user=user))


@cli.command()
@JOB_ID_ARGUMENT
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(job_id: str, as_json: bool) -> None:
    """JOB_ID's state: from its backend while it runs (recording a first terminal state),
    from its record once it has ended."""
    from taospec.commands import status as status_verb

    sys.exit(status_verb.status(job_id, as_json=as_json))


@cli.command()
@click.argument("file", required=False)
@click.argument("targets", nargs=-1)
def doctor(file: str | None, targets: tuple[str, ...]) -> None:
    """Check that the host a job would run on is ready for it.

    With FILE, first what run would stop at on this machine (a mount source
    missing here, a results_root that is not a folder), each at its line; then
    each docker job's host (TARGETS: only those and what they need):
    the docker engine and client, the NVIDIA runtime and the GPUs the job names
    (not needed without gpus:), the login for an nvcr.io image, free space
    under results_root and docker's data root, and /dev/shm for docker.shm_size,
    on the engine docker.host names. Without FILE, the local docker engine.
    Each failed check says what to do. Exit 0 when all pass, 1 when one fails.

    taospec run makes the same checks (less the client and GPU queries) before
    it opens any record, and refuses with exit 2 when one fails; free space
    (results_root, the data root, /dev/shm) is only a warning there, so a small
    CI disk does not block a run.
    """
    from taospec.commands import doctor as doctor_verb

    sys.exit(doctor_verb.verb(file, targets))


@cli.command()
@JOB_ID_ARGUMENT
@click.option("--tail", type=click.IntRange(min=0), help="Only the last N lines.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
def logs(job_id: str, tail: int | None, follow: bool) -> None:
    """Print JOB_ID's output.

    With -f, exit 0 when the job completed and 1 when it ended in ERROR or
    CANCELED.
    """
    from taospec.commands import jobs

    sys.exit(jobs.logs(job_id, tail=tail, follow=follow))


@cli.command()
@JOB_ID_ARGUMENT
def cancel(job_id: str) -> None:
    """Stop JOB_ID and record CANCELED (a finished job is left as it is)."""
    from taospec.commands import jobs

    sys.exit(jobs.cancel(job_id))


@cli.command()
@JOB_ID_ARGUMENT
@click.option("--plan", "with_plan", is_flag=True, help="Print the commands the job ran.")
@click.option("--json", "as_json", is_flag=True, help="JSON (the record is JSON already).")
def show(job_id: str, with_plan: bool, as_json: bool) -> None:
    """Print JOB_ID's record."""
    from taospec.commands import jobs

    sys.exit(jobs.show(job_id, plan=with_plan, as_json=as_json))


@cli.command()
@JOB_ID_ARGUMENT
@click.option("--detach", is_flag=True, help="Print the new job's id and return.")
@click.option(
    "--allow-shared-gpus", is_flag=True, help="Skip the check for GPUs a running job holds."
)
@click.option(
    "-B", "--force", is_flag=True, help="Retry even while another job of its plan is running."
)
def retry(job_id: str, detach: bool, allow_shared_gpus: bool, force: bool) -> None:
    """Run JOB_ID's plan again as a new job whose record says retry_of: JOB_ID.

    Refused (exit 2) for a job that has not ended or that COMPLETED, and, as
    run refuses it, while another job of the same plan has not ended (-B
    retries anyway); followed until it ends, retried and notified of as its
    plan's notes say (exit 0 when the last job completes, 1 when not)."""
    from taospec.commands import retry as command

    sys.exit(command.retry(job_id, detach=detach, allow_shared_gpus=allow_shared_gpus, force=force))


@cli.command("ls")
@click.option(
    "--state",
    type=click.Choice(states.STATES, case_sensitive=False),
    help="Only records in this state (any case).",
)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@JSON_LINES_OPTION
def ls_command(state: str | None, limit: int, as_json: bool) -> None:
    """List the newest jobs in the ledger (recorded states)."""
    from taospec.commands import ls

    sys.exit(ls.ls(state=state, limit=limit, as_json=as_json))


@cli.command()
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Only jobs that ended, and sidecars written, at least this long ago (e.g. 30m, 7d).",
)
@click.option("-n", "--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def prune(older_than: str | None, dry_run: bool) -> None:
    """Remove finished jobs' containers (which hold env.pass values), keeping their logs.

    Also removes each sidecar no record goes with, which a taospec killed while it opened
    a record leaves.
    """
    from taospec.commands import prune as prune_verb

    sys.exit(prune_verb.run(older_than=older_than, dry_run=dry_run))


@cli.group(cls=_RecorderVerbs)
def record() -> None:
    """The job-record ledger's verbs, flag for flag like the TAO recorder.

    A refusal exits 1 with the recorder's message; a usage error exits 2.
    """


def _platform_slug(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from taospec.errors import InvalidInput
    from taospec.ledger import platform_slug

    try:
        return platform_slug(value)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc)) from None


@record.command("open")
@click.option("--platform", required=True, callback=_platform_slug, help="e.g. docker, slurm.")
@click.option("--image", required=True)
@click.option("--network-arch", required=True)
@click.option("--action", required=True)
@click.option("--storage-tier", type=click.Choice(["A", "B", "C"]), required=True)
@click.option("--results-dir", help="Use this exact results_dir (a path or URI).")
@click.option("--results-root", help="Bind results_dir to <root>/<job id>.")
@click.option("--upload-exclude", "upload_excludes", multiple=True)
@click.option("--parent-job")
@click.option("--retry-of")
def record_open(**fields: Any) -> None:
    """Open a record (before anything launches) and print its id."""
    from taospec.commands import record as command

    sys.exit(command.open_record(**fields))


@record.command("mark")
@JOB_ID_ARGUMENT
@click.option("--state", type=STATES, required=True)
@click.option("--message", default="")
@click.option(
    "--source",
    type=click.Choice(["agent", "poller", "backend-hook"]),
    default="agent",
    show_default=True,
)
@click.option("--backend-ref")
@click.option("--err-class", type=click.Choice(["ERR_INFRA", "ERR_PROGRAM"]))
def record_mark(job_id: str, **change: Any) -> None:
    """Append a transition to JOB_ID's record (a terminal state is final)."""
    from taospec.commands import record as command

    sys.exit(command.mark(job_id, **change))


@record.command("show")
@JOB_ID_ARGUMENT
def record_show(job_id: str) -> None:
    """Print JOB_ID's record as indented JSON (redacted)."""
    from taospec.commands import record as command

    sys.exit(command.show(job_id))


@record.command("list")
@JSON_LINES_OPTION
def record_list(as_json: bool) -> None:
    """Print id, platform, last state and results_dir of every record, by file name."""
    from taospec.commands import record as command

    sys.exit(command.list_records(as_json=as_json))
