"""Bounded influence: what a client reports is bounded relative to the others before it
weighs the client or feeds a server step; every cut is counted (``clients.bounded``) and
noted, and honest values pass untouched."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from fedimb.core import protocol
from fedimb.core.errors import ConfigError
from fedimb.core.influence import (
    InfluenceSettings,
    bound_above,
    bound_norms,
    bound_within,
    others_medians,
)
from tests.strategy_rounds import fit_result, started_round
from tests.unit.test_payload_schemas import (
    aggregate_with_attacker,
    federation,
    honest_reply,
    started,
    tampered,
)
from tests.unit.test_update_checks import honest, size_of

# ------------------------------------------------------------------------ the math


def test_each_value_is_compared_with_the_median_of_the_others():
    assert others_medians([1.0, 2.0, 10.0, 4.0]).tolist() == [4.0, 4.0, 2.0, 2.0]
    assert np.isnan(others_medians([3.0])).all()


def test_bound_above_cuts_only_what_exceeds_ratio_times_the_others_median():
    values, cut = bound_above([1.0, 2.0, 3.0, 100.0], ratio=5)
    # the others' medians: 3, 3, 2, 2 -> ceilings 15, 15, 10, 10
    assert values.tolist() == [1.0, 2.0, 3.0, 10.0] and cut == [3]
    values, cut = bound_above([1.0, 2.0, 3.0, 100.0], ratio=5, floor=30.0)
    assert values.tolist() == [1.0, 2.0, 3.0, 100.0] and cut == []
    assert bound_above([0.0, 0.0, 5.0], ratio=2)[1] == []  # nothing to compare against


def test_bound_within_cuts_on_both_sides():
    values, cut = bound_within([0.01, 1.0, 1.0, 1.0, 50.0], ratio=4)
    assert values.tolist() == [0.25, 1.0, 1.0, 1.0, 4.0] and cut == [0, 4]


def test_bound_norms_keeps_the_direction_and_the_dtype():
    vectors = [np.array([3.0, 4.0], np.float32), np.array([0.0, 5.0], np.float32)]
    vectors.append(np.array([-300.0, 400.0], np.float32))  # norm 500
    bounded, cut, norms = bound_norms(vectors, ratio=2)
    assert cut == [2] and norms.tolist() == [5.0, 5.0, 500.0]
    assert bounded[2].dtype == np.float32
    assert np.allclose(bounded[2], [-6.0, 8.0])  # 2 x the others' median norm of 5


@pytest.mark.parametrize("value", [1, 0.5, -2, float("nan"), True, "10"])
def test_a_bound_must_be_a_number_above_one(value):
    with pytest.raises(ConfigError, match="influence.ratio must be a number > 1 or null"):
        InfluenceSettings(ratio=value).check()


# ------------------------------------------------------------------------ the strategies


def announces(strategy, pid: int, num_examples: int) -> None:
    """Client ``pid`` is a device that joined with its own data, announcing ``num_examples``."""
    strategy.registry._pid_by_device["fingerprint"] = pid
    info = strategy.registry.info(pid)
    strategy.registry._by_pid[pid] = dataclasses.replace(info, num_examples=num_examples)


def test_a_device_announcing_a_trillion_samples_does_not_take_over_the_average():
    # before: the announcement was the device's bound, so 10**12 samples took the whole mean
    strategy, nodes, base = started_round()
    announces(strategy, 2, 10**12)
    n0, n1 = size_of(strategy, 0), size_of(strategy, 1)
    results = [
        (nodes[0], fit_result(honest(base, 1.0), n0)),
        (nodes[1], fit_result(honest(base, 3.0), n1)),
        (nodes[2], fit_result(honest(base, 5.0), 10**12)),
    ]
    new, _ = strategy.aggregate_fit(1, results, [])
    ceiling = int(strategy.influence.ratio * np.median([n0, n1]))
    expected = (n0 * 1.0 + n1 * 3.0 + ceiling * 5.0) / (n0 + n1 + ceiling)
    merged = parameters_to_ndarrays(new)
    assert np.allclose(merged[0], expected)
    record = strategy.round_record()
    assert record["clients"]["bounded"] == 1 and record["influence"] == {"bounded": [2]}
    assert record["clients"]["rejected"] == 0
    assert any(
        f"num_examples 1,000,000,000,000 cut to {ceiling:,}" in m for m in record["messages"]
    )


def test_a_device_cannot_report_more_than_it_announced():
    strategy, nodes, base = started_round()
    announces(strategy, 2, 50)
    assert "exceeds the 50 training samples" in strategy.check_num_examples(2, 51)


def test_honest_sizes_and_updates_are_not_bounded():
    strategy, nodes, base = started_round()
    results = [
        (nodes[pid], fit_result(honest(base, 1.0 + pid), size_of(strategy, pid)))
        for pid in range(3)
    ]
    strategy.aggregate_fit(1, results, [])
    assert strategy.round_record()["clients"]["bounded"] == 0
    assert strategy.round_log.extra["influence.update_norm"] < strategy.influence.update_ratio


def test_weights_of_1e19_are_cut_and_counted_and_the_honest_stay_finite():
    # before: 1e19 (finite, its square within float32) made the global model 5e16 and the
    # honest clients of the next round non-finite
    strategy, nodes, base = started_round()
    results = [
        (nodes[0], fit_result(honest(base, 1.0), size_of(strategy, 0))),
        (nodes[1], fit_result(honest(base, 3.0), size_of(strategy, 1))),
        (nodes[2], fit_result(honest(base, 1e19), size_of(strategy, 2))),
    ]
    new, _ = strategy.aggregate_fit(1, results, [])
    merged = parameters_to_ndarrays(new)
    assert strategy.round_log.bounded == {2} and strategy.round_log.rejected == 0
    # the attacker's update is cut to update_ratio (10) times the others' median norm
    # (~2,600 over ~17,000 values: ~20 a value), so the average stays within a few tens
    assert max(float(np.abs(m).max()) for m in merged) < 100
    assert any("update norm" in m and "cut to" in m for m in strategy.round_log.messages)


@pytest.mark.parametrize("factor", [5.0, 100.0])
def test_grpfed_training_loss_far_above_the_received_models_loss_is_cut(factor):
    # before: GRP-FED's training loss was taken as reported (1e6: all the weight); without
    # the server's replay of the training (which rejects any other loss) it is bounded
    strategy, nodes, base = started_round(
        "method=grpfed", "method.strategy.q0=10", "method.strategy.replay_training=false"
    )
    ratio = strategy.influence.loss_ratio
    received = [strategy.run.client_training_loss(base, pid) for pid in range(3)]
    losses = [0.5 * received[0], 2.0 * received[1], factor * received[2]]
    results = [
        (
            nodes[pid],
            fit_result(honest(base, 1.0 + pid), size_of(strategy, pid), train_loss=losses[pid]),
        )
        for pid in range(3)
    ]
    new, _ = strategy.aggregate_fit(1, results, [])
    log = strategy.round_log
    assert log.bounded == {2} and log.succeeded == 3
    ceiling = ratio * max(received[2], float(np.median(received)))
    assert strategy.last_loss[2] == pytest.approx(ceiling)
    assert strategy.last_loss[1] == pytest.approx(losses[1])  # within the bound: untouched
    # the weights are those of the cut losses
    lam = np.array([losses[0], losses[1], ceiling]) ** 10
    lam /= lam.sum()
    expected = sum(w * (1.0 + pid) for pid, w in enumerate(lam))
    assert np.allclose(parameters_to_ndarrays(new)[0], expected, rtol=1e-5)


def test_a_device_loss_far_from_the_others_is_bounded():
    strategy, nodes, base = started_round("method=qffl")
    announces(strategy, 2, size_of(strategy, 2))
    truth = [strategy.run.client_training_loss(base, pid) for pid in range(2)]
    results = [
        (
            nodes[pid],
            fit_result(
                honest(base, 1.0 + pid),
                size_of(strategy, pid),
                **{protocol.INITIAL_LOSS: truth[pid] if pid < 2 else 1e6},
            ),
        )
        for pid in range(3)
    ]
    strategy.aggregate_fit(1, results, [])
    assert strategy.round_log.bounded == {2} and strategy.round_log.rejected == 0
    assert any("initial_loss 1e+06 bounded to" in m for m in strategy.round_log.messages)


def test_scaffold_control_deltas_just_inside_the_declared_bound_are_cut():
    # before: deltas of 1e6 - 1 passed the declaration and took c (accuracy 0.958 -> 0.10)
    fed = federation("method=scaffold")
    deltas = {
        f"control_delta.{j}": np.full(c.shape, 999_999.0, dtype=np.float32)
        for j, c in enumerate(fed.strategy.control)
    }
    aggregate_with_attacker(fed, deltas)
    log = fed.strategy.round_log
    assert log.bounded == {2} and log.rejected == 0
    assert any("control_delta" in m and "cut to" in m for m in log.messages)
    largest = max(float(np.abs(c).max()) for c in fed.strategy.control)
    assert largest < 1e3


def ccvr_after_round_1():
    fed = federation("method=ccvr", "num_rounds=1", num_clients=4)
    fed.round(1)
    return fed.strategy, parameters_to_ndarrays(fed.parameters)


def test_ccvr_statistics_the_server_can_recompute_must_be_those_of_the_clients_data():
    # before: class means of 1e9 and covariances of 1e15 from one client of ten made the
    # calibrated head predict one class (0.45 -> 0.10), counting nothing; bounded at 50x
    # the others' they could still move it where no validation share checks the result
    from clients.ccvr import FEATURE_MEANS

    strategy, weights = ccvr_after_round_1()
    assert sorted(strategy.client_statistics(1, weights)) == [0, 1, 2, 3]  # honest: all kept
    original = strategy.registry.query

    def crafted(pids, question):
        answers = original(pids, question)
        means = unpacked(answers[3])[FEATURE_MEANS]
        answers[3] = {**answers[3], **packed({FEATURE_MEANS: means * 1.5})}  # within any bound
        return answers

    strategy.registry.query = crafted
    assert sorted(strategy.client_statistics(1, weights)) == [0, 1, 2]
    assert strategy.round_log.extra["clients_left_out"] == 1
    assert any("recomputed by the server" in m for m in strategy.round_log.messages)


def test_ccvr_huge_finite_statistics_are_bounded_and_counted():
    # a device with its own data: the server cannot recompute its statistics, so they
    # are bounded relative to the others'
    from clients.ccvr import FEATURE_COVARIANCES, FEATURE_MEANS

    strategy, weights = ccvr_after_round_1()
    statistics = strategy.client_statistics(1, weights)
    statistics[3] = {
        **statistics[3],
        FEATURE_MEANS: np.full_like(statistics[3][FEATURE_MEANS], 1e9),
        FEATURE_COVARIANCES: np.full_like(statistics[3][FEATURE_COVARIANCES], 1e15),
    }
    means, covariances, counts = strategy.bounded_statistics(statistics)
    assert 3 in strategy.round_log.bounded
    honest_norm = max(np.linalg.norm(m, axis=1).max() for m in means[:3])
    assert (
        np.linalg.norm(means[3], axis=1).max() <= strategy.influence.statistic_ratio * honest_norm
    )


def unpacked(answer):
    from fedimb.core import payload

    return payload.unpack(answer)


def packed(arrays):
    from fedimb.core import payload

    return payload.pack(arrays)


def test_creff_rejects_a_class_reported_twice():
    # before: duplicated class rows counted one client twice in g_c (0.686 -> 0.142)
    from clients.creff import GRADIENT_BIASES, GRADIENT_CLASSES, GRADIENT_WEIGHTS

    fed = federation("method=creff")
    sent = started(fed)
    replies = [honest_reply(fed, sent, pid) for pid in (0, 1, 2)]
    arrays = unpacked(replies[2][1].metrics)
    twice = {
        GRADIENT_CLASSES: np.concatenate([arrays[GRADIENT_CLASSES][:1]] * 2),
        GRADIENT_WEIGHTS: np.concatenate([arrays[GRADIENT_WEIGHTS][:1]] * 2),
        GRADIENT_BIASES: np.concatenate([arrays[GRADIENT_BIASES][:1]] * 2),
    }
    replies[2] = tampered(replies[2], **twice)
    fed.strategy.aggregate_fit(1, replies, [])
    log = fed.strategy.round_log
    assert log.rejected == 1
    assert any("gradient_classes' repeats a value" in m for m in log.messages), log.messages


def test_a_server_step_scoring_below_the_model_it_replaces_is_not_adopted():
    fed = federation("method=ccvr", "validation.fraction=0.2", "train.lr=0.1", "num_rounds=3")
    fed.round(1)
    fed.round(2)
    strategy = fed.strategy
    trained = parameters_to_ndarrays(fed.parameters)
    head_only = [np.zeros_like(w) if i >= len(trained) - 2 else w for i, w in enumerate(trained)]
    assert strategy.validated(trained, trained, "the calibrated model")
    assert not strategy.validated(trained, head_only, "the calibrated model")
    extra = strategy.round_log.extra
    assert (
        extra["the_calibrated_model.validation_after"]
        < (extra["the_calibrated_model.validation_before"])
    )
    assert any("below the" in m and "not adopted" in m for m in strategy.round_log.messages)


def test_rebafl_prototypes_far_longer_than_the_others_are_cut():
    fed = federation("method=rebafl")
    sent = started(fed)
    replies = [honest_reply(fed, sent, pid) for pid in (0, 1, 2)]
    arrays = unpacked(replies[2][1].metrics)
    replies[2] = tampered(replies[2], prototypes_vectors=arrays["prototypes_vectors"] * 1e6)
    fed.strategy.aggregate_fit(1, replies, [])
    assert fed.strategy.round_log.bounded == {2}
    honest_norm = max(
        float(np.linalg.norm(v))
        for _, res in replies[:2]
        for v in unpacked(res.metrics)["prototypes_vectors"]
    )
    assert all(
        np.linalg.norm(p) <= fed.strategy.influence.statistic_ratio * honest_norm
        for p in fed.strategy.prototypes.values()
    )


def test_a_robust_rule_records_the_clients_it_set_aside():
    strategy, nodes, base = started_round(
        "aggregation=multikrum", "aggregation.max_attackers=1", num_clients=5
    )
    values = [1.0, 1.1, 0.9, 1.05, -30.0]  # client 4 far from the others
    results = [
        (nodes[pid], fit_result(honest(base, v), size_of(strategy, pid)))
        for pid, v in enumerate(values)
    ]
    strategy.aggregate_fit(1, results, [])
    record = strategy.round_record()
    assert record["clients"]["set_aside"] == 1 and record["influence"]["set_aside"] == [4]
    assert any("aggregation=multikrum set aside client(s) 4" in m for m in record["messages"])


def test_the_progress_line_shows_bounded_and_set_aside_clients():
    from fedimb.cli.rundir.progress import clients_outcome

    clients = {"succeeded": 9, "dropped": 0, "errors": 0, "rejected": 1, "bounded": 1}
    assert clients_outcome(clients) == "9 ok, 1 failed, 1 bounded"
    assert clients_outcome({"succeeded": 5, "set_aside": 2}) == "5 ok, 2 set aside"


def test_fednova_local_steps_beyond_what_the_samples_allow_are_cut():
    # before: tau of 1e9 made tau_eff ~5e8, scaling every other client's update by it
    fed = federation("method=fednova")
    sent = started(fed)
    replies = [honest_reply(fed, sent, pid) for pid in (0, 1, 2)]
    honest_steps = [float(res.metrics["local_steps"]) for _, res in replies]
    proxy, res = replies[2]
    replies[2] = (proxy, dataclasses.replace(res, metrics={**res.metrics, "local_steps": 1e9}))
    fed.strategy.aggregate_fit(1, replies, [])
    log = fed.strategy.round_log
    assert log.bounded == {2} and any("local_steps 1,000,000,000 cut to" in m for m in log.messages)
    assert log.extra["tau_eff_steps"] <= max(honest_steps)  # the honest clients' own steps
