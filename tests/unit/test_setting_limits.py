"""Every setting that seeds, or sizes an allocation or a loop, has an upper bound checked
before anything starts (:mod:`fedimb.app.configuration.limits`): past it, one line that names the
setting, its value and its limit."""

from __future__ import annotations

import pytest

from fedimb.app.configuration.compose import compose
from fedimb.app.configuration.limits import LIMITS, MAX_SEED, SEEDS
from fedimb.core.errors import ConfigError

BIG = 10**12

CASES = [
    (["seed=4294967296"], "seed", 2**32, MAX_SEED),
    ([f"seed={2**70}"], "seed", 2**70, MAX_SEED),
    ([f"seed_data={2**32}"], "seed_data", 2**32, MAX_SEED),
    ([f"seed_train={2**40}"], "seed_train", 2**40, MAX_SEED),
    ([f"tune.seeds=[100,{2**32}]"], "tune.seeds", 2**32, MAX_SEED),
    ([f"tune.sampler_seed={2**64}"], "tune.sampler_seed", 2**64, MAX_SEED),
    (["dataset=digits", f"dataset.split_seed={2**32}"], "dataset.split_seed", 2**32, MAX_SEED),
    (["dataset=synthetic", f"dataset.data_seed={2**33}"], "dataset.data_seed", 2**33, MAX_SEED),
    (["num_clients=1000000000"], "num_clients", 10**9, 1_000_000),
    ([f"num_rounds={BIG}"], "num_rounds", BIG, 100_000),
    ([f"train.local_epochs={BIG}"], "train.local_epochs", BIG, 10_000),
    ([f"train.batch_size={BIG}"], "train.batch_size", BIG, 1_000_000),
    ([f"evaluation.batch_size={BIG}"], "evaluation.batch_size", BIG, 1_000_000),
    (["dataset=synthetic", f"dataset.num_devices={BIG}"], "dataset.num_devices", BIG, 1_000_000),
    (["dataset=synthetic", f"dataset.dimension={BIG}"], "dataset.dimension", BIG, 100_000),
    (["dataset=synthetic", f"dataset.num_classes={BIG}"], "dataset.num_classes", BIG, 10_000),
    (["model=mlp", f"model.hidden=[64,{BIG}]"], "model.hidden", BIG, 100_000),
    (["model=resnet", f"model.depth={BIG}"], "model.depth", BIG, 1_000),
    (
        ["aggregation=centered_clip", f"aggregation.iterations={BIG}"],
        "aggregation.iterations",
        BIG,
        1_000_000,
    ),
    ([f"tune.trials={BIG}"], "tune.trials", BIG, 10_000),
    (
        ["method=ccvr", f"method.strategy.virtual_per_class={BIG}"],
        "method.strategy.virtual_per_class",
        BIG,
        1_000_000,
    ),
    (
        ["method=moon", f"method.model_options.projection_dim={BIG}"],
        "method.model_options.projection_dim",
        BIG,
        100_000,
    ),
    (
        ["method=fedloge", f"method.strategy.sse_steps={BIG}"],
        "method.strategy.sse_steps",
        BIG,
        1_000_000,
    ),
    (
        ["method=creff", f"method.client.real_batch={BIG}"],
        "method.client.real_batch",
        BIG,
        1_000_000,
    ),
]


@pytest.mark.parametrize("overrides,key,value,limit", CASES, ids=[c[1] for c in CASES])
def test_a_setting_past_its_limit_is_one_line_naming_setting_value_and_limit(
    overrides, key, value, limit
):
    with pytest.raises(ConfigError) as info:
        compose(["dropout=none", *overrides])
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{key} must be at most {limit:,}")
    assert message.endswith(f"got {value:,}")


def test_the_limits_themselves_are_allowed():
    cfg = compose(
        [
            "dataset=synthetic",
            f"seed={MAX_SEED}",
            f"seed_data={MAX_SEED}",
            f"dataset.data_seed={MAX_SEED}",
            f"tune.sampler_seed={MAX_SEED}",
            "num_rounds=100000",
            "train.batch_size=1000000",
            "dataset.dimension=100000",
        ]
    )
    assert cfg.seed == MAX_SEED and cfg.dataset.dimension == 100_000


def test_every_limited_key_is_a_setting_of_some_configuration():
    """A key of the tables that no configuration has would guard nothing (a renamed setting)."""
    from fedimb.app.configuration.keys import group_choices, hydra_config

    found: set[str] = set()
    for group in ("method", "dataset", "model", "aggregation"):
        for name in group_choices(group):
            found |= _keys(hydra_config([f"{group}={name}"]))
    assert set(SEEDS) | set(LIMITS) <= found


def _keys(node, prefix: str = "") -> set[str]:
    from omegaconf import DictConfig

    keys: set[str] = set()
    for key, value in node.items_ex(resolve=False) if isinstance(node, DictConfig) else []:
        keys.add(f"{prefix}{key}")
        keys |= _keys(value, f"{prefix}{key}.")
    return keys
