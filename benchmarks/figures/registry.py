"""Which function draws which figure. Every figure is drawn from a data file a benchmark
script wrote under ``docs/tables/data/``: the file of the figure's name, or every file
whose name ends in a family's suffix."""

from __future__ import annotations

from collections.abc import Callable

#: figure name -> the function drawing it from the rows of ``data/<name>.csv``
DRAWN: dict[str, Callable] = {}

#: suffix of a data file -> the function drawing the figure of that name from its rows
FROM_DATA: dict[str, Callable] = {}


def drawn_from(*names: str):
    """Register a drawer for the figures ``names``, each drawn from ``data/<name>.csv``."""

    def register(draw: Callable) -> Callable:
        for name in names:
            DRAWN[name] = draw
        return draw

    return register


def from_data(suffix: str):
    """Register a drawer for every data file ``data/<name><suffix>.csv``; it is called with
    the rows and ``<name>``."""

    def register(draw: Callable) -> Callable:
        FROM_DATA[suffix] = draw
        return draw

    return register
