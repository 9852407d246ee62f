"""The upper bounds of the settings that seed, or that size an allocation or a loop: a
part of the one table of :mod:`fedimb.app.configuration.validation`, checked before anything starts.

A typo's extra zeros (``num_clients=10**9``, ``seed=2**70``) is then one line that names
the setting, its value and its limit, not an out-of-memory or overflow traceback. Each
bound lies far above any experiment fedimb runs; the lower bounds and the types are the
settings' own rules (a value that is no integer is left to them)."""

from __future__ import annotations

from omegaconf import DictConfig, ListConfig, OmegaConf

from fedimb.core.errors import ConfigError, is_int

#: the largest seed: NumPy's RandomState, scikit-learn's ``random_state`` and Optuna's
#: samplers take no larger one (torch's 64 bits overflow sooner: a client's seed is
#: ``seed * 100003 + its id``)
MAX_SEED = 2**32 - 1
SEEDS = (
    "seed",
    "seed_data",
    "seed_train",
    "tune.seeds",
    "tune.sampler_seed",
    "dataset.split_seed",
    "dataset.data_seed",
)

MAX_CLIENTS = 1_000_000  # clients, and a generated data set's devices
ROUNDS = 100_000  # federated rounds, and a method's rounds of its own
EPOCHS = 10_000  # passes over a client's or the server's data
STEPS = 1_000_000  # optimisation steps and iterations
SAMPLES = 1_000_000  # samples in a batch, or drawn per class
WIDTH = 100_000  # a layer's width, a feature dimension
CLASSES = 10_000  # a generated data set's classes
TRIALS = 10_000  # fedimb tune's runs

#: the most each integer setting may be, where the configuration has it (a list: each item)
LIMITS: dict[str, int] = {
    "num_clients": MAX_CLIENTS,
    "num_rounds": ROUNDS,
    "train.local_epochs": EPOCHS,
    "train.batch_size": SAMPLES,
    "evaluation.batch_size": SAMPLES,
    "dataset.num_devices": MAX_CLIENTS,
    "dataset.dimension": WIDTH,
    "dataset.num_classes": CLASSES,
    "dataset.roles": MAX_CLIENTS,
    "model.hidden": WIDTH,
    "model.depth": 1_000,
    "model.embedding": WIDTH,
    "model.layers": 1_000,
    "aggregation.iterations": STEPS,
    "tune.trials": TRIALS,
    "tune.random_trials": TRIALS,
    "method.model_options.projection_dim": WIDTH,
    "method.model_options.etf_classifier.projection_dim": WIDTH,
    "method.strategy.mediator_epochs": EPOCHS,
    "method.strategy.virtual_per_class": SAMPLES,
    "method.strategy.calibration_epochs": EPOCHS,
    "method.strategy.calibration_batch_size": SAMPLES,
    "method.strategy.features_per_class": SAMPLES,
    "method.strategy.match_steps": STEPS,
    "method.strategy.retrain_epochs": EPOCHS,
    "method.strategy.retrain_batch_size": SAMPLES,
    "method.strategy.finetune_epochs": EPOCHS,
    "method.strategy.num_clusters": MAX_CLIENTS,
    "method.strategy.classifier_rounds": ROUNDS,
    "method.strategy.infer_samples": SAMPLES,
    "method.strategy.elbow_max_k": MAX_CLIENTS,
    "method.strategy.sse_steps": STEPS,
    "method.client.real_batch": SAMPLES,
    "method.client.gradient_repeats": STEPS,
    "method.client.adapt_local_epochs": EPOCHS,
    "method.client.adapt_rounds": ROUNDS,
    "method.client.adapt_epochs": EPOCHS,
    "method.client.disc_hidden": WIDTH,
    "method.client.inner_steps": STEPS,
}


def check_limits(cfg: DictConfig) -> None:
    """Every seed at most :data:`MAX_SEED`, every setting of :data:`LIMITS` at most its
    limit: the first that is not, as one line."""
    for key in SEEDS:
        node = OmegaConf.select(cfg, key)
        for value in node if isinstance(node, ListConfig) else [node]:
            if is_int(value) and value > MAX_SEED:
                raise ConfigError(
                    f"{key} must be at most {MAX_SEED:,} (2**32 - 1, the largest seed NumPy "
                    f"and scikit-learn take), got {value:,}"
                )
    for key, limit in LIMITS.items():
        node = OmegaConf.select(cfg, key)
        for value in node if isinstance(node, ListConfig) else [node]:
            if is_int(value) and value > limit:
                raise ConfigError(f"{key} must be at most {limit:,}, got {value:,}")
