"""Every method config instantiates and trains two rounds in process (no Flower runtime),
on the small ``digits`` data set to keep this fast, and on Synthetic(1, 1) with the convex
``mclr`` model (one device per client); method-specific tests use mnist5k, and the
label-skew methods of 2021-2024 train two rounds on it here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flwr.common import parameters_to_ndarrays

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.compose import compose, group_choices, smoke_overrides
from fedimb.app.runtimes.in_process import InProcessFederation

METHODS = group_choices("method")
DATA = {"digits": ["dataset=digits"], "synthetic": ["dataset=synthetic", "partition=natural"]}


def data_overrides(method: str, data: str) -> list[str]:
    """The data set's overrides; on Synthetic, mclr with a linear encoder for the methods
    that train the encoder apart from the head (its default encoder has no parameters)."""
    client = import_class(str(compose([f"method={method}"]).method.client._target_))
    linear = data == "synthetic" and getattr(client, "trains_encoder_alone", False)
    return [*DATA[data], *(["model=mclr", "model.encoder=linear"] if linear else [])]


def test_all_expected_methods_are_configured():
    assert {
        "fedavg",
        "fedprox",
        "bsm_fedavg",
        "fedrs",
        "fedlc",
        "fedbabu",
        "rebafl",
        "astraea",
        "astraea_aug",
        "astraea_sched",
        "fedconcat",
        "fedconcat_id",
    } <= set(METHODS)


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("method", METHODS)
def test_method_trains_two_rounds(method, data):
    fed = InProcessFederation(
        [
            f"method={method}",
            *data_overrides(method, data),
            "num_clients=3",
            "num_rounds=2",
            "train.local_epochs=1",
            "dropout=none",
            *smoke_overrides(method),  # multi-stage methods: their shortest run
        ]
    )
    initial = parameters_to_ndarrays(fed.parameters)
    trained = 0
    for rnd in range(
        1, fed.strategy.total_rounds() + 1
    ):  # a method round may span several Flower rounds
        record = fed.round(rnd)
        trained += record["clients"]["succeeded"]
        assert record["clients"]["rejected"] == 0 and record["clients"]["errors"] == 0
        assert math.isfinite(record["train"]["train_loss"])
        if (
            record["clients"]["succeeded"] > 1 and initial
        ):  # (local-only clients send no parameters)
            assert record["weight_diversity"] > 0
    assert trained >= 2 * 3  # every client trained in each of the two rounds
    assert 0 <= record["test"]["accuracy"] <= 1  # the last round is always evaluated
    if not initial:  # nothing global to compare: the clients' personal models were tested instead
        assert record["extra"]["T_g"] is not None
        return
    final = parameters_to_ndarrays(fed.parameters)
    assert any(not np.array_equal(a, b) for a, b in zip(initial, final))


#: the label-skew methods of 2021-2024, which have no mnist5k test of their own
LABEL_SKEW_2021_2024 = ["fedrod", "ccvr", "creff", "fednh", "fedetf", "feddecorr", "fedloge"]
LABEL_SKEW_2022_2025 = ["fedntd", "fedvls", "feduv", "fedrcl"]


@pytest.mark.parametrize("method", LABEL_SKEW_2021_2024 + LABEL_SKEW_2022_2025)
def test_label_skew_method_trains_two_rounds_on_mnist5k(method):
    fed = InProcessFederation(
        [f"method={method}", "dataset=mnist5k", "num_clients=3", "num_rounds=2"]
        + ["train.local_epochs=1", "dropout=none"]
    )
    initial = parameters_to_ndarrays(fed.parameters)
    for rnd in (1, 2):
        record = fed.round(rnd)
        assert record["clients"]["succeeded"] == 3
        assert record["clients"]["rejected"] == record["clients"]["errors"] == 0
    assert 0 <= record["test"]["accuracy"] <= 1
    final = parameters_to_ndarrays(fed.parameters)
    assert any(not np.array_equal(a, b) for a, b in zip(initial, final))
