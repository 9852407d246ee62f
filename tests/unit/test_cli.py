"""The ``fedimb`` command's own pages: --help, --version, fedimb list, tab completion."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import subprocess
import sys

import pytest

from fedimb.app.configuration.compose import GROUPS, LIST_NAMES, group_choices
from fedimb.cli.commands.listing import describe, listing
from fedimb.cli.commands.table import SUBCOMMANDS
from fedimb.cli.main import hydra_options_and_overrides
from tests.conftest import REPO, run_fedimb


def fedimb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_fedimb(*args, env=env, timeout=120)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_fedimbs_own_page_with_every_subcommand(flag):
    result = fedimb(flag)
    assert result.returncode == 0, result.stderr
    page = result.stdout
    assert page.startswith("usage: fedimb")
    for name, sub in SUBCOMMANDS.items():
        assert f"  {name} " in page and sub.summary in page
    for pointer in (
        "fedimb list methods",
        "--hydra-help",
        "method=NAME",
        "docs/running.md",
        "-sc install=bash",
    ):
        assert pointer in page


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_names_a_function_that_takes_its_arguments(name):
    module, _, function = SUBCOMMANDS[name].target.partition(":")
    main = getattr(importlib.import_module(module), function)
    assert list(inspect.signature(main).parameters) == ["argv"]


def test_version_names_fedimb_flower_and_torch():
    result = fedimb("--version")
    assert result.returncode == 0
    versions = [importlib.metadata.version(p) for p in ("fedimb", "flwr", "torch")]
    assert result.stdout.startswith(
        f"fedimb {versions[0]} (Flower {versions[1]}, torch {versions[2]}, Python "
    )


def test_fedimb_list_methods_names_each_method_and_its_paper():
    result = fedimb("list", "methods")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == group_choices("method")
    by_name = {line.split()[0]: line for line in lines}
    assert (
        "McMahan et al., 2017" in by_name["fedavg"] and "Karimireddy et al." in by_name["scaffold"]
    )


@pytest.mark.parametrize("group", GROUPS)
def test_every_group_lists_every_choice_with_a_description(group):
    lines = listing(group)
    assert [line.split()[0] for line in lines] == group_choices(group)
    assert all(len(line.split(None, 1)) == 2 for line in lines), lines  # every file says what it is


def test_a_description_is_the_key_else_the_leading_comment_else_the_name_comment(tmp_path):
    cases = {
        "key": "# not this\ndescription: What it is. More.\nname: x  # nor this\n",
        "leading": (
            "# @package _global_\n# What it is (Fig. 3, et al. 2020). More\n# text.\nname: x\n"
        ),
        "name": "name: x     # What it is\nother: 1   # not this\n",
        "none": "name: x\n",
    }
    for label, text in cases.items():
        (tmp_path / f"{label}.yaml").write_text(text)
    assert describe(tmp_path / "key.yaml") == "What it is."
    assert describe(tmp_path / "leading.yaml") == "What it is (Fig. 3, et al. 2020)."
    assert describe(tmp_path / "name.yaml") == "What it is"
    assert describe(tmp_path / "none.yaml") == ""


def test_fedimb_list_refuses_an_unknown_group_in_one_line():
    result = fedimb("list", "nosuch")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"fedimb: error: fedimb list takes one of {', '.join(list(LIST_NAMES.values())[:-1])} "
        "or experiments, got 'nosuch'"
    )


def complete(line: str) -> list[str]:
    """What ``fedimb -sc query=bash`` offers bash for ``line`` (cursor at its end)."""
    result = fedimb("-sc", "query=bash", env={"COMP_LINE": line, "COMP_POINT": str(len(line))})
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
    return result.stdout.split()


def test_tab_completes_overrides_subcommands_and_list_groups():
    assert "method=" in complete("fedimb meth")
    assert {"method=fedavg", "method=fedavgm"} <= set(complete("fedimb method=fedav"))
    assert complete("fedimb rep") == ["report"]
    assert {"methods", "models", "modes"} == set(complete("fedimb list m"))
    assert (
        complete("fedimb report outp") == []
    )  # a subcommand's arguments: bash completes file names


def test_the_bash_install_script_is_hydras():
    result = fedimb("-sc", "install=bash")
    assert result.returncode == 0, result.stderr
    assert "complete -o nospace -o default -F hydra_bash_completion" in result.stdout


def test_hydras_options_and_their_values_are_not_overrides():
    assert hydra_options_and_overrides(
        ["-m", "seed=0,1", "--cfg", "job", "-sc", "query=bash", "method=fedavg"]
    ) == (["-m", "--cfg", "job", "-sc", "query=bash"], ["seed=0,1", "method=fedavg"])
    assert hydra_options_and_overrides(["--info", "searchpath", "-i", "x=1"]) == (
        ["--info", "searchpath", "-i"],
        ["x=1"],
    )


def test_a_reader_that_leaves_early_gets_no_traceback():
    # `fedimb list methods | head -1`: the reader's end is closed before fedimb writes a line
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedimb", "list", "methods"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141  # 128 + SIGPIPE, what a shell reports for such a writer
    assert stderr == ""
