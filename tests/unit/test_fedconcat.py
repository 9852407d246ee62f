"""FedConcat / FedConcat-ID: clustering, inference, concatenation, stages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.clustering import (
    inferred_distribution,
    kmeans_clusters,
    noisy_distribution,
)
from fedimb.core.models import build_model
from fedimb.core.models.concat import concatenated_model, split_model_weights
from fedimb.core.training import (
    TrainConfig,
    make_optimizer,
    seeded_generator,
    train_epochs,
)


def test_identical_distributions_share_a_cluster():
    a, b, c = [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], [0.1, 0.1, 0.4, 0.4]
    matrix = np.array([a, a, b, b, c, a])
    labels = kmeans_clusters(matrix, 2, seed=0)
    assert labels[0] == labels[1] == labels[5] and labels[2] == labels[3] and labels[0] != labels[2]
    assert kmeans_clusters(matrix, 10, seed=0).max() <= 5  # K capped at the number of clients


def test_laplace_noise_keeps_a_distribution():
    rng = np.random.default_rng(0)
    noisy = noisy_distribution(np.array([100, 0, 50]), epsilon=1.0, rng=rng)
    assert noisy.sum() == pytest.approx(1.0) and np.all(noisy >= 0)
    assert np.abs(noisy - np.array([2 / 3, 0, 1 / 3])).max() < 0.05  # 150 samples, epsilon 1


def test_inference_recovers_the_dominant_classes_of_a_two_class_client():
    model = build_model({"name": "cnn28"}, (1, 28, 28), 10, seed=0)
    from fedimb.app.configuration import compose as config
    from fedimb.app.configuration.build import experiment_data

    data = experiment_data(config.compose(["num_clients=5"]))
    x, y = torch.from_numpy(data.dataset.x_train), torch.from_numpy(data.dataset.y_train)
    held = [3, 7]
    idx = torch.from_numpy(np.flatnonzero(np.isin(data.dataset.y_train, held))[:400])
    hp = TrainConfig(
        local_epochs=2, batch_size=50, lr=0.05, momentum=0.0, weight_decay=0.0, optimizer="sgd"
    )
    train_epochs(
        model,
        x,
        y,
        idx,
        epochs=2,
        batch_size=50,
        optimizer=make_optimizer(model.parameters(), hp),
        loss_fn=lambda xb, yb: torch.nn.functional.cross_entropy(model(xb), yb),
        generator=seeded_generator(0),
    )
    distribution = inferred_distribution(model, (1, 28, 28), samples=500, seed=1)
    assert distribution.sum() == pytest.approx(1.0)
    assert set(np.argsort(distribution)[-2:]) == set(held)


def test_concatenated_features_are_k_times_d_wide():
    from fedimb.core.models import get_weights

    template = build_model({"name": "cnn28"}, (1, 28, 28), 10, seed=0)
    encoders = [
        split_model_weights(
            template, get_weights(build_model({"name": "cnn28"}, (1, 28, 28), 10, seed=s))
        )[0]
        for s in range(3)
    ]
    model = concatenated_model(template, encoders)
    assert model.feature_dim == 3 * 128 and model.head.in_features == 384
    assert model.encoder(torch.zeros(2, 1, 28, 28)).shape == (2, 384)
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


def run_all_rounds(fed):
    records = [fed.round(r) for r in range(1, fed.strategy.total_rounds() + 1)]
    return records


def fedconcat(*overrides, method: str = "fedconcat"):
    return InProcessFederation(
        [
            f"method={method}",
            "num_clients=6",
            "num_rounds=4",
            "train.local_epochs=1",
            "dropout=none",
            "method.strategy.num_clusters=2",
            "method.strategy.classifier_rounds=2",
            *overrides,
        ]
    )


def test_stages_and_classifier_only_training():
    fed = fedconcat()
    s = fed.strategy
    assert [s.stage_of(r) for r in range(1, 5)] == [
        "encoders",
        "encoders",
        "classifier",
        "classifier",
    ]
    records = run_all_rounds(fed)
    assert [r["stage"] for r in records] == ["encoders", "encoders", "classifier", "classifier"]
    assert "test" not in records[0] or not records[0]["test"]
    assert records[-1]["test"]["accuracy"] > 0
    assert records[1]["extra"]["feature_width"] == 2 * 128  # set when the encoder stage ends
    encoders_before = [list(e) for e in s.encoders]
    # classifier rounds change only the classifier; the encoders stay frozen
    assert all(
        np.array_equal(a, b) for e0, e1 in zip(encoders_before, s.encoders) for a, b in zip(e0, e1)
    )
    assert [a.shape for a in s.classifier] == [(10, 256), (10,)]
    # the extractor was sent once per client: the fourth round carries no encoders
    round4 = s.fit_instructions(4, None, [0, 1])
    assert not any(k.startswith("array:encoder.") for k in round4[0].config)
    assert s.has_extractor == set(range(6))


def test_client_keeps_the_extractor_in_its_state():
    fed = fedconcat()
    for r in (1, 2):
        fed.round(r)
    s = fed.strategy
    s.begin_round(3)
    node = fed.nodes[0]
    first = s.fit_instructions(3, None, [0])[0]
    client = fed.client(node)
    arrays, _, _ = client.fit(parameters_to_ndarrays(first.parameters), first.config)
    assert [a.shape for a in arrays] == [(10, 256), (10,)]
    later = s.fit_instructions(4, None, [])  # nothing to send
    config = dict(s.fit_config(4))
    client = fed.client(node)  # a new client object, same Context.state
    arrays2, _, _ = client.fit(parameters_to_ndarrays(first.parameters), config)
    assert [a.shape for a in arrays2] == [(10, 256), (10,)] and later == {}


def test_fedconcat_id_clusters_inferred_distributions(tmp_path):
    fed = fedconcat("method.strategy.infer_samples=200", method="fedconcat_id")
    s = fed.strategy
    assert s.stage_of(1) == "cluster" and s.encoder_end == 2
    fed.round(1)
    assert sorted(s.inferred_distributions) == list(range(6)) and s.clusters is not None
    assert all(d.sum() == pytest.approx(1.0) for d in s.inferred_distributions.values())
    for r in (2, 3, 4):
        record = fed.round(r)
    assert record["test"]["accuracy"] > 0


def test_too_few_rounds_is_a_configuration_error():
    with pytest.raises(ValueError, match="no encoder round"):
        InProcessFederation(
            ["method=fedconcat_id", "num_rounds=3", "method.strategy.classifier_rounds=2"]
        )
