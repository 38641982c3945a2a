"""``taospec diff``: how a change to job files changes the commands they run.

Each file's targets are rendered at two revisions (default: HEAD against the
work tree; one revision: it against the work tree) and their plans compared
as text, every job id shown as ``$JOB_ID``. A file at a revision is read with
``git show REV:path``, and so is the versions.yaml it resolves against: a
changed image pin shows as a changed image in every target that uses it; so
is a skill folder inside the repository (one outside it, such as
``$TAO_SKILL_BANK``, is read as it is now for both sides, and a note says so). A
file git sees renamed since the old revision is compared with its old path,
read under its new name so that only a change of its commands shows. A
versions.yaml named stands for the job files beside it at either side.
Exit 0 when no plan changed, 1 when one did, 2 when either side is invalid.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from taospec import gitrev, plandiff, preflight
from taospec.commands.session import shown_data
from taospec.diagnostics import SpecError, shown_file
from taospec.errors import EXIT_INVALID, EXIT_JOB_FAILED, EXIT_OK, InvalidInput, TaospecError
from taospec.identity import Identity
from taospec.job import JobFile
from taospec.lint import redacted
from taospec.loader import load_located
from taospec.plan import upstream_stand_ins
from taospec.platforms import render
from taospec.versions import VERSIONS_FILE, job_files_beside
from taospec.yamlsrc import Source

WORK_TREE = "work tree"
OUTSIDE = "skill {} read from {}, outside the repository: the same on both sides"
HOST_STAND_IN = Identity(1000, 1000, (), "host-user")
"""Who a ``user: host`` job is shown running as: the same on both sides, whoever runs diff."""
HOST_NOTE = (
    f"user: host shown as {HOST_STAND_IN.spec} ({HOST_STAND_IN.name}), a stand-in for whoever "
    "runs the job"
)


@dataclass(frozen=True, slots=True)
class TargetDiff:
    """One target compared: ``added``, ``removed``, ``changed`` or ``unchanged``."""

    target: str
    status: str
    diff: str

    def to_json(self) -> dict[str, str]:
        return {"target": self.target, "status": self.status, "diff": self.diff}


def split_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The revisions (up to two) and the files among ``args``.

    ``--`` ends the revisions; without it, a leading word is a revision when
    it is not a file in the work tree and git knows it as a commit in the
    repository of the last word (a file whichever the others are), not the one
    diff runs in: CI may run it from anywhere, naming files by their paths.
    """
    if "--" in args:
        cut = list(args).index("--")
        revs, files = list(args[:cut]), list(args[cut + 1 :])
    else:
        revs, files = [], list(args)
        while files and len(revs) < 2 and len(files) > 1 and _is_revision(files[0], files[-1]):
            revs.append(files.pop(0))
        if len(revs) < 2 and len(files) == 1 and _is_revision(files[0], files[0]):
            revs.append(files.pop())  # only revisions: a CI's list of changed files was empty
    if len(revs) > 2:
        raise InvalidInput(f"diff takes at most two revisions, not {len(revs)}: {' '.join(revs)}")
    if not files and "--" not in args:  # after --, none is a CI's list of changed job files
        raise InvalidInput(
            "diff: name at least one job file (after --, an empty list compares nothing)"
        )
    return revs, files


def job_files(files: Sequence[str], old: str, new: str | None) -> list[str]:
    """``files``, each versions.yaml as the job files beside it at either side (``new`` None:
    the work tree), each file once, in the order given: a moved pin is compared where it
    takes effect, as ``validate`` checks it."""
    out: dict[str, None] = {}
    for file in files:
        if Path(file).name != VERSIONS_FILE:
            out[file] = None
            continue
        where = gitrev.locate(file)
        folder = PurePosixPath(where.path).parent.as_posix()
        names = set()
        for rev in (old, new):
            if rev is not None:
                names.update(gitrev.files_in(where.top, gitrev.commit(where.top, rev), folder))
        here = Path(file).parent
        if new is None and here.is_dir():
            names.update(path.name for path in here.iterdir() if path.is_file())
        for name in job_files_beside(names):
            out[str(here / name)] = None
    return list(out)


def _is_revision(word: str, file: str) -> bool:
    if os.path.lexists(word):
        return False
    try:
        gitrev.commit(gitrev.locate(file).top, word)
    except InvalidInput:
        return False
    return True


def _plans(loaded: tuple[JobFile, dict[str, Source]] | None, notes: list[str]) -> dict[str, str]:
    """Each target's plan text, as ``render`` shows it, refused as render refuses it (a
    passed variable's value written, a refusal at its line). A ``user: host`` job is shown
    as :data:`HOST_STAND_IN` (and ``notes`` says so): what it runs as depends on who runs
    it, and a comparison of text must not (CI runs as root, which render refuses)."""
    if loaded is None:
        return {}
    jobfile, sources = loaded
    preflight.refuse_passed_values_shown(jobfile, sources, jobfile.targets)
    out = {}
    for name, target in jobfile.targets.items():
        upstream = upstream_stand_ins(target.needs)
        launcher = None
        if target.job.user == "host":
            launcher = HOST_STAND_IN
            _note(notes, HOST_NOTE)
        plan = render(target.job, launcher=launcher, upstream=upstream, source=sources[name])
        out[name] = plandiff.text(plan)
    return out


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)


