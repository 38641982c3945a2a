"""Reading YAML safely while remembering where every value came from, and writing it back.

The loader refuses what a job file should never contain (duplicate keys,
files over 1 MiB, bytes that are not UTF-8, aliases that expand past what a
file may hold, nesting deeper than :data:`MAX_DEPTH`, integers longer than
:data:`MAX_INT_DIGITS` digits) and keeps the node tree so
that a JSON path can be turned back into the line and column a person
should look at.

"""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taospec.diagnostics import JsonPath, Problem, SpecError, shown_file
from taospec.errors import InvalidInput

if TYPE_CHECKING:  # the library itself is imported where it is first used
    import yaml


MAX_BYTES = 1024 * 1024
MAX_NODES = 100_000
MAX_TEXT = MAX_BYTES
"""How many characters of text (its scalars, each counted wherever an alias repeats it) a
document may expand to: what a job file without aliases may hold at most."""
MAX_DEPTH = 64
"""How many levels a job file may nest mappings and lists (its spec is the deepest part)."""
MAX_INT_DIGITS = 640
"""The most decimal digits an integer may have. Every value is written out as text (the spec
file, the plan, messages), and Python refuses to write a longer integer when its limit is
set as low as it goes (4,300 digits by default). No job needs one near it."""
TAO_FLOAT = re.compile(
    r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*[eE][-+]?[0-9]+
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
"""The plain scalars TAO reads as floats. TAO reads its experiment spec with OmegaConf,
which adds this pattern to YAML's floats: ``1e-4``, ``1e3`` and ``1_0e3`` are numbers to
it (text to PyYAML, whose floats need a dot and a signed exponent); and it reads no dates,
so ``2024-01-01`` is text. See :data:`TaoReads`."""
FLOAT_STARTS = "-+0123456789."
"""The characters a :data:`TAO_FLOAT` starts with."""
STR_TAG = "tag:yaml.org,2002:str"
FLOAT_TAG = "tag:yaml.org,2002:float"
TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
SET_TAG = "tag:yaml.org,2002:set"

TaoReads = Callable[[JsonPath], bool]
"""Which values of a document TAO reads (given a value's path): those get the type TAO's
reader gives them (:data:`TAO_FLOAT`), where PyYAML's reading of the others stays."""


class Source:
    """A parsed YAML document: its data and the node tree it came from."""

    __slots__ = ("file", "data", "root")  # noqa: RUF023 - the constructor's order

    def __init__(self, file: str, data: Any, root: yaml.Node) -> None:
        self.file = file
        self.data = data
        self.root = root

    def locate(self, path: JsonPath, *, key: bool = False) -> tuple[int, int]:
        """Return the 1-based (line, column) of the value at ``path``.

        With ``key=True`` the last element names a mapping key and the
        position of the key itself is returned (for unknown keys). Where the
        path leaves the tree, the deepest node reached is used.
        """
        node = self.root
        for depth, part in enumerate(path):
            last = depth == len(path) - 1
            child = _child(node, part, want_key=key and last)
            if child is None:
                break
            node = child
        mark = node.start_mark
        return mark.line + 1, mark.column + 1

    def sets(self, path: JsonPath) -> bool:
        """Whether the job's own keys write ``path`` (not a value it inherited)."""
        return _reaches(self.root, path)

    def _origin(self, path: JsonPath) -> JsonPath:
        return path

    def written(self, path: JsonPath) -> str | None:
        """The text of the plain (unquoted) scalar at ``path`` as the file writes it."""
        import yaml

        node: yaml.Node | None = self.root
        for part in self._origin(path):
            node = _child(node, part, want_key=False) if node is not None else None
        if isinstance(node, yaml.ScalarNode) and not node.style:  # libyaml: "", PyYAML: None
            return str(node.value)
        return None

    def problem(self, path: JsonPath, message: str, *, key: bool = False) -> Problem:
        """A :class:`Problem` at ``path`` in this file."""
        line, column = self.locate(path, key=key)
        return Problem(line, column, path, message, self.file)

    def about(self, path: JsonPath, message: str, at: JsonPath) -> Problem:
        """A :class:`Problem` with the value at ``path``, which this file does not write
        (a skill's template gives it), located at ``at``, the key that brought it in."""
        return Problem(*self.locate(at), path, message, self.file)

    def refusal(self, refused: InvalidInput) -> SpecError:
        """``refused`` as a problem at the key it is about (the file's top for none)."""
        return SpecError(
            [self.problem(refused.key, str(refused).removeprefix(f"{shown_file(self.file)}: "))]
        )


class MergedSource(Source):
    """One pipeline job after ``defaults`` were merged in.

    A path is located in the job's own keys when it is there, else in
    ``defaults``, else at the job's name, so a problem points at the line
    that set the value.
    """

    __slots__ = ("job_path",)

    def __init__(self, file: str, data: Any, root: yaml.Node, job_path: JsonPath = ()) -> None:
        super().__init__(file, data, root)
        self.job_path = job_path

    def _origin(self, path: JsonPath) -> JsonPath:
        """Where in the file ``path`` was set: in the job, in defaults, at the text it was
        split from (a matrix fills a text command's words), or (unset) the job."""
        for base in (self.job_path, ("defaults",)):
            if _reaches(self.root, (*base, *path)):
                return (*base, *path)
        for end in range(len(path) - 1, 0, -1):
            for base in (self.job_path, ("defaults",)):
                node = _node(self.root, (*base, *path[:end]))
                if node is not None and isinstance(node.value, str):  # a scalar's text
                    return (*base, *path[:end])
        return self.job_path

    def sets(self, path: JsonPath) -> bool:
        """Whether the job's own keys write ``path``, rather than ``defaults``."""
        return _reaches(self.root, (*self.job_path, *path))

    def locate(self, path: JsonPath, *, key: bool = False) -> tuple[int, int]:
        """The line of ``path`` in the job, else in defaults, else the job's name."""
        origin = self._origin(path)
        whole = Source(self.file, self.data, self.root)
        return whole.locate(origin, key=key or origin == self.job_path)

    def problem(self, path: JsonPath, message: str, *, key: bool = False) -> Problem:
        """A :class:`Problem` named by the file path the value came from."""
        origin = self._origin(path)
        shown = origin if origin != self.job_path else (*self.job_path, *path)
        line, column = self.locate(path, key=key)
        return Problem(line, column, shown, message, self.file)

    def about(self, path: JsonPath, message: str, at: JsonPath) -> Problem:
        """A :class:`Problem` with this job's value at ``path``, located at ``at``."""
        return Problem(*self.locate(at), (*self.job_path, *path), message, self.file)


def _reaches(node: yaml.Node, path: JsonPath) -> bool:
    return _node(node, path) is not None


def _node(node: yaml.Node, path: JsonPath) -> yaml.Node | None:
    """The node at ``path`` under ``node``, or None where the path leaves the tree."""
    found: yaml.Node | None = node
    for part in path:
        found = _child(found, part, want_key=False) if found is not None else None
    return found


def _child(node: yaml.Node, part: str | int, *, want_key: bool) -> yaml.Node | None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                return key_node if want_key else value_node
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        child: yaml.Node = node.value[part]
        return child
    return None


STDIN = "-"
"""The job-file name that means standard input."""


def read_text(path: Path, display: str) -> str:
    """Read a file (or standard input, for ``-``) as UTF-8 text within the size limit.

    The file is opened and read once, so a pipe, FIFO or ``<(...)`` works.
    """
    try:
        raw = sys.stdin.buffer.read(MAX_BYTES + 1) if str(path) == STDIN else _read_bounded(path)
    except FileNotFoundError:
        raise SpecError.single(display, "no such file") from None
    except IsADirectoryError:
        raise SpecError.single(display, "is a directory, not a job file") from None
    except OSError as exc:
        raise SpecError.single(display, f"cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise SpecError.single(display, "is larger than 1 MiB; a job file should be small")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError.single(
            display, f"is not UTF-8 text (byte 0x{raw[exc.start]:02x})", line, column
        ) from None


def _read_bounded(path: Path) -> bytes:
    """At most ``MAX_BYTES + 1`` bytes of the file at ``path``: all of it, unless it is larger.

    The first read is sized by the file's length: asking for the whole limit at once
    would allocate a megabyte for every small job file.
    """
    with path.open("rb") as handle:
        want = min(os.fstat(handle.fileno()).st_size, MAX_BYTES) + 1
        raw = handle.read(want)
        if len(raw) < want:  # the whole file
            return raw
        return raw + handle.read(MAX_BYTES + 1 - want)  # a pipe has no length; or it grew


def parse(
    text: str, display: str, kind: str = "a job file", tao_reads: TaoReads | None = None
) -> Source:
    """Parse one YAML document into a :class:`Source`; a document that is no mapping is
    refused as not ``kind`` (what the file is read as). The values ``tao_reads`` names are
    read as TAO reads them (:data:`TAO_FLOAT`)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise SpecError.single(display, f"is empty; {kind} is a mapping of keys")
        _check_tree(root, display, text, tao_reads)
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, display, text) from None
    except yaml.YAMLError as exc:
        raise SpecError.single(display, f"is not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        held = "a list" if isinstance(data, list) else f"a single {type(data).__name__} value"
        raise SpecError.single(display, f"holds {held}; {kind} is a mapping of keys")
    return Source(display, data, root)


@lru_cache(maxsize=32)
def parse_shared(text: str, display: str, kind: str = "a job file") -> Source:
    """:func:`parse`, once per text: for files that are looked up, never changed (versions.yaml).

    Every job file in a folder resolves its image in the same versions.yaml;
    parsing it once serves them all. Callers must not modify the data.
    """
    return parse(text, display, kind)


def _yaml_error(exc: yaml.MarkedYAMLError, display: str, text: str = "") -> SpecError:
    """The error at the place the parser stopped, with what it was reading and where that
    began (an unclosed quote is found only where the file ends)."""
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    reason = exc.problem or exc.context or "syntax error"
    at = text[mark.index :] if mark else ""
    if reason == "found undefined alias" and (alias := _ALIAS.match(at)):
        reason = f"{reason} {alias[0]}"
    began = exc.context_mark
    if exc.problem and exc.context:
        where = f" (line {began.line + 1}, column {began.column + 1})" if began else ""
        reason = f"{exc.context}{where}, {reason}"
    hint = _syntax_hint(reason if at[:1] != "\t" else reason + " (a tab)")
    return SpecError.single(display, f"YAML syntax error: {reason}{hint}", line, column)


_ALIAS = re.compile(r"\*[^\s,\[\]{}]+")
"""An alias as YAML reads it at its place: ``*`` and the anchor's name."""


def _syntax_hint(reason: str) -> str:
    """A sentence for the usual causes of a YAML syntax error."""
    if "\\t" in reason or "tab" in reason:
        return "; YAML indents with spaces only: replace the tab with spaces"
    if "scanning a quoted scalar" in reason:
        return "; close the quote that begins there"
    if "single document" in reason:
        return "; the file must be one YAML document: remove the second '---' and what follows it"
    if "undefined alias" in reason:
        return "; an alias (*name) repeats a value an anchor (&name) marks above it: mark one"
    if "mapping values are not allowed" in reason:
        return (
            "; a value holding ': ' must be quoted (e.g. command: \"echo 'a: b'\"), "
            "or the key above is indented too far"
        )
    if "expected <block end>" in reason or "did not find expected key" in reason:
        return "; check the indentation: keys of one mapping must start in the same column"
    return ""


def _check_tree(
    root: yaml.Node, display: str, text: str, tao_reads: TaoReads | None = None
) -> None:
    """Refuse alias bombs, deep nesting, long integers, duplicate keys and keys that are
    not text; give the values ``tao_reads`` names the type TAO reads them as.

    One walk over the node tree, before anything is constructed: each node is
    visited once however many aliases name it, and what it expands to (values
    and characters) is summed as it goes, so the walk costs what the text costs
    and the document built from it holds at most :data:`MAX_NODES` values and
    :data:`MAX_TEXT` characters; an alias bomb is refused at the alias that
    passes a limit. The walk never goes deeper than :data:`MAX_DEPTH` (every
    later step, the schema check included, descends the data recursively).
    """
    walk = _Walk(display, text, tao_reads)
    try:
        walk.node(root, (), 0)
    except _Refused as exc:
        message, mark, path = exc.args
        raise SpecError([Problem(mark.line + 1, mark.column + 1, path, message, display)]) from None
    problems = walk.duplicates + sorted(walk.non_text + walk.unread)
    if problems:
        raise SpecError(problems)


TEXT_KEY_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge")


class _Refused(Exception):
    """What the walk refuses at once: a limit passed, or an integer that is not one (a
    message, and the mark and path where it is)."""


class _Walk:
    """What :func:`_check_tree` learns on its one walk.

    ``sizes`` holds, for each node done, how many values it expands to, how
    many levels it nests below itself and how many characters its scalars hold;
    ``active`` the nodes being walked, so an alias to one of them is a cycle.
    ``aliases`` counts the aliases met, in the order the file writes them.
    ``kinds`` are YAML's mapping, sequence and scalar node classes, looked up
    once for the walk's every node.
    """

    __slots__ = (
        "active",
        "aliases",
        "display",
        "duplicates",
        "kinds",
        "non_text",
        "resolver",
        "sizes",
        "tao_reads",
        "text",
        "unread",
    )

    def __init__(self, display: str, text: str, tao_reads: TaoReads | None) -> None:
        import yaml

        self.display = display
        self.text = text
        self.tao_reads = tao_reads
        self.sizes: dict[int, tuple[int, int, int]] = {}
        self.aliases = 0
        self.resolver = yaml.resolver.Resolver()
        self.active: set[int] = set()
        self.duplicates: list[Problem] = []
        self.non_text: list[Problem] = []
        self.unread: list[Problem] = []  # values TAO's reader refuses
        self.kinds = (yaml.MappingNode, yaml.SequenceNode, yaml.ScalarNode)

    def node(self, node: yaml.Node, path: JsonPath, depth: int) -> tuple[int, int]:
        """Walk ``node`` at ``depth``; return how many values and characters it expands to."""
        mapping, sequence, _ = self.kinds
        key = id(node)
        known = self.sizes.get(key)
        if known is not None:  # an alias
            self.aliases += 1
            self._check_depth(depth + known[1], node, path)
            return known[0], known[2]
        if key in self.active:
            self.aliases += 1
            raise _Refused(_BOMB, self._alias_mark(), path)
        self._check_depth(depth, node, path)
        self.active.add(key)
        total, height, chars = 1, 0, 0
        if isinstance(node, mapping):
            if node.tag == SET_TAG and self.tao_reads and self.tao_reads(path):
                self._unread(node, path, _SET)
            first: dict[str, int] = {}
            for key_node, value_node in node.value:
                name = self._key(key_node, path, first)
                for child in (key_node, value_node):
                    total, chars = self._add(child, (*path, name), depth, total, chars, parent=node)
                    height = max(height, self._height(child))
        elif isinstance(node, sequence):
            for index, item in enumerate(node.value):
                total, chars = self._add(item, (*path, index), depth, total, chars, parent=node)
                height = max(height, self._height(item))
        else:
            chars = len(node.value)
            if self.tao_reads and (tag := self._tao_tag(node)) and self.tao_reads(path):
                node.tag = tag
            elif node.tag == TIMESTAMP_TAG and self.tao_reads and self.tao_reads(path):
                self._unread(node, path, _DATE)  # tagged so: untagged, a date is text to TAO
            if node.tag in _CONVERTED:
                self._check_converted(node, path)
        self.active.discard(key)
        self.sizes[key] = (total, height, chars)
        return total, chars

    def _add(
        self,
        child: yaml.Node,
        path: JsonPath,
        depth: int,
        total: int,
        chars: int,
        *,
        parent: yaml.Node,
    ) -> tuple[int, int]:
        """``total`` values and ``chars`` characters with ``child``'s added, within the limits."""
        values, text = self.node(child, path, depth + 1)
        total, chars = total + values, chars + text
        if total > MAX_NODES or chars > MAX_TEXT:
            mark = self._alias_mark() if self.aliases else parent.start_mark
            raise _Refused(_BOMB if total > MAX_NODES else _TEXT_BOMB, mark, path)
        return total, chars

    def _alias_mark(self) -> Any:
        """Where the file writes the last alias the walk met (read again: a node keeps no
        alias's place)."""
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        events = (e for e in yaml.parse(self.text, Loader=loader) if isinstance(e, yaml.AliasEvent))
        return next(itertools.islice(events, self.aliases - 1, None)).start_mark

    def _unread(self, node: yaml.Node, path: JsonPath, message: str) -> None:
        mark = node.start_mark
        self.unread.append(Problem(mark.line + 1, mark.column + 1, path, message, self.display))

    def _tao_tag(self, node: yaml.Node) -> str | None:
        """The tag TAO's reader gives the scalar ``node`` where it differs from PyYAML's
        and the file does not tag it: a plain :data:`TAO_FLOAT` is a float, a date text."""
        if node.tag == STR_TAG:
            plain = not node.style and node.value[:1] in FLOAT_STARTS  # type: ignore[attr-defined]
            if not plain or TAO_FLOAT.match(node.value) is None:
                return None
            tag = FLOAT_TAG
        elif node.tag == TIMESTAMP_TAG:
            tag = STR_TAG
        else:
            return None
        written = self.text[node.start_mark.index : node.end_mark.index]
        if written.startswith("&"):  # an anchor's name, then the value or its tag
            written = written.split(maxsplit=1)[-1]
        return None if written.startswith("!") else tag

    def _check_converted(self, node: yaml.Node, path: JsonPath) -> None:
        """Refuse a value tagged ``!!int``, ``!!float``, ``!!bool`` or ``!!timestamp`` whose
        text is none (PyYAML's constructor fails on it without saying where), or an integer
        past :data:`MAX_INT_DIGITS` digits."""
        import yaml

        text: str = node.value
        resolved = self.resolver.resolve(type(node), text, (True, False))  # type: ignore[no-untyped-call]
        if resolved != node.tag:
            try:  # written with a tag; YAML's own reading of the text decides
                yaml.SafeLoader("").construct_object(node)
            except (ValueError, KeyError, AttributeError, TypeError):
                kind = node.tag.rpartition(":")[2]
                message = f"!!{kind} {text!r}: YAML cannot read this text as a {kind}; fix it, or "
                raise _Refused(message + "drop the tag", node.start_mark, path) from None
        if node.tag == INT_TAG and _int_too_long(text):
            raise _Refused(
                f"an integer of more than {MAX_INT_DIGITS} digits; no job value needs one, and "
                "taospec cannot write it out: quote it if it is meant as text",
                node.start_mark,
                path,
            )

    def _height(self, child: yaml.Node) -> int:
        """How many levels ``child`` (walked) adds below its parent."""
        return self.sizes[id(child)][1] + 1

    def _check_depth(self, depth: int, node: yaml.Node, path: JsonPath) -> None:
        if depth > MAX_DEPTH:
            raise _Refused(
                f"nests mappings and lists more than {MAX_DEPTH} levels deep; no job file "
                "needs that many, and taospec refuses to load it",
                node.start_mark,
                path,
            )

    def _key(self, key_node: yaml.Node, path: JsonPath, first: dict[str, int]) -> str:
        """The key's text for paths; a duplicate or a key that is not text is noted."""
        mark = key_node.start_mark
        if not isinstance(key_node, self.kinds[2]):
            self.non_text.append(self._not_text("...", key_node, path))
            return "..."
        name: str = key_node.value
        if key_node.tag not in TEXT_KEY_TAGS:
            self.non_text.append(self._not_text(name, key_node, path))
        if name in first:
            message = (
                f"duplicate key {name!r} (first defined on line {first[name]}); "
                "a later value would silently win"
            )
            self.duplicates.append(
                Problem(mark.line + 1, mark.column + 1, (*path, name), message, self.display)
            )
        else:
            first[name] = mark.line + 1
        return name

    def _not_text(self, text: str, key_node: yaml.Node, path: JsonPath) -> Problem:
        mark = key_node.start_mark
        message = (
            f"key {text!r} is not text to YAML (it reads as "
            f"{key_node.tag.rpartition(':')[2]}); keys must be text: quote it, "
            f"e.g. {chr(34)}{text}{chr(34)}:"
        )
        return Problem(mark.line + 1, mark.column + 1, (*path, text), message, self.display)


_SET = (
    "a set (!!set) cannot be part of a spec: TAO reads the spec file with OmegaConf, which "
    "refuses it; write a list"
)
_DATE = (
    "a date (!!timestamp) cannot be part of a spec: TAO reads the spec file with OmegaConf, "
    "which holds no dates; leave the tag out, and TAO reads the date as text"
)
_BOMB = (
    f"expands to more than {MAX_NODES} values through aliases (or an alias refers to "
    "itself); refusing to load it"
)
_TEXT_BOMB = (
    f"expands to more than {MAX_TEXT:,} characters of text through aliases, more than a job "
    "file may hold (1 MiB); refusing to load it"
)
INT_TAG = "tag:yaml.org,2002:int"
_CONVERTED = frozenset(
    (INT_TAG, *(f"tag:yaml.org,2002:{kind}" for kind in ("float", "bool", "timestamp")))
)
"""The tags whose text PyYAML converts, and can fail to."""
_INT_LIMIT: int = 10**MAX_INT_DIGITS


def _int_too_long(text: str) -> bool:
    """Whether the YAML 1.1 integer ``text`` has more than :data:`MAX_INT_DIGITS` digits.

    Only a decimal is counted, not converted (Python refuses to convert a long one); the
    other forms convert in linear time (hex, octal, binary) or stop at the limit (base 60).
    """
    digits = text.replace("_", "").lstrip("+-")
    if digits.startswith(("0x", "0b")):
        return int(digits[2:], 16 if digits[1] == "x" else 2) >= _INT_LIMIT
    if ":" in digits:  # base 60: 1:30 is 90
        value = 0
        for part in digits.split(":"):
            if len(part) > MAX_INT_DIGITS:
                return True
            value = value * 60 + int(part)
            if value >= _INT_LIMIT:
                return True
        return False
    if digits.startswith("0"):  # octal
        return int(digits, 8) >= _INT_LIMIT
    return len(digits) > MAX_INT_DIGITS


@lru_cache(maxsize=1)
def tao_loader() -> type:
    """PyYAML's safe loader reading every value as TAO's reader does (:data:`TAO_FLOAT`, no
    dates): for a file TAO reads whole, such as a skill's spec template."""
    import yaml

    loader: Any = type("TaoLoader", (yaml.SafeLoader,), {})
    loader.add_implicit_resolver(FLOAT_TAG, TAO_FLOAT, list(FLOAT_STARTS))
    loader.yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != TIMESTAMP_TAG]
        for first, resolvers in loader.yaml_implicit_resolvers.items()
    }
    made: type = loader
    return made


