"""Named payloads are checked against their declarations before a method reads them: a
crafted array is that client's rejection (counted, one note) or leaves the client out of
the method's plan, never an exception out of the round; server state that is broadcast
is adopted only while finite; and every honest payload passes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from flwr.common import FitRes, ndarrays_to_parameters, parameters_to_ndarrays

from clients import rebafl
from clients.fedconcat import LABEL_DISTRIBUTION
from fedimb.app.runtimes.in_process import OK, InProcessFederation
from fedimb.core import payload, protocol, schema
from fedimb.core.schema import ANSWER, UP, PayloadSpec
from strategies.base.round_log import ClientUpdate


def federation(*overrides: str, num_clients: int = 3) -> InProcessFederation:
    return InProcessFederation(
        [
            "dataset=digits",
            f"num_clients={num_clients}",
            "train.local_epochs=1",
            "dropout=none",
            "partition=iid",
            *overrides,
        ]
    )


def started(fed: InProcessFederation, rnd: int = 1) -> dict:
    """Round ``rnd``'s instructions, by partition id."""
    fed.strategy.begin_round(rnd)
    instructions = fed.strategy.configure_fit(
        server_round=rnd, parameters=fed.parameters, client_manager=fed.manager
    )
    return {fed.strategy.registry.partition_of(proxy): (proxy, ins) for proxy, ins in instructions}


def honest_reply(fed, sent, pid: int):
    """What the real client ``pid`` answers to its instruction."""
    proxy, ins = sent[pid]
    arrays, n, metrics = fed.client(fed.nodes[pid]).fit(
        parameters_to_ndarrays(ins.parameters), ins.config
    )
    return proxy, FitRes(
        status=OK, parameters=ndarrays_to_parameters(arrays), num_examples=n, metrics=metrics
    )


def tampered(reply, **arrays: np.ndarray):
    """``reply`` with the named arrays replaced (or added)."""
    proxy, res = reply
    metrics = {**res.metrics, **payload.pack(arrays)}
    return proxy, dataclasses.replace(res, metrics=metrics)


def aggregate_with_attacker(fed, attacker_arrays: dict, rnd: int = 1):
    """Round ``rnd`` with clients 0 and 1 honest and client 2 sending ``attacker_arrays``."""
    sent = started(fed, rnd)
    replies = [honest_reply(fed, sent, pid) for pid in (0, 1, 2)]
    replies[2] = tampered(replies[2], **attacker_arrays)
    new, _ = fed.strategy.aggregate_fit(rnd, replies, [])
    return new


def assert_attacker_rejected(fed, cause: str):
    log = fed.strategy.round_log
    assert log.rejected == 1 and log.succeeded == 2
    notes = [m for m in log.messages if "update of client 2 rejected" in m]
    assert len(notes) == 1 and cause in notes[0], log.messages


# ------------------------------------------------------------------------ schema
SIZES = {"num_classes": 3, "feature_dim": 4, "num_examples": 5, "model": [(2, 2), (2,)]}


def test_schema_checks_kind_shape_bounds_and_totals():
    counts = PayloadSpec(
        "counts", ANSWER, "integer", ("num_classes",), nonnegative=True, total="num_examples"
    )
    assert schema.check({"counts": np.array([1, 4, 0])}, [counts], SIZES, ANSWER) is None
    assert "must be integer" in schema.check(
        {"counts": np.array([1.0, 4.0, 0.0])}, [counts], SIZES, ANSWER
    )
    assert "shape" in schema.check({"counts": np.array([5])}, [counts], SIZES, ANSWER)
    assert "negative" in schema.check({"counts": np.array([6, -1, 0])}, [counts], SIZES, ANSWER)
    assert "sums to 6" in schema.check({"counts": np.array([2, 4, 0])}, [counts], SIZES, ANSWER)
    nan = schema.check(
        {"x": np.array([np.nan, 1.0, 1.0, 1.0])},
        [PayloadSpec("x", UP, shape=("feature_dim",))],
        SIZES,
    )
    assert nan.endswith(schema.NONFINITE)


