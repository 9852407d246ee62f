"""``fedimb``: the Hydra front end.

``fedimb key=value ...`` runs one experiment, ``fedimb -m key=a,b ...`` a sweep (one
run folder per job). The last line printed is the run folder's absolute path.
``fedimb list|diagnose|report|export|tune|resume|attach|local-federation|certs|supernode ...``
are the subcommands of :mod:`fedimb.cli.commands.table`; each job runs Hydra's task function,
:mod:`fedimb.cli.launch.hydra_task`; ``--help``, ``--version`` and the shell
completion's queries are answered here (:mod:`fedimb.cli.commands.listing`) before Hydra, which
gets its own options apart from the overrides. Ctrl-C and SIGTERM end in one line.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from fedimb.app.configuration.compose import check_overrides, compose, sweep_variants
from fedimb.cli.federation.processes import Interrupted
from fedimb.cli.launch import sweep_end
from fedimb.cli.launch.hydra_task import experiment, fail
from fedimb.core.errors import FedimbError


def _interrupt(signum, frame) -> None:
    """Ctrl-C or SIGTERM ends the run; the cleanup handlers on the way out stop every
    Flower process, and a second Ctrl-C (often pressed) is ignored so as not to cut them short."""
    for stop in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop, signal.SIG_IGN)
    raise Interrupted(exit_code=128 + signum)


#: Hydra's options that take a value and print the configuration or read another one
_CONFIG_OPTIONS = {
    "-c",
    "--cfg",
    "-p",
    "--package",
    "-cp",
    "--config-path",
    "-cn",
    "--config-name",
    "-cd",
    "--config-dir",
}
#: Hydra's options that take a value (``--cfg job``, ``-sc query=bash``): not overrides
_HYDRA_VALUE_OPTIONS = {*_CONFIG_OPTIONS, "-sc", "--shell-completion", "--experimental-rerun"}
#: Hydra's options that print something and run nothing, or read another config folder
_PRINT_ONLY = {*_CONFIG_OPTIONS, "-i", "--info", "--hydra-help"}
_HYDRA_INFO_TOPICS = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}


def hydra_options_and_overrides(args: list[str]) -> tuple[list[str], list[str]]:
    """Hydra's own options (with their values) apart from the ``key=value`` overrides."""
    options, overrides = [], []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            takes_value = arg in _HYDRA_VALUE_OPTIONS or (
                arg in ("-i", "--info") and i + 1 < len(args) and args[i + 1] in _HYDRA_INFO_TOPICS
            )
            options += args[i : i + 2] if takes_value else [arg]
            i += 2 if takes_value else 1
        else:
            overrides.append(arg)
            i += 1
    return options, overrides


def _check_before_hydra(overrides: list[str]) -> None:
    """Every value of a sweep composes and validates, and output.root can be written,
    before Hydra creates a run folder."""
    from fedimb.cli.launch.preflight import check_writable

    check_overrides(overrides)
    for variant in sweep_variants(overrides):
        check_writable(Path(str(compose(variant).output.root)), "output.root")


def run(args: list[str]) -> int | None:
    """``fedimb ARGS``: a subcommand, fedimb's own help and version, or a Hydra run."""
    from fedimb.cli.commands import listing
    from fedimb.cli.commands.table import SUBCOMMANDS

    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]].run(args[1:])
    options, overrides = hydra_options_and_overrides(args)
    if any(o.startswith(("-sc", "--shell-completion")) for o in options):
        if not (
            any(o.startswith("query=") for o in options)
            and listing.complete_subcommands(SUBCOMMANDS)
        ):
            experiment()  # Hydra's install script, and its completion of the overrides
        return 0
    if "-h" in options or "--help" in options:
        print(listing.help_text({name: sub.summary for name, sub in SUBCOMMANDS.items()}))
        return 0
    if "--version" in options:
        print(listing.versions())
        return 0
    if not _PRINT_ONLY.intersection(options):
        _check_before_hydra(overrides)
    experiment()
    return 1 if sweep_end.failed_runs else 0


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    if (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):  # not where the shell ignores it
        signal.signal(signal.SIGINT, _interrupt)
    try:
        code = run(sys.argv[1:])
    except FedimbError as err:
        fail(err)
    except (
        KeyboardInterrupt
    ) as stop:  # one line, no traceback: Flower's processes are already stopped
        print(f"fedimb: {stop or 'interrupted'}", file=sys.stderr, flush=True)
        sys.exit(getattr(stop, "exit_code", 130))
    except BrokenPipeError:  # the reader left (fedimb report | head): stop quietly, as cat does
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # no second error at exit's flush
        sys.exit(141)
    sys.exit(code)


if __name__ == "__main__":
    main()
