"""The TAO job record: its shape, its ids and platform names, and how a change is applied.

A record is one JSON object per job (``jobs/<id>.json``), in the shape NVIDIA's
TAO recorder writes (``scripts/tao_job_record.py`` in the TAO skill bank). The
functions here work on that object as read from disk, a ``dict``, and change it
the way the recorder does, so the keys keep the order they had and a record
taospec rewrites is the one the recorder would have written. :class:`Record` is
the checked, typed view the rest of taospec reads.
"""

from __future__ import annotations

import operator
import posixpath
import re
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from taospec.errors import InvalidInput, TaospecError
from taospec.states import PENDING, STATES, TERMINAL, UNKNOWN

SCHEMA_VERSION = 1
SOURCES = ("agent", "poller", "backend-hook")
STORAGE_TIERS = ("A", "B", "C")
ERR_CLASSES = ("ERR_INFRA", "ERR_PROGRAM")
EXAMPLE_PLATFORMS = ("docker", "slurm", "kubernetes", "brev", "virtualenv", "kratos")
LOCATION_FIELDS = frozenset({"results_dir", "image", "backend_ref"})
"""Fields holding a path or URI: only format rules redact them (see taospec.lint)."""
NAME_FIELDS = frozenset(
    {
        "id",
        "platform",
        "state",
        "source",
        "terminal_state",
        "terminal_write_by",
        "err_class",
        "storage_tier",
    }
)
"""Fields whose values are names from the record's own vocabulary (a state, a source, a
platform's slug) or the record's id, which is its file's name: redaction leaves such a
name (:data:`ID_RE`) as it is. A passed secret whose value is COMPLETE made a mark write
``<redacted>`` as the state, and the record could be read no more."""
OPENED_MESSAGE = "record opened before launch"

ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
PLATFORM_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_UTC = r"(?:[.,](?P<fraction>\d+))?(?:Z|\+00(?::?00)?)"
_TS_FORMS = (
    re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2})(?::(\d{2})(?::(\d{2}))?)?" + _UTC),
    re.compile(r"(\d{4})(\d{2})(\d{2})T(\d{2})(?:(\d{2})(\d{2})?)?" + _UTC),
)
"""An ISO 8601 time in UTC as a record may hold it, extended (``2026-01-01T08:30:00Z``)
or basic (``20260101T083000Z``), to the hour, minute or second, with a decimal fraction
of its last part (``.`` or ``,``), and ``Z``, ``+00:00``, ``+0000`` or ``+00``: the
recorder writes ``+00:00`` with microseconds, and reads none, so a record another tool
wrote may hold any of these."""

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
    "submitted_at",
    "transitions",
    "terminal_state",
    "redacted",
)
_OPTIONAL_KEYS = ("upload_excludes", "terminal_write_by", "err_class", "retry_of", "parent_job")
_TRANSITION_KEYS = ("ts", "state", "message", "source")

Document = dict[str, Any]
"""A record as JSON reads it from disk and writes it back."""


class LedgerCorrupt(TaospecError):
    """A ledger file does not have the shape the TAO record format requires."""


class Transition(NamedTuple):
    """One entry of a record's append-only ``transitions`` list."""

    ts: str
    state: str
    message: str
    source: str

    def to_json(self) -> dict[str, str]:
        """The on-disk shape ``{ts, state, message, source}``."""
        return {"ts": self.ts, "state": self.state, "message": self.message, "source": self.source}


