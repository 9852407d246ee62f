"""Model registry: encoder/head contract, shapes, parameter counts, seeding, weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedimb.core.errors import ConfigError
from fedimb.core.models import (
    MODELS,
    TOKEN_MODELS,
    build_model,
    get_weights,
    num_parameters,
    set_weights,
)

SHAPES = {
    "cnn28": (1, 28, 28),
    "cnn32": (3, 32, 32),
    "astraea_cnn": (1, 28, 28),
    "mlp": (1, 8, 8),
    "resnet": (3, 32, 32),
    "ecg_cnn1d": (1, 187),
    "mclr": (60,),
    "char_lstm": (80,),
}
BATCH = 3
NUM_CLASSES = 7


def test_shapes_cover_every_model():
    assert set(SHAPES) == set(MODELS)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_encoder_head_contract(name):
    shape = SHAPES[name]
    model = build_model({"name": name}, shape, NUM_CLASSES, seed=0)
    model.eval()
    generator = torch.Generator().manual_seed(1)
    if name in TOKEN_MODELS:  # character numbers below the vocabulary (the classes)
        x = torch.randint(0, NUM_CLASSES, (BATCH, *shape), generator=generator)
    else:
        x = torch.randn(BATCH, *shape, generator=generator)
    with torch.no_grad():
        logits = model(x)
        feats = model.encoder(x)
        composed = model.head(feats)
    assert logits.shape == (BATCH, NUM_CLASSES)
    assert feats.shape == (BATCH, model.feature_dim)
    assert isinstance(model.head, nn.Linear)
    assert model.head.in_features == model.feature_dim
    assert model.head.out_features == NUM_CLASSES
    assert model.num_classes == NUM_CLASSES
    torch.testing.assert_close(logits, composed)


def test_feature_dims():
    dims = {name: build_model({"name": name}, SHAPES[name], 10).feature_dim for name in SHAPES}
    assert dims == {
        "cnn28": 128,
        "cnn32": 128,
        "astraea_cnn": 150,
        "mlp": 64,
        "resnet": 64,
        "ecg_cnn1d": 64,
        "mclr": 60,
        "char_lstm": 128,
    }


def test_astraea_cnn_parameter_count():
    model = build_model({"name": "astraea_cnn"}, (1, 28, 28), 47)
    assert num_parameters(model) == 68_873


def test_mlp_parameter_count_and_hidden_option():
    # 64*128+128 + 128*64+64 + 64*10+10
    model = build_model({"name": "mlp"}, (1, 8, 8), 10)
    assert num_parameters(model) == 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10
    # list-valued config entries become tuples
    small = build_model({"name": "mlp", "hidden": [16]}, (1, 8, 8), 10)
    assert small.feature_dim == 16
    assert num_parameters(small) == 64 * 16 + 16 + 16 * 10 + 10


def test_resnet_depth_option():
    deeper = build_model({"name": "resnet", "depth": 14}, (3, 32, 32), 10)
    base = build_model({"name": "resnet", "depth": 8}, (3, 32, 32), 10)
    assert num_parameters(deeper) > num_parameters(base)
    with pytest.raises(ConfigError, match="resnet"):
        build_model({"name": "resnet", "depth": 9}, (3, 32, 32), 10)


def test_bad_option_is_config_error():
    with pytest.raises(ConfigError, match="mlp"):
        build_model({"name": "mlp", "nosuch": 1}, (1, 8, 8), 10)


@pytest.mark.parametrize("name", ["cnn28", "mlp", "ecg_cnn1d"])
def test_seeded_initialisation(name):
    shape = SHAPES[name]
    a = get_weights(build_model({"name": name}, shape, 10, seed=0))
    b = get_weights(build_model({"name": name}, shape, 10, seed=0))
    c = get_weights(build_model({"name": name}, shape, 10, seed=1))
    assert len(a) == len(b) == len(c)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c))


def test_get_set_weights_round_trip():
    src = build_model({"name": "resnet"}, (3, 32, 32), 10, seed=0)
    dst = build_model({"name": "resnet"}, (3, 32, 32), 10, seed=1)
    weights = get_weights(src)
    assert len(weights) == len(src.state_dict())
    # integer buffers (BatchNorm's batch counter) are included
    assert any(np.issubdtype(w.dtype, np.integer) for w in weights)
    set_weights(dst, weights)
    for x, y in zip(get_weights(dst), weights):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)
    # get_weights returns copies
    weights[0][...] = 0
    assert not np.array_equal(get_weights(src)[0], weights[0])


@pytest.mark.parametrize("name", ["cnn28", "resnet"])
def test_conv_models_train_channels_last_but_exchange_plain_arrays(name):
    model = build_model({"name": name}, SHAPES[name], 10, seed=0)
    convs = [m.weight for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert convs and all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    weights = get_weights(model)
    assert all(w.flags.c_contiguous for w in weights)
    torch.manual_seed(0)
    plain = MODELS[name](SHAPES[name], 10)  # same seed, default layout: same values
    for x, y in zip(weights, get_weights(plain)):
        np.testing.assert_array_equal(x, y)
    x = torch.randn(BATCH, *SHAPES[name])
    model.eval(), plain.eval()
    torch.testing.assert_close(model(x), plain(x), rtol=1e-4, atol=1e-5)


def test_set_weights_shape_mismatch():
    model = build_model({"name": "mlp"}, (1, 8, 8), 10, seed=0)
    weights = get_weights(model)
    bad = list(weights)
    bad[0] = np.zeros((bad[0].shape[0] + 1, bad[0].shape[1]), dtype=bad[0].dtype)
    with pytest.raises(ValueError):
        set_weights(model, bad)
    with pytest.raises(ValueError):
        set_weights(model, weights[:-1])
    # the failed load left the model unchanged
    for x, y in zip(get_weights(model), weights):
        np.testing.assert_array_equal(x, y)


def test_unknown_model_lists_choices():
    with pytest.raises(ConfigError) as info:
        build_model({"name": "nosuch"}, (1, 28, 28), 10)
    msg = str(info.value)
    assert "nosuch" in msg
    for name in MODELS:
        assert name in msg


def test_model_auto_saves_every_option_of_the_default_model():
    from fedimb.app.configuration.compose import compose

    for dataset, model in (("digits", "mlp"), ("synthetic", "mclr")):
        auto = compose([f"dataset={dataset}"]).model
        assert auto == compose([f"dataset={dataset}", f"model={model}"]).model
        assert len(auto) > 1  # the options, not the name alone


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_builder_defaults_to_its_yaml(name):
    """The builders keep keyword defaults for code that builds a model by name alone;
    they must be the values of the model's YAML, the one source of its defaults."""
    import inspect

    import yaml

    from fedimb.app.configuration.compose import CONF_DIR

    declared = yaml.safe_load((CONF_DIR / "model" / f"{name}.yaml").read_text())
    parameters = inspect.signature(MODELS[name]).parameters.values()
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    as_yaml = {k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()}
    assert as_yaml == {k: v for k, v in declared.items() if k != "name"}
