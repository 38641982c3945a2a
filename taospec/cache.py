"""A content-addressed cache of what taospec works out from a job file.

Loading a job file (YAML, JSON Schema, taospec's rules) and rendering plans
(Jinja) cost far more than a command's own work, and give the same answer for
the same inputs. This cache keeps those answers (``render``'s text,
``validate``'s verdict, loaded job files, rendered plans with their digests)
under ``$XDG_CACHE_HOME/taospec`` (default ``~/.cache/taospec``), each in a
file named by the SHA-256 of everything the answer depends on:

* the kind of answer and the command's own arguments (the file name as typed,
  ``--format``, ``--user``, targets, upstream results);
* the current directory, the job file's resolved path and its exact bytes,
  and the nearest ``versions.yaml`` above it (its path and exact bytes);
* taospec itself: every file of the installed package (code, templates,
  schema) by content, the Python version, and the installed distributions
  (so upgrading PyYAML, Jinja or jsonschema starts afresh);
* who launches (UID, GID, groups, login name) and every ``TAOSPEC_*``
  variable.

An answer is stored only when it is certain to be the answer to that key:
the files the loader actually read while computing it (recorded by
:func:`taospec.yamlsrc.read_text`, by device, inode and bytes) must be the
files and bytes in the key; taospec's files must look as they did when they
were hashed (checked again whenever code or a template was loaded since);
and a stored object must read back as a value equal, type for type, to the
one computed (:func:`taospec.codec.same`). A stored entry carries its key and
a SHA-256 of its content, and is used only if both check out, it is a regular
file owned by this user, and the cache folder is writable by no one else;
objects are stored as pickle data for speed, which is why those checks come
first. Errors are never cached: an invalid file is checked afresh every time.
Entries unused for 30 days are pruned now and then. ``TAOSPEC_CACHE=off``
turns the cache off; deleting the folder is always safe.

``validate``'s verdicts are kept apart, in one journal (:data:`VERDICTS_FILE`):
the only answer is "valid", so an entry would hold nothing but its key, and
creating a file per checked job cost more than a fifth of checking it. Each
line is the key of a file found valid, under the same conditions as an entry;
a process reads the journal once and appends its new keys a batch at a time.
The journal is used only under the same ownership checks as an entry, lines
that are not a whole key are ignored, and a journal grown past
:data:`VERDICTS_MAX_BYTES` is started afresh (those files are checked again).

What this cannot see: a taospec source file edited in the few milliseconds
between the process loading it and hashing it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import time
from types import MappingProxyType

from taospec.smallfile import read_limited

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from typing import Any, TypeVar

    from taospec.identity import Identity
    from taospec.jobfile import JobFile
    from taospec.plan import Plan
    from taospec.spec import Job
    from taospec.yamlsrc import Read

    T = TypeVar("T")
MAGIC = b"taospec-cache 1\n"
MAX_FILE_BYTES = 1024 * 1024
"""As :data:`taospec.yamlsrc.MAX_BYTES`: a larger job file is an error, never cached."""
VERSIONS_FILE = "versions.yaml"
UNUSED_SECONDS = 30 * 24 * 3600
"""Entries not read or written for this long are pruned."""
REFRESH_SECONDS = 24 * 3600
"""A hit on an entry older than this marks it used again (touches its mtime)."""
PRUNE_CHANCE = 1
"""Out of 256: how often a store looks for unused entries to prune."""
VERDICTS_FILE = "valid-files"
"""The journal of keys known valid (not 64 characters long: never taken for an entry)."""
VERDICTS_MAGIC = b"taospec-verdicts 1\n"
VERDICTS_MAX_BYTES = 512 * 1024
"""A journal this large is replaced by the next batch alone (about 8,000 keys)."""
VERDICTS_BATCH = 64
"""Keys gathered before they are appended to the journal."""

_code: tuple[bytes, list[tuple[str, int, int, int]], list[tuple[str, list[str]]]] | None = None
_launcher: tuple[int, int, tuple[int, ...], str] | None = None
_who_text: str | None = None
_checked: tuple[int, int] | None = None
_verdicts: set[bytes] | None = None
"""The keys in the journal when this process first looked, and those it found since."""
_unsaved: list[bytes] = []
"""Keys found valid by this process and not yet in the journal."""


def folder() -> str | None:
    """The cache folder, or None when the cache is off or the folder is not safe to use."""
    if os.environ.get("TAOSPEC_CACHE") == "off":
        return None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "taospec")


def private_folder(name: str) -> str | None:
    """A sub-folder of the cache for other caches (Jinja's bytecode), made private; or None."""
    base = folder()
    if base is None:
        return None
    path = os.path.join(base, name)
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path if _safe(base) and _safe(path) else None


def _safe(path: str) -> bool:
    """A folder this user owns that nobody else may write to."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    mode = info.st_mode
    return stat.S_ISDIR(mode) and info.st_uid == os.getuid() and not mode & 0o022


# -- keys ---------------------------------------------------------------------


def code_identity() -> bytes:
    """SHA-256 of the package's files, the Python version and the installed distributions."""
    global _code  # noqa: PLW0603 - computed once per process
    if _code is None:
        digest = hashlib.sha256(MAGIC)
        digest.update(sys.version.encode())
        package = _package()
        seen: list[tuple[str, int, int, int]] = []
        folders: list[tuple[str, list[str]]] = []
        for name, path in _package_files(package, folders):
            with open(path, "rb") as handle:
                info = os.fstat(handle.fileno())
                _add(digest, name, handle.read())
            seen.append((path, info.st_ino, info.st_size, info.st_mtime_ns))
        for entry in sys.path:
            if entry and os.path.isdir(entry):
                found = sorted(
                    n for n in os.listdir(entry) if n.endswith((".dist-info", ".egg-info"))
                )
                if found:  # folders without distributions (the script's own) do not matter
                    _add(digest, entry, "\n".join(found))
        _code = (digest.digest(), seen, folders)
    return _code[0]


def code_unchanged(code: bytes) -> bool:
    """True when taospec's files and folders still look as they did when ``code`` was computed.

    Checked before anything is stored, so a file edited, added or removed while
    a command ran (a file's inode, size or mtime moved, or a folder's entries
    changed) keeps the answer out of the cache. Bytecode that Python writes
    meanwhile (``__pycache__``) is not taospec's code and changes nothing. Code
    already loaded cannot change under the process, so the files are looked at
    again only when a module or template has been loaded since the last look.
    """
    global _checked  # noqa: PLW0603 - what was loaded when the files were last looked at
    if _code is None or _code[0] != code:
        return False
    loaded = _loaded()
    if loaded == _checked:
        return True
    try:
        for path, inode, size, mtime in _code[1]:
            info = os.stat(path)
            if (info.st_ino, info.st_size, info.st_mtime_ns) != (inode, size, mtime):
                return False
        for folder, names in _code[2]:
            if _entries(os.listdir(folder)) != names:
                return False
    except OSError:
        return False
    _checked = loaded
    return True


def _loaded() -> tuple[int, int]:
    """How many modules, and how many compiled templates, this process has loaded."""
    templates = sys.modules.get("taospec.templates")
    compiled = 0
    if templates is not None and templates.environment.cache_info().currsize:
        compiled = len(templates.environment().cache or ())
    return len(sys.modules), compiled


def _package() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _package_files(package: str, folders: list[tuple[str, list[str]]]) -> Iterator[tuple[str, str]]:
    """(relative path, path) of every file but compiled bytecode, sorted; each folder
    noted with its entries."""
    for root, dirs, files in os.walk(package, followlinks=True):
        folders.append((root, _entries([*dirs, *files])))
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                path = os.path.join(root, name)
                yield path[len(package) + 1 :], path


def _entries(names: Iterable[str]) -> list[str]:
    """A folder's entries that are taospec's: not bytecode, nor where Python keeps it."""
    return sorted(n for n in names if n != "__pycache__" and not n.endswith((".pyc", ".pyo")))


def launcher_identity() -> tuple[int, int, tuple[int, ...], str]:
    """What :func:`taospec.identity.launcher` reads, read the same way (once per process)."""
    global _launcher  # noqa: PLW0603 - who runs this process does not change
    if _launcher is None:
        import pwd

        uid, gid = os.getuid(), os.getgid()
        groups = tuple(sorted(g for g in set(os.getgroups()) if g != gid))
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = f"u{uid}"
        _launcher = (uid, gid, groups, name)
    return _launcher


def _add(digest: Any, *parts: object) -> None:
    """Feed ``parts`` to ``digest`` so that no two different sequences feed the same bytes."""
    for part in parts:
        if part is None:
            data = b"N"
        elif isinstance(part, bytes):
            data = b"b" + part
        else:
            data = b"s" + str(part).encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)


