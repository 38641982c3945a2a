"""Which records have no journal line, known without reading the whole ledger.

``taospec ls --limit 50`` on 200,000 records takes about three times as long as
``python -c pass`` (bench/ledger_scale.py), because it reads only the journal's
last lines and the 50 records it prints: :meth:`taospec.ledger.store.Ledger.list`
walks the journal's ``open`` lines backwards and opens each record file.

The records the journal does not know (the TAO recorder's, or one a crash left
between its record and its journal line) are merged in by submission time.
Every record with an open line has its file (the record is written first),
so there are none while the open lines are at least as many as the record
files. Counting those means reading the whole journal and listing the whole
jobs folder (0.3 s at 200,000 records), so :func:`foreign` remembers in
``taospec/listing.json`` under the state root:

* the journal's open count up to a byte offset just after a newline, with the
  journal's device, inode and the bytes before the offset; the journal is only
  ever appended to, so the next count reads only what was appended since;
* the number of ``.json`` names in the folder (of record files alone, counted
  when the open lines are fewer), the ids (and submission times) of the records
  without an open line, and the writers' temp files the scan saw, with the jobs
  folder's device, inode and mtime taken before the scan. Creating, renaming or
  removing any entry in a folder moves its mtime, so while the mtime stays the
  same, so do these.

That is counts, offsets and ids, never a copy of a record or of an answer:
every record listed is read from its own file, so an edit by another writer
shows at once. A scan is only remembered when the folder's mtime was at least
:data:`SETTLE_NS` older than the clocks at the time (the filesystem's, read
from the file just written, and this machine's): a change later in the same
timestamp tick would leave the mtime as it was. Until the folder settles, every
listing scans it. The file is written atomically but not fsynced; anything
unexpected in it means "count again".
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime
from typing import Any, NamedTuple

from taospec.ledger.journal import OPEN_MARK
from taospec.ledger.record import ID_RE, instant

STATE_FILE = "taospec/listing.json"
SETTLE_NS = 2_000_000_000
TAIL = 64
BLOCK = 1 << 20
FORMAT = 1

Foreign = list[tuple[str, str]]
"""(submitted_at, id) of records without an open line, newest first ("" when unreadable)."""


class Scan(NamedTuple):
    """What one look at the jobs folder found: its names, and what :func:`scanned` counted."""

    names: list[str]
    records_at_most: int
    """How many names end in ``.json``: every record file, and any other such name."""
    temps: tuple[str, ...]
    """The writers' temp files: ``.<name>.tmp``."""

    def record_ids(self) -> tuple[str, ...]:
        """The ids of the record files: names ``<id>.json``, not temps, locks or sidecars."""
        valid = ID_RE.fullmatch
        return tuple(
            name[: -len(".json")]
            for name in self.names
            if name.endswith(".json") and valid(name, 0, len(name) - len(".json"))
        )


def scanned(names: list[str]) -> Scan:
    """A :class:`Scan` of the folder ``names`` were listed from.

    A name holds no NUL, so in the names joined by NULs each one but the last
    ends at a NUL: counting the ``.json`` names and looking for temp files are
    then two passes of C over one string, where a Python step per name costs
    more than the listing itself at 200,000 records. The exact ids wait for
    :meth:`Scan.record_ids`, which :func:`foreign` calls only when the journal
    has fewer open lines than the folder has ``.json`` names.
    """
    joined = "\0".join(names)
    temps: tuple[str, ...] = ()
    if ".tmp\0" in joined or joined.endswith(".tmp"):
        temps = tuple(n for n in names if n.startswith(".") and n.endswith(".tmp"))
    return Scan(names, joined.count(".json\0") + joined.endswith(".json"), temps)


class Found(NamedTuple):
    """The records without an open line, and the temp files last seen in the folder."""

    foreign: Foreign
    temps: tuple[str, ...]


def foreign(
    root: str,
    jobs_dir: str,
    journal: str,
    *,
    scan: Callable[[], Scan],
    journal_ids: Callable[[], frozenset[str]],
    submitted_at: Callable[[str], str | None],
) -> Found:
    """The records that have no journal open line, newest first, and the temp files seen.

    ``scan`` looks at the jobs folder, ``journal_ids`` lists the ids with an
    open line, ``submitted_at`` reads one record's submission time (None when it
    has gone, "" when it cannot be read); each is called only when the cache
    cannot answer.
    """
    state_path = os.path.join(root, STATE_FILE)
    cached = _read(state_path)
    try:
        before = os.stat(jobs_dir)
    except FileNotFoundError:
        return Found([], ())
    opens, journal_state = _count_opens(journal, cached.get("journal"))
    jobs: Any = cached.get("jobs")
    if journal_state["resumed"] and _same_folder(jobs, before):
        records, found = jobs["records"], [(ts, job_id) for ts, job_id in jobs["foreign"]]
        if journal_state != cached.get("journal"):
            _write(state_path, {**cached, "journal": journal_state}, settled=None)
        return Found([] if opens >= records else found, tuple(jobs["temps"]))
    seen = scan()
    records = seen.records_at_most
    found = []
    if opens < records:
        record_ids = seen.record_ids()
        records = len(record_ids)
        if opens < records:
            known = journal_ids()
            pairs = ((submitted_at(i), i) for i in record_ids if i not in known)
            found = sorted(
                ((ts, job_id) for ts, job_id in pairs if ts is not None), key=_newest, reverse=True
            )
    after = os.stat(jobs_dir)
    update: dict[str, Any] = {"format": FORMAT, "journal": journal_state}
    if after.st_mtime_ns == before.st_mtime_ns:
        update["jobs"] = {
            "dev": before.st_dev,
            "ino": before.st_ino,
            "mtime_ns": before.st_mtime_ns,
            "records": records,
            "foreign": found,
            "temps": list(seen.temps),
        }
    _write(state_path, update, settled=before.st_mtime_ns)
    return Found(found, seen.temps)


