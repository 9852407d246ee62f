"""The local training loop, batching, seeded generators and client state."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.app import Context, MetricRecord, RecordDict
from torch import nn

from clients.base import BaseClient
from fedimb.core.data.client_data import ClientData
from fedimb.core.errors import ConfigError
from fedimb.core.models import build_model
from fedimb.core.training import (
    TrainConfig,
    batch_indices,
    evaluate_model,
    evaluate_predictions,
    make_optimizer,
    predict,
    seeded_generator,
    train_epochs,
)


def _separable_data(n=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    x = torch.randn(n, 2, generator=g) * 0.5
    x[:, 0] += torch.where(y == 1, 2.0, -2.0)
    return x, y


# -------------------------------------------------------------------- training
def test_train_epochs_reduces_loss():
    torch.manual_seed(0)
    x, y = _separable_data()
    model = nn.Linear(2, 2)
    loss_fn = lambda xb, yb: nn.functional.cross_entropy(model(xb), yb)  # noqa: E731
    with torch.no_grad():
        before = float(nn.functional.cross_entropy(model(x), y))
    idx = torch.arange(len(x))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    result = train_epochs(
        model,
        x,
        y,
        idx,
        epochs=5,
        batch_size=20,
        optimizer=opt,
        loss_fn=loss_fn,
        generator=seeded_generator(0),
    )
    with torch.no_grad():
        after = float(nn.functional.cross_entropy(model(x), y))
    assert after < before
    assert after < 0.2
    assert result.steps == 5 * 10
    assert result.samples == 5 * 200
    assert result.mean_loss > 0
    assert evaluate_model(model, x, y, 2)["accuracy"] > 0.95


def test_train_epochs_only_uses_given_indices_and_calls_hooks():
    x, y = _separable_data(50)
    model = nn.Linear(2, 2)
    seen = []
    calls = {"backward": 0, "step": 0}

    def loss_fn(xb, yb):
        seen.append(xb.clone())
        return nn.functional.cross_entropy(model(xb), yb)

    idx = torch.tensor([3, 7, 11, 20, 42])
    result = train_epochs(
        model,
        x,
        y,
        idx,
        epochs=2,
        batch_size=2,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=loss_fn,
        generator=seeded_generator(1),
        after_backward=lambda: calls.__setitem__("backward", calls["backward"] + 1),
        after_step=lambda: calls.__setitem__("step", calls["step"] + 1),
    )
    assert result.steps == 6  # 3 batches (2, 2, 1) per epoch
    assert result.samples == 10
    assert calls == {"backward": 6, "step": 6}
    rows = torch.cat(seen)
    assert rows.shape == (10, 2)
    allowed = {tuple(r.tolist()) for r in x[idx]}
    assert {tuple(r.tolist()) for r in rows} == allowed


def test_batch_indices_cover_each_index_once():
    indices = torch.arange(100, 147)
    gen = seeded_generator(0, 1, 2)
    batches = list(batch_indices(indices, 10, gen))
    assert [len(b) for b in batches] == [10, 10, 10, 10, 7]
    flat = torch.cat(batches)
    assert sorted(flat.tolist()) == list(range(100, 147))
    assert flat.tolist() != list(range(100, 147))  # shuffled


def test_batch_indices_reproducible():
    indices = torch.arange(30)
    a = torch.cat(list(batch_indices(indices, 4, seeded_generator(0, 1, 2))))
    b = torch.cat(list(batch_indices(indices, 4, seeded_generator(0, 1, 2))))
    c = torch.cat(list(batch_indices(indices, 4, seeded_generator(0, 1, 3))))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_batch_indices_successive_epochs_differ():
    gen = seeded_generator(5)
    e1 = torch.cat(list(batch_indices(torch.arange(30), 30, gen)))
    e2 = torch.cat(list(batch_indices(torch.arange(30), 30, gen)))
    assert sorted(e1.tolist()) == sorted(e2.tolist()) == list(range(30))
    assert not torch.equal(e1, e2)


def test_seeded_generator_keys_matter():
    draw = lambda *k: torch.rand(4, generator=seeded_generator(*k))  # noqa: E731
    assert torch.equal(draw(0, 1, 2), draw(0, 1, 2))
    assert not torch.equal(draw(0, 1, 2), draw(0, 2, 1))
    assert not torch.equal(draw(0, 1, 2), draw(1, 1, 2))


def test_train_config_and_optimizer():
    values = {
        "local_epochs": 2,
        "batch_size": 8,
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "optimizer": "sgd",
    }
    cfg = TrainConfig.from_mapping(values)
    assert cfg.as_dict() == values
    opt = make_optimizer(nn.Linear(2, 2).parameters(), cfg)
    assert isinstance(opt, torch.optim.SGD)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0.9
    adam = make_optimizer(
        nn.Linear(2, 2).parameters(), TrainConfig.from_mapping({**values, "optimizer": "adam"})
    )
    assert isinstance(adam, torch.optim.Adam)
    with pytest.raises(ConfigError, match="sgd"):
        make_optimizer(
            nn.Linear(2, 2).parameters(),
            TrainConfig.from_mapping({**values, "optimizer": "nosuch"}),
        )
    with pytest.raises(ConfigError, match="lr"):
        TrainConfig.from_mapping({k: v for k, v in values.items() if k != "lr"})


def test_predict_batches_match_full():
    model = nn.Linear(3, 4)
    x = torch.randn(25, 3)
    torch.testing.assert_close(predict(model, x, batch_size=7), model(x).detach())


def test_evaluation_in_batches_matches_the_whole_set_at_once():
    torch.manual_seed(0)
    model = nn.Linear(3, 4)
    x, y = torch.randn(25, 3), torch.randint(0, 4, (25,))
    logits = model(x).detach()
    metrics, classes = evaluate_predictions(model, x, y, 4, batch_size=7)
    assert metrics["loss"] == pytest.approx(float(nn.functional.cross_entropy(logits, y)), rel=1e-6)
    np.testing.assert_array_equal(classes, logits.argmax(dim=1).numpy())
    assert metrics["accuracy"] == pytest.approx(float((classes == y.numpy()).mean()))
    whole = evaluate_model(model, x, y, 4, batch_size=25)
    assert whole["loss"] == pytest.approx(metrics["loss"])
    assert whole["recall"] == metrics["recall"]


# ----------------------------------------------------------------------- state
def _client():
    ctx = Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 1, 8, 8, generator=g)
    y = torch.randint(0, 10, (12,), generator=g)
    data = ClientData(
        partition_id=2,
        x=x,
        y=y,
        indices=torch.arange(12),
        num_classes=10,
        label_counts=np.bincount(y.numpy(), minlength=10),
    )
    model = build_model({"name": "mlp"}, (1, 8, 8), 10, seed=0)
    return BaseClient(context=ctx, data=data, model=model, device=torch.device("cpu")), ctx


def test_state_round_trip():
    client, ctx = _client()
    arrays = {
        "c": np.arange(6, dtype=np.float32).reshape(2, 3),
        "n": np.array([1, 2, 3], dtype=np.int64),
    }
    client.save_state("scaffold", arrays)
    out = client.load_state("scaffold")
    assert set(out) == {"c", "n"}
    for k, v in arrays.items():
        assert out[k].dtype == v.dtype
        np.testing.assert_array_equal(out[k], v)
    # kept in the Context (so Flower carries it across rounds)
    assert "scaffold" in ctx.state


def test_state_survives_a_new_client_on_the_same_context():
    client, ctx = _client()
    client.save_state("s", {"a": np.array([4.0])})
    other = BaseClient(
        context=ctx, data=client.data, model=client.model, device=torch.device("cpu")
    )
    np.testing.assert_array_equal(other.load_state("s")["a"], [4.0])


def test_state_overwrite_and_independent_names():
    client, _ = _client()
    client.save_state("a", {"x": np.zeros(2)})
    client.save_state("b", {"y": np.ones(3)})
    client.save_state("a", {"z": np.full(1, 7.0)})
    assert set(client.load_state("a")) == {"z"}
    np.testing.assert_array_equal(client.load_state("a")["z"], [7.0])
    np.testing.assert_array_equal(client.load_state("b")["y"], np.ones(3))


def test_load_missing_state_is_none():
    client, ctx = _client()
    assert client.load_state("nothing") is None
    # a non-array record under the name is not array state either
    ctx.state["metrics"] = MetricRecord({"m": 1.0})
    assert client.load_state("metrics") is None


def test_client_properties_and_parameters():
    client, _ = _client()
    props = client.get_properties({})
    assert props["partition_id"] == 2
    assert props["num_examples"] == 12
    from fedimb.core import payload

    np.testing.assert_array_equal(payload.unpack(props)["label_counts"], client.data.label_counts)
    params = client.get_parameters({})
    client.set_parameters([np.zeros_like(p) for p in params])
    assert all(not p.any() for p in client.get_parameters({}))
