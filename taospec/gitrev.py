"""Job files as they were at a git revision, read with ``git`` and never from the work tree.

:func:`load_at` reads a job file through ``git show REV:path`` and resolves
its versions keys in the nearest ``versions.yaml`` of the same revision (next
to the file or in a parent folder, up to the repository's top), and its
``skill:`` in the skill folder of the same revision when the folder is inside
the repository, so a job spec can be rendered as it was when it was committed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from taospec import proc
from taospec.diagnostics import SpecError, shown_file
from taospec.errors import InvalidInput
from taospec.job import JobFile
from taospec.loader import load_jobfile_text
from taospec.skills import (
    BANK_VARIABLE,
    INFO,
    MODELS,
    WORKFLOW,
    SkillError,
    bank_root,
    find_skill,
)
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
        raise InvalidInput(f"{shown_file(file)}: is outside the git repository at {top}") from None
    return GitFile(file, top, PurePosixPath(*inside.parts).as_posix())


def commit(top: Path, rev: str) -> str:
    """The commit ``rev`` names in the repository at ``top``."""
    found = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if not found.ok:
        why = shallow(top) or _no_commit(top)
        raise InvalidInput(f"{rev}: not a revision of the git repository at {top}{why}")
    return found.stdout.strip()


def _no_commit(top: Path) -> str:
    """What to add to "not a revision" when the repository at ``top`` has no commit yet."""
    found = _git(top, "rev-list", "-n", "1", "--all")
    if not found.ok or found.stdout.strip():
        return ""
    return ", which has no commit yet: commit the job files, then diff compares with that"


def shallow(top: Path) -> str:
    """What to add to "not a revision" when the repository at ``top`` is a shallow clone
    (as CI checks out by default), which lacks the history before its first commit."""
    found = _git(top, "rev-parse", "--is-shallow-repository")
    if not (found.ok and found.stdout.strip() == "true"):
        return ""
    return (
        ", a shallow clone that may lack it (git fetch --unshallow, or a deeper fetch, brings it)"
    )


def existing(top: Path, rev: str, paths: list[str], kind: str = "blob") -> set[str]:
    """Which of ``paths`` (from the top, ``/`` separators) are files at ``rev`` (``kind``
    ``tree``: folders; ``git show`` of a folder prints its listing, no file's text).

    Names are listed NUL-separated: otherwise git quotes a name holding a
    non-ASCII byte, a quote or a control character (``"jobs/r\\303\\251sum\\303\\251.yaml"``),
    and the quoted name matches none of ``paths``.
    """
    return {path for _, what, path in _listing(top, rev, paths) if what == kind}


def _listing(top: Path, rev: str, paths: list[str]) -> list[tuple[str, str, str]]:
    """The mode, type (``blob``, ``tree``, ``commit``) and path of each entry ``git
    ls-tree`` lists for ``paths`` at ``rev``."""
    found = _git(top, "ls-tree", "-z", "--full-tree", rev, "--", *paths)
    if not found.ok:
        raise InvalidInput(f"git ls-tree {rev} failed: {found.output()}")
    out = []
    for entry in filter(None, found.stdout.split("\0")):  # <mode> <type> <object>\t<path>
        about, path = entry.split("\t", 1)
        mode, what, _ = about.split()
        out.append((mode, what, path))
    return out


LINK_MODE = "120000"
"""The mode git stores a symbolic link with: its blob is the link's target."""


def followed(top: Path, rev: str, path: str) -> str:
    """``path`` at ``rev`` through its symbolic links, as the work tree reads it; a link
    that leads out of the repository (in no revision) or round a loop is refused."""
    seen = {path}
    while any(mode == LINK_MODE and at == path for mode, _, at in _listing(top, rev, [path])):
        target = os.path.normpath(PurePosixPath(path).parent / show(top, rev, path))
        if PurePosixPath(target).is_absolute() or target.split("/")[0] == ".." or target in seen:
            raise InvalidInput(
                f"a symbolic link at {rev} that leads out of the repository or round a loop"
            )
        path = PurePosixPath(target).as_posix()
        seen.add(path)
    return path


def files_in(top: Path, rev: str, folder: str) -> list[str]:
    """The names of the files in ``folder`` (from the top, ``.`` for the top) at ``rev``."""
    spec = "." if folder == "." else f"{folder}/"
    listed = _listing(top, rev, [spec])
    return [PurePosixPath(path).name for _, what, path in listed if what == "blob"]


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


class SkillsAt:
    """Finds the skill folders a job file at ``rev`` names, as that revision has them.

    A folder inside the repository is read with ``git archive`` into ``scratch``
    (with the versions.yaml of the bank it sits in, if any); so is the model folder of a
    workflow file (``tao-deploy-<model>``, found as the work tree has it). A folder outside it
    (``$TAO_SKILL_BANK``, a path out of the repository) is in no revision: it is
    read where it is now, the same for every revision, and listed in ``outside``.
    """

    def __init__(self, where: GitFile, rev: str, scratch: Path) -> None:
        self.where = where
        self.rev = rev
        self.scratch = scratch
        self.outside: list[Path] = []
        self._read: dict[str, Path] = {}

    def __call__(self, ref: str, job_dir: Path, environ: Mapping[str, str]) -> Path:
        job_dir = self.where.top / PurePosixPath(self.where.path).parent  # as at the revision
        inside = self._in_repository(ref, job_dir, environ)
        if inside is None:
            folder = find_skill(ref, job_dir, environ)
            if folder not in self.outside:
                self.outside.append(folder)
            return folder
        if inside not in self._read:
            self._read[inside] = self._extract(ref, inside)
        return self._read[inside]

    def _in_repository(self, ref: str, job_dir: Path, environ: Mapping[str, str]) -> str | None:
        """The folder ``ref`` names, from the repository's top (None when it is outside)."""
        if "/" in ref:
            folder = job_dir / ref
        elif environ.get(BANK_VARIABLE):
            folder = Path(environ[BANK_VARIABLE]) / MODELS / ref
            if not (folder / INFO).is_file():  # a workflow in a model's folder, as found now
                with contextlib.suppress(SkillError):
                    folder = find_skill(ref, job_dir, environ)
        else:
            return None
        real = Path(os.path.realpath(folder))
        try:
            inside = real.relative_to(os.path.realpath(self.where.top))
        except ValueError:
            return None
        return PurePosixPath(*inside.parts).as_posix() if inside.parts else None

    def _extract(self, ref: str, inside: str) -> Path:
        """The skill folder (or workflow file) ``inside`` as ``rev`` has it, with its model
        folder, read into the scratch tree."""
        top, rev = self.where.top, self.rev
        workflow = inside.endswith(WORKFLOW)
        folder = PurePosixPath(inside).parent.parent.as_posix() if workflow else inside
        info = inside if workflow else f"{folder}/{INFO.as_posix()}"
        if info not in existing(top, rev, [info]):
            raise SkillError(f"skill {ref!r}: {rev}:{info} does not exist")
        paths = [folder]
        root = bank_root(PurePosixPath(folder))
        if root is not None:
            paths += existing(top, rev, [(root / VERSIONS_FILE).as_posix()])
        archive = self.scratch / "skill.tar"
        made = _git(top, "archive", "--format=tar", f"--output={archive}", rev, "--", *paths)
        if not made.ok:
            raise SkillError(f"skill {ref!r}: git archive {rev} {folder} failed: {made.output()}")
        try:
            with tarfile.open(archive) as tar:
                for member in tar:  # regular files only: no link leads out of the scratch tree
                    content = tar.extractfile(member) if member.isfile() else None
                    if content is not None:
                        target = self.tree / member.name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(content.read())
        except (OSError, tarfile.TarError) as exc:
            raise SkillError(f"skill {ref!r}: cannot read {rev}:{folder}: {exc}") from None
        archive.unlink()
        return self.tree / inside

    @property
    def tree(self) -> Path:
        """Where the revision's skill folders are written, at their paths in the repository."""
        return self.scratch / "tree"


def load_at(
    where: GitFile, rev: str, outside: list[Path] | None = None
) -> tuple[JobFile, dict[str, Source]] | None:
    """The job file at ``rev`` and the source of each target (None when it did not exist
    then), shown as its display name; each skill folder it reads from outside the
    repository is added to ``outside``."""
    path = followed(where.top, rev, where.path)
    if path not in existing(where.top, rev, [path]):
        if path in existing(where.top, rev, [path], "tree"):
            raise SpecError.single(where.display, "is a directory, not a job file")
        return None
    text = show(where.top, rev, path)
    images = Images(Path(where.display), functools.cache(lambda: versions_reader(where, rev)))
    with tempfile.TemporaryDirectory(prefix="taospec-diff-") as scratch:
        skills = SkillsAt(where, rev, Path(scratch).resolve())
        try:
            loaded = load_jobfile_text(text, where.display, images, skills)
        except SpecError as exc:  # a skill file is named as the revision has it
            shown = f"{skills.tree}/"
            raise SpecError(
                [
                    dataclasses.replace(p, message=p.message.replace(shown, f"{rev}:"))
                    for p in exc.problems
                ],
                outcome=exc.outcome,
            ) from None
    if outside is not None:
        outside += [folder for folder in skills.outside if folder not in outside]
    return loaded
