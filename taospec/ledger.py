"""The record ledger: one durable TAO job record per job, a sidecar, and a journal.

Layout under the state root (``$TAO_STATE_DIR``, default ``~/.tao``)::

    jobs/<id>.json           the job record, exactly in the TAO skill bank's shape
    jobs/<id>.taospec        taospec's own notes about the job, as JSON (never in the
                             record, and not matching jobs/*.json, which holds records only)
    jobs/.locks/<NN>         lock stripes 00..3f for read-modify-write updates: the
                             one for a record is picked by the CRC-32 of its id
    ledger.jsonl             append-only journal: one line per open and per transition,
                             an ordered index of what the records and sidecars hold

Guarantees:

* A record file is never visible half-written: every write goes to a temp file
  in the same folder (named ``.<name>.<hex>.tmp``, so no reader takes it for a
  record), is fsynced, atomically renamed or linked into place, and the folder
  is fsynced.
* Opening a record creates its file exclusively: an existing record is never
  overwritten, so a minted id is retried and an explicit id fails.
* Updates hold an exclusive ``fcntl`` lock on the record's lock stripe for the
  whole read-modify-write, so concurrent writers never lose a transition. An id
  always maps to the same stripe, in every process and Python version; two
  records sharing one only take turns. The stripes are made once, when first
  used, and hold no data, so nothing about them is fsynced: one lost to a power
  cut is simply made again. No code holds two stripes at once, so stripes
  cannot deadlock. Per-record ``jobs/.<id>.lock`` files that older versions
  made are no longer used, and are ignored like any other dotfile; an older
  writer does not see the stripes, though, so it must not update the same
  state root while this one does.
* Terminal states are immutable.
* Every string written passes through :func:`taospec.lint.redact`.
* The record file is the durable truth: an open or mark returns only after
  the record is fsynced and in place as above. The journal is an index and an
  audit trail of what the records and sidecars already hold, and it is not
  fsynced: a power cut may cut it short by the lines appended just before it
  (what the kernel had not written back yet, typically under half a minute).
  Readers lose nothing by that: a record without an open line is found by
  scanning the jobs folder and merged in by submission time, so a shortened
  journal costs one rescan, never a record or a transition.
* Each journal event is one line under 4 KiB appended with a single
  ``write()`` on an ``O_APPEND`` descriptor, so concurrent appends never
  interleave and a killed process leaves the line whole or not there at all;
  appenders take turns on the journal's ``flock``, and a line torn by a
  crash of the machine is skipped by readers and fenced off by the next append.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import heapq
import itertools
import json
import math
import os
import posixpath
import re
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from json.encoder import encode_basestring, encode_basestring_ascii
from pathlib import Path

from taospec import listing
from taospec.errors import InvalidInput, TaospecError
from taospec.states import PENDING, STATES, TERMINAL
from taospec.values import Value

SCHEMA_VERSION = 1
SOURCES = ("agent", "poller", "backend-hook")
STORAGE_TIERS = ("A", "B", "C")
ERR_CLASSES = ("ERR_INFRA", "ERR_PROGRAM")
JOURNAL_SIDECAR_KEYS = ("target", "fingerprint")
MAX_ID_LENGTH = 128
MAX_JOURNAL_LINE = 4094
"""Most bytes in one journal line, newline included. With the one-byte fence that may
precede it after a torn line, every append is a single write under 4 KiB."""

_REQUIRED_KEYS = (
    "schema_version",
    "id",
    "platform",
    "backend_ref",
    "image",
    "network_arch",
    "action",
    "results_dir",
    "storage_tier",
    "upload_excludes",
    "submitted_at",
    "transitions",
    "terminal_state",
    "redacted",
)
_OPTIONAL_KEYS = ("terminal_write_by", "err_class", "retry_of", "parent_job")
_TRANSITION_KEYS = ("ts", "state", "message", "source")
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PLATFORM_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|\+00:00)")
_SIDECAR_SUFFIX = ".taospec"
_MINT_ATTEMPTS = 32
_MINT_PART_LENGTH = 48
_JOURNAL_NAME = "ledger.jsonl"
_FIXED_JOURNAL_KEYS = frozenset({"ts", "id", "event", "state"})
_TRUNCATED = "...[truncated]"
_READ_BLOCK = 64 * 1024
_REDACTIONS_KEPT = 4096
_WRITTEN_KEPT = 256  # records a writer remembers the bytes of, each at most _WRITTEN_SIZE
_WRITTEN_SIZE = 64 * 1024
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
_LOCKS_NAME = ".locks"
_LOCK_STRIPES = 64
"""How many lock files the records share. A few dozen keep two writers of different
records apart nearly always, and few enough that each is made once early on: it is
making a file per record that costs, not taking turns on one now and then."""


class LedgerCorrupt(TaospecError):
    """A ledger file does not have the shape the TAO record format requires."""


class UnknownJob(InvalidInput):
    """No record exists for the requested job id."""


class TerminalStateError(InvalidInput):
    """A record that reached a terminal state was asked to change it."""


class Transition(Value):
    """One entry of a record's append-only ``transitions`` list."""

    __slots__ = ("ts", "state", "message", "source")  # noqa: RUF023 - the on-disk order
    ts: str
    state: str
    message: str
    source: str

    def __init__(self, ts: str, state: str, message: str, source: str) -> None:
        self._set({"ts": ts, "state": state, "message": message, "source": source})

    def to_json(self) -> dict[str, object]:
        """Return the on-disk shape ``{ts, state, message, source}``."""
        return {"ts": self.ts, "state": self.state, "message": self.message, "source": self.source}


