"""The command line. Only this module knows click; each command is a plain function."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

import click

from taospec.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TaospecError

FORMAT_CHOICE = click.Choice(["text", "json", "sh"])
USER_OPTION = click.option(
    "--user", metavar="UID:GID", help="Run the job as this UID:GID instead of the spec's user."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="taospec")
def cli() -> None:
    """Declarative YAML job specs for NVIDIA TAO containers.

    Exit codes: 0 done, 1 the job failed, 2 invalid input or usage,
    3 internal error, 130 interrupted.
    """


@cli.command()
@click.argument("files", nargs=-1, required=True)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing for valid files.")
def validate(files: tuple[str, ...], quiet: bool) -> None:
    """Check job files against the schema and taospec's rules."""
    from taospec.commands import validate as command

    _exit(command.run(files, quiet=quiet))


@cli.command()
@click.argument("file")
@click.option("--format", "fmt", type=FORMAT_CHOICE, default="text", show_default=True,
              help="text: for review; sh: a bash script to run by hand; json: data.")
@USER_OPTION
def render(file: str, fmt: str, user: str | None) -> None:
    """Print the exact commands FILE's job will run. Runs nothing."""
    from taospec.commands import render as command

    _exit(command.run(file, fmt=fmt, user=user))


@cli.command()
def schema() -> None:
    """Print the job spec's JSON Schema."""
    from taospec.schema import schema_text

    click.echo(schema_text(), nl=False)


@cli.command("lint")
@click.argument("file", default="-")
def lint_command(file: str) -> None:
    """Check a command line or script (FILE, or - for stdin) for inline secrets."""
    from taospec.commands import lint as command

    if file == "-":
        text, name = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(file, encoding="utf-8") as handle:
                text, name = handle.read(), file
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"{file}: {exc}") from None
    _exit(command.run(text, name))


def _exit(code: int) -> None:
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """Entry point: one handler turns every failure into a message and an exit code."""
    return run_guarded(lambda: cli.main(args=argv, prog_name="taospec", standalone_mode=False))


def run_guarded(call: Callable[[], object]) -> int:
    """Run ``call``; map taospec errors, usage errors, Ctrl-C and bugs to exit codes."""
    try:
        result = call()
    except TaospecError as exc:
        click.echo(f"taospec: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return 2
    except click.exceptions.Abort:
        click.echo("taospec: interrupted", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("taospec: interrupted", err=True)
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:
        return 0
    except Exception:
        click.echo("taospec: internal error (a bug; please report it with this output):", err=True)
        click.echo(traceback.format_exc(), err=True)
        return EXIT_INTERNAL
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
