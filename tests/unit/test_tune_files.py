"""What ``fedimb tune`` writes and reads without running: a trial's objective from its
summary.json (a failed or diverged run scores 0), and the experiment file's form."""

from __future__ import annotations

import json
import math

import pytest
from omegaconf import OmegaConf

from fedimb.cli.main import run
from fedimb.cli.tune.files import experiment_yaml
from fedimb.cli.tune.trial import FAILED_OBJECTIVE, objective_of
from fedimb.core.errors import ConfigError

#: a federation that trains in seconds, should a check fail to stop a tuning run
SMALL = ["dataset=digits", "runtime=in_process", "num_clients=3", "num_rounds=1", "dropout=none"]


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ({"completed": True, "validation_objective": 0.75}, (0.75, None)),
        ({"completed": False, "validation_objective": 0.75}, (0.0, "the run did not complete")),
        ({"completed": True, "validation_objective": math.nan}, (0.0, "no finite validation")),
        ({"completed": True, "validation_objective": None}, (0.0, "no finite validation")),
        (None, (0.0, "the run wrote no summary.json")),
    ],
)
def test_a_trials_objective_is_its_validation_objective_else_zero(tmp_path, summary, expected):
    path = tmp_path / "summary.json"
    if summary is not None:
        path.write_text(json.dumps(summary))
    value, why = objective_of(path)
    assert FAILED_OBJECTIVE == 0.0 and value == expected[0]
    assert (why is None) if expected[1] is None else why.startswith(expected[1])


def test_the_experiment_file_chooses_groups_in_its_defaults_and_sets_the_rest():
    text = experiment_yaml(
        "fedprox",
        ["dataset=digits", "+experiment=rebafl_pathological", "num_clients=3", "partition.x=2"],
        {"validation.fraction": 0.1, "method.client.mu": 0.01},
        "# note\n",
    )
    assert text.startswith("# @package _global_\n# note\n")
    tree = OmegaConf.create(text)
    assert OmegaConf.to_container(tree.defaults) == [
        "/experiment/rebafl_pathological",
        {"override /method": "fedprox"},
        {"override /dataset": "digits"},
        "_self_",
    ]
    assert tree.num_clients == 3 and tree.partition.x == 2 and tree.method.client.mu == 0.01
    assert tree.validation.fraction == 0.1 and tree.hydra.sweeper.params is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["seed=3"], r"^fedimb tune sets seed itself; drop seed=3$"),
        (["evaluation.test=true"], r"^fedimb tune sets evaluation\.test itself"),
        (["tune.trials=0"], r"^method=fedprox: tune\.trials must be an integer >= 1, got 0$"),
        (
            ["tune.search={train.lr: 'log(0, 1)'}"],
            r"^method=fedprox: tune\.search\.train\.lr: log\(a, b\) needs a > 0",
        ),
        (["method.client.mu=abc"], r"^method=fedprox: method\.client\.mu must be float"),
        (["tune.seeds=[]"], r"^method=fedprox: tune\.seeds must be a list of distinct integers"),
        (["tune.seeds=[1,1]"], r"^method=fedprox: tune\.seeds must be a list of distinct"),
        (["tune.divergence.drop=0"], r"^method=fedprox: tune\.divergence\.drop must be in"),
    ],
)
def test_bad_tuning_input_is_one_line_before_anything_runs(tmp_path, args, message):
    with pytest.raises(ConfigError, match=message):
        run(["tune", "method=fedprox", *SMALL, *args, "--out", str(tmp_path / "t")])
    assert not (tmp_path / "t").exists()
