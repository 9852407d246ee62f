"""Configuration: Hydra composition with the real conf/, validation, run-config transport."""

from __future__ import annotations

import socket

import pytest
from omegaconf import OmegaConf

from fedimb.app.configuration import components, transport
from fedimb.app.configuration import compose as config
from fedimb.core.errors import ConfigError


@pytest.fixture(scope="module")
def default_cfg():
    return config.compose([])


def test_defaults_compose(default_cfg):
    cfg = default_cfg
    assert cfg.method.name == "fedavg"
    assert cfg.dataset.name == "mnist5k"
    assert cfg.model.name == "cnn28"  # auto -> the dataset's default_model
    assert cfg.partition.name == "pathological"
    assert cfg.dropout.name == "bernoulli"
    assert cfg.runtime.name == "simulation"
    assert cfg.num_clients == 20
    assert cfg.seed == 0
    assert cfg.train.lr == pytest.approx(0.01)
    assert "hydra" not in cfg


def test_overrides_apply():
    cfg = config.compose(["dataset=digits", "partition=dirichlet", "partition.alpha=0.1", "seed=4"])
    assert cfg.model.name == "mlp"  # digits' default model
    assert cfg.partition.alpha == pytest.approx(0.1)
    assert cfg.seed == 4


def test_explicit_model_overrides_auto():
    cfg = config.compose(["model=resnet"])
    assert cfg.model.name == "resnet"
    assert cfg.model.depth == 8


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["method=nosuch"], "method"),
        (["dataset=nosuch"], "dataset"),
        (["partition=nosuch"], "partition"),
        (["model=nosuch"], "model"),
        (["partition=dirichlet", "partition.alpha=0"], "partition.alpha"),
        (["partition.classes_per_client=11"], "partition.classes_per_client"),
        (["dropout.p=1.5"], "dropout.p"),
        (["num_clients=0"], "num_clients"),
        (["num_rounds=0"], "num_rounds"),
        (["train.lr=-1"], "train.lr"),
        (["fraction_fit=0"], "fraction_fit"),
        (["sampling=by_loss"], "sampling must be uniform or by_size"),
        (["runtime.num_cpus_per_client=0"], "runtime.num_cpus_per_client"),
        (["runtime.ray_address=somewhere"], "runtime.ray_address"),
        (
            ["runtime=deployment", "runtime.wait_for_nodes=-1"],
            "runtime.wait_for_nodes must be a number of seconds >= 0",
        ),
        (
            ["runtime=deployment", "runtime.wait_for_nodes=soon"],
            "runtime.wait_for_nodes must be a number of seconds >= 0",
        ),
        (
            ["runtime=deployment", "runtime.rejoin_timeout=-5"],
            "runtime.rejoin_timeout must be a number of seconds >= 0",
        ),
        (["seed=-1"], "seed"),
        (["train.optimizer=nosuch"], "train.optimizer"),
        (["nosuchkey=1"], "unknown key 'nosuchkey'"),
    ],
)
def test_bad_inputs_one_line_error(overrides, key):
    with pytest.raises(ConfigError) as info:
        config.compose(overrides)
    msg = str(info.value)
    assert "\n" not in msg
    assert key in msg


def test_deployment_waits_for_nodes_by_default_and_zero_checks_once():
    assert config.compose(["runtime=deployment"]).runtime.wait_for_nodes == 120
    assert (
        config.compose(["runtime=deployment", "runtime.wait_for_nodes=0"]).runtime.wait_for_nodes
        == 0
    )


def compose_error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        config.compose(overrides)
    return str(info.value)


@pytest.mark.parametrize(
    "group,typo,meant",
    [
        ("method", "fedavgg", "fedavg"),
        ("dataset", "mnist5", "mnist5k"),
        ("partition", "dirichelt", "dirichlet"),
        ("model", "cnn_28", "cnn28"),
        ("dropout", "bernouli", "bernoulli"),
        ("runtime", "in_proces", "in_process"),
        ("experiment", "astraea_mnist", "astraea_mnist5k"),
        ("normalize", "latent_cos", "latent_cosine"),
    ],
)
def test_a_misspelt_option_gets_the_nearest_names(group, typo, meant):
    message = compose_error([f"{'+' if group == 'experiment' else ''}{group}={typo}"])
    assert message.startswith(f"unknown {group} '{typo}'; did you mean ")
    assert meant in message.partition("did you mean ")[2].partition("?")[0].replace(
        " or ", ", "
    ).split(", ")


def test_a_long_group_points_to_fedimb_list_instead_of_listing_every_name():
    assert compose_error(["method=fedavgg"]) == (
        "unknown method 'fedavgg'; did you mean fedavg, fedavgm or perfedavg? "
        "(fedimb list methods shows all)"
    )
    assert compose_error(["method=nosuch"]) == (
        "unknown method 'nosuch' (fedimb list methods shows all)"
    )
    assert compose_error(["runtime=nosuch"]) == (
        "unknown runtime 'nosuch' (choose from: deployment, in_process, simulation)"
    )


@pytest.mark.parametrize(
    "override", ["+foo=1", "++foo=1", "+method.strategy.nosuch=2", "+train.lr_decay=0.5"]
)
def test_plus_adds_only_groups_declared_keys_and_hydras_own(override):
    key = override.lstrip("+").partition("=")[0]
    assert compose_error(["dataset=digits", override]).startswith(
        f"unknown key '{key}' in {override}: no file in conf/ declares it"
    )
    config.check_overrides(
        [
            "+experiment=fedconcat_mnist5k",
            "++method.strategy.num_clusters=3",
            "+runtime.num_gpus_per_client=0.5",
            "+hydra.launcher.ray.remote.num_cpus=2",
        ]
    )


