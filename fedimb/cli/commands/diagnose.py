"""``fedimb diagnose``: the imbalance of a federation, and which methods target it.

Three kinds of imbalance, each measured on the partition a configuration produces
(no training):

- **global** (Astraea): the class sizes over all clients — z-scores (population std,
  as Astraea's Algorithm 2) and the max/min class ratio;
- **local** (ReBaFL, FedRS/FedLC, Astraea's mediators, contribution normalisation):
  each client's KL divergence from the uniform label distribution, and what KLD
  Astraea's greedy mediators of γ clients would reach;
- **structure and size** (FedConcat, GRP-FED / q-FFL): whether the clients' label
  distributions fall into a few clusters (K-means elbow), and how unequal the clients'
  sample counts are (coefficient of variation).

The thresholds that turn numbers into advice are rules of thumb, stated where they are
applied; the advice names the numbers it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from omegaconf import DictConfig

from fedimb.cli.commands.overrides import parse_overrides
from fedimb.core.aggregate import schedule_mediators, zscore_plan
from fedimb.core.clustering import elbow_inertias, kmeans_clusters, label_distribution
from fedimb.core.data.stats import kl_to_uniform

# Rules of thumb behind the advice.
GLOBAL_RATIO = 3.0  # max/min class size from which global rebalancing pays off
LOCAL_KLD_SHARE = 0.25  # mean client KLD as a share of log C (its maximum)
CLUSTER_RESIDUAL = 0.10  # K-means inertia left at K, relative to K = 1, to call K clusters
SIZE_CV = 0.5  # coefficient of variation of client sizes called quantity skew


@dataclass
class Diagnosis:
    global_counts: np.ndarray
    zscores: np.ndarray
    augment: list[int]
    downsample: list[int]
    client_kl: np.ndarray
    mediator_kl: np.ndarray
    client_sizes: np.ndarray
    elbow: tuple[list[int], list[float]]
    clusters: int | None  # K of a clear cluster structure, else None
    cluster_sizes: list[int] = field(default_factory=list)
    tau_d: float = 0.0  # the Astraea settings the plan and mediators assume
    gamma: int = 0

    @property
    def num_classes(self) -> int:
        return len(self.global_counts)

    @property
    def class_ratio(self) -> float:
        low = self.global_counts.min()
        return float("inf") if low == 0 else float(self.global_counts.max() / low)

    @property
    def size_cv(self) -> float:
        return float(self.client_sizes.std() / self.client_sizes.mean())


def astraea_settings(method=None) -> tuple[float, int]:
    """(tau_d, gamma) of ``method`` if it is an Astraea method, else of conf/method/astraea.yaml."""
    from omegaconf import OmegaConf

    from fedimb.app.configuration.compose import CONF_DIR

    strategy = (
        method.strategy
        if method is not None and "tau_d" in (method.strategy or {})
        else OmegaConf.load(CONF_DIR / "method" / "astraea.yaml").strategy
    )
    return float(strategy.tau_d), int(strategy.gamma)


def diagnose_counts(
    counts: np.ndarray, seed: int = 0, max_k: int = 10, astraea: tuple[float, int] | None = None
) -> Diagnosis:
    """The diagnosis of a federation given its per-client label counts (one row per client);
    ``astraea`` = (tau_d, gamma), by default Astraea's own (:func:`astraea_settings`)."""
    tau_d, gamma = astraea or astraea_settings()
    counts = np.asarray(counts, dtype=np.float64)
    global_counts = counts.sum(axis=0)
    sigma = global_counts.std()
    zscores = (
        (global_counts - global_counts.mean()) / sigma
        if sigma > 0
        else np.zeros_like(global_counts)
    )
    augment, downsample, _ = zscore_plan(global_counts, tau_d)
    sizes = counts.sum(axis=1)
    nonempty = counts[sizes > 0]
    mediators = schedule_mediators(nonempty, gamma)
    mediator_kl = np.array([kl_to_uniform(nonempty[m].sum(axis=0)) for m in mediators])
    distributions = np.stack([label_distribution(c) for c in nonempty])
    ks, inertias = elbow_inertias(distributions, max_k, seed)
    clusters, cluster_sizes = None, []
    if inertias[0] > 0:
        clear = [
            k
            for k, inertia in zip(ks, inertias)
            if k > 1 and inertia <= CLUSTER_RESIDUAL * inertias[0]
        ]
        if clear:
            clusters = clear[0]
            labels = kmeans_clusters(distributions, clusters, seed)
            cluster_sizes = sorted(np.bincount(labels, minlength=clusters).tolist(), reverse=True)
    return Diagnosis(
        global_counts,
        zscores,
        augment,
        downsample,
        np.atleast_1d(kl_to_uniform(nonempty)),
        mediator_kl,
        sizes,
        (ks, inertias),
        clusters,
        cluster_sizes,
        tau_d,
        gamma,
    )