def _newest(pair: tuple[str, str]) -> tuple[bool, datetime]:
    """Order by submission time; unreadable records (no time) come last."""
    return (pair[0] != "", instant(pair[0]) if pair[0] else datetime.min)


def remembered_temps(root: str) -> tuple[str, ...]:
    """The temp files the last remembered scan of the jobs folder saw (none if unknown)."""
    jobs = _read(os.path.join(root, STATE_FILE)).get("jobs")
    temps = jobs.get("temps") if isinstance(jobs, dict) else None
    if not isinstance(temps, list):
        return ()
    return tuple(name for name in temps if isinstance(name, str))


def _same_folder(jobs: Any, now: os.stat_result) -> bool:
    """True when ``jobs`` (from the cache) describes the folder as it is now."""
    if not isinstance(jobs, dict):
        return False
    key = (jobs.get("dev"), jobs.get("ino"), jobs.get("mtime_ns"))
    pairs = jobs.get("foreign")
    temps = jobs.get("temps")
    return (
        key == (now.st_dev, now.st_ino, now.st_mtime_ns)
        and type(jobs.get("records")) is int
        and isinstance(temps, list)
        and all(isinstance(name, str) for name in temps)
        and isinstance(pairs, list)
        and all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
            for pair in pairs
        )
    )


def _count_opens(journal: str, cached: Any) -> tuple[int, dict[str, Any]]:
    """Open lines in the journal's complete lines, reading only what the cache has not seen.

    The state says whether the count went on from the cached one (``resumed``);
    when it did not, the journal was replaced and what was known about the
    records without open lines no longer holds.
    """
    with open(journal, "rb") as stream:
        stat = os.fstat(stream.fileno())
        offset, opens = _resume(stream, stat, cached)
        resumed = isinstance(cached, dict) and (offset, opens) == (
            cached.get("offset"),
            cached.get("opens"),
        )
        stream.seek(offset)
        carry = b""
        while block := stream.read(BLOCK):
            data = carry + block
            end = data.rfind(b"\n") + 1
            opens += data.count(OPEN_MARK, 0, end)
            offset += end
            carry = data[end:]
        tail = _tail(stream, offset)
    state = {"dev": stat.st_dev, "ino": stat.st_ino, "offset": offset, "opens": opens}
    return opens, {**state, "tail": tail.hex(), "resumed": resumed}


def _resume(stream: Any, stat: os.stat_result, cached: Any) -> tuple[int, int]:
    """Where counting can start (offset, opens so far): the cached point, or the start."""
    if not isinstance(cached, dict):
        return 0, 0
    offset, opens, tail = cached.get("offset"), cached.get("opens"), cached.get("tail")
    if (
        (cached.get("dev"), cached.get("ino")) != (stat.st_dev, stat.st_ino)
        or type(offset) is not int
        or type(opens) is not int
        or not isinstance(tail, str)
        or not 0 <= offset <= stat.st_size
        or _tail(stream, offset).hex() != tail
    ):
        return 0, 0
    return offset, opens


def _tail(stream: Any, offset: int) -> bytes:
    """The bytes just before ``offset`` (what must still be there for a count to resume)."""
    start = max(0, offset - TAIL)
    stream.seek(start)
    data: bytes = stream.read(offset - start)
    return data


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as stream:
            data = json.load(stream)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    return data


def _write(path: str, state: dict[str, Any], *, settled: int | None) -> None:
    """Replace the cache; a folder scanned while its mtime was recent is left out.

    ``settled`` is the jobs folder's mtime the scan saw (None: nothing new
    about the folder). Failures are ignored: a read-only ledger lists anyway.
    """
    with suppress(OSError):
        folder, name = os.path.split(path)
        os.makedirs(folder, exist_ok=True)
        temp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            with open(temp, "w", encoding="utf-8") as out:
                if settled is not None and "jobs" in state:
                    clock = min(os.fstat(out.fileno()).st_mtime_ns, time.time_ns())
                    if settled > clock - SETTLE_NS:
                        state = {k: v for k, v in state.items() if k != "jobs"}
                json.dump(state, out, separators=(",", ":"))
            os.chmod(temp, 0o600)
            os.replace(temp, path)
        finally:
            with suppress(FileNotFoundError):
                os.unlink(temp)