class Snapshot:
    """A job file as it is now: what a key says about it, and the bytes a load may read."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.cwd = os.getcwd()
        self.real = os.path.realpath(file)
        self.data, self.file_id = _read(file)
        self.versions = _nearest_versions(self.real)
        self.versions_data, self.versions_id = (
            (None, None) if self.versions is None else _read(self.versions)
        )
        self.code = code_identity()

    @property
    def usable(self) -> bool:
        """Both files could be read and are within the loader's size limit."""
        return self.data is not None and (self.versions is None or self.versions_data is not None)

    def key(self, kind: str, parts: Sequence[object]) -> str:
        """The entry name for answer ``kind`` about this file with these arguments."""
        digest = hashlib.sha256(MAGIC)
        _add(digest, kind, self.code, _who())
        _add(digest, self.cwd, self.file, self.real, self.data, self.versions, self.versions_data)
        _add(digest, len(parts), *map(repr, parts))
        return digest.hexdigest()

    def matches(self, reads: list[Read]) -> bool:
        """True when every file the load read is one of this snapshot's files, byte for byte."""
        allowed = {self.file_id: self.data, self.versions_id: self.versions_data}
        return all(
            file is not None and allowed.get(file, b"\0absent") == raw for file, raw in reads
        )


def _read(path: str) -> tuple[bytes | None, tuple[int, int] | None]:
    """A file's bytes (None if unreadable or too large) and its (device, inode)."""
    try:
        with open(path, "rb") as handle:
            data = read_limited(handle, MAX_FILE_BYTES)
            info = os.fstat(handle.fileno())
    except OSError:
        return None, None
    return (data if len(data) <= MAX_FILE_BYTES else None), (info.st_dev, info.st_ino)


