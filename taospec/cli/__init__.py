"""The command line: one entry point, one handler for every failure.

Only this package knows click. :func:`main` runs the click application in
:mod:`taospec.cli.app` and turns whatever comes back (an exit code, a
taospec error, a usage error, Ctrl-C, a bug) into an exit code.
"""

from __future__ import annotations

import gc

# What a command's start makes (modules, classes, the job model, templates) lives until
# it exits, yet Python searches for reference cycles every 700 new objects, and every
# tenth search goes through the older ones too: 3.6% of the instructions of `render`
# and 4.8% of `status` and `ls` here (callgrind). Searching every 50,000 new objects
# still collects cycles in a long run. Set before anything else this process imports.
GC_GENERATION0_THRESHOLD = 50_000
gc.set_threshold(GC_GENERATION0_THRESHOLD, *gc.get_threshold()[1:])

import io  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402

import click  # noqa: E402

from taospec import interrupts  # noqa: E402
from taospec.cli.app import cli  # noqa: E402
from taospec.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID, TaospecError  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the command line and return its exit code.

    Without ``argv`` this is the process's own command line, and the process
    ends when it returns: what the command made is left out of the search for
    reference cycles that Python's exit would make over the whole heap
    (``gc.freeze``): 5-7% of the instructions of ``render``, ``status`` and
    ``ls`` here. Objects are still freed, ``atexit`` handlers still run and open
    files still flush.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    interrupts.catch()  # SIGTERM and SIGHUP cancel what runs, as Ctrl-C does
    code = run_guarded(lambda: cli.main(args=words, prog_name="taospec", standalone_mode=False))
    if argv is None:
        gc.freeze()
    return code


def _say(text: str, *, redacted_in_parts: bool = False) -> None:
    """Write ``text`` to stderr without secret material: a failure's message may quote a
    value it refuses, from a job file or the command line. Text made of parts each
    redacted already (:attr:`TaospecError.redacted_in_parts`) is written as it is."""
    if not redacted_in_parts:
        from taospec.lint import redacted  # only a failure pays for it

        text = redacted(text)
    sys.stderr.write(text)
    sys.stderr.flush()


def run_guarded(call: Callable[[], object]) -> int:
    """Run ``call``; map taospec errors, usage errors, Ctrl-C and bugs to exit codes. Output
    whose reader has gone (``taospec ls | head -1``) is no failure: exit 0."""
    stdout = sys.stdout
    try:
        result = call()
    except TaospecError as exc:
        _say(exc.report() + "\n", redacted_in_parts=exc.redacted_in_parts)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)
        _say(shown.getvalue())
        return EXIT_INVALID
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("taospec: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except SystemExit as exc:
        if sys.stdout is not stdout:  # click's answer to EPIPE: it wraps the streams, exits 1
            return 0
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if _while_interrupted(exc):
            print("taospec: interrupted", file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        import traceback  # only a bug pays for it (about 5 ms of every start otherwise)

        _say("taospec: internal error (a bug; please report it with this output):\n")
        _say(traceback.format_exc() + "\n")
        return EXIT_INTERNAL
    return result if isinstance(result, int) else 0


def _while_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while an interrupt unwound the command: Ctrl-C can land
    inside a library's own clean-up (a ``threading.Condition`` releasing its lock while
    the workers of ``validate`` are awaited), which then fails in its place."""
    seen: BaseException | None = exc.__context__
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__context__
    return False
