"""MIT-BIH beats, the natural (one client per patient) partition and the 1-D model."""

from __future__ import annotations

import numpy as np
import pytest

from fedimb.app.configuration import compose as config
from fedimb.app.configuration.build import experiment_data, new_model
from fedimb.core.data.ecg import BEAT_CLASSES, WINDOW, record_beats
from fedimb.core.errors import ConfigError


def test_beats_are_centred_standardised_windows_of_known_classes():
    signal = np.arange(3000, dtype=np.float64)
    x, y = record_beats(signal, np.array([100, 1000, 1500, 2900]), ["N", "V", "~", "A"])
    assert y.tolist() == [
        BEAT_CLASSES.index("V")
    ]  # 100/2900 too close to the edges, '~' is no beat
    assert x.shape == (1, 1, WINDOW)
    assert x[0, 0, WINDOW // 2] == pytest.approx(
        (1000 - np.mean(signal[872:1128])) / np.std(signal[872:1128]), rel=1e-4
    )
    assert abs(float(x.mean())) < 1e-5 and float(x.std()) == pytest.approx(1.0, rel=1e-3)


def fake_mitbih(tmp_path, patients=5):
    rng = np.random.default_rng(0)
    n = 40 * patients
    arrays = {
        "x_train": rng.normal(size=(n, 1, WINDOW)).astype(np.float32),
        "y_train": rng.integers(0, 12, n),
        "x_test": rng.normal(size=(60, 1, WINDOW)).astype(np.float32),
        "y_test": rng.integers(0, 12, 60),
        "groups_train": np.repeat(np.arange(patients), 40),
    }
    np.savez(tmp_path / "mitbih.npz", **arrays)
    return arrays


def test_natural_partition_gives_one_client_per_patient(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDIMB_CACHE", str(tmp_path / "cache"))
    arrays = fake_mitbih(tmp_path)
    cfg = config.compose(
        ["dataset=mitbih", f"dataset.root={tmp_path}", "partition=natural", "num_clients=5"]
    )
    data = experiment_data(cfg)
    for pid, idx in enumerate(data.partition.indices):
        assert np.all(arrays["groups_train"][idx] == pid) and len(idx) == 40
    model = new_model(cfg, data.dataset)
    import torch

    assert model(torch.from_numpy(data.dataset.x_train[:3])).shape == (3, 12)
    with pytest.raises(ConfigError, match="set num_clients=5"):
        experiment_data(
            config.compose(
                ["dataset=mitbih", f"dataset.root={tmp_path}", "partition=natural", "num_clients=6"]
            )
        )


def test_natural_partition_needs_natural_groups():
    with pytest.raises(ConfigError, match="natural clients"):
        experiment_data(config.compose(["partition=natural", "num_clients=5"]))
