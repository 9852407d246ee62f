"""A run folder's result files read as data anyone may have written: summary.json,
metrics.csv and config.yaml (events.jsonl: :func:`fedimb.cli.rundir.events.read_events`).

``fedimb report``, ``compare``, ``export``, ``resume`` and ``attach`` read folders that may
come from elsewhere (an archive, a colleague's disk). Each file is read within a size cap,
YAML without aliases (nine lines of nested aliases are a billion nodes for whoever walks
them), CSV with a field cap, and checked for the types its readers rely on; a file that
fails is one :class:`MalformedFile` line naming the file and the field, never a traceback
or a hang. A metrics.csv row whose value is not a finite number is dropped with one warning.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fedimb.app.configuration.saved import check_saved_config
from fedimb.app.configuration.upgrade import upgrade
from fedimb.app.server.checkpoint import experiment_key
from fedimb.core.errors import ConfigError, FedimbError, is_number

MAX_YAML_BYTES = 1_000_000
MAX_YAML_DEPTH = 64
MAX_JSON_BYTES = 4_000_000
MAX_CSV_FIELD = 65_536
METRICS_COLUMNS = ["round", "stage", "split", "metric", "value"]
#: summary.json's fields that hold a number or null (and every ``local_*`` one)
SUMMARY_NUMBERS = frozenset(
    "num_clients seed seed_data seed_train rounds rounds_planned num_rounds clients_lost "
    "final_accuracy final_macro_f1 final_loss best_accuracy best_round validation_fraction "
    "final_validation_accuracy validation_best_accuracy validation_best_round "
    "selected_test_accuracy validation_objective num_parameters bytes_up bytes_down "
    "target_accuracy round_to_target bytes_to_target wall_seconds server_seconds "
    "first_round_seconds mean_round_seconds_after_first sim_seconds privacy_epsilon "
    "privacy_delta".split()
)
#: config.yaml's sections that readers take for mappings
CONFIG_SECTIONS = ("method", "dataset", "model", "partition", "dropout", "runtime", "checkpoint")


class MalformedFile(FedimbError, ValueError):
    """A result file fedimb cannot have written; the message names the file and the field."""

    def __init__(self, path: Path, field: str, problem: str):
        super().__init__(f"{path}: {field}: {problem}")


def warn(message: str) -> None:
    """One warning line on stderr (stdout carries the command's own output)."""
    print(f"fedimb: warning: {message}", file=sys.stderr, flush=True)


def finite_number(value: Any) -> bool:
    """A number a mean may take in: not a boolean, NaN or infinite."""
    return is_number(value) and math.isfinite(value)


def read_text(path: Path, limit: int) -> str:
    """The file's text, refused past ``limit`` bytes (read no further than that)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
        if len(data) > limit:
            raise MalformedFile(path, "size", f"larger than {limit} bytes")
        return data.decode("utf-8")
    except OSError as err:
        raise MalformedFile(path, "file", f"cannot be read ({err.strerror or err})") from None
    except UnicodeDecodeError:
        raise MalformedFile(path, "file", "not UTF-8 text") from None


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split())[:200]


class _BoundedLoader(yaml.SafeLoader):
    """yaml.safe_load refuses Python tags, not aliases nor deep nesting: this refuses both."""

    depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError(f"line {self.peek_event().start_mark.line + 1}: an alias (*)")
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_YAML_DEPTH}")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping of at most :data:`MAX_YAML_BYTES`, without aliases."""
    try:
        data = yaml.load(read_text(path, MAX_YAML_BYTES), Loader=_BoundedLoader)  # noqa: S506
    except yaml.YAMLError as err:
        raise MalformedFile(path, "yaml", _one_line(err)) from None
    if not isinstance(data, dict):
        raise MalformedFile(path, "top level", "not a mapping")
    return data


def read_json(path: Path) -> Any:
    """JSON of at most :data:`MAX_JSON_BYTES`."""
    try:
        return json.loads(read_text(path, MAX_JSON_BYTES))
    except (ValueError, RecursionError) as err:
        raise MalformedFile(path, "json", str(err)[:200] or "nested too deep") from None


def read_summary(path: Path, warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """summary.json, its number fields numbers or null and ``completed`` a boolean;
    ``warn`` hears of each NaN or infinite number (never averaged in)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise MalformedFile(path, "top level", "not a JSON object")
    for key, value in data.items():
        if key in SUMMARY_NUMBERS or key.startswith("local_"):
            if value is not None and not is_number(value):
                raise MalformedFile(path, key, f"{str(value)[:40]!r} is not a number")
            if warn is not None and value is not None and not math.isfinite(value):
                warn(f"{path}: {key} is {value}: not averaged in")
    if not isinstance(data.get("completed", False), bool):
        raise MalformedFile(path, "completed", "neither true nor false")
    return data


def read_config(path: Path) -> dict[str, Any]:
    """config.yaml (:func:`read_yaml`) with its sections mappings and a method name."""
    config = read_yaml(path)
    for section in CONFIG_SECTIONS:
        if not isinstance(config.get(section) or {}, dict):
            raise MalformedFile(path, section, "not a mapping")
    if not isinstance((config.get("method") or {}).get("name"), str):
        raise MalformedFile(path, "method.name", "missing or not text")
    return config


def run_folder_config(run_dir: Path, overrides: Sequence[str] = ()) -> DictConfig:
    """The run folder's config.yaml, brought up to date (:func:`upgrade`), with
    ``overrides`` for ``fedimb resume`` and ``attach``: only keys and classes a fresh run
    could name, checked before any class is imported."""
    path = run_dir.resolve() / "config.yaml"
    saved = read_yaml(path)
    check_saved_config(saved, str(path))
    try:
        changes = OmegaConf.from_dotlist(list(overrides))
    except (OmegaConfBaseException, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read {' '.join(overrides)}: {_one_line(err)}") from None
    try:
        as_saved = OmegaConf.merge(OmegaConf.create(saved), changes)
        cfg = OmegaConf.merge(upgrade(saved), changes)
        assert isinstance(as_saved, DictConfig) and isinstance(cfg, DictConfig)
        # the checkpoint's name: the experiment as its run saved it (a resumed run's
        # config.yaml keeps it), not as the upgrade completed it
        stored = (saved.get("checkpoint") or {}).get("experiment")
        cfg.checkpoint.experiment = stored or experiment_key(as_saved)
        data = OmegaConf.to_container(cfg, resolve=False)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{path}: {_one_line(err)}") from None
    assert isinstance(cfg, DictConfig) and isinstance(data, dict)
    check_saved_config({str(k): v for k, v in data.items()}, str(path))
    return cfg


def _row_problem(row: list[str]) -> str | None:
    """Why a metrics.csv row cannot be used (None: it can)."""
    if len(row) != len(METRICS_COLUMNS):
        return f"{len(row)} fields, not {len(METRICS_COLUMNS)}"
    try:
        int(row[0])
    except ValueError:
        return f"round {row[0][:20]!r} is not an integer"
    try:
        value = float(row[4])
    except ValueError:
        return f"value {row[4][:20]!r} is not a number"
    return None if math.isfinite(value) else f"value {row[4][:20]} is not finite"


def read_metrics_csv(path: Path, warn: Callable[[str], None] | None = warn) -> list[dict[str, Any]]:
    """metrics.csv's rows (round an int, value a float); a row whose value is not a finite
    number, or with a field longer than :data:`MAX_CSV_FIELD`, is dropped and ``warn``
    hears of the drops in one line."""
    csv.field_size_limit(MAX_CSV_FIELD)
    rows: list[dict[str, Any]] = []
    dropped: list[str] = []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header != METRICS_COLUMNS:
                raise MalformedFile(path, "header", f"not {','.join(METRICS_COLUMNS)}")
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    break
                except csv.Error as err:
                    dropped.append(f"line {reader.line_num}: {err}")
                    continue
                if not row:  # a blank line
                    continue
                problem = _row_problem(row)
                if problem:
                    dropped.append(f"line {reader.line_num}: {problem}")
                else:
                    fields = dict(zip(METRICS_COLUMNS, row))
                    rows.append({**fields, "round": int(row[0]), "value": float(row[4])})
    except OSError as err:
        raise MalformedFile(path, "file", f"cannot be read ({err.strerror or err})") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise MalformedFile(path, "file", str(err)[:200]) from None
    if dropped and warn is not None:
        more = f"; ... ({len(dropped) - 3} more)" if len(dropped) > 3 else ""
        s = "" if len(dropped) == 1 else "s"
        warn(f"{path}: dropped {len(dropped)} row{s} ({'; '.join(dropped[:3])}{more})")
    return rows
