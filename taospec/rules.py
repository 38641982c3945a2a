"""The rules a JSON Schema cannot say: each finds problems in one parsed job, with their places.

:func:`check` runs the schema, then every rule, and returns every problem
found: GPU counts, dotted spec keys, secrets in ``env.set``, placeholders,
mounts, platform options and the image's versions key.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from taospec import (
    braces,
    dockerargs,
    identity,
    interpolations,
    lint,
    overrides,
    placeholders,
    schema,
    yamlsrc,
)
from taospec.diagnostics import JsonPath, Problem, closest, unique
from taospec.job import MISSING, PYXIS, SPEC_FILE, results_seen_at, slurm_container
from taospec.jobids import id_like
from taospec.versions import Images
from taospec.yamlsrc import Source

GPU_COUNT_MESSAGE = (
    "GPUs are chosen by id, not by count: a count always lands on the first devices, so on a "
    "shared host every job piles onto GPU 0 while the others sit idle. List the ids to use, "
    "e.g. [0, 1] (see nvidia-smi), or write 'all'"
)


RESULTS_TARGET = "/results"


MULTI_NODE_REFUSALS = {
    "brev": (
        "multi-node is not supported on Brev: instances are independent machines with no "
        "cross-instance coordination; use one instance with several GPUs (gpus: [0, 1, ...]) "
        "or a cluster platform"
    ),
    "docker": "a Docker host is one node; use several GPUs on it, or a cluster platform",
    "local": "a local process runs on this one machine; use a cluster platform for more nodes",
}


UNSET_IMAGE_MESSAGE = (
    f"not set yet ({MISSING}): set image: to the container image to run, a full reference "
    "(registry/repository:tag) or {versions_key: <a key of versions.yaml>}"
)


def check(
    source: Source,
    images: Images,
    known: tuple[str, ...] = placeholders.JOB_PLACEHOLDERS,
    definition: str | None = None,
    upstream: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Every problem in ``source``: schema violations first, then the rules beyond it.

    ``images`` resolves versions keys (pass the one :func:`build_job` gets);
    ``known`` are the placeholders its values may use; ``definition`` names
    the schema's ``$defs`` entry to check against (default: the whole file);
    ``upstream`` gives each ``needs.<target>.results_dir`` at its longest.
    """
    problems = schema_problems(source, definition)
    problems += list(_rules(source, images, known, upstream or {}))
    return unique(problems)


def schema_problems(source: Source, definition: str | None = None) -> list[Problem]:
    """The schema's problems in ``source`` (checked against ``definition``), those of a GPU
    count and of an image left ``???`` said in the words that tell a person what to do."""
    return [_reword(source, p) for p in schema.validate(source, definition)]


def _reword(source: Source, problem: Problem) -> Problem:
    path = problem.path
    if "spec" in path or problem.message.startswith("unknown key"):  # spec: keys are the skill's
        return problem
    if "gpus" in path:
        at = path[: path.index("gpus") + 1]
        if _is_integer(_value_at(source.data, at)):
            return source.problem(at, GPU_COUNT_MESSAGE)
    if path[-1:] == ("image",) and _value_at(source.data, path) == MISSING:
        return source.problem(path, UNSET_IMAGE_MESSAGE)
    return problem


def _is_integer(value: object) -> bool:
    """An integer as JSON Schema counts one: ``2`` or ``2.0``, never ``true``."""
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def _rules(
    source: Source, images: Images, known: tuple[str, ...], upstream: Mapping[str, str]
) -> Iterator[Problem]:
    yield from _nul_bytes(source)
    yield from _long_arguments(source, upstream)
    yield from _secret_rules(source)
    yield from _user_rules(source)
    yield from _command_rules(source, known)
    yield from _deploy_rules(source, images)
    yield from _spec_rules(source, known)
    yield from _env_rules(source, known)
    yield from _mount_rules(source, known)
    yield from _results_root_rules(source)
    yield from _path_name_rules(source)
    yield from _platform_rules(source)
    yield from _image_rules(source, images)


NUL_IN_ARGUMENT = "contains a NUL character, which no process argument can hold"
NUL_IN_SPEC = (
    "contains a NUL character, which taospec reserves to mark, in the spec it renders, the "
    "values it fills in at submit (the job id, an upstream's results folder)"
)
"""A spec's keys and values go into a file, where a NUL could be written; taospec's own
stand-ins (:func:`taospec.placeholders.stand_in`) are, so none of the job's may be."""


def _nul_bytes(source: Source) -> Iterator[Problem]:
    for where, text, is_key in texts(source.data):
        if "\x00" in text:
            message = NUL_IN_SPEC if where[:1] == ("spec",) else NUL_IN_ARGUMENT
            yield source.problem(where, message, key=is_key)


ARGUMENT_MAX = 131072
"""The bytes Linux takes in one argument or environment entry of a process, its final NUL
included (``MAX_ARG_STRLEN``); a longer one fails the launch with E2BIG."""

ARGUMENTS_TOTAL = 2097152
"""The bytes Linux takes in all the arguments and environment of a process together, each
string counted with its NUL and its pointer (``getconf ARG_MAX``: a quarter of the default
8 MiB stack limit); past it the launch fails with E2BIG."""

KEPT_FOR_LAUNCH = 131072
"""The part of :data:`ARGUMENTS_TOTAL` a job file's own words may not take: it is kept for
what taospec and the machine add to the launch (the wrapper or the docker run options, HOME
and the cache directories under the results directory, and the launcher's environment: PATH
and the env.pass values of a local job, all of it for the docker CLI). A job file is judged
alone, so that validate says the same on every machine; a launcher whose own part passes
this finds out at the launch, which is recorded ERROR with the kernel's reason."""

KEPT_ON_BREV = 4096
"""The part of :data:`ARGUMENT_MAX` a Brev job's own words may not take in the one argument
brev exec gets: the check and markers around docker run, and taospec's own options (some
900 bytes, and the job id in its name and labels)."""

_NOT_ARGUMENTS = ("spec", "inputs", "upload_excludes", "mounts")
"""Keys whose texts never reach a process's arguments as they are (the spec file goes
through stdin; a mount is one word with its target, :func:`_mount_words`)."""

_POINTER = 8
"""The bytes of one argument's or environment entry's pointer, which the total counts."""


def _long_arguments(source: Source, upstream: Mapping[str, str]) -> Iterator[Problem]:
    """Each argument or environment entry too long for Linux, as the plan fills it: the id
    as long as taospec mints it, ``upstream`` an upstream's results (see :func:`check`).
    Then the words the job file gives its launch, all together (:func:`_launch_size`)."""
    data = source.data
    job_id = id_like(data.get("network_arch"), data.get("action"))
    own = plan_fill(data, job_id)
    found: list[tuple[JsonPath, str, str]] = []
    for key, value in data.items():  # the spec, often the largest part, is not walked
        if key in _NOT_ARGUMENTS or key == "command":
            continue
        found += [
            (where, text, "it")
            for where, text in _strings(value, (key,))
            if where[:2] != ("env", "set")
        ]
    command = data.get("command")
    words = _strings(command, ("command",))  # a list, as written or as a matrix filled it
    if isinstance(command, str):
        with contextlib.suppress(ValueError):  # the command rules say why
            words = [(("command",), word) for word in split_command(command)]
    found += [(where, word, "one argument") for where, word in words]
    env = data.get("env")
    values = env.get("set") if isinstance(env, dict) else None
    for name, value in values.items() if isinstance(values, dict) else ():
        found.append((("env", "set", name), f"{name}={value}", f"{name}=..."))

    def fill(where: JsonPath, text: str) -> str:
        if not filled_by_plan(where):
            return text
        # each escape runs as one brace, a placeholder as its value
        return braces.fill(text, lambda name: upstream.get(name) or own(name))

    judged = [
        (where, fill(where, text), what, placeholders.names(text)) for where, text, what in found
    ]
    judged += _mount_words(data, fill, job_id)
    launched: list[tuple[JsonPath, str]] = []
    for where, text, what, named in judged:
        if where[:1] in (("command",), ("env",), ("mounts",)) or where[:2] == _EXTRA_ARGS:
            launched.append((where, text))
        size = len(text.encode(errors="surrogateescape"))
        if size >= ARGUMENT_MAX:
            how = (
                " once its placeholders are filled (each job id counted at the most characters "
                f"taospec mints for its job: {len(job_id)} for this one)"
                if named and filled_by_plan(where)
                else ""
            )
            yield source.problem(
                where,
                f"{what} is {size} bytes{how}, and Linux starts no process with an argument or "
                f"environment entry of {ARGUMENT_MAX} bytes or more; {_LONG_TEXT}",
            )
    yield from _launch_size(source, launched, job_id)
    if data.get("platform") == "brev":
        yield from _brev_spec(source, lambda text: fill(("spec",), text), job_id)


def _brev_spec(source: Source, fill: Callable[[str], str], job_id: str) -> Iterator[Problem]:
    """A Brev job's spec file, which its prepare step carries inside the ONE argument brev
    exec gets (brev exec hands the remote command no input), judged against the kernel's
    limit on one: the spec's text (``fill``-ed) as the far side's shell reads it, and the
    results tree's paths there (:data:`_PREPARED_PATHS`)."""
    spec = source.data.get("spec")
    if not isinstance(spec, Mapping):
        return
    text = placeholders.spec_file_text(spec, fill)
    paths = _PREPARED_PATHS * _quoted_size(_host_results(source.data, job_id), job_id)
    size = _quoted_size(text, job_id) + paths
    allowed = ARGUMENT_MAX - KEPT_ON_BREV
    if size >= allowed:
        yield source.problem(
            ("spec",),
            "on Brev the spec file reaches the instance inside ONE argument of brev exec "
            f"(brev exec hands the remote command no input), which comes to {size} bytes "
            f"with the results tree's paths once quoted, and taospec keeps {KEPT_ON_BREV} for "
            "its own words: "
            f"{size - allowed + 1} bytes too many for Linux, which takes no argument of "
            f"{ARGUMENT_MAX} bytes or more; shorten the spec, or put its long part in a file "
            "under a mount's source on the instance and name that file in the spec",
        )


_PREPARED_PATHS = 11
"""How often the results directory is named in the prepare step: the ten directories of the
results tree, and the spec file."""


def _quoted_size(text: str, job_id: str) -> int:
    """The bytes of ``text`` as one shell word of a Brev remote script (a job id in it left
    bare between quoted pieces, two quotes more each), as the argument brev exec hands
    ``bash -c`` holds it: brev writes the script inside ``'...'`` of its ssh command line,
    each ``'`` as ``'\\''``, three bytes more."""
    word = shlex.quote(text)
    quotes = word.count("'") + 2 * text.count(job_id)
    return len(word.encode(errors="surrogateescape")) + 2 * text.count(job_id) + 3 * quotes


_EXTRA_ARGS = ("docker", "extra_args")
_LONG_TEXT = "put long text in the spec, which the job reads as a file"


def _mount_words(
    data: Mapping[str, Any], fill: Callable[[JsonPath, str], str], job_id: str
) -> list[tuple[JsonPath, str, str, list[str]]]:
    """Each mount as the word its container engine gets, its source filled by ``fill``:
    docker run's ``-v SOURCE:TARGET[:ro]``, at the mount's source, or pyxis's one
    ``--container-mounts`` value for the results directory and every mount, at ``mounts``."""
    mounts = data.get("mounts")
    words = []
    for index, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        if isinstance(mount, dict) and isinstance(mount.get("source"), str):
            where: JsonPath = ("mounts", index, "source")
            ro = ":ro" if mount.get("readonly") is True else ""
            word = f"{fill(where, mount['source'])}:{mount.get('target')}{ro}"
            words.append((where, word, placeholders.names(mount["source"])))
    if slurm_container(data) != PYXIS:
        what = "the word docker run gets for this mount (SOURCE:TARGET:ro)"
        return [(where, word, what, named) for where, word, named in words]
    if not words:
        return []
    results = f"{_host_results(data, job_id)}:{RESULTS_TARGET}"
    joined = ",".join([results, *(word for _, word, _ in words)])
    what = "pyxis's --container-mounts value (the results directory and every mount, joined)"
    return [(("mounts",), joined, what, [])]


