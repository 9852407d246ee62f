"""Failures name their cause in every runtime: a client that raises, a server loop that
dies, a disk that fills up. Each test fails if the cause drops out of the text."""

from __future__ import annotations

import errno
import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedimb.app.configuration.build import experiment_data
from fedimb.app.configuration.compose import compose
from fedimb.app.server import checkpoint
from fedimb.cli.rundir.access import RunFolderError
from fedimb.cli.rundir.folder import RunRecorder
from tests.conftest import REPO, SMALL_DIGITS, run_below, run_fedimb

DIGITS = [*SMALL_DIGITS, "dropout=none"]
RUNTIMES = ["in_process", pytest.param("simulation", marks=pytest.mark.slow)]


def run_folder(result) -> Path:
    return Path(result.stdout.strip().splitlines()[-1])


def round_events(run_dir: Path) -> list[dict]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e["event"] == "round" and e["round"] > 0]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_client_error_shows_its_type_and_message(runtime, tmp_path):
    result = run_below(
        tmp_path,
        *DIGITS,
        "num_rounds=1",
        f"runtime={runtime}",
        "fault.kind=raise",
        "fault.clients=[1]",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(
        r"    ! client 1 on node \S+: RuntimeError: "
        r"injected fault: client 1 raises in fit \(round 1\)$",
        result.stdout,
        re.M,
    ), result.stdout
    (record,) = round_events(run_folder(result))
    assert record["clients"]["errors"] == 1 and record["clients"]["succeeded"] == 2
    if runtime == "simulation":  # the whole traceback, from the Ray worker, in flwr.log
        log = (run_folder(result) / "flwr.log").read_text()
        assert (
            "Traceback" in log
            and "RuntimeError: injected fault: client 1 raises in fit (round 1)" in log
        )


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_dying_server_names_type_message_and_line(runtime, tmp_path):
    result = run_below(
        tmp_path / "out",
        *DIGITS,
        "num_rounds=3",
        f"runtime={runtime}",
        "fault.kind=server",
        "fault.rounds=[2]",
        f"checkpoint.dir={tmp_path / 'checkpoints'}",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fedimb: error:")]
    assert (
        "RuntimeError: injected fault: the server raises in round 2 at "
        "fedimb/app/faults/injection.py:" in line
    ), line
    assert "fedimb resume" in line  # round 1 is checkpointed
    log_line = int(re.search(r"flwr\.log line (\d+)", line).group(1))
    log_path = Path(re.search(r"see (\S+flwr\.log)", line).group(1))
    assert '"event":"error"' in log_path.read_text().splitlines()[log_line - 1]


def _file_size_limit(limit: int):
    def apply() -> None:  # Python ignores SIGXFSZ, so a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_stops_the_run_in_one_line_without_a_partial_checkpoint(tmp_path):
    experiment_data(compose(DIGITS))  # the data set's cache is written here, not under the limit
    checkpoints = tmp_path / "checkpoints"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedimb",
            *DIGITS,
            "num_rounds=2",
            "runtime=in_process",
            f"checkpoint.dir={checkpoints}",
            f"output.root={tmp_path / 'out'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_file_size_limit(
            40_000
        ),  # digits' checkpoint is ~70 kB, the run folder's files smaller
    )
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("fedimb: error:")]
    assert "File too large" in line and "at fedimb/app/server/checkpoint.py:" in line, line
    assert not list(checkpoints.iterdir())  # neither a checkpoint nor a partial temporary file


