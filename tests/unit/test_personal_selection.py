"""The personalised column's numbers: each client's own validation share, disjoint from its
training and test samples and stratified by label (:func:`client_split`), and the personal
models chosen on those shares, never on the test splits (:func:`personal_selection`),
checked against a hand computation on three clients."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.configuration.build import client_split
from fedimb.app.configuration.compose import compose
from fedimb.cli.rundir.summary import personal_selection
from fedimb.core.metrics import accuracy_distribution


def split(test: float, validation: float, indices, labels, pid=1):
    cfg = compose(
        [
            "dataset=digits",
            f"evaluation.local_test_fraction={test}",
            f"evaluation.local_validation_fraction={validation}",
        ]
    )
    return client_split(cfg, indices, pid, labels)


def test_the_validation_share_is_stratified_and_disjoint():
    labels = np.array([0] * 8 + [1] * 4 + [2] * 2 + [3])  # 15 samples, label 3 once
    indices = np.arange(100, 115)
    everything = np.concatenate([np.full(100, -1), labels])  # labels of the whole set
    train, test, validation = split(0.0, 0.25, indices, everything)
    # of each label round-half-up(0.25 x count): 2 of 8, 1 of 4, 1 of 2 (0.5 up), 0 of 1
    counts = np.bincount(everything[validation], minlength=4)
    assert counts.tolist() == [2, 1, 1, 0] and len(test) == 0
    assert sorted([*train, *validation]) == indices.tolist()
    assert not set(train) & set(validation)


def test_the_validation_share_comes_from_what_the_test_split_leaves():
    labels = np.repeat(np.arange(4), 10)
    indices = np.arange(40)
    train, test, validation = split(0.25, 0.2, indices, labels)
    plain_test = split(0.25, 0.0, indices, labels).test
    assert test.tolist() == plain_test.tolist()  # the test split does not move
    assert len(test) == 10 and len(validation) + len(train) == 30
    assert not (
        set(train) & set(validation) or set(test) & set(validation) or set(train) & set(test)
    )
    # stratified among the 30 left: each label's validation count is 0.2 of its count there
    left = np.setdiff1d(indices, test)
    for label in range(4):
        there = int(np.sum(labels[left] == label))
        assert int(np.sum(labels[validation] == label)) == int(np.floor(0.2 * there + 0.5))


def test_the_validation_share_follows_the_data_seed_and_leaves_one_sample_to_train():
    labels, indices = np.zeros(2, dtype=int), np.arange(2)
    train, _, validation = split(0.0, 0.9, indices, labels)
    assert len(train) == 1 and len(validation) == 1
    many = np.repeat(np.arange(2), 20)
    first = split(0.0, 0.3, np.arange(40), many, pid=1).validation.tolist()
    assert split(0.0, 0.3, np.arange(40), many, pid=1).validation.tolist() == first
    assert split(0.0, 0.3, np.arange(40), many, pid=2).validation.tolist() != first


def round_of(number, validation, test):
    """A round event's local evaluation of three clients' personal models."""
    as_clients = lambda values: dict(enumerate(values))  # noqa: E731
    return {
        "round": number,
        "local": {
            "personal": accuracy_distribution(as_clients(test)),
            "personal_validation": accuracy_distribution(as_clients(validation)),
        },
    }


def test_personal_accuracy_is_chosen_on_the_validation_shares():
    rounds = [
        {"round": 0},
        round_of(1, [0.5, 0.6, 0.7], [0.4, 0.5, 0.9]),  # validation mean 0.6
        round_of(2, [0.8, 0.6, 0.7], [0.6, 0.3, 0.9]),  # 0.7: the best
        round_of(3, [0.6, 0.6, 0.6], [0.9, 0.9, 0.9]),  # 0.6, though the best test mean
    ]
    chosen = personal_selection(rounds, objective_last=2)
    assert chosen["personal_validation_best_round"] == 2
    assert chosen["personal_selected_accuracy"] == pytest.approx((0.6 + 0.3 + 0.9) / 3)
    assert chosen["personal_selected_worst_10"] == pytest.approx(0.3)  # ceil(10% of 3) = 1
    assert chosen["personal_validation_objective"] == pytest.approx((0.7 + 0.6) / 2)
    assert chosen["personal_validation_final_accuracy"] == pytest.approx(0.6)
    assert personal_selection([{"round": 0}], objective_last=2) == {}


def test_the_personal_numbers_are_compared_in_percent():
    from fedimb.cli.results.compare_tables import METRIC_MEANINGS, in_percent

    for metric in ("personal_selected_accuracy", "personal_selected_worst_10"):
        assert in_percent(metric) and metric in METRIC_MEANINGS
    assert in_percent("personal_validation_objective")
    assert not in_percent("local_accuracy_variance") and not in_percent("bytes_up")