def advice(d: Diagnosis) -> list[str]:
    """Which of our methods target the imbalance found, each with the numbers behind it."""
    out = []
    log_c = np.log(d.num_classes)
    if d.class_ratio >= GLOBAL_RATIO:
        out.append(
            f"global imbalance (largest/smallest class {d.class_ratio:.1f}x, "
            f"z from {d.zscores.min():+.2f} to {d.zscores.max():+.2f}; "
            f"Astraea would augment classes {d.augment or 'none'} and downsample "
            f"{d.downsample or 'none'} at tau_d = {d.tau_d}): method=astraea (z-score rebalancing)"
        )
        out.append(
            "  a classifier biased towards the head classes: method=ccvr or creff "
            "(the classifier re-trained on the server), fedloge (long-tailed heads)"
        )
    mean_kl = float(np.mean(d.client_kl))
    if mean_kl >= LOCAL_KLD_SHARE * log_c:
        out.append(
            f"local label skew (mean client KLD to uniform {mean_kl:.2f} "
            f"of at most log C = {log_c:.2f}): "
            f"method=rebafl (balanced softmax, also robust to dropout), fedrs or fedlc; "
            f"normalize=latent_cosine on any weighted-average method"
        )
        out.append(
            "  a classifier each client skews: method=fednh or fedetf (fixed prototypes or "
            "ETF heads), fedrod (a balanced generic head and a personal one), feddecorr"
        )
        out.append(
            "  local training that forgets the classes a client lacks: method=fedntd or "
            "fedvls (distilled from the global model), feduv or fedrcl (representations "
            "kept as IID training would shape them)"
        )
        out.append(
            f"  mediators of {d.gamma} clients would bring the KLD to "
            f"{float(np.mean(d.mediator_kl)):.2f} "
            f"(mean over {len(d.mediator_kl)}): method=astraea_sched"
        )
    if d.clusters is not None:
        out.append(
            f"cluster structure ({d.clusters} clusters of sizes {d.cluster_sizes} leave "
            f"{d.elbow[1][d.clusters - 1] / d.elbow[1][0]:.0%} of the K = 1 spread): "
            f"method=fedconcat "
            f"method.strategy.num_clusters={d.clusters}"
        )
    if d.size_cv >= SIZE_CV:
        out.append(
            f"quantity skew (client sizes "
            f"{int(d.client_sizes.min())}-{int(d.client_sizes.max())}, "
            f"coefficient of variation {d.size_cv:.2f}): "
            f"method=grpfed (fair aggregation, personal models) or qffl"
        )
    if not out:
        out.append(
            f"no marked imbalance (class ratio {d.class_ratio:.1f}x, "
            f"mean client KLD {mean_kl:.2f}, "
            f"size CV {d.size_cv:.2f}): method=fedavg is a fair baseline"
        )
    return out


def _quantiles(values: np.ndarray, digits: int = 3) -> str:
    q = np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])
    return "  ".join(
        f"{name} {v:.{digits}f}" for name, v in zip(("min", "q25", "median", "q75", "max"), q)
    )


