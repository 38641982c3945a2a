"""Hydra's overrides on a TAO entrypoint's command line (``train.num_epochs=10``).

A TAO entrypoint (``deformable_detr train -e spec.yaml``) reads its action and the spec
file with argparse, joins every other word with spaces and splits the line again as a
shell does (``shlex.split``), and hands the words it gets to the action's script, whose
Hydra reads each ``key=value`` as an override of the spec, in Hydra's own grammar, once
the job has started. :func:`given` finds those words in a command, as Hydra gets them;
:func:`override` reads one (how it changes the spec, its key, its value, and whether
Hydra reads the value as a sweep, which only a multirun takes); :func:`typed` says what
Hydra makes of a plain value (an int, a float, text...). Which keys the spec holds and
what type each takes, a skill's schema says (:mod:`taospec.taoschema`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from taospec import braces

_DIGITS = r"[0-9](?:_?[0-9])*"
_UNSIGNED = r"(?:0|[1-9](?:_?[0-9])*)"
_NAME = r"[A-Za-z_$][\w$-]*"
_WORD = re.compile(
    rf"(?P<how>~|\+\+?)?(?P<key>(?:{_NAME}|{_UNSIGNED})(?:\.(?:{_NAME}|{_UNSIGNED}))+|{_NAME})"
    r"(?:=[ \t]*(?P<value>.*))?",
    re.ASCII | re.DOTALL,
)
"""An override's word: ``~`` (delete), ``+`` (add) or ``++`` (add or set), a dotted key,
and ``=`` and the value (Hydra skips blanks after the ``=``). A key naming a config group
(``a/b``) or a package (``@pkg``) is none of a TAO spec's: :func:`group` reads those."""

_ID = r"[A-Za-z_][\w-]*"
_GROUP = re.compile(
    rf"(?P<how>~|\+\+?)?(?P<key>{_ID}(?:/{_ID})+|(?:{_NAME}|{_UNSIGNED})(?:\.(?:{_NAME}|{_UNSIGNED}))*)?"
    rf"(?:@(?P<package>{_NAME}|(?:{_NAME}|{_UNSIGNED})(?:\.(?:{_NAME}|{_UNSIGNED}))+|))?(?P<rest>=.*)?",
    re.ASCII | re.DOTALL,
)
"""An override of a config group (``model/backbone=x``) or of a package (``key@pkg=x``)."""

_ESCAPED = frozenset("\\()[]{}:=, \t")
"""What a backslash escapes in a value; before anything else it is a character itself."""
_OPEN, _CLOSE = "([{", ")]}"
_CALL = re.compile(r"([A-Za-z_][\w-]*)[ \t]*\((.*?)[ \t]*\)", re.ASCII | re.DOTALL)
_NAMED = re.compile(r"[A-Za-z_][\w-]*[ \t]*=", re.ASCII)
_SWEEPS = frozenset({"choice", "range", "interval", "glob"})
"""Hydra's functions that make a sweep."""
_OF_VALUES = frozenset({"sort", "shuffle", "str", "int", "float", "bool", "json_str"})
"""Hydra's functions that make a sweep of several values, or of a sweep."""

_POINT = rf"(?:{_UNSIGNED}\.|{_UNSIGNED}?\.{_DIGITS})"
_PRIMITIVES = (
    (re.compile(rf"[+-]?{_UNSIGNED}", re.ASCII), int),
    (
        re.compile(rf"[+-]?(?:{_POINT}|(?:{_UNSIGNED}|{_POINT})[eE][+-]?{_DIGITS}|(?i:inf|nan))"),
        float,
    ),
    (re.compile(r"(?i:true|false)"), lambda text: text.lower() == "true"),
    (re.compile(r"(?i:null)"), lambda text: None),
)
"""Hydra's typed primitives: an integer, a float, a boolean and null, each a whole value."""
UNREAD = object()
"""What :func:`typed` gives a value whose type only Hydra's evaluation tells."""


