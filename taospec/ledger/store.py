"""The ledger: the job records under one state root, their sidecars and the journal.

Layout under the state root (``$TAO_STATE_DIR``, default ``~/.tao``)::

    jobs/<id>.json             the record, in the TAO recorder's shape and encoding
    jobs/.<id>.json.lock       the record's lock, the recorder's own lock file
    jobs/.<id>.json.<pid>.tmp  a writer's temp file, renamed over the record
    jobs/<id>.taospec          taospec's notes about the job (never in the record)
    ledger.jsonl               the journal: one line per open and per transition
    taospec/listing.json       what :mod:`taospec.ledger.listing` remembers for ``ls``

Guarantees, shared with the recorder so either may write the same record:

* ``open`` creates ``jobs/<id>.json`` whole or not at all, and never over an
  existing record (:func:`taospec.durable.create_exclusive`); it writes the
  sidecar first, under the record's lock. An open that fails removes what it
  wrote and raises.
* Every read-modify-write of a record holds an exclusive ``flock`` on
  ``jobs/.<id>.json.lock`` from the read to the rename; nothing else decides
  who may write a record.
* Every write is temp file, fsync, rename, folder fsync
  (:mod:`taospec.durable`), and every string written passes the secret
  redaction for its field's type: ``results_dir``, ``image`` and ``backend_ref``
  through :func:`taospec.lint.redact_location`, every other string through
  :func:`taospec.lint.redact`.
* Terminal states are immutable; repeating the terminal state only fills in an
  ``err_class`` or ``backend_ref`` the record lacks.
* The record is the durable truth; the journal indexes it and may lose its last
  lines to a power cut, which costs a rescan, never a record.

``ls`` is fast on a large ledger because it reads the journal backwards and
opens only the records it prints; how it learns about records the journal does
not know (the recorder's, or one a crash left unindexed) without scanning the
jobs folder every time is :mod:`taospec.ledger.listing`. What it keeps are
counts, offsets and ids, never a copy of a record: every record listed is read
from its file.
"""

from __future__ import annotations

import errno
import heapq
import itertools
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from typing import NamedTuple

from taospec import durable, lint
from taospec.errors import InvalidInput
from taospec.jobids import mint_id, mint_source, minted_form
from taospec.ledger import journal, listing
from taospec.ledger.record import (
    ERR_CLASSES,
    OPENED_MESSAGE,
    SOURCES,
    STORAGE_TIERS,
    Document,
    LedgerCorrupt,
    Mark,
    Opening,
    Record,
    check_choice,
    check_job_id,
    instant,
    parse_record,
    platform_slug,
    redact_document,
    require_text,
)
from taospec.states import STATES

JOURNAL_SIDECAR_KEYS = ("target", "fingerprint")
SIDECAR_SUFFIX = ".taospec"
"""A sidecar is ``<id>.taospec`` beside the record ``<id>.json``."""
_MINT_ATTEMPTS = 32
_RECORD_MODE = 0o644  # as the recorder leaves its records


class UnknownJob(InvalidInput):
    """No record exists for the requested job id."""


class TerminalStateError(InvalidInput):
    """A record that reached a terminal state was asked to change it."""


class Marked(NamedTuple):
    """What a mark did: the record after it, and whether a transition was appended."""

    record: Record
    appended: bool


Warn = Callable[[str], None]


def warn_on_stderr(message: str) -> None:
    """The default for a record a listing skips: one line on stderr."""
    print(f"taospec: warning: {message}", file=sys.stderr, flush=True)


def state_root(environ: Mapping[str, str]) -> str:
    """``$TAO_STATE_DIR`` if set (absolute), else ``~/.tao``: as the recorder reads it."""
    if "TAO_STATE_DIR" not in environ:
        return os.path.join(os.path.expanduser("~"), ".tao")
    value = environ["TAO_STATE_DIR"]
    if not value.strip():
        raise InvalidInput("TAO_STATE_DIR is set but empty; unset it or give an absolute path")
    if not os.path.isabs(value):
        raise InvalidInput(f"TAO_STATE_DIR must be an absolute path (got {value!r})")
    return value


