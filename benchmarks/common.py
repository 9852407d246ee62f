"""Shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def publish_table(table: Path, lines: list[str]) -> Path:
    """Write a markdown table file, echo it and its path; return the path."""
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    print(table.read_text())
    print(table)
    return table


def publish_in_readme(name: str, lines: list[str], readme: Path = REPO / "README.md") -> None:
    """Replace what README.md holds between ``<!-- name:begin -->`` and ``<!-- name:end -->``
    with ``lines``, so that a table in README is the one its script wrote last."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = readme.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"README.md has no {begin} ... {end} block for this table")
    head, rest = text.split(begin, 1)
    readme.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


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