@dataclass(frozen=True, slots=True)
class Override:
    """One override: how it changes the spec (``""`` sets a key it holds), the dotted key,
    its value (blanks after the ``=`` left out), and whether Hydra reads the value as a
    sweep, and as values listed with commas (``a,b``)."""

    how: str
    key: str
    value: str
    sweep: bool
    listed: bool


SPEC_OPTION = "--experiment_spec_file"
"""The long spelling of a TAO entrypoint's ``-e``; argparse takes any start of it from
``--e`` on, and the value as the next word or after ``=``."""
CONFIG_PATH = "{config_path}"


@dataclass(frozen=True, slots=True)
class Given:
    """A word of a command that a TAO entrypoint passes on to Hydra: its ``index`` in the
    command and the ``word`` as written, the words Hydra gets of it (``pieces``; None where
    the entrypoint cannot split it: an unclosed quote, a backslash at its end), and one of
    them, ``passed``, read as an override (``read``; None where it is none)."""

    index: int
    word: str
    pieces: tuple[str, ...] | None
    passed: str
    read: Override | None

    @property
    def split(self) -> bool:
        """Whether Hydra gets other words than the one written."""
        return self.pieces != (self.word,)

    @property
    def shown(self) -> str:
        """The word as a message names it, with what Hydra gets of it where that differs."""
        if not self.split:
            return repr(self.word)
        got = " and ".join(map(repr, self.pieces)) if self.pieces else "nothing"
        return f"{self.word!r} ({RESPLIT}, so Hydra gets {got})"


RESPLIT = "TAO's entrypoint joins the words it passes on and splits them again as a shell does"


def given(words: Sequence[object], action: object) -> Iterator[Given]:
    """What a job's command passes to Hydra through a TAO entrypoint: a command whose
    entrypoint reads ``{config_path}`` as its spec file after the action (``dino train -e
    {config_path}``, also after ``tao model``; the last spec file argparse reads is the one
    used; none is read after ``--``) passes each other word after the action, as the
    entrypoint splits it again (:data:`RESPLIT`). Any other command's words are its own."""
    entry = action_at(words, action)
    if entry is None:
        return
    options_end = next((at for at in range(entry, len(words)) if words[at] == "--"), len(words))
    taken: dict[int, tuple[int, object]] = {}
    at = entry + 1
    while at < options_end:  # a value the option takes is no option of its own
        found = _spec_words(words, at)
        if found:
            taken[at] = found
        at += found[0] if found else 1
    files = [file for _, file in taken.values()]
    if not files or files[-1] != CONFIG_PATH or None in files:  # None: argparse stops there
        return
    skip = {at + n for at, (count, _) in taken.items() for n in range(count)}
    for index in range(entry + 1, len(words)):
        word = words[index]
        if index in skip or not isinstance(word, str):
            continue
        try:
            pieces = (word,) if word and not _SPLITS.search(word) else tuple(shlex.split(word))
        except ValueError:
            yield Given(index, word, None, word, None)
            continue
        for piece in pieces:
            yield Given(index, word, pieces, piece, override(braces.fill(piece, str)))


def action_at(words: Sequence[object], action: object) -> int | None:
    """Where a command's ``words`` name ``action`` after the TAO entrypoint that runs it
    (``dino train``, also ``tao model dino train``): the first such word after the first;
    None where none does."""
    return next((at for at in range(1, len(words)) if words[at] == action), None)


_SPLITS = re.compile(r"[\s'\"\\]")
"""What ``shlex.split`` reads as other than the word's own text: a blank, a quote, a
backslash (it reads no ``#`` as a comment)."""


def _spec_words(words: Sequence[object], at: int) -> tuple[int, object] | None:
    """How many words from ``at`` give a TAO entrypoint its spec file, and the file, as
    argparse reads its ``-e``/``--experiment_spec_file`` (``-e X``, ``-eX``, ``-e=X``, and
    any start of the long option from ``--e`` on, followed by `` X`` or ``=X``; the file
    None where argparse finds none and stops); None where the word is no such option."""
    word = words[at]
    following = words[at + 1] if at + 1 < len(words) else None
    if isinstance(following, str) and following[:1] == "-" and not _NEGATIVE.fullmatch(following):
        following = None  # argparse takes no option word for a value: it stops there
    if not isinstance(word, str):
        return None
    if word.startswith("--"):
        name, equals, value = word.partition("=")
        if len(name) < 3 or not SPEC_OPTION.startswith(name):
            return None
        return (1, value) if equals else (2, following)
    if word.startswith("-e"):
        glued = word[2:]
        return (1, glued.removeprefix("=")) if glued else (2, following)
    return None


