"""The deployed path: PromptGrid (Flower's send-and-receive contract, checked often) and
the SuperNode's warm launcher (fedimb supernode, its worker loop)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from types import SimpleNamespace

import pytest

from fedimb.app.runtimes.prompt_grid import PromptGrid
from fedimb.cli.federation.supernode import supernode_main
from fedimb.core.errors import ConfigError


class SlowGrid:
    """Replies to message i become available after ``ready[i]`` pulls."""

    def __init__(self, ready: dict[str, int]):
        self.ready = ready
        self.pulls = 0
        self.pushed: list = []

    def push_messages(self, messages):
        self.pushed += list(messages)
        return list(self.ready)

    def pull_messages(self, ids):
        self.pulls += 1
        due = [i for i in ids if self.ready[i] <= self.pulls]
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i)) for i in due]


def test_every_reply_comes_back_once_as_soon_as_it_is_there():
    grid = SlowGrid({"a": 1, "b": 3, "c": 3})
    started = time.monotonic()
    replies = PromptGrid(grid, interval=0.01).send_and_receive(["m1", "m2", "m3"])
    assert sorted(r.metadata.reply_to_message_id for r in replies) == ["a", "b", "c"]
    assert grid.pushed == ["m1", "m2", "m3"]
    assert grid.pulls == 3  # stops pulling once the last reply arrived
    assert time.monotonic() - started < 1.0


def test_a_timeout_returns_the_replies_so_far():
    grid = SlowGrid({"a": 1, "b": 10**9})
    started = time.monotonic()
    replies = PromptGrid(grid, interval=0.01).send_and_receive(["m1", "m2"], timeout=0.1)
    assert [r.metadata.reply_to_message_id for r in replies] == ["a"]
    assert (
        grid.pulls >= 2 and time.monotonic() - started < 1.0
    )  # kept asking, then gave up at the deadline


class SharedGrid:
    """Replies become available when the test releases them; counts the pulls."""

    def __init__(self):
        self.released: set[str] = set()
        self.pulls = 0
        self.pushed = 0
        self.lock = threading.Lock()
        self.fail: Exception | None = None

    def push_messages(self, messages):
        with self.lock:
            ids = [f"{m}" for m in messages]
            self.pushed += len(ids)
        return ids

    def pull_messages(self, ids):
        with self.lock:
            self.pulls += 1
            if self.fail is not None:
                raise self.fail
            due = [i for i in ids if i in self.released]
            self.released -= set(due)
        return [SimpleNamespace(metadata=SimpleNamespace(reply_to_message_id=i)) for i in due]


def test_many_callers_share_one_collector_and_each_gets_its_own_replies():
    grid = SharedGrid()
    prompt = PromptGrid(grid, interval=0.001)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        calls = [pool.submit(prompt.send_and_receive, [f"m{i}"]) for i in range(8)]
        while grid.pushed < 8:
            time.sleep(0.001)
        grid.released.update(f"m{i}" for i in range(8))
        replies = [call.result(timeout=60) for call in calls]
    assert [[r.metadata.reply_to_message_id for r in rs] for rs in replies] == [
        [f"m{i}"] for i in range(8)
    ]
    threads = [t for t in threading.enumerate() if t.name == "fedimb-replies"]
    assert len(threads) >= 1 and prompt._collector in threads  # one collector per grid


def test_a_failing_pull_reaches_every_caller():
    grid = SharedGrid()
    grid.fail = RuntimeError("run stopped")
    with pytest.raises(RuntimeError, match="run stopped"):
        PromptGrid(grid, interval=0.001).send_and_receive(["m1"], timeout=60)


@pytest.mark.parametrize(
    "args", [["--isolation", "subprocess"], ["--isolation=process"], ["--ssl-certfile", "x.pem"]]
)
def test_fedimb_supernode_refuses_what_its_worker_cannot_serve(args):
    with pytest.raises(ConfigError):
        supernode_main(["--insecure", "--superlink", "127.0.0.1:9092", *args])


def test_the_node_worker_goes_on_when_its_runtime_api_fails(capsys):
    from fedimb.cli.federation.node_worker import launch_next_task

    class Failing:
        def AcquireTask(self, request):  # noqa: N802 - Flower's name
            raise ConnectionError("runtime API unreachable")

    class Idle:
        def AcquireTask(self, request):  # noqa: N802
            return SimpleNamespace(HasField=lambda name: False, token="")

    children: dict[int, int] = {}
    assert not launch_next_task(Failing(), None, "127.0.0.1:9", children)
    assert "ConnectionError: runtime API unreachable" in capsys.readouterr().out
    assert not launch_next_task(Idle(), None, "127.0.0.1:9", children)
    assert children == {}


def test_the_worker_serves_the_port_flower_supernode_takes():
    from fedimb.cli.federation.supernode import _option

    # the edge image's entry point names --port 9094; a user's later --port wins, as in argparse
    assert (
        _option(["--port", "9094", "--superlink", "s:9092", "--port=9200"], "--port", "9094")
        == "9200"
    )
    assert _option(["--port", "9094", "--port", "9300"], "--port", "1") == "9300"
    assert _option(["--superlink", "s:9092"], "--port", "9094") == "9094"


def test_a_node_says_once_whether_its_client_apps_see_cuda(monkeypatch):
    import subprocess

    import torch

    from fedimb.cli.federation import node_worker

    monkeypatch.setattr(torch.version, "cuda", None)
    assert node_worker.cuda_visibility() == f"torch {torch.__version__}, built without CUDA"
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    asked = []

    def probe(args, **kwargs):  # what a Jetson's child process answers
        asked.append(args)
        return subprocess.CompletedProcess(args, 0, "1 Orin\n", "")

    monkeypatch.setattr(subprocess, "run", probe)
    assert node_worker.cuda_visibility().endswith("with CUDA 12.6: 1 CUDA device(s) visible, Orin")
    assert "torch.cuda" in asked[0][-1]  # asked in a child: never initialised in the forking worker
    monkeypatch.setattr(
        subprocess, "run", lambda args, **kw: subprocess.CompletedProcess(args, 0, "0 \n", "")
    )
    assert node_worker.cuda_visibility().endswith("no CUDA device visible")
