"""Typed client settings: each client declares its YAML ``client:`` keys once, the
configuration check rejects a bad setting with one line, and a method that names no
strategy gets FedAvg's server."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from clients.base_settings import read_settings
from clients.fedprox import FedProxClient
from clients.perfedavg import PerFedAvgClient
from fedimb.app.configuration import compose as config
from fedimb.app.configuration.components import import_class
from fedimb.core.errors import ConfigError
from fedimb.core.models import build_model

METHODS = config.group_choices("method")


@pytest.fixture(scope="module")
def fedprox_cfg():
    return config.compose(["method=fedprox", "dataset=digits"])


def rejected(cfg, **client) -> str:
    """The one-line error the configuration check gives for these client settings."""
    bad = OmegaConf.to_container(cfg, resolve=True)
    bad["method"]["client"] = {"_target_": cfg.method.client._target_, **client}
    with pytest.raises(ConfigError) as info:
        config.validate(OmegaConf.create(bad))
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("method", METHODS)
def test_client_settings_declare_exactly_the_yaml_keys(method):
    cfg = config.compose([f"method={method}"], check=False)
    client = import_class(str(cfg.method.client._target_))
    declared = [f.name for f in dataclasses.fields(client.Settings)]
    assert set(declared) == set(cfg.method.client) - {"_target_"}


@pytest.mark.parametrize("key", ["seed", "stage", "server_round", "local_epochs", "lr"])
def test_a_setting_named_like_an_instruction_key_is_one_line(fedprox_cfg, key):
    message = rejected(fedprox_cfg, mu=0.01, **{key: 1})
    assert f"method.client.{key}" in message and "instruction key" in message


def test_an_unknown_setting_names_the_nearest_one(fedprox_cfg):
    message = rejected(fedprox_cfg, mu=0.01, muu=0.1)
    assert "unknown setting method.client.muu" in message and "'mu'" in message


def test_a_missing_setting_is_one_line(fedprox_cfg):
    assert "method.client.mu is missing" in rejected(fedprox_cfg)


def test_a_mistyped_setting_is_one_line(fedprox_cfg):
    assert "method.client.mu must be float, got 'much'" in rejected(fedprox_cfg, mu="much")


def test_a_setting_against_its_rule_is_one_line():
    cfg = config.compose(["method=perfedavg", "dataset=digits"])
    assert "method.client.variant" in rejected(cfg, variant="so", alpha=0.001)
    assert "method.client.alpha must be > 0" in rejected(cfg, variant="fo", alpha=0.0)


@pytest.mark.parametrize(
    "method,client,message",
    [
        ("fedprox", {"mu": -1.0}, "method.client.mu must be >= 0"),
        ("moon", {"mu": -0.5, "tau": 0.5}, "method.client.mu must be >= 0"),
        ("moon", {"mu": 5.0, "tau": 0.0}, "method.client.tau must be > 0"),
        ("rebafl", {"eps": -0.01, "mu": 0.1, "lam": 1.0}, "method.client.eps must be >= 0"),
        ("rebafl", {"eps": 0.01, "mu": -0.1, "lam": 1.0}, "method.client.mu must be >= 0"),
    ],
)
def test_a_negative_weight_or_temperature_is_one_line(method, client, message):
    cfg = config.compose([f"method={method}", "dataset=digits"])
    assert message in rejected(cfg, **client)


def test_settings_are_read_typed_from_an_instruction():
    settings = read_settings(FedProxClient.Settings, {"mu": 1, "seed": 3, "lr": 0.1})
    assert settings == FedProxClient.Settings(mu=1.0) and isinstance(settings.mu, float)
    PerFedAvgClient.check_settings({"variant": "hf", "alpha": 1})  # an int for a float


def test_a_method_without_a_strategy_gets_fedavgs_server(fedprox_cfg):
    data = OmegaConf.to_container(fedprox_cfg, resolve=True)
    del data["method"]["strategy"]
    cfg = config.finalize(OmegaConf.create(data))
    assert cfg.method.strategy._target_ == "strategies.fedavg.FedAvgStrategy"


def test_an_unknown_model_option_is_one_line():
    with pytest.raises(ConfigError, match=r"^unknown method.model_options.width \(choose from"):
        build_model({"name": "mlp"}, (1, 8, 8), 10, options={"width": 3})
    with pytest.raises(ConfigError, match="projection_dim must be an integer >= 1, got 0"):
        build_model({"name": "mlp"}, (1, 8, 8), 10, options={"projection_dim": 0})
    model = build_model({"name": "mlp"}, (1, 8, 8), 10, options={"projection_dim": 4})
    assert model.feature_dim == 4


LINEAR_HEAD_METHODS = [
    m
    for m in METHODS
    if getattr(
        import_class(str(config.compose([f"method={m}"]).method.client._target_)),
        "needs_linear_head",
        False,
    )
]


def test_the_methods_that_read_the_linear_head_are_known():
    assert {"grpfed", "ccvr", "creff", "fedconcat"} <= set(LINEAR_HEAD_METHODS)


@pytest.mark.parametrize("method", LINEAR_HEAD_METHODS)
def test_a_head_replacing_option_is_refused_for_a_method_that_needs_the_linear_head(method):
    """GRP-FED reads the head's bias, CCVR and CReFF re-train it as a linear layer,
    FedConcat builds one: a cosine or ETF head would break them mid-run."""
    with pytest.raises(
        ConfigError,
        match="needs the model's linear head, which method.model_options.cosine_head replaces",
    ):
        config.compose(
            [f"method={method}", "dataset=digits", "+method.model_options.cosine_head=10"]
        )
