"""Event lines as a ServerApp prints them, for tests that feed a run recorder by hand."""

from __future__ import annotations

from fedimb.core.events import format_event


def start_event(*, num_parameters: int, num_clients: int, num_rounds: int) -> str:
    """The start line of a FedAvg run of that size, counted in Flower rounds."""
    return format_event(
        "start",
        method="fedavg",
        num_parameters=num_parameters,
        num_clients=num_clients,
        num_rounds=num_rounds,
        round_unit="Flower round",
    )
