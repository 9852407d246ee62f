"""Partitioners: split a training set over clients to reproduce the papers' non-IID set-ups.

Each partitioner is seeded and returns, per client, indices into the training set; the
:class:`Partition` adds the label histograms. ``iid`` and ``dirichlet`` use the
flwr-datasets partitioners; the others are written here because flwr-datasets has no
equivalent (fixed samples per client, client groups, global long-tail profiles, joint
size and label skew).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fedimb.core.data.stats import label_counts
from fedimb.core.errors import ConfigError


@dataclass(frozen=True)
class Partition:
    """Per-client training indices, their label histograms and optional client groups."""

    indices: tuple[np.ndarray, ...]
    counts: np.ndarray  # (num_clients, num_classes)
    groups: np.ndarray | None = None  # group id per client (``clustered``), else None

    @property
    def num_clients(self) -> int:
        return len(self.indices)


Split = tuple[list[np.ndarray], "np.ndarray | None"]
_Partitioner = Callable[..., Split]


def make_partition(
    labels: np.ndarray, num_classes: int, num_clients: int, spec: Mapping[str, Any], seed: int,
    groups: np.ndarray | None = None,
) -> Partition:
    """Partition ``labels`` over ``num_clients`` clients as the ``partition`` config says.

    ``groups`` is the data set's natural client of each sample (e.g. the patient), used
    by the ``natural`` partitioner."""
    labels = np.asarray(labels, dtype=np.int64)
    name = str(spec["name"])
    if name not in PARTITIONERS:
        raise ConfigError(
            f"unknown partition '{name}' (choose from: {', '.join(sorted(PARTITIONERS))})"
        )
    params = {k: v for k, v in spec.items() if k != "name"}
    if name == "natural":
        params["groups"] = groups
    rng = np.random.default_rng([int(seed), 0x9A27])
    try:
        indices, groups = PARTITIONERS[name](labels, num_classes, num_clients, rng, seed, **params)
    except TypeError as err:  # unknown or missing parameter
        raise ConfigError(f"partition '{name}': {err}") from None
    indices = [np.sort(np.asarray(ix, dtype=np.int64)) for ix in indices]
    counts = np.stack([label_counts(labels[ix], num_classes) for ix in indices])
    return Partition(tuple(indices), counts, groups)


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
    """Uniformly random, equally sized shards."""
    from flwr_datasets.partitioner import IidPartitioner

    # IidPartitioner cuts contiguous shards, so shuffle first.
    order = rng.permutation(len(labels))
    return _flwr_split(IidPartitioner(num_clients), labels, order), None


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
            for i, part in zip(holders, np.array_split(np.asarray(pools[c], dtype=np.int64), max(len(holders), 1))):
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
    labels, num_classes, num_clients, rng, seed, classes_per_client: int = 2,
    samples_per_client: int | None = None,
) -> Split:
    """Each client holds ``classes_per_client`` classes (ReBaFL §5.1, FedAvg's shards)."""
    k = int(classes_per_client)
    if not 1 <= k <= num_classes:
        raise ConfigError(
            f"partition.classes_per_client must be in [1, {num_classes}], got {classes_per_client}"
        )
    held = _deal_classes(rng, num_classes, [k] * num_clients)
    return _split_by_classes(labels, num_classes, held, rng, samples_per_client, "pathological"), None


def client_groups(num_clients: int, num_groups: int) -> np.ndarray:
    """Group id of every client: equal contiguous blocks (clients 0..m/G-1 in group 0)."""
    return np.arange(num_clients) * num_groups // num_clients


def clustered(
    labels, num_classes, num_clients, rng, seed, classes_per_group: Sequence[int] = (2, 2, 3, 3, 5),
    samples_per_client: int | None = None,
) -> Split:
    """Clients in equal contiguous groups; group g's clients hold ``classes_per_group[g]``
    classes each (ReBaFL §5.3). The group ids also drive per-group dropout."""
    per_group = [int(k) for k in classes_per_group]
    if not per_group or any(not 1 <= k <= num_classes for k in per_group):
        raise ConfigError(
            f"partition.classes_per_group entries must be in [1, {num_classes}], got {list(classes_per_group)}"
        )
    if len(per_group) > num_clients:
        raise ConfigError(f"{len(per_group)} client groups need at least as many clients, got {num_clients}")
    groups = client_groups(num_clients, len(per_group))
    held = _deal_classes(rng, num_classes, [per_group[g] for g in groups])
    return _split_by_classes(labels, num_classes, held, rng, samples_per_client, "clustered"), groups


# English letter frequencies (percent), the common reference table.
LETTER_FREQUENCIES = {
    "a": 8.167, "b": 1.492, "c": 2.782, "d": 4.253, "e": 12.702, "f": 2.228, "g": 2.015,
    "h": 6.094, "i": 6.966, "j": 0.153, "k": 0.772, "l": 4.025, "m": 2.406, "n": 6.749,
    "o": 7.507, "p": 1.929, "q": 0.095, "r": 5.987, "s": 6.327, "t": 9.056, "u": 2.758,
    "v": 0.978, "w": 2.360, "x": 0.150, "y": 1.974, "z": 0.074,
}
# EMNIST 'balanced' label order: 10 digits, 26 capitals, 11 distinct lower-case letters.
EMNIST_BALANCED_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabdefghnqrt"


def longtail_profile(
    num_classes: int, profile: str, imbalance_ratio: float = 10.0,
    frequencies: Sequence[float] | None = None,
) -> np.ndarray:
    """Relative class frequencies (max 1) of a global long-tail profile.

    - ``exponential``: w_c = ratio^(-c/(C-1)) (head/tail ratio = ``imbalance_ratio``).
    - ``halfnormal``: w_c = exp(-(c/(C-1))^2 / (2 s^2)) with s chosen so that the
      head/tail ratio is ``imbalance_ratio`` (Astraea's imbalanced CINIC-10).
    - ``letters``: English letter frequencies (Astraea's LTRF sets). For EMNIST-balanced
      (47 classes) every letter class gets its letter's frequency and digits the mean
      letter frequency (the paper does not say); otherwise class c gets the c-th most
      frequent letter.
    - ``explicit``: the given ``frequencies``.
    """
    c = np.arange(num_classes, dtype=np.float64)
    span = max(num_classes - 1, 1)
    ratio = float(imbalance_ratio)
    if profile in ("exponential", "halfnormal") and ratio < 1:
        raise ConfigError(f"partition.imbalance_ratio must be >= 1, got {imbalance_ratio}")
    if profile == "exponential":
        w = ratio ** (-c / span)
    elif profile == "halfnormal":
        w = np.exp(-((c / span) ** 2) * np.log(ratio)) if ratio > 1 else np.ones(num_classes)
    elif profile == "letters":
        if num_classes == len(EMNIST_BALANCED_CHARS):
            mean = float(np.mean(list(LETTER_FREQUENCIES.values())))
            w = np.array([LETTER_FREQUENCIES.get(ch.lower(), mean) for ch in EMNIST_BALANCED_CHARS])
        elif num_classes <= 26:
            w = np.sort(np.array(list(LETTER_FREQUENCIES.values())))[::-1][:num_classes]
        else:
            raise ConfigError(f"the 'letters' profile needs <= 26 or exactly 47 classes, got {num_classes}")
    elif profile == "explicit":
        if frequencies is None or len(frequencies) != num_classes:
            raise ConfigError(f"partition.frequencies must list {num_classes} values for profile 'explicit'")
        w = np.asarray(frequencies, dtype=np.float64)
        if (w < 0).any() or w.max() <= 0:
            raise ConfigError("partition.frequencies must be non-negative with a positive maximum")
    else:
        raise ConfigError(
            f"unknown long-tail profile '{profile}' (choose from: exponential, explicit, halfnormal, letters)"
        )
    return w / w.max()


def longtail(
    labels, num_classes, num_clients, rng, seed, profile: str = "exponential",
    imbalance_ratio: float = 10.0, frequencies: Sequence[float] | None = None,
    client_split: str = "iid", alpha: float = 0.5, min_partition_size: int = 2,
) -> Split:
    """Global class imbalance (Astraea §2.3/§4.1): keep a ``profile`` fraction of each
    class, then split the kept samples over clients (``iid`` = Astraea's random local
    distributions, or ``dirichlet``)."""
    weights = longtail_profile(num_classes, profile, imbalance_ratio, frequencies)
    kept = []
    for c in range(num_classes):
        pool = rng.permutation(np.flatnonzero(labels == c))
        kept.append(pool[: max(1, int(np.floor(len(pool) * weights[c])))] if len(pool) else pool)
    subset = np.sort(np.concatenate(kept))
    if client_split == "iid":
        parts, _ = iid(labels[subset], num_classes, num_clients, rng, seed)
    elif client_split == "dirichlet":
        parts, _ = dirichlet(labels[subset], num_classes, num_clients, rng, seed, alpha, min_partition_size)
    else:
        raise ConfigError(f"partition.client_split must be 'iid' or 'dirichlet', got '{client_split}'")
    return [subset[p] for p in parts], None


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
    if not 0 < rho <= 1 or not 0 < tau <= 1:
        raise ConfigError(f"partition.rho and partition.tau must be in (0, 1], got ({rho}, {tau})")
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
            ix.append(pools[c][taken[c]: taken[c] + want[k, c]])
            taken[c] += want[k, c]
        out.append(np.concatenate(ix))
    return out, None


def natural(labels, num_classes, num_clients, rng, seed, groups=None) -> Split:
    """One client per natural group of the data set (e.g. MIT-BIH: one per patient)."""
    if groups is None:
        raise ConfigError("partition 'natural' needs a data set with natural clients (e.g. dataset=mitbih)")
    ids = np.unique(groups)
    if len(ids) != num_clients:
        raise ConfigError(f"partition 'natural' has {len(ids)} clients in this data set: set num_clients={len(ids)}")
    return [np.flatnonzero(groups == g) for g in ids], None


def read_partition_file(path: str | None) -> dict[str, Any]:
    """The clients' index lists of a partition file ``{"clients": [[...], ...]}`` (a run
    folder's ``partition.json`` is one) and a digest of them; one-line errors for a
    missing, unreadable or malformed file. The indices travel inside the configuration
    (DESIGN: the configuration travels inside the run), so nodes never read the file."""
    import hashlib
    import json
    from pathlib import Path

    if not path:
        raise ConfigError("partition=file needs partition.path=<file.json> ({\"clients\": [[indices], ...]})")
    try:
        content = json.loads(Path(str(path)).expanduser().read_text())
    except FileNotFoundError:
        raise ConfigError(f"partition.path: no such file: {path}") from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"partition.path: {path} is not a JSON file ({err})") from None
    clients = content.get("clients") if isinstance(content, dict) else None
    if not isinstance(clients, list) or not all(isinstance(c, list) for c in clients):
        raise ConfigError(f"partition.path: {path} must hold {{\"clients\": [[indices of client 0], ...]}}")
    for k, client in enumerate(clients):
        for index in client:
            if not isinstance(index, int) or isinstance(index, bool):
                raise ConfigError(f"partition.path: client {k} has a non-integer index {index!r}")
    digest = hashlib.sha256(json.dumps(clients).encode()).hexdigest()[:12]
    return {"clients": clients, "digest": digest}