def spelled_as_pathlib(path: str) -> str:
    """``path`` as ``str(PurePosixPath(path))`` spells it: repeated slashes, ``.`` parts and a
    trailing slash dropped, ``..`` kept. The recorder names files through pathlib, so the
    ledger's messages name them the same way without importing it."""
    if path.startswith("//") and not path.startswith("///"):
        head = "//"  # POSIX leaves exactly two leading slashes to the system
    elif path.startswith("/"):
        head = "/"
    else:
        head = ""
    body = "/".join(part for part in path.split("/") if part not in ("", "."))
    return head + body or "."


class Ledger:
    """The job records under one state root, and the journal beside them."""

    def __init__(self, root: str | os.PathLike[str], secret_values: Iterable[str] = ()) -> None:
        root = spelled_as_pathlib(os.fspath(root))
        if not os.path.isabs(root):
            raise InvalidInput(f"the ledger root must be an absolute path (got {str(root)!r})")
        self.root = root
        self.jobs_dir = os.path.join(root, "jobs")
        self.journal_path = os.path.join(root, journal.NAME)
        self._redactor = lint.Redactor(value for value in secret_values if value)
        self._text = self._redactor.text
        self._location = self._redactor.location
        self._swept = False

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, secret_values: Iterable[str] = ()
    ) -> Ledger:
        """The ledger at ``$TAO_STATE_DIR`` (default ``~/.tao``)."""
        return cls(state_root(os.environ if environ is None else environ), secret_values)

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
        message: str = OPENED_MESSAGE,
    ) -> Record:
        """Create a PENDING record (and its sidecar and journal line); return it.

        The id is minted from ``network_arch`` and ``action`` unless ``job_id`` is
        given (which must not exist yet). ``results_dir`` is bound here: the given
        one as it is, or ``<results_root>/<id>``. ``sidecar_for(id)`` gives notes
        that name the id; they join ``sidecar`` in the one sidecar written.
        """
        if bool(results_root) == bool(results_dir):
            raise InvalidInput("pass exactly one of results_root and results_dir")
        if isinstance(upload_excludes, str) or not all(
            isinstance(item, str) for item in upload_excludes
        ):
            raise InvalidInput("upload_excludes must be a list of strings")
        # What the record's types ask of the rest; the record is not read back to check.
        _require_string("message", message)
        for name, value in (
            ("results_dir", results_dir or None),
            ("parent_job", parent_job or None),
            ("retry_of", retry_of or None),
        ):
            _require_optional_string(name, value)
        opening = Opening(
            platform=platform_slug(platform),
            image=require_text("image", image),
            network_arch=require_text("network_arch", network_arch),
            action=require_text("action", action),
            storage_tier=check_choice("storage tier", storage_tier, STORAGE_TIERS),
            results_root=results_root or None,
            results_dir=results_dir or None,
            upload_excludes=tuple(upload_excludes),
            parent_job=parent_job or None,
            retry_of=retry_of or None,
            message=message,
        )
        if job_id is not None:
            self._check_stable_id(check_job_id(job_id))
        notes = self._clean_mapping(sidecar or {}, "sidecar")
        self._ensure_jobs_dir()
        self._sweep_remembered()
        last = ""
        for candidate in self._candidates(job_id, opening):
            named = notes
            if sidecar_for is not None:
                named = {**notes, **self._clean_mapping(sidecar_for(candidate), "sidecar")}
            created = self._create(opening.record(candidate), named)
            if created is not None:
                return created
            last = candidate
        if not last:  # every id minted held a value redaction removes
            raise InvalidInput(
                "open: no id can be minted from this network_arch and action: it would hold "
                "a value taospec keeps out of the ledger (a secret's, or a passed variable's), "
                "whole or as an id spells it"
            )
        raise InvalidInput(f"record already exists: {self._record_path(last)}")

    def _candidates(self, job_id: str | None, opening: Opening) -> Iterator[str]:
        """The explicit id once, or freshly minted ids that redaction leaves as they are;
        none when it would change what they are cut from (see :func:`mint_source`), or
        that holds a known value as an id spells it (``a b!`` as ``a-b-``)."""
        if job_id is not None:
            yield job_id
            return
        source = mint_source(opening.network_arch, opening.action)
        if self._text(source) != source or self._redactor.holds(source, minted_form):
            return
        for _ in range(_MINT_ATTEMPTS):
            candidate = mint_id(opening.network_arch, opening.action)
            if self._text(candidate) == candidate:
                yield candidate

    def _create(self, record: Record, notes: dict[str, object]) -> Record | None:
        """Write a new record unless its id is taken; its sidecar first, then its journal line.

        Under the record's lock, the sidecar is written before the record, so a record
        taospec opens is never without its notes (the submitter a status check uses to
        close a launch that died), even when the process is killed between the two. A
        sidecar without a record is what such a kill leaves; the next open of that id
        replaces it. The record is written redacted; only when redaction changed one of
        its strings is the typed record read back from what is written. Anything failing
        after the record exists removes the record and the sidecar before raising, so a
        failed open leaves no record behind.
        """
        document = record.to_json()
        data = self.redacted(document)
        path = self._record_path(record.id)  # ids are left as they are by redaction
        if data is not document:
            record = parse_record(data, str(path))
        sidecar = self._sidecar_path(record.id)
        with self._locked(record.id):
            if os.path.lexists(path):
                return None  # taken: its sidecar is not ours to touch
            try:
                if notes:
                    durable.write_atomic(sidecar, durable.encode_json(notes))
                else:
                    durable.remove(sidecar)
                created = durable.create_exclusive(
                    path, durable.encode_json(data), mode=_RECORD_MODE
                )
            except BaseException:
                durable.remove(sidecar)
                raise
            if not created:  # the recorder opened the id meanwhile; it takes no lock to
                durable.remove(sidecar)
                return None
        try:
            journal.append(self.journal_path, _open_event(record, notes))
        except BaseException:
            durable.remove(sidecar)
            durable.remove(path)
            raise
        return record

    # -- marking ----------------------------------------------------------

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
        """Append a transition to ``state``; return the record after it.

        Repeating a record's terminal state appends nothing (it may fill in
        ``err_class`` and ``backend_ref``); any other state after a terminal one
        raises :class:`TerminalStateError`.
        """
        change = Mark(state, message, source, backend_ref, err_class)
        return self.apply(job_id, change).record

    def apply(self, job_id: str, change: Mark) -> Marked:
        """:meth:`mark` with what it did: under the record's lock, read, change, write."""
        check_job_id(job_id)
        check_choice("state", change.state, STATES)
        check_choice("source", change.source, SOURCES)
        if change.err_class is not None:
            check_choice("err_class", change.err_class, ERR_CLASSES)
        # What the record's types ask of the rest; the record is not read back to check.
        _require_string("message", change.message)
        _require_optional_string("backend_ref", change.backend_ref)
        self._require_record(job_id)
        self._sweep_remembered()
        with self._locked(job_id):
            data, record = self._read(job_id)
            if record.terminal_state is not None:
                if change.state != record.terminal_state:
                    raise TerminalStateError(
                        f"record {job_id} is terminal ({record.terminal_state}); "
                        f"refusing transition to {change.state}"
                    )
                enriched = change.enrich(data, record)
                if enriched is not record:
                    record = self._write(job_id, data, enriched)
                return Marked(record, appended=False)
            record = self._write(job_id, data, change.apply(data, record))
            journal.append(self.journal_path, _transition_event(record, change))
        return Marked(record, appended=True)

    def _write(self, job_id: str, data: Document, record: Record) -> Record:
        """Redact and durably write ``data`` as the record of ``job_id``; return its typed view.

        ``record`` is that view of ``data`` as it is; only when redaction changed one of
        its strings is the view read back from what is written.
        """
        redacted = self.redacted(data)
        path = self._record_path(job_id)
        if redacted is not data:
            record = parse_record(redacted, str(path))
        durable.write_atomic(path, durable.encode_json(redacted), mode=_RECORD_MODE)
        return record

    # -- reading ----------------------------------------------------------

    def get(self, job_id: str) -> Record:
        """The record of ``job_id``; :class:`UnknownJob` if there is none."""
        return self._read(check_job_id(job_id))[1]

    def document(self, job_id: str) -> object:
        """The JSON in the record file of ``job_id``, keys in its order, redacted again.

        This is what the recorder's ``show`` prints, whatever the file holds: a record
        that lacks fields, another id's record, any JSON value. Records are redacted when
        written, and once more when shown in case another writer did not. Raises
        :class:`UnknownJob` if there is no file, :class:`LedgerCorrupt` if it holds no JSON.
        """
        path = self._record_path(check_job_id(job_id))
        try:
            raw = _read_bytes(path)
        except FileNotFoundError:
            raise UnknownJob(f"no job-record at {path}") from None
        return redact_document(_decode_text(raw, path), self._text, self._location)

    def shown(self, record: Record, *fields: str) -> Document:
        """``record``'s document as a listing prints it (only ``fields``, when named),
        redacted again by field type.

        For the same reason as :meth:`document`: a record another writer left
        unredacted must not put a secret on the screen.
        """
        if not fields:
            return self.redacted(record.to_json())
        return self.redacted({name: getattr(record, name) for name in fields})

    def sidecar(self, job_id: str) -> dict[str, object]:
        """taospec's notes about ``job_id``; ``{}`` when it has none."""
        path = self._sidecar_path(check_job_id(job_id))
        try:
            data = json.loads(_read_bytes(path))
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise LedgerCorrupt(f"{path}: not valid JSON ({exc})") from exc
        except RecursionError:
            raise LedgerCorrupt(f"{path}: not a sidecar: its JSON nests too deeply") from None
        if not isinstance(data, dict):
            raise LedgerCorrupt(f"{path}: a sidecar must be a JSON object")
        return data

    def update_sidecar(self, job_id: str, **fields: object) -> None:
        """Merge ``fields`` (redacted) into the sidecar under the record's lock."""
        check_job_id(job_id)
        cleaned = self._clean_mapping(fields, "sidecar")
        self._require_record(job_id)
        with self._locked(job_id):
            merged = {**self.sidecar(job_id), **cleaned}
            durable.write_atomic(self._sidecar_path(job_id), durable.encode_json(merged))

    def unrecorded_sidecars(self) -> list[tuple[str, float]]:
        """Each sidecar that no record goes with, as its id and mtime, oldest first.

        An open killed between its two writes leaves one (see :meth:`_create`), and so
        does a record removed by hand. An open in progress has one too, until it lets go
        of the lock :meth:`remove_unrecorded_sidecar` takes.
        """
        try:
            names = set(os.listdir(self.jobs_dir))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            job_id = name.removesuffix(SIDECAR_SUFFIX)
            if job_id == name or f"{job_id}.json" in names:
                continue
            with suppress(InvalidInput, FileNotFoundError):
                found.append((os.stat(self._sidecar_path(check_job_id(job_id))).st_mtime, job_id))
        return [(job_id, mtime) for mtime, job_id in sorted(found)]

    def remove_unrecorded_sidecar(self, job_id: str) -> bool:
        """Remove ``job_id``'s sidecar if it still has no record, once no open holds the
        record's lock (an open holds it from the sidecar's write to the record's)."""
        with self._locked(check_job_id(job_id)):
            if os.path.lexists(self._record_path(job_id)):
                return False
            durable.remove(self._sidecar_path(job_id))
        return True

    def journal(self, job_id: str | None = None) -> Iterator[dict[str, object]]:
        """Journal events oldest first, optionally for one job; torn lines are skipped."""
        if job_id is not None:
            check_job_id(job_id)
        for entry in journal.events(self.journal_path):
            if job_id is None or entry.get("id") == job_id:
                yield entry

    # -- listing ----------------------------------------------------------

    def list(
        self, *, state: str | None = None, limit: int | None = None, warn: Warn = warn_on_stderr
    ) -> list[Record]:
        """Records newest first, optionally only those in ``state``, at most ``limit``.

        A record that cannot be read is skipped with one line to ``warn`` naming
        its file. Temp files of writers that died are removed on the way.
        """
        if state is not None:
            check_choice("state", state, STATES)
        if limit is not None and limit < 0:
            raise InvalidInput(f"limit must not be negative, got {limit}")
        newest = self._newest_first(warn)
        matching = (r for r in newest if state is None or r.state == state)
        return list(itertools.islice(matching, None if limit is None else min(limit, sys.maxsize)))

    def files(self) -> Iterator[tuple[str, object]]:
        """Every ``*.json`` file in name order, with its JSON as read (any JSON value) or the
        :class:`LedgerCorrupt` that says why it has none.

        These are the files the recorder lists, found as its ``Path.glob("*.json")`` finds
        them: dot-named ones too, and ones whose name is no job id.

        Temp files of writers that died are removed on the way.
        """
        folder = self._scan()
        durable.sweep_stale_temps(self.jobs_dir, folder.temps)
        for name in sorted(n for n in folder.names if n.endswith(".json")):
            path = f"{self.jobs_dir}/{name}"
            try:
                yield path, _decode_text(_read_bytes(path), path)
            except FileNotFoundError:
                continue  # removed since the scan
            except LedgerCorrupt as fault:
                yield path, fault

    def typed(self, path: str, data: object) -> Record:
        """The record ``data``, read from the record file ``path``, holds; :class:`LedgerCorrupt`
        unless it is a whole record of the id the file's name gives."""
        record = parse_record(data, path)
        named = path.rpartition("/")[2].removesuffix(".json")
        if record.id != named:
            raise LedgerCorrupt(f"{path}: holds the record of {record.id}, not {named}")
        return record

    def _newest_first(self, warn: Warn) -> Iterator[Record]:
        if not os.path.exists(self.journal_path):
            folder = self._scan()
            durable.sweep_stale_temps(self.jobs_dir, folder.temps)
            readable = (self._readable(i, warn) for i in folder.record_ids())
            yield from sorted(
                (r for r in readable if r is not None),
                key=lambda r: instant(r.submitted_at),
                reverse=True,
            )
            return
        found = listing.foreign(
            self.root,
            self.jobs_dir,
            self.journal_path,
            scan=self._scan,
            journal_ids=self._journal_ids,
            submitted_at=self._submitted_at,
        )
        durable.sweep_stale_temps(self.jobs_dir, found.temps)
        indexed = self._journal_records(warn)
        if not found.foreign:
            yield from indexed
            return
        others = (self._readable(job_id, warn) for _, job_id in found.foreign)
        seen: set[str] = set()
        merged = heapq.merge(
            indexed, (r for r in others if r), key=lambda r: instant(r.submitted_at), reverse=True
        )
        for record in merged:
            if record.id not in seen:
                seen.add(record.id)
                yield record

    def _journal_records(self, warn: Warn) -> Iterator[Record]:
        """Records in the order of their journal ``open`` lines, newest first."""
        seen: set[str] = set()
        for line in journal.lines_backwards(self.journal_path):
            if journal.OPEN_MARK not in line:
                continue  # a transition's line; only open lines name the records, once each
            entry = journal.parse_line(line)
            job_id = None if entry is None else journal.opened_id(entry)
            if job_id is None or job_id in seen:
                continue
            seen.add(job_id)
            record = self._readable(job_id, warn)
            if record is not None:
                yield record

    def _readable(self, job_id: str, warn: Warn) -> Record | None:
        """The record of ``job_id``; None (after a warning if it is damaged) when unreadable."""
        try:
            return self._parse_file(self._record_path(job_id), job_id)
        except FileNotFoundError:
            return None
        except LedgerCorrupt as fault:
            warn(f"skipped {fault}")
            return None

    def _submitted_at(self, job_id: str) -> str | None:
        try:
            return self._parse_file(self._record_path(job_id), job_id).submitted_at
        except FileNotFoundError:
            return None
        except LedgerCorrupt:
            return ""

    def _journal_ids(self) -> frozenset[str]:
        try:
            with open(self.journal_path, "rb") as lines:
                return frozenset(journal.opened_ids(lines))
        except FileNotFoundError:
            return frozenset()

    def _scan(self) -> listing.Scan:
        """One look at the jobs folder: one ``listdir``, counted by :func:`listing.scanned`."""
        try:
            names = os.listdir(self.jobs_dir)
        except FileNotFoundError:
            names = []
        except NotADirectoryError:
            raise _not_a_folder(self.jobs_dir) from None
        return listing.scanned(names)

    def _sweep_remembered(self) -> None:
        """On this ledger's first write: remove the dead writers' temp files ``ls`` last saw.

        Finding new ones takes a scan of the jobs folder (0.2 s at 200,000
        records), which only ``ls`` and ``record list`` make.
        """
        if not self._swept:
            self._swept = True
            durable.sweep_stale_temps(self.jobs_dir, listing.remembered_temps(self.root))

    # -- files and locks --------------------------------------------------

    def _record_path(self, job_id: str) -> str:
        return f"{self.jobs_dir}/{job_id}.json"

    def _sidecar_path(self, job_id: str) -> str:
        return f"{self.jobs_dir}/{job_id}{SIDECAR_SUFFIX}"

    def _ensure_jobs_dir(self) -> None:
        """Make the jobs folder (and the state root) if needed, as the recorder does."""
        if os.path.isdir(self.jobs_dir):
            return
        try:
            os.makedirs(self.jobs_dir, exist_ok=True)
        except (NotADirectoryError, FileExistsError):
            raise InvalidInput(f"TAO_STATE_DIR is not a directory: {self.root}") from None
        except OSError as exc:
            raise durable.WriteFailed(self.jobs_dir, exc) from None
        durable.fsync_folder(self.root)

    def _require_record(self, job_id: str) -> None:
        if not os.path.isfile(self._record_path(job_id)):
            if any(os.path.exists(p) and not os.path.isdir(p) for p in (self.root, self.jobs_dir)):
                raise _not_a_folder(self.jobs_dir)
            raise UnknownJob(f"no job-record at {self._record_path(job_id)}")

    def _read(self, job_id: str) -> tuple[Document, Record]:
        """The record's file as read, and its typed view; :class:`UnknownJob` if missing."""
        path = self._record_path(job_id)
        try:
            raw = _read_bytes(path)
        except FileNotFoundError:
            raise UnknownJob(f"no job-record at {path}") from None
        data = _decode(raw, path)
        record = parse_record(data, str(path))
        if record.id != job_id:
            raise LedgerCorrupt(f"{path}: holds the record of {record.id}, not {job_id}")
        assert isinstance(data, dict)  # parse_record checked it
        return data, record

    def _parse_file(self, path: str, job_id: str) -> Record:
        """The record in ``path``; FileNotFoundError when gone, LedgerCorrupt when damaged."""
        data = _decode(_read_bytes(path), path)
        record = parse_record(data, str(path))
        if record.id != job_id:
            raise LedgerCorrupt(f"{path}: holds the record of {record.id}, not {job_id}")
        return record

    def _locked(self, job_id: str) -> AbstractContextManager[None]:
        """The exclusive ``flock`` on ``jobs/.<id>.json.lock``, the recorder's lock."""
        return durable.flocked(f"{self.jobs_dir}/.{job_id}.json.lock", 0o644)

    # -- redaction --------------------------------------------------------

    def redacted(self, data: Document) -> Document:
        """A record-shaped document with every string redacted by its field's type."""
        redacted: Document = redact_document(data, self._text, self._location)
        return redacted

    def _check_stable_id(self, job_id: str) -> None:
        """Refuse an explicit id that redaction would change (it names files)."""
        if self._text(job_id) != job_id:
            raise InvalidInput("job id contains secret material; choose another")

    def _clean_mapping(self, values: Mapping[str, object], where: str) -> dict[str, object]:
        """Notes as JSON, every string redacted by its field's type (keys as free text)."""
        cleaned: dict[str, object] = {}
        for key, value in values.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: key {key!r} is not a string")
            cleaned[self._text(key)] = _plain(value, f"{where}.{key}")
        redacted: dict[str, object] = redact_document(cleaned, self._text, self._location)
        return redacted


