"""Shared helpers: run the front end as users do, and check nothing is left running."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import torch

# In-process tests train small models: one thread avoids oversubscribing the cores
# when Flower runs (or other tests) use them too.
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
MARKER = "FEDIMB_TEST_MARKER"


def pytest_collection_finish(session):
    """Modules that import dp-accounting load absl's logging while pytest captures stderr:
    its handler would close pytest's capture file at the next Hydra job of a test whose
    stderr is another stream (fedimb.core.absl_handler), failing every later test of the
    worker."""
    from fedimb.core.absl_handler import keep_absl_on_process_stderr

    keep_absl_on_process_stderr()


def marked_processes(marker: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``marker`` (started by one test)."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["pid"] == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(MARKER) == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def start_fedimb(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -m fedimb <args>`` from the repository root, running in the background.
    Ctrl-C reaches it as in a terminal even where the tests themselves run as a
    background job of a shell without job control, which ignores SIGINT (and its
    children inherit that)."""
    return subprocess.Popen(
        [sys.executable, "-m", "fedimb", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def finish_fedimb(proc: subprocess.Popen, timeout: float = 800) -> subprocess.CompletedProcess:
    """Wait for a front-end run; past ``timeout`` stop it with SIGTERM (so that it stops
    its Flower processes) before failing."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        raise AssertionError(
            f"fedimb did not finish within {timeout:.0f}s: {err[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_fedimb(
    *args: str, env: dict[str, str] | None = None, timeout: float = 800
) -> subprocess.CompletedProcess:
    """``python -m fedimb <args>`` from the repository root, to completion."""
    return finish_fedimb(start_fedimb(*args, env=env), timeout)


#: three clients of the digits data set training one local epoch each: the federation of
#: most front-end runs in the tests
SMALL_DIGITS = ("dataset=digits", "num_clients=3", "train.local_epochs=1")
#: :data:`SMALL_DIGITS` with the personal models scored on a local test share
PERSONAL_DIGITS = (
    *SMALL_DIGITS,
    "dropout=none",
    "evaluation.local_test_fraction=0.2",
    "evaluation.personal=true",
)


def checked_rounds(overrides: list[str], rounds: int = 2) -> tuple:
    """``rounds`` in-process rounds of :data:`SMALL_DIGITS` without dropout plus
    ``overrides``, each checked (every client trained, none rejected, a finite loss); the
    federation and the last round's record, whose test accuracy is checked to be one."""
    from fedimb.app.runtimes.in_process import InProcessFederation

    fed = InProcessFederation([*SMALL_DIGITS, "dropout=none", *overrides, f"num_rounds={rounds}"])
    record: dict = {}
    for rnd in range(1, rounds + 1):
        record = fed.round(rnd)
        assert record["clients"]["succeeded"] == 3 and record["clients"]["rejected"] == 0
        assert math.isfinite(record["train"]["train_loss"])
    assert 0 <= record["test"]["accuracy"] <= 1
    return fed, record


def personal_rounds(overrides: list[str], rounds: int = 2) -> tuple:
    """:func:`checked_rounds` of :data:`PERSONAL_DIGITS` plus ``overrides``, the last
    round's personal local score T_p checked to be an accuracy too."""
    fed, record = checked_rounds([*PERSONAL_DIGITS, *overrides], rounds)
    assert 0 <= record["extra"]["T_p"] <= 1
    return fed, record


def run_below(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m fedimb <args>`` to completion, its run folders below ``root``."""
    return run_fedimb(*args, f"output.root={root}", timeout=timeout)


def run_small(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m fedimb <args>`` on :data:`SMALL_DIGITS` in one process
    (``runtime=in_process``) to completion, its run folders below ``root``."""
    return run_below(root, *args, "runtime=in_process", *SMALL_DIGITS, timeout=timeout)


def smoke_groups(methods: list[str]) -> dict[tuple[str, ...], list[str]]:
    """``methods`` grouped by their shortest-run overrides (their YAML's ``smoke``), so
    that a sweep runs each group with its own; ``()`` holds the single-stage methods."""
    from fedimb.app.configuration.compose import smoke_overrides

    groups: dict[tuple[str, ...], list[str]] = {}
    for method in methods:
        groups.setdefault(tuple(smoke_overrides(method)), []).append(method)
    return groups


def with_rounds(overrides, rounds: int) -> list[str]:
    """``overrides`` plus ``num_rounds=<rounds>`` unless they set it already."""
    return [
        *overrides,
        *([] if any(o.startswith("num_rounds=") for o in overrides) else [f"num_rounds={rounds}"]),
    ]


@pytest.fixture
def no_leaked_processes(monkeypatch):
    """Fails the test if a process it started (Flower, Ray, ...) outlives it.

    Every process the test starts inherits a unique environment marker, so processes
    of anything else running on the machine are never mistaken for leaks.
    """
    import time
    import uuid

    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, marker)
    yield
    deadline = time.monotonic() + 20
    while (leaked := marked_processes(marker)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not leaked, f"processes left running: {[p.cmdline()[:3] for p in leaked]}"
