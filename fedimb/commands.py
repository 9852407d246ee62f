"""Subcommands of ``fedimb`` besides running an experiment.

- ``fedimb certs``: CA, SuperLink certificate and SuperNode key pairs (secure deployment).
- ``fedimb local-federation``: start a SuperLink and N SuperNodes on this machine, run
  one experiment against them through the front end (``runtime=deployment``), stop them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from fedimb.launch import FLWR_BASE


def certs_main(argv: list[str]) -> int:
    from fedimb.security import make_certificates, make_node_keys

    parser = argparse.ArgumentParser(prog="fedimb certs", description=certs_main.__doc__ or "Create certificates")
    parser.add_argument("--out", type=Path, default=Path("certs"), help="output folder (default: certs)")
    parser.add_argument("--nodes", type=int, default=0, help="number of SuperNode key pairs to create")
    parser.add_argument("--host", action="append", default=[],
                        help="name or IP address the SuperLink is reached at (repeatable); "
                             "localhost and 127.0.0.1 are always included")
    args = parser.parse_args(argv)
    paths = make_certificates(args.out, args.host)
    pairs = make_node_keys(args.out, args.nodes)
    print(f"CA certificate:      {paths['ca.crt']}  (give to every SuperNode and to flwr/fedimb)")
    print(f"SuperLink cert/key:  {paths['server.pem']}, {paths['server.key']}")
    for private, public in pairs:
        print(f"SuperNode key pair:  {private} (secret, for that node)  {public} (register it)")
    if pairs:
        print("Register the public keys once the SuperLink runs: "
              "flwr supernode register <node>.pub <connection>")
    print(args.out.resolve())
    return 0


certs_main.__doc__ = "Create a CA, a SuperLink certificate and SuperNode key pairs."


def local_federation_main(argv: list[str]) -> int:
    """Start a SuperLink and N SuperNodes here, run one experiment, stop them."""
    from fedimb.local_federation import LocalFederation

    parser = argparse.ArgumentParser(
        prog="fedimb local-federation", description=local_federation_main.__doc__,
        epilog="Everything after the options is passed to fedimb as overrides, e.g. "
               "fedimb local-federation --nodes 3 --secure method=fedavg num_rounds=2",
    )
    parser.add_argument("--nodes", type=int, default=3, help="number of SuperNodes (= num_clients)")
    parser.add_argument("--secure", action="store_true", help="TLS and SuperNode authentication")
    parser.add_argument("--workdir", type=Path, default=None, help="folder for logs, keys and Flower state")
    args, overrides = parser.parse_known_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be >= 1")
    FLWR_BASE.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="local-federation-", dir=FLWR_BASE))
    with LocalFederation(workdir, args.nodes, secure=args.secure) as federation:
        mode = "TLS + SuperNode authentication" if args.secure else "insecure (local testing only)"
        print(f"[fedimb] SuperLink {federation.address} with {args.nodes} SuperNodes, {mode}; logs in {workdir}",
              flush=True)
        command = [sys.executable, "-m", "fedimb", *federation.runtime_overrides(), f"num_clients={args.nodes}",
                   *overrides]
        return subprocess.run(command).returncode


def resume_main(argv: list[str]) -> int:
    """Continue an interrupted run in its own folder from the ServerApp's last checkpoint."""
    from omegaconf import OmegaConf

    from fedimb.launch import run_experiment

    parser = argparse.ArgumentParser(
        prog="fedimb resume", description=resume_main.__doc__,
        epilog="Overrides after the folder may change where it runs (runtime.*), e.g. a new SuperLink address.",
    )
    parser.add_argument("run_dir", type=Path)
    args, overrides = parser.parse_known_args(argv)
    config_file = args.run_dir / "config.yaml"
    if not config_file.is_file():
        parser.error(f"{args.run_dir} is not a run folder (no config.yaml)")
    cfg = OmegaConf.load(config_file)
    if any(not o.startswith("runtime.") and not o.startswith("runtime=") for o in overrides):
        parser.error("only runtime.* settings may change when resuming")
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([o for o in overrides if o.startswith("runtime.")]))
    cfg.resume = True
    print(run_experiment(cfg, args.run_dir), flush=True)
    return 0


SUBCOMMANDS = {"certs": certs_main, "local-federation": local_federation_main, "resume": resume_main}
