"""Subcommands of ``fedimb`` besides running an experiment.

- ``fedimb certs``: CA, SuperLink certificate and SuperNode key pairs (secure deployment),
  and registration of the public keys at a running SuperLink (``--register``).
- ``fedimb resume``: continue an interrupted run from the server's last checkpoint.
- ``fedimb attach``: follow a deployed run that went on without its front end.
- ``fedimb local-federation``: start a SuperLink and N SuperNodes on this machine, run
  one experiment against them through the front end (``runtime=deployment``), stop them.
- ``fedimb report``: one comparison table and accuracy plot over run and sweep folders
  (or tables written by ``fedimb export``).
- ``fedimb export``: every completed run's metrics as one tidy Parquet or CSV table.
- ``fedimb supernode``: ``flower-supernode`` with a warm ClientApp launcher
  (:mod:`fedimb.cli.node_worker`).
- ``fedimb diagnose``: the label imbalance of a data set + partition, and which methods
  target it.
- ``fedimb list``: a config group's choices (:mod:`fedimb.cli.listing`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple


def certs_main(argv: list[str]) -> int:
    from fedimb.cli.local_federation import register_node
    from fedimb.cli.security import make_certificates, make_node_keys

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
            f"Register the public keys once the SuperLink runs: fedimb certs --out {args.out} --register <address>"
        )
    print(args.out.resolve())
    return 0


certs_main.__doc__ = "Create a CA, a SuperLink certificate and SuperNode key pairs."


def local_federation_main(argv: list[str]) -> int:
    """Start a SuperLink and N SuperNodes here, run one experiment, stop them."""
    from fedimb.cli.local_federation import LocalFederation

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
    from fedimb.cli.launch import FLWR_BASE

    FLWR_BASE.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="local-federation-", dir=FLWR_BASE))
    with LocalFederation(workdir, args.nodes, secure=args.secure) as federation:
        mode = "TLS + SuperNode authentication" if args.secure else "insecure (local testing only)"
        print(
            f"[fedimb] SuperLink {federation.address} with {args.nodes} SuperNodes, {mode}; logs in {workdir}",
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
    from omegaconf import OmegaConf

    from fedimb.cli.launch import run_experiment

    run_dir, overrides = run_folder_and_overrides(
        argv,
        resume_main,
        "Overrides after the folder may change where it runs (runtime.*), e.g. a new SuperLink "
        "address, and switch off an injected fault (fault.*).",
        ("runtime.", "fault."),
    )
    cfg = OmegaConf.merge(
        OmegaConf.load(run_dir / "config.yaml"), OmegaConf.from_dotlist(overrides)
    )
    cfg.resume = True
    print(run_experiment(cfg, run_dir), flush=True)
    return 0


def attach_main(argv: list[str]) -> int:
    """Follow a deployed run that goes on without its front end (runtime.detach=true, an
    interrupted or lost front end) to its end, and fill in its run folder."""
    from fedimb.cli.launch import attach_experiment

    run_dir, overrides = run_folder_and_overrides(
        argv,
        attach_main,
        "Overrides after the folder may change how the SuperLink is reached (runtime.*), e.g. "
        "runtime.address=HOST:PORT.",
        ("runtime.",),
    )
    print(attach_experiment(run_dir, overrides), flush=True)
    return 0


def split_list(text: str) -> list[str]:
    """The items of a comma-separated command-line value."""
    return [item for item in text.split(",") if item]


def report_main(argv: list[str]) -> int:
    """One comparison table (mean ± std over seeds) and accuracy-vs-round plot over every
    completed run in the given run or sweep folders, or in tables written by fedimb export."""
    from fedimb.cli.report import write_report

    parser = argparse.ArgumentParser(prog="fedimb report", description=report_main.__doc__)
    parser.add_argument(
        "folders",
        type=Path,
        nargs="+",
        help="run folders, sweep folders or any folder above them, or tables written by "
        "fedimb export (.parquet, .csv)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where report.md and accuracy.png go (default: <first folder>/report, or report/ "
        "beside a first input that is a table)",
    )
    parser.add_argument("--title", default="Comparison")
    parser.add_argument(
        "--mean-over-rounds",
        default="",
        metavar="METRICS",
        help="comma-separated 'extra' metrics to add as columns averaged over rounds "
        "(e.g. mediator_kl)",
    )
    parser.add_argument(
        "--range-over-rounds",
        default="",
        metavar="PATTERNS",
        help="comma-separated 'extra' metrics or shell patterns whose smallest and largest "
        "value over every round of a row's runs become columns (e.g. q,contribution.*)",
    )
    parser.add_argument(
        "--per-run", action="store_true", help="also a table with every run's own numbers"
    )
    parser.add_argument(
        "--at-rounds",
        default="",
        metavar="ROUNDS",
        help="comma-separated rounds whose test accuracy and loss the per-run table shows "
        "(implies --per-run)",
    )
    parser.add_argument(
        "--keep-reruns",
        action="store_true",
        help="average in every rerun of a set-up and seed (by default only the newest run of "
        "each counts and the others are named in a warning)",
    )
    args = parser.parse_args(argv)
    try:
        at_rounds = [int(r) for r in split_list(args.at_rounds)]
    except ValueError:
        parser.error(f"--at-rounds takes comma-separated round numbers, got '{args.at_rounds}'")
    first = args.folders[0]
    out = args.out or (first.parent if first.is_file() else first) / "report"
    report = write_report(
        args.folders,
        out,
        args.title,
        split_list(args.mean_over_rounds),
        split_list(args.range_over_rounds),
        args.per_run,
        at_rounds,
        args.keep_reruns,
    )
    print(report.read_text())
    print(report.resolve())
    return 0


def export_main(argv: list[str]) -> int:
    """One tidy table (Parquet or CSV) of every completed run in the given run or sweep
    folders: a row per value of each run's metrics.csv, with the run's set-up as columns."""
    from fedimb.cli.export import export_runs

    parser = argparse.ArgumentParser(
        prog="fedimb export",
        description=export_main.__doc__,
        epilog="fedimb report reads the table back: fedimb report export.parquet",
    )
    parser.add_argument(
        "folders", type=Path, nargs="+", help="run folders, sweep folders or any folder above them"
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        default=None,
        metavar="parquet|csv",
        help="file format (default: from the --out suffix, else parquet)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the file to write (default: <first folder>/export.parquet, .csv with --format csv)",
    )
    args = parser.parse_args(argv)
    path, found, rows = export_runs(args.folders, args.out, args.fmt)
    print(found.tally("flagged (column rerun)"))
    if found.reruns:
        print(
            found.rerun_warning(
                "kept and flagged (rerun = true; table[~table['rerun']] holds the newest "
                "run of each set-up and seed)"
            )
        )
    print(f"{len(found.records)} runs, {rows} rows")
    print(path)
    return 0


def diagnose_main(argv: list[str]) -> int:
    """Print the label imbalance of the federation a configuration partitions (global
    class z-scores, per-client KLD to uniform, cluster structure, client sizes) and
    which methods target it. No training."""
    from fedimb.app.config import compose
    from fedimb.cli.diagnose import diagnose_config, report_lines

    parser = argparse.ArgumentParser(
        prog="fedimb diagnose",
        description=diagnose_main.__doc__,
        epilog="The arguments are fedimb overrides, e.g. fedimb diagnose dataset=mnist5k partition=dirichlet "
        "partition.alpha=0.1 num_clients=20, or +experiment=astraea_mnist5k",
    )
    _, overrides = parser.parse_known_args(argv)
    diagnosis, title = diagnose_config(compose(overrides))
    print("\n".join(report_lines(diagnosis, title)))
    return 0


def supernode_main(argv: list[str]) -> int:
    """flower-supernode ARGS with a warm ClientApp launcher (fedimb.cli.node_worker)."""
    from fedimb.cli.node_worker import supernode_main as start

    return start(argv)


def list_main(argv: list[str]) -> int:
    """The choices of a config group, each with its one-line description."""
    from fedimb.app.config import LIST_NAMES
    from fedimb.cli.listing import group_of, listing

    names = list(LIST_NAMES.values())
    parser = argparse.ArgumentParser(
        prog="fedimb list",
        description=list_main.__doc__,
        epilog="Choose one with <group>=<name>, e.g. fedimb method=rebafl",
    )
    parser.add_argument(
        "group", metavar="|".join(names), help="the config group (singular works too)"
    )
    args = parser.parse_args(argv)
    print("\n".join(listing(group_of(args.group))))
    return 0


class Subcommand(NamedTuple):
    run: Callable[[list[str]], int]
    summary: str  # its line on fedimb --help


#: every subcommand, in the order fedimb --help shows them
SUBCOMMANDS = {
    "list": Subcommand(list_main, "a config group's choices, one line each (fedimb list methods)"),
    "diagnose": Subcommand(
        diagnose_main,
        "the label imbalance a data set + partition gives, and the methods "
        "that target it (no training)",
    ),
    "report": Subcommand(
        report_main, "one comparison table and accuracy plot over run and sweep folders"
    ),
    "export": Subcommand(export_main, "every completed run's metrics as one Parquet or CSV table"),
    "resume": Subcommand(
        resume_main, "continue an interrupted run in its folder from its last checkpoint"
    ),
    "attach": Subcommand(
        attach_main, "follow a deployed run that goes on without its front end to its end"
    ),
    "local-federation": Subcommand(
        local_federation_main,
        "a SuperLink and N SuperNodes on this machine, one experiment against them, then stop them",
    ),
    "certs": Subcommand(
        certs_main, "CA, SuperLink certificate and SuperNode key pairs (secure deployment)"
    ),
    "supernode": Subcommand(supernode_main, "flower-supernode with a warm ClientApp launcher"),
}