class Record(Value):
    """A typed, validated view of one TAO job record."""

    __slots__ = (  # noqa: RUF023 - the record's own order, as repr shows it
        "id", "platform", "backend_ref", "image", "network_arch", "action", "results_dir",
        "storage_tier", "upload_excludes", "submitted_at", "transitions", "terminal_state",
        "err_class", "retry_of", "parent_job", "terminal_write_by",
    )  # fmt: skip
    id: str
    platform: str
    backend_ref: str | None
    image: str
    network_arch: str
    action: str
    results_dir: str
    storage_tier: str
    upload_excludes: tuple[str, ...]
    submitted_at: str
    transitions: tuple[Transition, ...]
    terminal_state: str | None
    err_class: str | None
    retry_of: str | None
    parent_job: str | None
    terminal_write_by: str | None

    def __init__(  # noqa: PLR0917 - the record's fields, in the record's order
        self,
        id: str,
        platform: str,
        backend_ref: str | None,
        image: str,
        network_arch: str,
        action: str,
        results_dir: str,
        storage_tier: str,
        upload_excludes: tuple[str, ...],
        submitted_at: str,
        transitions: tuple[Transition, ...],
        terminal_state: str | None,
        err_class: str | None = None,
        retry_of: str | None = None,
        parent_job: str | None = None,
        terminal_write_by: str | None = None,
    ) -> None:
        self._set(
            {
                "id": id,
                "platform": platform,
                "backend_ref": backend_ref,
                "image": image,
                "network_arch": network_arch,
                "action": action,
                "results_dir": results_dir,
                "storage_tier": storage_tier,
                "upload_excludes": upload_excludes,
                "submitted_at": submitted_at,
                "transitions": transitions,
                "terminal_state": terminal_state,
                "err_class": err_class,
                "retry_of": retry_of,
                "parent_job": parent_job,
                "terminal_write_by": terminal_write_by,
            }
        )

    @property
    def state(self) -> str:
        """The terminal state if there is one, else the latest transition's state."""
        if self.terminal_state is not None:
            return self.terminal_state
        return self.transitions[-1].state if self.transitions else "UNKNOWN"

    def to_json(self) -> dict[str, object]:
        """Return the exact on-disk record; unset optional fields are left out."""
        data: dict[str, object] = {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "platform": self.platform,
            "backend_ref": self.backend_ref,
            "image": self.image,
            "network_arch": self.network_arch,
            "action": self.action,
            "results_dir": self.results_dir,
            "storage_tier": self.storage_tier,
            "upload_excludes": builtins.list(self.upload_excludes),
            "submitted_at": self.submitted_at,
            "transitions": [t.to_json() for t in self.transitions],
            "terminal_state": self.terminal_state,
            "redacted": True,
        }
        for key in _OPTIONAL_KEYS:
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_json(cls, data: object, *, origin: str = "record") -> Record:
        """Validate ``data`` against the TAO record shape and return the typed record.

        Raises :class:`LedgerCorrupt` naming ``origin`` (the file) and the field.
        """
        shape = _Shape(data, origin)
        shape.check_keys(_REQUIRED_KEYS, _OPTIONAL_KEYS)
        shape.require("schema_version", _is_schema_version, "the integer 1")
        shape.require("redacted", _is_true, "true")
        return cls(
            id=shape.string("id", _is_tao_id, f"an id matching {_ID_RE.pattern}"),
            platform=shape.string("platform", _matches(_PLATFORM_RE), _PLATFORM_RE.pattern),
            backend_ref=shape.optional_string("backend_ref", _any_text, "a string or null"),
            image=shape.string("image", _non_empty, "a non-empty string"),
            network_arch=shape.string("network_arch", _non_empty, "a non-empty string"),
            action=shape.string("action", _non_empty, "a non-empty string"),
            results_dir=shape.string("results_dir", _non_empty, "a non-empty string"),
            storage_tier=shape.string("storage_tier", _among(STORAGE_TIERS), "A, B or C"),
            upload_excludes=shape.strings("upload_excludes"),
            submitted_at=shape.string("submitted_at", _is_timestamp, "an ISO 8601 UTC time"),
            transitions=_transitions(shape),
            terminal_state=shape.optional_string(
                "terminal_state", _among(TERMINAL), "null, COMPLETE, ERROR or CANCELED"
            ),
            err_class=shape.optional_string(
                "err_class", _among(ERR_CLASSES), "ERR_INFRA or ERR_PROGRAM"
            ),
            retry_of=shape.optional_string("retry_of", _is_tao_id, "a job id"),
            parent_job=shape.optional_string("parent_job", _is_tao_id, "a job id"),
            terminal_write_by=shape.optional_string(
                "terminal_write_by", _among(SOURCES), ", ".join(SOURCES)
            ),
        )


