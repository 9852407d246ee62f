"""``fedimb supernode``: ``flower-supernode`` with the warm ClientApp launcher beside it.

What a node process runs (the edge images' entry point). It starts the node's worker
(:mod:`fedimb.cli.federation.node_worker`), then becomes the SuperNode; kept apart from the worker,
which the SuperNode processes of :mod:`fedimb.cli.federation.processes` start too.
"""

from __future__ import annotations

import os
import subprocess

from fedimb.cli.federation.node_worker import worker_arguments
from fedimb.cli.federation.processes import executable
from fedimb.core.errors import ConfigError


def _option(argv: list[str], name: str, default: str) -> str:
    """The value of ``--name value`` or ``--name=value`` in ``argv``; the last one where it
    is given twice, as flower-supernode's parser takes it (an image's entry point names
    ``--port``, its user may name another)."""
    value = default
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def supernode_main(argv: list[str]) -> int:
    """``fedimb supernode ARGS``: ``flower-supernode ARGS --isolation process`` with this
    node's worker. The worker starts first, watching this process, which then becomes
    the SuperNode (exec): signals reach the SuperNode directly, the worker follows it."""
    if any(arg in ("-h", "--help", "-V", "--version") for arg in argv):
        return supernode_help(argv)
    if not hasattr(os, "fork"):
        raise ConfigError(
            "fedimb supernode forks its ClientApps, which this system cannot; run flower-supernode"
        )
    if any(arg == "--isolation" or arg.startswith("--isolation=") for arg in argv):
        raise ConfigError(
            "--isolation is set by fedimb supernode (process, with its worker); "
            "run flower-supernode itself for another isolation mode"
        )
    if any(arg.startswith("--ssl-") for arg in argv):
        raise ConfigError(
            "the worker reaches the Runtime API over the loopback interface "
            "without TLS; run flower-supernode itself to serve it with --ssl-*"
        )
    from flwr.supercore.constant import SUPERNODE_UVICORN_DEFAULT_PORT, UVICORN_DEFAULT_HOST

    host = _option(argv, "--host", UVICORN_DEFAULT_HOST)
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]", "") else host
    port = _option(argv, "--port", str(SUPERNODE_UVICORN_DEFAULT_PORT))
    node = executable("flower-supernode")
    subprocess.Popen(worker_arguments(f"{host}:{port}", os.getpid()))
    os.execv(node, [node, *argv, "--isolation", "process"])
    return 1  # not reached


def supernode_help(argv: list[str]) -> int:
    """``fedimb supernode --help`` (or ``--version``): flower-supernode's own parser
    answers, and nothing starts (flower-supernode would log its start line first)."""
    from flwr.supernode.cli.flower_supernode import _parse_args_run_supernode

    parser = _parse_args_run_supernode()
    parser.prog = "fedimb supernode"
    try:
        parser.parse_args(argv)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0
    return 0