_CFG = ("job", "hydra", "all")
_INFO = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
HYDRA_OPTIONS: dict[str, tuple[int | str, tuple[str, ...]]] = {
    "--help": (0, ()), "-h": (0, ()), "--hydra-help": (0, ()), "--version": (0, ()),
    "--cfg": (1, _CFG), "-c": (1, _CFG), "--resolve": (0, ()), "--package": (1, ()),
    "-p": (1, ()), "--run": (0, ()), "-r": (0, ()), "--multirun": (0, ()), "-m": (0, ()),
    "--shell-completion": (0, ()), "-sc": (0, ()), "--config-path": (1, ()), "-cp": (1, ()),
    "--config-name": (1, ()), "-cn": (1, ()), "--config-dir": (1, ()), "-cd": (1, ()),
    "--experimental-rerun": (1, ()), "--info": ("?", _INFO), "-i": ("?", _INFO),
}  # fmt: skip
"""The options of Hydra's own argument parser (Hydra 1.3), which reads what a TAO
entrypoint passes on: the words each takes ("?": the next, unless an option) and the
values it takes, where it names them."""
_NEGATIVE = re.compile(r"-[0-9]+|-[0-9]*\.[0-9]+")
"""What argparse reads as a negative number, not an option, in a parser with no such option."""


def unread(passed: Sequence[Given]) -> Iterator[tuple[Given, str]]:
    """Each word of what a TAO entrypoint ``passed`` to Hydra that Hydra's argument parser
    refuses, with why: an option it has not (or a start of several), a value its option
    does not take, or a word it reads as an override of the spec that is none
    (``key=value``, ``~key``, or a config group's choice, :func:`group`)."""
    taker: tuple[Given, str] | None = None  # the option the next word may be the value of
    ended = False  # after "--", every word is an override
    run = 0  # argparse takes the overrides as one run of words: 1 in it, 2 past it
    for each in passed:
        piece = each.passed
        option = not ended and piece[:1] == "-" and len(piece) > 1
        option = option and not _NEGATIVE.fullmatch(piece)
        if taker is not None:
            if each.pieces is not None and not option:
                if why := _refused_value(taker[1], piece):
                    yield each, why
                taker = None
                continue
            if HYDRA_OPTIONS[taker[1]][0] == 1:
                yield taker[0], f"Hydra's option {taker[1]} takes a value, and gets none"
            taker = None
        if each.pieces is None:
            continue
        if option and piece != "--":
            why, takes = _option(piece)
            if why:
                yield each, why
            taker = (each, takes) if takes else None
            run = 2 if run else 0
            continue
        marker, ended = piece == "--" and not ended, ended or piece == "--"
        if run == 2:
            yield each, _ONE_RUN
        elif not marker and each.read is None and group(piece) is None:
            yield each, f"Hydra reads {piece!r} as an override of the spec, and it is no key=value"
        run = max(run, 1)
    if taker is not None and HYDRA_OPTIONS[taker[1]][0] == 1:
        yield taker[0], f"Hydra's option {taker[1]} takes a value, and gets none"


_ONE_RUN = (
    "Hydra's argument parser takes the key=value words as one run, and an option before "
    "this word ended it; put the options before or after all of them"
)


def _option(piece: str) -> tuple[str | None, str | None]:
    """Why Hydra's argument parser refuses the option word ``piece`` (None where it takes
    it), and the option whose value the next word may be (None for none)."""
    known = _hydra_option(piece)
    name = piece.partition("=")[0]
    if known == []:
        return f"Hydra's argument parser has no option {name}", None
    if isinstance(known, list):
        return f"Hydra's argument parser finds {name} ambiguous ({', '.join(known)})", None
    option, value = known
    if value is None:
        return None, option if HYDRA_OPTIONS[option][0] else None
    if HYDRA_OPTIONS[option][0] == 0:
        return f"Hydra's option {option} takes no value", None
    return _refused_value(option, value), None


