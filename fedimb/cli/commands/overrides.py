"""The arguments of a subcommand that takes fedimb overrides and nothing else (``fedimb
epsilon``, ``fedimb diagnose``): one parser, so that their ``--help`` reads alike."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def parse_overrides(name: str, main: Callable, example: str, argv: list[str]) -> list[str]:
    """The overrides in ``argv`` of ``fedimb <name>``, whose ``--help`` shows ``main``'s
    docstring and ``fedimb <name> <example>``."""
    parser = argparse.ArgumentParser(
        prog=f"fedimb {name}",
        description=main.__doc__,
        epilog=f"The arguments are fedimb overrides, e.g. fedimb {name} {example}",
    )
    _, overrides = parser.parse_known_args(argv)
    return overrides
