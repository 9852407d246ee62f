"""Synthetic(α, β): the generator's statistics, exact values of a tiny draw, the data set
it makes (one device per client, each with its own test set), and the mclr model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedimb.app.configuration.build import experiment_data, new_model
from fedimb.app.configuration.compose import compose
from fedimb.core.data import load_dataset
from fedimb.core.data.datasets import dataset_info
from fedimb.core.data.groups import rows_by_group
from fedimb.core.data.synthetic import (
    ARRAYS,
    SyntheticSpec,
    _global_model,
    device_data,
    device_sizes,
    feature_scales,
)
from fedimb.core.data.synthetic import load_synthetic as raw_synthetic
from fedimb.core.models import num_parameters

TINY = SyntheticSpec(
    alpha=1.0, beta=1.0, iid=False, dimension=60, num_classes=10, num_devices=3, data_seed=0
)


def spec(**changes) -> SyntheticSpec:
    return SyntheticSpec(**{**TINY.__dict__, **changes})


def labels(draw: SyntheticSpec, device: int) -> np.ndarray:
    data = device_data(draw, device)
    return np.concatenate([data.y_train, data.y_test])


def test_a_tiny_draw_has_these_exact_sizes_splits_and_labels():
    assert device_sizes(TINY).tolist() == [9346, 83, 141]
    first, second, third = (device_data(TINY, k) for k in range(3))
    assert [(len(d.y_train), len(d.y_test)) for d in (first, second, third)] == [
        (8411, 935),
        (75, 8),
        (127, 14),
    ]
    assert second.y_train[:8].tolist() == [4, 4, 8, 8, 8, 8, 8, 8]
    assert np.bincount(labels(TINY, 2), minlength=10).tolist() == [0, 0, 62, 0, 0, 1, 0, 0, 0, 78]
    assert first.x_train.dtype == np.float32 and first.x_train.shape == (8411, 60)
    assert float(first.x_train[0, 0]) == pytest.approx(3.004329, abs=1e-6)


def test_each_device_is_its_own_draw():
    """A device's data does not depend on how many devices the data set has."""
    small, large = spec(num_devices=3), spec(num_devices=1000)
    assert np.array_equal(device_data(small, 2).x_test, device_data(large, 2).x_test)
    assert not np.array_equal(
        device_data(spec(data_seed=1), 2).y_train[:50], device_data(small, 2).y_train[:50]
    )


def test_device_sizes_are_lognormal_4_2_plus_50():
    sizes = device_sizes(spec(num_devices=3000))
    assert sizes.min() >= 50
    logs = np.log(sizes - 50 + 0.5)  # int() floors the lognormal draw: +0.5 centres it
    assert logs.mean() == pytest.approx(4.0, abs=0.12)
    assert logs.std() == pytest.approx(2.0, abs=0.08)


def test_features_have_the_diagonal_covariance_j_to_the_minus_1_2():
    x = device_data(spec(num_devices=1), 0).x_train  # 8,411 samples of one device
    assert x.var(axis=0) == pytest.approx(feature_scales(60) ** 2, rel=0.1)
    assert feature_scales(3) ** 2 == pytest.approx([1.0, 2**-1.2, 3**-1.2])


def test_alpha_shifts_every_class_alike_so_the_labels_do_not_change():
    """u_k enters W_k and b_k as the same shift for every class, so it cancels in the
    argmax: as the papers define it, α changes no label (for any β)."""
    for beta in (0.0, 1.0):
        for device in range(5):
            assert np.array_equal(
                labels(spec(alpha=0.0, beta=beta, num_devices=5), device),
                labels(spec(alpha=1.0, beta=beta, num_devices=5), device),
            )


def majority_share(draw: SyntheticSpec) -> float:
    shares = []
    for device in range(draw.num_devices):
        y = labels(draw, device)
        shares.append(np.bincount(y, minlength=draw.num_classes).max() / len(y))
    return float(np.mean(shares))


def test_per_device_label_skew_grows_with_beta():
    skew = [
        majority_share(spec(alpha=0.0, beta=beta, num_devices=200)) for beta in (0.0, 0.5, 1.0, 2.0)
    ]
    assert skew == sorted(skew) and skew[-1] - skew[0] > 0.05


def test_the_iid_variant_labels_every_device_with_one_model():
    draw = spec(iid=True, num_devices=20)
    weights, bias = _global_model(draw)
    for device in range(20):
        data = device_data(draw, device)
        assert np.array_equal(
            np.argmax(data.x_train.astype(np.float64) @ weights + bias, axis=1), data.y_train
        )
        assert abs(data.x_train.mean()) < 0.2  # v_k = 0
    non_iid = spec(num_devices=20)
    agree = [
        np.mean(
            np.argmax(device_data(non_iid, k).x_train @ weights + bias, axis=1)
            == device_data(non_iid, k).y_train
        )
        for k in range(20)
    ]
    assert np.mean(agree) < 0.5  # each device's own model labels the non-IID data


