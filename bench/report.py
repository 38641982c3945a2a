"""The suite's one table: as text on the terminal, as JSON, and in README.md.

A :class:`Figure` is one measured quantity with its reference (measured in the
same run) and its target. A target is either a ratio to the reference
(``ratio_max`` / ``ratio_min``) or an absolute bound (``max`` / ``min``) in the
figure's unit. A missed figure carries a short profile of where its time goes.
``python bench/report.py`` rewrites README.md's performance section from
``bench/results/latest.json``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from measure import Stats

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "latest.json"
README = ROOT / "README.md"
BEGIN = "<!-- bench:begin (written by bench/report.py from bench/results/latest.json) -->"
END = "<!-- bench:end -->"


KINDS = ("ratio_max", "ratio_min", "max", "min")


@dataclass(frozen=True, slots=True)
class Target:
    """What a figure must reach: ``ratio_max``, ``ratio_min``, ``max`` or ``min`` ``value``."""

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown target kind {self.kind!r}; one of {', '.join(KINDS)}")

    def text(self, unit: str) -> str:
        """``<= 8x``, ``>= 0.70x``, ``<= 600 ms``, ``>= 1,000 files/s``."""
        sign = "<=" if self.kind.endswith("max") else ">="
        if self.kind.startswith("ratio"):
            return f"{sign} {_number(self.value)}x"
        return f"{sign} {_number(self.value)} {unit}"

    def reached(self, value: float | None, ratio: float | None) -> bool:
        """Whether ``value`` (or ``ratio``, for a ratio target) is within the bound."""
        measured = ratio if self.kind.startswith("ratio") else value
        if measured is None:
            return False
        return measured <= self.value if self.kind.endswith("max") else measured >= self.value


@dataclass(frozen=True, slots=True)
class Figure:
    """One row of the table."""

    key: str
    title: str
    unit: str
    value: Stats
    reference_title: str = ""
    reference: Stats | None = None
    target: Target | None = None
    note: str = ""
    reference_unit: str = ""
    """The reference's unit when it is not the figure's (then there is no ratio)."""
    profile: str = ""
    """Where the time goes, for a figure that missed its target."""

    @property
    def ratio(self) -> float | None:
        """Median over the reference's median."""
        if self.reference is None or self.reference.median == 0 or self.reference_unit:
            return None
        return self.value.median / self.reference.median

    @property
    def met(self) -> bool | None:
        """Whether the target is reached (None when the figure has none)."""
        if self.target is None:
            return None
        return self.target.reached(self.value.median, self.ratio)

    def with_profile(self, profile: str) -> Figure:
        """This figure with where its time goes."""
        return replace(self, profile=profile)

    def to_json(self) -> dict[str, Any]:
        """Plain data for latest.json."""
        data = asdict(self)
        data["ratio"] = None if self.ratio is None else round(self.ratio, 3)
        data["met"] = self.met
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        """A figure read back from latest.json."""
        reference = data.get("reference")
        target = data.get("target")
        return cls(
            key=data["key"],
            title=data["title"],
            unit=data["unit"],
            value=Stats(**data["value"]),
            reference_title=data.get("reference_title", ""),
            reference=Stats(**reference) if reference else None,
            target=Target(**target) if target else None,
            note=data.get("note", ""),
            reference_unit=data.get("reference_unit", ""),
            profile=data.get("profile", ""),
        )


def _number(value: float) -> str:
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread(stats: Stats, unit: str) -> str:
    return f"{_number(stats.median)} {unit} ({_number(stats.low)}-{_number(stats.high)})"


def rows(figures: list[Figure]) -> list[tuple[str, ...]]:
    """The table's cells, header first."""
    out: list[tuple[str, ...]] = [
        ("figure", "median (min-max)", "reference", "ratio", "target", "result")
    ]
    for figure in figures:
        reference = ""
        if figure.reference is not None:
            unit = figure.reference_unit or figure.unit
            reference = f"{figure.reference_title}: {_spread(figure.reference, unit)}"
        ratio = "" if figure.ratio is None else f"{figure.ratio:.2f}x"
        target = "" if figure.target is None else figure.target.text(figure.unit)
        result = {True: "met", False: "MISSED", None: "info"}[figure.met]
        out.append(
            (figure.title, _spread(figure.value, figure.unit), reference, ratio, target, result)
        )
    return out


def text_table(figures: list[Figure]) -> str:
    """Aligned columns for the terminal."""
    table = rows(figures)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
             for row in table]  # fmt: skip
    lines.insert(1, "  ".join("-" * width for width in widths))
    notes = [f"  {f.key}: {f.note}" for f in figures if f.note]
    notes += [f"  {f.key} (MISSED) profile: {f.profile}" for f in figures if f.profile]
    return "\n".join(lines + (["", "notes:", *notes] if notes else [])) + "\n"


def markdown(results: dict[str, Any]) -> str:
    """README's performance section body: the machine, then the table, then the notes."""
    figures = [Figure.from_json(f) for f in results["figures"]]
    machine = results["machine"]
    head = (
        f"Measured by `make bench` on {machine['cpus']} CPUs, Python {machine['python']}, "
        f"{results['date']}; each figure is the median (min-max) of "
        "whole-process runs, each ratio is against a reference measured alternately "
        f"in the same run. Whole suite: {results['seconds']:.0f} s."
    )
    table = rows(figures)
    lines = [head, ""]
    lines.append("| " + " | ".join(table[0]) + " |")
    lines.append("|" + "|".join("---" for _ in table[0]) + "|")
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in table[1:]]  # fmt: skip
    notes = [f"- **{f.title}**: {f.note}" for f in figures if f.note]
    notes += [
        f"- **{f.title}** (MISSED), where the time goes: {f.profile}" for f in figures if f.profile
    ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def write_readme(results: dict[str, Any], readme: Path = README) -> None:
    """Replace the text between the markers in README.md with the table."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    readme.write_text(text[:start] + "\n" + markdown(results) + text[end:], encoding="utf-8")


def readme_section(readme: Path = README) -> str:
    """What README.md holds between the markers now."""
    text = readme.read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].lstrip("\n")


def main() -> int:
    """Rewrite README.md from latest.json."""
    write_readme(json.loads(RESULTS.read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