class _Shape:
    """Validating, typed access to one raw JSON object read from a ledger file."""

    def __init__(self, data: object, origin: str, path: str = "$") -> None:
        if not isinstance(data, dict):
            raise LedgerCorrupt(f"{origin}: {path} must be a JSON object")
        self.data: dict[str, object] = data
        self.origin = origin
        self.path = path

    def fail(self, key: str, expected: str) -> LedgerCorrupt:
        """Build the error for ``key`` not holding what it must."""
        found = type(self.data.get(key)).__name__ if key in self.data else "nothing"
        return LedgerCorrupt(f"{self.origin}: {self.path}.{key} must be {expected}, found {found}")

    def check_keys(self, required: Sequence[str], optional: Sequence[str] = ()) -> None:
        """Fail on a missing required key or any key the format does not allow."""
        missing = [key for key in required if key not in self.data]
        unknown = sorted(set(self.data) - set(required) - set(optional))
        if missing:
            raise LedgerCorrupt(f"{self.origin}: {self.path} lacks {', '.join(missing)}")
        if unknown:
            raise LedgerCorrupt(f"{self.origin}: {self.path} has unknown keys {', '.join(unknown)}")

    def require(self, key: str, rule: Callable[[object], bool], expected: str) -> None:
        """Fail unless ``rule`` accepts the value under ``key``."""
        if not rule(self.data.get(key)):
            raise self.fail(key, expected)

    def string(self, key: str, rule: Callable[[str], bool], expected: str) -> str:
        """Return the string under ``key`` if ``rule`` accepts it."""
        value = self.data.get(key)
        if not isinstance(value, str) or not rule(value):
            raise self.fail(key, expected)
        return value

    def optional_string(self, key: str, rule: Callable[[str], bool], expected: str) -> str | None:
        """Like :meth:`string`, but an absent key or null gives ``None``."""
        if self.data.get(key) is None:
            return None
        return self.string(key, rule, expected)

    def strings(self, key: str) -> tuple[str, ...]:
        """Return the list of strings under ``key`` as a tuple."""
        value = self.data.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, "a list of strings")
        return tuple(value)

    def objects(self, key: str) -> builtins.list[_Shape]:
        """Return the non-empty list of objects under ``key``, each as a shape."""
        value = self.data.get(key)
        if not isinstance(value, list) or not value:
            raise self.fail(key, "a non-empty list")
        return [
            _Shape(item, self.origin, f"{self.path}.{key}[{i}]") for i, item in enumerate(value)
        ]


def _transitions(shape: _Shape) -> tuple[Transition, ...]:
    """Validate and convert the record's ``transitions`` list."""
    result = []
    for item in shape.objects("transitions"):
        item.check_keys(_TRANSITION_KEYS)
        result.append(
            Transition(
                ts=item.string("ts", _is_timestamp, "an ISO 8601 UTC time"),
                state=item.string("state", _among(STATES), " ".join(STATES)),
                message=item.string("message", _any_text, "a string"),
                source=item.string("source", _among(SOURCES), ", ".join(SOURCES)),
            )
        )
    return tuple(result)


def _is_schema_version(value: object) -> bool:
    return type(value) is int and value == SCHEMA_VERSION


def _is_true(value: object) -> bool:
    return value is True


def _any_text(_value: str) -> bool:
    return True


def _non_empty(value: str) -> bool:
    return value != ""


