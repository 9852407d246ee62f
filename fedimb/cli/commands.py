"""Subcommands of ``fedimb`` besides running an experiment, and their table.

:data:`SUBCOMMANDS` is what ``fedimb`` dispatches on and ``fedimb --help`` lists; the small
subcommands live here (``list``, ``diagnose``, ``supernode``), those that run or follow a
run in :mod:`fedimb.cli.run_commands`, those that read finished runs in
:mod:`fedimb.cli.table_commands`.

- ``fedimb certs``: CA, SuperLink certificate and SuperNode key pairs (secure deployment),
  and registration of the public keys at a running SuperLink (``--register``).
- ``fedimb resume``: continue an interrupted run from the server's last checkpoint.
- ``fedimb attach``: follow a deployed run that went on without its front end.
- ``fedimb local-federation``: start a SuperLink and N SuperNodes on this machine, run
  one experiment against them through the front end (``runtime=deployment``), stop them.
- ``fedimb report``: one comparison table and accuracy plot over run and sweep folders
  (or tables written by ``fedimb export``).
- ``fedimb compare``: per set-up, each method's mean with its t interval and its
  seed-paired difference to a reference method (:mod:`fedimb.cli.compare`).
- ``fedimb export``: every completed run's metrics as one tidy Parquet or CSV table.
- ``fedimb tune``: every method tuned with the same budget by Hydra's Optuna sweeper,
  on validation data (:mod:`fedimb.cli.tune`).
- ``fedimb superlink``: ``flower-superlink`` that admits the listed SuperNode keys only
  and answers its Control API to the operator only (:mod:`fedimb.cli.superlink`).
- ``fedimb supernode``: ``flower-supernode`` with a warm ClientApp launcher
  (:mod:`fedimb.cli.supernode`, :mod:`fedimb.cli.node_worker`).
- ``fedimb diagnose``: the label imbalance of a data set + partition, and which methods
  target it.
- ``fedimb list``: a config group's choices (:mod:`fedimb.cli.listing`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple

from fedimb.cli.run_commands import attach_main, certs_main, local_federation_main, resume_main
from fedimb.cli.table_commands import compare_main, export_main, report_main


def diagnose_main(argv: list[str]) -> int:
    """Print the label imbalance of the federation a configuration partitions (global
    class z-scores, per-client KLD to uniform, cluster structure, client sizes) and
    which methods target it. No training."""
    from fedimb.app.config import compose
    from fedimb.cli.diagnose import diagnose_config, report_lines

    parser = argparse.ArgumentParser(
        prog="fedimb diagnose",
        description=diagnose_main.__doc__,
        epilog="The arguments are fedimb overrides, e.g. fedimb diagnose dataset=mnist5k "
        "partition=dirichlet partition.alpha=0.1 num_clients=20, or +experiment=astraea_mnist5k",
    )
    _, overrides = parser.parse_known_args(argv)
    diagnosis, title = diagnose_config(compose(overrides))
    print("\n".join(report_lines(diagnosis, title)))
    return 0


def supernode_main(argv: list[str]) -> int:
    """flower-supernode ARGS with a warm ClientApp launcher (fedimb.cli.supernode)."""
    from fedimb.cli.supernode import supernode_main as start

    return start(argv)


def superlink_main(argv: list[str]) -> int:
    """flower-superlink ARGS admitting only listed keys, gated to the operator
    (fedimb.cli.superlink)."""
    from fedimb.cli.superlink import superlink_main as start

    return start(argv)


def tune_main(argv: list[str]) -> int:
    """fedimb tune method=A,B [overrides] [--trials N] [--out DIR] (fedimb.cli.tune)."""
    from fedimb.cli.tune import tune_main as tune

    return tune(argv)


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
    "compare": Subcommand(
        compare_main,
        "per set-up, each method's mean with a 95% t interval and a paired test against fedavg",
    ),
    "export": Subcommand(export_main, "every completed run's metrics as one Parquet or CSV table"),
    "tune": Subcommand(
        tune_main,
        "tune every method with the same budget (Optuna, validation data); experiment files",
    ),
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
    "superlink": Subcommand(
        superlink_main,
        "flower-superlink that admits only listed SuperNode keys, its Control API the operator's",
    ),
    "supernode": Subcommand(supernode_main, "flower-supernode with a warm ClientApp launcher"),
}
