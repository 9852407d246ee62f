"""Which clients a round trains: discovering which node serves which client (once, then
every round for nodes that come and go) and the seeded sample over partition ids (a part
of :class:`strategies.base.BaseStrategy`; the availability model is applied after it)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from flwr.server.client_manager import ClientManager

from fedimb.app.configuration.runtime_rules import rejoin_timeout
from fedimb.app.nodes.registry import ClientRegistry
from fedimb.app.server.run_context import ServerRun
from fedimb.core import events
from strategies.base.round_log import RoundLog


class SamplingHost(Protocol):
    """What :class:`ClientSampling` reads of the strategy it is part of (its own methods
    that call one another are listed too)."""

    run: ServerRun
    registry: ClientRegistry
    round_log: RoundLog
    #: whether the first discovery (which waits for every client) is done
    clients_discovered: bool

    def trainable_clients(self) -> list[int]: ...


class ClientSampling:
    """Discovery and sampling of the clients a round trains."""

    def discover_clients(self: SamplingHost, client_manager: ClientManager) -> None:
        """Which node serves which client. The first call waits for every client (up to
        ``runtime.connect_timeout``; null: as long as it takes) and reports the clients
        that never joined and the clients that bring their own data; later calls take
        whoever is connected, after waiting up to ``runtime.rejoin_timeout`` seconds
        (deployment; 0 by default) for every node to be connected (nodes that restart or
        come back from a lost link)."""
        runtime = self.run.cfg.runtime
        rejoin = rejoin_timeout(self.run.cfg)
        nodes = self.registry.nodes  # one per client, or the simulation's pool
        if self.clients_discovered:
            wait, timeout = (nodes if rejoin else 0), rejoin
        else:
            wait, timeout = nodes, runtime.connect_timeout
        self.registry.refresh(client_manager, wait_for=wait, timeout=timeout)
        for refusal in self.registry.take_refusals():  # a bad or duplicate identity claim
            self.round_log.note(refusal)
        if self.clients_discovered:
            absent = self.run.num_clients - len(self.registry.partition_ids())
            if rejoin and absent > 0:
                self.round_log.note(
                    f"{absent} of {self.run.num_clients} clients not connected after waiting "
                    f"up to {rejoin:g} s (runtime.rejoin_timeout) for their nodes to rejoin"
                )
            return
        # the nodes that serve the clients: one each, or the simulation's pool (runtime.nodes)
        events.emit("nodes", connected=client_manager.num_available(), clients=self.run.num_clients)
        missing = self.run.num_clients - len(self.registry.partition_ids())
        if missing > 0:
            unstarted = list(self.registry.unstarted_nodes(client_manager).values())
            events.emit_clients_lost(self.run.num_clients, lost_client_reasons(missing, unstarted))
        own = [pid for pid in self.registry.partition_ids() if self.registry.has_own_data(pid)]
        if own:
            self.round_log.note(
                f"clients {', '.join(map(str, own))} bring their own data: their sample counts "
                "are bounded by the sizes they announced on joining, which the server cannot check"
            )
        self.clients_discovered = True

    def trainable_clients(self: SamplingHost) -> list[int]:
        """Connected clients (partition ids) that hold training samples."""
        empty = self.run.empty_clients
        pids = self.registry.partition_ids()
        return [pid for pid in pids if pid not in empty] if empty else pids

    def sample_clients(self: SamplingHost, server_round: int) -> list[int]:
        """Seeded sample of ``fraction_fit`` of the connected clients with training
        samples (partition ids), without replacement: uniform, or with ``sampling=by_size``
        with probability proportional to their training samples (:func:`sampling_probabilities`)."""
        known = self.trainable_clients()
        if not known:
            return []
        cfg = self.run.cfg
        k = max(
            int(cfg.min_fit_clients), int(round(float(cfg.fraction_fit) * self.run.num_clients))
        )
        sampling = str(cfg.sampling)
        sizes = self.run.data.partition.counts[known].sum(axis=1) if sampling == "by_size" else None
        return draw_clients(self.run.seed, server_round, known, k, sampling, sizes)


def lost_client_reasons(missing: int, unstarted: list[str]) -> dict[str, int]:
    """Why ``missing`` clients never joined: one per connected node whose ClientApp failed
    (``unstarted``: each node's reason; more such nodes than missing clients are extra
    nodes), the rest did not connect. Each cause once, with how many clients it took."""
    reasons: dict[str, int] = {}
    for why in unstarted[:missing]:
        reasons[f"could not start: {why}"] = reasons.get(f"could not start: {why}", 0) + 1
    silent = missing - sum(reasons.values())
    if silent > 0:
        reasons["did not connect"] = silent
    return reasons


def draw_clients(
    seed: int,
    server_round: int,
    candidates: list[int],
    k: int,
    sampling: str,
    sizes: np.ndarray | None = None,
) -> list[int]:
    """The ``k`` (at most all) of ``candidates`` that round ``server_round`` trains, without
    replacement, seeded by ``seed`` and the round alone; ``sizes`` are the candidates'
    training samples (needed for ``sampling=by_size`` only)."""
    rng = np.random.default_rng([seed, server_round, 0x5A3])
    p = sampling_probabilities(sampling, sizes)
    return sorted(
        int(c) for c in rng.choice(candidates, size=min(k, len(candidates)), replace=False, p=p)
    )


def sampling_probabilities(sampling: str, sizes: np.ndarray | None) -> np.ndarray | None:
    """Each client's chance to be drawn next: None (uniform) for ``uniform``; for
    ``by_size``, n_k / Σ n over the candidates — the q-FFL authors' release samples so
    (``--sampling=2``, "weights of sampling devices proportional to the number of local
    data points") and then averages the updates uniformly, as q-FedAvg's update does, so
    that q = 0 optimises the data-weighted objective Σ_k (n_k/n) F_k of the paper's eq. (2)."""
    if sampling == "uniform":
        return None
    assert sizes is not None, "sampling=by_size needs the candidates' sizes"
    sizes = np.asarray(sizes, dtype=np.float64)
    return sizes / sizes.sum()
