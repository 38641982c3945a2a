"""What the platforms share: the results tree and spec file, the facts about GPUs, and
the lines of a job's output."""

from __future__ import annotations

import codecs
import io
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from taospec import lint, templates
from taospec.identity import Identity
from taospec.job import SPEC_FILE, Job
from taospec.placeholders import stand_in
from taospec.plan import GPU_IDS, SPEC_STEP, Context, Step
from taospec.platforms.base import Write, last_lines

if TYPE_CHECKING:  # only for annotations: rendering a plan never loads the ledger
    from taospec.ledger import Record
    from taospec.states import Status


def owner(context: Context) -> Identity | None:
    """Who should own what taospec creates, when that is not the launcher itself."""
    if (
        context.identity.uid == context.launcher.uid
        and context.identity.gid == context.launcher.gid
    ):
        return None
    return context.identity


def tree_macros(context: Context, owned_by: Identity | None) -> Any:
    """The commands that create the results tree (owned by ``owned_by``, None: the one who
    runs them) and write the spec file."""
    return templates.module(
        "common",
        {
            "owner": owned_by,
            "dirs": context.host_dirs(),
            "spec_path": f"{context.results_dir}/{SPEC_FILE}",
        },
    )


def local_steps(context: Context) -> list[Step]:
    """Create the results tree on this machine, then write the spec file into it."""
    macros = tree_macros(context, owner(context))
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
                SPEC_STEP,
                templates.argv(macros.spec_file()),
                f"write the experiment spec the job reads as {context.config_path}",
                stdin_text=spec,
            )
        )
    return steps


def gpu_ids(job: Job) -> str:
    """The job's GPUs as a comma-separated list, ``all``, or the stand-in for ids picked at
    submit ('' for none)."""
    if job.gpus_free:
        return stand_in(GPU_IDS)
    if job.gpus == "all":
        return "all"
    return ",".join(str(g) for g in job.gpus)


def gpu_facts(job: Job) -> list[tuple[str, str]]:
    """The plan's backend facts the executor's GPU checks read: the ids, and how many to pick."""
    ids = gpu_ids(job)
    facts = [("gpus", ids)] if ids else []
    if job.gpus_free:
        facts.append(("gpus_free", str(job.gpus_free)))
    return facts


_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def output_lines(text: str) -> list[str]:
    """The lines of a job's output, each with its newline: split at ``\\n`` alone, as
    ``docker logs`` splits them. :meth:`str.splitlines` also breaks at ``\\f``, ``\\v``,
    ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``, and output is redacted a
    line at a time: a passed value holding one of those would reach redaction in pieces."""
    return _LINE.findall(text)


TAIL_BLOCK = 64 * 1024
"""How much of a log :func:`tail_start` reads at a time, going back from its end."""
LOG_TAIL_BYTES = 64 * 1024
"""How much of the end of a job's output the last lines a failure's diagnosis and a
progress line show are taken from: a few long lines, or one without end, are not read
whole for them."""


def tail_start(
    log: IO[bytes], lines: int, *, held: bool, within: int | None = None, block: int = TAIL_BLOCK
) -> int:
    """Where the last ``lines`` lines of ``log`` begin (its start when it holds fewer), as
    :func:`output_lines` splits them. A last line not ended yet is one of them, unless it is
    ``held`` back (a follow hands it on once it ends; a look at a job still writing may cut
    it to nothing): then it comes after them. Of those in its last ``within`` bytes alone,
    when given: where the first line there begins that is known whole (the first line end
    there ends one that may begin before them).

    Read back from the end a ``block`` at a time, only until the line end before the first
    of them, so that the tail of a log of gigabytes reads little more than the lines."""
    end = log.seek(0, os.SEEK_END)
    ends = lines + 1 if held else lines  # to pass, the one before the first line included
    if ends <= 0:
        return end
    floor = 0 if within is None else max(end - within, 0)
    position = end if held else end - 1  # a last byte that is a line end ends a line shown
    first = end  # after the earliest line end read
    while position > floor:
        start = max(position - block, floor)
        log.seek(start)
        data = log.read(position - start)
        found = data.count(b"\n")
        if found >= ends:
            at = len(data)
            for _ in range(ends):
                at = data.rindex(b"\n", 0, at)
            return start + at + 1
        if found:
            first = start + data.index(b"\n") + 1
        ends -= found
        position = start
    return first if floor else 0


