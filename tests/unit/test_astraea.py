"""Astraea: client-side rebalancing, sequential mediator chains, synchronization rounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common import parameters_to_ndarrays

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core import payload, protocol
from fedimb.core.rebalance import apply_plan

AUG = {"rotation": 10.0, "shift": 0.1, "shear": 10.0, "zoom": 0.1}


def test_apply_plan_downsamples_and_augments_as_planned():
    torch.manual_seed(0)
    x = torch.randn(300, 1, 28, 28)
    y = torch.tensor([0] * 100 + [1] * 100 + [2] * 100)
    ratios = np.array([0.5, 1.0, 2.5])
    x2, y2 = apply_plan(x, y, torch.arange(300), ratios, AUG, seed=3)
    counts = np.bincount(y2.numpy(), minlength=3)
    assert counts.tolist() == [50, 100, 250]
    assert x2.shape == (400, 1, 28, 28)
    # originals of class 2 are kept unchanged; the 150 copies are transformed versions
    # (a random affine map can round to the identity now and then)
    originals = {tuple(row) for row in x[200:].reshape(100, -1).tolist()}
    kept = [
        tuple(row) for row, label in zip(x2.reshape(400, -1).tolist(), y2.tolist()) if label == 2
    ]
    assert 100 <= sum(r in originals for r in kept) <= 105
    # deterministic in the seed
    x3, y3 = apply_plan(x, y, torch.arange(300), ratios, AUG, seed=3)
    assert torch.equal(x2, x3) and torch.equal(y2, y3)


def test_plans_applied_at_once_in_threads_give_what_they_give_alone():
    # the in-process runtime's clients rebalance in threads of one process, and torchvision
    # draws from torch's global generator: each client must still get its own seed's copies
    import threading

    torch.manual_seed(0)
    x = torch.randn(400, 1, 12, 12)
    y = torch.tensor([0] * 350 + [1] * 50)
    ratios = np.array([1.0, 8.0])
    alone = {
        seed: apply_plan(x, y, torch.arange(400), ratios, AUG, seed=seed)[0]
        for seed in (1, 2, 3, 4)
    }
    together, start = {}, threading.Barrier(4)

    def rebalance(seed):
        start.wait()
        together[seed] = apply_plan(x, y, torch.arange(400), ratios, AUG, seed=seed)[0]

    threads = [threading.Thread(target=rebalance, args=(seed,)) for seed in alone]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(torch.equal(together[seed], alone[seed]) for seed in alone)


def test_fractional_ratios_round_stochastically():
    x, y = torch.zeros(10, 1, 4, 4), torch.zeros(10, dtype=torch.long)
    sizes = [
        len(apply_plan(x, y, torch.arange(10), np.array([1.25]), AUG, seed=s)[1])
        for s in range(200)
    ]
    assert set(sizes) == {12, 13} and abs(np.mean(sizes) - 12.5) < 0.15


def astraea(*overrides):
    return InProcessFederation(
        [
            "method=astraea",
            "partition=longtail",
            "partition.imbalance_ratio=10",
            "num_clients=6",
            "num_rounds=2",
            "train.local_epochs=1",
            "dropout=none",
            *overrides,
        ]
    )


def test_clients_report_rebalanced_distributions_before_training():
    fed = astraea("method.strategy.tau_d=1.0")
    fed.round(1)
    s = fed.strategy
    original = fed.run.data.partition.counts
    assert s.round_log.extra["augment_classes"] + s.round_log.extra["downsample_classes"] > 0
    for pid, counts in s.counts.items():
        expected = original[pid] * s.ratios
        assert np.all(np.abs(counts - expected) <= 1.0 + 1e-9), (pid, counts, expected)
    # the plan travels with every instruction
    assert np.array_equal(payload.unpack(s.fit_config(2))["zscore_ratios"], s.ratios)


def test_mediator_chain_is_sequential():
    fed = astraea("method.strategy.gamma=3", "method.strategy.mediator_epochs=1")
    s = fed.strategy
    assert s.steps_per_sync == 3 and s.total_rounds() == 6
    start = parameters_to_ndarrays(fed.parameters)
    fed.round(1)
    assert len(s.mediators) == 2 and all(len(m) == 3 for m in s.mediators)
    assert all(
        np.array_equal(a, b) for a, b in zip(parameters_to_ndarrays(fed.parameters), start)
    )  # not yet averaged
    after_first = [list(w) for w in s.mediator_weights]
    # step 2: every mediator's next client starts from the model the previous client returned
    instructions = s.configure_fit(
        server_round=2, parameters=fed.parameters, client_manager=fed.manager
    )
    for proxy, ins in instructions:
        pid = s.registry.partition_of(proxy)
        m = s.mediator_of[pid]
        assert pid == s.mediators[m][1]
        sent = parameters_to_ndarrays(ins.parameters)
        assert all(np.array_equal(a, b) for a, b in zip(sent, after_first[m]))


def test_sync_round_averages_mediators_by_sample_count():
    fed = astraea("method.strategy.gamma=3", "method.strategy.mediator_epochs=1")
    s = fed.strategy
    for rnd in (1, 2, 3):
        record = fed.round(rnd)
    expected_sizes = [sum(float(s.counts[p].sum()) for p in m) for m in s.mediators]
    from fedimb.core.aggregate import weighted_average

    expected = weighted_average(s.mediator_weights, expected_sizes)
    assert all(
        np.array_equal(a, b) for a, b in zip(parameters_to_ndarrays(fed.parameters), expected)
    )
    extra = record["extra"]
    assert extra["sync_round"] == 1 and extra["step"] == 2
    # client traffic: 2|w| per chain step (plus config bytes); the paper's formula adds the
    # mediator links
    c = 6
    assert extra["paper_sync_bytes"] == 2 * s.model_bytes * (2 + c)
    assert 2 * s.model_bytes * c <= extra["sync_bytes"] < extra["paper_sync_bytes"]
    assert record["test"]  # evaluated at the end of the synchronization round


def test_mediators_are_more_balanced_than_clients():
    fed = astraea(
        "method.strategy.gamma=3", "partition.client_split=dirichlet", "partition.alpha=0.2"
    )
    fed.round(1)
    extra = fed.strategy.round_log.extra
    assert extra["mediator_kl"] < extra["client_kl"]


def test_dropped_client_is_skipped_and_chain_continues():
    fed = astraea("method.strategy.gamma=3", "method.strategy.mediator_epochs=1")
    s = fed.strategy
    fed.round(1)
    after_first = [list(w) for w in s.mediator_weights]
    s.run.availability.p[:] = 0.0  # everybody drops in step 2
    record = fed.round(2)
    assert record["clients"]["dropped"] == 2 and record["clients"]["succeeded"] == 0
    assert all(
        all(np.array_equal(a, b) for a, b in zip(w, w0))
        for w, w0 in zip(s.mediator_weights, after_first)
    )
    s.run.availability.p[:] = 1.0
    instructions = s.configure_fit(
        server_round=3, parameters=fed.parameters, client_manager=fed.manager
    )
    for proxy, ins in instructions:  # the third client starts from the first client's model
        m = s.mediator_of[s.registry.partition_of(proxy)]
        assert all(
            np.array_equal(a, b)
            for a, b in zip(parameters_to_ndarrays(ins.parameters), after_first[m])
        )


@pytest.mark.parametrize("method,chain", [("astraea_aug", 1), ("astraea_sched", 3)])
def test_ablations(method, chain):
    fed = InProcessFederation(
        [
            f"method={method}",
            "partition=longtail",
            "num_clients=6",
            "dropout=none",
            "train.local_epochs=1",
            "method.strategy.gamma=3",
        ]
    )
    s = fed.strategy
    assert s.chain_length == chain
    fed.round(1)
    if method == "astraea_sched":
        assert np.all(s.ratios == 1.0)
    else:
        assert all(len(m) == 1 for m in s.mediators)


def test_a_client_rebalances_its_own_samples_when_an_earlier_run_gave_its_id_others():
    # two runs in one process (a sweep): client 0 of each holds other samples, and under
    # one plan the second must not be handed the first one's rebalanced data
    for seed in (1, 2):
        fed = InProcessFederation(
            [
                f"seed={seed}",
                "method=astraea",
                "partition=dirichlet",
                "partition.alpha=0.2",
                "num_clients=4",
                "dropout=none",
            ]
        )
        fed.strategy.ratios = np.full(10, 1.5)
        plan = {**fed.strategy.fit_config(0), protocol.SEED: 0}  # one plan and seed for both runs
        client = fed.client(fed.nodes[0])
        original, after = client.data.label_counts, client.rebalanced(plan).label_counts
        assert np.all(after[original == 0] == 0) and np.all(after >= original)
