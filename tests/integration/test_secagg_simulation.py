"""``secagg=secaggplus`` in Flower's simulation: the same FedAvg round with and without
SecAgg+ (``flwr run`` against one local SuperLink), whose global models, read from the
ServerApp's checkpoints, agree within the quantisation error and no closer than the
masking's rounding leaves them."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.configuration import compose as config
from fedimb.app.privacy import secagg
from fedimb.app.server import checkpoint
from fedimb.app.server.run_context import ServerRun
from tests.flwr_runs import flwr_run, simulation_superlink
from tests.unit.test_secagg import quantisation_bound

pytestmark = pytest.mark.slow

#: three clients of the digits data set, one round of one local epoch, every client trained
RUN = ["dataset=digits", "dropout=none", "train.local_epochs=1", "partition=iid"]


def one_round(home, connection, overrides: list[str]) -> list[dict]:
    """One round of ``overrides`` through ``flwr run``; its events."""
    run_config = f'num-rounds=1 num-clients=3 overrides="{" ".join(overrides)}"'
    return flwr_run(home, connection, run_config)


def final_model(folder) -> list[np.ndarray]:
    (path,) = folder.glob("*.npz")  # the simulation's ServerApp leaves it to the front end
    return [np.asarray(a, dtype=np.float64) for a in checkpoint.load(path)["parameters"]]


def test_secure_fedavg_equals_fedavg_within_the_quantisation_error(tmp_path, no_leaked_processes):
    with simulation_superlink(tmp_path) as (home, connection):
        plain = one_round(home, connection, [*RUN, f"checkpoint.dir={tmp_path / 'plain'}"])
        secure = one_round(
            home,
            connection,
            [*RUN, "secagg=secaggplus", f"checkpoint.dir={tmp_path / 'secure'}"],
        )
    (round1,) = [e for e in secure if e["event"] == "round" and e["round"] == 1]
    assert round1["clients"]["succeeded"] == 3 and round1["extra"]["secagg.summed"] == 3
    assert [e["clients"]["succeeded"] for e in plain if e.get("round") == 1] == [3]
    cfg = config.compose([*RUN, "num_clients=3", "num_rounds=1", "secagg=secaggplus"])
    run = ServerRun.build(cfg)
    sizes = [len(run.client_training_indices(pid)) for pid in range(3)]
    bound = quantisation_bound(secagg.settings_of(cfg), sizes)
    a, b = final_model(tmp_path / "plain"), final_model(tmp_path / "secure")
    # float32 models: each side's last bit too
    gap = max(
        float((np.abs(x - y) - 2 * np.spacing(np.abs(x).astype(np.float32))).max())
        for x, y in zip(a, b)
    )
    assert gap <= bound
    assert any(not np.array_equal(x, y) for x, y in zip(a, b))  # the quantised path was taken
