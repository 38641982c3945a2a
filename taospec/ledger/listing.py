"""Which records have no journal line, known without reading the whole ledger.

``taospec ls --limit 50`` on 200,000 records takes about four times as long as
``python -c pass`` (bench/ledger_scale.py), because it reads only the journal's
last lines and the 50 records it prints: :meth:`taospec.ledger.store.Ledger.list`
walks the journal's ``open`` lines backwards and opens each record file.

The records the journal does not know (the TAO recorder's, or one a crash left
between its record and its journal line) are merged in by submission time.
Finding them means comparing the names in the jobs folder with the ids of the
journal's open lines, and reading all of those costs a listing of the whole
folder (0.3 s at 200,000 records) and a parse of the whole journal (seconds).
So :func:`foreign` compares sums instead: each ``<id>.json`` name in the folder
adds its checksum (:func:`names_sum`), each open line subtracts the checksum of
its record's name. What is left, the *unaccounted* sum, stands for the names
without an open line (the records the journal does not know, and names that
are no record) less the open lines without a name (a record removed by hand, a
second open line). While it stays the same, so do the records the journal does
not know: a new record with its open line adds and subtracts the same, and
anything else (a record another writer adds, one removed, a journal replaced)
changes it but by a chance of one in 2**64. Then, and only then, the journal
is read whole and compared with the folder. ``taospec/listing.json`` under the
state root remembers:

* the journal's open-line sum up to a byte offset just after a newline, with
  the journal's device, inode and the bytes before the offset; the journal is
  only ever appended to, so the next sum reads only what was appended since;
* the unaccounted sum a scan of the folder left, with the ids (and submission
  times) of the records without an open line;
* the folder's name sum and the writers' temp files that scan saw, with the
  jobs folder's device, inode and mtime taken before it. Creating, renaming or
  removing any entry in a folder moves its mtime, so while the mtime stays the
  same, so do these, and ``ls`` need not list the folder.

That is sums, offsets and ids, never a copy of a record or of an answer:
every record listed is read from its own file, so an edit by another writer
shows at once. A scan's folder is only remembered when the folder's mtime was
at least :data:`SETTLE_NS` older than the clocks at the time (the
filesystem's, read from the file just written, and this machine's): a change
later in the same timestamp tick would leave the mtime as it was. Until the
folder settles, every listing lists it. The file is written atomically but not
fsynced; anything unexpected in it means "count again".
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Iterable
from contextlib import suppress
from datetime import datetime
from operator import methodcaller
from typing import Any, NamedTuple

from taospec.ledger.journal import opened_ids
from taospec.ledger.record import ID_RE, instant

STATE_FILE = "taospec/listing.json"
SETTLE_NS = 2_000_000_000
TAIL = 64
BLOCK = 1 << 20
FORMAT = 2
MASK = (1 << 64) - 1

Foreign = list[tuple[str, str]]
"""(submitted_at, id) of records without an open line, newest first ("" when unreadable)."""

_ENCODE = methodcaller("encode", "utf-8", "surrogateescape")


def names_sum(names: Iterable[str]) -> int:
    """A sum of file names that no order changes: each name's CRC-32 is added to the
    low half and its Adler-32 to the high half, modulo 2**64. One name more, or one
    fewer, changes it (but by a chance of one in 2**64)."""
    encoded = list(map(_ENCODE, names))
    return (sum(map(zlib.crc32, encoded)) + (sum(map(zlib.adler32, encoded)) << 32)) & MASK


class Scan(NamedTuple):
    """What one look at the jobs folder found: its names, and what :func:`scanned` made of them."""

    names: list[str]
    names_sum: int
    """:func:`names_sum` of the names that end in ``.json``: the record files, and any other."""
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

    Temp files are rare, so they are first looked for in the names joined by
    NULs (a name holds none, so each one but the last ends at a NUL): one pass
    of C over one string, where a Python step per name costs more.
    """
    joined = "\0".join(names)
    temps: tuple[str, ...] = ()
    if ".tmp\0" in joined or joined.endswith(".tmp"):
        temps = tuple(n for n in names if n.startswith(".") and n.endswith(".tmp"))
    return Scan(names, names_sum([n for n in names if n.endswith(".json")]), temps)


class Found(NamedTuple):
    """The records without an open line, and the temp files last seen in the folder."""

    foreign: Foreign
    temps: tuple[str, ...]