def _launch_size(
    source: Source, launched: Sequence[tuple[JsonPath, str]], job_id: str
) -> Iterator[Problem]:
    """The words and variables the job file gives its launch (``launched``, filled), judged
    together: against the kernel's limit on all of a process's arguments and environment,
    and on Brev, where brev exec gets docker run's whole line as one argument, against the
    limit on one."""
    if not launched:
        return
    total = sum(len(text.encode(errors="surrogateescape")) + 1 + _POINTER for _, text in launched)
    allowed = ARGUMENTS_TOTAL - KEPT_FOR_LAUNCH
    if total > allowed:
        yield source.problem(
            ("command",),
            f"the command's words, env.set's entries, the mounts and docker.extra_args come to "
            f"{total} bytes with their placeholders filled, each counted with its NUL and "
            f"pointer: {total - allowed} bytes too many. Linux starts no process whose "
            f"arguments and environment pass {ARGUMENTS_TOTAL} bytes in all (getconf "
            f"ARG_MAX), and taospec keeps {KEPT_FOR_LAUNCH} of them for what it and the "
            f"launching machine add; {_LONG_TEXT}",
        )
    if source.data.get("platform") == "brev":
        yield from _brev_command(source, launched, job_id)


def _brev_command(
    source: Source, launched: Sequence[tuple[JsonPath, str]], job_id: str
) -> Iterator[Problem]:
    """A Brev job's docker run line, which brev exec gets as ONE argument, judged against the
    kernel's limit on one: the job file's words (``launched``) and the results directory's
    mount, each as the far side's shell reads it (quoted, a job id left bare between quoted
    pieces, two quotes more each) and set off by a line break at most (``" \\\n    "``)."""
    results = f"{_host_results(source.data, job_id)}:{RESULTS_TARGET}"
    words = [*launched, (("mounts",), results)]
    joined = sum(_quoted_size(text, job_id) + 7 for _, text in words) + 3 * sum(
        where[:1] in (("env",), ("mounts",)) for where, _ in words
    )  # -e, -v
    allowed = ARGUMENT_MAX - KEPT_ON_BREV
    if joined >= allowed:
        yield source.problem(
            ("command",),
            "on Brev the container's command line (docker run with the command's words, "
            "env.set's entries and the mounts) reaches the instance as ONE argument of brev "
            f"exec, which comes to {joined} bytes once quoted, and taospec keeps "
            f"{KEPT_ON_BREV} for its own words: {joined - allowed + 1} bytes too many for "
            f"Linux, which takes no argument of {ARGUMENT_MAX} bytes or more; {_LONG_TEXT}",
        )


def filled_by_plan(path: JsonPath) -> bool:
    """Whether a plan fills the placeholders of the value at ``path`` (``plan.Context``): the
    command's words, the spec's values, ``env.set``'s values and the mounts' sources."""
    return (
        path[:1] in (("command",), ("spec",))
        or (len(path) == 3 and path[:2] == ("env", "set"))
        or (len(path) == 3 and path[0] == "mounts" and path[2] == "source")
    )


def _strings(value: Any, path: JsonPath) -> list[tuple[JsonPath, str]]:
    """Every text in ``value`` with its path, in document order."""
    found: list[tuple[JsonPath, str]] = []

    def walk(value: Any, path: JsonPath) -> None:
        if isinstance(value, str):
            found.append((path, value))
        elif isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, str(key)))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, index))

    walk(value, path)
    return found


def _placeholder_rules(
    source: Source, value: Any, path: JsonPath, known: tuple[str, ...]
) -> Iterator[Problem]:
    for where, text in _strings(value, path):
        for message in placeholders.unknown(text, known):
            yield source.problem(where, message)


def left_as_text(source: Source) -> list[Problem]:
    """Each ``{needs.`` placeholder in a value no plan fills (:func:`filled_by_plan`):
    ``inputs``, ``notify``, ``docker.extra_args``, ...; and each ``{matrix.<key>}`` there
    naming no key of the job's matrix (the matrix fills the others everywhere). Either would
    stay in the value as text. Give it the job as written: a matrix value's braces are its own.
    """
    data = source.data
    matrix = data.get("matrix")
    keys = [str(key) for key in matrix] if isinstance(matrix, dict) else []
    problems = []
    for key, value in data.items():
        if key in ("needs", "matrix") or filled_by_plan((key,)):  # a spec may be long
            continue
        for path, text in _strings(value, (key,)):
            if filled_by_plan(path):
                continue
            for name in placeholders.names(text):
                if name.startswith("needs."):
                    message = (
                        f"{{{name}}} is filled in only in command, spec values, env.set values "
                        "and mount sources; here it would be left as it is"
                    )
                elif name.startswith("matrix.") and name[len("matrix.") :] not in keys:
                    matrix_keys = f"no key of this job's matrix ({', '.join(keys)})"
                    names = matrix_keys if keys else "a key of a matrix this job does not have"
                    message = f"{{{name}}} names {names}, and would be left as it is"
                else:
                    continue
                problems.append(source.problem(path, message))
                break
    return problems


def lost_braces(source: Source) -> list[Problem]:
    """Each field a plan fills placeholders in (the command, spec values, ``env.set`` values,
    mount sources) that would lose a brace it means (:func:`placeholders.lost_brace`), at
    its line. Give it the job as written: a matrix fills its values in, braces doubled."""
    data = source.data
    fields: list[tuple[JsonPath, list[str], bool]] = []  # path, words, a word per index
    command = data.get("command")
    if isinstance(command, list):
        fields.append((("command",), [str(word) for word in command], True))
    elif isinstance(command, str):
        with contextlib.suppress(ValueError):  # the command rules say why
            fields.append((("command",), list(split_command(command)), False))
    fields += [(path, [text], False) for path, text in _strings(data.get("spec"), ("spec",))]
    env = data.get("env")
    values = env.get("set") if isinstance(env, dict) else None
    for name, value in values.items() if isinstance(values, dict) else ():
        if isinstance(value, str):
            fields.append((("env", "set", name), [value], False))
    mounts = data.get("mounts")
    for index, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        if isinstance(mount, dict) and isinstance(mount.get("source"), str):
            fields.append((("mounts", index, "source"), [mount["source"]], False))
    problems = []
    for path, words, by_word in fields:
        found = placeholders.lost_brace(words)
        if found is not None:
            index, message = found
            problems.append(source.problem((*path, index) if by_word else path, message))
    return problems


_EMPTY_PROGRAM = "the program to run is an empty word; name the program first"


def _command_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    command = source.data.get("command")
    if isinstance(command, str):
        try:
            words = split_command(command)
        except ValueError as exc:
            yield source.problem(("command",), f"cannot be split into words: {exc}")
            return
        if command and not words:
            yield source.problem(("command",), "is blank; say what the job runs")
        elif words and not words[0]:
            yield source.problem(("command",), _EMPTY_PROGRAM)
    elif isinstance(command, list) and command and command[0] == "":
        yield source.problem(("command", 0), _EMPTY_PROGRAM)
    if isinstance(command, str | list):
        yield from _placeholder_rules(source, command, ("command",), known)
        yield from _spec_file_needed(source, ("command",), command)
        yield from _hydra_words(source, command)


def tao_deploy(image: object) -> bool:
    """Whether ``image`` is TAO Deploy's (``nvcr.io/nvidia/tao/tao-toolkit:7.1.0-deploy``,
    a digest after it or not), whose entrypoint passes the words after the spec on through
    ``bash -c``."""
    return isinstance(image, str) and image.partition("@")[0].rpartition(":")[2].endswith("-deploy")


_BASH_PLAIN = re.compile(r"[A-Za-z0-9_./:=+@%,\[\]-]+")
"""A word that bash reads back as itself inside the single quotes of TAO Deploy's
``bash -c '...'``: no blank, quote, ``$``, backquote, backslash, brace, ``~``, ``#``,
operator, ``*`` or ``?``. A bracket, which Hydra's lists need, is a glob too, but one that
only a file named like ``key=0`` in the container's working folder would match."""


def deploy_word_problems(source: Source, given: list[overrides.Given]) -> list[Problem]:
    """A problem for each word TAO Deploy's entrypoint passes on that bash would read
    otherwise: the entrypoint runs ``bash -c '<script> <the words joined>'``, so a word
    holding more than :data:`_BASH_PLAIN` allows is bash's to read."""
    problems = []
    listed = isinstance(source.data.get("command"), list)
    for index, word in {each.index: each.word for each in given}.items():
        if _BASH_PLAIN.fullmatch(word):
            continue
        at: JsonPath = ("command", index) if listed else ("command",)
        message = (
            f"{word!r}: TAO Deploy's entrypoint runs the words it passes on as bash -c "
            "'python <script> <the words>', so bash would read this word otherwise (a "
            "blank, quote, $, backquote, backslash, brace, ~, #, glob or operator); set it in "
            "spec: instead"
        )
        problems.append(source.problem(at, message))
    return problems


def _deploy_rules(source: Source, images: Images) -> Iterator[Problem]:
    """The words of a job whose own ``image:`` is TAO Deploy's that bash would read
    otherwise (see :func:`deploy_word_problems`)."""
    image = source.data.get("image")
    if isinstance(image, dict):
        try:
            image = images.resolve(str(image.get("versions_key")))
        except LookupError:
            return  # said by the image rules
    if tao_deploy(image):
        yield from deploy_word_problems(source, command_overrides(source.data))


def command_words(command: object) -> list[Any] | None:
    """A job's ``command`` as words: its list, or its string split as a shell splits it;
    None when it gives no command, or one that does not split (the command rules say why)."""
    words = _words_or_none(command) if isinstance(command, str) else command
    return words if isinstance(words, list) else None


def command_overrides(data: Mapping[str, Any]) -> list[overrides.Given]:
    """What a job's own ``command`` passes to Hydra through TAO's entrypoint
    (:func:`overrides.given`); none when it gives no command, or one that does not split."""
    words = command_words(data.get("command"))
    return [] if words is None else list(overrides.given(words, data.get("action")))


def _hydra_words(source: Source, command: str | list[Any]) -> Iterator[Problem]:
    """A word a TAO entrypoint passes on to Hydra (see :func:`overrides.given`) that TAO's
    run refuses once the job has started: one the entrypoint cannot split again, a choice
    of a config group (Hydra's own ``hydra/...`` aside), one Hydra's argument parser
    refuses (an option it has not, a word that is no override: :func:`overrides.unread`),
    one with which TAO's run does other than run the action as the job shows it (help,
    a setting TAO sets again: :func:`overrides.unrun`), a value Hydra reads as a sweep, or
    one its override grammar cannot read (:func:`overrides.misread`)."""
    at: JsonPath = ("command",)
    given = command_overrides(source.data)
    image = source.data.get("image")
    # Hydra gets the words as written, unless TAO Deploy's bash reads them first (its image,
    # or one a versions key or a skill names: judged where the image is known)
    plain = isinstance(image, str) and not tao_deploy(image)
    unread = {id(each): why for each, why in overrides.unread(given)}
    unrun: dict[int, list[str]] = {}
    for each, why in () if unread else overrides.unrun(given):
        unrun.setdefault(id(each), []).append(why)
    for each, later, does in overrides.undone(given):
        where = (
            "a later part of this word"
            if later.index == each.index
            else f"the word at $.command[{later.index}]"
            if isinstance(command, list)
            else f"the later word {later.word!r}"
        )
        unrun.setdefault(id(each), []).append(
            f"{where} {does}, so this one does nothing; leave it out"
        )
    sweeps = (
        "Hydra's multirun (-m) takes, running the values one after another into one results "
        "folder, where taospec runs one job a record; for one job a value, make the job a "
        "pipeline target with matrix:"
        if overrides.multirun(given)
        else "only a multirun takes, not TAO's run"
    )
    for passed in given:
        if isinstance(command, list):
            at = ("command", passed.index)
        read = passed.read
        if passed.pieces is None:
            yield source.problem(
                at,
                f"{passed.word!r}: {overrides.RESPLIT}, and cannot split this one (an unclosed "
                f"quote, or a backslash at its end); {_whole(passed.word, command)}",
            )
        elif id(passed) in unrun:
            for why in unrun[id(passed)]:
                yield source.problem(at, f"{passed.shown}: {why}")
        elif read is None and (named := overrides.group(passed.passed)) is not None:
            if not named.startswith("hydra/") and not passed.passed.startswith("+"):
                yield source.problem(
                    at,
                    f"{passed.shown}: Hydra reads it as a choice of the config group or package "
                    f"{named}, and TAO's entrypoint gives Hydra no config groups, only the spec "
                    "file; set a key of the spec as key.sub=value",
                )
        elif id(passed) in unread:
            fix = _whole(passed.word, command) if passed.split else _TAO_SETTINGS
            yield source.problem(at, f"{passed.shown}: {unread[id(passed)]}; {fix}")
        elif read is not None and read.sweep:
            text = shlex.quote(f"{read.key}={read.value}".replace(",", "\\,"))
            how = (
                f"for a list write {read.key}=[{read.value}]; for text set it in spec:, or "
                f"write the word {text}, in which Hydra reads each \\, as a comma of the text"
                if read.listed
                else "give the one value to use"
            )
            yield source.problem(
                at,
                f"{passed.shown}: Hydra, which reads the words after -e {{config_path}} as "
                "overrides of the spec, reads this value as a sweep over several values, "
                f"which {sweeps}; {how}",
            )
        elif (
            read is not None
            and (plain or _BASH_PLAIN.fullmatch(passed.word))
            and (misread := overrides.misread(read.value))
        ):
            yield source.problem(
                at,
                f"{passed.shown}: Hydra, which reads the words after -e {{config_path}} as "
                f"overrides of the spec, cannot read this value, and TAO's run stops there: "
                f"{misread}",
            )