def _side(
    where: gitrev.GitFile, rev: str | None, notes: list[str], renamed: bool = False
) -> dict[str, str]:
    """The plans of ``where`` at ``rev`` (None: the work tree), naming the side in any error;
    what a reader of the comparison must know is added to ``notes``."""
    label = f"at {rev}" if rev else f"in the {WORK_TREE}"
    if renamed:
        label += f" (as {where.path})"
    try:
        if rev is None:
            loaded = load_located(where.display) if os.path.lexists(where.display) else None
        else:
            outside: list[Path] = []
            loaded = gitrev.load_at(where, rev, outside)
            for folder in outside:
                _note(notes, OUTSIDE.format(folder.name, folder))
        return _plans(loaded, notes)
    except SpecError as exc:
        raise SideInvalid(where.display, label, str(exc)) from None
    except TaospecError as exc:
        detail = str(exc)
        named = f"{shown_file(where.display)}: "
        if not detail.startswith(named):
            detail = named + detail
        raise SideInvalid(where.display, label, detail) from None


class SideInvalid(InvalidInput):
    """One side of a comparison cannot be rendered."""

    def __init__(self, file: str, side: str, detail: str) -> None:
        self.detail = detail
        super().__init__(f"{shown_file(file)} is invalid {side}")


def compare(old: dict[str, str], new: dict[str, str], names: tuple[str, str]) -> list[TargetDiff]:
    """Every target of either side: new targets in their order, then removed ones."""
    out = []
    for target in [*new, *(t for t in old if t not in new)]:
        before, after = old.get(target), new.get(target)
        diff = plandiff.unified(
            before or "", after or "", f"{names[0]}#{target}", f"{names[1]}#{target}"
        )
        if before is None:
            status = "added"
        elif after is None:
            status = "removed"
        else:
            status = "changed" if diff else "unchanged"
        out.append(TargetDiff(target, status, diff))
    return out


def run(args: Sequence[str], *, fmt: str = "text") -> int:
    """Compare every file's plans at the two revisions; exit 1 when any changed."""
    revs, named = split_args(args)
    old_rev = revs[0] if revs else "HEAD"
    new_rev = revs[1] if len(revs) > 1 else None
    files = job_files(named, old_rev, new_rev)
    if not files:
        top = gitrev.toplevel(Path.cwd(), ".")
        for given in revs:
            gitrev.commit(top, given)
        print("taospec diff: no job file named after --: nothing compared", file=sys.stderr)
    results: list[tuple[str, str | None, list[str], list[TargetDiff]]] = []
    try:
        for file in files:
            where = gitrev.locate(file)
            for rev in (old_rev, new_rev):
                if rev is not None:
                    gitrev.commit(where.top, rev)
            before = where
            source = None
            if where.path not in gitrev.existing(where.top, old_rev, [where.path]):
                source = gitrev.renamed_from(where, old_rev, new_rev)
                if source is not None:  # shown under its new name: only real changes show
                    before = gitrev.GitFile(where.display, where.top, source)
            names = (
                f"{old_rev}:{before.path}",
                f"{new_rev}:{where.path}" if new_rev else file,
            )
            notes: list[str] = []
            old = _side(before, old_rev, notes, source is not None)
            new = _side(where, new_rev, notes)
            if not old and not new:
                # split_args read a first word that is neither as a file: say both
                # (after --, every word is a file)
                meant = "--" not in args and len(revs) < 2 and len(named) > 1 and file == named[0]
                nor = f", nor a revision git knows{gitrev.shallow(where.top)}" if meant else ""
                new_side = f"at {new_rev}" if new_rev else f"in the {WORK_TREE}"
                raise InvalidInput(
                    f"{shown_file(file)}: no such file at {old_rev} or {new_side}{nor}"
                )
            results.append((file, source, notes, compare(old, new, names)))
    except SideInvalid as exc:
        print(exc.detail, file=sys.stderr)
        print(f"taospec diff: {exc}", file=sys.stderr)
        return EXIT_INVALID
    changed = any(t.status != "unchanged" for *_, diffs in results for t in diffs)
    if fmt == "json":
        document = {
            "old": old_rev,
            "new": new_rev,
            "changed": changed,
            "files": [
                {
                    "file": file,
                    **({"renamed_from": source} if source else {}),
                    **({"notes": notes} if notes else {}),
                    "targets": [t.to_json() for t in diffs],
                }
                for file, source, notes, diffs in results
            ],
        }
        print(json.dumps(shown_data(document), indent=2))
    else:
        _show(results, old_rev)
    return EXIT_JOB_FAILED if changed else EXIT_OK


def _show(results: list[tuple[str, str | None, list[str], list[TargetDiff]]], old: str) -> None:
    """Each file's comparison as text: what it was renamed from, its notes, then each
    target's status and diff."""
    for file, source, notes, diffs in results:
        if source:
            print(redacted(f"{shown_file(file)}: renamed from {source} at {old}"))
        for note in notes:
            print(redacted(f"{shown_file(file)}: {note}"))
        for target in diffs:
            print(redacted(f"{shown_file(file)}: {target.target}: {target.status}"))
            sys.stdout.write(redacted(target.diff))
