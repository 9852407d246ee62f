"""A deployed run requested while one of its SuperNodes is still starting (a slow or
emulated edge device): the front end waits for it (``runtime.wait_for_nodes``), says so,
and the run completes, instead of being refused by the preflight's node count."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedimb.cli.federation.local import LocalFederation
from tests.conftest import REPO

pytestmark = pytest.mark.slow

LATE = 20.0  # seconds after the run is requested that the second SuperNode starts


def read_lines(stream, lines: list[str], waiting: threading.Event) -> None:
    """Collect the front end's stdout; ``waiting`` is set at its first waiting line."""
    for line in stream:
        lines.append(line.rstrip("\n"))
        if "[fedimb] waiting for 1 of 2 SuperNodes" in line:
            waiting.set()


def test_a_node_that_connects_after_the_run_is_requested_is_waited_for(
    tmp_path, no_leaked_processes
):
    federation = LocalFederation(tmp_path / "fed", 2)
    start_node = federation.start_node
    federation.start_node = lambda i: (
        start_node(i) if i == 0 else None
    )  # the federation comes up with node 0 only
    lines: list[str] = []
    waiting = threading.Event()
    proc = None
    try:
        federation.start()
        requested = time.monotonic()
        with open(tmp_path / "fedimb.err", "w") as stderr:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fedimb",
                    *federation.runtime_overrides(),
                    "dataset=digits",
                    "num_clients=2",
                    "num_rounds=1",
                    "train.local_epochs=1",
                    "dropout=none",
                    f"output.root={tmp_path / 'out'}",
                ],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        reader = threading.Thread(
            target=read_lines, args=(proc.stdout, lines, waiting), daemon=True
        )
        reader.start()
        # Node 1 starts LATE seconds after the request, and not before the front end is
        # waiting for it: a front end that refuses at once never sees it.
        while not waiting.wait(0.5) and proc.poll() is None:
            pass
        if waiting.is_set():
            time.sleep(max(0.0, requested + LATE - time.monotonic()))
            start_node(1)
        proc.wait(timeout=600)
        reader.join(timeout=30)
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()  # the front end stops what it started
            proc.wait(timeout=60)
        federation.stop()
    stderr_tail = (tmp_path / "fedimb.err").read_text()[-3000:]
    assert waiting.is_set(), f"no waiting line; stdout: {lines[-20:]}; stderr: {stderr_tail}"
    assert proc.returncode == 0, stderr_tail
    assert any(line.startswith("[fedimb] 2 SuperNodes connected to") for line in lines), lines
    summary = json.loads((Path(lines[-1]) / "summary.json").read_text())
    assert summary["completed"] and summary["rounds"] == 1, summary
    print(
        "\n".join(line for line in lines if line.startswith("[fedimb] ") and "SuperNodes" in line)
    )
