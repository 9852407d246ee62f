"""The Flower ServerApp: run config -> strategy -> rounds (both runtimes)."""

from __future__ import annotations

import logging

from flwr.app import Context
from flwr.server import ServerApp, ServerAppComponents, ServerConfig

from fedimb import config, report
from fedimb.errors import FedimbError
from fedimb.server import FedImbServer
from fedimb.server_run import ServerRun

logger = logging.getLogger(__name__)


def server_fn(context: Context) -> ServerAppComponents:
    try:
        cfg = config.from_run_config(context.run_config)
        run = ServerRun.build(cfg)
        strategy = config.build_component(cfg.method.strategy, run=run)
    except Exception as err:  # reported as one line to the front end, then raised
        report.emit("error", message=str(err) if isinstance(err, FedimbError) else f"{type(err).__name__}: {err}")
        raise
    server = FedImbServer(strategy, max_workers=min(max(int(cfg.num_clients), 4), 256))
    timeout = cfg.runtime.get("round_timeout")
    return ServerAppComponents(
        server=server,
        config=ServerConfig(num_rounds=strategy.total_rounds(), round_timeout=timeout),
    )


app = ServerApp(server_fn=server_fn)
