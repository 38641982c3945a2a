"""Problems in the forms CI systems read: JSON per file, GitHub Actions annotations."""

from __future__ import annotations

from collections.abc import Sequence

from taospec.diagnostics import Problem, format_path


def file_json(file: str, problems: Sequence[Problem]) -> dict[str, object]:
    """``validate --format json``: one file's verdict, and where each problem is and what."""
    return {
        "file": file,
        "valid": not problems,
        "problems": [
            {"line": p.line, "column": p.column, "path": format_path(p.path), "message": p.message}
            for p in problems
        ],
    }


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(file: str, problem: Problem) -> str:
    """A GitHub Actions error annotation, shown on the line of the file in a pull request."""
    where = (
        f"file={_escape_property(problem.file or file)},line={problem.line},col={problem.column}"
    )
    message = f"{format_path(problem.path)}: {problem.message}"
    return f"::error {where}::{_escape_data(message)}"
