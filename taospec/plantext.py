"""The text a person reads for a plan: a reviewable listing, a runnable script, or JSON.

All three are produced from the :class:`~taospec.plan.Plan`'s own steps; no
command is assembled here. Every argument becomes one shell word through
``shlex.quote``; the placeholder id becomes ``"$JOB_ID"``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping

from taospec.placeholders import STAND_IN
from taospec.plan import Plan, Step

WRAP = 88
HEAD = 40


def word(arg: str) -> str:
    """One argument as one shell word; a stand-in (the job id, ...) expands from ``$NAME``."""
    if "\x00" not in arg:
        return shlex.quote(arg)
    parts = STAND_IN.split(arg)
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f'"${part}"')
        elif part:
            out.append(shlex.quote(part))
    return "".join(out)


def words(argv: Iterable[str]) -> str:
    """An argument list on one line."""
    return " ".join(word(a) for a in argv)


Unit = tuple[str, bool]
"""Shell text that stays on one line, and whether it is an option."""


def units(argv: Iterable[str], quote: Callable[[str], str] = word) -> list[Unit]:
    """Arguments grouped for reading: an option with its value, or one positional word;
    each made a shell word by ``quote``."""
    out: list[Unit] = []
    value_slot = False
    for arg in argv:
        is_option = arg.startswith("-") and len(arg) > 1 and arg != "--"
        if value_slot and not is_option:
            out[-1] = (out[-1][0] + " " + quote(arg), True)
            value_slot = False
            continue
        out.append((quote(arg), is_option))
        value_slot = is_option and "=" not in arg
    return out


def layout(head: list[str], body: list[Unit]) -> str:
    """One line when short; else each option on its own line, positionals packed."""
    flat = " ".join(head + [text for text, _ in body])
    if len(flat) <= WRAP:
        return flat
    lines = [" ".join(head)]
    previous_option = True
    for text, is_option in body:
        fits = len(lines[-1]) + len(text) < WRAP
        joins_head = len(lines) == 1 and len(lines[0]) + len(text) < HEAD
        joins_words = not is_option and not previous_option and fits
        if lines[-1] and (joins_head or joins_words):
            lines[-1] += " " + text
        else:
            lines.append(text)
        previous_option = is_option
    return " \\\n    ".join(line for line in lines if line)


def argv_text(argv: tuple[str, ...], head: Iterable[str] = ()) -> str:
    """An argument list as shell text (after ``head`` words), wrapped when long."""
    first, *rest = units(argv)
    return layout([*head, first[0]], rest)


def heredoc(text: str) -> tuple[str, str]:
    """A quoted here-document (opener, body) whose delimiter is not a line of ``text``."""
    taken = set(text.splitlines())
    delimiter = "TAOSPEC_EOF"
    counter = 0
    while delimiter in taken:
        counter += 1
        delimiter = f"TAOSPEC_EOF_{counter}"
    body = text if text.endswith("\n") else text + "\n"
    return f"<<'{delimiter}'", f"{body}{delimiter}"


KEEP_ONLY = "unset -f $(compgen -A function); export -n $(compgen -e)"
"""How a step with a clean environment that passes variables by name begins, in a subshell:
nothing of the shell's is exported any more; then ``export NAME="$NAME"`` for each passed
one (a builtin: the value is on no command line, as ``env -i NAME="$NAME"`` would put it,
in the argv of ``env`` that any user of the machine can read)."""


def command_line(step: Step) -> str:
    """The shell line that does exactly what the executor does for ``step``."""
    head: list[str] = []
    body: list[Unit] = []
    if step.log_path:
        head.append("setsid")
    if step.clean_env:
        head += ["env"] if step.pass_env else ["env", "-i"]
        if step.cwd:
            body.append((f"-C {word(step.cwd)}", True))
        body += [(assignment(k, v), True) for k, v in step.env]
    else:
        head += [assignment(k, v) for k, v in step.env]
    line = layout(head, body + units(step.argv)) if body else argv_text(step.argv, head)
    if step.clean_env and step.pass_env:
        kept = " ".join(f'{name}="${name}"' for name in step.pass_env)
        line = f"({KEEP_ONLY}\n export {kept}\n exec {line})"
    if step.stdin_env:
        line = f"printf '%s' \"${step.stdin_env}\" | {line}"
    if step.stdin_env_file:
        pairs = " ".join(f'{name} "${name}"' for name in step.stdin_env_file)
        line = f"printf '%s=%q\\n' {pairs} | {line}"
    if step.unless:
        check = " ".join([*(assignment(k, v) for k, v in step.env), words(step.unless)])
        line = f"{check} >/dev/null 2>&1 || {line}"
    if step.log_path:
        line = f"{line} >{word(step.log_path)} 2>&1 </dev/null &"
    document = None
    if step.stdin_text is not None:
        line, document = _with_input(line, step.stdin_text)
    if step.expect is not None:
        line = _expecting(step, line)
    if step.already_done is not None:
        return _unless_already_done(line, document, step.already_done)
    return line if document is None else f"{line}\n{document}"


def _unless_already_done(line: str, document: str | None, marker: str) -> str:
    """``line`` run for its error output, which counts as success when it has ``marker``;
    a here-document's body ends inside the command substitution that reads it."""
    said = f"{line} 2>&1 >/dev/null"
    if document is not None:
        said = f"{said}\n{document}\n"
    done = f'grep -Fq -- {word(marker)} <<<"$said"'
    return f'said=$({said}) || {done} || {{ echo "$said" >&2; false; }}'


