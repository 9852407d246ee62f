"""The Flower ClientApp: run config + node config -> data partition -> method client."""

from __future__ import annotations

import time

# ruff: noqa: E402 -- the imports below are the ``imports`` phase this entry point times
#: when the ClientApp's entry point began importing: its process's ``imports`` phase
#: starts here (:class:`fedimb.app.server.phases.ProcessStartup`)
IMPORTS_BEGAN = time.time()

import hashlib

import numpy as np
import torch
from flwr.app import Context
from flwr.client import Client, ClientApp, NumPyClient
from omegaconf import DictConfig

from fedimb.app.configuration import build, components, transport
from fedimb.app.configuration.build import resolve_device
from fedimb.app.configuration.runtime_rules import assigns_clients, client_state_kind
from fedimb.app.faults import injection as faults
from fedimb.app.privacy.client_mods import privacy_mod
from fedimb.app.privacy.secagg_mod import secagg_mod
from fedimb.app.server import phases
from fedimb.core import events, protocol
from fedimb.core.client_state import client_state
from fedimb.core.data.client_data import ClientData
from fedimb.core.data.datasets import dataset_info, load_dataset
from fedimb.core.data.device import load_device_data
from fedimb.core.data.groups import rows_by_group
from fedimb.core.data.stats import label_counts
from fedimb.core.errors import ConfigError, DataUnavailableError
from fedimb.core.models import EncoderHeadNet
from fedimb.core.process_cache import ProcessCache, cache_key

#: what this process's clients share (see each builder below)
_MODELS: ProcessCache[EncoderHeadNet] = ProcessCache()
_INPUTS: ProcessCache[torch.Tensor] = ProcessCache()
_TEST_ROWS: ProcessCache[dict[int, np.ndarray]] = ProcessCache()
_DEVICE_DATA: ProcessCache[ClientData] = ProcessCache()
_TORCH_THREADS: ProcessCache[None] = ProcessCache()


def partition_id_of(context: Context, cfg: DictConfig) -> int:
    """The node's partition id (``--node-config partition-id=..``), checked against the run.

    A node with its own data (``data-path``) may leave it out: it reports -1 and the
    server gives it a free client id (the same one again when it rejoins)."""
    node = context.node_config
    if "partition-id" not in node:
        if "data-path" in node:
            return -1
        raise ConfigError(
            "this SuperNode has neither a partition-id nor a data-path in its --node-config"
        )
    pid = int(node["partition-id"])
    if "num-partitions" in node and int(node["num-partitions"]) != int(cfg.num_clients):
        raise ConfigError(
            f"the run has num_clients={cfg.num_clients} but this node was started with "
            f"num-partitions={node['num-partitions']}"
        )
    if not 0 <= pid < int(cfg.num_clients):
        raise ConfigError(f"partition-id {pid} is outside [0, {cfg.num_clients})")
    return pid


def _inputs_on(device: torch.device, key: tuple, array: np.ndarray) -> torch.Tensor:
    """Model inputs on ``device``, moved there once per process (keyed by the data set's
    config and the device) and shared by every client the process serves: a Ray actor
    runs many clients and rounds, and each client indexes its batches out of these, so
    no message copies inputs to the GPU again. On the CPU a zero-copy view, as before.
    Labels stay on the CPU: they are small, and label code (rebalancing, prototypes,
    metrics) works on them with numpy."""
    if device.type == "cpu":
        return torch.from_numpy(array)
    return _INPUTS.get((*key, str(device)), lambda: torch.from_numpy(array).to(device))


def _client_data(cfg: DictConfig, pid: int, device: torch.device) -> ClientData:
    """Partition ``pid``'s share: indices into the data set's tensors (inputs on
    ``device``, see :func:`_inputs_on`), built per message, which costs no copy."""
    data = build.experiment_data(cfg)
    dataset_key = cache_key(cfg.dataset)
    x = _inputs_on(device, ("train", build.training_arrays_key(cfg)), data.dataset.x_train)
    x_test = _inputs_on(device, ("test", dataset_key), data.dataset.x_test)
    y, y_test = torch.from_numpy(data.dataset.y_train), torch.from_numpy(data.dataset.y_test)
    train, local_test, validation = build.client_split(
        cfg, data.partition.indices[pid], pid, data.dataset.y_train
    )
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
        validation_indices=torch.from_numpy(validation),
        own_test=_own_test(cfg, data.dataset, dataset_key, pid, x_test, y_test),
    )


