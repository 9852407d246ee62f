"""Ctrl-C and SIGTERM stop a run with one line that says how far it got and how to
continue it, the exit code of the signal, and no Flower or Ray process left."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.conftest import finish_fedimb, start_fedimb

DIGITS = ("dataset=digits", "num_clients=3", "num_rounds=100000", "train.local_epochs=1")


def wait_for_round(proc: subprocess.Popen, at_least: int) -> list[str]:
    """The front end's stdout up to its first progress line of a round >= ``at_least``."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        progress = re.match(r"round +(\d+)/", line)
        if progress and int(progress.group(1)) >= at_least:
            return lines
    raise AssertionError(f"the run ended before round {at_least}: {proc.communicate()[1][-2000:]}")


def descendants(proc: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=True)


def interrupt(args: tuple[str, ...], tmp_path: Path, signum: int, at_round: int = 1):
    """Start a run, signal it once round ``at_round`` is reported; the finished process,
    its stderr lines, and the processes it had started."""
    proc = start_fedimb(
        *args, f"output.root={tmp_path}", f"checkpoint.dir={tmp_path / 'checkpoints'}"
    )
    wait_for_round(proc, at_round)
    children = descendants(proc)
    proc.send_signal(signum)
    result = finish_fedimb(proc, timeout=180)
    _, alive = psutil.wait_procs(children, timeout=30)  # stopped ones are reaped by now
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left running: {[p.cmdline()[:3] for p in alive]}"
    return result, [line for line in result.stderr.splitlines() if line.strip()]


def the_run_folder(tmp_path: Path) -> Path:
    (partition,) = tmp_path.rglob("partition.json")
    return partition.parent


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_in_process_run_says_how_to_resume_it(tmp_path, signum, code):
    result, lines = interrupt((*DIGITS, "runtime=in_process"), tmp_path, signum, at_round=2)
    assert result.returncode == code
    assert len(lines) == 1, result.stderr
    run_dir = the_run_folder(tmp_path)
    assert re.fullmatch(
        r"fedimb: interrupted after round \d+ of 100000; "
        rf"continue with: fedimb resume {re.escape(str(run_dir))}",
        lines[0],
    ), lines[0]


def test_without_checkpoints_an_interrupted_run_says_there_is_nothing_to_resume(tmp_path):
    result, lines = interrupt(
        (*DIGITS, "runtime=in_process", "checkpoint.enabled=false"), tmp_path, signal.SIGINT
    )
    assert result.returncode == 130
    assert len(lines) == 1, result.stderr
    assert re.fullmatch(
        r"fedimb: interrupted after round \d+ of 100000; "
        r"nothing to resume \(checkpoint.enabled=false\)",
        lines[0],
    )


@pytest.mark.slow
def test_ctrl_c_in_the_simulation_stops_every_flower_process_with_one_line(tmp_path):
    result, lines = interrupt((*DIGITS, "runtime=simulation"), tmp_path, signal.SIGINT)
    assert result.returncode == 130
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fedimb: interrupted after round ")
    assert lines[0].endswith(f"; continue with: fedimb resume {the_run_folder(tmp_path)}")
