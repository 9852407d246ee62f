"""Shared helpers: run the front end as users do, and check nothing is left running."""

from __future__ import annotations

import os
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
FLOWER_NAMES = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr-serverapp",
                "flwr-clientapp", "flwr-simulation", "raylet", "gcs_server", "ray::")


def flower_processes() -> set[int]:
    """PIDs of Flower/Ray processes on this machine (to detect leaks)."""
    found = set()
    for proc in psutil.process_iter(["pid", "cmdline", "name"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(name in text for name in FLOWER_NAMES):
            found.add(proc.info["pid"])
    return found


def run_fedimb(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m fedimb <args>`` from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "fedimb", *args], cwd=REPO, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, **(env or {})},
    )


@pytest.fixture
def no_leaked_processes():
    """Fails the test if it leaves Flower/Ray processes behind."""
    before = flower_processes()
    yield
    import time

    deadline = time.monotonic() + 20
    while True:
        leaked = {pid for pid in flower_processes() - before if psutil.pid_exists(pid)
                  and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE}
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not leaked, f"processes left running: {[psutil.Process(p).cmdline()[:3] for p in leaked]}"