def from_file(labels, num_classes, num_clients, rng, seed, path=None, clients=None, digest=None) -> Split:
    """The clients' training indices given in the configuration (``partition=file``,
    filled from ``partition.path`` by :func:`read_partition_file`): indices into the
    data set's training split as fedimb loads it. A sample may belong to several
    clients (some frameworks reuse samples); indices out of range, empty clients and a
    client count other than ``num_clients`` are errors."""
    if clients is None:
        clients = read_partition_file(path)["clients"]
    if len(clients) != num_clients:
        raise ConfigError(f"partition.path holds {len(clients)} clients but num_clients={num_clients}: "
                          f"set num_clients={len(clients)}")
    out = []
    for k, client in enumerate(clients):
        ix = np.asarray(client, dtype=np.int64)
        if len(ix) == 0:
            raise ConfigError(f"partition.path: client {k} has no samples")
        if ix.min() < 0 or ix.max() >= len(labels):
            wrong = int(ix.min()) if ix.min() < 0 else int(ix.max())
            raise ConfigError(f"partition.path: client {k} has index {wrong}, outside the training split "
                              f"[0, {len(labels) - 1}]")
        out.append(ix)
    return out, None


PARTITIONERS: dict[str, _Partitioner] = {
    "file": from_file,
    "natural": natural,
    "iid": iid,
    "dirichlet": dirichlet,
    "pathological": pathological,
    "clustered": clustered,
    "longtail": longtail,
    "quantity": quantity,
}
