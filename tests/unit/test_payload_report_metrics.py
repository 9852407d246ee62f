"""Named array payloads, progress events, classification metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedimb.core import events, payload
from fedimb.core.metrics import classification_metrics


# --------------------------------------------------------------------- payload
def test_pack_unpack_round_trip():
    arrays = {
        "protos": np.arange(12, dtype=np.float32).reshape(3, 4),
        "label_counts": np.array([5, 0, 2], dtype=np.int64),
    }
    packed = payload.pack(arrays)
    assert set(packed) == {"array:protos", "array:label_counts"}
    assert all(isinstance(v, bytes) for v in packed.values())
    out = payload.unpack({**packed, "train_loss": 0.5, "note": "x"})
    assert set(out) == {"protos", "label_counts"}
    for name, arr in arrays.items():
        assert out[name].dtype == arr.dtype
        np.testing.assert_array_equal(out[name], arr)


def test_unpack_ignores_non_bytes_and_unprefixed():
    assert payload.unpack({"array:x": "not bytes", "y": b"raw"}) == {}


def test_scalars_skip_bytes_strings_and_bools():
    record = {
        **payload.pack({"a": np.zeros(2)}),
        "loss": 0.25,
        "steps": 3,
        "name": "x",
        "flag": True,
    }
    s = payload.scalars(record)
    assert s == {"loss": 0.25, "steps": 3.0}
    assert all(isinstance(v, float) for v in s.values())


def test_nbytes():
    record = {"ab": b"xyz", "c": "hello", "d": 1.0}
    # 2+3 + 1+5 + 1+8
    assert payload.nbytes(record) == 20


# ---------------------------------------------------------------------- report
def test_format_parse_round_trip():
    line = events.format_event("round", round=3, loss=0.5, recall=[0.1, 0.2], nested={"a": 1})
    assert line.startswith(events.TAG)
    assert "\n" not in line
    event = events.parse_event(line)
    assert event == {
        "event": "round",
        "round": 3,
        "loss": 0.5,
        "recall": [0.1, 0.2],
        "nested": {"a": 1},
    }


def test_nan_and_inf_become_none_and_numpy_scalars_convert():
    line = events.format_event(
        "x",
        a=float("nan"),
        b=[1.0, float("inf")],
        c=np.float32(1.5),
        d=np.int64(4),
        e={"k": np.float64("nan")},
    )
    event = events.parse_event(line)
    assert event == {"event": "x", "a": None, "b": [1.0, None], "c": 1.5, "d": 4, "e": {"k": None}}


def test_parse_event_takes_a_whole_line_only():
    """The ServerApp writes each event as a line of its own: surrounding whitespace is
    fine, anything before the tag (a log record quoting a client's message) is not."""
    line = events.format_event("end", rounds=2)
    assert events.parse_event(f"  {line}\r") == {"event": "end", "rounds": 2}
    assert events.parse_event("INFO :      " + line) is None
    assert events.parse_event("WARNING :   round 1: client 1 failed: ValueError: " + line) is None


@pytest.mark.parametrize(
    "line",
    [
        "",
        "plain log line",
        '{"event": "x"}',
        events.TAG + "{not json",
        events.TAG + '{"no_event": 1}',
        events.TAG + "[1, 2]",
    ],
)
def test_parse_event_rejects(line):
    assert events.parse_event(line) is None


# --------------------------------------------------------------------- metrics
def test_classification_metrics_hand_values():
    m = classification_metrics(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]), 2)
    assert m["accuracy"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx([0.5, 1.0])
    # F1 class 0: P=1, R=0.5 -> 2/3; class 1: P=2/3, R=1 -> 0.8
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)


def test_classification_metrics_absent_class():
    # class 2 absent from y_true but predicted once; class 1 never predicted
    m = classification_metrics(np.array([0, 0, 1]), np.array([0, 2, 0]), 3)
    assert m["accuracy"] == pytest.approx(1 / 3)
    assert m["recall"][0] == pytest.approx(0.5)
    assert m["recall"][1] == 0.0
    assert m["recall"][2] is None
    # F1 class 0: P=1/2, R=1/2 -> 0.5; class 1: 0; class 2 excluded
    assert m["macro_f1"] == pytest.approx(0.25)


def test_classification_metrics_perfect():
    y = np.array([0, 1, 2, 2, 1])
    m = classification_metrics(y, y, 3)
    assert m["accuracy"] == 1.0
    assert m["macro_f1"] == pytest.approx(1.0)
    assert m["recall"] == [1.0, 1.0, 1.0]


def test_classification_metrics_empty():
    m = classification_metrics(np.array([], dtype=int), np.array([], dtype=int), 2)
    assert m["accuracy"] == 0.0
    assert math.isnan(m["macro_f1"])
    assert m["recall"] == [None, None]


def test_events_carry_numpy_arrays_as_lists():
    import numpy as np

    event = events.parse_event(events.format_event("x", a=np.array([1.5, np.nan]), b=np.int64(3)))
    assert event == {"event": "x", "a": [1.5, None], "b": 3}


def test_checkpoint_round_trip(tmp_path):
    from fedimb.app.server import checkpoint

    state = {
        "round": 3,
        "q": 10.5,
        "name": "x",
        "nothing": None,
        "weights": [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], dtype=np.int64)],
        "prototypes": {0: np.ones(3), 7: np.zeros(3)},
        "members": {1, 4, 2},
        "pairs": (1, "a"),
        "nested": {"mediators": [[0, 2], [1]]},
    }
    checkpoint.save(tmp_path / "c.npz", state)
    back = checkpoint.load(tmp_path / "c.npz")
    assert back["round"] == 3 and back["q"] == 10.5 and back["nothing"] is None
    assert back["members"] == {1, 2, 4} and back["pairs"] == (1, "a")
    assert sorted(back["prototypes"]) == [0, 7] and back["nested"] == {"mediators": [[0, 2], [1]]}
    np.testing.assert_array_equal(back["weights"][0], state["weights"][0])
    assert back["weights"][1].dtype == np.int64
