"""A run folder is data: ``fedimb resume`` and ``attach`` refuse a config.yaml that names a
class or a top-level key no fresh run could name, in one line and before importing it, and
``python -m fedimb`` imports nothing from the working directory (a run folder holding a
``numpy.py`` stays inert)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from fedimb.app.configuration.compose import compose
from fedimb.app.configuration.saved import check_saved_config
from fedimb.core.errors import ConfigError

CFG = ["dataset=digits", "num_clients=3", "num_rounds=1", "runtime=in_process", "device=cpu"]
#: modules a hostile folder shadows, each leaving a marker file when imported
HOSTILE = ("omegaconf", "numpy", "yaml", "fedimb_hostile")


@pytest.fixture(scope="module")
def saved_config():
    """A fresh run's config.yaml as a plain dict."""
    return OmegaConf.to_container(compose(CFG), resolve=True)


def hostile(folder, names=HOSTILE):
    """``folder`` with modules (``names``) that shadow fedimb's dependencies, or that a
    ``_target_`` names, each writing a marker when imported."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        marker = folder / f"imported-{name}"
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').close()\nEvil = dict\n")
    return folder


def fedimb_in(folder, *args, pythonpath=None):
    paths = [str(pythonpath)] if pythonpath else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "fedimb", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def markers(*folders):
    return sorted(p.name for folder in folders for p in folder.glob("imported-*"))


@pytest.mark.parametrize(
    "subcommand, target",
    [
        ("resume", "subprocess.Popen"),
        ("resume", "this.Zen"),
        ("resume", "fedimb_hostile.Evil"),
        ("attach", "fedimb_hostile.Evil"),
    ],
)
def test_a_class_no_fresh_run_names_is_refused_before_it_is_imported(
    subcommand, target, saved_config, tmp_path
):
    run_dir, lib = hostile(tmp_path / "run"), hostile(tmp_path / "lib", ["fedimb_hostile"])
    config = {**saved_config, "method": {**saved_config["method"]}}
    config["method"]["client"] = {**config["method"]["client"], "_target_": target}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    done = fedimb_in(run_dir, subcommand, ".", pythonpath=lib)  # fedimb_hostile importable
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (
        f"fedimb: error: {(run_dir / 'config.yaml').resolve()}: method.client._target_: "
        f"refused {target!r}: "
        "not a class a fresh run can name there\n"
    )
    assert markers(run_dir, lib) == [] and "Beautiful is better than ugly" not in done.stdout


def test_an_unknown_top_level_key_is_refused_in_one_line(saved_config, tmp_path):
    run_dir = hostile(tmp_path / "run")
    (run_dir / "config.yaml").write_text(yaml.safe_dump({**saved_config, "payload": 1}))
    done = fedimb_in(run_dir, "resume", ".")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (
        f"fedimb: error: {(run_dir / 'config.yaml').resolve()}: unknown key 'payload': "
        "no file in conf/ declares it\n"
    )
    assert markers(run_dir) == []


def test_fedimb_imports_nothing_from_the_working_directory(tmp_path):
    folder = hostile(tmp_path)
    done = fedimb_in(folder, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert markers(folder) == []


def test_what_a_fresh_run_names_passes(saved_config):
    flwr = {"_target_": "flwr_datasets.partitioner.IidPartitioner"}
    check_saved_config({**saved_config, "partition": {"partitioner": flwr}}, "config.yaml")
    check_saved_config(  # a class that moved, as an older run folder names it
        {**saved_config, "method": {"strategy": {"_target_": "strategies.personal.LocalStrategy"}}},
        "config.yaml",
    )
    with pytest.raises(ConfigError, match=r"partition\.partitioner\._target_: refused"):
        flwr_elsewhere = {"_target_": "flwr_datasets.partitioner.os.system"}
        check_saved_config({"partition": {"partitioner": flwr_elsewhere}}, "config.yaml")
    with pytest.raises(ConfigError, match=r"method\.client\._target_: refused"):
        strategy = saved_config["method"]["strategy"]["_target_"]
        check_saved_config({"method": {"client": {"_target_": strategy}}}, "config.yaml")
