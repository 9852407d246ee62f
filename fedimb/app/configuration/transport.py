"""The configuration inside a Flower run: the resolved configuration travels as one
compact value of ``--run-config`` so that a ServerApp or ClientApp on another machine
needs no file from the launching machine; plain ``flwr run .`` composes from the
packaged ``conf/`` instead."""

from __future__ import annotations

import base64
import json
import shlex
import zlib
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.app.configuration.compose import compose, validate
from fedimb.core.errors import ConfigError
from fedimb.core.process_cache import ProcessCache, cache_key


def encode(cfg: DictConfig) -> str:
    """The resolved configuration as one compact ASCII string (for ``--run-config``)."""
    raw = json.dumps(
        OmegaConf.to_container(cfg, resolve=True), separators=(",", ":"), sort_keys=True
    )
    return base64.b64encode(zlib.compress(raw.encode("utf-8"), 9)).decode("ascii")


def decode(text: str) -> DictConfig:
    try:
        raw = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
        return OmegaConf.create(json.loads(raw))
    except Exception as err:
        raise ConfigError(
            f"the 'config' run-config value is not a fedimb configuration ({err})"
        ) from None


SIMPLE_KEYS = {
    "method": "method",
    "dataset": "dataset",
    "partition": "partition",
    "dropout": "dropout",
    "num-clients": "num_clients",
    "num-rounds": "num_rounds",
    "seed": "seed",
}

#: the experiment of each run configuration this process has served
_FROM_RUN: ProcessCache[DictConfig] = ProcessCache()


def from_run_config(run_config: Mapping[str, Any], *, check: bool = True) -> DictConfig:
    """The experiment a Flower run carries (once per process).

    The ``fedimb`` front end sends the whole resolved configuration in ``config``. With
    plain ``flwr run .`` the simple keys (method, dataset, partition, dropout,
    num-clients, num-rounds, seed) and free-form ``overrides`` are composed with the
    packaged ``conf/``. The ServerApp validates it (``check``); a ClientApp decodes what
    its ServerApp validated (``check=False``), without importing the method's strategy.
    """
    key = cache_key(json.dumps(dict(run_config), sort_keys=True, default=str))
    cfg = _FROM_RUN.get(key, lambda: _experiment_of(run_config))
    if check:
        validate(cfg)  # once per process and configuration
    return cfg


def _experiment_of(run_config: Mapping[str, Any]) -> DictConfig:
    if run_config.get("config"):
        return decode(str(run_config["config"]))
    overrides = [
        f"{target}={run_config[source]}"
        for source, target in SIMPLE_KEYS.items()
        if source in run_config and run_config[source] != ""
    ]
    overrides += shlex.split(str(run_config.get("overrides", "")))
    return compose(overrides, check=False)
