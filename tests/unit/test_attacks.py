"""The crafted-client attacks (fedimb/app/faults/attacks.py): each makes the value the attack
matrix needs, is checked like any fault setting, and the matrix's verdicts follow from
the runs' summaries (benchmarks/attacks.py)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from flwr.client import NumPyClient
from omegaconf import OmegaConf

from benchmarks.attacks import ROWS, Cell, RunSummary, judge, summarise
from clients.astraea import AstraeaClient
from clients.fedconcat import FedConcatClient
from clients.fednh import FedNHClient
from clients.grpfed import GRPFEDClient
from clients.qffl import QFFLClient
from clients.rebafl import ReBaFLClient
from clients.scaffold import ScaffoldClient
from fedimb.app.configuration import compose as config
from fedimb.app.faults import attacks, omniscient
from fedimb.app.faults import injection as faults
from fedimb.app.faults.clients import AttackingClient, LabelFlippingClient, flipped_labels
from fedimb.app.faults.method_attacks import declaring_methods, method_attacks
from fedimb.app.faults.omniscient import OmniscientServer, OmniscientStrategy
from fedimb.app.server.round_loop import FedImbServer
from fedimb.core import events, payload, protocol
from fedimb.core.data.client_data import ClientData
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


#: the client class that declares each method's own attack
DECLARED = {
    "huge_loss": QFFLClient,
    "loss_skew": GRPFEDClient,
    "prototype_mismatch": ReBaFLClient,
    "prototype_count": ReBaFLClient,
    "prototype_flip": FedNHClient,
    "scaffold_huge": ScaffoldClient,
    "astraea_counts": AstraeaClient,
    "fedconcat_counts": FedConcatClient,
}


def own(kind: str):
    return DECLARED[kind].attacks[kind] if kind in DECLARED else None


def fit(kind: str, variant: str = "", scale: float = 1.0, metrics: dict | None = None):
    attack = own(kind)
    return attacks.crafted_fit(
        kind,
        variant or (attack.variants[0] if attack else ""),
        scale,
        RECEIVED,
        [w.copy() for w in HONEST],
        100,
        dict(metrics or METRICS),
        attack,
    )


def properties(kind: str, variant: str, claim=None) -> dict:
    return attacks.crafted_properties(kind, variant, claim, PROPS, own(kind))


def test_every_method_attack_is_declared_by_the_methods_it_names():
    declared = declaring_methods()
    assert set(declared) == set(DECLARED)
    assert declared["loss_skew"] == ["afl", "grpfed", "qffl"]
    assert declared["scaffold_huge"] == ["scaffold"]
    assert not set(declared) & set(attacks.KINDS)  # a kind means one thing


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


def test_fednh_class_means_sign_flipped():
    means = np.array([[0.6, -0.8], [0.0, 0.0]], dtype=np.float32)
    honest = {**METRICS, **payload.pack({"feature_means": means, "class_counts": np.array([3, 0])})}
    arrays = payload.unpack(fit("prototype_flip", metrics=honest)[2])
    np.testing.assert_array_equal(arrays["feature_means"], -means)
    np.testing.assert_array_equal(arrays["class_counts"], [3, 0])  # counts as they were


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
    arrays = payload.unpack(properties("astraea_counts", variant))
    assert check(arrays[protocol.LABEL_COUNTS])
    assert np.array_equal(arrays["label_distribution"], [0.3, 0.7, 0.0])  # only Astraea's payload


def test_missing_label_counts():
    props = properties("astraea_counts", "missing")
    assert protocol.LABEL_COUNTS not in payload.unpack(props) and props[protocol.PARTITION_ID] == 1
    props = properties("fedconcat_counts", "missing")
    assert payload.unpack(props) == {}


def test_fedconcat_distribution_of_the_wrong_shape():
    arrays = payload.unpack(properties("fedconcat_counts", "shape"))
    assert arrays["label_distribution"].shape == (4,) and arrays[protocol.LABEL_COUNTS].shape == (
        4,
    )


@pytest.mark.parametrize("claim,expected", [(0, 0), (99, 99), (None, "absent")])
def test_claim_partition(claim, expected):
    props = properties("claim_partition", "", claim)
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
        cfg = config.compose(overrides)
        assert cfg.fault.kind in attacks.KINDS or cfg.fault.kind in method_attacks(cfg), name


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


# -------------------------------------------- label flipping, ALIE and IPM (Byzantine-robust)
Z_5_1 = 0.2533471031357997  # Φ⁻¹(0.6): n = 5 updates, f = 1 attacker, s = ⌊3.5⌋ − 1 = 2


def test_alie_z_max_is_the_papers():
    from scipy.stats import norm

    assert omniscient.alie_z(5, 1) == pytest.approx(norm.ppf(0.6), abs=1e-12)
    assert omniscient.alie_z(5, 1) == pytest.approx(Z_5_1, abs=1e-6)
    assert omniscient.alie_z(3, 1) == pytest.approx(norm.ppf(2 / 3), abs=1e-12)  # s = 1
    assert omniscient.alie_z(4, 1) == 0.0  # s = 2: (4 − 2)/4 = 0.5
    assert omniscient.alie_z(10, 2) == pytest.approx(Z_5_1, abs=1e-12)  # s = 6 − 2: Φ⁻¹(6/10)
    for n, f in ((3, 2), (4, 3), (5, 0)):  # attackers a majority, or none
        with pytest.raises(ValueError, match="set fault.scale"):
            omniscient.alie_z(n, f)


#: four honest updates of two arrays each, made by hand
HONEST_UPDATES = [
    [np.array([1.0, 10.0]), np.array([[0.0]])],
    [np.array([2.0, 20.0]), np.array([[2.0]])],
    [np.array([3.0, 30.0]), np.array([[4.0]])],
    [np.array([4.0, 40.0]), np.array([[6.0]])],
]


def test_alie_update_is_mean_minus_z_std():
    crafted = omniscient.alie_update(HONEST_UPDATES, num_attackers=1)  # n = 5: z = Φ⁻¹(0.6)
    s = np.sqrt(5 / 3)  # sample std of 1, 2, 3, 4 (squared deviations 2.25 + .25 + .25 + 2.25)
    np.testing.assert_allclose(crafted[0], [2.5 - Z_5_1 * s, 25.0 - Z_5_1 * 10 * s], atol=1e-6)
    np.testing.assert_allclose(crafted[1], [[3.0 - Z_5_1 * np.sqrt(20 / 3)]], atol=1e-6)
    assert crafted[1].shape == (1, 1)
    fixed = omniscient.alie_update(HONEST_UPDATES, num_attackers=1, z=2.0)  # fault.scale
    np.testing.assert_allclose(fixed[0], [2.5 - 2 * s, 25.0 - 20 * s], atol=1e-12)
    alone = omniscient.alie_update(HONEST_UPDATES[:1], num_attackers=1)  # σ of one update: 0
    np.testing.assert_array_equal(alone[0], [1.0, 10.0])


def test_ipm_update_is_minus_epsilon_times_the_mean():
    crafted = omniscient.ipm_update(HONEST_UPDATES, 0.1)
    np.testing.assert_allclose(crafted[0], [-0.25, -2.5], atol=1e-12)
    np.testing.assert_allclose(crafted[1], [[-0.3]], atol=1e-12)
    np.testing.assert_allclose(
        omniscient.ipm_update([[np.array([1.0, 2.0])], [np.array([3.0, -4.0])]], 10.0)[0],
        [-20.0, 10.0],
    )


def test_the_label_flip_map():
    assert list(flipped_labels(np.arange(10), 10)) == list(range(9, -1, -1))
    assert list(flipped_labels(np.array([0, 2, 1]), 3)) == [2, 0, 1]
    y = np.array([4, 0, 3, 3])
    assert np.array_equal(flipped_labels(flipped_labels(y, 5), 5), y)  # an involution
    assert flipped_labels(torch.tensor([0, 1]), 2).tolist() == [1, 0]


class HoldsData(NumPyClient):
    """A client with ClientData whose properties answer counts its data as a method would:
    from the counts it was given (the base client) and from its labels (Astraea's plan)."""

    def __init__(self, data: ClientData):
        self.data = data

    def get_properties(self, config):
        from_labels = np.bincount(self.data.y[self.data.indices].numpy(), minlength=3)
        return {
            protocol.PARTITION_ID: 1,
            **payload.pack(
                {protocol.LABEL_COUNTS: self.data.label_counts, "from_labels": from_labels}
            ),
        }


def test_label_flipping_client_trains_on_flipped_labels_and_reports_the_real_counts():
    y = torch.tensor([0, 0, 1, 2, 2, 2, 1])
    data = ClientData(
        partition_id=1,
        x=torch.zeros(7, 2),
        y=y,
        indices=torch.tensor([0, 1, 2, 3, 4]),
        num_classes=3,
        label_counts=np.array([2, 1, 2]),
        test_indices=torch.tensor([5, 6]),
    )
    inner = HoldsData(data)
    client = faults.inject(fault_cfg(kind="label_flip"), 1, inner)
    assert isinstance(client, LabelFlippingClient) and client.inner is inner
    assert inner.data.y.tolist() == [2, 2, 1, 0, 0, 2, 1]  # the local test split keeps its own
    assert y.tolist() == [0, 0, 1, 2, 2, 2, 1]  # the shared labels tensor is not touched
    assert list(inner.data.label_counts) == [2, 1, 2][::-1]  # counts of the flipped labels
    props = client.get_properties({})
    assert list(payload.unpack(props)[protocol.LABEL_COUNTS]) == [2, 1, 2]  # the real ones
    assert props[protocol.PARTITION_ID] == 1
    with pytest.raises(TypeError, match="needs a client that holds its data as ClientData"):
        faults.inject(fault_cfg(kind="label_flip"), 1, Honest())


def test_label_flip_reports_counts_computed_from_the_labels_unflipped():
    """A method that counts its (flipped) labels itself, as Astraea's plan does: the
    answer is still the real data's."""
    data = ClientData(1, torch.zeros(4, 1), torch.tensor([0, 0, 0, 1]), torch.arange(4), 3, None)
    inner = HoldsData(dataclasses.replace(data, label_counts=np.array([3, 1, 0])))
    client = LabelFlippingClient(inner, "label_flip", 1, frozenset())
    arrays = payload.unpack(client.get_properties({}))
    assert list(inner.data.y) == [2, 2, 2, 1]
    assert list(arrays[protocol.LABEL_COUNTS]) == [3, 1, 0]


def honest_factory(cfg, context, pid, clock=None):
    return Honest()


def test_the_omniscient_attacks_wrap_the_server_only():
    for kind in ("alie", "ipm"):
        cfg = fault_cfg(kind=kind)
        assert faults.server_class(cfg) is OmniscientServer
        assert faults.client_factory(cfg, honest_factory) is honest_factory
        assert isinstance(faults.inject(cfg, 1, Honest()), Honest)  # the attacker trains honestly
    assert faults.server_class(fault_cfg(kind="label_flip")) is FedImbServer
    assert faults.server_class(fault_cfg(kind="sign_flip")) is FedImbServer


class Registry:
    def partition_of(self, proxy):
        return int(proxy.cid)


class Log:
    def __init__(self):
        self.messages = []

    def note(self, message):
        self.messages.append(message)


class StubStrategy:
    """What :class:`OmniscientStrategy` reads of a method's strategy, and what reached it."""

    def __init__(self, sent):
        self.registry = Registry()
        self.sent_models = sent
        self.round_log = Log()
        self.received = None

    def aggregate_fit(self, server_round, results, failures):
        self.received = results
        return None, {}


class Proxy:
    def __init__(self, pid):
        self.cid = str(pid)


SENT = [np.full(2, 1.0, dtype=np.float32), np.array(7, dtype=np.int64)]


def reply(pid: int, weights, n: int = 10, metrics=None):
    from flwr.common import Code, FitRes, Status, ndarrays_to_parameters

    return Proxy(pid), FitRes(
        Status(Code.OK, "ok"), ndarrays_to_parameters(weights), n, dict(metrics or {"m": pid})
    )


def omniscient_round(kind: str, replies, scale=None, rounds=(), server_round=1):
    stub = StubStrategy({pid: SENT for pid in range(5)})
    fault = OmegaConf.create(
        {"kind": kind, "clients": [1, 3], "rounds": list(rounds), "scale": scale}
    )
    OmniscientStrategy(stub, fault).aggregate_fit(server_round, replies, [])
    return stub, {int(p.cid): r for p, r in stub.received}


def honest_replies():
    return [
        reply(0, [np.array([2.0, 3.0], dtype=np.float32), np.array(8)]),  # update (1, 2)
        reply(1, [np.array([9.0, 9.0], dtype=np.float32), np.array(9)], n=33, metrics={"x": 1}),
        reply(2, [np.array([4.0, -1.0], dtype=np.float32), np.array(8)]),  # update (3, -2)
        reply(3, [np.array([5.0, 5.0], dtype=np.float32), np.array(9)], n=44),
        reply(4, [np.zeros(3, dtype=np.float32), np.array(8)]),  # another layout: left out
    ]


def test_omniscient_attackers_replies_are_replaced_by_the_crafted_models():
    from flwr.common import parameters_to_ndarrays

    replies = honest_replies()
    stub, got = omniscient_round("ipm", replies)  # ε = 0.1; honest mean (2, 0)
    for pid in (1, 3):
        weights = parameters_to_ndarrays(got[pid].parameters)
        np.testing.assert_allclose(weights[0], [1.0 - 0.2, 1.0], atol=1e-7)
        assert weights[0].dtype == np.float32 and weights[1] == 9  # its own integer array
    assert (got[1].num_examples, got[1].metrics, got[3].num_examples) == (33, {"x": 1}, 44)
    assert all(got[pid] is replies[pid][1] for pid in (0, 2, 4))  # the others as they came
    # ALIE from the same two honest updates: n = 4, f = 2, s = 4 // 2 + 1 − 2 = 1, z = Φ⁻¹(3/4)
    _, got = omniscient_round("alie", honest_replies())
    from scipy.stats import norm

    std = np.array([np.sqrt(2), np.sqrt(8)])  # sample std of (1, 3) and (2, −2)
    expected = 1.0 + np.array([2.0, 0.0]) - norm.ppf(0.75) * std
    np.testing.assert_allclose(parameters_to_ndarrays(got[3].parameters)[0], expected, atol=1e-6)


def test_omniscient_attack_keeps_its_rounds_and_needs_an_honest_update():
    from flwr.common import parameters_to_ndarrays

    replies = honest_replies()
    _, got = omniscient_round("ipm", replies, rounds=[2], server_round=1)
    assert got[1] is replies[1][1]  # not an attack round: as it came
    _, got = omniscient_round("ipm", replies, scale=10.0, rounds=[2], server_round=2)
    np.testing.assert_allclose(parameters_to_ndarrays(got[1].parameters)[0], [-19.0, 1.0])
    stub, got = omniscient_round("alie", [replies[1], replies[3], replies[4]])
    assert got[1] is replies[1][1] and "no honest update" in stub.round_log.messages[0]


def test_an_alie_run_sends_the_crafted_model_to_the_strategy(monkeypatch):
    """Digits, 5 clients, client 1 attacking with ALIE in process: what reaches the method's
    strategy from client 1 is μ − z·σ of the four honest updates of the round, z = Φ⁻¹(0.6)."""
    from flwr.common import parameters_to_ndarrays

    from fedimb.app.runtimes.in_process import InProcessFederation

    fed = InProcessFederation(
        [
            "dataset=digits",
            "num_clients=5",
            "num_rounds=2",
            "runtime=in_process",
            "partition=iid",
            "dropout=none",
            "train.local_epochs=1",
            "fault.kind=alie",
            "fault.clients=[1]",
        ]
    )
    assert isinstance(fed.server, OmniscientServer)
    method_strategy = fed.strategy.inner
    aggregate, seen = method_strategy.aggregate_fit, {}

    def recorded(server_round, results, failures):
        seen[server_round] = (list(results), dict(method_strategy.sent_models))
        return aggregate(server_round, results, failures)

    monkeypatch.setattr(method_strategy, "aggregate_fit", recorded)
    for server_round in (1, 2):
        record = fed.round(server_round)
        assert record["clients"]["succeeded"] == 5 and record["clients"]["rejected"] == 0
        results, sent = seen[server_round]
        by_pid = {
            fed.strategy.registry.partition_of(p): (r, parameters_to_ndarrays(r.parameters))
            for p, r in results
        }
        assert sorted(by_pid) == [0, 1, 2, 3, 4]
        honest = np.stack(
            [np.concatenate([w.ravel() for w in by_pid[pid][1]]) for pid in (0, 2, 3, 4)]
        ).astype(np.float64)
        received = np.concatenate([w.ravel() for w in sent[1]]).astype(np.float64)
        update = honest - received
        expected = received + update.mean(axis=0) - Z_5_1 * update.std(axis=0, ddof=1)
        attacker, weights = by_pid[1]
        got = np.concatenate([w.ravel() for w in weights]).astype(np.float64)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
        assert not np.allclose(got, honest.mean(axis=0), atol=1e-6)  # not an honest model
        assert attacker.num_examples == int(fed.run.client_label_counts(1).sum())


@pytest.mark.parametrize(
    "overrides,words",
    [
        (
            ["fault.kind=label_flip", "fault.clients=[1]", "fault.rounds=[2]"],
            "fault.kind=label_flip poisons the attackers' labels in every round",
        ),
        (
            ["fault.kind=label_flip", "fault.clients=[1]", "fault.scale=2"],
            "leave fault.rounds empty and fault.scale null",
        ),
        (
            ["fault.kind=alie", "num_clients=3", "fault.clients=[0,1]"],
            "fault.kind=alie: z_max needs the attackers a minority, got 2 of 3 clients",
        ),
        (["fault.kind=alie", "fault.variant=x"], "fault.variant of fault.kind=alie"),
        (["fault.kind=ipm", "fault.scale=0"], "fault.scale must be a finite number > 0"),
    ],
)
def test_bad_byzantine_attack_settings_are_one_line_errors(overrides, words):
    with pytest.raises(ConfigError) as info:
        config.compose(overrides)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_byzantine_attack_settings_that_make_sense_compose():
    for overrides in (
        ["fault.kind=label_flip", "fault.clients=[1]"],
        ["fault.kind=alie", "num_clients=3", "fault.clients=[1]"],
        ["fault.kind=alie", "num_clients=3", "fault.clients=[0,1]", "fault.scale=1.5"],
        ["fault.kind=ipm", "fault.clients=[1,2]", "fault.scale=10"],
    ):
        assert config.compose(overrides).fault.kind == overrides[0].split("=")[1]
    assert attacks.DEFAULT_SCALE["ipm"] == omniscient.IPM_EPSILON == 0.1


def test_a_label_flipping_client_of_a_run_trains_as_on_flipped_data():
    """Digits in process, client 1 flipping: it trains exactly as the method's client does
    on labels flipped by hand, not as on its own, and answers with its real label counts."""
    from flwr.common import parameters_to_ndarrays

    from fedimb.app.nodes.client_app import make_client
    from fedimb.app.runtimes.in_process import InProcessFederation

    fed = InProcessFederation(
        [
            "dataset=digits",
            "num_clients=3",
            "num_rounds=1",
            "partition=iid",
            "dropout=none",
            "train.local_epochs=1",
            "fault.kind=label_flip",
            "fault.clients=[1]",
        ]
    )
    node = fed.nodes[1]
    attacker, honest = fed.client(node), make_client(fed.cfg, node.context, 1)
    assert isinstance(attacker, LabelFlippingClient)
    by_hand = make_client(fed.cfg, node.context, 1)
    y = by_hand.data.y.clone()
    y[by_hand.data.indices] = by_hand.data.num_classes - 1 - y[by_hand.data.indices]
    by_hand.data = dataclasses.replace(by_hand.data, y=y)
    real = payload.unpack(honest.get_properties({}))[protocol.LABEL_COUNTS]
    assert np.array_equal(payload.unpack(attacker.get_properties({}))[protocol.LABEL_COUNTS], real)
    assert np.array_equal(real, fed.run.client_label_counts(1))
    fed.strategy.begin_round(1)
    parameters, fit_config = parameters_to_ndarrays(fed.parameters), fed.strategy.fit_config(1)
    flipped, n, _ = attacker.fit(parameters, fit_config)
    expected, _, _ = by_hand.fit(parameters, fit_config)
    own, n_own, _ = honest.fit(parameters, fit_config)
    assert n == n_own == int(real.sum())
    for a, b in zip(flipped, expected):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert not all(np.allclose(a, b, atol=1e-4) for a, b in zip(flipped, own))
