"""Asynchronous aggregation in process (``mode=fedasync|fedbuff``): FedBuff with every
client at once, a buffer of all and no delays is synchronous FedAvg to the last bit; a
server step applies the staleness-weighted mean of the buffered updates; a resumed run is
the uninterrupted one; bad settings are one-line errors; the progress line shows it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from flwr.common import Code, FitRes, Status
from flwr.common import ndarrays_to_parameters as to_parameters
from flwr.common import parameters_to_ndarrays as to_arrays

from fedimb.app.configuration.compose import compose
from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.app.server.async_queue import Arrival
from fedimb.cli.rundir.progress import round_line
from fedimb.core.errors import ConfigError

SETUP = ["dataset=digits", "num_clients=4", "train.local_epochs=1", "dropout=none"]
FEDBUFF = ["mode=fedbuff", "mode.concurrency=3", "mode.buffer_size=2", "speed=lognormal"]


def rounds(overrides: list[str], count: int) -> tuple[InProcessFederation, list[dict]]:
    fed = InProcessFederation([*SETUP, f"num_rounds={count}", *overrides])
    return fed, [fed.round(r) for r in range(1, count + 1)]


def same_arrays(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(to_arrays(a), to_arrays(b)))


def test_fedbuff_with_every_client_at_once_is_fedavg_to_the_last_bit():
    sync, _ = rounds([], 3)
    buffered, records = rounds(["mode=fedbuff", "mode.concurrency=4", "mode.buffer_size=4"], 3)
    assert same_arrays(sync.parameters, buffered.parameters)
    assert records[-1]["extra"]["async.updates"] == 4
    assert records[-1]["extra"]["async.staleness_max"] == 0


def test_fedbuff_step_is_the_staleness_weighted_mean(monkeypatch):
    """Two buffered updates of known staleness through the method's own checks and
    average: x + eta * sum_k n_k s(tau_k) (y_k - x_k) / sum_k n_k (FedBuff, Algorithm 1)."""
    fed, _ = rounds([*FEDBUFF, "mode.server_lr=0.5"], 3)
    loop, version = fed.server.asynchronous, 4
    current = to_arrays(fed.parameters)
    old = [a - 0.1 for a in current]  # the model two versions back (tau = 2)
    loop.models = {version - 1: current, version - 3: old}
    fresh = [a + 0.3 for a in current]
    stale = [a + 0.2 for a in old]
    arrivals = []
    n = [fed.strategy.training_size(pid) for pid in (0, 1)]  # what the server weighs by
    for pid, start, arrays in ((0, version - 1, fresh), (1, version - 3, stale)):
        proxy = fed.strategy.registry.proxy(pid)
        res = FitRes(Status(Code.OK, ""), to_parameters(arrays), n[pid], {})
        arrivals.append(Arrival(pid, start, arrays, (proxy, res), 0.0))
    fed.strategy.begin_round(version)
    parameters, _ = loop._apply(version, current, arrivals, [])
    s = 1 / np.sqrt(3)
    for got, x in zip(to_arrays(parameters), current):
        if np.issubdtype(x.dtype, np.floating):
            expected = x + 0.5 * (n[0] * 0.3 + n[1] * s * 0.2) / (n[0] + n[1])
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [FEDBUFF, ["mode=fedasync", "mode.concurrency=2", "speed=edge"]])
def test_resumed_asynchronous_run_is_the_uninterrupted_one(tmp_path, mode):
    """The checkpoint after step 2 holds the clients in flight; a run resumed from it
    sends them their instructions again and ends where the uninterrupted run ends."""
    keys = [
        "checkpoint.enabled=true",
        f"checkpoint.dir={tmp_path}",
        "checkpoint.experiment=async",
        "checkpoint.run_id=r",
    ]
    whole = InProcessFederation([*SETUP, "num_rounds=4", *mode, *keys])
    whole.server.checkpointing = True
    for r in (1, 2):
        whole.round(r)
    saved = tmp_path / "after-2.npz"
    shutil.copy(whole.server.checkpoint_file, saved)
    assert whole.server.asynchronous.in_flight  # clients were in flight at the checkpoint
    last = [whole.round(r) for r in (3, 4)][-1]
    shutil.copy(saved, whole.server.checkpoint_file)
    resumed = InProcessFederation([*SETUP, "num_rounds=4", *mode, *keys, "resume=true"])
    resumed.server.checkpointing = True
    again = [resumed.round(r) for r in (3, 4)][-1]
    assert same_arrays(whole.parameters, resumed.parameters)
    assert again["extra"]["clock.time"] == last["extra"]["clock.time"]
    assert again["test"] == last["test"]


def test_a_method_that_changes_only_the_client_runs_asynchronously():
    _, records = rounds(["method=fedlc", *FEDBUFF], 2)
    assert [r["extra"]["async.updates"] for r in records] == [2, 2]
    assert all(r["clients"]["rejected"] == 0 for r in records)


def test_clients_that_always_fail_end_a_step_counted_and_the_model_kept():
    fed, records = rounds([*FEDBUFF, "fault.kind=raise", "fault.clients=[0,1,2,3]"], 1)
    assert records[0]["clients"]["errors"] == 9  # three failed fits per client slot
    assert records[0]["extra"]["async.updates"] == 0
    assert same_arrays(fed.parameters, InProcessFederation([*SETUP, *FEDBUFF]).parameters)


@pytest.mark.parametrize("kind", ["shape", "nan"])
@pytest.mark.parametrize("mode", [FEDBUFF, ["mode=fedasync", "mode.concurrency=3"]])
def test_a_bad_update_is_rejected_and_counted_not_applied(kind, mode):
    fed, records = rounds([*mode, f"fault.kind={kind}", "fault.clients=[0,1,2,3]"], 2)
    assert all(r["clients"]["rejected"] == r["extra"]["async.updates"] > 0 for r in records)
    assert same_arrays(fed.parameters, InProcessFederation([*SETUP, *mode]).parameters)


SLOW_EDGE = ["speed=edge", "speed.seconds_per_sample=0.01"]  # one client far slower


@pytest.mark.parametrize("mode", [FEDBUFF, ["mode=fedasync", "mode.concurrency=3", *SLOW_EDGE]])
def test_participation_balance_changes_the_steps_once_counts_differ(mode):
    plain, _ = rounds(mode, 6)
    balanced, _ = rounds([*mode, "mode.balance=participation"], 6)
    assert not same_arrays(plain.parameters, balanced.parameters)


def test_fedasync_progress_line_shows_updates_staleness_and_simulated_time():
    _, records = rounds(["mode=fedasync", "mode.concurrency=3", "speed=lognormal"], 3)
    line = round_line(records[-1], 3, 1.0, [0.1, 0.1, 0.1])
    assert "1 updates, staleness" in line and "sim " in line
    times = [r["extra"]["clock.time"] for r in records]
    assert times == sorted(times) and times[0] > 0


def test_sync_deadline_leaves_slow_clients_out_and_bounds_the_round():
    _, free = rounds(["speed=edge", "speed.slow_fraction=0.5"], 2)
    _, bounded = rounds(["speed=edge", "speed.slow_fraction=0.5", "mode.deadline=0.6"], 2)
    assert free[-1]["extra"]["clock.time"] > 1.2  # two rounds of the slowest client
    assert bounded[-1]["extra"]["clock.time"] == 1.2  # two rounds of the deadline
    assert bounded[-1]["extra"]["clock.late"] == 2 and bounded[-1]["clients"]["succeeded"] == 2


BUFF = ["mode=fedbuff", "mode.concurrency=3"]
ASYNC = ["mode=fedasync", "mode.concurrency=3"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([*BUFF, "mode.buffer_size=0"], "mode.buffer_size must be an integer >= 1"),
        (["mode=fedasync", "mode.concurrency=30"], r"mode.concurrency \(30\) must be at most"),
        ([*BUFF, "mode.buffer_size=2", "method=scaffold"], "'scaffold' needs synchronous rounds"),
        ([*BUFF, "mode.buffer_size=2", "method=ccvr"], "method 'ccvr' needs synchronous rounds"),
        ([*ASYNC, "method=fedavgm"], "method 'fedavgm' needs synchronous rounds"),
        ([*ASYNC, "secagg=secaggplus"], "cannot run secagg=secaggplus"),
        ([*ASYNC, "mode.alpha=1.5"], r"mode.alpha must be in \(0, 1\]"),
        (["mode.deadline=2"], "choose a speed model"),
        (["speed=lognormal", "runtime=deployment"], "a deployment's clock is the real one"),
    ],
)
def test_bad_asynchronous_settings_are_one_line_errors(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        compose([*SETUP, *overrides])
    assert "\n" not in str(err.value)
