"""What every tracker gets: the run's names, parameters and tags, and the interface."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fedimb.cli.results.run_records import flatten_config
from fedimb.cli.rundir.summary import group_names
from fedimb.core.errors import FedimbError

PARAM_CHARS = (
    500  # a longer value (a file partition's index lists) is cut: params describe, files keep
)


class TrackingError(FedimbError):
    """A tracker cannot be used (not installed, unknown, its store unreachable)."""


@dataclass
class RunInfo:
    """A run as trackers name and describe it."""

    name: str  # the run folder's name
    group: str | None  # the sweep it belongs to (its folder, below the output root), if any
    output_root: Path
    params: dict[str, str] = field(default_factory=dict)  # the resolved config, dotted keys
    tags: dict[str, str] = field(default_factory=dict)  # method, dataset, partition, seed, ...


class Tracker:
    """One tracker's run. ``begin`` returns what ``fedimb resume`` needs to continue it."""

    name = "tracker"

    def __init__(self, settings: DictConfig, run: RunInfo):
        self.settings = settings
        self.run = run

    def begin(self, resumed: dict[str, Any]) -> dict[str, Any]:
        """Open (or, with ``resumed`` state, reopen) the run; log its parameters and tags."""
        raise NotImplementedError

    def where(self) -> str:
        """Where the run's records are, for the one line the front end prints."""
        raise NotImplementedError

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def end(self, summary: dict[str, float], run_dir: Path, completed: bool) -> None:
        """Log the summary and the run folder's files; close the run as finished or failed."""
        raise NotImplementedError


def flatten(tree: Any) -> dict[str, str]:
    """A nested config as ``a.b.c -> value`` strings (lists as JSON), each cut to
    ``PARAM_CHARS``."""
    out = {}
    for key, value in flatten_config(tree).items():
        text = json.dumps(value) if isinstance(value, tuple) else str(value)
        out[key] = text if len(text) <= PARAM_CHARS else text[: PARAM_CHARS - 1] + "…"
    return out


def sweep_group(run_dir: Path, output_root: Path) -> str | None:
    """The sweep a run folder belongs to: its parent when Hydra wrote ``multirun.yaml``
    there (a sweep folder), named by its path below the output root."""
    parent = run_dir.parent
    if not (parent / "multirun.yaml").is_file():
        return None
    try:
        return str(parent.relative_to(output_root))
    except ValueError:
        return parent.name


def run_info(cfg: DictConfig, run_dir: Path) -> RunInfo:
    output_root = Path(str(cfg.output.root)).resolve()
    tags = {
        **group_names(cfg),
        "seed": str(cfg.seed),
        "run_id": str(cfg.checkpoint.get("run_id")),
        "run_dir": str(run_dir),
    }
    params = flatten(OmegaConf.to_container(cfg, resolve=True))
    return RunInfo(run_dir.name, sweep_group(run_dir, output_root), output_root, params, tags)
