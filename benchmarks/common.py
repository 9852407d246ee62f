"""Shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the tables the documentation includes (docs/benchmarks/*.md, docs/faults.md)
DOCS_TABLES = REPO / "docs" / "tables"
#: the data behind the figures, one row per point (outside the site: mkdocs.yml excludes tables/)
DOCS_DATA = DOCS_TABLES / "data"
#: the figures the same pages show beside the tables (python -m benchmarks.figures redraws them)
DOCS_FIGURES = REPO / "docs" / "img" / "bench"
#: resolution of a figure in the docs: readable, and a PNG of tens of kilobytes
FIGURE_DPI = 80


def publish_table(table: Path, lines: list[str]) -> Path:
    """Write a markdown table file, echo it and its path; return the path."""
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    print(table.read_text())
    print(table)
    return table


def publish_in_docs(
    name: str, lines: list[str], script: str | None = None, new: bool = True
) -> Path | None:
    """Write ``lines`` to ``docs/tables/<name>.md``, the file a page of the documentation
    includes (``--8<-- "<name>.md"``), so that a table in the docs is the one its script
    wrote last. The first line names the script: ``script`` (a path relative to the
    repository), else the calling module's file. With ``new=False`` only a table the
    docs already hold is rewritten (for scripts whose table names come from arguments).
    Then draws the table's figure into ``docs/img/bench/`` where :mod:`benchmarks.figures`
    has one, so the figure on the page is always that of the table beside it.
    Returns the path, or None where nothing was written."""
    path = DOCS_TABLES / f"{name}.md"
    if not new and not path.exists():
        return None
    if script is None:
        caller = inspect.currentframe().f_back.f_globals.get("__file__") or sys.argv[0]  # type: ignore[union-attr]
        script = os.path.relpath(Path(caller).resolve(), REPO)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"<!-- written by {Path(script).as_posix()}; rerun it to update -->\n\n"
        + "\n".join(lines)
        + "\n"
    )
    print(path)
    from benchmarks.figures import redraw  # imports this module

    redraw(name)
    return path


def publish_data(name: str, rows: list[dict]) -> Path:
    """Write ``rows`` (one dict per point) to ``docs/tables/data/<name>.csv``, the data a
    figure in the docs is drawn from, then draw that figure (:mod:`benchmarks.figures`)."""
    import csv

    path = DOCS_DATA / f"{name}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(path)
    from benchmarks.figures import redraw

    redraw(name)
    return path


def publish_figure(name: str, fig, folder: Path = DOCS_FIGURES) -> Path:
    """Write ``fig`` to ``<folder>/<name>.png`` (default: the docs' ``img/bench/``) and close it."""
    import matplotlib.pyplot as plt

    path = Path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=FIGURE_DPI, metadata={"Software": None})
    plt.close(fig)
    print(path)
    return path


def table_part(lines: list[str]) -> list[str]:
    """The first markdown table (run of lines starting with ``|``) of a script's ``lines``."""
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def part(lines: list[str], start: str, stop: str = "Command:") -> list[str]:
    """``lines`` from the first line starting with ``start`` up to (without) the next line
    starting with ``stop``, trailing blank lines removed."""
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next((i for i in range(first + 1, len(lines)) if lines[i].startswith(stop)), len(lines))
    chosen = lines[first:last]
    while chosen and not chosen[-1].strip():
        chosen.pop()
    return chosen


def machine() -> str:
    """This machine in a table's caption: architecture and CPU count."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs"


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """A command-line parser described by the first line of a script's docstring."""
    return argparse.ArgumentParser(description=doc.splitlines()[0])


def figure(*args, **kwargs):
    """``plt.subplots(*args, **kwargs)`` drawn off screen: (figure, axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, path: Path) -> None:
    """Lay out, write at 110 dpi (creating the folder) and close ``fig``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def panels(count: int, width: float):
    """``count`` plots side by side sharing the y axis: (figure, list of axes)."""
    fig, axes = figure(1, count, figsize=(width * count, 4), sharey=True, squeeze=False)
    return fig, list(axes[0])


def save_panels(fig, axes, ylabel: str, path: Path) -> None:
    """Grid on every panel, ``ylabel`` on the first, the legend on the last; then save."""
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[-1].legend(fontsize=7)
    save_figure(fig, path)


@contextlib.contextmanager
def local_federation_for(runtime: str, folder: Path, nodes: int = 3):
    """A local federation of ``nodes`` SuperNodes (under ``folder``) for the deployment
    runtime's cells, stopped when they are done; None for the other runtimes."""
    if runtime != "deployment":
        yield None
        return
    from fedimb.cli.local_federation import LocalFederation

    federation = LocalFederation(folder, nodes).start()
    try:
        yield federation
    finally:
        federation.stop()
