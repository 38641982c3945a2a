"""Where one suite run works: a temporary folder, the interpreter, the console script.

Every measured child gets the caller's environment without any ``TAOSPEC_*``
variable, plus its own ``TAO_STATE_DIR`` and ``XDG_CACHE_HOME`` inside the
workspace, so the suite never reads or writes the person's own ledger or files.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from edits import EditedFile
from measure import Run, run_once

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "jobs"


class Workspace:
    """A private folder for one run of the suite."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="taospec-bench-", dir="/tmp"))
        self.root.chmod(0o755)
        shm = Path("/dev/shm")
        self.memory_root = (
            Path(tempfile.mkdtemp(prefix="taospec-bench-", dir=shm)) if shm.is_dir() else self.root
        )
        self.python = sys.executable
        self.taospec = str(Path(sys.executable).with_name("taospec"))
        self._counter = itertools.count()

    def fresh(self, name: str) -> Path:
        """A new, empty folder in the workspace."""
        path = self.root / f"{name}-{next(self._counter)}"
        path.mkdir(parents=True)
        return path

    def fresh_in_memory(self, name: str) -> Path:
        """A new folder on tmpfs when there is one (big generated ledgers; quick to delete)."""
        path = self.memory_root / f"{name}-{next(self._counter)}"
        path.mkdir(parents=True)
        return path

    def env(self, *, state: Path | None = None) -> dict[str, str]:
        """The environment a measured child gets."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAOSPEC_")}
        env["TAO_STATE_DIR"] = str(state or self.root / "state")
        env["XDG_CACHE_HOME"] = str(self.root / "xdg-cache")
        return env

    def bare(self) -> Run:
        """The reference for start-up costs: this interpreter doing nothing."""
        return run_once([self.python, "-c", "pass"], env=self.env())

    def libraries(self, *modules: str) -> Run:
        """This interpreter importing ``modules`` and nothing of taospec's: a command's floor."""
        return run_once([self.python, "-c", f"import {', '.join(modules)}"], env=self.env())

    def taospec_run(
        self,
        args: Sequence[str],
        *,
        state: Path | None = None,
        cwd: Path | None = None,
        expect: Sequence[int] = (0,),
        capture: bool = False,
    ) -> Run:
        """One whole ``taospec`` process."""
        return run_once(
            [self.taospec, *args],
            env=self.env(state=state),
            cwd=cwd or ROOT,
            expect=expect,
            capture=capture,
        )

    def copy_job(self, name: str, folder: Path, replacements: dict[str, str]) -> Path:
        """A copy of ``jobs/<name>`` (and versions.yaml) in ``folder``, with text replaced."""
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(JOBS / "versions.yaml", folder / "versions.yaml")
        text = (JOBS / name).read_text(encoding="utf-8")
        for old, new in replacements.items():
            if old not in text:
                raise ValueError(f"jobs/{name} no longer contains {old!r}")
            text = text.replace(old, new)
        target = folder / name
        target.write_text(text, encoding="utf-8")
        return target

    def edited_job(self, name: str, replacements: dict[str, str] | None = None) -> EditedFile:
        """A private copy of ``jobs/<name>`` that changes before every run."""
        return EditedFile(self.copy_job(name, self.fresh("job"), replacements or {}))

    def remove(self) -> None:
        """Delete the workspace."""
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.memory_root, ignore_errors=True)
