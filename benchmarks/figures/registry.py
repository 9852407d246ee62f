"""Which function draws which figure: from the table of its name, or from data files by
suffix."""

from __future__ import annotations

from collections.abc import Callable

#: figure name -> (the table it is drawn from, the function drawing it from that table's rows)
FROM_TABLES: dict[str, tuple[str, Callable]] = {}


#: suffix of a data file -> the function drawing the figure of that name from its rows
FROM_DATA: dict[str, Callable] = {}


def from_table(*names: str):
    """Register a drawer for the figures ``names``, each drawn from the table of the same name."""

    def register(draw: Callable) -> Callable:
        for name in names:
            FROM_TABLES[name] = (name, draw)
        return draw

    return register


def from_data(suffix: str):
    """Register a drawer for every data file ``data/<name><suffix>.csv``."""

    def register(draw: Callable) -> Callable:
        FROM_DATA[suffix] = draw
        return draw

    return register
