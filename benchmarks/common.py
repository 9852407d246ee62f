"""Shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.plotting import (  # noqa: F401 - the scripts use them as common.*
    DOCS_DATA,
    DOCS_FIGURES,
    DOCS_TABLES,
    REPO,
    figure,
    panels,
    publish_figure,
    save_figure,
    save_panels,
)

#: the federation every cell of the fault and attack matrices starts from: three clients on
#: the embedded digits, three rounds, every client available
MATRIX_FEDERATION = ["dataset=digits", "num_clients=3", "num_rounds=3", "dropout=none"]
#: the runtimes a matrix cell runs in
MATRIX_RUNTIMES = ("in_process", "simulation", "deployment")


def matrix_experiment(training: list[str], fault: tuple[str, ...] = ()) -> list[str]:
    """The overrides of every cell of a fault or attack matrix: :data:`MATRIX_FEDERATION`,
    the matrix's ``training`` settings, seed 0 and client 1 the one that misbehaves (with
    the matrix's own ``fault`` settings)."""
    return [*MATRIX_FEDERATION, *training, "seed=0", "fault.clients=[1]", *fault]


def since(started: float) -> str:
    """The whole seconds since ``started`` (a :func:`time.perf_counter` reading), e.g. ``12 s``."""
    return f"{time.perf_counter() - started:.0f} s"


def run_cell(runtime: str, name: str, width: int, run: Callable[[], Any]) -> Any:
    """One cell of a fault or attack matrix: ``run()`` (a dataclass comes back), printed
    with the seconds it took as the matrix's progress line, and returned."""
    started = time.perf_counter()
    cell = run()
    print(f"{runtime:>11} {name:>{width}}: {asdict(cell)} ({since(started)})", flush=True)
    return cell


def fedimb_command(*args: str) -> list[str]:
    """``python -m fedimb <args>`` with this interpreter, as a command line."""
    return [sys.executable, "-m", "fedimb", *args]


def run_fedimb(*args: str, **options) -> subprocess.CompletedProcess:
    """``python -m fedimb <args>`` from the repository root to completion, its output
    captured as text; ``options`` go to :func:`subprocess.run` (e.g. ``timeout``)."""
    return subprocess.run(
        fedimb_command(*args), cwd=REPO, capture_output=True, text=True, **options
    )


def start_fedimb(*args: str, stderr: int = subprocess.PIPE, **options) -> subprocess.Popen:
    """``python -m fedimb <args>`` from the repository root in the background, its output
    piped as text (``stderr=subprocess.STDOUT`` joins the two streams); ``options`` go to
    :class:`subprocess.Popen`."""
    return subprocess.Popen(
        fedimb_command(*args),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        **options,
    )


def publish_table(table: Path, lines: list[str]) -> Path:
    """Write a markdown table file, echo it and its path; return the path."""
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text("\n".join(lines) + "\n")
    print(table.read_text())
    print(table)
    return table


def tiny_report(tiny: bool, table: Path, lines: list[str]) -> bool:
    """A ``--tiny`` run proves its script works: it writes its own report to ``table``
    and never the docs' tables, which keep the full run's. True where it did."""
    if tiny:
        publish_table(table, lines)
    return tiny


def publish_in_docs(
    name: str,
    lines: list[str],
    script: str | None = None,
    new: bool = True,
    data: list[dict] | None = None,
) -> Path | None:
    """Write ``lines`` to ``docs/tables/<name>.md``, the file a page of the documentation
    includes (``--8<-- "<name>.md"``), so that a table in the docs is the one its script
    wrote last. The first line names the script: ``script`` (a path relative to the
    repository), else the calling module's file. With ``new=False`` only a table the
    docs already hold is rewritten (for scripts whose table names come from arguments).
    ``data`` (one dict per point, the numbers unrounded) is written beside it as
    ``docs/tables/data/<name>.csv`` (:func:`write_data`), and the table's figure is drawn
    from it into ``docs/img/bench/`` where :mod:`benchmarks.figures` has one, so the
    figure on the page is always that of the table beside it.
    Returns the path, or None where nothing was written."""
    from benchmarks.figures import DRAWN, redraw

    if data is None and name in DRAWN:  # its figure would show the numbers of an older run
        raise ValueError(f"the figure of {name} is drawn from its data: publish it with data=")
    path = DOCS_TABLES / f"{name}.md"
    if not new and not path.exists():
        return None
    if script is None:
        script = calling_script()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"<!-- written by {Path(script).as_posix()}; rerun it to update -->\n\n"
        + "\n".join(lines)
        + "\n"
    )
    print(path)
    if data is not None:
        write_data(name, data)
    redraw(name)
    return path