def ended(lines: list[str]) -> str:
    """A job's output ``lines`` as one text, each ended: of output read as two streams, the
    last line of one, not ended, is not joined to a line of the other."""
    return "".join(line if line.endswith("\n") else f"{line}\n" for line in lines)


def still_writing(record: Record, status: Callable[[], Status]) -> bool:
    """Whether the job may still be writing its output: not recorded as ended, and its
    ``status`` neither ended nor gone. Asked before the output is read, so that output
    read after a "no" is all the job wrote."""
    if record.terminal_state is not None:
        return False
    now = status()
    return not (now.terminal or now.gone)


def read_until_ended(
    ended: Callable[[], bool],
    read: Callable[[], bytes],
    on_data: Callable[[bytes], None],
    interval: float,
) -> None:
    """Hand what ``read`` gives (the output written since it last read, or a block of it)
    to ``on_data`` until the job has ``ended``, reading again at once until it gives
    nothing: a follow that begins far behind the job (its log of gigabytes) holds one block
    at a time, and then waits ``interval`` for more. That the job ended is asked before a
    read, so the reads after a "yes" are all the job wrote: asked after, a job that wrote
    the rest of a line and ended in between had it never read, and the part read before
    handed on as if it were the whole line."""
    while True:
        done = ended()
        while more := read():
            on_data(more)
        if done:
            return
        time.sleep(interval)


HELD_AT_MOST = 1 << 16
"""The most of a line still being written that a follow holds back (a progress bar may
never end its line)."""


def held_back(text: str) -> tuple[list[str], str]:
    """The lines of ``text`` a follow hands on now, and the line still being written after
    them, which it holds back: output is redacted a line at a time, and a passed value the
    job writes in two pieces must reach the redaction as one line (nor may the pieces read
    as two lines). A line longer than :data:`HELD_AT_MOST` is handed on up to
    :func:`cut_at`; one that cannot be cut is held whole, however long, since a value in
    it would go out in part."""
    lines = output_lines(text)
    last = lines[-1] if lines else ""
    if last.endswith("\n"):
        return lines, ""
    if len(last) < HELD_AT_MOST:
        return lines[:-1], last
    cut = cut_at(last)
    return [*lines[:-1], *([last[:cut]] if cut else [])], last[cut:]


class Unended:
    """A follow of a job's output file, as it grows: each line to ``on_line`` as it ends,
    and to ``on_part``, when given, the line being written through its last ``\r``
    (:func:`redrawn_at`) and what of a line too long to hold is cut off
    (:func:`held_back`), which ``on_line`` takes without one."""

    def __init__(self, on_line: Write, on_part: Write | None) -> None:
        self.on_line = on_line
        self.on_part = on_part
        self.held = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def take(self, more: bytes, tail: int | None = None) -> None:
        """What was read next (a character split between two reads is read whole); of its
        lines, the last ``tail`` alone, when given (the first read of ``logs -f --tail``)."""
        lines, self.held = held_back(self.held + self.decoder.decode(more))
        cut = lines.pop() if lines and not lines[-1].endswith("\n") else ""
        for line in last_lines(lines, tail):
            self.on_line(line)
        if cut:  # what of a line too long to hold went on: it has not ended
            (self.on_line if self.on_part is None else self.on_part)(cut)
        if self.on_part is not None and (at := redrawn_at(self.held)):
            self.on_part(self.held[:at])
            self.held = self.held[at:]

    def end(self, writing: bool = False) -> None:
        """The output ended, or what was written of it so far (the job still ``writing``):
        whatever is held goes out, in that case as :func:`while_writing` shows it."""
        rest = self.held + self.decoder.decode(b"", final=True)
        for line in while_writing([rest]) if writing else [rest] if rest else []:
            self.on_line(line)


def read_through(log: io.BufferedReader, on_line: Write, *, writing: bool) -> None:
    """Hand on each line of ``log`` from where it stands, a block at a time (the log of a
    long run may be gigabytes, which a read of it whole would hold in memory), a line too
    long to hold in parts (:func:`held_back`); the last not ended, of a job still
    ``writing``, as :func:`while_writing` shows it."""
    unended = Unended(on_line, None)
    while block := log.read1(TAIL_BLOCK):  # what there is, up to a block: a pipe need not fill one
        unended.take(block)
    unended.end(writing)


