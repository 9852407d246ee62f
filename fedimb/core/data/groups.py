"""A data set's natural groups (Synthetic's devices, FEMNIST's writers, MIT-BIH's
patients): each group's rows, found once, and consecutive groups merged into one client."""

from __future__ import annotations

import numpy as np


def rows_by_group(groups: np.ndarray) -> dict[int, np.ndarray]:
    """Each group's rows in ascending order, by group id: one stable sort, so 10,000
    devices cost no more than ten (a scan per group would be devices × samples)."""
    order = np.argsort(groups, kind="stable")
    ordered = np.asarray(groups)[order]
    starts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1  # where the next group begins
    ids = ordered[np.concatenate([[0], starts])] if len(ordered) else ordered
    return dict(zip(ids.tolist(), np.split(order, starts)))


def merge_groups(rows: list[np.ndarray]) -> np.ndarray:
    """The rows of consecutive groups, ascending (one group's are already)."""
    return rows[0] if len(rows) == 1 else np.sort(np.concatenate(rows))
