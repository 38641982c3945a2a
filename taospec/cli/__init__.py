"""The command line: one entry point, one handler for every failure.

:func:`main` hands a command line :mod:`taospec.cli.fast` recognises straight
to its command; anything else (help, version, every other verb, anything
unusual) goes to the click application in :mod:`taospec.cli.app`. Either way
:func:`run_guarded` turns what comes back into an exit code. Importing this
package imports neither click nor anything a command needs.
"""

from __future__ import annotations

import sys

from taospec.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the command line and return its exit code."""
    from taospec.cli import fast

    words = list(sys.argv[1:] if argv is None else argv)
    command = fast.recognise(words)
    try:
        return run_guarded(command or (lambda: _click(words)))
    finally:
        if argv is None:
            _exit_without_collecting()


def _exit_without_collecting() -> None:
    """Spare the interpreter's last collection walking what is alive: the process ends
    next and the operating system frees it all (about 8 ms of every command)."""
    import gc

    gc.freeze()


def _click(words: list[str]) -> object:
    from taospec.cli.app import cli

    return cli.main(args=words, prog_name="taospec", standalone_mode=False)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_guarded(call: Callable[[], object]) -> int:
    """Run ``call``; map taospec errors, usage errors, Ctrl-C and bugs to exit codes."""
    from taospec.errors import TaospecError

    try:
        result = call()
    except TaospecError as exc:
        from taospec.diagnostics import SpecError

        if isinstance(exc, SpecError):
            _say(str(exc))
            count = len(exc.problems)
            _say(f"taospec: {count} problem{'s' if count > 1 else ''}; nothing was run")
        else:
            _say(f"taospec: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        _say("taospec: interrupted")
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:
        return 0
    except Exception as exc:
        code = _click_failure(exc)
        if code is not None:
            return code
        import traceback

        _say("taospec: internal error (a bug; please report it with this output):")
        _say(traceback.format_exc())
        return EXIT_INTERNAL
    return result if isinstance(result, int) else 0


def _click_failure(exc: Exception) -> int | None:
    """The exit code for one of click's own exceptions (None for anything else)."""
    click = sys.modules.get("click")
    if click is None:
        return None
    if isinstance(exc, click.exceptions.Exit):
        return int(exc.exit_code)
    if isinstance(exc, click.ClickException):
        exc.show()
        return EXIT_INVALID
    if isinstance(exc, click.exceptions.Abort):
        _say("taospec: interrupted")
        return EXIT_INTERRUPTED
    return None