def read_lines_through(read: Callable[[Write, Write], int], on_line: Write, writing: bool) -> int:
    """Hand on each line ``read`` gives (each stream's to the one and the other it is given,
    the line each leaves unended last) as it comes, none of them held (the output of a long
    run may be gigabytes); those not ended, of a job still ``writing``, as
    :func:`while_writing` shows them. What ``read`` returned."""
    unended: list[str] = []

    def take(line: str) -> None:
        if line.endswith("\n"):
            on_line(line)
        else:
            unended.append(line)

    code = read(take, take)
    for line in apart(while_writing(unended) if writing else unended):
        on_line(line)
    return code


def apart(lines: list[str]) -> list[str]:
    """Output ``lines`` read as two streams, those they leave unended last (as
    :func:`taospec.proc.stream` hands them on), as every read of a job's output shows
    them, a follow's too: each but the last ended, so that the line one stream leaves
    unended is not joined to the other's."""
    return [line if line.endswith("\n") else f"{line}\n" for line in lines[:-1]] + lines[-1:]


def while_writing(lines: list[str]) -> list[str]:
    """A job's output ``lines`` as a look at it shows them while the job runs: a line that
    has not ended (the last; of output read as two streams, the last of each) only up to
    :func:`cut_at`, since a value the job is still writing would go out in part, where
    redaction cannot know it."""
    shown = (line if line.endswith("\n") else line[: cut_at(line)] for line in lines)
    return [line for line in shown if line]


def redrawn_at(text: str) -> int:
    """How much of ``text``, a line not ended yet, a follow shows before the line ends:
    through its last ``\\r`` (a progress bar redrawn in place) that is not past
    :func:`cut_at`, nor inside a value the line holds, nor after words a rule reads a value
    after (:func:`taospec.lint.apart_at`), so that redaction meets every value whole and
    finds in each part what it finds in the line; 0 when there is none such."""
    values = lint.known_values()
    end = min(cut_at(text), lint.apart_before(text))
    for _ in range(REDRAWN_TRIES):
        at = text.rfind("\r", 0, end) + 1
        if not at or _apart(text, at, values):
            return at
        end = at - 1
    return 0


REDRAWN_TRIES = 16
"""How many ``\\r`` of a line :func:`redrawn_at` and :func:`in_parts` try at most for one
cut (a line is read anew as it grows, so that a long one costs no more than a short one)."""


def _apart(text: str, at: int, values: list[str]) -> bool:
    """Whether ``text`` may be redacted in parts cut at ``at`` (no further than
    :func:`~taospec.lint.apart_before`): no value spans it, nor do the words a rule reads a
    value after come before it (:func:`~taospec.lint.apart_at`)."""
    inside = any(text.find(v, max(at - len(v) + 1, 0), at + len(v) - 1) >= 0 for v in values)
    return not inside and lint.apart_at(text, at)


PART_AT_LEAST = 64 * 1024
"""How long a part :func:`in_parts` cuts a long line into is at least."""


def in_parts(line: str, size: int = PART_AT_LEAST) -> list[str]:
    """A whole ``line`` in parts to redact one at a time, each of at least ``size``
    characters and ended by a ``\\r`` where the line may be cut as :func:`redrawn_at` cuts
    one (a progress bar redrawn for an hour is a line of megabytes, which redaction would
    otherwise read whole at once); the line itself when it is shorter or has none."""
    if len(line) <= size:
        return [line]
    values = lint.known_values()
    end = lint.apart_before(line)
    parts, start = [], 0
    while len(line) - start > size:
        at = line.find("\r", start + size, end) + 1
        for _ in range(REDRAWN_TRIES):
            if not at or _apart(line, at, values):
                break
            at = line.find("\r", at, end) + 1
        else:
            at = 0
        if not at:
            break
        parts.append(line[start:at])
        start = at
    parts.append(line[start:])
    return parts


def redacted_output(text: str) -> str:
    """A job's output ``text`` (a line, or a part of one) redacted, a long line a part at a
    time (:func:`in_parts`)."""
    return "".join(map(lint.redacted, in_parts(text)))


