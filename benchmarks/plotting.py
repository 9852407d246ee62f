"""Where the docs' benchmark tables and figures live, and the figures' one style: drawn off
screen, written as PNGs of tens of kilobytes. :mod:`benchmarks.figures` and every script
draw through these."""

from __future__ import annotations

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


def publish_figure(name: str, fig, folder: Path = DOCS_FIGURES) -> Path:
    """Write ``fig`` to ``<folder>/<name>.png`` (default: the docs' ``img/bench/``) and close it."""
    import matplotlib.pyplot as plt

    path = Path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=FIGURE_DPI, metadata={"Software": None})
    plt.close(fig)
    print(path)
    return path


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
