"""The command lines people type most, recognised without loading click.

Loading click costs more than most commands do. :func:`recognise` knows the
plain forms of ``render``, ``validate``, ``run``, ``status`` and ``ls``: the
verb, then options spelled exactly as :mod:`taospec.cli.app` defines them
(``--format json``, ``-q``, ``-j 4``; each at most once), and positionals that
do not start with ``-``. It returns the call click would make, with the same
values and defaults, or ``None`` for anything else (help, ``--opt=value``,
combined short flags, ``--``, a value click would reject), which click then
handles with its usual messages. tests/test_cli_fast.py checks that wherever
this answers, click parses the same command line to the same values.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    Option = tuple[str, str, tuple[str, ...], Any]
    """(parameter name, kind, choices, default)."""

STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")
FLAG, CHOICE, COUNT, TEXT = "flag", "choice", "count", "text"
"""Option kinds: a switch; one of listed words; an integer of at least 1; any word."""

USER: Option = ("user", TEXT, (), None)
VERBS: dict[str, tuple[tuple[str, ...], dict[str, Option]]] = {
    "render": (
        ("file", "targets*"),
        {"--format": ("fmt", CHOICE, ("text", "json", "sh"), "text"), "--user": USER},
    ),
    "validate": (
        ("files+",),
        {
            "-q": ("quiet", FLAG, (), False),
            "--quiet": ("quiet", FLAG, (), False),
            "-j": ("jobs", COUNT, (), None),
            "--jobs": ("jobs", COUNT, (), None),
        },
    ),
    "status": (("job_id",), {"--json": ("as_json", FLAG, (), False)}),
    "ls": (
        (),
        {
            "--state": ("state", CHOICE, STATES, None),
            "--limit": ("limit", COUNT, (), 20),
            "--json": ("as_json", FLAG, (), False),
        },
    ),
    "run": (
        ("file", "targets*"),
        {
            "-n": ("dry_run", FLAG, (), False),
            "--dry-run": ("dry_run", FLAG, (), False),
            "--check": ("check", FLAG, (), False),
            "-B": ("force", FLAG, (), False),
            "--force": ("force", FLAG, (), False),
            "-k": ("keep_going", FLAG, (), False),
            "--keep-going": ("keep_going", FLAG, (), False),
            "-j": ("jobs", COUNT, (), 1),
            "--jobs": ("jobs", COUNT, (), 1),
            "-d": ("detach", FLAG, (), False),
            "--detach": ("detach", FLAG, (), False),
            "-f": ("follow", FLAG, (), False),
            "--follow": ("follow", FLAG, (), False),
            "--allow-shared-gpus": ("allow_shared_gpus", FLAG, (), False),
            "--user": USER,
        },
    ),
}


def parse(words: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """(verb, parameters as click would pass them), or None when not a plain form."""
    if not words or words[0] not in VERBS:
        return None
    positionals, options = VERBS[words[0]]
    values: dict[str, Any] = {spec[0]: spec[3] for spec in options.values()}
    given: set[str] = set()
    loose: list[str] = []
    rest = list(words[1:])
    while rest:
        word = rest.pop(0)
        if not word.startswith("-"):
            loose.append(word)
            continue
        spec = options.get(word)
        if spec is None or spec[0] in given:
            return None
        given.add(spec[0])
        if spec[1] == FLAG:
            values[spec[0]] = True
            continue
        if not rest or rest[0].startswith("-"):
            return None
        value = _value(spec, rest.pop(0))
        if value is None:
            return None
        values[spec[0]] = value
    bound = _bind(positionals, loose)
    if bound is None:
        return None
    return words[0], {**bound, **values}


def _value(spec: Option, word: str) -> Any:
    """The option's value from ``word``, or None where click might read it otherwise."""
    kind, choices = spec[1], spec[2]
    if kind == CHOICE:
        return word if word in choices else None
    if kind == COUNT:
        if not (word.isascii() and word.isdigit()) or word.startswith("0"):
            return None
        return int(word)
    return word


def _bind(positionals: tuple[str, ...], loose: list[str]) -> dict[str, Any] | None:
    """Positional words onto the verb's arguments (``name*``: any number, ``name+``: some)."""
    out: dict[str, Any] = {}
    for name in positionals:
        if name.endswith(("*", "+")):
            if name.endswith("+") and not loose:
                return None
            out[name[:-1]] = tuple(loose)
            loose = []
        elif loose:
            out[name] = loose.pop(0)
        else:
            return None
    return out if not loose else None


def recognise(words: Sequence[str]) -> Callable[[], int] | None:
    """The command a plain command line asks for, ready to call; None for anything else."""
    parsed = parse(words)
    if parsed is None:
        return None
    verb, values = parsed
    return lambda: CALLS[verb](values)


def _render(values: dict[str, Any]) -> int:
    from taospec.commands import render

    return render.run(values["file"], values["targets"], fmt=values["fmt"], user=values["user"])


def _validate(values: dict[str, Any]) -> int:
    from taospec.commands import validate

    return validate.run(values["files"], quiet=values["quiet"], jobs=values["jobs"])


def _status(values: dict[str, Any]) -> int:
    from taospec.commands import jobs

    return jobs.status(values["job_id"], as_json=values["as_json"])


def _ls(values: dict[str, Any]) -> int:
    from taospec.commands import jobs

    return jobs.ls(state=values["state"], limit=values["limit"], as_json=values["as_json"])


def _run(values: dict[str, Any]) -> int:
    from taospec.commands import run

    return run.run(
        values["file"],
        values["targets"],
        dry_run=values["dry_run"],
        check=values["check"],
        force=values["force"],
        keep_going=values["keep_going"],
        jobs=values["jobs"],
        detach=values["detach"],
        follow=values["follow"],
        user=values["user"],
        allow_shared_gpus=values["allow_shared_gpus"],
    )


CALLS: dict[str, Callable[[dict[str, Any]], int]] = {
    "render": _render,
    "validate": _validate,
    "status": _status,
    "ls": _ls,
    "run": _run,
}
