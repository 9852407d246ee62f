"""``fedimb supernode``: no process outlives the node it served, and ``--help`` prints
only the help."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fedimb.cli.federation.processes import flower_env, free_port
from tests.conftest import REPO, run_fedimb


def wait_for(condition, timeout: float, what: str):
    """``condition()``'s first truthy value, polled until ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout:.0f}s")


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def started_tree(node: psutil.Process, log: Path) -> list[psutil.Process] | None:
    """The node and its worker, once the node runs flower-supernode and the worker serves
    (its loop is where an interrupt used to get lost)."""
    try:
        if not any("flower-supernode" in part for part in node.cmdline()):
            return None
        if "serving ClientApp tasks" not in log.read_text(errors="replace"):
            return None
        workers = [
            c
            for c in node.children(recursive=True)
            if "fedimb.cli.federation.node_worker" in " ".join(c.cmdline())
        ]
        return [node, *node.children(recursive=True)] if workers else None
    except psutil.Error:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_every_process_of_a_supernode_ends_with_it(sig, tmp_path):
    log_path = tmp_path / "supernode.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(  # a SuperLink address where nothing listens: the node keeps retrying
        [
            sys.executable,
            "-m",
            "fedimb",
            "supernode",
            "--insecure",
            "--superlink",
            f"127.0.0.1:{free_port()}",
            "--port",
            str(free_port()),
            "--node-config",
            "partition-id=0 num-partitions=1",
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=flower_env(tmp_path / "flwr-home"),
    )
    tree: list[psutil.Process] = []
    try:
        tree = wait_for(
            lambda: started_tree(psutil.Process(proc.pid), log_path),
            120,
            "the SuperNode and its worker started",
        )
        proc.send_signal(sig)
        proc.wait(timeout=60)
        wait_for(
            lambda: not any(alive(p) for p in tree), 30, "every process of the SuperNode ended"
        )
    finally:
        for leftover in [p for p in tree if alive(p)]:
            leftover.kill()
        proc.kill()
        proc.wait()
        log.close()


@pytest.mark.slow
def test_a_worker_deaf_to_sigint_still_ends_with_its_node(tmp_path):
    """A worker started with SIGINT ignored (as a shell script's background job is), so
    that the interrupt which ends its loop never arrives."""
    node = subprocess.Popen(["sleep", "600"])  # stands in for the SuperNode
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fedimb.cli.federation.node_worker",
                "--runtime-api-address",
                f"127.0.0.1:{free_port()}",
                "--node-pid",
                str(node.pid),
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
    try:
        wait_for(
            lambda: "serving ClientApp tasks" in log_path.read_text(errors="replace"),
            120,
            "the worker serves",
        )
        node.kill()
        node.wait()
        wait_for(lambda: worker.poll() is not None, 30, "the worker ended after its node")
    finally:
        node.kill()
        worker.kill()
        worker.wait()


def test_supernode_help_prints_only_the_help():
    result = run_fedimb("supernode", "--help", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: fedimb supernode"), result.stdout[:300]
    assert "INFO" not in result.stdout + result.stderr