def multirun(passed: Sequence[Given]) -> bool:
    """Whether what a TAO entrypoint ``passed`` to Hydra asks it for a multirun (``-m``,
    ``--multirun``, or ``-m`` among short flags, ``-rm``)."""
    return any(option == "--multirun" for _, option in _options(passed))


def _options(passed: Sequence[Given]) -> Iterator[tuple[Given, str | None]]:
    """What Hydra's argument parser takes from each word a TAO entrypoint ``passed`` to it,
    but an option's value: an option, by its long name (``-rm`` gives ``--run`` and
    ``--multirun``), or None for a word it reads as an override (all after ``--``)."""
    value_next = False
    ended = False
    for each in passed:
        piece = each.passed
        known = _hydra_option(piece) if piece[:1] == "-" and not ended else []
        if value_next and isinstance(known, list):
            value_next = False
            continue
        if piece == "--" and not ended:
            ended = True
            continue
        if isinstance(known, list):
            yield each, None
            continue
        option, value = known
        flags = piece[2:] if piece[:2] != "--" and HYDRA_OPTIONS[option][0] == 0 else ""
        for name in (option, *(f"-{flag}" for flag in flags)):
            yield each, _LONG.get(name, name)
        value_next = value is None and HYDRA_OPTIONS[option][0] != 0


_LONG = {
    "-h": "--help", "-c": "--cfg", "-p": "--package", "-r": "--run", "-m": "--multirun",
    "-sc": "--shell-completion", "-cp": "--config-path", "-cn": "--config-name",
    "-cd": "--config-dir", "-i": "--info",
}  # fmt: skip
_PRINTS = {
    "--help": "the app's help", "--hydra-help": "its own help", "--version": "its version",
    "--cfg": "the config", "--info": "what it knows of the run",
    "--shell-completion": "a shell's completion script",
}  # fmt: skip
"""Hydra's options that print something and end the run before the action starts."""
_NOT_RUN = (
    "and exits 0 before the action runs, so the job would end COMPLETE having run nothing; "
    "taospec render shows the spec file TAO reads"
)
_UNRUN = {
    "--multirun": (
        "Hydra's multirun runs the action in a folder of its own (multirun/<date>/<time>/0 "
        "in the container's working folder), outside the job's results, and taospec runs "
        "one job a record; leave it out (for one job a value, make the job a pipeline "
        "target with matrix:)"
    ),
    "--resolve": (
        "Hydra takes --resolve only with --cfg or --help, and stops the run with an error "
        "otherwise; leave it out"
    ),
    "--package": "Hydra reads --package only with --cfg, so it does nothing; leave it out",
    "--experimental-rerun": (
        "TAO's hydra_runner starts Hydra's run itself, past the code that reads "
        "--experimental-rerun, so it does nothing; leave it out"
    ),
    **dict.fromkeys(
        ("--config-path", "--config-name"),
        "TAO's entrypoint gives Hydra the spec file from -e as --config-path and "
        "--config-name, and argparse takes the last: this option would have Hydra read "
        "another config than the spec file the plan shows; set keys of the spec instead",
    ),
}
"""Hydra's options, other than :data:`_PRINTS`, that TAO's run does not take as asked."""
_SET_AGAIN = (
    "after the words its entrypoint passes on, and Hydra takes the last setting, so this one "
    "does nothing; leave it out"
)
TAO_SETS = ("hydra.output_subdir", "hydra/job_logging", "hydra.run.dir")
"""What TAO's ``hydra_runner`` sets after the words its entrypoint passes on, each
replacing a setting of the same among them (``hydra.run.dir=.``)."""
_HELP = "--help"
"""The one long option of a TAO entrypoint's argparse but ``-e``'s (``-h`` is its short
spelling); it takes any start of it from ``--h`` on."""


