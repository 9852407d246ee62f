"""The local evaluation: the global model (and personal models) on every client's local
test set, the accuracy distribution over clients, its rows, and the report's table."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays

from fedimb.app.configuration.build import new_model
from fedimb.app.configuration.compose import compose
from fedimb.app.runtimes.in_process import InProcessFederation, InProcessNode
from fedimb.cli.results.report_clients import clients_table, share_below
from fedimb.cli.results.run_records import RunRecord
from fedimb.cli.rundir.files import metric_rows
from fedimb.core.data.datasets import dataset_info
from fedimb.core.data.synthetic import SyntheticSpec, device_data
from fedimb.core.metrics import accuracy_distribution
from fedimb.core.models import set_weights

SYNTHETIC = [
    "dataset=synthetic",
    "partition=natural",
    "num_clients=4",
    "seed=3",
    "dropout=none",
    "train.local_epochs=1",
]


def test_the_distribution_of_ten_accuracies():
    accuracies = {k: a for k, a in enumerate([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])}
    stats = accuracy_distribution(accuracies)
    assert stats["clients"] == 10
    assert stats["average"] == pytest.approx(0.55)
    assert (stats["worst_10"], stats["best_10"]) == (
        pytest.approx(0.1),
        pytest.approx(1.0),
    )  # ceil(10%) = 1 client
    assert stats["variance"] == pytest.approx(825.0)  # population variance of 10, 20, ..., 100 (%²)
    eleven = accuracy_distribution({k: k / 10 for k in range(11)})
    assert eleven["worst_10"] == pytest.approx(0.05)  # ceil(1.1) = 2 clients: 0.0 and 0.1


def test_each_clients_local_accuracy_is_the_global_model_on_its_own_test_set():
    fed = InProcessFederation([*SYNTHETIC, "num_rounds=2"])
    records = [fed.round(1), fed.round(2)]
    cfg = compose([*SYNTHETIC, "num_rounds=2"])
    model = new_model(cfg, dataset_info(cfg.dataset))
    set_weights(model, parameters_to_ndarrays(fed.parameters))
    draw = SyntheticSpec(1.0, 1.0, False, 60, 10, 4, 3)
    expected = {}
    with torch.no_grad():
        for k in range(4):
            test = device_data(draw, k)
            predicted = model(torch.from_numpy(test.x_test)).argmax(dim=1).numpy()
            expected[k] = float(np.mean(predicted == test.y_test))
    local = records[-1]["local"]["global"]
    assert local["accuracy"] == pytest.approx(expected)
    assert local["average"] == pytest.approx(np.mean(list(expected.values())))
    rows = {metric: value for split, metric, value in metric_rows(records[-1]) if split == "local"}
    assert rows["accuracy_client_2"] == pytest.approx(expected[2])
    assert rows["accuracy_variance"] == pytest.approx(local["variance"])


def test_the_server_tests_the_devices_it_holds_with_the_clients_values(monkeypatch):
    """Where the server holds every client's own test set (Synthetic, natural partition)
    it computes their accuracies in one pass and sends no evaluation message; the values
    are those the clients compute on their own."""
    by_clients = InProcessFederation([*SYNTHETIC, "num_rounds=2"])
    by_clients.run.__dict__.update(
        holds_client_tests=False, has_local_tests=True
    )  # the clients' path
    expected = [by_clients.round(r)["local"]["global"]["accuracy"] for r in (1, 2)]
    by_server = InProcessFederation([*SYNTHETIC, "num_rounds=2"])
    asked = []
    monkeypatch.setattr(
        InProcessNode, "evaluate", lambda node, *args: asked.append(node.partition_id)
    )
    assert [by_server.round(r)["local"]["global"]["accuracy"] for r in (1, 2)] == expected
    assert asked == [] and by_server.run.holds_client_tests


def test_the_local_evaluation_reads_the_predictions_of_the_central_test_of_the_same_weights():
    """One pass over the global test set (the union of the devices' test sets) serves the
    central test and the local evaluation; other weights get a pass of their own, whose
    predictions are those the central test would make."""
    fed = InProcessFederation([*SYNTHETIC, "num_rounds=1"])
    assert fed.round(1)["local"]["global"]["clients"] > 0
    assert fed.run._local_model is None  # no second pass
    weights = fed.run.initial_weights()
    own_pass = fed.run.test_predictions(weights)
    assert fed.run._local_model is not None
    fed.run.evaluate(weights)
    assert np.array_equal(fed.run.test_predictions(weights), own_pass)


@pytest.mark.parametrize(
    "overrides, tested",
    [
        ([], [1, 2, 3]),
        (["evaluation.local_every=2"], [2, 3]),  # every 2 rounds and after the last
        (["evaluation.local_every=0"], []),
        (["evaluation.every=3"], [3]),  # null: with the central test
    ],
)
def test_which_rounds_test_locally(overrides, tested):
    fed = InProcessFederation([*SYNTHETIC, "num_rounds=3", *overrides])
    assert [r for r in (1, 2, 3) if "local" in fed.round(r)] == tested


def test_without_local_test_sets_there_is_no_local_evaluation():
    fed = InProcessFederation(
        ["dataset=digits", "num_clients=3", "num_rounds=1", "dropout=none", "train.local_epochs=1"]
    )
    assert "local" not in fed.round(1)
    held_out = InProcessFederation(
        [
            "dataset=digits",
            "num_clients=3",
            "num_rounds=1",
            "dropout=none",
            "train.local_epochs=1",
            "evaluation.local_test_fraction=0.2",
        ]
    )
    assert held_out.round(1)["local"]["global"]["clients"] == 3


def test_a_personalised_method_reports_its_personal_models_too():
    fed = InProcessFederation(
        [
            *SYNTHETIC,
            "num_rounds=1",
            "method=grpfed",
            "model=mclr",
            "model.encoder=linear",
            "evaluation.personal=true",
        ]
    )
    local = fed.round(1)["local"]
    assert set(local) == {"global", "personal"}
    assert set(local["personal"]["accuracy"]) == {0, 1, 2, 3}


def test_fedbabus_fine_tuning_rounds_test_locally_before_and_after_fine_tuning():
    """In a fine-tuning round each client tests the received model and then its
    fine-tuned head on its local test set; other rounds keep the plain local evaluation."""
    fed = InProcessFederation(
        [
            *SYNTHETIC,
            "num_rounds=2",
            "method=fedbabu",
            "model=mclr",
            "model.encoder=linear",
            "method.strategy.finetune_every=2",
        ]
    )
    plain, tuned = fed.round(1), fed.round(2)
    assert set(plain["local"]) == {"global"}
    assert (
        set(tuned["local"]) == {"global", "personal"} and tuned["extra"]["finetuned_clients"] == 4
    )
    assert set(tuned["local"]["personal"]["accuracy"]) == {0, 1, 2, 3}
    assert tuned["local"]["personal"]["accuracy"] != tuned["local"]["global"]["accuracy"]


def record(method: str, seed: int, clients: dict[int, float]) -> RunRecord:
    rows = [
        {
            "round": 5,
            "stage": "train",
            "split": "local",
            "metric": f"accuracy_client_{k}",
            "value": v,
        }
        for k, v in clients.items()
    ]
    stats = accuracy_distribution(clients)
    rows += [
        {
            "round": 5,
            "stage": "train",
            "split": "local",
            "metric": f"accuracy_{s}",
            "value": stats[s],
        }
        for s in ("average", "worst_10", "best_10", "variance")
    ]
    return RunRecord(
        f"{method}-{seed}", {"method.name": method, "dataset.name": "synthetic"}, seed, {}, rows
    )


def test_the_report_table_pairs_clients_with_fedavg_of_the_same_seed():
    assert share_below({0: 0.5, 1: 0.9, 2: 0.2}, {0: 0.6, 1: 0.8, 2: 0.2, 3: 1.0}) == pytest.approx(
        1 / 3
    )
    groups = {
        "fedavg": [record("fedavg", 0, {0: 0.6, 1: 0.8})],
        "qffl": [record("qffl", 0, {0: 0.7, 1: 0.7})],
    }
    lines = clients_table(groups)
    assert lines[0] == "## Accuracy over clients"
    assert (
        "| qffl | 1 | 70.00 (n = 1) | 70.00 (n = 1) | 70.00 (n = 1) | 0.0 (n = 1) | 50.0 (n = 1) |"
        in lines
    )
    assert (
        "| fedavg | 1 | 70.00 (n = 1) | 60.00 (n = 1) | 80.00 (n = 1) | 100.0 (n = 1) "
        "| 0.0 (n = 1) |" in lines
    )
    assert clients_table({"fedavg": [RunRecord("x", {}, 0, {}, [])]}) == []


def test_a_run_folder_keeps_the_distribution_and_its_evaluation_time(tmp_path):
    import json

    from fedimb.cli.launch.experiment import run_experiment

    run_dir = run_experiment(
        compose(
            [
                *SYNTHETIC,
                "runtime=in_process",
                "num_rounds=2",
                "checkpoint.enabled=false",
                f"output.root={tmp_path}",
            ]
        ),
        tmp_path / "run",
        lambda line: None,
    )
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    last = [e for e in events if e["event"] == "round"][-1]
    assert last["timing"]["federated_eval"] > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["local_accuracy_average"] == pytest.approx(last["local"]["global"]["average"])
    assert summary["local_accuracy_variance"] == pytest.approx(last["local"]["global"]["variance"])
