"""A federation in one process: the real strategy and clients without Flower's runtime
(no SuperLink, no Ray, no messages).

- ``runtime=in_process`` runs a whole experiment this way: fedimb's server loop
  (:class:`fedimb.app.server.round_loop.FedImbServer`) drives :class:`InProcessNode`
  proxies that call the method's client directly, one client after the other. Its events
  and run folder are those of a simulation. It needs no Ray and uses one core, so several
  runs (seeds, methods of a benchmark) can go side by side on a small machine.
- :class:`InProcessFederation` drives the same loop round by round (unit tests, the
  per-method benchmarks)."""

from __future__ import annotations

import contextlib
import io
import logging
import secrets
import sys
import time
import weakref
from collections.abc import Callable

from flwr.app import Context, RecordDict
from flwr.common import Code, GetPropertiesRes, Status
from flwr.server.client_proxy import ClientProxy
from omegaconf import DictConfig

from fedimb.app.configuration import compose as config
from fedimb.app.configuration import transport
from fedimb.app.faults import injection as faults
from fedimb.app.nodes.client_app import run_client, timed_client
from fedimb.app.privacy.client_mods import Mod, client_mod, fit_through_mod
from fedimb.app.privacy.secagg_fit import secure_fit
from fedimb.app.privacy.strategy import with_privacy
from fedimb.app.runtimes.loopback_grid import LoopbackGrid, node_app
from fedimb.core import events, protocol
from fedimb.core.client_state import remove_state_folder

OK = Status(code=Code.OK, message="ok")


def _within(timeout: float | None, call):
    """``call()``, failed as a straggler when it took longer than the round timeout. The
    clients of the process share one model, so a late one is waited for, then discarded
    as the other runtimes discard it."""
    start = time.monotonic()
    result = call()
    if timeout is not None and time.monotonic() - start > timeout:
        raise TimeoutError(f"no reply within the round timeout ({timeout:g} s)")
    return result


class InProcessNode(ClientProxy):
    """A node whose client runs in this process. Its ``Context`` (and so the client's
    state) lives as long as the node. Without ``make_client`` it only answers the
    partition-id query with made-up counts (strategy unit tests). ``fit_mod``: the Flower
    client mod its fit instructions go through, as a ClientApp's would (client-side DP,
    :mod:`fedimb.app.privacy.client_mods`)."""

    def __init__(
        self,
        cid: str,
        partition_id: int,
        make_client=None,
        fit_mod: Mod | None = None,
        run_id: int = 0,
    ):
        super().__init__(cid)
        self.partition_id = partition_id
        #: its place among the nodes (:func:`fedimb.app.nodes.registry.node_order`): the server
        #: that assigns clients gives this node the client it serves
        self.node_id = partition_id
        self.make_client = make_client  # node -> the method's client for this node
        self.fit_mod = fit_mod
        self.context = Context(
            run_id=run_id, node_id=0, node_config={}, state=RecordDict(), run_config={}
        )

    def _client(self):
        if self.make_client is None:
            raise NotImplementedError("this node has no client")
        return self.make_client(self)

    def get_properties(self, ins, timeout, group_id):
        if self.make_client is None:
            return GetPropertiesRes(
                status=OK,
                properties={protocol.PARTITION_ID: self.partition_id, protocol.NUM_EXAMPLES: 10},
            )
        return self._client().get_properties(ins)

    def get_parameters(self, ins, timeout, group_id):
        raise NotImplementedError

    def fit(self, ins, timeout, group_id):
        return _within(
            timeout, lambda: fit_through_mod(self.fit_mod, self._client().fit, ins, self.context)
        )

    def evaluate(self, ins, timeout, group_id):
        return _within(timeout, lambda: self._client().evaluate(ins))

    def reconnect(self, ins, timeout, group_id):
        raise NotImplementedError


class InProcessFederation:
    """A federation driven round by round in this process, through the same round loop
    (:meth:`fedimb.app.server.round_loop.FedImbServer.run_round`) as every runtime: the unit
    tests and the per-method benchmarks. Checkpointing is off unless asked for."""

    def __init__(self, overrides: list[str]):
        from fedimb.app.server.server_app import build_server

        cfg = config.compose(["checkpoint.enabled=false", *overrides])
        self.server = build_server({"config": transport.encode(cfg)}, max_workers=1)
        self.strategy = self.server.strategy
        self.run = self.strategy.run
        self.cfg = self.run.cfg
        self.manager = self.server.client_manager()
        run_id = new_run_id()  # its clients' state on disk: removed with the federation
        weakref.finalize(self, remove_state_folder, run_id)
        self.nodes = [
            InProcessNode(f"node-{pid}", pid, self.flower_client, client_mod(self.cfg), run_id)
            for pid in range(int(self.cfg.num_clients))
        ]
        for node in self.nodes:
            self.manager.register(node)
        self.server.secure_fit = secure_fit(self.cfg, loopback(self.cfg, self.nodes, run_id))
        self.server.start()

    @property
    def parameters(self):
        return self.server.parameters

    def client(self, node: InProcessNode):
        """The method's NumPyClient for ``node`` (tests drive it directly)."""
        return run_client(self.cfg, node.context, node.partition_id)

    def flower_client(self, node: InProcessNode):
        """The client as every runtime runs it, timing its phases (no start-up of its own:
        its process is the server's)."""
        return timed_client(self.cfg, node.context, node.partition_id)

    def round(self, server_round: int) -> dict:
        """One round, as every runtime runs it; the round's record."""
        record = self.server.run_round(server_round)
        assert record is not None  # without overlap a round reports before it returns
        return record