def unrun(passed: Sequence[Given]) -> Iterator[tuple[Given, str]]:
    """Each word of what a TAO entrypoint ``passed`` to Hydra that its argument parser
    takes, but that makes TAO's run other than the run of the action the job shows, with
    why: the entrypoint's own ``-h`` (its help), Hydra's options that print and exit
    (:data:`_PRINTS`) or that TAO's run does not take as asked (:data:`_UNRUN`), and a
    setting TAO's ``hydra_runner`` sets again after them (:data:`TAO_SETS`)."""
    taken = list(_options(passed))
    shows = any(option in ("--cfg", "--help") for _, option in taken)
    raw_options = True  # the entrypoint's argparse reads option words up to a "--"
    for each in passed:
        raw_options = raw_options and each.word != "--"
        if raw_options and each.word[:1] == "-" and _entry_help(each.word):
            yield (
                each,
                f"TAO's entrypoint reads it as its own --help: it prints its usage {_NOT_RUN}",
            )
    for each, option in taken:
        if option is None:
            if (key := _tao_set(each)) is not None:
                yield each, f"TAO's hydra_runner sets {key} itself {_SET_AGAIN}"
        elif _entry_help(each.word):
            continue  # the entrypoint's help: said above
        elif option in _PRINTS:
            yield each, f"Hydra's {option} prints {_PRINTS[option]} {_NOT_RUN}"
        elif option in _UNRUN and not (shows and option in ("--resolve", "--package")):
            yield each, _UNRUN[option]


def undone(passed: Sequence[Given]) -> Iterator[tuple[Given, Given, str]]:
    """Each override among what a TAO entrypoint ``passed`` to Hydra that later ones undo,
    so that Hydra reads the spec as it would without it, with a later one and what it
    does: a set (``key=``; a mapping sets each key it holds) of keys all set again (Hydra
    takes the last) or deleted (``~``, also of a mapping holding them), and an add
    (``+key=``, or ``++key=``, which adds a key the spec lacks) of keys a ``++`` sets
    again."""
    later_sets: dict[str, tuple[Given, str]] = {}  # a key, the first word after that sets it
    later_deletes: dict[str, Given] = {}
    for each in reversed(passed):
        read = each.read
        if read is None or read.sweep:
            continue
        how = read.how
        keys = [read.key] if how == "~" else list(_leaves(read.key, typed(read.value)))
        found = [later_sets[key] for key in keys if key in later_sets]
        gone = [at for key in keys if (at := _deleted(key, later_deletes))]
        if not keys:
            pass  # an empty mapping merges nothing
        elif how == "" and len(gone) == len(keys):
            yield each, later_deletes[gone[0]], f"deletes {gone[0]}"
        elif len(found) == len(keys) and how != "~" and _overwritten(how, found):
            what = keys[0] if len(keys) == 1 else "each key it sets"
            yield each, found[0][0], f"sets {what} again, and Hydra takes the last"
        if how == "~":  # what is set after it sets what the delete left: nothing before
            later_deletes[read.key] = each
            below = [key for key in later_sets if _deleted(key, {read.key: each})]
            for key in below:
                del later_sets[key]
        for key in keys:
            if how in ("", "++"):
                later_sets[key] = (each, how)
            else:
                later_sets.pop(key, None)


def _overwritten(how: str, later: list[tuple[Given, str]]) -> bool:
    """Whether the ``later`` sets of what a word sets (``how``) leave nothing of it: a set
    may need the key a ``+`` or ``++`` adds, a ``++`` does not."""
    return how == "" or all(set_how == "++" for _, set_how in later)


def _leaves(key: str, value: object) -> Iterator[str]:
    """The keys a value set at ``key`` sets: ``key``, or each key a mapping holds."""
    if not isinstance(value, dict):
        yield key
        return
    for name, item in value.items():
        yield from _leaves(f"{key}.{name}", item)


def _deleted(key: str, deletes: dict[str, Given]) -> str | None:
    """The key of ``deletes`` that is ``key`` or a mapping holding it, if any."""
    parts = key.split(".")
    return next(
        (at for n in range(1, len(parts) + 1) if (at := ".".join(parts[:n])) in deletes), None
    )