def _require_string(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")


def _require_optional_string(name: str, value: object) -> None:
    if value is not None:
        _require_string(name, value)


def _read_bytes(path: str) -> bytes:
    """A ledger file's bytes: FileNotFoundError when there is none (also for a name too
    long to be a file's), LedgerCorrupt when it is a folder or cannot be read."""
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except FileNotFoundError:
        raise
    except NotADirectoryError:
        raise _not_a_folder(os.path.dirname(path)) from None
    except IsADirectoryError:
        raise LedgerCorrupt(f"{path}: a folder, not a record") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise FileNotFoundError(exc.errno, exc.strerror, path) from None
        raise LedgerCorrupt(f"{path}: cannot be read ({exc.strerror})") from None


def _not_a_folder(jobs_dir: str) -> InvalidInput:
    """The refusal for a ledger whose state root, or its jobs folder, is not a folder."""
    root = os.path.dirname(jobs_dir)
    if os.path.isdir(root):
        return InvalidInput(f"{jobs_dir} is not a directory")
    return InvalidInput(f"TAO_STATE_DIR is not a directory: {root}")


def _decode_text(raw: bytes, path: str) -> object:
    """The JSON in ``raw`` read as the recorder reads a record file: as UTF-8 text, so
    a byte order mark, or UTF-16, is no JSON (:func:`_decode` takes both)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerCorrupt(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return _decode(text, path)


def _decode(raw: bytes | str, path: str) -> object:
    if not raw:
        raise LedgerCorrupt(f"{path}: empty (an open in progress, or one that was cut short)")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise LedgerCorrupt(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        # Python's decoder recurses once a level; no record or sidecar nests so deep.
        raise LedgerCorrupt(f"{path}: not a record: its JSON nests too deeply") from None


def _plain(value: object, where: str) -> object:
    """A JSON value: paths become strings, tuples lists; anything else JSON lacks is refused."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where}: float {value!r} cannot be stored as JSON")
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise InvalidInput(f"{where}: {type(value).__name__} value cannot be stored as JSON")


def _open_event(record: Record, notes: Mapping[str, object]) -> dict[str, str]:
    event: dict[str, str] = {
        "ts": record.submitted_at,
        "id": record.id,
        "event": "open",
        "state": record.transitions[0].state,
        "platform": record.platform,
        "network_arch": record.network_arch,
        "action": record.action,
        "results_dir": record.results_dir,
    }
    for key in ("parent_job", "retry_of"):
        value = getattr(record, key)
        if value is not None:
            event[key] = value
    for key in JOURNAL_SIDECAR_KEYS:
        if key in notes:
            value = notes[key]
            event[key] = value if isinstance(value, str) else json.dumps(value)
    if notes:
        event["sidecar"] = "written"
    return event


def _transition_event(record: Record, change: Mark) -> dict[str, str]:
    step = record.transitions[-1]
    event = {
        "ts": step.ts,
        "id": record.id,
        "event": "transition",
        "state": step.state,
        "message": step.message,
        "source": step.source,
    }
    if change.backend_ref and record.backend_ref is not None:
        event["backend_ref"] = record.backend_ref
    if change.err_class:
        event["err_class"] = change.err_class
    return event
