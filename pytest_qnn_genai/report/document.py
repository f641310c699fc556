"""The summary as a document of sections, tables and images, rendered as markdown here and as
HTML by :mod:`pytest_qnn_genai.report.html`, so ``summary.md`` and ``summary.html`` cannot show
different tables: both render the one document :mod:`pytest_qnn_genai.report.summary` builds.

A :class:`Cell` with a ``verdict`` is a verdict cell: markdown shows the word, HTML colours it; in a
``counted`` table (one row per figure) HTML marks it ``data-verdict``, what the page's own count
and the browser test read back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_qnn_genai import text


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, a verdict when it is a verdict cell, right-aligned if numeric."""

    text: str
    verdict: str | None = None
    numeric: bool = False


@dataclass(frozen=True)
class Table:
    """A table; ``name`` is the HTML id (``verdict-counts``, ...), ``None`` for none. The verdict
    cells of a ``counted`` table are the run's figures (one per figure, what the page counts)."""

    columns: list[str]
    rows: list[list[Cell]]
    name: str | None = None
    counted: bool = False


@dataclass(frozen=True)
class Image:
    """A plot: embedded by the HTML page, linked by the markdown file (same folder)."""

    path: Path
    alt: str


Block = Table | Image | str  # a str is a paragraph; a line starting "- " is a bullet


@dataclass
class Section:
    """A heading (``level`` 1..3) and its blocks."""

    title: str
    level: int = 2
    blocks: list[Block] = field(default_factory=list)


def _md_table(table: Table) -> str:
    align = ["---:" if any(r[i].numeric for r in table.rows) else "---"
             for i in range(len(table.columns))]
    lines = ["| " + " | ".join(text.cell(c) for c in table.columns) + " |",
             "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(text.cell(c.text) or " " for c in row) + " |"
              for row in table.rows]
    return "\n".join(lines) + "\n"


def to_markdown(sections: list[Section]) -> str:
    """The document as markdown (images as links to the PNG beside the file)."""
    parts = []
    for s in sections:
        parts.append(f"{'#' * s.level} {s.title}\n")
        for b in s.blocks:
            if isinstance(b, Table):
                parts.append(_md_table(b))
            elif isinstance(b, Image):
                parts.append(f"![{b.alt}]({b.path.name})\n")
            else:
                parts.append(b.rstrip("\n") + "\n")
    return "\n".join(parts)