class _LineWriter(io.TextIOBase):
    """A text stream that hands every complete line to ``on_line`` as plain text
    (:func:`fedimb.core.events.plain_text`: what the process prints, a client's words
    among them, is never an event), which itself prints to ``console`` (the front end's
    progress lines must not come back here). :meth:`deliver` hands on a line as it is."""

    def __init__(self, on_line: Callable[[str], None], console):
        self.on_line = on_line
        self.console = console
        self._pending = ""

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        for line in lines:
            self.deliver(events.plain_text(line))
        return len(text)

    def deliver(self, line: str) -> None:
        with contextlib.redirect_stdout(self.console):
            self.on_line(line)

    def flush_pending(self) -> None:
        if self._pending:
            self.deliver(events.plain_text(self._pending))
            self._pending = ""


class _LogToWriter(logging.Handler):
    def __init__(self, writer: _LineWriter):
        super().__init__()
        self.writer = writer
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.writer.deliver(events.plain_text(self.format(record)))


@contextlib.contextmanager
def _server_output_to(writer: _LineWriter):
    """The run's events (:func:`fedimb.core.events.emit`, through its sink) and, as plain
    text, what the process prints and logs (Flower's and fedimb's log records, a client's
    prints) go to ``writer``, as the ServerApp's output goes to ``flwr.log`` in the
    Flower runtimes, instead of the console."""
    loggers = [logging.getLogger(), logging.getLogger("flwr")]
    saved = [(lg, lg.handlers[:], lg.propagate) for lg in loggers]
    handler = _LogToWriter(writer)
    try:
        for lg in loggers:
            lg.handlers = [handler] if lg.name == "root" else []
            lg.propagate = lg.name != "root"
        with contextlib.redirect_stdout(writer), events.to_sink(writer.deliver):
            yield
    finally:
        for lg, handlers, propagate in saved:
            lg.handlers, lg.propagate = handlers, propagate
        writer.flush_pending()


def run_in_process(cfg: DictConfig, on_line: Callable[[str], None], strategy=None) -> int:
    """Run the experiment ``cfg`` (``runtime=in_process``) with fedimb's round loop and
    one in-process node per client; its events and, as plain text, every line the process
    prints or logs go to ``on_line``. Returns 0, or 1 after reporting an error event.
    ``strategy``: the run's strategy if the caller built it already (the front end does).

    The configuration makes the same round trip through the run config as in the Flower
    runtimes, so server and clients see exactly what they would see there."""
    import traceback

    from fedimb.app.configuration.build import use_torch_threads
    from fedimb.app.server.server_app import build_server

    use_torch_threads(cfg)
    run_config = {"config": transport.encode(cfg)}
    with _server_output_to(_LineWriter(on_line, sys.stdout)):
        try:
            # one client at a time: the clients of a process share one model object
            server = (
                faults.server_class(cfg)(
                    with_privacy(strategy, cfg), max_workers=1, overlap_evaluation=False
                )
                if strategy is not None
                else build_server(run_config, max_workers=1, overlap_evaluation=False)
            )
        except Exception:  # build_server has reported it
            return 1
        run_cfg = transport.from_run_config(run_config)
        run_id = new_run_id()
        nodes = [
            InProcessNode(
                f"in-process-{pid}",
                pid,
                lambda node: timed_client(run_cfg, node.context, node.partition_id),
                client_mod(run_cfg),
                run_id,
            )
            for pid in range(int(run_cfg.num_clients))
        ]
        for node in nodes:
            server.client_manager().register(node)
        server.secure_fit = secure_fit(run_cfg, loopback(run_cfg, nodes, run_id))
        try:
            server.fit(server.strategy.total_rounds(), timeout=run_cfg.runtime.get("round_timeout"))
        except Exception:  # the loop has reported it as an error event, as the ServerApp's does
            traceback.print_exc(file=sys.stdout)
            return 1
        finally:
            remove_state_folder(run_id)
    return 0


def loopback(cfg: DictConfig, nodes: list[InProcessNode], run_id: int) -> LoopbackGrid:
    """The nodes as a Grid of ClientApps in this process (``secagg=secaggplus``)."""

    def app_of(node: InProcessNode):
        def client_fn(context: Context):
            return node._client()

        return node_app(cfg, client_fn)

    return LoopbackGrid({node.node_id: (app_of(node), node.context) for node in nodes}, run_id)


def new_run_id() -> int:
    """A run id of its own for an in-process run (as Flower gives each run one): its
    clients' state on disk (``runtime.client_state=disk``) is this run's alone."""
    return secrets.randbits(63)
