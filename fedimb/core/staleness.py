"""Staleness functions of asynchronous aggregation: how much an update computed from a
global model ``staleness`` versions old still counts.

Xie et al., "Asynchronous Federated Optimization" (2019), §3 and §6: the update of a
client that started from version tau, arriving at version t, is weighted by s(t - tau):

- constant: s = 1;
- polynomial: s_a(t - tau) = (t - tau + 1)^(-a);
- hinge: s_{a,b}(t - tau) = 1 if t - tau <= b, else 1 / (a (t - tau - b) + 1).

FedBuff (Nguyen et al., AISTATS 2022, §3) uses s(tau) = 1 / sqrt(1 + tau): the polynomial
with a = 1/2. Every function gives a fresh update (staleness 0) the weight 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedimb.core.errors import check_choice, check_number

NAMES = ("constant", "polynomial", "hinge")


def staleness_weight(spec: Mapping[str, Any], staleness: int) -> float:
    """s(staleness) of the ``staleness`` section (``name``, ``a``, ``b``)."""
    if staleness < 0:
        raise ValueError(f"staleness must be >= 0, got {staleness}")
    name = spec["name"]
    if name == "constant":
        return 1.0
    a = float(spec["a"])
    if name == "polynomial":
        return float((staleness + 1) ** -a)
    if name == "hinge":
        b = int(spec["b"])
        return 1.0 if staleness <= b else 1.0 / (a * (staleness - b) + 1.0)
    raise ValueError(f"unknown staleness function '{name}'")


def check_staleness(spec: Mapping[str, Any], where: str) -> None:
    """One-line errors for an unknown function or a negative exponent or bound."""
    check_choice(f"{where}.name", spec.get("name"), NAMES)
    if spec["name"] != "constant":
        check_number(f"{where}.a", spec.get("a"), 0.0)
    if spec["name"] == "hinge":
        check_number(f"{where}.b", spec.get("b"), 0, integer=True)