def dump_yaml(data: Any) -> str:
    """YAML that reads back exactly as ``data``: readable unicode when PyYAML can round-trip
    it, escapes when not (PyYAML writes some line breaks, such as NEL, raw).

    A string holding a backslash is double-quoted, where YAML escapes every backslash, so
    that each ``\\0NAME\\0`` the text holds outside an escaped backslash is a stand-in.
    """
    import yaml

    def dump(readable: bool) -> str:
        text: str = yaml.dump(
            data, Dumper=_dumper(), sort_keys=True, allow_unicode=readable, width=2**16
        )
        return text

    text = dump(readable=True)
    # Text that came out all ASCII has no raw character for allow_unicode to have chosen.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if not text.isascii() and yaml.load(text, Loader=loader) != data:  # noqa: S506 - safe
        text = dump(readable=False)
    return text


@lru_cache(maxsize=1)
def _dumper() -> type:
    """The safe dumper (libyaml's, where PyYAML has it) with :func:`dump_yaml`'s string style,
    made once: a class costs more to make than a small spec to write."""
    import yaml

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    def text_scalar(dumper: Any, value: str) -> Any:
        style = '"' if "\\" in value or "\x00" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    dumper: type = type("Dumper", (base,), {})
    dumper.add_representer(str, text_scalar)  # type: ignore[attr-defined]
    # text TAO would read as a number is quoted, as text PyYAML would is
    dumper.add_implicit_resolver(FLOAT_TAG, TAO_FLOAT, list(FLOAT_STARTS))  # type: ignore[attr-defined]
    return dumper


def path_at_line(text: str, line: int) -> JsonPath:
    """The path of the deepest value of the YAML document ``text`` that its ``line`` (from 1)
    is part of: the entry that starts last at or before it, at each level."""
    import yaml

    node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    row = line - 1
    path: list[str | int] = []
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if isinstance(node, yaml.MappingNode):
            entries = [(key.value, key.start_mark.line, value) for key, value in node.value]
        else:
            entries = [(i, item.start_mark.line, item) for i, item in enumerate(node.value)]
        started = [(part, child) for part, start, child in entries if start <= row]
        if not started:
            break
        part, node = started[-1]
        path.append(part)
    return tuple(path)
