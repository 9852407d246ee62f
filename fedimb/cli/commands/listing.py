"""What the ``fedimb`` command offers, for people and shells: ``fedimb --help`` (every
subcommand, the common overrides), ``fedimb --version``, ``fedimb list <group>`` (a
config group's choices, each with the one line its YAML file gives about itself: a
``description:`` key, else its leading comment, else the comment on its ``name:`` line)
and tab completion of the subcommand names beside Hydra's own of the overrides."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.compose import CONF_DIR, GROUPS, LIST_NAMES, either, group_choices
from fedimb.core.errors import ConfigError

#: longest description shown, in characters (one terminal line beside the name)
_WIDTH = 100

_GROUP_OF = {
    **{name: group for group, name in LIST_NAMES.items()},
    **{group: group for group in GROUPS},
}


def group_of(name: str) -> str:
    """The config group ``fedimb list <name>`` means (plural or singular)."""
    if name not in _GROUP_OF:
        raise ConfigError(
            f"fedimb list takes one of {either(list(LIST_NAMES.values()))}, got '{name}'"
        )
    return _GROUP_OF[name]


def describe(path: Path) -> str:
    """The YAML file's one-line description ('' if it has none)."""
    text = path.read_text()
    loaded = OmegaConf.create(text)
    description = loaded.get("description") if isinstance(loaded, DictConfig) else None
    if description:
        return _first_sentence(str(description))
    leading = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if "@package" not in line:
            leading.append(line.lstrip("# ").rstrip())
    if leading:
        return _first_sentence(" ".join(leading))
    name_line = re.search(r"^name:[^#\n]*#\s*(.+)$", text, flags=re.MULTILINE)
    return _first_sentence(name_line.group(1)) if name_line else ""


#: words a period follows inside a sentence (Fig. 3, et al.)
_ABBREVIATIONS = ("Fig", "Tab", "Eq", "Sec", "al", "e.g", "i.e", "cf", "vs")


def _first_sentence(text: str) -> str:
    text = text.strip()
    for end in re.finditer(r"\.\s+", text):
        if not text[: end.start()].endswith(_ABBREVIATIONS):
            text = text[: end.start() + 1]
            break
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3].rstrip() + "..."


def listing(group: str) -> list[str]:
    """One line per option of ``group``: its name, then its description."""
    choices = group_choices(group)
    width = max(map(len, choices), default=0)
    return [
        f"{name:<{width}}  {describe(CONF_DIR / group / f'{name}.yaml')}".rstrip()
        for name in choices
    ]


#: the settings most runs change, for the help page
COMMON_OVERRIDES = [
    ("method=NAME", "the method (fedimb list methods)"),
    ("dataset=NAME", "the data set (fedimb list datasets); digits and mnist5k work offline"),
    (
        "partition=NAME",
        "how the data is split (fedimb list partitions), "
        "e.g. partition=dirichlet partition.alpha=0.1",
    ),
    ("dropout=NAME", "who is available in a round (fedimb list dropouts), e.g. dropout.p=0.3"),
    ("model=NAME", "the model (fedimb list models); default: the data set's own"),
    ("runtime=NAME", "simulation (default), in_process (one process, no Ray) or deployment"),
    ("num_clients=N num_rounds=N seed=N", "the federation's size, its length, the seed"),
    ("output.root=DIR", "where run folders go (default: outputs)"),
    ("+experiment=NAME", "a paper's set-up (fedimb list experiments)"),
]


def help_text(subcommands: Mapping[str, str]) -> str:
    """fedimb's own ``--help`` page; ``subcommands``: each one's line (given by the caller,
    because the subcommands' table imports this module for ``fedimb list``)."""

    def table(rows) -> list[str]:
        width = max(len(name) for name, _ in rows)
        return [f"  {name:<{width}}  {text}" for name, text in rows]

    docs = CONF_DIR.parent / "docs"
    return "\n".join(
        [
            "usage: fedimb [KEY=VALUE ...]              run one experiment; "
            "the last line printed is its run folder",
            "       fedimb -m KEY=A,B [KEY=VALUE ...]   a sweep: one run per combination",
            "       fedimb SUBCOMMAND [ARGS]            "
            "(fedimb SUBCOMMAND --help for its own options)",
            "",
            "Federated learning under label imbalance, non-IID data and client dropout, on Flower.",
            "",
            "subcommands:",
            *table(list(subcommands.items())),
            "",
            "common overrides (Hydra syntax; any key of the configuration works):",
            *table(COMMON_OVERRIDES),
            "",
            "options:",
            *table(
                [
                    ("-h, --help", "this page"),
                    ("--version", "fedimb's version, and Flower's and torch's"),
                    ("--cfg job", "print the composed configuration (every key) and stop"),
                    ("--hydra-help", "Hydra's own options"),
                    (
                        "-sc install=bash",
                        'tab completion in bash: eval "$(fedimb -sc install=bash)"',
                    ),
                ]
            ),
            "",
            f"documentation: {docs / 'running.md'} (this command), "
            f"{docs / 'configuration.md'} (every setting)",
        ]
    )


def versions() -> str:
    """``fedimb 0.1.0 (Flower 1.41.0, torch 2.14.1, Python 3.11.2)``."""
    import platform

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (
        f"fedimb {version('fedimb')} (Flower {version('flwr')}, torch {version('torch')}, "
        f"Python {platform.python_version()})"
    )


def complete_subcommands(subcommands: Iterable[str], environ=os.environ) -> bool:
    """Bash completion (``fedimb -sc query=bash``, with COMP_LINE and COMP_POINT set):
    print the ``subcommands`` the word being completed may start, and the groups of
    ``fedimb list``. True when the line belongs to a subcommand: then Hydra's completion
    of overrides does not apply and the shell falls back to file names."""
    subcommands = list(subcommands)
    line = environ.get("COMP_LINE", "")
    point = int(environ.get("COMP_POINT") or len(line))
    words = line[:point].split()
    if line[:point].endswith(" ") or not words:
        words.append("")
    position, word = len(words) - 1, words[-1]
    if position == 1:
        _print_words(name for name in subcommands if name.startswith(word))
        return False
    if position >= 1 and words[1] in subcommands:
        if words[1] == "list" and position == 2:
            _print_words(name for name in LIST_NAMES.values() if name.startswith(word))
        return True
    return False


def _print_words(words) -> None:
    line = " ".join(words)
    if line:
        print(line, flush=True)


def list_main(argv: list[str]) -> int:
    """The choices of a config group, each with its one-line description."""
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