SYNTHETIC = ["dataset=synthetic", "partition=natural", "num_clients=4", "seed=3"]


def test_the_data_set_has_one_client_per_device_and_the_union_of_their_test_sets():
    cfg = compose(SYNTHETIC)
    data = experiment_data(cfg)
    draw = [device_data(spec(num_devices=4, data_seed=3), k) for k in range(4)]
    assert data.partition.num_clients == 4
    for k, (indices, device) in enumerate(zip(data.partition.indices, draw)):
        assert np.array_equal(data.dataset.x_train[indices], device.x_train)
        assert np.array_equal(data.dataset.x_test[data.dataset.groups_test == k], device.x_test)
    assert len(data.dataset.y_test) == sum(len(d.y_test) for d in draw)


def mapped_file(array: np.ndarray) -> bool:
    """Whether ``array``'s memory is a map of a file (not a copy in this process)."""
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = array.base if isinstance(array.base, np.ndarray) else None
    return False


def test_the_draw_is_stored_once_and_memory_mapped(tmp_path, monkeypatch):
    """Each process maps the stored draw (it reads only the rows it indexes); a folder
    that was never completed is not used but drawn again."""
    monkeypatch.setenv("FEDIMB_CACHE", str(tmp_path))
    node = {**dict(compose(SYNTHETIC).dataset), "data_seed": 11}
    stored = raw_synthetic(node)
    assert all(
        mapped_file(stored[name]) for name in ("x_train", "y_train", "x_test", "groups_test")
    )
    (folder,) = tmp_path.glob("synthetic-v2-*")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{n}.npy" for n in ARRAYS] + ["complete"]
    )
    draw = spec(num_devices=4, data_seed=11)
    for k in range(4):
        assert np.array_equal(
            stored["x_train"][stored["groups_train"] == k], device_data(draw, k).x_train
        )
        assert np.array_equal(
            stored["y_test"][stored["groups_test"] == k], device_data(draw, k).y_test
        )
    (folder / "complete").unlink()
    (folder / "x_train.npy").unlink()  # a new file: the one mapped above stays whole
    (folder / "x_train.npy").write_bytes(b"half a file")
    again = raw_synthetic(node)
    assert np.array_equal(again["x_train"], stored["x_train"])


def test_rows_by_group_are_each_groups_rows_in_order():
    groups = np.random.default_rng(0).integers(0, 50, 2000)
    rows = rows_by_group(groups)
    assert list(rows) == sorted(set(groups.tolist()))
    assert all(np.array_equal(rows[g], np.flatnonzero(groups == g)) for g in rows)


def test_data_seed_fixes_the_draw_apart_from_the_run_seed():
    fixed = [
        load_dataset(dict(compose([*SYNTHETIC[:3], f"seed={s}", "dataset.data_seed=7"]).dataset))
        for s in (0, 1)
    ]
    assert np.array_equal(fixed[0].x_train, fixed[1].x_train)
    follows = [load_dataset(dict(compose([*SYNTHETIC[:3], f"seed={s}"]).dataset)) for s in (0, 1)]
    assert not np.array_equal(follows[0].y_train[:100], follows[1].y_train[:100])


def test_dimension_and_classes_are_settings():
    cfg = compose([*SYNTHETIC, "dataset.dimension=5", "dataset.num_classes=3"])
    info = dataset_info(cfg.dataset)
    assert (info.num_classes, info.input_shape) == (3, (5,))
    data = experiment_data(cfg)
    assert data.dataset.x_train.shape[1] == 5 and data.dataset.y_train.max() <= 2


def test_mclr_is_softmax_of_wx_plus_b_with_the_inputs_as_features():
    cfg = compose(SYNTHETIC)
    assert cfg.model.name == "mclr"  # the data set's default model
    model = new_model(cfg, dataset_info(cfg.dataset))
    assert num_parameters(model) == 60 * 10 + 10
    x = torch.randn(4, 60)
    assert torch.equal(model.encoder(x), x)
    assert torch.allclose(model(x), x @ model.head.weight.T + model.head.bias)


def test_a_method_that_trains_the_encoder_alone_needs_mclrs_linear_encoder():
    from fedimb.core.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"^method 'fedbabu' trains the model's encoder apart from its head, but "
        r"model=mclr's encoder has no parameters \(it passes the inputs through\): "
        r"set model=mclr model.encoder=linear",
    ):
        compose([*SYNTHETIC, "method=fedbabu"])
    cfg = compose([*SYNTHETIC, "method=fedbabu", "model=mclr", "model.encoder=linear"])
    model = new_model(cfg, dataset_info(cfg.dataset))
    x = torch.randn(4, 60)
    assert torch.allclose(
        model.encoder(x), x
    )  # identity at initialisation: the same logits as mclr
    assert num_parameters(model) == 60 * 60 + 60 + 610