def test_schema_binds_free_sizes_and_model_shapes_and_requires_declared_arrays():
    pair = [PayloadSpec("a", UP, shape=("k",)), PayloadSpec("b", UP, shape=("k", "feature_dim"))]
    assert schema.check({"a": np.ones(2), "b": np.ones((2, 4))}, pair, SIZES) is None
    assert "shape" in schema.check({"a": np.ones(3), "b": np.ones((2, 4))}, pair, SIZES)
    delta = [PayloadSpec("d.<j>", UP, shape="model", required=True)]
    assert schema.check({"d.0": np.ones((2, 2)), "d.1": np.ones(2)}, delta, SIZES) is None
    assert schema.check({"d.0": np.ones((2, 2))}, delta, SIZES) == "payload 'd.1' missing"
    assert "parameter 2 of 2" in schema.check({"d.2": np.ones(2)}, delta, SIZES)
    assert "unknown payload 'e'" in schema.check({"e": np.ones(1)}, delta, SIZES)


# ------------------------------------------------------------ crafted fit results
def test_latent_mean_of_another_width_is_rejected_under_latent_cosine():
    fed = federation("method=fedavg", "normalize=latent_cosine")
    new = aggregate_with_attacker(fed, {protocol.LATENT_MEAN: np.ones(3, dtype=np.float32)})
    assert new is not None
    assert_attacker_rejected(fed, "payload 'latent_mean' has shape (3,)")


@pytest.mark.parametrize(
    "classes, vectors, cause",
    [
        (
            np.arange(3),
            np.ones((1, 8), dtype=np.float32),
            "prototypes_vectors' has shape",
        ),  # more classes than vectors
        (
            np.zeros((1, 1), dtype=np.int64),
            np.ones((1, 8), dtype=np.float32),
            "prototypes_classes' has shape",
        ),  # 2-D
    ],
)
def test_malformed_rebafl_prototypes_are_rejected(classes, vectors, cause):
    fed = federation("method=rebafl")
    width = fed.run.new_model().feature_dim
    vectors = np.ones((vectors.shape[0], width), dtype=np.float32)
    arrays = {
        rebafl.PROTOTYPE_CLASSES: classes,
        rebafl.PROTOTYPE_VECTORS: vectors,
        rebafl.PROTOTYPE_COUNTS: np.ones(len(classes), dtype=np.int64),
    }
    assert aggregate_with_attacker(fed, arrays) is not None
    assert_attacker_rejected(fed, cause)


def test_rebafl_class_count_of_1e300_is_rejected_and_prototypes_stay_finite():
    fed = federation("method=rebafl")
    width = fed.run.new_model().feature_dim
    arrays = {
        rebafl.PROTOTYPE_CLASSES: np.array([0]),
        rebafl.PROTOTYPE_VECTORS: np.full((1, width), 1e30, np.float32),
        rebafl.PROTOTYPE_COUNTS: np.array([1e300]),
    }
    aggregate_with_attacker(fed, arrays)
    assert_attacker_rejected(fed, "prototypes_counts' must be integer")
    assert fed.strategy.prototypes and all(
        np.all(np.abs(v) < 1e3) for v in fed.strategy.prototypes.values()
    )


def test_scaffold_control_delta_of_3e38_is_rejected_and_control_stays_small():
    fed = federation("method=scaffold")
    shape = fed.strategy.control[0].shape
    aggregate_with_attacker(fed, {"control_delta.0": np.full(shape, 3e38, dtype=np.float32)})
    assert_attacker_rejected(fed, "control_delta.0' holds values beyond 1e+06")
    assert max(float(np.abs(c).max()) for c in fed.strategy.control) < 1e3


def test_scaffold_control_variate_that_is_not_finite_is_not_adopted():
    fed = federation("method=scaffold")
    before = [c.copy() for c in fed.strategy.control]
    fed.strategy.adopt_control([np.full_like(c, np.inf) for c in before])
    assert all(np.array_equal(a, b) for a, b in zip(fed.strategy.control, before))
    assert any("control variate not finite" in m for m in fed.strategy.round_log.messages)


def fake_updates(fed):
    """Two accepted updates of the initial model (clients 0 and 1)."""
    weights = fed.run.initial_weights()
    return [ClientUpdate(pid, [w.copy() for w in weights], 10, {}) for pid in (0, 1)]


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_grpfed_q_stays_finite_when_a_loss_overflows_the_spread():
    fed = federation("method=grpfed", "influence.loss_ratio=null")  # the guard behind the bound
    started(fed)
    fed.strategy.sigma, q = 0.5, fed.strategy.q
    updates = [
        dataclasses.replace(u, metrics={**u.metrics, fed.strategy.loss_key: loss})
        for u, loss in zip(fake_updates(fed), (2.0, 1e300))
    ]
    fed.strategy.aggregate(1, updates)
    assert fed.strategy.q == q and fed.strategy.sigma == 0.5
    assert any("loss spread not finite" in m for m in fed.strategy.round_log.messages)


@pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:invalid value encountered")
def test_afl_mixture_that_is_not_finite_is_not_adopted():
    fed = federation("method=afl")
    started(fed)
    fed.strategy.lambda_lr = 1e10  # with a loss of 1e300 the ascent step overflows
    before = fed.strategy.mixture.copy()
    updates = [
        dataclasses.replace(u, metrics={protocol.INITIAL_LOSS: loss})
        for u, loss in zip(fake_updates(fed), (2.0, 1e300))
    ]
    fed.strategy.aggregate(1, updates)
    np.testing.assert_array_equal(fed.strategy.mixture, before)
    assert any("mixture weights not finite" in m for m in fed.strategy.round_log.messages)


# --------------------------------------------------------- histograms in answers
def astraea(*overrides: str) -> InProcessFederation:
    return federation(
        "method=astraea",
        "partition=longtail",
        "partition.imbalance_ratio=10",
        "method.strategy.gamma=2",
        "method.strategy.mediator_epochs=1",
        *overrides,
        num_clients=4,
    )


def announce(fed, pid: int, counts, num_examples=None) -> None:
    """Client ``pid`` announced ``counts`` (and ``num_examples``) when it joined."""
    fed.strategy.registry.partition_ids()  # discovery has run
    info = fed.strategy.registry.info(pid)
    total = info.num_examples if num_examples is None else num_examples
    fed.strategy.registry._by_pid[pid] = dataclasses.replace(
        info, label_counts=counts, num_examples=total
    )


def discovered(fed) -> None:
    fed.strategy.begin_round(1)
    fed.strategy.registry.refresh(fed.manager, wait_for=len(fed.nodes))


@pytest.mark.parametrize("counts", [np.ones(3, dtype=np.int64), np.full(10, np.nan), None])
def test_astraea_leaves_out_a_client_with_invalid_label_counts(counts):
    fed = astraea()
    discovered(fed)
    announce(fed, 3, counts)
    record = fed.round(1)
    assert 3 not in fed.strategy.counts and sorted(fed.strategy.counts) == [0, 1, 2]
    messages = record.get("messages", [])
    assert any(
        "1 client left out of the plan: label_counts invalid (client 3" in m for m in messages
    ), messages
    assert record["clients"]["succeeded"] >= 1


def test_astraea_clips_the_ratios_of_an_inflated_histogram(monkeypatch):
    fed = astraea()
    discovered(fed)
    monkeypatch.setattr(
        fed.strategy.registry, "query", lambda pids, config: {}
    )  # the plan, not its execution
    counts = np.array(fed.strategy.registry.info(3).label_counts, dtype=np.int64)
    counts[0] = 10**15
    announce(fed, 3, counts, int(counts.sum()))
    fed.strategy.registry._pid_by_device["its own data"] = 3  # a histogram the server cannot check
    fed.strategy.initialize()
    assert 3 in fed.strategy.counts
    assert fed.strategy.ratios.max() == 100.0  # unclipped: about 4e10 for the minority classes
    assert any("clipped to max_ratio 100" in m for m in fed.strategy.round_log.messages)


def test_astraea_leaves_out_a_histogram_that_is_not_its_partitions(monkeypatch):
    # a valid histogram (non-negative, summing to n) that moves samples into one class
    # would still skew everyone's plan: the server knows the partition's histogram
    fed = astraea()
    discovered(fed)
    monkeypatch.setattr(fed.strategy.registry, "query", lambda pids, config: {})
    counts = np.array(fed.strategy.registry.info(3).label_counts, dtype=np.int64)
    counts[0], counts[1:] = counts.sum(), 0
    announce(fed, 3, counts)
    fed.strategy.initialize()
    assert sorted(fed.strategy.counts) == [0, 1, 2]
    assert any(
        "left out of the plan: label_counts invalid "
        "(client 3: differs from the histogram of its partition)" in m
        for m in fed.strategy.round_log.messages
    )


def test_astraea_leaves_out_a_rebalanced_histogram_the_plan_cannot_make(monkeypatch):
    # its sum weighs the client's mediator: inflating it would buy the mediator's weight
    fed = astraea()
    discovered(fed)
    real_query = fed.strategy.registry.query

    def query(pids, config):
        answers = real_query(pids, config)
        counts = payload.unpack(answers[3])[protocol.LABEL_COUNTS] * 1000
        answers[3] = {
            **answers[3],
            protocol.NUM_EXAMPLES: int(counts.sum()),
            **payload.pack({protocol.LABEL_COUNTS: counts}),
        }
        return answers

    monkeypatch.setattr(fed.strategy.registry, "query", query)
    fed.strategy.initialize()
    assert sorted(fed.strategy.counts) == [0, 1, 2]
    assert any(
        "left out of the mediators: label_counts invalid (client 3: class" in m and "possible" in m
        for m in fed.strategy.round_log.messages
    )