def test_an_unknown_key_names_the_nearest_ones():
    assert compose_error(["partition.alpah=0.1"]) == (
        "unknown key 'partition.alpah'; "
        "did you mean partition.alpha, partition.path or partition.tau?"
    )
    assert compose_error(["nosuchkey=1"]).startswith(
        "unknown key 'nosuchkey' (fedimb --cfg job prints every key"
    )


def test_a_key_of_another_option_names_the_options_that_have_it():
    assert compose_error(["partition.alpha=-1"]) == (
        "partition=pathological has no alpha; "
        "use partition=dirichlet (or dir01, dir05, longtail) partition.alpha=-1"
    )
    assert compose_error(["partition=c2", "partition.alpha=0.3"]).startswith(
        "partition=c2 has no alpha; "
    )
    assert (
        compose_error(["partition=dirichlet", "partition.alpha=-1"])
        == "partition.alpha must be > 0, got -1"
    )


def test_group_choices_reads_conf():
    assert "fedavg" in config.group_choices("method")
    assert {"clustered", "dirichlet", "iid", "longtail", "pathological", "quantity"} <= set(
        config.group_choices("partition")
    )
    assert config.group_choices("nosuchgroup") == []


def test_import_class_resolves_targets_and_names_bad_ones():
    from strategies.fedavg import FedAvgStrategy

    assert components.import_class("strategies.fedavg.FedAvgStrategy") is FedAvgStrategy
    for target, reason in [
        ("strategies.nosuch.X", "No module"),
        ("strategies.fedavg.Nope", "has no attribute"),
        ("fedimb.app.configuration.compose.CONF_DIR", "not a class"),
        ("Bare", "not a class"),
    ]:
        with pytest.raises(ConfigError, match=f"cannot import '{target}'.*{reason}"):
            components.import_class(target)


def test_encode_decode_round_trip(default_cfg):
    text = transport.encode(default_cfg)
    assert isinstance(text, str) and text.isascii()
    assert "\n" not in text
    decoded = transport.decode(text)
    assert decoded == default_cfg
    assert OmegaConf.to_container(decoded) == OmegaConf.to_container(default_cfg)


def test_decode_garbage_is_config_error():
    with pytest.raises(ConfigError, match="config"):
        transport.decode("not base64 at all!")


def test_from_run_config_simple_keys():
    cfg = transport.from_run_config(
        {
            "config": "",
            "method": "fedavg",
            "num-clients": 7,
            "num-rounds": 2,
            "seed": 3,
            "overrides": "train.lr=0.05",
        }
    )
    assert cfg.num_clients == 7
    assert cfg.num_rounds == 2
    assert cfg.seed == 3
    assert cfg.train.lr == pytest.approx(0.05)
    assert cfg.method.name == "fedavg"


def test_from_run_config_encoded(default_cfg):
    cfg = transport.from_run_config({"config": transport.encode(default_cfg)})
    assert cfg == default_cfg


def test_from_run_config_encoded_is_validated(default_cfg):
    bad = OmegaConf.create(OmegaConf.to_container(default_cfg))
    bad.num_clients = 0
    with pytest.raises(ConfigError, match="num_clients"):
        transport.from_run_config({"config": transport.encode(bad)})


def test_ray_address_reaches_the_simulation_as_ray_address(tmp_path, monkeypatch):
    from fedimb.cli.launch.flower_run import simulation_env

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no cluster recorded by a `ray start`
    assert simulation_env(config.compose([]), tmp_path)["RAY_ADDRESS"] == "local"
    env = simulation_env(config.compose(["runtime.ray_address=10.0.0.5:6379"]), tmp_path)
    assert env["RAY_ADDRESS"] == "10.0.0.5:6379" and env["FLWR_HOME"] == str(tmp_path)


def test_a_ray_cluster_counts_only_when_named_or_alive(tmp_path):
    from fedimb.cli.federation.processes import ray_cluster_configured

    assert ray_cluster_configured({"RAY_ADDRESS": "10.0.0.5:6379"})
    record = tmp_path / "ray" / "ray_current_cluster"
    assert not ray_cluster_configured({"RAY_TMPDIR": str(tmp_path)})
    record.parent.mkdir()
    record.write_text("127.0.0.1:9")  # a cluster that is gone: nothing listens there
    assert not ray_cluster_configured({"RAY_TMPDIR": str(tmp_path)})
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        record.write_text(f"127.0.0.1:{listening.getsockname()[1]}")
        assert ray_cluster_configured({"RAY_TMPDIR": str(tmp_path)})


def test_a_class_an_older_run_folder_names_still_resolves():
    """A run saved before each method had modules of its own name resumes: its saved
    targets resolve to the classes that now do the same."""
    from fedimb.app.configuration.components import MOVED, import_class

    for old, new in MOVED.items():
        assert import_class(old) is import_class(new)
    assert import_class("clients.qffl.InitialLossClient").__name__ == "QFFLClient"


def test_a_bad_model_option_is_a_configuration_error_before_any_model_is_built():
    with pytest.raises(ConfigError, match=r"^method\.model_options\.projection_dim must be"):
        config.compose(["method=moon", "method.model_options.projection_dim=0"])
