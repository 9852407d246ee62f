"""The crafted-client attacks (fedimb/app/attacks.py): each makes the value the attack
matrix needs, is checked like any fault setting, and the matrix's verdicts follow from
the runs' summaries (benchmarks/attacks.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from flwr.client import NumPyClient
from omegaconf import OmegaConf

from benchmarks.attacks import ROWS, Cell, RunSummary, judge, summarise
from fedimb.app import attacks, config, faults
from fedimb.app.faulty_clients import AttackingClient
from fedimb.core import events, payload, protocol
from fedimb.core.errors import ConfigError

RECEIVED = [
    np.full((2, 3), 1.0, dtype=np.float32),
    np.zeros(3, dtype=np.float32),
    np.array(5, dtype=np.int64),
]
HONEST = [
    np.full((2, 3), 2.0, dtype=np.float32),
    np.ones(3, dtype=np.float32),
    np.array(6, dtype=np.int64),
]
METRICS = {protocol.TRAIN_LOSS: 2.0, protocol.INITIAL_LOSS: 1.5, protocol.LOCAL_STEPS: 4}


def fit(kind: str, variant: str = "", scale: float = 1.0, metrics: dict | None = None):
    return attacks.crafted_fit(
        kind,
        variant or attacks.VARIANTS.get(kind, ("",))[0],
        scale,
        RECEIVED,
        [w.copy() for w in HONEST],
        100,
        dict(metrics or METRICS),
    )


def test_dtype_attacks_change_the_arrays_dtype():
    weights, n, _ = fit("dtype_int64")
    assert [w.dtype for w in weights] == [np.int64] * 3 and n == 1
    weights, n, _ = fit("dtype_float16")
    assert [w.dtype for w in weights] == [np.float16, np.float16, np.int64] and n == 100
    weights, _, _ = fit("dtype_complex")
    assert weights[0].dtype == np.complex64 and np.all(weights[0] == 2.0)


def test_huge_values():
    assert fit("huge_num_examples")[1] == 10**12
    weights = fit("huge_weights")[0]
    assert (
        np.all(weights[0] == np.float32(3e38)) and np.isfinite(weights[0]).all() and weights[2] == 6
    )
    metrics = fit("huge_loss")[2]
    assert metrics[protocol.TRAIN_LOSS] == metrics[protocol.INITIAL_LOSS] == 1e40


def test_loss_skew_scales_the_honest_losses():
    metrics = fit("loss_skew", scale=1.25)[2]
    assert metrics[protocol.TRAIN_LOSS] == 2.5 and metrics[protocol.INITIAL_LOSS] == 1.875
    assert metrics[protocol.LOCAL_STEPS] == 4


def test_sign_flip_is_the_scaled_reflection_of_the_update():
    weights = fit("sign_flip", scale=10.0)[0]
    assert np.all(weights[0] == -9.0)  # 1 - 10 * (2 - 1)
    assert np.all(weights[1] == -10.0) and weights[1].dtype == np.float32
    assert weights[2] == 6  # integer arrays (BatchNorm's counter) are not flipped


def test_latent_mean_one_longer():
    metrics = {**METRICS, **payload.pack({protocol.LATENT_MEAN: np.arange(4, dtype=np.float32)})}
    crafted = payload.unpack(fit("latent_length", metrics=metrics)[2])[protocol.LATENT_MEAN]
    assert crafted.shape == (5,)
    assert fit("latent_length")[2] == METRICS  # a round that asks for no latent: nothing to craft


PROTOTYPES = {
    "prototypes_classes": np.array([0, 3]),
    "prototypes_vectors": np.ones((2, 4), dtype=np.float32),
    "prototypes_counts": np.array([10, 20]),
}


@pytest.mark.parametrize("variant,shape", [("classes", (3,)), ("2d", (2, 2))])
def test_prototype_classes_that_do_not_match_the_vectors(variant, shape):
    arrays = payload.unpack(
        fit("prototype_mismatch", variant, metrics={**METRICS, **payload.pack(PROTOTYPES)})[2]
    )
    assert arrays["prototypes_classes"].shape == shape and arrays["prototypes_vectors"].shape == (
        2,
        4,
    )


def test_prototype_class_count_1e300():
    arrays = payload.unpack(
        fit("prototype_count", metrics={**METRICS, **payload.pack(PROTOTYPES)})[2]
    )
    assert np.all(arrays["prototypes_counts"] == 1e300)


def test_scaffold_control_delta_or_sample_count():
    deltas = payload.pack(
        {
            "control_delta.0": np.zeros((2, 3), dtype=np.float32),
            "control_delta.1": np.zeros(3, dtype=np.float32),
        }
    )
    _, n, metrics = fit("scaffold_huge", "delta", metrics={**METRICS, **deltas})
    arrays = payload.unpack(metrics)
    assert n == 100 and all(
        np.all(a == np.float32(3e38)) and a.dtype == np.float32 for a in arrays.values()
    )
    assert len(arrays) == 2
    _, n, metrics = fit("scaffold_huge", "n", metrics={**METRICS, **deltas})
    assert n == 10**12 and np.all(payload.unpack(metrics)["control_delta.0"] == 0)


PROPS = {
    protocol.PARTITION_ID: 1,
    protocol.NUM_EXAMPLES: 30,
    **payload.pack(
        {
            protocol.LABEL_COUNTS: np.array([10, 20, 0]),
            "label_distribution": np.array([0.3, 0.7, 0.0]),
        }
    ),
}


@pytest.mark.parametrize(
    "variant,check",
    [
        ("shape", lambda c: c.shape == (4,)),
        ("nan", lambda c: np.isnan(c[0]) and c[1] == 20),
        ("huge", lambda c: c[0] == 1e15),
    ],
)
def test_astraea_label_counts(variant, check):
    arrays = payload.unpack(attacks.crafted_properties("astraea_counts", variant, None, PROPS))
    assert check(arrays[protocol.LABEL_COUNTS])
    assert np.array_equal(arrays["label_distribution"], [0.3, 0.7, 0.0])  # only Astraea's payload


def test_missing_label_counts():
    props = attacks.crafted_properties("astraea_counts", "missing", None, PROPS)
    assert protocol.LABEL_COUNTS not in payload.unpack(props) and props[protocol.PARTITION_ID] == 1
    props = attacks.crafted_properties("fedconcat_counts", "missing", None, PROPS)
    assert payload.unpack(props) == {}


def test_fedconcat_distribution_of_the_wrong_shape():
    arrays = payload.unpack(attacks.crafted_properties("fedconcat_counts", "shape", None, PROPS))
    assert arrays["label_distribution"].shape == (4,) and arrays[protocol.LABEL_COUNTS].shape == (
        4,
    )


@pytest.mark.parametrize("claim,expected", [(0, 0), (99, 99), (None, "absent")])
def test_claim_partition(claim, expected):
    props = attacks.crafted_properties("claim_partition", "", claim, PROPS)
    assert (
        props.get(protocol.PARTITION_ID, "absent") == expected
        and props[protocol.NUM_EXAMPLES] == 30
    )


def test_forged_event_message_carries_event_lines():
    lines = attacks.forged_message(1, 2).splitlines()
    forged = [json.loads(line[len(events.TAG) :]) for line in lines if line.startswith(events.TAG)]
    assert [e["event"] for e in forged] == ["round", "artifact"]
    assert forged[0]["test"]["accuracy"] == 0.999 and forged[1]["name"] == "partition"


class Honest(NumPyClient):
    def get_properties(self, config):
        return dict(PROPS)

    def fit(self, parameters, config):
        return [w.copy() for w in HONEST], 100, dict(METRICS)


def fault_cfg(**fields):
    return OmegaConf.create(
        {
            "fault": {
                "kind": "none",
                "clients": [1],
                "rounds": [],
                "hang_seconds": 60,
                "variant": None,
                "scale": None,
                "claim": None,
                **fields,
            }
        }
    )


def test_inject_wraps_the_attacker_only_and_attacks_only_its_rounds():
    cfg = fault_cfg(kind="sign_flip", rounds=[2])
    assert isinstance(faults.inject(cfg, 0, Honest()), Honest)
    client = faults.inject(cfg, 1, Honest())
    assert isinstance(client, AttackingClient) and client.scale == 10.0
    assert np.all(client.fit(RECEIVED, {protocol.SERVER_ROUND: 1})[0][0] == 2.0)
    assert np.all(client.fit(RECEIVED, {protocol.SERVER_ROUND: 2})[0][0] == -9.0)
    with pytest.raises(RuntimeError, match=events.TAG):
        faults.inject(fault_cfg(kind="forged_event"), 1, Honest()).fit(
            RECEIVED, {protocol.SERVER_ROUND: 1}
        )


def test_properties_attack_leaves_fit_alone():
    client = faults.inject(fault_cfg(kind="claim_partition", claim="none"), 1, Honest())
    assert protocol.PARTITION_ID not in client.get_properties({})
    assert np.all(client.fit(RECEIVED, {protocol.SERVER_ROUND: 1})[0][0] == 2.0)


@pytest.mark.parametrize(
    "overrides,words",
    [
        (["fault.kind=nosuch"], "fault.kind must be one of"),
        (
            ["fault.kind=prototype_count"],
            "fault.kind=prototype_count needs method rebafl, got 'fedavg'",
        ),
        (["fault.kind=latent_length"], "fault.kind=latent_length needs normalize=latent_cosine"),
        (
            ["fault.kind=scaffold_huge", "method=scaffold", "fault.variant=big"],
            "fault.variant of fault.kind=scaffold_huge",
        ),
        (
            ["fault.kind=sign_flip", "fault.variant=shape"],
            "fault.variant of fault.kind=sign_flip must be one of none",
        ),
        (["fault.kind=sign_flip", "fault.scale=-1"], "fault.scale must be a finite number > 0"),
        (["fault.kind=claim_partition"], "fault.kind=claim_partition needs fault.claim"),
    ],
)
def test_bad_attack_settings_are_one_line_errors(overrides, words):
    with pytest.raises(ConfigError) as info:
        config.compose(overrides)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_attack_settings_that_make_sense_compose():
    for overrides in (
        ["fault.kind=prototype_count", "method=rebafl"],
        ["fault.kind=latent_length", "normalize=latent_cosine"],
        ["fault.kind=claim_partition", "fault.claim=none"],
        ["fault.kind=astraea_counts", "method=astraea", "fault.variant=huge"],
    ):
        assert config.compose(overrides).fault.kind == overrides[0].split("=")[1]


def test_every_matrix_row_names_an_attack_that_composes():
    for name, row in ROWS.items():
        overrides = [f"method={row.method}", *row.overrides]
        assert config.compose(overrides).fault.kind in attacks.KINDS, name


# ------------------------------------------------------------------ the matrix's verdicts
REFERENCE = RunSummary(exit_code=0, final_accuracy=0.80, best_accuracy=0.80, errors=3)


@pytest.mark.parametrize(
    "attacked,verdict",
    [
        (RunSummary(0, 0.795, 0.80, rejected=3), (True, True, True)),
        (RunSummary(0, 0.78, 0.80, rejected=3), (True, True, False)),  # two points lost
        (
            RunSummary(0, 0.85, 0.85, left_out=1),
            (True, True, True),
        ),  # left out of a plan, trained honestly
        (RunSummary(0, 0.80, 0.80), (True, False, True)),  # accepted: nothing counted
        (RunSummary(0, 0.80, 0.80, refusals=1), (True, True, True)),  # a registry refusal counts
        (RunSummary(2, None, None, message="fedimb: error: the run failed"), (False, False, False)),
    ],
)
def test_judge(attacked, verdict):
    cell = judge("dtype_int64", "in_process", attacked, REFERENCE)
    assert (cell.survived, cell.counted, cell.unharmed) == verdict
    assert cell.reference_accuracy == 0.80


def test_judge_forged_event_needs_a_clean_run_folder():
    clean = RunSummary(0, 0.80, 0.81, errors=3)
    assert judge("forged_event", "simulation", clean, REFERENCE).unharmed
    assert not judge(
        "forged_event", "simulation", RunSummary(0, 0.80, 0.999, errors=3), REFERENCE
    ).unharmed
    forged = RunSummary(0, 0.80, 0.81, errors=3, forged_artifact=True)
    assert not judge("forged_event", "simulation", forged, REFERENCE).unharmed


def test_summarise_a_run_folder(tmp_path):
    rounds = [
        {"event": "round", "round": 0, "test": {"accuracy": 0.1}},
        {
            "event": "round",
            "round": 1,
            "clients": {"succeeded": 2, "rejected": 1, "errors": 0},
            "messages": ["update of client 1 rejected: array 0 is int64"],
        },
        {"event": "round", "round": 2, "clients": {"succeeded": 2, "rejected": 0, "errors": 5}},
        {
            "event": "round",
            "round": 2,
            "clients": {"succeeded": 2, "rejected": 0, "errors": 1},
            "extra": {"clients_left_out": 1},
        },
        {"event": "warning", "message": "node 7 refused: partition 0 is held"},
    ]
    (tmp_path / "events.jsonl").write_text("\n".join(map(json.dumps, rounds)) + "\n{damaged\n")
    (tmp_path / "summary.json").write_text(
        json.dumps({"final_accuracy": 0.7, "best_accuracy": 0.75})
    )
    (tmp_path / "partition.json").write_text(json.dumps({"forged": True}))
    found = summarise(tmp_path, 0, "")
    assert (found.rejected, found.errors, found.left_out, found.refusals) == (
        1,
        1,
        1,
        1,
    )  # round 2's last record
    assert found.final_accuracy == 0.7 and found.forged_artifact
    assert found.message == "update of client 1 rejected: array 0 is int64"
    failed = summarise(None, 2, "Traceback...\nfedimb: error: bad\n")
    assert failed.exit_code == 2 and "fedimb: error: bad" in failed.message


def test_cell_not_measured_is_said():
    from benchmarks.attacks import matrix_lines

    measured = Cell("dtype_int64", "in_process", True, True, False, 0.5, 0.8)
    lines = matrix_lines({("dtype_int64", "in_process"): measured}, [])
    assert any(
        "dtype_int64" in line and "in_process" in line and "**no**" in line for line in lines
    )
    assert any("sign_flip" in line and "not measured" in line for line in lines)
    assert "Not measured yet." in lines


def test_byzantine_table_and_unknown_rules_skipped(tmp_path, capsys):
    from benchmarks.attacks import byzantine, matrix_lines

    assert (
        byzantine(["nosuch"], tmp_path) == []
    )  # nothing is run for a rule the configuration lacks
    assert "aggregation=nosuch: not in this configuration" in capsys.readouterr().out
    flips = [
        {
            "aggregation": "krum (f=1)",
            "sign_flippers": k,
            "exit_code": 0 if k < 2 else 1,
            "final_accuracy": 0.9 - k / 10,
        }
        for k in (0, 1, 2)
    ]
    assert "| krum (f=1) | 0.9000 | 0.8000 | failed |" in matrix_lines({}, flips)