_TAO_SETTINGS = (
    "TAO's entrypoint takes the spec file (-e) and gives Hydra all else, so a setting is a "
    "key of the spec (key=value, results_dir=/results for an older TAO's -r /results)"
)


def _whole(word: str, command: object) -> str:
    """How to give Hydra ``word`` whole: in ``spec:``, or (not through TAO Deploy's bash) as a
    word quoted for the entrypoint's split, written in ``command`` (a list, or a string
    that taospec splits first) so that the quotes reach it."""
    quoted = shlex.quote(word)
    if not isinstance(command, str):
        written = f"make the item {quoted}, quotes and all"
    elif quoted.startswith("'") and not _UNSAFE_IN_DOUBLE_QUOTES.search(quoted):
        written = f'write "{quoted}" in the command, quotes and all'
    else:
        written = f"write {shlex.quote(quoted)} in the command"
    return (
        f"set the key in spec: instead, or {written}: TAO's entrypoint takes its quotes off and "
        "gives Hydra the word whole (not TAO Deploy's, which runs the words through bash)"
    )


_UNSAFE_IN_DOUBLE_QUOTES = re.compile(r'["$`\\]')
"""What a shell reads otherwise inside double quotes."""


def _spec_file_needed(source: Source, path: JsonPath, value: Any) -> Iterator[Problem]:
    """``{config_path}`` in the command or an ``env.set`` value (at ``path``) of a job that
    writes no spec file (no ``spec:``, and no skill to make one) names a file that is never
    there: the job would fail on it."""
    if "spec" in source.data or "skill" in source.data:
        return
    if any("config_path" in placeholders.names(text) for _, text in _strings(value, path)):
        yield source.problem(
            path,
            "{config_path} is the spec file, which only a job with a spec: has; add a "
            "spec: (spec: {} for an empty one) or leave the placeholder out",
        )


def _spec_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    spec = source.data.get("spec")
    if not isinstance(spec, dict):
        return
    yield from _dotted_keys(source, spec, ("spec",))
    yield from _placeholder_rules(source, spec, ("spec",), known)
    for where, text in _strings(spec, ("spec",)):
        if "${" in text:  # judged as the spec file holds it: each escape one brace
            unclosed = interpolations.unclosed(braces.fill(text, str))
            if unclosed is not None:
                yield source.problem(where, unclosed)


