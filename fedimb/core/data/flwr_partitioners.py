"""Any flwr-datasets partitioner by name (``partition=flwr``), with its own arguments.

``partition.partitioner`` names the class (``_target_:
flwr_datasets.partitioner.ShardPartitioner``) and its arguments, as a Flower user writes
them. The data set reaches it as Flower's ``FederatedDataset`` hands one over: its rows
shuffled first (with the data seed, as ``FederatedDataset(shuffle=True)`` does), a
``label`` column and, where the data set has natural clients (Synthetic's devices,
MIT-BIH's records), a ``group`` column. Arguments the run already knows are filled in
where the class takes them and the user left them out: ``num_partitions`` (the run's
``num_clients``; a different value is refused), ``partition_by`` (``label``; ``group``
for the natural-id partitioners) and ``seed`` (the data seed). The rest are the user's,
checked against the class's signature before any data is read.

Refused in one line: the vertical partitioners (they split columns, not samples),
``IdToSizeFncPartitioner`` (it takes a Python function; its subclasses Linear, Square and
Exponential do not) and the abstract ``Partitioner``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedimb.core.data.scheme import Scheme
from fedimb.core.errors import ConfigError, require

MODULE = "flwr_datasets.partitioner"
#: classes of the module that cannot split a labelled data set's rows, and why
REFUSED = {
    "Partitioner": "is the abstract base class",
    "IdToSizeFncPartitioner": "takes a Python function (use Linear, Square, Exponential or Size)",
    "VerticalEvenPartitioner": "splits columns (vertical FL), not samples",
    "VerticalSizePartitioner": "splits columns (vertical FL), not samples",
}
#: partitioners whose ``partition_by`` is a client id rather than the label
NATURAL_ID = ("NaturalIdPartitioner", "GroupedNaturalIdPartitioner")


def partitioner_class(target: Any) -> type:
    """The class ``partition.partitioner._target_`` names, or a one-line error."""
    import flwr_datasets.partitioner as module

    name = str(target).removeprefix(f"{MODULE}.")
    usable = sorted(n for n in module.__all__ if n not in REFUSED)
    require(
        isinstance(target, str) and name in module.__all__,
        f"partition.partitioner._target_ must be {MODULE}.<Name>, got {target!r} "
        f"(choose from: {', '.join(usable)})",
    )
    require(name not in REFUSED, f"partition=flwr: {name} {REFUSED.get(name)}")
    return getattr(module, name)


def _parameters(cls: type) -> list[str]:
    return list(inspect.signature(cls).parameters)


def flwr_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    """``partition.partitioner`` names a usable class and only arguments it takes;
    ``num_partitions``, where given, is the run's ``num_clients``."""
    arguments = spec.get("partitioner")
    if not (isinstance(arguments, Mapping) and "_target_" in arguments):
        raise ConfigError(
            "partition=flwr needs partition.partitioner={_target_: "
            f"{MODULE}.<Name>, ...its arguments}}"
        )
    cls = partitioner_class(arguments["_target_"])
    known = _parameters(cls)
    for key in arguments:
        require(
            key == "_target_" or key in known,
            f"partition.partitioner: {cls.__name__} has no argument '{key}' "
            f"(its arguments: {', '.join(known)})",
        )
    given = arguments.get("num_partitions", num_clients)
    require(
        given == num_clients,
        f"partition.partitioner.num_partitions is {given!r} but num_clients is {num_clients}: "
        "leave num_partitions out (it is num_clients) or make them equal",
    )


def _filled(cls: type, arguments: Mapping[str, Any], num_clients: int, seed: int) -> dict:
    """The user's arguments plus those the run knows and the class takes."""
    known = _parameters(cls)
    defaults = {
        "num_partitions": num_clients,
        "partition_by": "group" if cls.__name__ in NATURAL_ID else "label",
        "seed": int(seed),
    }
    filled: dict[str, Any] = {k: v for k, v in defaults.items() if k in known}
    filled.update({k: v for k, v in arguments.items() if k != "_target_"})
    if "distribution_array" in filled:  # the one argument read as an array (its .shape)
        filled["distribution_array"] = np.asarray(filled["distribution_array"])
    return filled


def flwr(labels, num_classes, num_clients, rng, seed, partitioner: Mapping[str, Any], groups=None):
    """Run the named flwr-datasets partitioner over the shuffled rows; return each
    partition's row indices (and no client groups)."""
    from datasets import Dataset

    cls = partitioner_class(partitioner["_target_"])
    arguments = _filled(cls, _plain(partitioner), num_clients, seed)
    if cls.__name__ in NATURAL_ID and groups is None:
        raise ConfigError(
            f"partition=flwr: {cls.__name__} needs a data set with natural clients "
            "(e.g. dataset=synthetic or dataset=mitbih)"
        )
    order = rng.permutation(len(labels))  # FederatedDataset's shuffle, with the data seed
    columns = {"label": np.asarray(labels)[order], "index": order}
    if groups is not None:
        columns["group"] = np.asarray(groups)[order]
    try:
        instance = cls(**arguments)
        instance.dataset = Dataset.from_dict(columns)
        found = instance.num_partitions
        require(
            found == num_clients,
            f"partition=flwr: {cls.__name__} makes {found} partitions of this data set "
            f"but num_clients is {num_clients}: set num_clients={found}",
        )
        split = [
            np.asarray(instance.load_partition(i)["index"], dtype=np.int64)
            for i in range(num_clients)
        ]
    except (ValueError, TypeError, KeyError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"partition=flwr: {cls.__name__} refused its arguments: {first}"
        ) from None
    return split, None


def _plain(value: Any) -> Any:
    """``value`` as plain Python (dicts and lists, not configuration nodes)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    return value


FLWR = Scheme(flwr, flwr_rules, "choose partitioner arguments that give every client samples")