def _with_input(line: str, text: str) -> tuple[str, str]:
    """``line`` reading ``text`` from a here-document: the line with its opener, and the
    document's body, which goes after the whole command line (a step that expects a line
    of output pipes the command's output on; the input is still the command's).

    Stand-ins in ``text`` (the job id, ...) are shown as ``${NAME}`` and
    filled in by sed from ``$NAME``, so the line still does what the executor
    does. A token already in the text gets a numbered name instead.
    """
    fills = []
    for name in dict.fromkeys(STAND_IN.findall(text)):
        token, counter = f"${{{name}}}", 0
        while token in text:
            counter += 1
            token = f"${{{name}_{counter}}}"
        text = text.replace(f"\x00{name}\x00", token)
        fills.append(f"-e {shlex.quote(f's|[$]{token[1:]}|')}\"${name}\"'|g'")
    opener, body = heredoc(text)
    if not fills:
        return f"{line} {opener}", body
    return f"sed {' '.join(fills)} {opener} | {line}", body


def assignment(name: str, value: str) -> str:
    """``NAME=value`` as a shell assignment (only the value is quoted, so it stays one)."""
    return f"{name}={word(value)}"


def _expecting(step: Step, line: str) -> str:
    """A step that counts as done only when its output has a line starting with ``expect``;
    with several attempts, it is tried until it does (5 s apart), at most that many times."""
    fed = "" if step.stdin_text is not None else " </dev/null"
    check = f"{line}{fed} | grep -q ^{word(step.expect or '')}"
    if step.attempts <= 1:
        return check
    give_up = f'{{ echo "{step.name}: no success after {step.attempts} attempts" >&2; exit 1; }}'
    return (
        f"attempt=1; until {check}; do "
        f'[ "$attempt" -lt {step.attempts} ] || {give_up}; '
        "attempt=$((attempt + 1)); sleep 5; done"
    )


_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)} | {
    ord("\n"): "\\n",
    ord("\t"): "\\t",
    ord("\r"): "\\r",
}


def comment(text: str) -> str:
    """A comment line's text, with the placeholder id shown as $JOB_ID and each control
    character as its escape (``\\n``): a line break would end the comment, and a shell
    would run the rest of the line as a command."""
    return STAND_IN.sub(r"$\1", text).translate(_CONTROL)


def _notes(plan: Plan) -> Iterator[str]:
    where = f"{plan.file} (target {plan.target}, platform {plan.platform})"
    yield f"# taospec plan: {comment(where)}"
    if plan.has_placeholder_id:
        yield "# The job id is minted when the job is submitted; until then it shows as $JOB_ID."
    yield f"# Results: {comment(plan.record.results_dir)}"
    yield f"# Recorded as: {comment(recorded(plan))}"
    for note in (*plan.notes, *plan.reactions):
        yield f"# Note: {comment(note)}"


def recorded(plan: Plan) -> str:
    """What the job's record says of it besides its platform and results (the image, which
    a local or Slurm job's commands may not name): each is a part of what the plan runs."""
    record = plan.record
    said = [
        f"image {record.image}",
        f"network_arch {record.network_arch}",
        f"action {record.action}",
        f"storage tier {record.storage_tier}",
    ]
    if record.upload_excludes:
        said.append(f"upload excludes {', '.join(record.upload_excludes)}")
    return ", ".join(said)


def text(plan: Plan) -> str:
    """The reviewable listing: each step's purpose, then its exact command line."""
    out = list(_notes(plan))
    for step in plan.steps:
        out += ["", f"# {step.name}: {comment(step.why)}", command_line(step)]
    for step in plan.teardown:
        out += ["", f"# after the job ends, {step.name}: {comment(step.why)}", command_line(step)]
    return "\n".join(out) + "\n"