def _nearest_versions(real: str) -> str | None:
    """The versions.yaml :func:`taospec.spec.find_versions_file` would find for ``real``."""
    folder = os.path.dirname(real)
    while True:
        candidate = os.path.join(folder, VERSIONS_FILE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _who() -> str:
    """The launcher and the TAOSPEC_* variables, as key text (the same all process long)."""
    global _who_text  # noqa: PLW0603 - who runs this process does not change
    if _who_text is None:
        settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("TAOSPEC_"))
        _who_text = repr((launcher_identity(), settings))
    return _who_text


# -- entries ------------------------------------------------------------------


def load(key: str) -> bytes | None:
    """The content stored under ``key``, if there is a sound entry."""
    base = folder()
    if base is None:
        return None
    path = os.path.join(base, key)
    data = _private_file(path, refresh=True)
    if data is None:
        return None
    content = _open_entry(data, key)
    if content is None:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return content


def _open_entry(data: bytes, key: str) -> bytes | None:
    head, sep, rest = data.partition(b"\n")
    stored_key, sep2, rest = rest.partition(b"\n")
    checksum, sep3, content = rest.partition(b"\n")
    if not (sep and sep2 and sep3) or head + b"\n" != MAGIC or stored_key != key.encode():
        return None
    if hashlib.sha256(content).hexdigest().encode() != checksum:
        return None
    return content


