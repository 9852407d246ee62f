"""``fedimb export``: the metrics of many runs as one tidy table, for pandas, polars or a
spreadsheet, and for ``fedimb report <table>``.

One row per value of each completed run's ``metrics.csv`` (round, stage, split, metric,
value), with the run's identity and set-up repeated on every row (``run_id``, ``run_dir``,
``finished``, ``rerun``, the names of method, data set, model, partition and dropout, the
partition's scalar settings as ``partition.<key>``, ``num_clients``, ``seed``), and last the run's whole
set-up (its config.yaml without seed, paths and runtime, as :func:`fedimb.cli.report.setup_of`
gives it) as one JSON text in ``setup``, so that ``fedimb report <table>`` groups runs
exactly as it does from their folders. ``round``, ``seed`` and ``num_clients`` are
integers, ``value`` a float, ``rerun`` a boolean, the rest strings; a missing value is null.

Runs are found as ``fedimb report`` finds them (:func:`fedimb.cli.report.load_runs`): each
run id once, tracker copies left out. Reruns of a set-up and seed stay in, flagged: ``rerun``
is true for a run that a newer run (``finished``: when its summary.json was written, UTC)
of the same set-up and seed repeats, so ``table[~table["rerun"]]`` holds what the report
averages.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedimb.cli.report import (
    FoundRuns,
    RunRecord,
    load_runs,
    run_config,
    run_identity,
    setup_of,
    summary_from_rows,
)
from fedimb.core.errors import ConfigError, check_choice

if TYPE_CHECKING:
    import pandas as pd

FORMATS = {".parquet": "parquet", ".csv": "csv"}
#: the run columns before the partition's settings, the columns after them
HEAD = ("run_id", "run_dir", "finished", "rerun", "method", "dataset", "model", "partition")
NEWER = ("finished", "rerun")  # columns that tables written by older versions lack
TAIL = ("dropout", "num_clients", "seed", "round", "stage", "split", "metric", "value")
SETUP = "setup"  # the last column: the whole set-up as JSON
#: the config.yaml key each set-up column holds (``partition.<key>`` columns hold themselves)
SETUP_KEYS = {
    "method": "method.name",
    "dataset": "dataset.name",
    "model": "model.name",
    "partition": "partition.name",
    "dropout": "dropout.name",
    "num_clients": "num_clients",
}
INTEGERS = ("num_clients", "seed", "round")


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
    config = run_config(run_dir)
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


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ConfigError("fedimb export needs pandas: .venv/bin/pip install pandas") from None
    return pandas


def _pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigError(
            "Parquet needs pyarrow: .venv/bin/pip install pyarrow (or use --format csv)"
        ) from None


def export_runs(
    folders: list[Path], out: Path | None = None, fmt: str | None = None
) -> tuple[Path, FoundRuns, int]:
    """Write the table of every completed run at or below ``folders`` to ``out`` (default
    ``<first folder>/export.<format>``); return its absolute path, the runs found (those
    written are ``found.records``) and its number of rows."""
    fmt = output_format(out, fmt)
    out = out if out is not None else Path(folders[0]) / f"export.{fmt}"
    from fedimb.cli.preflight import check_writable

    check_writable(out.parent, "--out")
    _pandas()
    if fmt == "parquet":
        _pyarrow()
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


def _value(value: Any) -> Any:
    """A table cell as the Python value config.yaml held: numbers and booleans come back
    from their text (partition settings are strings in the table, every cell is in CSV)."""
    import pandas as pd

    if pd.isna(value):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, str):
        for parse in (int, float):
            try:
                return parse(value)
            except ValueError:
                pass
        return {"True": True, "False": False}.get(value, value)
    return value


def _text(value: Any) -> str:
    """A string cell as read_metrics_csv gives it ("" when null)."""
    import pandas as pd

    return "" if pd.isna(value) else str(value)


def table_setup(run: Any, columns: list[str]) -> dict[str, Any]:
    """The set-up of one run of a table (a row of it) as config.yaml keys, which
    :func:`fedimb.cli.report.group_runs` compares: names as text, the number of clients
    and the partition's settings as values; a null is a setting the run lacks."""
    setup = {}
    for name in columns:
        value = _value(run[name])
        if value is not None:
            typed = name == "num_clients" or name.startswith("partition.")
            setup[SETUP_KEYS.get(name, name)] = value if typed else str(value)
    return setup


def json_setup(text: str) -> dict[str, Any]:
    """The ``setup`` column's JSON back as :func:`fedimb.cli.report.setup_of` gives it
    (lists as tuples)."""
    return {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in json.loads(text).items()
    }


def read_frame(path: Path) -> pd.DataFrame:
    """The table at ``path`` as written by :func:`export_runs` (CSV cells as text, so run
    ids that look like numbers stay as written)."""
    pandas = _pandas()
    if not path.is_file():
        raise ConfigError(f"{path} is not a file")
    try:
        if path.suffix.lower() == ".parquet":
            _pyarrow()
            return pandas.read_parquet(path)
        return pandas.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as err:  # pyarrow's and pandas' parse errors are ValueErrors
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"cannot read {path}: {reason}") from None


def read_table(path: Path) -> list[RunRecord]:
    """The runs of a table written by :func:`export_runs`, in the table's order, for
    ``fedimb report``: the set-up is what the run columns say (without run_id, run_dir and
    seed), or exactly the run's set-up where the ``setup`` column has it; the summary
    numbers come from the test rows; run id and finish time tell reruns apart as in folders."""
    frame = read_frame(path)
    missing = [name for name in (*HEAD, *TAIL) if name not in frame.columns and name not in NEWER]
    if missing:
        raise ConfigError(
            f"{path} is not a table written by fedimb export (no column {', '.join(missing)})"
        )
    columns = [
        name for name in frame.columns if name in SETUP_KEYS or name.startswith("partition.")
    ]
    records = []
    for run_dir, table in frame.groupby("run_dir", sort=False):
        rows = [
            {
                "round": int(r),
                "stage": _text(stage),
                "split": str(split),
                "metric": str(metric),
                "value": float(value),
            }
            for r, stage, split, metric, value in zip(
                table["round"], table["stage"], table["split"], table["metric"], table["value"]
            )
        ]
        first = table.iloc[0]
        seed = _value(first["seed"])
        whole = first[SETUP] if SETUP in frame.columns else None
        setup = (
            json_setup(whole) if isinstance(whole, str) and whole else table_setup(first, columns)
        )
        records.append(
            RunRecord(
                str(run_dir),
                setup,
                "-" if seed is None else seed,
                summary_from_rows(rows),
                rows,
                _text(first["run_id"]),
                _seconds(first.get("finished")),
            )
        )
    return records


def _seconds(finished: Any) -> float | None:
    """A ``finished`` cell as seconds since the epoch (None where the table has none)."""
    text = _text(finished)
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None
