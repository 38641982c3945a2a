"""Problems in the forms CI systems read: JSON per file, GitHub Actions annotations."""

from __future__ import annotations

from collections.abc import Sequence

from taospec.diagnostics import Problem, format_path


def problem_json(problem: Problem) -> dict[str, object]:
    """One problem as data: where it is and what is wrong."""
    return {
        "line": problem.line,
        "column": problem.column,
        "path": format_path(problem.path),
        "message": problem.message,
    }


def file_json(file: str, problems: Sequence[Problem]) -> dict[str, object]:
    """``validate --format json``: one file's verdict and every problem in it."""
    return {
        "file": file,
        "valid": not problems,
        "problems": [problem_json(p) for p in problems],
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
