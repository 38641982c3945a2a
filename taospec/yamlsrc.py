"""Reading YAML safely while remembering where every value came from.

The loader refuses what a job file should never contain (duplicate keys,
files over 1 MiB, bytes that are not UTF-8, aliases that expand without
bound) and keeps the node tree so that a JSON path can be turned back into
the line and column a person should look at.

"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taospec.diagnostics import JsonPath, Problem, SpecError

if TYPE_CHECKING:  # the library itself is imported where it is first used
    import yaml


MAX_BYTES = 1024 * 1024
MAX_NODES = 100_000


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

    def problem(self, path: JsonPath, message: str, *, key: bool = False) -> Problem:
        """A :class:`Problem` at ``path`` in this file."""
        line, column = self.locate(path, key=key)
        return Problem(line, column, path, message, self.file)


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
        """Where in the file ``path`` was set: in the job, in defaults, or (unset) the job."""
        for base in (self.job_path, ("defaults",)):
            if _reaches(self.root, (*base, *path)):
                return (*base, *path)
        return self.job_path

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


def _reaches(node: yaml.Node, path: JsonPath) -> bool:
    for part in path:
        child = _child(node, part, want_key=False)
        if child is None:
            return False
        node = child
    return True


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
        if str(path) == STDIN:
            raw = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with path.open("rb") as handle:
                raw = handle.read(MAX_BYTES + 1)
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


def parse(text: str, display: str) -> Source:
    """Parse one YAML document into a :class:`Source`."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise SpecError.single(display, "is empty; a job file is a mapping of keys")
        _check_tree(root, display)
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, display, text) from None
    except yaml.YAMLError as exc:
        raise SpecError.single(display, f"is not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single {type(data).__name__} value"
        raise SpecError.single(display, f"holds {kind}; a job file is a mapping of keys")
    return Source(display, data, root)


@lru_cache(maxsize=32)
def parse_shared(text: str, display: str) -> Source:
    """:func:`parse`, once per text: for files that are looked up, never changed (versions.yaml).

    Every job file in a folder resolves its image in the same versions.yaml;
    parsing it once serves them all. Callers must not modify the data.
    """
    return parse(text, display)


def _yaml_error(exc: yaml.MarkedYAMLError, display: str, text: str = "") -> SpecError:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    reason = exc.problem or exc.context or "syntax error"
    at = text[mark.index] if mark and mark.index < len(text) else ""
    hint = _syntax_hint(reason if at != "\t" else reason + " (a tab)")
    return SpecError.single(display, f"YAML syntax error: {reason}{hint}", line, column)


def _syntax_hint(reason: str) -> str:
    """A sentence for the usual causes of a YAML syntax error."""
    if "\\t" in reason or "tab" in reason:
        return "; YAML indents with spaces only: replace the tab with spaces"
    if "mapping values are not allowed" in reason:
        return (
            "; a value holding ': ' must be quoted (e.g. command: \"echo 'a: b'\"), "
            "or the key above is indented too far"
        )
    if "expected <block end>" in reason or "did not find expected key" in reason:
        return "; check the indentation: keys of one mapping must start in the same column"
    return ""


def _check_tree(root: yaml.Node, display: str) -> None:
    """Refuse alias bombs, then duplicate keys, before anything is constructed."""
    if _expanded_size(root, {}, set()) > MAX_NODES:
        raise SpecError.single(
            display,
            f"expands to more than {MAX_NODES} values through aliases (or an alias refers "
            "to itself); refusing to load it",
        )
    problems = list(_duplicate_keys(root, display))
    problems += _non_text_keys(root, display)
    if problems:
        raise SpecError(problems)


def _duplicate_keys(node: yaml.Node, display: str, path: JsonPath = ()) -> Iterator[Problem]:
    """Every key that appears twice in one mapping, at the second place it appears."""
    import yaml

    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, display, (*path, index))
    if not isinstance(node, yaml.MappingNode):
        return
    first: dict[str, int] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        name = key_node.value
        if name in first:
            mark = key_node.start_mark
            message = (
                f"duplicate key {name!r} (first defined on line {first[name]}); "
                "a later value would silently win"
            )
            yield Problem(mark.line + 1, mark.column + 1, (*path, name), message, display)
            continue
        first[name] = key_node.start_mark.line + 1
        yield from _duplicate_keys(value_node, display, (*path, name))


TEXT_KEY_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:merge")


def _non_text_keys(node: yaml.Node, display: str, path: JsonPath = ()) -> list[Problem]:
    """Every mapping key that YAML reads as something other than text (1, ~, true, a date)."""
    import yaml

    found: list[Problem] = []
    pending: list[tuple[yaml.Node, JsonPath]] = [(node, path)]
    seen: set[int] = set()
    while pending:
        current, where = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.SequenceNode):
            pending += [(item, (*where, i)) for i, item in enumerate(current.value)]
        if not isinstance(current, yaml.MappingNode):
            continue
        for key_node, value_node in current.value:
            text = key_node.value if isinstance(key_node, yaml.ScalarNode) else "..."
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in TEXT_KEY_TAGS:
                mark = key_node.start_mark
                message = (
                    f"key {text!r} is not text to YAML (it reads as "
                    f"{key_node.tag.rpartition(':')[2]}); keys must be text: quote it, "
                    f"e.g. {chr(34)}{text}{chr(34)}:"
                )
                problem = Problem(mark.line + 1, mark.column + 1, (*where, text), message, display)
                found.append(problem)
            pending.append((value_node, (*where, str(text))))
    return sorted(found)


def _expanded_size(node: yaml.Node, sizes: dict[int, int], active: set[int]) -> int:
    """Count the values ``node`` becomes once every alias is expanded."""
    import yaml

    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in active:
        return MAX_NODES + 1
    active.add(key)
    total = 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            total += _expanded_size(key_node, sizes, active)
            total += _expanded_size(value_node, sizes, active)
            if total > MAX_NODES:
                break
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            total += _expanded_size(item, sizes, active)
            if total > MAX_NODES:
                break
    active.discard(key)
    sizes[key] = total
    return total