class _Unaccounted(NamedTuple):
    """What the last scan left unaccounted (its sum), and the records it found so."""

    sum: int
    foreign: Foreign


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
    has gone, "" when it cannot be read); each is called only when the sums say
    something other than new records with their open lines has changed.
    """
    state_path = os.path.join(root, STATE_FILE)
    cached = _read(state_path)
    try:
        before = os.stat(jobs_dir)
    except FileNotFoundError:
        return Found([], ())
    opened, journal_state = _open_lines_sum(journal, cached.get("journal"))
    last = _unaccounted(cached.get("unaccounted"))
    jobs: Any = cached.get("jobs")
    if last is not None and _same_folder(jobs, before) and _left(jobs["names"], opened) == last.sum:
        if journal_state != cached.get("journal"):
            _write(state_path, {**cached, "journal": journal_state}, settled=None)
        return Found(last.foreign, tuple(jobs["temps"]))
    seen = scan()
    unaccounted = _left(seen.names_sum, opened)
    if last is not None and unaccounted == last.sum:
        found = last.foreign
    else:
        known = journal_ids()
        pairs = ((submitted_at(i), i) for i in seen.record_ids() if i not in known)
        found = sorted(
            ((ts, job_id) for ts, job_id in pairs if ts is not None), key=_newest, reverse=True
        )
    after = os.stat(jobs_dir)
    update: dict[str, Any] = {
        "format": FORMAT,
        "journal": journal_state,
        "unaccounted": {"sum": unaccounted, "foreign": found},
    }
    if after.st_mtime_ns == before.st_mtime_ns:
        update["jobs"] = {
            "dev": before.st_dev,
            "ino": before.st_ino,
            "mtime_ns": before.st_mtime_ns,
            "names": seen.names_sum,
            "temps": list(seen.temps),
        }
    _write(state_path, update, settled=before.st_mtime_ns)
    return Found(found, seen.temps)


def _left(names: int, opened: int) -> int:
    """The unaccounted sum: the folder's ``.json`` names' sum less the open lines' sum."""
    return (names - opened) & MASK


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


def _unaccounted(cached: Any) -> _Unaccounted | None:
    """The last scan's unaccounted sum and records, when the state file holds them whole."""
    if not isinstance(cached, dict):
        return None
    total, pairs = cached.get("sum"), cached.get("foreign")
    if type(total) is not int or not isinstance(pairs, list):
        return None
    if not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        for pair in pairs
    ):
        return None
    return _Unaccounted(total, [(ts, job_id) for ts, job_id in pairs])


def _same_folder(jobs: Any, now: os.stat_result) -> bool:
    """True when ``jobs`` (from the cache) describes the folder as it is now."""
    if not isinstance(jobs, dict):
        return False
    key = (jobs.get("dev"), jobs.get("ino"), jobs.get("mtime_ns"))
    temps = jobs.get("temps")
    return (
        key == (now.st_dev, now.st_ino, now.st_mtime_ns)
        and type(jobs.get("names")) is int
        and isinstance(temps, list)
        and all(isinstance(name, str) for name in temps)
    )


def _open_lines_sum(journal: str, cached: Any) -> tuple[int, dict[str, Any]]:
    """:func:`names_sum` of the records the journal's complete open lines name, reading
    only what the cache has not seen."""
    with open(journal, "rb") as stream:
        stat = os.fstat(stream.fileno())
        offset, opened = _resume(stream, stat, cached)
        stream.seek(offset)
        carry = b""
        while block := stream.read(BLOCK):
            data = carry + block
            end = data.rfind(b"\n") + 1
            opened_here = opened_ids(data[:end].split(b"\n"))
            opened = (opened + names_sum([f"{i}.json" for i in opened_here])) & MASK
            offset += end
            carry = data[end:]
        tail = _tail(stream, offset)
    state = {"dev": stat.st_dev, "ino": stat.st_ino, "offset": offset, "opened": opened}
    return opened, {**state, "tail": tail.hex()}


def _resume(stream: Any, stat: os.stat_result, cached: Any) -> tuple[int, int]:
    """Where summing can start (offset, sum so far): the cached point, or the start."""
    if not isinstance(cached, dict):
        return 0, 0
    offset, opened, tail = cached.get("offset"), cached.get("opened"), cached.get("tail")
    if (
        (cached.get("dev"), cached.get("ino")) != (stat.st_dev, stat.st_ino)
        or type(offset) is not int
        or type(opened) is not int
        or not isinstance(tail, str)
        or not 0 <= offset <= stat.st_size
        or _tail(stream, offset).hex() != tail
    ):
        return 0, 0
    return offset, opened


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