def _own_test(
    cfg: DictConfig, dataset, dataset_key, pid: int, x_test: torch.Tensor, y_test: torch.Tensor
):
    """Client ``pid``'s own test set where the data set marks each test sample's natural
    client (``groups_test``) and the partition is the natural one (Synthetic: device k is
    client k). Every client's rows are found once per process."""
    if dataset.groups_test is None or str(cfg.partition.name) != "natural":
        return None
    rows_of = _TEST_ROWS.get(dataset_key, lambda: rows_by_group(dataset.groups_test))
    rows = torch.from_numpy(rows_of.get(pid, np.zeros(0, dtype=np.int64)))
    return x_test[rows.to(x_test.device)], y_test[rows]


def _device_client_data(
    cfg: DictConfig, pid: int, data_path: str, device: torch.device
) -> ClientData:
    """A node's own data (``--node-config data-path=..``), loaded once per process with
    its inputs on the torch ``device`` (labels on the CPU, as in :func:`_inputs_on`);
    its label histogram is computed here, on the node. The global test set (for the
    client-side evaluations of personalised models) is used when the node has it."""
    key = cache_key(data_path, str(cfg.dataset.name), str(device))
    return _DEVICE_DATA.get(key, lambda: _load_device_client_data(cfg, pid, data_path, device))


def _load_device_client_data(
    cfg: DictConfig, pid: int, data_path: str, device: torch.device
) -> ClientData:
    info = dataset_info(cfg.dataset)
    x_np, y_np = load_device_data(data_path, info.input_shape, info.num_classes, info.tokens)
    x_test: torch.Tensor | None
    y_test: torch.Tensor | None
    try:
        test = load_dataset(build.plain(cfg.dataset))
        x_test, y_test = build.as_tensors(test.x_test, test.y_test)
        x_test = x_test.to(device)
    except DataUnavailableError:
        x_test = y_test = None
    device_key = None
    if pid < 0:  # no partition id: identify the client by its data; seed from that
        device_key = hashlib.sha256(x_np.tobytes() + y_np.tobytes()).hexdigest()[:16]
        pid = int(device_key[:7], 16)
    train, local_test, validation = build.client_split(cfg, np.arange(len(y_np)), pid, y_np)
    x, y = build.as_tensors(x_np, y_np)
    return ClientData(
        partition_id=pid,
        x=x.to(device),
        y=y,
        indices=torch.from_numpy(train),
        num_classes=info.num_classes,
        label_counts=label_counts(y_np[train], info.num_classes),
        x_test=x_test,
        y_test=y_test,
        test_indices=torch.from_numpy(local_test),
        validation_indices=torch.from_numpy(validation),
        device_key=device_key,
    )


def _process_model(cfg: DictConfig, device: torch.device) -> EncoderHeadNet:
    """One model object per process and device, moved there once and reused by every
    client the process serves (weights are loaded from each instruction, so nothing
    leaks between clients); in a Ray actor that is every message it runs."""
    threads = int(cfg.runtime.torch_threads or 0)
    if threads:  # the first setting a process sees is its setting
        _TORCH_THREADS.get(cache_key("torch_threads"), lambda: torch.set_num_threads(threads))
    key = cache_key(cfg.model, cfg.method.get("model_options"), str(cfg.dataset.name), str(device))
    return _MODELS.get(key, lambda: build.new_model(cfg, dataset_info(cfg.dataset)).to(device))


