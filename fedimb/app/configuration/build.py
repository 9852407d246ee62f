"""What server and clients both derive from a configuration: data, partition, model.

Everything here is deterministic in the configuration (its seeds in particular,
:mod:`fedimb.app.configuration.seeds`), so every process of a run computes the same
validation share, partition and initial model without exchanging them. Results are cached
per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.holdout import validation_fraction
from fedimb.app.configuration.seeds import data_seed, train_seed
from fedimb.core.data import ArrayDataset, Partition, load_dataset, make_partition
from fedimb.core.data.datasets import DatasetInfo, hold_out_validation
from fedimb.core.models import EncoderHeadNet, build_model
from fedimb.core.process_cache import ProcessCache, cache_key


@dataclass(frozen=True)
class ExperimentData:
    dataset: ArrayDataset
    partition: Partition


#: the data set and its partition, per configuration
_DATA: ProcessCache[ExperimentData] = ProcessCache()


def plain(node: Any) -> dict[str, Any]:
    """A configuration section as the resolved plain dict the core's functions take."""
    return cast(dict[str, Any], OmegaConf.to_container(node, resolve=True))


def experiment_data(cfg: DictConfig) -> ExperimentData:
    """The data set, less the validation share the server holds out
    (``validation.fraction``), and its partition over ``num_clients`` clients (once per
    process)."""
    key = cache_key(
        cfg.dataset, cfg.partition, cfg.num_clients, validation_fraction(cfg), data_seed(cfg)
    )
    return _DATA.get(key, lambda: _build_experiment_data(cfg))


def _build_experiment_data(cfg: DictConfig) -> ExperimentData:
    dataset = load_dataset(plain(cfg.dataset))
    if validation_fraction(cfg) > 0:
        dataset = hold_out_validation(dataset, validation_fraction(cfg), data_seed(cfg))
    partition = make_partition(
        dataset.y_train,
        dataset.num_classes,
        int(cfg.num_clients),
        plain(cfg.partition),
        data_seed(cfg),
        dataset.groups_train,
    )
    return ExperimentData(dataset, partition)


def training_arrays_key(cfg: DictConfig) -> object:
    """What the training arrays depend on: the data set and, where the server holds out a
    validation share, its fraction and the data seed."""
    fraction = validation_fraction(cfg)
    return cache_key(cfg.dataset, fraction, data_seed(cfg) if fraction > 0 else None)


class ClientSplit(NamedTuple):
    """A client's samples (indices into the training arrays), in three disjoint parts."""

    train: np.ndarray
    test: np.ndarray  # its local test split (``evaluation.local_test_fraction``)
    validation: np.ndarray  # its own validation share (``evaluation.local_validation_fraction``)


def client_split(cfg: DictConfig, indices: np.ndarray, pid: int, labels: np.ndarray) -> ClientSplit:
    """Client ``pid``'s sample ``indices`` (``labels[indices]`` their labels) split into
    training, local test and validation samples. A seeded random share
    ``evaluation.local_test_fraction`` is its test split (at least one sample each way
    when the client has two or more); of the rest, ``evaluation.local_validation_fraction``
    of each label's samples, rounded half up (a label of one sample gives none), is its
    validation share, which chooses a personal model's round without its test split."""
    fraction = float(cfg.evaluation.local_test_fraction)
    train, test = indices, indices[:0]
    if fraction > 0 and len(indices) >= 2:
        order = np.random.default_rng([data_seed(cfg), int(pid), 0x7E57]).permutation(indices)
        n_test = min(max(1, int(round(fraction * len(indices)))), len(indices) - 1)
        train, test = np.sort(order[n_test:]), np.sort(order[:n_test])
    share = float(cfg.evaluation.local_validation_fraction)
    if share <= 0 or len(train) < 2:
        return ClientSplit(train, test, train[:0])
    rng = np.random.default_rng([data_seed(cfg), int(pid), 0x7A11])
    train_labels = np.asarray(labels)[train]
    held = [
        rng.permutation(train[train_labels == label])[: int(np.floor(share * count + 0.5))]
        for label, count in zip(*np.unique(train_labels, return_counts=True))
    ]
    validation = np.sort(np.concatenate(held))[: len(train) - 1]  # one sample left to train
    return ClientSplit(np.setdiff1d(train, validation), test, validation)


def new_model(cfg: DictConfig, dataset: ArrayDataset | DatasetInfo) -> EncoderHeadNet:
    """The model of the run, initialised from the training seed (identical in every process).

    A method may change the architecture through ``method.model_options`` (e.g. MOON's
    projection head, :mod:`fedimb.core.models.options`)."""
    return build_model(
        plain(cfg.model),
        dataset.input_shape,
        dataset.num_classes,
        seed=train_seed(cfg),
        options=plain(cfg.method.get("model_options") or OmegaConf.create({})),
    )


def use_torch_threads(cfg: DictConfig) -> None:
    """This process's torch threads: ``runtime.torch_threads`` (0: torch's default, one per
    core). The simulation's ServerApp shares the machine with actors that hold every core,
    and with two threads of its own on 2 cores CReFF's server-side training ran 3x slower
    than with one (docs/benchmarks/performance.md)."""
    threads = int(cfg.runtime.get("torch_threads") or 0)
    if threads:
        torch.set_num_threads(threads)


def resolve_device(cfg: DictConfig) -> torch.device:
    """``device=auto``: CUDA where torch sees a device, else the CPU. Called in the
    process that computes (each ClientApp process or Ray actor, the ServerApp), never
    once in the front end, so that an actor given a GPU by Ray (CUDA_VISIBLE_DEVICES,
    set before it starts) trains there."""
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(str(cfg.device))


def as_tensors(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-copy torch views of numpy arrays."""
    return torch.from_numpy(x), torch.from_numpy(y)
