"""The plot shapes the figures share: grouped and stacked bars, two-bar timings, log-log axes."""

from __future__ import annotations

import numpy as np

from benchmarks.figures.reading import floats
from benchmarks.plotting import figure


def grouped_bars(
    ax,
    groups: list[str],
    series: dict[str, tuple[np.ndarray, np.ndarray | None]],
    horizontal: bool = False,
) -> None:
    """One group of bars per entry of ``groups``, one bar per series (values, error bars)."""
    width = 0.8 / len(series)
    places = np.arange(len(groups))
    for i, (name, (values, errs)) in enumerate(series.items()):
        where = places - 0.4 + width * (i + 0.5)
        if horizontal:
            ax.barh(where, values, height=width, xerr=errs, label=name, capsize=2)
        else:
            ax.bar(where, values, width=width, yerr=errs, label=name, capsize=2)
    if horizontal:
        ax.set_yticks(places, groups)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(places, groups)
        ax.grid(axis="y", alpha=0.3)


def stacked_bars(ax, bars: list[str], parts: dict[str, np.ndarray]) -> None:
    """One horizontal bar per entry of ``bars``, stacked from ``parts`` in order, each part
    labelled with its value where it is wide enough."""
    left = np.zeros(len(bars))
    total = max(float(sum(parts.values()).max()), 1e-9)
    for name, values in parts.items():
        drawn = ax.barh(bars, values, left=left, label=name)
        ax.bar_label(
            drawn,
            labels=[f"{v:.1f}" if v >= 0.06 * total else "" for v in values],
            label_type="center",
            fontsize=7,
        )
        left = left + values
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def canvas(*args, **kwargs):
    """:func:`benchmarks.plotting.figure` laid out by matplotlib's constrained layout, which
    keeps a legend outside the plots clear of them."""
    return figure(*args, layout="constrained", **kwargs)


def legend_below(ax, columns: int = 3) -> None:
    """The legend of ``ax`` under the figure, where it covers no data."""
    ax.figure.legend(
        *ax.get_legend_handles_labels(),
        loc="outside lower center",
        ncol=columns,
        fontsize=8,
        frameon=False,
    )


def bar_figure(
    size: tuple[float, float],
    groups: list[str],
    series: dict[str, tuple[np.ndarray, np.ndarray | None]],
    legend_columns: int,
    horizontal: bool = False,
    **settings,
):
    """A figure of :func:`grouped_bars` with the axes ``settings`` and the legend below."""
    _, ax = canvas(figsize=size)
    grouped_bars(ax, groups, series, horizontal=horizontal)
    return finish(ax, legend_columns, **settings)


def finish(ax, legend_columns: int, **settings):
    """The figure of ``ax`` with the axes ``settings`` set and the legend below."""
    ax.set(**settings)
    legend_below(ax, legend_columns)
    return ax.figure


def time_bars(rows, size: tuple[float, float], names: str, bars: dict[str, str], **settings):
    """Two horizontal bars per row, named by its column ``names`` (legend label -> column of
    the data), without error bars."""
    return bar_figure(
        size,
        [r[names] for r in rows],
        {legend: (floats(rows, key), None) for legend, key in bars.items()},
        2,
        horizontal=True,
        **settings,
    )


def log_log(ax, xlabel: str, ylabel: str, ticks) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(ticks))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3, which="both")


def plt_colours(count: int) -> list:
    """``count`` distinct colours (matplotlib's tab20 for more than ten)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i) for i in range(count)]