class Record(NamedTuple):
    """A checked, typed view of one TAO job record.

    A named tuple rather than a frozen dataclass, as :class:`Transition` is: the two
    dataclasses took 2.4 ms to define at every start of ``ls`` and ``status``, about
    a sixth of a bare interpreter's start, and a named tuple takes a tenth of that.
    """

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
    transitions: tuple[Transition, ...] = ()
    terminal_state: str | None = None
    err_class: str | None = None
    retry_of: str | None = None
    parent_job: str | None = None
    terminal_write_by: str | None = None

    @property
    def state(self) -> str:
        """The terminal state if there is one, else the latest transition's state."""
        if self.terminal_state is not None:
            return self.terminal_state
        return self.transitions[-1].state if self.transitions else UNKNOWN

    def to_json(self) -> Document:
        """The record in the recorder's key order; unset optional fields are left out."""
        data: Document = {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "platform": self.platform,
            "backend_ref": self.backend_ref,
            "image": self.image,
            "network_arch": self.network_arch,
            "action": self.action,
            "results_dir": self.results_dir,
            "storage_tier": self.storage_tier,
            "upload_excludes": list(self.upload_excludes),
            "submitted_at": self.submitted_at,
            "transitions": [t.to_json() for t in self.transitions],
            "terminal_state": self.terminal_state,
            "redacted": True,
        }
        for key in ("parent_job", "retry_of", "err_class", "terminal_write_by"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


# -- reading ------------------------------------------------------------------


def parse_record(data: object, origin: str) -> Record:
    """The typed record in ``data``, or :class:`LedgerCorrupt` naming ``origin`` and the field."""
    shape = _Shape(data, origin)
    shape.check_keys(_REQUIRED_KEYS, _OPTIONAL_KEYS)
    shape.require("schema_version", _is_schema_version, "the integer 1")
    shape.require("redacted", _is_true, "true")
    return Record(
        id=shape.string("id", _is_id, f"an id matching {ID_RE.pattern}"),
        platform=shape.string("platform", _matches(PLATFORM_RE), PLATFORM_RE.pattern),
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
        retry_of=shape.optional_string("retry_of", _any_text, "a string or null"),
        parent_job=shape.optional_string("parent_job", _any_text, "a string or null"),
        terminal_write_by=shape.optional_string(
            "terminal_write_by", _among(SOURCES), ", ".join(SOURCES)
        ),
    )


class _Shape:
    """Checked, typed access to one JSON object read from a ledger file."""

    def __init__(self, data: object, origin: str, path: str = "$") -> None:
        if not isinstance(data, dict):
            raise LedgerCorrupt(f"{origin}: {path} must be a JSON object")
        self.data: dict[str, object] = data
        self.origin = origin
        self.path = path

    def fail(self, key: str, expected: str) -> LedgerCorrupt:
        found = type(self.data.get(key)).__name__ if key in self.data else "nothing"
        return LedgerCorrupt(f"{self.origin}: {self.path}.{key} must be {expected}, found {found}")

    def check_keys(self, required: Sequence[str], optional: Sequence[str] = ()) -> None:
        missing = [key for key in required if key not in self.data]
        unknown = sorted(set(self.data) - set(required) - set(optional))
        if missing:
            raise LedgerCorrupt(f"{self.origin}: {self.path} lacks {', '.join(missing)}")
        if unknown:
            raise LedgerCorrupt(f"{self.origin}: {self.path} has unknown keys {', '.join(unknown)}")

    def require(self, key: str, rule: Callable[[object], bool], expected: str) -> None:
        if not rule(self.data.get(key)):
            raise self.fail(key, expected)

    def string(self, key: str, rule: Callable[[str], bool], expected: str) -> str:
        value = self.data.get(key)
        if not isinstance(value, str) or not rule(value):
            raise self.fail(key, expected)
        return value

    def optional_string(self, key: str, rule: Callable[[str], bool], expected: str) -> str | None:
        if self.data.get(key) is None:
            return None
        return self.string(key, rule, expected)

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, "a list of strings")
        return tuple(value)

    def objects(self, key: str) -> list[_Shape]:
        value = self.data.get(key)
        if not isinstance(value, list) or not value:
            raise self.fail(key, "a non-empty list")
        return [
            _Shape(item, self.origin, f"{self.path}.{key}[{i}]") for i, item in enumerate(value)
        ]


