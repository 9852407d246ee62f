"""Rounds whose clients are called in turn in the server's own thread, where the server has
one worker (``runtime=in_process``, whose clients share its process).

Why not Flower's ``fit_clients``: it runs even one worker in a new thread each round, and
torch's work in two threads of one process is slow once the threads outnumber the cores:
libgomp (torch's OpenMP) gives every thread a team of its own and lets waiting threads
sleep instead of spinning between parallel regions (docs/benchmarks/performance.md, "One
process", has the measurements).
"""

from __future__ import annotations

from logging import INFO
from typing import Any

from flwr.common import Code, EvaluateIns, FitIns, Parameters, Scalar
from flwr.common.logger import log
from flwr.server import Server
from flwr.server.client_proxy import ClientProxy


def call_in_turn(
    method: str,
    instructions: list[tuple[ClientProxy, FitIns]] | list[tuple[ClientProxy, EvaluateIns]],
    timeout: float | None,
    group_id: int,
) -> tuple[list[tuple[ClientProxy, Any]], list[Any]]:
    """Each client's ``fit`` or ``evaluate`` reply, one after the other, sorted as Flower
    sorts them: a reply with status OK is a result; any other reply, or an exception the
    call raised, is a failure."""
    results: list[tuple[ClientProxy, Any]] = []
    failures: list[Any] = []
    for proxy, ins in instructions:
        try:
            reply = getattr(proxy, method)(ins, timeout, group_id)
        except Exception as err:  # Flower counts a raised error as the client's failure
            failures.append(err)
            continue
        (results if reply.status.code == Code.OK else failures).append((proxy, reply))
    return results, failures


class ClientsInTurn(Server):
    """Flower's server, but with one worker its rounds call their clients in its own
    thread (:func:`call_in_turn`), logging what Flower's rounds log; with more workers,
    Flower's thread pool as before."""

    def fit_round(
        self, server_round: int, timeout: float | None
    ) -> tuple[Parameters | None, dict[str, Scalar], tuple[list, list]] | None:
        if self.max_workers != 1:
            return super().fit_round(server_round, timeout)
        return self._round_in_turn("fit", server_round, timeout)

    def evaluate_round(
        self, server_round: int, timeout: float | None
    ) -> tuple[float | None, dict[str, Scalar], tuple[list, list]] | None:
        if self.max_workers != 1:
            return super().evaluate_round(server_round, timeout)
        return self._round_in_turn("evaluate", server_round, timeout)

    def _round_in_turn(self, kind: str, server_round: int, timeout: float | None) -> Any:
        """The strategy's ``configure_<kind>``, its clients in turn, its ``aggregate_<kind>``."""
        configure = getattr(self.strategy, f"configure_{kind}")
        instructions = configure(server_round, self.parameters, self._client_manager)
        if not instructions:
            log(INFO, "configure_%s: no clients selected, skipping", kind)
            return None
        log(
            INFO,
            "configure_%s: strategy sampled %s clients (out of %s)",
            kind,
            len(instructions),
            self._client_manager.num_available(),
        )
        results, failures = call_in_turn(kind, instructions, timeout, server_round)
        log(
            INFO,
            "aggregate_%s: received %s results and %s failures",
            kind,
            len(results),
            len(failures),
        )
        aggregate = getattr(self.strategy, f"aggregate_{kind}")
        return (*aggregate(server_round, results, failures), (results, failures))
