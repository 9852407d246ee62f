"""The check that the local evaluation is right: on Synthetic the global test set is the
union of the devices' own test sets, so the devices' accuracies weighted by their test
samples must give the global test accuracy exactly, while the reported average weights
every device alike (q-FFL's convention) and may lie far from it."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.runtimes.in_process import InProcessFederation
from fedimb.core.data.synthetic import device_sizes, synthetic_spec, train_count

NUM_DEVICES = 6
# seed 3 draws devices of 51 to 1,244 samples: 5 to 124 test samples each
SYNTHETIC = [
    "dataset=synthetic",
    "partition=natural",
    f"num_clients={NUM_DEVICES}",
    "seed=3",
    "train.local_epochs=1",
    "num_rounds=3",
]


@pytest.mark.parametrize("method", ["fedavg", "qffl"])
@pytest.mark.parametrize("path", ["server", "clients"])
def test_the_sample_weighted_mean_of_the_devices_accuracies_is_the_global_test_accuracy(
    method, path
):
    fed = InProcessFederation([*SYNTHETIC, f"method={method}"])
    if path == "clients":  # each client tests its own rows, as where the server lacks them
        fed.run.__dict__.update(holds_client_tests=False, has_local_tests=True)
    sizes = devices_test_samples(fed)
    assert sizes.max() > 3 * np.median(sizes)  # unequal enough for the two means to differ
    for server_round in (1, 2, 3):
        record = fed.round(server_round)
        local = record["local"]["global"]
        accuracies = np.array([local["accuracy"][k] for k in range(NUM_DEVICES)])
        assert local["clients"] == NUM_DEVICES
        assert np.dot(accuracies, sizes) / sizes.sum() == pytest.approx(
            record["test"]["accuracy"], abs=1e-12
        )
        assert local["average"] == pytest.approx(accuracies.mean(), abs=1e-12)


def devices_test_samples(fed: InProcessFederation) -> np.ndarray:
    """Each device's test samples, from its draw's size alone (not from the evaluation)."""
    sizes = device_sizes(synthetic_spec(fed.cfg.dataset))
    return np.array([int(s) - train_count(int(s)) for s in sizes], dtype=np.float64)