def _transitions(shape: _Shape) -> tuple[Transition, ...]:
    result = []
    for item in shape.objects("transitions"):
        item.check_keys(_TRANSITION_KEYS)
        result.append(
            Transition(
                ts=item.string("ts", _non_empty, "a non-empty string"),
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


def _is_id(value: str) -> bool:
    return ID_RE.fullmatch(value) is not None


def _is_timestamp(value: str) -> bool:
    try:
        instant(value)
    except ValueError:
        return False
    return True


def instant(ts: str) -> datetime:
    """A record's timestamp (:data:`_TS_FORMS`) as a time, to the microsecond; ValueError
    where it is none, or names no day or time of the calendar (``2026-02-30``, ``25:00``).

    Python 3.10's ``fromisoformat`` reads no ``Z``, no basic form and only 3 or 6
    fraction digits, so the time is built from its parts."""
    parts = _TS_FORMS[0].fullmatch(ts) or _TS_FORMS[1].fullmatch(ts)
    if parts is None:
        raise ValueError(f"not an ISO 8601 UTC time: {ts!r}")
    year, month, day, hour, minute, second = (int(part or 0) for part in parts.groups()[:6])
    whole = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    digits = parts["fraction"]
    if digits is None:
        return whole
    given = sum(part is not None for part in parts.groups()[3:6])  # hour, minute, second
    unit = (3_600_000_000, 60_000_000, 1_000_000)[given - 1]  # the last part's, in µs
    return whole + timedelta(microseconds=int(digits[:9]) * unit // 10 ** len(digits[:9]))


def shown_time(ts: str) -> str:
    """A record's timestamp as ``ls`` shows it: ``2026-01-01 08:30:00``, in UTC."""
    return instant(ts).strftime("%Y-%m-%d %H:%M:%S")


# -- names ----------------------------------------------------------------------


def check_job_id(job_id: str) -> str:
    """``job_id`` if it names a record inside the jobs folder, else :class:`InvalidInput`.

    The pattern keeps ids inside the folder: no ``/``, no NUL, no leading dot.
    """
    if not isinstance(job_id, str) or not _is_id(job_id):
        raise InvalidInput(f"invalid job id: {job_id!r}")
    return job_id


def platform_slug(value: str) -> str:
    """The platform's canonical name, normalised as the recorder does, or :class:`InvalidInput`.

    Trimmed and lowercased; runs of whitespace and underscores become ``-``; runs
    of ``-`` collapse; leading and trailing ``-`` go. What is left must be a name.
    """
    slug = re.sub(r"[\s_]+", "-", value.strip().lower())
    slug = re.sub(r"-{2,}", "-", slug).strip("-")
    if PLATFORM_RE.fullmatch(slug) is None:
        raise InvalidInput(
            f"cannot normalize platform {value!r} to a name (canonical form "
            f"^{PLATFORM_RE.pattern}$; e.g. {', '.join(EXAMPLE_PLATFORMS)})"
        )
    return slug


def now() -> str:
    """The current UTC time, ISO 8601 with microseconds and ``+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


# -- changes ----------------------------------------------------------------------


class Opening(NamedTuple):
    """What ``open`` records, checked, before an id is chosen."""

    platform: str
    image: str
    network_arch: str
    action: str
    storage_tier: str
    results_root: str | None
    results_dir: str | None
    upload_excludes: tuple[str, ...]
    parent_job: str | None
    retry_of: str | None
    message: str

    def record(self, job_id: str) -> Record:
        """The new PENDING record for ``job_id`` (:meth:`Record.to_json` writes it in the
        recorder's key order, ``parent_job`` and ``retry_of`` after ``redacted``)."""
        stamp = now()
        location = self.results_dir
        if location is None:
            location = posixpath.join(self.results_root or "", job_id)
        return Record(
            id=job_id,
            platform=self.platform,
            backend_ref=None,
            image=self.image,
            network_arch=self.network_arch,
            action=self.action,
            results_dir=location,
            storage_tier=self.storage_tier,
            upload_excludes=self.upload_excludes,
            submitted_at=stamp,
            transitions=(Transition(stamp, PENDING, self.message, "agent"),),
            parent_job=self.parent_job or None,
            retry_of=self.retry_of or None,
        )


def require_text(name: str, value: object, prefix: str = "") -> str:
    """``value`` if it is a string with more than whitespace, else :class:`InvalidInput`."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{prefix}{name} must be non-empty")
    return value


def check_choice(name: str, value: str | None, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices``, else :class:`InvalidInput`."""
    if value is None or value not in choices:
        raise InvalidInput(f"invalid {name} {value!r}: expected one of {', '.join(choices)}")
    return value


class Mark(NamedTuple):
    """One ``mark``: a state, and what comes with it."""

    state: str
    message: str = ""
    source: str = "agent"
    backend_ref: str | None = None
    err_class: str | None = None

    def apply(self, data: Document, record: Record) -> Record:
        """Append this transition to ``data``, as the recorder changes it (in place), and
        return ``record``, the typed view of ``data``, changed alike."""
        step = Transition(now(), self.state, self.message, self.source)
        data["transitions"].append(step.to_json())
        changes: dict[str, Any] = {"transitions": (*record.transitions, step)}
        if self.backend_ref:
            data["backend_ref"] = changes["backend_ref"] = self.backend_ref
        if self.err_class:
            data["err_class"] = changes["err_class"] = self.err_class
        if self.state in TERMINAL:
            data["terminal_state"] = changes["terminal_state"] = self.state
            data["terminal_write_by"] = changes["terminal_write_by"] = self.source
        return record._replace(**changes)

    def enrich(self, data: Document, record: Record) -> Record:
        """For a repeat of the terminal state: fill ``err_class`` and ``backend_ref`` if unset.

        Changes ``data`` in place and returns ``record`` changed alike; ``record`` itself
        when nothing changed. Nothing else changes.
        """
        changes: dict[str, Any] = {}
        if self.err_class and not data.get("err_class"):
            data["err_class"] = changes["err_class"] = self.err_class
        if self.backend_ref and not data.get("backend_ref"):
            data["backend_ref"] = changes["backend_ref"] = self.backend_ref
        return record._replace(**changes) if changes else record


def redact_document(
    value: Any, text: Callable[[str], str], location: Callable[[str], str], key: str = ""
) -> Any:
    """A record (or sidecar) with every string redacted by its field's type.

    Strings under :data:`LOCATION_FIELDS` go through ``location``, every other
    string through ``text``; keys are kept, and a list's items take its key. Like
    the redactions of :class:`taospec.lint.Redactor`, which return the string given
    when they leave it as it is, this returns ``value`` itself when redaction changed
    none of its strings, and a copy otherwise: ``redact_document(d, ...) is d`` tells
    that ``d`` is already redacted.
    """
    if isinstance(value, str):
        if key in NAME_FIELDS and ID_RE.fullmatch(value):
            return value
        return location(value) if key in LOCATION_FIELDS else text(value)
    if isinstance(value, list):
        items = [redact_document(item, text, location, key) for item in value]
        return value if all(map(operator.is_, items, value)) else items
    if isinstance(value, dict):
        fields = {k: redact_document(v, text, location, k) for k, v in value.items()}
        return value if all(map(operator.is_, fields.values(), value.values())) else fields
    return value
