"""Job files as they were at a git revision, read with ``git`` and never from the work tree.

:func:`load_at` reads a job file through ``git show REV:path`` and resolves
its versions keys in the nearest ``versions.yaml`` of the same revision (next
to the file or in a parent folder, up to the repository's top), so a job
spec can be rendered as it was when it was committed.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from taospec import proc
from taospec.errors import InvalidInput
from taospec.job import JobFile
from taospec.loader import load_jobfile_text
from taospec.versions import VERSIONS_FILE, Images
from taospec.yamlsrc import Source


@dataclass(frozen=True, slots=True)
class GitFile:
    """A file named on the command line (``display``) and where it is in its repository."""

    display: str
    top: Path
    path: str
    """The file's path from the repository's top, with ``/`` separators."""


def _git(top: Path, *args: str) -> proc.Result:
    return proc.run(["git", "-C", str(top), *args], check=False)


def toplevel(folder: Path, name: str) -> Path:
    """The top of the git work tree that holds ``folder`` (``name`` is said in the error)."""
    found = _git(folder, "rev-parse", "--show-toplevel")
    if not found.ok:
        raise InvalidInput(f"{name}: not in a git repository ({found.output()})")
    return Path(found.stdout.strip())


def locate(file: str) -> GitFile:
    """The repository that holds ``file`` (which need not exist in the work tree)."""
    folder = Path(os.path.normpath(Path.cwd() / file)).parent
    start = folder
    while not start.is_dir():
        start = start.parent
    top = toplevel(start, file)
    real = Path(os.path.realpath(start)) / folder.relative_to(start) / Path(file).name
    try:
        inside = real.relative_to(os.path.realpath(top))
    except ValueError:
        raise InvalidInput(f"{file}: is outside the git repository at {top}") from None
    return GitFile(file, top, PurePosixPath(*inside.parts).as_posix())


def commit(top: Path, rev: str) -> str:
    """The commit ``rev`` names in the repository at ``top``."""
    found = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if not found.ok:
        raise InvalidInput(f"{rev}: not a revision of the git repository at {top}")
    return found.stdout.strip()


def existing(top: Path, rev: str, paths: list[str]) -> set[str]:
    """Which of ``paths`` (from the top, ``/`` separators) are files at ``rev``."""
    found = _git(top, "ls-tree", "--full-tree", "--name-only", rev, "--", *paths)
    if not found.ok:
        raise InvalidInput(f"git ls-tree {rev} failed: {found.output()}")
    return set(found.stdout.splitlines())


def show(top: Path, rev: str, path: str) -> str:
    """The text of ``path`` at ``rev`` (``git show REV:path``)."""
    found = _git(top, "show", f"{rev}:{path}")
    if not found.ok:
        raise InvalidInput(f"git show {rev}:{path} failed: {found.output()}")
    return found.stdout


def renamed_from(where: GitFile, old: str, new: str | None) -> str | None:
    """The path ``where`` had at ``old``, when git sees it renamed by ``new`` (None: the work tree).

    Git's own rename detection decides, as ``git diff --find-renames`` shows
    it; a file moved without telling git (not added) has no old path.
    """
    found = _git(
        where.top, "diff", "--find-renames", "--name-status", "-z", old, *filter(None, [new])
    )
    if not found.ok:
        raise InvalidInput(f"git diff {old} failed: {found.output()}")
    fields = found.stdout.split("\0")
    index = 0
    while index < len(fields) - 1:
        status = fields[index]
        if status.startswith("R"):  # R<score>, old path, new path
            if fields[index + 2] == where.path:
                return fields[index + 1]
            index += 3
        else:
            index += 2
    return None


def versions_reader(where: GitFile, rev: str) -> tuple[str, str] | None:
    """The nearest versions.yaml of ``where`` at ``rev``: its display name and its text."""
    parent = PurePosixPath(where.path).parent
    candidates = [(folder / VERSIONS_FILE).as_posix() for folder in (parent, *parent.parents)]
    there = existing(where.top, rev, candidates)
    for candidate in candidates:
        if candidate in there:
            return f"{rev}:{candidate}", show(where.top, rev, candidate)
    return None


def load_at(where: GitFile, rev: str) -> tuple[JobFile, dict[str, Source]] | None:
    """The job file at ``rev`` and the source of each target (None when it did not exist
    then), shown as its display name."""
    if where.path not in existing(where.top, rev, [where.path]):
        return None
    text = show(where.top, rev, where.path)
    images = Images(Path(where.display), functools.cache(lambda: versions_reader(where, rev)))
    return load_jobfile_text(text, where.display, images)