def script(plan: Plan, upstream: Mapping[str, str] | None = None) -> str:
    """A bash script a person could run by hand: record, steps, RUNNING.

    ``upstream`` holds the stand-in of each needed target's results directory (see
    :func:`taospec.plan.upstream_stand_ins`): the script requires each one it uses as a
    variable set before it runs, and stops, before the record is opened, without it.
    """
    record = plan.record
    open_argv = [
        "taospec",
        "record",
        "open",
        "--platform",
        record.platform,
        "--image",
        record.image,
        "--network-arch",
        record.network_arch,
        "--action",
        record.action,
        "--storage-tier",
        record.storage_tier,
        "--results-root",
        record.results_dir.rsplit("/", 1)[0],
    ]
    for exclude in record.upload_excludes:
        open_argv += ["--upload-exclude", exclude]
    head = ["#!/usr/bin/env bash", *_notes(plan)]
    head.append("# Values are single-quoted so that a $ in them stays literal, as in the spec.")
    head += ["# shellcheck disable=SC2016", "set -euo pipefail", ""]
    out = ["# The record comes first: it mints the id the container is named after."]
    out.append(f'JOB_ID="${{JOB_ID:-$({words(open_argv)})}}"')
    out.append(f"[[ $JOB_ID =~ {JOB_ID_SHAPE} ]] || {_stop('JOB_ID', NOT_AN_ID)}")
    out.append("export JOB_ID")
    out.append("# A step that fails before the launch ends the record ERROR, as run records it.")
    out.append(f"trap {word(STOPPED)} EXIT")
    _steps(plan, out)
    documents = "".join(step.stdin_text or "" for step in plan.steps)
    for need, value in (upstream or {}).items():
        name = STAND_IN.sub(r"\1", value)
        if plan.with_value(name, "") != plan:  # the plan uses it
            why = f"Set {name} to the results directory of the job of target {need} this reads."
            head += [
                f"# {comment(why)}",
                f': "${{{name}:?{UNSET}}}"',
                f"[[ ${name} == /* ]] || {_stop(name, f'not an absolute path: {UNSET}')}",
            ]
            if value in documents:  # sed writes it into a file as it is
                head.append(f"[[ ${name} != {UNWRITABLE} ]] || {_stop(name, CANNOT_WRITE)}")
            head.append("")
    return "\n".join([*head, *out]) + "\n"


def _stop(name: str, why: str) -> str:
    """The shell that says why ``$name`` will not do, and stops the script (exit 2)."""
    return f'{{ echo "{name}=${name}: {why}" >&2; exit 2; }}'


JOB_ID_SHAPE = "^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""A job id as the recorder mints one, which the script writes into its files as it is."""
NOT_AN_ID = "not a job id (letters, digits, '.', '_' and '-'); unset it to open a record"
UNWRITABLE = r"*[[:cntrl:]\'\"\\\|\&]*"
"""A value with a character the script cannot write as it is into the files it makes from a
here-document: a quote would end the quoted word of an sbatch script or a spec's quoted
text, a backslash starts an escape there, and ``|`` and ``&`` mean something to sed."""
CANNOT_WRITE = (
    "holds a character this script cannot write into the job's files as it is (a quote, "
    "a backslash, | or &, or a control character); taospec run takes any path"
)


STOPPED = (
    'taospec record mark "$JOB_ID" --state ERROR '
    '--message "the script stopped (exit $?) before the job launched"'
)
"""What a script runs when it stops between its record's open and its launch."""

UNSET = "set it to the results directory of the upstream job"
"""What a script says, and stops, when a stand-in for an upstream's results is unset or is
no absolute path (a job id given for it would be a named volume to ``docker run -v``, and a
local job would read it from its own results directory)."""


def _steps(plan: Plan, out: list[str]) -> None:
    """The script's steps, after the record is opened: each launch step's backend ref kept,
    then RUNNING marked; the teardown as comments."""
    for step in plan.steps:
        out.append("")
        out.append(f"# {step.name}: {comment(step.why)}")
        line = command_line(step)
        if KEEP_ONLY in line:
            out.append("# the names of the exported variables and functions, one word each:")
            out.append("# shellcheck disable=SC2046")
        instance = plan.backend_value("instance")
        if step.name == "launch" and step.expect is not None and instance:
            out.append(line)
            out.append(f'backend_ref={word(instance)}/"$JOB_ID"')
        elif step.name == "launch" and not step.log_path:
            out.append(f"backend_ref=$({line})")
        elif step.name == "launch":
            out.append(line)
            out.append('backend_ref="pid:$!"')
        else:
            out.append(line)
    out.append("")
    out.append("trap - EXIT")
    out.append('taospec record mark "$JOB_ID" --state RUNNING --backend-ref "$backend_ref"')
    for step in plan.teardown:
        out += [
            "",
            f"# after the job ends, {step.name}: {comment(step.why)}",
            *(f"# {line}" for line in command_line(step).split("\n")),
        ]
