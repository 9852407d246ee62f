"""fedimb's optimisers never import TorchDynamo (1.4-2 s per fresh process) and update
the weights bit for bit as torch's own do."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from fedimb.core.training import TrainConfig, make_optimizer
from tests.conftest import REPO


def _train(make, steps: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    optimizer = make(model.parameters())
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    optimizer.load_state_dict(optimizer.state_dict())
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("sgd", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4)),
        ("adam", lambda p: torch.optim.Adam(p, lr=0.05, weight_decay=1e-4)),
    ],
)
def test_the_update_is_torchs_to_the_last_bit(name, plain):
    ours = _train(lambda p: make_optimizer(p, settings(name)))
    theirs = _train(plain)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def settings(name: str) -> TrainConfig:
    return TrainConfig(
        local_epochs=1,
        batch_size=32,
        lr=0.05,
        momentum=0.9 if name == "sgd" else 0.0,
        weight_decay=1e-4,
        optimizer=name,
    )


def test_training_in_a_fresh_process_never_imports_dynamo():
    code = (
        "import sys, torch\n"
        "from fedimb.core.training import make_optimizer\n"
        "from tests.unit.test_no_dynamo import _train, settings\n"
        "for name in ('sgd', 'adam'):\n"
        "    _train(lambda p: make_optimizer(p, settings(name)))\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
