"""Where a round's time goes: every phase is reported, client timings stay out of the
training metrics, and timing a client changes nothing it computes."""

from __future__ import annotations

import numpy as np
from flwr.client import NumPyClient
from flwr.common import FitIns, ndarrays_to_parameters, parameters_to_ndarrays

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.app.server import phases

SERVER_PHASES = {
    "discover",
    "select",
    "first_reply",
    "last_reply",
    "aggregate",
    "fit",
    "end_round",
    "test",
    "federated_eval",
}
CLIENT_PHASES = {"data", "model", "train", "serialise"}


def test_every_phase_of_a_round_is_timed_and_kept_out_of_the_client_metrics():
    fed = InProcessFederation(
        ["dataset=digits", "num_clients=3", "dropout=none", "train.local_epochs=1"]
    )
    record = fed.round(1)
    timing = record["timing"]
    expected = SERVER_PHASES - {
        "fit",
        "end_round",
        "test",
        "federated_eval",
    }  # the loop's own are in the event
    expected |= {f"client_{p}" for p in CLIENT_PHASES} | {f"client_{p}_max" for p in CLIENT_PHASES}
    assert expected <= set(timing), sorted(expected - set(timing))
    assert "client_start" not in timing  # in process, the clients' start-up is the server's
    assert all(v >= 0 for v in timing.values())
    assert timing["first_reply"] <= timing["last_reply"]
    assert timing["client_train_max"] >= timing["client_train"] > 0
    assert not [k for k in record["train"] if "timing" in k or k.startswith("client_")]
    by_client = record["timing_by_client"]  # every replying client's own phases, by client id
    assert sorted(by_client) == ["0", "1", "2"]
    assert max(c["train"] for c in by_client.values()) == round(
        timing["client_train_max"], 4
    )  # kept to 0.1 ms
    assert "client_peak_memory_mb" not in timing  # in process the memory is the server's


def test_a_timed_client_computes_what_flowers_wrapper_computes():
    class Doubler:
        def fit(self, parameters, config):
            return [2 * a for a in parameters], 7, {"loss": 1.5}

    class Wrapped(Doubler, NumPyClient):
        pass

    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3)]
    ins = FitIns(ndarrays_to_parameters(arrays), {})
    plain = Wrapped().to_client().fit(ins)
    clock = phases.PhaseClock()
    with clock.phase("data"):
        pass
    startup = phases.ProcessStartup(0.0, 0.0)  # a client process of its own
    timed = phases.TimedClient(Wrapped(), clock, startup).fit(ins)
    assert [a.tobytes() for a in parameters_to_ndarrays(timed.parameters)] == [
        a.tobytes() for a in parameters_to_ndarrays(plain.parameters)
    ]
    assert timed.num_examples == plain.num_examples == 7
    metrics, timing = phases.split_client_timing(timed.metrics)
    assert metrics == {"loss": 1.5}
    assert {"data", "train", "serialise"} <= set(timing)
    import resource

    assert (
        50 < timing["peak_memory_mb"] <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )  # torch is in


def test_a_client_sending_nonsense_timings_loses_only_those():
    metrics, timing = phases.split_client_timing(
        {
            "loss": 0.5,
            "timing.train": 1.25,
            "timing.data": "slow",
            "timing.pack": float("nan"),
            "timing.model": -3.0,
        }
    )
    assert metrics == {"loss": 0.5}
    assert timing == {"train": 1.25}


def test_client_phases_are_summarised_as_mean_and_maximum():
    summary = phases.summarise_clients(
        [{"train": 1.0, "data": 0.5}, {"train": 3.0, "peak_memory_mb": 400.0}]
    )
    assert summary == {
        "client_data": 0.5,
        "client_data_max": 0.5,
        "client_train": 2.0,
        "client_train_max": 3.0,
        "client_peak_memory_mb": 400.0,
        "client_peak_memory_mb_max": 400.0,
    }


def test_a_forked_client_app_starts_when_its_launcher_forked_it(monkeypatch):
    import time

    import psutil

    from fedimb.cli.federation import node_worker

    assert node_worker.STARTED_AT_VARIABLE == phases.STARTED_AT_VARIABLE
    monkeypatch.delenv(phases.STARTED_AT_VARIABLE, raising=False)
    assert phases.process_started_at() == psutil.Process().create_time()
    forked = time.time() - 2.5  # under QEMU the system reports the launcher's creation time instead
    monkeypatch.setenv(phases.STARTED_AT_VARIABLE, repr(forked))
    assert phases.process_started_at() == forked
