"""What one client's fit result may carry: each crafted reply below is rejected and counted
(one note), never aggregated and never an exception out of ``aggregate_fit``."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import FitRes, parameters_to_ndarrays

from fedimb.core import protocol
from tests.strategy_rounds import fit_result, started_round


def size_of(strategy, pid: int) -> int:
    return int(strategy.run.data.partition.counts[pid].sum())


def honest(base, value: float):
    return [
        np.full_like(a, value) if np.issubdtype(a.dtype, np.floating) else a.copy() for a in base
    ]


def aggregate_with(strategy, nodes, base, attacker: FitRes):
    """Round 1 with two honest clients (all ones, all threes) and ``attacker`` as client 2."""
    results = [
        (nodes[0], fit_result(honest(base, 1.0), size_of(strategy, 0))),
        (nodes[1], fit_result(honest(base, 3.0), size_of(strategy, 1))),
        (nodes[2], attacker),
    ]
    new, _ = strategy.aggregate_fit(1, results, [])
    return new


def reporting_initial_losses(strategy, nodes, base, losses: list[float]):
    """Round 1's results of clients 0.. (client k's arrays all 1 + k), client k reporting
    ``losses[k]`` as its loss before training."""
    return [
        (
            nodes[pid],
            fit_result(
                honest(base, 1.0 + pid),
                size_of(strategy, pid),
                **{protocol.INITIAL_LOSS: loss},
            ),
        )
        for pid, loss in enumerate(losses)
    ]


def assert_only_honest_averaged(strategy, new, base):
    log = strategy.round_log
    assert log.rejected == 1 and log.succeeded == 2
    assert any("update of client 2 rejected" in m for m in log.messages)
    n0, n1 = size_of(strategy, 0), size_of(strategy, 1)
    expected = (n0 * 1.0 + n1 * 3.0) / (n0 + n1)
    merged = parameters_to_ndarrays(new)
    assert [a.dtype for a in merged] == [a.dtype for a in base]
    assert all(
        np.allclose(m, expected)
        for m, a in zip(merged, base)
        if np.issubdtype(a.dtype, np.floating)
    )


def _cast(base, dtype):
    return [a.astype(dtype) for a in base]


@pytest.mark.parametrize("dtype", ["int64", "float16", "complex64", "<U3", "datetime64[s]"])
def test_arrays_of_another_dtype_are_rejected(dtype):
    # int64 with n = 1 was adopted as the global model's dtype (zeros: accuracy 0.100);
    # float16 made the global model float16; complex, text, dates raised UFuncTypeError
    strategy, nodes, base = started_round()
    new = aggregate_with(strategy, nodes, base, fit_result(_cast(base, dtype), 1))
    assert_only_honest_averaged(strategy, new, base)
    assert any(
        f"is {np.dtype(dtype)}, the server sent float32" in m for m in strategy.round_log.messages
    )


def test_more_samples_than_the_partition_holds_are_rejected():
    strategy, nodes, base = started_round()
    new = aggregate_with(strategy, nodes, base, fit_result(honest(base, 100.0), 10**12))
    assert_only_honest_averaged(strategy, new, base)
    assert any(
        f"exceeds the {size_of(strategy, 2):,} training samples" in m
        for m in strategy.round_log.messages
    )


def test_a_device_with_its_own_data_is_bounded_by_the_size_it_announced():
    strategy, nodes, base = started_round()
    strategy.registry._pid_by_device["fingerprint"] = 2  # client 2 joined with its own data
    announced = strategy.registry.info(2).num_examples
    assert strategy.training_size(2) == announced
    assert strategy.check_num_examples(2, announced) is None
    assert "exceeds" in strategy.check_num_examples(2, announced + 1)


@pytest.mark.parametrize("n", [0, -3, True, 2.5])
def test_sample_counts_must_be_positive_integers(n):
    strategy, nodes, base = started_round()
    assert "num_examples must be a positive integer" in strategy.check_num_examples(2, n)


def test_finite_weights_too_large_to_compute_with_are_rejected():
    # 3e38 is a finite float32, but its square is not: the global model became ~1.5e36
    strategy, nodes, base = started_round()
    new = aggregate_with(
        strategy, nodes, base, fit_result(honest(base, 3e38), size_of(strategy, 2))
    )
    assert_only_honest_averaged(strategy, new, base)
    assert any("square overflows float32" in m for m in strategy.round_log.messages)


@pytest.mark.parametrize(
    "metrics, cause",
    [
        ({f"m{i}": 1.0 for i in range(300)}, "301 metrics, more than 256"),  # with train_loss
        ({"note": "x" * 2000}, "metric 'note' is a text of 2,000 characters"),
        ({"k" * 2000: 1.0}, "a metric key of 2,000 characters"),
    ],
)
def test_metrics_out_of_bounds_are_rejected(metrics, cause):
    strategy, nodes, base = started_round()
    attacker = fit_result(honest(base, 5.0), size_of(strategy, 2))
    attacker.metrics.update(metrics)
    new = aggregate_with(strategy, nodes, base, attacker)
    assert_only_honest_averaged(strategy, new, base)
    assert any(cause in m for m in strategy.round_log.messages)


@pytest.mark.parametrize("value", ["high", float("nan"), float("inf")])
def test_a_metric_that_is_no_finite_number_does_not_pull_the_others_mean(value):
    strategy, nodes, base = started_round()
    attacker = fit_result(honest(base, 2.0), size_of(strategy, 2), train_loss=value)
    strategy.aggregate_fit(
        1,
        [
            (nodes[0], fit_result(honest(base, 1.0), size_of(strategy, 0), train_loss=2.0)),
            (nodes[2], attacker),
        ],
        [],
    )
    assert strategy.round_log.succeeded == 2  # the model is fine: only the metric is left out
    assert strategy.round_log.client_metrics["train_loss"] == pytest.approx(2.0)


def test_a_check_that_raises_rejects_that_client_only(monkeypatch):
    strategy, nodes, base = started_round()
    original = strategy.check_payloads

    def fragile(named, num_examples=None):
        if "latent_mean" in named:
            raise IndexError("index 7 is out of bounds")
        return original(named, num_examples)

    monkeypatch.setattr(strategy, "check_payloads", fragile)
    from fedimb.core import payload

    attacker = fit_result(honest(base, 5.0), size_of(strategy, 2))
    attacker.metrics.update(payload.pack({protocol.LATENT_MEAN: np.zeros(3, dtype=np.float32)}))
    new = aggregate_with(strategy, nodes, base, attacker)
    assert_only_honest_averaged(strategy, new, base)
    assert any(
        "unreadable update (IndexError: index 7 is out of bounds)" in m
        for m in strategy.round_log.messages
    )


def test_a_non_finite_aggregate_is_not_adopted():
    # q-FedAvg's loss powers of a finite but huge loss (1e40, q = 10) make the step NaN; it was
    # adopted
    strategy, nodes, base = started_round("method=qffl", "method.strategy.update=qfedavg")
    strategy.run.client_training_loss = lambda weights, pid: (
        1e40 if pid == 2 else 2.0
    )  # as the server finds them
    results = reporting_initial_losses(strategy, nodes, base, [2.0, 2.0, 1e40])
    new, _ = strategy.aggregate_fit(1, results, [])
    assert new is None
    assert all(np.array_equal(a, b) for a, b in zip(strategy.current_weights, base))
    assert any("the aggregate holds NaN or Inf" in m for m in strategy.round_log.messages)


@pytest.mark.parametrize("method", ["qffl", "afl", "grpfed"])
@pytest.mark.parametrize("factor", [1.25, 1e38])
def test_a_loss_the_server_can_compute_must_be_that_loss(method, factor):
    # q-FFL's F_k^q (q = 10): a loss 1.25 times the truth took ~9 times the weight, 1e40 all of it
    extra = ["method.client.loss_at=received"] if method == "grpfed" else []
    strategy, nodes, base = started_round(f"method={method}", *extra)
    truth = [strategy.run.client_training_loss(base, pid) for pid in range(3)]
    losses = [truth[pid] * (factor if pid == 2 else 1.0) for pid in range(3)]
    strategy.aggregate_fit(1, reporting_initial_losses(strategy, nodes, base, losses), [])
    log = strategy.round_log
    assert log.succeeded == 2 and log.rejected == 1
    assert any(
        "update of client 2 rejected: initial_loss" in m
        and "is not the loss of the model it was sent" in m
        for m in log.messages
    )


def test_a_device_with_its_own_data_reports_a_loss_the_server_cannot_check():
    strategy, nodes, base = started_round("method=qffl")
    strategy.registry._pid_by_device["fingerprint"] = 2
    res = fit_result(base, 10, **{protocol.INITIAL_LOSS: 123.0})
    assert strategy.check_reported_loss(2, res, protocol.INITIAL_LOSS) is None
    assert "positive number" in strategy.check_reported_loss(
        2, fit_result(base, 10, **{protocol.INITIAL_LOSS: -1.0}), protocol.INITIAL_LOSS
    )
