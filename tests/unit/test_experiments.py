"""Every experiment in conf/experiment composes and validates, with every swept value."""

from __future__ import annotations

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.compose import CONF_DIR, compose, group_choices, sweep_variants

EXPERIMENTS = group_choices("experiment")


def sweep_params(experiment: str) -> dict[str, str]:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = hydra_compose(
            "config", overrides=[f"+experiment={experiment}"], return_hydra_config=True
        )
    return dict(cfg.hydra.sweeper.params or {})


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_and_its_sweep_compose(experiment):
    params = sweep_params(experiment)
    overrides = [f"+experiment={experiment}", *(f"{k}={v}" for k, v in params.items())]
    for variant in sweep_variants(overrides):
        cfg = compose(variant)
        assert cfg.method.name in group_choices("method")
        # the strategy declares every setting the experiment gives it, of its type
        params = OmegaConf.to_container(cfg.method.strategy)
        import_class(params.pop("_target_")).check_settings(params)


def test_rebafl_setups_match_the_paper():
    table1 = compose(["+experiment=rebafl_pathological"])
    assert (table1.dataset.name, table1.model.name, table1.partition.classes_per_client) == (
        "fmnist",
        "cnn28",
        2,
    )
    assert (table1.partition.samples_per_client, table1.dropout.p, table1.num_rounds) == (
        1000,
        0.5,
        200,
    )
    assert (table1.train.local_epochs, table1.train.batch_size, table1.train.weight_decay) == (
        5,
        50,
        5e-4,
    )
    assert compose(["+experiment=rebafl_pathological_cifar10"]).train.lr == 0.02
    clustered = compose(["+experiment=rebafl_clustered"])
    assert list(clustered.partition.classes_per_group) == [2, 2, 3, 3, 5]
    assert list(clustered.dropout.p_per_group) == [0.5, 0.5, 0.3, 0.3, 0.2]
    assert sweep_params("rebafl_dropout")["dropout.p"] == "0.1,0.3,0.5"
    assert sweep_params("rebafl_straggling")["dropout.period"] == "2,5,10,20"
    scal = compose(["+experiment=rebafl_scalability"])
    assert (scal.fraction_fit, scal.dropout.name, scal.dataset.name) == (0.1, "none", "cifar10")
