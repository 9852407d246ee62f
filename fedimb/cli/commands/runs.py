"""``fedimb certs``, ``local-federation``, ``resume``, ``attach``: start, continue or follow a run.

These subcommands (listed in :data:`fedimb.cli.commands.table.SUBCOMMANDS`) start a run or the
processes it runs on; each imports what it runs only when it is called, so that
``fedimb --help`` stays quick.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def certs_main(argv: list[str]) -> int:
    from fedimb.cli.federation.flwr_cli import register_node
    from fedimb.cli.federation.security import make_certificates, make_node_keys

    parser = argparse.ArgumentParser(
        prog="fedimb certs", description=certs_main.__doc__ or "Create certificates"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("certs"), help="output folder (default: certs)"
    )
    parser.add_argument(
        "--nodes", type=int, default=0, help="number of SuperNode key pairs to create"
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        help="name or IP address the SuperLink is reached at (repeatable); "
        "localhost and 127.0.0.1 are always included",
    )
    parser.add_argument(
        "--register",
        metavar="ADDRESS",
        help="register the SuperNode public keys in --out (<name>.pub) at the running SuperLink "
        "ADDRESS, over TLS with --out/ca.crt; files are created first only if ca.crt is missing",
    )
    args = parser.parse_args(argv)
    if args.nodes < 0:
        parser.error("--nodes must be >= 0")
    if not (args.register and (args.out / "ca.crt").exists()):
        paths = make_certificates(args.out, args.host)
        pairs = make_node_keys(args.out, args.nodes)
        print(
            f"CA certificate:      {paths['ca.crt']}  (give to every SuperNode and to flwr/fedimb)"
        )
        print(f"SuperLink cert/key:  {paths['server.pem']}, {paths['server.key']}")
        for private, public in pairs:
            print(f"SuperNode key pair:  {private} (secret, for that node)  {public} (register it)")
    if args.register:
        public_keys = sorted(args.out.glob("*.pub"))
        if not public_keys:
            parser.error(f"no SuperNode public keys (*.pub) in {args.out}")
        for public in public_keys:
            register_node(args.register, public, args.out / "ca.crt")
            print(f"registered {public.name} at {args.register}")
    elif args.nodes:
        print(
            "Register the public keys once the SuperLink runs: "
            f"fedimb certs --out {args.out} --register <address>"
        )
    print(args.out.resolve())
    return 0


certs_main.__doc__ = "Create a CA, a SuperLink certificate and SuperNode key pairs."


def local_federation_main(argv: list[str]) -> int:
    """Start a SuperLink and N SuperNodes here, run one experiment, stop them."""
    from fedimb.cli.federation.local import LocalFederation

    parser = argparse.ArgumentParser(
        prog="fedimb local-federation",
        description=local_federation_main.__doc__,
        epilog="Everything after the options is passed to fedimb as overrides, e.g. "
        "fedimb local-federation --nodes 3 --secure method=fedavg num_rounds=2",
    )
    parser.add_argument("--nodes", type=int, default=3, help="number of SuperNodes (= num_clients)")
    parser.add_argument("--secure", action="store_true", help="TLS and SuperNode authentication")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="folder for logs, keys and Flower state"
    )
    args, overrides = parser.parse_known_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be >= 1")
    from fedimb.cli.launch.flower_run import FLWR_BASE

    FLWR_BASE.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="local-federation-", dir=FLWR_BASE))
    with LocalFederation(workdir, args.nodes, secure=args.secure) as federation:
        mode = "TLS + SuperNode authentication" if args.secure else "insecure (local testing only)"
        print(
            f"[fedimb] SuperLink {federation.address} with {args.nodes} SuperNodes, {mode}; "
            f"logs in {workdir}",
            flush=True,
        )
        command = [
            sys.executable,
            "-m",
            "fedimb",
            *federation.runtime_overrides(),
            f"num_clients={args.nodes}",
            *overrides,
        ]
        run = subprocess.Popen(command)
        try:
            return run.wait()
        except (
            KeyboardInterrupt
        ) as stop:  # the run stops itself (its one line, its exit code), then the nodes
            run.send_signal(
                getattr(stop, "exit_code", 130) - 128
            )  # it ignores a second Ctrl-C from the terminal
            return run.wait()


def run_folder_and_overrides(
    argv: list[str], main: Callable[[list[str]], int], epilog: str, may_change: tuple[str, ...]
) -> tuple[Path, list[str]]:
    """The run folder and the overrides after it of ``fedimb resume|attach``; only
    settings that start with ``may_change`` may change."""
    parser = argparse.ArgumentParser(
        prog=f"fedimb {main.__name__.removesuffix('_main')}",
        description=main.__doc__,
        epilog=epilog,
    )
    parser.add_argument("run_dir", type=Path)
    args, overrides = parser.parse_known_args(argv)
    if not (args.run_dir / "config.yaml").is_file():
        parser.error(f"{args.run_dir} is not a run folder (no config.yaml)")
    if any(not o.startswith(may_change) for o in overrides):
        parser.error(f"only {' and '.join(p + '*' for p in may_change)} settings may change here")
    return args.run_dir, overrides


def resume_main(argv: list[str]) -> int:
    """Continue an interrupted run in its own folder from the ServerApp's last checkpoint."""
    from fedimb.cli.rundir.reader import run_folder_config

    run_dir, overrides = run_folder_and_overrides(
        argv,
        resume_main,
        "Overrides after the folder may change where it runs (runtime.*), e.g. a new SuperLink "
        "address, and switch off an injected fault (fault.*).",
        ("runtime.", "fault."),
    )
    cfg = run_folder_config(run_dir, overrides)  # checked before any class it names is imported
    cfg.resume = True
    from fedimb.cli.launch.experiment import run_experiment

    print(run_experiment(cfg, run_dir), flush=True)
    return 0


def attach_main(argv: list[str]) -> int:
    """Follow a deployed run that goes on without its front end (runtime.detach=true, an
    interrupted or lost front end) to its end, and fill in its run folder."""
    from fedimb.cli.commands.attach import attach_experiment

    run_dir, overrides = run_folder_and_overrides(
        argv,
        attach_main,
        "Overrides after the folder may change how the SuperLink is reached (runtime.*), e.g. "
        "runtime.address=HOST:PORT.",
        ("runtime.",),
    )
    print(attach_experiment(run_dir, overrides), flush=True)
    return 0