def make_client(
    cfg: DictConfig, context: Context, pid: int, clock: phases.PhaseClock | None = None
) -> NumPyClient:
    """The method's client (``method.client._target_``) for partition ``pid``, or for the
    node's own data when its node config has a ``data-path``; ``clock`` times loading its
    data and model.

    ``device=auto`` is resolved here, in the process that runs the client (a Ray actor
    of the simulation, a SuperNode's ClientApp process, the in_process loop): the
    configuration carries ``auto`` as written, and an actor with a GPU share
    (``runtime.num_gpus_per_client``) sees the GPU Ray gave it in CUDA_VISIBLE_DEVICES."""
    clock = clock or phases.PhaseClock()
    client_cls = components.import_class(str(cfg.method.client._target_))
    data_path = context.node_config.get("data-path")
    device = resolve_device(cfg)
    with clock.phase("data"):
        data = (
            _device_client_data(cfg, pid, str(data_path), device)
            if data_path
            else _client_data(cfg, pid, device)
        )
    with clock.phase("model"):
        model = _process_model(cfg, device)
    return client_cls(
        context=context,
        data=data,
        model=model,
        device=device,
        model_factory=lambda: build.new_model(cfg, dataset_info(cfg.dataset)),
        state=client_state(client_state_kind(cfg), context, pid),
    )


def run_client(
    cfg: DictConfig, context: Context, pid: int, clock: phases.PhaseClock | None = None
) -> NumPyClient:
    """The client the run has for partition ``pid``: :func:`make_client`'s, behind the
    fault the configuration injects into it, if any
    (:func:`fedimb.app.faults.injection.client_factory`)."""
    return faults.client_factory(cfg, make_client)(cfg, context, pid, clock)


def timed_client(
    cfg: DictConfig, context: Context, pid: int, startup: phases.ProcessStartup | None = None
) -> Client:
    """:func:`run_client` as the Flower client every runtime runs, reporting its phases
    (:mod:`fedimb.app.server.phases`); ``startup``: its own process's start-up, where it has one."""
    clock = phases.PhaseClock()
    return phases.TimedClient(run_client(cfg, context, pid, clock), clock, startup)


class AssignedClient(Client):
    """A virtual node's client where the server assigns clients to nodes
    (``runtime.client_ids=assigned``): each instruction names the client to serve
    (``protocol.ASSIGNED_PARTITION``), whose :func:`timed_client` answers it. The node's own
    ``partition-id`` plays no part: every node of a simulation holds the whole data set."""

    def __init__(self, cfg: DictConfig, context: Context):
        self.cfg = cfg
        self.node_context = context

    def _client(self, ins) -> Client:
        pid = ins.config.get(protocol.ASSIGNED_PARTITION)
        if not isinstance(pid, int) or not 0 <= pid < int(self.cfg.num_clients):
            raise ConfigError(
                f"the server assigned this node no client of the run (got {pid!r}): "
                "runtime.client_ids=assigned needs a server that assigns them"
            )
        with events.neutral_errors():  # see client_fn
            return timed_client(self.cfg, self.node_context, pid, STARTUP)

    def get_properties(self, ins):
        return self._client(ins).get_properties(ins)

    def get_parameters(self, ins):
        return self._client(ins).get_parameters(ins)

    def fit(self, ins):
        return self._client(ins).fit(ins)

    def evaluate(self, ins):
        return self._client(ins).evaluate(ins)


def client_fn(context: Context) -> Client:
    """The node's client. A failure to make it is made safe for the server's log as the
    client's own calls' are (:func:`fedimb.core.events.neutral_errors`): the simulation
    logs its message in the ServerApp's process."""
    with events.neutral_errors():
        cfg = transport.from_run_config(context.run_config, check=False)  # the ServerApp checked it
        if assigns_clients(cfg):
            return AssignedClient(cfg, context)
        return timed_client(cfg, context, partition_id_of(context, cfg), STARTUP)


#: ``secagg_mod``: Flower's SecAgg+ mod where the run asks for it; ``privacy_mod``: Flower's
#: clipping mod where the run asks for client-side DP (inside SecAgg+: a client clips, then masks)
app = ClientApp(client_fn=client_fn, mods=[secagg_mod, privacy_mod])
#: this process's start-up as a client process, which its first fit reports
STARTUP = phases.ProcessStartup(IMPORTS_BEGAN, time.time())
