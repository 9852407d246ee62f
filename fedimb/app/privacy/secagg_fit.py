"""A round's fit step through Flower's SecAgg+ workflow (``secagg=secaggplus``).

Flower runs ``SecAggPlusWorkflow`` as the fit step of its ``DefaultWorkflow``, reading the
round, the global model, the strategy and the client manager from a ``LegacyContext``.
fedimb's round loop (:class:`fedimb.app.server.round_loop.FedImbServer`) keeps its own
loop, so :class:`SecureFit` builds that context for one round and runs the workflow's four
stages over the run's Grid: the strategy's ``configure_fit`` chooses the clients as ever,
the nodes exchange keys and send only masked vectors, and the strategy's ``aggregate_fit``
receives one reply per surviving client whose model is the unmasked sample-weighted mean
(Flower gives every reply that mean; no reply carries a client's own model). The method
therefore aggregates, records, checkpoints and evaluates as without SecAgg+.

Besides, per round: each instruction still names the client the server assigned its node
(where it does); the mean is cast back to the global model's dtypes (Flower dequantises to
float64); every node that dropped out of the protocol is a failure that names its client
and the stage; a round the protocol cannot finish (too few nodes left to reconstruct the
masks) keeps the global model with one note; the round's ``extra`` has each stage's seconds
(``secagg.<stage>``) and the clients whose models were summed (``secagg.summed``)."""

from __future__ import annotations

import time
from typing import Any

import flwr.compat.common.recorddict_compat as compat
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.common import Parameters, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server import ServerConfig
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
from flwr.server.workflow.secure_aggregation.secaggplus_workflow import WorkflowState
from flwr.serverapp import Grid
from omegaconf import DictConfig

from fedimb.app.nodes.node_proxy import ClientFailure
from fedimb.app.privacy import secagg

#: the protocol's stages, in order, as the round's record names them
STAGES = ("setup", "share_keys", "collect_masked_vectors", "unmask")


class StagedWorkflow(SecAggPlusWorkflow):
    """Flower's workflow, run stage by stage as its ``__call__`` runs them, keeping what a
    round's record needs: the stage it stopped at, each stage's seconds, its state."""

    def run(self, grid: Grid, context: LegacyContext) -> tuple[str | None, WorkflowState]:
        """The four stages; (the stage that stopped the protocol or None, its state)."""
        state = WorkflowState()
        self.seconds: dict[str, float] = {}
        for name in STAGES:
            began = time.perf_counter()
            done = getattr(self, f"{name}_stage")(grid, context, state)
            self.seconds[name] = time.perf_counter() - began
            if not done:
                return name, state
        return None, state


class ReplyLog(Grid):
    """The run's Grid, noting why each node's reply was an error (the workflow keeps the
    errors without their node)."""

    def __init__(self, grid: Grid):
        self.inner = grid
        self.errors: dict[int, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_message(self, *args, **kwargs) -> Message:
        return self.inner.create_message(*args, **kwargs)

    def get_node_ids(self):
        return self.inner.get_node_ids()

    def push_messages(self, messages):
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids):
        return self.inner.pull_messages(message_ids)

    def set_run(self, run) -> None:
        self.inner.set_run(run)

    @property
    def run(self):
        return self.inner.run

    def send_and_receive(self, messages, *, timeout: float | None = None):
        replies = list(self.inner.send_and_receive(messages, timeout=timeout))
        for reply in replies:
            if reply.has_error():
                self.errors[reply.metadata.src_node_id] = str(reply.error.reason).strip()
        return replies


