"""The device-speed model of the simulated runtimes (``speed``): how many simulated seconds
each client's fit takes, drawn once per run from the training seed, so that synchronous and
asynchronous runs are compared on one clock (docs/asynchronous.md).

Client k's fit takes ``link_seconds * L_k + seconds_per_sample * n_k * local_epochs * C_k``
seconds, n_k its training samples. ``lognormal`` draws C_k and L_k log-normally (a heavy
tail of slow devices); ``edge`` makes a share of the clients edge boards ``slow_factor``
times slower than the rest. ``assign=rare_slow`` gives the slowest factors to the clients
whose samples belong to the rarest classes (the label-skewed worst case: the slow devices
hold what the fast ones lack); ``random`` keeps the draw's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedimb.core.errors import check_choice, check_number, require

NAMES = ("none", "lognormal", "edge")
ASSIGNMENTS = ("random", "rare_slow")
_STREAM = 0x5BEED  # keeps the speed draws apart from the seed's other streams


class SpeedModel:
    """Simulated seconds of every client's fit (:meth:`seconds`)."""

    def __init__(self, compute: np.ndarray, link: np.ndarray, seconds_per_sample: float):
        self.compute = compute  # per client: seconds per sample and epoch, relative
        self.link = link  # per client: seconds of a round's transfers
        self.seconds_per_sample = seconds_per_sample

    def seconds(self, pid: int, num_examples: int, local_epochs: int) -> float:
        compute = self.seconds_per_sample * num_examples * local_epochs * self.compute[pid]
        return float(self.link[pid] + compute)


def speed_model(
    spec: Mapping[str, Any], label_counts: Sequence[np.ndarray], seed: int
) -> SpeedModel | None:
    """The model of a ``speed`` section for clients with these training label histograms
    (one row per client); None for ``speed=none``."""
    name = spec["name"]
    if name == "none":
        return None
    n = len(label_counts)
    rng = np.random.default_rng([seed, _STREAM])
    if name == "lognormal":
        compute = np.exp(float(spec["sigma"]) * rng.standard_normal(n))
        link = float(spec["link_seconds"]) * np.exp(
            float(spec["link_sigma"]) * rng.standard_normal(n)
        )
    else:  # edge: the first round(slow_fraction * n) of a random order are edge boards
        slow = np.zeros(n, dtype=bool)
        slow[rng.permutation(n)[: int(round(float(spec["slow_fraction"]) * n))]] = True
        compute = np.where(slow, float(spec["slow_factor"]), 1.0)
        link = np.full(n, float(spec["link_seconds"]))
    if spec["assign"] == "rare_slow":
        order = np.argsort(-rarity(label_counts), kind="stable")  # rarest data first
        compute[order] = np.sort(compute)[::-1]  # ... gets the slowest factor
    return SpeedModel(compute, link, float(spec["seconds_per_sample"]))


def rarity(label_counts: Sequence[np.ndarray]) -> np.ndarray:
    """Per client, the mean over its samples of 1 / (its class's share of the federation's
    samples): high where a client's data is of classes few others hold."""
    counts = np.asarray(label_counts, dtype=float)
    share = counts.sum(axis=0) / max(counts.sum(), 1.0)
    inverse = np.divide(1.0, share, out=np.zeros_like(share), where=share > 0)
    sizes = counts.sum(axis=1)
    return np.divide(counts @ inverse, sizes, out=np.zeros(len(counts)), where=sizes > 0)


def check_speed(spec: Mapping[str, Any]) -> None:
    """One-line errors for the ``speed`` section's settings."""
    check_choice("speed", spec.get("name"), NAMES)
    if spec["name"] == "none":
        return
    check_choice("speed.assign", spec.get("assign"), ASSIGNMENTS)
    check_number("speed.seconds_per_sample", spec.get("seconds_per_sample"), 0.0)
    check_number("speed.link_seconds", spec.get("link_seconds"), 0.0)
    if spec["name"] == "lognormal":
        check_number("speed.sigma", spec.get("sigma"), 0.0)
        check_number("speed.link_sigma", spec.get("link_sigma"), 0.0)
    else:
        check_number("speed.slow_factor", spec.get("slow_factor"), 0.0, strict=True)
        check_number("speed.slow_fraction", spec.get("slow_fraction"), 0.0)
        fraction = float(spec["slow_fraction"])
        require(fraction <= 1, f"speed.slow_fraction must be <= 1, got {fraction}")
