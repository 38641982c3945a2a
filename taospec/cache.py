"""A content-addressed cache of what taospec works out from a job file.

Loading a job file (YAML, JSON Schema, taospec's rules) and rendering plans
(Jinja) cost far more than a command's own work, and give the same answer for
the same inputs. This cache keeps those answers under
``$XDG_CACHE_HOME/taospec`` (default ``~/.cache/taospec``), each in a file
named by the SHA-256 of everything the answer depends on:

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
:func:`taospec.yamlsrc.read_text`) must be exactly the bytes in the key, and
taospec's own files must not have changed meanwhile; a stored object must
decode to a value equal, type for type, to the one computed
(:func:`taospec.codec.same`). A stored entry carries its key and a SHA-256 of
its content and is used only if both check out, it is a regular file owned by
this user, and the cache folder is writable by no one else. Errors are never
cached: an invalid file is checked afresh every time. ``TAOSPEC_CACHE=off``
turns the cache off. Deleting the folder is always safe.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on every start
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, TypeVar

    from taospec.identity import Identity
    from taospec.jobfile import JobFile
    from taospec.plan import Plan
    from taospec.spec import Job

    T = TypeVar("T")
MAGIC = b"taospec-cache 1\n"
MAX_FILE_BYTES = 1024 * 1024
"""As :data:`taospec.yamlsrc.MAX_BYTES`: a larger job file is an error, never cached."""
VERSIONS_FILE = "versions.yaml"

_code: tuple[bytes, list[tuple[str, int, int, int]]] | None = None
_launcher: tuple[int, int, tuple[int, ...], str] | None = None


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
        seen = []
        for name in _package_files(package):
            with open(os.path.join(package, name), "rb") as handle:
                info = os.fstat(handle.fileno())
                _add(digest, name, handle.read())
            seen.append((name, info.st_ino, info.st_size, info.st_mtime_ns))
        for entry in sys.path:
            if entry and os.path.isdir(entry):
                found = sorted(
                    n for n in os.listdir(entry) if n.endswith((".dist-info", ".egg-info"))
                )
                _add(digest, entry, "\n".join(found))
        _code = (digest.digest(), seen)
    return _code[0]


def code_unchanged(code: bytes) -> bool:
    """True when taospec's files still look as they did when ``code`` was computed.

    Checked before anything is stored, so a file edited while a command ran
    (its inode, size or mtime moved) keeps the answer out of the cache.
    """
    if _code is None or _code[0] != code:
        return False
    package = _package()
    try:
        for name, inode, size, mtime in _code[1]:
            info = os.stat(os.path.join(package, name))
            if (info.st_ino, info.st_size, info.st_mtime_ns) != (inode, size, mtime):
                return False
    except OSError:
        return False
    return list(_package_files(package)) == [entry[0] for entry in _code[1]]


def _package() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _package_files(package: str) -> Iterator[str]:
    """Every file of the package but compiled bytecode, as sorted relative paths."""
    for root, dirs, files in os.walk(package, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                yield os.path.relpath(os.path.join(root, name), package)


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
        self.data = _read(file)
        self.versions = _nearest_versions(self.real)
        self.versions_data = None if self.versions is None else _read(self.versions)
        self.code = code_identity()

    @property
    def usable(self) -> bool:
        """Both files could be read and are within the loader's size limit."""
        return self.data is not None and (self.versions is None or self.versions_data is not None)

    def key(self, kind: str, parts: Sequence[object]) -> str:
        """The entry name for answer ``kind`` about this file with these arguments."""
        digest = hashlib.sha256(MAGIC)
        _add(digest, kind, self.code, repr(launcher_identity()), repr(_taospec_environment()))
        _add(digest, self.cwd, self.file, self.real, self.data, self.versions, self.versions_data)
        _add(digest, len(parts), *map(repr, parts))
        return digest.hexdigest()

    def matches(self, reads: list[tuple[str, bytes]]) -> bool:
        """True when every file the load read is one of this snapshot's, byte for byte."""
        allowed = {self.real: self.data}
        if self.versions is not None:
            allowed[os.path.realpath(self.versions)] = self.versions_data
        return all(allowed.get(path, b"\0absent") == raw for path, raw in reads)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_FILE_BYTES else None


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