def redacted_block(pieces: list[str]) -> str:
    """Pieces of a job's output (lines, or parts of lines) redacted as
    :func:`redacted_output` redacts each, and joined: those read together as inert
    (:func:`taospec.lint.inert_pieces`) as they are, each of the others on its own."""
    inert = lint.inert_pieces(pieces)
    if all(inert):
        return "".join(pieces)
    return "".join(p if ok else redacted_output(p) for p, ok in zip(pieces, inert, strict=True))


class Redrawn:
    """What a follow shows of a line redrawn in place (a progress bar, which may not end
    its line for an hour), as a terminal shows it: of a stream's line not ended yet, each
    part through its last ``\\r`` as it comes, to ``on_part`` (:meth:`part`, up to
    :func:`redrawn_at`), and the line, once it ends, without what of it went before, to
    ``on_line`` (:meth:`line`). Each stream (stderr's: True) apart. A stream's parts are
    shown once it is open: from the start, or once one of its lines went on (the lines a
    follow leaves out come first)."""

    def __init__(self, on_line: Write, on_part: Write, open_from_start: Mapping[bool, bool]):
        self.on_line = on_line
        self.on_part = on_part
        self.open = dict(open_from_start)
        self.waiting: dict[bool, str | None] = {False: "", True: ""}  # parts not shown yet
        # (None: the line holds what no part may end after, and goes out whole)
        self.shown: dict[bool, list[str]] = {False: [], True: []}
        self.replayed = {False: "", True: ""}  # what was shown, still to come again

    def again(self, error: bool) -> None:
        """The stream is read again from a line before the one not ended yet (brev runs a
        read again when its connection drops): its parts come again, and what of them was
        shown is not shown twice."""
        self.replayed[error] = "".join(self.shown[error])
        if self.waiting[error] is not None:
            self.waiting[error] = ""

    def part(self, error: bool, text: str) -> None:
        """A part of the stream's line not ended yet, through a ``\\r``."""
        replayed = self.replayed[error]
        if replayed:  # what comes again first, as it was shown
            again = min(len(replayed), len(text))
            if text[:again] != replayed[:again]:  # not the line shown: the rest goes whole
                self.replayed[error], self.waiting[error] = "", None
                return
            self.replayed[error], text = replayed[again:], text[again:]
        before = self.waiting[error]
        if not self.open[error] or before is None or not text:
            return
        waiting = before + text
        at = redrawn_at(waiting)
        if at:
            self.shown[error].append(waiting[:at])
            self.on_part(waiting[:at])
        rest = waiting[at:]
        seal = lint.apart_before(rest)  # no part of the line ends past it: none is kept
        self.waiting[error] = None if seal < len(rest) and "\r" not in rest[:seal] else rest

    def line(self, error: bool) -> Write:
        """What takes the stream's lines, each whole, as they end."""

        def take(text: str) -> None:
            shown = "".join(self.shown[error])
            self.shown[error].clear()
            self.waiting[error] = ""
            self.replayed[error] = ""
            self.open[error] = True
            self.on_line(text[len(shown) :] if text.startswith(shown) else text)

        return take


def cut_at(line: str) -> int:
    """Where a line not ended yet is cut, to hand on what is before: before its last
    characters that could begin a value redaction removes, and before the end that a rule
    may yet find a token in (:func:`taospec.lint.still_open`); one written across the
    line's end is then redacted whole, with the rest of its line. Never inside a value the
    line holds whole, nor after what a rule reads a value that runs on from
    (:func:`taospec.lint.apart_before`), nor after words a rule reads a value after
    (:func:`taospec.lint.apart_at`): a word at a time back from there, 0 when none such is
    found within :data:`REDRAWN_TRIES` words."""
    values = lint.known_values()
    last = max(len(line) - max(map(len, values), default=1) + 1, 0)
    cut = min(last, lint.still_open(line), lint.apart_before(line))
    for _ in range(REDRAWN_TRIES):
        # a value that starts before the cut and ends after it moves the cut to it
        found = [line.find(v, max(cut - len(v) + 1, 0), cut + len(v) - 1) for v in values]
        crossing = [start for start in found if start >= 0]
        if crossing:
            cut = min(crossing)
        elif cut == 0 or lint.apart_at(line, cut):
            return cut
        else:  # to the start of the word before
            start = max(cut - lint.OPEN_AT_MOST, 0)
            before = line[start:cut].rstrip()
            words = before.split()
            cut = start + len(before) - len(words[-1]) if words else 0
    return 0
