"""The leak check used by the Flower tests sees the processes a test starts, and only those."""

from __future__ import annotations

import os
import subprocess
import uuid

import psutil

from tests.conftest import MARKER, marked_processes


def test_marked_processes_finds_children_and_grandchildren():
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    # a shell that starts a background grandchild and exits: the grandchild is orphaned
    subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 &"], env=env, check=True)
    other = subprocess.Popen(["sleep", "30"])  # no marker: not this test's
    try:
        found = marked_processes(marker)
        assert len(found) == 1 and found[0].name() == "sleep"
        assert other.pid not in {p.pid for p in found}
    finally:
        killed = marked_processes(marker)
        for proc in killed:
            proc.kill()
        psutil.wait_procs(killed, timeout=30)  # a killed process takes a moment to exit
        other.kill()
        other.wait()
    assert not [p for p in marked_processes(marker) if p.is_running() and p.status() != "zombie"]
