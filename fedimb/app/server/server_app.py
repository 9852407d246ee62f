"""The Flower ServerApp: run config -> strategy -> rounds (both runtimes)."""

from __future__ import annotations

import logging
from typing import cast

from flwr.app import Context
from flwr.server import ServerApp, ServerAppComponents, ServerConfig
from flwr.server.compat import start_grid
from flwr.serverapp import Grid

from fedimb.app.configuration import components, transport
from fedimb.app.configuration.build import use_torch_threads
from fedimb.app.faults import injection as faults
from fedimb.app.privacy.secagg_fit import secure_fit
from fedimb.app.privacy.strategy import with_privacy
from fedimb.app.runtimes.prompt_grid import IN_MEMORY_POLL_INTERVAL, REPLY_POLL_INTERVAL, PromptGrid
from fedimb.app.server.round_loop import FedImbServer
from fedimb.app.server.run_context import ServerRun
from fedimb.core import events
from fedimb.core.client_state import remove_state_folder

logger = logging.getLogger(__name__)


def build_server(
    run_config, max_workers: int | None = None, overlap_evaluation: bool = True
) -> FedImbServer:
    """The run's server with its method's strategy; a failure is reported as one line
    to the front end, then raised. By default one worker per client (at most 256).
    With ``privacy=dp_*`` the strategy is behind Flower's DP wrapper (:mod:`.private_strategy`)."""
    try:
        cfg = transport.from_run_config(run_config)
        strategy = with_privacy(
            components.build_strategy(cfg.method.strategy, ServerRun.build(cfg)), cfg
        )
    except Exception as err:
        events.emit_error(err)
        raise
    return faults.server_class(cfg)(
        strategy,
        max_workers=max_workers or min(max(int(cfg.num_clients), 4), 256),
        overlap_evaluation=overlap_evaluation,
    )


def server_fn(context: Context) -> ServerAppComponents:
    server = build_server(context.run_config)
    cfg = server.strategy.run.cfg
    return ServerAppComponents(
        server=server,
        config=ServerConfig(
            num_rounds=server.strategy.total_rounds(),
            round_timeout=cfg.runtime.get("round_timeout"),
        ),
    )


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Flower's compatibility loop (``start_grid``) over :class:`PromptGrid`."""
    parts = server_fn(context)
    server = cast(FedImbServer, parts.server)
    use_torch_threads(server.strategy.run.cfg)
    in_memory = server.strategy.run.cfg.runtime.name == "simulation"
    interval = IN_MEMORY_POLL_INTERVAL if in_memory else REPLY_POLL_INTERVAL
    prompt = PromptGrid(grid, interval)
    server.secure_fit = secure_fit(server.strategy.run.cfg, prompt)  # secagg=secaggplus
    try:
        start_grid(grid=prompt, server=parts.server, config=parts.config)
    finally:  # the clients' state of this run (runtime.client_state=disk), if any
        remove_state_folder(context.run_id)