def test_a_failed_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "run.npz"
    checkpoint.save(path, {"round": 1, "parameters": [np.ones(3)]})

    def disk_full(handle, **arrays):
        handle.write(b"PK\x03\x04 half a zip")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.np, "savez", disk_full)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save(path, {"round": 2, "parameters": [np.zeros(3)]})
    monkeypatch.undo()
    state = checkpoint.load(path)
    assert state["round"] == 1 and np.array_equal(state["parameters"][0], np.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["run.npz"]


def test_an_unwritable_run_folder_is_one_line(tmp_path, monkeypatch):
    from fedimb.cli.rundir import folder as run_folder

    recorder = RunRecorder(tmp_path, compose(DIGITS), echo=lambda line: None)

    def disk_full(path, rounds):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(run_folder, "write_metrics_csv", disk_full)
    with pytest.raises(
        RunFolderError,
        match=r"cannot write the run folder .*: No space left on device \(.*metrics\.csv\)",
    ):
        recorder.finish()


@pytest.mark.parametrize("setting", ["output.root", "checkpoint.dir"])
def test_an_output_folder_below_a_file_is_refused_before_the_run(setting, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    extra = [] if setting == "output.root" else [f"output.root={tmp_path / 'out'}"]
    result = run_fedimb(
        *DIGITS, "runtime=in_process", f"{setting}={blocker / 'x'}", *extra, timeout=120
    )
    assert result.returncode == 2
    assert (
        f"{setting}={blocker / 'x'} cannot be created: {blocker} is a file, not a folder"
        in result.stderr
    )


def _final_model(kind: str, rounds: int = 2, extra: tuple[str, ...] = ()):
    """The global model and round records of a 3-client in-process federation whose
    client 1 misbehaves as ``kind`` in every round."""
    from flwr.common import parameters_to_ndarrays

    from fedimb.app.runtimes.in_process import InProcessFederation

    fed = InProcessFederation(
        [*DIGITS, f"num_rounds={rounds}", f"fault.kind={kind}", "fault.clients=[1]", *extra]
    )
    timeout = fed.cfg.runtime.get("round_timeout")
    records = [fed.server.run_round(r, timeout) for r in range(1, rounds + 1)]
    return parameters_to_ndarrays(fed.parameters), records


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("nan", "array 0 holds NaN or Inf"),
        (
            "shape",
            "expected 6 arrays of shapes [(128, 64), (128,), (64, 128)]..., got 6 of [(8191,)",
        ),
        ("payload", "unknown payload 'injected' (this method reads: latent_mean)"),
    ],
)
def test_a_bad_update_is_rejected_counted_and_never_aggregated(kind, reason):
    without_client_1, failed = _final_model("raise")  # client 1 fails outright
    model, records = _final_model(kind)
    for record in records:
        assert record["clients"]["rejected"] == 1 and record["clients"]["succeeded"] == 2
        assert record["clients"]["nonfinite"] == (kind == "nan")
        assert any(f"update of client 1 rejected: {reason}" in m for m in record["messages"]), (
            record["messages"]
        )
    # the global model is, to the last bit, the one the two good clients make alone
    assert all(np.array_equal(a, b) for a, b in zip(model, without_client_1, strict=True))
    assert all(r["clients"]["errors"] == 1 for r in failed)


def test_an_oversized_known_payload_is_rejected():
    """A declared payload of another shape than its declaration (latent_mean: the
    model's feature width) is rejected before any method reads it."""
    from flwr.common import Code, FitRes, Status, ndarrays_to_parameters

    from fedimb.app.runtimes.in_process import InProcessFederation
    from fedimb.core import payload, protocol

    fed = InProcessFederation([*DIGITS, "num_rounds=1"])
    fed.round(1)
    strategy = fed.strategy
    weights = strategy.current_weights
    limit = strategy.run.num_parameters
    width = strategy.run.new_model().feature_dim
    res = FitRes(
        Status(Code.OK, "ok"),
        ndarrays_to_parameters(weights),
        10,
        payload.pack({protocol.LATENT_MEAN: np.zeros(limit + 1, dtype=np.float32)}),
    )
    assert strategy.check_update(0, weights, res) == (
        f"payload 'latent_mean' has shape ({limit + 1},), expected ({width},) (feature_dim)"
    )


def test_a_checkpointed_round_the_front_end_never_received_comes_back_on_resume(tmp_path):
    common = [
        *DIGITS,
        "num_rounds=3",
        "runtime=in_process",
        f"checkpoint.dir={tmp_path / 'checkpoints'}",
        f"output.root={tmp_path / 'out'}",
    ]
    failed = run_fedimb(*common, "fault.kind=server", "fault.rounds=[3]", timeout=300)
    assert failed.returncode == 2 and "fedimb resume" in failed.stderr, failed.stderr[-2000:]
    run_dir = Path(failed.stderr.strip().split("fedimb resume ")[-1])
    # the server checkpointed round 2, but its event died with it on the way to the front end
    events = run_dir / "events.jsonl"
    lines = events.read_text().splitlines()
    (lost,) = [
        line
        for line in lines
        if json.loads(line).get("event") == "round" and json.loads(line)["round"] == 2
    ]
    events.write_text("".join(f"{line}\n" for line in lines if line != lost))

    resumed = run_fedimb("resume", str(run_dir), "fault.kind=none", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [
        line.split("|")[0].strip()
        for line in resumed.stdout.splitlines()
        if line.startswith("round")
    ] == ["round 2/3", "round 3/3"]
    assert [e["round"] for e in round_events(run_dir)] == [1, 2, 3]
    assert [e for e in round_events(run_dir) if e["round"] == 2][0]["test"] == json.loads(lost)[
        "test"
    ]


def test_a_client_slower_than_the_round_timeout_fails_in_process():
    without_client_1, _ = _final_model("raise")
    model, records = _final_model("hang", extra=["fault.hang_seconds=4", "runtime.round_timeout=2"])
    for record in records:
        assert record["clients"]["errors"] == 1 and record["clients"]["succeeded"] == 2
        assert any(
            "client 1 on node" in m and "TimeoutError: no reply within the round timeout (2 s)" in m
            for m in record["messages"]
        ), record["messages"]
    assert all(
        np.array_equal(a, b) for a, b in zip(model, without_client_1, strict=True)
    )  # its late answer dropped