def _matches(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda value: pattern.fullmatch(value) is not None


def _among(choices: Collection[str]) -> Callable[[str], bool]:
    return lambda value: value in choices


def _is_tao_id(value: str) -> bool:
    return len(value) <= MAX_ID_LENGTH and _ID_RE.fullmatch(value) is not None


def _is_timestamp(value: str) -> bool:
    return _TS_RE.fullmatch(value) is not None


def _now() -> str:
    """The current UTC time as ISO 8601 with microseconds and a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="microseconds").removesuffix("+00:00") + "Z"


def _instant(ts: str) -> datetime:
    """Parse a validated record timestamp, for ordering."""
    return datetime.fromisoformat(ts)


def check_job_id(job_id: str) -> str:
    """Return ``job_id`` if it is a safe record name, else raise :class:`InvalidInput`.

    The TAO pattern already keeps ids inside the jobs folder (no ``/``, NUL,
    leading dot or ``..`` alone); ids ending in ``.taospec`` are refused too,
    because their record file would be another job's sidecar.
    """
    if not isinstance(job_id, str) or not _is_tao_id(job_id):
        raise InvalidInput(
            f"invalid job id {job_id!r}: it must match {_ID_RE.pattern} "
            f"and be at most {MAX_ID_LENGTH} characters"
        )
    if job_id.lower().endswith(_SIDECAR_SUFFIX):
        raise InvalidInput(f"invalid job id {job_id!r}: the suffix {_SIDECAR_SUFFIX} is reserved")
    return job_id


def _check_choice(name: str, value: str | None, choices: Collection[str]) -> None:
    """Raise :class:`InvalidInput` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise InvalidInput(
            f"invalid {name} {value!r}: expected one of {', '.join(sorted(choices))}"
        )


def _slug(text: str) -> str:
    """Lowercase ``text`` and squeeze every run of unsafe characters into ``-``."""
    slug = re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-_")
    return slug[:_MINT_PART_LENGTH].rstrip("-_") or "job"


def _mint_suffix() -> str:
    """Six random hex digits for a minted id."""
    return os.urandom(3).hex()


def _mint_id(network_arch: str, action: str) -> str:
    """Mint ``<arch>-<action>-<6 hex>``."""
    return f"{_slug(network_arch)}-{_slug(action)}-{_mint_suffix()}"


def _encode_json(data: object) -> bytes:
    """Serialize a record or sidecar for disk: indented UTF-8 with a final newline.

    The bytes are exactly ``json.dumps(data, indent=2, ensure_ascii=False,
    allow_nan=False) + "\\n"`` encoded as UTF-8 (tests/test_ledger_encoding.py
    holds it to that). Given an indent, :mod:`json` encodes in pure Python
    through nested generators, at twice the cost of this for a record, and
    every open and mark writes one.
    """
    parts: builtins.list[str] = []
    _encode_into(parts, data, "\n")
    parts.append("\n")
    return "".join(parts).encode()


def _encode_into(parts: builtins.list[str], value: object, newline: str) -> None:
    """Append ``value`` as JSON indented by two spaces a level, as :mod:`json` writes it.

    ``newline`` is a newline followed by the indent of ``value``'s own line.
    Types are tried in the order :mod:`json` tries them.
    """
    if isinstance(value, str):
        parts.append(encode_basestring(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        parts.append(_float_text(value))
    elif isinstance(value, list | tuple):
        _encode_items(parts, value, newline)
    elif isinstance(value, dict):
        _encode_members(parts, value, newline)
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encode_items(parts: builtins.list[str], items: Sequence[object], newline: str) -> None:
    """Append a JSON array, one item a line; an empty one as ``[]``."""
    if not items:
        parts.append("[]")
        return
    inner = newline + "  "
    separator = "[" + inner
    for item in items:
        parts.append(separator)
        _encode_into(parts, item, inner)
        separator = "," + inner
    parts.append(newline + "]")


def _encode_members(
    parts: builtins.list[str], members: Mapping[object, object], newline: str
) -> None:
    """Append a JSON object, one member a line; an empty one as ``{}``."""
    if not members:
        parts.append("{}")
        return
    inner = newline + "  "
    separator = "{" + inner
    for key, item in members.items():
        parts.append(separator + encode_basestring(_key_text(key)) + ": ")
        _encode_into(parts, item, inner)
        separator = "," + inner
    parts.append(newline + "}")


def _float_text(value: float) -> str:
    """A float as :mod:`json` writes it, refusing NaN and infinities."""
    if not math.isfinite(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return float.__repr__(value)


def _key_text(key: object) -> str:
    """An object key as :mod:`json` writes it: strings as they are, scalars as text."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_text(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# The writes below take paths as plain strings: every open and mark makes
# several, and a pathlib.Path costs more to build and to hand to the OS.


def _fsync_dir(folder: str | Path) -> None:
    """Make a rename or link in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    """Remove ``path`` if it is still there."""
    with suppress(FileNotFoundError):
        os.unlink(path)  # noqa: PTH108 - plain string paths


def _folder_and_name(path: str) -> tuple[str, str]:
    """Split a file's path as :func:`posixpath.split` does, for less."""
    folder, slash, name = path.rpartition("/")
    return folder or slash or ".", name


def _write_temp(folder: str, name: str, data: bytes) -> str:
    """Write ``data`` to a fresh, fsynced temp file for ``folder/name``; return its path."""
    temp = f"{folder}/.{name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(temp)
        raise
    os.close(fd)
    return temp


def _write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, folder fsync."""
    folder, name = _folder_and_name(path)
    temp = _write_temp(folder, name, data)
    try:
        os.replace(temp, path)  # noqa: PTH105 - plain string paths
    except BaseException:
        _unlink_quietly(temp)
        raise
    _fsync_dir(folder)


def write_json_atomic(path: Path, data: object) -> None:
    """Durably replace ``path`` with ``data`` as JSON (creating its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(os.fspath(path), _encode_json(data))


def _create_atomic(path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; return whether it was created.

    The fully written temp file is hard-linked onto the name, which fails if
    the name is taken, so the record never exists empty or partial. Where the
    filesystem has no hard links, the name is reserved with ``O_CREAT|O_EXCL``
    and the temp file renamed onto the reservation.
    """
    folder, name = _folder_and_name(path)
    temp = _write_temp(folder, name, data)
    try:
        created = _link_exclusive(temp, path)
    finally:
        _unlink_quietly(temp)
    if created:
        _fsync_dir(folder)
    return created


def _link_exclusive(temp: str, path: str) -> bool:
    """Link ``temp`` to ``path`` if ``path`` is free; fall back to reserve-and-rename."""
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        return _reserve_then_replace(temp, path)
    return True


def _reserve_then_replace(temp: str, path: str) -> bool:
    """Reserve ``path`` with ``O_CREAT|O_EXCL``, then rename ``temp`` onto it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    os.replace(temp, path)  # noqa: PTH105 - plain string paths
    return True


def _journal_line(entry: Mapping[str, str]) -> bytes:
    """Encode one journal event as a single line under :data:`MAX_JOURNAL_LINE` bytes.

    Over-long free-text values are cut (longest first); the record keeps them whole.
    """
    fitted = dict(entry)
    while True:
        line = _journal_text(fitted).encode()
        if len(line) <= MAX_JOURNAL_LINE:
            return line
        key = max(_trimmable(fitted), key=lambda k: len(fitted[k]))
        text = fitted[key]
        fitted[key] = text[: max(16, len(text) // 2)] + _TRUNCATED


def _journal_text(entry: Mapping[str, str]) -> str:
    """``json.dumps(entry, separators=(",", ":"))`` and a newline, for an object of strings.

    Written out member by member, as :mod:`json` writes them, it costs a
    fraction of a json.dumps call, which builds a new encoder every time.
    """
    members = ",".join(
        f"{encode_basestring_ascii(key)}:{encode_basestring_ascii(value)}"
        for key, value in entry.items()
    )
    return f"{{{members}}}\n"


def _trimmable(entry: Mapping[str, str]) -> builtins.list[str]:
    """The journal keys whose values may be shortened to fit a line."""
    return [
        key for key, value in entry.items() if key not in _FIXED_JOURNAL_KEYS and len(value) > 32
    ]


def _parse_line(line: bytes) -> dict[str, object] | None:
    """Decode one journal line; blank or torn lines give ``None``."""
    if not line.strip():
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def _lines_backwards(path: Path) -> Iterator[bytes]:
    """Yield the lines of ``path`` from last to first, reading fixed-size blocks."""
    with path.open("rb") as stream:
        position = stream.seek(0, os.SEEK_END)
        head = b""
        while position > 0:
            step = min(_READ_BLOCK, position)
            position -= step
            stream.seek(position)
            lines = (stream.read(step) + head).split(b"\n")
            head = lines[0]
            yield from reversed(lines[1:])
        yield head


def _journal_id(entry: Mapping[str, object]) -> str | None:
    """The id of a journal ``open`` event, or ``None`` for anything else."""
    job_id = entry.get("id")
    if entry.get("event") != "open" or not isinstance(job_id, str) or not _is_tao_id(job_id):
        return None
    return job_id


def _record_file_id(name: str) -> str | None:
    """The job id a file in the jobs folder holds the record of, if it is a record."""
    if name[:1] == "." or not name.endswith(".json"):
        return None
    job_id = name[:-5]
    return job_id if _is_tao_id(job_id) else None


def _newest_key(record: Record) -> datetime:
    return _instant(record.submitted_at)


class Ledger:
    """The job records under one state root, and the journal beside them."""

    def __init__(self, root: Path, secret_values: Iterable[str] = ()) -> None:
        root = Path(root)
        if not root.is_absolute():
            raise InvalidInput(f"the ledger root must be an absolute path, got {str(root)!r}")
        self.root = root
        self.jobs_dir = root / "jobs"
        self.journal_path = root / _JOURNAL_NAME
        self._jobs = os.fspath(self.jobs_dir)  # as plain strings, for the file calls
        self._locks = f"{self._jobs}/{_LOCKS_NAME}"
        self._journal = os.fspath(self.journal_path)
        self._secrets = tuple(value for value in secret_values if value)
        self._redactions: dict[str, str] = {}
        self._written: dict[str, tuple[bytes, Record]] = {}

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, secret_values: Iterable[str] = ()
    ) -> Ledger:
        """Open the ledger at ``$TAO_STATE_DIR`` (default ``~/.tao``)."""
        env = os.environ if environ is None else environ
        if "TAO_STATE_DIR" not in env:
            return cls(Path.home() / ".tao", secret_values)
        value = env["TAO_STATE_DIR"]
        if not value or not Path(value).is_absolute():
            raise InvalidInput(f"TAO_STATE_DIR must be an absolute path, got {value!r}")
        return cls(Path(value), secret_values)

    # -- opening ---------------------------------------------------------

    def open(
        self,
        *,
        platform: str,
        image: str,
        network_arch: str,
        action: str,
        storage_tier: str,
        results_root: str | None = None,
        results_dir: str | None = None,
        upload_excludes: Sequence[str] = (),
        parent_job: str | None = None,
        retry_of: str | None = None,
        job_id: str | None = None,
        sidecar: Mapping[str, object] | None = None,
        sidecar_for: Callable[[str], Mapping[str, object]] | None = None,
        message: str = "opened",
    ) -> Record:
        """Create a PENDING record, its sidecar and its journal line; return the record.

        The id is minted from ``network_arch`` and ``action`` unless ``job_id``
        is given (which must not exist yet). ``results_dir`` is bound here, as
        ``<results_root>/<id>`` or the explicit absolute ``results_dir``.
        ``sidecar_for(id)`` gives notes that name the id (such as the plan with
        the id filled in); they join ``sidecar`` in the one sidecar written.
        """
        if job_id is not None:
            self._check_stable_id("job id", check_job_id(job_id))
        for name, value in (("parent_job", parent_job), ("retry_of", retry_of)):
            if value is not None:
                self._check_stable_id(name, check_job_id(value))
        _check_choice("storage tier", storage_tier, STORAGE_TIERS)
        # Everything but the id and what derives from it (time, results_dir, first step).
        template = Record(
            id="",
            platform=self._platform(platform),
            backend_ref=None,
            image=self._required_text("image", image),
            network_arch=self._required_text("network_arch", network_arch),
            action=self._required_text("action", action),
            results_dir=self._results_location(results_root, results_dir),
            storage_tier=storage_tier,
            upload_excludes=self._excludes(upload_excludes),
            submitted_at="",
            transitions=(),
            terminal_state=None,
            retry_of=retry_of,
            parent_job=parent_job,
        )
        notes = self._clean_mapping(sidecar or {}, "sidecar")
        self._ensure_jobs_dir()
        return self._open_first_free(
            template, job_id, results_dir is None, notes, sidecar_for, message
        )

    def _open_first_free(  # noqa: PLR0917 - open's parts, worked out once
        self,
        template: Record,
        job_id: str | None,
        under_root: bool,
        notes: dict[str, object],
        sidecar_for: Callable[[str], Mapping[str, object]] | None,
        message: str,
    ) -> Record:
        """Try candidate ids until one record is created; write sidecar and journal."""
        for candidate in self._candidates(job_id, template):
            record = self._opened(template, candidate, under_root, message)
            named = notes
            if sidecar_for is not None:
                named = {**notes, **self._clean_mapping(sidecar_for(candidate), "sidecar")}
            with self._locked(candidate):
                if not self._store(record, create=True):
                    continue
                if named:
                    _write_atomic(os.fspath(self._sidecar_path(candidate)), _encode_json(named))
                self._append(self._open_event(record, named))
            return record
        if job_id is not None:
            raise InvalidInput(f"job {job_id} already exists in {self.jobs_dir}")
        raise TaospecError(f"could not mint a free job id in {self.jobs_dir}")

    def _candidates(self, job_id: str | None, template: Record) -> Iterator[str]:
        """The explicit id once, or freshly minted ids that redaction leaves intact."""
        if job_id is not None:
            yield job_id
            return
        for _ in range(_MINT_ATTEMPTS):
            candidate = _mint_id(template.network_arch, template.action)
            if self._redact(candidate) == candidate:
                yield candidate

    def _opened(self, template: Record, job_id: str, under_root: bool, message: str) -> Record:
        """The new record for ``job_id``: first transition PENDING, results_dir bound."""
        now = _now()
        location = template.results_dir
        if under_root:
            location = self._redact(posixpath.join(location, job_id))
        first = Transition(ts=now, state=PENDING, message=self._redact(message), source="agent")
        return template.replace(
            id=job_id,
            results_dir=location,
            submitted_at=now,
            transitions=(first,),
        )

    def _open_event(self, record: Record, notes: Mapping[str, object]) -> dict[str, str]:
        """The journal line for an open."""
        event: dict[str, str] = {
            "ts": record.submitted_at,
            "id": record.id,
            "event": "open",
            "state": PENDING,
            "platform": record.platform,
            "network_arch": record.network_arch,
            "action": record.action,
            "results_dir": record.results_dir,
        }
        for key in ("parent_job", "retry_of"):
            if getattr(record, key) is not None:
                event[key] = getattr(record, key)
        for key in JOURNAL_SIDECAR_KEYS:
            if key in notes:
                value = notes[key]
                event[key] = value if isinstance(value, str) else json.dumps(value)
        return event

    # -- validating inputs ------------------------------------------------

    def _redact(self, text: str) -> str:
        """Pass ``text`` through the secret redactor with this ledger's known secrets.

        The answer depends only on the text (the secrets are fixed), so a writer
        that records many jobs redacts each repeated value (image, arch, results
        root, message) once.
        """
        done = self._redactions.get(text)
        if done is None:
            from taospec.lint import redact  # only writers need the lint's patterns

            done = redact(text, self._secrets)
            if len(self._redactions) < _REDACTIONS_KEPT:
                self._redactions[text] = done
        return done

    def _check_stable_id(self, name: str, value: str) -> None:
        """Refuse an id that secret redaction would change (it names files)."""
        if self._redact(value) != value:
            raise InvalidInput(f"{name} contains secret material; choose another")

    def _platform(self, platform: str) -> str:
        if not isinstance(platform, str) or _PLATFORM_RE.fullmatch(platform) is None:
            raise InvalidInput(
                f"invalid platform {platform!r}: it must match {_PLATFORM_RE.pattern}"
            )
        self._check_stable_id("platform", platform)
        return platform

    def _required_text(self, name: str, value: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{name} must be a non-empty string")
        return self._redact(value)

    def _results_location(self, results_root: str | None, results_dir: str | None) -> str:
        """The redacted results root (id appended later) or explicit results dir."""
        if (results_root is None) == (results_dir is None):
            raise InvalidInput("pass exactly one of results_root and results_dir")
        name, value = (
            ("results_root", results_root) if results_dir is None else ("results_dir", results_dir)
        )
        if not isinstance(value, str) or not posixpath.isabs(value):
            shown = self._redact(value) if isinstance(value, str) else value
            raise InvalidInput(f"{name} must be an absolute path, got {shown!r}")
        return self._redact(posixpath.normpath(value))

    def _excludes(self, upload_excludes: Sequence[str]) -> tuple[str, ...]:
        if isinstance(upload_excludes, str) or not all(
            isinstance(item, str) for item in upload_excludes
        ):
            raise InvalidInput("upload_excludes must be a list of strings")
        return tuple(self._redact(item) for item in upload_excludes)

    def _clean_mapping(self, values: Mapping[str, object], where: str) -> dict[str, object]:
        """Redact every string in a JSON-like mapping (keys too); refuse non-JSON values."""
        cleaned: dict[str, object] = {}
        for key, value in values.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: key {key!r} is not a string")
            cleaned[self._redact(key)] = self._clean_value(value, f"{where}.{key}")
        return cleaned

    def _clean_value(self, value: object, where: str) -> object:
        """Redact one JSON-like value; paths become strings, tuples become lists."""
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            return self._redact(value)
        if value is None or isinstance(value, bool | int):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        if isinstance(value, Mapping):
            return self._clean_mapping(value, where)
        if isinstance(value, list | tuple):
            return [self._clean_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
        raise InvalidInput(f"{where}: {type(value).__name__} value cannot be stored as JSON")

    # -- updating ---------------------------------------------------------

    def mark(
        self,
        job_id: str,
        state: str,
        *,
        message: str = "",
        source: str = "agent",
        backend_ref: str | None = None,
        err_class: str | None = None,
    ) -> Record:
        """Append a transition to ``state`` under the record's lock; return the new record.

        Re-marking the terminal state a record already has is a no-op; any other
        state after a terminal one raises :class:`TerminalStateError`.
        """
        check_job_id(job_id)
        _check_choice("state", state, STATES)
        _check_choice("source", source, SOURCES)
        if err_class is not None:
            _check_choice("err_class", err_class, ERR_CLASSES)
        with self._locked(job_id):
            current = self._load(job_id)
            if current.terminal_state is not None:
                return _unchanged_terminal(current, state)
            updated = self._transitioned(
                current,
                state,
                message=message,
                source=source,
                backend_ref=backend_ref,
                err_class=err_class,
            )
            self._store(updated)
            self._append(self._transition_event(updated, backend_ref, err_class))
        return updated

    def _transitioned(
        self,
        current: Record,
        state: str,
        *,
        message: str,
        source: str,
        backend_ref: str | None,
        err_class: str | None,
    ) -> Record:
        """``current`` with one more transition, and terminal fields set if it ends the job."""
        step = Transition(ts=_now(), state=state, message=self._redact(message), source=source)
        terminal = state if state in TERMINAL else None
        return current.replace(
            transitions=(*current.transitions, step),
            terminal_state=terminal,
            terminal_write_by=source if terminal else current.terminal_write_by,
            backend_ref=current.backend_ref if backend_ref is None else self._redact(backend_ref),
            err_class=err_class or current.err_class,
        )

    def _transition_event(
        self, record: Record, backend_ref: str | None, err_class: str | None
    ) -> dict[str, str]:
        """The journal line for the record's latest transition."""
        step = record.transitions[-1]
        event: dict[str, str] = {
            "ts": step.ts,
            "id": record.id,
            "event": "transition",
            "state": step.state,
            "message": step.message,
            "source": step.source,
        }
        if backend_ref is not None and record.backend_ref is not None:  # this mark set it
            event["backend_ref"] = record.backend_ref
        if err_class is not None:
            event["err_class"] = err_class
        return event

    # -- reading ----------------------------------------------------------

    def get(self, job_id: str) -> Record:
        """Load the record for ``job_id``; :class:`UnknownJob` if there is none."""
        return self._load(check_job_id(job_id))

    def sidecar(self, job_id: str) -> dict[str, object]:
        """taospec's notes about ``job_id``; ``{}`` when it has none."""
        path = self._sidecar_path(check_job_id(job_id))
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise LedgerCorrupt(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise LedgerCorrupt(f"{path}: a sidecar must be a JSON object")
        return data

    def update_sidecar(self, job_id: str, **fields: object) -> None:
        """Merge ``fields`` (redacted) into the sidecar under the record's lock."""
        check_job_id(job_id)
        cleaned = self._clean_mapping(fields, "sidecar")
        with self._locked(job_id):
            self._require_record(job_id)
            merged = {**self.sidecar(job_id), **cleaned}
            _write_atomic(os.fspath(self._sidecar_path(job_id)), _encode_json(merged))

    def list(self, *, state: str | None = None, limit: int | None = None) -> builtins.list[Record]:
        """Records newest first, optionally only those in ``state``, at most ``limit``.

        With a journal, only as many records are read as it takes to fill
        ``limit``; records without a journal line (written by other tools, or
        by a crash between record and journal) are merged in by submission time.
        Whether there are any is answered by :mod:`taospec.listing` from what
        was appended to the journal and whether the jobs folder changed since
        it last looked, not by counting the whole ledger.
        """
        if state is not None:
            _check_choice("state", state, STATES)
        if limit is not None and limit < 0:
            raise InvalidInput(f"limit must not be negative, got {limit}")
        matching = (r for r in self._newest_first() if state is None or r.state == state)
        return builtins.list(itertools.islice(matching, limit))

    def journal(self, job_id: str | None = None) -> Iterator[dict[str, object]]:
        """Yield journal events oldest first, optionally for one job; torn lines are skipped."""
        if job_id is not None:
            check_job_id(job_id)
        try:
            stream = self.journal_path.open("rb")
        except FileNotFoundError:
            return
        with stream:
            for line in stream:
                entry = _parse_line(line)
                if entry is not None and (job_id is None or entry.get("id") == job_id):
                    yield entry

    # -- listing ----------------------------------------------------------

    def _newest_first(self) -> Iterator[Record]:
        """Every record, newest first, reading records lazily from the journal."""
        if not self.journal_path.exists():
            yield from sorted(self._records_not_in(frozenset()), key=_newest_key, reverse=True)
            return
        others = listing.foreign(
            self.root,
            self.jobs_dir,
            self.journal_path,
            record_ids=self._record_ids,
            journal_ids=self._journal_ids,
            submitted_at=self._submitted_at,
        )
        if not others:
            yield from self._journal_records()
            return
        foreign = (r for r in map(self._read_record, (job_id for _, job_id in others)) if r)
        seen: set[str] = set()
        for record in heapq.merge(self._journal_records(), foreign, key=_newest_key, reverse=True):
            if record.id not in seen:
                seen.add(record.id)
                yield record

    def _submitted_at(self, job_id: str) -> str | None:
        record = self._read_record(job_id)
        return None if record is None else record.submitted_at

    def _journal_records(self) -> Iterator[Record]:
        """Records in the order of their journal ``open`` lines, newest first."""
        seen: set[str] = set()
        for line in _lines_backwards(self.journal_path):
            entry = _parse_line(line)
            job_id = None if entry is None else _journal_id(entry)
            if job_id is None or job_id in seen:
                continue
            seen.add(job_id)
            record = self._read_record(job_id)
            if record is not None:
                yield record

    def _journal_ids(self) -> frozenset[str]:
        """Every id the journal has an ``open`` line for."""
        ids = (_journal_id(entry) for entry in self.journal())
        return frozenset(job_id for job_id in ids if job_id is not None)

    def _record_ids(self) -> Iterator[str]:
        """Ids of the record files in the jobs folder (no temp files, locks or sidecars)."""
        try:
            entries = os.scandir(self.jobs_dir)
        except FileNotFoundError:
            return
        with entries:
            yield from filter(None, (_record_file_id(entry.name) for entry in entries))

    def _records_not_in(self, known: frozenset[str]) -> Iterator[Record]:
        """Load the records whose ids are not in ``known``."""
        for job_id in self._record_ids():
            if job_id not in known:
                record = self._read_record(job_id)
                if record is not None:
                    yield record

    # -- files and locks --------------------------------------------------

    def _record_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def _sidecar_path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}{_SIDECAR_SUFFIX}"

    def _ensure_jobs_dir(self) -> None:
        if not posixpath.isdir(self._jobs):
            self.jobs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            _fsync_dir(self.root)

    def _require_record(self, job_id: str) -> None:
        if not self._record_path(job_id).is_file():
            raise UnknownJob(f"no job {job_id} in {self.jobs_dir}")

    def _read_record(self, job_id: str) -> Record | None:
        """Load one record; ``None`` if its file is missing or still an empty reservation."""
        path = self._record_path(job_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        if not raw:
            return None
        written = self._written.get(job_id)
        if written is not None and written[0] == raw:
            return written[1]
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise LedgerCorrupt(f"{path}: not valid JSON ({exc})") from exc
        record = Record.from_json(data, origin=str(path))
        if record.id != job_id:
            raise LedgerCorrupt(f"{path}: holds the record of {record.id}, not {job_id}")
        return record

    def _load(self, job_id: str) -> Record:
        record = self._read_record(job_id)
        if record is None:
            raise UnknownJob(f"no job {job_id} in {self.jobs_dir}")
        return record

    def _store(self, record: Record, *, create: bool = False) -> bool:
        """Durably write ``record`` (``create``: only where there is none); True if written.

        The bytes are remembered with the record, so that reading the file back
        while it still holds exactly them (the next mark of a job this ledger
        opened or marked) needs no parsing and validating again.
        """
        data = _encode_json(record.to_json())
        path = f"{self._jobs}/{record.id}.json"
        if create:
            if not _create_atomic(path, data):
                return False
        else:
            _write_atomic(path, data)
        self._written.pop(record.id, None)
        if len(data) <= _WRITTEN_SIZE:
            if len(self._written) >= _WRITTEN_KEPT:
                del self._written[next(iter(self._written))]  # the one written longest ago
            self._written[record.id] = (data, record)
        return True

    @contextmanager
    def _locked(self, job_id: str) -> Iterator[None]:
        """Hold the exclusive lock on the stripe of ``jobs/.locks/`` that ``job_id`` maps to.

        The stripe is the CRC-32 of the id modulo :data:`_LOCK_STRIPES`, the same
        in every process and Python version (``hash()`` is not). The
        lock says nothing about whether the record exists: callers check that
        under it. Nothing here takes a second lock stripe, and no caller holds one
        while asking for another (the journal's own ``flock`` is only ever taken
        inside a stripe, never the other way round), so taking turns cannot deadlock.
        """
        lock = f"{self._locks}/{zlib.crc32(job_id.encode()) % _LOCK_STRIPES:02x}"
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:
            fd = self._make_lock(job_id, lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _make_lock(self, job_id: str, lock: str) -> int:
        """Make the lock folder (if the jobs folder is there) and open ``lock`` in it.

        A state root with no jobs folder has no records: an unknown id raises
        :class:`UnknownJob` then, rather than making folders for it.
        """
        try:
            os.mkdir(self._locks, 0o700)  # noqa: PTH102 - plain string paths
        except FileExistsError:
            pass
        except FileNotFoundError:
            self._require_record(job_id)
            raise
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)

    def _append(self, event: Mapping[str, str]) -> None:
        """Append one event to the journal with a single write.

        The line is not fsynced: the record it indexes already is (see the
        module's guarantees). Only the journal's creation is made durable, once.
        """
        line = _journal_line(event)
        fd = os.open(self._journal, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            created = _append_fenced(fd, line, self._journal)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(self.root)


def _append_fenced(fd: int, line: bytes, path: str) -> bool:
    """Write ``line`` at the end of ``fd`` in one ``write()``; return whether it was empty.

    The journal's ``flock`` is held so no other appender is mid-write while the
    last byte is checked: a missing final newline then means a writer died
    mid-line, and this line starts with a newline to fence the fragment off.
    """
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        if os.write(fd, line) != len(line):
            raise TaospecError(f"{path}: short write while appending")
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return size == 0


def _unchanged_terminal(record: Record, state: str) -> Record:
    """Return ``record`` if ``state`` repeats its terminal state, else refuse."""
    if state == record.terminal_state:
        return record
    raise TerminalStateError(
        f"job {record.id} is already {record.terminal_state}; refusing to mark it {state} "
        "(terminal states are immutable)"
    )