def store(key: str, content: bytes) -> None:
    """Keep ``content`` under ``key`` (silently not, if the folder is unusable).

    The entry is written under its final name, created exclusively: a reader
    that meets it half-written finds its checksum wrong and ignores it, and
    :func:`load` removes an entry it finds damaged so that it can be written
    again.
    """
    base = folder()
    if base is None:
        return
    entry = MAGIC + key.encode() + b"\n" + hashlib.sha256(content).hexdigest().encode() + b"\n"
    try:
        if not _safe(base):
            os.makedirs(base, mode=0o700, exist_ok=True)
            if not _safe(base):
                return
        fd = os.open(os.path.join(base, key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, entry + content)
        finally:
            os.close(fd)
        if os.urandom(1)[0] < PRUNE_CHANCE:
            prune(base)
    except OSError:
        return


def prune(base: str, now: float | None = None) -> int:
    """Remove entries not used for :data:`UNUSED_SECONDS`; return how many went.

    Runs after one store in 256 or so, so the folder holds what is in use.
    """
    oldest = (time.time() if now is None else now) - UNUSED_SECONDS
    removed = 0
    with os.scandir(base) as entries:
        for entry in entries:
            stray = entry.name.startswith(VERDICTS_FILE + ".")  # a journal never put in place
            if (len(entry.name) != 64 and not stray) or not entry.is_file(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < oldest:
                    os.unlink(entry.path)
                    removed += 1
    return removed


# -- what taospec keeps -------------------------------------------------------


def remembered(
    kind: str,
    file: str,
    parts: Sequence[object],
    *,
    compute: Callable[[], T],
    dump: Callable[[T], bytes],
    undump: Callable[[bytes], T],
) -> T:
    """``compute()``'s answer about ``file``, from the cache when it holds a sound one.

    ``dump`` and ``undump`` turn the answer into bytes and back; the answer is
    stored only if ``undump(dump(answer))`` is the same answer, and only if the
    load read exactly the files in the snapshot.
    """
    if folder() is None:
        return compute()
    snapshot = Snapshot(file)
    if not snapshot.usable:
        return compute()
    key = snapshot.key(kind, parts)
    content = load(key)
    if content is not None:
        with contextlib.suppress(Exception):  # an entry that does not load is a miss
            return undump(content)
    from taospec import yamlsrc

    with yamlsrc.recording() as reads:
        answer = compute()
    if snapshot.matches(reads) and code_unchanged(snapshot.code):
        with contextlib.suppress(Exception):  # an answer that does not keep is not kept
            content = dump(answer)
            if _equal(undump(content), answer):
                store(key, content)
    return answer


def _equal(a: Any, b: Any) -> bool:
    from taospec.codec import same

    return same(a, b)


def _key_text(value: Any) -> bytes:
    """The same bytes for equal values, in every process (for keys, not for storing)."""
    import json

    from taospec.codec import encode

    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False).encode()


def _dump_value(value: Any) -> bytes:
    """``value`` as pickle data (read back in C; the entry's owner and checksum are checked)."""
    import io
    import pickle

    class Pickler(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if type(obj) is MappingProxyType:
                return _read_only, (dict(obj),)
            return NotImplemented

    out = io.BytesIO()
    Pickler(out, protocol=5).dump(value)
    return out.getvalue()


def _undump_value(content: bytes) -> Any:
    import pickle

    return pickle.loads(content)  # noqa: S301 - taospec's own entry, private folder, checksummed


def _read_only(mapping: dict[Any, Any]) -> Any:
    """A read-only view, as :class:`types.MappingProxyType` (which pickle cannot name)."""
    return MappingProxyType(mapping)


def text(kind: str, file: str, parts: Sequence[object], compute: Callable[[], str]) -> str:
    """A command's output about ``file`` (``render``'s text), cached."""
    return remembered(
        kind,
        file,
        parts,
        compute=compute,
        dump=lambda value: value.encode("utf-8", "surrogatepass"),
        undump=lambda content: content.decode("utf-8", "surrogatepass"),
    )


def check_valid(file: str) -> bool:
    """Raise what :func:`taospec.jobfile.load_jobfile` raises for ``file``; remember it if valid.

    Only the verdict is kept, in the journal (call :func:`save_verdicts` before
    the process ends). Returns True when the file was checked afresh, False
    when the journal knew it.
    """
    snapshot = Snapshot(file) if folder() is not None else None
    if snapshot is None or not snapshot.usable:
        _load_fresh(file)
        return True
    key = snapshot.key("valid", ()).encode()
    if key in _known_valid():
        return False
    from taospec import yamlsrc

    with yamlsrc.recording() as reads:
        _load_fresh(file, snapshot)
    if snapshot.matches(reads) and code_unchanged(snapshot.code):
        _known_valid().add(key)
        _unsaved.append(key)
        if len(_unsaved) >= VERDICTS_BATCH:
            save_verdicts()
    return True


def _load_fresh(file: str, snapshot: Snapshot | None = None) -> None:
    """Load ``file``; with its snapshot, against the versions.yaml the snapshot found."""
    from taospec.jobfile import load_jobfile

    if snapshot is None:
        load_jobfile(file)
        return
    from pathlib import Path

    from taospec.spec import Images

    versions = None if snapshot.versions is None else Path(snapshot.versions)
    load_jobfile(file, Images.with_versions_file(Path(file), versions))


def _known_valid() -> set[bytes]:
    """The keys in the journal (read once per process), and those found valid since."""
    global _verdicts  # noqa: PLW0603 - read once per process
    if _verdicts is None:
        _verdicts = set()
        base = folder()
        data = None
        if base is not None:
            data = _private_file(os.path.join(base, VERDICTS_FILE), most=2 * VERDICTS_MAX_BYTES)
        if data is not None and data.startswith(VERDICTS_MAGIC):
            # A torn or mixed line is not 64 characters, or no key anyone will look up.
            lines = data[len(VERDICTS_MAGIC) :].split(b"\n")
            _verdicts = {line for line in lines if len(line) == 64}
    return _verdicts


def _private_file(path: str, *, most: int | None = None, refresh: bool = False) -> bytes | None:
    """The bytes (at most ``most``) of a regular file of this user's in a safe folder.

    With ``refresh``, a file not touched for a while is touched, so that pruning
    keeps what is in use.
    """
    if not _safe(os.path.dirname(path)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return None
        chunks = []
        left = most
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        if refresh and info.st_mtime < time.time() - REFRESH_SECONDS:
            os.utime(fd)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def save_verdicts() -> None:
    """Append the keys found valid since the last save to the journal (silently not, if unusable).

    One write appends the whole batch, so batches of processes saving at once
    do not interleave; a journal grown too large is replaced by this batch.
    """
    base = folder()
    if not _unsaved or base is None:
        _unsaved.clear()
        return
    lines = b"".join(key + b"\n" for key in _unsaved)
    _unsaved.clear()
    try:
        if not _safe(base):
            os.makedirs(base, mode=0o700, exist_ok=True)
            if not _safe(base):
                return
        path = os.path.join(base, VERDICTS_FILE)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return
            if info.st_size >= VERDICTS_MAX_BYTES:
                _replace_journal(path, VERDICTS_MAGIC + lines)
                return
            _write_all(fd, lines if info.st_size else VERDICTS_MAGIC + lines)
        finally:
            os.close(fd)
    except OSError:
        return


def _replace_journal(path: str, data: bytes) -> None:
    """Put a new journal holding ``data`` in place of the one at ``path``."""
    temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    try:
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def load_jobfile(file: str) -> JobFile:
    """:func:`taospec.jobfile.load_jobfile`, cached (with each job's key for :func:`render`)."""
    from taospec.jobfile import load_jobfile as load_fresh

    def fresh() -> tuple[JobFile, tuple[bytes, ...] | None]:
        jobfile = load_fresh(file)
        try:
            keys = tuple(_job_key(target.job) for target in jobfile.targets.values())
        except ValueError:  # a value the key text cannot carry: plans are not cached
            keys = None
        return jobfile, keys

    loaded: tuple[JobFile, tuple[bytes, ...] | None] = remembered(
        "jobfile", file, (), compute=fresh, dump=_dump_value, undump=_undump_value
    )
    jobfile, keys = loaded
    for target, key in zip(jobfile.targets.values(), keys or (), strict=False):
        _job_keys[id(target.job)] = (target.job, key)
    return jobfile


def render(
    job: Job,
    *,
    user: str | None = None,
    upstream: Mapping[str, str] | None = None,
    launcher: Identity | None = None,
) -> Plan:
    """:func:`taospec.plan.render`, cached by the job's content and the arguments.

    The plan's digest is kept with it; :func:`plan_digest` hands it back.
    """
    from taospec.plan import render as render_fresh

    base = folder()
    if base is None or launcher is not None:
        return render_fresh(job, user=user, upstream=upstream, launcher=launcher)
    try:
        job_bytes = _job_key(job)
    except ValueError:
        return render_fresh(job, user=user, upstream=upstream)
    code = code_identity()
    digest = hashlib.sha256(MAGIC)
    _add(digest, "plan", code, _who())
    _add(digest, job_bytes, user, repr(sorted((upstream or {}).items())))
    key = digest.hexdigest()
    content = load(key)
    if content is not None:
        with contextlib.suppress(Exception):  # an entry that does not load is a miss
            plan, known = _undump_value(content)
            return _remember_digest(plan, known)
    from taospec import yamlsrc

    with yamlsrc.recording() as reads:
        plan = render_fresh(job, user=user, upstream=upstream)
    if not reads and code_unchanged(code):
        with contextlib.suppress(Exception):  # an answer that does not keep is not kept
            entry = (plan, plan.digest())
            content = _dump_value(entry)
            if _equal(_undump_value(content), entry):
                store(key, content)
    return plan


_job_keys: dict[int, tuple[Job, bytes]] = {}
"""Key text of jobs loaded through :func:`load_jobfile`, by the job object's id."""


def _job_key(job: Job) -> bytes:
    found = _job_keys.get(id(job))
    if found is not None and found[0] is job:
        return found[1]
    text = hashlib.sha256(_key_text(job)).digest()
    _job_keys[id(job)] = (job, text)  # holding the job keeps its id from being reused
    return text


_digests: dict[int, tuple[Plan, str]] = {}
"""Digests of the plans :func:`render` read from the cache, by the plan object's id."""


def _remember_digest(plan: Plan, known: str) -> Plan:
    _digests[id(plan)] = (plan, known)  # holding the plan keeps its id from being reused
    return plan


def plan_digest(plan: Plan) -> str:
    """``plan.digest()``, without recomputing it for a plan the cache stored with its digest."""
    found = _digests.get(id(plan))
    if found is not None and found[0] is plan:
        return found[1]
    return plan.digest()