class StrategyView:
    """The method's strategy as the workflow calls it: instructions addressed to their
    clients, the mean in the global model's dtypes, named failures, the outcome kept."""

    def __init__(self, strategy, layout: list[Any], grid: ReplyLog):
        self.strategy = strategy
        self.layout = layout  # the global model's dtypes
        self.grid = grid
        self.instructions: dict[int, Any] = {}  # node id -> its client's proxy
        self.failures: list[Any] = []
        self.outcome: tuple[Parameters | None, dict] | None = None
        self.results: list = []
        self.stopped: str | None = None  # the stage that stopped the protocol
        self.survivors: set[int] = set()  # there, the nodes still in it (none of them failed)

    def configure_fit(self, server_round, parameters, client_manager):
        instructions = self.strategy.configure_fit(
            server_round=server_round, parameters=parameters, client_manager=client_manager
        )
        addressed = []
        for proxy, ins in instructions:
            address = getattr(proxy, "addressed", None)
            addressed.append((proxy, address(ins) if address is not None else ins))
            self.instructions[proxy.node_id] = proxy
        return addressed

    def aggregate_fit(self, server_round, results, failures):
        if results:
            arrays = parameters_to_ndarrays(results[0][1].parameters)
            mean = ndarrays_to_parameters(
                [a.astype(dtype, copy=False) for a, dtype in zip(arrays, self.layout)]
            )
            for _, res in results:
                res.parameters = mean
        self.results = list(results)
        self.failures = self.dropped(self.survivors or {proxy.node_id for proxy, _ in results})
        before = self.strategy.current_weights
        parameters, metrics = self.strategy.aggregate_fit(server_round, results, self.failures)
        log = self.strategy.round_log
        if parameters is not None and log.succeeded < len(results):
            # a reply the method rejects (its sample count, its metrics) is in the sum anyway
            self.strategy.current_weights = before
            log.note(
                f"{len(results) - log.succeeded} of the {len(results)} clients summed by SecAgg+ "
                "were rejected, and the masked sum holds their models: global model kept"
            )
            parameters = None
        self.outcome = (parameters, metrics)
        return self.outcome

    def dropped(self, survivors: set[int]) -> list[ClientFailure]:
        """A failure naming the client and the stage for every node that left the protocol."""
        failed = []
        for node_id, proxy in self.instructions.items():
            if node_id in survivors:
                continue
            pid = getattr(proxy, "partition_id", proxy.cid)
            why = self.grid.errors.get(node_id) or (
                f"the protocol stopped at {self.stopped}" if self.stopped else "no reply in time"
            )
            failed.append(ClientFailure(f"client {pid} on node {node_id}: left SecAgg+ ({why})"))
        return failed


class SecureFit:
    """The fit step of :class:`~fedimb.app.server.round_loop.FedImbServer` under SecAgg+,
    over ``grid`` (the ServerApp's; the in-process runtime's loopback)."""

    def __init__(self, cfg: DictConfig, grid: Grid):
        self.cfg = cfg
        self.grid = grid
        self.settings = secagg.settings_of(cfg)

    def __call__(self, server, server_round: int, timeout: float | None):
        """Flower's ``fit_round`` contract: (parameters, metrics, (results, failures)), or
        None where no client was selected."""
        strategy = server.strategy
        layout = [a.dtype for a in parameters_to_ndarrays(server.parameters)]
        grid = ReplyLog(self.grid)
        view = StrategyView(strategy, layout, grid)
        context = LegacyContext(
            Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}),
            config=ServerConfig(num_rounds=server_round),
            strategy=view,  # type: ignore[arg-type]
            client_manager=server.client_manager(),
        )
        context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord(
            {Key.CURRENT_ROUND: server_round}
        )
        context.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
            server.parameters, keep_input=True
        )
        flow = StagedWorkflow(**secagg.workflow_arguments(self.settings, timeout))
        stopped, state = flow.run(grid, context)
        if not view.instructions:  # no client this round: no fit step, as without SecAgg+
            return None
        log = strategy.round_log
        log.extra.update({f"secagg.{name}": s for name, s in flow.seconds.items()})
        self._note_weights(log, view.results)
        if view.outcome is None:  # stopped before the mean: the strategy sees only failures
            # a lone client was never contacted (Flower's workflow needs two): it did not fail
            alone = len(view.instructions) < 2
            view.stopped = stopped
            view.survivors = set(view.instructions if alone else state.active_node_ids)
            log.note(self._why_stopped(stopped, state, len(view.instructions)))
            view.aggregate_fit(server_round, [], [])
        log.extra["secagg.summed"] = len(view.results)
        log.weight_diversity = None  # the server never holds the models it would compare
        parameters, metrics = view.outcome or (None, {})
        return parameters, metrics, (view.results, view.failures)

    def _why_stopped(self, stopped: str | None, state: WorkflowState, sampled: int) -> str:
        if sampled < 2:
            return (
                f"secagg=secaggplus needs at least 2 clients in a round, this one had {sampled}: "
                "global model kept"
            )
        return (
            f"secagg=secaggplus stopped at stage {stopped}: {len(state.active_node_ids)} of "
            f"{sampled} nodes left, too few to reconstruct the masks (reconstruction threshold "
            f"{state.threshold}): global model kept"
        )

    def _note_weights(self, log, results) -> None:
        """A client whose sample count exceeds max_weight scales its model beyond 1, where
        ``clipping_range`` may clip it: say so, once per round."""
        heavy = [
            res.num_examples for _, res in results if res.num_examples > self.settings.max_weight
        ]
        if heavy:
            log.note(
                f"{len(heavy)} client(s) weigh more than "
                f"secagg.max_weight={self.settings.max_weight:g} "
                f"(up to {max(heavy)} samples): their models may be clipped to clipping_range"
            )


def secure_fit(cfg: DictConfig, grid: Grid) -> SecureFit | None:
    """The run's SecAgg+ fit step over ``grid``, or None without ``secagg``."""
    return SecureFit(cfg, grid) if secagg.enabled(cfg) else None
