"""The subcommands of ``fedimb`` besides running an experiment: one table, each entry
naming the function that parses its arguments and runs it.

:data:`SUBCOMMANDS` is what ``fedimb`` dispatches on and ``fedimb --help`` lists. A
subcommand's module is imported only when it runs, so ``fedimb --help`` and a run import
none of them.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple


class Subcommand(NamedTuple):
    target: str  # "module:function", the function taking the arguments after the name
    summary: str  # its line on fedimb --help

    def run(self, argv: list[str]) -> int:
        module, _, function = self.target.partition(":")
        main = getattr(importlib.import_module(module), function)
        return int(main(argv))


#: every subcommand, in the order fedimb --help shows them
SUBCOMMANDS = {
    "list": Subcommand(
        "fedimb.cli.commands.listing:list_main",
        "a config group's choices, one line each (fedimb list methods)",
    ),
    "diagnose": Subcommand(
        "fedimb.cli.commands.diagnose:diagnose_main",
        "the label imbalance a data set + partition gives, and the methods "
        "that target it (no training)",
    ),
    "epsilon": Subcommand(
        "fedimb.cli.commands.epsilon:epsilon_main",
        "the (ε, δ) a privacy=dp_* configuration will spend, round by round (no training)",
    ),
    "report": Subcommand(
        "fedimb.cli.commands.results:report_main",
        "one comparison table and accuracy plot over run and sweep folders",
    ),
    "compare": Subcommand(
        "fedimb.cli.commands.results:compare_main",
        "per set-up, each method's mean with a 95% t interval and a paired test against fedavg",
    ),
    "export": Subcommand(
        "fedimb.cli.commands.results:export_main",
        "every completed run's metrics as one Parquet or CSV table",
    ),
    "tune": Subcommand(
        "fedimb.cli.tune.tuning:tune_main",
        "tune every method with the same budget (Optuna, validation data); experiment files",
    ),
    "resume": Subcommand(
        "fedimb.cli.commands.runs:resume_main",
        "continue an interrupted run in its folder from its last checkpoint",
    ),
    "attach": Subcommand(
        "fedimb.cli.commands.runs:attach_main",
        "follow a deployed run that goes on without its front end to its end",
    ),
    "local-federation": Subcommand(
        "fedimb.cli.commands.runs:local_federation_main",
        "a SuperLink and N SuperNodes on this machine, one experiment against them, then stop them",
    ),
    "certs": Subcommand(
        "fedimb.cli.commands.runs:certs_main",
        "CA, SuperLink certificate and SuperNode key pairs (secure deployment)",
    ),
    "superlink": Subcommand(
        "fedimb.cli.federation.superlink:superlink_main",
        "flower-superlink that admits only listed SuperNode keys, its Control API the operator's",
    ),
    "supernode": Subcommand(
        "fedimb.cli.federation.supernode:supernode_main",
        "flower-supernode with a warm ClientApp launcher",
    ),
}