def _entry_help(word: str) -> bool:
    return word == "-h" or (len(word) > 2 and _HELP.startswith(word))


def _tao_set(each: Given) -> str | None:
    """The setting of :data:`TAO_SETS` the word ``each`` passes to Hydra, if any."""
    read = each.read
    if read is not None:
        return read.key if read.key in TAO_SETS else None
    named = group(each.passed)
    return named if named in TAO_SETS else None


def _refused_value(option: str, value: str) -> str | None:
    choices = HYDRA_OPTIONS[option][1]
    if not choices or value in choices:
        return None
    return f"Hydra's option {option} takes {', '.join(choices)}, not {value!r}"


def _hydra_option(piece: str) -> tuple[str, str | None] | list[str]:
    """The option of Hydra's argument parser an option word is, as argparse reads it, and
    the value the word gives it (``--cfg=job``, ``-cjob``; None where it gives none): the
    option of that name, the one long option it starts, or the short one it starts with
    (flags, ``-rm``, are each a short one); else the options it starts, none or several."""
    name, equals, value = piece.partition("=")
    if name in HYDRA_OPTIONS:
        return name, value if equals else None
    if piece.startswith("--"):
        starts = [option for option in HYDRA_OPTIONS if option.startswith(name)]
        return (starts[0], value if equals else None) if len(starts) == 1 else starts
    short, glued = piece[:2], piece[2:]
    if short not in HYDRA_OPTIONS:
        starts = [option for option in HYDRA_OPTIONS if option.startswith(piece)]
        return (starts[0], None) if len(starts) == 1 else []
    if HYDRA_OPTIONS[short][0] != 0:
        return short, glued.removeprefix("=")
    if all(f"-{flag}" in HYDRA_OPTIONS for flag in glued):
        return short, None  # flags, one after another (a value's option among them aside)
    return []


def group(word: str) -> str | None:
    """The config group or package ``word`` names (``model/backbone``, ``train@pkg``) where
    Hydra reads it as an override of one; None for any other word."""
    found = _GROUP.fullmatch(word)
    if found is None or (found["rest"] is None and found["how"] != "~"):
        return None
    key = found["key"] or ""
    if found["package"] is None and "/" not in key:
        return None
    return key + ("" if found["package"] is None else f"@{found['package']}")


def override(word: str) -> Override | None:
    """``word`` read as a Hydra override, or None when it is none (an option, a path)."""
    found = _WORD.fullmatch(word)
    if found is None or (found["value"] is None and found["how"] != "~"):
        return None
    value = found["value"] or ""
    listed = len(_elements(value)) > 1
    return Override(found["how"] or "", found["key"], value, listed or _sweep(value), listed)


def typed(value: str) -> object:
    """What Hydra makes of an override's ``value`` that is no sweep, where its type is
    plain: an int, float, bool or None, a text (quoted, or none of those), a list (empty,
    standing for its kind) or a mapping (its keys and values typed); :data:`UNREAD` for a
    function's result (``int(5)``) and for an interpolation, which OmegaConf resolves later."""
    text = value.strip(" \t")
    if "${" in text or _CALL.fullmatch(text):
        return UNREAD
    if text[:1] == "[":
        return []
    if text[:1] == "{":
        return dict(_items(text[1:-1]))
    for pattern, make in _PRIMITIVES:
        if pattern.fullmatch(text):
            return make(text)
    if text[:1] in ("'", '"') and _quote_end(text, 0) == len(text) - 1:
        return text[1:-1]
    return _unescaped(value.lstrip(" \t"))


def _items(inside: str) -> Iterator[tuple[object, object]]:
    """The keys and values of the mapping ``{inside}`` as Hydra types them: a key that
    reads as an int, float, bool or null is one (``{1: a}``), any other is text; each
    value as :func:`typed` reads it."""
    for element in filter(None, _elements(inside)):
        found = _DICT_KEY.match(element)
        key = found[0] if found else ""
        yield _key(key.strip(" \t")), typed(element[len(key) + 1 :])


