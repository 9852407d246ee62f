"""Flower's own CLI against a local simulation SuperLink: ``flwr run`` of the packaged app,
as the integration tests that check it from the outside start it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fedimb.cli.federation.flwr_cli import flwr_home, write_connection
from fedimb.cli.federation.processes import SuperLink, executable, flower_env
from fedimb.cli.launch.flower_run import APP_DIR
from fedimb.core.events import parse_event


@contextmanager
def simulation_superlink(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A simulation SuperLink, ready, and a private Flower home whose connection names it:
    (home, connection), for :func:`flwr_run`."""
    with (
        flwr_home(None, base=tmp_path) as (home, connection),
        SuperLink(tmp_path / "superlink.log", simulation=True, env=flower_env(home)) as superlink,
    ):
        superlink.wait_ready()
        write_connection(home, connection, superlink.address)
        yield home, connection


def flwr_run(home: Path, connection: str, run_config: str) -> list[dict]:
    """The events of ``flwr run`` with ``--run-config run_config`` on three simulated nodes
    of one CPU each; the run must reach its end (else its output's tail says why)."""
    result = subprocess.run(
        [
            executable("flwr"),
            "run",
            str(APP_DIR),
            connection,
            "--stream",
            "--run-config",
            run_config,
            "--federation-config",
            "num-supernodes=3 client-resources-num-cpus=1",
        ],
        capture_output=True,
        text=True,
        env=flower_env(home),
        timeout=600,
    )
    events = [e for e in map(parse_event, result.stdout.splitlines()) if e]
    assert events and events[-1]["event"] == "end", result.stdout[-3000:]
    return events