def _dotted_keys(source: Source, value: Any, path: JsonPath) -> Iterator[Problem]:
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                yield source.problem((*path, str(key)), f"key {key!r} must be text", key=True)
            elif "." in key:
                nested = ": {".join(key.split(".")) + ": ...}" + "}" * (key.count(".") - 1)
                yield source.problem(
                    (*path, key),
                    f"dotted key {key!r} is ambiguous in a TAO spec; nest it instead ({nested})",
                    key=True,
                )
            yield from _dotted_keys(source, child, (*path, str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _dotted_keys(source, child, (*path, index))


NAME_MAX = 255
"""The most bytes a file or folder name may hold on Linux's file systems (ext4, xfs, btrfs,
tmpfs, overlayfs); a path holding a longer one names nothing, here or in a container."""
PATH_MAX = 4095
"""The most bytes of a path the kernel takes in one call (4096 with its NUL)."""


def _path_name_rules(source: Source) -> Iterator[Problem]:
    """Paths no file system can hold: results_root and each mount's source and target."""
    paths: list[tuple[JsonPath, object]] = [(("results_root",), source.data.get("results_root"))]
    mounts = source.data.get("mounts")
    for index, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        if isinstance(mount, dict):
            paths += [(("mounts", index, key), mount.get(key)) for key in ("source", "target")]
    for where, path in paths:
        if isinstance(path, str) and (why := _unnameable(path)):
            yield source.problem(where, why)


def _unnameable(path: str) -> str | None:
    """Why Linux can name nothing at ``path`` (a name, or the whole, too long), else None.
    A placeholder's part is left to its filled value."""
    size = len(path.encode(errors="surrogateescape"))
    if size > PATH_MAX and "{" not in path:
        return (
            f"this path is {size} bytes, and Linux takes no path longer than {PATH_MAX}; "
            "choose a shorter one"
        )
    for part in path.split("/"):
        size = len(part.encode(errors="surrogateescape"))
        if size > NAME_MAX and "{" not in part:
            return (
                f"{part[:16]}... is a name of {size} bytes, and Linux's file systems take no "
                f"file or folder name longer than {NAME_MAX}; choose a shorter one"
            )
    return None


OWN_VARIABLES = {
    "TAO_JOB_ID": "taospec sets TAO_JOB_ID to the job's record id, by which it finds a job "
    "whose launch was not recorded; give the variable another name",
    "CUDA_VISIBLE_DEVICES": "taospec gives the job the GPUs `gpus:` names, and no two running "
    "jobs the same GPU; choose them with gpus: instead",
    "NVIDIA_VISIBLE_DEVICES": "the NVIDIA runtime reads NVIDIA_VISIBLE_DEVICES, which would hand "
    "the container GPUs beside those `gpus:` names; choose them with gpus: instead",
}
"""Variables that say what taospec decides for the job: set or passed, they would undo it."""


SHELL_VARIABLES = {
    "sh": frozenset(
        {
            "BASH", "BASHOPTS", "BASHPID", "BASH_ARGV0", "BASH_COMMAND", "BASH_EXECUTION_STRING",
            "BASH_SUBSHELL", "BASH_VERSINFO", "BASH_VERSION", "EPOCHREALTIME", "EPOCHSECONDS",
            "HISTCMD", "IFS", "LINENO", "OLDPWD", "OPTERR", "OPTIND", "PPID", "PS1", "PS2",
            "PS4", "PWD", "RANDOM", "SHELLOPTS", "SHLVL", "SRANDOM",
        }
    ),
    "bash": frozenset(
        {
            "BASHOPTS", "BASHPID", "BASH_ALIASES", "BASH_ARGC", "BASH_ARGV", "BASH_CMDS",
            "BASH_COMMAND", "BASH_LINENO", "BASH_SOURCE", "BASH_SUBSHELL", "BASH_VERSINFO",
            "DIRSTACK", "EPOCHREALTIME", "EPOCHSECONDS", "EUID", "FUNCNAME", "GROUPS", "HISTCMD",
            "LINENO", "OPTIND", "PIPESTATUS", "PPID", "RANDOM", "SECONDS", "SHELLOPTS", "SHLVL",
            "SRANDOM", "UID", "_",
        }
    ),
}  # fmt: skip
"""The variables a shell keeps for itself, found by handing each name to it. ``sh`` is what
``/bin/sh`` is somewhere, dash (Debian, Ubuntu) or bash (Fedora, RHEL), started as root
with the name in its environment: dash puts back its own IFS, PPID and PWD and stops at an
OPTIND that is no number, bash puts back its own of these and more. ``bash`` is the sbatch
script's, where the name is assigned: it holds some read-only (``export UID=5`` ends the
script) and gives others its own value or none."""

LAUNCHING_SHELL = {
    "local": ("sh", "starts a local job"),
    "slurm": ("bash", "runs the sbatch script"),
}


def _launching_shell(source: Source, passed: bool) -> str:
    """The shell whose variables an ``env.pass`` (``passed``) or ``env.set`` name becomes:
    a local job's wrapper, or the sbatch script, which sources the passed values and exports
    the set ones unless ``docker run -e`` hands them to the container."""
    data = source.data
    platform = data.get("platform", "local")
    if not passed and slurm_container(data) == "docker":
        return ""
    return LAUNCHING_SHELL.get(platform, ("", ""))[0] if isinstance(platform, str) else ""


def _shell_variable_rules(
    source: Source, passed: list[Any], values: dict[Any, Any]
) -> Iterator[Problem]:
    for index, name in enumerate(passed):
        if why := _shell_variable(source, name, passed=True):
            yield source.problem(("env", "pass", index), why)
    for name in values:
        if why := _shell_variable(source, name, passed=False):
            yield source.problem(("env", "set", name), why, key=True)


def _shell_variable(source: Source, name: Any, passed: bool) -> str | None:
    """Why ``name`` would not reach the job as written: the launching shell sets it itself."""
    shell = _launching_shell(source, passed)
    if not shell or not isinstance(name, str) or name not in SHELL_VARIABLES[shell]:
        return None
    doing = dict(LAUNCHING_SHELL.values())[shell]
    fix = (
        "pass the value under another name"
        if passed
        else f"give the variable another name, or set it in the command (env {name}=... program)"
    )
    return (
        f"{shell} sets {name} itself where it {doing}, so the job would get another value, or "
        f"none, or not start; {fix}"
    )


def _env_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:

    env = source.data.get("env")
    if not isinstance(env, dict):
        return
    passed: list[Any] = env["pass"] if isinstance(env.get("pass"), list) else []
    values: dict[Any, Any] = env["set"] if isinstance(env.get("set"), dict) else {}
    fill = plan_fill(source.data, "JOB_ID")
    yield from _shell_variable_rules(source, passed, values)
    for index, name in enumerate(passed):
        if isinstance(name, str) and name in OWN_VARIABLES:
            yield source.problem(("env", "pass", index), OWN_VARIABLES[name])
        found = secret_literals(name) if isinstance(name, str) else []
        if found:
            yield source.problem(
                ("env", "pass", index),
                f"the name itself looks like a credential ({found[0]}), and a plan shows "
                "every passed name (-e NAME): give the variable another name",
            )
    for name, value in values.items():
        path = ("env", "set", name)
        if name in passed:
            yield source.problem(path, f"{name} is both passed and set; keep one", key=True)
        if isinstance(name, str) and name in OWN_VARIABLES:
            yield source.problem(path, OWN_VARIABLES[name], key=True)
        if lint.is_secret_name(str(name)):
            yield source.problem(
                path,
                f"{name} looks like a secret; list it under env.pass so its value comes from "
                "the launcher's environment and is never written down",
                key=True,
            )
        elif isinstance(value, str) and _passed_as_literal(str(name), value, fill):
            yield source.problem(
                path,
                f"the value of {name} looks like a credential; pass it by name under env.pass",
            )
        if isinstance(value, str):
            yield from _placeholder_rules(source, value, path, known)
            yield from _spec_file_needed(source, path, value)
        elif isinstance(value, int | float):  # bool too
            written = source.written(path)
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            if written is not None and written != shown:
                yield source.problem(
                    path,
                    f"YAML reads {written} as {shown}, the value {name} would get; quote it "
                    f"to pass it as written: {name}: '{written}'",
                )


def _mount_rules(source: Source, known: tuple[str, ...]) -> Iterator[Problem]:
    mounts = source.data.get("mounts")
    if not isinstance(mounts, list):
        return
    upstream = tuple(name for name in known if name.startswith("needs."))
    seen: dict[str, int] = {}
    for index, mount in enumerate(mounts):
        if isinstance(mount, dict) and isinstance(mount.get("source"), str):
            where = ("mounts", index, "source")
            yield from _placeholder_rules(source, mount["source"], where, upstream)
        if not isinstance(mount, dict) or not isinstance(mount.get("target"), str):
            continue
        refusals = mount_refusals(mount.get("source"), mount["target"])
        for key, message in refusals:
            yield source.problem(("mounts", index, key), message)
        target = mount_target_path(mount["target"])
        if any(key == "target" for key, _ in refusals):
            continue
        if target in seen:
            same = "" if target == mount["target"] else f" (as {target})"
            yield source.problem(
                ("mounts", index, "target"),
                f"{mount['target']}{same} is already the target of mounts[{seen[target]}]",
            )
        else:
            seen[target] = index


def mount_refusals(source: object, target: str) -> list[tuple[str, str]]:
    """Why ``docker run -v`` cannot mount ``source`` at ``target``: (``source`` or
    ``target``, the reason), for a written ``mounts:`` entry and for one a skill adds."""
    refusals = []
    if isinstance(source, str) and ":" in source:
        refusals.append(
            (
                "source",
                "docker run -v separates source, target and options with ':', so a source "
                "holding ':' cannot be mounted; link or move it to a path without ':'",
            )
        )
    normal = mount_target_path(target)
    if normal == RESULTS_TARGET or normal.startswith(RESULTS_TARGET + "/"):
        why = (
            f"{target} is at or under /results, where the job's results directory "
            "(and its spec file) is mounted; mount it elsewhere, e.g. /data"
        )
    elif owned := _containers_own(target):
        why = owned
    elif ":" in normal:
        why = "docker run -v cannot take a target holding ':'; choose a path without it"
    else:
        return refusals
    return [*refusals, ("target", why)]


def _containers_own(target: str) -> str | None:
    """Why nothing can be mounted at ``target``, which the container keeps for itself
    (:data:`_CONTAINERS_OWN`); None where it can."""
    normal = mount_target_path(target)
    if normal in _PROC_FILES or (
        normal not in _CONTAINERS_OWN and not normal.startswith(("/proc/", "/sys/"))
    ):
        return None
    same = "" if normal == target else f" (that is {normal})"
    return (
        f"{target}{same} cannot be a mount target: the container's root, its /dev and "
        "its /proc (but for the few files of it runc lets a mount cover, such as "
        "/proc/cpuinfo), and what is under its /sys (the kernel's, read-only), belong to the "
        "container; mount it elsewhere, e.g. /data"
    )


_PROC_FILES = frozenset(
    f"/proc/{name}"
    for name in ("cpuinfo", "diskstats", "meminfo", "stat", "swaps", "uptime", "loadavg",
                 "slabinfo", "net/dev", "sys/kernel/ns_last_pid", "sys/crypto/fips_enabled")
)  # fmt: skip
"""The files under ``/proc`` runc lets a mount cover (lxcfs mounts its own over them);
``net/dev`` and ``fips_enabled`` since runc 1.2, and left to an older runc to refuse."""
_CONTAINERS_OWN = ("/", "/proc", "/dev")
"""Mount targets the container engine keeps for itself, with what is under ``/proc`` and
``/sys``: over ``/dev`` the container does not start (runc needs its own ``/dev/null``),
and under ``/sys`` the engine cannot make the target in the kernel's read-only file system.
Under ``/dev`` a mount is made in the container's own tmpfs (``/dev/shm`` is common), and
one over ``/sys`` itself starts."""


def mount_target_path(target: str) -> str:
    """A mount target as the container sees it (``/data/../proc/`` is ``/proc``)."""
    normal = posixpath.normpath(target) if target else ""
    return "/" + normal.lstrip("/") if normal.startswith("/") else normal


def secret_literals(
    value: str, open_end: bool = False, fill: Callable[[str], str] | None = None
) -> list[str]:
    """What in ``value`` looks like a literal credential (descriptions, never the secret);
    ``open_end`` for a value the plan extends, ``fill`` how it fills placeholders (see
    :func:`taospec.lint.find_secret_literals`)."""
    return [_description(f) for f in lint.find_secret_literals(value, open_end, fill)]


def _host_results(data: Mapping[str, Any], job_id: str) -> str:
    """The job's results directory on the host, ``<results_root>/<id>``."""
    root = data.get("results_root")
    return f"{root.rstrip('/')}/{job_id}" if isinstance(root, str) else f"/{job_id}"


def plan_fill(data: Any, job_id: str) -> Callable[[str], str]:
    """How the plan of the job in ``data`` fills a placeholder, the id written ``job_id``.

    ``{results_dir}`` is where the job sees its results (``/results`` in a
    container, ``<results_root>/<id>`` for a local process), ``{config_path}`` the
    spec file there, an upstream's results its directory on the host (judged under
    this job's ``results_root``); a matrix value, or a name another rule refuses,
    stays a reference. A value is then judged with the length and the characters the
    plan gives it: ``Bearer {results_dir}`` is ``Bearer /results`` in a container.
    """
    fields = data if isinstance(data, dict) else {}
    host = _host_results(fields, job_id)
    seen = results_seen_at(str(fields.get("platform", "local")), slurm_container(fields), host)
    values = {"job_id": job_id, "results_dir": seen, "config_path": f"{seen}/{SPEC_FILE}"}

    def fill(name: str) -> str:
        if name in values:
            return values[name]
        return host if name.startswith("needs.") else "${TAOSPEC_PLACEHOLDER}"

    return fill


EXTENDED = frozenset({("results_root",)})
"""Strings every plan extends: ``results_root`` is the start of each job's results directory."""


SPEC_REFERENCE = "${{oc.env:NAME}}"
"""How a spec value names a variable of the job's environment, formatted: TAO reads its spec
with OmegaConf, whose ``oc.env`` resolver reads the variable (it leaves ``$NAME`` as it is)."""


def secret_key_message(name: str) -> str:
    """Why a spec value under a secret-named key is refused (the name, never the value)."""
    return (
        "a spec file is written with the job's results and shown by render, so it cannot "
        "hold secrets; pass this value by name under env.pass and write "
        f"{SPEC_REFERENCE.format()} as the value, for TAO to read it from the job's environment "
        f"(the secret-named key is {name})"  # the name last: see redact's flags
    )


def _description(finding: lint.Finding) -> str:
    """``NGC_KEY, inline secret assignment``: what was found, in words redaction leaves alone."""
    return f"{finding.subject}, {finding.rule.replace('-', ' ')}"


ARGUMENT_LISTS = (("command",), ("notify",), ("docker", "extra_args"), ("slurm", "extra_sbatch"))
"""Lists of arguments that reach a command line as they are, one word an item."""
FOLLOWED_BY: dict[JsonPath, str] = {("docker", "extra_args"): "IMAGE"}
"""What comes right after a list on its command line, where a last flag would take it for
its value: ``docker run``'s image follows its extra arguments (``--token IMAGE``)."""


def _secret_rules(source: Source) -> Iterator[Problem]:
    """Credentials written into a job file's strings that a plan would carry.

    Every string of a job reaches its plan, which is recorded and shown: the
    command, the spec, ``notify:``, the image, paths, hosts and the platforms'
    options. The plan's own lint would refuse them at render, so ``validate``
    says so first, at their line. ``env`` has its own rules (:func:`_env_rules`).
    An argument list is also judged whole, as the plan's lint reads it: a flag
    and its value may be two items (``[--token, x]``).
    """
    shown = "holds what looks like a credential ({}); a job file is recorded and shown: pass it "
    messages = {
        False: shown + "by name under env.pass and refer to $NAME instead",
        True: shown
        + f"by name under env.pass and write {SPEC_REFERENCE} in its place (TAO's OmegaConf "
        "reads it from the job's environment)",
    }
    said: set[JsonPath] = set()  # the argument lists an item of which was refused
    in_spec = False  # whether a problem was found in the spec
    refused: set[JsonPath] = set()  # the strings refused
    fill = plan_fill(source.data, "JOB_ID")  # as the plan's lint reads the id in argv
    for where, text in _strings(source.data, ()):
        if where[:1] == ("env",):
            continue
        found = secret_literals(text, where in EXTENDED, fill)
        if found:
            yield source.problem(where, messages[where[:1] == ("spec",)].format(found[0]))
            refused.add(where)
            said.update(path for path in ARGUMENT_LISTS if where[: len(path)] == path)
            in_spec = in_spec or where[:1] == ("spec",)
    for where, name in lint.secret_keyed_values(source.data.get("spec"), ("spec",)):
        if where not in refused:
            yield source.problem(where, secret_key_message(name))
            in_spec = True
    for where, key in _keys(source.data, ()):
        found = secret_literals(key, fill=fill)
        if found:  # a key is written out too: spec keys in the spec file, env.set names in argv
            yield source.problem(where, messages[False].format(found[0]), key=True)
            in_spec = in_spec or where[:1] == ("spec",)
    lists = [*ARGUMENT_LISTS, *_string_lists(source.data.get("spec"), ("spec",))]
    for path in lists:
        words = _value_at(source.data, path)
        if path == ("command",) and isinstance(words, str):
            words = _words_or_none(words)  # the words argv gets: nvapi-x\y is nvapi-xy
        if path not in said and isinstance(words, list) and all(isinstance(w, str) for w in words):
            following = FOLLOWED_BY.get(path)
            pair = lint.lint_argv([*words, following] if following else words)
            found = [_description(pair[0])] if pair else secret_literals(shlex.join(words))
            if found:  # a tool's option and its value in two items: [curl, -u, "u:pw"]
                yield source.problem(path, messages[path[:1] == ("spec",)].format(found[0]))
                in_spec = in_spec or path[:1] == ("spec",)
    if not in_spec:
        yield from _spec_file_rules(source, messages[True])


def _spec_file_rules(source: Source, message: str) -> Iterator[Problem]:
    """The spec file as a plan writes it, judged as the plan's lint judges it.

    The file can read otherwise than its values one by one: a key and its value
    share a line (``Authorization: Basic ...``), and YAML writes some characters
    as escapes (a tab as ``\\t``). A finding is placed at the value its line is in.
    """
    spec = source.data.get("spec")
    if not isinstance(spec, dict) or not spec:
        return
    fill = plan_fill(source.data, placeholders.JOB_ID)  # the id's stand-in, as submit fills it

    def as_planned(value: str) -> str:
        return placeholders.expand(value, {name: fill(name) for name in placeholders.names(value)})

    text = placeholders.spec_file_text(spec, as_planned)
    readable = text.replace("\x00", "_")  # YAML allows no NUL; a stand-in's lines stay
    for finding in lint.lint_text(text):
        yield source.problem(
            ("spec", *yamlsrc.path_at_line(readable, finding.line)),
            message.format(f"{_description(finding)}, at line {finding.line} of the spec file"),
        )


def _words_or_none(command: str) -> list[str] | None:
    """A string command's words, or None where it does not split (another rule says so)."""
    try:
        return list(split_command(command))
    except ValueError:
        return None


def _keys(value: Any, path: JsonPath) -> Iterator[tuple[JsonPath, str]]:
    """Every mapping key in ``value`` that is text, with its path."""
    if isinstance(value, dict):
        for key, child in value.items():
            if isinstance(key, str):
                yield (*path, key), key
            yield from _keys(child, (*path, str(key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _keys(child, (*path, index))


def texts(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, str, bool]]:
    """Every text in ``value``: its strings, then its mapping keys (``True``), with paths."""
    for where, text in _strings(value, path):
        yield where, text, False
    for where, key in _keys(value, path):
        yield where, key, True


def _string_lists(value: Any, path: JsonPath) -> Iterator[JsonPath]:
    """The paths of the lists in ``value`` (a flag and its value may be two items)."""
    if isinstance(value, list):
        yield path
        for index, child in enumerate(value):
            yield from _string_lists(child, (*path, index))
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _string_lists(child, (*path, str(key)))


def _value_at(data: Any, path: JsonPath) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _results_root_rules(source: Source) -> Iterator[Problem]:
    root = source.data.get("results_root")
    if isinstance(root, str) and root.startswith("/") and not root.strip("/"):
        yield source.problem(
            ("results_root",),
            "results_root: / would put each job's results in a folder at the top of the "
            "file system; name a folder for them, e.g. /data/results",
        )


def _user_rules(source: Source) -> Iterator[Problem]:
    """Who a job runs as, where the answer cannot work."""
    data = source.data
    user = data.get("user")
    platform = data.get("platform", "local")
    if not isinstance(user, str):
        return
    for why in identity.id_refusals(user, platform, f"user: {user!r}"):
        yield source.problem(("user",), why)
    if platform not in ("docker", "brev"):
        return
    ids = identity.USER_IDS.fullmatch(user)
    if ids and int(ids[1]) == 0:
        yield source.problem(
            ("user",),
            f"user: {user!r} runs the container as root (UID 0), leaving root-owned results "
            'the submitting user cannot clean up; write a non-root account, e.g. user: "1000:1000"',
        )
    if platform == "brev" and user == "host":
        yield source.problem(
            ("user",),
            "user: host would mean this machine's account, which says nothing about the accounts "
            'on the instance; write user: "UID:GID" of the instance account (brev exec '
            "<instance> 'id -u; id -g' shows it)",
        )


BLOCKS_READ = {
    "local": (),
    "docker": ("docker",),
    "slurm": ("slurm", "docker"),
    "brev": ("brev", "docker"),
}
"""The platform blocks each platform reads (slurm and brev take the container's options
from ``docker:``). A block the job's own keys write for another platform would be ignored."""

ELSEWHERE = {
    "local": "a local process runs on this machine, outside any container",
    "docker": "the job runs on its Docker engine",
    "slurm": "the job runs where Slurm places it; slurm.login names the submitting host",
    "brev": "the container runs on the instance's own Docker engine",
}


def _platform_rules(source: Source) -> Iterator[Problem]:
    data = source.data
    platform = data.get("platform", "local")
    if platform == "brev" and "brev" not in data:
        yield source.problem(("platform",), "platform brev needs a brev: block naming the instance")
    yield from _foreign_blocks(source, platform)
    nodes = data.get("nodes", 1)
    if _is_integer(nodes) and nodes > 1 and platform in MULTI_NODE_REFUSALS:
        yield source.problem(("nodes",), MULTI_NODE_REFUSALS[platform])
    if platform == "local" and data.get("mounts"):
        yield source.problem(
            ("mounts",), "a local process sees the host's files directly; mounts need a container"
        )
    if platform == "local" and data.get("gpus") == "all":
        yield source.problem(
            ("gpus",), "a local process sees every GPU already; list ids to restrict it"
        )
    if isinstance(data.get("gpus"), dict) and platform not in FREE_GPU_PLATFORMS:
        yield source.problem(
            ("gpus",),
            "gpus: {free: N} reads the GPUs of the host the job runs on, which a Slurm job "
            "does not know before the scheduler places it (and Slurm itself picks which GPUs "
            "of the node it gets); list N ids to ask for N GPUs per node",
        )
    if platform == "slurm":
        yield from _slurm_rules(source)
    yield from _docker_args_rules(source)
    container = slurm_container(data)
    if platform in ("docker", "brev") or container == "docker":
        yield from _shm_size_rules(source)
    root = data.get("results_root")
    if (
        isinstance(root, str)
        and ":" in root
        and (platform in ("docker", "brev") or container == "docker")
    ):
        yield source.problem(
            ("results_root",),
            "docker run -v separates source, target and options with ':', so the results "
            "directory under a results_root holding ':' cannot be mounted at /results; "
            "choose a path without ':'",
        )


def _shm_size_rules(source: Source) -> Iterator[Problem]:
    # docker reads a size as a float64 times its unit into a signed 64-bit count of bytes:
    # from 2**63 on the count is negative, and the engine refuses --shm-size at the launch
    block = source.data.get("docker")
    size = block.get("shm_size") if isinstance(block, dict) else None
    if not isinstance(size, str) or dockerargs.size_bytes(size, end=float("inf")) is None:
        return  # the schema refuses it
    if dockerargs.size_bytes(size) is None:
        yield source.problem(
            ("docker", "shm_size"),
            f"docker.shm_size {size!r} is past the 8 EiB docker counts (2**63 bytes), so "
            "docker run would refuse it; write the size the job needs, e.g. 16g",
        )


DOCKER_OWN_OPTIONS = {
    "--name": "taospec names the container after the job's id, which status, logs and cancel "
    "find it by",
    "--rm": "taospec keeps the stopped container, which holds the job's exit code and output, "
    "until taospec prune",
    "--user": "taospec sets the container's user from user:; set it there",
    "-u": "taospec sets the container's user from user:; set it there",
    "--gpus": "taospec passes gpus: as --gpus; list the GPUs there",
    "--shm-size": "taospec passes docker.shm_size as --shm-size; set it there",
}
"""``docker run`` options taospec sets itself, with what to do instead."""

_REFUSED_OPTIONS = {
    "--label-file": "write each label as --label, where a reviewer sees it (taospec labels the "
    "container with the job's id and owner)",
    "--cidfile": "docker run writes the container's id there and refuses a file that exists, so "
    "the job's second run would fail; the container is named after the job's id (docker "
    "inspect ID)",
}
"""``docker run`` options a job file cannot use, with why."""

_OWN_LABELS = ("tao-job", "tao-owner")
_MOUNT_OPTIONS = ("-v", "--volume", "--mount", "--tmpfs")


def _foreign_blocks(source: Source, platform: Any) -> Iterator[Problem]:
    """A block (or ``docker.host``) the job writes for a platform other than its own would be
    silently ignored: a job meant for a remote engine would run here. A block ``defaults``
    writes serves the pipeline's jobs of the platforms that read it, and is left alone;
    ``docker.host`` names where a job runs, so only a docker job takes it, from anywhere."""
    if not isinstance(platform, str) or platform not in BLOCKS_READ:
        return  # the schema refuses the platform
    refused = [
        block
        for block in ("docker", "slurm", "brev")
        if block in source.data and block not in BLOCKS_READ[platform] and source.sets((block,))
    ]
    for block in refused:
        yield source.problem(
            (block,),
            f"{block}: does not apply to platform {platform} ({ELSEWHERE[platform]}); "
            "remove it, or set the platform that reads it",
            key=True,
        )
    docker = source.data.get("docker")
    host = docker.get("host") if isinstance(docker, dict) else None
    if host and platform != "docker" and "docker" not in refused:
        also = ""
        if _ignored_docker(source) and set(docker) - {"host"}:  # one problem for the block
            also = "; its other options apply to a Slurm job only with slurm.container: docker"
        yield source.problem(
            ("docker", "host"),
            f"docker.host does not apply to platform {platform} ({ELSEWHERE[platform]}); "
            f"remove it, or set platform: docker{also}",
        )


def _docker_args_rules(source: Source) -> Iterator[Problem]:
    """``docker.extra_args`` may not take over what taospec's ``docker run`` sets.

    Docker takes the last of a repeated option, so a second ``--name`` would
    rename the container the record names, a mount at /results would
    shadow (or clash with) the job's results directory, and ``-e`` of a
    variable ``env.set`` may not set would undo what it says (:data:`OWN_VARIABLES`).
    """
    block = source.data.get("docker")
    args = block.get("extra_args") if isinstance(block, dict) else None
    if not isinstance(args, list):
        return
    words = [arg if isinstance(arg, str) else "" for arg in args]
    taken = image_taken(words)
    yield from [source.problem(("docker", "extra_args", taken[0]), taken[1])] if taken else []
    skipped = taken[0] if taken else -1  # one problem for the word
    for index, flag, value in (found for found in docker_options(words) if found[0] != skipped):
        where = ("docker", "extra_args", index)
        if flag in DOCKER_OWN_OPTIONS:
            yield source.problem(where, f"{flag}: {DOCKER_OWN_OPTIONS[flag]}")
        elif flag in dockerargs.SWITCHES and not value and words[index].endswith("="):
            yield source.problem(  # --init=: docker reads the empty value, which is no bool
                where, f"{flag}=: docker run refuses it: {dockerargs.SWITCH_VALUES}"
            )
        elif why := dockerargs.misread(flag, value):
            yield source.problem(where, f"{dockerargs.shown(flag, value)}: {why}")
        elif flag in ("-d", "--detach", "-a", "--attach", "--log-driver", "--restart"):
            yield from _how_it_runs(source, where, flag, value)
        elif flag in ("--label", "-l") and value.partition("=")[0] in _OWN_LABELS:
            label = value.partition("=")[0]
            yield source.problem(
                where, f"{label}: taospec labels the container with the job's id and owner"
            )
        elif flag in ("-e", "--env") and (name := value.partition("=")[0]) in OWN_VARIABLES:
            yield source.problem(where, f"{flag} {name}: {OWN_VARIABLES[name]}")
        elif flag in _REFUSED_OPTIONS:
            yield source.problem(where, f"{flag}: {_REFUSED_OPTIONS[flag]}")
        elif flag == "--ulimit" and (why := ulimit_misread(value)):
            yield source.problem(where, f"--ulimit {value}: docker run refuses it: {why}")
        elif relative := _relative_host_path(flag, value):
            made = "" if flag in _READ_BY_CLI else " (where it is missing, dockerd makes it empty)"
            yield source.problem(
                where,
                f"{flag} {value}: docker reads {relative} from the folder it runs in, not the "
                "job file's, so what the job gets would change with the folder taospec is run "
                f"from{made}; write it as an absolute path",
            )
        elif flag in _MOUNT_OPTIONS and (elsewhere := _target_taken(flag, value)):
            yield source.problem(where, elsewhere)
    yield from _shared_targets(source, words, skipped)
    yield from _memory_limits(source, words, skipped)


ATTACHED = (
    "taospec starts the container detached (docker run -d) and reads its output with docker "
    "logs; attached, the launch would wait for the job and take its output for the "
    "container's id"
)
DETACHED = (
    "the Slurm job runs the container attached and ends with it; detached, the Slurm job "
    "would end at once and leave the container running outside it"
)


def _how_it_runs(source: Source, where: JsonPath, flag: str, value: str) -> Iterator[Problem]:
    """A ``-d``/``--detach``, ``-a``/``--attach``, ``--log-driver`` or ``--restart`` that
    undoes how the platform runs the container and reads its output: once per record (a
    restart policy), detached (docker, brev: ``-d=false``, ``-a``, or a log driver ``docker
    logs`` cannot read) or attached (slurm: ``-d``)."""
    attached = source.data.get("platform") == "slurm"
    if flag == "--restart":
        if value != "no":
            yield source.problem(where, f"--restart {value}: {RESTARTED}")
        return
    if flag == "--log-driver":
        if value == "none" and not attached:
            yield source.problem(where, f"--log-driver none: {UNLOGGED}")
        return
    detached = flag in ("-d", "--detach") and value.lower() not in ("false", "0", "f")
    shown = f"{flag}={value}" if value and flag in ("-d", "--detach") else flag
    if attached:
        if detached:
            yield source.problem(where, f"{shown}: {DETACHED}")
    elif not detached:
        yield source.problem(where, f"{shown}: {ATTACHED}")


RESTARTED = (
    "a job's record holds one run of its container, and taospec records how it ended; a "
    "restart policy would run it again under the same record, over its results. Retry a "
    "failed job with retry: (each attempt a new record)"
)
UNLOGGED = (
    "taospec reads the job's output with docker logs (logs, run -f, a failure's diagnosis, "
    "the copy kept at cancel and prune), and the none driver keeps none of it; leave the "
    "driver to the engine, or choose one docker logs reads (json-file, local)"
)


DOCKER_SHORT_FLAGS = frozenset("diPqt")
"""``docker run``'s one-letter options that take no value; every other letter takes one."""


MOVED_IMAGE = "and the job's image as the command"


def image_taken(words: Sequence[str]) -> tuple[int, str] | None:
    """The index of the word of ``docker.extra_args`` where ``docker run``, which reads the
    first word that is no option or option's value as the image, would read the job's image
    as something else, and why; None when the image stays the image. After an option
    docker run does not know (which may take the next word or not), nothing is judged."""
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            ends = "-- ends docker run's options: it would read what follows as the image"
            return index, f"{ends}, {MOVED_IMAGE}"
        if word == "-" or not word.startswith("-"):
            return index, (
                f"docker run would read {word!r} as the image, {MOVED_IMAGE}; give a value "
                "to its option with = (--privileged=true), or after an option that takes one"
            )
        following = words[index + 1] if index + 1 < len(words) else None
        options = _options(word, following)
        if not all(dockerargs.known(flag) for flag, _, _ in options):
            return None  # docker run refuses it, and may read the next word as its value
        if following is None and options and _wants_value(word, *options[-1][:2]):
            return index, (
                f"{options[-1][0]} takes a value, and as the last of docker.extra_args it would "
                f"take the job's image for it; write {options[-1][0]}=VALUE"
            )
        index += 1 + any(took for _, _, took in options)
    return None


def _wants_value(word: str, flag: str, value: str) -> bool:
    """Whether ``flag``, the last option of ``word``, takes a value the word does not give."""
    if value or word.endswith("="):
        return False
    if flag.startswith("--"):
        return "=" not in word and flag in dockerargs.VALUED
    return flag[1] not in DOCKER_SHORT_FLAGS


def docker_options(
    words: Sequence[str], *, until_image: bool = False
) -> Iterator[tuple[int, str, str]]:
    """Each option ``words`` (``docker.extra_args``) give ``docker run``, with its value and
    the index of the word that names it, read as :func:`_options` reads each word;
    ``until_image``: ``words`` are those after ``docker run``, whose options end at the first
    word that is none (the image) or at ``--``."""
    index = 0
    while index < len(words):
        at = index
        if until_image and (words[index] == "--" or not words[index].startswith("-")):
            return
        following = words[index + 1] if index + 1 < len(words) else None
        options, index = _options(words[index], following), index + 1
        for flag, value, took_next in options:
            index += took_next
            yield at, flag, value


def _options(word: str, following: str | None) -> list[tuple[str, str, bool]]:
    """The options ``word`` gives ``docker run``, each with its value and whether that value
    is the ``following`` word, read as docker reads them: ``--flag=value``, ``--flag value``
    (for the long options in :data:`dockerargs.VALUED`), and letters run together, each of
    :data:`DOCKER_SHORT_FLAGS` alone (or with ``=value``, ``-d=false``) and the first other
    letter with the rest of the word (or the next word) as its value, so that ``-tu0`` is
    ``-t -u 0``."""
    if word.startswith("--"):
        flag, equals, attached = word.partition("=")
        if equals or following is None or flag not in dockerargs.VALUED:
            return [(flag, attached, False)]
        return [(flag, following, True)]
    options = []
    letters = word[1:] if word.startswith("-") else ""
    for index, letter in enumerate(letters):
        if letter in DOCKER_SHORT_FLAGS:
            value = letters[index + 1 :]
            if value.startswith("="):  # -d=false: a value for the switch, ending the run
                options.append((f"-{letter}", value[1:], False))
                break
            options.append((f"-{letter}", "", False))
            continue
        rest = letters[index + 1 :].removeprefix("=")
        if rest or following is None:
            options.append((f"-{letter}", rest, False))
        else:
            options.append((f"-{letter}", following, True))
        break
    return options


ULIMIT_NAMES = frozenset(
    {"core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc",
     "rss", "rtprio", "rttime", "sigpending", "stack"}
)  # fmt: skip
"""The limits ``docker run --ulimit`` knows by name."""
INT64 = re.compile(r"[+-]?[0-9]+")


def ulimit_misread(value: str) -> str | None:
    """Why ``docker run --ulimit`` refuses ``value`` as it reads it: ``name=soft[:hard]``, a
    name it knows, each limit a signed 64-bit integer, the soft one at most the hard one
    (unless that is -1); None when it takes it."""
    name, equals, limits = value.partition("=")
    if not equals:
        return "write name=soft[:hard], e.g. nofile=65536:65536"
    if name not in ULIMIT_NAMES:
        return f"{name!r} is none of the limits it knows ({', '.join(sorted(ULIMIT_NAMES))})"
    numbers = limits.split(":")
    if len(numbers) > 2:
        return "a limit is soft[:hard], two numbers at most"
    if not all(INT64.fullmatch(n) and -(2**63) <= int(n) < 2**63 for n in numbers):
        return "each limit is a whole number of 64 bits (-1 for unlimited)"
    soft, hard = int(numbers[0]), int(numbers[-1])
    if hard != -1 and soft > hard:
        return f"the soft limit {soft} is above the hard limit {hard}"
    return None


def _relative_host_path(flag: str, value: str) -> str | None:
    """The relative path of this machine that an ``--env-file``, a seccomp profile, or the
    source of a bind ``-v``/``--mount``, names: docker run reads it from its own working
    folder."""
    if flag == "--env-file":
        path = value
    elif flag == "--security-opt":
        path = seccomp_profile(value) or ""
    elif flag in ("-v", "--volume", "--mount"):
        path = _mount_source(flag, value)
    else:
        return None
    if flag not in _READ_BY_CLI and path not in (".", "..") and not path.startswith(("./", "../")):
        return None  # a volume's name, or a path docker itself refuses
    return path if path and not path.startswith(("/", "{")) else None


def bind_source(flag: str, value: str) -> str | None:
    """The absolute path of the machine the engine runs on that a ``-v``/``--volume`` or a
    ``--mount type=bind`` value mounts; None for a named volume, a tmpfs, or a relative path
    (another rule says what docker makes of that)."""
    if flag == "--mount" and _mount_fields(value).get("type", "").lower() != "bind":
        return None
    path = _mount_source(flag, value) if flag in ("-v", "--volume", "--mount") else ""
    return path if path.startswith("/") else None


def _mount_fields(value: str) -> dict[str, str]:
    """A ``--mount`` value's fields as docker reads them, none where it reads none (another
    rule refuses the value)."""
    fields = dockerargs.mount_fields(value)
    return fields if isinstance(fields, dict) else {}


def _mount_source(flag: str, value: str) -> str:
    """The source a ``-v``/``--volume`` or ``--mount`` value names, as written ('' if none)."""
    if flag == "--mount":
        fields = _mount_fields(value)
        return fields.get("source", fields.get("src", ""))
    return value.partition(":")[0]


def device_path(flag: str, value: str) -> str | None:
    """The device of the machine the engine runs on that a ``--device`` value (``HOST[:CONTAINER
    [:PERMISSIONS]]``) or a ``--device-read-bps``-like one (``HOST:RATE``) names; None for a
    CDI name (``nvidia.com/gpu=all``)."""
    if flag not in DEVICE_OPTIONS:
        return None
    path = value.partition(":")[0]
    return path if path.startswith("/") else None


THROTTLES = ("--device-read-bps", "--device-write-bps", "--device-read-iops", "--device-write-iops")
"""The options that throttle a device's reads or writes: ``/dev/...:RATE``."""
DEVICE_OPTIONS = ("--device", *THROTTLES)
"""The options of ``docker run`` that name a device of the machine the engine runs on."""

_READ_BY_CLI = ("--env-file", "--security-opt")
"""The options whose file the docker CLI reads itself, and sends the engine what it holds."""


def seccomp_profile(value: str) -> str | None:
    """The file a ``--security-opt`` value names as its seccomp profile, which the docker
    CLI reads (``seccomp=builtin`` and ``seccomp=unconfined`` name none)."""
    pair = dockerargs.security_opt(value)
    if pair is None or pair[0] != "seccomp" or pair[1] in ("builtin", "unconfined"):
        return None
    return pair[1]


def _target_taken(flag: str, value: str) -> str | None:
    """Why a ``-v``, ``--mount`` or ``--tmpfs`` value of ``docker.extra_args`` cannot mount
    where it does: at the job's results, or where the container keeps its own."""
    if _mount_target(flag, value) is not None:
        return (
            f"{value} mounts at or under /results, where the job's results directory is "
            "mounted; mount elsewhere, e.g. /data"
        )
    owned = _containers_own(_written_target(flag, value))
    return f"{flag} {value}: {owned}" if owned else None


def _mount_target(flag: str, value: str) -> str | None:
    """The target of a ``-v`` or ``--mount`` value when it is at or under /results."""
    target = mount_target_of(flag, value)
    inside = target == RESULTS_TARGET or target.startswith(RESULTS_TARGET + "/")
    return target if inside else None


def mount_target_of(flag: str, value: str) -> str:
    """Where in the container a ``-v``, ``--mount`` or ``--tmpfs`` value mounts, as the engine
    reads the path (``/data/`` and ``//data`` are ``/data``); '' where it names none."""
    target = _written_target(flag, value)
    return mount_target_path(target) if target.startswith("/") else ""


def _written_target(flag: str, value: str) -> str:
    """The target a ``-v``, ``--mount`` or ``--tmpfs`` value names, as written."""
    if flag == "--mount":
        fields = _mount_fields(value)
        return next((fields[k] for k in ("target", "dst", "destination") if k in fields), "")
    parts = value.split(":")
    return parts[1] if len(parts) > 1 and flag != "--tmpfs" else parts[0]


_MEMORY_FLAGS = {
    "-m": "memory",
    "--memory": "memory",
    "--memory-swap": "swap",
    "--memory-reservation": "reservation",
}


def _memory_limits(source: Source, words: Sequence[str], skipped: int) -> Iterator[Problem]:
    """``--memory``, ``--memory-swap`` and ``--memory-reservation`` as the engine weighs them
    together, the last of each counting: swap (memory and swap together) needs a memory
    limit and is no less than it; a reservation is no more than the limit."""
    last: dict[str, tuple[int, str, int]] = {}
    for index, flag, value in docker_options(words):
        kind = _MEMORY_FLAGS.get(flag)
        if index == skipped or kind is None:
            continue
        size = -1 if kind == "swap" and value == "-1" else dockerargs.size_bytes(value)
        if size is None:
            return  # refused as it is written
        last[kind] = (index, dockerargs.shown(flag, value), size)
    memory = last["memory"][2] if "memory" in last else 0
    if "swap" in last and last["swap"][2] > 0 and (not memory or last["swap"][2] < memory):
        index, shown, _ = last["swap"]
        why = (
            "it is memory and swap together, so no less than --memory (-1: swap without limit)"
            if memory
            else "the engine limits swap only with memory: set --memory too"
        )
        yield source.problem(
            ("docker", "extra_args", index), f"{shown}: docker run refuses it: {why}"
        )
    if "reservation" in last and 0 < memory < last["reservation"][2]:
        index, shown, _ = last["reservation"]
        yield source.problem(
            ("docker", "extra_args", index),
            f"{shown}: docker run refuses it: a reservation is no more than the --memory limit",
        )


def _shared_targets(source: Source, words: Sequence[str], skipped: int) -> Iterator[Problem]:
    """A mount of ``docker.extra_args`` at a target already taken, by ``mounts:`` or an
    earlier option: the engine refuses the container ("Duplicate mount point"). The docker
    CLI reads a ``-v`` value once however often it is given (``mounts:`` are ``-v`` values
    too), so a repeat of the very same one takes nothing."""
    taken: dict[str, str] = {}
    volumes: set[str] = set()
    mounts = source.data.get("mounts")
    for index, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        if isinstance(mount, dict) and isinstance(mount.get("target"), str):
            taken.setdefault(mount_target_path(mount["target"]), f"mounts[{index}]")
            ro = ":ro" if mount.get("readonly") else ""
            volumes.add(f"{mount.get('source')}:{mount['target']}{ro}")
    for index, flag, value in docker_options(words):
        if index == skipped or flag not in _MOUNT_OPTIONS or _target_taken(flag, value):
            continue  # a mount at /results, or where the container keeps its own, is refused
        if flag in ("-v", "--volume"):
            if value in volumes:
                continue
            volumes.add(value)
        target = mount_target_of(flag, value)
        if target in taken:
            yield source.problem(
                ("docker", "extra_args", index),
                f"{flag} {value}: {target} is already the target of {taken[target]}, and "
                "docker run mounts nothing twice at one place; mount it elsewhere",
            )
        elif target:
            taken[target] = f"docker.extra_args[{index}]"


FREE_GPU_PLATFORMS = ("docker", "local", "brev")
"""Where ``gpus: {free: N}`` can read the host's GPU occupancy at submit (not Slurm: the
host is chosen by the scheduler after the submit)."""


SLURM_OWN_OPTIONS = {"--job-name": "-J", "--output": "-o", "--chdir": "-D", "--nodes": "-N",
                     "--ntasks-per-node": "", "--tasks-per-node": "", "--ntasks": "-n",
                     "--parsable": ""}  # fmt: skip
"""sbatch options the slurm platform sets itself (the job name is how a lost answer is found;
--tasks-per-node is sbatch's other name for --ntasks-per-node)."""


SBATCH_PATH = re.compile(r"/[A-Za-z0-9_@+=:,./-]*")
"""A path an #SBATCH line can carry: sbatch reads those lines itself, not through a shell."""


SLURM_TIME = re.compile(r"(?:(?P<days>[0-9]+)-)?(?P<parts>[0-9]+(?::[0-9]+){0,2})")
SLURM_MINUTES_END = 35_791_394
"""Slurm keeps a time limit of up to 35,791,393 minutes (about 68 years) as written; sbatch
wraps a longer one to another limit, reads it as none, or refuses it."""


def slurm_minutes(time: str) -> int | None:
    """The minutes Slurm reads in a ``--time`` of numbers (seconds round up to a minute:
    ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``), or None for another form."""
    found = SLURM_TIME.fullmatch(time)
    if found is None:
        return None
    numbers = [int(n) for n in found["parts"].split(":")]
    if found["days"] is not None:  # D-H, D-H:M or D-H:M:S
        hours, minutes, seconds = (*numbers, 0, 0)[:3]
    elif len(numbers) == 3:  # H:M:S
        hours, minutes, seconds = numbers
    else:  # M or M:S
        hours, minutes, seconds = 0, numbers[0], (*numbers, 0)[1]
    return int(found["days"] or 0) * 1440 + hours * 60 + minutes + -(-seconds // 60)


def _slurm_time_rules(source: Source, time: object) -> Iterator[Problem]:
    minutes = slurm_minutes(time) if isinstance(time, str) else None
    if minutes == 0:
        yield source.problem(
            ("slurm", "time"),
            f"slurm.time {time} asks Slurm for no time limit, which a reader of the plan would "
            "not take it for: write UNLIMITED",
        )
    elif minutes is not None and minutes >= SLURM_MINUTES_END:
        yield source.problem(
            ("slurm", "time"),
            f"slurm.time {time} is {minutes} minutes, past the {SLURM_MINUTES_END - 1:,} "
            "(about 68 years) Slurm keeps as written: sbatch would keep another limit or none; "
            "write UNLIMITED for no limit",
        )


def _slurm_rules(source: Source) -> Iterator[Problem]:
    """What a Slurm job needs beyond the schema."""
    data = source.data
    if data.get("gpus") == "all":
        yield source.problem(
            ("gpus",),
            "Slurm allocates GPUs by count: list one id per GPU the job needs on each node "
            "(e.g. [0, 1] for two); Slurm picks which",
        )
    if "user" in data and data["user"] != "host":
        yield source.problem(
            ("user",),
            "a Slurm job runs as the account that submits it (the user in slurm.login, or "
            "you); leave user: out",
        )
    root = data.get("results_root")
    if isinstance(root, str) and not SBATCH_PATH.fullmatch(root):
        yield source.problem(
            ("results_root",),
            "the sbatch script names its output file and working directory in #SBATCH lines, "
            "which sbatch reads without a shell: use only letters, digits and _@+=:,./- here",
        )
    block = data.get("slurm") if isinstance(data.get("slurm"), dict) else {}
    yield from _slurm_time_rules(source, block.get("time"))
    yield from _extra_sbatch_rules(source, block.get("extra_sbatch"))
    container = slurm_container(data)
    if container == PYXIS:
        yield from _pyxis_mount_rules(source)
    docker = data.get("docker")
    if _ignored_docker(source) and not (isinstance(docker, dict) and docker.get("host")):
        yield source.problem(  # with a host, docker.host's problem speaks for the block
            ("docker",),
            f"docker: does not apply to a Slurm job whose slurm.container is {container} (only "
            "docker run reads its options); remove it, or set slurm.container: docker",
            key=True,
        )
    if container == "none" and data.get("mounts"):
        yield source.problem(
            ("mounts",),
            "a Slurm job with slurm.container: none runs its command on the node directly, "
            "which sees the shared filesystem as it is; mounts need a container",
        )


ARRAY_REFUSAL = (
    "taospec runs one Slurm job per target and follows the one job id sbatch prints, so the "
    "other tasks of an array job would run unrecorded; for a sweep, write a pipeline job "
    "with matrix: (one target, and one Slurm job, per value)"
)


def _ignored_docker(source: Source) -> bool:
    """Whether the job is a Slurm job that writes a docker: block its container runtime
    (``slurm.container`` pyxis or none) would ignore."""
    data = source.data
    return (
        slurm_container(data) in (PYXIS, "none") and "docker" in data and source.sets(("docker",))
    )


def _extra_sbatch_rules(source: Source, lines: Any) -> Iterator[Problem]:
    """extra_sbatch may not take over the options taospec sets nor make an array job (``-a``,
    ``--array`` or a start of it, which sbatch takes for it), and each item must read, as
    sbatch reads an #SBATCH line, as one option it knows and at most one value."""
    owned = {flag for pair in SLURM_OWN_OPTIONS.items() for flag in pair if flag}
    for index, line in enumerate(lines if isinstance(lines, list) else []):
        if not isinstance(line, str):
            continue
        flag = re.match(r"--[A-Za-z-]+|-[^-\s=][^\s=]*", line)
        word = flag.group(0) if flag else ""
        if word.startswith("--"):
            names = _sbatch_names(word)
            options = names if len(names) == 1 else []  # several: refused as ambiguous below
        else:
            options = _sbatch_flags(word)
        for option in options:
            if option not in owned and option not in {"-a", "--array"}:
                continue
            if option == word or (len(options) == 1 and not word.startswith("--")):
                said = option
            elif option == "--array":
                said = word  # sbatch takes a start of it for it
            elif word.startswith("--"):
                said = (
                    f"{word} starts {option}, and sbatch takes the start of a long option for "
                    f"the option; {option}"
                )
            else:
                said = f"sbatch reads {word} as {' '.join(options)} (and a value), and {option}"
            refusal = (
                f": {ARRAY_REFUSAL}"
                if option in {"-a", "--array"}
                else " is set by taospec: the job is named after its id, writes its output "
                "into its results directory and runs one task per node"
            )
            yield source.problem(("slurm", "extra_sbatch", index), said + refusal)
        why = _sbatch_misreads(line) or _sbatch_unknown_option(line) or _sbatch_value_misread(line)
        if why:
            yield source.problem(("slurm", "extra_sbatch", index), why)


SBATCH_NO_VALUE = frozenset(
    {
        "--contiguous", "--hold", "-H", "--ignore-pbs", "--no-requeue", "--overcommit", "-O",
        "--oversubscribe", "-s", "--parsable", "--quiet", "-Q", "--reboot", "--requeue",
        "--spread-job", "--test-only", "--use-min-nodes", "--verbose", "-v", "--wait", "-W",
        "--help", "-h", "--usage", "--version", "-V", "--no-kill", "-k",
    }
)  # fmt: skip
"""sbatch's options that take no value as a word of their own (sbatch --help)."""
SBATCH_EQUALS_VALUE = frozenset({"--exclusive", "--get-user-env", "--nice", "--propagate"})
"""sbatch's options whose value is optional, so it is read only after '='."""
SBATCH_OPTIONS = frozenset(
    {
        "--account", "--acctg-freq", "--array", "--batch", "--bb", "--bbf", "--begin", "--chdir",
        "--cluster", "--cluster-constraint", "--clusters", "--comment", "--constraint",
        "--container", "--context", "--contiguous", "--core-spec", "--cores-per-socket",
        "--cpu-freq", "--cpus-per-gpu", "--cpus-per-task", "--deadline", "--delay-boot",
        "--dependency", "--distribution", "--error", "--exclude", "--exclusive", "--export",
        "--export-file", "--extra-node-info", "--get-user-env", "--gid", "--gpu-bind",
        "--gpu-freq", "--gpus", "--gpus-per-node", "--gpus-per-socket", "--gpus-per-task",
        "--gres", "--gres-flags", "--help", "--hint", "--hold", "--ignore-pbs", "--input",
        "--job-name", "--kill-on-invalid-dep", "--licenses", "--mail-type", "--mail-user",
        "--mcs-label", "--mem", "--mem-bind", "--mem-per-cpu", "--mem-per-gpu", "--mincpus",
        "--network", "--nice", "--no-kill", "--no-requeue", "--nodefile", "--nodelist", "--nodes",
        "--ntasks", "--ntasks-per-core", "--ntasks-per-gpu", "--ntasks-per-node",
        "--ntasks-per-socket", "--ntasks-per-tres", "--open-mode", "--output", "--overcommit",
        "--oversubscribe", "--parsable", "--partition", "--power", "--prefer", "--priority",
        "--profile", "--propagate", "--qos", "--quiet", "--reboot", "--requeue", "--reservation",
        "--signal", "--sockets-per-node", "--spread-job", "--switches", "--tasks-per-node",
        "--test-only", "--thread-spec", "--threads-per-core", "--time", "--time-min", "--tmp",
        "--uid", "--usage", "--use-min-nodes", "--verbose", "--version", "--wait",
        "--wait-all-nodes", "--wckey", "--wrap", "-A", "-a", "-B", "-b", "-C", "-c", "-D", "-d",
        "-e", "-F", "-G", "-H", "-h", "-i", "-J", "-k", "-L", "-M", "-m", "-N", "-n", "-O", "-o",
        "-p", "-Q", "-q", "-S", "-s", "-t", "-V", "-v", "-W", "-w", "-x",
    }
)  # fmt: skip
"""sbatch 22.05's options, long and short (the option table of Slurm 22.05's slurm_opt.c)."""
SBATCH_NEWER_OPTIONS = {
    "--autocomplete": "23.02", "--container-id": "23.02", "--extra": "23.02",
    "--tres-per-task": "23.02", "--tres-bind": "23.11", "--resv-ports": "24.05",
    "--segment": "24.05", "--stepmgr": "24.05", "--oom-kill-step": "24.11",
    "--external": "25.05", "--consolidate-segments": "25.11", "--resources": "25.11",
    "--spread-segments": "25.11", "--container-type": "26.05", "--mem-update": "26.05",
}  # fmt: skip
"""The options sbatch gained after 22.05, to Slurm 26.05's slurm_opt.c, with the Slurm that
added each: the cluster may run it, so these are taken, and a start they make ambiguous is
refused."""
PYXIS_OPTIONS = frozenset(
    {
        "--container-image", "--container-mounts", "--container-workdir", "--container-name",
        "--container-save", "--container-mount-home", "--no-container-mount-home",
        "--container-remap-root", "--no-container-remap-root", "--container-entrypoint",
        "--no-container-entrypoint", "--container-entrypoint-log", "--container-writable",
        "--container-readonly", "--container-env",
    }
)  # fmt: skip
"""The options pyxis (NVIDIA's Slurm plugin for containers) adds to sbatch and srun."""
SBATCH_SINCE = {**dict.fromkeys(SBATCH_OPTIONS, "22.05"), **SBATCH_NEWER_OPTIONS}
"""Every option an sbatch from 22.05 on takes, with the first Slurm whose sbatch does."""


def _sbatch_misreads(line: str) -> str | None:
    """Why sbatch would refuse ``#SBATCH <line>``, or read less of it than is written: it
    splits the line into words itself (:func:`sbatch_words`) and takes an option and at
    most one value, which an option that takes none, or takes it only after '=', never
    reads from the next word."""
    try:
        words, cut = sbatch_words(line)
    except ValueError:
        return "sbatch refuses an #SBATCH line with an unmatched quote"
    if cut:
        return (
            f"sbatch reads an unquoted # as the start of a comment, so it would read "
            f'{words[-1]!r} and drop {cut!r}; quote the value (--comment="run#3") or write \\#'
        )
    names = _sbatch_names(words[0]) if len(words) == 2 else []
    option = names[0] if len(names) == 1 else ""
    if option in SBATCH_NO_VALUE | SBATCH_EQUALS_VALUE:
        how = (
            f"write {words[0]}={words[1]}" if option in SBATCH_EQUALS_VALUE else "it takes no value"
        )
        return f"sbatch reads {words[0]} alone, so {words[1]!r} would be a word it refuses: {how}"
    stray = words[2:] or (words[1:] if words and "=" in words[0] else [])
    if stray:
        return (
            f"sbatch reads an #SBATCH line as one option and at most one value, so {stray[0]!r} "
            'would be a word it refuses; quote a value that holds spaces (--comment="a b")'
        )
    return None


def _sbatch_names(option: str) -> list[str]:
    """The options sbatch could take ``option`` (as written, without its value) for: the one
    of that name, else each long option it starts. getopt_long takes a start of one long
    option alone for that one, and refuses a start of several: the one pair of names Slurm
    gives an option, --ntasks-per-node and --tasks-per-node, shares no start."""
    if option in SBATCH_SINCE:
        return [option]
    return sorted(name for name in SBATCH_SINCE if name.startswith(option))


def _sbatch_flags(word: str) -> list[str]:
    """The short options the word ``word`` gives sbatch (``-HN2``: -H, then -N with the
    value 2): getopt reads each letter after one that takes no value as an option of its
    own, and the rest of the word after one that takes a value (or one it knows not) as
    that one's value."""
    flags = []
    for letter in word[1:]:
        flags.append(f"-{letter}")
        if flags[-1] not in SBATCH_NO_VALUE:
            break
    return flags


def _sbatch_unknown_option(line: str) -> str | None:
    """Why sbatch would refuse the option ``#SBATCH <line>`` starts with ('-pgpu' is -p's):
    one no sbatch from 22.05 knows, or a start of several long options; or why taospec
    refuses one of pyxis's, which a cluster with pyxis adds to sbatch's."""
    words, _ = sbatch_words(line)  # _sbatch_misreads read the line first
    first = words[0] if words else ""
    word = first.partition("=")[0] if first.startswith("--") else first[:2]
    if word in PYXIS_OPTIONS:
        return (
            f"{word} is pyxis's, which would run taospec's batch script itself in a container; "
            "taospec gives the job's container to srun (slurm.container: pyxis, with image:, "
            "mounts: and env:)"
        )
    starts = _sbatch_names(word)
    short = word in SBATCH_NO_VALUE and not first.startswith("--") and first[2:3] not in "="
    grouped = _sbatch_flags(first) if short else []
    unknown = [flag for flag in grouped if flag not in SBATCH_SINCE]
    if unknown:
        given = " ".join(grouped)
        return f"sbatch reads {first} as {given}, and knows no option {unknown[0]}"
    if len(starts) == 1 or not re.match(r"--?[A-Za-z]", word):
        return None  # an option sbatch knows, or no option, which the schema refuses
    if starts:
        since = sorted(SBATCH_SINCE[name] for name in starts)[1]
        who = "sbatch refuses" if since == "22.05" else f"sbatch {since} and later refuse"
        return (
            f"{who} {word} as ambiguous: it starts {', '.join(starts[:-1])} and {starts[-1]}; "
            "write the option out"
        )
    # the names are compared without their dashes, which every long option shares
    names = {name[2:]: name for name in SBATCH_SINCE if name.startswith("--")}
    guess = closest(word[2:], sorted(names)) if word.startswith("--") else None
    hint = f" (did you mean {names[guess]}?)" if guess else ""
    return f"sbatch knows no option {word} and would refuse the job{hint}"


SBATCH_SIZE = r"[ \t\n\v\f\r]*(?:\+?(?P<count>[0-9]+)|-0+)(?:[KkMmGgTt][Bb]?)?"
"""A size sbatch reads: C's strtoll (blanks, a sign, decimal digits; below 0 refused), then
megabytes, or K, M, G or T with an optional B."""
LLONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


ValueReader = Callable[[str], str | None]
"""Why sbatch would refuse an option's value or keep another, or None."""


def _sbatch_size(value: str) -> str | None:
    """``str_to_mbytes`` in Slurm's proc_args.c (--mem and the like)."""
    found = re.fullmatch(SBATCH_SIZE, value)
    if found and int(found["count"] or 0) <= LLONG_MAX:
        return None
    return (
        "sbatch refuses it: a size is a whole number of megabytes, or of K, M, G or T with "
        "an optional B after it (512M, 16GB), at most 2**63-1"
    )


SBATCH_TIME = rf"{SLURM_TIME.pattern}|[0-9]+-|-[0-9]+|(?i:infinite|unlimited)"
"""A time sbatch's parser takes (``time_str2secs`` in Slurm's parse_time.c, the same from
22.05 on): :data:`SLURM_TIME`'s forms, ``D-`` (D days), ``-D`` (-1 for none) and the words."""


def _sbatch_time(value: str) -> str | None:
    takes = "it takes minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S in whole numbers, or UNLIMITED"
    if not re.fullmatch(SBATCH_TIME, value):
        return f"sbatch refuses it: {takes}"
    if value.startswith("-"):  # sbatch reads -1 as no limit, and other days below 0 wrap
        wraps = value != "-1" and int(value) != 0
    else:  # 5- is five days
        minutes = slurm_minutes(value + "0" if value.endswith("-") else value)
        wraps = minutes is not None and minutes >= SLURM_MINUTES_END
    if wraps:
        return (
            f"sbatch would keep another limit: Slurm keeps up to {SLURM_MINUTES_END - 1:,} "
            f"minutes (about 68 years) and no days below 0; {takes}"
        )
    return None


SBATCH_COUNT = r"[ \t\n\v\f\r]*[+-]?[0-9]+"
"""A count as sbatch reads it (``parse_int`` in Slurm's proc_args.c: C's strtol, all of it)."""


def _sbatch_count(value: str, least: int = 1) -> str | None:
    takes = f"it takes a whole number from {least} to {INT_MAX - 1:,}"
    if not re.fullmatch(SBATCH_COUNT, value) or not least <= int(value) < LLONG_MAX:
        return f"sbatch refuses it: {takes}"
    if int(value) >= INT_MAX:
        return f"sbatch 22.05 would keep it cut to 32 bits, and 23.02 on refuses it: {takes}"
    return None


SIGNAL_NAMES = frozenset({"HUP", "INT", "QUIT", "ABRT", "KILL", "ALRM", "TERM", "CHLD", "USR1",
                          "USR2", "PIPE", "URG", "CONT", "STOP", "TSTP", "TTIN", "TTOU",
                          "XCPU"})  # fmt: skip
"""The signal names sbatch knows (CHLD and PIPE from Slurm 23.11), with or without SIG."""
SBATCH_SIGNAL = r"(?i:R?B?R?):?(?P<signal>[^@]*)(?:@(?P<time>(?:[ \t\n\v\f\r]*[+-]?[0-9]+)?))?"
"""``get_signal_opts`` in Slurm's proc_args.c: R and B flags, a ':', a signal, ``@`` seconds."""


def _sbatch_signal(value: str) -> str | None:
    takes = (
        "it takes [{R|B}:]<signal>[@<seconds>], a signal name such as USR1 or SIGTERM or a "
        "number from 1 to 65535, and seconds from 0 to 65535"
    )
    found = re.fullmatch(SBATCH_SIGNAL, value)
    signal = found["signal"] if found else ""
    name = signal.strip(SBATCH_BLANKS).upper().removeprefix("SIG")
    named = signal.isascii() and name in SIGNAL_NAMES
    number = re.fullmatch(SBATCH_COUNT, signal.rstrip(SBATCH_BLANKS))
    if not found or not (named or number) or not 0 <= int(found["time"] or 0) <= 0xFFFF:
        return f"sbatch refuses it: {takes}"
    if number and not 1 <= int(number[0]) <= 0xFFFF:
        refused = int(number[0]) % 0x10000 == 0
        return f"sbatch {'refuses it' if refused else 'would keep another signal'}: {takes}"
    return None


def _sbatch_keyword(*words: str, initial: bool = False, listed: bool = False) -> ValueReader:
    """A reader of one of ``words`` in any case (with ``initial``, of its first letter,
    all sbatch reads; with ``listed``, of a comma-separated list sbatch takes when one of
    its words is one it knows, ignoring the others)."""

    def read(value: str) -> str | None:
        given = [word for word in value.split(",") if word] if listed else [value]
        known = {word[:1] if initial else word.lower() for word in words}
        keys = [word[:1] if initial else word for word in given]
        if any(key.isascii() and key.lower() in known for key in keys):
            return None
        return (
            f"sbatch refuses it: it takes {'one or more of ' if listed else ''}"
            f"{', '.join(words[:-1])} or {words[-1]}{' (or a start of it)' if initial else ''}"
        )

    return read


def _or_empty(read: ValueReader) -> ValueReader:
    """``read``, for an option sbatch also takes an empty value for."""
    return lambda value: None if value == "" else read(value)


SBATCH_COUNT_OPTIONS = ("--cpus-per-task", "--mincpus", "--cpus-per-gpu", "--cores-per-socket",
                        "--sockets-per-node", "--threads-per-core", "--ntasks-per-core",
                        "--ntasks-per-socket", "--ntasks-per-gpu", "--ntasks-per-tres",
                        "--thread-spec")  # fmt: skip
"""sbatch's options that take a count of 1 or more (``parse_int`` in Slurm's proc_args.c)."""
MAIL_TYPES = ("NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT",
              "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50",
              "ARRAY_TASKS")  # fmt: skip
"""The words --mail-type knows (``parse_mail_type`` in Slurm's proc_args.c)."""
SBATCH_VALUE_READERS: dict[str, ValueReader] = {
    **dict.fromkeys(("--mem", "--mem-per-cpu", "--mem-per-gpu", "--tmp"), _sbatch_size),
    **dict.fromkeys(("--time", "--time-min"), _sbatch_time),
    **dict.fromkeys(SBATCH_COUNT_OPTIONS, _sbatch_count),
    "--core-spec": _or_empty(lambda value: _sbatch_count(value, least=0)),
    "--signal": _sbatch_signal,
    "--mail-type": _sbatch_keyword(*MAIL_TYPES, listed=True),
    "--open-mode": _sbatch_keyword("append", "truncate", initial=True),
    "--exclusive": _or_empty(  # allocation from Slurm 26.05, topo from 24.05
        _sbatch_keyword("exclusive", "oversubscribe", "user", "mcs", "topo", "allocation")
    ),
    "--kill-on-invalid-dep": _sbatch_keyword("yes", "no"),
}
"""How sbatch's own parser reads the value of each of these options, the same on every
cluster (Slurm's slurm_opt.c and proc_args.c; a word a newer Slurm knows is taken): why
it would refuse a value or keep another, or None."""
SBATCH_SHORT = {"-t": "--time", "-c": "--cpus-per-task", "-S": "--core-spec"}
SBATCH_OPTIONAL_VALUE = frozenset({"--exclusive"})


def _sbatch_option(words: Sequence[str]) -> tuple[str, str, str | None]:
    """The option as written, the one of :data:`SBATCH_VALUE_READERS` sbatch takes it for
    (empty for none; see :func:`_sbatch_names`), and its value (None for none: '-c2',
    '-c 2', '--cpus-per-task=2' and '--cpus-per-task 2')."""
    first = words[0] if words else ""
    following = words[1] if len(words) == 2 else None
    if first[:2] in SBATCH_SHORT:
        return first[:2], SBATCH_SHORT[first[:2]], first[2:] or following
    option, equals, value = first.partition("=")
    names = _sbatch_names(option)
    name = names[0] if len(names) == 1 and names[0] in SBATCH_VALUE_READERS else ""
    return option, name, value if equals else following


def _sbatch_value_misread(line: str) -> str | None:
    """Why sbatch's parser would refuse the value an option of :data:`SBATCH_VALUE_READERS`
    is given in ``#SBATCH <line>``, or keep another, on any cluster; whether a node has that
    much is the cluster's to say."""
    words, _ = sbatch_words(line)  # _sbatch_misreads read the line first
    option, name, value = _sbatch_option(words)
    if not name or (value is None and name in SBATCH_OPTIONAL_VALUE):
        return None
    if value is None:
        return (
            f"{option} takes a value: alone, sbatch would take the first word of the next "
            "#SBATCH line for it"
        )
    why = SBATCH_VALUE_READERS[name](value)
    return f"{option} {value!r}: {why}" if why else None


SBATCH_BLANKS = " \t\n\v\f\r"


def sbatch_words(line: str) -> tuple[list[str], str]:
    """The words sbatch reads in ``#SBATCH <line>``, and what an unquoted ``#`` inside a
    word cut off (empty when none did).

    sbatch reads the line itself, not as a shell would: '...' and "..." join alike, a
    backslash keeps the next character (in single quotes too) but ends the word at a blank
    outside quotes, and an unquoted ``#`` ends the line, also in the middle of a word.
    Raises ValueError for an unmatched quote, which sbatch refuses.
    """
    words: list[str] = []
    at, end = 0, len(line)
    while True:
        while at < end and line[at] in SBATCH_BLANKS:
            at += 1
        if at == end or line[at] == "#":
            return words, ""
        word, quote = "", ""
        while at < end and (quote or line[at] not in SBATCH_BLANKS):
            char = line[at]
            if char == "\\":
                at += 1
                if at < end and (quote or line[at] not in SBATCH_BLANKS):
                    word, at = word + line[at], at + 1
            elif char == quote:
                quote, at = "", at + 1
            elif not quote and char in "'\"":
                quote, at = char, at + 1
            elif not quote and char == "#":
                return [*words, word], line[at:]
            else:
                word, at = word + char, at + 1
        if quote:
            raise ValueError(f"unmatched {quote}")
        words.append(word)


def _pyxis_mount_rules(source: Source) -> Iterator[Problem]:
    """Pyxis separates mounts with ',' and their fields with ':'."""
    root = source.data.get("results_root")
    if isinstance(root, str) and ("," in root or ":" in root):
        yield source.problem(
            ("results_root",),
            "pyxis's --container-mounts mounts the results directory at /results and cannot "
            "carry a path with ',' or ':'",
        )
    mounts = source.data.get("mounts")
    for index, mount in enumerate(mounts if isinstance(mounts, list) else []):
        for key in ("source", "target"):
            value = mount.get(key) if isinstance(mount, dict) else None
            if isinstance(value, str) and ("," in value or ":" in value):
                yield source.problem(
                    ("mounts", index, key),
                    "pyxis's --container-mounts cannot carry a path with ',' or ':'",
                )


def _passed_as_literal(name: str, value: str, fill: Callable[[str], str]) -> bool:
    """Whether ``env.set``'s ``name: value`` carries a credential: the value, or the
    ``NAME=value`` word the plan passes (``AUTHORIZATION=x`` reads as a header)."""
    return bool(secret_literals(value, fill=fill) or secret_literals(f"{name}={value}", fill=fill))


def _image_rules(source: Source, images: Images) -> Iterator[Problem]:
    image = source.data.get("image")
    if isinstance(image, str) and (why := schema.image_name_too_long(image)):
        yield source.problem(("image",), why)
    if isinstance(image, dict) and isinstance(image.get("versions_key"), str):
        try:
            resolved = images.resolve(image["versions_key"])
        except LookupError as exc:
            yield source.problem(("image", "versions_key"), str(exc))
            return
        found = secret_literals(resolved)
        if found:
            yield source.problem(
                ("image", "versions_key"),
                f"names an image that holds what looks like a credential ({found[0]}) in "
                "versions.yaml; a registry's credentials belong to docker login, not the name",
            )


@lru_cache(maxsize=256)
def split_command(command: str) -> tuple[str, ...]:
    """``command``'s words as :func:`shlex.split` makes them (checking and building share them)."""
    return tuple(shlex.split(command))


_OPERATOR = re.compile(r"[();<>|&]+\Z")


def shell_syntax(command: str) -> str | None:
    """What in ``command`` only a shell understands (a line break, or an operator such as
    ``&&`` or ``<<`` outside quotes), which :func:`split_command` would turn into words."""
    if "\n" in command.strip():
        return "a line break"
    lexer = shlex.shlex(command, posix=False, punctuation_chars=True)
    lexer.whitespace_split = True
    return next((repr(token) for token in lexer if _OPERATOR.match(token)), None)
