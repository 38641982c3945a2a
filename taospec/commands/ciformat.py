"""Problems in the forms CI systems read: JSON per file, GitHub Actions annotations."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from taospec.diagnostics import Problem, format_path
from taospec.lint import redacted, redacted_location

# Each field is redacted as what it is, the file as a path (``/exp/token=v1/run`` stays),
# before it is put in its form: redacting the finished line would take a path's
# ``token=v1`` for a credential and cut the JSON, or the annotation's line, with it.


def file_json(file: str, problems: Sequence[Problem]) -> dict[str, object]:
    """``validate --format json``: one file's verdict, and where each problem is and what."""
    return {
        "file": redacted_location(file),
        "valid": not problems,
        "problems": [
            {"line": p.line, "column": p.column, "path": _path(p), "message": p.message}
            for p in problems
        ],
    }


def _path(problem: Problem) -> str:
    """A problem's JSON path, redacted (a key may be a token)."""
    return redacted(format_path(problem.path))


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _in_workspace(path: str) -> str:
    """``path`` as GitHub finds an annotation's file: from the top of the checkout
    (``$GITHUB_WORKSPACE``), whichever folder the step runs ``validate`` in; as given
    outside a workflow, or for a file outside the checkout."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if not workspace:
        return path
    try:
        return _absolute(path).relative_to(_absolute(workspace)).as_posix()
    except ValueError:
        return path


def _absolute(path: str) -> Path:
    """``path`` from the root, ``..`` taken as the path reads (a link is not followed)."""
    return Path(os.path.normpath(Path(path).absolute()))


def github(file: str, problem: Problem) -> str:
    """A GitHub Actions error annotation, shown on the line of the file in a pull request."""
    shown = _escape_property(redacted_location(_in_workspace(problem.file or file)))
    where = f"file={shown},line={problem.line},col={problem.column}"
    message = f"{_path(problem)}: {problem.message}"
    return f"::error {where}::{_escape_data(message)}"
