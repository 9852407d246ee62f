"""Preflight: a run that cannot work stops before any Flower process starts, with one
line (exit code 2) that names the numbers that make it wrong."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from fedimb.app.configuration.build import experiment_data
from fedimb.app.configuration.compose import compose
from fedimb.cli.launch import preflight
from fedimb.core.errors import ConfigError
from tests.conftest import run_below

DIGITS = ["dataset=digits", "dropout=none", "num_rounds=1", "train.local_epochs=1"]


def one_line_error(result, *needles: str) -> str:
    """The error line of a front-end call that must have failed in preflight."""
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_cuda_without_a_device_names_what_torch_sees(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for runtime in ("simulation", "in_process"):
        with pytest.raises(
            ConfigError, match=r"device=cuda, but torch .* sees no CUDA device .*use device=cpu"
        ):
            preflight.check_device(compose([*DIGITS, "device=cuda", f"runtime={runtime}"]))
    preflight.check_device(
        compose([*DIGITS, "device=cuda", "runtime=deployment"])
    )  # the nodes' own GPUs
    preflight.check_device(compose([*DIGITS, "device=auto"]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_device_stops_the_front_end_before_flower(tmp_path):
    result = run_below(tmp_path, *DIGITS, "device=cuda", timeout=120)
    one_line_error(result, "device=cuda", "sees no CUDA device", torch.__version__)
    started = [
        p.name
        for p in tmp_path.rglob("*")
        if p.name in ("superlink.log", "flwr.log", "partition.json")
    ]
    assert not started  # no Flower process started, no run folder written


def test_clients_without_training_samples_are_counted_and_named():
    cfg = compose([*DIGITS, "partition=iid", "num_clients=1500"])  # 1,437 training samples
    with pytest.raises(ConfigError) as err:
        preflight.check_partition(cfg, experiment_data(cfg))
    message = str(err.value)
    assert "leaves 63 of 1500 clients without training samples" in message
    assert "digits has 1437 training samples" in message and "allow_empty_clients=true" in message

    dirichlet = compose(
        [
            *DIGITS,
            "partition=dirichlet",
            "partition.alpha=0.01",
            "partition.min_partition_size=0",
            "num_clients=200",
        ]
    )
    with pytest.raises(ConfigError, match="raise partition.alpha"):
        preflight.check_partition(dirichlet, experiment_data(dirichlet))

    allowed = compose(
        [*DIGITS, "partition=iid", "num_clients=1500", "partition.allow_empty_clients=true"]
    )
    preflight.check_partition(allowed, experiment_data(allowed))


def test_empty_clients_stop_the_front_end(tmp_path):
    result = run_below(
        tmp_path, *DIGITS, "partition=iid", "num_clients=1500", "runtime=in_process", timeout=120
    )
    one_line_error(result, "leaves 63 of 1500 clients without training samples")


def test_allowed_empty_clients_are_never_sampled(tmp_path):
    partition = tmp_path / "partition.json"
    partition.write_text(
        json.dumps({"clients": [list(range(0, 300)), [], list(range(300, 700)), []]})
    )
    from_file = [*DIGITS, "num_clients=4", "partition=file", f"partition.path={partition}"]
    allowed = [*from_file, "partition.allow_empty_clients=true"]
    result = run_below(tmp_path / "out", *allowed, "num_rounds=2", "runtime=in_process")
    assert result.returncode == 0, result.stderr[-2000:]
    events = [
        json.loads(line)
        for line in (tmp_path / "out").glob("*/*/events.jsonl").__next__().read_text().splitlines()
    ]
    rounds = [e for e in events if e.get("event") == "round" and e.get("round", 0) > 0]
    assert [r["clients"]["sampled"] for r in rounds] == [2, 2]
    assert all(r["clients"]["rejected"] == 0 and r["clients"]["errors"] == 0 for r in rounds)

    refused = run_below(tmp_path / "refused", *from_file, timeout=120)
    one_line_error(refused, "client 1 has no samples", "allow_empty_clients=true")


def test_labels_beyond_the_head_are_refused():
    cfg = compose(DIGITS)
    data = experiment_data(cfg)
    y_train = data.dataset.y_train.copy()
    y_train[0] = 10  # digits' head has 10 outputs: labels 0 to 9
    wrong = replace(data, dataset=replace(data.dataset, y_train=y_train))
    with pytest.raises(ConfigError, match=r"labels 0 to 10, but model=\w+'s head has 10 outputs"):
        preflight.check_labels(cfg, wrong)
    preflight.check_labels(cfg, data)
    assert np.all(data.dataset.y_train < 10)  # the shipped data set untouched


@pytest.mark.slow
def test_more_clients_than_supernodes_is_refused(tmp_path):
    from fedimb.cli.federation.local import LocalFederation

    with LocalFederation(tmp_path / "fed", 2) as federation:
        lines: list[str] = []
        cfg = compose(
            [*DIGITS, *federation.runtime_overrides(), "num_clients=3", "runtime.wait_for_nodes=5"]
        )
        with pytest.raises(
            ConfigError,
            match=r"num_clients=3, but the federation at .* has 2 connected SuperNode.*"
            r"wait longer with runtime.wait_for_nodes=SECONDS",
        ):
            preflight.check_supernodes(cfg, echo=lines.append)
        # the count stays the same: a line every 10 s, not one per poll (a poll of the busy
        # machine's flwr CLI may itself take seconds: the line count is the fake clock's test)
        assert lines
        for line in lines:
            assert line.startswith(
                f"[fedimb] waiting for 1 of 3 SuperNodes to connect to {federation.address} ("
            )
            assert line.endswith("s of 5s) ..."), line
        lines.clear()
        preflight.check_supernodes(
            compose([*DIGITS, *federation.runtime_overrides(), "num_clients=2"]), echo=lines.append
        )
        assert lines == []  # all there: nothing to wait for, nothing said


class FakeFederation:
    """``FlwrCli.list_supernodes`` and a clock for :func:`preflight.check_supernodes`: the
    number of online nodes at each count, in seconds that pass only when the check sleeps."""

    def __init__(self, online_per_poll: list[int], known: int):
        self.online_per_poll, self.known, self.now, self.polls = online_per_poll, known, 0.0, 0

    def list_supernodes(self):
        online = self.online_per_poll[min(self.polls, len(self.online_per_poll) - 1)]
        self.polls += 1
        return [{"status": "online" if i < online else "offline"} for i in range(self.known)]

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def waiting_check(monkeypatch, fake: FakeFederation, *overrides: str) -> list[str]:
    """Run the SuperNode check (num_clients=3) against ``fake``; the lines it printed."""
    monkeypatch.setattr(preflight.FlwrCli, "list_supernodes", lambda cli: fake.list_supernodes())
    monkeypatch.setattr(preflight, "time", fake)
    lines: list[str] = []
    preflight.check_supernodes(
        compose([*DIGITS, "runtime=deployment", "num_clients=3", *overrides]), echo=lines.append
    )
    return lines


def test_nodes_that_connect_during_the_wait_are_waited_for_with_a_line_per_change_or_ten_seconds(
    monkeypatch,
):
    fake = FakeFederation(
        [1] * 12 + [2] * 14 + [3], known=3
    )  # one node connects after 12 s, the last after 26 s
    lines = waiting_check(monkeypatch, fake)
    assert fake.polls == 27
    assert lines == [
        "[fedimb] waiting for 2 of 3 SuperNodes to connect to 127.0.0.1:8000 (0s of 120s) ...",
        "[fedimb] waiting for 2 of 3 SuperNodes to connect to 127.0.0.1:8000 (10s of 120s) ...",
        "[fedimb] waiting for 1 of 3 SuperNodes to connect to 127.0.0.1:8000 (12s of 120s) ...",
        "[fedimb] waiting for 1 of 3 SuperNodes to connect to 127.0.0.1:8000 (22s of 120s) ...",
        "[fedimb] 3 SuperNodes connected to 127.0.0.1:8000 after 26s",
    ]


def test_the_wait_ends_after_wait_for_nodes_seconds_and_names_the_setting(monkeypatch):
    fake = FakeFederation([2], known=3)
    with pytest.raises(
        ConfigError,
        match=r"has 2 connected SuperNode\(s\) \(3 known to it\) after 30s: start 1 more, "
        r"set num_clients=2, or wait longer with runtime.wait_for_nodes=SECONDS$",
    ):
        waiting_check(monkeypatch, fake, "runtime.wait_for_nodes=30")
    assert fake.now == 30 and fake.polls == 31


def test_wait_for_nodes_zero_checks_once(monkeypatch):
    fake = FakeFederation([2, 3], known=3)  # the last node would connect a second later
    with pytest.raises(ConfigError, match="has 2 connected SuperNode"):
        waiting_check(monkeypatch, fake, "runtime.wait_for_nodes=0")
    assert fake.polls == 1 and fake.now == 0


def test_diagnose_warns_of_clients_without_samples():
    from fedimb.cli.commands.diagnose import empty_clients_line

    (line,) = empty_clients_line(np.array([5, 0, 3, 0]))
    assert "2 of 4 clients get no training samples" in line and "allow_empty_clients=true" in line
    assert empty_clients_line(np.array([5, 1])) == []
