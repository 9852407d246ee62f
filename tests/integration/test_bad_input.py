"""Bad input fails before any training with one line naming the problem."""

from __future__ import annotations

import pytest

from tests.conftest import run_fedimb

CASES = [
    (["method=nosuch"], "unknown method 'nosuch'", "fedavg"),
    (["dataset=nosuch"], "unknown dataset 'nosuch'", "mnist5k"),
    (["partition=nosuch"], "unknown partition 'nosuch'", "dirichlet"),
    (["model=nosuch"], "unknown model 'nosuch'", "cnn28"),
    (["partition=dirichlet", "partition.alpha=0"], "partition.alpha must be > 0", ""),
    (["partition.classes_per_client=11"], "classes_per_client must be in [1, 10]", ""),
    (["dropout.p=1.5"], "dropout.p must lie in [0, 1]", ""),
    (["num_clients=0"], "num_clients must be >= 1", ""),
    (["train.lr=0"], "train.lr must be > 0", ""),
    (["partition.samples_per_client=5000"], "lower partition.samples_per_client", ""),
    (["nosuchkey=1"], "Could not override 'nosuchkey'", ""),
    (["method=fedprox", "method.client.mu=0.1", "method.strategy.nosuch=2"], "Could not override 'method.strategy.nosuch'", ""),
    (["-m", "seed=0,1", "dropout.p=0.5,2"], "dropout.p must lie in [0, 1], got 2", ""),
    (["method=fedbabu", "method.strategy.finetune_every=0"], "method 'fedbabu': finetune_epochs and finetune_every must be >= 1", ""),
]


@pytest.mark.parametrize("args,message,choice", CASES)
def test_one_line_error_before_training(tmp_path, args, message, choice):
    result = run_fedimb(*args, f"output.root={tmp_path}", timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fedimb: error: ") and message in lines[0]
    assert choice in lines[0]
    assert not list(tmp_path.rglob("*.yaml"))  # nothing ran, no run folder is left behind


def test_online_dataset_offline_names_the_dataset_and_the_fix(tmp_path):
    result = run_fedimb(
        "dataset=cifar10", f"dataset.root={tmp_path}", f"output.root={tmp_path}",
        env={"FEDIMB_OFFLINE": "1", "FEDIMB_CACHE": str(tmp_path / "cache")}, timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'cifar10'" in lines[0] and "cifar10.npz" in lines[0] and "dataset.root" in lines[0]
