"""A deployed run outlives its log stream and its front end: a cut stream is re-attached
without a repeated event, an interrupted front end stops its run on the SuperLink, and a
detached run is followed to its end by ``fedimb attach``."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from fedimb.cli.federation.flwr_cli import FlwrCli, flwr_home
from fedimb.cli.federation.local import LocalFederation
from tests.conftest import finish_fedimb, run_fedimb, start_fedimb
from tests.integration.test_interrupt import wait_for_round

pytestmark = pytest.mark.slow

RUN = ("dataset=digits", "num_clients=2", "num_rounds=3", "train.local_epochs=1", "seed=4")

#: what differs between two runs of one experiment: how long things took and where they ran
TIMES = {
    "timing",
    "timing_by_client",
    "seconds",
    "elapsed",
    "wall_seconds",
    "server_seconds",
    "first_round_seconds",
    "mean_round_seconds_after_first",
    "run_dir",
}


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    with LocalFederation(tmp_path_factory.mktemp("federation"), 2) as started:
        yield started


def without_times(value):
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def run_folder_contents(run_dir: Path) -> dict:
    """What a run folder says about the run, timings aside."""
    events = [
        without_times(json.loads(line))
        for line in (run_dir / "events.jsonl").read_text().splitlines()
    ]
    metrics = [
        line
        for line in (run_dir / "metrics.csv").read_text().splitlines()
        if ",time," not in line and ",system,seconds," not in line
    ]
    summary = without_times(json.loads((run_dir / "summary.json").read_text()))
    return {"events": events, "metrics": metrics, "summary": summary}


def first_difference(got: dict, expected: dict) -> str:
    """Where two run folders' contents first differ, for the failure message."""
    for part in ("events", "metrics"):
        for i, (a, b) in enumerate(zip(got[part], expected[part])):
            if a != b:
                return f"{part}[{i}]: {a} != {b}"
        if len(got[part]) != len(expected[part]):
            return f"{part}: {len(got[part])} lines != {len(expected[part])}"
    return f"summary: {got['summary']} != {expected['summary']}"


def the_run_folder(root: Path) -> Path:
    (partition,) = root.rglob("partition.json")
    return partition.parent


def flwr_processes(front_end: subprocess.Popen, command: str) -> list[psutil.Process]:
    """The ``flwr <command>`` processes the front end started."""
    found = []
    for proc in psutil.Process(front_end.pid).children(recursive=True):
        try:
            args = proc.cmdline()
        except psutil.Error:
            continue
        if len(args) > 2 and Path(args[1]).name == "flwr" and args[2] == command:
            found.append(proc)
    return found


def run_status(federation: LocalFederation, run_dir: Path) -> str | None:
    run_id = json.loads((run_dir / "superlink_run.json").read_text())["run_id"]
    with flwr_home(federation.address) as (home, connection):
        status = FlwrCli(connection, home).status(run_id)
    return None if status is None else status.status


def serverapps(federation: LocalFederation) -> list[psutil.Process]:
    """The SuperLink's live ServerApp processes."""
    assert federation.superlink is not None
    found = []
    for proc in psutil.Process(federation.superlink.pid).children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and any(
                "flwr-serverapp" in a for a in proc.cmdline()
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_until(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.5)


def test_a_cut_stream_is_reattached_and_a_detached_run_attached(federation, tmp_path):
    overrides = (*RUN, *federation.runtime_overrides())
    uncut = run_fedimb(*overrides, f"output.root={tmp_path / 'uncut'}")
    assert uncut.returncode == 0, uncut.stderr[-3000:]
    expected = run_folder_contents(the_run_folder(tmp_path / "uncut"))

    # the flwr CLI process that carries the stream is killed once the run has started
    # (round 0's evaluation is in): three rounds of at least Flower's polling time remain
    cut = start_fedimb(*overrides, f"output.root={tmp_path / 'cut'}")
    before = wait_for_round(cut, 0)
    (stream,) = flwr_processes(cut, "run")
    stream.kill()
    result = finish_fedimb(cut, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "re-attaching (flwr log" in "".join(before) + result.stdout
    got = run_folder_contents(the_run_folder(tmp_path / "cut"))
    assert got == expected, first_difference(got, expected)

    # a detached front end is interrupted; the run goes on and fedimb attach fills in its folder
    detached = start_fedimb(
        *overrides, "runtime.detach=true", f"output.root={tmp_path / 'detached'}"
    )
    wait_for_round(detached, 0)
    detached.send_signal(signal.SIGINT)
    result = finish_fedimb(detached, timeout=300)
    run_dir = the_run_folder(tmp_path / "detached")
    assert result.returncode == 130
    assert f"fedimb attach {run_dir}" in result.stderr
    assert run_status(federation, run_dir) in ("starting", "running", "finished:completed")
    attached = run_fedimb("attach", str(run_dir))
    assert attached.returncode == 0, attached.stderr[-3000:]
    got = run_folder_contents(run_dir)
    assert got == expected, first_difference(got, expected)


def test_an_interrupted_front_end_stops_its_run_on_the_superlink(federation, tmp_path):
    proc = start_fedimb(
        *RUN, "num_rounds=50", *federation.runtime_overrides(), f"output.root={tmp_path}"
    )
    wait_for_round(proc, 1)
    proc.send_signal(signal.SIGINT)
    result = finish_fedimb(proc, timeout=300)
    run_dir = the_run_folder(tmp_path)
    assert result.returncode == 130, result.stderr[-3000:]
    assert "stopped run" in result.stdout and "(flwr stop)" in result.stdout
    assert run_status(federation, run_dir) == "finished:stopped"
    wait_until(lambda: not serverapps(federation), "the stopped run's ServerApp exits")
