"""MIT-BIH Arrhythmia Database beats (GRP-FED §4.1): one client per record (patient).

Each beat is a 256-sample window (0.71 s at 360 Hz) of the first lead centred on the
annotated R peak, standardised per beat. The 12 classes are the 12 most frequent beat
annotations of the database (the paper says 12 arrhythmia classes without naming
them): N, L, R, V, /, A, f, F, j, a, E, J; other annotations are skipped. Every
record's beats are split 80/20 at random (seeded) into training and test beats, so
each patient has local test data and the union is the global test set. The paper
counts 46 patients; we keep all 48 records as clients (records 201 and 202 come from
one patient).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

BEAT_CLASSES = ("N", "L", "R", "V", "/", "A", "f", "F", "j", "a", "E", "J")
WINDOW = 256
RECORDS = (
    "100 101 102 103 104 105 106 107 108 109 111 112 113 114 115 116 117 118 119 121 122 123 124 "
    "200 201 202 203 205 207 208 209 210 212 213 214 215 217 219 220 221 222 223 228 230 231 232 "
    "233 234"
).split()


def _import_wfdb():
    try:
        import wfdb
    except ImportError:  # pragma: no cover - wfdb is a dependency
        from fedimb.core.errors import DataUnavailableError

        raise DataUnavailableError(
            "reading MIT-BIH needs the 'wfdb' package (.venv/bin/pip install wfdb)"
        ) from None
    return wfdb


def record_beats(
    signal: np.ndarray, samples: np.ndarray, symbols: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Windows of ``WINDOW`` samples centred on each annotated beat of a known class."""
    half = WINDOW // 2
    xs, ys = [], []
    for sample, symbol in zip(samples, symbols):
        if symbol not in BEAT_CLASSES or sample - half < 0 or sample + half > len(signal):
            continue
        beat = signal[sample - half : sample + half].astype(np.float32)
        xs.append((beat - beat.mean()) / (beat.std() + 1e-6))
        ys.append(BEAT_CLASSES.index(symbol))
    if not xs:
        return np.zeros((0, 1, WINDOW), np.float32), np.zeros(0, np.int64)
    return np.stack(xs)[:, None, :], np.asarray(ys, np.int64)


def load_mitbih(
    spec: Mapping[str, Any],
    reachable: Callable[[], bool],
    offline_error: Callable[[str, str, str], Exception],
    test_fraction: float = 0.2,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Training/test beats and the record (client) of every training beat."""
    wfdb = _import_wfdb()
    root = Path(str(spec.get("root") or "")).expanduser() if spec.get("root") else None
    if root is None or not (root / "100.hea").is_file():
        if not reachable():  # asked only when the records are not at hand
            raise offline_error(
                "mitbih",
                "PhysioNet (physionet.org)",
                ", or the records (100.hea, 100.dat, 100.atr, ...) in dataset.root",
            )
        from fedimb.core.data.cache import cache_dir

        root = cache_dir() / "mitdb"
        wfdb.dl_database("mitdb", dl_dir=str(root), records=list(RECORDS))
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {
        key: [] for key in ("x_train", "y_train", "x_test", "y_test", "groups_train")
    }
    for client, record in enumerate(RECORDS):
        signal, _ = wfdb.rdsamp(str(root / record), channels=[0])
        annotation = wfdb.rdann(str(root / record), "atr")
        x, y = record_beats(signal[:, 0], annotation.sample, annotation.symbol)
        order = rng.permutation(len(y))
        n_test = int(round(test_fraction * len(y)))
        test, train = order[:n_test], order[n_test:]
        parts["x_train"].append(x[train])
        parts["y_train"].append(y[train])
        parts["x_test"].append(x[test])
        parts["y_test"].append(y[test])
        parts["groups_train"].append(np.full(len(train), client, np.int64))
    return {k: np.concatenate(v) for k, v in parts.items()}
