"""The table ``fedimb export`` writes: its columns, and reading it back as run records.

A module of its own because two commands share it: ``fedimb export`` writes these columns
(:mod:`fedimb.cli.results.export`) and ``fedimb report <table>`` reads them back
(:func:`read_table`), so a table's runs group in the report exactly as their folders do.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedimb.cli.results.run_records import RunRecord, summary_from_rows
from fedimb.core.errors import ConfigError

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


def require_pandas():
    """pandas, or a one-line error saying how to install it."""
    try:
        import pandas
    except ImportError:
        raise ConfigError("fedimb export needs pandas: .venv/bin/pip install pandas") from None
    return pandas


def require_pyarrow() -> None:
    """A one-line error unless pyarrow (Parquet) is installed."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ConfigError(
            "Parquet needs pyarrow: .venv/bin/pip install pyarrow (or use --format csv)"
        ) from None


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
    :func:`fedimb.cli.results.report_tables.group_runs` compares: names as text, the number of
    clients and the partition's settings as values; a null is a setting the run lacks."""
    setup = {}
    for name in columns:
        value = _value(run[name])
        if value is not None:
            typed = name == "num_clients" or name.startswith("partition.")
            setup[SETUP_KEYS.get(name, name)] = value if typed else str(value)
    return setup


def json_setup(text: str) -> dict[str, Any]:
    """The ``setup`` column's JSON back as :func:`fedimb.cli.results.run_records.setup_of` gives it
    (lists as tuples)."""
    return {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in json.loads(text).items()
    }


def read_frame(path: Path) -> pd.DataFrame:
    """The table at ``path`` as written by ``fedimb export`` (CSV cells as text, so run
    ids that look like numbers stay as written)."""
    pandas = require_pandas()
    if not path.is_file():
        raise ConfigError(f"{path} is not a file")
    try:
        if path.suffix.lower() == ".parquet":
            require_pyarrow()
            return pandas.read_parquet(path)
        return pandas.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as err:  # pyarrow's and pandas' parse errors are ValueErrors
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"cannot read {path}: {reason}") from None


def read_table(path: Path) -> list[RunRecord]:
    """The runs of a table written by ``fedimb export``, in the table's order, for
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
                summary_from_rows(rows, setup.get("validation.objective_last")),
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