def publish_results(
    table: Path, name: str, lines: list[str], new: bool = True, data: list[dict] | None = None
) -> Path:
    """Write a script's whole report ``lines`` to ``table`` (:func:`publish_table`) and its
    first markdown table to the docs' table ``name`` (:func:`publish_in_docs`, which
    ``new`` and ``data`` go to); return ``table``."""
    script = calling_script()
    publish_table(table, lines)
    publish_in_docs(name, table_part(lines), script=script, new=new, data=data)
    return table


def calling_script() -> str:
    """The file (relative to the repository) of the code that called the caller."""
    frame = inspect.currentframe().f_back.f_back  # type: ignore[union-attr]
    caller = frame.f_globals.get("__file__") or sys.argv[0]  # type: ignore[union-attr]
    return os.path.relpath(Path(caller).resolve(), REPO)


def write_data(name: str, rows: list[dict]) -> Path:
    """Write ``rows`` (one dict per point; a None value is written as an empty cell, not
    measured) to ``docs/tables/data/<name>.csv``, the data a figure in the docs is drawn
    from."""
    import csv

    path = DOCS_DATA / f"{name}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(path)
    return path


def publish_data(name: str, rows: list[dict]) -> Path:
    """Write ``rows`` to ``docs/tables/data/<name>.csv`` (:func:`write_data`), then draw the
    figure drawn from it (:mod:`benchmarks.figures`)."""
    path = write_data(name, rows)
    from benchmarks.figures import redraw

    redraw(name)
    return path


def mean_and_std(values: list, scale: float = 100.0) -> tuple[float | None, float | None]:
    """Mean and sample std of the known ``values`` (None: not measured) x ``scale`` over runs
    or draws (no std for one; neither where none is known): the numbers a table's
    ``mean ± std`` cell rounds, as the figures' data keep them."""
    import numpy as np

    known = scale * np.array([v for v in values if v is not None], dtype=np.float64)
    if not len(known):
        return None, None
    return float(known.mean()), (float(known.std(ddof=1)) if len(known) > 1 else None)


def table_part(lines: list[str]) -> list[str]:
    """The first markdown table (run of lines starting with ``|``) of a script's ``lines``."""
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def part(lines: list[str], start: str, stop: str = "Command:") -> list[str]:
    """``lines`` from the first line starting with ``start`` up to (without) the next line
    starting with ``stop``, trailing blank lines removed."""
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next((i for i in range(first + 1, len(lines)) if lines[i].startswith(stop)), len(lines))
    chosen = lines[first:last]
    while chosen and not chosen[-1].strip():
        chosen.pop()
    return chosen


def machine() -> str:
    """This machine in a table's caption: architecture and CPU count."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs"


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """A command-line parser described by the first line of a script's docstring."""
    return argparse.ArgumentParser(description=doc.splitlines()[0])


@contextlib.contextmanager
def local_federation_for(runtime: str, folder: Path, nodes: int = 3):
    """A local federation of ``nodes`` SuperNodes (under ``folder``) for the deployment
    runtime's cells, stopped when they are done; None for the other runtimes."""
    if runtime != "deployment":
        yield None
        return
    from fedimb.cli.federation.local import LocalFederation

    federation = LocalFederation(folder, nodes).start()
    try:
        yield federation
    finally:
        federation.stop()


def interval(values: list[float]) -> str:
    """``mean [low, high]`` in %, the 95% t-interval over the seeds (``fedimb compare``'s)."""
    from fedimb.cli.results.compare_stats import t_interval

    found = t_interval([100 * v for v in values])
    if found.low is None or found.high is None:
        return f"{found.mean:.1f}"
    return f"{found.mean:.1f} [{found.low:.1f}, {found.high:.1f}]"


def paired(values: list[float], reference: list[float]) -> str:
    """``+12.2 [+8.0, +16.5], p 0.006``: the mean seed-by-seed difference in points, its 95%
    t-interval and the paired t-test's p (``fedimb compare``'s); ``—`` for the reference."""
    from fedimb.cli.results.compare_stats import paired_difference

    if values == reference:
        return "—"
    found = paired_difference(
        {seed: 100 * v for seed, v in enumerate(values)},
        {seed: 100 * v for seed, v in enumerate(reference)},
    )
    if found.mean is None or found.low is None or found.high is None or found.p is None:
        return "—"
    p = "p < 0.001" if found.p < 0.0005 else f"p {found.p:.3f}"
    return f"{found.mean:+.1f} [{found.low:+.1f}, {found.high:+.1f}], {p}"
