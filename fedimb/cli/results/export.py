"""``fedimb export``: the metrics of many runs as one tidy table, for pandas, polars or a
spreadsheet, and for ``fedimb report <table>``.

One row per value of each completed run's ``metrics.csv`` (round, stage, split, metric,
value), with the run's identity and set-up repeated on every row (``run_id``, ``run_dir``,
``finished``, ``rerun``, the names of method, data set, model, partition and dropout, the
partition's scalar settings as ``partition.<key>``, ``num_clients``, ``seed``), and last the
run's whole set-up (its config.yaml without seed, paths and runtime, as
:func:`fedimb.cli.results.run_records.setup_of` gives it) as one JSON text in ``setup``, so that
``fedimb report <table>`` groups runs exactly as it does from their folders. ``round``,
``seed`` and ``num_clients`` are integers, ``value`` a float, ``rerun`` a boolean, the rest
strings; a missing value is null. The columns, and reading a table back, are
:mod:`fedimb.cli.results.export_table`'s.

Runs are found as ``fedimb report`` finds them (:func:`fedimb.cli.results.found_runs.load_runs`):
each run id once, tracker copies left out. Reruns of a set-up and seed stay in, flagged:
``rerun`` is true for a run that a newer run (``finished``: when its summary.json was
written, UTC) of the same set-up and seed repeats, so ``table[~table["rerun"]]`` holds what
the report averages.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedimb.cli.results.export_table import (
    FORMATS,
    HEAD,
    INTEGERS,
    SETUP,
    TAIL,
    require_pandas,
    require_pyarrow,
)
from fedimb.cli.results.found_runs import FoundRuns, load_runs
from fedimb.cli.results.run_records import RunRecord, run_config, run_identity, setup_of
from fedimb.core.errors import ConfigError, check_choice

if TYPE_CHECKING:
    import pandas as pd


def output_format(out: Path | None, fmt: str | None) -> str:
    """The format to write: ``fmt`` if given, else the one the suffix of ``out`` names
    (Parquet without ``out``); a known suffix that contradicts ``fmt`` is an error, since
    ``fedimb report`` tells the formats apart by it."""
    if out is not None and out.is_dir():
        raise ConfigError(
            f"cannot write {out}: it is a folder (give a file, e.g. {out / 'export.parquet'})"
        )
    suffix = FORMATS.get(out.suffix.lower()) if out is not None else None
    if fmt is None:
        if out is not None and suffix is None:
            raise ConfigError(
                f"cannot tell the format of {out}: give --format parquet or csv, "
                "or an --out ending in .parquet or .csv"
            )
        return suffix or "parquet"
    check_choice("format", fmt, tuple(FORMATS.values()))
    if suffix is not None and suffix != fmt:
        raise ConfigError(f"--format {fmt} does not match --out {out} (a .{suffix} name)")
    return fmt


def _name(section: Any) -> str | None:
    return (
        None
        if not isinstance(section, dict) or section.get("name") is None
        else str(section["name"])
    )


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _utc(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def run_columns(run: RunRecord, rerun: bool) -> dict[str, Any]:
    """The columns every row of one run repeats (see the module docstring)."""
    run_dir = Path(run.name)
    config = run.config or run_config(run_dir)
    partition = config.get("partition") or {}
    columns: dict[str, Any] = {
        "run_id": run_identity(run_dir, config),
        "run_dir": str(run_dir),
        "finished": _utc(run.finished),
        "rerun": rerun,
        **{
            column: _name(config.get(column))
            for column in ("method", "dataset", "model", "partition", "dropout")
        },
        "num_clients": _integer(config.get("num_clients")),
        "seed": _integer(config.get("seed")),
        SETUP: json.dumps(setup_of(config), sort_keys=True, default=str),
    }
    for key, value in partition.items():
        if key not in ("name", "clients") and (
            value is None or isinstance(value, (str, int, float, bool))
        ):
            columns[f"partition.{key}"] = None if value is None else str(value)
    return columns


def export_frame(found: FoundRuns) -> pd.DataFrame:
    """The table of the runs ``found`` (reruns flagged) as a pandas DataFrame, columns in
    order and typed."""
    import pandas as pd

    runs = [(run_columns(run, run in found.reruns), run.rows) for run in found.records]
    settings = sorted(
        {key for columns, _ in runs for key in columns if key.startswith("partition.")}
    )
    names = [*HEAD, *settings, *TAIL, SETUP]
    data: dict[str, list[Any]] = {name: [] for name in names}
    for columns, rows in runs:
        for name in names:
            if name in ("round", "stage", "split", "metric", "value"):
                data[name].extend(row[name] for row in rows)
            else:
                data[name].extend([columns.get(name)] * len(rows))
    data["stage"] = [stage or None for stage in data["stage"]]  # CSV cannot tell "" from null

    def dtype(name: str) -> str:
        if name == "value":
            return "float64"
        if name in INTEGERS:
            return "Int64" if None in data[name] else "int64"
        return "bool" if name == "rerun" else "str"

    return pd.DataFrame({name: pd.Series(data[name], dtype=dtype(name)) for name in names})


def export_runs(
    folders: list[Path], out: Path | None = None, fmt: str | None = None
) -> tuple[Path, FoundRuns, int]:
    """Write the table of every completed run at or below ``folders`` to ``out`` (default
    ``<first folder>/export.<format>``); return its absolute path, the runs found (those
    written are ``found.records``) and its number of rows."""
    fmt = output_format(out, fmt)
    out = out if out is not None else Path(folders[0]) / f"export.{fmt}"
    from fedimb.cli.launch.preflight import check_writable

    check_writable(out.parent, "--out")
    require_pandas()
    if fmt == "parquet":
        require_pyarrow()
    for folder in map(Path, folders):
        if not folder.is_dir():  # load_runs would read a table: export reads folders only
            raise ConfigError(f"{folder} is not a folder")
    found = load_runs(folders)
    if not found.records:
        raise ConfigError(f"no completed runs (summary.json) in {', '.join(map(str, folders))}")
    frame = export_frame(found)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            frame.to_parquet(out, index=False)
        else:
            frame.to_csv(out, index=False)
    except OSError as err:
        raise ConfigError(f"cannot write {out}: {err.strerror or err}") from None
    return out.resolve(), found, len(frame)
