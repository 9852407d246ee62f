"""GPUs in the Ray simulation without a GPU: ``runtime.num_gpus_per_client`` reaches
Flower's backend config, bad values stop with one line, ``device=auto`` is resolved
where the clients run, and a process moves a model and its data to the device once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import Context, RecordDict
from omegaconf import OmegaConf

from fedimb.app.configuration import transport
from fedimb.app.configuration.build import experiment_data, resolve_device
from fedimb.app.configuration.compose import compose
from fedimb.app.nodes import client_app
from fedimb.cli.federation.flwr_cli import FlwrCli
from fedimb.cli.launch import experiment as launch
from fedimb.cli.launch import flower_run, preflight
from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache

DIGITS = ["dataset=digits", "dropout=none", "num_rounds=1", "train.local_epochs=1"]
META = torch.device("meta")  # a device that is not the CPU, with no memory behind it


def no_cuda_here(monkeypatch) -> None:
    """This machine as one without CUDA and without a Ray cluster to join."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(preflight, "ray_cluster_configured", lambda env: False)


def config_error(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        compose(overrides)
    return str(info.value)


# ------------------------------------------------------------ federation config
@pytest.mark.parametrize(
    "gpus, extra",
    [
        ("0", {}),
        ("0.0", {}),
        ("0.25", {"client-resources-num-gpus": 0.25}),
        ("1", {"client-resources-num-gpus": 1.0}),
    ],
)
def test_the_gpu_share_is_in_the_federation_config_only_when_positive(gpus, extra):
    cfg = compose([*DIGITS, f"runtime.num_gpus_per_client={gpus}"])
    federation = flower_run.federation_config(cfg)
    assert federation == {"num-supernodes": 20, "client-resources-num-cpus": 1, **extra}
    assert all(isinstance(v, float) for k, v in federation.items() if k.endswith("gpus"))


def test_the_default_federation_config_is_unchanged():
    cfg = compose(DIGITS)
    assert cfg.runtime.num_gpus_per_client == 0.0
    assert flower_run.federation_config(cfg) == {
        "num-supernodes": 20,
        "client-resources-num-cpus": 1,
    }


def flower_client_resources(federation: dict) -> dict:
    """What Flower's simulation gives its Ray backend for ``federation``, through the
    command line ``flwr run`` gets and Flower's own parsing, protobuf and settings."""
    from flwr.common.config import parse_config_args
    from flwr.proto.federation_config_pb2 import SimulationConfig
    from flwr.simulation.app import _run_simulation_settings
    from flwr.supercore.utils import simulation_config_from_json

    args = FlwrCli("local", Path("home")).run_args(Path("app"), {}, federation)
    line = args[args.index("--federation-config") + 1]
    parsed = {
        k.replace("-", "_"): v for k, v in parse_config_args([line]).items()
    }  # as `flwr run` does
    sent = SimulationConfig.FromString(simulation_config_from_json(parsed).SerializeToString())
    return _run_simulation_settings(sent)[2]["client_resources"]


def test_the_gpu_share_reaches_flowers_ray_backend():
    for gpus, expected in (
        (0, {"num_cpus": 1}),
        (0.25, {"num_cpus": 1, "num_gpus": 0.25}),
        (1, {"num_cpus": 1, "num_gpus": 1.0}),
    ):
        cfg = compose([*DIGITS, f"runtime.num_gpus_per_client={gpus}"])
        assert flower_client_resources(flower_run.federation_config(cfg)) == expected


def test_flower_sizes_its_actor_pool_by_the_gpu_share(monkeypatch):
    """Four actors share one GPU at 0.25; with no GPU in the Ray cluster Flower stops
    ("ActorPool is empty"), which is what the preflight check names."""
    from flwr.simulation.ray_transport import ray_actor

    def cluster(gpus):
        monkeypatch.setattr(ray_actor.ray, "nodes", lambda: [{"Resources": {"CPU": 16.0, **gpus}}])

    cluster({"GPU": 1.0})
    assert ray_actor.pool_size_from_resources({"num_cpus": 1, "num_gpus": 0.25}) == 4
    assert ray_actor.pool_size_from_resources({"num_cpus": 1}) == 16
    cluster({})
    with pytest.raises(ValueError, match="ActorPool is empty"):
        ray_actor.pool_size_from_resources({"num_cpus": 1, "num_gpus": 0.25})


# ------------------------------------------------------------------- validation
@pytest.mark.parametrize("value, shown", [("-0.5", "-0.5"), ("half", "'half'"), ("true", "True")])
def test_a_gpu_share_must_be_a_number_at_least_zero(value, shown):
    assert config_error([*DIGITS, f"runtime.num_gpus_per_client={value}"]) == (
        "runtime.num_gpus_per_client must be a number >= 0 (0.25: four clients share a GPU), "
        f"got {shown}"
    )


def test_a_gpu_share_with_device_cpu_is_a_contradiction():
    assert config_error([*DIGITS, "device=cpu", "runtime.num_gpus_per_client=0.5"]) == (
        "runtime.num_gpus_per_client=0.5 reserves GPUs, but device=cpu keeps the clients off them: "
        "use device=auto or device=cuda, or runtime.num_gpus_per_client=0"
    )
    compose([*DIGITS, "device=cpu", "runtime.num_gpus_per_client=0"])


@pytest.mark.parametrize("runtime", ["in_process", "deployment"])
def test_only_the_simulation_has_a_gpu_share(runtime):
    assert config_error([*DIGITS, f"runtime={runtime}", "runtime.num_gpus_per_client=0.5"]) == (
        f"runtime={runtime} has no num_gpus_per_client; "
        "use runtime=simulation runtime.num_gpus_per_client=0.5"
    )
    assert config_error([*DIGITS, f"runtime={runtime}", "+runtime.num_gpus_per_client=0.5"]) == (
        "runtime.num_gpus_per_client is a setting of runtime=simulation "
        "(Ray's GPUs per virtual client), "
        f"not of runtime={runtime}; there device=auto or device=cuda puts the clients on a GPU"
    )


def test_a_gpu_share_without_cuda_here_stops_in_preflight(monkeypatch):
    no_cuda_here(monkeypatch)
    built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "built without CUDA"
    with pytest.raises(ConfigError) as info:
        preflight.check_gpus_per_client(compose([*DIGITS, "runtime.num_gpus_per_client=0.25"]))
    assert str(info.value) == (
        f"runtime.num_gpus_per_client=0.25, but torch {torch.__version__} ({built}) "
        "sees no CUDA device on this machine (torch.cuda.is_available() is False): "
        "Ray would have no GPU to give the clients and Flower's simulation would stop with "
        "'ActorPool is empty'; set runtime.num_gpus_per_client=0 or run on a machine with a GPU"
    )
    preflight.check_gpus_per_client(compose(DIGITS))  # no share: nothing to check
    # a Ray cluster may have its GPUs on other nodes: Flower checks those
    preflight.check_gpus_per_client(
        compose([*DIGITS, "runtime.num_gpus_per_client=0.25", "runtime.ray_address=10.0.0.1:6379"])
    )
    monkeypatch.setattr(preflight, "ray_cluster_configured", lambda env: True)
    preflight.check_gpus_per_client(compose([*DIGITS, "runtime.num_gpus_per_client=0.25"]))


def test_the_preflight_of_the_front_end_names_the_missing_gpu(monkeypatch, tmp_path):
    no_cuda_here(monkeypatch)
    cfg = compose([*DIGITS, "runtime.num_gpus_per_client=1", f"output.root={tmp_path}"])
    with pytest.raises(
        ConfigError, match=r"^runtime.num_gpus_per_client=1, but torch .* sees no CUDA device"
    ):
        launch.prepare_run_dir(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing written, no Flower process started


def test_with_cuda_the_run_passes_preflight_and_keeps_device_auto(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cfg = compose([*DIGITS, "runtime.num_gpus_per_client=0.25", f"output.root={tmp_path}"])
    launch.prepare_run_dir(cfg, tmp_path / "run")
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert saved.runtime.num_gpus_per_client == 0.25 and saved.device == "auto"
    assert flower_run.federation_config(cfg) == {
        "num-supernodes": 20,
        "client-resources-num-cpus": 1,
        "client-resources-num-gpus": 0.25,
    }


# ----------------------------------------------------------------- device=auto
def test_device_auto_follows_what_torch_sees_in_this_process(monkeypatch):
    auto = compose(DIGITS)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device(auto) == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(auto) == torch.device("cpu")
    assert resolve_device(compose([*DIGITS, "device=cpu"])) == torch.device("cpu")


def test_device_auto_travels_unresolved_to_the_clients(monkeypatch, fresh_caches):
    """The front end never resolves ``auto``: each actor does, with the GPUs Ray gave it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = compose([*DIGITS, "runtime.num_gpus_per_client=0.5"])
    carried = transport.decode(transport.encode(cfg))
    assert carried.device == "auto" and carried.runtime.num_gpus_per_client == 0.5
    seen = []
    monkeypatch.setattr(
        client_app, "resolve_device", lambda c: seen.append(c.device) or torch.device("cpu")
    )
    client_app.make_client(carried, context(0), 0)
    assert seen == ["auto"]


# ------------------------------------------------------------ once per process
def context(pid: int) -> Context:
    return Context(
        run_id=0, node_id=pid, node_config={"partition-id": pid}, state=RecordDict(), run_config={}
    )


@pytest.fixture
def fresh_caches(monkeypatch):
    """Empty per-process caches for the test (the module keeps them for the session)."""
    for name in ("_INPUTS", "_MODELS", "_DEVICE_DATA"):
        monkeypatch.setattr(client_app, name, ProcessCache())


def test_model_and_inputs_move_to_the_device_once_per_process(monkeypatch, fresh_caches):
    """A Ray actor runs one client after another: the second and later ones reuse the
    model and the inputs already on the device (the same objects: nothing is copied)."""
    monkeypatch.setattr(client_app, "resolve_device", lambda cfg: META)
    cfg = compose(DIGITS)
    clients = [client_app.make_client(cfg, context(pid), pid) for pid in (0, 1, 0, 2)]
    first = clients[0]
    assert all(c.model is first.model for c in clients)
    assert all(c.data.x is first.data.x and c.data.x_test is first.data.x_test for c in clients)
    assert next(first.model.parameters()).device == META and first.data.x.device == META
    assert (
        first.data.y.device.type == "cpu" and first.data.indices.device.type == "cpu"
    )  # labels, indices
    assert first.device == META
    assert (
        len(client_app._INPUTS) == 2 and len(client_app._MODELS) == 1
    )  # training and test inputs, one model
    assert [c.data.partition_id for c in clients] == [0, 1, 0, 2]


def test_on_the_cpu_the_inputs_stay_zero_copy_views(monkeypatch, fresh_caches):
    monkeypatch.setattr(client_app, "resolve_device", lambda cfg: torch.device("cpu"))
    cfg = compose(DIGITS)
    client = client_app.make_client(cfg, context(3), 3)
    dataset = experiment_data(cfg).dataset
    assert np.shares_memory(client.data.x.numpy(), dataset.x_train)
    assert np.shares_memory(client.data.x_test.numpy(), dataset.x_test)
    assert len(client_app._INPUTS) == 0


def test_a_nodes_own_data_moves_to_the_device_once(monkeypatch, fresh_caches, tmp_path):
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "own.npz",
        x=rng.integers(0, 17, size=(40, 8, 8)).astype(np.uint8),
        y=np.arange(40) % 10,
    )
    cfg = compose(DIGITS)
    path = str(tmp_path / "own.npz")
    first = client_app._device_client_data(cfg, 0, path, META)
    assert client_app._device_client_data(cfg, 0, path, META) is first
    assert first.x.device == META and first.y.device.type == "cpu"
    on_cpu = client_app._device_client_data(cfg, 0, path, torch.device("cpu"))
    assert on_cpu is not first and on_cpu.x.device.type == "cpu"