_DICT_KEY = re.compile(r"(?:\\.|[^:\\])*", re.DOTALL)
"""A mapping's key: all before the first ``:`` no backslash escapes."""


def _key(text: str) -> object:
    """A mapping's key as Hydra types it: an int, float, bool or null, else its text."""
    for pattern, make in _PRIMITIVES:
        if pattern.fullmatch(text):
            return make(text)
    return _unescaped(text)


def _unescaped(text: str) -> str:
    """Unquoted text as Hydra reads it: each escape (``\\,``) the character it escapes, the
    blanks at its end left out unless escaped."""
    read: list[str] = []
    kept, at = 0, 0
    while at < len(text):
        if text[at] == "\\" and text[at + 1 : at + 2] in _ESCAPED:
            read.append(text[at + 1])
            at += 2
            kept = len(read)
            continue
        read.append(text[at])
        at += 1
        if read[-1] not in " \t":
            kept = len(read)
    return "".join(read[:kept])


def _sweep(value: str) -> bool:
    """Whether Hydra reads ``value`` as a sweep: values listed with commas, a sweep
    function, or a cast, sort or tag of several values or of a sweep."""
    elements = _elements(value)
    if len(elements) != 1:
        return len(elements) > 1
    call = _CALL.fullmatch(elements[0])
    if call is None:
        return False
    function = call[1]
    arguments = [a for a in _elements(call[2]) if a and not _NAMED.match(a)]
    if function in _SWEEPS or (function == "shuffle" and not arguments):  # nothing, shuffled
        return True
    if function == "tag":  # tags, then what they tag
        return bool(arguments) and _sweep(arguments[-1])
    return function in _OF_VALUES and (len(arguments) > 1 or any(map(_sweep, arguments)))


_FUNCTIONS = ("int", "str", "bool", "float", "choice", "range", "interval", "tag", "sort",
              "shuffle", "glob")  # fmt: skip
"""The functions Hydra's override grammar calls (``int(5)``, ``choice(a,b)``)."""
_FUNCTION = re.compile(r"([A-Za-z_][\w-]*)[ \t]*\([ \t]*", re.ASCII)
_ARGUMENT_NAME = re.compile(r"[A-Za-z_][\w-]*[ \t]*=[ \t]*", re.ASCII)
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/\\+.$%*@?|:")
"""What unquoted text of a value is made of, with blanks and escapes (:data:`_ESCAPED`)."""
_ENDS = frozenset(",)]}=(")
"""What ends unquoted text where blanks stand before it."""


_READ = _PLAIN | frozenset(" \t'\",()[]{}=")
_UNREAD = (
    "Hydra reads unquoted text of ASCII letters, digits, blanks, escapes and _-/\\+.$%*@?|: "
    "alone; put the value in quotes Hydra reads ('...'), inside the command's own quoting"
)


class _Misread(Exception):
    """Where and why Hydra's override grammar cannot read a value."""


def misread(value: str) -> str | None:
    """Why Hydra's override grammar cannot read ``value``, an override's value from its
    first character that is no blank, or None where it can: a value is text (unquoted, of
    ASCII letters, digits, blanks, escapes, ``${...}`` and ``_-/\\+.$%*@?|:``; or quoted
    whole), a list, a mapping, a call of a function Hydra has, or such values listed with
    commas. What a function makes of its arguments Hydra tells at run."""
    reader = _Reader(value)
    try:
        if value:
            reader.element()
            while reader.comma():
                reader.element()
            if reader.at < len(value):
                raise reader.fail("a value ends here, or another follows a comma")
    except _Misread as why:
        return str(why)
    return None