def empty_clients_line(sizes: np.ndarray) -> list[str]:
    """The warning for clients without training samples, which a run refuses."""
    empty = int(np.sum(sizes == 0))
    if not empty:
        return []
    return [
        f"  {empty} of {len(sizes)} clients get no training samples: a run refuses this partition "
        f"unless partition.allow_empty_clients=true (those clients are then never sampled)"
    ]


def report_lines(d: Diagnosis, title: str) -> list[str]:
    """The printed diagnosis."""
    ks, inertias = d.elbow
    relative = [i / inertias[0] if inertias[0] > 0 else 0.0 for i in inertias]
    if d.clusters:
        structure = f"clear structure at K = {d.clusters}, cluster sizes {d.cluster_sizes}"
    else:
        structure = "no clear cluster structure"
    lines = [title, "", "Global class sizes and z-scores (population std):"]
    lines += [
        f"  class {c:>3}: {int(n):>7}  z {z:+.2f}"
        for c, (n, z) in enumerate(zip(d.global_counts, d.zscores))
    ]
    lines += [
        f"  largest/smallest class: {d.class_ratio:.1f}x",
        "",
        f"Per-client KLD to uniform ({len(d.client_kl)} clients with data; 0 = balanced, "
        f"log C = {np.log(d.num_classes):.2f} = one class):",
        f"  {_quantiles(d.client_kl)}  mean {float(np.mean(d.client_kl)):.3f}",
        f"  Astraea mediators (gamma = {d.gamma}): {_quantiles(d.mediator_kl)}",
        "",
        f"Client sizes: {_quantiles(d.client_sizes, digits=0)}  CV {d.size_cv:.2f}",
        *empty_clients_line(d.client_sizes),
        "",
        "Label-distribution clusters (K-means inertia relative to K = 1):",
        "  " + "  ".join(f"K={k}: {r:.2f}" for k, r in zip(ks, relative)),
        f"  {structure} (rule: inertia <= {CLUSTER_RESIDUAL:.0%} of K = 1)",
        "",
        "Methods that target what was found:",
    ]
    return lines + [
        f"    {line.strip()}" if line.startswith("  ") else f"  - {line}" for line in advice(d)
    ]


def diagnose_config(cfg: DictConfig) -> tuple[Diagnosis, str]:
    """The diagnosis of the partition ``cfg`` produces, and a title naming the set-up."""
    from fedimb.app.configuration.build import experiment_data
    from fedimb.app.configuration.seeds import data_seed, train_seed

    data = experiment_data(cfg)
    partition = dict(cfg.partition)
    title = (
        f"Federation: {cfg.dataset.name}, {cfg.num_clients} clients, partition "
        + ", ".join(f"{k}={v}" for k, v in partition.items() if v is not None)
        + f", seed {cfg.seed}"
        + (
            f" (data {data_seed(cfg)}, train {train_seed(cfg)})"
            if cfg.get("seed_data") is not None or cfg.get("seed_train") is not None
            else ""
        )
    )
    # the k-means previews FedConcat's clustering, which draws from the training seed
    return diagnose_counts(
        data.partition.counts, train_seed(cfg), astraea=astraea_settings(cfg.method)
    ), title


def diagnose_main(argv: list[str]) -> int:
    """Print the label imbalance of the federation a configuration partitions (global
    class z-scores, per-client KLD to uniform, cluster structure, client sizes) and
    which methods target it. No training."""
    from fedimb.app.configuration.compose import compose

    example = (
        "dataset=mnist5k partition=dirichlet partition.alpha=0.1 num_clients=20, "
        "or +experiment=astraea_mnist5k"
    )
    overrides = parse_overrides("diagnose", diagnose_main, example, argv)
    diagnosis, title = diagnose_config(compose(overrides))
    print("\n".join(report_lines(diagnosis, title)))
    return 0