def fedconcat(*overrides: str) -> InProcessFederation:
    return federation(
        "method=fedconcat",
        "num_rounds=3",
        "method.strategy.num_clusters=2",
        "method.strategy.classifier_rounds=1",
        *overrides,
        num_clients=4,
    )


@pytest.mark.parametrize("counts", [np.ones((2, 5), dtype=np.int64), None])
def test_fedconcat_leaves_out_a_client_with_invalid_label_counts(counts):
    fed = fedconcat()
    discovered(fed)
    announce(fed, 1, counts)
    fed.strategy.cluster_by_label_distributions()
    assert sorted(fed.strategy.clusters) == [0, 2, 3]
    assert any(
        "left out of the clustering: label_counts invalid (client 1" in m
        for m in fed.strategy.round_log.messages
    )


def test_fedconcat_leaves_out_a_noised_distribution_of_the_wrong_shape(monkeypatch):
    fed = fedconcat("method.strategy.laplace_epsilon=1.0")
    discovered(fed)
    real_query = fed.strategy.registry.query

    def query(pids, config):
        answers = real_query(pids, config)
        answers[0] = {**answers[0], **payload.pack({LABEL_DISTRIBUTION: np.ones(3) / 3})}
        del answers[2][payload.PREFIX + LABEL_DISTRIBUTION]
        return answers

    monkeypatch.setattr(fed.strategy.registry, "query", query)
    fed.strategy.cluster_by_label_distributions()
    assert sorted(fed.strategy.clusters) == [1, 3]
    assert any("2 clients left out of the clustering" in m for m in fed.strategy.round_log.messages)


# ------------------------------------------------------------------ honest runs
@pytest.mark.parametrize(
    "overrides",
    [
        ["method=rebafl"],
        ["method=scaffold"],
        ["method=fedavg", "normalize=latent_cosine"],
        [
            "method=astraea",
            "partition=longtail",
            "method.strategy.gamma=2",
            "method.strategy.mediator_epochs=1",
        ],
        ["method=fedconcat_id", "num_rounds=3", "method.strategy.classifier_rounds=1"],
        [
            "method=fedconcat",
            "num_rounds=3",
            "method.strategy.classifier_rounds=1",
            "method.strategy.laplace_epsilon=1.0",
        ],
        ["method=local", "num_rounds=1"],
    ],
    ids=lambda o: "+".join(x.split("=")[1] for x in o[:2]),
)
def test_declared_payloads_accept_every_honest_payload(overrides):
    fed = federation(*overrides, num_clients=2)
    record = fed.round(1)
    messages = record.get("messages", [])
    clients = record["clients"]
    assert clients["rejected"] == 0 and clients["succeeded"] == clients["sampled"] >= 1, messages
    assert not [m for m in messages if "left out" in m or "not finite" in m or "clipped" in m], (
        messages
    )
    if getattr(fed.strategy, "ensemble_global_test", False):
        assert (
            record["test"].get("macro_f1") is not None
        )  # the ensemble of the personal models' probabilities


def test_personal_ensemble_leaves_out_probabilities_of_the_wrong_shape():
    from flwr.common import EvaluateRes

    fed = federation("method=local", "num_rounds=1", num_clients=2)
    fed.round(1)
    num_test, num_classes = len(fed.run.data.dataset.y_test), fed.run.num_classes
    probs = {
        0: np.full((num_test, num_classes), 1.0 / num_classes, dtype=np.float32),
        1: np.ones((3, 3), np.float32),
    }
    results = [
        (
            fed.strategy.registry.proxy(pid),
            EvaluateRes(
                status=OK,
                loss=1.0,
                num_examples=1,
                metrics=payload.pack({protocol.GLOBAL_TEST_PROBS: p}),
            ),
        )
        for pid, p in probs.items()
    ]
    fed.strategy.aggregate_evaluate(1, results, [])
    assert fed.strategy.round_log.test["accuracy"] == pytest.approx(
        np.mean(fed.run.data.dataset.y_test == 0)
    )
    assert any(
        "1 client left out of the ensemble: global_test_probs invalid (client 1" in m
        for m in fed.strategy.round_log.messages
    )
