"""Partitioners: split a training set over clients to reproduce the papers' non-IID set-ups.

Each partitioner is seeded and returns, per client, indices into the training set; the
:class:`Partition` adds the label histograms. Beside each one its
:class:`~fedimb.core.data.scheme.Scheme` declares the rules of its settings (checked
with the configuration and again before a split) and the setting that spreads samples
over more clients (the preflight's hint). ``iid`` and ``dirichlet`` use the
flwr-datasets partitioners; the others are written here because flwr-datasets has no
equivalent (fixed samples per client, client groups, joint size and label skew); the
global long tail is in :mod:`.longtail`, a user's own split in :mod:`.partition_file`,
any flwr-datasets partitioner by name in :mod:`.flwr_partitioners`.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from fedimb.core.data.groups import merge_groups, rows_by_group
from fedimb.core.data.scheme import Scheme, check_alpha, check_samples_per_client
from fedimb.core.errors import ConfigError, is_int, is_number, require

Split = tuple[list[np.ndarray], "np.ndarray | None"]
Partitioner = Callable[..., Split]


# ------------------------------------------------------------- flwr-datasets adapters
def _flwr_split(partitioner: Any, labels: np.ndarray, order: np.ndarray | None = None):
    """Run a flwr-datasets partitioner on a label-only data set; return index arrays."""
    from datasets import Dataset

    order = np.arange(len(labels)) if order is None else order
    partitioner.dataset = Dataset.from_dict({"label": labels[order], "index": order})
    return [
        np.asarray(partitioner.load_partition(i)["index"], dtype=np.int64)
        for i in range(partitioner.num_partitions)
    ]


def iid(labels, num_classes, num_clients, rng, seed) -> Split:
    """Uniformly random, equally sized shards: contiguous shards of a shuffled order, as
    flwr-datasets' IidPartitioner cuts them (the same split), but also with more clients
    than samples (the extra clients get none; the front end refuses them unless
    ``partition.allow_empty_clients``)."""
    order = rng.permutation(len(labels))
    return [np.asarray(shard, dtype=np.int64) for shard in np.array_split(order, num_clients)], None


IID = Scheme(iid)


def dirichlet(
    labels, num_classes, num_clients, rng, seed, alpha: float = 0.5, min_partition_size: int = 2
) -> Split:
    """Per-class proportions over clients drawn from Dir(alpha) (Hsu et al. 2019)."""
    from flwr_datasets.partitioner import DirichletPartitioner

    partitioner = DirichletPartitioner(
        num_partitions=num_clients,
        partition_by="label",
        alpha=float(alpha),
        min_partition_size=int(min_partition_size),
        self_balancing=False,
        shuffle=True,
        seed=int(seed),
    )
    try:
        with warnings.catch_warnings():  # its retries warn; a final failure raises below
            warnings.filterwarnings("ignore", message="The specified min_partition_size")
            return _flwr_split(partitioner, labels), None
    except ValueError as err:
        raise ConfigError(
            f"dirichlet partition (alpha={alpha}, {num_clients} clients) failed: {err}; "
            "lower partition.min_partition_size or use fewer clients"
        ) from None


def dirichlet_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    check_alpha(spec)


DIRICHLET = Scheme(
    dirichlet, dirichlet_rules, "raise partition.alpha or partition.min_partition_size"
)


def _deal_classes(rng: np.random.Generator, num_classes: int, per_client: Sequence[int]):
    """Deal class labels to clients from shuffled decks, so every class is held about
    equally often (like the FedAvg paper's label-sorted shards) and no client holds a
    class twice."""
    deck: list[int] = []
    held = []
    for k in per_client:
        chosen: list[int] = []
        while len(chosen) < k:
            pick = next((j for j, c in enumerate(deck) if c not in chosen), None)
            if pick is None:
                deck.extend(int(c) for c in rng.permutation(num_classes))
                continue
            chosen.append(deck.pop(pick))
        held.append(sorted(chosen))
    return held


def _split_by_classes(labels, num_classes, held, rng, samples_per_client, what) -> list[np.ndarray]:
    """Give every client samples of the classes it holds.

    Without ``samples_per_client`` each class's samples are shuffled and split evenly
    over its holders. With it, each client draws ``samples_per_client / N`` samples of
    each of its N classes without replacement (ReBaFL §5.1: n_i/N instances per class).
    """
    pools = {c: list(rng.permutation(np.flatnonzero(labels == c))) for c in range(num_classes)}
    out: list[list[int]] = [[] for _ in held]
    if samples_per_client is None:
        for c in range(num_classes):
            holders = [i for i, classes in enumerate(held) if c in classes]
            for i, part in zip(
                holders, np.array_split(np.asarray(pools[c], dtype=np.int64), max(len(holders), 1))
            ):
                out[i].extend(part.tolist())
        return [np.asarray(ix, dtype=np.int64) for ix in out]
    samples_per_client = int(samples_per_client)
    demand = np.zeros(num_classes, dtype=np.int64)
    for i, classes in enumerate(held):
        shares = np.full(len(classes), samples_per_client // len(classes))
        shares[: samples_per_client % len(classes)] += 1
        for c, n in zip(classes, shares):
            demand[c] += n
            out[i].extend(pools[c][:n])
            del pools[c][:n]
    short = np.flatnonzero(demand > np.bincount(labels, minlength=num_classes)[:num_classes])
    if short.size:
        c = int(short[0])
        raise ConfigError(
            f"{what} partition: class {c} has {int((labels == c).sum())} training samples but its "
            f"clients need {int(demand[c])}; lower partition.samples_per_client"
        )
    return [np.asarray(ix, dtype=np.int64) for ix in out]


def pathological(
    labels,
    num_classes,
    num_clients,
    rng,
    seed,
    classes_per_client: int = 2,
    samples_per_client: int | None = None,
) -> Split:
    """Each client holds ``classes_per_client`` classes (ReBaFL §5.1, FedAvg's shards)."""
    held = _deal_classes(rng, num_classes, [int(classes_per_client)] * num_clients)
    return _split_by_classes(
        labels, num_classes, held, rng, samples_per_client, "pathological"
    ), None


def pathological_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    if "classes_per_client" in spec:
        k = spec["classes_per_client"]
        require(
            is_int(k) and 1 <= k <= num_classes,
            f"partition.classes_per_client must be in [1, {num_classes}], got {k!r}",
        )
    check_samples_per_client(spec)


PATHOLOGICAL = Scheme(
    pathological,
    pathological_rules,
    "raise partition.classes_per_client or set partition.samples_per_client",
)


def client_groups(num_clients: int, num_groups: int) -> np.ndarray:
    """Group id of every client: equal contiguous blocks (clients 0..m/G-1 in group 0)."""
    return np.arange(num_clients) * num_groups // num_clients


def clustered(
    labels,
    num_classes,
    num_clients,
    rng,
    seed,
    classes_per_group: Sequence[int] = (2, 2, 3, 3, 5),
    samples_per_client: int | None = None,
) -> Split:
    """Clients in equal contiguous groups; group g's clients hold ``classes_per_group[g]``
    classes each (ReBaFL §5.3). The group ids also drive per-group dropout."""
    per_group = [int(k) for k in classes_per_group]
    groups = client_groups(num_clients, len(per_group))
    held = _deal_classes(rng, num_classes, [per_group[g] for g in groups])
    return _split_by_classes(
        labels, num_classes, held, rng, samples_per_client, "clustered"
    ), groups


def clustered_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    groups = list(spec.get("classes_per_group", clustered_default_groups()) or [])
    require(
        len(groups) >= 1 and all(is_int(k) and 1 <= k <= num_classes for k in groups),
        f"partition.classes_per_group entries must be integers in [1, {num_classes}], got {groups}",
    )
    require(
        len(groups) <= num_clients,
        f"{len(groups)} client groups need at least {len(groups)} clients, got {num_clients}",
    )
    check_samples_per_client(spec)


def clustered_default_groups() -> list[int]:
    """``clustered``'s groups when its settings name none (its signature's default)."""
    return list(inspect.signature(clustered).parameters["classes_per_group"].default)


CLUSTERED = Scheme(clustered, clustered_rules, "raise partition.classes_per_group")


def quantity(
    labels, num_classes, num_clients, rng, seed, rho: float = 0.7, tau: float = 0.5
) -> Split:
    """Joint size and label skew of GRP-FED §4.1, parameterised by (rho, tau).

    The paper only says sizes decrease over clients with rho and class counts decrease
    with tau. We read: client k's size is proportional to rho^(k/(K-1)) (the smallest
    client holds rho times the largest), and within a client the class of rank r (a
    random class order per client) has share proportional to tau^r. The total is the
    largest that no class pool runs out of.
    """
    rho, tau = float(rho), float(tau)
    sizes = rho ** (np.arange(num_clients) / max(num_clients - 1, 1))
    sizes /= sizes.sum()
    shares = np.zeros((num_clients, num_classes))
    for k in range(num_clients):
        shares[k, rng.permutation(num_classes)] = tau ** np.arange(num_classes)
    shares /= shares.sum(axis=1, keepdims=True)
    demand = (sizes[:, None] * shares).sum(axis=0)  # per-class demand per unit total
    supply = np.bincount(labels, minlength=num_classes)[:num_classes]
    total = float(np.min(supply / np.maximum(demand, 1e-12)))
    want = np.floor(total * sizes[:, None] * shares).astype(np.int64)
    pools = {c: rng.permutation(np.flatnonzero(labels == c)) for c in range(num_classes)}
    taken = np.zeros(num_classes, dtype=np.int64)
    out = []
    for k in range(num_clients):
        ix = []
        for c in range(num_classes):
            ix.append(pools[c][taken[c] : taken[c] + want[k, c]])
            taken[c] += want[k, c]
        out.append(np.concatenate(ix))
    return out, None


def quantity_rules(spec: Mapping[str, Any], num_classes: int, num_clients: int) -> None:
    for key in ("rho", "tau"):
        if key in spec:
            value = spec[key]
            require(
                is_number(value) and 0 < value <= 1,
                f"partition.{key} must be in (0, 1], got {value!r}",
            )


QUANTITY = Scheme(quantity, quantity_rules, "raise partition.rho")


def natural(labels, num_classes, num_clients, rng, seed, groups=None) -> Split:
    """One client per natural group of the data set (e.g. MIT-BIH: one per patient,
    FEMNIST: one per writer). Fewer clients than groups take contiguous blocks of groups in
    ascending id order, as even as can be: FEMNIST's 3,597 writers over 10 clients are
    blocks of 360 and 359 writers (the first ``groups % num_clients`` one more)."""
    if groups is None:
        raise ConfigError(
            "partition 'natural' needs a data set with natural clients "
            "(e.g. dataset=mitbih, dataset=femnist)"
        )
    rows = list(rows_by_group(groups).values())
    if num_clients > len(rows):
        raise ConfigError(
            f"partition 'natural' has {len(rows)} clients in this data set: "
            f"set num_clients={len(rows)} (or fewer: groups are then merged)"
        )
    blocks = np.array_split(np.arange(len(rows)), num_clients)
    return [merge_groups(rows[b[0] : b[-1] + 1]) for b in blocks], None


NATURAL = Scheme(natural, spread_hint="num_clients must not exceed the data set's natural groups")