def _taospec_environment() -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in os.environ.items() if k.startswith("TAOSPEC_"))


# -- entries ------------------------------------------------------------------


def load(key: str) -> bytes | None:
    """The content stored under ``key``, if there is a sound entry."""
    base = folder()
    if base is None or not _safe(base):
        return None
    try:
        fd = os.open(os.path.join(base, key[:2], key), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _open_entry(b"".join(chunks), key)


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
    """Keep ``content`` under ``key`` (atomically; silently not, if the folder is unusable)."""
    base = folder()
    if base is None:
        return
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        if not _safe(base):
            return
        shard = os.path.join(base, key[:2])
        os.makedirs(shard, mode=0o700, exist_ok=True)
        temp = os.path.join(shard, f".{key}.{os.urandom(6).hex()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            entry = MAGIC + key.encode() + b"\n" + hashlib.sha256(content).hexdigest().encode()
            os.write(fd, entry + b"\n" + content)
        finally:
            os.close(fd)
        os.replace(temp, os.path.join(shard, key))
    except OSError:
        return


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
        try:
            return undump(content)
        except (ValueError, TypeError, KeyError, AttributeError):
            pass
    from taospec import yamlsrc

    with yamlsrc.recording() as reads:
        answer = compute()
    if snapshot.matches(reads) and code_unchanged(snapshot.code):
        try:
            content = dump(answer)
            if _equal(undump(content), answer):
                store(key, content)
        except (ValueError, TypeError):
            pass
    return answer


def _equal(a: Any, b: Any) -> bool:
    from taospec.codec import same

    return same(a, b)


def _dump_value(value: Any) -> bytes:
    import json

    from taospec.codec import encode

    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False).encode()


def _undump_value(content: bytes) -> Any:
    import json

    from taospec.codec import decode

    return decode(json.loads(content))


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


def load_jobfile(file: str) -> JobFile:
    """:func:`taospec.jobfile.load_jobfile`, cached."""
    from taospec.jobfile import load_jobfile as load_fresh

    loaded: JobFile = remembered(
        "jobfile",
        file,
        (),
        compute=lambda: load_fresh(file),
        dump=_dump_value,
        undump=_undump_value,
    )
    return loaded


def render(
    job: Job,
    *,
    user: str | None = None,
    upstream: Mapping[str, str] | None = None,
    launcher: Identity | None = None,
) -> Plan:
    """:func:`taospec.plan.render`, cached by the job's content and the arguments."""
    from taospec.plan import render as render_fresh

    base = folder()
    if base is None or launcher is not None:
        return render_fresh(job, user=user, upstream=upstream, launcher=launcher)
    try:
        job_bytes = _dump_value(job)
    except ValueError:
        return render_fresh(job, user=user, upstream=upstream)
    code = code_identity()
    digest = hashlib.sha256(MAGIC)
    _add(digest, "plan", code, repr(launcher_identity()), repr(_taospec_environment()))
    _add(digest, job_bytes, user, repr(sorted((upstream or {}).items())))
    key = digest.hexdigest()
    content = load(key)
    if content is not None:
        try:
            plan: Plan = _undump_value(content)
            return plan
        except (ValueError, TypeError, KeyError, AttributeError):
            pass
    from taospec import yamlsrc

    with yamlsrc.recording() as reads:
        plan = render_fresh(job, user=user, upstream=upstream)
    if not reads and code_unchanged(code):
        try:
            content = _dump_value(plan)
            if _equal(_undump_value(content), plan):
                store(key, content)
        except ValueError:
            pass
    return plan