class _Reader:
    """A value read as Hydra's override grammar reads it, a character at a time."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def fail(self, wanted: str) -> _Misread:
        if self.at == len(self.text):
            return _Misread(f"at its end: {wanted}")
        char = self.text[self.at]
        return _Misread(
            f"at {char!r} (character {self.at + 1}): {_UNREAD if char not in _READ else wanted}"
        )

    def blanks(self) -> None:
        while self.text[self.at : self.at + 1] in (" ", "\t"):
            self.at += 1

    def next_is(self, char: str) -> bool:
        """Whether ``char`` comes next, after any blanks; if so, both are read."""
        start = self.at
        self.blanks()
        if char and self.text.startswith(char, self.at):
            self.at += 1
            if char not in _CLOSE:  # blanks after it are its own; after a closer, the next's
                self.blanks()
            return True
        self.at = start
        return False

    def expect(self, char: str, wanted: str) -> None:
        if not self.next_is(char):
            raise self.fail(wanted)

    def comma(self) -> bool:
        return self.next_is(",")

    def element(self) -> None:
        char = self.text[self.at : self.at + 1]
        if char in ("[", "{"):
            self.at += 1
            self.blanks()
            self._container(char)
        elif char in ("'", '"'):
            end = _quote_end(self.text, self.at)
            if end is None:
                raise self.fail("a quote that is not closed")
            self.at = end + 1
        elif call := _FUNCTION.match(self.text, self.at):
            if call[1] not in _FUNCTIONS:
                raise self.fail(f"Hydra has no function {call[1]} ({', '.join(_FUNCTIONS)})")
            self.at = call.end()
            if not self.next_is(")"):
                self._arguments()
        elif not self._unquoted(key=False):
            raise self.fail("a value, which is missing")

    def _container(self, opened: str) -> None:
        closing = "]" if opened == "[" else "}"
        if self.next_is(closing):
            return
        while True:
            if opened == "{":
                if not self._unquoted(key=True):
                    raise self.fail("a key of the mapping, unquoted, without ${...}")
                self.expect(":", "a : after the mapping's key")
            self.element()
            if self.next_is(closing):
                return
            self.expect(",", f"a comma, or the {closing} that closes the {opened}")

    def _arguments(self) -> None:
        while True:
            named = _ARGUMENT_NAME.match(self.text, self.at)
            self.at = named.end() if named else self.at
            self.element()
            if self.next_is(")"):
                return
            self.expect(",", "a comma, or the ) that closes the call")

    def _unquoted(self, *, key: bool) -> bool:
        """Read unquoted text (a mapping's ``key``: no ``:``, no ``${...}``); whether any."""
        text, start = self.text, self.at
        while self.at < len(text):
            char = text[self.at]
            if char in " \t":
                after = self.at
                while text[after : after + 1] in (" ", "\t"):
                    after += 1
                if after == len(text) or text[after] not in _ENDS:
                    self.at = after
                    continue
                break
            if char == "\\":
                self.at += 2 if text[self.at + 1 : self.at + 2] in _ESCAPED else 1
            elif (
                text.startswith("${", self.at) and not key and text.find("}", self.at) > self.at + 2
            ):
                self.at = text.find("}", self.at) + 1
            elif char in _PLAIN and not (key and char == ":"):
                self.at += 1
            else:
                break
        return self.at > start


def _elements(value: str) -> list[str]:
    """``value`` cut at each comma outside any brackets, quotes or ``${...}``, and not
    escaped (Hydra's ``1,2``); whole when Hydra cannot read its quotes."""
    elements, depth, start, at = [], 0, 0, 0
    while at < len(value):
        char = value[at]
        if char == "\\":
            at += 2 if value[at + 1 : at + 2] in _ESCAPED else 1
            continue
        if char in "'\"":
            end = _quote_end(value, at)
            if end is None:
                return [value]  # Hydra cannot read the value at all: its own message says so
            at = end
        elif value.startswith("${", at):
            end = value.find("}", at)
            at = end if end != -1 else at + 1
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == "," and depth == 0:
            elements.append(value[start:at].strip(" \t"))
            start = at + 1
        at += 1
    return [*elements, value[start:].strip(" \t")]


def _quote_end(value: str, at: int) -> int | None:
    """Where the quoted text opened at ``at`` ends: the next same quote that an even number
    of backslashes stands before."""
    quote = value[at]
    end = value.find(quote, at + 1)
    while end != -1:
        backslashes = len(value[at + 1 : end]) - len(value[at + 1 : end].rstrip("\\"))
        if backslashes % 2 == 0:
            return end
        end = value.find(quote, end + 1)
    return None
