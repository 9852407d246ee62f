"""The validation share the server holds out of the training data (``validation.fraction``):
disjoint from the partition's training samples and from the test set, of size
round(fraction·n), stratified; scored every tested round, without reading the test set
where ``evaluation.test`` is false."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from omegaconf import OmegaConf

from fedimb.app.configuration import build, holdout
from fedimb.app.configuration.compose import compose
from fedimb.app.configuration.upgrade import upgrade
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.data.datasets import ArrayDataset, stratified_holdout
from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache

DIGITS = ["dataset=digits", "runtime=in_process", "num_clients=3", "train.local_epochs=1"]


def test_the_holdout_takes_round_fraction_n_with_the_remainders_to_the_largest_parts():
    y = np.repeat([0, 1, 2], [10, 7, 3])
    held = stratified_holdout(y, 0.25, seed=0)
    # quotas 2.5, 1.75, 0.75: floors 2, 1, 0 and the two missing samples to classes 1 and 2
    assert np.bincount(y[held]).tolist() == [2, 2, 1]
    assert held.tolist() == sorted(set(held.tolist()))


def index_coded_dataset(n_train: int = 300, n_test: int = 50) -> ArrayDataset:
    """Digits-shaped samples whose first pixel is their identity (tests: 10000 + i), with
    labels of uneven class sizes and a natural client (identity mod 3) each."""
    rng = np.random.default_rng(0)

    def coded(ids):
        x = np.zeros((len(ids), 1, 8, 8), dtype=np.float32)
        x[:, 0, 0, 0] = ids
        return x

    ids = np.arange(n_train)
    return ArrayDataset(
        name="digits",
        x_train=coded(ids),
        y_train=rng.choice(10, size=n_train, p=np.linspace(1, 3, 10) / 20).astype(np.int64),
        x_test=coded(10000 + np.arange(n_test)),
        y_test=np.arange(n_test, dtype=np.int64) % 10,
        num_classes=10,
        groups_train=ids % 3,
    )


@pytest.fixture
def coded(monkeypatch) -> ArrayDataset:
    dataset = index_coded_dataset()
    monkeypatch.setattr(build, "_DATA", ProcessCache())
    monkeypatch.setattr(build, "load_dataset", lambda spec: dataset)
    return dataset


@pytest.mark.parametrize("partition", ["dirichlet", "natural"])
def test_the_split_is_disjoint_from_training_and_test_and_stratified(coded, partition):
    data = build.experiment_data(
        compose([*DIGITS, f"partition={partition}", "validation.fraction=0.15"])
    )
    dataset = data.dataset
    assert dataset.x_val is not None and dataset.y_val is not None
    val_ids = dataset.x_val[:, 0, 0, 0].astype(int)
    train_ids = dataset.x_train[np.concatenate(data.partition.indices), 0, 0, 0].astype(int)
    assert len(val_ids) == round(0.15 * 300) == 45
    assert not set(val_ids) & set(train_ids)
    assert not set(val_ids) & set(dataset.x_test[:, 0, 0, 0].astype(int))
    assert sorted([*val_ids, *dataset.x_train[:, 0, 0, 0].astype(int)]) == list(range(300))
    np.testing.assert_array_equal(coded.y_train[val_ids], dataset.y_val)
    counts, held = (
        np.bincount(coded.y_train, minlength=10),
        np.bincount(dataset.y_val, minlength=10),
    )
    assert np.all(np.abs(held - 0.15 * counts) < 1)
    # the natural clients are cut with the samples
    np.testing.assert_array_equal(dataset.groups_train, dataset.x_train[:, 0, 0, 0].astype(int) % 3)


def test_seed_data_moves_the_split_and_seed_train_does_not(coded):
    def held(*overrides):
        cfg = compose([*DIGITS, "validation.fraction=0.2", *overrides])
        return build.experiment_data(cfg).dataset.x_val[:, 0, 0, 0].tolist()

    assert held("seed_train=3") == held()
    assert held("seed_data=3") != held()


def validation_scores(records):
    return [(r["round"], r["validation"]) for r in records]


def test_every_tested_round_scores_the_validation_share():
    run = InProcessFederation([*DIGITS, "num_rounds=2", "validation.fraction=0.2"])
    records = [run.round(r) for r in (1, 2)]
    assert all(set(r["validation"]) == {"accuracy", "macro_f1", "loss"} for r in records)
    weights = run.strategy.evaluation_weights(run.parameters)
    assert (
        records[-1]["validation"]["loss"] == run.run.evaluate(weights, split="validation")["loss"]
    )
    assert records[-1]["test"]["accuracy"] is not None


def test_without_the_test_set_the_run_never_reads_it_and_validates_as_with_it(monkeypatch):
    overrides = [*DIGITS, "num_rounds=2", "validation.fraction=0.2"]
    with_test = InProcessFederation(overrides)
    expected = [with_test.round(r)["validation"] for r in (1, 2)]
    real = build.load_dataset

    def nan_test(spec):
        dataset = real(spec)
        return dataclasses.replace(dataset, x_test=np.full_like(dataset.x_test, np.nan))

    monkeypatch.setattr(build, "_DATA", ProcessCache())
    monkeypatch.setattr(build, "load_dataset", nan_test)
    blind = InProcessFederation([*overrides, "evaluation.test=false"])
    assert np.isnan(blind.run.data.dataset.x_test).all()
    records = [blind.round(r) for r in (1, 2)]
    assert [r["validation"] for r in records] == expected
    assert all(r["test"] == {} for r in records)


def test_fedconcat_scores_its_concatenated_model_on_the_validation_share():
    smoke = ["method=fedconcat", "num_rounds=3", "method.strategy.num_clusters=2"]
    run = InProcessFederation(
        [*DIGITS, *smoke, "method.strategy.classifier_rounds=1", "validation.fraction=0.2"]
    )
    records = [run.round(r) for r in (1, 2, 3)]
    assert "validation" not in records[0] and set(records[-1]["validation"]) == {
        "accuracy",
        "macro_f1",
        "loss",
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["validation.fraction=1.0"], "validation.fraction must be in [0, 1), got 1.0"),
        (["validation.objective_last=0"], "validation.objective_last must be an integer >= 1"),
        (["evaluation.test=false"], "evaluation.test=false leaves nothing to score"),
        (
            ["validation.fraction=0.1", "evaluation.test=false", "method=lg_fedavg"],
            "has no validation score",
        ),
        (
            [
                "validation.fraction=0.1",
                "evaluation.test=false",
                "evaluation.personal=true",
                "evaluation.local_test_fraction=0.2",
                "method=grpfed",
            ],
            "evaluation.personal tests on the test set",
        ),
    ],
)
def test_bad_validation_settings_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        compose([*DIGITS, *overrides])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_without_the_test_set_the_clients_own_tests_drawn_from_it_are_not_read():
    synthetic = ["dataset=synthetic", "partition=natural", "num_clients=4", "seed=3"]
    overrides = [*synthetic, "dropout=none", "train.local_epochs=1", "num_rounds=1"]
    assert "local" in InProcessFederation(overrides).round(1)  # Synthetic's own test sets
    blind = InProcessFederation([*overrides, "validation.fraction=0.2", "evaluation.test=false"])
    record = blind.round(1)
    assert "local" not in record and record["test"] == {} and record["validation"]


def test_an_ensemble_method_has_no_validation_score():
    run = InProcessFederation(
        [*DIGITS, "method=lg_fedavg", "num_rounds=1", "validation.fraction=0.2"]
    )
    record = run.round(1)
    assert "validation" not in record and record["test"]["accuracy"] is not None


def test_fedbabu_without_the_test_set_skips_its_fine_tuned_test_and_is_validated():
    """FedBABU's clients test their fine-tuned models on the test set: a tuning run skips that
    test and validates the global model instead; with the test set read, it still runs."""
    settings = [
        *DIGITS,
        "method=fedbabu",
        "num_rounds=1",
        "dropout=none",
        "validation.fraction=0.2",
    ]
    blind = InProcessFederation([*settings, "evaluation.test=false"]).round(1)
    assert blind["test"] == {} and blind["validation"]["accuracy"] is not None
    assert "finetuned_accuracy" not in blind.get("extra", {})
    read = InProcessFederation(settings).round(1)
    assert read["extra"]["finetuned_clients"] == 3 and read["test"]["accuracy"] is not None


def test_a_configuration_older_than_the_holdout_keys_reads_conf_config_yamls():
    """A run folder written before the keys existed, brought up to date, reads the values a
    new run gets (conf/config.yaml's: no share held out, the last 3 rounds' objective)."""
    older = OmegaConf.to_container(compose([]))
    del older["validation"], older["evaluation"]["test"], older["config_version"]
    upgraded = upgrade(older)
    assert {key: OmegaConf.select(upgraded, key) for key in holdout.KEYS} == {
        key: OmegaConf.select(compose([]), key) for key in holdout.KEYS
    }
    assert holdout.validation_fraction(upgraded) == 0.0 and holdout.objective_last(upgraded) == 3
    assert holdout.reads_test(upgraded)
