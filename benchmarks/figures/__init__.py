"""The benchmark figures the documentation shows, drawn from what the scripts published.

Every figure is drawn from the data a script wrote under ``docs/tables/data/`` beside the
table the page shows (``<name>.csv``, one row per point, the numbers as the script
measured them). :func:`benchmarks.common.publish_in_docs` and
:func:`benchmarks.common.publish_data` redraw a figure each time a script rewrites its
data, and this module redraws them all without rerunning anything:

    python -m benchmarks.figures [--tables docs/tables] [--out docs/img/bench] [NAME ...]

Each figure lands in ``<out>/<name>.png``, which the page beside the table shows.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from benchmarks.figures import (
    accuracy,  # noqa: F401  (registers its figures)
    asynchronous,  # noqa: F401  (registers its figures)
    faults,  # noqa: F401  (registers its figures)
    leaderboard,  # noqa: F401  (registers its figures)
    performance,  # noqa: F401  (registers its figures)
    privacy,  # noqa: F401  (registers its figures)
    synthetic,  # noqa: F401  (registers its figures)
)
from benchmarks.figures.reading import read_data
from benchmarks.figures.registry import DRAWN, FROM_DATA
from benchmarks.plotting import DOCS_FIGURES, DOCS_TABLES, publish_figure

__all__ = ["DRAWN", "FROM_DATA", "main", "names", "redraw"]


def data_figure(path: Path) -> tuple[str, Callable] | None:
    """(what the figure shows: the file's name less its suffix, drawer) of a data file,
    or None where no drawer reads it."""
    if path.stem in DRAWN:
        return path.stem, lambda rows, _: DRAWN[path.stem](rows)
    for suffix, draw in FROM_DATA.items():
        if path.stem.endswith(suffix):
            return path.stem.removesuffix(suffix), draw
    return None


def redraw(name: str, tables: Path = DOCS_TABLES, out: Path = DOCS_FIGURES) -> Path | None:
    """Draw figure ``name`` from its data file into ``out``; the path, or None where no
    figure of that name is drawn or its data file is missing."""
    source = Path(tables) / "data" / f"{name}.csv"
    found = data_figure(source) if source.exists() else None
    if found is None:
        return None
    subject, draw = found
    return publish_figure(name, draw(read_data(source), subject), out)


def names(tables: Path = DOCS_TABLES) -> list[str]:
    """Every figure whose data file exists under ``tables/data``."""
    return sorted(p.stem for p in (Path(tables) / "data").glob("*.csv") if data_figure(p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=Path, default=DOCS_TABLES, help="the folder holding data/")
    parser.add_argument("--out", type=Path, default=DOCS_FIGURES, help="where the figures go")
    parser.add_argument(
        "names", nargs="*", help="figures to draw (default: every one whose source exists)"
    )
    args = parser.parse_args(argv)
    known = names(args.tables)
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"no data file draws {', '.join(unknown)} (known: {', '.join(known)})")
    for name in args.names or known:
        redraw(name, args.tables, args.out)
    return 0
