"""Reading the tables and data files the benchmark scripts publish under docs/tables/."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np

NUMBER = re.compile(r"[-−+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def read_table(path: Path) -> list[dict[str, str]]:
    """The rows of the first Markdown table in ``path``, keyed by the header's cells (a
    cell the header repeats, such as ``diff.``, named after the one before it:
    ``diff. (T = 1)``)."""
    lines = [line.strip() for line in Path(path).read_text().splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    header, rows = table[0], table[2:]
    header = [
        f"{cell} ({header[i - 1]})" if header.count(cell) > 1 and i else cell
        for i, cell in enumerate(header)
    ]
    return [dict(zip(header, row)) for row in rows]


def read_data(path: Path) -> list[dict[str, str]]:
    """The rows of a data file (CSV with a header)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def floats(rows: list[dict[str, str]], key: str) -> np.ndarray:
    """Column ``key`` of a data file's rows as numbers; NaN where a cell is empty (not
    measured)."""
    return np.array([float(row[key]) if row[key] != "" else math.nan for row in rows])


def numbers(cell: str) -> list[float]:
    """Every number in a table cell, in order (``**`` marks, thousands commas and the
    typographic minus understood)."""
    return [
        float(n.replace(",", "").replace("−", "-")) for n in NUMBER.findall(cell.replace("*", ""))
    ]


def number(cell: str) -> float:
    """The first number in a cell (``92.93 ± 0.31`` -> 92.93); NaN where it holds none (``-``)."""
    found = numbers(cell)
    return found[0] if found else math.nan


def spread(cell: str) -> float:
    """The ``± std`` of a ``mean ± std`` cell; NaN where there is none."""
    found = numbers(cell.split("±", 1)[1]) if "±" in cell else []
    return found[0] if found else math.nan


def column(rows: list[dict[str, str]], key: str) -> np.ndarray:
    return np.array([number(row[key]) for row in rows])


def errors(rows: list[dict[str, str]], key: str) -> np.ndarray:
    return np.array([spread(row[key]) for row in rows])


def label(row: dict[str, str]) -> str:
    """The first cell of a row: what the row is."""
    return next(iter(row.values())).replace("`", "")
