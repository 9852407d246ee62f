"""The Flower ClientApp: run config + node config -> data partition -> method client."""

from __future__ import annotations

import threading

import torch
from flwr.app import Context
from flwr.client import ClientApp
from flwr.client import Client
from hydra.utils import get_class
from omegaconf import DictConfig

from clients.base import ClientData
from fedimb import config
from fedimb.errors import ConfigError
from fedimb.data.stats import label_counts
from fedimb.experiment import as_tensors, client_split, experiment_data, new_model, resolve_device
from fedimb.models import EncoderHeadNet

_LOCK = threading.Lock()
_MODELS: dict[str, EncoderHeadNet] = {}
_THREADS_SET = False


def partition_id_of(context: Context, cfg: DictConfig) -> int:
    """The node's partition id (``--node-config partition-id=..``), checked against the run."""
    node = context.node_config
    if "partition-id" not in node:
        raise ConfigError("this SuperNode has no partition-id in its --node-config")
    pid = int(node["partition-id"])
    if "num-partitions" in node and int(node["num-partitions"]) != int(cfg.num_clients):
        raise ConfigError(
            f"the run has num_clients={cfg.num_clients} but this node was started with "
            f"num-partitions={node['num-partitions']}"
        )
    if not 0 <= pid < int(cfg.num_clients):
        raise ConfigError(f"partition-id {pid} is outside [0, {cfg.num_clients})")
    return pid


def _client_data(cfg: DictConfig, pid: int) -> ClientData:
    data = experiment_data(cfg)
    x, y = as_tensors(data.dataset.x_train, data.dataset.y_train)
    x_test, y_test = as_tensors(data.dataset.x_test, data.dataset.y_test)
    train, local_test = client_split(cfg, data, pid)
    return ClientData(
        partition_id=pid,
        x=x,
        y=y,
        indices=torch.from_numpy(train),
        num_classes=data.dataset.num_classes,
        label_counts=label_counts(data.dataset.y_train[train], data.dataset.num_classes),
        x_test=x_test,
        y_test=y_test,
        test_indices=torch.from_numpy(local_test),
    )


def _process_model(cfg: DictConfig) -> EncoderHeadNet:
    """One model object per process, reused by every client it serves (weights are
    loaded from each instruction, so nothing leaks between clients)."""
    global _THREADS_SET
    key = repr(cfg.model) + repr(cfg.method.get("model_options")) + str(cfg.dataset.name)
    with _LOCK:
        threads = int(cfg.runtime.get("torch_threads", 0) or 0)
        if threads and not _THREADS_SET:
            torch.set_num_threads(threads)
            _THREADS_SET = True
        if key not in _MODELS:
            _MODELS[key] = new_model(cfg, experiment_data(cfg).dataset)
        return _MODELS[key]


def make_client(cfg: DictConfig, context: Context, pid: int):
    """The method's client (``method.client._target_``) for partition ``pid``."""
    client_cls = get_class(str(cfg.method.client._target_))
    return client_cls(
        context=context, data=_client_data(cfg, pid), model=_process_model(cfg), device=resolve_device(cfg),
        model_factory=lambda: new_model(cfg, experiment_data(cfg).dataset),
    )


def client_fn(context: Context) -> Client:
    cfg = config.from_run_config(context.run_config)
    return make_client(cfg, context, partition_id_of(context, cfg)).to_client()


app = ClientApp(client_fn=client_fn)
