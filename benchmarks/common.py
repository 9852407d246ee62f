"""Shared by the benchmark scripts."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def publish_table(table: Path, lines: list[str]) -> Path:
    """Write a markdown table file, echo it and its path; return the path."""
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    print(table.read_text())
    print(table)
    return table
