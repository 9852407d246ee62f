"""Bad input fails before any training with one line naming the problem."""

from __future__ import annotations

import pytest

from tests.conftest import run_fedimb

CASES = [
    (["method=nosuch"], "unknown method 'nosuch'", "fedimb list methods shows all"),
    (
        ["method=fedavgg"],
        "unknown method 'fedavgg'; did you mean fedavg",
        "fedimb list methods shows all",
    ),
    (["dataset=nosuch"], "unknown dataset 'nosuch'", "fedimb list datasets"),
    (["dataset=digit"], "unknown dataset 'digit'; did you mean digits", ""),
    (["partition=nosuch"], "unknown partition 'nosuch'", "fedimb list partitions"),
    (["runtime=in_proces"], "unknown runtime 'in_proces'; did you mean in_process?", "simulation"),
    (["model=nosuch"], "unknown model 'nosuch'", "fedimb list models"),
    (["partition=dirichlet", "partition.alpha=0"], "partition.alpha must be > 0", ""),
    (["partition.classes_per_client=11"], "classes_per_client must be in [1, 10]", ""),
    (["dropout.p=1.5"], "dropout.p must lie in [0, 1]", ""),
    (["num_clients=0"], "num_clients must be >= 1", ""),
    (["num_clients=1000000000"], "num_clients must be at most 1,000,000, got 1,000,000,000", ""),
    ([f"seed={2**70}"], "seed must be at most 4,294,967,295", f"got {2**70:,}"),
    (["train.lr=0"], "train.lr must be > 0", ""),
    (["partition.samples_per_client=5000"], "lower partition.samples_per_client", ""),
    (["nosuchkey=1"], "unknown key 'nosuchkey'", ""),
    (["+foo=1"], "unknown key 'foo' in +foo=1: no file in conf/ declares it", ""),
    (["partition.alpah=0.1"], "unknown key 'partition.alpah'; did you mean partition.alpha", ""),
    (
        ["partition.alpha=-1"],
        "partition=pathological has no alpha; use partition=dirichlet",
        "partition.alpha=-1",
    ),
    (
        ["method=fedprox", "method.client.mu=0.1", "method.strategy.nosuch=2"],
        "unknown key 'method.strategy.nosuch'",
        "",
    ),
    (["-m", "seed=0,1", "dropout.p=0.5,2"], "dropout.p must lie in [0, 1], got 2", ""),
    (
        ["method=fedbabu", "method.strategy.finetune_every=0"],
        "method.strategy.finetune_every must be an integer >= 1, got 0",
        "",
    ),
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
        "dataset=cifar10",
        f"dataset.root={tmp_path}",
        f"output.root={tmp_path}",
        env={"FEDIMB_OFFLINE": "1", "FEDIMB_CACHE": str(tmp_path / "cache")},
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'cifar10'" in lines[0] and "cifar10.npz" in lines[0] and "dataset.root" in lines[0]


def one_error_line(result) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_output_root_that_cannot_be_created_is_one_line(tmp_path):
    """/proc accepts no folder, not even from root (which os.access lets through)."""
    line = one_error_line(
        run_fedimb("dataset=digits", "runtime=in_process", "output.root=/proc/x", timeout=120)
    )
    assert line.startswith("fedimb: error: output.root /proc/x is not writable: ")


def test_a_superlink_that_does_not_answer_is_named_with_its_setting(tmp_path):
    from fedimb.cli.federation.processes import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = run_fedimb(
        "dataset=digits",
        "runtime=deployment",
        f"runtime.address={address}",
        "num_clients=2",
        f"output.root={tmp_path}",
        timeout=120,
    )
    assert one_error_line(result) == (
        f"fedimb: error: cannot reach the SuperLink at {address} (runtime.address): "
        "Connection refused; start one or set runtime.address=HOST:PORT"
    )
    assert not list(tmp_path.rglob("*.yaml"))


@pytest.mark.parametrize("page", ["README.md", "docs/running.md"])
def test_the_documented_bad_input_examples_print_what_the_docs_say(page, tmp_path):
    """Every ``fedimb ARGS`` prints ``fedimb: error: ...`` example of the page is what the
    code prints."""
    import re

    from tests.conftest import REPO

    examples = re.findall(
        r"`fedimb ([^`]+)` prints\s+`(fedimb: error: [^`]+)`", (REPO / page).read_text()
    )
    assert examples, f"{page} shows no bad-input example"
    for args, error in examples:
        assert (
            one_error_line(run_fedimb(*args.split(), f"output.root={tmp_path}", timeout=120))
            == error
        )
